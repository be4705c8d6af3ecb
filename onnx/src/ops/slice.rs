//! The ONNX `Slice` op: a static `Slice` for static shapes and bounds, else one gather per sliced
//! axis (constant indices on static axes, `start + iota(len)` for symbolic bounds).

use crate::import::{Cx, R};
use sinter_core::ir::SliceDim;
use sinter_core::shape::Poly;
use sinter_core::{DType, HostTensor, NodeId, Op};

/// Lowers `Slice` (starts and ends may be symbolic values).
pub(super) fn slice(cx: &mut Cx) -> R<NodeId> {
    let x = cx.inp(0)?;
    let shape = cx.dims(x);
    let r = shape.len();
    let consts = |v: Vec<i64>| v.into_iter().map(Poly::constant).collect::<Vec<_>>();
    let (starts, ends, axes, steps) = if cx.opset < 10 {
        cx.arity(1, 1)?;
        (
            consts(cx.aints("starts").ok_or_else(|| cx.err("starts is required"))?),
            consts(cx.aints("ends").ok_or_else(|| cx.err("ends is required"))?),
            cx.aints("axes"),
            None,
        )
    } else {
        cx.arity(3, 5)?;
        (cx.sym_ints(cx.inp(1)?)?, cx.sym_ints(cx.inp(2)?)?, cx.opt_ints(3)?, cx.opt_ints(4)?)
    };
    let axes: Vec<i64> =
        axes.filter(|a| !a.is_empty() || starts.is_empty()).unwrap_or_else(|| (0..starts.len() as i64).collect());
    let steps = steps.unwrap_or_else(|| vec![1; starts.len()]);
    if ends.len() != starts.len() || axes.len() != starts.len() || steps.len() != starts.len() {
        return Err(cx.err("starts, ends, axes and steps differ in length"));
    }
    let mut seen = vec![false; r];
    let mut plan = Vec::with_capacity(starts.len());
    for k in 0..starts.len() {
        let a = cx.axis(axes[k], r)?;
        if seen[a] {
            return Err(cx.err(format!("axis {a} is sliced twice")));
        }
        seen[a] = true;
        if steps[k] == 0 || steps[k].unsigned_abs() > crate::import::MAX_EXTENT {
            return Err(cx.err(format!("step {} is 0 or too large", steps[k])));
        }
        plan.push((a, &starts[k], &ends[k], steps[k]));
    }
    let bounds_static = starts.iter().chain(&ends).all(|p| p.as_const().is_some());
    if let (Some(s), true) = (cx.sym_shape(x).as_static(), bounds_static) {
        let mut dims: Vec<SliceDim> = s.iter().map(|&n| SliceDim { start: 0, step: 1, len: n }).collect();
        for &(a, st, en, step) in &plan {
            let (st, en) = (st.as_const().unwrap_or(0), en.as_const().unwrap_or(0));
            dims[a] = sinter_core::trace::slice_dim(s[a], st, en, step);
        }
        return cx.add(Op::Slice(dims), vec![x]);
    }
    // Symbolic extents or bounds: one gather per sliced axis.
    let mut y = x;
    for (a, st, en, step) in plan {
        if let (Some(n), Some(s0), Some(e0)) = (shape[a].as_static(), st.as_const(), en.as_const()) {
            let sd = sinter_core::trace::slice_dim(n, s0, e0, step);
            if sd.start == 0 && sd.step == 1 && sd.len == n {
                continue;
            }
            cx.guard(sd.len)?;
            let idx: Vec<i64> = (0..sd.len as i64).map(|i| sd.start as i64 + i * sd.step).collect();
            let c = cx.konst(HostTensor::from_i64(DType::I64, vec![idx.len()], &idx));
            y = cx.add(Op::Gather { axis: a }, vec![y, c])?;
            continue;
        }
        if step != 1 {
            return Err(cx.unsup(format!(
                "a slice with step {step} of symbolic extent {} or with symbolic bounds (specialize the model with \
                 graph_for or graph_for_inputs)",
                shape[a]
            )));
        }
        // Bounds relative to the extent: negative numbers count from the end, huge ones clamp.
        let d = Poly::of_dim(&shape[a]);
        let norm = |p: &Poly| -> Option<Poly> {
            match p.as_const() {
                Some(c) if c < 0 => d.add(&Poly::constant(c)),
                Some(c) if c as u64 >= crate::import::MAX_EXTENT => Some(d.clone()),
                _ => Some(p.clone()),
            }
        };
        let (s0, e0) = match (norm(st), norm(en)) {
            (Some(s0), Some(e0)) => (s0, e0),
            _ => return Err(cx.err("slice bounds overflow")),
        };
        if s0.as_const() == Some(0) && e0 == d {
            continue;
        }
        y = cx.slice_sym(y, a, &s0, &e0)?;
    }
    if y == x {
        return cx.add(Op::Reshape(cx.sym_shape(x)), vec![x]);
    }
    Ok(y)
}
