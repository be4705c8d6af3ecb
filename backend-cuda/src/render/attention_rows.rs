//! CUDA-core attention: the decode template (few queries, keys split over warps, 16-byte loads)
//! and the generic row template (any dtype and shape). See the `attention` module.

use sinter_core::DType;
use sinter_core::kernel::{AttentionBody, Var};

use super::attention::{
    emit_base, emit_consts, emit_epilogue, emit_score, hoist_epilogue, hoist_score, round_p, row_addr,
};
use super::emit::Emitter;
use super::ops::load_conv;
use super::types::storage;
use super::{Body, GridSplit, OuterUnit, RenderError};

/// The decode template: one block of `block` threads per flat batch handles all `m` (at most
/// [`super::attention::DECODE_M`]) queries. Rows are read as 16-byte vectors of `w` elements; a
/// group of `L` lanes (a power of two, `L * w` covering the head dimension) takes one key at a
/// time, the warp `32 / L` keys, the block `warps * 32 / L`, unrolled `U` times so `U` K and V
/// vectors per lane are in flight (`U` up to 8 for one query slot, 4 for several, as the
/// registers allow). Each lane group keeps a running (max, sum, output) per query;
/// groups combine through shuffles, warps through shared memory, and the block's threads write the
/// `m * dv` outputs through the epilogue.
///
/// With `splits > 1` (flash decoding) each head's keys are cut into `splits` consecutive chunks,
/// one block each: a block stores its combined (max, sum, unnormalized output) per query into the
/// kernel's private scratch (`[head][split][query][2 + dv]` floats, then one counter per head),
/// fences and counts itself on its head's counter; the block that brings the counter to `splits`
/// combines the splits in split order (deterministic), writes the outputs through the epilogue
/// and resets the counter (the scratch invariant: counters are zero between launches), as split-k
/// does for matmuls.
///
/// With `pack > 1` (GQA: `pack` query heads share one K and V head) a block takes the `pack`
/// consecutive flat batches of one K/V head, their `pack * m` queries held as the template's query
/// slots (slot `s`: flat batch `bh + s / m`, query `s % m`), so the group's K and V are read once
/// instead of once per query head; nothing that depends on the flat batch is hoisted out of the
/// slots then.
pub(super) fn render_decode(
    em: &mut Emitter<'_>,
    a: &AttentionBody,
    w: usize,
    block: u32,
    splits: u32,
    pack: usize,
) -> Result<Body, RenderError> {
    let p = decode_plan(em, a, w, block, splits, pack)?;
    let DecodePlan { warps, nd, nv, lanes, rq, rv, groups, mq, unroll, step, groups_n, per_q, per_head, chunk, .. } = p;
    let body = p.body;
    if body.grid[0] == 0 {
        return Ok(body);
    }
    let m_n = a.m;
    let ity = em.ity();
    let st = storage(a.in_dtype);
    let elem = |x: &str| load_conv(x, a.in_dtype);
    em.line(format!("// {}", body.summary));
    emit_consts(em);
    em.line(format!("__shared__ float red_m[{warps}][{mq}], red_l[{warps}][{mq}], red_o[{warps}][{mq}][{}];", a.dv));
    // `gi`: the block's group of `pack` flat batches; `bh`: the first of them.
    if splits > 1 {
        em.line(format!("const {ity} gi = blockIdx.x / {splits}u;"));
        em.line(format!("const unsigned sp = blockIdx.x % {splits}u; // this block's chunk of keys"));
    } else {
        em.line(format!("const {ity} gi = blockIdx.x;"));
    }
    if pack > 1 {
        em.line(format!("const {ity} bh = gi * {pack}u;"));
    } else {
        em.line(format!("const {ity} bh = gi;"));
    }
    em.line("const unsigned tid = threadIdx.x, lane = tid % 32u, warp = tid / 32u;");
    em.line(format!("const unsigned sub = lane % {lanes}u, grp = lane / {lanes}u;"));
    // (The generic kernel's bases and strides are its parameters: `attention_generic`.)
    let generic = em.attn_generic;
    let (qt, kt, vt) = if generic {
        super::attention_generic::emit_div(em);
        for name in ["q", "k", "v"] {
            super::attention_generic::emit_base(em, name);
        }
        ("unsigned", "unsigned", "unsigned")
    } else {
        (emit_base(em, "q", &a.q, a.heads), emit_base(em, "k", &a.k, a.heads), emit_base(em, "v", &a.v, a.heads))
    };
    let addr = |ty: &str, name: &str, row: &str, o: &sinter_core::kernel::AttnOperand| {
        if generic {
            format!("{name}_base + {row} * sx_{name}_sr + ch * {w}u")
        } else {
            row_addr(ty, &format!("{name}_base"), row, o.s_row, &format!("ch * {w}u"))
        }
    };
    em.line(format!("typedef {st} T;"));
    // Queries in registers (f32).
    em.line(format!("float qv[{mq}][{rq}][{w}];"));
    em.line("#pragma unroll");
    em.open(format!("for (unsigned qi = 0; qi < {mq}u; ++qi)"));
    em.line("#pragma unroll");
    em.open(format!("for (unsigned r = 0; r < {rq}u; ++r)"));
    em.line(format!("const unsigned ch = sub + r * {lanes}u;"));
    em.line("uint4 x = make_uint4(0u, 0u, 0u, 0u);");
    let qa = if pack > 1 {
        em.line(format!("const unsigned qm = qi % {m_n}u, qg = qi / {m_n}u; // the slot's query and flat batch"));
        let head = super::matmul::lit(qt, a.q.s_head as u64);
        format!("{} + qg * {head}", row_addr(qt, "q_base", "qm", a.q.s_row, &format!("ch * {w}u")))
    } else {
        addr(qt, "q", "qi", &a.q)
    };
    em.line(format!("if (ch < {nd}u) x = __ldg(reinterpret_cast<const uint4*>(a{} + ({qa})));", a.q.arg));
    em.line("#pragma unroll");
    em.line(format!(
        "for (unsigned e = 0; e < {w}u; ++e) qv[qi][r][e] = {};",
        elem("reinterpret_cast<const T*>(&x)[e]")
    ));
    em.close();
    em.close();
    em.line(format!("float mx[{mq}], l[{mq}], o[{mq}][{rv}][{w}];"));
    em.line("#pragma unroll");
    em.open(format!("for (unsigned qi = 0; qi < {mq}u; ++qi)"));
    em.line("mx[qi] = NINF; l[qi] = 0.0f;");
    em.line("#pragma unroll");
    em.open(format!("for (unsigned r = 0; r < {rv}u; ++r)"));
    em.line("#pragma unroll");
    em.line(format!("for (unsigned e = 0; e < {w}u; ++e) o[qi][r][e] = 0.0f;"));
    em.close();
    em.close();
    em.names.insert(Var::Batch, "bh".into());
    if pack == 1 && !generic {
        hoist_score(em, a, false)?;
    }
    let kend = match a.causal {
        Some(_) if generic => "min(sx_kv, sx_m + sx_co)".to_string(),
        None if generic => "sx_kv".to_string(),
        Some(_) => format!("min({}u, {}u)", a.kv, p.kend),
        None => format!("{}u", a.kv),
    };
    let kstart = if splits > 1 {
        em.line(format!("const unsigned kstart = sp * {chunk}u;"));
        em.line(format!("const unsigned kend = min({kend}, kstart + {chunk}u);"));
        "kstart + "
    } else {
        em.line(format!("const unsigned kend = {kend};"));
        ""
    };
    // The loop bound is uniform across the warp (its lane groups shuffle inside).
    em.open(format!("for (unsigned kw = {kstart}warp * {groups}u; kw < kend; kw += {}u)", step * unroll));
    em.line("const unsigned kb = kw + grp;");
    em.line(format!("uint4 kx[{unroll}][{rq}], vx[{unroll}][{rv}];"));
    em.line("#pragma unroll");
    em.open(format!("for (unsigned u = 0; u < {unroll}u; ++u)"));
    em.line(format!("const unsigned j = kb + u * {step}u;"));
    em.line("const bool in = j < kend;");
    for (name, n, r, ty, o) in [("k", nd, rq, kt, &a.k), ("v", nv, rv, vt, &a.v)] {
        em.line("#pragma unroll");
        em.open(format!("for (unsigned r = 0; r < {r}u; ++r)"));
        em.line(format!("const unsigned ch = sub + r * {lanes}u;"));
        em.line(format!("{name}x[u][r] = make_uint4(0u, 0u, 0u, 0u);"));
        let addr = addr(ty, name, "j", o);
        em.line(format!(
            "if (in && ch < {n}u) {name}x[u][r] = __ldg(reinterpret_cast<const uint4*>(a{} + ({addr})));",
            o.arg
        ));
        em.close();
    }
    em.close();
    em.names.insert(Var::Key, "key".into());
    em.line("#pragma unroll");
    em.open(format!("for (unsigned qi = 0; qi < {mq}u; ++qi)"));
    em.line(format!("float sc[{unroll}];"));
    em.line("#pragma unroll");
    em.open(format!("for (unsigned u = 0; u < {unroll}u; ++u)"));
    em.line("float dot = 0.0f;");
    em.line("#pragma unroll");
    em.open(format!("for (unsigned r = 0; r < {rq}u; ++r)"));
    em.line("#pragma unroll");
    em.line(format!(
        "for (unsigned e = 0; e < {w}u; ++e) dot = fmaf(qv[qi][r][e], {}, dot);",
        elem("reinterpret_cast<const T*>(&kx[u][r])[e]")
    ));
    em.close();
    em.line("#pragma unroll");
    em.line(format!("for (unsigned x = 1u; x < {lanes}u; x *= 2u) dot += __shfl_xor_sync(0xffffffffu, dot, x);"));
    em.decl("key", format!("const {ity} key = kb + u * {step}u;"));
    slot_names(em, m_n, pack);
    let mut guard = "key < kend".to_string();
    if let Some(o) = super::attention_generic::causal(em, a) {
        guard.push_str(&format!(" && key <= m + {o}"));
    }
    if generic {
        // The score `Acc(1) * c` with `c` the parameter (`attention_generic::plan` checked the form).
        em.line(format!("sc[u] = {guard} ? dot * sx_scale : NINF;"));
    } else {
        emit_score(em, a, "dot", "sc[u]", Some(&guard))?;
    }
    em.close();
    em.line("float mn = mx[qi];");
    em.line("#pragma unroll");
    em.line(format!("for (unsigned u = 0; u < {unroll}u; ++u) mn = fmaxf(mn, sc[u]);"));
    em.line("const float mu = mn == NINF ? 0.0f : mn;");
    em.line("const float alpha = expf(mx[qi] - mu);");
    em.line("mx[qi] = mn;");
    em.line("l[qi] *= alpha;");
    em.line("#pragma unroll");
    em.open(format!("for (unsigned r = 0; r < {rv}u; ++r)"));
    em.line("#pragma unroll");
    em.line(format!("for (unsigned e = 0; e < {w}u; ++e) o[qi][r][e] *= alpha;"));
    em.close();
    em.line("#pragma unroll");
    em.open(format!("for (unsigned u = 0; u < {unroll}u; ++u)"));
    em.line("const float p = expf(sc[u] - mu);");
    em.line("l[qi] += p;");
    let pr = round_p(em, a, "p");
    em.line(format!("const float pr = {pr};"));
    em.line("#pragma unroll");
    em.open(format!("for (unsigned r = 0; r < {rv}u; ++r)"));
    em.line("#pragma unroll");
    em.line(format!(
        "for (unsigned e = 0; e < {w}u; ++e) o[qi][r][e] = fmaf(pr, {}, o[qi][r][e]);",
        elem("reinterpret_cast<const T*>(&vx[u][r])[e]")
    ));
    em.close();
    em.close();
    em.close();
    em.close();
    // Combine the lane groups of a warp, then the warps.
    em.line("#pragma unroll");
    em.open(format!("for (unsigned qi = 0; qi < {mq}u; ++qi)"));
    em.line("#pragma unroll");
    em.open(format!("for (unsigned x = {lanes}u; x < 32u; x *= 2u)"));
    em.line("const float mo = __shfl_xor_sync(0xffffffffu, mx[qi], x);");
    em.line("const float lo = __shfl_xor_sync(0xffffffffu, l[qi], x);");
    em.line("const float mn = fmaxf(mx[qi], mo);");
    em.line("const float mu = mn == NINF ? 0.0f : mn;");
    em.line("const float f0 = expf(mx[qi] - mu), f1 = expf(mo - mu);");
    em.line("mx[qi] = mn;");
    em.line("l[qi] = l[qi] * f0 + lo * f1;");
    em.line("#pragma unroll");
    em.open(format!("for (unsigned r = 0; r < {rv}u; ++r)"));
    em.line("#pragma unroll");
    em.line(format!(
        "for (unsigned e = 0; e < {w}u; ++e) o[qi][r][e] = o[qi][r][e] * f0 + __shfl_xor_sync(0xffffffffu, o[qi][r][e], x) * f1;"
    ));
    em.close();
    em.close();
    em.open("if (grp == 0u)");
    em.line("if (sub == 0u) { red_m[warp][qi] = mx[qi]; red_l[warp][qi] = l[qi]; }");
    em.line("#pragma unroll");
    em.open(format!("for (unsigned r = 0; r < {rv}u; ++r)"));
    em.line(format!("const unsigned ch = sub + r * {lanes}u;"));
    em.open(format!("if (ch < {nv}u)"));
    em.line("#pragma unroll");
    em.line(format!("for (unsigned e = 0; e < {w}u; ++e) red_o[warp][qi][ch * {w}u + e] = o[qi][r][e];"));
    em.close();
    em.close();
    em.close();
    em.close();
    em.line("__syncthreads();");
    em.names.remove(&Var::Key);
    // `mn`, `lt`, `ot`: the `count` softmax states (max, sum, output) named by `state(i)` merged
    // in order: the block's warps, or a split decode's blocks.
    let merge = |em: &mut Emitter<'_>, count: u32, state: &dyn Fn(&str) -> [String; 3]| {
        let [m, l, o] = state("x");
        em.line("float mn = NINF;");
        em.line(format!("for (unsigned x = 0; x < {count}u; ++x) mn = fmaxf(mn, {m});"));
        em.line("const float mu = mn == NINF ? 0.0f : mn;");
        em.line("float lt = 0.0f, ot = 0.0f;");
        em.open(format!("for (unsigned x = 0; x < {count}u; ++x)"));
        em.line(format!("const float f = expf({m} - mu);"));
        em.line(format!("lt += {l} * f;"));
        em.line(format!("ot += {o} * f;"));
        em.close();
    };
    let warp_state = |col: String| {
        move |x: &str| [format!("red_m[{x}][qi]"), format!("red_l[{x}][qi]"), format!("red_o[{x}][qi][{col}]")]
    };
    let outputs = format!("for (unsigned idx = tid; idx < {}u; idx += {block}u)", mq * a.dv);
    if splits > 1 {
        em.line(format!(
            "// ---- split decode: {splits} partial states per head through the scratch; the last block combines them"
        ));
        em.line(format!("float* const part = sinter_ws + gi * {per_head}u;"));
        em.line(format!(
            "unsigned* const head_count = reinterpret_cast<unsigned*>(sinter_ws + {}u);",
            groups_n * per_head
        ));
        em.open(&outputs);
        em.line(format!("const unsigned qi = idx / {}u;", a.dv));
        merge(em, warps, &warp_state(format!("idx % {}u", a.dv)));
        em.line(format!("float* const pq = part + (sp * {mq}u + qi) * {per_q}u;"));
        em.line(format!("if (idx % {}u == 0u) {{ __stcg(&pq[0], mn); __stcg(&pq[1], lt); }}", a.dv));
        em.line(format!("__stcg(&pq[2u + idx % {}u], ot);", a.dv));
        em.close();
        super::scratch::last_block_gate(em, "head_count[gi]", splits);
    }
    if generic {
        super::attention_generic::emit_base(em, "y");
    } else if pack == 1 {
        hoist_epilogue(em, a, false)?;
    }
    em.open(&outputs);
    em.line(format!("const unsigned qi = idx / {}u;", a.dv));
    slot_names(em, m_n, pack);
    em.decl("n", format!("const {ity} n = idx % {}u;", a.dv));
    em.names.insert(Var::N, "n".into());
    if splits > 1 {
        // The splits in split order: the sum does not depend on which block finished last.
        let at = |x: &str, i: &str| format!("__ldcg(&part[({x} * {mq}u + qi) * {per_q}u + {i}])");
        merge(em, splits, &|x| [at(x, "0u"), at(x, "1u"), at(x, "2u + n")]);
    } else {
        merge(em, warps, &warp_state("n".into()));
    }
    if generic {
        let v = super::ops::store_conv("(ot / lt)", DType::F32, a.in_dtype, &mut em.h);
        em.line(format!("a3[y_base + m * sx_y_sr + n] = {v};"));
    } else {
        emit_epilogue(em, a, "ot / lt")?;
    }
    em.close();
    if splits > 1 {
        super::scratch::reset_counter(em, "head_count[gi]");
    }
    Ok(body)
}

