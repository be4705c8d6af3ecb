//! TEMPORARY (not part of the repo): runs rendered CUDA kernels on the host through /tmp/emu/shim.h
//! (g++, fibers for threads) and compares with the kernel-IR interpreter.
mod common;

use common::*;
use sinter_core::kernel::{Access, BufferKind, Program, ReduceStrategy, interp};
use sinter_core::workloads::{self, Scale};
use sinter_core::{DType, HostTensor};
use sinter_cuda::render::{self, CudaCaps, Tuning};
use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

fn storage(d: DType) -> &'static str {
    match d {
        DType::F32 => "float",
        DType::F16 => "__half",
        DType::BF16 => "__nv_bfloat16",
        DType::F64 => "double",
        DType::I8 => "signed char",
        DType::I16 => "short",
        DType::I32 => "int",
        DType::I64 => "long long",
        DType::U8 | DType::Bool => "unsigned char",
        DType::U16 => "unsigned short",
        DType::U32 => "unsigned int",
        DType::U64 => "unsigned long long",
    }
}

pub struct Case {
    pub name: String,
    pub program: Program,
    pub inputs: Vec<HostTensor>,
    /// Tuning sets: each entry is one tuning per kernel.
    pub tunings: Vec<Vec<Tuning>>,
    pub tol: Option<(f64, f64)>,
}

impl Case {
    pub fn new(name: &str, program: Program, inputs: Vec<HostTensor>) -> Case {
        let caps = CudaCaps::hopper();
        let cands: Vec<Vec<Tuning>> = program.kernels.iter().map(|k| render::candidates(k, &caps)).collect();
        let n = cands.iter().map(|c| c.len()).max().unwrap_or(1);
        let tunings =
            (0..n).map(|v| cands.iter().map(|c| c[v.min(c.len() - 1)].clone()).collect()).collect::<Vec<_>>();
        Case { name: name.into(), program, inputs, tunings, tol: None }
    }

    pub fn default_only(mut self) -> Case {
        self.tunings.truncate(1);
        self
    }
}

