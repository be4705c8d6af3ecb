//! Planning state: the scheduler's view of the graph ([`Sched`]: node kinds, users, outputs, which
//! nodes are materialized and which kernel holds each), stage B's walk in topological order, and
//! the queries every placement shares (a node's inline tree and the buffers it reads, the latest
//! kernel it depends on) and the decision log. Legality is decided by emitting into a copy of the
//! candidate kernel (a refusal names its reason); profitability by the
//! [`CostModel`](super::CostModel).
//!
//! The jobs live beside it: `inline.rs` (stage A: what is materialized), `member_plan.rs`
//! (materialized nodes: epilogue, vertical and horizontal fusion), `bindings.rs` (binding counts
//! and splitting kernels that bind too many buffers), `reduce_plan.rs` (reductions),
//! `matmul_plan.rs` (matmuls and their strided operands), `prologue.rs` (fp8 operands read by
//! the matmul, widened in the loader), `conv.rs` (convolutions lowered to
//! matmuls: direct or im2col) and `window_plan.rs` (window kernels: convolutions and poolings).

use super::ScheduleOptions;
use super::build::{BufRef, KernelBuilder, Phase, Space};
use super::conv::ConvPlan;
use super::emit::Refusal;
use crate::dtype::DType;
use crate::error::Error;
use crate::ir::{Graph as IrGraph, NodeId, Op};
use crate::kernel::{Capabilities, RedOp};
use std::collections::{BTreeMap, BTreeSet};

/// What the scheduler does with a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    /// Graph input with this position.
    Input(usize),
    /// Constant.
    Constant,
    /// Elementwise op.
    Pointwise,
    /// Movement op (index arithmetic).
    Movement,
    /// Gather / GatherElements (index from a loaded value).
    Gather,
    /// Reduce.
    Reduce,
    /// ArgReduce.
    ArgReduce,
    /// MatMul.
    MatMul,
    /// Conv2d.
    Conv,
    /// Pool2d.
    Pool,
}

impl Kind {
    /// Computable inline inside any consumer.
    pub(super) fn inlinable(self) -> bool {
        matches!(self, Kind::Pointwise | Kind::Movement | Kind::Gather)
    }
}

/// A decision before kernels are named.
#[derive(Clone, Debug)]
pub(super) struct Decision {
    pub nodes: Vec<u32>,
    pub fused: bool,
    pub reason: String,
    pub kernels: Vec<usize>,
}

/// The scheduler's state.
pub(super) struct Sched<'g> {
    pub g: &'g IrGraph,
    pub caps: &'g Capabilities,
    pub opts: &'g ScheduleOptions,
    pub shapes: Vec<Vec<usize>>,
    pub kind: Vec<Kind>,
    pub live: Vec<bool>,
    /// Distinct live users of each node.
    pub users: Vec<Vec<NodeId>>,
    /// Output positions naming each node.
    pub outputs_of: Vec<Vec<usize>>,
    /// Stage A: materialized inlinable nodes.
    pub materialized: Vec<bool>,
    /// Stage B: the kernel computing each materialized node or root.
    pub place: Vec<Option<usize>>,
    pub kernels: Vec<KernelBuilder>,
    pub decisions: Vec<Decision>,
    /// Matmul operand copies (and im2col buffers): (dtype, numel).
    pub copies: Vec<(DType, usize)>,
    /// How each convolution is computed (`Window` for every other node).
    pub conv: Vec<ConvPlan>,
    /// The storage order of a materialized node's buffer when it is not its logical row-major
    /// order: `p` such that the buffer is the row-major `[shape[p[0]], shape[p[1]], ...]`
    /// (channels-last: `[0, 2, 3, 1]`; decided in `plan_convs`, never for graph inputs,
    /// constants or outputs). Loads and stores of the node go through [`Sched::storage_index`].
    pub layout: Vec<Option<Vec<usize>>>,
    /// The attention chain each fused attention's second product ends.
    pub attn: Vec<Option<super::attention::AttnMatch>>,
    /// Nodes computed inside a fused attention kernel (not scheduled on their own).
    pub inner_attn: Vec<bool>,
    /// Matmuls that read their operands as this fp8 dtype (`prologue.rs`).
    pub prologue: Vec<Option<DType>>,
    /// Count one binding per buffer instead of the cost model's count (set while placing a kernel
    /// that nothing can be split off any more: the backend then checks its exact binding count).
    pub one_binding_per_buffer: std::cell::Cell<bool>,
}

