//! Neural-network ops: convolution (1-D/2-D/3-D, transposed, integer, quantized), pooling,
//! normalizations, Gemm/MatMul (incl. integer and quantized), Einsum and (de)quantization.
//!
//! The IR has 2-D convolution and pooling only: 1-D goes through 2-D with a unit axis; 3-D is a
//! sum (max) over the kernel's depth taps of 2-D convolutions (poolings) of strided depth
//! slices. Average pooling is a window sum divided by a per-position count computed at import
//! time, which covers every padding/ceil/count_include_pad combination.

use crate::import::{Cx, R};
use sinter_core::ir::{BinaryOp as B, PadMode, PoolKind, ReduceOp, UnaryOp as U, Window2d};
use sinter_core::shape::Poly;
use sinter_core::{DType, Dim, HostTensor, NodeId, Op};

/// The shape of a conv/pool operand whose batch (axis 0) may be symbolic: the batch, and the
/// extents with a placeholder 1 at axis 0 (reshapes take the batch from the first value).
fn nchw(cx: &Cx, x: NodeId) -> R<(Dim, Vec<usize>)> {
    let (b, rest) = cx.batch_shape(x)?;
    let mut v = vec![b.as_static().unwrap_or(1)];
    v.extend(rest);
    Ok((b, v))
}

/// `[batch, rest..]` as dims.
fn bdims(b: &Dim, rest: &[usize]) -> Vec<Dim> {
    std::iter::once(b.clone()).chain(rest.iter().map(|&d| Dim::Static(d))).collect()
}

/// `b * k` for a possibly symbolic batch.
fn mul_dim(cx: &Cx, b: &Dim, k: usize) -> R<Dim> {
    Poly::of_dim(b)
        .mul(&Poly::constant(k as i64))
        .and_then(|p| p.to_dim())
        .ok_or_else(|| cx.err(format!("extent {b} * {k} overflows")))
}

type Out = R<Vec<Option<NodeId>>>;

pub(super) fn lower(cx: &mut Cx, op: &str) -> Option<Out> {
    let r = match op {
        "Conv" => one(cx, conv),
        "ConvTranspose" => one(cx, conv_transpose),
        "ConvInteger" => one(cx, conv_integer),
        "QLinearConv" => one(cx, qlinear_conv),
        "MaxPool" => max_pool(cx),
        "AveragePool" => one(cx, |cx| avg_pool(cx, None)),
        "LpPool" => one(cx, |cx| {
            let p = cx.ai("p", 2) as f64;
            avg_pool(cx, Some(p))
        }),
        "GlobalAveragePool" | "GlobalMaxPool" | "GlobalLpPool" => one(cx, |cx| {
            cx.arity(1, 1)?;
            let x = cx.inp(0)?;
            let axes: Vec<usize> = (2..cx.rank(x)).collect();
            match op {
                "GlobalAveragePool" => cx.reduce(ReduceOp::Mean, x, &axes, true),
                "GlobalMaxPool" => cx.reduce(ReduceOp::Max, x, &axes, true),
                _ => {
                    let p = cx.ai("p", 2) as f64;
                    lp_reduce(cx, x, &axes, p)
                }
            }
        }),
        "BatchNormalization" => batch_norm(cx),
        "InstanceNormalization" => one(cx, instance_norm),
        "LayerNormalization" => layer_norm(cx),
        "GroupNormalization" => one(cx, group_norm),
        "RMSNormalization" => one(cx, rms_norm),
        "LpNormalization" => one(cx, |cx| {
            cx.arity(1, 1)?;
            let x = cx.inp(0)?;
            let axis = cx.axis(cx.ai("axis", -1), cx.rank(x))?;
            let p = cx.ai("p", 2);
            let n = match p {
                1 => {
                    let a = cx.un(U::Abs, x)?;
                    cx.reduce(ReduceOp::Sum, a, &[axis], true)?
                }
                2 => {
                    let sq = cx.bin(B::Mul, x, x)?;
                    let s = cx.reduce(ReduceOp::Sum, sq, &[axis], true)?;
                    cx.un(U::Sqrt, s)?
                }
                _ => return Err(cx.err(format!("p must be 1 or 2, got {p}"))),
            };
            // Zero norms give 0, as the reference.
            let q = cx.bin(B::Div, x, n)?;
            let z = cx.scalar(cx.dt(n), 0.0);
            let zero = cx.bin(B::Eq, n, z)?;
            cx.select(zero, z, q)
        }),
        "MeanVarianceNormalization" => one(cx, |cx| {
            cx.arity(1, 1)?;
            let x = cx.inp(0)?;
            let r = cx.rank(x);
            let axes: Vec<usize> = match cx.aints("axes") {
                Some(a) => a.iter().map(|&a| cx.axis(a, r)).collect::<R<_>>()?,
                None => [0usize, 2, 3].into_iter().filter(|&a| a < r).collect(),
            };
            let m = cx.reduce(ReduceOp::Mean, x, &axes, true)?;
            let m2 = cx.bin(B::Mul, m, m)?;
            let sq = cx.bin(B::Mul, x, x)?;
            let e2 = cx.reduce(ReduceOp::Mean, sq, &axes, true)?;
            let var = cx.bin(B::Sub, e2, m2)?;
            let sd = cx.un(U::Sqrt, var)?;
            let sd = cx.bin_s(B::Add, sd, 1e-9)?;
            let c = cx.bin(B::Sub, x, m)?;
            cx.bin(B::Div, c, sd)
        }),
        "LRN" => one(cx, lrn),
        "Gemm" => one(cx, gemm),
        "MatMul" => one(cx, |cx| {
            cx.arity(2, 2)?;
            let (a, b) = (cx.inp(0)?, cx.inp(1)?);
            cx.matmul(a, b)
        }),
        "MatMulInteger" => one(cx, matmul_integer),
        "QLinearMatMul" => one(cx, qlinear_matmul),
        "QuantizeLinear" => one(cx, quantize_linear),
        "DequantizeLinear" => one(cx, dequantize_linear),
        "DynamicQuantizeLinear" => dynamic_quantize(cx),
        "Einsum" => one(cx, einsum),
        "MaxUnpool" => one(cx, max_unpool),
        "DeformConv" => one(cx, deform_conv),
        _ => return None,
    };
    Some(r)
}

fn one(cx: &mut Cx, f: impl FnOnce(&mut Cx) -> R<NodeId>) -> Out {
    f(cx).map(|x| vec![Some(x)])
}

/// Window geometry of a conv/pool over `n` spatial axes after resolving `auto_pad`.
#[derive(Clone, Debug)]
struct Geo {
    kernel: Vec<usize>,
    strides: Vec<usize>,
    dil: Vec<usize>,
    /// Padding before/after per axis.
    pads: Vec<(usize, usize)>,
    /// Output extents.
    out: Vec<usize>,
}

