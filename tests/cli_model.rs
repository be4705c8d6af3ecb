//! `sinter bench --model`, `sinter profile --model` and the timing of `sinter run` (issue 13), on
//! the committed mlp (dynamic batch) and transformer (int64 token ids) models, through the binary
//! on the kernel-IR interpreter: random inputs from the signature and `--dim`, `--input` files,
//! `--precision bf16` against the f32 reference, the artifact folder, and every bad input's error.

mod common;

use common::{ok, sinter, text};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn mlp() -> PathBuf {
    root().join("onnx/models/mlp/model.onnx")
}

/// A fresh scratch folder of this test binary.
fn tmp(tag: &str) -> PathBuf {
    common::scratch_dir(&format!("cli-model-{tag}"))
}

/// Runs and requires a failure whose `error:` line holds every one of `want`, and no panic.
fn fails(args: &[&str], cache: &Path, want: &[&str]) {
    let o = sinter(args, cache);
    let (out, err) = text(&o);
    assert!(!o.status.success(), "sinter {args:?} succeeded:\n{out}\n{err}");
    assert!(!err.contains("panicked"), "{args:?} panicked: {err}");
    for w in want {
        assert!(err.contains(w), "sinter {args:?}: {w:?} not in:\n{err}");
    }
}

const FAST: [&str; 7] = ["--backend", "interp", "--no-calibrate", "--iters", "2", "--warmup", "1"];

fn bench(extra: &[&str], json: &Path, cache: &Path) -> serde_json::Value {
    let m = mlp();
    let mut args = vec!["bench", "--model", m.to_str().unwrap(), "--json", json.to_str().unwrap()];
    args.extend(FAST);
    args.extend(extra);
    let (out, err) = ok(&args, cache);
    assert!(out.contains("model ") && err.contains("imported"), "{out}\n{err}");
    serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap()
}

#[test]
fn bench_model_with_random_inputs_and_dims_writes_the_workload_schema() {
    let d = tmp("random");
    let j = bench(&["--dim", "batch=3", "--eager", "--check"], &d.join("r.json"), &d);
    assert_eq!((j["scale"].as_str(), j["backend"].as_str()), (Some("model"), Some("interp")), "{j}");
    let rows = j["results"].as_array().unwrap();
    let modes: Vec<&str> = rows.iter().map(|r| r["mode"].as_str().unwrap()).collect();
    assert_eq!(modes, ["eager", "default"]);
    for r in rows {
        assert_eq!((r["name"].as_str(), r["precision"].as_str()), (Some("model"), Some("f32")), "{r}");
        assert_eq!(r["check_ok"].as_bool(), Some(true), "{r}");
        assert!(r["check_rel_l2"].as_f64().unwrap() < 1e-5, "{r}");
        for k in ["ms", "kernels", "cold_compile_s", "warm_compile_s", "peak_bytes", "tflops", "gbps"] {
            assert!(r[k].as_f64().is_some_and(|v| v > 0.0), "{k} in {r}");
        }
    }
    assert!(rows.iter().all(|r| r["sustained_ms"].is_null()), "no --sustain, no sustained figure");
    assert!(rows[0]["kernels"].as_u64() > rows[1]["kernels"].as_u64(), "eager runs more kernels");
    assert!(rows[1]["vs_eager_ratio"].as_f64().is_some_and(|r| r <= 1.0));
    // The same seed gives the same inputs: a second run checks identically.
    let again = bench(&["--dim", "batch=3", "--check"], &d.join("r2.json"), &d);
    assert_eq!(again["results"][0]["check_max_abs"], j["results"][1]["check_max_abs"]);
    let _ = std::fs::remove_dir_all(&d);
}

