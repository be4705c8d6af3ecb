//! The lowering context of one ONNX node ([`Cx`]): its inputs, typed attribute accessors (an
//! attribute of the wrong type is an error naming the node), values known at import time, and
//! the builders that add IR nodes with the node's origin.

use super::{Importer, MAX_CONST_ELEMS, MAX_GRAPH_NODES, R, check_names, check_op, needed_values, topo_order};
use crate::error::OnnxError;
use crate::proto::attribute_proto::AttributeType;
use crate::proto::{AttributeProto, GraphProto, NodeProto, TensorProto};
use crate::tensor::{decode_tensor, dtype_from_code};
use sinter_core::ir::{BinaryOp, Origin, ReduceOp, SliceDim, UnaryOp};
use sinter_core::{DType, Dim, HostTensor, NodeId, Op, Shape, TensorType};
use std::collections::HashMap;
use std::sync::Arc;

/// The lowering context of one ONNX node: its inputs, attributes and opset, and helpers that
/// add IR nodes with this node's origin and turn failures into errors naming it.
pub(crate) struct Cx<'a, 'm> {
    pub imp: &'a mut Importer<'m>,
    pub node: &'a NodeProto,
    /// Inputs (`None` for omitted optional inputs).
    pub ins: Vec<Option<NodeId>>,
    /// The op type.
    pub op: &'a str,
    /// The domain (`""` for `ai.onnx`).
    pub domain: &'a str,
    /// The opset version of the node's domain.
    pub opset: i64,
    pub desc: String,
    pub origin: Origin,
    /// Number of outputs the node lists (some may be empty names).
    pub nout: usize,
    /// The first attribute found with the wrong type ([`Cx::attr_of`]).
    pub bad_attr: std::cell::RefCell<Option<OnnxError>>,
}

/// The type of an attribute: its declared `type`, or (old models leave it unset) the one value
/// field that is set. `None` when neither says (an empty list without a type).
fn attr_type(a: &AttributeProto) -> Option<AttributeType> {
    if let Some(t) = a.r#type.and_then(|t| AttributeType::try_from(t).ok())
        && t != AttributeType::Undefined
    {
        return Some(t);
    }
    let set = [
        (a.i.is_some(), AttributeType::Int),
        (a.f.is_some(), AttributeType::Float),
        (a.s.is_some(), AttributeType::String),
        (a.t.is_some(), AttributeType::Tensor),
        (a.g.is_some(), AttributeType::Graph),
        (!a.ints.is_empty(), AttributeType::Ints),
        (!a.floats.is_empty(), AttributeType::Floats),
        (!a.strings.is_empty(), AttributeType::Strings),
        (!a.tensors.is_empty(), AttributeType::Tensors),
        (!a.graphs.is_empty(), AttributeType::Graphs),
    ];
    set.iter().find(|(on, _)| *on).map(|(_, t)| *t)
}

impl Cx<'_, '_> {
    // ---- errors ----

    /// An error naming this node.
    pub fn err(&self, msg: impl Into<String>) -> OnnxError {
        OnnxError::Node { node: self.desc.clone(), op: self.op.to_string(), msg: msg.into() }
    }

    /// An "unsupported" error naming this node.
    pub fn unsup(&self, detail: impl Into<String>) -> OnnxError {
        OnnxError::Unsupported { node: self.desc.clone(), op: self.op.to_string(), detail: detail.into() }
    }

    // ---- inputs and outputs ----

    /// Input `i`, which must be present.
    pub fn inp(&self, i: usize) -> R<NodeId> {
        self.ins
            .get(i)
            .copied()
            .flatten()
            .ok_or_else(|| self.err(format!("input {i} is required but the node has {} input(s)", self.ins.len())))
    }

    /// Optional input `i`.
    pub fn opt(&self, i: usize) -> Option<NodeId> {
        self.ins.get(i).copied().flatten()
    }

    /// Checks the number of inputs given.
    pub fn arity(&self, min: usize, max: usize) -> R<()> {
        let n = self.ins.len();
        if n < min || n > max {
            return Err(self.err(format!("takes {min} to {max} inputs, got {n}")));
        }
        for i in 0..min {
            self.inp(i)?;
        }
        Ok(())
    }

    /// True when output `k` is requested (listed with a non-empty name).
    pub fn wants(&self, k: usize) -> bool {
        self.node.output.get(k).is_some_and(|s| !s.is_empty())
    }

    // ---- attributes ----

