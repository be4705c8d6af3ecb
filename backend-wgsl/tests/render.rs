//! Renderer tests: snapshots of the generated WGSL for hand-built kernels, each validated by naga.

mod common;

use common::*;
use sinter_core::DType;
use sinter_core::kernel::ReduceStrategy;
use sinter_wgsl::render::{WgslCaps, render};

fn render_all(p: &sinter_core::kernel::Program) -> String {
    let caps = WgslCaps::baseline();
    let mut out = String::new();
    for k in &p.kernels {
        let r = render(k, p, &caps).unwrap_or_else(|e| panic!("{e}"));
        naga_validate(&r.source);
        out.push_str(&format!(
            "// entry {} workgroup_size {:?} grid {:?} strategy {}\n",
            r.entry, r.workgroup_size, r.grid, r.strategy
        ));
        out.push_str(&r.source);
    }
    out
}

#[test]
fn pointwise_broadcast() {
    let s = render_all(&add_relu_mul(33, 4096, DType::F32));
    insta::assert_snapshot!(s);
}

#[test]
fn softmax_two_reductions() {
    let s = render_all(&softmax(64, 1000, DType::F32, ReduceStrategy::Persistent));
    insta::assert_snapshot!(s);
}

#[test]
fn matmul_bias_relu_epilogue() {
    let s = render_all(&matmul_bias_relu(100, 96, 72, DType::F32, false));
    insta::assert_snapshot!(s);
}

#[test]
fn softmax_with_subgroups_validates() {
    let caps = WgslCaps { has_subgroups: true, subgroup_size: Some(32), ..WgslCaps::baseline() };
    for strategy in [ReduceStrategy::Persistent, ReduceStrategy::Looped] {
        let p = softmax(64, 8192, DType::F32, strategy);
        let r = render(&p.kernels[0], &p, &caps).unwrap_or_else(|e| panic!("{e}"));
        naga_validate(&r.source);
        assert!(r.source.contains("subgroupShuffleXor"), "{}", r.source);
    }
}

fn coop_caps() -> WgslCaps {
    WgslCaps {
        has_subgroups: true,
        subgroup_size: Some(32),
        fixed_subgroup_size: Some(32),
        has_coop_matrix: true,
        max_invocations: 1024,
        max_workgroup_size_x: 1024,
        max_workgroup_storage_bytes: 49152,
        ..WgslCaps::baseline()
    }
}

#[test]
fn matmul_on_cooperative_matrices() {
    let caps = coop_caps();
    let p = matmul_bias_relu(300, 260, 72, DType::F16, false);
    let r = render(&p.kernels[0], &p, &caps).unwrap_or_else(|e| panic!("{e}"));
    naga_validate(&r.source);
    assert!(r.strategy.contains("coop"), "{}", r.strategy);
    insta::assert_snapshot!(r.source);
    // Transposed B, bf16 only when allowed to run as f16.
    let p = matmul_bias_relu(64, 64, 64, DType::BF16, true);
    let r = render(&p.kernels[0], &p, &caps).unwrap();
    assert!(!r.strategy.contains("coop"), "{}", r.strategy);
    let caps = WgslCaps { bf16_matmul_as_f16: true, ..coop_caps() };
    let r = render(&p.kernels[0], &p, &caps).unwrap();
    assert!(r.strategy.contains("coop"), "{}", r.strategy);
    naga_validate(&r.source);
}

#[test]
fn limits_are_clear_errors() {
    use sinter_wgsl::render::RenderError;
    // A binding over the adapter's limit names the buffer and the limit.
    let p = add_relu_mul(64, 1024, DType::F32);
    let caps = WgslCaps { max_binding_bytes: 1 << 16, ..WgslCaps::baseline() };
    match render(&p.kernels[0], &p, &caps) {
        Err(RenderError::Unsupported { what, .. }) => {
            assert!(what.contains("b0") && what.contains("65536"), "{what}");
        }
        other => panic!("expected Unsupported, got {other:?}"),
    }
    // Too many bindings.
    let caps = WgslCaps { max_storage_buffers: 2, ..WgslCaps::baseline() };
    assert!(matches!(render(&p.kernels[0], &p, &caps), Err(RenderError::Unsupported { .. })));
    // f64 is named.
    let mut b = ProgramBuilder::new();
    let x = b.input("x", DType::F64, &[4]);
    let y = b.output("y", DType::F64, &[4]);
    let mut kb = KernelBuilder::new("k0_copy", &["copy"]);
    let ax = kb.arg(&b, x, sinter_core::kernel::Access::Read);
    let ay = kb.arg(&b, y, sinter_core::kernel::Access::Write);
    let v = kb.load(ax, lane());
    b.kernel(kb.pointwise(4, vec![st(ay, lane(), v)]));
    let p = b.build();
    match render(&p.kernels[0], &p, &WgslCaps::baseline()) {
        Err(RenderError::Unsupported { what, .. }) => assert!(what.contains("f64"), "{what}"),
        other => panic!("expected Unsupported, got {other:?}"),
    }
}

