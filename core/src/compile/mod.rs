//! The compile driver, what `torch.compile` is to a model: it takes a captured graph and a
//! backend and returns a [`CompiledGraph`] that
//!
//! * **guards** each call on the inputs' dtypes and shapes, reusing the specialization that
//!   matches and recompiling (bounded by [`CompileOptions::max_recompiles`], each reason logged on
//!   the `sinter::recompiles` target) when they change;
//! * runs the pipeline: re-type/specialize → named passes (decompose, …) → schedule (fusion) →
//!   backend load (render + device compile);
//! * keeps an **on-disk cache** of scheduled programs keyed by a stable hash of the graph, the
//!   input signature, the backend and its capabilities, the mode, the precision and the sinter version, so a
//!   second process skips passes, scheduling and rendering; an entry is stored with a checksum, and
//!   a corrupt one is detected, logged and rebuilt, never trusted;
//! * serves **other batch sizes without recompiling** ([`CompileOptions::dynamic`], `dynamic.rs`):
//!   a graph whose inputs share a symbolic outermost dimension (`batch`) is compiled once at a
//!   bound (the next power of two at or above the value seen, at least the option's minimum), and
//!   every value up to the bound runs that program with its launch extents instantiated
//!   ([`crate::kernel::dynamic`]); a larger value, or a program where the symbol reaches more than
//!   the outer extent, recompiles with the reason logged on `sinter::recompiles`;
//! * writes **debug artifacts** (`SINTER_DEBUG=dir` or [`CompileOptions::debug_dir`]): `graph.txt`,
//!   `graph.json`, `passes/NN_<pass>.txt`, `ir_pre_fusion.txt`, `ir_post_fusion.txt`,
//!   `program.json`, `fusion.json`, `graph_breaks.json` and `kernels/<name>.<ext>`;
//! * **breaks the graph** ([`CompileOptions::graph_breaks`], `crate::partition`) where the backend
//!   cannot run a node: those nodes run on the CPU reference, the rest is compiled, values move
//!   between the sides; each break is listed ([`CompiledGraph::graph_breaks`], the
//!   `sinter::graph_breaks` log target, `graph_breaks.json`). A partitioned graph is not stored in
//!   the program cache (it is re-partitioned and re-scheduled per process); a graph without breaks
//!   is cached as before.
//!
//! A [`CompiledGraph`] is `Send + Sync`: its specializations sit behind one lock, so a server can
//! share one compiled model between threads (runs are serialized, as on one stream). Inputs may
//! stay on the device ([`CompiledGraph::run_device`]); constants are uploaded once per compiled
//! graph and shared by every specialization ([`crate::backend::ConstantPool`]).

use crate::backend::{Backend, BackendError, ConstantPool, DeviceTensor, Executable, KernelSource, KernelTiming, Mode};
use crate::dtype::DType;
use crate::error::Error;
use crate::ir::Graph as IrGraph;
use crate::kernel::Program;
use crate::partition;
pub use crate::partition::GraphBreak;
use crate::passes::Precision;
use crate::schedule::AllowTf32;
use crate::tensor::HostTensor;
use crate::trace::AsGraph;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

