//! Attention chains: matched and fused into one kernel (strided, BSHD, GQA, causal, masks),
//! refused with a named reason where the scores are needed, and checked against the CPU reference.

use super::*;
use crate::testsuite::programs::{AttnCase, AttnMask, attention_graph};

fn inputs(c: &AttnCase, seed: u64) -> Vec<HostTensor> {
    c.input_shapes()
        .iter()
        .enumerate()
        .map(|(i, s)| match (i, c.mask) {
            (3, AttnMask::Bool) => {
                let keep: Vec<i64> = (0..s[0] * s[1])
                    .map(|p| (p % s[1] == 0 || !(p * 7 + seed as usize).is_multiple_of(3)) as i64)
                    .collect();
                HostTensor::from_i64(DType::Bool, s.clone(), &keep)
            }
            (3, _) => rnd(DType::F32, s, seed + 3),
            _ => rnd(c.dtype, s, seed + i as u64),
        })
        .collect()
}

fn attention_kernels(p: &Program) -> Vec<&crate::kernel::AttentionBody> {
    p.kernels
        .iter()
        .filter_map(|k| match &k.body {
            KernelBody::Attention(a) => Some(a),
            _ => None,
        })
        .collect()
}

#[test]
fn attention_chains_fuse_into_one_kernel() {
    let cases = [
        AttnCase::new(2, 3, 7, 5, 4, DType::F32),
        AttnCase { dv: 3, ..AttnCase::new(1, 1, 1, 9, 8, DType::F32) },
        AttnCase::new(1, 2, 5, 33, 8, DType::BF16),
        AttnCase { causal: Some(0), ..AttnCase::new(2, 2, 9, 9, 8, DType::F16) },
        AttnCase { causal: Some(0), ..AttnCase::new(1, 2, 4, 7, 8, DType::F32) },
        AttnCase { mask: AttnMask::Additive, ..AttnCase::new(1, 2, 5, 6, 4, DType::F32) },
        AttnCase { mask: AttnMask::Bool, bshd: true, ..AttnCase::new(2, 2, 5, 6, 4, DType::BF16) },
        AttnCase { bshd: true, ..AttnCase::new(2, 3, 4, 4, 8, DType::F32) },
        AttnCase { kv_heads: 2, dv: 6, bshd: true, ..AttnCase::new(2, 4, 3, 5, 4, DType::F32) },
        AttnCase { kv_heads: 1, ..AttnCase::new(1, 4, 3, 5, 4, DType::F32) },
        // `q` and `k^T` scaled apart (GPT-2's export): the factors move onto the scores and
        // both operands are read in place (no scaled copies, no copy of `k`).
        AttnCase { split_scale: true, bshd: true, ..AttnCase::new(2, 3, 5, 7, 8, DType::F32) },
        AttnCase { split_scale: true, causal: Some(0), ..AttnCase::new(1, 2, 9, 9, 8, DType::BF16) },
    ];
    for (i, c) in cases.iter().enumerate() {
        let g = attention_graph(c);
        let p = check_with(&g, &inputs(c, i as u64), &Capabilities::host(), &ScheduleOptions::default());
        let at = attention_kernels(&p);
        assert_eq!(at.len(), 1, "case {i} {c:?}\n{}", print_program(&p));
        let a = at[0];
        assert_eq!((a.batch, a.heads, a.m, a.kv, a.d, a.dv), (c.batch, c.heads, c.m, c.kv, c.d, c.dv), "case {i}");
        // The causal triangle is the body's bound, not a loaded mask.
        assert_eq!(a.causal, c.causal, "case {i}\n{}", print_program(&p));
        if c.causal.is_some() {
            assert!(p.buffers.iter().all(|b| !matches!(b.kind, BufferKind::Constant(_))), "{}", print_program(&p));
        }
        // No buffer holds scores or probabilities.
        let scores = c.batch * c.heads * c.m * c.kv;
        let stored = |b: &crate::kernel::BufferDecl| matches!(b.kind, BufferKind::Intermediate) && b.numel == scores;
        assert!(!p.buffers.iter().any(stored), "case {i}\n{}", print_program(&p));
        // Strided views need no copies (grouped heads included) .
        let copies = p.kernels.iter().filter(|k| k.name.contains("copy")).count();
        assert_eq!(copies, 0, "case {i} {c:?}\n{}", print_program(&p));
        if c.split_scale {
            assert_eq!(p.kernels.len(), 1, "case {i}: the scaled operands are not kernels\n{}", print_program(&p));
        }
        assert!(p.decisions.iter().any(|d| d.fused && d.reason.starts_with("fused: attention")), "case {i}");
        // Eager keeps every op apart.
        let e = check_with(&g, &inputs(c, i as u64), &Capabilities::host(), &ScheduleOptions::eager());
        assert!(attention_kernels(&e).is_empty());
    }
}

