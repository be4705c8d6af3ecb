//! The warp-specialized `wgmma` attention tile ([`AttnEngine::WgmmaPingPong`](super::attention::AttnEngine::WgmmaPingPong), sm_90a):
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
//! * **Ping-pong** (`nc >= 2`, fixed-grid tiles): named barrier `1 + w` (256 threads: warpgroup
//!   `w` syncs, the warpgroup before it, cyclically, arrives) gates warpgroup `w`'s product issue.
//!   Each step of a consumer is `sync(1 + w)`, issue, `arrive(1 + (w + 1) % nc)`, then the waits
//!   and softmax, so the issues go round the warpgroups in order and one warpgroup's softmax
//!   overlaps the others' products. Warpgroup `nc - 1` arrives once on barrier 1 before its first
//!   step (warpgroup 0 goes first) and not after its last step, so every barrier sees as many
//!   arrivals as syncs.
//!
//! * **Persistent tiles** ([`AttnEngine::WgmmaPingPongTmaPersistent`](super::attention::AttnEngine::WgmmaPingPongTmaPersistent)):
//!   `min(work tiles, SMs x blocks per SM)` blocks; block `b` starts with work tile `b` and takes
//!   each next one from a counter in its scratch (`atomicAdd` + `gridDim.x`), in order: each
//!   flat batch's row tiles, the last (longest when causal) first. The producer fetches the next
//!   tile before copying this one's K and V, and publishes it once they are issued through a
//!   two-slot schedule ring (`sched0`: `full[2]` expecting the producer, `empty[2]` expecting
//!   every consumer thread, two words). Publication `wi` (the tile after the block's `wi`-th)
//!   goes to slot `wi % 2`; the producer waits for the read of publication `wi - 2` (parity
//!   `(wi / 2 + 1) & 1`), the consumers read it (parity `wi / 2 & 1`) once their last `Q Kᵀ` of
//!   tile `wi` is done, then copy the next tile's Q rows into their own rows of the Q buffer while
//!   the last `P V` and the epilogue run. The K/V ring's index counts key tiles over the block's
//!   work tiles (`it`), and the last key tile's stage is released too. Its consumers take no
//!   ping-pong turns: each issues as soon as its key tile landed (measured faster, below). The
//!   last block to finish fetching zeroes both counters for the next launch.
//!
//! # Invariants (what keeps it from hanging)
//! 1. Every consumer warpgroup of a block runs the same `n_tiles` (the block's, from its last
//!    row for causal tiles): `n_tiles + 1` steps (the first tile's `Q Kᵀ`, `n_tiles - 1` steps of
//!    `Q Kᵀ` beside the previous `P V`, the last `P V`), each (with turns) one `bar.sync` on its
//!    own barrier and one `bar.arrive` on the next (bar the last of warpgroup `nc - 1`, and plus
//!    its one before the first step); no step is skipped at sequence edges or causal bounds (rows
//!    and keys outside are masked, not skipped).
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
//! 6. (Persistent.) The producer publishes the tile after tile `wi` only after issuing all of tile
//!    `wi`'s copies, which needs the releases of tile `wi`'s key tiles up to `n_tiles - 1 -
//!    stages`: the consumers give those before they read the publication. The schedule ring,
//!    like the K/V ring, never runs two phases ahead (the model test below covers work tiles of
//!    one key tile, long ones and causal mixes).
//!
//! # Measured (H200, BENCHMARKS.md sessions 15 and 33)
//! The consumers rescale O between the issues of `Q Kᵀ` and `P V` (causal d128 0.3218 -> 0.3131
//! ms, torch's SDPA 0.2651). In the SASS, ptxas puts the wait for a step's `P V` before its
//! softmax, so the softmax does not run beside the warpgroup's own `P V`, only beside the other
//! warpgroup's products; two alternating P arrays, branch-free masks and block boundaries did not
//! move it, and a schedule without that wait (each step waiting for the previous `P V` after its
//! next `Q Kᵀ`) was slower (0.3455 ms: the wait then holds the ping-pong turn). Persistent tiles:
//! causal d128 0.3097-0.3124 ms (1-3% faster), d128 without a mask 0.494-0.521 (0-3% slower), d64
//! 64x128 one consumer 0.0982-0.0986 (4-5% faster than the d64 default).
//!
//! Session 33: the wait before the softmax is placed by both compilers (NVVM sinks the softmax past
//! it; with the PTX in order, ptxas schedules it back within the block). Settling each `P V` at
//! the top of the next step kept the softmax beside it in the SASS, and ran 4% slower at d64 and
//! 3.7% at causal d128 (reverted). Persistent tiles without ping-pong turns (the consumers share K
//! and V but issue as they go): two consumers at d64 90.8-91.6 -> 88.2-88.5 us, causal d128
//! 262-263 -> 259.4-259.7 (max-autotune's timer, L2 cleared), d128 without a mask 0.4719 -> 0.4363
//! ms back to back; the fixed-grid causal d128 default without its turns 0.2604 -> 0.2774 (kept).

