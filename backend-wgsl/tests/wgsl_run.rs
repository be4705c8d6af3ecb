//! GPU tests of the WGSL backend on whatever adapter exists (lavapipe in CI): hand-built kernels and
//! scheduled graphs compared with the kernel-IR interpreter and the CPU reference, at awkward sizes, with
//! outputs poisoned first.
//!
//! Without an adapter each test prints `SKIPPED` and returns; with `SINTER_REQUIRE_GPU=1` a missing adapter
//! fails instead.

mod common;

use common::*;
use sinter_core::backend::{Backend, BackendError, Executable, Mode};
use sinter_core::ir::{BinaryOp, UnaryOp};
use sinter_core::kernel::{Access, Expr, Program, ReduceStrategy, interp};
use sinter_core::prelude::*;
use sinter_wgsl::WgslBackend;

/// The shared backend of this test binary ([`common::gpu_backend`]).
fn backend() -> Option<&'static WgslBackend> {
    common::gpu_backend()
}

/// Runs `p` on the GPU with outputs poisoned first.
fn gpu_run(b: &WgslBackend, p: &Program, inputs: &[HostTensor], mode: Mode) -> Vec<HostTensor> {
    let mut exe = b.load_wgsl(p, mode).unwrap_or_else(|e| panic!("load failed: {e}"));
    exe.poison(0xff).expect("poison");
    exe.run(inputs).unwrap_or_else(|e| panic!("run failed: {e}"))
}

#[test]
fn pointwise_broadcast_awkward_sizes() {
    let Some(b) = backend() else { return };
    for d in [DType::F32, DType::F16, DType::BF16] {
        for (rows, cols) in [(1, 1), (7, 1), (1, 1023), (3, 4097), (5, 4096), (33, 64)] {
            let p = add_relu_mul(rows, cols, d);
            let inputs = vec![random(d, &[rows, cols], 1, -2.0, 2.0), random(d, &[cols], 2, -1.0, 1.0)];
            let want = interp::run_program(&p, &inputs).expect("interp");
            let got = gpu_run(b, &p, &inputs, Mode::Default);
            assert_close(&got, &want, &format!("add_relu_mul {d} {rows}x{cols}"));
        }
    }
}

#[test]
fn softmax_strategies_and_sizes() {
    let Some(b) = backend() else { return };
    for d in [DType::F32, DType::BF16, DType::F16] {
        for strategy in [ReduceStrategy::Persistent, ReduceStrategy::Looped, ReduceStrategy::ThreadPerRow] {
            for (rows, len) in [(1, 1), (7, 7), (3, 1023), (2, 4097), (5, 1024), (4, 12)] {
                let p = softmax(rows, len, d, strategy);
                let inputs = vec![random(d, &[rows, len], 3, -4.0, 4.0)];
                let want = interp::run_program(&p, &inputs).expect("interp");
                let got = gpu_run(b, &p, &inputs, Mode::ReduceOverhead);
                assert_close(&got, &want, &format!("softmax {d} {strategy:?} {rows}x{len}"));
            }
        }
    }
}

#[test]
fn matmul_epilogue_sizes_and_layouts() {
    let Some(b) = backend() else { return };
    for d in [DType::F32, DType::BF16, DType::F16] {
        for (m, n, k) in [(1, 1, 1), (7, 9, 13), (100, 96, 72), (65, 130, 33), (64, 64, 64)] {
            for b_t in [false, true] {
                let p = matmul_bias_relu(m, n, k, d, b_t);
                let inputs = matmul_inputs(m, n, k, d, b_t);
                let want = interp::run_program(&p, &inputs).expect("interp");
                let got = gpu_run(b, &p, &inputs, Mode::Default);
                assert_close(&got, &want, &format!("matmul {d} {m}x{n}x{k} b_t={b_t}"));
            }
        }
    }
}