/// Errors of the compile driver.
#[derive(Debug, thiserror::Error)]
pub enum CompileError {
    /// The graph or the inputs are wrong.
    #[error(transparent)]
    Graph(#[from] Error),
    /// The backend failed.
    #[error(transparent)]
    Backend(#[from] BackendError),
    /// The guard failed and the recompile limit was reached.
    #[error("recompile limit ({limit}) reached; last guard failure: {reason}")]
    RecompileLimit {
        /// The limit.
        limit: usize,
        /// Why the guard failed.
        reason: String,
    },
    /// Recording a profile failed.
    #[error(transparent)]
    Profile(#[from] crate::profile::ProfileError),
    /// Writing debug artifacts failed.
    #[error("writing artifacts to {path}: {msg}")]
    Artifacts {
        /// The path.
        path: String,
        /// The I/O error.
        msg: String,
    },
}

/// Options of [`compile`].
#[derive(Clone, Debug)]
pub struct CompileOptions {
    /// Compile mode.
    pub mode: Mode,
    /// Fusion on (compiled) or off (eager: one kernel per primitive op).
    pub fusion: bool,
    /// Specializations allowed after the first (Inductor uses 8).
    pub max_recompiles: usize,
    /// Program cache folder; `None` disables the disk cache.
    pub cache_dir: Option<PathBuf>,
    /// Where to write debug artifacts; `None` writes none.
    pub debug_dir: Option<PathBuf>,
    /// Mixed precision: f32 runs the graph as captured; bf16/f16 runs the `autocast` pass first
    /// (f32 matmuls, convolutions and attention in the low dtype, f32 accumulation and outputs).
    /// Part of the program cache key.
    pub precision: Precision,
    /// Graph breaks (default on): nodes the backend cannot run (a dtype it lacks, a kernel it
    /// refuses) run on the CPU reference and the rest is compiled ([`crate::partition`]); off, such
    /// a graph fails to compile with the backend's error. Part of the program cache key.
    pub graph_breaks: bool,
    /// Where f32 contractions may run in TF32 (PyTorch's `allow_tf32`: convolutions on,
    /// matmuls off by default; see [`AllowTf32`]). Part of the program cache key.
    pub tf32: AllowTf32,
    /// Dynamic outer extent (default `Some(8)`): when the graph's inputs share a symbolic
    /// outermost dimension and the backend [`Backend::serves_extents`], compile once at the next
    /// power of two `>=` max(value seen, this minimum) and serve every value up to it without
    /// recompiling (see `dynamic.rs`); `None`: one compile per value, as for any other shape.
    pub dynamic: Option<usize>,
    /// Keep the backend's compiler off caches of its own outside sinter's (see
    /// [`LoadOptions::bypass_compiler_caches`](crate::backend::LoadOptions)): `sinter bench`'s
    /// cold compile. Default off: later processes reuse what the compiler cached.
    pub bypass_compiler_caches: bool,
}

impl Default for CompileOptions {
    /// Mode default, fusion on, f32, TF32 for convolutions only, 8 recompiles, the cache at `SINTER_CACHE_DIR` or
    /// `~/.cache/sinter` (unless `SINTER_CACHE=0`), artifacts at `SINTER_DEBUG` if set.
    fn default() -> CompileOptions {
        CompileOptions {
            mode: Mode::Default,
            fusion: true,
            max_recompiles: 8,
            cache_dir: default_cache_dir(),
            debug_dir: std::env::var_os("SINTER_DEBUG").filter(|v| !v.is_empty()).map(PathBuf::from),
            precision: Precision::F32,
            graph_breaks: true,
            tf32: AllowTf32::default(),
            dynamic: Some(8),
            bypass_compiler_caches: false,
        }
    }
}

/// The cache folder: `SINTER_CACHE_DIR`, else `sinter` in the user's cache folder (the `dirs`
/// crate: `$XDG_CACHE_HOME` or `~/.cache` on Linux, `~/Library/Caches` on macOS, `%LOCALAPPDATA%`
/// on Windows); `None` when `SINTER_CACHE=0`. The same folder the backends keep their autotuning,
/// pipeline and cubin caches in.
pub fn default_cache_dir() -> Option<PathBuf> {
    if std::env::var("SINTER_CACHE").is_ok_and(|v| v == "0") {
        return None;
    }
    if let Some(d) = std::env::var_os("SINTER_CACHE_DIR").filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(d));
    }
    dirs::cache_dir().map(|d| d.join("sinter"))
}

/// The dtypes and shapes of one call's inputs: what the guards compare.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Signature(pub Vec<(DType, Vec<usize>)>);

impl Signature {
    /// The signature of some inputs.
    pub fn of(inputs: &[HostTensor]) -> Signature {
        Signature(inputs.iter().map(|t| (t.dtype(), t.shape.clone())).collect())
    }

    /// The signature a graph declares, if all its input dims are static.
    pub fn declared(g: &IrGraph) -> Option<Signature> {
        g.inputs
            .iter()
            .map(|&i| Some((g.ty(i).dtype, g.ty(i).shape.as_static()?)))
            .collect::<Option<Vec<_>>>()
            .map(Signature)
    }

