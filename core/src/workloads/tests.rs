//! The workloads' tests: names and figures against the anchor script, graphs, inputs, the
//! references and the CPU interpreter against them.

use super::*;

#[test]
fn names_match_the_anchor_script() {
    // The anchor script's workloads in its order, then sinter's own (no torch anchor).
    assert_eq!(
        names(),
        [
            "add_relu_mul_10M_f32",
            "cos_16M_f32",
            "cos_cos_16M_f32",
            "matmul_softmax_100_f32",
            "matmul_softmax_4096_bf16",
            "softmax_8192x8192_f32",
            "layernorm_gelu_8192x4096_f32",
            "mlp_8192x4096x16384_bf16",
            "matmul_8192_bf16",
            "matmul_4096_f32",
            "pointwise_chain64_1024_f32",
            "attention_b8h16s1024d64_bf16",
            "attention_causal_b8h16s2048d128_bf16",
            "attention_decode_b32h32kv4096d128_bf16",
            "matmul_8192_fp8e4m3",
            "resnet18_b32_f32",
            "sum_64M_f32",
        ]
    );
    assert!(get("nope").is_none());
    assert_eq!(Scale::parse("reduced"), Some(Scale::Reduced));
    assert_eq!(Scale::parse(Scale::Full.name()), Some(Scale::Full));
}

#[test]
fn full_size_figures_match_the_anchor_script() {
    let f = |n: &str| get(n).unwrap();
    let (n10m, m16) = (10_000_000f64, (1u64 << 24) as f64);
    assert_eq!(f("add_relu_mul_10M_f32").min_bytes(Scale::Full), 3.0 * n10m * 4.0);
    assert_eq!(f("cos_16M_f32").min_bytes(Scale::Full), 2.0 * m16 * 4.0);
    assert_eq!(f("cos_cos_16M_f32").min_bytes(Scale::Full), 2.0 * m16 * 4.0);
    assert_eq!(f("matmul_softmax_100_f32").flops(Scale::Full), 2.0 * 100f64.powi(3));
    assert_eq!(f("matmul_softmax_100_f32").min_bytes(Scale::Full), 3.0 * 100.0 * 100.0 * 4.0);
    assert_eq!(f("matmul_softmax_4096_bf16").flops(Scale::Full), 2.0 * 4096f64.powi(3));
    assert_eq!(f("matmul_softmax_4096_bf16").min_bytes(Scale::Full), 3.0 * 4096.0 * 4096.0 * 2.0);
    assert_eq!(f("softmax_8192x8192_f32").min_bytes(Scale::Full), 2.0 * 8192.0 * 8192.0 * 4.0);
    assert_eq!(f("layernorm_gelu_8192x4096_f32").min_bytes(Scale::Full), 2.0 * 8192.0 * 4096.0 * 4.0);
    assert_eq!(f("mlp_8192x4096x16384_bf16").flops(Scale::Full), 4.0 * 8192.0 * 4096.0 * 16384.0);
    assert_eq!(f("matmul_8192_bf16").flops(Scale::Full), 2.0 * 8192f64.powi(3));
    assert_eq!(f("matmul_8192_bf16").min_bytes(Scale::Full), 3.0 * 8192.0 * 8192.0 * 2.0);
    assert_eq!(f("matmul_4096_f32").flops(Scale::Full), 2.0 * 4096f64.powi(3));
    assert_eq!(f("matmul_4096_f32").min_bytes(Scale::Full), 3.0 * 4096.0 * 4096.0 * 4.0);
    assert_eq!(f("pointwise_chain64_1024_f32").min_bytes(Scale::Full), 2.0 * 1024.0 * 4.0);
    assert_eq!(f("attention_b8h16s1024d64_bf16").flops(Scale::Full), 4.0 * 8.0 * 16.0 * 1024.0 * 1024.0 * 64.0);
    assert_eq!(f("attention_b8h16s1024d64_bf16").min_bytes(Scale::Full), 4.0 * 8.0 * 16.0 * 1024.0 * 64.0 * 2.0);
    assert_eq!(f("attention_decode_b32h32kv4096d128_bf16").flops(Scale::Full), 4.0 * 32.0 * 32.0 * 4096.0 * 128.0);
    assert_eq!(
        f("attention_decode_b32h32kv4096d128_bf16").min_bytes(Scale::Full),
        2.0 * 32.0 * 32.0 * 4096.0 * 128.0 * 2.0
    );
    assert_eq!(
        f("attention_causal_b8h16s2048d128_bf16").flops(Scale::Full),
        2.0 * 8.0 * 16.0 * 2048.0 * 2048.0 * 128.0
    );
    assert_eq!(f("resnet18_b32_f32").flops(Scale::Full), 32.0 * 2.0 * 1.82e9);
    assert_eq!(f("matmul_8192_fp8e4m3").flops(Scale::Full), 2.0 * 8192f64.powi(3));
    // Two fp8 operands (1 byte each) and two f32 scales read, a bf16 product (2 bytes) written.
    assert_eq!(f("matmul_8192_fp8e4m3").min_bytes(Scale::Full), 4.0 * 8192.0 * 8192.0 + 8.0);
    let mlp_bytes = (2.0 * 8192.0 * 4096.0 + 2.0 * 16384.0 * 4096.0 + 16384.0 + 4096.0) * 2.0;
    assert_eq!(f("mlp_8192x4096x16384_bf16").min_bytes(Scale::Full), mlp_bytes);
    for w in all() {
        assert!(w.min_bytes(Scale::Full) > 0.0 && w.min_bytes(Scale::Reduced) > 0.0, "{}", w.name);
    }
}

