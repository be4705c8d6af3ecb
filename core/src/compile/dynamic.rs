//! Dynamic outer extents in the compile driver: one compile serves every batch size up to a bound.
//!
//! # Contract
//!
//! * **Which symbol.** The graph's *outer symbol* is a plain symbol (`batch`, not `batch*seq`)
//!   that is the outermost dimension of at least one input and appears in no other input
//!   dimension ([`outer_symbol`]). Other symbols (a sequence length) stay per-specialization: a new
//!   value recompiles, as a static shape does.
//! * **Compile.** At the first value `v` seen, the graph is lowered and scheduled at
//!   `bound = next_power_of_two(max(v, CompileOptions::dynamic, 4))` and at `bound / 2` (the
//!   probe), with the batch kept outermost (`ScheduleOptions::outer_batch`,
//!   `passes::pipeline_for_dynamic`); [`crate::kernel::dynamic::derive`] keeps the program at
//!   `bound` when the two differ only in launch extents, buffer sizes and outer I/O dimensions
//!   (the table is stored in [`Program::dynamic`] and in the program cache). When they differ
//!   otherwise, the pairs `(bound, 3 * bound / 4)` and `(2 * bound, 3 * bound / 2)` are tried
//!   next: a decision that depends on an extent coinciding with a static one (a transformer at
//!   batch 8 and sequence 8 has `batch * seq == seq * seq`, and two such spaces fuse
//!   horizontally) differs at one value and not at others. Only the program at the chosen bound
//!   is loaded on the backend.
//! * **Serve.** A call whose inputs match the compiled signature except for the outer dimension
//!   of those inputs, all equal to one value `1..=bound`, runs that program instantiated at the
//!   value ([`crate::kernel::dynamic::Extents::at`]: validated; its outputs' shapes checked
//!   against the graph's at that value) through [`crate::backend::Executable::set_extent`]. Each
//!   instantiation is kept, so switching between values seen before costs no validation.
//! * **Refusals** (each logged once on `sinter::recompiles` and quoted in every later recompile's
//!   reason): dynamic extents off, a backend that cannot launch smaller extents, no outer symbol,
//!   graph breaks, a program where the symbol reaches more than the outer extent (named kernel and
//!   field), a backend refusing the program at `bound`. A value above `bound` recompiles at its
//!   own bound (a new specialization that serves it and everything below).
//!
//! Not served: graphs with graph breaks (each segment would need its own table), symbols in
//! inner dimensions (a sequence length: attention and reductions over it change their loop
//! bounds, not only the grid).

use super::{CompileError, CompileStats, CompiledGraph, Exec, Signature, Specialization, cache, cache_load};
use crate::backend::BackendError;
use crate::dtype::DType;
use crate::ir::Graph as IrGraph;
use crate::kernel::Program;
use crate::kernel::dynamic::{Extents, derive};
use crate::partition;
use crate::shape::Dim;
use std::collections::BTreeMap;
use std::collections::btree_map::Entry;
use std::sync::Arc;
use std::time::Instant;

/// Instantiated programs kept per specialization (the values served most recently).
const KEEP: usize = 16;

/// What a specialization serves besides its own signature.
pub(super) struct DynSpec {
    /// The table of the program at the bound.
    pub(super) extents: Extents,
    /// The inputs whose outermost dimension is the symbol.
    inputs: Vec<usize>,
    /// The value the executable runs at now.
    current: usize,
    /// Programs instantiated so far, most recent last.
    served: Vec<(usize, Arc<Program>)>,
}

impl DynSpec {
    /// The symbol's value in `inputs` when they equal `compiled` except for the outermost
    /// dimension of the symbol's inputs, all one value (which may lie above the bound: serving
    /// then refuses with the reason). Allocates nothing.
    pub(super) fn value_of<'a>(
        &self,
        compiled: &Signature,
        inputs: impl ExactSizeIterator<Item = (DType, &'a [usize])>,
    ) -> Option<usize> {
        if compiled.0.len() != inputs.len() {
            return None;
        }
        let mut value = None;
        for (k, ((d, sh), (t, ts))) in compiled.0.iter().zip(inputs).enumerate() {
            if *d != t || sh.len() != ts.len() {
                return None;
            }
            let outer = self.inputs.contains(&k);
            for (j, (a, b)) in sh.iter().zip(ts).enumerate() {
                if outer && j == 0 {
                    if value.is_some_and(|v| v != *b) {
                        return None;
                    }
                    value = Some(*b);
                } else if a != b {
                    return None;
                }
            }
        }
        value
    }
}

