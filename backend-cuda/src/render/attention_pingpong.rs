//! The warp-specialized `wgmma` attention tile ([`AttnEngine::WgmmaPingPong`], sm_90a):
//! FlashAttention-3's producer warpgroup and ping-pong of consumer warpgroups, on the `wgmma`
//! parts of `attention_wgmma` and the score, softmax and epilogue code of `attention_tc`.
//!
//! # Roles
//! A block of `nc + 1` warpgroups (`nc = bm / 64`, one to three) owns `bm` query rows. Warpgroups
//! `0 .. nc` are consumers: warpgroup `w` owns rows `64 w ..` (its warps hold them as the other
//! `wgmma` tiles do). Warpgroup `nc` is the producer: it only copies K and V tiles (16-byte
//! `cp.async`, zero rows past `kv`) into a ring of `stages` buffers. The producer gives registers
//! up (`setmaxnreg.dec` to [`PRODUCER_REGS`]) and the consumers take them (`setmaxnreg.inc` to
//! [`consumer_regs`]); the kernel's `__launch_bounds__(threads, min_blocks)` caps the registers
//! at entry (one block per SM with two or three consumers; two with one consumer, so that two
//! blocks' warpgroups can alternate on an SM as the one-warpgroup `wgmma` tiles do), and the two
//! counts are chosen so that the block's registers after the exchange never exceed those it was
//! launched with (else `setmaxnreg.inc` would wait forever).
//!
//! # Synchronization
//! * **Start**: thread 0 initializes the `mbarrier`s, every consumer thread issues its share of
//!   its warpgroup's Q rows, then one `__syncthreads` (every thread of the block, once; the only
//!   block-wide barrier). Each consumer warpgroup then waits for its own Q copies, fences them
//!   for the async proxy and syncs on named barrier `1 + nc + w` (its 128 threads).
//! * **Ring** (`mbarrier`s after the K/V stages): `full[s]` expects the producer's 128 threads,
//!   each arriving after its own copies of the tile landed (`cp.async.wait_group`) and were fenced
//!   for the async proxy (`fence.proxy.async`: the writing thread fences, as in the other tiles);
//!   `empty[s]` expects one arrival per consumer warp (`4 nc`), after the warp's `wgmma.wait`
//!   for the products that read the stage. Tile `j` uses stage `j % stages`; waiting for tile `j`
//!   means parity `j / stages & 1` of `full`, and the producer waits for the release of tile
//!   `j - stages` (parity `(j / stages + 1) & 1` of `empty`) before copying tile `j`. A barrier is
//!   never two phases ahead of its waiter: the producer cannot refill a stage before every
//!   consumer warp released it, and the consumers cannot release a tile they have not waited for.
//! * **Ping-pong** (`nc >= 2`): named barrier `1 + w` (256 threads: warpgroup `w` syncs, the
//!   warpgroup before it, cyclically, arrives) gates warpgroup `w`'s product issue. Each step of a
//!   consumer is `sync(1 + w)`, issue, `arrive(1 + (w + 1) % nc)`, then the waits and softmax, so
//!   the issues go round the warpgroups in order and one warpgroup's softmax overlaps the others'
//!   products. Warpgroup `nc - 1` arrives once on barrier 1 before its first step (warpgroup 0
//!   goes first) and not after its last step, so every barrier sees as many arrivals as syncs.
//!
//! # Invariants (what keeps it from hanging)
//! 1. Every consumer warpgroup of a block runs the same `n_tiles` (the block's, from its last
//!    row for causal tiles): `n_tiles + 1` steps (the first tile's `Q Kᵀ`, `n_tiles - 1` steps of
//!    `Q Kᵀ` beside the previous `P V`, the last `P V`), each one `bar.sync` on its own barrier
//!    and one `bar.arrive` on the next (bar the last of warpgroup `nc - 1`, and plus its one
//!    before the first step); no step is skipped at sequence edges or causal bounds (rows and keys
//!    outside are masked, not skipped).
//! 2. A warpgroup's arrival for step `j + 1` on barrier `1 + w` needs warpgroup `w` past its sync
//!    of step `j` (the round goes through it), so two arrivals of one warpgroup never complete a
//!    phase together.
//! 3. The producer waits only for `empty` of tile `j - stages` after signalling `full` of every
//!    tile before `j`; releasing tile `j - stages` needs the consumers' step `j - stages + 1`,
//!    which needs `full` of tiles up to `j - stages + 1 < j` and earlier steps of the other
//!    consumers only. No wait depends on a later event, for any `stages >= 2`.
//! 4. Branches are per warpgroup (role) or per block (`n_tiles`): every warp of a warpgroup
//!    reaches each `bar.sync`, `bar.arrive`, `setmaxnreg` and `wgmma` together.
//! 5. Between a product's issue and its wait there is no branch (ptxas C7514): the last step's
//!    conditional arrival comes after its wait.