/// Issue 13: no `error:` lines from the Vulkan stack on a headless machine (Mesa's device-select
/// layer connecting to Wayland without `XDG_RUNTIME_DIR`).
#[test]
fn run_on_wgsl_prints_no_loader_errors_without_a_display() {
    let cache = tmp("headless");
    let input = root().join("onnx/models/mlp/test_data_set_0/input_0.pb");
    let out = cache.join("out.npy");
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_sinter"))
        .args(["run", mlp().to_str().unwrap(), "--backend", "wgsl", "--out", out.to_str().unwrap()])
        .args(["--input", input.to_str().unwrap()])
        .env("SINTER_CACHE_DIR", &cache)
        .env_remove("XDG_RUNTIME_DIR")
        .env_remove("WAYLAND_DISPLAY")
        .env_remove("NODEVICE_SELECT")
        .output()
        .expect("running sinter");
    let (stdout, stderr) = common::text(&o);
    if !o.status.success() && stderr.contains("no usable GPU adapter") {
        assert!(std::env::var("SINTER_REQUIRE_GPU").as_deref() != Ok("1"), "no adapter:\n{stderr}");
        println!("SKIPPED run_on_wgsl_prints_no_loader_errors_without_a_display: no adapter");
        return;
    }
    assert!(o.status.success(), "{stdout}\n{stderr}");
    assert!(!stderr.contains("XDG_RUNTIME_DIR"), "loader noise on stderr:\n{stderr}");
}