/// The decode template's mapping and launch for a kernel, vector width, block, split and pack:
/// what both renderers follow (CUDA C++ in [`render_decode`], PTX in `ptx::decode`).
pub(super) struct DecodePlan {
    /// Warps per block.
    pub(super) warps: u32,
    /// 16-byte vectors of a query or key row.
    pub(super) nd: usize,
    /// 16-byte vectors of a value row.
    pub(super) nv: usize,
    /// Lanes per key (a power of two up to 32).
    pub(super) lanes: usize,
    /// Query (key) vectors per lane.
    pub(super) rq: usize,
    /// Value vectors (output columns) per lane.
    pub(super) rv: usize,
    /// Keys per warp at a time (`32 / lanes`).
    pub(super) groups: usize,
    /// Query slots per block (queries times packed query heads).
    pub(super) mq: usize,
    /// K and V vectors in flight per lane: the keys of one trip are `unroll` steps apart.
    pub(super) unroll: usize,
    /// Keys per block at a time (`warps * groups`).
    pub(super) step: usize,
    /// Blocks per split (one per `pack` flat batches).
    pub(super) groups_n: u64,
    /// Floats of one query's partial state in a split decode's scratch (`2 + dv`).
    pub(super) per_q: u64,
    /// Floats of one head's partial states in a split decode's scratch.
    pub(super) per_head: u64,
    /// Keys per split.
    pub(super) chunk: usize,
    /// The keys read: `kv`, or with a causal offset `o` at most `m + o` (query `m - 1` sees keys
    /// up to `m - 1 + o`).
    pub(super) kend: usize,
    /// Grid, block, strategy, summary, split and scratch (a grid of `[0, 1, 1]` and no split
    /// when there are no blocks).
    pub(super) body: Body,
}

