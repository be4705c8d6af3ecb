//! Tensor-core attention (FlashAttention-2 on `mma.sync` m16n8k16, or on `wgmma` with the parts in
//! `attention_wgmma`): see the `attention` module.
//!
//! A block owns `bm` query rows of one flat batch (causal: the longest row tiles of a section of
//! flat batches first, [`causal_section`]); warp `w` owns rows `w * 16 * mi ..` as `mi` m16 fragments. The Q tile is copied
//! into shared memory once (`cp.async`, zero rows past `m`) and its A fragments read with
//! `ldmatrix` into registers (or re-read from shared memory each step when registers are short).
//! K and V tiles of `bn` keys stream through a ring of `stages` buffers as in the `mma` template
//! (one barrier per step), zero rows past `kv`; K fragments by `ldmatrix`, V by `ldmatrix.trans`.
//!
//! Per step: S = Q Kᵀ (f32), the score per element (its `M`, `Key`), masked to `-inf` past `kv`,
//! `m` and the causal bound on tiles that cross them (a second, unguarded copy of the score code
//! runs on the others); the row maximum over the quad (`shfl.xor` 1, 2), `p = exp2(s log2e - max
//! log2e)` with a zero reference while the maximum is `-inf`, the running sum per thread (reduced
//! over the quad at the end), O rescaled; P rounded to bf16/f16 in registers is the A operand of
//! O += P V (the m16n8 accumulator layout of two adjacent key fragments is the m16k16 A layout).
//! Causal blocks stop at the last key tile their last row sees.

use sinter_core::DType;
use sinter_core::kernel::{AttentionBody, ExprId, Var};

use super::analysis::store_roots;
use super::attention::{
    AttnEngine, AttnTile, base_type, emit_base, emit_consts, emit_score, folded_scale, hoist_epilogue, hoist_score,
    q_in_regs, row_addr, tc_shared, tc_total_shared,
};
use super::emit::{Emitter, emit_pair};
use super::prelude::H;
use super::{Body, CudaCaps, GridSplit, OuterUnit, RenderError, Tuning};

