//! The kernel under construction: an expression arena with hash-consing, the buffers it reads,
//! its reductions, the graph nodes it stores, and helpers for index arithmetic over its loop
//! variables.

use crate::dtype::DType;
use crate::ir::NodeId;
use crate::kernel::index::Range;
use crate::kernel::{Expr, ExprId, Index, IndexCmp, Reduction, TypedExpr, Var};
use std::collections::{BTreeSet, HashMap};

/// A buffer as the scheduler names it before buffer ids exist.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) enum BufRef {
    /// The graph input with this position.
    Input(usize),
    /// A constant node of more than one element.
    Constant(NodeId),
    /// The value of a node stored by an earlier kernel.
    Node(NodeId),
    /// A contiguous copy of a matmul operand (index into the scheduler's copy list).
    Operand(usize),
}

/// A buffer a kernel reads.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct ReadArg {
    pub buf: BufRef,
    pub dtype: DType,
    pub numel: usize,
}

/// The iteration space of a kernel.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Space {
    /// One lane per element.
    Pointwise { numel: usize },
    /// Row reductions of a graph reduction: `in_shape` with `axes` reduced.
    Reduce { in_shape: Vec<usize>, axes: Vec<usize>, rows: usize, len: usize },
    /// A convolution or pooling window per output element.
    Window { rows: usize, len: usize },
    /// A batched matmul whose output element (batch, m, n) is stored at `out`'s flat index.
    Matmul { batch: usize, m: usize, n: usize, k: usize, out: MatOut },
    /// Fused attention: output element (`Batch` over `batch * heads`, `M`, `N` over `dv`) stored at
    /// `out`'s flat index, as a matmul's; `Key` ranges over `kv`, `Red` over `d` (operands).
    Attention { batch: usize, heads: usize, m: usize, dv: usize, kv: usize, d: usize, out: MatOut },
}

/// Where output element (`Batch`, `M`, `N`) of a matmul kernel sits in the value it computes: flat
/// index `Batch * s_batch + (N / inner) * s_outer + M * s_m + N % inner`. A plain matmul is
/// row-major `[batch, m, n]` ([`MatOut::plain`]); a convolution lowered through im2col has its
/// columns over (image, pixel) and its batch over groups, and stores NCHW.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct MatOut {
    pub s_batch: usize,
    pub s_outer: usize,
    pub s_m: usize,
    pub inner: usize,
}

impl MatOut {
    /// Row-major `[batch, m, n]`.
    pub(super) fn plain(m: usize, n: usize) -> MatOut {
        MatOut { s_batch: m * n, s_outer: 0, s_m: n, inner: n }
    }

    /// The flat index of output element (`Batch`, `M`, `N`) (unsimplified).
    pub(super) fn flat(&self) -> Index {
        let n = Index::var(Var::N);
        let inner = if self.s_outer == 0 {
            n
        } else {
            n.clone().div(self.inner as i64).mul(self.s_outer as i64).add(n.rem(self.inner as i64))
        };
        Index::var(Var::Batch).mul(self.s_batch as i64).add(Index::var(Var::M).mul(self.s_m as i64)).add(inner)
    }
}

impl Space {
    /// Short description for decisions.
    pub(super) fn describe(&self) -> String {
        match self {
            Space::Pointwise { numel } => format!("{numel} lanes"),
            Space::Reduce { rows, len, .. } | Space::Window { rows, len } => format!("{rows} rows x {len}"),
            Space::Matmul { batch, m, n, .. } => format!("{batch}x{m}x{n} outputs"),
            Space::Attention { batch, heads, m, dv, .. } => format!("{}x{m}x{dv} attention outputs", batch * heads),
        }
    }
}

/// Where in a kernel an expression is evaluated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Phase {
    /// Pointwise: per lane.
    Lane,
    /// Reduce/Window: inside reduction `slot`'s loop (earlier slots' results are available).
    Value(usize),
    /// Reduce: per (row, red) after all reductions.
    Elem,
    /// Reduce/Window: per row after all reductions.
    Row,
    /// Matmul and attention: per output element after the product.
    Epilogue,
    /// Attention: per score (`Batch`, `M`, `Key`), before the softmax.
    Score,
}

