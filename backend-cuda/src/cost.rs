//! The CUDA backend's cost model ([`Backend::cost_model`](sinter_core::backend::Backend::cost_model)):
//! the default model's thresholds, plus implicit GEMM for the convolutions the tensor-core
//! template runs.
//!
//! A convolution the default model lowers through im2col (`conv_as_matmul`) becomes an implicit
//! GEMM (`conv_implicit`: the `mma` template reads the im2col view of the input in its loader,
//! `render::mma`) when the device has `mma.sync` (sm_80+) and the products take tensor cores:
//! bf16/f16 operands, or f32 operands the compile allows TF32 (`AllowTf32::conv`, on by default as
//! in PyTorch). Exact f32 keeps the im2col buffer, whose product cuBLASLt runs exactly;
//! `SINTER_IMPLICIT_GEMM=0` when the model is made keeps it everywhere (for comparisons and as a
//! way out).

use sinter_core::DType;
use sinter_core::kernel::Capabilities;
use sinter_core::schedule::{ConvShape, CostModel, DefaultCostModel};

/// The CUDA cost model (see the module docs).
#[derive(Clone, Debug, PartialEq)]
pub struct CudaCostModel {
    /// Every decision but `conv_implicit`.
    pub base: DefaultCostModel,
    /// Compute capability of the device (implicit GEMM needs `mma.sync`, sm_80+).
    pub sm: (u32, u32),
    /// Run eligible convolutions as implicit GEMMs (default; `SINTER_IMPLICIT_GEMM=0` turns it off).
    pub implicit_gemm: bool,
    /// Store the inputs of cuDNN's convolutions channels-last (default; `SINTER_CHANNELS_LAST=0`
    /// turns it off).
    pub channels_last: bool,
}

impl CudaCostModel {
    /// The model for a device of compute capability `sm`.
    pub fn new(sm: (u32, u32)) -> CudaCostModel {
        CudaCostModel {
            base: DefaultCostModel::default(),
            sm,
            implicit_gemm: !std::env::var("SINTER_IMPLICIT_GEMM").is_ok_and(|v| v == "0"),
            channels_last: !std::env::var("SINTER_CHANNELS_LAST").is_ok_and(|v| v == "0"),
        }
    }
}

impl CostModel for CudaCostModel {
    fn name(&self) -> &str {
        "cuda"
    }

    fn base(&self) -> Option<&dyn CostModel> {
        Some(&self.base)
    }

    /// Always: large products run on cuBLASLt, which adds a stored residual as its `C` in the
    /// product's call; a residual recomputed in the epilogue (GPT-2's `h + attn + bias`, two loads
    /// and a bias) makes the product split, its result written to a scratch and read back by an
    /// epilogue kernel. Storing the residual costs one write of it in the kernel that computes it.
    fn materialize_residual(&self) -> Option<String> {
        Some("materialized: residual of a matrix product (the library adds a stored one as its C)".into())
    }

    /// Never: the CUDA renderer splits a row with too few rows to fill the device over blocks of
    /// one kernel, the row's last block folding the partials (`render::reduce`'s split rows),
    /// which saves the second kernel and its launch of the scheduler's split.
    fn reduce_split(&self, _rows: usize, _len: usize, _caps: &Capabilities) -> usize {
        1
    }

