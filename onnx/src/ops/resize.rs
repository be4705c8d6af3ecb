//! Resize and Upsample. Resizing is separable: for every resized axis the importer computes, at
//! import time, an `[out, in]` interpolation matrix (nearest, linear or cubic, with every
//! coordinate-transformation mode, antialiasing and `exclude_outside`, following the ONNX
//! reference), then applies it as a gather (one-hot rows) or a matrix product.

use crate::import::{Cx, R};
use sinter_core::ir::BinaryOp as B;
use sinter_core::{DType, HostTensor, NodeId, Op};

type Out = R<Vec<Option<NodeId>>>;

pub(super) fn lower(cx: &mut Cx, op: &str) -> Option<Out> {
    let r = match op {
        "Resize" => resize(cx),
        "Upsample" => upsample(cx),
        _ => return None,
    };
    Some(r.map(|x| vec![Some(x)]))
}

/// Interpolation settings shared by all axes.
struct Mode {
    kind: String,
    ctm: String,
    nearest: String,
    cubic_a: f64,
    exclude_outside: bool,
    antialias: bool,
    extrapolation: f64,
}

fn nearest_coeffs(ratio: f64, mode: &str) -> Vec<f64> {
    if ratio.fract() == 0.0 {
        return vec![0.0, 1.0];
    }
    let b = |c: bool| c as u8 as f64;
    match mode {
        "round_prefer_ceil" => vec![b(ratio < 0.5), b(ratio >= 0.5)],
        "floor" => vec![1.0, 0.0],
        "ceil" => vec![0.0, 1.0],
        _ => vec![b(ratio <= 0.5), b(ratio > 0.5)],
    }
}

fn cubic_coeffs(r: f64, a: f64) -> Vec<f64> {
    let s = 1.0 - r;
    vec![
        ((a * (r + 1.0) - 5.0 * a) * (r + 1.0) + 8.0 * a) * (r + 1.0) - 4.0 * a,
        ((a + 2.0) * r - (a + 3.0)) * r * r + 1.0,
        ((a + 2.0) * s - (a + 3.0)) * s * s + 1.0,
        ((a * (s + 1.0) - 5.0 * a) * (s + 1.0) + 8.0 * a) * (s + 1.0) - 4.0 * a,
    ]
}

fn cubic_coeffs_antialias(r: f64, scale: f64, a: f64) -> Vec<f64> {
    let scale = scale.min(1.0);
    let f = |x: f64| {
        let x = x.abs();
        let (x2, x3) = (x * x, x * x * x);
        if x <= 1.0 {
            (a + 2.0) * x3 - (a + 3.0) * x2 + 1.0
        } else if x < 2.0 {
            a * x3 - 5.0 * a * x2 + 8.0 * a * x - 4.0 * a
        } else {
            0.0
        }
    };
    let start = (-2.0 / scale).floor() as i64 + 1;
    let end = 2 - start;
    let c: Vec<f64> = (start..end).map(|i| f(scale * (i as f64 - r))).collect();
    let s: f64 = c.iter().sum();
    c.into_iter().map(|v| v / s).collect()
}

fn linear_coeffs_antialias(r: f64, scale: f64) -> Vec<f64> {
    let scale = scale.min(1.0);
    let start = (-1.0 / scale).floor() as i64 + 1;
    let footprint = 2 - 2 * start;
    let c: Vec<f64> = (start..start + footprint).map(|i| (1.0 - ((i as f64 - r) * scale).abs()).clamp(0.0, 1.0)).collect();
    let s: f64 = c.iter().sum();
    c.into_iter().map(|v| v / s).collect()
}

