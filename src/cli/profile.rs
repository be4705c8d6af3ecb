//! `sinter profile`: compiles a workload or an ONNX model (`--model`) eager and fused, times both
//! on the device, and writes one artifact folder (debug artifacts, `profile.json`, `profile_eager.json`, `trace.json`,
//! `trace_eager.json`) for `sinter view` and Perfetto; prints the roofline summary.

use super::model::{ModelArgs, Progress};
use super::{ScaleArg, workload};
use anyhow::{Context, Result};
use sinter::core::backend::{Backend as BackendTrait, Mode};
use sinter::core::compile::{CompileOptions, compile};
use sinter::core::passes::Precision;
use sinter::core::profile::{self, DeviceInfo};
use sinter::workloads::Scale;
use sinter::{HostTensor, IrGraph};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Arguments of `sinter profile`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Workload name.
    #[arg(long, required_unless_present = "model")]
    pub workload: Option<String>,
    /// An ONNX model instead of a workload, with its inputs.
    #[command(flatten)]
    pub model: ModelArgs,
    /// Mixed precision (`f32`, `bf16`, `f16`; see `sinter bench --help`).
    #[arg(long, default_value = "f32", value_parser = super::model::parse_precision)]
    pub precision: Precision,
    /// Where f32 contractions may run in TF32 (`conv`, PyTorch's default; `on`, `off`, `matmul`;
    /// see `sinter bench --help`).
    #[arg(long, default_value = "conv", value_parser = super::model::parse_tf32)]
    pub tf32: sinter::core::schedule::AllowTf32,
    /// Backend: auto, cuda, wgsl, interp.
    #[arg(long, default_value = "auto")]
    pub backend: String,
    /// Compile mode of the compiled recording: default, reduce-overhead, max-autotune (the eager
    /// recording is always default).
    #[arg(long, default_value = "default")]
    pub mode: String,
    /// Size.
    #[arg(long, value_enum, default_value = "full")]
    pub scale: ScaleArg,
    /// Timed iterations.
    #[arg(long, default_value_t = 10)]
    pub iters: usize,
    /// Artifact folder.
    #[arg(long)]
    pub out: PathBuf,
    /// Skip the eager run.
    #[arg(long)]
    pub no_eager: bool,
    /// The on-disk cache.
    #[command(flatten)]
    pub cache: super::CacheArgs,
}

/// What is profiled: a name, a static graph and its inputs, and progress lines for models.
struct Subject {
    name: String,
    graph: IrGraph,
    inputs: Vec<HostTensor>,
    progress: Option<Progress>,
}

impl Subject {
    fn step(&self, what: impl std::fmt::Display) {
        if let Some(p) = &self.progress {
            p.step(what);
        }
    }
}

fn subject(a: &Args) -> Result<Subject> {
    if let Some(path) = &a.model.model {
        let progress = Progress::default();
        let m = super::model::load(path, &a.model, &progress)?;
        return Ok(Subject { name: m.name, graph: m.graph, inputs: m.inputs, progress: Some(progress) });
    }
    let w = workload(a.workload.as_deref().context("--workload or --model is required")?)?;
    let scale: Scale = a.scale.into();
    Ok(Subject { name: w.name.to_string(), graph: w.build(scale)?, inputs: w.inputs(scale, 7), progress: None })
}

fn record(
    dir: &Path,
    a: &Args,
    s: &Subject,
    backend: &Arc<dyn BackendTrait>,
    device: &DeviceInfo,
    fusion: bool,
) -> Result<profile::Profile> {
    let mode = if fusion {
        Mode::from_name(&a.mode).with_context(|| format!("unknown mode {:?}", a.mode))?
    } else {
        Mode::Default
    };
    let opts = CompileOptions {
        mode,
        fusion,
        precision: a.precision,
        tf32: a.tf32,
        cache_dir: a.cache.dir(),
        debug_dir: fusion.then(|| dir.to_path_buf()),
        ..CompileOptions::default()
    };
    let what = if fusion { "compiled" } else { "eager" };
    s.step(format_args!("compiling ({what}, {}, {}) on {}", mode.name(), a.precision, backend.name()));
    let c = compile(&s.graph, backend.clone(), opts.clone()).with_context(|| format!("compiling {}", s.name))?;
    if fusion {
        for line in super::graph_breaks(&c) {
            eprintln!("{line}");
        }
    }
    // Recorded on a fresh device where the backend asks for one (no artifacts written twice).
    let c = super::bench::compile_for_measurement(&s.graph, backend, CompileOptions { debug_dir: None, ..opts })
        .with_context(|| format!("compiling {}", s.name))?
        .unwrap_or(c);
    s.step(format_args!("recording {} timed runs ({what})", a.iters.max(1)));
    let p = c.profile(&s.inputs, a.iters, &s.name, device.clone())?;
    s.step(format_args!("recorded ({what})"));
    Ok(p)
}

/// Runs the profile.
pub fn run(a: Args) -> Result<()> {
    Mode::from_name(&a.mode)
        .with_context(|| format!("unknown mode {:?} (default, reduce-overhead, max-autotune)", a.mode))?;
    // The model is loaded and its inputs checked before the backend is opened.
    let s = subject(&a)?;
    let (backend, copy) = super::bench::make_backend(&a.backend, true)?;
    let ceilings = super::contractions::load_ceilings(&backend, copy);
    if let Some(note) = super::contractions::no_peaks_note(&ceilings, backend.name()) {
        println!("{note}");
    }
    let device = DeviceInfo::new(backend.device_name(), backend.name(), ceilings);
    super::out_dir("out", &a.out)?;
    if !a.no_eager {
        let p = record(&a.out, &a, &s, &backend, &device, false)?;
        p.write(&a.out)?;
    }
    let p = record(&a.out, &a, &s, &backend, &device, true)?;
    p.write(&a.out)?;
    let analysis = profile::analyze(&p);
    println!("# {}: compiled in {} mode on {}", s.name, a.mode, backend.name());
    println!("{}", analysis.summary(&p));
    let rows: Vec<_> = p.kernels.iter().filter_map(super::contractions::ContractionRow::of).collect();
    for line in super::contractions::table(&rows) {
        println!("{line}");
    }
    println!("artifacts in {} (open with: sinter view {})", a.out.display(), a.out.display());
    Ok(())
}