/// Runs every case (every tuning set) in one harness binary; returns failures.
pub fn run_suite(suite: &str, cases: &[Case]) -> Vec<String> {
    let dir = Path::new("/tmp/emu/run").join(suite);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let caps = CudaCaps::hopper();
    let mut cpp = String::from("#include \"shim.h\"\n#include <string>\n");
    let mut mains = String::new();
    let mut variants = Vec::new(); // (case index, tuning index, variant id)
    let mut failures = Vec::new();
    let mut wants = Vec::new();
    for (ci, case) in cases.iter().enumerate() {
        let want = match interp::run_program(&case.program, &case.inputs) {
            Ok(w) => w,
            Err(e) => {
                failures.push(format!("{}: interpreter failed: {e}", case.name));
                wants.push(None);
                continue;
            }
        };
        wants.push(Some(want));
        let p = &case.program;
        // Input and constant files.
        for (bi, b) in p.buffers.iter().enumerate() {
            let bytes = match &b.kind {
                BufferKind::Input(k) => Some(case.inputs[*k].to_le_bytes()),
                BufferKind::Constant(t) => Some(t.to_le_bytes()),
                _ => None,
            };
            if let Some(bytes) = bytes {
                std::fs::write(dir.join(format!("c{ci}_b{bi}.bin")), bytes).unwrap();
            }
        }
        for (ti, tun) in case.tunings.iter().enumerate() {
            let vid = variants.len();
            variants.push((ci, ti, vid));
            let ns = format!("v{vid}");
            writeln!(cpp, "namespace {ns} {{").unwrap();
            let mut launches = String::new();
            for (ki, k) in p.kernels.iter().enumerate() {
                let r = match render::render(k, &caps, &tun[ki]) {
                    Ok(r) => r,
                    Err(e) => {
                        failures.push(format!("{}: render {}: {e}", case.name, k.name));
                        continue;
                    }
                };
                let src: String = r
                    .source
                    .lines()
                    .filter(|l| !l.starts_with("#include"))
                    .map(|l| format!("{l}\n"))
                    .collect::<String>()
                    .replace(&format!(") {}(", r.name), &format!(") {ns}_{}(", r.name));
                writeln!(cpp, "namespace k{ki} {{\n{src}}}").unwrap();
                if r.grid[0] == 0 {
                    continue;
                }
                let args: Vec<String> = k
                    .args
                    .iter()
                    .map(|a| {
                        let c = if a.access == Access::Read { "const " } else { "" };
                        format!("({c}{}*)B[{}].data()", storage(a.dtype), a.buffer.0)
                    })
                    .collect();
                writeln!(
                    launches,
                    "    emu::launch({}, {}, [&] {{ {ns}::k{ki}::{ns}_{}({}); }});",
                    r.grid[0],
                    r.block[0],
                    r.name,
                    args.join(", ")
                )
                .unwrap();
            }
            writeln!(cpp, "}} // namespace {ns}").unwrap();
            // Runner of this variant.
            writeln!(cpp, "static void run_{ns}(const std::string& dir) {{").unwrap();
            writeln!(cpp, "    std::vector<std::vector<unsigned char>> B({});", p.buffers.len()).unwrap();
            for (bi, b) in p.buffers.iter().enumerate() {
                let bytes = (b.numel * b.dtype.size_bytes()).max(16) + 16;
                match &b.kind {
                    BufferKind::Input(_) | BufferKind::Constant(_) => {
                        writeln!(cpp, "    B[{bi}].assign({bytes}, 0xFF);").unwrap();
                        writeln!(
                            cpp,
                            "    {{ FILE* f = fopen((dir + \"/c{ci}_b{bi}.bin\").c_str(), \"rb\"); if (fread(B[{bi}].data(), 1, {}, f) != {}) abort(); fclose(f); }}",
                            b.numel * b.dtype.size_bytes(),
                            b.numel * b.dtype.size_bytes()
                        )
                        .unwrap();
                    }
                    _ => writeln!(cpp, "    B[{bi}].assign({bytes}, 0xFF);").unwrap(),
                }
            }
            cpp.push_str(&launches);
            for (oi, o) in p.outputs.iter().enumerate() {
                let b = &p.buffers[o.buffer.0 as usize];
                writeln!(
                    cpp,
                    "    {{ FILE* f = fopen((dir + \"/{ns}_o{oi}.bin\").c_str(), \"wb\"); fwrite(B[{}].data(), 1, {}, f); fclose(f); }}",
                    o.buffer.0,
                    b.numel * b.dtype.size_bytes()
                )
                .unwrap();
            }
            writeln!(cpp, "}}").unwrap();
            writeln!(mains, "    run_{ns}(dir);").unwrap();
        }
    }
    writeln!(cpp, "int main(int, char** argv) {{\n    std::string dir = argv[1];\n{mains}    return 0;\n}}").unwrap();
    let src = dir.join("harness.cpp");
    std::fs::write(&src, &cpp).unwrap();
    let exe = dir.join("harness");
    let out = Command::new("g++")
        .args(["-std=c++17", "-O1", "-w", "-ffp-contract=off", "-I/tmp/emu"])
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap();
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        failures.push(format!("{suite}: g++ failed:\n{}", &err[..err.len().min(6000)]));
        return failures;
    }
    let out = Command::new(&exe).arg(&dir).output().unwrap();
    if !out.status.success() {
        failures.push(format!("{suite}: harness failed: {:?} {}", out.status, String::from_utf8_lossy(&out.stderr)));
        return failures;
    }
    for (ci, ti, vid) in variants {
        let case = &cases[ci];
        let Some(want) = &wants[ci] else { continue };
        for (oi, o) in case.program.outputs.iter().enumerate() {
            let bytes = std::fs::read(dir.join(format!("v{vid}_o{oi}.bin"))).unwrap();
            let got = HostTensor::from_le_bytes(o.dtype, o.shape.clone(), &bytes).unwrap();
            let w = &want[oi];
            let (rtol, atol) = case.tol.unwrap_or_else(|| workloads::tolerance(o.dtype));
            let ratio = got.tolerance_ratio(w, rtol, atol);
            if ratio > 1.0 {
                let (a, b) = (got.to_f64_vec(), w.to_f64_vec());
                let bad: Vec<String> = a
                    .iter()
                    .zip(&b)
                    .enumerate()
                    .filter(|(_, (x, y))| !(x.is_nan() && y.is_nan() || *x == *y || (*x - *y).abs() <= atol + rtol * y.abs()))
                    .take(6)
                    .map(|(k, (x, y))| format!("[{k}] got {x} want {y}"))
                    .collect();
                failures.push(format!(
                    "{} (tuning {ti}: {:?}) output {oi} ({}) off by {ratio:.3}x: {}",
                    case.name,
                    case.tunings[ti],
                    o.name,
                    bad.join(", ")
                ));
            }
        }
    }
    failures
}

