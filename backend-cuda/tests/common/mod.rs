//! Hand-built kernel-IR programs for the renderer tests (every dtype, op, reduce strategy, arg
//! reductions, matmul epilogues, awkward sizes) and scheduled built-in workloads, with the setup the
//! test binaries share: the H100's capabilities and scheduler options, and NVRTC or a skip line.
#![allow(dead_code)]

use sinter_core::DType;
use sinter_core::ir::{BinaryOp, UnaryOp};
use sinter_core::kernel::{
    Access, BufferId, Capabilities, Expr, Index, MatOperand, MatmulBody, Program, RedOp, ReduceBody, ReduceStrategy,
    Reduction, Var,
};
use sinter_core::schedule::{ScheduleOptions, schedule};
#[allow(unused_imports)] // each test binary uses some of the helpers
pub use sinter_core::testsuite::programs::{add_relu_mul, softmax};
use sinter_core::workloads::{Scale, Workload};

/// The CUDA backend's capabilities (H100) as the scheduler sees them.
pub fn cuda_caps() -> Capabilities {
    Capabilities { backend: "cuda".into(), compute_units: 132, ..Capabilities::host() }
}

/// The scheduler options of the CUDA backend on an H100 (its cost model, implicit GEMM on, PyTorch's
/// TF32 defaults), independent of the environment.
pub fn cuda_options() -> ScheduleOptions {
    let cm = sinter_cuda::cost::CudaCostModel { implicit_gemm: true, ..sinter_cuda::cost::CudaCostModel::new((9, 0)) };
    ScheduleOptions { cost_model: std::sync::Arc::new(cm), ..ScheduleOptions::default() }
}

/// Whether NVRTC is here. Without it a test prints a skip line for `test` and returns, unless
/// `SINTER_REQUIRE_NVRTC=1` (CI), which makes a missing NVRTC a failure.
pub fn nvrtc_available(test: &str) -> bool {
    match sinter_cuda::probe::nvrtc() {
        Ok(()) => true,
        Err(e) => {
            assert!(
                !std::env::var("SINTER_REQUIRE_NVRTC").is_ok_and(|v| v == "1"),
                "SINTER_REQUIRE_NVRTC=1 but NVRTC is unavailable: {e}"
            );
            eprintln!("skipped {test}: {e}");
            false
        }
    }
}

/// Assembles a PTX module of the renderer (`render::ptx::assemble`) with the `ptxas` binary
/// named by `SINTER_PTXAS` (CI: the `nvidia-cuda-nvcc` wheel's): `Ok(log)`, `Err(log)` when
/// ptxas rejects it, `None` (after a skip line for `what`) without the variable, unless
/// `SINTER_REQUIRE_NVRTC=1`, which makes that a failure.
pub fn ptxas(source: &str, what: &str) -> Option<Result<String, String>> {
    let Ok(bin) = std::env::var("SINTER_PTXAS") else {
        assert!(
            !std::env::var("SINTER_REQUIRE_NVRTC").is_ok_and(|v| v == "1"),
            "SINTER_REQUIRE_NVRTC=1 but SINTER_PTXAS (a ptxas binary) is unset"
        );
        eprintln!("skipped assembling {what}: SINTER_PTXAS is unset");
        return None;
    };
    Some(sinter_cuda::render::ptx::assemble(&bin, source).unwrap_or_else(|e| panic!("SINTER_PTXAS={bin}: {e}")))
}

/// A built-in workload at the reduced scale, through the default passes and the scheduler with the
/// CUDA backend's options ([`cuda_options`]) (validated by the kernel-IR interpreter's checks).
pub fn scheduled(w: &Workload) -> Program {
    let g = w.build(Scale::Reduced).unwrap_or_else(|e| panic!("{}: build: {e}", w.name));
    let g = sinter_core::passes::optimize(&g).unwrap_or_else(|e| panic!("{}: passes: {e}", w.name));
    let p = schedule(&g, &cuda_caps(), &cuda_options()).unwrap_or_else(|e| panic!("{}: {e}", w.name));
    sinter_core::kernel::interp::validate(&p).unwrap_or_else(|e| panic!("{}: invalid program: {e}", w.name));
    p
}

