//! Tiled CUDA-core attention ([`AttnEngine::Fma`]): flash attention for operands the tensor-core
//! templates do not take (f32 above all: PyTorch keeps TF32 off for matmuls, and attention is
//! two matmuls), any head dimension up to [`MAX_DV`] output columns. See the `attention` module.
//!
//! A block of 256 threads (a 16 x 16 grid: `ty` owns query rows `ty * TM ..`, `tx` owns keys
//! `tx * TN ..` of each key tile and output columns `tx * RV ..` when `RV`, the columns per thread,
//! is a multiple of 4, else columns `tx + 16 r`) owns `bm` query rows of one flat batch (the last
//! row tile first when causal: it has the most keys). Shared memory holds, as f32: the Q tile
//! transposed (`[d][bm + 4]`), one K tile transposed (`[d][bn + 4]`), one V tile (`[bn][16 * RV]`,
//! zero columns past `dv`) and the probabilities transposed (`[bn][bm + 4]`). The `+ 4` pads keep
//! a thread's `TM` rows (`TN` keys) one aligned vector, so each step of the head-dimension loop is
//! two vector reads and `TM x TN` `fmaf`s; the transposing stores (consecutive threads take
//! consecutive columns of a row: coalesced in global memory) conflict 8 ways, once per tile.
//! Per key tile: S = Q Kᵀ as `TM x TN` outer products per thread (`fmaf` over the head dimension in
//! order, as the interpreter's dot product), the score per element (masked to `-inf` past `m`, the
//! tile's keys and the causal bound), the row maximum over the 16 threads of the row (`shfl.xor` 8,
//! 4, 2, 1), `p = exp(s - max)` with a zero reference while the maximum is `-inf`, the running sums
//! kept per thread (one rescale factor per row, so they are summed over the row's threads at the
//! end), P through shared memory into O += P V. Keys past the tile's end have zero K and V rows
//! and zero probabilities.
//!
//! Before this template, f32 attention ran one warp per query row (`attention_rows`), every lane
//! reading its own key row: on an H100, torchvision's ViT-B/16 at batch 2 spent 302 us per layer
//! there (1.6 TFLOP/s), half the model's time.

use sinter_core::DType;
use sinter_core::kernel::{AttentionBody, Var};

use super::attention::{
    AttnEngine, AttnTile, emit_base, emit_consts, emit_epilogue, emit_score, hoist_epilogue, hoist_score, round_p,
    row_addr,
};
use super::emit::Emitter;
use super::ops::load_conv;
use super::{Body, CudaCaps, GridSplit, OuterUnit, RenderError, Tuning};

/// Threads per block (a 16 x 16 grid).
pub const THREADS: u32 = 256;
/// Most output columns per row (16 threads of 16 columns each, in registers).
pub const MAX_DV: usize = 256;

/// Shared bytes of `t` for `a`: Q, K (transposed, rows padded by 4), V, P (transposed, padded).
pub(super) fn shared_bytes(t: &AttnTile, a: &AttentionBody) -> u64 {
    let (bm, bn, d) = (u64::from(t.bm), u64::from(t.bn), a.d as u64);
    let dvp = (a.dv as u64).div_ceil(16) * 16;
    4 * (d * (bm + 4) + d * (bn + 4) + bn * dvp + bn * (bm + 4))
}

/// Whether the tiled CUDA-core template applies to `a`: `Err` says why not.
pub fn applies(a: &AttentionBody) -> Result<(), String> {
    if !matches!(a.in_dtype, DType::F32 | DType::F16 | DType::BF16) {
        return Err(format!("operands {} (the tiled CUDA-core template takes f32, f16, bf16)", a.in_dtype));
    }
    if a.d == 0 || a.dv == 0 || a.dv > MAX_DV {
        return Err(format!("head dims {}/{} (value head dim 1 to {MAX_DV})", a.d, a.dv));
    }
    Ok(())
}

