//! Fused attention kernels (`KernelBody::Attention`): snapshots of the four templates
//! (tensor cores, decode, tiled CUDA cores, rows), the template each shape gets, tuning validation, and NVRTC
//! compiles (sm_90a, no warning, no spill) of every template with every candidate tuning over
//! plain, causal, masked, GQA and BSHD cases of every head dimension the device test runs.
//!
//! Without NVRTC the compile steps print a skip line, unless `SINTER_REQUIRE_NVRTC=1`.

mod common;

use common::nvrtc_available;
use sinter_core::DType;
use sinter_core::kernel::{Kernel, KernelBody};
use sinter_core::testsuite::programs::{AttnCase, AttnMask, attention, attention_packed_qkv};
use sinter_cuda::nvrtc::{self, Target};
use sinter_cuda::render::{self, AttnEngine, AttnTile, CudaCaps, Rendered, Tuning, candidates, check_tuning};

fn kernel(c: &AttnCase) -> Kernel {
    attention(c).kernels.into_iter().next().expect("one kernel")
}

/// Compiles `r`: no error, no warning, no spill, no stack frame, no serialized `wgmma`, and a
/// warp-specialized tile at its register cap.
fn compile(what: &str, r: &Rendered) -> String {
    // PTX (the decode template's common case, `render::ptx::decode`) is assembled by ptxas.
    let log = if render::ptx::is_ptx(&r.source) {
        let Some(res) = common::ptxas(&r.source, what) else { return format!("{what}: {} (PTX)", r.strategy) };
        res.unwrap_or_else(|log| panic!("{what}: ptxas rejects {}: {log}\n{}", r.name, r.source))
    } else {
        let c = nvrtc::compile(&r.name, &r.source, &Target::hopper())
            .unwrap_or_else(|e| panic!("{what}: {} does not compile: {e}\n{}", r.name, r.source));
        c.log
    };
    let warnings: Vec<&str> = log.lines().filter(|l| l.contains("warning")).collect();
    assert!(warnings.is_empty(), "{what}: warnings:\n{log}");
    let res = nvrtc::resources(&log, &r.name).unwrap_or_else(|| panic!("{what}: no resources in\n{log}"));
    if res.spill_bytes != 0 || !log.contains(" 0 bytes stack frame") {
        return format!("SPILL {what} ({}): {res:?}", r.strategy);
    }
    // ptxas's C7514: the wgmma pipeline serialized (accumulators read between issue and wait);
    // C7512: serialized for want of registers.
    for code in ["C7514", "C7512"] {
        if log.contains(code) {
            return format!("SPILL {what} ({}): wgmma serialized ({code})", r.strategy);
        }
    }
    // A warp-specialized tile's register exchange (setmaxnreg) counts on the kernel starting with
    // exactly its launch bounds' cap: with fewer, the consumers' setmaxnreg.inc would wait forever.
    let consumers = ["attention wgmma-pp ", "attention wgmma-tma ", "attention wgmma-tma-persistent "]
        .iter()
        .find_map(|p| r.strategy.strip_prefix(p))
        .and_then(|s| s.split(" wg").nth(1)?.split('+').next());
    if let Some(nc) = consumers {
        let want = if nc == "2" { 168 } else { 128 };
        if res.registers != want {
            return format!("SPILL {what} ({}): {} registers at entry, not {want}", r.strategy, res.registers);
        }
    }
    format!("{what}: {} {res:?}", r.strategy)
}

/// The cases the compile and device tests cover.
pub fn cases() -> Vec<(String, AttnCase)> {
    let mut v = Vec::new();
    for d in [DType::BF16, DType::F16, DType::F32] {
        for (m, kv, hd) in [(1, 7, 64), (7, 7, 32), (128, 128, 64), (1000, 1000, 80), (1, 4097, 128), (129, 300, 128)] {
            v.push((format!("{d} m{m} kv{kv} d{hd}"), AttnCase::new(1, 2, m, kv, hd, d)));
        }
    }
    let b = DType::BF16;
    v.push(("causal".into(), AttnCase { causal: Some(0), ..AttnCase::new(2, 2, 300, 300, 64, b) }));
    v.push(("causal +5 f16".into(), AttnCase { causal: Some(5), ..AttnCase::new(1, 2, 77, 90, 128, DType::F16) }));
    v.push(("additive".into(), AttnCase { mask: AttnMask::Additive, ..AttnCase::new(1, 2, 65, 200, 64, b) }));
    v.push(("bool bshd".into(), AttnCase { mask: AttnMask::Bool, bshd: true, ..AttnCase::new(2, 2, 33, 70, 32, b) }));
    v.push(("gqa bshd dv".into(), AttnCase { kv_heads: 2, dv: 32, bshd: true, ..AttnCase::new(2, 4, 50, 90, 64, b) }));
    v.push(("decode gqa".into(), AttnCase { kv_heads: 1, ..AttnCase::new(2, 4, 4, 1000, 128, b) }));
    // One query under GQA with groups for every SM: the query heads packed into tile rows.
    v.push(("decode gqa packed".into(), AttnCase { kv_heads: 8, ..AttnCase::new(32, 32, 1, 300, 128, b) }));
    v.push((
        "decode causal mask".into(),
        AttnCase { causal: Some(2), mask: AttnMask::Bool, ..AttnCase::new(1, 2, 3, 9, 64, b) },
    ));
    v.push(("d256".into(), AttnCase::new(1, 1, 70, 70, 256, b)));
    v.push(("odd d f32".into(), AttnCase { dv: 5, ..AttnCase::new(1, 2, 9, 33, 3, DType::F32) }));
    v.push(("odd d bf16".into(), AttnCase { dv: 300, ..AttnCase::new(1, 2, 9, 40, 24, b) }));
    v.push(("f64".into(), AttnCase::new(1, 1, 5, 6, 4, DType::F64)));
    v.push(("vit f32".into(), AttnCase::new(1, 3, 197, 197, 64, DType::F32)));
    // ViT-B/16's 197 tokens and 256 keys: two key tiles, where the one-consumer warp-specialized
    // tiles spilled or serialized their `wgmma`s (session 28).
    v.push(("vit bf16".into(), AttnCase::new(2, 12, 197, 197, 64, b)));
    v.push(("s256 f16".into(), AttnCase::new(1, 12, 256, 256, 64, DType::F16)));
    v.push(("d256 f32".into(), AttnCase::new(1, 1, 70, 70, 256, DType::F32)));
    v.push((
        "causal f32 bool".into(),
        AttnCase { causal: Some(0), mask: AttnMask::Bool, ..AttnCase::new(1, 2, 100, 90, 80, DType::F32) },
    ));
    v
}