pub use sinter_core::testsuite::builder::{KernelBuilder, ProgramBuilder, lane, st};

/// The unary ops the reference defines on dtype `d` (floats: all but `not`; integers and bool: the
/// ones that are not float-only).
pub fn unary_ops(d: DType) -> Vec<UnaryOp> {
    UnaryOp::ALL
        .into_iter()
        .filter(|op| {
            if d.is_float() {
                *op != UnaryOp::Not
            } else {
                matches!(
                    op,
                    UnaryOp::Neg
                        | UnaryOp::Abs
                        | UnaryOp::Relu
                        | UnaryOp::Sign
                        | UnaryOp::Floor
                        | UnaryOp::Ceil
                        | UnaryOp::Round
                        | UnaryOp::Not
                        | UnaryOp::IsNan
                        | UnaryOp::IsInf
                )
            }
        })
        .collect()
}

/// The binary ops the reference defines on dtype `d` (logical ops not on floats).
pub fn binary_ops(d: DType) -> Vec<BinaryOp> {
    BinaryOp::ALL
        .into_iter()
        .filter(|op| !(d.is_float() && matches!(op, BinaryOp::And | BinaryOp::Or | BinaryOp::Xor)))
        .collect()
}

/// The result dtype of a unary op on `d`.
pub fn unary_dtype(op: UnaryOp, d: DType) -> DType {
    if matches!(op, UnaryOp::Not | UnaryOp::IsNan | UnaryOp::IsInf) { DType::Bool } else { d }
}

/// The result dtype of a binary op on `d`.
pub fn binary_dtype(op: BinaryOp, d: DType) -> DType {
    match op {
        BinaryOp::Eq
        | BinaryOp::Ne
        | BinaryOp::Lt
        | BinaryOp::Le
        | BinaryOp::Gt
        | BinaryOp::Ge
        | BinaryOp::And
        | BinaryOp::Or
        | BinaryOp::Xor => DType::Bool,
        _ => d,
    }
}

/// Every unary op defined on `d`, over `n` lanes: `y_k = op_k(x)`, one output per op.
pub fn unary_all(d: DType, n: usize) -> Program {
    let mut p = ProgramBuilder::new();
    let x = p.input("x", d, &[n]);
    let ops = unary_ops(d);
    let outs: Vec<BufferId> = ops.iter().map(|op| p.output(op.name(), unary_dtype(*op, d), &[n])).collect();
    let mut kb = KernelBuilder::new(&format!("k0_unary_{d}"), &ops.iter().map(|o| o.name()).collect::<Vec<_>>());
    let ax = kb.arg(&p, x, Access::Read);
    let v = kb.load(ax, lane());
    let mut stores = vec![];
    for (op, o) in ops.iter().zip(&outs) {
        let ao = kb.arg(&p, *o, Access::Write);
        let r = kb.e(Expr::Unary(*op, v), unary_dtype(*op, d));
        stores.push(st(ao, lane(), r));
    }
    p.kernel(kb.pointwise(n, stores));
    p.build_checked()
}

/// Every binary op defined on `d`, over `n` lanes: `y_k = op_k(a, b)` with `b` broadcast from a
/// row of 7.
pub fn binary_all(d: DType, n: usize) -> Program {
    let mut p = ProgramBuilder::new();
    let a = p.input("a", d, &[n]);
    let b = p.input("b", d, &[7]);
    let ops = binary_ops(d);
    let outs: Vec<BufferId> = ops.iter().map(|op| p.output(op.name(), binary_dtype(*op, d), &[n])).collect();
    let mut kb = KernelBuilder::new(&format!("k0_binary_{d}"), &ops.iter().map(|o| o.name()).collect::<Vec<_>>());
    let aa = kb.arg(&p, a, Access::Read);
    let ab = kb.arg(&p, b, Access::Read);
    let va = kb.load(aa, lane());
    let vb = kb.load(ab, lane().rem(7).simplify(&|v| (v == Var::Lane).then_some((0, n as i64 - 1))));
    let mut stores = vec![];
    for (op, o) in ops.iter().zip(&outs) {
        let ao = kb.arg(&p, *o, Access::Write);
        let r = kb.e(Expr::Binary(*op, va, vb), binary_dtype(*op, d));
        stores.push(st(ao, lane(), r));
    }
    p.kernel(kb.pointwise(n, stores));
    p.build_checked()
}

