//! Fused attention kernels on a GPU: every template (tensor cores, decode, rows) with every
//! candidate tuning against the kernel-IR interpreter (plain, causal, additive and bool masks, a
//! fully masked row giving NaN, GQA, BSHD, bf16/f16/f32/f64, sequences 1, 7, 128, 1000, 4097,
//! head dims 3 to 256; outputs poisoned first), and, ignored by default, the timing of the
//! rendered kernels at the benchmark shapes (`-- --ignored attention_timing`).
//!
//! Kernels are rendered, compiled by NVRTC and launched through the device layer directly, so
//! every tuning runs, not only the one a mode picks. Without a CUDA driver every test prints a
//! skip line, unless `SINTER_REQUIRE_CUDA=1`.

mod common;
mod launch;

use launch::{Bufs, args, build, caps, device, out_bytes, run_once, tuning_filter};
use sinter_core::DType;
use sinter_core::backend::DeviceBuffer as _;
use sinter_core::kernel::KernelBody;
use sinter_core::testsuite::programs::{AttnCase, AttnMask, attention};
use sinter_core::testsuite::{Tol, compare};
use sinter_core::workloads::{self, Scale};
use sinter_core::{HostTensor, kernel::interp::run_program};
use sinter_cuda::device::{Launch, TimingEvents};
use sinter_cuda::nvrtc::{self, Target};
use sinter_cuda::render::{Tuning, candidates};

/// Random inputs of case `c`: q, k, v in [-1, 1]; an additive mask with some `-inf`, a bool mask
/// with some false keys (key 0 kept), and with `dead_row`, query 0 masked entirely.
fn inputs(c: &AttnCase, seed: u64, dead_row: bool) -> Vec<HostTensor> {
    let shapes = c.input_shapes();
    let mut v: Vec<HostTensor> =
        (0..3).map(|i| HostTensor::random(c.dtype, shapes[i].clone(), seed + i as u64, -1.0, 1.0)).collect();
    if c.mask != AttnMask::None {
        let r = HostTensor::random(DType::F32, shapes[3].clone(), seed + 7, -1.0, 1.0).to_f64_vec();
        let kv = shapes[3][1];
        if c.mask == AttnMask::Additive {
            let m: Vec<f64> = r.iter().map(|&x| if x < -0.8 { f64::NEG_INFINITY } else { 2.0 * x }).collect();
            v.push(HostTensor::from_f64(DType::F32, shapes[3].clone(), &m));
        } else {
            let m: Vec<i64> = r
                .iter()
                .enumerate()
                .map(|(i, &x)| if dead_row && i < kv { 0 } else { (i % kv == 0 || x > -0.3) as i64 })
                .collect();
            v.push(HostTensor::from_i64(DType::Bool, shapes[3].clone(), &m));
        }
    }
    v
}

/// Whether case `what` runs: every case, or under `SINTER_TEST_CASES` (comma-separated) those whose
/// name contains one of its substrings.
fn case_selected(what: &str) -> bool {
    launch::env_list("SINTER_TEST_CASES").is_none_or(|v| v.iter().any(|p| what.contains(p.as_str())))
}

