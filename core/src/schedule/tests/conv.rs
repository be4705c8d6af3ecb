//! Convolutions and pooling: window kernels, lowering to matmuls (strided views, im2col), the
//! cost model's choice, and the fallback to window kernels over the binding limit.

use super::*;

/// A convolution case: (x, w, stride, padding, dilation, groups, bias).
pub(super) type ConvCase = ([usize; 4], [usize; 4], [usize; 2], [usize; 4], [usize; 2], usize, bool);

/// Case `i`, `c`, with an epilogue (per-channel scale and shift, batch-norm-like; residual add;
/// relu): the graph, random inputs seeded by `i` (x, w, the bias, the residual) and a line naming
/// the case.
pub(super) fn conv_epilogue(i: usize, c: ConvCase) -> (IrGraph, [HostTensor; 4], String) {
    let (xs, ws, stride, pad, dil, groups, bias) = c;
    let g = Graph::new();
    let x = g.input("x", DType::F32, xs);
    let w = g.input("w", DType::F32, ws);
    let b = g.input("b", DType::F32, [ws[0]]);
    let y = x.conv2d(&w, bias.then_some(&b), stride, pad, dil, groups);
    let oshape = y.shape().as_static().expect("static");
    let r = g.input("r", DType::F32, oshape.clone());
    g.output(&((y * 0.5 + &b.reshape([ws[0], 1, 1])) + &r).relu());
    let ins = [
        rnd(DType::F32, &xs, i as u64),
        rnd(DType::F32, &ws, 10 + i as u64),
        rnd(DType::F32, &[ws[0]], 20),
        rnd(DType::F32, &oshape, 30 + i as u64),
    ];
    let ctx = format!("case {i}: x {xs:?} w {ws:?} stride {stride:?} pad {pad:?} dil {dil:?} groups {groups}");
    (g.build().expect("build"), ins, ctx)
}

#[test]
fn conv2d_variants() {
    type Case = ([usize; 4], [usize; 4], [usize; 2], [usize; 4], [usize; 2], usize, bool);
    let cases: &[Case] = &[
        ([1, 3, 7, 6], [4, 3, 3, 3], [1, 1], [1, 1, 1, 1], [1, 1], 1, true),
        ([2, 4, 9, 8], [6, 2, 3, 2], [2, 1], [0, 2, 1, 0], [1, 2], 2, false),
        ([1, 2, 5, 5], [2, 1, 1, 1], [1, 1], [0, 0, 0, 0], [1, 1], 2, true),
        ([1, 1, 6, 7], [1, 1, 2, 3], [3, 2], [2, 2, 2, 2], [2, 1], 1, true),
    ];
    for (i, &(xs, ws, stride, pad, dil, groups, bias)) in cases.iter().enumerate() {
        let g = Graph::new();
        let x = g.input("x", DType::F32, xs);
        let w = g.input("w", DType::F32, ws);
        let b = g.input("b", DType::F32, [ws[0]]);
        let y = x.conv2d(&w, bias.then_some(&b), stride, pad, dil, groups);
        g.output(&(y.relu() + 1.0));
        let ir = g.build().expect("build");
        let ins = [rnd(DType::F32, &xs, i as u64), rnd(DType::F32, &ws, 10 + i as u64), rnd(DType::F32, &[ws[0]], 20)];
        let p = check(&ir, &ins);
        // Few output channels: the default cost model keeps the window kernel.
        assert_eq!(p.kernels.len(), 1, "{}", print_program(&p));
        let KernelBody::Reduce(r) = &p.kernels[0].body else { panic!("conv is not a reduce kernel") };
        assert_eq!(r.strategy, ReduceStrategy::ThreadPerRow);
        assert!(p.decisions.iter().any(|d| d.reason.starts_with("conv lowering: window")));
    }
}