#[test]
fn attention_epilogues_fuse_and_needed_scores_refuse() {
    // The output scaled and shifted: one kernel. (Stored transposed, as `[batch, seq, heads * dv]`,
    // it is a second kernel, as for any matmul: epilogues store at the root's own element.)
    let c = AttnCase::new(2, 3, 5, 6, 4, DType::F32);
    let g = Graph::new();
    let sh = c.input_shapes();
    let (q, k, v) = (
        g.input("q", DType::F32, sh[0].clone()),
        g.input("k", DType::F32, sh[1].clone()),
        g.input("v", DType::F32, sh[2].clone()),
    );
    let o = q.attention(&k, &v, None, None, false);
    g.output(&(o * 2.0 + 1.0));
    let ir = g.build().unwrap();
    let p = check(&ir, &inputs(&c, 1));
    assert_eq!(p.kernels.len(), 1, "{}", print_program(&p));
    assert!(p.decisions.iter().any(|d| d.reason == "fused: attention epilogue"), "{:?}", p.decisions);

    // Refused, named: the probabilities are an output too; the probabilities scaled before the
    // product (a dropout at inference, written out), a near miss whose refusal names the ops that
    // stopped the match instead of leaving the chain silently unfused.
    type Outputs = fn(&Graph, &Tensor, &Tensor);
    let refusals: [(Outputs, &str); 2] = [
        (
            |g, pr, v| {
                g.output(&pr.matmul(v));
                g.output(pr);
            },
            "graph output",
        ),
        (|g, pr, v| g.output(&(pr * 0.9).matmul(v)), "the probabilities reach the product through `mul`"),
    ];
    for (outputs, want) in refusals {
        let g = Graph::new();
        let (q, k, v) = (
            g.input("q", DType::F32, sh[0].clone()),
            g.input("k", DType::F32, sh[1].clone()),
            g.input("v", DType::F32, sh[2].clone()),
        );
        outputs(&g, &(q.matmul(&k.transpose(-1, -2)) * 0.5).softmax(-1), &v);
        let p = check(&g.build().unwrap(), &inputs(&c, 2));
        assert!(attention_kernels(&p).is_empty());
        assert!(
            p.decisions
                .iter()
                .any(|d| !d.fused && d.reason.starts_with("refused: attention:") && d.reason.contains(want)),
            "{want}: {:?}",
            p.decisions
        );
    }

    // Overlapping chains (`softmax(softmax(x @ w1) @ w2) @ w3`: the first attention's output is
    // the second's first product): the first keeps it, the second is refused, named. (Was: "%N
    // (matmul) was not scheduled before its use".)
    let g = Graph::new();
    let mut h = g.input("x", DType::F32, [16, 8]);
    let mut ins = vec![rnd(DType::F32, &[16, 8], 5)];
    for l in 0..3 {
        h = h.matmul(&g.input(&format!("w{l}"), DType::F32, [8, 8])).softmax(-1);
        ins.push(rnd(DType::F32, &[8, 8], 6 + l));
    }
    g.output(&h);
    let p = check(&g.build().unwrap(), &ins);
    assert_eq!(attention_kernels(&p).len(), 1, "{}", print_program(&p));
    assert!(
        p.decisions.iter().any(|d| !d.fused && d.reason.contains("already part of another fused attention")),
        "{:?}",
        p.decisions
    );

    // torch's exported attention: an additive mask from a boolean key mask, the probabilities
    // under `where(isnan(p), 0, p)`. One kernel; the second batch masks every key, so its rows
    // come out 0 (the reference's guard) rather than NaN.
    let g = Graph::new();
    let (q, k, v) = (
        g.input("q", DType::F32, [2, 2, 6, 4]),
        g.input("k", DType::F32, [2, 2, 6, 4]),
        g.input("v", DType::F32, [2, 2, 6, 4]),
    );
    let keep = g.input("keep", DType::Bool, [2, 1, 1, 6]);
    let add = keep.where_(&g.scalar(DType::F32, 0.0), &g.scalar(DType::F32, f64::NEG_INFINITY));
    let pr = (&(q.matmul(&k.transpose(-1, -2)) * 0.5) + &add).softmax(-1);
    let guarded = pr.unary(crate::ir::UnaryOp::IsNan).where_(&g.scalar(DType::F32, 0.0), &pr);
    g.output(&guarded.matmul(&v));
    let keep_v: Vec<i64> = (0..12).map(|i| (i < 6 && i != 2) as i64).collect();
    let ins = [
        rnd(DType::F32, &[2, 2, 6, 4], 31),
        rnd(DType::F32, &[2, 2, 6, 4], 32),
        rnd(DType::F32, &[2, 2, 6, 4], 33),
        HostTensor::from_i64(DType::Bool, vec![2, 1, 1, 6], &keep_v),
    ];
    let ir = g.build().unwrap();
    let want = crate::cpu::run(&ir, &ins).unwrap();
    assert!(want[0].to_f64_vec()[48..].iter().all(|&x| x == 0.0), "the reference's guard zeroes masked rows");
    let p = check(&ir, &ins);
    assert_eq!(attention_kernels(&p).len(), 1, "{}", print_program(&p));
    assert_eq!(p.kernels.len(), 1, "{}", print_program(&p));

    // A softmax of something that is no product is no attention: refused with the reason.
    let g = Graph::new();
    let (x, v) = (g.input("x", DType::F32, [3, 4]), g.input("v", DType::F32, [4, 2]));
    g.output(&x.exp().softmax(-1).matmul(&v));
    let p = check(&g.build().unwrap(), &[rnd(DType::F32, &[3, 4], 1), rnd(DType::F32, &[4, 2], 2)]);
    assert!(attention_kernels(&p).is_empty());
    assert!(
        p.decisions.iter().any(|d| d.reason == "refused: attention: the scores do not come from a matmul"),
        "{:?}",
        p.decisions
    );

    // A backend whose cost model does not fuse attention keeps three kernels, with the reason.
    let g = attention_graph(&c);
    let opts = ScheduleOptions { cost_model: std::sync::Arc::new(TraitDefaults), ..ScheduleOptions::default() };
    let p = check_with(&g, &inputs(&c, 3), &Capabilities::host(), &opts);
    assert!(attention_kernels(&p).is_empty());
    assert!(p.decisions.iter().any(|d| !d.fused && d.reason.contains("does not fuse attention")));

    // The default cost model with its switch off (what SINTER_FUSE_ATTENTION=0 sets).
    let off = DefaultCostModel { fuse_attention: false, ..DefaultCostModel::default() };
    let opts = ScheduleOptions { cost_model: std::sync::Arc::new(off), ..ScheduleOptions::default() };
    let p = check_with(&g, &inputs(&c, 4), &Capabilities::host(), &opts);
    assert!(attention_kernels(&p).is_empty());
    assert!(p.decisions.iter().any(|d| !d.fused && d.reason.contains("fusion turned off")), "{:?}", p.decisions);
}

