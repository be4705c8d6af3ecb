//! Dtype mapping: how each sinter dtype is stored in a WGSL storage buffer and computed in registers.
//!
//! Device buffers hold exactly the host layout of [`sinter_core::HostTensor::to_le_bytes`] for every
//! supported dtype, so uploads and downloads are plain byte copies:
//!
//! | dtype | storage (WGSL array element) | computed as |
//! |---|---|---|
//! | f32, i32, u32 | `f32` / `i32` / `u32` (`vec4<..>` when every access of the argument is 4-aligned) | itself |
//! | f16 | `f16` with `enable f16;` when the adapter has `SHADER_F16`; else packed 2 per `u32` word (`unpack2x16float`) | `f32` |
//! | bf16 | packed 2 per `u32` word; unpacked by `bitcast<f32>(bits << 16)`, packed with round-to-nearest-even | `f32` |
//! | i8, u8, i16, u16 | packed 4 (or 2) per `u32` word, sign- or zero-extended on load | `i32` / `u32`, wrapped to the dtype after every arithmetic op |
//! | bool | one byte per element (0 or 1), packed 4 per `u32` word like `u8` | `bool` |
//! | i64, u64 | `vec2<i32>` / `vec2<u32>` (low word, high word) | `i32` / `u32`: **32-bit emulation**, loads in 32 bits (checked on upload) and kernels refused unless their 64-bit values provably stay there (see the renderer's docs); stores sign-extend (i64) or zero-extend (u64) |
//! | f64 | unsupported ([`super::RenderError::Unsupported`]) | — |
//!
//! Stores of sub-word elements (8- and 16-bit) that a thread cannot prove own a whole word are done with
//! `atomicAnd` + `atomicOr` on the word (the argument is then declared `array<atomic<u32>>`); a vectorized
//! store of 4 aligned elements writes whole words without atomics.

use sinter_core::DType;

/// The type an expression is computed in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Ct {
    /// 32-bit float (f32, f16, bf16).
    F32,
    /// Signed 32-bit integer (i8, i16, i32, emulated i64).
    I32,
    /// Unsigned 32-bit integer (u8, u16, u32, emulated u64).
    U32,
    /// Boolean.
    Bool,
}

impl Ct {
    /// The WGSL scalar type.
    pub(crate) fn scalar(self) -> &'static str {
        match self {
            Ct::F32 => "f32",
            Ct::I32 => "i32",
            Ct::U32 => "u32",
            Ct::Bool => "bool",
        }
    }

    /// The WGSL type in a shape (`vec4<f32>` when vectorized).
    pub(crate) fn ty(self, vec: bool) -> String {
        if vec { format!("vec4<{}>", self.scalar()) } else { self.scalar().to_string() }
    }

    /// Helper-template suffix for the float/int family.
    pub(crate) fn zero(self) -> &'static str {
        match self {
            Ct::F32 => "0.0",
            Ct::I32 => "0i",
            Ct::U32 => "0u",
            Ct::Bool => "false",
        }
    }
}

/// The compute type of a dtype; `None` for f64 and the fp8 types (unsupported: the backend's
/// capabilities omit them, so the compiler runs such nodes on the CPU reference).
pub(crate) fn ct(d: DType) -> Option<Ct> {
    Some(match d {
        DType::F32 | DType::F16 | DType::BF16 => Ct::F32,
        DType::I8 | DType::I16 | DType::I32 | DType::I64 => Ct::I32,
        DType::U8 | DType::U16 | DType::U32 | DType::U64 => Ct::U32,
        DType::Bool => Ct::Bool,
        DType::F64 | DType::F8E4M3 | DType::F8E5M2 => return None,
    })
}

/// How sub-word elements are interpreted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Pack {
    /// Signed integer (sign-extended).
    Signed,
    /// Unsigned integer (zero-extended).
    Unsigned,
    /// Bool byte.
    Bool,
    /// bfloat16 bits.
    BF16,
    /// IEEE half bits (no shader-f16).
    F16,
}

/// How a buffer's elements are laid out in its WGSL array.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Layout {
    /// One 32-bit word per element (f32, i32, u32).
    Word(Ct),
    /// Native `f16` (shader-f16).
    F16,
    /// `vec2<i32>` or `vec2<u32>` per element: emulated 64-bit integer (`Ct::I32` or `Ct::U32`).
    Wide(Ct),
    /// Several elements per `u32` word.
    Packed {
        /// Bits per element (8 or 16).
        bits: u32,
        /// Interpretation.
        kind: Pack,
    },
}