#[test]
fn conv_lowering_cost_model() {
    let m = DefaultCostModel::default();
    let caps = Capabilities::host();
    let conv = |c: usize, oc: usize, groups: usize, k: usize, im2col_bytes: usize| ConvShape {
        batch: 32,
        in_channels: c,
        out_channels: oc,
        groups,
        kernel: [k, k],
        out_hw: [56, 56],
        im2col_bytes,
        dtype: crate::dtype::DType::F32,
        tf32: false,
    };
    // ResNet's 3x3 convs and its 7x7 RGB stem: matmuls.
    assert!(m.conv_as_matmul(&conv(64, 64, 1, 3, 231 << 20), &caps).is_ok());
    assert!(m.conv_as_matmul(&conv(3, 64, 1, 7, 236 << 20), &caps).is_ok());
    let r = m.conv_as_matmul(&conv(256, 64, 1, 1, 0), &caps).expect("1x1");
    assert!(r.contains("no copy"), "{r}");
    // Depthwise (one channel per group), few output channels, a tiny reduction, a huge im2col.
    assert!(m.conv_as_matmul(&conv(32, 32, 32, 3, 1 << 20), &caps).is_err());
    assert!(m.conv_as_matmul(&conv(64, 4, 1, 3, 1 << 20), &caps).is_err());
    assert!(m.conv_as_matmul(&conv(1, 64, 1, 3, 1 << 20), &caps).is_err());
    assert!(m.conv_as_matmul(&conv(64, 64, 1, 3, 2 << 30), &caps).unwrap_err().contains("im2col"));
    // Grouped with wide groups: a matmul batched over groups.
    assert!(m.conv_as_matmul(&conv(64, 64, 2, 3, 1 << 20), &caps).is_ok());
}

#[test]
fn convs_as_matmuls_at_awkward_sizes() {
    let cases: &[ConvCase] = &[
        // 1x1, stride 1, no padding: a plain matmul on strided views (no copy).
        ([2, 3, 7, 5], [5, 3, 1, 1], [1, 1], [0; 4], [1, 1], 1, true),
        ([1, 17, 1, 1], [7, 17, 1, 1], [1, 1], [0; 4], [1, 1], 1, false),
        // 1x1 images (squeeze-and-excitation), a batch of one-column products.
        ([5, 17, 1, 1], [7, 17, 1, 1], [1, 1], [0; 4], [1, 1], 1, true),
        ([3, 7, 4, 9], [17, 7, 1, 1], [1, 1], [0; 4], [2, 2], 1, true),
        // 1x1 with a stride: im2col is a strided gather.
        ([2, 5, 7, 7], [3, 5, 1, 1], [2, 2], [0; 4], [1, 1], 1, true),
        // 3x3, pad 1, at extents 1 and 7, odd channels.
        ([1, 1, 1, 1], [1, 1, 3, 3], [1, 1], [1; 4], [1, 1], 1, true),
        ([2, 3, 7, 7], [7, 3, 3, 3], [1, 1], [1; 4], [1, 1], 1, false),
        ([3, 5, 7, 6], [9, 5, 3, 3], [2, 2], [1; 4], [1, 1], 1, true),
        // Dilation 2, asymmetric padding, rectangular window.
        ([2, 3, 9, 8], [4, 3, 3, 2], [1, 2], [2, 0, 1, 3], [2, 2], 1, true),
        // The 7x7 stride-2 pad-3 stem at a small size.
        ([2, 3, 15, 13], [8, 3, 7, 7], [2, 2], [3; 4], [1, 1], 1, true),
        // Groups: one matmul batched over groups.
        ([2, 4, 9, 8], [6, 2, 3, 2], [2, 1], [0, 2, 1, 0], [1, 2], 2, false),
        ([1, 6, 5, 5], [6, 1, 3, 3], [1, 1], [1; 4], [1, 1], 6, true),
        ([2, 4, 3, 3], [4, 2, 1, 1], [1, 1], [0; 4], [1, 1], 2, true),
    ];
    let forced = TestModel::convs(Convs::Matmuls);
    let eager = ScheduleOptions { fusion: false, ..forced.clone() };
    for (i, &c @ (xs, ws, stride, pad, _, groups, _)) in cases.iter().enumerate() {
        let (ir, ins, ctx) = conv_epilogue(i, c);
        check_with(&ir, &ins, &Capabilities::host(), &eager);
        let p = check_with(&ir, &ins, &Capabilities::host(), &forced);
        let direct = groups == 1 && ws[2..] == [1, 1] && stride == [1, 1] && pad == [0; 4];
        let kinds: Vec<&str> = p
            .kernels
            .iter()
            .map(|k| match &k.body {
                KernelBody::Matmul(_) => "matmul",
                KernelBody::Pointwise { .. } if k.name.contains("_im2col") => "im2col",
                KernelBody::Pointwise { .. } => "pointwise",
                KernelBody::Reduce(_) => "reduce",
                KernelBody::Attention(_) => "attention",
            })
            .collect();
        let want: &[&str] = if direct { &["matmul"] } else { &["im2col", "matmul"] };
        assert_eq!(kinds, want, "{ctx}\n{}", print_program(&p));
        // The epilogue (bias, scale, shift, residual, relu) is in the matmul's stores.
        let mm = p.kernels.last().expect("kernel");
        assert_eq!(
            mm.ops,
            ["conv2d", "mul", "reshape", "add", "relu"].map(String::from),
            "{ctx}\n{}",
            print_program(&p)
        );
        let KernelBody::Matmul(body) = &mm.body else { unreachable!() };
        let (cog, kg) = (ws[0] / groups, ws[1] * ws[2] * ws[3]);
        assert_eq!((body.batch, body.m, body.k), (if direct { xs[0] } else { groups }, cog, kg), "{ctx}");
    }
}