/// The `[out, in]` weights and per-output extrapolation flags of one axis.
fn axis_weights(
    m: &Mode,
    inw: usize,
    outw: usize,
    scale: f64,
    roi: (f64, f64),
) -> Result<(Vec<f64>, Vec<bool>), String> {
    let fw = scale * inw as f64;
    let mut w = vec![0.0f64; outw * inw];
    let mut ext = vec![false; outw];
    for y in 0..outw {
        let yf = y as f64;
        let x = match m.ctm.as_str() {
            "align_corners" => {
                if fw == 1.0 {
                    0.0
                } else {
                    yf * (inw as f64 - 1.0) / (fw - 1.0)
                }
            }
            "asymmetric" => yf / scale,
            "tf_crop_and_resize" => {
                let x = if fw == 1.0 {
                    (roi.1 - roi.0) * (inw as f64 - 1.0) / 2.0
                } else {
                    yf * (roi.1 - roi.0) * (inw as f64 - 1.0) / (fw - 1.0)
                };
                let x = x + roi.0 * (inw as f64 - 1.0);
                ext[y] = x < 0.0 || x > inw as f64 - 1.0;
                x
            }
            "pytorch_half_pixel" => {
                if fw == 1.0 {
                    -0.5
                } else {
                    (yf + 0.5) / scale - 0.5
                }
            }
            "half_pixel" => (yf + 0.5) / scale - 0.5,
            "half_pixel_symmetric" => {
                let adj = outw as f64 / fw;
                let center = inw as f64 / 2.0;
                center * (1.0 - adj) + (yf + 0.5) / scale - 0.5
            }
            other => return Err(format!("unknown coordinate_transformation_mode {other:?}")),
        };
        let xi = x.floor();
        let ratio = if x == xi { 1.0 } else { x - xi };
        let mut c = match (m.kind.as_str(), m.antialias) {
            ("nearest", _) => nearest_coeffs(ratio, &m.nearest),
            ("linear", false) => vec![1.0 - ratio, ratio],
            ("linear", true) => linear_coeffs_antialias(ratio, scale),
            ("cubic", false) => cubic_coeffs(ratio, m.cubic_a),
            ("cubic", true) => cubic_coeffs_antialias(ratio, scale, m.cubic_a),
            (k, _) => return Err(format!("unknown mode {k:?}")),
        };
        let n = c.len() as i64;
        let pad = (n + 1) / 2;
        let xp = x + pad as f64;
        let pp = xp.floor();
        let frac = xp - pp;
        let off = if n % 2 == 0 {
            if frac == 0.0 { -(n / 2) } else { -(n / 2) + 1 }
        } else {
            let base = -((n - 1) / 2);
            if frac <= 0.5 { base } else { base + 1 }
        };
        let start = pp as i64 + off;
        let idx: Vec<i64> = (0..n).map(|k| start + k - pad).collect();
        if m.exclude_outside {
            for (k, &i) in idx.iter().enumerate() {
                if i < 0 || i >= inw as i64 {
                    c[k] = 0.0;
                }
            }
            let s: f64 = c.iter().sum();
            let s = if s == 0.0 { 1.0 } else { s };
            c.iter_mut().for_each(|v| *v /= s);
        }
        for (k, &i) in idx.iter().enumerate() {
            let j = i.clamp(0, inw as i64 - 1) as usize;
            w[y * inw + j] += c[k];
        }
    }
    Ok((w, ext))
}

/// Applies resizing along `axes` with per-axis output extents and scales.
fn apply(cx: &mut Cx, x: NodeId, m: &Mode, outs: &[usize], scales: &[f64], rois: &[(f64, f64)]) -> R<NodeId> {
    let xs = cx.shape(x)?;
    let r = xs.len();
    let d = cx.dt(x);
    let mut y = cx.cast(x, DType::F64)?;
    let mut cur = xs.clone();
    let mut changed = false;
    for a in 0..r {
        let trivial = (scales[a] - 1.0).abs() < 1e-9 && outs[a] == xs[a] && rois[a] == (0.0, 1.0);
        if trivial {
            continue;
        }
        if xs[a] == 0 {
            return Err(cx.err("cannot resize an empty axis"));
        }
        let (w, ext) = axis_weights(m, xs[a], outs[a], scales[a], rois[a]).map_err(|e| cx.err(e))?;
        let (inw, outw) = (xs[a], outs[a]);
        let onehot: Option<Vec<i64>> = (0..outw)
            .map(|o| {
                let row = &w[o * inw..(o + 1) * inw];
                let ones: Vec<usize> = (0..inw).filter(|&j| row[j] != 0.0).collect();
                (ones.len() == 1 && row[ones[0]] == 1.0).then(|| ones[0] as i64)
            })
            .collect();
        y = match onehot {
            Some(idx) => {
                let i = cx.konst(HostTensor::from_i64(DType::I64, vec![outw], &idx));
                cx.add(Op::Gather { axis: a }, vec![y, i])?
            }
            None => {
                let (yl, perm) = cx.axis_last(y, a)?;
                let mut wt = vec![0.0; inw * outw];
                for o in 0..outw {
                    for j in 0..inw {
                        wt[j * outw + o] = w[o * inw + j];
                    }
                }
                let wk = cx.konst(HostTensor::from_f64(DType::F64, vec![inw, outw], &wt));
                let p = cx.matmul(yl, wk)?;
                cx.permute(p, &crate::import::Cx::inverse_perm(&perm))?
            }
        };
        cur[a] = outw;
        if ext.iter().any(|&e| e) {
            let mut ms = vec![1; r];
            ms[a] = outw;
            let mk: Vec<i64> = ext.iter().map(|&e| e as i64).collect();
            let mk = cx.konst(HostTensor::from_i64(DType::Bool, ms, &mk));
            let ev = cx.scalar(DType::F64, m.extrapolation);
            y = cx.select(mk, ev, y)?;
        }
        changed = true;
    }
    let _ = cur;
    if !changed {
        y = cx.bin_s(B::Mul, y, 1.0)?;
    }
    if !d.is_float() {
        let r = cx.un(sinter_core::ir::UnaryOp::Round, y)?;
        return cx.cast(r, d);
    }
    cx.cast(y, d)
}