/// Renders `a` on tensor cores with `tile` (checked by the caller).
pub(super) fn render(
    em: &mut Emitter<'_>,
    a: &AttentionBody,
    tile: &AttnTile,
    t: &Tuning,
    caps: &CudaCaps,
) -> Result<Body, RenderError> {
    let threads = tile.threads();
    em.check_block(t, threads, tile)?;
    let AttnTile { bm, bn, warps, stages, .. } = *tile;
    let wgmma = tile.wgmma();
    let mi = tile.mi();
    let (m, kv, d, dv) = (a.m as u64, a.kv as u64, a.d as u32, a.dv as u32);
    let bh_n = (a.batch * a.heads) as u64;
    let tiles_m = m.div_ceil(u64::from(bm));
    let blocks = tiles_m * bh_n;
    let (qbytes, kbytes, stage) = tc_shared(tile, a);
    let shared = u32::try_from(tc_total_shared(tile, a)).map_err(|_| em.err("attention tile shared memory"))?;
    let qregs = !wgmma && q_in_regs(tile, a);
    let pingpong = tile.warp_specialized();
    let tma = tile.tma();
    let persistent = tile.persistent_blocks();
    let strategy = if pingpong {
        let kind = if persistent {
            "wgmma-tma-persistent"
        } else if tma {
            "wgmma-tma"
        } else {
            "wgmma-pp"
        };
        format!("attention {kind} {bm}x{bn} wg{}+1 s{stages}", bm / 64)
    } else if wgmma {
        let ov = if tile.engine == AttnEngine::WgmmaOverlap { "-ov" } else { "" };
        format!("attention wgmma{ov} {bm}x{bn} wg{} s{stages}", warps / 4)
    } else {
        format!("attention mma {bm}x{bn} w{warps} s{stages}")
    };
    // The generic kernel's text is the same for every shape: no extents in it.
    let extents =
        if em.attn_generic { "run-time extents".to_string() } else { format!("{bh_n} heads x m {m} x kv {kv}") };
    let summary = format!(
        "tensor-core attention {extents}, d {d} dv {dv} ({} -> f32, {}), tile {bm}x{bn}, \
         {} warps of {} rows{}, {stages} stages ({shared} bytes), Q in {}{}{}",
        a.in_dtype,
        if wgmma { "wgmma m64nNk16, 128-byte swizzled tiles" } else { "mma.sync m16n8k16" },
        tile.row_warps(),
        16 * mi,
        if tma {
            " and a TMA producer (mbarriers, ping-pong)"
        } else if pingpong {
            " and a producer warpgroup (mbarriers, ping-pong)"
        } else {
            ""
        },
        if qregs { "registers" } else { "shared memory" },
        match a.causal {
            Some(_) if em.attn_generic => ", causal".to_string(),
            Some(o) => format!(", causal +{o}"),
            None => String::new(),
        },
        if em.attn_generic { String::new() } else { format!(", {blocks} blocks") },
    );
    let min_blocks = if pingpong { super::attention_pingpong::min_blocks(bm / 64) } else { 1 };
    let maps = if tma { super::attention_pingpong::kv_maps(a, tile).map_err(|e| em.err(e))? } else { Vec::new() };
    // A persistent tile: as many blocks as the SMs keep resident, looping over the work tiles
    // (no grid split: every launch covers the compiled extent).
    let launched =
        if persistent { blocks.min(u64::from(caps.sm_count.max(1)) * u64::from(min_blocks)) } else { blocks };
    let body = match Body::launch(launched, threads, strategy, summary, Some(min_blocks), shared) {
        Ok(b) if persistent => b.with_scratch(super::attention_pingpong::SCHED_SCRATCH).with_tensor_maps(maps),
        Ok(b) => {
            let per = causal_section(a);
            b.with_split(GridSplit { unit: OuterUnit::AttentionBatch, per, inner: per * tiles_m })
                .with_tensor_maps(maps)
        }
        Err(empty) => return Ok(*empty),
    };
    em.h.need(H::Mma);
    if wgmma {
        em.h.need(H::Wgmma);
        em.h.need(H::WgmmaMma { n: bn, rs: false, trans_b: false, f16: a.in_dtype == DType::F16 });
        em.h.need(H::WgmmaMma { n: dv, rs: true, trans_b: true, f16: a.in_dtype == DType::F16 });
    }
    if pingpong {
        em.h.need(H::WarpSpec);
    }
    if tma {
        em.h.need(H::Tma);
    }
    if persistent {
        em.h.need(H::SharedWord);
    }
    let ity = em.ity();
    let f16 = a.in_dtype == DType::F16;
    let mma = if f16 { "sinter_mma<true>" } else { "sinter_mma<false>" };
    let pack = super::half::pack2(a.in_dtype);
    em.line(format!("// {}", body.summary));
    em.line(format!("extern __shared__ __align__({}) unsigned char smem[];", if wgmma { 1024 } else { 128 }));
    emit_consts(em);
    em.line("// 2^x, flushing subnormal results to 0 (probabilities under 2^-126 round to 0 in bf16/f16 anyway)");
    em.line("auto sinter_ex2 = [](float x) { float y; asm(\"ex2.approx.ftz.f32 %0, %1;\" : \"=f\"(y) : \"f\"(x)); return y; };");
    let fold = folded_scale(em.k, a);
    if em.attn_generic {
        em.line("const float SL = sx_sl; // log2(e) times the score's scale: exp(x) = 2^(x SL)");
        super::attention_generic::emit_div(em);
    } else {
        let sl = super::types::float_lit((fold.unwrap_or(1.0) * std::f64::consts::LOG2_E) as f32);
        em.line(format!(
            "const float SL = {sl}; // log2(e){}: exp(x) = 2^(x SL)",
            if fold.is_some() { " times the score's scale, folded in" } else { "" }
        ));
    }
    if !persistent {
        tile_rows(em, a, tile, "blockIdx.x");
    }
    em.line("const unsigned tid = threadIdx.x, lane = tid % 32u, warp = tid / 32u;");
    em.line(format!("const unsigned wm0 = warp * {}u; // the warp's rows in the tile", 16 * mi));
    if wgmma {
        em.line("const unsigned g = lane / 4u, t4 = lane % 4u;");
    } else {
        em.line("const unsigned g = lane / 4u, t4 = lane % 4u, mat = lane / 8u, r8 = lane % 8u;");
    }
    // (A persistent tile declares its bases per work tile.)
    let (qt, kt, vt) = if persistent {
        (base_type(em, &a.q), base_type(em, &a.k), base_type(em, &a.v))
    } else {
        tile_bases(em, a, tile)
    };
    let qrow = d + 8;
    if wgmma {
        em.line("// the swizzle pattern repeats every 1024 bytes: tiles start on that period");
        em.line("const unsigned s_base = ((unsigned)__cvta_generic_to_shared(smem) + 1023u) & ~1023u;");
        em.line("const unsigned wg = warp / 4u; // the warpgroup, owning rows wg * 64 .. of the tile");
    } else {
        em.line("const unsigned s_base = (unsigned)__cvta_generic_to_shared(smem);");
    }
    em.line(format!("// Q at 0 ({qbytes} bytes); stage s: K at {qbytes} + s * {stage}, V {kbytes} after it"));
    if pingpong {
        super::attention_pingpong::prologue(em, a, tile, (qt, kt, vt));
    } else {
        q_and_kv_prologue(em, a, tile, (qt, kt, vt));
    }
    let d16 = d / 16;
    let q_frag = |em: &mut Emitter<'_>, dst: &str, kk: &str| {
        em.line(format!("const unsigned row = wm0 + i * 16u + mat % 2u * 8u + r8, col = {kk} * 16u + mat / 2u * 8u;"));
        em.line(format!("sinter_ldsm_x4<false>({dst}, s_base + (row * {qrow}u + col) * 2u);"));
    };
    if qregs {
        em.line(format!("unsigned qf[{mi}][{d16}][4];"));
        em.line("#pragma unroll");
        em.open(format!("for (unsigned i = 0; i < {mi}u; ++i)"));
        em.line("#pragma unroll");
        em.open(format!("for (unsigned kk = 0; kk < {d16}u; ++kk)"));
        q_frag(em, "qf[i][kk]", "kk");
        em.close();
        em.close();
    }
    let dv8 = dv / 8;
    em.line(format!("float o[{mi}][{dv8}][4];"));
    em.line(format!("float mx[{mi}][2], l[{mi}][2];"));
    em.line("#pragma unroll");
    em.open(format!("for (unsigned i = 0; i < {mi}u; ++i)"));
    em.line("mx[i][0] = NINF; mx[i][1] = NINF; l[i][0] = 0.0f; l[i][1] = 0.0f;");
    em.line("#pragma unroll");
    em.open(format!("for (unsigned j = 0; j < {dv8}u; ++j)"));
    em.line("o[i][j][0] = 0.0f; o[i][j][1] = 0.0f; o[i][j][2] = 0.0f; o[i][j][3] = 0.0f;");
    em.close();
    em.close();
    em.names.insert(Var::Batch, "bh".into());
    if fold.is_none() {
        hoist_score(em, a, false)?;
    }
    if pingpong {
        super::attention_pingpong::consumer_loop(em, a, tile, fold, pack)?;
    } else if tile.engine == AttnEngine::WgmmaOverlap {
        super::attention_wgmma::overlapped_loop(em, a, tile, fold, (kt, vt), pack)?;
    } else {
        plain_loop(em, a, tile, (fold, qregs), (kt, vt), (mma, pack))?;
    }
    if !persistent {
        em.line("sinter_cp_async_wait<0>();");
    }
    // Epilogue.
    em.line("// ---- epilogue, per output element: rows g, g + 8 and columns 2t, 2t + 1 of each fragment");
    em.names.remove(&Var::Key);
    if em.attn_generic {
        super::attention_generic::emit_base(em, "y");
    } else {
        hoist_epilogue(em, a, false)?;
    }
    em.line("#pragma unroll");
    em.open(format!("for (unsigned i = 0; i < {mi}u; ++i)"));
    em.line("#pragma unroll");
    em.open("for (unsigned h = 0; h < 2u; ++h)");
    em.line("float lt = l[i][h];");
    em.line("lt += __shfl_xor_sync(0xffffffffu, lt, 1);");
    em.line("lt += __shfl_xor_sync(0xffffffffu, lt, 2);");
    // One division per row, then products (a sum of 0, a row without keys: 0 * inf = NaN, as 0 / 0).
    em.line("const float rl = 1.0f / lt;");
    em.decl("m", format!("const {ity} m = m0 + wm0 + i * 16u + h * 8u + g;"));
    if em.attn_generic {
        super::attention_generic::epilogue(em, a, dv8)?;
        em.close();
        em.close();
        return Ok(close_tile(em, tile, body));
    }
    let m_guard = !m.is_multiple_of(u64::from(bm));
    if m_guard {
        em.open(format!("if (m < {m}u)"));
    }
    hoist_epilogue(em, a, true)?;
    // Each thread's two adjacent columns as one group of two lanes (`j` the lane): contiguous
    // stores (and loads of a fused epilogue) become one vector access of both. Where a row's
    // stores can go 16 bytes at a time, the pairs are packed and exchanged in the quad first
    // (`quad_store`: every lane runs it, so not under a row guard).
    let quad = if m_guard { None } else { super::quad_store::eligible(em, &a.stores, dv8) };
    if quad.is_some() {
        em.line(format!("unsigned pk[{dv8}];"));
    }
    em.line("#pragma unroll");
    em.open(format!("for (unsigned jf = 0; jf < {dv8}u; ++jf)"));
    em.decl("n0", format!("const {ity} n0 = jf * 8u + t4 * 2u;"));
    let roots: Vec<ExprId> = a.stores.iter().flat_map(store_roots).collect();
    let packed = quad.map(|_| "pk[jf]");
    emit_pair(em, &roots, &a.stores, "n0", "(o[i][jf][h * 2u + j] * rl)".into(), packed)?;
    em.close();
    if let Some(s) = quad {
        super::quad_store::emit(em, s, "pk", dv8)?;
    }
    if m_guard {
        em.close();
    }
    em.close();
    em.close();
    Ok(close_tile(em, tile, body))
}

