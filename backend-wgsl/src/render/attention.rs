//! Attention kernels: flash attention on FMAs (the scores never leave the workgroup).
//!
//! A workgroup of `bm / tm * tx` threads ([`AttnTile`]) owns `bm` query rows of one flat batch and
//! `bdv = tx * tdv` output columns (at most `dvt` per thread; a wider head takes several workgroups,
//! each recomputing the scores). Thread `(ty, tx)` holds rows `ty * tm ..`, per key tile of `bn` keys
//! the scores of keys `tx, tx + TX, ...`, and the outputs of columns `n0 + tx, n0 + tx + TX, ...` or,
//! when the head is 4-aligned and that wastes little, of column groups `n0 + 4 (tx + i TX) .. + 4`
//! (vec4 V reads and epilogue stores). Decode (one query row) uses 128 threads per row: the keys of a
//! tile are split over them, then the output columns.
//! Per key tile:
//!
//! 1. `S = Q K^T` in chunks of `bk` head-dimension columns staged in workgroup memory (Q stays
//!    resident for the whole kernel when its tile fits beside the rest), FMAs into `tm x bn/tx`
//!    registers per thread;
//! 2. the score expression per score (at that score's `M` and `Key`, `Acc(1)` = the dot product);
//!    keys past `kv`, rows past `m` and keys past the causal bound are `-inf` without evaluating it;
//! 3. the online softmax: the tile's row maxima through workgroup memory, the running maximum and
//!    the rescale factor per row (kept identically by every thread of the row), `p = exp(s - max)`
//!    summed unrounded into a per-thread partial row sum and stored rounded to `p_dtype`;
//! 4. `O = O * alpha + P V` with V staged `bk` keys at a time, f32 FMAs.
//!
//! Causal bodies stop at the last key tile a row of the workgroup can see. At the end the partial
//! row sums are combined, the output divided once, and the epilogue runs per output element as a
//! matmul's (`Acc(0)`). A row whose logits are all `-inf` divides 0 by 0: NaN, as the definition says.

use sinter_core::DType;
use sinter_core::kernel::{AttentionBody, AttnOperand, ExprId, Var};

use super::emit::{AccVal, Emitter, acc_uses, depends_on, store_roots};
use super::helpers::H;
use super::ops;
use super::pointwise::PARAMS;
use super::storage::{load_scalar, load_vec};
use super::types::{Ct, ct, f32_lit};
use super::{AttnTile, Body, GridSplit, OuterUnit, RenderError, Tuning, WgslCaps};

/// Most registers of one kind (scores or outputs) a thread may hold.
const MAX_REGS: u32 = 64;

/// Workgroup memory of a tile, in f32 words, without a resident Q: the Q chunk, the K chunk (rows
/// padded by one `vec4`), the V chunk, the probabilities and the per-thread row statistics.
fn shared_words(t: &AttnTile, bdv: u32) -> u64 {
    let (bm, bn, bk) = (u64::from(t.bm), u64::from(t.bn), u64::from(t.bk));
    bm * bk + bn * (bk + 4) + bk * u64::from(bdv) + bm * (bn + 1) + bm * u64::from(t.tx)
}

/// Checks an attention tile against the adapter's limits (for any head dimension); `Err` says why it
/// does not fit.
pub fn check_attn_tile(t: &AttnTile, caps: &WgslCaps) -> Result<(), String> {
    let AttnTile { bm, bn, bk, tm, tx, dvt } = *t;
    if [bm, bn, bk, tm, tx, dvt].contains(&0) {
        return Err(format!("attention tile {t:?} has a zero extent"));
    }
    if !bm.is_multiple_of(tm) || !bn.is_multiple_of(tx) || !bn.is_multiple_of(bk) || !bk.is_multiple_of(4) {
        return Err(format!("attention tile {t:?}: tm must divide bm, tx and bk must divide bn, bk a multiple of 4"));
    }
    if bm > 1024 || bn > 1024 || bk > 1024 || tx > 1024 || dvt > 1024 {
        return Err(format!("attention tile {t:?}: extents above 1024"));
    }
    let threads = t.threads();
    if threads > caps.max_wg() {
        return Err(format!("attention tile {t:?} needs {threads} threads; the adapter allows {}", caps.max_wg()));
    }
    if tm * (bn / tx) > MAX_REGS || tm * dvt > MAX_REGS {
        return Err(format!("attention tile {t:?} holds more than {MAX_REGS} scores or outputs per thread"));
    }
    let bytes = shared_words(t, tx * dvt) * 4;
    if bytes > u64::from(caps.max_workgroup_storage_bytes) {
        return Err(format!(
            "attention tile {t:?} needs {bytes} bytes of workgroup memory; the adapter allows {}",
            caps.max_workgroup_storage_bytes
        ));
    }
    Ok(())
}