fn resize(cx: &mut Cx) -> R<NodeId> {
    let x = cx.inp(0)?;
    let xs = cx.shape(x)?;
    let r = xs.len();
    let legacy = cx.opset < 11;
    let m = Mode {
        kind: cx.as_str("mode", "nearest"),
        ctm: if legacy { "asymmetric".into() } else { cx.as_str("coordinate_transformation_mode", "half_pixel") },
        nearest: if legacy { "round_prefer_floor".into() } else { cx.as_str("nearest_mode", "round_prefer_floor") },
        cubic_a: cx.af("cubic_coeff_a", -0.75) as f64,
        exclude_outside: cx.ai("exclude_outside", 0) != 0,
        antialias: cx.ai("antialias", 0) != 0,
        extrapolation: cx.af("extrapolation_value", 0.0) as f64,
    };
    let (roi, scales, sizes) = if legacy {
        cx.arity(2, 2)?;
        (None, Some(cx.floats(cx.inp(1)?)?), None)
    } else {
        cx.arity(1, 4)?;
        let get_f = |cx: &Cx, i: usize| -> R<Option<Vec<f64>>> {
            match cx.opt(i) {
                Some(v) => {
                    let f = cx.floats(v)?;
                    Ok(if f.is_empty() { None } else { Some(f) })
                }
                None => Ok(None),
            }
        };
        let roi = get_f(cx, 1)?;
        let scales = get_f(cx, 2)?;
        let sizes = match cx.opt(3) {
            Some(v) => {
                let s = cx.ints(v)?;
                if s.is_empty() { None } else { Some(s) }
            }
            None => None,
        };
        (roi, scales, sizes)
    };
    let axes: Vec<usize> = match cx.aints("axes") {
        Some(a) if !a.is_empty() => a.iter().map(|&a| cx.axis(a, r)).collect::<R<_>>()?,
        _ => (0..r).collect(),
    };
    let k = axes.len();
    let mut scale_v = vec![1.0f64; r];
    let mut outs = xs.clone();
    match (scales, sizes) {
        (_, Some(sz)) => {
            if sz.len() != k || sz.iter().any(|&v| v < 0) {
                return Err(cx.err(format!("sizes {sz:?} must hold {k} non-negative values")));
            }
            for (i, &a) in axes.iter().enumerate() {
                scale_v[a] = sz[i] as f64 / xs[a] as f64;
                outs[a] = sz[i] as usize;
            }
            let policy = cx.as_str("keep_aspect_ratio_policy", "stretch");
            if policy != "stretch" {
                let vals = axes.iter().map(|&a| scale_v[a]);
                let s = match policy.as_str() {
                    "not_larger" => vals.fold(f64::INFINITY, f64::min),
                    "not_smaller" => vals.fold(f64::NEG_INFINITY, f64::max),
                    p => return Err(cx.err(format!("unknown keep_aspect_ratio_policy {p:?}"))),
                };
                for &a in &axes {
                    scale_v[a] = s;
                    outs[a] = (s * xs[a] as f64 + 0.5) as usize;
                }
            }
        }
        (Some(sc), None) => {
            if sc.len() != k || sc.iter().any(|&v| !(v > 0.0) || !v.is_finite()) {
                return Err(cx.err(format!("scales {sc:?} must hold {k} positive values")));
            }
            for (i, &a) in axes.iter().enumerate() {
                scale_v[a] = sc[i];
                outs[a] = (sc[i] * xs[a] as f64) as usize;
            }
        }
        (None, None) => return Err(cx.err("either scales or sizes is required")),
    }
    if outs.iter().map(|&o| o as u64).product::<u64>() > (1u64 << 32) {
        return Err(cx.err(format!("output shape {outs:?} is too large")));
    }
    let mut rois = vec![(0.0, 1.0); r];
    if m.ctm == "tf_crop_and_resize" {
        let roi = roi.ok_or_else(|| cx.err("tf_crop_and_resize needs roi"))?;
        if roi.len() != 2 * k {
            return Err(cx.err(format!("roi must hold {} values", 2 * k)));
        }
        for (i, &a) in axes.iter().enumerate() {
            rois[a] = (roi[i], roi[k + i]);
        }
    }
    apply(cx, x, &m, &outs, &scale_v, &rois)
}

fn upsample(cx: &mut Cx) -> R<NodeId> {
    let x = cx.inp(0)?;
    let xs = cx.shape(x)?;
    let scales: Vec<f64> = if cx.opset < 9 {
        cx.afloats("scales").ok_or_else(|| cx.err("scales is required"))?.iter().map(|&v| v as f64).collect()
    } else {
        cx.arity(2, 2)?;
        cx.floats(cx.inp(1)?)?
    };
    if scales.len() != xs.len() || scales.iter().any(|&v| !(v > 0.0)) {
        return Err(cx.err(format!("scales {scales:?} must hold {} positive values", xs.len())));
    }
    let m = Mode {
        kind: cx.as_str("mode", "nearest"),
        ctm: "asymmetric".into(),
        nearest: "floor".into(),
        cubic_a: -0.75,
        exclude_outside: false,
        antialias: false,
        extrapolation: 0.0,
    };
    let outs: Vec<usize> = xs.iter().zip(&scales).map(|(&d, &s)| (d as f64 * s) as usize).collect();
    let rois = vec![(0.0, 1.0); xs.len()];
    apply(cx, x, &m, &outs, &scales, &rois)
}
