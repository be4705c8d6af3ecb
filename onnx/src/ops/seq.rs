//! Sequence-model ops: Attention (with masks, causal and sliding windows, KV caches, grouped
//! heads, softcap), the NLL and softmax cross-entropy losses, and the recurrent ops (RNN, GRU,
//! LSTM) and Scan, unrolled over their static sequence length.

use crate::import::{Cx, R};
use sinter_core::ir::{BinaryOp as B, PadMode, ReduceOp, UnaryOp as U};
use sinter_core::{DType, HostTensor, NodeId, Op};

type Out = R<Vec<Option<NodeId>>>;

pub(super) fn lower(cx: &mut Cx, op: &str) -> Option<Out> {
    let r = match op {
        "Attention" => attention(cx),
        "NegativeLogLikelihoodLoss" => loss(cx, false),
        "SoftmaxCrossEntropyLoss" => loss(cx, true),
        "RNN" | "GRU" | "LSTM" => super::rnn::recurrent(cx, op),
        "Scan" => super::rnn::scan(cx),
        "If" => super::rnn::if_op(cx),
        "Loop" => super::rnn::loop_op(cx),
        "RotaryEmbedding" => one(cx, rotary),
        "SwiGLU" => one(cx, |cx| {
            cx.arity(2, 2)?;
            let (a, b) = (cx.inp(0)?, cx.inp(1)?);
            let alpha = cx.af("alpha", 1.0) as f64;
            let aa = cx.bin_s(B::Mul, a, alpha)?;
            let s = cx.un(U::Sigmoid, aa)?;
            let sw = cx.bin(B::Mul, a, s)?;
            cx.bin(B::Mul, sw, b)
        }),
        "TensorScatter" => one(cx, tensor_scatter),
        "CausalConvWithState" => causal_conv(cx),
        "LinearAttention" => linear_attention(cx),
        _ => return None,
    };
    Some(r)
}

fn one(cx: &mut Cx, f: impl FnOnce(&mut Cx) -> R<NodeId>) -> Out {
    f(cx).map(|x| vec![Some(x)])
}

/// `-inf` where `m` is false, 0 where true, in dtype `d`.
fn bool_to_bias(cx: &mut Cx, m: NodeId, d: DType) -> R<NodeId> {
    let z = cx.scalar(d, 0.0);
    let ni = cx.scalar(d, f64::NEG_INFINITY);
    cx.select(m, z, ni)
}

