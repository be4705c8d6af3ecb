//! Indexing ops: Gather, GatherElements, GatherND, and the scatters (ScatterElements, Scatter,
//! ScatterND), which the IR lacks. Constant indices become gathers by constant inverse maps
//! ([`scatter_rows`]); run-time indices one-hot masks (`index == position`): without a reduction
//! the last update of each position is found by a max over the masks and gathered (positions ×
//! updates); with one, the updates are combined by a reduction over the masks (positions ×
//! updates × row for ScatterND, refused by the memory budget when too large). A final `where`
//! keeps the data where no update lands.

use crate::import::{Cx, R};
use sinter_core::ir::{BinaryOp as B, PadMode, ReduceOp};
use sinter_core::{DType, HostTensor, NodeId, Op};

type Out = R<Vec<Option<NodeId>>>;

pub(super) fn lower(cx: &mut Cx, op: &str) -> Option<Out> {
    let r = match op {
        "Gather" => one(cx, |cx| {
            cx.arity(2, 2)?;
            let (x, i) = (cx.inp(0)?, cx.inp(1)?);
            let axis = cx.axis(cx.ai("axis", 0), cx.rank(x))?;
            match cx.dims(x)[axis].as_static() {
                Some(n) => check_known(cx, i, &[n], "gather")?,
                // A symbolic gathered axis: known non-negative indices are taken as in range
                // (negative ones would need the extent).
                None => match cx.known(i) {
                    Some(v) if v.dtype().is_int() && v.to_i64_vec().iter().all(|&k| k >= 0) => {}
                    _ => {
                        return Err(cx.unsup(format!(
                            "gathering along symbolic extent {} needs known non-negative indices (specialize the \
                             model with graph_for or graph_for_inputs)",
                            cx.dims(x)[axis]
                        )));
                    }
                },
            }
            cx.add(Op::Gather { axis }, vec![x, i])
        }),
        "GatherElements" => one(cx, |cx| {
            cx.arity(2, 2)?;
            let (x, i) = (cx.inp(0)?, cx.inp(1)?);
            let axis = cx.axis(cx.ai("axis", 0), cx.rank(x))?;
            let n = cx.shape(x)?[axis];
            check_known(cx, i, &[n], "gather")?;
            let i = wrap_negative(cx, i, n)?;
            cx.add(Op::GatherElements { axis }, vec![x, i])
        }),
        "GatherND" => one(cx, gather_nd),
        "ScatterElements" | "Scatter" => one(cx, scatter_elements),
        "ScatterND" => one(cx, scatter_nd),
        _ => return None,
    };
    Some(r)
}

fn one(cx: &mut Cx, f: impl FnOnce(&mut Cx) -> R<NodeId>) -> Out {
    f(cx).map(|x| vec![Some(x)])
}

/// Indices as i64 with negative values wrapped by `n` (once) and the result clamped into `0..n`:
/// the out-of-range rule of every backend's gathers (`Op::Gather`, `Op::GatherElements`), so the
/// scatters and GatherND built from one-hot masks and linear indices follow it too. Indices
/// known at import time are checked first ([`check_known`]): out of range there is an error.
pub(super) fn wrap_negative(cx: &mut Cx, i: NodeId, n: usize) -> R<NodeId> {
    if !cx.dt(i).is_int() {
        return Err(cx.err(format!("indices must be integers, got {}", cx.dt(i))));
    }
    let unsigned64 = cx.dt(i) == DType::U64;
    let i = cx.cast(i, DType::I64)?;
    let z = cx.scalar(DType::I64, 0.0);
    let neg = cx.bin(B::Lt, i, z)?;
    let last = n.max(1) as f64 - 1.0;
    let w = if unsigned64 {
        // A u64 above i64::MAX reads as negative after the cast: it is huge, so it clamps high.
        let hi = cx.scalar(DType::I64, last);
        cx.select(neg, hi, i)?
    } else {
        let w = cx.bin_s(B::Add, i, n as f64)?;
        cx.select(neg, w, i)?
    };
    let w = cx.bin_s(B::Max, w, 0.0)?;
    cx.bin_s(B::Min, w, last)
}

