//! Flash attention on cooperative matrices (`coop_mat16x16`: tensor cores on NVIDIA through
//! `VK_KHR_cooperative_matrix`), the WGSL counterpart of CUDA's `mma.sync` attention.
//!
//! A workgroup of 4 subgroups owns 64 query rows of one flat batch and every output column; each
//! subgroup owns 16 of the rows, and everything row-wise (scores, probabilities, the running maximum
//! and sum, O) stays within its subgroup. The query tile is staged once and held as `d / 16` A
//! fragments. Per tile of `bn` keys (64 where the workgroup memory holds it, else 32 or 16):
//!
//! 1. the K and V tiles are staged into workgroup memory as f16 (zero past the keys and the head);
//! 2. `S = Q K^T` on the matrix units, `bn / 16` f32 fragments per subgroup, stored to `ss`;
//! 3. the subgroup's lanes read their rows' scores into registers (subgroup size / 16 lanes per
//!    row, unrolled) and evaluate the score expression (`Acc(1)` = the dot product); rows past `m`,
//!    keys past `kv` and past the causal bound are masked by a
//!    bit per register, never by `-inf` (see [`LOW`]); they keep the online softmax (row maximum
//!    across the row's lanes by `subgroupShuffleXor`, the rescale factor `alpha` to `sa`) and store
//!    `p = exp(s - max)` (0 where masked), rounded to `p_dtype` and then to f16, to `sp`;
//! 4. `P V` on the matrix units into zeroed fragments, stored through the subgroup's rows of `ss`
//!    (free again once `sp` is written), and added by the lanes into O held in registers:
//!    `O = O * alpha + P V`. Cooperative matrices give no access to their elements, so O cannot be
//!    rescaled in a fragment; this round trip through workgroup memory is what that costs.
//!
//! At the end the row sums are combined across the row's lanes, O divided once, and the kernel's
//! epilogue evaluated per output element as the FMA kernel does (`Acc(0)`). A row whose keys are all
//! masked (or whose logits are all `-inf`) divides 0 by 0: NaN, as the definition says.
//!
//! Numerics: f16 operands as they are; bf16 (with [`WgslCaps::bf16_matmul_as_f16`]) and f32 (with
//! [`WgslCaps::f32_matmul_as_f16`]) converted to f16 as staged, as the cooperative-matrix matmul
//! does. The probabilities are rounded to `p_dtype` first (what the graph computes) and then to f16
//! (exact for bf16 and f16 values in [6.1e-5, 1]). Accumulation is f32.
//!
//! Invariants: every barrier is a `workgroupBarrier` in uniform control flow (the key loop's bound is
//! uniform); `subgroupBarrier` would not do, as naga gives it no workgroup-memory semantics. Rows of
//! `ss`, `sp` and `sa` are written and read only by the subgroup owning them; `sk` and `sv` by all.
//! Every row of workgroup memory is 16-byte aligned, as the matrix loads and stores want.

use sinter_core::DType;
use sinter_core::kernel::{AttentionBody, AttnOperand};

use super::attention::{bind_and_hoist, check_body, emit_output, operand_base};
use super::emit::{AccVal, Emitter};
use super::helpers::H;
use super::ops;
use super::pointwise::{PARAMS, emit_wid_within};
use super::staging::Held;
use super::types::f32_lit;
use super::{Body, GridSplit, OuterUnit, RenderError, Tuning, WgslCaps};

/// Query rows per workgroup.
const BM: u32 = 64;
/// Subgroups per workgroup, 16 rows each.
const SUBGROUPS: u32 = 4;
/// Padding of f16 rows in workgroup memory, in elements (16 bytes: rows stay aligned and consecutive
/// rows start 4 banks apart).
const PAD16: u32 = 8;
/// Padding of f32 rows, in elements (16 bytes).
const PAD32: u32 = 4;
/// Keys per tile, largest first (what [`Tuning::attn_keys`] may ask for).
pub const KEY_TILES: [u32; 3] = [64, 32, 16];
/// The running maximum before any key is seen, finite on purpose. Masked scores are never
/// represented by `-inf`: a mask bit per score register keeps them out of the maximum and gives them
/// probability 0. Measured reason (H200, NVIDIA 580 Vulkan driver, session 17 calls 5-10): where
/// the compiler could prove a register held the `-inf` literal (keys past `kv` in the last tile of
/// an unrolled softmax), those keys came out with probability 1 instead of 0 (the rows' sums too
/// large, every output scaled down), as SPIR-V without `SignedZeroInfNanPreserve` lets a compiler
/// assume no infinities; the same masks on values it could not fold were right. Scores below this
/// (none a finite score reaches in practice) would be treated as masked.
const LOW: f32 = -3.0e38;
/// Most O values a lane keeps in registers.
const MAX_O_REGS: u32 = 64;
/// Largest padded head dimension (Q is held as `d / 16` fragments).
const MAX_D: u32 = 256;

