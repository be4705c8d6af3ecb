//! The `wgmma` matmul template (sm_90a; [`MmaEngine::Wgmma`] tiles of `mma`).
//!
//! A block of `bm / 64` warpgroups computes a `bm x bn` output tile; warpgroup `wg` owns rows
//! `64 wg ..` and all `bn` columns as one m64nN accumulator (`bn / 2` f32 registers per thread, in
//! the m16n8 layout of `mma.sync`: warp `w` of the group holds rows `16 w ..`, so the epilogue of
//! `mma` serves both). Along k the block walks 64-deep steps through a ring of `stages`
//! shared-memory buffers, each operand tile stored as 64-column blocks of 128-byte rows with
//! 16-byte chunks swizzled by the row (`sinter_swz128`), the layout `wgmma` reads through a
//! descriptor with 128-byte swizzle:
//!
//! * A k-major (`[bm][64]`): stride between 8-row groups 1024 bytes, a k16 slice 32 bytes along
//!   the row, warpgroup `wg` 8192 bytes further;
//! * B k-major (`[bn][64]`, a transposed right operand such as `x @ w^T`): the same;
//! * B N-major (`[64][bn]`, a row-major right operand): `bn / 64` blocks of 64 k-rows, leading
//!   offset 8192 bytes between them, stride 1024 bytes between 8-row groups, 2048 bytes per k16.
//!
//! # Pipeline
//!
//! Every thread copies with 16-byte `cp.async` (zero-filled past the edges). Step `kt`:
//! wait for step `kt`'s copies, `fence.proxy.async` (the copies become visible to the tensor
//! cores' proxy), a barrier, queue the copy of step `kt + stages - 2` into the buffer step
//! `kt - 2` used, then issue the four k16 products of step `kt` and wait until at most one group
//! (step `kt`'s) is in flight. The barrier is what retires a buffer: every warpgroup passed its
//! wait for step `kt - 2` before arriving at step `kt`'s barrier, so the buffer it read can be
//! overwritten; one product group stays in flight across the barrier while the next copies land.
//! Copies run `stages - 2` steps ahead.
//!
//! Requires both operands in the vector (`cp.async`) plan and A k-major (a transposed A would
//! need the descriptor's transpose bit: not yet); otherwise the `mma.sync` tiles serve.
//!
//! Measured on an H100 (bf16 8192^3, `SINTER_CUDA_LIBRARY=0`, 2026-11-25): 192x128 with three
//! warpgroups and four stages 1.80 ms (604 TFLOP/s, 77% of cuBLASLt's 1.39 ms in the same call;
//! the `mma.sync` template 3.40), 128x256 2.04 ms. What is missing for the rest: TMA loads and a
//! producer warp (the copies are issued by the warps that also wait on the products, and every
//! step has a block-wide barrier): the `mma_tma` template ([`MmaEngine::WgmmaTma`]).

use sinter_core::DType;
use sinter_core::kernel::MatmulBody;

use super::emit::Emitter;
use super::matmul::{address, emit_operand_bases, lit, op_ity, tile_blocks};
use super::mma::{Elem, Frag, Loader, MmaEngine, MmaTile, OpPlan, emit_block_order, epilogue, plans};
use super::prelude::{H, wgmma_name};
use super::{Body, CudaCaps, GridSplit, OuterUnit, RenderError, Tuning};

/// Shared bytes of one stage: both operand tiles, unpadded.
fn stage_bytes(t: &MmaTile) -> u32 {
    (t.bm + t.bn) * t.bk * 2
}

/// Dynamic shared bytes of the tile: `stages` stages plus 1024 bytes of slack for aligning the
/// base to the swizzle period.
fn total_shared(t: &MmaTile) -> u64 {
    u64::from(stage_bytes(t)) * u64::from(t.stages) + 1024
}

