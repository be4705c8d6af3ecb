//! Renderer tests: snapshots of the generated WGSL for hand-built kernels, each validated by naga.

mod common;

use common::*;
use sinter_core::DType;
use sinter_core::kernel::ReduceStrategy;
use sinter_wgsl::backend::{candidates, check_tuning};
use sinter_wgsl::render::{Tuning, WgslCaps, render, render_with};

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
    // f32 only when allowed to round to f16: vector loads of f32 rounded to vec4<f16>.
    let p = matmul_bias_relu(300, 260, 72, DType::F32, false);
    let r = render(&p.kernels[0], &p, &coop_caps()).unwrap();
    assert!(!r.strategy.contains("coop"), "{}", r.strategy);
    let caps = WgslCaps { f32_matmul_as_f16: true, ..coop_caps() };
    let r = render(&p.kernels[0], &p, &caps).unwrap();
    assert!(r.strategy.contains("coop"), "{}", r.strategy);
    assert!(r.source.contains("vec4<f16>("), "{}", r.source);
    naga_validate(&r.source);
    // Stages 64 deep by default where k is deeper than 32 and the memory holds them, 32 on request
    // (both max-autotune candidates); other depths are refused.
    let p = matmul_bias_relu(300, 260, 72, DType::F16, false);
    assert_eq!(render(&p.kernels[0], &p, &coop_caps()).unwrap().strategy, "matmul coop16 128x128x64");
    let shallow = matmul_bias_relu(300, 260, 32, DType::F16, false);
    assert_eq!(render(&shallow.kernels[0], &shallow, &coop_caps()).unwrap().strategy, "matmul coop16 128x128x32");
    let small = WgslCaps { max_workgroup_storage_bytes: 32768, ..coop_caps() };
    assert_eq!(render(&p.kernels[0], &p, &small).unwrap().strategy, "matmul coop16 128x128x32");
    let deep = Tuning { coop_depth: Some(32), ..Tuning::default() };
    let r = render_with(&p.kernels[0], &p, &coop_caps(), &deep).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(r.strategy, "matmul coop16 128x128x32");
    naga_validate(&r.source);
    assert!(check_tuning(&Tuning { coop_depth: Some(48), ..Tuning::default() }, &coop_caps()).is_err());
    assert!(candidates(&p.kernels[0], &coop_caps()).contains(&deep));
}

