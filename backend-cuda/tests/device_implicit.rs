//! TF32 and implicit-GEMM convolutions on a GPU against the CPU reference: convolutions at
//! awkward shapes (batch 1 and 3; 1, 3, 7 channels; stride 2, padding, dilation, groups) as
//! implicit GEMMs in TF32 (f32, PyTorch's default), bf16 and f16, and exact (`tf32 off`: im2col
//! and an exact product), each with a fused epilogue; f32 matmuls with TF32 allowed on the own
//! template and on cuBLASLt (`FAST_TF32`), shown to differ from exact f32 by more than its bound
//! (so TF32 ran) and to stay within the TF32 bound; ResNet-18 (reduced) end to end.
//!
//! Bounds: `testsuite::Tol::sum(k, magnitude)`, widened by `Tol::tf32` exactly where the compiled
//! program set TF32 (`testsuite::tol_for`). Without a CUDA driver every test prints a skip line,
//! unless `SINTER_REQUIRE_CUDA=1`.

mod common;
mod launch;

use common::{Conv, conv_case};
use launch::backend;
use sinter_core::backend::Mode;
use sinter_core::compile::{CompileOptions, CompiledGraph, compile};
use sinter_core::kernel::KernelBody;
use sinter_core::prelude::*;
use sinter_core::schedule::AllowTf32;
use sinter_core::testsuite::{Tol, compare, tol_for};
use sinter_core::workloads::{self, Scale};

fn opts(mode: Mode, tf32: AllowTf32) -> CompileOptions {
    CompileOptions { tf32, graph_breaks: false, ..launch::options(mode) }
}

/// Kernels of `c`'s program: (implicit im2col matmuls, matmuls allowed TF32).
fn plan(c: &CompiledGraph) -> (usize, usize) {
    let ks: Vec<_> = c.programs().into_iter().flat_map(|p| p.kernels).collect();
    let mm = |f: &dyn Fn(&sinter_core::kernel::MatmulBody) -> bool| {
        ks.iter().filter(|k| matches!(&k.body, KernelBody::Matmul(m) if f(m))).count()
    };
    (mm(&|m| m.b.im2col.is_some()), mm(&|m| m.tf32))
}

const AWKWARD: [Conv; 8] = [
    ([1, 1, 5, 5], [16, 1, 5, 5], [1, 1], [2; 4], [1, 1], 1),
    ([3, 3, 9, 7], [16, 3, 3, 3], [2, 2], [1; 4], [1, 1], 1),
    ([1, 7, 6, 5], [24, 7, 3, 3], [1, 1], [1; 4], [1, 1], 1),
    ([3, 5, 9, 8], [32, 5, 3, 2], [1, 2], [2, 0, 1, 3], [2, 2], 1),
    ([3, 3, 31, 29], [64, 3, 7, 7], [2, 2], [3; 4], [1, 1], 1),
    ([3, 32, 6, 6], [32, 16, 3, 3], [1, 1], [1; 4], [1, 1], 2),
    ([3, 16, 7, 7], [32, 16, 1, 1], [2, 2], [0; 4], [1, 1], 1),
    // Wide enough for several tiles along every dimension, an odd reduction (k = 9 * 67).
    ([2, 67, 20, 19], [130, 67, 3, 3], [1, 1], [1; 4], [1, 1], 1),
];

