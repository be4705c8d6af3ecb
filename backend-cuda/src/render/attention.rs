//! Fused attention ([`AttentionBody`]): four templates, chosen by shape and dtype.
//!
//! * **Tensor cores** (`attention_tc`, `attention_wgmma`): bf16/f16 operands with probabilities
//!   rounded to the same dtype, `d` and `dv` multiples of 16 up to 256, rows 8-element aligned.
//!   FlashAttention: a block owns [`AttnTile::bm`] query rows of one flat batch; K and V tiles of
//!   [`AttnTile::bn`] keys stream through a `cp.async` ring; f32 accumulators, online softmax in
//!   registers. The products run on `mma.sync` m16n8k16 (sm_80+, FlashAttention-2) or, on sm_90a
//!   with head dims that are multiples of 64, on `wgmma` with 128-byte-swizzled tiles, optionally
//!   with the next tile's `Q Kᵀ` and softmax overlapping this tile's `P V`, or warp-specialized
//!   (`attention_pingpong`: a producer warpgroup feeding an `mbarrier` ring, consumer warpgroups
//!   taking turns to issue their products) ([`AttnEngine`]).
//! * **Decode** (`attention_rows`): at most [`DECODE_M`] queries, 16-byte-aligned f32/f16/bf16
//!   rows. One block per flat batch (under GQA per group of query heads sharing K and V,
//!   [`decode_pack`]), or where the heads are too few to fill the GPU (generation at batch 1) up
//!   to 16 blocks per flat batch each taking a chunk of the keys, the last to finish combining
//!   their states through the kernel's scratch ([`default_decode_split`]); keys split over the
//!   warps (and over lane groups inside a warp), 16-byte loads, partial (max, sum, output)
//!   combined through shared memory. Where the heads fill the SMs but the template would split
//!   its keys, or several queries share a head, the tensor-core tile takes decode shapes instead
//!   ([`decode_tile`]; one query under GQA through the rewrite of `attention_pack`, the group's
//!   query heads as the tile's rows); one query over heads enough for four blocks an SM keeps
//!   the template (eight keys in flight a lane group), which compiles in a third of the tile's
//!   time and ran as fast (session 32). Its common case (a block per flat batch, no packed
//!   heads) is written in PTX (`ptx::decode`, the same plan: [`template`] and
//!   `attention_rows::decode_plan`), so it costs only the driver's JIT.
//! * **Tiled CUDA cores** (`attention_fma`, [`AttnEngine::Fma`]): f32, f16 and bf16 operands the
//!   tensor-core templates do not take (f32 above all), value head dims up to 256. A block of 256
//!   threads owns up to 64 query rows; Q, one K tile and one V tile in shared memory (f32), S and
//!   O as per-thread register tiles of `fmaf` outer products, online softmax over 16-thread rows.
//! * **Rows** (`attention_rows`): everything else. One warp per query row, 32 keys at a time
//!   (a lane per key for the score, a lane per output column for the product), online softmax;
//!   f32 dot products in the interpreter's order.
//!
//! Every template evaluates the score expression per element with `Acc(1)` = the raw f32 dot
//! product, `Var::M` and `Var::Key` of that element, skips or masks keys past `i + o` (causal),
//! never evaluates the score (whose loads may be masks) outside `m x kv`, and runs the epilogue per
//! output element with `Acc(0)` = the output divided by the row sum once. A row whose logits are
//! all `-inf` (sum 0) comes out NaN, and a NaN logit makes its row NaN, as the interpreter's.
//!
//! Measured on an H100 (bf16, CUDA events over 20 launches, `device_cuda.sh attention`, torch's
//! SDPA in the same call): b8 h16 s1024 d64 0.100 ms on `wgmma` (342 TFLOP/s; `mma.sync` 0.146;
//! torch 0.082), b8 h16 s2048 d128 causal 0.411 ms with the overlapped schedule (334 TFLOP/s;
//! `mma.sync` 0.586; torch 0.262), decode b32 h32 m1 kv4096 d128 0.704 ms (3.05 TB/s; torch 0.701).
//! `mma.sync` issued at about 38% of the tensor pipe with 8 warps per SM (ncu). What torch's Hopper
//! kernels had beyond ours: TMA loads by a producer warp, and two consumer warpgroups taking
//! turns between softmax and products; [`AttnEngine::WgmmaPingPong`] adds the second and the
//! producer (with `cp.async`, not TMA), not yet measured on a device, so no default picks it.
//! Computing the next tile's `Q Kᵀ` before this tile's softmax
//! on `mma.sync` (a second S in registers) was tried and measured slower (d64: 0.193 ms against
//! 0.148; 255 registers); on `wgmma` the same overlap wins at d128 (0.411 against 0.433) because
//! the products run asynchronously, but only once no branch separates a product from its wait
//! (with one, ptxas serialized the pipeline, C7514, and the overlap measured 0.444).
//!
//! On an H200 (BENCHMARKS.md session 15, torch's SDPA timed the same way in the same call): d64
//! 0.0840 ms on the persistent TMA tile 64x128 (1.02x torch), causal d128 0.2702 on the TMA
//! ping-pong tile 128x128 (0.98x), d128 0.4481 (0.95x). Most of the step from session 14 came
//! from the epilogue storing each thread's two adjacent columns as one vector (2-byte scattered
//! stores had cost 10-14%).
//!
//! At d64 the one-warpgroup tile was latency-bound, not bandwidth- or pipe-bound (ncu on an
//! H200, BENCHMARKS.md session 13: tensor pipe 39% busy, the `ex2` unit 47%, shared-memory
//! wavefronts 29%, about three warps per scheduler issuing every 5.8 cycles; the largest stall a
//! wait on fixed-latency dependencies, 1.5 cycles per instruction). Tried there and not kept: Q as
//! register fragments (+30 registers, two blocks per SM instead of three: 0.118 ms against 0.098),
//! a quarter of the exponentials as a polynomial on the FMA pipe (issue slots the loop needed:
//! 0.105), 64-key one-warpgroup tiles (0.102), the overlapped schedule in two stages' memory
//! (0.103-0.137), and the softmax's row maximum and sum in four parallel chains (no change).

