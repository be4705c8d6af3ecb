//! The built-in benchmark workloads, one definition each, named and shaped as in the PyTorch
//! anchor script (`bench/torch_anchor.py`). Each builds its graph at two scales: [`Scale::Full`]
//! (the benchmark) and [`Scale::Reduced`] (small, deliberately odd sizes for tests and the CPU
//! demo). Each also makes its random inputs, states its FLOPs and minimum bytes moved, and has an
//! independent reference written in plain f64 loops (no IR, no interpreter) that rounds to the
//! storage dtype where PyTorch stores a tensor, so the CPU interpreter can be checked against it.
//!
//! ```
//! use sinter_core::workloads::{self, Scale};
//! let w = workloads::get("softmax_8192x8192_f32").unwrap();
//! let g = w.build(Scale::Reduced).unwrap();
//! assert_eq!(g.inputs.len(), 1);
//! assert_eq!(w.min_bytes(Scale::Full), 2.0 * 8192.0 * 8192.0 * 4.0);
//! ```

use crate::dtype::DType;
use crate::error::Error;
use crate::ir::{Graph as IrGraph, Op};
use crate::tensor::{HostTensor, SplitMix64, round_to};
use crate::trace::{Graph, Tensor};
use std::collections::HashMap;

mod reference;
mod resnet;
mod scaled_mm;

use reference::*;
use resnet::*;
use scaled_mm::*;

/// Which size to build a workload at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scale {
    /// The benchmark size (as in `torch_anchor.py`).
    Full,
    /// A small size with odd extents, for tests and the CPU demo.
    Reduced,
}

impl Scale {
    /// `full` or `reduced`.
    pub fn name(self) -> &'static str {
        match self {
            Scale::Full => "full",
            Scale::Reduced => "reduced",
        }
    }

    /// Parses [`Scale::name`]'s output.
    pub fn parse(s: &str) -> Option<Scale> {
        match s {
            "full" => Some(Scale::Full),
            "reduced" => Some(Scale::Reduced),
            _ => None,
        }
    }
}

/// Which computation a workload is (sizes come from the scale).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    AddReluMul,
    Cos,
    CosCos,
    MatmulSoftmax {
        dtype: DType,
        full: usize,
    },
    Softmax,
    LayerNormGelu,
    Mlp,
    Matmul {
        dtype: DType,
        full: usize,
    },
    Chain,
    /// `softmax(q k^T / sqrt(d) [causal mask]) v`; `decode`: one query against the cache.
    Attention {
        causal: bool,
        decode: bool,
    },
    ResNet18,
    Sum,
    /// `torch._scaled_mm(a, b, scale_a, scale_b, out_dtype=bf16)` on fp8 e4m3 operands, `b`
    /// column-major (stored `[n, k]`); `full` is M = N = K.
    ScaledMm {
        full: usize,
    },
}

/// A built-in workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Workload {
    /// The name, as in `torch_anchor.py`.
    pub name: &'static str,
    /// What it computes, in PyTorch terms.
    pub description: &'static str,
    kind: Kind,
}

