//! Unary and binary ops, casts, loads and stores as C++ expressions with the semantics of
//! [`sinter_core::scalar`] (see [`super::prelude`] for the helper functions).
//!
//! Every function takes operand expressions in their compute type ([`Ct`]) and returns an
//! expression of the result's compute type. Signed 32- and 64-bit arithmetic is done in the
//! unsigned type of the same width (wrapping, no undefined behaviour); 8- and 16-bit integers are
//! computed in `int`/`unsigned` and wrapped back to their dtype after every op.

use sinter_core::DType;
use sinter_core::ir::{BinaryOp, UnaryOp};

use super::prelude::{Fp, H, Helpers, It};
use super::trig::Trig;
use super::types::{Ct, ct, storage};

/// Whether `s` needs no parentheses as an operand: an identifier, a literal, a member or element
/// access, or one call spanning the whole string.
pub(crate) fn is_atom(s: &str) -> bool {
    let simple = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '.' || c == '[' || c == ']';
    if !s.is_empty() && s.chars().all(simple) {
        return true;
    }
    // `name(...)`, `(...)` or `name[...]` whose first bracket closes at the end.
    let Some(open) = s.find(['(', '[']) else { return false };
    let close = if s[open..].starts_with('(') { ')' } else { ']' };
    if !s[..open].chars().all(|c| c.is_ascii_alphanumeric() || c == '_') || !s.ends_with(close) {
        return false;
    }
    let mut depth = 0i32;
    for (i, c) in s.char_indices().skip(open) {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => {
                depth -= 1;
                if depth == 0 {
                    return i == s.len() - 1;
                }
            }
            _ => {}
        }
    }
    false
}

/// `s`, parenthesized unless it is an atom.
pub(crate) fn p(s: &str) -> String {
    if is_atom(s) { s.to_string() } else { format!("({s})") }
}

fn fp(c: Ct) -> Fp {
    if c == Ct::Double { Fp::F64 } else { Fp::F32 }
}

fn it(c: Ct) -> It {
    match c {
        Ct::Long => It::I64,
        Ct::UInt | Ct::Bool => It::U32,
        Ct::ULong => It::U64,
        _ => It::I32,
    }
}

/// Converts an integer or bool expression (any integer compute type) to integer dtype `to`,
/// wrapping as a C cast does (two's complement truncation, sign extension from signed types).
fn int_conv(x: &str, to: DType) -> String {
    let x = p(x);
    match to {
        DType::I8 => format!("(int)(signed char){x}"),
        DType::I16 => format!("(int)(short){x}"),
        DType::I32 => format!("(int){x}"),
        DType::I64 => format!("(long long){x}"),
        DType::U8 => format!("(unsigned)(unsigned char){x}"),
        DType::U16 => format!("(unsigned)(unsigned short){x}"),
        DType::U32 => format!("(unsigned){x}"),
        DType::U64 => format!("(unsigned long long){x}"),
        DType::Bool => format!("{x} != 0"),
        _ => x,
    }
}

/// Wraps the result of an integer op computed in the unsigned domain (or in `int` for 8- and
/// 16-bit types) to dtype `d`.
fn wrap(x: &str, d: DType) -> String {
    match d {
        DType::I8 | DType::I16 | DType::I32 | DType::I64 => int_conv(x, d),
        DType::U8 => format!("{} & 0xffu", p(x)),
        DType::U16 => format!("{} & 0xffffu", p(x)),
        _ => x.to_string(),
    }
}

