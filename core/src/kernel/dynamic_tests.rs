use super::*;
use crate::compile::{Signature, retype};
use crate::kernel::Capabilities;
use crate::kernel::interp::run_program;
use crate::prelude::*;
use crate::schedule::{ScheduleOptions, schedule};

/// The program of `g` with every symbol-bearing input's outer dimension at `batch`.
fn program_at(g: &Graph, shapes: &[Vec<usize>], batch: usize) -> Program {
    let ir = g.build().unwrap();
    let sig = Signature(
        ir.inputs
            .iter()
            .zip(shapes)
            .map(|(&i, s)| {
                let mut s = s.clone();
                if ir.ty(i).shape.dims().first().is_some_and(|d| d.as_static().is_none()) {
                    s[0] = batch;
                }
                (ir.ty(i).dtype, s)
            })
            .collect(),
    );
    let mut lowered = retype(&ir, &sig).unwrap();
    for pass in crate::passes::pipeline() {
        lowered = (pass.run)(&lowered).unwrap();
    }
    schedule(&lowered, &Capabilities::host(), &ScheduleOptions::default()).unwrap()
}

/// A linear layer, a bias, GELU and a softmax over features: every kernel scales with the batch
/// through its grid only.
fn mlp() -> Graph {
    let g = Graph::new();
    let x = g.input("x", DType::F32, vec![Dim::sym("batch"), Dim::Static(12)]);
    let w = g.constant(HostTensor::random(DType::F32, vec![12, 20], 3, -0.5, 0.5));
    let b = g.constant(HostTensor::random(DType::F32, vec![20], 4, -0.5, 0.5));
    g.output(&(x.matmul(&w) + &b).gelu().softmax(-1));
    g
}

#[test]
fn a_program_at_the_bound_runs_at_every_smaller_batch_as_the_reference_does() {
    let g = mlp();
    let shapes = [vec![0, 12]];
    let (big, small) = (program_at(&g, &shapes, 8), program_at(&g, &shapes, 4));
    let ext = derive(&big, &small, "batch", 8, 4).unwrap();
    assert!(ext.sites.iter().any(|s| matches!(s.site, Site::Input(0)) && s.per == 1 && s.plus == 0), "{ext:?}");
    assert!(ext.sites.iter().any(|s| matches!(s.site, Site::Output(0))), "{ext:?}");
    assert!(ext.sites.iter().any(|s| matches!(s.site, Site::MatmulM(_) | Site::MatmulBatch(_))), "{ext:?}");
    for batch in [1usize, 3, 8] {
        let p = ext.at(&big, batch).unwrap();
        assert_eq!(p.outputs[0].shape, vec![batch, 20]);
        let x = HostTensor::random(DType::F32, vec![batch, 12], batch as u64, -2.0, 2.0);
        let got = run_program(&p, std::slice::from_ref(&x)).unwrap();
        let want = crate::cpu::run(&g, &[x]).unwrap();
        assert!(got[0].tolerance_ratio(&want[0], 1e-5, 1e-6) <= 1.0, "batch {batch}");
    }
    // The instance at the bound is the program itself (less its table).
    let mut same = big.clone();
    same.dynamic = None;
    assert_eq!(ext.at(&big, 8).unwrap(), same);
    assert!(ext.at(&big, 9).unwrap_err().contains("outside 1..=8"));
    assert!(ext.at(&big, 0).is_err());
}

#[test]
fn a_reduction_over_the_batch_is_refused_naming_the_kernel() {
    let g = Graph::new();
    let x = g.input("x", DType::F32, vec![Dim::sym("batch"), Dim::Static(6)]);
    g.output(&x.sum(&[0], false));
    let shapes = [vec![0, 6]];
    let (big, small) = (program_at(&g, &shapes, 8), program_at(&g, &shapes, 4));
    let why = derive(&big, &small, "batch", 8, 4).unwrap_err().reason;
    assert!(why.contains("kernel k") && why.contains("batch"), "{why}");
}

#[test]
fn a_transpose_moving_the_batch_inward_is_refused() {
    let g = Graph::new();
    let x = g.input("x", DType::F32, vec![Dim::sym("batch"), Dim::Static(5)]);
    g.output(&x.permute(&[1, 0]).exp());
    let shapes = [vec![0, 5]];
    let (big, small) = (program_at(&g, &shapes, 8), program_at(&g, &shapes, 4));
    let why = derive(&big, &small, "batch", 8, 4).unwrap_err().reason;
    assert!(why.contains("batch"), "{why}");
}

#[test]
fn probes_outside_the_bound_and_different_schedules_are_refused() {
    let g = mlp();
    let shapes = [vec![0, 12]];
    let big = program_at(&g, &shapes, 8);
    assert!(derive(&big, &big, "batch", 8, 8).is_err());
    assert!(derive(&big, &big, "batch", 8, 1).is_err(), "a probe of 1 would let the scheduler drop an index");
    let mut fewer = big.clone();
    fewer.kernels.pop();
    let why = derive(&big, &fewer, "batch", 8, 4).unwrap_err();
    assert!(why.reason.contains("schedule changes") && why.retry, "{why:?}");
}
