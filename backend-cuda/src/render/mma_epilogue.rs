//! The tensor-core matmul templates' shared tail: where a thread's accumulator fragments sit
//! ([`Frag`]), the epilogue evaluated per accumulator element (`Acc(0)` the f32 accumulator;
//! values of the batch only, or of the batch and row only, computed outside the inner loops; thread
//! `(g, t) = (lane / 4, lane % 4)` holds rows `g` and `g + 8` and columns `2t`, `2t + 1` of each
//! fragment), the launch extents, and the block order (groups of
//! [`GROUP_M`](super::mma::GROUP_M) tile rows, batch outermost) that `mma`, `mma_tma` and
//! `mma_wgmma` share.

use sinter_core::DType;
use sinter_core::kernel::{ExprId, MatmulBody, Var};

use super::analysis::{acc_uses, depends_on, store_roots};
use super::emit::{AccVal, Emitter, emit_pair};
use super::mma::{GROUP_M, MmaTile};
use super::{RenderError, Tuning};

/// Where a thread's accumulator fragments sit: `mi x nj` m16n8 fragments in the `mma.sync`
/// accumulator layout (thread `(g, t4) = (lane / 4, lane % 4)` holds rows `g`, `g + 8` and columns
/// `2 t4`, `2 t4 + 1` of each), fragment `(i, j)` at row `row0 + row_step i` and column
/// `col0 + 8 j`.
pub(super) struct Frag {
    /// Fragments along m.
    pub(super) mi: u32,
    /// Fragments along n.
    pub(super) nj: u32,
    /// C++ expression of the first row (tile origin included).
    pub(super) row0: String,
    /// Rows between fragments `i` and `i + 1` (16 for a warp's m16 fragments, 64 between the
    /// m64 products of a warpgroup).
    pub(super) row_step: u32,
    /// C++ expression of the first column.
    pub(super) col0: String,
    /// C++ expression of the accumulator of fragment `i`, `{j}`, half `h`, column `{c}` (the two
    /// placeholders named by the epilogue's loops).
    pub(super) acc: String,
}

/// The epilogue of a tensor-core tile of `bm x bn`: per accumulator element, as the CUDA-core
/// template does (`Acc(0)` is the f32 accumulator; values of the batch only, or of the batch and
/// row only, computed outside the inner loops), guarded where the tile passes the edge. Where `n`
/// is even, each thread's two adjacent columns `2t, 2t + 1` run as one group of two lanes of N
/// (`emit_group`, the lane `j`): contiguous stores and loads (a residual, a bias row) become one
/// vector access of both, and one guard covers the pair. Measured on an H200 (session 16), the
/// TMA template's 128x256 tile in bf16: 408 -> 547 TFLOP/s at 2048^3, 614 -> 717 at 4096^3, 714
/// -> 758 at 8192^3 (each warp's 2-byte stores had touched twice the sectors, and the epilogue
/// overlaps no product).
pub(super) fn epilogue(
    em: &mut Emitter<'_>,
    mm: &MatmulBody,
    (bm, bn): (u32, u32),
    f: &Frag,
) -> Result<(), RenderError> {
    let k = em.k;
    let ity = em.ity();
    let (m, n) = (mm.m as u64, mm.n as u64);
    let (mi, nj) = (f.mi, f.nj);
    let pairs = n.is_multiple_of(2);
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
    em.line(format!("const {ity} m = {} + i * {}u + h * 8u + g;", f.row0, f.row_step));
    let m_guard = !m.is_multiple_of(u64::from(bm));
    if m_guard {
        em.open(format!("if (m < {m}u)"));
    }
    em.names.insert(Var::M, "m".into());
    em.emit_closure(&roots, &|e| !dep_n[e as usize] && accs[e as usize].is_none())?;
    let n_guard = !n.is_multiple_of(u64::from(bn));
    em.line("#pragma unroll");
    if pairs {
        em.open(format!("for (unsigned jf = 0; jf < {nj}u; ++jf)"));
        em.line(format!("const {ity} np = {} + jf * 8u + t4 * 2u; // the pair's first column", f.col0));
        if n_guard {
            em.line("// n is even: both columns of the pair or neither");
            em.open(format!("if (np < {n}u)"));
        }
        let acc = format!("({})", f.acc.replace("{j}", "jf").replace("{c}", "j"));
        emit_pair(em, &roots, &mm.stores, "np", acc, None)?;
    } else {
        em.open(format!("for (unsigned j = 0; j < {nj}u; ++j)"));
        em.line("#pragma unroll");
        em.open("for (unsigned c = 0; c < 2u; ++c)");
        em.line(format!("const {ity} n = {} + j * 8u + t4 * 2u + c;", f.col0));
        if n_guard {
            em.open(format!("if (n < {n}u)"));
        }
        em.names.insert(Var::N, "n".into());
        em.acc.insert(0, AccVal { name: f.acc.replace("{j}", "j").replace("{c}", "c"), dtype: DType::F32 });
        em.emit_closure(&roots, &|_| true)?;
        for s in &mm.stores {
            em.emit_store(s)?;
        }
        em.close();
    }
    if n_guard {
        em.close();
    }
    em.close();
    if m_guard {
        em.close();
    }
    em.close();
    em.close();
    Ok(())
}