/// Every workload, in the anchor script's order.
pub fn all() -> Vec<Workload> {
    let w = |name, description, kind| Workload { name, description, kind };
    vec![
        w("add_relu_mul_10M_f32", "torch.relu(x + b) * 2.0", Kind::AddReluMul),
        w("cos_16M_f32", "x.cos()", Kind::Cos),
        w("cos_cos_16M_f32", "x.cos().cos()", Kind::CosCos),
        w("matmul_softmax_100_f32", "F.softmax(x @ y, dim=1)", Kind::MatmulSoftmax { dtype: DType::F32, full: 100 }),
        w(
            "matmul_softmax_4096_bf16",
            "F.softmax(x @ y, dim=1)",
            Kind::MatmulSoftmax { dtype: DType::BF16, full: 4096 },
        ),
        w("softmax_8192x8192_f32", "F.softmax(x, dim=-1)", Kind::Softmax),
        w("layernorm_gelu_8192x4096_f32", "F.gelu(F.layer_norm(x, (C,), w, b))", Kind::LayerNormGelu),
        w("mlp_8192x4096x16384_bf16", "F.linear(F.gelu(F.linear(x, w1, b1)), w2, b2)", Kind::Mlp),
        w("matmul_8192_bf16", "a @ b", Kind::Matmul { dtype: DType::BF16, full: 8192 }),
        w("matmul_4096_f32", "a @ b", Kind::Matmul { dtype: DType::F32, full: 4096 }),
        w(
            "pointwise_chain64_1024_f32",
            "64 steps: i odd -> sin(x) * 1.0001 + 0.001, i even -> relu(x) - 0.5",
            Kind::Chain,
        ),
        w(
            "attention_b8h16s1024d64_bf16",
            "softmax((q @ k.transpose(-1, -2)) * (1 / sqrt(64)), dim=-1) @ v",
            Kind::Attention { causal: false, decode: false },
        ),
        w(
            "attention_causal_b8h16s2048d128_bf16",
            "softmax((q @ k.transpose(-1, -2) / sqrt(128)).masked_fill(ones(S, S).triu(1), -inf), dim=-1) @ v",
            Kind::Attention { causal: true, decode: false },
        ),
        w(
            "attention_decode_b32h32kv4096d128_bf16",
            "softmax((q @ k.transpose(-1, -2)) / sqrt(128), dim=-1) @ v, q [32, 32, 1, 128], k/v [32, 32, 4096, 128]",
            Kind::Attention { causal: false, decode: true },
        ),
        w(
            "matmul_8192_fp8e4m3",
            "torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16), a and b float8_e4m3fn, \
             b column-major",
            Kind::ScaledMm { full: 8192 },
        ),
        w("resnet18_b32_f32", "torchvision resnet18 (eval) on [32, 3, 224, 224]", Kind::ResNet18),
        // Not in torch_anchor.py: a whole-tensor reduction (one row), the split-reduction case.
        w("sum_64M_f32", "x.sum()", Kind::Sum),
    ]
}

/// The workload with this name.
pub fn get(name: &str) -> Option<Workload> {
    all().into_iter().find(|w| w.name == name)
}

/// The names of every workload.
pub fn names() -> Vec<&'static str> {
    all().iter().map(|w| w.name).collect()
}

/// How an input's values are drawn.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Dist {
    /// Normal with mean 0 and this standard deviation (`torch.randn * std`).
    Normal(f64),
    /// Uniform in `[lo, hi)`.
    Uniform(f64, f64),
}

/// One graph input: name, dtype, shape and distribution.
#[derive(Clone, Debug)]
struct InputSpec {
    name: String,
    dtype: DType,
    shape: Vec<usize>,
    dist: Dist,
}

fn spec(name: &str, dtype: DType, shape: &[usize], dist: Dist) -> InputSpec {
    InputSpec { name: name.to_string(), dtype, shape: shape.to_vec(), dist }
}

/// Normal samples (Box-Muller over SplitMix64), rounded to `dtype`.
fn randn(dtype: DType, shape: Vec<usize>, seed: u64, std: f64) -> HostTensor {
    let n: usize = shape.iter().product();
    let mut rng = SplitMix64::new(seed);
    let mut v = Vec::with_capacity(n + 1);
    while v.len() < n {
        let u1 = 1.0 - rng.next_f64(); // (0, 1]
        let u2 = rng.next_f64();
        let r = (-2.0 * u1.ln()).sqrt() * std;
        let t = std::f64::consts::TAU * u2;
        v.push(r * t.cos());
        v.push(r * t.sin());
    }
    v.truncate(n);
    HostTensor::from_f64(dtype, shape, &v)
}

/// torchvision's ResNet-18 stage widths and first-block strides.
const RESNET_STAGES: [(usize, usize); 4] = [(64, 1), (128, 2), (256, 2), (512, 2)];

