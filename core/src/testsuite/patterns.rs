//! Fused patterns (softmax, log-softmax, layer norm, GELU, SiLU, pointwise chains, reduction
//! epilogues, matmul and convolution epilogues, attention), matmuls (M/N/K in {1, 7, 127},
//! batched, broadcast, transposed operands, vectors), convolutions and pooling, and one
//! representative graph per dtype (f16, bf16, f64, i32, i64, u8, bool).

use super::cases::{SHAPES_2D, SIZES, case, each, fused};
use super::{Builder, Case, Dist, Instance, Tol};
use crate::dtype::DType;
use crate::trace::Tensor;

const NAN: f64 = f64::NAN;
const INF: f64 = f64::INFINITY;
const F: DType = DType::F32;

/// Row shapes of the normalization patterns: rows of 1 to 4097 elements and 4097 short rows.
/// Rows x length of the norm and softmax cases. `(4500, 49)`: short rows stored whole, many of
/// them (a workgroup per row, or on CUDA one warp per row with 8 rows per block and a last block
/// partly past the end). `(400, 1023)` and `(1568, 384)`: rows a warp's registers hold, a row for
/// every SM (on CUDA one warp per row, 1 and 4 rows per block: ConvNeXt's LayerNorms).
const NORM_ROWS: [(usize, usize); 8] =
    [(1, 1), (7, 7), (3, 1023), (2, 4097), (4097, 5), (4500, 49), (400, 1023), (1568, 384)];

/// M, N, K values of the matmul cases.
const MNK: [usize; 3] = [1, 7, 127];

/// The pattern, matmul, convolution and dtype cases, in list order.
pub(crate) fn cases() -> Vec<Case> {
    vec![
        case("matmul_sizes", matmul_sizes),
        case("matmul_batched", matmul_batched),
        case("matmul_broadcast", matmul_broadcast),
        case("matmul_transposed", matmul_transposed),
        case("matmul_vector", matmul_vector),
        case("conv2d_small", conv2d_small),
        case("conv2d_strided_grouped", conv2d_strided_grouped),
        case("conv2d_depthwise", conv2d_depthwise),
        case("conv2d_pointwise", conv2d_pointwise),
        case("pool2d", pool2d),
        case("dtype_f16", || dtype_half(DType::F16)),
        case("dtype_bf16", || dtype_half(DType::BF16)),
        case("dtype_f64", dtype_f64),
        case("dtype_i32", dtype_i32),
        case("dtype_i64", dtype_i64),
        case("dtype_u8", dtype_u8),
        case("dtype_bool", dtype_bool),
        case("dtype_f16_matmul", || dtype_matmul(DType::F16)),
        case("dtype_bf16_matmul", || dtype_matmul(DType::BF16)),
        case("matmul_bf16_shapes", || matmul_lowp_shapes(DType::BF16)),
        case("matmul_f16_shapes", || matmul_lowp_shapes(DType::F16)),
        fused("matmul_bf16_layouts_epilogue", || matmul_lowp_layouts(DType::BF16)),
        fused("matmul_f16_layouts_epilogue", || matmul_lowp_layouts(DType::F16)),
        fused("softmax_last", softmax_last),
        fused("softmax_middle", softmax_middle),
        fused("log_softmax_last", log_softmax_last),
        fused("layer_norm", || layer_norm(F, &NORM_ROWS)),
        fused("gelu", || activation("gelu", |x| x.gelu())),
        fused("gelu_tanh", || activation("gelu_tanh", |x| x.gelu_tanh())),
        fused("silu", || activation("silu", |x| x.silu())),
        fused("add_relu_mul", add_relu_mul),
        fused("normalize_rows", normalize_rows),
        fused("matmul_bias_relu", matmul_bias_relu),
        fused("conv2d_bias_relu", conv2d_bias_relu),
        fused("convnext_blocks", convnext_blocks),
        fused("attention", attention),
        fused("multihead_attention_block", multihead_attention_block),
        fused("permuted_product_projection", permuted_product_projection),
        fused("attention_layouts_masks", || attention_cases(F)),
        fused("attention_bf16", || attention_cases(DType::BF16)),
        fused("attention_f16", || attention_cases(DType::F16)),
        fused("dtype_f16_softmax", dtype_f16_softmax),
        fused("dtype_bf16_layer_norm", || layer_norm(DType::BF16, &[(1, 1), (7, 7), (3, 1023)])),
    ]
}