fn strategy(c: &AttnCase) -> String {
    render::render(&kernel(c), &CudaCaps::hopper(), &Tuning::default()).unwrap().strategy
}

#[test]
fn templates_by_shape() {
    let b = DType::BF16;
    // Hopper: wgmma tiles where the head dims are multiples of 64.
    assert_eq!(strategy(&AttnCase::new(8, 16, 1024, 1024, 64, b)), "attention wgmma-tma-persistent 64x128 wg1+1 s3");
    // ... except where the grid must shrink with a dynamic batch (no persistent tile).
    let k = kernel(&AttnCase::new(8, 16, 1024, 1024, 64, b));
    let fixed = render::fixed_grid_default(&k, &CudaCaps::hopper()).expect("the d64 default is persistent");
    let r = render::render(&k, &CudaCaps::hopper(), &fixed).unwrap();
    assert_eq!(r.strategy, "attention wgmma 64x128 wg1 s2");
    assert!(r.split.is_some());
    // Decode shapes keep their defaults in a program for a dynamic batch (they shrink with it).
    let dec = kernel(&AttnCase::new(32, 32, 1, 4096, 64, b));
    assert_eq!(render::fixed_grid_default(&dec, &CudaCaps::hopper()), None);
    // Fewer keys than a TMA box at d64: the one-warpgroup tile.
    assert_eq!(strategy(&AttnCase::new(2, 4, 300, 100, 64, b)), "attention wgmma 64x128 wg1 s2");
    assert_eq!(
        render::fixed_grid_default(&kernel(&AttnCase::new(8, 16, 2048, 2048, 128, b)), &CudaCaps::hopper()),
        None
    );
    assert_eq!(strategy(&AttnCase::new(8, 16, 2048, 2048, 128, b)), "attention wgmma-tma 128x128 wg2+1 s3");
    // Fewer keys than the TMA box: the overlapped tile.
    assert_eq!(strategy(&AttnCase::new(8, 16, 2048, 100, 128, b)), "attention wgmma-ov 128x128 wg2 s3");
    assert_eq!(strategy(&AttnCase::new(1, 2, 100, 100, 128, b)), "attention wgmma-ov 64x64 wg1 s4");
    assert_eq!(strategy(&AttnCase::new(1, 1, 70, 70, 256, b)), "attention wgmma 64x64 wg1 s2");
    assert_eq!(strategy(&AttnCase::new(2, 2, 100, 100, 80, b)), "attention mma 64x64 w4 s2");
    // Ampere: mma.sync.
    let ampere = CudaCaps { sm: (8, 0), ..CudaCaps::hopper() };
    let on_ampere = |c: &AttnCase| render::render(&kernel(c), &ampere, &Tuning::default()).unwrap().strategy;
    assert_eq!(on_ampere(&AttnCase::new(8, 16, 1024, 1024, 64, b)), "attention mma 128x64 w4 s3");
    assert_eq!(on_ampere(&AttnCase::new(8, 16, 2048, 2048, 128, b)), "attention mma 64x64 w4 s2");
    assert_eq!(on_ampere(&AttnCase::new(1, 2, 100, 100, 128, b)), "attention mma 64x64 w4 s2");
    // Decode: where the heads give three quarters of the SMs a block but the decode template
    // would split its keys, or several queries share a head, the tensor-core tile of 64 padded
    // rows (`wgmma` head dims, no GQA; else a block per head of the decode template); one query
    // over heads for four blocks an SM keeps the template (256 threads for one query slot); with
    // fewer heads the decode template with its keys split over blocks (four per SM, at least 256
    // keys each, at most 16 splits). The template unsplit and unpacked is written in PTX (` ptx`).
    assert_eq!(strategy(&AttnCase::new(32, 32, 1, 4096, 128, b)), "attention decode block 256 ptx");
    assert_eq!(strategy(&AttnCase::new(32, 32, 1, 4096, 64, b)), "attention decode block 256 ptx");
    assert_eq!(strategy(&AttnCase::new(32, 32, 4, 4096, 64, b)), "attention wgmma-ov 64x128 wg1 s3");
    assert_eq!(strategy(&AttnCase::new(16, 16, 1, 4096, 128, b)), "attention wgmma-ov 64x128 wg1 s3");
    assert_eq!(strategy(&AttnCase::new(32, 32, 1, 4096, 128, DType::F32)), "attention decode block 256 ptx");
    assert_eq!(strategy(&AttnCase::new(32, 32, 1, 4096, 80, b)), "attention decode block 256 ptx");
    assert_eq!(on_ampere(&AttnCase::new(32, 32, 1, 4096, 128, b)), "attention decode block 256 ptx");
    assert_eq!(strategy(&AttnCase::new(8, 16, 1, 4096, 128, b)), "attention wgmma-ov 64x128 wg1 s3");
    // GQA: one query with groups for three quarters of the SMs: the group's query heads as the
    // rows of the tensor-core tile (`pack-gqa`); else the decode template with a K/V head's query
    // heads in one block (K and V read once per group), up to 8 query slots.
    let gqa = AttnCase { kv_heads: 8, ..AttnCase::new(32, 32, 1, 4096, 128, b) };
    assert_eq!(strategy(&gqa), "attention wgmma-ov 64x128 wg1 s3 pack-gqa 4");
    let gqa_few = AttnCase { kv_heads: 8, ..AttnCase::new(8, 32, 1, 4096, 128, b) };
    assert_eq!(strategy(&gqa_few), "attention decode block 128 split 9 pack 4");
    let mqa = AttnCase { kv_heads: 1, ..AttnCase::new(2, 32, 1, 4096, 128, b) };
    assert_eq!(strategy(&mqa), "attention decode block 128 split 16 pack 8");
    let gqa4 = AttnCase { kv_heads: 8, ..AttnCase::new(32, 32, 4, 4096, 128, b) };
    assert_eq!(strategy(&gqa4), "attention decode block 128 split 2 pack 2");
    assert_eq!(strategy(&AttnCase::new(1, 32, 1, 4096, 128, b)), "attention decode block 256 split 16");
    assert_eq!(strategy(&AttnCase::new(2, 2, 1, 4096, 64, DType::F32)), "attention decode block 256 split 16");
    assert_eq!(strategy(&AttnCase::new(1, 8, 1, 300, 64, b)), "attention decode block 256 ptx");
    // Tiled CUDA cores for what tensor cores do not take: the largest tile whose grid covers half
    // the SMs.
    assert_eq!(strategy(&AttnCase::new(2, 12, 197, 197, 64, DType::F32)), "attention fma 64x64");
    assert_eq!(strategy(&AttnCase::new(1, 12, 197, 197, 64, DType::F32)), "attention fma 32x64");
    assert_eq!(strategy(&AttnCase::new(8, 16, 1024, 1024, 64, DType::F32)), "attention fma 64x64");
    assert_eq!(strategy(&AttnCase::new(2, 2, 100, 100, 64, DType::F32)), "attention fma 16x32");
    assert_eq!(strategy(&AttnCase::new(2, 2, 100, 100, 40, b)), "attention fma 16x32");
    // Rows: what neither takes (f64, value head dims past 256).
    assert_eq!(strategy(&AttnCase::new(1, 1, 5, 6, 4, DType::F64)), "attention rows block 128");
    assert_eq!(strategy(&AttnCase { dv: 300, ..AttnCase::new(1, 2, 9, 40, 24, b) }), "attention rows block 128");
}