use sinter_core::DType;
use sinter_core::ir::BinaryOp;
use sinter_core::kernel::{AttentionBody, AttnOperand, Expr, ExprId, Kernel, Var};

use super::analysis::{acc_uses, depends_on, store_roots};
pub use super::attention_tile::{AttnEngine, AttnTile};
use super::emit::{AccVal, Emitter};
use super::matmul::lit;
use super::ops::cast;
use super::{Body, CudaCaps, RenderError, Tuning};

/// Queries per flat batch up to which the decode template applies.
pub const DECODE_M: usize = 4;

/// Fewest keys per block of a default split of the decode template's keys.
const DECODE_MIN_SPLIT_KEYS: usize = 256;

/// The default split of the decode template's keys over blocks ([`Tuning::split_k`], flash
/// decoding): 1 where the heads alone give every SM four blocks; else enough splits for four
/// blocks per SM, each of at least [`DECODE_MIN_SPLIT_KEYS`] keys, at most
/// [`super::MAX_SPLIT_K`]. Measured on an H200 (BENCHMARKS.md, session 14), batch 1 with 32
/// heads of 4096 keys at d128: 148 us on 32 blocks, 77 / 43 / 28 / 26 / 23 us split 2 / 4 / 8 /
/// 9 / 16 (torch's SDPA 28.5 us); at batch 32 (1024 heads) a split of 2 to 16 was 2-4% slower
/// than none.
pub(super) fn default_decode_split(a: &AttentionBody, caps: &CudaCaps, pack: usize) -> u32 {
    let heads = ((a.batch * a.heads) / pack.max(1)).max(1) as u64;
    let target = 4 * u64::from(caps.sm_count.max(1));
    if heads >= target {
        return 1;
    }
    let by_grid = target.div_ceil(heads);
    let by_keys = (a.kv / DECODE_MIN_SPLIT_KEYS) as u64;
    by_grid.min(by_keys).min(u64::from(super::MAX_SPLIT_K)).max(1) as u32
}

/// The tensor-core tile a decode shape (at most [`DECODE_M`] queries) takes by default instead of
/// the decode template: where the flat batches give at least three quarters of the SMs a block
/// (the tile holds one block an SM), each query head has its own K and V (no GQA), and a `wgmma`
/// tile of 64 padded query rows and 128 keys a stage applies. The padded products are free there
/// (64 FLOP a byte of K and V, below the ridge); the tile streams K and V in 32 KB stages through
/// `cp.async` with few warps, as cuDNN's decode kernel does. Measured on an H200 (BENCHMARKS.md,
/// session 21, every candidate timed, bf16, kv 4096 unless said):
/// * b32 h32 d128: 0.4681 ms against the decode template's best 0.4691 (block 256; its default
///   0.4733, 94-95% of DRAM peak under ncu); torch's SDPA (cuDNN, 96%) 0.4765 in `bench`'s timing;
/// * b32 h32 d64 0.2370 against 0.2376; b8 h16 d128 (128 heads) 0.0648 against the split
///   decode's 0.0676; b16 h32 with 4 queries, kv 2048: 0.1242 against 0.2049 (the decode template
///   holds four queries' state in 153 registers);
/// * not taken: b1 h32 d128 (32 blocks) 0.0525 against the split decode's 0.0227; GQA b32 h32 over
///   8 KV heads 0.3684 against the decode template's 0.2408-0.2848 (each query head's block reads
///   its group's K and V again);
/// * not taken by default either: one query where the heads alone fill the SMs (no split), as
///   b32 h32 above, since the decode template keeps eight keys in flight a lane group there
///   (session 32 call 2, same call: 0.4766-0.4767 ms against the tile's 0.4772-0.4774; max-
///   autotune's timer put it ahead of every tile), and compiles cold in 0.19-0.30 s against the
///   tile's 0.63-0.73 (the workload compiled cold in 1.43 s against torch.compile's 1.01 in session
///   31). max-autotune still times the tile.
pub(super) fn decode_tile(a: &AttentionBody, caps: &CudaCaps) -> Option<AttnTile> {
    let gqa = a.k.group > 1 || a.v.group > 1;
    if a.m > DECODE_M || gqa || (a.m == 1 && default_decode_split(a, caps, 1) == 1) {
        return None;
    }
    few_query_tile(a, caps)
}

