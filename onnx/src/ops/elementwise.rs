//! Elementwise ops: unary math, binary arithmetic and comparisons, activations, casts, clip,
//! variadic max/min/sum/mean, bit shifts and bitwise logic.

use crate::import::{Cx, R};
use sinter_core::ir::{BinaryOp as B, UnaryOp as U};
use sinter_core::{DType, HostTensor, NodeId, Op};

type Out = R<Vec<Option<NodeId>>>;

pub(super) fn lower(cx: &mut Cx, op: &str) -> Option<Out> {
    let unary = match op {
        "Abs" => Some(U::Abs),
        "Neg" => Some(U::Neg),
        "Exp" => Some(U::Exp),
        "Log" => Some(U::Log),
        "Sqrt" => Some(U::Sqrt),
        "Reciprocal" => Some(U::Reciprocal),
        "Sin" => Some(U::Sin),
        "Cos" => Some(U::Cos),
        "Tan" => Some(U::Tan),
        "Asin" => Some(U::Asin),
        "Acos" => Some(U::Acos),
        "Atan" => Some(U::Atan),
        "Sinh" => Some(U::Sinh),
        "Cosh" => Some(U::Cosh),
        "Asinh" => Some(U::Asinh),
        "Acosh" => Some(U::Acosh),
        "Atanh" => Some(U::Atanh),
        "Tanh" => Some(U::Tanh),
        "Sigmoid" => Some(U::Sigmoid),
        "Erf" => Some(U::Erf),
        "Relu" => Some(U::Relu),
        "Floor" => Some(U::Floor),
        "Ceil" => Some(U::Ceil),
        "Round" => Some(U::Round),
        "Sign" => Some(U::Sign),
        "Not" => Some(U::Not),
        "IsNaN" => Some(U::IsNan),
        _ => None,
    };
    if let Some(u) = unary {
        return Some(one(cx, |cx| {
            cx.arity(1, 1)?;
            let x = cx.inp(0)?;
            cx.un(u, x)
        }));
    }
    let binary = match op {
        "Add" => Some(B::Add),
        "Sub" => Some(B::Sub),
        "Mul" => Some(B::Mul),
        "Div" => Some(B::Div),
        "Equal" => Some(B::Eq),
        "Less" => Some(B::Lt),
        "LessOrEqual" => Some(B::Le),
        "Greater" => Some(B::Gt),
        "GreaterOrEqual" => Some(B::Ge),
        "And" => Some(B::And),
        "Or" => Some(B::Or),
        "Xor" => Some(B::Xor),
        _ => None,
    };
    if let Some(b) = binary {
        return Some(one(cx, |cx| {
            cx.arity(2, 2)?;
            let (x, y) = legacy_broadcast(cx)?;
            cx.bin(b, x, y)
        }));
    }
    let r = match op {
        "Identity" => one(cx, |cx| {
            cx.arity(1, 1)?;
            cx.inp(0)
        }),
        "Pow" => one(cx, pow),
        "OptionalHasElement" => one(cx, |cx| {
            cx.arity(0, 1)?;
            let has = cx.opt(0).is_some();
            Ok(cx.konst(HostTensor::from_i64(DType::Bool, vec![], &[has as i64])))
        }),
        "OptionalGetElement" => one(cx, |cx| {
            cx.arity(1, 1)?;
            cx.inp(0)
        }),
        "Mod" => one(cx, |cx| {
            cx.arity(2, 2)?;
            let (x, y) = legacy_broadcast(cx)?;
            let fmod = cx.ai("fmod", 0) != 0;
            cx.bin(if fmod { B::FMod } else { B::Mod }, x, y)
        }),
        "Max" | "Min" | "Sum" | "Mean" => one(cx, |cx| variadic(cx, op)),
        "Where" => one(cx, |cx| {
            cx.arity(3, 3)?;
            let (c, x, y) = (cx.inp(0)?, cx.inp(1)?, cx.inp(2)?);
            cx.select(c, x, y)
        }),
        "Cast" => one(cx, |cx| {
            cx.arity(1, 1)?;
            let to = cx.dtype_attr("to")?;
            let x = cx.inp(0)?;
            let saturate = cx.ai("saturate", 1) != 0;
            cx.cast_saturating(x, to, saturate)
        }),
        "CastLike" => one(cx, |cx| {
            cx.arity(2, 2)?;
            let (x, t) = (cx.inp(0)?, cx.inp(1)?);
            let d = cx.dt(t);
            let saturate = cx.ai("saturate", 1) != 0;
            cx.cast_saturating(x, d, saturate)
        }),
        "Clip" => one(cx, clip),
        "IsInf" => one(cx, |cx| {
            cx.arity(1, 1)?;
            let x = cx.inp(0)?;
            let inf = cx.un(U::IsInf, x)?;
            let (pos, neg) = (cx.ai("detect_positive", 1) != 0, cx.ai("detect_negative", 1) != 0);
            match (pos, neg) {
                (true, true) => Ok(inf),
                (false, false) => {
                    let f = cx.konst(HostTensor::scalar(DType::Bool, 0.0));
                    cx.bin(B::And, inf, f)
                }
                (p, _) => {
                    let z = cx.scalar(cx.dt(x), 0.0);
                    let side = cx.bin(if p { B::Gt } else { B::Lt }, x, z)?;
                    cx.bin(B::And, inf, side)
                }
            }
        }),
        "LeakyRelu" => one(cx, |cx| {
            let alpha = cx.af("alpha", 0.01) as f64;
            let x = unary_in(cx)?;
            let ax = cx.bin_s(B::Mul, x, alpha)?;
            let z = cx.scalar(cx.dt(x), 0.0);
            let c = cx.bin(B::Ge, x, z)?;
            cx.select(c, x, ax)
        }),
        "Elu" => one(cx, |cx| {
            let alpha = cx.af("alpha", 1.0) as f64;
            let x = unary_in(cx)?;
            elu(cx, x, alpha)
        }),
        "Selu" => one(cx, |cx| {
            let alpha = cx.af("alpha", 1.673_263_2) as f64;
            let gamma = cx.af("gamma", 1.050_701) as f64;
            let x = unary_in(cx)?;
            let e = elu(cx, x, alpha)?;
            cx.bin_s(B::Mul, e, gamma)
        }),
        "Celu" => one(cx, |cx| {
            let alpha = cx.af("alpha", 1.0) as f64;
            let x = unary_in(cx)?;
            // max(0, x) + min(0, alpha * (exp(x / alpha) - 1))
            let xa = cx.bin_s(B::Div, x, alpha)?;
            let e = cx.un(U::Exp, xa)?;
            let e1 = cx.bin_s(B::Sub, e, 1.0)?;
            let ae = cx.bin_s(B::Mul, e1, alpha)?;
            let z = cx.scalar(cx.dt(x), 0.0);
            let neg = cx.bin(B::Min, ae, z)?;
            let pos = cx.bin(B::Max, x, z)?;
            cx.bin(B::Add, pos, neg)
        }),
        "ThresholdedRelu" => one(cx, |cx| {
            let alpha = cx.af("alpha", 1.0) as f64;
            let x = unary_in(cx)?;
            let a = cx.scalar(cx.dt(x), alpha);
            let c = cx.bin(B::Gt, x, a)?;
            let z = cx.scalar(cx.dt(x), 0.0);
            cx.select(c, x, z)
        }),
        "HardSigmoid" => one(cx, |cx| {
            let alpha = cx.af("alpha", 0.2) as f64;
            let beta = cx.af("beta", 0.5) as f64;
            let x = unary_in(cx)?;
            cx.add(Op::HardSigmoid { alpha, beta }, vec![x])
        }),
        "HardSwish" => one(cx, |cx| {
            let x = unary_in(cx)?;
            cx.add(Op::HardSwish, vec![x])
        }),
        "Softplus" => one(cx, |cx| {
            let x = unary_in(cx)?;
            softplus(cx, x)
        }),
        "Softsign" => one(cx, |cx| {
            let x = unary_in(cx)?;
            let a = cx.un(U::Abs, x)?;
            let d = cx.bin_s(B::Add, a, 1.0)?;
            cx.bin(B::Div, x, d)
        }),
        "Mish" => one(cx, |cx| {
            let x = unary_in(cx)?;
            let sp = softplus(cx, x)?;
            let t = cx.un(U::Tanh, sp)?;
            cx.bin(B::Mul, x, t)
        }),
        "Gelu" => one(cx, |cx| {
            let x = unary_in(cx)?;
            let approx = cx.as_str("approximate", "none");
            match approx.as_str() {
                "none" => cx.add(Op::Gelu { tanh: false }, vec![x]),
                "tanh" => cx.add(Op::Gelu { tanh: true }, vec![x]),
                other => Err(cx.err(format!("unknown approximate={other:?}"))),
            }
        }),
        "Swish" => one(cx, |cx| {
            let alpha = cx.af("alpha", 1.0) as f64;
            let x = unary_in(cx)?;
            let ax = cx.bin_s(B::Mul, x, alpha)?;
            let s = cx.un(U::Sigmoid, ax)?;
            cx.bin(B::Mul, x, s)
        }),
        "Shrink" => one(cx, |cx| {
            let l = cx.af("lambd", 0.5) as f64;
            let bias = cx.af("bias", 0.0) as f64;
            let x = unary_in(cx)?;
            let d = cx.dt(x);
            let (nl, pl) = (cx.scalar(d, -l), cx.scalar(d, l));
            let lo = cx.bin(B::Lt, x, nl)?;
            let hi = cx.bin(B::Gt, x, pl)?;
            let xp = cx.bin_s(B::Add, x, bias)?;
            let xm = cx.bin_s(B::Sub, x, bias)?;
            let z = cx.scalar(d, 0.0);
            let inner = cx.select(hi, xm, z)?;
            cx.select(lo, xp, inner)
        }),
        "PRelu" => one(cx, prelu),
        "BitShift" => one(cx, bitshift),
        "BitCast" => one(cx, bitcast),
        "BitwiseAnd" | "BitwiseOr" | "BitwiseXor" => one(cx, |cx| bitwise(cx, op)),
        "BitwiseNot" => one(cx, |cx| {
            cx.arity(1, 1)?;
            let x = cx.inp(0)?;
            let d = cx.dt(x);
            if !d.is_int() {
                return Err(cx.err(format!("BitwiseNot needs integers, got {d}")));
            }
            // ~x == -1 - x in two's complement (u64 wraps through the bit pattern).
            let xu = bits_u64(cx, x)?;
            let m1 = cx.konst(HostTensor::from_i64(DType::U64, vec![], &[-1]));
            let r = cx.bin(B::Sub, m1, xu)?;
            let r = cx.cast(r, DType::I64)?;
            cx.cast(r, d)
        }),
        _ => return None,
    };
    Some(r)
}