// ------------------------------------------------------------------------------------- matmul

/// Matrix operands in `[-1, 1)`: each product at most 1, so a K-term dot product is bounded by K.
fn unit() -> Dist {
    Dist::Uniform(-1.0, 1.0)
}

/// `[m, k] @ [k, n]` for every M, N, K in {1, 7, 127}.
fn matmul_sizes() -> Result<Vec<Instance>, String> {
    let mut v = Vec::new();
    for m in MNK {
        for n in MNK {
            for k in MNK {
                let mut b = Builder::new();
                let a = b.input(F, &[m, k], unit());
                let w = b.input(F, &[k, n], unit());
                v.push(b.finish(format!("{m}x{n}x{k}"), Tol::sum(k, 1.0), &[&a.matmul(&w)])?);
            }
        }
    }
    Ok(v)
}

/// `[3, m, k] @ [3, k, n]`.
fn matmul_batched() -> Result<Vec<Instance>, String> {
    each(&[(1, 1, 1), (7, 7, 7), (1, 127, 7), (127, 7, 127)], |(m, n, k)| {
        let mut b = Builder::new();
        let a = b.input(F, &[3, m, k], unit());
        let w = b.input(F, &[3, k, n], unit());
        b.finish(format!("3x{m}x{n}x{k}"), Tol::sum(k, 1.0), &[&a.matmul(&w)])
    })
}

/// Batch dimensions broadcast: `[2, 3, m, k] @ [k, n]` and `[m, k] @ [2, k, n]`.
fn matmul_broadcast() -> Result<Vec<Instance>, String> {
    each(&[(1, 1, 1), (7, 7, 7), (1, 7, 127), (127, 1, 7)], |(m, n, k)| {
        let mut b = Builder::new();
        let a = b.input(F, &[2, 3, m, k], unit());
        let w = b.input(F, &[k, n], unit());
        let a2 = b.input(F, &[m, k], unit());
        let w2 = b.input(F, &[2, k, n], unit());
        b.finish(format!("{m}x{n}x{k}"), Tol::sum(k, 1.0), &[&a.matmul(&w), &a2.matmul(&w2)])
    })
}

/// Transposed operands: `a @ w^T` with `w` stored `[n, k]`, and `a^T @ w` with `a` stored
/// `[k, m]` (batched).
fn matmul_transposed() -> Result<Vec<Instance>, String> {
    each(&[(1, 1, 1), (7, 7, 7), (127, 7, 127), (1, 127, 7)], |(m, n, k)| {
        let mut b = Builder::new();
        let a = b.input(F, &[m, k], unit());
        let wt = b.input(F, &[n, k], unit());
        let at = b.input(F, &[2, k, m], unit());
        let w = b.input(F, &[2, k, n], unit());
        let y = a.matmul(&wt.transpose(0, 1));
        let z = at.transpose(-1, -2).matmul(&w);
        b.finish(format!("{m}x{n}x{k}"), Tol::sum(k, 1.0), &[&y, &z])
    })
}

/// 1-D operands: `[k] @ [k, n]`, `[m, k] @ [k]` and the dot product `[k] @ [k]`.
fn matmul_vector() -> Result<Vec<Instance>, String> {
    each(&[(1, 1, 1), (7, 1, 7), (127, 7, 127), (1, 127, 4097)], |(m, n, k)| {
        let mut b = Builder::new();
        let x = b.input(F, &[k], unit());
        let w = b.input(F, &[k, n], unit());
        let a = b.input(F, &[m, k], unit());
        let y = b.input(F, &[k], unit());
        b.finish(format!("m={m} n={n} k={k}"), Tol::sum(k, 1.0), &[&x.matmul(&w), &a.matmul(&y), &x.matmul(&y)])
    })
}

/// `relu(a @ w + bias)`: the matmul epilogue.
fn matmul_bias_relu() -> Result<Vec<Instance>, String> {
    each(&[(1, 1, 1), (7, 7, 7), (127, 7, 127), (7, 127, 1), (1, 127, 127)], |(m, n, k)| {
        let mut b = Builder::new();
        let a = b.input(F, &[m, k], unit());
        let w = b.input(F, &[k, n], unit());
        let bias = b.input(F, &[n], unit());
        let y = (a.matmul(&w) + &bias).relu();
        b.finish(format!("{m}x{n}x{k}"), Tol::sum(k + 1, 1.0), &[&y])
    })
}

// -------------------------------------------------------------------------------- convolution

