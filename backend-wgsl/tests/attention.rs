//! Fused attention on WGSL (issue 12): snapshots of the rendered kernels, naga validation of every
//! tile candidate, and runs of `programs::attention` cases on the adapter (lavapipe in CI) compared
//! with the kernel-IR interpreter, outputs poisoned first.
//!
//! Without an adapter the run tests print `SKIPPED` and return; with `SINTER_REQUIRE_GPU=1` a missing
//! adapter fails instead.

use std::sync::OnceLock;
mod common;

use common::*;
use sinter_core::backend::{Executable, Mode};
use sinter_core::kernel::{Program, interp};
use sinter_core::prelude::*;
use sinter_core::testsuite::programs::{AttnCase, AttnMask, attention};
use sinter_core::testsuite::{Tol, compare};
use sinter_wgsl::WgslBackend;
use sinter_wgsl::backend::{candidates, check_tuning};
use sinter_wgsl::render::{AttnTile, Tuning, WgslCaps, attn_tile_candidates, check_attn_tile, render, render_with};

/// An adapter like an H100's through Vulkan (1024 invocations, 48 KiB of workgroup memory).
fn big_caps() -> WgslCaps {
    WgslCaps {
        has_subgroups: true,
        subgroup_size: Some(32),
        fixed_subgroup_size: Some(32),
        max_invocations: 1024,
        max_workgroup_size_x: 1024,
        max_workgroup_storage_bytes: 49152,
        ..WgslCaps::baseline()
    }
}

/// A spread of bodies: decode with MQA, causal with a bool mask, BSHD with GQA and an additive mask,
/// odd head dimensions, a value head wider than one column block.
fn bodies() -> Vec<AttnCase> {
    vec![
        AttnCase { kv_heads: 1, ..AttnCase::new(2, 4, 1, 1000, 128, DType::BF16) },
        AttnCase { causal: Some(0), mask: AttnMask::Bool, ..AttnCase::new(1, 2, 128, 128, 64, DType::F16) },
        AttnCase { kv_heads: 2, bshd: true, mask: AttnMask::Additive, ..AttnCase::new(2, 4, 33, 70, 80, DType::F32) },
        AttnCase { dv: 5, causal: Some(3), ..AttnCase::new(1, 3, 7, 9, 7, DType::F32) },
        AttnCase { dv: 300, ..AttnCase::new(1, 1, 20, 40, 24, DType::BF16) },
    ]
}

fn rendered(p: &Program, caps: &WgslCaps, t: &Tuning) -> String {
    let r = render_with(&p.kernels[0], p, caps, t).unwrap_or_else(|e| panic!("{e}"));
    naga_validate(&r.source);
    format!(
        "// entry {} workgroup_size {:?} grid {:?} strategy {}\n{}",
        r.entry, r.workgroup_size, r.grid, r.strategy, r.source
    )
}

#[test]
fn render_snapshots() {
    let caps = WgslCaps::baseline();
    let t = Tuning::default();
    insta::assert_snapshot!(
        "attention_plain_f32",
        rendered(&attention(&AttnCase::new(1, 2, 40, 50, 32, DType::F32)), &caps, &t)
    );
    let causal_mask =
        AttnCase { causal: Some(0), mask: AttnMask::Bool, ..AttnCase::new(1, 2, 128, 128, 64, DType::BF16) };
    insta::assert_snapshot!("attention_causal_bool_mask_bf16", rendered(&attention(&causal_mask), &caps, &t));
    let decode = AttnCase { kv_heads: 1, bshd: true, ..AttnCase::new(2, 4, 1, 4096, 128, DType::F16) };
    insta::assert_snapshot!("attention_decode_mqa_bshd_f16", rendered(&attention(&decode), &big_caps(), &t));
}

