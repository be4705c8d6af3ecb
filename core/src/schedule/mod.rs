//! The fusion scheduler: turns a decomposed, static graph into a [`Program`] of the kernel IR.
//!
//! Designed as TorchInductor's scheduler is, with legality kept apart from profitability:
//!
//! 1. **Inlining (stage A).** Every elementwise, movement and gather node is *inlined*: computed
//!    inside each consumer's kernel as scalar expressions and index arithmetic, never a kernel of
//!    its own, unless it is *materialized* (stored to a buffer) because it is a graph output, an
//!    operand of a matmul (which reads strided buffers) or of a convolution/pooling window (which
//!    reads each element many times), or because the [`CostModel`] finds it too expensive to
//!    recompute for its several users, or wants it stored as the residual one of them adds to a
//!    matrix product (a library's `C`). Movement ops are always index rewrites: reshape, permute,
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
//!
//!    Convolutions are planned before stage A (legality in the scheduler, profitability by
//!    [`CostModel::conv_as_matmul`], the decision logged as `conv lowering: ...`): a 1x1,
//!    stride-1, unpadded, ungrouped convolution is a batched matmul on strided views of its
//!    operands (`out[b] = W[OC, C] @ x[b][C, H*W]`, no copy); any other float convolution is an
//!    *im2col* gather kernel (a pointwise kernel writing `cols[g][C/G*kh*kw, N*OH*OW]`, padding
//!    masked to 0, producers such as a pad inlined) followed by one matmul batched over the groups,
//!    `W[g] @ cols[g]`, whose output map stores NCHW directly. Either way the conv is a matmul
//!    root: its bias, batch norm, residual add and activation fuse into the matmul's stores as for
//!    any matmul; the im2col buffer is an intermediate of the memory plan. Thin products (few
//!    output channels per group, e.g. depthwise; a short reduction), huge im2col buffers and
//!    integer convolutions stay *window* kernels: one thread per output element looping over
//!    the window ([`ReduceStrategy::ThreadPerRow`]). Where [`CostModel::conv_implicit`] agrees,
//!    an im2col lowering is an *implicit GEMM* instead: the matmul's B operand is the im2col view
//!    of the input ([`crate::kernel::Im2col`]), computed in the loader, with no gather kernel and
//!    no im2col buffer (`conv lowering: implicit GEMM: ...`). f32 contractions carry the TF32
//!    setting of their kind ([`AllowTf32`], `precision: ...`).
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

mod attention;
mod bindings;
mod build;
mod channels_last;
mod consumer_order;
mod conv;
mod emit;
mod finish;
mod inline;
mod matmul_plan;
mod member_plan;
mod memory;
mod plan;
mod prologue;
mod reduce_plan;
mod split;
mod storage_order;
mod window_plan;

#[cfg(test)]
pub(crate) mod tests;

pub use memory::plan_memory;
pub use split::splittable;

use crate::dtype::DType;
use crate::error::Error;
use crate::ir::Graph as IrGraph;
use crate::kernel::{Capabilities, Program, ReduceStrategy};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::Arc;

/// Profitability decisions of the scheduler (legality is never the cost model's business).
///
/// Only [`name`](CostModel::name) is required. Every decision a model does not make itself is its
/// [`base`](CostModel::base) model's when it names one (a backend's model that differs from
/// [`DefaultCostModel`] in a few decisions states only those), else the trait's default, which
/// never takes the optimization: no materialization, [`ReduceStrategy::Looped`], no horizontal
/// fusion, no split, window convolutions, the im2col gather, attention unfused.
pub trait CostModel: fmt::Debug + Send + Sync {
    /// A short name for logs.
    fn name(&self) -> &str;

    /// The model this one defers to for every decision it does not override; `None` (the default)
    /// takes the trait's defaults instead.
    fn base(&self) -> Option<&dyn CostModel> {
        None
    }

    /// Whether an inlinable node with `users` distinct consumers, whose inline expression costs
    /// `cost` (weighted op count: transcendentals 4, divisions and roots 2, others 1) and reads
    /// `reads` distinct values computed elsewhere (buffers, reductions; scalars excluded), should
    /// be materialized instead of recomputed by each consumer. Returns the named reason when so.
    /// The default recomputes.
    fn materialize(&self, users: usize, cost: usize, reads: usize) -> Option<String> {
        self.base().and_then(|b| b.materialize(users, cost, reads))
    }

