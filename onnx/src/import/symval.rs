//! Symbolic known values: small integer tensors (shapes and what exporters compute from them)
//! whose elements are polynomials of the model's symbolic dims ([`Poly`]), e.g. the value of
//! `Shape(x)` for `x: [batch, seq, 64]` is `[batch, seq, 64]`.
//!
//! The runtime nodes stay in the graph (a `Shape` of a symbolic tensor computes its extents from
//! the tensor's type, see [`Cx::shape_value`]); the symbolic value is tracked beside them so
//! that ops whose output shape depends on a value (`Reshape`, `Expand`, `ConstantOfShape`,
//! `Slice` bounds) get typed, symbolic results. [`Importer::sym_fold`] propagates values through
//! the ops exporters put between `Shape` and those consumers: `Gather`, `Unsqueeze`, `Squeeze`,
//! `Reshape`, `Flatten`, `Identity`, `Cast`, `Concat`, `Slice`, `Add`, `Sub`, `Mul`, `Div`,
//! `Equal` and `Where`. A result whose elements are all numbers becomes a constant. Arithmetic the
//! polynomials cannot express (division by a symbol, a floor of a non-multiple) leaves the value
//! unknown, so a consumer that needs it fails with the usual error naming it.

use super::{Cx, Importer, R};
use crate::proto::NodeProto;
use sinter_core::ir::{BinaryOp as B, Origin, ReduceOp};
use sinter_core::shape::Poly;
use sinter_core::{DType, Dim, HostTensor, NodeId, Op, Shape};
use std::sync::Arc;

/// The most elements a symbolic value may hold (shape vectors are short).
const MAX_SYM_ELEMS: usize = 64;

/// A small integer tensor whose elements are polynomials of the symbolic dims.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct SymVal {
    /// The tensor's (static) shape.
    pub shape: Vec<usize>,
    /// The elements, row-major.
    pub v: Vec<Poly>,
}

impl SymVal {
    /// The elements when all are numbers.
    fn consts(&self) -> Option<Vec<i64>> {
        self.v.iter().map(Poly::as_const).collect()
    }
}

/// Equality of two symbolic extents when it is decidable: the same polynomial, or a difference
/// that is a non-zero number, or a positive expression against a number below 1.
fn sym_eq(a: &Poly, b: &Poly) -> Option<bool> {
    let d = a.sub(b)?;
    if let Some(c) = d.as_const() {
        return Some(c == 0);
    }
    match (a.as_const(), b.as_const()) {
        (Some(c), None) if b.is_positive() && c < 1 => Some(false),
        (None, Some(c)) if a.is_positive() && c < 1 => Some(false),
        _ => None,
    }
}

/// Elementwise binary op on polynomials (numbers follow sinter's integer semantics).
fn sym_bin(op: &str, a: &Poly, b: &Poly, dt: DType) -> Option<Poly> {
    if let (Some(x), Some(y)) = (a.as_const(), b.as_const()) {
        let bop = match op {
            "Add" => B::Add,
            "Sub" => B::Sub,
            "Mul" => B::Mul,
            "Div" => B::Div,
            "Mod" => B::Mod,
            "Max" => B::Max,
            "Min" => B::Min,
            "Equal" => return Some(Poly::constant((x == y) as i64)),
            _ => return None,
        };
        return sinter_core::scalar::binary_i64(bop, x, y, dt).ok().map(Poly::constant);
    }
    match op {
        "Add" => a.add(b),
        "Sub" => a.sub(b),
        "Mul" => a.mul(b),
        // Extents are non-negative, so C-style truncation is the floor.
        "Div" => match b.as_const() {
            Some(d) if d > 0 => a.floor_div(d),
            _ => a.div_exact(b),
        },
        "Equal" => sym_eq(a, b).map(|e| Poly::constant(e as i64)),
        _ => None,
    }
}

