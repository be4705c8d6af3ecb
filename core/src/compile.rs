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
//! * writes **debug artifacts** (`SINTER_DEBUG=dir` or [`CompileOptions::debug_dir`]): `graph.txt`,
//!   `graph.json`, `passes/NN_<pass>.txt`, `ir_pre_fusion.txt`, `ir_post_fusion.txt`,
//!   `program.json`, `fusion.json` and `kernels/<name>.<ext>`.
//!
//! A [`CompiledGraph`] is `Send + Sync`: its specializations sit behind one lock, so a server can
//! share one compiled model between threads (runs are serialized, as on one stream). Inputs may
//! stay on the device ([`CompiledGraph::run_device`]); constants are uploaded once per compiled
//! graph and shared by every specialization ([`crate::backend::ConstantPool`]).

use crate::backend::{
    Backend, BackendError, ConstantPool, DeviceTensor, Executable, KernelSource, KernelTiming, LoadOptions, Mode,
};
use crate::dtype::DType;
use crate::error::Error;
use crate::ir::{Graph as IrGraph, Op};
use crate::kernel::Program;
use crate::passes::Precision;
use crate::schedule::{ScheduleOptions, schedule};
use crate::shape::{Dim, Shape};
use crate::tensor::HostTensor;
use crate::trace::AsGraph;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
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
}

