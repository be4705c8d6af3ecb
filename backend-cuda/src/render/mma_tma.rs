//! The TMA-fed, warp-specialized `wgmma` matmul template (sm_90a; [`MmaEngine::WgmmaTma`] tiles
//! of `mma`).
//!
//! A block is `warps_m` consumer warpgroups (`C`, each owning `bm / C` rows, 64 or 128, of a
//! `bm x bn` tile as one or two m64nN accumulators) and one producer warpgroup (the last). The
//! block is persistent: `min(tiles, SMs)` blocks walk the tiles `blockIdx.x, + gridDim.x, ...`
//! in the grouped order of `mma` (batch outermost), so the producer fills the next tile's stages
//! while the consumers run the previous tile's epilogue.
//!
//! Shared memory: `stages` slots, each the A tile (`[bm][64]`) then the B tile, in the 128-byte
//! swizzled layout of `mma_wgmma` (k-major tiles as 128-byte rows; an N-major B as `bn / 64`
//! blocks of 64 k-rows, 8192 bytes apart), then `2 stages` `mbarrier`s: `full[s]` and
//! `empty[s]`.
//!
//! # Copies
//!
//! One producer thread issues per k step one bulk tensor copy of the A box (`64 x bm`), one of
//! the B box (`64 x bn`, k-major) or `bn / 64` of `64 x 64` (N-major), through tensor maps
//! encoded on the host ([`crate::tma`]: the `Rendered::tensor_maps` of this kernel, A first) with
//! 128-byte swizzle, the layout above. The maps hold the operands' true extents, so boxes past
//! M, N or K read zeros, and the copies count the whole box's bytes all the same; an N-major B
//! box wholly past N is not issued (its columns are never stored) and not counted.
//!
//! # Barriers: phases and parities
//!
//! Every role walks the same sequence of k steps, tile after tile; step `it` (counted across
//! tiles) uses slot `it % stages` and phase `it / stages` of its barriers, tracked as
//! `(slot, phase)` with `phase` the parity.
//!
//! * `full[s]` counts 1 arrival (the producer's `arrive.expect_tx` of the step's bytes) plus
//!   those bytes (the copies' `complete_tx`); its phase `q` completes when step
//!   `q stages + s` has landed. Consumers wait on parity `phase`.
//! * `empty[s]` counts `4 C` arrivals, one per consumer warp after `wgmma.wait_group` has retired
//!   the products that read the slot; its phase `q` completes when step `q stages + s` is no
//!   longer read. The producer waits on parity `phase ^ 1` before refilling: for the first
//!   `stages` steps that is the phase before a fresh barrier's first, which counts as completed,
//!   so the ring starts empty.
//! * No barrier runs two phases ahead of a waiter: the producer refills slot `s` only after every
//!   consumer warp released the step before in that slot, which it did only after waiting for
//!   it; so a parity never names the wrong phase.
//! * No wait is left without its completion: each tile has `ceil(K / 64) >= 1` steps (K = 0 is
//!   refused); the producer issues exactly those, each completing `full` with the bytes it
//!   expected (partial boxes count whole, skipped boxes are neither issued nor expected); each
//!   consumer warp releases exactly those (the step before after each product group, the last
//!   after `wait_group 0`).
//! * A wait longer than about 2^34 cycles traps (`sinter_mbar_wait_or_trap`): a broken invariant is a
//!   launch error, not a hung GPU.
//!
//! The unit test `barrier_protocol_never_hangs_nor_reads_stale_slots` models this protocol (PTX
//! `mbarrier` semantics, copies landing in any order, every consumer warp) under random
//! interleavings for short and long K, several tiles per block, one and two consumer groups.
//!
//! # Products
//!
//! Per step a consumer waits on `full`, issues the four k16 products (per 64-row accumulator),
//! commits them as one group and waits until at most that group is in flight (the previous
//! step's is done, so its slot is released); two groups are in flight while the next step
//! issues. The epilogue is `mma`'s, on the accumulators in the m16n8 layout (warp `w` of a group
//! holds rows `16 w ..` of each m64 block).
//!
//! # Registers
//!
//! `__launch_bounds__(threads, 1)` caps registers at entry; the producer warpgroup lowers its own
//! to 40 (`setmaxnreg.dec`), the consumers raise theirs to what is left (232 for two consumer
//! groups, at most 240).
//!
//! Requires 16-bit operands, A k-major, both operands contiguous along their inner dimension with
//! 16-byte-aligned origins and outer strides (the tensor map rules), and every box inside its
//! operand (M >= bm, K >= 64, N >= bn for a k-major B, N >= 64 for an N-major one: a box larger
//! than its tensor is reported to fault); refuses otherwise by name (`check`).
//!
//! # Clusters of two ([`MmaEngine::WgmmaTmaCluster`])
//!
//! The kernel carries `__cluster_dims__(2, 1, 1)`; a cluster walks pairs of tiles along m
//! (`2 bm x bn`, block `rank` taking rows `rank bm ..`; a block wholly past m computes zeros and
//! stores nothing), `min(pairs, SMs / 2)` clusters. Each producer copies its own A box and half of
//! the pair's B tile (a k-major B as a `bn / 2`-row box, an N-major one as every other 64-column
//! box) into both blocks' shared memory at the same address, completing on both blocks' `full`
//! barrier (each expects the whole stage's bytes; a peer's bytes landing before the local
//! `expect_tx` leave the count negative until it comes, which PTX allows, and the phase cannot
//! complete before that arrival). `empty[s]` counts the consumer warps of both blocks: each warp
//! releases a slot on its own block's barrier and, through `mapa`, on its peer's, since either
//! producer writes into both; so no producer refills a slot a warp of either block still reads,
//! and no copy of the next phase lands before the current phase completed in both blocks. A
//! cluster barrier follows the barrier initialization (both blocks' barriers exist before either
//! copies or arrives) and precedes the exit (no block leaves while its peer may still arrive on
//! its barriers). The peer's release uses `mbarrier.arrive` with its default CTA-scope release,
//! as CUTLASS's cluster pipelines do: with `.release.cluster` the tiles ran at 530 instead of 735
//! TFLOP/s (H200, BENCHMARKS.md session 14).
//!
//! Measured on an H200 at 8192^3 bf16 (session 14): 128x256 three stages 714-733 TFLOP/s on one
//! block, 721-737 on clusters of two, cuBLAS 763-788 in the same calls; the tensor pipe is busy
//! 85-86% of the time (cuBLAS 97%): both consumer warpgroups run each tile's epilogue together.

