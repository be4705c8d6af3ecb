//! `sinter bench`: times the built-in workloads or an ONNX model (`--model`), eager and compiled,
//! on a backend and writes the JSON that `shared/bench/compare.py` reads (schema in BENCHMARKS.md).

use super::model::{ModelArgs, Progress};
use super::{ScaleArg, workload};
use anyhow::{Context, Result, bail};
use serde::Serialize;
use sinter::core::backend::{Backend as BackendTrait, KernelTiming, Mode};
use sinter::core::compile::{CompileOptions, CompiledGraph, compile};
use sinter::core::passes::Precision;
use sinter::core::schedule::AllowTf32;
use sinter::workloads::{Scale, Workload};
use sinter::{Backend, HostTensor, IrGraph, Op};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

/// Arguments of `sinter bench`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Workloads (comma separated); all but resnet18 when omitted.
    #[arg(long, value_delimiter = ',')]
    pub workload: Vec<String>,
    /// An ONNX model instead of workloads, with its inputs.
    #[command(flatten)]
    pub model: ModelArgs,
    /// Mixed precision: `bf16`/`f16` run the f32 graph's matmuls, convolutions and attention in
    /// that dtype with f32 accumulation (autocast); `--check` then reports the error against the
    /// f32 CPU reference.
    #[arg(long, default_value = "f32", value_parser = super::model::parse_precision)]
    pub precision: Precision,
    /// Where f32 contractions may run in TF32, as PyTorch's `allow_tf32`: `conv` (its default:
    /// convolutions only), `on`, `off` (exact f32), `matmul`. `--check` then compares with the
    /// TF32 bound where a program set it ([`TF32_REL_L2`]).
    #[arg(long, default_value = "conv", value_parser = super::model::parse_tf32)]
    pub tf32: AllowTf32,
    /// Backend: auto, cuda, wgsl, interp.
    #[arg(long, default_value = "auto")]
    pub backend: String,
    /// Compile mode: default, reduce-overhead, max-autotune.
    #[arg(long, default_value = "default")]
    pub mode: String,
    /// Also time eager mode (fusion off).
    #[arg(long)]
    pub eager: bool,
    /// Size.
    #[arg(long, value_enum, default_value = "full")]
    pub scale: ScaleArg,
    /// Timed iterations per workload.
    #[arg(long, default_value_t = 20)]
    pub iters: usize,
    /// Write the results as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Check compiled outputs against the CPU reference (slow at full scale).
    #[arg(long)]
    pub check: bool,
    /// Untimed warm-up runs per workload (GPUs idle at low clocks; see BENCHMARKS.md).
    #[arg(long, default_value_t = 20)]
    pub warmup: usize,
    /// Skip the copy-bandwidth calibration.
    #[arg(long)]
    pub no_calibrate: bool,
    /// After the timed runs, run back to back on device-resident inputs for this many seconds and
    /// report the time per run at the end (`sustained_ms`). `ms` is a burst figure (as do_bench's):
    /// held at full load a GPU reaches its power limit and lowers its clock (an H200's tensor-core
    /// kernels 4-25% slower after 1.5-2 s; one such figure moves by ~10% with what ran before:
    /// BENCHMARKS.md, session 35). 0: off.
    #[arg(long, default_value_t = 0.0, value_parser = parse_sustain)]
    pub sustain: f64,
    /// Measure every workload and mode on the one device of the process instead of a fresh one.
    /// By default the WGSL backend opens a fresh device for each measurement: NVIDIA's Linux
    /// Vulkan driver boosts the SM clock for about 4 s after a device is created and then drops it
    /// to its idle clock under load too (1980 -> 345 MHz on an H200; BENCHMARKS.md).
    #[arg(long)]
    pub reuse_device: bool,
    /// The on-disk cache.
    #[command(flatten)]
    pub cache: super::CacheArgs,
}

/// Parses `--sustain SECONDS`: a finite number of seconds from 0 (off) to an hour.
fn parse_sustain(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if (0.0..=3600.0).contains(&v) => Ok(v),
        Ok(v) => Err(format!("expected seconds from 0 (off) to 3600, got {v}")),
        Err(e) => Err(format!("expected seconds from 0 (off) to 3600, got {s:?} ({e})")),
    }
}