/// The end of the tile after its epilogue: a persistent tile's next work tile, the consumers'
/// branch of a warp-specialized one.
fn close_tile(em: &mut Emitter<'_>, tile: &AttnTile, body: Body) -> Body {
    if tile.persistent_blocks() {
        super::attention_pingpong::next_work_tile(em);
    }
    if tile.warp_specialized() {
        em.close(); // the consumers' branch
    }
    body
}

/// Bytes of keys and values the flat batches of one causal section may hold together in L2
/// ([`causal_section`]).
const SECTION_BYTES: u64 = 8 << 20;

/// Flat batches per section of a causal kernel's work order (1 without a mask). Causal row
/// tiles differ in cost (the last has every key tile, the first one), and blocks take work tiles
/// in index order (the hardware's dispatch, or a persistent block's counter), so the order decides
/// the tail: the longest tiles of *every* flat batch first leaves only one-key-tile work for the
/// end (longest processing time first), while one flat batch after another (longest first within
/// each) ends on a mix of long and short tiles. A greedy 132-worker simulation of b8 h16 s2048
/// d128 (16 row tiles of 1 to 16 key tiles each) puts the last block's finish 6.9% past the mean
/// with batches one after another and 1.6% with sections of 8 (1.0% with one section of all). The
/// section keeps the blocks in flight on a few batches, whose keys and values stay in L2 while
/// all their row tiles run. The count divides `heads`, so a section never straddles an outer
/// batch and a grid cut at a smaller dynamic batch ([`GridSplit`] `per` the section) covers whole
/// sections.
pub(super) fn causal_section(a: &AttentionBody) -> u64 {
    if a.causal.is_none() {
        return 1;
    }
    let per = (a.kv * (a.d + a.dv) * a.in_dtype.size_bytes()) as u64;
    let heads = a.heads.max(1) as u64;
    (1..=heads).rev().find(|s| heads.is_multiple_of(*s) && s * per <= SECTION_BYTES).unwrap_or(1)
}