/// Threads per block of the decode template by default: 256 for one query slot a block (one
/// query, no packed heads: b32 h32 kv4096 d128 0.4691 ms against 0.4733 at 128, d64 0.2376 against
/// 0.2442, b1 h32 split 16 0.0226 against 0.0227; H200, BENCHMARKS.md session 21; with eight
/// keys in flight, session 32 call 2: 0.4766 against 0.4799-0.4806 at 512 threads and four), else
/// 128 (four packed query heads: 0.1837 at 128, 0.1822 at 64; their state takes ~150 registers a
/// thread).
fn default_decode_block(a: &AttentionBody) -> u32 {
    if a.m * decode_pack(a) == 1 { 256 } else { 128 }
}

/// The tile of few query rows a block each ([`decode_tile`], and the GQA rewrite of
/// `attention_pack`, whose rows are a group's query heads): `wgmma`, 64 rows, 128 keys a stage,
/// three stages, one block an SM (214 KB of shared memory at d128), where the flat batches give at
/// least three quarters of the SMs a block and the tile takes `a`.
pub(super) fn few_query_tile(a: &AttentionBody, caps: &CudaCaps) -> Option<AttnTile> {
    let blocks = (a.batch * a.heads) as u64;
    if blocks * 4 < 3 * u64::from(caps.sm_count.max(1)) || wgmma_applies(a, caps).is_err() {
        return None;
    }
    let tile = AttnTile::overlapped(64, 128, 3);
    check_attn(&tile, caps, a).is_ok().then_some(tile)
}

/// Most query slots (queries times packed query heads) of the decode template's default packing.
const DECODE_PACK_SLOTS: usize = 8;

/// Query heads per block of the decode template ([`super::attention_rows::render_decode`]'s
/// `pack`): under GQA the most of a K/V head's query heads (a divisor of the group) whose queries
/// fit [`DECODE_PACK_SLOTS`] slots, so K and V are read once per block instead of once per query
/// head; 1 without GQA.
pub(super) fn decode_pack(a: &AttentionBody) -> usize {
    let g = a.k.group.max(1);
    if g == 1 || a.v.group != g || a.m == 0 {
        return 1;
    }
    (1..=g).rev().find(|&p| g.is_multiple_of(p) && p * a.m <= DECODE_PACK_SLOTS).unwrap_or(1)
}

/// Whether `o`'s rows, heads and batches all start on a multiple of 8 elements (16-byte copies).
fn aligned(o: &AttnOperand, a: &AttentionBody, rows: usize, per: usize) -> bool {
    let ok = |s: usize, n: usize| n <= 1 || s.is_multiple_of(per);
    o.offset.is_multiple_of(per)
        && ok(o.s_row, rows)
        && ok(o.s_batch, a.batch)
        && ok(o.s_head, a.heads / o.group.max(1))
}

/// Whether the tensor-core template applies to `a`: `Err` says why not.
pub fn tc_applies(a: &AttentionBody, caps: &CudaCaps) -> Result<(), String> {
    if !matches!(a.in_dtype, DType::BF16 | DType::F16) || a.p_dtype != a.in_dtype {
        return Err(format!(
            "operands {} with probabilities in {} (tensor cores take bf16/f16)",
            a.in_dtype, a.p_dtype
        ));
    }
    if caps.sm.0 < 8 {
        return Err(format!("sm_{}{} has no mma.sync m16n8k16 (sm_80+)", caps.sm.0, caps.sm.1));
    }
    if !a.d.is_multiple_of(16) || !a.dv.is_multiple_of(16) || a.d == 0 || a.dv == 0 || a.d > 256 || a.dv > 256 {
        return Err(format!("head dims {}/{} (multiples of 16 up to 256)", a.d, a.dv));
    }
    if !aligned(&a.q, a, a.m, 8) || !aligned(&a.k, a, a.kv, 8) || !aligned(&a.v, a, a.kv, 8) {
        return Err("operand rows not 16-byte aligned".into());
    }
    Ok(())
}

/// Elements per 16-byte vector of the decode template, when it applies to `a`.
pub(super) fn decode_width(a: &AttentionBody) -> Option<usize> {
    let w = match a.in_dtype {
        DType::F32 => 4,
        DType::F16 | DType::BF16 => 8,
        _ => return None,
    };
    let fits = a.m <= DECODE_M && a.d.is_multiple_of(w) && a.dv.is_multiple_of(w) && a.d > 0 && a.dv > 0;
    let small = a.d / w <= 64 && a.dv / w <= 64 && a.dv <= 256;
    (fits && small && aligned(&a.q, a, a.m, w) && aligned(&a.k, a, a.kv, w) && aligned(&a.v, a, a.kv, w)).then_some(w)
}

