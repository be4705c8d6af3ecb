//! The tracing API: a [`Graph`] builder and lazy [`Tensor`] handles. Every op records a node;
//! nothing is computed. Errors (shape mismatch, bad axis, dtype clash) do not panic: the first one
//! is recorded in the graph, later ops on a failed tensor are skipped, and [`Graph::build`]
//! returns it.
//!
//! ```
//! use sinter_core::prelude::*;
//! let g = Graph::new();
//! let x = g.input("x", DType::F32, [8, 16]);
//! let b = g.input("b", DType::F32, [16]);
//! let y = (&x + &b).relu() * 2.0;
//! g.output(&y);
//! let ir = g.build().unwrap();
//! assert_eq!(ir.nodes.len(), 6);
//! ```

use crate::dtype::DType;
use crate::error::Error;
use crate::ir::{
    self, ArgOp, BinaryOp, NodeId, Op, PadMode, PoolKind, ReduceOp, SliceDim, TensorType, UnaryOp, Window2d,
};
use crate::shape::{Dim, Shape, norm_axis};
use crate::tensor::HostTensor;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

#[derive(Debug, Default)]
struct State {
    g: ir::Graph,
    error: Option<Error>,
}

/// A graph under construction. Cheap to clone (a shared handle).
#[derive(Clone, Debug, Default)]
pub struct Graph {
    st: Rc<RefCell<State>>,
}

/// A lazy tensor: a handle to a node of a [`Graph`].
#[derive(Clone, Debug)]
pub struct Tensor {
    st: Rc<RefCell<State>>,
    /// `None` once an error was recorded for this value.
    id: Option<NodeId>,
}

impl Graph {
    /// An empty graph.
    pub fn new() -> Graph {
        Graph::default()
    }

    fn tensor(&self, id: Option<NodeId>) -> Tensor {
        Tensor { st: self.st.clone(), id }
    }

    /// Declares an input. Dims may be static (`usize`) or symbolic ([`Dim::sym`]).
    pub fn input(&self, name: &str, dtype: DType, shape: impl Into<Shape>) -> Tensor {
        let shape = shape.into();
        let mut st = self.st.borrow_mut();
        let dup = st.g.input_names().contains(&name);
        if dup {
            let e = Error::Input(format!("input name {name:?} declared twice"));
            st.error.get_or_insert(e);
            drop(st);
            return self.tensor(None);
        }
        let id = st.g.add_input(name, dtype, shape);
        drop(st);
        self.tensor(Some(id))
    }

    /// A constant tensor.
    pub fn constant(&self, t: HostTensor) -> Tensor {
        let r = self.st.borrow_mut().g.add(Op::Constant(Arc::new(t)), vec![], None);
        self.record(r)
    }

    /// A rank-0 constant of `dtype`.
    pub fn scalar(&self, dtype: DType, x: f64) -> Tensor {
        self.constant(HostTensor::scalar(dtype, x))
    }

    fn record(&self, r: Result<NodeId, Error>) -> Tensor {
        match r {
            Ok(id) => self.tensor(Some(id)),
            Err(e) => {
                self.st.borrow_mut().error.get_or_insert(e);
                self.tensor(None)
            }
        }
    }

    /// Marks `t` as an output named `output{i}`.
    pub fn output(&self, t: &Tensor) {
        let n = self.st.borrow().g.outputs.len();
        self.output_named(&format!("output{n}"), t);
    }

    /// Marks `t` as an output with a name.
    pub fn output_named(&self, name: &str, t: &Tensor) {
        if let Some(id) = t.id {
            self.st.borrow_mut().g.add_output(name, id);
        }
    }

    /// Concatenates tensors along an axis.
    pub fn concat(&self, ts: &[&Tensor], axis: i64) -> Tensor {
        match ts.first() {
            None => self.record(Err(Error::build("concat", &[], "needs at least one operand"))),
            Some(t0) => {
                let others: Vec<&Tensor> = ts[1..].to_vec();
                match t0.norm_axis("concat", axis) {
                    Some(axis) => t0.apply(Op::Concat { axis }, &others),
                    None => t0.failed(),
                }
            }
        }
    }