/// Inputs with special values for op tests: floats include NaN, infinities, zeros, halves; integers
/// the extremes. `nonzero` keeps integers away from 0 (divisors); `nonneg` (exponents).
pub fn special(d: DType, n: usize, seed: u64, nonzero: bool, nonneg: bool) -> HostTensor {
    let mut v: Vec<f64> = HostTensor::random(DType::F64, vec![n], seed, -20.0, 20.0).to_f64_vec();
    let specials: Vec<f64> = if d.is_float() {
        vec![f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 0.0, -0.0, 0.5, -0.5, 1.5, 2.5, -2.5, 3.0, -7.0, 1e30, -1e30]
    } else {
        let (lo, hi): (f64, f64) = match d {
            DType::I8 => (-128.0, 127.0),
            DType::I16 => (-32768.0, 32767.0),
            DType::I32 => (-2147483648.0, 2147483647.0),
            DType::I64 => (-9.2e18, 9.2e18),
            DType::U8 => (0.0, 255.0),
            DType::U16 => (0.0, 65535.0),
            DType::U32 => (0.0, 4294967295.0),
            DType::U64 => (0.0, 1.8e19),
            _ => (0.0, 1.0),
        };
        vec![lo, hi, -1.0, 0.0, 1.0, 2.0, -3.0, 7.0, lo + 1.0, hi - 1.0]
    };
    for (i, s) in specials.iter().enumerate() {
        if i < n {
            v[(i * 7) % n] = *s;
        }
    }
    if !d.is_float() {
        for x in v.iter_mut() {
            *x = x.trunc();
            if nonneg && *x < 0.0 {
                *x = -*x;
            }
            if nonneg && d != DType::U64 {
                *x = x.min(5.0);
            }
            if nonzero && *x == 0.0 {
                *x = 3.0;
            }
        }
    }
    if d == DType::Bool {
        for (i, x) in v.iter_mut().enumerate() {
            *x = if nonzero { 1.0 } else { (i % 3 == 0) as i32 as f64 };
        }
    }
    HostTensor::from_f64(d, vec![n], &v)
}

#[test]
fn emulate_workloads() {
    let mut cases = Vec::new();
    for w in workloads::all() {
        if w.name.contains("resnet") {
            continue;
        }
        let p = scheduled(&w);
        let inputs = w.inputs(Scale::Reduced, 7);
        let mut c = Case::new(w.name, p, inputs);
        c.tol = Some(w.tolerance());
        cases.push(c);
    }
    let f = run_suite("workloads", &cases);
    assert!(f.is_empty(), "{}", f.join("\n"));
}