impl Layout {
    /// The layout of `d` given whether the adapter has shader-f16; `None` for f64 and fp8.
    pub(crate) fn of(d: DType, has_f16: bool) -> Option<Layout> {
        Some(match d {
            DType::F32 => Layout::Word(Ct::F32),
            DType::I32 => Layout::Word(Ct::I32),
            DType::U32 => Layout::Word(Ct::U32),
            DType::F16 if has_f16 => Layout::F16,
            DType::F16 => Layout::Packed { bits: 16, kind: Pack::F16 },
            DType::BF16 => Layout::Packed { bits: 16, kind: Pack::BF16 },
            DType::I8 => Layout::Packed { bits: 8, kind: Pack::Signed },
            DType::U8 => Layout::Packed { bits: 8, kind: Pack::Unsigned },
            DType::Bool => Layout::Packed { bits: 8, kind: Pack::Bool },
            DType::I16 => Layout::Packed { bits: 16, kind: Pack::Signed },
            DType::U16 => Layout::Packed { bits: 16, kind: Pack::Unsigned },
            DType::I64 => Layout::Wide(Ct::I32),
            DType::U64 => Layout::Wide(Ct::U32),
            DType::F64 | DType::F8E4M3 | DType::F8E5M2 => return None,
        })
    }

    /// Whether the arguments of this layout can be declared as an array of 4-vectors (needs numel % 4 == 0).
    pub(crate) fn vec_decl(self) -> bool {
        matches!(self, Layout::Word(_) | Layout::F16)
    }
}

/// Formats an f32 as a WGSL expression of type `f32` (bit patterns for NaN, infinities and subnormals).
pub(crate) fn f32_lit(x: f32) -> String {
    if !x.is_finite() || (x != 0.0 && !x.is_normal()) {
        return format!("bitcast<f32>(0x{:08x}u)", x.to_bits());
    }
    let s = format!("{x:?}");
    format!("{s}f")
}

/// Formats an i32 as a WGSL expression of type `i32`.
pub(crate) fn i32_lit(x: i32) -> String {
    if x == i32::MIN { "(-2147483647i - 1i)".to_string() } else { format!("{x}i") }
}

/// Formats a u32 as a WGSL expression of type `u32`.
pub(crate) fn u32_lit(x: u32) -> String {
    format!("{x}u")
}

/// A literal of compute type `ct` for the f64 value `x` of dtype `d`, rounded as storing it in `d` would.
/// Returns `Err` with a message when an emulated 64-bit integer constant does not fit 32 bits.
pub(crate) fn const_lit(x: f64, d: DType) -> Result<String, String> {
    Ok(match d {
        DType::F32 => f32_lit(x as f32),
        DType::F16 => f32_lit(sinter_core::scalar::f16_from_f64(x).to_f32()),
        DType::BF16 => f32_lit(sinter_core::scalar::bf16_from_f64(x).to_f32()),
        DType::Bool => if x != 0.0 { "true" } else { "false" }.to_string(),
        DType::I64 => {
            let v = sinter_core::tensor::float_to_i64(x);
            let v = i32::try_from(v).map_err(|_| {
                format!("the i64 constant {v} does not fit the 32-bit emulation of i64 the WGSL backend uses")
            })?;
            i32_lit(v)
        }
        DType::U64 => {
            let v =
                if x >= 9_223_372_036_854_775_808.0 { x as u64 } else { sinter_core::tensor::float_to_i64(x) as u64 };
            let v = u32::try_from(v).map_err(|_| {
                format!("the u64 constant {v} does not fit the 32-bit emulation of u64 the WGSL backend uses")
            })?;
            u32_lit(v)
        }
        DType::I8 | DType::I16 | DType::I32 => {
            i32_lit(sinter_core::tensor::cast_int(d, sinter_core::tensor::float_to_i64(x)) as i32)
        }
        DType::U8 | DType::U16 | DType::U32 => {
            u32_lit(sinter_core::tensor::cast_int(d, sinter_core::tensor::float_to_i64(x)) as u32)
        }
        DType::F64 | DType::F8E4M3 | DType::F8E5M2 => {
            return Err(format!("{d} is not supported by the WGSL backend"));
        }
    })
}

/// Splats a scalar expression of `ct` to a 4-vector when `vec`.
pub(crate) fn splat(ct: Ct, vec: bool, s: &str) -> String {
    if vec { format!("vec4<{}>({s})", ct.scalar()) } else { s.to_string() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals() {
        assert_eq!(f32_lit(1.0), "1.0f");
        assert_eq!(f32_lit(-0.5), "-0.5f");
        assert_eq!(f32_lit(1e-8), "1e-8f");
        assert_eq!(f32_lit(f32::INFINITY), "bitcast<f32>(0x7f800000u)");
        assert!(f32_lit(f32::NAN).starts_with("bitcast<f32>(0x7fc"));
        assert_eq!(f32_lit(1e-40), format!("bitcast<f32>(0x{:08x}u)", 1e-40f32.to_bits()));
        assert_eq!(i32_lit(i32::MIN), "(-2147483647i - 1i)");
        assert_eq!(const_lit(300.0, DType::U8).unwrap(), "44u");
        assert_eq!(const_lit(-1.0, DType::I8).unwrap(), "-1i");
        assert!(const_lit(1e12, DType::I64).is_err());
        assert_eq!(const_lit(0.1, DType::BF16).unwrap(), f32_lit(half::bf16::from_f64(0.1).to_f32()));
    }
}