/// Converts `x` from dtype `from` to dtype `to` as the cast op does ([`sinter_core::scalar::cast`]):
/// floats round to the storage precision of `to`; floats to integers truncate toward zero (NaN to
/// 0), saturate to the i64 range and wrap; anything to bool is `!= 0` (NaN is true); integers wrap;
/// u64 converts as unsigned.
pub(crate) fn cast(x: &str, from: DType, to: DType, h: &mut Helpers) -> String {
    let (cf, x) = (ct(from), x.to_string());
    if from == to && !matches!(to, DType::F16 | DType::BF16) {
        return x;
    }
    match to {
        DType::F64 => match cf {
            Ct::Double => x,
            Ct::Bool => format!("({} ? 1.0 : 0.0)", p(&x)),
            _ => format!("(double){}", p(&x)),
        },
        DType::F32 => match cf {
            Ct::Float => x,
            Ct::Bool => format!("({} ? 1.0f : 0.0f)", p(&x)),
            Ct::Long | Ct::ULong => format!("(float)(double){}", p(&x)),
            _ => format!("(float){}", p(&x)),
        },
        DType::F8E4M3 | DType::F8E5M2 => {
            let (dec, enc) = fp8_fns(to);
            match cf {
                Ct::Bool => format!("({} ? 1.0f : 0.0f)", p(&x)),
                _ => format!("{dec}({enc}((double){}))", p(&x)),
            }
        }
        DType::F16 | DType::BF16 => {
            let (up, from_f, from_d) = super::half::conv_names(to).expect("a 16-bit float");
            match cf {
                Ct::Float => format!("{up}({from_f}({x}))"),
                Ct::Double => format!("{up}({from_d}({x}))"),
                Ct::Bool => format!("({} ? 1.0f : 0.0f)", p(&x)),
                _ => format!("{up}({from_d}((double){}))", p(&x)),
            }
        }
        DType::Bool => match cf {
            Ct::Bool => x,
            c => format!("{} != {}", p(&x), c.zero()),
        },
        _ => match cf {
            Ct::Float | Ct::Double => {
                if to == DType::U64 {
                    h.need(H::ToU64(fp(cf)));
                    format!("sinter_to_u64({x})")
                } else {
                    h.need(H::ToI64(fp(cf)));
                    let y = format!("sinter_to_i64({x})");
                    if to == DType::I64 { y } else { int_conv(&y, to) }
                }
            }
            _ => int_conv(&x, to),
        },
    }
}

/// The value of an accumulator of dtype `ad` as an expression of dtype `dt`, as the interpreter
/// reads [`sinter_core::kernel::Expr::Acc`]: for a float `dt`, converted to f64 and held at `dt`'s
/// compute precision (f32 for f16/bf16: not rounded to 16 bits); else a cast.
pub(crate) fn acc_conv(x: &str, ad: DType, dt: DType, h: &mut Helpers) -> String {
    match (dt.is_float(), dt == DType::F64, ct(ad)) {
        (false, _, _) => cast(x, ad, dt, h),
        (true, true, _) => cast(x, ad, DType::F64, h),
        // An f32 accumulator read as f32, f16 or bf16: exact, not rounded to 16 bits.
        (true, false, Ct::Float) => x.to_string(),
        (true, false, _) => format!("(float){}", p(&cast(x, ad, DType::F64, h))),
    }
}

/// The result `x` of an op, natural dtype `nat` (the operands' dtype, or bool), as an expression
/// of dtype `dt`, as the interpreter rounds it: a float held at `dt`'s compute precision (not
/// rounded to 16 bits), anything else cast.
fn retype(x: String, nat: DType, dt: DType, h: &mut Helpers) -> String {
    if nat == dt {
        return x;
    }
    match (ct(nat), ct(dt)) {
        (Ct::Float, Ct::Float) => x,
        (Ct::Float | Ct::Double, Ct::Double) => format!("(double){}", p(&x)),
        (Ct::Double, Ct::Float) => format!("(float){}", p(&x)),
        _ => cast(&x, nat, dt, h),
    }
}

/// The prelude's decoder and encoder of an fp8 dtype ([`super::prelude::FP8`]).
fn fp8_fns(d: DType) -> (&'static str, &'static str) {
    if d == DType::F8E4M3 {
        ("sinter_e4m3_to_f32", "sinter_f64_to_e4m3")
    } else {
        ("sinter_e5m2_to_f32", "sinter_f64_to_e5m2")
    }
}

/// A storage element `x` of dtype `d` as its compute type.
pub(crate) fn load_conv(x: &str, d: DType) -> String {
    match d {
        DType::F8E4M3 | DType::F8E5M2 => format!("{}({x})", fp8_fns(d).0),
        DType::F16 | DType::BF16 => format!("{}({x})", super::half::conv_names(d).expect("a 16-bit float").0),
        DType::Bool => format!("{} != 0", p(x)),
        _ => x.to_string(),
    }
}

