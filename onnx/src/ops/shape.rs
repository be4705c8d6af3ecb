//! Shape and movement ops: Shape, Size, Reshape, Flatten, (Un)Squeeze, Transpose, Concat, Split,
//! Slice, Expand, Tile, Pad, Constant, ConstantOfShape, Range, EyeLike, Trilu, OneHot,
//! Depth/SpaceToDepth, CenterCropPad, ReverseSequence, Dropout.

use crate::import::{Cx, R};
use sinter_core::ir::{BinaryOp as B, PadMode, SliceDim};
use sinter_core::shape::{Poly, broadcast};
use sinter_core::{DType, Dim, HostTensor, NodeId, Op, Shape};

type Out = R<Vec<Option<NodeId>>>;

pub(super) fn lower(cx: &mut Cx, op: &str) -> Option<Out> {
    let r = match op {
        "Shape" => one(cx, shape_op),
        "Size" => one(cx, |cx| {
            cx.arity(1, 1)?;
            let s = cx.shape(cx.inp(0)?)?;
            Ok(cx.konst(HostTensor::from_i64(DType::I64, vec![], &[s.iter().product::<usize>() as i64])))
        }),
        "Reshape" => one(cx, reshape),
        "Flatten" => one(cx, |cx| {
            cx.arity(1, 1)?;
            let x = cx.inp(0)?;
            let r = cx.rank(x);
            let a = cx.ai("axis", 1);
            let a = if a < 0 { a + r as i64 } else { a };
            if a < 0 || a > r as i64 {
                return Err(cx.err(format!("axis {a} out of range for rank {r}")));
            }
            let d = cx.dims(x);
            let prod = |ds: &[Dim]| Poly::product(ds).and_then(|p| p.to_dim());
            let (l, rr) = match (prod(&d[..a as usize]), prod(&d[a as usize..])) {
                (Some(l), Some(r)) => (l, r),
                _ => return Err(cx.err(format!("flattening {} overflows", cx.sym_shape(x)))),
            };
            cx.add(Op::Reshape(Shape(vec![l, rr])), vec![x])
        }),
        "Squeeze" => one(cx, squeeze),
        "Unsqueeze" => one(cx, unsqueeze),
        "Transpose" => one(cx, |cx| {
            cx.arity(1, 1)?;
            let x = cx.inp(0)?;
            let r = cx.rank(x);
            let perm: Vec<usize> = match cx.aints("perm") {
                Some(p) if !p.is_empty() || r == 0 => p.iter().map(|&a| cx.axis(a, r)).collect::<R<_>>()?,
                _ => (0..r).rev().collect(),
            };
            if perm.iter().enumerate().all(|(i, &p)| i == p) {
                return cx.add(Op::Permute(perm), vec![x]);
            }
            cx.permute(x, &perm)
        }),
        "Concat" => one(cx, |cx| {
            if cx.ins.is_empty() {
                return Err(cx.err("needs at least one input"));
            }
            let xs: Vec<NodeId> = (0..cx.ins.len()).map(|i| cx.inp(i)).collect::<R<_>>()?;
            let r = cx.rank(xs[0]);
            let a = cx.ai_opt("axis").unwrap_or(if cx.opset < 4 { 1 } else { i64::MIN });
            if a == i64::MIN {
                return Err(cx.err("attribute axis is required"));
            }
            let a = cx.axis(a, r)?;
            if xs.len() == 1 {
                return cx.add(Op::Concat { axis: a }, xs);
            }
            cx.add(Op::Concat { axis: a }, xs)
        }),
        "Split" => split(cx),
        "Slice" => one(cx, super::slice::slice),
        "Expand" => one(cx, |cx| {
            cx.arity(2, 2)?;
            let x = cx.inp(0)?;
            let want = cx.sym_ints(cx.inp(1)?)?;
            let want_s = sym_dims(cx, &want)?;
            let out = broadcast(&cx.sym_shape(x), &want_s)
                .ok_or_else(|| cx.err(format!("cannot expand {} to {want_s}", cx.sym_shape(x))))?;
            cx.add(Op::Expand(out), vec![x])
        }),
        "Tile" => one(cx, tile),
        "Pad" => one(cx, pad),
        "Dropout" => dropout(cx),
        "Constant" => one(cx, constant),
        "ConstantOfShape" => one(cx, |cx| {
            cx.arity(1, 1)?;
            let dims = cx.sym_ints(cx.inp(0)?)?;
            let dims = sym_dims(cx, &dims)?;
            let v = cx.atensor("value")?.unwrap_or_else(|| HostTensor::scalar(DType::F32, 0.0));
            if v.numel() != 1 {
                return Err(cx.err("value must hold exactly one element"));
            }
            let s = HostTensor { shape: vec![], data: v.data };
            let c = cx.konst(s);
            cx.add(Op::Expand(dims), vec![c])
        }),
        "Range" => one(cx, range),
        "EyeLike" => one(cx, |cx| {
            cx.arity(1, 1)?;
            let x = cx.inp(0)?;
            let s = cx.shape(x)?;
            if s.len() != 2 {
                return Err(cx.err("EyeLike needs a 2-D input"));
            }
            let d = match cx.ai_opt("dtype") {
                Some(_) => cx.dtype_attr("dtype")?,
                None => cx.dt(x),
            };
            let k = cx.ai("k", 0);
            cx.guard(s[0].saturating_mul(s[1]))?;
            let v: Vec<f64> =
                (0..s[0] * s[1]).map(|i| ((i % s[1]) as i64 - (i / s[1]) as i64 == k) as u8 as f64).collect();
            Ok(cx.konst(HostTensor::from_f64(d, s, &v)))
        }),
        "Trilu" => one(cx, trilu),
        "OneHot" => one(cx, onehot),
        "DepthToSpace" | "SpaceToDepth" => one(cx, |cx| depth_space(cx, op)),
        "CenterCropPad" => one(cx, center_crop_pad),
        "ReverseSequence" => one(cx, reverse_sequence),
        _ => return None,
    };
    Some(r)
}

