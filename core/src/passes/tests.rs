//! Snapshot tests of the pipeline on small graphs, unit tests of each pass, and differential tests:
//! the CPU reference gives the same values before and after decomposition.

use super::*;
use crate::dtype::DType;
use crate::ir::{Graph as IrGraph, Op};
use crate::shape::{Dim, Shape};
use crate::tensor::HostTensor;
use crate::text::print;
use crate::trace::{Graph, Tensor};
use std::collections::BTreeMap;

/// The captured graph and the graph after each pass of the pipeline.
fn stages(g: &IrGraph) -> String {
    let mut s = format!("== captured\n{}", print(g));
    let mut prev = s.clone();
    for (name, step) in run_pipeline(g).unwrap() {
        let text = print(&step);
        if prev.ends_with(&text) {
            s.push_str(&format!("== after {name}: unchanged\n"));
        } else {
            s.push_str(&format!("== after {name}\n{text}"));
        }
        prev = text;
    }
    s
}

fn softmax_graph() -> IrGraph {
    let g = Graph::new();
    let x = g.input("x", DType::F32, [4, 8]);
    g.output(&x.softmax(-1));
    g.build().unwrap()
}

fn log_softmax_graph() -> IrGraph {
    let g = Graph::new();
    let x = g.input("x", DType::F32, [4, 8]);
    g.output(&x.log_softmax(1));
    g.build().unwrap()
}

fn layer_norm_gelu_graph(dtype: DType) -> IrGraph {
    let g = Graph::new();
    let x = g.input("x", dtype, [4, 8]);
    let w = g.input("w", dtype, [8]);
    let b = g.input("b", dtype, [8]);
    g.output(&x.layer_norm(&w, &b, 1e-5).gelu());
    g.build().unwrap()
}

fn batch_norm_graph(dtype: DType) -> IrGraph {
    let g = Graph::new();
    let x = g.input("x", dtype, [2, 3, 4, 5]);
    let p: Vec<Tensor> = ["scale", "bias", "mean", "var"].iter().map(|n| g.input(n, dtype, [3])).collect();
    g.output(&x.batch_norm(&p[0], &p[1], &p[2], &p[3], 1e-5));
    g.build().unwrap()
}

fn attention_graph(dtype: DType, mask: Option<DType>, causal: bool) -> IrGraph {
    let g = Graph::new();
    let q = g.input("q", dtype, [1, 2, 5, 8]);
    let k = g.input("k", dtype, [1, 2, 6, 8]);
    let v = g.input("v", dtype, [1, 2, 6, 8]);
    let m = mask.map(|d| g.input("mask", d, [5, 6]));
    g.output(&q.attention(&k, &v, m.as_ref(), None, causal));
    g.build().unwrap()
}

fn silu_hardswish_graph() -> IrGraph {
    let g = Graph::new();
    let x = g.input("x", DType::F32, [16]);
    g.output_named("silu", &x.silu());
    g.output_named("hardswish", &x.hardswish());
    g.build().unwrap()
}

#[test]
fn snapshot_softmax() {
    insta::assert_snapshot!(stages(&softmax_graph()));
}

#[test]
fn snapshot_log_softmax() {
    insta::assert_snapshot!(stages(&log_softmax_graph()));
}

#[test]
fn snapshot_layer_norm_gelu() {
    insta::assert_snapshot!(stages(&layer_norm_gelu_graph(DType::F32)));
}

#[test]
fn snapshot_batch_norm() {
    insta::assert_snapshot!(stages(&batch_norm_graph(DType::F32)));
}

#[test]
fn snapshot_attention_mask() {
    insta::assert_snapshot!(stages(&attention_graph(DType::F32, Some(DType::Bool), false)));
}

#[test]
fn snapshot_attention_causal_float_mask() {
    insta::assert_snapshot!(stages(&attention_graph(DType::F32, Some(DType::F32), true)));
}

