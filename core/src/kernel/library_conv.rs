//! Convolution kernels a vendor library can run (cuDNN's forward convolution): [`split_conv`]
//! recognizes an implicit-GEMM convolution kernel (a [`super::MatmulBody`] whose B operand has the
//! [`Im2col`] form, batched over groups, its A the dense `OIHW` weight) and turns it into a
//! library convolution into a scratch buffer of the product's dtype, laid out `NCHW`, plus its
//! epilogue (bias, residual, activation, casts: everything after the accumulator) as a pointwise
//! kernel reading that scratch, exactly as [`super::library::split_epilogue`] does for products.
//!
//! Numerics: the scratch holds the product rounded to the operands' dtype, as the unfused graph
//! computes the convolution node; the fused kernel adds its epilogue to the f32 accumulator
//! instead. For f32 operands the two agree; for 16-bit ones they differ by that one rounding.
//! Whether the library multiplies in TF32 follows the kernel's [`super::MatmulBody::tf32`].
//!
//! Always split: even an epilogue of the bare accumulator is a copy from the scratch, so the
//! output never has to be proven `NCHW`-dense here. A fused bias/ReLU/residual form (cuDNN's
//! `ConvolutionBiasActivationForward`) is a possible next step, not done.
//!
//! The library takes symmetric padding only: a window whose bottom/right padding differs from its
//! top/left one in a way that changes the output extent is refused with the reason.

use super::library::{SCRATCH, epilogue_kernel, library_dtypes, product_dtype};
use super::{Access, Expr, Im2col, Index, Kernel, KernelArg, KernelBody, Store, TypedExpr, Var};
use crate::dtype::DType;

/// A convolution as a library call: `y[img, oc, oy, ox] = sum x[img, g*cg + c, iy, ix] *
/// w[oc, c, ky, kx]` over a group's `cg` channels and the window, `y` dense `NCHW`.
#[derive(Clone, Debug, PartialEq)]
pub struct LibraryConv {
    /// Images (N).
    pub images: usize,
    /// Groups (`in_channels` and `out_channels` are multiples of it).
    pub groups: usize,
    /// Input channels over all groups (C).
    pub in_channels: usize,
    /// Input extent (H, W).
    pub in_hw: [usize; 2],
    /// Output channels over all groups (K).
    pub out_channels: usize,
    /// Window extent (kh, kw).
    pub kernel: [usize; 2],
    /// Window stride.
    pub stride: [usize; 2],
    /// Padding on both sides of each dimension (top = bottom, left = right as far as the output
    /// extent can tell).
    pub pad: [usize; 2],
    /// Window dilation.
    pub dilation: [usize; 2],
    /// Output extent (OH, OW).
    pub out_hw: [usize; 2],
    /// Kernel argument of the input.
    pub x: usize,
    /// Element offset of the input.
    pub x_offset: usize,
    /// Input element strides of (image, channel, row, column).
    pub x_strides: [usize; 4],
    /// Kernel argument of the weight (dense `[K, C / groups, kh, kw]`).
    pub w: usize,
    /// Element offset of the weight.
    pub w_offset: usize,
    /// Kernel argument the output goes to.
    pub out: usize,
    /// The output is `NHWC` (`[N, OH, OW, K]` row-major) instead of `NCHW`: the order the
    /// kernel's own output is stored in (a channels-last node, `schedule::Sched::layout`), so
    /// the epilogue reads and writes in the same order.
    pub out_nhwc: bool,
    /// Operand dtype (f32, f16 or bf16; f32 accumulation), also the output's.
    pub dtype: DType,
    /// The product may run in TF32.
    pub tf32: bool,
}

impl LibraryConv {
    /// Floating-point operations, `2 * N * K * OH * OW * (C / groups) * kh * kw`.
    pub fn flops(&self) -> f64 {
        let per_out = (self.in_channels / self.groups.max(1)) * self.kernel[0] * self.kernel[1];
        2.0 * (self.images * self.out_channels * self.out_hw[0] * self.out_hw[1]) as f64 * per_out as f64
    }

    /// Output elements, `N * K * OH * OW`.
    pub fn out_numel(&self) -> usize {
        self.images * self.out_channels * self.out_hw[0] * self.out_hw[1]
    }
}