fn one(cx: &mut Cx, f: impl FnOnce(&mut Cx) -> R<NodeId>) -> Out {
    f(cx).map(|x| vec![Some(x)])
}

fn unary_in(cx: &Cx) -> R<NodeId> {
    cx.arity(1, 1)?;
    cx.inp(0)
}

/// `x > 0 ? x : alpha * (exp(x) - 1)`.
fn elu(cx: &mut Cx, x: NodeId, alpha: f64) -> R<NodeId> {
    let e = cx.un(U::Exp, x)?;
    let e1 = cx.bin_s(B::Sub, e, 1.0)?;
    let ae = cx.bin_s(B::Mul, e1, alpha)?;
    let z = cx.scalar(cx.dt(x), 0.0);
    let c = cx.bin(B::Gt, x, z)?;
    cx.select(c, x, ae)
}

/// `log(1 + exp(x))`, computed stably as `max(x, 0) + log(1 + exp(-|x|))`.
fn softplus(cx: &mut Cx, x: NodeId) -> R<NodeId> {
    let a = cx.un(U::Abs, x)?;
    let na = cx.un(U::Neg, a)?;
    let e = cx.un(U::Exp, na)?;
    let e1 = cx.bin_s(B::Add, e, 1.0)?;
    let l = cx.un(U::Log, e1)?;
    let z = cx.scalar(cx.dt(x), 0.0);
    let m = cx.bin(B::Max, x, z)?;
    cx.bin(B::Add, m, l)
}