impl Workload {
    /// Main sizes at a scale (meaning depends on the kind).
    fn dims(&self, scale: Scale) -> Vec<usize> {
        let full = scale == Scale::Full;
        match self.kind {
            Kind::AddReluMul => vec![if full { 10_000_000 } else { 4099 }],
            Kind::Cos | Kind::CosCos => vec![if full { 1 << 24 } else { 4097 }],
            // 3 * 7 * 4096 at the reduced size: long enough to split, not a power of two.
            Kind::Sum => vec![if full { 1 << 26 } else { 86_016 }],
            // [M, K, N]
            Kind::MatmulSoftmax { full: n, dtype } => match (full, dtype) {
                (true, _) => vec![n, n, n],
                (false, DType::F32) => vec![37, 29, 41],
                (false, _) => vec![67, 33, 45],
            },
            // K and N multiples of 16 (cuBLASLt's fp8 alignment), M odd.
            Kind::ScaledMm { full: n } => {
                if full {
                    vec![n, n, n]
                } else {
                    vec![67, 48, 80]
                }
            }
            Kind::Matmul { full: n, dtype } => match (full, dtype) {
                (true, _) => vec![n, n, n],
                (false, DType::F32) => vec![67, 33, 45],
                (false, _) => vec![71, 39, 53],
            },
            // [R, C]
            Kind::Softmax => {
                if full {
                    vec![8192, 8192]
                } else {
                    vec![67, 129]
                }
            }
            Kind::LayerNormGelu => {
                if full {
                    vec![8192, 4096]
                } else {
                    vec![61, 257]
                }
            }
            // [T, D, H]
            Kind::Mlp => {
                if full {
                    vec![8192, 4096, 16384]
                } else {
                    vec![37, 33, 67]
                }
            }
            Kind::Chain => vec![if full { 1024 } else { 1023 }],
            // [B, H, queries, keys, D]
            Kind::Attention { causal, decode } => match (full, causal, decode) {
                (true, _, true) => vec![32, 32, 1, 4096, 128],
                (true, true, _) => vec![8, 16, 2048, 2048, 128],
                (true, false, false) => vec![8, 16, 1024, 1024, 64],
                (false, _, true) => vec![2, 3, 1, 65, 16],
                (false, true, _) => vec![1, 2, 37, 37, 16],
                (false, false, false) => vec![1, 2, 33, 33, 8],
            },
            // [batch, image extent]
            Kind::ResNet18 => {
                if full {
                    vec![32, 224]
                } else {
                    vec![1, 32]
                }
            }
        }
    }

    /// The storage dtype of the workload's tensors.
    pub fn dtype(&self) -> DType {
        match self.kind {
            Kind::MatmulSoftmax { dtype, .. } | Kind::Matmul { dtype, .. } => dtype,
            Kind::Mlp | Kind::Attention { .. } | Kind::ScaledMm { .. } => DType::BF16,
            _ => DType::F32,
        }
    }

    fn input_specs(&self, scale: Scale) -> Vec<InputSpec> {
        let d = self.dims(scale);
        let dt = self.dtype();
        let n1 = Dist::Normal(1.0);
        match self.kind {
            Kind::AddReluMul => vec![spec("x", dt, &d, n1), spec("b", dt, &d, n1)],
            Kind::Cos | Kind::CosCos | Kind::Chain => vec![spec("x", dt, &d, n1)],
            // Positive values: the sum is well conditioned, so f32 accumulation stays within rtol.
            Kind::Sum => vec![spec("x", dt, &d, Dist::Uniform(0.0, 1.0))],
            Kind::MatmulSoftmax { .. } => vec![spec("x", dt, &[d[0], d[1]], n1), spec("y", dt, &[d[1], d[2]], n1)],
            Kind::Matmul { .. } => vec![spec("a", dt, &[d[0], d[1]], n1), spec("b", dt, &[d[1], d[2]], n1)],
            Kind::Softmax => vec![spec("x", dt, &d, n1)],
            Kind::LayerNormGelu => {
                vec![spec("x", dt, &d, n1), spec("w", dt, &[d[1]], n1), spec("b", dt, &[d[1]], n1)]
            }
            Kind::Mlp => {
                let (t, dm, h) = (d[0], d[1], d[2]);
                vec![
                    spec("x", dt, &[t, dm], n1),
                    spec("w1", dt, &[h, dm], Dist::Normal(0.02)),
                    spec("b1", dt, &[h], n1),
                    spec("w2", dt, &[dm, h], Dist::Normal(0.02)),
                    spec("b2", dt, &[dm], n1),
                ]
            }
            Kind::Attention { .. } => {
                let (q, kv) = (vec![d[0], d[1], d[2], d[4]], vec![d[0], d[1], d[3], d[4]]);
                vec![spec("q", dt, &q, n1), spec("k", dt, &kv, n1), spec("v", dt, &kv, n1)]
            }
            Kind::ResNet18 => resnet_specs(d[0], d[1]),
            Kind::ScaledMm { .. } => scaled_mm_specs(&d, scale),
        }
    }

