//! Reductions and the normalizing composites (softmax, log-softmax, layer norm, batch norm).

use super::index::{broadcast_index, lanes, strided_offsets};
use super::{Buf, Value, finish};
use crate::dtype::DType;
use crate::ir::{ArgOp, ReduceOp};
use crate::scalar::{arg_better_f64, arg_better_i64, fmax_nan, fmin_nan, int_key};

/// Reduction of `x` over `axes` into `shape` (the node's shape, with or without kept axes: the
/// element order is the same either way). Accumulates in `f64` (`i64` wrapping for integers).
pub(super) fn reduce(op: ReduceOp, axes: &[usize], x: &Value, out: DType, shape: Vec<usize>) -> Result<Value, String> {
    let n_out: usize = shape.iter().product();
    let count: usize = axes.iter().map(|&a| x.shape[a]).product();
    if count == 0 && n_out > 0 && matches!(op, ReduceOp::Max | ReduceOp::Min) {
        return Err(format!("reduce_{} over an empty extent (axes {axes:?} of {:?})", op.name(), x.shape));
    }
    // Output offset of every input element: strides over the kept axes, zero on reduced ones.
    let mut strides = vec![0isize; x.shape.len()];
    let mut s = 1isize;
    for a in (0..x.shape.len()).rev() {
        if !axes.contains(&a) {
            strides[a] = s;
            s *= x.shape[a] as isize;
        }
    }
    let dest = strided_offsets(&x.shape, &strides, 0);
    let buf = match &x.buf {
        Buf::F(v) => {
            let (init, f): (f64, fn(f64, f64) -> f64) = match op {
                ReduceOp::Sum | ReduceOp::Mean => (0.0, |a, b| a + b),
                ReduceOp::Prod => (1.0, |a, b| a * b),
                ReduceOp::Max => (f64::NEG_INFINITY, fmax_nan),
                ReduceOp::Min => (f64::INFINITY, fmin_nan),
            };
            let mut acc = vec![init; n_out];
            for (&d, &e) in dest.iter().zip(v) {
                acc[d] = f(acc[d], e);
            }
            if op == ReduceOp::Mean {
                acc.iter_mut().for_each(|a| *a /= count as f64);
            }
            Buf::F(acc)
        }
        Buf::I(v) => {
            let u = x.dtype == DType::U64;
            // Max/min start from the dtype's extremes in key order (see `int_key`).
            let (init, f): (i64, Box<dyn Fn(i64, i64) -> i64>) = match op {
                ReduceOp::Sum => (0, Box::new(|a: i64, b: i64| a.wrapping_add(b))),
                ReduceOp::Prod => (1, Box::new(|a: i64, b: i64| a.wrapping_mul(b))),
                ReduceOp::Max => {
                    (int_key(i64::MIN, u), Box::new(move |a, b| if int_key(b, u) > int_key(a, u) { b } else { a }))
                }
                ReduceOp::Min => {
                    (int_key(i64::MAX, u), Box::new(move |a, b| if int_key(b, u) < int_key(a, u) { b } else { a }))
                }
                ReduceOp::Mean => return Err("reduce_mean needs a float operand".into()),
            };
            let mut acc = vec![init; n_out];
            for (&d, &e) in dest.iter().zip(v) {
                acc[d] = f(acc[d], e);
            }
            Buf::I(acc)
        }
    };
    finish(out, shape, buf)
}

/// Index of the max/min along `axis` (NaN counts as the extremum; first on ties unless
/// `select_last`: see [`arg_better_f64`]); output i64.
pub(super) fn arg_reduce(
    op: ArgOp,
    axis: usize,
    select_last: bool,
    x: &Value,
    shape: Vec<usize>,
) -> Result<Value, String> {
    let (outer, n, inner) = lanes(&x.shape, axis);
    if n == 0 && outer * inner > 0 {
        return Err(format!("arg-reduction over the empty axis {axis} of {:?}", x.shape));
    }
    let max = op == ArgOp::ArgMax;
    let mut out = Vec::with_capacity(outer * inner);
    for o in 0..outer {
        for j in 0..inner {
            let at = |i: usize| (o * n + i) * inner + j;
            let mut best = 0usize;
            match &x.buf {
                Buf::F(v) => {
                    for i in 1..n {
                        if arg_better_f64(max, v[at(i)], v[at(best)], select_last) {
                            best = i;
                        }
                    }
                }
                Buf::I(v) => {
                    let u = x.dtype == DType::U64;
                    for i in 1..n {
                        if arg_better_i64(max, v[at(i)], v[at(best)], u, select_last) {
                            best = i;
                        }
                    }
                }
            }
            out.push(best as i64);
        }
    }
    finish(DType::I64, shape, Buf::I(out))
}

