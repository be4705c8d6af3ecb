//! Emission: the expression computing a graph node at symbolic coordinates, inside one kernel.
//!
//! Pointwise ops recurse into their operands at broadcast coordinates; movement ops rewrite the
//! coordinates (reshape, permute, expand, slice) or select between clamped reads (concat, pad);
//! gathers turn a loaded value into an index. A node stored by an earlier kernel is loaded; a root
//! of this kernel (a reduction, the matmul, the window op) is read through its accumulator, and
//! only at the current iteration point. Every coordinate is simplified with the kernel's variable
//! ranges, every address is provably in range, and every clamp, division, remainder and comparison
//! works on a non-negative operand (see the kernel module's invariants).

use super::build::{BufRef, KernelBuilder, Phase, Tri, bcast_coords, delinearize, linearize, reshape_coords};
use super::plan::{Kind, Sched};
use crate::dtype::DType;
use crate::ir::{BinaryOp, NodeId, Op, PadMode};
use crate::kernel::{Expr, ExprId, Index, IndexCmp, Var};
use crate::tensor::round_to;

/// Why a node could not be emitted into a kernel (a fusion refusal, or an internal error).
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Refusal {
    /// A root of the kernel is read at another iteration point.
    DifferentRow(NodeId),
    /// A node stored by the kernel is read at another element (it would be recomputed).
    DifferentIndex(NodeId),
    /// The value comes from a kernel that runs later.
    LaterKernel(NodeId),
    /// A reduction result is read before its reduction finished.
    NotReady(NodeId),
    /// The node's element count does not match the kernel's iteration space.
    Space(String),
    /// Too many buffers.
    Bindings { would: usize, limit: usize },
    /// Too many nodes in one kernel.
    GroupSize(usize),
    /// The kernel writes one box of a split concat.
    Partial,
    /// A scheduler bug or an unsupported corner (turned into an error).
    Internal(String),
}

impl Refusal {
    /// The named reason recorded in the fusion decisions.
    pub(super) fn reason(&self, s: &Sched) -> String {
        match self {
            Refusal::DifferentRow(n) => match s.kind[n.index()] {
                Kind::MatMul => format!("refused: matmul output {n} read at a different element"),
                Kind::Conv | Kind::Pool => format!("refused: window output {n} read at a different element"),
                _ => format!("refused: reduction output {n} broadcast into a different row space"),
            },
            Refusal::DifferentIndex(n) => format!("refused: reads {n} at a different index (would recompute it)"),
            Refusal::LaterKernel(n) => format!("refused: depends on {n}, produced by a later kernel"),
            Refusal::NotReady(n) => format!("refused: {n} is not available in this reduction phase"),
            Refusal::Space(s) => format!("refused: different iteration space ({s})"),
            Refusal::Bindings { would, limit } => format!("refused: would bind {would} buffers > {limit}"),
            Refusal::GroupSize(n) => format!("refused: would exceed {n} nodes"),
            Refusal::Partial => "refused: kernel writes one part of a split concat".into(),
            Refusal::Internal(m) => format!("refused: {m}"),
        }
    }
}

type R<T> = Result<T, Refusal>;

/// `clamp(x, lo, hi) - lo`: an in-range offset from a non-negative `x`.
fn clamp_from(x: Index, lo: i64, hi: i64) -> Index {
    x.clamp(lo, hi).add(Index::Const(-lo))
}