/// A program scheduled at one value of the outer symbol, with its phases and artifacts.
struct Scheduled {
    program: Program,
    stats: CompileStats,
    artifacts: Vec<(String, String)>,
}

/// The outcome of trying a dynamic compile.
pub(super) enum Dyn {
    /// A specialization serving every value up to its bound.
    Compiled(Box<Specialization>),
    /// Why this graph cannot serve several values (kept: later compiles do not try again).
    Refused(String),
    /// As [`Dyn::Refused`], read from the cache's record of an earlier process's refusal.
    RefusedBefore(String),
    /// Not this time (a zero value), maybe another.
    Skipped,
}

/// The graph's outer symbol and the inputs it is the outermost dimension of, or why there is none.
pub(super) fn outer_symbol(g: &IrGraph) -> Result<(String, Vec<usize>), String> {
    let shapes: Vec<&[Dim]> = g.inputs.iter().map(|&i| g.ty(i).shape.dims()).collect();
    for dims in &shapes {
        let Some(Dim::Sym(s)) = dims.first() else { continue };
        let name = s.to_string();
        if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            continue;
        }
        // Anywhere else, alone or inside an expression (`2*batch`), the symbol is not outer.
        let mentions = |d: &Dim| match d {
            Dim::Sym(t) => t.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).any(|w| w == name),
            Dim::Static(_) => false,
        };
        let inner = shapes.iter().any(|d| {
            d.iter()
                .enumerate()
                .any(|(j, x)| mentions(x) && (j > 0 || !matches!(x, Dim::Sym(t) if t.to_string() == name)))
        });
        if inner {
            return Err(format!("symbol {name} is not only the outermost dimension of the inputs"));
        }
        let inputs =
            shapes.iter().enumerate().filter(|(_, d)| matches!(d.first(), Some(Dim::Sym(t)) if t.to_string() == name));
        return Ok((name.clone(), inputs.map(|(k, _)| k).collect()));
    }
    Err("no input has a symbolic outermost dimension".into())
}

/// `sig` with the outermost dimension of `inputs` set to `v`.
fn with_value(sig: &Signature, inputs: &[usize], v: usize) -> Signature {
    Signature(
        sig.0
            .iter()
            .enumerate()
            .map(|(k, (d, sh))| {
                let mut sh = sh.clone();
                if inputs.contains(&k)
                    && let Some(x) = sh.first_mut()
                {
                    *x = v;
                }
                (*d, sh)
            })
            .collect(),
    )
}