/// Every FMA tile max-autotune may time (the half tiles among them) matches the reference off its
/// tile sizes, with B transposed or not.
#[test]
fn every_matmul_tile_candidate_matches_the_reference() {
    let Some(b) = backend() else { return };
    let probe = matmul_bias_relu(64, 64, 64, DType::F32, false);
    let tiles: Vec<_> = sinter_wgsl::backend::candidates(&probe.kernels[0], b.wgsl_caps())
        .into_iter()
        .filter(|t| t.matmul_tile.is_some())
        .collect();
    assert!(tiles.len() >= 8, "{} tile candidates", tiles.len());
    for t in &tiles {
        for (m, n, k) in [(1, 7, 13), (33, 65, 17), (100, 130, 40)] {
            for b_t in [false, true] {
                let p = matmul_bias_relu(m, n, k, DType::F32, b_t);
                let inputs = matmul_inputs(m, n, k, DType::F32, b_t);
                let want = interp::run_program(&p, &inputs).expect("interp");
                let got = run_tuned(b, &p, &inputs, t);
                assert_close(&got, &want, &format!("{t:?} matmul {m}x{n}x{k} b_t={b_t}"));
            }
        }
    }
}

#[test]
fn cooperative_matrix_matmuls_match_the_reference() {
    // Only where the adapter has f16 matrix units (the device machine's GPU through Vulkan): every
    // stage depth, f16 and bf16 (its opt-in), B transposed or not, sizes off the 128x128 tile.
    let Some(Ok(mut b)) = backend().map(|_| open_backend("coop-matmul", None)) else { return };
    if !b.wgsl_caps().has_coop_matrix {
        eprintln!("SKIPPED: the adapter has no f16 cooperative matrices");
        return;
    }
    b.set_bf16_matmul_as_f16(true);
    for depth in sinter_wgsl::render::COOP_DEPTHS {
        let t = sinter_wgsl::render::Tuning { coop_depth: Some(depth), ..Default::default() };
        for (m, n, k) in [(300, 260, 72), (1, 7, 33), (129, 257, 1000), (128, 128, 64)] {
            for d in [DType::F16, DType::BF16] {
                for b_t in [false, true] {
                    let p = matmul_bias_relu(m, n, k, d, b_t);
                    let inputs = matmul_inputs(m, n, k, d, b_t);
                    let want = interp::run_program(&p, &inputs).expect("interp");
                    let got = run_tuned(&b, &p, &inputs, &t);
                    assert_close(&got, &want, &format!("coop depth {depth} matmul {d} {m}x{n}x{k} b_t={b_t}"));
                }
            }
        }
    }
}

/// Inputs for a unary op: a range where it is defined, plus special values.
fn unary_input(op: UnaryOp, d: DType, n: usize, seed: u64) -> HostTensor {
    let (lo, hi) = match op {
        UnaryOp::Log | UnaryOp::Sqrt | UnaryOp::Rsqrt => (0.01, 20.0),
        UnaryOp::Asin | UnaryOp::Acos | UnaryOp::Atanh => (-0.99, 0.99),
        UnaryOp::Acosh => (1.0, 30.0),
        UnaryOp::Tan => (-1.4, 1.4),
        UnaryOp::Exp | UnaryOp::Sinh | UnaryOp::Cosh => (-20.0, 20.0),
        UnaryOp::Sin | UnaryOp::Cos => (-100.0, 100.0),
        UnaryOp::Reciprocal => (0.5, 10.0),
        _ if d.is_float() => (-6.0, 6.0),
        _ if d == DType::U8 || d == DType::U32 => (0.0, 200.0),
        _ => (-100.0, 100.0),
    };
    let mut v = random(d, &[n], seed, lo, hi).to_f64_vec();
    if d.is_float() {
        let specials: Vec<f64> = match op {
            UnaryOp::Log | UnaryOp::Sqrt | UnaryOp::Rsqrt => vec![f64::NAN, f64::INFINITY, 0.0, 1.0, -1.0],
            UnaryOp::Asin | UnaryOp::Acos | UnaryOp::Atanh => vec![f64::NAN, 0.0, -0.0, 0.5, 2.0],
            UnaryOp::Acosh => vec![f64::NAN, 1.0, 0.5, 1e20],
            UnaryOp::Tan | UnaryOp::Sin | UnaryOp::Cos | UnaryOp::Atan | UnaryOp::Asinh => {
                vec![f64::NAN, 0.0, -0.0, 1e-3, -1e-3, 3.0, 1e4]
            }
            UnaryOp::Erf => vec![f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 0.0, 1e-4, -1e-4, 0.5, -0.5, 3.0, 10.0],
            UnaryOp::Tanh | UnaryOp::Sigmoid => {
                vec![f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 0.0, 1e-4, 50.0, -50.0, 100.0, -100.0]
            }
            _ => vec![f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.5, -1.5],
        };
        for (i, s) in specials.into_iter().enumerate() {
            if i < v.len() {
                v[i] = s;
            }
        }
    }
    HostTensor::from_f64(d, vec![n], &v)
}

