//! The CUDA side of max-autotune: compiling the [`Tuning`]s of one kernel and timing them on the
//! device ([`TuneTarget`] for [`sinter_core::tune::autotune`]). Candidates run on the executable's
//! own stream over its own (random or zero-filled) buffers, before the run graph is captured.
//!
//! Compiling is NVRTC's work and the cold cost of max-autotune (issue 13), so it is done in
//! parallel and up front: [`precompile`] renders the candidates of every kernel a load searches and
//! compiles them all in one [`crate::nvrtc::compile_parallel`] batch before the first search starts; each
//! search's [`TuneTarget::compile_batch`] then renders its candidates, takes their cubins from that
//! batch (compiling any it lacks, in parallel again), and loads them. Library candidates (cuBLASLt)
//! have nothing to compile and are built directly. The winners are those of compiling one by one:
//! the same sources give the same cubins.
//!
//! Each timed launch follows an L2 clear ([`L2Clear`], as Inductor's autotuner times with
//! `do_bench`), so candidates are ranked in the state `sinter bench` and the anchor measure: inputs
//! in DRAM and the L2 full of dirty lines. The two states rank kernels differently: session 13
//! measured the pointwise kernels at 89-96% of the copy ceiling warm and 80-87% after a clear.

use super::CudaBackend;
use super::exec::LoadedKernel;
use crate::device::{L2Clear, Stream, TimingEvents};
use crate::nvrtc::{Cubin, CubinCache};
use crate::render::{self, CudaCaps, Rendered, Tuning};
use sinter_core::backend::BackendError;
use sinter_core::kernel::Kernel;
use sinter_core::tune::TuneTarget;
use std::collections::HashMap;
use std::sync::Arc;

/// Launches before timing (module load, caches, clocks).
const WARMUP: usize = 2;
/// Timed launches; the median is the candidate's time.
const SAMPLES: usize = 5;

/// Cubins compiled ahead of the searches, by the hash of their source.
#[derive(Default)]
pub(crate) struct Precompiled {
    cubins: HashMap<blake3::Hash, Result<Cubin, BackendError>>,
}

impl Precompiled {
    /// Number of sources compiled.
    pub(crate) fn len(&self) -> usize {
        self.cubins.len()
    }

    fn get(&self, source: &str) -> Option<&Result<Cubin, BackendError>> {
        self.cubins.get(&blake3::hash(source.as_bytes()))
    }
}

/// The rendered tunings max-autotune times for `k`. In a program compiled for a dynamic batch
/// (`dynamic`) only those whose grid shrinks with the batch ([`render::shrinks_with_batch`]; the
/// default tuning as [`render::fixed_grid_default`] renders it): a persistent attention tile
/// would run the bound's work at every smaller batch.
pub(crate) fn candidates(k: &Kernel, caps: &CudaCaps, dynamic: bool) -> Vec<Tuning> {
    let mut out = render::candidates(k, caps);
    if dynamic {
        if let Some(fixed) = render::fixed_grid_default(k, caps) {
            for t in out.iter_mut().filter(|t| t.attn.is_none()) {
                t.attn = fixed.attn;
            }
        }
        out.retain(render::shrinks_with_batch);
    }
    out
}

/// Every distinct rendered candidate (entry name, source) of `kernels` (the tuner's candidates:
/// [`render::candidates`], narrowed for a dynamic batch), in kernel and candidate order: what
/// `precompile` compiles. Library candidates render nothing and are not listed.
pub fn candidate_sources(kernels: &[&Kernel], caps: &CudaCaps, dynamic: bool) -> Vec<(String, String)> {
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    for k in kernels {
        for t in candidates(k, caps, dynamic) {
            if let Ok(r) = render::render(k, caps, &t)
                && seen.insert(blake3::hash(r.source.as_bytes()))
            {
                out.push((r.name, r.source));
            }
        }
    }
    out
}

/// Compiles the rendered candidates of every kernel in `kernels` in one parallel batch (see the
/// module docs). Compile failures are kept (the search logs them per candidate), not returned.
pub(crate) fn precompile(
    backend: &CudaBackend,
    kernels: &[&Kernel],
    dynamic: bool,
    cubins: &CubinCache,
) -> Precompiled {
    let sources = candidate_sources(kernels, &backend.cuda_caps, dynamic);
    let refs: Vec<(&str, &str)> = sources.iter().map(|(n, s)| (n.as_str(), s.as_str())).collect();
    let t = std::time::Instant::now();
    let compiled = backend.compile_all(&refs, cubins);
    tracing::debug!(
        target: "sinter::autotune",
        "compiled {} candidate sources of {} kernels in {:.2} s",
        sources.len(),
        kernels.len(),
        t.elapsed().as_secs_f64()
    );
    Precompiled { cubins: sources.iter().map(|(_, s)| blake3::hash(s.as_bytes())).zip(compiled).collect() }
}

