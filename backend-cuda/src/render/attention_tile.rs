//! The tensor-core attention tile ([`AttnTile`]) and its engines ([`AttnEngine`]): the shape, the
//! schedule and the instructions a tuning names, the candidate lists max-autotune times, and the
//! tile's derived counts (threads, row warps, fragments). What a tile must satisfy for a given
//! attention is `attention::check_attn`'s; how each engine renders is in `attention_tc` and the
//! modules it calls.

use serde::{Deserialize, Serialize};

/// A tensor-core attention tile.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct AttnTile {
    /// Query rows per block (a multiple of `16 * warps`).
    pub bm: u32,
    /// Keys per pipeline step (a multiple of 16).
    pub bn: u32,
    /// Warps per block; each owns `bm / warps` query rows.
    pub warps: u32,
    /// Shared-memory pipeline depth (2 to 4).
    pub stages: u32,
    /// The tensor-core instructions and the schedule of the loop over key tiles.
    #[serde(default)]
    pub engine: AttnEngine,
}

/// How a tensor-core attention tile computes its two products.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttnEngine {
    /// `mma.sync` m16n8k16 (sm_80+), operands through `ldmatrix`.
    #[default]
    MmaSync,
    /// Hopper's `wgmma` (sm_90a): warps in warpgroups of four, each owning 64 query rows; Q and K
    /// tiles read by the tensor cores from 128-byte-swizzled shared memory, P from registers.
    /// Each product is waited for before the softmax that follows it.
    Wgmma,
    /// [`AttnEngine::Wgmma`] with the next key tile's `Q Kᵀ` issued before this tile's `P V` and
    /// the softmax of the next tile computed while `P V` runs (FlashAttention-3's intra-warpgroup
    /// overlap); at least three stages.
    WgmmaOverlap,
    /// FlashAttention-3's warp specialization on `wgmma` (`attention_pingpong`): a producer
    /// warpgroup copies K and V tiles into the ring and signals them on `mbarrier`s; `bm / 64`
    /// consumer warpgroups (one to three) each run [`AttnEngine::WgmmaOverlap`]'s loop on their own
    /// 64 query rows, taking turns (named barriers) to issue their products so that one
    /// warpgroup's softmax runs while another's products occupy the tensor cores. Registers move
    /// from the producer to the consumers (`setmaxnreg`). `warps` counts the producer's four.
    WgmmaPingPong,
    /// [`AttnEngine::WgmmaPingPong`] with the producer's copies on the Tensor Memory Accelerator
    /// (FlashAttention-3): one thread of the producer warpgroup issues a 4-dimensional
    /// (`d`, `kv`, heads, batch) bulk tensor copy per 64 columns of K and V into the
    /// 128-byte-swizzled stage, completing on the stage's `mbarrier` by transaction bytes; no
    /// producer thread waits on its own copies. Needs K and V maps the copy engine takes
    /// (16-byte-aligned strides, `kv >= bn`).
    WgmmaPingPongTma,
    /// [`AttnEngine::WgmmaPingPongTma`] as a persistent kernel (FlashAttention-3's): as many
    /// blocks as the SMs hold, each looping over work tiles (a flat batch's `bm` query rows)
    /// handed out by an atomic counter in the kernel's scratch, the longest causal tiles of each
    /// head first. The producer copies the next tile's K and V while the consumers finish this
    /// one; each consumer warpgroup copies its next Q rows once its last `Q Kᵀ` is done, so the
    /// epilogue and the start of the next tile overlap other work (`attention_pingpong`).
    WgmmaPingPongTmaPersistent,
    /// CUDA cores (`attention_fma`): f32 `fmaf` outer products in a 16 x 16 thread grid, for
    /// operands the tensor-core engines do not take (f32); `warps` is 8 and `stages` 1.
    Fma,
}

impl AttnTile {
    /// The tiles max-autotune tries (each checked with [`check_attn`](super::attention::check_attn)).
    pub const CANDIDATES: [AttnTile; 36] = [
        AttnTile::mma(128, 64, 4, 3),
        AttnTile::mma(128, 64, 8, 2),
        AttnTile::mma(128, 64, 8, 3),
        AttnTile::mma(128, 32, 8, 3),
        AttnTile::mma(64, 64, 4, 2),
        AttnTile::mma(64, 64, 4, 3),
        AttnTile::mma(64, 32, 4, 2),
        AttnTile::mma(128, 128, 8, 2),
        AttnTile::hopper(128, 128, 2),
        AttnTile::hopper(128, 64, 2),
        AttnTile::hopper(128, 128, 3),
        AttnTile::hopper(192, 128, 2),
        AttnTile::hopper(192, 64, 2),
        AttnTile::hopper(64, 128, 2),
        AttnTile::hopper(64, 128, 3),
        AttnTile::overlapped(64, 128, 3),
        AttnTile::overlapped(128, 128, 3),
        AttnTile::overlapped(128, 64, 3),
        AttnTile::overlapped(64, 64, 4),
        AttnTile::overlapped(192, 128, 3),
        AttnTile::pingpong(128, 128, 2),
        AttnTile::pingpong(128, 128, 3),
        AttnTile::pingpong(128, 64, 4),
        AttnTile::pingpong(192, 64, 4),
        AttnTile::pingpong(64, 128, 3),
        AttnTile::pingpong_tma(128, 128, 2),
        AttnTile::pingpong_tma(128, 128, 3),
        AttnTile::pingpong_tma(128, 64, 4),
        AttnTile::pingpong_tma(192, 64, 4),
        AttnTile::pingpong_tma(64, 128, 3),
        AttnTile::pingpong_tma(192, 128, 2),
        AttnTile::persistent(128, 128, 2),
        AttnTile::persistent(128, 128, 3),
        AttnTile::persistent(128, 64, 4),
        AttnTile::persistent(192, 64, 4),
        AttnTile::persistent(64, 128, 3),
    ];