/// Registers per thread the tile's accumulators take (S and O, f32), and with the overlapped
/// schedule the next tile's P fragments that live beside them.
fn acc_regs(t: &AttnTile, a: &AttentionBody) -> u32 {
    let p = if t.engine == AttnEngine::WgmmaOverlap || t.warp_specialized() { t.bn / 4 } else { 0 };
    t.mi() * (t.bn / 8) * 4 + t.mi() * (a.dv as u32 / 8) * 4 + p
}

/// Whether the warps keep their Q fragments in registers (else they reload them from shared
/// memory at every step).
pub(super) fn q_in_regs(t: &AttnTile, a: &AttentionBody) -> bool {
    acc_regs(t, a) + t.mi() * (a.d as u32 / 16) * 4 <= 136
}

/// Whether the `wgmma` variant of the tensor-core template applies to `a` (on top of
/// [`tc_applies`]): `Err` says why not.
pub fn wgmma_applies(a: &AttentionBody, caps: &CudaCaps) -> Result<(), String> {
    tc_applies(a, caps)?;
    if caps.sm != (9, 0) {
        return Err(format!("sm_{}{} has no wgmma (sm_90a only)", caps.sm.0, caps.sm.1));
    }
    if !a.d.is_multiple_of(64) || !a.dv.is_multiple_of(64) {
        return Err(format!("head dims {}/{} (wgmma tiles take multiples of 64)", a.d, a.dv));
    }
    Ok(())
}

/// Shared bytes: the Q tile, then one stage's K tile and (K, V) pair. `mma.sync` tiles pad rows by
/// 8 elements; `wgmma` tiles are unpadded 128-byte-swizzled 64-column blocks.
pub(super) fn tc_shared(t: &AttnTile, a: &AttentionBody) -> (u32, u32, u32) {
    let pad = if t.wgmma() { 0 } else { 8 };
    let q = t.bm * (a.d as u32 + pad) * 2;
    let kb = t.bn * (a.d as u32 + pad) * 2;
    let vb = t.bn * (a.dv as u32 + pad) * 2;
    (q, kb, kb + vb)
}

/// Dynamic shared bytes of the whole tile: Q and `stages` of (K, V), a warp-specialized tile's
/// two `mbarrier`s per stage (and a persistent tile's schedule: two `mbarrier`s per slot of its
/// two-slot ring of work-tile indices, and the indices), plus 1024 bytes of slack for aligning a
/// `wgmma` tile's base to its swizzle period.
pub(super) fn tc_total_shared(t: &AttnTile, a: &AttentionBody) -> u64 {
    let (q, _, st) = tc_shared(t, a);
    let sched = if t.persistent_blocks() { 48 } else { 0 };
    let bars = if t.warp_specialized() { 16 * u64::from(t.stages) + sched } else { 0 };
    u64::from(q) + u64::from(st) * u64::from(t.stages) + bars + if t.wgmma() { 1024 } else { 0 }
}

/// Checks a tile against the template's rules and the device's limits for `a`.
pub fn check_attn(t: &AttnTile, caps: &CudaCaps, a: &AttentionBody) -> Result<(), String> {
    if t.engine == AttnEngine::Fma {
        return super::attention_fma::check(t, caps, a);
    }
    tc_applies(a, caps)?;
    let AttnTile { bm, bn, warps, stages, engine } = *t;
    let wgmma = t.wgmma();
    let row_warps = t.row_warps();
    if row_warps == 0 || bm == 0 || !bm.is_multiple_of(16 * row_warps) || !(1..=2).contains(&t.mi()) {
        return Err(format!("tile {t:?}: bm must be 16 or 32 rows per warp"));
    }
    let max_bn = if wgmma { 256 } else { 128 };
    if !bn.is_multiple_of(16) || !(16..=max_bn).contains(&bn) {
        return Err(format!("tile {t:?}: bn must be a multiple of 16 up to {max_bn}"));
    }
    if !(2..=4).contains(&stages) {
        return Err(format!("tile {t:?}: 2 to 4 stages"));
    }
    if wgmma {
        wgmma_applies(a, caps)?;
        let producer = if t.warp_specialized() { 4 } else { 0 };
        if !bm.is_multiple_of(64) || warps != bm / 16 + producer || bm > 192 {
            return Err(format!(
                "tile {t:?}: wgmma tiles are 1 to 3 warpgroups of 64 rows (warps = bm / 16{})",
                if producer > 0 { " + 4 for the producer" } else { "" }
            ));
        }
        if t.warp_specialized() {
            crate::render::attention_pingpong::check(t, acc_regs(t, a))?;
        }
        if t.tma() {
            crate::render::attention_pingpong::kv_maps(a, t)?;
        }
        // Three warpgroups leave 168 registers a thread (65536 / 384): measured with NVRTC, the
        // kernel spills past 96 accumulators (d128 with 128 keys: 168 registers and 32 spilled bytes).
        if engine == AttnEngine::WgmmaOverlap && stages < 3 {
            return Err(format!("tile {t:?}: the overlapped schedule keeps three tiles in flight (3 or 4 stages)"));
        }
        if bm > 128 && !t.warp_specialized() && acc_regs(t, a) > 96 {
            return Err(format!("tile {t:?}: {} accumulators with 384 threads (at most 96)", acc_regs(t, a)));
        }
    }
    if acc_regs(t, a) > 160 {
        return Err(format!("tile {t:?}: {} accumulators per thread (at most 160)", acc_regs(t, a)));
    }
    if t.threads() > caps.max_threads_per_block {
        return Err(format!("tile {t:?}: {} threads", t.threads()));
    }
    let shared = tc_total_shared(t, a);
    if shared > u64::from(caps.max_dynamic_shared_bytes) {
        return Err(format!("tile {t:?} needs {shared} bytes of shared memory"));
    }
    Ok(())
}

