//! Signal and miscellaneous ops: DFT and STFT (matrix products with cos/sin tables computed at
//! import time), the window functions and MelWeightMatrix (constants), Col2Im (a product with a
//! constant scatter matrix), Det (cofactor expansion for small matrices) and Compress (a gather
//! whose indices come from the import-time known condition).

use crate::import::{Cx, R};
use sinter_core::ir::BinaryOp as B;
use sinter_core::{DType, HostTensor, NodeId, Op};
use std::f64::consts::PI;

type Out = R<Vec<Option<NodeId>>>;

pub(super) fn lower(cx: &mut Cx, op: &str) -> Option<Out> {
    let r = match op {
        "DFT" => dft_op(cx),
        "STFT" => stft(cx),
        "HannWindow" | "HammingWindow" | "BlackmanWindow" => window(cx, op),
        "MelWeightMatrix" => mel(cx),
        "Col2Im" => col2im(cx),
        "Det" => det(cx),
        "Compress" => compress(cx),
        _ => return None,
    };
    Some(r.map(|x| vec![Some(x)]))
}

/// DFT of `x` (`[..., n, c]` with the signal on axis `axis`, c = 1 real or 2 complex) with
/// transform length `len`; returns `[..., k, 2]` (or `[..., len, 1]` for an inverse one-sided
/// transform).
fn dft(cx: &mut Cx, x: NodeId, axis: usize, len: usize, inverse: bool, onesided: bool) -> R<NodeId> {
    let xs = cx.shape(x)?;
    let r = xs.len();
    if r < 2 || axis >= r - 1 || !(xs[r - 1] == 1 || xs[r - 1] == 2) || len == 0 {
        return Err(cx.err(format!("input {xs:?} must be [..., signal, 1 or 2] with the axis before the last")));
    }
    let d = cx.dt(x);
    let xf = cx.cast(x, DType::F64)?;
    // Move the signal axis right before the complex axis' position, then split re/im: [..., n].
    let mut perm: Vec<usize> = (0..r - 1).filter(|&i| i != axis).collect();
    perm.push(axis);
    perm.push(r - 1);
    let xp = cx.permute(xf, &perm)?;
    let ps = cx.shape(xp)?;
    let lead: Vec<usize> = ps[..r - 2].to_vec();
    let n = ps[r - 2];
    let part = |cx: &mut Cx, k: i64| -> R<NodeId> {
        let s = cx.slice(xp, r - 1, k, k + 1, 1)?;
        let mut sh = lead.clone();
        sh.push(n);
        cx.reshape(s, &sh)
    };
    let mut re = part(cx, 0)?;
    let mut im = if xs[r - 1] == 2 { Some(part(cx, 1)?) } else { None };
    // Signal length to use: len (one-sided inverse reads len/2+1 bins).
    let nin = if inverse && onesided { len / 2 + 1 } else { len };
    let fit = |cx: &mut Cx, v: NodeId| -> R<NodeId> {
        let last = lead.len();
        if n >= nin {
            cx.slice(v, last, 0, nin as i64, 1)
        } else {
            let mut pads = vec![(0i64, 0i64); last + 1];
            pads[last] = (0, (nin - n) as i64);
            cx.add(Op::Pad { pads, mode: sinter_core::ir::PadMode::Constant(0.0) }, vec![v])
        }
    };
    re = fit(cx, re)?;
    if let Some(i) = im {
        im = Some(fit(cx, i)?);
    }
    let kout = if inverse && onesided {
        len
    } else if onesided {
        len / 2 + 1
    } else {
        len
    };
    let sign = if inverse { 1.0 } else { -1.0 };
    let scale = if inverse { 1.0 / len as f64 } else { 1.0 };
    cx.guard(nin.saturating_mul(kout))?;
    let mut cm = vec![0.0; nin * kout];
    let mut sm = vec![0.0; nin * kout];
    for a in 0..nin {
        for b in 0..kout {
            // Forward/inverse: row a is the input bin/sample, column b the output.
            let th = 2.0 * PI * ((a * b) % len) as f64 / len as f64;
            let w = if inverse && onesided {
                if a == 0 || (len.is_multiple_of(2) && a == len / 2) { 1.0 } else { 2.0 }
            } else {
                1.0
            };
            cm[a * kout + b] = w * th.cos() * scale;
            sm[a * kout + b] = w * th.sin() * scale;
        }
    }
    let c = cx.konst(HostTensor::from_f64(DType::F64, vec![nin, kout], &cm));
    let s = cx.konst(HostTensor::from_f64(DType::F64, vec![nin, kout], &sm));
    // (re + i im)(cos + s i sin) = re cos - s im sin + i (im cos + s re sin)
    let rc = cx.matmul(re, c)?;
    let rs = cx.matmul(re, s)?;
    let (out_re, out_im) = match im {
        Some(im) => {
            let ic = cx.matmul(im, c)?;
            let is = cx.matmul(im, s)?;
            let isn = cx.bin_s(B::Mul, is, sign)?;
            let rsn = cx.bin_s(B::Mul, rs, sign)?;
            (cx.bin(B::Sub, rc, isn)?, cx.bin(B::Add, ic, rsn)?)
        }
        None => (rc, cx.bin_s(B::Mul, rs, sign)?),
    };
    let mut us = lead.clone();
    us.extend([kout, 1]);
    let out = if inverse && onesided {
        cx.reshape(out_re, &us)?
    } else {
        let a = cx.reshape(out_re, &us)?;
        let b = cx.reshape(out_im, &us)?;
        cx.concat(vec![a, b], r - 1)?
    };
    let inv = crate::import::Cx::inverse_perm(&perm);
    let out = cx.permute(out, &inv)?;
    cx.cast(out, d)
}