/// Operands of a binary op, applying opset < 7 `broadcast`/`axis` attributes.
pub(super) fn legacy_broadcast(cx: &mut Cx) -> R<(NodeId, NodeId)> {
    let (x, y) = (cx.inp(0)?, cx.inp(1)?);
    if cx.opset >= 7 || cx.ai("broadcast", 0) == 0 {
        return Ok((x, y));
    }
    let (rx, ry) = (cx.rank(x), cx.rank(y));
    match cx.ai_opt("axis") {
        Some(a) if ry < rx => {
            let a = cx.axis(a, rx)?;
            if a + ry > rx {
                return Err(cx.err(format!("legacy broadcast axis {a} does not fit rank {ry} into rank {rx}")));
            }
            let mut dims = cx.shape(y)?;
            dims.extend(std::iter::repeat_n(1, rx - a - ry));
            let y = cx.reshape(y, &dims)?;
            Ok((x, y))
        }
        _ => Ok((x, y)),
    }
}

fn pow(cx: &mut Cx) -> R<NodeId> {
    cx.arity(2, 2)?;
    let (x, y) = legacy_broadcast(cx)?;
    let (dx, dy) = (cx.dt(x), cx.dt(y));
    if dx == dy {
        return cx.bin(B::Pow, x, y);
    }
    if dx.is_float() {
        let y = cx.cast(y, dx)?;
        return cx.bin(B::Pow, x, y);
    }
    // Integer base with another exponent type: compute in f64, cast back (as numpy does).
    let xf = cx.cast(x, DType::F64)?;
    let yf = cx.cast(y, DType::F64)?;
    let p = cx.bin(B::Pow, xf, yf)?;
    cx.cast(p, dx)
}