    /// An `mma.sync` tile.
    pub const fn mma(bm: u32, bn: u32, warps: u32, stages: u32) -> AttnTile {
        AttnTile { bm, bn, warps, stages, engine: AttnEngine::MmaSync }
    }

    /// A `wgmma` tile: one warpgroup (four warps) per 64 query rows.
    pub const fn hopper(bm: u32, bn: u32, stages: u32) -> AttnTile {
        AttnTile { bm, bn, warps: bm / 16, stages, engine: AttnEngine::Wgmma }
    }

    /// A `wgmma` tile with the softmax overlapping the products ([`AttnEngine::WgmmaOverlap`]).
    pub const fn overlapped(bm: u32, bn: u32, stages: u32) -> AttnTile {
        AttnTile { bm, bn, warps: bm / 16, stages, engine: AttnEngine::WgmmaOverlap }
    }

    /// A warp-specialized `wgmma` tile ([`AttnEngine::WgmmaPingPong`]): `bm / 64` consumer
    /// warpgroups taking turns, and one producer warpgroup.
    pub const fn pingpong(bm: u32, bn: u32, stages: u32) -> AttnTile {
        AttnTile { bm, bn, warps: bm / 16 + 4, stages, engine: AttnEngine::WgmmaPingPong }
    }

    /// A warp-specialized `wgmma` tile whose producer copies by TMA ([`AttnEngine::WgmmaPingPongTma`]).
    pub const fn pingpong_tma(bm: u32, bn: u32, stages: u32) -> AttnTile {
        AttnTile { bm, bn, warps: bm / 16 + 4, stages, engine: AttnEngine::WgmmaPingPongTma }
    }

    /// A persistent warp-specialized TMA tile ([`AttnEngine::WgmmaPingPongTmaPersistent`]).
    pub const fn persistent(bm: u32, bn: u32, stages: u32) -> AttnTile {
        AttnTile { bm, bn, warps: bm / 16 + 4, stages, engine: AttnEngine::WgmmaPingPongTmaPersistent }
    }

    /// Whether a producer warpgroup feeds consumer warpgroups ([`AttnEngine::WgmmaPingPong`] and
    /// the TMA engines).
    pub fn warp_specialized(&self) -> bool {
        matches!(
            self.engine,
            AttnEngine::WgmmaPingPong | AttnEngine::WgmmaPingPongTma | AttnEngine::WgmmaPingPongTmaPersistent
        )
    }

    /// Whether the producer copies K and V by TMA ([`AttnEngine::WgmmaPingPongTma`],
    /// [`AttnEngine::WgmmaPingPongTmaPersistent`]).
    pub fn tma(&self) -> bool {
        matches!(self.engine, AttnEngine::WgmmaPingPongTma | AttnEngine::WgmmaPingPongTmaPersistent)
    }

    /// Whether blocks loop over work tiles ([`AttnEngine::WgmmaPingPongTmaPersistent`]).
    pub fn persistent_blocks(&self) -> bool {
        self.engine == AttnEngine::WgmmaPingPongTmaPersistent
    }

    /// A tiled CUDA-core tile ([`AttnEngine::Fma`]): 256 threads, `bm / 16` rows and `bn / 16`
    /// keys per thread.
    pub const fn fma(bm: u32, bn: u32) -> AttnTile {
        AttnTile { bm, bn, warps: 8, stages: 1, engine: AttnEngine::Fma }
    }

    /// The tiles max-autotune tries where `attention_fma::applies` (each checked).
    pub const FMA_CANDIDATES: [AttnTile; 5] = [
        AttnTile::fma(64, 64),
        AttnTile::fma(64, 32),
        AttnTile::fma(32, 64),
        AttnTile::fma(32, 32),
        AttnTile::fma(16, 64),
    ];

    /// Whether the products run on `wgmma`.
    pub fn wgmma(&self) -> bool {
        self.engine == AttnEngine::Wgmma || self.engine == AttnEngine::WgmmaOverlap || self.warp_specialized()
    }

    /// Threads per block.
    pub fn threads(&self) -> u32 {
        32 * self.warps
    }

    /// The warps that own query rows (all but a warp-specialized tile's producer warpgroup).
    pub(super) fn row_warps(&self) -> u32 {
        if self.warp_specialized() { self.warps.saturating_sub(4) } else { self.warps }
    }

    /// 16-row fragments per warp.
    pub(super) fn mi(&self) -> u32 {
        self.bm / (16 * self.row_warps().max(1))
    }
}