/// A convolution kernel as a library convolution into a scratch plus a pointwise epilogue.
#[derive(Clone, Debug, PartialEq)]
pub struct SplitConv {
    /// The convolution: `out` is the scratch argument (index `kernel.args.len()` of the original
    /// kernel, the last argument of `epilogue`).
    pub conv: LibraryConv,
    /// The epilogue: the original kernel's arguments plus the scratch (read), one lane per output
    /// element in `NCHW` order, `Acc(0)` replaced by a load of the scratch.
    pub epilogue: Kernel,
}

/// The padding `p` (both sides) of one dimension when the library's output extent
/// `(in + 2p - d (k - 1) - 1) / s + 1` equals `out` for the top/left padding `pad`.
fn symmetric_pad(input: usize, k: usize, s: usize, d: usize, pad: usize, out: usize) -> Option<usize> {
    let span = d * (k - 1) + 1;
    let padded = input + 2 * pad;
    (padded >= span && (padded - span) / s + 1 == out).then_some(pad)
}

/// `k` as a library convolution plus its epilogue, or why not.
pub fn split_conv(k: &Kernel) -> Result<SplitConv, String> {
    let mm = library_dtypes(k)?;
    if mm.in_dtype.is_fp8() {
        return Err(format!("an {} convolution (the library takes f32, f16 and bf16)", mm.in_dtype));
    }
    let w: &Im2col = mm.b.im2col.as_deref().ok_or("not a convolution (no im2col operand)")?;
    if mm.a.im2col.is_some() {
        return Err("an im2col A operand".into());
    }
    let (g, cog, kk) = (mm.batch, mm.m, mm.k);
    let pixels = w.pixels();
    if kk != w.k() || pixels == 0 || !mm.n.is_multiple_of(pixels) {
        return Err(format!(
            "a {}x{}x{} product is not the convolution its im2col operand describes",
            mm.m, mm.n, mm.k
        ));
    }
    let images = mm.n / pixels;
    // The weight: dense [g * cog, kk] (OIHW), one group after the other.
    let a = &mm.a;
    if (kk > 1 && a.s_col != 1) || (cog > 1 && a.s_row != kk) || (g > 1 && a.s_batch != cog * kk) {
        return Err(format!("the weight is not a dense OIHW tensor (strides {}, {}, {})", a.s_batch, a.s_row, a.s_col));
    }
    if g > 1 && mm.b.s_batch != w.channels * w.s_chan {
        return Err(format!(
            "groups {} channels apart in the input, not {}",
            mm.b.s_batch / w.s_chan.max(1),
            w.channels
        ));
    }
    let pad_of = |d: usize| {
        symmetric_pad(w.in_hw[d], w.kernel[d], w.stride[d], w.dilation[d], w.pad[d], w.out_hw[d])
            .ok_or_else(|| format!("asymmetric padding along dimension {d} (the library pads both sides alike)"))
    };
    let pad = [pad_of(0)?, pad_of(1)?];
    let extents = [images, g * w.channels, g * cog, w.in_hw[0], w.in_hw[1], w.out_hw[0], w.out_hw[1], kk];
    if extents.iter().any(|&e| e == 0 || e > i32::MAX as usize) {
        return Err("an empty convolution or an extent over 2^31".into());
    }
    let prod = product_dtype(k, mm);
    let numel = images * g * cog * pixels;
    let conv = LibraryConv {
        images,
        groups: g,
        in_channels: g * w.channels,
        in_hw: w.in_hw,
        out_channels: g * cog,
        kernel: w.kernel,
        stride: w.stride,
        pad,
        dilation: w.dilation,
        out_hw: w.out_hw,
        x: mm.b.arg,
        x_offset: mm.b.offset,
        x_strides: [w.s_img, w.s_chan, w.s_y, w.s_x],
        w: a.arg,
        w_offset: a.offset,
        out: k.args.len(),
        out_nhwc: false,
        dtype: prod,
        tf32: mm.tf32,
    };
    let lane = Index::var(Var::Lane);
    let (p, cog_i, g_i) = (pixels as i64, cog as i64, g as i64);
    // Lane l of an NCHW scratch: pixel l % P, channel m = (l / P) % cog of group (l / (P cog)) % g,
    // image l / (P cog g); the product's column is image * P + pixel.
    let nchw = [
        lane.clone().div(p * cog_i).rem(g_i),
        lane.clone().div(p).rem(cog_i),
        lane.clone().div(p * cog_i * g_i).mul(p).add(lane.clone().rem(p)),
    ];
    // Lane l of an NHWC scratch: channel c = l % (g cog) (group c / cog, row c % cog); the
    // product's column is l / (g cog).
    let nhwc =
        [lane.clone().rem(g_i * cog_i).div(cog_i), lane.clone().rem(g_i * cog_i).rem(cog_i), lane.div(g_i * cog_i)];
    // The scratch follows the order of the kernel's stores when they are NHWC (every order is
    // correct: the epilogue maps each lane back to its product element; only coalescing differs).
    let out_nhwc = !mm.stores.is_empty() && mm.stores.iter().all(|st| stores_lane_order(&st.index, &nhwc, numel));
    let at = if out_nhwc { nhwc } else { nchw };
    let epilogue = epilogue_kernel(k, mm, numel, at)?;
    debug_assert_eq!(epilogue.args.last().map(|a| a.buffer), Some(SCRATCH));
    Ok(SplitConv { conv: LibraryConv { out_nhwc, ..conv }, epilogue })
}

