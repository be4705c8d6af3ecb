//! The last-block gate of kernels that split a reduction over blocks through their private
//! scratch ([`Rendered::scratch_bytes`](super::Rendered::scratch_bytes)): split-k matmuls
//! (`mma_split`) and split decode attention (`attention_rows`).
//!
//! Every block of a group (an output tile, a head) has stored its partial result with `__stcg`
//! before the gate; the gate fences (the partials are visible device-wide before the count),
//! counts the block on the group's counter, and lets through only the block that brings the counter
//! to the group's size, which fences again (every other partial is visible to it) and goes on to
//! combine the partials in a fixed order. That block zeroes the counter afterwards
//! ([`reset_counter`]): counters are zero between launches, the scratch having been zeroed once
//! before the first.

use super::emit::Emitter;

/// The gate: `counter` is the group's counter (an `unsigned` lvalue), `blocks` the blocks per
/// group; blocks other than the last return.
pub(super) fn last_block_gate(em: &mut Emitter<'_>, counter: &str, blocks: u32) {
    em.line("__shared__ unsigned sinter_last;");
    em.line("__threadfence(); // the partials are visible device-wide before the count");
    em.line("__syncthreads();");
    em.open("if (tid == 0u)");
    em.line(format!("sinter_last = atomicAdd(&{counter}, 1u) == {}u;", blocks - 1));
    em.close();
    em.line("__syncthreads();");
    em.open("if (!sinter_last)");
    em.line("return;");
    em.close();
    em.line("__threadfence(); // every other block's partials are visible to this block");
}

/// Zeroes the group's counter again for the next launch (by the last block, after combining).
pub(super) fn reset_counter(em: &mut Emitter<'_>, counter: &str) {
    em.open("if (tid == 0u)");
    em.line(format!("{counter} = 0u; // zero again for the next launch"));
    em.close();
}
