//! Stage A, lowering-time inlining as Inductor does it: every elementwise, movement and gather node
//! is computed inside its consumers unless it is *materialized* (stored to a buffer): graph outputs,
//! operands that a matmul or window reads through strides or many times, values with several
//! users that are expensive or read many other values, or that one user adds to a matrix product
//! where the backend's library takes a stored residual (the [`CostModel`](super::CostModel)'s
//! calls: `materialize`, `materialize_residual`), eager mode, or the inline depth limit.

use super::conv::ConvPlan;
use super::plan::{Kind, Sched};
use crate::ir::{BinaryOp, NodeId, Op};

/// The longest chain of producers inlined into one consumer: deeper chains are cut by
/// materializing, which bounds the recursion of emission (and the size of one kernel).
pub(super) const MAX_INLINE_DEPTH: usize = 400;

/// Reads of one inline expression tracked at most (the cost model compares with a few).
const MAX_TRACKED_READS: usize = 32;

/// The op weight used by the inline cost (transcendentals count more).
fn weight(op: &Op) -> usize {
    match op {
        Op::Unary(u) => u.weight(),
        Op::Binary(b) => b.weight(),
        Op::Where | Op::Cast(_) => 1,
        Op::Concat { .. } | Op::Pad { .. } | Op::Gather { .. } | Op::GatherElements { .. } => 1,
        _ => 0,
    }
}

impl Sched<'_> {
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
                // A fused attention reads q, k (through the first product) and v; its
                // probabilities never leave the kernel.
                Op::MatMul if self.attn[id.index()].is_some() => {
                    vec![(node.inputs[1], true, "materialized: attention operand (v)")]
                }
                Op::MatMul if self.inner_attn[id.index()] => {
                    node.inputs.iter().map(|&o| (o, true, "materialized: attention operand (q, k)")).collect()
                }
                // An fp8 prologue reads the value under each widening cast (`prologue.rs`).
                Op::MatMul if self.prologue[id.index()].is_some() => node
                    .inputs
                    .iter()
                    .map(|&o| {
                        let cast = self.through_movement(o);
                        (self.g.node(cast).inputs[0], true, "materialized: fp8 matmul operand (read by the prologue)")
                    })
                    .collect(),
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
                    ConvPlan::Implicit => vec![
                        (node.inputs[0], true, "materialized: conv operand (read through the implicit im2col view)"),
                        (node.inputs[1], true, "materialized: conv weight (a matmul operand)"),
                    ],
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
        // The values each inline expression reads (sorted node ids; capped, only compared with a
        // small threshold).
        let mut reads: Vec<Vec<u32>> = vec![Vec::new(); n];
        for (id, node) in self.g.iter() {
            let i = id.index();
            if !self.live[i] || !self.kind[i].inlinable() || self.inner_attn[i] {
                continue;
            }
            let inlined =
                || node.inputs.iter().filter(|a| self.kind[a.index()].inlinable() && !self.materialized[a.index()]);
            cost[i] = weight(&node.op) + inlined().map(|a| cost[a.index()]).sum::<usize>();
            depth[i] = 1 + inlined().map(|a| depth[a.index()]).max().unwrap_or(0);
            let mut r: Vec<u32> = Vec::new();
            for a in &node.inputs {
                if self.kind[a.index()].inlinable() && !self.materialized[a.index()] {
                    r.extend_from_slice(&reads[a.index()]);
                } else if self.g.node(*a).ty.shape.numel().is_none_or(|e| e > 1) {
                    r.push(a.0);
                }
            }
            r.sort_unstable();
            r.dedup();
            r.truncate(MAX_TRACKED_READS);
            reads[i] = r;
            let users = self.users[i].len();
            let reason: Option<String> = if !self.outputs_of[i].is_empty() {
                Some("materialized: graph output".into())
            } else if !self.opts.fusion && self.kind[i] != Kind::Movement {
                Some("materialized: eager mode (one kernel per op)".into())
            } else if let Some(why) = need[i] {
                Some(why.into())
            } else if users >= 2 && self.opts.fusion {
                self.opts.cost_model.materialize(users, cost[i], reads[i].len()).or_else(|| {
                    if self.residual_of_product(id) { self.opts.cost_model.materialize_residual() } else { None }
                })
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

    /// Whether a consumer of `id` adds it to a matrix product: `Add(id, p)` (either order) with
    /// `p` a matmul's value, through casts, reshapes and an added bias (`matmul + bias`, autocast's
    /// `cast(matmul, f32)`, a product of flattened rows reshaped back), within four steps.
    fn residual_of_product(&self, id: NodeId) -> bool {
        let product = |mut p: NodeId| {
            for _ in 0..4 {
                let node = self.g.node(p);
                match &node.op {
                    Op::MatMul => return self.attn[p.index()].is_none() && !self.inner_attn[p.index()],
                    // GPT-2's `Gemm` on the flattened rows, reshaped back to `[batch, seq, d]`.
                    Op::Cast(_) | Op::Reshape(_) => p = node.inputs[0],
                    // `matmul + bias`: follow the side that is not a vector along the last axis.
                    Op::Binary(BinaryOp::Add) => {
                        let rank = |x: NodeId| self.g.node(x).ty.shape.rank();
                        let [a, b] = [node.inputs[0], node.inputs[1]];
                        p = if rank(a) >= rank(b) { a } else { b };
                    }
                    _ => return false,
                }
            }
            false
        };
        self.users[id.index()].iter().any(|&u| {
            let node = self.g.node(u);
            matches!(node.op, Op::Binary(BinaryOp::Add))
                && node.inputs.len() == 2
                && node.inputs.contains(&id)
                && node.inputs.iter().any(|&x| x != id && product(x))
                && self.g.node(u).ty.shape == self.g.node(id).ty.shape
        })
    }
}