/// `y_to = cast(x)` from `from` to every dtype, over `n` lanes.
pub fn casts_from(from: DType, n: usize) -> Program {
    let mut p = ProgramBuilder::new();
    let x = p.input("x", from, &[n]);
    let outs: Vec<BufferId> = DType::ALL.iter().map(|to| p.output(to.name(), *to, &[n])).collect();
    let mut kb = KernelBuilder::new(&format!("k0_cast_{from}"), &["cast"]);
    let ax = kb.arg(&p, x, Access::Read);
    let v = kb.load(ax, lane());
    let mut stores = vec![];
    for (to, o) in DType::ALL.iter().zip(&outs) {
        let ao = kb.arg(&p, *o, Access::Write);
        let c = kb.e(Expr::Cast(v), *to);
        stores.push(st(ao, lane(), c));
    }
    p.kernel(kb.pointwise(n, stores));
    p.build_checked()
}

/// Literals of every dtype (special values included) added to a loaded value, and where/index
/// expressions: `y_d = x_d + c` for a few `c`, a pad mask and the lane as a value.
pub fn literals(d: DType, n: usize) -> Program {
    let mut p = ProgramBuilder::new();
    let x = p.input("x", d, &[n]);
    let y = p.output("y", d, &[n]);
    let z = p.output("z", d, &[n + 2]);
    let mut kb = KernelBuilder::new(&format!("k0_literals_{d}"), &["add", "pad", "iota"]);
    let ax = kb.arg(&p, x, Access::Read);
    let ay = kb.arg(&p, y, Access::Write);
    let az = kb.arg(&p, z, Access::Write);
    let v = kb.load(ax, lane());
    let specials: Vec<f64> = if d.is_float() {
        vec![f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -0.0, 1e-40, 0.1, 65504.0, 1e300]
    } else {
        vec![-1.0, 127.0, 300.0, -2.7, 9.3e18, 1e19]
    };
    let mut acc = v;
    for c in specials {
        let k = kb.konst(c, d);
        let op = if d == DType::Bool { BinaryOp::Or } else { BinaryOp::Add };
        acc = kb.e(Expr::Binary(op, acc, k), d);
    }
    // The lane as a value (iota), and a pad: z[lane + 1] = lane < 3 ? x : iota.
    let iota = kb.e(Expr::IndexValue(lane().add(Index::Const(-1))), d);
    let m = kb.e(Expr::IndexCmp(sinter_core::kernel::IndexCmp::Lt, lane(), Index::Const(3)), DType::Bool);
    let w = kb.e(Expr::Where(m, v, iota), d);
    p.kernel(kb.pointwise(n, vec![st(ay, lane(), acc), st(az, lane().add(Index::Const(1)), w)]));
    p.build_checked()
}

/// An embedding lookup: `y[i, c] = table[clamp(idx[i], 0, rows - 1), c]` with `idx` of dtype
/// `id` (a gathered index evaluated in signed 64-bit inside the clamp).
pub fn gather(id: DType, rows: usize, cols: usize, n: usize) -> Program {
    let mut p = ProgramBuilder::new();
    let table = p.input("table", DType::F32, &[rows, cols]);
    let idx = p.input("idx", id, &[n]);
    let y = p.output("y", DType::F32, &[n, cols]);
    let mut kb = KernelBuilder::new("k0_gather", &["gather"]);
    let at = kb.arg(&p, table, Access::Read);
    let ai = kb.arg(&p, idx, Access::Read);
    let ay = kb.arg(&p, y, Access::Write);
    let vi = kb.load(ai, lane().div(cols as i64));
    let row = Index::Value(vi).clamp(0, rows as i64 - 1);
    let vt = kb.load(at, row.mul(cols as i64).add(lane().rem(cols as i64)));
    p.kernel(kb.pointwise(n * cols, vec![st(ay, lane(), vt)]));
    p.build_checked()
}

