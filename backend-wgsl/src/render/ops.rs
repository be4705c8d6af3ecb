//! Unary and binary ops, casts and integer wrapping as WGSL expressions, with the CPU reference's semantics
//! (see [`super::helpers`] for the float functions).
//!
//! Every function takes operand expressions already in their compute type ([`Ct`]) and shape (scalar or
//! `vec4`) and returns an expression of the result's compute type in the same shape.

use sinter_core::DType;
use sinter_core::ir::{BinaryOp, UnaryOp};

use super::helpers::{H, Helpers};
use super::types::{Ct, ct, splat};

fn ct_of(d: DType) -> Result<Ct, String> {
    ct(d).ok_or_else(|| format!("dtype {d} is not supported by the WGSL backend"))
}

/// A literal of `ct` in the shape.
fn lit(c: Ct, vec: bool, s: &str) -> String {
    splat(c, vec, s)
}

/// Wraps an `i32`/`u32` value to a narrow integer dtype (two's complement, as a cast does).
pub(crate) fn wrap(s: &str, d: DType, vec: bool) -> String {
    let u = |x: &str| lit(Ct::U32, vec, x);
    match d {
        DType::I8 => format!("(({s}) << {}) >> {}", u("24u"), u("24u")),
        DType::I16 => format!("(({s}) << {}) >> {}", u("16u"), u("16u")),
        DType::U8 => format!("({s}) & {}", u("0xffu")),
        DType::U16 => format!("({s}) & {}", u("0xffffu")),
        _ => s.to_string(),
    }
}

/// Converts `s` from dtype `from` to dtype `to` (the cast semantics of the CPU reference: float to int
/// truncates toward zero with NaN to 0 and then wraps; anything to bool is `!= 0` with NaN true; narrow
/// floats are rounded to their precision).
pub(crate) fn cast(s: &str, from: DType, to: DType, vec: bool, h: &mut Helpers) -> Result<String, String> {
    if from == to {
        return Ok(s.to_string());
    }
    let (cf, cto) = (ct_of(from)?, ct_of(to)?);
    let tyname = |c: Ct| c.ty(vec);
    let out = match (cf, cto) {
        (Ct::F32, Ct::F32) => match to {
            DType::F16 if from != DType::F16 => format!("{}({s})", h.need(H::RoundF16, vec)),
            DType::BF16 if from != DType::BF16 => format!("{}({s})", h.need(H::RoundBf16, vec)),
            _ => s.to_string(),
        },
        (Ct::I32, Ct::I32) | (Ct::U32, Ct::U32) => wrap(s, to, vec),
        (Ct::Bool, Ct::Bool) => s.to_string(),
        (Ct::F32, Ct::I32) => wrap(&format!("{}({s})", h.need(H::F2I, vec)), to, vec),
        (Ct::F32, Ct::U32) => wrap(&format!("{}({s})", h.need(H::F2U, vec)), to, vec),
        (Ct::F32, Ct::Bool) => format!("!(({s}) == {})", lit(Ct::F32, vec, "0.0f")),
        (Ct::I32 | Ct::U32, Ct::F32) => {
            let f = format!("{}({s})", tyname(Ct::F32));
            match to {
                DType::F16 => format!("{}({f})", h.need(H::RoundF16, vec)),
                DType::BF16 => format!("{}({f})", h.need(H::RoundBf16, vec)),
                _ => f,
            }
        }
        (Ct::I32, Ct::U32) | (Ct::U32, Ct::I32) => wrap(&format!("bitcast<{}>({s})", tyname(cto)), to, vec),
        (Ct::I32 | Ct::U32, Ct::Bool) => format!("({s}) != {}", lit(cf, vec, cf.zero())),
        (Ct::Bool, _) => {
            let one = match cto {
                Ct::F32 => "1.0f",
                Ct::I32 => "1i",
                _ => "1u",
            };
            format!("select({}, {}, {s})", lit(cto, vec, cto.zero()), lit(cto, vec, one))
        }
    };
    Ok(out)
}