/// Errs when the indices `i` are known at import time and some index, after one negative wrap,
/// falls outside `0..extents[k]` (`extents` has one entry, or one per component of the last axis
/// for GatherND/ScatterND). A graph with such constant indices is invalid; run-time indices clamp.
fn check_known(cx: &Cx, i: NodeId, extents: &[usize], what: &str) -> R<()> {
    let Some(v) = cx.known(i) else { return Ok(()) };
    if !v.dtype().is_int() {
        return Ok(());
    }
    let unsigned64 = v.dtype() == DType::U64;
    for (pos, &x) in v.to_i64_vec().iter().enumerate() {
        let n = extents[pos % extents.len()];
        let j = if x < 0 && !unsigned64 { x + n as i64 } else { x };
        if (unsigned64 && x < 0) || j < 0 || j >= n as i64 {
            let shown = if unsigned64 { (x as u64).to_string() } else { x.to_string() };
            return Err(cx.err(format!(
                "{what} index {shown} (element {pos}) is out of range for an extent of {n} (valid: {} to {})",
                -(n as i64),
                n as i64 - 1
            )));
        }
    }
    Ok(())
}

/// Row-major linear index over `dims` from the last axis of `idx` (`[..., k]`, k = dims.len()).
fn linear_index(cx: &mut Cx, idx: NodeId, dims: &[usize]) -> R<NodeId> {
    let s = cx.shape(idx)?;
    let k = dims.len();
    let lead = &s[..s.len() - 1];
    let mut acc: Option<NodeId> = None;
    let mut stride = 1usize;
    for j in (0..k).rev() {
        let c = cx.slice(idx, s.len() - 1, j as i64, j as i64 + 1, 1)?;
        let c = cx.reshape(c, lead)?;
        let c = wrap_negative(cx, c, dims[j])?;
        let t = cx.bin_s(B::Mul, c, stride as f64)?;
        acc = Some(match acc {
            None => t,
            Some(a) => cx.bin(B::Add, a, t)?,
        });
        stride *= dims[j];
    }
    match acc {
        Some(a) => Ok(a),
        None => cx.zeros(DType::I64, lead),
    }
}

fn gather_nd(cx: &mut Cx) -> R<NodeId> {
    cx.arity(2, 2)?;
    let (x, idx) = (cx.inp(0)?, cx.inp(1)?);
    let xs = cx.shape(x)?;
    let is = cx.shape(idx)?;
    let b = cx.ai("batch_dims", 0);
    if b < 0 || is.is_empty() {
        return Err(cx.err("bad batch_dims or rank-0 indices"));
    }
    let b = b as usize;
    let k = *is.last().expect("rank >= 1");
    if b + k > xs.len() || b >= is.len() || xs[..b] != is[..b] {
        return Err(cx.err(format!("indices {is:?} do not fit data {xs:?} with batch_dims {b}")));
    }
    if k > 0 {
        check_known(cx, idx, &xs[b..b + k], "gather")?;
    }
    let lin = linear_index(cx, idx, &xs[b..b + k])?; // shape is[..-1]
    let inner: usize = xs[b..b + k].iter().product();
    let batch: usize = xs[..b].iter().product();
    let rest = &xs[b + k..];
    // Add the batch offset (batch linear index * inner).
    let lin = if b > 0 {
        let mut bs = xs[..b].to_vec();
        bs.extend(std::iter::repeat_n(1, is.len() - 1 - b));
        cx.guard(batch)?;
        let v: Vec<i64> = (0..batch as i64).map(|q| q * inner as i64).collect();
        let off = cx.konst(HostTensor::from_i64(DType::I64, bs, &v));
        cx.bin(B::Add, lin, off)?
    } else {
        lin
    };
    let mut flat = vec![batch * inner];
    flat.extend_from_slice(rest);
    let xf = cx.reshape(x, &flat)?;
    cx.add(Op::Gather { axis: 0 }, vec![xf, lin])
}

/// The identity of a combining reduction, as a value of `d`.
fn fill_for(d: DType, red: &str) -> f64 {
    let (lo, hi) = if d.is_float() {
        (f64::NEG_INFINITY, f64::INFINITY)
    } else if d.is_signed_int() {
        let bits = d.size_bytes() * 8;
        (-(2f64.powi(bits as i32 - 1)), 2f64.powi(bits as i32 - 1) - 1.0)
    } else if d == DType::Bool {
        (0.0, 1.0)
    } else {
        (0.0, 2f64.powi(d.size_bytes() as i32 * 8) - 1.0)
    };
    match red {
        "mul" => 1.0,
        "max" => lo,
        "min" => hi,
        _ => 0.0,
    }
}

/// Combines `data` with the per-position combination of updates where `hit`.
fn apply_reduction(cx: &mut Cx, red: &str, data: NodeId, comb: NodeId, hit: NodeId) -> R<NodeId> {
    let v = match red {
        "none" => comb,
        "add" => cx.bin(B::Add, data, comb)?,
        "mul" => cx.bin(B::Mul, data, comb)?,
        "max" => cx.bin(B::Max, data, comb)?,
        "min" => cx.bin(B::Min, data, comb)?,
        r => return Err(cx.err(format!("unknown reduction {r:?}"))),
    };
    cx.select(hit, v, data)
}