#[test]
fn malformed_kernels_are_errors_not_panics() {
    use sinter_core::kernel::{Expr, ExprId};
    use sinter_wgsl::render::RenderError;
    let mut p = add_relu_mul(4, 8, DType::F32);
    // An operand that does not precede its user.
    p.kernels[0].exprs[2].expr = Expr::Unary(sinter_core::ir::UnaryOp::Exp, ExprId(40));
    assert!(matches!(render(&p.kernels[0], &p, &WgslCaps::baseline()), Err(RenderError::Invalid { .. })));
    // A load from a written argument.
    let mut p = add_relu_mul(4, 8, DType::F32);
    p.kernels[0].exprs[0].expr = Expr::Load { arg: 2, index: lane() };
    assert!(render(&p.kernels[0], &p, &WgslCaps::baseline()).is_err());
    // An argument index out of range.
    let mut p = add_relu_mul(4, 8, DType::F32);
    p.kernels[0].exprs[0].expr = Expr::Load { arg: 9, index: lane() };
    assert!(matches!(render(&p.kernels[0], &p, &WgslCaps::baseline()), Err(RenderError::Invalid { .. })));
}

#[test]
fn every_dtype_and_strategy_validates() {
    // Pointwise casts through every supported dtype, vectorized and not, plus reductions of each
    // strategy with and without subgroups, all naga-validated.
    use sinter_core::kernel::{Access, Expr};
    let dts = [
        DType::F32,
        DType::F16,
        DType::BF16,
        DType::I8,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::U8,
        DType::U16,
        DType::U32,
        DType::U64,
        DType::Bool,
    ];
    for has_f16 in [true, false] {
        let caps = WgslCaps { has_f16, ..WgslCaps::baseline() };
        for from in dts {
            for to in dts {
                for n in [7usize, 64] {
                    let mut b = ProgramBuilder::new();
                    let x = b.input("x", from, &[n]);
                    let y = b.output("y", to, &[n]);
                    let mut kb = KernelBuilder::new("k0_cast", &["cast"]);
                    let ax = kb.arg(&b, x, Access::Read);
                    let ay = kb.arg(&b, y, Access::Write);
                    let v = kb.load(ax, lane());
                    let c = kb.e(Expr::Cast(v), to);
                    b.kernel(kb.pointwise(n, vec![st(ay, lane(), c)]));
                    let p = b.build();
                    let r = render(&p.kernels[0], &p, &caps).unwrap_or_else(|e| panic!("{from}->{to}: {e}"));
                    naga_validate(&r.source);
                }
            }
        }
    }
    for subgroups in [false, true] {
        let caps = WgslCaps { has_subgroups: subgroups, ..WgslCaps::baseline() };
        for d in [DType::F32, DType::BF16, DType::F16] {
            for strategy in [ReduceStrategy::Persistent, ReduceStrategy::Looped, ReduceStrategy::ThreadPerRow] {
                for len in [1, 7, 1024, 4097] {
                    let p = softmax(3, len, d, strategy);
                    let r = render(&p.kernels[0], &p, &caps).unwrap_or_else(|e| panic!("{e}"));
                    naga_validate(&r.source);
                }
            }
        }
    }
}

#[test]
fn entry_names_are_safe_identifiers() {
    use sinter_wgsl::render::entry_name;
    assert_eq!(entry_name("k3_softmax"), "k3_softmax");
    assert_eq!(entry_name("a0"), "k_a0");
    assert_eq!(entry_name("fn"), "k_fn");
    assert_eq!(entry_name("3x"), "k_3x");
    assert_eq!(entry_name("k1 weird-name"), "k1_weird_name");
    assert_eq!(entry_name("k2__x"), "k2_xx");
    assert_eq!(entry_name(""), "k_");
}