#[test]
fn snapshot_attention_bf16() {
    // bf16: the matmuls stay bf16, the softmax runs in f32 between two casts.
    insta::assert_snapshot!(stages(&attention_graph(DType::BF16, None, false)));
}

#[test]
fn snapshot_layer_norm_gelu_bf16() {
    // bf16: each composite computes in f32; the cast back to bf16 between them stays (it rounds).
    insta::assert_snapshot!(stages(&layer_norm_gelu_graph(DType::BF16)));
}

#[test]
fn snapshot_silu_hardswish() {
    insta::assert_snapshot!(stages(&silu_hardswish_graph()));
}

#[test]
fn pipeline_names_and_order() {
    let names: Vec<&str> = pipeline().iter().map(|p| p.name).collect();
    assert_eq!(names, ["decompose", "algebraic", "constant_fold", "cse", "dce"]);
    let steps = run_pipeline(&softmax_graph()).unwrap();
    assert_eq!(steps.iter().map(|s| s.0).collect::<Vec<_>>(), names);
}

#[test]
fn decompose_leaves_no_composites_and_keeps_origins() {
    let graphs = [
        softmax_graph(),
        log_softmax_graph(),
        layer_norm_gelu_graph(DType::BF16),
        batch_norm_graph(DType::F32),
        attention_graph(DType::BF16, Some(DType::Bool), true),
        silu_hardswish_graph(),
    ];
    for g in &graphs {
        let d = decompose(g).unwrap();
        assert!(d.nodes.iter().all(|n| !n.op.is_composite()), "{}", print(&d));
        // Every node's origin names a node of the captured graph with that op name.
        for n in &d.nodes {
            let o = &g.nodes[n.origin.node as usize];
            assert_eq!(&*n.origin.op, o.op.name());
        }
        // Constants are in the computation dtype: the graph's, or f32 for bf16 graphs.
        let dt = g.ty(g.outputs[0].node).dtype;
        let compute = if dt == DType::BF16 { DType::F32 } else { dt };
        for n in &d.nodes {
            if let Op::Constant(t) = &n.op {
                assert!(t.dtype() == compute || t.dtype() == DType::Bool, "constant {} in a {dt} graph", t.dtype());
            }
        }
        // Every output keeps its type.
        for (a, b) in g.outputs.iter().zip(&d.outputs) {
            assert_eq!(g.ty(a.node), d.ty(b.node));
        }
    }
}

#[test]
fn decompose_mean_needs_static_extents() {
    let g = Graph::new();
    let x = g.input("x", DType::F32, Shape(vec![Dim::sym("n"), Dim::Static(3)]));
    g.output(&x.mean(&[0], false));
    let ir = g.build().unwrap();
    assert!(matches!(decompose(&ir), Err(crate::Error::Unsupported(_))));
    // After specialization it decomposes into sum * (1/5).
    let s = specialize(&ir, &BTreeMap::from([("n".to_string(), 5)])).unwrap();
    let d = decompose(&s).unwrap();
    let text = print(&d);
    assert!(text.contains("reduce_sum(%0, axes=[0], keepdim=false)"), "{text}");
    assert!(text.contains("value=0.2"), "{text}");
}

#[test]
fn specialize_replaces_symbols_everywhere() {
    let g = Graph::new();
    let x = g.input("x", DType::F32, Shape(vec![Dim::sym("b"), Dim::Static(6)]));
    let y = x.reshape(Shape(vec![Dim::sym("b"), Dim::Static(2), Dim::Static(3)]));
    let z = y.expand(Shape(vec![Dim::Static(4), Dim::sym("b"), Dim::Static(2), Dim::Static(3)]));
    g.output(&z);
    let ir = g.build().unwrap();
    let s = specialize(&ir, &BTreeMap::from([("b".to_string(), 7)])).unwrap();
    assert_eq!(s.ty(s.inputs[0]).shape, Shape::new(&[7, 6]));
    assert_eq!(s.ty(s.outputs[0].node).shape, Shape::new(&[4, 7, 2, 3]));
    assert!(s.nodes.iter().all(|n| n.ty.shape.is_static()));
    // Unknown symbols stay symbolic.
    let u = specialize(&ir, &BTreeMap::from([("other".to_string(), 7)])).unwrap();
    assert_eq!(u, ir);
}