    /// The attribute named `name`, whatever its type (the typed accessors below check types).
    pub fn attr(&self, name: &str) -> Option<&AttributeProto> {
        self.node.attribute.iter().find(|a| a.name.as_deref() == Some(name))
    }

    /// The attribute named `name` when it has type `want`. An attribute of another type is
    /// recorded as this node's error (returned by the importer once the op is lowered, whatever
    /// the lowering did with the `None`), so every op refuses e.g. a FLOAT `axis` instead of
    /// silently using the default.
    pub fn attr_of(&self, name: &str, want: AttributeType) -> Option<&AttributeProto> {
        let a = self.attr(name)?;
        match attr_type(a) {
            Some(t) if t != want => {
                let mut bad = self.bad_attr.borrow_mut();
                if bad.is_none() {
                    *bad = Some(self.err(format!(
                        "attribute {name:?} must be of type {} but is {}",
                        want.as_str_name(),
                        t.as_str_name()
                    )));
                }
                None
            }
            _ => Some(a),
        }
    }

    /// The error recorded by [`Cx::attr_of`] for an attribute of the wrong type, if any.
    pub fn take_attr_error(&self) -> Option<OnnxError> {
        self.bad_attr.borrow_mut().take()
    }

    /// An int attribute.
    pub fn ai(&self, name: &str, default: i64) -> i64 {
        self.ai_opt(name).unwrap_or(default)
    }

    /// An optional int attribute.
    pub fn ai_opt(&self, name: &str) -> Option<i64> {
        self.attr_of(name, AttributeType::Int).and_then(|a| a.i)
    }

    /// A float attribute.
    pub fn af(&self, name: &str, default: f32) -> f32 {
        self.af_opt(name).unwrap_or(default)
    }

    /// An optional float attribute.
    pub fn af_opt(&self, name: &str) -> Option<f32> {
        self.attr_of(name, AttributeType::Float).and_then(|a| a.f)
    }

    /// A string attribute (lossy UTF-8).
    pub fn as_str(&self, name: &str, default: &str) -> String {
        self.attr_of(name, AttributeType::String)
            .and_then(|a| a.s.as_ref())
            .map(|s| String::from_utf8_lossy(s).into_owned())
            .unwrap_or_else(|| default.to_string())
    }

    /// A strings attribute (lossy UTF-8).
    pub fn astrings(&self, name: &str) -> Option<Vec<String>> {
        self.attr_of(name, AttributeType::Strings)
            .map(|a| a.strings.iter().map(|s| String::from_utf8_lossy(s).into_owned()).collect())
    }

    /// An ints attribute.
    pub fn aints(&self, name: &str) -> Option<Vec<i64>> {
        self.attr_of(name, AttributeType::Ints).map(|a| a.ints.clone())
    }

    /// A floats attribute.
    pub fn afloats(&self, name: &str) -> Option<Vec<f32>> {
        self.attr_of(name, AttributeType::Floats).map(|a| a.floats.clone())
    }

    /// A graph attribute (If branches, Loop and Scan bodies, FlexAttention modifiers).
    pub fn agraph(&self, name: &str) -> Option<GraphProto> {
        self.attr_of(name, AttributeType::Graph).and_then(|a| a.g.clone())
    }

    /// A tensor attribute, decoded.
    pub fn atensor(&self, name: &str) -> R<Option<HostTensor>> {
        match self.attr_of(name, AttributeType::Tensor).and_then(|a| a.t.as_ref()) {
            None => Ok(None),
            Some(t) => self.decode(t).map(Some),
        }
    }

    /// Decodes a tensor found in this node (dtype problems become errors naming the node).
    pub fn decode(&self, t: &TensorProto) -> R<HostTensor> {
        decode_tensor(t, self.imp.model.dir.as_deref()).map_err(|e| match e {
            OnnxError::Unsupported { detail, .. } => self.unsup(detail),
            other => other,
        })
    }

    /// The dtype of an ONNX type-code attribute (e.g. Cast's `to`).
    pub fn dtype_attr(&self, name: &str) -> R<DType> {
        let c = self.ai_opt(name).ok_or_else(|| {
            self.take_attr_error().unwrap_or_else(|| self.err(format!("attribute {name:?} is required")))
        })?;
        dtype_from_code(c as i32).map_err(|t| self.unsup(format!("data type {t} has no sinter equivalent")))
    }

    // ---- types ----

    /// The type of a node.
    pub fn ty(&self, x: NodeId) -> &TensorType {
        self.imp.g.ty(x)
    }

    /// The dtype of a node.
    pub fn dt(&self, x: NodeId) -> DType {
        self.imp.g.ty(x).dtype
    }

