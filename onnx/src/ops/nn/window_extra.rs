//! Window ops built from the 2-D primitives: deformable convolution (bilinear taps gathered per kernel position), max pooling with indices and MaxUnpool.

use super::*;

/// 2-D deformable convolution: every kernel tap samples the input bilinearly (zero outside) at
/// its offset position, scaled by the mask; the samples are contracted with the weight by a
/// grouped matrix product.
pub(super) fn deform_conv(cx: &mut Cx) -> R<NodeId> {
    cx.arity(3, 5)?;
    let (x, w, off, b, mask) = (cx.inp(0)?, cx.inp(1)?, cx.inp(2)?, cx.opt(3), cx.opt(4));
    let xs = cx.shape(x)?;
    let ws = cx.shape(w)?;
    let os = cx.shape(off)?;
    if xs.len() != 4 || ws.len() != 4 || os.len() != 4 {
        return Err(cx.unsup("DeformConv is supported for 2-D inputs only"));
    }
    let (n, ic, ih, iw) = (xs[0], xs[1], xs[2], xs[3]);
    let oc = ws[0];
    let g = cx.ai("group", 1).max(1) as usize;
    let og = cx.ai("offset_group", 1).max(1) as usize;
    let (kh, kw) = (ws[2], ws[3]);
    let list = |name: &str, d: i64, len: usize| -> Vec<i64> {
        cx.aints(name)
            .filter(|v| v.len() == len && v.iter().all(|x| x.unsigned_abs() <= 1 << 20))
            .unwrap_or_else(|| vec![d; len])
    };
    let (st, dl, pads) = (list("strides", 1, 2), list("dilations", 1, 2), list("pads", 0, 4));
    let (oh, ow) = (os[2], os[3]);
    let k = kh * kw;
    if ic != ws[1] * g || oc % g != 0 || ic % og != 0 || os[1] != og * k * 2 || os[0] != n {
        return Err(cx.err(format!("input {xs:?}, weight {ws:?}, offset {os:?} do not fit group {g}/{og}")));
    }
    let p = oh * ow;
    let f = cx.dt(x);
    let offr = cx.reshape(off, &[n, og, kh, kw, 2, oh, ow])?;
    let coord = |cx: &mut Cx, axis: usize| -> R<NodeId> {
        let c = cx.slice(offr, 4, axis as i64, axis as i64 + 1, 1)?;
        let c = cx.reshape(c, &[n, og, kh, kw, oh, ow])?;
        // Base position: -pad + stride * out + dilation * tap.
        let (kk, oo) = if axis == 0 { (kh, oh) } else { (kw, ow) };
        cx.guard(kk.saturating_mul(oo))?;
        let mut base = Vec::with_capacity(kk * oo);
        for t in 0..kk {
            for o in 0..oo {
                base.push((-pads[axis] + st[axis] * o as i64 + dl[axis] * t as i64) as f64);
            }
        }
        let shape = if axis == 0 { vec![kk, 1, oo, 1] } else { vec![kk, 1, oo] };
        let bc = cx.konst(HostTensor::from_f64(f, shape, &base));
        cx.bin(B::Add, c, bc)
    };
    let ph = coord(cx, 0)?;
    let pw = coord(cx, 1)?;
    let h0 = cx.un(U::Floor, ph)?;
    let w0 = cx.un(U::Floor, pw)?;
    let fh = cx.bin(B::Sub, ph, h0)?;
    let fw = cx.bin(B::Sub, pw, w0)?;
    let cg = ic / og;
    let xf = cx.reshape(x, &[n, og, cg, ih * iw])?;
    let q = k * p;
    let mut acc: Option<NodeId> = None;
    for (dh, dw) in [(0.0, 0.0), (0.0, 1.0), (1.0, 0.0), (1.0, 1.0)] {
        let hi = cx.bin_s(B::Add, h0, dh)?;
        let wi = cx.bin_s(B::Add, w0, dw)?;
        let wh = if dh == 0.0 { cx.s_bin(B::Sub, 1.0, fh)? } else { fh };
        let ww = if dw == 0.0 { cx.s_bin(B::Sub, 1.0, fw)? } else { fw };
        let wt = cx.bin(B::Mul, wh, ww)?;
        let inside = |cx: &mut Cx, v: NodeId, ext: usize| -> R<NodeId> {
            let z = cx.scalar(f, 0.0);
            let a = cx.bin(B::Ge, v, z)?;
            let e = cx.scalar(f, ext as f64 - 1.0);
            let c = cx.bin(B::Le, v, e)?;
            cx.bin(B::And, a, c)
        };
        let okh = inside(cx, hi, ih)?;
        let okw = inside(cx, wi, iw)?;
        let ok = cx.bin(B::And, okh, okw)?;
        let hc = cx.bin_s(B::Max, hi, 0.0)?;
        let hc = cx.bin_s(B::Min, hc, ih as f64 - 1.0)?;
        let wc = cx.bin_s(B::Max, wi, 0.0)?;
        let wc = cx.bin_s(B::Min, wc, iw as f64 - 1.0)?;
        let lin = cx.bin_s(B::Mul, hc, iw as f64)?;
        let lin = cx.bin(B::Add, lin, wc)?;
        let lin = cx.cast(lin, DType::I64)?;
        let lin = cx.reshape(lin, &[n, og, 1, q])?;
        let lin = cx.expand(lin, &[n, og, cg, q])?;
        let v = cx.add(Op::GatherElements { axis: 3 }, vec![xf, lin])?;
        let z = cx.scalar(f, 0.0);
        let wt = cx.select(ok, wt, z)?;
        let wt = cx.reshape(wt, &[n, og, 1, q])?;
        let t = cx.bin(B::Mul, v, wt)?;
        acc = Some(match acc {
            None => t,
            Some(a) => cx.bin(B::Add, a, t)?,
        });
    }
    let mut cols = acc.ok_or_else(|| cx.err("no taps"))?; // [N, og, cg, K*P]
    if let Some(m) = mask {
        let m = cx.reshape(m, &[n, og, 1, q])?;
        cols = cx.bin(B::Mul, cols, m)?;
    }
    // [N, C, K, P] -> [N, g, (C/g)*K, P]
    let cols = cx.reshape(cols, &[n, g, (ic / g) * k, p])?;
    let wg = cx.reshape(w, &[1, g, oc / g, (ic / g) * k])?;
    let y = cx.matmul(wg, cols)?; // [N, g, oc/g, P]
    let mut y = cx.reshape(y, &[n, oc, oh, ow])?;
    if let Some(b) = b {
        let b = cx.reshape(b, &[oc, 1, 1])?;
        y = cx.bin(B::Add, y, b)?;
    }
    Ok(y)
}

