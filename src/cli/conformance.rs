//! `sinter conformance`: runs the ONNX backend conformance suite (a folder of cases, or a suite
//! root holding several kinds) on a backend, prints pass/fail/unsupported/error counts per op
//! and overall, writes a JSON report, and optionally checks a committed floor of passes.

use anyhow::{Context, Result, bail};
use indicatif::{ProgressBar, ProgressStyle};
use sinter_onnx::conformance::{self, Backend, Options, Report, Status};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

/// Arguments of `sinter conformance`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// A folder of cases (e.g. `suite/node`) or a suite root holding several kinds.
    pub dir: PathBuf,
    /// The backend that runs the graphs.
    #[arg(long, default_value = "cpu")]
    pub backend: String,
    /// Write the JSON report here.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Only cases whose name (or kind/name) contains this substring.
    #[arg(long)]
    pub filter: Option<String>,
    /// Per-case time limit in seconds, in (0, 86400] (a case over it is abandoned and counted as a
    /// timeout).
    #[arg(long, default_value_t = 20.0)]
    pub timeout: f64,
    /// Cases run in parallel (default: the available cores).
    #[arg(long)]
    pub jobs: Option<usize>,
    /// A floor file (`{"<backend>": {"<kind>": min passes, ...}}`): exit non-zero when a kind
    /// passes fewer cases than its floor.
    #[arg(long)]
    pub floor: Option<PathBuf>,
    /// Also list every unsupported case (failures, errors and timeouts are always listed).
    #[arg(long, short)]
    pub verbose: bool,
    /// The on-disk cache.
    #[command(flatten)]
    pub cache: super::CacheArgs,
}

/// The runner for `name`: `cpu` (the CPU reference interpreter, the ground truth), or any backend
/// of the registry (`auto`, `cuda`, `wgsl`, `interp`), compiled fused (programs cached in
/// `cache`, when given) and run once per case.
pub fn backend(name: &str, cache: Option<PathBuf>) -> Result<Backend> {
    if name == "cpu" {
        return Ok(Arc::new(sinter::cpu::run));
    }
    let kind = sinter::Backend::from_name(name)
        .with_context(|| format!("unknown backend {name:?}; available: cpu, {}", sinter::Backend::names()))?;
    let sel = sinter::runtime::open(kind).with_context(|| format!("opening the {name} backend"))?;
    if kind == sinter::Backend::Auto {
        eprintln!("# {}", sel.why);
    }
    let b = sel.backend;
    Ok(Arc::new(move |g: &sinter::IrGraph, inputs: &[sinter::HostTensor]| {
        compiled_run(b.clone(), g, inputs, cache.clone())
    }))
}

/// Compiles `g` (programs cached in `cache`, no artifacts) and runs it once; a backend's refusal
/// (a dtype or limit it lacks) becomes [`sinter::Error::Unsupported`] so the runner counts it as
/// unsupported.
fn compiled_run(
    b: Arc<dyn sinter::core::backend::Backend>,
    g: &sinter::IrGraph,
    inputs: &[sinter::HostTensor],
    cache: Option<PathBuf>,
) -> Result<Vec<sinter::HostTensor>, sinter::Error> {
    use sinter::core::backend::BackendError;
    use sinter::core::compile::{CompileError, CompileOptions, compile};
    let opts = CompileOptions { cache_dir: cache, debug_dir: None, ..CompileOptions::default() };
    let run = || -> Result<Vec<sinter::HostTensor>, CompileError> { compile(g, b.clone(), opts.clone())?.run(inputs) };
    run().map_err(|e| match e {
        CompileError::Graph(e) => e,
        CompileError::Backend(BackendError::Unsupported { backend, what }) => {
            sinter::Error::Unsupported(format!("{backend} backend: {what}"))
        }
        other => sinter::Error::Eval { node: "compiled program".into(), msg: other.to_string() },
    })
}

