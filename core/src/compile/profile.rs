//! [`CompiledGraph::profile`]: a profile of a compiled graph (kernels, compile phases, fusion
//! decisions, device timings; fallback segments of a partitioned graph as CPU time).

use super::{CompileError, CompiledGraph, Exec};
use crate::error::Error;
use crate::tensor::HostTensor;

impl CompiledGraph {
    /// A [`KernelProfile`](crate::profile::KernelProfile) per compiled kernel, in program order,
    /// without device times: what the kernel IR says (ops, nodes, bytes, FLOPs, dtype, the
    /// contraction record of matmul/conv/attention kernels) and what the backend reports of its
    /// source (grid, block, source path, registers, spills, shared memory, strategy, and the
    /// compute type its products ran in, e.g. `tf32`). `sinter bench` rates these with its own
    /// timings ([`KernelProfile::rate`](crate::profile::KernelProfile::rate)).
    pub fn kernel_profiles(&self) -> Vec<crate::profile::KernelProfile> {
        use crate::profile::KernelProfile;
        let sources = self.sources();
        let mut out = Vec::new();
        for program in &self.programs() {
            for k in &program.kernels {
                let mut kp = KernelProfile::from_kernel(k);
                if let Some(s) = sources.iter().find(|s| s.name == k.name) {
                    kp = kp.grid(s.grid).block(s.block).source_path(format!("kernels/{}.{}", s.name, s.ext));
                    if let Some(r) = s.resources {
                        kp = kp
                            .registers(r.registers)
                            .spill_bytes(r.spill_bytes)
                            .shared_mem_bytes(r.shared_bytes as u64);
                    }
                    if let Some(st) = &s.strategy {
                        kp = kp.strategy(st.clone());
                    }
                    if let Some(c) = &s.compute {
                        kp = kp.compute_as(c.clone());
                    }
                }
                out.push(kp);
            }
        }
        out
    }

    /// Runs `iters` timed iterations (after one warm-up) and returns a [`crate::profile::Profile`]
    /// of this compiled graph: every kernel with its fused ops, grid, bytes, FLOPs and device
    /// times, the compile phases of every specialization, the fusion decisions, peak memory and
    /// the captured graph. A partitioned graph's kernels are every compiled segment's, and each
    /// fallback segment is a `cpu_fallback_<n>` kernel timed in host time. `device` carries the
    /// adapter name and the ceilings the roofline uses.
    /// Write it with [`crate::profile::Profile::write`], e.g.
    /// `compiled.profile(&inputs, 10, "my_model", device)?.write("run1")?`.
    pub fn profile(
        &self,
        inputs: &[HostTensor],
        iters: usize,
        name: &str,
        device: crate::profile::DeviceInfo,
    ) -> Result<crate::profile::Profile, CompileError> {
        use crate::profile::{
            FusionDecision as PFusion, KernelProfile, Mode as PMode, ProfileBuilder, Span, SpanCategory,
        };
        self.run(inputs)?; // warm-up; compiles for this signature if needed
        let pmode = if self.opts.fusion { PMode::Compiled } else { PMode::Eager };
        let mut b = ProfileBuilder::new(name, self.backend.name(), pmode, device);
        let mut t = b.now_ns();
        for ev in self.events() {
            // Each phase's start, for the phases that ran beside one (`BESIDE`).
            let mut starts: Vec<(&str, f64)> = Vec::new();
            for (phase, secs) in &ev.stats.phases {
                let beside = phase
                    .split_once(super::BESIDE)
                    .and_then(|(_, other)| starts.iter().rev().find(|(n, _)| Some(*n) == other.strip_suffix(')')))
                    .map(|&(_, start)| start);
                let category = match phase.as_str() {
                    "specialize" => SpanCategory::Capture,
                    "schedule" => SpanCategory::Fuse,
                    "backend_load" => SpanCategory::BackendCompile,
                    _ => SpanCategory::Pass,
                };
                let detail = if ev.stats.cache_hit { "program cache hit".to_string() } else { ev.reason.clone() };
                let start_ns = beside.unwrap_or(t);
                b.push_span(Span { name: phase.clone(), category, start_ns, dur_ns: secs * 1e9, detail });
                if beside.is_none() {
                    starts.push((phase.as_str(), t));
                    t += secs * 1e9;
                }
            }
        }
        let programs = self.programs();
        if self.lock().specs.is_empty() {
            return Err(Error::Input("nothing compiled".into()).into());
        }
        for kp in self.kernel_profiles() {
            b.add_kernel(kp);
        }
        for program in &programs {
            for d in &program.decisions {
                // The profile's `nodes` are captured-graph ids (what the viewer's graph shows), not
                // the post-decomposition ids the scheduler worked on.
                b.push_fusion(PFusion {
                    nodes: d.origins.clone(),
                    kernels: d.kernels.clone(),
                    fused: d.fused,
                    reason: d.reason.clone(),
                });
            }
        }
        // Fallback segments of a partitioned graph: one "kernel" each, timed as host time.
        {
            let st = self.lock();
            if let Some(Exec::Split(sp)) = st.specs.get(st.last).map(|s| &s.exec) {
                for seg in sp.segments.iter().filter(|s| !s.is_compiled()) {
                    b.add_kernel(
                        KernelProfile::new(seg.name.clone())
                            .ops(seg.ops.iter().cloned())
                            .nodes(seg.origins.iter().copied()),
                    );
                }
            }
        }
        b.set_graph(&self.graph);
        b.set_peak_memory(programs.iter().map(|p| p.memory.peak_bytes as u64).max().unwrap_or(0));
        let iters = iters.max(1);
        let start = b.now_ns();
        let (_, timings) = self.run_timed(inputs, iters)?;
        let per = (b.now_ns() - start) / iters as f64;
        for (i, run) in timings.iter().enumerate() {
            let submit = start + per * i as f64;
            b.push_batch(i as u32, submit, run.iter().map(|k| (k.kernel.as_str(), k.start_ns, k.dur_ns)))?;
        }
        b.set_iterations(iters as u32);
        Ok(b.finish()?)
    }
}
