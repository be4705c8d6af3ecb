//! Implicit GEMM convolutions (`ConvPlan::Implicit`): the im2col matrix read by the matmul's
//! loader ([`crate::kernel::Im2col`]), run by the kernel-IR interpreter against the CPU reference
//! at awkward shapes, with epilogues; the decision recorded; TF32 marked per PyTorch's defaults.

use super::conv::{ConvCase, conv_epilogue};
use super::*;
use crate::kernel::MatmulBody;

/// The matmul body of the last kernel of `p`.
fn last_matmul(p: &Program) -> &MatmulBody {
    match &p.kernels.last().expect("a kernel").body {
        KernelBody::Matmul(m) => m,
        _ => panic!("the last kernel is no matmul\n{}", print_program(p)),
    }
}

#[test]
fn implicit_convs_at_awkward_shapes() {
    let cases: &[ConvCase] = &[
        // Batch 1 and 3; channels 1, 3, 7; 3x3 pad 1 at extents 1 and 7.
        ([1, 1, 1, 1], [1, 1, 3, 3], [1, 1], [1; 4], [1, 1], 1, true),
        ([3, 3, 7, 7], [7, 3, 3, 3], [1, 1], [1; 4], [1, 1], 1, false),
        ([1, 7, 6, 5], [5, 7, 3, 3], [1, 1], [1; 4], [1, 1], 1, true),
        // Stride 2 with padding; a strided 1x1 (ResNet's downsample).
        ([3, 5, 7, 6], [9, 5, 3, 3], [2, 2], [1; 4], [1, 1], 1, true),
        ([2, 5, 7, 7], [3, 5, 1, 1], [2, 2], [0; 4], [1, 1], 1, true),
        // Dilation 2, asymmetric padding, a rectangular window and stride.
        ([2, 3, 9, 8], [4, 3, 3, 2], [1, 2], [2, 0, 1, 3], [2, 2], 1, true),
        // The 7x7 stride-2 pad-3 stem at a small size.
        ([2, 3, 15, 13], [8, 3, 7, 7], [2, 2], [3; 4], [1, 1], 1, true),
        // Groups: the batch of the product, each reading its channels.
        ([2, 4, 9, 8], [6, 2, 3, 2], [2, 1], [0, 2, 1, 0], [1, 2], 2, false),
        ([1, 6, 5, 5], [6, 1, 3, 3], [1, 1], [1; 4], [1, 1], 6, true),
        ([3, 4, 3, 3], [4, 2, 1, 1], [1, 1], [0; 4], [1, 1], 2, true),
        // Padding larger than the window reach: whole output rows of padding.
        ([1, 2, 3, 3], [3, 2, 2, 2], [1, 1], [3, 3, 3, 3], [1, 1], 1, true),
    ];
    let implicit = TestModel::convs(Convs::Implicit);
    for (i, &c @ (_, ws, stride, pad, dil, groups, _)) in cases.iter().enumerate() {
        let (ir, ins, ctx) = conv_epilogue(i, c);
        let p = check_with(&ir, &ins, &Capabilities::host(), &implicit);
        let direct = groups == 1 && ws[2..] == [1, 1] && stride == [1, 1] && pad == [0; 4];
        assert!(!direct, "{ctx}: a direct 1x1 conv needs no im2col");
        // One kernel: the matmul reads the input through the im2col view, no gather, no buffer.
        assert_eq!(p.kernels.len(), 1, "{ctx}\n{}", print_program(&p));
        let mm = last_matmul(&p);
        let view = mm.b.im2col.as_ref().unwrap_or_else(|| panic!("{ctx}: B is not implicit"));
        assert_eq!((mm.batch, mm.m, mm.k), (groups, ws[0] / groups, ws[1] * ws[2] * ws[3]), "{ctx}");
        assert_eq!((view.channels, view.kernel, view.stride, view.dilation), (ws[1], [ws[2], ws[3]], stride, dil));
        assert_eq!(view.pad, [pad[0], pad[1]], "{ctx}");
        assert!(mm.a.im2col.is_none());
        // TF32 per PyTorch's defaults (convolutions), recorded; the interpreter stays exact.
        assert!(mm.tf32, "{ctx}");
        assert!(p.decisions.iter().any(|d| d.reason == "conv lowering: implicit GEMM: forced"), "{ctx}");
        assert!(p.decisions.iter().any(|d| d.reason.starts_with("precision: conv") && d.reason.contains("TF32")));
        assert_eq!(
            p.kernels[0].ops,
            ["conv2d", "mul", "reshape", "add", "relu"].map(String::from),
            "{ctx}\n{}",
            print_program(&p)
        );
    }
}