/// Reads strides/dilations/pads/auto_pad for spatial extents `ins` and `kernel`.
fn geometry(cx: &Cx, ins: &[usize], kernel: Vec<usize>, ceil: bool) -> R<Geo> {
    let n = ins.len();
    let list = |name: &str| -> R<Vec<usize>> {
        match cx.aints(name) {
            Some(v) if !v.is_empty() => {
                if v.len() != n || v.iter().any(|&x| x <= 0 || x > 1 << 20) {
                    return Err(cx.err(format!("{name} {v:?} must hold {n} positive values")));
                }
                Ok(v.iter().map(|&x| x as usize).collect())
            }
            _ => Ok(vec![1; n]),
        }
    };
    let strides = list("strides")?;
    let dil = list("dilations")?;
    if kernel.len() != n || kernel.contains(&0) {
        return Err(cx.err(format!("kernel {kernel:?} does not fit {n} spatial axes")));
    }
    if ins.contains(&0) {
        return Err(cx.err(format!("empty spatial extents {ins:?}")));
    }
    let auto = cx.as_str("auto_pad", "NOTSET");
    let eff: Vec<usize> = (0..n).map(|i| (kernel[i] - 1) * dil[i] + 1).collect();
    let mut pads = vec![(0usize, 0usize); n];
    let mut out = vec![0usize; n];
    match auto.as_str() {
        "SAME_UPPER" | "SAME_LOWER" => {
            for i in 0..n {
                let o = ins[i].div_ceil(strides[i]);
                let total = ((o.max(1) - 1) * strides[i] + eff[i]).saturating_sub(ins[i]);
                let small = total / 2;
                pads[i] = if auto == "SAME_UPPER" { (small, total - small) } else { (total - small, small) };
                out[i] = o;
            }
        }
        "VALID" | "NOTSET" | "" => {
            if (auto == "NOTSET" || auto.is_empty())
                && let Some(p) = cx.aints("pads").filter(|p| !p.is_empty())
            {
                if p.len() != 2 * n || p.iter().any(|&x| x < 0) {
                    return Err(cx.err(format!("pads {p:?} must hold {} non-negative values", 2 * n)));
                }
                for i in 0..n {
                    pads[i] = (p[i] as usize, p[i + n] as usize);
                }
            }
            for i in 0..n {
                let padded = ins[i] + pads[i].0 + pads[i].1;
                if padded < eff[i] {
                    return Err(cx.err(format!("window {} larger than padded extent {padded}", eff[i])));
                }
                let span = padded - eff[i];
                let mut o = span / strides[i] + 1;
                if ceil && !span.is_multiple_of(strides[i]) {
                    o += 1;
                    // The last window must start inside the input or the left padding.
                    if (o - 1) * strides[i] >= ins[i] + pads[i].0 {
                        o -= 1;
                    }
                }
                out[i] = o;
            }
        }
        other => return Err(cx.err(format!("unknown auto_pad {other:?}"))),
    }
    Ok(Geo { kernel, strides, dil, pads, out })
}

/// The kernel shape: the attribute if given, else the weight's spatial extents.
fn kernel_shape(cx: &Cx, w: Option<&[usize]>) -> R<Vec<usize>> {
    if let Some(k) = cx.aints("kernel_shape").filter(|k| !k.is_empty()) {
        if k.iter().any(|&v| v <= 0 || v > 1 << 20) {
            return Err(cx.err(format!("kernel_shape {k:?} must be positive")));
        }
        let k: Vec<usize> = k.iter().map(|&v| v as usize).collect();
        if let Some(w) = w
            && w != k.as_slice()
        {
            return Err(cx.err(format!("kernel_shape {k:?} differs from the weight's {w:?}")));
        }
        return Ok(k);
    }
    w.map(<[usize]>::to_vec).ok_or_else(|| cx.err("kernel_shape is required"))
}

/// A 2-D convolution with explicit geometry.
fn conv2d(cx: &mut Cx, x: NodeId, w: NodeId, bias: Option<NodeId>, g: &Geo, groups: usize) -> R<NodeId> {
    let window = Window2d {
        kernel: [g.kernel[0], g.kernel[1]],
        stride: [g.strides[0], g.strides[1]],
        padding: [g.pads[0].0, g.pads[1].0, g.pads[0].1, g.pads[1].1],
        dilation: [g.dil[0], g.dil[1]],
    };
    let mut ins = vec![x, w];
    ins.extend(bias);
    cx.add(Op::Conv2d { window, groups }, ins)
}

/// N-d convolution (n = 1, 2, 3) of float tensors.
fn conv_nd(cx: &mut Cx, x: NodeId, w: NodeId, bias: Option<NodeId>, g: &Geo, groups: usize) -> R<NodeId> {
    let (nbd, xs) = nchw(cx, x)?;
    let ws = cx.shape(w)?;
    let n = xs.len() - 2;
    match n {
        2 => conv2d(cx, x, w, bias, g, groups),
        1 => {
            let x2 = cx.reshape_dims(x, bdims(&nbd, &[xs[1], 1, xs[2]]))?;
            let w2 = cx.reshape(w, &[ws[0], ws[1], 1, ws[2]])?;
            let g2 = Geo {
                kernel: vec![1, g.kernel[0]],
                strides: vec![1, g.strides[0]],
                dil: vec![1, g.dil[0]],
                pads: vec![(0, 0), g.pads[0]],
                out: vec![1, g.out[0]],
            };
            let y = conv2d(cx, x2, w2, bias, &g2, groups)?;
            cx.reshape_dims(y, bdims(&nbd, &[ws[0], g.out[0]]))
        }
        3 => {
            // Pad depth explicitly; H/W padding stays in the 2-D convolutions.
            let (c, m) = (xs[1], ws[0]);
            let mut pads = vec![(0i64, 0i64); 5];
            pads[2] = (g.pads[0].0 as i64, g.pads[0].1 as i64);
            let xp =
                if pads[2] != (0, 0) { cx.add(Op::Pad { pads, mode: PadMode::Constant(0.0) }, vec![x])? } else { x };
            let do_ = g.out[0];
            let g2 = Geo {
                kernel: g.kernel[1..].to_vec(),
                strides: g.strides[1..].to_vec(),
                dil: g.dil[1..].to_vec(),
                pads: g.pads[1..].to_vec(),
                out: g.out[1..].to_vec(),
            };
            let (ho, wo) = (g.out[1], g.out[2]);
            let mut acc: Option<NodeId> = None;
            for kd in 0..g.kernel[0] {
                let start = kd * g.dil[0];
                let xd = depth_taps(cx, xp, start, g.strides[0], do_)?; // [N, C, Do, H, W]
                let xsd = nchw(cx, xd)?.1;
                let xd = cx.permute(xd, &[0, 2, 1, 3, 4])?;
                let nbdo = mul_dim(cx, &nbd, do_)?;
                let xd = cx.reshape_dims(xd, bdims(&nbdo, &[c, xsd[3], xsd[4]]))?;
                let wk = cx.slice(w, 2, kd as i64, kd as i64 + 1, 1)?;
                let wk = cx.reshape(wk, &[ws[0], ws[1], ws[3], ws[4]])?;
                let y = conv2d(cx, xd, wk, None, &g2, groups)?;
                acc = Some(match acc {
                    None => y,
                    Some(a) => cx.bin(B::Add, a, y)?,
                });
            }
            let y = acc.ok_or_else(|| cx.err("empty kernel"))?;
            let y = cx.reshape_dims(y, bdims(&nbd, &[do_, m, ho, wo]))?;
            let mut y = cx.permute(y, &[0, 2, 1, 3, 4])?;
            if let Some(b) = bias {
                let b = cx.reshape(b, &[m, 1, 1, 1])?;
                y = cx.bin(B::Add, y, b)?;
            }
            Ok(y)
        }
        _ => Err(cx.unsup(format!("{n}-D convolution (only 1-D, 2-D and 3-D are supported)"))),
    }
}

