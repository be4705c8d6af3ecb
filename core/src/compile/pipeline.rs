//! The pipeline from a signature to a program, and the program cache's side of it: `lower`
//! (re-type, then the named passes), `schedule_program` (fusion for the backend), `load_program`
//! (the backend's render and device compile), and the cache key, load and store of a program.
//! The driver in `mod.rs` decides when these run (guards, dynamic attempts, graph breaks).

use super::cache::{self, cache_store};
use super::{BESIDE, CompileError, CompileStats, CompiledGraph, Signature, retype};
use crate::backend::{BackendError, Executable, LoadOptions};
use crate::error::Error;
use crate::ir::{Graph as IrGraph, Op};
use crate::kernel::Program;
use crate::schedule::{ScheduleOptions, schedule};
use std::sync::Arc;
use std::time::Instant;

impl CompiledGraph {
    /// Adds the text of `g` to the debug artifacts as `name`, only when they are written
    /// ([`super::CompileOptions::debug_dir`]): printing digests every new constant, and autocast's
    /// folded weights are new constants at every lowering (ViT-B/16 at bf16: 172 MB, twice more in
    /// a dynamic attempt).
    pub(super) fn keep_text(&self, artifacts: &mut Vec<(String, String)>, name: impl Into<String>, g: &IrGraph) {
        if self.opts.debug_dir.is_some() {
            artifacts.push((name.into(), crate::text::print(g)));
        }
    }

    /// Re-types the captured graph for `sig` and runs the pass pipeline on it (`dynamic`: the
    /// pipeline of a dynamic compile, [`crate::passes::pipeline_for_dynamic`]), the text after
    /// each pass kept for the debug artifacts ([`CompiledGraph::keep_text`]).
    pub(super) fn lower(
        &self,
        sig: &Signature,
        stats: &mut CompileStats,
        artifacts: &mut Vec<(String, String)>,
        dynamic: bool,
    ) -> Result<IrGraph, CompileError> {
        let t = Instant::now();
        let mut prev = retype(&self.graph, sig)?;
        stats.phases.push(("specialize".into(), t.elapsed().as_secs_f64()));
        let passes = if dynamic {
            crate::passes::pipeline_for_dynamic(self.opts.precision)
        } else {
            crate::passes::pipeline_for(self.opts.precision)
        };
        for (k, pass) in passes.iter().enumerate() {
            let t = Instant::now();
            let next = (pass.run)(&prev).map_err(|e| match e {
                Error::Verify(v) => Error::Verify(v.into_iter().map(|m| format!("after {}: {m}", pass.name)).collect()),
                other => other,
            })?;
            stats.phases.push((pass.name.to_string(), t.elapsed().as_secs_f64()));
            self.keep_text(artifacts, format!("passes/{:02}_{}.txt", k + 1, pass.name), &next);
            prev = next;
        }
        Ok(prev)
    }

    /// Schedules a lowered graph for the backend (one `schedule` phase per call); `outer_batch`
    /// for a dynamic compile ([`ScheduleOptions::outer_batch`]).
    pub(super) fn schedule_program(
        &self,
        g: &IrGraph,
        stats: &mut CompileStats,
        outer_batch: bool,
    ) -> Result<Program, CompileError> {
        let t = Instant::now();
        let sched = ScheduleOptions {
            fusion: self.opts.fusion,
            cost_model: self.backend.cost_model(),
            tf32: self.opts.tf32,
            outer_batch,
            ..ScheduleOptions::default()
        };
        let program = schedule(g, self.backend.caps(), &sched)?;
        stats.phases.push(("schedule".into(), t.elapsed().as_secs_f64()));
        for k in &program.kernels {
            let body = match &k.body {
                crate::kernel::KernelBody::Pointwise { numel, .. } => format!("pointwise over {numel}"),
                crate::kernel::KernelBody::Reduce(r) => {
                    format!("reduce {} rows x {} ({:?})", r.rows, r.len, r.strategy)
                }
                crate::kernel::KernelBody::Matmul(m) => format!("matmul {}x{}x{}x{}", m.batch, m.m, m.n, m.k),
                crate::kernel::KernelBody::Attention(a) => {
                    format!("attention {}x{}x{}x{}x{}x{}", a.batch, a.heads, a.m, a.kv, a.d, a.dv)
                }
            };
            tracing::debug!(target: "sinter::schedule", "{}: {body}, ops {:?}, {} args", k.name, k.ops, k.args.len());
        }
        for d in &program.decisions {
            tracing::debug!(target: "sinter::fusion", "{} {:?}: {}", if d.fused { "fused" } else { "refused" }, d.nodes, d.reason);
        }
        Ok(program)
    }