#[test]
fn conv_matmul_reads_inlined_pads_and_half_types() {
    let forced = TestModel::convs(Convs::Matmuls);
    // A reflect pad in front of the conv is index arithmetic inside the im2col gather.
    let g = graph2(DType::F32, &[2, 3, 6, 5], &[4, 3, 3, 3], |x, w| {
        x.pad(&[(0, 0), (0, 0), (2, 1), (1, 1)], PadMode::Reflect).conv2d(w, None, [1, 1], [0; 4], [1, 1], 1)
    });
    let p = check_with(
        &g,
        &[rnd(DType::F32, &[2, 3, 6, 5], 1), rnd(DType::F32, &[4, 3, 3, 3], 2)],
        &Capabilities::host(),
        &forced,
    );
    assert_eq!(p.kernels.len(), 2, "{}", print_program(&p));
    assert!(p.kernels[0].ops.contains(&"pad".to_string()), "{}", print_program(&p));
    // A computed 1x1 conv input is materialized, then read through strides.
    let g =
        graph2(DType::F32, &[2, 3, 4, 4], &[5, 3, 1, 1], |x, w| x.relu().conv2d(w, None, [1, 1], [0; 4], [1, 1], 1));
    let p = check_with(
        &g,
        &[rnd(DType::F32, &[2, 3, 4, 4], 3), rnd(DType::F32, &[5, 3, 1, 1], 4)],
        &Capabilities::host(),
        &forced,
    );
    assert_eq!(p.kernels.len(), 2, "{}", print_program(&p));
    assert!(matches!(p.kernels[1].body, KernelBody::Matmul(_)));
    // f16 and bf16 convs accumulate in f32 in the matmul as in the window kernel.
    for dt in [DType::F16, DType::BF16] {
        let g = graph2(dt, &[2, 3, 5, 5], &[4, 3, 3, 3], |x, w| x.conv2d(w, None, [2, 2], [1; 4], [1, 1], 1).relu());
        let p = check_with(&g, &[rnd(dt, &[2, 3, 5, 5], 5), rnd(dt, &[4, 3, 3, 3], 6)], &Capabilities::host(), &forced);
        assert!(matches!(p.kernels[1].body, KernelBody::Matmul(_)), "{}", print_program(&p));
    }
}