/// Depth slice `start, start + step, ...` (`len` taps) of axis 2.
fn depth_taps(cx: &mut Cx, x: NodeId, start: usize, step: usize, len: usize) -> R<NodeId> {
    if !cx.sym_shape(x).is_static() {
        // A symbolic batch: the taps as a gather along the depth axis.
        cx.guard(len)?;
        let idx: Vec<i64> = (0..len).map(|i| (start + i * step) as i64).collect();
        let c = cx.konst(HostTensor::from_i64(DType::I64, vec![len], &idx));
        return cx.add(Op::Gather { axis: 2 }, vec![x, c]);
    }
    let s = cx.shape(x)?;
    let dims: Vec<sinter_core::ir::SliceDim> = s
        .iter()
        .enumerate()
        .map(|(i, &n)| {
            if i == 2 {
                sinter_core::ir::SliceDim { start: if len > 0 { start } else { 0 }, step: step as i64, len }
            } else {
                sinter_core::ir::SliceDim { start: 0, step: 1, len: n }
            }
        })
        .collect();
    cx.add(Op::Slice(dims), vec![x])
}

/// The window geometry of a 2-D conv/max-pool whose spatial extents are symbolic (`None` when
/// they are static or the op is not 2-D): only explicit padding is possible (`auto_pad` SAME
/// depends on the extent); the output extents are the IR's (`floor((h + pads - eff) / stride)
/// + 1`, refused there, naming the node, where the stride does not divide the expression).
fn symbolic_spatial_geometry(cx: &Cx, x: NodeId, kernel: Option<Vec<usize>>) -> R<Option<Geo>> {
    let d = cx.dims(x);
    if d.len() != 4 || d[1].as_static().is_none() || d[2..].iter().all(|e| e.as_static().is_some()) {
        return Ok(None);
    }
    if !matches!(cx.as_str("auto_pad", "NOTSET").as_str(), "NOTSET" | "VALID" | "") {
        return Err(cx.unsup(format!(
            "auto_pad SAME_* on symbolic spatial extents {} (specialize the model with graph_for or graph_for_inputs)",
            cx.sym_shape(x)
        )));
    }
    let k = kernel_shape(cx, kernel.as_deref())?;
    // Placeholder extents that every window fits: the geometry's output extents are unused.
    let ins: Vec<usize> = k.iter().map(|&k| k.saturating_mul(1 << 20)).collect();
    geometry(cx, &ins, k, false).map(Some)
}

fn conv(cx: &mut Cx) -> R<NodeId> {
    cx.arity(2, 3)?;
    let (x, w, b) = (cx.inp(0)?, cx.inp(1)?, cx.opt(2));
    let ws = cx.shape(w)?;
    if ws.len() == 4
        && let Some(g) = symbolic_spatial_geometry(cx, x, Some(ws[2..].to_vec()))?
    {
        let groups = cx.ai("group", 1);
        if groups <= 0 {
            return Err(cx.err("group must be positive"));
        }
        return conv2d(cx, x, w, b, &g, groups as usize);
    }
    let xs = nchw(cx, x)?.1;
    let ws = cx.shape(w)?;
    if xs.len() < 3 || ws.len() != xs.len() {
        return Err(cx.err(format!("input {xs:?} and weight {ws:?} ranks do not fit")));
    }
    let groups = cx.ai("group", 1);
    if groups <= 0 {
        return Err(cx.err("group must be positive"));
    }
    let k = kernel_shape(cx, Some(&ws[2..]))?;
    let g = geometry(cx, &xs[2..], k, false)?;
    conv_nd(cx, x, w, b, &g, groups as usize)
}