#[test]
fn tunings_are_validated() {
    let caps = CudaCaps::hopper();
    let k = kernel(&AttnCase::new(1, 2, 100, 100, 64, DType::BF16));
    let bad = [
        AttnTile::mma(48, 64, 4, 2),
        AttnTile::mma(64, 24, 4, 2),
        AttnTile::mma(64, 64, 4, 1),
        AttnTile::mma(256, 64, 4, 2),
        // wgmma: warpgroups of 64 rows, at most three, bn up to 256.
        AttnTile { bm: 128, bn: 64, warps: 4, stages: 2, engine: AttnEngine::Wgmma },
        AttnTile::overlapped(128, 64, 2),
        AttnTile::hopper(256, 64, 2),
        AttnTile::hopper(64, 272, 2),
    ];
    for t in bad {
        assert!(check_tuning(&k, &caps, &Tuning { attn: Some(t), ..Tuning::default() }).is_err(), "{t:?}");
    }
    let ok = Tuning { attn: Some(AttnTile::mma(64, 64, 4, 2)), ..Tuning::default() };
    assert!(check_tuning(&k, &caps, &ok).is_ok());
    let hopper = Tuning { attn: Some(AttnTile::hopper(128, 128, 2)), ..Tuning::default() };
    assert!(check_tuning(&k, &caps, &hopper).is_ok());
    let ampere = CudaCaps { sm: (8, 0), ..caps.clone() };
    assert!(check_tuning(&k, &ampere, &hopper).is_err(), "wgmma is sm_90a only");
    let d80 = kernel(&AttnCase::new(1, 2, 100, 100, 80, DType::BF16));
    assert!(check_tuning(&d80, &caps, &hopper).is_err(), "wgmma tiles take head dims of multiples of 64");
    assert!(check_tuning(&k, &caps, &Tuning { block: Some(96), ..ok.clone() }).is_err());
    assert!(check_tuning(&k, &caps, &Tuning { vectorize: Some(false), ..Tuning::default() }).is_err());
    let f32k = kernel(&AttnCase::new(1, 2, 100, 100, 64, DType::F32));
    assert!(check_tuning(&f32k, &caps, &ok).is_err(), "no tensor cores for f32");
    assert!(check_tuning(&f32k, &caps, &Tuning { block: Some(100), ..Tuning::default() }).is_err());
    let ampere_less = CudaCaps { sm: (7, 5), ..caps.clone() };
    assert!(render::render(&k, &ampere_less, &Tuning::default()).unwrap().strategy.starts_with("attention fma"));
    // Tiled CUDA-core tiles: 16, 32 or 64 rows and keys, 8 warps, one stage, shared memory that fits.
    let fma = |t: AttnTile| Tuning { attn: Some(t), ..Tuning::default() };
    for t in [
        AttnTile::fma(48, 64),
        AttnTile::fma(64, 128),
        AttnTile { warps: 4, ..AttnTile::fma(64, 64) },
        AttnTile { stages: 2, ..AttnTile::fma(64, 64) },
    ] {
        assert!(check_tuning(&f32k, &caps, &fma(t)).is_err(), "{t:?}");
    }
    assert!(check_tuning(&f32k, &caps, &fma(AttnTile::fma(64, 64))).is_ok());
    assert!(check_tuning(&k, &caps, &fma(AttnTile::fma(32, 32))).is_ok(), "bf16 may run on CUDA cores too");
    let f64k = kernel(&AttnCase::new(1, 1, 5, 6, 4, DType::F64));
    assert!(check_tuning(&f64k, &caps, &fma(AttnTile::fma(16, 16))).is_err(), "f64 stays exact on the row template");
    let wide = kernel(&AttnCase { dv: 300, ..AttnCase::new(1, 2, 9, 40, 24, DType::F32) });
    assert!(check_tuning(&wide, &caps, &fma(AttnTile::fma(16, 16))).is_err(), "at most 256 value columns");
    let small = CudaCaps { max_dynamic_shared_bytes: 48 * 1024, ..caps.clone() };
    let d256 = kernel(&AttnCase::new(1, 1, 70, 70, 256, DType::F32));
    assert!(check_tuning(&d256, &small, &fma(AttnTile::fma(64, 64))).is_err(), "shared memory");
    let fallback = render::render(&d256, &small, &Tuning::default()).unwrap().strategy;
    assert_eq!(fallback, "attention rows block 128", "no tile fits: the row template");
    assert!(check_tuning(&f32k, &caps, &Tuning { block: Some(128), ..fma(AttnTile::fma(64, 64)) }).is_err());
}

