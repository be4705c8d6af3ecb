//! What `sinter bench` (and `profile`, `run`, `calibrate`) measure with: the backend opened for
//! measurement, one workload's compile and timed runs ([`measure`]), the back-to-back figures
//! (`call_us`, `--sustain`), and the statistics they share.

use super::super::model::Progress;
use super::{Row, program_tf32};
use anyhow::{Context, Result};
use sinter::core::backend::{Backend as BackendTrait, DeviceTensor, KernelTiming, Mode};
use sinter::core::compile::{CompileOptions, CompiledGraph, compile};
use sinter::core::passes::Precision;
use sinter::core::schedule::AllowTf32;
use sinter::workloads::{Scale, Workload};
use sinter::{Backend, HostTensor, IrGraph, Op};
use std::sync::Arc;
use std::time::Instant;

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

    /// A progress line for a model (nothing for a built-in workload).
    pub(super) fn step(&self, what: impl std::fmt::Display) {
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
    let per_run = back_to_back(c, &dev, 1)?.1;
    let n = ((0.010 / per_run.max(1e-9)) as usize).clamp(1, 10_000);
    let start = Instant::now();
    let mut ends: Vec<(f64, f64)> = Vec::new();
    while start.elapsed().as_secs_f64() < seconds || ends.len() < 3 {
        let s = back_to_back(c, &dev, n)?.1;
        ends.push((start.elapsed().as_secs_f64(), s * 1e3));
    }
    Ok(last_tenth_median(&ends))
}

/// `n` (at least one) `run_device` calls back to back on `dev`, then a wait for the last one's
/// output: seconds per call to issue them (the host's share) and until the last finished.
fn back_to_back(c: &CompiledGraph, dev: &[DeviceTensor], n: usize) -> Result<(f64, f64)> {
    let n = n.max(1);
    let t = Instant::now();
    let mut last = Vec::new();
    for _ in 0..n {
        last = c.run_device(dev)?;
    }
    let host = t.elapsed().as_secs_f64() / n as f64;
    if let Some(o) = last.first() {
        o.synchronize()?;
    }
    Ok((host, t.elapsed().as_secs_f64() / n as f64))
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

/// Host wall time per `run_device` call, µs: after 21 warm-up calls, 200 back to back on inputs
/// already on the device, then a wait for the last output; and the host's share (the time to
/// issue the calls).
fn call_time_us(c: &CompiledGraph, inputs: &[HostTensor]) -> Result<(f64, f64)> {
    let dev = inputs.iter().map(|t| c.upload(t)).collect::<Result<Vec<_>, _>>()?;
    back_to_back(c, &dev, 21)?;
    let (host, call) = back_to_back(c, &dev, 200)?;
    Ok((call * 1e6, host * 1e6))
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
