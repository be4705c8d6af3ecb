//! Reductions and ops along an axis: Reduce*, ArgMax/ArgMin, Softmax/LogSoftmax/Hardmax,
//! CumSum/CumProd (log-step scans of shifted adds/multiplies) and TopK (through ranks).

use crate::import::{Cx, R};
use sinter_core::ir::{ArgOp, BinaryOp as B, PadMode, ReduceOp, UnaryOp as U};
use sinter_core::{DType, HostTensor, NodeId, Op};

type Out = R<Vec<Option<NodeId>>>;

pub(super) fn lower(cx: &mut Cx, op: &str) -> Option<Out> {
    let r = match op {
        "ReduceSum" | "ReduceMean" | "ReduceMax" | "ReduceMin" | "ReduceProd" | "ReduceL1" | "ReduceL2"
        | "ReduceLogSum" | "ReduceLogSumExp" | "ReduceSumSquare" => one(cx, |cx| reduce(cx, op)),
        "ArgMax" | "ArgMin" => one(cx, |cx| {
            cx.arity(1, 1)?;
            let x = cx.inp(0)?;
            let axis = cx.axis(cx.ai("axis", 0), cx.rank(x))?;
            let keepdim = cx.ai("keepdims", 1) != 0;
            let select_last = cx.ai("select_last_index", 0) != 0;
            let op = if op == "ArgMax" { ArgOp::ArgMax } else { ArgOp::ArgMin };
            cx.add(Op::ArgReduce { op, axis, keepdim, select_last }, vec![x])
        }),
        "Softmax" | "LogSoftmax" | "Hardmax" => one(cx, |cx| softmax(cx, op)),
        "CumSum" | "CumProd" => one(cx, |cx| cumulative(cx, op == "CumProd")),
        "TopK" => topk(cx),
        _ => return None,
    };
    Some(r)
}

fn one(cx: &mut Cx, f: impl FnOnce(&mut Cx) -> R<NodeId>) -> Out {
    f(cx).map(|x| vec![Some(x)])
}

/// The axes of a Reduce* node (attribute or input by opset), normalized; `None` = identity.
fn reduce_axes(cx: &Cx, op: &str, rank: usize) -> R<Option<Vec<usize>>> {
    let from_input = if op == "ReduceSum" { cx.opset >= 13 } else { cx.opset >= 18 };
    let axes = if from_input { cx.opt_ints(1)? } else { cx.aints("axes") };
    let noop = cx.ai("noop_with_empty_axes", 0) != 0;
    match axes {
        Some(a) if !a.is_empty() => {
            let mut v = a.iter().map(|&a| cx.axis(a, rank)).collect::<R<Vec<_>>>()?;
            v.sort_unstable();
            v.dedup();
            Ok(Some(v))
        }
        _ if noop => Ok(None),
        _ => Ok(Some((0..rank).collect())),
    }
}