fn conv_transpose(cx: &mut Cx) -> R<NodeId> {
    cx.arity(2, 3)?;
    let (x, w, b) = (cx.inp(0)?, cx.inp(1)?, cx.opt(2));
    // 2-D with symbolic spatial extents and explicit pads: every step below is a reshape, a pad
    // or a convolution, whose extents the IR types as expressions (`2*h`).
    let xd = cx.dims(x);
    let spatial_sym = xd.len() == 4
        && xd[1].as_static().is_some()
        && xd[2..].iter().any(|d| d.as_static().is_none())
        && matches!(cx.as_str("auto_pad", "NOTSET").as_str(), "NOTSET" | "")
        && cx.aints("output_shape").filter(|p| !p.is_empty()).is_none();
    let (nbd, xs) = if spatial_sym {
        let v: Vec<usize> = xd.iter().map(|d| d.as_static().unwrap_or(1)).collect();
        (xd[0].clone(), v)
    } else {
        nchw(cx, x)?
    };
    let ws = cx.shape(w)?;
    let n = xs.len().saturating_sub(2);
    if n == 0 || ws.len() != xs.len() || xs.contains(&0) || ws.contains(&0) {
        return Err(cx.err(format!("input {xs:?} and weight {ws:?} ranks do not fit")));
    }
    let groups = cx.ai("group", 1);
    if groups <= 0 || xs[1] % groups as usize != 0 || ws[0] != xs[1] {
        return Err(cx.err(format!("channels: input {xs:?}, weight {ws:?}, group {groups}")));
    }
    let gr = groups as usize;
    let k = kernel_shape(cx, Some(&ws[2..]))?;
    let list = |name: &str, d: usize| -> R<Vec<usize>> {
        match cx.aints(name) {
            Some(v) if !v.is_empty() => {
                if v.len() < n || v.iter().any(|&x| !(0..=1 << 20).contains(&x)) {
                    return Err(cx.err(format!("{name} {v:?} must hold {n} values")));
                }
                Ok(v[..n].iter().map(|&x| x as usize).collect())
            }
            _ => Ok(vec![d; n]),
        }
    };
    let strides = list("strides", 1)?;
    let dil = list("dilations", 1)?;
    let opad = list("output_padding", 0)?;
    if strides.contains(&0) || dil.contains(&0) {
        return Err(cx.err("strides and dilations must be positive"));
    }
    let full: Vec<usize> = (0..n).map(|i| strides[i] * (xs[i + 2] - 1) + opad[i] + (k[i] - 1) * dil[i] + 1).collect();
    let auto = cx.as_str("auto_pad", "NOTSET");
    let given_pads = cx.aints("pads").filter(|p| !p.is_empty());
    let out_shape = cx.aints("output_shape").filter(|p| !p.is_empty()).map(|v| v[v.len().saturating_sub(n)..].to_vec());
    let mut pads = vec![(0i64, 0i64); n];
    if auto == "SAME_UPPER" || auto == "SAME_LOWER" {
        let o: Vec<i64> = match &out_shape {
            Some(o) => o.clone(),
            None => (0..n).map(|i| (xs[i + 2] * strides[i]) as i64).collect(),
        };
        for i in 0..n {
            let total = full[i] as i64 - o[i];
            pads[i] =
                if auto == "SAME_UPPER" { (total / 2, total - total / 2) } else { (total - total / 2, total / 2) };
        }
    } else {
        if let Some(p) = &given_pads {
            if p.len() != 2 * n {
                return Err(cx.err(format!("pads {p:?} must hold {} values", 2 * n)));
            }
            for i in 0..n {
                pads[i] = (p[i], p[i + n]);
            }
        }
        if let Some(o) = &out_shape {
            // The output is output_shape: the end padding absorbs the difference.
            for i in 0..n {
                pads[i].1 = full[i] as i64 - pads[i].0 - o[i];
            }
        }
    }
    // Zero insertion: [.., H, ..] -> [.., H, s, ..] padded with s-1 zeros -> [.., H*s, ..].
    let mut xz = x;
    if strides.iter().any(|&s| s > 1) {
        let mut inter = vec![xs[0], xs[1]];
        let mut pz = vec![(0i64, 0i64); 2];
        let mut merged = vec![xs[0], xs[1]];
        for i in 0..n {
            inter.extend([xs[i + 2], 1]);
            pz.extend([(0, 0), (0, strides[i] as i64 - 1)]);
            merged.push(xs[i + 2] * strides[i]);
        }
        let (inter, merged) = if spatial_sym {
            // The spatial extents from the symbolic dims: [.., h, 1, ..] and [.., s*h, ..].
            let mut a = vec![nbd.clone(), xd[1].clone()];
            let mut m = a.clone();
            for i in 0..n {
                a.extend([xd[i + 2].clone(), Dim::Static(1)]);
                let e = Poly::of_dim(&xd[i + 2]).mul(&Poly::constant(strides[i] as i64)).and_then(|p| p.to_dim());
                m.push(e.ok_or_else(|| cx.err("zero insertion overflows"))?);
            }
            (a, m)
        } else {
            (bdims(&nbd, &inter[1..]), bdims(&nbd, &merged[1..]))
        };
        let r = cx.reshape_dims(x, inter)?;
        let p = cx.add(Op::Pad { pads: pz, mode: PadMode::Constant(0.0) }, vec![r])?;
        xz = cx.reshape_dims(p, merged)?;
    }
    // Pad by (k-1)*d - pad on each side (the end also drops the s-1 trailing zeros and adds
    // output_padding).
    let mut pp = vec![(0i64, 0i64); 2];
    for i in 0..n {
        let e = ((k[i] - 1) * dil[i]) as i64;
        pp.push((e - pads[i].0, e - pads[i].1 + opad[i] as i64 - (strides[i] as i64 - 1)));
    }
    let xp = if pp.iter().any(|&p| p != (0, 0)) {
        cx.add(Op::Pad { pads: pp, mode: PadMode::Constant(0.0) }, vec![xz])?
    } else {
        xz
    };
    // Weight [C, M/g, k..] -> [M, C/g, k..], flipped spatially.
    let (c, mg) = (ws[0], ws[1]);
    let mut gs = vec![gr, c / gr, mg];
    gs.extend_from_slice(&k);
    let wr = cx.reshape(w, &gs)?;
    let mut perm = vec![0, 2, 1];
    perm.extend(3..3 + n);
    let wt = cx.permute(wr, &perm)?;
    let mut ms = vec![gr * mg, c / gr];
    ms.extend_from_slice(&k);
    let mut wf = cx.reshape(wt, &ms)?;
    for i in 0..n {
        wf = cx.slice(wf, i + 2, -1, i64::MIN, -1)?;
    }
    if spatial_sym {
        // The IR checks the window against the padded extents once they are bound.
        let geo = Geo { kernel: k.clone(), strides: vec![1; n], dil: dil.clone(), pads: vec![(0, 0); n], out: vec![] };
        return conv2d(cx, xp, wf, b, &geo, gr);
    }
    let ps = nchw(cx, xp)?.1;
    if (0..n).any(|i| ps[i + 2] < (k[i] - 1) * dil[i] + 1) {
        return Err(cx.err("output extent would be empty"));
    }
    let geo = Geo {
        kernel: k.clone(),
        strides: vec![1; n],
        dil: dil.clone(),
        pads: vec![(0, 0); n],
        out: (0..n).map(|i| ps[i + 2] + 1 - ((k[i] - 1) * dil[i] + 1)).collect(),
    };
    conv_nd(cx, xp, wf, b, &geo, gr)
}

/// Pads `x`'s spatial axes by `pads` (before) and to `lens` total, with `fill`.
fn pad_spatial(cx: &mut Cx, x: NodeId, before: &[usize], lens: &[usize], fill: f64) -> R<NodeId> {
    let s = nchw(cx, x)?.1;
    let mut pads = vec![(0i64, 0i64); 2];
    for i in 0..before.len() {
        let b = before[i] as i64;
        pads.push((b, lens[i] as i64 - s[i + 2] as i64 - b));
    }
    if pads.iter().all(|&p| p == (0, 0)) {
        return Ok(x);
    }
    cx.add(Op::Pad { pads, mode: PadMode::Constant(fill) }, vec![x])
}

/// Lowest value of a dtype (for max-pool padding).
fn lowest(d: DType) -> f64 {
    if d.is_float() {
        f64::NEG_INFINITY
    } else if d.is_signed_int() {
        -(2f64.powi(d.size_bytes() as i32 * 8 - 1))
    } else {
        0.0
    }
}

/// Window reduction (max or sum) over an explicitly padded input with unpadded windows:
/// 1-D/2-D through `Pool2d`, 3-D as the max/sum over depth taps of 2-D pools.
fn window_reduce(cx: &mut Cx, xp: NodeId, g: &Geo, max: bool) -> R<NodeId> {
    let (nbd, s) = nchw(cx, xp)?;
    let n = s.len() - 2;
    let pool2 = |cx: &mut Cx, v: NodeId, k: [usize; 2], st: [usize; 2], d: [usize; 2]| -> R<NodeId> {
        let window = Window2d { kernel: k, stride: st, padding: [0; 4], dilation: d };
        let kind = if max { PoolKind::Max } else { PoolKind::Avg };
        let y = cx.add(Op::Pool2d { kind, window, ceil_mode: false, count_include_pad: true }, vec![v])?;
        if max { Ok(y) } else { cx.bin_s(B::Mul, y, (k[0] * k[1]) as f64) }
    };
    match n {
        1 => {
            let v = cx.reshape_dims(xp, bdims(&nbd, &[s[1], 1, s[2]]))?;
            let y = pool2(cx, v, [1, g.kernel[0]], [1, g.strides[0]], [1, g.dil[0]])?;
            let ys = nchw(cx, y)?.1;
            cx.reshape_dims(y, bdims(&nbd, &[s[1], ys[3]]))
        }
        2 => pool2(cx, xp, [g.kernel[0], g.kernel[1]], [g.strides[0], g.strides[1]], [g.dil[0], g.dil[1]]),
        3 => {
            let mut acc: Option<NodeId> = None;
            for kd in 0..g.kernel[0] {
                let v = depth_taps(cx, xp, kd * g.dil[0], g.strides[0], g.out[0])?; // [N, C, Do, H, W]
                let v = cx.reshape_dims(v, bdims(&nbd, &[s[1] * g.out[0], s[3], s[4]]))?;
                let y = pool2(cx, v, [g.kernel[1], g.kernel[2]], [g.strides[1], g.strides[2]], [g.dil[1], g.dil[2]])?;
                acc = Some(match acc {
                    None => y,
                    Some(a) => cx.bin(if max { B::Max } else { B::Add }, a, y)?,
                });
            }
            let y = acc.ok_or_else(|| cx.err("empty kernel"))?;
            cx.reshape_dims(y, bdims(&nbd, &[s[1], g.out[0], g.out[1], g.out[2]]))
        }
        _ => Err(cx.unsup(format!("{n}-D pooling (only 1-D, 2-D and 3-D are supported)"))),
    }
}