    /// Whether an inlinable node with several consumers, one of which adds it to a matrix
    /// product (`matmul [+ bias] + r`: a residual connection, r recomputed in the product's
    /// epilogue otherwise), should be materialized so that the product's epilogue reads one stored
    /// tensor: the form a GEMM library adds itself (cuBLASLt's `C`). Returns the named reason when
    /// so. The default recomputes (sinter's own templates add any expression in the epilogue).
    fn materialize_residual(&self) -> Option<String> {
        self.base().and_then(|b| b.materialize_residual())
    }

    /// How a reduce kernel of `rows` rows of `len` elements maps to the device. The default loops.
    fn reduce_strategy(&self, rows: usize, len: usize, caps: &Capabilities) -> ReduceStrategy {
        self.base().map_or(ReduceStrategy::Looped, |b| b.reduce_strategy(rows, len, caps))
    }

    /// Whether a reduce or window kernel whose operand rows of `len` elements are stored whole
    /// (consecutive along the reduction, rows apart: a global average pool, a thin 1x1
    /// convolution's weight) takes a workgroup per row rather than one thread per row, which would
    /// read rows apart across a warp. Returns the named reason when so. The default keeps one
    /// thread per row.
    fn workgroup_per_whole_row(&self, len: usize) -> Option<String> {
        self.base().and_then(|b| b.workgroup_per_whole_row(len))
    }

    /// Whether fusing two sibling kernels that share `shared_bytes` of reads is worth it. The
    /// default keeps them apart.
    fn fuse_horizontal(&self, shared_bytes: usize) -> bool {
        self.base().is_some_and(|b| b.fuse_horizontal(shared_bytes))
    }

    /// Into how many chunks to split each row of a reduce kernel of `rows` rows of `len` that has
    /// too few rows to fill the device (a partial kernel over `rows * factor` rows, then a combine
    /// kernel). `1` (the default) never splits; the scheduler rounds the factor down to a divisor
    /// of `len` and skips the split when only a much smaller one exists.
    fn reduce_split(&self, rows: usize, len: usize, caps: &Capabilities) -> usize {
        self.base().map_or(1, |b| b.reduce_split(rows, len, caps))
    }

    /// How many of a kernel's [`Capabilities::max_bindings`] one argument of `numel` elements of
    /// `dtype` uses. The default, `1`, suits backends that bind any buffer whole; a backend that
    /// binds a buffer larger than [`Capabilities::max_binding_bytes`] as several windows (WGSL's
    /// split bindings) counts each window, so the scheduler splits kernels before the backend
    /// runs out of bindings. Results below 1 count as 1.
    fn bindings(&self, caps: &Capabilities, dtype: DType, numel: usize) -> usize {
        self.base().map_or(1, |b| b.bindings(caps, dtype, numel))
    }

    /// Whether a 2-D convolution that the scheduler *can* lower to a matmul (see [`ConvShape`])
    /// should be: `Ok(reason)` runs it on the matmul kernel (directly on strided operands, or
    /// after an im2col gather), `Err(reason)` keeps the window kernel (one thread per output
    /// element looping over the window). The default keeps every window.
    fn conv_as_matmul(&self, conv: &ConvShape, caps: &Capabilities) -> Result<String, String> {
        match self.base() {
            Some(b) => b.conv_as_matmul(conv, caps),
            None => Err("window: the cost model does not lower convolutions".into()),
        }
    }

    /// Whether a convolution lowered through im2col (`conv_as_matmul` agreed and it is not a
    /// 1x1 direct product) should instead read the im2col matrix in the matmul's loader (implicit
    /// GEMM: no im2col buffer, no gather kernel; the kernel IR's
    /// [`MatOperand::im2col`](crate::kernel::MatOperand::im2col)). Asked only where that is legal
    /// (float, within the 32-bit extents). `Ok(reason)` takes it; `Err(reason)` keeps the gather,
    /// the reason recorded. The default keeps the gather: a backend opts in once its renderer
    /// draws im2col operands fast.
    fn conv_implicit(&self, conv: &ConvShape, caps: &Capabilities) -> Result<String, String> {
        match self.base() {
            Some(b) => b.conv_implicit(conv, caps),
            None => Err("implicit GEMM: this backend's cost model keeps the im2col gather".into()),
        }
    }

    /// Whether the input of an implicit-GEMM convolution (`conv_implicit` agreed), where it is a
    /// node the scheduler materializes, is stored channels-last (`NHWC`: its buffer holds
    /// `[N, H, W, C]`; every kernel reads and writes it through that layout; graph inputs and
    /// outputs keep theirs). `Ok(reason)` takes it. The default keeps `NCHW`: a backend opts in
    /// where its convolutions run faster on channels-last operands (a library's kernels).
    fn conv_channels_last(&self, conv: &ConvShape, caps: &Capabilities) -> Result<String, String> {
        match self.base() {
            Some(b) => b.conv_channels_last(conv, caps),
            None => Err("layout: NCHW (this backend's cost model keeps the captured layout)".into()),
        }
    }

