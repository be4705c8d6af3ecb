//! `decompose`: lowers every composite op to primitives, the way Inductor's decompositions do.
//! Constants are created in the operand's dtype, so every intermediate keeps the dtype of the value
//! it replaces. New nodes take the origin of the composite they replace.
//!
//! For f16 and bf16, composites compute in f32 as PyTorch's decompositions do (its "computation
//! dtype"): operands are cast to f32, the lowered ops and their constants are f32, and the result is
//! cast back, so the decomposed graph rounds where the composite does (once, at the end) and
//! matches a fused kernel that keeps intermediates in f32 registers. Attention keeps its two
//! matmuls in the storage dtype and runs the scaled, masked softmax in f32.
//!
//! - `softmax(x, a)` = `e / sum(e, a)` with `e = exp(x - max(x, a))` (reductions keep the axis, the
//!   binary ops broadcast it back)
//! - `log_softmax(x, a)` = `(x - m) - log(sum(exp(x - m), a))`
//! - `reduce_mean(x, axes)` = `reduce_sum(x, axes) * (1/n)`
//! - `layer_norm` = `c * rsqrt(mean(c*c) + eps) * w + b` with `c = x - mean(x)`
//! - `batch_norm` = `(x - mean) * (scale * rsqrt(var + eps)) + bias`, parameters reshaped to `[C, 1, ...]`
//! - `gelu` = `0.5*x*(1 + erf(x/sqrt 2))`, or `0.5*x*(1 + tanh(sqrt(2/pi)*(x + 0.044715*x^3)))`
//! - `silu` = `x * sigmoid(x)`; `hardsigmoid` = `min(max(alpha*x + beta, 0), 1)`;
//!   `hardswish` = `x * hardsigmoid(x)` with alpha 1/6, beta 1/2
//! - `attention` = `softmax(q @ k^T * scale [+ mask | where(mask, s, -inf)] [causal]) @ v`
//!
//! One primitive is lowered too: `pow(x, c)` with `c` a constant of one integer value from 2 to 4
//! (of a float `x`, not broadcasting it) becomes products (`x * x`, `x * x * x`, `(x * x) * (x * x)`),
//! as Inductor lowers an integer power and as the `gelu` above computes `x^3`. It rounds once per
//! product where a correctly rounded `pow` rounds once in all, within the dtype's tolerance.
//! Measured on an H200 (session 24, Nsight Compute): GPT-2's exported GELU, `pow(x, 3.0)` and a
//! `tanh` in the epilogue of its first MLP product, took 17.7 us at 71% of the SMs' issue rate for
//! 12.6 MB (precise `powf` is a logarithm and an exponential).

use super::rewrite::Rewriter;
use crate::dtype::DType;
use crate::error::Error;
use crate::ir::{BinaryOp, Graph, NodeId, Op, Origin, ReduceOp, TensorType, UnaryOp};
use crate::shape::{Dim, Shape};
use crate::tensor::HostTensor;

/// The pass name.
pub const NAME: &str = "decompose";

/// Lowers every composite op of `g` to primitives.
pub fn decompose(g: &Graph) -> Result<Graph, Error> {
    let mut rw = Rewriter::new(g);
    for (id, node) in g.iter() {
        if let Some(k) = integer_power(g, id) {
            let x = rw.mapped_inputs(id)?[0];
            let mut e = Emit { rw: &mut rw, origin: node.origin.clone() };
            let x2 = e.bin(BinaryOp::Mul, x, x)?;
            let y = match k {
                2 => x2,
                3 => e.bin(BinaryOp::Mul, x2, x)?,
                _ => e.bin(BinaryOp::Mul, x2, x2)?,
            };
            rw.replace(id, y);
            continue;
        }
        if !node.op.is_composite() {
            rw.copy(id)?;
            continue;
        }
        let ins = rw.mapped_inputs(id)?;
        let mut e = Emit { rw: &mut rw, origin: node.origin.clone() };
        let dt = node.ty.dtype;
        let y = if is_low_precision(dt) && !matches!(node.op, Op::Attention { .. }) {
            // Compute in f32 as PyTorch's decompositions do: cast the operands of the node's
            // dtype up, lower, cast the result back.
            let mut up = Vec::with_capacity(ins.len());
            for &i in &ins {
                up.push(if e.ty(i).dtype == dt { e.op(Op::Cast(DType::F32), &[i])? } else { i });
            }
            let y = lower(&mut e, &node.op, &up)?;
            e.op(Op::Cast(dt), &[y])?
        } else {
            lower(&mut e, &node.op, &ins)?
        };
        if e.ty(y) != node.ty {
            return Err(Error::build(
                node.op.name(),
                &[&node.ty],
                format!("decomposition produced {} instead of {}", e.ty(y), node.ty),
            ));
        }
        rw.replace(id, y);
    }
    rw.finish()
}

