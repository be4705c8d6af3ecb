//! Binding limits: how many of `caps.max_bindings` a kernel binds (each argument counts as many
//! bindings as the [`CostModel::bindings`](super::CostModel::bindings) says: several where a backend
//! binds a large buffer as several windows), and what the scheduler does when a kernel would bind
//! too many: materialize the producer that removes the most reads, or write a wide concat box by box
//! with several kernels.

use super::build::{BufRef, KernelBuilder, Member, Phase, Space, Target, delinearize, linearize};
use super::emit::Refusal;
use super::plan::{Sched, numel};
use crate::dtype::DType;
use crate::error::Error;
use crate::ir::{NodeId, Op};
use crate::kernel::{Index, Var};
use std::collections::{BTreeSet, HashMap};

impl Sched<'_> {
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
    /// Each buffer counts [`Sched::arg_bindings`] bindings (the cost model's count: a backend that
    /// binds a large buffer as several windows counts each window).
    pub(super) fn bindings(&self, kb: &KernelBuilder) -> usize {
        let members: BTreeSet<NodeId> = kb.member_nodes().collect();
        let mut memo = HashMap::new();
        let mut writes = 0;
        for m in &kb.members {
            match m.target {
                Target::Operand(i) => {
                    let (dt, numel) = self.buf_info(&BufRef::Operand(i));
                    writes += self.arg_bindings(dt, numel);
                }
                Target::Node(n) => {
                    let outs = self.outputs_of[n.index()].len();
                    let each = self.arg_bindings(self.g.ty(n).dtype, numel(&self.shapes[n.index()]));
                    // A kernel placed earlier may already read `n` from a buffer (it inlined a user
                    // of `n` that was materialized only later): then `n` needs its write here too.
                    let read_elsewhere =
                        || self.kernels.iter().any(|k| k.reads.iter().any(|a| a.buf == BufRef::Node(n)));
                    let needs = !self.covered(n, &members, &mut memo) || read_elsewhere();
                    writes += each * if outs > 0 { outs } else { usize::from(needs) };
                }
            }
        }
        kb.reads.iter().map(|a| self.arg_bindings(a.dtype, a.numel)).sum::<usize>() + writes
    }

    /// How many of the kernel's bindings an argument of `numel` elements of `dt` takes:
    /// [`CostModel::bindings`](super::CostModel::bindings) (at least 1), or 1 while
    /// `one_binding_per_buffer` is set.
    fn arg_bindings(&self, dt: DType, numel: usize) -> usize {
        if self.one_binding_per_buffer.get() {
            return 1;
        }
        self.opts.cost_model.bindings(self.caps, dt, numel).max(1)
    }

    pub(super) fn check(&self, kb: &KernelBuilder) -> Result<(), Refusal> {
        let would = self.bindings(kb);
        let limit = self.caps.max_bindings as usize;
        if would > limit { Err(Refusal::Bindings { would, limit }) } else { Ok(()) }
    }

    /// Materializes the producer in `root`'s inline tree that removes the most reads, so the
    /// kernel of `root` fits the binding limit. False when nothing can be split off.
    pub(super) fn split(&mut self, root: NodeId, would: usize, limit: usize) -> Result<bool, Error> {
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
    pub(super) fn box_split(&mut self, p: NodeId, would: usize, limit: usize) -> Result<(), Error> {
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
}
