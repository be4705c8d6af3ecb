//! Recurrent ops and control flow, unrolled at import time: RNN, GRU and LSTM over their static
//! sequence length; Scan by inlining its body once per step; If by inlining the branch its
//! (import-time known) condition selects; Loop by inlining its body while the trip count and
//! condition are known.

use crate::import::{Cx, R};
use sinter_core::ir::{BinaryOp as B, UnaryOp as U};
use sinter_core::{DType, NodeId, Op};

type Out = R<Vec<Option<NodeId>>>;

/// Most steps a loop/scan/recurrence is unrolled to.
const MAX_UNROLL: usize = 4096;

/// One activation with its optional alpha/beta.
#[derive(Clone, Debug)]
struct Act {
    name: String,
    alpha: Option<f64>,
    beta: Option<f64>,
}

fn activate(cx: &mut Cx, a: &Act, x: NodeId) -> R<NodeId> {
    let d = cx.dt(x);
    match a.name.to_ascii_lowercase().as_str() {
        "relu" => cx.un(U::Relu, x),
        "tanh" => cx.un(U::Tanh, x),
        "sigmoid" => cx.un(U::Sigmoid, x),
        "affine" => {
            let m = cx.bin_s(B::Mul, x, a.alpha.unwrap_or(1.0))?;
            cx.bin_s(B::Add, m, a.beta.unwrap_or(0.0))
        }
        "leakyrelu" => {
            let ax = cx.bin_s(B::Mul, x, a.alpha.unwrap_or(0.01))?;
            let z = cx.scalar(d, 0.0);
            let c = cx.bin(B::Ge, x, z)?;
            cx.select(c, x, ax)
        }
        "thresholdedrelu" => {
            let t = cx.scalar(d, a.alpha.unwrap_or(1.0));
            let c = cx.bin(B::Gt, x, t)?;
            let z = cx.scalar(d, 0.0);
            cx.select(c, x, z)
        }
        "scaledtanh" => {
            let b = cx.bin_s(B::Mul, x, a.beta.unwrap_or(1.0))?;
            let t = cx.un(U::Tanh, b)?;
            cx.bin_s(B::Mul, t, a.alpha.unwrap_or(1.0))
        }
        "hardsigmoid" => {
            cx.add(Op::HardSigmoid { alpha: a.alpha.unwrap_or(0.2), beta: a.beta.unwrap_or(0.5) }, vec![x])
        }
        "elu" => {
            let e = cx.un(U::Exp, x)?;
            let e1 = cx.bin_s(B::Sub, e, 1.0)?;
            let ae = cx.bin_s(B::Mul, e1, a.alpha.unwrap_or(1.0))?;
            let z = cx.scalar(d, 0.0);
            let c = cx.bin(B::Gt, x, z)?;
            cx.select(c, x, ae)
        }
        "softsign" => {
            let ab = cx.un(U::Abs, x)?;
            let den = cx.bin_s(B::Add, ab, 1.0)?;
            cx.bin(B::Div, x, den)
        }
        "softplus" => {
            let e = cx.un(U::Exp, x)?;
            let e1 = cx.bin_s(B::Add, e, 1.0)?;
            cx.un(U::Log, e1)
        }
        other => Err(cx.unsup(format!("activation {other:?}"))),
    }
}

/// Reads the activations attribute, filling defaults and alphas/betas.
fn activations(cx: &Cx, defaults: &[&str], dirs: usize) -> R<Vec<Act>> {
    let names: Vec<String> = match cx.astrings("activations") {
        Some(a) if !a.is_empty() => a,
        _ => (0..dirs).flat_map(|_| defaults.iter().map(|s| s.to_string())).collect(),
    };
    if names.len() != defaults.len() * dirs {
        return Err(cx.err(format!("expected {} activations, got {}", defaults.len() * dirs, names.len())));
    }
    let alphas = cx.afloats("activation_alpha").unwrap_or_default();
    let betas = cx.afloats("activation_beta").unwrap_or_default();
    let (mut ai, mut bi) = (0, 0);
    let mut out = Vec::new();
    for n in names {
        let l = n.to_ascii_lowercase();
        let (na, nb) = match l.as_str() {
            "affine" | "scaledtanh" | "hardsigmoid" => (true, true),
            "leakyrelu" | "thresholdedrelu" | "elu" => (true, false),
            _ => (false, false),
        };
        let alpha = if na {
            ai += 1;
            alphas.get(ai - 1).map(|&v| v as f64)
        } else {
            None
        };
        let beta = if nb {
            bi += 1;
            betas.get(bi - 1).map(|&v| v as f64)
        } else {
            None
        };
        out.push(Act { name: n, alpha, beta });
    }
    Ok(out)
}

