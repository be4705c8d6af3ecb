//! Tensor-core matmuls: bf16/f16 operands, f32 accumulators, `mma.sync` m16n8k16 (sm_80+).
//!
//! A block of `warps_m x warps_n` warps computes a `bm x bn` output tile; each warp a
//! `(bm / warps_m) x (bn / warps_n)` sub-tile as `MI x NJ` m16n8 accumulator fragments (f32,
//! four per thread each). Along k the block walks `bk`-deep steps through a ring of `stages`
//! shared-memory buffers in dynamic shared memory: step `kt + stages - 1` is copied in while step
//! `kt` is multiplied, one barrier per step (the barrier both publishes step `kt` and retires the
//! buffer step `kt - 1` used, which the next copy overwrites).
//!
//! # Operands
//!
//! Each operand is kept in shared memory in its global layout, so global reads are coalesced
//! along its contiguous dimension: A as `[bm][bk]` when k is contiguous ("k-major"), else
//! `[bk][bm]`; B as `[bn][bk]` when k is contiguous, else `[bk][bn]`. Rows are padded by 8
//! elements (16 bytes): with rows a multiple of 64 bytes long, the eight 16-byte row segments one
//! `ldmatrix` phase reads then fall in eight different bank groups. `ldmatrix` reads the k-major
//! layouts as they are and the others with `.trans`, which yields the same fragments.
//!
//! The copy is 16-byte `cp.async` (8 elements, zero-filled past the edges through its source
//! size) when the contiguous stride is 1 and every other stride and the offset are multiples of 8
//! elements, so every copy is aligned (argument pointers are 16-byte aligned, see the module docs
//! of `render`); otherwise each element is loaded and stored by the thread (the "scalar" loader,
//! synchronous, for odd strides and views). Zero fill makes every edge (M, N, K not multiples of
//! the tile) exact: padded products add zeros.
//!
//! # Epilogue
//!
//! Per accumulator element, as the CUDA-core template does: `Acc(0)` is the f32 accumulator;
//! values of the batch only, or of the batch and row only, are computed outside the inner loops.
//! Thread `(g, t) = (lane / 4, lane % 4)` holds rows `g` and `g + 8` and columns `2t`, `2t + 1` of
//! each fragment.
//!
//! Blocks are ordered in groups of [`GROUP_M`] tile rows (consecutive blocks share B columns and
//! A rows in L2), batch outermost.

use serde::{Deserialize, Serialize};
use sinter_core::DType;
use sinter_core::kernel::{ExprId, MatOperand, MatmulBody, Var};

use super::analysis::{acc_uses, depends_on, store_roots};
use super::emit::{AccVal, Emitter};
use super::matmul::{address, emit_operand_bases, lit, op_ity, tile_blocks};
use super::prelude::H;
use super::{Body, CudaCaps, GridSplit, OuterUnit, RenderError, Tuning};

/// Tile rows per group of the block order.
pub const GROUP_M: u64 = 8;

/// A tensor-core tile configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MmaTile {
    /// Output rows per block.
    pub bm: u32,
    /// Output columns per block.
    pub bn: u32,
    /// Reduction depth per pipeline step (a multiple of 16).
    pub bk: u32,
    /// Warps along m.
    pub warps_m: u32,
    /// Warps along n.
    pub warps_n: u32,
    /// Shared-memory pipeline depth (at least 2).
    pub stages: u32,
}

impl MmaTile {
    /// The tiles max-autotune tries (the default first; each checked with [`check_mma`]).
    /// Measured on an H100 at 8192^3 (BENCHMARKS.md): 128x128x64 with four warps and three stages
    /// 3.37 ms, 128x128x32 3.47, 128x256x32 3.73, 256x128x32 3.94, 64x64x32 6.53.
    pub const CANDIDATES: [MmaTile; 10] = [
        MmaTile::LARGE,
        MmaTile { bm: 128, bn: 128, bk: 64, warps_m: 2, warps_n: 2, stages: 4 },
        MmaTile { bm: 128, bn: 256, bk: 64, warps_m: 2, warps_n: 4, stages: 3 },
        MmaTile { bm: 256, bn: 128, bk: 64, warps_m: 4, warps_n: 2, stages: 3 },
        MmaTile { bm: 128, bn: 256, bk: 32, warps_m: 2, warps_n: 4, stages: 4 },
        MmaTile { bm: 128, bn: 128, bk: 32, warps_m: 2, warps_n: 2, stages: 4 },
        MmaTile::MEDIUM,
        MmaTile { bm: 64, bn: 128, bk: 64, warps_m: 2, warps_n: 2, stages: 3 },
        MmaTile { bm: 64, bn: 64, bk: 64, warps_m: 2, warps_n: 2, stages: 3 },
        MmaTile::SMALL,
    ];
    /// 128x128x64, four warps of 64x64, three stages: large products.
    pub const LARGE: MmaTile = MmaTile { bm: 128, bn: 128, bk: 64, warps_m: 2, warps_n: 2, stages: 3 };
    /// 128x64x64, four warps of 64x32, three stages: mid-sized products.
    pub const MEDIUM: MmaTile = MmaTile { bm: 128, bn: 64, bk: 64, warps_m: 2, warps_n: 2, stages: 3 };
    /// 64x64x32, four warps, four stages: small products.
    pub const SMALL: MmaTile = MmaTile { bm: 64, bn: 64, bk: 32, warps_m: 2, warps_n: 2, stages: 4 };