/// The work tile's coordinates from its index `w` (`blockIdx.x`, or a persistent block's
/// current tile): `mt` (the row tile), `bh` (the flat batch) and `m0` (its first row). Without a
/// mask, one flat batch's row tiles after another's; causal, sections of [`causal_section`] flat
/// batches, each running its batches' last (longest) row tiles first, then the next row tile of
/// each, and so on.
pub(super) fn tile_rows(em: &mut Emitter<'_>, a: &AttentionBody, tile: &AttnTile, w: &str) {
    let tiles_m = (a.m as u64).div_ceil(u64::from(tile.bm));
    let sec = causal_section(a);
    let ity = em.ity();
    let (mt, bh) = match (a.causal.is_some(), sec) {
        _ if em.attn_generic => super::attention_generic::tile_rows(a, w),
        (false, _) => (format!("{w} % {tiles_m}u"), format!("{w} / {tiles_m}u")),
        (true, 1) => (format!("{} - {w} % {tiles_m}u", tiles_m - 1), format!("{w} / {tiles_m}u")),
        (true, s) => (
            format!("{} - {w} % {}u / {s}u", tiles_m - 1, s * tiles_m),
            format!("{w} / {}u * {s}u + {w} % {s}u", s * tiles_m),
        ),
    };
    em.decl("mt", format!("const unsigned mt = {mt};"));
    em.decl("bh", format!("const {ity} bh = {bh};"));
    em.decl("m0", format!("const unsigned m0 = mt * {}u;", tile.bm));
}

/// The operands' bases of flat batch `bh` and `n_tiles` ([`tile_key_tiles`]); returns the bases'
/// index types (Q, K, V).
pub(super) fn tile_bases(
    em: &mut Emitter<'_>,
    a: &AttentionBody,
    tile: &AttnTile,
) -> (&'static str, &'static str, &'static str) {
    let types = if em.attn_generic {
        for name in ["q", "k", "v"] {
            super::attention_generic::emit_base(em, name);
        }
        ("unsigned", "unsigned", "unsigned")
    } else {
        (emit_base(em, "q", &a.q, a.heads), emit_base(em, "k", &a.k, a.heads), emit_base(em, "v", &a.v, a.heads))
    };
    tile_key_tiles(em, a, tile);
    types
}

/// `n_tiles`: the key tiles of rows `m0 ..` (up to the last row's causal bound).
pub(super) fn tile_key_tiles(em: &mut Emitter<'_>, a: &AttentionBody, tile: &AttnTile) {
    let (bm, bn) = (tile.bm, tile.bn);
    let ktiles = if em.attn_generic {
        format!("(sx_kv + {}u) / {bn}u", bn - 1)
    } else {
        format!("{}u", (a.kv as u64).div_ceil(u64::from(bn)))
    };
    let m = super::attention_generic::m(em, a);
    match super::attention_generic::causal(em, a) {
        Some(o) => em.line(format!(
            "const unsigned n_tiles = min({ktiles}, (min(m0 + {bm}u, {m}) - 1u + {o}) / {bn}u + 1u); // the last row's keys"
        )),
        None => em.line(format!("const unsigned n_tiles = {ktiles};")),
    }
}

