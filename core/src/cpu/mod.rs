//! The CPU reference interpreter: the ground truth every backend is checked against.
//!
//! It walks the graph in arena (topological) order and evaluates every node directly, composites
//! included (softmax, layer norm, GELU, attention, ... each with its textbook definition, never via
//! a decomposition, so decomposition passes can be tested against it).
//!
//! Numerics: float dtypes compute in `f64` and integer/bool dtypes in `i64`; each node's result is
//! then rounded to the node's dtype ([`round_to`], [`cast_int`]), so `f16`/`bf16` results emulate
//! storage precision and integer results wrap as a cast would. Reductions, matmul and convolution
//! accumulate in `f64` (`i64` for integers, wrapping). `u64` values are held as their bit pattern
//! in `i64` and compared/divided as unsigned.
//!
//! Run-time inputs are checked ([`check_inputs`]): count, dtype, rank and extents; symbolic dims
//! are bound from the inputs' shapes and substituted ([`specialize`]) before evaluation.
//!
//! ```
//! use sinter_core::prelude::*;
//! let g = Graph::new();
//! let x = g.input("x", DType::F32, [2, 3]);
//! g.output(&x.softmax(-1));
//! let x = HostTensor::f32([2, 3], vec![1.0, 2.0, 3.0, 0.0, 0.0, 0.0]).unwrap();
//! let y = sinter_core::cpu::run(&g, &[x]).unwrap();
//! assert!((y[0].to_f64_vec()[3] - 1.0 / 3.0).abs() < 1e-7);
//! ```

mod elementwise;
mod index;
mod linalg;
pub mod math;
mod movement;
mod reduce;
mod specialize;

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;

pub use index::{broadcast_index, strided_offsets};
pub use specialize::{check_inputs, specialize};

use crate::dtype::DType;
use crate::error::Error;
use crate::ir::{Graph as IrGraph, Node, NodeId, Op};
use crate::tensor::{HostTensor, cast_int, round_to};
use crate::trace::AsGraph;
use std::borrow::Cow;

/// Element storage of an interpreter value: `f64` for float dtypes, `i64` for integer and bool
/// dtypes (bool as 0/1, `u64` as its bit pattern).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Buf {
    /// Float elements.
    F(Vec<f64>),
    /// Integer or bool elements.
    I(Vec<i64>),
}

impl Buf {
    /// Number of elements.
    pub(crate) fn len(&self) -> usize {
        match self {
            Buf::F(v) => v.len(),
            Buf::I(v) => v.len(),
        }
    }

    /// The elements at `idx`, in order.
    pub(crate) fn gather(&self, idx: &[usize]) -> Buf {
        match self {
            Buf::F(v) => Buf::F(idx.iter().map(|&i| v[i]).collect()),
            Buf::I(v) => Buf::I(idx.iter().map(|&i| v[i]).collect()),
        }
    }
}

/// An evaluated node: dtype, static shape and elements (row-major).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Value {
    pub(crate) dtype: DType,
    pub(crate) shape: Vec<usize>,
    pub(crate) buf: Buf,
}

impl Value {
    /// Converts a host tensor (exact: every dtype fits `f64` or `i64`).
    pub(crate) fn from_host(t: &HostTensor) -> Value {
        let dtype = t.dtype();
        let buf = if dtype.is_float() { Buf::F(t.to_f64_vec()) } else { Buf::I(t.to_i64_vec()) };
        Value { dtype, shape: t.shape.clone(), buf }
    }

    /// Converts back to a host tensor of this value's dtype.
    pub(crate) fn to_host(&self) -> HostTensor {
        match &self.buf {
            Buf::F(v) => HostTensor::from_f64(self.dtype, self.shape.clone(), v),
            Buf::I(v) => HostTensor::from_i64(self.dtype, self.shape.clone(), v),
        }
    }

    /// The float elements, or an error naming what was expected.
    pub(crate) fn f(&self) -> Result<&[f64], String> {
        match &self.buf {
            Buf::F(v) => Ok(v),
            Buf::I(_) => Err(format!("expected a float operand, got {}", self.dtype)),
        }
    }

    /// The integer/bool elements, or an error naming what was expected.
    pub(crate) fn i(&self) -> Result<&[i64], String> {
        match &self.buf {
            Buf::I(v) => Ok(v),
            Buf::F(_) => Err(format!("expected an integer or bool operand, got {}", self.dtype)),
        }
    }
}