impl Sched<'_> {
    /// The expression of node `n` at coordinates `c` (one per axis of `n`) in kernel `kb`, which
    /// sits (or will sit) at launch position `pos`.
    pub(super) fn emit(&self, kb: &mut KernelBuilder, pos: usize, n: NodeId, c: &[Index], ph: Phase) -> R<ExprId> {
        let c: Vec<Index> = c.iter().map(|i| kb.simp(i)).collect();
        let class = match ph {
            Phase::Value(j) => j as i64,
            _ => -1,
        };
        let key = format!("{}|{:?}|{class}", n.0, c);
        if let Some(&e) = kb.memo.get(&key) {
            return Ok(e);
        }
        let e = self.emit_node(kb, pos, n, &c, ph)?;
        kb.memo.insert(key, e);
        Ok(e)
    }

    fn emit_node(&self, kb: &mut KernelBuilder, pos: usize, n: NodeId, c: &[Index], ph: Phase) -> R<ExprId> {
        let node = self.g.node(n);
        let dt = node.ty.dtype;
        let shape = &self.shapes[n.index()];
        let numel: usize = shape.iter().product();
        match self.kind[n.index()] {
            Kind::Input(k) => return Ok(kb.load(BufRef::Input(k), dt, numel, &linearize(c, shape))),
            Kind::Constant => {
                let Op::Constant(t) = &node.op else { return Err(Refusal::Internal("constant kind".into())) };
                if numel == 1 {
                    let v = if dt.is_float() { t.to_f64_vec()[0] } else { t.to_i64_vec()[0] as f64 };
                    return Ok(kb.konst(v, dt));
                }
                return Ok(kb.load(BufRef::Constant(n), dt, numel, &self.storage_index(n, c)));
            }
            _ => {}
        }
        match self.place[n.index()] {
            Some(k) if k < pos => return Ok(kb.load(BufRef::Node(n), dt, numel, &self.storage_index(n, c))),
            Some(k) if k > pos => return Err(Refusal::LaterKernel(n)),
            Some(_) => {
                let flat = linearize(c, shape);
                if let Some(m) = kb.member(n).cloned() {
                    if !kb.index_eq(&flat, &m.index) {
                        return Err(if m.root { Refusal::DifferentRow(n) } else { Refusal::DifferentIndex(n) });
                    }
                    if m.root {
                        if let Phase::Value(j) = ph
                            && m.ready > j
                        {
                            return Err(Refusal::NotReady(n));
                        }
                        return Ok(m.value);
                    }
                    // A materialized member read at its own element: recompute (shared by CSE).
                } else if !self.kind[n.index()].inlinable() {
                    return Err(Refusal::Internal(format!("{n} is placed in this kernel but not computed by it")));
                }
                // Otherwise the kernel is being rebuilt and `n` is not re-emitted yet: inline it.
            }
            None => {}
        }
        if !self.kind[n.index()].inlinable() {
            return Err(Refusal::Internal(format!("{n} ({}) was not scheduled before its use", node.op.name())));
        }
        kb.computed.insert(n);
        let ins = &node.inputs;
        let sh = |i: usize| -> &[usize] { &self.shapes[ins[i].index()] };
        match &node.op {
            Op::Unary(u) => {
                let a = self.emit(kb, pos, ins[0], c, ph)?;
                Ok(kb.push(Expr::Unary(*u, a), dt))
            }
            Op::Binary(b) => {
                let a = self.emit(kb, pos, ins[0], &bcast_coords(c, shape, sh(0)), ph)?;
                let bb = self.emit(kb, pos, ins[1], &bcast_coords(c, shape, sh(1)), ph)?;
                Ok(kb.push(Expr::Binary(*b, a, bb), dt))
            }
            Op::Where => {
                let cond = self.emit(kb, pos, ins[0], &bcast_coords(c, shape, sh(0)), ph)?;
                let a = self.emit(kb, pos, ins[1], &bcast_coords(c, shape, sh(1)), ph)?;
                let b = self.emit(kb, pos, ins[2], &bcast_coords(c, shape, sh(2)), ph)?;
                if a == b {
                    return Ok(a);
                }
                Ok(kb.push(Expr::Where(cond, a, b), dt))
            }
            Op::Cast(to) => {
                let a = self.emit(kb, pos, ins[0], c, ph)?;
                if self.g.ty(ins[0]).dtype == *to {
                    return Ok(a);
                }
                Ok(kb.push(Expr::Cast(a), *to))
            }
            Op::Reshape(_) => self.emit(kb, pos, ins[0], &reshape_coords(c, shape, sh(0)), ph),
            Op::Expand(_) => self.emit(kb, pos, ins[0], &bcast_coords(c, shape, sh(0)), ph),
            Op::Permute(p) => {
                let mut src = vec![Index::Const(0); p.len()];
                for (i, &a) in p.iter().enumerate() {
                    src[a] = c[i].clone();
                }
                self.emit(kb, pos, ins[0], &src, ph)
            }
            Op::Slice(dims) => {
                let src: Vec<Index> = dims
                    .iter()
                    .zip(c)
                    .map(|(d, ci)| Index::Const(d.start as i64).add(ci.clone().mul(d.step)))
                    .collect();
                self.emit(kb, pos, ins[0], &src, ph)
            }
            Op::Concat { axis } => self.emit_concat(kb, pos, n, *axis, c, ph),
            Op::Pad { pads, mode } => self.emit_pad(kb, pos, n, pads, *mode, c, ph),
            Op::Gather { axis } => {
                let axis = *axis;
                let ir = sh(1).len();
                let iv = self.emit(kb, pos, ins[1], &c[axis..axis + ir], ph)?;
                let p = self.gather_index(kb, iv, self.g.ty(ins[1]).dtype, sh(0)[axis])?;
                let mut src: Vec<Index> = c[..axis].to_vec();
                src.push(p);
                src.extend_from_slice(&c[axis + ir..]);
                self.emit(kb, pos, ins[0], &src, ph)
            }
            Op::GatherElements { axis } => {
                let iv = self.emit(kb, pos, ins[1], c, ph)?;
                let p = self.gather_index(kb, iv, self.g.ty(ins[1]).dtype, sh(0)[*axis])?;
                let mut src = c.to_vec();
                src[*axis] = p;
                self.emit(kb, pos, ins[0], &src, ph)
            }
            other => Err(Refusal::Internal(format!("{} cannot be computed inline", other.name()))),
        }
    }

    /// An index from a loaded integer value: negative values count from the end (once), and the
    /// result is clamped into `0..n` so the read stays in range even for bad indices: the rule
    /// the CPU reference follows too (`cpu::movement::norm_index`).
    fn gather_index(&self, kb: &mut KernelBuilder, iv: ExprId, dt: DType, n: usize) -> R<Index> {
        if n == 0 {
            return Err(Refusal::Internal("gather from an axis of extent 0".into()));
        }
        let v = if dt == DType::I64 { iv } else { kb.push(Expr::Cast(iv), DType::I64) };
        let w = if dt.is_signed_int() {
            let zero = kb.konst(0.0, DType::I64);
            let neg = kb.push(Expr::Binary(BinaryOp::Lt, v, zero), DType::Bool);
            let ext = kb.konst(n as f64, DType::I64);
            let up = kb.push(Expr::Binary(BinaryOp::Add, v, ext), DType::I64);
            kb.push(Expr::Where(neg, up, v), DType::I64)
        } else if dt == DType::U64 {
            // A u64 above i64::MAX reads as negative here; it is huge, so it clamps to the end
            // (as on the CPU reference).
            let zero = kb.konst(0.0, DType::I64);
            let neg = kb.push(Expr::Binary(BinaryOp::Lt, v, zero), DType::Bool);
            let last = kb.konst(n as f64 - 1.0, DType::I64);
            kb.push(Expr::Where(neg, last, v), DType::I64)
        } else {
            v
        };
        Ok(Index::Value(w).clamp(0, n as i64 - 1))
    }

    fn emit_concat(
        &self,
        kb: &mut KernelBuilder,
        pos: usize,
        n: NodeId,
        axis: usize,
        c: &[Index],
        ph: Phase,
    ) -> R<ExprId> {
        let node = self.g.node(n);
        let ca = c[axis].clone();
        let (lo, hi) = kb.range(&ca).ok_or_else(|| Refusal::Internal("unbounded concat coordinate".into()))?;
        let mut parts = Vec::new();
        let mut off = 0i64;
        for &p in &node.inputs {
            let len = self.shapes[p.index()][axis] as i64;
            if len > 0 && off <= hi && off + len > lo {
                parts.push((p, off, len));
            }
            off += len;
        }
        let mut acc: Option<ExprId> = None;
        for &(p, off, len) in parts.iter().rev() {
            let mut sc = c.to_vec();
            sc[axis] = clamp_from(ca.clone(), off, off + len - 1);
            let v = self.emit(kb, pos, p, &sc, ph)?;
            acc = Some(match acc {
                None => v,
                Some(later) => match kb.cmp(IndexCmp::Lt, &ca, &Index::Const(off + len)) {
                    Tri::True => v,
                    Tri::False => later,
                    Tri::Expr(cond) => kb.push(Expr::Where(cond, v, later), node.ty.dtype),
                },
            });
        }
        acc.ok_or_else(|| Refusal::Internal("concat with no part in range".into()))
    }

    #[allow(clippy::too_many_arguments)]
    fn emit_pad(
        &self,
        kb: &mut KernelBuilder,
        pos: usize,
        n: NodeId,
        pads: &[(i64, i64)],
        mode: PadMode,
        c: &[Index],
        ph: Phase,
    ) -> R<ExprId> {
        let node = self.g.node(n);
        let dt = node.ty.dtype;
        let inp = node.inputs[0];
        let ishape = self.shapes[inp.index()].clone();
        if let PadMode::Constant(v) = mode {
            let fill = round_to(dt, v);
            if ishape.contains(&0) {
                return Ok(kb.konst(fill, dt));
            }
            let mut mask: Option<ExprId> = None;
            let mut src = Vec::with_capacity(c.len());
            for (d, &(b, _)) in pads.iter().enumerate() {
                let ext = ishape[d] as i64;
                let k = b.max(0);
                let t = c[d].clone().add(Index::Const((-b).max(0)));
                let ge = kb.cmp(IndexCmp::Ge, &t, &Index::Const(k));
                let lt = kb.cmp(IndexCmp::Lt, &t, &Index::Const(k + ext));
                let m = kb.and(mask, ge).and_then(|m| kb.and(m, lt));
                match m {
                    Ok(m) => mask = m,
                    Err(()) => return Ok(kb.konst(fill, dt)),
                }
                src.push(clamp_from(t, k, k + ext - 1));
            }
            let v = self.emit(kb, pos, inp, &src, ph)?;
            return Ok(match mask {
                None => v,
                Some(m) => {
                    let f = kb.konst(fill, dt);
                    kb.push(Expr::Where(m, v, f), dt)
                }
            });
        }
        // Reflect / edge / wrap: per axis, one source coordinate or a choice of two.
        let mut alts: Vec<Alt> = Vec::with_capacity(c.len());
        for (d, &(b, a)) in pads.iter().enumerate() {
            let ext = ishape[d] as i64;
            let (crop_b, crop_a) = ((-b).max(0), (-a).max(0));
            let m = ext - crop_b - crop_a;
            if m <= 0 {
                return Err(Refusal::Internal(format!("cannot pad an empty extent (of {ext}) in {mode:?} mode")));
            }
            let pb = b.max(0);
            let o = c[d].clone();
            let alt = match mode {
                PadMode::Edge => Alt::One(clamp_from(o, pb, pb + m - 1).add(Index::Const(crop_b))),
                PadMode::Wrap => {
                    let k = (pb + m - 1) / m;
                    Alt::One(o.add(Index::Const(k * m - pb)).rem(m).add(Index::Const(crop_b)))
                }
                _ if m == 1 => Alt::One(Index::Const(crop_b)),
                _ => {
                    // r = (o - pb) mod 2(m-1); the source is r when r < m, else 2(m-1) - r.
                    let period = 2 * (m - 1);
                    let k = (pb + period - 1) / period;
                    let r = kb.simp(&o.add(Index::Const(k * period - pb)).rem(period));
                    let direct = r.clone().clamp(0, m - 1).add(Index::Const(crop_b));
                    let mirrored =
                        Index::Const(period).add(r.clone().mul(-1)).clamp(0, m - 1).add(Index::Const(crop_b));
                    match kb.cmp(IndexCmp::Lt, &r, &Index::Const(m)) {
                        Tri::True => Alt::One(direct),
                        Tri::False => Alt::One(mirrored),
                        Tri::Expr(cond) => Alt::Two { cond, direct, mirrored },
                    }
                }
            };
            alts.push(alt);
        }
        self.emit_alts(kb, pos, inp, dt, &alts, Vec::new(), ph)
    }

    /// Emits `inp` at every combination of the per-axis alternatives, selecting between the two
    /// reflect branches with the precomputed condition.
    #[allow(clippy::too_many_arguments)]
    fn emit_alts(
        &self,
        kb: &mut KernelBuilder,
        pos: usize,
        inp: NodeId,
        dt: DType,
        alts: &[Alt],
        prefix: Vec<Index>,
        ph: Phase,
    ) -> R<ExprId> {
        let d = prefix.len();
        if d == alts.len() {
            return self.emit(kb, pos, inp, &prefix, ph);
        }
        match &alts[d] {
            Alt::One(i) => {
                let mut p = prefix;
                p.push(i.clone());
                self.emit_alts(kb, pos, inp, dt, alts, p, ph)
            }
            Alt::Two { cond, direct, mirrored } => {
                let mut p1 = prefix.clone();
                p1.push(direct.clone());
                let v1 = self.emit_alts(kb, pos, inp, dt, alts, p1, ph)?;
                let mut p2 = prefix;
                p2.push(mirrored.clone());
                let v2 = self.emit_alts(kb, pos, inp, dt, alts, p2, ph)?;
                Ok(if v1 == v2 { v1 } else { kb.push(Expr::Where(*cond, v1, v2), dt) })
            }
        }
    }

    /// The source coordinates, base buffer and flat index of a pure view (reshape, permute,
    /// expand, slice) of a buffer, read at `c`; `None` when `n` is not such a view.
    pub(super) fn view_index(&self, kb: &KernelBuilder, pos: usize, n: NodeId, c: &[Index]) -> Option<(BufRef, Index)> {
        self.view_index_through(kb, pos, n, c, None)
    }

    /// [`Sched::view_index`] through one widening `cast(x: fp8, f32)` (not materialized) of the
    /// fp8 dtype `from` on the way: the buffer found holds `from` values (the prologue of a
    /// matmul, `prologue.rs`). `None` when there is no such cast or no view.
    pub(super) fn view_index_widened(
        &self,
        kb: &KernelBuilder,
        pos: usize,
        n: NodeId,
        c: &[Index],
        from: DType,
    ) -> Option<(BufRef, Index)> {
        self.view_index_through(kb, pos, n, c, Some(from))
    }

    fn view_index_through(
        &self,
        kb: &KernelBuilder,
        pos: usize,
        n: NodeId,
        c: &[Index],
        widen: Option<DType>,
    ) -> Option<(BufRef, Index)> {
        let node = self.g.node(n);
        if let (Some(from), Op::Cast(DType::F32)) = (widen, &node.op)
            && self.place[n.index()].is_none()
            && self.g.ty(node.inputs[0]).dtype == from
        {
            // The widening is the loader's: the same coordinates of the fp8 operand.
            return self.view_index_through(kb, pos, node.inputs[0], c, None);
        }
        if widen.is_some() && matches!(self.kind[n.index()], Kind::Input(_) | Kind::Constant) {
            return None;
        }
        if widen.is_some() && self.place[n.index()].is_some() {
            return None;
        }
        let shape = &self.shapes[n.index()];
        let c: Vec<Index> = c.iter().map(|i| kb.simp(i)).collect();
        match self.kind[n.index()] {
            Kind::Input(k) => return Some((BufRef::Input(k), kb.simp(&linearize(&c, shape)))),
            Kind::Constant => return Some((BufRef::Constant(n), kb.simp(&self.storage_index(n, &c)))),
            _ => {}
        }
        if let Some(k) = self.place[n.index()] {
            return (k < pos).then(|| (BufRef::Node(n), kb.simp(&self.storage_index(n, &c))));
        }
        let inp = *node.inputs.first()?;
        let ishape = &self.shapes[inp.index()];
        let src = match &node.op {
            Op::Reshape(_) => reshape_coords(&c, shape, ishape),
            Op::Expand(_) => bcast_coords(&c, shape, ishape),
            Op::Permute(p) => {
                let mut src = vec![Index::Const(0); p.len()];
                for (i, &a) in p.iter().enumerate() {
                    src[a] = c[i].clone();
                }
                src
            }
            Op::Slice(dims) => {
                dims.iter().zip(&c).map(|(d, ci)| Index::Const(d.start as i64).add(ci.clone().mul(d.step))).collect()
            }
            _ => return None,
        };
        self.view_index_through(kb, pos, inp, &src, widen)
    }

    /// Input coordinates of a reduction of `in_shape` over `axes` at (`Row`, `Red`); with
    /// `reverse`, the (single) reduced axis is walked backwards.
    pub(super) fn reduce_coords(in_shape: &[usize], axes: &[usize], reverse: bool) -> Vec<Index> {
        let kept: Vec<usize> = (0..in_shape.len()).filter(|a| !axes.contains(a)).map(|a| in_shape[a]).collect();
        let red: Vec<usize> = axes.iter().map(|&a| in_shape[a]).collect();
        let mut rc = delinearize(&Index::var(Var::Row), &kept).into_iter();
        let mut dc = delinearize(&Index::var(Var::Red), &red).into_iter();
        (0..in_shape.len())
            .map(|a| {
                if axes.contains(&a) {
                    let i = dc.next().unwrap_or(Index::Const(0));
                    if reverse && in_shape[a] > 1 { Index::Const(in_shape[a] as i64 - 1).add(i.mul(-1)) } else { i }
                } else {
                    rc.next().unwrap_or(Index::Const(0))
                }
            })
            .collect()
    }
}

/// One axis of a non-constant pad: a single source coordinate, or a choice of two.
enum Alt {
    One(Index),
    Two { cond: ExprId, direct: Index, mirrored: Index },
}
