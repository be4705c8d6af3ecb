//! Element types.

use serde::{Deserialize, Serialize};
use std::fmt;

/// The element type of a tensor.
///
/// `bf16` and `f16` are storage types: backends may compute in `f32` (the WGSL backend stores bf16
/// packed and computes in f32). The CPU reference computes every op in `f64`/`i64` and rounds to
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
}

impl DType {
    /// Every dtype, in declaration order.
    pub const ALL: [DType; 13] = [
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
    ];

    /// Size of one element in bytes (host layout).
    pub fn size_bytes(self) -> usize {
        match self {
            DType::F64 | DType::I64 | DType::U64 => 8,
            DType::F32 | DType::I32 | DType::U32 => 4,
            DType::F16 | DType::BF16 | DType::I16 | DType::U16 => 2,
            DType::I8 | DType::U8 | DType::Bool => 1,
        }
    }

    /// True for floating-point types.
    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F16 | DType::BF16 | DType::F64)
    }

    /// True for integer types (signed or unsigned, not bool).
    pub fn is_int(self) -> bool {
        !self.is_float() && self != DType::Bool
    }

    /// True for signed integer types.
    pub fn is_signed_int(self) -> bool {
        matches!(self, DType::I8 | DType::I16 | DType::I32 | DType::I64)
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
            _ => 0.0,
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
