//! The kernel IR: what the scheduler produces and every backend renders.
//!
//! A [`Program`] is a list of [`Kernel`]s in launch order over a set of [`BufferDecl`]s. A kernel
//! binds some buffers ([`KernelArg`]) and has one of three bodies:
//!
//! * [`KernelBody::Pointwise`]: one lane per element of a flat iteration space `0..numel`
//!   (variable [`Var::Lane`]); a DAG of scalar [`Expr`]s loads from arguments at symbolic
//!   [`Index`] expressions and [`Store`]s results. Broadcasts, permutes, reshapes, slices, pads
//!   and concats are index arithmetic here, never kernels of their own.
//! * [`KernelBody::Reduce`]: `rows` independent rows ([`Var::Row`]), each reducing `len` elements
//!   ([`Var::Red`]) through one or more sequential [`Reduction`]s (a later one may use an earlier
//!   one's result through [`Expr::Acc`], as softmax's sum uses its max), followed by per-element
//!   stores (the epilogue, e.g. softmax's division) and per-row stores (e.g. a plain sum).
//! * [`KernelBody::Matmul`]: a batched `m x n x k` product of two strided operands with an
//!   elementwise epilogue over the accumulator ([`Expr::Acc`] with slot 0) and [`Var::Batch`],
//!   [`Var::M`], [`Var::N`] (bias, activation, residual, scale, cast).
//! * [`KernelBody::Attention`]: fused scaled-dot-product attention, `softmax(score(q k^T)) v`
//!   per batch (heads folded in), the scores never in memory: a score expression of the raw dot
//!   product ([`Expr::Acc`] slot 1) at [`Var::Batch`], [`Var::M`] (query) and [`Var::Key`]
//!   (scale, additive or boolean masks), an optional causal bound, and an epilogue over the output
//!   element ([`Expr::Acc`] slot 0) at `Batch`, `M`, `N` as a matmul's. See [`AttentionBody`].
//!
//! Index expressions are simplified symbolically ([`Index::simplify`]) with the known ranges of
//! the loop variables, so a broadcast reads `i % 4096` rather than a chain of divisions.
//! Renderers are pure functions of this data; the [`interp`] module executes it on the host, so
//! the scheduler is tested without a GPU.
//!
//! # Invariants (checked by [`interp::validate`])
//!
//! * Every [`Expr::Load`] and [`Store`] index is provably in range: [`Index::range`] over the
//!   ranges of the kernel's loop variables lies inside `0..numel` of the argument. Renderers need
//!   no bounds checks.
//! * Every operand of an [`Index::Div`], [`Index::Mod`] and [`Expr::IndexCmp`], and every
//!   [`Index::Clamp`] operand, is provably non-negative, except that an [`Index::Value`] (a
//!   gathered index) may be negative or huge for bad input; it appears only directly inside a
//!   `Clamp`, which must then be evaluated in signed arithmetic. Sums may hold negative constants
//!   or coefficients, but only where the whole sum is non-negative, so every other index can be
//!   rendered in wrapping unsigned arithmetic. Divisors are positive.
//! * Operands precede their users in [`Kernel::exprs`]; a reduction's value reads only
//!   [`Expr::Acc`] slots of earlier reductions; row stores never use [`Var::Red`].
//!
//! # Numerics
//!
//! Expressions of dtype f16 and bf16 are computed in f32 (the value is carried in f32 between
//! expressions); an [`Expr::Cast`] *to* f16 or bf16 rounds to that precision (and the rounded value
//! is then carried in f32), as does a store into an f16/bf16 buffer. Integer expressions wrap to
//! their dtype. Reductions accumulate in [`Reduction::dtype`], matmuls in
//! [`MatmulBody::acc_dtype`]; an [`Expr::Acc`] has the dtype of the graph value it stands for
//! (e.g. bf16 for a bf16 matmul) and converts from the accumulator like any other expression of
//! that dtype (carried in f32, not rounded to 16 bits until a cast or a store).

