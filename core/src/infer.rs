//! Shape and dtype inference: the type of an op's result from its operands' types.
//! Errors are plain messages; callers wrap them with the op name and operand types.

use crate::dtype::DType;
use crate::ir::{BinaryOp, Op, PoolKind, ReduceOp, TensorType, UnaryOp};
use crate::shape::{Dim, Poly, Shape, broadcast};

type R = Result<TensorType, String>;

fn arity(op: &Op, ins: &[&TensorType], want: std::ops::RangeInclusive<usize>) -> Result<(), String> {
    if want.contains(&ins.len()) {
        Ok(())
    } else {
        Err(format!("{} takes {:?} operands, got {}", op.name(), want, ins.len()))
    }
}

fn same_dtype(ins: &[&TensorType]) -> Result<DType, String> {
    let d = ins[0].dtype;
    for t in &ins[1..] {
        if t.dtype != d {
            return Err(format!("dtype clash: {} vs {}", d, t.dtype));
        }
    }
    Ok(d)
}

fn need_float(d: DType, what: &str) -> Result<(), String> {
    if d.is_float() { Ok(()) } else { Err(format!("{what} needs a floating-point operand, got {d}")) }
}

fn bcast(a: &Shape, b: &Shape) -> Result<Shape, String> {
    broadcast(a, b).ok_or_else(|| format!("shapes {a} and {b} do not broadcast"))
}

fn static_dims(s: &Shape, what: &str) -> Result<Vec<usize>, String> {
    s.as_static().ok_or_else(|| format!("{what} needs static dims, got {s}"))
}

/// The element count of a shape as a polynomial of its symbols.
fn numel_poly(s: &Shape) -> Option<Poly> {
    Poly::product(s.dims())
}

/// The output extent of a 2-D window along `axis` for an input extent that may be symbolic:
/// `floor((h + pads - eff) / stride) + 1`, an expression of `h` where the stride divides its
/// coefficients (always for stride 1); other symbolic cases and `ceil_mode` need static extents.
fn window_extent(w: &crate::ir::Window2d, axis: usize, d: &Dim, ceil: bool, what: &str) -> Result<Dim, String> {
    if let Some(n) = d.as_static() {
        return w.out_extent(axis, n, ceil).map(Dim::Static).ok_or(format!("{what} window larger than padded input"));
    }
    let fail =
        || format!("{what} output extent along axis {} of symbolic extent {d} is not an expression of it", axis + 2);
    if ceil || w.stride[axis] == 0 || w.kernel[axis] == 0 {
        return Err(fail());
    }
    let eff = (w.dilation[axis] * (w.kernel[axis] - 1) + 1) as i64;
    let pads = (w.padding[axis] + w.padding[axis + 2]) as i64;
    let span = Poly::of_dim(d).add(&Poly::constant(pads - eff)).ok_or_else(fail)?;
    let out = span.floor_div(w.stride[axis] as i64).and_then(|q| q.add(&Poly::constant(1))).ok_or_else(fail)?;
    out.to_dim().ok_or_else(fail)
}