/// The decode template's plan (see [`render_decode`]); `Err` exactly where it fails before
/// writing anything.
pub(super) fn decode_plan(
    em: &Emitter<'_>,
    a: &AttentionBody,
    w: usize,
    block: u32,
    splits: u32,
    pack: usize,
) -> Result<DecodePlan, RenderError> {
    let warps = block / 32;
    let (nd, nv) = (a.d / w, a.dv / w);
    let lanes = nd.max(nv).next_power_of_two().min(32);
    let (rq, rv) = (nd.div_ceil(lanes), nv.div_ceil(lanes));
    let groups = 32 / lanes;
    let m_n = a.m;
    // Query slots: the queries of the block's `pack` flat batches.
    let mq = m_n * pack;
    // Registers: the queries and outputs (f32), then `U` K and V vectors per lane in flight.
    let budget = (65536 / block as usize).min(255) * 3 / 4;
    let (fixed, per) = (mq * (rq + rv) * w + 40, (rq + rv) * 4);
    if fixed + per > budget {
        return Err(RenderError::InvalidTuning {
            kernel: em.k.name.clone(),
            msg: format!("block {block}: {mq} queries of {}/{} columns need more registers", a.d, a.dv),
        });
    }
    if pack == 0 || !a.heads.is_multiple_of(pack) || a.k.group != a.v.group || !a.k.group.is_multiple_of(pack) {
        return Err(em.err(format!("{pack} query heads per block: not a divisor of the K/V groups of {}", a.k.group)));
    }
    // Eight keys in flight a lane group for one query slot (b32 h32 kv4096 d128 bf16 at 256
    // threads: 0.4766 ms against 0.4800 at four, and against the tensor-core tile's 0.4772; H200,
    // BENCHMARKS.md session 32 call 2), four with several slots (measured there, session 21).
    let cap = if mq == 1 { 8 } else { 4 };
    let unroll = ((budget - fixed) / per).clamp(1, cap);
    let bh_n = (a.batch * a.heads) as u64;
    // Blocks per split: one per `pack` flat batches.
    let groups_n = bh_n / pack as u64;
    let shared = (warps as usize * mq * (a.dv + 2) * 4) as u32;
    if shared > 48 * 1024 {
        return Err(RenderError::InvalidTuning {
            kernel: em.k.name.clone(),
            msg: format!("block {block}: {shared} bytes of shared memory for the decode combine"),
        });
    }
    let blocks = if mq == 0 { 0 } else { groups_n * u64::from(splits) };
    // Scratch of a split decode: per head, split and query the max, the sum and dv outputs.
    let per_q = (a.dv + 2) as u64;
    let per_head = u64::from(splits) * mq as u64 * per_q;
    let scratch = groups_n * per_head * 4 + groups_n * 4;
    if splits > 1 && scratch > 256 << 20 {
        return Err(RenderError::InvalidTuning {
            kernel: em.k.name.clone(),
            msg: format!("split_k {splits}: {scratch} bytes of scratch for the partial states"),
        });
    }
    let chunk = a.kv.div_ceil(splits as usize);
    // (The generic kernel's text holds no extent: `attention_generic`.)
    let extents =
        if em.attn_generic { "run-time extents".to_string() } else { format!("{bh_n} heads x m {m_n} x kv {} ", a.kv) };
    let summary = format!(
        "decode attention {extents}, d {} dv {} ({}){}: {}, {warps} warps, \
         {lanes} lanes x {w} elements per key, {groups} keys per warp, unrolled {unroll}",
        a.d,
        a.dv,
        a.in_dtype,
        if pack > 1 { format!(", {pack} query heads per block sharing their K and V") } else { String::new() },
        if splits > 1 {
            format!("{splits} blocks per head of {chunk} keys each, the last to finish combining them")
        } else {
            "a block per head".to_string()
        }
    );
    let strategy = format!(
        "attention decode block {block}{}{}",
        if splits > 1 { format!(" split {splits}") } else { String::new() },
        if pack > 1 { format!(" pack {pack}") } else { String::new() }
    );
    let body = match Body::launch(blocks, block, strategy, summary, None, 0) {
        Ok(b) if splits > 1 => b
            .with_split(GridSplit { unit: OuterUnit::AttentionBatch, per: pack as u64, inner: u64::from(splits) })
            .with_scratch(scratch),
        Ok(b) => b.with_split(GridSplit { unit: OuterUnit::AttentionBatch, per: pack as u64, inner: 1 }),
        Err(empty) => *empty,
    };
    let kend = a.causal.map_or(a.kv, |o| m_n.saturating_add(o).min(a.kv));
    let step = warps as usize * groups;
    Ok(DecodePlan {
        warps,
        nd,
        nv,
        lanes,
        rq,
        rv,
        groups,
        mq,
        unroll,
        step,
        groups_n,
        per_q,
        per_head,
        chunk,
        kend,
        body,
    })
}

