//! One compile serving several batch sizes on a GPU (issue 13): the CUDA backend runs a program
//! compiled at a bound at batches 1, 3, 5 and 8 (and 16 after one logged recompile for 11) with
//! fewer blocks, in every mode (stream launches; CUDA graphs re-captured with the new grids, with
//! argument updates and with copies), through `run` and `run_device`, each result checked against
//! the CPU reference with outputs poisoned, the number of compiles asserted. Graphs: a Linear +
//! GELU + layer statistics + softmax (rows `m` scale), a batched product (batches scale, CUDA-core
//! tiles in f32 and tensor cores in bf16), fused attention (f32 rows template, bf16 tensor-core
//! template), a convolution (im2col + product), and a product large enough for cuBLASLt (a library
//! step, launched at its full extent).
//!
//! Without a CUDA driver every test prints a skip line, unless `SINTER_REQUIRE_CUDA=1`.
//! `cargo test -p sinter-cuda --test device_dynamic` on the H100.

mod launch;

use launch::options as opts;
use sinter_core::backend::{Backend, Mode};
use sinter_core::compile::{CompiledGraph, compile};
use sinter_core::prelude::*;
use std::sync::Arc;

fn backend(test: &str, graph_updates: bool) -> Option<Arc<dyn Backend>> {
    let mut b = launch::cuda_backend(test)?;
    b.set_graph_arg_updates(graph_updates);
    Some(Arc::new(b))
}

/// Runs `c` at these input shapes (random data in the given dtype) and compares with the CPU
/// reference, through the host and through device tensors.
fn check(c: &CompiledGraph, g: &Graph, dtype: DType, shapes: &[Vec<usize>], seed: u64, tol: f64) {
    let inputs: Vec<HostTensor> = shapes
        .iter()
        .enumerate()
        .map(|(k, s)| HostTensor::random(dtype, s.clone(), seed * 11 + k as u64, -1.0, 1.0))
        .collect();
    let want = sinter_core::cpu::run(g, &inputs).unwrap();
    let got = c.run(&inputs).unwrap();
    let dev: Vec<_> = inputs.iter().map(|t| c.upload(t).unwrap()).collect();
    let got_dev: Vec<HostTensor> = c.run_device(&dev).unwrap().iter().map(|t| t.to_host().unwrap()).collect();
    for outs in [got, got_dev] {
        assert_eq!(outs.len(), want.len());
        for (a, b) in outs.iter().zip(&want) {
            assert_eq!(a.shape, b.shape, "{shapes:?}");
            let r = a.tolerance_ratio(b, tol, tol * 0.1);
            assert!(r <= 1.0, "{shapes:?}: {r}x the tolerance");
        }
    }
}

/// Batches 8, 1, 3, 5, 8 (times the shapes' scale) with one compile; 11 recompiles once (with the
/// reason); 16 and 2 reuse it.
fn serve(c: &CompiledGraph, g: &Graph, dtype: DType, shapes: impl Fn(usize) -> Vec<Vec<usize>>, tol: f64) {
    for (k, b) in [8usize, 1, 3, 5, 8].into_iter().enumerate() {
        check(c, g, dtype, &shapes(b), k as u64, tol);
    }
    assert_eq!(c.events().len(), 1, "{:?}", c.events());
    check(c, g, dtype, &shapes(11), 11, tol);
    let ev = c.events();
    assert_eq!(ev.len(), 2);
    assert!(ev[1].reason.contains("is outside 1..="), "{}", ev[1].reason);
    for b in [16usize, 2] {
        check(c, g, dtype, &shapes(b), 20 + b as u64, tol);
    }
    assert_eq!(c.events().len(), 2);
}

fn mlp(d: usize, n: usize) -> Graph {
    let g = Graph::new();
    let x = g.input("x", DType::F32, vec![Dim::sym("batch"), Dim::Static(d)]);
    let w = g.constant(HostTensor::random(DType::F32, vec![d, n], 3, -0.2, 0.2));
    let b = g.constant(HostTensor::random(DType::F32, vec![n], 4, -0.5, 0.5));
    let h = (x.matmul(&w) + &b).gelu();
    let m = h.mean(&[-1], true);
    g.output(&(&h - &m).softmax(-1));
    g.output(&h.sum(&[-1], false));
    g
}

