//! Resize and Upsample. Resizing is separable: for every resized axis the importer computes, at
//! import time, an `[out, in]` interpolation matrix (nearest, linear or cubic, with every
//! coordinate-transformation mode, antialiasing and `exclude_outside`, following the ONNX
//! reference), then applies it as a gather (one-hot rows) or a matrix product.

use crate::import::{Cx, R};
use sinter_core::ir::{BinaryOp as B, ReduceOp, UnaryOp as U};
use sinter_core::{DType, HostTensor, NodeId, Op};

type Out = R<Vec<Option<NodeId>>>;

pub(super) fn lower(cx: &mut Cx, op: &str) -> Option<Out> {
    let r = match op {
        "Resize" => resize(cx),
        "Upsample" => upsample(cx),
        "GridSample" => grid_sample(cx),
        "AffineGrid" => affine_grid(cx),
        "RoiAlign" => roi_align(cx),
        _ => return None,
    };
    Some(r.map(|x| vec![Some(x)]))
}

/// Interpolation settings shared by all axes.
pub(super) struct Mode {
    pub kind: String,
    pub ctm: String,
    pub nearest: String,
    pub cubic_a: f64,
    pub exclude_outside: bool,
    pub antialias: bool,
    pub extrapolation: f64,
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
    let c: Vec<f64> =
        (start..start + footprint).map(|i| (1.0 - ((i as f64 - r) * scale).abs()).clamp(0.0, 1.0)).collect();
    let s: f64 = c.iter().sum();
    c.into_iter().map(|v| v / s).collect()
}