/// One convolution instance: input shape, weight shape, stride, padding, dilation, groups, bias.
struct Conv {
    x: [usize; 4],
    w: [usize; 4],
    stride: [usize; 2],
    pad: [usize; 4],
    dil: [usize; 2],
    groups: usize,
    bias: bool,
}

impl Conv {
    fn plain(x: [usize; 4], w: [usize; 4], pad: usize) -> Conv {
        Conv { x, w, stride: [1, 1], pad: [pad; 4], dil: [1, 1], groups: 1, bias: true }
    }

    /// The instance, with `then` applied to the convolution's result.
    fn instance(&self, then: impl Fn(Tensor) -> Tensor) -> Result<Instance, String> {
        let mut b = Builder::new();
        let x = b.input(F, &self.x, unit());
        let w = b.input(F, &self.w, unit());
        let bias = self.bias.then(|| b.input(F, &[self.w[0]], unit()));
        let y = x.conv2d(&w, bias.as_ref(), self.stride, self.pad, self.dil, self.groups);
        let taps = self.w[1] * self.w[2] * self.w[3] + 1;
        let label =
            format!("x{:?} w{:?} s{:?} p{:?} d{:?} g{}", self.x, self.w, self.stride, self.pad, self.dil, self.groups);
        b.finish(label, Tol::sum(taps, 1.0), &[&then(y)])
    }
}

/// A small ConvNeXt as torchvision writes it: a 4x4 stride-4 stem, `LayerNorm2d` (permute to
/// channels-last, LayerNorm, permute back), two blocks (depthwise 7x7 convolution with constant
/// weights, permute, LayerNorm, Linear, GELU, Linear, permute back, layer scale, residual) and
/// the global average pool. The scheduler stores the activations between the permutes
/// channels-last and the depthwise weights tap-major (`schedule::channels_last`).
fn convnext_blocks() -> Result<Vec<Instance>, String> {
    each(&[(1usize, 8usize, 7usize), (2, 16, 9)], |(n, c, hw)| {
        let mut b = Builder::new();
        let img = b.input(F, &[n, 3, 4 * hw, 4 * hw], unit());
        let (sw, sb) = (b.input(F, &[c, 3, 4, 4], unit()), b.input(F, &[c], unit()));
        let mut norm = || (b.input(F, &[c], Dist::Uniform(0.5, 1.5)), b.input(F, &[c], unit()));
        let (g0, b0) = norm();
        let (lg, lb) = norm();
        let (w1, b1) = (b.input(F, &[c, 4 * c], unit()), b.input(F, &[4 * c], unit()));
        let (w2, b2) = (b.input(F, &[4 * c, c], unit()), b.input(F, &[c], unit()));
        let (dwb, ls) = (b.input(F, &[c], unit()), b.input(F, &[c, 1, 1], unit()));
        let dw = b.graph().constant(crate::HostTensor::random(F, vec![c, 1, 7, 7], 0xd3, -0.3, 0.3));
        let stem = img.conv2d(&sw, Some(&sb), [4, 4], [0; 4], [1, 1], 1);
        let mut x = stem.permute(&[0, 2, 3, 1]).layer_norm(&g0, &b0, 1e-6).permute(&[0, 3, 1, 2]);
        for _ in 0..2 {
            let y = x.conv2d(&dw, Some(&dwb), [1, 1], [3, 3, 3, 3], [1, 1], c);
            let h = (y.permute(&[0, 2, 3, 1]).layer_norm(&lg, &lb, 1e-6).matmul(&w1) + &b1).gelu();
            x = &(&ls * &(h.matmul(&w2) + &b2).permute(&[0, 3, 1, 2])) + &x;
        }
        let pooled = x.mean(&[2, 3], true);
        b.finish(format!("n{n} c{c} {hw}x{hw}"), Tol::sum(16 * c, 4.0), &[&pooled])
    })
}

/// Small convolutions with and without padding, one of a single pixel.
fn conv2d_small() -> Result<Vec<Instance>, String> {
    [
        Conv::plain([2, 3, 7, 7], [4, 3, 3, 3], 1),
        Conv { bias: false, ..Conv::plain([1, 2, 5, 4], [3, 2, 2, 3], 0) },
        Conv::plain([1, 1, 1, 1], [1, 1, 1, 1], 0),
    ]
    .iter()
    .map(|c| c.instance(|y| y))
    .collect()
}

