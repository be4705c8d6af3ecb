//! The PTX path (`render::ptx`): which workloads' kernels it writes and why not the others, its
//! literals, and a program's modules combined into one (as the NVRTC batch groups them), each
//! assembled by ptxas where `SINTER_PTXAS` names one (`common::ptxas`; CI sets it). The modules
//! of every workload and candidate are assembled in `tests/nvrtc.rs`; their text is snapshotted
//! in `tests/render.rs`.

mod common;

use common::*;
use sinter_core::DType;
use sinter_core::kernel::Expr;
use sinter_core::schedule::{ScheduleOptions, schedule};
use sinter_core::workloads::{self, Scale};
use sinter_cuda::nvrtc;
use sinter_cuda::render::{self, CudaCaps, Tuning};

/// The renderer writes PTX (no NVRTC, `render::ptx`) for the memory-bound workloads' kernels it
/// covers and says why not for the others (the tensor-core templates stay CUDA C++).
#[test]
fn memory_bound_workloads_are_written_in_ptx() {
    let mut seen = Vec::new();
    for w in workloads::all() {
        let p = scheduled(&w);
        for k in &p.kernels {
            let r = render::render(k, &CudaCaps::hopper(), &Tuning::default()).unwrap();
            let why = render::ptx::why_not(k, &CudaCaps::hopper(), &Tuning::default());
            assert_eq!(render::ptx::is_ptx(&r.source), why.is_empty(), "{} {}: {why}", w.name, k.name);
            assert_eq!(r.strategy.ends_with(" ptx"), why.is_empty(), "{} {}", w.name, k.name);
            seen.push((w.name, k.name.clone(), why));
        }
    }
    let ptx = |name: &str| seen.iter().filter(|(w, ..)| *w == name).all(|(.., why)| why.is_empty());
    for name in ["add_relu_mul_10M_f32", "cos_16M_f32", "cos_cos_16M_f32", "pointwise_chain64_1024_f32"] {
        assert!(ptx(name), "{name}: {seen:?}");
    }
    // f32 softmax and GELU take libdevice's `expf` and `erff` through NVRTC (the PTX ones cost
    // more instructions: `ptx::math`'s doc).
    for (name, op) in [("softmax_8192x8192_f32", "exp"), ("layernorm_gelu_8192x4096_f32", "erf")] {
        let why: Vec<&String> = seen.iter().filter(|(w, ..)| *w == name).map(|(.., why)| why).collect();
        assert!(why.iter().all(|w| w.contains(op)), "{name}: {why:?}");
    }
    // A bf16 product's softmax (16-bit outputs: `__expf` and the reciprocal) and a cuBLASLt
    // product's GELU epilogue's neighbours: the softmax is PTX, the product CUDA C++.
    let of = |w: &str, k: &str| seen.iter().find(|(n, kn, _)| *n == w && kn.ends_with(k)).map(|(.., why)| why.clone());
    assert_eq!(of("matmul_softmax_4096_bf16", "softmax").as_deref(), Some(""));
    assert!(!of("matmul_softmax_4096_bf16", "matmul").unwrap_or_default().is_empty());
    // Off with the device's capabilities: every kernel CUDA C++.
    let off = CudaCaps { ptx: false, ..CudaCaps::hopper() };
    let p = scheduled(&workloads::get("cos_16M_f32").expect("workload"));
    let r = render::render(&p.kernels[0], &off, &Tuning::default()).unwrap();
    assert!(!render::ptx::is_ptx(&r.source) && r.source.contains("extern \"C\" __global__"));
}

/// A 16-bit constant is written at its dtype's precision (as the C++ renderer's literal and the
/// reference): 0.1 as bf16 is 0.10009765625 (`0f3DCD0000`), as f32 `0f3DCCCCCD`.
#[test]
fn ptx_constants_take_their_dtype() {
    use sinter_core::ir::BinaryOp;
    use sinter_core::kernel::Access;
    for (d, bits) in [(DType::BF16, "0f3DCD0000"), (DType::F16, "0f3DCCC000"), (DType::F32, "0f3DCCCCCD")] {
        let mut p = ProgramBuilder::new();
        let x = p.input("x", d, &[4096]);
        let y = p.output("y", d, &[4096]);
        let mut kb = KernelBuilder::new("k0_mul", &["mul"]);
        let (ax, ay) = (kb.arg(&p, x, Access::Read), kb.arg(&p, y, Access::Write));
        let v = kb.load(ax, lane());
        let c = kb.konst(0.1, d);
        let m = kb.e(Expr::Binary(BinaryOp::Mul, v, c), d);
        p.kernel(kb.pointwise(4096, vec![st(ay, lane(), m)]));
        let prog = p.build_checked();
        let r = render::render(&prog.kernels[0], &CudaCaps::hopper(), &Tuning::default()).unwrap();
        assert!(render::ptx::is_ptx(&r.source), "{d}: {}", r.strategy);
        assert!(r.source.contains(bits), "{d}: {bits} in\n{}", r.source);
        if let Some(r) = ptxas(&r.source, "ptx_constants") {
            r.unwrap_or_else(|log| panic!("{d}: ptxas: {log}"));
        }
    }
}

/// Each workload's PTX modules (unfused: many pointwise kernels and reductions, `sin` slow paths,
/// shared arrays) combined into one module (`ptx::combine`, as `compile_parallel` groups them)
/// assemble, with every entry's resources in ptxas's log.
#[test]
fn ptx_modules_of_a_program_combine_into_one() {
    let caps = cuda_caps();
    let cuda = CudaCaps::hopper();
    let mut combined = 0;
    for w in workloads::all() {
        let g = w.build(Scale::Reduced).unwrap();
        let opt = sinter_core::passes::optimize(&g).unwrap();
        let p = schedule(&opt, &caps, &ScheduleOptions::eager()).unwrap();
        let rendered: Vec<_> = p
            .kernels
            .iter()
            .map(|k| render::render(k, &cuda, &Tuning::default()).unwrap())
            .filter(|r| render::ptx::is_ptx(&r.source))
            .collect();
        if rendered.len() < 2 {
            continue;
        }
        let sources: Vec<&str> = rendered.iter().map(|r| r.source.as_str()).collect();
        let one = render::ptx::combine(&sources);
        assert!(render::ptx::is_ptx(&one));
        assert_eq!(one.matches(".version").count(), 1, "{}", w.name);
        let Some(result) = ptxas(&one, w.name) else { return };
        let log = result.unwrap_or_else(|log| panic!("{}: the combined module: {log}\n{one}", w.name));
        for r in &rendered {
            assert!(nvrtc::resources(&log, &r.name).is_some(), "{}: no resources for {} in\n{log}", w.name, r.name);
        }
        combined += 1;
    }
    assert!(combined >= 3, "only {combined} workloads had several PTX modules");
}