fn variadic(cx: &mut Cx, op: &str) -> R<NodeId> {
    if cx.ins.is_empty() {
        return Err(cx.err("needs at least one input"));
    }
    let xs: Vec<NodeId> = (0..cx.ins.len()).map(|i| cx.inp(i)).collect::<R<_>>()?;
    let b = match op {
        "Max" => B::Max,
        "Min" => B::Min,
        _ => B::Add,
    };
    let mut acc = xs[0];
    for &x in &xs[1..] {
        acc = cx.bin(b, acc, x)?;
    }
    if op == "Mean" {
        if xs.len() == 1 {
            // Mean of one input is the input itself; keep a node so the output is distinct.
            return cx.bin_s(B::Mul, acc, 1.0);
        }
        acc = cx.bin_s(B::Div, acc, xs.len() as f64)?;
    }
    Ok(acc)
}

fn clip(cx: &mut Cx) -> R<NodeId> {
    let x = cx.inp(0)?;
    let d = cx.dt(x);
    let (lo, hi) = if cx.opset < 11 {
        cx.arity(1, 1)?;
        let lo = cx.af_opt("min").map(|v| cx.scalar(d, v as f64));
        let hi = cx.af_opt("max").map(|v| cx.scalar(d, v as f64));
        (lo, hi)
    } else {
        cx.arity(1, 3)?;
        (cx.opt(1), cx.opt(2))
    };
    let mut y = x;
    if let Some(lo) = lo {
        let lo = cx.cast(lo, d)?;
        y = cx.bin(B::Max, y, lo)?;
    }
    if let Some(hi) = hi {
        let hi = cx.cast(hi, d)?;
        y = cx.bin(B::Min, y, hi)?;
    }
    if y == x {
        // Keep a distinct node for an unbounded clip.
        y = cx.bin(B::Max, x, x)?;
    }
    Ok(y)
}