/// What a kernel writes a value to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Target {
    /// A graph node's buffers (its output buffers and, when read by other kernels, its own).
    Node(NodeId),
    /// A matmul operand copy.
    Operand(usize),
}

/// A value the kernel may store: a materialized node (or an operand copy) or a root (reduction,
/// matmul, convolution, pooling) of the kernel.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Member {
    /// What is stored.
    pub target: Target,
    /// The value.
    pub value: ExprId,
    /// The flat element index of the value at the current iteration point.
    pub index: Index,
    /// When it is stored.
    pub phase: Phase,
    /// True for roots (reductions, matmul, windows): in-kernel reads must hit `index` exactly.
    pub root: bool,
    /// For roots: the first reduction phase that may read it (`slot + 1`); `usize::MAX` when
    /// only the epilogue may.
    pub ready: usize,
}

impl Member {
    /// The root `node` of a contraction kernel (matmul, convolution, attention), read through its
    /// accumulator `value` at flat `index` in `phase` (only there: any other read is refused).
    pub(super) fn root(node: crate::ir::NodeId, value: ExprId, index: Index, phase: Phase) -> Member {
        Member { target: Target::Node(node), value, index, phase, root: true, ready: usize::MAX }
    }
}

/// A strided matmul operand before argument positions exist.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct MatRef {
    pub buf: BufRef,
    pub offset: usize,
    pub s_batch: usize,
    pub s_row: usize,
    pub s_col: usize,
    /// The implicit im2col form (see [`crate::kernel::Im2col`]).
    pub im2col: Option<Box<crate::kernel::Im2col>>,
}

/// The matmul part of a matmul kernel.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct MatSpec {
    pub a: MatRef,
    pub b: MatRef,
    pub in_dtype: DType,
    pub acc_dtype: DType,
    /// The products may run in TF32 ([`crate::kernel::MatmulBody::tf32`]).
    pub tf32: bool,
}

/// Statically known or computed comparison.
pub(super) enum Tri {
    True,
    False,
    Expr(ExprId),
}

/// A kernel under construction.
#[derive(Clone, Debug)]
pub(super) struct KernelBuilder {
    pub space: Space,
    pub reads: Vec<ReadArg>,
    pub exprs: Vec<TypedExpr>,
    cse: HashMap<String, ExprId>,
    /// `(node, coordinates, phase class)` -> expression, so shared subtrees are emitted once.
    pub memo: HashMap<String, ExprId>,
    pub reductions: Vec<Reduction>,
    pub members: Vec<Member>,
    pub matmul: Option<MatSpec>,
    /// The attention part of an attention kernel.
    pub attention: Option<super::attention::AttnSpec>,
    /// Graph nodes computed inline here (for origins, ops and decisions).
    pub computed: BTreeSet<NodeId>,
    /// One box of a concat split across kernels: nothing else joins it.
    pub partial: bool,
    /// What the kernel is, when its ops do not say it (`im2col`); used in its name.
    pub label: Option<&'static str>,
}

impl KernelBuilder {
    /// An empty kernel over `space`.
    pub(super) fn new(space: Space) -> KernelBuilder {
        KernelBuilder {
            space,
            reads: Vec::new(),
            exprs: Vec::new(),
            cse: HashMap::new(),
            memo: HashMap::new(),
            reductions: Vec::new(),
            members: Vec::new(),
            matmul: None,
            attention: None,
            computed: BTreeSet::new(),
            partial: false,
            label: None,
        }
    }