fn one(cx: &mut Cx, f: impl FnOnce(&mut Cx) -> R<NodeId>) -> Out {
    f(cx).map(|x| vec![Some(x)])
}

/// Checks a list of extents (non-negative, sane) and turns it into a static shape.
pub(super) fn dims_from_ints(cx: &Cx, v: &[i64]) -> R<Shape> {
    let mut total: u64 = 1;
    let mut dims = Vec::with_capacity(v.len());
    for &d in v {
        if d < 0 {
            return Err(cx.err(format!("negative extent {d} in {v:?}")));
        }
        total = total.saturating_mul(d as u64);
        dims.push(d as usize);
    }
    if total > (1u64 << 40) {
        return Err(cx.err(format!("shape {v:?} has more than 2^40 elements")));
    }
    Ok(Shape::new(&dims))
}

/// A shape from a value that may hold expressions of the symbolic dims: numbers are checked as
/// in [`dims_from_ints`], expressions become symbolic dims.
pub(super) fn sym_dims(cx: &Cx, v: &[Poly]) -> R<Shape> {
    match v.iter().map(Poly::as_const).collect::<Option<Vec<i64>>>() {
        Some(c) => dims_from_ints(cx, &c),
        None => Ok(Shape(cx.dims_from_value(v)?)),
    }
}

fn shape_op(cx: &mut Cx) -> R<NodeId> {
    cx.arity(1, 1)?;
    let x = cx.inp(0)?;
    let dims = cx.dims(x);
    let r = dims.len() as i64;
    let clamp = |v: i64| -> usize { (if v < 0 { v + r } else { v }).clamp(0, r) as usize };
    let start = clamp(cx.ai("start", 0));
    let end = clamp(cx.ai("end", r));
    let picked = if start < end { &dims[start..end] } else { &[] };
    if picked.iter().any(|d| d.as_static().is_none()) {
        return cx.shape_value(picked);
    }
    let s: Vec<usize> = dims.iter().map(|d| d.as_static().unwrap_or(0)).collect();
    let v: Vec<i64> = if start < end { s[start..end].iter().map(|&d| d as i64).collect() } else { vec![] };
    Ok(cx.konst(HostTensor::from_i64(DType::I64, vec![v.len()], &v)))
}