/// Keys up to which a head of at most 64 dimensions takes the one-warpgroup `wgmma` tile by
/// default and max-autotune leaves out the warp-specialized tiles of 128 keys but the persistent
/// two-consumer ones: two key tiles. Measured with NVRTC 13.0 (session 28) at 197-256 keys, those
/// spilled 4-96 bytes or had their `wgmma`s serialized (ptxas C7512), and on an H200 ran 13.0-15.4
/// us against the one-warpgroup tile's 11.0-11.5 (b8 h12); at 129 keys and from 300 they compiled
/// clean.
const SHORT_KV: usize = 256;

/// The tiles that spill at short key lengths (see [`SHORT_KV`]).
fn short_kv_spills(t: &AttnTile, a: &AttentionBody) -> bool {
    let clean = t.persistent_blocks() && t.bm > 64;
    t.warp_specialized() && t.bn == 128 && !clean && a.d.max(a.dv) <= 64 && a.kv <= SHORT_KV
}

/// The default tile: by head dimension, smaller when the grid would not fill the device.
pub(super) fn default_attn(a: &AttentionBody, caps: &CudaCaps) -> AttnTile {
    default_attn_with(a, caps, true)
}

/// The tile [`default_attn`] picks where a persistent grid would not do (a program compiled for
/// a dynamic batch: a persistent grid has no [`super::GridSplit`], so it would run the bound's
/// work at every smaller batch), or `None` where the default is not persistent (decode shapes
/// among them: their defaults, the decode template, [`decode_tile`] and the GQA rewrite, all shrink
/// with the batch).
pub fn fixed_grid_default(a: &AttentionBody, caps: &CudaCaps) -> Option<AttnTile> {
    (decode_width(a).is_none() && tc_applies(a, caps).is_ok() && default_attn(a, caps).persistent_blocks())
        .then(|| default_attn_with(a, caps, false))
}

/// [`default_attn`]; `persistent`: whether it may pick a persistent tile.
fn default_attn_with(a: &AttentionBody, caps: &CudaCaps, persistent: bool) -> AttnTile {
    let dmax = a.d.max(a.dv);
    let blocks = |t: &AttnTile| (a.m as u64).div_ceil(u64::from(t.bm)) * (a.batch * a.heads) as u64;
    if wgmma_applies(a, caps).is_ok() {
        // Measured on an H100 (`device_cuda.sh attention`), bf16:
        // * b8 h16 s1024 d64: wgmma 64x128 one warpgroup s2 0.100 ms; overlapped 64x64 s4 0.103,
        //   128x64 s3 0.106; wgmma 128x64 s2 0.110; mma.sync's best 0.146.
        // * b8 h16 s2048 d128 causal: overlapped 128x128 s3 0.411 ms; wgmma 128x128 s3 0.433,
        //   64x128 0.521; mma.sync's best 0.586.
        // * the same causal shape, session 7 (`scripts/session7/d2.sh`): the TMA ping-pong tile
        //   128x128 two consumers three stages 0.333 ms (412 TFLOP/s), the overlapped default
        //   0.415; at d64 the TMA tiles were slower (best 64x128 0.109 against 0.0996).
        // * b8 h16 s1024 d64, H200 (session 15, four calls): the persistent TMA tile 64x128 one
        //   consumer three stages 0.0982-0.0986 ms, the one-warpgroup wgmma 64x128 s2 0.1026-0.1033
        //   (torch's SDPA 0.0839-0.0863); with the epilogue's paired stores 0.0840 against 0.0913
        //   (torch 0.0856). A program compiled for a dynamic batch takes the second
        //   ([`fixed_grid_default`]).
        // * b8 h12 d64 at 128-256 keys, H200 (session 28, `examples/attn_tiles`): the one-warpgroup
        //   wgmma 64x128 s2 11.0-11.5 us at 197 and 256 tokens (ViT-B/16's 197, its legacy export's
        //   packed QKV or not) against the persistent tile's 13.0-14.0, whose `wgmma`s ptxas
        //   serialized (C7512) for want of registers; at 128 tokens 8.13 against 8.35 us. With two
        //   key tiles or fewer the one-warpgroup tile is the default ([`SHORT_KV`]).
        let picks: &[AttnTile] = if dmax <= 64 && persistent && a.kv > SHORT_KV {
            &[AttnTile::persistent(64, 128, 3), AttnTile::hopper(64, 128, 2)]
        } else if dmax <= 64 {
            &[AttnTile::hopper(64, 128, 2)]
        } else if dmax <= 128 {
            // TMA needs maps the copy engine takes (kv >= 128, aligned strides): else overlapped.
            &[AttnTile::pingpong_tma(128, 128, 3), AttnTile::overlapped(128, 128, 3)]
        } else {
            &[AttnTile::hopper(64, 64, 2)]
        };
        let small = AttnTile::overlapped(64, 64, 4);
        for &t in picks.iter().chain(&[small, AttnTile::hopper(64, 64, 2)]) {
            if check_attn(&t, caps, a).is_ok() && (t.bm == 64 || blocks(&t) >= u64::from(caps.sm_count)) {
                return t;
            }
        }
    }
    // Measured on an H100 at b8 h16 s1024 d64: 128x64 w4 s3 0.150 ms, the other candidates 0.157 to 0.194.
    let big = if dmax <= 64 {
        AttnTile::mma(128, 64, 4, 3)
    } else if dmax <= 128 {
        // Measured on an H100 at b8 h16 s2048 d128 causal: 64x64 w4 s2 0.622 ms, 128x64 w8 s2 0.661.
        AttnTile::mma(64, 64, 4, 2)
    } else {
        AttnTile::mma(64, 32, 4, 2)
    };
    let small = AttnTile::mma(64, big.bn, 4, 2);
    if (blocks(&big) < u64::from(caps.sm_count) || check_attn(&big, caps, a).is_err())
        && check_attn(&small, caps, a).is_ok()
    {
        return small;
    }
    big
}