/// Softmax (or log-softmax) along `axis`: `exp(x - max) / sum exp(x - max)`, or
/// `x - max - log(sum exp(x - max))`.
pub(super) fn softmax(x: &Value, axis: usize, log: bool) -> Result<Value, String> {
    let v = x.f()?;
    let (outer, n, inner) = lanes(&x.shape, axis);
    let mut out = vec![0.0; v.len()];
    let mut e = vec![0.0; n];
    for o in 0..outer {
        for j in 0..inner {
            let at = |i: usize| (o * n + i) * inner + j;
            let m = (0..n).map(|i| v[at(i)]).fold(f64::NEG_INFINITY, fmax_nan);
            let mut sum = 0.0;
            for (i, ei) in e.iter_mut().enumerate() {
                *ei = (v[at(i)] - m).exp();
                sum += *ei;
            }
            for (i, &ei) in e.iter().enumerate() {
                out[at(i)] = if log { v[at(i)] - m - sum.ln() } else { ei / sum };
            }
        }
    }
    finish(x.dtype, x.shape.clone(), Buf::F(out))
}

/// A parameter broadcast to `shape` (flattened), or `fill` everywhere when absent.
fn param(p: Option<&Value>, shape: &[usize], fill: f64) -> Result<Vec<f64>, String> {
    match p {
        None => Ok(vec![fill; shape.iter().product()]),
        Some(p) => {
            let idx = broadcast_index(shape, &p.shape).map_err(|e| e.to_string())?;
            let v = p.f()?;
            Ok(idx.into_iter().map(|i| v[i]).collect())
        }
    }
}

/// Layer norm over axes `axis..rank`: `(x - mean) / sqrt(var + eps) * weight + bias` with the
/// biased variance; weight and bias broadcast to the normalized shape.
pub(super) fn layer_norm(
    x: &Value,
    axis: usize,
    eps: f64,
    weight: Option<&Value>,
    bias: Option<&Value>,
) -> Result<Value, String> {
    let v = x.f()?;
    let norm_shape = &x.shape[axis..];
    let n: usize = norm_shape.iter().product();
    let w = param(weight, norm_shape, 1.0)?;
    let b = param(bias, norm_shape, 0.0)?;
    let mut out = vec![0.0; v.len()];
    if n > 0 {
        for (row, o) in v.chunks(n).zip(out.chunks_mut(n)) {
            let mean = row.iter().sum::<f64>() / n as f64;
            let var = row.iter().map(|&a| (a - mean) * (a - mean)).sum::<f64>() / n as f64;
            let denom = (var + eps).sqrt();
            for (k, (&a, y)) in row.iter().zip(o.iter_mut()).enumerate() {
                *y = (a - mean) / denom * w[k] + b[k];
            }
        }
    }
    finish(x.dtype, x.shape.clone(), Buf::F(out))
}

/// Inference batch norm over axis 1: `(x - mean[c]) / sqrt(var[c] + eps) * scale[c] + bias[c]`.
pub(super) fn batch_norm(
    x: &Value,
    scale: &Value,
    bias: &Value,
    mean: &Value,
    var: &Value,
    eps: f64,
) -> Result<Value, String> {
    let v = x.f()?;
    let (s, b, m, var) = (scale.f()?, bias.f()?, mean.f()?, var.f()?);
    let (outer, c, inner) = lanes(&x.shape, 1);
    let mut out = vec![0.0; v.len()];
    for o in 0..outer {
        for ch in 0..c {
            let denom = (var[ch] + eps).sqrt();
            let base = (o * c + ch) * inner;
            for k in base..base + inner {
                out[k] = (v[k] - m[ch]) / denom * s[ch] + b[ch];
            }
        }
    }
    finish(x.dtype, x.shape.clone(), Buf::F(out))
}
