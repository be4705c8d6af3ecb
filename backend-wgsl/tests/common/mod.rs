//! Helpers shared by the renderer and GPU tests: hand-built kernel-IR programs, naga validation,
//! random inputs and output comparison.
#![allow(dead_code)]

use sinter_core::{DType, HostTensor};

use sinter_core::kernel::{
    Access, Expr, Index, MatOperand, MatmulBody, Program, RedOp, ReduceBody, ReduceStrategy, Reduction, Var,
};

/// Validates WGSL with naga (every capability allowed), panicking with naga's diagnostic.
pub fn naga_validate(src: &str) {
    let module = match naga::front::wgsl::parse_str(src) {
        Ok(m) => m,
        Err(e) => panic!("WGSL does not parse:\n{}\n--- source ---\n{src}", e.emit_to_string(src)),
    };
    let mut v = naga::valid::Validator::new(naga::valid::ValidationFlags::all(), naga::valid::Capabilities::all());
    if let Err(e) = v.validate(&module) {
        panic!("WGSL does not validate:\n{}\n--- source ---\n{src}", e.emit_to_string(src));
    }
}

/// Asserts `got` matches `want` within the dtype's tolerance (exact for integers and bools).
pub fn assert_close(got: &[HostTensor], want: &[HostTensor], what: &str) {
    assert_close_tol(got, want, what, None)
}

/// [`assert_close`] with the tolerance `tol` (`(rtol, atol)`) instead of the dtype's, when given.
pub fn assert_close_tol(got: &[HostTensor], want: &[HostTensor], what: &str, tol: Option<(f64, f64)>) {
    assert_eq!(got.len(), want.len(), "{what}: output count");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert_eq!(g.shape, w.shape, "{what}: output {i} shape");
        assert_eq!(g.dtype(), w.dtype(), "{what}: output {i} dtype");
        let (rtol, atol) = tol.unwrap_or_else(|| sinter_core::workloads::tolerance(w.dtype()));
        let ratio = g.tolerance_ratio(w, rtol, atol);
        if ratio > 1.0 {
            let (a, b) = (g.to_f64_vec(), w.to_f64_vec());
            let bad: Vec<String> = a
                .iter()
                .zip(&b)
                .enumerate()
                .filter(|(_, (x, y))| {
                    !(x.is_nan() && y.is_nan() || *x == *y || (*x - *y).abs() <= atol + rtol * y.abs())
                })
                .take(8)
                .map(|(k, (x, y))| format!("[{k}] got {x} want {y}"))
                .collect();
            panic!("{what}: output {i} off by {ratio:.3}x tolerance: {}", bad.join(", "));
        }
    }
}

/// A random tensor (see [`HostTensor::random`]).
pub fn random(d: DType, shape: &[usize], seed: u64, lo: f64, hi: f64) -> HostTensor {
    HostTensor::random(d, shape.to_vec(), seed, lo, hi)
}

/// `y = cast(x)` and its reversed copy `z` (a gather store) from `n` f32 values to `d`: sub-word
/// outputs written both 4 at a time (whole words) and element by element.
pub fn sub_word(n: usize, d: DType) -> Program {
    let mut p = ProgramBuilder::new();
    let x = p.input("x", DType::F32, &[n]);
    let y = p.output("y", d, &[n]);
    let z = p.output("z", d, &[n]);
    let mut kb = KernelBuilder::new("k0_sub_word", &["cast"]);
    let ax = kb.arg(&p, x, Access::Read);
    let ay = kb.arg(&p, y, Access::Write);
    let az = kb.arg(&p, z, Access::Write);
    let v = kb.load(ax, lane());
    let c = kb.e(Expr::Cast(v), d);
    let rev = Index::Sum(vec![Index::Const(n as i64 - 1), lane().mul(-1)]);
    p.kernel(kb.pointwise(n, vec![st(ay, lane(), c), st(az, rev, c)]));
    p.build()
}