#[test]
fn every_tile_candidate_validates() {
    for caps in [WgslCaps::baseline(), big_caps()] {
        let tiles = attn_tile_candidates(&caps);
        assert!(tiles.len() >= 4, "{} tiles on {caps:?}", tiles.len());
        for c in bodies() {
            let p = attention(&c);
            let cands = candidates(&p.kernels[0], &caps);
            assert!(cands.len() > tiles.len(), "{c:?}: {} candidates", cands.len());
            for t in &cands {
                check_tuning(t, &caps).unwrap_or_else(|e| panic!("candidate {t:?}: {e}"));
                let r = render_with(&p.kernels[0], &p, &caps, t).unwrap_or_else(|e| panic!("{c:?} {t:?}: {e}"));
                naga_validate(&r.source);
            }
        }
    }
}

#[test]
fn large_grids_spread_over_y() {
    // 4096 heads of 64 tiles of 32 rows: 262144 workgroups, more than one grid dimension holds.
    let c = AttnCase { causal: Some(0), ..AttnCase::new(64, 64, 2048, 2048, 16, DType::F16) };
    let p = attention(&c);
    let r = render(&p.kernels[0], &p, &WgslCaps::baseline()).unwrap_or_else(|e| panic!("{e}"));
    naga_validate(&r.source);
    assert!(r.grid[1] > 1 && r.workgroups > 65535, "{:?} {}", r.grid, r.workgroups);
    assert!(r.source.contains("nwg.x"), "{}", r.strategy);
}

#[test]
fn tiles_the_adapter_cannot_hold_are_rejected() {
    let caps = WgslCaps::baseline();
    let bad = [
        AttnTile { bm: 0, bn: 64, bk: 16, tm: 1, tx: 32, dvt: 1 },
        AttnTile { bm: 8, bn: 64, bk: 16, tm: 3, tx: 32, dvt: 1 },
        AttnTile { bm: 8, bn: 48, bk: 32, tm: 1, tx: 16, dvt: 1 },
        AttnTile { bm: 64, bn: 64, bk: 16, tm: 1, tx: 64, dvt: 1 },
        AttnTile { bm: 64, bn: 64, bk: 16, tm: 4, tx: 16, dvt: 8 },
    ];
    for t in bad {
        assert!(check_attn_tile(&t, &caps).is_err(), "{t:?} accepted");
        assert!(check_tuning(&Tuning { attn_tile: Some(t), ..Tuning::default() }, &caps).is_err());
    }
    assert!(check_attn_tile(&AttnTile { bm: 64, bn: 64, bk: 16, tm: 4, tx: 16, dvt: 8 }, &big_caps()).is_ok());
    // The default tile always fits, even on a tiny adapter.
    let tiny = WgslCaps { max_invocations: 64, max_workgroup_size_x: 64, max_workgroup_storage_bytes: 4096, ..caps };
    for c in bodies() {
        let p = attention(&c);
        naga_validate(&render(&p.kernels[0], &p, &tiny).unwrap_or_else(|e| panic!("{c:?}: {e}")).source);
    }
}

/// The shared backend of this test binary ([`common::gpu_backend`]).
fn backend() -> Option<&'static WgslBackend> {
    common::gpu_backend()
}

/// Inputs of a case: q, k, v in [-1, 1] (keys scaled by `kscale`, to make the softmax peaky), then
/// the mask (additive in [-2, 0]; boolean with key 0 always visible, so no row is fully masked).
fn inputs(c: &AttnCase, seed: u64, kscale: f64) -> Vec<HostTensor> {
    let shapes = c.input_shapes();
    let mut out = vec![
        random(c.dtype, &shapes[0], seed, -1.0, 1.0),
        random(c.dtype, &shapes[1], seed + 1, -kscale, kscale),
        random(c.dtype, &shapes[2], seed + 2, -1.0, 1.0),
    ];
    match c.mask {
        AttnMask::None => {}
        AttnMask::Additive => out.push(random(DType::F32, &shapes[3], seed + 3, -2.0, 0.0)),
        AttnMask::Bool => {
            let r = random(DType::F32, &shapes[3], seed + 3, 0.0, 1.0).to_f64_vec();
            let b: Vec<i64> = r.iter().enumerate().map(|(i, v)| (i % c.kv == 0 || *v > 0.3) as i64).collect();
            out.push(HostTensor::from_i64(DType::Bool, shapes[3].clone(), &b));
        }
    }
    out
}

fn tol(c: &AttnCase) -> Tol {
    Tol::sum(c.kv + c.d, 1.0).times(4.0)
}