/// 2-D max pooling that also returns the flat input index of each maximum (row-major, or
/// column-major within the image for `storage_order=1`): the window taps are stacked, reduced
/// with max and argmax, and the winning tap is mapped to its input position.
pub(super) fn max_pool_with_indices(cx: &mut Cx, x: NodeId, xs: &[usize], g: &Geo) -> Out {
    cx.shape(x)?; // The indices count the batch: static shapes only.
    let (nb, c, h, w) = (xs[0], xs[1], xs[2], xs[3]);
    let lens = covered(g, &xs[2..]);
    let before: Vec<usize> = g.pads.iter().map(|p| p.0).collect();
    let xp = pad_spatial(cx, x, &before, &lens, lowest(cx.dt(x)))?;
    let (oh, ow) = (g.out[0], g.out[1]);
    let k = g.kernel[0] * g.kernel[1];
    cx.guard(k.saturating_mul(oh * ow))?;
    let col_major = cx.ai("storage_order", 0) != 0;
    let mut taps = Vec::with_capacity(k);
    let mut pos = Vec::with_capacity(k * oh * ow);
    for a in 0..g.kernel[0] {
        for b in 0..g.kernel[1] {
            let dims = vec![
                sinter_core::ir::SliceDim { start: 0, step: 1, len: nb },
                sinter_core::ir::SliceDim { start: 0, step: 1, len: c },
                sinter_core::ir::SliceDim { start: a * g.dil[0], step: g.strides[0] as i64, len: oh },
                sinter_core::ir::SliceDim { start: b * g.dil[1], step: g.strides[1] as i64, len: ow },
            ];
            let t = cx.add(Op::Slice(dims), vec![xp])?;
            taps.push(cx.reshape(t, &[1, nb, c, oh, ow])?);
            for i in 0..oh {
                for j in 0..ow {
                    let hh = (i * g.strides[0] + a * g.dil[0]) as i64 - g.pads[0].0 as i64;
                    let ww = (j * g.strides[1] + b * g.dil[1]) as i64 - g.pads[1].0 as i64;
                    let hh = hh.clamp(0, h as i64 - 1);
                    let ww = ww.clamp(0, w as i64 - 1);
                    pos.push(if col_major { ww * h as i64 + hh } else { hh * w as i64 + ww });
                }
            }
        }
    }
    let st = cx.concat(taps, 0)?; // [K, N, C, OH, OW]
    let y = cx.reduce(ReduceOp::Max, st, &[0], false)?;
    let am = cx.add(
        Op::ArgReduce { op: sinter_core::ir::ArgOp::ArgMax, axis: 0, keepdim: true, select_last: false },
        vec![st],
    )?; // [1, N, C, OH, OW]
    let pk = cx.konst(HostTensor::from_i64(DType::I64, vec![k, 1, 1, oh, ow], &pos));
    let pk = cx.expand(pk, &[k, nb, c, oh, ow])?;
    let idx = cx.add(Op::GatherElements { axis: 0 }, vec![pk, am])?;
    let idx = cx.reshape(idx, &[nb, c, oh, ow])?;
    cx.guard(nb * c)?;
    let offs: Vec<i64> = (0..(nb * c) as i64).map(|q| q * (h * w) as i64).collect();
    let ok = cx.konst(HostTensor::from_i64(DType::I64, vec![nb, c, 1, 1], &offs));
    let idx = cx.bin(B::Add, idx, ok)?;
    Ok(vec![Some(y), Some(idx)])
}

