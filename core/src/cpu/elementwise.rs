//! Elementwise ops: unary, binary (with broadcasting), where, cast and the pointwise composites.

use super::index::{broadcast_strides, strided_offsets};
use super::{Buf, Value, finish};
use crate::dtype::DType;
use crate::ir::{BinaryOp, UnaryOp};
use crate::scalar::{self, Scalar};

/// For an operand of shape `in_shape` broadcast to `out`: `None` when no index map is needed (the
/// shapes are equal), else the flat operand index of every output element.
fn bidx(out: &[usize], in_shape: &[usize]) -> Result<Option<Vec<usize>>, String> {
    if out == in_shape {
        return Ok(None);
    }
    let s = broadcast_strides(out, in_shape).ok_or_else(|| format!("{in_shape:?} does not broadcast to {out:?}"))?;
    Ok(Some(strided_offsets(out, &s, 0)))
}

/// The operand index read for output element `k`.
#[inline]
fn at(map: &Option<Vec<usize>>, k: usize) -> usize {
    map.as_ref().map_or(k, |m| m[k])
}

/// Applies `f` to the broadcast pairs of `a` and `b`.
fn map2<T: Copy, U>(
    (a, ash): (&[T], &[usize]),
    (b, bsh): (&[T], &[usize]),
    out: &[usize],
    mut f: impl FnMut(T, T) -> Result<U, String>,
) -> Result<Vec<U>, String> {
    let (ia, ib) = (bidx(out, ash)?, bidx(out, bsh)?);
    let n: usize = out.iter().product();
    (0..n).map(|k| f(a[at(&ia, k)], b[at(&ib, k)])).collect()
}

/// A float-to-float pointwise function of a float value, rounded to its dtype.
pub(super) fn activation(x: &Value, f: impl Fn(f64) -> f64) -> Result<Value, String> {
    let v = x.f()?;
    finish(x.dtype, x.shape.clone(), Buf::F(v.iter().map(|&a| f(a)).collect()))
}

/// Collects per-element results into the buffer kind of `out` (float elements for a float dtype,
/// integer elements otherwise).
fn collect(out: DType, it: impl Iterator<Item = Result<Scalar, String>>) -> Result<Buf, String> {
    let wrong = || format!("internal: computed the wrong kind of elements for {out}");
    Ok(if out.is_float() {
        Buf::F(
            it.map(|r| r.and_then(|s| if let Scalar::F(x) = s { Ok(x) } else { Err(wrong()) }))
                .collect::<Result<_, _>>()?,
        )
    } else {
        Buf::I(
            it.map(|r| r.and_then(|s| if let Scalar::I(i) = s { Ok(i) } else { Err(wrong()) }))
                .collect::<Result<_, _>>()?,
        )
    })
}

/// Unary op ([`scalar::unary`]); `out` is the node's dtype (bool for isnan/isinf).
pub(super) fn unary(op: UnaryOp, x: &Value, out: DType) -> Result<Value, String> {
    let buf = match &x.buf {
        Buf::F(v) => collect(out, v.iter().map(|&a| scalar::unary_f64(op, a)))?,
        Buf::I(v) => Buf::I(v.iter().map(|&a| scalar::unary_i64(op, a, x.dtype)).collect::<Result<_, _>>()?),
    };
    finish(out, x.shape.clone(), buf)
}

/// Binary op ([`scalar::binary`]) with broadcasting to `shape`; `out` is the node's dtype (bool for
/// comparisons).
pub(super) fn binary(op: BinaryOp, a: &Value, b: &Value, out: DType, shape: Vec<usize>) -> Result<Value, String> {
    let buf = match (&a.buf, &b.buf) {
        (Buf::F(x), Buf::F(y)) => {
            let v = map2((x, &a.shape), (y, &b.shape), &shape, |p, q| scalar::binary_f64(op, p, q))?;
            collect(out, v.into_iter().map(Ok))?
        }
        (Buf::I(x), Buf::I(y)) => {
            Buf::I(map2((x, &a.shape), (y, &b.shape), &shape, |p, q| scalar::binary_i64(op, p, q, a.dtype))?)
        }
        _ => return Err(format!("operand dtypes differ: {} vs {}", a.dtype, b.dtype)),
    };
    finish(out, shape, buf)
}

/// `where(cond, a, b)` with three-way broadcasting to `shape`.
pub(super) fn select(cond: &Value, a: &Value, b: &Value, out: DType, shape: Vec<usize>) -> Result<Value, String> {
    let c = cond.i()?;
    let (ic, ia, ib) = (bidx(&shape, &cond.shape)?, bidx(&shape, &a.shape)?, bidx(&shape, &b.shape)?);
    let n: usize = shape.iter().product();
    let pick = |k: usize| c[at(&ic, k)] != 0;
    let buf = match (&a.buf, &b.buf) {
        (Buf::F(x), Buf::F(y)) => Buf::F((0..n).map(|k| if pick(k) { x[at(&ia, k)] } else { y[at(&ib, k)] }).collect()),
        (Buf::I(x), Buf::I(y)) => Buf::I((0..n).map(|k| if pick(k) { x[at(&ia, k)] } else { y[at(&ib, k)] }).collect()),
        _ => return Err(format!("operand dtypes differ: {} vs {}", a.dtype, b.dtype)),
    };
    finish(out, shape, buf)
}

/// Elementwise conversion ([`scalar::cast`]).
pub(super) fn cast(x: &Value, to: DType) -> Result<Value, String> {
    let buf = match &x.buf {
        Buf::F(v) => collect(to, v.iter().map(|&a| Ok(scalar::cast(Scalar::F(a), x.dtype, to))))?,
        Buf::I(v) => collect(to, v.iter().map(|&a| Ok(scalar::cast(Scalar::I(a), x.dtype, to))))?,
    };
    finish(to, x.shape.clone(), buf)
}