fn prelu(cx: &mut Cx) -> R<NodeId> {
    cx.arity(2, 2)?;
    let (x, mut s) = (cx.inp(0)?, cx.inp(1)?);
    let rx = cx.rank(x);
    if cx.opset < 7 || cx.rank(s) == 1 {
        // Legacy (and a common exporter habit): a per-channel slope of shape [C] applies on axis 1.
        let ss = cx.shape(s)?;
        let xs = cx.shape(x)?;
        if ss.len() == 1 && rx >= 2 && ss[0] == xs[1] && ss[0] != 1 && (cx.opset < 7 || xs[rx - 1] != ss[0]) {
            let mut dims = vec![ss[0]];
            dims.extend(std::iter::repeat_n(1, rx - 2));
            s = cx.reshape(s, &dims)?;
        }
    }
    let z = cx.scalar(cx.dt(x), 0.0);
    let c = cx.bin(B::Lt, x, z)?;
    let xs = cx.bin(B::Mul, x, s)?;
    cx.select(c, xs, x)
}

/// `2^b` for `b` clamped to `[0, max]`, looked up in a constant table of dtype `d`.
fn pow2(cx: &mut Cx, b: NodeId, max: usize, d: DType) -> R<NodeId> {
    let table: Vec<u64> = (0..=max).map(|k| 1u64 << k).collect();
    let t = cx.konst(HostTensor::from_i64(d, vec![max + 1], &table.iter().map(|&v| v as i64).collect::<Vec<_>>()));
    let bi = cx.cast(b, DType::I64)?;
    let bi = cx.bin_s(B::Max, bi, 0.0)?;
    let bi = cx.bin_s(B::Min, bi, max as f64)?;
    cx.add(Op::Gather { axis: 0 }, vec![t, bi])
}

/// The bit pattern of an integer tensor as u64 (sign-extended for signed types).
fn bits_u64(cx: &mut Cx, x: NodeId) -> R<NodeId> {
    let i = cx.cast(x, DType::I64)?;
    cx.cast(i, DType::U64)
}

/// Floored division by a positive divisor: `(x - mod(x, p)) / p`.
fn floor_div(cx: &mut Cx, x: NodeId, p: NodeId) -> R<NodeId> {
    let m = cx.bin(B::Mod, x, p)?;
    let s = cx.bin(B::Sub, x, m)?;
    cx.bin(B::Div, s, p)
}