fn reshape(cx: &mut Cx) -> R<NodeId> {
    let x = cx.inp(0)?;
    let want: Vec<Poly> = if cx.opset < 5 {
        cx.arity(1, 1)?;
        cx.aints("shape")
            .ok_or_else(|| cx.err("attribute shape is required"))?
            .into_iter()
            .map(Poly::constant)
            .collect()
    } else {
        cx.arity(2, 2)?;
        cx.sym_ints(cx.inp(1)?)?
    };
    let show = || format!("[{}]", want.iter().map(Poly::to_string).collect::<Vec<_>>().join(", "));
    let allowzero = cx.ai("allowzero", 0) != 0;
    let in_dims = cx.dims(x);
    let mut out: Vec<Option<Dim>> = Vec::with_capacity(want.len());
    let mut infer = None;
    for (i, w) in want.iter().enumerate() {
        match w.as_const() {
            Some(0) if !allowzero => {
                let d = in_dims
                    .get(i)
                    .cloned()
                    .ok_or_else(|| cx.err(format!("shape {}: 0 at axis {i} copies no input axis", show())))?;
                out.push(Some(d));
            }
            Some(-1) => {
                if infer.is_some() {
                    return Err(cx.err(format!("shape {} has more than one -1", show())));
                }
                infer = Some(i);
                out.push(None);
            }
            Some(w) if w < 0 => return Err(cx.err(format!("shape {} has a negative extent", show()))),
            Some(w) => out.push(Some(Dim::Static(w as usize))),
            None => out.push(Some(w.to_dim().ok_or_else(|| cx.err(format!("bad extent {w} in {}", show())))?)),
        }
    }
    if let Some(i) = infer {
        if let Some(s) = cx.sym_shape(x).as_static() {
            let total = s.iter().product::<usize>();
            let known =
                out.iter().flatten().map(|d| d.as_static().unwrap_or(1)).try_fold(1usize, |a, b| a.checked_mul(b));
            let known = known.ok_or_else(|| cx.err(format!("shape {} overflows", show())))?;
            if known == 0 || total % known != 0 {
                return Err(cx.err(format!("cannot reshape {} to {}", cx.sym_shape(x), show())));
            }
            out[i] = Some(Dim::Static(total / known));
        } else {
            // Symbolic: the element count divided by the other extents must be exact.
            let total = Poly::product(&in_dims);
            let known = Poly::product(out.iter().flatten());
            let d = total.zip(known).and_then(|(t, k)| t.div_exact(&k)).and_then(|q| q.to_dim()).ok_or_else(|| {
                cx.unsup(format!(
                    "the -1 of shape {} is not an expression of the symbolic dims of {} (specialize the model \
                     with graph_for or graph_for_inputs)",
                    show(),
                    cx.sym_shape(x)
                ))
            })?;
            out[i] = Some(d);
        }
    }
    let s = Shape(out.into_iter().map(|d| d.expect("filled")).collect());
    cx.add(Op::Reshape(s), vec![x])
}

/// Axes from the attribute (older opsets) or the second input.
fn axes_arg(cx: &Cx, from_input: bool) -> R<Option<Vec<i64>>> {
    if from_input { cx.opt_ints(1) } else { Ok(cx.aints("axes")) }
}

fn squeeze(cx: &mut Cx) -> R<NodeId> {
    let x = cx.inp(0)?;
    let axes = axes_arg(cx, cx.opset >= 13)?;
    let dims = cx.dims(x);
    let r = dims.len();
    let drop: Vec<usize> = match axes {
        Some(a) if !a.is_empty() => {
            let mut v = a.iter().map(|&a| cx.axis(a, r)).collect::<R<Vec<_>>>()?;
            v.sort_unstable();
            v.dedup();
            for &a in &v {
                if dims[a] != Dim::Static(1) {
                    return Err(cx.err(format!("cannot squeeze axis {a} of extent {}", dims[a])));
                }
            }
            v
        }
        _ => (0..r).filter(|&i| dims[i] == Dim::Static(1)).collect(),
    };
    let out: Vec<Dim> = dims.iter().enumerate().filter(|(i, _)| !drop.contains(i)).map(|(_, d)| d.clone()).collect();
    cx.add(Op::Reshape(Shape(out)), vec![x])
}