/// One measured row (see BENCHMARKS.md).
#[derive(Serialize, Debug, Clone)]
pub struct Row {
    /// Workload name (a model's file stem).
    pub name: String,
    /// `eager`, `default`, `reduce-overhead` or `max-autotune`.
    pub mode: String,
    /// The `--precision` the graph was compiled at: `f32` (as captured), `bf16` or `f16`
    /// (autocast: matmuls, convolutions and attention in that dtype).
    pub precision: String,
    /// The `--tf32` setting, and whether a kernel of the program was allowed TF32
    /// (`MatmulBody::tf32`): `conv (used)`, `off`, ...
    pub tf32: String,
    /// A kernel of the program may run its products in TF32.
    #[serde(skip)]
    pub tf32_used: bool,
    /// Median device time of one run, ms (first kernel start to last kernel end).
    pub ms: f64,
    /// Fastest run, ms.
    pub ms_min: f64,
    /// Median host wall time of one run including upload and readback, ms.
    pub wall_ms: f64,
    /// Kernels per run.
    pub kernels: usize,
    /// For overhead-bound runs (device time under 0.2 ms): host wall time per `run_device` call,
    /// µs, over 200 back-to-back calls on device-resident inputs, synchronized once at the end
    /// (what a caller chaining layers sees, launch overhead included).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub call_us: Option<f64>,
    /// The host's share of `call_us`: time to issue the 200 calls, before waiting for the device.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_us: Option<f64>,
    /// With `--sustain S`: wall time per run, ms, of back-to-back `run_device` calls on
    /// device-resident inputs at the end of S seconds of them (median over the batches of the
    /// last tenth, at least three; no L2 clear between runs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sustained_ms: Option<f64>,
    /// Minimum bytes over `ms`, GB/s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gbps: Option<f64>,
    /// FLOPs over `ms`, TFLOP/s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tflops: Option<f64>,
    /// First compile with an empty cache, s.
    pub cold_compile_s: f64,
    /// Second compile from the warm cache, s.
    pub warm_compile_s: f64,
    /// Peak device memory of the program, bytes.
    pub peak_bytes: usize,
    /// Largest tolerance ratio against the CPU reference (<= 1 passes), when checked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub check_ratio: Option<f64>,
    /// Largest relative L2 error against the CPU reference, when checked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub check_rel_l2: Option<f64>,
    /// Largest absolute difference against the CPU reference, when checked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub check_max_abs: Option<f64>,
    /// Whether the check passed (see BENCHMARKS.md for the criterion).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub check_ok: Option<bool>,
    /// Largest tolerance ratio of compiled against eager outputs, when both ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vs_eager_ratio: Option<f64>,
    /// Every matmul, convolution and attention kernel: registers, shared memory, spills,
    /// achieved TFLOP/s and its share of the measured peak of its compute type
    /// ([`super::contractions::ContractionRow`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub contractions: Vec<super::contractions::ContractionRow>,
    /// Each kernel's device times over the timed runs, ns (what `contractions` is rated from).
    #[serde(skip)]
    pub kernel_ns: std::collections::BTreeMap<String, Vec<f64>>,
}

/// The whole JSON document.
#[derive(Serialize, Debug)]
pub struct Report {
    /// Schema version of this document.
    pub schema: u32,
    /// sinter version.
    pub sinter: String,
    /// Backend name.
    pub backend: String,
    /// Device description.
    pub device: String,
    /// `full` or `reduced`; `model` for `--model`.
    pub scale: String,
    /// The model file, for `--model`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Measured copy bandwidth (read + write), GB/s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ceiling_copy_gbps: Option<f64>,
    /// The measured matmul peaks per compute type the contraction shares are of (TFLOP/s, from
    /// `sinter calibrate`); empty when the device was never calibrated.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub matmul_peaks_tflops: std::collections::BTreeMap<String, f64>,
    /// How each peak was measured.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub matmul_peak_methods: std::collections::BTreeMap<String, String>,
    /// Rows.
    pub results: Vec<Row>,
}

/// The median (upper middle for an even count); NaN when empty.
pub fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Device time of one run from its kernel timings: first start to last end.
pub fn run_span_ns(t: &[KernelTiming]) -> Option<f64> {
    let start = t.iter().map(|k| k.start_ns).fold(f64::INFINITY, f64::min);
    let end = t.iter().map(|k| k.start_ns + k.dur_ns).fold(f64::NEG_INFINITY, f64::max);
    (end > start).then_some(end - start)
}

/// Opens a backend of the requested kind through the registry (printing which, and why for
/// `auto`) and measures its copy ceiling when asked and the backend has a device.
pub fn make_backend(name: &str, calibrate: bool) -> Result<(Arc<dyn BackendTrait>, Option<f64>)> {
    let kind = Backend::from_name(name)
        .with_context(|| format!("unknown backend {name:?} (available: {})", Backend::names()))?;
    let sel = sinter::runtime::open(kind).with_context(|| format!("opening the {name} backend"))?;
    if kind == Backend::Auto {
        eprintln!("# {}", sel.why);
    }
    let ceiling = if calibrate { sel.backend.calibrate(256 << 20).ok().flatten().map(|c| c.copy_gbps) } else { None };
    Ok((sel.backend, ceiling))
}

