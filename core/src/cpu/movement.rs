//! Movement ops (permute, expand, slice, concat, pad) and gathers. None does arithmetic: each builds
//! the source offset of every output element and copies.

use super::index::{broadcast_index, istrides, lanes, strided_offsets};
use super::{Buf, Value, finish};
use crate::dtype::DType;
use crate::ir::{PadMode, SliceDim};
use crate::shape::contiguous_strides;
use crate::tensor::float_to_i64;

/// A value of `x`'s dtype with the elements of `x` at `offsets`.
fn take(x: &Value, shape: Vec<usize>, offsets: &[usize]) -> Result<Value, String> {
    finish(x.dtype, shape, x.buf.gather(offsets))
}

/// Output axis `i` is input axis `perm[i]`.
pub(super) fn permute(x: &Value, perm: &[usize]) -> Result<Value, String> {
    let st = istrides(&x.shape);
    let shape: Vec<usize> = perm.iter().map(|&a| x.shape[a]).collect();
    let strides: Vec<isize> = perm.iter().map(|&a| st[a]).collect();
    take(x, shape.clone(), &strided_offsets(&shape, &strides, 0))
}

/// Broadcast to `shape`.
pub(super) fn expand(x: &Value, shape: Vec<usize>) -> Result<Value, String> {
    let idx = broadcast_index(&shape, &x.shape).map_err(|e| e.to_string())?;
    take(x, shape, &idx)
}

/// Strided slice: output element `i` of axis `d` reads input element `start + i * step`.
pub(super) fn slice(x: &Value, dims: &[SliceDim]) -> Result<Value, String> {
    let st = istrides(&x.shape);
    let shape: Vec<usize> = dims.iter().map(|d| d.len).collect();
    let strides: Vec<isize> = dims.iter().zip(&st).map(|(d, &s)| s * d.step as isize).collect();
    let base: isize = dims.iter().zip(&st).map(|(d, &s)| if d.len > 0 { d.start as isize * s } else { 0 }).sum();
    take(x, shape.clone(), &strided_offsets(&shape, &strides, base))
}

/// Concatenation along `axis`.
pub(super) fn concat(args: &[&Value], axis: usize, shape: Vec<usize>) -> Result<Value, String> {
    let first = args.first().ok_or("concat of nothing")?;
    let (outer, _, inner) = lanes(&shape, axis);
    let n: usize = shape.iter().product();
    let buf = match &first.buf {
        Buf::F(_) => {
            let parts: Vec<&[f64]> = args.iter().map(|a| a.f()).collect::<Result<_, _>>()?;
            Buf::F(concat_parts(&parts, args, axis, outer, inner, n))
        }
        Buf::I(_) => {
            let parts: Vec<&[i64]> = args.iter().map(|a| a.i()).collect::<Result<_, _>>()?;
            Buf::I(concat_parts(&parts, args, axis, outer, inner, n))
        }
    };
    finish(first.dtype, shape, buf)
}

fn concat_parts<T: Copy>(parts: &[&[T]], args: &[&Value], axis: usize, outer: usize, inner: usize, n: usize) -> Vec<T> {
    let mut out = Vec::with_capacity(n);
    for o in 0..outer {
        for (p, a) in parts.iter().zip(args) {
            let block = a.shape[axis] * inner;
            out.extend_from_slice(&p[o * block..(o + 1) * block]);
        }
    }
    out
}

/// For one axis of extent `n` padded by `(before, after)`: the input index each output position
/// reads, or `None` for the constant fill. Negative pads crop; for the non-constant modes the crop
/// happens first and the mode then applies to the cropped extent (as torch's circular padding
/// does).
fn pad_map(n: usize, (before, after): (i64, i64), mode: PadMode, out: usize) -> Result<Vec<Option<usize>>, String> {
    let n_i = n as i64;
    if let PadMode::Constant(_) = mode {
        return Ok((0..out as i64).map(|o| o - before).map(|i| (0..n_i).contains(&i).then_some(i as usize)).collect());
    }
    let (crop_b, crop_a) = ((-before).max(0), (-after).max(0));
    let m = (n_i - crop_b - crop_a).max(0);
    let pb = before.max(0);
    (0..out as i64)
        .map(|o| {
            let j = o - pb;
            if (0..m).contains(&j) {
                return Ok(Some((crop_b + j) as usize));
            }
            if m == 0 {
                return Err(format!("cannot pad an empty extent (of {n}) in {mode:?} mode"));
            }
            let r = match mode {
                PadMode::Reflect if m == 1 => 0,
                PadMode::Reflect => {
                    let period = 2 * (m - 1);
                    let r = j.rem_euclid(period);
                    if r >= m { period - r } else { r }
                }
                PadMode::Edge => j.clamp(0, m - 1),
                PadMode::Wrap => j.rem_euclid(m),
                PadMode::Constant(_) => return Err("internal: constant padding takes the other path".into()),
            };
            Ok(Some((crop_b + r) as usize))
        })
        .collect()
}