#[test]
fn emulate_resnet() {
    let w = workloads::get("resnet18_b32_f32").unwrap();
    let p = scheduled(&w);
    let inputs = w.inputs(Scale::Reduced, 7);
    let mut c = Case::new(w.name, p, inputs).default_only();
    c.tol = Some(w.tolerance());
    let f = run_suite("resnet", &[c]);
    assert!(f.is_empty(), "{}", f.join("\n"));
}

fn binary_some(d: DType, n: usize, ops: &[sinter_core::ir::BinaryOp]) -> Program {
    use sinter_core::kernel::{Expr, Var};
    let mut p = ProgramBuilder::new();
    let a = p.input("a", d, &[n]);
    let b = p.input("b", d, &[7]);
    let outs: Vec<_> = ops.iter().map(|op| p.output(op.name(), binary_dtype(*op, d), &[n])).collect();
    let mut kb = KernelBuilder::new(&format!("k0_binary_{d}"), &["binary"]);
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
    p.build()
}

fn unary_some(d: DType, n: usize) -> Program {
    use sinter_core::ir::UnaryOp;
    use sinter_core::kernel::Expr;
    let ops: Vec<UnaryOp> = unary_ops(d)
        .into_iter()
        .filter(|op| d.is_float() || !matches!(op, UnaryOp::IsNan | UnaryOp::IsInf))
        .collect();
    let mut p = ProgramBuilder::new();
    let x = p.input("x", d, &[n]);
    let outs: Vec<_> = ops.iter().map(|op| p.output(op.name(), unary_dtype(*op, d), &[n])).collect();
    let mut kb = KernelBuilder::new(&format!("k0_unary_{d}"), &["unary"]);
    let ax = kb.arg(&p, x, Access::Read);
    let v = kb.load(ax, lane());
    let mut stores = vec![];
    for (op, o) in ops.iter().zip(&outs) {
        let ao = kb.arg(&p, *o, Access::Write);
        let r = kb.e(Expr::Unary(*op, v), unary_dtype(*op, d));
        stores.push(st(ao, lane(), r));
    }
    p.kernel(kb.pointwise(n, stores));
    p.build()
}

#[test]
fn emulate_ops() {
    use sinter_core::ir::BinaryOp;
    let mut cases = Vec::new();
    for d in DType::ALL {
        for n in [7usize, 64] {
            let p = unary_some(d, n);
            cases.push(Case::new(&format!("unary {d} {n}"), p, vec![special(d, n, 1, false, false)]).default_only());
            let ops: Vec<BinaryOp> = binary_ops(d).into_iter().filter(|o| *o != BinaryOp::Pow).collect();
            let p = binary_some(d, n, &ops);
            let inputs = vec![special(d, n, 2, false, false), special(d, 7, 3, true, false)];
            cases.push(Case::new(&format!("binary {d} {n}"), p, inputs).default_only());
            let p = binary_some(d, n, &[BinaryOp::Pow]);
            let inputs = vec![special(d, n, 4, false, false), special(d, 7, 5, false, true)];
            let mut c = Case::new(&format!("pow {d} {n}"), p, inputs).default_only();
            if d.is_float() {
                c.tol = Some((2e-3, 1e-30));
            }
            cases.push(c);
            let p = casts_from(d, n);
            cases.push(Case::new(&format!("casts {d} {n}"), p, vec![special(d, n, 6, false, false)]).default_only());
        }
        let p = literals(d, 7);
        cases.push(Case::new(&format!("literals {d}"), p, vec![special(d, 7, 8, false, false)]).default_only());
    }
    let f = run_suite("ops", &cases);
    assert!(f.is_empty(), "{} failures:\n{}", f.len(), f.join("\n"));
}

