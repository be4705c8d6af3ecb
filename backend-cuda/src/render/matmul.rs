//! Matmul kernels: a generic CUDA-core tiled product (shared-memory tiles, register blocking) and
//! the elementwise epilogue.
//!
//! A block computes a `bm x bn` tile of one batch's output with `(bm / tm) * (bn / tn)` threads,
//! each `tm x tn` outputs held in registers. Per step of `bk` along k, the block stages the A tile
//! (stored k-major, `[bk][bm + 4]`) and the B tile (`[bk][bn + 4]`) in shared memory, converted to
//! the accumulator type and zero-filled past the edges; the next step's elements are loaded into
//! registers while the current tiles are multiplied (one barrier pair per step). A tile that takes
//! the whole reduction in one step copies its operands straight into shared memory with `cp.async`
//! where their type allows ([`direct_copy_bytes`]). A thread's rows
//! are `tm / 4` runs of 4, `bm / (tm / 4)` apart (likewise its columns), read from shared memory as
//! 16-byte vectors without bank conflicts. Operands are read through their strides (any layout),
//! each global load coalesced along the operand's contiguous dimension. f32 accumulates with
//! `fmaf`, f64 with `fma`, integers with wrapping unsigned multiply-adds.
//!
//! An implicit im2col operand ([`MatOperand::im2col`]) is read tap by tap (the `im2col` module:
//! zero in the padding), so exact-f32 convolutions run as implicit GEMMs here too.
//!
//! The epilogue runs per output element with `Acc(0)` the accumulator; values that depend on the
//! batch only, or on the batch and row only, are computed once outside the inner loops.
//! bf16/f16 matmuls accumulating in f32 go to the tensor-core template (the `mma` module) unless
//! the tuning names a [`MatmulTile`].

use serde::{Deserialize, Serialize};
use sinter_core::DType;
use sinter_core::kernel::{ExprId, MatOperand, MatmulBody, Var};

use super::analysis::{acc_uses, depends_on, store_roots};
use super::emit::{AccVal, Emitter};
use super::ops::{cast, load_conv};
use super::prelude::H;
use super::types::{Ct, ct};
use super::{Body, CudaCaps, GridSplit, OuterUnit, RenderError, Tuning};

/// A matmul tile configuration of the CUDA-core kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MatmulTile {
    /// Output rows per block.
    pub bm: u32,
    /// Output columns per block.
    pub bn: u32,
    /// Reduction depth per shared-memory step.
    pub bk: u32,
    /// Output rows per thread (a multiple of 4).
    pub tm: u32,
    /// Output columns per thread (a multiple of 4).
    pub tn: u32,
}

impl MatmulTile {
    /// 128x128x8 with 8x8 per thread (256 threads): large products.
    pub const LARGE: MatmulTile = MatmulTile { bm: 128, bn: 128, bk: 8, tm: 8, tn: 8 };
    /// 64x64x8 with 4x4 per thread (256 threads): mid-sized products.
    pub const MEDIUM: MatmulTile = MatmulTile { bm: 64, bn: 64, bk: 8, tm: 4, tn: 4 };
    /// 32x32x8 with 4x4 per thread (64 threads): small products.
    pub const SMALL: MatmulTile = MatmulTile { bm: 32, bn: 32, bk: 8, tm: 4, tn: 4 };

    /// The tiles max-autotune tries (each checked with [`check_tile`] first).
    pub const CANDIDATES: [MatmulTile; 7] = [
        MatmulTile::LARGE,
        MatmulTile { bm: 128, bn: 128, bk: 16, tm: 8, tn: 8 },
        MatmulTile { bm: 128, bn: 64, bk: 8, tm: 8, tn: 4 },
        MatmulTile { bm: 64, bn: 128, bk: 8, tm: 4, tn: 8 },
        MatmulTile::MEDIUM,
        MatmulTile { bm: 64, bn: 64, bk: 16, tm: 4, tn: 4 },
        MatmulTile::SMALL,
    ];

    /// Threads per block.
    pub fn threads(&self) -> u32 {
        (self.bm / self.tm.max(1)) * (self.bn / self.tn.max(1))
    }