    /// Whether a matched attention chain (`matmul -> score ops -> softmax -> matmul`, legal to
    /// fuse: see [`AttentionShape`]) becomes one fused attention kernel (`Ok(reason)`) or stays
    /// three kernels with the scores in memory (`Err(reason)`). The default keeps them apart: a
    /// backend opts in once its renderer draws attention bodies.
    fn fuse_attention(&self, attn: &AttentionShape, caps: &Capabilities) -> Result<String, String> {
        match self.base() {
            Some(b) => b.fuse_attention(attn, caps),
            None => Err("attention: this backend's cost model does not fuse attention".into()),
        }
    }
}

/// A legal attention fusion as the cost model sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct AttentionShape {
    /// Outer batch.
    pub batch: usize,
    /// Query heads per batch.
    pub heads: usize,
    /// Queries per head.
    pub m: usize,
    /// Keys per head.
    pub kv: usize,
    /// Query/key head dimension.
    pub d: usize,
    /// Value head dimension.
    pub dv: usize,
    /// Dtype of q, k and v.
    pub dtype: DType,
    /// A causal bound was recognised (the kernel may skip masked key blocks).
    pub causal: bool,
}

/// A 2-D convolution (NCHW, static shapes) as the cost model sees it when it is legal to lower it
/// to a matmul: per group, `W[g]` (`m = out_channels / groups` rows, `k = in_channels / groups *
/// kh * kw` columns) times the im2col matrix (`k` rows, `n = batch * out_h * out_w` columns).
#[derive(Clone, Debug, PartialEq)]
pub struct ConvShape {
    /// Images.
    pub batch: usize,
    /// Input channels (all groups).
    pub in_channels: usize,
    /// Output channels (all groups).
    pub out_channels: usize,
    /// Channel groups.
    pub groups: usize,
    /// Window extent (kh, kw).
    pub kernel: [usize; 2],
    /// Output extent (oh, ow).
    pub out_hw: [usize; 2],
    /// Bytes of the im2col buffer the lowering needs; 0 for a 1x1, stride-1, unpadded, ungrouped
    /// convolution, which is a plain matmul on strided views of its operands (no copy).
    pub im2col_bytes: usize,
    /// The convolution's dtype (operands and output).
    pub dtype: DType,
    /// Its products may run in TF32 ([`AllowTf32::conv`] and an f32 convolution).
    pub tf32: bool,
}

impl ConvShape {
    /// Output rows of each group's matmul (output channels per group).
    pub fn m(&self) -> usize {
        self.out_channels / self.groups.max(1)
    }

    /// Reduction extent of each group's matmul (input channels per group times the window).
    pub fn k(&self) -> usize {
        self.in_channels / self.groups.max(1) * self.kernel[0] * self.kernel[1]
    }

    /// Floating-point operations: `2 m n k` per group, `n = batch * out_h * out_w`.
    pub fn flops(&self) -> f64 {
        let n = self.batch * self.out_hw[0] * self.out_hw[1];
        2.0 * (self.groups.max(1) * self.m()) as f64 * n as f64 * self.k() as f64
    }
}