/// A program computing `y[lane] = op(x[lane])` (and the graph the CPU reference runs).
fn unary_program(op: UnaryOp, d: DType, out: DType, n: usize) -> Program {
    let mut p = ProgramBuilder::new();
    let x = p.input("x", d, &[n]);
    let y = p.output("y", out, &[n]);
    let mut kb = KernelBuilder::new(&format!("k0_{}", op.name()), &[op.name()]);
    let ax = kb.arg(&p, x, Access::Read);
    let ay = kb.arg(&p, y, Access::Write);
    let v = kb.load(ax, lane());
    let r = kb.e(Expr::Unary(op, v), out);
    p.kernel(kb.pointwise(n, vec![st(ay, lane(), r)]));
    p.build()
}

fn binary_program(op: BinaryOp, d: DType, out: DType, n: usize) -> Program {
    let mut p = ProgramBuilder::new();
    let x = p.input("x", d, &[n]);
    let z = p.input("z", d, &[n]);
    let y = p.output("y", out, &[n]);
    let mut kb = KernelBuilder::new(&format!("k0_{}", op.name()), &[op.name()]);
    let ax = kb.arg(&p, x, Access::Read);
    let az = kb.arg(&p, z, Access::Read);
    let ay = kb.arg(&p, y, Access::Write);
    let a = kb.load(ax, lane());
    let c = kb.load(az, lane());
    let r = kb.e(Expr::Binary(op, a, c), out);
    p.kernel(kb.pointwise(n, vec![st(ay, lane(), r)]));
    p.build()
}

#[test]
fn every_unary_op_matches_the_cpu_reference() {
    let Some(b) = backend() else { return };
    for op in UnaryOp::ALL {
        let dtypes: &[DType] = match op {
            UnaryOp::Not => &[DType::Bool],
            _ if op.float_only() => &[DType::F32, DType::BF16],
            _ => &[DType::F32, DType::I32, DType::I8, DType::U8],
        };
        for &d in dtypes {
            let g = Graph::new();
            let x = g.input("x", d, [1]);
            let out = x.unary(op).dtype();
            for (n, seed) in [(1023usize, 7u64), (4096, 8)] {
                let input = unary_input(op, d, n, seed);
                let g = Graph::new();
                let x = g.input("x", d, [n]);
                g.output(&x.unary(op));
                let want = sinter_core::cpu::run(&g, std::slice::from_ref(&input)).expect("cpu reference");
                let p = unary_program(op, d, out, n);
                let got = gpu_run(b, &p, &[input], Mode::Default);
                assert_close(&got, &want, &format!("{} on {d} (n={n})", op.name()));
            }
        }
    }
}

/// Binary-op inputs: `b` avoids zero for integer division and remainders.
fn binary_inputs(op: BinaryOp, d: DType, n: usize) -> (HostTensor, HostTensor) {
    let (lo, hi) = if d.is_float() {
        match op {
            BinaryOp::Pow => (0.1, 3.0),
            _ => (-8.0, 8.0),
        }
    } else if d == DType::Bool {
        (0.0, 2.0)
    } else if matches!(d, DType::U8 | DType::U32) {
        (0.0, 250.0)
    } else {
        (-120.0, 120.0)
    };
    let a = random(d, &[n], 11, lo, hi);
    let mut bv = random(d, &[n], 12, if op == BinaryOp::Pow && d.is_float() { -3.0 } else { lo }, hi).to_f64_vec();
    if !d.is_float() && d != DType::Bool {
        for x in &mut bv {
            if matches!(op, BinaryOp::Div | BinaryOp::Mod | BinaryOp::FMod) && *x == 0.0 {
                *x = 3.0;
            }
            if op == BinaryOp::Pow {
                *x = x.abs() % 5.0;
            }
        }
    }
    let mut av = a.to_f64_vec();
    if d.is_float() && n > 8 {
        // Specials: NaN on each side, infinities, zeros, equal values, negative bases.
        let pairs = [
            (f64::NAN, 1.0),
            (1.0, f64::NAN),
            (f64::INFINITY, 2.0),
            (-3.0, f64::INFINITY),
            (0.0, -0.0),
            (2.5, 2.5),
            (-2.0, 3.0),
            (-2.0, 0.5),
        ];
        for (i, (x, y)) in pairs.into_iter().enumerate() {
            av[i] = x;
            bv[i] = y;
        }
    }
    (HostTensor::from_f64(d, vec![n], &av), HostTensor::from_f64(d, vec![n], &bv))
}