/// Checks a [`MmaEngine::Wgmma`] tile for `mm` on this device; `Err` says why it does not fit.
pub(super) fn check(t: &MmaTile, caps: &CudaCaps, mm: &MatmulBody) -> Result<(), String> {
    debug_assert_eq!(t.engine, MmaEngine::Wgmma);
    if caps.sm != (9, 0) {
        return Err(format!("sm_{}{} has no wgmma (sm_90a only)", caps.sm.0, caps.sm.1));
    }
    let MmaTile { bm, bn, bk, warps_m, warps_n, stages, .. } = *t;
    if bk != 64 {
        return Err(format!("tile {t:?}: wgmma tiles take k steps of 64 (one 128-byte swizzle row)"));
    }
    if bm == 0 || !bm.is_multiple_of(64) || warps_m != bm / 64 || warps_n != 4 || warps_m > 4 {
        return Err(format!("tile {t:?}: bm a multiple of 64 up to 256, one warpgroup (4 warps) per 64 rows"));
    }
    if bn == 0 || !bn.is_multiple_of(64) || bn > 256 {
        return Err(format!("tile {t:?}: bn a multiple of 64 up to 256 (one wgmma instruction's N)"));
    }
    if !(3..=8).contains(&stages) {
        return Err(format!("tile {t:?}: 3 to 8 stages (copies run stages - 2 steps ahead)"));
    }
    let (pa, pb) = plans(mm);
    if pa.elem != Elem::Half {
        return Err(format!("{} operands (wgmma tiles take bf16/f16; TF32 runs on mma.sync)", mm.in_dtype));
    }
    if pa.loader != Loader::Vector || pb.loader != Loader::Vector {
        return Err(
            "operands not in the 16-byte cp.async layout (odd strides or offsets, or an implicit im2col view)".into()
        );
    }
    if !pa.kmajor {
        return Err("A is not k-major (a transposed A needs the descriptor's transpose bit)".into());
    }
    super::mma::fits_device(t, caps, total_shared(t))
}