    /// Threads per block.
    pub fn threads(&self) -> u32 {
        32 * self.warps_m * self.warps_n
    }

    /// Warp sub-tile (rows, columns).
    fn warp_tile(&self) -> (u32, u32) {
        (self.bm / self.warps_m.max(1), self.bn / self.warps_n.max(1))
    }
}

/// Where an operand lives in shared memory and how it gets there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct OpPlan {
    /// k is the contiguous dimension of the shared tile (`[rows][bk]`), else `[bk][rows]`.
    kmajor: bool,
    /// 16-byte `cp.async` copies (else element by element).
    vector: bool,
}

impl OpPlan {
    /// The plan of operand `op` whose non-k extent is `ext` with strides `s_ext` (along that
    /// dimension) and `s_k` (along k).
    fn new(op: &MatOperand, batch: usize, ext: usize, kd: usize, s_ext: usize, s_k: usize) -> OpPlan {
        let kmajor = s_k == 1 || s_ext != 1;
        let (contig, other, other_ext) = if kmajor { (s_k, s_ext, ext) } else { (s_ext, s_k, kd) };
        let aligned = |s: usize, e: usize| e <= 1 || s.is_multiple_of(8);
        let vector =
            contig == 1 && aligned(other, other_ext) && aligned(op.s_batch, batch) && op.offset.is_multiple_of(8);
        OpPlan { kmajor, vector }
    }

    /// Shared-tile rows and row length (elements, padding included) for `rows` operand rows.
    fn dims(&self, rows: u32, bk: u32) -> (u32, u32) {
        if self.kmajor { (rows, bk + 8) } else { (bk, rows + 8) }
    }

    fn describe(&self) -> &'static str {
        match (self.kmajor, self.vector) {
            (true, true) => "k-major, cp.async",
            (true, false) => "k-major, scalar loads",
            (false, true) => "k-minor, cp.async",
            (false, false) => "k-minor, scalar loads",
        }
    }
}

/// Bytes of one pipeline stage (both operands).
fn stage_bytes(t: &MmaTile, a: OpPlan, b: OpPlan) -> u32 {
    let (ar, ac) = a.dims(t.bm, t.bk);
    let (br, bc) = b.dims(t.bn, t.bk);
    2 * (ar * ac + br * bc)
}

/// Whether the tensor-core template applies to `mm` on this device: `Err` says why not.
pub fn mma_applies(mm: &MatmulBody, caps: &CudaCaps) -> Result<(), String> {
    if !matches!(mm.in_dtype, DType::BF16 | DType::F16) || mm.acc_dtype != DType::F32 {
        return Err(format!(
            "operands {} accumulating in {} (tensor cores take bf16/f16 into f32)",
            mm.in_dtype, mm.acc_dtype
        ));
    }
    if caps.sm.0 < 8 {
        return Err(format!("sm_{}{} has no mma.sync m16n8k16 (sm_80+)", caps.sm.0, caps.sm.1));
    }
    Ok(())
}

fn plans(mm: &MatmulBody) -> (OpPlan, OpPlan) {
    let a = OpPlan::new(&mm.a, mm.batch, mm.m, mm.k, mm.a.s_row, mm.a.s_col);
    let b = OpPlan::new(&mm.b, mm.batch, mm.n, mm.k, mm.b.s_col, mm.b.s_row);
    (a, b)
}