#[test]
fn snapshots_of_each_template() {
    let mut s = String::new();
    for (what, c) in [
        (
            "tensor cores, causal, additive mask",
            AttnCase { causal: Some(0), mask: AttnMask::Additive, ..AttnCase::new(1, 2, 100, 100, 64, DType::BF16) },
        ),
        (
            "tensor cores, plain (scale folded into the exponent), f16, d128",
            AttnCase::new(1, 2, 100, 130, 128, DType::F16),
        ),
        ("decode, gqa", AttnCase { kv_heads: 1, ..AttnCase::new(2, 4, 1, 1000, 128, DType::F16) }),
        (
            "tiled CUDA cores, bool mask",
            AttnCase { mask: AttnMask::Bool, ..AttnCase::new(1, 2, 9, 33, 40, DType::F32) },
        ),
        (
            "tiled CUDA cores, causal, odd head dims",
            AttnCase { causal: Some(0), dv: 5, ..AttnCase::new(1, 2, 70, 70, 3, DType::F32) },
        ),
        ("rows, f64", AttnCase::new(1, 1, 5, 6, 4, DType::F64)),
        (
            "tensor cores on sm_80 (mma.sync), causal, additive mask",
            AttnCase { causal: Some(0), mask: AttnMask::Additive, ..AttnCase::new(1, 2, 100, 100, 64, DType::BF16) },
        ),
    ] {
        let caps =
            if what.contains("sm_80") { CudaCaps { sm: (8, 0), ..CudaCaps::hopper() } } else { CudaCaps::hopper() };
        let r = render::render(&kernel(&c), &caps, &Tuning::default()).unwrap();
        s.push_str(&format!("// ==== {what}: grid {:?} block {:?} ({})\n{}\n", r.grid, r.block, r.strategy, r.source));
    }
    insta::assert_snapshot!(s);
}

