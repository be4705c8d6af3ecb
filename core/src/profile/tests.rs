//! Tests of the profile schema, builder, files, calibration cache, roofline analysis and trace
//! export.

use super::*;
use crate::ir::{Graph, Op};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::Path;

fn ceilings() -> Ceilings {
    Ceilings {
        copy_gbps: 3000.0,
        matmul_tflops: BTreeMap::from([("f32".to_string(), 50.0), ("f16".to_string(), 700.0)]),
        matmul_method: BTreeMap::from([
            ("f32".to_string(), "cuBLASLt 8192^3 f32".to_string()),
            ("f16".to_string(), "cuBLASLt 8192^3 f16".to_string()),
        ]),
        launch_overhead_us: 4.0,
        measured: true,
    }
}

fn sample() -> Profile {
    let mut b =
        ProfileBuilder::new("layernorm_gelu", "wgsl", Mode::Compiled, DeviceInfo::new("test gpu", "wgsl", ceilings()));
    let mut rec = SpanRecorder::new();
    rec.record(SpanCategory::Capture, "capture", || ());
    rec.push(SpanCategory::Pass, "compile", rec.origin(), rec.origin() + std::time::Duration::from_micros(50), "");
    rec.push(
        SpanCategory::Pass,
        "decompose",
        rec.origin() + std::time::Duration::from_micros(1),
        rec.origin() + std::time::Duration::from_micros(9),
        "",
    );
    b.add_recorded_spans(&rec);
    let k0 = b.add_kernel(
        KernelProfile::new("k0_ln_stats")
            .origins([(1, "layer_norm"), (1, "layer_norm")])
            .bytes(134e6)
            .flops(67e6)
            .grid([8192, 1, 1])
            .block([256, 1, 1]),
    );
    let k1 = b.add_kernel(
        KernelProfile::new("k1_norm_gelu").origins([(2, "gelu"), (1, "layer_norm")]).bytes(268e6).flops(600e6),
    );
    let mut t = 100_000.0;
    for it in 0..4 {
        for (k, d) in [(k0, 60_000.0), (k1, 100_000.0)] {
            let l = b.push_launch(Launch::new(k, it, t, t + 3_000.0));
            b.set_device_time(l, t + 5_000.0, t + 5_000.0 + d).unwrap();
            t += d + 8_000.0;
        }
    }
    b.push_fusion(FusionDecision {
        nodes: vec![1, 2],
        kernels: vec!["k0_ln_stats".into(), "k1_norm_gelu".into()],
        fused: false,
        reason: "reduction followed by broadcast".into(),
    });
    b.finish().unwrap()
}

#[test]
fn builder_fills_stats_and_iterations() {
    let p = sample();
    assert_eq!(p.iterations, 4);
    assert_eq!(p.kernels[0].times_ns, vec![60_000.0; 4]);
    assert_eq!(p.kernels[1].stats.as_ref().unwrap().median_ns, 100_000.0);
    assert_eq!(p.kernels[0].nodes, vec![1]);
    assert_eq!(p.kernels[1].ops, vec!["layer_norm", "gelu"]);
    let earliest = p
        .launches
        .iter()
        .map(|l| l.host_start_ns)
        .chain(p.compile_spans.iter().map(|s| s.start_ns))
        .fold(f64::INFINITY, f64::min);
    assert_eq!(earliest, 0.0);
}

#[test]
fn stats_median_even_and_odd() {
    let s = TimeStats::from_samples(&[4.0, 1.0, 3.0, 2.0]).unwrap();
    assert_eq!((s.min_ns, s.median_ns, s.mean_ns, s.max_ns, s.count), (1.0, 2.5, 2.5, 4.0, 4));
    assert_eq!(TimeStats::from_samples(&[5.0, f64::NAN, 1.0, 3.0]).unwrap().median_ns, 3.0);
    assert!(TimeStats::from_samples(&[]).is_none());
}