/// Checks a tile against the template's rules and the device's limits for `mm`; `Err` says why
/// it does not fit.
pub fn check_mma(t: &MmaTile, caps: &CudaCaps, mm: &MatmulBody) -> Result<(), String> {
    mma_applies(mm, caps)?;
    let MmaTile { bm, bn, bk, warps_m, warps_n, stages } = *t;
    if [bm, bn, bk, warps_m, warps_n].contains(&0) {
        return Err(format!("tile {t:?} has a zero extent"));
    }
    let (wm, wn) = t.warp_tile();
    if !bm.is_multiple_of(warps_m) || !bn.is_multiple_of(warps_n) || !wm.is_multiple_of(16) || !wn.is_multiple_of(16) {
        return Err(format!("tile {t:?}: warp sub-tiles {wm}x{wn} must be multiples of 16 dividing the tile"));
    }
    if !bk.is_multiple_of(16) || bk > 128 {
        return Err(format!("tile {t:?}: bk must be a multiple of 16 up to 128"));
    }
    if !(2..=8).contains(&stages) {
        return Err(format!("tile {t:?}: 2 to 8 stages"));
    }
    let acc = (wm / 16) * (wn / 8) * 4;
    if acc > 128 {
        return Err(format!("tile {t:?}: {acc} accumulators per thread (at most 128)"));
    }
    let threads = t.threads();
    if threads > caps.max_threads_per_block {
        return Err(format!("tile {t:?} needs {threads} threads; the device allows {}", caps.max_threads_per_block));
    }
    let (a, b) = plans(mm);
    let shared = u64::from(stage_bytes(t, a, b)) * u64::from(stages);
    if shared > u64::from(caps.max_dynamic_shared_bytes) {
        return Err(format!(
            "tile {t:?} needs {shared} bytes of shared memory; the device allows {}",
            caps.max_dynamic_shared_bytes
        ));
    }
    Ok(())
}

/// The default tile: the largest candidate whose grid still gives every SM a block, else
/// [`MmaTile::SMALL`].
pub(super) fn default_mma(mm: &MatmulBody, caps: &CudaCaps) -> MmaTile {
    for t in [MmaTile::LARGE, MmaTile::MEDIUM] {
        if tile_blocks(mm, t.bm, t.bn) >= u64::from(caps.sm_count.max(1)) && check_mma(&t, caps, mm).is_ok() {
            return t;
        }
    }
    MmaTile::SMALL
}