/// Runs the suite.
pub fn run(args: Args) -> Result<()> {
    let timeout = super::seconds_arg("timeout", args.timeout)?;
    let be = backend(&args.backend, args.cache.dir())?;
    let cases = conformance::discover(&args.dir)?;
    let bar = ProgressBar::new(cases.len() as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} {elapsed_precise} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let pb = bar.clone();
    let passed = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let p2 = passed.clone();
    let mut opts = Options {
        filter: args.filter.clone(),
        timeout,
        progress: Some(Arc::new(move |r, done, total| {
            if r.status == Status::Pass {
                p2.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            pb.set_length(total as u64);
            pb.set_position(done as u64);
            pb.set_message(format!("{} passed | {}", p2.load(std::sync::atomic::Ordering::Relaxed), r.name));
        })),
        ..Options::default()
    };
    if let Some(j) = args.jobs {
        opts.jobs = j.max(1);
    }
    let t0 = Instant::now();
    let report = conformance::run(&args.dir, be, &opts)?;
    bar.finish_and_clear();
    let secs = t0.elapsed().as_secs_f64();
    print_report(&report, &args, secs)?;
    if let Some(p) = &args.json {
        std::fs::write(p, report.to_json()).with_context(|| format!("writing {}", p.display()))?;
    }
    if let Some(f) = &args.floor {
        check_floor(&report, f, &args.backend)?;
    }
    Ok(())
}

fn print_report(r: &Report, args: &Args, secs: f64) -> Result<()> {
    let mut w = std::io::stdout().lock();
    writeln!(w, "{:<36} {:>6} {:>6} {:>6} {:>6} {:>6} {:>6}", "op", "pass", "fail", "unsup", "error", "t/o", "total")?;
    for (op, s) in &r.ops {
        writeln!(
            w,
            "{:<36} {:>6} {:>6} {:>6} {:>6} {:>6} {:>6}",
            op, s.passed, s.failed, s.unsupported, s.errors, s.timeouts, s.total
        )?;
    }
    // Failures, errors and timeouts are always listed (with the max error); unsupported cases
    // only with --verbose.
    let listed: Vec<_> = r
        .cases
        .iter()
        .filter(|c| c.status != Status::Pass && (args.verbose || c.status != Status::Unsupported))
        .collect();
    if !listed.is_empty() {
        writeln!(w)?;
        for c in listed {
            let status = format!("{:?}", c.status).to_lowercase();
            writeln!(w, "{status:<11} {}/{}: {}", c.kind, c.name, c.detail.as_deref().unwrap_or(""))?;
        }
    }
    let mut unsup: BTreeMap<&str, usize> = BTreeMap::new();
    for c in &r.cases {
        if let Some(op) = &c.unsupported_op {
            *unsup.entry(op.as_str()).or_default() += 1;
        }
    }
    if !unsup.is_empty() {
        let mut v: Vec<(&str, usize)> = unsup.into_iter().collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        let list: Vec<String> = v.iter().map(|(o, n)| format!("{o} ({n})")).collect();
        writeln!(w, "\nunsupported: {}", list.join(", "))?;
    }
    writeln!(w)?;
    for (k, s) in &r.kinds {
        writeln!(w, "{k:<20} {s}")?;
    }
    writeln!(w, "{:<20} {} in {secs:.1} s on {}", "overall", r.summary, args.backend)?;
    Ok(())
}

fn check_floor(r: &Report, path: &PathBuf, backend: &str) -> Result<()> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let v: serde_json::Value = serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    let Some(floors) = v.get(backend).and_then(|b| b.as_object()) else {
        bail!("{} has no floor for backend {backend:?}", path.display());
    };
    let mut below = Vec::new();
    for (kind, min) in floors {
        let Some(min) = min.as_u64() else { continue };
        let got = r.kinds.get(kind).map_or(0, |s| s.passed) as u64;
        if got < min {
            below.push(format!("{kind}: {got} passed, floor {min}"));
        } else {
            println!("floor ok: {kind}: {got} passed >= {min}");
        }
    }
    if !below.is_empty() {
        bail!("below the committed conformance floor: {}", below.join("; "));
    }
    Ok(())
}
