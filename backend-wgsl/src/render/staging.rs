//! Staging of operand tiles into f16 workgroup memory for the cooperative-matrix kernels (`coop.rs`,
//! `attention_coop.rs`): what a prefetch register holds between its global load and its store to
//! workgroup memory, and the code of both steps.
//!
//! Invariant: a register holds the load's result unconverted wherever the conversion to f16 is more
//! than a move (packed bf16 words, f32 values). A conversion right after the load stalls the thread
//! until the load completes, where the prefetch is there to overlap the load with the multiplies.
//! Measured on an H200 through Vulkan (session 17): converting at the store took bf16 attention from
//! 2.93 to 1.67 ms and the bf16 matmul from 41 to 72 TFLOP/s. bf16 loaded one element at a time
//! (unaligned operands) is still converted at the load.

use sinter_core::DType;

use super::RenderError;
use super::emit::Emitter;
use super::helpers::H;
use super::ops;
use super::storage::{ArgInfo, holds_words, load_scalar, load_vec, load_words, unpack_words};
use super::types::{Ct, ct};

/// What a staging register holds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Held {
    /// f16 values (converted at the load: a move for f16 inputs).
    F16,
    /// f32 values (rounded to f16 at the store).
    F32,
    /// Two words of packed 16-bit floats (unpacked and converted at the store).
    Words,
}

impl Held {
    /// What registers loading `arg` (elements of `dtype`, 4 at a time when `vec`) hold.
    pub(super) fn of(arg: &ArgInfo, vec: bool, dtype: DType) -> Held {
        if vec && holds_words(arg) {
            Held::Words
        } else if dtype == DType::F32 {
            Held::F32
        } else {
            Held::F16
        }
    }

    /// The register's WGSL type.
    pub(super) fn ty(self, vec: bool) -> &'static str {
        match (self, vec) {
            (Held::Words, _) => "vec2<u32>",
            (Held::F32, true) => "vec4<f32>",
            (Held::F32, false) => "f32",
            (Held::F16, true) => "vec4<f16>",
            (Held::F16, false) => "f16",
        }
    }

    /// Zero of the register's type (what it holds past the operand's edges).
    pub(super) fn zero(self, vec: bool) -> String {
        format!("{}()", self.ty(vec))
    }

    /// The value a register takes from element `i` of `arg` (the 4 from `i` when `vec`); statements
    /// the load needs are emitted first.
    pub(super) fn load(
        self,
        em: &mut Emitter<'_>,
        arg: &ArgInfo,
        i: &str,
        vec: bool,
        dtype: DType,
    ) -> Result<String, RenderError> {
        if self == Held::Words {
            return load_words(arg, i).ok_or_else(|| em.err("packed words expected"));
        }
        let tmp = em.fresh("l");
        let (pre, v) =
            if vec { load_vec(arg, i, &tmp, ct(dtype).unwrap_or(Ct::F32)) } else { load_scalar(arg, i, &tmp) };
        for p in pre {
            em.line(p);
        }
        let v = ops::cast(&v, dtype, DType::F32, vec, &mut em.h).map_err(|m| em.err(m))?;
        Ok(if self == Held::F16 { to_f16(em, &v, vec, dtype) } else { v })
    }

    /// The f16 value (`vec4<f16>` when `vec`) of register `reg`, to store to workgroup memory.
    pub(super) fn stored(
        self,
        em: &mut Emitter<'_>,
        arg: &ArgInfo,
        reg: &str,
        vec: bool,
        dtype: DType,
    ) -> Result<String, RenderError> {
        Ok(match self {
            Held::Words => {
                let f = unpack_words(arg, reg).ok_or_else(|| em.err("packed words expected"))?;
                to_f16(em, &f, true, dtype)
            }
            Held::F32 => to_f16(em, reg, vec, dtype),
            Held::F16 => reg.to_string(),
        })
    }
}

/// `v` (f32 values of `dtype` elements) as f16: bf16 through the saturating helper, f16 as is, f32
/// rounded to nearest.
fn to_f16(em: &mut Emitter<'_>, v: &str, vec: bool, dtype: DType) -> String {
    if dtype == DType::BF16 {
        let f = em.h.need(H::Bf16ToF16, vec);
        format!("{f}({v})")
    } else if vec {
        format!("vec4<f16>({v})")
    } else {
        format!("f16({v})")
    }
}