    /// The rank of a node.
    pub fn rank(&self, x: NodeId) -> usize {
        self.imp.g.ty(x).shape.rank()
    }

    /// The static shape of a node, or an error naming the symbolic dims.
    pub fn shape(&self, x: NodeId) -> R<Vec<usize>> {
        let s = &self.imp.g.ty(x).shape;
        s.as_static().ok_or_else(|| {
            self.unsup(format!(
                "needs static shapes, got {s} (specialize the model with graph_for or graph_for_inputs)"
            ))
        })
    }

    /// The (possibly symbolic) shape of a node.
    pub fn sym_shape(&self, x: NodeId) -> Shape {
        self.imp.g.ty(x).shape.clone()
    }

    /// Normalizes a possibly negative axis against a rank.
    pub fn axis(&self, a: i64, rank: usize) -> R<usize> {
        sinter_core::shape::norm_axis(a, rank).ok_or_else(|| self.err(format!("axis {a} out of range for rank {rank}")))
    }

    // ---- known values ----

    /// The value of `x`, which must be known at import time.
    pub fn val(&self, x: NodeId) -> R<Arc<HostTensor>> {
        self.imp.known.get(&x).cloned().ok_or_else(|| {
            self.unsup(
                "an input that fixes the output shape must be known at import time (a constant, an initializer, \
                 or a run-time input given to graph_for_inputs)",
            )
        })
    }

    /// The known value of `x`, if any.
    pub fn known(&self, x: NodeId) -> Option<Arc<HostTensor>> {
        self.imp.known.get(&x).cloned()
    }

    /// The value of `x` as i64s (must be known).
    pub fn ints(&self, x: NodeId) -> R<Vec<i64>> {
        Ok(self.val(x)?.to_i64_vec())
    }

    /// The value of `x` as f64s (must be known).
    pub fn floats(&self, x: NodeId) -> R<Vec<f64>> {
        Ok(self.val(x)?.to_f64_vec())
    }

    /// Optional input `i` as i64s (must be known when present).
    pub fn opt_ints(&self, i: usize) -> R<Option<Vec<i64>>> {
        match self.opt(i) {
            Some(x) => self.ints(x).map(Some),
            None => Ok(None),
        }
    }

    // ---- building ----

    /// Adds an IR node with this node's origin. The graph's size is capped ([`MAX_GRAPH_NODES`])
    /// and the new value's inferred size is checked against the host-memory budget
    /// (`sinter_core::budget`), so absurd shapes fail here, at import, naming the node.
    pub fn add(&mut self, op: Op, ins: Vec<NodeId>) -> R<NodeId> {
        check_op(&op).map_err(|m| self.err(m))?;
        self.check_graph_size()?;
        let origin = self.origin.clone();
        let id = self.imp.g.add(op, ins, Some(origin)).map_err(|e| self.err(e.to_string()))?;
        let ty = self.imp.g.ty(id);
        if let Some(dims) = ty.shape.as_static() {
            let bytes = sinter_core::budget::bytes_of(sinter_core::budget::elems(&dims), ty.dtype.size_bytes() as u64);
            let what = || format!("{} ({}): its {} result {}", self.desc, self.op, self.imp.g.node(id).op.name(), ty);
            sinter_core::budget::check(bytes, what)?;
        }
        Ok(id)
    }

    /// Errs once the imported graph holds [`MAX_GRAPH_NODES`] IR nodes (unrolled Loops and
    /// Scans, nested ones above all, are what gets there).
    pub fn check_graph_size(&self) -> R<()> {
        if self.imp.g.nodes.len() >= MAX_GRAPH_NODES {
            return Err(self.unsup(format!(
                "the imported graph reached {MAX_GRAPH_NODES} IR nodes (Loop and Scan bodies are unrolled; nested \
                 loops multiply their trip counts)"
            )));
        }
        Ok(())
    }

    /// A constant.
    pub fn konst(&mut self, t: HostTensor) -> NodeId {
        let origin = self.origin.clone();
        self.imp.constant(Arc::new(t), origin)
    }

    /// A rank-0 constant.
    pub fn scalar(&mut self, dt: DType, x: f64) -> NodeId {
        self.konst(HostTensor::scalar(dt, x))
    }

    /// Elementwise unary op.
    pub fn un(&mut self, u: UnaryOp, x: NodeId) -> R<NodeId> {
        self.add(Op::Unary(u), vec![x])
    }

    /// Elementwise binary op.
    pub fn bin(&mut self, b: BinaryOp, x: NodeId, y: NodeId) -> R<NodeId> {
        self.add(Op::Binary(b), vec![x, y])
    }