/// Runs case `c` on the adapter (outputs poisoned) and compares it with the interpreter.
fn check(b: &WgslBackend, c: &AttnCase, ins: &[HostTensor], mode: Mode) -> String {
    let p = attention(c);
    let want = interp::run_program(&p, ins).expect("interp");
    let mut exe = b.load_wgsl(&p, mode).unwrap_or_else(|e| panic!("{c:?}: load failed: {e}"));
    exe.poison(0xff).expect("poison");
    let got = exe.run(ins).unwrap_or_else(|e| panic!("{c:?}: run failed: {e}"));
    compare(&got, &want, tol(c)).unwrap_or_else(|e| panic!("{c:?}: {e}"));
    exe.rendered()[0].strategy.clone()
}

#[test]
fn sequence_lengths_head_dims_and_dtypes() {
    let Some(b) = backend() else { return };
    let cases = [
        // decode (m = 1) against a long cache, MQA
        AttnCase { kv_heads: 1, ..AttnCase::new(2, 4, 1, 1000, 128, DType::BF16) },
        AttnCase { causal: Some(0), ..AttnCase::new(1, 2, 7, 7, 32, DType::F32) },
        AttnCase::new(1, 2, 7, 128, 80, DType::F16),
        AttnCase { causal: Some(0), mask: AttnMask::Bool, ..AttnCase::new(1, 2, 128, 128, 64, DType::F16) },
        AttnCase { causal: Some(0), ..AttnCase::new(1, 1, 1000, 1000, 32, DType::BF16) },
        AttnCase { mask: AttnMask::Additive, ..AttnCase::new(1, 1, 3, 4097, 32, DType::F32) },
        AttnCase { kv_heads: 2, bshd: true, mask: AttnMask::Additive, ..AttnCase::new(2, 4, 33, 70, 80, DType::F32) },
        AttnCase { kv_heads: 1, bshd: true, ..AttnCase::new(1, 2, 65, 40, 128, DType::BF16) },
        AttnCase { dv: 5, causal: Some(3), ..AttnCase::new(1, 3, 7, 9, 7, DType::F32) },
        AttnCase { dv: 300, ..AttnCase::new(1, 1, 20, 40, 24, DType::BF16) },
        AttnCase { dv: 1, ..AttnCase::new(1, 1, 1, 1, 1, DType::F32) },
        AttnCase::new(1, 2, 40, 50, 32, DType::F32),
        AttnCase { causal: Some(1 << 40), ..AttnCase::new(1, 1, 5, 9, 8, DType::F32) },
        // 64 workgroups of 64 rows: the large tiles (4 rows per thread)
        AttnCase { causal: Some(0), ..AttnCase::new(2, 4, 512, 512, 64, DType::F16) },
        AttnCase { mask: AttnMask::Additive, ..AttnCase::new(4, 8, 128, 64, 128, DType::F16) },
    ];
    let mut strategies = Vec::new();
    for (i, c) in cases.iter().enumerate() {
        let ins = inputs(c, 10 * i as u64, if i % 2 == 0 { 4.0 } else { 1.0 });
        strategies.push(check(b, c, &ins, Mode::Default));
    }
    eprintln!("workgroup memory {} bytes; strategies: {strategies:?}", b.wgsl_caps().max_workgroup_storage_bytes);
}

#[test]
fn fully_masked_rows_give_nan_and_autotune_agrees() {
    let Some(b) = backend() else { return };
    // Row 1 sees no key: NaN, as the unfused softmax gives; the other rows are unaffected.
    let c = AttnCase { mask: AttnMask::Bool, ..AttnCase::new(1, 2, 5, 37, 16, DType::F32) };
    let mut ins = inputs(&c, 7, 1.0);
    let keep: Vec<i64> = (0..c.m * c.kv).map(|p| (p / c.kv != 1 && p % 3 != 1) as i64).collect();
    ins[3] = HostTensor::from_i64(DType::Bool, vec![c.m, c.kv], &keep);
    check(b, &c, &ins, Mode::Default);
    let got = {
        let p = attention(&c);
        let mut exe = b.load_wgsl(&p, Mode::Default).expect("load");
        exe.poison(0).expect("poison");
        exe.run(&ins).expect("run")
    };
    let y = got[0].to_f64_vec();
    assert!(y[c.dv..2 * c.dv].iter().all(|v| v.is_nan()) && y[..c.dv].iter().all(|v| v.is_finite()), "{y:?}");
    // max-autotune times every tile candidate (each compiled by the driver) and keeps a correct one.
    let c = AttnCase { causal: Some(1), ..AttnCase::new(1, 2, 19, 45, 40, DType::F16) };
    let ins = inputs(&c, 3, 2.0);
    check(b, &c, &ins, Mode::MaxAutotune);
}

