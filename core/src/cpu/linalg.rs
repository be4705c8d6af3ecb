//! Contractions and windows: matmul, 2-D convolution, 2-D pooling and attention.

use super::index::{broadcast_index, broadcast_shapes, valid_range};
use super::{Buf, Value, finish};
use crate::dtype::DType;
use crate::ir::{PoolKind, Window2d};
use crate::scalar::{fmax_nan, int_key};

/// One batched product: `out[b] += a[ia[b]] @ b[ib[b]]` for `m x k` by `k x n` blocks, summing
/// the `k` products in order with `fma(acc, x, y)`.
#[allow(clippy::too_many_arguments)]
fn batched<T: Copy>(
    x: &[T],
    y: &[T],
    (ia, ib): (&[usize], &[usize]),
    (m, k, n): (usize, usize, usize),
    zero: T,
    fma: impl Fn(T, T, T) -> T,
) -> Vec<T> {
    let mut out = vec![zero; ia.len() * m * n];
    for (bi, (&pa, &pb)) in ia.iter().zip(ib).enumerate() {
        let xa = &x[pa * m * k..][..m * k];
        let yb = &y[pb * k * n..][..k * n];
        let c = &mut out[bi * m * n..][..m * n];
        for i in 0..m {
            let crow = &mut c[i * n..][..n];
            for p in 0..k {
                let av = xa[i * k + p];
                for (cv, &bv) in crow.iter_mut().zip(&yb[p * n..][..n]) {
                    *cv = fma(*cv, av, bv);
                }
            }
        }
    }
    out
}

/// NumPy `matmul`: 1-D operands are promoted (a to a row, b to a column) and the added axis is
/// squeezed from the result; batch axes broadcast. Floats accumulate in `f64`, integers in `i64`
/// (wrapping).
pub(super) fn matmul(a: &Value, b: &Value, out: DType, shape: Vec<usize>) -> Result<Value, String> {
    if a.shape.is_empty() || b.shape.is_empty() {
        return Err("matmul operands must have rank >= 1".into());
    }
    let a2 = if a.shape.len() == 1 { vec![1, a.shape[0]] } else { a.shape.clone() };
    let b2 = if b.shape.len() == 1 { vec![b.shape[0], 1] } else { b.shape.clone() };
    let (ra, rb) = (a2.len(), b2.len());
    let (m, k, n) = (a2[ra - 2], a2[ra - 1], b2[rb - 1]);
    if b2[rb - 2] != k {
        return Err(format!("inner extents differ: {:?} @ {:?}", a.shape, b.shape));
    }
    let (ba, bb) = (&a2[..ra - 2], &b2[..rb - 2]);
    let batch = broadcast_shapes(ba, bb).ok_or_else(|| format!("batch axes {ba:?} and {bb:?} do not broadcast"))?;
    let ia = broadcast_index(&batch, ba).map_err(|e| e.to_string())?;
    let ib = broadcast_index(&batch, bb).map_err(|e| e.to_string())?;
    let buf = match (&a.buf, &b.buf) {
        (Buf::F(x), Buf::F(y)) => Buf::F(batched(x, y, (&ia, &ib), (m, k, n), 0.0, |c, p, q| c + p * q)),
        (Buf::I(x), Buf::I(y)) => {
            Buf::I(batched(x, y, (&ia, &ib), (m, k, n), 0, |c, p, q| c.wrapping_add(p.wrapping_mul(q))))
        }
        _ => return Err(format!("operand dtypes differ: {} vs {}", a.dtype, b.dtype)),
    };
    finish(out, shape, buf)
}

fn nchw(shape: &[usize], what: &str) -> Result<[usize; 4], String> {
    shape.try_into().map_err(|_| format!("{what} must have rank 4, got {shape:?}"))
}

fn check_window(win: &Window2d) -> Result<(), String> {
    if win.stride.contains(&0) || win.dilation.contains(&0) {
        return Err(format!("window strides {:?} and dilations {:?} must be positive", win.stride, win.dilation));
    }
    Ok(())
}