use sinter_core::DType;
use sinter_core::kernel::{AttentionBody, AttnOperand};

use super::RenderError;
use super::attention::{AttnEngine, AttnTile, row_addr, tc_shared};
use super::attention_tc::{emit_scores, emit_softmax, load_kv_by};
use super::attention_wgmma::{p_frags, pv_issue, qk_issue};
use super::emit::Emitter;
use crate::tma::{TensorMapDesc, TensorMapParam, TmaElem, TmaSwizzle};

/// Registers per thread the producer warpgroup keeps (`setmaxnreg.dec`).
pub const PRODUCER_REGS: u32 = 40;

/// Blocks per SM the kernel keeps registers for (`__launch_bounds__`' second argument) with `nc`
/// consumer warpgroups.
pub(super) fn min_blocks(nc: u32) -> u32 {
    if nc == 1 { 2 } else { 1 }
}

/// Registers per thread at entry with `nc` consumer warpgroups (65536 over the threads of
/// [`min_blocks`] blocks, rounded down to 8; ptxas gives each thread at most this).
fn entry_regs(nc: u32) -> u32 {
    (65536 / (128 * (nc + 1) * min_blocks(nc))).min(255) / 8 * 8
}

/// Registers per thread of a consumer with `nc` consumer warpgroups: what the producer gives up,
/// shared out, rounded down to 8 (`setmaxnreg` takes multiples of 8 up to 256).
pub fn consumer_regs(nc: u32) -> u32 {
    ((entry_regs(nc) * (nc + 1) - PRODUCER_REGS) / nc.max(1) / 8 * 8).min(256)
}

/// Accumulator registers (S, O and P per thread) a consumer may hold beside its addresses, Q
/// descriptors and softmax state: measured with NVRTC (sm_90a), the tiles compile without spills
/// up to this.
fn max_accumulators(nc: u32) -> u32 {
    consumer_regs(nc).saturating_sub(72).min(160)
}

/// The warp-specialized tile's own rules (on top of `check_attn`'s): `acc` is the tile's
/// accumulator count.
pub(super) fn check(t: &AttnTile, acc: u32) -> Result<(), String> {
    let nc = t.bm / 64;
    if !(1..=3).contains(&nc) {
        return Err(format!("tile {t:?}: one to three consumer warpgroups"));
    }
    if acc > max_accumulators(nc) {
        return Err(format!(
            "tile {t:?}: {acc} accumulators with {} registers per consumer thread (at most {})",
            consumer_regs(nc),
            max_accumulators(nc)
        ));
    }
    Ok(())
}