#[test]
fn every_binary_op_matches_the_cpu_reference() {
    let Some(b) = backend() else { return };
    for op in BinaryOp::ALL {
        let dtypes: &[DType] = if op.is_logical() {
            &[DType::Bool]
        } else if op.is_comparison() {
            &[DType::F32, DType::I32, DType::Bool, DType::U8]
        } else {
            &[DType::F32, DType::BF16, DType::I32, DType::I8, DType::U8, DType::I16, DType::U32]
        };
        for &d in dtypes {
            for n in [1023usize, 4096] {
                let (x, z) = binary_inputs(op, d, n);
                let g = Graph::new();
                let gx = g.input("x", d, [n]);
                let gz = g.input("z", d, [n]);
                let r = gx.binary(op, &gz);
                let out = r.dtype();
                g.output(&r);
                let inputs = vec![x, z];
                let want = match sinter_core::cpu::run(&g, &inputs) {
                    Ok(w) => w,
                    Err(e) => panic!("cpu reference of {} on {d}: {e}", op.name()),
                };
                let p = binary_program(op, d, out, n);
                let got = gpu_run(b, &p, &inputs, Mode::Default);
                assert_close(&got, &want, &format!("{} on {d} (n={n})", op.name()));
            }
        }
    }
}

#[test]
fn casts_between_dtypes() {
    let Some(b) = backend() else { return };
    let dts = [
        DType::F32,
        DType::F16,
        DType::BF16,
        DType::I8,
        DType::I16,
        DType::I32,
        DType::U8,
        DType::U16,
        DType::U32,
        DType::Bool,
        DType::I64,
    ];
    for from in dts {
        for to in dts {
            let n = 1021;
            let x = if from.is_float() {
                let mut v = random(from, &[n], 21, -300.0, 300.0).to_f64_vec();
                v[0] = f64::NAN;
                v[1] = 0.0;
                v[2] = -0.0;
                // Out of the i64 emulation's 32-bit range (f16: infinity) except for i64 targets.
                v[3] = if to == DType::I64 { 7.0 } else { 70000.0 };
                HostTensor::from_f64(from, vec![n], &v)
            } else if matches!(from, DType::U8 | DType::U16 | DType::U32) {
                random(from, &[n], 21, 0.0, 300.0)
            } else {
                random(from, &[n], 21, -300.0, 300.0)
            };
            let g = Graph::new();
            let gx = g.input("x", from, [n]);
            g.output(&gx.cast(to));
            let want = sinter_core::cpu::run(&g, std::slice::from_ref(&x)).expect("cpu reference");
            let mut p = ProgramBuilder::new();
            let xi = p.input("x", from, &[n]);
            let yo = p.output("y", to, &[n]);
            let mut kb = KernelBuilder::new("k0_cast", &["cast"]);
            let ax = kb.arg(&p, xi, Access::Read);
            let ay = kb.arg(&p, yo, Access::Write);
            let v = kb.load(ax, lane());
            let c = kb.e(Expr::Cast(v), to);
            p.kernel(kb.pointwise(n, vec![st(ay, lane(), c)]));
            let p = p.build();
            // Floats (unbounded) and u32 (up to 2^32 - 1) may leave the 32 bits WGSL computes i64
            // in: the kernel is refused naming the cast (the compiler then runs it on the CPU
            // reference), never rendered to wrap.
            if to == DType::I64 && (from.is_float() || from == DType::U32) {
                let e = b.load_wgsl(&p, Mode::Default).err().map(|e| e.to_string()).unwrap_or_default();
                assert!(e.contains("i64 cast (v1) may overflow 32-bit arithmetic"), "cast {from} -> {to}: {e:?}");
                continue;
            }
            let got = gpu_run(b, &p, &[x], Mode::Default);
            assert_close(&got, &want, &format!("cast {from} -> {to}"));
        }
    }
}

