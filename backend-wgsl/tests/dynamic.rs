//! One compile serving several batch sizes on WGSL (issue 13): the program compiled at a bound runs
//! smaller batches with fewer workgroups, every result checked against the CPU reference, the
//! number of compiles asserted.
//!
//! Without an adapter each test prints `SKIPPED` and returns; with `SINTER_REQUIRE_GPU=1` a missing
//! adapter fails.

use sinter_core::backend::{Executable, Mode};
use sinter_core::compile::{CompileOptions, CompiledGraph, compile};
use sinter_core::prelude::*;
use std::sync::Arc;

mod common;

fn opts() -> CompileOptions {
    CompileOptions { cache_dir: None, debug_dir: None, ..CompileOptions::default() }
}

/// Linear + bias + GELU, a centring mean and a softmax, and a row sum: matmul (rows `m` scale),
/// pointwise and reduce kernels.
fn mlp() -> Graph {
    let g = Graph::new();
    let x = g.input("x", DType::F32, vec![Dim::sym("batch"), Dim::Static(12)]);
    let w = g.constant(HostTensor::random(DType::F32, vec![12, 24], 3, -0.5, 0.5));
    let b = g.constant(HostTensor::random(DType::F32, vec![24], 4, -0.5, 0.5));
    let h = (x.matmul(&w) + &b).gelu();
    let m = h.mean(&[-1], true);
    g.output(&(&h - &m).softmax(-1));
    g.output(&h.sum(&[-1], false));
    g
}

/// Runs `c` on random inputs of these shapes and compares with the CPU reference.
fn check(c: &CompiledGraph, g: &Graph, shapes: &[Vec<usize>], seed: u64) {
    let inputs: Vec<HostTensor> = shapes
        .iter()
        .enumerate()
        .map(|(k, s)| HostTensor::random(DType::F32, s.clone(), seed * 7 + k as u64, -2.0, 2.0))
        .collect();
    let got = c.run(&inputs).unwrap();
    let want = sinter_core::cpu::run(g, &inputs).unwrap();
    common::assert_close_tol(&got, &want, &format!("{shapes:?}"), Some((1e-4, 1e-5)));
}

#[test]
fn one_compile_serves_batch_sizes_1_3_and_8() {
    let Some(b) = common::owned_backend("dynamic") else { return };
    let g = mlp();
    let c = compile(&g, b, opts()).unwrap();
    // 8 first, then smaller, then 8 again: the buffers beyond a small batch hold the previous
    // run's values, which must not leak into results.
    for (k, batch) in [8usize, 1, 3, 8, 3, 5].into_iter().enumerate() {
        check(&c, &g, &[vec![batch, 12]], k as u64);
    }
    let ev = c.events();
    assert_eq!(ev.len(), 1, "{ev:?}");
    assert!(c.sources().iter().all(|s| s.ext == "wgsl"));
    // Device inputs at a smaller batch.
    let x = HostTensor::random(DType::F32, vec![2, 12], 99, -2.0, 2.0);
    let out = c.run_device(&[c.upload(&x).unwrap()]).unwrap();
    assert_eq!(out[0].shape(), [2, 24]);
    let want = sinter_core::cpu::run(&g, &[x]).unwrap();
    common::assert_close_tol(&[out[0].to_host().unwrap()], &want[..1], "run_device", Some((1e-4, 1e-5)));
    assert_eq!(c.events().len(), 1);
    // Above the bound: a recompile with the reason.
    check(&c, &g, &[vec![11, 12]], 11);
    let ev = c.events();
    assert_eq!(ev.len(), 2);
    assert!(ev[1].reason.contains("batch=11 is outside 1..=8"), "{}", ev[1].reason);
}