    /// The captured graph at a scale.
    pub fn build(&self, scale: Scale) -> Result<IrGraph, Error> {
        let g = Graph::new();
        let specs = self.input_specs(scale);
        let ins: Vec<Tensor> = specs.iter().map(|s| g.input(&s.name, s.dtype, s.shape.clone())).collect();
        let d = self.dims(scale);
        let y = match self.kind {
            Kind::AddReluMul => (&ins[0] + &ins[1]).relu() * 2.0,
            Kind::Cos => ins[0].cos(),
            Kind::CosCos => ins[0].cos().cos(),
            Kind::Sum => ins[0].sum(&[0], false),
            Kind::MatmulSoftmax { .. } => ins[0].matmul(&ins[1]).softmax(1),
            Kind::Softmax => ins[0].softmax(-1),
            Kind::LayerNormGelu => ins[0].layer_norm(&ins[1], &ins[2], 1e-5).gelu(),
            Kind::Mlp => {
                let h = ins[0].matmul(&ins[1].transpose(0, 1)) + &ins[2];
                h.gelu().matmul(&ins[3].transpose(0, 1)) + &ins[4]
            }
            Kind::Matmul { .. } => ins[0].matmul(&ins[1]),
            Kind::ScaledMm { .. } => scaled_mm_graph(&ins),
            Kind::Chain => {
                let mut x = ins[0].clone();
                for i in 0..64 {
                    x = if i % 2 == 1 { x.sin() * 1.0001 + 0.001 } else { x.relu() - 0.5 };
                }
                x
            }
            Kind::Attention { causal, .. } => {
                let mut s = ins[0].matmul(&ins[1].transpose(-1, -2)) * (1.0 / (d[4] as f64).sqrt());
                if causal {
                    // masked_fill(ones(S, S).triu(1), -inf), as the anchor script writes it.
                    let (q, k) = (d[2], d[3]);
                    let upper: Vec<i64> = (0..q * k).map(|p| (p % k > p / k) as i64).collect();
                    let mask = g.constant(HostTensor::from_i64(DType::Bool, vec![q, k], &upper));
                    s = mask.where_(&g.scalar(s.dtype(), f64::NEG_INFINITY), &s);
                }
                s.softmax(-1).matmul(&ins[2])
            }
            Kind::ResNet18 => {
                let by_name: HashMap<&str, &Tensor> = specs.iter().map(|s| s.name.as_str()).zip(&ins).collect();
                resnet_graph(&by_name)?
            }
        };
        g.output(&y);
        g.build()
    }

    /// Random inputs for a scale, drawn as `torch_anchor.py` draws them (`randn`, weights of the MLP
    /// scaled by 0.02; ResNet weights as torchvision initializes them, with random batch-norm
    /// statistics so the normalization does some work).
    pub fn inputs(&self, scale: Scale, seed: u64) -> Vec<HostTensor> {
        self.input_specs(scale)
            .into_iter()
            .enumerate()
            .map(|(i, s)| {
                let seed = seed.wrapping_mul(0x1000_0000_01B3).wrapping_add(i as u64 * 0x9E37);
                match s.dist {
                    Dist::Normal(std) => randn(s.dtype, s.shape, seed, std),
                    Dist::Uniform(lo, hi) => HostTensor::random(s.dtype, s.shape, seed, lo, hi),
                }
            })
            .collect()
    }

    /// Floating-point operations at a scale, as `torch_anchor.py` counts them (0 where it reports
    /// none, the memory-bound workloads): `2*M*N*K` per matmul, ResNet-18 as `batch * 2 * 1.82e9` at
    /// full size and by counting its convolutions and the classifier otherwise.
    pub fn flops(&self, scale: Scale) -> f64 {
        let d: Vec<f64> = self.dims(scale).iter().map(|&x| x as f64).collect();
        match self.kind {
            Kind::MatmulSoftmax { .. } | Kind::Matmul { .. } | Kind::ScaledMm { .. } => 2.0 * d[0] * d[1] * d[2],
            Kind::Mlp => 2.0 * 2.0 * d[0] * d[1] * d[2],
            Kind::Attention { causal, .. } => 4.0 * d[0] * d[1] * d[2] * d[3] * d[4] / if causal { 2.0 } else { 1.0 },
            Kind::ResNet18 if scale == Scale::Full => d[0] * 2.0 * 1.82e9,
            Kind::ResNet18 => self.build(scale).map(|g| graph_flops(&g)).unwrap_or(0.0),
            _ => 0.0,
        }
    }