/// One reduce kernel over `x: [rows, len]` of `d` with argmax (i64 output), argmin (cast to i32),
/// the sum (accumulated in f32 for floats, u32 for u8, i64 for other integers, cast back to `d`),
/// the product and the min.
pub fn arg_sum(d: DType, rows: usize, len: usize, strategy: ReduceStrategy) -> Program {
    let mut p = ProgramBuilder::new();
    let x = p.input("x", d, &[rows, len]);
    let amax = p.output("amax", DType::I64, &[rows]);
    let amin = p.output("amin", DType::I32, &[rows]);
    let sum = p.output("sum", d, &[rows]);
    let prod = p.output("prod", d, &[rows]);
    let min = p.output("min", d, &[rows]);
    let mut kb = KernelBuilder::new("k0_arg_sum", &["argmax", "argmin", "sum", "prod", "min"]);
    let ax = kb.arg(&p, x, Access::Read);
    let outs: Vec<usize> = [amax, amin, sum, prod, min].iter().map(|b| kb.arg(&p, *b, Access::Write)).collect();
    let idx = Index::var(Var::Row).mul(len as i64).add(Index::var(Var::Red));
    let v = kb.load(ax, idx);
    let acc_d = match d {
        DType::U8 => DType::U32,
        DType::Bool => DType::Bool,
        d if d.is_float() && d != DType::F64 => DType::F32,
        DType::F64 => DType::F64,
        _ => DType::I64,
    };
    let vs = kb.e(Expr::Cast(v), acc_d);
    let r0 = kb.e(Expr::Acc(0), DType::I64);
    let r1 = kb.e(Expr::Acc(1), DType::I64);
    let r1c = kb.e(Expr::Cast(r1), DType::I32);
    let r2 = kb.e(Expr::Acc(2), acc_d);
    let r2c = kb.e(Expr::Cast(r2), d);
    let r3 = kb.e(Expr::Acc(3), acc_d);
    let r3c = kb.e(Expr::Cast(r3), d);
    let r4 = kb.e(Expr::Acc(4), d);
    let row = Index::var(Var::Row);
    p.kernel(kb.reduce(ReduceBody {
        rows,
        len,
        reductions: vec![
            Reduction { op: RedOp::ArgMax, value: v, slot: 0, dtype: DType::I64 },
            Reduction { op: RedOp::ArgMin, value: v, slot: 1, dtype: DType::I64 },
            Reduction { op: RedOp::Sum, value: vs, slot: 2, dtype: acc_d },
            Reduction { op: RedOp::Prod, value: vs, slot: 3, dtype: acc_d },
            Reduction { op: RedOp::Min, value: v, slot: 4, dtype: d },
        ],
        elem_stores: vec![],
        row_stores: vec![
            st(outs[0], row.clone(), r0),
            st(outs[1], row.clone(), r1c),
            st(outs[2], row.clone(), r2c),
            st(outs[3], row.clone(), r3c),
            st(outs[4], row, r4),
        ],
        strategy,
    }));
    p.build_checked()
}

/// A layer norm over the last axis (mean, then the variance reading the mean) with an element
/// epilogue reading both and a row store of the mean: the phases of a fused normalization.
pub fn layer_norm(rows: usize, len: usize, d: DType, strategy: ReduceStrategy) -> Program {
    let mut p = ProgramBuilder::new();
    let x = p.input("x", d, &[rows, len]);
    let w = p.input("w", d, &[len]);
    let y = p.output("y", d, &[rows, len]);
    let mean = p.output("mean", DType::F32, &[rows]);
    let mut kb = KernelBuilder::new("k0_layer_norm", &["layer_norm"]);
    let ax = kb.arg(&p, x, Access::Read);
    let aw = kb.arg(&p, w, Access::Read);
    let ay = kb.arg(&p, y, Access::Write);
    let am = kb.arg(&p, mean, Access::Write);
    let idx = Index::var(Var::Row).mul(len as i64).add(Index::var(Var::Red));
    let v = kb.load(ax, idx.clone());
    let vf = kb.e(Expr::Cast(v), DType::F32);
    let s0 = kb.e(Expr::Acc(0), DType::F32);
    let inv_n = kb.konst(1.0 / len as f64, DType::F32);
    let mu = kb.e(Expr::Binary(BinaryOp::Mul, s0, inv_n), DType::F32);
    let dv = kb.e(Expr::Binary(BinaryOp::Sub, vf, mu), DType::F32);
    let sq = kb.e(Expr::Binary(BinaryOp::Mul, dv, dv), DType::F32);
    let s1 = kb.e(Expr::Acc(1), DType::F32);
    let var = kb.e(Expr::Binary(BinaryOp::Mul, s1, inv_n), DType::F32);
    let eps = kb.konst(1e-5, DType::F32);
    let ve = kb.e(Expr::Binary(BinaryOp::Add, var, eps), DType::F32);
    let rs = kb.e(Expr::Unary(UnaryOp::Rsqrt, ve), DType::F32);
    let nrm = kb.e(Expr::Binary(BinaryOp::Mul, dv, rs), DType::F32);
    let vw = kb.load(aw, Index::var(Var::Red));
    let vwf = kb.e(Expr::Cast(vw), DType::F32);
    let out = kb.e(Expr::Binary(BinaryOp::Mul, nrm, vwf), DType::F32);
    let outd = kb.e(Expr::Cast(out), d);
    p.kernel(kb.reduce(ReduceBody {
        rows,
        len,
        reductions: vec![
            Reduction { op: RedOp::Sum, value: vf, slot: 0, dtype: DType::F32 },
            Reduction { op: RedOp::Sum, value: sq, slot: 1, dtype: DType::F32 },
        ],
        elem_stores: vec![st(ay, idx, outd)],
        row_stores: vec![st(am, Index::var(Var::Row), mu)],
        strategy,
    }));
    p.build_checked()
}

