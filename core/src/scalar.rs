//! The scalar semantics of the elementwise ops: what every [`UnaryOp`], [`BinaryOp`] and cast does
//! to one element. This is the single definition: the CPU reference ([`crate::cpu`]) and the
//! kernel-IR interpreter ([`crate::kernel::interp`]) both compute with these functions, and every
//! GPU renderer must match them (the backends are tested against the CPU reference).
//!
//! # Representation
//!
//! A float is an `f64`; an integer or bool is an `i64` ([`Scalar`]): bool as 0/1, narrower integers
//! as their value, `u64` as its bit pattern (compared, divided and converted as unsigned).
//!
//! # Precision
//!
//! Float results are exact `f64` operations (or the `f64` special functions) and are **not**
//! rounded to the node's dtype here: the callers round (the CPU reference to storage precision at
//! every node, the interpreter to compute precision at every expression). Casts are the exception:
//! a cast to a float dtype rounds to that dtype's storage precision, as storing would. Integer
//! results are wrapped to their dtype (two's complement), so every `i64` returned is in range.
//!
//! # Semantics in brief (ONNX / NumPy / PyTorch)
//!
//! * IEEE arithmetic on floats; `max`/`min` propagate NaN (torch, ONNX), `relu` and `sign` keep NaN,
//!   `sign(+-0) = +0`, `round` is half to even, `mod` is floored (sign of the divisor, Python's `%`),
//!   `fmod` is truncated (sign of the dividend, C's `fmod`), `pow` is C's `pow`.
//! * Integers wrap (`add`, `sub`, `mul`, `neg`, `abs`, `pow`); `div` truncates toward zero and `mod`
//!   / `fmod` follow the float rules' signs. Integer `div`, `mod` and `fmod` by zero give 0 (as
//!   NumPy) and a negative integer exponent gives 0: values, not errors, because device kernels
//!   cannot raise errors and every backend computes the same (renderers guard the divisor; an
//!   unguarded division by zero is undefined on GPUs). Unsigned `abs`/`relu` are the identity and
//!   `sign` is 0 or 1.
//! * Comparisons give bool; `and`/`or`/`xor`/`not` act on bools (any non-zero is true).
//! * Float to integer casts truncate toward zero, NaN gives 0, out-of-range values saturate to
//!   `i64` and then wrap to the dtype (`u64` keeps values from 2^63 up); anything to bool is `!= 0`
//!   (NaN is true); `u64` to float reads the bits as unsigned.
//! * To fp8 ([`crate::fp8`]): round to nearest even; a value that rounds past the largest finite
//!   value overflows to NaN (e4m3fn, which has no infinity) or ±infinity (e5m2), as torch's
//!   `.to(float8_*)` and ONNX `Cast(saturate=0)` do. ONNX's default `saturate=1` is a clamp to
//!   `[-max, max]` before this cast (the importer inserts it). fp8 to anything is exact through
//!   its value.

use crate::cpu::math::erf;
use crate::dtype::DType;
use crate::ir::{BinaryOp, UnaryOp};
use half::{bf16, f16};

/// One element: a float, or an integer/bool in `i64` form (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scalar {
    /// A float element.
    F(f64),
    /// An integer or bool element.
    I(i64),
}

impl Scalar {
    /// As a float (integers converted as signed values).
    pub fn f(self) -> f64 {
        match self {
            Scalar::F(x) => x,
            Scalar::I(i) => i as f64,
        }
    }

    /// As an integer (floats truncated toward zero, NaN to 0, see [`float_to_i64`]).
    pub fn i(self) -> i64 {
        match self {
            Scalar::I(i) => i,
            Scalar::F(x) => float_to_i64(x),
        }
    }
}

// ------------------------------------------------------------------------------------ conversions

/// Converts a float to i64 the way a C cast does for in-range values (truncation toward zero);
/// NaN becomes 0 and out-of-range values saturate.
pub fn float_to_i64(x: f64) -> i64 {
    if x.is_nan() { 0 } else { x as i64 }
}