#[test]
fn specialize_reports_conflicts() {
    let g = Graph::new();
    let x = g.input("x", DType::F32, Shape(vec![Dim::sym("a")]));
    let y = g.input("y", DType::F32, Shape(vec![Dim::sym("a")]));
    g.output(&(&x + &y));
    let ir = g.build().unwrap();
    // Both inputs share the symbol, so one value always agrees.
    assert!(specialize(&ir, &BTreeMap::from([("a".to_string(), 3)])).is_ok());
    let g = Graph::new();
    let x = g.input("x", DType::F32, Shape(vec![Dim::sym("a")]));
    let y = x.reshape(Shape(vec![Dim::sym("a"), Dim::Static(1)]));
    let z = y.expand(Shape(vec![Dim::sym("a"), Dim::sym("c")]));
    g.output(&z);
    let ir = g.build().unwrap();
    // a = 3 with the reshape target [a, 1] is fine; an expand to [a, c] with c = 2 is fine too.
    assert!(specialize(&ir, &BTreeMap::from([("a".into(), 3), ("c".into(), 2)])).is_ok());
}

#[test]
fn cse_merges_equal_nodes_and_constants() {
    let g = Graph::new();
    let x = g.input("x", DType::F32, [4]);
    let a = x.exp() * 2.0;
    let b = x.exp() * 2.0;
    let z = (&x + 0.0) * (&x + (-0.0));
    g.output(&(&a + &b));
    g.output(&z);
    let ir = g.build().unwrap();
    let c = cse(&ir).unwrap();
    let text = print(&c);
    assert_eq!(text.matches("exp(").count(), 1, "{text}");
    assert_eq!(text.matches("value=2)").count(), 1, "{text}");
    // 0.0 and -0.0 differ in bytes and stay apart.
    assert!(text.contains("value=0)") && text.contains("value=-0)"), "{text}");
    // The merged graph has the same outputs, both from the one exp.
    assert_eq!(c.nodes.len(), ir.nodes.len() - 3);
}

#[test]
fn dce_drops_dead_nodes_and_keeps_inputs() {
    let g = Graph::new();
    let x = g.input("x", DType::F32, [4]);
    let unused = g.input("unused", DType::F32, [4]);
    let _dead = x.sin().cos();
    let _dead2 = unused.exp();
    g.output(&x.relu());
    let ir = g.build().unwrap();
    let d = dce(&ir).unwrap();
    assert_eq!(d.inputs.len(), 2);
    assert_eq!(d.input_names(), ["x", "unused"]);
    assert_eq!(d.nodes.len(), 3, "{}", print(&d));
    assert!(matches!(d.node(d.outputs[0].node).op, Op::Unary(crate::ir::UnaryOp::Relu)));
}

#[test]
fn algebraic_removes_identities() {
    let g = Graph::new();
    let x = g.input("x", DType::F32, [2, 3, 4]);
    let a = (&x * 1.0) + 0.0;
    let b = (1.0 * &a) / 1.0 - 0.0;
    let c = b.cast(DType::F32).reshape([6, 4]).reshape([2, 3, 4]);
    let d = c.permute(&[1, 0, 2]).permute(&[1, 0, 2]);
    let e = d.expand([2, 3, 4]);
    g.output(&e);
    let ir = g.build().unwrap();
    let s = dce(&algebraic(&ir).unwrap()).unwrap();
    assert_eq!(s.nodes.len(), 1, "{}", print(&s));
    assert_eq!(s.outputs[0].node, s.inputs[0]);
}