impl Default for CompileOptions {
    /// Mode default, fusion on, f32, 8 recompiles, the cache at `SINTER_CACHE_DIR` or
    /// `~/.cache/sinter` (unless `SINTER_CACHE=0`), artifacts at `SINTER_DEBUG` if set.
    fn default() -> CompileOptions {
        CompileOptions {
            mode: Mode::Default,
            fusion: true,
            max_recompiles: 8,
            cache_dir: default_cache_dir(),
            debug_dir: std::env::var_os("SINTER_DEBUG").filter(|v| !v.is_empty()).map(PathBuf::from),
            precision: Precision::F32,
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

/// Wall time of each compile phase, seconds.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct CompileStats {
    /// `(phase, seconds)` in order: `specialize`, each pass, `schedule`, `backend_load`, ...
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
}

struct Specialization {
    signature: Signature,
    program: Program,
    exe: Box<dyn Executable>,
}

/// What a [`CompiledGraph`] learns as it runs: one executable per signature, every compile event,
/// the specialization used last.
#[derive(Default)]
struct State {
    specs: Vec<Specialization>,
    events: Vec<CompileEvent>,
    last: usize,
}

/// A compiled graph: guards plus one executable per input signature seen.
pub struct CompiledGraph {
    graph: IrGraph,
    backend: Arc<dyn Backend>,
    opts: CompileOptions,
    state: Mutex<State>,
    constants: ConstantPool,
}

/// Compiles `g` for `backend`. Graphs whose inputs are all static are compiled now (so errors
/// surface here); graphs with symbolic dims are compiled at the first call.
pub fn compile(
    g: &impl AsGraph,
    backend: Arc<dyn Backend>,
    opts: CompileOptions,
) -> Result<CompiledGraph, CompileError> {
    let graph = g.to_ir()?.into_owned();
    let c =
        CompiledGraph { graph, backend, opts, state: Mutex::new(State::default()), constants: ConstantPool::default() };
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
        Ok(st.specs[i].exe.run(inputs)?)
    }

    /// Runs with inputs already on the device (made by [`CompiledGraph::upload`] or returned by an
    /// earlier run) and leaves the outputs there; `.to_host()` on an output copies it back. Guards
    /// and recompiles as [`CompiledGraph::run`].
    pub fn run_device(&self, inputs: &[DeviceTensor]) -> Result<Vec<DeviceTensor>, CompileError> {
        let mut st = self.lock();
        let i = self.guard(&mut st, inputs.iter().map(|t| (t.dtype(), t.shape())))?;
        Ok(st.specs[i].exe.run_device(inputs)?)
    }

    /// Copies a host tensor to the backend's device, ready for [`CompiledGraph::run_device`].
    pub fn upload(&self, t: &HostTensor) -> Result<DeviceTensor, CompileError> {
        Ok(self.backend.upload(t)?)
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
        Ok(st.specs[i].exe.run_timed(inputs, iters)?)
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
        if st.specs.get(st.last).is_some_and(|s| same(&s.signature)) {
            return Ok(st.last);
        }
        if let Some(i) = st.specs.iter().position(|s| same(&s.signature)) {
            st.last = i;
            return Ok(i);
        }
        let sig = Signature(inputs.map(|(d, s)| (d, s.to_vec())).collect());
        let names = self.graph.input_names();
        let reason = match st.specs.last() {
            None => "first call".to_string(),
            Some(s) => format!("guard failed: {}", s.signature.describe_difference(&sig, &names)),
        };
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
        tracing::info!(target: "sinter::recompiles", "compiling for {:?}: {reason}", sig.0);
        let key = self.cache_key(&sig);
        let cached = self.opts.cache_dir.as_deref().and_then(|d| cache_load(d, &key));
        let mut artifacts: Vec<(String, String)> = Vec::new();
        let program = match cached {
            Some(p) => {
                tracing::info!(target: "sinter::cache", "program cache hit {key}");
                stats.cache_hit = true;
                p
            }
            None => {
                let t = Instant::now();
                let g = retype(&self.graph, &sig)?;
                stats.phases.push(("specialize".into(), t.elapsed().as_secs_f64()));
                let mut prev = g;
                for (k, pass) in crate::passes::pipeline_for(self.opts.precision).iter().enumerate() {
                    let t = Instant::now();
                    let next = (pass.run)(&prev).map_err(|e| match e {
                        Error::Verify(v) => {
                            Error::Verify(v.into_iter().map(|m| format!("after {}: {m}", pass.name)).collect())
                        }
                        other => other,
                    })?;
                    stats.phases.push((pass.name.to_string(), t.elapsed().as_secs_f64()));
                    artifacts.push((format!("passes/{:02}_{}.txt", k + 1, pass.name), crate::text::print(&next)));
                    prev = next;
                }
                let t = Instant::now();
                let sched = ScheduleOptions {
                    fusion: self.opts.fusion,
                    cost_model: self.backend.cost_model(),
                    ..ScheduleOptions::default()
                };
                let program = schedule(&prev, self.backend.caps(), &sched)?;
                stats.phases.push(("schedule".into(), t.elapsed().as_secs_f64()));
                for k in &program.kernels {
                    let body = match &k.body {
                        crate::kernel::KernelBody::Pointwise { numel, .. } => format!("pointwise over {numel}"),
                        crate::kernel::KernelBody::Reduce(r) => {
                            format!("reduce {} rows x {} ({:?})", r.rows, r.len, r.strategy)
                        }
                        crate::kernel::KernelBody::Matmul(m) => {
                            format!("matmul {}x{}x{}x{}", m.batch, m.m, m.n, m.k)
                        }
                        crate::kernel::KernelBody::Attention(a) => {
                            format!("attention {}x{}x{}x{}x{}x{}", a.batch, a.heads, a.m, a.kv, a.d, a.dv)
                        }
                    };
                    tracing::debug!(target: "sinter::schedule", "{}: {body}, ops {:?}, {} args", k.name, k.ops, k.args.len());
                }
                for d in &program.decisions {
                    tracing::debug!(target: "sinter::fusion", "{} {:?}: {}", if d.fused { "fused" } else { "refused" }, d.nodes, d.reason);
                }
                artifacts.push(("ir_pre_fusion.txt".into(), crate::text::print(&prev)));
                if let Some(d) = self.opts.cache_dir.as_deref()
                    && let Err(e) = cache_store(d, &key, &program)
                {
                    tracing::warn!(target: "sinter::cache", "could not store program {key}: {e}");
                }
                program
            }
        };
        let t = Instant::now();
        let load = LoadOptions {
            mode: self.opts.mode,
            cache_dir: self.opts.cache_dir.clone(),
            constants: self.constants.clone(),
        };
        let exe = self.backend.load_with(&program, &load)?;
        stats.phases.push(("backend_load".into(), t.elapsed().as_secs_f64()));
        stats.total_s = t0.elapsed().as_secs_f64();
        for s in exe.sources() {
            tracing::debug!(target: "sinter::output_code", "kernel {}:\n{}", s.name, s.source);
        }
        if let Some(dir) = self.opts.debug_dir.clone() {
            write_artifacts(&dir, &self.graph, &program, &exe.sources(), &artifacts)?;
        }
        st.events.push(CompileEvent { reason, signature: sig.clone(), stats });
        st.specs.push(Specialization { signature: sig, program, exe });
        st.last = st.specs.len() - 1;
        Ok(())
    }

    fn cache_key(&self, sig: &Signature) -> String {
        let mut h = blake3::Hasher::new();
        h.update(env!("CARGO_PKG_VERSION").as_bytes());
        h.update(crate::text::print(&self.graph).as_bytes());
        // Constants are printed as summaries; hash their bytes too.
        for n in &self.graph.nodes {
            if let Op::Constant(t) = &n.op {
                h.update(&t.to_le_bytes());
            }
        }
        h.update(serde_json::to_string(sig).unwrap_or_default().as_bytes());
        h.update(self.backend.name().as_bytes());
        h.update(serde_json::to_string(self.backend.caps()).unwrap_or_default().as_bytes());
        h.update(
            format!("{:?} fusion={} precision={}", self.opts.mode, self.opts.fusion, self.opts.precision).as_bytes(),
        );
        // Environment switches the scheduler's cost model reads.
        h.update(format!("attention={:?}", std::env::var("SINTER_FUSE_ATTENTION").ok()).as_bytes());
        h.finalize().to_hex()[..32].to_string()
    }

    /// Runs `iters` timed iterations (after one warm-up) and returns a [`crate::profile::Profile`]
    /// of this compiled graph: every kernel with its fused ops, grid, bytes, FLOPs and device
    /// times, the compile phases of every specialization, the fusion decisions, peak memory and
    /// the captured graph. `device` carries the adapter name and the ceilings the roofline uses.
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
            for (phase, secs) in &ev.stats.phases {
                let category = match phase.as_str() {
                    "specialize" => SpanCategory::Capture,
                    "schedule" => SpanCategory::Fuse,
                    "backend_load" => SpanCategory::BackendCompile,
                    _ => SpanCategory::Pass,
                };
                let detail = if ev.stats.cache_hit { "program cache hit".to_string() } else { ev.reason.clone() };
                b.push_span(Span { name: phase.clone(), category, start_ns: t, dur_ns: secs * 1e9, detail });
                t += secs * 1e9;
            }
        }
        let program = self.program().ok_or_else(|| Error::Input("nothing compiled".into()))?;
        let sources = self.sources();
        for k in &program.kernels {
            let mut kp = KernelProfile::from_kernel(k);
            if let Some(s) = sources.iter().find(|s| s.name == k.name) {
                kp = kp.grid(s.grid).block(s.block).source_path(format!("kernels/{}.{}", s.name, s.ext));
                if let Some(r) = s.resources {
                    kp = kp.registers(r.registers).spill_bytes(r.spill_bytes).shared_mem_bytes(r.shared_bytes as u64);
                }
            }
            b.add_kernel(kp);
        }
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
        b.set_graph(&self.graph);
        b.set_peak_memory(program.memory.peak_bytes as u64);
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

