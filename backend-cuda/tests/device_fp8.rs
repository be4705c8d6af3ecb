//! fp8 on a GPU: the software conversions of the CUDA prelude bit for bit against
//! `sinter_core::fp8` (every code, ties, overflow, NaN and infinities), and `torch._scaled_mm`
//! (`cast(matmul(cast(a, f32), cast(b, f32)^T) * sa * sb, bf16)`, the scheduler's fp8 prologue)
//! against an f64 reference of the fp8 values: through cuBLASLt's fp8 product where it takes the
//! shape (sm_89+, the TN layout, multiples of 16) and through the own template where it does not
//! (the source says which), in default and max-autotune modes; and the `matmul_8192_fp8e4m3`
//! workload at reduced scale.
//!
//! Without a CUDA driver every test prints a skip line, unless `SINTER_REQUIRE_CUDA=1`, which makes
//! a missing driver (or NVRTC) a failure.

mod launch;

use launch::{backend, options as opts};
use sinter_core::backend::Mode;
use sinter_core::compile::compile;
use sinter_core::fp8::{E4M3, E5M2};
use sinter_core::prelude::*;

/// Values that exercise every rounding rule of both formats, as f32: every code's value, the
/// midpoints between neighbouring codes (ties to even), just off them, past the largest finite
/// values (overflow), subnormal edges, signed zeros, NaN and the infinities.
fn probe_values() -> Vec<f64> {
    let mut v = vec![f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 0.0, -0.0, 464.0, 470.0, 480.0, 1e6, -1e6];
    v.extend([61439.0, 61440.0, 65504.0, 1e-10, -1e-10, 2f64.powi(-10), 2f64.powi(-17), 3.0 * 2f64.powi(-10)]);
    for f in [E4M3, E5M2] {
        let mut finite: Vec<f64> = (0..=255u8).map(|c| f.decode(c)).filter(|x| x.is_finite()).collect();
        finite.sort_by(|a, b| a.partial_cmp(b).unwrap());
        for w in finite.windows(2) {
            let mid = (w[0] + w[1]) / 2.0;
            v.extend([w[0], mid, mid + (w[1] - w[0]) / 8.0, mid - (w[1] - w[0]) / 8.0]);
        }
    }
    // Through f32, as kernels hold them (every value above is exact in f32).
    v.into_iter().map(|x| x as f32 as f64).collect()
}

#[test]
fn fp8_conversions_are_bit_exact() {
    let Some(b) = backend("fp8_conversions") else { return };
    // f32 -> fp8 (stores round) and back (loads widen), for both formats.
    let xs = probe_values();
    let g = Graph::new();
    let x = g.input("x", DType::F32, [xs.len()]);
    let (e4, e5) = (x.cast(DType::F8E4M3), x.cast(DType::F8E5M2));
    g.output(&e4);
    g.output(&e5);
    // A cast inside a kernel (rounded, then computed on): fp8 -> f32 -> * 1.
    g.output(&(e4.cast(DType::F32) * 1.0));
    g.output(&(e5.cast(DType::F32) * 1.0));
    let inputs = [HostTensor::from_f64(DType::F32, vec![xs.len()], &xs)];
    let want = sinter_core::cpu::run(&g, &inputs).unwrap();
    for mode in [Mode::Default, Mode::ReduceOverhead] {
        let c = compile(&g, b.clone(), opts(mode)).unwrap();
        let got = c.run(&inputs).unwrap();
        // The fp8 codes exactly (NaN codes included); the widened values NaN-aware.
        assert_eq!(got[0].data, want[0].data, "f32 -> e4m3 codes [{mode:?}]");
        assert_eq!(got[1].data, want[1].data, "f32 -> e5m2 codes [{mode:?}]");
        let cmp = sinter_core::compare::compare_outputs(&got[2..], &want[2..], |_| (0.0, 0.0));
        assert!(cmp.max_ratio == 0.0, "widened fp8 values differ [{mode:?}]: {cmp:?}");
    }
    // Every code of each format to every float dtype and to the other format.
    for from in [DType::F8E4M3, DType::F8E5M2] {
        let g = Graph::new();
        let x = g.input("x", from, [256]);
        for to in [DType::F32, DType::F16, DType::BF16, DType::F64, DType::F8E4M3, DType::F8E5M2, DType::I32] {
            g.output(&x.cast(to));
        }
        let codes: Vec<u8> = (0..=255).collect();
        let inputs = [HostTensor::from_le_bytes(from, vec![256], &codes).unwrap()];
        let want = sinter_core::cpu::run(&g, &inputs).unwrap();
        let got = compile(&g, b.clone(), opts(Mode::Default)).unwrap().run(&inputs).unwrap();
        let cmp = sinter_core::compare::compare_outputs(&got, &want, |_| (0.0, 0.0));
        assert!(cmp.max_ratio == 0.0, "casts from every {from} code: {cmp:?}");
        for (g, w) in got.iter().zip(&want).filter(|(g, _)| g.dtype().is_fp8()) {
            assert_eq!(g.data, w.data, "{from} -> {} codes", g.dtype());
        }
    }
}

/// `a @ b^T` of fp8 values in f64, times the scales: the product before the rounding to bf16.
fn reference(a: &HostTensor, b: &HostTensor, b_nk: bool, (m, k, n): (usize, usize, usize), s: f64) -> Vec<f64> {
    let (a, b) = (a.to_f64_vec(), b.to_f64_vec());
    let mut out = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            let mut acc = 0.0;
            for p in 0..k {
                acc += a[i * k + p] * if b_nk { b[j * k + p] } else { b[p * n + j] };
            }
            out[i * n + j] = acc * s;
        }
    }
    out
}