fn dft_op(cx: &mut Cx) -> R<NodeId> {
    cx.arity(1, 3)?;
    let x = cx.inp(0)?;
    let r = cx.rank(x);
    let axis = if cx.opset >= 20 {
        match cx.opt(2) {
            Some(a) => cx.ints(a)?.first().copied().unwrap_or(-2),
            None => -2,
        }
    } else {
        cx.ai("axis", 1)
    };
    let axis = cx.axis(axis, r)?;
    let inverse = cx.ai("inverse", 0) != 0;
    let onesided = cx.ai("onesided", 0) != 0;
    let n = cx.shape(x)?[axis];
    let len = match cx.opt(1) {
        Some(l) => {
            let v = cx.ints(l)?.first().copied().unwrap_or(0);
            if v <= 0 || v > 1 << 24 {
                return Err(cx.err(format!("dft_length {v} must be positive")));
            }
            v as usize
        }
        None if inverse && onesided => 2 * n.saturating_sub(1),
        None => n,
    };
    dft(cx, x, axis, len, inverse, onesided)
}

fn stft(cx: &mut Cx) -> R<NodeId> {
    cx.arity(2, 4)?;
    let x = cx.inp(0)?;
    let xs = cx.shape(x)?;
    if xs.len() != 3 {
        return Err(cx.err("signal must be [batch, length, 1 or 2]"));
    }
    let step = cx.ints(cx.inp(1)?)?.first().copied().unwrap_or(0);
    if step <= 0 {
        return Err(cx.err("frame_step must be positive"));
    }
    let window = cx.opt(2);
    if let Some(w) = window
        && cx.rank(w) != 1
    {
        return Err(cx.err("window must be 1-D"));
    }
    let flen = match cx.opt(3) {
        Some(f) => cx.ints(f)?.first().copied().unwrap_or(0),
        None => match window {
            Some(w) => cx.shape(w)?[0] as i64,
            None => xs[1] as i64,
        },
    };
    if flen <= 0 || flen as usize > xs[1] {
        return Err(cx.err(format!("frame_length {flen} does not fit signal length {}", xs[1])));
    }
    if step > 1 << 32 {
        return Err(cx.err("frame_step is too large"));
    }
    let (flen, step) = (flen as usize, step as usize);
    let wlen = match window {
        Some(w) => cx.shape(w)?[0],
        None => flen,
    };
    let frames = 1 + (xs[1] - flen) / step;
    let mut parts = Vec::new();
    for f in 0..frames {
        let b = f * step;
        let e = (b + wlen).min(xs[1]);
        let s = cx.slice(x, 1, b as i64, e as i64, 1)?;
        let s = if e - b < wlen {
            cx.add(
                Op::Pad {
                    pads: vec![(0, 0), (0, (wlen - (e - b)) as i64), (0, 0)],
                    mode: sinter_core::ir::PadMode::Constant(0.0),
                },
                vec![s],
            )?
        } else {
            s
        };
        parts.push(cx.reshape(s, &[xs[0], 1, wlen, xs[2]])?);
    }
    let mut fr = cx.concat(parts, 1)?; // [B, frames, wlen, c]
    if let Some(w) = window {
        let w = cx.cast(w, cx.dt(x))?;
        let w = cx.reshape(w, &[1, 1, wlen, 1])?;
        fr = cx.bin(B::Mul, fr, w)?;
    }
    let onesided = cx.ai("onesided", 1) != 0;
    dft(cx, fr, 2, flen, false, onesided)
}

