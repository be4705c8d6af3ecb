//! Graph breaks on WGSL: an f64 node in an f32 graph runs (on the CPU reference) while the rest
//! compiles to WGSL; without graph breaks it is refused as before.

use sinter_core::backend::Backend;
use sinter_core::compile::{CompileOptions, compile};
use sinter_core::prelude::*;
use std::sync::Arc;

mod common;

/// The backend, or `None` (after printing why) when there is no adapter.
fn backend() -> Option<Arc<dyn Backend>> {
    common::owned_backend("breaks")
}

#[test]
fn an_f64_node_in_an_f32_graph_runs_with_a_graph_break() {
    let Some(b) = backend() else { return };
    let g = Graph::new();
    let x = g.input("x", DType::F32, [8, 16]);
    let w = g.input("w", DType::F32, [16, 4]);
    let h = x.matmul(&w).relu();
    // An f64 section: sums of squares in double precision, back to f32.
    let d = h.cast(DType::F64);
    let n = (&d * &d).sum(&[1], true).sqrt().cast(DType::F32);
    g.output(&(&h / &(n + 1.0)).softmax(-1));
    let inputs = vec![
        HostTensor::random(DType::F32, vec![8, 16], 1, -1.0, 1.0),
        HostTensor::random(DType::F32, vec![16, 4], 2, -1.0, 1.0),
    ];
    let want = sinter_core::cpu::run(&g, &inputs).unwrap();
    let opts = CompileOptions { cache_dir: None, debug_dir: None, ..CompileOptions::default() };
    let c = compile(&g, b.clone(), opts.clone()).unwrap();
    let breaks = c.graph_breaks();
    assert!(
        breaks.iter().any(|br| br.to_string().contains("(cast to f64): the wgsl backend does not support f64")),
        "{breaks:?}"
    );
    let segs: Vec<bool> = c.segments().iter().map(|s| s.1).collect();
    assert_eq!(segs, [true, false, true]);
    assert!(c.sources().iter().all(|s| s.ext == "wgsl"));
    let got = c.run(&inputs).unwrap();
    assert!(got[0].tolerance_ratio(&want[0], 1e-4, 1e-6) <= 1.0);
    // Device inputs: the compiled segments' values stay on the GPU.
    let dev: Vec<_> = inputs.iter().map(|t| c.upload(t).unwrap()).collect();
    let out = c.run_device(&dev).unwrap();
    assert_eq!(out[0].backend(), "wgsl");
    assert!(out[0].to_host().unwrap().tolerance_ratio(&want[0], 1e-4, 1e-6) <= 1.0);
    let (_, timings) = c.run_timed(&inputs, 1).unwrap();
    assert!(timings[0].iter().any(|k| k.kernel == "cpu_fallback_1"), "{timings:?}");
    // Off: today's error.
    let off = compile(&g, b, CompileOptions { graph_breaks: false, ..opts });
    let e = off.err().expect("f64 compiled on WGSL without a graph break").to_string();
    assert!(e.contains("f64"), "{e}");
}
