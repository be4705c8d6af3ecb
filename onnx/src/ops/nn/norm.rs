//! Normalizations: batch, instance, layer, group, RMS and mean-variance normalization, LRN; per-channel parameters broadcast over NCHW.

use super::*;

/// Reshapes a per-channel `[C]` parameter to broadcast over `[N, C, ...]` of rank `r`.
pub(super) fn per_channel(cx: &mut Cx, p: NodeId, r: usize) -> R<NodeId> {
    let s = cx.shape(p)?;
    let mut dims = s.clone();
    dims.extend(std::iter::repeat_n(1, r.saturating_sub(2)));
    cx.reshape(p, &dims)
}

pub(super) fn batch_norm(cx: &mut Cx) -> Out {
    cx.arity(5, 5)?;
    let (x, sc, b, m, v) = (cx.inp(0)?, cx.inp(1)?, cx.inp(2)?, cx.inp(3)?, cx.inp(4)?);
    let eps = cx.af("epsilon", 1e-5) as f64;
    let training = cx.opset >= 14 && cx.ai("training_mode", 0) != 0;
    let d = cx.dt(x);
    if !training {
        if cx.opset < 9 && cx.ai("spatial", 1) == 0 {
            return Err(cx.unsup("spatial=0 batch normalization"));
        }
        let (sc, b, m, v) = (cx.cast(sc, d)?, cx.cast(b, d)?, cx.cast(m, d)?, cx.cast(v, d)?);
        let y = cx.add(Op::BatchNorm { eps }, vec![x, sc, b, m, v])?;
        return Ok(vec![Some(y)]);
    }
    // Training mode: normalize with the batch statistics; update the running ones.
    let momentum = cx.af("momentum", 0.9) as f64;
    let r = cx.rank(x);
    let axes: Vec<usize> = std::iter::once(0).chain(2..r).collect();
    let (y, mean, var) = normalize_per_channel(cx, x, sc, b, &axes, eps)?;
    let cs = cx.shape(m)?;
    let mean1 = cx.reshape(mean, &cs)?;
    let var1 = cx.reshape(var, &cs)?;
    let run = |cx: &mut Cx, old: NodeId, cur: NodeId| -> R<NodeId> {
        let a = cx.bin_s(B::Mul, old, momentum)?;
        let b = cx.bin_s(B::Mul, cur, 1.0 - momentum)?;
        cx.bin(B::Add, a, b)
    };
    let rm = run(cx, m, mean1)?;
    let rv = run(cx, v, var1)?;
    Ok(vec![Some(y), Some(rm), Some(rv)])
}

pub(super) fn instance_norm(cx: &mut Cx) -> R<NodeId> {
    cx.arity(3, 3)?;
    let (x, sc, b) = (cx.inp(0)?, cx.inp(1)?, cx.inp(2)?);
    let eps = cx.af("epsilon", 1e-5) as f64;
    let axes: Vec<usize> = (2..cx.rank(x)).collect();
    Ok(normalize_per_channel(cx, x, sc, b, &axes, eps)?.0)
}

/// `(x - mean) / sqrt(var + eps) * sc + b` with the mean and (biased) variance of `x` over `axes`
/// and the scale and bias per channel (axis 1). Returns the result, the mean and the variance
/// (with kept axes).
pub(super) fn normalize_per_channel(
    cx: &mut Cx,
    x: NodeId,
    sc: NodeId,
    b: NodeId,
    axes: &[usize],
    eps: f64,
) -> R<(NodeId, NodeId, NodeId)> {
    let r = cx.rank(x);
    let mean = cx.reduce(ReduceOp::Mean, x, axes, true)?;
    let c = cx.bin(B::Sub, x, mean)?;
    let sq = cx.bin(B::Mul, c, c)?;
    let var = cx.reduce(ReduceOp::Mean, sq, axes, true)?;
    let ve = cx.bin_s(B::Add, var, eps)?;
    let sd = cx.un(U::Sqrt, ve)?;
    let nrm = cx.bin(B::Div, c, sd)?;
    let scr = per_channel(cx, sc, r)?;
    let br = per_channel(cx, b, r)?;
    let y = cx.bin(B::Mul, nrm, scr)?;
    Ok((cx.bin(B::Add, y, br)?, mean, var))
}

pub(super) fn layer_norm(cx: &mut Cx) -> Out {
    cx.arity(2, 3)?;
    let (x, sc, b) = (cx.inp(0)?, cx.inp(1)?, cx.opt(2));
    let r = cx.rank(x);
    let axis = cx.axis(cx.ai("axis", -1), r)?;
    let eps = cx.af("epsilon", 1e-5) as f64;
    let d = cx.dt(x);
    if !cx.wants(1) && !cx.wants(2) {
        let mut ins = vec![x, sc];
        ins.extend(b);
        let y = cx.add(Op::LayerNorm { axis, eps, has_weight: true, has_bias: b.is_some() }, ins)?;
        return Ok(vec![Some(y)]);
    }
    // With the Mean / InvStdDev outputs: compute explicitly (in f32 at least, per stash_type).
    let wide = if d == DType::F64 { DType::F64 } else { DType::F32 };
    let xw = cx.cast(x, wide)?;
    let axes: Vec<usize> = (axis..r).collect();
    let mean = cx.reduce(ReduceOp::Mean, xw, &axes, true)?;
    let c = cx.bin(B::Sub, xw, mean)?;
    let sq = cx.bin(B::Mul, c, c)?;
    let var = cx.reduce(ReduceOp::Mean, sq, &axes, true)?;
    let ve = cx.bin_s(B::Add, var, eps)?;
    let sd = cx.un(U::Sqrt, ve)?;
    let inv = cx.un(U::Reciprocal, sd)?;
    let nrm = cx.bin(B::Mul, c, inv)?;
    let nrm = cx.cast(nrm, d)?;
    let mut y = cx.bin(B::Mul, nrm, sc)?;
    if let Some(b) = b {
        y = cx.bin(B::Add, y, b)?;
    }
    Ok(vec![Some(y), Some(mean), Some(inv)])
}

