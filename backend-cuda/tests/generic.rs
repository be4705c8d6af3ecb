//! Shape-generic attention kernels (`render::attention_generic`): one source per variant for
//! every shape it takes, that source checked in as `aot/<entry>.cu` (compiled at build time,
//! `crate::aot`; `SINTER_AOT_UPDATE=1` rewrites the files), the run-time parameters of each
//! shape, and named refusals for what the generic kernels do not cover. The numerics against the
//! interpreter: `tests/device_attention.rs` on the device.

mod common;

use common::*;
use sinter_core::DType;
use sinter_core::kernel::KernelBody;
use sinter_core::testsuite::programs::{AttnCase, AttnMask, attention};
use sinter_cuda::render::attention_generic::{self as generic, PARAMS};
use sinter_cuda::render::{self, CudaCaps, Tuning};
use std::path::PathBuf;

fn caps() -> CudaCaps {
    CudaCaps { generic_attention: true, ..CudaCaps::hopper() }
}

/// The variants compiled ahead of time and a shape of each.
fn variants() -> Vec<AttnCase> {
    let mut out = Vec::new();
    for dtype in [DType::BF16, DType::F16] {
        for d in [64, 128] {
            // Causal, keys and rows in whole tiles (the `_whole` variant), and neither.
            for (causal, s) in [(Some(0), 1024), (None, 1024), (None, 1000)] {
                out.push(AttnCase { causal, ..AttnCase::new(8, 16, s, s, d, dtype) });
            }
            // One query (a generation step) over heads enough to fill the GPU: the decode
            // template, causal (the newest query sees every key) or not.
            for causal in [None, Some(4095)] {
                out.push(AttnCase { causal, ..AttnCase::new(32, 32, 1, 4096, d, dtype) });
            }
        }
    }
    out
}

fn aot_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("aot")
}

fn kernel_of(c: &AttnCase) -> sinter_core::kernel::Kernel {
    let p = attention(c);
    assert_eq!(p.kernels.len(), 1, "{c:?}: one fused kernel");
    p.kernels[0].clone()
}

/// Every variant renders its generic kernel, whose source is the file compiled ahead of time
/// (rewritten with `SINTER_AOT_UPDATE=1`), and no other file is there.
#[test]
fn generic_sources_are_the_files_compiled_ahead_of_time() {
    let update = std::env::var("SINTER_AOT_UPDATE").is_ok_and(|v| v == "1");
    let mut names = Vec::new();
    for c in variants() {
        let k = kernel_of(&c);
        let r = render::render(&k, &caps(), &Tuning::default()).unwrap();
        assert!(r.name.starts_with("sinter_attn_"), "{c:?}: {}", r.strategy);
        assert!(r.strategy.ends_with(" generic"), "{}", r.strategy);
        let path = aot_dir().join(format!("{}.cu", r.name));
        if update {
            std::fs::create_dir_all(aot_dir()).unwrap();
            std::fs::write(&path, &r.source).unwrap();
        }
        let file = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(file == r.source, "{} is stale: rerun with SINTER_AOT_UPDATE=1", path.display());
        names.push(format!("{}.cu", r.name));
    }
    let mut present: Vec<String> = std::fs::read_dir(aot_dir())
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".cu"))
        .collect();
    present.sort();
    names.sort();
    assert_eq!(present, names, "aot/ holds exactly the generic kernels");
}

/// Shapes of one variant (batches, heads, odd sequence lengths, BSHD rows, GQA) share one source
/// and differ only in their launch and parameters, which follow the shape.
#[test]
fn one_source_for_every_shape() {
    let base = AttnCase { causal: Some(0), ..AttnCase::new(8, 16, 1024, 1024, 128, DType::BF16) };
    let reference = render::render(&kernel_of(&base), &caps(), &Tuning::default()).unwrap();
    let shapes = [
        AttnCase { m: 1023, kv: 1023, ..base.clone() },
        AttnCase { m: 4097, kv: 4097, ..base.clone() },
        AttnCase { batch: 2, heads: 64, kv_heads: 64, m: 777, kv: 777, ..base.clone() },
        AttnCase { bshd: true, ..base.clone() },
        AttnCase { kv_heads: 4, ..base.clone() },
        AttnCase { causal: Some(3), m: 500, kv: 503, ..base.clone() },
        AttnCase { batch: 1, heads: 132, kv_heads: 132, m: 129, kv: 129, ..base.clone() },
    ];
    for c in shapes {
        let k = kernel_of(&c);
        let r = render::render(&k, &caps(), &Tuning::default()).unwrap();
        assert_eq!(r.name, reference.name, "{c:?}");
        assert!(r.source == reference.source, "{c:?}: another source");
        assert_eq!(r.params.len(), PARAMS.len());
        let p = |n: &str| r.params[PARAMS.iter().position(|x| *x == n).unwrap()];
        assert_eq!(p("sx_heads"), c.heads as u64);
        assert_eq!(p("sx_m"), c.m as u64);
        assert_eq!(p("sx_kv"), c.kv as u64);
        assert_eq!(p("sx_co"), c.causal.unwrap() as u64);
        assert_eq!(p("sx_k_g"), (c.heads / c.kv_heads) as u64);
        assert_eq!(p("sx_tiles_m"), c.m.div_ceil(128) as u64);
        let scale = f32::from_bits(p("sx_sl") as u32);
        let want = (1.0 / (c.d as f64).sqrt() * std::f64::consts::LOG2_E) as f32;
        assert!((scale - want).abs() <= want * 1e-6, "{scale} {want}");
        // Q's rows: BHSD rows of d, or BSHD rows of heads * d; the output's, BHSD.
        let sr = if c.bshd { c.heads * c.d } else { c.d } as u64;
        assert_eq!(p("sx_q_sr"), sr, "{c:?}");
        assert_eq!(p("sx_y_sr"), c.dv as u64, "{c:?}");
        // (A batch of one is never stepped over: its stride is left 0.)
        let sb = if c.batch > 1 { c.heads * c.m * c.dv } else { 0 };
        assert_eq!(p("sx_y_sb"), sb as u64, "{c:?}");
    }
}