use sinter_core::DType;
use sinter_core::kernel::{AttentionBody, AttnOperand};

use super::RenderError;
use super::attention::{AttnTile, emit_base, row_addr, tc_shared};
use super::attention_tc::{emit_scores, emit_softmax, load_kv_by};
use super::attention_wgmma::{p_frags, pv_issue, qk_issue, rescale_o};
use super::emit::Emitter;
use crate::tma::{TensorMapDesc, TensorMapParam, TmaElem, TmaSwizzle};

/// Registers per thread the producer warpgroup keeps (`setmaxnreg.dec`).
pub const PRODUCER_REGS: u32 = 40;

/// Scratch bytes of a persistent tile: the next work tile to hand out (past the first wave of
/// `gridDim.x`) and the count of blocks done with fetching, both zero between launches.
pub(super) const SCHED_SCRATCH: u64 = 8;

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

/// The tensor maps of K and V (in that order) of a [`AttnEngine::WgmmaPingPongTma`](super::attention::AttnEngine::WgmmaPingPongTma) tile, or why
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

/// Everything from the end of the common prelude (indices, bases, `n_tiles`, `s_base`, `wg`; a
/// persistent tile's prelude has no work tile yet) to the start of the consumers' branch: barrier
/// setup, the Q copies, the producer's whole loop. Leaves the consumers' branch open (the caller
/// closes it after the epilogue; a persistent tile's consumers also leave their loop over work
/// tiles open, closed by [`next_work_tile`]). `types` are the index types of Q's, K's and V's
/// bases.
pub(super) fn prologue(em: &mut Emitter<'_>, a: &AttentionBody, t: &AttnTile, types: (&str, &str, &str)) {
    debug_assert!(t.warp_specialized());
    let tma = t.tma();
    let persistent = t.persistent_blocks();
    let (qt, kt, vt) = types;
    let nc = t.bm / 64;
    let stages = t.stages;
    let bars = bar_offset(t, a);
    em.line(format!("// {nc} consumer warpgroups (rows 64 wg ..), warpgroup {nc} the producer of K and V"));
    em.line(format!(
        "const unsigned full0 = s_base + {bars}u, empty0 = full0 + {}u; // mbarriers, 8 bytes each",
        8 * stages
    ));
    if persistent {
        em.line(format!(
            "const unsigned sched0 = empty0 + {}u; // the schedule ring: 2 full and 2 empty mbarriers, 2 work-tile indices",
            8 * stages
        ));
    }
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
    if persistent {
        em.line("#pragma unroll");
        em.open("for (unsigned s = 0; s < 2u; ++s)");
        em.line("sinter_mbar_init(sched0 + s * 8u, 1u); // the producer, once it wrote the next work tile");
        em.line(format!(
            "sinter_mbar_init(sched0 + 16u + s * 8u, {}u); // each consumer thread, once it read it",
            128 * nc
        ));
        em.close();
    }
    if tma {
        em.line("sinter_mbar_fence_init(); // visible to the copy engine");
    }
    em.close();
    // Q: each consumer warpgroup copies its own 64 rows (a persistent tile's consumers, in their
    // branch).
    if !persistent {
        em.open(format!("if (wg < {nc}u)"));
        q_copies(em, a, t, qt);
        em.close();
    }
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
    if persistent {
        work_state(em, a, t);
        em.open("");
        q_copies_of(em, a, t, "w");
        em.close();
        open_work_tile(em, a, t);
    }
    em.line("sinter_cp_async_wait<0>(); // this thread's Q copies");
    em.line("sinter_fence_async_shared();");
    // (One consumer: a constant id, so that ptxas reserves only the barriers the block uses.)
    let qbar = if nc == 1 { "2u".to_string() } else { format!("{}u + wg", 1 + nc) };
    em.line(format!("sinter_bar_sync<128>({qbar}); // the warpgroup's Q rows landed"));
}