fn unsqueeze(cx: &mut Cx) -> R<NodeId> {
    let x = cx.inp(0)?;
    let axes = axes_arg(cx, cx.opset >= 13)?.ok_or_else(|| cx.err("axes are required"))?;
    let dims = cx.dims(x);
    let r = dims.len() + axes.len();
    let mut ins = axes.iter().map(|&a| cx.axis(a, r)).collect::<R<Vec<_>>>()?;
    ins.sort_unstable();
    let n = ins.len();
    ins.dedup();
    if ins.len() != n {
        return Err(cx.err(format!("axes {axes:?} repeat an axis")));
    }
    let mut it = dims.into_iter();
    let out: Vec<Dim> =
        (0..r).map(|i| if ins.contains(&i) { Dim::Static(1) } else { it.next().expect("rank adds up") }).collect();
    cx.add(Op::Reshape(Shape(out)), vec![x])
}

fn split(cx: &mut Cx) -> Out {
    let x = cx.inp(0)?;
    let dims = cx.dims(x);
    let axis = cx.axis(cx.ai("axis", 0), dims.len())?;
    // Other axes may be symbolic: the parts are then gathers of constant indices.
    let symbolic = dims.iter().enumerate().any(|(i, d)| i != axis && d.as_static().is_none());
    let s: Vec<usize> = if symbolic {
        if dims[axis].as_static().is_none() {
            cx.shape(x)?; // A symbolic split axis: the usual error.
        }
        // The symbolic extents (placeholders here) are only read on the split axis.
        dims.iter().map(|d| d.as_static().unwrap_or(0)).collect()
    } else {
        cx.shape(x)?
    };
    let n = s[axis];
    let sizes: Vec<usize> = {
        let given = if cx.opset >= 13 { cx.opt_ints(1)? } else { cx.aints("split").filter(|v| !v.is_empty()) };
        match given {
            Some(v) if !v.is_empty() => {
                if v.iter().any(|&d| d < 0) || v.iter().try_fold(0i64, |a, &b| a.checked_add(b)) != Some(n as i64) {
                    return Err(cx.err(format!("split {v:?} does not add up to extent {n}")));
                }
                v.iter().map(|&d| d as usize).collect()
            }
            _ => {
                let k = match cx.ai_opt("num_outputs") {
                    Some(k) if cx.opset >= 18 => k,
                    _ => cx.nout as i64,
                };
                if k <= 0 {
                    return Err(cx.err("needs at least one output"));
                }
                let k = k as usize;
                if cx.opset >= 18 && cx.ai_opt("num_outputs").is_some() {
                    let c = n.div_ceil(k);
                    (0..k).map(|i| c.min(n.saturating_sub(i * c))).collect()
                } else {
                    if !n.is_multiple_of(k) {
                        return Err(cx.err(format!("extent {n} does not split evenly into {k}")));
                    }
                    vec![n / k; k]
                }
            }
        }
    };
    let mut outs = Vec::new();
    let mut at = 0usize;
    for sz in sizes {
        if symbolic {
            cx.guard(sz)?;
            let idx: Vec<i64> = (at..at + sz).map(|i| i as i64).collect();
            let c = cx.konst(HostTensor::from_i64(DType::I64, vec![sz], &idx));
            outs.push(Some(cx.add(Op::Gather { axis }, vec![x, c])?));
            at += sz;
            continue;
        }
        let dims: Vec<SliceDim> = s
            .iter()
            .enumerate()
            .map(|(i, &d)| {
                if i == axis {
                    SliceDim { start: if sz > 0 { at } else { 0 }, step: 1, len: sz }
                } else {
                    SliceDim { start: 0, step: 1, len: d }
                }
            })
            .collect();
        outs.push(Some(cx.add(Op::Slice(dims), vec![x])?));
        at += sz;
    }
    Ok(outs)
}