/// BitShift with the reference's rules: shifts outside `[0, width)` give 0 (or -1 for a right
/// shift of a negative signed value); left shifts wrap; right shifts of signed values are
/// arithmetic.
fn bitshift(cx: &mut Cx) -> R<NodeId> {
    cx.arity(2, 2)?;
    let (x, y) = (cx.inp(0)?, cx.inp(1)?);
    let d = cx.dt(x);
    if !d.is_int() {
        return Err(cx.err(format!("BitShift needs integers, got {d}")));
    }
    let width = d.size_bytes() * 8;
    let dir = cx.as_str("direction", "");
    let yi = cx.cast(y, DType::I64)?;
    let z = cx.scalar(DType::I64, 0.0);
    let lo_ok = cx.bin(B::Ge, yi, z)?;
    let w = cx.scalar(DType::I64, width as f64);
    let hi_ok = cx.bin(B::Lt, yi, w)?;
    let valid = cx.bin(B::And, lo_ok, hi_ok)?;
    let (shifted, outside) = match dir.as_str() {
        "LEFT" => {
            let p = pow2(cx, yi, width - 1, DType::U64)?;
            let xu = bits_u64(cx, x)?;
            let r = cx.bin(B::Mul, xu, p)?;
            let r = cx.cast(r, DType::I64)?;
            let r = cx.cast(r, d)?;
            let zero = cx.scalar(d, 0.0);
            (r, zero)
        }
        "RIGHT" if !d.is_signed_int() => {
            let p = pow2(cx, yi, width - 1, DType::U64)?;
            let xu = bits_u64(cx, x)?;
            let r = cx.bin(B::Div, xu, p)?;
            let zero = cx.scalar(d, 0.0);
            (cx.cast(r, d)?, zero)
        }
        "RIGHT" => {
            // Two floored divisions so every divisor fits i64: b = s1 + s2, s1 = min(b, 32).
            let x64 = cx.cast(x, DType::I64)?;
            let yc = cx.bin_s(B::Max, yi, 0.0)?;
            let yc = cx.bin_s(B::Min, yc, (width - 1) as f64)?;
            let s1 = cx.bin_s(B::Min, yc, 32.0)?;
            let s2 = cx.bin(B::Sub, yc, s1)?;
            let p1 = pow2(cx, s1, 32, DType::I64)?;
            let p2 = pow2(cx, s2, 32, DType::I64)?;
            let r = floor_div(cx, x64, p1)?;
            let r = floor_div(cx, r, p2)?;
            let r = cx.cast(r, d)?;
            let neg = cx.bin(B::Lt, x64, z)?;
            let m1 = cx.scalar(d, -1.0);
            let zero = cx.scalar(d, 0.0);
            (r, cx.select(neg, m1, zero)?)
        }
        other => return Err(cx.err(format!("direction must be LEFT or RIGHT, got {other:?}"))),
    };
    cx.select(valid, shifted, outside)
}

/// (exponent bits, mantissa bits, bias) of a float dtype.
fn float_layout(d: DType) -> (u32, u32, i64) {
    match d {
        DType::F16 => (5, 10, 15),
        DType::BF16 => (8, 7, 127),
        DType::F32 => (8, 23, 127),
        _ => (11, 52, 1023),
    }
}

/// `2^t` for an f64 tensor `t` of integer values.
fn exp2(cx: &mut Cx, t: NodeId) -> R<NodeId> {
    let two = cx.scalar(DType::F64, 2.0);
    cx.bin(B::Pow, two, t)
}