/// Strides, asymmetric padding, dilation and two groups.
fn conv2d_strided_grouped() -> Result<Vec<Instance>, String> {
    [
        Conv { stride: [2, 2], pad: [1, 0, 0, 1], groups: 2, ..Conv::plain([1, 4, 9, 9], [6, 2, 3, 3], 0) },
        Conv { stride: [1, 2], dil: [2, 1], pad: [2, 1, 2, 1], ..Conv::plain([2, 3, 8, 7], [5, 3, 3, 2], 0) },
    ]
    .iter()
    .map(|c| c.instance(|y| y))
    .collect()
}

/// Depthwise: one group per channel.
fn conv2d_depthwise() -> Result<Vec<Instance>, String> {
    [
        Conv { groups: 8, ..Conv::plain([2, 8, 7, 7], [8, 1, 3, 3], 1) },
        Conv { groups: 3, stride: [2, 2], ..Conv::plain([1, 3, 9, 5], [6, 1, 3, 3], 1) },
    ]
    .iter()
    .map(|c| c.instance(|y| y))
    .collect()
}

/// 1x1 convolutions (a matmul over channels), one strided, two on 1x1 images (squeeze-and-
/// excitation's: a batch of one-column products, or a window kernel with a workgroup per output).
fn conv2d_pointwise() -> Result<Vec<Instance>, String> {
    [
        Conv::plain([2, 16, 5, 5], [8, 16, 1, 1], 0),
        Conv { stride: [2, 2], ..Conv::plain([1, 7, 9, 9], [3, 7, 1, 1], 0) },
        Conv::plain([7, 240, 1, 1], [10, 240, 1, 1], 0),
        Conv::plain([5, 40, 1, 1], [96, 40, 1, 1], 0),
    ]
    .iter()
    .map(|c| c.instance(|y| y))
    .collect()
}

/// `relu(conv(x, w) + bias)`: the convolution epilogue.
fn conv2d_bias_relu() -> Result<Vec<Instance>, String> {
    [Conv::plain([2, 3, 9, 9], [8, 3, 3, 3], 1), Conv::plain([1, 16, 5, 5], [4, 16, 1, 1], 0)]
        .iter()
        .map(|c| c.instance(|y| y.relu()))
        .collect()
}

/// Max and average pooling with padding and strides.
fn pool2d() -> Result<Vec<Instance>, String> {
    each(&[[2usize, 3, 9, 9], [1, 1, 1, 1], [1, 2, 7, 4]], |s| {
        let mut b = Builder::new();
        let x = b.input(F, &s, Dist::Uniform(-2.0, 2.0));
        let mx = x.max_pool2d([3, 3], [2, 2], [1, 1, 1, 1]);
        let avg = x.avg_pool2d([2, 2], [1, 2], [0, 1, 1, 0]);
        b.finish(format!("{s:?}"), Tol::ROUNDED.times(2.0), &[&mx, &avg])
    })
}

// ------------------------------------------------------------------------------------ patterns

/// Softmax over the last axis; rows start with a `-inf` (a masked position).
fn softmax_last() -> Result<Vec<Instance>, String> {
    each(&NORM_ROWS, |(r, c)| {
        let mut b = Builder::new();
        let x = b.input(F, &[r, c], Dist::Specials(-8.0, 8.0, vec![-INF, 0.0]));
        b.finish(format!("{r}x{c}"), Tol::sum(c, 1.0), &[&x.softmax(-1)])
    })
}

/// Softmax over a middle axis.
fn softmax_middle() -> Result<Vec<Instance>, String> {
    each(&[[2usize, 1, 3], [2, 7, 3], [2, 1023, 3], [1, 4097, 2]], |s| {
        let mut b = Builder::new();
        let x = b.input(F, &s, Dist::Uniform(-8.0, 8.0));
        b.finish(format!("{s:?}"), Tol::sum(s[1], 1.0), &[&x.softmax(1)])
    })
}

/// Log-softmax over the last axis.
fn log_softmax_last() -> Result<Vec<Instance>, String> {
    each(&NORM_ROWS, |(r, c)| {
        let mut b = Builder::new();
        let x = b.input(F, &[r, c], Dist::Uniform(-8.0, 8.0));
        b.finish(format!("{r}x{c}"), Tol::sum(c, 1.0), &[&x.log_softmax(-1)])
    })
}