/// One `_scaled_mm` case: `b` stored `[n, k]` (torch's column-major operand) or `[k, n]`.
struct Case {
    m: usize,
    k: usize,
    n: usize,
    a: DType,
    b: DType,
    b_nk: bool,
    /// Whether cuBLASLt takes it in default mode on sm_89+ (large enough and within its rules).
    library: bool,
}

#[test]
fn scaled_mm_through_cublaslt_and_the_fallback() {
    let Some(b) = backend("scaled_mm") else { return };
    let (e4, e5) = (DType::F8E4M3, DType::F8E5M2);
    let c = |m, k, n, a, b, b_nk, library| Case { m, k, n, a, b, b_nk, library };
    let cases = [
        c(16, 16, 16, e4, e4, true, false),
        c(32, 32, 32, e4, e4, true, false),
        c(67, 48, 80, e4, e4, true, false),
        c(4096, 256, 4096, e4, e4, true, true),
        c(4095, 512, 1024, e4, e4, true, true),
        // cuBLASLt refuses: k not a multiple of 16, n not a multiple of 16, B row-major (NN),
        // e5m2 x e5m2; mixed formats are no prologue at all (f32 copies).
        c(4096, 72, 4096, e4, e4, true, false),
        c(2048, 512, 1000, e4, e4, true, false),
        c(2048, 512, 1024, e4, e4, false, false),
        c(2048, 512, 1024, e5, e5, true, false),
        c(1024, 512, 1024, e4, e5, true, false),
        c(7, 33, 9, e5, e5, false, false),
    ];
    for (i, t) in cases.iter().enumerate() {
        let (m, k, n) = (t.m, t.k, t.n);
        let g = Graph::new();
        let a = g.input("a", t.a, [m, k]);
        let bb = if t.b_nk { g.input("b", t.b, [n, k]) } else { g.input("b", t.b, [k, n]) };
        let (sa, sb) = (g.input("scale_a", DType::F32, []), g.input("scale_b", DType::F32, []));
        let bf = if t.b_nk { bb.cast(DType::F32).transpose(0, 1) } else { bb.cast(DType::F32) };
        g.output(&((a.cast(DType::F32).matmul(&bf) * &sa) * &sb).cast(DType::BF16));
        let bshape = if t.b_nk { vec![n, k] } else { vec![k, n] };
        let inputs = [
            HostTensor::random(t.a, vec![m, k], 100 + i as u64, -3.0, 3.0),
            HostTensor::random(t.b, bshape, 200 + i as u64, -3.0, 3.0),
            HostTensor::scalar(DType::F32, 0.5),
            HostTensor::scalar(DType::F32, 0.75),
        ];
        let exact = reference(&inputs[0], &inputs[1], t.b_nk, (m, k, n), 0.375);
        let want = HostTensor::from_f64(DType::BF16, vec![m, n], &exact);
        // bf16 output: one rounding of an f32 sum of k products (exact in f64) in another order.
        let atol = 2e-2 * (k as f64).sqrt();
        let what = format!("{}x{} {m}x{k}x{n} b {}", t.a, t.b, if t.b_nk { "[n, k]" } else { "[k, n]" });
        for mode in [Mode::Default, Mode::MaxAutotune] {
            let cg = compile(&g, b.clone(), opts(mode)).unwrap_or_else(|e| panic!("{what} [{mode:?}]: {e}"));
            let got = cg.run(&inputs).unwrap_or_else(|e| panic!("{what} [{mode:?}]: {e}"));
            let r = got[0].tolerance_ratio(&want, DType::BF16.rel_tolerance(), atol);
            assert!(r <= 1.0, "{what} [{mode:?}]: tolerance ratio {r}, max abs diff {}", got[0].max_abs_diff(&want));
            if mode == Mode::Default {
                let heads: Vec<String> = cg.sources().iter().map(|s| s.source.lines().take(3).collect()).collect();
                let lib = heads.iter().any(|h| h.contains("cuBLASLt product") && h.contains("F8E4M3 operands"));
                let fp8_ok = sinter_cuda::probe::cublaslt().is_ok();
                assert_eq!(lib, t.library && fp8_ok, "{what}: cuBLASLt fp8 product expected {}: {heads:#?}", t.library);
                // An fp8 product on the own template says why in its source.
                let why = cg.sources().iter().any(|s| s.source.contains("// not a cuBLASLt fp8 product: "));
                assert_eq!(why, !lib && t.a == t.b, "{what}: the reason the library was not used");
            }
        }
    }
}

#[test]
fn scaled_mm_workload_at_reduced_scale() {
    let Some(b) = backend("scaled_mm_workload") else { return };
    use sinter_core::workloads::{self, Scale};
    let w = workloads::get("matmul_8192_fp8e4m3").unwrap();
    let g = w.build(Scale::Reduced).unwrap();
    let inputs = w.inputs(Scale::Reduced, 3);
    let want = w.reference(Scale::Reduced, &inputs).unwrap();
    let (rtol, atol) = w.tolerance();
    for mode in [Mode::Default, Mode::ReduceOverhead, Mode::MaxAutotune] {
        let got = compile(&g, b.clone(), opts(mode)).unwrap().run(&inputs).unwrap();
        let r = got[0].tolerance_ratio(&want[0], rtol, atol);
        assert!(r <= 1.0, "[{mode:?}] tolerance ratio {r}");
    }
}
