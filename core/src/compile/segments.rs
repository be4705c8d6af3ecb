//! Running a partitioned graph (graph breaks): compiled segments on the backend, fallback segments
//! on the CPU reference, in the partition's order.
//!
//! * Values move between segments as host tensors in [`Segmented::run`] and
//!   [`Segmented::run_timed`]; [`Segmented::run_device`] keeps compiled segments' values on the
//!   device (a later compiled segment reads them without a copy), downloads only what a fallback
//!   segment reads and uploads what it returns.
//! * Kernels of compiled segment `n` are named `s<n>_<kernel>` (names stay unique across segments:
//!   timings, sources and the profile match kernels by name); a fallback segment is timed as one
//!   `cpu_fallback_<n>` entry of host wall time. In [`Segmented::run_timed`] each segment's device
//!   timings are placed at the host time its segment started, relative to the run's start.
//! * A compiled segment the backend refuses to load (`BackendError::Unsupported`, e.g. a constant
//!   outside WGSL's 32-bit emulation of i64) adds breaks and the graph is partitioned again: the
//!   nodes of the kernel named in the refusal, else every node of the segment. A compiled segment
//!   whose *run* is refused as unsupported (an input value the device cannot hold, made by a
//!   fallback segment) runs that call on the CPU reference, with a warning on
//!   `sinter::graph_breaks` (and no timing entry).

use super::{CompileError, CompileStats, CompiledGraph, artifacts};
use crate::backend::{Backend, BackendError, DeviceTensor, Executable, KernelSource, KernelTiming};
use crate::ir::{Graph as IrGraph, NodeId};
use crate::kernel::{FusionDecision, Program};
use crate::partition::{self, GraphBreak, Side, ValueRef};
use crate::tensor::HostTensor;
use std::collections::BTreeSet;
use std::path::Path;
use std::time::Instant;

/// Who runs one segment.
pub(super) enum Runner {
    /// The backend (`graph`: the segment, for a run whose values the device refuses).
    Compiled { program: Box<Program>, exe: Box<dyn Executable>, graph: IrGraph },
    /// The CPU reference.
    Fallback { graph: IrGraph },
}

/// One segment ready to run.
pub(super) struct SegExec {
    /// `s<n>` or `cpu_fallback_<n>`.
    pub(super) name: String,
    /// Where its inputs come from.
    inputs: Vec<ValueRef>,
    /// Who runs it.
    pub(super) runner: Runner,
    /// The captured-graph nodes it computes and their user-level ops (for the profile).
    pub(super) origins: Vec<u32>,
    pub(super) ops: Vec<String>,
}

impl SegExec {
    /// True for a segment on the backend.
    pub(super) fn is_compiled(&self) -> bool {
        matches!(self.runner, Runner::Compiled { .. })
    }
}

/// A partitioned specialization.
pub(super) struct Segmented {
    pub(super) segments: Vec<SegExec>,
    outputs: Vec<ValueRef>,
    pub(super) breaks: Vec<GraphBreak>,
}

/// The breaks a backend's load refusal implies: the nodes of the kernel `what` names (through the
/// program's fusion decisions), else every computed node of the graph. `ids` maps the program's
/// node ids to the partitioned graph's (`None`: the same).
pub(super) fn breaks_from_refusal(
    backend: &str,
    g: &IrGraph,
    program: &Program,
    ids: Option<&[Option<NodeId>]>,
    what: &str,
) -> Vec<GraphBreak> {
    let kernel = program
        .kernels
        .iter()
        .filter(|k| what.contains(&format!("{}:", k.name)) || what.contains(&format!("{} ", k.name)))
        .max_by_key(|k| k.name.len());
    let map = |n: u32| match ids {
        None => Some(NodeId(n)),
        Some(m) => m.get(n as usize).copied().flatten(),
    };
    let mut nodes: BTreeSet<NodeId> = BTreeSet::new();
    if let Some(k) = kernel {
        for d in program.decisions.iter().filter(|d| d.kernels.contains(&k.name)) {
            nodes.extend(d.nodes.iter().filter_map(|&n| map(n)));
        }
    }
    if nodes.is_empty() {
        nodes = match ids {
            None => g.iter().map(|(id, _)| id).collect(),
            Some(m) => m.iter().filter_map(|x| *x).collect(),
        };
    }
    let reason = format!("the {backend} backend refused it: {what}");
    nodes
        .into_iter()
        .filter(|&id| !matches!(g.node(id).op, crate::ir::Op::Input { .. } | crate::ir::Op::Constant(_)))
        .map(|id| {
            let n = g.node(id);
            GraphBreak {
                node: id.0,
                op: partition::describe(n),
                origin: n.origin.node,
                origin_op: n.origin.op.to_string(),
                reason: reason.clone(),
                segment: 0,
            }
        })
        .collect()
}