/// A fresh instance of `backend`'s kind when its measurements need a new device each time, else
/// the same one.
pub fn for_measurement(backend: &Arc<dyn BackendTrait>, reuse: bool) -> Result<Arc<dyn BackendTrait>> {
    if reuse || !backend.fresh_device_per_measurement() {
        return Ok(backend.clone());
    }
    let kind = Backend::from_name(backend.name()).context("backend without a registry entry")?;
    Ok(sinter::runtime::open(kind)?.backend)
}

/// `g` compiled again with `opts` (a program cache hit) on a fresh instance of `backend`'s kind
/// where its measurements need one ([`BackendTrait::fresh_device_per_measurement`]: NVIDIA's
/// Vulkan driver drops a device's clock ~4 s after its creation, and a model's compile can take
/// longer: GPT-2 small was timed 3.1x slow by `sinter run` and 5x by `sinter profile`, session 27);
/// `None` where the device it was compiled on measures as well.
pub fn compile_for_measurement(
    g: &IrGraph,
    backend: &Arc<dyn BackendTrait>,
    opts: CompileOptions,
) -> Result<Option<CompiledGraph>> {
    if !backend.fresh_device_per_measurement() {
        return Ok(None);
    }
    let fresh = for_measurement(backend, false)?;
    Ok(Some(compile(g, fresh, opts).context("compiling again on a fresh device")?))
}

/// What `measure` times: a workload's graph or an imported model's.
pub struct Subject {
    /// The name in results.
    pub name: String,
    /// The graph (static shapes).
    pub graph: IrGraph,
    /// FLOPs of one run (0: unknown).
    pub flops: f64,
    /// Minimum bytes one run moves (0: unknown).
    pub min_bytes: f64,
    /// Progress lines on stderr for each phase (models, which may take long to compile).
    pub progress: Option<Progress>,
}

impl Subject {
    /// A built-in workload at a scale.
    pub fn workload(w: &Workload, scale: Scale) -> Result<Subject> {
        Ok(Subject {
            name: w.name.to_string(),
            graph: w.build(scale)?,
            flops: w.flops(scale),
            min_bytes: w.min_bytes(scale),
            progress: None,
        })
    }

    /// An imported model: FLOPs of its matmuls and convolutions, and as minimum bytes its
    /// inputs, outputs and constants (weights) each moved once.
    pub fn model(name: String, graph: IrGraph, progress: Progress) -> Subject {
        let bytes = |t: &sinter::TensorType| t.shape.numel().unwrap_or(0) as f64 * t.dtype.size_bytes() as f64;
        let mut min_bytes: f64 = graph.inputs.iter().map(|&i| bytes(graph.ty(i))).sum();
        min_bytes += graph.outputs.iter().map(|o| bytes(graph.ty(o.node))).sum::<f64>();
        min_bytes += graph.nodes.iter().filter(|n| matches!(n.op, Op::Constant(_))).map(|n| bytes(&n.ty)).sum::<f64>();
        Subject { name, flops: sinter::workloads::graph_flops(&graph), min_bytes, graph, progress: Some(progress) }
    }

    fn step(&self, what: impl std::fmt::Display) {
        if let Some(p) = &self.progress {
            p.step(what);
        }
    }
}