fn combine(cx: &mut Cx, red: &str, eq: NodeId, upd: NodeId, axis: usize) -> R<NodeId> {
    let d = cx.dt(upd);
    let fill = cx.scalar(d, fill_for(d, red));
    let w = cx.select(eq, upd, fill)?;
    let op = match red {
        "mul" => ReduceOp::Prod,
        "max" => ReduceOp::Max,
        "min" => ReduceOp::Min,
        _ => ReduceOp::Sum,
    };
    cx.reduce(op, w, &[axis], false)
}

fn scatter_elements(cx: &mut Cx) -> R<NodeId> {
    cx.arity(3, 3)?;
    let (x, idx, upd) = (cx.inp(0)?, cx.inp(1)?, cx.inp(2)?);
    let xs = cx.shape(x)?;
    let is = cx.shape(idx)?;
    let r = xs.len();
    let a = cx.axis(cx.ai("axis", 0), r)?;
    if is.len() != r || cx.shape(upd)? != is || is.iter().zip(&xs).any(|(i, d)| i > d) {
        return Err(cx.err(format!("indices {is:?} / updates must match in shape and fit data {xs:?}")));
    }
    let red = cx.as_str("reduction", "none");
    let n = xs[a];
    check_known(cx, idx, &[n], "scatter")?;
    if let Some(v) = constant_indices(cx, idx) {
        // Flat target of every update: its own coordinates with axis `a` replaced by the index.
        let dst = sinter_core::shape::contiguous_strides(&xs);
        let src = sinter_core::shape::contiguous_strides(&is);
        let targets: Vec<usize> = v
            .iter()
            .enumerate()
            .map(|(e, &iv)| {
                let j = if iv < 0 { iv + n as i64 } else { iv } as usize;
                (0..r).map(|d| if d == a { j } else { (e / src[d]) % is[d] } * dst[d]).sum()
            })
            .collect();
        let total: usize = xs.iter().product();
        let u: usize = is.iter().product();
        let xf = cx.reshape(x, &[total, 1])?;
        let uf = cx.reshape(upd, &[u, 1])?;
        if let Some(y) = scatter_rows(cx, &red, xf, uf, &targets, total)? {
            return cx.reshape(y, &xs);
        }
    }
    let u_elems: usize = is.iter().product();
    if u_elems == 0 {
        return Ok(x);
    }
    one_hot_budget(cx, &red, sinter_core::budget::elems(&[u_elems, n]), cx.dt(upd).size_bytes().max(8))?;
    let i = wrap_negative(cx, idx, n)?;
    let mut es = is.clone();
    es.push(1);
    let i = cx.reshape(i, &es)?;
    let t = cx.iota(n, DType::I64)?;
    let eq = cx.bin(B::Eq, i, t)?; // I ++ [n]
    // Move the position axis t into place of axis a, and the update axis a to the end.
    let mut perm: Vec<usize> = (0..r).collect();
    perm[a] = r;
    perm.push(a);
    let eq = cx.permute(eq, &perm)?;
    let (hit, comb) = if red == "none" {
        // The last update of each position (in update order, as with constant indices), then
        // one gather along axis `a`.
        let (hit, src) = last_hit(cx, eq, r)?; // is with axis a -> n
        let picked = cx.add(Op::GatherElements { axis: a }, vec![upd, src])?;
        (hit, picked)
    } else {
        let mut full = is.clone();
        full.push(n);
        let u = cx.reshape(upd, &es)?;
        let u = cx.expand(u, &full)?;
        let u = cx.permute(u, &perm)?;
        let hit = cx.reduce(ReduceOp::Max, eq, &[r], false)?;
        (hit, combine(cx, &red, eq, u, r)?)
    };
    // Pad the non-axis extents from the indices' to the data's.
    let pads: Vec<(i64, i64)> = (0..r).map(|k| (0, if k == a { 0 } else { (xs[k] - is[k]) as i64 })).collect();
    let (hit, comb) = if pads.iter().any(|p| p.1 != 0) {
        let h = cx.add(Op::Pad { pads: pads.clone(), mode: PadMode::Constant(0.0) }, vec![hit])?;
        let c = cx.add(Op::Pad { pads, mode: PadMode::Constant(0.0) }, vec![comb])?;
        (h, c)
    } else {
        (hit, comb)
    };
    apply_reduction(cx, &red, x, comb, hit)
}