#[test]
fn conv_falls_back_to_a_window_kernel_over_the_binding_limit() {
    // Bindings of 1 KiB: the weight and the im2col buffer take 3 windows each, so the matmul would
    // bind 7 buffers > 6; the window kernel binds 5.
    let caps = Capabilities { max_bindings: 6, max_binding_bytes: 1024, ..Capabilities::host() };
    let g =
        graph2(DType::F32, &[1, 16, 4, 4], &[16, 16, 1, 3], |x, w| x.conv2d(w, None, [1, 1], [0, 1, 0, 1], [1, 1], 1));
    let ins = [rnd(DType::F32, &[1, 16, 4, 4], 1), rnd(DType::F32, &[16, 16, 1, 3], 2)];
    let p = check_with(&g, &ins, &caps, &window_bindings());
    assert_eq!(p.kernels.len(), 1, "{}", print_program(&p));
    assert!(matches!(p.kernels[0].body, KernelBody::Reduce(_)), "{}", print_program(&p));
    let lowering: Vec<&str> =
        p.decisions.iter().filter(|d| d.reason.starts_with("conv lowering")).map(|d| d.reason.as_str()).collect();
    assert_eq!(lowering, ["conv lowering: window (as a matmul it would bind 7 buffers > 6)"]);
    // With room for 7 bindings it is a matmul, and so it is under the default cost model, which
    // counts one binding per argument.
    let p = check_with(&g, &ins, &caps, &ScheduleOptions::default());
    assert!(matches!(p.kernels[1].body, KernelBody::Matmul(_)), "{}", print_program(&p));
    let caps = Capabilities { max_bindings: 7, ..caps };
    let p = check_with(&g, &ins, &caps, &window_bindings());
    assert!(matches!(p.kernels[1].body, KernelBody::Matmul(_)), "{}", print_program(&p));
}

#[test]
fn default_cost_model_lowers_wide_convs() {
    // 16 -> 32 channels, 3x3: im2col and a matmul with the batch norm and relu fused; the same
    // conv with 4 output channels stays a window kernel.
    for (oc, want) in [(32, 2), (4, 1)] {
        let g = Graph::new();
        let x = g.input("x", DType::F32, [2, 16, 6, 7]);
        let w = g.input("w", DType::F32, [oc, 16, 3, 3]);
        let s = g.input("s", DType::F32, [oc]);
        let b = g.input("b", DType::F32, [oc]);
        let mu = g.input("mu", DType::F32, [oc]);
        let var = g.input("var", DType::F32, [oc]);
        let y = x.conv2d(&w, None, [1, 1], [1; 4], [1, 1], 1).batch_norm(&s, &b, &mu, &var, 1e-5).relu();
        g.output(&y);
        let ins = [
            rnd(DType::F32, &[2, 16, 6, 7], 1),
            rnd(DType::F32, &[oc, 16, 3, 3], 2),
            rnd(DType::F32, &[oc], 3),
            rnd(DType::F32, &[oc], 4),
            rnd(DType::F32, &[oc], 5),
            HostTensor::random(DType::F32, vec![oc], 6, 0.5, 2.0),
        ];
        let p = check(&g.build().expect("build"), &ins);
        assert_eq!(p.kernels.len(), want, "{}", print_program(&p));
        let last = p.kernels.last().expect("kernel");
        assert_eq!(last.ops, ["conv2d", "batch_norm", "relu"].map(String::from), "{}", print_program(&p));
        assert_eq!(matches!(last.body, KernelBody::Matmul(_)), want == 2);
    }
}

#[test]
fn pool2d_variants() {
    for (i, (kind, ceil, cip, pad)) in [
        (crate::ir::PoolKind::Max, false, false, [1, 1, 1, 1]),
        (crate::ir::PoolKind::Max, true, false, [0, 1, 0, 1]),
        (crate::ir::PoolKind::Avg, false, false, [1, 1, 1, 1]),
        (crate::ir::PoolKind::Avg, false, true, [1, 0, 1, 2]),
        (crate::ir::PoolKind::Avg, true, true, [1, 1, 1, 1]),
        (crate::ir::PoolKind::Avg, true, false, [0, 0, 0, 0]),
    ]
    .into_iter()
    .enumerate()
    {
        let g = graph1(DType::F32, &[2, 3, 7, 8], |x| {
            let window = crate::ir::Window2d { kernel: [3, 2], stride: [2, 2], padding: pad, dilation: [1, 1] };
            x.apply(crate::ir::Op::Pool2d { kind, window, ceil_mode: ceil, count_include_pad: cip }, &[]) * 2.0
        });
        check(&g, &[rnd(DType::F32, &[2, 3, 7, 8], i as u64)]);
    }
    let g = graph1(DType::I32, &[1, 2, 5, 5], |x| x.max_pool2d([2, 2], [1, 1], [1, 1, 1, 1]));
    check(&g, &[rnd(DType::I32, &[1, 2, 5, 5], 9)]);
}