/// Random-ish inputs are not needed by render tests; matmul programs:
/// `y = relu(a @ b + bias)` with `a: [batch, m, k]`, `b: [k, n]` (or `b^T` stored `[n, k]` when
/// `b_t`, broadcast over the batch), `bias: [n]`, accumulated in `acc`.
pub fn matmul_bias_relu(batch: usize, m: usize, n: usize, k: usize, d: DType, acc: DType, b_t: bool) -> Program {
    matmul_layout(batch, m, n, k, d, acc, Layout { b_t, ..Layout::default() })
}

/// How [`matmul_layout`] stores its operands.
#[derive(Clone, Copy, Debug, Default)]
pub struct Layout {
    /// A stored `[batch, k, m]` (k not contiguous).
    pub a_t: bool,
    /// B stored `[n, k]` (k contiguous).
    pub b_t: bool,
    /// Extra elements after each stored row of both operands and at their start (an odd pad makes
    /// the operands misaligned for 16-byte copies).
    pub pad: usize,
    /// B holds one matrix per batch (a batch stride), else one shared by the batches.
    pub b_batched: bool,
}

/// `relu(a @ b + bias)` with the operands stored as `layout` says.
pub fn matmul_layout(batch: usize, m: usize, n: usize, k: usize, d: DType, acc: DType, layout: Layout) -> Program {
    let Layout { a_t, b_t, pad, b_batched } = layout;
    let mut p = ProgramBuilder::new();
    let (ar, ac) = if a_t { (k, m) } else { (m, k) };
    let a = p.input("a", d, &[batch * ar * (ac + pad) + pad]);
    let (br, bc) = if b_t { (n, k) } else { (k, n) };
    let b_mats = if b_batched { batch } else { 1 };
    let b = p.input("b", d, &[b_mats * br * (bc + pad) + pad]);
    let bias = p.input("bias", d, &[n]);
    let y = p.output("y", d, &[batch, m, n]);
    let mut kb = KernelBuilder::new("k0_matmul_add_relu", &["matmul", "add", "relu"]);
    let aa = kb.arg(&p, a, Access::Read);
    let ab = kb.arg(&p, b, Access::Read);
    let abias = kb.arg(&p, bias, Access::Read);
    let ay = kb.arg(&p, y, Access::Write);
    let ed = if acc.is_float() { DType::F32 } else { acc };
    let accv = kb.e(Expr::Acc(0), ed);
    let vb = kb.load(abias, Index::var(Var::N));
    let vbf = kb.e(Expr::Cast(vb), ed);
    let s = kb.e(Expr::Binary(BinaryOp::Add, accv, vbf), ed);
    let r = kb.e(Expr::Unary(UnaryOp::Relu, s), ed);
    let rd = kb.e(Expr::Cast(r), d);
    let out = Index::var(Var::Batch).mul((m * n) as i64).add(Index::var(Var::M).mul(n as i64)).add(Index::var(Var::N));
    let s_batch = ar * (ac + pad);
    let aop = if a_t {
        MatOperand { arg: aa, offset: pad, s_batch, s_row: 1, s_col: m + pad, im2col: None }
    } else {
        MatOperand { arg: aa, offset: pad, s_batch, s_row: k + pad, s_col: 1, im2col: None }
    };
    let b_batch = if b_batched { br * (bc + pad) } else { 0 };
    let bop = if b_t {
        MatOperand { arg: ab, offset: pad, s_batch: b_batch, s_row: 1, s_col: k + pad, im2col: None }
    } else {
        MatOperand { arg: ab, offset: pad, s_batch: b_batch, s_row: n + pad, s_col: 1, im2col: None }
    };
    p.kernel(kb.matmul(MatmulBody {
        batch,
        m,
        n,
        k,
        a: aop,
        b: bop,
        in_dtype: d,
        acc_dtype: acc,
        tf32: false,
        stores: vec![st(ay, out, rd)],
    }));
    p.build_checked()
}