/// What every tensor-core template checks before rendering `tile`: a block size in the tuning
/// must be the tile's thread count, and the product's extents must fit 32-bit indices. Returns
/// `(batch, m, n, k)`.
pub(super) fn launch_extents(
    em: &Emitter<'_>,
    mm: &MatmulBody,
    t: &Tuning,
    tile: &MmaTile,
) -> Result<(u64, u64, u64, u64), RenderError> {
    em.check_block(t, tile.threads(), tile)?;
    let (batch, m, n, kd) = (mm.batch as u64, mm.m as u64, mm.n as u64, mm.k as u64);
    if [batch, m, n, kd].iter().any(|&x| x > i32::MAX as u64) {
        return Err(em.err(format!("matmul {batch}x{m}x{n}x{kd} exceeds the 32-bit extents")));
    }
    Ok((batch, m, n, kd))
}

/// Opens `for i < mi, j < nj, c < 4` (unrolled) over a thread's accumulators; the caller
/// closes the three loops with [`close_acc_loops`].
pub(super) fn open_acc_loops(em: &mut Emitter<'_>, mi: u32, nj: u32) {
    em.line("#pragma unroll");
    em.open(format!("for (unsigned i = 0; i < {mi}u; ++i)"));
    em.line("#pragma unroll");
    em.open(format!("for (unsigned j = 0; j < {nj}u; ++j)"));
    em.line("#pragma unroll");
    em.open("for (unsigned c = 0; c < 4u; ++c)");
}

pub(super) fn close_acc_loops(em: &mut Emitter<'_>) {
    em.close();
    em.close();
    em.close();
}

/// The block order of the tensor-core templates: groups of [`GROUP_M`] tile rows, column-major
/// inside a group (consecutive blocks share B columns and A rows in L2), batch outermost; declares
/// `batch`, `m0`, `n0` (the tile's origin), `tid`, `lane` and `warp`.
pub(super) fn emit_block_order(em: &mut Emitter<'_>, pid: &str, tiles: (u64, u64), tile: (u32, u32)) {
    em.line(format!("const unsigned pid = {pid};"));
    emit_tile_origin(em, tiles, tile);
    em.line("const unsigned tid = threadIdx.x;");
    em.line("const unsigned lane = tid % 32u;");
    em.line("const unsigned warp = tid / 32u;");
}

/// The origin of tile `pid` (a `const unsigned` in scope) in the order of [`emit_block_order`]:
/// declares `batch`, `m0` and `n0`.
pub(super) fn emit_tile_origin(em: &mut Emitter<'_>, (tiles_m, tiles_n): (u64, u64), (bm, bn): (u32, u32)) {
    let per_batch = tiles_m * tiles_n;
    em.decl("batch", format!("const unsigned batch = pid / {per_batch}u;"));
    em.line(format!("const unsigned p = pid % {per_batch}u;"));
    let group = GROUP_M * tiles_n;
    em.line(format!("const unsigned first_m = p / {group}u * {GROUP_M}u;"));
    em.line(format!("const unsigned group_rows = min({tiles_m}u - first_m, {GROUP_M}u);"));
    em.line(format!("const unsigned m0 = (first_m + p % {group}u % group_rows) * {bm}u;"));
    em.line(format!("const unsigned n0 = p % {group}u / group_rows * {bn}u;"));
}