/// Renders `mm` on tensor cores with tile `tile`.
pub(super) fn render(em: &mut Emitter<'_>, mm: &MatmulBody, caps: &CudaCaps, t: &Tuning) -> Result<Body, RenderError> {
    let k = em.k;
    let kname = k.name.clone();
    let invalid = |msg: String| RenderError::InvalidTuning { kernel: kname.clone(), msg };
    let tile = t.mma.unwrap_or_else(|| default_mma(mm, caps));
    check_mma(&tile, caps, mm).map_err(&invalid)?;
    let threads = tile.threads();
    if let Some(b) = t.block
        && b != threads
    {
        return Err(invalid(format!("block {b}: the tile {tile:?} runs {threads} threads")));
    }
    let (batch, m, n, kd) = (mm.batch as u64, mm.m as u64, mm.n as u64, mm.k as u64);
    if [batch, m, n, kd].iter().any(|&x| x > i32::MAX as u64) {
        return Err(em.err(format!("matmul {batch}x{m}x{n}x{kd} exceeds the 32-bit extents")));
    }
    let MmaTile { bm, bn, bk, warps_m, stages, .. } = tile;
    let (wm, wn) = tile.warp_tile();
    let (mi, nj) = (wm / 16, wn / 8);
    let (tiles_m, tiles_n) = (m.div_ceil(u64::from(bm)), n.div_ceil(u64::from(bn)));
    let blocks = tiles_m * tiles_n * batch;
    if blocks > i32::MAX as u64 {
        return Err(em.err(format!("{blocks} blocks exceed the grid limit")));
    }
    let (pa, pb) = plans(mm);
    let stage = stage_bytes(&tile, pa, pb);
    let shared = stage * stages;
    let strategy = format!("mma {bm}x{bn}x{bk} w{warps_m}x{} s{stages}", tile.warps_n);
    let summary = format!(
        "tensor-core matmul batch {batch} x m {m} x n {n} x k {kd} ({} -> f32, mma.sync m16n8k16), tile {bm}x{bn}x{bk}, \
         {} warps of {wm}x{wn}, {stages} stages ({shared} bytes), A {}, B {}, {blocks} blocks",
        mm.in_dtype,
        threads / 32,
        pa.describe(),
        pb.describe()
    );
    let body = match Body::launch(blocks, threads, strategy, summary, Some(1), shared) {
        // Batches are outermost; inside one the tile order is swizzled (no prefix of rows).
        Ok(b) if batch > 1 => {
            b.with_split(GridSplit { unit: OuterUnit::MatmulBatch, per: 1, inner: tiles_m * tiles_n })
        }
        Ok(b) => b,
        Err(empty) => return Ok(empty),
    };
    em.h.need(H::Mma);
    let ity = em.ity();
    em.line(format!("// {}", body.summary));
    em.line("extern __shared__ __align__(128) unsigned char smem[];");
    // Block order: groups of GROUP_M tile rows, column-major inside a group, batch outermost.
    let per_batch = tiles_m * tiles_n;
    em.line("const unsigned pid = blockIdx.x;");
    em.decl("batch", format!("const unsigned batch = pid / {per_batch}u;"));
    em.line(format!("const unsigned p = pid % {per_batch}u;"));
    let group = GROUP_M * tiles_n;
    em.line(format!("const unsigned first_m = p / {group}u * {GROUP_M}u;"));
    em.line(format!("const unsigned group_rows = min({tiles_m}u - first_m, {GROUP_M}u);"));
    em.line(format!("const unsigned m0 = (first_m + p % {group}u % group_rows) * {bm}u;"));
    em.line(format!("const unsigned n0 = p % {group}u / group_rows * {bn}u;"));
    em.line("const unsigned tid = threadIdx.x;");
    em.line("const unsigned lane = tid % 32u;");
    em.line("const unsigned warp = tid / 32u;");
    em.line(format!("const unsigned wm0 = warp % {warps_m}u * {wm}u; // the warp's rows in the tile"));
    em.line(format!("const unsigned wn0 = warp / {warps_m}u * {wn}u; // and columns"));
    emit_operand_bases(em, mm);
    let a_stage = {
        let (r, c) = pa.dims(bm, bk);
        r * c * 2
    };
    em.line("const unsigned s_base = (unsigned)__cvta_generic_to_shared(smem);");
    em.line(format!("// stage s: A at s * {stage}, B at s * {stage} + {a_stage} (bytes)"));
    em.line(format!("float acc[{mi}][{nj}][4];"));
    em.line("#pragma unroll");
    em.open(format!("for (unsigned i = 0; i < {mi}u; ++i)"));
    em.line("#pragma unroll");
    em.open(format!("for (unsigned j = 0; j < {nj}u; ++j)"));
    em.line("#pragma unroll");
    em.open("for (unsigned c = 0; c < 4u; ++c)");
    em.line("acc[i][j][c] = 0.0f;");
    em.close();
    em.close();
    em.close();
    let ktiles = kd.div_ceil(u64::from(bk));
    em.line(format!("// prologue: the first {} steps in flight", stages - 1));
    em.line("#pragma unroll");
    em.open(format!("for (unsigned s = 0; s < {}u; ++s)", stages - 1));
    em.open(format!("if (s < {ktiles}u)"));
    load_stage(em, mm, &tile, (pa, pb), "s", "s")?;
    em.close();
    em.line("sinter_cp_async_commit();");
    em.close();
    em.open(format!("for (unsigned kt = 0; kt < {ktiles}u; ++kt)"));
    em.line(format!("sinter_cp_async_wait<{}>();", stages - 2));
    em.line("__syncthreads(); // step kt landed; every warp is done with step kt - 1's buffer");
    em.open("");
    em.line(format!("const unsigned nk = kt + {}u;", stages - 1));
    em.open(format!("if (nk < {ktiles}u)"));
    load_stage(em, mm, &tile, (pa, pb), &format!("nk % {stages}u"), "nk")?;
    em.close();
    em.line("sinter_cp_async_commit();");
    em.close();
    em.line(format!("const unsigned sa = s_base + kt % {stages}u * {stage}u;"));
    em.line(format!("const unsigned sb = sa + {a_stage}u;"));
    em.line("const unsigned mat = lane / 8u, r8 = lane % 8u;");
    em.line("#pragma unroll");
    em.open(format!("for (unsigned kk = 0; kk < {}u; ++kk)", bk / 16));
    em.line(format!("unsigned fa[{mi}][4];"));
    em.line(format!("unsigned fb[{nj}][2];"));
    em.line("#pragma unroll");
    em.open(format!("for (unsigned i = 0; i < {mi}u; ++i)"));
    let (_, a_row) = pa.dims(bm, bk);
    if pa.kmajor {
        em.line("const unsigned row = wm0 + i * 16u + mat % 2u * 8u + r8;");
        em.line("const unsigned col = kk * 16u + mat / 2u * 8u;");
        em.line(format!("sinter_ldsm_x4<false>(fa[i], sa + (row * {a_row}u + col) * 2u);"));
    } else {
        em.line("const unsigned row = kk * 16u + mat / 2u * 8u + r8;");
        em.line("const unsigned col = wm0 + i * 16u + mat % 2u * 8u;");
        em.line(format!("sinter_ldsm_x4<true>(fa[i], sa + (row * {a_row}u + col) * 2u);"));
    }
    em.close();
    em.line("#pragma unroll");
    em.open(format!("for (unsigned j = 0; j < {}u; ++j)", nj / 2));
    em.line("unsigned r[4];");
    let (_, b_row) = pb.dims(bn, bk);
    if pb.kmajor {
        em.line("const unsigned row = wn0 + j * 16u + mat / 2u * 8u + r8;");
        em.line("const unsigned col = kk * 16u + mat % 2u * 8u;");
        em.line(format!("sinter_ldsm_x4<false>(r, sb + (row * {b_row}u + col) * 2u);"));
    } else {
        em.line("const unsigned row = kk * 16u + mat % 2u * 8u + r8;");
        em.line("const unsigned col = wn0 + j * 16u + mat / 2u * 8u;");
        em.line(format!("sinter_ldsm_x4<true>(r, sb + (row * {b_row}u + col) * 2u);"));
    }
    em.line("fb[2u * j][0] = r[0]; fb[2u * j][1] = r[1];");
    em.line("fb[2u * j + 1u][0] = r[2]; fb[2u * j + 1u][1] = r[3];");
    em.close();
    let mma = if mm.in_dtype == DType::BF16 { "sinter_mma<false>" } else { "sinter_mma<true>" };
    em.line("#pragma unroll");
    em.open(format!("for (unsigned i = 0; i < {mi}u; ++i)"));
    em.line("#pragma unroll");
    em.open(format!("for (unsigned j = 0; j < {nj}u; ++j)"));
    em.line(format!("{mma}(acc[i][j], fa[i], fb[j][0], fb[j][1]);"));
    em.close();
    em.close();
    em.close();
    em.close();
    em.line("sinter_cp_async_wait<0>();");

    // Epilogue.
    em.line("// ---- epilogue, per output element: rows g, g + 8 and columns 2t, 2t + 1 of each fragment");
    em.set_lanes(None);
    em.names.insert(Var::Batch, "batch".into());
    let roots: Vec<ExprId> = mm.stores.iter().flat_map(store_roots).collect();
    let (dep_m, dep_n, accs) = (depends_on(k, Var::M), depends_on(k, Var::N), acc_uses(k));
    em.emit_closure(&roots, &|e| !dep_m[e as usize] && !dep_n[e as usize] && accs[e as usize].is_none())?;
    em.line("const unsigned g = lane / 4u, t4 = lane % 4u;");
    em.line("#pragma unroll");
    em.open(format!("for (unsigned i = 0; i < {mi}u; ++i)"));
    em.line("#pragma unroll");
    em.open("for (unsigned h = 0; h < 2u; ++h)");
    em.line(format!("const {ity} m = m0 + wm0 + i * 16u + h * 8u + g;"));
    let m_guard = !m.is_multiple_of(u64::from(bm));
    if m_guard {
        em.open(format!("if (m < {m}u)"));
    }
    em.names.insert(Var::M, "m".into());
    em.emit_closure(&roots, &|e| !dep_n[e as usize] && accs[e as usize].is_none())?;
    em.line("#pragma unroll");
    em.open(format!("for (unsigned j = 0; j < {nj}u; ++j)"));
    em.line("#pragma unroll");
    em.open("for (unsigned c = 0; c < 2u; ++c)");
    em.line(format!("const {ity} n = n0 + wn0 + j * 8u + t4 * 2u + c;"));
    let n_guard = !n.is_multiple_of(u64::from(bn));
    if n_guard {
        em.open(format!("if (n < {n}u)"));
    }
    em.names.insert(Var::N, "n".into());
    em.acc.insert(0, AccVal { name: "acc[i][j][h * 2u + c]".into(), dtype: DType::F32 });
    em.emit_closure(&roots, &|_| true)?;
    for s in &mm.stores {
        em.emit_store(s)?;
    }
    if n_guard {
        em.close();
    }
    em.close();
    em.close();
    if m_guard {
        em.close();
    }
    em.close();
    em.close();
    Ok(body)
}