pub mod alloc;
pub mod analysis;
mod attention;
pub mod dynamic;
pub mod im2col;
pub mod index;
pub mod interp;
pub mod lanes;
pub mod library;
pub mod library_act;
pub mod library_conv;
pub mod narrow;
pub mod print;

pub use im2col::Im2col;
pub use index::Index;

use crate::dtype::DType;
use crate::ir::{BinaryOp, UnaryOp};
use crate::tensor::HostTensor;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// Loop variables a kernel body can refer to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Var {
    /// Pointwise: the flat element index, `0..numel`.
    Lane,
    /// Reduce: the row, `0..rows`.
    Row,
    /// Reduce: the position inside the row, `0..len`.
    Red,
    /// Matmul: the batch index.
    Batch,
    /// Matmul: the output row.
    M,
    /// Matmul and attention: the output column.
    N,
    /// Attention: the key position, `0..kv` (in the score expression only).
    Key,
}

/// Identifies a buffer of a [`Program`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct BufferId(pub u32);

/// What a buffer holds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum BufferKind {
    /// The graph input with this position.
    Input(usize),
    /// The graph output with this position.
    Output(usize),
    /// A constant, uploaded once.
    Constant(Arc<HostTensor>),
    /// A value produced by one kernel and consumed by later ones.
    Intermediate,
}

/// A buffer of the program: a dense array of `numel` elements of `dtype`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BufferDecl {
    /// Its id (equal to its position in [`Program::buffers`]).
    pub id: BufferId,
    /// Element type as stored.
    pub dtype: DType,
    /// Element count.
    pub numel: usize,
    /// Role.
    pub kind: BufferKind,
    /// The graph node whose value it holds (for debugging and the viewer).
    pub node: Option<u32>,
}

/// How a kernel uses a bound buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Access {
    /// Only loaded.
    Read,
    /// Only stored.
    Write,
}

/// A buffer bound to a kernel. Loads and stores name the argument by its position.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KernelArg {
    /// The buffer.
    pub buffer: BufferId,
    /// Element type as stored.
    pub dtype: DType,
    /// Element count.
    pub numel: usize,
    /// Read or write.
    pub access: Access,
}

/// Identifies an [`Expr`] in a kernel's expression arena ([`Kernel::exprs`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ExprId(pub u32);

/// Comparison of two indices.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum IndexCmp {
    /// a < b
    Lt,
    /// a >= b
    Ge,
    /// a == b
    Eq,
}

/// A scalar expression. Every expression has a dtype: the dtype of the graph value it computes;
/// renderers pick the compute type (f16/bf16 are computed in f32 by the WGSL backend).
/// Operands always have smaller ids (the arena is in evaluation order).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Expr {
    /// Load element `index` of argument `arg`. Renderers may assume `index` is in range.
    Load {
        /// Argument position.
        arg: usize,
        /// Element index.
        index: Index,
    },
    /// A literal (may be infinite or NaN, e.g. a max-pool's padding value; stored in JSON as a
    /// string then, since JSON numbers cannot be).
    Const(#[serde(with = "json_f64")] f64),
    /// An index used as an integer value.
    IndexValue(Index),
    /// Compare two indices (bool), e.g. to mask a pad or pick a concat input.
    IndexCmp(IndexCmp, Index, Index),
    /// Elementwise unary op.
    Unary(UnaryOp, ExprId),
    /// Elementwise binary op.
    Binary(BinaryOp, ExprId, ExprId),
    /// `cond ? a : b`.
    Where(ExprId, ExprId, ExprId),
    /// Conversion to this expression's dtype from the operand's.
    Cast(ExprId),
    /// Reduce kernels: the finished result of reduction `slot` for the current row. Matmul
    /// kernels: slot 0 is the accumulator for the current output element.
    Acc(usize),
}

/// An expression with its dtype.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TypedExpr {
    /// The expression.
    pub expr: Expr,
    /// Its dtype.
    pub dtype: DType,
}

/// Store `value` at element `index` of argument `arg`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Store {
    /// Argument position (an [`Access::Write`] argument).
    pub arg: usize,
    /// Element index.
    pub index: Index,
    /// The value (cast to the argument's dtype when stored).
    pub value: ExprId,
}