/// NumPy broadcasting of two small shapes (rank at most 1 on each side is what shapes use,
/// any rank works).
fn bshape(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let r = a.len().max(b.len());
    let mut out = vec![0; r];
    for i in 0..r {
        let x = if i + a.len() >= r { a[i + a.len() - r] } else { 1 };
        let y = if i + b.len() >= r { b[i + b.len() - r] } else { 1 };
        out[i] = match (x, y) {
            (x, y) if x == y => x,
            (1, y) => y,
            (x, 1) => x,
            _ => return None,
        };
    }
    Some(out)
}

/// The element of a broadcast operand of shape `s` read by output position `idx` (of `out`).
fn bidx(s: &[usize], out: &[usize], mut idx: usize) -> usize {
    let mut k = 0;
    let mut stride = 1;
    for i in (0..out.len()).rev() {
        let c = idx % out[i];
        idx /= out[i];
        if i + s.len() >= out.len() {
            let d = s[i + s.len() - out.len()];
            if d != 1 {
                k += c * stride;
            }
            stride *= d;
        }
    }
    k
}

impl Importer<'_> {
    /// The symbolic value of `x`: tracked, or a known small integer (or bool) tensor.
    pub(crate) fn symval(&self, x: NodeId) -> Option<SymVal> {
        if let Some(s) = self.symvals.get(&x) {
            return Some(s.clone());
        }
        let t = self.known.get(&x)?;
        let dt = t.dtype();
        if !(dt.is_int() || dt == DType::Bool) || t.numel() > MAX_SYM_ELEMS {
            return None;
        }
        Some(SymVal { shape: t.shape.clone(), v: t.to_i64_vec().into_iter().map(Poly::constant).collect() })
    }

    /// Computes the symbolic value of a node's first output from its inputs' (see the module
    /// docs); a value of numbers becomes a constant bound to the output name.
    pub(crate) fn sym_fold(&mut self, node: &NodeProto, ins: &[Option<NodeId>], origin: Origin) {
        let Some(name) = node.output.first().filter(|n| !n.is_empty()) else { return };
        let Some(out) = self.lookup(name) else { return };
        if self.known.contains_key(&out) || self.symvals.contains_key(&out) {
            return;
        }
        if !ins.iter().flatten().any(|i| self.symvals.contains_key(i)) {
            return;
        }
        let ty = self.g.ty(out).clone();
        let Some(out_shape) = ty.shape.as_static() else { return };
        let op = node.op_type.as_deref().unwrap_or("");
        let get = |k: usize| ins.get(k).copied().flatten().and_then(|i| self.symval(i));
        let int_attr =
            |n: &str| node.attribute.iter().find(|a| a.name.as_deref() == Some(n)).and_then(|a| a.i).unwrap_or(0);
        let same = |v: SymVal| -> Option<SymVal> {
            (v.v.len() == out_shape.iter().product::<usize>()).then(|| SymVal { shape: out_shape.clone(), v: v.v })
        };
        let r: Option<SymVal> = match op {
            "Identity" | "Unsqueeze" | "Squeeze" | "Reshape" | "Flatten" => get(0).and_then(same),
            "Cast" if ty.dtype.is_int() => get(0).and_then(same),
            "Gather" if int_attr("axis") == 0 => (|| {
                let d = get(0)?;
                let idx = get(1)?.consts()?;
                let n = *d.shape.first()? as i64;
                let v = idx
                    .iter()
                    .map(|&i| {
                        let i = if i < 0 { i + n } else { i };
                        (0..n).contains(&i).then(|| d.v[i as usize].clone())
                    })
                    .collect::<Option<Vec<_>>>()?;
                (d.shape.len() == 1).then_some(())?;
                same(SymVal { shape: vec![], v })
            })(),
            "Concat" => (|| {
                let mut v = Vec::new();
                for k in 0..ins.len() {
                    let s = get(k)?;
                    (s.shape.len() == 1).then_some(())?;
                    v.extend(s.v);
                }
                same(SymVal { shape: vec![], v })
            })(),
            "Slice" => (|| {
                let d = get(0)?;
                (d.shape.len() == 1).then_some(())?;
                let one = |k: usize| get(k).and_then(|s| s.consts()).and_then(|c| (c.len() == 1).then(|| c[0]));
                let (start, end) = (one(1)?, one(2)?);
                let step = if ins.get(4).copied().flatten().is_some() { one(4)? } else { 1 };
                if ins.get(3).copied().flatten().is_some() && !matches!(one(3)?, 0 | -1) {
                    return None;
                }
                if step == 0 {
                    return None;
                }
                let sd = sinter_core::trace::slice_dim(d.shape[0], start, end, step);
                let v = (0..sd.len).map(|i| d.v[(sd.start as i64 + i as i64 * sd.step) as usize].clone()).collect();
                same(SymVal { shape: vec![], v })
            })(),
            "Add" | "Sub" | "Mul" | "Div" | "Equal" | "Max" | "Min" | "Mod" => (|| {
                let (a, b) = (get(0)?, get(1)?);
                let s = bshape(&a.shape, &b.shape)?;
                let n: usize = s.iter().product();
                let dt = self.g.ty(ins.first().copied().flatten()?).dtype;
                let v = (0..n)
                    .map(|i| sym_bin(op, &a.v[bidx(&a.shape, &s, i)], &b.v[bidx(&b.shape, &s, i)], dt))
                    .collect::<Option<Vec<_>>>()?;
                same(SymVal { shape: vec![], v })
            })(),
            "Where" => (|| {
                let (c, a, b) = (get(0)?, get(1)?, get(2)?);
                let cv = c.consts()?;
                let s = bshape(&bshape(&c.shape, &a.shape)?, &b.shape)?;
                let n: usize = s.iter().product();
                let v = (0..n)
                    .map(|i| {
                        if cv[bidx(&c.shape, &s, i)] != 0 {
                            a.v[bidx(&a.shape, &s, i)].clone()
                        } else {
                            b.v[bidx(&b.shape, &s, i)].clone()
                        }
                    })
                    .collect();
                same(SymVal { shape: vec![], v })
            })(),
            _ => None,
        };
        let Some(r) = r else { return };
        match r.consts() {
            Some(c) if ty.dtype.is_int() || ty.dtype == DType::Bool => {
                let t = HostTensor::from_i64(ty.dtype, r.shape.clone(), &c);
                let id = self.constant(Arc::new(t), origin);
                self.scopes.last_mut().expect("a scope").insert(name.clone(), id);
            }
            _ => {
                self.symvals.insert(out, r);
            }
        }
    }
}