    /// Shared memory of the two tiles, for elements of `elem_bytes`.
    pub fn shared_bytes(&self, elem_bytes: u32) -> u64 {
        u64::from(self.bk) * (u64::from(self.bm) + 4 + u64::from(self.bn) + 4) * u64::from(elem_bytes)
    }
}

/// The accumulator element type of the tiles: the accumulator's compute type, the unsigned type of
/// its width for integers (wrapping multiply-adds).
fn tile_ct(acc: DType) -> Ct {
    let c = ct(acc);
    if c.is_int() { c.unsigned() } else { c }
}

fn tile_bytes(c: Ct) -> u32 {
    match c {
        Ct::Double | Ct::Long | Ct::ULong => 8,
        _ => 4,
    }
}

/// Checks a tile against the device's limits for accumulator dtype `acc`; `Err` says why it does
/// not fit.
pub fn check_tile(t: &MatmulTile, caps: &CudaCaps, acc: DType) -> Result<(), String> {
    let MatmulTile { bm, bn, bk, tm, tn } = *t;
    if [bm, bn, bk, tm, tn].contains(&0) {
        return Err(format!("tile {t:?} has a zero extent"));
    }
    if !tm.is_multiple_of(4) || !tn.is_multiple_of(4) || !bm.is_multiple_of(tm) || !bn.is_multiple_of(tn) {
        return Err(format!("tile {t:?}: tm and tn must be multiples of 4 dividing bm and bn"));
    }
    if tm * tn > 64 {
        return Err(format!("tile {t:?}: {} accumulators per thread (at most 64)", tm * tn));
    }
    let threads = t.threads();
    if !threads.is_multiple_of(32) || threads > caps.max_threads_per_block {
        return Err(format!(
            "tile {t:?} needs {threads} threads: a multiple of 32 up to {}",
            caps.max_threads_per_block
        ));
    }
    if !(bm * bk).is_multiple_of(threads) || !(bn * bk).is_multiple_of(threads) {
        return Err(format!("tile {t:?}: the {threads} threads must divide bm*bk and bn*bk"));
    }
    let shared = t.shared_bytes(tile_bytes(tile_ct(acc)));
    if shared > u64::from(caps.max_shared_bytes_per_block) {
        return Err(format!(
            "tile {t:?} needs {shared} bytes of shared memory; the device allows {}",
            caps.max_shared_bytes_per_block
        ));
    }
    Ok(())
}

/// Blocks of a grid of `bm x bn` output tiles over every batch.
pub(super) fn tile_blocks(mm: &MatmulBody, bm: u32, bn: u32) -> u64 {
    (mm.m as u64).div_ceil(u64::from(bm)) * (mm.n as u64).div_ceil(u64::from(bn)) * mm.batch as u64
}

/// The deepest reduction [`default_tile`] takes in one step: the 32x32 tile's 64 threads then
/// stage `bk` elements of each operand in registers and `bk * 288` bytes in shared memory (f32).
pub const WHOLE_K_MAX: usize = 128;

/// The default tile: the largest whose grid still gives every SM a block, else the small one.
///
/// A product whose small tiles leave SMs idle is latency-bound: its time is the k loop's chain of
/// global round trips, one per step. `matmul_softmax_100_f32`'s 100x100x100 product took 11.3 us
/// on an H200 at 13 steps of 8 with its inputs in DRAM (session 18, `sinter bench`), against 2e6
/// FLOP. Where the reduction is at most [`WHOLE_K_MAX`] deep, the small tile takes it in one step
/// (`bk` = k rounded up to even, so the 64 threads divide the tiles), so every load of the block is
/// in flight at once.
pub(super) fn default_tile(mm: &MatmulBody, caps: &CudaCaps) -> MatmulTile {
    let sms = u64::from(caps.sm_count.max(1));
    for t in [MatmulTile::LARGE, MatmulTile::MEDIUM] {
        if tile_blocks(mm, t.bm, t.bn) >= sms && check_tile(&t, caps, mm.acc_dtype).is_ok() {
            return t;
        }
    }
    let small = MatmulTile::SMALL;
    if tile_blocks(mm, small.bm, small.bn) < sms && mm.k > small.bk as usize && mm.k <= WHOLE_K_MAX {
        let whole = MatmulTile { bk: (mm.k as u32).next_multiple_of(2), ..small };
        if check_tile(&whole, caps, mm.acc_dtype).is_ok() {
            return whole;
        }
    }
    small
}

