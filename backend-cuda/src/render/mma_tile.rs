//! The tensor-core tile catalogue: [`MmaTile`] (the shape, warps, pipeline depth and instruction a
//! tuner varies and renderers read), [`MmaEngine`], and the candidate and default tiles with the
//! measurements that ordered them. Which tile a product takes is `mma::default_mma`; whether one
//! fits is `mma::check_mma`.

use serde::{Deserialize, Serialize};

/// A tensor-core tile configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MmaTile {
    /// Output rows per block.
    pub bm: u32,
    /// Output columns per block.
    pub bn: u32,
    /// Reduction depth per pipeline step (a multiple of 16).
    pub bk: u32,
    /// Warps along m ([`MmaEngine::Wgmma`]: warpgroups of 64 rows; [`MmaEngine::WgmmaTma`]:
    /// consumer warpgroups, the producer warpgroup not counted).
    pub warps_m: u32,
    /// Warps along n.
    pub warps_n: u32,
    /// Shared-memory pipeline depth (at least 2; 3 for [`MmaEngine::Wgmma`]; 2 for
    /// [`MmaEngine::WgmmaTma`], whose ring is guarded by barriers, not by copy distance).
    pub stages: u32,
    /// The instruction the tile runs on.
    #[serde(default)]
    pub engine: MmaEngine,
}

/// The tensor-core instruction of a matmul tile.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MmaEngine {
    /// `mma.sync` m16n8k16 (sm_80+), operands through `ldmatrix` (this module).
    #[default]
    MmaSync,
    /// Hopper's `wgmma` (sm_90a): warpgroups of four warps, each owning 64 rows of the tile, both
    /// operands read by the tensor cores from 128-byte-swizzled shared memory (`mma_wgmma`).
    Wgmma,
    /// `wgmma` fed by bulk tensor copies (TMA, sm_90a): a producer warpgroup issues the copies
    /// into an `mbarrier`-guarded ring, `warps_m` consumer warpgroups multiply, persistent over
    /// the tiles (`mma_tma`).
    WgmmaTma,
    /// [`MmaEngine::WgmmaTma`] on clusters of two blocks along m (sm_90a): the two tiles of a
    /// cluster share their B tile, each block copying half of it into both blocks' shared memory
    /// (TMA multicast), so each block reads a third less from L2 per k step (`mma_tma`).
    WgmmaTmaCluster,
}

impl MmaEngine {
    /// Whether tiles of this engine are TMA-fed and warp-specialized (`mma_tma`).
    pub fn tma(self) -> bool {
        matches!(self, MmaEngine::WgmmaTma | MmaEngine::WgmmaTmaCluster)
    }
}

impl MmaTile {
    /// The tiles max-autotune tries (the default first; each checked with [`check_mma`](super::mma::check_mma)).
    /// Measured on an H100 at 8192^3 (BENCHMARKS.md): 128x128x64 with four warps and three stages
    /// 3.37 ms, 128x128x32 3.47, 128x256x32 3.73, 256x128x32 3.94, 64x64x32 6.53.
    pub const CANDIDATES: [MmaTile; 10] = [
        MmaTile::LARGE,
        MmaTile { bm: 128, bn: 128, bk: 64, warps_m: 2, warps_n: 2, stages: 4, engine: MmaEngine::MmaSync },
        MmaTile { bm: 128, bn: 256, bk: 64, warps_m: 2, warps_n: 4, stages: 3, engine: MmaEngine::MmaSync },
        MmaTile { bm: 256, bn: 128, bk: 64, warps_m: 4, warps_n: 2, stages: 3, engine: MmaEngine::MmaSync },
        MmaTile { bm: 128, bn: 256, bk: 32, warps_m: 2, warps_n: 4, stages: 4, engine: MmaEngine::MmaSync },
        MmaTile { bm: 128, bn: 128, bk: 32, warps_m: 2, warps_n: 2, stages: 4, engine: MmaEngine::MmaSync },
        MmaTile::MEDIUM,
        MmaTile { bm: 64, bn: 128, bk: 64, warps_m: 2, warps_n: 2, stages: 3, engine: MmaEngine::MmaSync },
        MmaTile { bm: 64, bn: 64, bk: 64, warps_m: 2, warps_n: 2, stages: 3, engine: MmaEngine::MmaSync },
        MmaTile::SMALL,
    ];
    /// Tiles max-autotune also tries for implicit-GEMM convolutions: two stages, less shared memory
    /// per block. The im2col loader issues an instruction stream per element (tap
    /// decomposition, bounds, one 4-byte copy), and ResNet-18's stem on the three-stage 64x128
    /// tile (80 KB of shared memory, two blocks and eight warps an SM) issued on 58% of cycles
    /// with 3.3 cycles between a warp's instructions (ncu, H200, session 19).
    pub const IM2COL_CANDIDATES: [MmaTile; 3] = [
        MmaTile { bm: 64, bn: 128, bk: 32, warps_m: 2, warps_n: 2, stages: 2, engine: MmaEngine::MmaSync },
        MmaTile { bm: 64, bn: 64, bk: 32, warps_m: 2, warps_n: 2, stages: 2, engine: MmaEngine::MmaSync },
        MmaTile { bm: 128, bn: 128, bk: 32, warps_m: 2, warps_n: 2, stages: 2, engine: MmaEngine::MmaSync },
    ];
    /// The `wgmma` tiles max-autotune tries (sm_90a): `warps_m` warpgroups of 64 rows each,
    /// `warps_n` = 4 warps per group, k steps of 64. Measured on an H100 at 8192^3 bf16
    /// (BENCHMARKS.md, 2026-11-25): 192x128 four stages 1.80 ms (604 TFLOP/s), 128x256 three or
    /// four stages 2.04-2.08, 128x128 2.30, 64x256 2.90, 128x64 3.50.
    pub const WGMMA_CANDIDATES: [MmaTile; 10] = [
        MmaTile::wgmma(192, 128, 4),
        MmaTile::wgmma(192, 128, 5),
        MmaTile::wgmma(256, 128, 4),
        MmaTile::wgmma(128, 256, 4),
        MmaTile::wgmma(128, 256, 3),
        MmaTile::wgmma(128, 128, 4),
        MmaTile::wgmma(128, 128, 3),
        MmaTile::wgmma(128, 128, 6),
        MmaTile::wgmma(64, 256, 4),
        MmaTile::wgmma(128, 64, 6),
    ];
    /// The default TMA tile (tried before [`MmaTile::WGMMA_DEFAULTS`]): 128x256, two consumer
    /// warpgroups, three stages, one block (clusters of two measured within 1% of it).
    pub const TMA_DEFAULT: MmaTile = MmaTile::wgmma_tma(128, 256, 2, 3);
    /// The default `wgmma` tiles, fastest first (the first whose grid fills the GPU and that
    /// wastes at most a fifth of its rows and columns past the edges is taken).
    pub const WGMMA_DEFAULTS: [MmaTile; 3] =
        [MmaTile::wgmma(192, 128, 4), MmaTile::wgmma(128, 128, 4), MmaTile::wgmma(128, 64, 6)];
    /// 128x128x64, four warps of 64x64, three stages: large products.
    pub const LARGE: MmaTile =
        MmaTile { bm: 128, bn: 128, bk: 64, warps_m: 2, warps_n: 2, stages: 3, engine: MmaEngine::MmaSync };
    /// 128x64x64, four warps of 64x32, three stages: mid-sized products.
    pub const MEDIUM: MmaTile =
        MmaTile { bm: 128, bn: 64, bk: 64, warps_m: 2, warps_n: 2, stages: 3, engine: MmaEngine::MmaSync };
    /// 64x64x32, four warps, four stages: small products.
    pub const SMALL: MmaTile =
        MmaTile { bm: 64, bn: 64, bk: 32, warps_m: 2, warps_n: 2, stages: 4, engine: MmaEngine::MmaSync };