    /// The captured graph.
    pub fn graph(&self) -> &IrGraph {
        &self.graph
    }

    /// The program of the most recently used specialization.
    pub fn program(&self) -> Option<Program> {
        let st = self.lock();
        st.specs.get(st.last).map(|s| s.program.clone())
    }

    /// The generated sources of the most recently used specialization.
    pub fn sources(&self) -> Vec<KernelSource> {
        let st = self.lock();
        st.specs.get(st.last).map(|s| s.exe.sources()).unwrap_or_default()
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

/// Re-types the captured graph for a signature: symbolic dims are bound, and where a static dim
/// or a dtype differs from the captured one, types are re-inferred through the graph (scalar
/// float constants follow the dtype of the tensor they combine with). Ops whose attributes bake in
/// a shape (reshape, expand, slice, pad) fail with an error naming the node if the new shape does
/// not fit.
pub fn retype(g: &IrGraph, sig: &Signature) -> Result<IrGraph, Error> {
    if sig.0.len() != g.inputs.len() {
        return Err(Error::Input(format!("expected {} inputs, got {}", g.inputs.len(), sig.0.len())));
    }
    let names = g.input_names();
    let mut bind: BTreeMap<String, usize> = BTreeMap::new();
    let mut same = true;
    for (k, ((&id, (dt, shape)), name)) in g.inputs.iter().zip(&sig.0).zip(&names).enumerate() {
        let want = g.ty(id);
        if want.shape.rank() != shape.len() {
            return Err(Error::Input(format!(
                "input {k} {name:?}: expected rank {}, got {:?}",
                want.shape.rank(),
                shape
            )));
        }
        if *dt != want.dtype {
            same = false;
        }
        for (d, &n) in want.shape.dims().iter().zip(shape) {
            match d {
                Dim::Sym(s) => match bind.insert(s.to_string(), n) {
                    Some(prev) if prev != n => {
                        return Err(Error::Input(format!("symbol {s} bound to both {prev} and {n} (input {name:?})")));
                    }
                    _ => {}
                },
                Dim::Static(m) if *m != n => same = false,
                Dim::Static(_) => {}
            }
        }
    }
    let g = if bind.is_empty() { g.clone() } else { crate::passes::specialize(g, &bind)? };
    if same {
        return Ok(g);
    }
    // Re-infer every node with the new input types.
    let mut out = IrGraph::default();
    let mut map = Vec::with_capacity(g.nodes.len());
    let mut input_k = 0;
    for (id, n) in g.iter() {
        let new_id = match &n.op {
            Op::Input { name } => {
                let (dt, shape) = &sig.0[input_k];
                input_k += 1;
                let nid = out.add_input(name, *dt, Shape::new(shape));
                out.nodes[nid.index()].origin = n.origin.clone();
                nid
            }
            op => {
                let mut ins: Vec<crate::ir::NodeId> = n.inputs.iter().map(|i| map[i.index()]).collect();
                if op.is_elementwise() {
                    let float = ins
                        .iter()
                        .map(|&i| out.ty(i))
                        .find(|t| t.dtype.is_float() && t.shape.rank() > 0)
                        .map(|t| t.dtype);
                    if let Some(fd) = float {
                        for i in ins.iter_mut() {
                            let t = out.ty(*i).clone();
                            if t.shape.rank() == 0
                                && t.dtype.is_float()
                                && t.dtype != fd
                                && let Op::Constant(c) = &out.node(*i).op
                            {
                                let v = c.to_f64_vec();
                                let c2 = HostTensor::from_f64(fd, vec![], &v);
                                *i = out.add(
                                    Op::Constant(std::sync::Arc::new(c2)),
                                    vec![],
                                    Some(out.node(*i).origin.clone()),
                                )?;
                            }
                        }
                    }
                }
                out.add(op.clone(), ins, Some(n.origin.clone())).map_err(|e| match e {
                    Error::Build { op, operands, msg } => {
                        Error::Build { op: format!("{op} at {id} (captured for other input types)"), operands, msg }
                    }
                    other => other,
                })?
            }
        };
        map.push(new_id);
    }
    for o in &g.outputs {
        out.add_output(&o.name, map[o.node.index()]);
    }
    Ok(out)
}

#[derive(Serialize, Deserialize)]
struct CacheEntry {
    checksum: String,
    program: String,
}

fn cache_path(dir: &Path, key: &str) -> PathBuf {
    dir.join("programs").join(format!("{key}.json"))
}

fn cache_load(dir: &Path, key: &str) -> Option<Program> {
    let path = cache_path(dir, key);
    let bytes = std::fs::read(&path).ok()?;
    // Nothing read is trusted: the checksum catches damaged files, the kernel-IR verifier a program
    // no backend would accept (an entry written by another version, or edited).
    let parsed = serde_json::from_slice::<CacheEntry>(&bytes).ok().and_then(|e| {
        (blake3::hash(e.program.as_bytes()).to_hex().as_str() == e.checksum)
            .then(|| serde_json::from_str::<Program>(&e.program).ok())
            .flatten()
            .filter(|p| crate::kernel::interp::validate(p).is_ok())
    });
    if parsed.is_none() {
        tracing::warn!(target: "sinter::cache", "corrupt cache entry {} ignored; rebuilding", path.display());
        let _ = std::fs::remove_file(&path);
    }
    parsed
}

/// A temporary name beside `path`, unique per process *and* call (threads of one process compiling
/// the same program write at the same time: a name from the process id alone interleaves them).
pub fn unique_tmp(path: &Path) -> PathBuf {
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    path.with_file_name(format!(".{name}.{}.{n}.tmp", std::process::id()))
}

fn cache_store(dir: &Path, key: &str, p: &Program) -> std::io::Result<()> {
    let program = serde_json::to_string(p).map_err(std::io::Error::other)?;
    let entry = CacheEntry { checksum: blake3::hash(program.as_bytes()).to_hex().to_string(), program };
    let path = cache_path(dir, key);
    std::fs::create_dir_all(path.parent().unwrap_or(dir))?;
    // Write then rename, so a crash never leaves a half-written entry under the real name.
    let tmp = unique_tmp(&path);
    std::fs::write(&tmp, serde_json::to_vec(&entry).map_err(std::io::Error::other)?)?;
    std::fs::rename(&tmp, &path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

/// Writes the debug artifacts of one compilation into `dir`.
pub fn write_artifacts(
    dir: &Path,
    captured: &IrGraph,
    program: &Program,
    sources: &[KernelSource],
    extra: &[(String, String)],
) -> Result<(), CompileError> {
    let err =
        |p: &Path, e: std::io::Error| CompileError::Artifacts { path: p.display().to_string(), msg: e.to_string() };
    let write = |rel: &str, text: &str| -> Result<(), CompileError> {
        let p = dir.join(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).map_err(|e| err(parent, e))?;
        }
        std::fs::write(&p, text).map_err(|e| err(&p, e))
    };
    write("graph.txt", &crate::text::print(captured))?;
    write("graph.json", &serde_json::to_string(captured).unwrap_or_default())?;
    for (rel, text) in extra {
        write(rel, text)?;
    }
    write("ir_post_fusion.txt", &crate::kernel::print::print_program(program))?;
    write("program.json", &serde_json::to_string(program).unwrap_or_default())?;
    write("fusion.json", &serde_json::to_string_pretty(&program.decisions).unwrap_or_default())?;
    for s in sources {
        write(&format!("kernels/{}.{}", s.name, s.ext), &s.source)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::interp::InterpBackend;
    use crate::prelude::*;

    /// A server shares one compiled graph behind a lock or an `Arc`: it must be `Send + Sync`.
    #[test]
    fn compiled_graph_is_send_and_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<CompiledGraph>();
        assert_send_sync::<DeviceTensor>();
    }

    #[test]
    fn run_device_chains_without_host_tensors_and_shares_one_compile() {
        let g = Graph::new();
        let x = g.input("x", DType::F32, [3, 5]);
        g.output(&(&x * &x).softmax(-1));
        let c = compile(&g, Arc::new(InterpBackend::new()), opts(None)).unwrap();
        let x = HostTensor::random(DType::F32, vec![3, 5], 7, -2.0, 2.0);
        let want = crate::cpu::run(&g, std::slice::from_ref(&x)).unwrap();
        let d = c.upload(&x).unwrap();
        let y = c.run_device(&[d]).unwrap();
        assert_eq!(y[0].shape(), [3, 5]);
        let got = y[0].to_host().unwrap();
        assert!(got.max_abs_diff(&want[0]) < 1e-6);
        // A second call through the host path reuses the same specialization.
        c.run(&[x]).unwrap();
        assert_eq!(c.events().len(), 1);
        // A shared compiled graph runs from another thread.
        let c = Arc::new(c);
        let c2 = Arc::clone(&c);
        let t = std::thread::spawn(move || c2.run(&[HostTensor::random(DType::F32, vec![3, 5], 8, -1.0, 1.0)]).is_ok());
        assert!(t.join().unwrap());
    }

    /// `fusion.json` in a profile names captured-graph nodes (what the viewer draws), not the
    /// post-decomposition ids: softmax decomposes into ~6 nodes, yet every decision must point at
    /// the captured softmax or its inputs.
    #[test]
    fn profile_fusion_decisions_name_captured_nodes() {
        let g = Graph::new();
        let x = g.input("x", DType::F32, [4, 33]);
        let b = g.input("b", DType::F32, [33]);
        g.output(&(&x + &b).softmax(-1).exp());
        let captured = g.build().unwrap();
        let c = compile(&g, Arc::new(InterpBackend::new()), opts(None)).unwrap();
        let inputs = vec![
            HostTensor::random(DType::F32, vec![4, 33], 1, -1.0, 1.0),
            HostTensor::random(DType::F32, vec![33], 2, -1.0, 1.0),
        ];
        let ceilings = crate::profile::Ceilings {
            copy_gbps: 1.0,
            matmul_tflops: Default::default(),
            launch_overhead_us: 0.0,
            measured: false,
        };
        let dev = crate::profile::DeviceInfo::new("host", "interp", ceilings);
        let p = c.profile(&inputs, 1, "t", dev).unwrap();
        let program = c.program().unwrap();
        assert!(!p.fusion.is_empty());
        // The decomposed graph has more nodes than the captured one; decisions must not leak its ids.
        assert!(program.decisions.iter().any(|d| d.nodes.iter().any(|&n| n as usize >= captured.nodes.len())));
        for (pd, d) in p.fusion.iter().zip(&program.decisions) {
            assert_eq!(pd.nodes, d.origins, "{}", d.reason);
            assert!(pd.nodes.iter().all(|&n| (n as usize) < captured.nodes.len()), "{:?}", pd.nodes);
        }
    }

    fn opts(cache: Option<PathBuf>) -> CompileOptions {
        CompileOptions { cache_dir: cache, debug_dir: None, ..CompileOptions::default() }
    }

    fn tmpdir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("sinter-compile-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    fn softmax_graph(batch: Dim) -> Graph {
        let g = Graph::new();
        let x = g.input("x", DType::F32, vec![batch, Dim::Static(37)]);
        let b = g.input("b", DType::F32, [37]);
        g.output(&(&x + &b).softmax(-1));
        g
    }

    #[test]
    fn compiled_matches_reference_and_guards_recompile() {
        let g = softmax_graph(Dim::sym("batch"));
        let c = compile(&g, Arc::new(InterpBackend::new()), opts(None)).unwrap();
        assert!(c.events().is_empty(), "symbolic graphs compile at the first call");
        for (k, rows) in [5usize, 5, 9, 5].into_iter().enumerate() {
            let x = HostTensor::random(DType::F32, vec![rows, 37], k as u64, -3.0, 3.0);
            let b = HostTensor::random(DType::F32, vec![37], 100 + k as u64, -1.0, 1.0);
            let got = c.run(&[x.clone(), b.clone()]).unwrap();
            let want = crate::cpu::run(&g, &[x, b]).unwrap();
            assert!(got[0].tolerance_ratio(&want[0], 1e-5, 1e-7) <= 1.0);
        }
        let ev = c.events();
        assert_eq!(ev.len(), 2, "one compile per distinct signature: {ev:?}");
        assert!(ev[1].reason.contains("shape"), "{}", ev[1].reason);
    }

    #[test]
    fn static_shape_change_retypes_and_dtype_change_follows_constants() {
        let g = Graph::new();
        let x = g.input("x", DType::F32, [4, 6]);
        g.output(&((x.relu() * 2.0) + 1.0));
        let c = compile(&g, Arc::new(InterpBackend::new()), opts(None)).unwrap();
        assert_eq!(c.events().len(), 1);
        let x2 = HostTensor::random(DType::F16, vec![3, 10], 7, -2.0, 2.0);
        let got = c.run(std::slice::from_ref(&x2)).unwrap();
        assert_eq!(got[0].dtype(), DType::F16);
        let want: Vec<f64> = x2.to_f64_vec().iter().map(|v| v.max(0.0) * 2.0 + 1.0).collect();
        let want = HostTensor::from_f64(DType::F16, vec![3, 10], &want);
        assert!(got[0].tolerance_ratio(&want, 4e-3, 1e-3) <= 1.0);
        assert_eq!(c.events().len(), 2);
    }

    #[test]
    fn wrong_inputs_are_errors() {
        let g = softmax_graph(Dim::Static(4));
        let c = compile(&g, Arc::new(InterpBackend::new()), opts(None)).unwrap();
        let x = HostTensor::random(DType::F32, vec![4, 37], 1, -1.0, 1.0);
        assert!(c.run(std::slice::from_ref(&x)).is_err(), "missing input");
        let bad = HostTensor::random(DType::F32, vec![4, 36], 1, -1.0, 1.0);
        let b = HostTensor::random(DType::F32, vec![37], 1, -1.0, 1.0);
        let e = c.run(&[bad, b]).unwrap_err().to_string();
        assert!(e.contains("add"), "names the op that no longer fits: {e}");
    }

    #[test]
    fn recompile_limit() {
        let g = softmax_graph(Dim::sym("n"));
        let o = CompileOptions { max_recompiles: 1, ..opts(None) };
        let c = compile(&g, Arc::new(InterpBackend::new()), o).unwrap();
        let b = HostTensor::random(DType::F32, vec![37], 1, -1.0, 1.0);
        for rows in [1, 2] {
            c.run(&[HostTensor::random(DType::F32, vec![rows, 37], 1, -1.0, 1.0), b.clone()]).unwrap();
        }
        let e = c.run(&[HostTensor::random(DType::F32, vec![3, 37], 1, -1.0, 1.0), b]).unwrap_err();
        assert!(matches!(e, CompileError::RecompileLimit { .. }), "{e}");
    }

    #[test]
    fn disk_cache_hit_and_corrupt_entry_rebuilt() {
        let dir = tmpdir("cache");
        let g = softmax_graph(Dim::Static(3));
        let first = compile(&g, Arc::new(InterpBackend::new()), opts(Some(dir.clone()))).unwrap();
        assert!(!first.events()[0].stats.cache_hit);
        let second = compile(&g, Arc::new(InterpBackend::new()), opts(Some(dir.clone()))).unwrap();
        assert!(second.events()[0].stats.cache_hit, "a second compile of the same graph hits the cache");
        assert_eq!(first.program(), second.program());
        // Corrupt every entry: the next compile must rebuild, not trust it.
        for e in std::fs::read_dir(dir.join("programs")).unwrap() {
            let p = e.unwrap().path();
            let mut bytes = std::fs::read(&p).unwrap();
            let n = bytes.len();
            bytes[n / 2] ^= 0x5a;
            std::fs::write(&p, bytes).unwrap();
        }
        let third = compile(&g, Arc::new(InterpBackend::new()), opts(Some(dir.clone()))).unwrap();
        assert!(!third.events()[0].stats.cache_hit);
        let x = HostTensor::random(DType::F32, vec![3, 37], 5, -1.0, 1.0);
        let b = HostTensor::random(DType::F32, vec![37], 6, -1.0, 1.0);
        let want = crate::cpu::run(&g, &[x.clone(), b.clone()]).unwrap();
        assert!(third.run(&[x, b]).unwrap()[0].tolerance_ratio(&want[0], 1e-5, 1e-7) <= 1.0);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn cache_entries_with_a_valid_checksum_but_an_invalid_program_are_rebuilt() {
        let dir = tmpdir("cache-invalid");
        let g = softmax_graph(Dim::Static(3));
        compile(&g, Arc::new(InterpBackend::new()), opts(Some(dir.clone()))).unwrap();
        // Re-checksummed entries whose program no backend accepts (its buffers gone).
        for e in std::fs::read_dir(dir.join("programs")).unwrap() {
            let path = e.unwrap().path();
            let entry: CacheEntry = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
            let mut p: Program = serde_json::from_str(&entry.program).unwrap();
            p.buffers.clear();
            let program = serde_json::to_string(&p).unwrap();
            let entry = CacheEntry { checksum: blake3::hash(program.as_bytes()).to_hex().to_string(), program };
            std::fs::write(&path, serde_json::to_vec(&entry).unwrap()).unwrap();
        }
        let c = compile(&g, Arc::new(InterpBackend::new()), opts(Some(dir.clone()))).unwrap();
        assert!(!c.events()[0].stats.cache_hit, "an invalid program was trusted");
        let x = HostTensor::random(DType::F32, vec![3, 37], 5, -1.0, 1.0);
        let b = HostTensor::random(DType::F32, vec![37], 6, -1.0, 1.0);
        let want = crate::cpu::run(&g, &[x.clone(), b.clone()]).unwrap();
        assert!(c.run(&[x, b]).unwrap()[0].tolerance_ratio(&want[0], 1e-5, 1e-7) <= 1.0);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn programs_with_infinite_constants_hit_the_disk_cache() {
        // A causal mask: -inf above the diagonal. Its JSON used to hold `null`, so the entry was
        // "corrupt" on every load and rebuilt with a warning each time.
        let dir = tmpdir("cache-inf");
        let g = Graph::new();
        let x = g.input("x", DType::F32, [4, 4]);
        let mask: Vec<f32> = (0..16).map(|i| if i % 4 > i / 4 { f32::NEG_INFINITY } else { 0.0 }).collect();
        let m = g.constant(HostTensor::f32([4, 4], mask).unwrap());
        g.output(&(&x + &m).softmax(-1));
        compile(&g, Arc::new(InterpBackend::new()), opts(Some(dir.clone()))).unwrap();
        let second = compile(&g, Arc::new(InterpBackend::new()), opts(Some(dir.clone()))).unwrap();
        assert!(second.events()[0].stats.cache_hit, "the cached program with -inf constants did not load");
        let x = HostTensor::random(DType::F32, vec![4, 4], 5, -1.0, 1.0);
        let want = crate::cpu::run(&g, std::slice::from_ref(&x)).unwrap();
        assert!(second.run(&[x]).unwrap()[0].tolerance_ratio(&want[0], 1e-5, 1e-7) <= 1.0);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn concurrent_stores_of_one_entry_never_interleave() {
        let dir = tmpdir("cache-race");
        let g = softmax_graph(Dim::Static(3));
        let c = compile(&g, Arc::new(InterpBackend::new()), opts(None)).unwrap();
        let p = c.program().unwrap();
        let a = cache_path(&dir, "k");
        assert_ne!(unique_tmp(&a), unique_tmp(&a), "two writers of one entry share a temporary file");
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    for _ in 0..20 {
                        cache_store(&dir, "k", &p).unwrap();
                    }
                });
            }
        });
        assert_eq!(cache_load(&dir, "k").as_ref(), Some(&p));
        assert_eq!(std::fs::read_dir(dir.join("programs")).unwrap().count(), 1, "temporary files left behind");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn every_workload_hits_the_disk_cache() {
        // Regression: a max-pool's -inf padding constant was written to JSON as `null`, so every
        // cached ResNet program was "corrupt" and rebuilt.
        let dir = tmpdir("cache-workloads");
        for w in crate::workloads::all() {
            let g = w.build(crate::workloads::Scale::Reduced).unwrap();
            let first = compile(&g, Arc::new(InterpBackend::new()), opts(Some(dir.clone()))).unwrap();
            let second = compile(&g, Arc::new(InterpBackend::new()), opts(Some(dir.clone()))).unwrap();
            assert!(second.events()[0].stats.cache_hit, "{}: second compile missed the cache", w.name);
            assert_eq!(format!("{:?}", first.program()), format!("{:?}", second.program()), "{}", w.name);
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn artifacts_written() {
        let dir = tmpdir("artifacts");
        let g = softmax_graph(Dim::Static(3));
        let o = CompileOptions { debug_dir: Some(dir.clone()), ..opts(None) };
        compile(&g, Arc::new(InterpBackend::new()), o).unwrap();
        for f in ["graph.txt", "graph.json", "ir_pre_fusion.txt", "ir_post_fusion.txt", "fusion.json", "program.json"] {
            assert!(dir.join(f).is_file(), "{f} missing");
        }
        assert!(std::fs::read_dir(dir.join("passes")).unwrap().count() >= 3);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn profile_records_kernels_and_roundtrips() {
        let dir = tmpdir("profile");
        let g = softmax_graph(Dim::Static(5));
        let c = compile(&g, Arc::new(InterpBackend::new()), opts(None)).unwrap();
        let x = HostTensor::random(DType::F32, vec![5, 37], 5, -1.0, 1.0);
        let b = HostTensor::random(DType::F32, vec![37], 6, -1.0, 1.0);
        let device = crate::profile::DeviceInfo::new("host", "interp", crate::profile::Ceilings::default());
        let p = c.profile(&[x, b], 3, "softmax_test", device).unwrap();
        assert_eq!(p.kernels.len(), 1);
        assert!(p.kernels[0].ops.iter().any(|o| o == "softmax"), "{:?}", p.kernels[0].ops);
        p.write(&dir).unwrap();
        let back = crate::profile::Profile::read(&dir).unwrap();
        assert_eq!(back.kernels.len(), 1);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