/// For a one-hot mask `eq` whose axis `axis` runs over updates in order: whether each position
/// is hit, and the number of the last update that hits it (0 where none does), both with `axis`
/// removed. The last update is the largest 1-based update number among the hits: a max
/// reduction, so duplicate targets resolve as a sequential scatter does (the last one wins).
pub(super) fn last_hit(cx: &mut Cx, eq: NodeId, axis: usize) -> R<(NodeId, NodeId)> {
    let s = cx.shape(eq)?;
    let mut os = vec![1; s.len()];
    os[axis] = s[axis];
    let order = cx.iota(s[axis], DType::I64)?;
    let order = cx.bin_s(B::Add, order, 1.0)?;
    let order = cx.reshape(order, &os)?;
    let zero = cx.scalar(DType::I64, 0.0);
    let w = cx.select(eq, order, zero)?;
    let last = cx.reduce(ReduceOp::Max, w, &[axis], false)?;
    let hit = cx.bin_s(B::Gt, last, 0.0)?;
    let src = cx.bin_s(B::Sub, last, 1.0)?;
    let src = cx.bin_s(B::Max, src, 0.0)?;
    Ok((hit, src))
}

/// Refuses, before building it, a one-hot lowering of a scatter with run-time indices whose
/// masks (`elems` elements of `bytes` each) exceed the host-memory budget, saying why it is that
/// large: positions × updates (× row for ScatterND with a reduction).
fn one_hot_budget(cx: &Cx, red: &str, elems: u64, bytes: usize) -> R<()> {
    let what = || {
        format!(
            "{} ({}) with run-time indices and reduction {red:?}: its one-hot masks of {elems} elements (target \
             positions x updates{})",
            cx.desc,
            cx.op,
            if cx.op == "ScatterND" && red != "none" { " x row" } else { "" }
        )
    };
    sinter_core::budget::check(sinter_core::budget::bytes_of(elems, bytes as u64), what)?;
    Ok(())
}

fn scatter_nd(cx: &mut Cx) -> R<NodeId> {
    cx.arity(3, 3)?;
    let (x, idx, upd) = (cx.inp(0)?, cx.inp(1)?, cx.inp(2)?);
    let xs = cx.shape(x)?;
    let is = cx.shape(idx)?;
    if is.is_empty() {
        return Err(cx.err("indices must have rank >= 1"));
    }
    let k = *is.last().expect("rank >= 1");
    if k > xs.len() {
        return Err(cx.err(format!("index depth {k} exceeds data rank {}", xs.len())));
    }
    let red = cx.as_str("reduction", "none");
    let m: usize = xs[..k].iter().product();
    let rest: usize = xs[k..].iter().product();
    let u: usize = is[..is.len() - 1].iter().product();
    let mut us = is[..is.len() - 1].to_vec();
    us.extend_from_slice(&xs[k..]);
    if cx.shape(upd)? != us {
        return Err(cx.err(format!("updates must have shape {us:?}")));
    }
    if k > 0 {
        check_known(cx, idx, &xs[..k], "scatter")?;
    }
    if let Some(v) = constant_indices(cx, idx) {
        let targets: Vec<usize> = if k == 0 {
            vec![0; u]
        } else {
            v.chunks(k)
                .map(|c| {
                    c.iter()
                        .zip(&xs[..k])
                        .fold(0usize, |acc, (&iv, &d)| acc * d + if iv < 0 { iv + d as i64 } else { iv } as usize)
                })
                .collect()
        };
        let xf = cx.reshape(x, &[m, rest])?;
        let uf = cx.reshape(upd, &[u, rest])?;
        if let Some(y) = scatter_rows(cx, &red, xf, uf, &targets, m)? {
            return cx.reshape(y, &xs);
        }
    }
    if u == 0 || m * rest == 0 {
        return Ok(x);
    }
    let xf = cx.reshape(x, &[m, rest])?;
    let lin = linear_index(cx, idx, &xs[..k])?;
    if red == "none" {
        // The last update of each position (in update order, as with constant indices), then
        // one gather of rows: O(m * u + m * rest) instead of the reductions' O(m * u * rest).
        one_hot_budget(cx, &red, sinter_core::budget::elems(&[m, u]), 8)?;
        let lin = cx.reshape(lin, &[1, u])?;
        let pos = cx.iota(m, DType::I64)?;
        let pos = cx.reshape(pos, &[m, 1])?;
        let eq = cx.bin(B::Eq, pos, lin)?; // [m, u]
        let (hit, src) = last_hit(cx, eq, 1)?; // [m]
        let uf = cx.reshape(upd, &[u, rest])?;
        let picked = cx.add(Op::Gather { axis: 0 }, vec![uf, src])?; // [m, rest]
        let hit = cx.reshape(hit, &[m, 1])?;
        let hit = cx.expand(hit, &[m, rest])?;
        let y = cx.select(hit, picked, xf)?;
        return cx.reshape(y, &xs);
    }
    one_hot_budget(cx, &red, sinter_core::budget::elems(&[m, u, rest]), cx.dt(upd).size_bytes())?;
    let lin = cx.reshape(lin, &[1, u, 1])?;
    let pos = cx.iota(m, DType::I64)?;
    let pos = cx.reshape(pos, &[m, 1, 1])?;
    let eq = cx.bin(B::Eq, pos, lin)?; // [m, u, 1]
    let uf = cx.reshape(upd, &[1, u, rest])?;
    let hit = cx.reduce(ReduceOp::Max, eq, &[1], false)?; // [m, 1]
    let eqf = cx.expand(eq, &[m, u, rest])?;
    let uf = cx.expand(uf, &[m, u, rest])?;
    let comb = combine(cx, &red, eqf, uf, 1)?; // [m, rest]
    let y = apply_reduction(cx, &red, xf, comb, hit)?;
    cx.reshape(y, &xs)
}

