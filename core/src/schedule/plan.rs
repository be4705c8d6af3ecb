//! Planning: which nodes are materialized (stage A, lowering-time inlining as Inductor does it) and
//! which kernel computes each materialized node (stage B, fusion). Legality is decided by emitting
//! into a copy of the candidate kernel (a refusal names its reason); profitability by the
//! [`CostModel`](super::CostModel).

use super::build::{
    BufRef, KernelBuilder, MatOut, MatRef, MatSpec, Member, Phase, Space, Target, delinearize, linearize,
};
use super::emit::Refusal;
use super::{ConvShape, ScheduleOptions};
use crate::dtype::DType;
use crate::error::Error;
use crate::ir::{ArgOp, BinaryOp, Graph as IrGraph, NodeId, Op, PoolKind, ReduceOp, UnaryOp, Window2d};
use crate::kernel::{Capabilities, Expr, ExprId, Index, IndexCmp, RedOp, Reduction, Var};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// The longest chain of producers inlined into one consumer: deeper chains are cut by
/// materializing, which bounds the recursion of emission (and the size of one kernel).
pub(super) const MAX_INLINE_DEPTH: usize = 400;

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

/// How a convolution is computed (decided before stage A: legality here, profitability by the
/// [`CostModel`](super::CostModel)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ConvPlan {
    /// A window kernel: one thread per output element looping over `C/groups * kh * kw` taps.
    Window,
    /// A 1x1, stride-1, unpadded, ungrouped convolution is a plain batched matmul on strided views:
    /// `out[b] = W[OC, C] @ x[b][C, H*W]` (batch over images, the weight broadcast), no copy.
    Direct,
    /// An im2col gather kernel writes `cols[g][C/groups * kh * kw, N * OH * OW]` (taps outside the
    /// image read 0), then one matmul per group, batched over groups, `W[g] @ cols[g]`, stores NCHW.
    Im2col,
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
    /// Count one binding per buffer instead of one per window (set while placing a kernel that
    /// nothing can be split off any more: the backend then checks the exact window count).
    pub one_binding_per_buffer: std::cell::Cell<bool>,
}

fn numel(s: &[usize]) -> usize {
    s.iter().product()
}