#[test]
fn limits_are_clear_errors() {
    use sinter_wgsl::render::RenderError;
    // Buffers over the binding limit are split into windows (4 for x and y, 1 for the bias: 9 bindings);
    // when the windows exceed the per-stage binding count, the error names the split buffers and the limits.
    let p = add_relu_mul(64, 1024, DType::F32);
    let caps = WgslCaps { max_binding_bytes: 1 << 16, max_storage_buffers: 9, ..WgslCaps::baseline() };
    let r = render(&p.kernels[0], &p, &caps).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(r.bindings.len(), 9);
    let caps = WgslCaps { max_binding_bytes: 1 << 16, ..WgslCaps::baseline() };
    match render(&p.kernels[0], &p, &caps) {
        Err(RenderError::Unsupported { what, .. }) => {
            assert!(what.contains("b0") && what.contains("65536") && what.contains("per shader stage"), "{what}");
        }
        other => panic!("expected Unsupported, got {other:?}"),
    }
    // A limit that cannot hold one aligned window.
    let caps = WgslCaps { max_binding_bytes: 200, ..WgslCaps::baseline() };
    match render(&p.kernels[0], &p, &caps) {
        Err(RenderError::Unsupported { what, .. }) => assert!(what.contains("cannot be split"), "{what}"),
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

/// Whether a cast `from -> to` of loaded values may leave the 32 bits WGSL computes i64/u64 in:
/// floats (unbounded), u32/u64 into i64 (up to 2^32 - 1), signed integers into u64 (negatives).
fn cast_may_leave_32_bits(from: DType, to: DType) -> bool {
    match to {
        DType::I64 => from.is_float() || matches!(from, DType::U32 | DType::U64),
        DType::U64 => from.is_float() || from.is_signed_int(),
        _ => false,
    }
}

/// The cast kernel of `p` rendered, or `None` when it is one of the casts the renderer must refuse
/// (checked: refused naming the 32-bit limit, never rendered to wrap).
fn rendered_unless_wide(
    p: &sinter_core::kernel::Program,
    caps: &WgslCaps,
    from: DType,
    to: DType,
) -> Option<sinter_wgsl::render::Rendered> {
    use sinter_wgsl::render::RenderError;
    match render(&p.kernels[0], p, caps) {
        Ok(r) if !cast_may_leave_32_bits(from, to) => Some(r),
        Err(RenderError::Unsupported { what, .. })
            if cast_may_leave_32_bits(from, to) && what.contains("cast (v1) may overflow 32-bit arithmetic") =>
        {
            None
        }
        other => panic!("{from}->{to}: {other:?}"),
    }
}

#[test]
fn every_dtype_and_strategy_validates() {
    // Pointwise casts through every supported dtype, vectorized and not, plus reductions of each
    // strategy with and without subgroups, all naga-validated.
    use sinter_core::kernel::{Access, Expr};
    let dts = sinter_wgsl::backend::DTYPES;
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
                    if let Some(r) = rendered_unless_wide(&p, &caps, from, to) {
                        naga_validate(&r.source);
                    }
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

/// Caps with a tiny binding limit (lavapipe's 32-byte offset alignment) and no binding-count limit, so
/// every argument of more than `limit` bytes is split.
fn split_caps(limit: u64) -> WgslCaps {
    WgslCaps {
        max_binding_bytes: limit,
        storage_offset_alignment: 32,
        max_storage_buffers: 4096,
        ..WgslCaps::baseline()
    }
}

#[test]
fn pointwise_split_bindings() {
    // x and y (3072 bytes) are split into 2 windows of 1536 bytes; the bias (384 bytes) is bound whole.
    let p = add_relu_mul(8, 96, DType::F32);
    let r = render(&p.kernels[0], &p, &split_caps(1536)).unwrap_or_else(|e| panic!("{e}"));
    naga_validate(&r.source);
    let plan: Vec<(u32, usize, &str, u64, u64)> =
        r.bindings.iter().map(|b| (b.binding, b.arg, b.name.as_str(), b.offset_bytes, b.size_bytes)).collect();
    assert_eq!(
        plan,
        [
            (0, 0, "a0_0", 0, 1536),
            (1, 0, "a0_1", 1536, 1536),
            (2, 1, "a1", 0, 384),
            (3, 2, "a2_0", 0, 1536),
            (4, 2, "a2_1", 1536, 1536)
        ]
    );
    insta::assert_snapshot!(r.source);
}

#[test]
fn split_bindings_validate_for_every_kernel_kind() {
    use sinter_core::kernel::{Access, Expr, Index};
    let dts = sinter_wgsl::backend::DTYPES;
    let split = |r: &sinter_wgsl::render::Rendered, args: usize| r.bindings.len() > args;
    for limit in [64u64, 512] {
        for has_f16 in [true, false] {
            let caps = WgslCaps { has_f16, ..split_caps(limit) };
            // Casts: every layout read and written, plus a reversed store (scalar, atomic sub-word stores).
            for from in dts {
                for to in dts {
                    for n in [7usize, 64, 1023] {
                        let mut b = ProgramBuilder::new();
                        let x = b.input("x", from, &[n]);
                        let y = b.output("y", to, &[n]);
                        let z = b.output("z", to, &[n]);
                        let mut kb = KernelBuilder::new("k0_cast", &["cast"]);
                        let ax = kb.arg(&b, x, Access::Read);
                        let ay = kb.arg(&b, y, Access::Write);
                        let az = kb.arg(&b, z, Access::Write);
                        let v = kb.load(ax, lane());
                        let c = kb.e(Expr::Cast(v), to);
                        let rev = Index::Sum(vec![Index::Const(n as i64 - 1), lane().mul(-1)]);
                        b.kernel(kb.pointwise(n, vec![st(ay, lane(), c), st(az, rev, c)]));
                        let p = b.build();
                        let Some(r) = rendered_unless_wide(&p, &caps, from, to) else { continue };
                        naga_validate(&r.source);
                        if n * from.size_bytes() > 4 * limit as usize {
                            assert!(split(&r, 3), "{from}->{to} n={n}: not split");
                        }
                    }
                }
            }
            for d in [DType::F32, DType::BF16, DType::F16] {
                for (rows, cols) in [(3, 4097), (33, 64), (1, 1023)] {
                    let p = add_relu_mul(rows, cols, d);
                    let r = render(&p.kernels[0], &p, &caps).unwrap_or_else(|e| panic!("{e}"));
                    naga_validate(&r.source);
                    assert!(split(&r, 3));
                }
                for strategy in [ReduceStrategy::Persistent, ReduceStrategy::Looped, ReduceStrategy::ThreadPerRow] {
                    for len in [7, 1024, 4097] {
                        let p = softmax(3, len, d, strategy);
                        let r = render(&p.kernels[0], &p, &caps).unwrap_or_else(|e| panic!("{e}"));
                        naga_validate(&r.source);
                        assert_eq!(split(&r, 2), 3 * len * d.size_bytes() > limit as usize);
                    }
                }
                for b_t in [false, true] {
                    let p = matmul_bias_relu(65, 130, 33, d, b_t);
                    let r = render(&p.kernels[0], &p, &caps).unwrap_or_else(|e| panic!("{e}"));
                    naga_validate(&r.source);
                    assert!(split(&r, 4));
                }
            }
        }
    }
    // Cooperative-matrix matmuls read their operands through the accessors too.
    let caps =
        WgslCaps { max_binding_bytes: 4096, storage_offset_alignment: 32, max_storage_buffers: 4096, ..coop_caps() };
    let p = matmul_bias_relu(300, 260, 72, DType::F16, false);
    let r = render(&p.kernels[0], &p, &caps).unwrap_or_else(|e| panic!("{e}"));
    assert!(r.strategy.contains("coop") && split(&r, 4), "{}", r.strategy);
    naga_validate(&r.source);
    // More than 4 windows select the window with a switch.
    let p = add_relu_mul(8, 96, DType::F32);
    let r = render(&p.kernels[0], &p, &split_caps(256)).unwrap_or_else(|e| panic!("{e}"));
    naga_validate(&r.source);
    assert!(r.source.contains("switch (i / 16u)"), "{}", r.source);
}