/// Compiles and times one workload in one mode. The cold and warm compile times are measured in
/// a private scratch folder (cold: empty; warm: the same folder again), so they never depend on
/// what the user's cache holds; the graph that is timed is then compiled with `cache` (the user's
/// cache: max-autotune winners and programs are kept between runs), or is the cold one when
/// `cache` is `None`. With `SINTER_DEBUG` set, the graph that is timed is compiled once more (from
/// the warm cache) writing the debug artifacts there.
#[allow(clippy::too_many_arguments)]
pub fn measure(
    w: &Subject,
    backend: &Arc<dyn BackendTrait>,
    mode: Mode,
    fusion: bool,
    (precision, tf32): (Precision, AllowTf32),
    iters: usize,
    warmup: usize,
    inputs: &[HostTensor],
    cache: Option<&std::path::Path>,
) -> Result<(Row, Vec<HostTensor>, CompiledGraph)> {
    let g = &w.graph;
    let what = if fusion { format!("{} {precision}", mode.name()) } else { format!("eager {precision}") };
    w.step(format_args!("compiling ({what}, cold: empty cache) on {}", backend.name()));
    let scratch = std::env::temp_dir().join(format!("sinter-bench-{}-{}", std::process::id(), w.name));
    let _ = std::fs::remove_dir_all(&scratch);
    let opts = CompileOptions {
        mode,
        fusion,
        precision,
        tf32,
        cache_dir: Some(scratch.clone()),
        debug_dir: None,
        ..CompileOptions::default()
    };
    let t = Instant::now();
    // Cold for the backend's compiler too: NVRTC 13 would otherwise find a source compiled before
    // on this machine in its own cache (the CUDA driver's), 4-16x faster (session 27).
    let cold_opts = CompileOptions { bypass_compiler_caches: true, ..opts.clone() };
    let cold_c = compile(g, backend.clone(), cold_opts).with_context(|| format!("compiling {}", w.name))?;
    let cold = t.elapsed().as_secs_f64();
    w.step(format_args!("compiled in {cold:.3} s; compiling again from the warm cache"));
    let t = Instant::now();
    let warm_c = compile(g, backend.clone(), opts.clone())?;
    let warm = t.elapsed().as_secs_f64();
    drop(warm_c);
    // The debug artifacts (`SINTER_DEBUG`) come from a compile of their own after the timed ones
    // (from the warm cache), so writing them adds nothing to the figures.
    let debug_dir = CompileOptions::default().debug_dir;
    let c = match (cache, debug_dir) {
        (None, None) => cold_c,
        (cache, debug_dir) => {
            drop(cold_c);
            let cache_dir = Some(cache.map_or_else(|| scratch.clone(), std::path::Path::to_path_buf));
            compile(g, backend.clone(), CompileOptions { cache_dir, debug_dir, ..opts })
                .with_context(|| format!("compiling {}", w.name))?
        }
    };
    let _ = std::fs::remove_dir_all(&scratch);
    // Warm-up runs (clocks ramp up, caches fill): at least `warmup` runs and 50 ms, then timed runs.
    w.step(format_args!("first run ({what})"));
    let t = Instant::now();
    c.run(inputs)?;
    w.step(format_args!(
        "first run took {:.3} s; warming up and timing {} runs",
        t.elapsed().as_secs_f64(),
        iters.max(1)
    ));
    let mut done = 1;
    while done < warmup || t.elapsed().as_secs_f64() < 0.05 {
        let n = warmup.saturating_sub(done).max(1);
        c.run_timed(inputs, n)?;
        done += n;
    }
    let t = Instant::now();
    let (out, timings) = c.run_timed(inputs, iters.max(1))?;
    let wall_ms = t.elapsed().as_secs_f64() * 1e3 / iters.max(1) as f64;
    let spans: Vec<f64> = timings.iter().filter_map(|r| run_span_ns(r)).collect();
    let mut kernel_ns: std::collections::BTreeMap<String, Vec<f64>> = Default::default();
    for k in timings.iter().flatten() {
        kernel_ns.entry(k.kernel.clone()).or_default().push(k.dur_ns);
    }
    // The run's time as the anchor's do_bench takes it: events around the whole run where the
    // backend times that (per-kernel events add gaps between kernels), else the kernels' span.
    let whole = match c.run_timed_whole(inputs, iters.max(1))? {
        Some((_, ns)) if !ns.is_empty() => ns,
        _ => spans,
    };
    let (ms, ms_min) = if whole.is_empty() {
        (wall_ms, wall_ms)
    } else {
        (median(whole.clone()) / 1e6, whole.iter().cloned().fold(f64::INFINITY, f64::min) / 1e6)
    };
    let (call_us, host_us) = if ms < 0.2 {
        let (c, h) = call_time_us(&c, inputs)?;
        (Some(c), Some(h))
    } else {
        (None, None)
    };
    let programs = c.programs();
    if programs.is_empty() {
        anyhow::bail!("no program");
    }
    let (flops, bytes) = (w.flops, w.min_bytes);
    let tf32_used = programs.iter().any(program_tf32);
    let row = Row {
        name: w.name.clone(),
        mode: if fusion { mode.name().to_string() } else { "eager".to_string() },
        precision: precision.name().to_string(),
        tf32: format!("{tf32}{}", if tf32_used { " (used)" } else { "" }),
        tf32_used,
        ms,
        ms_min,
        wall_ms,
        kernels: programs.iter().map(|p| p.kernels.len()).sum(),
        call_us,
        host_us,
        sustained_ms: None,
        gbps: (bytes > 0.0).then(|| bytes / (ms / 1e3) / 1e9),
        tflops: (flops > 0.0).then(|| flops / (ms / 1e3) / 1e12),
        cold_compile_s: cold,
        warm_compile_s: warm,
        peak_bytes: programs.iter().map(|p| p.memory.peak_bytes).max().unwrap_or(0),
        check_ratio: None,
        check_rel_l2: None,
        check_max_abs: None,
        check_ok: None,
        vs_eager_ratio: None,
        contractions: Vec::new(),
        kernel_ns,
    };
    Ok((row, out, c))
}