fn cases() -> Vec<(String, AttnCase, bool)> {
    let mut v = Vec::new();
    for d in [DType::BF16, DType::F16, DType::F32] {
        for (h, m, kv, hd) in [(2, 1, 7, 64), (2, 7, 7, 32), (2, 128, 128, 64), (1, 1000, 1000, 80), (2, 1, 4097, 128)]
        {
            v.push((format!("{d} m{m} kv{kv} d{hd}"), AttnCase::new(1, h, m, kv, hd, d), false));
        }
    }
    let b = DType::BF16;
    let mut add = |what: &str, c: AttnCase, dead: bool| v.push((what.to_string(), c, dead));
    add("bf16 s1024 d64 (bench head)", AttnCase::new(1, 1, 1024, 1024, 64, b), false);
    add("bf16 m7 kv4097 d64", AttnCase::new(1, 1, 7, 4097, 64, b), false);
    add("bf16 causal", AttnCase { causal: Some(0), ..AttnCase::new(2, 2, 300, 300, 64, b) }, false);
    add("bf16 causal s1000 d128", AttnCase { causal: Some(0), ..AttnCase::new(1, 1, 1000, 1000, 128, b) }, false);
    // Many key tiles per block (every stage of the ring refilled, every mbarrier parity seen
    // several times) and row tiles past m, plain and causal, at both wgmma head dims.
    add("bf16 s1000 d128", AttnCase::new(1, 2, 1000, 1000, 128, b), false);
    add("f16 s1000 d64", AttnCase::new(1, 2, 1000, 1000, 64, DType::F16), false);
    add("bf16 causal s4097 d64", AttnCase { causal: Some(0), ..AttnCase::new(1, 1, 4097, 4097, 64, b) }, false);
    add("bf16 m7 kv1000 d128", AttnCase::new(1, 2, 7, 1000, 128, b), false);
    // One query under GQA with a group for every SM: the query heads as tile rows (`pack-gqa`),
    // with an additive mask whose index reads the query; the same with fewer groups.
    let packed = AttnCase { kv_heads: 8, mask: AttnMask::Additive, ..AttnCase::new(32, 32, 1, 300, 128, b) };
    add("bf16 decode gqa packed", packed, false);
    add("bf16 decode gqa few", AttnCase { kv_heads: 4, ..AttnCase::new(2, 16, 1, 1000, 128, b) }, false);
    // Causal rows and keys in whole tiles (the lagged schedule of the TMA ping-pong tiles, key
    // tiles of both parities per block), also with keys ahead of the queries (a cache prefix).
    add(
        "bf16 causal s1024 d128 (whole tiles)",
        AttnCase { causal: Some(0), ..AttnCase::new(1, 2, 1024, 1024, 128, b) },
        false,
    );
    add(
        "f16 causal +128 m512 kv640 d64 (whole tiles)",
        AttnCase { causal: Some(128), ..AttnCase::new(1, 2, 512, 640, 64, DType::F16) },
        false,
    );
    // More work tiles than a persistent grid has blocks (132 SMs, one or two blocks each): blocks
    // take further tiles from the counter, causal tiles of every length, GQA across tiles.
    add(
        "bf16 causal b4 h16 s520 d64 (persistent)",
        AttnCase { causal: Some(0), ..AttnCase::new(4, 16, 520, 520, 64, b) },
        false,
    );
    add(
        "bf16 gqa b3 h16 m300 kv500 d128 (persistent)",
        AttnCase { kv_heads: 4, ..AttnCase::new(3, 16, 300, 500, 128, b) },
        false,
    );
    // Whole row tiles in BSHD under GQA (strided rows stored 16 bytes at a time after the quad's
    // exchange), keys past a tile.
    add(
        "bf16 bshd gqa m256 kv300 d128 (whole tiles)",
        AttnCase { bshd: true, kv_heads: 2, ..AttnCase::new(2, 4, 256, 300, 128, b) },
        false,
    );
    add("f16 causal +5", AttnCase { causal: Some(5), ..AttnCase::new(1, 2, 77, 90, 128, DType::F16) }, false);
    add("f32 causal", AttnCase { causal: Some(0), ..AttnCase::new(1, 2, 100, 100, 80, DType::F32) }, false);
    add("bf16 additive", AttnCase { mask: AttnMask::Additive, ..AttnCase::new(1, 2, 65, 200, 64, b) }, false);
    add(
        "bf16 bool bshd dead row",
        AttnCase { mask: AttnMask::Bool, bshd: true, ..AttnCase::new(2, 2, 33, 70, 32, b) },
        true,
    );
    add("f32 bool dead row", AttnCase { mask: AttnMask::Bool, ..AttnCase::new(1, 2, 9, 33, 40, DType::F32) }, true);
    add("bf16 decode bool dead row", AttnCase { mask: AttnMask::Bool, ..AttnCase::new(1, 2, 3, 50, 64, b) }, true);
    // Decode with its keys split over blocks (the default at few heads; max-autotune's splits of
    // 1 to 16): a dead row in every split, causal bounds that leave the last splits empty, GQA.
    add("bf16 decode split dead row", AttnCase { mask: AttnMask::Bool, ..AttnCase::new(1, 2, 3, 1100, 64, b) }, true);
    add(
        "f16 decode split causal",
        AttnCase { causal: Some(700), ..AttnCase::new(1, 3, 2, 2500, 128, DType::F16) },
        false,
    );
    add("bf16 decode split gqa", AttnCase { kv_heads: 2, ..AttnCase::new(1, 8, 1, 3000, 128, b) }, false);
    add(
        "bf16 gqa bshd dv32",
        AttnCase { kv_heads: 2, dv: 32, bshd: true, ..AttnCase::new(2, 4, 50, 90, 64, b) },
        false,
    );
    add("bf16 decode gqa", AttnCase { kv_heads: 1, ..AttnCase::new(2, 4, 4, 1000, 128, b) }, false);
    add("bf16 decode causal +2", AttnCase { causal: Some(2), ..AttnCase::new(1, 2, 3, 9, 64, b) }, false);
    add("bf16 d256", AttnCase::new(1, 1, 70, 70, 256, b), false);
    add("f32 odd d3 dv5", AttnCase { dv: 5, ..AttnCase::new(1, 2, 9, 33, 3, DType::F32) }, false);
    add("bf16 odd d24 dv300", AttnCase { dv: 300, ..AttnCase::new(1, 2, 9, 40, 24, b) }, false);
    add("f64", AttnCase::new(1, 1, 5, 6, 4, DType::F64), false);
    // The tiled CUDA-core template: ViT-B's heads, the largest head dim, causal with a mask, f16
    // at a head dim tensor cores do not take, many key tiles.
    add("f32 vit s197 d64", AttnCase::new(2, 3, 197, 197, 64, DType::F32), false);
    add("f32 d256", AttnCase::new(1, 1, 70, 70, 256, DType::F32), false);
    add(
        "f32 causal bool s300 d80",
        AttnCase { causal: Some(0), mask: AttnMask::Bool, ..AttnCase::new(1, 2, 300, 290, 80, DType::F32) },
        false,
    );
    add("f16 d40 s200", AttnCase::new(1, 2, 200, 130, 40, DType::F16), false);
    add(
        "f32 bshd gqa s1000",
        AttnCase { kv_heads: 1, bshd: true, ..AttnCase::new(1, 2, 1000, 1000, 64, DType::F32) },
        false,
    );
    v
}