fn attention(cx: &mut Cx) -> Out {
    cx.arity(3, 7)?;
    let (mut q, mut k, mut v) = (cx.inp(0)?, cx.inp(1)?, cx.inp(2)?);
    let (mask, past_k, past_v, nonpad) = (cx.opt(3), cx.opt(4), cx.opt(5), cx.opt(6));
    let d = cx.dt(q);
    let rank = cx.rank(q);
    if cx.rank(k) != rank || cx.rank(v) != rank || (rank != 3 && rank != 4) {
        return Err(cx.err("Q, K and V must all be 3-D or all 4-D"));
    }
    if past_k.is_some() != past_v.is_some() {
        return Err(cx.err("past_key and past_value must be given together"));
    }
    let three = rank == 3;
    if three {
        let qh = cx.ai("q_num_heads", 0);
        let kvh = cx.ai("kv_num_heads", 0);
        if qh <= 0 || kvh <= 0 {
            return Err(cx.err("3-D inputs need q_num_heads and kv_num_heads"));
        }
        let split = |cx: &mut Cx, x: NodeId, h: usize| -> R<NodeId> {
            let s = cx.shape(x)?;
            if s[2] % h != 0 {
                return Err(cx.err(format!("hidden size {} is not a multiple of {h} heads", s[2])));
            }
            let r = cx.reshape(x, &[s[0], s[1], h, s[2] / h])?;
            cx.permute(r, &[0, 2, 1, 3])
        };
        q = split(cx, q, qh as usize)?;
        k = split(cx, k, kvh as usize)?;
        v = split(cx, v, kvh as usize)?;
    }
    let qs = cx.shape(q)?;
    let scale = match cx.af_opt("scale") {
        Some(s) => s as f64,
        None => 1.0 / (qs[3] as f64).sqrt(),
    };
    let root = cx.scalar(d, scale.sqrt());
    let (present_k, present_v) = match (past_k, past_v) {
        (Some(pk), Some(pv)) => (cx.concat(vec![pk, k], 2)?, cx.concat(vec![pv, v], 2)?),
        _ => (k, v),
    };
    let past_len = match past_k {
        Some(pk) => cx.shape(pk)?[2],
        None => 0,
    };
    let ks = cx.shape(present_k)?;
    let (ql, kl) = (qs[2], ks[2]);
    let causal = cx.ai("is_causal", 0) != 0;
    let (lw, rw) = (cx.ai("left_window_size", -1), cx.ai("right_window_size", -1));
    // Per-batch causal/window offset: nonpad_kv_seqlen - q_len with an external cache.
    let batch_offset = match nonpad {
        Some(np) if past_k.is_none() => {
            let n = cx.cast(np, DType::I64)?;
            let n = cx.reshape(n, &[qs[0], 1, 1, 1])?;
            Some(cx.bin_s(B::Sub, n, ql as f64)?)
        }
        _ => None,
    };
    cx.guard(ql.saturating_mul(kl))?;
    // diff[i, j] = (i + offset) - j
    let diff = |cx: &mut Cx| -> R<NodeId> {
        let v: Vec<i64> = (0..ql * kl).map(|p| (p / kl) as i64 + past_len as i64 - (p % kl) as i64).collect();
        let base = cx.konst(HostTensor::from_i64(DType::I64, vec![ql, kl], &v));
        match batch_offset {
            Some(o) => {
                let vv: Vec<i64> = (0..ql * kl).map(|p| (p / kl) as i64 - (p % kl) as i64).collect();
                let b = cx.konst(HostTensor::from_i64(DType::I64, vec![ql, kl], &vv));
                cx.bin(B::Add, b, o)
            }
            None => Ok(base),
        }
    };
    let mut bias: Option<NodeId> = None;
    let mut mask = mask;
    if let Some(m) = mask {
        let ms = cx.shape(m)?;
        let last = *ms.last().ok_or_else(|| cx.err("attn_mask must have rank >= 1"))?;
        if last < kl {
            let mut pads = vec![(0i64, 0i64); ms.len()];
            pads[ms.len() - 1] = (0, (kl - last) as i64);
            let fill = if cx.dt(m) == DType::Bool { 0.0 } else { f64::NEG_INFINITY };
            mask = Some(cx.add(Op::Pad { pads, mode: PadMode::Constant(fill) }, vec![m])?);
        }
    }
    if let Some(m) = mask {
        let b = if cx.dt(m) == DType::Bool { bool_to_bias(cx, m, d)? } else { cx.cast(m, d)? };
        bias = Some(b);
    }
    if causal {
        let df = diff(cx)?;
        let z = cx.scalar(DType::I64, 0.0);
        let allowed = cx.bin(B::Ge, df, z)?;
        let cb = bool_to_bias(cx, allowed, d)?;
        bias = Some(match bias {
            Some(b) => cx.bin(B::Add, b, cb)?,
            None => cb,
        });
    }
    if lw >= 0 || rw >= 0 {
        let df = diff(cx)?;
        let t = cx.konst(HostTensor::from_i64(DType::Bool, vec![], &[1]));
        let mut allowed = t;
        if lw >= 0 {
            let l = cx.scalar(DType::I64, lw as f64);
            let c = cx.bin(B::Le, df, l)?;
            allowed = cx.bin(B::And, allowed, c)?;
        }
        if rw >= 0 {
            let nd = cx.un(U::Neg, df)?;
            let r = cx.scalar(DType::I64, rw as f64);
            let c = cx.bin(B::Le, nd, r)?;
            allowed = cx.bin(B::And, allowed, c)?;
        }
        let wb = bool_to_bias(cx, allowed, d)?;
        bias = Some(match bias {
            Some(b) => cx.bin(B::Add, b, wb)?,
            None => wb,
        });
    }
    if let Some(np) = nonpad {
        let n = cx.cast(np, DType::I64)?;
        let n = cx.reshape(n, &[qs[0], 1, 1, 1])?;
        let j = cx.iota(kl, DType::I64)?;
        let inside = cx.bin(B::Lt, j, n)?;
        let pb = bool_to_bias(cx, inside, d)?;
        bias = Some(match bias {
            Some(b) => cx.bin(B::Add, b, pb)?,
            None => pb,
        });
    }
    // Grouped heads: repeat K/V heads.
    let (qh, kh) = (qs[1], ks[1]);
    let (kk, vv) = repeat_kv_heads(cx, present_k, present_v, qh, kh)?;
    let qsc = cx.bin(B::Mul, q, root)?;
    let kt = cx.permute(kk, &[0, 1, 3, 2])?;
    let ksc = cx.bin(B::Mul, kt, root)?;
    let mut qk = cx.matmul(qsc, ksc)?;
    let softcap = cx.af("softcap", 0.0) as f64;
    if softcap > 0.0 {
        let t = cx.bin_s(B::Div, qk, softcap)?;
        let t = cx.un(U::Tanh, t)?;
        qk = cx.bin_s(B::Mul, t, softcap)?;
    }
    let with_bias = match bias {
        Some(b) => cx.bin(B::Add, qk, b)?,
        None => qk,
    };
    let mode = cx.ai("qk_matmul_output_mode", 0);
    let sm_in = match cx.ai_opt("softmax_precision") {
        Some(_) => {
            let p = cx.dtype_attr("softmax_precision")?;
            cx.cast(with_bias, p)?
        }
        None => with_bias,
    };
    let probs = match bias {
        None => cx.add(Op::Softmax { axis: 3 }, vec![sm_in])?,
        Some(b) => {
            // Softmax that leaves fully masked rows at 0 instead of NaN.
            let sd = cx.dt(sm_in);
            let m = cx.reduce(ReduceOp::Max, sm_in, &[3], true)?;
            let ninf = cx.scalar(sd, f64::NEG_INFINITY);
            let dead = cx.bin(B::Eq, m, ninf)?;
            let z = cx.scalar(sd, 0.0);
            let safe = cx.select(dead, z, m)?;
            let sh = cx.bin(B::Sub, sm_in, safe)?;
            let e = cx.un(U::Exp, sh)?;
            let s = cx.reduce(ReduceOp::Sum, e, &[3], true)?;
            let zero = cx.bin(B::Eq, s, z)?;
            let one = cx.scalar(sd, 1.0);
            let s = cx.select(zero, one, s)?;
            let p = cx.bin(B::Div, e, s)?;
            let br = cx.rank(b);
            let bm = cx.reduce(ReduceOp::Max, b, &[br - 1], true)?;
            let bd = cx.dt(bm);
            let bninf = cx.scalar(bd, f64::NEG_INFINITY);
            let all_masked = cx.bin(B::Eq, bm, bninf)?;
            cx.select(all_masked, z, p)?
        }
    };
    let probs = cx.cast(probs, d)?;
    let mut y = cx.matmul(probs, vv)?;
    if three {
        let ys = cx.shape(y)?;
        let t = cx.permute(y, &[0, 2, 1, 3])?;
        y = cx.reshape(t, &[ys[0], ys[2], ys[1] * ys[3]])?;
    }
    let qk_out = match mode {
        0 | 1 => qk,
        2 => with_bias,
        3 => probs,
        m => return Err(cx.err(format!("unknown qk_matmul_output_mode {m}"))),
    };
    let qk_out = cx.cast(qk_out, d)?;
    Ok(vec![Some(y), Some(present_k), Some(present_v), Some(qk_out)])
}