/// Layer norm over the last axis with weight and bias.
fn layer_norm(d: DType, rows: &[(usize, usize)]) -> Result<Vec<Instance>, String> {
    each(rows, |(r, c)| {
        let mut b = Builder::new();
        let x = b.input(d, &[r, c], Dist::Uniform(-2.0, 2.0));
        let w = b.input(d, &[c], Dist::Uniform(0.5, 1.5));
        let bias = b.input(d, &[c], Dist::Uniform(-1.0, 1.0));
        let y = x.layer_norm(&w, &bias, 1e-5);
        b.finish(format!("{r}x{c}"), Tol::sum(c, 4.0), &[&y])
    })
}

/// An activation (a composite decomposed into a pointwise chain) at every size, with specials.
fn activation(_name: &str, f: impl Fn(&Tensor) -> Tensor) -> Result<Vec<Instance>, String> {
    let specials = vec![NAN, INF, -INF, 0.0, -0.0, 10.0, -10.0, 1e-3, -1e-3];
    each(&SIZES, |n| {
        let mut b = Builder::new();
        let x = b.input(F, &[n], Dist::Specials(-6.0, 6.0, specials.clone()));
        b.finish(format!("n={n}"), Tol::ROUNDED.times(2.0), &[&f(&x)])
    })
}

/// `relu(x + b) * 2` with `b` broadcast over rows: every op exact in f32.
fn add_relu_mul() -> Result<Vec<Instance>, String> {
    each(&SHAPES_2D, |(r, c)| {
        let mut b = Builder::new();
        let x = b.input(F, &[r, c], Dist::Uniform(-2.0, 2.0));
        let bias = b.input(F, &[c], Dist::Uniform(-1.0, 1.0));
        let y = (&x + &bias).relu() * 2.0;
        b.finish(format!("{r}x{c}"), Tol::EXACT, &[&y])
    })
}

/// `(x - mean(x)) / (max|x| + 1)` per row, plus the row sums: element and row epilogues of one
/// reduction kernel.
fn normalize_rows() -> Result<Vec<Instance>, String> {
    each(&NORM_ROWS, |(r, c)| {
        let mut b = Builder::new();
        let x = b.input(F, &[r, c], Dist::Uniform(-3.0, 3.0));
        let centered = &x - &x.mean(&[-1], true);
        let y = centered / (x.abs().max(&[-1], true) + 1.0);
        let s = x.sum(&[-1], false);
        b.finish(format!("{r}x{c}"), Tol::sum(c, 3.0), &[&y, &s])
    })
}

/// Scaled dot-product attention, causal and not.
fn attention() -> Result<Vec<Instance>, String> {
    each(&[(2usize, 7usize, 16usize, true), (1, 33, 8, false), (1, 1, 4, true)], |(bt, s, d, causal)| {
        let mut b = Builder::new();
        let q = b.input(F, &[bt, s, d], unit());
        let k = b.input(F, &[bt, s, d], unit());
        let v = b.input(F, &[bt, s, d], unit());
        let y = q.attention(&k, &v, None, None, causal);
        b.finish(format!("{bt}x{s}x{d} causal={causal}"), Tol::sum(s.max(d), 1.0).times(2.0), &[&y])
    })
}

/// A pre-norm `nn.MultiheadAttention` block as torchvision's ViT exports it
/// ([`super::programs::multihead_attention_block`]). The gathers of `q`, `k`, `v` become slices
/// (`passes::algebraic`), so the attention reads them from the projection through strides; the
/// LayerNorm and the attention store in their permutes' order (`schedule::consumer_order`).
fn multihead_attention_block() -> Result<Vec<Instance>, String> {
    use super::programs::{MhaWeights, multihead_attention_block as block};
    each(&[(2usize, 7usize, 2usize, 8usize), (3, 17, 4, 12)], |(bt, s, h, d)| {
        let e = h * d;
        let small = || Dist::Uniform(-0.25, 0.25);
        let mut b = Builder::new();
        let x = b.input(F, &[bt, s, e], unit());
        let (g, be) = (b.input(F, &[e], Dist::Uniform(0.5, 1.5)), b.input(F, &[e], unit()));
        let (w_in, b_in) = (b.input(F, &[e, 3 * e], small()), b.input(F, &[3 * e], unit()));
        let (w_out, b_out) = (b.input(F, &[e, e], small()), b.input(F, &[e], unit()));
        let w = MhaWeights { norm: (&g, &be), w_in: (&w_in, Some(&b_in)), w_out: (&w_out, &b_out) };
        let out = block(&x, &w, h);
        b.finish(format!("b{bt} s{s} h{h} d{d}"), Tol::sum(2 * e + s, 4.0).times(4.0), &[&out])
    })
}