    /// The range of a loop variable of this kernel (`Red` doubles as the matmul's `k` while
    /// operands are analysed).
    pub(super) fn var_range(&self, v: Var) -> Option<Range> {
        let r = |n: usize| if n == 0 { None } else { Some((0, n as i64 - 1)) };
        match (&self.space, v) {
            (Space::Pointwise { numel }, Var::Lane) => r(*numel),
            (Space::Reduce { rows, .. } | Space::Window { rows, .. }, Var::Row) => r(*rows),
            (Space::Reduce { len, .. } | Space::Window { len, .. }, Var::Red) => r(*len),
            (Space::Matmul { batch, .. }, Var::Batch) => r(*batch),
            (Space::Matmul { m, .. }, Var::M) => r(*m),
            (Space::Matmul { n, .. }, Var::N) => r(*n),
            (Space::Matmul { k, .. }, Var::Red) => r(*k),
            (Space::Attention { batch, heads, .. }, Var::Batch) => r(batch * heads),
            (Space::Attention { m, .. }, Var::M) => r(*m),
            (Space::Attention { dv, .. }, Var::N) => r(*dv),
            (Space::Attention { kv, .. }, Var::Key) => r(*kv),
            (Space::Attention { d, .. }, Var::Red) => r(*d),
            _ => None,
        }
    }

    /// Simplifies an index with this kernel's variable ranges (a variable whose range is the
    /// single point 0 becomes the literal 0).
    pub(super) fn simp(&self, i: &Index) -> Index {
        let mut x = i.clone();
        for v in crate::kernel::analysis::VARS {
            if self.var_range(v) == Some((0, 0)) && x.uses(v) {
                x = x.substitute(v, &Index::Const(0));
            }
        }
        x.simplify(&|v| self.var_range(v))
    }

    /// The inclusive range of an index, if bounded.
    pub(super) fn range(&self, i: &Index) -> Option<Range> {
        i.range(&|v| self.var_range(v))
    }

    /// True when `a` and `b` provably take the same value at every iteration point.
    pub(super) fn index_eq(&self, a: &Index, b: &Index) -> bool {
        let (a, b) = (self.simp(a), self.simp(b));
        if a == b {
            return true;
        }
        if let (Some((p, q)), Some((r, s))) = (self.range(&a), self.range(&b))
            && p == q
            && r == s
        {
            return p == r;
        }
        self.simp(&a.add(b.mul(-1))) == Index::Const(0)
    }

    /// Appends an expression, reusing an identical one.
    pub(super) fn push(&mut self, expr: Expr, dtype: DType) -> ExprId {
        let key = format!("{expr:?}|{dtype:?}");
        if let Some(&id) = self.cse.get(&key) {
            return id;
        }
        self.exprs.push(TypedExpr { expr, dtype });
        let id = ExprId(self.exprs.len() as u32 - 1);
        self.cse.insert(key, id);
        id
    }

    /// A literal of `dtype`.
    pub(super) fn konst(&mut self, v: f64, dtype: DType) -> ExprId {
        self.push(Expr::Const(v), dtype)
    }

    /// The argument position of a read buffer, adding it when new.
    pub(super) fn read_arg(&mut self, buf: BufRef, dtype: DType, numel: usize) -> usize {
        if let Some(i) = self.reads.iter().position(|a| a.buf == buf) {
            return i;
        }
        self.reads.push(ReadArg { buf, dtype, numel });
        self.reads.len() - 1
    }

    /// Loads element `index` (simplified here) of a buffer.
    pub(super) fn load(&mut self, buf: BufRef, dtype: DType, numel: usize, index: &Index) -> ExprId {
        let arg = self.read_arg(buf, dtype, numel);
        let index = self.simp(index);
        self.push(Expr::Load { arg, index }, dtype)
    }