    /// The first error recorded, if any.
    pub fn error(&self) -> Option<Error> {
        self.st.borrow().error.clone()
    }

    /// Finishes: the recorded error if there was one, else the verified IR.
    pub fn build(&self) -> Result<ir::Graph, Error> {
        let st = self.st.borrow();
        if let Some(e) = &st.error {
            return Err(e.clone());
        }
        if st.g.outputs.is_empty() {
            return Err(Error::Input("graph has no outputs: call Graph::output".into()));
        }
        crate::verify::verify(&st.g)?;
        Ok(st.g.clone())
    }
}

/// Anything that can be turned into verified IR: the builder or the IR itself.
pub trait AsGraph {
    /// The verified IR.
    fn to_ir(&self) -> Result<std::borrow::Cow<'_, ir::Graph>, Error>;
}

impl AsGraph for Graph {
    fn to_ir(&self) -> Result<std::borrow::Cow<'_, ir::Graph>, Error> {
        self.build().map(std::borrow::Cow::Owned)
    }
}

impl AsGraph for ir::Graph {
    fn to_ir(&self) -> Result<std::borrow::Cow<'_, ir::Graph>, Error> {
        crate::verify::verify(self)?;
        Ok(std::borrow::Cow::Borrowed(self))
    }
}

impl Tensor {
    /// The node id, or `None` if building this value failed.
    pub fn id(&self) -> Option<NodeId> {
        self.id
    }

    /// The type, or `None` if building this value failed.
    pub fn ty(&self) -> Option<TensorType> {
        self.id.map(|i| self.st.borrow().g.ty(i).clone())
    }

    /// The shape (empty if building this value failed).
    pub fn shape(&self) -> Shape {
        self.ty().map(|t| t.shape).unwrap_or_default()
    }

    /// The dtype (`f32` if building this value failed).
    pub fn dtype(&self) -> DType {
        self.ty().map(|t| t.dtype).unwrap_or(DType::F32)
    }

    /// The graph this tensor belongs to.
    pub fn graph(&self) -> Graph {
        Graph { st: self.st.clone() }
    }

    fn failed(&self) -> Tensor {
        Tensor { st: self.st.clone(), id: None }
    }

    fn fail(&self, op: &str, msg: String) -> Tensor {
        let ty = self.ty();
        let tys: Vec<&TensorType> = ty.iter().collect();
        self.st.borrow_mut().error.get_or_insert(Error::build(op, &tys, msg));
        self.failed()
    }

    fn norm_axis(&self, op: &str, axis: i64) -> Option<usize> {
        self.id?;
        let r = self.shape().rank();
        match norm_axis(axis, r) {
            Some(a) => Some(a),
            None => {
                self.fail(op, format!("axis {axis} out of range for rank {r}"));
                None
            }
        }
    }

    /// Records `op` applied to `self` and `others`.
    pub fn apply(&self, op: Op, others: &[&Tensor]) -> Tensor {
        let mut ids = vec![];
        for t in std::iter::once(self).chain(others.iter().copied()) {
            match t.id {
                Some(i) if Rc::ptr_eq(&t.st, &self.st) => ids.push(i),
                Some(_) => return self.fail(op.name(), "operands belong to different graphs".into()),
                None => return self.failed(),
            }
        }
        let r = self.st.borrow_mut().g.add(op, ids, None);
        self.graph().record(r)
    }

    fn scalar_like(&self, x: f64) -> Tensor {
        self.graph().scalar(self.dtype(), x)
    }

    /// Elementwise unary op.
    pub fn unary(&self, u: UnaryOp) -> Tensor {
        self.apply(Op::Unary(u), &[])
    }