#[test]
fn split_bindings() {
    // A device whose storage bindings hold 4 KiB: q, k, v, the mask and the output are each bound as
    // several windows and read through the window accessors.
    static B: OnceLock<Result<WgslBackend, String>> = OnceLock::new();
    let b = B.get_or_init(|| open_backend("attn-split", Some(4096)));
    let Ok(b) = b else {
        assert!(backend().is_none(), "no split-binding device: {b:?}");
        return;
    };
    for (i, c) in [
        AttnCase { mask: AttnMask::Additive, ..AttnCase::new(1, 2, 20, 70, 32, DType::F32) },
        AttnCase { causal: Some(0), kv_heads: 1, ..AttnCase::new(1, 2, 70, 70, 40, DType::BF16) },
    ]
    .iter()
    .enumerate()
    {
        let ins = inputs(c, 40 + i as u64, 2.0);
        check(b, c, &ins, Mode::Default);
        let p = attention(c);
        let exe = b.load_wgsl(&p, Mode::Default).expect("load");
        assert!(exe.rendered()[0].bindings.len() > p.kernels[0].args.len(), "{c:?}: nothing split");
    }
}

/// `attention(c)` with a residual epilogue (`out + q[bh, m, n]`, as `d == dv`) stored transposed
/// (`y[bh, n, m]`, strided in `n`) or in BSHD order (`y[b, m, h, n]`).
fn epilogue_variant(c: &AttnCase, transposed: bool) -> Program {
    use sinter_core::ir::BinaryOp;
    use sinter_core::kernel::{Expr, Index, KernelBody, Var};
    assert!(c.d == c.dv && !c.bshd);
    let mut p = attention(c);
    let k = &mut p.kernels[0];
    let KernelBody::Attention(a) = &k.body else { unreachable!() };
    let (qarg, st) = (a.q.arg, a.stores[0].clone());
    let acc = k.exprs.iter().position(|e| e.expr == Expr::Acc(0)).expect("Acc(0)") as u32;
    let (bh, m, n) = (Index::var(Var::Batch), Index::var(Var::M), Index::var(Var::N));
    let at = bh.clone().mul((c.m * c.d) as i64).add(m.clone().mul(c.d as i64)).add(n.clone());
    let lq = k.push_expr(Expr::Load { arg: qarg, index: at }, c.dtype);
    let lf = k.push_expr(Expr::Cast(lq), DType::F32);
    let sum = k.push_expr(Expr::Binary(BinaryOp::Add, sinter_core::kernel::ExprId(acc), lf), DType::F32);
    let out = k.push_expr(Expr::Cast(sum), c.dtype);
    let index = if transposed {
        bh.mul((c.m * c.dv) as i64).add(n.mul(c.m as i64)).add(m)
    } else {
        let h = c.heads as i64;
        bh.clone()
            .div(h)
            .mul(c.m as i64 * h * c.dv as i64)
            .add(m.mul(h * c.dv as i64))
            .add(bh.rem(h).mul(c.dv as i64))
            .add(n)
    };
    let KernelBody::Attention(a) = &mut k.body else { unreachable!() };
    a.stores = vec![sinter_core::kernel::Store { arg: st.arg, index, value: out }];
    p
}

