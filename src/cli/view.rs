//! `sinter view DIR`: prints the folder's one-paragraph summary, then opens it in the desktop
//! viewer (timeline, fusion diagram, roofline, pass list).

use anyhow::{Context, Result};
use sinter_viewer::{Artifacts, ViewerError};
use std::path::PathBuf;

/// Arguments of `sinter view`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The artifact folder (written by `sinter profile --out DIR`).
    pub dir: PathBuf,
    /// Print the summary and the kernel table, and open no window.
    #[arg(long)]
    pub summary: bool,
    /// Write a synthetic demo folder into DIR first (no GPU needed), to try the viewer.
    #[arg(long)]
    pub demo: bool,
}

/// Loads the folder (reporting a missing folder or an unknown schema version before any window
/// opens), prints the summary, then shows the viewer.
pub fn run(args: Args) -> Result<()> {
    if args.demo {
        sinter_viewer::demo_artifacts(&args.dir)
            .with_context(|| format!("writing the demo folder {}", args.dir.display()))?;
    }
    let artifacts = Artifacts::load(&args.dir)?;
    print!("{}", summary_text(&artifacts));
    if args.summary {
        return Ok(());
    }
    match sinter_viewer::show(artifacts) {
        Err(e @ ViewerError::Window(_)) => Err(anyhow::anyhow!(
            "{e}\nThe summary above is the text view; `sinter view --summary {}` prints only that.",
            args.dir.display()
        )),
        other => Ok(other?),
    }
}

/// The summary paragraph and a kernel table, largest first.
pub fn summary_text(a: &Artifacts) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    for run in a.runs() {
        let p = &run.profile;
        let _ = writeln!(
            s,
            "{} ({} on {}, {} run, {} iterations)",
            p.workload, p.backend, p.device.name, p.mode, p.iterations
        );
        let _ = writeln!(s, "{}", run.analysis.summary(p));
        let _ = writeln!(
            s,
            "  {:<28} {:>7} {:>12} {:>9} {:>9} {:>7}  {:<16} ops",
            "kernel", "share", "median", "GB/s", "TFLOP/s", "%peak", "verdict"
        );
        for k in run.kernels_by_time() {
            let (kp, an) = (&p.kernels[k], &run.analysis.kernels[k]);
            let num = |v: Option<f64>| v.map_or_else(|| "-".to_string(), sinter_viewer::app::fmt_sig);
            // Contractions: the share of the measured peak of their compute type (`sinter calibrate`).
            let peak = kp
                .contraction
                .as_ref()
                .and_then(|c| c.peak_share)
                .map_or_else(|| "-".to_string(), |f| format!("{:.1}%", f * 100.0));
            let _ = writeln!(
                s,
                "  {:<28} {:>6.1}% {:>12} {:>9} {:>9} {:>7}  {:<16} {}",
                kp.name,
                an.share * 100.0,
                an.time_ns.map_or_else(|| "-".to_string(), sinter_viewer::profile::fmt_ns),
                num(an.achieved_gbps),
                num(an.achieved_tflops),
                peak,
                an.verdict.label(),
                kp.ops.join(", ")
            );
        }
        s.push('\n');
    }
    // Files refused or unreadable (outside the folder, not regular, over the size limit).
    for w in &a.warnings {
        let _ = writeln!(s, "note: {w}");
    }
    s
}