fn tile(cx: &mut Cx) -> R<NodeId> {
    cx.arity(2, 2)?;
    let x = cx.inp(0)?;
    let reps = cx.ints(cx.inp(1)?)?;
    let s = cx.shape(x)?;
    if reps.len() != s.len() || reps.iter().any(|&r| r < 0) {
        return Err(cx.err(format!("repeats {reps:?} do not fit shape {s:?}")));
    }
    let mut inter = Vec::new();
    let mut big = Vec::new();
    let mut fin = Vec::new();
    for (&d, &r) in s.iter().zip(&reps) {
        if r as u64 > crate::import::MAX_EXTENT {
            return Err(cx.err(format!("repeat {r} is too large")));
        }
        inter.extend([1, d]);
        big.extend([r as usize, d]);
        fin.push((r as usize).checked_mul(d).ok_or_else(|| cx.err("tiled shape overflows"))?);
    }
    dims_from_ints(cx, &fin.iter().map(|&d| d as i64).collect::<Vec<_>>())?;
    let a = cx.reshape(x, &inter)?;
    let b = cx.expand(a, &big)?;
    let y = cx.reshape(b, &fin)?;
    if y == x {
        return cx.add(Op::Reshape(Shape::new(&fin)), vec![x]);
    }
    Ok(y)
}

fn pad(cx: &mut Cx) -> R<NodeId> {
    let x = cx.inp(0)?;
    let r = cx.rank(x);
    let mode = cx.as_str("mode", "constant");
    let (pads, value, axes) = if cx.opset < 11 {
        let p = cx.aints("pads").or_else(|| cx.aints("paddings")).ok_or_else(|| cx.err("pads is required"))?;
        (p, cx.af("value", 0.0) as f64, None)
    } else {
        cx.arity(2, 4)?;
        let p = cx.ints(cx.inp(1)?)?;
        let v = match cx.opt(2) {
            Some(c) => {
                let t = cx.val(c)?;
                if t.numel() != 1 {
                    return Err(cx.err("constant_value must hold one element"));
                }
                t.to_f64_vec()[0]
            }
            None => 0.0,
        };
        (p, v, cx.opt_ints(3)?)
    };
    let axes: Vec<usize> = match axes {
        Some(a) => a.iter().map(|&a| cx.axis(a, r)).collect::<R<_>>()?,
        None => (0..r).collect(),
    };
    if pads.len() != 2 * axes.len() {
        return Err(cx.err(format!("pads {pads:?} must hold 2 x {} values", axes.len())));
    }
    let mut pp = vec![(0i64, 0i64); r];
    let k = axes.len();
    for (i, &a) in axes.iter().enumerate() {
        pp[a] = (pads[i], pads[i + k]);
    }
    let mode = match mode.as_str() {
        "constant" => PadMode::Constant(value),
        "reflect" => PadMode::Reflect,
        "edge" => PadMode::Edge,
        "wrap" => PadMode::Wrap,
        m => return Err(cx.err(format!("unknown mode {m:?}"))),
    };
    cx.add(Op::Pad { pads: pp, mode }, vec![x])
}

fn dropout(cx: &mut Cx) -> Out {
    let x = cx.inp(0)?;
    let training = if cx.opset >= 12 {
        match cx.opt(2) {
            Some(t) => cx.ints(t)?.first().copied().unwrap_or(0) != 0,
            None => false,
        }
    } else {
        cx.opset < 7 && cx.ai("is_test", 0) == 0
    };
    let ratio = if cx.opset >= 12 {
        match cx.opt(1) {
            Some(r) => cx.floats(r)?.first().copied().unwrap_or(0.5),
            None => 0.5,
        }
    } else {
        cx.af("ratio", 0.5) as f64
    };
    if training && ratio != 0.0 {
        return Err(cx.unsup("training-mode dropout with a non-zero ratio is random"));
    }
    if !cx.dt(x).is_float() {
        return Err(cx.err("Dropout needs a float input"));
    }
    let y = x;
    let mut outs = vec![Some(y)];
    if cx.wants(1) {
        let s = cx.sym_shape(x);
        let d = if cx.opset >= 10 { DType::Bool } else { cx.dt(x) };
        let one = cx.scalar(d, 1.0);
        outs.push(Some(cx.add(Op::Expand(s), vec![one])?));
    }
    Ok(outs)
}