#[test]
fn epilogue_residual_transposed_and_bshd_stores() {
    let Some(b) = backend() else { return };
    for (i, (dt, d)) in [(DType::F32, 24), (DType::BF16, 64), (DType::F16, 64)].into_iter().enumerate() {
        for transposed in [false, true] {
            let c = AttnCase { causal: Some(2), ..AttnCase::new(2, 3, 20, 33, d, dt) };
            let p = epilogue_variant(&c, transposed);
            let ins = inputs(&c, 60 + i as u64, 2.0);
            let want = interp::run_program(&p, &ins).expect("interp");
            let mut exe = b.load_wgsl(&p, Mode::Default).unwrap_or_else(|e| panic!("{c:?}: {e}"));
            exe.poison(0xff).expect("poison");
            let got = exe.run(&ins).expect("run");
            compare(&got, &want, tol(&c)).unwrap_or_else(|e| panic!("{c:?} transposed={transposed}: {e}"));
        }
    }
}

#[test]
fn every_tile_candidate_runs() {
    // Each candidate on one of three cases in turn (a pipeline build on lavapipe takes most of a second).
    let Some(b) = backend() else { return };
    let cases = [
        AttnCase { causal: Some(0), mask: AttnMask::Additive, ..AttnCase::new(1, 2, 37, 45, 64, DType::F32) },
        AttnCase { kv_heads: 1, bshd: true, ..AttnCase::new(1, 2, 19, 70, 80, DType::BF16) },
        AttnCase { dv: 5, mask: AttnMask::Bool, ..AttnCase::new(1, 1, 3, 33, 7, DType::F16) },
    ];
    let progs: Vec<_> = cases
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let p = attention(c);
            let ins = inputs(c, 80 + i as u64, 2.0);
            let want = interp::run_program(&p, &ins).expect("interp");
            (p, ins, want)
        })
        .collect();
    let cands = candidates(&progs[0].0.kernels[0], b.wgsl_caps());
    assert!(cands.len() > 8, "{} candidates", cands.len());
    for (j, t) in cands.iter().enumerate() {
        let (c, (p, ins, want)) = (&cases[j % 3], &progs[j % 3]);
        let got = run_tuned(b, p, ins, t);
        compare(&got, want, tol(c)).unwrap_or_else(|e| panic!("{c:?} {t:?}: {e}"));
    }
}

/// An adapter with f16 cooperative matrices (an NVIDIA GPU through Vulkan), bf16 and f32 allowed to
/// run as f16.
fn coop_caps() -> WgslCaps {
    WgslCaps { bf16_matmul_as_f16: true, f32_matmul_as_f16: true, ..common::coop_caps() }
}

/// Cases for the cooperative-matrix kernel: sequence lengths 17 to 4097, head dims 32 to 128 (and
/// unaligned ones padded to 16), causal with an offset, both mask kinds, GQA and MQA, BSHD.
fn coop_cases() -> Vec<AttnCase> {
    vec![
        AttnCase { causal: Some(0), mask: AttnMask::Bool, ..AttnCase::new(1, 2, 128, 128, 64, DType::F16) },
        AttnCase { causal: Some(0), ..AttnCase::new(2, 4, 1000, 1000, 128, DType::F16) },
        AttnCase { kv_heads: 2, bshd: true, mask: AttnMask::Additive, ..AttnCase::new(2, 4, 33, 70, 80, DType::F16) },
        AttnCase { kv_heads: 2, bshd: true, ..AttnCase::new(2, 4, 33, 70, 80, DType::F16) },
        AttnCase { mask: AttnMask::Additive, ..AttnCase::new(2, 4, 33, 70, 80, DType::F16) },
        AttnCase::new(1, 2, 33, 70, 80, DType::F16),
        AttnCase::new(1, 2, 64, 64, 80, DType::F16),
        AttnCase::new(1, 2, 64, 64, 96, DType::F16),
        AttnCase::new(1, 2, 64, 64, 128, DType::F16),
        AttnCase { kv_heads: 2, bshd: true, mask: AttnMask::Additive, ..AttnCase::new(2, 4, 33, 70, 64, DType::F16) },
        AttnCase { kv_heads: 1, ..AttnCase::new(1, 4, 17, 4097, 32, DType::F16) },
        // keys past kv in the last tile (65 to 160 keys; 192 has none)
        AttnCase::new(1, 2, 33, 65, 64, DType::F16),
        AttnCase::new(1, 2, 33, 129, 64, DType::F16),
        AttnCase::new(1, 2, 33, 160, 64, DType::F16),
        AttnCase::new(1, 2, 33, 192, 64, DType::F16),
        AttnCase { dv: 40, causal: Some(3), ..AttnCase::new(1, 3, 65, 90, 24, DType::F16) },
        AttnCase { causal: Some(0), ..AttnCase::new(1, 2, 300, 300, 64, DType::BF16) },
        AttnCase { mask: AttnMask::Additive, ..AttnCase::new(1, 2, 70, 129, 64, DType::F32) },
    ]
}

