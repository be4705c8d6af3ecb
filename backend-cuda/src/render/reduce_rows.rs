//! Thread-per-row reductions over several consecutive rows a thread ([`render`]).
//!
//! Where consecutive rows read consecutive elements (a depthwise window walking channels-last:
//! row `r` is channel `r % C` of one pixel, `schedule::channels_last`), a thread takes `W`
//! consecutive rows as one vector group of `Var::Row`. What the rows of a group share (the
//! pixel's coordinates, each tap's clamped address and padding mask) is computed once a group
//! instead of once a row, and the loads and stores contiguous along the rows become `W`-wide
//! vector accesses. One row a thread, ConvNeXt-Tiny's first depthwise window walking
//! channels-last took 52.7 us for 19 MB on an H200 (session 22, call 2): about twelve integer and
//! compare operations a tap for each output, and two scalar loads, bound by issue, not bytes.
//!
//! Taken for one sum, product, maximum or minimum (not of bool) with row stores only, over rows
//! the width divides, where some load of the folded value is contiguous along the rows
//! ([`rows_per_thread`]); every other thread-per-row body renders one row a thread (`reduce.rs`).

use sinter_core::DType;
use sinter_core::kernel::{ExprId, ReduceBody, Var};

use super::analysis::store_roots;
use super::emit::{AccVal, Emitter, Group, emit_group};
use super::index::{Split, split_factor};
use super::ops::cast;
use super::pointwise::choose_width;
use super::reduce::Red;
use super::{Body, GridSplit, OuterUnit, RenderError};

/// Consecutive rows a thread takes for `r` (its reductions `reds`): the widest vector group of
/// `Var::Row` (at most 16 bytes) in which some load of the folded value is contiguous; 1 where
/// none is (a window walking NCHW: its clamped column varies along the rows) or the body is not
/// one plain reduction with row stores.
pub(super) fn rows_per_thread(em: &mut Emitter<'_>, r: &ReduceBody, reds: &[Red]) -> u32 {
    let [rd] = reds else { return 1 };
    if rd.is_arg() || rd.acc_dt == DType::Bool || !r.elem_stores.is_empty() || r.len == 0 || r.rows < 2 {
        return 1;
    }
    let w = choose_width(em, Var::Row, r.rows, &[rd.value], &[]);
    em.set_lanes(Some((Var::Red, 1)));
    w
}

/// The most fold bodies (taps x rows a thread) a short row's walk unrolls whole; past it, with at
/// most [`SPLIT_MAX_ROWS`] rows a thread, a walk whose indices divide the tap by a row length
/// (`red / 7`, `red % 7`) becomes two loops, tap rows rolled and each row's taps unrolled
/// ([`split_factor`]), the tap's row and column the loops' variables.
///
/// Measured (H200, BENCHMARKS.md session 30, calls 1-2): ConvNeXt-Tiny f32's 7x7 windows (four
/// rows a thread, 196 bodies) as tap rows cut its cold compile 0.88-1.00 -> 0.61-0.64 s and ran 1%
/// faster (2.93 -> 2.90 ms). Its bf16 windows (eight rows a thread, 392 bodies: 0.47-0.71 s of
/// NVRTC each on the device, 0.27 s on the CI machine, 0.12 s as tap rows) cut the cold compile by
/// a fifth to a third but ran the model 2-5% slower (1.02-1.04 -> 1.06-1.08 ms; four rows a thread
/// slower still, whole or not): eight rows a thread leave few warps per SM, and the whole unroll's
/// loads of later taps in flight hide the latency the rolled tap rows expose. So the bf16 windows
/// stay whole. A flat walk unrolled by 7 made the bf16 run 12% slower (each tap's row and column,
/// clamps and masks computed from `red` again; session 29).
const WHOLE_BODIES: u64 = 128;

/// The most rows a thread whose window walk may be split into tap rows ([`WHOLE_BODIES`]).
const SPLIT_MAX_ROWS: u32 = 4;