    /// Loads a program on the backend (one `backend_load` phase per call).
    pub(super) fn load_program(
        &self,
        program: &Program,
        stats: &mut CompileStats,
    ) -> Result<Box<dyn Executable>, BackendError> {
        let t = Instant::now();
        let load = LoadOptions {
            mode: self.opts.mode,
            cache_dir: self.opts.cache_dir.clone(),
            constants: self.constants.clone(),
            bypass_compiler_caches: self.opts.bypass_compiler_caches,
        };
        let exe = self.backend.load_with(program, &load);
        stats.phases.push(("backend_load".into(), t.elapsed().as_secs_f64()));
        exe
    }
    /// The captured graph's large constants by digest, gathered at the first use.
    pub(super) fn graph_constants(&self) -> &cache::GraphConstants {
        self.graph_constants.get_or_init(|| cache::GraphConstants::of(&self.graph))
    }

    /// Loads `program` ([`Self::load_program`]) and stores it in the program cache under `key`
    /// (when there is a cache folder) at the same time, on a thread of its own: the store (the
    /// program's JSON and its constants' files: 0.05-0.06 s of a ViT-B/16 or GPT-2 cold compile on
    /// an H200 host, session 28) runs beside the backend's compile instead of after it. A program
    /// the backend does not load is not kept (the entry written is removed). The store is the
    /// `program_cache_store (beside backend_load)` phase ([`BESIDE`]); its failure is logged, never
    /// an error.
    pub(super) fn load_and_store(
        &self,
        key: &str,
        program: &Program,
        stats: &mut CompileStats,
    ) -> Result<Box<dyn Executable>, BackendError> {
        let Some(d) = self.opts.cache_dir.as_deref() else { return self.load_program(program, stats) };
        let store = || {
            let t = Instant::now();
            if let Err(e) = cache_store(d, key, program, self.graph_constants()) {
                tracing::warn!(target: "sinter::cache", "could not store program {key}: {e}");
            }
            t.elapsed().as_secs_f64()
        };
        let (exe, stored_s) = std::thread::scope(|s| {
            let storing = std::thread::Builder::new().name("sinter-cache-store".into()).spawn_scoped(s, store);
            let exe = self.load_program(program, stats);
            // A thread that cannot start leaves the store to this one, after the load.
            let stored_s = match storing {
                Ok(h) => h.join().unwrap_or(0.0),
                Err(_) => store(),
            };
            (exe, stored_s)
        });
        stats.phases.push((format!("program_cache_store {BESIDE}backend_load)"), stored_s));
        if exe.is_err() {
            let _ = std::fs::remove_file(super::cache::cache_path(d, key));
        }
        exe
    }

    /// The program cache key of `sig`; `extra` tells programs compiled for different purposes
    /// apart (a dynamic program and one for exactly `sig`).
    pub(super) fn cache_key(&self, sig: &Signature, extra: &str) -> String {
        // Every constant's digest at once, in parallel: the text below summarizes constants by
        // digest, and their bytes are hashed after it.
        let constants: Vec<&Arc<crate::tensor::HostTensor>> =
            self.graph.nodes.iter().filter_map(|n| if let Op::Constant(t) = &n.op { Some(t) } else { None }).collect();
        crate::digest::digest_all(&constants);
        let mut h = blake3::Hasher::new();
        h.update(env!("CARGO_PKG_VERSION").as_bytes());
        // The scheduler's and the passes' own sources (core/build.rs): a changed compiler under
        // the same version never loads an older build's program.
        h.update(env!("SINTER_CORE_SOURCE_HASH").as_bytes());
        h.update(crate::text::print(&self.graph).as_bytes());
        // Constants are printed as summaries; hash their bytes too.
        for n in &self.graph.nodes {
            if let Op::Constant(t) = &n.op {
                h.update(&crate::digest::digest(t));
            }
        }
        h.update(serde_json::to_string(sig).unwrap_or_default().as_bytes());
        h.update(extra.as_bytes());
        h.update(self.backend.name().as_bytes());
        h.update(serde_json::to_string(self.backend.caps()).unwrap_or_default().as_bytes());
        h.update(
            format!(
                "{:?} fusion={} precision={} graph_breaks={} tf32={}",
                self.opts.mode, self.opts.fusion, self.opts.precision, self.opts.graph_breaks, self.opts.tf32
            )
            .as_bytes(),
        );
        // The cost model's settings (thresholds, switches such as SINTER_FUSE_ATTENTION) decide
        // the program as much as the options do.
        h.update(format!("{:?}", self.backend.cost_model()).as_bytes());
        h.finalize().to_hex()[..32].to_string()
    }
}
