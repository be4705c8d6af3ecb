//! Dtype mapping: how each sinter dtype is stored in device memory and computed in registers, and
//! how literals are written.
//!
//! Device buffers hold exactly the host byte layout of every dtype (uploads are plain copies):
//!
//! | dtype | storage (kernel parameter element) | computed as |
//! |---|---|---|
//! | f32 | `float` | `float` |
//! | f16 | `sinter_f16` (16 bits; the `half` module) | `float`, rounded by `sinter_f32_to_f16` at casts and stores |
//! | bf16 | `sinter_bf16` (16 bits; the `half` module) | `float`, rounded by `sinter_f32_to_bf16` at casts and stores |
//! | f64 | `double` | `double` |
//! | i8, i16, i32 | `signed char`, `short`, `int` | `int`, wrapped to the dtype after every op |
//! | i64 | `long long` | `long long` |
//! | u8, u16, u32 | `unsigned char`, `unsigned short`, `unsigned int` | `unsigned int`, wrapped |
//! | u64 | `unsigned long long` | `unsigned long long` |
//! | bool | `unsigned char` (0 or 1; any non-zero byte reads as true) | `bool` |
//! | f8e4m3, f8e5m2 | `unsigned char` (the code) | `float`: loads widen exactly (`sinter_e4m3_to_f32`), casts and stores round by `sinter_f64_to_e4m3` (the prelude's fp8 helpers, bit for bit as `sinter_core::fp8`) |
//!
//! NVRTC has no `<stdint.h>` by default, so only builtin type names are used.

use sinter_core::DType;
use sinter_core::scalar::{Scalar, cast};

/// The type an expression is computed in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Ct {
    /// `float` (f32, f16, bf16, fp8).
    Float,
    /// `double` (f64).
    Double,
    /// `int` (i8, i16, i32).
    Int,
    /// `unsigned int` (u8, u16, u32).
    UInt,
    /// `long long` (i64).
    Long,
    /// `unsigned long long` (u64).
    ULong,
    /// `bool`.
    Bool,
}

impl Ct {
    /// The C++ type name.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Ct::Float => "float",
            Ct::Double => "double",
            Ct::Int => "int",
            Ct::UInt => "unsigned",
            Ct::Long => "long long",
            Ct::ULong => "unsigned long long",
            Ct::Bool => "bool",
        }
    }

    /// Signed integer.
    pub(crate) fn is_signed(self) -> bool {
        matches!(self, Ct::Int | Ct::Long)
    }

    /// Integer (not bool).
    pub(crate) fn is_int(self) -> bool {
        matches!(self, Ct::Int | Ct::UInt | Ct::Long | Ct::ULong)
    }

    /// The unsigned type of the same width, in which signed arithmetic wraps without undefined
    /// behaviour.
    pub(crate) fn unsigned(self) -> Ct {
        match self {
            Ct::Int | Ct::UInt | Ct::Bool => Ct::UInt,
            Ct::Long | Ct::ULong => Ct::ULong,
            other => other,
        }
    }

    /// The literal zero.
    pub(crate) fn zero(self) -> &'static str {
        match self {
            Ct::Float => "0.0f",
            Ct::Double => "0.0",
            Ct::Int => "0",
            Ct::UInt => "0u",
            Ct::Long => "0LL",
            Ct::ULong => "0ULL",
            Ct::Bool => "false",
        }
    }

    /// The literal one.
    pub(crate) fn one(self) -> &'static str {
        match self {
            Ct::Float => "1.0f",
            Ct::Double => "1.0",
            Ct::Int => "1",
            Ct::UInt => "1u",
            Ct::Long => "1LL",
            Ct::ULong => "1ULL",
            Ct::Bool => "true",
        }
    }
}

/// The compute type of a dtype.
pub(crate) fn ct(d: DType) -> Ct {
    match d {
        DType::F32 | DType::F16 | DType::BF16 | DType::F8E4M3 | DType::F8E5M2 => Ct::Float,
        DType::F64 => Ct::Double,
        DType::I8 | DType::I16 | DType::I32 => Ct::Int,
        DType::I64 => Ct::Long,
        DType::U8 | DType::U16 | DType::U32 => Ct::UInt,
        DType::U64 => Ct::ULong,
        DType::Bool => Ct::Bool,
    }
}

/// The storage type of a dtype (the pointee of a kernel parameter).
pub(crate) fn storage(d: DType) -> &'static str {
    match d {
        DType::F32 => "float",
        DType::F16 => "sinter_f16",
        DType::BF16 => "sinter_bf16",
        DType::F64 => "double",
        DType::I8 => "signed char",
        DType::I16 => "short",
        DType::I32 => "int",
        DType::I64 => "long long",
        DType::U8 | DType::Bool | DType::F8E4M3 | DType::F8E5M2 => "unsigned char",
        DType::U16 => "unsigned short",
        DType::U32 => "unsigned int",
        DType::U64 => "unsigned long long",
    }
}