/// Checks an [`AttnEngine::Fma`] tile against the template's rules and the device's limits.
pub(super) fn check(t: &AttnTile, caps: &CudaCaps, a: &AttentionBody) -> Result<(), String> {
    applies(a)?;
    if !matches!(t.bm, 16 | 32 | 64) || !matches!(t.bn, 16 | 32 | 64) {
        return Err(format!("tile {t:?}: bm and bn are 16, 32 or 64 (1 to 4 per thread)"));
    }
    if t.warps != THREADS / 32 || t.stages != 1 {
        return Err(format!("tile {t:?}: {} warps and one stage", THREADS / 32));
    }
    if THREADS > caps.max_threads_per_block {
        return Err(format!("tile {t:?}: {THREADS} threads"));
    }
    let shared = shared_bytes(t, a);
    if shared > u64::from(caps.max_dynamic_shared_bytes.max(caps.max_shared_bytes_per_block)) {
        return Err(format!("tile {t:?} needs {shared} bytes of shared memory for d {}", a.d));
    }
    Ok(())
}

/// The default tile: the largest whose grid covers at least half the SMs (else the one with the
/// most blocks) among those shared memory allows. Measured on an H100 at ViT-B/16's attention
/// (batch 2: 24 heads x 197 x 197, d 64, f32; `scripts/session7/d3.sh`): 64x64 (96 blocks)
/// 31.0 us, 32x64 (168 blocks) 33.5, 64x32 35.5, 32x32 38.1, 16x64 42.3: a thread's larger
/// register tile outweighs the SMs a smaller grid leaves idle.
pub(super) fn default_tile(a: &AttentionBody, caps: &CudaCaps) -> Option<AttnTile> {
    let blocks = |t: &AttnTile| (a.m as u64).div_ceil(u64::from(t.bm)) * (a.batch * a.heads) as u64;
    let tiles = [AttnTile::fma(64, 64), AttnTile::fma(32, 64), AttnTile::fma(32, 32), AttnTile::fma(16, 32)];
    let ok: Vec<AttnTile> = tiles.into_iter().filter(|t| check(t, caps, a).is_ok()).collect();
    ok.iter().find(|t| 2 * blocks(t) >= u64::from(caps.sm_count)).or(ok.last()).copied()
}