/// `k` when node `id` is `pow(x, c)` for a constant `c` holding the one integer value `k` in 2..=4,
/// `x` a float of the node's type (the exponent broadcasts nothing).
fn integer_power(g: &Graph, id: NodeId) -> Option<i64> {
    let node = g.node(id);
    let Op::Binary(BinaryOp::Pow) = node.op else { return None };
    let [x, c] = node.inputs[..] else { return None };
    if !node.ty.dtype.is_float() || g.ty(x) != &node.ty {
        return None;
    }
    let t = super::rewrite::as_constant(g, c)?;
    let v = t.to_f64_vec();
    let k = *v.first()?;
    (v.iter().all(|&y| y == k) && (2.0..=4.0).contains(&k) && k.fract() == 0.0).then_some(k as i64)
}

/// True for the storage-only float types whose arithmetic runs in f32.
fn is_low_precision(d: DType) -> bool {
    matches!(d, DType::F16 | DType::BF16 | DType::F8E4M3 | DType::F8E5M2)
}

/// Emits nodes with one origin.
struct Emit<'r, 'a> {
    rw: &'r mut Rewriter<'a>,
    origin: Origin,
}

impl Emit<'_, '_> {
    fn ty(&self, x: NodeId) -> TensorType {
        self.rw.new_graph().ty(x).clone()
    }

    fn op(&mut self, op: Op, ins: &[NodeId]) -> Result<NodeId, Error> {
        self.rw.emit(op, ins.to_vec(), &self.origin)
    }

    fn un(&mut self, u: UnaryOp, x: NodeId) -> Result<NodeId, Error> {
        self.op(Op::Unary(u), &[x])
    }

    fn bin(&mut self, b: BinaryOp, x: NodeId, y: NodeId) -> Result<NodeId, Error> {
        self.op(Op::Binary(b), &[x, y])
    }

    /// A rank-0 constant in `x`'s dtype.
    fn scalar_like(&mut self, x: NodeId, v: f64) -> Result<NodeId, Error> {
        let d = self.ty(x).dtype;
        self.rw.emit_constant(HostTensor::scalar(d, v), &self.origin)
    }

    /// `x (op) v` with `v` a scalar constant in `x`'s dtype.
    fn bin_scalar(&mut self, b: BinaryOp, x: NodeId, v: f64) -> Result<NodeId, Error> {
        let c = self.scalar_like(x, v)?;
        self.bin(b, x, c)
    }

    fn reduce(&mut self, op: ReduceOp, x: NodeId, axes: &[usize], keepdim: bool) -> Result<NodeId, Error> {
        self.op(Op::Reduce { op, axes: axes.to_vec(), keepdim }, &[x])
    }

    /// `reduce_sum(x, axes) * (1/n)`; the reduced extents must be static.
    fn mean(&mut self, x: NodeId, axes: &[usize], keepdim: bool) -> Result<NodeId, Error> {
        let t = self.ty(x);
        let mut n = 1usize;
        for &a in axes {
            match t.shape.0.get(a) {
                Some(Dim::Static(k)) => n *= k,
                _ => {
                    return Err(Error::Unsupported(format!(
                        "mean over axis {a} of {t}: the extent must be static (specialize first)"
                    )));
                }
            }
        }
        let s = self.reduce(ReduceOp::Sum, x, axes, keepdim)?;
        self.bin_scalar(BinaryOp::Mul, s, 1.0 / n as f64)
    }