/// Renders reduce body `r` with `w` consecutive rows a thread ([`rows_per_thread`]) in blocks of
/// `block` threads; `unroll` unrolls the walk over the row (short rows: a window's taps), as two
/// loops past [`WHOLE_BODIES`].
pub(super) fn render(
    em: &mut Emitter<'_>,
    r: &ReduceBody,
    rd: &Red,
    (block, w, unroll): (u32, u32, bool),
) -> Result<Body, RenderError> {
    let ity = em.ity();
    let rows = r.rows as u64;
    let per_block = u64::from(block) * u64::from(w);
    let blocks = rows.div_ceil(per_block);
    if blocks > i32::MAX as u64 {
        return Err(em.err(format!("{blocks} blocks exceed the grid limit")));
    }
    em.line(format!("// one thread per {w} consecutive rows: {} rows of {} elements", r.rows, r.len));
    let thread = if em.wide {
        format!("(unsigned long long)blockIdx.x * {block}ull + threadIdx.x")
    } else {
        format!("blockIdx.x * {block}u + threadIdx.x")
    };
    em.line(format!("const {ity} row0 = ({thread}) * {};", em.ilit(u64::from(w))));
    if blocks * per_block != rows {
        em.line(format!("if (row0 >= {}) {{", em.ilit(rows)));
        em.line("    return;");
        em.line("}");
    }
    let fct = rd.fold_ct().name();
    em.line(format!("{fct} acc0[{w}];"));
    em.line("#pragma unroll");
    em.line(format!("for (unsigned j = 0; j < {w}u; ++j) acc0[j] = {};", rd.identity()));
    // The walk over the row: the group's shared values once a step, then each row's fold.
    em.acc_varies = false;
    em.set_lanes(Some((Var::Row, w)));
    let n = r.len as u64;
    let past_whole = unroll && n * u64::from(w) > WHOLE_BODIES;
    let split = if past_whole && w <= SPLIT_MAX_ROWS { split_factor(em.k, Var::Red, n) } else { None };
    let opened = match split {
        Some(f) => {
            // Tap rows rolled, each row's taps unrolled: `red / f` and `red % f` are the loops'
            // variables, the column parts of every tap's address and mask hoisted out of the row
            // loop.
            em.line(format!("// the walk as {} rows of {f} taps", n / f));
            em.line("#pragma unroll 1");
            em.open(format!("for ({ity} red_o = 0; red_o < {}; ++red_o)", em.ilit(n / f)));
            em.line("#pragma unroll");
            em.open(format!("for ({ity} red_i = 0; red_i < {}; ++red_i)", em.ilit(f)));
            em.decl("red", format!("const {ity} red = red_o * {} + red_i;", em.ilit(f)));
            em.split = Some(Split { var: Var::Red, factor: f, outer: "red_o".into(), inner: "red_i".into() });
            2
        }
        None => {
            if past_whole {
                em.line(format!("{}: {n} taps x {w} rows unrolled whole", crate::nvrtc::COMPILE_ALONE));
            }
            if unroll {
                em.line("#pragma unroll");
            }
            em.open(format!("for ({ity} red = 0; red < {}; ++red)", em.ilit(n)));
            1
        }
    };
    em.names.insert(Var::Red, "red".into());
    let grp = Group { var: Var::Row, width: w, base: "row0", lane: "row", roots: &[rd.value], stores: &[] };
    emit_group(em, &grp, &mut |em| {
        let v = em.value(rd.value)?;
        // A value of the fold's dtype is folded as it is (a cast to f16 would round it).
        let v = if rd.value_dt == rd.fold_dt { v } else { cast(&v, rd.value_dt, rd.fold_dt, &mut em.h) };
        let c = rd.combine("acc0[j]", &v, em)?;
        em.line(format!("acc0[j] = {c};"));
        Ok(())
    })?;
    for _ in 0..opened {
        em.close();
    }
    em.split = None;
    em.names.remove(&Var::Red);
    // Row stores: each row's result is its own accumulator.
    em.line("// ---- row stores");
    em.acc_varies = true;
    em.set_lanes(Some((Var::Row, w)));
    em.acc.insert(0, AccVal { name: "acc0[j]".into(), dtype: rd.acc_dt });
    let roots: Vec<ExprId> = r.row_stores.iter().flat_map(store_roots).collect();
    let grp = Group { var: Var::Row, width: w, base: "row0", lane: "row", roots: &roots, stores: &r.row_stores };
    emit_group(em, &grp, &mut |_| Ok(()))?;
    em.acc_varies = false;
    let strategy = format!("reduce thread-per-row block {block} rows x{w}");
    let summary =
        format!("{strategy}: {} rows of {}, {w} consecutive rows per thread, {block} threads per block", r.rows, r.len);
    Ok(Body {
        grid: [if r.rows == 0 { 0 } else { blocks as u32 }, 1, 1],
        block: [block, 1, 1],
        summary,
        strategy,
        min_blocks: None,
        dynamic_shared: 0,
        split: Some(GridSplit { unit: OuterUnit::Rows, per: per_block, inner: 1 }),
        scratch: 0,
        tensor_maps: Vec::new(),
        cluster: 1,
    })
}