#[test]
fn arg_reductions_and_row_stores() {
    let Some(b) = backend() else { return };
    for d in [DType::F32, DType::I32, DType::BF16, DType::U8] {
        for strategy in [ReduceStrategy::Persistent, ReduceStrategy::Looped, ReduceStrategy::ThreadPerRow] {
            for (rows, len) in [(1, 1), (5, 7), (3, 1024), (2, 4097)] {
                let p = arg_sum(d, rows, len, strategy);
                // Small integer range: many ties, so first-index tie breaking is exercised.
                let mut xv = random(d, &[rows, len], 31, 0.0, 20.0).to_f64_vec();
                if d.is_float() && xv.len() > 10 {
                    xv[len / 2] = f64::NAN;
                }
                let inputs = vec![HostTensor::from_f64(d, vec![rows, len], &xv)];
                let want = interp::run_program(&p, &inputs).expect("interp");
                let got = gpu_run(b, &p, &inputs, Mode::Default);
                assert_close(&got, &want, &format!("arg/sum {d} {strategy:?} {rows}x{len}"));
            }
        }
    }
}

#[test]
fn sub_word_outputs_from_scalar_and_vector_paths() {
    // i8 / u16 / bool / bf16 outputs written element by element (atomics) and 4 at a time (whole words).
    let Some(b) = backend() else { return };
    for d in [DType::I8, DType::U16, DType::Bool, DType::BF16, DType::I16, DType::F16] {
        for n in [1usize, 7, 1023, 4096] {
            let p = sub_word(n, d);
            let inputs = vec![random(DType::F32, &[n], 41, -100.0, 100.0)];
            let want = interp::run_program(&p, &inputs).expect("interp");
            let got = gpu_run(b, &p, &inputs, Mode::Default);
            assert_close(&got, &want, &format!("sub-word {d} n={n}"));
        }
    }
}

#[test]
fn bad_inputs_are_errors() {
    let Some(b) = backend() else { return };
    let p = add_relu_mul(3, 5, DType::F32);
    let mut exe = b.load_wgsl(&p, Mode::Default).expect("load");
    let x = random(DType::F32, &[3, 5], 1, -1.0, 1.0);
    let bias = random(DType::F32, &[5], 2, -1.0, 1.0);
    assert!(matches!(exe.run(std::slice::from_ref(&x)), Err(BackendError::Input(_))));
    assert!(matches!(exe.run(&[x.clone(), x.clone()]), Err(BackendError::Input(_))));
    assert!(matches!(exe.run(&[x.clone(), random(DType::F16, &[5], 2, -1.0, 1.0)]), Err(BackendError::Input(_))));
    assert!(exe.run(&[x, bias]).is_ok());
    // i64 values beyond the 32-bit emulation are refused, not truncated.
    let mut q = ProgramBuilder::new();
    let xi = q.input("x", DType::I64, &[4]);
    let yo = q.output("y", DType::I64, &[4]);
    let mut kb = KernelBuilder::new("k0_copy", &["copy"]);
    let ax = kb.arg(&q, xi, Access::Read);
    let ay = kb.arg(&q, yo, Access::Write);
    let v = kb.load(ax, lane());
    q.kernel(kb.pointwise(4, vec![st(ay, lane(), v)]));
    let q = q.build();
    let mut exe = b.load_wgsl(&q, Mode::Default).expect("load");
    let ok = HostTensor::from_i64(DType::I64, vec![4], &[-5, 0, 7, i32::MAX as i64]);
    assert_eq!(exe.run(std::slice::from_ref(&ok)).expect("run"), vec![ok]);
    let big = HostTensor::from_i64(DType::I64, vec![4], &[1, 2, 3, 1 << 40]);
    match exe.run(&[big]) {
        Err(BackendError::Unsupported { what, .. }) => assert!(what.contains("1099511627776"), "{what}"),
        other => panic!("expected Unsupported, got {other:?}"),
    }
    // f64 programs are refused at load, naming the dtype.
    let mut f = ProgramBuilder::new();
    let xi = f.input("x", DType::F64, &[4]);
    let yo = f.output("y", DType::F64, &[4]);
    let mut kb = KernelBuilder::new("k0_copy", &["copy"]);
    let ax = kb.arg(&f, xi, Access::Read);
    let ay = kb.arg(&f, yo, Access::Write);
    let v = kb.load(ax, lane());
    f.kernel(kb.pointwise(4, vec![st(ay, lane(), v)]));
    match b.load(&f.build(), Mode::Default) {
        Err(BackendError::Unsupported { what, .. }) => assert!(what.contains("f64"), "{what}"),
        Err(e) => panic!("expected Unsupported, got {e}"),
        Ok(_) => panic!("expected Unsupported, got an executable"),
    }
}

