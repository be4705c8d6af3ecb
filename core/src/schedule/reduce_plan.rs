//! Placing reductions and arg-reductions (stage B): into an earlier reduce kernel over the same
//! rows (softmax's sum joins its max), absorbing a pointwise kernel over exactly the reduced
//! elements (its stores become element stores), else a new reduce kernel.

use super::build::{KernelBuilder, Member, Phase, Space, Target};
use super::emit::Refusal;
use super::plan::{Sched, acc_dtype};
use crate::dtype::DType;
use crate::error::Error;
use crate::ir::{ArgOp, NodeId, Op, ReduceOp};
use crate::kernel::{Expr, Index, RedOp, Reduction, Var};

impl Sched<'_> {
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
    pub(super) fn sched_reduction(&mut self, r: NodeId) -> Result<(), Error> {
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
}
