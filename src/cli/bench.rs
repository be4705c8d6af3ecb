//! `sinter bench`: times the built-in workloads or an ONNX model (`--model`), eager and compiled,
//! on a backend and writes the JSON that `shared/bench/compare.py` reads (schema in BENCHMARKS.md).

use super::model::{ModelArgs, Progress};
use super::{ScaleArg, workload};
use anyhow::{Context, Result, bail};
use serde::Serialize;
use sinter::HostTensor;
use sinter::core::backend::Mode;
use sinter::core::passes::Precision;
use sinter::core::schedule::AllowTf32;
use sinter::workloads::{Scale, Workload};
use std::path::PathBuf;

mod measure;
use measure::sustained_ms;
pub use measure::{Subject, compile_for_measurement, for_measurement, make_backend, measure, median, run_span_ns};

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
