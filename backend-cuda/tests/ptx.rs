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
    // f32 softmax and GELU too: `exp` and `erf` by `ptx::math` (ex2.approx, within 2 ulp).
    for name in [
        "add_relu_mul_10M_f32",
        "cos_16M_f32",
        "cos_cos_16M_f32",
        "pointwise_chain64_1024_f32",
        "softmax_8192x8192_f32",
        "layernorm_gelu_8192x4096_f32",
        // The decode template's common case (`ptx::decode`).
        "attention_decode_b32h32kv4096d128_bf16",
    ] {
        assert!(ptx(name), "{name}: {seen:?}");
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

/// The CUDA-core product's one-step `cp.async` form is PTX (`ptx::matmul`): `matmul_softmax_100_f32`'s
/// 100x100x100 product and odd shapes (batches, B stored `[n, k]`, edges on every side), each
/// with the C++ renderer's launch for the same kernel and tuning; products of several steps,
/// 16-bit or f64 operands and tensor-core products are refused with a reason (CUDA C++).
#[test]
fn one_step_products_are_written_in_ptx() {
    use sinter_core::kernel::KernelBody;
    use sinter_cuda::render::MatmulTile;
    let hopper = CudaCaps::hopper();
    let same_launch = |k: &sinter_core::kernel::Kernel, t: &Tuning| {
        let r = same_launch_as_cpp(k, t, &k.name);
        if let Some(log) = assembled(&r, &k.name) {
            let res = nvrtc::resources(&log, &r.name).expect("resources");
            assert_eq!(res.spill_bytes, 0, "{log}");
            // Two blocks an SM, as the C++'s `__launch_bounds__(threads, 2)` keeps.
            assert!(res.registers * r.block[0] * 2 <= 65536, "{}: {} registers\n{log}", k.name, res.registers);
            eprintln!("{}: {} ({} registers)", k.name, r.strategy, res.registers);
        }
        r
    };
    let w = workloads::get("matmul_softmax_100_f32").expect("workload");
    let g = sinter_core::passes::optimize(&w.build(Scale::Full).unwrap()).unwrap();
    let p = schedule(&g, &cuda_caps(), &cuda_options()).unwrap();
    let k = p.kernels.iter().find(|k| matches!(k.body, KernelBody::Matmul(_))).expect("a product");
    let r = same_launch(k, &Tuning::default());
    assert_eq!(r.strategy, "matmul 32x32x100 4x4 ptx");
    assert!(r.source.contains("cp.async.ca.shared.global [") && r.source.contains("fma.rn.f32"));
    for (batch, m, n, kd, b_t) in
        [(1, 100, 96, 72, false), (3, 37, 41, 29, true), (2, 7, 1, 1, false), (1, 1, 100, 128, true)]
    {
        let p = matmul_bias_relu(batch, m, n, kd, DType::F32, DType::F32, b_t);
        same_launch(&p.kernels[0], &Tuning::default());
    }
    // Every candidate tile that takes k = 8 in one step, 256 threads among them.
    let p = matmul_bias_relu(2, 300, 200, 8, DType::F32, DType::F32, false);
    for tile in MatmulTile::CANDIDATES {
        same_launch(&p.kernels[0], &Tuning { tile: Some(tile), ..Tuning::default() });
    }
    let refused = |k: &sinter_core::kernel::Kernel, t: &Tuning, why: &str| {
        let r = render::render(k, &hopper, t).unwrap();
        let got = render::ptx::why_not(k, &hopper, t);
        assert!(!render::ptx::is_ptx(&r.source) && got.contains(why), "{}: {got:?}, not {why:?}", k.name);
    };
    // Several steps: deeper than `WHOLE_K_MAX`, or a tuning's 8-deep tile.
    let deep = matmul_bias_relu(1, 100, 100, 129, DType::F32, DType::F32, false);
    refused(&deep.kernels[0], &Tuning::default(), "17 steps of 8 along k");
    refused(k, &Tuning { tile: Some(MatmulTile::LARGE), ..Tuning::default() }, "13 steps of 8 along k");
    let bf16 = matmul_bias_relu(1, 100, 100, 100, DType::BF16, DType::F32, false);
    refused(&bf16.kernels[0], &Tuning::default(), "tensor-core product");
    let whole = MatmulTile { bk: 100, ..MatmulTile::SMALL };
    refused(&bf16.kernels[0], &Tuning { tile: Some(whole), ..Tuning::default() }, "operands bf16");
    let f64 = matmul_bias_relu(1, 37, 41, 29, DType::F64, DType::F64, false);
    refused(&f64.kernels[0], &Tuning::default(), "operands f64");
}

/// The PTX rendering of `k` with `t`, whose launch equals the CUDA C++ renderer's (grid, block,
/// split, shared memory, scratch, strategy with " ptx", one pointer parameter per argument).
fn same_launch_as_cpp(k: &sinter_core::kernel::Kernel, t: &Tuning, what: &str) -> render::Rendered {
    let hopper = CudaCaps::hopper();
    let r = render::render(k, &hopper, t).unwrap_or_else(|e| panic!("{what}: {e}"));
    let why = render::ptx::why_not(k, &hopper, t);
    assert!(render::ptx::is_ptx(&r.source), "{what}: {why}");
    let c = render::render(k, &CudaCaps { ptx: false, ..CudaCaps::hopper() }, t).unwrap();
    assert!(!render::ptx::is_ptx(&c.source));
    assert_eq!(r.strategy, format!("{} ptx", c.strategy), "{what}");
    assert_eq!(
        (r.grid, r.block, &r.split, r.dynamic_shared_bytes, r.scratch_bytes, r.compute, &r.name),
        (c.grid, c.block, &c.split, c.dynamic_shared_bytes, c.scratch_bytes, c.compute, &c.name),
        "{what}"
    );
    assert_eq!(r.source.matches(".param .u64 a").count(), k.args.len(), "{what}");
    r
}

/// ptxas's log of `r`'s module (`None` without ptxas), which it assembles without a warning.
fn assembled(r: &render::Rendered, what: &str) -> Option<String> {
    let log = ptxas(&r.source, what)?.unwrap_or_else(|log| panic!("{what}: ptxas: {log}\n{}", r.source));
    assert!(!log.contains("warning"), "{what}: {log}");
    Some(log)
}

/// [`same_launch_as_cpp`] for a decode kernel, its module assembled and spilling only where
/// NVRTC's build of the C++ spills too (f32 rows at 512 threads, whose budget admits six keys in
/// flight): returns the rendering.
fn decode_as_cpp(k: &sinter_core::kernel::Kernel, t: &Tuning, what: &str) -> render::Rendered {
    let r = same_launch_as_cpp(k, t, what);
    if let Some(log) = assembled(&r, what) {
        let res = nvrtc::resources(&log, &r.name).expect("resources");
        if res.spill_bytes != 0 && nvrtc_available(what) {
            let c = render::render(k, &CudaCaps { ptx: false, ..CudaCaps::hopper() }, t).unwrap();
            let cu = nvrtc::compile(&c.name, &c.source, &nvrtc::Target::hopper()).expect("NVRTC");
            let theirs = nvrtc::resources(&cu.log, &c.name).expect("resources");
            assert!(theirs.spill_bytes > 0, "{what}: PTX {res:?}, NVRTC {theirs:?}");
            eprintln!("{what}: spills as NVRTC's build: PTX {res:?}, NVRTC {theirs:?}");
        }
    }
    r
}

/// The attention decode template's common case is PTX (`ptx::decode`): the decode workload's
/// kernel at full size and reduced shapes (keys 1, 7, 1023, 4097; head dims 64 and 128; f32, f16
/// and bf16; causal or not; one and three queries; an additive mask, BSHD rows; every block size
/// the candidates time), each with the C++ renderer's launch; split decodes, packed GQA heads
/// and the other templates are refused with a reason (CUDA C++).
#[test]
fn decode_attention_is_written_in_ptx() {
    use sinter_core::testsuite::programs::{AttnCase, AttnMask, attention};
    let w = workloads::get("attention_decode_b32h32kv4096d128_bf16").expect("workload");
    let g = sinter_core::passes::optimize(&w.build(Scale::Full).unwrap()).unwrap();
    let p = schedule(&g, &cuda_caps(), &cuda_options()).unwrap();
    assert_eq!(p.kernels.len(), 1);
    let r = decode_as_cpp(&p.kernels[0], &Tuning::default(), w.name);
    assert_eq!(r.strategy, "attention decode block 256 ptx");
    assert!(r.source.contains("ld.global.nc.v4.u32") && r.source.contains("shfl.sync.bfly.b32"));
    let kernel = |c: &AttnCase| attention(c).kernels.into_iter().next().expect("one kernel");
    let split1 = |block: Option<u32>| Tuning { block, split_k: Some(1), ..Tuning::default() };
    let mut written = 0;
    for d in [DType::F32, DType::F16, DType::BF16] {
        for kv in [1, 7, 1023, 4097] {
            for hd in [64, 128] {
                for m in [1, 3] {
                    for causal in [None, Some(0), Some(2)] {
                        let c = AttnCase { causal, ..AttnCase::new(2, 3, m, kv, hd, d) };
                        let k = kernel(&c);
                        // Few heads: the default splits keys past 511 (refused below); one split
                        // is the template unsplit, at every block size the candidates time for
                        // one query without a causal bound.
                        let mut tunings = vec![Tuning::default(), split1(None)];
                        if m == 1 && causal.is_none() {
                            tunings.extend([Some(64), Some(128), Some(256), Some(512)].map(split1));
                        }
                        for t in tunings {
                            let what = format!("{d} kv{kv} d{hd} m{m} causal {causal:?} {t:?}");
                            let cpp = render::render(&k, &CudaCaps { ptx: false, ..CudaCaps::hopper() }, &t);
                            let Ok(cpp) = cpp else { continue };
                            assert!(cpp.strategy.starts_with("attention decode"), "{what}: {}", cpp.strategy);
                            if cpp.strategy.contains(" split ") {
                                let why = render::ptx::why_not(&k, &CudaCaps::hopper(), &t);
                                assert!(why.starts_with("decode split "), "{what}: {why}");
                                continue;
                            }
                            decode_as_cpp(&k, &t, &what);
                            written += 1;
                        }
                    }
                }
            }
        }
    }
    assert!(written >= 300, "{written} PTX decode kernels");
    // An additive mask (loaded under the key guard) and BSHD rows: PTX as well.
    let masked = AttnCase { mask: AttnMask::Additive, causal: Some(1), ..AttnCase::new(1, 2, 3, 300, 64, DType::BF16) };
    let r = decode_as_cpp(&kernel(&masked), &Tuning::default(), "additive mask");
    assert!(r.source.contains("ld.global.nc.f32"), "the mask's loads");
    let bshd = AttnCase { bshd: true, ..AttnCase::new(2, 4, 1, 100, 128, DType::F16) };
    decode_as_cpp(&kernel(&bshd), &Tuning::default(), "bshd");
    // Rows of vectors the lane groups do not divide (d80, a narrower dv), four queries.
    for d in [DType::F32, DType::BF16] {
        for (m, hd, dv) in [(1, 80, 80), (4, 128, 64), (2, 64, 128), (4, 80, 40)] {
            let c = AttnCase { dv, causal: Some(1), ..AttnCase::new(2, 3, m, 300, hd, d) };
            decode_as_cpp(&kernel(&c), &Tuning::default(), &format!("{d} m{m} d{hd} dv{dv}"));
        }
    }
    // Refused: the split decode, packed GQA heads, the other templates, bool masks.
    let refused = |k: &sinter_core::kernel::Kernel, t: &Tuning, why: &str| {
        let r = render::render(k, &CudaCaps::hopper(), t).unwrap();
        let got = render::ptx::why_not(k, &CudaCaps::hopper(), t);
        assert!(!render::ptx::is_ptx(&r.source) && got.contains(why), "{}: {got:?}, not {why:?}", k.name);
    };
    let b = DType::BF16;
    refused(&kernel(&AttnCase::new(1, 32, 1, 4096, 128, b)), &Tuning::default(), "decode split 16: the split combine");
    let gqa = AttnCase { kv_heads: 8, ..AttnCase::new(8, 32, 1, 4096, 128, b) };
    refused(&kernel(&gqa), &Tuning::default(), "decode split 9");
    refused(&kernel(&gqa), &split1(None), "decode pack 4: query heads sharing their K and V");
    refused(&kernel(&AttnCase::new(8, 16, 1024, 1024, 64, b)), &Tuning::default(), "the tensor-core tile");
    refused(&kernel(&AttnCase::new(32, 32, 4, 4096, 64, b)), &Tuning::default(), "the tensor-core tile");
    refused(&kernel(&AttnCase::new(2, 12, 197, 197, 64, DType::F32)), &Tuning::default(), "tiled CUDA-core");
    refused(&kernel(&AttnCase::new(1, 1, 5, 6, 4, DType::F64)), &Tuning::default(), "the row template");
    let bool_mask = AttnCase { mask: AttnMask::Bool, ..AttnCase::new(1, 2, 3, 50, 64, b) };
    refused(&kernel(&bool_mask), &Tuning::default(), "argument of dtype bool");
}
