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