/// The Q tile and the first `stages - 1` key tiles copied by every thread (one `cp.async` group
/// each), waited for through Q and the first key tile, then a barrier.
fn q_and_kv_prologue(em: &mut Emitter<'_>, a: &AttentionBody, tile: &AttnTile, (qt, kt, vt): (&str, &str, &str)) {
    let AttnTile { bm, stages, .. } = *tile;
    let (wgmma, threads, m, d) = (tile.wgmma(), tile.threads(), a.m as u64, a.d as u32);
    let qrow = d + 8;
    // Q tile.
    let (qunits, d8) = (bm * d / 8, d / 8);
    em.open("");
    em.line("#pragma unroll");
    em.open(format!("for (unsigned l = 0; l < {}u; ++l)", qunits.div_ceil(threads)));
    em.line(format!("const unsigned e = tid + l * {threads}u;"));
    if !qunits.is_multiple_of(threads) {
        em.open(format!("if (e < {qunits}u)"));
    }
    em.line(format!("const unsigned r = e / {d8}u, c = e % {d8}u * 8u;"));
    em.line(format!("const unsigned valid = m0 + r < {m}u ? 16u : 0u;"));
    let qa = row_addr(qt, "q_base", "m0 + r", a.q.s_row, "c");
    em.line(format!("const {qt} off = valid ? {qa} : 0u;"));
    let qdst = if wgmma { format!("sinter_swz128(r, c, {bm}u)") } else { format!("(r * {qrow}u + c) * 2u") };
    em.line(format!("sinter_cp_async16(s_base + {qdst}, &a{}[off], valid);", a.q.arg));
    if !qunits.is_multiple_of(threads) {
        em.close();
    }
    em.close();
    em.line("sinter_cp_async_commit();");
    em.close();
    em.line(format!("// prologue: the first {} key tiles in flight", stages - 1));
    em.line("#pragma unroll");
    em.open(format!("for (unsigned s = 0; s < {}u; ++s)", stages - 1));
    em.open("if (s < n_tiles)");
    load_kv(em, a, tile, (kt, vt), "s", "s");
    em.close();
    em.line("sinter_cp_async_commit();");
    em.close();
    em.line(format!("sinter_cp_async_wait<{}>();", stages - 1));
    if wgmma {
        em.line("sinter_fence_async_shared();");
    }
    em.line("__syncthreads(); // Q landed");
}