#[test]
fn the_anchor_scripts_causal_mask_is_a_causal_bound() {
    // masked_fill(ones(S, S).triu(1), -inf): no mask is loaded, the kernel skips the upper triangle.
    let (_, _, p) = workload("attention_causal_b8h16s2048d128_bf16");
    let at = attention_kernels(&p);
    assert_eq!(at.len(), 1);
    assert_eq!(at[0].causal, Some(0));
    assert_eq!(p.kernels[0].args.len(), 4, "{}", print_program(&p));
}

/// The pre-norm `nn.MultiheadAttention` block of `testsuite::programs` at `[3, 17, 48]`, 4 heads,
/// with its random inputs (`in_bias`: the packed projection's bias is added; else the input is
/// fed but unread).
fn mha_block(in_bias: bool) -> (IrGraph, Vec<HostTensor>) {
    use crate::testsuite::programs::{MhaWeights, multihead_attention_block};
    let (bt, s, h, d) = (3, 17, 4, 12);
    let e = h * d;
    let g = Graph::new();
    let x = g.input("x", DType::F32, [bt, s, e]);
    let (ln_w, ln_b) = (g.input("ln_w", DType::F32, [e]), g.input("ln_b", DType::F32, [e]));
    let (w_in, b_in) = (g.input("w_in", DType::F32, [e, 3 * e]), g.input("b_in", DType::F32, [3 * e]));
    let (w_out, b_out) = (g.input("w_out", DType::F32, [e, e]), g.input("b_out", DType::F32, [e]));
    let w = MhaWeights { norm: (&ln_w, &ln_b), w_in: (&w_in, in_bias.then_some(&b_in)), w_out: (&w_out, &b_out) };
    g.output(&multihead_attention_block(&x, &w, h));
    // Weights of a trained block's size (scores of a few units, so bf16's roundings do not flip
    // which key a softmax picks).
    let ranges = [(-1.0, 1.0), (0.5, 1.5), (-1.0, 1.0), (-0.25, 0.25), (-1.0, 1.0), (-0.25, 0.25), (-1.0, 1.0)];
    let shapes: [&[usize]; 7] = [&[bt, s, e], &[e], &[e], &[e, 3 * e], &[3 * e], &[e, e], &[e]];
    let inputs = shapes
        .iter()
        .zip(ranges)
        .enumerate()
        .map(|(i, (sh, (lo, hi)))| HostTensor::random(DType::F32, sh.to_vec(), 40 + i as u64, lo, hi))
        .collect();
    (g.build().expect("build"), inputs)
}

