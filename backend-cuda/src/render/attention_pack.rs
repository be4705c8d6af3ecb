//! GQA decode on the tensor-core tile, by a kernel-IR rewrite ([`pack_gqa`]): one query against a
//! cache whose K/V heads each serve `g` query heads is the same attention as `g` queries of one
//! head per K/V head, so the group's query heads become the rows of one tile and K and V are read
//! once per group instead of once per query head (FlashAttention-3's "pack GQA"). The rewrite only
//! renames indices; the templates render the rewritten kernel as they render any other.
//!
//! Measured on an H200 (BENCHMARKS.md, session 21), b32 h32 over 8 K/V heads, kv 4096, d128 bf16:
//! the decode template with the group's query heads as its query slots 0.1837 ms, the tensor-core
//! tile a block per query head 0.3669, torch's SDPA with `enable_gqa` 0.1269.

use sinter_core::kernel::{AttentionBody, Index, Kernel, KernelBody, Var};

use super::CudaCaps;
use super::attention::{AttnTile, few_query_tile};

/// The rewritten kernel and the query heads per K/V head `g`, where `k` is a one-query attention
/// under GQA (K and V grouped alike, `g` dividing the heads, no causal bound that masks a key)
/// where the tile of few query rows takes the rewritten body (`attention::few_query_tile`: its
/// `batch * heads / g` groups give at least three quarters of the SMs a block); else `None`. The rewrite: heads `heads / g`, queries `g`, Q's rows the query heads (row stride the
/// head stride, head stride `g` times it), K and V ungrouped; in every index the old flat batch is
/// `Batch * g + M` and the old query 0. A launch of the rewritten kernel covers `g` of the
/// original's flat batches per block row (its grid split's `per` times `g`).
pub(super) fn pack_gqa(k: &Kernel, caps: &CudaCaps) -> Option<(Kernel, usize, AttnTile)> {
    let KernelBody::Attention(a) = &k.body else { return None };
    let g = a.k.group;
    let no_mask = a.causal.is_none_or(|o| o + 1 >= a.kv);
    if a.m != 1 || g < 2 || a.v.group != g || a.q.group > 1 || !a.heads.is_multiple_of(g) || !no_mask {
        return None;
    }
    let mut b: AttentionBody = a.clone();
    b.heads = a.heads / g;
    b.m = g;
    b.causal = None;
    b.q.s_row = a.q.s_head;
    b.q.s_head = a.q.s_head * g;
    b.k.group = 1;
    b.v.group = 1;
    let tile = few_query_tile(&b, caps)?;
    // Query 0 first, then the flat batch (whose replacement names the new query index).
    let old_batch = Index::var(Var::Batch).mul(g as i64).add(Index::var(Var::M));
    let remap = |i: &Index| i.substitute(Var::M, &Index::Const(0)).substitute(Var::Batch, &old_batch);
    let mut out = k.clone();
    out.map_expr_indices(&remap);
    for s in &mut b.stores {
        s.index = remap(&s.index);
    }
    out.body = KernelBody::Attention(b);
    Some((out, g, tile))
}

#[cfg(test)]
mod tests {
    use super::*;
    use sinter_core::DType;
    use sinter_core::kernel::interp;
    use sinter_core::tensor::HostTensor;
    use sinter_core::testsuite::programs::{AttnCase, AttnMask, attention};

    /// The rewritten kernel computes what the original does, bit for bit (kernel-IR interpreter,
    /// random inputs): grouped and multi-query K/V heads, and an additive mask over (query, key),
    /// whose index reads the query.
    #[test]
    fn the_rewrite_computes_the_original() {
        let caps = CudaCaps { sm_count: 4, ..CudaCaps::hopper() };
        for (kv_heads, mask) in [(2, AttnMask::None), (1, AttnMask::None), (2, AttnMask::Additive)] {
            let c = AttnCase { kv_heads, mask, ..AttnCase::new(3, 8, 1, 70, 64, DType::BF16) };
            let p = attention(&c);
            let k = &p.kernels[0];
            let (packed, g, _) = pack_gqa(k, &caps).unwrap_or_else(|| panic!("{kv_heads} K/V heads: not packed"));
            assert_eq!(g, 8 / kv_heads);
            let mut q = p.clone();
            q.kernels[0] = packed;
            let inputs: Vec<HostTensor> = c
                .input_shapes()
                .iter()
                .enumerate()
                .map(|(i, s)| {
                    let dt = if i < 3 { c.dtype } else { DType::F32 };
                    HostTensor::random(dt, s.clone(), 7 + i as u64, -1.0, 1.0)
                })
                .collect();
            let want = interp::run_program(&p, &inputs).unwrap();
            let got = interp::run_program(&q, &inputs).unwrap();
            assert_eq!(want.len(), got.len());
            for (w, o) in want.iter().zip(&got) {
                assert_eq!(w.max_abs_diff(o), 0.0, "{kv_heads} K/V heads, {mask:?}");
            }
        }
    }

    /// Causal bounds that mask a key, several queries, and too few groups are left alone.
    #[test]
    fn what_the_rewrite_leaves() {
        let caps = CudaCaps { sm_count: 4, ..CudaCaps::hopper() };
        let case = |c: AttnCase| pack_gqa(&attention(&c).kernels[0], &caps).map(|(_, g, _)| g);
        let base = AttnCase { kv_heads: 2, ..AttnCase::new(3, 8, 1, 70, 64, DType::BF16) };
        assert_eq!(case(base.clone()), Some(4));
        assert_eq!(case(AttnCase { causal: Some(69), ..base.clone() }), Some(4));
        assert_eq!(case(AttnCase { causal: Some(10), ..base.clone() }), None);
        assert_eq!(case(AttnCase { m: 2, ..base.clone() }), None);
        assert_eq!(case(AttnCase { kv_heads: 8, ..base.clone() }), None);
        assert_eq!(case(AttnCase { batch: 1, heads: 4, ..base }), None);
    }
}