/// The weight of library convolution `c` (argument `c.w` of kernel `k`, dense `[K, C/groups, kh,
/// kw]` from element `c.w_offset`) permuted to `[K, kh, kw, C/groups]` (`KRSC`) as a pointwise
/// kernel: `k`'s arguments plus a scratch (appended, [`SCRATCH`], written, `c.dtype`), every
/// element written once. A backend runs it before each library convolution whose weight is
/// not a constant it could permute once at load, where the library is faster with `KRSC` filters
/// (cuDNN with channels-last activations; see `backend-cuda`'s `conv.rs` for the figures).
pub fn krsc_weight_kernel(k: &Kernel, c: &LibraryConv) -> Result<Kernel, String> {
    let w = k.args.get(c.w).ok_or("the weight argument is missing")?;
    let cg = c.in_channels / c.groups.max(1);
    let [kh, kw] = c.kernel;
    let numel = c.out_channels * cg * kh * kw;
    if c.w_offset + numel > w.numel {
        return Err(format!("the weight ({} elements) is shorter than {numel} from element {}", w.numel, c.w_offset));
    }
    let lane = Index::var(Var::Lane);
    let (cg_i, taps) = (cg as i64, (kh * kw) as i64);
    // Lanes walk `g` channels of one tap, then the taps, then the next `g` channels: a warp's
    // stores fill whole 32-byte sectors (g = 8 f32 channels), and its loads read `g` runs of
    // consecutive taps. Walking either order alone makes one side strided by 9 (3x3) or by C
    // elements: 14.5 us for a 512x512x3x3 f32 weight under ncu on an H200 (session 19), ~3x its
    // bytes' time.
    let g = [8usize, 4, 2, 1].into_iter().find(|g| cg.is_multiple_of(*g)).unwrap_or(1) as i64;
    let ci_lo = lane.clone().rem(g);
    let tap = lane.clone().div(g).rem(taps);
    let rest = lane.div(g * taps);
    let ci = rest.clone().rem(cg_i / g).mul(g).add(ci_lo);
    let ko = rest.div(cg_i / g);
    // KRSC element (ko, tap, ci) from KCRS element (ko, ci, tap).
    let from =
        Index::Const(c.w_offset as i64).add(ko.clone().mul(cg_i * taps)).add(ci.clone().mul(taps)).add(tap.clone());
    let to = ko.mul(cg_i * taps).add(tap.mul(cg_i)).add(ci);
    let exprs = vec![TypedExpr { expr: Expr::Load { arg: c.w, index: from }, dtype: w.dtype }];
    let mut args = k.args.clone();
    args.push(KernelArg { buffer: SCRATCH, dtype: c.dtype, numel, access: Access::Write });
    let stores = vec![Store { arg: args.len() - 1, index: to, value: super::ExprId(0) }];
    let bytes = (numel * (w.dtype.size_bytes() + c.dtype.size_bytes())) as f64;
    let kernel = Kernel {
        name: format!("{}_krsc_weight", k.name),
        args,
        exprs,
        body: KernelBody::Pointwise { numel, stores },
        origins: k.origins.clone(),
        ops: vec!["permute".into()],
        flops: 0.0,
        bytes,
    };
    super::analysis::check_kernel(&kernel).map_err(|e| format!("KRSC weight kernel: {e}"))?;
    Ok(kernel)
}