#[test]
fn attention_matches_the_interpreter_with_every_tuning() {
    let Some(dev) = device("attention") else { return };
    let stream = dev.new_stream().unwrap();
    let mut failures = Vec::new();
    let mut engines = std::collections::BTreeMap::<String, usize>::new();
    for (ci, (what, c, dead)) in cases().into_iter().enumerate() {
        if !case_selected(&what) {
            continue;
        }
        let p = attention(&c);
        assert!(matches!(p.kernels[0].body, KernelBody::Attention(_)));
        let ins = inputs(&c, 100 + 10 * ci as u64, dead);
        let want = run_program(&p, &ins).unwrap_or_else(|e| panic!("{what}: interpreter: {e}"));
        if dead {
            let w = want[0].to_f64_vec();
            assert!(w[..c.dv].iter().all(|x| x.is_nan()), "{what}: a dead row is NaN in the interpreter");
        }
        let bufs = Bufs {
            inputs: ins.iter().map(|t| dev.upload_bytes(&t.to_le_bytes(), "input").unwrap()).collect(),
            outputs: (0..p.outputs.len()).map(|i| stream.alloc(out_bytes(&p, i)).unwrap()).collect(),
        };
        let tunings = candidates(&p.kernels[0], &caps(&dev));
        let tol = Tol::sum(c.kv + c.d, 1.0).times(4.0);
        for (t, r, cubin) in build(&dev, &p, &tunings) {
            // The case and tuning go out before the launch: a kernel that hangs is named by the
            // last line of the log.
            print!("{what:32} {:34} ", r.strategy);
            std::io::Write::flush(&mut std::io::stdout()).unwrap();
            let got = run_once(&dev, &stream, &p, &bufs, &r, &cubin);
            // f64 operands are computed in f32 (as the interpreter does): compare at f32.
            let f32s = |v: &[HostTensor]| -> Vec<HostTensor> {
                v.iter().map(|t| HostTensor::from_f64(DType::F32, t.shape.clone(), &t.to_f64_vec())).collect()
            };
            let verdict =
                if c.dtype == DType::F64 { compare(&f32s(&got), &f32s(&want), tol) } else { compare(&got, &want, tol) };
            println!("{}", if verdict.is_ok() { "ok" } else { "FAILED" });
            let engine = r.strategy.split(' ').take(2).collect::<Vec<_>>().join(" ");
            *engines.entry(engine).or_default() += 1;
            if let Err(e) = verdict {
                failures.push(format!("{what} {t:?} ({}): {e}", r.strategy));
            }
        }
    }
    println!("tunings run per engine: {engines:?}");
    // Every engine ran, unless the run was narrowed to some tunings or cases (`SINTER_TEST_CASES`
    // without the f32 cases runs no FMA tuning).
    if caps(&dev).sm == (9, 0) && tuning_filter().is_none() && launch::env_list("SINTER_TEST_CASES").is_none() {
        for e in ["attention wgmma", "attention wgmma-ov", "attention wgmma-pp", "attention fma"] {
            assert!(engines.get(e).is_some_and(|&n| n > 0), "no {e} tuning ran on sm_90a: {engines:?}");
        }
    }
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

/// The shape-generic kernels (`render::attention_generic`, what default tunings render where
/// the build compiled them ahead of time) against the interpreter and the specialized default
/// kernel of the same shape (the decode's: PTX), on odd sizes, causal offsets, BSHD rows, GQA and
/// one-query decode steps (one key, a causal bound that leaves one); each runs the
/// embedded cubin where this build has one (`aot`), else compiles its source with NVRTC.
#[test]
fn generic_attention_matches_the_interpreter() {
    let Some(dev) = device("generic attention") else { return };
    let stream = dev.new_stream().unwrap();
    let generic = sinter_cuda::render::CudaCaps { generic_attention: true, ..caps(&dev) };
    let target = Target::sm(dev.info().cc);
    if generic.sm != (9, 0) {
        eprintln!("skipped generic attention: sm_90a only");
        return;
    }
    let bf = DType::BF16;
    let cases = [
        ("bf16 d64 s1024", AttnCase::new(2, 4, 1024, 1024, 64, bf)),
        ("bf16 d64 causal s1000", AttnCase { causal: Some(0), ..AttnCase::new(1, 3, 1000, 1000, 64, bf) }),
        ("f16 d64 s1537", AttnCase::new(1, 1, 1537, 1537, 64, DType::F16)),
        ("bf16 d64 gqa s513", AttnCase { kv_heads: 2, ..AttnCase::new(2, 8, 513, 513, 64, bf) }),
        ("bf16 d64 m300 kv777", AttnCase::new(3, 5, 300, 777, 64, bf)),
        ("bf16 d128 causal s513", AttnCase { causal: Some(0), ..AttnCase::new(1, 34, 513, 513, 128, bf) }),
        (
            "f16 d128 causal+3 m129 kv133",
            AttnCase { causal: Some(3), ..AttnCase::new(2, 34, 129, 133, 128, DType::F16) },
        ),
        ("bf16 d128 bshd s200", AttnCase { bshd: true, ..AttnCase::new(1, 66, 200, 200, 128, bf) }),
        ("bf16 d128 whole s256", AttnCase::new(1, 66, 256, 256, 128, bf)),
        ("bf16 d128 m2048 kv129", AttnCase::new(1, 12, 2048, 129, 128, bf)),
        ("bf16 decode d128 kv4096", AttnCase::new(32, 32, 1, 4096, 128, bf)),
        (
            "f16 decode d128 causal kv777",
            AttnCase { causal: Some(776), ..AttnCase::new(16, 40, 1, 777, 128, DType::F16) },
        ),
        ("bf16 decode d64 causal+0 kv300", AttnCase { causal: Some(0), ..AttnCase::new(32, 32, 1, 300, 64, bf) }),
        ("bf16 decode d64 kv1", AttnCase::new(32, 32, 1, 1, 64, bf)),
        ("bf16 decode d128 bshd kv1023", AttnCase { bshd: true, ..AttnCase::new(16, 40, 1, 1023, 128, bf) }),
    ];
    let mut failures = Vec::new();
    let mut aot_runs = 0;
    for (ci, (what, c)) in cases.into_iter().enumerate() {
        if !case_selected(what) {
            continue;
        }
        let p = attention(&c);
        let k = &p.kernels[0];
        let r = sinter_cuda::render::render(k, &generic, &Tuning::default()).unwrap();
        assert!(
            r.strategy.ends_with(" generic"),
            "{what}: {} ({:?})",
            r.strategy,
            sinter_cuda::render::attention_generic::plan(k, &generic)
        );
        let cubin = match sinter_cuda::aot::lookup(&r.source, &target) {
            Some(c) => {
                aot_runs += 1;
                c
            }
            None => nvrtc::compile(&r.name, &r.source, &target).unwrap(),
        };
        let ins = inputs(&c, 700 + 10 * ci as u64, false);
        let want = run_program(&p, &ins).unwrap();
        let bufs = Bufs {
            inputs: ins.iter().map(|t| dev.upload_bytes(&t.to_le_bytes(), "input").unwrap()).collect(),
            outputs: (0..p.outputs.len()).map(|i| stream.alloc(out_bytes(&p, i)).unwrap()).collect(),
        };
        let got = run_once(&dev, &stream, &p, &bufs, &r, &cubin.image);
        let spec = build(&dev, &p, &[Tuning::default()]).pop().expect("the specialized default");
        let special = run_once(&dev, &stream, &p, &bufs, &spec.1, &spec.2);
        let tol = Tol::sum(c.kv + c.d, 1.0).times(4.0);
        let same = got[0].to_le_bytes() == special[0].to_le_bytes();
        println!(
            "{what:32} {:40} {} (the specialized {}: {})",
            r.strategy,
            if compare(&got, &want, tol).is_ok() { "ok" } else { "FAILED" },
            spec.1.strategy,
            if same { "bit for bit" } else { "differs" }
        );
        if let Err(e) = compare(&got, &want, tol) {
            failures.push(format!("{what}: {e}"));
        }
        if let Err(e) = compare(&got, &special, tol) {
            failures.push(format!("{what} against the specialized kernel: {e}"));
        }
    }
    println!("{aot_runs} cases ran the cubin compiled ahead of time");
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

const FILL: &str = r#"extern "C" __global__ void fill_bf16(unsigned short* p, unsigned long long n, unsigned long long seed) {
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        unsigned x = (unsigned)i * 2654435761u ^ (unsigned)seed ^ (unsigned)(i >> 32) * 40503u;
        x ^= x >> 16; x *= 0x7feb352du; x ^= x >> 15; x *= 0x846ca68bu; x ^= x >> 16;
        const float f = (float)(x & 0xffffffu) / 16777216.0f * 2.0f - 1.0f;
        p[i] = (unsigned short)((__float_as_uint(f) + 0x8000u) >> 16);
    }
}
// normal (mean 0, deviation 1) by Box-Muller on two hashes, as torch.randn draws the anchor's inputs
extern "C" __global__ void fill_bf16_normal(unsigned short* p, unsigned long long n, unsigned long long seed) {
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        unsigned x = (unsigned)i * 2654435761u ^ (unsigned)seed ^ (unsigned)(i >> 32) * 40503u;
        x ^= x >> 16; x *= 0x7feb352du; x ^= x >> 15; x *= 0x846ca68bu; x ^= x >> 16;
        unsigned y = x * 747796405u + 2891336453u;
        y ^= y >> 16; y *= 0x7feb352du; y ^= y >> 15; y *= 0x846ca68bu; y ^= y >> 16;
        const float u1 = ((float)(x & 0xffffffu) + 1.0f) / 16777217.0f, u2 = (float)(y & 0xffffffu) / 16777216.0f;
        const float f = sqrtf(-2.0f * logf(u1)) * cosf(6.2831853f * u2);
        p[i] = (unsigned short)((__float_as_uint(f) + 0x8000u) >> 16);
    }
}
extern "C" __global__ void fill_f32(float* p, unsigned long long n, unsigned long long seed) {
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        unsigned x = (unsigned)i * 2654435761u ^ (unsigned)seed ^ (unsigned)(i >> 32) * 40503u;
        x ^= x >> 16; x *= 0x7feb352du; x ^= x >> 15; x *= 0x846ca68bu; x ^= x >> 16;
        p[i] = (float)(x & 0xffffffu) / 16777216.0f * 2.0f - 1.0f;
    }
}"#;