/// The op weight used by the inline cost (transcendentals count more).
fn weight(op: &Op) -> usize {
    match op {
        Op::Unary(u) => match u {
            UnaryOp::Neg | UnaryOp::Abs | UnaryOp::Relu | UnaryOp::Not | UnaryOp::Sign => 1,
            UnaryOp::Floor | UnaryOp::Ceil | UnaryOp::Round | UnaryOp::IsNan | UnaryOp::IsInf => 1,
            UnaryOp::Sqrt | UnaryOp::Rsqrt | UnaryOp::Reciprocal => 2,
            _ => 4,
        },
        Op::Binary(crate::ir::BinaryOp::Pow) => 4,
        Op::Binary(crate::ir::BinaryOp::Div | crate::ir::BinaryOp::Mod | crate::ir::BinaryOp::FMod) => 2,
        Op::Binary(_) | Op::Where | Op::Cast(_) => 1,
        Op::Concat { .. } | Op::Pad { .. } | Op::Gather { .. } | Op::GatherElements { .. } => 1,
        _ => 0,
    }
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

/// The most negative (or positive) value of a dtype, as a max (min) pooling fill.
fn lowest(dt: DType) -> f64 {
    match dt {
        d if d.is_float() => f64::NEG_INFINITY,
        DType::I8 => i8::MIN as f64,
        DType::I16 => i16::MIN as f64,
        DType::I32 => i32::MIN as f64,
        DType::I64 => i64::MIN as f64,
        _ => 0.0,
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
            if !caps.dtypes.contains(&node.ty.dtype) {
                return Err(Error::Unsupported(format!(
                    "schedule: {id} ({}) has dtype {}, which the {} backend does not support",
                    node.op.name(),
                    node.ty.dtype,
                    caps.backend
                )));
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
            one_binding_per_buffer: std::cell::Cell::new(false),
        };
        s.plan_convs();
        Ok(s)
    }

    /// Chooses how every live convolution is computed and records why.
    fn plan_convs(&mut self) {
        for i in 0..self.g.nodes.len() {
            let id = NodeId(i as u32);
            let Op::Conv2d { window, groups } = self.g.node(id).op else { continue };
            if !self.live[i] || self.numel_of(id) == 0 {
                continue;
            }
            let (plan, reason) = self.conv_choice(id, &window, groups);
            self.conv[i] = plan;
            self.decide(vec![id.0], false, format!("conv lowering: {reason}"), vec![]);
        }
    }

    /// The legal lowerings of convolution `id`, and the cost model's pick among them.
    fn conv_choice(&self, id: NodeId, window: &Window2d, groups: usize) -> (ConvPlan, String) {
        let node = self.g.node(id);
        let (xs, ws, out) =
            (&self.shapes[node.inputs[0].index()], &self.shapes[node.inputs[1].index()], &self.shapes[id.index()]);
        let dt = node.ty.dtype;
        let acc = acc_dtype(RedOp::Sum, dt);
        if !dt.is_float() || !self.caps.dtypes.contains(&acc) || !self.caps.dtypes.contains(&dt) {
            return (ConvPlan::Window, format!("window: {dt} convolution (matmuls are lowered for float types)"));
        }
        let g = groups.max(1);
        let kg = ws[1] * ws[2] * ws[3];
        if kg == 0 {
            return (ConvPlan::Window, "window: empty reduction".into());
        }
        let (n, p) = (out[0], out[2] * out[3]);
        let direct = g == 1 && ws[2] == 1 && ws[3] == 1 && window.stride == [1, 1] && window.padding == [0; 4];
        let cols = if direct { 0 } else { g * kg * n * p };
        // Renderers index with 32-bit integers and reject matmul extents above u32::MAX / 2.
        let limit = (u32::MAX / 2) as usize;
        if [cols, n * p, kg, ws[0], xs.iter().product::<usize>()].iter().any(|&e| e > limit) {
            return (ConvPlan::Window, format!("window: im2col of {cols} elements exceeds the 32-bit matmul extents"));
        }
        let shape = ConvShape {
            batch: n,
            in_channels: xs[1],
            out_channels: ws[0],
            groups: g,
            kernel: [ws[2], ws[3]],
            out_hw: [out[2], out[3]],
            im2col_bytes: cols * dt.size_bytes(),
        };
        match self.opts.cost_model.conv_as_matmul(&shape, self.caps) {
            Ok(r) => (if direct { ConvPlan::Direct } else { ConvPlan::Im2col }, r),
            Err(r) => (ConvPlan::Window, r),
        }
    }

    fn decide(&mut self, nodes: Vec<u32>, fused: bool, reason: impl Into<String>, kernels: Vec<usize>) {
        self.decisions.push(Decision { nodes, fused, reason: reason.into(), kernels });
    }

    fn numel_of(&self, n: NodeId) -> usize {
        numel(&self.shapes[n.index()])
    }

    // ---------------------------------------------------------------- stage A

    /// Decides which inlinable nodes are materialized (stored) rather than recomputed inside
    /// every consumer.
    pub(super) fn stage_a(&mut self) {
        let n = self.g.nodes.len();
        // Operands of contractions and windows: their compute producers are materialized (a
        // matmul reads strided buffers; a window reads each element many times).
        let mut need: Vec<Option<&'static str>> = vec![None; n];
        for (id, node) in self.g.iter() {
            if !self.live[id.index()] {
                continue;
            }
            // (operand, read through strides only, reason)
            let operands: Vec<(NodeId, bool, &'static str)> = match &node.op {
                Op::MatMul => node.inputs.iter().map(|&o| (o, true, "materialized: matmul operand")).collect(),
                Op::Conv2d { .. } => match self.conv[id.index()] {
                    ConvPlan::Window => node.inputs[..2]
                        .iter()
                        .map(|&o| (o, false, "materialized: conv operand (read by every tap)"))
                        .collect(),
                    ConvPlan::Direct => node.inputs[..2]
                        .iter()
                        .map(|&o| (o, true, "materialized: conv operand (a matmul operand: 1x1 conv)"))
                        .collect(),
                    ConvPlan::Im2col => vec![
                        (node.inputs[0], false, "materialized: conv operand (read by every tap of the im2col gather)"),
                        (node.inputs[1], true, "materialized: conv weight (a matmul operand)"),
                    ],
                },
                Op::Pool2d { .. } => {
                    vec![(node.inputs[0], false, "materialized: pooling operand (read by every window)")]
                }
                _ => continue,
            };
            for (o, strided_only, why) in operands {
                let mut cur = o;
                loop {
                    let op = &self.g.node(cur).op;
                    let through = match op {
                        Op::Reshape(_) | Op::Permute(_) | Op::Expand(_) | Op::Slice(_) => true,
                        Op::Pad { .. } => !strided_only,
                        _ => false,
                    };
                    if through && !self.g.node(cur).inputs.is_empty() {
                        cur = self.g.node(cur).inputs[0];
                        continue;
                    }
                    if self.kind[cur.index()].inlinable() && need[cur.index()].is_none() {
                        need[cur.index()] = Some(why);
                    }
                    break;
                }
            }
        }
        let mut cost = vec![0usize; n];
        let mut depth = vec![0usize; n];
        for (id, node) in self.g.iter() {
            let i = id.index();
            if !self.live[i] || !self.kind[i].inlinable() {
                continue;
            }
            let inlined =
                || node.inputs.iter().filter(|a| self.kind[a.index()].inlinable() && !self.materialized[a.index()]);
            cost[i] = weight(&node.op) + inlined().map(|a| cost[a.index()]).sum::<usize>();
            depth[i] = 1 + inlined().map(|a| depth[a.index()]).max().unwrap_or(0);
            let users = self.users[i].len();
            let reason: Option<String> = if !self.outputs_of[i].is_empty() {
                Some("materialized: graph output".into())
            } else if !self.opts.fusion && self.kind[i] != Kind::Movement {
                Some("materialized: eager mode (one kernel per op)".into())
            } else if let Some(why) = need[i] {
                Some(why.into())
            } else if users >= 2 && self.opts.fusion {
                self.opts.cost_model.materialize(users, cost[i])
            } else if depth[i] >= MAX_INLINE_DEPTH {
                Some(format!("materialized: inline depth limit ({MAX_INLINE_DEPTH})"))
            } else {
                None
            };
            if let Some(r) = reason {
                self.materialized[i] = true;
                self.decide(vec![id.0], false, r, vec![]);
            }
        }
    }

    // ---------------------------------------------------------------- stage B

    /// Assigns every materialized node and root to a kernel, in topological order.
    pub(super) fn stage_b(&mut self) -> Result<(), Error> {
        for i in 0..self.g.nodes.len() {
            if !self.live[i] {
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

    /// True when every live user of `n` is computed only inside `kb` (so `n` needs no buffer of
    /// its own), judged conservatively from what is placed so far.
    fn covered(&self, n: NodeId, members: &BTreeSet<NodeId>, memo: &mut HashMap<NodeId, bool>) -> bool {
        if let Some(&c) = memo.get(&n) {
            return c;
        }
        memo.insert(n, false);
        let c = self.users[n.index()].iter().all(|&u| {
            members.contains(&u)
                || (self.kind[u.index()].inlinable()
                    && !self.materialized[u.index()]
                    && self.outputs_of[u.index()].is_empty()
                    && !self.users[u.index()].is_empty()
                    && self.covered(u, members, memo))
        });
        memo.insert(n, c);
        c
    }

    /// Buffers `kb` binds: its reads plus, conservatively, one write per output of each stored
    /// node and one for each stored node that a later kernel may read.
    ///
    /// A buffer larger than `caps.max_binding_bytes` counts once per window a backend binds it as
    /// (windows of the limit rounded down to 256 bytes; see the WGSL backend's split bindings).
    pub(super) fn bindings(&self, kb: &KernelBuilder) -> usize {
        let members: BTreeSet<NodeId> = kb.member_nodes().collect();
        let mut memo = HashMap::new();
        let mut writes = 0;
        for m in &kb.members {
            match m.target {
                Target::Operand(i) => {
                    let (dt, numel) = self.buf_info(&BufRef::Operand(i));
                    writes += self.windows(dt, numel);
                }
                Target::Node(n) => {
                    let outs = self.outputs_of[n.index()].len();
                    let each = self.windows(self.g.ty(n).dtype, numel(&self.shapes[n.index()]));
                    // A kernel placed earlier may already read `n` from a buffer (it inlined a user
                    // of `n` that was materialized only later): then `n` needs its write here too.
                    let read_elsewhere =
                        || self.kernels.iter().any(|k| k.reads.iter().any(|a| a.buf == BufRef::Node(n)));
                    let needs = !self.covered(n, &members, &mut memo) || read_elsewhere();
                    writes += each * if outs > 0 { outs } else { usize::from(needs) };
                }
            }
        }
        kb.reads.iter().map(|a| self.windows(a.dtype, a.numel)).sum::<usize>() + writes
    }

    /// How many bindings a buffer of `numel` elements of `dt` takes (1 unless it exceeds the
    /// backend's binding size).
    fn windows(&self, dt: DType, numel: usize) -> usize {
        if self.one_binding_per_buffer.get() {
            return 1;
        }
        let window = self.caps.max_binding_bytes - self.caps.max_binding_bytes % 256;
        let bytes = (numel as u64).saturating_mul(dt.size_bytes() as u64);
        if window == 0 { 1 } else { bytes.div_ceil(window).max(1) as usize }
    }

    fn check(&self, kb: &KernelBuilder) -> Result<(), Refusal> {
        let would = self.bindings(kb);
        let limit = self.caps.max_bindings as usize;
        if would > limit { Err(Refusal::Bindings { would, limit }) } else { Ok(()) }
    }

    fn internal(r: Refusal, s: &Sched) -> Error {
        Error::Unsupported(format!("schedule: {}", r.reason(s).trim_start_matches("refused: ")))
    }

    /// Where a materialized node `p` is computed in a kernel of `space`: its coordinates, the
    /// flat index it is stored at, and the phase.
    fn member_coords(&self, space: &Space, p: NodeId) -> Result<(Vec<Index>, Index, Phase), Refusal> {
        let shape = &self.shapes[p.index()];
        let n = numel(shape);
        match space {
            Space::Pointwise { numel: lanes } if *lanes == n => {
                let l = Index::var(Var::Lane);
                Ok((delinearize(&l, shape), l, Phase::Lane))
            }
            Space::Reduce { rows, .. } | Space::Window { rows, .. } if *rows == n => {
                let r = Index::var(Var::Row);
                Ok((delinearize(&r, shape), r, Phase::Row))
            }
            Space::Reduce { in_shape, axes, rows, len } if rows * len == n => {
                let c = Self::reduce_coords(in_shape, axes, false);
                if in_shape == shape {
                    let flat = linearize(&c, in_shape);
                    return Ok((c, flat, Phase::Elem));
                }
                let flat = linearize(&c, in_shape);
                Ok((delinearize(&flat, shape), flat, Phase::Elem))
            }
            Space::Matmul { batch, m, n: nn, out, .. } if batch * m * nn == n => {
                let flat = out.flat();
                Ok((delinearize(&flat, shape), flat, Phase::Epilogue))
            }
            other => Err(Refusal::Space(format!("{n} elements vs {}", other.describe()))),
        }
    }

    /// Emits `p` into a copy of `kb` (at launch position `pos`) as a stored member.
    fn add_member(&self, mut kb: KernelBuilder, pos: usize, p: NodeId) -> Result<KernelBuilder, Refusal> {
        if kb.partial {
            return Err(Refusal::Partial);
        }
        if !kb.members.is_empty() && kb.members.len() + 1 > self.opts.max_group_nodes {
            return Err(Refusal::GroupSize(self.opts.max_group_nodes));
        }
        let (coords, index, phase) = self.member_coords(&kb.space, p)?;
        let value = self.emit(&mut kb, pos, p, &coords, phase)?;
        let index = kb.simp(&index);
        kb.computed.insert(p);
        kb.members.push(Member { target: Target::Node(p), value, index, phase, root: false, ready: usize::MAX });
        self.check(&kb)?;
        Ok(kb)
    }

    fn fused_reason(&self, k: usize, phase_of: NodeId) -> String {
        let kb = &self.kernels[k];
        let ph = kb.member(phase_of).map(|m| m.phase);
        match (&kb.space, ph) {
            (Space::Reduce { .. }, Some(Phase::Elem)) => "fused: reduction epilogue (elementwise)".into(),
            (Space::Reduce { .. }, _) => "fused: reduction epilogue (per row)".into(),
            (Space::Window { .. }, _) => "fused: window epilogue (per output element)".into(),
            (Space::Matmul { .. }, _) => "fused: matmul epilogue".into(),
            (Space::Pointwise { .. }, _) => "fused: vertical pointwise".into(),
        }
    }

    /// Records the outcome of trying to join node `n` into kernel `k`: on success the kernel is
    /// replaced and the join recorded as fused (`reason`, else [`Sched::fused_reason`]), and the
    /// result is `true`; a refusal is recorded with its reason (`false`); an internal error stops
    /// scheduling.
    fn settle(
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

    fn first_member(&self, k: usize) -> Vec<u32> {
        self.kernels[k].member_nodes().take(1).map(|n| n.0).collect()
    }

    /// Schedules a materialized node (or an input/constant output): into the kernel of its latest
    /// dependency (vertical/epilogue fusion), else a sibling kernel sharing its reads (horizontal
    /// fusion), else a new pointwise kernel.
    pub(super) fn sched_member(&mut self, p: NodeId) -> Result<(), Error> {
        if self.opts.fusion {
            let dep = self.dep_kernel(p);
            if let Some(k) = dep {
                let attempt = self.add_member(self.kernels[k].clone(), k, p);
                if self.settle(k, p, attempt, None)? {
                    return Ok(());
                }
            }
            // Horizontal: a kernel (not before the dependency) reading the same buffers.
            let reads = match self.kind[p.index()] {
                Kind::Input(_) | Kind::Constant => self.reads_of(p),
                _ => self.tree(p).0,
            };
            let mut cands: Vec<(usize, usize)> = Vec::new();
            for (k, kb) in self.kernels.iter().enumerate() {
                if Some(k) == dep || dep.is_some_and(|d| k < d) || kb.partial || kb.matmul.is_some() {
                    continue;
                }
                let shared: usize = kb.reads.iter().filter_map(|a| reads.get(&a.buf)).sum();
                if shared > 0 && self.opts.cost_model.fuse_horizontal(shared) {
                    cands.push((shared, k));
                }
            }
            cands.sort_by(|a, b| b.cmp(a));
            for &(_, k) in cands.iter().take(3) {
                let attempt = self.add_member(self.kernels[k].clone(), k, p);
                if self.settle(k, p, attempt, Some("fused: horizontal (shared input, same iteration space)"))? {
                    return Ok(());
                }
            }
        }
        self.fresh_member(p)
    }

    /// A new pointwise kernel for `p`, splitting off producers while it would bind too many
    /// buffers.
    fn fresh_member(&mut self, p: NodeId) -> Result<(), Error> {
        loop {
            let pos = self.kernels.len();
            let kb = KernelBuilder::new(Space::Pointwise { numel: self.numel_of(p) });
            match self.add_member(kb, pos, p) {
                Ok(kb) => {
                    self.kernels.push(kb);
                    self.place[p.index()] = Some(pos);
                    return Ok(());
                }
                Err(Refusal::Bindings { would, limit }) => {
                    if !self.split(p, would, limit)? {
                        if !self.one_binding_per_buffer.get() && !matches!(self.g.node(p).op, Op::Concat { .. }) {
                            // Windows are counted conservatively; nothing more can be split off, so
                            // leave the exact window count to the backend (a clear error there).
                            self.one_binding_per_buffer.set(true);
                            let r = self.fresh_member(p);
                            self.one_binding_per_buffer.set(false);
                            return r;
                        }
                        return self.box_split(p, would, limit);
                    }
                }
                Err(r) => return Err(Self::internal(r, self)),
            }
        }
    }

    /// Materializes the producer in `root`'s inline tree that removes the most reads, so the
    /// kernel of `root` fits the binding limit. False when nothing can be split off.
    fn split(&mut self, root: NodeId, would: usize, limit: usize) -> Result<bool, Error> {
        let (_, inner) = self.tree(root);
        let mut best: Option<(usize, NodeId)> = None;
        let mut best_concat: Option<(usize, NodeId)> = None;
        for &x in &inner {
            if self.materialized[x.index()] || self.numel_of(x) == 0 {
                continue;
            }
            let r = self.reads_of(x).len();
            if r < 2 {
                continue;
            }
            if r < limit {
                best = best.max(Some((r, x)));
            } else if matches!(self.g.node(x).op, Op::Concat { .. }) {
                best_concat = best_concat.max(Some((r, x)));
            }
        }
        let Some((_, x)) = best.or(best_concat) else { return Ok(false) };
        self.materialized[x.index()] = true;
        self.decide(
            vec![x.0, root.0],
            false,
            format!("materialized: split to respect the binding limit (would bind {would} buffers > {limit})"),
            vec![],
        );
        self.sched_member(x)?;
        Ok(true)
    }

    /// Writes a concat whose parts alone exceed the binding limit with several kernels, each
    /// covering a box of consecutive parts.
    fn box_split(&mut self, p: NodeId, would: usize, limit: usize) -> Result<(), Error> {
        let node = self.g.node(p);
        let Op::Concat { axis } = node.op else {
            return Err(Error::Unsupported(format!(
                "schedule: {p} ({}) would bind {would} buffers and cannot be split below {limit}",
                node.op.name()
            )));
        };
        let shape = self.shapes[p.index()].clone();
        let writes = self.outputs_of[p.index()].len().max(1);
        let budget = limit.saturating_sub(writes);
        let mut groups: Vec<(i64, usize)> = Vec::new(); // (offset, extent)
        let mut cur: BTreeSet<BufRef> = BTreeSet::new();
        let (mut start, mut off, mut ext) = (0i64, 0i64, 0usize);
        for &part in &node.inputs {
            let len = self.shapes[part.index()][axis];
            if len == 0 {
                continue;
            }
            let reads = self.reads_of(part);
            if reads.len() > budget {
                return Err(Error::Unsupported(format!(
                    "schedule: concat part {part} alone reads {} buffers; the limit is {limit}",
                    reads.len()
                )));
            }
            let merged: BTreeSet<BufRef> = cur.union(&reads.keys().cloned().collect()).cloned().collect();
            if merged.len() > budget {
                groups.push((start, ext));
                start = off;
                ext = 0;
                cur = reads.into_keys().collect();
            } else {
                cur = merged;
            }
            ext += len;
            off += len as i64;
        }
        if ext > 0 {
            groups.push((start, ext));
        }
        let mut made = Vec::new();
        for &(goff, gext) in &groups {
            let mut bshape = shape.clone();
            bshape[axis] = gext;
            let pos = self.kernels.len();
            let mut kb = KernelBuilder::new(Space::Pointwise { numel: numel(&bshape) });
            kb.partial = true;
            let mut c = delinearize(&Index::var(Var::Lane), &bshape);
            c[axis] = c[axis].clone().add(Index::Const(goff));
            let value = self.emit(&mut kb, pos, p, &c, Phase::Lane).map_err(|r| Self::internal(r, self))?;
            let index = kb.simp(&linearize(&c, &shape));
            kb.computed.insert(p);
            kb.members.push(Member {
                target: Target::Node(p),
                value,
                index,
                phase: Phase::Lane,
                root: false,
                ready: usize::MAX,
            });
            if let Err(r) = self.check(&kb) {
                return Err(Self::internal(r, self));
            }
            self.kernels.push(kb);
            made.push(pos);
        }
        self.place[p.index()] = made.last().copied();
        self.decide(
            vec![p.0],
            false,
            format!("split: concat written by {} kernels to respect the binding limit ({limit})", made.len()),
            made,
        );
        Ok(())
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

    /// Kernel `k` re-emitted over another iteration space (its stored nodes in order).
    fn rebuild(&self, k: usize, space: &Space) -> Result<KernelBuilder, Refusal> {
        let old = &self.kernels[k];
        if old.partial {
            return Err(Refusal::Partial);
        }
        let mut kb = KernelBuilder::new(space.clone());
        for m in &old.members {
            match m.target {
                Target::Node(n) if !m.root => kb = self.add_member(kb, k, n)?,
                _ => return Err(Refusal::Space("kernel holds roots or copies".into())),
            }
        }
        Ok(kb)
    }

    /// Adds reduction `r` to a copy of `kb` at position `pos`.
    fn add_reduction(&self, mut kb: KernelBuilder, pos: usize, r: NodeId) -> Result<KernelBuilder, Refusal> {
        if kb.partial {
            return Err(Refusal::Partial);
        }
        if !kb.members.is_empty() && kb.members.len() + 1 > self.opts.max_group_nodes {
            return Err(Refusal::GroupSize(self.opts.max_group_nodes));
        }
        let Space::Reduce { in_shape, axes, len, .. } = kb.space.clone() else {
            return Err(Refusal::Space("not a reduction kernel".into()));
        };
        let node = self.g.node(r);
        let x = node.inputs[0];
        let (op, reverse) = match &node.op {
            Op::Reduce { op, .. } => (
                match op {
                    ReduceOp::Sum => RedOp::Sum,
                    ReduceOp::Prod => RedOp::Prod,
                    ReduceOp::Max => RedOp::Max,
                    ReduceOp::Min => RedOp::Min,
                    ReduceOp::Mean => return Err(Refusal::Internal("reduce_mean is a composite".into())),
                },
                false,
            ),
            Op::ArgReduce { op, select_last, .. } => {
                (if *op == ArgOp::ArgMax { RedOp::ArgMax } else { RedOp::ArgMin }, *select_last)
            }
            _ => return Err(Refusal::Internal("not a reduction".into())),
        };
        let xdt = self.g.ty(x).dtype;
        let slot = kb.reductions.len();
        let value = if len == 0 {
            kb.konst(0.0, xdt)
        } else {
            let c = Self::reduce_coords(&in_shape, &axes, reverse);
            self.emit(&mut kb, pos, x, &c, Phase::Value(slot))?
        };
        let acc_dt = acc_dtype(op, xdt);
        kb.reductions.push(Reduction { op, value, slot, dtype: acc_dt });
        let dt = node.ty.dtype;
        let mut v = kb.push(Expr::Acc(slot), dt);
        if reverse && len > 1 {
            let last = kb.konst(len as f64 - 1.0, DType::I64);
            v = kb.push(Expr::Binary(crate::ir::BinaryOp::Sub, last, v), DType::I64);
        }
        kb.computed.insert(r);
        kb.members.push(Member {
            target: Target::Node(r),
            value: v,
            index: Index::var(Var::Row),
            phase: Phase::Row,
            root: true,
            ready: slot + 1,
        });
        self.check(&kb)?;
        Ok(kb)
    }

    /// Schedules a reduction: into an earlier reduction kernel over the same rows when legal,
    /// else a new one.
    fn sched_reduction(&mut self, r: NodeId) -> Result<(), Error> {
        let node = self.g.node(r);
        let x = node.inputs[0];
        let in_shape = self.shapes[x.index()].clone();
        let axes = match &node.op {
            Op::Reduce { axes, .. } => axes.clone(),
            Op::ArgReduce { axis, .. } => vec![*axis],
            _ => return Err(Error::Unsupported(format!("schedule: {r} is not a reduction"))),
        };
        let len: usize = axes.iter().map(|&a| in_shape[a]).product();
        let rows = self.numel_of(r);
        let space = Space::Reduce { in_shape, axes, rows, len };
        if self.opts.fusion {
            let dep = self.dep_kernel(r);
            // A pointwise kernel over exactly the reduction's elements is absorbed: its stores
            // become element stores of the reduce kernel.
            if let Some(k) = dep
                && matches!(self.kernels[k].space, Space::Pointwise { numel } if numel == rows * len && numel > 0)
            {
                let attempt = self.rebuild(k, &space).and_then(|kb| self.add_reduction(kb, k, r));
                if self.settle(k, r, attempt, Some("fused: pointwise kernel into reduction (element stores)"))? {
                    return Ok(());
                }
            }
            if let Some(k) = dep
                && self.kernels[k].space != space
            {
                let mut nodes = self.first_member(k);
                nodes.push(r.0);
                let why = Refusal::Space(format!("{} vs {}", space.describe(), self.kernels[k].space.describe()));
                let reason = why.reason(self);
                self.decide(nodes, false, reason, vec![k]);
            }
            let cands: Vec<usize> = (0..self.kernels.len())
                .rev()
                .filter(|&k| self.kernels[k].space == space && dep.is_none_or(|d| k >= d))
                .collect();
            for k in cands {
                let attempt = self.add_reduction(self.kernels[k].clone(), k, r);
                if self.settle(k, r, attempt, Some("fused: reduction over the same rows"))? {
                    return Ok(());
                }
            }
        }
        loop {
            let pos = self.kernels.len();
            match self.add_reduction(KernelBuilder::new(space.clone()), pos, r) {
                Ok(kb) => {
                    self.kernels.push(kb);
                    self.place[r.index()] = Some(pos);
                    return Ok(());
                }
                Err(Refusal::Bindings { would, limit }) => {
                    if !self.split(r, would, limit)? {
                        return Err(Error::Unsupported(format!(
                            "schedule: reduction {r} would bind {would} buffers > {limit}"
                        )));
                    }
                }
                Err(e) => return Err(Self::internal(e, self)),
            }
        }
    }

    /// The strided form of a matmul operand read at coordinates `c`, or a contiguous copy.
    #[allow(clippy::too_many_arguments)]
    fn mat_operand(
        &mut self,
        mm: NodeId,
        opnd: NodeId,
        c: &[Index],
        space: &Space,
        vars: [Var; 3],
        copy_shape: [usize; 3],
        broadcast_batch: bool,
    ) -> Result<MatRef, Error> {
        let pos = self.kernels.len();
        let probe = KernelBuilder::new(space.clone());
        if let Some((buf, ix)) = self.view_index(&probe, pos, opnd, c)
            && let Some((off, coefs)) = affine(&ix)
            && off >= 0
        {
            let coef = |v: Var| coefs.iter().find(|(w, _)| *w == v).map_or(0, |(_, k)| *k);
            let (sb, sr, sc) = (coef(vars[0]), coef(vars[1]), coef(vars[2]));
            let only_known = coefs.iter().all(|(v, _)| vars.contains(v));
            if only_known && sb >= 0 && sr >= 0 && sc >= 0 {
                return Ok(MatRef {
                    buf,
                    offset: off as usize,
                    s_batch: sb as usize,
                    s_row: sr as usize,
                    s_col: sc as usize,
                });
            }
        }
        // Materialize a contiguous [batch, rows, cols] copy with a pointwise kernel.
        let [b, r, cc] = copy_shape;
        let b = if broadcast_batch { 1 } else { b };
        let dt = self.g.ty(opnd).dtype;
        let id = self.copies.len();
        self.copies.push((dt, b * r * cc));
        let pos = self.kernels.len();
        let mut kb = KernelBuilder::new(Space::Pointwise { numel: b * r * cc });
        let l = Index::var(Var::Lane);
        let sub = delinearize(&l, &[b, r, cc]);
        let map = |i: &Index| i.substitute(vars[0], &sub[0]).substitute(vars[1], &sub[1]).substitute(vars[2], &sub[2]);
        let lc: Vec<Index> = c.iter().map(map).collect();
        let value = self.emit(&mut kb, pos, opnd, &lc, Phase::Lane).map_err(|e| Self::internal(e, self))?;
        kb.members.push(Member {
            target: Target::Operand(id),
            value,
            index: l,
            phase: Phase::Lane,
            root: false,
            ready: usize::MAX,
        });
        if let Err(e) = self.check(&kb) {
            return Err(Self::internal(e, self));
        }
        self.kernels.push(kb);
        self.decide(
            vec![opnd.0, mm.0],
            false,
            format!("materialized: matmul operand {opnd} copied (not expressible by strides)"),
            vec![pos],
        );
        let (sb, sr, sc) = if b == 1 { (0, cc, 1) } else { (r * cc, cc, 1) };
        Ok(MatRef { buf: BufRef::Operand(id), offset: 0, s_batch: sb, s_row: sr, s_col: sc })
    }

    fn sched_matmul(&mut self, mm: NodeId) -> Result<(), Error> {
        let node = self.g.node(mm);
        let (a, b) = (node.inputs[0], node.inputs[1]);
        let (sa, sb) = (self.shapes[a.index()].clone(), self.shapes[b.index()].clone());
        let a2 = if sa.len() == 1 { vec![1, sa[0]] } else { sa.clone() };
        let b2 = if sb.len() == 1 { vec![sb[0], 1] } else { sb.clone() };
        let (ra, rb) = (a2.len(), b2.len());
        let (m, k, n) = (a2[ra - 2], a2[ra - 1], b2[rb - 1]);
        let rbatch = (ra - 2).max(rb - 2);
        let pad = |s: &[usize]| -> Vec<usize> {
            let mut v = vec![1; rbatch - s.len()];
            v.extend_from_slice(s);
            v
        };
        let (ba, bb) = (pad(&a2[..ra - 2]), pad(&b2[..rb - 2]));
        let bdims: Vec<usize> = ba.iter().zip(&bb).map(|(&x, &y)| x.max(y)).collect();
        let batch = numel(&bdims);
        if k == 0 {
            return Err(Error::Unsupported(format!("schedule: matmul {mm} has an empty inner dimension")));
        }
        let space = Space::Matmul { batch, m, n, k, out: MatOut::plain(m, n) };
        let bc = delinearize(&Index::var(Var::Batch), &bdims);
        let coords = |bshape: &[usize], orig_rank: usize, r: Index, c: Index, one_d_row: bool| -> Vec<Index> {
            if orig_rank == 1 {
                return vec![if one_d_row { c } else { r }];
            }
            let mut v: Vec<Index> = bcast_batch(&bc, bshape)[rbatch - (orig_rank - 2)..].to_vec();
            v.push(r);
            v.push(c);
            v
        };
        let ca = coords(&ba, sa.len(), Index::var(Var::M), Index::var(Var::Red), true);
        let cb = coords(&bb, sb.len(), Index::var(Var::Red), Index::var(Var::N), false);
        let a_bcast = ba.iter().all(|&d| d == 1);
        let b_bcast = bb.iter().all(|&d| d == 1);
        let ar = self.mat_operand(mm, a, &ca, &space, [Var::Batch, Var::M, Var::Red], [batch, m, k], a_bcast)?;
        let br = self.mat_operand(mm, b, &cb, &space, [Var::Batch, Var::Red, Var::N], [batch, k, n], b_bcast)?;
        let pos = self.kernels.len();
        let mut kb = KernelBuilder::new(space.clone());
        let in_dtype = self.g.ty(a).dtype;
        for r in [&ar, &br] {
            let (dt, n) = self.buf_info(&r.buf);
            kb.read_arg(r.buf.clone(), dt, n);
        }
        kb.matmul = Some(MatSpec { a: ar, b: br, in_dtype, acc_dtype: acc_dtype(RedOp::Sum, in_dtype) });
        let v = kb.push(Expr::Acc(0), node.ty.dtype);
        let index = kb.simp(&MatOut::plain(m, n).flat());
        kb.computed.insert(mm);
        kb.members.push(Member {
            target: Target::Node(mm),
            value: v,
            index,
            phase: Phase::Epilogue,
            root: true,
            ready: usize::MAX,
        });
        self.check(&kb).map_err(|e| Self::internal(e, self))?;
        self.kernels.push(kb);
        self.place[mm.index()] = Some(pos);
        Ok(())
    }

    fn sched_window(&mut self, w: NodeId) -> Result<(), Error> {
        if self.conv[w.index()] != ConvPlan::Window {
            let mark = (self.kernels.len(), self.copies.len(), self.decisions.len());
            match self.sched_conv_matmul(w)? {
                None => return Ok(()),
                Some((would, limit)) => {
                    // Large operands bound as many windows: fall back to the window kernel.
                    self.kernels.truncate(mark.0);
                    self.copies.truncate(mark.1);
                    self.decisions.truncate(mark.2);
                    self.conv[w.index()] = ConvPlan::Window;
                    let reason = format!("conv lowering: window (as a matmul it would bind {would} buffers > {limit})");
                    match self.decisions.iter_mut().find(|d| d.nodes == [w.0] && d.reason.starts_with("conv lowering"))
                    {
                        Some(d) => d.reason = reason,
                        None => self.decide(vec![w.0], false, reason, vec![]),
                    }
                }
            }
        }
        let node = self.g.node(w).clone();
        let x = node.inputs[0];
        let xs = self.shapes[x.index()].clone();
        let out = self.shapes[w.index()].clone();
        let dt = node.ty.dtype;
        let rows = numel(&out);
        let (window, len) = match &node.op {
            Op::Conv2d { window, .. } => {
                let ws = &self.shapes[node.inputs[1].index()];
                (*window, ws[1] * ws[2] * ws[3])
            }
            Op::Pool2d { window, .. } => (*window, window.kernel[0] * window.kernel[1]),
            _ => return Err(Error::Unsupported(format!("schedule: {w} is not a window op"))),
        };
        let pos = self.kernels.len();
        let mut kb = KernelBuilder::new(Space::Window { rows, len });
        let e = |s: &Sched, r: Refusal| Self::internal(r, s);
        let rc = delinearize(&Index::var(Var::Row), &out);
        let [pt, pl, pb, pr] = window.padding.map(|p| p as i64);
        let (h, wd) = (xs[2] as i64, xs[3] as i64);
        let (kh, kw) = (window.kernel[0], window.kernel[1]);
        match &node.op {
            Op::Conv2d { groups, .. } => {
                let ws = self.shapes[node.inputs[1].index()].clone();
                let (cg, co) = (ws[1], ws[0]);
                let cog = co / groups;
                let red = delinearize(&Index::var(Var::Red), &[cg, kh, kw]);
                let chan = rc[1].clone().div(cog as i64).mul(cg as i64).add(red[0].clone());
                let ph = Phase::Value(0);
                let tap = Tap {
                    n: rc[0].clone(),
                    chan,
                    oy: rc[2].clone(),
                    ox: rc[3].clone(),
                    ky: red[1].clone(),
                    kx: red[2].clone(),
                };
                let xm = self.conv_tap(&mut kb, pos, x, &window, &tap, ph).map_err(|r| e(self, r))?;
                let wv = self
                    .emit(
                        &mut kb,
                        pos,
                        node.inputs[1],
                        &[rc[1].clone(), red[0].clone(), red[1].clone(), red[2].clone()],
                        ph,
                    )
                    .map_err(|r| e(self, r))?;
                let value = kb.push(Expr::Binary(BinaryOp::Mul, xm, wv), dt);
                kb.reductions.push(Reduction { op: RedOp::Sum, value, slot: 0, dtype: acc_dtype(RedOp::Sum, dt) });
                let mut v = kb.push(Expr::Acc(0), dt);
                if let Some(&bias) = node.inputs.get(2) {
                    let bv = self.emit(&mut kb, pos, bias, &[rc[1].clone()], Phase::Row).map_err(|r| e(self, r))?;
                    v = kb.push(Expr::Binary(BinaryOp::Add, v, bv), dt);
                }
                kb.members.push(Member {
                    target: Target::Node(w),
                    value: v,
                    index: Index::var(Var::Row),
                    phase: Phase::Row,
                    root: true,
                    ready: usize::MAX,
                });
            }
            Op::Pool2d { kind, count_include_pad, .. } => {
                let red = delinearize(&Index::var(Var::Red), &[kh, kw]);
                let (iy, ix) = taps(&window, rc[2].clone(), rc[3].clone(), red[0].clone(), red[1].clone());
                let xc = vec![
                    rc[0].clone(),
                    rc[1].clone(),
                    iy.clone().clamp(pt, pt + h - 1).add(Index::Const(-pt)),
                    ix.clone().clamp(pl, pl + wd - 1).add(Index::Const(-pl)),
                ];
                let ph = Phase::Value(0);
                let xv = self.emit(&mut kb, pos, x, &xc, ph).map_err(|r| e(self, r))?;
                let inside = tap_mask(&mut kb, &iy, &ix, Some((pt, pl)), (pt + h, pl + wd));
                let fill = if *kind == PoolKind::Max { lowest(dt) } else { 0.0 };
                let value = match inside {
                    Ok(None) => xv,
                    Ok(Some(m)) => {
                        let f = kb.konst(fill, dt);
                        kb.push(Expr::Where(m, xv, f), dt)
                    }
                    Err(()) => kb.konst(fill, dt),
                };
                let op = if *kind == PoolKind::Max { RedOp::Max } else { RedOp::Sum };
                kb.reductions.push(Reduction { op, value, slot: 0, dtype: acc_dtype(op, dt) });
                let mut v = kb.push(Expr::Acc(0), dt);
                if *kind == PoolKind::Avg {
                    let counted = if *count_include_pad {
                        tap_mask(&mut kb, &iy, &ix, None, (h + pt + pb, wd + pl + pr))
                    } else {
                        tap_mask(&mut kb, &iy, &ix, Some((pt, pl)), (pt + h, pl + wd))
                    };
                    let one = kb.konst(1.0, dt);
                    let cv = match counted {
                        Ok(None) => one,
                        Ok(Some(m)) => {
                            let z = kb.konst(0.0, dt);
                            kb.push(Expr::Where(m, one, z), dt)
                        }
                        Err(()) => kb.konst(0.0, dt),
                    };
                    kb.reductions.push(Reduction {
                        op: RedOp::Sum,
                        value: cv,
                        slot: 1,
                        dtype: acc_dtype(RedOp::Sum, dt),
                    });
                    let cnt = kb.push(Expr::Acc(1), dt);
                    v = kb.push(Expr::Binary(BinaryOp::Div, v, cnt), dt);
                }
                kb.members.push(Member {
                    target: Target::Node(w),
                    value: v,
                    index: Index::var(Var::Row),
                    phase: Phase::Row,
                    root: true,
                    ready: usize::MAX,
                });
            }
            _ => {}
        }
        kb.computed.insert(w);
        self.check(&kb).map_err(|r| e(self, r))?;
        self.kernels.push(kb);
        self.place[w.index()] = Some(pos);
        Ok(())
    }

    /// The input of a convolution at one tap: `x` read at the padded coordinates of `tap`
    /// (clamped into the image) and zero where the tap falls into the padding.
    fn conv_tap(
        &self,
        kb: &mut KernelBuilder,
        pos: usize,
        x: NodeId,
        window: &Window2d,
        tap: &Tap,
        ph: Phase,
    ) -> Result<ExprId, Refusal> {
        let xs = &self.shapes[x.index()];
        let dt = self.g.ty(x).dtype;
        let [pt, pl, _, _] = window.padding.map(|p| p as i64);
        let (h, wd) = (xs[2] as i64, xs[3] as i64);
        let (iy, ix) = taps(window, tap.oy.clone(), tap.ox.clone(), tap.ky.clone(), tap.kx.clone());
        let xc = vec![
            tap.n.clone(),
            tap.chan.clone(),
            iy.clone().clamp(pt, pt + h - 1).add(Index::Const(-pt)),
            ix.clone().clamp(pl, pl + wd - 1).add(Index::Const(-pl)),
        ];
        let xv = self.emit(kb, pos, x, &xc, ph)?;
        Ok(match tap_mask(kb, &iy, &ix, Some((pt, pl)), (pt + h, pl + wd)) {
            Ok(None) => xv,
            Ok(Some(m)) => {
                let z = kb.konst(0.0, dt);
                kb.push(Expr::Where(m, xv, z), dt)
            }
            Err(()) => kb.konst(0.0, dt),
        })
    }

    /// A convolution as a matmul kernel (see [`ConvPlan`]): the weight and the input (directly, or
    /// through an im2col buffer written by a gather kernel just before) are strided operands; the
    /// bias and any fused epilogue are computed on the accumulator and stored NCHW. Returns the
    /// binding count and limit when a kernel would bind too many buffers (the caller then drops
    /// what was pushed and schedules a window kernel instead).
    fn sched_conv_matmul(&mut self, w: NodeId) -> Result<Option<(usize, usize)>, Error> {
        let node = self.g.node(w).clone();
        let Op::Conv2d { window, groups } = node.op else {
            return Err(Error::Unsupported(format!("schedule: {w} is not a convolution")));
        };
        let (x, wt) = (node.inputs[0], node.inputs[1]);
        let xs = self.shapes[x.index()].clone();
        let ws = self.shapes[wt.index()].clone();
        let out = self.shapes[w.index()].clone();
        let dt = node.ty.dtype;
        let g = groups.max(1);
        let (nb, oc, cg, kh, kw) = (out[0], ws[0], ws[1], ws[2], ws[3]);
        let (cog, kg, p) = (oc / g, cg * kh * kw, out[2] * out[3]);
        let plan = self.conv[w.index()];
        let (space, ar, br) = if plan == ConvPlan::Direct {
            // out[b] = W[OC, C] @ x[b][C, H*W]
            let space = Space::Matmul { batch: nb, m: oc, n: p, k: kg, out: MatOut::plain(oc, p) };
            let wc = [Index::var(Var::M), Index::var(Var::Red), Index::Const(0), Index::Const(0)];
            let ar = self.mat_operand(w, wt, &wc, &space, [Var::Batch, Var::M, Var::Red], [nb, oc, kg], true)?;
            let n = Index::var(Var::N);
            let xc = [Index::var(Var::Batch), Index::var(Var::Red), n.clone().div(xs[3] as i64), n.rem(xs[3] as i64)];
            let br = self.mat_operand(w, x, &xc, &space, [Var::Batch, Var::Red, Var::N], [nb, kg, p], false)?;
            (space, ar, br)
        } else {
            // out[:, g*cog + m, pixel] = sum_r W[g*cog + m, r] * cols[g][r, image * P + pixel]
            let out_map = MatOut { s_batch: cog * p, s_outer: oc * p, s_m: p, inner: p };
            let space = Space::Matmul { batch: g, m: cog, n: nb * p, k: kg, out: out_map };
            let red = delinearize(&Index::var(Var::Red), &[cg, kh, kw]);
            let mut wc = vec![Index::var(Var::Batch).mul(cog as i64).add(Index::var(Var::M))];
            wc.extend(red);
            let ar = self.mat_operand(w, wt, &wc, &space, [Var::Batch, Var::M, Var::Red], [g, cog, kg], false)?;
            let br = match self.im2col(w, &window, g)? {
                Ok(br) => br,
                Err(over) => return Ok(Some(over)),
            };
            (space, ar, br)
        };
        let pos = self.kernels.len();
        let mut kb = KernelBuilder::new(space.clone());
        for r in [&ar, &br] {
            let (dt, n) = self.buf_info(&r.buf);
            kb.read_arg(r.buf.clone(), dt, n);
        }
        kb.matmul = Some(MatSpec { a: ar, b: br, in_dtype: dt, acc_dtype: acc_dtype(RedOp::Sum, dt) });
        let mut v = kb.push(Expr::Acc(0), dt);
        if let Some(&bias) = node.inputs.get(2) {
            let ch = match plan {
                ConvPlan::Direct => Index::var(Var::M),
                _ => Index::var(Var::Batch).mul(cog as i64).add(Index::var(Var::M)),
            };
            let bv = self.emit(&mut kb, pos, bias, &[ch], Phase::Epilogue).map_err(|r| Self::internal(r, self))?;
            v = kb.push(Expr::Binary(BinaryOp::Add, v, bv), dt);
        }
        let Space::Matmul { out: out_map, .. } = &space else { unreachable!() };
        let index = kb.simp(&out_map.flat());
        kb.computed.insert(w);
        kb.members.push(Member {
            target: Target::Node(w),
            value: v,
            index,
            phase: Phase::Epilogue,
            root: true,
            ready: usize::MAX,
        });
        match self.check(&kb) {
            Ok(()) => {}
            Err(Refusal::Bindings { would, limit }) => return Ok(Some((would, limit))),
            Err(r) => return Err(Self::internal(r, self)),
        }
        self.kernels.push(kb);
        self.place[w.index()] = Some(pos);
        Ok(None)
    }

    /// The im2col buffer of convolution `w` with `g` groups, `[g][C/g * kh * kw][N * OH * OW]`
    /// row-major, written by a pointwise gather kernel (taps in the padding read 0); returns it as
    /// the matmul's B operand (batch over groups); `Err((would, limit))` when the gather kernel would
    /// bind too many buffers.
    #[allow(clippy::type_complexity)]
    fn im2col(&mut self, w: NodeId, window: &Window2d, g: usize) -> Result<Result<MatRef, (usize, usize)>, Error> {
        let node = self.g.node(w);
        let x = node.inputs[0];
        let ws = &self.shapes[node.inputs[1].index()];
        let out = &self.shapes[w.index()];
        let (cg, kh, kw) = (ws[1], ws[2], ws[3]);
        let (nb, oh, ow) = (out[0], out[2], out[3]);
        let (kg, cols) = (cg * kh * kw, nb * oh * ow);
        let dt = self.g.ty(x).dtype;
        let numel = g * kg * cols;
        let id = self.copies.len();
        self.copies.push((dt, numel));
        let pos = self.kernels.len();
        let mut kb = KernelBuilder::new(Space::Pointwise { numel });
        kb.label = Some("im2col");
        let l = Index::var(Var::Lane);
        let c = delinearize(&l, &[g, cg, kh, kw, nb, oh, ow]);
        let tap = Tap {
            n: c[4].clone(),
            chan: c[0].clone().mul(cg as i64).add(c[1].clone()),
            oy: c[5].clone(),
            ox: c[6].clone(),
            ky: c[2].clone(),
            kx: c[3].clone(),
        };
        let value = self.conv_tap(&mut kb, pos, x, window, &tap, Phase::Lane).map_err(|r| Self::internal(r, self))?;
        kb.computed.insert(w);
        kb.members.push(Member {
            target: Target::Operand(id),
            value,
            index: l,
            phase: Phase::Lane,
            root: false,
            ready: usize::MAX,
        });
        match self.check(&kb) {
            Ok(()) => {}
            Err(Refusal::Bindings { would, limit }) => return Ok(Err((would, limit))),
            Err(r) => return Err(Self::internal(r, self)),
        }
        self.kernels.push(kb);
        self.decide(
            vec![w.0],
            false,
            format!("materialized: im2col of conv {w} ({g} x {kg} x {cols} {dt}, {} bytes)", numel * dt.size_bytes()),
            vec![pos],
        );
        Ok(Ok(MatRef { buf: BufRef::Operand(id), offset: 0, s_batch: kg * cols, s_row: cols, s_col: 1 }))
    }
}

/// One tap of a convolution window: image, input channel, output pixel and window offset.
struct Tap {
    n: Index,
    chan: Index,
    oy: Index,
    ox: Index,
    ky: Index,
    kx: Index,
}

/// Padded input coordinates `(oy * sh + ky * dh, ox * sw + kx * dw)` of a window tap.
fn taps(window: &Window2d, oy: Index, ox: Index, ky: Index, kx: Index) -> (Index, Index) {
    let [sh, sw] = window.stride;
    let [dh, dw] = window.dilation;
    (oy.mul(sh as i64).add(ky.mul(dh as i64)), ox.mul(sw as i64).add(kx.mul(dw as i64)))
}

/// The mask of taps `(iy, ix)` with `lo <= (iy, ix)` (when given) and `(iy, ix) < hi`: `None` when
/// always true, `Err` when never.
fn tap_mask(
    kb: &mut KernelBuilder,
    iy: &Index,
    ix: &Index,
    lo: Option<(i64, i64)>,
    hi: (i64, i64),
) -> Result<Option<ExprId>, ()> {
    let mut m: Option<ExprId> = None;
    let mut conds = Vec::new();
    if let Some((ly, lx)) = lo {
        conds.push((IndexCmp::Ge, iy, ly));
        conds.push((IndexCmp::Ge, ix, lx));
    }
    conds.push((IndexCmp::Lt, iy, hi.0));
    conds.push((IndexCmp::Lt, ix, hi.1));
    for (op, a, b) in conds {
        let t = kb.cmp(op, a, &Index::Const(b));
        m = kb.and(m, t)?;
    }
    Ok(m)
}

/// Batch coordinates of an operand with batch dims `bshape` (padded to the full batch rank) from
/// the full batch coordinates `bc`.
fn bcast_batch(bc: &[Index], bshape: &[usize]) -> Vec<Index> {
    bc.iter().zip(bshape).map(|(c, &d)| if d == 1 { Index::Const(0) } else { c.clone() }).collect()
}

/// `offset + sum coef * var` when `i` is affine in loop variables.
fn affine(i: &Index) -> Option<(i64, Vec<(Var, i64)>)> {
    let mut off = 0i64;
    let mut coefs: Vec<(Var, i64)> = Vec::new();
    let mut add = |v: Var, k: i64| match coefs.iter_mut().find(|(w, _)| *w == v) {
        Some((_, kk)) => *kk += k,
        None => coefs.push((v, k)),
    };
    let terms: Vec<&Index> = match i {
        Index::Sum(ts) => ts.iter().collect(),
        other => vec![other],
    };
    for t in terms {
        match t {
            Index::Const(c) => off += c,
            Index::Var(v) => add(*v, 1),
            Index::Mul(x, k) => match &**x {
                Index::Var(v) => add(*v, *k),
                _ => return None,
            },
            _ => return None,
        }
    }
    Some((off, coefs))
}