/// The tensor maps of K and V (in that order) of a [`AttnEngine::WgmmaPingPongTma`] tile, or why
/// the copy engine cannot take them: each is 4-dimensional, (head dim, keys, heads of the
/// operand, batch) innermost first, with a box of 64 columns (128 bytes, the swizzle's span) by
/// `bn` keys; keys past `kv` read as zeros.
pub(super) fn kv_maps(a: &AttentionBody, t: &AttnTile) -> Result<Vec<TensorMapParam>, String> {
    let elem = match a.in_dtype {
        DType::BF16 => TmaElem::Bf16,
        DType::F16 => TmaElem::F16,
        d => return Err(format!("{d} operands (TMA takes bf16/f16)")),
    };
    let map = |o: &AttnOperand, name: &str, dim: usize| -> Result<TensorMapParam, String> {
        let heads = (a.heads / o.group.max(1)) as u64;
        let bytes = elem.bytes();
        // An extent of 1 is never stepped over: any valid stride will do.
        let stride = |s: usize, n: u64| if n > 1 { s as u64 * bytes } else { 16 };
        let desc = TensorMapDesc {
            elem,
            dims: vec![dim as u64, a.kv as u64, heads, a.batch as u64],
            strides: vec![stride(o.s_row, a.kv as u64), stride(o.s_head, heads), stride(o.s_batch, a.batch as u64)],
            boxes: vec![64, t.bn, 1, 1],
            swizzle: TmaSwizzle::B128,
        };
        desc.validate().map_err(|e| format!("{name}'s tensor map: {e}"))?;
        let offset_bytes = o.offset as u64 * bytes;
        if !offset_bytes.is_multiple_of(16) {
            return Err(format!("{name} starts {} elements in: not 16-byte aligned", o.offset));
        }
        Ok(TensorMapParam { arg: o.arg, offset_bytes, desc })
    };
    Ok(vec![map(&a.k, "K", a.d)?, map(&a.v, "V", a.dv)?])
}

/// The `mbarrier` block's offset in shared memory (after the ring).
fn bar_offset(t: &AttnTile, a: &AttentionBody) -> u32 {
    let (q, _, stage) = tc_shared(t, a);
    q + stage * t.stages
}

/// Everything from the end of the common prelude (indices, bases, `n_tiles`, `s_base`, `wg`) to
/// the start of the consumers' branch: barrier setup, the Q copies, the producer's whole loop.
/// Leaves the consumers' branch open (the caller closes it after the epilogue). `types` are the
/// index types of Q's, K's and V's bases.
pub(super) fn prologue(em: &mut Emitter<'_>, a: &AttentionBody, t: &AttnTile, types: (&str, &str, &str)) {
    debug_assert!(t.warp_specialized());
    let tma = t.engine == AttnEngine::WgmmaPingPongTma;
    let (qt, kt, vt) = types;
    let nc = t.bm / 64;
    let (d, stages) = (a.d as u32, t.stages);
    let bars = bar_offset(t, a);
    em.line(format!("// {nc} consumer warpgroups (rows 64 wg ..), warpgroup {nc} the producer of K and V"));
    em.line(format!(
        "const unsigned full0 = s_base + {bars}u, empty0 = full0 + {}u; // mbarriers, 8 bytes each",
        8 * stages
    ));
    em.open("if (tid == 0u)");
    em.line("#pragma unroll");
    em.open(format!("for (unsigned s = 0; s < {stages}u; ++s)"));
    if tma {
        em.line("sinter_mbar_init(full0 + s * 8u, 1u); // the producer's copy issue, plus the copies' bytes");
    } else {
        em.line("sinter_mbar_init(full0 + s * 8u, 128u); // each producer thread, once its copies landed");
    }
    em.line(format!(
        "sinter_mbar_init(empty0 + s * 8u, {}u); // each consumer warp, once its products read it",
        4 * nc
    ));
    em.close();
    if tma {
        em.line("sinter_mbar_fence_init(); // visible to the copy engine");
    }
    em.close();
    // Q: each consumer warpgroup copies its own 64 rows.
    let d8 = d / 8;
    let per = 64 * d8 / 128;
    em.open(format!("if (wg < {nc}u)"));
    em.line("#pragma unroll");
    em.open(format!("for (unsigned l = 0; l < {per}u; ++l)"));
    em.line("const unsigned e = tid % 128u + l * 128u;");
    em.line(format!("const unsigned r = wg * 64u + e / {d8}u, c = e % {d8}u * 8u;"));
    em.line(format!("const unsigned valid = m0 + r < {}u ? 16u : 0u;", a.m));
    let qa = row_addr(qt, "q_base", "m0 + r", a.q.s_row, "c");
    em.line(format!("const {qt} off = valid ? {qa} : 0u;"));
    em.line(format!("sinter_cp_async16(s_base + sinter_swz128(r, c, {}u), &a{}[off], valid);", t.bm, a.q.arg));
    em.close();
    em.line("sinter_cp_async_commit();");
    em.close();
    em.line("__syncthreads(); // the mbarriers are initialized (the block's only full barrier)");
    // The producer.
    em.open(format!("if (wg == {nc}u)"));
    em.line(format!("sinter_setmaxnreg_dec<{PRODUCER_REGS}>();"));
    if tma {
        tma_producer(em, a, t);
    } else {
        copy_producer(em, a, t, (kt, vt));
    }
    em.close();
    // The consumers: their Q rows.
    em.open("else");
    em.line(format!("sinter_setmaxnreg_inc<{}>();", consumer_regs(nc)));
    em.line("sinter_cp_async_wait<0>(); // this thread's Q copies");
    em.line("sinter_fence_async_shared();");
    // (One consumer: a constant id, so that ptxas reserves only the barriers the block uses.)
    let qbar = if nc == 1 { "2u".to_string() } else { format!("{}u + wg", 1 + nc) };
    em.line(format!("sinter_bar_sync<128>({qbar}); // the warpgroup's Q rows landed"));
}

