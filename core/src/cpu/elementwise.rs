//! Elementwise ops: unary, binary (with broadcasting), where, cast and the pointwise composites.

use super::index::{broadcast_strides, strided_offsets};
use super::math::erf;
use super::{Buf, Value, finish};
use crate::dtype::DType;
use crate::ir::{BinaryOp, UnaryOp};
use crate::tensor::float_to_i64;

/// For an operand of shape `in_shape` broadcast to `out`: `None` when no index map is needed (the
/// shapes are equal), else the flat operand index of every output element.
fn bidx(out: &[usize], in_shape: &[usize]) -> Result<Option<Vec<usize>>, String> {
    if out == in_shape {
        return Ok(None);
    }
    let s = broadcast_strides(out, in_shape).ok_or_else(|| format!("{in_shape:?} does not broadcast to {out:?}"))?;
    Ok(Some(strided_offsets(out, &s, 0)))
}

/// The operand index read for output element `k`.
#[inline]
fn at(map: &Option<Vec<usize>>, k: usize) -> usize {
    map.as_ref().map_or(k, |m| m[k])
}

/// Applies `f` to the broadcast pairs of `a` and `b`.
fn map2<T: Copy, U>(
    (a, ash): (&[T], &[usize]),
    (b, bsh): (&[T], &[usize]),
    out: &[usize],
    mut f: impl FnMut(T, T) -> Result<U, String>,
) -> Result<Vec<U>, String> {
    let (ia, ib) = (bidx(out, ash)?, bidx(out, bsh)?);
    let n: usize = out.iter().product();
    (0..n).map(|k| f(a[at(&ia, k)], b[at(&ib, k)])).collect()
}

/// The logistic function, in a form that neither overflows nor loses the small tail.
pub(crate) fn sigmoid(x: f64) -> f64 {
    if x >= 0.0 {
        1.0 / (1.0 + (-x).exp())
    } else {
        let e = x.exp();
        e / (1.0 + e)
    }
}

/// GELU: `0.5 x (1 + erf(x / sqrt 2))`, or with `tanh`,
/// `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`.
pub(crate) fn gelu(x: f64, tanh: bool) -> f64 {
    if tanh {
        let k = (2.0 / std::f64::consts::PI).sqrt();
        0.5 * x * (1.0 + (k * (x + 0.044715 * x * x * x)).tanh())
    } else {
        0.5 * x * (1.0 + erf(x / std::f64::consts::SQRT_2))
    }
}

/// A float-to-float pointwise function of a float value, rounded to its dtype.
pub(super) fn activation(x: &Value, f: impl Fn(f64) -> f64) -> Result<Value, String> {
    let v = x.f()?;
    finish(x.dtype, x.shape.clone(), Buf::F(v.iter().map(|&a| f(a)).collect()))
}

fn unary_float(op: UnaryOp, x: f64) -> Result<f64, String> {
    Ok(match op {
        UnaryOp::Neg => -x,
        UnaryOp::Abs => x.abs(),
        UnaryOp::Exp => x.exp(),
        UnaryOp::Log => x.ln(),
        UnaryOp::Sqrt => x.sqrt(),
        UnaryOp::Rsqrt => 1.0 / x.sqrt(),
        UnaryOp::Sin => x.sin(),
        UnaryOp::Cos => x.cos(),
        UnaryOp::Tan => x.tan(),
        UnaryOp::Asin => x.asin(),
        UnaryOp::Acos => x.acos(),
        UnaryOp::Atan => x.atan(),
        UnaryOp::Sinh => x.sinh(),
        UnaryOp::Cosh => x.cosh(),
        UnaryOp::Asinh => x.asinh(),
        UnaryOp::Acosh => x.acosh(),
        UnaryOp::Atanh => x.atanh(),
        UnaryOp::Tanh => x.tanh(),
        UnaryOp::Sigmoid => sigmoid(x),
        UnaryOp::Erf => erf(x),
        UnaryOp::Relu => {
            if x > 0.0 || x.is_nan() {
                x
            } else {
                0.0
            }
        }
        UnaryOp::Floor => x.floor(),
        UnaryOp::Ceil => x.ceil(),
        UnaryOp::Round => x.round_ties_even(),
        UnaryOp::Sign => {
            if x > 0.0 {
                1.0
            } else if x < 0.0 {
                -1.0
            } else if x.is_nan() {
                x
            } else {
                0.0
            }
        }
        UnaryOp::Reciprocal => 1.0 / x,
        UnaryOp::Not | UnaryOp::IsNan | UnaryOp::IsInf => {
            return Err(format!("{} does not produce a float", op.name()));
        }
    })
}