/// Unary op on `x` (dtype `din`), producing dtype `dout`.
pub(crate) fn unary(
    op: UnaryOp,
    x: &str,
    din: DType,
    dout: DType,
    vec: bool,
    h: &mut Helpers,
) -> Result<String, String> {
    let c = ct_of(din)?;
    let mut call = |hh: H| format!("{}({x})", h.need(hh, vec));
    let (natural, nat_dt): (String, DType) = match c {
        Ct::F32 => match op {
            UnaryOp::Neg => (format!("-({x})"), din),
            UnaryOp::Abs => (format!("abs({x})"), din),
            UnaryOp::Exp => (format!("exp({x})"), din),
            UnaryOp::Log => (call(H::Log), din),
            UnaryOp::Sqrt => (call(H::Sqrt), din),
            UnaryOp::Rsqrt => (format!("1.0 / {}", call(H::Sqrt)), din),
            UnaryOp::Sin => (call(H::Sin), din),
            UnaryOp::Cos => (call(H::Cos), din),
            UnaryOp::Tan => (call(H::Tan), din),
            UnaryOp::Asin => (call(H::Asin), din),
            UnaryOp::Acos => (call(H::Acos), din),
            UnaryOp::Atan => (call(H::Atan), din),
            UnaryOp::Sinh => (call(H::Sinh), din),
            UnaryOp::Cosh => (call(H::Cosh), din),
            UnaryOp::Asinh => (call(H::Asinh), din),
            UnaryOp::Acosh => (call(H::Acosh), din),
            UnaryOp::Atanh => (call(H::Atanh), din),
            UnaryOp::Tanh => (call(H::Tanh), din),
            UnaryOp::Sigmoid => (call(H::Sigmoid), din),
            UnaryOp::Erf => (call(H::Erf), din),
            UnaryOp::Relu => (call(H::Relu), din),
            UnaryOp::Floor => (format!("floor({x})"), din),
            UnaryOp::Ceil => (format!("ceil({x})"), din),
            // WGSL's round is round-half-to-even.
            UnaryOp::Round => (format!("round({x})"), din),
            UnaryOp::Sign => (call(H::Sign), din),
            UnaryOp::Reciprocal => (format!("1.0 / ({x})"), din),
            UnaryOp::Not => (format!("({x}) == {}", lit(Ct::F32, vec, "0.0f")), DType::Bool),
            UnaryOp::IsNan => (call(H::IsNan), DType::Bool),
            UnaryOp::IsInf => (call(H::IsInf), DType::Bool),
        },
        Ct::I32 | Ct::U32 => {
            let signed = c == Ct::I32;
            let zero = lit(c, vec, c.zero());
            match op {
                UnaryOp::Neg if signed => (wrap(&format!("-({x})"), din, vec), din),
                UnaryOp::Neg => (wrap(&format!("{zero} - ({x})"), din, vec), din),
                UnaryOp::Abs if signed => (wrap(&format!("abs({x})"), din, vec), din),
                UnaryOp::Relu if signed => (format!("max({x}, {zero})"), din),
                UnaryOp::Abs | UnaryOp::Relu | UnaryOp::Floor | UnaryOp::Ceil | UnaryOp::Round => (x.to_string(), din),
                UnaryOp::Sign if signed => (format!("sign({x})"), din),
                UnaryOp::Sign => (format!("select({zero}, {}, ({x}) != {zero})", lit(c, vec, "1u")), din),
                UnaryOp::Not => (format!("({x}) == {zero}"), DType::Bool),
                UnaryOp::IsNan | UnaryOp::IsInf => (lit(Ct::Bool, vec, "false"), DType::Bool),
                _ => return Err(format!("{} is not defined on {din}", op.name())),
            }
        }
        Ct::Bool => match op {
            UnaryOp::Not => (format!("!({x})"), DType::Bool),
            UnaryOp::Abs | UnaryOp::Relu | UnaryOp::Floor | UnaryOp::Ceil | UnaryOp::Round | UnaryOp::Sign => {
                (x.to_string(), DType::Bool)
            }
            UnaryOp::IsNan | UnaryOp::IsInf => (lit(Ct::Bool, vec, "false"), DType::Bool),
            _ => return Err(format!("{} is not defined on bool", op.name())),
        },
    };
    cast(&natural, nat_dt, dout, vec, h)
}