use sinter_core::DType;
use sinter_core::kernel::{MatOperand, MatmulBody};

use super::emit::Emitter;
use super::matmul::tile_blocks;
use super::mma::{Elem, Frag, MmaEngine, MmaTile, emit_tile_origin, epilogue, plans};
use super::mma_wgmma::emit_operand_descs;
use super::prelude::{H, wgmma_name};
use super::{Body, CudaCaps, RenderError, Tuning};
use crate::tma::{TensorMapDesc, TensorMapParam, TmaElem, TmaSwizzle};

/// Registers per thread the producer warpgroup keeps (`setmaxnreg.dec`).
const PRODUCER_REGS: u32 = 40;

/// Registers per thread a consumer must keep beyond its accumulators (addresses, epilogue).
const CONSUMER_SPARE_REGS: u32 = 80;

/// Shared bytes of one stage: both operand tiles.
fn stage_bytes(t: &MmaTile) -> u32 {
    (t.bm + t.bn) * t.bk * 2
}

/// Dynamic shared bytes: the stages, two 8-byte barriers per stage, 1024 bytes of slack for
/// aligning the base to the swizzle period.
fn total_shared(t: &MmaTile) -> u64 {
    u64::from(stage_bytes(t)) * u64::from(t.stages) + 16 * u64::from(t.stages) + 1024
}

/// Registers per consumer thread after `setmaxnreg.inc`: the register file (64K) less the
/// producer's, shared by the consumer warpgroups, in multiples of 8, at most 240.
fn consumer_regs(t: &MmaTile) -> u32 {
    ((65536 / 128 - PRODUCER_REGS) / t.warps_m.max(1) / 8 * 8).min(240)
}

/// The tensor maps of A and B (in that order) for tile `t`, or why an operand cannot be copied
/// by TMA.
pub(super) fn operand_maps(mm: &MatmulBody, t: &MmaTile) -> Result<Vec<TensorMapParam>, String> {
    let elem = match mm.in_dtype {
        DType::BF16 => TmaElem::Bf16,
        DType::F16 => TmaElem::F16,
        d => return Err(format!("{d} operands (TMA tiles take bf16/f16)")),
    };
    let (m, n, k) = (mm.m as u64, mm.n as u64, mm.k as u64);
    let (a, b) = (&mm.a, &mm.b);
    if a.s_col != 1 {
        return Err("A is not k-major (a transposed A needs the descriptor's transpose bit)".into());
    }
    let a_map = map_of(a, "A", elem, mm.batch, (k, a.s_col), (m, a.s_row), (t.bk, t.bm))?;
    let b_map = if b_kmajor(mm) {
        // A cluster's blocks copy half of the shared B tile each (`bn / 2` rows of it).
        let rows = if t.engine == MmaEngine::WgmmaTmaCluster { t.bn / 2 } else { t.bn };
        map_of(b, "B", elem, mm.batch, (k, b.s_row), (n, b.s_col), (t.bk, rows))?
    } else {
        map_of(b, "B", elem, mm.batch, (n, b.s_col), (k, b.s_row), (64, t.bk))?
    };
    Ok(vec![a_map, b_map])
}