    /// Elementwise binary op with broadcasting.
    pub fn binary(&self, b: BinaryOp, other: &Tensor) -> Tensor {
        self.apply(Op::Binary(b), &[other])
    }

    /// Elementwise binary op with a scalar of this tensor's dtype.
    pub fn binary_scalar(&self, b: BinaryOp, x: f64) -> Tensor {
        if self.id.is_none() {
            return self.failed();
        }
        self.binary(b, &self.scalar_like(x))
    }
}

macro_rules! unary_methods {
    ($($(#[$m:meta])* $name:ident => $op:ident),* $(,)?) => {
        impl Tensor { $($(#[$m])* pub fn $name(&self) -> Tensor { self.unary(UnaryOp::$op) })* }
    };
}
unary_methods! {
    /// -x
    neg => Neg, /// |x|
    abs => Abs, /// e^x
    exp => Exp, /// ln x
    log => Log, /// sqrt x
    sqrt => Sqrt, /// 1/sqrt x
    rsqrt => Rsqrt, /// sin x
    sin => Sin, /// cos x
    cos => Cos, /// tan x
    tan => Tan, /// tanh x
    tanh => Tanh, /// 1/(1+e^-x)
    sigmoid => Sigmoid, /// erf x
    erf => Erf, /// max(x, 0)
    relu => Relu, /// floor
    floor => Floor, /// ceil
    ceil => Ceil, /// round half to even
    round => Round, /// sign
    sign => Sign, /// 1/x
    reciprocal => Reciprocal, /// logical not
    not => Not,
}

macro_rules! binary_methods {
    ($($(#[$m:meta])* $name:ident => $op:ident),* $(,)?) => {
        impl Tensor { $($(#[$m])* pub fn $name(&self, other: &Tensor) -> Tensor { self.binary(BinaryOp::$op, other) })* }
    };
}
binary_methods! {
    /// x ** y
    pow => Pow, /// elementwise max
    maximum => Max, /// elementwise min
    minimum => Min, /// floored modulo
    rem => Mod, /// x == y
    eq => Eq, /// x != y
    ne => Ne, /// x < y
    lt => Lt, /// x <= y
    le => Le, /// x > y
    gt => Gt, /// x >= y
    ge => Ge, /// logical and
    and => And, /// logical or
    or => Or, /// logical xor
    xor => Xor,
}

impl Tensor {
    /// `where(self, a, b)`: self is the bool condition.
    pub fn where_(&self, a: &Tensor, b: &Tensor) -> Tensor {
        self.apply(Op::Where, &[a, b])
    }

    /// Elementwise cast.
    pub fn cast(&self, to: DType) -> Tensor {
        self.apply(Op::Cast(to), &[])
    }

    /// clamp(x, lo, hi) with scalar bounds.
    pub fn clamp(&self, lo: f64, hi: f64) -> Tensor {
        self.binary_scalar(BinaryOp::Max, lo).binary_scalar(BinaryOp::Min, hi)
    }

    fn axes(&self, op: &str, axes: &[i64]) -> Option<Vec<usize>> {
        let mut v = Vec::new();
        for &a in axes {
            v.push(self.norm_axis(op, a)?);
        }
        v.sort();
        v.dedup();
        Some(v)
    }

    /// Reduction over axes (negative axes count from the end).
    pub fn reduce(&self, op: ReduceOp, axes: &[i64], keepdim: bool) -> Tensor {
        match self.axes(op.name(), axes) {
            Some(axes) => self.apply(Op::Reduce { op, axes, keepdim }, &[]),
            None => self.failed(),
        }
    }

    /// Sum over axes.
    pub fn sum(&self, axes: &[i64], keepdim: bool) -> Tensor {
        self.reduce(ReduceOp::Sum, axes, keepdim)
    }

    /// Mean over axes.
    pub fn mean(&self, axes: &[i64], keepdim: bool) -> Tensor {
        self.reduce(ReduceOp::Mean, axes, keepdim)
    }

    /// Max over axes.
    pub fn max(&self, axes: &[i64], keepdim: bool) -> Tensor {
        self.reduce(ReduceOp::Max, axes, keepdim)
    }

    /// Min over axes.
    pub fn min(&self, axes: &[i64], keepdim: bool) -> Tensor {
        self.reduce(ReduceOp::Min, axes, keepdim)
    }

    /// Product over axes.
    pub fn prod(&self, axes: &[i64], keepdim: bool) -> Tensor {
        self.reduce(ReduceOp::Prod, axes, keepdim)
    }

    /// Index of the max along an axis (i64).
    pub fn argmax(&self, axis: i64, keepdim: bool) -> Tensor {
        match self.norm_axis("argmax", axis) {
            Some(axis) => self.apply(Op::ArgReduce { op: ArgOp::ArgMax, axis, keepdim, select_last: false }, &[]),
            None => self.failed(),
        }
    }

    /// Index of the min along an axis (i64).
    pub fn argmin(&self, axis: i64, keepdim: bool) -> Tensor {
        match self.norm_axis("argmin", axis) {
            Some(axis) => self.apply(Op::ArgReduce { op: ArgOp::ArgMin, axis, keepdim, select_last: false }, &[]),
            None => self.failed(),
        }
    }

    /// Reshape to a new shape (same element count).
    pub fn reshape(&self, shape: impl Into<Shape>) -> Tensor {
        self.apply(Op::Reshape(shape.into()), &[])
    }

    /// Reshape with at most one `-1` extent inferred (static shapes only).
    pub fn view(&self, dims: &[i64]) -> Tensor {
        let Some(n) = self.shape().numel() else {
            return self.fail("view", "needs a static shape".into());
        };
        let known: i64 = dims.iter().filter(|&&d| d >= 0).product();
        let holes = dims.iter().filter(|&&d| d == -1).count();
        if holes > 1 || dims.iter().any(|&d| d < -1) || (holes == 1 && (known == 0 || n as i64 % known != 0)) {
            return self.fail("view", format!("cannot view {} elements as {dims:?}", n));
        }
        let out: Vec<usize> =
            dims.iter().map(|&d| if d == -1 { (n as i64 / known) as usize } else { d as usize }).collect();
        self.reshape(out)
    }

    /// Permute axes.
    pub fn permute(&self, perm: &[usize]) -> Tensor {
        self.apply(Op::Permute(perm.to_vec()), &[])
    }

    /// Swap two axes.
    pub fn transpose(&self, a: i64, b: i64) -> Tensor {
        let (Some(a), Some(b)) = (self.norm_axis("transpose", a), self.norm_axis("transpose", b)) else {
            return self.failed();
        };
        let mut p: Vec<usize> = (0..self.shape().rank()).collect();
        p.swap(a, b);
        self.permute(&p)
    }

    /// Broadcast to a shape.
    pub fn expand(&self, shape: impl Into<Shape>) -> Tensor {
        self.apply(Op::Expand(shape.into()), &[])
    }

    /// Python-style slice `[start:end:step]` along one axis (negative indices count from the end;
    /// out-of-range bounds are clamped).
    pub fn slice(&self, axis: i64, start: i64, end: i64, step: i64) -> Tensor {
        let Some(axis) = self.norm_axis("slice", axis) else { return self.failed() };
        let Some(dims) = self.shape().as_static() else {
            return self.fail("slice", "needs a static shape".into());
        };
        if step == 0 {
            return self.fail("slice", "step must not be 0".into());
        }
        let mut sd: Vec<SliceDim> = dims.iter().map(|&n| SliceDim { start: 0, step: 1, len: n }).collect();
        sd[axis] = slice_dim(dims[axis], start, end, step);
        self.apply(Op::Slice(sd), &[])
    }

    /// Pad with per-axis (before, after) amounts.
    pub fn pad(&self, pads: &[(i64, i64)], mode: PadMode) -> Tensor {
        self.apply(Op::Pad { pads: pads.to_vec(), mode }, &[])
    }

    /// NumPy `take` along an axis.
    pub fn gather(&self, axis: i64, indices: &Tensor) -> Tensor {
        match self.norm_axis("gather", axis) {
            Some(axis) => self.apply(Op::Gather { axis }, &[indices]),
            None => self.failed(),
        }
    }

    /// Select entries along an axis with a 1-D index tensor.
    pub fn index_select(&self, axis: i64, indices: &Tensor) -> Tensor {
        if indices.id.is_some() && indices.shape().rank() != 1 {
            return self.fail("index_select", format!("indices must be 1-D, got {}", indices.shape()));
        }
        self.gather(axis, indices)
    }

    /// Elementwise gather along an axis.
    pub fn gather_elements(&self, axis: i64, indices: &Tensor) -> Tensor {
        match self.norm_axis("gather_elements", axis) {
            Some(axis) => self.apply(Op::GatherElements { axis }, &[indices]),
            None => self.failed(),
        }
    }

    /// Embedding lookup: `self` is the [vocab, dim] table, `ids` any integer tensor.
    pub fn embedding(&self, ids: &Tensor) -> Tensor {
        self.gather(0, ids)
    }

    /// Flatten axes `start..=end` into one.
    pub fn flatten(&self, start: i64, end: i64) -> Tensor {
        let (Some(s), Some(e)) = (self.norm_axis("flatten", start), self.norm_axis("flatten", end)) else {
            return self.failed();
        };
        let sh = self.shape();
        if s > e {
            return self.fail("flatten", format!("start {start} after end {end}"));
        }
        let mut out: Vec<Dim> = sh.0[..s].to_vec();
        match sh.0[s..=e].iter().map(Dim::as_static).collect::<Option<Vec<_>>>() {
            Some(v) => out.push(Dim::Static(v.iter().product())),
            None if s == e => out.push(sh.0[s].clone()),
            None => return self.fail("flatten", format!("cannot flatten symbolic dims of {sh}")),
        }
        out.extend(sh.0[e + 1..].iter().cloned());
        self.reshape(Shape(out))
    }

    /// Remove extent-1 axes (all of them when `axes` is empty).
    pub fn squeeze(&self, axes: &[i64]) -> Tensor {
        let sh = self.shape();
        let Some(axes) = self.axes("squeeze", axes) else { return self.failed() };
        let mut out = Vec::new();
        for (i, d) in sh.0.iter().enumerate() {
            let drop = if axes.is_empty() { *d == Dim::Static(1) } else { axes.contains(&i) };
            if drop && *d != Dim::Static(1) {
                return self.fail("squeeze", format!("axis {i} of {sh} is not 1"));
            }
            if !drop {
                out.push(d.clone());
            }
        }
        self.reshape(Shape(out))
    }

    /// Insert an extent-1 axis at `axis` (in the output's numbering).
    pub fn unsqueeze(&self, axis: i64) -> Tensor {
        let sh = self.shape();
        let Some(a) = norm_axis(axis, sh.rank() + 1) else {
            return self.fail("unsqueeze", format!("axis {axis} out of range for rank {}", sh.rank() + 1));
        };
        let mut out = sh.0.clone();
        out.insert(a, Dim::Static(1));
        self.reshape(Shape(out))
    }

    /// Batched matrix product (NumPy semantics).
    pub fn matmul(&self, other: &Tensor) -> Tensor {
        self.apply(Op::MatMul, &[other])
    }

    /// 2-D convolution (NCHW input, OIHW weight). `padding` is (top, left, bottom, right).
    pub fn conv2d(
        &self,
        w: &Tensor,
        bias: Option<&Tensor>,
        stride: [usize; 2],
        padding: [usize; 4],
        dilation: [usize; 2],
        groups: usize,
    ) -> Tensor {
        let ws = w.shape().as_static().unwrap_or_default();
        let kernel = if ws.len() == 4 { [ws[2], ws[3]] } else { [0, 0] };
        let op = Op::Conv2d { window: Window2d { kernel, stride, padding, dilation }, groups };
        match bias {
            Some(b) => self.apply(op, &[w, b]),
            None => self.apply(op, &[w]),
        }
    }

    /// Max pooling.
    pub fn max_pool2d(&self, kernel: [usize; 2], stride: [usize; 2], padding: [usize; 4]) -> Tensor {
        let window = Window2d { kernel, stride, padding, dilation: [1, 1] };
        self.apply(Op::Pool2d { kind: PoolKind::Max, window, ceil_mode: false, count_include_pad: false }, &[])
    }

    /// Average pooling (padding excluded from the count).
    pub fn avg_pool2d(&self, kernel: [usize; 2], stride: [usize; 2], padding: [usize; 4]) -> Tensor {
        let window = Window2d { kernel, stride, padding, dilation: [1, 1] };
        self.apply(Op::Pool2d { kind: PoolKind::Avg, window, ceil_mode: false, count_include_pad: false }, &[])
    }

    /// Global average pooling over H and W (keeps them as extent 1).
    pub fn global_avg_pool2d(&self) -> Tensor {
        self.mean(&[2, 3], true)
    }

    /// Softmax along an axis.
    pub fn softmax(&self, axis: i64) -> Tensor {
        match self.norm_axis("softmax", axis) {
            Some(axis) => self.apply(Op::Softmax { axis }, &[]),
            None => self.failed(),
        }
    }

    /// Log-softmax along an axis.
    pub fn log_softmax(&self, axis: i64) -> Tensor {
        match self.norm_axis("log_softmax", axis) {
            Some(axis) => self.apply(Op::LogSoftmax { axis }, &[]),
            None => self.failed(),
        }
    }

    /// Layer norm over the trailing axes covered by `weight`'s rank.
    pub fn layer_norm(&self, weight: &Tensor, bias: &Tensor, eps: f64) -> Tensor {
        let r = self.shape().rank();
        let wr = weight.shape().rank();
        if wr == 0 || wr > r {
            return self.fail("layer_norm", format!("weight rank {wr} does not fit input rank {r}"));
        }
        self.apply(Op::LayerNorm { axis: r - wr, eps, has_weight: true, has_bias: true }, &[weight, bias])
    }

    /// Inference batch norm over axis 1.
    pub fn batch_norm(&self, scale: &Tensor, bias: &Tensor, mean: &Tensor, var: &Tensor, eps: f64) -> Tensor {
        self.apply(Op::BatchNorm { eps }, &[scale, bias, mean, var])
    }

    /// GELU, exact (erf) form.
    pub fn gelu(&self) -> Tensor {
        self.apply(Op::Gelu { tanh: false }, &[])
    }

    /// GELU, tanh approximation.
    pub fn gelu_tanh(&self) -> Tensor {
        self.apply(Op::Gelu { tanh: true }, &[])
    }

    /// x * sigmoid(x).
    pub fn silu(&self) -> Tensor {
        self.apply(Op::Silu, &[])
    }

    /// Hard swish.
    pub fn hardswish(&self) -> Tensor {
        self.apply(Op::HardSwish, &[])
    }

    /// Hard sigmoid, clamp(alpha x + beta, 0, 1).
    pub fn hardsigmoid(&self, alpha: f64, beta: f64) -> Tensor {
        self.apply(Op::HardSigmoid { alpha, beta }, &[])
    }

    /// Scaled dot-product attention: softmax(self K^T * scale [+ mask]) V. `scale` defaults to
    /// 1/sqrt(D) when `None`.
    pub fn attention(&self, k: &Tensor, v: &Tensor, mask: Option<&Tensor>, scale: Option<f64>, causal: bool) -> Tensor {
        let d = self.shape().0.last().and_then(Dim::as_static).unwrap_or(1);
        let scale = scale.unwrap_or(1.0 / (d as f64).sqrt());
        match mask {
            Some(m) => self.apply(Op::Attention { scale, causal, has_mask: true }, &[k, v, m]),
            None => self.apply(Op::Attention { scale, causal, has_mask: false }, &[k, v]),
        }
    }
}

/// Converts a Python-style `start:end:step` on an axis of extent `n` into a [`SliceDim`]
/// (clamping as Python and ONNX do).
pub fn slice_dim(n: usize, start: i64, end: i64, step: i64) -> SliceDim {
    let n = n as i64;
    let clamp = |v: i64, lo: i64, hi: i64| v.max(lo).min(hi);
    let (s, e) = if step > 0 {
        let s = if start < 0 { start + n } else { start };
        let e = if end < 0 { end + n } else { end };
        (clamp(s, 0, n), clamp(e, 0, n))
    } else {
        let s = if start < 0 { start + n } else { start };
        let e = if end < 0 { end + n } else { end };
        (clamp(s, -1, n - 1), clamp(e, -1, n - 1))
    };
    let len = if step > 0 {
        if e > s { (e - s + step - 1) / step } else { 0 }
    } else if s > e {
        (s - e + (-step) - 1) / (-step)
    } else {
        0
    };
    SliceDim { start: if len > 0 { s as usize } else { 0 }, step, len: len as usize }
}

macro_rules! binop_impls {
    ($trait:ident, $method:ident, $op:ident) => {
        impl std::ops::$trait<&Tensor> for &Tensor {
            type Output = Tensor;
            fn $method(self, rhs: &Tensor) -> Tensor {
                self.binary(BinaryOp::$op, rhs)
            }
        }
        impl std::ops::$trait<Tensor> for Tensor {
            type Output = Tensor;
            fn $method(self, rhs: Tensor) -> Tensor {
                self.binary(BinaryOp::$op, &rhs)
            }
        }
        impl std::ops::$trait<&Tensor> for Tensor {
            type Output = Tensor;
            fn $method(self, rhs: &Tensor) -> Tensor {
                self.binary(BinaryOp::$op, rhs)
            }
        }
        impl std::ops::$trait<Tensor> for &Tensor {
            type Output = Tensor;
            fn $method(self, rhs: Tensor) -> Tensor {
                self.binary(BinaryOp::$op, &rhs)
            }
        }
        impl std::ops::$trait<f64> for &Tensor {
            type Output = Tensor;
            fn $method(self, rhs: f64) -> Tensor {
                self.binary_scalar(BinaryOp::$op, rhs)
            }
        }
        impl std::ops::$trait<f64> for Tensor {
            type Output = Tensor;
            fn $method(self, rhs: f64) -> Tensor {
                self.binary_scalar(BinaryOp::$op, rhs)
            }
        }
        impl std::ops::$trait<&Tensor> for f64 {
            type Output = Tensor;
            fn $method(self, rhs: &Tensor) -> Tensor {
                if rhs.id.is_none() {
                    return rhs.failed();
                }
                rhs.scalar_like(self).binary(BinaryOp::$op, rhs)
            }
        }
        impl std::ops::$trait<Tensor> for f64 {
            type Output = Tensor;
            fn $method(self, rhs: Tensor) -> Tensor {
                self.$method(&rhs)
            }
        }
    };
}
binop_impls!(Add, add, Add);
binop_impls!(Sub, sub, Sub);
binop_impls!(Mul, mul, Mul);
binop_impls!(Div, div, Div);

impl std::ops::Neg for &Tensor {
    type Output = Tensor;
    fn neg(self) -> Tensor {
        self.unary(UnaryOp::Neg)
    }
}

impl std::ops::Neg for Tensor {
    type Output = Tensor;
    fn neg(self) -> Tensor {
        self.unary(UnaryOp::Neg)
    }
}
