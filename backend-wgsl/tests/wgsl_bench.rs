//! Benchmark harness for the WGSL backend (ignored by default; run on a GPU machine):
//!
//! ```text
//! SINTER_BENCH=add_relu_mul_10M_f32,softmax_8192x8192_f32 SINTER_BENCH_MODES=reduce-overhead,max-autotune \
//!   cargo test -p sinter-wgsl --release --test wgsl_bench -- --ignored --nocapture
//! ```
//!
//! For each workload (all by default) and mode: schedule at full scale (`SINTER_BENCH_SCALE=reduced` for the
//! small one), load, run once, then `SINTER_BENCH_ITERS` (default 20) timed runs; prints the median GPU time
//! of the whole program and of each kernel, with achieved GB/s and TFLOP/s, and writes JSON lines to
//! `SINTER_BENCH_OUT` when set.

use std::io::Write;

mod common;
use common::median;

use sinter_core::backend::{Backend, Executable, Mode};
use sinter_core::schedule::{ScheduleOptions, schedule};
use sinter_core::workloads::{self, Scale};
use sinter_wgsl::WgslBackend;

#[test]
#[ignore = "benchmark: run on a GPU with --ignored"]
fn bench_workloads() {
    let b = match WgslBackend::new() {
        Ok(b) => b,
        Err(e) => {
            eprintln!("SKIPPED: {e}");
            return;
        }
    };
    eprintln!("device: {}", b.device_name());
    if std::env::var("SINTER_BENCH_COPY").is_ok_and(|v| v == "1") {
        match b.device().measure_copy_bandwidth(1 << 30) {
            Ok(bw) => println!("vec4 copy of 1 GiB: {bw:?}"),
            Err(e) => println!("copy calibration failed: {e}"),
        }
    }
    let wanted: Option<Vec<String>> =
        std::env::var("SINTER_BENCH").ok().filter(|s| !s.is_empty()).map(|s| s.split(',').map(String::from).collect());
    let modes: Vec<Mode> = std::env::var("SINTER_BENCH_MODES")
        .ok()
        .map(|s| s.split(',').filter_map(Mode::from_name).collect())
        .unwrap_or_else(|| vec![Mode::ReduceOverhead]);
    let scale = std::env::var("SINTER_BENCH_SCALE").ok().and_then(|s| Scale::parse(&s)).unwrap_or(Scale::Full);
    let iters: usize = std::env::var("SINTER_BENCH_ITERS").ok().and_then(|s| s.parse().ok()).unwrap_or(20);
    let mut out = std::env::var("SINTER_BENCH_OUT").ok().and_then(|p| std::fs::File::create(p).ok());
    for w in workloads::all() {
        if wanted.as_ref().is_some_and(|ws| !ws.iter().any(|x| x == w.name)) {
            continue;
        }
        let g = match w.build(scale).and_then(|g| sinter_core::passes::optimize(&g)) {
            Ok(g) => g,
            Err(e) => {
                eprintln!("{}: build failed: {e}", w.name);
                continue;
            }
        };
        let p = match schedule(&g, b.caps(), &ScheduleOptions::default()) {
            Ok(p) => p,
            Err(e) => {
                eprintln!("{}: schedule failed: {e}", w.name);
                continue;
            }
        };
        if std::env::var("SINTER_BENCH_CHECK").is_ok_and(|v| v == "1") {
            check_reduced(&b, &w);
        }
        let inputs = w.inputs(scale, 1);
        for &mode in &modes {
            let t0 = std::time::Instant::now();
            let mut exe = match b.load_wgsl(&p, mode) {
                Ok(e) => e,
                Err(e) => {
                    eprintln!("{} {}: load failed: {e}", w.name, mode.name());
                    continue;
                }
            };
            let load_s = t0.elapsed().as_secs_f64();
            if let Err(e) = exe.run(&inputs) {
                eprintln!("{} {}: run failed: {e}", w.name, mode.name());
                continue;
            }
            // Warm-up (clocks, caches), then the measured runs.
            let warmup = std::env::var("SINTER_BENCH_WARMUP").ok().and_then(|s| s.parse().ok()).unwrap_or(3);
            let _ = exe.run_timed(&inputs, warmup);
            let (_, timings) = match exe.run_timed(&inputs, iters) {
                Ok(t) => t,
                Err(e) => {
                    eprintln!("{} {}: timed run failed: {e}", w.name, mode.name());
                    continue;
                }
            };
            let total = median(timings.iter().map(|run| run.iter().map(|k| k.dur_ns).sum::<f64>()).collect());
            let ms = total / 1e6;
            let gbps = w.min_bytes(scale) / (total * 1e-9) / 1e9;
            let tflops = w.flops(scale) / (total * 1e-9) / 1e12;
            println!(
                "{:<32} {:<16} {:>9.4} ms {:>8.1} GB/s {:>8.2} TFLOP/s  {} kernels, load {:.2}s",
                w.name,
                mode.name(),
                ms,
                gbps,
                tflops,
                p.kernels.len(),
                load_s
            );
            let rendered = exe.rendered();
            let mut kernels = Vec::new();
            for r in rendered.iter() {
                let d = median(
                    timings
                        .iter()
                        .filter_map(|run| run.iter().find(|k| k.kernel == r.name))
                        .map(|k| k.dur_ns)
                        .collect(),
                );
                let kb = p.kernels.iter().find(|k| k.name == r.name).map_or(0.0, |k| k.bytes);
                println!(
                    "    {:<40} {:>9.4} ms {:>8.1} GB/s  {} grid {:?} wg {:?}",
                    r.name,
                    d / 1e6,
                    kb / (d * 1e-9) / 1e9,
                    r.strategy,
                    r.grid,
                    r.workgroup_size
                );
                kernels.push(serde_json::json!({"name": r.name, "ms": d / 1e6, "strategy": r.strategy}));
            }
            for l in exe.tuning_log() {
                println!("    tune: {l}");
            }
            if let Some(f) = out.as_mut() {
                let line = serde_json::json!({
                    "name": w.name, "mode": mode.name(), "ms": ms, "gbps": gbps, "tflops": tflops,
                    "load_s": load_s, "kernels": kernels, "device": b.device_name(),
                });
                let _ = writeln!(f, "{line}");
            }
        }
    }
}