#[test]
fn implicit_convs_match_the_reference() {
    let Some(b) = backend("implicit_convs_match_the_reference") else { return };
    for (i, &(xs, ws, stride, pad, dil, groups)) in AWKWARD.iter().enumerate() {
        for (dt, tf32) in [
            (DType::F32, AllowTf32::CONV),
            (DType::F32, AllowTf32::OFF),
            (DType::BF16, AllowTf32::CONV),
            (DType::F16, AllowTf32::CONV),
        ] {
            let (g, ins) = conv_case((xs, ws, stride, pad, dil, groups), dt, 1 + i as u64);
            let want = sinter_core::cpu::run(&g, &ins).expect("reference");
            let modes: &[Mode] = if i == 7 { &[Mode::Default, Mode::MaxAutotune] } else { &[Mode::Default] };
            for &mode in modes {
                let ctx = format!("case {i} {dt} tf32 {tf32} {mode:?}");
                let c = compile(&g, b.clone(), opts(mode, tf32)).unwrap_or_else(|e| panic!("{ctx}: compile: {e}"));
                let got = c.run(&ins).unwrap_or_else(|e| panic!("{ctx}: run: {e}"));
                let (implicit, marked) = plan(&c);
                let exact = dt == DType::F32 && !tf32.conv;
                assert_eq!(implicit, usize::from(!exact), "{ctx}");
                assert_eq!(marked, usize::from(dt == DType::F32 && tf32.conv), "{ctx}");
                let k = ws[1] * ws[2] * ws[3];
                // Terms |x w| <= 4. Half types: the reference rounds the convolution to bf16/f16
                // before the epilogue (the kernel keeps it in f32), an error relative to the
                // convolution's size (about 4/3 sqrt(k) for these inputs), not the output's.
                let magnitude = if dt == DType::F32 { 4.0 } else { 8.0 * (k as f64).sqrt() };
                let tol = tol_for(&c, Tol::sum(k, magnitude));
                compare(&got, &want, tol).unwrap_or_else(|e| panic!("{ctx}: {e}"));
            }
        }
    }
}

/// Relative L2 error of `got` against `want` (all outputs together).
fn rel_l2(got: &[HostTensor], want: &[HostTensor]) -> f64 {
    let (mut num, mut den) = (0.0, 0.0);
    for (g, w) in got.iter().zip(want) {
        for (a, b) in g.to_f64_vec().iter().zip(w.to_f64_vec()) {
            num += (a - b) * (a - b);
            den += b * b;
        }
    }
    (num / den.max(f64::MIN_POSITIVE)).sqrt()
}

#[test]
fn tf32_matmuls_on_the_template_and_cublaslt() {
    let Some(b) = backend("tf32_matmuls_on_the_template_and_cublaslt") else { return };
    // 96x80x1024 (the own template: below the library's size) and 1024^3 (cuBLASLt in default
    // mode), exact by default (PyTorch: no TF32 for matmuls), TF32 with `on`.
    for (m, n, k) in [(96, 80, 1024), (1024, 1024, 1024)] {
        let g = Graph::new();
        let x = g.input("x", DType::F32, [m, k]);
        let y = g.input("y", DType::F32, [k, n]);
        g.output(&x.matmul(&y));
        let ins = [
            HostTensor::random(DType::F32, vec![m, k], 5, -2.0, 2.0),
            HostTensor::random(DType::F32, vec![k, n], 6, -2.0, 2.0),
        ];
        let want = sinter_core::cpu::run(&g, &ins).expect("reference");
        let exact_tol = Tol::sum(k, 4.0);
        let exact = compile(&g, b.clone(), opts(Mode::Default, AllowTf32::default())).expect("compile");
        let got = exact.run(&ins).expect("run");
        assert_eq!(plan(&exact).1, 0);
        compare(&got, &want, exact_tol).unwrap_or_else(|e| panic!("{m}x{n}x{k} exact: {e}"));
        let fast = compile(&g, b.clone(), opts(Mode::Default, AllowTf32::ON)).expect("compile");
        let got = fast.run(&ins).expect("run");
        assert_eq!(plan(&fast).1, 1);
        compare(&got, &want, exact_tol.tf32()).unwrap_or_else(|e| panic!("{m}x{n}x{k} tf32: {e}"));
        // TF32 ran: its error (about 2^-11 sqrt(k) of the terms) is far beyond the exact bound.
        assert!(compare(&got, &want, exact_tol).is_err(), "{m}x{n}x{k}: TF32 allowed but the result is exact");
        let l2 = rel_l2(&got, &want);
        assert!(l2 < 2e-3, "{m}x{n}x{k}: rel L2 {l2}");
    }
}