/// Wall time per run, ms, after `seconds` of back-to-back `run_device` calls on device-resident
/// inputs: the calls go in batches of about 10 ms, each closed by waiting for its last output, and
/// the figure is the median time per run of the batches that ended in the last tenth of the
/// soak (at least the last three).
pub fn sustained_ms(c: &CompiledGraph, inputs: &[HostTensor], seconds: f64) -> Result<f64> {
    let dev = inputs.iter().map(|t| c.upload(t)).collect::<Result<Vec<_>, _>>()?;
    let batch = |n: usize| -> Result<f64> {
        let t = Instant::now();
        let mut last = Vec::new();
        for _ in 0..n {
            last = c.run_device(&dev)?;
        }
        if let Some(o) = last.first() {
            o.synchronize()?;
        }
        Ok(t.elapsed().as_secs_f64() * 1e3 / n as f64)
    };
    let per_run = batch(1)?;
    let n = ((10.0 / per_run.max(1e-6)) as usize).clamp(1, 10_000);
    let start = Instant::now();
    let mut ends: Vec<(f64, f64)> = Vec::new();
    while start.elapsed().as_secs_f64() < seconds || ends.len() < 3 {
        let ms = batch(n)?;
        ends.push((start.elapsed().as_secs_f64(), ms));
    }
    Ok(last_tenth_median(&ends))
}

/// The median of the batches (end time in s, ms per run) that ended in the last tenth of the
/// soak, or of the last three where fewer did; NaN for none.
fn last_tenth_median(ends: &[(f64, f64)]) -> f64 {
    let cut = 0.9 * ends.last().map_or(0.0, |e| e.0);
    let tail: Vec<f64> = ends.iter().filter(|e| e.0 >= cut).map(|e| e.1).collect();
    if tail.len() >= 3 {
        median(tail)
    } else {
        median(ends[ends.len().saturating_sub(3)..].iter().map(|e| e.1).collect())
    }
}

/// Host wall time per `run_device` call, µs: 200 calls back to back on inputs already on the device,
/// then a wait for the last output; and the host's share (the time to issue the calls).
fn call_time_us(c: &CompiledGraph, inputs: &[HostTensor]) -> Result<(f64, f64)> {
    let dev = inputs.iter().map(|t| c.upload(t)).collect::<Result<Vec<_>, _>>()?;
    for _ in 0..20 {
        c.run_device(&dev)?;
    }
    c.run_device(&dev)?[0].synchronize()?;
    let n = 200;
    let t = Instant::now();
    let mut last = Vec::new();
    for _ in 0..n {
        last = c.run_device(&dev)?;
    }
    let host = t.elapsed().as_secs_f64() * 1e6 / n as f64;
    last[0].synchronize()?;
    Ok((t.elapsed().as_secs_f64() * 1e6 / n as f64, host))
}

/// Largest tolerance ratio of `a` against `b` by the shared comparison
/// ([`sinter::core::compare::compare_outputs`]: NaN only equals NaN, an infinity only the same
/// infinity, integers exact; a count, shape or dtype mismatch, or no outputs, is `+inf`).
fn worst_ratio(a: &[HostTensor], b: &[HostTensor], rtol: f64, atol: f64) -> f64 {
    sinter::core::compare::compare_outputs(a, b, |_| (rtol, atol)).max_ratio
}

/// Largest `||a - b|| / ||b||` over the finite elements of the outputs (METHOD: f32 lands far
/// under 1e-3, bf16 operands between 1e-3 and 1e-2). Elements where both are the same NaN or
/// infinity are equal; any other NaN or infinity mismatch, or a count or shape mismatch, is
/// `+inf`: NaN never passes.
fn worst_rel_l2(a: &[HostTensor], b: &[HostTensor]) -> f64 {
    if a.len() != b.len() || b.is_empty() {
        return f64::INFINITY;
    }
    a.iter()
        .zip(b)
        .map(|(x, y)| {
            if x.shape != y.shape || x.dtype() != y.dtype() {
                return f64::INFINITY;
            }
            let (x, y) = (x.to_f64_vec(), y.to_f64_vec());
            let (mut num, mut den) = (0.0f64, 0.0f64);
            for (&p, &q) in x.iter().zip(&y) {
                if p.is_finite() && q.is_finite() {
                    num += (p - q) * (p - q);
                    den += q * q;
                } else if sinter::core::compare::element_ratio(p, q, 0.0, 0.0) != 0.0 {
                    return f64::INFINITY;
                }
            }
            if num.is_finite() { (num / den.max(f64::MIN_POSITIVE)).sqrt() } else { f64::INFINITY }
        })
        .fold(0.0, f64::max)
}

