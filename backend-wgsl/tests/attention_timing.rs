//! Device timing of the cooperative-matrix attention kernel and of variants with one part taken out
//! (`--ignored`, on a GPU with f16 cooperative matrices: the device machine through Vulkan). Each
//! variant is the rendered WGSL with lines removed or replaced, so the numbers say where the time
//! goes; the variants compute wrong results and are never checked. Not a unit test: run it with
//! `cargo test -p sinter-wgsl --release --test attention_timing -- --ignored --nocapture`.

mod common;

use common::*;
use sinter_core::prelude::*;
use sinter_core::testsuite::programs::{AttnCase, attention};
use sinter_wgsl::render::{Tuning, render, render_with};

/// `src` with every line containing `pat` replaced by `with` (or removed when `with` is empty).
fn edit(src: &str, pat: &str, with: &str) -> String {
    src.lines()
        .filter_map(
            |l| if l.contains(pat) { (!with.is_empty()).then(|| with.to_string()) } else { Some(l.to_string()) },
        )
        .collect::<Vec<_>>()
        .join("\n")
}

/// `src` without the loads of the K and V tiles into their registers (the registers keep their zeros).
fn no_kv_loads(src: &str) -> String {
    src.lines()
        .filter(|l| {
            let t = l.trim_start();
            let reg = t.starts_with("pk[") || t.starts_with("pv[");
            !reg || t.ends_with(">();")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The kernel and its variants, each with one part taken out.
fn variants(full: &str) -> Vec<(&'static str, String)> {
    vec![
        ("full", full.to_string()),
        ("no S products", edit(full, "s = coopMultiplyAdd(", "")),
        ("no P V products", edit(full, "po = coopMultiplyAdd(", "")),
        ("no products", edit(&edit(full, "s = coopMultiplyAdd(", ""), "po = coopMultiplyAdd(", "")),
        ("no K/V global loads", no_kv_loads(full)),
        ("bf16 to f16 as a plain cast", full.replace("sinter_bf16_to_f16_v4(bitcast", "vec4<f16>(bitcast")),
        (
            "plain max, no p rounding",
            full.replace("= sinter_fmax(", "= max(").replace("f16(sinter_round_f16(p))", "f16(p)"),
        ),
        ("no O accumulation", edit(&full.replace("let ov = o[", "let ov = 0.0f; //"), "o[", "")),
        ("no S store", edit(full, "coopStoreT(s,", "")),
    ]
}

#[test]
fn the_variants_validate() {
    let caps = coop_caps();
    let p = attention(&AttnCase::new(2, 2, 128, 128, 64, DType::F16));
    let r = render(&p.kernels[0], &p, &caps).expect("render");
    assert!(r.strategy.contains("coop"), "{}", r.strategy);
    for (name, src) in variants(&r.source) {
        assert!(name == "full" || name.starts_with("bf16") || src != r.source, "{name}: nothing taken out");
        naga_validate(&src);
    }
}

#[test]
#[ignore]
fn coop_attention_parts() {
    let Some(Ok(mut b)) = gpu_backend().map(|_| open_backend("timing", None)) else { return };
    b.set_bf16_matmul_as_f16(true);
    if !b.wgsl_caps().has_coop_matrix {
        eprintln!("SKIPPED: no f16 cooperative matrices");
        return;
    }
    let dev = b.device();
    // SINTER_ATTN_DIMS: head dims (default 64); SINTER_ATTN_DTYPES: f16, bf16 (bf16 runs as f16).
    let list = |var: &str, default: &str| std::env::var(var).unwrap_or_else(|_| default.to_string());
    let dims: Vec<usize> = list("SINTER_ATTN_DIMS", "64").split(',').filter_map(|x| x.parse().ok()).collect();
    let dtypes: Vec<DType> = list("SINTER_ATTN_DTYPES", "f16")
        .split(',')
        .map(|x| if x == "bf16" { DType::BF16 } else { DType::F16 })
        .collect();
    for (s, d, dt) in dims.iter().flat_map(|&d| dtypes.iter().map(move |&dt| (1024, d, dt))) {
        let c = AttnCase::new(8, 16, s, s, d, dt);
        let p = attention(&c);
        let k = &p.kernels[0];
        let r = render(k, &p, b.wgsl_caps()).expect("render");
        let flops = 4.0 * (8 * 16 * s * s * d) as f64;
        let mut variants = variants(&r.source);
        for keys in [32, 16] {
            let t = Tuning { attn_keys: Some(keys), ..Tuning::default() };
            if let Ok(rk) = render_with(k, &p, b.wgsl_caps(), &t) {
                assert_eq!(rk.grid, r.grid);
                variants.push((if keys == 32 { "32-key tiles" } else { "16-key tiles" }, rk.source));
            }
        }
        let bufs = program_buffers(dev, &p, &[0x00, 0x3c]);
        let args = bind(&r, &bufs);
        let progs: Vec<_> = variants
            .iter()
            .filter_map(|(name, src)| match dev.compile(src, &r.entry, name) {
                Ok(prog) => Some((name, prog)),
                Err(e) => {
                    println!("  {name}: does not compile: {e}");
                    None
                }
            })
            .collect();
        let mut best = vec![f64::INFINITY; progs.len()];
        for _round in 0..5 {
            for (i, (_, prog)) in progs.iter().enumerate() {
                let mut batch = dev.batch().timed(true);
                for _ in 0..5 {
                    batch.dispatch(prog, &args, r.grid).expect("dispatch");
                }
                let t = batch.run().expect("run");
                let ns = t.dispatch_ns.expect("timestamps");
                best[i] = best[i].min(median(ns.iter().map(|&x| x as f64 / 1e6).collect()));
            }
        }
        println!("s {s} d {d} {dt} ({}):", r.strategy);
        for ((name, _), ms) in progs.iter().zip(&best) {
            println!("  {name:<28} {ms:.4} ms  {:.1} TFLOP/s", flops / ms / 1e9);
        }
    }
}