#[test]
fn every_template_and_candidate_compiles_without_spills() {
    let caps = CudaCaps::hopper();
    let here = nvrtc_available("NVRTC compiles");
    let mut report = Vec::new();
    for (what, c) in cases() {
        let k = kernel(&c);
        assert!(matches!(k.body, KernelBody::Attention(_)));
        let cands = candidates(&k, &caps);
        assert_eq!(cands[0], Tuning::default(), "{what}");
        for t in cands {
            let r = render::render(&k, &caps, &t).unwrap_or_else(|e| panic!("{what} {t:?}: {e}"));
            if here {
                report.push(compile(&format!("{what} {t:?}"), &r));
            }
        }
    }
    eprintln!("{}", report.join("\n"));
    let spills: Vec<&String> = report.iter().filter(|l| l.starts_with("SPILL")).collect();
    assert!(spills.is_empty(), "spills or stack frames:\n{spills:#?}");
}

/// ViT-B/16's own layout (q, k and v views of its packed in-projection) at two key tiles and
/// fewer: every candidate compiles without a spill or a serialized `wgmma` (session 28: the
/// persistent default serialized there, C7512).
#[test]
fn packed_qkv_heads_compile_without_spills() {
    if !nvrtc_available("NVRTC compiles") {
        return;
    }
    let caps = CudaCaps::hopper();
    let mut report = Vec::new();
    for seq in [197, 256] {
        let p = attention_packed_qkv(2, 12, seq, 64, DType::BF16);
        let k = &p.kernels[0];
        for t in candidates(k, &caps) {
            let r = render::render(k, &caps, &t).unwrap_or_else(|e| panic!("packed {seq} {t:?}: {e}"));
            report.push(compile(&format!("packed {seq} {t:?}"), &r));
        }
    }
    let spills: Vec<&String> = report.iter().filter(|l| l.starts_with("SPILL")).collect();
    assert!(spills.is_empty(), "spills or serialized wgmma:\n{spills:#?}");
}