#[test]
fn implicit_conv_inputs_through_views_and_copies() {
    let implicit = TestModel::convs(Convs::Implicit);
    // A computed input is materialized, then read through the view.
    let g =
        graph2(DType::F32, &[2, 3, 6, 5], &[4, 3, 3, 3], |x, w| x.relu().conv2d(w, None, [1, 1], [1; 4], [1, 1], 1));
    let ins = [rnd(DType::F32, &[2, 3, 6, 5], 1), rnd(DType::F32, &[4, 3, 3, 3], 2)];
    let p = check_with(&g, &ins, &Capabilities::host(), &implicit);
    assert_eq!(p.kernels.len(), 2, "{}", print_program(&p));
    assert!(last_matmul(&p).b.im2col.is_some());
    // A permuted input (NHWC data viewed as NCHW) is read through its strides, no copy.
    let g = graph2(DType::F32, &[2, 6, 5, 3], &[4, 3, 3, 3], |x, w| {
        x.permute(&[0, 3, 1, 2]).conv2d(w, None, [2, 1], [1, 0, 1, 2], [1, 1], 1)
    });
    let ins = [rnd(DType::F32, &[2, 6, 5, 3], 3), rnd(DType::F32, &[4, 3, 3, 3], 4)];
    let p = check_with(&g, &ins, &Capabilities::host(), &implicit);
    assert_eq!(p.kernels.len(), 1, "{}", print_program(&p));
    let view = last_matmul(&p).b.im2col.clone().expect("implicit");
    assert_eq!((view.s_img, view.s_chan, view.s_y, view.s_x), (90, 1, 15, 3));
    // A reflect pad is not a view: materialized first, then read through the view.
    let g = graph2(DType::F32, &[1, 3, 6, 5], &[4, 3, 3, 3], |x, w| {
        x.pad(&[(0, 0), (0, 0), (2, 1), (1, 1)], PadMode::Reflect).conv2d(w, None, [1, 1], [0; 4], [1, 1], 1)
    });
    let ins = [rnd(DType::F32, &[1, 3, 6, 5], 5), rnd(DType::F32, &[4, 3, 3, 3], 6)];
    let p = check_with(&g, &ins, &Capabilities::host(), &implicit);
    assert_eq!(p.kernels.len(), 2, "{}", print_program(&p));
    assert!(p.kernels[0].ops.contains(&"pad".to_string()), "{}", print_program(&p));
    // A reshape that no strides express ([N, C*H*W] -> NCHW of another split) is copied first.
    let g = graph2(DType::F32, &[2, 4, 15], &[4, 3, 3, 3], |x, w| {
        x.reshape([2, 3, 5, 4]).conv2d(w, None, [1, 1], [1; 4], [1, 1], 1)
    });
    let ins = [rnd(DType::F32, &[2, 4, 15], 7), rnd(DType::F32, &[4, 3, 3, 3], 8)];
    let p = check_with(&g, &ins, &Capabilities::host(), &implicit);
    assert!(last_matmul(&p).b.im2col.is_some(), "{}", print_program(&p));
    // f16 and bf16 accumulate in f32; TF32 only ever marks f32 products.
    for dt in [DType::F16, DType::BF16] {
        let g = graph2(dt, &[2, 3, 5, 5], &[4, 3, 3, 3], |x, w| x.conv2d(w, None, [2, 2], [1; 4], [1, 1], 1).relu());
        let p =
            check_with(&g, &[rnd(dt, &[2, 3, 5, 5], 5), rnd(dt, &[4, 3, 3, 3], 6)], &Capabilities::host(), &implicit);
        let mm = last_matmul(&p);
        assert!(mm.b.im2col.is_some() && !mm.tf32, "{}", print_program(&p));
    }
}

