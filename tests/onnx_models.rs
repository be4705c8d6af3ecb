//! Real models exported from PyTorch (`onnx/models/<name>/`, made by
//! `onnx/models/export_models.py`) run end to end on every backend and match onnxruntime. Each
//! architecture is there twice: `<name>` from the TorchScript exporter (`dynamo=False`, opset 17)
//! and `dynamo_<name>` from the `torch.export`-based one (`dynamo=True`, opset 18), plus
//! `dynamo_transformer_external`, whose weights are in `model.onnx.data`.
//!
//! For every model folder and every `test_data_set_N` in it, the model is loaded with
//! [`sinter_onnx::load`], imported for that data set's inputs ([`sinter_onnx::Model::graph_for_inputs`])
//! and run on
//! * the CPU reference interpreter (`sinter::cpu::run`),
//! * the kernel-IR interpreter (`sinter::compile` with `Backend::Interp`),
//! * the WGSL backend (`Backend::Wgsl`; lavapipe in CI). Without an adapter the WGSL test prints a
//!   note and skips, unless `SINTER_REQUIRE_GPU=1`, where a missing adapter fails.
//!
//! Each output is compared with the onnxruntime output stored beside the inputs (`output_K.pb`).
//! **Metric:** for a floating-point output `a` against the reference `b`, the relative error is
//! `max_i |a_i - b_i| / max(max_i |b_i|, 1e-30)` — the largest absolute difference scaled by the
//! reference tensor's largest magnitude — and must be `<= 1e-4`. A NaN anywhere that the
//! reference does not have at the same place counts as an infinite error. Integer and bool
//! outputs must match exactly; shapes and dtypes must match exactly. The measured error of every
//! model, data set and backend is printed (run with `--nocapture` to see it).
//!
//! For the compiled backends, one compiled graph is also reused across a model's data sets when
//! its import with symbolic dims ([`sinter_onnx::Model::graph`]) succeeds, so the guards and
//! recompiles on new batch / sequence lengths are exercised too.
//!
//! `SINTER_MODELS=a,b` runs only those models; `SINTER_DEBUG=dir` writes each compilation's
//! debug artifacts under `dir/<model>/<backend>-<data set>/`.

mod common;

use sinter::core::backend::Backend as BackendTrait;
use sinter::core::compile::{CompileOptions, compile};
use sinter::{DType, HostTensor, IrGraph};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The largest relative error accepted (see the module docs for the metric).
const TOL: f64 = 1e-4;

/// A model folder: its name, path and data sets (inputs, onnxruntime outputs).
struct Case {
    name: String,
    dir: PathBuf,
    sets: Vec<(String, Vec<HostTensor>, Vec<HostTensor>)>,
}

fn models_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("onnx").join("models")
}

fn sorted_dir(d: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(d)
        .unwrap_or_else(|e| panic!("reading {}: {e}", d.display()))
        .map(|e| e.expect("dir entry").path())
        .collect();
    v.sort();
    v
}

/// `prefix<N>.pb` files of a folder, ordered by N, decoded.
fn numbered(d: &Path, prefix: &str) -> Vec<HostTensor> {
    let mut v: Vec<(usize, PathBuf)> = sorted_dir(d)
        .into_iter()
        .filter_map(|p| {
            let n = p.file_name()?.to_str()?.strip_prefix(prefix)?.strip_suffix(".pb")?.parse().ok()?;
            Some((n, p))
        })
        .collect();
    v.sort();
    v.into_iter()
        .map(|(_, p)| {
            let bytes = std::fs::read(&p).unwrap_or_else(|e| panic!("reading {}: {e}", p.display()));
            sinter_onnx::tensor_from_pb(&bytes).unwrap_or_else(|e| panic!("decoding {}: {e}", p.display()))
        })
        .collect()
}

fn cases() -> Vec<Case> {
    let cases: Vec<Case> = sorted_dir(&models_dir())
        .into_iter()
        .filter(|d| d.join("model.onnx").is_file())
        .map(|dir| {
            let sets = sorted_dir(&dir)
                .into_iter()
                .filter(|s| s.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("test_data_set_")))
                .map(|s| {
                    let name = s.file_name().unwrap().to_string_lossy().into_owned();
                    (name, numbered(&s, "input_"), numbered(&s, "output_"))
                })
                .collect::<Vec<_>>();
            let name = dir.file_name().unwrap().to_string_lossy().into_owned();
            assert!(!sets.is_empty(), "{name}: no test_data_set_N folder");
            Case { name, dir, sets }
        })
        .collect();
    assert!(cases.len() >= 4, "expected the committed models in {}", models_dir().display());
    cases
}