/// The loop over key tiles of [`AttnEngine::MmaSync`] and [`AttnEngine::Wgmma`]: per tile, S, the
/// scores and the softmax, O += P V, each waited for.
fn plain_loop(
    em: &mut Emitter<'_>,
    a: &AttentionBody,
    tile: &AttnTile,
    (fold, qregs): (Option<f64>, bool),
    (kt, vt): (&str, &str),
    (mma, pack): (&str, &str),
) -> Result<(), RenderError> {
    let AttnTile { bn, stages, .. } = *tile;
    let wgmma = tile.wgmma();
    let mi = tile.mi();
    let (d, dv) = (a.d as u32, a.dv as u32);
    let (qbytes, kbytes, stage) = tc_shared(tile, a);
    let (d16, bn8) = (d / 16, bn / 8);
    let (qrow, krow, vrow) = (d + 8, d + 8, dv + 8);
    let q_frag = |em: &mut Emitter<'_>, dst: &str, kk: &str| {
        em.line(format!("const unsigned row = wm0 + i * 16u + mat % 2u * 8u + r8, col = {kk} * 16u + mat / 2u * 8u;"));
        em.line(format!("sinter_ldsm_x4<false>({dst}, s_base + (row * {qrow}u + col) * 2u);"));
    };
    em.open("for (unsigned kt = 0; kt < n_tiles; ++kt)");
    em.line(format!("sinter_cp_async_wait<{}>();", stages - 2));

    if wgmma {
        em.line("sinter_fence_async_shared();");
    }
    em.line("__syncthreads(); // tile kt landed; every warp is done with tile kt - 1's buffer");
    em.open("");
    em.line(format!("const unsigned nk = kt + {}u;", stages - 1));
    em.open("if (nk < n_tiles)");
    load_kv(em, a, tile, (kt, vt), &format!("nk % {stages}u"), "nk");
    em.close();
    em.line("sinter_cp_async_commit();");
    em.close();
    em.line(format!("const unsigned sk = s_base + {qbytes}u + kt % {stages}u * {stage}u, sv = sk + {kbytes}u;"));
    // S = Q K^T.
    em.line(format!("float s[{mi}][{bn8}][4];"));
    if wgmma {
        super::attention_wgmma::qk(em, a, tile);
    } else {
        em.line("#pragma unroll");
        em.open(format!("for (unsigned i = 0; i < {mi}u; ++i)"));
        em.line("#pragma unroll");
        em.open(format!("for (unsigned j = 0; j < {bn8}u; ++j)"));
        em.line("s[i][j][0] = 0.0f; s[i][j][1] = 0.0f; s[i][j][2] = 0.0f; s[i][j][3] = 0.0f;");
        em.close();
        em.close();
        em.line("#pragma unroll");
        em.open(format!("for (unsigned kk = 0; kk < {d16}u; ++kk)"));
        let qf = if qregs {
            "qf[i][kk]"
        } else {
            em.line(format!("unsigned fa[{mi}][4];"));
            em.line("#pragma unroll");
            em.open(format!("for (unsigned i = 0; i < {mi}u; ++i)"));
            q_frag(em, "fa[i]", "kk");
            em.close();
            "fa[i]"
        };
        em.line("#pragma unroll");
        em.open(format!("for (unsigned j = 0; j < {}u; ++j)", bn / 16));
        em.line("unsigned r[4];");
        em.line("const unsigned row = j * 16u + mat / 2u * 8u + r8, col = kk * 16u + mat % 2u * 8u;");
        em.line(format!("sinter_ldsm_x4<false>(r, sk + (row * {krow}u + col) * 2u);"));
        em.line("#pragma unroll");
        em.open(format!("for (unsigned i = 0; i < {mi}u; ++i)"));
        em.line(format!("{mma}(s[i][2u * j], {qf}, r[0], r[1]);"));
        em.line(format!("{mma}(s[i][2u * j + 1u], {qf}, r[2], r[3]);"));
        em.close();
        em.close();
        em.close();
    }
    emit_scores(em, a, tile, fold, "kt")?;
    emit_softmax(em, tile, a.dv as u32, false);
    // O += P V.
    if wgmma {
        super::attention_wgmma::pv(em, a, tile, pack);
    } else {
        em.line("#pragma unroll");
        em.open(format!("for (unsigned kk = 0; kk < {}u; ++kk)", bn / 16));
        em.line(format!("unsigned pf[{mi}][4];"));
        em.line("#pragma unroll");
        em.open(format!("for (unsigned i = 0; i < {mi}u; ++i)"));
        em.line("#pragma unroll");
        em.open("for (unsigned q = 0; q < 4u; ++q)");
        em.line("// a0: (g, 2t..), a1: (g + 8, 2t..), a2: (g, 2t + 8..), a3: (g + 8, 2t + 8..)");
        em.line("const float* sp = &s[i][2u * kk + q / 2u][q % 2u * 2u];");
        em.line(format!("pf[i][q] = {pack}(sp[0], sp[1]);"));
        em.close();
        em.close();
        em.line("#pragma unroll");
        em.open(format!("for (unsigned j = 0; j < {}u; ++j)", dv / 16));
        em.line("unsigned r[4];");
        em.line("const unsigned row = kk * 16u + mat % 2u * 8u + r8, col = j * 16u + mat / 2u * 8u;");
        em.line(format!("sinter_ldsm_x4<true>(r, sv + (row * {vrow}u + col) * 2u);"));
        em.line("#pragma unroll");
        em.open(format!("for (unsigned i = 0; i < {mi}u; ++i)"));
        em.line(format!("{mma}(o[i][2u * j], pf[i], r[0], r[1]);"));
        em.line(format!("{mma}(o[i][2u * j + 1u], pf[i], r[2], r[3]);"));
        em.close();
        em.close();
        em.close();
    }
    em.close(); // the key-tile loop
    Ok(())
}

/// Copies key tile `tile_idx` of K and V into stage `slot` (16-byte `cp.async`, zero rows past
/// `kv`).
pub(super) fn load_kv(
    em: &mut Emitter<'_>,
    a: &AttentionBody,
    t: &AttnTile,
    kvt: (&str, &str),
    slot: &str,
    tile_idx: &str,
) {
    load_kv_by(em, a, t, kvt, (slot, tile_idx), ("tid", t.threads()), "#pragma unroll");
}