/// Binary op on `a`, `b` (both dtype `din`), producing dtype `dout`.
pub(crate) fn binary(
    op: BinaryOp,
    a: &str,
    b: &str,
    din: DType,
    dout: DType,
    vec: bool,
    h: &mut Helpers,
) -> Result<String, String> {
    let c = ct_of(din)?;
    let cmp = |sym: &str| (format!("({a}) {sym} ({b})"), DType::Bool);
    let (natural, nat_dt): (String, DType) = match (c, op) {
        (_, BinaryOp::Eq) => cmp("=="),
        // `!(a == b)`: true when either is NaN, whatever the driver does with unordered compares.
        (_, BinaryOp::Ne) => (format!("!(({a}) == ({b}))"), DType::Bool),
        (Ct::Bool, BinaryOp::Lt) => (format!("!({a}) & ({b})"), DType::Bool),
        (Ct::Bool, BinaryOp::Le) => (format!("!({a}) | ({b})"), DType::Bool),
        (Ct::Bool, BinaryOp::Gt) => (format!("({a}) & !({b})"), DType::Bool),
        (Ct::Bool, BinaryOp::Ge) => (format!("({a}) | !({b})"), DType::Bool),
        (_, BinaryOp::Lt) => cmp("<"),
        (_, BinaryOp::Le) => cmp("<="),
        (_, BinaryOp::Gt) => cmp(">"),
        (_, BinaryOp::Ge) => cmp(">="),
        (Ct::Bool, BinaryOp::And | BinaryOp::Min | BinaryOp::Mul) => (format!("({a}) & ({b})"), DType::Bool),
        (Ct::Bool, BinaryOp::Or | BinaryOp::Max) => (format!("({a}) | ({b})"), DType::Bool),
        (Ct::Bool, BinaryOp::Xor) => (format!("({a}) != ({b})"), DType::Bool),
        (Ct::Bool, _) => return Err(format!("{} is not defined on bool", op.name())),
        (Ct::I32 | Ct::U32, BinaryOp::And | BinaryOp::Or | BinaryOp::Xor) => {
            let z = lit(c, vec, c.zero());
            let (x, y) = (format!("(({a}) != {z})"), format!("(({b}) != {z})"));
            let sym = match op {
                BinaryOp::And => "&",
                BinaryOp::Or => "|",
                _ => "!=",
            };
            (format!("{x} {sym} {y}"), DType::Bool)
        }
        (Ct::F32, BinaryOp::And | BinaryOp::Or | BinaryOp::Xor) => {
            return Err(format!("{} is not defined on floats", op.name()));
        }
        (Ct::F32, _) => {
            let mut call = |hh: H| format!("{}({a}, {b})", h.need(hh, vec));
            let s = match op {
                BinaryOp::Add => format!("({a}) + ({b})"),
                BinaryOp::Sub => format!("({a}) - ({b})"),
                BinaryOp::Mul => format!("({a}) * ({b})"),
                BinaryOp::Div => format!("({a}) / ({b})"),
                BinaryOp::Pow => call(H::Pow),
                BinaryOp::Max => call(H::FMax),
                BinaryOp::Min => call(H::FMin),
                BinaryOp::Mod => call(H::FModFloor),
                BinaryOp::FMod => call(H::FMod),
                _ => unreachable!("comparisons and logical ops handled above"),
            };
            (s, din)
        }
        (Ct::I32 | Ct::U32, _) => {
            let signed = c == Ct::I32;
            let s = match op {
                BinaryOp::Add => format!("({a}) + ({b})"),
                BinaryOp::Sub => format!("({a}) - ({b})"),
                BinaryOp::Mul => format!("({a}) * ({b})"),
                // Truncating, with core::scalar's x / 0 = 0; the divisor is made safe first (by
                // zero, and MIN / -1 for signed), since drivers do not all honour WGSL's rules.
                BinaryOp::Div | BinaryOp::Mod | BinaryOp::FMod => int_division(op, a, b, c, vec, h),
                BinaryOp::Pow if signed => format!("{}({a}, {b})", h.need(H::IPow, vec)),
                BinaryOp::Pow => format!("{}({a}, {b})", h.need(H::UPow, vec)),
                BinaryOp::Max => format!("max({a}, {b})"),
                BinaryOp::Min => format!("min({a}, {b})"),
                _ => unreachable!("comparisons and logical ops handled above"),
            };
            (wrap(&s, din, vec), din)
        }
    };
    cast(&natural, nat_dt, dout, vec, h)
}