/// Compiles and times candidates of one kernel.
pub(crate) struct KernelTuner<'a> {
    backend: &'a CudaBackend,
    kernel: &'a Kernel,
    args: Vec<u64>,
    stream: &'a Arc<Stream>,
    events: TimingEvents,
    clear: Option<L2Clear>,
    cubins: &'a CubinCache,
    precompiled: &'a Precompiled,
}

impl<'a> KernelTuner<'a> {
    pub(crate) fn new(
        backend: &'a CudaBackend,
        kernel: &'a Kernel,
        args: Vec<u64>,
        stream: &'a Arc<Stream>,
        cubins: &'a CubinCache,
        precompiled: &'a Precompiled,
    ) -> Result<KernelTuner<'a>, BackendError> {
        let events = TimingEvents::new(backend.device(), SAMPLES)?;
        let clear = L2Clear::new(stream, backend.device().info().l2_bytes);
        Ok(KernelTuner { backend, kernel, args, stream, events, clear, cubins, precompiled })
    }
}

impl TuneTarget for KernelTuner<'_> {
    type Tuning = Tuning;
    type Loaded = LoadedKernel;

    fn compile(&mut self, t: &Tuning) -> Result<LoadedKernel, BackendError> {
        self.backend.build_kernel(self.kernel, t, &self.args, self.cubins, self.stream)
    }

    /// Renders every candidate, takes the cubins [`precompile`] made, compiles the rest in one
    /// parallel batch, then loads each (library candidates are built directly).
    fn compile_batch(&mut self, ts: &[Tuning]) -> Vec<Result<LoadedKernel, BackendError>> {
        let caps = &self.backend.cuda_caps;
        let rendered: Vec<Option<Result<Rendered, BackendError>>> = ts
            .iter()
            .map(|t| t.library.is_none().then(|| render::render(self.kernel, caps, t).map_err(BackendError::from)))
            .collect();
        let missing: Vec<(&str, &str)> = rendered
            .iter()
            .flatten()
            .flatten()
            .filter(|r| self.precompiled.get(&r.source).is_none())
            .map(|r| (r.name.as_str(), r.source.as_str()))
            .collect();
        let fresh: HashMap<blake3::Hash, Result<Cubin, BackendError>> = missing
            .iter()
            .map(|(_, s)| blake3::hash(s.as_bytes()))
            .zip(self.backend.compile_all(&missing, self.cubins))
            .collect();
        ts.iter()
            .zip(rendered)
            .map(|(t, r)| match r {
                None => self.compile(t),
                Some(Err(e)) => Err(e),
                Some(Ok(r)) => {
                    let cubin = self
                        .precompiled
                        .get(&r.source)
                        .or_else(|| fresh.get(&blake3::hash(r.source.as_bytes())))
                        .cloned()
                        .unwrap_or_else(|| Err(BackendError::Device(format!("{}: no compile result", r.name))))?;
                    self.backend.load_kernel(self.kernel, t, r, &cubin, &self.args, self.stream)
                }
            })
            .collect()
    }

    fn source<'b>(&self, l: &'b LoadedKernel) -> &'b str {
        &l.rendered.source
    }

    fn time(&mut self, l: &LoadedKernel) -> Result<f64, BackendError> {
        let cu = self.stream;
        for _ in 0..WARMUP {
            l.launch.launch(cu)?;
        }
        for i in 0..SAMPLES {
            if let Some(c) = &self.clear {
                c.queue(cu)?;
            }
            self.events.record(i, false, cu)?;
            l.launch.launch(cu)?;
            self.events.record(i, true, cu)?;
        }
        let mut ns = (0..SAMPLES)
            .map(|i| self.events.elapsed_ms(i, i, true).map(|ms| ms * 1e6))
            .collect::<Result<Vec<_>, _>>()?;
        ns.sort_by(f64::total_cmp);
        Ok(ns[SAMPLES / 2])
    }
}