/// One reduce kernel over `x: [rows, len]` of `d` with three reductions per row: argmax (i64
/// output), argmin (cast to i32) and the sum (accumulated in f32, u32 for u8, else i32; cast back
/// to `d`).
pub fn arg_sum(d: DType, rows: usize, len: usize, strategy: ReduceStrategy) -> Program {
    let mut p = ProgramBuilder::new();
    let x = p.input("x", d, &[rows, len]);
    let amax = p.output("amax", DType::I64, &[rows]);
    let amin = p.output("amin", DType::I32, &[rows]);
    let sum = p.output("sum", d, &[rows]);
    let mut kb = KernelBuilder::new("k0_arg", &["argmax", "argmin", "sum"]);
    let ax = kb.arg(&p, x, Access::Read);
    let a1 = kb.arg(&p, amax, Access::Write);
    let a2 = kb.arg(&p, amin, Access::Write);
    let a3 = kb.arg(&p, sum, Access::Write);
    let idx = Index::var(Var::Row).mul(len as i64).add(Index::var(Var::Red));
    let v = kb.load(ax, idx);
    let acc_d = match d {
        DType::U8 => DType::U32,
        d if d.is_float() => DType::F32,
        _ => DType::I32,
    };
    let vs = kb.e(Expr::Cast(v), acc_d);
    let r0 = kb.e(Expr::Acc(0), DType::I64);
    let r1 = kb.e(Expr::Acc(1), DType::I64);
    let r1c = kb.e(Expr::Cast(r1), DType::I32);
    let r2 = kb.e(Expr::Acc(2), acc_d);
    let r2c = kb.e(Expr::Cast(r2), d);
    let row = Index::var(Var::Row);
    p.kernel(kb.reduce(ReduceBody {
        rows,
        len,
        reductions: vec![
            Reduction { op: RedOp::ArgMax, value: v, slot: 0, dtype: DType::I64 },
            Reduction { op: RedOp::ArgMin, value: v, slot: 1, dtype: DType::I64 },
            Reduction { op: RedOp::Sum, value: vs, slot: 2, dtype: acc_d },
        ],
        elem_stores: vec![],
        row_stores: vec![st(a1, row.clone(), r0), st(a2, row.clone(), r1c), st(a3, row, r2c)],
        strategy,
    }));
    p.build()
}

pub use sinter_core::testsuite::builder::{KernelBuilder, ProgramBuilder, lane, st};

#[allow(unused_imports)] // each test binary uses some of the helpers
pub use sinter_core::testsuite::programs::{add_relu_mul, softmax};

/// Random inputs (A, B, bias) for [`matmul_bias_relu`]: A `[m, k]`, B `[k, n]` (`[n, k]` when
/// transposed), bias `[n]`.
pub fn matmul_inputs(m: usize, n: usize, k: usize, d: DType, b_t: bool) -> Vec<HostTensor> {
    let bshape = if b_t { [n, k] } else { [k, n] };
    vec![random(d, &[m, k], 4, -1.0, 1.0), random(d, &bshape, 5, -1.0, 1.0), random(d, &[n], 6, -1.0, 1.0)]
}

/// `y = relu(a @ b + bias)` with `a: [m, k]`, `b: [k, n]` (or `b^T` stored `[n, k]` when `b_t`), `bias: [n]`.
pub fn matmul_bias_relu(m: usize, n: usize, k: usize, d: DType, b_t: bool) -> Program {
    use sinter_core::ir::{BinaryOp, UnaryOp};
    let mut p = ProgramBuilder::new();
    let a = p.input("a", d, &[m, k]);
    let b_shape = if b_t { [n, k] } else { [k, n] };
    let b = p.input("b", d, &b_shape);
    let bias = p.input("bias", d, &[n]);
    let y = p.output("y", d, &[m, n]);
    let mut kb = KernelBuilder::new("k0_matmul_add_relu", &["matmul", "add", "relu"]);
    let aa = kb.arg(&p, a, Access::Read);
    let ab = kb.arg(&p, b, Access::Read);
    let abias = kb.arg(&p, bias, Access::Read);
    let ay = kb.arg(&p, y, Access::Write);
    let acc = kb.e(Expr::Acc(0), DType::F32);
    let vb = kb.load(abias, Index::var(Var::N));
    let vbf = kb.e(Expr::Cast(vb), DType::F32);
    let s = kb.e(Expr::Binary(BinaryOp::Add, acc, vbf), DType::F32);
    let r = kb.e(Expr::Unary(UnaryOp::Relu, s), DType::F32);
    let rd = kb.e(Expr::Cast(r), d);
    let out = Index::var(Var::M).mul(n as i64).add(Index::var(Var::N));
    let bop = if b_t {
        MatOperand { arg: ab, offset: 0, s_batch: 0, s_row: 1, s_col: k, im2col: None }
    } else {
        MatOperand { arg: ab, offset: 0, s_batch: 0, s_row: n, s_col: 1, im2col: None }
    };
    p.kernel(kb.matmul(MatmulBody {
        batch: 1,
        m,
        n,
        k,
        a: MatOperand { arg: aa, offset: 0, s_batch: 0, s_row: k, s_col: 1, im2col: None },
        b: bop,
        in_dtype: d,
        acc_dtype: DType::F32,
        tf32: false,
        stores: vec![st(ay, out, rd)],
    }));
    p.build()
}

/// A WGSL backend with no pipeline cache, its own cache folder (`sinter-wgsl-<tag>-<pid>`) and
/// storage bindings of at most `max_binding_bytes` (the adapter's limit when `None`), or the reason
/// there is none.
pub fn open_backend(tag: &str, max_binding_bytes: Option<u64>) -> Result<sinter_wgsl::WgslBackend, String> {
    use sinter_wgsl::device::DeviceOptions;
    let dir = std::env::temp_dir().join(format!("sinter-wgsl-{tag}-{}", std::process::id()));
    sinter_wgsl::WgslBackend::with_options(DeviceOptions {
        pipeline_cache: false,
        cache_dir: Some(dir),
        max_binding_bytes,
        ..Default::default()
    })
    .map_err(|e| e.to_string())
}