/// Infers the result type of `op` applied to operands of types `ins`.
pub fn infer(op: &Op, ins: &[&TensorType]) -> R {
    match op {
        Op::Input { .. } => Err("input nodes are created with Graph::add_input".into()),
        Op::Constant(t) => {
            arity(op, ins, 0..=0)?;
            Ok(TensorType::new(t.dtype(), Shape::new(&t.shape)))
        }
        Op::Unary(u) => {
            arity(op, ins, 1..=1)?;
            let d = ins[0].dtype;
            match u {
                UnaryOp::Not if d != DType::Bool => return Err(format!("not needs bool, got {d}")),
                UnaryOp::Not => {}
                UnaryOp::IsNan | UnaryOp::IsInf => {
                    need_float(d, u.name())?;
                    return Ok(TensorType::new(DType::Bool, ins[0].shape.clone()));
                }
                _ if u.float_only() => need_float(d, u.name())?,
                _ if d == DType::Bool => return Err(format!("{} is not defined on bool", u.name())),
                _ => {}
            }
            Ok(ins[0].clone())
        }
        Op::Binary(b) => {
            arity(op, ins, 2..=2)?;
            let d = same_dtype(ins)?;
            let shape = bcast(&ins[0].shape, &ins[1].shape)?;
            if b.is_logical() {
                if d != DType::Bool {
                    return Err(format!("{} needs bool operands, got {d}", b.name()));
                }
                return Ok(TensorType::new(DType::Bool, shape));
            }
            if b.is_comparison() {
                return Ok(TensorType::new(DType::Bool, shape));
            }
            if d == DType::Bool && !matches!(b, BinaryOp::Max | BinaryOp::Min) {
                return Err(format!("{} is not defined on bool", b.name()));
            }
            Ok(TensorType::new(d, shape))
        }
        Op::Where => {
            arity(op, ins, 3..=3)?;
            if ins[0].dtype != DType::Bool {
                return Err(format!("where's condition must be bool, got {}", ins[0].dtype));
            }
            let d = same_dtype(&ins[1..])?;
            let s = bcast(&bcast(&ins[0].shape, &ins[1].shape)?, &ins[2].shape)?;
            Ok(TensorType::new(d, s))
        }
        Op::Cast(to) => {
            arity(op, ins, 1..=1)?;
            Ok(TensorType::new(*to, ins[0].shape.clone()))
        }
        Op::Reduce { op: r, axes, keepdim } => {
            arity(op, ins, 1..=1)?;
            let t = ins[0];
            check_axes(axes, t.shape.rank())?;
            if t.dtype == DType::Bool && *r != ReduceOp::Max && *r != ReduceOp::Min {
                return Err(format!("reduce_{} is not defined on bool", r.name()));
            }
            if *r == ReduceOp::Mean {
                need_float(t.dtype, "reduce_mean")?;
            }
            Ok(TensorType::new(t.dtype, reduced(&t.shape, axes, *keepdim)))
        }
        Op::ArgReduce { axis, keepdim, .. } => {
            arity(op, ins, 1..=1)?;
            check_axes(&[*axis], ins[0].shape.rank())?;
            Ok(TensorType::new(DType::I64, reduced(&ins[0].shape, &[*axis], *keepdim)))
        }
        Op::Reshape(s) => {
            arity(op, ins, 1..=1)?;
            let t = ins[0];
            match (t.shape.numel(), s.numel()) {
                (Some(a), Some(b)) if a != b => {
                    Err(format!("cannot reshape {} ({a} elements) to {s} ({b} elements)", t.shape))
                }
                (Some(_), Some(_)) => Ok(TensorType::new(t.dtype, s.clone())),
                _ => {
                    // Symbolic: the element counts must be the same polynomial of the symbols
                    // (dims may name expressions such as `batch*seq`).
                    if numel_poly(&t.shape) == numel_poly(s) {
                        Ok(TensorType::new(t.dtype, s.clone()))
                    } else {
                        Err(format!("cannot reshape {} to {s}", t.shape))
                    }
                }
            }
        }
        Op::Permute(p) => {
            arity(op, ins, 1..=1)?;
            let t = ins[0];
            let mut seen = vec![false; t.shape.rank()];
            if p.len() != t.shape.rank() {
                return Err(format!("permutation {p:?} has the wrong rank for {}", t.shape));
            }
            for &a in p {
                if a >= seen.len() || seen[a] {
                    return Err(format!("{p:?} is not a permutation of rank {}", t.shape.rank()));
                }
                seen[a] = true;
            }
            Ok(TensorType::new(t.dtype, Shape(p.iter().map(|&a| t.shape.0[a].clone()).collect())))
        }
        Op::Expand(s) => {
            arity(op, ins, 1..=1)?;
            let t = ins[0];
            let b = bcast(&t.shape, s)?;
            if &b != s {
                return Err(format!("cannot expand {} to {s}", t.shape));
            }
            Ok(TensorType::new(t.dtype, s.clone()))
        }
        Op::Slice(dims) => {
            arity(op, ins, 1..=1)?;
            let t = ins[0];
            let d = static_dims(&t.shape, "slice")?;
            if dims.len() != d.len() {
                return Err(format!("slice has {} dims for a rank-{} operand", dims.len(), d.len()));
            }
            for (i, (sd, &n)) in dims.iter().zip(&d).enumerate() {
                if sd.step == 0 {
                    return Err(format!("slice step 0 on axis {i}"));
                }
                if sd.len > 0 {
                    let last = sd.start as i64 + (sd.len as i64 - 1) * sd.step;
                    if sd.start >= n || last < 0 || last >= n as i64 {
                        return Err(format!(
                            "slice {}:{}:{} reads outside axis {i} of extent {n}",
                            sd.start, sd.step, sd.len
                        ));
                    }
                }
            }
            Ok(TensorType::new(t.dtype, Shape::new(&dims.iter().map(|s| s.len).collect::<Vec<_>>())))
        }
        Op::Concat { axis } => {
            if ins.is_empty() {
                return Err("concat needs at least one operand".into());
            }
            let d = same_dtype(ins)?;
            let r = ins[0].shape.rank();
            check_axes(&[*axis], r)?;
            let mut total = Poly::constant(0);
            for t in ins {
                if t.shape.rank() != r {
                    return Err(format!("concat operands differ in rank: {} vs {}", ins[0].shape, t.shape));
                }
                for a in 0..r {
                    if a != *axis && t.shape.0[a] != ins[0].shape.0[a] {
                        return Err(format!("concat operands differ off the axis: {} vs {}", ins[0].shape, t.shape));
                    }
                }
                total = total.add(&Poly::of_dim(&t.shape.0[*axis])).ok_or("concat extent overflows")?;
            }
            let mut s = ins[0].shape.clone();
            s.0[*axis] = total.to_dim().ok_or("concat extent overflows")?;
            Ok(TensorType::new(d, s))
        }
        Op::Pad { pads, .. } => {
            arity(op, ins, 1..=1)?;
            let t = ins[0];
            let d = t.shape.dims();
            if pads.len() != d.len() {
                return Err(format!("pad has {} axis pairs for rank {}", pads.len(), d.len()));
            }
            let mut out = Vec::new();
            for (n, &(b, a)) in d.iter().zip(pads) {
                // A symbolic extent pads to an expression (`h + 2`); its sign is checked once the
                // symbols are bound.
                let m = Poly::of_dim(n).add(&Poly::constant(b.saturating_add(a))).and_then(|m| m.to_dim());
                match m {
                    Some(m) => out.push(m),
                    None => return Err(format!("pad ({b}, {a}) leaves a negative extent from {n}")),
                }
            }
            Ok(TensorType::new(t.dtype, Shape(out)))
        }
        Op::Gather { axis } => {
            arity(op, ins, 2..=2)?;
            let (data, idx) = (ins[0], ins[1]);
            check_axes(&[*axis], data.shape.rank())?;
            if !idx.dtype.is_int() {
                return Err(format!("gather indices must be integers, got {}", idx.dtype));
            }
            let mut s = data.shape.0[..*axis].to_vec();
            s.extend(idx.shape.0.iter().cloned());
            s.extend(data.shape.0[*axis + 1..].iter().cloned());
            Ok(TensorType::new(data.dtype, Shape(s)))
        }
        Op::GatherElements { axis } => {
            arity(op, ins, 2..=2)?;
            let (data, idx) = (ins[0], ins[1]);
            check_axes(&[*axis], data.shape.rank())?;
            if !idx.dtype.is_int() {
                return Err(format!("gather_elements indices must be integers, got {}", idx.dtype));
            }
            if idx.shape.rank() != data.shape.rank() {
                return Err(format!("gather_elements ranks differ: {} vs {}", data.shape, idx.shape));
            }
            Ok(TensorType::new(data.dtype, idx.shape.clone()))
        }
        Op::MatMul => {
            arity(op, ins, 2..=2)?;
            let d = same_dtype(ins)?;
            if d == DType::Bool {
                return Err("matmul is not defined on bool".into());
            }
            Ok(TensorType::new(d, matmul_shape(&ins[0].shape, &ins[1].shape)?))
        }
        Op::Conv2d { window, groups } => {
            arity(op, ins, 2..=3)?;
            let d = same_dtype(ins)?;
            need_float(d, "conv2d")?;
            let xs = &ins[0].shape;
            let w = static_dims(&ins[1].shape, "conv2d")?;
            if xs.rank() != 4 || w.len() != 4 {
                return Err(format!("conv2d needs NCHW input and OIHW weight, got {xs} and {:?}", w));
            }
            let c = xs.0[1].as_static().ok_or_else(|| format!("conv2d needs static channels, got {xs}"))?;
            if *groups == 0 || c % groups != 0 || w[0] % groups != 0 || c / groups != w[1] {
                return Err(format!("conv2d channels: input {c} channels, weight {:?}, groups {groups}", w));
            }
            if [w[2], w[3]] != window.kernel {
                return Err(format!(
                    "conv2d window kernel {:?} differs from the weight's {:?}",
                    window.kernel,
                    [w[2], w[3]]
                ));
            }
            if ins.len() == 3 && ins[2].shape != Shape::new(&[w[0]]) {
                return Err(format!("conv2d bias must be [{}], got {}", w[0], ins[2].shape));
            }
            let oh = window_extent(window, 0, &xs.0[2], false, "conv2d")?;
            let ow = window_extent(window, 1, &xs.0[3], false, "conv2d")?;
            Ok(TensorType::new(d, Shape(vec![xs.0[0].clone(), Dim::Static(w[0]), oh, ow])))
        }
        Op::Pool2d { window, ceil_mode, kind, .. } => {
            arity(op, ins, 1..=1)?;
            let x = &ins[0].shape;
            if x.rank() != 4 {
                return Err(format!("pool2d needs NCHW input, got {x}"));
            }
            if *kind == PoolKind::Avg {
                need_float(ins[0].dtype, "avg_pool2d")?;
            }
            let oh = window_extent(window, 0, &x.0[2], *ceil_mode, "pool")?;
            let ow = window_extent(window, 1, &x.0[3], *ceil_mode, "pool")?;
            Ok(TensorType::new(ins[0].dtype, Shape(vec![x.0[0].clone(), x.0[1].clone(), oh, ow])))
        }
        Op::Softmax { axis } | Op::LogSoftmax { axis } => {
            arity(op, ins, 1..=1)?;
            need_float(ins[0].dtype, op.name())?;
            check_axes(&[*axis], ins[0].shape.rank())?;
            Ok(ins[0].clone())
        }
        Op::LayerNorm { axis, has_weight, has_bias, .. } => {
            let n = 1 + *has_weight as usize + *has_bias as usize;
            arity(op, ins, n..=n)?;
            let d = same_dtype(ins)?;
            need_float(d, "layer_norm")?;
            check_axes(&[*axis], ins[0].shape.rank())?;
            let norm = Shape(ins[0].shape.0[*axis..].to_vec());
            for p in &ins[1..] {
                if bcast(&p.shape, &norm)? != norm {
                    return Err(format!(
                        "layer_norm parameter {} does not broadcast to normalized shape {norm}",
                        p.shape
                    ));
                }
            }
            Ok(ins[0].clone())
        }
        Op::BatchNorm { .. } => {
            arity(op, ins, 5..=5)?;
            let d = same_dtype(ins)?;
            need_float(d, "batch_norm")?;
            let x = &ins[0].shape;
            if x.rank() < 2 {
                return Err(format!("batch_norm needs rank >= 2, got {x}"));
            }
            let c = Shape(vec![x.0[1].clone()]);
            for p in &ins[1..] {
                if p.shape != c {
                    return Err(format!("batch_norm parameter must be {c}, got {}", p.shape));
                }
            }
            Ok(ins[0].clone())
        }
        Op::Gelu { .. } | Op::Silu | Op::HardSwish | Op::HardSigmoid { .. } => {
            arity(op, ins, 1..=1)?;
            need_float(ins[0].dtype, op.name())?;
            Ok(ins[0].clone())
        }
        Op::Attention { has_mask, .. } => {
            let n = 3 + *has_mask as usize;
            arity(op, ins, n..=n)?;
            let d = same_dtype(&ins[..3])?;
            need_float(d, "attention")?;
            let (q, k, v) = (&ins[0].shape, &ins[1].shape, &ins[2].shape);
            if q.rank() < 2 || k.rank() != q.rank() || v.rank() != q.rank() {
                return Err(format!("attention needs q, k, v of one rank >= 2, got {q}, {k}, {v}"));
            }
            let r = q.rank();
            if q.0[r - 1] != k.0[r - 1] || k.0[r - 2] != v.0[r - 2] {
                return Err(format!("attention shapes q {q}, k {k}, v {v} do not line up"));
            }
            let scores = matmul_shape(
                q,
                &Shape({
                    let mut s = k.0.clone();
                    s.swap(r - 1, r - 2);
                    s
                }),
            )?;
            if *has_mask {
                let m = ins[3];
                if m.dtype != DType::Bool && m.dtype != d {
                    return Err(format!("attention mask must be bool or {d}, got {}", m.dtype));
                }
                if bcast(&m.shape, &scores)? != scores {
                    return Err(format!("attention mask {} does not broadcast to scores {scores}", m.shape));
                }
            }
            Ok(TensorType::new(d, matmul_shape(&scores, v)?))
        }
    }
}

