//! `sinter run`: import an ONNX model, run it on a backend and write the outputs as `.npy` (one
//! output), `<stem>_<k>.npy` (several) or `.npz`. On a compiled backend the model is imported
//! with its symbolic dims when it can be (else specialized to the given inputs), so a model with
//! a symbolic batch compiles once for every batch size up to a bound: a later run at another
//! batch hits the program cache (`# serves batch <= 8` on stderr; see `sinter::core::compile`).
//! Progress lines (load, import, compile, first run) and the timing go to stderr: the compile
//! time and the median time of one run over up to [`TIMED_RUNS`] runs after [`WARMUP_RUNS`]
//! warm-up runs (device time where the backend measures it: between two events around each whole
//! run where it can, as `sinter bench` does, else the span of its kernels; else host wall time),
//! on a fresh device where the backend's clock drops after a device's first seconds.

use super::model::Progress;
use anyhow::{Context, Result, bail};
use sinter::HostTensor;
use sinter::core::compile::{CompileOptions, compile};
use sinter::core::passes::Precision;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Untimed runs after the first, before timing.
pub const WARMUP_RUNS: usize = 2;
/// Timed runs at most (fewer, but at least [`MIN_TIMED_RUNS`], once they have taken 2 s).
pub const TIMED_RUNS: usize = 10;
/// Timed runs at least.
pub const MIN_TIMED_RUNS: usize = 3;

/// Arguments of `sinter run`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The ONNX model.
    pub model: PathBuf,
    /// Input tensors in the model's input order: serialized TensorProto (`.pb`) or NumPy `.npy`;
    /// or one NumPy `.npz` holding every input by name.
    #[arg(long = "input", short = 'i')]
    pub inputs: Vec<PathBuf>,
    /// The backend that runs the graph.
    #[arg(long, default_value = "cpu")]
    pub backend: String,
    /// Where to write the outputs: `out.npy` (one output; several go to `out_0.npy`, ...) or
    /// `out.npz` (every output, by name). Without it, a summary is printed.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Mixed precision (`f32`, `bf16`, `f16`): the f32 model's matmuls, convolutions and
    /// attention in that dtype with f32 accumulation (see `sinter bench --help`).
    #[arg(long, default_value = "f32", value_parser = super::model::parse_precision)]
    pub precision: Precision,
    /// Where f32 contractions may run in TF32 (`conv`, PyTorch's default; `on`, `off`, `matmul`;
    /// see `sinter bench --help`).
    #[arg(long, default_value = "conv", value_parser = super::model::parse_tf32)]
    pub tf32: sinter::core::schedule::AllowTf32,
    /// The on-disk cache.
    #[command(flatten)]
    pub cache: super::CacheArgs,
}

/// Reads a `.pb` (TensorProto) or `.npy` tensor (by extension, in any case); errors name the
/// file and what is wrong with it.
pub fn read_tensor(p: &Path) -> Result<HostTensor> {
    if super::has_extension(p, "npy") {
        let bytes = std::fs::read(p).with_context(|| format!("reading {}", p.display()))?;
        return sinter_onnx::npy::from_npy(&bytes).with_context(|| format!("parsing {}", p.display()));
    }
    Ok(sinter_onnx::read_tensor_pb(p)?)
}

/// The model's inputs (named `names`, in order) from `--input` files: one tensor file per input
/// (`.pb` or `.npy`, in the model's order), or one `.npz` holding every input by name (as
/// `numpy.savez(path, **inputs)` writes it). Each tensor comes with a label naming its source.
pub fn read_inputs(files: &[PathBuf], names: &[&str]) -> Result<Vec<(String, HostTensor)>> {
    if let [p] = files
        && super::has_extension(p, "npz")
    {
        let bytes = std::fs::read(p).with_context(|| format!("reading {}", p.display()))?;
        let arrays = sinter_onnx::npy::from_npz(&bytes).with_context(|| format!("parsing {}", p.display()))?;
        return names
            .iter()
            .map(|n| match arrays.iter().find(|(a, _)| a == n) {
                Some((_, t)) => Ok((format!("{}[{n}]", p.display()), t.clone())),
                None => bail!(
                    "{}: no array named {n:?} (the model's inputs: {}; the archive holds: {})",
                    p.display(),
                    names.join(", "),
                    arrays.iter().map(|(a, _)| a.as_str()).collect::<Vec<_>>().join(", ")
                ),
            })
            .collect();
    }
    if let Some(p) = files.iter().find(|p| super::has_extension(p, "npz")) {
        bail!("{}: an .npz gives every input by name; pass it as the only --input", p.display());
    }
    files.iter().map(|p| Ok((p.display().to_string(), read_tensor(p)?))).collect()
}

