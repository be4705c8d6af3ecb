//! `sinter explain`: the captured graph of a workload in text form, then the graph after each pass
//! of the pipeline. With `--backend` or `--out` it also schedules and compiles the workload and
//! writes the debug artifacts (`graph.txt`, `ir_pre_fusion.txt`, `ir_post_fusion.txt`,
//! `kernels/*`, `fusion.json`), as `SINTER_DEBUG=dir` does.

use super::ScaleArg;
use anyhow::{Context, Result};
use sinter::core::compile::{CompileOptions, compile};
use sinter::{passes, text, workloads::Scale};
use std::io::Write;
use std::path::PathBuf;

/// Arguments of `sinter explain`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The built-in workload (e.g. softmax_8192x8192_f32).
    #[arg(long)]
    pub workload: String,
    /// Build at the benchmark size or the reduced one.
    #[arg(long, value_enum, default_value = "full")]
    pub scale: ScaleArg,
    /// Also compile for this backend (auto, cuda, wgsl, interp) and summarize the kernels.
    #[arg(long)]
    pub backend: Option<String>,
    /// Write the debug artifacts of the compilation here (implies `--backend auto` if none given).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Compile with fusion off (one kernel per primitive op).
    #[arg(long)]
    pub eager: bool,
    /// The on-disk cache.
    #[command(flatten)]
    pub cache: super::CacheArgs,
}

/// Prints the graphs.
pub fn run(args: Args) -> Result<()> {
    let w = super::workload(&args.workload)?;
    let scale = Scale::from(args.scale);
    let g = w.build(scale).with_context(|| format!("building {} ({})", w.name, scale.name()))?;
    let steps = passes::run_pipeline(&g).with_context(|| format!("running the passes on {}", w.name))?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "# {} ({} scale): {}", w.name, scale.name(), w.description)?;
    writeln!(out, "== captured ({} nodes)", g.nodes.len())?;
    out.write_all(text::print(&g).as_bytes())?;
    let mut prev = g.clone();
    for (name, step) in steps {
        if step == prev {
            writeln!(out, "== after {name}: unchanged")?;
        } else {
            writeln!(out, "== after {name} ({} nodes)", step.nodes.len())?;
            out.write_all(text::print(&step).as_bytes())?;
        }
        prev = step;
    }
    if args.backend.is_some() || args.out.is_some() {
        if let Some(dir) = &args.out {
            super::out_dir("out", dir)?;
        }
        let (backend, _) = super::bench::make_backend(args.backend.as_deref().unwrap_or("auto"), false)?;
        let opts = CompileOptions {
            fusion: !args.eager,
            debug_dir: args.out.clone(),
            cache_dir: args.cache.dir(),
            ..CompileOptions::default()
        };
        let c = compile(&g, backend.clone(), opts).with_context(|| format!("compiling {}", w.name))?;
        writeln!(out, "== compiled for {} ({})", backend.name(), backend.device_name())?;
        match c.program() {
            Some(p) => {
                let mb = |b: usize| b as f64 / 1e6;
                writeln!(
                    out,
                    "{} kernel(s); peak device memory {:.1} MB ({:.1} MB without buffer reuse)",
                    p.kernels.len(),
                    mb(p.memory.peak_bytes),
                    mb(p.memory.unplanned_bytes)
                )?;
                for s in c.sources() {
                    writeln!(out, "  {}", s.name)?;
                }
                // Contraction-level decisions (attention matches and refusals, convolution
                // lowerings, epilogues): the ones a user looks for first; fusion.json has all.
                let key = |r: &str| r.contains("attention") || r.starts_with("conv lowering") || r.contains("epilogue");
                let shown: Vec<_> = p.decisions.iter().filter(|d| key(&d.reason)).collect();
                if !shown.is_empty() {
                    writeln!(out, "fusion decisions ({} of {}; all in fusion.json):", shown.len(), p.decisions.len())?;
                }
                for d in shown {
                    let nodes: Vec<String> = d.nodes.iter().map(|n| format!("%{n}")).collect();
                    writeln!(out, "  {} [{}] -> {}", d.reason, nodes.join(", "), d.kernels.join(", "))?;
                }
            }
            None if !c.graph_breaks().is_empty() => {
                for p in c.programs() {
                    writeln!(out, "{} kernel(s) in a compiled segment", p.kernels.len())?;
                }
                for s in c.sources() {
                    writeln!(out, "  {}", s.name)?;
                }
            }
            None => writeln!(out, "(symbolic inputs: compiled at the first call)")?,
        }
        for line in super::graph_breaks(&c) {
            writeln!(out, "{line}")?;
        }
        if let Some(dir) = &args.out {
            writeln!(out, "artifacts written to {}", dir.display())?;
        }
    }
    out.flush()?;
    Ok(())
}
