//! The `wgmma` parts of the tensor-core attention template (sm_90a; see `attention_tc`).
//!
//! A warpgroup (four consecutive warps) owns 64 query rows; its warp `w` holds rows `16 w ..` in
//! the m16n8 accumulator layout of `mma.sync`, n8 blocks side by side, so the score, softmax and
//! epilogue code of the `mma.sync` template serves both. Q, K and V tiles are copied by `cp.async`
//! into 64-column blocks of 128-byte rows with 16-byte chunks swizzled by the row (`sinter_swz128`),
//! the layout `wgmma` reads through a descriptor with 128-byte swizzle: Q and K k-major (stride
//! between 8-row groups 1024 bytes; a k16 slice is 32 bytes further along the row, the next
//! 64-column block a whole block further), V N-major (dv contiguous: leading offset one 64-column
//! block of `bn` rows, stride 1024 bytes between 8-key groups, 2048 bytes per k16 slice). Writes by
//! `cp.async` reach the tensor cores' async proxy after `fence.proxy.async` and a barrier.
//!
//! * [`AttnEngine::Wgmma`]: per key tile, S = Q Kᵀ (waited for), the softmax, P rounded into A
//!   fragments, O += P V (waited for).
//! * [`AttnEngine::WgmmaOverlap`] (FlashAttention-3's intra-warpgroup overlap): the first tile's S
//!   and softmax before the loop; per tile `kt`, S of tile `kt + 1` and O += P V of tile `kt` are
//!   issued together, S is waited for alone (groups complete in order), the softmax of tile `kt + 1`
//!   runs while P V is in flight, then O is rescaled and P replaced. Three tiles are in the ring:
//!   `kt` (read by P V), `kt + 1` (read by S) and `kt + 2` (being copied).
//! * [`AttnEngine::WgmmaPingPong`] (`attention_pingpong`): the overlapped loop per consumer
//!   warpgroup, fed by a producer warpgroup through `mbarrier`s instead of block-wide barriers.
//!
//! Measured on an H100 (bf16, `device_cuda.sh attention`, same call): b8 h16 s1024 d64 0.100 ms
//! with one warpgroup of 64 rows and 128 keys (342 TFLOP/s; overlapped 64x64 four stages 0.103;
//! the `mma.sync` template 0.146), b8 h16 s2048 d128 causal 0.411 ms overlapped with two
//! warpgroups, 128 keys and three stages (334 TFLOP/s; not overlapped 0.433; `mma.sync` 0.586).

use sinter_core::DType;
use sinter_core::kernel::AttentionBody;

use super::RenderError;
use super::attention::{AttnEngine, AttnTile, tc_shared};
use super::attention_tc::{emit_scores, emit_softmax, load_kv};
use super::emit::Emitter;
use super::prelude::wgmma_name;

/// Issues S = Q Kᵀ for the K tile at shared address `sk` into `s[0]` (`d / 16` products of k16,
/// the first overwriting `s`); no fence, commit or wait.
pub(super) fn qk_issue(em: &mut Emitter<'_>, a: &AttentionBody, t: &AttnTile, sk: &str) {
    let (bm, bn, d16) = (t.bm, t.bn, a.d as u32 / 16);
    let name = wgmma_name(bn, false, false, a.in_dtype == DType::F16);
    em.open("");
    em.line("const unsigned long long desc_q = sinter_wgmma_desc(s_base + wg * 8192u, 16u, 1024u);");
    em.line(format!("const unsigned long long desc_k = sinter_wgmma_desc({sk}, 16u, 1024u);"));
    em.line("#pragma unroll");
    em.open(format!("for (unsigned kk = 0; kk < {d16}u; ++kk)"));
    em.line("// k16 slice kk: 64-column block kk / 4, 32 bytes per slice inside the swizzled row");
    em.line(format!("const unsigned qo = kk / 4u * {}u + kk % 4u * 32u;", bm * 128));
    em.line(format!("const unsigned ko = kk / 4u * {}u + kk % 4u * 32u;", bn * 128));
    em.line(format!(
        "{name}(s[0], sinter_wgmma_desc_add(desc_q, qo), sinter_wgmma_desc_add(desc_k, ko), kk > 0u ? 1 : 0);"
    ));
    em.close();
    em.close();
}