/// Runs `w` at reduced scale and compares with its reference and the kernel-IR interpreter.
fn check_reduced(b: &WgslBackend, w: &workloads::Workload) {
    let g = sinter_core::passes::optimize(&w.build(Scale::Reduced).expect("build")).expect("optimize");
    let p = schedule(&g, b.caps(), &ScheduleOptions::default()).expect("schedule");
    let inputs = w.inputs(Scale::Reduced, 3);
    let want = w.reference(Scale::Reduced, &inputs).expect("reference");
    let interp = sinter_core::kernel::interp::run_program(&p, &inputs).expect("interp");
    let mut exe = b.load_wgsl(&p, Mode::Default).expect("load");
    exe.poison(0xff).expect("poison");
    let got = exe.run(&inputs).expect("run");
    let (rtol, atol) = w.tolerance();
    for (i, ((g, r), ii)) in got.iter().zip(&want).zip(&interp).enumerate() {
        let vs_ref = g.tolerance_ratio(r, rtol, atol);
        let vs_interp = g.tolerance_ratio(ii, rtol, atol);
        let interp_ref = ii.tolerance_ratio(r, rtol, atol);
        let ok = vs_ref <= 1.0 || interp_ref > 1.0 && vs_interp <= 1.0;
        println!(
            "check {:<32} out {i}: {} (gpu/ref {vs_ref:.3}, gpu/interp {vs_interp:.3}, interp/ref {interp_ref:.3}; {})",
            w.name,
            if ok { "PASS" } else { "FAIL" },
            exe.rendered().iter().map(|r| r.strategy.as_str()).collect::<Vec<_>>().join(", ")
        );
    }
}

/// Prints the scheduled kernels and their WGSL for the workloads in `SINTER_BENCH` (no GPU needed), with
/// the limits of a large discrete GPU.
#[test]
#[ignore = "inspection: prints WGSL"]
fn dump_workloads() {
    use sinter_core::kernel::Capabilities;
    use sinter_wgsl::render::{WgslCaps, render};
    let wcaps = WgslCaps {
        max_invocations: 1024,
        max_workgroup_size_x: 1024,
        max_storage_buffers: 16,
        max_binding_bytes: (2u64 << 30) - 4,
        max_workgroup_storage_bytes: 49152,
        ..WgslCaps::baseline()
    };
    let caps = Capabilities {
        backend: "wgsl".into(),
        max_workgroup_size: 1024,
        max_shared_bytes: 49152,
        max_bindings: 16,
        max_binding_bytes: wcaps.max_binding_bytes,
        subgroup_size: Some(32),
        dtypes: sinter_wgsl::backend::DTYPES.to_vec(),
        compute_units: 0,
    };
    let wanted = std::env::var("SINTER_BENCH").unwrap_or_default();
    let scale = std::env::var("SINTER_BENCH_SCALE").ok().and_then(|s| Scale::parse(&s)).unwrap_or(Scale::Full);
    for w in workloads::all() {
        if !wanted.split(',').any(|x| x == w.name) {
            continue;
        }
        let g = sinter_core::passes::optimize(&w.build(scale).expect("build")).expect("optimize");
        let p = schedule(&g, &caps, &ScheduleOptions::default()).expect("schedule");
        for k in &p.kernels {
            let r = render(k, &p, &wcaps).expect("render");
            println!("==== {} ({}, grid {:?})\n{}", k.name, r.strategy, r.grid, r.source);
        }
    }
}