fn loss(cx: &mut Cx, softmax: bool) -> Out {
    cx.arity(2, 3)?;
    let (x, t, w) = (cx.inp(0)?, cx.inp(1)?, cx.opt(2));
    let xs = cx.shape(x)?;
    if xs.len() < 2 {
        return Err(cx.err("input must have rank >= 2"));
    }
    let c = xs[1];
    let d = cx.dt(x);
    let logp = if softmax { cx.add(Op::LogSoftmax { axis: 1 }, vec![x])? } else { x };
    let ts = cx.shape(t)?;
    let mut want = vec![xs[0]];
    want.extend_from_slice(&xs[2..]);
    if ts != want {
        return Err(cx.err(format!("target {ts:?} must have shape {want:?} for input {xs:?}")));
    }
    let t = cx.cast(t, DType::I64)?;
    let ii = cx.ai_opt("ignore_index");
    let valid = match ii {
        Some(i) => {
            let iv = cx.scalar(DType::I64, i as f64);
            Some(cx.bin(B::Ne, t, iv)?)
        }
        None => None,
    };
    let lo = cx.scalar(DType::I64, 0.0);
    let hi = cx.scalar(DType::I64, c.saturating_sub(1) as f64);
    let tc = cx.bin(B::Max, t, lo)?;
    let tc = cx.bin(B::Min, tc, hi)?;
    let mut us = ts.clone();
    us.insert(1, 1);
    let tu = cx.reshape(tc, &us)?;
    let g = cx.add(Op::GatherElements { axis: 1 }, vec![logp, tu])?;
    let g = cx.reshape(g, &ts)?;
    let mut l = cx.un(U::Neg, g)?;
    let z = cx.scalar(d, 0.0);
    if let Some(v) = valid {
        l = cx.select(v, l, z)?;
    }
    let gw = match (w, valid) {
        (Some(w), _) => {
            let gw = cx.add(Op::Gather { axis: 0 }, vec![w, tc])?;
            Some(match valid {
                Some(v) => cx.select(v, gw, z)?,
                None => gw,
            })
        }
        (None, Some(v)) => Some(cx.cast(v, d)?),
        (None, None) => None,
    };
    if let Some(gw) = gw {
        l = cx.bin(B::Mul, l, gw)?;
    }
    let red = cx.as_str("reduction", "mean");
    let all: Vec<usize> = (0..ts.len()).collect();
    let y = match (red.as_str(), gw) {
        ("none", _) => l,
        ("sum", _) => cx.reduce(ReduceOp::Sum, l, &all, false)?,
        ("mean", Some(gw)) => {
            let s = cx.reduce(ReduceOp::Sum, l, &all, false)?;
            let ws = cx.reduce(ReduceOp::Sum, gw, &all, false)?;
            cx.bin(B::Div, s, ws)?
        }
        ("mean", None) => cx.reduce(ReduceOp::Mean, l, &all, false)?,
        (r, _) => return Err(cx.err(format!("unknown reduction {r:?}"))),
    };
    let mut outs = vec![Some(y)];
    if softmax && cx.wants(1) {
        outs.push(Some(logp));
    }
    Ok(outs)
}

