//! Implicit GEMM and TF32 without a device: the CUDA backend's scheduler options on convolutions
//! (the plan chosen and recorded, the im2col view run by the kernel-IR interpreter against the CPU
//! reference, ResNet-18 included), and the tensor-core template's TF32 and implicit sources
//! (snapshots; every source NVRTC-compiled for sm_90a without warnings, no spills at ResNet-18's
//! sizes) — the device tests (`device_implicit.rs`) run them.

mod common;

use common::*;
use sinter_core::DType;
use sinter_core::kernel::interp::{run_program, validate};
use sinter_core::kernel::print::print_program;
use sinter_core::kernel::{KernelBody, MatmulBody, Program};
use sinter_core::schedule::{AllowTf32, ScheduleOptions, schedule};
use sinter_core::tensor::HostTensor;
use sinter_core::workloads::{self, Scale};
use sinter_cuda::render::{self, CudaCaps, MmaTile, Rendered, Tuning};

/// [`conv_case`] as a built graph and its inputs (seeds 1 to 4).
fn conv_graph(c: Conv, dt: DType) -> (sinter_core::ir::Graph, Vec<HostTensor>) {
    let (g, ins) = conv_case(c, dt, 1);
    (g.build().expect("build"), ins.to_vec())
}

fn schedule_with(g: &sinter_core::ir::Graph, tf32: AllowTf32) -> Program {
    let ir = sinter_core::passes::optimize(g).expect("passes");
    let opts = ScheduleOptions { tf32, ..cuda_options() };
    let p = schedule(&ir, &cuda_caps(), &opts).unwrap_or_else(|e| panic!("schedule: {e}"));
    validate(&p).unwrap_or_else(|e| panic!("invalid: {e}\n{}", print_program(&p)));
    p
}