#[test]
fn smaller_batches_launch_fewer_workgroups() {
    let Some(b) = common::owned_backend("dynamic-grid") else { return };
    let wb = sinter_wgsl::WgslBackend::with_device(common::gpu_backend().unwrap().device().clone());
    let g = mlp();
    let c = compile(&g, b, CompileOptions { dynamic: Some(64), ..opts() }).unwrap();
    check(&c, &g, &[vec![64, 12]], 1);
    let program = c.program().unwrap();
    let ext = program.dynamic.clone().expect("a table of extents");
    for mode in [Mode::Default, Mode::ReduceOverhead] {
        let mut exe = wb.load_wgsl(&program, mode).unwrap();
        let full = exe.launch_grids();
        exe.set_extent(Some(Arc::new(ext.at(&program, 1).unwrap()))).unwrap();
        let small = exe.launch_grids();
        assert!(small.iter().zip(&full).all(|(s, f)| s[0] <= f[0]), "{small:?} vs {full:?}");
        assert!(small.iter().zip(&full).any(|(s, f)| s[0] < f[0]), "{small:?} vs {full:?}");
        let x = HostTensor::random(DType::F32, vec![1, 12], 5, -2.0, 2.0);
        let got = exe.run(std::slice::from_ref(&x)).unwrap();
        let want = sinter_core::cpu::run(&g, &[x]).unwrap();
        common::assert_close_tol(&got, &want, &format!("{mode:?}"), Some((1e-4, 1e-5)));
        let (got, _) = exe.run_timed(&[HostTensor::random(DType::F32, vec![1, 12], 6, -2.0, 2.0)], 2).unwrap();
        assert_eq!(got[0].shape, vec![1, 24]);
        exe.set_extent(None).unwrap();
        assert_eq!(exe.launch_grids(), full);
    }
}

#[test]
fn batched_products_and_attention_scale_their_batch() {
    let Some(b) = common::owned_backend("dynamic-attn") else { return };
    // Batched matmul: both operands carry the batch.
    let g = Graph::new();
    let x = g.input("x", DType::F32, vec![Dim::sym("batch"), Dim::Static(5), Dim::Static(16)]);
    let y = g.input("y", DType::F32, vec![Dim::sym("batch"), Dim::Static(16), Dim::Static(7)]);
    g.output(&x.matmul(&y).relu());
    let c = compile(&g, b.clone(), opts()).unwrap();
    for (k, batch) in [8usize, 1, 3].into_iter().enumerate() {
        check(&c, &g, &[vec![batch, 5, 16], vec![batch, 16, 7]], k as u64);
    }
    assert_eq!(c.events().len(), 1);

    // Attention over [batch, heads, seq, d] with a causal mask.
    let g = Graph::new();
    let dims = |s: usize| vec![Dim::sym("batch"), Dim::Static(2), Dim::Static(s), Dim::Static(16)];
    let q = g.input("q", DType::F32, dims(9));
    let k = g.input("k", DType::F32, dims(9));
    let v = g.input("v", DType::F32, dims(9));
    g.output(&q.attention(&k, &v, None, None, true));
    let c = compile(&g, b, opts()).unwrap();
    for (s, batch) in [8usize, 1, 3].into_iter().enumerate() {
        let shape = vec![batch, 2, 9, 16];
        check(&c, &g, &[shape.clone(), shape.clone(), shape], 30 + s as u64);
    }
    assert_eq!(c.events().len(), 1);
    let ext = c.extents().unwrap();
    assert!(
        ext.sites.iter().any(|s| format!("{:?}", s.site).starts_with("AttentionBatch")),
        "the fused attention kernel scales its batch: {ext:?}"
    );
}

#[test]
fn dynamic_off_recompiles_per_batch_with_the_reason() {
    let Some(b) = common::owned_backend("dynamic-off") else { return };
    assert!(b.serves_extents());
    let g = mlp();
    let c = compile(&g, b, CompileOptions { dynamic: None, ..opts() }).unwrap();
    check(&c, &g, &[vec![3, 12]], 1);
    check(&c, &g, &[vec![1, 12]], 2);
    let ev = c.events();
    assert_eq!(ev.len(), 2);
    assert!(ev[1].reason.contains("dynamic extents are off"), "{}", ev[1].reason);
}

#[test]
fn convolutions_serve_every_batch() {
    let Some(b) = common::owned_backend("dynamic-conv") else { return };
    let g = Graph::new();
    let x = g.input("x", DType::F32, vec![Dim::sym("batch"), Dim::Static(3), Dim::Static(10), Dim::Static(10)]);
    let w = g.constant(HostTensor::random(DType::F32, vec![8, 3, 3, 3], 5, -0.3, 0.3));
    let y = x.conv2d(&w, None, [1, 1], [1, 1, 1, 1], [1, 1], 1).relu();
    g.output(&y.mean(&[2, 3], false));
    let c = compile(&g, b, opts()).unwrap();
    for (k, batch) in [8usize, 1, 3].into_iter().enumerate() {
        check(&c, &g, &[vec![batch, 3, 10, 10]], 50 + k as u64);
    }
    assert_eq!(c.events().len(), 1, "{:?}", c.events());
}