/// A value `x` of dtype `vd` as a storage element of dtype `ad` (cast to `ad`, rounded once to
/// 16 bits for f16/bf16).
pub(crate) fn store_conv(x: &str, vd: DType, ad: DType, h: &mut Helpers) -> String {
    if ad.is_fp8() {
        let enc = fp8_fns(ad).1;
        return match ct(vd) {
            Ct::Bool => format!("{enc}({} ? 1.0 : 0.0)", p(x)),
            _ => format!("{enc}((double){})", p(x)),
        };
    }
    if matches!(ad, DType::F16 | DType::BF16) {
        let (_, from_f, from_d) = super::half::conv_names(ad).expect("a 16-bit float");
        return match ct(vd) {
            Ct::Float => format!("{from_f}({x})"),
            Ct::Double => format!("{from_d}({x})"),
            Ct::Bool => format!("{from_f}({} ? 1.0f : 0.0f)", p(x)),
            _ => format!("{from_d}((double){})", p(x)),
        };
    }
    match ad {
        // A C cast to a narrow integer truncates (wraps) as the reference's cast does.
        DType::I8 | DType::I16 | DType::U8 | DType::U16 => {
            let y = match ct(vd) {
                c @ (Ct::Float | Ct::Double) => {
                    h.need(H::ToI64(fp(c)));
                    format!("sinter_to_i64({x})")
                }
                _ => p(x),
            };
            format!("({}){y}", storage(ad))
        }
        DType::Bool => format!("(unsigned char){}", p(&cast(x, vd, DType::Bool, h))),
        _ => cast(x, vd, ad, h),
    }
}

/// A gathered value `x` of dtype `d` as a signed 64-bit index (floats truncated as casts do; u64
/// as its bit pattern, as the interpreter reads it).
pub(crate) fn to_index(x: &str, d: DType, h: &mut Helpers) -> String {
    match ct(d) {
        c @ (Ct::Float | Ct::Double) => {
            h.need(H::ToI64(fp(c)));
            format!("sinter_to_i64({x})")
        }
        Ct::Long => x.to_string(),
        _ => format!("(long long){}", p(x)),
    }
}

/// The condition of a `where` from a value of dtype `d`: non-zero after truncation toward zero, as
/// the interpreter tests it (a float in (-1, 1) or NaN is false).
pub(crate) fn condition(x: &str, d: DType) -> String {
    match ct(d) {
        Ct::Bool => x.to_string(),
        Ct::Float => format!("fabsf({x}) >= 1.0f"),
        Ct::Double => format!("fabs({x}) >= 1.0"),
        c => format!("{} != {}", p(x), c.zero()),
    }
}