/// MaxUnpool: scatters the values to their flat output indices (a one-hot mask; the last value
/// naming an output wins, as in the ONNX reference).
pub(super) fn max_unpool(cx: &mut Cx) -> R<NodeId> {
    cx.arity(2, 3)?;
    let (x, i) = (cx.inp(0)?, cx.inp(1)?);
    let xs = cx.shape(x)?;
    let n = xs.len().saturating_sub(2);
    if n == 0 || cx.shape(i)? != xs {
        return Err(cx.err("indices must have the input's shape"));
    }
    let k = kernel_shape(cx, None)?;
    if k.len() != n {
        return Err(cx.err(format!("kernel_shape {k:?} does not fit {n} spatial axes")));
    }
    let ok = |v: &Vec<i64>| v.iter().all(|x| (0..=1 << 20).contains(x));
    let st = cx.aints("strides").filter(|v| v.len() == n && ok(v)).unwrap_or_else(|| vec![1; n]);
    let p = cx.aints("pads").filter(|v| v.len() == 2 * n && ok(v)).unwrap_or_else(|| vec![0; 2 * n]);
    let mut default = xs[..2].to_vec();
    for d in 0..n {
        let v = (xs[d + 2] as i64 - 1) * st[d] + k[d] as i64 - p[d] - p[d + n];
        if v <= 0 {
            return Err(cx.err("empty output"));
        }
        default.push(v as usize);
    }
    let out: Vec<usize> = match cx.opt(2) {
        Some(o) => cx.ints(o)?.iter().map(|&v| v.clamp(0, 1 << 32) as usize).collect(),
        None => default.clone(),
    };
    if out.len() != xs.len() {
        return Err(cx.err(format!("output_shape {out:?} must have the input's rank")));
    }
    let mut i = cx.cast(i, DType::I64)?;
    if out != default {
        // Indices address the default output shape: re-linearize their coordinates in `out`.
        let sd = sinter_core::shape::contiguous_strides(&default);
        let so = sinter_core::shape::contiguous_strides(&out);
        let mut lin: Option<NodeId> = None;
        for a in 0..xs.len() {
            let q = cx.bin_s(B::Div, i, sd[a] as f64)?;
            let c = cx.bin_s(B::Mod, q, default[a] as f64)?;
            let t = cx.bin_s(B::Mul, c, so[a] as f64)?;
            lin = Some(match lin {
                None => t,
                Some(l) => cx.bin(B::Add, l, t)?,
            });
        }
        i = lin.ok_or_else(|| cx.err("rank 0"))?;
    }
    let t: usize = out.iter().product();
    let j: usize = xs.iter().product();
    cx.guard(t.saturating_mul(j))?;
    if t == 0 || j == 0 {
        return cx.zeros(cx.dt(x), &out);
    }
    let pos = cx.iota(t, DType::I64)?;
    let pos = cx.reshape(pos, &[t, 1])?;
    let ii = cx.cast(i, DType::I64)?;
    let ii = cx.reshape(ii, &[1, j])?;
    let eq = cx.bin(B::Eq, pos, ii)?; // [T, J]
    // Overlapping pooling windows give duplicate indices (of equal values): each output takes
    // the last input that names it, as a sequential scatter does (summing them doubled values).
    let (hit, src) = crate::ops::index::last_hit(cx, eq, 1)?; // [T]
    let xf = cx.reshape(x, &[j])?;
    let picked = cx.add(Op::Gather { axis: 0 }, vec![xf, src])?;
    let z = cx.scalar(cx.dt(x), 0.0);
    let y = cx.select(hit, picked, z)?;
    cx.reshape(y, &out)
}