/// Query rows one at a time, 128 threads splitting the keys (and then the output columns): decode.
/// Chunks of 32 head-dimension columns (36 KiB), 16 or 8 on smaller adapters.
pub const DECODE_TILE: AttnTile = AttnTile { bm: 1, bn: 128, bk: 32, tm: 1, tx: 128, dvt: 1 };
/// 8 rows, 32 threads per row: short query blocks.
pub const SMALL_TILE: AttnTile = AttnTile { bm: 8, bn: 32, bk: 16, tm: 1, tx: 32, dvt: 4 };
/// 32 rows, 2 per thread, 32-key tiles: fits the WebGPU default of 16 KiB of workgroup memory.
pub const MID_TILE: AttnTile = AttnTile { bm: 32, bn: 32, bk: 16, tm: 2, tx: 16, dvt: 4 };
/// 64 rows, 4 per thread, 64-key tiles, 128 output columns (38 KiB).
pub const BIG_TILE: AttnTile = AttnTile { bm: 64, bn: 64, bk: 16, tm: 4, tx: 16, dvt: 8 };
/// 64 rows with 32-key tiles (27 KiB: lavapipe's 32 KiB).
pub const BIG_NARROW_TILE: AttnTile = AttnTile { bn: 32, ..BIG_TILE };

/// The tiles max-autotune times for attention (those that fit the adapter).
pub fn attn_tile_candidates(caps: &WgslCaps) -> Vec<AttnTile> {
    [
        DECODE_TILE,
        AttnTile { bk: 16, ..DECODE_TILE },
        AttnTile { bk: 8, ..DECODE_TILE },
        AttnTile { bm: 1, bn: 256, bk: 16, tm: 1, tx: 64, dvt: 2 },
        SMALL_TILE,
        AttnTile { bm: 16, bn: 32, bk: 16, tm: 1, tx: 16, dvt: 4 },
        AttnTile { bm: 16, bn: 64, bk: 16, tm: 2, tx: 32, dvt: 4 },
        MID_TILE,
        AttnTile { bk: 32, dvt: 8, ..MID_TILE },
        AttnTile { bm: 32, bn: 64, bk: 16, tm: 2, tx: 16, dvt: 8 },
        BIG_TILE,
        BIG_NARROW_TILE,
        AttnTile { bk: 32, ..BIG_NARROW_TILE },
    ]
    .into_iter()
    .filter(|t| check_attn_tile(t, caps).is_ok())
    .collect()
}

/// The default tile: by query length (one row per workgroup for decode, 8 for short blocks, else
/// 64 rows where that gives at least 1024 workgroups, else 32), the first of its kind that fits
/// the adapter. Measured by max-autotune on an H200 through Vulkan (session 27): BERT-base's
/// attention (b8 h12 s128 d64, 192 workgroups of 64 rows) 0.046-0.049 ms on 64 rows against
/// 0.040-0.041 on 32; b8 h16 s1024 d64 (2048 of 64 rows) 2.505 ms on 64 rows against 2.612 on 32.
fn default_tile(a: &AttentionBody, caps: &WgslCaps) -> AttnTile {
    let fits = |t: &AttnTile| check_attn_tile(t, caps).is_ok();
    let wgs = |t: &AttnTile| (a.batch * a.heads) as u64 * (a.m as u64).div_ceil(u64::from(t.bm));
    let prefs = if a.m <= 2 {
        vec![DECODE_TILE, AttnTile { bk: 16, ..DECODE_TILE }, AttnTile { bk: 8, ..DECODE_TILE }]
    } else if a.m <= 16 {
        vec![SMALL_TILE]
    } else if wgs(&BIG_TILE) >= 1024 {
        vec![BIG_TILE, BIG_NARROW_TILE, MID_TILE]
    } else {
        vec![MID_TILE]
    };
    // Small adapters: shrink the tile until it fits (a 1-row, 1-thread tile always does).
    prefs
        .into_iter()
        .chain([SMALL_TILE, MID_TILE, AttnTile { bm: 4, bn: 32, bk: 8, tm: 1, tx: 32, dvt: 1 }])
        .find(fits)
        .unwrap_or(AttnTile { bm: 1, bn: 4, bk: 4, tm: 1, tx: 1, dvt: 1 })
}