/// [`load_kv`] by `threads` threads numbered by the expression `tid`, with `unroll` the pragma of
/// the copy loops (a register-starved producer copies one 16-byte chunk per iteration).
pub(super) fn load_kv_by(
    em: &mut Emitter<'_>,
    a: &AttentionBody,
    t: &AttnTile,
    (kt, vt): (&str, &str),
    (slot, tile_idx): (&str, &str),
    (tid, threads): (&str, u32),
    unroll: &str,
) {
    let (qbytes, kbytes, stage) = tc_shared(t, a);
    em.open("");
    em.line(format!("const unsigned j0 = {tile_idx} * {}u;", t.bn));
    em.line(format!("const unsigned st = s_base + {qbytes}u + {slot} * {stage}u;"));
    for (name, o, ty, dim, off) in [("k", &a.k, kt, a.d as u32, 0), ("v", &a.v, vt, a.dv as u32, kbytes)] {
        let per_row = dim / 8;
        let units = t.bn * per_row;
        em.line(format!("// {}: {} x {dim} elements, {units} 16-byte copies", name.to_uppercase(), t.bn));
        em.line(unroll);
        em.open(format!("for (unsigned l = 0; l < {}u; ++l)", units.div_ceil(threads)));
        em.line(format!("const unsigned e = {tid} + l * {threads}u;"));
        if !units.is_multiple_of(threads) {
            em.open(format!("if (e < {units}u)"));
        }
        em.line(format!("const unsigned r = e / {per_row}u, c = e % {per_row}u * 8u;"));
        em.line(format!("const unsigned valid = j0 + r < {}u ? 16u : 0u;", a.kv));
        let addr = row_addr(ty, &format!("{name}_base"), "j0 + r", o.s_row, "c");
        em.line(format!("const {ty} off = valid ? {addr} : 0u;"));
        let dst =
            if t.wgmma() { format!("sinter_swz128(r, c, {}u)", t.bn) } else { format!("(r * {}u + c) * 2u", dim + 8) };
        em.line(format!("sinter_cp_async16(st + {off}u + {dst}, &a{}[off], valid);", o.arg));
        if !units.is_multiple_of(threads) {
            em.close();
        }
        em.close();
    }
    em.close();
}

/// The scores of key tile `tile_idx` in `s[i][j][c]` (raw dot products on entry): the score
/// expression per element (or only the mask when the scale is folded), `-inf` past `kv`, `m` and
/// the causal bound on tiles that cross them; no guard at all where every tile is whole.
pub(super) fn emit_scores(
    em: &mut Emitter<'_>,
    a: &AttentionBody,
    tile: &AttnTile,
    fold: Option<f64>,
    tile_idx: &str,
) -> Result<(), RenderError> {
    let (bm, bn, mi, bn8) = (tile.bm, tile.bn, tile.mi(), tile.bn / 8);
    let (m, kv) = (a.m as u64, a.kv as u64);
    let ity = em.ity();
    let idx = if tile_idx.contains(' ') { format!("({tile_idx})") } else { tile_idx.to_string() };
    em.decl("k0", format!("const unsigned k0 = {idx} * {bn}u;"));
    // Every tile whole (rows and keys in whole tiles, no causal bound): no guard at all, so the
    // source carries no masking branch it never takes (NVRTC's time on the d64 workload's source
    // 457 -> 394 ms, session 33).
    // (The generic kernel knows only its variant: whole tiles, or tested at run time.)
    let always_full = if em.attn_generic {
        em.attn_whole
    } else {
        kv.is_multiple_of(u64::from(bn)) && m.is_multiple_of(u64::from(bm)) && a.causal.is_none()
    };
    let (ms, kvs, co) = (
        super::attention_generic::m(em, a),
        super::attention_generic::kv(em, a),
        super::attention_generic::causal(em, a),
    );
    if !always_full {
        let mut full = vec![format!("k0 + {bn}u <= {kvs}"), format!("m0 + {bm}u <= {ms}")];
        if let Some(o) = &co {
            full.push(format!("k0 + {} <= m0 + {o}", bn - 1));
        }
        em.line(format!("const bool full = {};", full.join(" && ")));
    }
    em.names.insert(Var::M, "m".into());
    em.names.insert(Var::Key, "key".into());
    // (guarded, block header): a folded scale leaves only the mask to apply, so whole tiles have
    // nothing to do; otherwise the score goes unguarded where the tile is whole.
    let blocks: &[(bool, &str)] = match (always_full, fold.is_some()) {
        (true, true) => &[],
        (true, false) => &[(false, "")],
        (false, true) => &[(true, "if (!full)")],
        (false, false) => &[(false, "if (full)"), (true, "else")],
    };
    for &(guarded, header) in blocks {
        if em.attn_generic && guarded && fold.is_some() {
            em.open(header);
            super::attention_generic::mask(em, a, tile);
            em.close();
            continue;
        }
        em.open(header);
        em.line("#pragma unroll");
        em.open(format!("for (unsigned i = 0; i < {mi}u; ++i)"));
        em.line("#pragma unroll");
        em.open(format!("for (unsigned j = 0; j < {bn8}u; ++j)"));
        em.line("#pragma unroll");
        em.open("for (unsigned c = 0; c < 4u; ++c)");
        em.decl("m", format!("const {ity} m = m0 + wm0 + i * 16u + c / 2u * 8u + g;"));
        em.decl("key", format!("const {ity} key = k0 + j * 8u + t4 * 2u + c % 2u;"));
        let guard = guarded.then(|| {
            let mut g = format!("key < {kvs} && m < {ms}");
            if let Some(o) = &co {
                g.push_str(&format!(" && key <= m + {o}"));
            }
            g
        });
        match (fold, &guard) {
            (Some(_), Some(g)) => em.line(format!("if (!({g})) s[i][j][c] = NINF;")),
            _ => emit_score(em, a, "s[i][j][c]", "s[i][j][c]", guard.as_deref())?,
        }
        em.close();
        em.close();
        em.close();
        em.close();
    }
    Ok(())
}