#[test]
fn linear_layers_serve_every_batch_in_every_mode() {
    for (mode, updates) in [(Mode::Default, true), (Mode::ReduceOverhead, true), (Mode::ReduceOverhead, false)] {
        let Some(b) = backend("linear_layers_serve_every_batch_in_every_mode", updates) else { return };
        let g = mlp(64, 96);
        let c = compile(&g, b, opts(mode)).unwrap();
        serve(&c, &g, DType::F32, |b| vec![vec![b, 64]], 1e-4);
    }
}

#[test]
fn batched_products_serve_every_batch() {
    for dtype in [DType::F32, DType::BF16] {
        let Some(b) = backend("batched_products_serve_every_batch", true) else { return };
        let g = Graph::new();
        let x = g.input("x", dtype, vec![Dim::sym("batch"), Dim::Static(70), Dim::Static(64)]);
        let y = g.input("y", dtype, vec![Dim::sym("batch"), Dim::Static(64), Dim::Static(48)]);
        g.output(&x.matmul(&y).relu());
        let c = compile(&g, b, opts(Mode::Default)).unwrap();
        let tol = if dtype == DType::BF16 { 2e-2 } else { 1e-4 };
        serve(&c, &g, dtype, |b| vec![vec![b, 70, 64], vec![b, 64, 48]], tol);
    }
}

#[test]
fn fused_attention_serves_every_batch() {
    for (dtype, seq, d) in [(DType::F32, 37, 32), (DType::BF16, 128, 64), (DType::BF16, 1, 64)] {
        let Some(b) = backend("fused_attention_serves_every_batch", true) else { return };
        let g = Graph::new();
        let dims = |s: usize| vec![Dim::sym("batch"), Dim::Static(4), Dim::Static(s), Dim::Static(d)];
        let q = g.input("q", dtype, dims(seq));
        let k = g.input("k", dtype, dims(seq.max(16)));
        let v = g.input("v", dtype, dims(seq.max(16)));
        g.output(&q.attention(&k, &v, None, None, seq > 1));
        let c = compile(&g, b, opts(Mode::Default)).unwrap();
        let tol = if dtype == DType::BF16 { 2e-2 } else { 1e-4 };
        let kv = seq.max(16);
        serve(&c, &g, dtype, |b| vec![vec![b, 4, seq, d], vec![b, 4, kv, d], vec![b, 4, kv, d]], tol);
        let ext = c.extents().unwrap();
        assert!(ext.sites.iter().any(|s| format!("{:?}", s.site).starts_with("AttentionBatch")), "{ext:?}");
    }
}

#[test]
fn convolutions_and_library_products_serve_every_batch() {
    let Some(b) = backend("convolutions_and_library_products_serve_every_batch", true) else { return };
    let g = Graph::new();
    let x = g.input("x", DType::F32, vec![Dim::sym("batch"), Dim::Static(3), Dim::Static(16), Dim::Static(16)]);
    let w = g.constant(HostTensor::random(DType::F32, vec![8, 3, 3, 3], 5, -0.3, 0.3));
    let y = x.conv2d(&w, None, [1, 1], [1, 1, 1, 1], [1, 1], 1).relu();
    g.output(&y.mean(&[2, 3], false));
    let c = compile(&g, b.clone(), opts(Mode::Default)).unwrap();
    serve(&c, &g, DType::F32, |b| vec![vec![b, 3, 16, 16]], 1e-4);

    // 1024 x 1024 weights at 512 rows: cuBLASLt at the bound (>= 1e9 FLOPs); the library call runs
    // its full extent at smaller batches (over rows nothing reads).
    let g = mlp(1024, 1024);
    let c = compile(&g, b, opts(Mode::Default)).unwrap();
    serve(&c, &g, DType::F32, |b| vec![vec![b * 64, 1024]], 1e-3);
}