/// The tunings max-autotune times for `a` (before the renderer's deduplication).
pub(super) fn candidates(a: &AttentionBody, caps: &CudaCaps) -> Vec<Tuning> {
    let mut out = Vec::new();
    if tc_applies(a, caps).is_ok() {
        for t in AttnTile::CANDIDATES.into_iter().filter(|t| !short_kv_spills(t, a)) {
            out.push(Tuning { attn: Some(t), ..Tuning::default() });
        }
    }
    if tc_applies(a, caps).is_err() && a.m > DECODE_M && super::attention_fma::applies(a).is_ok() {
        for t in AttnTile::FMA_CANDIDATES {
            out.push(Tuning { attn: Some(t), ..Tuning::default() });
        }
    }
    if tc_applies(a, caps).is_err() || a.m <= DECODE_M {
        for b in [64u32, 128, 256, 512] {
            out.push(Tuning { block: Some(b), ..Tuning::default() });
        }
    }
    if decode_width(a).is_some() {
        for s in [1u32, 2, 4, 8, 16].into_iter().filter(|&s| s as usize * DECODE_MIN_SPLIT_KEYS / 4 <= a.kv) {
            out.push(Tuning { block: Some(128), split_k: Some(s), ..Tuning::default() });
        }
    }
    out
}

/// The template [`render`] takes for an attention body and tuning: what both renderers follow
/// (the CUDA C++ here; `ptx::decode` writes the decode template's common case in PTX).
pub(super) enum Template {
    /// A tensor-core tile (`attention_tc`).
    TensorCores(AttnTile),
    /// The tiled CUDA-core template (`attention_fma`).
    Fma(AttnTile),
    /// The decode template (`attention_rows::render_decode`): 16-byte vectors of `w` elements,
    /// `block` threads, `splits` blocks per head, `pack` query heads per block.
    Decode {
        /// Elements per 16-byte vector ([`decode_width`]).
        w: usize,
        /// Threads per block.
        block: u32,
        /// Blocks per head ([`Tuning::split_k`], else [`default_decode_split`]).
        splits: u32,
        /// Query heads per block ([`decode_pack`]).
        pack: usize,
    },
    /// The row template (`attention_rows::render_rows`) of `block` threads.
    Rows(u32),
}