/// Reduction operators of a [`Reduction`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum RedOp {
    /// Sum (accumulated in f32 at least, f64 for f64).
    Sum,
    /// Product.
    Prod,
    /// Maximum (NaN propagates).
    Max,
    /// Minimum (NaN propagates).
    Min,
    /// Index (i64) of the first maximum (a NaN counts as the maximum; the first NaN wins).
    ArgMax,
    /// Index (i64) of the first minimum (a NaN counts as the minimum; the first NaN wins).
    ArgMin,
}

impl RedOp {
    /// The operator's name in IR dumps and messages (`sum`, `argmax`, ...).
    pub fn name(self) -> &'static str {
        match self {
            RedOp::Sum => "sum",
            RedOp::Prod => "prod",
            RedOp::Max => "max",
            RedOp::Min => "min",
            RedOp::ArgMax => "argmax",
            RedOp::ArgMin => "argmin",
        }
    }
}

/// One reduction of a row: folds `value` (an expression of [`Var::Row`], [`Var::Red`] and earlier
/// reductions' [`Expr::Acc`]) over `Red in 0..len` into accumulator `slot`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Reduction {
    /// The operator.
    pub op: RedOp,
    /// The value folded.
    pub value: ExprId,
    /// The slot [`Expr::Acc`] reads it from; equals the reduction's position.
    pub slot: usize,
    /// Accumulator dtype (f32 for f32/f16/bf16 inputs, f64 for f64, i64 for arg reductions).
    pub dtype: DType,
}

/// How a reduce kernel is mapped to the device. Chosen by the scheduler from [`Capabilities`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ReduceStrategy {
    /// One workgroup per row; the row is held in registers (len <= threads * per_thread), so the
    /// input is read once even with several reductions.
    Persistent,
    /// One workgroup per row; each reduction loops over the row (the row is re-read per phase).
    Looped,
    /// One thread per row looping serially: for many short rows (e.g. pooling windows, conv).
    ThreadPerRow,
}

/// A reduce body.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReduceBody {
    /// Number of independent rows.
    pub rows: usize,
    /// Elements per row.
    pub len: usize,
    /// Sequential reductions.
    pub reductions: Vec<Reduction>,
    /// Stores for every (row, red) after all reductions (the epilogue).
    pub elem_stores: Vec<Store>,
    /// Stores once per row (index uses only [`Var::Row`]).
    pub row_stores: Vec<Store>,
    /// Device mapping.
    pub strategy: ReduceStrategy,
}

/// A strided matrix operand: element (batch, r, c) is at `offset + batch*s_batch + r*s_row +
/// c*s_col` of argument `arg`. For A, (r, c) = (m, k); for B, (k, n).
///
/// With [`im2col`](Self::im2col) set (the B operand only), the operand is the im2col matrix of a
/// convolution input computed where it is loaded (implicit GEMM): element (batch, k, n) is the
/// input tap [`Im2col`] describes, read at `offset + batch*s_batch + ...` and 0 where the tap falls
/// into the padding; `s_row` and `s_col` are then 0 and unused.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MatOperand {
    /// Argument position.
    pub arg: usize,
    /// Element offset.
    pub offset: usize,
    /// Batch stride (0 for a broadcast operand).
    pub s_batch: usize,
    /// Row stride.
    pub s_row: usize,
    /// Column stride.
    pub s_col: usize,
    /// The implicit im2col form (B only): the operand is a window view of a convolution input.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub im2col: Option<Box<Im2col>>,
}