/// Times the rendered kernels (every candidate tuning) at the benchmark shapes and torchvision
/// ViT-B/16's f32 attention (batch 2), inputs drawn on the device: median of 5 batches of 20
/// launches between two events, after a warm-up. `SINTER_TEST_CASES` selects shapes by name;
/// `SINTER_TEST_GAP_BYTES` times each launch alone after a fill, `SINTER_TEST_FILL=normal` draws
/// normal bf16 inputs, `SINTER_TEST_FILL=workload` uploads `bench`'s inputs for the d64 case,
/// `SINTER_TEST_WARM_LAUNCHES` sets the warm-up (each below).
#[test]
#[ignore]
fn attention_timing() {
    let Some(dev) = device("attention_timing") else { return };
    let stream = dev.new_stream().unwrap();
    let fill_cubin = nvrtc::compile("fill", FILL, &Target::sm(dev.info().cc)).unwrap();
    // `SINTER_TEST_FILL=normal`: bf16 inputs drawn normal (as `bench` and the anchor draw them)
    // instead of uniform in [-1, 1).
    let fill_mode = std::env::var("SINTER_TEST_FILL").ok();
    let normal = fill_mode.as_deref() == Some("normal");
    let bf16_fill = if normal { "fill_bf16_normal" } else { "fill_bf16" };
    let fill_bf16 = dev.load_function(&fill_cubin.image, bf16_fill).unwrap();
    let fill_f32 = dev.load_function(&fill_cubin.image, "fill_f32").unwrap();
    let b = DType::BF16;
    let shapes = [
        ("b8 h16 s1024 d64", AttnCase::new(8, 16, 1024, 1024, 64, b), 0.085),
        ("b8 h16 s2048 d128 causal", AttnCase { causal: Some(0), ..AttnCase::new(8, 16, 2048, 2048, 128, b) }, 0.280),
        ("decode b32 h32 m1 kv4096 d128", AttnCase::new(32, 32, 1, 4096, 128, b), 0.71),
        ("decode b1 h32 m1 kv4096 d128", AttnCase::new(1, 32, 1, 4096, 128, b), f64::NAN),
        ("decode b32 h32 m1 kv4096 d64", AttnCase::new(32, 32, 1, 4096, 64, b), f64::NAN),
        ("decode b16 h32 m4 kv2048 d128", AttnCase::new(16, 32, 4, 2048, 128, b), f64::NAN),
        (
            "decode gqa b32 h32/8 m1 kv4096 d128",
            AttnCase { kv_heads: 8, ..AttnCase::new(32, 32, 1, 4096, 128, b) },
            f64::NAN,
        ),
        ("decode b8 h16 m1 kv4096 d128", AttnCase::new(8, 16, 1, 4096, 128, b), f64::NAN),
        ("b8 h16 s2048 d128", AttnCase::new(8, 16, 2048, 2048, 128, b), f64::NAN),
        ("vit_b_16 f32 b2 h12 s197 d64", AttnCase::new(2, 12, 197, 197, 64, DType::F32), f64::NAN),
    ];
    let ev = TimingEvents::new(&dev, 1).unwrap();
    // `SINTER_TEST_GAP_BYTES=N`: each launch timed alone (its own events, the median of 100),
    // after a fill of N bytes (0: none; `bench`'s L2 clear fills twice the L2), to tell what a
    // launch after other work costs from what the data's place in L2 does.
    let gap = std::env::var("SINTER_TEST_GAP_BYTES")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .map(|n| (n, stream.alloc(n.max(16)).unwrap(), TimingEvents::new(&dev, 20).unwrap()));
    let warm_launches =
        std::env::var("SINTER_TEST_WARM_LAUNCHES").ok().and_then(|v| v.parse::<usize>().ok()).unwrap_or(3);
    let mut table = Vec::new();
    for (what, c, torch_ms) in shapes {
        if !case_selected(what) {
            continue;
        }
        let p = attention(&c);
        // `SINTER_TEST_FILL=workload`: the d64 case's inputs are `bench`'s own (drawn on the host
        // by the built-in workload, uploaded), to tell what the inputs do from what the
        // executable does to the kernel's time.
        let staged = (fill_mode.as_deref() == Some("workload") && what == "b8 h16 s1024 d64")
            .then(|| workloads::get("attention_b8h16s1024d64_bf16").unwrap().inputs(Scale::Full, 0));
        let mut ins = Vec::new();
        for (i, s) in c.input_shapes().iter().enumerate() {
            let n: usize = s.iter().product();
            let buf = stream.alloc((n * c.dtype.size_bytes()) as u64).unwrap();
            if let Some(host) = &staged {
                assert_eq!(host[i].shape, *s, "the workload's input {i}");
                stream.upload(buf.ptr(), &host[i].le_bytes(), "workload input").unwrap();
                ins.push(buf);
                continue;
            }
            let (fill, name) = if c.dtype == DType::F32 { (&fill_f32, "fill_f32") } else { (&fill_bf16, bf16_fill) };
            let l = Launch::new(
                &dev,
                fill.clone(),
                name,
                [1024, 1, 1],
                [256, 1, 1],
                0,
                &[buf.ptr(), n as u64, i as u64 + 1],
            )
            .unwrap();
            l.launch(&stream).unwrap();
            ins.push(buf);
        }
        let bufs = Bufs { inputs: ins, outputs: vec![stream.alloc(out_bytes(&p, 0)).unwrap()] };
        stream.synchronize("fill").unwrap();
        let flops = 4.0 * (c.batch * c.heads * c.m * c.kv * c.d) as f64 * if c.causal.is_some() { 0.5 } else { 1.0 };
        let tunings = candidates(&p.kernels[0], &caps(&dev));
        for (t, r, cubin) in build(&dev, &p, &tunings) {
            let f = dev.load_function(&cubin, &r.name).unwrap();
            // Private scratch (the split decode's partial states and counters), zeroed once: the
            // kernel leaves its counters zero for the next launch.
            let mut params = args(&p, &bufs);
            let scratch = (r.scratch_bytes > 0).then(|| stream.alloc(r.scratch_bytes).unwrap());
            if let Some(s) = &scratch {
                stream.fill(s.ptr(), 0, r.scratch_bytes, "scratch").unwrap();
                params.push(s.ptr());
            }
            // Tensor maps (TMA tiles) are encoded from the argument pointers.
            let l = sinter_cuda::backend::rendered_launch(&dev, f, &r, &params).unwrap();
            // `SINTER_TEST_WARM_LAUNCHES=N`: N launches back to back before the timing (`bench`
            // warms up for at least 50 ms), else 3.
            for _ in 0..warm_launches {
                l.launch(&stream).unwrap();
            }
            stream.synchronize("warm-up").unwrap();
            let mut times = Vec::new();
            if let Some((n, fill, per)) = &gap {
                // Each launch timed alone, after a fill of `n` bytes where `n` > 0.
                for _ in 0..5 {
                    for i in 0..20 {
                        if *n > 0 {
                            stream.fill(fill.ptr(), 0, *n, "gap").unwrap();
                        }
                        per.record(i, false, &stream).unwrap();
                        l.launch(&stream).unwrap();
                        per.record(i, true, &stream).unwrap();
                    }
                    for i in 0..20 {
                        times.push(per.elapsed_ms(i, i, true).unwrap());
                    }
                }
            } else {
                for _ in 0..5 {
                    ev.record(0, false, &stream).unwrap();
                    for _ in 0..20 {
                        l.launch(&stream).unwrap();
                    }
                    ev.record(0, true, &stream).unwrap();
                    times.push(ev.elapsed_ms(0, 0, true).unwrap() / 20.0);
                }
            }
            times.sort_by(f64::total_cmp);
            let ms = times[times.len() / 2];
            let a = l.attributes();
            let default = if t == Tuning::default() { " (default)" } else { "" };
            table.push(format!(
                "{what:30} {:32} {ms:8.4} ms {:7.1} TFLOP/s  torch {torch_ms} ms  regs {}{default}",
                r.strategy,
                flops / ms / 1e9,
                a.registers
            ));
            println!("{}", table.last().unwrap());
        }
    }
    println!("\n{}", table.join("\n"));
}

