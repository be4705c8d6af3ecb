//! Dynamic programs on CUDA without a device: a program compiled at a bound keeps its sources (the
//! kernels are launched over fewer blocks at a smaller batch), so what must hold is that every
//! rendered kernel reports how its blocks cover the outer extent, that the blocks a smaller batch
//! launches never exceed the rendered grid and still cover every outer unit, and that the sources
//! compile with NVRTC. The launches themselves run in `device_dynamic.rs` on a GPU.

mod common;

use common::{cuda_caps, nvrtc_available};
use sinter_core::compile::{CompileOptions, compile};
use sinter_core::kernel::dynamic::OuterUnit;
use sinter_core::kernel::interp::InterpBackend;
use sinter_core::kernel::{KernelBody, Program};
use sinter_core::prelude::*;
use sinter_cuda::nvrtc::{self, Target};
use sinter_cuda::render::{self, CudaCaps, Tuning, candidates};
use std::sync::Arc;

/// The program `g` compiles to when it serves every batch up to `bound`, scheduled for CUDA (the
/// scheduling `device_dynamic.rs` gets on an H100: its compiles must be accepted as dynamic).
fn dynamic_program(g: &Graph, shapes: &[Vec<usize>], bound: usize) -> Program {
    let backend = Arc::new(InterpBackend::with_caps(cuda_caps()));
    let opts = CompileOptions { cache_dir: None, debug_dir: None, dynamic: Some(bound), ..CompileOptions::default() };
    let c = compile(g, backend, opts).unwrap();
    let ir = g.build().unwrap();
    let inputs: Vec<HostTensor> = shapes
        .iter()
        .zip(&ir.inputs)
        .enumerate()
        .map(|(k, (s, &i))| HostTensor::random(ir.ty(i).dtype, s.clone(), k as u64, -1.0, 1.0))
        .collect();
    c.run(&inputs).unwrap();
    let p = c.program().unwrap();
    assert!(p.dynamic.is_some(), "{:?}", c.events());
    p
}

fn graphs() -> Vec<(Graph, Vec<Vec<usize>>)> {
    let mlp = Graph::new();
    let x = mlp.input("x", DType::F32, vec![Dim::sym("batch"), Dim::Static(48)]);
    let w = mlp.constant(HostTensor::random(DType::F32, vec![48, 40], 3, -0.5, 0.5));
    let h = x.matmul(&w).gelu();
    let m = h.mean(&[-1], true);
    mlp.output(&(&h - &m).softmax(-1));
    let bmm = Graph::new();
    let a = bmm.input("a", DType::F32, vec![Dim::sym("batch"), Dim::Static(33), Dim::Static(16)]);
    let b = bmm.input("b", DType::F32, vec![Dim::sym("batch"), Dim::Static(16), Dim::Static(20)]);
    bmm.output(&a.matmul(&b).relu().sum(&[-1], false));
    let mut out = vec![(mlp, vec![vec![3, 48]]), (bmm, vec![vec![3, 33, 16], vec![3, 16, 20]])];
    // The attention cases of `device_dynamic.rs`: the f32 rows template, bf16 tensor cores, decode.
    for (dtype, seq, d) in [(DType::F32, 37, 32), (DType::BF16, 128, 64), (DType::BF16, 1, 64)] {
        let g = Graph::new();
        let dims = |s: usize| vec![Dim::sym("batch"), Dim::Static(4), Dim::Static(s), Dim::Static(d)];
        let kv = seq.max(16);
        let q = g.input("q", dtype, dims(seq));
        let k = g.input("k", dtype, dims(kv));
        let v = g.input("v", dtype, dims(kv));
        g.output(&q.attention(&k, &v, None, None, seq > 1));
        out.push((g, vec![vec![3, 4, seq, d], vec![3, 4, kv, d], vec![3, 4, kv, d]]));
    }
    let conv = Graph::new();
    let x = conv.input("x", DType::F32, vec![Dim::sym("batch"), Dim::Static(3), Dim::Static(16), Dim::Static(16)]);
    let w = conv.constant(HostTensor::random(DType::F32, vec![8, 3, 3, 3], 5, -0.3, 0.3));
    conv.output(&x.conv2d(&w, None, [1, 1], [1, 1, 1, 1], [1, 1], 1).relu().mean(&[2, 3], false));
    out.push((conv, vec![vec![3, 3, 16, 16]]));
    out
}

#[test]
fn rendered_splits_cover_every_smaller_batch_within_the_grid() {
    let caps = CudaCaps::hopper();
    for ((g, shapes), bound) in graphs().into_iter().flat_map(|c| [(c.clone(), 8), (c, 16)]) {
        let p = dynamic_program(&g, &shapes, bound);
        let ext = p.dynamic.clone().unwrap();
        assert_eq!(ext.bound, bound);
        let mut units_seen = Vec::new();
        for (i, k) in p.kernels.iter().enumerate() {
            // The default a dynamic program renders with (no persistent grid), then every candidate.
            let mut tunings = vec![render::fixed_grid_default(k, &caps).unwrap_or_default()];
            tunings.extend(candidates(k, &caps));
            for (i_t, t) in tunings.iter().enumerate() {
                let r = render::render(k, &caps, t).unwrap_or_else(|e| panic!("{}: {e}", k.name));
                let Some(split) = r.split else {
                    // Library products and persistent attention tiles cover only their compiled
                    // extent (max-autotune candidates, not defaults).
                    let persistent = r.strategy.contains("persistent") && i_t > 0;
                    assert!(
                        matches!(k.body, KernelBody::Matmul(_)) || persistent,
                        "{} ({}) reports no split",
                        k.name,
                        r.strategy
                    );
                    continue;
                };
                units_seen.push(split.unit);
                for v in 1..=ext.bound {
                    let q = ext.at(&p, v).unwrap();
                    let ki = &q.kernels[i];
                    let blocks = split.blocks(ki).unwrap();
                    assert!(blocks <= u64::from(r.grid[0]), "{} {}: {blocks} > {:?}", k.name, r.strategy, r.grid);
                    let units = match &ki.body {
                        KernelBody::Pointwise { numel, .. } => *numel,
                        KernelBody::Reduce(b) => b.rows,
                        KernelBody::Matmul(m) if split.unit == OuterUnit::MatmulM => m.m,
                        KernelBody::Matmul(m) => m.batch,
                        KernelBody::Attention(a) => a.batch * a.heads,
                    } as u64;
                    assert!(blocks / split.inner.max(1) * split.per >= units, "{} at batch {v}", k.name);
                }
            }
        }
        assert!(!units_seen.is_empty());
    }
}

#[test]
fn dynamic_programs_compile_with_nvrtc() {
    if !nvrtc_available("dynamic_programs_compile_with_nvrtc") {
        return;
    }
    let caps = CudaCaps::hopper();
    let target = Target::sm(caps.sm);
    for (g, shapes) in graphs() {
        let p = dynamic_program(&g, &shapes, 8);
        for k in &p.kernels {
            let r = render::render(k, &caps, &Tuning::default()).unwrap();
            nvrtc::compile(&r.name, &r.source, &target).unwrap_or_else(|e| panic!("{}: {e}", k.name));
        }
    }
}