fn rotary(cx: &mut Cx) -> R<NodeId> {
    cx.arity(3, 4)?;
    let (x, cos, sin, pos) = (cx.inp(0)?, cx.inp(1)?, cx.inp(2)?, cx.opt(3));
    let xs = cx.shape(x)?;
    let four = xs.len() == 4;
    // To [B, S, H, D].
    let x4 = if four {
        cx.permute(x, &[0, 2, 1, 3])?
    } else if xs.len() == 3 {
        let h = cx.ai("num_heads", 0);
        if h <= 0 || xs[2] % h as usize != 0 {
            return Err(cx.err("3-D input needs num_heads dividing the hidden size"));
        }
        cx.reshape(x, &[xs[0], xs[1], h as usize, xs[2] / h as usize])?
    } else {
        return Err(cx.err("input must be 3-D or 4-D"));
    };
    let s4 = cx.shape(x4)?;
    let hd = s4[3];
    let rd = match cx.ai("rotary_embedding_dim", 0) {
        0 => hd,
        r if r > 0 && r as usize <= hd && r % 2 == 0 => r as usize,
        r => return Err(cx.err(format!("rotary_embedding_dim {r} does not fit head size {hd}"))),
    };
    let half = rd / 2;
    let (cos, sin) = match pos {
        Some(p) => (cx.add(Op::Gather { axis: 0 }, vec![cos, p])?, cx.add(Op::Gather { axis: 0 }, vec![sin, p])?),
        None => (cos, sin),
    };
    let cs = cx.shape(cos)?;
    if cs.last() != Some(&half) {
        return Err(cx.err(format!("cos cache {cs:?} must end in rotary_embedding_dim/2 = {half}")));
    }
    let mut us = cs.clone();
    us.insert(us.len() - 1, 1);
    let cos = cx.reshape(cos, &us)?;
    let sin = cx.reshape(sin, &us)?;
    let rot = cx.slice(x4, 3, 0, rd as i64, 1)?;
    let interleaved = cx.ai("interleaved", 0) != 0;
    let (x1, x2) = if interleaved {
        (cx.slice(rot, 3, 0, rd as i64, 2)?, cx.slice(rot, 3, 1, rd as i64, 2)?)
    } else {
        (cx.slice(rot, 3, 0, half as i64, 1)?, cx.slice(rot, 3, half as i64, rd as i64, 1)?)
    };
    let a = cx.bin(B::Mul, cos, x1)?;
    let b = cx.bin(B::Mul, sin, x2)?;
    let real = cx.bin(B::Sub, a, b)?;
    let c = cx.bin(B::Mul, sin, x1)?;
    let d = cx.bin(B::Mul, cos, x2)?;
    let imag = cx.bin(B::Add, c, d)?;
    let mut rotated = if interleaved {
        let rs = cx.shape(real)?;
        let mut e = rs.clone();
        e.push(1);
        let r5 = cx.reshape(real, &e)?;
        let i5 = cx.reshape(imag, &e)?;
        let cat = cx.concat(vec![r5, i5], 4)?;
        cx.reshape(cat, &[s4[0], s4[1], s4[2], rd])?
    } else {
        cx.concat(vec![real, imag], 3)?
    };
    if rd < hd {
        let rest = cx.slice(x4, 3, rd as i64, hd as i64, 1)?;
        rotated = cx.concat(vec![rotated, rest], 3)?;
    }
    if four { cx.permute(rotated, &[0, 2, 1, 3]) } else { cx.reshape(rotated, &xs) }
}

