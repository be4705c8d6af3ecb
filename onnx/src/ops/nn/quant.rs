//! Integer and quantized ops: MatMulInteger, ConvInteger, QLinearMatMul, QLinearConv, QuantizeLinear, DequantizeLinear (per tensor, per axis, blocked; to and from integers and fp8) and DynamicQuantizeLinear.

use super::*;

/// `x - zero_point` as i32 (zero point scalar, or per-`axis` 1-D).
pub(super) fn minus_zp(cx: &mut Cx, x: NodeId, zp: Option<NodeId>, axis: Option<usize>) -> R<NodeId> {
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

pub(super) fn matmul_integer(cx: &mut Cx) -> R<NodeId> {
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
pub(super) fn requantize(cx: &mut Cx, v: NodeId, scale: NodeId, zp: Option<NodeId>, out: DType) -> R<NodeId> {
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

pub(super) fn int_range(d: DType) -> (f64, f64) {
    let bits = d.size_bytes() as i32 * 8;
    if d.is_signed_int() { (-(2f64.powi(bits - 1)), 2f64.powi(bits - 1) - 1.0) } else { (0.0, 2f64.powi(bits) - 1.0) }
}

/// A per-axis or blocked scale/zero-point reshaped to broadcast against `x`.
pub(super) fn quant_param(cx: &mut Cx, p: NodeId, x: NodeId, axis: i64, block: usize) -> R<NodeId> {
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

pub(super) fn quantize_linear(cx: &mut Cx) -> R<NodeId> {
    cx.arity(2, 3)?;
    let (x, s, zp) = (cx.inp(0)?, cx.inp(1)?, cx.opt(2));
    let out = match (zp, cx.ai_opt("output_dtype")) {
        (Some(z), _) => cx.dt(z),
        (None, Some(c)) if c != 0 => cx.dtype_attr("output_dtype")?,
        _ => DType::U8,
    };
    if !out.is_int() && !out.is_fp8() {
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
    if out.is_fp8() {
        // fp8: `x / scale + zero_point` rounded by the cast (nearest even), no integer rounding;
        // `saturate` (default 1) as Cast's.
        let q = cx.bin(B::Div, xw, sw)?;
        let q = match zp {
            Some(z) => {
                let z = cx.cast(z, wide)?;
                cx.bin(B::Add, q, z)?
            }
            None => q,
        };
        let saturate = cx.ai("saturate", 1) != 0;
        return cx.cast_saturating(q, out, saturate);
    }
    requantize(cx, xw, sw, zp, out)
}

pub(super) fn dequantize_linear(cx: &mut Cx) -> R<NodeId> {
    cx.arity(2, 3)?;
    let (x, s, zp) = (cx.inp(0)?, cx.inp(1)?, cx.opt(2));
    let axis = cx.ai("axis", 1);
    let block = cx.ai("block_size", 0).clamp(0, 1 << 24) as usize;
    let s = quant_param(cx, s, x, axis, block)?;
    let out = cx.dt(s);
    // fp8 values subtract their zero point as floats (exact in f32: both widen exactly).
    let xi = if cx.dt(x).is_fp8() { cx.cast(x, DType::F32)? } else { cx.cast(x, DType::I64)? };
    let v = match zp {
        Some(z) => {
            let z = quant_param(cx, z, x, axis, block)?;
            let z = cx.cast(z, cx.dt(xi))?;
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

pub(super) fn dynamic_quantize(cx: &mut Cx) -> Out {
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

pub(super) fn qlinear_matmul(cx: &mut Cx) -> R<NodeId> {
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
pub(super) fn per_axis_scale(cx: &mut Cx, s: NodeId, rank: usize, axis: usize) -> R<NodeId> {
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
pub(super) fn conv_integer(cx: &mut Cx) -> R<NodeId> {
    cx.arity(2, 4)?;
    let (x, w) = (cx.inp(0)?, cx.inp(1)?);
    let xi = minus_zp(cx, x, cx.opt(2), Some(1))?;
    let wi = minus_zp(cx, w, cx.opt(3), Some(0))?;
    let xf = cx.cast(xi, DType::F64)?;
    let wf = cx.cast(wi, DType::F64)?;
    let y = conv_with_attrs(cx, xf, wf, None)?;
    cx.cast(y, DType::I32)
}

pub(super) fn conv_with_attrs(cx: &mut Cx, x: NodeId, w: NodeId, b: Option<NodeId>) -> R<NodeId> {
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

pub(super) fn qlinear_conv(cx: &mut Cx) -> R<NodeId> {
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