    /// Implicit GEMM where the tensor-core template takes the product (see the module docs).
    fn conv_implicit(&self, conv: &ConvShape, caps: &Capabilities) -> Result<String, String> {
        let _ = caps;
        if !self.implicit_gemm {
            return Err("implicit GEMM: turned off (SINTER_IMPLICIT_GEMM=0)".into());
        }
        if self.sm.0 < 8 {
            return Err(format!("implicit GEMM: sm_{}{} has no mma.sync (sm_80+)", self.sm.0, self.sm.1));
        }
        let engine = match conv.dtype {
            DType::BF16 | DType::F16 => format!("{} on tensor cores", conv.dtype),
            DType::F32 if conv.tf32 => "f32 in TF32 on tensor cores (allow_tf32 conv)".to_string(),
            DType::F32 => {
                return Err("implicit GEMM: exact f32 (TF32 not allowed) has no tensor-core template; the im2col \
                            buffer's product runs exactly"
                    .into());
            }
            d => return Err(format!("implicit GEMM: {d} operands")),
        };
        let groups = if conv.groups > 1 { format!("{} groups of ", conv.groups) } else { String::new() };
        let n = conv.batch * conv.out_hw[0] * conv.out_hw[1];
        Ok(format!(
            "implicit GEMM: {groups}{}x{n}x{} {engine}, the im2col view read in the loader (no {}-byte im2col buffer)",
            conv.m(),
            conv.k(),
            conv.im2col_bytes
        ))
    }

    /// Channels-last inputs where cuDNN runs the convolution in `default` mode (libcudnn found,
    /// the library's size rule, `backend::large_enough`): its channels-last TF32 kernels ran
    /// ResNet-18's 3x3 convolutions 1.6-2.0x faster than NCHW on an H200 (PyTorch's cuDNN,
    /// BENCHMARKS.md session 10). Not for the own template, whose im2col walk reads along rows
    /// (in `reduce-overhead`, where cuDNN never runs, the template reads the NHWC input through
    /// its strides). `SINTER_CHANNELS_LAST=0` turns it off.
    fn conv_channels_last(&self, conv: &ConvShape, _caps: &Capabilities) -> Result<String, String> {
        if !self.channels_last {
            return Err("layout: NCHW (SINTER_CHANNELS_LAST=0)".into());
        }
        // The library's own rule for `default` mode, so the layout follows where cuDNN runs (before
        // the probe, which loads libcudnn).
        crate::backend::large_enough(conv.flops(), sinter_core::backend::Mode::Default)
            .map_err(|why| format!("layout: NCHW (the own template: {why})"))?;
        crate::probe::cudnn().map_err(|why| format!("layout: NCHW (no cuDNN: {why})"))?;
        Ok("cuDNN's channels-last kernels".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conv(dtype: DType, tf32: bool) -> ConvShape {
        ConvShape {
            batch: 2,
            in_channels: 64,
            out_channels: 64,
            groups: 1,
            kernel: [3, 3],
            out_hw: [8, 8],
            im2col_bytes: 2 * 64 * 9 * 64 * 4,
            dtype,
            tf32,
        }
    }

    #[test]
    fn implicit_gemm_where_tensor_cores_take_the_product() {
        let caps = Capabilities::host();
        let m = CudaCostModel { implicit_gemm: true, ..CudaCostModel::new((9, 0)) };
        let r = m.conv_implicit(&conv(DType::F32, true), &caps).expect("tf32");
        assert!(r.contains("64x128x576 f32 in TF32"), "{r}");
        assert!(m.conv_implicit(&conv(DType::BF16, false), &caps).expect("bf16").contains("bf16 on tensor cores"));
        assert!(m.conv_implicit(&conv(DType::F32, false), &caps).unwrap_err().contains("exact f32"));
        assert!(m.conv_implicit(&conv(DType::F64, false), &caps).unwrap_err().contains("f64"));
        let volta = CudaCostModel { sm: (7, 0), ..m.clone() };
        assert!(volta.conv_implicit(&conv(DType::F16, false), &caps).unwrap_err().contains("sm_70"));
        let off = CudaCostModel { implicit_gemm: false, ..m.clone() };
        assert!(off.conv_implicit(&conv(DType::F16, false), &caps).unwrap_err().contains("turned off"));
        // Everything else is the default model's.
        let d = DefaultCostModel::default();
        assert_eq!(m.conv_as_matmul(&conv(DType::F32, true), &caps), d.conv_as_matmul(&conv(DType::F32, true), &caps));
    }
}