impl Segmented {
    /// Partitions `g` (lowered) at `breaks`, schedules and loads every compiled segment; a load
    /// refusal adds breaks and partitions again.
    pub(super) fn build(
        cg: &CompiledGraph,
        g: &IrGraph,
        mut breaks: Vec<GraphBreak>,
        stats: &mut CompileStats,
    ) -> Result<Segmented, CompileError> {
        'partition: loop {
            let part = partition::partition(g, &breaks)?;
            let mut segments = Vec::with_capacity(part.segments.len());
            for (i, seg) in part.segments.into_iter().enumerate() {
                let origins: BTreeSet<u32> = seg.nodes.iter().map(|&n| g.node(n).origin.node).collect();
                let mut ops: Vec<String> = Vec::new();
                for &n in &seg.nodes {
                    let op = g.node(n).origin.op.to_string();
                    if !ops.contains(&op) {
                        ops.push(op);
                    }
                }
                let (name, runner) = match seg.side {
                    Side::Fallback => (format!("cpu_fallback_{i}"), Runner::Fallback { graph: seg.graph }),
                    Side::Compiled => {
                        let mut program = cg.schedule_program(&seg.graph, stats, false)?;
                        rename_kernels(&mut program, &format!("s{i}_"));
                        match cg.load_program(&program, stats) {
                            Ok(exe) => (
                                format!("s{i}"),
                                Runner::Compiled { program: Box::new(program), exe, graph: seg.graph },
                            ),
                            Err(BackendError::Unsupported { what, .. }) => {
                                let more =
                                    breaks_from_refusal(cg.backend.name(), g, &program, Some(&seg.source), &what);
                                let known: BTreeSet<u32> = breaks.iter().map(|b| b.node).collect();
                                let before = breaks.len();
                                breaks.extend(more.into_iter().filter(|b| !known.contains(&b.node)));
                                if breaks.len() == before {
                                    return Err(
                                        BackendError::Unsupported { backend: cg.backend.name().into(), what }.into()
                                    );
                                }
                                continue 'partition;
                            }
                            Err(e) => return Err(e.into()),
                        }
                    }
                };
                segments.push(SegExec {
                    name,
                    inputs: seg.inputs,
                    runner,
                    origins: origins.into_iter().collect(),
                    ops,
                });
            }
            return Ok(Segmented { segments, outputs: part.outputs, breaks: part.breaks });
        }
    }

    /// Compiled segments.
    pub(super) fn compiled_count(&self) -> usize {
        self.segments.iter().filter(|s| s.is_compiled()).count()
    }

    /// Every compiled segment's program, in run order.
    pub(super) fn programs(&self) -> Vec<&Program> {
        self.segments
            .iter()
            .filter_map(|s| match &s.runner {
                Runner::Compiled { program, .. } => Some(program.as_ref()),
                Runner::Fallback { .. } => None,
            })
            .collect()
    }

    /// Every compiled segment's kernel sources, in run order.
    pub(super) fn sources(&self) -> Vec<KernelSource> {
        self.segments
            .iter()
            .flat_map(|s| match &s.runner {
                Runner::Compiled { exe, .. } => exe.sources(),
                Runner::Fallback { .. } => Vec::new(),
            })
            .collect()
    }

    /// Runs with host inputs and returns host outputs.
    pub(super) fn run(&mut self, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, CompileError> {
        let vals = self.exec(None, inputs.iter().cloned().map(Val::Host).collect(), None)?;
        vals.into_iter().map(|v| v.host().map_err(CompileError::from)).collect()
    }

    /// Runs with device inputs and returns device outputs (see the module notes).
    pub(super) fn run_device(
        &mut self,
        backend: &dyn Backend,
        inputs: &[DeviceTensor],
    ) -> Result<Vec<DeviceTensor>, CompileError> {
        let vals = self.exec(Some(backend), inputs.iter().cloned().map(Val::Dev).collect(), None)?;
        vals.into_iter().map(|v| v.dev(backend).map_err(CompileError::from)).collect()
    }

    /// Runs `iters` times; per run, every kernel's device timing and every fallback segment's
    /// host time (see the module notes).
    pub(super) fn run_timed(
        &mut self,
        inputs: &[HostTensor],
        iters: usize,
    ) -> Result<(Vec<HostTensor>, Vec<Vec<KernelTiming>>), CompileError> {
        let mut runs = Vec::with_capacity(iters.max(1));
        let mut last = Vec::new();
        for _ in 0..iters.max(1) {
            let mut t = Vec::new();
            last = self.exec(None, inputs.iter().cloned().map(Val::Host).collect(), Some(&mut t))?;
            runs.push(t);
        }
        let outs = last.into_iter().map(|v| v.host().map_err(CompileError::from)).collect::<Result<_, _>>()?;
        Ok((outs, runs))
    }

    /// Runs every segment in order. `device`: keep compiled values on this backend's device.
    fn exec(
        &mut self,
        device: Option<&dyn Backend>,
        inputs: Vec<Val>,
        mut timings: Option<&mut Vec<KernelTiming>>,
    ) -> Result<Vec<Val>, CompileError> {
        let start = Instant::now();
        let mut values: Vec<Vec<Val>> = Vec::with_capacity(self.segments.len());
        let read = |r: &ValueRef, values: &Vec<Vec<Val>>| -> Result<Val, CompileError> {
            Ok(match r {
                ValueRef::Input(k) => {
                    inputs.get(*k).cloned().ok_or_else(|| crate::Error::Input(format!("graph input {k} missing")))?
                }
                ValueRef::Segment { segment, output } => values
                    .get(*segment)
                    .and_then(|v| v.get(*output))
                    .cloned()
                    .ok_or_else(|| crate::Error::Input(format!("segment {segment} output {output} missing")))?,
                ValueRef::Constant(t) => Val::Host((**t).clone()),
            })
        };
        for seg in &mut self.segments {
            let ins = seg.inputs.iter().map(|r| read(r, &values)).collect::<Result<Vec<_>, _>>()?;
            let at = start.elapsed().as_secs_f64() * 1e9;
            let outs = match (&mut seg.runner, device) {
                (Runner::Compiled { exe, graph, .. }, device) => {
                    let ran: Result<Vec<Val>, BackendError> = (|| match device {
                        Some(b) => {
                            let ins = ins.iter().map(|v| v.dev(b)).collect::<Result<Vec<_>, _>>()?;
                            Ok(exe.run_device(&ins)?.into_iter().map(Val::Dev).collect())
                        }
                        None => {
                            let ins = ins.iter().map(Val::host).collect::<Result<Vec<_>, _>>()?;
                            let outs = match timings.as_deref_mut() {
                                Some(t) => {
                                    let (outs, runs) = exe.run_timed(&ins, 1)?;
                                    for k in runs.into_iter().flatten() {
                                        t.push(KernelTiming { start_ns: at + k.start_ns, ..k });
                                    }
                                    outs
                                }
                                None => exe.run(&ins)?,
                            };
                            Ok(outs.into_iter().map(Val::Host).collect())
                        }
                    })();
                    match ran {
                        Ok(v) => v,
                        // A value the device cannot hold (an i64 outside WGSL's 32-bit
                        // emulation, made by a fallback segment): this run of the segment goes to
                        // the CPU reference.
                        Err(BackendError::Unsupported { what, .. }) => {
                            tracing::warn!(
                                target: "sinter::graph_breaks",
                                "segment {} runs on the CPU reference for this call: {what}",
                                seg.name
                            );
                            // Timed as a fallback segment is: a run's span must cover it.
                            let name = format!("{} (CPU reference for this call)", seg.name);
                            on_cpu(graph, &ins, name, (start, at), timings.as_deref_mut())?
                        }
                        Err(e) => return Err(e.into()),
                    }
                }
                (Runner::Fallback { graph }, _) => {
                    on_cpu(graph, &ins, seg.name.clone(), (start, at), timings.as_deref_mut())?
                }
            };
            values.push(outs);
        }
        self.outputs.iter().map(|r| read(r, &values)).collect()
    }

    /// Writes the debug artifacts of a partitioned compilation (see `artifacts`).
    pub(super) fn write_artifacts(
        &self,
        dir: &Path,
        captured: &IrGraph,
        sources: &[KernelSource],
        extra: &[(String, String)],
    ) -> Result<(), CompileError> {
        let mut post = String::new();
        let mut decisions: Vec<&FusionDecision> = Vec::new();
        for (i, s) in self.segments.iter().enumerate() {
            match &s.runner {
                Runner::Compiled { program, .. } => {
                    post.push_str(&format!("# segment {i}: {} (compiled)\n", s.name));
                    post.push_str(&crate::kernel::print::print_program(program));
                    decisions.extend(&program.decisions);
                    let json = serde_json::to_string(program).unwrap_or_default();
                    artifacts::write_segment(dir, &format!("{i:02}_{}.json", s.name), &json)?;
                }
                Runner::Fallback { graph } => {
                    let text = crate::text::print(graph);
                    post.push_str(&format!("# segment {i}: {} (CPU reference)\n{text}\n", s.name));
                    artifacts::write_segment(dir, &format!("{i:02}_{}.txt", s.name), &text)?;
                }
            }
        }
        artifacts::write_common(dir, captured, &post, &decisions, sources, extra)
    }
}