fn tensor_scatter(cx: &mut Cx) -> R<NodeId> {
    cx.arity(2, 3)?;
    let (past, upd, wi) = (cx.inp(0)?, cx.inp(1)?, cx.opt(2));
    let ps = cx.shape(past)?;
    let us = cx.shape(upd)?;
    let r = ps.len();
    let axis = cx.axis(cx.ai("axis", -2), r)?;
    if axis == 0 || us.len() != r || (0..r).any(|i| if i == axis { us[i] > ps[i] } else { us[i] != ps[i] }) {
        return Err(cx.err(format!("update {us:?} does not fit cache {ps:?} on axis {axis}")));
    }
    let circular = match cx.as_str("mode", "linear").as_str() {
        "linear" => false,
        "circular" => true,
        m => return Err(cx.err(format!("unknown mode {m:?}"))),
    };
    let (l, s) = (ps[axis], us[axis]);
    let mut cs = vec![1; r];
    cs[axis] = l;
    let c = cx.iota(l, DType::I64)?;
    let c = cx.reshape(c, &cs)?;
    let mut src = c;
    if let Some(w) = wi {
        let mut ws = vec![1; r];
        ws[0] = ps[0];
        let w = cx.cast(w, DType::I64)?;
        let w = cx.reshape(w, &ws)?;
        src = cx.bin(B::Sub, c, w)?;
    }
    if circular {
        src = cx.bin_s(B::Mod, src, l as f64)?;
    }
    let z = cx.scalar(DType::I64, 0.0);
    let ge = cx.bin(B::Ge, src, z)?;
    let sl = cx.scalar(DType::I64, s as f64);
    let lt = cx.bin(B::Lt, src, sl)?;
    let valid = cx.bin(B::And, ge, lt)?;
    let idx = cx.bin(B::Max, src, z)?;
    let hi = cx.scalar(DType::I64, s.saturating_sub(1) as f64);
    let idx = cx.bin(B::Min, idx, hi)?;
    let mut full = ps.clone();
    full[axis] = l;
    let idx = cx.expand(idx, &full)?;
    let valid = cx.expand(valid, &full)?;
    // GatherElements reads update[.., idx, ..]; idx has the cache's shape (update's extents elsewhere).
    let g = cx.add(Op::GatherElements { axis }, vec![upd, idx])?;
    cx.select(valid, g, past)
}