/// Slice `[i]` of axis 0 of a `[n, ...]` tensor, with the axis removed.
fn take0(cx: &mut Cx, x: NodeId, i: usize) -> R<NodeId> {
    let s = cx.shape(x)?;
    let t = cx.slice(x, 0, i as i64, i as i64 + 1, 1)?;
    cx.reshape(t, &s[1..])
}

/// Columns `[g*h, (g+1)*h)` of the last axis.
fn gate(cx: &mut Cx, x: NodeId, g: usize, h: usize) -> R<NodeId> {
    let r = cx.rank(x);
    cx.slice(x, r - 1, (g * h) as i64, ((g + 1) * h) as i64, 1)
}

pub(super) fn recurrent(cx: &mut Cx, op: &str) -> Out {
    cx.arity(3, 8)?;
    let (mut x, w, r) = (cx.inp(0)?, cx.inp(1)?, cx.inp(2)?);
    let (bias, lens, h0) = (cx.opt(3), cx.opt(4), cx.opt(5));
    let (c0, peep) = if op == "LSTM" { (cx.opt(6), cx.opt(7)) } else { (None, None) };
    let layout = cx.ai("layout", 0);
    if layout == 1 {
        x = cx.permute(x, &[1, 0, 2])?;
    }
    if let Some(t) = cx.dims(x).first().filter(|d| d.as_static().is_none()) {
        // The IR has no loops: the recurrence is unrolled, one step per time step.
        return Err(cx.unsup(format!(
            "{op} is unrolled over its sequence axis, whose extent {t} must be static (specialize the model with \
             graph_for or graph_for_inputs)"
        )));
    }
    let xs = cx.shape(x)?;
    if xs.len() != 3 {
        return Err(cx.err(format!("X must be 3-D, got {xs:?}")));
    }
    for (name, v, rank) in
        [("R", Some(r), 3), ("B", bias, 2), ("initial_h", h0, 3), ("initial_c", c0, 3), ("P", peep, 2)]
    {
        if let Some(v) = v
            && cx.rank(v) != rank
        {
            return Err(cx.err(format!("{name} must be {rank}-D")));
        }
    }
    let (seq, batch, _inp) = (xs[0], xs[1], xs[2]);
    if seq > MAX_UNROLL {
        return Err(cx.unsup(format!("sequence length {seq} exceeds the unroll limit {MAX_UNROLL}")));
    }
    let dir = cx.as_str("direction", "forward");
    let dirs = if dir == "bidirectional" { 2 } else { 1 };
    let ws = cx.shape(w)?;
    if ws.len() != 3 {
        return Err(cx.err(format!("W must be 3-D, got {ws:?}")));
    }
    let g = match op {
        "RNN" => 1,
        "GRU" => 3,
        _ => 4,
    };
    let h = match cx.ai_opt("hidden_size") {
        Some(v) if v > 0 && v <= 1 << 24 => v as usize,
        Some(v) if v > 0 => return Err(cx.err(format!("hidden_size {v} is too large"))),
        _ => ws[1] / g,
    };
    if ws.len() != 3 || ws[0] != dirs || ws[1] != g * h {
        return Err(cx.err(format!("W {ws:?} does not fit {dirs} direction(s) of {g} gates x {h}")));
    }
    let defaults: &[&str] = match op {
        "RNN" => &["Tanh"],
        "GRU" => &["Sigmoid", "Tanh"],
        _ => &["Sigmoid", "Tanh", "Tanh"],
    };
    let acts = activations(cx, defaults, dirs)?;
    let clip = cx.af_opt("clip").map(|c| c as f64);
    let lbr = cx.ai("linear_before_reset", 0) != 0;
    if op == "LSTM" && cx.ai("input_forget", 0) != 0 {
        return Err(cx.unsup("input_forget=1"));
    }
    let d = cx.dt(x);
    // Sequence-length mask per step (None when every sequence is full length).
    let lens_i = match lens {
        Some(l) => {
            let known = cx.known(l).map(|t| t.to_i64_vec());
            match known {
                Some(v) if v.iter().all(|&n| n as usize == seq) => None,
                _ => {
                    let li = cx.cast(l, DType::I64)?;
                    Some(cx.reshape(li, &[batch, 1])?)
                }
            }
        }
        None => None,
    };
    let mut ys = Vec::new();
    let mut yhs = Vec::new();
    let mut ycs = Vec::new();
    for di in 0..dirs {
        let reverse = dir == "reverse" || di == 1;
        if reverse && lens_i.is_some() {
            return Err(cx.unsup("reverse direction with sequence_lens"));
        }
        let wd = take0(cx, w, di)?; // [g*h, in]
        let rd = take0(cx, r, di)?; // [g*h, h]
        let wt = cx.permute(wd, &[1, 0])?;
        let rt = cx.permute(rd, &[1, 0])?;
        let xw = cx.matmul(x, wt)?; // [seq, batch, g*h]
        let (wb, rb) = match bias {
            Some(b) => {
                let bd = take0(cx, b, di)?; // [2*g*h]
                let wb = cx.slice(bd, 0, 0, (g * h) as i64, 1)?;
                let rb = cx.slice(bd, 0, (g * h) as i64, (2 * g * h) as i64, 1)?;
                (Some(wb), Some(rb))
            }
            None => (None, None),
        };
        let xw = match wb {
            Some(b) => cx.bin(B::Add, xw, b)?,
            None => xw,
        };
        let mut hs = match h0 {
            Some(h0) => take0(cx, h0, di)?,
            None => cx.zeros(d, &[batch, h])?,
        };
        let mut cs = match c0 {
            Some(c0) => take0(cx, c0, di)?,
            None => cx.zeros(d, &[batch, h])?,
        };
        let pd = match peep {
            Some(p) => Some(take0(cx, p, di)?),
            None => None,
        };
        let a = &acts[di * defaults.len()..(di + 1) * defaults.len()];
        let clipf = |cx: &mut Cx, v: NodeId| -> R<NodeId> {
            match clip {
                Some(c) => {
                    let lo = cx.bin_s(B::Max, v, -c)?;
                    cx.bin_s(B::Min, lo, c)
                }
                None => Ok(v),
            }
        };
        let mut steps: Vec<NodeId> = vec![hs; seq];
        for step in 0..seq {
            let t = if reverse { seq - 1 - step } else { step };
            let xt = take0(cx, xw, t)?; // [batch, g*h]
            let (hn, cn) = match op {
                "RNN" => {
                    let hr = cx.matmul(hs, rt)?;
                    let mut s = cx.bin(B::Add, xt, hr)?;
                    if let Some(rb) = rb {
                        s = cx.bin(B::Add, s, rb)?;
                    }
                    let s = clipf(cx, s)?;
                    (activate(cx, &a[0], s)?, cs)
                }
                "GRU" => {
                    let rz = gate(cx, rt, 0, h)?;
                    let rr = gate(cx, rt, 1, h)?;
                    let rh = gate(cx, rt, 2, h)?;
                    let rbg = |cx: &mut Cx, k: usize| -> R<Option<NodeId>> {
                        match rb {
                            Some(rb) => Ok(Some(gate(cx, rb, k, h)?)),
                            None => Ok(None),
                        }
                    };
                    let mut zs = gate(cx, xt, 0, h)?;
                    let hz = cx.matmul(hs, rz)?;
                    zs = cx.bin(B::Add, zs, hz)?;
                    if let Some(b) = rbg(cx, 0)? {
                        zs = cx.bin(B::Add, zs, b)?;
                    }
                    let zs = clipf(cx, zs)?;
                    let z = activate(cx, &a[0], zs)?;
                    let mut rs = gate(cx, xt, 1, h)?;
                    let hr = cx.matmul(hs, rr)?;
                    rs = cx.bin(B::Add, rs, hr)?;
                    if let Some(b) = rbg(cx, 1)? {
                        rs = cx.bin(B::Add, rs, b)?;
                    }
                    let rs = clipf(cx, rs)?;
                    let rg = activate(cx, &a[0], rs)?;
                    let xh = gate(cx, xt, 2, h)?;
                    let hh = if lbr {
                        let mut m = cx.matmul(hs, rh)?;
                        if let Some(b) = rbg(cx, 2)? {
                            m = cx.bin(B::Add, m, b)?;
                        }
                        let m = cx.bin(B::Mul, rg, m)?;
                        cx.bin(B::Add, xh, m)?
                    } else {
                        let rh_ = cx.bin(B::Mul, rg, hs)?;
                        let mut m = cx.matmul(rh_, rh)?;
                        if let Some(b) = rbg(cx, 2)? {
                            m = cx.bin(B::Add, m, b)?;
                        }
                        cx.bin(B::Add, xh, m)?
                    };
                    let hh = clipf(cx, hh)?;
                    let ht = activate(cx, &a[1], hh)?;
                    // H = (1 - z) * ht + z * H
                    let one_m = cx.s_bin(B::Sub, 1.0, z)?;
                    let p1 = cx.bin(B::Mul, one_m, ht)?;
                    let p2 = cx.bin(B::Mul, z, hs)?;
                    (cx.bin(B::Add, p1, p2)?, cs)
                }
                _ => {
                    let hr = cx.matmul(hs, rt)?;
                    let mut s = cx.bin(B::Add, xt, hr)?;
                    if let Some(rb) = rb {
                        s = cx.bin(B::Add, s, rb)?;
                    }
                    let mut gi = gate(cx, s, 0, h)?;
                    let mut go = gate(cx, s, 1, h)?;
                    let mut gf = gate(cx, s, 2, h)?;
                    let gc = gate(cx, s, 3, h)?;
                    if let Some(p) = pd {
                        let pi = cx.slice(p, 0, 0, h as i64, 1)?;
                        let pf = cx.slice(p, 0, 2 * h as i64, 3 * h as i64, 1)?;
                        let a1 = cx.bin(B::Mul, pi, cs)?;
                        gi = cx.bin(B::Add, gi, a1)?;
                        let a2 = cx.bin(B::Mul, pf, cs)?;
                        gf = cx.bin(B::Add, gf, a2)?;
                    }
                    let gi = clipf(cx, gi)?;
                    let gf = clipf(cx, gf)?;
                    let gc = clipf(cx, gc)?;
                    let i = activate(cx, &a[0], gi)?;
                    let f = activate(cx, &a[0], gf)?;
                    let c = activate(cx, &a[1], gc)?;
                    let fc = cx.bin(B::Mul, f, cs)?;
                    let ic = cx.bin(B::Mul, i, c)?;
                    let cn = cx.bin(B::Add, fc, ic)?;
                    if let Some(p) = pd {
                        let po = cx.slice(p, 0, h as i64, 2 * h as i64, 1)?;
                        let a3 = cx.bin(B::Mul, po, cn)?;
                        go = cx.bin(B::Add, go, a3)?;
                    }
                    let go = clipf(cx, go)?;
                    let o = activate(cx, &a[0], go)?;
                    let hc = activate(cx, &a[2], cn)?;
                    (cx.bin(B::Mul, o, hc)?, cn)
                }
            };
            let (hn, cn, yt) = match lens_i {
                Some(l) => {
                    let tt = cx.scalar(DType::I64, t as f64);
                    let live = cx.bin(B::Gt, l, tt)?; // [batch, 1]
                    let hn2 = cx.select(live, hn, hs)?;
                    let cn2 = cx.select(live, cn, cs)?;
                    let z = cx.scalar(d, 0.0);
                    let yt = cx.select(live, hn, z)?;
                    (hn2, cn2, yt)
                }
                None => (hn, cn, hn),
            };
            hs = hn;
            cs = cn;
            steps[t] = yt;
        }
        let parts: Vec<NodeId> = steps.iter().map(|&s| cx.reshape(s, &[1, 1, batch, h])).collect::<R<_>>()?;
        ys.push(cx.concat(parts, 0)?);
        yhs.push(cx.reshape(hs, &[1, batch, h])?);
        ycs.push(cx.reshape(cs, &[1, batch, h])?);
    }
    let mut y = cx.concat(ys, 1)?;
    let mut yh = cx.concat(yhs, 0)?;
    let mut yc = cx.concat(ycs, 0)?;
    if layout == 1 {
        y = cx.permute(y, &[2, 0, 1, 3])?;
        yh = cx.permute(yh, &[1, 0, 2])?;
        yc = cx.permute(yc, &[1, 0, 2])?;
    }
    let mut outs = vec![Some(y), Some(yh)];
    if op == "LSTM" {
        outs.push(Some(yc));
    }
    Ok(outs)
}