/// The TMA producer: one thread of the producer warpgroup waits for each stage's release, arms
/// its `full` barrier with the tile's bytes and issues the copies of 64-column boxes of K and V.
fn tma_producer(em: &mut Emitter<'_>, a: &AttentionBody, t: &AttnTile) {
    let nc = t.bm / 64;
    let stages = t.stages;
    let (qbytes, kbytes, stage) = tc_shared(t, a);
    let box_bytes = t.bn * 128;
    em.open(format!("if (tid == {}u)", 128 * nc));
    em.line("sinter_tma_prefetch(&tm0);");
    em.line("sinter_tma_prefetch(&tm1);");
    let coord = |o: &AttnOperand| {
        let g = o.group.max(1);
        let h = if a.heads / g > 1 { format!("(int)(bh % {}u / {g}u)", a.heads) } else { "0".into() };
        let b = if a.batch > 1 { format!("(int)(bh / {}u)", a.heads) } else { "0".into() };
        (h, b)
    };
    let ((kh, kb), (vh, vb)) = (coord(&a.k), coord(&a.v));
    em.line(format!("const int kh = {kh}, kb = {kb}, vh = {vh}, vb = {vb};"));
    em.line("#pragma unroll 1");
    em.open("for (unsigned j = 0; j < n_tiles; ++j)");
    em.line(format!("const unsigned slot = j % {stages}u, full = full0 + slot * 8u;"));
    em.line(format!(
        "sinter_mbar_wait_or_trap(empty0 + slot * 8u, (j / {stages}u + 1u) & 1u); // tile j - {stages} released"
    ));
    em.line(format!("sinter_mbar_expect_tx(full, {}u);", stage));
    em.line(format!("const unsigned st = s_base + {qbytes}u + slot * {stage}u;"));
    em.line(format!("const int j0 = (int)(j * {}u);", t.bn));
    for (map, dim, off, h, b) in [("tm0", a.d as u32, 0, "kh", "kb"), ("tm1", a.dv as u32, kbytes, "vh", "vb")] {
        for blk in 0..dim / 64 {
            em.line(format!(
                "sinter_tma_load<4>(st + {}u, &{map}, {}, j0, {h}, {b}, full);",
                off + blk * box_bytes,
                blk * 64
            ));
        }
    }
    em.close();
    em.close();
}