impl CompiledGraph {
    /// Compiles `sig` as a program serving every value of the outer symbol up to a bound, or says
    /// why not.
    pub(super) fn compile_dynamic(
        &self,
        sig: &Signature,
        stats: &mut CompileStats,
        artifacts: &mut Vec<(String, String)>,
    ) -> Result<Dyn, CompileError> {
        let Some(min) = self.opts.dynamic else {
            return Ok(Dyn::Refused("dynamic extents are off (CompileOptions::dynamic)".into()));
        };
        if !self.backend.serves_extents() {
            return Ok(Dyn::Refused(format!(
                "the {} backend cannot launch a program over smaller extents",
                self.backend.name()
            )));
        }
        let (sym, inputs) = match outer_symbol(&self.graph) {
            Ok(x) => x,
            Err(why) => return Ok(Dyn::Refused(why)),
        };
        let Some(v) = inputs.first().and_then(|&k| sig.0.get(k)).and_then(|(_, sh)| sh.first().copied()) else {
            return Ok(Dyn::Skipped);
        };
        if v == 0 {
            return Ok(Dyn::Skipped);
        }
        let first = v.max(min).max(4).next_power_of_two();
        let t = Instant::now();
        let key = self.cache_key(&with_value(sig, &inputs, first), &format!("dynamic {sym}"));
        stats.phases.push(("program_cache_key".into(), t.elapsed().as_secs_f64()));
        let mut loaded = None;
        let t = Instant::now();
        let cached = self.opts.cache_dir.as_deref().and_then(|d| cache_load(d, &key, self.graph_constants()));
        stats.phases.push(("program_cache_load".into(), t.elapsed().as_secs_f64()));
        if let Some(program) = cached
            && program.dynamic.is_some()
        {
            tracing::info!(target: "sinter::cache", "program cache hit {key}");
            if let Ok(exe) = self.load_program(&program, stats) {
                stats.cache_hit = true;
                loaded = Some((program, exe));
            }
        }
        if loaded.is_none()
            && let Some(why) = self.opts.cache_dir.as_deref().and_then(|d| cache::refusal_load(d, &key))
        {
            tracing::info!(target: "sinter::cache", "dynamic refusal cached {key}: {why}");
            return Ok(Dyn::RefusedBefore(why));
        }
        let (program, exe) = match loaded {
            Some(x) => x,
            None => {
                // (bound, probe) pairs: a decision that depends on an extent coinciding with a
                // static one (two iteration spaces equal only at that batch, fused horizontally)
                // makes a pair differ; other values then decide.
                let mut probe_s = 0.0;
                let mut at: BTreeMap<usize, Scheduled> = BTreeMap::new();
                let mut chosen = None;
                let mut first_why = None;
                // The first pair's two lowerings side by side: together they are most of an
                // attempt's cost, and of a refused one (ViT-B/16 in bf16: 0.43 s of a 1.5 s cold
                // compile on an H200's host, BENCHMARKS.md session 20).
                let pairs = [(first, first / 2), (first, first * 3 / 4), (2 * first, 3 * first / 2)];
                let (b0, p0) = pairs[0];
                let (rb, rp) = std::thread::scope(|s| {
                    let probe = s.spawn(|| self.schedule_dynamic(&with_value(sig, &inputs, p0), &sym, p0));
                    let rb = self.schedule_dynamic(&with_value(sig, &inputs, b0), &sym, b0);
                    (rb, probe.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
                });
                for (n, r) in [(b0, rb), (p0, rp)] {
                    match r? {
                        Ok(s) => at.insert(n, s),
                        Err(why) => return Ok(self.refused(&key, why)),
                    };
                }
                for (b, p) in pairs {
                    for n in [b, p] {
                        if let Entry::Vacant(e) = at.entry(n) {
                            match self.schedule_dynamic(&with_value(sig, &inputs, n), &sym, n)? {
                                Ok(s) => e.insert(s),
                                Err(why) => return Ok(self.refused(&key, first_why.unwrap_or(why))),
                            };
                        }
                    }
                    let t = Instant::now();
                    let derived = derive(&at[&b].program, &at[&p].program, &sym, b, p);
                    probe_s += t.elapsed().as_secs_f64();
                    match derived {
                        Ok(ext) => {
                            chosen = Some((b, ext));
                            break;
                        }
                        // Another pair of values cannot help (a site that scales with the symbol
                        // is not an outer extent): stop lowering more. ResNet-50 and ViT-B/16
                        // lowered and scheduled five times before the static compile.
                        Err(why) if !why.retry => {
                            first_why.get_or_insert(why.reason);
                            break;
                        }
                        Err(why) => {
                            first_why.get_or_insert(why.reason);
                        }
                    }
                }
                let Some((bound, ext)) = chosen else {
                    return Ok(self.refused(&key, first_why.unwrap_or_default()));
                };
                let Some(mut s) = at.remove(&bound) else {
                    return Ok(Dyn::Refused(format!("no program at {sym}={bound}")));
                };
                // The other programs' lowering and scheduling, and the comparisons: what serving
                // other values of the symbol cost beyond one compile.
                probe_s += at.values().flat_map(|o| o.stats.phases.iter().map(|p| p.1)).sum::<f64>();
                stats.phases.append(&mut s.stats.phases);
                stats.phases.push((format!("probes of {sym}"), probe_s));
                artifacts.append(&mut s.artifacts);
                let mut big = s.program;
                big.dynamic = Some(Box::new(ext));
                let exe = match self.load_and_store(&key, &big, stats) {
                    Ok(exe) => exe,
                    Err(BackendError::Unsupported { what, .. }) => {
                        // Not recorded (`load_and_store` keeps no refused program): the backend's
                        // own code decides this, and the key covers core's sources only.
                        return Ok(Dyn::Refused(format!("the backend refuses the program at {sym}={bound}: {what}")));
                    }
                    Err(e) => return Err(e.into()),
                };
                (big, exe)
            }
        };
        let Some(extents) = program.dynamic.as_deref().cloned() else {
            return Ok(Dyn::Refused("the cached program has no table of extents".into()));
        };
        let bound = extents.bound;
        let sig_b = with_value(sig, &inputs, bound);
        let dynamic = DynSpec { extents, inputs, current: bound, served: Vec::new() };
        let mut spec = Specialization { signature: sig_b, exec: Exec::Whole { program, exe }, dynamic: Some(dynamic) };
        let t = Instant::now();
        let served = self.serve(&mut spec, Some(v));
        stats.phases.push(("serve".into(), t.elapsed().as_secs_f64()));
        match served {
            Ok(()) => Ok(Dyn::Compiled(Box::new(spec))),
            Err(why) => Ok(Dyn::Refused(why)),
        }
    }

    /// A refusal found by lowering and scheduling (decided by core, whose sources the key covers),
    /// recorded under `key` for later processes ([`cache::refusal_load`]; a failed write only costs
    /// them the attempt).
    fn refused(&self, key: &str, why: String) -> Dyn {
        if let Some(dir) = self.opts.cache_dir.as_deref()
            && let Err(e) = cache::refusal_store(dir, key, &why)
        {
            tracing::warn!(target: "sinter::cache", "could not record the dynamic refusal {key}: {e}");
        }
        Dyn::Refused(why)
    }

    /// Lowers and schedules `sig` (the outer symbol at `n`) as a dynamic compile does
    /// (`constant_fold` keeping outer broadcasts, the batch kept outermost); `Err` says why this
    /// cannot be a dynamic program (lowering fails, graph breaks).
    fn schedule_dynamic(
        &self,
        sig: &Signature,
        sym: &str,
        n: usize,
    ) -> Result<Result<Scheduled, String>, CompileError> {
        let mut stats = CompileStats::default();
        let mut artifacts = Vec::new();
        let g = match self.lower(sig, &mut stats, &mut artifacts, true) {
            Ok(g) => g,
            Err(e) => return Ok(Err(format!("compiling at {sym}={n}: {e}"))),
        };
        self.keep_text(&mut artifacts, "ir_pre_fusion.txt", &g);
        if self.opts.graph_breaks {
            let breaks = partition::detect(&g, self.backend.caps());
            if !breaks.is_empty() {
                return Ok(Err(format!("{} node(s) break the graph", breaks.len())));
            }
        }
        let program = self.schedule_program(&g, &mut stats, true)?;
        Ok(Ok(Scheduled { program, stats, artifacts }))
    }

    /// Makes `spec`'s executable run at `value` of its outer symbol (`None`: the signature it was
    /// compiled for). Errors say why the value cannot be served.
    pub(super) fn serve(&self, spec: &mut Specialization, value: Option<usize>) -> Result<(), String> {
        let Some(d) = spec.dynamic.as_mut() else {
            return match value {
                None => Ok(()),
                Some(_) => Err("the program serves only its own shapes".into()),
            };
        };
        let v = value.unwrap_or(d.extents.bound);
        if d.current == v {
            return Ok(());
        }
        let Exec::Whole { program, exe } = &mut spec.exec else {
            return Err("a partitioned graph serves only its own shapes".into());
        };
        let at = if v == d.extents.bound {
            None
        } else if let Some(k) = d.served.iter().position(|(w, _)| *w == v) {
            let entry = d.served.remove(k);
            let q = Arc::clone(&entry.1);
            d.served.push(entry);
            Some(q)
        } else {
            let q = Arc::new(d.extents.at(program, v)?);
            // The outputs' shapes must be the graph's at this value: a quantity the two compiles
            // could not tell from a constant (`min(batch, 4)`) shows here.
            let sig = with_value(&spec.signature, &d.inputs, v);
            let g = super::retype(&self.graph, &sig).map_err(|e| format!("{}={v}: {e}", d.extents.symbol))?;
            for (o, io) in g.outputs.iter().zip(&q.outputs) {
                let ty = g.ty(o.node);
                if ty.shape.as_static().as_deref() != Some(io.shape.as_slice()) || ty.dtype != io.dtype {
                    return Err(format!(
                        "{}={v}: output {:?} would be {:?}, the graph says {}",
                        d.extents.symbol, io.name, io.shape, ty.shape
                    ));
                }
            }
            if d.served.len() >= KEEP {
                d.served.remove(0);
            }
            d.served.push((v, Arc::clone(&q)));
            Some(q)
        };
        exe.set_extent(at).map_err(|e| format!("{}={v}: {e}", d.extents.symbol))?;
        d.current = v;
        Ok(())
    }
}
