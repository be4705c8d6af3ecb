//! `sinter explain`: the captured graph of a workload in text form, then the graph after each pass
//! of the pipeline.

use super::ScaleArg;
use anyhow::{Context, Result};
use sinter::{passes, text, workloads::Scale};
use std::io::Write;

/// Arguments of `sinter explain`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The built-in workload (e.g. softmax_8192x8192_f32).
    #[arg(long)]
    pub workload: String,
    /// Build at the benchmark size or the reduced one.
    #[arg(long, value_enum, default_value = "full")]
    pub scale: ScaleArg,
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
    let mut prev = g;
    for (name, step) in steps {
        if step == prev {
            writeln!(out, "== after {name}: unchanged")?;
        } else {
            writeln!(out, "== after {name} ({} nodes)", step.nodes.len())?;
            out.write_all(text::print(&step).as_bytes())?;
        }
        prev = step;
    }
    out.flush()?;
    Ok(())
}