/// S = Q Kᵀ for the K tile at `sk`, waited for.
pub(super) fn qk(em: &mut Emitter<'_>, a: &AttentionBody, t: &AttnTile) {
    em.line("sinter_wgmma_fence();");
    qk_issue(em, a, t, "sk");
    em.line("sinter_wgmma_commit();");
    em.line("sinter_wgmma_wait<0>();");
    em.line(format!("sinter_reg_fence<{}>(s[0]);", t.bn / 8));
}

/// `pf[kk][q]` = the probabilities in `s` rounded to the operands' dtype as A fragments (the
/// m64nNk16 accumulator layout of two adjacent n8 blocks is the k16 A layout).
pub(super) fn p_frags(em: &mut Emitter<'_>, t: &AttnTile, pack: &str) {
    em.line("#pragma unroll");
    em.open(format!("for (unsigned kk = 0; kk < {}u; ++kk)", t.bn / 16));
    em.line("#pragma unroll");
    em.open("for (unsigned q = 0; q < 4u; ++q)");
    em.line("// a0: (g, 2t..), a1: (g + 8, 2t..), a2: (g, 2t + 8..), a3: (g + 8, 2t + 8..)");
    em.line("const float* sp = &s[0][2u * kk + q / 2u][q % 2u * 2u];");
    em.line(format!("pf[kk][q] = {pack}(sp[0], sp[1]);"));
    em.close();
    em.close();
}

/// Issues O += P V for the V tile at shared address `sv` (`bn / 16` products of k16, P from `pf`,
/// O (a warpgroup's `dv8` m64n8 fragments) scaled by `al`, the factor the last softmax found
/// for each of a thread's two rows.
pub(super) fn rescale_o(em: &mut Emitter<'_>, dv8: u32) {
    em.line("#pragma unroll");
    em.open(format!("for (unsigned j = 0; j < {dv8}u; ++j)"));
    em.line("o[0][j][0] *= al[0][0]; o[0][j][1] *= al[0][0]; o[0][j][2] *= al[0][1]; o[0][j][3] *= al[0][1];");
    em.close();
}

/// V N-major); no fence, commit or wait.
pub(super) fn pv_issue(em: &mut Emitter<'_>, a: &AttentionBody, t: &AttnTile, sv: &str) {
    em.open("");
    em.line(format!("const unsigned long long desc_v = sinter_wgmma_desc({sv}, {}u, 1024u);", t.bn * 128));
    em.line("#pragma unroll");
    em.open(format!("for (unsigned kk = 0; kk < {}u; ++kk)", t.bn / 16));
    em.line(format!(
        "{}(o[0], pf[kk], sinter_wgmma_desc_add(desc_v, kk * 2048u), 1); // 16 key rows of 128 bytes",
        wgmma_name(a.dv as u32, true, true, a.in_dtype == DType::F16),
    ));
    em.close();
    em.close();
}

/// O += P V for the V tile at `sv`, P taken from `s` (registers a `wgmma` reads are written before
/// `wgmma.fence`), waited for.
pub(super) fn pv(em: &mut Emitter<'_>, a: &AttentionBody, t: &AttnTile, pack: &str) {
    em.line(format!("unsigned pf[{}][4];", t.bn / 16));
    p_frags(em, t, pack);
    pv_waited(em, a, t, "sv");
}

/// O += P V for the V tile at `sv` with P in `pf`: fenced, issued and waited for.
fn pv_waited(em: &mut Emitter<'_>, a: &AttentionBody, t: &AttnTile, sv: &str) {
    let dv8 = a.dv as u32 / 8;
    em.line(format!("sinter_reg_fence<{dv8}>(o[0]);"));
    em.line("sinter_wgmma_fence(); // o rescaled and pf written in registers");
    pv_issue(em, a, t, sv);
    em.line("sinter_wgmma_commit();");
    em.line("sinter_wgmma_wait<0>();");
    em.line(format!("sinter_reg_fence<{dv8}>(o[0]);"));
}