/// 2-D convolution over NCHW input and OIHW weight with stride, padding (top, left, bottom,
/// right), dilation, groups and an optional bias; accumulates in `f64`.
pub(super) fn conv2d(
    x: &Value,
    w: &Value,
    bias: Option<&Value>,
    win: &Window2d,
    groups: usize,
    shape: Vec<usize>,
) -> Result<Value, String> {
    check_window(win)?;
    let (xv, wv) = (x.f()?, w.f()?);
    let bv = bias.map(Value::f).transpose()?;
    let [nb, c, h, wd] = nchw(&x.shape, "conv2d input")?;
    let [o, cg, kh, kw] = nchw(&w.shape, "conv2d weight")?;
    let [_, _, oh, ow] = nchw(&shape, "conv2d output")?;
    if groups == 0 || o % groups != 0 || c != cg * groups {
        return Err(format!("channels do not split into {groups} groups: input {c}, weight {:?}", w.shape));
    }
    let og = o / groups;
    let [sh, sw] = win.stride;
    let [dh, dw] = win.dilation;
    let (pt, pl) = (win.padding[0] as isize, win.padding[1] as isize);
    let mut out = vec![0.0; nb * o * oh * ow];
    for b in 0..nb {
        for oc in 0..o {
            let g = oc / og;
            let plane = &mut out[(b * o + oc) * oh * ow..][..oh * ow];
            for ci in 0..cg {
                let xplane = &xv[(b * c + g * cg + ci) * h * wd..][..h * wd];
                for ky in 0..kh {
                    let offy = (ky * dh) as isize - pt;
                    let (y0, y1) = valid_range(oh, sh, offy, h);
                    for kx in 0..kw {
                        let wval = wv[((oc * cg + ci) * kh + ky) * kw + kx];
                        let offx = (kx * dw) as isize - pl;
                        let (x0, x1) = valid_range(ow, sw, offx, wd);
                        for oy in y0..y1 {
                            let iy = ((oy * sh) as isize + offy) as usize;
                            let xrow = &xplane[iy * wd..][..wd];
                            let prow = &mut plane[oy * ow..][..ow];
                            for (ox, p) in prow.iter_mut().enumerate().take(x1).skip(x0) {
                                *p += wval * xrow[((ox * sw) as isize + offx) as usize];
                            }
                        }
                    }
                }
            }
            if let Some(bv) = bv {
                plane.iter_mut().for_each(|p| *p += bv[oc]);
            }
        }
    }
    finish(x.dtype, shape, Buf::F(out))
}

/// The input positions of one window along one axis: `start + k * dilation` for each tap `k`.
fn taps(start: isize, kernel: usize, dilation: usize) -> impl Iterator<Item = isize> {
    (0..kernel).map(move |k| start + (k * dilation) as isize)
}

/// 2-D pooling over NCHW. Max: padding never wins (NaN propagates). Avg: the divisor is the
/// number of taps inside input + padding (clipped at the padded end, as PyTorch does with
/// `ceil_mode`) when `count_include_pad`, else the number inside the input. A window with no tap
/// inside the input is an error for max pooling and for averaging without `count_include_pad`
/// (PyTorch's argument checks rule such windows out).
pub(super) fn pool2d(
    x: &Value,
    kind: PoolKind,
    win: &Window2d,
    count_include_pad: bool,
    shape: Vec<usize>,
) -> Result<Value, String> {
    check_window(win)?;
    let [nb, c, h, w] = nchw(&x.shape, "pool2d input")?;
    let [_, _, oh, ow] = nchw(&shape, "pool2d output")?;
    let [kh, kw] = win.kernel;
    let [sh, sw] = win.stride;
    let [dh, dw] = win.dilation;
    let [pt, pl, pb, pr] = win.padding.map(|p| p as isize);
    let (hi, wi) = (h as isize, w as isize);
    let inside = |p: isize, n: isize| 0 <= p && p < n;
    let empty = |oy: usize, ox: usize| format!("pooling window at output ({oy}, {ox}) covers only padding");
    let n = nb * c * oh * ow;
    let buf = match (&x.buf, kind) {
        (Buf::F(v), PoolKind::Max) | (Buf::F(v), PoolKind::Avg) => {
            let mut out = Vec::with_capacity(n);
            for plane in 0..nb * c {
                let xp = &v[plane * h * w..][..h * w];
                for oy in 0..oh {
                    let y0 = (oy * sh) as isize - pt;
                    for ox in 0..ow {
                        let x0 = (ox * sw) as isize - pl;
                        let (mut acc, mut count) = (if kind == PoolKind::Max { f64::NEG_INFINITY } else { 0.0 }, 0);
                        for iy in taps(y0, kh, dh).filter(|&p| inside(p, hi)) {
                            for ix in taps(x0, kw, dw).filter(|&p| inside(p, wi)) {
                                let e = xp[iy as usize * w + ix as usize];
                                acc = if kind == PoolKind::Max { fmax_nan(acc, e) } else { acc + e };
                                count += 1;
                            }
                        }
                        let divisor = if kind == PoolKind::Max {
                            1
                        } else if count_include_pad {
                            taps(y0, kh, dh).filter(|&p| p < hi + pb).count()
                                * taps(x0, kw, dw).filter(|&p| p < wi + pr).count()
                        } else {
                            count
                        };
                        if (kind == PoolKind::Max && count == 0) || divisor == 0 {
                            return Err(empty(oy, ox));
                        }
                        out.push(if kind == PoolKind::Max { acc } else { acc / divisor as f64 });
                    }
                }
            }
            Buf::F(out)
        }
        (Buf::I(v), PoolKind::Max) => {
            let u = x.dtype == DType::U64;
            let mut out = Vec::with_capacity(n);
            for plane in 0..nb * c {
                let xp = &v[plane * h * w..][..h * w];
                for oy in 0..oh {
                    let y0 = (oy * sh) as isize - pt;
                    for ox in 0..ow {
                        let x0 = (ox * sw) as isize - pl;
                        let mut best: Option<i64> = None;
                        for iy in taps(y0, kh, dh).filter(|&p| inside(p, hi)) {
                            for ix in taps(x0, kw, dw).filter(|&p| inside(p, wi)) {
                                let e = xp[iy as usize * w + ix as usize];
                                if best.is_none_or(|b| int_key(e, u) > int_key(b, u)) {
                                    best = Some(e);
                                }
                            }
                        }
                        out.push(best.ok_or_else(|| empty(oy, ox))?);
                    }
                }
            }
            Buf::I(out)
        }
        (Buf::I(_), PoolKind::Avg) => return Err(format!("avg_pool2d needs a float operand, got {}", x.dtype)),
    };
    finish(x.dtype, shape, buf)
}