pub(super) fn scan(cx: &mut Cx) -> Out {
    if cx.opset < 9 {
        return scan8(cx);
    }
    let body = cx.agraph("body").ok_or_else(|| cx.err("body is required"))?;
    let m = cx.ai("num_scan_inputs", 0);
    let total = cx.ins.len();
    if m <= 0 || m as usize > total {
        return Err(cx.err(format!("num_scan_inputs {m} does not fit {total} inputs")));
    }
    let m = m as usize;
    let n = total - m;
    let states: Vec<NodeId> = (0..n).map(|i| cx.inp(i)).collect::<R<_>>()?;
    let scans: Vec<NodeId> = (n..total).map(|i| cx.inp(i)).collect::<R<_>>()?;
    let in_axes = cx.aints("scan_input_axes").unwrap_or_else(|| vec![0; m]);
    let in_dirs = cx.aints("scan_input_directions").unwrap_or_else(|| vec![0; m]);
    if body.input.len() != n + m || body.output.len() < n {
        return Err(cx.err("the body's inputs/outputs do not match the states and scan inputs"));
    }
    let k = body.output.len() - n;
    let out_axes = cx.aints("scan_output_axes").unwrap_or_else(|| vec![0; k]);
    let out_dirs = cx.aints("scan_output_directions").unwrap_or_else(|| vec![0; k]);
    if in_axes.len() != m || in_dirs.len() != m || out_axes.len() != k || out_dirs.len() != k {
        return Err(cx.err("scan axis/direction lists do not match the inputs/outputs"));
    }
    let mut axes = Vec::new();
    let mut len = None;
    for (j, &s) in scans.iter().enumerate() {
        let sh = cx.shape(s)?;
        let a = cx.axis(in_axes[j], sh.len())?;
        axes.push(a);
        match len {
            None => len = Some(sh[a]),
            Some(l) if l != sh[a] => return Err(cx.err("scan inputs differ in length")),
            _ => {}
        }
    }
    let len = len.unwrap_or(0);
    if len > MAX_UNROLL {
        return Err(cx.unsup(format!("scan length {len} exceeds the unroll limit {MAX_UNROLL}")));
    }
    let mut st = states;
    let mut outs: Vec<Vec<NodeId>> = vec![Vec::new(); k];
    for t in 0..len {
        let mut args = st.clone();
        for (j, &s) in scans.iter().enumerate() {
            let idx = if in_dirs[j] != 0 { len - 1 - t } else { t };
            let sh = cx.shape(s)?;
            let sl = cx.slice(s, axes[j], idx as i64, idx as i64 + 1, 1)?;
            let mut rs = sh.clone();
            rs.remove(axes[j]);
            args.push(cx.reshape(sl, &rs)?);
        }
        let res = cx.inline_graph(&body, &args)?;
        st = res[..n].to_vec();
        for (q, &o) in res[n..].iter().enumerate() {
            outs[q].push(o);
        }
    }
    let mut result: Vec<Option<NodeId>> = st.into_iter().map(Some).collect();
    for (q, mut parts) in outs.into_iter().enumerate() {
        if out_dirs[q] != 0 {
            parts.reverse();
        }
        if parts.is_empty() {
            return Err(cx.unsup("a scan of length 0"));
        }
        let es = cx.shape(parts[0])?;
        let a = cx.axis(out_axes[q], es.len() + 1)?;
        let mut us = es.clone();
        us.insert(a, 1);
        let ps: Vec<NodeId> = parts.iter().map(|&p| cx.reshape(p, &us)).collect::<R<_>>()?;
        result.push(Some(cx.concat(ps, a)?));
    }
    Ok(result)
}