#[test]
fn modes_agree_and_time() {
    let Some(b) = backend() else { return };
    let p = softmax(6, 300, DType::F32, ReduceStrategy::Persistent);
    let inputs = vec![random(DType::F32, &[6, 300], 3, -4.0, 4.0)];
    let want = interp::run_program(&p, &inputs).expect("interp");
    for mode in [Mode::Default, Mode::ReduceOverhead, Mode::MaxAutotune] {
        let mut exe = b.load_wgsl(&p, mode).expect("load");
        exe.poison(0xff).expect("poison");
        let got = exe.run(&inputs).expect("run");
        assert_close(&got, &want, &format!("softmax {mode:?}"));
        let (got, timings) = exe.run_timed(&inputs, 3).expect("run_timed");
        assert_close(&got, &want, &format!("softmax timed {mode:?}"));
        if b.device().info().has_timestamps {
            assert_eq!(timings.len(), 3);
            assert!(timings.iter().all(|t| t.len() == 1 && t[0].kernel == "k0_softmax"));
        }
        let src = exe.sources();
        assert_eq!(src.len(), 1);
        assert_eq!(src[0].ext, "wgsl");
        if mode == Mode::MaxAutotune {
            assert!(
                exe.tuning_log().iter().any(|l| l.contains("chose") || l.contains("cached")),
                "{:?}",
                exe.tuning_log()
            );
        }
    }
    // The autotuning winner is cached on disk per adapter; a second load reuses it.
    let dir = std::env::temp_dir().join(format!("sinter-wgsl-test-{}", std::process::id())).join("autotune");
    let files: Vec<_> = std::fs::read_dir(&dir).map(|d| d.flatten().map(|e| e.path()).collect()).unwrap_or_default();
    assert!(files.iter().any(|f| f.extension().is_some_and(|e| e == "json")), "no cache in {}", dir.display());
    let exe = b.load_wgsl(&p, Mode::MaxAutotune).expect("load");
    assert!(exe.tuning_log().iter().any(|l| l.contains("cached")), "{:?}", exe.tuning_log());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn scheduled_workloads_match_their_references() {
    let Some(b) = backend() else { return };
    use sinter_core::schedule::{ScheduleOptions, schedule};
    use sinter_core::workloads::{self, Scale};
    for w in workloads::all() {
        let g = w.build(Scale::Reduced).expect("build");
        let opt = sinter_core::passes::optimize(&g).expect("optimize");
        // A workload with dtypes WGSL lacks (fp8) runs with graph breaks (`graph_breaks.rs`).
        if !sinter_core::partition::detect(&opt, b.caps()).is_empty() {
            continue;
        }
        for fusion in [true, false] {
            let opts = if fusion { ScheduleOptions::default() } else { ScheduleOptions::eager() };
            let p = schedule(&opt, b.caps(), &opts).unwrap_or_else(|e| panic!("{}: schedule: {e}", w.name));
            let inputs = w.inputs(Scale::Reduced, 5);
            let want = w.reference(Scale::Reduced, &inputs).expect("reference");
            let got = gpu_run(b, &p, &inputs, Mode::ReduceOverhead);
            let interp_out = interp::run_program(&p, &inputs).expect("interp");
            let (rtol, atol) = w.tolerance();
            for ((g, r), i) in got.iter().zip(&want).zip(&interp_out) {
                // The backend must agree with the kernel-IR interpreter (same program, same numerics) ...
                let gi = g.tolerance_ratio(i, rtol, atol);
                assert!(gi <= 1.0, "{} (fusion {fusion}): GPU vs interpreter {gi:.3}x tolerance", w.name);
                // ... and with the workload's reference wherever the interpreter does.
                let ratio = g.tolerance_ratio(r, rtol, atol);
                let iratio = i.tolerance_ratio(r, rtol, atol);
                if iratio <= 1.0 {
                    assert!(ratio <= 1.0, "{} (fusion {fusion}): {ratio:.3}x tolerance", w.name);
                } else {
                    eprintln!(
                        "note: {} (fusion {fusion}): the interpreter itself is {iratio:.3}x off the reference \
                         (GPU {ratio:.3}x); a scheduling numerics issue, not the backend's",
                        w.name
                    );
                }
            }
        }
    }
}

/// Convolutions the default cost model lowers to matmuls (1x1 on strided views, the rest through an
/// im2col gather; groups batched), with a fused epilogue, at awkward sizes: the GPU agrees with the
/// interpreter and with the CPU reference.
#[test]
fn convs_as_matmuls_match_the_reference() {
    let Some(b) = backend() else { return };
    use sinter_core::kernel::KernelBody;
    use sinter_core::schedule::{ScheduleOptions, schedule};
    // (x, w, stride, padding, dilation, groups)
    type Case = ([usize; 4], [usize; 4], [usize; 2], [usize; 4], [usize; 2], usize);
    let cases: &[Case] = &[
        ([3, 16, 5, 7], [20, 16, 1, 1], [1, 1], [0; 4], [1, 1]), // 1x1: no copy
        ([2, 3, 15, 13], [17, 3, 7, 7], [2, 2], [3; 4], [1, 1]), // the stem, odd sizes
        ([2, 5, 8, 8], [16, 5, 3, 3], [1, 1], [1; 4], [1, 1]),   // 8x8 pixels: vec4 stores
        ([3, 7, 9, 6], [19, 7, 3, 3], [2, 2], [1; 4], [2, 2]),   // stride and dilation 2
        ([2, 17, 4, 4], [32, 17, 1, 1], [2, 2], [0; 4], [1, 1]), // strided 1x1 (downsample)
        ([2, 32, 5, 6], [32, 16, 3, 3], [1, 1], [1, 0, 1, 2], [1, 1]), // 2 groups
    ]
    .map(|(x, w, s, p, d)| (x, w, s, p, d, x[1] / w[1]));
    for d in [DType::F32, DType::F16] {
        for (i, &(xs, ws, stride, pad, dil, groups)) in cases.iter().enumerate() {
            let g = Graph::new();
            let x = g.input("x", d, xs);
            let w = g.input("w", d, ws);
            let bias = g.input("b", d, [ws[0]]);
            let y = x.conv2d(&w, Some(&bias), stride, pad, dil, groups);
            let r = g.input("r", d, y.shape().as_static().expect("static"));
            g.output(&(y * 0.5 + &r).relu());
            let ir = g.build().expect("build");
            let opt = sinter_core::passes::optimize(&ir).expect("optimize");
            let p = schedule(&opt, b.caps(), &ScheduleOptions::default()).expect("schedule");
            let what = format!("conv {d} case {i}: x {xs:?} w {ws:?}");
            let mm = p.kernels.last().expect("kernel");
            assert!(matches!(mm.body, KernelBody::Matmul(_)), "{what}: {:?}", mm.name);
            assert_eq!(p.kernels.len(), if ws[2..] == [1, 1] && stride == [1, 1] { 1 } else { 2 }, "{what}");
            let inputs: Vec<HostTensor> = [xs.to_vec(), ws.to_vec(), vec![ws[0]], p.inputs[3].shape.clone()]
                .iter()
                .enumerate()
                .map(|(k, s)| random(d, s, 40 + k as u64 + 7 * i as u64, -1.0, 1.0))
                .collect();
            let got = gpu_run(b, &p, &inputs, Mode::Default);
            // Tolerances scaled by the output's magnitude: the epilogue's `0.5 * y + r` cancels.
            let close = |want: &HostTensor, vs: &str| {
                let scale = want.to_f64_vec().iter().fold(1e-3f64, |m, v| m.max(v.abs()));
                let rtol = d.rel_tolerance();
                let ratio = got[0].tolerance_ratio(want, rtol, rtol * scale);
                assert!(ratio <= 1.0, "{what} vs {vs}: {ratio:.3}x tolerance");
            };
            close(&interp::run_program(&p, &inputs).expect("interp")[0], "the interpreter");
            close(&sinter_core::cpu::run(&ir, &inputs).expect("cpu")[0], "the CPU reference");
        }
    }
}

#[test]
fn run_device_chains_on_the_device_and_outputs_are_fresh() {
    let Some(b) = backend() else { return };
    use sinter_core::backend::Backend as _;
    let p = softmax(6, 300, DType::F32, ReduceStrategy::Persistent);
    let x = random(DType::F32, &[6, 300], 11, -4.0, 4.0);
    let want = interp::run_program(&p, std::slice::from_ref(&x)).expect("interp");
    for mode in [Mode::Default, Mode::ReduceOverhead] {
        let mut exe = b.load_wgsl(&p, mode).expect("load");
        exe.poison(0xff).expect("poison");
        let d = b.upload(&x).expect("upload");
        let y1 = exe.run_device(std::slice::from_ref(&d)).expect("run_device");
        assert_eq!(y1[0].backend(), "wgsl");
        // Chained: softmax of the softmax, input taken from the device output.
        let y2 = exe.run_device(&y1).expect("chained run_device");
        assert_close(&[y1[0].to_host().expect("download")], &want, &format!("first output {mode:?}"));
        let want2 = interp::run_program(&p, &[want[0].clone()]).expect("interp");
        assert_close(&[y2[0].to_host().expect("download")], &want2, &format!("chained {mode:?}"));
    }
    // A host-resident tensor is not a WGSL buffer: a clear error naming it.
    let mut exe = b.load_wgsl(&p, Mode::Default).expect("load");
    let e = exe.run_device(&[sinter_core::backend::DeviceTensor::host(&x)]).unwrap_err();
    assert!(e.to_string().contains("host"), "{e}");
}

#[test]
fn autotune_cache_entries_the_renderer_rejects_are_searched_again() {
    let Some(b) = backend() else { return };
    let dir = std::env::temp_dir().join(format!("sinter-wgsl-badcache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let p = softmax(6, 300, DType::F32, ReduceStrategy::Persistent);
    let key = sinter_core::tune::kernel_key(&p.kernels[0]);
    let file = dir.join("autotune").join(format!("wgsl-{}.json", b.device().info().cache_key()));
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    for bad in [0u32, 1, 2, 4, 7] {
        let mut t = serde_json::to_value(sinter_wgsl::render::Tuning::default()).unwrap();
        t["workgroup_size"] = bad.into();
        std::fs::write(
            &file,
            serde_json::json!({"version": sinter_core::tune::VERSION, "entries": {key.clone(): t}}).to_string(),
        )
        .unwrap();
        let opts = sinter_core::backend::LoadOptions {
            mode: Mode::MaxAutotune,
            cache_dir: Some(dir.clone()),
            ..Default::default()
        };
        let mut exe = b.load_wgsl_with(&p, &opts).expect("load");
        assert!(!exe.tuning_log().iter().any(|l| l.contains("cached")), "bad entry {bad} used: {:?}", exe.tuning_log());
        assert!(exe.tuning_workgroups().iter().all(|w| *w >= 32), "workgroup {bad} used");
        let x = random(DType::F32, &[6, 300], 3, -4.0, 4.0);
        let want = interp::run_program(&p, std::slice::from_ref(&x)).expect("interp");
        assert_close(&exe.run(&[x]).expect("run"), &want, &format!("after bad cache entry {bad}"));
    }
    let _ = std::fs::remove_dir_all(&dir);
}