#[test]
fn multihead_attention_reads_its_projection_through_strides() {
    let (g, inputs) = mha_block(true);
    let p = check_with(&g, &inputs, &Capabilities::host(), &ScheduleOptions::default());
    let text = print_program(&p);
    // No operand is copied: the gathers are slices, the LayerNorm and the attention store in the
    // order of their permutes, so both projections and the attention read through strides.
    assert!(!p.decisions.iter().any(|d| d.reason.contains("copied")), "{text}");
    let layouts = p.decisions.iter().filter(|d| d.reason.contains("stored in its permute's order")).count();
    assert_eq!(layouts, 2, "{text}");
    assert_eq!(attention_kernels(&p).len(), 1, "{text}");
    // LayerNorm, the packed projection, the attention, the output projection, and its bias and
    // the residual (the product's rows are sequence-first, the residual's batch-first: no
    // epilogue of the product). Before this session: eleven, six of them copies.
    assert_eq!(p.kernels.len(), 5, "{text}");
}

#[test]
fn multihead_attention_under_bf16_autocast_reads_its_operands_in_place() {
    // Autocast wraps every product in casts: `v` and the output reach their products through
    // casts around movement ops, which cancel (`algebraic`). Without the projection's bias, `q` and
    // `k^T` reach the first product as `cast(x * c, bf16)` of the widened bf16 projection: the
    // kernel reads the projection and scales the scores (`scaled_operand`). With it (added in f32
    // after the product), the bias kernel stores them, `k^T` as rows of keys.
    for in_bias in [false, true] {
        let (g, inputs) = mha_block(in_bias);
        let g = crate::passes::autocast_bf16(&g).expect("autocast");
        let ir = crate::passes::optimize(&g).expect("passes");
        let p = schedule(&ir, &Capabilities::host(), &ScheduleOptions::default()).expect("schedule");
        validate(&p).expect("valid program");
        let text = print_program(&p);
        assert!(!p.decisions.iter().any(|d| d.reason.contains("copied")), "{text}");
        let at = attention_kernels(&p);
        assert_eq!(at.len(), 1, "{text}");
        assert_eq!(at[0].in_dtype, DType::BF16, "{text}");
        let count = |what: &str| p.decisions.iter().filter(|d| d.reason.contains(what)).count();
        assert_eq!(count("permute's order"), 1, "{text}");
        assert_eq!(count("rows of keys"), in_bias as usize, "{text}");
        assert_eq!(count("attention operand (q, k)"), 2 * in_bias as usize, "{text}");
        // The kernel scales the f32 scores where the graph rounds `q * c` and `k^T * c` to bf16:
        // within bf16's bound of the autocast graph's reference.
        let got = run_program(&p, &inputs).expect("interp");
        let want = crate::cpu::run(&g, &inputs).expect("reference");
        let rtol = DType::BF16.rel_tolerance();
        let r = got[0].tolerance_ratio(&want[0], rtol, rtol * scale(&want[0]));
        assert!(r <= 1.0, "in_bias {in_bias}: ratio {r}\n{text}");
    }
}