    fn softmax(&mut self, x: NodeId, axis: usize) -> Result<NodeId, Error> {
        let m = self.reduce(ReduceOp::Max, x, &[axis], true)?;
        let c = self.bin(BinaryOp::Sub, x, m)?;
        let e = self.un(UnaryOp::Exp, c)?;
        let s = self.reduce(ReduceOp::Sum, e, &[axis], true)?;
        self.bin(BinaryOp::Div, e, s)
    }

    fn hardsigmoid(&mut self, x: NodeId, alpha: f64, beta: f64) -> Result<NodeId, Error> {
        let a = self.bin_scalar(BinaryOp::Mul, x, alpha)?;
        let b = self.bin_scalar(BinaryOp::Add, a, beta)?;
        let lo = self.bin_scalar(BinaryOp::Max, b, 0.0)?;
        self.bin_scalar(BinaryOp::Min, lo, 1.0)
    }
}

fn lower(e: &mut Emit, op: &Op, ins: &[NodeId]) -> Result<NodeId, Error> {
    match op {
        Op::Softmax { axis } => e.softmax(ins[0], *axis),
        Op::LogSoftmax { axis } => {
            let x = ins[0];
            let m = e.reduce(ReduceOp::Max, x, &[*axis], true)?;
            let c = e.bin(BinaryOp::Sub, x, m)?;
            let ex = e.un(UnaryOp::Exp, c)?;
            let s = e.reduce(ReduceOp::Sum, ex, &[*axis], true)?;
            let l = e.un(UnaryOp::Log, s)?;
            e.bin(BinaryOp::Sub, c, l)
        }
        Op::Reduce { op: ReduceOp::Mean, axes, keepdim } => e.mean(ins[0], axes, *keepdim),
        Op::LayerNorm { axis, eps, has_weight, has_bias } => {
            let x = ins[0];
            let axes: Vec<usize> = (*axis..e.ty(x).shape.rank()).collect();
            let mu = e.mean(x, &axes, true)?;
            let c = e.bin(BinaryOp::Sub, x, mu)?;
            let sq = e.bin(BinaryOp::Mul, c, c)?;
            let var = e.mean(sq, &axes, true)?;
            let ve = e.bin_scalar(BinaryOp::Add, var, *eps)?;
            let r = e.un(UnaryOp::Rsqrt, ve)?;
            let mut y = e.bin(BinaryOp::Mul, c, r)?;
            let mut next = 1;
            if *has_weight {
                y = e.bin(BinaryOp::Mul, y, ins[next])?;
                next += 1;
            }
            if *has_bias {
                y = e.bin(BinaryOp::Add, y, ins[next])?;
            }
            Ok(y)
        }
        Op::BatchNorm { eps } => {
            let (x, scale, bias, mean, var) = (ins[0], ins[1], ins[2], ins[3], ins[4]);
            let xt = e.ty(x);
            let ve = e.bin_scalar(BinaryOp::Add, var, *eps)?;
            let r = e.un(UnaryOp::Rsqrt, ve)?;
            let k = e.bin(BinaryOp::Mul, scale, r)?;
            // Parameters are [C]; x is [N, C, ...]: reshape them to [C, 1, ...] so they broadcast.
            let (mean, k, bias) = if xt.shape.rank() > 2 {
                let mut dims = vec![xt.shape.0[1].clone()];
                dims.extend(std::iter::repeat_n(Dim::Static(1), xt.shape.rank() - 2));
                let s = Shape(dims);
                (
                    e.op(Op::Reshape(s.clone()), &[mean])?,
                    e.op(Op::Reshape(s.clone()), &[k])?,
                    e.op(Op::Reshape(s), &[bias])?,
                )
            } else {
                (mean, k, bias)
            };
            let c = e.bin(BinaryOp::Sub, x, mean)?;
            let y = e.bin(BinaryOp::Mul, c, k)?;
            e.bin(BinaryOp::Add, y, bias)
        }
        Op::Gelu { tanh: false } => {
            let x = ins[0];
            let t = e.bin_scalar(BinaryOp::Mul, x, std::f64::consts::FRAC_1_SQRT_2)?;
            let er = e.un(UnaryOp::Erf, t)?;
            let p = e.bin_scalar(BinaryOp::Add, er, 1.0)?;
            let h = e.bin_scalar(BinaryOp::Mul, x, 0.5)?;
            e.bin(BinaryOp::Mul, h, p)
        }
        Op::Gelu { tanh: true } => {
            let x = ins[0];
            let x2 = e.bin(BinaryOp::Mul, x, x)?;
            let x3 = e.bin(BinaryOp::Mul, x2, x)?;
            let a = e.bin_scalar(BinaryOp::Mul, x3, 0.044715)?;
            let inner = e.bin(BinaryOp::Add, x, a)?;
            let t = e.bin_scalar(BinaryOp::Mul, inner, (2.0 / std::f64::consts::PI).sqrt())?;
            let th = e.un(UnaryOp::Tanh, t)?;
            let p = e.bin_scalar(BinaryOp::Add, th, 1.0)?;
            let h = e.bin_scalar(BinaryOp::Mul, x, 0.5)?;
            e.bin(BinaryOp::Mul, h, p)
        }
        Op::Silu => {
            let s = e.un(UnaryOp::Sigmoid, ins[0])?;
            e.bin(BinaryOp::Mul, ins[0], s)
        }
        Op::HardSigmoid { alpha, beta } => e.hardsigmoid(ins[0], *alpha, *beta),
        Op::HardSwish => {
            let h = e.hardsigmoid(ins[0], 1.0 / 6.0, 0.5)?;
            e.bin(BinaryOp::Mul, ins[0], h)
        }
        Op::Attention { scale, causal, has_mask } => {
            let (q, k, v) = (ins[0], ins[1], ins[2]);
            let r = e.ty(q).shape.rank();
            let mut perm: Vec<usize> = (0..r).collect();
            perm.swap(r - 2, r - 1);
            let kt = e.op(Op::Permute(perm), &[k])?;
            let mut qk = e.op(Op::MatMul, &[q, kt])?;
            // The matmuls stay in the storage dtype (they accumulate in f32); the softmax part
            // runs in f32 for f16/bf16.
            let dt = e.ty(q).dtype;
            let low = is_low_precision(dt);
            if low {
                qk = e.op(Op::Cast(DType::F32), &[qk])?;
            }
            let mut s = e.bin_scalar(BinaryOp::Mul, qk, *scale)?;
            if *has_mask {
                let mut m = ins[3];
                if low && e.ty(m).dtype == dt {
                    m = e.op(Op::Cast(DType::F32), &[m])?;
                }
                s = if e.ty(m).dtype == DType::Bool {
                    let ninf = e.scalar_like(s, f64::NEG_INFINITY)?;
                    e.op(Op::Where, &[m, s, ninf])?
                } else {
                    e.bin(BinaryOp::Add, s, m)?
                };
            }
            if *causal {
                let st = e.ty(s);
                let sr = st.shape.rank();
                let (Some(sq), Some(sk)) = (st.shape.0[sr - 2].as_static(), st.shape.0[sr - 1].as_static()) else {
                    return Err(Error::Unsupported(format!(
                        "causal attention needs static sequence lengths, got scores {st} (specialize first)"
                    )));
                };
                // Top-left aligned lower triangle, as torch's `is_causal`: query i sees keys j <= i.
                let keep: Vec<i64> = (0..sq * sk).map(|p| (p % sk <= p / sk) as i64).collect();
                let cm = e.rw.emit_constant(HostTensor::from_i64(DType::Bool, vec![sq, sk], &keep), &e.origin)?;
                let ninf = e.scalar_like(s, f64::NEG_INFINITY)?;
                s = e.op(Op::Where, &[cm, s, ninf])?;
            }
            let mut p = e.softmax(s, r - 1)?;
            if low {
                p = e.op(Op::Cast(dt), &[p])?;
            }
            e.op(Op::MatMul, &[p, v])
        }
        other => Err(Error::Unsupported(format!("decompose: no decomposition for {}", other.name()))),
    }
}