    /// The TMA-fed `wgmma` tiles max-autotune tries (sm_90a, [`MmaEngine::WgmmaTma`] and
    /// [`MmaEngine::WgmmaTmaCluster`]): `warps_m` consumer warpgroups of `bm / warps_m` rows (64
    /// or 128) plus a producer warpgroup. Measured on an H200 at 8192^3 bf16 (BENCHMARKS.md,
    /// session 14, calls 1-4): 128x256 two consumers, three stages, 709-733 TFLOP/s on one
    /// block and 721-737 on clusters of two (four stages within 1-2%; 256x128 2-5% slower),
    /// against cuBLAS's 763-788; the tensor pipe busy 86% of the time against cuBLAS's 97%.
    pub const TMA_CANDIDATES: [MmaTile; 12] = [
        MmaTile::wgmma_tma_cluster(128, 256, 2, 4),
        MmaTile::wgmma_tma_cluster(128, 256, 2, 3),
        MmaTile::wgmma_tma_cluster(256, 128, 2, 4),
        MmaTile::wgmma_tma_cluster(256, 128, 2, 3),
        MmaTile::wgmma_tma(128, 256, 2, 4),
        MmaTile::wgmma_tma(128, 256, 2, 3),
        MmaTile::wgmma_tma(256, 128, 2, 4),
        MmaTile::wgmma_tma(256, 128, 2, 3),
        MmaTile::wgmma_tma(128, 128, 2, 6),
        MmaTile::wgmma_tma(192, 128, 3, 5),
        MmaTile::wgmma_tma(128, 128, 1, 6),
        MmaTile::wgmma_tma(64, 128, 1, 8),
    ];

    /// A `wgmma` tile of `bm x bn` (k steps of 64) in `bm / 64` warpgroups.
    pub const fn wgmma(bm: u32, bn: u32, stages: u32) -> MmaTile {
        MmaTile { bm, bn, bk: 64, warps_m: bm / 64, warps_n: 4, stages, engine: MmaEngine::Wgmma }
    }

    /// A TMA-fed `wgmma` tile of `bm x bn` (k steps of 64): `consumers` warpgroups of
    /// `bm / consumers` rows each, plus the producer warpgroup.
    pub const fn wgmma_tma(bm: u32, bn: u32, consumers: u32, stages: u32) -> MmaTile {
        MmaTile { bm, bn, bk: 64, warps_m: consumers, warps_n: 4, stages, engine: MmaEngine::WgmmaTma }
    }

    /// [`MmaTile::wgmma_tma`] on clusters of two blocks sharing B ([`MmaEngine::WgmmaTmaCluster`]).
    pub const fn wgmma_tma_cluster(bm: u32, bn: u32, consumers: u32, stages: u32) -> MmaTile {
        MmaTile { bm, bn, bk: 64, warps_m: consumers, warps_n: 4, stages, engine: MmaEngine::WgmmaTmaCluster }
    }

    /// Threads per block (with the producer warpgroup of a [`MmaEngine::WgmmaTma`] tile).
    pub fn threads(&self) -> u32 {
        let producer = if self.engine.tma() { self.warps_n } else { 0 };
        32 * (self.warps_m * self.warps_n + producer)
    }

    /// Warp sub-tile (rows, columns).
    pub(super) fn warp_tile(&self) -> (u32, u32) {
        (self.bm / self.warps_m.max(1), self.bn / self.warps_n.max(1))
    }
}