#[test]
fn a_product_read_through_a_permute_by_a_product_is_stored_in_its_order() {
    // An unfused attention's second product, `[b, h, s, d]`, permuted to `[b, s, h, d]` and
    // reshaped for the output projection (GPT-2 under bf16 autocast): stored in the permute's
    // order, the projection reads it through strides, with no copy kernel.
    let (b, h, s, d) = (2, 3, 5, 4);
    let g = Graph::new();
    let p = g.input("p", DType::F32, [b, h, s, s]);
    let v = g.input("v", DType::F32, [b, h, s, d]);
    let w = g.input("w", DType::F32, [h * d, 6]);
    g.output(&p.matmul(&v).permute(&[0, 2, 1, 3]).reshape([b * s, h * d]).matmul(&w));
    let g = g.build().expect("build");
    let inputs =
        [rnd(DType::F32, &[b, h, s, s], 1), rnd(DType::F32, &[b, h, s, d], 2), rnd(DType::F32, &[h * d, 6], 3)];
    let p = check_with(&g, &inputs, &Capabilities::host(), &ScheduleOptions::default());
    let text = print_program(&p);
    assert!(!p.decisions.iter().any(|d| d.reason.contains("copied")), "{text}");
    assert!(p.decisions.iter().any(|d| d.reason.contains("layout: product")), "{text}");
    assert_eq!(p.kernels.len(), 2, "{text}");
}

#[test]
fn a_nan_guarded_attention_fuses_under_bf16_autocast() {
    // torch's export guards the probabilities (`where(isnan(p), 0, p)`); autocast then casts the
    // guarded probabilities to bf16 for the second product, outside the guard (GPT-2 under bf16).
    let c = AttnCase {
        mask: AttnMask::Bool,
        nan_guard: true,
        split_scale: true,
        bshd: true,
        ..AttnCase::new(2, 2, 5, 9, 8, DType::F32)
    };
    let g = crate::passes::autocast_bf16(&attention_graph(&c)).expect("autocast");
    let ir = crate::passes::optimize(&g).expect("passes");
    let p = schedule(&ir, &Capabilities::host(), &ScheduleOptions::default()).expect("schedule");
    validate(&p).expect("valid program");
    let text = print_program(&p);
    let at = attention_kernels(&p);
    assert_eq!(at.len(), 1, "{text}");
    assert_eq!(at[0].in_dtype, DType::BF16, "{text}");
    // Against the autocast graph's reference, within bf16's bound; rows whose every key is masked
    // come out 0 in both.
    let inputs: Vec<HostTensor> = inputs(&c, 5)
        .into_iter()
        .map(
            |t| if t.dtype() == DType::F32 { HostTensor::random(DType::F32, t.shape.clone(), 9, -1.0, 1.0) } else { t },
        )
        .collect();
    let got = run_program(&p, &inputs).expect("interp");
    let want = crate::cpu::run(&g, &inputs).expect("reference");
    let rtol = DType::BF16.rel_tolerance();
    let r = got[0].tolerance_ratio(&want[0], rtol, rtol * scale(&want[0]));
    assert!(r <= 1.0, "ratio {r}\n{text}");
}