#[test]
fn tf32_matmul_operand_layouts_on_the_template() {
    let Some(b) = backend("tf32_matmul_operand_layouts_on_the_template") else { return };
    // A read through an odd offset and row stride (4-byte copies), B transposed (k-major), and
    // the reverse (A k-minor): every loader and shared layout of the TF32 template. k stays under
    // 512: a product this narrow with a longer reduction is skinny and goes to cuBLASLt
    // (`library::skinny`).
    let (m, n, k) = (77, 45, 488);
    for a_t in [false, true] {
        let g = Graph::new();
        let x = g.input("x", DType::F32, if a_t { [k, m + 1] } else { [m, k + 1] });
        let y = g.input("y", DType::F32, [n, k]);
        let a = if a_t { x.slice(1, 1, m as i64 + 1, 1).permute(&[1, 0]) } else { x.slice(1, 1, k as i64 + 1, 1) };
        g.output(&a.matmul(&y.permute(&[1, 0])).relu());
        let ins = [
            HostTensor::random(DType::F32, x.shape().as_static().expect("static"), 7, -2.0, 2.0),
            HostTensor::random(DType::F32, vec![n, k], 8, -2.0, 2.0),
        ];
        let want = sinter_core::cpu::run(&g, &ins).expect("reference");
        let c = compile(&g, b.clone(), opts(Mode::Default, AllowTf32::ON)).expect("compile");
        let got = c.run(&ins).expect("run");
        assert_eq!(plan(&c).1, 1);
        assert!(c.sources().iter().any(|s| s.source.contains("TF32 mma.sync m16n8k8")), "a_t {a_t}");
        let tol = Tol::sum(k, 4.0);
        compare(&got, &want, tol.tf32()).unwrap_or_else(|e| panic!("a_t {a_t}: {e}"));
        assert!(compare(&got, &want, tol).is_err(), "a_t {a_t}: TF32 allowed but the result is exact");
    }
}

#[test]
fn resnet18_with_implicit_tf32_convolutions() {
    let Some(b) = backend("resnet18_with_implicit_tf32_convolutions") else { return };
    let w = workloads::get("resnet18_b32_f32").expect("resnet18");
    let g = w.build(Scale::Reduced).expect("build");
    let ins = w.inputs(Scale::Reduced, 42);
    let want = w.reference(Scale::Reduced, &ins).expect("reference");
    // PyTorch's defaults: 20 implicit TF32 convolutions; within `sinter bench --check`'s TF32 bound.
    let c = compile(&g, b.clone(), opts(Mode::Default, AllowTf32::default())).expect("compile");
    let got = c.run(&ins).expect("run");
    assert_eq!(plan(&c), (20, 20));
    let l2 = rel_l2(&got, &want);
    eprintln!("resnet18 reduced, TF32 convolutions: rel L2 {l2:.2e}");
    assert!(l2 <= 5e-3, "rel L2 {l2}");
    // Exact f32: im2col gathers, exact products, the workload's elementwise bound.
    let c = compile(&g, b.clone(), opts(Mode::Default, AllowTf32::OFF)).expect("compile");
    let got = c.run(&ins).expect("run");
    assert_eq!(plan(&c), (0, 0));
    let (rtol, atol) = w.tolerance();
    let cmp = sinter_core::compare::compare_outputs(&got, &want, |_| (rtol, atol));
    assert!(cmp.ok(), "exact: {:?}", cmp.problem);
}