/// The `[out, in]` weights and per-output extrapolation flags of one axis.
/// The `[out, in]` interpolation matrix of one axis (row-major) and which output positions
/// extrapolate.
pub(super) fn axis_weights(
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
    // Float inputs are interpolated in f32 (as onnxruntime does; f64 would keep the graph off
    // backends without f64, such as WGSL); integers and f64 in f64.
    let wide = if matches!(d, DType::F32 | DType::F16 | DType::BF16) { DType::F32 } else { DType::F64 };
    let mut y = cx.cast(x, wide)?;
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
        cx.guard(xs[a].saturating_mul(outs[a]))?;
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
                let wk = cx.konst(HostTensor::from_f64(wide, vec![inw, outw], &wt));
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
            let ev = cx.scalar(wide, m.extrapolation);
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
    let r = cx.rank(x);
    let symbolic = !cx.sym_shape(x).is_static();
    let xs = if symbolic { vec![1; r] } else { cx.shape(x)? };
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
    if symbolic {
        // Symbolic extents: scales only (sizes fix extents the symbols cannot follow).
        let sc = match (&scales, &sizes) {
            (Some(sc), None) if sc.len() == k => sc,
            _ => {
                cx.shape(x)?; // The usual error.
                return Err(cx.err("scales must hold one value per axis"));
            }
        };
        let mut scale_v = vec![1.0f64; r];
        for (i, &a) in axes.iter().enumerate() {
            scale_v[a] = sc[i];
        }
        return super::resize_sym::resize_symbolic(cx, x, &m, &scale_v);
    }
    let mut scale_v = vec![1.0f64; r];
    let mut outs = xs.clone();
    match (scales, sizes) {
        (_, Some(sz)) => {
            if sz.len() != k || sz.iter().any(|&v| !(0..=1 << 32).contains(&v)) {
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
            if sc.len() != k || sc.iter().any(|&v| v.is_nan() || v <= 0.0 || !v.is_finite()) {
                return Err(cx.err(format!("scales {sc:?} must hold {k} positive values")));
            }
            for (i, &a) in axes.iter().enumerate() {
                scale_v[a] = sc[i];
                outs[a] = (sc[i] * xs[a] as f64) as usize;
            }
        }
        (None, None) => return Err(cx.err("either scales or sizes is required")),
    }
    if outs.iter().fold(1u64, |a, &o| a.saturating_mul(o as u64)) > (1u64 << 32) {
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
    if scales.len() != xs.len() || scales.iter().any(|&v| v.is_nan() || v <= 0.0) {
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
    crate::import::check_dims(&outs).map_err(|m| cx.err(m))?;
    let rois = vec![(0.0, 1.0); xs.len()];
    apply(cx, x, &m, &outs, &scales, &rois)
}

/// `reflect(x)` into `[lo, hi]` by folding at the borders (the reference's `_gs_reflect`).
fn reflect(cx: &mut Cx, x: NodeId, lo: f64, hi: f64) -> R<NodeId> {
    let d = cx.dt(x);
    let rng = hi - lo;
    let fold = |cx: &mut Cx, dx: NodeId, near: f64, far: f64, sign: f64| -> R<NodeId> {
        // n = trunc(dx / rng); r = dx - n * rng; even n: near + sign * r, odd: far - sign * r.
        let q = cx.bin_s(B::Div, dx, rng)?;
        let n = cx.un(U::Floor, q)?;
        let nr = cx.bin_s(B::Mul, n, rng)?;
        let r = cx.bin(B::Sub, dx, nr)?;
        let two = cx.bin_s(B::Mod, n, 2.0)?;
        let z = cx.scalar(d, 0.0);
        let even = cx.bin(B::Eq, two, z)?;
        let sr = cx.bin_s(B::Mul, r, sign)?;
        let a = cx.s_bin(B::Add, near, sr)?;
        let b = cx.s_bin(B::Sub, far, sr)?;
        cx.select(even, a, b)
    };
    let lo_c = cx.scalar(d, lo);
    let hi_c = cx.scalar(d, hi);
    let below = cx.bin(B::Lt, x, lo_c)?;
    let above = cx.bin(B::Gt, x, hi_c)?;
    let dlo = cx.s_bin(B::Sub, lo, x)?;
    let dhi = cx.bin_s(B::Sub, x, hi)?;
    // Clamp the distances at 0 so the unused branch stays finite.
    let dlo = cx.bin_s(B::Max, dlo, 0.0)?;
    let dhi = cx.bin_s(B::Max, dhi, 0.0)?;
    let xl = fold(cx, dlo, lo, hi, 1.0)?;
    let xh = fold(cx, dhi, hi, lo, -1.0)?;
    let inner = cx.select(above, xh, x)?;
    cx.select(below, xl, inner)
}

/// One interpolation tap: (index, validity mask, weight).
type Tap = (NodeId, Option<NodeId>, Option<NodeId>);

/// One bilinear sample of RoiAlign: four (flat index, weight) corners.
type Sample = [(usize, f64); 4];

fn grid_sample(cx: &mut Cx) -> R<NodeId> {
    cx.arity(2, 2)?;
    let (x, grid) = (cx.inp(0)?, cx.inp(1)?);
    let xs = cx.shape(x)?;
    let gs = cx.shape(grid)?;
    let k = xs.len().saturating_sub(2);
    if k == 0 || gs.len() != k + 2 || gs[0] != xs[0] || gs[k + 1] != k {
        return Err(cx.err(format!("input {xs:?} and grid {gs:?} do not fit")));
    }
    let mode = match cx.as_str("mode", if cx.opset >= 20 { "linear" } else { "bilinear" }).as_str() {
        "bilinear" | "linear" => "linear",
        "nearest" => "nearest",
        "bicubic" | "cubic" => "cubic",
        m => return Err(cx.err(format!("unknown mode {m:?}"))),
    };
    let pad = cx.as_str("padding_mode", "zeros");
    if !matches!(pad.as_str(), "zeros" | "border" | "reflection") {
        return Err(cx.err(format!("unknown padding_mode {pad:?}")));
    }
    let align = cx.ai("align_corners", 0) != 0;
    let (n, c) = (xs[0], xs[1]);
    let dims = &xs[2..];
    let outs = &gs[1..k + 1];
    let p: usize = outs.iter().product();
    let dt = cx.dt(x);
    let f = DType::F32;
    let g = cx.cast(grid, f)?;
    let g = cx.reshape(g, &[n, 1, p, k])?;
    // Per spatial dim (in X order), the source coordinate, processed as the reference does.
    let mut coords = Vec::new();
    for (i, &dsz) in dims.iter().enumerate() {
        let gi = cx.slice(g, 3, (k - 1 - i) as i64, (k - i) as i64, 1)?;
        let gi = cx.reshape(gi, &[n, 1, p])?;
        let g1 = cx.bin_s(B::Add, gi, 1.0)?;
        let mut v = if align {
            let h = cx.bin_s(B::Div, g1, 2.0)?;
            cx.bin_s(B::Mul, h, dsz as f64 - 1.0)?
        } else {
            let m = cx.bin_s(B::Mul, g1, dsz as f64)?;
            let m = cx.bin_s(B::Sub, m, 1.0)?;
            cx.bin_s(B::Div, m, 2.0)?
        };
        if mode == "nearest" {
            v = cx.un(U::Round, v)?;
        }
        let (lo, hi) = if align { (0.0, dsz as f64 - 1.0) } else { (-0.5, dsz as f64 - 0.5) };
        match pad.as_str() {
            "border" => {
                let l = cx.scalar(f, lo);
                let h = cx.scalar(f, hi);
                let out = {
                    let a = cx.bin(B::Lt, v, l)?;
                    let b = cx.bin(B::Gt, v, h)?;
                    cx.bin(B::Or, a, b)?
                };
                let cl = cx.bin_s(B::Max, v, 0.0)?;
                let cl = cx.bin_s(B::Min, cl, dsz as f64 - 1.0)?;
                v = cx.select(out, cl, v)?;
            }
            "reflection" => v = reflect(cx, v, lo, hi)?,
            _ => {}
        }
        coords.push((v, lo, hi));
    }
    // Taps per dim: (index, weight) pairs.
    let mut taps: Vec<Vec<(NodeId, Option<NodeId>)>> = Vec::new();
    for &(v, _, _) in &coords {
        let mut t = Vec::new();
        match mode {
            "nearest" => t.push((v, None)),
            _ => {
                let x0 = cx.un(U::Floor, v)?;
                let fr = cx.bin(B::Sub, v, x0)?;
                let offs: &[i64] = if mode == "linear" { &[0, 1] } else { &[-1, 0, 1, 2] };
                for &o in offs {
                    let idx = cx.bin_s(B::Add, x0, o as f64)?;
                    let w = if mode == "linear" {
                        if o == 0 { cx.s_bin(B::Sub, 1.0, fr)? } else { fr }
                    } else {
                        let a = -0.75;
                        // Distance from the tap: |fr - o|.
                        let dd = cx.bin_s(B::Sub, fr, o as f64)?;
                        let dd = cx.un(U::Abs, dd)?;
                        let near = {
                            // (a+2)|x|^3 - (a+3)|x|^2 + 1
                            let x2 = cx.bin(B::Mul, dd, dd)?;
                            let x3 = cx.bin(B::Mul, x2, dd)?;
                            let t1 = cx.bin_s(B::Mul, x3, a + 2.0)?;
                            let t2 = cx.bin_s(B::Mul, x2, a + 3.0)?;
                            let s = cx.bin(B::Sub, t1, t2)?;
                            cx.bin_s(B::Add, s, 1.0)?
                        };
                        let far = {
                            // a|x|^3 - 5a|x|^2 + 8a|x| - 4a
                            let x2 = cx.bin(B::Mul, dd, dd)?;
                            let x3 = cx.bin(B::Mul, x2, dd)?;
                            let t1 = cx.bin_s(B::Mul, x3, a)?;
                            let t2 = cx.bin_s(B::Mul, x2, 5.0 * a)?;
                            let t3 = cx.bin_s(B::Mul, dd, 8.0 * a)?;
                            let s = cx.bin(B::Sub, t1, t2)?;
                            let s = cx.bin(B::Add, s, t3)?;
                            cx.bin_s(B::Sub, s, 4.0 * a)?
                        };
                        let one = cx.scalar(f, 1.0);
                        let is_near = cx.bin(B::Le, dd, one)?;
                        cx.select(is_near, near, far)?
                    };
                    t.push((idx, Some(w)));
                }
            }
        }
        taps.push(t);
    }
    // Fix up an integer index per the padding mode; returns (index i64 in range, valid mask).
    let fix = |cx: &mut Cx, idx: NodeId, dsz: usize, lo: f64, hi: f64| -> R<(NodeId, Option<NodeId>)> {
        match pad.as_str() {
            "zeros" => {
                let z = cx.scalar(f, 0.0);
                let ge = cx.bin(B::Ge, idx, z)?;
                let dl = cx.scalar(f, dsz as f64);
                let lt = cx.bin(B::Lt, idx, dl)?;
                let ok = cx.bin(B::And, ge, lt)?;
                let cl = cx.bin_s(B::Max, idx, 0.0)?;
                let cl = cx.bin_s(B::Min, cl, dsz as f64 - 1.0)?;
                Ok((cx.cast(cl, DType::I64)?, Some(ok)))
            }
            "border" => {
                let cl = cx.bin_s(B::Max, idx, 0.0)?;
                let cl = cx.bin_s(B::Min, cl, dsz as f64 - 1.0)?;
                Ok((cx.cast(cl, DType::I64)?, None))
            }
            _ => {
                let r = reflect(cx, idx, lo, hi)?;
                let i = cx.cast(r, DType::I64)?;
                let i = cx.bin_s(B::Max, i, 0.0)?;
                let i = cx.bin_s(B::Min, i, dsz as f64 - 1.0)?;
                Ok((i, None))
            }
        }
    };
    let mut fixed: Vec<Vec<Tap>> = Vec::new();
    for (i, t) in taps.iter().enumerate() {
        let (_, lo, hi) = coords[i];
        let mut v = Vec::new();
        for &(idx, w) in t {
            let (ii, ok) = fix(cx, idx, dims[i], lo, hi)?;
            v.push((ii, ok, w));
        }
        fixed.push(v);
    }
    let s: usize = dims.iter().product();
    let xf = cx.reshape(x, &[n, c, s])?;
    let xw = cx.cast(xf, f)?;
    let strides = sinter_core::shape::contiguous_strides(dims);
    let mut acc: Option<NodeId> = None;
    let counts: Vec<usize> = fixed.iter().map(|v| v.len()).collect();
    let total: usize = counts.iter().product();
    for combo in 0..total {
        let mut rem = combo;
        let mut lin: Option<NodeId> = None;
        let mut w: Option<NodeId> = None;
        let mut ok: Option<NodeId> = None;
        for i in (0..k).rev() {
            let (ii, okm, wi) = fixed[i][rem % counts[i]];
            rem /= counts[i];
            let term = cx.bin_s(B::Mul, ii, strides[i] as f64)?;
            lin = Some(match lin {
                None => term,
                Some(a) => cx.bin(B::Add, a, term)?,
            });
            if let Some(wi) = wi {
                w = Some(match w {
                    None => wi,
                    Some(a) => cx.bin(B::Mul, a, wi)?,
                });
            }
            if let Some(m) = okm {
                ok = Some(match ok {
                    None => m,
                    Some(a) => cx.bin(B::And, a, m)?,
                });
            }
        }
        let lin = lin.ok_or_else(|| cx.err("no spatial dims"))?;
        let lin = cx.expand(lin, &[n, c, p])?;
        let mut v = cx.add(Op::GatherElements { axis: 2 }, vec![xw, lin])?;
        if let Some(m) = ok {
            let z = cx.scalar(f, 0.0);
            v = cx.select(m, v, z)?;
        }
        if let Some(w) = w {
            v = cx.bin(B::Mul, v, w)?;
        }
        acc = Some(match acc {
            None => v,
            Some(a) => cx.bin(B::Add, a, v)?,
        });
    }
    let y = acc.ok_or_else(|| cx.err("no taps"))?;
    let mut os = vec![n, c];
    os.extend_from_slice(outs);
    let y = cx.reshape(y, &os)?;
    cx.cast(y, dt)
}

fn affine_grid(cx: &mut Cx) -> R<NodeId> {
    cx.arity(2, 2)?;
    let theta = cx.inp(0)?;
    let size = cx.ints(cx.inp(1)?)?;
    let align = cx.ai("align_corners", 0) != 0;
    let ts = cx.shape(theta)?;
    let k = size.len().saturating_sub(2);
    if !(k == 2 || k == 3) || ts.len() != 3 || ts[1] != k || ts[2] != k + 1 || size.iter().any(|&v| v <= 0) {
        return Err(cx.err(format!("theta {ts:?} and size {size:?} do not fit")));
    }
    let n = ts[0];
    if size.iter().any(|&v| v > 1 << 24) {
        return Err(cx.err(format!("size {size:?} is too large")));
    }
    let dims: Vec<usize> = size[2..].iter().map(|&v| v as usize).collect();
    let lin = |d: usize| -> Vec<f64> {
        (0..d)
            .map(|i| {
                if align {
                    if d == 1 { -1.0 } else { -1.0 + 2.0 * i as f64 / (d as f64 - 1.0) }
                } else {
                    -1.0 + (2.0 * i as f64 + 1.0) / d as f64
                }
            })
            .collect()
    };
    let axes: Vec<Vec<f64>> = dims.iter().map(|&d| lin(d)).collect();
    let p: usize = dims.iter().product();
    cx.guard(p.saturating_mul(k + 1))?;
    // Homogeneous base grid rows (x, y[, z], 1), x varying fastest.
    let mut base = Vec::with_capacity(p * (k + 1));
    for q in 0..p {
        let mut rem = q;
        let mut idx = vec![0; k];
        for i in (0..k).rev() {
            idx[i] = rem % dims[i];
            rem /= dims[i];
        }
        for i in (0..k).rev() {
            base.push(axes[i][idx[i]]);
        }
        base.push(1.0);
    }
    let dt = cx.dt(theta);
    let b = cx.konst(HostTensor::from_f64(dt, vec![p, k + 1], &base));
    let tt = cx.permute(theta, &[0, 2, 1])?; // [N, k+1, k]
    let g = cx.matmul(b, tt)?; // [N, p, k]
    let mut os = vec![n];
    os.extend_from_slice(&dims);
    os.push(k);
    cx.reshape(g, &os)
}

/// RoiAlign: the regions (and their batch indices) are import-time values, so every bilinear
/// sample's four positions and weights are constants; the input is gathered at them and
/// averaged (or max-pooled) per output bin.
fn roi_align(cx: &mut Cx) -> R<NodeId> {
    cx.arity(3, 3)?;
    let x = cx.inp(0)?;
    let rois = cx.floats(cx.inp(1)?)?;
    let bidx = cx.ints(cx.inp(2)?)?;
    let xs = cx.shape(x)?;
    if xs.len() != 4 {
        return Err(cx.err("RoiAlign needs NCHW input"));
    }
    let (nb, c, h, w) = (xs[0], xs[1], xs[2], xs[3]);
    if h == 0 || w == 0 {
        return Err(cx.err("empty spatial extents"));
    }
    let nr = bidx.len();
    if rois.len() != nr * 4 || bidx.iter().any(|&b| b < 0 || b as usize >= nb) {
        return Err(cx.err("rois must be [num_rois, 4] with batch indices in range"));
    }
    let (ph_n, pw_n) =
        (cx.ai("output_height", 1).clamp(1, 1 << 12) as usize, cx.ai("output_width", 1).clamp(1, 1 << 12) as usize);
    let ratio = cx.ai("sampling_ratio", 0);
    let scale = cx.af("spatial_scale", 1.0) as f64;
    let half = cx.as_str("coordinate_transformation_mode", "half_pixel") == "half_pixel";
    let max_mode = cx.as_str("mode", "avg") == "max";
    // Per roi and bin: the samples, each 4 (flat index, weight).
    let mut all: Vec<Vec<Vec<Sample>>> = Vec::new();
    let mut counts = Vec::new();
    for r in 0..nr {
        let off = if half { 0.5 } else { 0.0 };
        let (sw, sh) = (rois[4 * r] * scale - off, rois[4 * r + 1] * scale - off);
        let (ew, eh) = (rois[4 * r + 2] * scale - off, rois[4 * r + 3] * scale - off);
        let (mut rw, mut rh) = (ew - sw, eh - sh);
        if !half {
            rw = rw.max(1.0);
            rh = rh.max(1.0);
        }
        let (bh, bw) = (rh / ph_n as f64, rw / pw_n as f64);
        let gh = if ratio > 0 { ratio as usize } else { (rh / ph_n as f64).ceil().max(0.0) as usize };
        let gw = if ratio > 0 { ratio as usize } else { (rw / pw_n as f64).ceil().max(0.0) as usize };
        if gh.saturating_mul(gw).saturating_mul(ph_n * pw_n) > 1 << 20 {
            return Err(cx.err("too many samples per bin"));
        }
        counts.push((gh * gw).max(1) as f64);
        let base = bidx[r] as usize * h * w;
        let mut bins = Vec::new();
        for ph in 0..ph_n {
            for pw in 0..pw_n {
                let mut samples = Vec::new();
                for iy in 0..gh {
                    let yy = sh + ph as f64 * bh + (iy as f64 + 0.5) * bh / gh as f64;
                    for ix in 0..gw {
                        let xx = sw + pw as f64 * bw + (ix as f64 + 0.5) * bw / gw as f64;
                        if yy < -1.0 || yy > h as f64 || xx < -1.0 || xx > w as f64 {
                            samples.push([(base, 0.0); 4]);
                            continue;
                        }
                        let (mut y, mut xv) = (yy.max(0.0), xx.max(0.0));
                        let (mut yl, mut xl) = (y as usize, xv as usize);
                        let yh = if yl >= h - 1 {
                            yl = h - 1;
                            y = yl as f64;
                            yl
                        } else {
                            yl + 1
                        };
                        let xh = if xl >= w - 1 {
                            xl = w - 1;
                            xv = xl as f64;
                            xl
                        } else {
                            xl + 1
                        };
                        let (ly, lx) = (y - yl as f64, xv - xl as f64);
                        let (hy, hx) = (1.0 - ly, 1.0 - lx);
                        samples.push([
                            (base + yl * w + xl, hy * hx),
                            (base + yl * w + xh, hy * lx),
                            (base + yh * w + xl, ly * hx),
                            (base + yh * w + xh, ly * lx),
                        ]);
                    }
                }
                bins.push(samples);
            }
        }
        all.push(bins);
    }
    let s = all.iter().flatten().map(|b| b.len()).max().unwrap_or(0).max(1);
    let bins = ph_n * pw_n;
    let total = nr * bins * s * 4;
    cx.guard(total)?;
    let mut idx = vec![0i64; total];
    let mut wts = vec![0.0f64; total];
    let mut valid = vec![f64::NEG_INFINITY; nr * bins * s];
    for r in 0..nr {
        for b in 0..bins {
            for (k, smp) in all[r][b].iter().enumerate() {
                valid[(r * bins + b) * s + k] = 0.0;
                for (q, &(pos, wt)) in smp.iter().enumerate() {
                    let at = ((r * bins + b) * s + k) * 4 + q;
                    idx[at] = pos as i64;
                    wts[at] = wt;
                }
            }
        }
    }
    let d = cx.dt(x);
    let xt = cx.permute(x, &[1, 0, 2, 3])?;
    let xt = cx.reshape(xt, &[c, nb * h * w])?;
    let ik = cx.konst(HostTensor::from_i64(DType::I64, vec![total], &idx));
    let g = cx.add(Op::Gather { axis: 1 }, vec![xt, ik])?;
    let g = cx.reshape(g, &[c, nr, bins, s, 4])?;
    let wk = cx.konst(HostTensor::from_f64(d, vec![nr, bins, s, 4], &wts));
    let v = cx.bin(B::Mul, g, wk)?;
    let y = if max_mode {
        let m = cx.reduce(ReduceOp::Max, v, &[4], false)?; // [c, nr, bins, s]
        let vk = cx.konst(HostTensor::from_f64(d, vec![nr, bins, s], &valid));
        let m = cx.bin(B::Add, m, vk)?;
        cx.reduce(ReduceOp::Max, m, &[3], false)?
    } else {
        let sum = cx.reduce(ReduceOp::Sum, v, &[3, 4], false)?; // [c, nr, bins]
        let ck = cx.konst(HostTensor::from_f64(d, vec![nr, 1], &counts));
        cx.bin(B::Div, sum, ck)?
    };
    let y = cx.permute(y, &[1, 0, 2])?;
    cx.reshape(y, &[nr, c, ph_n, pw_n])
}
