//! Debug artifacts of one compilation (`SINTER_DEBUG`, `CompileOptions::debug_dir`).
//!
//! Every compilation writes `graph.txt`, `graph.json`, `passes/NN_<pass>.txt`,
//! `ir_pre_fusion.txt`, `ir_post_fusion.txt`, `fusion.json`, `graph_breaks.json` (an empty list
//! when the whole graph runs on the backend) and `kernels/<name>.<ext>`; an unpartitioned one
//! also `program.json`, a partitioned one `segments/<NN>_<name>.json` (each compiled segment's
//! program) and `segments/<NN>_cpu_fallback_<n>.txt` (each fallback segment's graph).

use super::CompileError;
use crate::backend::KernelSource;
use crate::ir::Graph as IrGraph;
use crate::kernel::{FusionDecision, Program};
use crate::partition::GraphBreak;
use std::path::Path;

/// Writes `text` to `dir/rel`, creating folders.
fn write(dir: &Path, rel: &str, text: &str) -> Result<(), CompileError> {
    let err =
        |p: &Path, e: std::io::Error| CompileError::Artifacts { path: p.display().to_string(), msg: e.to_string() };
    let p = dir.join(rel);
    if let Some(parent) = p.parent() {
        std::fs::create_dir_all(parent).map_err(|e| err(parent, e))?;
    }
    std::fs::write(&p, text).map_err(|e| err(&p, e))
}

/// What every compilation writes: the captured graph, the passes, the post-fusion IR, the fusion
/// decisions and the kernel sources.
pub(super) fn write_common(
    dir: &Path,
    captured: &IrGraph,
    post_fusion: &str,
    decisions: &[&FusionDecision],
    sources: &[KernelSource],
    extra: &[(String, String)],
) -> Result<(), CompileError> {
    write(dir, "graph.txt", &crate::text::print(captured))?;
    write(dir, "graph.json", &serde_json::to_string(captured).unwrap_or_default())?;
    for (rel, text) in extra {
        write(dir, rel, text)?;
    }
    write(dir, "ir_post_fusion.txt", post_fusion)?;
    write(dir, "fusion.json", &serde_json::to_string_pretty(decisions).unwrap_or_default())?;
    for s in sources {
        write(dir, &format!("kernels/{}.{}", s.name, s.ext), &s.source)?;
    }
    Ok(())
}

/// Writes the debug artifacts of one compilation into `dir`.
pub fn write_artifacts(
    dir: &Path,
    captured: &IrGraph,
    program: &Program,
    sources: &[KernelSource],
    extra: &[(String, String)],
) -> Result<(), CompileError> {
    let decisions: Vec<&FusionDecision> = program.decisions.iter().collect();
    let post = crate::kernel::print::print_program(program);
    write_common(dir, captured, &post, &decisions, sources, extra)?;
    write(dir, "program.json", &serde_json::to_string(program).unwrap_or_default())
}

/// Writes `segments/<rel>`.
pub(super) fn write_segment(dir: &Path, rel: &str, text: &str) -> Result<(), CompileError> {
    write(dir, &format!("segments/{rel}"), text)
}

/// Writes `graph_breaks.json`: the list of [`GraphBreak`]s (empty when there are none).
pub(super) fn write_breaks(dir: &Path, breaks: &[GraphBreak]) -> Result<(), CompileError> {
    write(dir, "graph_breaks.json", &serde_json::to_string_pretty(breaks).unwrap_or_default())
}