/// Copies step `kstep` (k offset `kstep * bk`) of both operands into stage `slot`.
fn load_stage(
    em: &mut Emitter<'_>,
    mm: &MatmulBody,
    t: &MmaTile,
    (pa, pb): (OpPlan, OpPlan),
    slot: &str,
    kstep: &str,
) -> Result<(), RenderError> {
    let threads = t.threads();
    let stage = stage_bytes(t, pa, pb);
    let a_stage = {
        let (r, c) = pa.dims(t.bm, t.bk);
        r * c * 2
    };
    em.open("");
    em.line(format!("const unsigned k0 = {kstep} * {}u;", t.bk));
    em.line(format!("const unsigned st = s_base + {slot} * {stage}u;"));
    for (which, op, plan) in [("a", &mm.a, pa), ("b", &mm.b, pb)] {
        let (rows, ext, origin, s_r, s_k) =
            if which == "a" { (t.bm, mm.m, "m0", op.s_row, op.s_col) } else { (t.bn, mm.n, "n0", op.s_col, op.s_row) };
        let (srows, srow_len) = plan.dims(rows, t.bk);
        let cols = srow_len - 8;
        let dst = if which == "a" { "st".to_string() } else { format!("st + {a_stage}u") };
        let oty = op_ity(em, op);
        let per = if plan.vector { 8 } else { 1 };
        let units = srows * cols / per;
        let iters = units.div_ceil(threads);
        em.line(format!(
            "// {} tile: {srows} x {cols} elements, {units} {} over {threads} threads",
            which.to_uppercase(),
            if plan.vector { "16-byte copies" } else { "elements" }
        ));
        // The scalar loader stays a loop: unrolled, its addresses cost the accumulators registers.
        em.line(if plan.vector { "#pragma unroll" } else { "#pragma unroll 1" });
        em.open(format!("for (unsigned l = 0; l < {iters}u; ++l)"));
        em.line(format!("const unsigned e = tid + l * {threads}u;"));
        if !units.is_multiple_of(threads) {
            em.open(format!("if (e < {units}u)"));
        }
        let per_row = cols / per;
        em.line(format!("const unsigned sr = e / {per_row}u, sc = e % {per_row}u * {per}u;"));
        // (row, k) in the operand's coordinates; `sr`/`sc` index the shared tile.
        let (gr, gk) = if plan.kmajor { ("sr", "sc") } else { ("sc", "sr") };
        em.line(format!("const unsigned gr = {origin} + {gr}; // {}", if which == "a" { "m" } else { "n" }));
        em.line(format!("const unsigned gk = k0 + {gk};"));
        let addr = address(oty, &format!("{which}_base"), ("gr", s_r), ("gk", s_k));
        let sdst = format!("{dst} + (sr * {srow_len}u + sc) * 2u");
        if plan.vector {
            // Valid elements of the 8 along the contiguous dimension, 0 when the other is out.
            let (cv, ce, ov, oe) = if plan.kmajor { ("gk", mm.k, "gr", ext) } else { ("gr", ext, "gk", mm.k) };
            em.line(format!("const unsigned valid = {ov} < {oe}u && {cv} < {ce}u ? min({ce}u - {cv}, 8u) * 2u : 0u;"));
            em.line(format!("const {oty} off = valid ? {addr} : {};", lit(oty, 0)));
            em.line(format!("sinter_cp_async16({sdst}, &a{}[off], valid);", op.arg));
        } else {
            em.line(format!("const bool in = gr < {ext}u && gk < {}u;", mm.k));
            em.line(format!(
                "const unsigned short x = in ? reinterpret_cast<const unsigned short*>(a{})[{addr}] : (unsigned short)0;",
                op.arg
            ));
            em.line(format!("asm volatile(\"st.shared.u16 [%0], %1;\\n\" :: \"r\"({sdst}), \"h\"(x) : \"memory\");"));
        }
        if !units.is_multiple_of(threads) {
            em.close();
        }
        em.close();
    }
    em.close();
    Ok(())
}
