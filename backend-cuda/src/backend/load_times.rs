//! Where a CUDA load's time goes (`SINTER_LOG=compile`): the parts of a default-mode load and the
//! slowest NVRTC units of its parallel batch.

use super::BackendError;
use crate::nvrtc;

/// Where a default-mode load's time went, for `SINTER_LOG=compile`.
#[derive(Default)]
pub(super) struct LoadTimes {
    /// Validating the program, binding the context, creating the stream.
    pub(super) setup_s: f64,
    /// Allocating and zeroing memory, uploading constants not uploaded before.
    pub(super) memory_s: f64,
    /// Of `memory_s`: getting the constants onto the device (uploads, or the compiled graph's
    /// copies from an earlier load), their count and bytes.
    pub(super) constants_s: f64,
    pub(super) constants: usize,
    pub(super) constant_bytes: u64,
    /// Rendering every own kernel and library epilogue.
    pub(super) render_s: f64,
    /// The parallel NVRTC batch (wall time), its program count and cubin cache hits.
    pub(super) nvrtc_s: f64,
    pub(super) programs: usize,
    pub(super) hits: usize,
    /// Programs of the batch that were compiled ahead of time (`aot::hits` while it ran): no
    /// NVRTC, not in `hits`.
    pub(super) aot: usize,
    /// Whether NVRTC could use its own cache (the CUDA driver's, across processes): its compiles
    /// of sources it saw before are then 4-16x faster than cold ones (session 27).
    pub(super) nvrtc_cache: bool,
    /// Compiles of the batch that worker processes answered (`nvrtc::worker_compiles` while it
    /// ran; a batch of one job compiles in-process).
    pub(super) in_workers: usize,
    /// The slowest programs of the batch: (seconds NVRTC took, name).
    pub(super) slowest: Vec<(f64, String)>,
    /// PTX modules of the load (`render::ptx`, after grouping): no NVRTC; the driver's JIT
    /// assembles them on their own threads beside the NVRTC batch, in `ptx_jit_s` (wall time).
    pub(super) ptx: usize,
    pub(super) ptx_jit_s: f64,
    /// Loading own kernels' modules (and their scratch; the PTX modules' JIT).
    pub(super) module_s: f64,
    /// Building library steps (plans, heuristics, workspaces, epilogue modules) and their count.
    pub(super) library_s: f64,
    pub(super) library_steps: usize,
    /// Of `library_s`: building the plans (heuristics, operation graphs, execution plans).
    pub(super) plan_s: f64,
    /// Building the executable from the loaded kernels.
    pub(super) executable_s: f64,
    /// The whole load: what the parts above leave is listed as `other`.
    pub(super) total_s: f64,
}

impl LoadTimes {
    /// Records the parallel batch of `sources` that started at `t0` (when worker processes had
    /// answered `workers_before` compiles and `aot::hits` was `aot_before`) with its `results`.
    pub(super) fn nvrtc(
        &mut self,
        (t0, workers_before, aot_before): (std::time::Instant, usize, usize),
        sources: &[(&str, &str)],
        results: &[Result<nvrtc::Cubin, BackendError>],
    ) {
        self.nvrtc_s = t0.elapsed().as_secs_f64();
        self.in_workers = nvrtc::worker_compiles().saturating_sub(workers_before);
        self.programs = sources.iter().filter(|(_, src)| !crate::render::ptx::is_ptx(src)).count();
        let ok: Vec<(f64, String)> = results
            .iter()
            .zip(sources)
            .filter(|(_, (_, src))| !crate::render::ptx::is_ptx(src))
            .filter_map(|(r, (n, _))| r.as_ref().ok().map(|c| (c.seconds, n.to_string())))
            .collect();
        // A kernel compiled ahead of time comes back as a cache hit would (0 s).
        self.aot = crate::aot::hits().saturating_sub(aot_before);
        self.hits = ok.iter().filter(|(s, _)| *s == 0.0).count().saturating_sub(self.aot);
        // Sources compiled as one translation unit share its time: one entry per unit, named by
        // its first source and how many it held.
        let mut units: Vec<(f64, String, usize)> = Vec::new();
        for (s, n) in ok.into_iter().filter(|(s, _)| *s > 0.0) {
            match units.iter_mut().find(|u| u.0 == s) {
                Some(u) => u.2 += 1,
                None => units.push((s, n, 1)),
            }
        }
        units.sort_by(|a, b| b.0.total_cmp(&a.0));
        self.slowest = units
            .into_iter()
            .take(3)
            .map(|(s, n, k)| (s, if k > 1 { format!("{n} (+{} in its unit)", k - 1) } else { n }))
            .collect();
    }

    pub(super) fn log(&self, kernels: usize) {
        let slow: Vec<String> = self.slowest.iter().map(|(s, n)| format!("{n} {s:.3}")).collect();
        tracing::info!(
            target: "sinter::compile",
            "cuda load of {kernels} kernels in {:.3} s: setup {:.3} s; memory {:.3} s (constants: {} of {:.1} MB in {:.3} s); render {:.3} s; \
             NVRTC {:.3} s for {} programs ({} from sinter's cubin cache, aot {}, NVRTC's own cache {}, {} compiles in worker processes; slowest: {}); \
             {} PTX modules JIT-compiled beside it in {:.3} s; own modules {:.3} s; {} library steps {:.3} s (plans {:.3} s); executable {:.3} s; other {:.3} s",
            self.total_s,
            self.setup_s,
            self.memory_s,
            self.constants,
            self.constant_bytes as f64 / 1e6,
            self.constants_s,
            self.render_s,
            self.nvrtc_s,
            self.programs,
            self.hits,
            self.aot,
            if self.nvrtc_cache { "on" } else { "off" },
            self.in_workers,
            slow.join(", "),
            self.ptx,
            self.ptx_jit_s,
            self.module_s,
            self.library_steps,
            self.library_s,
            self.plan_s,
            self.executable_s,
            self.other_s()
        );
    }

    /// The load's time outside the listed parts (the tuning decisions, bookkeeping).
    fn other_s(&self) -> f64 {
        let parts = self.setup_s
            + self.memory_s
            + self.render_s
            + self.nvrtc_s
            + self.module_s
            + self.library_s
            + self.executable_s;
        (self.total_s - parts).max(0.0)
    }
}