fn check_axes(axes: &[usize], rank: usize) -> Result<(), String> {
    for (i, &a) in axes.iter().enumerate() {
        if a >= rank {
            return Err(format!("axis {a} out of range for rank {rank}"));
        }
        if i > 0 && axes[i - 1] >= a {
            return Err(format!("axes {axes:?} must be sorted and unique"));
        }
    }
    Ok(())
}

/// The shape left after reducing `axes`.
pub fn reduced(s: &Shape, axes: &[usize], keepdim: bool) -> Shape {
    let mut out = Vec::new();
    for (i, d) in s.0.iter().enumerate() {
        if axes.contains(&i) {
            if keepdim {
                out.push(Dim::Static(1));
            }
        } else {
            out.push(d.clone());
        }
    }
    Shape(out)
}

/// NumPy `matmul` result shape.
pub fn matmul_shape(a: &Shape, b: &Shape) -> Result<Shape, String> {
    if a.rank() == 0 || b.rank() == 0 {
        return Err("matmul operands must have rank >= 1".into());
    }
    let a2 = if a.rank() == 1 { Shape(vec![Dim::Static(1), a.0[0].clone()]) } else { a.clone() };
    let b2 = if b.rank() == 1 { Shape(vec![b.0[0].clone(), Dim::Static(1)]) } else { b.clone() };
    let (ra, rb) = (a2.rank(), b2.rank());
    if a2.0[ra - 1] != b2.0[rb - 2] {
        return Err(format!("matmul inner dims differ: {a} @ {b}"));
    }
    let batch = bcast(&Shape(a2.0[..ra - 2].to_vec()), &Shape(b2.0[..rb - 2].to_vec()))?;
    let mut out = batch.0;
    if a.rank() > 1 {
        out.push(a2.0[ra - 2].clone());
    }
    if b.rank() > 1 {
        out.push(b2.0[rb - 1].clone());
    }
    Ok(Shape(out))
}