/// Which template renders `a` with `t`; `Err` exactly where [`render`] fails before a template
/// writes anything.
pub(super) fn template(
    em: &Emitter<'_>,
    a: &AttentionBody,
    caps: &CudaCaps,
    t: &Tuning,
) -> Result<Template, RenderError> {
    let kname = em.k.name.clone();
    let invalid = |msg: String| RenderError::InvalidTuning { kernel: kname.clone(), msg };
    if t.vectorize.is_some() || t.persistent.is_some() || t.tile.is_some() || t.mma.is_some() {
        return Err(invalid("attention kernels take only `attn`, `block` and (decode) `split_k`".into()));
    }
    let total = [a.batch * a.heads, a.m, a.kv, a.d, a.dv];
    if total.iter().any(|&x| x > i32::MAX as usize) || (a.batch * a.heads).saturating_mul(a.m) > i32::MAX as usize {
        return Err(em.err(format!("attention {total:?} exceeds the 32-bit extents")));
    }
    if let Some(tile) = t.attn {
        if t.split_k.is_some() {
            return Err(invalid("split_k: only the decode template splits its keys".into()));
        }
        if tile.engine == AttnEngine::Fma {
            check_attn(&tile, caps, a).map_err(|e| invalid(format!("no tiled attention: {e}")))?;
            return Ok(Template::Fma(tile));
        }
        check_attn(&tile, caps, a).map_err(|e| invalid(format!("no tensor-core attention: {e}")))?;
        return Ok(Template::TensorCores(tile));
    }
    let decode = decode_width(a);
    if (decode.is_none() || a.m > DECODE_M) && t.block.is_none() {
        if tc_applies(a, caps).is_ok() {
            return Ok(Template::TensorCores(default_attn(a, caps)));
        }
        if let Some(tile) = super::attention_fma::default_tile(a, caps) {
            return Ok(Template::Fma(tile));
        }
    }
    if decode.is_some()
        && t.block.is_none()
        && t.split_k.is_none()
        && let Some(tile) = decode_tile(a, caps)
    {
        return Ok(Template::TensorCores(tile));
    }
    let block = t.block.unwrap_or(if decode.is_some() { default_decode_block(a) } else { 128 });
    if block == 0 || !block.is_multiple_of(32) || block > caps.max_threads_per_block.min(1024) {
        return Err(invalid(format!("block {block}: a multiple of 32 up to the device limit")));
    }
    match decode {
        Some(w) => {
            let pack = decode_pack(a);
            let splits = t.split_k.unwrap_or_else(|| default_decode_split(a, caps, pack));
            if splits == 0 || splits > super::MAX_SPLIT_K || splits as usize > a.kv.max(1) {
                return Err(invalid(format!(
                    "split_k {splits}: the decode template splits its {} keys over 1 to {} blocks",
                    a.kv,
                    super::MAX_SPLIT_K
                )));
            }
            Ok(Template::Decode { w, block, splits, pack })
        }
        None if t.split_k.is_some() => Err(invalid("split_k: only the decode template splits its keys".into())),
        None => Ok(Template::Rows(block)),
    }
}

/// Renders an attention body with the template the tuning and shape choose ([`template`]).
pub(super) fn render(
    em: &mut Emitter<'_>,
    a: &AttentionBody,
    caps: &CudaCaps,
    t: &Tuning,
) -> Result<Body, RenderError> {
    match template(em, a, caps, t)? {
        Template::TensorCores(tile) => super::attention_tc::render(em, a, &tile, t, caps),
        Template::Fma(tile) => super::attention_fma::render(em, a, &tile, t),
        Template::Decode { w, block, splits, pack } => {
            super::attention_rows::render_decode(em, a, w, block, splits, pack)
        }
        Template::Rows(block) => super::attention_rows::render_rows(em, a, block),
    }
}