fn constant(cx: &mut Cx) -> R<NodeId> {
    cx.arity(0, 0)?;
    if let Some(t) = cx.atensor("value")? {
        return Ok(cx.konst(t));
    }
    if let Some(v) = cx.af_opt("value_float") {
        return Ok(cx.scalar(DType::F32, v as f64));
    }
    if let Some(v) = cx.afloats("value_floats") {
        let v: Vec<f64> = v.iter().map(|&x| x as f64).collect();
        return Ok(cx.konst(HostTensor::from_f64(DType::F32, vec![v.len()], &v)));
    }
    if let Some(v) = cx.ai_opt("value_int") {
        return Ok(cx.konst(HostTensor::from_i64(DType::I64, vec![], &[v])));
    }
    if let Some(v) = cx.aints("value_ints") {
        return Ok(cx.konst(HostTensor::from_i64(DType::I64, vec![v.len()], &v)));
    }
    if cx.attr("value_string").is_some() || cx.attr("value_strings").is_some() {
        return Err(cx.unsup("string constants have no sinter equivalent"));
    }
    if cx.attr("sparse_value").is_some() {
        return Err(cx.unsup("sparse constants are not supported"));
    }
    Err(cx.err("no value attribute"))
}

fn range(cx: &mut Cx) -> R<NodeId> {
    cx.arity(3, 3)?;
    let (s, l, d) = (cx.inp(0)?, cx.inp(1)?, cx.inp(2)?);
    let dt = cx.dt(s);
    let one = |cx: &Cx, v: NodeId| -> R<f64> {
        match cx.floats(v)?.as_slice() {
            [x] => Ok(*x),
            _ => Err(cx.err("start, limit and delta must be scalars")),
        }
    };
    let (sv, lv, dv) = (one(cx, s)?, one(cx, l)?, one(cx, d)?);
    if dv == 0.0 {
        return Err(cx.err("delta is 0"));
    }
    let n = ((lv - sv) / dv).ceil().max(0.0);
    if !n.is_finite() || n > (1u64 << 32) as f64 {
        return Err(cx.err(format!("range of {n} elements")));
    }
    let n = n as usize;
    // start + i * delta, computed from the inputs (only the length comes from their values).
    let i = cx.iota(n, dt)?;
    let s0 = cx.reshape(s, &[])?;
    let d0 = cx.reshape(d, &[])?;
    let step = cx.bin(B::Mul, i, d0)?;
    cx.bin(B::Add, step, s0)
}

fn trilu(cx: &mut Cx) -> R<NodeId> {
    cx.arity(1, 2)?;
    let x = cx.inp(0)?;
    if cx.rank(x) < 2 {
        return Err(cx.err("needs rank >= 2"));
    }
    let k = match cx.opt(1) {
        Some(k) => cx.ints(k)?.first().copied().unwrap_or(0),
        None => 0,
    };
    let upper = cx.ai("upper", 1) != 0;
    let d = cx.dims(x);
    let (dn, dm) = (&d[d.len() - 2], &d[d.len() - 1]);
    if dn.as_static().is_none() || dm.as_static().is_none() {
        // Symbolic rows or columns: the mask `c - r >= k` (or `<=`) from run-time iotas.
        let (dn, dm) = (dn.clone(), dm.clone());
        let rows = cx.iota_dim(&dn)?;
        let rows = cx.reshape_dims(rows, vec![dn, Dim::Static(1)])?;
        let cols = cx.iota_dim(&dm)?;
        let cols = cx.reshape_dims(cols, vec![Dim::Static(1), dm])?;
        let diff = cx.bin(B::Sub, cols, rows)?;
        let kk = cx.scalar(DType::I64, k as f64);
        let mk = cx.bin(if upper { B::Ge } else { B::Le }, diff, kk)?;
        let z = cx.scalar(cx.dt(x), 0.0);
        return cx.select(mk, x, z);
    }
    let s = cx.shape(x)?;
    let (n, m) = (s[s.len() - 2], s[s.len() - 1]);
    cx.guard(n.saturating_mul(m))?;
    let mask: Vec<i64> = (0..n * m)
        .map(|i| {
            let (r, c) = ((i / m) as i64, (i % m) as i64);
            (if upper { c - r >= k } else { c - r <= k }) as i64
        })
        .collect();
    let mk = cx.konst(HostTensor::from_i64(DType::Bool, vec![n, m], &mask));
    let z = cx.scalar(cx.dt(x), 0.0);
    cx.select(mk, x, z)
}