/// Padding (or cropping, for negative amounts) in one of the [`PadMode`]s.
pub(super) fn pad(x: &Value, pads: &[(i64, i64)], mode: PadMode, shape: Vec<usize>) -> Result<Value, String> {
    let st = contiguous_strides(&x.shape);
    let maps: Vec<Vec<Option<usize>>> = (0..shape.len())
        .map(|d| {
            pad_map(x.shape[d], pads[d], mode, shape[d]).map(|m| m.into_iter().map(|i| i.map(|i| i * st[d])).collect())
        })
        .collect::<Result<_, _>>()?;
    let n: usize = shape.iter().product();
    // Source offset per output element (None: fill).
    let mut src = Vec::with_capacity(n);
    let mut coord = vec![0usize; shape.len()];
    for _ in 0..n {
        let mut off = Some(0usize);
        for (d, &c) in coord.iter().enumerate() {
            off = match (off, maps[d][c]) {
                (Some(a), Some(b)) => Some(a + b),
                _ => None,
            };
        }
        src.push(off);
        for d in (0..shape.len()).rev() {
            coord[d] += 1;
            if coord[d] < shape[d] {
                break;
            }
            coord[d] = 0;
        }
    }
    let fill = match mode {
        PadMode::Constant(c) => c,
        _ => 0.0,
    };
    let buf = match &x.buf {
        Buf::F(v) => Buf::F(src.iter().map(|o| o.map_or(fill, |o| v[o])).collect()),
        Buf::I(v) => {
            let f = if x.dtype == DType::Bool { (fill != 0.0) as i64 } else { float_to_i64(fill) };
            Buf::I(src.iter().map(|o| o.map_or(f, |o| v[o])).collect())
        }
    };
    finish(x.dtype, shape, buf)
}

/// An index read from an integer tensor, made non-negative (negative indices count from the end,
/// once) and then clamped into `0..n`: the one rule every backend follows for out-of-range gather
/// indices (device kernels cannot raise errors, so the reference clamps as they do; the ONNX
/// importer refuses out-of-range indices it knows at import time). A `u64` index above `i64::MAX`
/// reads as huge, so it clamps to `n - 1`. An empty axis has nothing to read: an error.
fn norm_index(i: i64, n: usize, u64_bits: bool, axis: usize) -> Result<usize, String> {
    if n == 0 {
        let shown = if u64_bits { (i as u64).to_string() } else { i.to_string() };
        return Err(format!("index {shown} reads axis {axis} of extent 0"));
    }
    let last = n as i64 - 1;
    let j = if u64_bits && i < 0 {
        last
    } else if i < 0 {
        i + n as i64
    } else {
        i
    };
    Ok(j.clamp(0, last) as usize)
}

/// NumPy `take` along `axis`: output shape `data[..axis] ++ indices ++ data[axis+1..]`.
pub(super) fn gather(data: &Value, indices: &Value, axis: usize, shape: Vec<usize>) -> Result<Value, String> {
    let (outer, n, inner) = lanes(&data.shape, axis);
    let u = indices.dtype == DType::U64;
    let idx: Vec<usize> = indices.i()?.iter().map(|&i| norm_index(i, n, u, axis)).collect::<Result<_, _>>()?;
    let mut src = Vec::with_capacity(outer * idx.len() * inner);
    for o in 0..outer {
        for &i in &idx {
            let base = (o * n + i) * inner;
            src.extend(base..base + inner);
        }
    }
    take(data, shape, &src)
}

/// Elementwise gather: output element `c` reads `data` at `c` with axis `axis` replaced by
/// `indices[c]`.
pub(super) fn gather_elements(data: &Value, indices: &Value, axis: usize) -> Result<Value, String> {
    let shape = indices.shape.clone();
    for (d, (&a, &b)) in shape.iter().zip(&data.shape).enumerate() {
        if d != axis && a > b {
            return Err(format!(
                "indices shape {shape:?} exceeds data shape {:?} on axis {d} (only the gather axis may differ)",
                data.shape
            ));
        }
    }
    let st = istrides(&data.shape);
    let n = data.shape[axis];
    let u = indices.dtype == DType::U64;
    let idx = indices.i()?;
    let mut src = Vec::with_capacity(idx.len());
    let mut coord = vec![0usize; shape.len()];
    for &i in idx {
        let k = norm_index(i, n, u, axis)?;
        let off: isize = coord.iter().enumerate().map(|(d, &c)| if d == axis { k } else { c } as isize * st[d]).sum();
        src.push(off as usize);
        for d in (0..shape.len()).rev() {
            coord[d] += 1;
            if coord[d] < shape[d] {
                break;
            }
            coord[d] = 0;
        }
    }
    take(data, shape, &src)
}