/// The work tiles (flat batches times row tiles).
fn work_tiles(a: &AttentionBody, t: &AttnTile) -> u64 {
    (a.m as u64).div_ceil(u64::from(t.bm)) * (a.batch * a.heads) as u64
}

/// A persistent block's state: the count of work tiles, the current one (`w`, from `blockIdx.x`)
/// and the key tiles of the ring before it (`it`).
fn work_state(em: &mut Emitter<'_>, a: &AttentionBody, t: &AttnTile) {
    if em.attn_generic {
        em.line("const unsigned n_work = sx_n_work;");
    } else {
        em.line(format!("const unsigned n_work = {}u;", work_tiles(a, t)));
    }
    em.line("unsigned w = blockIdx.x, it = 0u; // the work tile, the ring's key tiles before it");
}

/// Opens a persistent block's loop over work tiles (`wi` counting them) and declares tile `w`'s
/// rows and key tiles; [`next_work_tile`] closes it.
fn open_work_tile(em: &mut Emitter<'_>, a: &AttentionBody, t: &AttnTile) {
    em.line("#pragma unroll 1");
    em.open("for (unsigned wi = 0u;; ++wi)");
    super::attention_tc::tile_rows(em, a, t, "w");
    super::attention_tc::tile_key_tiles(em, a, t);
}

/// [`q_copies`] of work tile `w` (its rows and Q base declared in the current block).
fn q_copies_of(em: &mut Emitter<'_>, a: &AttentionBody, t: &AttnTile, w: &str) {
    super::attention_tc::tile_rows(em, a, t, w);
    let qt = if em.attn_generic {
        super::attention_generic::emit_base(em, "q");
        "unsigned"
    } else {
        emit_base(em, "q", &a.q, a.heads)
    };
    q_copies(em, a, t, qt);
}

/// Each consumer thread's share of its warpgroup's 64 Q rows of the tile at `m0` of `q_base`
/// (16-byte `cp.async`, zero rows past `m`), as one commit group.
fn q_copies(em: &mut Emitter<'_>, a: &AttentionBody, t: &AttnTile, qt: &str) {
    let d8 = a.d as u32 / 8;
    let per = 64 * d8 / 128;
    em.line("#pragma unroll");
    em.open(format!("for (unsigned l = 0; l < {per}u; ++l)"));
    em.line("const unsigned e = tid % 128u + l * 128u;");
    em.line(format!("const unsigned r = wg * 64u + e / {d8}u, c = e % {d8}u * 8u;"));
    em.line(format!("const unsigned valid = m0 + r < {} ? 16u : 0u;", super::attention_generic::m(em, a)));
    let qa = if em.attn_generic {
        "q_base + (m0 + r) * sx_q_sr + c".to_string()
    } else {
        row_addr(qt, "q_base", "m0 + r", a.q.s_row, "c")
    };
    em.line(format!("const {qt} off = valid ? {qa} : 0u;"));
    em.line(format!("sinter_cp_async16(s_base + sinter_swz128(r, c, {}u), &a{}[off], valid);", t.bm, a.q.arg));
    em.close();
    em.line("sinter_cp_async_commit();");
}