/// An `f32` literal: the shortest decimal that reads back to the same value, bit patterns for
/// NaN and the infinities.
pub(crate) fn float_lit(x: f32) -> String {
    if x.is_nan() {
        "__int_as_float(0x7fc00000)".into()
    } else if x.is_infinite() {
        if x > 0.0 { "__int_as_float(0x7f800000)".into() } else { "(-__int_as_float(0x7f800000))".into() }
    } else if x != 0.0 && x.abs() < f32::MIN_POSITIVE {
        // Subnormal: exact as a bit pattern (a decimal would draw an underflow warning).
        let s = format!("__int_as_float({:#010x})", x.abs().to_bits());
        if x < 0.0 { format!("(-{s})") } else { s }
    } else {
        let s = format!("{x:?}f");
        if x.is_sign_negative() { format!("({s})") } else { s }
    }
}

/// An `f64` literal (shortest round-trip decimal; bit patterns for NaN, the infinities and
/// subnormals).
pub(crate) fn double_lit(x: f64) -> String {
    if x.is_nan() {
        "__longlong_as_double(0x7ff8000000000000LL)".into()
    } else if x.is_infinite() {
        if x > 0.0 {
            "__longlong_as_double(0x7ff0000000000000LL)".into()
        } else {
            "(-__longlong_as_double(0x7ff0000000000000LL))".into()
        }
    } else if x != 0.0 && x.abs() < f64::MIN_POSITIVE {
        let s = format!("__longlong_as_double({:#018x}LL)", x.abs().to_bits());
        if x < 0.0 { format!("(-{s})") } else { s }
    } else {
        let s = format!("{x:?}");
        if x.is_sign_negative() { format!("({s})") } else { s }
    }
}

/// An integer literal of compute type `c` holding `v` (the i64 form of [`sinter_core::scalar`]:
/// u64 as its bit pattern).
pub(crate) fn int_lit(v: i64, c: Ct) -> String {
    match c {
        Ct::Int => {
            let v = v as i32;
            if v == i32::MIN {
                "(-2147483647 - 1)".into()
            } else if v < 0 {
                format!("({v})")
            } else {
                v.to_string()
            }
        }
        Ct::UInt => format!("{}u", v as u32),
        Ct::Long => {
            if v == i64::MIN {
                "(-9223372036854775807LL - 1)".into()
            } else if v < 0 {
                format!("({v}LL)")
            } else {
                format!("{v}LL")
            }
        }
        Ct::ULong => format!("{}ULL", v as u64),
        Ct::Bool => (if v != 0 { "true" } else { "false" }).into(),
        Ct::Float => float_lit(v as f32),
        Ct::Double => double_lit(v as f64),
    }
}

/// The literal of [`sinter_core::kernel::Expr::Const`] `c` of dtype `d`: converted as a cast from
/// f64 ([`sinter_core::scalar::cast`]: floats rounded to the dtype's storage precision, integers
/// truncated and wrapped, bool `!= 0`), written in the dtype's compute type.
pub(crate) fn const_lit(c: f64, d: DType) -> String {
    match cast(Scalar::F(c), DType::F64, d) {
        Scalar::F(x) if d == DType::F64 => double_lit(x),
        Scalar::F(x) => float_lit(x as f32),
        Scalar::I(i) => int_lit(i, ct(d)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals() {
        assert_eq!(float_lit(2.0), "2.0f");
        assert_eq!(float_lit(0.1), "0.1f");
        assert_eq!(float_lit(-0.5), "(-0.5f)");
        assert_eq!(float_lit(-0.0), "(-0.0f)");
        assert_eq!(float_lit(1e-10), "1e-10f");
        assert_eq!(float_lit(f32::NAN), "__int_as_float(0x7fc00000)");
        assert_eq!(float_lit(f32::from_bits(1)), "__int_as_float(0x00000001)");
        assert_eq!(double_lit(0.1), "0.1");
        assert_eq!(double_lit(f64::NEG_INFINITY), "(-__longlong_as_double(0x7ff0000000000000LL))");
        assert_eq!(int_lit(i32::MIN as i64, Ct::Int), "(-2147483647 - 1)");
        assert_eq!(int_lit(-1, Ct::ULong), "18446744073709551615ULL");
        assert_eq!(const_lit(0.1, DType::F16), float_lit(half::f16::from_f64(0.1).to_f32()));
        assert_eq!(const_lit(300.0, DType::U8), "44u");
        assert_eq!(const_lit(-2.7, DType::I32), "(-2)");
        assert_eq!(const_lit(0.5, DType::Bool), "true");
        assert_eq!(const_lit(f64::NAN, DType::Bool), "true");
        // fp8 literals are the rounded value in float; overflow as the cast does.
        assert_eq!(const_lit(1.0625, DType::F8E4M3), "1.0f");
        assert_eq!(const_lit(500.0, DType::F8E4M3), "__int_as_float(0x7fc00000)");
        assert_eq!(const_lit(-1e6, DType::F8E5M2), "(-__int_as_float(0x7f800000))");
    }
}