pub(super) fn numel(s: &[usize]) -> usize {
    s.iter().product()
}

/// Accumulator dtype of a reduction of `dt` values.
pub(super) fn acc_dtype(op: RedOp, dt: DType) -> DType {
    match op {
        RedOp::ArgMax | RedOp::ArgMin => DType::I64,
        _ if dt == DType::F64 => DType::F64,
        _ if dt.is_float() => DType::F32,
        RedOp::Sum | RedOp::Prod if dt == DType::U64 => DType::U64,
        RedOp::Sum | RedOp::Prod => DType::I64,
        _ => dt,
    }
}

impl<'g> Sched<'g> {
    /// Checks the graph and classifies its nodes.
    pub(super) fn new(g: &'g IrGraph, caps: &'g Capabilities, opts: &'g ScheduleOptions) -> Result<Sched<'g>, Error> {
        crate::verify::verify(g)?;
        if caps.max_bindings < 4 {
            return Err(Error::Unsupported(format!(
                "schedule: backend {} allows {} bindings per kernel; at least 4 are needed",
                caps.backend, caps.max_bindings
            )));
        }
        let n = g.nodes.len();
        let mut shapes = Vec::with_capacity(n);
        let mut kind = Vec::with_capacity(n);
        for (id, node) in g.iter() {
            let s = node.ty.shape.as_static().ok_or_else(|| {
                Error::Unsupported(format!(
                    "schedule: {id} ({}) has symbolic type {}; specialize the graph first",
                    node.op.name(),
                    node.ty
                ))
            })?;
            if node.op.is_composite() {
                return Err(Error::Unsupported(format!(
                    "schedule: {id} is the composite op {}; run the decompose pass first",
                    node.op.name()
                )));
            }
            if let Some(why) = crate::partition::unsupported_reason(node, caps) {
                return Err(Error::Unsupported(format!("schedule: {id} ({}): {why}", node.op.name())));
            }
            shapes.push(s);
            kind.push(match &node.op {
                Op::Input { .. } => Kind::Input(g.inputs.iter().position(|&i| i == id).ok_or_else(|| {
                    Error::Unsupported(format!("schedule: input node {id} is not listed in the graph's inputs"))
                })?),
                Op::Constant(_) => Kind::Constant,
                Op::Unary(_) | Op::Binary(_) | Op::Where | Op::Cast(_) => Kind::Pointwise,
                op if op.is_movement() => Kind::Movement,
                Op::Gather { .. } | Op::GatherElements { .. } => Kind::Gather,
                Op::Reduce { .. } => Kind::Reduce,
                Op::ArgReduce { .. } => Kind::ArgReduce,
                Op::MatMul => Kind::MatMul,
                Op::Conv2d { .. } => Kind::Conv,
                Op::Pool2d { .. } => Kind::Pool,
                other => return Err(Error::Unsupported(format!("schedule: op {} is not a primitive", other.name()))),
            });
        }
        let mut live = vec![false; n];
        let mut outputs_of = vec![Vec::new(); n];
        for (k, o) in g.outputs.iter().enumerate() {
            live[o.node.index()] = true;
            outputs_of[o.node.index()].push(k);
        }
        for i in (0..n).rev() {
            if live[i] {
                for a in &g.nodes[i].inputs {
                    live[a.index()] = true;
                }
            }
        }
        let mut users = vec![Vec::new(); n];
        for (id, node) in g.iter() {
            if !live[id.index()] {
                continue;
            }
            for a in &node.inputs {
                let u: &mut Vec<NodeId> = &mut users[a.index()];
                if !u.contains(&id) {
                    u.push(id);
                }
            }
        }
        let mut s = Sched {
            g,
            caps,
            opts,
            shapes,
            kind,
            live,
            users,
            outputs_of,
            materialized: vec![false; n],
            place: vec![None; n],
            kernels: Vec::new(),
            decisions: Vec::new(),
            copies: Vec::new(),
            conv: vec![ConvPlan::Window; n],
            layout: vec![None; n],
            attn: vec![None; n],
            inner_attn: vec![false; n],
            prologue: vec![None; n],
            one_binding_per_buffer: std::cell::Cell::new(false),
        };
        s.plan_convs();
        s.plan_attention();
        s.plan_prologues();
        Ok(s)
    }

    pub(super) fn decide(&mut self, nodes: Vec<u32>, fused: bool, reason: impl Into<String>, kernels: Vec<usize>) {
        self.decisions.push(Decision { nodes, fused, reason: reason.into(), kernels });
    }

    pub(super) fn numel_of(&self, n: NodeId) -> usize {
        numel(&self.shapes[n.index()])
    }
}

impl Sched<'_> {
    /// Assigns every materialized node and root to a kernel, in topological order.
    pub(super) fn stage_b(&mut self) -> Result<(), Error> {
        for i in 0..self.g.nodes.len() {
            if !self.live[i] || self.inner_attn[i] {
                continue;
            }
            let id = NodeId(i as u32);
            let empty = self.numel_of(id) == 0;
            match self.kind[i] {
                Kind::Input(_) | Kind::Constant => {
                    if !self.outputs_of[i].is_empty() && !empty {
                        self.sched_member(id)?;
                    }
                }
                k if k.inlinable() => {
                    if self.materialized[i] && !empty {
                        self.sched_member(id)?;
                    }
                }
                _ if empty => {}
                Kind::Reduce | Kind::ArgReduce => self.sched_reduction(id)?,
                Kind::MatMul if self.attn[i].is_some() => self.sched_attention(id)?,
                Kind::MatMul => self.sched_matmul(id)?,
                _ => self.sched_window(id)?,
            }
        }
        Ok(())
    }