/// The `cp.async` producer: the warpgroup's 128 threads copy each tile and arrive on its `full`
/// barrier once their own copies landed.
fn copy_producer(em: &mut Emitter<'_>, a: &AttentionBody, t: &AttnTile, (kt, vt): (&str, &str)) {
    let (nc, stages) = (t.bm / 64, t.stages);
    em.line(format!("const unsigned ptid = tid - {}u;", 128 * nc));
    em.line(format!("// the first {stages} tiles, one cp.async group each, then signalled in order"));
    em.line("#pragma unroll 1");
    em.open(format!("for (unsigned s = 0; s < {stages}u; ++s)"));
    em.open("if (s < n_tiles)");
    load_kv_by(em, a, t, (kt, vt), ("s", "s"), ("ptid", 128), "#pragma unroll 1");
    em.close();
    em.line("sinter_cp_async_commit();");
    em.close();
    for s in 0..stages {
        em.line(format!("sinter_cp_async_wait<{}>();", stages - 1 - s));
        em.line("sinter_fence_async_shared();");
        em.line(format!("if ({s}u < n_tiles) sinter_mbar_arrive(full0 + {}u);", 8 * s));
    }
    em.open(format!("for (unsigned j = {stages}u; j < n_tiles; ++j)"));
    em.line(format!("const unsigned slot = j % {stages}u;"));
    em.line(format!("sinter_mbar_wait(empty0 + slot * 8u, (j / {stages}u + 1u) & 1u); // tile j - {stages} released"));
    load_kv_by(em, a, t, (kt, vt), ("slot", "j"), ("ptid", 128), "#pragma unroll 1");
    em.line("sinter_cp_async_commit();");
    em.line("sinter_cp_async_wait<0>();");
    em.line("sinter_fence_async_shared();");
    em.line("sinter_mbar_arrive(full0 + slot * 8u);");
    em.close();
}