/// Unary op on `x` (dtype `din`) producing dtype `dout`. `Err` for ops the reference does not
/// define on the operand's dtype (e.g. `exp` of an integer). `relaxed`: the kernel may use the
/// approximate `exp` ([`relaxed_math`](super::analysis::relaxed_math)); `unit`: `x` is known to
/// lie in [-1, 1] ([`within_unit`](super::analysis::within_unit)), so an f32 `sin`/`cos` takes the
/// polynomial alone.
pub(crate) fn unary(
    op: UnaryOp,
    x: &str,
    (din, dout): (DType, DType),
    (relaxed, unit): (bool, bool),
    h: &mut Helpers,
) -> Result<String, String> {
    let c = ct(din);
    let px = p(x);
    let undefined = || Err(format!("{} is not defined on {din}", op.name()));
    let (natural, nat_dt): (String, DType) = match c {
        Ct::Float | Ct::Double => {
            let f = fp(c);
            let s = if c == Ct::Float { "f" } else { "" };
            let one = if c == Ct::Float { "1.0f" } else { "1.0" };
            let mut call = |hh: H, name: &str| {
                h.need(hh);
                format!("{name}({x})")
            };
            let libm = |name: &str| format!("{name}{s}({x})");
            let v = match op {
                UnaryOp::Neg => format!("-{px}"),
                UnaryOp::Abs => libm("fabs"),
                UnaryOp::Exp if relaxed && c == Ct::Float => format!("__expf({x})"),
                UnaryOp::Exp => libm("exp"),
                UnaryOp::Log => libm("log"),
                UnaryOp::Sqrt => libm("sqrt"),
                UnaryOp::Rsqrt => format!("{one} / {}", libm("sqrt")),
                UnaryOp::Sin if c == Ct::Float && unit => call(H::Trig(Trig::SinUnit), "sinter_sinf_unit"),
                UnaryOp::Cos if c == Ct::Float && unit => call(H::Trig(Trig::CosUnit), "sinter_cosf_unit"),
                UnaryOp::Sin if c == Ct::Float => call(H::Trig(Trig::Sin), "sinter_sinf"),
                UnaryOp::Cos if c == Ct::Float => call(H::Trig(Trig::Cos), "sinter_cosf"),
                UnaryOp::Sin => libm("sin"),
                UnaryOp::Cos => libm("cos"),
                UnaryOp::Tan => libm("tan"),
                UnaryOp::Asin => libm("asin"),
                UnaryOp::Acos => libm("acos"),
                UnaryOp::Atan => libm("atan"),
                UnaryOp::Sinh => libm("sinh"),
                UnaryOp::Cosh => libm("cosh"),
                UnaryOp::Asinh => libm("asinh"),
                UnaryOp::Acosh => libm("acosh"),
                UnaryOp::Atanh => libm("atanh"),
                UnaryOp::Tanh => libm("tanh"),
                UnaryOp::Erf => libm("erf"),
                UnaryOp::Floor => libm("floor"),
                UnaryOp::Ceil => libm("ceil"),
                // rint rounds half to even in the default rounding mode.
                UnaryOp::Round => libm("rint"),
                UnaryOp::Reciprocal => format!("{one} / {px}"),
                UnaryOp::Sigmoid => call(H::Sigmoid(f), "sinter_sigmoid"),
                UnaryOp::Relu => call(H::Relu(f), "sinter_relu"),
                UnaryOp::Sign => call(H::Sign(f), "sinter_sign"),
                UnaryOp::IsNan => return Ok(cast(&format!("isnan({x})"), DType::Bool, dout, h)),
                UnaryOp::IsInf => return Ok(cast(&format!("isinf({x})"), DType::Bool, dout, h)),
                UnaryOp::Not => return Ok(cast(&format!("{px} == {}", c.zero()), DType::Bool, dout, h)),
            };
            (v, din)
        }
        Ct::Int | Ct::Long | Ct::UInt | Ct::ULong => {
            let signed = c.is_signed();
            let u = c.unsigned().name();
            let z = c.zero();
            let v = match op {
                UnaryOp::Neg if matches!(din, DType::I8 | DType::I16) => wrap(&format!("-{px}"), din),
                UnaryOp::Neg => wrap(&format!("({u})0 - ({u}){px}"), din),
                UnaryOp::Abs if signed && matches!(din, DType::I8 | DType::I16) => {
                    wrap(&format!("{px} < 0 ? -{px} : {px}"), din)
                }
                UnaryOp::Abs if signed => wrap(&format!("{px} < {z} ? ({u})0 - ({u}){px} : ({u}){px}"), din),
                UnaryOp::Relu if signed => format!("{px} > {z} ? {px} : {z}"),
                UnaryOp::Abs | UnaryOp::Relu | UnaryOp::Floor | UnaryOp::Ceil | UnaryOp::Round => x.to_string(),
                UnaryOp::Sign if signed => format!("({})(({px} > {z}) - ({px} < {z}))", c.name()),
                UnaryOp::Sign => format!("{px} != {z} ? {} : {z}", c.one()),
                UnaryOp::Not => return Ok(cast(&format!("{px} == {z}"), DType::Bool, dout, h)),
                UnaryOp::IsNan | UnaryOp::IsInf => return Ok(cast("false", DType::Bool, dout, h)),
                _ => return undefined(),
            };
            (v, din)
        }
        Ct::Bool => match op {
            UnaryOp::Not => (format!("!{px}"), DType::Bool),
            // The integer rules on 0/1, wrapped back to bool, leave every other op the identity.
            UnaryOp::Neg
            | UnaryOp::Abs
            | UnaryOp::Relu
            | UnaryOp::Floor
            | UnaryOp::Ceil
            | UnaryOp::Round
            | UnaryOp::Sign => (x.to_string(), DType::Bool),
            UnaryOp::IsNan | UnaryOp::IsInf => ("false".to_string(), DType::Bool),
            _ => return undefined(),
        },
    };
    Ok(retype(natural, nat_dt, dout, h))
}