/// The default cost model, with Inductor-like thresholds.
#[derive(Clone, Debug, PartialEq)]
pub struct DefaultCostModel {
    /// Materialize a node with several users when its inline cost reaches this.
    pub expensive_cost: usize,
    /// Materialize a node with more users than this when it costs at least `4`.
    pub many_users: usize,
    /// Materialize a node with several users whose expression reads more values than this
    /// (Inductor's `realize_reads_threshold`): a residual stream `h + a1 + m1 + a2 + ...` would
    /// otherwise be recomputed from every earlier branch by each layer's norm, its reads growing
    /// with depth (GPT-2 small at 8 x 128 on an H100: its 21 norm kernels took 22 us each, a
    /// synthetic pre-norm stack's norm kernels took 6, 7, ... 11 arguments; BENCHMARKS.md,
    /// session 9).
    pub many_reads: usize,
    /// Persistent reductions hold up to `max_workgroup_size * per_thread` elements per row.
    pub persistent_per_thread: usize,
    /// Rows at most this long use one thread per row when there are many rows.
    pub thread_per_row_len: usize,
    /// "Many rows" for [`ReduceStrategy::ThreadPerRow`].
    pub thread_per_row_rows: usize,
    /// Rows stored whole at least this long take a workgroup per row
    /// ([`CostModel::workgroup_per_whole_row`]). Measured (H200, session 11): EfficientNet-B0's
    /// squeeze pools over 7x7 (rows of 49) 17.3 -> 10.0 us on a workgroup per row, its thin
    /// reduce convolutions (rows of 240-1152 taps) 7-12 -> ~5 us, but its thin expand
    /// convolutions (rows of 10-20 taps) 4.3 -> 5.0-5.7 us, hence 32.
    pub whole_row_min_len: usize,
    /// Workgroups a reduce kernel should launch to fill the device when [`Capabilities::compute_units`]
    /// is unknown (else 4 per compute unit); kernels with fewer rows than half of it are split.
    pub split_target_groups: usize,
    /// Smallest chunk of a row a split reduction gives one workgroup.
    pub split_min_chunk: usize,
    /// Convolutions with fewer output channels per group than this stay window kernels (the
    /// matmul's `m` would fill too little of a tile: depthwise and most grouped convolutions).
    pub conv_min_channels: usize,
    /// Convolutions whose per-group reduction (`C/groups * kh * kw`) is shorter than this stay
    /// window kernels (too little work per output for a tiled product to pay off).
    pub conv_min_reduction: usize,
    /// The largest im2col buffer a convolution may use; larger ones stay window kernels.
    pub im2col_max_bytes: usize,
    /// Fuse attention chains into one kernel (default; `SINTER_FUSE_ATTENTION=0` when the model is
    /// made turns it off, as `torch.backends.cuda.enable_flash_sdp(False)` does: for comparisons
    /// and as a way out).
    pub fuse_attention: bool,
}

impl Default for DefaultCostModel {
    fn default() -> DefaultCostModel {
        DefaultCostModel {
            expensive_cost: 24,
            many_users: 8,
            many_reads: 4,
            persistent_per_thread: 4,
            thread_per_row_len: 64,
            thread_per_row_rows: 4096,
            whole_row_min_len: 32,
            split_target_groups: 512,
            split_min_chunk: 4096,
            conv_min_channels: 16,
            conv_min_reduction: 16,
            im2col_max_bytes: 1 << 30,
            fuse_attention: !std::env::var("SINTER_FUSE_ATTENTION").is_ok_and(|v| v == "0"),
        }
    }
}

impl CostModel for DefaultCostModel {
    fn name(&self) -> &str {
        "default"
    }