/// Convolutions large enough for cuDNN in default mode (at least `LIBRARY_MIN_FLOPS`) at awkward
/// shapes (odd channels and extents, groups, dilation, a 7x7 stride-2 stem, a strided 1x1), in
/// TF32, bf16 and f16, each with the fused epilogue split after the library call: against the
/// CPU reference, the sources saying cuDNN ran; a window with asymmetric padding falls back to the
/// own template. Skips without libcudnn unless `SINTER_REQUIRE_CUDNN=1`.
#[test]
fn cudnn_convolutions_match_the_reference() {
    let Some(b) = backend("cudnn_convolutions_match_the_reference") else { return };
    if let Err(why) = sinter_cuda::probe::cudnn() {
        assert!(std::env::var("SINTER_REQUIRE_CUDNN").is_err(), "SINTER_REQUIRE_CUDNN=1 but {why}");
        eprintln!("skipping cudnn_convolutions_match_the_reference: {why}");
        return;
    }
    let cases: [(Conv, bool); 6] = [
        (([3, 67, 41, 37], [130, 67, 3, 3], [1, 1], [1; 4], [1, 1], 1), true),
        (([2, 64, 30, 30], [128, 32, 3, 3], [1, 1], [1; 4], [1, 1], 2), true),
        // A stem (3 input channels): the own template in default mode (`CUDNN_MIN_CHANNELS`).
        (([4, 3, 229, 225], [64, 3, 7, 7], [2, 2], [3; 4], [1, 1], 1), false),
        (([9, 256, 27, 27], [512, 256, 1, 1], [2, 2], [0; 4], [1, 1], 1), true),
        (([3, 40, 33, 31], [72, 40, 3, 3], [1, 1], [2; 4], [2, 2], 1), true),
        // Two rows of padding on top, none at the bottom: cuDNN pads both sides alike.
        (([3, 64, 30, 30], [128, 64, 3, 3], [1, 1], [2, 1, 0, 1], [1, 1], 1), false),
    ];
    for (i, &((xs, ws, stride, pad, dil, groups), library)) in cases.iter().enumerate() {
        for dt in [DType::F32, DType::BF16, DType::F16] {
            let (g, ins) = conv_case((xs, ws, stride, pad, dil, groups), dt, 11 + i as u64);
            let want = sinter_core::cpu::run(&g, &ins).expect("reference");
            let modes: &[Mode] = if i == 0 || i == 2 { &[Mode::Default, Mode::MaxAutotune] } else { &[Mode::Default] };
            for &mode in modes {
                let ctx = format!("case {i} {dt} {mode:?}");
                let c = compile(&g, b.clone(), opts(mode, AllowTf32::CONV)).unwrap_or_else(|e| panic!("{ctx}: {e}"));
                let got = c.run(&ins).unwrap_or_else(|e| panic!("{ctx}: run: {e}"));
                let on_cudnn = c.sources().iter().any(|s| s.source.contains("cuDNN forward convolution"));
                if mode == Mode::Default {
                    assert_eq!(on_cudnn, library, "{ctx}");
                }
                eprintln!("{ctx}: {}", if on_cudnn { "cuDNN" } else { "own template" });
                let k = ws[1] * ws[2] * ws[3];
                // As `implicit_convs_match_the_reference`; the library also rounds the convolution
                // to bf16/f16 before the epilogue, as the reference does.
                let magnitude = if dt == DType::F32 { 4.0 } else { 8.0 * (k as f64).sqrt() };
                let tol = tol_for(&c, Tol::sum(k, magnitude));
                compare(&got, &want, tol).unwrap_or_else(|e| panic!("{ctx}: {e}"));
            }
        }
    }
}

/// The device for a cuDNN measurement test, `None` (skipped, said why) without a GPU or libcudnn.
fn cudnn_device(test: &str) -> Option<sinter_cuda::device::Device> {
    let dev = launch::device(test)?;
    if let Err(why) = sinter_cuda::probe::cudnn() {
        eprintln!("skipping {test}: {why}");
        return None;
    }
    Some(dev)
}

