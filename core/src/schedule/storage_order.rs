//! Storage-order walks (`finish` asks [`storage_order`] for every kernel): a pointwise, window or
//! reduce kernel whose stores all go to one node kept in another order than its logical
//! one ([`Sched::layout`]) can let its lane (row) variable be the storage position instead of the
//! logical element, computing the logical element from it. Every index of its expressions is
//! substituted; the stores become `var` itself.
//!
//! Contract: a bijective reindexing of the kernel's elements, so the program computes the same
//! values (the interpreter checks it in the scheduler's tests); taken only where the kernel also
//! reads a node laid out alike, so that neither its loads nor its stores lose coalescing.

use super::build::{BufRef, KernelBuilder, ReadArg, Space, Target, delinearize, linearize};
use super::plan::Sched;
use crate::ir::NodeId;
use crate::kernel::{BufferId, Expr, Index, TypedExpr, Var};
use std::collections::HashMap;

/// A kernel that walks its elements in the order they are stored ([`storage_order`]): lane (or
/// row) `var` stores element `var` of its nodes' buffers and computes the logical element
/// `logical` (a function of `var`).
pub(super) struct StorageOrder {
    var: Var,
    logical: Index,
    /// The decision's reason (`layout: ...`).
    pub(super) reason: String,
}

impl StorageOrder {
    /// `kb`'s expressions with `var` replaced by the logical element it computes.
    pub(super) fn apply(&self, kb: &KernelBuilder) -> Vec<TypedExpr> {
        let sub = |i: &Index| kb.simp(&i.substitute(self.var, &self.logical));
        kb.exprs
            .iter()
            .map(|te| {
                let expr = match &te.expr {
                    Expr::Load { arg, index } => Expr::Load { arg: *arg, index: sub(index) },
                    Expr::IndexValue(i) => Expr::IndexValue(sub(i)),
                    Expr::IndexCmp(c, a, b) => Expr::IndexCmp(*c, sub(a), sub(b)),
                    e => e.clone(),
                };
                TypedExpr { expr, dtype: te.dtype }
            })
            .collect()
    }
}

/// Whether kernel `kb` walks its elements in storage order: a pointwise, window or reduce kernel
/// whose every store is of a node kept in the same other order ([`Sched::layout`], never a graph
/// output) at element `Lane` (`Row`), and which reads a node kept in that order. Any reduction
/// strategy: the walk is a bijection of the rows. Consecutive threads (or workgroups) then write
/// consecutive elements, and read consecutive elements of operands laid out alike: a max pool
/// between two channels-last convolutions reads and writes across channels otherwise (measured
/// on an H200: ResNet-18's pool writing `NHWC` in logical order took 104 us instead of 43).
pub(super) fn storage_order(
    s: &Sched,
    kb: &KernelBuilder,
    out_bufs: &HashMap<NodeId, Vec<BufferId>>,
) -> Option<StorageOrder> {
    let (var, count) = match kb.space {
        Space::Pointwise { numel } => (Var::Lane, numel),
        Space::Window { rows, .. } | Space::Reduce { rows, .. } => (Var::Row, rows),
        _ => return None,
    };
    let mut order: Option<(&Vec<usize>, &Vec<usize>, NodeId)> = None;
    for m in &kb.members {
        let Target::Node(n) = m.target else { return None };
        let p = s.layout[n.index()].as_ref()?;
        let shape = &s.shapes[n.index()];
        if out_bufs.contains_key(&n) || m.index != Index::var(var) || shape.iter().product::<usize>() != count {
            return None;
        }
        match order {
            Some((q, sh, _)) if q != p || sh != shape => return None,
            _ => order = Some((p, shape, n)),
        }
    }
    let (p, shape, n) = order?;
    // Storage axis j holds logical axis p[j].
    let stored: Vec<usize> = p.iter().map(|&i| shape[i]).collect();
    let sc = delinearize(&Index::var(var), &stored);
    let mut c = vec![Index::Const(0); shape.len()];
    for (j, &i) in p.iter().enumerate() {
        c[i] = sc[j].clone();
    }
    let logical = kb.simp(&linearize(&c, shape));
    // Only where the kernel reads a node laid out alike, or reads at least as many operands
    // contiguously walking the stores' order as walking its logical one: otherwise walking the
    // stores' order would trade coalesced reads for coalesced writes (a pointwise kernel writing a
    // node for a window's transposed read, `Sched::window_input_layout`, keeps its logical order).
    let alike = |a: &ReadArg| matches!(a.buf, BufRef::Node(r) if s.layout[r.index()].as_ref() == Some(p));
    if !kb.reads.iter().any(alike) {
        let stored_walk = contiguous_loads(kb, var, count, |i| kb.simp(&i.substitute(var, &logical)));
        let logical_walk = contiguous_loads(kb, var, count, |i| i.clone());
        if stored_walk == 0 || stored_walk < logical_walk {
            return None;
        }
    }
    let reason = format!(
        "layout: the kernel walks {n} in its storage order (permutation {p:?}): consecutive threads store \
         consecutive elements"
    );
    Some(StorageOrder { var, logical, reason })
}

/// How many of `kb`'s loads read consecutive elements at consecutive values of `var` (of `count`)
/// once their indices go through `walk`: sampled at eight points along `var` (the kernel's other
/// variables and loaded values 0), a load counts where at least six samples step by one. Loads
/// that do not move with `var` (broadcasts) count for neither walk.
fn contiguous_loads(kb: &KernelBuilder, var: Var, count: usize, walk: impl Fn(&Index) -> Index) -> usize {
    if count < 2 {
        return 0;
    }
    let last = count as i64 - 2;
    let samples: Vec<i64> = (0..8i64).map(|k| (k * last / 7 + 13 * k).min(last)).collect();
    kb.exprs
        .iter()
        .filter(|te| {
            let Expr::Load { index, .. } = &te.expr else { return false };
            if !index.uses(var) {
                return false;
            }
            let i = walk(index);
            let at = |v: i64| i.eval(&|x| if x == var { v } else { 0 }, &|_| 0);
            samples.iter().filter(|&&v| at(v + 1) - at(v) == 1).count() >= 6
        })
        .count()
}