    /// `a op b`, decided statically when the ranges allow.
    pub(super) fn cmp(&mut self, op: IndexCmp, a: &Index, b: &Index) -> Tri {
        let (a, b) = (self.simp(a), self.simp(b));
        if let (Some((alo, ahi)), Some((blo, bhi))) = (self.range(&a), self.range(&b)) {
            let known = match op {
                IndexCmp::Lt if ahi < blo => Some(true),
                IndexCmp::Lt if alo >= bhi => Some(false),
                IndexCmp::Ge if alo >= bhi => Some(true),
                IndexCmp::Ge if ahi < blo => Some(false),
                IndexCmp::Eq if alo == ahi && blo == bhi => Some(alo == blo),
                IndexCmp::Eq if ahi < blo || bhi < alo => Some(false),
                _ => None,
            };
            match known {
                Some(true) => return Tri::True,
                Some(false) => return Tri::False,
                None => {}
            }
        }
        Tri::Expr(self.push(Expr::IndexCmp(op, a, b), DType::Bool))
    }

    /// Conjunction of optional masks (`None` means "always true").
    pub(super) fn and(&mut self, a: Option<ExprId>, b: Tri) -> Result<Option<ExprId>, ()> {
        match b {
            Tri::True => Ok(a),
            Tri::False => Err(()),
            Tri::Expr(e) => Ok(Some(match a {
                None => e,
                Some(x) => self.push(Expr::Binary(crate::ir::BinaryOp::And, x, e), DType::Bool),
            })),
        }
    }

    /// The member storing (or the root computing) `n`, if any.
    pub(super) fn member(&self, n: NodeId) -> Option<&Member> {
        self.members.iter().find(|m| m.target == Target::Node(n))
    }

    /// Graph nodes this kernel stores or computes as roots.
    pub(super) fn member_nodes(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.members.iter().filter_map(|m| match m.target {
            Target::Node(n) => Some(n),
            Target::Operand(_) => None,
        })
    }
}

/// Row-major strides.
pub(super) fn strides(shape: &[usize]) -> Vec<i64> {
    crate::shape::contiguous_strides(shape).into_iter().map(|s| s as i64).collect()
}

/// The flat row-major index of coordinates `c` in `shape` (axes of extent 1 contribute nothing).
pub(super) fn linearize(c: &[Index], shape: &[usize]) -> Index {
    let st = strides(shape);
    let terms: Vec<Index> =
        c.iter().zip(shape).zip(&st).filter(|((_, d), _)| **d != 1).map(|((ci, _), &s)| ci.clone().mul(s)).collect();
    match terms.len() {
        0 => Index::Const(0),
        _ => Index::Sum(terms),
    }
}

/// The coordinates in `shape` of flat index `flat` (unsimplified; axes of extent 0 or 1 are 0).
pub(super) fn delinearize(flat: &Index, shape: &[usize]) -> Vec<Index> {
    let st = strides(shape);
    shape
        .iter()
        .zip(&st)
        .map(|(&d, &s)| if d <= 1 { Index::Const(0) } else { flat.clone().div(s.max(1)).rem(d as i64) })
        .collect()
}

/// Coordinates of an operand of shape `inp` broadcast (NumPy rules) to the output coordinates `c`
/// of shape `out`.
pub(super) fn bcast_coords(c: &[Index], out: &[usize], inp: &[usize]) -> Vec<Index> {
    let off = out.len() - inp.len().min(out.len());
    inp.iter()
        .enumerate()
        .map(|(i, &d)| if d == 1 { Index::Const(0) } else { c.get(i + off).cloned().unwrap_or(Index::Const(0)) })
        .collect()
}

/// Coordinates in the input of a reshape from `inp` to `out`.
pub(super) fn reshape_coords(c: &[Index], out: &[usize], inp: &[usize]) -> Vec<Index> {
    if out == inp {
        return c.to_vec();
    }
    // Only axes of extent 1 differ: map the others directly.
    let a: Vec<usize> = out.iter().copied().filter(|&d| d != 1).collect();
    let b: Vec<usize> = inp.iter().copied().filter(|&d| d != 1).collect();
    if a == b {
        let mut kept = c.iter().zip(out).filter(|(_, d)| **d != 1).map(|(ci, _)| ci.clone());
        return inp
            .iter()
            .map(|&d| if d == 1 { Index::Const(0) } else { kept.next().unwrap_or(Index::Const(0)) })
            .collect();
    }
    delinearize(&linearize(c, out), inp)
}