/// The consumers' loop over key tiles (see the module docs), from Q in shared memory and `o`,
/// `mx`, `l` initialized to the end of the last `P V`. `cvt` names the bf16/f16 pair type and its
/// conversion.
pub(super) fn consumer_loop(
    em: &mut Emitter<'_>,
    a: &AttentionBody,
    t: &AttnTile,
    fold: Option<f64>,
    cvt: (&str, &str),
) -> Result<(), RenderError> {
    debug_assert!(t.warp_specialized());
    let nc = t.bm / 64;
    let (bn8, bn16, dv8, stages) = (t.bn / 8, t.bn / 16, a.dv as u32 / 8, t.stages);
    let (qbytes, kbytes, stage) = tc_shared(t, a);
    let sync = |em: &mut Emitter<'_>| {
        if nc > 1 {
            em.line("sinter_bar_sync<256>(1u + wg); // this warpgroup's turn to issue");
        }
    };
    let arrive = |em: &mut Emitter<'_>| {
        if nc > 1 {
            em.line(format!("sinter_bar_arrive<256>(1u + (wg + 1u) % {nc}u); // the next warpgroup's turn"));
        }
    };
    em.line(format!("unsigned pf[{bn16}][4]; // P of the tile whose P V is next"));
    em.line("float al[1][2]; // the rescaling of o that the next tile's softmax found");
    if nc > 1 {
        em.line(format!("if (wg == {}u) sinter_bar_arrive<256>(1u); // warpgroup 0 issues first", nc - 1));
    }
    em.open("");
    em.line("sinter_mbar_wait(full0, 0u); // key tile 0");
    em.line(format!("const unsigned sk = s_base + {qbytes}u;"));
    em.line(format!("float s[1][{bn8}][4];"));
    sync(em);
    em.line("sinter_wgmma_fence();");
    qk_issue(em, a, t, "sk");
    em.line("sinter_wgmma_commit();");
    arrive(em);
    em.line("sinter_wgmma_wait<0>();");
    em.line(format!("sinter_reg_fence<{bn8}>(s[0]);"));
    emit_scores(em, a, t, fold, "0u")?;
    emit_softmax(em, t, a.dv as u32, false);
    p_frags(em, t, cvt);
    em.close();
    em.open("for (unsigned kt = 0; kt + 1u < n_tiles; ++kt)");
    em.line("const unsigned nk = kt + 1u;");
    em.line(format!("sinter_mbar_wait(full0 + nk % {stages}u * 8u, nk / {stages}u & 1u); // key tile kt + 1"));
    em.line(format!("const unsigned sv = s_base + {qbytes}u + kt % {stages}u * {stage}u + {kbytes}u;"));
    em.line(format!("const unsigned sk = s_base + {qbytes}u + nk % {stages}u * {stage}u;"));
    em.line(format!("float s[1][{bn8}][4];"));
    em.line(format!("sinter_reg_fence<{dv8}>(o[0]);"));
    sync(em);
    em.line("sinter_wgmma_fence(); // o rescaled and pf written in registers");
    qk_issue(em, a, t, "sk");
    em.line("sinter_wgmma_commit(); // S of tile kt + 1");
    pv_issue(em, a, t, "sv");
    em.line("sinter_wgmma_commit(); // O += P V of tile kt");
    arrive(em);
    em.line("sinter_wgmma_wait<1>(); // S done; P V may still run");
    em.line(format!("sinter_reg_fence<{bn8}>(s[0]);"));
    emit_scores(em, a, t, fold, "kt + 1u")?;
    emit_softmax(em, t, a.dv as u32, true);
    em.line("sinter_wgmma_wait<0>();");
    em.line(format!("sinter_reg_fence<{dv8}>(o[0]);"));
    em.line(format!("if (lane == 0u) sinter_mbar_arrive(empty0 + kt % {stages}u * 8u); // tile kt read"));
    em.line("#pragma unroll");
    em.open(format!("for (unsigned j = 0; j < {dv8}u; ++j)"));
    em.line("o[0][j][0] *= al[0][0]; o[0][j][1] *= al[0][0]; o[0][j][2] *= al[0][1]; o[0][j][3] *= al[0][1];");
    em.close();
    p_frags(em, t, cvt);
    em.close();
    // The last tile's P V (its stage is never waited for again: no release).
    em.open("");
    em.line(format!("const unsigned sv = s_base + {qbytes}u + (n_tiles - 1u) % {stages}u * {stage}u + {kbytes}u;"));
    em.line(format!("sinter_reg_fence<{dv8}>(o[0]);"));
    sync(em);
    em.line("sinter_wgmma_fence(); // o rescaled and pf written in registers");
    pv_issue(em, a, t, "sv");
    em.line("sinter_wgmma_commit();");
    em.line("sinter_wgmma_wait<0>();");
    em.line(format!("sinter_reg_fence<{dv8}>(o[0]);"));
    if nc > 1 {
        em.line(format!(
            "if (wg + 1u < {nc}u) sinter_bar_arrive<256>(2u + wg); // after the wait: no branch inside the product"
        ));
    }
    em.close();
    Ok(())
}

#[cfg(test)]
mod tests {
    //! The register exchange's arithmetic, and a model of the kernel's synchronization (the
    //! operations `prologue` and `consumer_loop` emit, per warpgroup, in order) run under many
    //! interleavings: it must finish, pair every named-barrier arrival with a sync, and never
    //! let an `mbarrier` run two phases ahead of a waiter.

    use super::*;