fn window(cx: &mut Cx, op: &str) -> R<NodeId> {
    cx.arity(1, 1)?;
    let size = cx.ints(cx.inp(0)?)?.first().copied().unwrap_or(-1);
    if !(0..=(1 << 24)).contains(&size) {
        return Err(cx.err(format!("window size {size} out of range")));
    }
    let n = size as usize;
    let periodic = cx.ai("periodic", 1) != 0;
    let dt = match cx.ai_opt("output_datatype") {
        Some(_) => cx.dtype_attr("output_datatype")?,
        None => DType::F32,
    };
    let n1 = if periodic { n as f64 } else { n as f64 - 1.0 };
    let v: Vec<f64> = (0..n)
        .map(|i| {
            let i = i as f64;
            match op {
                "HannWindow" => (i * PI / n1).sin().powi(2),
                "HammingWindow" => {
                    let a = 25.0 / 46.0;
                    a - (i * PI * 2.0 / n1).cos() * (1.0 - a)
                }
                _ => 0.42 - 0.5 * (i * PI * 2.0 / n1).cos() + 0.08 * (i * PI * 4.0 / n1).cos(),
            }
        })
        .collect();
    Ok(cx.konst(HostTensor::from_f64(dt, vec![n], &v)))
}

fn mel(cx: &mut Cx) -> R<NodeId> {
    cx.arity(5, 5)?;
    let num = cx.ints(cx.inp(0)?)?.first().copied().unwrap_or(0);
    let dft_len = cx.ints(cx.inp(1)?)?.first().copied().unwrap_or(0);
    let rate = cx.ints(cx.inp(2)?)?.first().copied().unwrap_or(0);
    let lo = cx.floats(cx.inp(3)?)?.first().copied().unwrap_or(0.0);
    let hi = cx.floats(cx.inp(4)?)?.first().copied().unwrap_or(0.0);
    if num <= 0 || dft_len <= 0 || rate <= 0 || num > 1 << 16 || dft_len > 1 << 24 {
        return Err(cx.err("num_mel_bins, dft_length and sample_rate must be positive and sane"));
    }
    let (num, bins) = (num as usize, (dft_len / 2 + 1) as usize);
    cx.guard(num.saturating_mul(bins))?;
    let to_mel = |f: f64| 2595.0 * (f / 700.0).ln_1p() / 10f64.ln();
    let (lm, hm) = (to_mel(lo), to_mel(hi));
    let step = (hm - lm) / (num + 2) as f64;
    let fb: Vec<i64> = (0..num + 2)
        .map(|i| {
            let m = i as f64 * step + lm;
            let hz = 700.0 * (m / 2595.0 * 10f64.ln()).exp_m1();
            (((dft_len + 1) as f64 * hz) / rate as f64).floor() as i64
        })
        .collect();
    let mut out = vec![0.0f64; bins * num];
    let mut set = |j: i64, i: usize, v: f64| -> R<()> {
        if j < 0 || j as usize >= bins {
            return Err(cx.err("mel bin outside the spectrogram"));
        }
        out[j as usize * num + i] = v;
        Ok(())
    };
    for i in 0..num {
        let (l, c, h) = (fb[i], fb[i + 1], fb[i + 2]);
        if c - l == 0 {
            set(c, i, 1.0)?;
        } else {
            for j in l..=c {
                set(j, i, (j - l) as f64 / (c - l) as f64)?;
            }
        }
        if h - c > 0 {
            for j in c..h {
                set(j, i, (h - j) as f64 / (h - c) as f64)?;
            }
        }
    }
    let dt = match cx.ai_opt("output_datatype") {
        Some(_) => cx.dtype_attr("output_datatype")?,
        None => DType::F32,
    };
    Ok(cx.konst(HostTensor::from_f64(dt, vec![bins, num], &out)))
}

