//! `sinter demo`: the main job. First every workload at reduced size on the CPU reference
//! interpreter, checked against the workload's independent f64 reference, before and after the
//! pass pipeline; then every workload compiled on the best backend present (a GPU through WGSL,
//! else lavapipe, else the host kernel interpreter), eager (one kernel per op) and compiled
//! (fused), each checked against the reference, with kernel counts, device time, achieved GB/s or
//! TFLOP/s and the share of the measured copy bandwidth.

use anyhow::{Result, bail};
use sinter::workloads::{self, Scale};
use std::io::Write;
use std::time::Instant;

/// Arguments of `sinter demo`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Seed of the random inputs.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Only these workloads (comma-separated names).
    #[arg(long, value_delimiter = ',')]
    pub only: Vec<String>,
    /// Backend for the compiled runs: auto, cuda, wgsl, interp.
    #[arg(long, default_value = "auto")]
    pub backend: String,
    /// Size of the compiled runs (`full` needs a GPU; the reference check is skipped there).
    #[arg(long, value_enum, default_value = "reduced")]
    pub scale: super::ScaleArg,
    /// Timed iterations of the compiled runs.
    #[arg(long, default_value_t = 5)]
    pub iters: usize,
    /// Only the CPU reference part.
    #[arg(long)]
    pub cpu_only: bool,
}

/// Runs the workloads and prints the table; fails if any workload fails.
pub fn run(args: Args) -> Result<()> {
    let mut list = Vec::new();
    for name in &args.only {
        list.push(super::workload(name)?);
    }
    if list.is_empty() {
        list = workloads::all();
    }
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "{:<30} {:>22} {:>10} {:>10} {:>9}  result",
        "workload (reduced)", "nodes capt/dec/opt", "ratio cap", "ratio opt", "time"
    )?;
    let mut failed = Vec::new();
    for w in &list {
        let t0 = Instant::now();
        let r = w.check_cpu(Scale::Reduced, args.seed);
        let secs = t0.elapsed().as_secs_f64();
        match r {
            Ok(c) => {
                let nodes = format!("{}/{}/{}", c.nodes_captured, c.nodes_decomposed, c.nodes_optimized);
                let verdict = if c.passed() { "PASS" } else { "FAIL" };
                writeln!(
                    out,
                    "{:<30} {:>22} {:>10.3e} {:>10.3e} {:>8.2}s  {verdict}",
                    w.name, nodes, c.ratio_captured, c.ratio_optimized, secs
                )?;
                if !c.passed() {
                    failed.push(w.name);
                }
            }
            Err(e) => {
                writeln!(out, "{:<30} FAIL: {e}", w.name)?;
                failed.push(w.name);
            }
        }
        out.flush()?;
    }
    writeln!(out, "ratio: worst |got - want| / (atol + rtol*|want|) against the f64 reference; PASS when <= 1")?;
    if !failed.is_empty() {
        bail!("{} of {} workloads failed: {}", failed.len(), list.len(), failed.join(", "));
    }
    if args.cpu_only {
        return Ok(());
    }
    writeln!(out, "\ncompiled, eager vs fused:")?;
    drop(out);
    let reduced = args.scale == super::ScaleArg::Reduced;
    super::bench::run(super::bench::Args {
        workload: list
            .iter()
            .filter(|w| reduced || !w.name.starts_with("resnet"))
            .map(|w| w.name.to_string())
            .collect(),
        model: super::model::ModelArgs::default(),
        precision: sinter::core::passes::Precision::F32,
        tf32: sinter::core::schedule::AllowTf32::default(),
        backend: args.backend,
        mode: "default".into(),
        eager: true,
        scale: args.scale,
        iters: args.iters,
        warmup: 1,
        json: None,
        check: reduced,
        no_calibrate: false,
        sustain: 0.0,
        reuse_device: false,
        cache: super::CacheArgs::default(),
    })
}