/// The declarations of `<name>_base`: operand `o`'s element offset for flat batch `bh`.
pub(super) fn emit_base(em: &mut Emitter<'_>, name: &str, o: &AttnOperand, heads: usize) -> &'static str {
    let ty = base_type(em, o);
    let b = if ty == "unsigned" { "bh".to_string() } else { format!("({ty})bh") };
    let mut s = lit(ty, o.offset as u64);
    if o.s_batch != 0 {
        s.push_str(&format!(" + {b} / {} * {}", lit(ty, heads as u64), lit(ty, o.s_batch as u64)));
    }
    if o.s_head != 0 && heads / o.group.max(1) > 1 {
        s.push_str(&format!(
            " + {b} % {} / {} * {}",
            lit(ty, heads as u64),
            lit(ty, o.group.max(1) as u64),
            lit(ty, o.s_head as u64)
        ));
    }
    em.decl(&format!("{name}_base"), format!("const {ty} {name}_base = {s}; // a{}", o.arg));
    ty
}

/// The index type of operand `o`'s base (64-bit past 2^31 elements).
pub(super) fn base_type(em: &Emitter<'_>, o: &AttnOperand) -> &'static str {
    if em.k.args[o.arg].numel > i32::MAX as usize { "unsigned long long" } else { "unsigned" }
}

/// `base + r * s_row + c` in type `ty`.
pub(super) fn row_addr(ty: &str, base: &str, r: &str, s_row: usize, c: &str) -> String {
    let cast = |v: &str| {
        let v = if v.contains(' ') { format!("({v})") } else { v.to_string() };
        if ty == "unsigned" { v } else { format!("({ty}){v}") }
    };
    format!("{base} + {} * {} + {}", cast(r), lit(ty, s_row as u64), cast(c))
}

/// Emits the score parts that depend on neither the query, the key nor the dot product (before the
/// loops); with `m_known`, also those that depend on the query but not the key.
pub(super) fn hoist_score(em: &mut Emitter<'_>, a: &AttentionBody, m_known: bool) -> Result<(), RenderError> {
    let k = em.k;
    let (dm, dk, accs) = (depends_on(k, Var::M), depends_on(k, Var::Key), acc_uses(k));
    em.emit_closure(&[a.score], &|e| (m_known || !dm[e as usize]) && !dk[e as usize] && accs[e as usize].is_none())
}

/// Emits `dst = score` for the element whose raw dot product is `raw` (the names of M and Key set
/// by the caller), inside its own block; with `guard`, only where it holds (else `dst = -inf`).
/// `raw` may be `dst`.
pub(super) fn emit_score(
    em: &mut Emitter<'_>,
    a: &AttentionBody,
    raw: &str,
    dst: &str,
    guard: Option<&str>,
) -> Result<(), RenderError> {
    em.acc.insert(1, AccVal { name: raw.to_string(), dtype: DType::F32 });
    em.open("");
    if let Some(g) = guard {
        em.line("float sv = NINF;");
        em.open(format!("if ({g})"));
    }
    em.emit_closure(&[a.score], &|_| true)?;
    let v = em.value(a.score)?;
    if guard.is_some() {
        em.line(format!("sv = {v};"));
        em.close();
        em.line(format!("{dst} = sv;"));
    } else {
        em.line(format!("{dst} = {v};"));
    }
    em.close();
    em.acc.remove(&1);
    Ok(())
}

/// The scale `c` when the score is `Acc(1) * c` with a positive finite constant `c` (the usual
/// `q k^T / sqrt(d)`): the tensor-core template then folds it into the exponent. The product may be
/// f32 or 16-bit (the kernel IR computes 16-bit expressions in f32 and rounds only at casts *to*
/// 16 bits), and casts to f32 around it are looked through (exported bf16 graphs scale the bf16
/// scores and cast them to f32 for the softmax). (Without looking through them the
/// `attention_b8h16s1024d64_bf16` workload multiplied every score apart and kept the later
/// rescale of O: 94 us against 88 us for the same kernel with the scale folded, ncu on an H200,
/// session 16.)
pub(super) fn folded_scale(k: &Kernel, a: &AttentionBody) -> Option<f64> {
    let e = |id: ExprId| k.exprs.get(id.0 as usize);
    let carried_in_f32 = |d: DType| matches!(d, DType::F32 | DType::BF16 | DType::F16);
    let mut root = a.score;
    while let Expr::Cast(x) = &e(root)?.expr {
        if e(root)?.dtype != DType::F32 || !carried_in_f32(e(*x)?.dtype) {
            return None;
        }
        root = *x;
    }
    let Expr::Binary(BinaryOp::Mul, x, y) = &e(root)?.expr else { return None };
    let c = [(*x, *y), (*y, *x)].into_iter().find_map(|(p, q)| match (&e(p)?.expr, &e(q)?.expr) {
        (Expr::Acc(1), Expr::Const(c)) if e(q)?.dtype == e(p)?.dtype && carried_in_f32(e(p)?.dtype) => Some(*c),
        _ => None,
    })?;
    let c = c as f32;
    (c.is_finite() && c > 0.0).then_some(f64::from(c))
}

/// The epilogue of one output element: `Acc(0)` = `value` (f32), names of M and N set by the
/// caller; values independent of N should have been emitted by [`hoist_epilogue`].
pub(super) fn emit_epilogue(em: &mut Emitter<'_>, a: &AttentionBody, value: &str) -> Result<(), RenderError> {
    let roots: Vec<ExprId> = a.stores.iter().flat_map(store_roots).collect();
    em.acc.insert(0, AccVal { name: format!("({value})"), dtype: DType::F32 });
    em.emit_closure(&roots, &|_| true)?;
    for s in &a.stores {
        em.emit_store(s)?;
    }
    em.acc.remove(&0);
    Ok(())
}

/// Emits the epilogue values that depend on neither N nor the output (with `m_known`, values of
/// M are emitted too; else only those of the batch).
pub(super) fn hoist_epilogue(em: &mut Emitter<'_>, a: &AttentionBody, m_known: bool) -> Result<(), RenderError> {
    let k = em.k;
    let roots: Vec<ExprId> = a.stores.iter().flat_map(store_roots).collect();
    let (dm, dn, accs) = (depends_on(k, Var::M), depends_on(k, Var::N), acc_uses(k));
    em.emit_closure(&roots, &|e| (m_known || !dm[e as usize]) && !dn[e as usize] && accs[e as usize].is_none())
}

/// `x` (f32) rounded to the probabilities' dtype and back to f32.
pub(super) fn round_p(em: &mut Emitter<'_>, a: &AttentionBody, x: &str) -> String {
    if a.p_dtype == DType::F32 || a.p_dtype == DType::F64 {
        return x.to_string();
    }
    let r = cast(x, DType::F32, a.p_dtype, &mut em.h);
    cast(&r, a.p_dtype, DType::F32, &mut em.h)
}

/// The common start of every template: `NINF`.
pub(super) fn emit_consts(em: &mut Emitter<'_>) {
    em.decl("NINF", "const float NINF = -__int_as_float(0x7f800000);");
}