/// Whether a kernel of `p` may run its products in TF32 ([`sinter::core::kernel::MatmulBody::tf32`]).
pub fn program_tf32(p: &sinter::core::kernel::Program) -> bool {
    p.kernels.iter().any(|k| matches!(&k.body, sinter::core::kernel::KernelBody::Matmul(m) if m.tf32))
}

/// The relative L2 error against the f32 CPU reference that an f32 run whose program set TF32 on
/// some contraction may reach and still pass `--check`: TF32 keeps 11 significant bits (relative
/// error about 2^-11 per product, growing with the square root of the reduction), and a deep
/// network compounds it over its layers (PyTorch's own TF32 convolution tests allow ~1e-2
/// relative). Applied only where TF32 was allowed; exact-f32 programs keep the elementwise bound.
pub const TF32_REL_L2: f64 = 5e-3;

/// The relative L2 error against the f32 CPU reference that a run at a lower `--precision` may
/// reach and still pass `--check` (bf16 keeps 8 significant bits, f16 11); `None` for f32.
pub fn precision_bound(p: Precision) -> Option<f64> {
    match p {
        Precision::F32 => None,
        Precision::BF16 => Some(5e-2),
        Precision::F16 => Some(1e-2),
    }
}

/// Computes the expected outputs of a job's inputs.
type Reference = Box<dyn Fn(&[HostTensor]) -> Result<Vec<HostTensor>>>;

/// One thing to time: the graph, its inputs, the expected outputs and how to compare with them.
struct Job {
    subject: Subject,
    inputs: Vec<HostTensor>,
    /// The expected outputs (computed only with `--check`).
    reference: Reference,
    /// `(rtol, atol)` of the elementwise check.
    tolerance: (f64, f64),
    /// A relative L2 error that passes even when the elementwise check does not: 1e-2 for
    /// half-precision workloads (rounding points legitimately differ when fusion keeps
    /// intermediates in f32 registers, as Inductor does), 1e-4 for f32 models (long chains of
    /// reductions reorder sums).
    rel_l2_allowed: Option<f64>,
}

fn workload_job(w: &Workload, scale: Scale) -> Result<Job> {
    let w2 = *w;
    Ok(Job {
        subject: Subject::workload(w, scale)?,
        inputs: w.inputs(scale, 42),
        reference: Box::new(move |ins| Ok(w2.reference(scale, ins)?)),
        tolerance: w.tolerance(),
        rel_l2_allowed: matches!(w.dtype(), sinter::DType::BF16 | sinter::DType::F16).then_some(1e-2),
    })
}

fn model_job(path: &std::path::Path, m: &ModelArgs) -> Result<Job> {
    let progress = Progress::default();
    let loaded = super::model::load(path, m, &progress)?;
    let g = loaded.graph.clone();
    Ok(Job {
        subject: Subject::model(loaded.name, loaded.graph, progress),
        inputs: loaded.inputs,
        reference: Box::new(move |ins| sinter::cpu::run(&g, ins).context("the CPU reference")),
        tolerance: sinter::workloads::tolerance(sinter::DType::F32),
        rel_l2_allowed: Some(1e-4),
    })
}

/// Fills the check fields of `row`: outputs against the reference. At a lower `precision` the
/// criterion is the relative L2 error within [`precision_bound`] (the error is reported, the
/// loosened precision is not a failure).
fn check_row(row: &mut Row, job: &Job, out: &[HostTensor], want: &[HostTensor], precision: Precision) {
    let (rtol, atol) = job.tolerance;
    let cmp = sinter::core::compare::compare_outputs(out, want, |_| (rtol, atol));
    let l2 = worst_rel_l2(out, want);
    row.check_ratio = Some(cmp.max_ratio);
    row.check_rel_l2 = Some(l2);
    row.check_max_abs = Some(cmp.max_abs);
    row.check_ok = Some(match precision_bound(precision) {
        Some(b) => l2 <= b,
        None if row.tf32_used => cmp.max_ratio <= 1.0 || l2 <= job.rel_l2_allowed.unwrap_or(0.0).max(TF32_REL_L2),
        None => cmp.max_ratio <= 1.0 || job.rel_l2_allowed.is_some_and(|b| l2 <= b),
    });
}

fn print_header() {
    println!(
        "{:32} {:>15} {:>7} {:>10} {:>10} {:>9} {:>8} {:>8} {:>8} {:>8} {:>8}",
        "workload", "mode", "kernels", "ms", "GB/s", "TFLOP/s", "%copy", "cold s", "warm s", "call us", "host us"
    );
}

