//! Attention (planned before stage A, placed in stage B): a `matmul -> score ops -> softmax ->
//! matmul` chain becomes one [`KernelBody::Attention`](crate::kernel::KernelBody::Attention)
//! kernel whose scores never reach memory, as FlashAttention computes it and as torch.compile's
//! SDPA pattern match finds it.
//!
//! **Legality** ([`Sched::match_attention`]), on the decomposed graph, from the second product
//! `pv = matmul(p, v)` backwards:
//! * `p` is `exp(s - max(s)) / sum(exp(s - max(s)))` over the last axis (the decomposed softmax,
//!   with keepdims), optionally cast to a 16-bit float for the product, optionally under torch's
//!   NaN guard `where(isnan(p), 0, p)` (then applied to the output: [`AttnMatch::nan_guard`]),
//!   the cast inside the guard or outside it (autocast's order);
//! * `s` comes from exactly one matmul `qk` through pointwise and movement ops only (scale,
//!   additive or boolean masks, casts), at the same element: the scores are not reshaped;
//! * an operand of `qk` that is another node times a constant of one value, read by `qk` alone,
//!   joins the chain: the kernel reads the other node and multiplies the raw scores by the
//!   factor ([`Sched::scaled_operand`]; rounding differs from the graph's by the order of one
//!   multiplication);
//! * every node on a path from `qk` to `pv` is used only inside the chain and is no graph output
//!   (else the scores or probabilities must be stored anyway: refused with the node named);
//! * both products share their batch dimensions; the last batch dimension is the heads.
//!
//! A `where(mask, s, -inf)` (or `where(mask, -inf, s)`) at the top of `s` whose mask is a constant
//! lower triangle (`key <= query + o`, `o >= 0`) becomes the body's causal bound, so kernels skip
//! the masked key tiles instead of loading a mask. Other masks stay in the score expression.
//!
//! **Profitability** is the [`CostModel::fuse_attention`](super::CostModel::fuse_attention)'s
//! call: a backend whose renderer draws no attention bodies refuses, and the chain stays three
//! kernels. Every match, fusion and refusal is a recorded decision.
//!
//! **Placement** ([`Sched::sched_attention`]): `q`, `k` and `v` are read through
//! [`AttnOperand`](crate::kernel::AttnOperand) strides (batch, head, GQA group, row; the head
//! dimension contiguous) when their index is such a view of one buffer, else through a contiguous
//! copy; the score expression is emitted at (`Batch`, `M`, `Key`) with `qk` read as accumulator 1;
//! `pv` is the root at (`Batch`, `M`, `N`), so its epilogue fuses as a matmul's.

use super::AttentionShape;
use super::build::{BufRef, KernelBuilder, MatOut, Member, Phase, Space, delinearize};
use super::plan::{Kind, Sched};
use crate::dtype::DType;
use crate::error::Error;
use crate::ir::{BinaryOp, NodeId, Op, ReduceOp, UnaryOp};
use crate::kernel::{Expr, ExprId, Index, Var};
use std::collections::BTreeSet;

/// How many nodes above the second product a softmax is looked for when the match fails
/// ([`Sched::softmax_near`]).
const NEAR_DEPTH: usize = 4;

/// A matched attention chain.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct AttnMatch {
    /// The first product (`q @ k^T`).
    pub qk: NodeId,
    /// The softmax input the score expression computes (below a recognised causal `where`).
    pub score: NodeId,
    /// The causal bound, if recognised.
    pub causal: Option<usize>,
    /// Dtype of the probabilities fed to the second product.
    pub p_dtype: DType,
    /// Nodes computed inside the kernel (every node on a path from `qk` to `pv`, `pv` excluded).
    pub inner: BTreeSet<NodeId>,
    /// Batch dimensions of both products.
    pub bdims: Vec<usize>,
    /// The shape as the cost model sees it.
    pub shape: AttentionShape,
    /// The probabilities pass through `where(isnan(p), 0, p)`: applied to the output instead
    /// (`where(isnan(o), 0, o)`). Every template gives a row whose logits are all `-inf` (or hold
    /// a NaN) as NaN, so such rows come out 0 as the guard makes them; the one difference: a NaN
    /// in `v` gives NaN unguarded and 0 here.
    pub nan_guard: bool,
    /// The operands the kernel reads (`q`, `k^T`): the first product's own, or what they scale
    /// by a constant ([`Sched::scaled_operand`]: `q * c1 @ (k^T * c2)`, as the math form of
    /// `scaled_dot_product_attention` exports it), the factors then applied to the raw scores.
    pub operands: [NodeId; 2],
    /// The product of those factors (1 when none).
    pub operand_scale: f64,
}