/// The layout of one kernel's workgroup memory.
#[derive(Clone, Copy, Debug)]
pub(super) struct Geometry {
    /// Keys per tile.
    bn: u32,
    /// Head dimension of Q and K, rounded up to 16.
    d_pad: u32,
    /// Head dimension of V, rounded up to 16.
    dv_pad: u32,
    /// Row strides (elements) of the K tile (also the staged Q), of V, of the f32 scores and of the
    /// f16 probabilities.
    kst: u32,
    vst: u32,
    sst: u32,
    pst: u32,
}

impl Geometry {
    fn new(a: &AttentionBody, bn: u32) -> Geometry {
        let d_pad = (a.d as u32).next_multiple_of(16);
        let dv_pad = (a.dv as u32).next_multiple_of(16);
        Geometry { bn, d_pad, dv_pad, kst: d_pad + PAD16, vst: dv_pad + PAD16, sst: bn + PAD32, pst: bn + PAD16 }
    }

    /// Rows of the K buffer: the key tile, or the query tile staged through it at the start.
    fn k_rows(&self) -> u32 {
        self.bn.max(BM)
    }

    /// Workgroup memory in bytes.
    fn shared_bytes(&self) -> u64 {
        let f16s = u64::from(self.k_rows() * self.kst + self.bn * self.vst + BM * self.pst);
        let f32s = u64::from(BM * self.sst + BM);
        f16s * 2 + f32s * 4
    }
}

/// Query rows a body needs beyond to run on cooperative matrices: at most this many do not fill a
/// 16-row fragment (decode stays on the FMA kernel).
pub(crate) const MIN_QUERY_ROWS: usize = 16;

/// Whether the adapter runs attention with `dtype` operands on cooperative matrices at all: f16
/// matrix units with subgroups, a fixed subgroup size of 16, 32 or 64 whose subgroups fit a
/// workgroup, and `dtype` run as f16 (its opt-in); `Err` says why not. The cost model asks the same
/// (`cost::WgslCostModel::for_caps`), so what it fuses is what this kernel runs.
pub(crate) fn adapter_runs(caps: &WgslCaps, dtype: DType) -> Result<(), String> {
    if !(caps.has_coop_matrix && caps.has_f16 && caps.has_subgroups) {
        return Err("the adapter has no f16 cooperative matrices".into());
    }
    let sg = caps.fixed_subgroup_size.unwrap_or(0);
    if !matches!(sg, 16 | 32 | 64) || SUBGROUPS * sg > caps.max_wg() {
        return Err(format!("subgroup size {sg} is not a fixed 16, 32 or 64"));
    }
    if !caps.runs_as_f16(dtype) {
        return Err(format!("{dtype} operands without the opt-in to convert them to f16"));
    }
    Ok(())
}

/// The geometry `a` runs with on cooperative matrices, or why it does not: no matrix units or fixed
/// subgroup size, an input dtype without its opt-in, a query block too short to fill 16-row
/// fragments (decode stays on the FMA kernel), a head too wide, or no key tile that fits the
/// workgroup memory (at most [`Tuning::attn_keys`] keys where given). An explicit FMA tile in
/// `tuning` (max-autotune's candidates) also refuses.
pub(super) fn plan(a: &AttentionBody, caps: &WgslCaps, tuning: &Tuning) -> Result<Geometry, String> {
    if !tuning.coop_matrix || tuning.attn_tile.is_some() {
        return Err("tuning asks for the FMA kernel".into());
    }
    adapter_runs(caps, a.in_dtype)?;
    let sg = caps.fixed_subgroup_size.unwrap_or(0);
    if a.m <= MIN_QUERY_ROWS {
        return Err(format!("{} query rows fill less than one 16-row fragment", a.m));
    }
    let g = Geometry::new(a, 64);
    if g.d_pad > MAX_D || 16 * g.dv_pad / sg > MAX_O_REGS {
        return Err(format!("head dimensions {} and {} exceed what a subgroup holds", a.d, a.dv));
    }
    let keys = match tuning.attn_keys {
        Some(k) if KEY_TILES.contains(&k) => vec![k],
        Some(k) => return Err(format!("{k} keys per tile: not one of {KEY_TILES:?}")),
        None => KEY_TILES.to_vec(),
    };
    keys.into_iter()
        .map(|bn| Geometry::new(a, bn))
        .find(|g| g.shared_bytes() <= u64::from(caps.max_workgroup_storage_bytes))
        .ok_or_else(|| format!("no key tile fits {} bytes of workgroup memory", caps.max_workgroup_storage_bytes))
}