    #[test]
    fn the_register_exchange_fits_the_blocks_registers() {
        for nc in 1..=3 {
            let entry = 128 * (nc + 1) * entry_regs(nc);
            let after = 128 * PRODUCER_REGS + 128 * nc * consumer_regs(nc);
            assert!(
                after <= entry && entry * min_blocks(nc) <= 65536,
                "nc {nc}: {after} registers after, {entry} at entry"
            );
            assert_eq!(consumer_regs(nc) % 8, 0);
            assert!((24..=256).contains(&consumer_regs(nc)) && consumer_regs(nc) > entry_regs(nc));
        }
        assert_eq!((entry_regs(1), consumer_regs(1)), (128, 216));
        assert_eq!((entry_regs(2), consumer_regs(2)), (168, 232));
        assert_eq!((entry_regs(3), consumer_regs(3)), (128, 152));
        assert_eq!(PRODUCER_REGS % 8, 0);
    }

    #[derive(Clone, Copy, Debug)]
    enum Op {
        /// `bar.sync` / `bar.arrive` on named barrier `id`.
        Sync(usize),
        Arrive(usize),
        /// Parity wait / arrival on `full[s]` or `empty[s]`; waits carry the phase they expect.
        WaitFull(usize, u32),
        ArriveFull(usize),
        WaitEmpty(usize, u32),
        ArriveEmpty(usize),
    }

    /// The operations of each warpgroup (consumers `0 .. nc`, then the producer), as emitted.
    fn programs(nc: usize, stages: usize, n: usize) -> Vec<Vec<Op>> {
        let mut out = Vec::new();
        let next = |w: usize| 1 + (w + 1) % nc;
        for w in 0..nc {
            let mut p = Vec::new();
            let turn = |p: &mut Vec<Op>| {
                if nc > 1 {
                    p.push(Op::Sync(1 + w));
                    p.push(Op::Arrive(next(w)));
                }
            };
            if nc > 1 && w == nc - 1 {
                p.push(Op::Arrive(1));
            }
            p.push(Op::WaitFull(0, 0));
            turn(&mut p);
            for kt in 0..n.saturating_sub(1) {
                let nk = kt + 1;
                p.push(Op::WaitFull(nk % stages, (nk / stages) as u32));
                turn(&mut p);
                p.push(Op::ArriveEmpty(kt % stages));
            }
            if nc > 1 {
                p.push(Op::Sync(1 + w));
                if w + 1 < nc {
                    p.push(Op::Arrive(2 + w));
                }
            }
            out.push(p);
        }
        let mut p: Vec<Op> = (0..stages.min(n)).map(Op::ArriveFull).collect();
        for j in stages..n {
            p.push(Op::WaitEmpty(j % stages, (j / stages - 1) as u32));
            p.push(Op::ArriveFull(j % stages));
        }
        out.push(p);
        out
    }