/// Whether B (`k x n`) is copied k-major (k contiguous: `x @ w^T`), else N-major.
fn b_kmajor(mm: &MatmulBody) -> bool {
    mm.b.s_row == 1 && (mm.b.s_col != 1 || mm.n == 1)
}

/// The map of operand `op` (`name` in refusals): `inner` and `outer` (extent, element stride),
/// the inner dimension contiguous, batches a third dimension where they are not broadcast.
fn map_of(
    op: &MatOperand,
    name: &str,
    elem: TmaElem,
    batch: usize,
    inner: (u64, usize),
    outer: (u64, usize),
    (box_inner, box_outer): (u32, u32),
) -> Result<TensorMapParam, String> {
    if op.im2col.is_some() {
        return Err(format!("{name} is an implicit im2col view (no tensor map)"));
    }
    // A box larger than its tensor makes an invalid map that faults when copied (reported by
    // users of the copy engine; the driver's documentation does not say): such a product is
    // smaller than the tile, which other tiles serve better anyway.
    if u64::from(box_inner) > inner.0 || u64::from(box_outer) > outer.0 {
        return Err(format!(
            "{name} ({} x {}) is smaller than a {box_inner} x {box_outer} box (a box must fit inside its tensor)",
            inner.0, outer.0
        ));
    }
    let bytes = elem.bytes();
    if inner.1 != 1 {
        return Err(format!("{name} is not contiguous along its inner dimension (stride {})", inner.1));
    }
    let offset_bytes = op.offset as u64 * bytes;
    if !offset_bytes.is_multiple_of(16) {
        return Err(format!("{name} starts {} elements in: not 16-byte aligned", op.offset));
    }
    let stride = |s: usize, what: &str| -> Result<u64, String> {
        let sb = s as u64 * bytes;
        if sb == 0 || !sb.is_multiple_of(16) {
            Err(format!("{name}'s {what} stride of {s} elements is not a nonzero multiple of 16 bytes"))
        } else {
            Ok(sb)
        }
    };
    let mut desc = TensorMapDesc {
        elem,
        dims: vec![inner.0, outer.0],
        strides: vec![stride(outer.1, "row")?],
        boxes: vec![box_inner, box_outer],
        swizzle: TmaSwizzle::B128,
    };
    if batch > 1 && op.s_batch != 0 {
        desc.dims.push(batch as u64);
        desc.strides.push(stride(op.s_batch, "batch")?);
        desc.boxes.push(1);
    }
    desc.validate().map_err(|e| format!("{name}'s tensor map: {e}"))?;
    Ok(TensorMapParam { arg: op.arg, offset_bytes, desc })
}

/// Checks a [`MmaEngine::WgmmaTma`] tile for `mm` on this device; `Err` says why it does not fit.
pub(super) fn check(t: &MmaTile, caps: &CudaCaps, mm: &MatmulBody) -> Result<(), String> {
    debug_assert!(t.engine.tma());
    if caps.sm != (9, 0) {
        return Err(format!("sm_{}{} has no wgmma and setmaxnreg (sm_90a only)", caps.sm.0, caps.sm.1));
    }
    if t.engine == MmaEngine::WgmmaTmaCluster && caps.sm_count < 2 {
        return Err(format!("tile {t:?}: a cluster of two blocks needs two SMs ({} here)", caps.sm_count));
    }
    let MmaTile { bm, bn, bk, warps_m: consumers, warps_n, stages, .. } = *t;
    if bk != 64 {
        return Err(format!("tile {t:?}: TMA tiles take k steps of 64 (one 128-byte swizzle row)"));
    }
    if warps_n != 4 || !(1..=3).contains(&consumers) {
        return Err(format!("tile {t:?}: 1 to 3 consumer warpgroups (warps_m) of 4 warps (warps_n)"));
    }
    let rows = bm / consumers;
    if bm % consumers != 0 || !matches!(rows, 64 | 128) {
        return Err(format!("tile {t:?}: each consumer warpgroup takes 64 or 128 rows"));
    }
    if bn == 0 || !bn.is_multiple_of(64) || bn > 256 {
        return Err(format!("tile {t:?}: bn a multiple of 64 up to 256 (one wgmma instruction's N)"));
    }
    let (acc, regs) = (rows / 64 * bn / 2, consumer_regs(t));
    if acc + CONSUMER_SPARE_REGS > regs {
        return Err(format!(
            "tile {t:?}: {acc} accumulator registers per consumer thread leave fewer than \
             {CONSUMER_SPARE_REGS} of its {regs}"
        ));
    }
    if !(2..=8).contains(&stages) {
        return Err(format!("tile {t:?}: 2 to 8 stages"));
    }
    let (pa, _) = plans(mm);
    if pa.elem != Elem::Half {
        return Err(format!("{} operands (wgmma tiles take bf16/f16; TF32 runs on mma.sync)", mm.in_dtype));
    }
    operand_maps(mm, t)?;
    super::mma::fits_device(t, caps, total_shared(t))
}