/// What [`render`]'s staging emits: loads of rows from `row0` into registers, or stores of the
/// registers into workgroup memory (`dst`, row stride).
#[derive(Clone, Copy)]
enum Step<'s> {
    Fetch(&'s str, &'s str),
    Put(&'s str, &'s str, u32),
}

/// One 16x16 f32 fragment `acc`, the sum of the products of `terms` (an A fragment, a B load),
/// stored row-major at `ss[dst]` (row stride `sst`), in a block of its own.
fn product_to_ss(em: &mut Emitter<'_>, acc: &str, terms: impl Iterator<Item = (String, String)>, dst: &str, sst: u32) {
    em.open("");
    em.line(format!("var {acc} = coop_mat16x16<f32, C>();"));
    for (fa, fb) in terms {
        em.line(format!("{acc} = coopMultiplyAdd({fa}, {fb}, {acc});"));
    }
    em.line(format!("coopStoreT({acc}, &ss[{dst}], {sst}u);"));
    em.close();
}

/// Renders `a` on cooperative matrices with the geometry from [`plan`].
pub(super) fn render(
    em: &mut Emitter<'_>,
    a: &AttentionBody,
    caps: &WgslCaps,
    tuning: &Tuning,
    g: Geometry,
) -> Result<Body, RenderError> {
    let sg = caps.fixed_subgroup_size.unwrap_or(32);
    let threads = SUBGROUPS * sg;
    // Lanes per softmax row, and rows of a 16x16 fragment per lane.
    let parts = sg / 16;
    let slots = 256 / sg;
    let Geometry { bn, d_pad, dv_pad, kst, vst, sst, pst } = g;
    let (nq, nk, nf) = (d_pad / 16, bn / 16, dv_pad / 16);
    // O fragments per round through the scratch (16 columns each within a subgroup's rows of `ss`).
    let per_round = nk.min(nf);
    // A value combined across the lanes sharing a softmax row (XOR shuffles by 16, 32, ...).
    let across_row = |em: &mut Emitter<'_>, step: &dyn Fn(u32) -> String| {
        let mut o = 16;
        while o < sg {
            em.line(step(o));
            o *= 2;
        }
    };
    let bh = check_body(em, a)?;
    let (m, kv, d, dv) = (a.m as u64, a.kv as u64, a.d as u64, a.dv as u64);
    let tiles_m = m.div_ceil(u64::from(BM));
    let workgroups = bh * tiles_m;
    em.enables.push("f16");
    em.enables.push("wgpu_cooperative_matrix");
    let globals = vec![
        format!("var<workgroup> sk: array<f16, {}>; // K tile (Q at the start), [row][column]", g.k_rows() * kst),
        format!("var<workgroup> sv: array<f16, {}>; // V tile, [key][column]", bn * vst),
        format!("var<workgroup> ss: array<f32, {}>; // scores, then P V, [row][key]", BM * sst),
        format!("var<workgroup> sp: array<f16, {}>; // probabilities, [row][key]", BM * pst),
        format!("var<workgroup> sa: array<f32, {BM}>; // per row: alpha, then the row sum"),
    ];
    let params = format!("{PARAMS}, @builtin(subgroup_id) sg_id: u32, @builtin(subgroup_invocation_id) sg_lane: u32");
    let causal_o = a.causal.map(|o| o.min(a.kv));
    let causal = causal_o.map_or(String::new(), |o| format!(", causal (keys > query + {o} skipped)"));
    let strategy = format!("attention coop16 {BM}x{bn}");
    let summary = format!(
        "attention {bh} heads x m {m} x kv {kv} x d {d} x dv {dv} ({} -> p {}){causal} on cooperative matrices: \
         tile {BM} rows x {bn} keys, {SUBGROUPS} subgroups of {sg} with 16 rows each, {} bytes of workgroup \
         memory, {workgroups} workgroups",
        a.in_dtype,
        a.p_dtype,
        g.shared_bytes()
    );
    let body = |workgroups| Body {
        globals: globals.clone(),
        params: params.clone(),
        workgroup_size: [threads, 1, 1],
        workgroups,
        vectorized: false,
        strategy: strategy.clone(),
        summary: summary.clone(),
        split: Some(GridSplit { unit: OuterUnit::AttentionBatch, per: 1, inner: tiles_m }),
    };
    if workgroups == 0 {
        return Ok(body(0));
    }

    emit_wid_within(em, workgroups, caps);
    em.line(format!("let m0 = (wid % {tiles_m}u) * {BM}u;"));
    em.line(format!("let batch = wid / {tiles_m}u;"));
    // The lane's softmax row (within the subgroup's 16) and part of it, and its first row of a fragment.
    em.line("let rs = sg_lane % 16u;");
    em.line("let part = sg_lane / 16u;");
    em.line("let r0 = sg_id * 16u;");
    for (name, op) in [("q", &a.q), ("k", &a.k), ("v", &a.v)] {
        em.line(format!("let {name}_base = {};", operand_base(op, a.heads)));
    }
    let store_roots_all = bind_and_hoist(em, a, bh)?;

    // Staging of `rows x cols_pad` of an operand as f16, in two steps so the next tile's loads are in
    // flight while the current one is used: `Fetch(reg, row0)` loads rows from `row0` into the
    // registers `reg` (zero past `rows_ext` and `cols_ext`; 4 columns per load where everything is
    // 4-aligned), `Put(reg, dst, stride)` stores them at `dst[rr * stride + cc]`. Unrolled: each
    // thread's loads are issued back to back.
    let vec_of = |op: &AttnOperand, cols_ext: u64| {
        let aligned = [op.offset, op.s_row, op.s_head, op.s_batch].iter().all(|x| x.is_multiple_of(4));
        tuning.vectorize && aligned && cols_ext.is_multiple_of(4)
    };
    // What the registers hold (see `staging`).
    let held = |em: &Emitter<'_>, op: &AttnOperand, cols_ext: u64| {
        Held::of(&em.args[op.arg], vec_of(op, cols_ext), a.in_dtype)
    };
    let regs_of = |op: &AttnOperand, rows: u32, cols_pad: u32, cols_ext: u64| {
        let w = if vec_of(op, cols_ext) { 4 } else { 1 };
        (rows * cols_pad / w).div_ceil(threads)
    };
    let stage = |em: &mut Emitter<'_>,
                 which: &str,
                 op: &AttnOperand,
                 (rows, rows_ext): (u32, u64),
                 (cols_pad, cols_ext): (u32, u64),
                 step: Step<'_>|
     -> Result<(), RenderError> {
        let vec = vec_of(op, cols_ext);
        let kind = held(em, op, cols_ext);
        let w = if vec { 4 } else { 1 };
        let total = rows * cols_pad / w;
        if let (Step::Fetch(..), Some(u)) = (step, em.uses.get_mut(op.arg)) {
            if vec {
                u.contig_loads += 1;
            } else {
                u.other_loads += 1;
            }
        }
        let arg = em.args[op.arg].clone();
        for u in 0..total.div_ceil(threads) {
            em.open("");
            em.line(format!("let e = lid + {}u;", u * threads));
            let guarded = !total.is_multiple_of(threads);
            if guarded {
                em.open(format!("if (e < {total}u)"));
            }
            em.line(format!("let rr = e / {}u;", cols_pad / w));
            em.line(format!("let cc = (e % {}u){};", cols_pad / w, if vec { " * 4u" } else { "" }));
            match step {
                Step::Fetch(reg, row0) => {
                    em.line(format!("let gr = {row0} + rr;"));
                    em.line(format!("{reg}[{u}] = {};", kind.zero(vec)));
                    em.open(format!("if (gr < {rows_ext}u && cc < {cols_ext}u)"));
                    em.line(format!("let gi = {which}_base + gr * {}u + cc;", op.s_row));
                    let v = kind.load(em, &arg, "gi", vec, a.in_dtype)?;
                    em.line(format!("{reg}[{u}] = {v};"));
                    em.close();
                }
                Step::Put(reg, dst, stride) => {
                    em.line(format!("let wi = rr * {stride}u + cc;"));
                    let v = kind.stored(em, &arg, &format!("{reg}[{u}]"), vec, a.in_dtype)?;
                    if vec {
                        em.line(format!("let x = {v};"));
                        for (c, comp) in ["x", "y", "z", "w"].iter().enumerate() {
                            em.line(format!("{dst}[wi + {c}u] = x.{comp};"));
                        }
                    } else {
                        em.line(format!("{dst}[wi] = {v};"));
                    }
                }
            }
            if guarded {
                em.close();
            }
            em.close();
        }
        Ok(())
    };
    let reg_decl = |em: &Emitter<'_>, op: &AttnOperand, rows: u32, cols_pad: u32, cols_ext: u64| {
        let ty = held(em, op, cols_ext).ty(vec_of(op, cols_ext));
        format!("array<{ty}, {}>", regs_of(op, rows, cols_pad, cols_ext))
    };

    for (reg, op, rows, (cols_pad, cols_ext)) in
        [("pq", &a.q, BM, (d_pad, d)), ("pk", &a.k, bn, (d_pad, d)), ("pv", &a.v, bn, (dv_pad, dv))]
    {
        let decl = format!("var {reg}: {};", reg_decl(em, op, rows, cols_pad, cols_ext));
        em.line(decl);
    }
    em.line("// the query tile, staged through sk, held as A fragments; the first key tile's loads");
    stage(em, "q", &a.q, (BM, m), (d_pad, d), Step::Fetch("pq", "m0"))?;
    stage(em, "k", &a.k, (bn, kv), (d_pad, d), Step::Fetch("pk", "0u"))?;
    stage(em, "v", &a.v, (bn, kv), (dv_pad, dv), Step::Fetch("pv", "0u"))?;
    stage(em, "q", &a.q, (BM, m), (d_pad, d), Step::Put("pq", "sk", kst))?;
    em.line("workgroupBarrier();");
    for c in 0..nq {
        em.line(format!("let qf{c} = coopLoadT<coop_mat16x16<f16, A>>(&sk[r0 * {kst}u + {}u], {kst}u);", c * 16));
    }
    let low = f32_lit(LOW);
    let fmax = em.h.need(H::FMax, false);
    em.line(format!("var o: array<f32, {}>;", nf * slots));
    em.line(format!("var mrun = {low};"));
    em.line("var lrun = 0.0f;");
    match causal_o {
        Some(o) => em.line(format!("let kend = min({kv}u, m0 + {}u);", u64::from(BM) + o as u64)),
        None => em.line(format!("let kend = {kv}u;")),
    }
    em.line("workgroupBarrier();");
    em.open(format!("for (var j0 = 0u; j0 < kend; j0 = j0 + {bn}u)"));
    stage(em, "k", &a.k, (bn, kv), (d_pad, d), Step::Put("pk", "sk", kst))?;
    stage(em, "v", &a.v, (bn, kv), (dv_pad, dv), Step::Put("pv", "sv", vst))?;
    em.line("workgroupBarrier();");
    em.line("// the next key tile's loads, in flight while this one is used");
    em.open(format!("if (j0 + {bn}u < kend)"));
    stage(em, "k", &a.k, (bn, kv), (d_pad, d), Step::Fetch("pk", &format!("j0 + {bn}u")))?;
    stage(em, "v", &a.v, (bn, kv), (dv_pad, dv), Step::Fetch("pv", &format!("j0 + {bn}u")))?;
    em.close();
    em.line("// S = Q K^T on the matrix units");
    for kb in 0..nk {
        let terms = (0..nq).map(|c| {
            (format!("qf{c}"), format!("coopLoad<coop_mat16x16<f16, B>>(&sk[{}u], {kst}u)", kb * 16 * kst + c * 16))
        });
        product_to_ss(em, "s", terms, &format!("r0 * {sst}u + {}u", kb * 16), sst);
    }
    em.line("workgroupBarrier();");
    em.line("// logits, masked, in registers, and their row maximum");
    em.line("let m = m0 + r0 + rs;");
    em.line(format!("let srow = (r0 + rs) * {sst}u + part;"));
    let per_lane = bn / parts;
    em.line(format!("var sc: array<f32, {per_lane}>;"));
    em.line(format!("var valid: array<bool, {per_lane}>;"));
    em.line(format!("var mx = {low};"));
    // Rows past `m`, keys past `kv` (only when a tile can hold some) and past the causal bound.
    let kv_bound = if kv.is_multiple_of(u64::from(bn)) { String::new() } else { format!(" && key < {kv}u") };
    let causal_bound = causal_o.map_or(String::new(), |o| format!(" && key <= m + {o}u"));
    for i in 0..per_lane {
        let c = i * parts;
        em.open("");
        em.line(format!("let key = j0 + part + {c}u;"));
        em.open(format!("if (m < {m}u{kv_bound}{causal_bound})"));
        em.line(format!("let sdot = ss[srow + {c}u];"));
        em.acc.insert(1, AccVal { name: "sdot".into(), dtype: DType::F32, vec: false });
        em.emit_closure(&[a.score], &|_| true)?;
        let (v, _) = em.value(a.score)?;
        em.line(format!("sc[{i}] = {v};"));
        em.line(format!("valid[{i}] = true;"));
        em.line(format!("mx = {fmax}(mx, {v});"));
        em.close();
        em.acc.remove(&1);
        em.close();
    }
    across_row(em, &|o| format!("mx = {fmax}(mx, subgroupShuffleXor(mx, {o}u));"));
    em.line(format!("let ms = {fmax}(mrun, mx);"));
    em.line("let alpha = exp(mrun - ms);");
    em.line("mrun = ms;");
    em.line("var ls = 0.0f;");
    em.line(format!("let prow = (r0 + rs) * {pst}u + part;"));
    for i in 0..per_lane {
        em.open("");
        em.line(format!("let p = select(0.0f, exp(sc[{i}] - ms), valid[{i}]);"));
        em.line("ls = ls + p;");
        let pr = ops::cast("p", DType::F32, a.p_dtype, false, &mut em.h).map_err(|m| em.err(m))?;
        let pr = ops::cast(&pr, a.p_dtype, DType::F32, false, &mut em.h).map_err(|m| em.err(m))?;
        em.line(format!("sp[prow + {}u] = f16({pr});", i * parts));
        em.close();
    }
    em.line("lrun = lrun * alpha + ls;");
    em.line("if (part == 0u) { sa[r0 + rs] = alpha; }");
    em.line("workgroupBarrier();");
    em.line("// O = O * alpha + P V: P V on the matrix units, added through the subgroup's rows of ss");
    for kq in 0..nk {
        em.line(format!("let pf{kq} = coopLoadT<coop_mat16x16<f16, A>>(&sp[r0 * {pst}u + {}u], {pst}u);", kq * 16));
    }
    for r in 0..slots {
        em.line(format!("let al{r} = sa[r0 + part + {}u];", r * parts));
    }
    for f0 in (0..nf).step_by(per_round as usize) {
        let round: Vec<u32> = (f0..(f0 + per_round).min(nf)).collect();
        for (slot, &f) in round.iter().enumerate() {
            let terms = (0..nk).map(|kq| {
                (
                    format!("pf{kq}"),
                    format!("coopLoadT<coop_mat16x16<f16, B>>(&sv[{}u], {vst}u)", kq * 16 * vst + f * 16),
                )
            });
            product_to_ss(em, "po", terms, &format!("r0 * {sst}u + {}u", slot * 16), sst);
        }
        em.line("workgroupBarrier();");
        for (slot, &f) in round.iter().enumerate() {
            for r in 0..slots {
                let i = f * slots + r;
                em.line(format!(
                    "o[{i}] = o[{i}] * al{r} + ss[(r0 + part + {}u) * {sst}u + {}u + rs];",
                    r * parts,
                    slot * 16
                ));
            }
        }
        em.line("workgroupBarrier();");
    }
    em.close();

    em.line("// row sums across the row's lanes, then the epilogue");
    across_row(em, &|o| format!("lrun = lrun + subgroupShuffleXor(lrun, {o}u);"));
    em.line("if (part == 0u) { sa[r0 + rs] = lrun; }");
    em.line("workgroupBarrier();");
    for r in 0..slots {
        em.open("");
        em.line(format!("let m = m0 + r0 + part + {}u;", r * parts));
        em.line(format!("let lsum = sa[r0 + part + {}u];", r * parts));
        for f in 0..nf {
            if u64::from(f * 16) >= dv {
                break;
            }
            em.open("");
            em.line(format!("let n = {}u + rs;", f * 16));
            emit_output(em, a, &store_roots_all, &format!("o[{}] / lsum", f * slots + r), false)?;
            em.close();
        }
        em.close();
    }
    Ok(body(workgroups))
}