/// A batched product `[b, h, s, d]` permuted to `[b, s, h, d]` and projected (an unfused
/// attention's second product and its output projection): the product is stored in the permute's
/// order (`schedule::consumer_order`) and the projection reads it through strides.
fn permuted_product_projection() -> Result<Vec<Instance>, String> {
    each(&[(1usize, 1usize, 1usize, 1usize), (2, 3, 7, 16), (1, 4, 33, 8)], |(b, h, s, d)| {
        let mut bl = Builder::new();
        let p = bl.input(F, &[b, h, s, s], unit());
        let v = bl.input(F, &[b, h, s, d], unit());
        let w = bl.input(F, &[h * d, 5], unit());
        let y = p.matmul(&v).permute(&[0, 2, 1, 3]).reshape([b * s, h * d]).matmul(&w);
        bl.finish(format!("b{b} h{h} s{s} d{d}"), Tol::sum(s * h * d, 1.0), &[&y])
    })
}

/// Attention written out as exports write it, at awkward sizes (queries 1, 7, 128; keys 1, 7,
/// 128, 1000, 4097; head dims 16, 32, 64, 80, 128), with heads, causal triangles, additive and
/// boolean masks, BSHD layouts and grouped KV heads.
fn attention_cases(d: DType) -> Result<Vec<Instance>, String> {
    use super::programs::{AttnCase, AttnMask, attention_written_out};
    let cases = [
        AttnCase::new(1, 2, 7, 7, 32, d),
        AttnCase::new(1, 2, 1, 1000, 64, d),
        AttnCase { causal: Some(0), ..AttnCase::new(1, 1, 128, 128, 64, d) },
        AttnCase { mask: AttnMask::Additive, ..AttnCase::new(2, 1, 7, 128, 80, d) },
        AttnCase { mask: AttnMask::Bool, bshd: true, ..AttnCase::new(2, 2, 5, 9, 32, d) },
        AttnCase { kv_heads: 2, ..AttnCase::new(1, 4, 3, 4097, 16, d) },
        AttnCase { causal: Some(0), dv: 32, ..AttnCase::new(1, 2, 33, 33, 128, d) },
        // torch's export: the probabilities NaN-guarded; the mask's first row masks every key.
        AttnCase { mask: AttnMask::Bool, nan_guard: true, ..AttnCase::new(2, 2, 5, 9, 32, d) },
        // The math form of scaled_dot_product_attention (GPT-2's export): `q` and `k^T` scaled apart.
        AttnCase { split_scale: true, bshd: true, causal: Some(0), ..AttnCase::new(2, 3, 33, 33, 64, d) },
    ];
    let mut out = Vec::new();
    for c in cases {
        let mut b = Builder::new();
        let sh = c.input_shapes();
        let q = b.input(d, &sh[0], unit());
        let k = b.input(d, &sh[1], unit());
        let v = b.input(d, &sh[2], unit());
        let mask = match c.mask {
            AttnMask::None => None,
            AttnMask::Additive => Some(b.input(F, &sh[3], unit())),
            // A coin flip per key: a row that loses all 9 keys (p = 2^-9) is NaN, as in the reference.
            AttnMask::Bool if c.nan_guard => Some(b.input(DType::Bool, &sh[3], Dist::Specials(0.0, 1.0, vec![0.0; 9]))),
            AttnMask::Bool => Some(b.input(DType::Bool, &sh[3], Dist::Uniform(0.0, 1.0))),
        };
        let y = attention_written_out(&c, &q, &k, &v, mask.as_ref());
        let label = format!(
            "b{} h{}/{} m{} kv{} d{} dv{}{}{:?}{}{}",
            c.batch,
            c.heads,
            c.kv_heads,
            c.m,
            c.kv,
            c.d,
            c.dv,
            if c.causal.is_some() { " causal " } else { " " },
            c.mask,
            if c.bshd { " bshd" } else { "" },
            if c.nan_guard { " nan-guard" } else { "" },
        ) + if c.split_scale { " split-scale" } else { "" };
        out.push(b.finish(label, Tol::sum(c.kv + c.d, 1.0).times(4.0), &[&y])?);
    }
    Ok(out)
}

// -------------------------------------------------------------------------------------- dtypes

