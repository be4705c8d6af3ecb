//! Neural-network ops: convolution (1-D/2-D/3-D, transposed, integer, quantized), pooling,
//! normalizations, Gemm/MatMul (incl. integer and quantized), Einsum and (de)quantization.
//!
//! The IR has 2-D convolution and pooling only: 1-D goes through 2-D with a unit axis; 3-D is a
//! sum (max) over the kernel's depth taps of 2-D convolutions (poolings) of strided depth
//! slices. Average pooling is a window sum divided by a per-position count computed at import
//! time, which covers every padding/ceil/count_include_pad combination.
//!
//! This file holds the dispatch, convolution and pooling geometry; the other jobs live beside it:
//! `nn/norm.rs` (normalizations), `nn/quant.rs` (integer and quantized ops), `nn/einsum.rs` and
//! `nn/window_extra.rs` (deformable convolution, max pooling with indices, MaxUnpool).

mod einsum;
mod norm;
mod quant;
mod window_extra;

use self::{einsum::*, norm::*, quant::*, window_extra::*};
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

impl Geo {
    /// The IR's 2-D window of a geometry with two spatial axes.
    fn window2d(&self) -> Window2d {
        Window2d {
            kernel: [self.kernel[0], self.kernel[1]],
            stride: [self.strides[0], self.strides[1]],
            padding: [self.pads[0].0, self.pads[1].0, self.pads[0].1, self.pads[1].1],
            dilation: [self.dil[0], self.dil[1]],
        }
    }
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
    let window = g.window2d();
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
        let window = g.window2d();
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
        let window = g.window2d();
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
        let window = g.window2d();
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