/// A square convolution of `n` images of `c` channels, `hw` x `hw`, to `k` channels with a `ks`
/// x `ks` window at stride `st` and "same" padding, TF32 allowed for f32; the input and output
/// channels-last with `nhwc`. Returns it and its output extent.
fn square_conv(
    (n, c, k, hw, ks, st): (u64, u64, u64, u64, u64, u64),
    nhwc: bool,
    w_krsc: bool,
    dtype: sinter_cuda::device::blas::BlasType,
) -> (sinter_cuda::device::dnn::ConvDesc, u64) {
    let pad = ks / 2;
    let o = (hw + 2 * pad - ks) / st + 1;
    let x_strides = if nhwc { [c * hw * hw, 1, hw * c, c] } else { [c * hw * hw, hw * hw, hw, 1] };
    let d = sinter_cuda::device::dnn::ConvDesc {
        images: n,
        in_channels: c,
        in_hw: [hw, hw],
        x_strides,
        offsets: [0, 0],
        out_channels: k,
        groups: 1,
        kernel: [ks, ks],
        pad: [pad, pad],
        stride: [st, st],
        dilation: [1, 1],
        out_hw: [o, o],
        y_nhwc: nhwc,
        w_krsc,
        dtype,
        tf32: true,
    };
    (d, o)
}

/// Host and device time of one cuDNN forward convolution call (`ConvPlan::launch`), at
/// ResNet-50's batch-8 and ResNet-18's batch-32 layer sizes (TF32 and bf16): prints what the
/// launch costs the host against what the convolution costs the device. Measurement only
/// (`--ignored`): it decides whether the library's host overhead, not its kernels, is what a
/// model pays.
#[test]
#[ignore]
fn cudnn_host_overhead() {
    use sinter_cuda::device::blas::BlasType;
    use sinter_cuda::device::dnn::ConvPlan;
    let Some(dev) = cudnn_device("cudnn_host_overhead") else { return };
    let stream = dev.new_stream().expect("stream");
    for (n, c, k, hw, ks, st) in [
        (8u64, 64u64, 64u64, 56u64, 3u64, 1u64),
        (8, 256, 256, 14, 3, 1),
        (32, 64, 64, 56, 3, 1),
        (32, 512, 512, 7, 3, 1),
    ] {
        for dtype in [BlasType::F32, BlasType::BF16] {
            let (d, o) = square_conv((n, c, k, hw, ks, st), false, false, dtype);
            let e = dtype.bytes();
            let x = stream.alloc(n * c * hw * hw * e).expect("x");
            let w = stream.alloc(k * c * ks * ks * e).expect("w");
            let y = stream.alloc(n * k * o * o * e).expect("y");
            let plan = ConvPlan::new(&stream, &d, 0).expect("plan");
            for _ in 0..5 {
                plan.launch(&stream, x.ptr(), w.ptr(), y.ptr()).expect("launch");
            }
            stream.synchronize("warm").expect("sync");
            let iters = 100;
            let t0 = std::time::Instant::now();
            for _ in 0..iters {
                plan.launch(&stream, x.ptr(), w.ptr(), y.ptr()).expect("launch");
            }
            let host = t0.elapsed().as_secs_f64() / iters as f64;
            stream.synchronize("timed").expect("sync");
            let total = t0.elapsed().as_secs_f64() / iters as f64;
            let flops = 2.0 * (n * k * o * o * c * ks * ks) as f64;
            println!(
                "cudnn {dtype:?} n{n} {c}->{k} {hw}x{hw} k{ks}: host {:.1} us/call, wall {:.1} us/call ({:.0} TFLOP/s), {}",
                host * 1e6,
                total * 1e6,
                flops / total / 1e12,
                plan.describe()
            );
        }
    }
}