fn col2im(cx: &mut Cx) -> R<NodeId> {
    cx.arity(3, 3)?;
    let x = cx.inp(0)?;
    let image = cx.ints(cx.inp(1)?)?;
    let block = cx.ints(cx.inp(2)?)?;
    let xs = cx.shape(x)?;
    let n = image.len();
    if xs.len() != 3 || block.len() != n || image.iter().chain(&block).any(|&v| !(1..=1 << 20).contains(&v)) {
        return Err(cx.err(format!("input {xs:?}, image_shape {image:?}, block_shape {block:?} do not fit")));
    }
    let list = |name: &str, d: i64, len: usize| -> R<Vec<i64>> {
        match cx.aints(name) {
            Some(v) if !v.is_empty() => {
                if v.len() != len || v.iter().any(|&x| !(0..=1 << 20).contains(&x)) {
                    return Err(cx.err(format!("{name} {v:?} must hold {len} values")));
                }
                Ok(v)
            }
            _ => Ok(vec![d; len]),
        }
    };
    let dil = list("dilations", 1, n)?;
    let pads = list("pads", 0, 2 * n)?;
    let strides = list("strides", 1, n)?;
    if strides.contains(&0) || dil.contains(&0) {
        return Err(cx.err("strides and dilations must be positive"));
    }
    let k: usize = block.iter().map(|&v| v as usize).product();
    if xs[1] % k != 0 {
        return Err(cx.err(format!("channels {} not divisible by the block size {k}", xs[1])));
    }
    let c = xs[1] / k;
    let cols: Vec<i64> =
        (0..n).map(|i| (image[i] + pads[i] + pads[i + n] - (dil[i] * (block[i] - 1) + 1)) / strides[i] + 1).collect();
    let l: i64 = cols.iter().product();
    if cols.iter().any(|&v| v <= 0) || l as usize != xs[2] {
        return Err(cx.err(format!("{} blocks given, {cols:?} expected", xs[2])));
    }
    let p: usize = image.iter().map(|&v| v as usize).product();
    cx.guard(k.saturating_mul(xs[2]).saturating_mul(p))?;
    let mut m = vec![0.0f64; k * xs[2] * p];
    for kk in 0..k {
        let mut off = vec![0i64; n];
        let mut rem = kk;
        for i in (0..n).rev() {
            off[i] = (rem % block[i] as usize) as i64;
            rem /= block[i] as usize;
        }
        for col in 0..xs[2] {
            let mut ci = vec![0i64; n];
            let mut rem = col;
            for i in (0..n).rev() {
                ci[i] = (rem % cols[i] as usize) as i64;
                rem /= cols[i] as usize;
            }
            let mut pos = 0i64;
            let mut inside = true;
            for i in 0..n {
                let v = ci[i] * strides[i] - pads[i] + off[i] * dil[i];
                if v < 0 || v >= image[i] {
                    inside = false;
                }
                pos = pos * image[i] + v;
            }
            if inside {
                m[(kk * xs[2] + col) * p + pos as usize] = 1.0;
            }
        }
    }
    let d = cx.dt(x);
    let mk = cx.konst(HostTensor::from_f64(d, vec![k * xs[2], p], &m));
    let xr = cx.reshape(x, &[xs[0], c, k * xs[2]])?;
    let y = cx.matmul(xr, mk)?;
    let mut os = vec![xs[0], c];
    os.extend(image.iter().map(|&v| v as usize));
    cx.reshape(y, &os)
}