/// The relative error of `got` against `want` (module docs), or an error for a shape or dtype
/// mismatch. Integer and bool outputs give 0 when equal and infinity otherwise.
fn rel_error(got: &HostTensor, want: &HostTensor) -> Result<f64, String> {
    if got.shape != want.shape {
        return Err(format!("shape {:?}, expected {:?}", got.shape, want.shape));
    }
    if got.dtype() != want.dtype() {
        return Err(format!("dtype {}, expected {}", got.dtype(), want.dtype()));
    }
    let (a, b) = (got.to_f64_vec(), want.to_f64_vec());
    if !want.dtype().is_float() {
        return Ok(if a == b { 0.0 } else { f64::INFINITY });
    }
    let mut diff = 0.0f64;
    let mut scale = 0.0f64;
    for (&x, &y) in a.iter().zip(&b) {
        if y.is_nan() || x.is_nan() {
            if x.is_nan() != y.is_nan() {
                diff = f64::INFINITY;
            }
            continue;
        }
        if x.is_infinite() || y.is_infinite() {
            if x != y {
                diff = f64::INFINITY;
            }
            continue;
        }
        diff = diff.max((x - y).abs());
        scale = scale.max(y.abs());
    }
    Ok(diff / scale.max(1e-30))
}

/// Compares all outputs; returns the largest relative error or a description of the failure.
fn check(outs: &[HostTensor], refs: &[HostTensor]) -> Result<f64, String> {
    if outs.len() != refs.len() {
        return Err(format!("{} outputs, expected {}", outs.len(), refs.len()));
    }
    let mut worst = 0.0f64;
    for (k, (o, r)) in outs.iter().zip(refs).enumerate() {
        let e = rel_error(o, r).map_err(|m| format!("output {k}: {m}"))?;
        if e > TOL || e.is_nan() {
            return Err(format!("output {k} ({}): relative error {e:.3e} > {TOL:e}", r.dtype()));
        }
        worst = worst.max(e);
    }
    Ok(worst)
}

/// No disk cache; debug artifacts under `$SINTER_DEBUG/<model>/<what>` when that is set.
fn compile_opts(model: &str, what: &str) -> CompileOptions {
    let debug_dir = std::env::var_os("SINTER_DEBUG").map(|d| PathBuf::from(d).join(model).join(what));
    CompileOptions { cache_dir: None, debug_dir, ..CompileOptions::default() }
}

