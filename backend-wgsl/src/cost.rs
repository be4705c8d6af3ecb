//! The WGSL backend's cost model: [`DefaultCostModel`]'s decisions, with binding counts that follow the
//! renderer's *split bindings*. An argument whose buffer exceeds `max_storage_buffer_binding_size` is
//! bound as several windows of that buffer (see [`crate::render`]), and every window counts against
//! `max_storage_buffers_per_shader_stage` ([`Capabilities::max_bindings`]); [`WgslCostModel`] tells the
//! scheduler so, and the scheduler splits a fused kernel before the renderer would refuse it.
//!
//! The window arithmetic is the renderer's: the argument's bytes rounded up to a multiple of 4, one
//! binding when that fits the limit, else windows of the largest multiple of 16 bytes and of the storage
//! offset alignment within the limit. With the default alignment (256 bytes, the largest WebGPU allows)
//! the count is never below the renderer's on any adapter whose limit is at least 256 bytes (WebGPU
//! guarantees 128 MiB; only tests lower it further); [`WgslCostModel::for_caps`] takes the adapter's
//! alignment and counts exactly.

use sinter_core::DType;
use sinter_core::kernel::Capabilities;
use sinter_core::schedule::{AttentionShape, ConvShape, CostModel, DefaultCostModel};

use crate::render::WgslCaps;

/// The largest `min_storage_buffer_offset_alignment` WebGPU allows (and its default).
const MAX_STORAGE_OFFSET_ALIGNMENT: u32 = 256;

/// [`DefaultCostModel`] with WGSL's binding count: one binding per window of a split argument.
#[derive(Clone, Debug, PartialEq)]
pub struct WgslCostModel {
    /// Every decision but the binding count.
    pub base: DefaultCostModel,
    /// `min_storage_buffer_offset_alignment` in bytes: windows start at multiples of it (and of 16).
    /// The default, 256, is the largest WebGPU allows, so counts never fall below the renderer's (for
    /// binding limits of at least 256 bytes).
    pub storage_offset_alignment: u32,
    /// Input dtypes whose fused attention runs on cooperative matrices (the adapter's f16 matrix
    /// units, with the opt-in conversion for bf16 and f32): those always fuse. Empty by default.
    pub coop_attention: Vec<DType>,
}

/// Queries and keys from which a non-causal attention on the FMA flash kernel stays three kernels
/// ([`WgslCostModel::fuse_attention`]). Measured through Vulkan on an H200 (session 28,
/// `scripts/session28/d7.sh`, f32, b8 h16): the fused kernel against three kernels at d64 0.155 /
/// 0.152 ms at 256 keys, 0.568 / 0.452 at 512, 2.170 / 1.655 at 1024, 8.390 / 5.860 at 2048; at
/// d128 0.753 / 0.235, 0.898 / 0.705, 3.371 / 2.645, 12.873 / 9.525. Below, in the models' own
/// 128-197 tokens, the fused kernel won by 6-8% (session 27), as it did causal (1.28x at 2048 keys,
/// d128: it skips the masked key tiles, the three kernels compute them).
pub const UNFUSED_ATTENTION_MIN_KEYS: usize = 256;

/// Most bytes of f32 scores per attention a non-causal chain may keep in memory to stay three
/// kernels (2 GiB: b8 h16 at 2048 keys); above, the fused kernel keeps the memory bounded.
pub const UNFUSED_ATTENTION_MAX_SCORE_BYTES: u64 = 2 << 30;

impl Default for WgslCostModel {
    fn default() -> WgslCostModel {
        WgslCostModel {
            base: DefaultCostModel::default(),
            storage_offset_alignment: MAX_STORAGE_OFFSET_ALIGNMENT,
            coop_attention: Vec::new(),
        }
    }
}

impl WgslCostModel {
    /// The cost model for an adapter with these renderer capabilities: binding counts exactly as the
    /// renderer binds (its storage offset alignment), attention on cooperative matrices where the
    /// adapter has them, the default thresholds otherwise.
    pub fn for_caps(caps: &WgslCaps) -> WgslCostModel {
        let coop_attention = [DType::F16, DType::BF16, DType::F32]
            .into_iter()
            .filter(|&d| crate::render::attention_coop::adapter_runs(caps, d).is_ok())
            .collect();
        WgslCostModel {
            storage_offset_alignment: caps.storage_offset_alignment,
            coop_attention,
            ..WgslCostModel::default()
        }
    }
}