/// The start of an operand's head for the current flat batch `batch`.
pub(super) fn operand_base(o: &AttnOperand, heads: usize) -> String {
    let mut terms = Vec::new();
    if o.offset != 0 {
        terms.push(format!("{}u", o.offset));
    }
    if o.s_batch != 0 {
        terms.push(if heads == 1 {
            format!("batch * {}u", o.s_batch)
        } else {
            format!("(batch / {heads}u) * {}u", o.s_batch)
        });
    }
    if o.s_head != 0 && heads / o.group.max(1) > 1 {
        let h = if heads == 1 { "batch".to_string() } else { format!("(batch % {heads}u)") };
        let h = if o.group > 1 { format!("({h} / {}u)", o.group) } else { h };
        terms.push(format!("{h} * {}u", o.s_head));
    }
    if terms.is_empty() { "0u".into() } else { terms.join(" + ") }
}

/// What both attention renderers check first: q, k and v of the input dtype, an f32 score, every
/// extent within the 32-bit index space. Returns the flat batch count (`batch * heads`).
pub(super) fn check_body(em: &Emitter<'_>, a: &AttentionBody) -> Result<u64, RenderError> {
    let k = em.k;
    let invalid = |msg: String| RenderError::Invalid { kernel: k.name.clone(), msg };
    let unsupported = |what: String| RenderError::Unsupported { kernel: k.name.clone(), what };
    for (name, op) in [("q", &a.q), ("k", &a.k), ("v", &a.v)] {
        let arg = em.args.get(op.arg).ok_or_else(|| invalid(format!("operand {name} argument {}", op.arg)))?;
        if arg.dtype != a.in_dtype {
            return Err(invalid(format!(
                "operand {name} is {}, the attention's input dtype is {}",
                arg.dtype, a.in_dtype
            )));
        }
    }
    if k.expr(a.score).dtype != DType::F32 {
        return Err(invalid(format!("the score is {}, not f32", k.expr(a.score).dtype)));
    }
    let bh = (a.batch as u64) * (a.heads as u64);
    let lim = u64::from(u32::MAX) / 4;
    if [bh, a.m as u64, a.kv as u64, a.d as u64, a.dv as u64].iter().any(|&x| x > lim) {
        return Err(unsupported(format!(
            "attention {bh}x{}x{}x{}x{} exceeds the 32-bit index space",
            a.m, a.kv, a.d, a.dv
        )));
    }
    Ok(bh)
}

/// Names and bounds the loop variables of the score and epilogue expressions (`batch`, `m`, `key`,
/// `n`) and emits once those of their values that depend on neither the row, the key, the column
/// nor an accumulator. Returns the roots of the stores.
pub(super) fn bind_and_hoist(em: &mut Emitter<'_>, a: &AttentionBody, bh: u64) -> Result<Vec<ExprId>, RenderError> {
    let k = em.k;
    let (m, kv, dv) = (a.m as u64, a.kv as u64, a.dv as u64);
    em.names.insert(Var::Batch, "batch".into());
    em.names.insert(Var::M, "m".into());
    em.names.insert(Var::Key, "key".into());
    em.names.insert(Var::N, "n".into());
    em.ranges.insert(Var::Batch, (0, bh as i64 - 1));
    em.ranges.insert(Var::M, (0, m as i64 - 1));
    em.ranges.insert(Var::Key, (0, (kv as i64 - 1).max(0)));
    em.ranges.insert(Var::N, (0, dv as i64 - 1));
    em.set_vec(None, false);
    // Score and epilogue values that depend on neither the row, the key, the column nor an
    // accumulator are computed once.
    let (dm, dk, dn, accs) = (depends_on(k, Var::M), depends_on(k, Var::Key), depends_on(k, Var::N), acc_uses(k));
    let inner = move |e: u32| {
        let e = e as usize;
        dm[e] || dk[e] || dn[e] || accs[e].is_some()
    };
    let store_roots_all: Vec<ExprId> = a.stores.iter().flat_map(store_roots).collect();
    let mut hoist = vec![a.score];
    hoist.extend(&store_roots_all);
    em.emit_closure(&hoist, &|e| !inner(e))?;
    Ok(store_roots_all)
}