/// A window kernel reading a computed node through a transpose (ConvNeXt's LayerNorm2d: the
/// norm over channels in `[N, H, W, C]`, permuted back to NCHW, then a depthwise convolution or
/// a pooling): the node is stored in the order the window reads it, so the window's loads along
/// a row are contiguous, and the program computes the reference. A node with another user (here
/// also a graph output) keeps its layout.
#[test]
fn window_inputs_read_through_a_transpose_are_stored_in_that_order() {
    let (n, c, h, w) = (2, 8, 9, 11);
    for (i, pool) in [false, true].into_iter().enumerate() {
        for also_output in [false, true] {
            let g = Graph::new();
            let x = g.input("x", DType::F32, [n, c, h, w]);
            let wt = g.input("w", DType::F32, [c, 1, 7, 7]);
            let (gamma, beta) = (g.input("g", DType::F32, [c]), g.input("b", DType::F32, [c]));
            let nhwc = (x.permute(&[0, 2, 3, 1]) * 1.5).layer_norm(&gamma, &beta, 1e-6);
            let nchw = nhwc.permute(&[0, 3, 1, 2]);
            let y = if pool {
                nchw.max_pool2d([3, 3], [1, 1], [1, 1, 1, 1])
            } else {
                nchw.conv2d(&wt, None, [1, 1], [3, 3, 3, 3], [1, 1], c)
            };
            g.output(&(&y + &nchw));
            if also_output {
                g.output(&nhwc);
            }
            let ir = g.build().unwrap();
            let inputs = [
                rnd(DType::F32, &[n, c, h, w], 10 + i as u64),
                rnd(DType::F32, &[c, 1, 7, 7], 20),
                rnd(DType::F32, &[c], 21),
                rnd(DType::F32, &[c], 22),
            ];
            let p = check(&ir, &inputs);
            let stored = p.decisions.iter().filter(|d| d.reason.contains("stored in the order")).count();
            assert_eq!(stored, usize::from(!also_output), "pool {pool}, output {also_output}\n{}", print_program(&p));
            if also_output {
                continue;
            }
            // The window kernel reads its input at unit stride along the output's last axis: its
            // loads of consecutive rows are consecutive elements.
            let win = p
                .kernels
                .iter()
                .find(|k| matches!(&k.body, KernelBody::Reduce(r) if r.len == if pool { 9 } else { 49 }))
                .unwrap_or_else(|| panic!("no window kernel\n{}", print_program(&p)));
            let text = crate::kernel::print::print_kernel(win);
            assert!(!text.contains(&format!("* {c}")), "the window reads across channels\n{text}");
        }
    }
}