#[test]
fn emulate_gathers_reductions_matmuls() {
    let mut cases = Vec::new();
    for id in [DType::I64, DType::I32, DType::U64, DType::F32, DType::U8] {
        let idx = HostTensor::from_f64(id, vec![7], &[0.0, 9.0, -3.0, 25.0, 4.7, 1e19, 3.0]);
        let table = HostTensor::random(DType::F32, vec![10, 16], 3, -1.0, 1.0);
        cases.push(Case::new(&format!("gather {id}"), gather(id, 10, 16, 7), vec![table, idx]));
    }
    for d in [DType::F32, DType::F16, DType::BF16, DType::F64] {
        for strategy in [ReduceStrategy::Persistent, ReduceStrategy::Looped, ReduceStrategy::ThreadPerRow] {
            for len in [1usize, 7, 1023, 4097] {
                let x = HostTensor::random(d, vec![3, len], 11, -3.0, 3.0);
                let mut c = Case::new(&format!("softmax {d} {strategy:?} {len}"), softmax(3, len, d, strategy), vec![x.clone()]);
                if d == DType::F64 {
                    // computed in f32
                    c.tol = Some((1e-5, 1e-6));
                }
                cases.push(c);
                let w = HostTensor::random(d, vec![len], 12, -1.0, 1.0);
                let mut c = Case::new(&format!("layer_norm {d} {strategy:?} {len}"), layer_norm(3, len, d, strategy), vec![x, w]);
                if d == DType::F64 {
                    c.tol = Some((1e-4, 1e-5));
                }
                if len == 1 {
                    // var = 0: (x - mean) is rounding noise times rsqrt(eps).
                    c.tol = Some((1.0, 1.0));
                }
                cases.push(c);
            }
        }
    }
    for d in DType::ALL {
        for strategy in [ReduceStrategy::Persistent, ReduceStrategy::Looped, ReduceStrategy::ThreadPerRow] {
            for len in [1usize, 7, 1023, 4097] {
                let x = if d.is_float() {
                    let mut t = HostTensor::random(d, vec![3, len], 13, 0.5, 1.5).to_f64_vec();
                    // ties and a NaN in the middle row
                    if len > 5 {
                        t[len + 2] = f64::NAN;
                        t[len + 4] = f64::NAN;
                        t[2 * len + 1] = t[2 * len + 3];
                    }
                    HostTensor::from_f64(d, vec![3, len], &t)
                } else {
                    HostTensor::random(d, vec![3, len], 13, -3.0, 3.0)
                };
                let mut c = Case::new(&format!("arg_sum {d} {strategy:?} {len}"), arg_sum(d, 3, len, strategy), vec![x]);
                if d.is_float() {
                    c.tol = Some((2e-2, 1e-30));
                }
                cases.push(c);
            }
        }
    }
    for d in DType::ALL.into_iter().filter(|d| *d != DType::Bool) {
        let acc = match d {
            DType::F64 => DType::F64,
            d if d.is_float() => DType::F32,
            DType::U8 | DType::U16 | DType::U32 => DType::U32,
            _ => DType::I64,
        };
        for (batch, m, n, k, bt) in [(1, 1, 1, 1, false), (2, 7, 9, 5, true), (1, 67, 45, 33, false), (3, 130, 129, 17, true), (1, 257, 3, 64, false)] {
            let lo = if d.is_float() { -1.0 } else { -5.0 };
            let a = HostTensor::random(d, vec![batch, m, k], 21, lo, 5.0);
            let b = HostTensor::random(d, if bt { vec![n, k] } else { vec![k, n] }, 22, lo, 5.0);
            let bias = HostTensor::random(d, vec![n], 23, lo, 5.0);
            let mut c = Case::new(
                &format!("matmul {d} {batch}x{m}x{n}x{k} bt={bt}"),
                matmul_bias_relu(batch, m, n, k, d, acc, bt),
                vec![a, b, bias],
            );
            if d.is_float() {
                c.tol = Some((2e-2, 1e-3));
            }
            cases.push(c);
        }
    }
    let f = run_suite("misc", &cases);
    assert!(f.is_empty(), "{} failures:\n{}", f.len(), f.join("\n"));
}
