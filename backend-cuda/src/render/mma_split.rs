//! Split-k for the `mma.sync` template ([`Tuning::split_k`](super::Tuning::split_k)): when a
//! product's output tiles leave SMs idle, each tile's k walk is split over `split` blocks in one
//! kernel. Every block stores its partial accumulators into the kernel's private scratch
//! ([`Rendered::scratch_bytes`](super::Rendered::scratch_bytes)) and counts itself on the tile's
//! counter; the last block to arrive adds the partials in split order (deterministic), resets
//! the counter (the scratch invariant: counters are zero between launches) and runs the fused
//! epilogue. The choice of the split is here ([`default_split`]); the k walk per split is in
//! `mma::render`.

use sinter_core::kernel::MatmulBody;

use super::CudaCaps;
use super::emit::Emitter;
use super::matmul::tile_blocks;
use super::mma::{MmaEngine, MmaTile, close_acc_loops, open_acc_loops};

/// Fewest k steps per split of a default split-k tiling.
const MIN_SPLIT_STEPS: u64 = 8;

/// Whether `t`'s grid leaves SMs without a block (where splitting k can help).
pub(super) fn leaves_sms_idle(mm: &MatmulBody, caps: &CudaCaps, t: &MmaTile) -> bool {
    t.engine == MmaEngine::MmaSync && tile_blocks(mm, t.bm, t.bn) < u64::from(caps.sm_count.max(1))
}

/// The default split of the k walk for tile `t` ([`Tuning::split_k`](super::Tuning::split_k)):
/// 1 where the tile's blocks fill the GPU; else enough splits for one block per SM, keeping at
/// least [`MIN_SPLIT_STEPS`] k steps per split (deep, narrow products: ResNet's last stages,
/// 512 x 1568 x 4608 at batch 32, are 52 tiles of 128 x 128 for 132 SMs). Unmeasured choice,
/// written before the first device run.
pub(super) fn default_split(mm: &MatmulBody, caps: &CudaCaps, t: &MmaTile) -> u32 {
    if !leaves_sms_idle(mm, caps, t) {
        return 1;
    }
    let blocks = tile_blocks(mm, t.bm, t.bn).max(1);
    let by_grid = u64::from(caps.sm_count.max(1)).div_ceil(blocks);
    let by_depth = (mm.k as u64).div_ceil(u64::from(t.bk)) / MIN_SPLIT_STEPS;
    let s = by_grid.min(by_depth).min(u64::from(super::MAX_SPLIT_K)) as u32;
    if s >= 2 && split_scratch(mm, t, s).is_some() { s } else { 1 }
}

/// Bytes of scratch a split of `s` needs (partial sums of every split of every tile, then one
/// counter per tile), `None` past 256 MiB.
pub(super) fn split_scratch(mm: &MatmulBody, t: &MmaTile, s: u32) -> Option<u64> {
    let tiles = tile_blocks(mm, t.bm, t.bn);
    let bytes = tiles * u64::from(s) * u64::from(t.bm * t.bn) * 4 + tiles * 4;
    (bytes <= 256 << 20).then_some(bytes)
}

/// Split-k (serial reduction through the scratch, one kernel): every block of a tile stores its
/// partial accumulators (f32, `[tile][split][element][thread]`, coalesced), fences and counts
/// itself on the tile's counter; the block that brings the counter to `split` reads every
/// split's partials back from L2 in split order (a sum independent of the order blocks finish
/// in: deterministic), resets the counter to 0 for the next launch and runs the epilogue; the
/// others return. `pid` is the tile (batch included), `ks` the block's split.
pub(super) fn split_k_sum(em: &mut Emitter<'_>, (mi, nj): (u32, u32), threads: u32, split: u32, tiles: u64) {
    let per_block = mi * nj * 4 * threads;
    em.line(format!("// ---- split-k: {split} partial sums per tile through the scratch; the last block adds them"));
    em.line(format!(
        "unsigned* const tile_count = reinterpret_cast<unsigned*>(sinter_ws + {}u);",
        tiles * u64::from(split) * u64::from(per_block)
    ));
    em.line(format!("float* const part = sinter_ws + pid * {}u;", split * per_block));
    open_acc_loops(em, mi, nj);
    em.line(format!("__stcg(&part[ks * {per_block}u + ((i * {nj}u + j) * 4u + c) * {threads}u + tid], acc[i][j][c]);"));
    close_acc_loops(em);
    super::scratch::last_block_gate(em, "tile_count[pid]", split);
    open_acc_loops(em, mi, nj);
    em.line("float sum = 0.0f;");
    em.line("#pragma unroll");
    em.open(format!("for (unsigned q = 0; q < {split}u; ++q)"));
    em.line(format!("sum += __ldcg(&part[q * {per_block}u + ((i * {nj}u + j) * 4u + c) * {threads}u + tid]);"));
    em.close();
    em.line("acc[i][j][c] = sum;");
    close_acc_loops(em);
    super::scratch::reset_counter(em, "tile_count[pid]");
}
