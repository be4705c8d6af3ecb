//! `matmul_8192_fp8e4m3` end to end at reduced scale: on the kernel-IR interpreter (one fused
//! kernel reading the fp8 operands directly) and on WGSL, which has no fp8: the casts of the fp8
//! inputs break the graph and run on the CPU reference, the f32 product, its scales and the cast
//! to bf16 run on the GPU. Both agree with the workload's independent reference, which computes
//! from the fp8 values (the inputs are fp8 tensors, rounded when drawn).
//!
//! Without an adapter the WGSL half prints `SKIPPED`; with `SINTER_REQUIRE_GPU=1` it fails instead.

mod common;

use sinter::workloads::{self, Scale};
use sinter::{Backend, Options};

fn workload() -> (workloads::Workload, sinter::IrGraph, Vec<sinter::HostTensor>, Vec<sinter::HostTensor>) {
    let w = workloads::get("matmul_8192_fp8e4m3").expect("the fp8 workload");
    let g = w.build(Scale::Reduced).expect("build");
    let inputs = w.inputs(Scale::Reduced, 11);
    let want = w.reference(Scale::Reduced, &inputs).expect("reference");
    (w, g, inputs, want)
}

#[test]
fn fp8_workload_on_the_interpreter_is_one_kernel_reading_fp8() {
    let (w, g, inputs, want) = workload();
    assert_eq!(inputs[0].dtype(), sinter::DType::F8E4M3);
    let opts = Options { backend: Backend::Interp, cache_dir: None, debug_dir: None, ..Options::default() };
    let c = sinter::compile(&g, opts).expect("compile");
    let got = c.run(&inputs).expect("run");
    let (rtol, atol) = w.tolerance();
    let r = got[0].tolerance_ratio(&want[0], rtol, atol);
    assert!(r <= 1.0, "interpreter vs reference: {r:.3}x tolerance");
    assert!(c.graph_breaks().is_empty());
    let p = c.program().expect("one program");
    assert_eq!(p.kernels.len(), 1, "{:?}", p.kernels.iter().map(|k| &k.name).collect::<Vec<_>>());
    let sinter::core::kernel::KernelBody::Matmul(m) = &p.kernels[0].body else { panic!("not a matmul kernel") };
    assert_eq!((m.in_dtype, m.acc_dtype), (sinter::DType::F8E4M3, sinter::DType::F32));
    // The scales are applied: the same inputs with both scales doubled give four times the result.
    let mut doubled = inputs.clone();
    for s in &mut doubled[2..] {
        *s = sinter::HostTensor::scalar(sinter::DType::F32, s.to_f64_vec()[0] * 2.0);
    }
    let four = c.run(&doubled).expect("run")[0].to_f64_vec();
    for (a, b) in four.iter().zip(got[0].to_f64_vec()) {
        assert!((a - 4.0 * b).abs() <= 1e-2 * a.abs().max(1e-3), "{a} vs 4 x {b}");
    }
}

#[test]
fn fp8_workload_on_wgsl_breaks_the_graph_at_the_casts() {
    if common::gpu_or_skip("wgsl", sinter::backend(Backend::Wgsl)).is_none() {
        return;
    }
    let (w, g, inputs, want) = workload();
    let opts = Options { backend: Backend::Wgsl, cache_dir: None, debug_dir: None, ..Options::default() };
    let c = sinter::compile(&g, opts).expect("compile with graph breaks");
    let got = c.run(&inputs).expect("run");
    let (rtol, atol) = w.tolerance();
    let r = got[0].tolerance_ratio(&want[0], rtol, atol);
    assert!(r <= 1.0, "WGSL with graph breaks vs reference: {r:.3}x tolerance");
    let breaks = c.graph_breaks();
    assert!(!breaks.is_empty() && breaks.iter().all(|b| b.to_string().contains("f8e4m3")), "{breaks:?}");
    // The casts run on the CPU, everything after them on the GPU.
    let segs: Vec<bool> = c.segments().iter().map(|s| s.1).collect();
    assert_eq!(segs, [false, true], "{:?}", c.segments());
    assert!(c.sources().iter().all(|s| s.ext == "wgsl"));
    // Without graph breaks the fp8 graph is refused, naming the dtype.
    let off =
        Options { backend: Backend::Wgsl, cache_dir: None, debug_dir: None, graph_breaks: false, ..Options::default() };
    let e = sinter::compile(&g, off).err().expect("fp8 compiled on WGSL without a graph break").to_string();
    assert!(e.contains("f8e4m3"), "{e}");
}