    /// The fewest bytes any implementation must move: `torch_anchor.py`'s formula where it has one
    /// (e.g. `3*N*4` for add_relu_mul, read x and write y for the row-wise ones), else every input
    /// read once plus every output written once.
    pub fn min_bytes(&self, scale: Scale) -> f64 {
        let d: Vec<f64> = self.dims(scale).iter().map(|&x| x as f64).collect();
        let e = self.dtype().size_bytes() as f64;
        match self.kind {
            Kind::AddReluMul => 3.0 * d[0] * e,
            Kind::Cos | Kind::CosCos | Kind::Chain => 2.0 * d[0] * e,
            Kind::MatmulSoftmax { .. } => (d[0] * d[1] + d[1] * d[2] + d[0] * d[2]) * e,
            Kind::Softmax | Kind::LayerNormGelu => 2.0 * d[0] * d[1] * e,
            // The anchor counts reading K and V (the query and output are 1/4096 of it).
            Kind::Attention { decode: true, .. } => 2.0 * d[0] * d[1] * d[3] * d[4] * e,
            _ => {
                let ins: f64 = self
                    .input_specs(scale)
                    .iter()
                    .map(|s| (s.shape.iter().product::<usize>() * s.dtype.size_bytes()) as f64)
                    .sum();
                let out = self.output_shape(scale).iter().product::<usize>() as f64 * e;
                ins + out
            }
        }
    }

    /// The shape of the (single) output.
    pub fn output_shape(&self, scale: Scale) -> Vec<usize> {
        let d = self.dims(scale);
        match self.kind {
            Kind::AddReluMul | Kind::Cos | Kind::CosCos | Kind::Chain => d,
            Kind::MatmulSoftmax { .. } | Kind::Matmul { .. } | Kind::ScaledMm { .. } => vec![d[0], d[2]],
            Kind::Softmax | Kind::LayerNormGelu => d,
            Kind::Attention { .. } => vec![d[0], d[1], d[2], d[4]],
            Kind::Mlp => vec![d[0], d[1]],
            Kind::ResNet18 => vec![d[0], 1000],
            Kind::Sum => vec![],
        }
    }

    /// `(rtol, atol)` for comparing a result with [`Workload::reference`], by dtype: the
    /// reference rounds where PyTorch stores, so what is left is accumulation-order noise.
    ///
    /// Attention is the exception: the reference rounds the scores to bf16 where eager PyTorch
    /// stores them, and a fused kernel keeps them in f32 (as flash SDPA and torch.compile's
    /// attention do), normalising once per row; outputs then differ by one or two bf16 ulps
    /// (measured: 0.0098 at values up to 1.1, the reduced size), twice the plain bf16 bound.
    pub fn tolerance(&self) -> (f64, f64) {
        let (r, a) = tolerance(self.dtype());
        match self.kind {
            Kind::Attention { .. } => (2.0 * r, 5.0 * a),
            _ => (r, a),
        }
    }

