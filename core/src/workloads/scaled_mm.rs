//! `matmul_8192_fp8e4m3`: `torch._scaled_mm` on fp8 e4m3 operands, as the anchor script calls it
//! (`a = randn(K, K).to(float8_e4m3fn)`, `b = randn(K, K).to(float8_e4m3fn).t()`, scales 1.0,
//! `out_dtype=torch.bfloat16`).
//!
//! The graph has no special op: `cast(matmul(cast(a, f32), cast(b^T, f32)) * sa * sb, bf16)`.
//! Widening fp8 to f32 is exact, so this is `_scaled_mm`'s definition (the product accumulated in
//! f32, scaled, rounded once to bf16), and the scheduler may let the matmul read the fp8 operands
//! directly (`core::schedule`, the prologue decision).

use super::{Dist, InputSpec, Scale, spec};
use crate::dtype::DType;
use crate::tensor::round_to;
use crate::trace::Tensor;

/// Inputs `a [m, k]` and `b [n, k]` (the storage of torch's column-major `b`: `b.t()` of a
/// row-major `[n, k]` tensor), both e4m3 from `randn`; the scales `sa`, `sb` (f32 scalars): 1.0
/// at full scale as in the anchor, random in `[0.5, 2)` at reduced scale so a missing or doubled
/// scale shows.
pub(super) fn scaled_mm_specs(d: &[usize], scale: Scale) -> Vec<InputSpec> {
    let (m, k, n) = (d[0], d[1], d[2]);
    let e4 = DType::F8E4M3;
    let s = if scale == Scale::Full { Dist::Uniform(1.0, 1.0) } else { Dist::Uniform(0.5, 2.0) };
    vec![
        spec("a", e4, &[m, k], Dist::Normal(1.0)),
        spec("b", e4, &[n, k], Dist::Normal(1.0)),
        spec("scale_a", DType::F32, &[], s),
        spec("scale_b", DType::F32, &[], s),
    ]
}

/// `cast(matmul(cast(a, f32), cast(b, f32)^T) * sa * sb, bf16)`.
pub(super) fn scaled_mm_graph(ins: &[Tensor]) -> Tensor {
    let a = ins[0].cast(DType::F32);
    let b = ins[1].transpose(0, 1).cast(DType::F32);
    ((a.matmul(&b) * &ins[2]) * &ins[3]).cast(DType::BF16)
}

/// The reference before the final rounding to bf16: the exact product of the fp8 values rounded
/// to f32 (the matmul node's dtype), times each scale in f32.
pub(super) fn ref_scaled_mm(v: &[Vec<f64>], d: &[usize]) -> Vec<f64> {
    let (m, k, n) = (d[0], d[1], d[2]);
    let f32r = |x: f64| round_to(DType::F32, x);
    let p = super::reference::ref_matmul(&v[0], &v[1], 1, m, k, n, true);
    p.into_iter().map(|x| f32r(f32r(f32r(x) * v[2][0]) * v[3][0])).collect()
}