/// cuDNN on ResNet-18's convolutions at batch 32 (TF32, channels-last input and output, as sinter
/// lays them out) with the weight in `KCRS` (sinter's layout) and in `KRSC` (PyTorch's
/// channels-last weights): device time per call of every heuristic algorithm (up to 4), 50 calls
/// back to back. Measurement only (`--ignored`): it decides whether sinter should hand cuDNN
/// `KRSC` weights.
#[test]
#[ignore]
fn cudnn_filter_layouts() {
    use sinter_cuda::device::TimingEvents;
    use sinter_cuda::device::blas::BlasType;
    use sinter_cuda::device::dnn::ConvPlan;
    let Some(dev) = cudnn_device("cudnn_filter_layouts") else { return };
    let stream = dev.new_stream().expect("stream");
    let ev = TimingEvents::new(&dev, 1).expect("events");
    for (c, k, hw, ks, st) in [
        (3u64, 64u64, 224u64, 7u64, 2u64),
        (64, 64, 56, 3, 1),
        (128, 128, 28, 3, 1),
        (256, 256, 14, 3, 1),
        (512, 512, 7, 3, 1),
    ] {
        let n = 32u64;
        let o = square_conv((n, c, k, hw, ks, st), true, false, BlasType::F32).1;
        let x = stream.alloc(n * c * hw * hw * 4).expect("x");
        let w = stream.alloc(k * c * ks * ks * 4).expect("w");
        let y = stream.alloc(n * k * o * o * 4).expect("y");
        stream.fill(x.ptr(), 0x3c, n * c * hw * hw * 4, "x").expect("fill");
        stream.fill(w.ptr(), 0x3c, k * c * ks * ks * 4, "w").expect("fill");
        let flops = 2.0 * (n * k * o * o * c * ks * ks) as f64;
        for w_krsc in [false, true] {
            let d = square_conv((n, c, k, hw, ks, st), true, w_krsc, BlasType::F32).0;
            let algos = ConvPlan::new(&stream, &d, 0).map(|p| p.algos()).unwrap_or(0);
            for algo in 0..algos.min(4) {
                let Ok(plan) = ConvPlan::new(&stream, &d, algo) else { continue };
                for _ in 0..3 {
                    plan.launch(&stream, x.ptr(), w.ptr(), y.ptr()).expect("launch");
                }
                let iters = 50;
                ev.record(0, false, &stream).expect("event");
                for _ in 0..iters {
                    plan.launch(&stream, x.ptr(), w.ptr(), y.ptr()).expect("launch");
                }
                ev.record(0, true, &stream).expect("event");
                let us = ev.elapsed_ms(0, 0, true).expect("elapsed") * 1e3 / iters as f64;
                println!(
                    "n{n} {c}->{k} {hw}x{hw} k{ks} s{st} w {}: algo {}/{algos} {us:.1} us ({:.0} TFLOP/s) {}",
                    if w_krsc { "KRSC" } else { "KCRS" },
                    algo + 1,
                    flops / us / 1e6,
                    plan.describe()
                );
            }
        }
    }
}