/// The loop over key tiles of [`AttnEngine::WgmmaOverlap`] (see the module docs), from the point
/// where Q and the first `stages - 1` key tiles have been issued (one `cp.async` group each) to the
/// end of the loop. `kvt` are the index types of K's and V's bases.
pub(super) fn overlapped_loop(
    em: &mut Emitter<'_>,
    a: &AttentionBody,
    t: &AttnTile,
    fold: Option<f64>,
    kvt: (&str, &str),
    pack: &str,
) -> Result<(), RenderError> {
    debug_assert_eq!(t.engine, AttnEngine::WgmmaOverlap);
    let (bn8, bn16, dv8, stages) = (t.bn / 8, t.bn / 16, a.dv as u32 / 8, t.stages);
    let (qbytes, kbytes, stage) = tc_shared(t, a);
    em.line(format!("unsigned pf[{bn16}][4]; // P of the tile whose P V is next"));
    em.line("float al[1][2]; // the rescaling of o that the next tile's softmax found");
    em.line(format!("sinter_cp_async_wait<{}>(); // Q and key tile 0", stages - 2));
    em.line("sinter_fence_async_shared();");
    em.line("__syncthreads();");
    em.open("");
    em.line(format!("const unsigned sk = s_base + {qbytes}u;"));
    em.line(format!("float s[1][{bn8}][4];"));
    qk(em, a, t);
    emit_scores(em, a, t, fold, "0u")?;
    emit_softmax(em, t, a.dv as u32, false);
    p_frags(em, t, pack);
    em.close();
    // Every tile but the last: its P V beside the next tile's S (no branch around the products:
    // with one, ptxas serializes the wgmma pipeline, C7514).
    em.open("for (unsigned kt = 0; kt + 1u < n_tiles; ++kt)");
    em.line(format!("sinter_cp_async_wait<{}>();", stages - 3));
    em.line("sinter_fence_async_shared();");
    em.line("__syncthreads(); // tile kt + 1 landed; every warp is done with tile kt - 1's buffer");
    em.open("");
    em.line(format!("const unsigned nk = kt + {}u;", stages - 1));
    em.open("if (nk < n_tiles)");
    load_kv(em, a, t, kvt, &format!("nk % {stages}u"), "nk");
    em.close();
    em.line("sinter_cp_async_commit();");
    em.close();
    em.line(format!("const unsigned sv = s_base + {qbytes}u + kt % {stages}u * {stage}u + {kbytes}u;"));
    em.line(format!("const unsigned sk = s_base + {qbytes}u + (kt + 1u) % {stages}u * {stage}u;"));
    em.line(format!("float s[1][{bn8}][4];"));
    em.line(format!("sinter_reg_fence<{dv8}>(o[0]);"));
    em.line("sinter_wgmma_fence(); // o rescaled and pf written in registers");
    qk_issue(em, a, t, "sk");
    em.line("sinter_wgmma_commit(); // S of tile kt + 1");
    pv_issue(em, a, t, "sv");
    em.line("sinter_wgmma_commit(); // O += P V of tile kt");
    em.line("sinter_wgmma_wait<1>(); // S done; P V may still run");
    em.line(format!("sinter_reg_fence<{bn8}>(s[0]);"));
    emit_scores(em, a, t, fold, "kt + 1u")?;
    emit_softmax(em, t, a.dv as u32, true);
    em.line("sinter_wgmma_wait<0>();");
    em.line(format!("sinter_reg_fence<{dv8}>(o[0]);"));
    rescale_o(em, dv8);
    p_frags(em, t, pack);
    em.close();
    // The last tile: its P V alone (its buffer landed before the last iteration's barrier).
    em.open("");
    em.line(format!("const unsigned sv = s_base + {qbytes}u + (n_tiles - 1u) % {stages}u * {stage}u + {kbytes}u;"));
    pv_waited(em, a, t, "sv");
    em.close();
    Ok(())
}