fn causal_conv(cx: &mut Cx) -> Out {
    cx.arity(2, 4)?;
    let (x, w, b, st) = (cx.inp(0)?, cx.inp(1)?, cx.opt(2), cx.opt(3));
    let xs = cx.shape(x)?;
    let ws = cx.shape(w)?;
    if xs.len() != 3 || ws.len() != 3 || ws[0] != xs[1] || ws[1] != 1 || ws[2] == 0 {
        return Err(cx.err(format!("input {xs:?} / weight {ws:?} must be [B, C, L] / [C, 1, k]")));
    }
    let (bn, c, l, k) = (xs[0], xs[1], xs[2], ws[2]);
    let d = cx.dt(x);
    let pad = match st {
        Some(s) => s,
        None => cx.zeros(d, &[bn, c, k - 1])?,
    };
    let padded = cx.concat(vec![pad, x], 2)?;
    let total = l + k - 1;
    let p4 = cx.reshape(padded, &[bn, c, 1, total])?;
    let w4 = cx.reshape(w, &[c, 1, 1, k])?;
    let window = sinter_core::ir::Window2d { kernel: [1, k], stride: [1, 1], padding: [0; 4], dilation: [1, 1] };
    let mut ins = vec![p4, w4];
    ins.extend(b);
    let y = cx.add(Op::Conv2d { window, groups: c }, ins)?;
    let mut y = cx.reshape(y, &[bn, c, l])?;
    match cx.as_str("activation", "none").as_str() {
        "none" => {}
        "silu" | "swish" => {
            let s = cx.un(U::Sigmoid, y)?;
            y = cx.bin(B::Mul, y, s)?;
        }
        a => return Err(cx.err(format!("unknown activation {a:?}"))),
    }
    let present = cx.slice(padded, 2, (total - (k - 1)) as i64, total as i64, 1)?;
    Ok(vec![Some(y), Some(present)])
}

/// (B, T, H*D) -> (B, H, T, D).
fn heads(cx: &mut Cx, x: NodeId, h: usize) -> R<NodeId> {
    let s = cx.shape(x)?;
    if s.len() != 3 || h == 0 || s[2] % h != 0 {
        return Err(cx.err(format!("{s:?} does not split into {h} heads")));
    }
    let r = cx.reshape(x, &[s[0], s[1], h, s[2] / h])?;
    cx.permute(r, &[0, 2, 1, 3])
}