/// Wraps an i64 into the range of an integer dtype (two's complement truncation, as a cast does);
/// bool becomes `x != 0`. Float dtypes and the 64-bit integers return `x` unchanged.
pub fn cast_int(dtype: DType, x: i64) -> i64 {
    match dtype {
        DType::I8 => x as i8 as i64,
        DType::I16 => x as i16 as i64,
        DType::I32 => x as i32 as i64,
        DType::U8 => x as u8 as i64,
        DType::U16 => x as u16 as i64,
        DType::U32 => x as u32 as i64,
        DType::U64 => x,
        DType::Bool => (x != 0) as i64,
        _ => x,
    }
}

/// `x` rounded to f32 toward zero, its last bit set when that was inexact ("round to odd").
/// Rounding this once more, to nearest, into a format with at least two fewer significant bits
/// (bf16's 8, f16's 11) gives `x` rounded to nearest in that format, exactly as rounding `x`
/// directly would: the odd bit keeps the information that `x` was not a tie.
fn f32_round_to_odd(x: f64) -> f32 {
    let t = x as f32;
    if x.is_nan() || t as f64 == x {
        return t;
    }
    let mut bits = t.to_bits();
    if (t as f64).abs() > x.abs() {
        // `t` rounded away from zero (to infinity on overflow): one step back toward zero.
        bits -= 1;
    }
    f32::from_bits(bits | 1)
}

/// `x` rounded to the nearest bf16, ties to even, as a GPU's conversion does. `half`'s
/// `bf16::from_f64` drops the low 32 bits of the f64 before rounding, so a value just past a tie
/// whose only set bits are there (an f32 whose lowest three bits are set) rounded as a tie to
/// even: found when folded casts were compared with the reference (session 20).
pub fn bf16_from_f64(x: f64) -> bf16 {
    bf16::from_f32(f32_round_to_odd(x))
}

/// `x` rounded to the nearest f16, ties to even (through `f32_round_to_odd`, as
/// [`bf16_from_f64`]).
pub fn f16_from_f64(x: f64) -> f16 {
    f16::from_f32(f32_round_to_odd(x))
}

/// Rounds an `f64` to the nearest value representable in `dtype` (saturating/wrapping for ints as
/// a cast would), returned as `f64`: for float dtypes the storage precision (how the CPU reference
/// rounds every node and how a store or a cast to the dtype rounds).
pub fn round_to(dtype: DType, x: f64) -> f64 {
    match dtype {
        DType::F64 => x,
        DType::F32 => x as f32 as f64,
        DType::F16 => f16_from_f64(x).to_f64(),
        DType::BF16 => bf16_from_f64(x).to_f64(),
        DType::F8E4M3 => crate::fp8::E4M3.round(x),
        DType::F8E5M2 => crate::fp8::E5M2.round(x),
        DType::Bool => (x != 0.0) as i64 as f64,
        _ => cast_int(dtype, float_to_i64(x)) as f64,
    }
}

/// Float to the i64 form of the integer dtype `to`, before wrapping: truncation toward zero, NaN
/// to 0, saturation at the `i64` range, except that `u64` keeps values from 2^63 up as bits.
pub fn float_to_int(x: f64, to: DType) -> i64 {
    if to == DType::U64 && x >= 9_223_372_036_854_775_808.0 { x as u64 as i64 } else { float_to_i64(x) }
}

/// True for unsigned integer dtypes (their values are non-negative; `u64` is held as bits).
pub fn is_unsigned(d: DType) -> bool {
    matches!(d, DType::U8 | DType::U16 | DType::U32 | DType::U64)
}

/// A sort key under which `i64` order is the dtype's order (flips the sign bit for `u64`).
#[inline]
pub fn int_key(x: i64, u64_bits: bool) -> i64 {
    if u64_bits { x ^ i64::MIN } else { x }
}