    /// The latest kernel any node of `n`'s inline tree (operands, recursively through unplaced
    /// inlinable nodes) comes from.
    pub(super) fn dep_kernel(&self, n: NodeId) -> Option<usize> {
        let mut best = None;
        let mut seen = BTreeSet::new();
        let mut stack: Vec<NodeId> = self.g.node(n).inputs.clone();
        while let Some(x) = stack.pop() {
            if !seen.insert(x) {
                continue;
            }
            if let Some(k) = self.place[x.index()] {
                best = best.max(Some(k));
            } else if self.kind[x.index()].inlinable() {
                stack.extend(self.g.node(x).inputs.iter().copied());
            }
        }
        best
    }

    /// The buffers `n`'s inline tree reads (with their byte sizes), and the inline nodes in it.
    pub(super) fn tree(&self, n: NodeId) -> (BTreeMap<BufRef, usize>, Vec<NodeId>) {
        let mut reads = BTreeMap::new();
        let mut inner = Vec::new();
        let mut seen = BTreeSet::new();
        let mut stack: Vec<NodeId> = self.g.node(n).inputs.clone();
        while let Some(x) = stack.pop() {
            if !seen.insert(x) {
                continue;
            }
            let bytes = self.numel_of(x) * self.g.ty(x).dtype.size_bytes();
            match self.kind[x.index()] {
                Kind::Input(k) => {
                    reads.insert(BufRef::Input(k), bytes);
                }
                Kind::Constant if self.numel_of(x) > 1 => {
                    reads.insert(BufRef::Constant(x), bytes);
                }
                Kind::Constant => {}
                _ if self.place[x.index()].is_some() => {
                    reads.insert(BufRef::Node(x), bytes);
                }
                k if k.inlinable() => {
                    inner.push(x);
                    stack.extend(self.g.node(x).inputs.iter().copied());
                }
                _ => {}
            }
        }
        (reads, inner)
    }