/// Renders `a` with the tiled CUDA-core template and `tile` (checked by the caller).
pub(super) fn render(
    em: &mut Emitter<'_>,
    a: &AttentionBody,
    tile: &AttnTile,
    t: &Tuning,
) -> Result<Body, RenderError> {
    debug_assert_eq!(tile.engine, AttnEngine::Fma);
    em.check_block(t, THREADS, tile)?;
    let (bm, bn) = (tile.bm, tile.bn);
    let (tm, tn) = (bm / 16, bn / 16);
    let (m, kv, d, dv) = (a.m as u64, a.kv as u64, a.d as u64, a.dv as u64);
    let rv = dv.div_ceil(16);
    let dvp = rv * 16;
    let bh_n = (a.batch * a.heads) as u64;
    let tiles_m = m.div_ceil(u64::from(bm));
    let blocks = tiles_m * bh_n;
    if blocks > i32::MAX as u64 {
        return Err(em.err(format!("{blocks} blocks exceed the grid limit")));
    }
    let shared = u32::try_from(shared_bytes(tile, a)).map_err(|_| em.err("attention tile shared memory"))?;
    let summary = format!(
        "tiled CUDA-core attention {bh_n} heads x m {m} x kv {kv}, d {d} dv {dv} ({} -> f32), tile {bm}x{bn}, \
         {THREADS} threads of {tm}x{tn} scores and {tm}x{rv} outputs, {shared} bytes of shared memory{}, {blocks} blocks",
        a.in_dtype,
        match a.causal {
            Some(o) => format!(", causal +{o}"),
            None => String::new(),
        },
    );
    let body = match Body::launch(blocks, THREADS, format!("attention fma {bm}x{bn}"), summary, None, shared) {
        Ok(b) => b.with_split(GridSplit { unit: OuterUnit::AttentionBatch, per: 1, inner: tiles_m }),
        Err(empty) => return Ok(*empty),
    };
    let ity = em.ity();
    let elem = |x: &str| load_conv(x, a.in_dtype);
    // Row strides: `+ 4` keeps each thread's rows (keys) one aligned vector.
    let (qs, ks, ps) = (bm + 4, bn + 4, bm + 4);
    // Output columns: `RV` adjacent ones per thread (16-byte reads of V) when `RV` is a multiple
    // of 4, else columns `tx + 16 r`.
    let vec_v = rv.is_multiple_of(4);
    let col = if vec_v { format!("tx * {rv}u + r") } else { "tx + 16u * r".to_string() };
    em.line(format!("// {}", body.summary));
    em.line("extern __shared__ __align__(16) unsigned char smem[];");
    emit_consts(em);
    em.line(format!(
        "const unsigned mt = {};",
        if a.causal.is_some() {
            format!("{} - blockIdx.x % {tiles_m}u", tiles_m - 1)
        } else {
            format!("blockIdx.x % {tiles_m}u")
        }
    ));
    em.line(format!("const {ity} bh = blockIdx.x / {tiles_m}u;"));
    em.line(format!("const unsigned m0 = mt * {bm}u;"));
    em.line("const unsigned tid = threadIdx.x, tx = tid % 16u, ty = tid / 16u;");
    em.line(format!("float* Qs = reinterpret_cast<float*>(smem); // [{d}][{qs}]"));
    em.line(format!("float* Ks = Qs + {}; // [{d}][{ks}]", d * u64::from(qs)));
    em.line(format!("float* Vs = Ks + {}; // [{bn}][{dvp}]", d * u64::from(ks)));
    em.line(format!("float* Ps = Vs + {}; // [{bn}][{ps}]", u64::from(bn) * dvp));
    let qt = emit_base(em, "q", &a.q, a.heads);
    let kt = emit_base(em, "k", &a.k, a.heads);
    let vt = emit_base(em, "v", &a.v, a.heads);
    em.line("// The Q tile, transposed, zero rows past m.");
    em.open(format!("for (unsigned idx = tid; idx < {}u; idx += {THREADS}u)", u64::from(bm) * d));
    em.line(format!("const unsigned r = idx / {d}u, c = idx % {d}u, row = m0 + r;"));
    let qa = row_addr(qt, "q_base", "row", a.q.s_row, "c");
    em.line(format!("Qs[c * {qs}u + r] = row < {m}u ? {} : 0.0f;", elem(&format!("a{}[{qa}]", a.q.arg))));
    em.close();
    match a.causal {
        Some(o) => em.line(format!(
            "const unsigned kend = min({kv}u, min(m0 + {bm}u, {m}u) - 1u + {}u); // the last row's keys",
            o + 1
        )),
        None => em.line(format!("const unsigned kend = {kv}u;")),
    }
    em.names.insert(Var::Batch, "bh".into());
    hoist_score(em, a, false)?;
    em.line(format!("float mx[{tm}], l[{tm}], o[{tm}][{rv}];"));
    em.line("#pragma unroll");
    em.open(format!("for (unsigned i = 0; i < {tm}u; ++i)"));
    em.line("mx[i] = NINF; l[i] = 0.0f;");
    em.line("#pragma unroll");
    em.line(format!("for (unsigned r = 0; r < {rv}u; ++r) o[i][r] = 0.0f;"));
    em.close();
    em.open(format!("for (unsigned kb = 0; kb < kend; kb += {bn}u)"));
    em.line("__syncthreads(); // the previous tile's reads are done (and the Q tile is stored)");
    em.open(format!("for (unsigned idx = tid; idx < {}u; idx += {THREADS}u)", u64::from(bn) * d));
    em.line(format!("const unsigned j = idx / {d}u, c = idx % {d}u, key = kb + j;"));
    let ka = row_addr(kt, "k_base", "key", a.k.s_row, "c");
    em.line(format!("Ks[c * {ks}u + j] = key < kend ? {} : 0.0f;", elem(&format!("a{}[{ka}]", a.k.arg))));
    em.close();
    em.open(format!("for (unsigned idx = tid; idx < {}u; idx += {THREADS}u)", u64::from(bn) * dvp));
    em.line(format!("const unsigned j = idx / {dvp}u, n = idx % {dvp}u, key = kb + j;"));
    let va = row_addr(vt, "v_base", "key", a.v.s_row, "n");
    em.line(format!("Vs[idx] = key < kend && n < {dv}u ? {} : 0.0f;", elem(&format!("a{}[{va}]", a.v.arg))));
    em.close();
    em.line("__syncthreads();");
    em.line(format!("float s[{tm}][{tn}];"));
    em.line("#pragma unroll");
    em.line(format!("for (unsigned i = 0; i < {tm}u; ++i) for (unsigned j = 0; j < {tn}u; ++j) s[i][j] = 0.0f;"));
    em.line("#pragma unroll 4");
    em.open(format!("for (unsigned c = 0; c < {d}u; ++c)"));
    em.line(format!("{};", vec_read("qa", tm, &format!("Qs + c * {qs}u + ty * {tm}u"))));
    em.line(format!("{};", vec_read("ka", tn, &format!("Ks + c * {ks}u + tx * {tn}u"))));
    em.line("#pragma unroll");
    em.line(format!(
        "for (unsigned i = 0; i < {tm}u; ++i) for (unsigned j = 0; j < {tn}u; ++j) s[i][j] = fmaf(qa[i], ka[j], s[i][j]);"
    ));
    em.close();
    em.line("#pragma unroll");
    em.open(format!("for (unsigned i = 0; i < {tm}u; ++i)"));
    em.decl("m", format!("const {ity} m = m0 + ty * {tm}u + i;"));
    em.names.insert(Var::M, "m".into());
    em.line("#pragma unroll");
    em.open(format!("for (unsigned j = 0; j < {tn}u; ++j)"));
    em.decl("key", format!("const {ity} key = kb + tx * {tn}u + j;"));
    em.names.insert(Var::Key, "key".into());
    let mut guard = format!("m < {m}u && key < kend");
    if let Some(o) = a.causal {
        guard.push_str(&format!(" && key <= m + {o}u"));
    }
    emit_score(em, a, "s[i][j]", "s[i][j]", Some(&guard))?;
    em.close();
    em.names.remove(&Var::Key);
    em.line("float cm = NINF;");
    em.line("#pragma unroll");
    em.line(format!("for (unsigned j = 0; j < {tn}u; ++j) cm = fmaxf(cm, s[i][j]);"));
    em.line("#pragma unroll");
    em.line("for (unsigned x = 8u; x > 0u; x /= 2u) cm = fmaxf(cm, __shfl_xor_sync(0xffffffffu, cm, x));");
    em.line("const float mn = fmaxf(mx[i], cm);");
    em.line("const float mu = mn == NINF ? 0.0f : mn;");
    em.line("const float alpha = expf(mx[i] - mu);");
    em.line("mx[i] = mn;");
    em.line("float ps = 0.0f;");
    em.line("#pragma unroll");
    em.open(format!("for (unsigned j = 0; j < {tn}u; ++j)"));
    em.line("const float p = expf(s[i][j] - mu);");
    em.line("ps += p;");
    let pr = round_p(em, a, "p");
    em.line(format!("s[i][j] = {pr}; // the probability, as P V reads it"));
    em.close();
    em.line("l[i] = l[i] * alpha + ps;");
    em.line("#pragma unroll");
    em.line(format!("for (unsigned r = 0; r < {rv}u; ++r) o[i][r] *= alpha;"));
    em.close();
    em.names.remove(&Var::M);
    em.line("// P, transposed (keys by rows), each key's rows of this thread one vector store");
    em.line("#pragma unroll");
    em.open(format!("for (unsigned j = 0; j < {tn}u; ++j)"));
    em.line(format!("float pw[{tm}];"));
    em.line("#pragma unroll");
    em.line(format!("for (unsigned i = 0; i < {tm}u; ++i) pw[i] = s[i][j];"));
    em.line(format!("{};", vec_write(&format!("Ps + (tx * {tn}u + j) * {ps}u + ty * {tm}u"), tm, "pw")));
    em.close();
    em.line("__syncthreads();");
    em.line(format!("const unsigned nk = min({bn}u, kend - kb);"));
    em.line("#pragma unroll 4");
    em.open("for (unsigned jj = 0; jj < nk; ++jj)");
    em.line(format!("{};", vec_read("pv", tm, &format!("Ps + jj * {ps}u + ty * {tm}u"))));
    if vec_v {
        em.line(format!("float vv[{rv}];"));
        em.line("#pragma unroll");
        em.line(format!(
            "for (unsigned q = 0; q < {}u; ++q) *reinterpret_cast<float4*>(vv + 4u * q) = *reinterpret_cast<const float4*>(Vs + jj * {dvp}u + tx * {rv}u + 4u * q);",
            rv / 4
        ));
    }
    em.line("#pragma unroll");
    em.open(format!("for (unsigned r = 0; r < {rv}u; ++r)"));
    if vec_v {
        em.line("const float v = vv[r];");
    } else {
        em.line(format!("const float v = Vs[jj * {dvp}u + tx + 16u * r];"));
    }
    em.line("#pragma unroll");
    em.line(format!("for (unsigned i = 0; i < {tm}u; ++i) o[i][r] = fmaf(pv[i], v, o[i][r]);"));
    em.close();
    em.close();
    em.close();
    em.line("// Each thread summed its own keys' probabilities: the row's sum is over its 16 threads.");
    em.line("#pragma unroll");
    em.open(format!("for (unsigned i = 0; i < {tm}u; ++i)"));
    em.line("#pragma unroll");
    em.line("for (unsigned x = 8u; x > 0u; x /= 2u) l[i] += __shfl_xor_sync(0xffffffffu, l[i], x);");
    em.close();
    hoist_epilogue(em, a, false)?;
    em.line("#pragma unroll");
    em.open(format!("for (unsigned i = 0; i < {tm}u; ++i)"));
    em.decl("m", format!("const {ity} m = m0 + ty * {tm}u + i;"));
    em.names.insert(Var::M, "m".into());
    em.line("#pragma unroll");
    em.open(format!("for (unsigned r = 0; r < {rv}u; ++r)"));
    em.decl("n", format!("const {ity} n = {col};"));
    em.names.insert(Var::N, "n".into());
    em.open(format!("if (m < {m}u && n < {dv}u)"));
    emit_epilogue(em, a, "o[i][r] / l[i]")?;
    em.close();
    em.close();
    em.close();
    Ok(body)
}

/// `float name[n]` read from shared memory at `src` (`n` aligned floats) as one vector access.
fn vec_read(name: &str, n: u32, src: &str) -> String {
    match n {
        1 => format!("float {name}[1]; {name}[0] = *({src})"),
        _ => format!(
            "float {name}[{n}]; *reinterpret_cast<float{n}*>({name}) = *reinterpret_cast<const float{n}*>({src})"
        ),
    }
}

/// Writes `float src[n]` to shared memory at `dst` (`n` aligned floats) as one vector access.
fn vec_write(dst: &str, n: u32, src: &str) -> String {
    match n {
        1 => format!("*({dst}) = {src}[0]"),
        _ => format!("*reinterpret_cast<float{n}*>({dst}) = *reinterpret_cast<const float{n}*>({src})"),
    }
}