/// The online softmax over `s` (scores in, probabilities out): the row maximum over the quad, the
/// running maximum `mx` and sum `l`, and the rescaling of `o` by `alpha`, or with `defer` the
/// factors kept in `al[i][h]` for the caller to apply once `o` may be written.
pub(super) fn emit_softmax(em: &mut Emitter<'_>, tile: &AttnTile, dv: u32, defer: bool) {
    let (mi, bn8, dv8) = (tile.mi(), tile.bn / 8, dv / 8);
    // Online softmax.
    em.line("#pragma unroll");
    em.open(format!("for (unsigned i = 0; i < {mi}u; ++i)"));
    em.line("#pragma unroll");
    em.open("for (unsigned h = 0; h < 2u; ++h)");
    em.line("float rm = NINF;");
    em.line("#pragma unroll");
    em.open(format!("for (unsigned j = 0; j < {bn8}u; ++j)"));
    em.line("rm = fmaxf(rm, fmaxf(s[i][j][2u * h], s[i][j][2u * h + 1u]));");
    em.close();
    em.line("rm = fmaxf(rm, __shfl_xor_sync(0xffffffffu, rm, 1));");
    em.line("rm = fmaxf(rm, __shfl_xor_sync(0xffffffffu, rm, 2));");
    em.line("const float mn = fmaxf(mx[i][h], rm);");
    em.line("const float mu = mn == NINF ? 0.0f : mn; // no keys yet: p = 0, not NaN");
    em.line("const float alpha = sinter_ex2((mx[i][h] - mu) * SL);");
    em.line("const float ms = mu * SL;");
    em.line("mx[i][h] = mn;");
    em.line("float rs = 0.0f;");
    em.line("#pragma unroll");
    em.open(format!("for (unsigned j = 0; j < {bn8}u; ++j)"));
    em.line("#pragma unroll");
    em.open("for (unsigned c = 0; c < 2u; ++c)");
    em.line("const float p = sinter_ex2(fmaf(s[i][j][2u * h + c], SL, -ms));");
    em.line("s[i][j][2u * h + c] = p;");
    em.line("rs += p;");
    em.close();
    em.close();
    em.line("l[i][h] = l[i][h] * alpha + rs;");
    if defer {
        em.line("al[i][h] = alpha;");
    } else {
        em.line("#pragma unroll");
        em.open(format!("for (unsigned j = 0; j < {dv8}u; ++j)"));
        em.line("o[i][j][2u * h] *= alpha;");
        em.line("o[i][j][2u * h + 1u] *= alpha;");
        em.close();
    }
    em.close();
    em.close();
}

#[cfg(test)]
mod tests {
    use super::causal_section;
    use sinter_core::DType;
    use sinter_core::kernel::KernelBody;
    use sinter_core::testsuite::programs::{AttnCase, attention};

    fn section(c: AttnCase) -> u64 {
        let p = attention(&c);
        let KernelBody::Attention(a) = &p.kernels[0].body else { panic!("not attention") };
        causal_section(a)
    }

    #[test]
    fn causal_sections_divide_the_heads_within_the_l2_budget() {
        let causal = |b, h, s, d| AttnCase { causal: Some(0), ..AttnCase::new(b, h, s, s, d, DType::BF16) };
        // 1 MiB of keys and values per flat batch: 8 of 16 heads.
        assert_eq!(section(causal(8, 16, 2048, 128)), 8);
        // 256 KiB: every head of the batch (16 divides 16, 4 MiB).
        assert_eq!(section(causal(8, 16, 1024, 64)), 16);
        // 12 heads of 1 MiB: the largest divisor of 12 within 8 MiB.
        assert_eq!(section(causal(2, 12, 2048, 128)), 6);
        // A flat batch past the budget, one head, or no mask: sections of one.
        assert_eq!(section(causal(1, 4, 32768, 128)), 1);
        assert_eq!(section(causal(4, 1, 2048, 128)), 1);
        assert_eq!(section(AttnCase::new(8, 16, 2048, 2048, 128, DType::BF16)), 1);
    }
}