    /// Binary op with a scalar of `x`'s dtype on the right.
    pub fn bin_s(&mut self, b: BinaryOp, x: NodeId, s: f64) -> R<NodeId> {
        let c = self.scalar(self.dt(x), s);
        self.bin(b, x, c)
    }

    /// Binary op with a scalar of `x`'s dtype on the left.
    pub fn s_bin(&mut self, b: BinaryOp, s: f64, x: NodeId) -> R<NodeId> {
        let c = self.scalar(self.dt(x), s);
        self.bin(b, c, x)
    }

    /// `where(c, a, b)`.
    pub fn select(&mut self, c: NodeId, a: NodeId, b: NodeId) -> R<NodeId> {
        self.add(Op::Where, vec![c, a, b])
    }

    /// Casts (no-op when the dtype already matches).
    pub fn cast(&mut self, x: NodeId, d: DType) -> R<NodeId> {
        if self.dt(x) == d { Ok(x) } else { self.add(Op::Cast(d), vec![x]) }
    }

    /// ONNX's cast to `d` with its `saturate` flag. The IR's cast to fp8 overflows (to NaN for
    /// e4m3fn, infinity for e5m2: `sinter_core::fp8`), which is `saturate=0`; `saturate=1` (ONNX's
    /// default) clamps to `[-max, max]` first, which maps every larger value and the infinities to
    /// ±max and leaves NaN and every other value's rounding as they were. The clamp is emitted only
    /// where `x`'s dtype can exceed the bound. Other targets ignore the flag (as ONNX does).
    pub fn cast_saturating(&mut self, x: NodeId, d: DType, saturate: bool) -> R<NodeId> {
        let from = self.dt(x);
        let (Some(m), true, false) = (sinter_core::fp8::max_finite(d), saturate, from == d) else {
            return self.cast(x, d);
        };
        // The largest magnitudes `from` holds (infinite for floats with infinities).
        let (lo, hi) = match from {
            DType::Bool => (0.0, 1.0),
            f if f.is_float() => {
                let r = sinter_core::fp8::max_finite(f).unwrap_or(f64::INFINITY);
                let r = if f == DType::F8E5M2 { f64::INFINITY } else { r };
                (-r, r)
            }
            i => {
                let bits = i.size_bytes() as i32 * 8;
                if i.is_signed_int() { (-(2f64.powi(bits - 1)), 2f64.powi(bits - 1)) } else { (0.0, 2f64.powi(bits)) }
            }
        };
        let x = if hi > m { self.bin_s(BinaryOp::Min, x, m)? } else { x };
        let x = if lo < -m { self.bin_s(BinaryOp::Max, x, -m)? } else { x };
        self.cast(x, d)
    }

    /// Reshapes to static dims (no-op when equal).
    pub fn reshape(&mut self, x: NodeId, dims: &[usize]) -> R<NodeId> {
        if self.ty(x).shape == Shape::new(dims) {
            return Ok(x);
        }
        self.add(Op::Reshape(Shape::new(dims)), vec![x])
    }

    /// Permutes axes (no-op for the identity).
    pub fn permute(&mut self, x: NodeId, perm: &[usize]) -> R<NodeId> {
        if perm.iter().enumerate().all(|(i, &p)| i == p) {
            return Ok(x);
        }
        self.add(Op::Permute(perm.to_vec()), vec![x])
    }

    /// Broadcasts to static dims (no-op when equal).
    pub fn expand(&mut self, x: NodeId, dims: &[usize]) -> R<NodeId> {
        if self.ty(x).shape == Shape::new(dims) {
            return Ok(x);
        }
        self.add(Op::Expand(Shape::new(dims)), vec![x])
    }

    /// Python-style slice `start:end:step` of one axis (other axes whole).
    pub fn slice(&mut self, x: NodeId, axis: usize, start: i64, end: i64, step: i64) -> R<NodeId> {
        let s = self.shape(x)?;
        let dims: Vec<SliceDim> = s
            .iter()
            .enumerate()
            .map(|(i, &n)| {
                if i == axis {
                    sinter_core::trace::slice_dim(n, start, end, step)
                } else {
                    SliceDim { start: 0, step: 1, len: n }
                }
            })
            .collect();
        if dims.iter().zip(&s).all(|(d, &n)| d.start == 0 && d.step == 1 && d.len == n) {
            return Ok(x);
        }
        self.add(Op::Slice(dims), vec![x])
    }