pub(super) fn group_norm(cx: &mut Cx) -> R<NodeId> {
    cx.arity(3, 3)?;
    let (x, sc, b) = (cx.inp(0)?, cx.inp(1)?, cx.inp(2)?);
    let xs = cx.shape(x)?;
    let g = cx.ai("num_groups", 0);
    let eps = cx.af("epsilon", 1e-5) as f64;
    if g <= 0 || xs.len() < 2 || xs[1] % g as usize != 0 {
        return Err(cx.err(format!("num_groups {g} does not divide the channels of {xs:?}")));
    }
    let g = g as usize;
    let (n, c) = (xs[0], xs[1]);
    let rest: usize = xs[2..].iter().product();
    let xg = cx.reshape(x, &[n, g, (c / g) * rest])?;
    let mean = cx.reduce(ReduceOp::Mean, xg, &[2], true)?;
    let cen = cx.bin(B::Sub, xg, mean)?;
    let sq = cx.bin(B::Mul, cen, cen)?;
    let var = cx.reduce(ReduceOp::Mean, sq, &[2], true)?;
    let ve = cx.bin_s(B::Add, var, eps)?;
    let sd = cx.un(U::Sqrt, ve)?;
    let nrm = cx.bin(B::Div, cen, sd)?;
    let nrm = cx.reshape(nrm, &xs)?;
    let ss = cx.shape(sc)?;
    let (sc, b) = if ss == [g] && g != c {
        // Opset 18: one scale/bias per group; repeat per channel.
        let a = cx.reshape(sc, &[g, 1])?;
        let a = cx.expand(a, &[g, c / g])?;
        let a = cx.reshape(a, &[c])?;
        let bb = cx.reshape(b, &[g, 1])?;
        let bb = cx.expand(bb, &[g, c / g])?;
        let bb = cx.reshape(bb, &[c])?;
        (a, bb)
    } else {
        (sc, b)
    };
    let scr = per_channel(cx, sc, xs.len())?;
    let br = per_channel(cx, b, xs.len())?;
    let y = cx.bin(B::Mul, nrm, scr)?;
    cx.bin(B::Add, y, br)
}

pub(super) fn rms_norm(cx: &mut Cx) -> R<NodeId> {
    cx.arity(2, 2)?;
    let (x, sc) = (cx.inp(0)?, cx.inp(1)?);
    let r = cx.rank(x);
    let axis = cx.axis(cx.ai("axis", -1), r)?;
    let eps = cx.af("epsilon", 1e-5) as f64;
    let d = cx.dt(x);
    let wide = if d == DType::F64 { DType::F64 } else { DType::F32 };
    let xw = cx.cast(x, wide)?;
    let axes: Vec<usize> = (axis..r).collect();
    let sq = cx.bin(B::Mul, xw, xw)?;
    let ms = cx.reduce(ReduceOp::Mean, sq, &axes, true)?;
    let ve = cx.bin_s(B::Add, ms, eps)?;
    let sd = cx.un(U::Sqrt, ve)?;
    let nrm = cx.bin(B::Div, xw, sd)?;
    let nrm = cx.cast(nrm, d)?;
    let sc = cx.cast(sc, d)?;
    cx.bin(B::Mul, nrm, sc)
}

pub(super) fn lrn(cx: &mut Cx) -> R<NodeId> {
    cx.arity(1, 1)?;
    let x = cx.inp(0)?;
    let xs = cx.shape(x)?;
    let size = cx.ai("size", 0);
    if size <= 0 || size > 1 << 16 || xs.len() < 3 {
        return Err(cx.err("size must be positive and the input at least 3-D"));
    }
    let size = size as usize;
    let (alpha, beta, bias) = (cx.af("alpha", 1e-4) as f64, cx.af("beta", 0.75) as f64, cx.af("bias", 1.0) as f64);
    let sq = cx.bin(B::Mul, x, x)?;
    let before = (size - 1) / 2;
    let after = size - 1 - before;
    let mut pads = vec![(0i64, 0i64); xs.len()];
    pads[1] = (before as i64, after as i64);
    let p = cx.add(Op::Pad { pads, mode: PadMode::Constant(0.0) }, vec![sq])?;
    let c = xs[1];
    let mut acc: Option<NodeId> = None;
    for t in 0..size {
        let s = cx.slice(p, 1, t as i64, (t + c) as i64, 1)?;
        acc = Some(match acc {
            None => s,
            Some(a) => cx.bin(B::Add, a, s)?,
        });
    }
    let sum = acc.ok_or_else(|| cx.err("empty window"))?;
    let t = cx.bin_s(B::Mul, sum, alpha / size as f64)?;
    let t = cx.bin_s(B::Add, t, bias)?;
    let t = cx.bin_s(B::Pow, t, beta)?;
    cx.bin(B::Div, x, t)
}