fn unary_int(op: UnaryOp, x: i64, unsigned: bool) -> Result<i64, String> {
    Ok(match op {
        UnaryOp::Neg => x.wrapping_neg(),
        UnaryOp::Abs if unsigned => x,
        UnaryOp::Abs => x.wrapping_abs(),
        UnaryOp::Relu if unsigned => x,
        UnaryOp::Relu => x.max(0),
        UnaryOp::Sign if unsigned => (x != 0) as i64,
        UnaryOp::Sign => x.signum(),
        UnaryOp::Floor | UnaryOp::Ceil | UnaryOp::Round => x,
        UnaryOp::Not => (x == 0) as i64,
        _ => return Err(format!("{} is not defined on integers", op.name())),
    })
}

/// Unary op; `out` is the node's dtype (bool for isnan/isinf).
pub(super) fn unary(op: UnaryOp, x: &Value, out: DType) -> Result<Value, String> {
    let shape = x.shape.clone();
    let buf = match &x.buf {
        Buf::F(v) => match op {
            UnaryOp::IsNan => Buf::I(v.iter().map(|a| a.is_nan() as i64).collect()),
            UnaryOp::IsInf => Buf::I(v.iter().map(|a| a.is_infinite() as i64).collect()),
            _ => Buf::F(v.iter().map(|&a| unary_float(op, a)).collect::<Result<_, _>>()?),
        },
        Buf::I(v) => {
            let u = is_unsigned(x.dtype);
            Buf::I(v.iter().map(|&a| unary_int(op, a, u)).collect::<Result<_, _>>()?)
        }
    };
    finish(out, shape, buf)
}

/// True for unsigned integer dtypes (their values are non-negative; `u64` is held as bits).
pub(crate) fn is_unsigned(d: DType) -> bool {
    matches!(d, DType::U8 | DType::U16 | DType::U32 | DType::U64)
}

/// A sort key under which `i64` order is the dtype's order (flips the sign bit for `u64`).
#[inline]
pub(crate) fn int_key(x: i64, u64_bits: bool) -> i64 {
    if u64_bits { x ^ i64::MIN } else { x }
}

/// Max propagating NaN (as torch and ONNX do).
#[inline]
pub(crate) fn fmax_nan(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() { f64::NAN } else { a.max(b) }
}

/// Min propagating NaN.
#[inline]
pub(crate) fn fmin_nan(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() { f64::NAN } else { a.min(b) }
}

/// Floored modulo of floats (result takes the divisor's sign, as Python's `%` and torch's
/// `remainder`).
fn fmod_floored(a: f64, b: f64) -> f64 {
    let r = a % b;
    if r != 0.0 && ((r < 0.0) != (b < 0.0)) { r + b } else { r }
}

fn binary_float(op: BinaryOp, a: f64, b: f64) -> Result<f64, String> {
    let bool_ = |c: bool| c as i64 as f64;
    Ok(match op {
        BinaryOp::Add => a + b,
        BinaryOp::Sub => a - b,
        BinaryOp::Mul => a * b,
        BinaryOp::Div => a / b,
        BinaryOp::Pow => a.powf(b),
        BinaryOp::Max => fmax_nan(a, b),
        BinaryOp::Min => fmin_nan(a, b),
        BinaryOp::Mod => fmod_floored(a, b),
        BinaryOp::FMod => a % b,
        BinaryOp::Eq => bool_(a == b),
        BinaryOp::Ne => bool_(a != b),
        BinaryOp::Lt => bool_(a < b),
        BinaryOp::Le => bool_(a <= b),
        BinaryOp::Gt => bool_(a > b),
        BinaryOp::Ge => bool_(a >= b),
        BinaryOp::And | BinaryOp::Or | BinaryOp::Xor => {
            return Err(format!("{} is not defined on floats", op.name()));
        }
    })
}

/// `base^e` by squaring with wrapping multiplication (equal to repeated multiplication modulo
/// 2^64).
fn ipow(mut base: i64, mut e: u64) -> i64 {
    let mut acc = 1i64;
    while e > 0 {
        if e & 1 == 1 {
            acc = acc.wrapping_mul(base);
        }
        base = base.wrapping_mul(base);
        e >>= 1;
    }
    acc
}