/// A matmul body.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MatmulBody {
    /// Batch count.
    pub batch: usize,
    /// Output rows.
    pub m: usize,
    /// Output columns.
    pub n: usize,
    /// Reduction extent.
    pub k: usize,
    /// Left operand (m x k).
    pub a: MatOperand,
    /// Right operand (k x n).
    pub b: MatOperand,
    /// Input dtype of both operands.
    pub in_dtype: DType,
    /// Accumulator dtype.
    pub acc_dtype: DType,
    /// The products may run in TF32 (operands rounded to a 10-bit mantissa, f32 accumulation):
    /// allowed by the compile's TF32 setting for this contraction (PyTorch's `allow_tf32`: on for
    /// convolutions, off for matmuls by default). Only for f32 operands. A property a backend
    /// *may* use (CUDA's tensor cores and cuBLASLt do), never must: the interpreter and WGSL stay
    /// exact, and comparisons with the exact reference take the TF32 bound where it is set
    /// (`testsuite::Tol::tf32`).
    #[serde(default)]
    pub tf32: bool,
    /// Epilogue stores (values built from [`Expr::Acc`]`(0)` and loads at Batch/M/N indices).
    pub stores: Vec<Store>,
}

/// An operand of an attention body: row `r`, column `c` of flat batch `bh` (`Var::Batch`, over
/// `batch * heads`) sits at `offset + (bh / heads) * s_batch + ((bh % heads) / group) * s_head +
/// r * s_row + c`. `group` > 1 shares one key/value head between that many query heads (GQA,
/// MQA); columns (the head dimension) are contiguous.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AttnOperand {
    /// Argument position.
    pub arg: usize,
    /// Element offset.
    pub offset: usize,
    /// Stride of the outer batch index (0 for a broadcast operand).
    pub s_batch: usize,
    /// Stride of the head index (after dividing by `group`).
    pub s_head: usize,
    /// Row stride (query or key position).
    pub s_row: usize,
    /// Query heads per head of this operand (1 for queries).
    pub group: usize,
}

impl AttnOperand {
    /// The element index of (flat batch `bh`, `r`, `c`) with `heads` heads per batch.
    pub fn at(&self, heads: usize, bh: usize, r: usize, c: usize) -> usize {
        self.offset
            + (bh / heads) * self.s_batch
            + ((bh % heads) / self.group.max(1)) * self.s_head
            + r * self.s_row
            + c
    }
}

/// A fused attention body: for each flat batch `b` (`Var::Batch` over `batch * heads`) and query
/// `i`,
///
/// ```text
/// s[j]  = score(Acc(1) = sum_c q[b,i,c] * k[b,j,c]  (in f32), Batch = b, M = i, Key = j)
///         and -inf where `causal = Some(o)` and j > i + o
/// mx    = max_j s[j];   e[j] = exp(s[j] - mx);   l = sum_j e[j]          (all f32)
/// out[n] = (sum_j round_p(e[j]) * v[b,j,n]) / l                           (f32 accumulation)
/// ```
///
/// then the [`stores`](Self::stores) run per output element with `Acc(0) = out[n]` at `Batch`,
/// `M`, `N`, as a matmul epilogue does (`round_p` rounds to [`p_dtype`](Self::p_dtype), the dtype
/// the graph fed the probabilities to the second product in). A row whose scores are all `-inf`
/// gives NaN, as the unfused softmax does.
///
/// Invariants (checked by [`interp::validate`]): the operands are read arguments of
/// [`in_dtype`](Self::in_dtype) that stay in range (`q` as `(m, d)`, `k` as `(kv, d)`, `v` as
/// `(kv, dv)`, see [`AttnOperand`]); `heads` is divisible by each operand's `group`; the score
/// expression is f32, uses only `Batch`, `M`, `Key` and accumulator slot 1; stores use only
/// `Batch`, `M`, `N` and slot 0.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AttentionBody {
    /// Outer batch count.
    pub batch: usize,
    /// Heads per batch (`Var::Batch` ranges over `batch * heads`).
    pub heads: usize,
    /// Queries per batch.
    pub m: usize,
    /// Keys (and values) per batch.
    pub kv: usize,
    /// Head dimension of queries and keys.
    pub d: usize,
    /// Head dimension of values (the output's columns).
    pub dv: usize,
    /// Queries: element (bh, i, c).
    pub q: AttnOperand,
    /// Keys: element (bh, j, c) (rows are keys, not transposed).
    pub k: AttnOperand,
    /// Values: element (bh, j, n).
    pub v: AttnOperand,
    /// Dtype of q, k and v.
    pub in_dtype: DType,
    /// Dtype the probabilities are rounded to before the second product.
    pub p_dtype: DType,
    /// The logit fed to the softmax (f32), from [`Expr::Acc`]`(1)`.
    pub score: ExprId,
    /// Keys `j > i + o` are masked out (the kernel may skip them without reading).
    pub causal: Option<usize>,
    /// Epilogue stores over [`Expr::Acc`]`(0)`.
    pub stores: Vec<Store>,
}