#[test]
fn tf32_follows_the_setting_per_contraction() {
    // A conv then a matmul: PyTorch's defaults mark the conv only; `on` both; `off` neither.
    let g = Graph::new();
    let x = g.input("x", DType::F32, [2, 3, 5, 5]);
    let w = g.input("w", DType::F32, [4, 3, 3, 3]);
    let m = g.input("m", DType::F32, [5, 6]);
    g.output(&x.conv2d(&w, None, [1, 1], [1; 4], [1, 1], 1).relu().matmul(&m));
    let ir = g.build().expect("build");
    let ins = [rnd(DType::F32, &[2, 3, 5, 5], 1), rnd(DType::F32, &[4, 3, 3, 3], 2), rnd(DType::F32, &[5, 6], 3)];
    for (tf32, want) in [(AllowTf32::CONV, [true, false]), (AllowTf32::ON, [true, true]), (AllowTf32::OFF, [false; 2])]
    {
        let opts = ScheduleOptions { tf32, ..TestModel::convs(Convs::Implicit) };
        let p = check_with(&ir, &ins, &Capabilities::host(), &opts);
        let marks: Vec<bool> = p
            .kernels
            .iter()
            .filter_map(|k| match &k.body {
                KernelBody::Matmul(m) => Some(m.tf32),
                _ => None,
            })
            .collect();
        assert_eq!(marks, want, "tf32 {tf32}\n{}", print_program(&p));
        let recorded = p.decisions.iter().filter(|d| d.reason.starts_with("precision:")).count();
        assert_eq!(recorded, want.iter().filter(|&&t| t).count(), "tf32 {tf32}");
    }
    // The settings' names round-trip (the CLI's --tf32).
    for t in [AllowTf32::OFF, AllowTf32::ON, AllowTf32::CONV, AllowTf32 { matmul: true, conv: false }] {
        assert_eq!(t.to_string().parse::<AllowTf32>(), Ok(t));
    }
    assert!("fast".parse::<AllowTf32>().unwrap_err().contains("on, off, conv or matmul"));
    assert_eq!(AllowTf32::default(), AllowTf32::CONV);
}

#[test]
fn implicit_is_refused_by_name_where_the_model_keeps_the_gather() {
    // The default model (and every model that does not opt in) keeps the gather and says why.
    let g = graph2(DType::F32, &[2, 16, 6, 7], &[32, 16, 3, 3], |x, w| x.conv2d(w, None, [1, 1], [1; 4], [1, 1], 1));
    let ins = [rnd(DType::F32, &[2, 16, 6, 7], 1), rnd(DType::F32, &[32, 16, 3, 3], 2)];
    let p = check_with(&g, &ins, &Capabilities::host(), &ScheduleOptions::default());
    assert_eq!(p.kernels.len(), 2, "{}", print_program(&p));
    assert!(last_matmul(&p).b.im2col.is_none());
    let d = p.decisions.iter().find(|d| d.reason.starts_with("conv lowering")).expect("decision");
    assert!(
        d.reason.contains("after an im2col gather") && d.reason.ends_with("keeps the im2col gather"),
        "{}",
        d.reason
    );
}

#[test]
fn validate_refuses_broken_implicit_operands() {
    let implicit = TestModel::convs(Convs::Implicit);
    let g = graph2(DType::F32, &[2, 3, 6, 5], &[4, 3, 3, 3], |x, w| x.conv2d(w, None, [1, 1], [1; 4], [1, 1], 1));
    let ir = crate::passes::optimize(&g).expect("passes");
    let p = schedule(&ir, &Capabilities::host(), &implicit).expect("schedule");
    validate(&p).expect("valid");
    let edit = |f: &dyn Fn(&mut MatmulBody)| {
        let mut q = p.clone();
        let KernelBody::Matmul(m) = &mut q.kernels[0].body else { panic!("no matmul") };
        f(m);
        validate(&q).expect_err("invalid").to_string()
    };
    assert!(edit(&|m| m.a.im2col = m.b.im2col.clone()).contains("B only"));
    assert!(edit(&|m| m.b.im2col.as_mut().expect("view").s_img += 1).contains("reads past"));
    assert!(edit(&|m| m.b.im2col.as_mut().expect("view").channels = 2).contains("taps per column"));
    assert!(edit(&|m| m.b.s_col = 1).contains("zero row and column"));
    assert!(edit(&|m| m.b.im2col.as_mut().expect("view").stride = [0, 1]).contains("zero extent"));
    let e = edit(&|m| m.in_dtype = DType::F16);
    assert!(e.contains("must be read with dtype f16"), "{e}");
    let mut q = p.clone();
    let KernelBody::Matmul(m) = &mut q.kernels[0].body else { panic!("no matmul") };
    m.tf32 = true;
    m.acc_dtype = DType::F64;
    assert!(validate(&q).expect_err("invalid").to_string().contains("tf32 set on"));
}