/// Rounds freshly computed elements to `dtype` (storage precision for floats, wrapping for
/// integers, 0/1 for bool) and wraps them as a value. The buffer kind must match the dtype.
pub(crate) fn finish(dtype: DType, shape: Vec<usize>, buf: Buf) -> Result<Value, String> {
    let buf = match buf {
        Buf::F(mut v) if dtype.is_float() => {
            if dtype != DType::F64 {
                v.iter_mut().for_each(|x| *x = round_to(dtype, *x));
            }
            Buf::F(v)
        }
        Buf::I(mut v) if !dtype.is_float() => {
            if dtype != DType::I64 && dtype != DType::U64 {
                v.iter_mut().for_each(|x| *x = cast_int(dtype, *x));
            }
            Buf::I(v)
        }
        _ => return Err(format!("internal: computed the wrong kind of elements for {dtype}")),
    };
    if buf.len() != shape.iter().product::<usize>() {
        return Err(format!("internal: computed {} elements for shape {shape:?}", buf.len()));
    }
    Ok(Value { dtype, shape, buf })
}

/// Runs `g` on `inputs` (in `g.inputs` order) and returns the outputs in `g.outputs` order.
/// Only nodes the outputs depend on are evaluated.
pub fn run(g: &impl AsGraph, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, Error> {
    let ir = g.to_ir()?;
    let g = prepare(&ir, inputs)?;
    let vals = evaluate(&g, inputs, false)?;
    g.outputs
        .iter()
        .map(|o| {
            vals[o.node.index()]
                .as_ref()
                .map(Value::to_host)
                .ok_or_else(|| Error::Eval { node: o.node.to_string(), msg: "output was not evaluated".into() })
        })
        .collect()
}

/// [`run`] with inputs given by name (any order; each graph input exactly once).
pub fn run_named(g: &impl AsGraph, inputs: &[(&str, HostTensor)]) -> Result<Vec<HostTensor>, Error> {
    let ir = g.to_ir()?;
    let names = ir.input_names();
    for (k, (n, _)) in inputs.iter().enumerate() {
        if !names.contains(n) {
            return Err(Error::Input(format!("no graph input is named {n:?} (inputs: {names:?})")));
        }
        if inputs[..k].iter().any(|(m, _)| m == n) {
            return Err(Error::Input(format!("input {n:?} given twice")));
        }
    }
    let mut ordered = Vec::with_capacity(names.len());
    for name in &names {
        match inputs.iter().find(|(n, _)| n == name) {
            Some((_, t)) => ordered.push(t.clone()),
            None => return Err(Error::Input(format!("input {name:?} is missing"))),
        }
    }
    run(&*ir, &ordered)
}

/// Evaluates every node of `g` (dead ones included) and returns each node's value, indexed by
/// node id. Memory-heavy; meant for tests and debugging.
pub fn eval_all(g: &IrGraph, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, Error> {
    let ir = g.to_ir()?;
    let g = prepare(&ir, inputs)?;
    let vals = evaluate(&g, inputs, true)?;
    vals.iter()
        .enumerate()
        .map(|(i, v)| {
            v.as_ref()
                .map(Value::to_host)
                .ok_or_else(|| Error::Eval { node: NodeId(i as u32).to_string(), msg: "not evaluated".into() })
        })
        .collect()
}

/// Checks the inputs and returns `g` with every symbolic dim replaced by its bound extent.
fn prepare<'a>(g: &'a IrGraph, inputs: &[HostTensor]) -> Result<Cow<'a, IrGraph>, Error> {
    let bindings = check_inputs(g, inputs)?;
    if bindings.is_empty() { Ok(Cow::Borrowed(g)) } else { Ok(Cow::Owned(specialize(g, &bindings)?)) }
}

/// Evaluates a checked, static graph. With `all`, every node is evaluated and kept; otherwise only
/// the outputs' ancestors, and values are dropped after their last use.
fn evaluate(g: &IrGraph, inputs: &[HostTensor], all: bool) -> Result<Vec<Option<Value>>, Error> {
    let n = g.nodes.len();
    let mut live = vec![all; n];
    let mut remaining = vec![0usize; n];
    let mut is_output = vec![false; n];
    for o in &g.outputs {
        live[o.node.index()] = true;
        is_output[o.node.index()] = true;
    }
    for i in (0..n).rev() {
        if live[i] {
            for &a in &g.nodes[i].inputs {
                live[a.index()] = true;
                remaining[a.index()] += 1;
            }
        }
    }
    let mut vals: Vec<Option<Value>> = vec![None; n];
    for (id, node) in g.iter() {
        if !live[id.index()] {
            continue;
        }
        // The budget is checked before the node allocates its result (8 bytes per element plus
        // the index maps movement ops build).
        if let Some(dims) = node.ty.shape.as_static() {
            let bytes =
                crate::budget::bytes_of(crate::budget::elems(&dims), crate::budget::REFERENCE_BYTES_PER_ELEMENT);
            crate::budget::check(bytes, || {
                format!("node {id} ({}) of type {} on the CPU reference", node.op.name(), node.ty)
            })?;
        }
        let v =
            {
                let args: Vec<&Value> =
                    node.inputs.iter().map(|a| vals[a.index()].as_ref()).collect::<Option<_>>().ok_or_else(|| {
                        Error::Eval { node: id.to_string(), msg: "an operand was not evaluated".into() }
                    })?;
                eval_node(g, id, node, &args, inputs)
                    .map_err(|msg| Error::Eval { node: format!("{id} ({})", node.op.name()), msg })?
            };
        vals[id.index()] = Some(v);
        if !all {
            for &a in &node.inputs {
                let k = a.index();
                remaining[k] -= 1;
                if remaining[k] == 0 && !is_output[k] {
                    vals[k] = None;
                }
            }
        }
    }
    Ok(vals)
}