    /// The expected outputs for `inputs`, computed independently: plain loops in f64, rounded to the
    /// storage dtype wherever PyTorch materializes a tensor. Fails when `inputs` do not match the
    /// workload's input types.
    pub fn reference(&self, scale: Scale, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, Error> {
        let specs = self.input_specs(scale);
        if inputs.len() != specs.len() {
            return Err(Error::Input(format!("{} takes {} inputs, got {}", self.name, specs.len(), inputs.len())));
        }
        for (s, t) in specs.iter().zip(inputs) {
            if t.dtype() != s.dtype || t.shape != s.shape {
                return Err(Error::Input(format!(
                    "{} input {:?} must be {}{:?}, got {}{:?}",
                    self.name,
                    s.name,
                    s.dtype,
                    s.shape,
                    t.dtype(),
                    t.shape
                )));
            }
        }
        let v: Vec<Vec<f64>> = inputs.iter().map(|t| t.to_f64_vec()).collect();
        let d = self.dims(scale);
        let dt = self.dtype();
        let rd = |x: Vec<f64>| -> Vec<f64> { x.into_iter().map(|a| round_to(dt, a)).collect() };
        let map2 = |a: &[f64], b: &[f64], f: &dyn Fn(f64, f64) -> f64| -> Vec<f64> {
            a.iter().zip(b).map(|(&x, &y)| f(x, y)).collect()
        };
        let map = |a: &[f64], f: &dyn Fn(f64) -> f64| -> Vec<f64> { a.iter().map(|&x| f(x)).collect() };
        let out = match self.kind {
            Kind::AddReluMul => {
                let s = rd(map2(&v[0], &v[1], &|x, y| x + y));
                let r = map(&s, &|x| x.max(0.0));
                rd(map(&r, &|x| x * 2.0))
            }
            Kind::Cos => rd(map(&v[0], &f64::cos)),
            Kind::Sum => rd(vec![v[0].iter().sum()]),
            Kind::CosCos => {
                let c = rd(map(&v[0], &f64::cos));
                rd(map(&c, &f64::cos))
            }
            Kind::MatmulSoftmax { .. } => {
                let p = rd(ref_matmul(&v[0], &v[1], 1, d[0], d[1], d[2], false));
                rd(ref_softmax_rows(&p, d[2]))
            }
            Kind::Matmul { .. } => rd(ref_matmul(&v[0], &v[1], 1, d[0], d[1], d[2], false)),
            Kind::ScaledMm { .. } => rd(ref_scaled_mm(&v, &d)),
            Kind::Softmax => rd(ref_softmax_rows(&v[0], d[1])),
            Kind::LayerNormGelu => {
                let c = d[1];
                let mut y = Vec::with_capacity(v[0].len());
                for row in v[0].chunks(c) {
                    let mean = row.iter().sum::<f64>() / c as f64;
                    let var = row.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / c as f64;
                    for (j, &x) in row.iter().enumerate() {
                        y.push((x - mean) / (var + 1e-5).sqrt() * v[1][j] + v[2][j]);
                    }
                }
                let y = rd(y);
                rd(map(&y, &gelu_erf))
            }
            Kind::Mlp => {
                let (t, dm, h) = (d[0], d[1], d[2]);
                // F.linear(x, w, b) = x @ w^T + b, one rounding (addmm).
                let mut a = ref_matmul(&v[0], &v[1], 1, t, dm, h, true);
                a.iter_mut().enumerate().for_each(|(i, x)| *x += v[2][i % h]);
                let a = rd(map(&rd(a), &gelu_erf));
                let mut y = ref_matmul(&a, &v[3], 1, t, h, dm, true);
                y.iter_mut().enumerate().for_each(|(i, x)| *x += v[4][i % dm]);
                rd(y)
            }
            Kind::Chain => {
                let mut x = v[0].clone();
                for i in 0..64 {
                    x = if i % 2 == 1 {
                        let s = rd(map(&x, &f64::sin));
                        let m = rd(map(&s, &|a| a * round_to(dt, 1.0001)));
                        rd(map(&m, &|a| a + round_to(dt, 0.001)))
                    } else {
                        let r = map(&x, &|a| a.max(0.0));
                        rd(map(&r, &|a| a - 0.5))
                    };
                }
                x
            }
            Kind::Attention { causal, .. } => {
                let (b, h, sq, sk, dh) = (d[0], d[1], d[2], d[3], d[4]);
                let scores = rd(ref_matmul(&v[0], &v[1], b * h, sq, dh, sk, true));
                let scale = round_to(dt, 1.0 / (dh as f64).sqrt());
                let mut scaled = rd(map(&scores, &|x| x * scale));
                if causal {
                    for (p, x) in scaled.iter_mut().enumerate() {
                        if p % sk > (p / sk) % sq {
                            *x = f64::NEG_INFINITY;
                        }
                    }
                }
                let p = rd(ref_softmax_rows(&scaled, sk));
                rd(ref_matmul(&p, &v[2], b * h, sq, sk, dh, false))
            }
            Kind::ResNet18 => {
                let by_name: HashMap<&str, &[f64]> =
                    specs.iter().map(|s| s.name.as_str()).zip(v.iter().map(|x| x.as_slice())).collect();
                ref_resnet(&by_name, d[0], d[1])?
            }
        };
        Ok(vec![HostTensor::from_f64(dt, self.output_shape(scale), &out)])
    }
}

/// The outcome of [`Workload::check_cpu`].
#[derive(Clone, Debug, PartialEq)]
pub struct CpuCheck {
    /// Nodes in the captured graph.
    pub nodes_captured: usize,
    /// Nodes after `decompose`.
    pub nodes_decomposed: usize,
    /// Nodes after the whole pipeline.
    pub nodes_optimized: usize,
    /// Worst [`HostTensor::tolerance_ratio`] of the captured graph's CPU result against
    /// [`Workload::reference`], with [`Workload::tolerance`].
    pub ratio_captured: f64,
    /// The same for the graph after the whole pipeline.
    pub ratio_optimized: f64,
}

impl CpuCheck {
    /// True when both results are within tolerance (ratios at most 1; NaN fails).
    pub fn passed(&self) -> bool {
        self.ratio_captured <= 1.0 && self.ratio_optimized <= 1.0
    }
}

/// The largest tolerance ratio by the shared comparison ([`crate::compare::compare_outputs`]:
/// infinities exact, integers exact, no outputs or a count mismatch is `+inf`).
fn worst_ratio(got: &[HostTensor], want: &[HostTensor], (rtol, atol): (f64, f64)) -> f64 {
    crate::compare::compare_outputs(got, want, |_| (rtol, atol)).max_ratio
}

impl Workload {
    /// Builds the workload, runs the pass pipeline, evaluates the captured and the optimized graphs
    /// with the CPU interpreter on [`Workload::inputs`] and compares both with
    /// [`Workload::reference`].
    pub fn check_cpu(&self, scale: Scale, seed: u64) -> Result<CpuCheck, Error> {
        let g = self.build(scale)?;
        let steps = crate::passes::run_pipeline(&g)?;
        let decomposed =
            steps.iter().find(|s| s.0 == crate::passes::DECOMPOSE).map_or(g.nodes.len(), |s| s.1.nodes.len());
        let optimized = steps.last().map_or(&g, |s| &s.1);
        let inputs = self.inputs(scale, seed);
        let want = self.reference(scale, &inputs)?;
        let tol = self.tolerance();
        let ratio_captured = worst_ratio(&crate::cpu::run(&g, &inputs)?, &want, tol);
        let ratio_optimized = worst_ratio(&crate::cpu::run(optimized, &inputs)?, &want, tol);
        Ok(CpuCheck {
            nodes_captured: g.nodes.len(),
            nodes_decomposed: decomposed,
            nodes_optimized: optimized.nodes.len(),
            ratio_captured,
            ratio_optimized,
        })
    }
}

/// `(rtol, atol)` for comparing a computed `dtype` result with an f64 reference rounded to
/// `dtype`: a few units in the last place of the storage type, relative and absolute.
pub fn tolerance(dtype: DType) -> (f64, f64) {
    let r = dtype.rel_tolerance();
    (r, r * 0.1)
}

/// FLOPs of the matmuls and convolutions of a graph (2 per multiply-add); 0 for symbolic shapes.
pub fn graph_flops(g: &IrGraph) -> f64 {
    let mut f = 0.0;
    for n in &g.nodes {
        let out = n.ty.shape.numel().unwrap_or(0) as f64;
        match &n.op {
            Op::MatMul => {
                let a = &g.ty(n.inputs[0]).shape;
                let k = a.0.last().and_then(|d| d.as_static()).unwrap_or(0) as f64;
                f += 2.0 * out * k;
            }
            Op::Conv2d { window, groups } => {
                let cin = g.ty(n.inputs[0]).shape.0.get(1).and_then(|d| d.as_static()).unwrap_or(0) as f64;
                let taps = (window.kernel[0] * window.kernel[1]) as f64;
                f += 2.0 * out * taps * cin / *groups as f64;
            }
            _ => {}
        }
    }
    f
}

#[cfg(test)]
mod tests;