    /// Concatenation along an axis.
    pub fn concat(&mut self, xs: Vec<NodeId>, axis: usize) -> R<NodeId> {
        if xs.len() == 1 {
            return Ok(xs[0]);
        }
        self.add(Op::Concat { axis }, xs)
    }

    /// Reduction (axes sorted and deduplicated here).
    pub fn reduce(&mut self, op: ReduceOp, x: NodeId, axes: &[usize], keepdim: bool) -> R<NodeId> {
        let mut a = axes.to_vec();
        a.sort_unstable();
        a.dedup();
        self.add(Op::Reduce { op, axes: a, keepdim }, vec![x])
    }

    /// Matrix product.
    pub fn matmul(&mut self, a: NodeId, b: NodeId) -> R<NodeId> {
        self.add(Op::MatMul, vec![a, b])
    }

    /// Checks that a constant of `n` elements built from shapes or attributes stays within
    /// [`MAX_CONST_ELEMS`] (untrusted models must not make the importer allocate absurdly).
    pub fn guard(&self, n: usize) -> R<()> {
        if n > MAX_CONST_ELEMS {
            return Err(self.unsup(format!("an import-time constant of {n} elements (limit {MAX_CONST_ELEMS})")));
        }
        Ok(())
    }

    /// `0..n` as a rank-1 constant of `dt`.
    pub fn iota(&mut self, n: usize, dt: DType) -> R<NodeId> {
        self.guard(n)?;
        let v: Vec<i64> = (0..n as i64).collect();
        Ok(self.konst(HostTensor::from_i64(dt, vec![n], &v)))
    }

    /// Zeros of a static shape (a broadcast scalar, nothing allocated).
    pub fn zeros(&mut self, dt: DType, dims: &[usize]) -> R<NodeId> {
        let z = self.scalar(dt, 0.0);
        self.add(Op::Expand(Shape::new(dims)), vec![z])
    }

    /// Moves axis `a` to the last position; returns the new node and the permutation used.
    pub fn axis_last(&mut self, x: NodeId, a: usize) -> R<(NodeId, Vec<usize>)> {
        let r = self.rank(x);
        let mut perm: Vec<usize> = (0..r).filter(|&i| i != a).collect();
        perm.push(a);
        Ok((self.permute(x, &perm)?, perm))
    }

    /// Inverts a permutation.
    pub fn inverse_perm(perm: &[usize]) -> Vec<usize> {
        let mut inv = vec![0; perm.len()];
        for (i, &p) in perm.iter().enumerate() {
            inv[p] = i;
        }
        inv
    }

    /// Lowers a subgraph (If/Loop/Scan bodies) inline: binds `inputs` to its formal inputs in a
    /// fresh scope that sees the enclosing ones, and returns its outputs.
    pub fn inline_graph(&mut self, g: &GraphProto, inputs: &[NodeId]) -> R<Vec<NodeId>> {
        if g.input.len() != inputs.len() {
            return Err(self.err(format!("subgraph takes {} inputs, given {}", g.input.len(), inputs.len())));
        }
        check_names(g).map_err(|e| self.err(format!("in a subgraph: {e}")))?;
        self.check_graph_size()?;
        let mut scope = HashMap::new();
        for (vi, &x) in g.input.iter().zip(inputs) {
            scope.insert(vi.name.clone().unwrap_or_default(), x);
        }
        for t in &g.initializer {
            let v = self.decode(t)?;
            let c = self.konst(v);
            scope.insert(t.name.clone().unwrap_or_default(), c);
        }
        self.imp.scopes.push(scope);
        let opsets = self.imp.model.opsets.clone();
        // Values the subgraph's own ops need at import time (names are graph-unique).
        if let Ok(order) = topo_order(&g.node) {
            let inner = needed_values(&g.node, &order, &opsets);
            self.imp.needed.extend(inner);
        }
        let r = (|| {
            let order = topo_order(&g.node)?;
            self.imp.run_nodes(&g.node, &order, &opsets)?;
            let mut outs = Vec::new();
            for o in &g.output {
                let name = o.name.clone().unwrap_or_default();
                outs.push(
                    self.imp
                        .lookup(&name)
                        .ok_or_else(|| self.err(format!("subgraph output {name:?} is not defined")))?,
                );
            }
            Ok(outs)
        })();
        self.imp.scopes.pop();
        r
    }

    /// Static dims with a symbolic check, as `Dim`s (for reshapes that keep symbols).
    pub fn dims(&self, x: NodeId) -> Vec<Dim> {
        self.imp.g.ty(x).shape.0.clone()
    }
}