/// Padded extents covering every window of `g` over inputs `ins`.
fn covered(g: &Geo, ins: &[usize]) -> Vec<usize> {
    (0..ins.len())
        .map(|i| ((g.out[i] - 1) * g.strides[i] + (g.kernel[i] - 1) * g.dil[i] + 1).max(ins[i] + g.pads[i].0))
        .collect()
}

/// The operand of a pooling op (rank 3 or more), its shape, its window geometry and whether
/// `ceil_mode` is set.
fn pool_operand(cx: &mut Cx) -> R<(NodeId, Vec<usize>, Geo, bool)> {
    cx.arity(1, 1)?;
    let x = cx.inp(0)?;
    let xs = nchw(cx, x)?.1;
    if xs.len() < 3 {
        return Err(cx.err("needs rank >= 3"));
    }
    let k = kernel_shape(cx, None)?;
    let ceil = cx.ai("ceil_mode", 0) != 0;
    let g = geometry(cx, &xs[2..], k, ceil)?;
    Ok((x, xs, g, ceil))
}

fn max_pool(cx: &mut Cx) -> Out {
    if let Ok(x) = cx.inp(0)
        && !cx.wants(1)
        && cx.ai("ceil_mode", 0) == 0
        && let Some(g) = symbolic_spatial_geometry(cx, x, None)?
    {
        let window = Window2d {
            kernel: [g.kernel[0], g.kernel[1]],
            stride: [g.strides[0], g.strides[1]],
            padding: [g.pads[0].0, g.pads[1].0, g.pads[0].1, g.pads[1].1],
            dilation: [g.dil[0], g.dil[1]],
        };
        let y =
            cx.add(Op::Pool2d { kind: PoolKind::Max, window, ceil_mode: false, count_include_pad: false }, vec![x])?;
        return Ok(vec![Some(y)]);
    }
    let (x, xs, g, ceil) = pool_operand(cx)?;
    let n = xs.len() - 2;
    if cx.wants(1) {
        if n != 2 {
            return Err(cx.unsup("the Indices output of MaxPool is supported for 2-D pooling only"));
        }
        return max_pool_with_indices(cx, x, &xs, &g);
    }
    if n == 2 && !ceil {
        let window = Window2d {
            kernel: [g.kernel[0], g.kernel[1]],
            stride: [g.strides[0], g.strides[1]],
            padding: [g.pads[0].0, g.pads[1].0, g.pads[0].1, g.pads[1].1],
            dilation: [g.dil[0], g.dil[1]],
        };
        let y =
            cx.add(Op::Pool2d { kind: PoolKind::Max, window, ceil_mode: false, count_include_pad: false }, vec![x])?;
        return Ok(vec![Some(y)]);
    }
    let lens = covered(&g, &xs[2..]);
    let before: Vec<usize> = g.pads.iter().map(|p| p.0).collect();
    let xp = pad_spatial(cx, x, &before, &lens, lowest(cx.dt(x)))?;
    let y = window_reduce(cx, xp, &g, true)?;
    Ok(vec![Some(y)])
}

/// Average pooling, or Lp pooling when `p` is given.
fn avg_pool(cx: &mut Cx, p: Option<f64>) -> R<NodeId> {
    if p.is_none()
        && cx.ai("ceil_mode", 0) == 0
        && let Ok(x) = cx.inp(0)
        && let Some(g) = symbolic_spatial_geometry(cx, x, None)?
    {
        // Symbolic spatial extents: the IR's average pool divides by the taps inside the input
        // (or inside the padding too with count_include_pad), as ONNX does.
        let window = Window2d {
            kernel: [g.kernel[0], g.kernel[1]],
            stride: [g.strides[0], g.strides[1]],
            padding: [g.pads[0].0, g.pads[1].0, g.pads[0].1, g.pads[1].1],
            dilation: [g.dil[0], g.dil[1]],
        };
        let count_include_pad = cx.ai("count_include_pad", 0) != 0;
        return cx.add(Op::Pool2d { kind: PoolKind::Avg, window, ceil_mode: false, count_include_pad }, vec![x]);
    }
    let (x, xs, g, _) = pool_operand(cx)?;
    let include_pad = cx.ai("count_include_pad", 0) != 0;
    let n = xs.len() - 2;
    let lens = covered(&g, &xs[2..]);
    let before: Vec<usize> = g.pads.iter().map(|p| p.0).collect();
    let v = match p {
        Some(p) => {
            let a = cx.un(U::Abs, x)?;
            cx.bin_s(B::Pow, a, p)?
        }
        None => x,
    };
    let xp = pad_spatial(cx, v, &before, &lens, 0.0)?;
    let sum = window_reduce(cx, xp, &g, false)?;
    if let Some(p) = p {
        return cx.bin_s(B::Pow, sum, 1.0 / p);
    }
    // Per-position divisor: window taps inside the input (or inside the explicit padding when
    // count_include_pad), a product of per-axis counts.
    let mut per_axis: Vec<Vec<f64>> = Vec::new();
    for i in 0..n {
        let (lo, hi) = if include_pad {
            (0i64, (xs[i + 2] + g.pads[i].0 + g.pads[i].1) as i64)
        } else {
            (g.pads[i].0 as i64, (g.pads[i].0 + xs[i + 2]) as i64)
        };
        per_axis.push(
            (0..g.out[i])
                .map(|o| {
                    (0..g.kernel[i])
                        .filter(|&t| {
                            let pos = (o * g.strides[i] + t * g.dil[i]) as i64;
                            pos >= lo && pos < hi
                        })
                        .count()
                        .max(1) as f64
                })
                .collect(),
        );
    }
    let total: usize = g.out.iter().product();
    cx.guard(total)?;
    let mut div = vec![1.0f64; total];
    for (idx, d) in div.iter_mut().enumerate() {
        let mut rem = idx;
        for i in (0..n).rev() {
            *d *= per_axis[i][rem % g.out[i]];
            rem /= g.out[i];
        }
    }
    let uniform = div.iter().all(|&d| d == div[0]);
    if uniform {
        return cx.bin_s(B::Div, sum, div[0]);
    }
    let mut ds = vec![1, 1];
    ds.extend_from_slice(&g.out);
    let dt = cx.dt(x);
    let dv = cx.konst(HostTensor::from_f64(dt, ds, &div));
    cx.bin(B::Div, sum, dv)
}

/// `(sum |x|^p)^(1/p)` over `axes`.
fn lp_reduce(cx: &mut Cx, x: NodeId, axes: &[usize], p: f64) -> R<NodeId> {
    let a = cx.un(U::Abs, x)?;
    let ap = cx.bin_s(B::Pow, a, p)?;
    let s = cx.reduce(ReduceOp::Sum, ap, axes, true)?;
    cx.bin_s(B::Pow, s, 1.0 / p)
}

/// Reshapes a per-channel `[C]` parameter to broadcast over `[N, C, ...]` of rank `r`.
fn per_channel(cx: &mut Cx, p: NodeId, r: usize) -> R<NodeId> {
    let s = cx.shape(p)?;
    let mut dims = s.clone();
    dims.extend(std::iter::repeat_n(1, r.saturating_sub(2)));
    cx.reshape(p, &dims)
}

