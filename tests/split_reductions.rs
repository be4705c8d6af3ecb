//! Split reductions end to end: reductions with too few rows to fill a GPU compile to a partial
//! kernel and a combine kernel, and give the CPU reference's result on the WGSL backend (lavapipe in
//! CI) and the kernel-IR interpreter, with fresh random inputs at sizes that split and sizes that
//! do not.
//!
//! Without an adapter the WGSL half prints `SKIPPED`; with `SINTER_REQUIRE_GPU=1` it fails instead.

mod common;

use sinter::prelude::*;
use sinter::{Backend, Options};

fn backends() -> Vec<Backend> {
    let mut v = vec![Backend::Interp];
    if common::gpu_or_skip("wgsl", sinter::backend(Backend::Wgsl)).is_some() {
        v.push(Backend::Wgsl);
    }
    v
}

/// Compiles `g` on every backend, checks the kernel count and compares with the CPU reference.
fn check(g: &Graph, inputs: &[HostTensor], kernels: usize, what: &str) {
    let want = sinter::cpu::run(g, inputs).expect("cpu reference");
    for b in backends() {
        let opts = Options { backend: b, cache_dir: None, debug_dir: None, ..Options::default() };
        let c = sinter::compile(g, opts).unwrap_or_else(|e| panic!("{what} on {}: {e}", b.name()));
        let got = c.run(inputs).unwrap_or_else(|e| panic!("{what} on {}: {e}", b.name()));
        let p = c.program().expect("static inputs compile at once");
        assert_eq!(
            p.kernels.len(),
            kernels,
            "{what} on {}: kernels {:?}",
            b.name(),
            p.kernels.iter().map(|k| &k.name).collect::<Vec<_>>()
        );
        for (o, w) in got.iter().zip(&want) {
            // Sums of up to 2^22 terms: the f32 accumulation order differs from the f64 reference.
            let r = o.tolerance_ratio(w, 1e-4, 1e-4);
            assert!(
                r <= 1.0,
                "{what} on {}: {r}x the tolerance: got {:?} want {:?}",
                b.name(),
                &o.to_f64_vec()[..o.to_f64_vec().len().min(4)],
                &w.to_f64_vec()[..w.to_f64_vec().len().min(4)]
            );
        }
    }
}

#[test]
fn whole_tensor_sum_mean_max_split() {
    for (n, kernels) in [(1usize << 22, 2), (3 * 5 * 7 * 1024, 2), (4093, 1), (1, 1)] {
        let g = Graph::new();
        let x = g.input("x", DType::F32, [n]);
        g.output(&x.sum(&[0], false));
        g.output(&(x.mean(&[0], true) * 2.0));
        g.output(&x.abs().max(&[0], false));
        let inputs = vec![HostTensor::random(DType::F32, vec![n], n as u64, -1.0, 1.0)];
        // Three reductions over the same row join one kernel; more than one reduction is not split.
        check(&g, &inputs, kernels.min(1), &format!("three reductions of {n}"));
        let g = Graph::new();
        let x = g.input("x", DType::F32, [n]);
        g.output(&x.sum(&[0], false));
        check(&g, &inputs, kernels, &format!("sum of {n}"));
    }
}

#[test]
fn few_long_rows_split_and_keep_the_epilogue() {
    let g = Graph::new();
    let x = g.input("x", DType::F16, [3, 1 << 17]);
    g.output(&(x.mean(&[1], true) + 1.0));
    let inputs = vec![HostTensor::random(DType::F16, vec![3, 1 << 17], 9, -1.0, 1.0)];
    check(&g, &inputs, 2, "f16 mean of 3 long rows");
}