/// Median and count of timed runs: `run` is called [`WARMUP_RUNS`] times untimed, then up to
/// [`TIMED_RUNS`] times; each call returns the seconds of one run.
fn time_runs(mut run: impl FnMut() -> Result<f64>) -> Result<(f64, usize)> {
    for _ in 0..WARMUP_RUNS {
        run()?;
    }
    let start = Instant::now();
    let mut times = Vec::new();
    while times.len() < TIMED_RUNS && (times.len() < MIN_TIMED_RUNS || start.elapsed().as_secs_f64() < 2.0) {
        times.push(run()?);
    }
    Ok((super::bench::median(times.clone()), times.len()))
}

/// Compiles (unless the backend is the CPU reference) and runs once, printing the compile time;
/// then times further runs and prints the median time of one.
fn execute(args: &Args, g: &sinter::IrGraph, inputs: &[HostTensor], progress: &Progress) -> Result<Vec<HostTensor>> {
    if args.backend == "cpu" {
        let g = match args.precision.low_dtype() {
            Some(d) => sinter::passes::autocast(g, d)?,
            None => g.clone(),
        };
        progress.step("first run on the CPU reference");
        let t = Instant::now();
        let outs = sinter::cpu::run(&g, inputs)?;
        progress.step(format_args!("first run took {:.3} s", t.elapsed().as_secs_f64()));
        let (med, n) = time_runs(|| {
            let t = Instant::now();
            sinter::cpu::run(&g, inputs)?;
            Ok(t.elapsed().as_secs_f64())
        })?;
        eprintln!(
            "# cpu reference ({}): no compile; per run {:.3} ms host wall time (median of {n} runs after {WARMUP_RUNS} warm-up)",
            args.precision,
            med * 1e3
        );
        return Ok(outs);
    }
    let (backend, _) = super::bench::make_backend(&args.backend, false)?;
    progress.step(format_args!("compiling ({}) on {}", args.precision, backend.name()));
    let opts = CompileOptions {
        precision: args.precision,
        tf32: args.tf32,
        cache_dir: args.cache.dir(),
        debug_dir: None,
        ..CompileOptions::default()
    };
    let t = Instant::now();
    let c = compile(g, backend.clone(), opts.clone())?;
    let mut compile_s = t.elapsed().as_secs_f64();
    // A graph with symbolic input dims compiles at its first run (for the inputs' shapes).
    let lazy = c.events().is_empty();
    if lazy {
        progress.step("first run (compiles for these input shapes)");
    } else {
        progress.step(format_args!("compiled in {compile_s:.3} s; first run"));
    }
    let t = Instant::now();
    let outs = c.run(inputs)?;
    let first_s = t.elapsed().as_secs_f64();
    if lazy {
        compile_s = c.events().iter().map(|e| e.stats.total_s).sum();
    }
    let hit = c.events().first().is_some_and(|e| e.stats.cache_hit);
    for line in super::graph_breaks(&c) {
        eprintln!("{line}");
    }
    match (c.extents(), c.dynamic_refusal()) {
        (Some(e), _) => eprintln!(
            "# serves {} <= {}: other values up to it run this compiled program (no recompile)",
            e.symbol, e.bound
        ),
        (None, Some(why)) if lazy => eprintln!("# compiled for these shapes only: {why}"),
        _ => {}
    }
    progress.step(format_args!(
        "first run took {first_s:.3} s{}",
        if lazy { format!(" ({compile_s:.3} s compiling)") } else { String::new() }
    ));
    // Timed on a fresh device where the backend asks for one, as `sinter bench` times.
    if backend.fresh_device_per_measurement() {
        progress.step("compiling again on a fresh device for timing");
    }
    let fresh = super::bench::compile_for_measurement(g, &backend, opts)?;
    let (c, fresh_note) = match &fresh {
        Some(f) => (f, ", on a fresh device"),
        None => (&c, ""),
    };
    // As `sinter bench` times a run (and the anchor's do_bench a call): two events around the
    // whole run where the backend times that; per-kernel events add gaps between kernels
    // (GPT-2 small in bf16 on an H200, 87 kernels: 1.51 ms against 1.07, session 24).
    let mut device = true;
    let (med, n) = match c.run_timed_whole(inputs, WARMUP_RUNS + TIMED_RUNS)? {
        Some((_, ns)) if ns.len() > WARMUP_RUNS => {
            (super::bench::median(ns[WARMUP_RUNS..].to_vec()) / 1e9, ns.len() - WARMUP_RUNS)
        }
        _ => time_runs(|| {
            let t = Instant::now();
            let (_, timings) = c.run_timed(inputs, 1)?;
            let wall = t.elapsed().as_secs_f64();
            match timings.first().and_then(|k| super::bench::run_span_ns(k)) {
                Some(ns) => Ok(ns / 1e9),
                None => {
                    device = false;
                    Ok(wall)
                }
            }
        })?,
    };
    eprintln!(
        "# {} ({}): compile {compile_s:.3} s{}; per run {:.3} ms {} (median of {n} runs after {WARMUP_RUNS} warm-up{fresh_note})",
        backend.name(),
        args.precision,
        if hit { " (program cache hit)" } else { "" },
        med * 1e3,
        match (device, c.graph_breaks().is_empty()) {
            (true, true) => "device time",
            (true, false) => "device time, CPU fallback segments in host time",
            (false, _) => "host wall time",
        }
    );
    Ok(outs)
}

