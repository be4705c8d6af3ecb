//! The fusion scheduler: turns a decomposed, static graph into a [`Program`] of the kernel IR.
//!
//! Designed as TorchInductor's scheduler is, with legality kept apart from profitability:
//!
//! 1. **Inlining (stage A).** Every elementwise, movement and gather node is *inlined*: computed
//!    inside each consumer's kernel as scalar expressions and index arithmetic, never a kernel of
//!    its own, unless it is *materialized* (stored to a buffer) because it is a graph output, an
//!    operand of a matmul (which reads strided buffers) or of a convolution/pooling window (which
//!    reads each element many times), or because the [`CostModel`] finds it too expensive to
//!    recompute for its several users. Movement ops are always index rewrites: reshape, permute,
//!    expand and slice compose into the load index; concat and pad select between clamped reads
//!    with [`IndexCmp`](crate::kernel::IndexCmp) and `Where`; gathers index with a loaded value.
//! 2. **Fusion (stage B).** Materialized nodes and *roots* (reductions, arg-reductions, matmuls,
//!    convolutions, poolings) are placed into kernels in topological order:
//!    * a reduction joins an earlier reduce kernel over the same rows (softmax's sum joins its
//!      max; its value reads the max through [`Expr::Acc`](crate::kernel::Expr::Acc));
//!    * a materialized node joins the kernel of its latest dependency as an epilogue: element
//!      stores or row stores of a reduce kernel, the stores of a matmul or window kernel, or more
//!      stores of a pointwise kernel (vertical fusion);
//!    * otherwise it joins a sibling kernel that reads the same buffers over the same element
//!      count (horizontal fusion), or gets a new pointwise kernel.
//!
//!    A join is *legal* when the node can be emitted into the candidate kernel: every root of that
//!    kernel is read at the current iteration point (a reduction result broadcast into another
//!    row space is refused), nothing comes from a later kernel, the kernel stays within
//!    `caps.max_bindings` and `max_group_nodes`. A kernel that alone would bind too many buffers
//!    is split: the producer removing the most reads is materialized first (a wide concat is
//!    written box by box by several kernels).
//! 3. **Assembly.** Buffers, arguments and stores; stable names `k{i}_{ops}` from the origins'
//!    op names; model FLOPs and bytes; reduce strategies from the cost model; the memory plan
//!    ([`plan_memory`]); and every decision with its named reason in [`Program::decisions`].
//!
//! With `fusion: false` (eager) every compute op gets its own kernel; movement ops stay index
//! arithmetic inside their consumer's kernel and materialize only where they must: as graph
//! outputs, or as matmul operands that no strides can express (a contiguous copy is made).
//!
//! `max_group_nodes` counts the nodes a kernel *stores or reduces* (its materialized members and
//! roots), as Inductor's `max_fusion_size` counts scheduler nodes; inlined producers do not count,
//! so a 64-step elementwise chain is one kernel.
//!
//! ```
//! use sinter_core::prelude::*;
//! use sinter_core::kernel::Capabilities;
//! use sinter_core::schedule::{schedule, ScheduleOptions};
//! let g = Graph::new();
//! let x = g.input("x", DType::F32, [4, 8]);
//! g.output(&x.softmax(-1));
//! let ir = sinter_core::passes::optimize(&g.build().unwrap()).unwrap();
//! let p = schedule(&ir, &Capabilities::host(), &ScheduleOptions::default()).unwrap();
//! assert_eq!(p.kernels.len(), 1);
//! ```

mod build;
mod emit;
mod finish;
mod memory;
mod plan;
mod split;

#[cfg(test)]
mod tests;

pub use memory::plan_memory;

use crate::error::Error;
use crate::ir::Graph as IrGraph;
use crate::kernel::{Capabilities, Program, ReduceStrategy};
use std::fmt;
use std::sync::Arc;

/// Profitability decisions of the scheduler (legality is never the cost model's business).
pub trait CostModel: fmt::Debug + Send + Sync {
    /// A short name for logs.
    fn name(&self) -> &str;

    /// Whether an inlinable node with `users` distinct consumers, whose inline expression costs
    /// `cost` (weighted op count: transcendentals 4, divisions and roots 2, others 1), should be
    /// materialized instead of recomputed by each consumer. Returns the named reason when so.
    fn materialize(&self, users: usize, cost: usize) -> Option<String>;

    /// How a reduce kernel of `rows` rows of `len` elements maps to the device.
    fn reduce_strategy(&self, rows: usize, len: usize, caps: &Capabilities) -> ReduceStrategy;

    /// Whether fusing two sibling kernels that share `shared_bytes` of reads is worth it.
    fn fuse_horizontal(&self, shared_bytes: usize) -> bool;