/// Names the query (`m`) and, with `pack > 1`, the flat batch (`bhq`) of query slot `qi` inside a
/// loop over the slots.
fn slot_names(em: &mut Emitter<'_>, m_n: usize, pack: usize) {
    let ity = em.ity();
    if pack > 1 {
        em.decl("m", format!("const {ity} m = qi % {m_n}u;"));
        em.decl("bhq", format!("const {ity} bhq = bh + qi / {m_n}u;"));
        em.names.insert(Var::Batch, "bhq".into());
    } else {
        em.decl("m", format!("const {ity} m = qi;"));
    }
    em.names.insert(Var::M, "m".into());
}

/// The generic row template: a warp per query row (`block / 32` rows of one flat batch per
/// block, `ceil(dv / 256)` column chunks on the grid). Per 32 keys, lane `j` computes key `j`'s
/// dot product (f32, in the interpreter's order: `fmaf` over the head dimension) and score; the
/// warp's maximum and sum by shuffles; then lane `n` accumulates output columns `n + 32 r` over
/// the 32 keys, each probability broadcast by a shuffle. Keys past the causal bound are not read.
pub(super) fn render_rows(em: &mut Emitter<'_>, a: &AttentionBody, block: u32) -> Result<Body, RenderError> {
    let warps = block / 32;
    let bh_n = (a.batch * a.heads) as u64;
    let chunk = a.dv.clamp(1, 256);
    let rv = chunk.div_ceil(32);
    let nch = a.dv.div_ceil(chunk).max(1) as u64;
    let tiles_m = (a.m as u64).div_ceil(u64::from(warps));
    let blocks = if a.dv == 0 { 0 } else { bh_n * tiles_m * nch };
    let summary = format!(
        "row attention {bh_n} heads x m {} x kv {}, d {} dv {} ({}): a warp per query row, {warps} rows per block, \
         {nch} column chunks of {chunk}, 32 keys per step",
        a.m, a.kv, a.d, a.dv, a.in_dtype
    );
    let body = match Body::launch(blocks, block, format!("attention rows block {block}"), summary, None, 0) {
        Ok(b) => b.with_split(GridSplit { unit: OuterUnit::AttentionBatch, per: 1, inner: tiles_m * nch }),
        Err(empty) => return Ok(*empty),
    };
    if blocks > i32::MAX as u64 {
        return Err(em.err(format!("{blocks} blocks exceed the grid limit")));
    }
    let ity = em.ity();
    let elem = |x: &str| {
        let v = load_conv(x, a.in_dtype);
        match a.in_dtype {
            DType::F32 | DType::F16 | DType::BF16 => v,
            DType::Bool => format!("({v} ? 1.0f : 0.0f)"),
            DType::I64 | DType::U64 => format!("(float)(double)({v})"),
            _ => format!("(float)({v})"),
        }
    };
    em.line(format!("// {}", body.summary));
    emit_consts(em);
    em.line("const unsigned lane = threadIdx.x % 32u, warp = threadIdx.x / 32u;");
    em.line(format!("const unsigned ch = blockIdx.x % {nch}u;"));
    em.line(format!("const unsigned rest = blockIdx.x / {nch}u;"));
    em.line(format!("const {ity} bh = rest / {tiles_m}u;"));
    em.decl("m", format!("const {ity} m = rest % {tiles_m}u * {warps}u + warp;"));
    em.line(format!("if (m >= {}u) return; // a whole warp: no barrier follows", a.m));
    em.line(format!("const unsigned n0 = ch * {chunk}u;"));
    let qt = emit_base(em, "q", &a.q, a.heads);
    let kt = emit_base(em, "k", &a.k, a.heads);
    let vt = emit_base(em, "v", &a.v, a.heads);
    em.line(format!("const {qt} q_row = {};", row_addr(qt, "q_base", "m", a.q.s_row, "0u")));
    em.names.insert(Var::Batch, "bh".into());
    em.names.insert(Var::M, "m".into());
    hoist_score(em, a, true)?;
    match a.causal {
        Some(o) => em.line(format!("const unsigned kend = min({}u, (unsigned)m + {}u);", a.kv, o + 1)),
        None => em.line(format!("const unsigned kend = {}u;", a.kv)),
    }
    em.line(format!("float mx = NINF, l = 0.0f, o[{rv}];"));
    em.line("#pragma unroll");
    em.line(format!("for (unsigned r = 0; r < {rv}u; ++r) o[r] = 0.0f;"));
    em.open("for (unsigned kb = 0; kb < kend; kb += 32u)");
    em.decl("key", format!("const {ity} key = kb + lane;"));
    em.names.insert(Var::Key, "key".into());
    em.line("float sc = NINF;");
    em.open("if (key < kend)");
    em.line(format!("const {kt} k_row = {};", row_addr(kt, "k_base", "key", a.k.s_row, "0u")));
    em.line("float dot = 0.0f;");
    em.line("#pragma unroll 4");
    em.line(format!(
        "for (unsigned c = 0; c < {}u; ++c) dot = fmaf({}, {}, dot);",
        a.d,
        elem(&format!("a{}[q_row + c]", a.q.arg)),
        elem(&format!("a{}[k_row + c]", a.k.arg))
    ));
    emit_score(em, a, "dot", "sc", None)?;
    em.close();
    em.line("float cm = sc;");
    em.line("#pragma unroll");
    em.line("for (unsigned x = 16u; x > 0u; x /= 2u) cm = fmaxf(cm, __shfl_xor_sync(0xffffffffu, cm, x));");
    em.line("const float mn = fmaxf(mx, cm);");
    em.line("const float mu = mn == NINF ? 0.0f : mn;");
    em.line("const float alpha = expf(mx - mu);");
    em.line("mx = mn;");
    em.line("const float p = expf(sc - mu);");
    em.line("float ps = p;");
    em.line("#pragma unroll");
    em.line("for (unsigned x = 16u; x > 0u; x /= 2u) ps += __shfl_xor_sync(0xffffffffu, ps, x);");
    em.line("l = l * alpha + ps;");
    let pr = round_p(em, a, "p");
    em.line(format!("const float pr = {pr};"));
    em.line("#pragma unroll");
    em.line(format!("for (unsigned r = 0; r < {rv}u; ++r) o[r] *= alpha;"));
    em.line("const unsigned nk = min(32u, kend - kb);");
    em.open("for (unsigned jj = 0; jj < nk; ++jj)");
    em.line("const float pj = __shfl_sync(0xffffffffu, pr, jj);");
    em.line(format!("const {vt} v_row = {};", row_addr(vt, "v_base", "kb + jj", a.v.s_row, "0u")));
    em.line("#pragma unroll");
    em.open(format!("for (unsigned r = 0; r < {rv}u; ++r)"));
    em.line("const unsigned n = n0 + lane + r * 32u;");
    em.line(format!("if (n < {}u) o[r] = fmaf(pj, {}, o[r]);", a.dv, elem(&format!("a{}[v_row + n]", a.v.arg))));
    em.close();
    em.close();
    em.close();
    em.names.remove(&Var::Key);
    hoist_epilogue(em, a, true)?;
    em.line("#pragma unroll");
    em.open(format!("for (unsigned r = 0; r < {rv}u; ++r)"));
    em.decl("n", format!("const {ity} n = n0 + lane + r * 32u;"));
    em.names.insert(Var::N, "n".into());
    em.open(format!("if (n < {}u && n < n0 + {chunk}u)", a.dv));
    emit_epilogue(em, a, "o[r] / l")?;
    em.close();
    em.close();
    Ok(body)
}