fn print_row(row: &Row, ceiling: Option<f64>) {
    let pct = match (row.gbps, ceiling) {
        (Some(g), Some(c)) => format!("{:.0}%", 100.0 * g / c),
        _ => "-".into(),
    };
    let f = |v: Option<f64>, p: usize| v.map_or("-".to_string(), |x| format!("{x:.p$}"));
    let mode = if row.precision == "f32" { row.mode.clone() } else { format!("{} {}", row.mode, row.precision) };
    let check = match (row.check_ok, row.check_ratio, row.check_rel_l2, row.check_max_abs) {
        (Some(ok), Some(r), Some(l), Some(m)) => format!(
            "  {} (tol ratio {r:.2}, rel L2 {l:.1e}, max abs {m:.1e}{})",
            if ok { "check ok" } else { "CHECK FAILED" },
            match (row.precision.as_str(), row.tf32_used) {
                ("f32", false) => String::new(),
                ("f32", true) => format!(", TF32 bound rel L2 {TF32_REL_L2:.0e}"),
                (p, _) => format!(" vs f32, {p} bound"),
            }
        ),
        _ => String::new(),
    };
    println!(
        "{:32} {:>15} {:>7} {:>10.4} {:>10} {:>9} {:>8} {:>8.3} {:>8.3} {:>8} {:>8}{check}",
        row.name,
        mode,
        row.kernels,
        row.ms,
        f(row.gbps, 1),
        f(row.tflops, 2),
        pct,
        row.cold_compile_s,
        row.warm_compile_s,
        f(row.call_us, 1),
        f(row.host_us, 1),
    );
}