/// A convolution: input shape, weight shape, stride, padding (top, left, bottom, right),
/// dilation, groups.
pub type Conv = ([usize; 4], [usize; 4], [usize; 2], [usize; 4], [usize; 2], usize);

/// `relu((conv(x, w) + b) * 0.5 + r)` for convolution `c` in `dt` (a fused epilogue: scale,
/// channel bias, residual, relu) and its random inputs in [-2, 2] (x, w, b, r seeded `seed` to
/// `seed + 3`).
pub fn conv_case(
    (xs, ws, stride, pad, dil, groups): Conv,
    dt: DType,
    seed: u64,
) -> (sinter_core::trace::Graph, [sinter_core::tensor::HostTensor; 4]) {
    use sinter_core::tensor::HostTensor;
    let g = sinter_core::trace::Graph::new();
    let x = g.input("x", dt, xs);
    let w = g.input("w", dt, ws);
    let bias = g.input("b", dt, [ws[0]]);
    let y = x.conv2d(&w, Some(&bias), stride, pad, dil, groups);
    let oshape = y.shape().as_static().expect("static");
    let r = g.input("r", dt, oshape.clone());
    g.output(&(y * 0.5 + &r).relu());
    let ins = [
        HostTensor::random(dt, xs.to_vec(), seed, -2.0, 2.0),
        HostTensor::random(dt, ws.to_vec(), seed + 1, -2.0, 2.0),
        HostTensor::random(dt, vec![ws[0]], seed + 2, -2.0, 2.0),
        HostTensor::random(dt, oshape, seed + 3, -2.0, 2.0),
    ];
    (g, ins)
}

/// Runs test `child` of this test binary again in a process where libnvrtc cannot be found (the
/// loader path emptied, the folder search off, HOME elsewhere and no toolkit or Python prefix
/// variables, so neither headers nor wheels are searched), marked by `child_var`; asserts it ran
/// (its output says `CHILD: checked` or `CHILD: skipped`) and passed, and prints its `CHILD:` lines.
pub fn run_without_nvrtc(child: &str, child_var: &str) {
    let home = tempfile::tempdir().expect("tempdir");
    let mut cmd = std::process::Command::new(std::env::current_exe().expect("test binary path"));
    cmd.args(["--exact", child, "--nocapture", "--test-threads=1"])
        .env("SINTER_NVRTC_SEARCH", "0")
        .env("HOME", home.path())
        .env(child_var, "1");
    for var in [
        "LD_LIBRARY_PATH",
        "SINTER_CUDA_INCLUDE",
        "CUDA_HOME",
        "CUDA_PATH",
        "VIRTUAL_ENV",
        "CONDA_PREFIX",
        "PYENV_ROOT",
    ] {
        cmd.env_remove(var);
    }
    let out = cmd.output().expect("run the child");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "child failed:\n{text}");
    assert!(text.contains("CHILD: checked") || text.contains("CHILD: skipped"), "child did not run:\n{text}");
    eprintln!("{}", text.lines().filter(|l| l.contains("CHILD: ")).collect::<Vec<_>>().join("\n"));
}