fn onehot(cx: &mut Cx) -> R<NodeId> {
    cx.arity(3, 3)?;
    let (idx, depth, values) = (cx.inp(0)?, cx.inp(1)?, cx.inp(2)?);
    let d = cx.floats(depth)?.first().copied().ok_or_else(|| cx.err("depth is empty"))?;
    if !(d >= 1.0 && d < (1u64 << 31) as f64) {
        return Err(cx.err(format!("depth {d} is out of range")));
    }
    let depth = d as usize;
    let s = cx.shape(idx)?;
    let r = s.len() + 1;
    let axis = cx.axis(cx.ai("axis", -1), r)?;
    let vs = cx.shape(values)?;
    if vs.iter().product::<usize>() != 2 {
        return Err(cx.err("values must hold [off, on]"));
    }
    // Indices may be floats; negative ones count from the end.
    let i64x = cx.cast(idx, DType::I64)?;
    let z = cx.scalar(DType::I64, 0.0);
    let neg = cx.bin(B::Lt, i64x, z)?;
    let wrapped = cx.bin_s(B::Add, i64x, depth as f64)?;
    let ix = cx.select(neg, wrapped, i64x)?;
    let mut us = s.clone();
    us.insert(axis, 1);
    let ix = cx.reshape(ix, &us)?;
    let mut is = vec![1; r];
    is[axis] = depth;
    let io = cx.iota(depth, DType::I64)?;
    let io = cx.reshape(io, &is)?;
    let hit = cx.bin(B::Eq, ix, io)?;
    let v = cx.reshape(values, &[2])?;
    let off = cx.slice(v, 0, 0, 1, 1)?;
    let on = cx.slice(v, 0, 1, 2, 1)?;
    let off = cx.reshape(off, &[])?;
    let on = cx.reshape(on, &[])?;
    cx.select(hit, on, off)
}

fn depth_space(cx: &mut Cx, op: &str) -> R<NodeId> {
    cx.arity(1, 1)?;
    let x = cx.inp(0)?;
    if op == "DepthToSpace" && cx.rank(x) == 4 && !cx.sym_shape(x).is_static() {
        return depth_to_space_symbolic(cx, x);
    }
    let s = cx.shape(x)?;
    if s.len() != 4 {
        return Err(cx.err("needs NCHW input"));
    }
    let b = cx.ai("blocksize", 0);
    if b <= 0 || b > 1 << 16 {
        return Err(cx.err("blocksize must be positive"));
    }
    let b = b as usize;
    let (n, c, h, w) = (s[0], s[1], s[2], s[3]);
    if op == "DepthToSpace" {
        if c % (b * b) != 0 {
            return Err(cx.err(format!("channels {c} not divisible by blocksize^2")));
        }
        let cc = c / (b * b);
        let (r, p) = if cx.as_str("mode", "DCR") == "CRD" {
            (cx.reshape(x, &[n, cc, b, b, h, w])?, [0, 1, 4, 2, 5, 3])
        } else {
            (cx.reshape(x, &[n, b, b, cc, h, w])?, [0, 3, 4, 1, 5, 2])
        };
        let t = cx.permute(r, &p)?;
        cx.reshape(t, &[n, cc, h * b, w * b])
    } else {
        if h % b != 0 || w % b != 0 {
            return Err(cx.err("spatial extents not divisible by blocksize"));
        }
        let r = cx.reshape(x, &[n, c, h / b, b, w / b, b])?;
        let perm = if cx.as_str("mode", "DCR") == "CRD" { [0, 1, 3, 5, 2, 4] } else { [0, 3, 5, 1, 2, 4] };
        let t = cx.permute(r, &perm)?;
        cx.reshape(t, &[n, c * b * b, h / b, w / b])
    }
}