/// f16 or bf16: a pointwise chain (rounded at every node by the reference, in f32 registers by a
/// fused kernel: a few roundings of values up to 6) and a row sum.
fn dtype_half(d: DType) -> Result<Vec<Instance>, String> {
    each(&SHAPES_2D, |(r, c)| {
        let mut b = Builder::new();
        let x = b.input(d, &[r, c], Dist::Uniform(-2.0, 2.0));
        let y = b.input(d, &[r, c], Dist::Uniform(-2.0, 2.0));
        let z = (&x * &y + &x).maximum(&y);
        let s = x.sum(&[-1], false);
        let tol = Tol { rel: 2e-5, abs: 5e-6, terms: c as f64, magnitude: 4.0 };
        b.finish(format!("{d} {r}x{c}"), tol, &[&z, &s])
    })
}

/// f16 softmax (computed in f32 by the decomposition, stored in f16).
fn dtype_f16_softmax() -> Result<Vec<Instance>, String> {
    each(&[(1, 1), (7, 7), (3, 1023)], |(r, c)| {
        let mut b = Builder::new();
        let x = b.input(DType::F16, &[r, c], Dist::Uniform(-4.0, 4.0));
        b.finish(format!("{r}x{c}"), Tol::sum(c, 1.0), &[&x.softmax(-1)])
    })
}

/// A half-precision matmul (accumulated in f32).
fn dtype_matmul(d: DType) -> Result<Vec<Instance>, String> {
    each(&[(1, 1, 1), (7, 7, 7), (127, 7, 127), (1, 127, 127)], |(m, n, k)| {
        let mut b = Builder::new();
        let a = b.input(d, &[m, k], unit());
        let w = b.input(d, &[k, n], unit());
        b.finish(format!("{d} {m}x{n}x{k}"), Tol::sum(k, 1.0), &[&a.matmul(&w)])
    })
}

/// 16-bit matmuls (tensor cores where a backend has them) at sizes around and across tiles:
/// M/N/K of 1, 7, 127, 4097 and multiples of 8 and 64, batched.
fn matmul_lowp_shapes(d: DType) -> Result<Vec<Instance>, String> {
    let shapes = [
        (1, 1, 1, 1),
        (1, 7, 7, 7),
        (1, 127, 127, 127),
        (1, 4097, 7, 127),
        (1, 7, 4097, 16),
        (1, 3, 5, 4097),
        (2, 64, 64, 64),
        (3, 130, 72, 40),
        (1, 256, 512, 136),
    ];
    each(&shapes, |(batch, m, n, k)| {
        let mut b = Builder::new();
        let a = b.input(d, &[batch, m, k], unit());
        let w = b.input(d, &[batch, k, n], unit());
        b.finish(format!("{d} {batch}x{m}x{n}x{k}"), Tol::sum(k, 1.0), &[&a.matmul(&w)])
    })
}

/// 16-bit matmuls with transposed operands, a strided (sliced) operand and a broadcast weight,
/// each with a fused bias, residual and GELU epilogue computed from the f32 accumulator.
fn matmul_lowp_layouts(d: DType) -> Result<Vec<Instance>, String> {
    each(&[(7, 9, 5), (64, 64, 64), (127, 130, 72), (300, 200, 72)], |(m, n, k)| {
        let mut b = Builder::new();
        let a = b.input(d, &[2, m, k], unit());
        let at = b.input(d, &[2, k, m], unit());
        let wt = b.input(d, &[n, k], unit());
        let w = b.input(d, &[k, n + 3], unit());
        let bias = b.input(d, &[n], unit());
        let res = b.input(d, &[2, m, n], unit());
        let w_view = w.slice(1, 1, (n + 1) as i64, 1);
        let y1 = (a.matmul(&wt.transpose(0, 1)) + &bias).gelu();
        let y2 = at.transpose(-1, -2).matmul(&w_view) + &res;
        let y3 = at.transpose(-1, -2).matmul(&wt.transpose(0, 1)).relu();
        // The residual sum cancels: its error is that of the product's rounding (or, fused, the
        // rounding it skips), one 16-bit ulp of |a @ w|, whose size grows as sqrt(k) for these
        // operands (standard deviation sqrt(k / 9); 6 of them bound every element here).
        let size = 2.0 * (k as f64).sqrt() + 2.0;
        b.finish(format!("{d} {m}x{n}x{k}"), Tol::sum(k + 2, 1.0).with_magnitude(size), &[&y1, &y2, &y3])
    })
}