/// Renders `mm` with the (checked) `wgmma` tile `tile`.
pub(super) fn render(em: &mut Emitter<'_>, mm: &MatmulBody, t: &Tuning, tile: &MmaTile) -> Result<Body, RenderError> {
    let threads = tile.threads();
    let (batch, m, n, kd) = super::mma::launch_extents(em, mm, t, tile)?;
    let MmaTile { bm, bn, bk, stages, .. } = *tile;
    let (tiles_m, tiles_n) = (m.div_ceil(u64::from(bm)), n.div_ceil(u64::from(bn)));
    let blocks = tile_blocks(mm, bm, bn);
    if blocks > i32::MAX as u64 {
        return Err(em.err(format!("{blocks} blocks exceed the grid limit")));
    }
    let (pa, pb) = plans(mm);
    let stage = stage_bytes(tile);
    let shared = total_shared(tile);
    let groups = bm / 64;
    let strategy = format!("wgmma {bm}x{bn}x{bk} g{groups} s{stages}");
    let summary = format!(
        "tensor-core matmul batch {batch} x m {m} x n {n} x k {kd} ({} -> f32, wgmma m64n{bn}k16), tile {bm}x{bn}x{bk}, \
         {groups} warpgroups of 64x{bn}, {stages} stages ({shared} bytes), A k-major, B {}, {blocks} blocks",
        mm.in_dtype,
        if pb.kmajor { "k-major" } else { "n-major" },
    );
    let body = match Body::launch(blocks, threads, strategy, summary, Some(1), shared as u32) {
        // Batches are outermost; inside one the tile order is swizzled (no prefix of rows).
        Ok(b) if batch > 1 => {
            b.with_split(GridSplit { unit: OuterUnit::MatmulBatch, per: 1, inner: tiles_m * tiles_n })
        }
        Ok(b) => b,
        Err(empty) => return Ok(*empty),
    };
    let f16 = mm.in_dtype == DType::F16;
    let trans_b = !pb.kmajor;
    em.h.need(H::Mma); // cp.async
    em.h.need(H::Wgmma);
    em.h.need(H::WgmmaMma { n: bn, rs: false, trans_b, f16 });
    em.line(format!("// {}", body.summary));
    em.line("extern __shared__ __align__(1024) unsigned char smem[];");
    emit_block_order(em, "blockIdx.x", (tiles_m, tiles_n), (bm, bn));
    em.line("const unsigned wg = warp / 4u; // the warpgroup: rows 64 wg .. of the tile");
    emit_operand_bases(em, mm);
    em.line("const unsigned s_base = ((unsigned)__cvta_generic_to_shared(smem) + 1023u) & ~1023u;");
    let a_bytes = bm * bk * 2;
    em.line(format!("// stage s: A at s * {stage}, B at s * {stage} + {a_bytes} (bytes)"));
    let nj = bn / 8;
    em.line(format!("float acc[{nj}][4];"));
    em.line("#pragma unroll");
    em.open(format!("for (unsigned j = 0; j < {nj}u; ++j)"));
    em.line("acc[j][0] = 0.0f; acc[j][1] = 0.0f; acc[j][2] = 0.0f; acc[j][3] = 0.0f;");
    em.close();
    let ktiles = kd.div_ceil(u64::from(bk));
    let ahead = stages - 2;
    em.line(format!("// prologue: the first {ahead} steps in flight"));
    em.line("#pragma unroll");
    em.open(format!("for (unsigned s = 0; s < {ahead}u; ++s)"));
    em.open(format!("if (s < {ktiles}u)"));
    load_stage(em, mm, tile, (pa, pb), "s", "s");
    em.close();
    em.line("sinter_cp_async_commit();");
    em.close();
    em.line("#pragma unroll 1");
    em.open(format!("for (unsigned kt = 0; kt < {ktiles}u; ++kt)"));
    em.line(format!("sinter_cp_async_wait<{}>(); // this thread's copies of step kt landed", ahead - 1));
    em.line("sinter_fence_async_shared();");
    em.line("__syncthreads(); // step kt visible to every warpgroup; all are done with step kt - 2's buffer");
    em.open("");
    em.line(format!("const unsigned nk = kt + {ahead}u;"));
    em.open(format!("if (nk < {ktiles}u)"));
    load_stage(em, mm, tile, (pa, pb), &format!("nk % {stages}u"), "nk");
    em.close();
    em.line("sinter_cp_async_commit();");
    em.close();
    em.line(format!("const unsigned sa = s_base + kt % {stages}u * {stage}u + wg * 8192u;"));
    em.line(format!("const unsigned sb = s_base + kt % {stages}u * {stage}u + {a_bytes}u;"));
    em.line(format!("sinter_reg_fence<{nj}>(acc);"));
    em.line("sinter_wgmma_fence();");
    let bstep = emit_operand_descs(em, trans_b);
    em.line("#pragma unroll");
    em.open(format!("for (unsigned kk = 0; kk < {}u; ++kk)", bk / 16));
    em.line(format!(
        "{}(acc, sinter_wgmma_desc_add(desc_a, kk * 32u), sinter_wgmma_desc_add(desc_b, kk * {bstep}u), 1);",
        wgmma_name(bn, false, trans_b, f16)
    ));
    em.close();
    em.line("sinter_wgmma_commit();");
    em.line("sinter_wgmma_wait<1>(); // step kt - 1's products done; step kt's stay in flight");
    em.line(format!("sinter_reg_fence<{nj}>(acc);"));
    em.close();
    em.line("sinter_wgmma_wait<0>();");
    em.line(format!("sinter_reg_fence<{nj}>(acc);"));
    em.line("sinter_cp_async_wait<0>();");
    let frag = Frag {
        mi: 1,
        nj,
        row0: "m0 + wg * 64u + warp % 4u * 16u".into(),
        row_step: 16,
        col0: "n0".into(),
        acc: "acc[{j}][h * 2u + {c}]".into(),
    };
    epilogue(em, mm, (bm, bn), &frag)?;
    Ok(body)
}

