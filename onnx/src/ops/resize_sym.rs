//! Resize along symbolic extents (an image whose height and width are symbols): integer upscale
//! factors only, where the output is `s * h` and the interpolation is periodic. Output position
//! `s*i + r` reads the taps `x[clamp(i + d)]` with the weights of phase `r`, the same as
//! [`super::resize`] computes for any interior position; the taps are edge-clamped shifts of the
//! input (pads, no per-position constants), and the phases are interleaved by a reshape.

use super::resize::{Mode, axis_weights};
use crate::import::{Cx, R};
use sinter_core::ir::{BinaryOp as B, PadMode};
use sinter_core::shape::Poly;
use sinter_core::{DType, Dim, NodeId, Op};

/// The largest integer upscale factor handled on a symbolic axis.
const MAX_FACTOR: usize = 64;

/// `x[clamp(i + d, 0, n - 1)]` along `axis` (edge padding, then a crop by negative padding).
fn shift_edge(cx: &mut Cx, x: NodeId, axis: usize, d: i64) -> R<NodeId> {
    if d == 0 {
        return Ok(x);
    }
    let r = cx.rank(x);
    let mut grow = vec![(0i64, 0i64); r];
    let mut crop = vec![(0i64, 0i64); r];
    if d > 0 {
        grow[axis].1 = d;
        crop[axis].0 = -d;
    } else {
        grow[axis].0 = -d;
        crop[axis].1 = d;
    }
    let g = cx.add(Op::Pad { pads: grow, mode: PadMode::Edge }, vec![x])?;
    cx.add(Op::Pad { pads: crop, mode: PadMode::Constant(0.0) }, vec![g])
}

/// Downscales axis `a` by the integer factor `k`: output `o` reads the taps `x[clamp(k*o + d)]`
/// (the weights of an interior position), every `k`-th position kept by a reshape to `[out, k]`.
/// `Err(None)` when the output extent `floor(n / k)` is no expression of the symbols.
fn downscale(cx: &mut Cx, y: NodeId, m: &Mode, a: usize, k: usize) -> Result<NodeId, Option<crate::OnnxError>> {
    let dims = cx.dims(y);
    let n = Poly::of_dim(&dims[a]);
    let out = n.floor_div(k as i64).ok_or(None)?;
    let rem = n.sub(&out.mul(&Poly::constant(k as i64)).ok_or(None)?).and_then(|r| r.as_const()).ok_or(None)?;
    let (np, i0) = (16 * k, 8usize);
    let (w, _) = axis_weights(m, np, 16, 1.0 / k as f64, (0.0, 1.0)).map_err(|e| Some(cx.err(e)))?;
    let mut acc: Option<NodeId> = None;
    for (j, &c) in w[i0 * np..(i0 + 1) * np].iter().enumerate() {
        if c == 0.0 {
            continue;
        }
        let t = shift_edge(cx, y, a, j as i64 - (k * i0) as i64)?;
        let t = if c == 1.0 { t } else { cx.bin_s(B::Mul, t, c)? };
        acc = Some(match acc {
            None => t,
            Some(p) => cx.bin(B::Add, p, t)?,
        });
    }
    let mut v = match acc {
        Some(v) => v,
        None => cx.bin_s(B::Mul, y, 0.0)?,
    };
    if rem > 0 {
        let mut pads = vec![(0i64, 0i64); dims.len()];
        pads[a].1 = -rem;
        v = cx.add(Op::Pad { pads, mode: PadMode::Constant(0.0) }, vec![v])?;
    }
    let od = out.to_dim().ok_or(None)?;
    let mut split = dims.clone();
    split[a] = od.clone();
    split.insert(a + 1, Dim::Static(k));
    let v = cx.reshape_dims(v, split)?;
    let zero = cx.konst(sinter_core::HostTensor::from_i64(DType::I64, vec![1], &[0]));
    let v = cx.add(Op::Gather { axis: a + 1 }, vec![v, zero])?;
    let mut fin = dims;
    fin[a] = od;
    Ok(cx.reshape_dims(v, fin)?)
}

/// Resizes `x` (some extents symbolic) by `scales` per axis (1 leaves an axis alone).
pub(super) fn resize_symbolic(cx: &mut Cx, x: NodeId, m: &Mode, scales: &[f64]) -> R<NodeId> {
    let why = |cx: &Cx, what: &str| {
        cx.unsup(format!(
            "{what} on symbolic extents {} (only integer upscale factors with nearest, linear or cubic \
             interpolation and half_pixel, pytorch_half_pixel or asymmetric coordinates are; specialize the model \
             with graph_for or graph_for_inputs)",
            cx.sym_shape(x)
        ))
    };
    if !matches!(m.ctm.as_str(), "half_pixel" | "pytorch_half_pixel" | "asymmetric" | "half_pixel_symmetric") {
        return Err(why(cx, &format!("coordinate_transformation_mode {:?}", m.ctm)));
    }
    if m.exclude_outside || m.antialias {
        return Err(why(cx, "exclude_outside or antialias"));
    }
    let d = cx.dt(x);
    let wide = if matches!(d, DType::F32 | DType::F16 | DType::BF16) { DType::F32 } else { DType::F64 };
    let mut y = cx.cast(x, wide)?;
    for (a, &s) in scales.iter().enumerate() {
        if (s - 1.0).abs() < 1e-12 {
            continue;
        }
        if s < 1.0 {
            let k = (1.0 / s).round();
            if k < 2.0 || k > MAX_FACTOR as f64 || k * s != 1.0 {
                return Err(why(cx, &format!("scale {s}")));
            }
            y = downscale(cx, y, m, a, k as usize).map_err(|e| e.unwrap_or_else(|| why(cx, &format!("scale {s}"))))?;
            continue;
        }
        if s.fract() != 0.0 || s > MAX_FACTOR as f64 {
            return Err(why(cx, &format!("scale {s}")));
        }
        let f = s as usize;
        // The weights of an interior position of each phase, from a static proxy extent.
        let (n, i0) = (16usize, 8usize);
        let (w, _) = axis_weights(m, n, f * n, s, (0.0, 1.0)).map_err(|e| cx.err(e))?;
        let mut phases = Vec::with_capacity(f);
        for r in 0..f {
            let o = f * i0 + r;
            let mut acc: Option<NodeId> = None;
            for (j, &c) in w[o * n..(o + 1) * n].iter().enumerate() {
                if c == 0.0 {
                    continue;
                }
                let t = shift_edge(cx, y, a, j as i64 - i0 as i64)?;
                let t = if c == 1.0 { t } else { cx.bin_s(B::Mul, t, c)? };
                acc = Some(match acc {
                    None => t,
                    Some(p) => cx.bin(B::Add, p, t)?,
                });
            }
            let v = match acc {
                Some(v) => v,
                None => cx.bin_s(B::Mul, y, 0.0)?,
            };
            let mut dims = cx.dims(v);
            dims.insert(a + 1, Dim::Static(1));
            phases.push(cx.reshape_dims(v, dims)?);
        }
        let z = cx.concat(phases, a + 1)?;
        let mut dims = cx.dims(y);
        dims[a] = Poly::of_dim(&dims[a])
            .mul(&Poly::constant(f as i64))
            .and_then(|p| p.to_dim())
            .ok_or_else(|| cx.err("resized extent overflows"))?;
        y = cx.reshape_dims(z, dims)?;
    }
    if !d.is_float() {
        let r = cx.un(sinter_core::ir::UnaryOp::Round, y)?;
        return cx.cast(r, d);
    }
    cx.cast(y, d)
}