#[test]
fn algebraic_removes_exact_cast_round_trips_only() {
    let g = Graph::new();
    let x = g.input("x", DType::BF16, [4]);
    let y = g.input("y", DType::F32, [4]);
    g.output(&x.cast(DType::F32).cast(DType::BF16)); // exact: removed
    g.output(&y.cast(DType::BF16).cast(DType::F32)); // rounds: kept
    g.output(&x.cast(DType::F16).cast(DType::BF16)); // bf16 -> f16 loses range: kept
    let ir = g.build().unwrap();
    let s = dce(&algebraic(&ir).unwrap()).unwrap();
    assert_eq!(s.outputs[0].node, s.inputs[0]);
    assert_eq!(print(&s).matches("cast(").count(), 4, "{}", print(&s));
}

#[test]
fn algebraic_composes_movement_and_keeps_broadcasts() {
    let g = Graph::new();
    let x = g.input("x", DType::F32, [2, 3, 4]);
    let ones = g.constant(HostTensor::from_f64(DType::F32, vec![5, 2, 3, 4], &[1.0; 120]));
    let y = &x * &ones; // broadcasts x: not an identity
    let p = x.permute(&[1, 2, 0]).permute(&[2, 0, 1]).permute(&[0, 2, 1]);
    let r = x.reshape([24]).reshape([4, 6]);
    let e = x.reshape([2, 3, 4, 1]).expand([2, 3, 4, 5]).expand([7, 2, 3, 4, 5]);
    g.output(&y);
    g.output(&p);
    g.output(&r);
    g.output(&e);
    let ir = g.build().unwrap();
    let s = dce(&algebraic(&ir).unwrap()).unwrap();
    let text = print(&s);
    assert!(text.contains("mul(%0, %"), "{text}");
    // permute(permute(permute(x, [1,2,0]), [2,0,1]), [0,2,1]) = permute(x, [0, 2, 1])
    assert!(text.contains("permute(%0, perm=[0, 2, 1])"), "{text}");
    assert_eq!(text.matches("permute(").count(), 1, "{text}");
    assert!(text.contains("reshape(%0, shape=[4, 6])"), "{text}");
    assert!(text.contains("expand(%") && text.matches("expand(").count() == 1, "{text}");
    assert_eq!(ir.ty(ir.outputs[3].node), s.ty(s.outputs[3].node));
}

#[test]
fn rewriter_identity_roundtrip() {
    for g in [softmax_graph(), attention_graph(DType::F32, Some(DType::F32), true)] {
        assert_eq!(copy_all(&g).unwrap(), g);
    }
}

/// Tolerances for comparing two evaluations of one computation in `dtype`. For f16/bf16 the
/// decomposed graph may store one more intermediate in the storage dtype than the composite does
/// (attention's scores between its two matmuls, as PyTorch's math attention does), so it gets twice
/// the relative error.
fn tol(dtype: DType) -> (f64, f64) {
    let r = dtype.rel_tolerance();
    match dtype {
        DType::F16 | DType::BF16 => (2.0 * r, r),
        _ => (r, r),
    }
}

/// Inputs for `g`: floats uniform in [-2, 2), bools a coin flip.
fn random_inputs(g: &IrGraph, seed: u64) -> Vec<HostTensor> {
    g.inputs
        .iter()
        .enumerate()
        .map(|(k, &i)| {
            let t = g.ty(i);
            let dims = t.shape.as_static().unwrap();
            HostTensor::random(t.dtype, dims, seed + k as u64, -2.0, 2.0)
        })
        .collect()
}

