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

/// Most row elements times rows a thread (fold bodies) a short row's walk unrolls whole.
const WHOLE_UNROLL_BODIES: u64 = 128;

/// The unroll factor of the walk over a short row of `len` elements with `w` rows a thread, when
/// it is not unrolled whole (`None`): past [`WHOLE_UNROLL_BODIES`] bodies, the largest factor of
/// `len` from 8 down to 2 (a 7x7 window's taps: by rows of 7), else 4.
///
/// Why: unrolled whole, the bf16 depthwise 7x7 window of eight channels a thread (49 taps of a
/// 16-byte load and eight multiply-adds) took NVRTC 0.29 s on the CI machine and 0.47-0.71 s on an
/// H200 host, and ConvNeXt-Tiny's nine such sources held its bf16 cold compile at 1.7-2.2 s;
/// unrolled by 7, 0.09 s (session 29).
fn partial_unroll(len: u64, w: u32) -> Option<u64> {
    if len * u64::from(w) <= WHOLE_UNROLL_BODIES {
        return None;
    }
    Some((2..=8).rev().find(|f| len.is_multiple_of(*f)).unwrap_or(4))
}

/// Renders reduce body `r` with `w` consecutive rows a thread ([`rows_per_thread`]) in blocks of
/// `block` threads; `unroll` unrolls the walk over the row (short rows: a window's taps), whole or
/// by [`partial_unroll`].
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
    if unroll {
        em.line(match partial_unroll(r.len as u64, w) {
            None => "#pragma unroll".to_string(),
            Some(f) => format!("#pragma unroll {f}"),
        });
    }
    em.open(format!("for ({ity} red = 0; red < {}; ++red)", em.ilit(r.len as u64)));
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
    em.close();
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

#[cfg(test)]
mod tests {
    use super::partial_unroll;

    #[test]
    fn short_rows_unroll_whole_up_to_the_body_budget() {
        // 3x3 windows of eight rows a thread, and 7x7 of one: whole.
        assert_eq!(partial_unroll(9, 8), None);
        assert_eq!(partial_unroll(49, 1), None);
        // 7x7 and 5x5 windows of eight rows a thread: by a row of taps.
        assert_eq!(partial_unroll(49, 8), Some(7));
        assert_eq!(partial_unroll(25, 8), Some(5));
        // No factor from 2 to 8: by 4.
        assert_eq!(partial_unroll(59, 4), Some(4));
    }
}