#[test]
fn cooperative_matrix_kernel_renders_and_validates() {
    let caps = coop_caps();
    for c in coop_cases().into_iter().chain(bodies()) {
        let p = attention(&c);
        let r = render(&p.kernels[0], &p, &caps).unwrap_or_else(|e| panic!("{c:?}: {e}"));
        naga_validate(&r.source);
        // Decode and short query blocks stay on the FMA tiles, as does a value head wider than a
        // subgroup's registers hold.
        let coop = c.m > 16 && c.dv <= 128;
        assert_eq!(r.strategy.contains("coop"), coop, "{c:?}: {}", r.strategy);
        if coop {
            assert!(r.source.contains("coopMultiplyAdd") && r.source.contains("subgroupShuffleXor"));
        }
    }
    // Head dim 128: 64-key tiles need 61 KiB, so 32-key ones (41 KiB); at 16 KiB none fits.
    let c = AttnCase::new(1, 2, 128, 128, 128, DType::F16);
    let p = attention(&c);
    assert!(rendered(&p, &caps, &Tuning::default()).contains("attention coop16 64x32"));
    let small = WgslCaps { max_workgroup_storage_bytes: 16384, ..coop_caps() };
    assert!(!render(&p.kernels[0], &p, &small).unwrap().strategy.contains("coop"));
    let d64 = attention(&AttnCase::new(1, 2, 128, 128, 64, DType::F16));
    assert!(rendered(&d64, &caps, &Tuning::default()).contains("attention coop16 64x64"));
    // Without the opt-ins bf16 and f32 stay on FMAs; an explicit FMA tile (max-autotune's candidates)
    // or `coop_matrix: false` too.
    // The FMA kernel's summary says why.
    let strict = WgslCaps { bf16_matmul_as_f16: false, f32_matmul_as_f16: false, ..coop_caps() };
    for dt in [DType::BF16, DType::F32] {
        let p = attention(&AttnCase::new(1, 2, 128, 128, 64, dt));
        let r = render(&p.kernels[0], &p, &strict).unwrap();
        assert!(!r.strategy.contains("coop"), "{dt}");
        let why = format!("not on cooperative matrices: {dt} operands without the opt-in");
        assert!(r.source.contains(&why), "{dt}: {}", r.source.lines().find(|l| l.contains("attention")).unwrap_or(""));
    }
    let decode = attention(&AttnCase::new(1, 2, 1, 128, 64, DType::F16));
    let r = render(&decode.kernels[0], &decode, &caps).unwrap();
    assert!(r.source.contains("not on cooperative matrices: 1 query rows fill less than one 16-row fragment"));
    let fma = Tuning { coop_matrix: false, ..Tuning::default() };
    assert!(!render_with(&d64.kernels[0], &d64, &caps, &fma).unwrap().strategy.contains("coop"));
    let cands = candidates(&d64.kernels[0], &caps);
    assert!(cands.iter().filter(|t| t.attn_tile.is_none() && t.coop_matrix).count() >= 3);
    // Smaller key tiles on request (max-autotune's candidates); other sizes are refused.
    for (keys, want) in [(32, "attention coop16 64x32"), (16, "attention coop16 64x16")] {
        let t = Tuning { attn_keys: Some(keys), ..Tuning::default() };
        check_tuning(&t, &caps).unwrap();
        assert!(rendered(&d64, &caps, &t).contains(want), "{keys}");
    }
    assert!(check_tuning(&Tuning { attn_keys: Some(48), ..Tuning::default() }, &caps).is_err());
    let causal_mask =
        AttnCase { causal: Some(0), mask: AttnMask::Bool, ..AttnCase::new(1, 2, 128, 128, 64, DType::F16) };
    insta::assert_snapshot!(
        "attention_coop_causal_bool_mask_f16",
        rendered(&attention(&causal_mask), &caps, &Tuning::default())
    );
}