/// BitCast: reinterprets the bits. Same-width integer types are a wrapping cast; floats are
/// taken apart (sign, exponent, mantissa) or put together arithmetically.
fn bitcast(cx: &mut Cx) -> R<NodeId> {
    cx.arity(1, 1)?;
    let x = cx.inp(0)?;
    let to = cx.dtype_attr("to")?;
    let from = cx.dt(x);
    if from.size_bytes() != to.size_bytes() {
        return Err(cx.err(format!("BitCast from {from} to {to} changes the bit width")));
    }
    let w = from.size_bytes() as u32 * 8;
    let min64 = cx.konst(HostTensor::from_i64(DType::I64, vec![], &[i64::MIN]));
    let z64 = cx.scalar(DType::I64, 0.0);
    match (from.is_float(), to.is_float()) {
        (false, false) => cx.cast(x, to),
        (true, true) => Err(cx.unsup(format!("BitCast between float types {from} and {to}"))),
        (true, false) => {
            let (eb, mb, bias) = float_layout(from);
            let xf = cx.cast(x, DType::F64)?;
            let z = cx.scalar(DType::F64, 0.0);
            let a = cx.un(U::Abs, xf)?;
            let ltz = cx.bin(B::Lt, xf, z)?;
            let rc = cx.un(U::Reciprocal, xf)?;
            let negz = cx.bin(B::Lt, rc, z)?;
            let neg = cx.bin(B::Or, ltz, negz)?;
            let is_zero = cx.bin(B::Eq, a, z)?;
            let is_inf = cx.un(U::IsInf, a)?;
            let is_nan = cx.un(U::IsNan, a)?;
            let one = cx.scalar(DType::F64, 1.0);
            let special = cx.bin(B::Or, is_zero, is_inf)?;
            let special = cx.bin(B::Or, special, is_nan)?;
            let safe = cx.select(special, one, a)?;
            // e = floor(log2(a)), corrected by comparing with powers of two.
            let l = cx.un(U::Log, safe)?;
            let l2 = cx.bin_s(B::Div, l, std::f64::consts::LN_2)?;
            let mut e = cx.un(U::Floor, l2)?;
            let p = exp2(cx, e)?;
            let too_big = cx.bin(B::Gt, p, safe)?;
            let em1 = cx.bin_s(B::Sub, e, 1.0)?;
            e = cx.select(too_big, em1, e)?;
            let ep1 = cx.bin_s(B::Add, e, 1.0)?;
            let p1 = exp2(cx, ep1)?;
            let too_small = cx.bin(B::Le, p1, safe)?;
            e = cx.select(too_small, ep1, e)?;
            let min_e = (1 - bias) as f64;
            let me = cx.scalar(DType::F64, min_e);
            let normal = cx.bin(B::Ge, e, me)?;
            let pe = exp2(cx, e)?;
            let frac = cx.bin(B::Div, safe, pe)?;
            let frac = cx.bin_s(B::Sub, frac, 1.0)?;
            let mant_n = cx.bin_s(B::Mul, frac, 2f64.powi(mb as i32))?;
            let sub_scale = 2f64.powi((1 - bias) as i32 - mb as i32);
            let mant_s = cx.bin_s(B::Div, safe, sub_scale)?;
            let mant = cx.select(normal, mant_n, mant_s)?;
            let exp_n = cx.bin_s(B::Add, e, bias as f64)?;
            let exp = cx.select(normal, exp_n, z)?;
            // Specials: zero -> (0, 0); inf -> (max, 0); NaN -> (max, quiet bit).
            let emax = cx.scalar(DType::F64, ((1u64 << eb) - 1) as f64);
            let qbit = cx.scalar(DType::F64, 2f64.powi(mb as i32 - 1));
            let exp = cx.select(is_zero, z, exp)?;
            let mant = cx.select(is_zero, z, mant)?;
            let infnan = cx.bin(B::Or, is_inf, is_nan)?;
            let exp = cx.select(infnan, emax, exp)?;
            let mant = cx.select(is_inf, z, mant)?;
            let mant = cx.select(is_nan, qbit, mant)?;
            let ei = cx.cast(exp, DType::I64)?;
            let ei = cx.bin_s(B::Mul, ei, 2f64.powi(mb as i32))?;
            let mi = cx.cast(mant, DType::I64)?;
            let base = cx.bin(B::Add, ei, mi)?;
            let bits = if w == 64 {
                let off = cx.select(neg, min64, z64)?;
                cx.bin(B::Add, base, off)?
            } else {
                let sb = cx.scalar(DType::I64, 2f64.powi(w as i32 - 1));
                let off = cx.select(neg, sb, z64)?;
                cx.bin(B::Add, base, off)?
            };
            cx.cast(bits, to)
        }
        (false, true) => {
            let (eb, mb, bias) = float_layout(to);
            let xi = cx.cast(x, DType::I64)?;
            let (neg, low) = if w == 64 {
                let neg = cx.bin(B::Lt, xi, z64)?;
                let off = cx.select(neg, min64, z64)?;
                (neg, cx.bin(B::Sub, xi, off)?)
            } else {
                let u = cx.bin_s(B::Mod, xi, 2f64.powi(w as i32))?;
                let half = cx.scalar(DType::I64, 2f64.powi(w as i32 - 1));
                let neg = cx.bin(B::Ge, u, half)?;
                (neg, cx.bin(B::Mod, u, half)?)
            };
            let pm = cx.scalar(DType::I64, 2f64.powi(mb as i32));
            let m = cx.bin(B::Mod, low, pm)?;
            let e = cx.bin(B::Sub, low, m)?;
            let e = cx.bin(B::Div, e, pm)?;
            let ef = cx.cast(e, DType::F64)?;
            let mf = cx.cast(m, DType::F64)?;
            let sub = cx.bin_s(B::Mul, mf, 2f64.powi((1 - bias) as i32 - mb as i32))?;
            let full = cx.bin_s(B::Add, mf, 2f64.powi(mb as i32))?;
            let t = cx.bin_s(B::Sub, ef, (bias + mb as i64) as f64)?;
            let p = exp2(cx, t)?;
            let normal = cx.bin(B::Mul, full, p)?;
            let z = cx.scalar(DType::F64, 0.0);
            let is_sub = cx.bin(B::Eq, ef, z)?;
            let emax = cx.scalar(DType::F64, ((1u64 << eb) - 1) as f64);
            let is_max = cx.bin(B::Eq, ef, emax)?;
            let mzero = cx.bin(B::Eq, mf, z)?;
            let inf = cx.scalar(DType::F64, f64::INFINITY);
            let nan = cx.scalar(DType::F64, f64::NAN);
            let special = cx.select(mzero, inf, nan)?;
            let v = cx.select(is_max, special, normal)?;
            let v = cx.select(is_sub, sub, v)?;
            let nv = cx.un(U::Neg, v)?;
            let v = cx.select(neg, nv, v)?;
            cx.cast(v, to)
        }
    }
}