/// One-query shapes share the decode variant's source; fewer heads (a split decode), several
/// queries and packed GQA heads keep the specialized templates.
#[test]
fn decode_shapes_share_one_source() {
    let base = AttnCase::new(32, 32, 1, 4096, 128, DType::BF16);
    let reference = render::render(&kernel_of(&base), &caps(), &Tuning::default()).unwrap();
    assert!(reference.name.starts_with("sinter_attn_decode_"), "{}", reference.strategy);
    for c in [
        AttnCase { kv: 7, ..base.clone() },
        AttnCase { kv: 4097, batch: 16, heads: 64, kv_heads: 64, ..base.clone() },
        AttnCase { bshd: true, ..base.clone() },
    ] {
        let r = render::render(&kernel_of(&c), &caps(), &Tuning::default()).unwrap();
        assert!(r.source == reference.source, "{c:?}: {}", r.strategy);
    }
    let why = |c: AttnCase| generic::plan(&kernel_of(&c), &caps()).unwrap_err();
    assert!(why(AttnCase { batch: 1, ..base.clone() }).contains("decode"));
    assert!(why(AttnCase { m: 2, ..base.clone() }).contains("decode"));
    assert!(why(AttnCase { kv_heads: 8, ..base.clone() }).contains("decode"));
}

/// The specialized kernel stays where caps turn the generic ones off, for tunings other than the
/// default (max-autotune's candidates), and where the generic kernel does not cover the kernel:
/// each refusal names why.
#[test]
fn refusals_are_named() {
    let k = kernel_of(&AttnCase::new(8, 16, 1024, 1024, 64, DType::BF16));
    let r = render::render(&k, &CudaCaps::hopper(), &Tuning::default()).unwrap();
    assert!(r.params.is_empty() && !r.strategy.ends_with(" generic"));
    let t = render::candidates(&k, &caps()).into_iter().find(|t| *t != Tuning::default()).unwrap();
    assert!(render::render(&k, &caps(), &t).unwrap().params.is_empty());
    let why = |c: AttnCase| generic::plan(&kernel_of(&c), &caps()).unwrap_err();
    assert!(why(AttnCase::new(8, 16, 1024, 1024, 80, DType::BF16)).contains("head dims"));
    assert!(why(AttnCase::new(8, 16, 1024, 1024, 64, DType::F32)).contains("bf16/f16"));
    assert!(
        why(AttnCase { mask: AttnMask::Additive, ..AttnCase::new(8, 16, 1024, 1024, 64, DType::BF16) })
            .contains("arguments")
    );
    // Two key tiles or fewer at d64: the one-warpgroup tile is the default, not the persistent one.
    assert!(why(AttnCase::new(8, 12, 197, 197, 64, DType::BF16)).contains("default tile"));
    assert!(why(AttnCase { dv: 64, ..AttnCase::new(8, 16, 1024, 1024, 128, DType::BF16) }).contains("head dims"));
    let KernelBody::Attention(_) = &k.body else { panic!() };
}

/// Every generic source compiles with NVRTC without spills (CI has NVRTC).
#[test]
fn generic_sources_compile_without_spills() {
    if !nvrtc_available("generic_sources_compile_without_spills") {
        return;
    }
    for c in variants() {
        let r = render::render(&kernel_of(&c), &caps(), &Tuning::default()).unwrap();
        let cubin = sinter_cuda::nvrtc::compile(&r.name, &r.source, &sinter_cuda::nvrtc::Target::hopper())
            .unwrap_or_else(|e| panic!("{}: {e}", r.name));
        let res = sinter_cuda::nvrtc::resources(&cubin.log, &r.name).expect("ptxas report");
        assert_eq!(res.spill_bytes, 0, "{}: {}", r.name, cubin.log);
    }
}

/// The attention workloads of `bench` take the generic kernels (the decode workload the generic
/// decode template's).
#[test]
fn attention_workloads_take_the_generic_kernels() {
    let mut seen = Vec::new();
    for w in sinter_core::workloads::all().into_iter().filter(|w| w.name.starts_with("attention")) {
        let g = w.build(sinter_core::workloads::Scale::Full).unwrap();
        let g = sinter_core::passes::optimize(&g).unwrap();
        let p = sinter_core::schedule::schedule(&g, &cuda_caps(), &cuda_options()).unwrap();
        for k in p.kernels.iter().filter(|k| matches!(k.body, KernelBody::Attention(_))) {
            let r = render::render(k, &caps(), &Tuning::default()).unwrap();
            let why = generic::plan(k, &caps()).err().unwrap_or_default();
            println!("{} {}: {} {why}", w.name, k.name, r.strategy);
            seen.push((w.name, r.strategy.ends_with(" generic")));
        }
    }
    for name in [
        "attention_b8h16s1024d64_bf16",
        "attention_causal_b8h16s2048d128_bf16",
        "attention_decode_b32h32kv4096d128_bf16",
    ] {
        assert!(seen.iter().any(|(w, g)| *w == name && *g), "{name}: {seen:?}");
    }
}