#[test]
fn cooperative_matrices_match_the_interpreter() {
    // Only where the adapter has f16 matrix units (not lavapipe): on the device machine's GPU through
    // Vulkan. bf16 and f32 run as f16 there (their opt-ins): f32 against a bound for operands and
    // probabilities rounded to 11 significant bits, as TF32's.
    let Some(Ok(mut b)) = backend().map(|_| open_backend("coop", None)) else { return };
    if !b.wgsl_caps().has_coop_matrix {
        eprintln!("SKIPPED: the adapter has no f16 cooperative matrices");
        return;
    }
    b.set_bf16_matmul_as_f16(true);
    b.set_f32_matmul_as_f16(true);
    let mut failed = Vec::new();
    for (i, c) in coop_cases().iter().enumerate() {
        let p = attention(c);
        let ins = inputs(c, 90 + i as u64, if c.dtype == DType::F32 { 1.0 } else { 4.0 });
        let want = interp::run_program(&p, &ins).expect("interp");
        let mut exe = b.load_wgsl(&p, Mode::Default).unwrap_or_else(|e| panic!("{c:?}: load failed: {e}"));
        exe.poison(0xff).expect("poison");
        let got = exe.run(&ins).unwrap_or_else(|e| panic!("{c:?}: run failed: {e}"));
        let t = if c.dtype == DType::F32 { tol(c).tf32().tf32() } else { tol(c) };
        let strategy = &exe.rendered()[0].strategy;
        assert!(strategy.contains("coop"), "{c:?}: {strategy}");
        match compare(&got, &want, t) {
            Ok(()) => eprintln!("{c:?}: {strategy} ok"),
            Err(e) => {
                eprintln!("{c:?}: {strategy} FAILED: {}", &e[..e.len().min(400)]);
                failed.push(format!("{c:?}"));
            }
        }
    }
    // Rows that see no key (every key false in a boolean mask, -inf in an additive one): NaN, as the
    // definition says; the other rows unaffected. Masked scores are mask bits here, never -inf.
    for mask in [AttnMask::Bool, AttnMask::Additive] {
        let c = AttnCase { mask, ..AttnCase::new(1, 2, 40, 70, 64, DType::F16) };
        let mut ins = inputs(&c, 17, 1.0);
        let row1 = |p: usize| p / c.kv == 1;
        ins[3] = match mask {
            AttnMask::Bool => {
                let keep: Vec<i64> = (0..c.m * c.kv).map(|p| (!row1(p) && p % 3 != 1) as i64).collect();
                HostTensor::from_i64(DType::Bool, vec![c.m, c.kv], &keep)
            }
            _ => {
                let v = ins[3].to_f64_vec();
                let v: Vec<f64> =
                    v.iter().enumerate().map(|(p, x)| if row1(p) { f64::NEG_INFINITY } else { *x }).collect();
                HostTensor::from_f64(DType::F32, vec![c.m, c.kv], &v)
            }
        };
        let p = attention(&c);
        let want = interp::run_program(&p, &ins).expect("interp");
        let mut exe = b.load_wgsl(&p, Mode::Default).expect("load");
        exe.poison(0).expect("poison");
        let got = exe.run(&ins).expect("run");
        assert!(exe.rendered()[0].strategy.contains("coop"), "{}", exe.rendered()[0].strategy);
        compare(&got, &want, tol(&c)).unwrap_or_else(|e| panic!("{c:?}: {e}"));
        let y = got[0].to_f64_vec();
        assert!(y[c.dv..2 * c.dv].iter().all(|v| v.is_nan()) && y[..c.dv].iter().all(|v| v.is_finite()), "{mask:?}");
    }
    assert!(failed.is_empty(), "{} cases failed: {failed:?}", failed.len());
}