fn binary_int(op: BinaryOp, a: i64, b: i64, u64_bits: bool) -> Result<i64, String> {
    let (ka, kb) = (int_key(a, u64_bits), int_key(b, u64_bits));
    let nonzero = |what: &str| if b == 0 { Err(format!("integer {what} by zero")) } else { Ok(()) };
    Ok(match op {
        BinaryOp::Add => a.wrapping_add(b),
        BinaryOp::Sub => a.wrapping_sub(b),
        BinaryOp::Mul => a.wrapping_mul(b),
        BinaryOp::Div => {
            nonzero("division")?;
            if u64_bits { ((a as u64) / (b as u64)) as i64 } else { a.wrapping_div(b) }
        }
        BinaryOp::Mod => {
            nonzero("modulo")?;
            if u64_bits {
                ((a as u64) % (b as u64)) as i64
            } else {
                let r = a.wrapping_rem(b);
                if r != 0 && ((r < 0) != (b < 0)) { r + b } else { r }
            }
        }
        BinaryOp::FMod => {
            nonzero("fmod")?;
            if u64_bits { ((a as u64) % (b as u64)) as i64 } else { a.wrapping_rem(b) }
        }
        BinaryOp::Pow => {
            if !u64_bits && b < 0 {
                return Err(format!("integer power with negative exponent {b}"));
            }
            ipow(a, b as u64)
        }
        BinaryOp::Max => {
            if ka >= kb {
                a
            } else {
                b
            }
        }
        BinaryOp::Min => {
            if ka <= kb {
                a
            } else {
                b
            }
        }
        BinaryOp::Eq => (a == b) as i64,
        BinaryOp::Ne => (a != b) as i64,
        BinaryOp::Lt => (ka < kb) as i64,
        BinaryOp::Le => (ka <= kb) as i64,
        BinaryOp::Gt => (ka > kb) as i64,
        BinaryOp::Ge => (ka >= kb) as i64,
        BinaryOp::And => ((a != 0) && (b != 0)) as i64,
        BinaryOp::Or => ((a != 0) || (b != 0)) as i64,
        BinaryOp::Xor => ((a != 0) != (b != 0)) as i64,
    })
}

/// Binary op with broadcasting to `shape`; `out` is the node's dtype (bool for comparisons).
pub(super) fn binary(op: BinaryOp, a: &Value, b: &Value, out: DType, shape: Vec<usize>) -> Result<Value, String> {
    let buf = match (&a.buf, &b.buf) {
        (Buf::F(x), Buf::F(y)) => {
            let v = map2((x, &a.shape), (y, &b.shape), &shape, |p, q| binary_float(op, p, q))?;
            if op.is_comparison() { Buf::I(v.into_iter().map(|c| c as i64).collect()) } else { Buf::F(v) }
        }
        (Buf::I(x), Buf::I(y)) => {
            let u = a.dtype == DType::U64;
            Buf::I(map2((x, &a.shape), (y, &b.shape), &shape, |p, q| binary_int(op, p, q, u))?)
        }
        _ => return Err(format!("operand dtypes differ: {} vs {}", a.dtype, b.dtype)),
    };
    finish(out, shape, buf)
}

/// `where(cond, a, b)` with three-way broadcasting to `shape`.
pub(super) fn select(cond: &Value, a: &Value, b: &Value, out: DType, shape: Vec<usize>) -> Result<Value, String> {
    let c = cond.i()?;
    let (ic, ia, ib) = (bidx(&shape, &cond.shape)?, bidx(&shape, &a.shape)?, bidx(&shape, &b.shape)?);
    let n: usize = shape.iter().product();
    let pick = |k: usize| c[at(&ic, k)] != 0;
    let buf = match (&a.buf, &b.buf) {
        (Buf::F(x), Buf::F(y)) => Buf::F((0..n).map(|k| if pick(k) { x[at(&ia, k)] } else { y[at(&ib, k)] }).collect()),
        (Buf::I(x), Buf::I(y)) => Buf::I((0..n).map(|k| if pick(k) { x[at(&ia, k)] } else { y[at(&ib, k)] }).collect()),
        _ => return Err(format!("operand dtypes differ: {} vs {}", a.dtype, b.dtype)),
    };
    finish(out, shape, buf)
}

/// Float to an integer dtype's i64 form: truncation toward zero, NaN to 0; `u64` keeps values
/// from 2^63 up as bits.
fn float_to_int(x: f64, to: DType) -> i64 {
    if to == DType::U64 && x >= 9_223_372_036_854_775_808.0 { x as u64 as i64 } else { float_to_i64(x) }
}

/// Elementwise conversion. Floats to integers truncate toward zero (NaN to 0) and then wrap;
/// anything to bool is `!= 0` (NaN is true); `u64` to float reads the bits as unsigned.
pub(super) fn cast(x: &Value, to: DType) -> Result<Value, String> {
    let buf = match &x.buf {
        Buf::F(v) if to.is_float() => Buf::F(v.clone()),
        Buf::F(v) if to == DType::Bool => Buf::I(v.iter().map(|&a| (a != 0.0) as i64).collect()),
        Buf::F(v) => Buf::I(v.iter().map(|&a| float_to_int(a, to)).collect()),
        Buf::I(v) if to.is_float() => {
            if x.dtype == DType::U64 {
                Buf::F(v.iter().map(|&a| a as u64 as f64).collect())
            } else {
                Buf::F(v.iter().map(|&a| a as f64).collect())
            }
        }
        Buf::I(v) => Buf::I(v.clone()),
    };
    finish(to, x.shape.clone(), buf)
}