/// A strided attention operand before argument positions exist.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct AttnRef {
    pub buf: BufRef,
    pub offset: usize,
    pub s_batch: usize,
    pub s_head: usize,
    pub s_row: usize,
    pub group: usize,
}

/// The attention part of an attention kernel.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct AttnSpec {
    pub q: AttnRef,
    pub k: AttnRef,
    pub v: AttnRef,
    pub in_dtype: DType,
    pub p_dtype: DType,
    pub score: ExprId,
    pub causal: Option<usize>,
}

impl Sched<'_> {
    /// Finds every attention chain and asks the cost model whether to fuse it (fusion on only).
    pub(super) fn plan_attention(&mut self) {
        if !self.opts.fusion {
            return;
        }
        for i in 0..self.g.nodes.len() {
            let pv = NodeId(i as u32);
            if !self.live[i] || self.kind[i] != Kind::MatMul || self.inner_attn[i] {
                continue;
            }
            match self.match_attention(pv) {
                Ok(None) => {}
                // Chains overlap where one attention's output is the next one's first product
                // (`softmax(softmax(x @ w1) @ w2) @ w3`): the earlier match keeps it.
                Ok(Some(m)) if m.inner.iter().any(|n| self.attn[n.index()].is_some() || self.inner_attn[n.index()]) => {
                    let taken = m.inner.iter().find(|n| self.attn[n.index()].is_some() || self.inner_attn[n.index()]);
                    let why = format!(
                        "refused: attention: {} is already part of another fused attention",
                        taken.map_or(String::new(), |n| format!("%{}", n.0))
                    );
                    self.decide(vec![pv.0], false, why, vec![]);
                }
                Ok(Some(m)) => {
                    let mut nodes: Vec<u32> = m.inner.iter().map(|n| n.0).collect();
                    nodes.push(pv.0);
                    match self.opts.cost_model.fuse_attention(&m.shape, self.caps) {
                        Ok(reason) => {
                            for n in &m.inner {
                                self.inner_attn[n.index()] = true;
                            }
                            self.decide(nodes, true, reason, vec![]);
                            self.attn[i] = Some(m);
                        }
                        Err(reason) => self.decide(nodes, false, reason, vec![]),
                    }
                }
                Err(reason) => self.decide(vec![pv.0], false, format!("refused: attention: {reason}"), vec![]),
            }
        }
    }

    /// The attention chain ending in `pv`: `Ok(None)` when `pv` does not multiply a softmax (not
    /// attention-shaped), `Err(reason)` when it does but cannot be fused.
    pub(super) fn match_attention(&self, pv: NodeId) -> Result<Option<AttnMatch>, String> {
        let g = self.g;
        let node = |n: NodeId| g.node(n);
        let [pa, v] = node(pv).inputs[..] else { return Ok(None) };
        // The probabilities, optionally cast down for the product.
        // torch's exported attention guards the probabilities: `where(isnan(p), 0, p)` (a row
        // whose every key is masked gives zeros, not NaN).
        // Under autocast the cast comes last: `cast(where(isnan(p), 0, p), bf16)` (GPT-2's export
        // in bf16, session 23: unmatched, its attention ran as two products and a softmax).
        let float_cast = |n: NodeId| match &node(n).op {
            Op::Cast(to) if to.is_float() && node(node(n).inputs[0]).ty.dtype.is_float() => {
                Some((node(n).inputs[0], *to))
            }
            _ => None,
        };
        let (pa, outer_cast) = match float_cast(pa) {
            Some((x, to)) => (x, Some(to)),
            None => (pa, None),
        };
        let (pa, nan_guard) = match self.nan_guard_of(pa) {
            Some(x) => (x, true),
            None => (pa, false),
        };
        let (probs, p_dtype) = match (outer_cast, float_cast(pa)) {
            (Some(to), _) => (pa, to),
            (None, Some((x, to))) => (x, to),
            (None, None) => (pa, node(pa).ty.dtype),
        };
        let Some((s, sm_nodes)) = self.softmax_of(probs) else {
            return match self.softmax_near(node(pv).inputs[0]) {
                Some(path) => Err(format!(
                    "the probabilities reach the product through {path} (taken: a cast to a float type and torch's \
                     NaN guard `where(isnan(p), 0, p)`, in either order)"
                )),
                None => Ok(None),
            };
        };
        let rank = self.shapes[s.index()].len();
        if rank < 2 || self.shapes[pv.index()].len() != rank || self.shapes[v.index()].len() != rank {
            return Err("the products are not batched alike (ranks differ)".into());
        }
        // The first product: the one matmul the scores come from through inlinable nodes.
        let mut mms = BTreeSet::new();
        let mut seen = BTreeSet::new();
        let mut stack = vec![s];
        while let Some(x) = stack.pop() {
            if !seen.insert(x) {
                continue;
            }
            match self.kind[x.index()] {
                Kind::MatMul => {
                    mms.insert(x);
                }
                k if k.inlinable() => stack.extend(node(x).inputs.iter().copied()),
                _ => {}
            }
        }
        // Keep the matmuls the path to `s` passes through only inlinable nodes for; a mask built by
        // another matmul is a plain operand of the score expression.
        let qk = match mms.iter().copied().filter(|&m| self.on_path(m, s)).collect::<Vec<_>>()[..] {
            [one] => one,
            [] => return Err("the scores do not come from a matmul".into()),
            _ => return Err("the scores combine several matmuls".into()),
        };
        let qshape = &self.shapes[qk.index()];
        if qshape != &self.shapes[s.index()] {
            return Err(format!("the scores change shape between the matmul ({qshape:?}) and the softmax"));
        }
        let (q, kt) = (node(qk).inputs[0], node(qk).inputs[1]);
        let (sq, skt, sv, spv) =
            (&self.shapes[q.index()], &self.shapes[kt.index()], &self.shapes[v.index()], &self.shapes[pv.index()]);
        if sq.len() != rank || skt.len() != rank {
            return Err("the first product's operands are not batched as its output".into());
        }
        let bdims = qshape[..rank - 2].to_vec();
        if spv[..rank - 2] != bdims[..] {
            return Err(format!("the products have different batch dimensions ({bdims:?} vs {:?})", &spv[..rank - 2]));
        }
        let (m, kv, d, dv) = (qshape[rank - 2], qshape[rank - 1], sq[rank - 1], sv[rank - 1]);
        if m == 0 || kv == 0 || d == 0 || dv == 0 {
            return Err("an empty extent".into());
        }
        let (in_dtype, vt) = (node(q).ty.dtype, node(v).ty.dtype);
        if !in_dtype.is_float() || node(kt).ty.dtype != in_dtype || vt != in_dtype || p_dtype != in_dtype {
            return Err(format!(
                "q, k, v and the probabilities must share one float dtype ({in_dtype}, {}, {vt}, {p_dtype})",
                node(kt).ty.dtype
            ));
        }
        // Every node between the two products stays inside, and a scaling of `q` or `k^T` by a
        // constant that nothing else reads (its factor moves onto the scores).
        let mut inner: BTreeSet<NodeId> = BTreeSet::new();
        let mut operands = [q, kt];
        let mut operand_scale = 1.0;
        for o in &mut operands {
            if let Some((x, c, computed)) = self.scaled_operand(*o, qk) {
                inner.extend(computed);
                *o = x;
                operand_scale *= c;
            }
        }
        for i in qk.index()..pv.index() {
            let n = NodeId(i as u32);
            if self.live[i] && self.on_path(qk, n) && self.on_path(n, pv) {
                inner.insert(n);
            }
        }
        for &n in &inner {
            if !self.outputs_of[n.index()].is_empty() {
                return Err(format!("{n} ({}) is a graph output", node(n).op.name()));
            }
            if let Some(u) = self.users[n.index()].iter().find(|u| !inner.contains(u) && **u != pv) {
                return Err(format!(
                    "{n} ({}) is also used by {u} ({}): the scores would be needed in memory",
                    node(n).op.name(),
                    node(*u).op.name()
                ));
            }
            let ok = self.kind[n.index()].inlinable() || n == qk || sm_nodes.contains(&n);
            if !ok {
                return Err(format!("the scores pass through {n} ({})", node(n).op.name()));
            }
        }
        let (score, causal) = match self.causal_bound(s, m, kv) {
            Some((inner_s, o)) => (inner_s, Some(o)),
            None => (s, None),
        };
        let heads = if bdims.len() >= 2 { bdims[bdims.len() - 1] } else { 1 };
        let batch = bdims.iter().product::<usize>() / heads.max(1);
        let shape = AttentionShape { batch, heads, m, kv, d, dv, dtype: in_dtype, causal: causal.is_some() };
        Ok(Some(AttnMatch { qk, score, causal, p_dtype, inner, bdims, shape, nan_guard, operands, operand_scale }))
    }

    /// `(x, c, computed)` when `o` is `x * c` (or `c * x`, or `x / c`) for a constant `c` holding
    /// one finite value, of `x`'s shape and dtype, read by `qk` alone and no graph output: the
    /// first product can read `x` and scale its result instead (`computed`: `o`, now inside the
    /// kernel). The math form of torch's `scaled_dot_product_attention` scales both `q` and `k^T`
    /// by `scale ** 0.5` (GPT-2's legacy export): unfolded, each scaled operand was a kernel of its
    /// own and `k^T` was then copied again for the attention kernel (14 us per layer of GPT-2 small
    /// at 8 x 128 on an H200).
    ///
    /// Under autocast the product reads `cast(x * c, bf16)` where `x` is, through movement ops, a
    /// bf16 value widened to f32 (`x = permute(cast(y: bf16, f32))`): then `x` is returned too
    /// (`computed`: the cast and the scaling), and the kernel reads `y` through the widening cast
    /// ([`Sched::view_index_widened`]). The graph rounds `x * c` to bf16 before the product; the
    /// kernel multiplies the f32 scores instead, as a fused SDPA kernel does (measured on ViT-B/16
    /// in bf16, session 23: unmatched, `q` and `k^T` were stored by the projection's epilogue and
    /// `k^T` copied again, every layer).
    fn scaled_operand(&self, o: NodeId, qk: NodeId) -> Option<(NodeId, f64, Vec<NodeId>)> {
        let g = self.g;
        let only_qk = |n: NodeId, by: NodeId| {
            self.users[n.index()].iter().all(|&u| u == by)
                && self.outputs_of[n.index()].is_empty()
                && self.live[n.index()]
        };
        if let Op::Cast(dt) = g.node(o).op
            && let [m] = g.node(o).inputs[..]
            && g.node(m).ty.dtype == DType::F32
            && dt != DType::F32
            && only_qk(o, qk)
            && let Some((x, c)) = self.scaled_value(m, o)
            && self.widened_from(x) == Some(dt)
        {
            return Some((x, c, vec![o, m]));
        }
        let (x, c) = self.scaled_value(o, qk)?;
        (g.node(x).ty.dtype == g.node(o).ty.dtype).then_some((x, c, vec![o]))
    }

    /// `(x, c)` when `o` is `x * c`, `c * x` or `x / c` for a constant `c` of one finite value, `x` of
    /// `o`'s shape, `o` read by `by` alone and no graph output.
    fn scaled_value(&self, o: NodeId, by: NodeId) -> Option<(NodeId, f64)> {
        let g = self.g;
        let splat = |n: NodeId| match &g.node(n).op {
            Op::Constant(t) if t.numel() >= 1 => {
                let v = t.to_f64_vec();
                (v[0].is_finite() && v.iter().all(|&x| x == v[0])).then_some(v[0])
            }
            _ => None,
        };
        let [a, b] = g.node(o).inputs[..] else { return None };
        let (x, c) = match g.node(o).op {
            Op::Binary(BinaryOp::Mul) => match (splat(a), splat(b)) {
                (_, Some(c)) => (a, c),
                (Some(c), None) => (b, c),
                _ => return None,
            },
            Op::Binary(BinaryOp::Div) => (a, 1.0 / splat(b).filter(|&c| c != 0.0)?),
            _ => return None,
        };
        let alone = self.users[o.index()].iter().all(|&u| u == by) && self.outputs_of[o.index()].is_empty();
        (alone && self.shapes[x.index()] == self.shapes[o.index()] && self.live[o.index()]).then_some((x, c))
    }

    /// `x` when `p` is `where(isnan(x), 0, x)` (the zero a constant of zeros).
    fn nan_guard_of(&self, p: NodeId) -> Option<NodeId> {
        let g = self.g;
        let Op::Where = g.node(p).op else { return None };
        let [c, zero, x] = g.node(p).inputs[..] else { return None };
        let Op::Unary(UnaryOp::IsNan) = g.node(c).op else { return None };
        let Op::Constant(t) = &g.node(zero).op else { return None };
        (g.node(c).inputs[0] == x && t.numel() >= 1 && t.to_f64_vec().iter().all(|&v| v == 0.0)).then_some(x)
    }

    /// Whether `to` depends on `from` through inlinable nodes only (`from == to` counts).
    fn on_path(&self, from: NodeId, to: NodeId) -> bool {
        let mut stack = vec![to];
        let mut seen = BTreeSet::new();
        while let Some(x) = stack.pop() {
            if x == from {
                return true;
            }
            if !seen.insert(x) || x.index() < from.index() {
                continue;
            }
            let softmax_reduce = matches!(self.g.node(x).op, Op::Reduce { op: ReduceOp::Max | ReduceOp::Sum, .. });
            if self.kind[x.index()].inlinable() || softmax_reduce || x == to {
                stack.extend(self.g.node(x).inputs.iter().copied());
            }
        }
        false
    }

    /// When `p` is the decomposed softmax over the last axis of `s`: `s` and the softmax's own
    /// nodes (max, subtract, exp, sum, divide).
    fn softmax_of(&self, p: NodeId) -> Option<(NodeId, Vec<NodeId>)> {
        let g = self.g;
        let last = self.shapes[p.index()].len().checked_sub(1)?;
        let red = |n: NodeId, want: ReduceOp| -> Option<NodeId> {
            match &g.node(n).op {
                Op::Reduce { op, axes, keepdim: true } if *op == want && axes[..] == [last] => {
                    Some(g.node(n).inputs[0])
                }
                _ => None,
            }
        };
        let Op::Binary(BinaryOp::Div) = g.node(p).op else { return None };
        let [e, sum] = g.node(p).inputs[..] else { return None };
        if red(sum, ReduceOp::Sum)? != e {
            return None;
        }
        let Op::Unary(UnaryOp::Exp) = g.node(e).op else { return None };
        let c = g.node(e).inputs[0];
        let Op::Binary(BinaryOp::Sub) = g.node(c).op else { return None };
        let [s, mx] = g.node(c).inputs[..] else { return None };
        if red(mx, ReduceOp::Max)? != s {
            return None;
        }
        Some((s, vec![mx, c, e, sum, p]))
    }

    /// A near miss: when a softmax over the last axis is within [`NEAR_DEPTH`] inlinable nodes
    /// above `pa` (the second product's left operand) but not in a form the match takes, the ops
    /// on the way down, e.g. `mul, cast` (so a refusal names what stopped the match: session 23's
    /// autocast order of GPT-2's NaN guard went unseen for want of one).
    fn softmax_near(&self, pa: NodeId) -> Option<String> {
        let g = self.g;
        let mut frontier = vec![(pa, Vec::<NodeId>::new())];
        for _ in 0..NEAR_DEPTH {
            let mut next = Vec::new();
            for (n, path) in frontier {
                if !self.kind[n.index()].inlinable() {
                    continue;
                }
                let mut path = path;
                path.push(n);
                for &x in &g.node(n).inputs {
                    if self.softmax_of(x).is_some() {
                        let ops: Vec<&str> = path.iter().rev().map(|&p| g.node(p).op.name()).collect();
                        return Some(format!("`{}`", ops.join(", ")));
                    }
                    next.push((x, path.clone()));
                }
            }
            frontier = next;
        }
        None
    }

    /// `(x, o)` when `s` is `where(mask, x, -inf)` or `where(mask, -inf, x)` (under casts to f32)
    /// with a constant
    /// `[m, kv]` mask (leading extents 1) keeping exactly the keys `j <= i + o`, `o >= 0`.
    fn causal_bound(&self, s: NodeId, m: usize, kv: usize) -> Option<(NodeId, usize)> {
        let g = self.g;
        // A cast up to f32 above the `where` (a 16-bit softmax decomposed in f32) commutes with
        // it: the score expression casts to f32 last.
        let mut s = s;
        while let Op::Cast(DType::F32) = g.node(s).op
            && g.node(g.node(s).inputs[0]).ty.dtype.is_float()
        {
            s = g.node(s).inputs[0];
        }
        let Op::Where = g.node(s).op else { return None };
        let [c, a, b] = g.node(s).inputs[..] else { return None };
        let is_ninf = |n: NodeId| match &g.node(n).op {
            Op::Constant(t) => t.numel() >= 1 && t.to_f64_vec().iter().all(|&x| x == f64::NEG_INFINITY),
            _ => false,
        };
        let (x, keep_when) = if is_ninf(b) {
            (a, true)
        } else if is_ninf(a) {
            (b, false)
        } else {
            return None;
        };
        let Op::Constant(t) = &g.node(c).op else { return None };
        let cs = &self.shapes[c.index()];
        if cs.len() < 2 || cs[cs.len() - 2..] != [m, kv] || cs[..cs.len() - 2].iter().any(|&e| e != 1) {
            return None;
        }
        let vals = t.to_f64_vec();
        let kept = |i: usize, j: usize| (vals[i * kv + j] != 0.0) == keep_when;
        let o = (0..kv).take_while(|&j| kept(0, j)).count().checked_sub(1)?;
        let ok = (0..m).all(|i| (0..kv).all(|j| kept(i, j) == (j <= i + o)));
        ok.then_some((x, o))
    }

    /// Places the fused attention kernel ending in `pv` (matched by [`Sched::plan_attention`]).
    pub(super) fn sched_attention(&mut self, pv: NodeId) -> Result<(), Error> {
        let Some(am) = self.attn[pv.index()].clone() else {
            return Err(Error::Unsupported(format!("schedule: internal: {pv} has no attention match")));
        };
        let s = &am.shape;
        let rank = am.bdims.len() + 2;
        let space = Space::Attention {
            batch: s.batch,
            heads: s.heads,
            m: s.m,
            dv: s.dv,
            kv: s.kv,
            d: s.d,
            out: MatOut::plain(s.m, s.dv),
        };
        let bc = delinearize(&Index::var(Var::Batch), &am.bdims);
        let coords = |r: Var, c: Var| -> Vec<Index> {
            let mut v = bc.clone();
            v.push(Index::var(r));
            v.push(Index::var(c));
            v
        };
        let g = self.g;
        let ([q, kt], v) = (am.operands, g.node(pv).inputs[1]);
        let bh = s.batch * s.heads;
        let qr =
            self.attn_operand(pv, q, &coords(Var::M, Var::Red), &space, [Var::M, Var::Red], [bh, s.m, s.d], s.dtype)?;
        // k^T is read as rows of keys: element (key, c) of k is element (c, key) of the operand.
        let kr = self.attn_operand(
            pv,
            kt,
            &coords(Var::Red, Var::Key),
            &space,
            [Var::Key, Var::Red],
            [bh, s.kv, s.d],
            s.dtype,
        )?;
        let vr =
            self.attn_operand(pv, v, &coords(Var::Key, Var::N), &space, [Var::Key, Var::N], [bh, s.kv, s.dv], s.dtype)?;
        let pos = self.kernels.len();
        let mut kb = KernelBuilder::new(space);
        kb.label = Some("attention");
        for r in [&qr, &kr, &vr] {
            let (dt, n) = self.buf_info(&r.buf);
            kb.read_arg(r.buf.clone(), dt, n);
        }
        // The raw score, accumulator 1, is `qk` at (Batch, M, Key) (times the operands' factors).
        let qk_dtype = g.ty(am.qk).dtype;
        let mut raw = kb.push(Expr::Acc(1), qk_dtype);
        if am.operand_scale != 1.0 {
            let c = kb.push(Expr::Const(am.operand_scale), qk_dtype);
            raw = kb.push(Expr::Binary(BinaryOp::Mul, raw, c), qk_dtype);
        }
        let qk_index = kb.simp(&super::build::linearize(&coords(Var::M, Var::Key), &self.shapes[am.qk.index()]));
        kb.members.push(Member::root(am.qk, raw, qk_index, Phase::Score));
        self.place[am.qk.index()] = Some(pos);
        let mut score = self.emit(&mut kb, pos, am.score, &coords(Var::M, Var::Key), Phase::Score).map_err(|r| {
            Error::Unsupported(format!("schedule: internal: attention score of {pv}: {}", r.reason(self)))
        })?;
        if g.ty(am.score).dtype != DType::F32 {
            score = kb.push(Expr::Cast(score), DType::F32);
        }
        kb.computed.extend(am.inner.iter().copied());
        kb.computed.insert(pv);
        kb.attention =
            Some(AttnSpec { q: qr, k: kr, v: vr, in_dtype: s.dtype, p_dtype: am.p_dtype, score, causal: am.causal });
        let dt = g.ty(pv).dtype;
        let mut out = kb.push(Expr::Acc(0), dt);
        if am.nan_guard {
            let nan = kb.push(Expr::Unary(UnaryOp::IsNan, out), DType::Bool);
            let zero = kb.push(Expr::Const(0.0), dt);
            out = kb.push(Expr::Where(nan, zero, out), dt);
        }
        let index = kb.simp(&MatOut::plain(s.m, s.dv).flat());
        debug_assert_eq!(rank, self.shapes[pv.index()].len());
        kb.members.push(Member::root(pv, out, index, Phase::Epilogue));
        self.check(&kb).map_err(|e| Self::internal(e, self))?;
        self.kernels.push(kb);
        self.place[pv.index()] = Some(pos);
        Ok(())
    }

    /// An attention operand: `opnd` read at coordinates `c` (rows over `vars[0]`, the head dimension
    /// over `vars[1]`) as strides of one buffer, else a contiguous `[batch * heads, rows, cols]`
    /// copy.
    #[allow(clippy::too_many_arguments)]
    fn attn_operand(
        &mut self,
        pv: NodeId,
        opnd: NodeId,
        c: &[Index],
        space: &Space,
        vars: [Var; 2],
        copy_shape: [usize; 3],
        dt: DType,
    ) -> Result<AttnRef, Error> {
        let Space::Attention { batch, heads, .. } = *space else {
            return Err(Error::Unsupported("schedule: internal: attention operand outside an attention space".into()));
        };
        let pos = self.kernels.len();
        let probe = KernelBuilder::new(space.clone());
        // An f32 operand of a 16-bit kernel is a widened 16-bit value (`scaled_operand`).
        let widened = (self.g.ty(opnd).dtype != dt).then_some(dt);
        let view = match widened {
            Some(from) => self.view_index_widened(&probe, pos, opnd, c, from),
            None => self.view_index(&probe, pos, opnd, c),
        };
        if let Some((buf, ix)) = view
            && let Some(r) = attn_strides(&ix, batch, heads, vars, copy_shape[2])
        {
            return Ok(AttnRef { buf, ..r });
        }
        let copy = self.operand_copy(pv, opnd, c, [Var::Batch, vars[0], vars[1]], copy_shape, false, widened)?;
        Ok(AttnRef {
            buf: copy.buf,
            offset: 0,
            s_batch: copy.s_batch * heads,
            s_head: copy.s_batch,
            s_row: copy.s_row,
            group: 1,
        })
    }
}