/// Renders `mm` with the (checked) TMA tile `tile`.
pub(super) fn render(
    em: &mut Emitter<'_>,
    mm: &MatmulBody,
    caps: &CudaCaps,
    t: &Tuning,
    tile: &MmaTile,
) -> Result<Body, RenderError> {
    let threads = tile.threads();
    let (batch, m, n, kd) = super::mma::launch_extents(em, mm, t, tile)?;
    let MmaTile { bm, bn, bk, stages, warps_m: consumers, .. } = *tile;
    let mw = bm / consumers / 64;
    // Clusters of two blocks walk pairs of tiles along m (`2 bm x bn`), the block of rank r taking
    // rows `r bm ..` of the pair; one block walks single tiles.
    let cluster = tile.engine == MmaEngine::WgmmaTmaCluster;
    let per = if cluster { 2 } else { 1 };
    let (tiles_m, tiles_n) = (m.div_ceil(u64::from(per * bm)), n.div_ceil(u64::from(bn)));
    let tiles = tile_blocks(mm, per * bm, bn);
    if tiles > i32::MAX as u64 {
        return Err(em.err(format!("{tiles} tiles exceed the grid limit")));
    }
    let clusters = u64::from(caps.sm_count.max(per) / per);
    let blocks = tiles.min(clusters) * u64::from(per);
    let maps = operand_maps(mm, tile).map_err(|e| em.err(e))?;
    let kmajor_b = b_kmajor(mm);
    let batched = |p: &TensorMapParam| p.desc.dims.len() == 3;
    let (batched_a, batched_b) = (batched(&maps[0]), batched(&maps[1]));
    let stage = stage_bytes(tile);
    let shared = total_shared(tile);
    let a_bytes = bm * bk * 2;
    let regs = consumer_regs(tile);
    let strategy =
        format!("wgmma-tma {bm}x{bn}x{bk} c{consumers} s{stages}{}", if cluster { " cluster 2" } else { "" });
    let summary = format!(
        "tensor-core matmul batch {batch} x m {m} x n {n} x k {kd} ({} -> f32, wgmma m64n{bn}k16), tile {bm}x{bn}x{bk}, \
         {consumers} consumer warpgroups of {}x{bn} and a TMA producer, {stages} stages ({shared} bytes), A k-major, \
         B {}, {tiles} {}tiles over {blocks} persistent blocks{}",
        mm.in_dtype,
        bm / consumers,
        if kmajor_b { "k-major" } else { "n-major" },
        if cluster { "pairs of " } else { "" },
        if cluster { " in clusters of two sharing B (multicast)" } else { "" },
    );
    let body = match Body::launch(blocks, threads, strategy, summary, Some(1), shared as u32) {
        Ok(b) if cluster => b.with_tensor_maps(maps).with_cluster(2),
        Ok(b) => b.with_tensor_maps(maps),
        Err(empty) => return Ok(*empty),
    };
    let f16 = mm.in_dtype == DType::F16;
    let trans_b = !kmajor_b;
    em.h.need(H::WgmmaDesc);
    em.h.need(H::Tma);
    em.h.need(H::WgmmaMma { n: bn, rs: false, trans_b, f16 });
    if cluster {
        em.h.need(H::Cluster);
    }
    let ktiles = kd.div_ceil(u64::from(bk));
    let nj = bn / 8;
    em.line(format!("// {}", body.summary));
    em.line("extern __shared__ __align__(1024) unsigned char smem[];");
    em.line("const unsigned tid = threadIdx.x;");
    em.line("const unsigned lane = tid % 32u;");
    em.line("const unsigned warp = tid / 32u;");
    em.line(format!("const unsigned wg = warp / 4u; // consumer warpgroups 0..{consumers}, the producer {consumers}"));
    em.line("const unsigned s_base = ((unsigned)__cvta_generic_to_shared(smem) + 1023u) & ~1023u;");
    em.line(format!("// slot s: A at s * {stage}, B at s * {stage} + {a_bytes} (bytes)"));
    em.line(format!(
        "const unsigned bars = s_base + {}u; // full[s] at bars + 8 s, empty[s] at bars + 8 ({stages} + s)",
        stage * stages
    ));
    em.open("if (tid == 0u)");
    em.open(format!("for (unsigned s = 0; s < {stages}u; ++s)"));
    em.line("sinter_mbar_init(bars + 8u * s, 1u); // the producer's arrival, then the copies' bytes");
    if cluster {
        em.line(format!(
            "sinter_mbar_init(bars + 8u * ({stages}u + s), {}u); // one arrival per consumer warp of both blocks",
            8 * consumers
        ));
    } else {
        em.line(format!(
            "sinter_mbar_init(bars + 8u * ({stages}u + s), {}u); // one arrival per consumer warp",
            4 * consumers
        ));
    }
    em.close();
    em.line("sinter_mbar_fence_init();");
    em.close();
    let (tile_loop, mrow) = if cluster {
        em.line("sinter_cluster_sync(); // both blocks' barriers initialized before either copies or arrives");
        em.line("const unsigned rank = sinter_cluster_rank();");
        (format!("for (unsigned pid = blockIdx.x / 2u; pid < {tiles}u; pid += gridDim.x / 2u)"), "mr")
    } else {
        em.line("__syncthreads();");
        (format!("for (unsigned pid = blockIdx.x; pid < {tiles}u; pid += gridDim.x)"), "m0")
    };
    // The first row of this block's tile (`mr`: its half of the cluster's pair).
    let origin = |em: &mut Emitter<'_>| {
        emit_tile_origin(em, (tiles_m, tiles_n), (per * bm, bn));
        if cluster {
            em.line(format!("const unsigned mr = m0 + rank * {bm}u;"));
        }
    };
    let advance = format!("if (++slot == {stages}u) {{ slot = 0u; phase ^= 1u; }}");

    // ---- producer
    em.open(format!("if (wg == {consumers}u)"));
    em.line(format!("sinter_setmaxnreg_dec<{PRODUCER_REGS}>();"));
    em.open(format!("if (tid == {}u)", consumers * 128));
    em.line("sinter_tma_prefetch(&tm0);");
    em.line("sinter_tma_prefetch(&tm1);");
    em.line("unsigned slot = 0u, phase = 0u;");
    em.line("#pragma unroll 1");
    em.open(&tile_loop);
    origin(em);
    let nb = bn / 64;
    if kmajor_b {
        em.line(format!("const unsigned tx = {}u; // both boxes, whole", stage));
    } else {
        em.line(format!("const unsigned nb = min({nb}u, ({n}u - n0 + 63u) / 64u); // B boxes not wholly past n = {n}"));
        em.line(format!("const unsigned tx = {a_bytes}u + nb * 8192u;"));
    }
    em.line("#pragma unroll 1");
    em.open(format!("for (unsigned kt = 0; kt < {ktiles}u; ++kt)"));
    em.line(format!(
        "sinter_mbar_wait_or_trap(bars + 8u * ({stages}u + slot), phase ^ 1u); // the consumers let the slot go"
    ));
    em.line("const unsigned full = bars + 8u * slot;");
    em.line("sinter_mbar_expect_tx(full, tx);");
    em.line(format!("const unsigned st = s_base + slot * {stage}u;"));
    em.line(format!("const int k0 = (int)(kt * {bk}u);"));
    let load = |batched: bool, map: &str, dst: &str, c0: &str, c1: &str, multicast: bool| {
        let (rank, c2) = if batched { (3, "(int)batch") } else { (2, "0") };
        if multicast {
            format!("sinter_tma_load_multicast<{rank}>({dst}, &{map}, {c0}, {c1}, {c2}, full, (unsigned short)3u);")
        } else {
            format!("sinter_tma_load<{rank}>({dst}, &{map}, {c0}, {c1}, {c2}, full);")
        }
    };
    em.line(load(batched_a, "tm0", "st", "k0", &format!("(int){mrow}"), false));
    if kmajor_b && cluster {
        em.line(format!("// this block's half of the pair's B tile ({} rows), into both blocks", bn / 2));
        let dst = format!("st + {a_bytes}u + rank * {}u", bn / 2 * 128);
        em.line(load(batched_b, "tm1", &dst, "k0", &format!("(int)(n0 + rank * {}u)", bn / 2), true));
    } else if kmajor_b {
        em.line(load(batched_b, "tm1", &format!("st + {a_bytes}u"), "k0", "(int)n0", false));
    } else {
        em.line("#pragma unroll");
        em.open(format!("for (unsigned j = 0; j < {nb}u; ++j)"));
        let dst = format!("st + {a_bytes}u + j * 8192u");
        if cluster {
            em.line("// this block's boxes of the pair's B tile, into both blocks");
            em.open("if (j < nb && j % 2u == rank)");
        } else {
            em.open("if (j < nb)");
        }
        em.line(load(batched_b, "tm1", &dst, "(int)(n0 + j * 64u)", "k0", cluster));
        em.close();
        em.close();
    }
    em.line(&advance);
    em.close();
    em.close();
    em.close();

    // ---- consumers
    em.close();
    em.open("else");
    em.line(format!("sinter_setmaxnreg_inc<{regs}>();"));
    em.line(format!("float acc[{mw}][{nj}][4];"));
    em.line("unsigned slot = 0u, phase = 0u;");
    em.line("#pragma unroll 1");
    em.open(&tile_loop);
    origin(em);
    em.line("#pragma unroll");
    em.open(format!("for (unsigned i = 0; i < {mw}u; ++i)"));
    em.line("#pragma unroll");
    em.open(format!("for (unsigned j = 0; j < {nj}u; ++j)"));
    em.line("acc[i][j][0] = 0.0f; acc[i][j][1] = 0.0f; acc[i][j][2] = 0.0f; acc[i][j][3] = 0.0f;");
    em.close();
    em.close();
    let fences: Vec<String> = (0..mw).map(|i| format!("sinter_reg_fence<{nj}>(acc[{i}]);")).collect();
    let fences = fences.join(" ");
    em.line("unsigned prev = 0u;");
    em.line("#pragma unroll 1");
    em.open(format!("for (unsigned kt = 0; kt < {ktiles}u; ++kt)"));
    em.line("sinter_mbar_wait_or_trap(bars + 8u * slot, phase); // step kt's copies landed");
    em.line(format!("const unsigned sa = s_base + slot * {stage}u + wg * {}u;", mw * 8192));
    em.line(format!("const unsigned sb = s_base + slot * {stage}u + {a_bytes}u;"));
    em.line(&fences);
    em.line("sinter_wgmma_fence();");
    let bstep = emit_operand_descs(em, trans_b);
    em.line("#pragma unroll");
    em.open(format!("for (unsigned kk = 0; kk < {}u; ++kk)", bk / 16));
    for i in 0..mw {
        em.line(format!(
            "{}(acc[{i}], sinter_wgmma_desc_add(desc_a, {}u + kk * 32u), sinter_wgmma_desc_add(desc_b, kk * {bstep}u), 1);",
            wgmma_name(bn, false, trans_b, f16),
            i * 8192
        ));
    }
    em.close();
    em.line("sinter_wgmma_commit();");
    em.line("sinter_wgmma_wait<1>(); // step kt - 1's products done; step kt's stay in flight");
    em.line(&fences);
    let release = |slot: &str| {
        if cluster {
            format!(
                "{{ sinter_mbar_arrive(bars + 8u * ({stages}u + {slot})); \
                 sinter_mbar_arrive_cluster(bars + 8u * ({stages}u + {slot}), rank ^ 1u); }}"
            )
        } else {
            format!("sinter_mbar_arrive(bars + 8u * ({stages}u + {slot}));")
        }
    };
    em.line(format!("if (kt > 0u && lane == 0u) {} // its slot is free (in both blocks)", release("prev")));
    em.line("prev = slot;");
    em.line(&advance);
    em.close();
    em.line("sinter_wgmma_wait<0>();");
    em.line(&fences);
    em.line(format!("if (lane == 0u) {} // the tile's last step", release("prev")));
    let frag = Frag {
        mi: mw,
        nj,
        row0: format!("{mrow} + wg * {}u + warp % 4u * 16u", mw * 64),
        row_step: 64,
        col0: "n0".into(),
        acc: "acc[i][{j}][h * 2u + {c}]".into(),
    };
    // A cluster's pair spans 2 bm rows: where m is a multiple of bm but not of 2 bm, the second
    // block of the last pair lies wholly past m and must store nothing, so its rows are guarded.
    epilogue(em, mm, (per * bm, bn), &frag)?;
    em.close();
    em.close();
    if cluster {
        em.line("sinter_cluster_sync(); // no block exits while its peer may still arrive on its barriers");
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sinter_core::kernel::MatOperand;

    fn operand(arg: usize, offset: usize, s_batch: usize, s_row: usize, s_col: usize) -> MatOperand {
        MatOperand { arg, offset, s_batch, s_row, s_col, im2col: None }
    }

    fn matmul(batch: usize, m: usize, n: usize, k: usize, a: MatOperand, b: MatOperand) -> MatmulBody {
        MatmulBody {
            batch,
            m,
            n,
            k,
            a,
            b,
            in_dtype: DType::BF16,
            acc_dtype: DType::F32,
            tf32: false,
            stores: Vec::new(),
        }
    }

    /// The maps of `[2, 300, 72] @ [2, 72, 200]` (B N-major) and of `x @ w^T` with a broadcast
    /// weight (B k-major): extents innermost first, byte strides, boxes, swizzle.
    #[test]
    fn operand_maps_describe_extents_strides_and_boxes() {
        let t = MmaTile::wgmma_tma(128, 256, 2, 4);
        let mm = matmul(2, 300, 200, 72, operand(0, 0, 300 * 72, 72, 1), operand(1, 0, 72 * 200, 200, 1));
        let maps = operand_maps(&mm, &t).unwrap();
        let a = &maps[0];
        assert_eq!((a.arg, a.offset_bytes), (0, 0));
        assert_eq!(a.desc.elem, TmaElem::Bf16);
        assert_eq!(a.desc.dims, [72, 300, 2]);
        assert_eq!(a.desc.strides, [144, 300 * 72 * 2]);
        assert_eq!(a.desc.boxes, [64, 128, 1]);
        assert_eq!(a.desc.swizzle, TmaSwizzle::B128);
        assert_eq!(a.desc.box_bytes(), 128 * 128);
        let b = &maps[1];
        assert_eq!(b.arg, 1);
        assert_eq!(b.desc.dims, [200, 72, 2]);
        assert_eq!(b.desc.strides, [400, 72 * 200 * 2]);
        assert_eq!(b.desc.boxes, [64, 64, 1]);
        assert_eq!(b.desc.box_bytes(), 8192);

        // x [1000, 64] @ w^T with w [512, 64] shared by the batches, A at an offset of 8 elements.
        let mm = matmul(3, 1000, 512, 64, operand(0, 8, 1000 * 64, 64, 1), operand(1, 0, 0, 1, 64));
        let maps = operand_maps(&mm, &t).unwrap();
        assert_eq!(maps[0].offset_bytes, 16);
        assert_eq!(maps[0].desc.dims, [64, 1000, 3]);
        assert_eq!(maps[1].desc.dims, [64, 512]);
        assert_eq!(maps[1].desc.strides, [128]);
        assert_eq!(maps[1].desc.boxes, [64, 256]);
    }

    #[test]
    fn operands_tma_cannot_copy_are_refused_by_name() {
        let t = MmaTile::wgmma_tma(128, 256, 2, 4);
        let refuse = |a: MatOperand, b: MatOperand| operand_maps(&matmul(1, 128, 256, 72, a, b), &t).unwrap_err();
        let (a, b) = (operand(0, 0, 0, 72, 1), operand(1, 0, 0, 64, 1));
        assert!(refuse(operand(0, 0, 0, 1, 64), b.clone()).contains("A is not k-major"));
        assert!(refuse(operand(0, 4, 0, 72, 1), b.clone()).contains("not 16-byte aligned"));
        assert!(refuse(operand(0, 0, 0, 76, 1), b.clone()).contains("row stride of 76 elements"));
        assert!(refuse(a.clone(), operand(1, 0, 0, 68, 1)).contains("B's row stride"));
        assert!(refuse(a, operand(1, 0, 0, 2, 1)).contains("B's row stride of 2"));
        // Boxes must fit inside the operands: M below the tile's rows, K below a step, N below
        // the tile's columns for a k-major B (an N-major B takes 64 columns a box).
        let small = |m: usize, n: usize, k: usize, b: MatOperand| {
            operand_maps(&matmul(1, m, n, k, operand(0, 0, 0, k, 1), b), &t).map(|_| ())
        };
        let e = small(100, 256, 72, operand(1, 0, 0, 256, 1)).unwrap_err();
        assert!(e.contains("A (72 x 100) is smaller than a 64 x 128 box"), "{e}");
        let e = small(128, 256, 48, operand(1, 0, 0, 256, 1)).unwrap_err();
        assert!(e.contains("A (48 x 128)"), "{e}");
        let e = small(128, 200, 72, operand(1, 0, 0, 1, 72)).unwrap_err();
        assert!(e.contains("B (72 x 200) is smaller than a 64 x 256 box"), "{e}");
        assert_eq!(small(128, 200, 72, operand(1, 0, 0, 200, 1)), Ok(()));
    }

    /// An `mbarrier` as PTX defines it: arrivals pending, transaction bytes pending, phases
    /// completed.
    struct Bar {
        count: u32,
        pending: u32,
        tx: i64,
        done: u32,
    }

    impl Bar {
        fn new(count: u32) -> Bar {
            Bar { count, pending: count, tx: 0, done: 0 }
        }
        fn settle(&mut self) {
            if self.pending == 0 && self.tx == 0 {
                self.done += 1;
                self.pending = self.count;
            }
        }
        fn arrive(&mut self, expect: i64) {
            self.tx += expect;
            self.pending -= 1;
            self.settle();
        }
        fn complete_tx(&mut self, bytes: i64) {
            self.tx -= bytes;
            self.settle();
        }
        /// `try_wait.parity`: the phase of this parity, current or the one before, completed.
        fn passed(&self, parity: u32) -> bool {
            self.done % 2 != parity
        }
    }

    /// The ring protocol of the module doc, modelled step by step under a pseudo-random
    /// interleaving of the producers, the copy engine and every consumer warp of one block or of a
    /// cluster of two (A copied into its own block, each block's half of B into both): each
    /// consumer wait ends, every step reads the data of that step in every piece, no slot is
    /// refilled while a warp of any block still reads it, and nothing is left pending (for K
    /// below, at and above the ring's depth, several tiles per block).
    #[test]
    fn barrier_protocol_never_hangs_nor_reads_stale_slots() {
        let mut seed = 0x2545f4914f6cdd1du64;
        let mut rand = move |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        };
        for cluster in 1..=2usize {
            for stages in 2..=5u32 {
                for ktiles in 1..=7u32 {
                    for tiles in 1..=3u32 {
                        for consumers in 1..=2u32 {
                            let what = format!(
                                "cluster {cluster} stages {stages} ktiles {ktiles} tiles {tiles} consumers {consumers}"
                            );
                            protocol_run(&mut rand, cluster, stages, ktiles * tiles, ktiles, 4 * consumers, &what);
                        }
                    }
                }
            }
        }
    }

    /// One random interleaving of [`barrier_protocol_never_hangs_nor_reads_stale_slots`]: `cluster`
    /// blocks of `warps` consumer warps, `steps` k steps of which every `ktiles`-th ends a tile.
    fn protocol_run(
        rand: &mut impl FnMut(usize) -> usize,
        cluster: usize,
        stages: u32,
        steps: u32,
        ktiles: u32,
        warps: u32,
        what: &str,
    ) {
        let s = stages as usize;
        // Pieces of a slot: A (its own block's copy), then B's part copied by each block.
        let pieces = 1 + cluster;
        let mut full: Vec<Vec<Bar>> = (0..cluster).map(|_| (0..s).map(|_| Bar::new(1)).collect()).collect();
        let mut empty: Vec<Vec<Bar>> =
            (0..cluster).map(|_| (0..s).map(|_| Bar::new(warps * cluster as u32)).collect()).collect();
        // Per block and slot: the step each piece holds; the warps reading the slot.
        let mut tag = vec![vec![vec![u32::MAX; pieces]; s]; cluster];
        let mut readers = vec![vec![0u32; s]; cluster];
        let mut copies: Vec<(usize, usize, usize, u32)> = Vec::new(); // (block, slot, piece, step) in flight
        let mut producer = vec![0u32; cluster]; // next step each producer issues
        // Per block and warp: next step to wait for, the step whose products are in flight.
        let mut warp: Vec<Vec<(u32, Option<u32>)>> = vec![vec![(0, None); warps as usize]; cluster];
        let roles = 2 + warps as usize;
        let mut idle = 0;
        while idle < 20_000 {
            idle += 1;
            let who = rand(cluster * roles);
            let (b, role) = (who / roles, who % roles);
            if role == 0 && producer[b] < steps {
                let step = producer[b];
                let (slot, phase) = ((step % stages) as usize, step / stages % 2);
                if empty[b][slot].passed(phase ^ 1) {
                    for (d, r) in readers.iter().enumerate() {
                        assert_eq!(r[slot], 0, "{what}: slot {slot} of block {d} refilled while read");
                    }
                    full[b][slot].arrive(pieces as i64);
                    copies.push((b, slot, 0, step));
                    for d in 0..cluster {
                        copies.push((d, slot, 1 + b, step));
                    }
                    producer[b] += 1;
                    idle = 0;
                }
            } else if role == 1 && !copies.is_empty() {
                // The copy engine lands one box, in any order, on its destination block's barrier.
                let (d, slot, piece, step) = copies.swap_remove(rand(copies.len()));
                tag[d][slot][piece] = step;
                full[d][slot].complete_tx(1);
                idle = 0;
            } else if role >= 2 {
                let w = &mut warp[b][role - 2];
                // A warp's release arrives on the slot's `empty` barrier of every block.
                let release = |step: u32, empty: &mut Vec<Vec<Bar>>, readers: &mut Vec<Vec<u32>>| {
                    let slot = (step % stages) as usize;
                    readers[b][slot] -= 1;
                    for e in empty.iter_mut() {
                        e[slot].arrive(0);
                    }
                };
                if w.0 < steps {
                    let (slot, phase) = ((w.0 % stages) as usize, w.0 / stages % 2);
                    if full[b][slot].passed(phase) {
                        assert!(tag[b][slot].iter().all(|&t| t == w.0), "{what}: step {} read a stale slot", w.0);
                        readers[b][slot] += 1;
                        // wait_group 1: the previous step's products are done.
                        if let Some(prev) = w.1.take() {
                            release(prev, &mut empty, &mut readers);
                        }
                        w.1 = Some(w.0);
                        w.0 += 1;
                        // The tile's last step: wait_group 0, then release it.
                        if w.0.is_multiple_of(ktiles) {
                            release(w.0 - 1, &mut empty, &mut readers);
                            w.1 = None;
                        }
                        idle = 0;
                    }
                }
            }
        }
        assert!(producer.iter().all(|&p| p == steps), "{what}: a producer hung");
        assert!(warp.iter().flatten().all(|w| w.0 == steps && w.1.is_none()), "{what}: a consumer hung");
        assert!(copies.is_empty() && readers.iter().flatten().all(|&r| r == 0), "{what}");
        assert!(full.iter().chain(&empty).flatten().all(|b| b.tx == 0 && b.pending == b.count), "{what}");
    }

    #[test]
    fn consumer_registers_fit_the_register_file() {
        for t in MmaTile::TMA_CANDIDATES {
            let regs = consumer_regs(&t);
            assert!(regs.is_multiple_of(8) && regs <= 240, "{t:?}: {regs}");
            assert!(128 * (PRODUCER_REGS + t.warps_m * regs) <= 65536, "{t:?}: {regs}");
        }
        assert_eq!(consumer_regs(&MmaTile::wgmma_tma(128, 256, 2, 4)), 232);
    }
}