/// Quantiles of `v` (sorted in place): min, 10th, median, 90th percentile.
fn quantiles(v: &mut [f64]) -> [f64; 4] {
    v.sort_by(f64::total_cmp);
    let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
    [v[0], at(0.1), at(0.5), at(0.9)]
}

/// attention_b8h16s1024d64_bf16 several ways in one process, on the backend's own device,
/// alternating for four rounds: the workload compiled through the library (the built-in
/// workload's graph and inputs, default mode, no poisoning) timed as `bench` times whole runs (100
/// runs, each after an L2 clear); on buffers of this test (the same inputs uploaded), timed alike
/// (100 launches in batches of 16, events around each, after a fill of twice the L2): the device
/// test's case at the default tuning, the workload's own kernel (scheduled from its graph with the
/// CUDA backend's options) and, under `SINTER_TEST_VARIANTS=DIR`, hand-edited copies of that
/// kernel's source (`DIR/*.cu`, each first checked bit for bit against it). Prints min, 10th
/// percentile, median and 90th percentile of each (session 36 found the executable's 1% this way:
/// its kernel's epilogue, not its buffers or launch).
#[test]
#[ignore]
fn attention_timing_beside_the_executable() {
    use sinter_core::compile::{CompileOptions, compile};
    let Some(mut b) = launch::cuda_backend("attention_timing_beside_the_executable") else { return };
    b.set_poison_outputs(false); // as `bench` runs
    let dev = b.device().clone();
    let ccaps = b.cuda_caps().clone();
    let w = workloads::get("attention_b8h16s1024d64_bf16").unwrap();
    let g = w.build(Scale::Full).unwrap();
    let inputs = w.inputs(Scale::Full, 0);
    let dir = std::env::temp_dir().join(format!("sinter-attn-exe-{}", std::process::id()));
    let opts = CompileOptions { cache_dir: Some(dir.clone()), ..CompileOptions::default() };
    let c = compile(&g, std::sync::Arc::new(b), opts).unwrap();
    c.run(&inputs).unwrap();

    let case = AttnCase::new(8, 16, 1024, 1024, 64, DType::BF16);
    let p = attention(&case);
    let r = sinter_cuda::render::render(&p.kernels[0], &ccaps, &Tuning::default()).unwrap();
    let cubin = nvrtc::compile(&r.name, &r.source, &Target::sm(dev.info().cc)).unwrap();
    let stream = dev.new_stream().unwrap();
    for (i, s) in case.input_shapes().iter().enumerate() {
        assert_eq!(inputs[i].shape, *s, "the workload's input {i}");
    }
    // The case's buffers, the inputs uploaded, the scratch zeroed; the launch on them.
    let ins = inputs.iter().map(|t| stream.alloc(t.le_bytes().len() as u64).unwrap()).collect::<Vec<_>>();
    for (b, t) in ins.iter().zip(&inputs) {
        stream.upload(b.ptr(), &t.le_bytes(), "workload input").unwrap();
    }
    let bufs = Bufs { inputs: ins, outputs: vec![stream.alloc(out_bytes(&p, 0)).unwrap()] };
    let mut params = args(&p, &bufs);
    let scratch = (r.scratch_bytes > 0).then(|| stream.alloc(r.scratch_bytes).unwrap());
    if let Some(s) = &scratch {
        stream.fill(s.ptr(), 0, r.scratch_bytes, "scratch").unwrap();
        params.push(s.ptr());
    }
    let f = dev.load_function(&cubin.image, &r.name).unwrap();
    let l = sinter_cuda::backend::rendered_launch(&dev, f, &r, &params).unwrap();
    // The workload's own kernel (scheduled from its graph with the CUDA backend's options on
    // Hopper; the device test's case differs in name and an output cast), on the test's buffers.
    let wl = {
        let ir = sinter_core::passes::optimize(&g).unwrap();
        let wp = sinter_core::schedule::schedule(&ir, &common::cuda_caps(), &common::cuda_options()).unwrap();
        assert_eq!(wp.kernels.len(), 1, "the workload is one kernel");
        let wr = sinter_cuda::render::render(&wp.kernels[0], &ccaps, &Tuning::default()).unwrap();
        let wc = nvrtc::compile(&wr.name, &wr.source, &Target::sm(dev.info().cc)).unwrap();
        let mut wparams = args(&wp, &bufs);
        let ws = (wr.scratch_bytes > 0).then(|| stream.alloc(wr.scratch_bytes).unwrap());
        if let Some(s) = &ws {
            stream.fill(s.ptr(), 0, wr.scratch_bytes, "scratch").unwrap();
            wparams.push(s.ptr());
        }
        let wf = dev.load_function(&wc.image, &wr.name).unwrap();
        println!("the workload's kernel {} ({}), arguments {:x?}", wr.name, wr.strategy, &wparams);
        // `SINTER_TEST_VARIANTS=DIR`: every `DIR/*.cu`, a hand-edited copy of the workload's source
        // (the same kernel name, arguments, grid and tensor maps), compiled and launched alike.
        let mut variants = Vec::new();
        if let Ok(d) = std::env::var("SINTER_TEST_VARIANTS") {
            let mut files: Vec<_> = std::fs::read_dir(d).unwrap().flatten().map(|e| e.path()).collect();
            files.sort();
            for f in files.into_iter().filter(|f| f.extension().is_some_and(|x| x == "cu")) {
                let src = std::fs::read_to_string(&f).unwrap();
                let vc = nvrtc::compile(&wr.name, &src, &Target::sm(dev.info().cc)).unwrap();
                let vf = dev.load_function(&vc.image, &wr.name).unwrap();
                let name = f.file_stem().unwrap().to_string_lossy().to_string();
                variants.push((name, sinter_cuda::backend::rendered_launch(&dev, vf, &wr, &wparams).unwrap()));
            }
        }
        (sinter_cuda::backend::rendered_launch(&dev, wf, &wr, &wparams).unwrap(), ws, variants)
    };
    let fill_bytes = 2 * u64::from(dev.info().l2_bytes);
    let fill = stream.alloc(fill_bytes).unwrap();
    let ev = TimingEvents::new(&dev, 16).unwrap();
    l.launch(&stream).unwrap();
    stream.synchronize("first launch").unwrap();
    println!("{} ({}), fill {fill_bytes} bytes", r.name, r.strategy);

    // Each variant's output against the workload's own kernel's, bit for bit (outputs poisoned
    // before each launch).
    let output_of = |l: &Launch| {
        stream.fill(bufs.outputs[0].ptr(), 0x7f, out_bytes(&p, 0), "poison").unwrap();
        l.launch(&stream).unwrap();
        stream.synchronize("variant").unwrap();
        bufs.outputs[0].read().unwrap()
    };
    let want = output_of(&wl.0);
    for (name, v) in &wl.2 {
        let got = output_of(v);
        let diff = want.iter().zip(&got).position(|(a, b)| a != b);
        println!("variant {name}: {}", diff.map_or("the same output".into(), |i| format!("DIFFERS from byte {i}")));
    }
    let show = |what: &str, round: usize, v: &mut [f64]| {
        let [lo, p10, p50, p90] = quantiles(v);
        println!("round {round} {what:14}: median {p50:.4} ms (min {lo:.4}, p10 {p10:.4}, p90 {p90:.4})");
    };
    let time_alone = |l: &Launch| {
        let mut times = Vec::new();
        while times.len() < 100 {
            let n = 16.min(100 - times.len());
            for i in 0..n {
                stream.fill(fill.ptr(), 0, fill_bytes, "L2 clear").unwrap();
                ev.record(i, false, &stream).unwrap();
                l.launch(&stream).unwrap();
                ev.record(i, true, &stream).unwrap();
            }
            for i in 0..n {
                times.push(ev.elapsed_ms(i, i, true).unwrap());
            }
        }
        times
    };
    for round in 0..4 {
        let (_, ns) = c.run_timed_whole(&inputs, 100).unwrap().expect("CUDA times whole runs");
        show("executable", round, &mut ns.iter().map(|n| *n / 1e6).collect::<Vec<f64>>());
        show("kernel alone", round, &mut time_alone(&l));
        show("its source", round, &mut time_alone(&wl.0));
        for (name, v) in &wl.2 {
            show(&format!("variant {name}"), round, &mut time_alone(v));
        }
    }
    let _ = std::fs::remove_dir_all(dir);
}