/// The epilogue of the output element (4 columns when `vec`) at the `m` and `n` the caller declared,
/// within the output's rows and columns: `Acc(0)` = `value`, the closure of `roots`, the stores.
pub(super) fn emit_output(
    em: &mut Emitter<'_>,
    a: &AttentionBody,
    roots: &[ExprId],
    value: &str,
    vec: bool,
) -> Result<(), RenderError> {
    em.open(format!("if (m < {}u && n < {}u)", a.m, a.dv));
    em.line(format!("let ov = {value};"));
    em.acc.insert(0, AccVal { name: "ov".into(), dtype: DType::F32, vec });
    em.emit_closure(roots, &|_| true)?;
    for s in &a.stores {
        em.emit_store(s)?;
    }
    em.close();
    em.acc.remove(&0);
    Ok(())
}

/// What [`render`]'s staging emits: loads and stores in one loop, loads into registers, or stores
/// of the registers.
#[derive(Clone, Copy)]
enum Step<'s> {
    Both,
    Fetch(&'s str, &'s str, &'s str),
    Put(&'s str),
}

/// Renders an attention body.
pub(super) fn render(
    em: &mut Emitter<'_>,
    a: &AttentionBody,
    caps: &WgslCaps,
    tuning: &Tuning,
) -> Result<Body, RenderError> {
    let k = em.k;
    let kname = k.name.clone();
    let unsupported = |what: String| RenderError::Unsupported { kernel: kname.clone(), what };
    // Why an adapter with cooperative matrices does not run this body on them, for the summary.
    let refused = match super::attention_coop::plan(a, caps, tuning) {
        Ok(g) => return super::attention_coop::render(em, a, caps, tuning, g),
        Err(why) if caps.has_coop_matrix => format!("; not on cooperative matrices: {why}"),
        Err(_) => String::new(),
    };
    let t = tuning.attn_tile.unwrap_or_else(|| default_tile(a, caps));
    check_attn_tile(&t, caps).map_err(&unsupported)?;
    let bh = check_body(em, a)?;
    let AttnTile { bm, bn, bk, tm, tx, dvt } = t;
    let (txn, tn) = (tx, bn / tx);
    let threads = t.threads();
    // Output columns: groups of 4 consecutive ones per accumulator (vec4 V reads and epilogue stores)
    // when the head is 4-aligned and that computes at most a quarter more columns (padding included;
    // each column block recomputes the scores) than one column per accumulator does. A thread's
    // accumulators are `tx` columns (groups) apart.
    let dv64 = a.dv as u64;
    let tdv1 = dvt.min(dv64.div_ceil(u64::from(tx)).max(1) as u32);
    let groups4 = u64::from(dvt / 4).min(dv64.div_ceil(4).div_ceil(u64::from(tx))).max(1);
    let vec_o = tuning.vectorize
        && dvt >= 4
        && dv64.is_multiple_of(4)
        && 4 * dv64.next_multiple_of(u64::from(tx) * groups4 * 4) <= 5 * dv64.next_multiple_of(u64::from(tx * tdv1));
    let w: u32 = if vec_o { 4 } else { 1 };
    let tdv = if vec_o { groups4 as u32 * 4 } else { tdv1 };
    let slots = tdv / w;
    let bdv = tx * tdv;
    let dchunks = dv64.div_ceil(u64::from(bdv));
    let tiles_m = (a.m as u64).div_ceil(u64::from(bm));
    let workgroups = bh * tiles_m * dchunks;
    // Q resident when its whole tile fits beside the rest.
    let d_pad = (a.d as u64).div_ceil(u64::from(bk)) * u64::from(bk);
    let base_words = shared_words(&t, bdv) - u64::from(bm * bk);
    let q_res = d_pad > u64::from(bk)
        && (base_words + u64::from(bm) * d_pad) * 4 <= u64::from(caps.max_workgroup_storage_bytes);
    // Row strides in vec4s of the Q tile and of the K chunk (padded by one vec4 against bank conflicts).
    let qst4 = if q_res { d_pad / 4 } else { u64::from(bk / 4) };
    let kst4 = bk / 4 + 1;
    let bnp = bn + 1;
    let globals = vec![
        format!("var<workgroup> sq: array<vec4<f32>, {}>; // Q tile, [row][column]", u64::from(bm) * qst4),
        format!("var<workgroup> sk: array<vec4<f32>, {}>; // K chunk, [key][column] (rows padded)", bn * kst4),
        if vec_o {
            format!("var<workgroup> sv: array<vec4<f32>, {}>; // V chunk, [key][column]", bk * bdv / 4)
        } else {
            format!("var<workgroup> sv: array<f32, {}>; // V chunk, [key][column]", bk * bdv)
        },
        format!("var<workgroup> sp: array<f32, {}>; // probabilities, [row][key] (rows padded by 1)", bm * bnp),
        format!("var<workgroup> sst: array<f32, {}>; // per-thread row statistics, [row][tx]", bm * txn),
    ];
    // A causal offset of kv or more masks nothing: clamped, so indices stay small.
    let causal_o = a.causal.map(|o| o.min(a.kv));
    let causal = causal_o.map_or(String::new(), |o| format!(", causal (keys > query + {o} skipped)"));
    let summary = format!(
        "attention {bh} heads x m {} x kv {} x d {} x dv {} ({} -> p {}){causal}, tile {bm} rows x {bn} keys, chunks \
         of {bk}, {tm} rows x {tn} keys x {tdv} columns per thread{}, {threads} threads, {dchunks} column blocks of \
         {bdv}, Q {}, {workgroups} workgroups{refused}",
        a.m,
        a.kv,
        a.d,
        a.dv,
        a.in_dtype,
        a.p_dtype,
        if vec_o { " (groups of 4)" } else { "" },
        if q_res { "resident" } else { "chunked" }
    );
    let strategy = format!("attention {bm}x{bn}x{bk} {tm}x{tn}x{tdv}{}", if vec_o { " vec4" } else { "" });
    let body = |workgroups| Body {
        globals: globals.clone(),
        params: PARAMS.to_string(),
        workgroup_size: [threads, 1, 1],
        workgroups,
        vectorized: vec_o,
        strategy: strategy.clone(),
        summary: summary.clone(),
        split: Some(GridSplit { unit: OuterUnit::AttentionBatch, per: 1, inner: tiles_m * dchunks }),
    };
    if workgroups == 0 {
        return Ok(body(0));
    }

    // Column blocks innermost, then row tiles, then flat batches: a matmul's tile order.
    super::matmul::tile_origin(em, caps, workgroups, (tiles_m, dchunks), (bm, bdv));
    em.line(format!("let tx = lid % {txn}u;"));
    em.line(format!("let ty = lid / {txn}u;"));
    for (name, op) in [("q", &a.q), ("k", &a.k), ("v", &a.v)] {
        em.line(format!("let {name}_base = {};", operand_base(op, a.heads)));
    }
    let (m, kv, d, dv) = (a.m as u64, a.kv as u64, a.d as u64, a.dv as u64);
    let store_roots_all = bind_and_hoist(em, a, bh)?;

    let ninf = f32_lit(f32::NEG_INFINITY);
    let fmax = em.h.need(H::FMax, false);
    let oty = if vec_o { "vec4<f32>" } else { "f32" };
    em.line(format!("var oacc: array<{oty}, {}>;", tm * slots));
    em.line(format!("var mrun: array<f32, {tm}>;"));
    em.line(format!("var lrun: array<f32, {tm}>;"));
    for i in 0..tm {
        em.line(format!("mrun[{i}] = {ninf};"));
    }
    // Stages a `rows x cols` chunk of an operand into workgroup memory (zero past the edges) at word
    // `rr * stride + cc` of `dst`; 4 consecutive columns per load when everything is 4-aligned. `Both`
    // loads and stores in one loop; `Fetch` loads into the registers `reg` (unrolled, the chunk at rows
    // from `row0`, columns from `col0`) and `Put` stores them, so the loads of the next chunk are in
    // flight while the current one is used.
    let in_ct = ct(a.in_dtype).unwrap_or(Ct::F32);
    let vec_of = |op: &AttnOperand, cols: u64, cols_ext: u64| {
        let aligned = [op.offset, op.s_row, op.s_head, op.s_batch].iter().all(|x| x.is_multiple_of(4));
        tuning.vectorize && aligned && cols_ext.is_multiple_of(4) && cols.is_multiple_of(4)
    };
    let stage = |em: &mut Emitter<'_>,
                 which: &str,
                 op: &AttnOperand,
                 (rows, cols, stride): (u64, u64, u64),
                 (dst, dst_vec): (&str, bool),
                 step: Step<'_>| {
        let (row0, col0) = match (which, step) {
            (_, Step::Fetch(_, r, c)) => (r, c),
            ("q", _) => ("m0", if q_res { "0u" } else { "c0" }),
            ("k", _) => ("j0", "c0"),
            _ => ("j0 + jc", "n0"),
        };
        let rows_ext = if which == "q" { m } else { kv };
        let cols_ext = if which == "v" { dv } else { d };
        let vec = vec_of(op, cols, cols_ext);
        let w = if vec { 4 } else { 1 };
        let total = rows * cols / w;
        if !matches!(step, Step::Put(_))
            && let Some(u) = em.uses.get_mut(op.arg)
        {
            if vec {
                u.contig_loads += 1;
            } else {
                u.other_loads += 1;
            }
        }
        let arg = em.args[op.arg].clone();
        let unrolled = |em: &mut Emitter<'_>, u: u64| {
            em.open("");
            em.line(format!("let e = lid + {}u;", u * u64::from(threads)));
            if !total.is_multiple_of(u64::from(threads)) {
                em.open(format!("if (e < {total}u)"));
            }
        };
        let per_thread = total.div_ceil(u64::from(threads));
        let groups: Vec<Option<u64>> = match step {
            Step::Both => vec![None],
            _ => (0..per_thread).map(Some).collect(),
        };
        for g in groups {
            match g {
                None => em.open(format!("for (var e = lid; e < {total}u; e = e + {threads}u)")),
                Some(u) => unrolled(em, u),
            }
            em.line(format!("let rr = e / {}u;", cols / w));
            em.line(format!("let cc = (e % {}u){};", cols / w, if vec { " * 4u" } else { "" }));
            let x = match (step, g) {
                (Step::Put(reg), Some(u)) => format!("{reg}[{u}]"),
                _ => {
                    em.line(format!("let gr = {row0} + rr;"));
                    em.line(format!("let gc = {col0} + cc;"));
                    em.line(if vec { "var x = vec4<f32>(0.0f);" } else { "var x = 0.0f;" });
                    em.open(format!("if (gr < {rows_ext}u && gc < {cols_ext}u)"));
                    em.line(format!("let gi = {which}_base + gr * {}u + gc;", op.s_row));
                    let tmp = em.fresh("l");
                    let (pre, v) = if vec { load_vec(&arg, "gi", &tmp, in_ct) } else { load_scalar(&arg, "gi", &tmp) };
                    for p in pre {
                        em.line(p);
                    }
                    let v = ops::cast(&v, a.in_dtype, DType::F32, vec, &mut em.h).map_err(|m| em.err(m))?;
                    em.line(format!("x = {v};"));
                    em.close();
                    "x".to_string()
                }
            };
            if let (Step::Fetch(reg, ..), Some(u)) = (step, g) {
                em.line(format!("{reg}[{u}] = x;"));
            } else {
                em.line(format!("let wi = rr * {stride}u + cc;"));
                match (dst_vec, vec) {
                    (true, true) => em.line(format!("{dst}[wi >> 2u] = {x};")),
                    (true, false) => em.line(format!("{dst}[wi >> 2u][wi & 3u] = {x};")),
                    (false, true) => {
                        for (c, comp) in ["x", "y", "z", "w"].iter().enumerate() {
                            em.line(format!("{dst}[wi + {c}u] = {x}.{comp};"));
                        }
                    }
                    (false, false) => em.line(format!("{dst}[wi] = {x};")),
                }
            }
            if g.is_some() && !total.is_multiple_of(u64::from(threads)) {
                em.close();
            }
            em.close();
        }
        Ok::<(), RenderError>(())
    };
    // Prefetch registers of the Q and K chunks and of the V chunk.
    let regs = |op: &AttnOperand, rows: u64, cols: u64, cols_ext: u64| {
        let vec = vec_of(op, cols, cols_ext);
        let n = (rows * cols / if vec { 4 } else { 1 }).div_ceil(u64::from(threads)).max(1);
        format!("array<{}, {n}>", if vec { "vec4<f32>" } else { "f32" })
    };
    let (bm64, bn64, bk64, bdv64) = (u64::from(bm), u64::from(bn), u64::from(bk), u64::from(bdv));
    let qgeom = (bm64, bk64, bk64);
    let kgeom = (bn64, bk64, u64::from(kst4 * 4));
    let vgeom = (bk64, bdv64, bdv64);
    if !q_res {
        em.line(format!("var pfq: {};", regs(&a.q, bm64, bk64, d)));
    }
    em.line(format!("var pfk: {};", regs(&a.k, bn64, bk64, d)));
    em.line(format!("var pfv: {};", regs(&a.v, bk64, bdv64, dv)));
    if q_res {
        em.line("// Q tile, resident");
        stage(em, "q", &a.q, (bm64, d_pad, d_pad), ("sq", true), Step::Both)?;
    }
    match causal_o {
        Some(o) => em.line(format!("let kend = min({kv}u, m0 + {}u);", u64::from(bm) + o as u64)),
        None => em.line(format!("let kend = {kv}u;")),
    }
    em.open(format!("for (var j0 = 0u; j0 < kend; j0 = j0 + {bn}u)"));
    em.line(format!("var sacc: array<f32, {}>;", tm * tn));
    em.line("// S = Q K^T");
    if !q_res {
        stage(em, "q", &a.q, qgeom, ("sq", true), Step::Fetch("pfq", "m0", "0u"))?;
    }
    stage(em, "k", &a.k, kgeom, ("sk", true), Step::Fetch("pfk", "j0", "0u"))?;
    em.open(format!("for (var c0 = 0u; c0 < {d}u; c0 = c0 + {bk}u)"));
    if !q_res {
        stage(em, "q", &a.q, qgeom, ("sq", true), Step::Put("pfq"))?;
    }
    stage(em, "k", &a.k, kgeom, ("sk", true), Step::Put("pfk"))?;
    em.line("workgroupBarrier();");
    em.open(format!("if (c0 + {bk}u < {d}u)"));
    if !q_res {
        stage(em, "q", &a.q, qgeom, ("sq", true), Step::Fetch("pfq", "m0", &format!("c0 + {bk}u")))?;
    }
    stage(em, "k", &a.k, kgeom, ("sk", true), Step::Fetch("pfk", "j0", &format!("c0 + {bk}u")))?;
    em.close();
    em.open(format!("for (var kk = 0u; kk < {}u; kk = kk + 1u)", bk / 4));
    let qcol = if q_res { "c0 / 4u + kk" } else { "kk" };
    for i in 0..tm {
        em.line(format!("let qa{i} = sq[(ty * {tm}u + {i}u) * {qst4}u + {qcol}];"));
    }
    for q in 0..tn {
        em.line(format!("let kb{q} = sk[(tx + {}u) * {kst4}u + kk];", q * txn));
    }
    for i in 0..tm {
        for q in 0..tn {
            let s = i * tn + q;
            em.line(format!(
                "sacc[{s}] = fma(qa{i}.w, kb{q}.w, fma(qa{i}.z, kb{q}.z, fma(qa{i}.y, kb{q}.y, fma(qa{i}.x, kb{q}.x, \
                 sacc[{s}]))));"
            ));
        }
    }
    em.close();
    em.line("workgroupBarrier();");
    em.close();

    em.line("// logits, masked");
    let score_roots = [a.score];
    for i in 0..tm {
        for q in 0..tn {
            let s = i * tn + q;
            em.open("");
            em.line(format!("let m = m0 + ty * {tm}u + {i}u;"));
            em.line(format!("let key = j0 + tx + {}u;", q * txn));
            em.line(format!("var x = {ninf};"));
            let bound = causal_o.map_or(String::new(), |o| format!(" && key <= m + {o}u"));
            em.open(format!("if (m < {m}u && key < {kv}u{bound})"));
            em.acc.insert(1, AccVal { name: format!("sacc[{s}]"), dtype: DType::F32, vec: false });
            em.emit_closure(&score_roots, &|_| true)?;
            let (v, _) = em.value(a.score)?;
            em.line(format!("x = {v};"));
            em.close();
            em.line(format!("sacc[{s}] = x;"));
            em.close();
        }
    }
    em.acc.remove(&1);
    stage(em, "v", &a.v, vgeom, ("sv", vec_o), Step::Fetch("pfv", "j0", "n0"))?;
    em.line("// online softmax: tile row maxima, rescale, probabilities");
    for i in 0..tm {
        let mut mx = format!("sacc[{}]", i * tn);
        for q in 1..tn {
            mx = format!("{fmax}({mx}, sacc[{}])", i * tn + q);
        }
        em.line(format!("sst[(ty * {tm}u + {i}u) * {txn}u + tx] = {mx};"));
    }
    em.line("workgroupBarrier();");
    let p_round = |em: &mut Emitter<'_>, x: &str| -> Result<String, RenderError> {
        let r = ops::cast(x, DType::F32, a.p_dtype, false, &mut em.h).map_err(|m| em.err(m))?;
        ops::cast(&r, a.p_dtype, DType::F32, false, &mut em.h).map_err(|m| em.err(m))
    };
    for i in 0..tm {
        em.open("");
        em.line(format!("let r = ty * {tm}u + {i}u;"));
        em.line(format!("var mx = mrun[{i}];"));
        em.open(format!("for (var u = 0u; u < {txn}u; u = u + 1u)"));
        em.line(format!("mx = {fmax}(mx, sst[r * {txn}u + u]);"));
        em.close();
        // A row masked so far keeps max -inf: exponents against 0 give 0 instead of NaN.
        em.line(format!("let ms = select(mx, 0.0f, mx == {ninf});"));
        em.line(format!("let alpha = exp(mrun[{i}] - ms);"));
        em.line(format!("mrun[{i}] = mx;"));
        em.line("var ls = 0.0f;");
        for q in 0..tn {
            em.line(format!("let p{q} = exp(sacc[{}] - ms);", i * tn + q));
            em.line(format!("ls = ls + p{q};"));
            let pr = p_round(em, &format!("p{q}"))?;
            em.line(format!("sp[r * {bnp}u + tx + {}u] = {pr};", q * txn));
        }
        em.line(format!("lrun[{i}] = lrun[{i}] * alpha + ls;"));
        for c in 0..slots {
            let o = i * slots + c;
            em.line(format!("oacc[{o}] = oacc[{o}] * alpha;"));
        }
        em.close();
    }
    em.line("// O += P V");
    em.line(format!("let jend = min({bn}u, kend - j0);"));
    em.open(format!("for (var jc = 0u; jc < jend; jc = jc + {bk}u)"));
    stage(em, "v", &a.v, vgeom, ("sv", vec_o), Step::Put("pfv"))?;
    em.line("workgroupBarrier();");
    em.open(format!("if (jc + {bk}u < jend)"));
    stage(em, "v", &a.v, vgeom, ("sv", vec_o), Step::Fetch("pfv", &format!("j0 + jc + {bk}u"), "n0"))?;
    em.close();
    em.open(format!("for (var kk = 0u; kk < {bk}u; kk = kk + 1u)"));
    for i in 0..tm {
        em.line(format!("let pa{i} = sp[(ty * {tm}u + {i}u) * {bnp}u + jc + kk];"));
    }
    for c in 0..slots {
        em.line(format!("let vb{c} = sv[kk * {}u + tx + {}u];", bdv / w, c * txn));
    }
    for i in 0..tm {
        let pa = if vec_o { format!("vec4<f32>(pa{i})") } else { format!("pa{i}") };
        for c in 0..slots {
            let o = i * slots + c;
            em.line(format!("oacc[{o}] = fma({pa}, vb{c}, oacc[{o}]);"));
        }
    }
    em.close();
    em.line("workgroupBarrier();");
    em.close();
    em.close();

    em.line("// row sums across the row's threads, then the epilogue");
    for i in 0..tm {
        em.line(format!("sst[(ty * {tm}u + {i}u) * {txn}u + tx] = lrun[{i}];"));
    }
    em.line("workgroupBarrier();");
    for i in 0..tm {
        em.line(format!("var lsum{i} = 0.0f;"));
        em.open(format!("for (var u = 0u; u < {txn}u; u = u + 1u)"));
        em.line(format!("lsum{i} = lsum{i} + sst[(ty * {tm}u + {i}u) * {txn}u + u];"));
        em.close();
    }
    if vec_o {
        em.set_vec(Some(Var::N), true);
        em.ranges.insert(Var::N, (0, dv as i64 - 4));
    }
    for i in 0..tm {
        for c in 0..slots {
            em.open("");
            em.line(format!("let m = m0 + ty * {tm}u + {i}u;"));
            let col = if vec_o { format!("(tx + {}u) * 4u", c * txn) } else { format!("tx + {}u", c * txn) };
            em.line(format!("let n = n0 + {col};"));
            emit_output(em, a, &store_roots_all, &format!("oacc[{}] / lsum{i}", i * slots + c), vec_o)?;
            em.close();
        }
    }
    Ok(body(workgroups))
}