/// Converts `x` of dtype `from` to dtype `to`, as the cast op does. Floats round to the storage
/// precision of `to` (see [`round_to`]); floats to integers as [`float_to_int`], then wrapped;
/// anything to bool is `!= 0` (NaN is true); integers to integers wrap; `u64` to float reads the
/// bits as unsigned.
pub fn cast(x: Scalar, from: DType, to: DType) -> Scalar {
    match (x, to.is_float()) {
        (Scalar::F(x), true) => Scalar::F(round_to(to, x)),
        (Scalar::F(x), false) if to == DType::Bool => Scalar::I((x != 0.0) as i64),
        (Scalar::F(x), false) => Scalar::I(cast_int(to, float_to_int(x, to))),
        (Scalar::I(i), true) => Scalar::F(round_to(to, if from == DType::U64 { i as u64 as f64 } else { i as f64 })),
        (Scalar::I(i), false) => Scalar::I(cast_int(to, i)),
    }
}

// ------------------------------------------------------------------------------- float helpers

/// The logistic function, in a form that neither overflows nor loses the small tail.
pub fn sigmoid(x: f64) -> f64 {
    if x >= 0.0 {
        1.0 / (1.0 + (-x).exp())
    } else {
        let e = x.exp();
        e / (1.0 + e)
    }
}

/// GELU: `0.5 x (1 + erf(x / sqrt 2))`, or with `tanh`,
/// `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`.
pub fn gelu(x: f64, tanh: bool) -> f64 {
    if tanh {
        let k = (2.0 / std::f64::consts::PI).sqrt();
        0.5 * x * (1.0 + (k * (x + 0.044715 * x * x * x)).tanh())
    } else {
        0.5 * x * (1.0 + erf(x / std::f64::consts::SQRT_2))
    }
}

/// Max propagating NaN (as torch and ONNX do).
#[inline]
pub fn fmax_nan(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() { f64::NAN } else { a.max(b) }
}

/// Min propagating NaN.
#[inline]
pub fn fmin_nan(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() { f64::NAN } else { a.min(b) }
}