/// `cpu::run(g)` and `cpu::run(pass(g))` agree on random inputs.
fn check_same_values(g: &IrGraph, transformed: &IrGraph, seeds: u64) {
    for seed in 0..seeds {
        let inputs = random_inputs(g, 1000 * seed + 7);
        let want = crate::cpu::run(g, &inputs).unwrap();
        let got = crate::cpu::run(transformed, &inputs).unwrap();
        assert_eq!(want.len(), got.len());
        for (w, o) in want.iter().zip(&got) {
            let (rtol, atol) = tol(w.dtype());
            let r = o.tolerance_ratio(w, rtol, atol);
            assert!(r <= 1.0, "ratio {r} (seed {seed})\n{}\n{}", print(g), print(transformed));
        }
    }
}

fn composite_graphs() -> Vec<(&'static str, IrGraph)> {
    let mut v: Vec<(&'static str, IrGraph)> = Vec::new();
    for dtype in [DType::F32, DType::BF16] {
        let unary = |f: &dyn Fn(&Tensor) -> Tensor| {
            let g = Graph::new();
            let x = g.input("x", dtype, [3, 17]);
            g.output(&f(&x));
            g.build().unwrap()
        };
        v.push(("softmax", unary(&|x| x.softmax(-1))));
        v.push(("softmax axis 0", unary(&|x| x.softmax(0))));
        v.push(("log_softmax", unary(&|x| x.log_softmax(-1))));
        v.push(("mean", unary(&|x| x.mean(&[1], false))));
        v.push(("mean keepdim all", unary(&|x| x.mean(&[0, 1], true))));
        v.push(("gelu", unary(&|x| x.gelu())));
        v.push(("gelu tanh", unary(&|x| x.gelu_tanh())));
        v.push(("silu", unary(&|x| x.silu())));
        v.push(("hardswish", unary(&|x| x.hardswish())));
        v.push(("hardsigmoid", unary(&|x| x.hardsigmoid(0.2, 0.5))));
        v.push(("layer_norm+gelu", layer_norm_gelu_graph(dtype)));
        v.push(("batch_norm", batch_norm_graph(dtype)));
        v.push(("attention", attention_graph(dtype, None, false)));
        v.push(("attention bool mask", attention_graph(dtype, Some(DType::Bool), false)));
        v.push(("attention float mask causal", attention_graph(dtype, Some(dtype), true)));
        v.push(("attention causal", attention_graph(dtype, None, true)));
        // Layer norm over two axes without weight or bias; batch norm on rank 2.
        let g = Graph::new();
        let x = g.input("x", dtype, [3, 4, 5]);
        g.output(&x.apply(Op::LayerNorm { axis: 1, eps: 1e-3, has_weight: false, has_bias: false }, &[]));
        v.push(("layer_norm 2 axes", g.build().unwrap()));
        let g = Graph::new();
        let x = g.input("x", dtype, [6, 3]);
        let p: Vec<Tensor> = ["s", "b", "m", "v"].iter().map(|n| g.input(n, dtype, [3])).collect();
        g.output(&x.batch_norm(&p[0], &p[1], &p[2], &p[3].abs(), 1e-5));
        v.push(("batch_norm rank 2", g.build().unwrap()));
    }
    v
}

#[test]
fn decompose_matches_cpu_reference() {
    for (name, g) in composite_graphs() {
        let d = decompose(&g).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(d.nodes.iter().all(|n| !n.op.is_composite()), "{name}");
        check_same_values(&g, &d, 3);
    }
}

/// `pow(x, c)` for a constant integer `c` in 2..=4 becomes products (values within the dtype's
/// tolerance); other exponents, an exponent of several values and one that broadcasts `x` stay
/// `pow`.
#[test]
fn integer_powers_become_products() {
    let pows = |g: &IrGraph| g.nodes.iter().filter(|n| matches!(n.op, Op::Binary(crate::ir::BinaryOp::Pow))).count();
    for dtype in [DType::F32, DType::BF16] {
        for (c, lowered) in [(2.0, true), (3.0, true), (4.0, true), (2.5, false), (5.0, false), (1.0, false)] {
            let g = Graph::new();
            let x = g.input("x", dtype, [3, 17]);
            g.output(&x.binary_scalar(crate::ir::BinaryOp::Pow, c));
            let g = g.build().unwrap();
            let d = decompose(&g).unwrap();
            assert_eq!(pows(&d), usize::from(!lowered), "{dtype} pow {c}");
            check_same_values(&g, &d, 3);
        }
    }
    let g = Graph::new();
    let x = g.input("x", DType::F32, [3, 2]);
    let mixed = g.constant(HostTensor::from_f64(DType::F32, vec![2], &[2.0, 3.0]));
    let wide = g.constant(HostTensor::from_f64(DType::F32, vec![4, 3, 2], &[2.0; 24]));
    g.output(&x.binary(crate::ir::BinaryOp::Pow, &mixed));
    g.output(&x.binary(crate::ir::BinaryOp::Pow, &wide));
    let d = decompose(&g.build().unwrap()).unwrap();
    assert_eq!(pows(&d), 2);
}

#[test]
fn pipeline_matches_cpu_reference() {
    for (_, g) in composite_graphs() {
        let o = optimize(&g).unwrap();
        check_same_values(&g, &o, 2);
    }
}

#[test]
fn differential_check_detects_a_wrong_decomposition() {
    // The comparison used above is sharp enough to see a small error: silu vs x * sigmoid(1.01 x).
    let g = Graph::new();
    let x = g.input("x", DType::F32, [64]);
    g.output(&x.silu());
    let good = g.build().unwrap();
    let g = Graph::new();
    let x = g.input("x", DType::F32, [64]);
    g.output(&(&x * (&x * 1.01).sigmoid()));
    let bad = g.build().unwrap();
    let inputs = random_inputs(&good, 3);
    let want = crate::cpu::run(&good, &inputs).unwrap();
    let got = crate::cpu::run(&bad, &inputs).unwrap();
    let (rtol, atol) = tol(DType::F32);
    assert!(got[0].tolerance_ratio(&want[0], rtol, atol) > 1.0);
}

#[test]
fn constant_fold_folds_narrowing_casts_of_large_constants() {
    let g = Graph::new();
    let x = g.input("x", DType::BF16, [FOLD_LIMIT * 32]);
    let n = FOLD_LIMIT * 32;
    let w = g.constant(HostTensor::f32([n], (0..n).map(|i| i as f32 * 0.25).collect()).unwrap());
    let wide = g.constant(HostTensor::f32([n], vec![1.5; n]).unwrap());
    g.output(&(&x * &w.cast(DType::BF16)));
    g.output(&wide.cast(DType::F64));
    let ir = g.build().unwrap();
    let f = dce(&constant_fold(&ir).unwrap()).unwrap();
    let casts = f.nodes.iter().filter(|n| matches!(n.op, Op::Cast(_))).count();
    // The bf16 cast of the weight is a bf16 constant now; the widening cast stays (it would double
    // the constant's memory).
    assert_eq!(casts, 1, "{}", print(&f));
    assert!(f.nodes.iter().any(
        |n| matches!(&n.op, Op::Constant(t) if t.dtype() == DType::BF16 && t.numel() == n.ty.shape.numel().unwrap())
    ));
    assert!(f.nodes.iter().any(|n| matches!(n.op, Op::Cast(DType::F64))));
    check_same_values(&ir, &f, 1);
}

/// The folded narrowing casts (`HostTensor::narrow_float`, several threads above a million
/// elements) give the CPU reference's `Cast` bit for bit: ties to even, subnormals, overflow to
/// infinity, signed zeros, NaN.
#[test]
fn constant_fold_narrowing_casts_match_the_reference_bit_for_bit() {
    let specials: [f64; 16] = [
        0.0,
        -0.0,
        1.0 + 1.0 / 256.0,  // bf16 tie, rounds down to even
        1.0 + 3.0 / 256.0,  // bf16 tie, rounds up to even
        1.0 + 1.0 / 2048.0, // f16 tie
        65504.0,            // f16 max
        65520.0,            // f16 overflow (rounds to infinity)
        1e-8,               // f16 subnormal
        1e-40,              // f32 subnormal
        3.4e38,             // near f32 max: bf16 keeps its range
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        -2.5e-3,
        1e300, // f64 past every narrower range
        -7.000000000000001,
    ];
    let mut rng = crate::tensor::SplitMix64::new(5);
    let n = (1 << 20) + 7;
    let vals: Vec<f64> = (0..n)
        .map(|i| match specials.get(i % 4099) {
            Some(&v) => v,
            None => (rng.next_f64() - 0.5) * 2f64.powi((rng.next_u64() % 60) as i32 - 30),
        })
        .collect();
    for (from, to) in [
        (DType::F32, DType::BF16),
        (DType::F32, DType::F16),
        (DType::F64, DType::F32),
        (DType::F64, DType::BF16),
        (DType::F64, DType::F16),
    ] {
        let c = HostTensor::from_f64(from, vec![n], &vals);
        let g = Graph::new();
        g.output(&g.constant(c.clone()).cast(to));
        let ir = g.build().unwrap();
        let want = crate::cpu::run(&ir, &[]).unwrap().remove(0);
        let folded = constant_fold(&ir).unwrap();
        let got = folded.nodes.iter().find_map(|n| match &n.op {
            Op::Constant(t) if t.dtype() == to => Some(t.clone()),
            _ => None,
        });
        let got = got.unwrap_or_else(|| panic!("{from} -> {to} was not folded:\n{}", print(&folded)));
        let (gb, wb) = (got.to_le_bytes(), want.to_le_bytes());
        if let Some(k) = gb.iter().zip(&wb).position(|(a, b)| a != b) {
            let e = k / to.size_bytes();
            panic!(
                "{from} -> {to}: element {e} ({:e}): {:?} against the reference's {:?}",
                vals[e],
                got.to_f64_vec()[e],
                want.to_f64_vec()[e]
            );
        }
        assert_eq!(c.narrow_float(to).unwrap().to_le_bytes(), want.to_le_bytes(), "{from} -> {to}");
    }
    // Widening and integer casts are not this path's.
    assert!(HostTensor::f32([2], vec![1.0, 2.0]).unwrap().narrow_float(DType::F64).is_none());
    assert!(HostTensor::f32([2], vec![1.0, 2.0]).unwrap().narrow_float(DType::I32).is_none());
}

#[test]
fn constant_fold_evaluates_small_constants() {
    let g = Graph::new();
    let x = g.input("x", DType::F32, [4]);
    let a = g.scalar(DType::F32, 2.0);
    let b = g.scalar(DType::F32, 3.0);
    let c = ((&a + &b) * &b).neg(); // folds to -15
    let big = g.scalar(DType::F32, 1.0).expand([FOLD_LIMIT + 1]);
    let small = g.scalar(DType::F32, 1.5).expand([4]);
    g.output(&(&x * &c + &small));
    g.output(&big);
    let ir = g.build().unwrap();
    let f = dce(&constant_fold(&ir).unwrap()).unwrap();
    let text = print(&f);
    assert!(text.contains("value=-15)"), "{text}");
    assert!(text.contains("value=[1.5, 1.5, 1.5, 1.5]"), "{text}");
    // Only the add that reads the input is left of (a + b) * b, neg and the final add.
    assert!(!text.contains("neg(") && text.matches("add(").count() == 1, "{text}");
    // The broadcast to a large shape is kept.
    assert!(text.contains(&format!("= expand(%2, shape=[{}])", FOLD_LIMIT + 1)), "{text}");
    // The folded constant keeps the origin of the node it replaced.
    let five = f.nodes.iter().find(|n| matches!(&n.op, Op::Constant(t) if t.to_f64_vec() == [-15.0])).unwrap();
    assert_eq!(&*five.origin.op, "neg");
    check_same_values(&ir, &f, 1);
}