/// `x op ±0` for float `x` and a *constant* zero, written out with its IEEE result, or `None`
/// where the op needs nothing special. Drivers apply non-IEEE algebraic folds to constant
/// operands (lavapipe turns `x / 0.0`, `x * 0.0` and `fmod(x, 0.0)` into 0, 0 and `x`, which WGSL's
/// float rules permit), so these never reach the driver as such:
/// * `x / ±0 = x * ±inf` (±inf, NaN for 0 and NaN, as `core::scalar`);
/// * `x * ±0` = a zero with the product's sign for finite `x`, NaN for ±inf and NaN;
/// * `mod`/`fmod` by ±0 = NaN.
pub(crate) fn by_float_zero(op: BinaryOp, x: &str, negative: bool, vec: bool) -> Option<String> {
    let lit = |v: f32| super::types::splat(Ct::F32, vec, &super::types::f32_lit(v));
    let u = if vec { "vec4<u32>" } else { "u32" };
    let s = match op {
        BinaryOp::Div => format!("({x}) * {}", lit(f32::INFINITY.copysign(if negative { -1.0 } else { 1.0 }))),
        BinaryOp::Mul => {
            let flip = if negative { 0x8000_0000u32 } else { 0 };
            let zero = format!(
                "bitcast<{}>((bitcast<{u}>({x}) & {}) ^ {})",
                Ct::F32.ty(vec),
                splat_u(vec, 0x8000_0000),
                splat_u(vec, flip)
            );
            format!("select({}, {zero}, abs({x}) <= {})", lit(f32::NAN), lit(f32::MAX))
        }
        BinaryOp::Mod | BinaryOp::FMod => lit(f32::NAN),
        _ => return None,
    };
    Some(s)
}

/// A u32 literal, splatted to `vec4<u32>` when `vec`.
fn splat_u(vec: bool, v: u32) -> String {
    super::types::splat(Ct::U32, vec, &super::types::u32_lit(v))
}

/// Integer `div`, `mod` (floored) and `fmod` (truncated) of `a` by `b` with `core::scalar`'s
/// rules: by zero gives 0, and a signed `MIN / -1` wraps to `MIN` (remainder 0). The division
/// itself only ever sees a divisor that is neither 0 nor -1 (an undefined or trapping case on
/// some drivers); those two are answered by `select`.
fn int_division(op: BinaryOp, a: &str, b: &str, c: Ct, vec: bool, h: &mut Helpers) -> String {
    let lit = |v: i64| {
        let s = if c == Ct::I32 { super::types::i32_lit(v as i32) } else { super::types::u32_lit(v as u32) };
        splat(c, vec, &s)
    };
    let (zero, one) = (lit(0), lit(1));
    let (b_zero, unsafe_b) = if c == Ct::I32 {
        let z = format!("(({b}) == {zero})");
        let u = format!("({z} | (({b}) == {}))", lit(-1));
        (z, u)
    } else {
        let z = format!("(({b}) == {zero})");
        (z.clone(), z)
    };
    let sb = format!("select({b}, {one}, {unsafe_b})");
    let q = match op {
        BinaryOp::Div => format!("(({a}) / {sb})"),
        BinaryOp::Mod if c == Ct::I32 => format!("{}({a}, {sb})", h.need(H::IModFloor, vec)),
        _ => format!("(({a}) % {sb})"),
    };
    if c == Ct::I32 {
        // b == -1: a / -1 = -a (wrapping: MIN stays MIN), remainders are 0.
        let neg1 = if op == BinaryOp::Div { format!("({zero} - ({a}))") } else { zero.clone() };
        let q = format!("select({q}, {neg1}, ({b}) == {})", lit(-1));
        format!("select({q}, {zero}, {b_zero})")
    } else {
        format!("select({q}, {zero}, {b_zero})")
    }
}