/// Where `--out` writes: one `.npz`, or `.npy` file(s). Other extensions (and a folder) are
/// refused rather than written under a name the user did not ask for.
#[derive(Debug, PartialEq)]
enum OutKind {
    Npz,
    Npy,
}

fn out_kind(p: &Path) -> Result<OutKind> {
    if p.is_dir() {
        bail!("--out {}: is a folder; name a .npy or .npz file", p.display());
    }
    if super::has_extension(p, "npz") {
        Ok(OutKind::Npz)
    } else if super::has_extension(p, "npy") {
        Ok(OutKind::Npy)
    } else {
        bail!("--out {}: expected a .npy or .npz file name", p.display())
    }
}

/// Runs the model and writes or prints the outputs.
pub fn run(args: Args) -> Result<()> {
    let out_kind = args.out.as_deref().map(out_kind).transpose()?;
    let progress = Progress::default();
    let model = super::model::open(&args.model, &progress)?;
    let names: Vec<&str> = model.inputs().iter().map(|i| i.name.as_str()).collect();
    let inputs: Vec<HostTensor> = read_inputs(&args.inputs, &names)?.into_iter().map(|(_, t)| t).collect();
    let want = model.inputs().len();
    if inputs.len() != want {
        let names: Vec<&str> = model.inputs().iter().map(|i| i.name.as_str()).collect();
        bail!("the model takes {want} input(s) ({}), {} given with --input", names.join(", "), inputs.len());
    }
    progress.step("importing");
    // Compiled backends take the symbolic import (one compile serves other batch sizes); should
    // it fail to import or to compile, the import specialized to these inputs runs instead.
    let symbolic = (args.backend != "cpu")
        .then(|| model.graph().ok())
        .flatten()
        .filter(|g| g.inputs.iter().any(|&i| g.ty(i).shape.dims().iter().any(|d| d.as_static().is_none())));
    let (g, outs) = match symbolic.map(|g| {
        progress.step(format_args!("imported with symbolic dims: {} nodes", g.nodes.len()));
        let r = execute(&args, &g, &inputs, &progress);
        (g, r)
    }) {
        Some((g, Ok(outs))) => (g, outs),
        failed => {
            if let Some((_, Err(e))) = failed {
                progress.step(format_args!("the symbolic import did not run ({e:#}); importing for these inputs"));
            }
            let g = model.graph_for_inputs(&inputs).context("importing the model")?;
            progress.step(format_args!("imported: {} nodes", g.nodes.len()));
            let outs = execute(&args, &g, &inputs, &progress)
                .with_context(|| format!("running on the {} backend", args.backend))?;
            (g, outs)
        }
    };
    let names: Vec<String> = g.outputs.iter().map(|o| o.name.clone()).collect();
    match &args.out {
        None => {
            let mut w = std::io::stdout().lock();
            for (n, t) in names.iter().zip(&outs) {
                let v = t.to_f64_vec();
                let head: Vec<String> = v.iter().take(8).map(|x| format!("{x}")).collect();
                let more = if v.len() > 8 { ", ..." } else { "" };
                writeln!(w, "{n}: {} {:?} [{}{more}]", t.dtype(), t.shape, head.join(", "))?;
            }
        }
        Some(p) if out_kind == Some(OutKind::Npz) => {
            let items: Vec<(String, HostTensor)> = names.iter().cloned().zip(outs).collect();
            std::fs::write(p, sinter_onnx::npy::to_npz(&items)).with_context(|| format!("writing {}", p.display()))?;
        }
        Some(p) if outs.len() == 1 => {
            std::fs::write(p, sinter_onnx::npy::to_npy(&outs[0]))
                .with_context(|| format!("writing {}", p.display()))?;
        }
        Some(p) => {
            // The stem keeps the extension's case: `OUT.NPY` gives `OUT_0.npy`, ...
            let stem = p.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "out".into());
            for (k, t) in outs.iter().enumerate() {
                let q = p.with_file_name(format!("{stem}_{k}.npy"));
                std::fs::write(&q, sinter_onnx::npy::to_npy(t)).with_context(|| format!("writing {}", q.display()))?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn out_extensions_are_case_insensitive_and_others_refused() {
        assert_eq!(out_kind(Path::new("x.NPZ")).unwrap(), OutKind::Npz);
        assert_eq!(out_kind(Path::new("x.Npy")).unwrap(), OutKind::Npy);
        assert!(out_kind(Path::new("x.txt")).unwrap_err().to_string().contains(".npy or .npz"));
        assert!(out_kind(&std::env::temp_dir()).unwrap_err().to_string().contains("is a folder"));
    }

    #[test]
    fn bad_tensor_files_say_what_is_wrong_with_which_file() {
        let dir = std::env::temp_dir().join(format!("sinter-run-files-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let t = HostTensor::f32([2], vec![1.0, 2.0]).unwrap();
        let cases: [(&str, Vec<u8>, &str); 5] = [
            ("empty.pb", vec![], "empty (0 bytes)"),
            ("npy.pb", sinter_onnx::npy::to_npy(&t), "NumPy .npy data"),
            ("garbage.pb", b"\x08\x07\x12\xff\xff".to_vec(), "garbage.pb"),
            ("empty.npy", vec![], "empty (0 bytes)"),
            ("garbage.NPY", b"hello world, not numpy".to_vec(), "not .npy data"),
        ];
        for (name, bytes, want) in cases {
            let p = dir.join(name);
            std::fs::write(&p, bytes).unwrap();
            let e = super::super::report(&read_tensor(&p).unwrap_err());
            assert!(e.contains(&p.display().to_string()) && e.contains(want), "{name}: {e}");
            assert!(!e.contains("malformed model"), "{name} is not a model: {e}");
        }
        let model = dir.join("model.onnx");
        std::fs::write(&model, b"").unwrap();
        let e = sinter_onnx::load(&model).unwrap_err().to_string();
        assert!(e.contains(&model.display().to_string()) && e.contains("empty"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
