//! Index arithmetic for the interpreter: strided walks and broadcasting maps. Everything here works
//! on static extents and produces flat element offsets, so the ops can stay simple loops.

use crate::error::Error;
use crate::shape::contiguous_strides;

/// Flat offsets of every element of a strided view, in row-major order of `shape`: element
/// `(i0, ..., ik)` sits at `base + sum_d i_d * strides[d]`. Strides may be zero (broadcast) or
/// negative (reversed slices); the caller guarantees every offset is in range. One allocation (the
/// result); the walk is an odometer over the outer axes with a tight inner loop.
pub fn strided_offsets(shape: &[usize], strides: &[isize], base: isize) -> Vec<usize> {
    debug_assert_eq!(shape.len(), strides.len());
    let n: usize = shape.iter().product();
    let mut out = Vec::with_capacity(n);
    if n == 0 {
        return out;
    }
    let rank = shape.len();
    if rank == 0 {
        out.push(base as usize);
        return out;
    }
    let (inner, inner_stride) = (shape[rank - 1], strides[rank - 1]);
    let mut idx = vec![0usize; rank - 1];
    let mut off = base;
    loop {
        let mut o = off;
        for _ in 0..inner {
            out.push(o as usize);
            o += inner_stride;
        }
        // Advance the odometer over axes 0..rank-1, innermost first.
        let mut d = rank - 1;
        loop {
            if d == 0 {
                return out;
            }
            d -= 1;
            idx[d] += 1;
            off += strides[d];
            if idx[d] < shape[d] {
                break;
            }
            off -= strides[d] * shape[d] as isize;
            idx[d] = 0;
        }
    }
}

/// Row-major strides as `isize`.
pub(crate) fn istrides(shape: &[usize]) -> Vec<isize> {
    contiguous_strides(shape).into_iter().map(|s| s as isize).collect()
}

/// Strides that read a tensor of `in_shape` as if broadcast (NumPy rules, aligned to the right) to
/// `out_shape`: zero along broadcast axes. `None` when the shapes are not broadcast-compatible.
pub(crate) fn broadcast_strides(out_shape: &[usize], in_shape: &[usize]) -> Option<Vec<isize>> {
    if in_shape.len() > out_shape.len() {
        return None;
    }
    let lead = out_shape.len() - in_shape.len();
    let inner = istrides(in_shape);
    let mut s = vec![0isize; out_shape.len()];
    for (i, &d) in in_shape.iter().enumerate() {
        if d == out_shape[lead + i] {
            s[lead + i] = if d == 1 { 0 } else { inner[i] };
        } else if d != 1 {
            return None;
        }
    }
    Some(s)
}

/// For every element of `out_shape` (row-major), the flat index of the element of a tensor of
/// `in_shape` that broadcasting (NumPy rules) reads there. Errs when `in_shape` does not broadcast
/// to `out_shape`.
pub fn broadcast_index(out_shape: &[usize], in_shape: &[usize]) -> Result<Vec<usize>, Error> {
    let s = broadcast_strides(out_shape, in_shape).ok_or_else(|| Error::Build {
        op: "broadcast".into(),
        operands: format!("{in_shape:?}"),
        msg: format!("does not broadcast to {out_shape:?}"),
    })?;
    Ok(strided_offsets(out_shape, &s, 0))
}

/// NumPy broadcasting of static extents; `None` when incompatible.
pub(crate) fn broadcast_shapes(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let r = a.len().max(b.len());
    let get = |s: &[usize], i: usize| if i + s.len() >= r { s[i + s.len() - r] } else { 1 };
    (0..r)
        .map(|i| match (get(a, i), get(b, i)) {
            (x, y) if x == y => Some(x),
            (1, y) => Some(y),
            (x, 1) => Some(x),
            _ => None,
        })
        .collect()
}

/// Splits `shape` around `axis` into (outer, extent, inner) element counts, so that element
/// `(o, i, j)` of the lane view sits at `(o * extent + i) * inner + j`.
pub(crate) fn lanes(shape: &[usize], axis: usize) -> (usize, usize, usize) {
    let outer = shape[..axis].iter().product();
    let inner = shape[axis + 1..].iter().product();
    (outer, shape[axis], inner)
}

/// The range of output positions `o` in `0..out_len` whose input position `o * stride + offset`
/// falls inside `0..in_len` (a window tap's valid outputs). Empty ranges come back as `(0, 0)`.
pub(crate) fn valid_range(out_len: usize, stride: usize, offset: isize, in_len: usize) -> (usize, usize) {
    let stride = stride as isize;
    let lo = if offset >= 0 { 0 } else { (-offset + stride - 1) / stride };
    let last = in_len as isize - 1 - offset;
    let hi = if last < 0 { 0 } else { last / stride + 1 };
    let (lo, hi) = (lo as usize, (hi as usize).min(out_len));
    if lo < hi { (lo, hi) } else { (0, 0) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strided_offsets_walks_permutations_and_reversals() {
        // A [2, 3] tensor read transposed: shape [3, 2], strides [1, 3].
        assert_eq!(strided_offsets(&[3, 2], &[1, 3], 0), vec![0, 3, 1, 4, 2, 5]);
        // Reversed last axis of [2, 3].
        assert_eq!(strided_offsets(&[2, 3], &[3, -1], 2), vec![2, 1, 0, 5, 4, 3]);
        assert_eq!(strided_offsets(&[], &[], 7), vec![7]);
        assert!(strided_offsets(&[2, 0, 3], &[0, 0, 1], 0).is_empty());
    }

    #[test]
    fn broadcast_index_maps_each_output_element() {
        assert_eq!(broadcast_index(&[2, 3], &[3]).unwrap(), vec![0, 1, 2, 0, 1, 2]);
        assert_eq!(broadcast_index(&[2, 3], &[2, 1]).unwrap(), vec![0, 0, 0, 1, 1, 1]);
        assert_eq!(broadcast_index(&[2, 2], &[]).unwrap(), vec![0, 0, 0, 0]);
        assert!(broadcast_index(&[2, 3], &[2]).is_err());
        assert!(broadcast_index(&[3], &[1, 3]).is_err());
    }

    #[test]
    fn broadcast_shapes_follows_numpy() {
        assert_eq!(broadcast_shapes(&[4, 1, 3], &[2, 1]), Some(vec![4, 2, 3]));
        assert_eq!(broadcast_shapes(&[], &[5]), Some(vec![5]));
        assert_eq!(broadcast_shapes(&[2], &[3]), None);
    }

    #[test]
    fn valid_range_bounds_window_taps() {
        // in_len 5, stride 2, offset -1: positions -1, 1, 3, 5, 7 -> valid o = 1, 2.
        assert_eq!(valid_range(5, 2, -1, 5), (1, 3));
        assert_eq!(valid_range(3, 1, 0, 3), (0, 3));
        assert_eq!(valid_range(3, 1, 5, 3), (0, 0));
        assert_eq!(valid_range(2, 1, -4, 3), (0, 0));
    }
}