#[test]
fn write_read_round_trip() {
    let dir = std::env::temp_dir().join(format!("sinter-profile-rt-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("graph.txt"), "kept").unwrap();
    let p = sample();
    p.write(&dir).unwrap();
    let q = Profile::read(&dir).unwrap();
    assert_eq!(p, q);
    assert_eq!(std::fs::read_to_string(dir.join("graph.txt")).unwrap(), "kept");
    let trace: Value = serde_json::from_str(&std::fs::read_to_string(dir.join(TRACE_FILE)).unwrap()).unwrap();
    validate_chrome_trace(&trace).unwrap();
    assert_eq!(FusionFile::read(&dir).unwrap(), None);
    // The compile driver's fusion.json (a bare array of scheduler decisions) reads too.
    let raw = vec![crate::kernel::FusionDecision {
        nodes: vec![7, 8],
        fused: false,
        reason: "reduction followed by broadcast".into(),
        kernels: vec!["k0".into(), "k1".into()],
        origins: vec![1, 2],
    }];
    std::fs::write(dir.join(FUSION_FILE), serde_json::to_string(&raw).unwrap()).unwrap();
    let f = FusionFile::read(&dir).unwrap().unwrap();
    assert_eq!(f.decisions[0].nodes, vec![1, 2]);
    assert_eq!(f.decisions[0].kernels, vec!["k0", "k1"]);
    let versioned = FusionFile { schema_version: SCHEMA_VERSION, decisions: p.fusion.clone() };
    std::fs::write(dir.join(FUSION_FILE), serde_json::to_string(&versioned).unwrap()).unwrap();
    assert_eq!(FusionFile::read(&dir).unwrap().unwrap(), versioned);
    // An eager profile beside it is read by mode; `read` prefers the compiled one.
    let mut e = p.clone();
    e.mode = Mode::Eager;
    e.write(&dir).unwrap();
    assert_eq!(Profile::read_mode(&dir, Mode::Eager).unwrap().unwrap().mode, Mode::Eager);
    assert_eq!(Profile::read(&dir).unwrap().mode, Mode::Compiled);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn unknown_schema_version_is_a_clear_error() {
    let mut v = serde_json::to_value(sample()).unwrap();
    v["schema_version"] = json!(99);
    v["sinter_version"] = json!("9.9.9");
    let err = Profile::from_json(Path::new("old/profile.json"), &v.to_string()).unwrap_err();
    assert!(matches!(err, ProfileError::UnsupportedSchema { found: 99, .. }));
    let msg = err.to_string();
    assert!(
        msg.contains("schema version 99") && msg.contains("9.9.9") && msg.contains("reads only schema version 1"),
        "{msg}"
    );
    v.as_object_mut().unwrap().remove("schema_version");
    let err = Profile::from_json(Path::new("x/profile.json"), &v.to_string()).unwrap_err();
    assert!(matches!(err, ProfileError::MissingSchema { .. }), "{err}");
    let err = Profile::from_json(Path::new("x/profile.json"), "{not json").unwrap_err();
    assert!(matches!(err, ProfileError::Parse { .. }));
    let missing = std::env::temp_dir().join("sinter-no-such-folder-xyz");
    assert!(Profile::read(&missing).is_err());
}

#[test]
fn invalid_launch_is_rejected() {
    let mut p = sample();
    p.launches[0].kernel = 7;
    assert!(matches!(p.validate(), Err(ProfileError::Invalid(_))));
    let mut p = sample();
    p.launches[0].device_end_ns = Some(f64::NAN);
    assert!(p.validate().is_err());
}

#[test]
fn chrome_trace_is_valid() {
    let p = sample();
    let t = chrome_trace(&p);
    validate_chrome_trace(&t).unwrap();
    let evs = t["traceEvents"].as_array().unwrap();
    let xs: Vec<&Value> = evs.iter().filter(|e| e["ph"] == "X").collect();
    assert_eq!(xs.iter().filter(|e| e["cat"] == "kernel").count(), 8);
    assert_eq!(xs.iter().filter(|e| e["cat"] == "launch").count(), 8);
    assert_eq!(evs.iter().filter(|e| e["ph"] == "s").count(), 8);
    assert_eq!(evs.iter().filter(|e| e["ph"] == "f").count(), 8);
    let k = xs.iter().find(|e| e["cat"] == "kernel").unwrap();
    for key in ["grid", "block", "bytes", "flops", "achieved_gbps", "verdict", "ops"] {
        assert!(k["args"].get(key).is_some(), "kernel args lack {key}");
    }
    assert_eq!(k["pid"], 2);
    assert_eq!(t["displayTimeUnit"], "ns");
    assert_eq!(t["otherData"]["sinter_schema_version"], SCHEMA_VERSION);
    // Names for both processes and all threads.
    assert_eq!(evs.iter().filter(|e| e["ph"] == "M" && e["name"] == "thread_name").count(), 3);
}

#[test]
fn chrome_trace_fixes_overlaps() {
    let mut p = sample();
    // Device clock jitter: the second kernel starts 1 µs before the first ends.
    let s1 = p.launches[1].device_start_ns.unwrap();
    p.launches[0].device_end_ns = Some(s1 + 1000.0);
    // A compile child outliving its parent.
    p.compile_spans.push(Span {
        name: "late".into(),
        category: SpanCategory::Fuse,
        start_ns: 40_000.0,
        dur_ns: 1e6,
        detail: String::new(),
    });
    let t = chrome_trace(&p);
    validate_chrome_trace(&t).unwrap();
    assert!(t.to_string().contains("\"clipped\":true"));
}

#[test]
fn hundred_thousand_launches_trace_is_valid() {
    let mut b = ProfileBuilder::new("big", "wgsl", Mode::Compiled, DeviceInfo::new("d", "wgsl", ceilings()));
    let ks: Vec<usize> =
        (0..5).map(|i| b.add_kernel(KernelProfile::new(format!("k{i}")).bytes(1e6).flops(1e6))).collect();
    let mut t = 0.0;
    for i in 0..100_000u32 {
        let l = Launch::new(ks[i as usize % 5], i / 5, t, t + 700.0).device(t + 900.0, t + 3_100.3);
        b.push_launch(l);
        t += 3_333.3;
    }
    let p = b.finish().unwrap();
    let start = std::time::Instant::now();
    let trace = chrome_trace(&p);
    validate_chrome_trace(&trace).unwrap();
    let evs = trace["traceEvents"].as_array().unwrap();
    assert_eq!(evs.iter().filter(|e| e["ph"] == "X").count(), 200_000);
    assert!(start.elapsed().as_secs_f64() < 30.0, "{:?}", start.elapsed());
}

#[test]
fn validator_catches_problems() {
    let bad = json!({"traceEvents": [
        {"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 0.0, "dur": 10.0},
        {"ph": "X", "name": "b", "pid": 1, "tid": 1, "ts": 5.0, "dur": 10.0},
        {"ph": "X", "name": "c", "pid": 1, "ts": 5.0, "dur": 10.0},
        {"ph": "s", "name": "f", "pid": 1, "tid": 1, "id": 1, "ts": 1.0},
        {"ph": "f", "name": "f", "pid": 1, "tid": 1, "id": 2, "ts": 1.0},
    ]});
    let errs = validate_chrome_trace(&bad).unwrap_err();
    assert!(errs.iter().any(|e| e.contains("overlaps")), "{errs:?}");
    assert!(errs.iter().any(|e| e.contains("without ts, dur or tid")), "{errs:?}");
    assert!(errs.iter().any(|e| e.contains("start without finish")), "{errs:?}");
    assert!(errs.iter().any(|e| e.contains("bp")), "{errs:?}");
}

fn kernel_with(time_ns: f64, bytes: f64, flops: f64, dtype: &str) -> KernelProfile {
    let mut k = KernelProfile::new("k").bytes(bytes).flops(flops).dtype(dtype);
    k.times_ns = vec![time_ns];
    k.stats = TimeStats::from_samples(&k.times_ns);
    k
}

fn verdict_of(k: KernelProfile, c: Ceilings) -> KernelAnalysis {
    let mut p = Profile::new("w", "wgsl", Mode::Compiled, DeviceInfo::new("d", "wgsl", c));
    p.kernels.push(k);
    analyze(&p).kernels.remove(0)
}

#[test]
fn roofline_verdicts() {
    // 1 GB elementwise copy-like kernel in 400 µs: 2500 GB/s, intensity 0.25 < ridge 16.7.
    let a = verdict_of(kernel_with(400_000.0, 1e9, 2.5e8, "f32"), ceilings());
    assert_eq!(a.verdict, Verdict::BandwidthBound, "{}", a.reason);
    assert!((a.achieved_gbps.unwrap() - 2500.0).abs() < 1e-6);
    assert!((a.bandwidth_fraction.unwrap() - 2500.0 / 3000.0).abs() < 1e-9);
    assert!(a.reason.contains("83.3%"), "{}", a.reason);
    // Big f16 GEMM: 8192^3*2 flops over 3*8192^2*2 bytes: intensity ~2731 > ridge 233.
    let n = 8192.0f64;
    let a = verdict_of(kernel_with(2.0e6, 3.0 * n * n * 2.0, 2.0 * n * n * n, "f16"), ceilings());
    assert_eq!(a.verdict, Verdict::ComputeBound, "{}", a.reason);
    assert!((a.achieved_tflops.unwrap() - 2.0 * n * n * n / 2.0e6 / 1e3).abs() < 1e-6);
    // 8 µs kernel with a 4 µs launch overhead: under 5x.
    let a = verdict_of(kernel_with(8_000.0, 1e6, 1e6, "f32"), ceilings());
    assert_eq!(a.verdict, Verdict::OverheadBound, "{}", a.reason);
    // 30 µs-long... no: 15 µs, tiny work, no launch overhead known: under 10% of both.
    let mut c = ceilings();
    c.launch_overhead_us = 0.0;
    let a = verdict_of(kernel_with(15_000.0, 1e6, 1e3, "f32"), c.clone());
    assert_eq!(a.verdict, Verdict::OverheadBound, "{}", a.reason);
    // A long kernel far below both ceilings is classified by intensity, with a note.
    let a = verdict_of(kernel_with(10e6, 1e6, 1e3, "f32"), c);
    assert_eq!(a.verdict, Verdict::BandwidthBound);
    assert!(a.reason.contains("Far below both ceilings"), "{}", a.reason);
    // No ceilings, no time.
    let a = verdict_of(kernel_with(400_000.0, 1e9, 1e8, "f32"), Ceilings::default());
    assert_eq!(a.verdict, Verdict::Unknown);
    assert!(a.reason.contains("sinter calibrate"));
    let a = verdict_of(KernelProfile::new("k"), ceilings());
    assert_eq!(a.verdict, Verdict::Unknown);
}

#[test]
fn run_level_analysis() {
    let p = sample();
    let a = analyze(&p);
    // Per iteration: kernels 60 µs and 100 µs with an 8 µs gap between them (the device
    // start is 5 µs after each launch, launches 8 µs after the previous kernel's span).
    assert_eq!(a.launch_gap_count, 4);
    assert!((a.launch_gap_total_ns - 4.0 * 8_000.0).abs() < 1e-6, "{}", a.launch_gap_total_ns);
    let busy = a.gpu_busy_share.unwrap();
    assert!((busy - 160.0 / 168.0).abs() < 1e-9, "{busy}");
    assert_eq!(a.dominant, Some(1));
    assert!((a.kernels[1].share - 100.0 / 160.0).abs() < 1e-9);
    let s = a.summary(&p);
    assert!(s.contains("k1_norm_gelu") && s.contains("62%") && s.contains("layer_norm, gelu"), "{s}");
    assert!(!s.contains(".."), "{s}");
}

#[test]
fn durations_format_compactly() {
    assert_eq!(fmt_ns(812.4), "812 ns");
    assert_eq!(fmt_ns(12_300.0), "12.3 µs");
    assert_eq!(fmt_ns(200_000.0), "200 µs");
    assert_eq!(fmt_ns(4_561_000.0), "4.561 ms");
    assert_eq!(fmt_ns(1.2e9), "1.2 s");
    assert_eq!(fmt_ns(-3_000.0), "-3 µs");
}

#[test]
fn batches_become_launches() {
    let mut b = ProfileBuilder::new("w", "wgsl", Mode::Compiled, DeviceInfo::default());
    b.add_kernel(KernelProfile::new("k0"));
    b.add_kernel(KernelProfile::new("k1"));
    b.push_batch(0, 1000.0, [("k0", 0.0, 50.0), ("k1", 60.0, 20.0)]).unwrap();
    assert!(b.push_batch(1, 2000.0, [("nope", 0.0, 1.0)]).is_err());
    let p = b.finish().unwrap();
    assert_eq!(p.launches[1].kernel, 1);
    assert_eq!(p.launches[1].device_span(), Some((60.0, 80.0)));
    assert_eq!(p.kernels[0].times_ns, vec![50.0]);
    validate_chrome_trace(&chrome_trace(&p)).unwrap();
}

#[test]
fn artifact_helpers() {
    assert_eq!(pass_file_name(3, "cse"), "03_cse.txt");
    assert_eq!(pass_file_name(12, "constant fold/x"), "12_constant_fold_x.txt");
    let dir = std::env::temp_dir().join(format!("sinter-artifact-{}", std::process::id()));
    let p = write_artifact(&dir, "kernels/k0.wgsl", "fn main() {}").unwrap();
    assert_eq!(std::fs::read_to_string(&p).unwrap(), "fn main() {}");
    assert!(!dir.join("kernels/k0.tmp").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn calibration_files_with_absurd_values_are_refused_naming_the_file() {
    let dir = std::env::temp_dir().join(format!("sinter-calib-bad-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let path = ceilings().save_to(&dir, "gpu").unwrap();
    let good: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    for (field, value) in [
        ("launch_overhead_us", json!(1e9)),
        ("launch_overhead_us", json!(-3.0)),
        ("copy_gbps", json!(0.0)),
        ("copy_gbps", json!(-1.0)),
        ("copy_gbps", json!(1e300)),
    ] {
        let mut v = good.clone();
        v["ceilings"][field] = value.clone();
        std::fs::write(&path, v.to_string()).unwrap();
        let e = Ceilings::load_from(&dir, "gpu").unwrap_err().to_string();
        assert!(e.contains(&path.display().to_string()) && e.contains(field), "{field} = {value}: {e}");
    }
    let mut v = good.clone();
    v["ceilings"]["matmul_tflops"]["f32"] = json!(-5.0);
    std::fs::write(&path, v.to_string()).unwrap();
    assert!(Ceilings::load_from(&dir, "gpu").unwrap_err().to_string().contains("matmul_tflops.f32"));
    // NaN is not JSON: a file that does not parse names itself too (never "run calibrate" alone).
    std::fs::write(&path, good.to_string().replace("3000.0", "NaN")).unwrap();
    assert!(Ceilings::load_from(&dir, "gpu").unwrap_err().to_string().contains(&path.display().to_string()));
    // A file that exists but cannot be read (a folder in its place) is an error naming it, not
    // "never calibrated" (which made `sinter profile` say "run `sinter calibrate`").
    std::fs::remove_file(&path).unwrap();
    std::fs::create_dir(&path).unwrap();
    let e = Ceilings::load_from(&dir, "gpu").expect_err("an unreadable file is not a missing one").to_string();
    assert!(e.contains(&path.display().to_string()), "{e}");
    std::fs::remove_dir(&path).unwrap();
    // Absurd values are not saved, and the accessors never hand them out.
    let bad = Ceilings { launch_overhead_us: f64::NAN, ..ceilings() };
    assert!(bad.save_to(&dir, "gpu2").is_err() && !dir.join("gpu2.json").exists());
    let huge = Ceilings { launch_overhead_us: 1e9, copy_gbps: 1e12, ..ceilings() };
    assert_eq!((huge.launch_overhead_ns(), huge.bandwidth_gbps()), (None, None));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn calibration_round_trip() {
    let dir = std::env::temp_dir().join(format!("sinter-calib-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let key = Ceilings::adapter_key(&["NVIDIA H100 80GB", "vulkan", "580.1"]);
    assert_eq!(key, "NVIDIA_H100_80GB-vulkan-580.1");
    assert_eq!(Ceilings::load_from(&dir, &key).unwrap(), None);
    let path = ceilings().save_to(&dir, &key).unwrap();
    assert!(path.ends_with("NVIDIA_H100_80GB-vulkan-580.1.json"));
    assert_eq!(Ceilings::load_from(&dir, &key).unwrap(), Some(ceilings()));
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    v["schema_version"] = json!(7);
    std::fs::write(&path, v.to_string()).unwrap();
    assert!(matches!(Ceilings::load_from(&dir, &key), Err(ProfileError::UnsupportedSchema { .. })));
    std::fs::remove_dir_all(&dir).unwrap();
    let c = ceilings();
    assert!((c.ridge_point("f32").unwrap() - 50e12 / 3000e9).abs() < 1e-9);
    assert_eq!(c.peak_tflops("bf16"), Some(50.0));
}

#[test]
fn graph_summary_from_ir() {
    let mut g = Graph::default();
    let x = g.add_input("x", crate::DType::F32, vec![4, 8]);
    let y = g.add(Op::Gelu { tanh: false }, vec![x], None).unwrap();
    g.add_output("y", y);
    let s = GraphSummary::from_graph(&g);
    assert_eq!(s.nodes.len(), 2);
    assert_eq!(s.nodes[0].attrs, "x");
    assert_eq!(s.nodes[1].op, "gelu");
    assert_eq!(s.nodes[1].inputs, vec![0]);
    assert_eq!(s.outputs, vec![("y".to_string(), 1)]);
}

#[test]
fn compiler_resources_round_trip_and_stay_optional() {
    let k = KernelProfile::new("k0").registers(40).shared_mem_bytes(1024).spill_bytes(16);
    assert_eq!((k.registers, k.shared_mem_bytes, k.spill_bytes), (Some(40), Some(1024), Some(16)));
    let v = serde_json::to_value(&k).unwrap();
    assert_eq!(v["spill_bytes"], 16);
    assert_eq!(serde_json::from_value::<KernelProfile>(v).unwrap(), k);
    // Unknown spills are left out of the file; files without the field read as unknown.
    let v = serde_json::to_value(KernelProfile::new("k1")).unwrap();
    assert!(v.get("spill_bytes").is_none(), "{v}");
    assert_eq!(serde_json::from_value::<KernelProfile>(json!({"name": "k2"})).unwrap().spill_bytes, None);
    // The trace shows them beside the registers.
    let mut b = ProfileBuilder::new("w", "cuda", Mode::Compiled, DeviceInfo::default());
    b.add_kernel(k);
    b.push_batch(0, 0.0, [("k0", 0.0, 10.0)]).unwrap();
    let t = chrome_trace(&b.finish().unwrap());
    let ev = t["traceEvents"].as_array().unwrap().iter().find(|e| e["cat"] == "kernel").unwrap();
    assert_eq!((ev["args"]["registers"].clone(), ev["args"]["spill_bytes"].clone()), (json!(40), json!(16)));
}

#[test]
fn calibration_files_with_unknown_computes_missing_methods_or_another_adapter_are_refused() {
    let dir = std::env::temp_dir().join(format!("sinter-calib-peaks-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let path = ceilings().save_to(&dir, "gpu").unwrap();
    let good: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let refused = |v: &Value, why: &str| {
        std::fs::write(&path, v.to_string()).unwrap();
        let e = Ceilings::load_from(&dir, "gpu").unwrap_err().to_string();
        assert!(e.contains(&path.display().to_string()) && e.contains(why), "{why}: {e}");
    };
    // A compute type that is not one.
    let mut v = good.clone();
    v["ceilings"]["matmul_tflops"]["int4"] = json!(100.0);
    v["ceilings"]["matmul_method"]["int4"] = json!("made up");
    refused(&v, "matmul_tflops.int4: not a compute type");
    // A measured peak without its method (a file from before library peaks): rebuilt, not used.
    let mut v = good.clone();
    v["ceilings"]["matmul_method"].as_object_mut().unwrap().remove("f16");
    refused(&v, "matmul_tflops.f16 has no matmul_method");
    let mut v = good.clone();
    v["ceilings"]["matmul_method"].as_object_mut().unwrap().remove("f16");
    v["ceilings"].as_object_mut().unwrap().remove("matmul_method");
    refused(&v, "has no matmul_method");
    // A method for a peak that is not there.
    let mut v = good.clone();
    v["ceilings"]["matmul_method"]["bf16"] = json!("cuBLASLt");
    refused(&v, "matmul_method.bf16 describes a peak");
    // A file copied from another device.
    let mut v = good.clone();
    v["adapter"] = json!("another gpu");
    refused(&v, "written for adapter \"another gpu\"");
    // An fp8 peak of 1e6 TFLOP/s is absurd.
    let mut v = good.clone();
    v["ceilings"]["matmul_tflops"]["f8e4m3"] = json!(1e6);
    v["ceilings"]["matmul_method"]["f8e4m3"] = json!("cuBLASLt");
    refused(&v, "matmul_tflops.f8e4m3 = 1000000");
    // The good file still reads back whole.
    std::fs::write(&path, good.to_string()).unwrap();
    assert_eq!(Ceilings::load_from(&dir, "gpu").unwrap(), Some(ceilings()));
    // Nothing of the kind is saved either.
    let mut no_method = ceilings();
    no_method.matmul_method.clear();
    assert!(no_method.save_to(&dir, "gpu3").unwrap_err().to_string().contains("no matmul_method"));
    // Nominal (unmeasured) ceilings need no methods.
    assert_eq!(Ceilings { measured: false, ..no_method }.check(), Ok(()));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn peaks_are_looked_up_per_compute_type_with_named_fallbacks() {
    let mut c = ceilings();
    for (k, v) in [("tf32", 400.0), ("bf16", 750.0), ("f8e4m3", 1300.0)] {
        c.matmul_tflops.insert(k.into(), v);
        c.matmul_method.insert(k.into(), format!("cuBLASLt {k}"));
    }
    c.check().unwrap();
    assert_eq!(c.peak_for("tf32"), Some(("tf32", 400.0)));
    assert_eq!(c.peak_for("bf16"), Some(("bf16", 750.0)));
    // e5m2 products take e4m3's peak; anything unknown exact f32's.
    assert_eq!(c.peak_for("f8e5m2"), Some(("f8e4m3", 1300.0)));
    assert_eq!(c.peak_for("i32"), Some(("f32", 50.0)));
    c.matmul_tflops.remove("f32");
    assert_eq!(c.peak_for("i32"), None);
    // Implausible entries are never handed out (and fall back).
    c.matmul_tflops.insert("bf16".into(), f64::INFINITY);
    assert_eq!(c.peak_for("bf16"), None);
    assert_eq!(Ceilings::default().peak_for("bf16"), None);
}

fn contraction_kernel(name: &str, kind: ContractionKind, compute: &str, flops: f64) -> KernelProfile {
    KernelProfile::new(name)
        .flops(flops)
        .bytes(3.0 * 8192.0 * 8192.0 * 2.0)
        .dtype("f32")
        .with_contraction(Some(Contraction::new(kind, compute)))
}

#[test]
fn contraction_kernels_are_rated_against_the_peak_of_their_compute_type() {
    let mut c = ceilings();
    for (k, v) in [("tf32", 400.0), ("bf16", 800.0)] {
        c.matmul_tflops.insert(k.into(), v);
        c.matmul_method.insert(k.into(), format!("cuBLASLt 8192^3 {k}"));
    }
    let flops = 2.0 * 8192f64.powi(3);
    let mut b = ProfileBuilder::new("mm", "cuda", Mode::Compiled, DeviceInfo::new("gpu", "cuda", c.clone()));
    let bf = b.add_kernel(contraction_kernel("k0_matmul", ContractionKind::Matmul, "bf16", flops).dtype("bf16"));
    let tf = b.add_kernel(contraction_kernel("k1_conv", ContractionKind::Conv, "f32", flops).compute_as("tf32"));
    let pw = b.add_kernel(KernelProfile::new("k2_add").bytes(1e6).flops(1e3).compute_as("tf32"));
    // 2.2 ms for 1.1 TFLOP: 500 TFLOP/s.
    b.push_batch(0, 0.0, [("k0_matmul", 0.0, 2.2e6), ("k1_conv", 2.3e6, 2.2e6), ("k2_add", 4.6e6, 1e4)]).unwrap();
    let p = b.finish().unwrap();
    let r = p.kernels[bf].contraction.as_ref().unwrap();
    let achieved = flops / 2.2e6 / 1e3;
    assert!((r.achieved_tflops.unwrap() - achieved).abs() < 1e-9);
    assert_eq!((r.peak_tflops, r.peak_compute.as_deref()), (Some(800.0), Some("bf16")));
    assert_eq!(r.peak_method.as_deref(), Some("cuBLASLt 8192^3 bf16"));
    assert!((r.peak_share.unwrap() - achieved / 800.0).abs() < 1e-12);
    // The f32 convolution ran in TF32: its share is of the TF32 peak, as its roofline verdict.
    let r = p.kernels[tf].contraction.as_ref().unwrap();
    assert_eq!((r.kind, r.compute.as_str(), r.peak_tflops), (ContractionKind::Conv, "tf32", Some(400.0)));
    assert!((r.peak_share.unwrap() - achieved / 400.0).abs() < 1e-12);
    let a = analyze(&p);
    assert!((a.kernels[tf].compute_fraction.unwrap() - achieved / 400.0).abs() < 1e-12);
    assert!(a.kernels[tf].reason.contains("tf32 peak (400.0 TFLOP/s)"), "{}", a.kernels[tf].reason);
    // Other kernels have no record and keep their dtype's peak.
    assert!(p.kernels[pw].contraction.is_none());
    assert_eq!(p.kernels[pw].compute(), "f32");
    // The record survives the file and shows in the trace.
    let back = Profile::from_json(Path::new("p.json"), &serde_json::to_string(&p).unwrap()).unwrap();
    assert_eq!(back, p);
    let t = chrome_trace(&p);
    let ev = t["traceEvents"].as_array().unwrap().iter().find(|e| e["name"] == "k1_conv").unwrap();
    assert_eq!((ev["args"]["compute"].clone(), ev["args"]["contraction"].clone()), (json!("tf32"), json!("conv")));
    // Without a time or ceilings there is nothing to rate, and no share is made up.
    let mut k = contraction_kernel("k", ContractionKind::Attention, "bf16", flops);
    k.rate(&c);
    assert_eq!(k.contraction.as_ref().unwrap().achieved_tflops, None);
    k.stats = TimeStats::from_samples(&[1e6]);
    k.rate(&Ceilings::default());
    let r = k.contraction.unwrap();
    assert!(r.achieved_tflops.is_some() && r.peak_tflops.is_none() && r.peak_share.is_none());
}

#[test]
fn validator_refuses_inconsistent_contraction_records() {
    let mut p = sample();
    let ok = Contraction {
        achieved_tflops: Some(500.0),
        peak_tflops: Some(800.0),
        peak_compute: Some("bf16".into()),
        peak_method: None,
        peak_share: Some(0.625),
        ..Contraction::new(ContractionKind::Matmul, "bf16")
    };
    p.kernels[0].contraction = Some(ok.clone());
    p.validate().unwrap();
    for (bad, why) in [
        (Contraction { peak_share: Some(0.9), ..ok.clone() }, "is not achieved_tflops"),
        (Contraction { peak_tflops: None, ..ok.clone() }, "is not achieved_tflops"),
        (Contraction { achieved_tflops: Some(-1.0), ..ok.clone() }, "achieved_tflops = -1"),
        (Contraction { peak_tflops: Some(1e9), ..ok.clone() }, "peak_tflops = 1000000000"),
        (Contraction { peak_compute: None, ..ok.clone() }, "without peak_compute"),
        (Contraction { compute: "int4".into(), ..ok.clone() }, "not a compute type"),
    ] {
        p.kernels[0].contraction = Some(bad);
        let e = p.validate().unwrap_err().to_string();
        assert!(e.contains(why) && e.contains("k0_ln_stats"), "{why}: {e}");
    }
    p.kernels[0].contraction = None;
    p.kernels[0].registers = Some(100_000);
    assert!(p.validate().unwrap_err().to_string().contains("registers"));
}
