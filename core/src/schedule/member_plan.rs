//! Placing materialized nodes (stage B): into the kernel of their latest dependency as an epilogue
//! or vertical fusion, else into a sibling kernel reading the same buffers (horizontal fusion), else
//! into a new pointwise kernel (splitting off producers while it binds too many buffers).

use super::build::{KernelBuilder, Member, Phase, Space, Target, delinearize, linearize};
use super::emit::Refusal;
use super::plan::{Kind, Sched, numel};
use crate::error::Error;
use crate::ir::{NodeId, Op};
use crate::kernel::{Index, Var};

impl Sched<'_> {
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
            Space::Attention { batch, heads, m, dv, out, .. } if batch * heads * m * dv == n => {
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
                if Some(k) == dep
                    || dep.is_some_and(|d| k < d)
                    || kb.partial
                    || kb.matmul.is_some()
                    || kb.attention.is_some()
                {
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
                            // The cost model counts bindings conservatively (e.g. windows of large
                            // buffers); nothing more can be split off, so leave the exact count to the
                            // backend (a clear error there).
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

    /// Kernel `k` re-emitted over another iteration space (its stored nodes in order).
    pub(super) fn rebuild(&self, k: usize, space: &Space) -> Result<KernelBuilder, Refusal> {
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
}