fn linear_attention(cx: &mut Cx) -> Out {
    cx.arity(3, 6)?;
    let (q, k, v) = (cx.inp(0)?, cx.inp(1)?, cx.inp(2)?);
    let (past, decay, beta) = (cx.opt(3), cx.opt(4), cx.opt(5));
    let rule = cx.as_str("update_rule", "gated_delta");
    let (gating, delta) = match rule.as_str() {
        "linear" => (false, false),
        "gated" => (true, false),
        "delta" => (false, true),
        "gated_delta" => (true, true),
        r => return Err(cx.err(format!("unknown update_rule {r:?}"))),
    };
    if gating != decay.is_some() || delta != beta.is_some() {
        return Err(cx.err(format!("update_rule {rule:?} does not match the decay/beta inputs given")));
    }
    let (hq, hk) = (cx.ai("q_num_heads", 0), cx.ai("kv_num_heads", 0));
    if hq <= 0 || hk <= 0 || hq % hk != 0 {
        return Err(cx.err("q_num_heads must be a positive multiple of kv_num_heads"));
    }
    let (hq, hk) = (hq as usize, hk as usize);
    let out_d = cx.dt(q);
    let f = DType::F32;
    let q4 = heads(cx, q, hq)?;
    let q4 = cx.cast(q4, f)?;
    let k4 = heads(cx, k, hk)?;
    let k4 = cx.cast(k4, f)?;
    let v4 = heads(cx, v, hk)?;
    let v4 = cx.cast(v4, f)?;
    let qs = cx.shape(q4)?;
    let vs = cx.shape(v4)?;
    let (bn, t, dk, dv) = (qs[0], qs[2], qs[3], vs[3]);
    let group = hq / hk;
    let decay4 = match decay {
        Some(g) => {
            let gs = cx.shape(g)?;
            let g4 = if gs.last() == Some(&hk) {
                let r = cx.reshape(g, &[bn, t, hk, 1])?;
                cx.permute(r, &[0, 2, 1, 3])?
            } else {
                heads(cx, g, hk)?
            };
            Some(cx.cast(g4, f)?)
        }
        None => None,
    };
    let beta4 = match beta {
        Some(b) => {
            let bs = cx.shape(b)?;
            let last = *bs.last().ok_or_else(|| cx.err("beta must be 3-D"))?;
            let r = cx.reshape(b, &[bn, t, last, 1])?;
            let p = cx.permute(r, &[0, 2, 1, 3])?;
            Some(cx.cast(p, f)?)
        }
        None => None,
    };
    let state_dtype = match past {
        Some(p) => cx.dt(p),
        None => out_d,
    };
    let mut state = match past {
        Some(p) => cx.cast(p, f)?,
        None => cx.zeros(f, &[bn, hk, dk, dv])?,
    };
    let scale = match cx.af("scale", 0.0) {
        0.0 => 1.0 / (dk as f64).sqrt(),
        s => s as f64,
    };
    // Step t of a [B, H, T, X] tensor as [B, H, 1, X].
    let step = |cx: &mut Cx, x: NodeId, i: usize| cx.slice(x, 2, i as i64, i as i64 + 1, 1);
    let mut outs = Vec::with_capacity(t);
    for i in 0..t {
        let qt = step(cx, q4, i)?; // [B, Hq, 1, dk]
        let kt = step(cx, k4, i)?; // [B, Hk, 1, dk]
        let mut vt = step(cx, v4, i)?; // [B, Hk, 1, dv]
        if let Some(g) = decay4 {
            let gt = step(cx, g, i)?; // [B, Hk, 1, 1 or dk]
            let e = cx.un(U::Exp, gt)?;
            let e = cx.permute(e, &[0, 1, 3, 2])?; // [B, Hk, 1 or dk, 1]
            state = cx.bin(B::Mul, state, e)?;
        }
        if let Some(bt) = beta4 {
            let retrieved = cx.matmul(kt, state)?; // [B, Hk, 1, dv]
            let diff = cx.bin(B::Sub, vt, retrieved)?;
            let b = step(cx, bt, i)?; // [B, Hk or 1, 1, 1]
            vt = cx.bin(B::Mul, b, diff)?;
        }
        let kc = cx.permute(kt, &[0, 1, 3, 2])?; // [B, Hk, dk, 1]
        let outer = cx.matmul(kc, vt)?; // [B, Hk, dk, dv]
        state = cx.bin(B::Add, state, outer)?;
        let read = if group == 1 {
            state
        } else {
            let r = cx.reshape(state, &[bn, hk, 1, dk, dv])?;
            let e = cx.expand(r, &[bn, hk, group, dk, dv])?;
            cx.reshape(e, &[bn, hk * group, dk, dv])?
        };
        let o = cx.matmul(qt, read)?; // [B, Hq, 1, dv]
        outs.push(cx.bin_s(B::Mul, o, scale)?);
    }
    let o = cx.concat(outs, 2)?; // [B, Hq, T, dv]
    let o = cx.permute(o, &[0, 2, 1, 3])?;
    let o = cx.reshape(o, &[bn, t, hq * dv])?;
    let o = cx.cast(o, out_d)?;
    let st = cx.cast(state, state_dtype)?;
    Ok(vec![Some(o), Some(st)])
}