pub(super) fn if_op(cx: &mut Cx) -> Out {
    cx.arity(1, 1)?;
    let c = cx.inp(0)?;
    let v = cx.val(c)?;
    if v.numel() != 1 {
        return Err(cx.err("the condition must hold one element"));
    }
    let take = v.to_f64_vec()[0] != 0.0;
    let name = if take { "then_branch" } else { "else_branch" };
    let g = cx.agraph(name).ok_or_else(|| cx.err(format!("{name} is required")))?;
    let outs = cx.inline_graph(&g, &[])?;
    Ok(outs.into_iter().map(Some).collect())
}

pub(super) fn loop_op(cx: &mut Cx) -> Out {
    let body = cx.agraph("body").ok_or_else(|| cx.err("body is required"))?;
    let trip = match cx.opt(0) {
        Some(m) => Some(cx.ints(m)?.first().copied().unwrap_or(0)),
        None => None,
    };
    let mut cond = match cx.opt(1) {
        Some(c) => cx.ints(c)?.first().copied().unwrap_or(0) != 0,
        None => true,
    };
    let mut vals: Vec<NodeId> = (2..cx.ins.len()).map(|i| cx.inp(i)).collect::<R<_>>()?;
    let n = vals.len();
    if body.input.len() != n + 2 || body.output.len() < n + 1 {
        return Err(cx.err("the body's inputs/outputs do not match the loop-carried values"));
    }
    let k = body.output.len() - 1 - n;
    let limit = match trip {
        Some(t) if t < 0 => 0,
        Some(t) if t as usize > MAX_UNROLL => {
            return Err(cx.unsup(format!("trip count {t} exceeds the unroll limit {MAX_UNROLL}")));
        }
        Some(t) => t as usize,
        None => MAX_UNROLL,
    };
    // Refuse up front what unrolling could not finish: at least one IR node per body node per
    // iteration (nested loops are caught by the graph-size cap as they unroll).
    let room = crate::import::MAX_GRAPH_NODES.saturating_sub(cx.imp.g.nodes.len());
    if trip.is_some() && limit.saturating_mul(body.node.len()) > room {
        return Err(cx.unsup(format!(
            "unrolling {limit} iterations of a {}-node body would exceed the graph-size cap of {} IR nodes",
            body.node.len(),
            crate::import::MAX_GRAPH_NODES
        )));
    }
    let mut scans: Vec<Vec<NodeId>> = vec![Vec::new(); k];
    let mut i = 0usize;
    while cond && i < limit {
        let it = cx.konst(sinter_core::HostTensor::from_i64(DType::I64, vec![], &[i as i64]));
        let c = cx.konst(sinter_core::HostTensor::from_i64(DType::Bool, vec![], &[1]));
        let mut args = vec![it, c];
        args.extend(&vals);
        let outs = cx.inline_graph(&body, &args)?;
        cond = match cx.known(outs[0]) {
            Some(v) => v.to_f64_vec().first().copied().unwrap_or(0.0) != 0.0,
            None => return Err(cx.unsup("a loop condition that depends on run-time data")),
        };
        vals = outs[1..1 + n].to_vec();
        for (q, &o) in outs[1 + n..].iter().enumerate() {
            scans[q].push(o);
        }
        i += 1;
    }
    if trip.is_none() && cond {
        return Err(cx.unsup(format!("a loop without a trip count still running after {MAX_UNROLL} iterations")));
    }
    let mut result: Vec<Option<NodeId>> = vals.into_iter().map(Some).collect();
    for parts in scans {
        if parts.is_empty() {
            return Err(cx.unsup("scan outputs of a loop that ran zero iterations"));
        }
        let es = cx.shape(parts[0])?;
        let mut us = vec![1];
        us.extend_from_slice(&es);
        let ps: Vec<NodeId> = parts.iter().map(|&p| cx.reshape(p, &us)).collect::<R<_>>()?;
        result.push(Some(cx.concat(ps, 0)?));
    }
    Ok(result)
}