/// `Some(b)`, or `None` after printing why there is no adapter; with `SINTER_REQUIRE_GPU=1` a
/// missing adapter fails instead.
pub fn or_skip<T>(b: Result<T, &str>) -> Option<T> {
    match b {
        Ok(b) => Some(b),
        Err(e) => {
            if std::env::var("SINTER_REQUIRE_GPU").is_ok_and(|v| v == "1") {
                panic!("SINTER_REQUIRE_GPU=1 but no WGSL device could be created: {e}");
            }
            eprintln!("SKIPPED: no GPU adapter ({e})");
            None
        }
    }
}

/// The test binary's shared WGSL backend (no pipeline cache, a per-process cache folder), or
/// `None` after printing why when there is no adapter; with `SINTER_REQUIRE_GPU=1` a missing
/// adapter fails instead.
pub fn gpu_backend() -> Option<&'static sinter_wgsl::WgslBackend> {
    static B: std::sync::OnceLock<Result<sinter_wgsl::WgslBackend, String>> = std::sync::OnceLock::new();
    or_skip(B.get_or_init(|| open_backend("test", None)).as_ref().map_err(String::as_str))
}

/// A WGSL backend of its own for `compile` (which takes an `Arc<dyn Backend>`), as
/// [`gpu_backend`] otherwise.
pub fn owned_backend(tag: &str) -> Option<std::sync::Arc<dyn sinter_core::backend::Backend>> {
    let b = open_backend(tag, None);
    or_skip(b.as_ref().map_err(String::as_str).map(|_| ()))?;
    Some(std::sync::Arc::new(b.ok()?))
}

/// Runs the one kernel of `p` rendered with `tuning` on the adapter directly (one buffer per program
/// buffer, outputs poisoned), returning the outputs.
pub fn run_tuned(
    b: &sinter_wgsl::WgslBackend,
    p: &sinter_core::kernel::Program,
    ins: &[HostTensor],
    tuning: &sinter_wgsl::render::Tuning,
) -> Vec<HostTensor> {
    let dev = b.device();
    let k = &p.kernels[0];
    let r = sinter_wgsl::render::render_with(k, p, b.wgsl_caps(), tuning).unwrap_or_else(|e| panic!("{tuning:?}: {e}"));
    let bufs = program_buffers(dev, p, &[0xff; 4]);
    for (io, t) in p.inputs.iter().zip(ins) {
        let mut bytes = t.to_le_bytes();
        bytes.resize(bytes.len().next_multiple_of(4), 0);
        dev.upload(&bufs[io.buffer.0 as usize], &bytes).expect("upload");
    }
    let prog = dev.compile(&r.source, &r.entry, &k.name).unwrap_or_else(|e| panic!("{tuning:?}: {e}"));
    dev.run_once(&prog, &bind(&r, &bufs), r.grid).expect("run");
    p.outputs
        .iter()
        .map(|io| {
            let bytes = dev.download(&bufs[io.buffer.0 as usize]).expect("download");
            let n: usize = io.shape.iter().product::<usize>() * io.dtype.size_bytes();
            HostTensor::from_le_bytes(io.dtype, io.shape.clone(), &bytes[..n]).expect("output")
        })
        .collect()
}

/// An adapter like an H100's or H200's through Vulkan: 32-wide subgroups, 1024 invocations, 48 KiB
/// of workgroup memory and f16 cooperative matrices (no bf16/f32 opt-ins).
pub fn coop_caps() -> sinter_wgsl::render::WgslCaps {
    sinter_wgsl::render::WgslCaps {
        has_subgroups: true,
        subgroup_size: Some(32),
        fixed_subgroup_size: Some(32),
        has_coop_matrix: true,
        max_invocations: 1024,
        max_workgroup_size_x: 1024,
        max_workgroup_storage_bytes: 49152,
        ..sinter_wgsl::render::WgslCaps::baseline()
    }
}

/// One device buffer per buffer of `p`, each filled with `pattern` (repeated).
pub fn program_buffers(
    dev: &sinter_wgsl::device::Device,
    p: &sinter_core::kernel::Program,
    pattern: &[u8],
) -> Vec<sinter_wgsl::device::GpuBuffer> {
    p.buffers
        .iter()
        .map(|d| {
            let bytes = (d.numel * d.dtype.size_bytes()).next_multiple_of(4).max(4) as u64;
            let buf = dev.alloc(bytes, "t").expect("alloc");
            dev.fill(&buf, pattern).expect("fill");
            buf
        })
        .collect()
}

/// The arguments of rendered kernel `r` over `bufs` (from [`program_buffers`]), in binding order.
pub fn bind<'b>(
    r: &sinter_wgsl::render::Rendered,
    bufs: &'b [sinter_wgsl::device::GpuBuffer],
) -> Vec<sinter_wgsl::device::Arg<'b>> {
    r.bindings.iter().map(|bp| bufs[bp.buffer.0 as usize].range(bp.offset_bytes, bp.size_bytes).into()).collect()
}

/// The median of `v` (NaN when empty).
pub fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}