/// Floored modulo of floats (result takes the divisor's sign, as Python's `%` and torch's
/// `remainder`).
fn fmod_floored(a: f64, b: f64) -> f64 {
    let r = a % b;
    if r != 0.0 && ((r < 0.0) != (b < 0.0)) { r + b } else { r }
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

// ------------------------------------------------------------------------------------- unary

/// A unary op on a float: a float, or a bool (0/1) for `isnan`/`isinf`. `not` is an error.
pub fn unary_f64(op: UnaryOp, x: f64) -> Result<Scalar, String> {
    Ok(Scalar::F(match op {
        UnaryOp::IsNan => return Ok(Scalar::I(x.is_nan() as i64)),
        UnaryOp::IsInf => return Ok(Scalar::I(x.is_infinite() as i64)),
        UnaryOp::Not => return Err(format!("{} is not defined on floats", op.name())),
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
        // relu keeps NaN; relu(-0) = +0.
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
        // sign keeps NaN (NumPy, ONNX); sign(-0) = +0 (NumPy, torch).
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
    }))
}

/// A unary op on an integer or bool `x` of dtype `dtype`, wrapped to `dtype` (`not` gives bool).
/// Float-only ops (`exp`, `isnan`, ...) are errors.
pub fn unary_i64(op: UnaryOp, x: i64, dtype: DType) -> Result<i64, String> {
    let unsigned = is_unsigned(dtype);
    let r = match op {
        UnaryOp::Neg => x.wrapping_neg(),
        UnaryOp::Abs if unsigned => x,
        UnaryOp::Abs => x.wrapping_abs(),
        UnaryOp::Relu if unsigned => x,
        UnaryOp::Relu => x.max(0),
        UnaryOp::Sign if unsigned => (x != 0) as i64,
        UnaryOp::Sign => x.signum(),
        UnaryOp::Floor | UnaryOp::Ceil | UnaryOp::Round => x,
        UnaryOp::Not => return Ok((x == 0) as i64),
        _ => return Err(format!("{} is not defined on integers", op.name())),
    };
    Ok(cast_int(dtype, r))
}

/// A unary op on `x` of dtype `dtype` (the operand's): [`unary_f64`] for a float, else
/// [`unary_i64`].
pub fn unary(op: UnaryOp, x: Scalar, dtype: DType) -> Result<Scalar, String> {
    match x {
        Scalar::F(x) => unary_f64(op, x),
        Scalar::I(i) => unary_i64(op, i, dtype).map(Scalar::I),
    }
}

// ------------------------------------------------------------------------------------ binary

/// A binary op on floats: a float, or a bool (0/1) for comparisons. Logical ops are errors.
pub fn binary_f64(op: BinaryOp, a: f64, b: f64) -> Result<Scalar, String> {
    let bool_ = |c: bool| Ok(Scalar::I(c as i64));
    Ok(Scalar::F(match op {
        BinaryOp::Add => a + b,
        BinaryOp::Sub => a - b,
        BinaryOp::Mul => a * b,
        BinaryOp::Div => a / b,
        BinaryOp::Pow => a.powf(b),
        BinaryOp::Max => fmax_nan(a, b),
        BinaryOp::Min => fmin_nan(a, b),
        BinaryOp::Mod => fmod_floored(a, b),
        BinaryOp::FMod => a % b,
        BinaryOp::Eq => return bool_(a == b),
        BinaryOp::Ne => return bool_(a != b),
        BinaryOp::Lt => return bool_(a < b),
        BinaryOp::Le => return bool_(a <= b),
        BinaryOp::Gt => return bool_(a > b),
        BinaryOp::Ge => return bool_(a >= b),
        BinaryOp::And | BinaryOp::Or | BinaryOp::Xor => {
            return Err(format!("{} is not defined on floats", op.name()));
        }
    }))
}

/// A binary op on integers or bools `a`, `b` of dtype `dtype` (the operands'), wrapped to the
/// result's dtype (`dtype`, or bool for comparisons and logical ops). Division, `mod` and `fmod`
/// by zero give 0; negative exponents of signed integers give 0 (see the module docs).
pub fn binary_i64(op: BinaryOp, a: i64, b: i64, dtype: DType) -> Result<i64, String> {
    let u64_bits = dtype == DType::U64;
    let (ka, kb) = (int_key(a, u64_bits), int_key(b, u64_bits));
    if b == 0 && matches!(op, BinaryOp::Div | BinaryOp::Mod | BinaryOp::FMod) {
        return Ok(0);
    }
    let r = match op {
        BinaryOp::Add => a.wrapping_add(b),
        BinaryOp::Sub => a.wrapping_sub(b),
        BinaryOp::Mul => a.wrapping_mul(b),
        BinaryOp::Div => {
            if u64_bits {
                ((a as u64) / (b as u64)) as i64
            } else {
                a.wrapping_div(b)
            }
        }
        BinaryOp::Mod => {
            if u64_bits {
                ((a as u64) % (b as u64)) as i64
            } else {
                let r = a.wrapping_rem(b);
                if r != 0 && ((r < 0) != (b < 0)) { r + b } else { r }
            }
        }
        BinaryOp::FMod => {
            if u64_bits {
                ((a as u64) % (b as u64)) as i64
            } else {
                a.wrapping_rem(b)
            }
        }
        BinaryOp::Pow if !u64_bits && b < 0 => 0,
        BinaryOp::Pow => ipow(a, b as u64),
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
        BinaryOp::Eq => return Ok((a == b) as i64),
        BinaryOp::Ne => return Ok((a != b) as i64),
        BinaryOp::Lt => return Ok((ka < kb) as i64),
        BinaryOp::Le => return Ok((ka <= kb) as i64),
        BinaryOp::Gt => return Ok((ka > kb) as i64),
        BinaryOp::Ge => return Ok((ka >= kb) as i64),
        BinaryOp::And => return Ok(((a != 0) && (b != 0)) as i64),
        BinaryOp::Or => return Ok(((a != 0) || (b != 0)) as i64),
        BinaryOp::Xor => return Ok(((a != 0) != (b != 0)) as i64),
    };
    Ok(cast_int(dtype, r))
}

/// A binary op on `a`, `b` of dtype `dtype` (the operands'): [`binary_f64`] for a float dtype,
/// else [`binary_i64`].
pub fn binary(op: BinaryOp, a: Scalar, b: Scalar, dtype: DType) -> Result<Scalar, String> {
    if dtype.is_float() { binary_f64(op, a.f(), b.f()) } else { binary_i64(op, a.i(), b.i(), dtype).map(Scalar::I) }
}

// ------------------------------------------------------------------------------ arg-reductions

/// Whether candidate `v` replaces the current best `best` in an arg-max (`max`) or arg-min. NaN
/// counts as the extremum for both (as torch and NumPy do: the NaN propagates through max/min, so
/// its index is the answer); ties (and NaN after NaN) go to the later index only with
/// `select_last`.
pub fn arg_better_f64(max: bool, v: f64, best: f64, select_last: bool) -> bool {
    match (v.is_nan(), best.is_nan()) {
        (true, true) => select_last,
        (true, false) => true,
        (false, true) => false,
        _ => {
            let strictly = if max { v > best } else { v < best };
            strictly || (select_last && v == best)
        }
    }
}

/// [`arg_better_f64`] for integers (`u64_bits`: compare as unsigned).
pub fn arg_better_i64(max: bool, v: i64, best: i64, u64_bits: bool, select_last: bool) -> bool {
    let (v, b) = (int_key(v, u64_bits), int_key(best, u64_bits));
    let strictly = if max { v > b } else { v < b };
    strictly || (select_last && v == b)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `bf16_from_f64` / `f16_from_f64` round to nearest, ties to even, checked against neighbours
    /// without any rounding routine: the result is no farther from `x` than the next value up or
    /// down (differences exact in f64 here), and even on a tie. Inputs include f32 values just
    /// past a tie whose only extra bits are the f32's lowest three, which `half::bf16::from_f64`
    /// rounds as ties.
    #[test]
    fn narrow_float_conversions_round_to_nearest_even() {
        fn check(x: f64, got: f64, up: f64, down: f64, even: bool, what: &str) {
            let d = (x - got).abs();
            assert!(d <= (x - up).abs() && d <= (x - down).abs(), "{what}({x:e}) = {got:e}, not nearest");
            if d == (x - up).abs() || d == (x - down).abs() {
                assert!(even || d == 0.0, "{what}({x:e}) = {got:e}: a tie not to even");
            }
        }
        let mut rng = crate::tensor::SplitMix64::new(11);
        let mut xs: Vec<f64> = vec![1.0 + 1.0 / 256.0, 1.0 + 3.0 / 256.0, 1.0 + 1.0 / 2048.0, 6.1e-5, -3.3e-39];
        for _ in 0..20000 {
            let m = 1.0 + rng.next_f64();
            let e = (rng.next_u64() % 40) as i32 - 20;
            let x = m * 2f64.powi(e) * if rng.next_u64().is_multiple_of(2) { 1.0 } else { -1.0 };
            xs.push(x);
            // The f32 next to a bf16 tie, past it by one to seven f32 ulps.
            let t = f32::from_bits((x as f32).to_bits() & !0xffff | 0x8000 | (rng.next_u64() % 8) as u32);
            xs.push(t as f64);
        }
        for &x in &xs {
            let b = bf16_from_f64(x);
            let (up, down) = (bf16::from_bits(b.to_bits() + 1), bf16::from_bits(b.to_bits().wrapping_sub(1)));
            check(x, b.to_f64(), up.to_f64(), down.to_f64(), b.to_bits().is_multiple_of(2), "bf16");
            if x.abs() < 65000.0 && x.abs() > 1e-4 {
                let h = f16_from_f64(x);
                let (up, down) = (f16::from_bits(h.to_bits() + 1), f16::from_bits(h.to_bits().wrapping_sub(1)));
                check(x, h.to_f64(), up.to_f64(), down.to_f64(), h.to_bits().is_multiple_of(2), "f16");
            }
        }
        // Overflow, infinities, NaN and zeros.
        assert!(bf16_from_f64(1e300).to_f64().is_infinite() && f16_from_f64(65520.0).to_f64().is_infinite());
        assert_eq!(f16_from_f64(65504.0).to_f64(), 65504.0);
        assert!(bf16_from_f64(f64::NAN).is_nan() && f16_from_f64(f64::NAN).is_nan());
        assert_eq!(bf16_from_f64(-0.0).to_bits(), 0x8000);
        assert_eq!(bf16_from_f64(1e-300).to_bits(), 0);
    }

    fn f(op: UnaryOp, x: f64) -> f64 {
        match unary_f64(op, x).unwrap() {
            Scalar::F(y) => y,
            s => panic!("{} gave {s:?}", op.name()),
        }
    }

    #[test]
    fn float_unary_special_values() {
        // sign: +-0 -> +0 (NumPy and torch give +0 for -0), NaN -> NaN (NumPy, ONNX).
        assert!(f(UnaryOp::Sign, -0.0) == 0.0 && f(UnaryOp::Sign, -0.0).is_sign_positive());
        assert!(f(UnaryOp::Sign, 0.0).is_sign_positive());
        assert!(f(UnaryOp::Sign, f64::NAN).is_nan());
        assert_eq!(f(UnaryOp::Sign, -3.0), -1.0);
        assert!(f(UnaryOp::Relu, -0.0).is_sign_positive());
        assert!(f(UnaryOp::Relu, f64::NAN).is_nan());
        assert_eq!(f(UnaryOp::Round, 2.5), 2.0);
        assert_eq!(f(UnaryOp::Round, -0.5), -0.0);
        assert_eq!(unary_f64(UnaryOp::IsNan, f64::NAN), Ok(Scalar::I(1)));
        assert_eq!(unary_f64(UnaryOp::IsInf, f64::NEG_INFINITY), Ok(Scalar::I(1)));
        assert!(unary_f64(UnaryOp::Not, 1.0).is_err());
    }

    #[test]
    fn integer_rules() {
        assert_eq!(unary_i64(UnaryOp::Neg, -128, DType::I8), Ok(-128));
        assert_eq!(unary_i64(UnaryOp::Abs, i64::MIN, DType::I64), Ok(i64::MIN));
        assert_eq!(unary_i64(UnaryOp::Sign, 200, DType::U8), Ok(1));
        assert_eq!(unary_i64(UnaryOp::Not, 5, DType::Bool), Ok(0));
        assert!(unary_i64(UnaryOp::Exp, 1, DType::I32).is_err());
        assert_eq!(binary_i64(BinaryOp::Div, -7, 2, DType::I32), Ok(-3));
        assert_eq!(binary_i64(BinaryOp::Mod, -7, 2, DType::I32), Ok(1));
        assert_eq!(binary_i64(BinaryOp::FMod, -7, 2, DType::I32), Ok(-1));
        assert_eq!(binary_i64(BinaryOp::Div, i32::MIN as i64, -1, DType::I32), Ok(i32::MIN as i64));
        assert_eq!(binary_i64(BinaryOp::Add, 200, 100, DType::U8), Ok(44));
        assert_eq!(binary_i64(BinaryOp::Pow, 3, 4, DType::I64), Ok(81));
        // Division by zero and negative exponents are values every backend computes alike.
        assert_eq!(binary_i64(BinaryOp::Pow, 3, -1, DType::I64), Ok(0));
        assert_eq!(binary_i64(BinaryOp::Pow, -1, -3, DType::I32), Ok(0));
        for op in [BinaryOp::Div, BinaryOp::Mod, BinaryOp::FMod] {
            assert_eq!(binary_i64(op, 3, 0, DType::I64), Ok(0));
            assert_eq!(binary_i64(op, -1, 0, DType::U64), Ok(0));
        }
        // u64 held as bits: u64::MAX > 1, and divides as unsigned.
        assert_eq!(binary_i64(BinaryOp::Gt, -1, 1, DType::U64), Ok(1));
        assert_eq!(binary_i64(BinaryOp::Max, -1, 1, DType::U64), Ok(-1));
        assert_eq!(binary_i64(BinaryOp::Div, -1, 2, DType::U64), Ok(i64::MAX));
        assert_eq!(binary_i64(BinaryOp::Xor, 2, 0, DType::Bool), Ok(1));
    }

    #[test]
    fn float_binary_rules() {
        assert!(binary_f64(BinaryOp::Max, 1.0, f64::NAN).unwrap().f().is_nan());
        assert!(binary_f64(BinaryOp::Min, f64::NAN, 1.0).unwrap().f().is_nan());
        assert_eq!(binary_f64(BinaryOp::Mod, -7.0, 2.0), Ok(Scalar::F(1.0)));
        assert_eq!(binary_f64(BinaryOp::Mod, 7.0, -2.0), Ok(Scalar::F(-1.0)));
        assert_eq!(binary_f64(BinaryOp::FMod, -7.0, 2.0), Ok(Scalar::F(-1.0)));
        assert_eq!(binary_f64(BinaryOp::Lt, 1.0, 2.0), Ok(Scalar::I(1)));
        assert_eq!(binary_f64(BinaryOp::Eq, f64::NAN, f64::NAN), Ok(Scalar::I(0)));
        assert!(binary_f64(BinaryOp::And, 1.0, 1.0).is_err());
    }

    #[test]
    fn casts() {
        let c = |x: f64, to: DType| cast(Scalar::F(x), DType::F64, to);
        assert_eq!(c(-2.7, DType::I32), Scalar::I(-2));
        assert_eq!(c(f64::NAN, DType::I32), Scalar::I(0));
        assert_eq!(c(300.0, DType::U8), Scalar::I(44));
        assert_eq!(c(0.5, DType::Bool), Scalar::I(1));
        assert_eq!(c(f64::NAN, DType::Bool), Scalar::I(1));
        assert_eq!(c(1e19, DType::U64), Scalar::I(10_000_000_000_000_000_000u64 as i64));
        assert_eq!(c(0.1, DType::F16), Scalar::F(half::f16::from_f64(0.1).to_f64()));
        assert_eq!(cast(Scalar::I(-1), DType::U64, DType::F64), Scalar::F(u64::MAX as f64));
        assert_eq!(cast(Scalar::I(-1), DType::I64, DType::U8), Scalar::I(255));
        assert_eq!(cast(Scalar::I(7), DType::I64, DType::Bool), Scalar::I(1));
        // fp8: nearest even, overflow to NaN (e4m3fn) or infinity (e5m2); from integers too.
        assert_eq!(c(1.0625, DType::F8E4M3), Scalar::F(1.0));
        assert!(c(500.0, DType::F8E4M3).f().is_nan());
        assert_eq!(c(-1e6, DType::F8E5M2), Scalar::F(f64::NEG_INFINITY));
        assert_eq!(cast(Scalar::I(17), DType::I32, DType::F8E4M3), Scalar::F(16.0));
        assert_eq!(cast(Scalar::F(-2.75), DType::F8E4M3, DType::I32), Scalar::I(-2));
        assert_eq!(cast(Scalar::F(448.0), DType::F8E4M3, DType::F8E5M2), Scalar::F(448.0));
        assert!(cast(Scalar::F(57344.0), DType::F8E5M2, DType::F8E4M3).f().is_nan());
    }

    #[test]
    fn host_tensors_from_f64_convert_as_a_cast() {
        use crate::tensor::HostTensor;
        // Bool is `!= 0` (was truncation first: 0.5 and -0.5 gave false, NaN false).
        let b = HostTensor::from_f64(DType::Bool, vec![5], &[0.5, -0.5, 0.0, f64::NAN, 2.0]);
        assert_eq!(b.to_i64_vec(), vec![1, 1, 0, 1, 1]);
        assert_eq!(HostTensor::scalar(DType::Bool, 0.25).to_i64_vec(), vec![1]);
        // u64 from 2^63 up keeps its value (was saturated to 2^63 - 1).
        let u = HostTensor::from_f64(DType::U64, vec![2], &[1e19, 3.9]);
        assert_eq!(u.data, crate::tensor::TensorData::U64(vec![10_000_000_000_000_000_000, 3]));
        let i = HostTensor::from_f64(DType::I8, vec![3], &[-2.7, 200.0, f64::NAN]);
        assert_eq!(i.to_i64_vec(), vec![-2, -56, 0]);
    }

    #[test]
    fn arg_better_nan_and_ties() {
        assert!(arg_better_f64(true, f64::NAN, 1.0, false));
        assert!(!arg_better_f64(false, 1.0, f64::NAN, false));
        assert!(!arg_better_f64(true, 1.0, 1.0, false) && arg_better_f64(true, 1.0, 1.0, true));
        assert!(arg_better_i64(true, -1, 1, true, false));
        assert!(!arg_better_i64(true, -1, 1, false, false));
    }
}