    fn materialize(&self, users: usize, cost: usize, reads: usize) -> Option<String> {
        if users >= 2 && cost >= self.expensive_cost {
            Some(format!("materialized: {users} users and expensive (cost {cost})"))
        } else if users >= 2 && reads > self.many_reads {
            Some(format!("materialized: {users} users, and recomputing it reads {reads} values"))
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

    fn workgroup_per_whole_row(&self, len: usize) -> Option<String> {
        (len >= self.whole_row_min_len)
            .then(|| format!("rows of {len} stored whole (at least {} elements)", self.whole_row_min_len))
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

    /// Lowers a convolution to a matmul unless its per-group product is too thin (`m` below
    /// `conv_min_channels`, `k` below `conv_min_reduction`: the window kernel wastes less) or its
    /// im2col buffer exceeds `im2col_max_bytes`. Decided on channels and window only (plus the
    /// memory cap), so one model gets the same kernels at every batch and image size.
    fn conv_as_matmul(&self, conv: &ConvShape, caps: &Capabilities) -> Result<String, String> {
        let _ = caps;
        let (m, k) = (conv.m(), conv.k());
        let n = conv.batch * conv.out_hw[0] * conv.out_hw[1];
        if m < self.conv_min_channels {
            return Err(format!(
                "window: {m} output channel(s) per group < {} (too thin for a matmul tile)",
                self.conv_min_channels
            ));
        }
        if k < self.conv_min_reduction {
            return Err(format!(
                "window: reduction of {k} per output < {} (too short for a matmul)",
                self.conv_min_reduction
            ));
        }
        if conv.im2col_bytes > self.im2col_max_bytes {
            return Err(format!(
                "window: im2col buffer of {} bytes > {} bytes",
                conv.im2col_bytes, self.im2col_max_bytes
            ));
        }
        let groups = if conv.groups > 1 { format!("{} groups of ", conv.groups) } else { String::new() };
        Ok(if conv.im2col_bytes == 0 {
            format!("matmul: {groups}{m}x{n}x{k} on strided views (1x1 conv, no copy)")
        } else {
            format!("matmul: {groups}{m}x{n}x{k} after an im2col gather ({} bytes)", conv.im2col_bytes)
        })
    }

    /// Fuses every legal attention chain: the scores (`m x kv` per head) never reach memory, which
    /// the unfused kernels write once and read twice; unless [`DefaultCostModel::fuse_attention`]
    /// is off.
    fn fuse_attention(&self, attn: &AttentionShape, caps: &Capabilities) -> Result<String, String> {
        let _ = caps;
        if !self.fuse_attention {
            return Err(
                "attention: fusion turned off (the cost model's fuse_attention; SINTER_FUSE_ATTENTION=0)".into()
            );
        }
        let saved = attn.batch * attn.heads * attn.m * attn.kv * 4;
        Ok(format!(
            "fused: attention over {}x{} heads, {}x{} scores never stored ({saved} bytes){}",
            attn.batch,
            attn.heads,
            attn.m,
            attn.kv,
            if attn.causal { ", causal" } else { "" }
        ))
    }
}

/// Where f32 contractions may run in TF32 (operands rounded to a 10-bit mantissa, f32
/// accumulation), as PyTorch's `torch.backends.cuda.matmul.allow_tf32` (default off) and
/// `torch.backends.cudnn.allow_tf32` (default on, convolutions) decide. The scheduler sets
/// [`MatmulBody::tf32`](crate::kernel::MatmulBody::tf32) on each f32 matmul kernel from the field
/// of its origin (a convolution lowered to a matmul counts as a convolution) and records it
/// (`precision: ...`); a backend may use it, never must.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct AllowTf32 {
    /// Matrix products (`MatMul`, linear layers, attention's products when unfused).
    pub matmul: bool,
    /// Convolutions.
    pub conv: bool,
}

impl AllowTf32 {
    /// Exact f32 everywhere.
    pub const OFF: AllowTf32 = AllowTf32 { matmul: false, conv: false };
    /// TF32 for every f32 contraction.
    pub const ON: AllowTf32 = AllowTf32 { matmul: true, conv: true };
    /// PyTorch's defaults: convolutions only.
    pub const CONV: AllowTf32 = AllowTf32 { matmul: false, conv: true };
}

impl Default for AllowTf32 {
    /// PyTorch's defaults ([`AllowTf32::CONV`]).
    fn default() -> AllowTf32 {
        AllowTf32::CONV
    }
}

impl fmt::Display for AllowTf32 {
    /// `off`, `on`, `conv` or `matmul` (the CLI's `--tf32` values).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match (self.matmul, self.conv) {
            (false, false) => "off",
            (true, true) => "on",
            (false, true) => "conv",
            (true, false) => "matmul",
        })
    }
}

impl std::str::FromStr for AllowTf32 {
    type Err = String;

    /// Parses `off`, `on`, `conv` or `matmul`.
    fn from_str(s: &str) -> Result<AllowTf32, String> {
        match s {
            "off" => Ok(AllowTf32::OFF),
            "on" => Ok(AllowTf32::ON),
            "conv" => Ok(AllowTf32::CONV),
            "matmul" => Ok(AllowTf32 { matmul: true, conv: false }),
            other => Err(format!("TF32 setting {other:?}: expected on, off, conv or matmul")),
        }
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
    /// Where f32 contractions may run in TF32 (default: PyTorch's, convolutions only).
    pub tf32: AllowTf32,
    /// Keep the batch (the outermost dimension of the graph's inputs) outermost in every buffer
    /// a layout choice creates, so the program can serve smaller batches
    /// ([`crate::kernel::dynamic`]): an ungrouped im2col convolution then writes
    /// `cols[N][C * kh * kw][OH * OW]` and multiplies per image (as a 1x1 convolution does)
    /// instead of one product over `N * OH * OW` columns. Set by the compile driver for dynamic
    /// compiles; off by default.
    pub outer_batch: bool,
}

impl Default for ScheduleOptions {
    fn default() -> ScheduleOptions {
        ScheduleOptions {
            fusion: true,
            max_group_nodes: 64,
            cost_model: Arc::new(DefaultCostModel::default()),
            tf32: AllowTf32::default(),
            outer_batch: false,
        }
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
            .field("tf32", &self.tf32)
            .field("outer_batch", &self.outer_batch)
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
    s.plan_consumer_order();
    s.stage_b()?;
    finish::finish(s)
}
