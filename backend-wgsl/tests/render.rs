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