/// Two convolutions in a row, each large enough for cuDNN (1.9e8 and 1.6e8 FLOP): the first one's
/// output (after its bias and ReLU) is stored channels-last for the second (the CUDA cost model's
/// `conv_channels_last`), so cuDNN writes an NHWC scratch and reads an NHWC input; against the CPU
/// reference in TF32, bf16 and f16, twice, the sources saying so. The second convolution reads
/// its weight in `KRSC` order: with `constant_weights` (as an exported model has them) permuted
/// once at load (`ConvStep::use_krsc_weight`), the second run reading the same copy; else
/// permuted before each run, the second run with a new weight. Skips without libcudnn unless
/// `SINTER_REQUIRE_CUDNN=1`.
fn channels_last_chain(test: &str, constant_weights: bool) {
    let Some(b) = backend(test) else { return };
    if let Err(why) = sinter_cuda::probe::cudnn() {
        assert!(std::env::var("SINTER_REQUIRE_CUDNN").is_err(), "SINTER_REQUIRE_CUDNN=1 but {why}");
        eprintln!("skipping {test}: {why}");
        return;
    }
    for dt in [DType::F32, DType::BF16, DType::F16] {
        let g = Graph::new();
        let x = g.input("x", dt, [4, 48, 29, 27]);
        let params = [("w1", vec![72, 48, 3, 3]), ("b1", vec![72]), ("w2", vec![40, 72, 3, 3])];
        let mut ins = vec![HostTensor::random(dt, vec![4, 48, 29, 27], 21, -1.0, 1.0)];
        let p: Vec<_> = params
            .into_iter()
            .zip(22..)
            .map(|((name, shape), seed)| {
                let t = HostTensor::random(dt, shape.clone(), seed, -1.0, 1.0);
                if constant_weights {
                    g.constant(t)
                } else {
                    ins.push(t);
                    g.input(name, dt, shape)
                }
            })
            .collect();
        let h = x.conv2d(&p[0], Some(&p[1]), [1, 1], [1; 4], [1, 1], 1).relu();
        g.output(&h.conv2d(&p[2], None, [1, 1], [1; 4], [1, 1], 1));
        let mut want = sinter_core::cpu::run(&g, &ins).expect("reference");
        let c = compile(&g, b.clone(), opts(Mode::Default, AllowTf32::CONV)).unwrap_or_else(|e| panic!("{dt}: {e}"));
        let sources: Vec<String> = c.sources().iter().map(|s| s.source.clone()).collect();
        assert!(sources.iter().any(|s| s.contains("into an NHWC scratch")), "{dt}: {sources:#?}");
        assert_eq!(sources.iter().filter(|s| s.contains("cuDNN forward convolution")).count(), 2, "{dt}");
        let per_run = sources.iter().filter(|s| s.contains("permuted to KRSC before each convolution")).count();
        let once = sources.iter().filter(|s| s.contains("permuted to KRSC once at load")).count();
        assert_eq!((per_run, once), (1, usize::from(constant_weights)), "{dt}: {sources:#?}");
        for run in 0..2 {
            if run == 1 && !constant_weights {
                ins[3] = HostTensor::random(dt, vec![40, 72, 3, 3], 99, -1.0, 1.0);
                want = sinter_core::cpu::run(&g, &ins).expect("reference");
            }
            let got = c.run(&ins).unwrap_or_else(|e| panic!("{dt}: run: {e}"));
            if dt == DType::F32 {
                // The second convolution's terms |h w2| <= 433 (|h| <= 48 * 9 + 1, |w2| <= 1),
                // which also bounds the first one's error carried through it.
                compare(&got, &want, tol_for(&c, Tol::sum(72 * 9, 433.0)))
                    .unwrap_or_else(|e| panic!("{dt} run {run}: {e}"));
            } else {
                // 16-bit: h is rounded to bf16/f16 in both, but from sums taken in different
                // orders, so an element of h may differ by an ulp, which the second convolution
                // carries into up to 648 terms (seen on an H200: 2 of 125280 bf16 outputs beyond
                // a per-element bound). The whole output within a relative L2 error of a few of
                // the type's ulps.
                let l2 = rel_l2(&got, &want);
                let bound = if dt == DType::BF16 { 1e-2 } else { 2e-3 };
                assert!(l2 <= bound, "{dt} run {run}: rel L2 {l2:.2e} > {bound:.0e}");
            }
        }
        eprintln!("{dt}: channels-last chain ok (constant weights: {constant_weights})");
    }
}

#[test]
fn cudnn_channels_last_chain_matches_the_reference() {
    channels_last_chain("cudnn_channels_last_chain_matches_the_reference", false);
}

#[test]
fn cudnn_constant_weights_in_krsc_match_the_reference() {
    channels_last_chain("cudnn_constant_weights_in_krsc_match_the_reference", true);
}