/// The body of a kernel.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum KernelBody {
    /// One lane per element.
    Pointwise {
        /// Number of lanes.
        numel: usize,
        /// Stores per lane.
        stores: Vec<Store>,
    },
    /// Row reductions with prologue and epilogue.
    Reduce(ReduceBody),
    /// Batched matrix product with an epilogue.
    Matmul(MatmulBody),
    /// Fused attention with an epilogue.
    Attention(AttentionBody),
}

impl KernelBody {
    /// Every store of the body (epilogue, element and row stores).
    pub fn stores(&self) -> Vec<&Store> {
        match self {
            KernelBody::Pointwise { stores, .. } => stores.iter().collect(),
            KernelBody::Reduce(r) => r.elem_stores.iter().chain(&r.row_stores).collect(),
            KernelBody::Matmul(m) => m.stores.iter().collect(),
            KernelBody::Attention(a) => a.stores.iter().collect(),
        }
    }
}

/// One kernel.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Kernel {
    /// A stable, readable name (`k3_softmax`).
    pub name: String,
    /// Bound buffers.
    pub args: Vec<KernelArg>,
    /// The expression arena.
    pub exprs: Vec<TypedExpr>,
    /// The body.
    pub body: KernelBody,
    /// Captured-graph node ids (origins) fused into this kernel.
    pub origins: Vec<u32>,
    /// The user-level op names fused (in order, deduplicated).
    pub ops: Vec<String>,
    /// Floating-point operations per launch (model count).
    pub flops: f64,
    /// Bytes that must move per launch (each argument read or written once).
    pub bytes: f64,
}

impl Kernel {
    /// The expression with this id.
    pub fn expr(&self, id: ExprId) -> &TypedExpr {
        &self.exprs[id.0 as usize]
    }

    /// Rewrites every index the expressions hold (loads, index values, both sides of index
    /// comparisons) with `f`; the body's store indices are left to the caller.
    pub fn map_expr_indices(&mut self, f: &dyn Fn(&Index) -> Index) {
        for e in &mut self.exprs {
            match &mut e.expr {
                Expr::Load { index, .. } | Expr::IndexValue(index) => *index = f(index),
                Expr::IndexCmp(_, x, y) => {
                    *x = f(x);
                    *y = f(y);
                }
                _ => {}
            }
        }
    }

    /// Appends an expression, returning its id.
    pub fn push_expr(&mut self, expr: Expr, dtype: DType) -> ExprId {
        self.exprs.push(TypedExpr { expr, dtype });
        ExprId(self.exprs.len() as u32 - 1)
    }
}

/// A fusion decision of the scheduler, with its reason, for `fusion.json` and the viewer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FusionDecision {
    /// Graph nodes concerned (post-decomposition ids).
    pub nodes: Vec<u32>,
    /// True when fused.
    pub fused: bool,
    /// Why (a named reason, e.g. `vertical pointwise`, `refused: reduction followed by broadcast
    /// into a different loop range`).
    pub reason: String,
    /// The kernels concerned (names as in [`Kernel::name`]): the one they ended up in when fused,
    /// the ones kept apart when refused; filled in once kernels are named.
    #[serde(default)]
    pub kernels: Vec<String>,
    /// The captured-graph (user) node ids of `nodes` (their origins), deduplicated and sorted.
    #[serde(default)]
    pub origins: Vec<u32>,
}