impl Cx<'_, '_> {
    /// The value of `x` as polynomials: a known integer value or a tracked symbolic one.
    pub fn sym_ints(&self, x: NodeId) -> R<Vec<Poly>> {
        if let Some(s) = self.imp.symvals.get(&x) {
            return Ok(s.v.clone());
        }
        Ok(self.ints(x)?.into_iter().map(Poly::constant).collect())
    }

    /// Extents from a (possibly symbolic) shape value: each a non-negative number or an
    /// expression of the symbols.
    pub fn dims_from_value(&self, v: &[Poly]) -> R<Vec<Dim>> {
        v.iter().map(|p| p.to_dim().ok_or_else(|| self.err(format!("negative extent {p} in a shape value")))).collect()
    }

    /// A rank-1 `[1]` i64 tensor holding the extent `d` at run time (a constant when static, else
    /// the sum of `d` ones, which specialization folds).
    pub fn dim_value(&mut self, d: &Dim) -> R<NodeId> {
        if let Some(n) = d.as_static() {
            return Ok(self.konst(HostTensor::from_i64(DType::I64, vec![1], &[n as i64])));
        }
        let one = self.scalar(DType::I64, 1.0);
        let ones = self.add(Op::Expand(Shape(vec![d.clone()])), vec![one])?;
        self.reduce(ReduceOp::Sum, ones, &[0], true)
    }