/// Bitwise and/or/xor through the bits of the u64 pattern: extract each bit with an unsigned
/// division and a modulo, combine the 0/1 values, and sum the weighted results.
fn bitwise(cx: &mut Cx, op: &str) -> R<NodeId> {
    cx.arity(2, 2)?;
    let (x, y) = (cx.inp(0)?, cx.inp(1)?);
    let d = cx.dt(x);
    if !d.is_int() || cx.dt(y) != d {
        return Err(cx.err(format!("{op} needs two integer inputs of one type")));
    }
    let bits = d.size_bytes() * 8;
    let (px, py) = (bits_u64(cx, x)?, bits_u64(cx, y)?);
    let mut acc: Option<NodeId> = None;
    for b in 0..bits {
        let p = cx.konst(HostTensor::from_i64(DType::U64, vec![], &[(1u64 << b) as i64]));
        let two = cx.scalar(DType::U64, 2.0);
        let bit = |cx: &mut Cx, v: NodeId| -> R<NodeId> {
            let q = cx.bin(B::Div, v, p)?;
            cx.bin(B::Mod, q, two)
        };
        let (bx, by) = (bit(cx, px)?, bit(cx, py)?);
        let r = match op {
            "BitwiseAnd" => cx.bin(B::Mul, bx, by)?,
            "BitwiseOr" => cx.bin(B::Max, bx, by)?,
            _ => {
                let ne = cx.bin(B::Ne, bx, by)?;
                cx.cast(ne, DType::U64)?
            }
        };
        let w = cx.bin(B::Mul, r, p)?;
        acc = Some(match acc {
            None => w,
            Some(a) => cx.bin(B::Add, a, w)?,
        });
    }
    let acc = acc.expect("at least 8 bits");
    let i = cx.cast(acc, DType::I64)?;
    cx.cast(i, d)
}

/// `ai.onnx.ml.Binarizer`: 1 where `x > threshold`, else 0, in x's type.
pub(super) fn binarizer(cx: &mut Cx) -> R<NodeId> {
    cx.arity(1, 1)?;
    let x = cx.inp(0)?;
    let t = cx.af("threshold", 0.0) as f64;
    let tc = cx.scalar(cx.dt(x), t);
    let c = cx.bin(B::Gt, x, tc)?;
    cx.cast(c, cx.dt(x))
}
