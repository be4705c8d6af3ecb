//! Element types.

use serde::{Deserialize, Serialize};
use std::fmt;

/// The element type of a tensor.
///
/// `bf16`, `f16` and the fp8 types are storage types: backends may compute in `f32` (the WGSL
/// backend stores bf16 packed and computes in f32; loads of fp8 widen to f32 exactly, stores and
/// casts round as [`crate::fp8`] defines). The CPU reference computes every op in `f64`/`i64` and rounds to
/// the node's dtype when storing the result.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    /// IEEE binary32.
    F32,
    /// IEEE binary16.
    F16,
    /// bfloat16 (8-bit exponent, 7-bit mantissa).
    BF16,
    /// IEEE binary64.
    F64,
    /// Signed 8-bit integer.
    I8,
    /// Signed 16-bit integer.
    I16,
    /// Signed 32-bit integer.
    I32,
    /// Signed 64-bit integer.
    I64,
    /// Unsigned 8-bit integer.
    U8,
    /// Unsigned 16-bit integer.
    U16,
    /// Unsigned 32-bit integer.
    U32,
    /// Unsigned 64-bit integer.
    U64,
    /// Boolean (one byte per element on the host).
    Bool,
    /// 8-bit float e4m3fn (torch `float8_e4m3fn`, ONNX `FLOAT8E4M3FN`): 4 exponent bits, 3
    /// mantissa bits, no infinities, largest finite 448 (see [`crate::fp8`]).
    F8E4M3,
    /// 8-bit float e5m2 (torch `float8_e5m2`, ONNX `FLOAT8E5M2`): IEEE-like with infinities,
    /// largest finite 57344 (see [`crate::fp8`]).
    F8E5M2,
}

impl DType {
    /// Every dtype, in declaration order.
    pub const ALL: [DType; 15] = [
        DType::F32,
        DType::F16,
        DType::BF16,
        DType::F64,
        DType::I8,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::U8,
        DType::U16,
        DType::U32,
        DType::U64,
        DType::Bool,
        DType::F8E4M3,
        DType::F8E5M2,
    ];

    /// Size of one element in bytes (host layout).
    pub fn size_bytes(self) -> usize {
        match self {
            DType::F64 | DType::I64 | DType::U64 => 8,
            DType::F32 | DType::I32 | DType::U32 => 4,
            DType::F16 | DType::BF16 | DType::I16 | DType::U16 => 2,
            DType::I8 | DType::U8 | DType::Bool | DType::F8E4M3 | DType::F8E5M2 => 1,
        }
    }

    /// True for floating-point types.
    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F16 | DType::BF16 | DType::F64 | DType::F8E4M3 | DType::F8E5M2)
    }

    /// True for integer types (signed or unsigned, not bool).
    pub fn is_int(self) -> bool {
        !self.is_float() && self != DType::Bool
    }

    /// True for signed integer types.
    pub fn is_signed_int(self) -> bool {
        matches!(self, DType::I8 | DType::I16 | DType::I32 | DType::I64)
    }

    /// True for the 8-bit floats.
    pub fn is_fp8(self) -> bool {
        matches!(self, DType::F8E4M3 | DType::F8E5M2)
    }

    /// True for bool.
    pub fn is_bool(self) -> bool {
        self == DType::Bool
    }

    /// Short lowercase name, as printed in the IR text form (`f32`, `bf16`, `i64`, `bool`).
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::F64 => "f64",
            DType::I8 => "i8",
            DType::I16 => "i16",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::U8 => "u8",
            DType::U16 => "u16",
            DType::U32 => "u32",
            DType::U64 => "u64",
            DType::Bool => "bool",
            DType::F8E4M3 => "f8e4m3",
            DType::F8E5M2 => "f8e5m2",
        }
    }

    /// Parses a name as printed by [`DType::name`].
    pub fn from_name(s: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.name() == s)
    }

    /// Relative error bound used when comparing a backend's result with the CPU reference.
    pub fn rel_tolerance(self) -> f64 {
        match self {
            DType::F64 => 1e-9,
            DType::F32 => 1e-4,
            DType::F16 => 4e-3,
            DType::BF16 => 2e-2,
            // One unit in the last place (2^-3 and 2^-2 of the value): a result computed in f32
            // and rounded once may differ by one step from the reference rounded from f64.
            DType::F8E4M3 => 0.125,
            DType::F8E5M2 => 0.25,
            _ => 0.0,
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