#[test]
fn bench_model_with_input_files() {
    let d = tmp("files");
    let pb = root().join("onnx/models/mlp/test_data_set_1/input_0.pb");
    let j = bench(&["--input", pb.to_str().unwrap(), "--check"], &d.join("r.json"), &d);
    assert_eq!(j["results"][0]["check_ok"].as_bool(), Some(true), "{j}");
    // A --dim that agrees with the file is accepted (test_data_set_1 has batch 7).
    bench(&["-i", pb.to_str().unwrap(), "--dim", "batch=7"], &d.join("r.json"), &d);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn bench_model_in_bf16_reports_the_error_against_f32() {
    let d = tmp("bf16");
    let j = bench(&["--dim", "batch=5", "--precision", "bf16", "--check"], &d.join("r.json"), &d);
    let r = &j["results"][0];
    assert_eq!((r["precision"].as_str(), r["check_ok"].as_bool()), (Some("bf16"), Some(true)), "{r}");
    // Not the f32 result (the matmuls ran in bf16), but within the bf16 bound of it.
    let l2 = r["check_rel_l2"].as_f64().unwrap();
    assert!(l2 > 1e-5 && l2 < 5e-2, "{r}");
    assert!(r["check_max_abs"].as_f64().is_some_and(|m| m > 0.0 && m < 0.1), "{r}");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn bench_model_with_integer_token_ids() {
    let d = tmp("ids");
    let m = root().join("onnx/models/transformer/model.onnx");
    let mut args = vec!["bench", "--model", m.to_str().unwrap(), "--dim", "batch=2", "--dim", "seq=6", "--check"];
    args.extend(FAST);
    let (out, _) = ok(&args, &d);
    assert!(out.contains("check ok"), "{out}");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn bench_sustain_times_runs_back_to_back_after_the_soak() {
    let d = tmp("sustain");
    let j = bench(&["--dim", "batch=3", "--sustain", "0.2"], &d.join("r.json"), &d);
    let r = &j["results"][0];
    let (ms, sustained) = (r["ms"].as_f64().unwrap(), r["sustained_ms"].as_f64().unwrap_or(-1.0));
    // A real figure of the same runs: positive, and within a wide factor of the timed runs' median
    // (the soak runs back to back without the L2 clear; the interpreter has no clock to lose).
    assert!(sustained > 0.0 && sustained < 50.0 * ms && sustained > ms / 50.0, "{ms} against {sustained}: {r}");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn profile_model_writes_a_folder_the_viewer_opens() {
    let d = tmp("profile");
    let out = d.join("run1");
    let m = mlp();
    let args = ["profile", "--model", m.to_str().unwrap(), "--dim", "batch=4", "--backend", "interp", "--iters", "2"];
    let (stdout, _) = ok(&[&args[..], &["--out", out.to_str().unwrap()]].concat(), &d);
    assert!(stdout.contains("artifacts in"), "{stdout}");
    for f in ["profile.json", "profile_eager.json", "trace.json", "trace_eager.json", "graph.txt", "fusion.json"] {
        assert!(out.join(f).is_file(), "{f} missing");
    }
    let p: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("profile.json")).unwrap()).unwrap();
    assert_eq!(p["workload"].as_str(), Some("model"), "the profile is named after the model's file stem");
    let (summary, _) = ok(&["view", "--summary", out.to_str().unwrap()], &d);
    assert!(summary.to_lowercase().contains("kernel"), "{summary}");
    // bf16 through profile too: the autocast pass is in the pass list.
    let bf = d.join("run2");
    ok(&[&args[..], &["--precision", "bf16", "--no-eager", "--out", bf.to_str().unwrap()]].concat(), &d);
    assert!(std::fs::read_dir(bf.join("passes")).unwrap().any(|e| e.unwrap().file_name() == "01_autocast.txt"));
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn run_prints_compile_and_per_run_time() {
    let d = tmp("run");
    let m = mlp();
    let i = root().join("onnx/models/mlp/test_data_set_0/input_0.pb");
    for backend in ["interp", "cpu"] {
        let (out, err) = ok(&["run", m.to_str().unwrap(), "-i", i.to_str().unwrap(), "--backend", backend], &d);
        assert!(out.starts_with("y: f32 [4, 10]"), "outputs are printed as before: {out}");
        assert!(err.contains("per run") && err.contains("median of 10 runs after 2 warm-up"), "{err}");
        if backend == "interp" {
            assert!(err.contains("compile ") && err.contains("first run took"), "{err}");
        }
    }
    let (_, err) =
        ok(&["run", m.to_str().unwrap(), "-i", i.to_str().unwrap(), "--backend", "interp", "--precision", "bf16"], &d);
    assert!(err.contains("interp (bf16)"), "{err}");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn bad_model_inputs_give_clear_errors() {
    let d = tmp("bad");
    let m = mlp();
    let m = m.to_str().unwrap();
    fn b<'a>(extra: &[&'a str]) -> Vec<&'a str> {
        [&["bench"][..], &FAST[..], extra].concat()
    }
    // Missing file, not ONNX, a folder.
    fails(&b(&["--model", "/nonexistent/x.onnx"]), &d, &["/nonexistent/x.onnx", "no such file"]);
    let readme = root().join("README.md");
    fails(&b(&["--model", readme.to_str().unwrap()]), &d, &["README.md", "not a readable ONNX model"]);
    fails(&b(&["--model", d.to_str().unwrap()]), &d, &["is a folder"]);
    // A missing dim names every unbound one.
    let tr = root().join("onnx/models/transformer/model.onnx");
    fails(&b(&["--model", tr.to_str().unwrap()]), &d, &["batch (input \"ids\")", "seq (input \"ids\")", "--dim"]);
    fails(&b(&["--model", tr.to_str().unwrap(), "--dim", "batch=2"]), &d, &["seq (input \"ids\")"]);
    // Malformed --dim.
    fails(&b(&["--model", m, "--dim", "batch"]), &d, &["NAME=VALUE"]);
    fails(&b(&["--model", m, "--dim", "batch=x"]), &d, &["positive integer"]);
    fails(&b(&["--model", m, "--dim", "=3"]), &d, &["no dim name"]);
    // A dim the model does not have.
    fails(&b(&["--model", m, "--dim", "seq=3"]), &d, &["no dim named \"seq\"", "batch"]);
    // Input files that do not match the signature: shape, dtype, count, a --dim disagreeing.
    let npy = |name: &str, t: sinter::HostTensor| {
        let p = d.join(name);
        std::fs::write(&p, sinter::onnx::npy::to_npy(&t)).unwrap();
        p.to_str().unwrap().to_string()
    };
    let shape = npy("shape.npy", sinter::HostTensor::f32([4, 31], vec![0.0; 124]).unwrap());
    fails(&b(&["--model", m, "-i", &shape]), &d, &["input \"x\"", "f32 [batch, 32]", "f32 [4, 31]"]);
    let ints = sinter::HostTensor::from_i64(sinter::DType::I64, vec![4, 32], &[0; 128]);
    let dtype = npy("dtype.npy", ints);
    fails(&b(&["--model", m, "-i", &dtype]), &d, &["input \"x\"", "f32 [batch, 32]", "i64 [4, 32]"]);
    let good = npy("good.npy", sinter::HostTensor::f32([4, 32], vec![0.5; 128]).unwrap());
    fails(&b(&["--model", m, "-i", &good, "-i", &good]), &d, &["takes 1 input(s) (x), 2 given"]);
    fails(&b(&["--model", m, "-i", &good, "--dim", "batch=3"]), &d, &["[4, 32]", "batch is 3 from --dim"]);
    fails(&b(&["--model", m, "-i", "/nonexistent/in.npy"]), &d, &["/nonexistent/in.npy"]);
    // --model and --workload are exclusive; --input and --dim need --model.
    fails(&b(&["--model", m, "--workload", "softmax_4096x4096_f32"]), &d, &["cannot be used with"]);
    fails(&["profile", "--model", m, "--workload", "x", "--out", "o"], &d, &["cannot be used with"]);
    fails(&b(&["--dim", "batch=3"]), &d, &["--model"]);
    fails(&b(&["--model", m, "--dim", "batch=3", "--precision", "f8"]), &d, &["f32, bf16, f16"]);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn one_npz_gives_every_input_by_name() {
    let d = tmp("npz");
    let m = mlp();
    let m = m.to_str().unwrap();
    let pb = root().join("onnx/models/mlp/test_data_set_0/input_0.pb");
    let x = sinter::onnx::read_tensor_pb(&pb).unwrap();
    let npz = |name: &str, items: &[(&str, &sinter::HostTensor)]| {
        let p = d.join(name);
        let items: Vec<(String, sinter::HostTensor)> =
            items.iter().map(|(n, t)| (n.to_string(), (*t).clone())).collect();
        std::fs::write(&p, sinter::onnx::npy::to_npz(&items)).unwrap();
        p.to_str().unwrap().to_string()
    };
    // The same outputs as from the .pb file (an extra array in the archive is ignored); --out .npz
    // reads back through the same module.
    let extra = sinter::HostTensor::f32([1], vec![0.0]).unwrap();
    let inp = npz("in.npz", &[("unused", &extra), ("x", &x)]);
    let (a, b) = (d.join("a.npz"), d.join("b.npz"));
    ok(&["run", m, "-i", pb.to_str().unwrap(), "--backend", "interp", "--out", a.to_str().unwrap()], &d);
    ok(&["run", m, "-i", &inp, "--backend", "interp", "--out", b.to_str().unwrap()], &d);
    let read = |p: &Path| sinter::onnx::npy::from_npz(&std::fs::read(p).unwrap()).unwrap();
    assert_eq!(read(&a), read(&b));
    assert_eq!(read(&a)[0].0, "y");
    bench(&["-i", &inp], &d.join("r.json"), &d);
    // An archive without the model's input names what it holds; an .npz among other files is refused.
    let wrong = npz("wrong.npz", &[("z", &x)]);
    fails(&["run", m, "-i", &wrong], &d, &["no array named \"x\"", "the archive holds: z"]);
    fails(&["run", m, "-i", &inp, "-i", pb.to_str().unwrap()], &d, &["pass it as the only --input"]);
    fails(
        &["run", m, "-i", d.join("a.npz").parent().unwrap().join("missing.npz").to_str().unwrap()],
        &d,
        &["missing.npz"],
    );
    let _ = std::fs::remove_dir_all(&d);
}

/// `SINTER_DEBUG` with `bench`: the artifacts of the graph that is timed, written by a compile of
/// their own after the timed ones (so writing them adds nothing to the compile times).
#[test]
fn bench_writes_debug_artifacts_where_sinter_debug_says() {
    let d = tmp("debug");
    let dbg = d.join("artifacts");
    let m = mlp();
    let mut args = vec!["bench", "--model", m.to_str().unwrap(), "--dim", "batch=2"];
    args.extend(FAST);
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_sinter"))
        .args(&args)
        .env("SINTER_CACHE_DIR", &d)
        .env("SINTER_DEBUG", &dbg)
        .env_remove("SINTER_CACHE")
        .env_remove("SINTER_LOG")
        .output()
        .expect("running sinter");
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    for f in ["graph.txt", "fusion.json", "ir_post_fusion.txt"] {
        assert!(dbg.join(f).is_file(), "{f} not written under {}:\n{err}", dbg.display());
    }
    let kernels = std::fs::read_dir(dbg.join("kernels")).map(|r| r.count()).unwrap_or(0);
    assert!(kernels > 0, "no kernels under {}", dbg.display());
    let _ = std::fs::remove_dir_all(&d);
}