    /// `Shape(x)[start..end]` for a tensor with symbolic dims: the extents computed at run time,
    /// with the symbolic value tracked (see the module docs).
    pub fn shape_value(&mut self, dims: &[Dim]) -> R<NodeId> {
        let mut parts = Vec::with_capacity(dims.len());
        for d in dims {
            parts.push(self.dim_value(d)?);
        }
        let y = self.concat(parts, 0)?;
        let v = dims.iter().map(Poly::of_dim).collect();
        self.imp.symvals.insert(y, SymVal { shape: vec![dims.len()], v });
        Ok(y)
    }

    /// `0..d` as a rank-1 i64 tensor for a possibly symbolic extent: a constant when static, else
    /// a prefix sum of ones by log-step shifted adds (exact below 2^31 elements; specialization
    /// folds it to a constant).
    pub fn iota_dim(&mut self, d: &Dim) -> R<NodeId> {
        if let Some(n) = d.as_static() {
            return self.iota(n, DType::I64);
        }
        let one = self.scalar(DType::I64, 1.0);
        let mut acc = self.add(Op::Expand(Shape(vec![d.clone()])), vec![one])?;
        for k in 0..31 {
            let s = 1i64 << k;
            let shifted =
                self.add(Op::Pad { pads: vec![(s, -s)], mode: sinter_core::ir::PadMode::Constant(0.0) }, vec![acc])?;
            acc = self.bin(B::Add, acc, shifted)?;
        }
        self.bin_s(B::Sub, acc, 1.0)
    }

    /// Reshapes to (possibly symbolic) dims (no-op when equal).
    pub fn reshape_dims(&mut self, x: NodeId, dims: Vec<Dim>) -> R<NodeId> {
        if self.ty(x).shape.0 == dims {
            return Ok(x);
        }
        self.add(Op::Reshape(Shape(dims)), vec![x])
    }

    /// Broadcasts to (possibly symbolic) dims (no-op when equal).
    pub fn expand_dims(&mut self, x: NodeId, dims: Vec<Dim>) -> R<NodeId> {
        if self.ty(x).shape.0 == dims {
            return Ok(x);
        }
        self.add(Op::Expand(Shape(dims)), vec![x])
    }

    /// The dims of `x` where only axis 0 (the batch) may be symbolic: the batch and the other
    /// extents, or the usual "needs static shapes" error.
    pub fn batch_shape(&self, x: NodeId) -> R<(Dim, Vec<usize>)> {
        let d = self.dims(x);
        let rest: Option<Vec<usize>> = d.iter().skip(1).map(Dim::as_static).collect();
        match (d.first(), rest) {
            (Some(b), Some(rest)) => Ok((b.clone(), rest)),
            _ => self.shape(x).map(|s| (Dim::Static(s[0]), s[1..].to_vec())),
        }
    }

    /// Python-style slice `start:end` (step 1) of one axis for bounds that may be symbolic: a
    /// `Gather` of `start + iota(end - start)`. Symbolic bounds are taken as given (inside the
    /// axis), which is how exporters emit them (`pos[:seq]`, `x[:, :n]`).
    pub fn slice_sym(&mut self, x: NodeId, axis: usize, start: &Poly, end: &Poly) -> R<NodeId> {
        let len = end
            .sub(start)
            .and_then(|l| l.to_dim())
            .ok_or_else(|| self.err(format!("slice {start}..{end} has a negative length")))?;
        let io = self.iota_dim(&len)?;
        let idx = match start.as_const() {
            Some(0) => io,
            Some(c) => self.bin_s(B::Add, io, c as f64)?,
            None => {
                let sd = start.to_dim().ok_or_else(|| self.err(format!("negative slice start {start}")))?;
                let s = self.dim_value(&sd)?;
                self.bin(B::Add, io, s)?
            }
        };
        self.add(Op::Gather { axis }, vec![x, idx])
    }
}