/// The end of a persistent block's work tile (producer or consumer): count its key tiles, move to
/// the next work tile `wn` or leave; closes the loop [`open_work_tile`] opened.
pub(super) fn next_work_tile(em: &mut Emitter<'_>) {
    em.line("it += n_tiles;");
    em.open("if (wn >= n_work)");
    em.line("break;");
    em.close();
    em.line("w = wn;");
    em.close();
}

/// The TMA producer: one thread of the producer warpgroup waits for each stage's release, arms
/// its `full` barrier with the tile's bytes and issues the copies of 64-column boxes of K and V.
/// A persistent tile's producer loops over work tiles: it fetches the next one from the counter
/// in scratch before copying this one's, publishes it to the consumers through the two-slot
/// schedule ring once this one's copies are issued, and the last block to finish fetching zeroes
/// the counters for the next launch.
fn tma_producer(em: &mut Emitter<'_>, a: &AttentionBody, t: &AttnTile) {
    let nc = t.bm / 64;
    let stages = t.stages;
    let persistent = t.persistent_blocks();
    let (qbytes, kbytes, stage) = tc_shared(t, a);
    let box_bytes = t.bn * 128;
    em.open(format!("if (tid == {}u)", 128 * nc));
    em.line("sinter_tma_prefetch(&tm0);");
    em.line("sinter_tma_prefetch(&tm1);");
    if persistent {
        em.line("// [0]: the next work tile to hand out past the first wave, [1]: blocks done fetching");
        em.line("unsigned* const sched_ctr = reinterpret_cast<unsigned*>(sinter_ws);");
        work_state(em, a, t);
        open_work_tile(em, a, t);
        em.line("const unsigned wn = atomicAdd(sched_ctr, 1u) + gridDim.x; // fetched before this tile's copies");
    }
    let generic = em.attn_generic;
    let coord = |o: &AttnOperand, n: &str| {
        if generic {
            return super::attention_generic::map_coords(n);
        }
        let g = o.group.max(1);
        let h = if a.heads / g > 1 { format!("(int)(bh % {}u / {g}u)", a.heads) } else { "0".into() };
        let b = if a.batch > 1 { format!("(int)(bh / {}u)", a.heads) } else { "0".into() };
        (h, b)
    };
    let ((kh, kb), (vh, vb)) = (coord(&a.k, "k"), coord(&a.v, "v"));
    em.line(format!("const int kh = {kh}, kb = {kb}, vh = {vh}, vb = {vb};"));
    em.line("#pragma unroll 1");
    em.open("for (unsigned j = 0; j < n_tiles; ++j)");
    let g = if persistent { "(it + j)" } else { "j" };
    em.line(format!("const unsigned slot = {g} % {stages}u, full = full0 + slot * 8u;"));
    em.line(format!(
        "sinter_mbar_wait_or_trap(empty0 + slot * 8u, ({g} / {stages}u + 1u) & 1u); // tile j - {stages} released"
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
    if persistent {
        em.line(
            "sinter_mbar_wait_or_trap(sched0 + 16u + wi % 2u * 8u, (wi / 2u + 1u) & 1u); // publication wi - 2 read",
        );
        em.line("sinter_st_shared_u32(sched0 + 32u + wi % 2u * 4u, wn);");
        em.line("sinter_mbar_arrive(sched0 + wi % 2u * 8u); // publication wi: the work tile after tile wi");
        next_work_tile(em);
        em.line("__threadfence(); // this block's last fetch precedes its count");
        em.open("if (atomicAdd(sched_ctr + 1, 1u) == gridDim.x - 1u)");
        em.line("sched_ctr[0] = 0u; // the last block to finish fetching: zero for the next launch");
        em.line("sched_ctr[1] = 0u;");
        em.close();
    }
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
/// `mx`, `l` initialized to the end of the last `P V`. `pack` names the bf16/f16 pair conversion
/// ([`super::half::pack2`]). A persistent tile's key tiles sit in the ring after the `it` of earlier work
/// tiles; once its last `Q Kᵀ` is done, each consumer reads the next work tile `wn` (publication
/// `wi` of the schedule ring) and copies its Q rows, and it releases the last key tile's stage too
/// (a later work tile refills it).
pub(super) fn consumer_loop(
    em: &mut Emitter<'_>,
    a: &AttentionBody,
    t: &AttnTile,
    fold: Option<f64>,
    pack: &str,
) -> Result<(), RenderError> {
    debug_assert!(t.warp_specialized());
    let nc = t.bm / 64;
    // Ping-pong turns between the consumers of a fixed-grid tile; a persistent tile's consumers
    // issue as they go (module docs, "Measured").
    let persistent = t.persistent_blocks();
    let turns = nc > 1 && !persistent;
    let (bn8, bn16, dv8, stages) = (t.bn / 8, t.bn / 16, a.dv as u32 / 8, t.stages);
    let (qbytes, kbytes, stage) = tc_shared(t, a);
    // A key tile's place in the ring (counted over the block's work tiles when persistent).
    let ring = |x: &str| {
        if persistent {
            format!("(it + {x})")
        } else if x.contains(' ') {
            format!("({x})")
        } else {
            x.to_string()
        }
    };
    let sync = |em: &mut Emitter<'_>| {
        if turns {
            em.line("sinter_bar_sync<256>(1u + wg); // this warpgroup's turn to issue");
        }
    };
    let arrive = |em: &mut Emitter<'_>| {
        if turns {
            em.line(format!("sinter_bar_arrive<256>(1u + (wg + 1u) % {nc}u); // the next warpgroup's turn"));
        }
    };
    // O's rescaling by the last softmax's `al`: with a folded scale, between the issue of the
    // next `Q Kᵀ` (which it overlaps) and that of `P V` (which reads O), FlashAttention-3's order,
    // off the path from one `P V`'s wait to the next issue. A score with loads of its own (masks,
    // biases) keeps it after the wait: with it between the issues, NVRTC spilled 28-100 bytes
    // at bn 128 (the compile test's additive-mask case).
    let early = fold.is_some();
    let rescale = |em: &mut Emitter<'_>| {
        if early {
            em.line(format!("sinter_reg_fence<{dv8}>(o[0]); // after the issue before"));
        }
        rescale_o(em, dv8);
        if early {
            em.line("sinter_wgmma_fence(); // o rescaled in registers");
        }
    };
    em.line(format!("unsigned pf[{bn16}][4]; // P of the tile whose P V is next"));
    em.line("float al[1][2]; // the rescaling of o that the next tile's softmax found");
    if turns {
        em.line(format!("if (wg == {}u) sinter_bar_arrive<256>(1u); // warpgroup 0 issues first", nc - 1));
    }
    em.open("");
    if persistent {
        em.line(format!("sinter_mbar_wait(full0 + it % {stages}u * 8u, it / {stages}u & 1u); // key tile 0"));
        em.line(format!("const unsigned sk = s_base + {qbytes}u + it % {stages}u * {stage}u;"));
    } else {
        em.line("sinter_mbar_wait(full0, 0u); // key tile 0");
        em.line(format!("const unsigned sk = s_base + {qbytes}u;"));
    }
    em.line(format!("float s[1][{bn8}][4];"));
    sync(em);
    em.line("sinter_wgmma_fence();");
    qk_issue(em, a, t, "sk");
    em.line("sinter_wgmma_commit();");
    arrive(em);
    em.line("sinter_wgmma_wait<0>();");
    em.line(format!("sinter_reg_fence<{bn8}>(s[0]);"));
    emit_scores(em, a, t, fold, "0u")?;
    emit_softmax(em, t, a.dv as u32, early);
    p_frags(em, t, pack);
    em.close();
    // One step: tile `kt + 1`'s `Q Kᵀ` and softmax beside tile `kt`'s `P V`.
    em.open("for (unsigned kt = 0; kt + 1u < n_tiles; ++kt)");
    em.line("const unsigned nk = kt + 1u;");
    let (rk, rn) = (ring("kt"), ring("nk"));
    em.line(format!("sinter_mbar_wait(full0 + {rn} % {stages}u * 8u, {rn} / {stages}u & 1u); // key tile kt + 1"));
    em.line(format!("const unsigned sv = s_base + {qbytes}u + {rk} % {stages}u * {stage}u + {kbytes}u;"));
    em.line(format!("const unsigned sk = s_base + {qbytes}u + {rn} % {stages}u * {stage}u;"));
    em.line(format!("float s[1][{bn8}][4];"));
    em.line(format!("sinter_reg_fence<{dv8}>(o[0]);"));
    sync(em);
    em.line("sinter_wgmma_fence(); // pf written in registers");
    qk_issue(em, a, t, "sk");
    em.line("sinter_wgmma_commit(); // S of tile kt + 1");
    if early {
        rescale(em);
    }
    pv_issue(em, a, t, "sv");
    em.line("sinter_wgmma_commit(); // O += P V of tile kt");
    arrive(em);
    em.line("sinter_wgmma_wait<1>(); // S done; P V may still run");
    em.line(format!("sinter_reg_fence<{bn8}>(s[0]);"));
    emit_scores(em, a, t, fold, "kt + 1u")?;
    emit_softmax(em, t, a.dv as u32, true);
    em.line("sinter_wgmma_wait<0>();");
    em.line(format!("sinter_reg_fence<{dv8}>(o[0]);"));
    em.line(format!("if (lane == 0u) sinter_mbar_arrive(empty0 + {rk} % {stages}u * 8u); // tile kt read"));
    if !early {
        rescale(em);
    }
    p_frags(em, t, pack);
    em.close();
    if persistent {
        // Every Q Kᵀ of this warpgroup is done: its Q rows may be overwritten.
        em.line("sinter_mbar_wait(sched0 + wi % 2u * 8u, wi / 2u & 1u); // publication wi: the next work tile");
        em.line("const unsigned wn = sinter_ld_shared_u32(sched0 + 32u + wi % 2u * 4u);");
        em.line("sinter_mbar_arrive(sched0 + 16u + wi % 2u * 8u); // read");
        em.open("if (wn < n_work)");
        em.line("// its Q rows, copied while this tile's last P V and epilogue run");
        q_copies_of(em, a, t, "wn");
        em.close();
    }
    // The last tile's P V (a persistent tile releases its stage; else it is never waited for again).
    em.open("");
    let rl = ring("n_tiles - 1u");
    em.line(format!("const unsigned sv = s_base + {qbytes}u + {rl} % {stages}u * {stage}u + {kbytes}u;"));
    em.line(format!("sinter_reg_fence<{dv8}>(o[0]);"));
    sync(em);
    em.line("sinter_wgmma_fence(); // pf written in registers");
    if early {
        rescale(em);
    }
    pv_issue(em, a, t, "sv");
    em.line("sinter_wgmma_commit();");
    em.line("sinter_wgmma_wait<0>();");
    em.line(format!("sinter_reg_fence<{dv8}>(o[0]);"));
    if persistent {
        em.line(format!("if (lane == 0u) sinter_mbar_arrive(empty0 + {rl} % {stages}u * 8u); // the last tile read"));
    }
    if turns {
        em.line(format!(
            "if (wg + 1u < {nc}u) sinter_bar_arrive<256>(2u + wg); // after the wait: no branch inside the product"
        ));
    }
    em.close();
    Ok(())
}

#[cfg(test)]
mod tests;