/// The value of indices that are constants of the model (not values assumed from run-time
/// inputs), already checked in range by [`check_known`].
fn constant_indices(cx: &Cx, idx: NodeId) -> Option<Vec<i64>> {
    if cx.imp.assumed.contains(&idx) || !cx.dt(idx).is_int() {
        return None;
    }
    cx.known(idx).map(|v| v.to_i64_vec())
}

/// The most updates one position may receive for [`scatter_rows`] (one gather per round).
const MAX_SCATTER_ROUNDS: usize = 8;

/// A scatter whose targets are known at import: row `e` of `upd` (`[u, rest]`) goes to row
/// `targets[e]` of `x` (`[m, rest]`). Built from gathers of `upd` by constant inverse maps, one
/// round per update a position receives, so it costs `O((m + u) * rest)` per round instead of the
/// one-hot masks' `O(m * u * rest)` (100k updates into 100k elements: 10^5, not 10^10). Duplicate
/// targets combine in update order (`none`: the last update wins, as in the ONNX reference).
/// `None` when some position receives more than [`MAX_SCATTER_ROUNDS`] updates under a
/// reduction (the one-hot lowering handles that).
fn scatter_rows(cx: &mut Cx, red: &str, x: NodeId, upd: NodeId, targets: &[usize], m: usize) -> R<Option<NodeId>> {
    cx.guard(m)?;
    let mut by_target: Vec<Vec<usize>> = vec![Vec::new(); m];
    for (e, &t) in targets.iter().enumerate() {
        by_target[t].push(e);
    }
    if red == "none" {
        for list in by_target.iter_mut() {
            if list.len() > 1 {
                *list = vec![*list.last().expect("non-empty")];
            }
        }
    }
    let rounds = by_target.iter().map(Vec::len).max().unwrap_or(0);
    if rounds > MAX_SCATTER_ROUNDS {
        return Ok(None);
    }
    let rest = cx.shape(x)?[1];
    let mut acc = x;
    for r in 0..rounds {
        let inv: Vec<i64> = by_target.iter().map(|l| l.get(r).map_or(0, |&e| e as i64)).collect();
        let hit: Vec<i64> = by_target.iter().map(|l| (l.len() > r) as i64).collect();
        let inv = cx.konst(HostTensor::from_i64(DType::I64, vec![m], &inv));
        let hit = cx.konst(HostTensor::from_i64(DType::Bool, vec![m, 1], &hit));
        let picked = cx.add(Op::Gather { axis: 0 }, vec![upd, inv])?; // [m, rest]
        let hit = cx.expand(hit, &[m, rest])?;
        acc = apply_reduction(cx, red, acc, picked, hit)?;
    }
    Ok(Some(acc))
}

/// `ai.onnx.ml.ArrayFeatureExtractor`: selects entries of the last axis.
pub(super) fn array_feature_extractor(cx: &mut Cx) -> R<NodeId> {
    cx.arity(2, 2)?;
    let (x, i) = (cx.inp(0)?, cx.inp(1)?);
    let r = cx.rank(x);
    if r == 0 {
        return Err(cx.err("X must have rank >= 1"));
    }
    let n: usize = cx.shape(i)?.iter().product();
    let i = cx.reshape(i, &[n])?;
    let y = cx.add(Op::Gather { axis: r - 1 }, vec![x, i])?;
    Ok(y)
}