/// Scan-8: a batch axis in front of every state and scan input (scan axis 1), and an optional
/// `sequence_lens` first input (only full lengths are supported). Unrolled per batch entry.
fn scan8(cx: &mut Cx) -> Out {
    let body = cx.agraph("body").ok_or_else(|| cx.err("body is required"))?;
    let m = cx.ai("num_scan_inputs", 0);
    let total = cx.ins.len().saturating_sub(1);
    if m <= 0 || m as usize > total {
        return Err(cx.err(format!("num_scan_inputs {m} does not fit {total} inputs")));
    }
    let m = m as usize;
    let n = total - m;
    let states: Vec<NodeId> = (1..=n).map(|i| cx.inp(i)).collect::<R<_>>()?;
    let scans: Vec<NodeId> = (n + 1..=total).map(|i| cx.inp(i)).collect::<R<_>>()?;
    let dirs = cx.aints("directions").unwrap_or_else(|| vec![0; m]);
    let first = *scans.first().ok_or_else(|| cx.err("no scan input"))?;
    let fs = cx.shape(first)?;
    for &s in &scans {
        let ss = cx.shape(s)?;
        if ss.len() < 2 || ss[..2] != fs[..2.min(fs.len())] {
            return Err(cx.err("scan inputs need one [batch, sequence, ...] shape prefix"));
        }
    }
    for &s in &states {
        if cx.rank(s) == 0 || fs.is_empty() || cx.shape(s)?[0] != fs[0] {
            return Err(cx.err("states need the batch axis"));
        }
    }
    if fs.len() < 2 {
        return Err(cx.err("scan inputs need [batch, sequence, ...]"));
    }
    let (batch, len) = (fs[0], fs[1]);
    if len > MAX_UNROLL || batch > MAX_UNROLL {
        return Err(cx.unsup("scan too long to unroll"));
    }
    if let Some(l) = cx.opt(0) {
        let v = cx.ints(l)?;
        if v.iter().any(|&x| x as usize != len) {
            return Err(cx.unsup("Scan-8 with sequence_lens shorter than the sequence"));
        }
    }
    if body.input.len() != n + m || body.output.len() < n {
        return Err(cx.err("the body's inputs/outputs do not match the states and scan inputs"));
    }
    let k = body.output.len() - n;
    let mut per_state: Vec<Vec<NodeId>> = vec![Vec::new(); n];
    let mut per_out: Vec<Vec<NodeId>> = vec![Vec::new(); k];
    for b in 0..batch {
        let mut st: Vec<NodeId> = Vec::new();
        for &s in &states {
            let sh = cx.shape(s)?;
            let sl = cx.slice(s, 0, b as i64, b as i64 + 1, 1)?;
            st.push(cx.reshape(sl, &sh[1..])?);
        }
        let mut outs: Vec<Vec<NodeId>> = vec![Vec::new(); k];
        for t in 0..len {
            let mut args = st.clone();
            for (j, &s) in scans.iter().enumerate() {
                let idx = if dirs.get(j).copied().unwrap_or(0) != 0 { len - 1 - t } else { t };
                let sh = cx.shape(s)?;
                let a = cx.slice(s, 0, b as i64, b as i64 + 1, 1)?;
                let a = cx.slice(a, 1, idx as i64, idx as i64 + 1, 1)?;
                args.push(cx.reshape(a, &sh[2..])?);
            }
            let res = cx.inline_graph(&body, &args)?;
            st = res[..n].to_vec();
            for (q, &o) in res[n..].iter().enumerate() {
                outs[q].push(o);
            }
        }
        for (q, &s) in st.iter().enumerate() {
            let sh = cx.shape(s)?;
            let mut us = vec![1];
            us.extend_from_slice(&sh);
            per_state[q].push(cx.reshape(s, &us)?);
        }
        for (q, parts) in outs.into_iter().enumerate() {
            let mut ps = Vec::new();
            for p in parts {
                let sh = cx.shape(p)?;
                let mut us = vec![1, 1];
                us.extend_from_slice(&sh);
                ps.push(cx.reshape(p, &us)?);
            }
            if ps.is_empty() {
                return Err(cx.unsup("a scan of length 0"));
            }
            per_out[q].push(cx.concat(ps, 1)?);
        }
    }
    let mut result = Vec::new();
    for parts in per_state.into_iter().chain(per_out) {
        if parts.is_empty() {
            return Err(cx.unsup("a scan over an empty batch"));
        }
        result.push(Some(cx.concat(parts, 0)?));
    }
    Ok(result)
}