fn reduce(cx: &mut Cx, op: &str) -> R<NodeId> {
    let x = cx.inp(0)?;
    let r = cx.rank(x);
    let keep = cx.ai("keepdims", 1) != 0;
    let Some(axes) = reduce_axes(cx, op, r)? else {
        // noop_with_empty_axes: the input itself (L1/L2/... still apply their elementwise part).
        return match op {
            "ReduceL1" => cx.un(U::Abs, x),
            "ReduceSumSquare" => cx.bin(B::Mul, x, x),
            "ReduceL2" => {
                let sq = cx.bin(B::Mul, x, x)?;
                cx.un(U::Sqrt, sq)
            }
            "ReduceLogSum" => cx.un(U::Log, x),
            "ReduceLogSumExp" => {
                let e = cx.un(U::Exp, x)?;
                cx.un(U::Log, e)
            }
            _ => Ok(x),
        };
    };
    let d = cx.dt(x);
    if matches!(op, "ReduceMax" | "ReduceMin") {
        let s = cx.shape(x)?;
        if axes.iter().any(|&a| s[a] == 0) {
            // Reducing an empty set: the identity (lowest / highest value), as the reference.
            let out = sinter_core::infer::reduced(&sinter_core::Shape::new(&s), &axes, keep);
            let v = match (op, d) {
                (_, DType::Bool) => (op == "ReduceMin") as u8 as f64,
                ("ReduceMax", d) if d.is_float() => f64::NEG_INFINITY,
                ("ReduceMin", d) if d.is_float() => f64::INFINITY,
                ("ReduceMax", d) => int_limit(d, false),
                (_, d) => int_limit(d, true),
            };
            let c = cx.scalar(d, v);
            return cx.add(Op::Expand(out), vec![c]);
        }
    }
    let needs_float = matches!(op, "ReduceMean" | "ReduceL2" | "ReduceLogSum" | "ReduceLogSumExp");
    let (xin, back) = if needs_float && !d.is_float() { (cx.cast(x, DType::F64)?, Some(d)) } else { (x, None) };
    let y = match op {
        "ReduceSum" => cx.reduce(ReduceOp::Sum, xin, &axes, keep)?,
        "ReduceMean" => cx.reduce(ReduceOp::Mean, xin, &axes, keep)?,
        "ReduceMax" => cx.reduce(ReduceOp::Max, xin, &axes, keep)?,
        "ReduceMin" => cx.reduce(ReduceOp::Min, xin, &axes, keep)?,
        "ReduceProd" => cx.reduce(ReduceOp::Prod, xin, &axes, keep)?,
        "ReduceL1" => {
            let a = cx.un(U::Abs, xin)?;
            cx.reduce(ReduceOp::Sum, a, &axes, keep)?
        }
        "ReduceSumSquare" => {
            let sq = cx.bin(B::Mul, xin, xin)?;
            cx.reduce(ReduceOp::Sum, sq, &axes, keep)?
        }
        "ReduceL2" => {
            let sq = cx.bin(B::Mul, xin, xin)?;
            let s = cx.reduce(ReduceOp::Sum, sq, &axes, keep)?;
            cx.un(U::Sqrt, s)?
        }
        "ReduceLogSum" => {
            let s = cx.reduce(ReduceOp::Sum, xin, &axes, keep)?;
            cx.un(U::Log, s)?
        }
        _ => {
            // log(sum(exp(x - m))) + m with m the (finite) max, for stability.
            let s = cx.shape(xin)?;
            let empty = axes.iter().any(|&a| s[a] == 0);
            if empty {
                let e = cx.un(U::Exp, xin)?;
                let s = cx.reduce(ReduceOp::Sum, e, &axes, keep)?;
                cx.un(U::Log, s)?
            } else {
                let m = cx.reduce(ReduceOp::Max, xin, &axes, true)?;
                let fin = cx.un(U::IsInf, m)?;
                let z = cx.scalar(cx.dt(m), 0.0);
                let m = cx.select(fin, z, m)?;
                let sh = cx.bin(B::Sub, xin, m)?;
                let e = cx.un(U::Exp, sh)?;
                let s = cx.reduce(ReduceOp::Sum, e, &axes, keep)?;
                let l = cx.un(U::Log, s)?;
                let m = if keep { m } else { cx.reduce(ReduceOp::Max, m, &axes, false)? };
                cx.bin(B::Add, l, m)?
            }
        }
    };
    match back {
        Some(d) => cx.cast(y, d),
        None => Ok(y),
    }
}

/// The lowest (or highest) value of an integer dtype, as f64.
fn int_limit(d: DType, high: bool) -> f64 {
    let bits = d.size_bytes() as i32 * 8;
    match (d.is_signed_int(), high) {
        (true, false) => -(2f64.powi(bits - 1)),
        (true, true) => 2f64.powi(bits - 1) - 1.0,
        (false, false) => 0.0,
        (false, true) => 2f64.powi(bits) - 1.0,
    }
}

fn softmax(cx: &mut Cx, op: &str) -> R<NodeId> {
    cx.arity(1, 1)?;
    let x = cx.inp(0)?;
    let r = cx.rank(x);
    if r == 0 {
        return Err(cx.err("needs an input of rank >= 1"));
    }
    let legacy = cx.opset < 13;
    let axis = cx.axis(cx.ai("axis", if legacy { 1 } else { -1 }), r)?;
    let apply = |cx: &mut Cx, v: NodeId, axis: usize| -> R<NodeId> {
        match op {
            "Softmax" => cx.add(Op::Softmax { axis }, vec![v]),
            "LogSoftmax" => cx.add(Op::LogSoftmax { axis }, vec![v]),
            _ => {
                let am =
                    cx.add(Op::ArgReduce { op: ArgOp::ArgMax, axis, keepdim: true, select_last: false }, vec![v])?;
                let s = cx.shape(v)?;
                let mut is = vec![1; s.len()];
                is[axis] = s[axis];
                let io = cx.iota(s[axis], DType::I64)?;
                let io = cx.reshape(io, &is)?;
                let hit = cx.bin(B::Eq, am, io)?;
                cx.cast(hit, cx.dt(v))
            }
        }
    };
    if legacy && axis != r - 1 {
        // Opset < 13 coerces the input to 2-D [prod(..axis), prod(axis..)].
        let s = cx.shape(x)?;
        let (a, b): (usize, usize) = (s[..axis].iter().product(), s[axis..].iter().product());
        let x2 = cx.reshape(x, &[a, b])?;
        let y = apply(cx, x2, 1)?;
        return cx.reshape(y, &s);
    }
    apply(cx, x, axis)
}

/// Shifts `y` by `s` positions along `axis` (towards higher indices), filling with `fill`.
fn shift(cx: &mut Cx, y: NodeId, axis: usize, s: usize, fill: f64) -> R<NodeId> {
    let r = cx.rank(y);
    let mut pads = vec![(0i64, 0i64); r];
    pads[axis] = (s as i64, -(s as i64));
    cx.add(Op::Pad { pads, mode: PadMode::Constant(fill) }, vec![y])
}

/// Scan steps over a symbolic axis: exact for extents below 2^31 (the steps past the extent add
/// the fill).
const SYMBOLIC_SCAN_STEPS: u32 = 31;