/// Where an intermediate buffer lives after memory planning.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MemoryPlan {
    /// Byte size of each pooled slot.
    pub slots: Vec<usize>,
    /// For each buffer (by id), its slot if it is an intermediate.
    pub slot_of: Vec<Option<usize>>,
    /// Peak bytes of all device buffers (inputs, outputs, constants, slots).
    pub peak_bytes: usize,
    /// Bytes if every intermediate had its own allocation (for comparison).
    pub unplanned_bytes: usize,
}

/// A scheduled graph: what backends compile and run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Program {
    /// Every buffer.
    pub buffers: Vec<BufferDecl>,
    /// Kernels in launch order.
    pub kernels: Vec<Kernel>,
    /// Graph inputs: (name, buffer, shape, dtype).
    pub inputs: Vec<IoDecl>,
    /// Graph outputs: (name, buffer, shape, dtype).
    pub outputs: Vec<IoDecl>,
    /// Intermediate buffer reuse.
    pub memory: MemoryPlan,
    /// Every fusion decision taken.
    pub decisions: Vec<FusionDecision>,
    /// When compiled to serve several values of an outer symbol (the batch): which extents scale
    /// with it ([`dynamic::Extents`]); `None` for a program valid only at its own shapes.
    #[serde(default)]
    pub dynamic: Option<Box<dynamic::Extents>>,
}

/// An input or output of a [`Program`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IoDecl {
    /// Name.
    pub name: String,
    /// Buffer holding it.
    pub buffer: BufferId,
    /// Static shape.
    pub shape: Vec<usize>,
    /// Dtype.
    pub dtype: DType,
}

/// What the scheduler may assume about a backend: hard limits and device facts only. What is
/// worth doing on it (tensor-core dtypes, tiles, when a split pays) is the backend's
/// `CostModel` (`Backend::cost_model`), which the scheduler reads beside this.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Capabilities {
    /// Backend name (`wgsl`, `cuda`, `interp`).
    pub backend: String,
    /// Max threads per workgroup/block.
    pub max_workgroup_size: u32,
    /// Shared (workgroup) memory per workgroup, bytes.
    pub max_shared_bytes: u32,
    /// Max storage buffers one kernel may bind.
    pub max_bindings: u32,
    /// Max bytes one binding may cover.
    pub max_binding_bytes: u64,
    /// Subgroup (warp) size, if subgroup operations exist.
    pub subgroup_size: Option<u32>,
    /// Dtypes the backend can store and compute.
    pub dtypes: Vec<DType>,
    /// Number of compute units (SMs), to decide split reductions; 0 if unknown.
    pub compute_units: u32,
}

impl Capabilities {
    /// Capabilities of the host interpreter ([`interp`]): everything allowed.
    pub fn host() -> Capabilities {
        Capabilities {
            backend: "interp".into(),
            max_workgroup_size: 1024,
            max_shared_bytes: 48 * 1024,
            max_bindings: 64,
            max_binding_bytes: u64::MAX,
            subgroup_size: Some(32),
            dtypes: DType::ALL.to_vec(),
            compute_units: 0,
        }
    }
}

/// Serde for an `f64` that may be non-finite: finite values as JSON numbers, `inf`, `-inf` and
/// `nan` as strings (serde_json writes non-finite numbers as `null`, which reads back as an error:
/// a cached program with a max-pool would never load).
mod json_f64 {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
        if v.is_finite() {
            s.serialize_f64(*v)
        } else if v.is_nan() {
            s.serialize_str("nan")
        } else if *v > 0.0 {
            s.serialize_str("inf")
        } else {
            s.serialize_str("-inf")
        }
    }

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Repr {
        Num(f64),
        Text(String),
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        match Repr::deserialize(d)? {
            Repr::Num(v) => Ok(v),
            Repr::Text(t) => match t.as_str() {
                "inf" => Ok(f64::INFINITY),
                "-inf" => Ok(f64::NEG_INFINITY),
                "nan" => Ok(f64::NAN),
                other => Err(serde::de::Error::custom(format!("not a number: {other:?}"))),
            },
        }
    }
}
