//! What max-autotune may try on WGSL: the candidate tunings of a kernel and the check every
//! tuning (a candidate, or an entry read back from the autotuning cache) passes before use.

use crate::render::{MatmulTile, Tuning, WgslCaps};
use sinter_core::kernel::{Kernel, KernelBody, ReduceStrategy};

/// Whether the renderer can honour `t` on an adapter with `caps` (what the autotuning cache's entries
/// are checked against before use): workgroup sizes within the adapter's limits and at least one
/// subgroup wide for reductions, matmul and attention tiles the renderer accepts.
pub fn check_tuning(t: &Tuning, caps: &WgslCaps) -> Result<(), String> {
    let max = caps.max_invocations.min(caps.max_workgroup_size_x);
    if let Some(w) = t.workgroup_size {
        let min = caps.subgroup_size.unwrap_or(32).max(32);
        if w < min || w > max || !w.is_power_of_two() {
            return Err(format!("workgroup size {w} outside the powers of two in [{min}, {max}]"));
        }
    }
    if t.max_persistent_per_thread == 0 || t.max_persistent_per_thread > 256 {
        return Err(format!("max_persistent_per_thread {} outside [1, 256]", t.max_persistent_per_thread));
    }
    if let Some(tile) = &t.matmul_tile {
        crate::render::check_tile(tile, caps).map_err(|e| e.to_string())?;
    }
    if let Some(tile) = &t.attn_tile {
        crate::render::check_attn_tile(tile, caps)?;
    }
    if let Some(d) = t.coop_depth
        && !crate::render::COOP_DEPTHS.contains(&d)
    {
        return Err(format!("cooperative-matrix stage depth {d}, not one of {:?}", crate::render::COOP_DEPTHS));
    }
    if let Some(k) = t.attn_keys
        && !crate::render::ATTN_KEY_TILES.contains(&k)
    {
        return Err(format!(
            "{k} keys per cooperative-matrix attention tile, not one of {:?}",
            crate::render::ATTN_KEY_TILES
        ));
    }
    Ok(())
}

/// The variants the autotuner times for a kernel: only tunings [`check_tuning`] accepts on `caps`
/// (no workgroup narrower than the adapter's subgroup, e.g. no 32 on a 64-wide-subgroup adapter).
pub fn candidates(k: &Kernel, caps: &WgslCaps) -> Vec<Tuning> {
    let max = caps.max_invocations.min(caps.max_workgroup_size_x);
    let base = Tuning::default();
    let mut out = vec![base.clone()];
    let sizes: Vec<u32> = [64u32, 128, 256, 512, 1024].into_iter().filter(|&s| s <= max).collect();
    match &k.body {
        KernelBody::Pointwise { .. } => {
            for &s in &sizes {
                out.push(Tuning { workgroup_size: Some(s), ..base.clone() });
            }
            out.push(Tuning { vectorize: false, ..base.clone() });
        }
        KernelBody::Reduce(r) => {
            if r.strategy == ReduceStrategy::ThreadPerRow {
                for &s in &sizes {
                    out.push(Tuning { workgroup_size: Some(s), ..base.clone() });
                }
            } else {
                for s in [32u32, 64, 128, 256, 512, 1024].into_iter().filter(|&s| s <= max) {
                    for persistent in [None, Some(false)] {
                        out.push(Tuning { workgroup_size: Some(s), persistent, ..base.clone() });
                    }
                }
                if caps.has_subgroups {
                    out.push(Tuning { subgroups: false, ..base.clone() });
                }
            }
            out.push(Tuning { vectorize: false, ..base.clone() });
        }
        KernelBody::Matmul(_) => {
            let tiles = [
                MatmulTile { bm: 64, bn: 64, bk: 16, tm: 4, tn: 4 },
                MatmulTile { bm: 64, bn: 64, bk: 32, tm: 4, tn: 4 },
                MatmulTile { bm: 128, bn: 128, bk: 16, tm: 8, tn: 8 },
                MatmulTile { bm: 128, bn: 128, bk: 8, tm: 8, tn: 8 },
                MatmulTile { bm: 128, bn: 64, bk: 16, tm: 8, tn: 4 },
                MatmulTile { bm: 64, bn: 128, bk: 16, tm: 4, tn: 8 },
                MatmulTile { bm: 32, bn: 32, bk: 16, tm: 4, tn: 4 },
                // Half tiles for products of a few hundred tiles (a transformer's 768-wide
                // products at 1024 tokens: 96 tiles of 64x128 on 132 SMs).
                MatmulTile { bm: 32, bn: 64, bk: 16, tm: 4, tn: 4 },
                MatmulTile { bm: 32, bn: 128, bk: 16, tm: 4, tn: 8 },
            ];
            if caps.has_coop_matrix {
                for d in crate::render::COOP_DEPTHS {
                    out.push(Tuning { coop_depth: Some(d), ..base.clone() });
                }
            }
            for t in tiles {
                if crate::render::check_tile(&t, caps).is_ok() {
                    for vectorize in [true, false] {
                        out.push(Tuning { matmul_tile: Some(t), vectorize, coop_matrix: false, ..base.clone() });
                    }
                }
            }
        }
        KernelBody::Attention(_) => {
            for t in crate::render::attn_tile_candidates(caps) {
                out.push(Tuning { attn_tile: Some(t), ..base.clone() });
            }
            if caps.has_coop_matrix {
                for k in &crate::render::ATTN_KEY_TILES[1..] {
                    out.push(Tuning { attn_keys: Some(*k), ..base.clone() });
                }
            }
            out.push(Tuning { vectorize: false, ..base.clone() });
        }
    }
    out.retain(|t| check_tuning(t, caps).is_ok());
    out
}