/// Bytes of every window but the last of an argument split under a binding limit of `max_binding_bytes`:
/// the largest multiple of 16 and of `alignment` within the limit; 0 when not even one such step fits (the
/// renderer then refuses the argument).
pub fn window_bytes(max_binding_bytes: u64, alignment: u32) -> u64 {
    let align = u64::from(alignment.max(1));
    let gcd = |mut a: u64, mut b: u64| {
        while b != 0 {
            (a, b) = (b, a % b);
        }
        a
    };
    let step = align / gcd(align, 16) * 16;
    max_binding_bytes / step * step
}

/// How many bindings the renderer gives an argument of `numel` elements of `dtype` under a binding
/// limit of `max_binding_bytes` with windows aligned to `alignment` bytes: 1 when it fits one binding
/// (or cannot be split, which the renderer reports), else its number of windows.
pub fn binding_count(max_binding_bytes: u64, alignment: u32, dtype: DType, numel: usize) -> usize {
    let bytes = (numel as u64).saturating_mul(dtype.size_bytes() as u64).max(1).div_ceil(4).saturating_mul(4);
    if bytes <= max_binding_bytes {
        return 1;
    }
    match window_bytes(max_binding_bytes, alignment) {
        0 => 1,
        w => usize::try_from(bytes.div_ceil(w)).unwrap_or(usize::MAX),
    }
}

impl CostModel for WgslCostModel {
    fn name(&self) -> &str {
        "wgsl"
    }

    /// The default model's decisions but for the three below: binding counts, convolutions' im2col,
    /// and attention fusion on the FMA flash kernel at long key lengths.
    fn base(&self) -> Option<&dyn CostModel> {
        Some(&self.base)
    }

    /// One binding per window of a split argument (see the module docs).
    fn bindings(&self, caps: &Capabilities, dtype: DType, numel: usize) -> usize {
        binding_count(caps.max_binding_bytes, self.storage_offset_alignment, dtype, numel)
    }

    /// The default model's fusion, except a non-causal chain of at least
    /// [`UNFUSED_ATTENTION_MIN_KEYS`] queries and keys (measured so; decode is not) that the FMA
    /// flash kernel would run (no cooperative matrices for its dtype) and whose scores fit
    /// [`UNFUSED_ATTENTION_MAX_SCORE_BYTES`]: three kernels were 1.26-1.43x faster there (see the
    /// constant).
    fn fuse_attention(&self, attn: &AttentionShape, caps: &Capabilities) -> Result<String, String> {
        let scores = (attn.batch * attn.heads * attn.m) as u64 * attn.kv as u64 * 4;
        let fma =
            !(self.coop_attention.contains(&attn.dtype) && attn.m > crate::render::attention_coop::MIN_QUERY_ROWS);
        let long = attn.m.min(attn.kv) >= UNFUSED_ATTENTION_MIN_KEYS;
        if fma && long && !attn.causal && scores <= UNFUSED_ATTENTION_MAX_SCORE_BYTES {
            return Err(format!(
                "attention: three kernels, the {}x{} scores kept in memory ({scores} bytes): through WGSL the FMA \
                 flash kernel is slower than the unfused products from {UNFUSED_ATTENTION_MIN_KEYS} keys \
                 (1.26-1.43x at 512-2048, H200 over Vulkan)",
                attn.m, attn.kv
            ));
        }
        self.base.fuse_attention(attn, caps)
    }