/// Declares `a_base` and `b_base`: each operand's element offset for the block's batch.
pub(super) fn emit_operand_bases(em: &mut Emitter<'_>, mm: &MatmulBody) {
    for (name, op) in [("a", &mm.a), ("b", &mm.b)] {
        let oty = op_ity(em, op);
        let b = if oty == "unsigned" { "batch".to_string() } else { format!("({oty})batch") };
        let base = match (op.offset, op.s_batch) {
            (0, 0) => lit(oty, 0),
            (o, 0) => lit(oty, o as u64),
            (0, s) => format!("{b} * {}", lit(oty, s as u64)),
            (o, s) => format!("{} + {b} * {}", lit(oty, o as u64), lit(oty, s as u64)),
        };
        em.line(format!("const {oty} {name}_base = {base}; // a{}", op.arg));
    }
}

/// The index type of an operand's addresses (64-bit when it has 2^31 elements or more).
pub(super) fn op_ity(em: &Emitter<'_>, op: &MatOperand) -> &'static str {
    if em.k.args[op.arg].numel > i32::MAX as usize { "unsigned long long" } else { "unsigned" }
}

pub(super) fn lit(ty: &str, c: u64) -> String {
    if ty == "unsigned" { format!("{c}u") } else { format!("{c}ull") }
}

/// `base + r * s_r + c * s_c` in type `ty` (terms with a zero stride dropped).
pub(super) fn address(ty: &str, base: &str, (r, s_r): (&str, usize), (c, s_c): (&str, usize)) -> String {
    let mut s = base.to_string();
    for (v, st) in [(r, s_r), (c, s_c)] {
        let v = if ty == "unsigned" { v.to_string() } else { format!("({ty}){v}") };
        match st {
            0 => {}
            1 => s.push_str(&format!(" + {v}")),
            st => s.push_str(&format!(" + {v} * {}", lit(ty, st as u64))),
        }
    }
    s
}

/// The template [`plan`] picks for a product and tuning.
pub(super) enum Template {
    /// A tensor-core template (the `mma` module renders it).
    TensorCores,
    /// The CUDA-core tiles of this module.
    Cores(Plan),
}

/// The launch of the CUDA-core template for a product and tuning: what both renderers (CUDA C++
/// here, PTX in `ptx::matmul`) follow.
pub(super) struct Plan {
    /// The tile ([`Tuning::tile`], else [`default_tile`]).
    pub(super) tile: MatmulTile,
    /// Output tiles along m.
    pub(super) tiles_m: u64,
    /// Output tiles along n.
    pub(super) tiles_n: u64,
    /// Grid, block, strategy, summary and split (no split, and a grid of `[0, 1, 1]`, when there
    /// are no blocks).
    pub(super) body: Body,
    /// The bytes of each `cp.async` where the tile takes the whole reduction in one step
    /// ([`direct_copy_bytes`]).
    pub(super) direct: Option<u32>,
}

/// Which template renders `mm` with `t`, and the CUDA-core template's launch; `Err` exactly where
/// [`render`] fails before writing anything.
pub(super) fn plan(em: &Emitter<'_>, mm: &MatmulBody, caps: &CudaCaps, t: &Tuning) -> Result<Template, RenderError> {
    let kname = em.k.name.clone();
    let invalid = |msg: String| RenderError::InvalidTuning { kernel: kname.clone(), msg };
    if t.vectorize == Some(true) || t.persistent == Some(true) {
        return Err(invalid("vectorize and persistent apply to pointwise and reduce kernels".into()));
    }
    match (t.tile, t.mma) {
        (Some(_), Some(_)) => return Err(invalid("a CUDA-core tile and a tensor-core tile together".into())),
        (None, Some(_)) => {
            super::mma::mma_applies(mm, caps).map_err(|why| invalid(format!("no tensor-core template: {why}")))?;
            return Ok(Template::TensorCores);
        }
        (None, None) if super::mma::mma_applies(mm, caps).is_ok() => return Ok(Template::TensorCores),
        _ => {}
    }
    if ct(mm.acc_dtype) == Ct::Bool {
        return Err(em.err(format!("matmul accumulator dtype {}", mm.acc_dtype)));
    }
    let tile = t.tile.unwrap_or_else(|| default_tile(mm, caps));
    check_tile(&tile, caps, mm.acc_dtype).map_err(&invalid)?;
    em.check_block(t, tile.threads(), &tile)?;
    let (batch, m, n, kd) = (mm.batch as u64, mm.m as u64, mm.n as u64, mm.k as u64);
    if [batch, m, n, kd].iter().any(|&x| x > i32::MAX as u64) {
        return Err(em.err(format!("matmul {batch}x{m}x{n}x{kd} exceeds the 32-bit extents")));
    }
    let MatmulTile { bm, bn, bk, tm, tn } = tile;
    let threads = tile.threads();
    let (tiles_n, tiles_m) = (n.div_ceil(u64::from(bn)), m.div_ceil(u64::from(bm)));
    let blocks = tiles_n * tiles_m * batch;
    if blocks > i32::MAX as u64 {
        return Err(em.err(format!("{blocks} blocks exceed the grid limit")));
    }
    let strategy = format!("matmul {bm}x{bn}x{bk} {tm}x{tn}");
    let summary = format!(
        "matmul batch {batch} x m {m} x n {n} x k {kd} ({} -> {}), tile {bm}x{bn}x{bk}, {tm}x{tn} per thread, \
         {threads} threads, {blocks} blocks",
        mm.in_dtype, mm.acc_dtype
    );
    // Two blocks per SM (128 registers a thread at 256 threads) hide the barriers' latency; the 8x8
    // tile then needs no spills.
    let min_blocks = (threads <= 256).then_some(2);
    let body = Body {
        grid: [blocks as u32, 1, 1],
        block: [threads, 1, 1],
        strategy,
        summary,
        min_blocks,
        dynamic_shared: 0,
        split: None,
        scratch: 0,
        tensor_maps: Vec::new(),
        cluster: 1,
    };
    // Block order: batch outermost, then tile rows, then tile columns.
    let body = if blocks == 0 {
        body
    } else if batch == 1 {
        body.with_split(GridSplit { unit: OuterUnit::MatmulM, per: u64::from(bm), inner: tiles_n })
    } else {
        body.with_split(GridSplit { unit: OuterUnit::MatmulBatch, per: 1, inner: tiles_m * tiles_n })
    };
    Ok(Template::Cores(Plan { tile, tiles_m, tiles_n, body, direct: direct_copy_bytes(mm, caps, tile) }))
}

/// Renders a matmul body.
pub(super) fn render(em: &mut Emitter<'_>, mm: &MatmulBody, caps: &CudaCaps, t: &Tuning) -> Result<Body, RenderError> {
    let k = em.k;
    let Plan { tile, tiles_m, tiles_n, body, direct } = match plan(em, mm, caps, t)? {
        Template::TensorCores => return super::mma::render(em, mm, caps, t),
        Template::Cores(p) => p,
    };
    if body.grid[0] == 0 {
        return Ok(body);
    }
    let (m, n, kd) = (mm.m as u64, mm.n as u64, mm.k as u64);
    let MatmulTile { bm, bn, bk, tm, tn } = tile;
    let threads = tile.threads();
    let txn = bn / tn;
    let tc = tile_ct(mm.acc_dtype);
    let tt = tc.name();
    let ity = em.ity();
    em.line(format!("// {}", body.summary));
    em.line("const unsigned tile = blockIdx.x;");
    em.line(format!("const unsigned n0 = tile % {tiles_n}u * {bn}u;"));
    em.line(format!("const unsigned m0 = tile / {tiles_n}u % {tiles_m}u * {bm}u;"));
    em.decl("batch", format!("const unsigned batch = tile / {}u;", tiles_n * tiles_m));
    em.line("const unsigned tid = threadIdx.x;");
    em.line(format!("const unsigned tx = tid % {txn}u; // column group"));
    em.line(format!("const unsigned ty = tid / {txn}u; // row group"));
    emit_operand_bases(em, mm);
    em.line(format!("__shared__ __align__(16) {tt} sa[{bk}][{}]; // A tile, k-major (rows padded by 4)", bm + 4));
    em.line(format!("__shared__ __align__(16) {tt} sb[{bk}][{}]; // B tile", bn + 4));
    em.line(format!("{tt} acc[{tm}][{tn}];"));
    em.line("#pragma unroll");
    em.open(format!("for (unsigned i = 0; i < {tm}u; ++i)"));
    em.line("#pragma unroll");
    em.open(format!("for (unsigned j = 0; j < {tn}u; ++j)"));
    em.line(format!("acc[i][j] = {};", tc.zero()));
    em.close();
    em.close();
    if let Some(bytes) = direct {
        em.line(
            "// the whole reduction in one step: every operand element of the block copied to shared memory at once \
             (cp.async, zero past the edges)",
        );
        copy_whole_reduction(em, mm, tile, bytes);
        em.line("sinter_cp_async_commit();");
        em.line("sinter_cp_async_wait<0>();");
        em.line("__syncthreads();");
        emit_step_product(em, tile, tc);
    } else {
        let (pa, pb) = (bm * bk / threads, bn * bk / threads);
        em.line(if u64::from(bk) < kd {
            "// the next step's operand elements, loaded while the current tiles are multiplied"
        } else {
            "// the whole reduction in one step: every operand element of the block loaded at once"
        });
        em.line(format!("{tt} pa[{pa}];"));
        em.line(format!("{tt} pb[{pb}];"));
        stage_loads(em, mm, tile, "0u")?;
        em.open(format!("for (unsigned k0 = 0; k0 < {kd}u; k0 += {bk}u)"));
        for (name, per) in [("a", pa), ("b", pb)] {
            let (kk, rr) = mapping(mm, name, tile);
            em.line("#pragma unroll");
            em.open(format!("for (unsigned l = 0; l < {per}u; ++l)"));
            em.line(format!("const unsigned e = tid + l * {threads}u;"));
            em.line(format!("s{name}[{kk}][{rr}] = p{name}[l];"));
            em.close();
        }
        em.line("__syncthreads();");
        if u64::from(bk) < kd {
            em.open(format!("if (k0 + {bk}u < {kd}u)"));
            stage_loads(em, mm, tile, &format!("k0 + {bk}u"))?;
            em.close();
        }
        emit_step_product(em, tile, tc);
        em.line("__syncthreads();");
        em.close();
    }

    // Epilogue.
    em.line("// ---- epilogue, per output element");
    em.set_lanes(None);
    em.names.insert(Var::Batch, "batch".into());
    let roots: Vec<ExprId> = mm.stores.iter().flat_map(store_roots).collect();
    let (dep_m, dep_n, accs) = (depends_on(k, Var::M), depends_on(k, Var::N), acc_uses(k));
    em.emit_closure(&roots, &|e| !dep_m[e as usize] && !dep_n[e as usize] && accs[e as usize].is_none())?;
    em.line("#pragma unroll");
    em.open(format!("for (unsigned i = 0; i < {tm}u; ++i)"));
    em.line(format!("const {ity} m = m0 + ty * 4u + i / 4u * {}u + i % 4u;", bm / (tm / 4)));
    let m_guard = !m.is_multiple_of(u64::from(bm));
    if m_guard {
        em.open(format!("if (m < {m}u)"));
    }
    em.names.insert(Var::M, "m".into());
    em.emit_closure(&roots, &|e| !dep_n[e as usize] && accs[e as usize].is_none())?;
    em.line("#pragma unroll");
    em.open(format!("for (unsigned j = 0; j < {tn}u; ++j)"));
    em.line(format!("const {ity} n = n0 + tx * 4u + j / 4u * {}u + j % 4u;", bn / (tn / 4)));
    let n_guard = !n.is_multiple_of(u64::from(bn));
    if n_guard {
        em.open(format!("if (n < {n}u)"));
    }
    em.names.insert(Var::N, "n".into());
    let acc_val = if tc == ct(mm.acc_dtype) {
        "acc[i][j]".to_string()
    } else {
        let from = if tc == Ct::ULong { DType::U64 } else { DType::U32 };
        cast("acc[i][j]", from, mm.acc_dtype, &mut em.h)
    };
    em.acc.insert(0, AccVal { name: acc_val, dtype: mm.acc_dtype });
    em.emit_closure(&roots, &|_| true)?;
    for s in &mm.stores {
        em.emit_store(s)?;
    }
    if n_guard {
        em.close();
    }
    em.close();
    if m_guard {
        em.close();
    }
    em.close();
    Ok(body)
}

/// Multiplies the shared tiles of one step into the accumulators: per `kk`, a thread's `tm` rows
/// of A and `tn` columns of B as 16-byte shared loads, then `tm x tn` multiply-adds. Steps of at
/// most 16 unroll fully; the one-step tiles' deeper loops unroll by [`partial_unroll`] (fully
/// unrolled, the 100-deep step of `matmul_softmax_100_f32` took NVRTC 0.53 s on the CI machine).
fn emit_step_product(em: &mut Emitter<'_>, tile: MatmulTile, tc: Ct) {
    let MatmulTile { bm, bn, bk, tm, tn } = tile;
    let tt = tc.name();
    em.h.need(H::Vec);
    em.line(if bk <= 16 { "#pragma unroll".to_string() } else { format!("#pragma unroll {}", partial_unroll(bk)) });
    em.open(format!("for (unsigned kk = 0; kk < {bk}u; ++kk)"));
    em.line(format!("{tt} ra[{tm}];"));
    em.line(format!("{tt} rb[{tn}];"));
    for (name, r, t_, b_) in [("a", "ra", tm, bm), ("b", "rb", tn, bn)] {
        let (who, q) = if name == "a" { ("ty", t_ / 4) } else { ("tx", t_ / 4) };
        em.line("#pragma unroll");
        em.open(format!("for (unsigned q = 0; q < {q}u; ++q)"));
        em.line(format!(
            "const sinter_vec<{tt}, 4> x = *reinterpret_cast<const sinter_vec<{tt}, 4>*>(&s{name}[kk][{who} * 4u + q * {}u]);",
            b_ / q
        ));
        em.line("#pragma unroll");
        em.open("for (unsigned c = 0; c < 4u; ++c)");
        em.line(format!("{r}[q * 4u + c] = x.v[c];"));
        em.close();
        em.close();
    }
    let fma = match tc {
        Ct::Float => "acc[i][j] = fmaf(ra[i], rb[j], acc[i][j]);",
        Ct::Double => "acc[i][j] = fma(ra[i], rb[j], acc[i][j]);",
        _ => "acc[i][j] += ra[i] * rb[j];",
    };
    em.line("#pragma unroll");
    em.open(format!("for (unsigned i = 0; i < {tm}u; ++i)"));
    em.line("#pragma unroll");
    em.open(format!("for (unsigned j = 0; j < {tn}u; ++j)"));
    em.line(fma);
    em.close();
    em.close();
    em.close();
}

/// The unroll factor of a loop of `n` iterations left partly rolled: the largest of 8, 4 and 2
/// dividing `n` (no remainder loop), else 1.
pub(super) fn partial_unroll(n: u32) -> u32 {
    [8, 4, 2].into_iter().find(|f| n.is_multiple_of(*f)).unwrap_or(1)
}

/// The bytes of each `cp.async` when the tile takes the whole reduction in one step and both
/// operands can be copied to shared memory as they are: sm_80+, no implicit im2col, operands of
/// the accumulator's own 4- or 8-byte type (integers copy their bits: the tiles hold them as the
/// unsigned type of their width). `None`: the elements are staged through registers.
///
/// Why: staged through registers, every element of the step is a register and its load, store and
/// index arithmetic unroll (`bk * (bm + bn) / threads` of each); a 100-deep step of the 32x32 tile
/// took NVRTC 0.53 s on the CI machine and 1.1 s on an H200 host (`matmul_softmax_100_f32`, session
/// 29). The copies are asynchronous, so a rolled loop still has every one in flight at once.
fn direct_copy_bytes(mm: &MatmulBody, caps: &CudaCaps, tile: MatmulTile) -> Option<u32> {
    if (tile.bk as usize) < mm.k || caps.sm.0 < 8 || mm.a.im2col.is_some() || mm.b.im2col.is_some() {
        return None;
    }
    if mm.in_dtype != mm.acc_dtype {
        return None;
    }
    match mm.in_dtype {
        DType::F32 | DType::I32 | DType::U32 => Some(4),
        DType::F64 | DType::I64 | DType::U64 => Some(8),
        _ => None,
    }
}

/// Copies every operand element of the block's one reduction step into the shared tiles with
/// `bytes`-wide `cp.async`s (zero past the edges); the caller commits and waits.
fn copy_whole_reduction(em: &mut Emitter<'_>, mm: &MatmulBody, t: MatmulTile, bytes: u32) {
    em.h.need(H::CpAsync);
    for (which, op) in [("a", &mm.a), ("b", &mm.b)] {
        let w = open_walk(em, mm, t, which, false);
        em.line(format!("const unsigned gk = {};", w.kk));
        let mut conds = Vec::new();
        if !(w.side.ext as u64).is_multiple_of(u64::from(w.side.rows)) {
            conds.push(format!("gr < {}u", w.side.ext));
        }
        if !mm.k.is_multiple_of(t.bk as usize) {
            conds.push(format!("gk < {}u", mm.k));
        }
        let addr = address(w.oty, &format!("{which}_base"), ("gr", w.side.s_r), ("gk", w.side.s_k));
        let dst = format!("(unsigned)__cvta_generic_to_shared(&s{which}[{}][{}])", w.kk, w.rr);
        if conds.is_empty() {
            em.line(format!("sinter_cp_async{bytes}({dst}, &a{}[{addr}], {bytes}u);", op.arg));
        } else {
            em.line(format!("const bool in = {};", conds.join(" && ")));
            em.line(format!("const {} off = in ? {addr} : {};", w.oty, lit(w.oty, 0)));
            em.line(format!("sinter_cp_async{bytes}({dst}, &a{}[off], in ? {bytes}u : 0u);", op.arg));
        }
        em.close();
    }
}

/// Operand `which`'s (`"a"` or `"b"`) share of one step: what both renderers walk.
pub(super) struct Side {
    /// The tile's extent along M (A) or N (B).
    pub(super) rows: u32,
    /// The product's extent there.
    pub(super) ext: usize,
    /// The operand's stride along it.
    pub(super) s_r: usize,
    /// The operand's stride along K.
    pub(super) s_k: usize,
    /// Consecutive staged elements walk k (the operand is contiguous along k, or neither
    /// dimension is): element `e` sits at `[e % bk][e / bk]`, else at `[e / rows][e % rows]`.
    pub(super) contig_k: bool,
    /// Elements per thread and step (`rows * bk / threads`).
    pub(super) per: u32,
}

/// Operand `which`'s [`Side`] under tile `t`.
pub(super) fn side(mm: &MatmulBody, t: MatmulTile, which: &str) -> Side {
    let op = if which == "a" { &mm.a } else { &mm.b };
    let (rows, ext, s_r, s_k) =
        if which == "a" { (t.bm, mm.m, op.s_row, op.s_col) } else { (t.bn, mm.n, op.s_col, op.s_row) };
    let a_like = op.s_col == 1 || op.s_row != 1;
    let contig_k = if which == "a" { a_like } else { !a_like };
    Side { rows, ext, s_r, s_k, contig_k, per: rows * t.bk / t.threads() }
}

/// The shared-tile coordinates (`[k][row]`) of staged element `e` of operand `which`: consecutive
/// threads walk the operand's contiguous dimension ([`Side::contig_k`]).
fn mapping(mm: &MatmulBody, which: &str, t: MatmulTile) -> (String, String) {
    let s = side(mm, t, which);
    if s.contig_k {
        (format!("e % {}u", t.bk), format!("e / {}u", t.bk))
    } else {
        (format!("e / {}u", s.rows), format!("e % {}u", s.rows))
    }
}

/// One operand's share of a step as [`open_walk`] lays it out: its [`Side`], the staged element
/// `e`'s shared coordinates (`kk`, `rr`: [`mapping`]) and its index type.
struct Walk {
    side: Side,
    kk: String,
    rr: String,
    oty: &'static str,
}

/// Opens operand `which`'s loop over this thread's elements of one step ([`Side::per`] of
/// them; unrolled whole, or by [`partial_unroll`] when `whole` is false), defining `e` and `gr`;
/// the caller defines `gk`, moves the element and closes the loop.
fn open_walk(em: &mut Emitter<'_>, mm: &MatmulBody, t: MatmulTile, which: &str, whole: bool) -> Walk {
    let op = if which == "a" { &mm.a } else { &mm.b };
    let origin = if which == "a" { "m0" } else { "n0" };
    let threads = t.threads();
    let side = side(mm, t, which);
    let per = side.per;
    let (kk, rr) = mapping(mm, which, t);
    em.line(if whole { "#pragma unroll".to_string() } else { format!("#pragma unroll {}", partial_unroll(per)) });
    em.open(format!("for (unsigned l = 0; l < {per}u; ++l)"));
    em.line(format!("const unsigned e = tid + l * {threads}u;"));
    em.line(format!("const unsigned gr = {origin} + {rr}; // {}", if which == "a" { "m" } else { "n" }));
    Walk { side, kk, rr, oty: op_ity(em, op) }
}

/// Loads one step's operand elements (at reduction offset `k0`) into the staging registers `pa`,
/// `pb`, converted to the accumulator type, zero past the edges.
fn stage_loads(em: &mut Emitter<'_>, mm: &MatmulBody, t: MatmulTile, k0: &str) -> Result<(), RenderError> {
    let tc = tile_ct(mm.acc_dtype);
    for (which, op) in [("a", &mm.a), ("b", &mm.b)] {
        let Walk { side: Side { rows, ext, s_r, s_k, .. }, kk, oty, .. } = open_walk(em, mm, t, which, true);
        if k0 == "0u" {
            em.line(format!("const unsigned gk = {kk};"));
        } else {
            em.line(format!("const unsigned gk = {k0} + {kk};"));
        }
        let mut conds = Vec::new();
        let base = format!("{which}_base");
        let addr = if op.im2col.is_some() {
            let (addr, inside) = super::im2col::tap(em, oty, op, &base, "gk", "gr");
            conds.extend(inside);
            addr
        } else {
            address(oty, &base, ("gr", s_r), ("gk", s_k))
        };
        let x = load_conv(&format!("a{}[{addr}]", op.arg), mm.in_dtype);
        let x = if mm.in_dtype == mm.acc_dtype { x } else { cast(&x, mm.in_dtype, mm.acc_dtype, &mut em.h) };
        let x = if tc == ct(mm.acc_dtype) { x } else { format!("({}){}", tc.name(), super::ops::p(&x)) };
        // The edge bounds first: the tap's condition and address assume them.
        if !mm.k.is_multiple_of(t.bk as usize) {
            conds.insert(0, format!("gk < {}u", mm.k));
        }
        if !(ext as u64).is_multiple_of(u64::from(rows)) {
            conds.insert(0, format!("gr < {ext}u"));
        }
        if conds.is_empty() {
            em.line(format!("p{which}[l] = {x};"));
        } else {
            em.line(format!("p{which}[l] = ({}) ? {} : {};", conds.join(" && "), super::ops::p(&x), tc.zero()));
        }
        em.close();
    }
    Ok(())
}