fn matmul(p: &Program) -> &MatmulBody {
    p.kernels
        .iter()
        .find_map(|k| match &k.body {
            KernelBody::Matmul(m) => Some(m),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no matmul\n{}", print_program(p)))
}

/// NVRTC-compiles `r` for sm_90a (no warnings; `no_spills`: no spill stores) when NVRTC is there
/// (a failure without it under `SINTER_REQUIRE_NVRTC=1`).
fn compile(r: &Rendered, no_spills: bool) {
    if !nvrtc_available("implicit GEMM compiles") {
        return;
    }
    let c = sinter_cuda::nvrtc::compile(&r.name, &r.source, &sinter_cuda::nvrtc::Target::hopper())
        .unwrap_or_else(|e| panic!("{} does not compile: {e}\n{}", r.name, r.source));
    let warnings: Vec<&str> = c.log.lines().filter(|l| l.contains("warning")).collect();
    assert!(warnings.is_empty(), "{} compiles with warnings:\n{}\n{}", r.name, c.log, r.source);
    eprintln!(
        "{}: {}",
        r.strategy,
        c.log.lines().filter(|l| l.contains("registers") || l.contains("spill")).collect::<Vec<_>>().join(" | ")
    );
    if no_spills {
        let res = sinter_cuda::nvrtc::resources(&c.log, &r.name).expect("resources");
        assert_eq!(res.spill_bytes, 0, "{} ({}): spills\n{}", r.name, r.strategy, c.log);
    }
}

/// (x, w, stride, padding, dilation, groups) at awkward shapes: batch 1 and 3, 1/3/7 channels,
/// stride 2, padding, dilation, groups, a strided 1x1.
const AWKWARD: [Conv; 7] = [
    ([1, 1, 5, 5], [16, 1, 5, 5], [1, 1], [2; 4], [1, 1], 1),
    ([3, 3, 9, 7], [16, 3, 3, 3], [2, 2], [1; 4], [1, 1], 1),
    ([1, 7, 6, 5], [24, 7, 3, 3], [1, 1], [1; 4], [1, 1], 1),
    ([3, 5, 9, 8], [32, 5, 3, 2], [1, 2], [2, 0, 1, 3], [2, 2], 1),
    ([1, 3, 15, 13], [16, 3, 7, 7], [2, 2], [3; 4], [1, 1], 1),
    ([3, 32, 6, 6], [32, 16, 3, 3], [1, 1], [1; 4], [1, 1], 2),
    ([3, 16, 7, 7], [32, 16, 1, 1], [2, 2], [0; 4], [1, 1], 1),
];

#[test]
fn cuda_options_choose_implicit_gemm_and_the_interpreter_agrees() {
    for (i, &c) in AWKWARD.iter().enumerate() {
        for (dt, tf32) in [(DType::F32, AllowTf32::CONV), (DType::BF16, AllowTf32::CONV), (DType::F32, AllowTf32::OFF)]
        {
            let (g, ins) = conv_graph(c, dt);
            let p = schedule_with(&g, tf32);
            let ctx = format!("case {i} {dt} tf32 {tf32}\n{}", print_program(&p));
            let lowering = p.decisions.iter().find(|d| d.reason.starts_with("conv lowering")).expect("decision");
            let mm = matmul(&p);
            if dt == DType::F32 && !tf32.conv {
                // Exact f32: the gather and a product cuBLASLt runs exactly, the refusal recorded.
                assert!(mm.b.im2col.is_none() && !mm.tf32, "{ctx}");
                assert!(lowering.reason.contains("implicit GEMM: exact f32"), "{ctx}");
            } else {
                assert!(mm.b.im2col.is_some(), "{ctx}");
                assert_eq!(mm.tf32, dt == DType::F32, "{ctx}");
                assert!(lowering.reason.starts_with("conv lowering: implicit GEMM: "), "{ctx}");
                assert_eq!(p.kernels.len(), 1, "{ctx}");
            }
            let got = run_program(&p, &ins).unwrap_or_else(|e| panic!("{ctx}: {e}"));
            let want = sinter_core::cpu::run(&g, &ins).expect("reference");
            let k = c.1[1] * c.1[2] * c.1[3];
            // The interpreter computes exactly (TF32 is a property it may ignore).
            let tol = sinter_core::testsuite::Tol::sum(k, 16.0);
            sinter_core::testsuite::compare(&got, &want, tol).unwrap_or_else(|e| panic!("{ctx}: {e}"));
        }
    }
}

#[test]
fn resnet18_runs_its_convolutions_as_implicit_gemms() {
    let w = workloads::get("resnet18_b32_f32").expect("resnet18");
    let p = scheduled(&w);
    let convs: Vec<&str> =
        p.decisions.iter().filter(|d| d.reason.starts_with("conv lowering")).map(|d| d.reason.as_str()).collect();
    assert_eq!(convs.len(), 20, "{convs:#?}");
    // Every 3x3, 7x7 and strided 1x1 conv is implicit (no 1x1 stride-1 conv in ResNet-18).
    for r in &convs {
        assert!(r.starts_with("conv lowering: implicit GEMM: ") && r.contains("TF32"), "{r}");
    }
    assert!(!p.kernels.iter().any(|k| k.name.contains("im2col")), "{}", print_program(&p));
    let implicit =
        p.kernels.iter().filter(|k| matches!(&k.body, KernelBody::Matmul(m) if m.b.im2col.is_some() && m.tf32)).count();
    assert_eq!(implicit, 20);
    // The classifier's matmul stays exact (PyTorch's default: TF32 for convolutions only).
    let fc = p.kernels.last().expect("kernel");
    assert!(matches!(&fc.body, KernelBody::Matmul(m) if !m.tf32 && m.b.im2col.is_none()), "{}", fc.name);
    // Through the interpreter against the workload's own reference.
    let ins = w.inputs(Scale::Reduced, 7);
    let got = run_program(&p, &ins).expect("interp");
    let want = w.reference(Scale::Reduced, &ins).expect("reference");
    let (rtol, atol) = w.tolerance();
    let cmp = sinter_core::compare::compare_outputs(&got, &want, |_| (rtol, atol));
    assert!(cmp.ok(), "{:?}", cmp.problem);
}

/// Every ResNet-18 convolution has a cuDNN form: the geometry read back from the
/// kernel is the workload's, and its epilogue (bias, residual, ReLU on the NCHW scratch) renders
/// and NVRTC-compiles as a pointwise kernel.
#[test]
fn resnet18_convolutions_have_cudnn_forms_whose_epilogues_compile() {
    use sinter_core::kernel::library_conv::split_conv;
    let w = workloads::get("resnet18_b32_f32").expect("resnet18");
    let p = scheduled(&w);
    let mut seen = 0;
    for k in p.kernels.iter().filter(|k| matches!(&k.body, KernelBody::Matmul(m) if m.b.im2col.is_some())) {
        let s = split_conv(k).unwrap_or_else(|e| panic!("{}: {e}", k.name));
        let c = &s.conv;
        assert_eq!((c.groups, c.dilation), (1, [1, 1]), "{}", k.name);
        assert!(c.tf32 && c.dtype == DType::F32, "{}", k.name);
        // 7x7 stride 2 pad 3, 3x3 pad 1, 1x1 stride 2 pad 0: ResNet's windows.
        let want_pad = match c.kernel {
            [7, 7] => [3, 3],
            [3, 3] => [1, 1],
            [1, 1] => [0, 0],
            other => panic!("{}: window {other:?}", k.name),
        };
        assert_eq!(c.pad, want_pad, "{}", k.name);
        assert_eq!(s.epilogue.args.len(), k.args.len() + 1);
        let r = render::render(&s.epilogue, &CudaCaps::hopper(), &Tuning::default()).expect("render");
        // Not checked for spills: the unfolded batch norm's `1 / sqrt` keeps a 4-byte stack slot
        // in ptxas's slow path at any size.
        compile(&r, false);
        seen += 1;
    }
    assert_eq!(seen, 20);
}

/// The implicit template at ResNet-18's full-size layers (batch 32): TF32, bf16, f16 and the
/// CUDA-core template (exact f32), each compiling without spills; one TF32 source snapshotted.
#[test]
fn implicit_templates_compile_at_resnet_sizes() {
    let layers: [Conv; 5] = [
        ([32, 3, 224, 224], [64, 3, 7, 7], [2, 2], [3; 4], [1, 1], 1),
        ([32, 64, 56, 56], [64, 64, 3, 3], [1, 1], [1; 4], [1, 1], 1),
        ([32, 128, 28, 28], [256, 128, 3, 3], [2, 2], [1; 4], [1, 1], 1),
        ([32, 256, 14, 14], [512, 256, 1, 1], [2, 2], [0; 4], [1, 1], 1),
        ([32, 512, 7, 7], [512, 512, 3, 3], [1, 1], [1; 4], [1, 1], 1),
    ];
    let mut shown = String::new();
    for (i, &c) in layers.iter().enumerate() {
        for dt in [DType::F32, DType::BF16, DType::F16] {
            let (g, _) = conv_graph(c, dt);
            let p = schedule_with(&g, AllowTf32::CONV);
            let k = &p.kernels[0];
            let KernelBody::Matmul(mm) = &k.body else { panic!("no matmul\n{}", print_program(&p)) };
            assert!(mm.b.im2col.is_some());
            let r = render::render(k, &CudaCaps::hopper(), &Tuning::default()).expect("render");
            assert!(r.strategy.starts_with("mma "), "{}", r.strategy);
            assert_eq!(r.compute, (dt == DType::F32).then_some("tf32"), "{dt}");
            assert!(r.source.contains("B the implicit im2col view"), "{}", r.source);
            // The last stage (512 x 1568 x 4608: 52 tiles of 128 x 128 or 100 of 128 x 64 for 132
            // SMs) splits k on the smaller tile (the larger one spills with the split's sum).
            if i == 4 {
                let want = if dt == DType::F32 {
                    "mma 128x64x32 w2x2 s3 split-k 2"
                } else {
                    "mma 128x64x64 w2x2 s3 split-k 2"
                };
                assert_eq!(r.strategy, want);
            }
            compile(&r, true);
            if i == 1 && dt == DType::F32 {
                assert!(r.source.contains("sinter_mma_tf32") && r.source.contains("sinter_cp_async4"));
                shown.push_str(&format!("// ==== {dt} ({})\n{}", r.strategy, r.source));
            }
            // Exact f32: the CUDA-core template reads the same view.
            if dt == DType::F32 {
                let mut exact = k.clone();
                let KernelBody::Matmul(m) = &mut exact.body else { unreachable!() };
                m.tf32 = false;
                let r = render::render(&exact, &CudaCaps::hopper(), &Tuning::default()).expect("render");
                assert!(r.strategy.starts_with("matmul "), "{}", r.strategy);
                compile(&r, true);
                if i == 1 {
                    shown.push_str(&format!("// ==== exact f32 ({})\n{}", r.strategy, r.source));
                }
            }
        }
    }
    insta::assert_snapshot!(shown);
}

/// f32 matmuls allowed TF32 take the tensor cores by default, at every tile candidate and
/// layout (k-major and k-minor operands, 16-byte and 4-byte copies), compiling without warnings
/// (no spills for the default tile); exact f32 stays on the CUDA-core template.
#[test]
fn tf32_matmul_tiles_and_layouts_compile() {
    let layouts =
        [(false, false, 0), (false, true, 0), (true, false, 0), (true, true, 0), (false, false, 1), (true, true, 3)];
    let mut shown = String::new();
    for (i, t) in MmaTile::CANDIDATES.iter().enumerate() {
        for (j, &(a_t, b_t, pad)) in layouts.iter().enumerate() {
            if i > 0 && j != i % 6 {
                continue;
            }
            let mut p =
                matmul_layout(2, 300, 200, 72, DType::F32, DType::F32, Layout { a_t, b_t, pad, b_batched: false });
            let k = &mut p.kernels[0];
            let exact = render::render(k, &CudaCaps::hopper(), &Tuning::default()).expect("render");
            assert!(exact.strategy.starts_with("matmul "), "{}", exact.strategy);
            // The profile rates exact f32 against the f32 peak, TF32 against the TF32 one.
            assert_eq!(exact.compute, None);
            let KernelBody::Matmul(m) = &mut k.body else { unreachable!() };
            m.tf32 = true;
            let simt = Tuning { tile: Some(render::MatmulTile::CANDIDATES[0]), ..Tuning::default() };
            assert_eq!(render::render(k, &CudaCaps::hopper(), &simt).expect("CUDA-core tile").compute, None);
            // f32 tiles take twice the shared memory: the deepest candidates do not fit.
            let r = match render::render(k, &CudaCaps::hopper(), &Tuning { mma: Some(*t), ..Tuning::default() }) {
                Ok(r) => r,
                Err(e) if e.to_string().contains("bytes of shared memory") && t.bk * t.stages >= 192 => continue,
                Err(e) => panic!("{t:?}: {e}"),
            };
            assert!(r.strategy.starts_with("mma "), "{}", r.strategy);
            assert!(r.source.contains("TF32 mma.sync m16n8k8"));
            assert_eq!(r.compute, Some("tf32"));
            compile(&r, i == 0);
            if i == 0 && matches!(j, 0 | 5) {
                shown.push_str(&format!("// ==== a_t {a_t} b_t {b_t} pad {pad} ({})\n{}", r.strategy, r.source));
            }
            let d = render::render(k, &CudaCaps::hopper(), &Tuning::default()).expect("default");
            assert!(d.strategy.starts_with("mma "), "{}", d.strategy);
        }
    }
    insta::assert_snapshot!(shown);
    // No TF32 below sm_80; the tensor-core tile is refused for exact f32 by name.
    let p = matmul_layout(1, 64, 64, 64, DType::F32, DType::F32, Layout::default());
    let e =
        render::render(&p.kernels[0], &CudaCaps::hopper(), &Tuning { mma: Some(MmaTile::SMALL), ..Tuning::default() })
            .unwrap_err()
            .to_string();
    assert!(e.contains("f32 only where TF32 is allowed"), "{e}");
    let mut k = p.kernels[0].clone();
    let KernelBody::Matmul(m) = &mut k.body else { unreachable!() };
    m.tf32 = true;
    let old = CudaCaps { sm: (7, 5), ..CudaCaps::hopper() };
    let e = render::mma_applies(m, &old).unwrap_err();
    assert!(e.contains("m16n8k8 (TF32)"), "{e}");
}