/// Prefixes every kernel name (and the fusion decisions' references to them).
fn rename_kernels(p: &mut Program, prefix: &str) {
    for k in &mut p.kernels {
        k.name = format!("{prefix}{}", k.name);
    }
    for d in &mut p.decisions {
        for k in &mut d.kernels {
            *k = format!("{prefix}{k}");
        }
    }
}

/// A value between segments: on the host or on the backend's device.
#[derive(Clone)]
enum Val {
    Host(HostTensor),
    Dev(DeviceTensor),
}

impl Val {
    fn host(&self) -> Result<HostTensor, BackendError> {
        match self {
            Val::Host(t) => Ok(t.clone()),
            Val::Dev(d) => d.to_host(),
        }
    }

    /// On `b`'s device: host values (and host-resident device tensors) are uploaded; a value of a
    /// dtype the device cannot hold (an f64 output of a fallback segment) stays host-resident.
    fn dev(&self, b: &dyn Backend) -> Result<DeviceTensor, BackendError> {
        let up = |t: &HostTensor| match b.upload(t) {
            Err(BackendError::Unsupported { .. }) => Ok(DeviceTensor::host(t)),
            r => r,
        };
        match self {
            Val::Host(t) => up(t),
            Val::Dev(d) if d.backend() == "host" => up(&d.to_host()?),
            Val::Dev(d) => Ok(d.clone()),
        }
    }
}

/// Runs `graph` on the CPU reference with `ins` and, when timing, records it as `kernel` from
/// `at` ns after the run's `start` until now (fallback segments, and compiled ones that refused
/// this call).
fn on_cpu(
    graph: &IrGraph,
    ins: &[Val],
    kernel: String,
    (start, at): (Instant, f64),
    timings: Option<&mut Vec<KernelTiming>>,
) -> Result<Vec<Val>, CompileError> {
    let ins = ins.iter().map(Val::host).collect::<Result<Vec<_>, _>>()?;
    let outs = crate::cpu::run(graph, &ins)?;
    if let Some(t) = timings {
        t.push(KernelTiming { kernel, start_ns: at, dur_ns: start.elapsed().as_secs_f64() * 1e9 - at });
    }
    Ok(outs.into_iter().map(Val::Host).collect())
}