/// Evaluates one node from its operands' values.
fn eval_node(g: &IrGraph, id: NodeId, node: &Node, args: &[&Value], inputs: &[HostTensor]) -> Result<Value, String> {
    let dtype = node.ty.dtype;
    let shape = node.ty.shape.as_static().ok_or_else(|| format!("type {} is not static", node.ty))?;
    let v = match &node.op {
        Op::Input { name } => {
            let k = g.inputs.iter().position(|&i| i == id).ok_or_else(|| format!("input {name:?} is not listed"))?;
            Value::from_host(&inputs[k])
        }
        Op::Constant(t) => {
            if t.shape.iter().product::<usize>() != t.numel() {
                return Err(format!("constant of shape {:?} holds {} elements", t.shape, t.numel()));
            }
            Value::from_host(t)
        }
        Op::Unary(u) => elementwise::unary(*u, args[0], dtype)?,
        Op::Binary(b) => elementwise::binary(*b, args[0], args[1], dtype, shape)?,
        Op::Where => elementwise::select(args[0], args[1], args[2], dtype, shape)?,
        Op::Cast(to) => elementwise::cast(args[0], *to)?,
        Op::Reduce { op, axes, .. } => reduce::reduce(*op, axes, args[0], dtype, shape)?,
        Op::ArgReduce { op, axis, select_last, .. } => reduce::arg_reduce(*op, *axis, *select_last, args[0], shape)?,
        Op::Reshape(_) => Value { dtype, shape, buf: args[0].buf.clone() },
        Op::Permute(p) => movement::permute(args[0], p)?,
        Op::Expand(_) => movement::expand(args[0], shape)?,
        Op::Slice(dims) => movement::slice(args[0], dims)?,
        Op::Concat { axis } => movement::concat(args, *axis, shape)?,
        Op::Pad { pads, mode } => movement::pad(args[0], pads, *mode, shape)?,
        Op::Gather { axis } => movement::gather(args[0], args[1], *axis, shape)?,
        Op::GatherElements { axis } => movement::gather_elements(args[0], args[1], *axis)?,
        Op::MatMul => linalg::matmul(args[0], args[1], dtype, shape)?,
        Op::Conv2d { window, groups } => {
            linalg::conv2d(args[0], args[1], args.get(2).copied(), window, *groups, shape)?
        }
        Op::Pool2d { kind, window, count_include_pad, .. } => {
            linalg::pool2d(args[0], *kind, window, *count_include_pad, shape)?
        }
        Op::Softmax { axis } => reduce::softmax(args[0], *axis, false)?,
        Op::LogSoftmax { axis } => reduce::softmax(args[0], *axis, true)?,
        Op::LayerNorm { axis, eps, has_weight, has_bias } => {
            let weight = has_weight.then(|| args[1]);
            let bias = has_bias.then(|| args[1 + *has_weight as usize]);
            reduce::layer_norm(args[0], *axis, *eps, weight, bias)?
        }
        Op::BatchNorm { eps } => reduce::batch_norm(args[0], args[1], args[2], args[3], args[4], *eps)?,
        Op::Gelu { tanh } => elementwise::activation(args[0], |x| crate::scalar::gelu(x, *tanh))?,
        Op::Silu => elementwise::activation(args[0], |x| x * crate::scalar::sigmoid(x))?,
        Op::HardSwish => elementwise::activation(args[0], |x| x * (x / 6.0 + 0.5).clamp(0.0, 1.0))?,
        Op::HardSigmoid { alpha, beta } => elementwise::activation(args[0], |x| (alpha * x + beta).clamp(0.0, 1.0))?,
        Op::Attention { scale, causal, .. } => {
            linalg::attention(args[0], args[1], args[2], args.get(3).copied(), *scale, *causal, shape)?
        }
    };
    // Every op already rounds to its dtype; check the result matches the node's recorded type.
    if v.dtype != dtype || v.shape != node.ty.shape.as_static().unwrap_or_default() {
        return Err(format!("internal: computed {}{:?}, the node says {}", v.dtype, v.shape, node.ty));
    }
    Ok(v)
}