fn batch_norm(cx: &mut Cx) -> Out {
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

fn instance_norm(cx: &mut Cx) -> R<NodeId> {
    cx.arity(3, 3)?;
    let (x, sc, b) = (cx.inp(0)?, cx.inp(1)?, cx.inp(2)?);
    let eps = cx.af("epsilon", 1e-5) as f64;
    let axes: Vec<usize> = (2..cx.rank(x)).collect();
    Ok(normalize_per_channel(cx, x, sc, b, &axes, eps)?.0)
}

/// `(x - mean) / sqrt(var + eps) * sc + b` with the mean and (biased) variance of `x` over `axes`
/// and the scale and bias per channel (axis 1). Returns the result, the mean and the variance
/// (with kept axes).
fn normalize_per_channel(
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

fn layer_norm(cx: &mut Cx) -> Out {
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

fn group_norm(cx: &mut Cx) -> R<NodeId> {
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

fn rms_norm(cx: &mut Cx) -> R<NodeId> {
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

fn lrn(cx: &mut Cx) -> R<NodeId> {
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

fn gemm(cx: &mut Cx) -> R<NodeId> {
    cx.arity(2, 3)?;
    let (a, b, c) = (cx.inp(0)?, cx.inp(1)?, cx.opt(2));
    let (alpha, beta) = (cx.af("alpha", 1.0) as f64, cx.af("beta", 1.0) as f64);
    let ta = cx.ai("transA", 0) != 0;
    let tb = cx.ai("transB", 0) != 0;
    if cx.rank(a) != 2 || cx.rank(b) != 2 {
        return Err(cx.err("A and B must be 2-D"));
    }
    let a = if ta { cx.permute(a, &[1, 0])? } else { a };
    let b = if tb { cx.permute(b, &[1, 0])? } else { b };
    let mut y = cx.matmul(a, b)?;
    if alpha != 1.0 {
        y = cx.bin_s(B::Mul, y, alpha)?;
    }
    if let Some(c) = c {
        let c = if beta != 1.0 { cx.bin_s(B::Mul, c, beta)? } else { c };
        y = cx.bin(B::Add, y, c)?;
    }
    Ok(y)
}

/// `x - zero_point` as i32 (zero point scalar, or per-`axis` 1-D).
fn minus_zp(cx: &mut Cx, x: NodeId, zp: Option<NodeId>, axis: Option<usize>) -> R<NodeId> {
    if cx.rank(x) == 0 {
        return Err(cx.err("quantized operands must have rank >= 1"));
    }
    let xi = cx.cast(x, DType::I32)?;
    let Some(zp) = zp else { return Ok(xi) };
    let z = cx.cast(zp, DType::I32)?;
    let z = match axis {
        Some(a) if cx.rank(z) == 1 && cx.shape(z)?[0] != 1 => {
            let r = cx.rank(x);
            let mut dims = vec![1; r];
            dims[a] = cx.shape(z)?[0];
            cx.reshape(z, &dims)?
        }
        _ => z,
    };
    cx.bin(B::Sub, xi, z)
}

fn matmul_integer(cx: &mut Cx) -> R<NodeId> {
    cx.arity(2, 4)?;
    let (a, b) = (cx.inp(0)?, cx.inp(1)?);
    let ra = cx.rank(a);
    let rb = cx.rank(b);
    if ra == 0 || rb == 0 {
        return Err(cx.err("MatMulInteger needs inputs of rank >= 1"));
    }
    let a = minus_zp(cx, a, cx.opt(2), Some(ra.saturating_sub(2)))?;
    let b = minus_zp(cx, b, cx.opt(3), Some(rb - 1))?;
    cx.matmul(a, b)
}

/// Quantizes `v` (float) with `scale` and `zp` to `out` (round half to even, saturate).
fn requantize(cx: &mut Cx, v: NodeId, scale: NodeId, zp: Option<NodeId>, out: DType) -> R<NodeId> {
    let q = cx.bin(B::Div, v, scale)?;
    let q = cx.un(U::Round, q)?;
    let q = match zp {
        Some(z) => {
            let z = cx.cast(z, cx.dt(q))?;
            cx.bin(B::Add, q, z)?
        }
        None => q,
    };
    let (lo, hi) = int_range(out);
    let q = cx.bin_s(B::Max, q, lo)?;
    let q = cx.bin_s(B::Min, q, hi)?;
    cx.cast(q, out)
}

fn int_range(d: DType) -> (f64, f64) {
    let bits = d.size_bytes() as i32 * 8;
    if d.is_signed_int() { (-(2f64.powi(bits - 1)), 2f64.powi(bits - 1) - 1.0) } else { (0.0, 2f64.powi(bits) - 1.0) }
}

/// A per-axis or blocked scale/zero-point reshaped to broadcast against `x`.
fn quant_param(cx: &mut Cx, p: NodeId, x: NodeId, axis: i64, block: usize) -> R<NodeId> {
    let ps = cx.shape(p)?;
    let xs = cx.shape(x)?;
    if ps.iter().product::<usize>() == 1 && ps.len() <= 1 {
        return cx.reshape(p, &[]);
    }
    let axis = cx.axis(axis, xs.len())?;
    if block > 0 {
        // Blocked: p has x's shape with axis extent ceil(n / block); repeat each entry.
        if ps.len() != xs.len() {
            return Err(cx.err(format!("blocked scale {ps:?} must have the input's rank")));
        }
        let mut inter = ps.clone();
        inter.insert(axis + 1, 1);
        let r = cx.reshape(p, &inter)?;
        let mut big = ps.clone();
        big.insert(axis + 1, block);
        let e = cx.expand(r, &big)?;
        let mut merged = ps.clone();
        merged[axis] *= block;
        let m = cx.reshape(e, &merged)?;
        return cx.slice(m, axis, 0, xs[axis] as i64, 1);
    }
    if ps.len() == 1 {
        let mut dims = vec![1; xs.len()];
        dims[axis] = ps[0];
        return cx.reshape(p, &dims);
    }
    Ok(p)
}

fn quantize_linear(cx: &mut Cx) -> R<NodeId> {
    cx.arity(2, 3)?;
    let (x, s, zp) = (cx.inp(0)?, cx.inp(1)?, cx.opt(2));
    let out = match (zp, cx.ai_opt("output_dtype")) {
        (Some(z), _) => cx.dt(z),
        (None, Some(c)) if c != 0 => cx.dtype_attr("output_dtype")?,
        _ => DType::U8,
    };
    if !out.is_int() {
        return Err(cx.unsup(format!("quantization to {out}")));
    }
    let axis = cx.ai("axis", 1);
    let block = cx.ai("block_size", 0).clamp(0, 1 << 24) as usize;
    let s = quant_param(cx, s, x, axis, block)?;
    let zp = match zp {
        Some(z) => Some(quant_param(cx, z, x, axis, block)?),
        None => None,
    };
    let d = cx.dt(x);
    let wide = if d == DType::F64 { DType::F64 } else { DType::F32 };
    let xw = cx.cast(x, wide)?;
    let sw = cx.cast(s, wide)?;
    requantize(cx, xw, sw, zp, out)
}

fn dequantize_linear(cx: &mut Cx) -> R<NodeId> {
    cx.arity(2, 3)?;
    let (x, s, zp) = (cx.inp(0)?, cx.inp(1)?, cx.opt(2));
    let axis = cx.ai("axis", 1);
    let block = cx.ai("block_size", 0).clamp(0, 1 << 24) as usize;
    let s = quant_param(cx, s, x, axis, block)?;
    let out = cx.dt(s);
    let xi = cx.cast(x, DType::I64)?;
    let v = match zp {
        Some(z) => {
            let z = quant_param(cx, z, x, axis, block)?;
            let z = cx.cast(z, DType::I64)?;
            cx.bin(B::Sub, xi, z)?
        }
        None => xi,
    };
    let wide = if out == DType::F64 { DType::F64 } else { DType::F32 };
    let vf = cx.cast(v, wide)?;
    let sf = cx.cast(s, wide)?;
    let y = cx.bin(B::Mul, vf, sf)?;
    cx.cast(y, out)
}

fn dynamic_quantize(cx: &mut Cx) -> Out {
    cx.arity(1, 1)?;
    let x = cx.inp(0)?;
    let r = cx.rank(x);
    let all: Vec<usize> = (0..r).collect();
    let mx = cx.reduce(ReduceOp::Max, x, &all, false)?;
    let mn = cx.reduce(ReduceOp::Min, x, &all, false)?;
    let mx = cx.bin_s(B::Max, mx, 0.0)?;
    let mn = cx.bin_s(B::Min, mn, 0.0)?;
    let range = cx.bin(B::Sub, mx, mn)?;
    let scale = cx.bin_s(B::Div, range, 255.0)?;
    let nm = cx.un(U::Neg, mn)?;
    let zq = cx.bin(B::Div, nm, scale)?;
    let zq = cx.un(U::Round, zq)?;
    let zq = cx.bin_s(B::Max, zq, 0.0)?;
    let zq = cx.bin_s(B::Min, zq, 255.0)?;
    let zp = cx.cast(zq, DType::U8)?;
    let y = requantize(cx, x, scale, Some(zp), DType::U8)?;
    Ok(vec![Some(y), Some(scale), Some(zp)])
}

fn qlinear_matmul(cx: &mut Cx) -> R<NodeId> {
    cx.arity(8, 8)?;
    let (a, sa, za, b, sb, zb, sy, zy) =
        (cx.inp(0)?, cx.inp(1)?, cx.inp(2)?, cx.inp(3)?, cx.inp(4)?, cx.inp(5)?, cx.inp(6)?, cx.inp(7)?);
    let ra = cx.rank(a);
    let rb = cx.rank(b);
    if ra == 0 || rb == 0 {
        return Err(cx.err("QLinearMatMul needs inputs of rank >= 1"));
    }
    let ai = minus_zp(cx, a, Some(za), Some(ra.saturating_sub(2)))?;
    let bi = minus_zp(cx, b, Some(zb), Some(rb - 1))?;
    let af = cx.cast(ai, DType::F64)?;
    let bf = cx.cast(bi, DType::F64)?;
    let sa = per_axis_scale(cx, sa, ra, ra.saturating_sub(2))?;
    let sb = per_axis_scale(cx, sb, rb, rb - 1)?;
    let af = cx.bin(B::Mul, af, sa)?;
    let bf = cx.bin(B::Mul, bf, sb)?;
    let acc = cx.matmul(af, bf)?;
    let sy = cx.cast(sy, DType::F64)?;
    let out = cx.dt(zy);
    requantize(cx, acc, sy, Some(zy), out)
}

/// A scale as f64, reshaped per `axis` when 1-D with several entries.
fn per_axis_scale(cx: &mut Cx, s: NodeId, rank: usize, axis: usize) -> R<NodeId> {
    let s = cx.cast(s, DType::F64)?;
    let ss = cx.shape(s)?;
    if ss.len() == 1 && ss[0] != 1 {
        let mut dims = vec![1; rank];
        dims[axis] = ss[0];
        return cx.reshape(s, &dims);
    }
    Ok(s)
}

/// Integer convolution in f64 (exact for 8-bit operands), returned as i32.
fn conv_integer(cx: &mut Cx) -> R<NodeId> {
    cx.arity(2, 4)?;
    let (x, w) = (cx.inp(0)?, cx.inp(1)?);
    let xi = minus_zp(cx, x, cx.opt(2), Some(1))?;
    let wi = minus_zp(cx, w, cx.opt(3), Some(0))?;
    let xf = cx.cast(xi, DType::F64)?;
    let wf = cx.cast(wi, DType::F64)?;
    let y = conv_with_attrs(cx, xf, wf, None)?;
    cx.cast(y, DType::I32)
}

fn conv_with_attrs(cx: &mut Cx, x: NodeId, w: NodeId, b: Option<NodeId>) -> R<NodeId> {
    let xs = cx.shape(x)?;
    let ws = cx.shape(w)?;
    if xs.len() < 3 || ws.len() != xs.len() {
        return Err(cx.err(format!("input {xs:?} and weight {ws:?} ranks do not fit")));
    }
    let groups = cx.ai("group", 1).max(1) as usize;
    let k = kernel_shape(cx, Some(&ws[2..]))?;
    let g = geometry(cx, &xs[2..], k, false)?;
    conv_nd(cx, x, w, b, &g, groups)
}

fn qlinear_conv(cx: &mut Cx) -> R<NodeId> {
    cx.arity(8, 9)?;
    let (x, sx, zx, w, sw, zw, sy, zy) =
        (cx.inp(0)?, cx.inp(1)?, cx.inp(2)?, cx.inp(3)?, cx.inp(4)?, cx.inp(5)?, cx.inp(6)?, cx.inp(7)?);
    let xi = minus_zp(cx, x, Some(zx), Some(1))?;
    let wi = minus_zp(cx, w, Some(zw), Some(0))?;
    let xf = cx.cast(xi, DType::F64)?;
    let wf = cx.cast(wi, DType::F64)?;
    let rx = cx.rank(x);
    let sx = per_axis_scale(cx, sx, rx, 1)?;
    let sw = per_axis_scale(cx, sw, rx, 0)?;
    let xf = cx.bin(B::Mul, xf, sx)?;
    let wf = cx.bin(B::Mul, wf, sw)?;
    let mut y = conv_with_attrs(cx, xf, wf, None)?;
    if let Some(b) = cx.opt(8) {
        // Bias is int32 in units of x_scale * w_scale.
        let bf = cx.cast(b, DType::F64)?;
        let sxv = cx.reshape(sx, &[])?;
        let swv = cx.reshape(sw, &[cx.shape(sw)?.iter().product()])?;
        let s = cx.bin(B::Mul, swv, sxv)?;
        let bb = cx.bin(B::Mul, bf, s)?;
        let bb = per_channel(cx, bb, rx)?;
        y = cx.bin(B::Add, y, bb)?;
    }
    let sy = cx.cast(sy, DType::F64)?;
    let out = cx.dt(zy);
    requantize(cx, y, sy, Some(zy), out)
}

/// Einsum: each operand's letters are aligned (diagonals taken for repeated letters), all
/// operands are multiplied with broadcasting, and letters absent from the output are summed.
fn einsum(cx: &mut Cx) -> R<NodeId> {
    let eq = cx.as_str("equation", "").replace(' ', "");
    let ops: Vec<NodeId> = (0..cx.ins.len()).map(|i| cx.inp(i)).collect::<R<_>>()?;
    if ops.is_empty() {
        return Err(cx.err("needs at least one input"));
    }
    let (lhs, rhs) = match eq.split_once("->") {
        Some((l, r)) => (l.to_string(), Some(r.to_string())),
        None => (eq.clone(), None),
    };
    let terms: Vec<&str> = lhs.split(',').collect();
    if terms.len() != ops.len() {
        return Err(cx.err(format!("equation {eq:?} has {} operands, the node {}", terms.len(), ops.len())));
    }
    // Expand "..." into upper-case placeholder letters (equations use lower-case letters).
    let mut ell_rank = 0usize;
    for (t, &x) in terms.iter().zip(&ops) {
        if t.contains("...") {
            let named = t.replace("...", "").chars().count();
            ell_rank = ell_rank.max(cx.rank(x).saturating_sub(named));
        }
    }
    let ell: String = (0..ell_rank).map(|i| (b'A' + i as u8) as char).collect();
    let expand_term = |t: &str, rank: usize| -> String {
        if t.contains("...") {
            let named = t.replace("...", "").chars().count();
            let k = rank.saturating_sub(named);
            t.replace("...", &ell[ell_rank - k..])
        } else {
            t.to_string()
        }
    };
    let terms: Vec<String> = terms.iter().zip(&ops).map(|(t, &x)| expand_term(t, cx.rank(x))).collect();
    let out: String = match rhs {
        Some(r) => r.replace("...", &ell),
        None => {
            // Implicit output: ellipsis letters, then letters appearing once, sorted.
            let mut counts: std::collections::BTreeMap<char, usize> = Default::default();
            for t in &terms {
                for c in t.chars().filter(|c| c.is_ascii_lowercase()) {
                    *counts.entry(c).or_default() += 1;
                }
            }
            let mut s = ell.clone();
            s.extend(counts.iter().filter(|(_, n)| **n == 1).map(|(c, _)| *c));
            s
        }
    };
    // The output may only keep (and permute) letters of the inputs, each once.
    for (k, c) in out.chars().enumerate() {
        if !terms.iter().any(|t| t.contains(c)) {
            return Err(cx.err(format!("equation {eq:?}: output letter {c:?} appears in no input term")));
        }
        if out.chars().skip(k + 1).any(|d| d == c) {
            return Err(cx.err(format!("equation {eq:?}: output letter {c:?} appears twice")));
        }
    }
    // All letters in a canonical order: output letters first, then summed ones.
    let mut letters: Vec<char> = out.chars().collect();
    for t in &terms {
        for c in t.chars() {
            if !letters.contains(&c) {
                letters.push(c);
            }
        }
    }
    // Extents may be symbolic (a batch, a sequence): they are only compared, broadcast and
    // carried into reshapes.
    let mut extent: std::collections::HashMap<char, Dim> = Default::default();
    let mut aligned = Vec::new();
    for (t, &x) in terms.iter().zip(&ops) {
        let chars: Vec<char> = t.chars().collect();
        let s = cx.dims(x);
        if chars.len() != s.len() {
            return Err(cx.err(format!("term {t:?} does not match operand rank {}", s.len())));
        }
        let mut v = x;
        let mut cur: Vec<char> = chars.clone();
        // Take diagonals for repeated letters.
        loop {
            let dup = (0..cur.len()).find_map(|i| (i + 1..cur.len()).find(|&j| cur[j] == cur[i]).map(|j| (i, j)));
            let Some((i, j)) = dup else { break };
            let vs = cx.dims(v);
            if vs[i] != vs[j] {
                return Err(cx.err(format!("letter {} has extents {} and {}", cur[i], vs[i], vs[j])));
            }
            v = diagonal(cx, v, i, j)?;
            cur.remove(j);
        }
        let vs = cx.dims(v);
        let one = Dim::Static(1);
        for (c, n) in cur.iter().zip(&vs) {
            match extent.get(c) {
                Some(m) if m != n && *m != one && *n != one => {
                    return Err(cx.err(format!("letter {c} has extents {m} and {n}")));
                }
                Some(m) if m == n || *n == one => {}
                _ => {
                    extent.insert(*c, n.clone());
                }
            }
        }
        // Permute into canonical order and insert unit axes for missing letters.
        let present: Vec<char> = letters.iter().copied().filter(|c| cur.contains(c)).collect();
        let perm: Vec<usize> = present.iter().map(|c| cur.iter().position(|x| x == c).expect("present")).collect();
        v = cx.permute(v, &perm)?;
        let dims: Vec<Dim> = letters
            .iter()
            .map(|c| match cur.iter().position(|x| x == c) {
                Some(p) => vs[p].clone(),
                None => Dim::Static(1),
            })
            .collect();
        v = cx.reshape_dims(v, dims)?;
        aligned.push(v);
    }
    let mut acc = aligned[0];
    for &v in &aligned[1..] {
        acc = cx.bin(B::Mul, acc, v)?;
    }
    let full: Vec<Dim> = letters.iter().map(|c| extent.get(c).cloned().unwrap_or(Dim::Static(1))).collect();
    acc = cx.expand_dims(acc, full)?;
    let nout = out.chars().count();
    if letters.len() > nout {
        let axes: Vec<usize> = (nout..letters.len()).collect();
        acc = cx.reduce(ReduceOp::Sum, acc, &axes, false)?;
    } else if aligned.len() == 1 && acc == ops[0] {
        acc = cx.bin_s(B::Mul, acc, 1.0)?;
    }
    Ok(acc)
}

/// The diagonal of axes `i < j` (equal extents), kept at axis `i`; axis `j` is removed.
fn diagonal(cx: &mut Cx, v: NodeId, i: usize, j: usize) -> R<NodeId> {
    let s = cx.shape(v)?;
    let n = s[i];
    // Move i, j to the end, flatten them, take every (n+1)-th element, move back.
    let r = s.len();
    let mut perm: Vec<usize> = (0..r).filter(|&k| k != i && k != j).collect();
    perm.extend([i, j]);
    let p = cx.permute(v, &perm)?;
    let mut flat: Vec<usize> = perm[..r - 2].iter().map(|&k| s[k]).collect();
    flat.push(n * n);
    let f = cx.reshape(p, &flat)?;
    let d = cx.slice(f, r - 2, 0, (n * n) as i64, (n + 1) as i64)?;
    // d has the diagonal as its last axis; move it to position i.
    let mut back: Vec<usize> = (0..r - 2).collect();
    back.insert(i, r - 2);
    cx.permute(d, &back)
}

/// 2-D deformable convolution: every kernel tap samples the input bilinearly (zero outside) at
/// its offset position, scaled by the mask; the samples are contracted with the weight by a
/// grouped matrix product.
fn deform_conv(cx: &mut Cx) -> R<NodeId> {
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
fn max_pool_with_indices(cx: &mut Cx, x: NodeId, xs: &[usize], g: &Geo) -> Out {
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

/// MaxUnpool: scatters the values to their flat output indices (a one-hot product).
fn max_unpool(cx: &mut Cx) -> R<NodeId> {
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
    let pos = cx.iota(t, DType::I64)?;
    let pos = cx.reshape(pos, &[t, 1])?;
    let ii = cx.cast(i, DType::I64)?;
    let ii = cx.reshape(ii, &[1, j])?;
    let eq = cx.bin(B::Eq, pos, ii)?; // [T, J]
    let xf = cx.reshape(x, &[1, j])?;
    let z = cx.scalar(cx.dt(x), 0.0);
    let v = cx.select(eq, xf, z)?;
    let y = cx.reduce(ReduceOp::Sum, v, &[1], false)?;
    cx.reshape(y, &out)
}