#[test]
fn ping_pong_tiles_are_candidates_and_validated() {
    let caps = CudaCaps::hopper();
    let b = DType::BF16;
    for c in [
        AttnCase::new(8, 16, 1024, 1024, 64, b),
        AttnCase { causal: Some(0), ..AttnCase::new(8, 16, 2048, 2048, 128, b) },
    ] {
        let pp: Vec<AttnTile> = candidates(&kernel(&c), &caps)
            .into_iter()
            .filter_map(|t| t.attn)
            .filter(|t| t.engine == AttnEngine::WgmmaPingPong)
            .collect();
        assert!(pp.contains(&AttnTile::pingpong(128, 128, 3)), "d{}: {pp:?}", c.d);
        assert!(pp.contains(&AttnTile::pingpong(128, 64, 4)), "d{}: {pp:?}", c.d);
    }
    let k = |d| kernel(&AttnCase::new(1, 2, 100, 100, d, b));
    let ok = |d, t: AttnTile| check_tuning(&k(d), &caps, &Tuning { attn: Some(t), ..Tuning::default() });
    assert_eq!(AttnTile::pingpong(128, 128, 3).warps, 12, "two consumer warpgroups and the producer");
    assert!(ok(128, AttnTile::pingpong(128, 128, 3)).is_ok());
    assert!(ok(64, AttnTile::pingpong(192, 64, 4)).is_ok());
    // The producer's warps are counted; 4 warpgroups of rows is one too many; three consumers
    // have 152 registers a thread, too few for d128's accumulators.
    assert!(ok(64, AttnTile { warps: 8, ..AttnTile::pingpong(128, 128, 3) }).is_err());
    assert!(ok(64, AttnTile::pingpong(256, 64, 3)).is_err());
    assert!(ok(128, AttnTile::pingpong(192, 64, 4)).is_err());
    assert!(ok(128, AttnTile::pingpong(128, 256, 2)).is_err(), "160 accumulators at most");
    let ampere = CudaCaps { sm: (8, 0), ..caps.clone() };
    let t = Tuning { attn: Some(AttnTile::pingpong(128, 128, 3)), ..Tuning::default() };
    assert!(check_tuning(&k(64), &ampere, &t).is_err(), "sm_90a only");
    // Serialized as the autotuning cache keeps it; tiles written before the engine existed
    // still read as mma.sync.
    let json = serde_json::to_string(&AttnTile::pingpong(128, 128, 3)).unwrap();
    assert!(json.contains("\"engine\":\"wgmma_ping_pong\""), "{json}");
    assert_eq!(serde_json::from_str::<AttnTile>(&json).unwrap(), AttnTile::pingpong(128, 128, 3));
    let old: AttnTile = serde_json::from_str(r#"{"bm":64,"bn":64,"warps":4,"stages":2}"#).unwrap();
    assert_eq!(old.engine, AttnEngine::MmaSync);
}

#[test]
fn snapshot_of_the_ping_pong_tile() {
    // Causal with an additive mask (the guarded score path), m past the tile, two consumers.
    let c = AttnCase { causal: Some(0), mask: AttnMask::Additive, ..AttnCase::new(1, 2, 100, 100, 64, DType::BF16) };
    let t = Tuning { attn: Some(AttnTile::pingpong(128, 64, 3)), ..Tuning::default() };
    let r = render::render(&kernel(&c), &CudaCaps::hopper(), &t).unwrap();
    assert_eq!(r.block, [384, 1, 1]);
    // Every named barrier and register exchange of the schedule (see attention_pingpong's docs).
    for (needle, n) in [
        ("sinter_setmaxnreg_dec<40>();", 1),
        ("sinter_setmaxnreg_inc<232>();", 1),
        ("sinter_bar_sync<256>(1u + wg);", 3),
        ("sinter_bar_arrive<256>(1u + (wg + 1u) % 2u);", 2),
        ("if (wg == 1u) sinter_bar_arrive<256>(1u);", 1),
        ("if (wg + 1u < 2u) sinter_bar_arrive<256>(2u + wg);", 1),
        ("__syncthreads()", 1),
    ] {
        assert_eq!(r.source.matches(needle).count(), n, "{needle}");
    }
    insta::assert_snapshot!(format!("// grid {:?} block {:?} ({})\n{}", r.grid, r.block, r.strategy, r.source));
}

#[test]
fn tma_ping_pong_tiles_take_only_maps_the_copy_engine_can_use() {
    let caps = CudaCaps::hopper();
    let b = DType::BF16;
    let tma = |c: &AttnCase| -> Vec<AttnTile> {
        candidates(&kernel(c), &caps)
            .into_iter()
            .filter_map(|t| t.attn)
            .filter(|t| t.engine == AttnEngine::WgmmaPingPongTma)
            .collect()
    };
    let bench = AttnCase::new(8, 16, 1024, 1024, 64, b);
    assert!(tma(&bench).contains(&AttnTile::pingpong_tma(128, 128, 3)));
    let ok =
        |c: &AttnCase, t: AttnTile| check_tuning(&kernel(c), &caps, &Tuning { attn: Some(t), ..Tuning::default() });
    assert!(ok(&bench, AttnTile::pingpong_tma(128, 128, 3)).is_ok());
    // GQA and BSHD layouts are 4-dimensional maps too.
    let gqa = AttnCase { kv_heads: 2, bshd: true, ..AttnCase::new(2, 4, 300, 300, 128, b) };
    assert!(ok(&gqa, AttnTile::pingpong_tma(128, 64, 4)).is_ok());
    // A box may not be larger than its tensor: fewer keys than the tile's are refused, naming why.
    let short = AttnCase::new(1, 2, 200, 100, 64, b);
    let e = ok(&short, AttnTile::pingpong_tma(128, 128, 3)).unwrap_err();
    assert!(e.to_string().contains("box extent 128 exceeds the tensor's 100"), "{e}");
    assert!(ok(&short, AttnTile::pingpong_tma(128, 64, 4)).is_ok());
    let json = serde_json::to_string(&AttnTile::pingpong_tma(128, 128, 3)).unwrap();
    assert!(json.contains("\"engine\":\"wgmma_ping_pong_tma\""), "{json}");
}

#[test]
fn snapshot_of_the_tma_ping_pong_tile() {
    // GQA over BSHD operands (4-dimensional maps with head and batch coordinates), causal, d128.
    let c = AttnCase { causal: Some(0), kv_heads: 2, bshd: true, ..AttnCase::new(2, 4, 300, 300, 128, DType::BF16) };
    let t = Tuning { attn: Some(AttnTile::pingpong_tma(128, 64, 4)), ..Tuning::default() };
    let r = render::render(&kernel(&c), &CudaCaps::hopper(), &t).unwrap();
    assert_eq!(r.tensor_maps.len(), 2, "K and V");
    for m in &r.tensor_maps {
        assert_eq!(m.desc.dims.len(), 4);
        assert_eq!(m.desc.boxes, vec![64, 64, 1, 1]);
        assert_eq!(m.desc.validate(), Ok(()));
    }
    // Two boxes of K and two of V per tile, issued by one thread; one arrival per stage.
    assert_eq!(r.source.matches("sinter_tma_load<4>(").count(), 4, "two boxes of K, two of V");
    assert_eq!(r.source.matches("sinter_mbar_init(full0 + s * 8u, 1u)").count(), 1);
    assert!(!r.source.contains("ptid"), "no producer thread copies");
    insta::assert_snapshot!(format!(
        "// grid {:?} block {:?} ({})\n// maps {:?}\n{}",
        r.grid, r.block, r.strategy, r.tensor_maps, r.source
    ));
}

#[test]
fn snapshot_of_the_persistent_tile() {
    // The TMA ping-pong tile above as a persistent kernel: the same GQA, BSHD, causal case.
    let c = AttnCase { causal: Some(0), kv_heads: 2, bshd: true, ..AttnCase::new(2, 4, 300, 300, 128, DType::BF16) };
    let t = Tuning { attn: Some(AttnTile::persistent(128, 64, 4)), ..Tuning::default() };
    let caps = CudaCaps::hopper();
    let r = render::render(&kernel(&c), &caps, &t).unwrap();
    // 3 row tiles of 8 flat batches: 24 work tiles, fewer than the SMs, so one block each.
    assert_eq!(r.grid, [24.min(caps.sm_count), 1, 1]);
    assert_eq!(r.scratch_bytes, 8, "the work counter and the count of blocks done");
    assert!(r.split.is_none(), "a persistent grid covers the compiled extent only");
    assert_eq!(r.strategy, "attention wgmma-tma-persistent 128x64 wg2+1 s4");
    // The schedule ring: published once per work tile, read by every consumer thread.
    assert_eq!(r.source.matches("sinter_st_shared_u32(sched0").count(), 1);
    assert_eq!(r.source.matches("atomicAdd(sched_ctr, 1u)").count(), 1);
    // Q copied twice in the consumers' branch (the first work tile, then each next one).
    assert_eq!(r.source.matches("sinter_cp_async16(s_base").count(), 2);
    insta::assert_snapshot!(format!("// grid {:?} block {:?} ({})\n{}", r.grid, r.block, r.strategy, r.source));
}

#[test]
fn persistent_grids_stop_at_the_resident_blocks() {
    // b8 h16 s2048 causal: 2048 work tiles of 128 rows on 132 SMs, one block each (two
    // consumers, d128); 4096 of 64 rows at d64, two blocks each (one consumer).
    let caps = CudaCaps::hopper();
    for (tile, per_sm, d) in [(AttnTile::persistent(128, 128, 3), 1, 128), (AttnTile::persistent(64, 128, 3), 2, 64)] {
        let c = AttnCase { causal: Some(0), ..AttnCase::new(8, 16, 2048, 2048, d, DType::BF16) };
        let t = Tuning { attn: Some(tile), ..Tuning::default() };
        let r = render::render(&kernel(&c), &caps, &t).unwrap();
        assert_eq!(r.grid[0], caps.sm_count * per_sm, "{tile:?}");
        assert!(r.source.contains(&format!("const unsigned n_work = {}u;", 8 * 16 * 2048 / tile.bm)));
    }
}

#[test]
fn causal_work_runs_every_sections_longest_row_tiles_first() {
    // b8 h16 s2048 d128 causal: 1 MiB of keys and values per flat batch, sections of 8 (they
    // divide the 16 heads); 16 row tiles of 128 rows.
    let caps = CudaCaps::hopper();
    let c = AttnCase { causal: Some(0), ..AttnCase::new(8, 16, 2048, 2048, 128, DType::BF16) };
    let r = render::render(&kernel(&c), &caps, &Tuning::default()).unwrap();
    assert!(r.source.contains("const unsigned mt = 15 - blockIdx.x % 128u / 8u;"), "{}", r.source);
    assert!(r.source.contains("bh = blockIdx.x / 128u * 8u + blockIdx.x % 8u;"));
    let split = r.split.expect("a fixed grid");
    assert_eq!((split.per, split.inner), (8, 128));
    // The rendered order, evaluated: a bijection onto (flat batch, row tile) at every batch a
    // dynamic grid may launch (whole sections), each section's longest row tiles first.
    for batch in [1u32, 3, 8] {
        let blocks = batch * 16 * 16;
        let mut seen = std::collections::HashSet::new();
        for w in 0..blocks {
            let (mt, bh) = (15 - w % 128 / 8, w / 128 * 8 + w % 8);
            assert!(bh < batch * 16 && seen.insert((bh, mt)), "block {w}");
            if w % 128 >= 8 {
                let prev = w - 8;
                assert!(15 - prev % 128 / 8 > mt, "block {w} before a longer tile");
            }
        }
        assert_eq!(seen.len() as u32, blocks);
    }
    // Without the mask: one flat batch's row tiles after another's, no sections.
    let plain = render::render(&kernel(&AttnCase::new(8, 16, 2048, 2048, 128, DType::BF16)), &caps, &Tuning::default());
    let plain = plain.unwrap();
    assert!(plain.source.contains("const unsigned mt = blockIdx.x % 16u;"));
    assert_eq!(plain.split.map(|s| (s.per, s.inner)), Some((1, 16)));
}

#[test]
fn dynamic_programs_search_no_persistent_tile() {
    // The d64 default is persistent; max-autotune in a program compiled for a dynamic batch
    // compiles and times only tiles whose grid shrinks with the batch.
    let caps = CudaCaps::hopper();
    let k = kernel(&AttnCase::new(8, 16, 1024, 1024, 64, DType::BF16));
    let persistent = |dynamic| {
        sinter_cuda::backend::candidate_sources(&[&k], &caps, dynamic)
            .iter()
            .filter(|(_, s)| s.contains("sched_ctr"))
            .count()
    };
    assert!(persistent(false) >= 4, "{}", persistent(false));
    assert_eq!(persistent(true), 0);
    assert!(sinter_cuda::backend::candidate_sources(&[&k], &caps, true).len() >= 20);
    assert!(candidates(&k, &caps).into_iter().filter(|t| !render::shrinks_with_batch(t)).count() >= 4);
}

#[test]
fn exported_bf16_scores_fold_their_scale() {
    // The workloads are written as exported: the bf16 scores scaled by a bf16 constant, then cast
    // to f32 for the softmax. The kernel IR carries 16-bit values in f32, so the scale folds into
    // the exponent as it does for an f32 score (one multiply per score less, O rescaled early).
    use sinter_core::schedule::{ScheduleOptions, schedule};
    use sinter_core::workloads::{self, Scale};
    for name in ["attention_b8h16s1024d64_bf16", "attention_causal_b8h16s2048d128_bf16"] {
        let w = workloads::get(name).expect("workload");
        let g = sinter_core::passes::optimize(&w.build(Scale::Full).unwrap()).unwrap();
        let p = schedule(&g, &common::cuda_caps(), &ScheduleOptions::default()).unwrap();
        let k = p.kernels.iter().find(|k| matches!(k.body, KernelBody::Attention(_))).expect("fused attention");
        let r = render::render(k, &CudaCaps::hopper(), &Tuning::default()).unwrap();
        assert!(r.source.contains("times the score's scale, folded in"), "{name}:\n{}", r.source);
    }
}

#[test]
fn whole_tiles_carry_no_masking_branch() {
    // Rows and keys in whole tiles, no causal bound: the tensor-core tiles emit no `full` guard
    // (it would never be taken); one row or one key past a tile, or a causal bound, brings it back,
    // with either score form (the folded scale, or an additive mask's own loads). Four key tiles:
    // at two or fewer ptxas serializes the persistent tile's products (C7512, `SHORT_KV`).
    let caps = CudaCaps::hopper();
    let whole = AttnCase::new(1, 2, 128, 512, 64, DType::BF16);
    let cases = [
        (whole.clone(), false),
        (AttnCase::new(1, 2, 129, 512, 64, DType::BF16), true),
        (AttnCase::new(1, 2, 128, 513, 64, DType::BF16), true),
        (AttnCase { causal: Some(0), ..whole.clone() }, true),
        (AttnCase { mask: AttnMask::Additive, ..whole.clone() }, false),
        (AttnCase { mask: AttnMask::Additive, ..AttnCase::new(1, 2, 100, 512, 64, DType::BF16) }, true),
    ];
    for (c, guarded) in cases {
        let k = kernel(&c);
        for tile in [AttnTile::persistent(64, 128, 3), AttnTile::hopper(64, 128, 2), AttnTile::mma(128, 64, 4, 3)] {
            let r = render::render(&k, &caps, &Tuning { attn: Some(tile), ..Tuning::default() }).unwrap();
            assert_eq!(r.source.contains("const bool full"), guarded, "{c:?} {tile:?}");
            if nvrtc_available("whole_tiles_carry_no_masking_branch") {
                assert!(!compile(&format!("{c:?}"), &r).starts_with("SPILL"), "{c:?} {tile:?}");
            }
        }
    }
}

#[test]
fn whole_rows_of_16_bit_outputs_store_16_bytes_at_a_time() {
    // Rows in whole tiles, a 16-bit output and dv a multiple of 32: each row half's pairs are
    // exchanged in the quad and stored 16 bytes at a time, on every tensor-core engine and in
    // BSHD too (a strided row). A row past a tile (the exchange would run under the row guard), an
    // f32 output or dv = 80 (ten column groups) keep the 4-byte pairs.
    let caps = CudaCaps::hopper();
    let b = DType::BF16;
    let cases = [
        (AttnCase::new(1, 2, 128, 512, 64, b), true),
        (AttnCase { causal: Some(0), ..AttnCase::new(1, 2, 256, 256, 128, DType::F16) }, true),
        (AttnCase { bshd: true, kv_heads: 1, ..AttnCase::new(2, 2, 128, 300, 32, b) }, true),
        (AttnCase::new(1, 2, 129, 512, 64, b), false),
        (AttnCase::new(1, 2, 128, 512, 64, DType::F32), false),
        (AttnCase::new(1, 2, 128, 512, 80, b), false),
    ];
    for (c, quad) in cases {
        let k = kernel(&c);
        // The default tuning, and the tensor-core engines where the case takes them.
        let tiles = [
            None,
            Some(AttnTile::persistent(64, 128, 3)),
            Some(AttnTile::hopper(64, 128, 2)),
            Some(AttnTile::mma(128, 64, 4, 3)),
        ];
        let mut rendered = 0;
        for tile in tiles {
            let Ok(r) = render::render(&k, &caps, &Tuning { attn: tile, ..Tuning::default() }) else { continue };
            rendered += 1;
            let exchanged = r.source.contains("__shfl_xor_sync(0xffffffffu, qup ? pk[lo] : pk[hi], qk)");
            let wide = r.source.contains("*reinterpret_cast<sinter_vec<unsigned, 4>*>(a3 + ");
            assert_eq!((exchanged, wide), (quad, quad), "{c:?} {tile:?}\n{}", r.source);
            if nvrtc_available("whole_rows_of_16_bit_outputs_store_16_bytes_at_a_time") {
                assert!(!compile(&format!("{c:?}"), &r).starts_with("SPILL"), "{c:?} {tile:?}");
            }
        }
        assert!(rendered > 0, "{c:?}: no tile rendered");
    }
}