/// Binary op on `a`, `b` (both dtype `din`) producing dtype `dout`. `relaxed`: the kernel may
/// divide through the reciprocal ([`relaxed_math`](super::analysis::relaxed_math)).
pub(crate) fn binary(
    op: BinaryOp,
    a: &str,
    b: &str,
    din: DType,
    dout: DType,
    relaxed: bool,
    h: &mut Helpers,
) -> Result<String, String> {
    let c = ct(din);
    let (pa, pb) = (p(a), p(b));
    let cmp = |sym: &str| (format!("{pa} {sym} {pb}"), DType::Bool);
    let (natural, nat_dt): (String, DType) = match (c, op) {
        (Ct::Bool, _) => {
            let v = match op {
                BinaryOp::Add | BinaryOp::Max | BinaryOp::Or => format!("{pa} || {pb}"),
                BinaryOp::Sub | BinaryOp::Xor | BinaryOp::Ne => format!("{pa} != {pb}"),
                BinaryOp::Mul | BinaryOp::Min | BinaryOp::And => format!("{pa} && {pb}"),
                BinaryOp::Eq => format!("{pa} == {pb}"),
                // a / 1 = a; a / 0 = 0 (integer division by zero gives 0, as `core::scalar`).
                BinaryOp::Div => format!("{pa} && {pb}"),
                BinaryOp::Mod | BinaryOp::FMod => "false".to_string(),
                BinaryOp::Pow | BinaryOp::Ge => format!("{pa} || !{pb}"),
                BinaryOp::Lt => format!("!{pa} && {pb}"),
                BinaryOp::Le => format!("!{pa} || {pb}"),
                BinaryOp::Gt => format!("{pa} && !{pb}"),
            };
            (v, DType::Bool)
        }
        (_, BinaryOp::Eq) => cmp("=="),
        (_, BinaryOp::Ne) => cmp("!="),
        (_, BinaryOp::Lt) => cmp("<"),
        (_, BinaryOp::Le) => cmp("<="),
        (_, BinaryOp::Gt) => cmp(">"),
        (_, BinaryOp::Ge) => cmp(">="),
        (Ct::Float | Ct::Double, BinaryOp::And | BinaryOp::Or | BinaryOp::Xor) => {
            return Err(format!("{} is not defined on floats", op.name()));
        }
        (_, BinaryOp::And | BinaryOp::Or | BinaryOp::Xor) => {
            let z = c.zero();
            let sym = match op {
                BinaryOp::And => "&&",
                BinaryOp::Or => "||",
                _ => "!=",
            };
            (format!("({pa} != {z}) {sym} ({pb} != {z})"), DType::Bool)
        }
        (Ct::Float | Ct::Double, _) => {
            let f = fp(c);
            let s = if c == Ct::Float { "f" } else { "" };
            let mut call = |hh: H, name: &str| {
                h.need(hh);
                format!("{name}({a}, {b})")
            };
            let v = match op {
                BinaryOp::Add => format!("{pa} + {pb}"),
                BinaryOp::Sub => format!("{pa} - {pb}"),
                BinaryOp::Mul => format!("{pa} * {pb}"),
                BinaryOp::Div if relaxed && c == Ct::Float => format!("{pa} * __frcp_rn({b})"),
                BinaryOp::Div => format!("{pa} / {pb}"),
                BinaryOp::Pow => format!("pow{s}({a}, {b})"),
                BinaryOp::FMod => format!("fmod{s}({a}, {b})"),
                BinaryOp::Max => call(H::FMax(f), "sinter_fmax"),
                BinaryOp::Min => call(H::FMin(f), "sinter_fmin"),
                BinaryOp::Mod => call(H::FModFloor(f), "sinter_mod"),
                _ => return Err(format!("internal: {} on floats", op.name())),
            };
            (v, din)
        }
        (_, _) => {
            let signed = c.is_signed();
            let narrow = matches!(din, DType::I8 | DType::I16 | DType::U8 | DType::U16);
            let u = c.unsigned().name();
            // Signed 32/64-bit arithmetic in the unsigned type of the same width (wraps, no UB).
            let arith = |sym: &str| {
                if signed && !narrow {
                    wrap(&format!("({u}){pa} {sym} ({u}){pb}"), din)
                } else {
                    wrap(&format!("{pa} {sym} {pb}"), din)
                }
            };
            let mut call = |hh: H, name: &str| {
                h.need(hh);
                format!("{name}({a}, {b})")
            };
            let v = match op {
                BinaryOp::Add => arith("+"),
                BinaryOp::Sub => arith("-"),
                BinaryOp::Mul => arith("*"),
                BinaryOp::Max => format!("{pa} > {pb} ? {pa} : {pb}"),
                BinaryOp::Min => format!("{pa} < {pb} ? {pa} : {pb}"),
                BinaryOp::Div if signed => wrap(&call(H::Div(it(c)), "sinter_div"), din),
                BinaryOp::Div => call(H::Div(it(c)), "sinter_div"),
                BinaryOp::Mod if signed => call(H::ModFloor(it(c)), "sinter_mod"),
                BinaryOp::Mod | BinaryOp::FMod => call(H::Rem(it(c)), "sinter_rem"),
                BinaryOp::Pow => wrap(&call(H::Pow(it(c)), "sinter_pow"), din),
                _ => return Err(format!("internal: {} on integers", op.name())),
            };
            (v, din)
        }
    };
    Ok(retype(natural, nat_dt, dout, h))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atoms() {
        assert!(is_atom("v12"));
        assert!(is_atom("x3.v[j]"));
        assert!(is_atom("sinter_fmax(v1, v2)"));
        assert!(is_atom("(a + b)"));
        assert!(!is_atom("(a) + (b)"));
        assert!(!is_atom("f(a) + g(b)"));
        assert!(!is_atom("-v1"));
        assert!(!is_atom("(int)v1"));
        assert!(is_atom("a1[lane % 7u]"));
        assert!(!is_atom("a1[lane] + a2[lane]"));
    }

    #[test]
    fn casts_follow_the_reference() {
        let mut h = Helpers::default();
        assert_eq!(cast("v1", DType::F32, DType::F16, &mut h), "sinter_f16_to_f32(sinter_f32_to_f16(v1))");
        assert_eq!(cast("v1", DType::I64, DType::F32, &mut h), "(float)(double)v1");
        assert_eq!(cast("v1", DType::F32, DType::U8, &mut h), "(unsigned)(unsigned char)sinter_to_i64(v1)");
        assert_eq!(cast("v1", DType::F64, DType::Bool, &mut h), "v1 != 0.0");
        assert_eq!(cast("v1", DType::I32, DType::U64, &mut h), "(unsigned long long)v1");
        assert_eq!(store_conv("v1", DType::F32, DType::BF16, &mut h), "sinter_f32_to_bf16(v1)");
        // fp8: rounded through double (exact for f32 and f64 values), widened by the decoder.
        assert_eq!(store_conv("v1", DType::F32, DType::F8E4M3, &mut h), "sinter_f64_to_e4m3((double)v1)");
        assert_eq!(cast("v1", DType::F32, DType::F8E5M2, &mut h), "sinter_e5m2_to_f32(sinter_f64_to_e5m2((double)v1))");
        assert_eq!(cast("v1", DType::F8E4M3, DType::F32, &mut h), "v1");
        assert_eq!(load_conv("a0[i]", DType::F8E4M3), "sinter_e4m3_to_f32(a0[i])");
        assert_eq!(store_conv("v1", DType::I32, DType::I8, &mut h), "(signed char)v1");
    }
}