/// Runs the benchmark.
pub fn run(a: Args) -> Result<()> {
    let mode = Mode::from_name(&a.mode).with_context(|| format!("unknown mode {:?}", a.mode))?;
    let scale: Scale = a.scale.into();
    // A model is loaded (and its inputs checked) before the backend is opened: input errors come
    // first and fast.
    let model_job = a.model.model.as_deref().map(|p| model_job(p, &a.model)).transpose()?;
    let list: Vec<Workload> = if model_job.is_some() {
        Vec::new()
    } else if a.workload.is_empty() {
        sinter::workloads::all().into_iter().filter(|w| !w.name.starts_with("resnet")).collect()
    } else {
        a.workload.iter().map(|n| workload(n)).collect::<Result<_>>()?
    };
    let (backend, ceiling) = make_backend(&a.backend, !a.no_calibrate)?;
    println!("# backend {} on {}", backend.name(), backend.device_name());
    if let Some(c) = ceiling {
        println!("# measured copy bandwidth: {c:.1} GB/s");
    }
    let ceilings = super::contractions::load_ceilings(&backend, ceiling);
    match super::contractions::no_peaks_note(&ceilings, backend.name()) {
        Some(note) => println!("{note}"),
        None => println!("{}", super::contractions::peaks_line(&ceilings)),
    }
    if a.precision != Precision::F32 {
        println!("# precision {} (autocast: matmuls, convolutions and attention in {})", a.precision, a.precision);
    }
    println!(
        "# tf32 {} (f32 contractions allowed TF32: matmuls {}, convolutions {})",
        a.tf32, a.tf32.matmul, a.tf32.conv
    );
    print_header();
    let cache = a.cache.dir();
    let mut rows = Vec::new();
    let mut failed: Vec<String> = Vec::new();
    let mut jobs: Box<dyn Iterator<Item = Result<Job>>> = match model_job {
        Some(j) => Box::new(std::iter::once(Ok(j))),
        None => Box::new(list.iter().map(|w| workload_job(w, scale))),
    };
    while let Some(job) = jobs.next().transpose()? {
        let mut modes = vec![(mode, true)];
        if a.eager {
            modes.insert(0, (Mode::Default, false));
        }
        let mut want: Option<Vec<HostTensor>> = None;
        let mut eager_out: Option<Vec<HostTensor>> = None;
        for (m, fusion) in modes {
            let b = for_measurement(&backend, a.reuse_device)?;
            let numerics = (a.precision, a.tf32);
            let r = measure(&job.subject, &b, m, fusion, numerics, a.iters, a.warmup, &job.inputs, cache.as_deref());
            let (mut row, out, c) = match r {
                Ok(r) => r,
                Err(e) => {
                    let name = if fusion { m.name() } else { "eager" };
                    println!("{:32} {:>15} error: {}", job.subject.name, name, super::report(&e));
                    failed.push(job.subject.name.clone());
                    continue;
                }
            };
            if a.check {
                if want.is_none() {
                    job.subject.step("computing the CPU reference for --check");
                    want = Some((job.reference)(&job.inputs)?);
                }
                if let Some(w) = &want {
                    check_row(&mut row, &job, &out, w, a.precision);
                }
            }
            let (rtol, atol) = job.tolerance;
            if fusion {
                if let Some(e) = &eager_out {
                    row.vs_eager_ratio = Some(worst_ratio(&out, e, rtol, atol));
                }
            } else {
                eager_out = Some(out);
            }
            if a.sustain > 0.0 {
                job.subject.step(format_args!("{} s back to back (--sustain)", a.sustain));
                let s = sustained_ms(&c, &job.inputs, a.sustain)?;
                row.sustained_ms = Some(s);
            }
            row.contractions = super::contractions::records(&c, &row.kernel_ns, &ceilings);
            print_row(&row, ceiling);
            if let Some(s) = row.sustained_ms {
                println!(
                    "{:32} {:>15} sustained: {s:.4} ms per run after {} s back to back ({:+.1}% against ms)",
                    "",
                    "",
                    a.sustain,
                    100.0 * (s / row.ms - 1.0)
                );
            }
            for line in super::contractions::table(&row.contractions) {
                println!("{line}");
            }
            if row.check_ok == Some(false) {
                failed.push(job.subject.name.clone());
            }
            rows.push(row);
        }
    }
    let report = Report {
        schema: 1,
        sinter: env!("CARGO_PKG_VERSION").to_string(),
        backend: backend.name().to_string(),
        device: backend.device_name(),
        scale: if a.model.model.is_some() { "model".to_string() } else { scale.name().to_string() },
        model: a.model.model.as_ref().map(|p| p.display().to_string()),
        ceiling_copy_gbps: ceiling,
        matmul_peaks_tflops: ceilings.matmul_tflops.clone(),
        matmul_peak_methods: ceilings.matmul_method.clone(),
        results: rows,
    };
    if let Some(p) = &a.json {
        std::fs::write(p, serde_json::to_string_pretty(&report)?)
            .with_context(|| format!("writing {}", p.display()))?;
    }
    if !failed.is_empty() {
        failed.dedup();
        bail!("failed: {}", failed.join(", "));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(v: &[f32]) -> HostTensor {
        HostTensor::f32([v.len()], v.to_vec()).unwrap()
    }

    #[test]
    fn the_sustained_figure_is_the_last_tenths_median() {
        // Batches ending at 0.1 .. 1.0 s: the last tenth (0.9 s on) holds three, 1, 1 and 2 ms.
        let ends = [(0.1, 5.0), (0.5, 5.0), (0.91, 1.0), (0.95, 1.0), (1.0, 2.0)];
        assert_eq!(last_tenth_median(&ends), 1.0);
        // Fewer than three in the last tenth: the last three.
        assert_eq!(last_tenth_median(&[(0.1, 4.0), (0.5, 3.0), (1.0, 9.0)]), 4.0);
        assert_eq!(last_tenth_median(&[(1.0, 7.0)]), 7.0);
        assert!(last_tenth_median(&[]).is_nan());
    }

    #[test]
    fn sustain_takes_finite_seconds_up_to_an_hour() {
        assert_eq!(parse_sustain("0"), Ok(0.0));
        assert_eq!(parse_sustain(" 1.5"), Ok(1.5));
        for bad in ["-1", "inf", "NaN", "3601", "two"] {
            let e = parse_sustain(bad).unwrap_err();
            assert!(e.contains("expected seconds from 0 (off) to 3600"), "{bad}: {e}");
        }
    }

    #[test]
    fn check_never_passes_wrong_infinities_nan_or_missing_outputs() {
        let inf = f32::INFINITY;
        // Issue 14: expected [inf, inf, 1], got [0, -inf, 1] passed the old check.
        let (got, want) = ([t(&[0.0, -inf, 1.0])], [t(&[inf, inf, 1.0])]);
        assert!(worst_ratio(&got, &want, 1e-3, 1e-5) > 1.0);
        assert!(worst_rel_l2(&got, &want) > 1e-2);
        assert!(worst_rel_l2(&[t(&[f32::NAN])], &[t(&[1.0])]).is_infinite());
        // Matching infinities and NaNs are equal; the finite rest is measured.
        let same = [t(&[f32::NAN, -inf, 2.0])];
        assert_eq!((worst_ratio(&same, &same, 0.0, 0.0), worst_rel_l2(&same, &same)), (0.0, 0.0));
        // Missing outputs, or none at all, fail.
        assert!(worst_ratio(&[], &want, 1.0, 1.0).is_infinite() && worst_ratio(&[], &[], 1.0, 1.0).is_infinite());
        assert!(worst_rel_l2(&[], &want).is_infinite() && worst_rel_l2(&[], &[]).is_infinite());
    }
}