    fn describe_difference(&self, other: &Signature, names: &[&str]) -> String {
        if self.0.len() != other.0.len() {
            return format!("{} inputs instead of {}", other.0.len(), self.0.len());
        }
        for (i, (a, b)) in self.0.iter().zip(&other.0).enumerate() {
            let name = names.get(i).copied().unwrap_or("?");
            if a.0 != b.0 {
                return format!("input {name:?} dtype {} != {}", b.0, a.0);
            }
            if a.1 != b.1 {
                return format!("input {name:?} shape {:?} != {:?}", b.1, a.1);
            }
        }
        "identical".into()
    }
}

/// Marks a phase that ran at the same time as another: `"<name> (beside <other>)"` follows phase
/// `<other>` in [`CompileStats::phases`] and overlapped it (the program cache's store beside the
/// backend's load). A trace draws it from `<other>`'s start; it adds nothing to the compile's
/// length.
pub const BESIDE: &str = "(beside ";

/// Wall time of each compile phase, seconds.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct CompileStats {
    /// `(phase, seconds)` in order: `specialize`, each pass, `schedule`, `backend_load`, ...
    /// (phases named with [`BESIDE`] overlapped the phase they name)
    pub phases: Vec<(String, f64)>,
    /// The program came from the disk cache.
    pub cache_hit: bool,
    /// Total seconds.
    pub total_s: f64,
}

/// One recompilation (or the first compilation), for logs and the profile.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CompileEvent {
    /// Why it happened.
    pub reason: String,
    /// The signature compiled for.
    pub signature: Signature,
    /// Timings.
    pub stats: CompileStats,
    /// What else the compiled program serves without recompiling (`batch <= 8 (...)`), if anything.
    #[serde(default)]
    pub serves: Option<String>,
}

struct Specialization {
    signature: Signature,
    exec: Exec,
    /// The values of an outer symbol this specialization serves besides its own.
    dynamic: Option<dynamic::DynSpec>,
}

/// What runs one specialization: one program, or a partition into compiled and fallback segments.
enum Exec {
    /// The whole graph as one program on the backend.
    Whole { program: Program, exe: Box<dyn Executable> },
    /// Graph breaks: segments on the backend and on the CPU reference.
    Split(segments::Segmented),
}

impl Exec {
    fn sources(&self) -> Vec<KernelSource> {
        match self {
            Exec::Whole { exe, .. } => exe.sources(),
            Exec::Split(s) => s.sources(),
        }
    }

    fn breaks(&self) -> &[GraphBreak] {
        match self {
            Exec::Whole { .. } => &[],
            Exec::Split(s) => &s.breaks,
        }
    }
}

/// What a [`CompiledGraph`] learns as it runs: one executable per signature, every compile event,
/// the specialization used last.
#[derive(Default)]
struct State {
    specs: Vec<Specialization>,
    events: Vec<CompileEvent>,
    last: usize,
    /// Why the graph cannot serve several values of its outer symbol (found once, then every new
    /// value recompiles with this reason).
    dyn_refused: Option<String>,
}

/// A compiled graph: guards plus one executable per input signature seen.
pub struct CompiledGraph {
    graph: IrGraph,
    backend: Arc<dyn Backend>,
    opts: CompileOptions,
    state: Mutex<State>,
    constants: ConstantPool,
    /// The graph's large constants by digest (program cache entries refer to them).
    graph_constants: std::sync::OnceLock<cache::GraphConstants>,
}

/// Compiles `g` for `backend`. Graphs whose inputs are all static are compiled now (so errors
/// surface here); graphs with symbolic dims are compiled at the first call.
pub fn compile(
    g: &impl AsGraph,
    backend: Arc<dyn Backend>,
    opts: CompileOptions,
) -> Result<CompiledGraph, CompileError> {
    let graph = g.to_ir()?.into_owned();
    let c = CompiledGraph {
        graph,
        backend,
        opts,
        state: Mutex::new(State::default()),
        constants: ConstantPool::default(),
        graph_constants: Default::default(),
    };
    if let Some(sig) = Signature::declared(&c.graph) {
        let mut st = c.lock();
        c.specialize(&mut st, sig, "first compilation".into())?;
        drop(st);
    }
    Ok(c)
}