/// Runs every model on one backend (`None`: the CPU reference), printing one line per model and
/// data set, and panics at the end listing every failure.
fn run_all(label: &str, backend: Option<Arc<dyn BackendTrait>>) {
    let mut failures = Vec::new();
    let only = std::env::var("SINTER_MODELS").ok();
    for case in cases() {
        if only.as_deref().is_some_and(|o| !o.split(',').any(|m| m == case.name)) {
            continue;
        }
        let model = sinter_onnx::load(case.dir.join("model.onnx"))
            .unwrap_or_else(|e| panic!("{}: loading model.onnx: {e}", case.name));
        for (set, inputs, refs) in &case.sets {
            let t0 = std::time::Instant::now();
            let result = (|| -> Result<f64, String> {
                let g: IrGraph = model.graph_for_inputs(inputs).map_err(|e| format!("import: {e}"))?;
                let outs = match &backend {
                    None => sinter::cpu::run(&g, inputs).map_err(|e| format!("run: {e}"))?,
                    Some(b) => compile(&g, b.clone(), compile_opts(&case.name, &format!("{label}-{set}")))
                        .and_then(|c| c.run(inputs))
                        .map_err(|e| format!("compiled run: {e}"))?,
                };
                check(&outs, refs)
            })();
            let secs = t0.elapsed().as_secs_f64();
            match result {
                Ok(e) => println!("{label:6} {:12} {set}: rel error {e:.3e}  ({secs:.1} s)", case.name),
                Err(m) => {
                    println!("{label:6} {:12} {set}: FAIL {m}", case.name);
                    failures.push(format!("{}/{set}: {m}", case.name));
                }
            }
        }
        // One compiled graph with symbolic dims across every data set: guards and recompiles.
        if let Some(b) = &backend
            && case.sets.len() > 1
        {
            match model.graph() {
                Err(e) => {
                    println!("{label:6} {:12} symbolic import not possible ({e}); per-shape imports only", case.name)
                }
                Ok(g) => {
                    let r = compile(&g, b.clone(), compile_opts(&case.name, &format!("{label}-symbolic")))
                        .map_err(|e| e.to_string())
                        .and_then(|c| {
                            let mut worst = 0.0f64;
                            for (set, inputs, refs) in &case.sets {
                                let outs = c.run(inputs).map_err(|e| format!("{set}: {e}"))?;
                                worst = worst.max(check(&outs, refs).map_err(|m| format!("{set}: {m}"))?);
                            }
                            Ok((worst, c.events().len()))
                        });
                    match r {
                        Ok((e, n)) => println!(
                            "{label:6} {:12} symbolic dims, one compiled graph, {n} compilations: rel error {e:.3e}",
                            case.name
                        ),
                        Err(m) => {
                            println!("{label:6} {:12} symbolic: FAIL {m}", case.name);
                            failures.push(format!("{} (symbolic dims): {m}", case.name));
                        }
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "{label}: {} failure(s):\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn models_match_onnxruntime_on_cpu_reference() {
    run_all("cpu", None);
}

#[test]
fn models_match_onnxruntime_on_kernel_interpreter() {
    run_all("interp", Some(Arc::new(sinter::core::kernel::interp::InterpBackend::new())));
}

#[test]
fn models_match_onnxruntime_on_wgsl() {
    let Some(b) = common::gpu_or_skip("WGSL models check", sinter_wgsl::WgslBackend::new()) else { return };
    run_all("wgsl", Some(Arc::new(b)));
}

#[test]
fn relative_error_metric() {
    let t =
        |v: &[f32]| HostTensor::from_f64(DType::F32, vec![v.len()], &v.iter().map(|&x| x as f64).collect::<Vec<_>>());
    assert_eq!(rel_error(&t(&[1.0, -4.0]), &t(&[1.0, -4.0])).unwrap(), 0.0);
    // max |diff| = 0.5, max |ref| = 4: 0.125.
    assert_eq!(rel_error(&t(&[1.5, -4.0]), &t(&[1.0, -4.0])).unwrap(), 0.125);
    assert!(rel_error(&t(&[f32::NAN, 1.0]), &t(&[0.0, 1.0])).unwrap().is_infinite());
    assert!(rel_error(&t(&[1.0]), &t(&[1.0, 2.0])).is_err());
    let i = |v: &[f64]| HostTensor::from_f64(DType::I64, vec![v.len()], v);
    assert_eq!(rel_error(&i(&[1.0, 2.0]), &i(&[1.0, 2.0])).unwrap(), 0.0);
    assert!(rel_error(&i(&[1.0, 3.0]), &i(&[1.0, 2.0])).unwrap().is_infinite());
}

/// The exported transformers' attention (written out by the exporter: matmul, scale, mask,
/// softmax, matmul, with the reshape/transpose chains around it) compiles to fused attention
/// kernels, one per layer, and still matches onnxruntime (checked above for every backend).
#[test]
fn exported_transformers_compile_to_fused_attention() {
    for (name, layers, causal) in [
        ("transformer", 2, true),
        ("vit_tiny", 2, false),
        ("dynamo_transformer", 2, true),
        ("dynamo_transformer_external", 2, true),
        ("dynamo_vit_tiny", 2, false),
    ] {
        let case = cases().into_iter().find(|c| c.name == name).unwrap_or_else(|| panic!("no model {name}"));
        let model = sinter_onnx::load(case.dir.join("model.onnx")).expect("load");
        let (_, inputs, refs) = &case.sets[0];
        let g = model.graph_for_inputs(inputs).expect("import");
        let backend = Arc::new(sinter::core::kernel::interp::InterpBackend::new());
        let c = compile(&g, backend, compile_opts(name, "fused-attention")).expect("compile");
        check(&c.run(inputs).expect("run"), refs).unwrap_or_else(|m| panic!("{name}: {m}"));
        let p = c.program().expect("a compiled program");
        let bodies: Vec<_> = p
            .kernels
            .iter()
            .filter_map(|k| match &k.body {
                sinter::core::kernel::KernelBody::Attention(a) => Some(a),
                _ => None,
            })
            .collect();
        assert_eq!(bodies.len(), layers, "{name}: {:?}", p.kernels.iter().map(|k| &k.name).collect::<Vec<_>>());
        assert!(bodies.iter().all(|a| a.causal.is_some() == causal), "{name}: causal bound");
        assert!(p.decisions.iter().any(|d| d.fused && d.reason.starts_with("fused: attention over")));
    }
}

/// Models whose import with symbolic dims is refused, with the node that refuses it: the IR has
/// no loops, so recurrences are unrolled per time step and need a static sequence length.
const SYMBOLIC_REFUSED: &[(&str, &str)] = &[("rnn", "/lstm/LSTM"), ("dynamo_rnn", "node_lstm__2")];

#[test]
fn committed_models_import_symbolically_and_compile_once_per_shape() {
    for case in cases() {
        let model = sinter_onnx::load(case.dir.join("model.onnx")).expect("loading model.onnx");
        let g = match model.graph() {
            Err(e) => {
                let refused = SYMBOLIC_REFUSED.iter().find(|(m, _)| *m == case.name);
                let (_, node) = refused.unwrap_or_else(|| panic!("{}: symbolic import failed: {e}", case.name));
                assert!(e.to_string().contains(node), "{}: the error must name {node}: {e}", case.name);
                println!("{:12} refused as documented: {e}", case.name);
                continue;
            }
            Ok(g) => g,
        };
        assert!(
            !SYMBOLIC_REFUSED.iter().any(|(m, _)| *m == case.name),
            "{} imports symbolically now: update SYMBOLIC_REFUSED",
            case.name
        );
        sinter::core::verify::verify(&g)
            .unwrap_or_else(|e| panic!("{}: the symbolic graph does not verify: {e}", case.name));
        let symbolic = g.inputs.iter().any(|&i| !g.ty(i).shape.is_static());
        assert!(symbolic, "{}: the graph has no symbolic input", case.name);
        let opts = sinter::Options { backend: sinter::Backend::Interp, cache_dir: None, ..sinter::Options::default() };
        let c = sinter::compile(&g, opts).unwrap_or_else(|e| panic!("{}: compile: {e}", case.name));
        let mut shapes: Vec<Vec<Vec<usize>>> = Vec::new();
        for (set, inputs, refs) in &case.sets {
            let outs = c.run(inputs).unwrap_or_else(|e| panic!("{}/{set}: run: {e}", case.name));
            let err = check(&outs, refs).unwrap_or_else(|m| panic!("{}/{set}: {m}", case.name));
            let s: Vec<Vec<usize>> = inputs.iter().map(|t| t.shape.clone()).collect();
            if !shapes.contains(&s) {
                shapes.push(s);
            }
            println!("{:12} {set}: symbolic graph, rel error {err:.3e}", case.name);
        }
        // Running the first data set again reuses its specialization.
        c.run(&case.sets[0].1).unwrap();
        let ev = c.events();
        // A model served dynamically compiles once per distinct shape apart from the batch (the
        // outermost dimension); others once per distinct shape.
        let served = c.dynamic_refusal().is_none();
        let mut keys: Vec<Vec<Vec<usize>>> = Vec::new();
        for s in &shapes {
            let k: Vec<Vec<usize>> = if served { s.iter().map(|d| d[1..].to_vec()).collect() } else { s.clone() };
            if !keys.contains(&k) {
                keys.push(k);
            }
        }
        assert_eq!(ev.len(), keys.len(), "{}: one compilation per distinct input shape (served: {served})", case.name);
        assert_eq!(ev[0].reason, "first call");
        for e in &ev[1..] {
            assert!(e.reason.starts_with("guard failed") && e.reason.contains("shape"), "{}: {}", case.name, e.reason);
        }
        println!("{:12} {} compilations: {:?}", case.name, ev.len(), ev.iter().map(|e| &e.reason).collect::<Vec<_>>());
    }
}

/// The models written by `torch.onnx.export(..., dynamo=True)` (`dynamo_<name>`), beside the
/// TorchScript exports they were made with the same seed as.
const DYNAMO: &[&str] = &["mlp", "cnn", "transformer", "vit_tiny", "misc", "rnn"];

fn case(name: &str) -> Case {
    cases().into_iter().find(|c| c.name == name).unwrap_or_else(|| panic!("no model {name} in onnx/models"))
}

/// The committed dynamo exports are what they claim: PyTorch's, at opset 18 or later, with the
/// dynamic axes named as exported (so [`committed_models_import_symbolically_and_compile_once_per_shape`]
/// exercises them), and each with its TorchScript twin's inputs; sinter's outputs for the two
/// exports of one architecture agree (on the CPU reference) as closely as each agrees with
/// onnxruntime.
#[test]
fn dynamo_exports_are_opset_18_with_named_dims_and_agree_with_their_torchscript_twins() {
    for base in DYNAMO {
        let (dynamo, legacy) = (case(&format!("dynamo_{base}")), case(base));
        let md = sinter_onnx::load(dynamo.dir.join("model.onnx")).expect("load the dynamo export");
        let ml = sinter_onnx::load(legacy.dir.join("model.onnx")).expect("load the TorchScript export");
        assert!(md.opset() >= 18, "{}: opset {}", dynamo.name, md.opset());
        assert!(md.producer().starts_with("pytorch"), "{}: producer {:?}", dynamo.name, md.producer());
        assert_eq!(ml.opset(), 17, "{base}: the TorchScript export is at opset 17");
        assert!(md.inputs().iter().any(|i| i.shape.as_ref().is_some_and(|s| !s.is_static())), "{}", dynamo.name);
        let syms = |m: &sinter_onnx::Model| -> Vec<String> {
            let mut v: Vec<String> = m
                .inputs()
                .iter()
                .flat_map(|i| i.shape.iter().flat_map(|s| s.dims().to_vec()))
                .filter(|d| d.as_static().is_none())
                .map(|d| d.to_string())
                .collect();
            v.sort();
            v.dedup();
            v
        };
        assert_eq!(syms(&md), syms(&ml), "{base}: the two exports name the same dynamic dims");
        assert_eq!(dynamo.sets.len(), legacy.sets.len(), "{base}");
        for ((set, ins_d, refs), (_, ins_l, _)) in dynamo.sets.iter().zip(&legacy.sets) {
            assert_eq!(ins_d, ins_l, "{base}/{set}: the twins' inputs differ (not the same seed?)");
            let run = |m: &sinter_onnx::Model| sinter::cpu::run(&m.graph_for_inputs(ins_d).expect("import"), ins_d);
            let (od, ol) = (run(&md).expect("run the dynamo export"), run(&ml).expect("run the TorchScript export"));
            let twin = check(&od, &ol).unwrap_or_else(|m| panic!("{base}/{set}: dynamo vs TorchScript: {m}"));
            let ort = check(&od, refs).unwrap_or_else(|m| panic!("{base}/{set}: dynamo vs onnxruntime: {m}"));
            println!("{base:12} {set}: dynamo vs TorchScript export {twin:.3e}, vs onnxruntime {ort:.3e}");
        }
    }
}

/// `dynamo_transformer_external` keeps its weights in `model.onnx.data` (as `torch.onnx.export(...,
/// dynamo=True)` saves by default): the `.onnx` alone does not load, loaded from its folder it
/// computes exactly what the inline export `dynamo_transformer` does, for the static and the
/// symbolic import.
#[test]
fn external_data_export_loads_from_its_folder_and_equals_the_inline_export() {
    let (ext, inline) = (case("dynamo_transformer_external"), case("dynamo_transformer"));
    let data = ext.dir.join("model.onnx.data");
    let onnx_bytes = std::fs::read(ext.dir.join("model.onnx")).expect("read model.onnx");
    let data_len = std::fs::metadata(&data).expect("model.onnx.data beside model.onnx").len();
    assert!(data_len > 50_000, "the weights ({data_len} bytes) are in the data file");
    let err = sinter_onnx::load_bytes(&onnx_bytes).expect_err("external data needs the model's folder");
    assert!(err.to_string().contains("external data"), "{err}");
    let me = sinter_onnx::load(ext.dir.join("model.onnx")).expect("load with external data");
    let mi = sinter_onnx::load(inline.dir.join("model.onnx")).expect("load the inline export");
    let (ge, gi) = (me.graph().expect("symbolic import"), mi.graph().expect("symbolic import"));
    for ((set, inputs, refs), (_, inputs_i, _)) in ext.sets.iter().zip(&inline.sets) {
        assert_eq!(inputs, inputs_i, "{set}");
        let oe = sinter::cpu::run(&me.graph_for_inputs(inputs).expect("import"), inputs).expect("run");
        let oi = sinter::cpu::run(&mi.graph_for_inputs(inputs).expect("import"), inputs).expect("run");
        assert_eq!(oe, oi, "{set}: external-data and inline exports differ");
        assert_eq!(sinter::cpu::run(&ge, inputs).expect("run"), oe, "{set}: symbolic import differs");
        assert_eq!(sinter::cpu::run(&gi, inputs).expect("run"), oi, "{set}: symbolic import differs");
        check(&oe, refs).unwrap_or_else(|m| panic!("{set}: {m}"));
    }
}

/// `t` with its outermost dimension `n`, rows taken from `t` in turn (valid token ids stay valid).
fn rebatch(t: &HostTensor, n: usize) -> HostTensor {
    let bytes = t.to_le_bytes();
    let row = bytes.len() / t.shape[0].max(1);
    let data: Vec<u8> = (0..n).flat_map(|i| bytes[(i % t.shape[0]) * row..][..row].to_vec()).collect();
    let mut shape = t.shape.clone();
    shape[0] = n;
    HostTensor::from_le_bytes(t.dtype(), shape, &data).expect("rebatched tensor")
}

/// Issue 13: one compile of a model imported with its symbolic batch serves every batch size up
/// to its bound. Each model's data sets (onnxruntime outputs) and the same inputs re-batched to
/// 1, 3 and 8 (CPU reference) run on one compiled graph, and the compiles are counted: one for
/// the models whose data sets differ only in the batch; two for the transformers, whose second
/// data set also changes the sequence length (an inner symbol: recompiled with the reason, and
/// that program serves the batch again); one per batch size for the ViTs, whose
/// sequence-first attention (`nn.MultiheadAttention`, `[seq, batch, dim]`) moves the batch inside
/// a tensor: refused, the reason naming the kernel.
fn serve_batches(label: &str, backend: Arc<dyn BackendTrait>) {
    // (model, compiles, served)
    let models = [
        ("mlp", 1, true),
        ("cnn", 1, true),
        ("dynamo_mlp", 1, true),
        ("dynamo_cnn", 1, true),
        ("transformer", 2, true),
        ("dynamo_transformer", 2, true),
        ("vit_tiny", 4, false),
        ("dynamo_vit_tiny", 4, false),
    ];
    for (name, compiles, served) in models {
        let case = cases().into_iter().find(|c| c.name == name).unwrap_or_else(|| panic!("no model {name}"));
        let model = sinter_onnx::load(case.dir.join("model.onnx")).expect("load");
        let g = model.graph().unwrap_or_else(|e| panic!("{name}: symbolic import: {e}"));
        let c = compile(&g, backend.clone(), compile_opts(name, &format!("{label}-batches"))).expect("compile");
        for (set, inputs, refs) in &case.sets {
            let outs = c.run(inputs).unwrap_or_else(|e| panic!("{name} {set}: {e}"));
            let e = check(&outs, refs).unwrap_or_else(|m| panic!("{name} {set}: {m}"));
            for n in [1usize, 3, 8] {
                let more: Vec<HostTensor> = inputs.iter().map(|t| rebatch(t, n)).collect();
                let want = sinter::cpu::run(&g, &more).unwrap_or_else(|e| panic!("{name} {set} x{n}: cpu: {e}"));
                let got = c.run(&more).unwrap_or_else(|e| panic!("{name} {set} x{n}: {e}"));
                check(&got, &want).unwrap_or_else(|m| panic!("{name} {set} batch {n}: {m}"));
            }
            println!("{label:6} {name:20} {set}: rel error {e:.3e}, batches 1, 3, 8 match the CPU reference");
        }
        let ev = c.events();
        assert_eq!(ev.len(), compiles, "{name}: {ev:#?}");
        if served {
            let serves = |e: &sinter::core::compile::CompileEvent| {
                e.serves.as_deref().is_some_and(|s| s.starts_with("batch <= "))
            };
            assert!(ev.iter().all(serves), "{name}: {ev:#?}");
            if compiles == 2 {
                assert!(ev[1].reason.contains("shape"), "{name}: {}", ev[1].reason);
            }
        } else {
            assert!(ev.iter().all(|e| e.serves.is_none()), "{name}: {ev:#?}");
            assert!(
                ev[1..].iter().all(|e| e.reason.contains("not served without recompiling: kernel ")),
                "{name}: {ev:#?}"
            );
        }
        println!("{label:6} {name:20} {} compile(s): {}", ev.len(), ev.last().map_or("", |e| e.reason.as_str()));
    }
}

#[test]
fn one_compile_serves_every_batch_on_the_kernel_interpreter() {
    serve_batches("interp", Arc::new(sinter::core::kernel::interp::InterpBackend::new()));
}

#[test]
fn one_compile_serves_every_batch_on_wgsl() {
    let Some(b) = common::gpu_or_skip("WGSL batches check", sinter_wgsl::WgslBackend::new()) else { return };
    serve_batches("wgsl", Arc::new(b));
}