/// The strides of an index `offset + (Batch / heads) * s_batch + ((Batch % heads) / group) *
/// s_head + row * s_row + col` (in the forms the simplifier leaves), if it has that form with
/// non-negative strides and a contiguous head dimension of `cols` elements.
fn attn_strides(ix: &Index, batch: usize, heads: usize, vars: [Var; 2], cols: usize) -> Option<AttnRef> {
    let h = heads as i64;
    let terms: Vec<&Index> = match ix {
        Index::Sum(ts) => ts.iter().collect(),
        other => vec![other],
    };
    // Coefficients of: Batch / heads, Batch % heads, Batch, (Batch % heads) / group, row, col.
    let (mut off, mut sb, mut h1, mut flat, mut hg, mut group, mut sr, mut sc) = (0i64, 0, 0, 0, 0, 1i64, 0, 0);
    let is_batch = |x: &Index| matches!(x, Index::Var(Var::Batch));
    let mut grouped = |k: i64, g: i64| -> Option<()> {
        if hg != 0 && group != g {
            return None;
        }
        (hg, group) = (hg + k, g);
        Some(())
    };
    for t in terms {
        let (x, k) = match t {
            Index::Const(c) => {
                off += c;
                continue;
            }
            Index::Mul(x, k) => (&**x, *k),
            other => (other, 1),
        };
        match x {
            Index::Var(Var::Batch) => flat += k,
            Index::Var(v) if *v == vars[0] => sr += k,
            Index::Var(v) if *v == vars[1] => sc += k,
            Index::Div(y, dd) if is_batch(y) && *dd == h => sb += k,
            Index::Mod(y, dd) if is_batch(y) && *dd == h => h1 += k,
            // One batch: `Batch` is the head, so `(Batch % heads) / g` simplified to `Batch / g`.
            Index::Div(y, g) if is_batch(y) && batch == 1 && h % g == 0 => grouped(k, *g)?,
            Index::Div(y, g) if matches!(&**y, Index::Mod(z, dd) if is_batch(z) && *dd == h) && h % g == 0 => {
                grouped(k, *g)?
            }
            _ => return None,
        }
    }
    // `Batch = (Batch / heads) * heads + Batch % heads`.
    sb += flat * h;
    h1 += flat;
    if h1 != 0 && hg != 0 {
        return None;
    }
    let (s_head, group) = if hg != 0 { (hg, group) } else { (h1, 1) };
    if off < 0 || sb < 0 || s_head < 0 || sr < 0 || !(sc == 1 || cols == 1) {
        return None;
    }
    Some(AttnRef {
        buf: BufRef::Input(usize::MAX),
        offset: off as usize,
        s_batch: sb as usize,
        s_head: s_head as usize,
        s_row: sr as usize,
        group: group as usize,
    })
}
