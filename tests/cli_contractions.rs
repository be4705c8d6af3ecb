//! The contraction records of `sinter bench --json` and `sinter profile` (issue 11): every
//! matmul kernel shows its compute type, achieved TFLOP/s and share of the measured peak from the
//! calibration file; an untrustworthy calibration file is named and not used. Through the binary
//! on the kernel-IR interpreter, with a calibration file written for it.

mod common;

use common::{ok, sinter};
use sinter::core::profile::Ceilings;
use std::path::{Path, PathBuf};

/// A fresh scratch folder of this test binary.
fn tmp(tag: &str) -> PathBuf {
    common::scratch_dir(&format!("cli-contractions-{tag}"))
}

/// The interpreter's calibration file in `cache`, with an f32 peak of `peak` TFLOP/s.
fn calibrate(cache: &Path, peak: f64) -> PathBuf {
    let b = sinter::runtime::open(sinter::Backend::Interp).unwrap().backend;
    let key = Ceilings::adapter_key(&[b.name(), &b.device_name()]);
    let mut c = Ceilings { copy_gbps: 10.0, launch_overhead_us: 1.0, measured: true, ..Ceilings::default() };
    c.matmul_tflops.insert("f32".into(), peak);
    c.matmul_method.insert("f32".into(), "test fixture".into());
    c.save_to(&cache.join("calibration"), &key).unwrap()
}

const BENCH: [&str; 12] = [
    "bench",
    "--workload",
    "matmul_4096_f32",
    "--scale",
    "reduced",
    "--backend",
    "interp",
    "--no-calibrate",
    "--iters",
    "2",
    "--warmup",
    "1",
];

#[test]
fn bench_json_rates_every_matmul_against_the_measured_peak_of_its_compute_type() {
    let d = tmp("bench");
    let file = calibrate(&d, 0.05);
    let json = d.join("r.json");
    let (out, _) = ok(&[&BENCH[..], &["--json", json.to_str().unwrap()]].concat(), &d);
    assert!(out.contains("# measured matmul peaks (TFLOP/s): f32 0.0500"), "{out}");
    assert!(out.contains("contraction") && out.contains("% of peak") && out.contains("% f32 0.0500"), "{out}");
    let j: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(j["matmul_peaks_tflops"]["f32"].as_f64(), Some(0.05), "{j}");
    assert_eq!(j["matmul_peak_methods"]["f32"].as_str(), Some("test fixture"));
    let rows = j["results"][0]["contractions"].as_array().unwrap_or_else(|| panic!("no contractions: {j}"));
    assert!(!rows.is_empty());
    for r in rows {
        assert_eq!((r["kind"].as_str(), r["compute"].as_str()), (Some("matmul"), Some("f32")), "{r}");
        assert_eq!((r["peak_compute"].as_str(), r["peak_tflops"].as_f64()), (Some("f32"), Some(0.05)), "{r}");
        let achieved = r["achieved_tflops"].as_f64().unwrap();
        assert!(achieved > 0.0 && r["ms"].as_f64().unwrap() > 0.0, "{r}");
        assert!((r["peak_share"].as_f64().unwrap() - achieved / 0.05).abs() < 1e-9, "{r}");
        // The interpreter reports no registers: absent, not zero.
        assert!(r["registers"].is_null(), "{r}");
    }
    // An absurd calibration file is named, not used: the records stay, without a share.
    let mut v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    v["ceilings"]["matmul_tflops"]["f32"] = serde_json::json!(1e9);
    std::fs::write(&file, v.to_string()).unwrap();
    let (out, err) = ok(&[&BENCH[..], &["--json", json.to_str().unwrap()]].concat(), &d);
    assert!(err.contains("ignoring the calibration file") && err.contains("matmul_tflops.f32"), "{err}");
    assert!(out.contains("no measured matmul peaks for this device: run `sinter calibrate --backend interp`"), "{out}");
    let j: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let r = &j["results"][0]["contractions"][0];
    assert!(r["achieved_tflops"].as_f64().is_some() && r["peak_share"].is_null(), "{r}");
    assert!(j.get("matmul_peaks_tflops").is_none(), "{j}");
    // `sinter calibrate` names the file it will replace (the interpreter then has nothing to measure).
    let o = sinter(&["calibrate", "--backend", "interp"], &d);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("replacing a calibration file that cannot be used"), "{err}");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn profile_records_and_prints_the_contraction_table() {
    let d = tmp("profile");
    calibrate(&d, 0.05);
    let out = d.join("run");
    let args = [
        "profile",
        "--workload",
        "matmul_4096_f32",
        "--scale",
        "reduced",
        "--backend",
        "interp",
        "--iters",
        "2",
        "--no-eager",
        "--out",
        out.to_str().unwrap(),
    ];
    let (stdout, _) = ok(&args, &d);
    assert!(stdout.contains("contraction") && stdout.contains("% of peak"), "{stdout}");
    let p = sinter::core::profile::Profile::read(&out).unwrap();
    let k = p.kernels.iter().find(|k| k.contraction.is_some()).expect("a matmul kernel");
    let c = k.contraction.as_ref().unwrap();
    assert_eq!((c.peak_compute.as_deref(), c.peak_method.as_deref()), (Some("f32"), Some("test fixture")));
    assert!((c.peak_share.unwrap() - c.achieved_tflops.unwrap() / 0.05).abs() < 1e-9);
    let (summary, _) = ok(&["view", "--summary", out.to_str().unwrap()], &d);
    assert!(summary.contains("%peak"), "{summary}");
    let _ = std::fs::remove_dir_all(&d);
}

/// `sinter profile --mode` compiles the recording in that mode (max-autotune on the interpreter:
/// nothing to tune, the profile still written) and refuses an unknown mode by name.
#[test]
fn profile_takes_a_compile_mode() {
    let d = tmp("profile_mode");
    let out = d.join("run");
    let base = ["profile", "--workload", "softmax_8192x8192_f32", "--scale", "reduced", "--backend", "interp"];
    let mut args: Vec<&str> = base.to_vec();
    args.extend(["--iters", "1", "--no-eager", "--mode", "max-autotune", "--out", out.to_str().unwrap()]);
    let (stdout, _) = ok(&args, &d);
    assert!(stdout.contains("compiled in max-autotune mode on interp"), "{stdout}");
    assert!(
        sinter::core::profile::Profile::read(&out)
            .unwrap()
            .kernels
            .iter()
            .any(|k| k.stats.as_ref().is_some_and(|s| s.count > 0))
    );
    let mut bad: Vec<&str> = base.to_vec();
    bad.extend(["--mode", "fastest", "--out", out.to_str().unwrap()]);
    let o = sinter(&bad, &d);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("unknown mode \"fastest\""), "{err}");
    let _ = std::fs::remove_dir_all(&d);
}