#[test]
fn declared_flops_match_the_graphs() {
    // The matmul/conv FLOPs counted in each full-size graph agree with the declared figure.
    for w in all() {
        let declared = w.flops(Scale::Full);
        if declared == 0.0 {
            continue;
        }
        let mut counted = graph_flops(&w.build(Scale::Full).unwrap());
        if matches!(w.kind, Kind::Attention { causal: true, .. }) {
            // The anchor counts the half of the scores a causal kernel computes.
            counted /= 2.0;
        }
        assert!((counted / declared - 1.0).abs() < 0.01, "{}: counted {counted} vs {declared}", w.name);
    }
}

#[test]
fn every_workload_builds_at_both_scales() {
    for w in all() {
        for scale in [Scale::Full, Scale::Reduced] {
            let g = w.build(scale).unwrap_or_else(|e| panic!("{} {scale:?}: {e}", w.name));
            crate::verify::verify(&g).unwrap();
            assert_eq!(g.outputs.len(), 1);
            let out = g.ty(g.outputs[0].node);
            assert_eq!(out.shape, crate::shape::Shape::new(&w.output_shape(scale)), "{}", w.name);
            assert_eq!(out.dtype, w.dtype());
            let ins = w.inputs(Scale::Reduced, 1);
            let g = w.build(Scale::Reduced).unwrap();
            for (t, &i) in ins.iter().zip(&g.inputs) {
                assert_eq!(crate::shape::Shape::new(&t.shape), g.ty(i).shape);
                assert_eq!(t.dtype(), g.ty(i).dtype);
            }
        }
    }
}

#[test]
fn resnet18_has_torchvision_structure() {
    let w = get("resnet18_b32_f32").unwrap();
    let g = w.build(Scale::Full).unwrap();
    let count = |name: &str| g.nodes.iter().filter(|n| n.op.name() == name).count();
    assert_eq!(count("conv2d"), 20); // 1 stem + 16 in blocks + 3 downsample
    assert_eq!(count("batch_norm"), 20);
    assert_eq!(count("max_pool2d"), 1);
    assert_eq!(count("relu"), 17);
    assert_eq!(g.inputs.len(), 1 + 20 + 20 * 4 + 2);
    // torchvision resnet18 has 11,689,512 parameters (batch-norm running stats excluded).
    let params: usize = g
        .inputs
        .iter()
        .zip(g.input_names())
        .filter(|(_, n)| *n != "x" && !n.contains("running"))
        .map(|(&i, _)| g.ty(i).shape.numel().unwrap())
        .sum();
    assert_eq!(params, 11_689_512);
}