fn cumulative(cx: &mut Cx, prod: bool) -> R<NodeId> {
    cx.arity(2, 2)?;
    let x = cx.inp(0)?;
    let a = cx.ints(cx.inp(1)?)?;
    let dims = cx.dims(x);
    let axis = cx.axis(*a.first().ok_or_else(|| cx.err("axis is empty"))?, dims.len())?;
    let (exclusive, reverse) = (cx.ai("exclusive", 0) != 0, cx.ai("reverse", 0) != 0);
    if !reverse && !cx.sym_shape(x).is_static() {
        // Symbolic extents: shifts are pads, so the scan runs for any extent below 2^31.
        let n = dims[axis].as_static().unwrap_or(1 << SYMBOLIC_SCAN_STEPS);
        let (b, fill) = if prod { (B::Mul, 1.0) } else { (B::Add, 0.0) };
        let mut y = if exclusive && n > 0 { shift(cx, x, axis, 1, fill)? } else { x };
        let mut step = 1;
        while step < n {
            let sh = shift(cx, y, axis, step, fill)?;
            y = cx.bin(b, y, sh)?;
            step *= 2;
        }
        if y == x {
            y = cx.add(Op::Pad { pads: vec![(0, 0); dims.len()], mode: PadMode::Constant(0.0) }, vec![x])?;
        }
        return Ok(y);
    }
    let s = cx.shape(x)?;
    let n = s[axis];
    let (b, fill) = if prod { (B::Mul, 1.0) } else { (B::Add, 0.0) };
    let mut y = x;
    if reverse {
        y = cx.slice(y, axis, -1, i64::MIN, -1)?;
    }
    if exclusive && n > 0 {
        y = shift(cx, y, axis, 1, fill)?;
    }
    let mut step = 1;
    while step < n {
        let sh = shift(cx, y, axis, step, fill)?;
        y = cx.bin(b, y, sh)?;
        step *= 2;
    }
    if reverse {
        y = cx.slice(y, axis, -1, i64::MIN, -1)?;
    }
    if y == x {
        y = cx.add(Op::Pad { pads: vec![(0, 0); s.len()], mode: PadMode::Constant(0.0) }, vec![x])?;
    }
    Ok(y)
}

fn topk(cx: &mut Cx) -> Out {
    let x = cx.inp(0)?;
    let s = cx.shape(x)?;
    let r = s.len();
    let axis = cx.axis(cx.ai("axis", -1), r)?;
    let k = if cx.opset < 10 {
        cx.ai("k", -1)
    } else {
        cx.arity(2, 2)?;
        cx.ints(cx.inp(1)?)?.first().copied().ok_or_else(|| cx.err("K is empty"))?
    };
    let n = s[axis];
    if k < 0 || k as usize > n {
        return Err(cx.err(format!("k={k} out of range for extent {n}")));
    }
    let k = k as usize;
    if n > 4096 {
        return Err(cx.unsup(format!("TopK over {n} elements (the rank-based lowering is quadratic)")));
    }
    let largest = cx.ai("largest", 1) != 0;
    let d = cx.dt(x);
    let (xl, perm) = cx.axis_last(x, axis)?;
    let ls = cx.shape(xl)?;
    let mut a_s = ls.clone();
    a_s.push(1);
    let mut b_s = ls.clone();
    b_s.insert(r - 1, 1);
    let a = cx.reshape(xl, &a_s)?; // [..., n, 1]: element i
    let b = cx.reshape(xl, &b_s)?; // [..., 1, n]: element j
    // j beats i when strictly better, or equal with a smaller index.
    let better = cx.bin(if largest { B::Gt } else { B::Lt }, b, a)?;
    let eq = cx.bin(B::Eq, b, a)?;
    let lt: Vec<i64> = (0..n * n).map(|q| ((q % n) < (q / n)) as i64).collect();
    let lt = cx.konst(HostTensor::from_i64(DType::Bool, vec![n, n], &lt));
    let tie = cx.bin(B::And, eq, lt)?;
    let beats = cx.bin(B::Or, better, tie)?;
    let beats = cx.cast(beats, DType::I64)?;
    let rank = cx.reduce(ReduceOp::Sum, beats, &[r], true)?; // [..., n, 1]
    let kk = cx.iota(k, DType::I64)?;
    let sel = cx.bin(B::Eq, rank, kk)?; // [..., n, k]
    let zero = cx.scalar(d, 0.0);
    let vals = cx.select(sel, a, zero)?;
    let vals = cx.reduce(ReduceOp::Sum, vals, &[r - 1], false)?; // [..., k]
    let io = cx.iota(n, DType::I64)?;
    let io = cx.reshape(io, &[n, 1])?;
    let zi = cx.scalar(DType::I64, 0.0);
    let idx = cx.select(sel, io, zi)?;
    let idx = cx.reduce(ReduceOp::Sum, idx, &[r - 1], false)?;
    let inv = Cx::inverse_perm(&perm);
    let vals = cx.permute(vals, &inv)?;
    let idx = cx.permute(idx, &inv)?;
    Ok(vec![Some(vals), Some(idx)])
}