/// ConvNeXt (torchvision's stem, `LayerNorm2d` and `CNBlock`s, then the head's average pool):
/// the activations between the permutes to and from channels-last are stored channels-last
/// (`schedule::channels_last`), so no kernel of a block reads or writes across the channels: the
/// depthwise window reads and writes channel-contiguous, the LayerNorm reads whole rows and the
/// residual kernel reads the second linear layer's output where it stores. Computes the reference.
#[test]
fn convnext_blocks_keep_their_activations_channels_last() {
    let (n, c, hw) = (2, 16, 5);
    let g = Graph::new();
    let f = |name: &str, shape: &[usize]| g.input(name, DType::F32, shape.to_vec());
    let img = f("img", &[n, 3, 4 * hw, 4 * hw]);
    let (sw, sb) = (f("sw", &[c, 3, 4, 4]), f("sb", &[c]));
    let (g0, b0) = (f("g0", &[c]), f("b0", &[c]));
    // The depthwise weights are constants (stored tap-major), the others inputs.
    let dw = g.constant(rnd(DType::F32, &[c, 1, 7, 7], 60));
    let (dwb, lg, lb) = (f("dwb", &[c]), f("lg", &[c]), f("lb", &[c]));
    let (w1, b1, w2, b2) = (f("w1", &[c, 4 * c]), f("b1", &[4 * c]), f("w2", &[4 * c, c]), f("b2", &[c]));
    let ls = f("ls", &[c, 1, 1]);
    let stem = img.conv2d(&sw, Some(&sb), [4, 4], [0; 4], [1, 1], 1);
    let mut x = stem.permute(&[0, 2, 3, 1]).layer_norm(&g0, &b0, 1e-6).permute(&[0, 3, 1, 2]);
    for _ in 0..2 {
        let y = x.conv2d(&dw, Some(&dwb), [1, 1], [3, 3, 3, 3], [1, 1], c);
        let h = (y.permute(&[0, 2, 3, 1]).layer_norm(&lg, &lb, 1e-6).matmul(&w1) + &b1).gelu();
        let h = h.matmul(&w2) + &b2;
        x = &(&ls * &h.permute(&[0, 3, 1, 2])) + &x;
    }
    g.output(&x.mean(&[2, 3], true));
    let ir = g.build().expect("build");
    let shapes: [&[usize]; 13] = [
        &[n, 3, 4 * hw, 4 * hw],
        &[c, 3, 4, 4],
        &[c],
        &[c],
        &[c],
        &[c],
        &[c],
        &[c],
        &[c, 4 * c],
        &[4 * c],
        &[4 * c, c],
        &[c],
        &[c, 1, 1],
    ];
    let inputs: Vec<HostTensor> = shapes.iter().enumerate().map(|(i, s)| rnd(DType::F32, s, 40 + i as u64)).collect();
    let p = check_with(&ir, &inputs, &Capabilities::host(), &TestModel::convs(Convs::ThinWindows));
    let region = p.decisions.iter().find(|d| d.reason.contains("stored channels-last (NHWC) between permutes"));
    assert!(region.is_some(), "no channels-last region\n{}", print_program(&p));
    let tap_major = p.decisions.iter().any(|d| d.reason.contains("depthwise weights stored tap-major"));
    assert!(tap_major, "the depthwise weights keep [C, 1, 7, 7]\n{}", print_program(&p));
    // Every kernel of the blocks reads its full-size operands at unit stride along its walk: no
    // load steps over the channels' plane (`* 25`, H * W) or over the channels (`* 16`) except the
    // products' own operands and the head's pool (which sums a plane per row).
    for k in &p.kernels {
        let text = crate::kernel::print::print_kernel(k);
        if matches!(k.body, KernelBody::Matmul(_)) || text.contains("len=25 ") {
            continue;
        }
        assert!(!text.contains("* 25 +") && !text.contains("red * 25"), "{} reads across channels\n{text}", k.name);
        assert!(!text.contains("% 16 * 49"), "{} reads its weights 49 apart across threads\n{text}", k.name);
    }
}

/// A thin convolution kept as a window kernel whose taps are rows stored whole (squeeze-and-
/// excitation's reduce: 1x1 on 1x1 images, fewer output channels than a matmul tile wants) takes
/// a workgroup per output instead of a thread per output, and computes the reference; rows of
/// 10 taps and a 3x3 window keep a thread per output.
#[test]
fn window_kernels_over_rows_stored_whole_take_a_workgroup_per_row() {
    let cases = [
        ([8, 240, 1, 1], [10, 240, 1, 1], [0; 4], true),
        // Rows of 10 taps: short enough for a thread each.
        ([8, 10, 1, 1], [240, 10, 1, 1], [0; 4], false),
        ([2, 3, 9, 9], [4, 3, 3, 3], [1; 4], false),
    ];
    for (xs, ws, pad, whole) in cases {
        let (ir, ins, ctx) = conv_epilogue(0, (xs, ws, [1, 1], pad, [1, 1], 1, true));
        let p = check_with(&ir, &ins, &Capabilities::host(), &TestModel::convs(Convs::Windows));
        let k = p.kernels.iter().find(|k| k.ops.iter().any(|o| o == "conv2d")).expect("conv kernel");
        let KernelBody::Reduce(r) = &k.body else { panic!("{ctx}: not a window kernel\n{}", print_program(&p)) };
        let want = if whole { ReduceStrategy::Persistent } else { ReduceStrategy::ThreadPerRow };
        assert_eq!(r.strategy, want, "{ctx}\n{}", print_program(&p));
    }
}