#[test]
fn inputs_are_deterministic_and_scaled() {
    let w = get("mlp_8192x4096x16384_bf16").unwrap();
    let a = w.inputs(Scale::Reduced, 5);
    assert_eq!(a, w.inputs(Scale::Reduced, 5));
    assert_ne!(a, w.inputs(Scale::Reduced, 6));
    let std = |t: &HostTensor| {
        let v = t.to_f64_vec();
        (v.iter().map(|x| x * x).sum::<f64>() / v.len() as f64).sqrt()
    };
    assert!((std(&a[0]) - 1.0).abs() < 0.1, "{}", std(&a[0]));
    assert!((std(&a[1]) - 0.02).abs() < 0.003, "{}", std(&a[1]));
}

#[test]
fn cpu_interpreter_matches_the_references() {
    // Every workload at reduced size, captured and after the pass pipeline, on two seeds.
    for w in all() {
        for seed in [0, 1] {
            let c = w.check_cpu(Scale::Reduced, seed).unwrap_or_else(|e| panic!("{}: {e}", w.name));
            assert!(c.passed(), "{} seed {seed}: {c:?}", w.name);
            assert!(c.nodes_decomposed >= c.nodes_captured || w.name.starts_with("pointwise"));
        }
    }
}

#[test]
fn reference_comparison_detects_small_errors() {
    // One element off by a few tolerances makes the check fail, for each dtype in use.
    for name in ["layernorm_gelu_8192x4096_f32", "attention_b8h16s1024d64_bf16"] {
        let w = get(name).unwrap();
        let ins = w.inputs(Scale::Reduced, 3);
        let want = w.reference(Scale::Reduced, &ins).unwrap();
        let got = crate::cpu::run(&w.build(Scale::Reduced).unwrap(), &ins).unwrap();
        let (rtol, atol) = w.tolerance();
        assert!(worst_ratio(&got, &want, (rtol, atol)) <= 1.0);
        let mut v = got[0].to_f64_vec();
        v[7] += 3.0 * (atol + rtol * v[7].abs());
        let bad = HostTensor::from_f64(got[0].dtype(), got[0].shape.clone(), &v);
        assert!(worst_ratio(&[bad], &want, (rtol, atol)) > 1.0, "{name}");
    }
    // Nothing to compare never passes; an infinity of the wrong sign fails whatever the tolerance.
    assert!(worst_ratio(&[], &[], (1.0, 1.0)) > 1.0);
    let t = |v: f32| HostTensor::f32([1], vec![v]).unwrap();
    assert!(worst_ratio(&[t(f32::NEG_INFINITY)], &[t(f32::INFINITY)], (1e9, 1e9)) > 1.0);
}

#[test]
fn reference_erf_is_accurate() {
    // Values from the closed-form tables (erf(1), erf(0.5), erf(2)).
    assert!((erf(1.0) - 0.842_700_792_949_714_9).abs() < 1e-15);
    assert!((erf(0.5) - 0.520_499_877_813_046_5).abs() < 1e-15);
    assert!((erf(-2.0) + 0.995_322_265_018_952_7).abs() < 1e-15);
    assert_eq!(erf(7.0), 1.0);
    assert_eq!(erf(0.0), 0.0);
}

#[test]
fn reference_rejects_wrong_inputs() {
    let w = get("softmax_8192x8192_f32").unwrap();
    assert!(matches!(w.reference(Scale::Reduced, &[]), Err(Error::Input(_))));
    let bad = HostTensor::random(DType::F32, vec![3, 3], 0, 0.0, 1.0);
    assert!(matches!(w.reference(Scale::Reduced, &[bad]), Err(Error::Input(_))));
}

#[test]
fn reference_softmax_and_matmul_by_hand() {
    let s = ref_softmax_rows(&[0.0, 0.0, 1.0f64.ln() + 2.0f64.ln()], 3);
    assert!((s[0] - 0.25).abs() < 1e-15 && (s[2] - 0.5).abs() < 1e-15);
    // [[1,2],[3,4]] @ [[5,6],[7,8]] = [[19,22],[43,50]]
    assert_eq!(ref_matmul(&[1., 2., 3., 4.], &[5., 6., 7., 8.], 1, 2, 2, 2, false), [19., 22., 43., 50.]);
    assert_eq!(ref_matmul(&[1., 2., 3., 4.], &[5., 7., 6., 8.], 1, 2, 2, 2, true), [19., 22., 43., 50.]);
}