/// f64: a pointwise chain with a transcendental, a row sum and a matmul (a backend without f64
/// must refuse it as Unsupported).
fn dtype_f64() -> Result<Vec<Instance>, String> {
    each(&[(1, 1), (7, 7), (3, 1023), (2, 4097)], |(r, c)| {
        let d = DType::F64;
        let mut b = Builder::new();
        let x = b.input(d, &[r, c], Dist::Uniform(-2.0, 2.0));
        let y = b.input(d, &[r, c], Dist::Uniform(-2.0, 2.0));
        let w = b.input(d, &[c, 3], unit());
        let z = (&x * &y + &x).exp() / (y.abs() + 1.0);
        let s = x.sum(&[-1], false);
        let m = x.matmul(&w);
        b.finish(format!("{r}x{c}"), Tol::sum(c, 2.0).times(4.0), &[&z, &s, &m])
    })
}

/// i32: wrapping arithmetic (a fourth power overflows), truncating division, both remainders,
/// max, abs, neg, a comparison and a row sum.
fn dtype_i32() -> Result<Vec<Instance>, String> {
    each(&SHAPES_2D, |(r, c)| {
        let d = DType::I32;
        let mut b = Builder::new();
        let x = b.input(d, &[r, c], Dist::Uniform(-1000.0, 1000.0));
        let y = b.input(d, &[r, c], Dist::NonZero(-50.0, 50.0));
        let arith = (&x + &y) * &y - &x / &y;
        let wrap = &x * &x * &x * &x;
        let rems = x.rem(&y) + x.binary(crate::ir::BinaryOp::FMod, &y);
        let mx = x.maximum(&y.neg()).abs();
        let gt = x.gt(&y);
        let s = x.sum(&[-1], false);
        b.finish(format!("{r}x{c}"), Tol::EXACT, &[&arith, &wrap, &rems, &mx, &gt, &s])
    })
}

/// i64 (values within 32 bits, which WGSL's emulation holds): arithmetic, division, floored
/// remainder, a row sum and an arg-max.
fn dtype_i64() -> Result<Vec<Instance>, String> {
    each(&SHAPES_2D, |(r, c)| {
        let d = DType::I64;
        let mut b = Builder::new();
        let x = b.input(d, &[r, c], Dist::Uniform(-100.0, 100.0));
        let y = b.input(d, &[r, c], Dist::NonZero(-30.0, 30.0));
        let arith = &x * &y + &x / &y - x.rem(&y);
        let s = x.sum(&[-1], false);
        let am = x.argmax(-1, false);
        b.finish(format!("{r}x{c}"), Tol::EXACT, &[&arith, &s, &am])
    })
}

/// u8: wrapping add and multiply, division, remainder, max, a comparison and a wrapping row sum.
fn dtype_u8() -> Result<Vec<Instance>, String> {
    each(&SHAPES_2D, |(r, c)| {
        let d = DType::U8;
        let mut b = Builder::new();
        let x = b.input(d, &[r, c], Dist::Uniform(0.0, 256.0));
        let y = b.input(d, &[r, c], Dist::NonZero(0.0, 256.0));
        let wrap = &x + &y;
        let prod = &x * &y;
        let div = &x / &y + x.rem(&y);
        let mx = x.maximum(&y);
        let lt = x.lt(&y);
        let s = x.sum(&[-1], false);
        b.finish(format!("{r}x{c}"), Tol::EXACT, &[&wrap, &prod, &div, &mx, &lt, &s])
    })
}

/// bool: logical ops, equality, `where` on bool and f32, and a count through a cast.
fn dtype_bool() -> Result<Vec<Instance>, String> {
    each(&SHAPES_2D, |(r, c)| {
        let d = DType::Bool;
        let mut b = Builder::new();
        let x = b.input(d, &[r, c], Dist::Uniform(0.0, 2.0));
        let y = b.input(d, &[r, c], Dist::Uniform(0.0, 2.0));
        let v = b.input(F, &[r, c], Dist::Uniform(-1.0, 1.0));
        let logic = x.and(&y).or(&x.xor(&y).not());
        let eq = x.eq(&y);
        let sel = x.where_(&y, &x.not());
        let vals = y.where_(&v, &v.neg());
        let count = x.cast(DType::I32).sum(&[-1], false);
        b.finish(format!("{r}x{c}"), Tol::EXACT, &[&logic, &eq, &sel, &vals, &count])
    })
}