/// Grouped-query attention: repeats each of the `kh` key/value heads of `k` and `v`
/// (`[batch, kh, seq, dim]`) `qh / kh` times so that they line up with `qh` query heads; `k` and
/// `v` unchanged when the counts agree.
fn repeat_kv_heads(cx: &mut Cx, k: NodeId, v: NodeId, qh: usize, kh: usize) -> R<(NodeId, NodeId)> {
    if qh == kh {
        return Ok((k, v));
    }
    if kh == 0 || !qh.is_multiple_of(kh) {
        return Err(cx.err(format!("{qh} query heads are not a multiple of {kh} key/value heads")));
    }
    let reps = qh / kh;
    let rep = |cx: &mut Cx, x: NodeId| -> R<NodeId> {
        let s = cx.shape(x)?;
        let r = cx.reshape(x, &[s[0], s[1], 1, s[2], s[3]])?;
        let e = cx.expand(r, &[s[0], s[1], reps, s[2], s[3]])?;
        cx.reshape(e, &[s[0], s[1] * reps, s[2], s[3]])
    };
    Ok((rep(cx, k)?, rep(cx, v)?))
}

/// `ai.onnx.preview.FlexAttention`: scaled scores, optional score/prob modifier subgraphs.
pub(super) fn flex_attention(cx: &mut Cx) -> Out {
    cx.arity(3, 3)?;
    let (q, k, v) = (cx.inp(0)?, cx.inp(1)?, cx.inp(2)?);
    let qs = cx.shape(q)?;
    let ks = cx.shape(k)?;
    if qs.len() != 4 || ks.len() != 4 || cx.rank(v) != 4 {
        return Err(cx.err("FlexAttention needs 4-D Q, K, V"));
    }
    let d = cx.dt(q);
    let scale = match cx.af_opt("scale") {
        Some(s) => s as f64,
        None => 1.0 / (qs[3] as f64).sqrt(),
    };
    let (hq, hk) = (qs[1], ks[1]);
    let (kk, vv) = repeat_kv_heads(cx, k, v, hq, hk)?;
    let root = cx.scalar(d, (scale as f32).sqrt() as f64);
    let qsc = cx.bin(B::Mul, q, root)?;
    let kt = cx.permute(kk, &[0, 1, 3, 2])?;
    let ksc = cx.bin(B::Mul, kt, root)?;
    let scores = cx.matmul(qsc, ksc)?;
    let compute = match cx.ai_opt("softmax_precision") {
        Some(_) => cx.dtype_attr("softmax_precision")?,
        None if d == DType::F64 => DType::F64,
        None => DType::F32,
    };
    let mut scores = cx.cast(scores, compute)?;
    if let Some(g) = cx.agraph("score_mod") {
        let o = cx.inline_graph(&g, &[scores])?;
        scores = cx.cast(*o.first().ok_or_else(|| cx.err("score_mod has no output"))?, compute)?;
    }
    let mut probs = cx.add(Op::Softmax { axis: 3 }, vec![scores])?;
    if let Some(g) = cx.agraph("prob_mod") {
        let o = cx.inline_graph(&g, &[probs])?;
        probs = cx.cast(*o.first().ok_or_else(|| cx.err("prob_mod has no output"))?, compute)?;
    }
    let vf = cx.cast(vv, compute)?;
    let out = cx.matmul(probs, vf)?;
    let vd = cx.dt(v);
    Ok(vec![Some(cx.cast(out, vd)?)])
}