/// DepthToSpace with symbolic batch or spatial extents (static channels): the same reshapes and
/// permutation, with `h * b` as expressions.
fn depth_to_space_symbolic(cx: &mut Cx, x: NodeId) -> R<NodeId> {
    let d = cx.dims(x);
    let b = cx.ai("blocksize", 0);
    if b <= 0 || b > 1 << 16 {
        return Err(cx.err("blocksize must be positive"));
    }
    let c = match d[1].as_static() {
        Some(c) => c,
        None => return cx.shape(x).map(|_| x), // The usual error.
    };
    let bu = b as usize;
    if c % (bu * bu) != 0 {
        return Err(cx.err(format!("channels {c} not divisible by blocksize^2")));
    }
    let cc = Dim::Static(c / (bu * bu));
    let bd = Dim::Static(bu);
    let (n, h, w) = (d[0].clone(), d[2].clone(), d[3].clone());
    let (r, p) = if cx.as_str("mode", "DCR") == "CRD" {
        (vec![n.clone(), cc.clone(), bd.clone(), bd.clone(), h.clone(), w.clone()], [0, 1, 4, 2, 5, 3])
    } else {
        (vec![n.clone(), bd.clone(), bd.clone(), cc.clone(), h.clone(), w.clone()], [0, 3, 4, 1, 5, 2])
    };
    let r = cx.reshape_dims(x, r)?;
    let t = cx.permute(r, &p)?;
    let scaled = |e: &Dim| Poly::of_dim(e).mul(&Poly::constant(b)).and_then(|p| p.to_dim());
    match (scaled(&h), scaled(&w)) {
        (Some(hb), Some(wb)) => cx.reshape_dims(t, vec![n, cc, hb, wb]),
        _ => Err(cx.err("the output extents overflow")),
    }
}

fn center_crop_pad(cx: &mut Cx) -> R<NodeId> {
    cx.arity(2, 2)?;
    let x = cx.inp(0)?;
    let target = cx.ints(cx.inp(1)?)?;
    let s = cx.shape(x)?;
    let r = s.len();
    let axes: Vec<usize> = match cx.aints("axes") {
        Some(a) => a.iter().map(|&a| cx.axis(a, r)).collect::<R<_>>()?,
        None => (0..r).collect(),
    };
    if axes.len() != target.len() {
        return Err(cx.err("shape and axes differ in length"));
    }
    let mut pads = vec![(0i64, 0i64); r];
    for (&a, &t) in axes.iter().zip(&target) {
        let d = s[a] as i64;
        if t < 0 || t as u64 > crate::import::MAX_EXTENT {
            return Err(cx.err("target extent out of range"));
        }
        if t < d {
            let k = d - t;
            pads[a] = (-(k / 2), -(k - k / 2));
        } else if t > d {
            let k = t - d;
            pads[a] = (k / 2, k - k / 2);
        }
    }
    cx.add(Op::Pad { pads, mode: PadMode::Constant(0.0) }, vec![x])
}

fn reverse_sequence(cx: &mut Cx) -> R<NodeId> {
    cx.arity(2, 2)?;
    let (x, lens) = (cx.inp(0)?, cx.inp(1)?);
    let s = cx.shape(x)?;
    let r = s.len();
    let ba = cx.axis(cx.ai("batch_axis", 1), r)?;
    let ta = cx.axis(cx.ai("time_axis", 0), r)?;
    if ba == ta || r < 2 {
        return Err(cx.err("batch_axis and time_axis must differ"));
    }
    let mut ts = vec![1; r];
    ts[ta] = s[ta];
    let t = cx.iota(s[ta], DType::I64)?;
    let t = cx.reshape(t, &ts)?;
    let mut ls = vec![1; r];
    ls[ba] = s[ba];
    let l = cx.cast(lens, DType::I64)?;
    let l = cx.reshape(l, &ls)?;
    // idx = t < len ? len - 1 - t : t
    let inside = cx.bin(B::Lt, t, l)?;
    let lm1 = cx.bin_s(B::Sub, l, 1.0)?;
    let rev = cx.bin(B::Sub, lm1, t)?;
    let idx = cx.select(inside, rev, t)?;
    let idx = cx.expand(idx, &s)?;
    cx.add(Op::GatherElements { axis: ta }, vec![x, idx])
}