    /// Into how many chunks to split each row of a reduce kernel of `rows` rows of `len` that has
    /// too few rows to fill the device (a partial kernel over `rows * factor` rows, then a combine
    /// kernel). `1` (the default) never splits; the scheduler rounds the factor down to a divisor
    /// of `len` and skips the split when only a much smaller one exists.
    fn reduce_split(&self, rows: usize, len: usize, caps: &Capabilities) -> usize {
        let _ = (rows, len, caps);
        1
    }
}

/// The default cost model, with Inductor-like thresholds.
#[derive(Clone, Debug, PartialEq)]
pub struct DefaultCostModel {
    /// Materialize a node with several users when its inline cost reaches this.
    pub expensive_cost: usize,
    /// Materialize a node with more users than this when it costs at least `4`.
    pub many_users: usize,
    /// Persistent reductions hold up to `max_workgroup_size * per_thread` elements per row.
    pub persistent_per_thread: usize,
    /// Rows at most this long use one thread per row when there are many rows.
    pub thread_per_row_len: usize,
    /// "Many rows" for [`ReduceStrategy::ThreadPerRow`].
    pub thread_per_row_rows: usize,
    /// Workgroups a reduce kernel should launch to fill the device when [`Capabilities::compute_units`]
    /// is unknown (else 4 per compute unit); kernels with fewer rows than half of it are split.
    pub split_target_groups: usize,
    /// Smallest chunk of a row a split reduction gives one workgroup.
    pub split_min_chunk: usize,
}

impl Default for DefaultCostModel {
    fn default() -> DefaultCostModel {
        DefaultCostModel {
            expensive_cost: 24,
            many_users: 8,
            persistent_per_thread: 4,
            thread_per_row_len: 64,
            thread_per_row_rows: 4096,
            split_target_groups: 512,
            split_min_chunk: 4096,
        }
    }
}

impl CostModel for DefaultCostModel {
    fn name(&self) -> &str {
        "default"
    }

    fn materialize(&self, users: usize, cost: usize) -> Option<String> {
        if users >= 2 && cost >= self.expensive_cost {
            Some(format!("materialized: {users} users and expensive (cost {cost})"))
        } else if users > self.many_users && cost >= 4 {
            Some(format!("materialized: {users} users (cost {cost})"))
        } else {
            None
        }
    }

    fn reduce_strategy(&self, rows: usize, len: usize, caps: &Capabilities) -> ReduceStrategy {
        if len <= self.thread_per_row_len && rows >= self.thread_per_row_rows {
            ReduceStrategy::ThreadPerRow
        } else if len <= caps.max_workgroup_size as usize * self.persistent_per_thread {
            ReduceStrategy::Persistent
        } else {
            ReduceStrategy::Looped
        }
    }

    fn fuse_horizontal(&self, shared_bytes: usize) -> bool {
        shared_bytes > 0
    }

    fn reduce_split(&self, rows: usize, len: usize, caps: &Capabilities) -> usize {
        let target = if caps.compute_units > 0 { 4 * caps.compute_units as usize } else { self.split_target_groups };
        if rows.saturating_mul(2) >= target {
            return 1;
        }
        target.div_ceil(rows.max(1)).min(len / self.split_min_chunk.max(1)).max(1)
    }
}

/// Options of [`schedule`].
#[derive(Clone)]
pub struct ScheduleOptions {
    /// Fuse (default). `false` is eager: one kernel per compute op.
    pub fusion: bool,
    /// The most nodes one kernel may store or reduce (default 64).
    pub max_group_nodes: usize,
    /// Profitability decisions.
    pub cost_model: Arc<dyn CostModel>,
}

impl Default for ScheduleOptions {
    fn default() -> ScheduleOptions {
        ScheduleOptions { fusion: true, max_group_nodes: 64, cost_model: Arc::new(DefaultCostModel::default()) }
    }
}

impl ScheduleOptions {
    /// Eager: one kernel per compute op.
    pub fn eager() -> ScheduleOptions {
        ScheduleOptions { fusion: false, ..ScheduleOptions::default() }
    }
}

impl fmt::Debug for ScheduleOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScheduleOptions")
            .field("fusion", &self.fusion)
            .field("max_group_nodes", &self.max_group_nodes)
            .field("cost_model", &self.cost_model.name())
            .finish()
    }
}

/// Schedules a decomposed (primitives only), static-shaped graph for a backend with `caps`.
///
/// Fails with [`Error::Unsupported`] on composite ops, symbolic dimensions, dtypes the backend
/// lacks, fewer than 4 bindings per kernel, matmuls with an empty inner dimension, gathers from an
/// empty axis and non-constant padding of an empty extent; with [`Error::Verify`] on a malformed
/// graph.
pub fn schedule(g: &IrGraph, caps: &Capabilities, opts: &ScheduleOptions) -> Result<Program, Error> {
    let mut s = plan::Sched::new(g, caps, opts)?;
    s.stage_a();
    s.stage_b()?;
    finish::finish(s)
}