impl CompiledGraph {
    /// Runs with inputs in the graph's input order. Checks the guards first, recompiling when the
    /// inputs' dtypes or shapes differ from every specialization so far.
    pub fn run(&self, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, CompileError> {
        let mut st = self.lock();
        let i = self.guard(&mut st, inputs.iter().map(|t| (t.dtype(), t.shape.as_slice())))?;
        match &mut st.specs[i].exec {
            Exec::Whole { exe, .. } => Ok(exe.run(inputs)?),
            Exec::Split(s) => s.run(inputs),
        }
    }

    /// Runs with inputs already on the device (made by [`CompiledGraph::upload`] or returned by an
    /// earlier run) and leaves the outputs there; `.to_host()` on an output copies it back. Guards
    /// and recompiles as [`CompiledGraph::run`].
    pub fn run_device(&self, inputs: &[DeviceTensor]) -> Result<Vec<DeviceTensor>, CompileError> {
        let mut st = self.lock();
        let i = self.guard(&mut st, inputs.iter().map(|t| (t.dtype(), t.shape())))?;
        match &mut st.specs[i].exec {
            Exec::Whole { exe, .. } => Ok(exe.run_device(inputs)?),
            Exec::Split(s) => s.run_device(self.backend.as_ref(), inputs),
        }
    }

    /// Copies a host tensor to the backend's device, ready for [`CompiledGraph::run_device`].
    /// With graph breaks on, a tensor of a dtype the device cannot hold (f64 on WGSL) stays on the
    /// host as a host-resident [`DeviceTensor`] (a partitioned graph's fallback segments read it).
    pub fn upload(&self, t: &HostTensor) -> Result<DeviceTensor, CompileError> {
        match self.backend.upload(t) {
            Err(BackendError::Unsupported { .. }) if self.opts.graph_breaks => Ok(DeviceTensor::host(t)),
            r => Ok(r?),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves no half-built specialization behind (one is pushed
        // only when complete), so a poisoned lock's state is still consistent.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `iters` times and returns the last outputs and per-kernel device timings of each run.
    pub fn run_timed(
        &self,
        inputs: &[HostTensor],
        iters: usize,
    ) -> Result<(Vec<HostTensor>, Vec<Vec<KernelTiming>>), CompileError> {
        let mut st = self.lock();
        let i = self.guard(&mut st, inputs.iter().map(|t| (t.dtype(), t.shape.as_slice())))?;
        match &mut st.specs[i].exec {
            Exec::Whole { exe, .. } => Ok(exe.run_timed(inputs, iters)?),
            Exec::Split(s) => s.run_timed(inputs, iters),
        }
    }

    /// Runs `iters` times, timing each whole run on the device
    /// ([`Executable::run_timed_whole`]): the last outputs and one time per run in ns. `None`
    /// where the backend does not time whole runs, and for a graph split at graph breaks (its
    /// runs cross the host).
    #[allow(clippy::type_complexity)]
    pub fn run_timed_whole(
        &self,
        inputs: &[HostTensor],
        iters: usize,
    ) -> Result<Option<(Vec<HostTensor>, Vec<f64>)>, CompileError> {
        let mut st = self.lock();
        let i = self.guard(&mut st, inputs.iter().map(|t| (t.dtype(), t.shape.as_slice())))?;
        match &mut st.specs[i].exec {
            Exec::Whole { exe, .. } => Ok(exe.run_timed_whole(inputs, iters)?),
            Exec::Split(_) => Ok(None),
        }
    }

    /// The specialization for these inputs' dtypes and shapes, compiling one on a miss. A hit (every
    /// call after the first, on the hot path of `run_device`) compares in place, allocating nothing.
    fn guard<'a>(
        &self,
        st: &mut State,
        inputs: impl ExactSizeIterator<Item = (DType, &'a [usize])> + Clone,
    ) -> Result<usize, CompileError> {
        let same = |s: &Signature| {
            s.0.len() == inputs.len() && s.0.iter().zip(inputs.clone()).all(|((d, sh), (t, ts))| *d == t && sh == ts)
        };
        let last = st.last;
        if st.specs.get(last).is_some_and(|s| same(&s.signature)) {
            self.serve(&mut st.specs[last], None).map_err(|why| CompileError::Graph(Error::Input(why)))?;
            return Ok(last);
        }
        // The last specialization at another value of its outer symbol (the hot path of a server
        // seeing several batch sizes): no allocation once that value has been served.
        let mut refusals = Vec::new();
        if let Some(v) = st.specs.get(last).and_then(|s| s.dynamic.as_ref()?.value_of(&s.signature, inputs.clone())) {
            match self.serve(&mut st.specs[last], Some(v)) {
                Ok(()) => return Ok(last),
                Err(why) => refusals.push(why),
            }
        }
        if let Some(i) = st.specs.iter().position(|s| same(&s.signature)) {
            self.serve(&mut st.specs[i], None).map_err(|why| CompileError::Graph(Error::Input(why)))?;
            st.last = i;
            return Ok(i);
        }
        for i in 0..st.specs.len() {
            let s = &st.specs[i];
            if i == last {
                continue;
            }
            if let Some(v) = s.dynamic.as_ref().and_then(|d| d.value_of(&s.signature, inputs.clone())) {
                match self.serve(&mut st.specs[i], Some(v)) {
                    Ok(()) => {
                        st.last = i;
                        return Ok(i);
                    }
                    Err(why) => refusals.push(why),
                }
            }
        }
        let sig = Signature(inputs.map(|(d, s)| (d, s.to_vec())).collect());
        let names = self.graph.input_names();
        let mut reason = match st.specs.last() {
            None => "first call".to_string(),
            Some(s) => format!("guard failed: {}", s.signature.describe_difference(&sig, &names)),
        };
        if let Some(why) = refusals.first().or(st.dyn_refused.as_ref()) {
            reason = format!("{reason}; not served without recompiling: {why}");
        }
        if st.specs.len() > self.opts.max_recompiles {
            return Err(CompileError::RecompileLimit { limit: self.opts.max_recompiles, reason });
        }
        if sig.0.len() != self.graph.inputs.len() {
            return Err(
                Error::Input(format!("expected {} input(s) {names:?}, got {}", names.len(), sig.0.len())).into()
            );
        }
        self.specialize(st, sig, reason)?;
        Ok(st.last)
    }

    fn specialize(&self, st: &mut State, sig: Signature, reason: String) -> Result<(), CompileError> {
        let t0 = Instant::now();
        let mut stats = CompileStats::default();
        let mut artifacts: Vec<(String, String)> = Vec::new();
        if st.dyn_refused.is_none() {
            let t = Instant::now();
            let refused = match self.compile_dynamic(&sig, &mut stats, &mut artifacts)? {
                dynamic::Dyn::Compiled(spec) => {
                    let serves = spec.dynamic.as_ref().map(|d| d.extents.summary()).unwrap_or_default();
                    tracing::info!(
                        target: "sinter::recompiles",
                        "compiled for {:?}, serving {serves}: {reason}",
                        spec.signature.0
                    );
                    return self.finish_specialization(st, *spec, reason, stats, artifacts, t0);
                }
                dynamic::Dyn::Refused(why) => Some((why, "dynamic attempt (refused)")),
                dynamic::Dyn::RefusedBefore(why) => Some((why, "dynamic attempt (refusal cached)")),
                dynamic::Dyn::Skipped => None,
            };
            if let Some((why, phase)) = refused {
                tracing::info!(target: "sinter::recompiles", "not serving other batch sizes: {why}");
                st.dyn_refused = Some(why);
                // The attempt's lowerings and schedules (or reading an earlier process's refusal),
                // in one phase of their own.
                stats = CompileStats::default();
                stats.phases.push((phase.into(), t.elapsed().as_secs_f64()));
                artifacts.clear();
            }
        }
        tracing::info!(target: "sinter::recompiles", "compiling for {:?}: {reason}", sig.0);
        let exec = self.build_exec(&sig, &mut stats, &mut artifacts)?;
        let spec = Specialization { signature: sig, exec, dynamic: None };
        self.finish_specialization(st, spec, reason, stats, artifacts, t0)
    }

    /// Compiles one specialization for exactly `sig`: a cached program, or lowering, scheduling
    /// and loading, with graph breaks where the backend refuses.
    fn build_exec(
        &self,
        sig: &Signature,
        stats: &mut CompileStats,
        artifacts: &mut Vec<(String, String)>,
    ) -> Result<Exec, CompileError> {
        let t = Instant::now();
        let key = self.cache_key(sig, "");
        stats.phases.push(("program_cache_key".into(), t.elapsed().as_secs_f64()));
        let t = Instant::now();
        let cached = self.opts.cache_dir.as_deref().and_then(|d| cache_load(d, &key, self.graph_constants()));
        stats.phases.push(("program_cache_load".into(), t.elapsed().as_secs_f64()));
        let mut exec = None;
        if let Some(program) = cached {
            tracing::info!(target: "sinter::cache", "program cache hit {key}");
            match self.load_program(&program, stats) {
                Ok(exe) => {
                    stats.cache_hit = true;
                    exec = Some(Exec::Whole { program, exe });
                }
                // A cached program the backend refuses (a constant out of its range): rebuild,
                // breaking the graph where it refuses.
                Err(BackendError::Unsupported { .. }) if self.opts.graph_breaks => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(match exec {
            Some(e) => e,
            None => {
                let g = self.lower(sig, stats, artifacts, false)?;
                self.keep_text(artifacts, "ir_pre_fusion.txt", &g);
                let breaks = if self.opts.graph_breaks { partition::detect(&g, self.backend.caps()) } else { vec![] };
                if breaks.is_empty() {
                    let program = self.schedule_program(&g, stats, false)?;
                    match self.load_and_store(&key, &program, stats) {
                        Ok(exe) => Exec::Whole { program, exe },
                        Err(BackendError::Unsupported { what, .. }) if self.opts.graph_breaks => {
                            let breaks = segments::breaks_from_refusal(self.backend.name(), &g, &program, None, &what);
                            Exec::Split(segments::Segmented::build(self, &g, breaks, stats)?)
                        }
                        Err(e) => return Err(e.into()),
                    }
                } else {
                    Exec::Split(segments::Segmented::build(self, &g, breaks, stats)?)
                }
            }
        })
    }

    /// Logs, writes artifacts and records a compiled specialization as the one in use.
    fn finish_specialization(
        &self,
        st: &mut State,
        spec: Specialization,
        reason: String,
        mut stats: CompileStats,
        artifacts: Vec<(String, String)>,
        t0: Instant,
    ) -> Result<(), CompileError> {
        stats.total_s = t0.elapsed().as_secs_f64();
        // `SINTER_LOG=compile`: where the compile went, largest phases first.
        let mut phases = stats.phases.clone();
        phases.sort_by(|a, b| b.1.total_cmp(&a.1));
        let top: Vec<String> = phases.iter().take(8).map(|(p, s)| format!("{p} {s:.3}")).collect();
        tracing::info!(
            target: "sinter::compile",
            "compiled in {:.3} s{}: {}",
            stats.total_s,
            if stats.cache_hit { " (program cache hit)" } else { "" },
            top.join(", ")
        );
        let exec = &spec.exec;
        if let Exec::Split(s) = exec {
            tracing::info!(
                target: "sinter::graph_breaks",
                "{} node(s) of {} run on the CPU reference: {} segment(s), {} compiled",
                s.breaks.len(),
                self.backend.name(),
                s.segments.len(),
                s.compiled_count()
            );
            for b in &s.breaks {
                tracing::info!(target: "sinter::graph_breaks", "{b}");
            }
        }
        let sources = exec.sources();
        for s in &sources {
            tracing::debug!(target: "sinter::output_code", "kernel {}:\n{}", s.name, s.source);
        }
        if let Some(dir) = self.opts.debug_dir.clone() {
            match exec {
                Exec::Whole { program, .. } => write_artifacts(&dir, &self.graph, program, &sources, &artifacts)?,
                Exec::Split(s) => s.write_artifacts(&dir, &self.graph, &sources, &artifacts)?,
            }
            artifacts::write_breaks(&dir, exec.breaks())?;
        }
        let serves = spec.dynamic.as_ref().map(|d| d.extents.summary());
        st.events.push(CompileEvent { reason, signature: spec.signature.clone(), stats, serves });
        st.specs.push(spec);
        st.last = st.specs.len() - 1;
        Ok(())
    }

    /// The captured graph.
    pub fn graph(&self) -> &IrGraph {
        &self.graph
    }

    /// The program of the most recently used specialization; `None` when nothing is compiled
    /// yet or the graph is partitioned ([`CompiledGraph::programs`] lists a partition's).
    pub fn program(&self) -> Option<Program> {
        let st = self.lock();
        st.specs.get(st.last).and_then(|s| match &s.exec {
            Exec::Whole { program, .. } => Some(program.clone()),
            Exec::Split(_) => None,
        })
    }

    /// The programs of the most recently used specialization, in run order: one, or one per
    /// compiled segment of a partitioned graph (kernel names prefixed `s<segment>_`).
    pub fn programs(&self) -> Vec<Program> {
        let st = self.lock();
        st.specs.get(st.last).map_or_else(Vec::new, |s| match &s.exec {
            Exec::Whole { program, .. } => vec![program.clone()],
            Exec::Split(sp) => sp.programs().into_iter().cloned().collect(),
        })
    }

    /// The generated sources of the most recently used specialization (every compiled segment's
    /// for a partitioned graph).
    pub fn sources(&self) -> Vec<KernelSource> {
        let st = self.lock();
        st.specs.get(st.last).map(|s| s.exec.sources()).unwrap_or_default()
    }

    /// The graph breaks of the most recently used specialization: every node that runs on the
    /// CPU reference because the backend cannot run it, with the reason; empty when the whole
    /// graph runs on the backend. (A list, not a borrow: specializations sit behind a lock.)
    pub fn graph_breaks(&self) -> Vec<GraphBreak> {
        let st = self.lock();
        st.specs.get(st.last).map(|s| s.exec.breaks().to_vec()).unwrap_or_default()
    }

    /// The segments of the most recently used specialization, in run order: `(name, on the
    /// backend)` — `s<n>` for compiled segments, `cpu_fallback_<n>` for fallback ones; one
    /// compiled entry when the graph is not partitioned.
    pub fn segments(&self) -> Vec<(String, bool)> {
        let st = self.lock();
        st.specs.get(st.last).map_or_else(Vec::new, |s| match &s.exec {
            Exec::Whole { .. } => vec![("s0".to_string(), true)],
            Exec::Split(sp) => sp.segments.iter().map(|g| (g.name.clone(), g.is_compiled())).collect(),
        })
    }

    /// The table of extents the most recently used specialization scales with its outer symbol
    /// (`None` when it serves only its own shapes).
    pub fn extents(&self) -> Option<crate::kernel::dynamic::Extents> {
        let st = self.lock();
        st.specs.get(st.last).and_then(|s| s.dynamic.as_ref()).map(|d| d.extents.clone())
    }

    /// Why the graph does not serve several values of its outer symbol with one compile (the
    /// reason logged on `sinter::recompiles`), once a compile has found out; `None` while it does
    /// or before the first compile.
    pub fn dynamic_refusal(&self) -> Option<String> {
        self.lock().dyn_refused.clone()
    }

    /// Every compilation so far, with its reason and timings.
    pub fn events(&self) -> Vec<CompileEvent> {
        self.lock().events.clone()
    }

    /// The backend.
    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.backend
    }

    /// The options.
    pub fn options(&self) -> &CompileOptions {
        &self.opts
    }
}

mod artifacts;
mod cache;
mod dynamic;
mod pipeline;
mod profile;
mod retype;
mod segments;

pub use artifacts::write_artifacts;
use cache::cache_load;
pub use cache::unique_tmp;
pub use retype::retype;

#[cfg(test)]
mod break_tests;
#[cfg(test)]
mod dynamic_tests;
#[cfg(test)]
mod tests;