/// Whether store index `index` (over Batch, M, N), with those replaced by the lane mappings
/// `at`, writes element `l` at lane `l`: checked at the ends and at 61 lanes spread between
/// (a heuristic for the scratch order; correctness does not depend on it).
fn stores_lane_order(index: &Index, at: &[Index; 3], numel: usize) -> bool {
    let idx = index.substitute(Var::Batch, &at[0]).substitute(Var::M, &at[1]).substitute(Var::N, &at[2]);
    let n = numel as i64;
    let samples = (0..64).map(|i| match i {
        0 => 0,
        1 => n - 1,
        2 => 1.min(n - 1),
        i => (n - 1) * (i - 3) / 61 + (i % 7),
    });
    samples.map(|l| l.clamp(0, n - 1)).all(|l| idx.eval(&|v| if v == Var::Lane { l } else { 0 }, &|_| 0) == l)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::interp;
    use crate::kernel::{BufferDecl, BufferId, BufferKind, Capabilities, KernelBody};
    use crate::schedule::{ScheduleOptions, schedule};
    use crate::tensor::HostTensor;
    use crate::trace::Graph;

    use crate::schedule::tests::{Convs, TestModel};

    /// `relu(conv(x, w) + b + r)` at `xs`/`ws` with the given window; the graph, its inputs, and
    /// the scheduled program.
    #[allow(clippy::type_complexity)]
    fn conv_case(
        xs: [usize; 4],
        ws: [usize; 4],
        stride: [usize; 2],
        pad: [usize; 4],
        dil: [usize; 2],
        groups: usize,
    ) -> (Graph, Vec<HostTensor>, crate::kernel::Program) {
        let d = DType::F32;
        let g = Graph::new();
        let x = g.input("x", d, xs);
        let w = g.input("w", d, ws);
        let b = g.input("b", d, [ws[0]]);
        let y = x.conv2d(&w, Some(&b), stride, pad, dil, groups);
        let oshape = y.shape().as_static().expect("static");
        let r = g.input("r", d, oshape.clone());
        g.output(&(y + &r).relu());
        let inputs = vec![
            HostTensor::random(d, xs.to_vec(), 1, -1.0, 1.0),
            HostTensor::random(d, ws.to_vec(), 2, -1.0, 1.0),
            HostTensor::random(d, vec![ws[0]], 3, -1.0, 1.0),
            HostTensor::random(d, oshape, 4, -1.0, 1.0),
        ];
        let ir = crate::passes::optimize(&g.build().unwrap()).unwrap();
        let p = schedule(&ir, &Capabilities::host(), &TestModel::convs(Convs::Implicit)).unwrap();
        (g, inputs, p)
    }

    /// A reference convolution of `c` (NCHW, f64 accumulation, symmetric padding).
    fn reference(c: &LibraryConv, x: &[f64], w: &[f64]) -> Vec<f64> {
        let (cg, kg) = (c.in_channels / c.groups, c.out_channels / c.groups);
        let mut y = vec![0.0; c.out_numel()];
        let [oh, ow] = c.out_hw;
        for n in 0..c.images {
            for o in 0..c.out_channels {
                let grp = o / kg;
                for oy in 0..oh {
                    for ox in 0..ow {
                        let mut s = 0.0;
                        for ci in 0..cg {
                            for ky in 0..c.kernel[0] {
                                for kx in 0..c.kernel[1] {
                                    let iy = (oy * c.stride[0] + ky * c.dilation[0]) as i64 - c.pad[0] as i64;
                                    let ix = (ox * c.stride[1] + kx * c.dilation[1]) as i64 - c.pad[1] as i64;
                                    if iy < 0 || ix < 0 || iy as usize >= c.in_hw[0] || ix as usize >= c.in_hw[1] {
                                        continue;
                                    }
                                    let [sn, sc, sy, sx] = c.x_strides;
                                    let xi = c.x_offset
                                        + n * sn
                                        + (grp * cg + ci) * sc
                                        + iy as usize * sy
                                        + ix as usize * sx;
                                    let wi = c.w_offset + ((o * cg + ci) * c.kernel[0] + ky) * c.kernel[1] + kx;
                                    s += x[xi] * w[wi];
                                }
                            }
                        }
                        let at = if c.out_nhwc {
                            ((n * oh + oy) * ow + ox) * c.out_channels + o
                        } else {
                            ((n * c.out_channels + o) * oh + oy) * ow + ox
                        };
                        y[at] = s;
                    }
                }
            }
        }
        y
    }

    /// The split form, run as the library would (a reference convolution from the recognized
    /// geometry into the scratch) and then the epilogue through the interpreter, computes the
    /// graph: geometry, strides and the epilogue's NCHW lanes all checked against the CPU
    /// reference, at awkward sizes, strides, padding, dilation and groups.
    #[test]
    fn split_convolutions_compute_the_graph() {
        let cases = [
            ([2, 3, 7, 9], [5, 3, 3, 3], [1, 1], [1, 1, 1, 1], [1, 1], 1),
            ([1, 4, 11, 6], [6, 2, 3, 2], [2, 1], [1, 0, 1, 0], [1, 2], 2),
            ([3, 8, 9, 9], [8, 8, 1, 1], [2, 2], [0, 0, 0, 0], [1, 1], 1),
            ([2, 3, 15, 15], [7, 3, 7, 7], [2, 2], [3, 3, 3, 3], [1, 1], 1),
        ];
        for (xs, ws, stride, pad, dil, groups) in cases {
            let (g, inputs, p) = conv_case(xs, ws, stride, pad, dil, groups);
            let ki = p.kernels.iter().position(|k| matches!(&k.body, KernelBody::Matmul(m) if m.b.im2col.is_some()));
            let ki = ki.unwrap_or_else(|| panic!("no implicit conv for {xs:?} {ws:?}"));
            let split = split_conv(&p.kernels[ki]).unwrap_or_else(|e| panic!("{xs:?} {ws:?}: {e}"));
            let c = &split.conv;
            assert_eq!((c.images, c.groups, c.out_channels, c.kernel), (xs[0], groups, ws[0], [ws[2], ws[3]]));
            assert!(!c.out_nhwc, "a graph output is NCHW");
            let r = run_split(&p, ki, &split, &inputs, &g);
            assert!(r <= 1.0, "{xs:?} {ws:?}: tolerance ratio {r}");
        }
    }

    /// Runs `p` with kernel `ki` replaced by `split` (the library's part computed by
    /// [`reference`] from the buffers the kernel binds, which must be graph inputs) through the
    /// interpreter; the tolerance ratio of the first output against the CPU reference of `g`.
    fn run_split(p: &crate::kernel::Program, ki: usize, split: &SplitConv, inputs: &[HostTensor], g: &Graph) -> f64 {
        let c = &split.conv;
        let arg_input = |arg: usize| {
            let buf = p.kernels[ki].args[arg].buffer;
            let io = p.inputs.iter().position(|io| io.buffer == buf).expect("an input buffer");
            inputs[io].to_f64_vec()
        };
        let y = reference(c, &arg_input(c.x), &arg_input(c.w));
        let mut prog = p.clone();
        let sid = BufferId(prog.buffers.len() as u32);
        let scratch = HostTensor::from_f64(DType::F32, vec![y.len()], &y);
        prog.buffers.push(BufferDecl {
            id: sid,
            dtype: DType::F32,
            numel: y.len(),
            kind: BufferKind::Constant(std::sync::Arc::new(scratch)),
            node: None,
        });
        prog.memory.slot_of.push(None);
        let mut ep = split.epilogue.clone();
        ep.args.last_mut().unwrap().buffer = sid;
        prog.kernels[ki] = ep;
        let got = interp::run_program(&prog, inputs).unwrap();
        let want = crate::cpu::run(&g.build().unwrap(), inputs).unwrap();
        got[0].tolerance_ratio(&want[0], 1e-5, 1e-5)
    }

    /// A convolution whose output (after its epilogue) is the input of another, stored
    /// channels-last: the split's scratch and lanes follow NHWC, and the program still computes
    /// the graph; the second convolution reads the first's output channel-contiguous.
    #[test]
    fn channels_last_outputs_split_in_nhwc_order() {
        let d = DType::F32;
        let g = Graph::new();
        let x = g.input("x", d, [2, 5, 9, 7]);
        let w1 = g.input("w1", d, [6, 5, 3, 3]);
        let b1 = g.input("b1", d, [6]);
        let w2 = g.input("w2", d, [4, 6, 3, 3]);
        let h = x.conv2d(&w1, Some(&b1), [1, 1], [1; 4], [1, 1], 1).relu();
        g.output(&h.conv2d(&w2, None, [2, 2], [1; 4], [1, 1], 1));
        let inputs = vec![
            HostTensor::random(d, vec![2, 5, 9, 7], 1, -1.0, 1.0),
            HostTensor::random(d, vec![6, 5, 3, 3], 2, -1.0, 1.0),
            HostTensor::random(d, vec![6], 3, -1.0, 1.0),
            HostTensor::random(d, vec![4, 6, 3, 3], 4, -1.0, 1.0),
        ];
        let ir = crate::passes::optimize(&g.build().unwrap()).unwrap();
        let opts = TestModel::convs(Convs::ChannelsLast);
        let p = schedule(&ir, &Capabilities::host(), &opts).unwrap();
        assert!(p.decisions.iter().any(|d| d.reason.starts_with("layout: ")), "{:?}", p.decisions);
        let convs: Vec<usize> = (0..p.kernels.len())
            .filter(|&i| matches!(&p.kernels[i].body, KernelBody::Matmul(m) if m.b.im2col.is_some()))
            .collect();
        assert_eq!(convs.len(), 2);
        let KernelBody::Matmul(second) = &p.kernels[convs[1]].body else { unreachable!() };
        assert_eq!(second.b.im2col.as_ref().unwrap().s_chan, 1, "the second conv reads NHWC");
        let split = split_conv(&p.kernels[convs[0]]).unwrap();
        assert!(split.conv.out_nhwc, "the first conv's output is stored NHWC");
        let r = run_split(&p, convs[0], &split, &inputs, &g);
        assert!(r <= 1.0, "tolerance ratio {r}");
    }

    /// The `KRSC` weight kernel, run through the interpreter in place of the convolution, writes
    /// every filter tap's channels contiguously (checked element by element against the weight
    /// input, groups and a non-square window included), poisoned scratch memory all overwritten.
    #[test]
    fn krsc_weight_kernel_permutes_the_filter() {
        for (xs, ws, groups) in
            [([1, 4, 6, 6], [6, 2, 3, 2], 2), ([2, 3, 7, 9], [5, 3, 3, 3], 1), ([1, 1, 5, 5], [7, 1, 1, 1], 1)]
        {
            let (_, inputs, p) = conv_case(xs, ws, [1, 1], [1, 1, 1, 1], [1, 1], groups);
            let ki = p.kernels.iter().position(|k| matches!(&k.body, KernelBody::Matmul(m) if m.b.im2col.is_some()));
            let ki = ki.expect("an implicit conv");
            let split = split_conv(&p.kernels[ki]).unwrap();
            let mut perm = krsc_weight_kernel(&p.kernels[ki], &split.conv).unwrap();
            let numel = ws.iter().product::<usize>();
            let mut prog = p.clone();
            let sid = BufferId(prog.buffers.len() as u32);
            prog.buffers.push(BufferDecl {
                id: sid,
                dtype: DType::F32,
                numel,
                kind: BufferKind::Output(0),
                node: None,
            });
            prog.memory.slot_of.push(None);
            perm.args.last_mut().unwrap().buffer = sid;
            prog.kernels = vec![perm];
            prog.outputs =
                vec![crate::kernel::IoDecl { name: "w".into(), buffer: sid, shape: vec![numel], dtype: DType::F32 }];
            let got = interp::run_program(&prog, &inputs).unwrap()[0].to_f64_vec();
            let w = inputs[1].to_f64_vec();
            let [k, cg, kh, kw] = ws;
            for ko in 0..k {
                for r in 0..kh {
                    for s in 0..kw {
                        for ci in 0..cg {
                            let at = ((ko * kh + r) * kw + s) * cg + ci;
                            assert_eq!(got[at], w[((ko * cg + ci) * kh + r) * kw + s], "{ws:?} at {at}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn asymmetric_padding_and_plain_products_say_why() {
        // Padding 2 on top, 0 at the bottom: the library's symmetric output would be taller.
        let (_, _, p) = conv_case([1, 2, 8, 8], [3, 2, 3, 3], [1, 1], [2, 0, 0, 0], [1, 1], 1);
        let k = p.kernels.iter().find(|k| matches!(&k.body, KernelBody::Matmul(m) if m.b.im2col.is_some())).unwrap();
        assert!(split_conv(k).unwrap_err().contains("asymmetric padding"), "{:?}", split_conv(k));
        let g = Graph::new();
        g.output(&g.input("a", DType::F32, vec![8, 4]).matmul(&g.input("b", DType::F32, vec![4, 8])));
        let ir = crate::passes::optimize(&g.build().unwrap()).unwrap();
        let p = schedule(&ir, &Capabilities::host(), &ScheduleOptions::default()).unwrap();
        let k = p.kernels.iter().find(|k| matches!(k.body, KernelBody::Matmul(_))).unwrap();
        assert!(split_conv(k).unwrap_err().contains("not a convolution"));
    }
}