/// `softmax(q k^T * scale [+ mask]) v` over `[..., S, D]` operands with broadcast batch axes. A
/// bool mask keeps the positions where it is true (the rest become `-inf`); a float mask is
/// added. With `causal`, key `j > query i` is masked. Fully masked rows give NaN, as the formula
/// does.
pub(super) fn attention(
    q: &Value,
    k: &Value,
    v: &Value,
    mask: Option<&Value>,
    scale: f64,
    causal: bool,
    shape: Vec<usize>,
) -> Result<Value, String> {
    let (qv, kv, vv) = (q.f()?, k.f()?, v.f()?);
    let r = q.shape.len();
    if r < 2 || k.shape.len() != r || v.shape.len() != r || shape.len() != r {
        return Err(format!("attention ranks differ: {:?}, {:?}, {:?}", q.shape, k.shape, v.shape));
    }
    let (sq, d, sk, dv) = (q.shape[r - 2], q.shape[r - 1], k.shape[r - 2], v.shape[r - 1]);
    let batch = &shape[..r - 2];
    let bidx = |s: &[usize]| broadcast_index(batch, &s[..r - 2]).map_err(|e| e.to_string());
    let (iq, ik, iv) = (bidx(&q.shape)?, bidx(&k.shape)?, bidx(&v.shape)?);
    let mut scores_shape = batch.to_vec();
    scores_shape.extend([sq, sk]);
    let mi = match mask {
        Some(m) => Some(broadcast_index(&scores_shape, &m.shape).map_err(|e| e.to_string())?),
        None => None,
    };
    let mut out = vec![0.0; iq.len() * sq * dv];
    let mut s = vec![0.0; sk];
    for (bi, ((&pq, &pk), &pv)) in iq.iter().zip(&ik).zip(&iv).enumerate() {
        let (qb, kb, vb) = (&qv[pq * sq * d..][..sq * d], &kv[pk * sk * d..][..sk * d], &vv[pv * sk * dv..][..sk * dv]);
        for i in 0..sq {
            let qrow = &qb[i * d..][..d];
            for (j, sj) in s.iter_mut().enumerate() {
                let dot: f64 = qrow.iter().zip(&kb[j * d..][..d]).map(|(a, b)| a * b).sum();
                *sj = dot * scale;
                if let (Some(m), Some(mi)) = (mask, &mi) {
                    let at = mi[(bi * sq + i) * sk + j];
                    match &m.buf {
                        Buf::I(mv) if mv[at] == 0 => *sj = f64::NEG_INFINITY,
                        Buf::I(_) => {}
                        Buf::F(mv) => *sj += mv[at],
                    }
                }
                if causal && j > i {
                    *sj = f64::NEG_INFINITY;
                }
            }
            let mx = s.iter().copied().fold(f64::NEG_INFINITY, fmax_nan);
            s.iter_mut().for_each(|x| *x = (*x - mx).exp());
            let sum: f64 = s.iter().sum();
            let orow = &mut out[(bi * sq + i) * dv..][..dv];
            for (j, &e) in s.iter().enumerate() {
                let p = e / sum;
                for (o, &x) in orow.iter_mut().zip(&vb[j * dv..][..dv]) {
                    *o += p * x;
                }
            }
        }
    }
    finish(q.dtype, shape, Buf::F(out))
}