/// Determinant of `[..., n, n]` by cofactor expansion along the first row (n <= 5).
fn det(cx: &mut Cx) -> R<NodeId> {
    cx.arity(1, 1)?;
    let x = cx.inp(0)?;
    let xs = cx.shape(x)?;
    let r = xs.len();
    if r < 2 || xs[r - 1] != xs[r - 2] {
        return Err(cx.err(format!("Det needs square matrices, got {xs:?}")));
    }
    let n = xs[r - 1];
    if n > 5 {
        return Err(cx.unsup(format!("Det of {n}x{n} matrices (cofactor expansion is limited to 5x5)")));
    }
    let lead = xs[..r - 2].to_vec();
    // Entry (i, j) as a [...] tensor.
    let mut entries = vec![vec![x; n]; n];
    for (i, row) in entries.iter_mut().enumerate() {
        for (j, e) in row.iter_mut().enumerate() {
            let a = cx.slice(x, r - 2, i as i64, i as i64 + 1, 1)?;
            let b = cx.slice(a, r - 1, j as i64, j as i64 + 1, 1)?;
            *e = cx.reshape(b, &lead)?;
        }
    }
    fn rec(cx: &mut Cx, e: &[Vec<NodeId>], rows: &[usize], cols: &[usize]) -> R<NodeId> {
        if rows.len() == 1 {
            return Ok(e[rows[0]][cols[0]]);
        }
        let mut acc: Option<NodeId> = None;
        for (k, &c) in cols.iter().enumerate() {
            let rest: Vec<usize> = cols.iter().copied().filter(|&x| x != c).collect();
            let minor = rec(cx, e, &rows[1..], &rest)?;
            let t = cx.bin(B::Mul, e[rows[0]][c], minor)?;
            acc = Some(match acc {
                None => t,
                Some(a) => cx.bin(if k % 2 == 0 { B::Add } else { B::Sub }, a, t)?,
            });
        }
        acc.ok_or_else(|| cx.err("empty matrix"))
    }
    let idx: Vec<usize> = (0..n).collect();
    let d = rec(cx, &entries, &idx, &idx)?;
    if n == 1 {
        return cx.bin_s(B::Mul, d, 1.0);
    }
    Ok(d)
}

fn compress(cx: &mut Cx) -> R<NodeId> {
    cx.arity(2, 2)?;
    let (x, c) = (cx.inp(0)?, cx.inp(1)?);
    let cond = cx.ints(c)?;
    let xs = cx.shape(x)?;
    let (data, axis, n) = match cx.ai_opt("axis") {
        Some(a) => {
            let a = cx.axis(a, xs.len())?;
            (x, a, xs[a])
        }
        None => {
            let total: usize = xs.iter().product();
            (cx.reshape(x, &[total])?, 0, total)
        }
    };
    cx.guard(cond.len())?;
    let idx: Vec<i64> = cond.iter().take(n).enumerate().filter(|(_, v)| **v != 0).map(|(i, _)| i as i64).collect();
    let i = cx.konst(HostTensor::from_i64(DType::I64, vec![idx.len()], &idx));
    cx.add(Op::Gather { axis }, vec![data, i])
}