    /// Runs `progs` (of `nc` consumers and a ring of `stages`) with the order in which the
    /// warpgroups move drawn from `seed`; `Err` says what went wrong.
    fn simulate(progs: &[Vec<Op>], nc: usize, stages: usize, seed: u64) -> Result<(), String> {
        let mut pc = vec![0usize; progs.len()];
        // Named barriers: (syncing warpgroups waiting, arrivals) of the current phase.
        let mut named = vec![(0usize, 0usize); 2 + nc];
        let mut blocked = vec![None::<usize>; progs.len()]; // waiting on named barrier id
        // mbarriers: (arrivals in the current phase, completed phases).
        let (mut full, mut empty) = (vec![(0usize, 0u32); stages], vec![(0usize, 0u32); stages]);
        let mut rng = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let done = |pc: &[usize]| pc.iter().zip(progs.iter()).all(|(&i, p)| i == p.len());
        while !done(&pc) {
            let mut moved = false;
            rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let start = (rng >> 33) as usize % progs.len();
            for k in 0..progs.len() {
                let a = (start + k) % progs.len();
                if pc[a] == progs[a].len() || blocked[a].is_some() {
                    continue;
                }
                let ok = match progs[a][pc[a]] {
                    Op::Sync(id) | Op::Arrive(id) => {
                        let sync = matches!(progs[a][pc[a]], Op::Sync(_));
                        let b = &mut named[id];
                        if sync {
                            b.0 += 1;
                        } else {
                            b.1 += 1;
                        }
                        if b.0 + b.1 == 2 {
                            if b.0 != 1 {
                                return Err(format!("barrier {id} completed with {} syncs", b.0));
                            }
                            *b = (0, 0);
                            for w in blocked.iter_mut() {
                                if *w == Some(id) {
                                    *w = None;
                                }
                            }
                        } else if sync {
                            blocked[a] = Some(id);
                        }
                        true
                    }
                    Op::WaitFull(s, phase) | Op::WaitEmpty(s, phase) => {
                        let bar = if matches!(progs[a][pc[a]], Op::WaitFull(..)) { full[s] } else { empty[s] };
                        if bar.1 > phase + 1 {
                            return Err(format!(
                                "{:?}: the barrier is {} phases ahead",
                                progs[a][pc[a]],
                                bar.1 - phase
                            ));
                        }
                        bar.1 == phase + 1
                    }
                    Op::ArriveFull(s) | Op::ArriveEmpty(s) => {
                        let (bar, count) = if matches!(progs[a][pc[a]], Op::ArriveFull(_)) {
                            (&mut full[s], 1)
                        } else {
                            (&mut empty[s], nc)
                        };
                        bar.0 += 1;
                        if bar.0 == count {
                            *bar = (0, bar.1 + 1);
                        }
                        true
                    }
                };
                if ok {
                    pc[a] += 1;
                    moved = true;
                    break;
                }
            }
            if !moved {
                let at: Vec<String> = pc.iter().zip(progs.iter()).map(|(&i, p)| format!("{:?}", p.get(i))).collect();
                return Err(format!("deadlock: {at:?}"));
            }
        }
        if let Some((id, b)) = named.iter().enumerate().find(|(_, b)| **b != (0, 0)) {
            return Err(format!("barrier {id} left with {b:?} at the end"));
        }
        if blocked.iter().any(Option::is_some) {
            return Err("a warpgroup ended blocked".into());
        }
        Ok(())
    }

    #[test]
    fn the_synchronization_never_deadlocks_and_balances() {
        for nc in 1..=3 {
            for stages in 2..=4 {
                for n in 1..=13 {
                    for seed in 0..40 {
                        simulate(&programs(nc, stages, n), nc, stages, seed)
                            .unwrap_or_else(|e| panic!("{nc} consumers, {stages} stages, {n} tiles, seed {seed}: {e}"));
                    }
                }
            }
        }
    }

    #[test]
    fn the_model_catches_broken_schedules() {
        // Without warpgroup nc - 1's first arrival, warpgroup 0 never gets its turn.
        let mut p = programs(2, 3, 4);
        assert!(matches!(p[1].remove(0), Op::Arrive(1)));
        assert!(simulate(&p, 2, 3, 0).unwrap_err().starts_with("deadlock"));
        // With its last arrival too, barrier 1 is left with an arrival nobody synced.
        let mut p = programs(2, 3, 4);
        p[1].push(Op::Arrive(1));
        assert!(simulate(&p, 2, 3, 0).unwrap_err().contains("left with"));
        // One stage: the producer waits for the release of a tile whose P V needs the next tile.
        assert!(simulate(&programs(2, 1, 4), 2, 1, 0).unwrap_err().starts_with("deadlock"));
        // A warpgroup arriving twice before the next one synced completes a phase without it.
        let mut p = programs(3, 3, 3);
        p[0].insert(0, Op::Arrive(2));
        assert!((0..20).any(|seed| simulate(&p, 3, 3, seed).is_err()));
    }
}