/// Emits the `wgmma` shared-memory descriptors of a k-step's operands, `desc_a` of the A tile at
/// `sa` (K-major, 128-byte swizzled rows) and `desc_b` of the B tile at `sb` (K-major, or N-major
/// when `trans_b`: 64-column blocks of 64 k-rows 8192 bytes apart), and returns how far `desc_b`
/// moves per k16 slice (bytes; the A descriptor moves 32).
pub(super) fn emit_operand_descs(em: &mut Emitter<'_>, trans_b: bool) -> u32 {
    let (bdesc, bstep) = if trans_b {
        // N-major: 64-column blocks of 64 k-rows (8192 bytes apart), 16 k-rows per k16 slice.
        ("sinter_wgmma_desc(sb, 8192u, 1024u)", 2048)
    } else {
        ("sinter_wgmma_desc(sb, 16u, 1024u)", 32)
    };
    em.line("const unsigned long long desc_a = sinter_wgmma_desc(sa, 16u, 1024u);");
    em.line(format!("const unsigned long long desc_b = {bdesc};"));
    bstep
}

/// Copies step `kstep` (k offset `kstep * 64`) of both operands into stage `slot`, swizzled.
fn load_stage(em: &mut Emitter<'_>, mm: &MatmulBody, t: &MmaTile, (pa, pb): (OpPlan, OpPlan), slot: &str, kstep: &str) {
    let threads = t.threads();
    let stage = stage_bytes(t);
    let a_bytes = t.bm * t.bk * 2;
    em.open("");
    em.line(format!("const unsigned k0 = {kstep} * {}u;", t.bk));
    em.line(format!("const unsigned st = s_base + {slot} * {stage}u;"));
    for (which, op, plan) in [("a", &mm.a, pa), ("b", &mm.b, pb)] {
        let (rows, ext, origin, s_r, s_k) =
            if which == "a" { (t.bm, mm.m, "m0", op.s_row, op.s_col) } else { (t.bn, mm.n, "n0", op.s_col, op.s_row) };
        let dst = if which == "a" { "st".to_string() } else { format!("st + {a_bytes}u") };
        let oty = op_ity(em, op);
        let units = rows * t.bk / 8;
        let iters = units.div_ceil(threads);
        // Shared tile rows (`sr`) and 8-element column chunk (`sc`) of copy `e`: k-major tiles are
        // `[rows][64]`, the N-major B tile `[64][rows]`.
        let (srows, cols) = if plan.kmajor { (rows, t.bk) } else { (t.bk, rows) };
        em.line(format!(
            "// {} tile: {srows} x {cols} elements ({}), {units} 16-byte copies over {threads} threads",
            which.to_uppercase(),
            if plan.kmajor { "k-major" } else { "n-major" }
        ));
        em.line("#pragma unroll");
        em.open(format!("for (unsigned l = 0; l < {iters}u; ++l)"));
        em.line(format!("const unsigned e = tid + l * {threads}u;"));
        if !units.is_multiple_of(threads) {
            em.open(format!("if (e < {units}u)"));
        }
        em.line(format!("const unsigned sr = e / {}u, sc = e % {}u * 8u;", cols / 8, cols / 8));
        let (gr, gk) = if plan.kmajor { ("sr", "sc") } else { ("sc", "sr") };
        em.line(format!("const unsigned gr = {origin} + {gr}; // {}", if which == "a" { "m" } else { "n" }));
        em.line(format!("const unsigned gk = k0 + {gk};"));
        let addr = address(oty, &format!("{which}_base"), ("gr", s_r), ("gk", s_k));
        let (cv, ce, ov, oe) = if plan.kmajor { ("gk", mm.k, "gr", ext) } else { ("gr", ext, "gk", mm.k) };
        em.line(format!("const unsigned valid = {ov} < {oe}u && {cv} < {ce}u ? min({ce}u - {cv}, 8u) * 2u : 0u;"));
        em.line(format!("const {oty} off = valid ? {addr} : {};", lit(oty, 0)));
        em.line(format!("sinter_cp_async16({dst} + sinter_swz128(sr, sc, {srows}u), &a{}[off], valid);", op.arg));
        if !units.is_multiple_of(threads) {
            em.close();
        }
        em.close();
    }
    em.close();
}