    /// Keeps the im2col gather: the WGSL renderer draws no implicit im2col operands.
    fn conv_implicit(&self, conv: &ConvShape, caps: &Capabilities) -> Result<String, String> {
        let _ = (conv, caps);
        Err("implicit GEMM: the WGSL renderer reads no im2col view (gather kernel kept)".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::{RenderError, render};
    use sinter_core::kernel::Program;
    use sinter_core::schedule::AttentionShape;
    use sinter_core::schedule::{ScheduleOptions, schedule};
    use sinter_core::trace::Graph;
    use std::sync::Arc;

    /// One pointwise kernel reading an input of `numel` elements of `dt` (host caps: nothing split).
    fn copy_program(dt: DType, numel: usize) -> Program {
        let g = Graph::new();
        let x = g.input("x", dt, [numel]);
        g.output(&(-&x));
        let ir = sinter_core::passes::optimize(&g.build().expect("build")).expect("optimize");
        schedule(&ir, &Capabilities::host(), &ScheduleOptions::default()).expect("schedule")
    }

    fn split_caps(limit: u64, alignment: u32) -> WgslCaps {
        WgslCaps {
            max_binding_bytes: limit,
            storage_offset_alignment: alignment,
            max_storage_buffers: 4096,
            ..WgslCaps::baseline()
        }
    }

    #[test]
    fn counts_match_the_renderer() {
        let mut split = 0;
        for alignment in [32u32, 64, 256] {
            for limit in [200u64, 1000, 1024, 1536, 4096] {
                let caps = Capabilities { max_binding_bytes: limit, ..Capabilities::host() };
                for dt in [DType::F32, DType::F16, DType::BF16, DType::I8] {
                    for numel in [1usize, 7, 250, 256, 257, 600, 1000, 3001] {
                        let p = copy_program(dt, numel);
                        let k = &p.kernels[0];
                        let arg = k.args.iter().position(|a| a.numel == numel).expect("input argument");
                        let exact = WgslCostModel::for_caps(&split_caps(limit, alignment));
                        let want = exact.bindings(&caps, dt, numel);
                        let ctx = format!("{numel} x {dt}, limit {limit}, alignment {alignment}");
                        match render(k, &p, &split_caps(limit, alignment)) {
                            Ok(r) => {
                                let got = r.bindings.iter().filter(|b| b.arg == arg).count();
                                assert_eq!(got, want, "{ctx}");
                                split += usize::from(got > 1);
                                // The default (256-byte) alignment never counts fewer windows.
                                if limit >= 256 {
                                    assert!(WgslCostModel::default().bindings(&caps, dt, numel) >= got, "{ctx}");
                                }
                            }
                            // Not even one aligned step fits a binding: the renderer refuses the split
                            // argument, and the count stays 1 so the scheduler does not split around it.
                            Err(RenderError::Unsupported { what, .. }) => {
                                assert!(window_bytes(limit, alignment) == 0 && want == 1, "{ctx}: {what}");
                            }
                            Err(e) => panic!("{ctx}: {e}"),
                        }
                    }
                }
            }
        }
        assert!(split > 50, "only {split} split arguments");
    }

    #[test]
    fn window_sizes() {
        assert_eq!(window_bytes(1024, 256), 1024);
        assert_eq!(window_bytes(1000, 256), 768);
        assert_eq!(window_bytes(1000, 32), 992);
        assert_eq!(window_bytes(1000, 4), 992);
        assert_eq!(window_bytes(1000, 0), 992);
        assert_eq!(window_bytes(200, 256), 0);
        assert_eq!(window_bytes((2u64 << 30) - 4, 256), (2u64 << 30) - 256);
        // 600 f32 = 2400 bytes: 3 windows of 1024; 256 f32 = 1024 bytes fits one binding.
        assert_eq!(binding_count(1024, 256, DType::F32, 600), 3);
        assert_eq!(binding_count(1024, 256, DType::F32, 256), 1);
        assert_eq!(binding_count(1024, 256, DType::F32, 0), 1);
        // 2^32 - 1 bytes under a limit of 2^32 - 1: rounded up to a whole word (2^32 bytes), it is split.
        assert_eq!(binding_count(u32::MAX as u64, 256, DType::U8, u32::MAX as usize), 2);
        assert_eq!(binding_count(u64::MAX, 256, DType::F64, usize::MAX), 1);
    }

    #[test]
    fn other_decisions_are_the_default_models() {
        let (m, d) = (WgslCostModel::default(), DefaultCostModel::default());
        let caps = Capabilities::host();
        assert_eq!(m.name(), "wgsl");
        for (users, cost, reads) in [(1, 100, 9), (2, 24, 1), (2, 23, 1), (9, 4, 1), (9, 3, 1), (2, 3, 5), (2, 3, 4)] {
            assert_eq!(m.materialize(users, cost, reads), d.materialize(users, cost, reads));
        }
        for (rows, len) in [(1, 1 << 20), (8192, 32), (64, 1000), (4, 1 << 16)] {
            assert_eq!(m.reduce_strategy(rows, len, &caps), d.reduce_strategy(rows, len, &caps));
            assert_eq!(m.reduce_split(rows, len, &caps), d.reduce_split(rows, len, &caps));
        }
        assert_eq!(m.fuse_horizontal(0), d.fuse_horizontal(0));
        assert_eq!(m.fuse_horizontal(64), d.fuse_horizontal(64));
        for oc in [4, 64] {
            let conv = ConvShape {
                batch: 2,
                in_channels: 16,
                out_channels: oc,
                groups: 1,
                kernel: [3, 3],
                out_hw: [8, 8],
                im2col_bytes: 2 * 16 * 9 * 64 * 4,
                dtype: DType::F32,
                tf32: true,
            };
            assert_eq!(m.conv_as_matmul(&conv, &caps), d.conv_as_matmul(&conv, &caps));
            assert!(m.conv_implicit(&conv, &caps).unwrap_err().contains("WGSL renderer reads no im2col"));
        }
        // Short key lengths and causal chains fuse as the default model fuses them.
        for (kv, causal) in [(197, false), (300, true)] {
            let attn = AttentionShape { batch: 2, heads: 4, m: 7, kv, d: 64, dv: 64, dtype: DType::BF16, causal };
            assert!(m.fuse_attention(&attn, &caps).is_ok());
            assert_eq!(m.fuse_attention(&attn, &caps), d.fuse_attention(&attn, &caps));
        }
    }

    /// Non-causal attention on the FMA flash kernel stays three kernels from 256 queries and keys, unless its
    /// scores would take more than 2 GiB or it runs on cooperative matrices.
    #[test]
    fn long_attention_on_the_fma_kernel_stays_unfused() {
        let caps = Capabilities::host();
        let m = WgslCostModel::default();
        let attn = |m_: usize, kv: usize, dtype: DType, causal: bool| AttentionShape {
            batch: 8,
            heads: 16,
            m: m_,
            kv,
            d: 64,
            dv: 64,
            dtype,
            causal,
        };
        let why = m.fuse_attention(&attn(1024, 1024, DType::F32, false), &caps).unwrap_err();
        assert!(why.contains("three kernels") && why.contains("1024x1024"), "{why}");
        assert!(m.fuse_attention(&attn(256, 256, DType::F32, false), &caps).is_err());
        assert!(m.fuse_attention(&attn(255, 255, DType::F32, false), &caps).is_ok());
        assert!(m.fuse_attention(&attn(1024, 1024, DType::F32, true), &caps).is_ok(), "causal fuses");
        // 8 x 16 x 2048 x 4096 f32 scores are 4 GiB: fused, the memory stays bounded.
        assert!(m.fuse_attention(&attn(2048, 4096, DType::F32, false), &caps).is_ok());
        // An adapter with f16 cooperative matrices (and a fixed subgroup size: what the kernel
        // needs, `attention_coop::adapter_runs`) runs f16 attention on them: fused.
        let coop = WgslCostModel::for_caps(&WgslCaps {
            has_coop_matrix: true,
            has_f16: true,
            has_subgroups: true,
            fixed_subgroup_size: Some(32),
            ..WgslCaps::baseline()
        });
        assert_eq!(coop.coop_attention, vec![DType::F16]);
        assert!(coop.fuse_attention(&attn(1024, 1024, DType::F16, false), &caps).is_ok());
        assert!(coop.fuse_attention(&attn(1024, 1024, DType::F32, false), &caps).is_err());
        // Without a fixed subgroup size the kernel cannot run on them: the FMA rule applies.
        let unfixed = WgslCostModel::for_caps(&WgslCaps {
            has_coop_matrix: true,
            has_f16: true,
            has_subgroups: true,
            fixed_subgroup_size: None,
            ..WgslCaps::baseline()
        });
        assert!(unfixed.fuse_attention(&attn(1024, 1024, DType::F16, false), &caps).is_err());
        // Decode (one query row against many keys) was not measured unfused: it fuses.
        assert!(m.fuse_attention(&attn(1, 4096, DType::F32, false), &caps).is_ok());
    }

    #[test]
    fn scheduled_kernels_fit_the_renderers_binding_limit() {
        // 8 inputs of 600 f32 (3 windows each at a 1 KiB limit) summed: one kernel would bind 27 windows;
        // the scheduler splits it so that every kernel renders within 12 bindings.
        let g = Graph::new();
        let xs: Vec<_> = (0..8).map(|i| g.input(&format!("x{i}"), DType::F32, [600])).collect();
        let mut acc = xs[0].clone();
        for x in &xs[1..] {
            acc = (&acc + x).relu();
        }
        g.output(&acc);
        let ir = sinter_core::passes::optimize(&g.build().expect("build")).expect("optimize");
        let caps = Capabilities { max_bindings: 12, max_binding_bytes: 1024, ..Capabilities::host() };
        let wcaps = WgslCaps { max_storage_buffers: 12, ..split_caps(1024, 256) };
        let opts = ScheduleOptions { cost_model: Arc::new(WgslCostModel::for_caps(&wcaps)), ..Default::default() };
        let p = schedule(&ir, &caps, &opts).expect("schedule");
        assert!(p.kernels.len() > 1);
        for k in &p.kernels {
            let r = render(k, &p, &wcaps).unwrap_or_else(|e| panic!("{e}"));
            assert!(r.bindings.len() <= 12, "{}: {} bindings", k.name, r.bindings.len());
        }
        // The default cost model counts one binding per argument: one kernel the renderer refuses.
        let p = schedule(&ir, &caps, &ScheduleOptions::default()).expect("schedule");
        assert_eq!(p.kernels.len(), 1);
        assert!(matches!(render(&p.kernels[0], &p, &wcaps), Err(RenderError::Unsupported { .. })));
    }
}
