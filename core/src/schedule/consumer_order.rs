//! Consumer order ([`Sched::plan_consumer_order`], run after stage A): a stored node that is read
//! only through one permute, the permute read (through reshapes) only as a matmul or attention
//! operand, is stored in the permute's order ([`Sched::layout`]). The operand is then a strided
//! view of the node's buffer instead of a copy kernel.
//!
//! Exported multi-head attention has two such permutes a layer: the attention's `[B, H, S, d]`
//! output permuted to `[B, S, H, d]` (or `[S, B, H, d]` in `nn.MultiheadAttention`'s seq-first
//! order) and reshaped for the output projection, and, in `nn.MultiheadAttention`, the
//! LayerNorm's `[B, S, E]` output permuted to `[S, B, E]` for the packed `q, k, v` projection.
//! Either permute's rows mix two axes, which no row stride expresses, so each was a copy kernel
//! (measured on ViT-B/16 at batch 8, H200, session 23: 6.1 us a copy, two a layer).
//!
//! The same holds for a stored `k^T` (`[.., d, keys]`) that only a fused attention reads: the
//! kernel reads keys as rows with the head dimension contiguous, so `k^T` is stored with its last
//! two axes swapped (measured on ViT-B/16's structure under bf16 autocast, where the projection's
//! epilogue stores `q`, `k^T` and `v` after adding the bias in f32: `k^T` was copied again).
//!
//! An unfused attention's second product (`p @ v`, GPT-2 under bf16 autocast) is such a node
//! too: its output permuted back to `[B, S, H, d]` for the output projection. Before autocast's
//! cast round trips cancelled (`passes::algebraic`), the product's epilogue stored that permuted
//! copy; without them it was a copy kernel of its own (measured on an H200, session 23: GPT-2
//! small in bf16 135 -> 147 kernels, +3%), so products are stored in their permute's order too.
//!
//! **Legality:** the node is computed by a kernel whose stores take any index (a pointwise or
//! reduction member, a matmul's or a fused attention's output: `finish` stores every member
//! through [`Sched::storage_index`]; a library product then takes its split form, the product
//! into a scratch buffer and the permuted store in the epilogue kernel); it is no graph output and
//! has no layout yet; every user is the same permute, which keeps the last axis last (the rows stay contiguous, so vector stores and loads
//! along them stay valid); no node between it and the contraction is itself stored.
//!
//! **Profitability** needs no cost model: the stores move from one row order to another (the same
//! bytes, whole rows either way), and the copy kernel, a read and a write of the whole tensor,
//! disappears.

use super::plan::{Kind, Sched};
use crate::ir::{NodeId, Op};

impl Sched<'_> {
    /// Stores each node that qualifies (module docs) in its permute's order, with the decision.
    pub(super) fn plan_consumer_order(&mut self) {
        if !self.opts.fusion {
            return;
        }
        self.plan_key_rows();
        for i in 0..self.g.nodes.len() {
            let id = NodeId(i as u32);
            let product = self.kind[i] == Kind::MatMul && !self.inner_attn[i];
            let stored = product || self.stored_member(id);
            if !self.live[i] || !stored || self.layout[i].is_some() || !self.outputs_of[i].is_empty() {
                continue;
            }
            let Some(p) = self.common_permute(id) else { continue };
            let rank = p.len();
            if rank < 2 || p[rank - 1] != rank - 1 || p.iter().enumerate().all(|(a, &b)| a == b) {
                continue;
            }
            if !self.users[i].iter().all(|&u| self.read_by_contractions(u)) {
                continue;
            }
            let what = match (self.attn[i].is_some(), product) {
                (true, _) => "attention output",
                (false, true) => "product",
                _ => "node",
            };
            let mut nodes = vec![id.0];
            nodes.extend(self.users[i].iter().map(|u| u.0));
            self.layout[i] = Some(p.clone());
            self.decide(
                nodes,
                false,
                format!(
                    "layout: {what} {id} stored in its permute's order {p:?} (a matmul reads it through strides, \
                     not through a copy)"
                ),
                vec![],
            );
        }
    }

    /// Stores each `k^T` that only its fused attention reads with the last two axes swapped (the
    /// module docs), with the decision.
    fn plan_key_rows(&mut self) {
        for i in 0..self.g.nodes.len() {
            let Some(am) = &self.attn[i] else { continue };
            let (kt, qk) = (am.operands[1], am.qk);
            let k = kt.index();
            let rank = self.shapes[k].len();
            if !self.stored_member(kt)
                || rank < 2
                || self.layout[k].is_some()
                || !self.outputs_of[k].is_empty()
                || !self.users[k].iter().all(|&u| u == qk)
            {
                continue;
            }
            let mut p: Vec<usize> = (0..rank).collect();
            p.swap(rank - 2, rank - 1);
            self.layout[k] = Some(p);
            self.decide(
                vec![kt.0, qk.0],
                false,
                format!(
                    "layout: {kt}, the keys of attention {}, stored as rows of keys (the kernel reads them \
                     through strides, not through a copy)",
                    NodeId(i as u32)
                ),
                vec![],
            );
        }
    }

    /// True when `n` is stored by a pointwise or reduction member, whose stores take any index.
    fn stored_member(&self, n: NodeId) -> bool {
        self.materialized[n.index()] && matches!(self.kind[n.index()], Kind::Pointwise | Kind::Reduce | Kind::Gather)
    }

    /// The permutation every live user of `n` applies, when all of them are the same permute.
    fn common_permute(&self, n: NodeId) -> Option<Vec<usize>> {
        let users = &self.users[n.index()];
        let mut common: Option<&Vec<usize>> = None;
        for &u in users {
            match &self.g.node(u).op {
                Op::Permute(p) if common.is_none_or(|c| c == p) => common = Some(p),
                _ => return None,
            }
        }
        common.cloned()
    }

    /// True when `n`, a movement node nobody stores, is read only by matmuls (fused attention's
    /// included), directly or through reshapes nobody stores.
    fn read_by_contractions(&self, n: NodeId) -> bool {
        if self.materialized[n.index()] || !self.outputs_of[n.index()].is_empty() {
            return false;
        }
        let users = &self.users[n.index()];
        !users.is_empty()
            && users.iter().all(|&u| match self.g.node(u).op {
                Op::MatMul => true,
                Op::Reshape(_) => self.read_by_contractions(u),
                _ => false,
            })
    }
}