    /// The buffers reading node `x` costs, with their byte sizes: itself when it is a buffer,
    /// else its inline tree's.
    pub(super) fn reads_of(&self, x: NodeId) -> BTreeMap<BufRef, usize> {
        let bytes = self.numel_of(x) * self.g.ty(x).dtype.size_bytes();
        match self.kind[x.index()] {
            Kind::Input(k) => [(BufRef::Input(k), bytes)].into(),
            Kind::Constant if self.numel_of(x) > 1 => [(BufRef::Constant(x), bytes)].into(),
            Kind::Constant => BTreeMap::new(),
            _ if self.place[x.index()].is_some() => [(BufRef::Node(x), bytes)].into(),
            _ => self.tree(x).0,
        }
    }

    /// Element type and count of a buffer.
    pub(super) fn buf_info(&self, b: &BufRef) -> (DType, usize) {
        match b {
            BufRef::Input(k) => {
                let id = self.g.inputs[*k];
                (self.g.ty(id).dtype, self.numel_of(id))
            }
            BufRef::Constant(x) | BufRef::Node(x) => (self.g.ty(*x).dtype, self.numel_of(*x)),
            BufRef::Operand(i) => self.copies[*i],
        }
    }

    pub(super) fn internal(r: Refusal, s: &Sched) -> Error {
        Error::Unsupported(format!("schedule: {}", r.reason(s).trim_start_matches("refused: ")))
    }

    fn fused_reason(&self, k: usize, phase_of: NodeId) -> String {
        let kb = &self.kernels[k];
        let ph = kb.member(phase_of).map(|m| m.phase);
        match (&kb.space, ph) {
            (Space::Reduce { .. }, Some(Phase::Elem)) => "fused: reduction epilogue (elementwise)".into(),
            (Space::Reduce { .. }, _) => "fused: reduction epilogue (per row)".into(),
            (Space::Window { .. }, _) => "fused: window epilogue (per output element)".into(),
            (Space::Matmul { .. }, _) => "fused: matmul epilogue".into(),
            (Space::Attention { .. }, _) => "fused: attention epilogue".into(),
            (Space::Pointwise { .. }, _) => "fused: vertical pointwise".into(),
        }
    }

    /// Records the outcome of trying to join node `n` into kernel `k`: on success the kernel is
    /// replaced and the join recorded as fused (`reason`, else [`Sched::fused_reason`]), and the
    /// result is `true`; a refusal is recorded with its reason (`false`); an internal error stops
    /// scheduling.
    pub(super) fn settle(
        &mut self,
        k: usize,
        n: NodeId,
        attempt: Result<KernelBuilder, Refusal>,
        reason: Option<&str>,
    ) -> Result<bool, Error> {
        let mut nodes = self.first_member(k);
        nodes.push(n.0);
        match attempt {
            Ok(kb) => {
                self.kernels[k] = kb;
                self.place[n.index()] = Some(k);
                let why = reason.map_or_else(|| self.fused_reason(k, n), str::to_string);
                self.decide(nodes, true, why, vec![k]);
                Ok(true)
            }
            Err(Refusal::Internal(m)) => Err(Self::internal(Refusal::Internal(m), self)),
            Err(r) => {
                let why = r.reason(self);
                self.decide(nodes, false, why, vec![k]);
                Ok(false)
            }
        }
    }

    pub(super) fn first_member(&self, k: usize) -> Vec<u32> {
        self.kernels[k].member_nodes().take(1).map(|n| n.0).collect()
    }
}

impl Sched<'_> {
    /// The element of node `n`'s buffer holding logical coordinates `c` (its [`Sched::layout`]).
    pub(super) fn storage_index(&self, n: NodeId, c: &[crate::kernel::Index]) -> crate::kernel::Index {
        let shape = &self.shapes[n.index()];
        match &self.layout[n.index()] {
            Some(p) => {
                let pc: Vec<crate::kernel::Index> = p.iter().map(|&i| c[i].clone()).collect();
                let ps: Vec<usize> = p.iter().map(|&i| shape[i]).collect();
                super::build::linearize(&pc, &ps)
            }
            None => super::build::linearize(c, shape),
        }
    }
}
