//! Tests of the scheduler: every op and fused pattern is scheduled, run on the kernel-IR
//! interpreter (which honours the memory plan and poisons buffers) and compared with the CPU
//! reference on the *original* graph (before decomposition), fused and eager.

use super::*;
use crate::backend::{Backend, Mode};
use crate::dtype::DType;
use crate::ir::{Graph as IrGraph, PadMode};
use crate::kernel::interp::{InterpBackend, run_program, validate};
use crate::kernel::print::print_program;
use crate::kernel::{BufferKind, KernelBody, ReduceStrategy};
use crate::tensor::HostTensor;
use crate::trace::{Graph, Tensor};
use crate::workloads::{self, Scale};

fn caps_with_bindings(n: u32) -> Capabilities {
    Capabilities { max_bindings: n, ..Capabilities::host() }
}

/// Largest finite magnitude of a tensor (at least 1e-3).
fn scale(t: &HostTensor) -> f64 {
    t.to_f64_vec().iter().filter(|x| x.is_finite()).fold(1e-3f64, |m, x| m.max(x.abs()))
}

/// Compares within the dtype's tolerance, the absolute part scaled by the reference's magnitude
/// (reductions accumulate in f32 here and in f64 in the reference; 16-bit intermediates are kept
/// in f32 here and rounded there).
fn assert_close(got: &HostTensor, want: &HostTensor, ctx: &str) {
    assert_eq!(got.shape, want.shape, "{ctx}: shape");
    assert_eq!(got.dtype(), want.dtype(), "{ctx}: dtype");
    let dt = want.dtype();
    if !dt.is_float() {
        assert_eq!(got.to_i64_vec(), want.to_i64_vec(), "{ctx}: values");
        return;
    }
    let rtol = dt.rel_tolerance();
    let r = got.tolerance_ratio(want, rtol, rtol * scale(want));
    if r > 1.0 {
        let (a, b) = (got.to_f64_vec(), want.to_f64_vec());
        let worst = (0..a.len())
            .max_by(|&i, &j| {
                let e = |k: usize| if a[k].is_nan() != b[k].is_nan() { f64::INFINITY } else { (a[k] - b[k]).abs() };
                e(i).partial_cmp(&e(j)).unwrap_or(std::cmp::Ordering::Equal)
            })
            .unwrap_or(0);
        panic!("{ctx}: ratio {r}; worst at {worst}: got {} want {}", a[worst], b[worst]);
    }
}

/// Decomposes `g`, schedules it, runs it on the interpreter and compares every output with the
/// CPU reference of `g` itself. Returns the program.
fn check_with(g: &IrGraph, inputs: &[HostTensor], caps: &Capabilities, opts: &ScheduleOptions) -> Program {
    let ir = crate::passes::optimize(g).expect("passes");
    let p = schedule(&ir, caps, opts).unwrap_or_else(|e| panic!("schedule: {e}\n{}", crate::text::print(&ir)));
    validate(&p).unwrap_or_else(|e| panic!("invalid program: {e}\n{}", print_program(&p)));
    for k in &p.kernels {
        assert!(
            k.args.len() <= caps.max_bindings as usize,
            "{} binds {} buffers\n{}",
            k.name,
            k.args.len(),
            print_program(&p)
        );
    }
    let got = run_program(&p, inputs).unwrap_or_else(|e| panic!("interp: {e}\n{}", print_program(&p)));
    let want = crate::cpu::run(g, inputs).expect("cpu reference");
    assert_eq!(got.len(), want.len());
    for (i, (a, b)) in got.iter().zip(&want).enumerate() {
        let ctx = format!("output {i} (fusion {})\n{}\n{}", opts.fusion, crate::text::print(&ir), print_program(&p));
        assert_close(a, b, &ctx);
    }
    p
}

/// Fused and eager, both against the CPU reference; returns the fused program.
fn check(g: &IrGraph, inputs: &[HostTensor]) -> Program {
    check_with(g, inputs, &Capabilities::host(), &ScheduleOptions::eager());
    check_with(g, inputs, &Capabilities::host(), &ScheduleOptions::default())
}

fn rnd(dt: DType, shape: &[usize], seed: u64) -> HostTensor {
    HostTensor::random(dt, shape.to_vec(), seed, -2.0, 2.0)
}

fn graph1(dt: DType, shape: &[usize], f: impl Fn(&Tensor) -> Tensor) -> IrGraph {
    let g = Graph::new();
    let x = g.input("x", dt, shape.to_vec());
    g.output(&f(&x));
    g.build().expect("build")
}

fn graph2(dt: DType, a: &[usize], b: &[usize], f: impl Fn(&Tensor, &Tensor) -> Tensor) -> IrGraph {
    let g = Graph::new();
    let x = g.input("x", dt, a.to_vec());
    let y = g.input("y", dt, b.to_vec());
    g.output(&f(&x, &y));
    g.build().expect("build")
}

// ------------------------------------------------------------------------------- workloads

fn workload(name: &str) -> (IrGraph, Vec<HostTensor>, Program) {
    let w = workloads::get(name).expect("workload");
    let g = w.build(Scale::Reduced).expect("build");
    let inputs = w.inputs(Scale::Reduced, 7);
    let p = check(&g, &inputs);
    (g, inputs, p)
}

#[test]
fn workload_kernel_counts() {
    let cases: &[(&str, usize)] = &[
        ("add_relu_mul_10M_f32", 1),
        ("cos_16M_f32", 1),
        ("cos_cos_16M_f32", 1),
        ("softmax_8192x8192_f32", 1),
        ("layernorm_gelu_8192x4096_f32", 1),
        ("pointwise_chain64_1024_f32", 1),
        ("matmul_softmax_100_f32", 2),
        ("matmul_softmax_4096_bf16", 2),
        ("mlp_8192x4096x16384_bf16", 2),
        ("matmul_4096_f32", 1),
        ("matmul_8192_bf16", 1),
        ("attention_b8h16s1024d64_bf16", 1),
        ("attention_causal_b8h16s2048d128_bf16", 1),
        ("attention_decode_b32h32kv4096d128_bf16", 1),
        ("sum_64M_f32", 2),
    ];
    for &(name, want) in cases {
        let (_, _, p) = workload(name);
        assert_eq!(p.kernels.len(), want, "{name}\n{}", print_program(&p));
    }
}

#[test]
fn softmax_is_one_reduce_kernel_with_two_reductions() {
    let (_, _, p) = workload("softmax_8192x8192_f32");
    let KernelBody::Reduce(b) = &p.kernels[0].body else { panic!("not a reduce kernel") };
    assert_eq!(b.reductions.len(), 2);
    assert_eq!(b.elem_stores.len(), 1);
    assert!(b.row_stores.is_empty());
    assert_eq!(p.kernels[0].name, "k0_softmax");
    assert_eq!(p.kernels[0].ops, vec!["softmax".to_string()]);
    assert_eq!(b.strategy, ReduceStrategy::Persistent);
}

#[test]
fn layernorm_gelu_is_one_kernel() {
    let (_, _, p) = workload("layernorm_gelu_8192x4096_f32");
    let KernelBody::Reduce(b) = &p.kernels[0].body else { panic!("not a reduce kernel") };
    assert_eq!(b.reductions.len(), 2);
    assert_eq!(p.kernels[0].name, "k0_layer_norm_gelu");
}

/// Channels-last storage of the convolutions' inputs ([`CostModel::conv_channels_last`]): every
/// such node's buffer is `NHWC` (its stores and every load go through that order), ResNet-18
/// (reduced) still computes the reference through the interpreter, the implicit operands read
/// channels-contiguous (`s_chan == 1`), and the graph's output keeps its layout.
#[test]
fn channels_last_convolution_inputs_compute_the_reference() {
    let w = workloads::get("resnet18_b32_f32").expect("workload");
    let g = w.build(Scale::Reduced).expect("build");
    let inputs = w.inputs(Scale::Reduced, 5);
    let p = check_with(&g, &inputs, &Capabilities::host(), &TestModel::convs(Convs::ChannelsLast));
    let layouts = p.decisions.iter().filter(|d| d.reason.starts_with("layout: ")).count();
    // One per distinct computed input of a conv.
    assert!(layouts >= 12, "{layouts} channels-last inputs\n{}", print_program(&p));
    let nhwc_reads = p
        .kernels
        .iter()
        .filter(|k| matches!(&k.body, KernelBody::Matmul(m) if m.b.im2col.as_ref().is_some_and(|v| v.s_chan == 1)))
        .count();
    // All but the stem (it reads the graph's input). The first block's first conv reads the max
    // pool's output, stored channels-last with the pool's input (the stem's output).
    assert_eq!(nhwc_reads, 19, "{}", print_program(&p));
    assert!(p.decisions.iter().any(|d| d.reason.starts_with("layout: pool ")), "{:?}", p.decisions);
    // The second convolutions of the three downsampling blocks, stored raw for the shortcut's
    // epilogue, are stored channels-last too; the last block's (read by the average pool) is not.
    let raw: Vec<bool> = p
        .kernels
        .iter()
        .filter(|k| k.ops == ["conv2d"])
        .map(|k| crate::kernel::library_conv::split_conv(k).expect("a library convolution").conv.out_nhwc)
        .collect();
    assert_eq!(raw[..3], [true, true, true], "{}", print_program(&p));
    // (At this scale the last one's output is 1x1 per channel, where both orders coincide.)
    let last = p.kernels.iter().rfind(|k| k.ops == ["conv2d"]).expect("a raw conv").name.clone();
    assert!(
        !p.decisions.iter().any(|d| d.reason.starts_with("layout: conv ") && d.kernels.contains(&last)),
        "{last} is read by the average pool: {:?}",
        p.decisions
    );
    // The pool walks its output in storage order: consecutive rows are consecutive channels, and
    // its loads of the stem's NHWC output step by one from row to row.
    let pool = p.kernels.iter().find(|k| k.ops == ["max_pool2d"]).expect("the max pool");
    let KernelBody::Reduce(r) = &pool.body else { panic!("{}", pool.name) };
    assert!(r.row_stores.iter().all(|st| st.index == crate::kernel::Index::var(crate::kernel::Var::Row)));
    let step = |i: &crate::kernel::Index| {
        let at = |row: i64| i.eval(&|v| if v == crate::kernel::Var::Row { row } else { 4 }, &|_| 0);
        at(8) - at(7)
    };
    let loads: Vec<i64> = pool
        .exprs
        .iter()
        .filter_map(|e| match &e.expr {
            crate::kernel::Expr::Load { index, .. } => Some(step(index)),
            _ => None,
        })
        .collect();
    assert_eq!(loads, [1], "{}", print_program(&p));
}

#[test]
fn resnet18_reduced_runs_and_fuses_batchnorm_relu_into_convs() {
    let w = workloads::get("resnet18_b32_f32").expect("workload");
    let g = w.build(Scale::Reduced).expect("build");
    let inputs = w.inputs(Scale::Reduced, 3);
    let p = check_with(&g, &inputs, &Capabilities::host(), &ScheduleOptions::default());
    let convs = g.nodes.iter().filter(|n| matches!(n.op, crate::ir::Op::Conv2d { .. })).count();
    assert_eq!(convs, 20);
    // Every conv is an im2col gather and a matmul with its batch norm, residual add and relu as
    // epilogue; plus the max pool, the global average pool (which takes the last block's batch
    // norm, add and relu) and the classifier. (With window kernels it was 23: one per conv.)
    assert_eq!(p.kernels.len(), 2 * convs + 3, "{}", print_program(&p));
    let im2col = p.kernels.iter().filter(|k| k.name.contains("_im2col")).count();
    let matmuls = p.kernels.iter().filter(|k| matches!(k.body, KernelBody::Matmul(_))).count();
    assert_eq!((im2col, matmuls), (convs, convs + 1), "{}", print_program(&p));
    assert!(p.kernels.iter().all(|k| !matches!(&k.body, KernelBody::Reduce(r) if r.strategy == ReduceStrategy::ThreadPerRow && k.ops.contains(&"conv2d".to_string()))));
    // The stem: 7x7 stride-2 conv with its batch norm and relu in the matmul's stores.
    assert_eq!(p.kernels[1].name, "k1_conv2d_batch_norm_relu", "{}", print_program(&p));
    // Every conv's batch norm is in its matmul but for the downsampling convs' (fused into the
    // block's second conv, which adds them) and the last one's (fused into the average pool).
    let has = |k: &crate::kernel::Kernel, op: &str| k.ops.iter().any(|o| o == op);
    let fused = p.kernels.iter().filter(|k| has(k, "conv2d") && has(k, "batch_norm")).count();
    assert!(fused >= 16, "{fused} convs with their batch norm\n{}", print_program(&p));
    assert!(p.decisions.iter().filter(|d| d.reason.starts_with("conv lowering: matmul")).count() == convs);
    // im2col buffers are intermediates sharing the memory plan's slots.
    assert!(p.memory.peak_bytes < p.memory.unplanned_bytes);
    // A cost model that keeps window kernels (the trait's default) gives the old schedule.
    let windows = TestModel::convs(Convs::Windows);
    let p = check_with(&g, &inputs, &Capabilities::host(), &windows);
    assert_eq!(p.kernels.len(), convs + 3, "{}", print_program(&p));
}

// ------------------------------------------------------------------------------- elementwise

#[test]
fn unary_ops() {
    use crate::ir::UnaryOp::*;
    for (i, u) in
        [Neg, Abs, Exp, Sin, Cos, Tan, Atan, Sinh, Cosh, Asinh, Tanh, Sigmoid, Erf, Relu, Floor, Ceil, Round, Sign]
            .into_iter()
            .enumerate()
    {
        let g = graph1(DType::F32, &[7, 3], |x| x.unary(u));
        check(&g, &[rnd(DType::F32, &[7, 3], i as u64)]);
    }
    // Domain-restricted ones on positive inputs.
    for (i, u) in [Log, Sqrt, Rsqrt, Reciprocal, Acosh].into_iter().enumerate() {
        let g = graph1(DType::F32, &[1023], |x| (x.abs() + 1.5).unary(u));
        check(&g, &[rnd(DType::F32, &[1023], 40 + i as u64)]);
    }
    for (i, u) in [Asin, Acos, Atanh].into_iter().enumerate() {
        let g = graph1(DType::F32, &[5], |x| (x * 0.4).unary(u));
        check(&g, &[rnd(DType::F32, &[5], 50 + i as u64)]);
    }
    // Bool results and integer ops.
    let g = graph1(DType::F32, &[9], |x| x.unary(IsNan).cast(DType::F32) + (x / 0.0).unary(IsInf).cast(DType::F32));
    check(&g, &[rnd(DType::F32, &[9], 3)]);
    for dt in [DType::I32, DType::I8, DType::U8, DType::I64] {
        let g = graph1(dt, &[17], |x| x.unary(Neg).unary(Abs).unary(Relu) + x.unary(Sign));
        check(&g, &[rnd(dt, &[17], 4)]);
    }
}

#[test]
fn binary_ops_with_broadcasting() {
    use crate::ir::BinaryOp::*;
    for (i, b) in [Add, Sub, Mul, Div, Max, Min, Pow, Mod, FMod].into_iter().enumerate() {
        let g = graph2(DType::F32, &[4, 1, 5], &[3, 1], |x, y| {
            if matches!(b, Pow | Div | Mod | FMod) { x.abs().binary(b, &(y.abs() + 0.5)) } else { x.binary(b, y) }
        });
        check(&g, &[rnd(DType::F32, &[4, 1, 5], i as u64), rnd(DType::F32, &[3, 1], 100 + i as u64)]);
    }
    for (i, b) in [Eq, Ne, Lt, Le, Gt, Ge].into_iter().enumerate() {
        let g = graph2(DType::I32, &[6, 7], &[7], |x, y| x.binary(b, y).cast(DType::I32) + x);
        check(&g, &[rnd(DType::I32, &[6, 7], i as u64), rnd(DType::I32, &[7], 9 + i as u64)]);
    }
    for (i, b) in [And, Or, Xor].into_iter().enumerate() {
        let g = graph2(DType::Bool, &[2, 5], &[2, 1], |x, y| x.binary(b, y));
        check(&g, &[rnd(DType::Bool, &[2, 5], i as u64), rnd(DType::Bool, &[2, 1], 20 + i as u64)]);
    }
    // Integer arithmetic wraps to the dtype.
    let g = graph2(DType::I8, &[33], &[33], |x, y| (x * y * y + x) * x);
    check(
        &g,
        &[
            HostTensor::random(DType::I8, vec![33], 1, -100.0, 100.0),
            HostTensor::random(DType::I8, vec![33], 2, -100.0, 100.0),
        ],
    );
    let g = graph2(DType::U64, &[8], &[8], |x, y| x.binary(Max, y) - y);
    check(&g, &[rnd(DType::U64, &[8], 5), rnd(DType::U64, &[8], 6)]);
}

#[test]
fn where_and_casts() {
    let g = Graph::new();
    let c = g.input("c", DType::Bool, [3, 1]);
    let a = g.input("a", DType::F16, [3, 4]);
    let b = g.input("b", DType::F16, [4]);
    g.output(&c.where_(&a, &b));
    g.output(&a.cast(DType::I32).cast(DType::F64));
    g.output(&(a.cast(DType::F32) * 1000.5).cast(DType::BF16));
    g.output(&a.cast(DType::Bool));
    g.output(&(a.cast(DType::F32) * 100.0).cast(DType::U8));
    let ir = g.build().expect("build");
    let p = check(&ir, &[rnd(DType::Bool, &[3, 1], 1), rnd(DType::F16, &[3, 4], 2), rnd(DType::F16, &[4], 3)]);
    // Five outputs of one iteration space from shared inputs: one kernel (horizontal fusion).
    assert_eq!(p.kernels.len(), 1, "{}", print_program(&p));
}

#[test]
fn awkward_sizes() {
    for n in [1usize, 7, 1023, 4097] {
        let g = graph2(DType::F32, &[n], &[n], |x, y| (x + y).relu() * 2.0);
        check(&g, &[rnd(DType::F32, &[n], n as u64), rnd(DType::F32, &[n], 1 + n as u64)]);
        let g = graph1(DType::F32, &[3, n], |x| x.softmax(-1));
        check(&g, &[rnd(DType::F32, &[3, n], n as u64)]);
        let g = graph1(DType::F32, &[n, 5], |x| x.sum(&[0], false));
        check(&g, &[rnd(DType::F32, &[n, 5], n as u64)]);
    }
}

// ------------------------------------------------------------------------------- reductions

#[test]
fn reductions_over_any_axes() {
    use crate::ir::ReduceOp::*;
    let shape = [3, 4, 5];
    let axes_list: &[&[i64]] = &[&[0], &[1], &[2], &[0, 2], &[0, 1], &[1, 2], &[0, 1, 2]];
    for (i, axes) in axes_list.iter().enumerate() {
        for op in [Sum, Max, Min, Prod, Mean] {
            for keep in [false, true] {
                let g = graph1(DType::F32, &shape, |x| x.reduce(op, axes, keep));
                check(&g, &[rnd(DType::F32, &shape, i as u64)]);
            }
        }
    }
    for dt in [DType::I32, DType::U8, DType::I64] {
        let g = graph1(dt, &[6, 5], |x| x.sum(&[1], false) + x.max(&[1], false) - x.min(&[1], false));
        check(&g, &[rnd(dt, &[6, 5], 8)]);
    }
}

#[test]
fn reduction_strategies() {
    let m = DefaultCostModel::default();
    let caps = Capabilities::host();
    assert_eq!(m.reduce_strategy(10, 4096, &caps), ReduceStrategy::Persistent);
    assert_eq!(m.reduce_strategy(10, 4097, &caps), ReduceStrategy::Looped);
    assert_eq!(m.reduce_strategy(4096, 64, &caps), ReduceStrategy::ThreadPerRow);
    let g = graph1(DType::F32, &[2, 5000], |x| x.softmax(-1));
    let p = check(&g, &[rnd(DType::F32, &[2, 5000], 1)]);
    let KernelBody::Reduce(b) = &p.kernels[0].body else { panic!("not a reduce kernel") };
    assert_eq!(b.strategy, ReduceStrategy::Looped);
    // Many short rows: one thread per row where consecutive rows are consecutive elements (a sum
    // over the outer axis), one workgroup per row where each row is stored whole (a global average
    // pool over 7x7), with the reason recorded.
    let strategy = |axes: &[i64], shape: &[usize]| {
        let g = graph1(DType::F32, shape, |x| x.mean(axes, false) * 2.0);
        let p = check(&g, &[rnd(DType::F32, shape, 2)]);
        let KernelBody::Reduce(b) = &p.kernels[0].body else { panic!("not a reduce kernel") };
        let why = p.decisions.iter().any(|d| d.reason.starts_with("reduction strategy: a workgroup per row"));
        (b.strategy, why)
    };
    assert_eq!(strategy(&[0], &[49, 4100]), (ReduceStrategy::ThreadPerRow, false));
    assert_eq!(strategy(&[2, 3], &[2, 2050, 7, 7]), (ReduceStrategy::Persistent, true));
}

#[test]
fn split_reductions_for_few_rows() {
    use crate::ir::ReduceOp::*;
    let m = DefaultCostModel::default();
    let caps = Capabilities::host();
    assert_eq!(m.reduce_split(8192, 8192, &caps), 1, "enough rows");
    assert_eq!(m.reduce_split(1, 4096, &caps), 1, "row too short to split");
    assert_eq!(m.reduce_split(1, 1 << 24, &caps), 512);
    assert_eq!(super::split::pick_factor(1 << 20, 512), Some(512));
    assert_eq!(super::split::pick_factor(3 * 1000, 512), Some(500));
    assert_eq!(super::split::pick_factor(65_521, 16), None, "a prime length is not split");
    // Whole-tensor and few-row reductions of every splittable operator, with a row epilogue
    // (mean divides, the outer expression adds) and a prologue (abs).
    for (i, (shape, axes)) in
        [(&[1 << 16][..], &[0i64][..]), (&[3, 40_000][..], &[1][..]), (&[64, 2, 64][..], &[0, 2][..])]
            .into_iter()
            .enumerate()
    {
        for op in [Sum, Max, Min, Mean] {
            let g = graph1(DType::F32, shape, |x| x.abs().reduce(op, axes, false) + 1.0);
            let p = check(&g, &[rnd(DType::F32, shape, 40 + i as u64)]);
            let rows: usize = p.outputs[0].shape.iter().product();
            if rows * 2 < m.split_target_groups && shape.iter().product::<usize>() / rows >= 2 * m.split_min_chunk {
                assert_eq!(p.kernels.len(), 2, "{shape:?} {op:?} splits\n{}", print_program(&p));
                assert!(p.kernels[0].name.ends_with("_partial"), "{}", p.kernels[0].name);
                assert!(p.decisions.iter().any(|d| d.reason.starts_with("split reduction")));
            } else {
                assert_eq!(p.kernels.len(), 1, "{shape:?} {op:?}\n{}", print_program(&p));
            }
        }
    }
    // f16 input, f32 partials; product; a prime row length stays one kernel.
    let g = graph1(DType::F16, &[2, 1 << 15], |x| x.sum(&[1], true));
    assert_eq!(check(&g, &[rnd(DType::F16, &[2, 1 << 15], 3)]).kernels.len(), 2);
    let g = graph1(DType::F32, &[1 << 14], |x| (x * 0.001 + 1.0).reduce(Prod, &[0], false));
    assert_eq!(check(&g, &[rnd(DType::F32, &[1 << 14], 4)]).kernels.len(), 2);
    let g = graph1(DType::F32, &[65_521], |x| x.sum(&[0], false));
    assert_eq!(check(&g, &[rnd(DType::F32, &[65_521], 5)]).kernels.len(), 1);
    // Softmax over few long rows keeps its element epilogue: not split.
    let g = graph1(DType::F32, &[2, 1 << 15], |x| x.softmax(-1));
    assert_eq!(check(&g, &[rnd(DType::F32, &[2, 1 << 15], 6)]).kernels.len(), 1);
}

#[test]
fn arg_reductions_with_ties_and_select_last() {
    // Values with many ties (integers in a small range, as floats).
    let x = HostTensor::from_f64(DType::F32, vec![5, 6], &(0..30).map(|i| ((i * 7) % 4) as f64).collect::<Vec<_>>());
    for axis in [0i64, 1] {
        for keep in [false, true] {
            let g = graph1(DType::F32, &[5, 6], |t| t.argmax(axis, keep));
            check(&g, std::slice::from_ref(&x));
            let g = graph1(DType::F32, &[5, 6], |t| t.argmin(axis, keep));
            check(&g, std::slice::from_ref(&x));
        }
    }
    for (op, last) in [(crate::ir::ArgOp::ArgMax, true), (crate::ir::ArgOp::ArgMin, true)] {
        let g = graph1(DType::F32, &[5, 6], |t| {
            t.apply(crate::ir::Op::ArgReduce { op, axis: 1, keepdim: false, select_last: last }, &[])
        });
        check(&g, std::slice::from_ref(&x));
    }
    // argmax and a sum over the same rows share one kernel.
    let g = Graph::new();
    let t = g.input("x", DType::F32, [5, 6]);
    g.output(&t.argmax(1, false));
    g.output(&t.sum(&[1], false));
    let p = check(&g.build().expect("build"), std::slice::from_ref(&x));
    assert_eq!(p.kernels.len(), 1, "{}", print_program(&p));
}

#[test]
fn reduction_epilogues_and_refusals() {
    // Row-shaped epilogue: mean = sum * (1/n) stored per row.
    let g = graph1(DType::F32, &[9, 13], |x| x.mean(&[1], false).exp());
    let p = check(&g, &[rnd(DType::F32, &[9, 13], 1)]);
    assert_eq!(p.kernels.len(), 1);
    let KernelBody::Reduce(b) = &p.kernels[0].body else { panic!("not a reduce kernel") };
    assert_eq!(b.row_stores.len(), 1);
    // A reduction result broadcast into a different row space must not fuse.
    let g = graph1(DType::F32, &[7, 7], |x| x + x.sum(&[1], true).transpose(0, 1));
    let p = check(&g, &[rnd(DType::F32, &[7, 7], 2)]);
    assert_eq!(p.kernels.len(), 2, "{}", print_program(&p));
    assert!(
        p.decisions.iter().any(|d| !d.fused && d.reason.contains("broadcast into a different row space")),
        "{}",
        print_program(&p)
    );
    // Reductions over different rows: separate kernels, the second reads the first's result.
    let g = graph1(DType::F32, &[6, 8], |x| (x - x.max(&[0], true)).exp().sum(&[1], false));
    let p = check(&g, &[rnd(DType::F32, &[6, 8], 3)]);
    assert_eq!(p.kernels.len(), 2, "{}", print_program(&p));
    // A stored elementwise output and a reduction of it: the pointwise kernel is absorbed.
    let g = Graph::new();
    let x = g.input("x", DType::F32, [5, 9]);
    let y = x.exp();
    g.output(&y);
    g.output(&y.sum(&[1], false));
    let p = check(&g.build().expect("build"), &[rnd(DType::F32, &[5, 9], 5)]);
    assert_eq!(p.kernels.len(), 1, "{}", print_program(&p));
    assert!(p.decisions.iter().any(|d| d.reason.starts_with("fused: pointwise kernel into reduction")));
    // log_softmax along a middle axis.
    let g = graph1(DType::F32, &[3, 5, 4], |x| x.log_softmax(1));
    let p = check(&g, &[rnd(DType::F32, &[3, 5, 4], 4)]);
    assert_eq!(p.kernels.len(), 1, "{}", print_program(&p));
}

/// A pre-norm residual stream (`h += f(norm(h))` per layer, as GPT-2): without materializing, each
/// layer's norm recomputed the stream from every earlier branch, its reads growing with depth. A
/// value with several users that reads more than 4 values is stored (the branch's product
/// epilogue stores it), so a kernel's argument count stays bounded as layers are added.
#[test]
fn a_residual_stream_is_materialized_not_recomputed_per_layer() {
    let g = Graph::new();
    let x = g.input("x", DType::F32, [6, 16]);
    let mut h = x.exp();
    let mut ins = vec![rnd(DType::F32, &[6, 16], 1)];
    for l in 0..8 {
        let w = g.input(&format!("w{l}"), DType::F32, [16, 16]);
        ins.push(rnd(DType::F32, &[16, 16], 10 + l));
        let n = &h - &h.mean(&[1], true);
        // A cheap branch: the stream's cost stays low, only its reads grow.
        h = &h + &n.matmul(&w);
    }
    g.output(&h.mean(&[1], true));
    let ir = g.build().expect("build");
    let most = |p: &Program| p.kernels.iter().map(|k| k.args.len()).max().unwrap_or(0);
    let p = check(&ir, &ins);
    assert!(most(&p) <= 7, "a kernel takes {} arguments:\n{}", most(&p), print_program(&p));
    assert!(
        p.decisions.iter().any(|d| d.reason.contains("and recomputing it reads 5 values")),
        "{}",
        print_program(&p)
    );
    // Without the rule the last norm reads the input and all eight products.
    let off = DefaultCostModel { many_reads: usize::MAX, ..DefaultCostModel::default() };
    let opts = ScheduleOptions { cost_model: std::sync::Arc::new(off), ..ScheduleOptions::default() };
    let p = check_with(&ir, &ins, &Capabilities::host(), &opts);
    assert!(most(&p) >= 10, "{}", print_program(&p));
}

// ------------------------------------------------------------------------------- movement

#[test]
fn movement_ops_are_index_arithmetic() {
    let g = graph1(DType::F32, &[4, 6], |x| x.reshape([3, 8]).transpose(0, 1).reshape([2, 12]).exp());
    let p = check(&g, &[rnd(DType::F32, &[4, 6], 1)]);
    assert_eq!(p.kernels.len(), 1);
    let g = graph1(DType::F32, &[5, 1, 3], |x| x.expand([2, 5, 4, 3]).permute(&[3, 0, 2, 1]).sin());
    check(&g, &[rnd(DType::F32, &[5, 1, 3], 2)]);
    let g = graph1(DType::F32, &[10, 9], |x| x.slice(0, 1, 9, 3).slice(1, 8, -100, -2).cos());
    check(&g, &[rnd(DType::F32, &[10, 9], 3)]);
    let g = graph1(DType::F32, &[2, 3, 4], |x| x.flatten(0, 1).unsqueeze(1).squeeze(&[1]) * 3.0);
    check(&g, &[rnd(DType::F32, &[2, 3, 4], 4)]);
}

#[test]
fn concat_and_pad() {
    let g = Graph::new();
    let a = g.input("a", DType::F32, [2, 3]);
    let b = g.input("b", DType::F32, [2, 1]);
    let c = g.input("c", DType::F32, [2, 4]);
    g.output(&(g.concat(&[&a, &b, &c.relu()], 1) * 2.0));
    g.output(&g.concat(&[&a, &a], 0));
    let ir = g.build().expect("build");
    let p = check(&ir, &[rnd(DType::F32, &[2, 3], 1), rnd(DType::F32, &[2, 1], 2), rnd(DType::F32, &[2, 4], 3)]);
    assert!(p.kernels.len() <= 2);
    for mode in [PadMode::Constant(1.5), PadMode::Reflect, PadMode::Edge, PadMode::Wrap] {
        let g = graph1(DType::F32, &[4, 5], |x| x.pad(&[(2, 1), (-1, 3)], mode).exp());
        check(&g, &[rnd(DType::F32, &[4, 5], 5)]);
        let g = graph1(DType::F32, &[6], |x| x.pad(&[(3, 4)], mode));
        check(&g, &[rnd(DType::F32, &[6], 6)]);
    }
    let g = graph1(DType::I32, &[3, 3], |x| x.pad(&[(1, 1), (0, 2)], PadMode::Constant(-7.0)));
    check(&g, &[rnd(DType::I32, &[3, 3], 7)]);
}

#[test]
fn gathers_with_negative_indices() {
    let g = Graph::new();
    let d = g.input("d", DType::F32, [5, 4]);
    let i = g.input("i", DType::I64, [2, 3]);
    g.output(&d.gather(0, &i).exp());
    g.output(&d.gather(1, &(i.binary_scalar(crate::ir::BinaryOp::Mod, 4.0))));
    let ir = g.build().expect("build");
    let idx = HostTensor::from_i64(DType::I64, vec![2, 3], &[0, -1, 4, -5, 2, 3]);
    check(&ir, &[rnd(DType::F32, &[5, 4], 1), idx]);
    let g = Graph::new();
    let d = g.input("d", DType::F32, [3, 4]);
    let i = g.input("i", DType::I32, [2, 4]);
    g.output(&d.gather_elements(0, &i));
    g.output(&d.gather_elements(1, &i.binary_scalar(crate::ir::BinaryOp::Sub, 1.0)));
    let idx = HostTensor::from_i64(DType::I32, vec![2, 4], &[0, 1, 2, -1, -3, 2, 1, 0]);
    check(&g.build().expect("build"), &[rnd(DType::F32, &[3, 4], 2), idx]);
}

// ------------------------------------------------------------------------------- matmul

#[test]
fn matmuls_strided_broadcast_and_copied() {
    // Plain, transposed operand (strides), batched with a broadcast operand.
    let g = graph2(DType::F32, &[7, 5], &[3, 5], |a, b| a.matmul(&b.transpose(0, 1)));
    let p = check(&g, &[rnd(DType::F32, &[7, 5], 1), rnd(DType::F32, &[3, 5], 2)]);
    assert_eq!(p.kernels.len(), 1);
    let g = graph2(DType::F32, &[2, 3, 4, 5], &[5, 6], |a, b| a.matmul(b));
    let p = check(&g, &[rnd(DType::F32, &[2, 3, 4, 5], 3), rnd(DType::F32, &[5, 6], 4)]);
    assert_eq!(p.kernels.len(), 1);
    // 1-D operands.
    let g = graph2(DType::F32, &[5], &[5, 3], |a, b| a.matmul(b));
    check(&g, &[rnd(DType::F32, &[5], 5), rnd(DType::F32, &[5, 3], 6)]);
    let g = graph2(DType::F32, &[2, 4, 5], &[5], |a, b| a.matmul(b));
    check(&g, &[rnd(DType::F32, &[2, 4, 5], 7), rnd(DType::F32, &[5], 8)]);
    // Partially broadcast batch: not affine in the batch index, so the operand is copied.
    let g = graph2(DType::F32, &[2, 1, 3, 4], &[1, 3, 4, 2], |a, b| a.matmul(b));
    let p = check(&g, &[rnd(DType::F32, &[2, 1, 3, 4], 9), rnd(DType::F32, &[1, 3, 4, 2], 10)]);
    assert!(p.decisions.iter().any(|d| d.reason.contains("not expressible by strides")), "{}", print_program(&p));
    // A computed operand is materialized; the epilogue (bias, activation, residual, scale) fuses.
    let g = Graph::new();
    let a = g.input("a", DType::F32, [6, 4]);
    let w = g.input("w", DType::F32, [5, 4]);
    let bias = g.input("bias", DType::F32, [5]);
    let r = g.input("r", DType::F32, [6, 5]);
    let y = ((a.exp().matmul(&w.transpose(0, 1)) + &bias).relu() + &r) * 0.5;
    g.output(&y);
    let p = check(
        &g.build().expect("build"),
        &[
            rnd(DType::F32, &[6, 4], 11),
            rnd(DType::F32, &[5, 4], 12),
            rnd(DType::F32, &[5], 13),
            rnd(DType::F32, &[6, 5], 14),
        ],
    );
    assert_eq!(p.kernels.len(), 2, "{}", print_program(&p));
    // Integer matmul.
    let g = graph2(DType::I32, &[3, 4], &[4, 2], |a, b| a.matmul(b));
    check(&g, &[rnd(DType::I32, &[3, 4], 15), rnd(DType::I32, &[4, 2], 16)]);
}

/// The matmul kernel of `p` (batch, m): the only `Matmul` body.
fn matmul_dims(p: &Program) -> (usize, usize) {
    let mut it = p.kernels.iter().filter_map(|k| match &k.body {
        KernelBody::Matmul(mm) => Some((mm.batch, mm.m)),
        _ => None,
    });
    let d = it.next().expect("a matmul kernel");
    assert!(it.next().is_none(), "one matmul kernel");
    d
}

#[test]
fn batched_matmuls_with_a_shared_second_operand_fold_into_one_product() {
    let fold = |p: &Program| p.decisions.iter().any(|d| d.reason.starts_with("layout: matmul"));
    // Contiguous rows: one product of 2 x 3 x 4 rows read through strides, no copy.
    let g = graph2(DType::F32, &[2, 3, 4, 5], &[5, 6], |a, b| a.matmul(b));
    let p = check(&g, &[rnd(DType::F32, &[2, 3, 4, 5], 1), rnd(DType::F32, &[5, 6], 2)]);
    assert_eq!(matmul_dims(&p), (1, 24), "{}", print_program(&p));
    assert_eq!(p.kernels.len(), 1);
    assert!(fold(&p), "{}", print_program(&p));
    // Sequence-first rows (nn.MultiheadAttention's input projection: [seq, batch, d] read from a
    // [batch, seq, d] tensor): 197 products of 2 rows become one of 394 rows after a copy.
    let g = graph2(DType::F32, &[2, 197, 16], &[16, 24], |x, w| x.transpose(0, 1).matmul(w));
    let p = check(&g, &[rnd(DType::F32, &[2, 197, 16], 3), rnd(DType::F32, &[16, 24], 4)]);
    assert_eq!(matmul_dims(&p), (1, 394), "{}", print_program(&p));
    assert!(p.decisions.iter().any(|d| d.reason.contains("copied first")), "{}", print_program(&p));
    // Many rows per product through a non-affine view: kept batched (a copy would cost a pass).
    let g = graph2(DType::F32, &[70, 2, 16], &[16, 8], |x, w| x.transpose(0, 1).matmul(w));
    let p = check(&g, &[rnd(DType::F32, &[70, 2, 16], 7), rnd(DType::F32, &[16, 8], 8)]);
    assert_eq!(matmul_dims(&p), (2, 70), "{}", print_program(&p));
    assert!(!fold(&p), "{}", print_program(&p));
    // A batched second operand: not folded.
    let g = graph2(DType::F32, &[3, 4, 5], &[3, 5, 6], |a, b| a.matmul(b));
    let p = check(&g, &[rnd(DType::F32, &[3, 4, 5], 9), rnd(DType::F32, &[3, 5, 6], 10)]);
    assert_eq!(matmul_dims(&p), (3, 4));
    // The epilogue still fuses after a fold.
    let g = graph2(DType::F32, &[2, 3, 4, 5], &[5, 6], |a, b| (a.matmul(b) + 1.0).relu());
    let p = check(&g, &[rnd(DType::F32, &[2, 3, 4, 5], 11), rnd(DType::F32, &[5, 6], 12)]);
    assert_eq!(p.kernels.len(), 1, "{}", print_program(&p));
}

// ------------------------------------------------------------------------------- windows

mod attention;
mod conv;
mod implicit;
mod prologue;
mod residual;

/// The default cost model with one decision changed per test: how convolutions are lowered, and
/// whether a buffer larger than `caps.max_binding_bytes` takes one binding per window of the limit
/// (rounded down to 256 bytes), as a backend with split bindings binds it.
#[derive(Debug, Default)]
pub(crate) struct TestModel {
    base: DefaultCostModel,
    convs: Convs,
    windows: bool,
}

/// How [`TestModel`] lowers convolutions.
#[derive(Debug, Default)]
pub(crate) enum Convs {
    /// As the default model.
    #[default]
    Default,
    /// Never to a matmul (the trait's default: window kernels).
    Windows,
    /// Always to a matmul where the scheduler can.
    Matmuls,
    /// Always to a matmul, and as an implicit GEMM where the scheduler can.
    Implicit,
    /// As `Implicit`, every implicit convolution's computed input stored channels-last.
    ChannelsLast,
    /// As `ChannelsLast`, but convolutions of fewer than 16 output channels per group (depthwise)
    /// stay window kernels, as the CUDA model keeps them.
    ThinWindows,
}

impl TestModel {
    pub(crate) fn convs(convs: Convs) -> ScheduleOptions {
        ScheduleOptions {
            cost_model: Arc::new(TestModel { convs, ..TestModel::default() }),
            ..ScheduleOptions::default()
        }
    }
}

impl CostModel for TestModel {
    fn name(&self) -> &str {
        "test"
    }
    fn base(&self) -> Option<&dyn CostModel> {
        Some(&self.base)
    }
    fn reduce_split(&self, rows: usize, len: usize, caps: &Capabilities) -> usize {
        match self.convs {
            // The two convolution models kept the trait's default split rule.
            Convs::Default => self.base.reduce_split(rows, len, caps),
            Convs::Windows | Convs::Matmuls | Convs::Implicit | Convs::ChannelsLast | Convs::ThinWindows => {
                TraitDefaults.reduce_split(rows, len, caps)
            }
        }
    }
    fn conv_as_matmul(&self, conv: &ConvShape, caps: &Capabilities) -> Result<String, String> {
        match self.convs {
            Convs::Default => self.base.conv_as_matmul(conv, caps),
            Convs::Windows => TraitDefaults.conv_as_matmul(conv, caps),
            Convs::Matmuls | Convs::Implicit | Convs::ChannelsLast => Ok("matmul: forced".into()),
            Convs::ThinWindows if conv.out_channels / conv.groups.max(1) < 16 => Err("window: thin".into()),
            Convs::ThinWindows => Ok("matmul: forced".into()),
        }
    }
    fn conv_implicit(&self, conv: &ConvShape, caps: &Capabilities) -> Result<String, String> {
        match self.convs {
            Convs::Implicit | Convs::ChannelsLast | Convs::ThinWindows => Ok("implicit GEMM: forced".into()),
            _ => TraitDefaults.conv_implicit(conv, caps),
        }
    }
    fn conv_channels_last(&self, conv: &ConvShape, caps: &Capabilities) -> Result<String, String> {
        match self.convs {
            Convs::ChannelsLast | Convs::ThinWindows => Ok("forced".into()),
            _ => TraitDefaults.conv_channels_last(conv, caps),
        }
    }
    fn bindings(&self, caps: &Capabilities, dtype: DType, numel: usize) -> usize {
        let window = caps.max_binding_bytes - caps.max_binding_bytes % 256;
        let bytes = (numel as u64).saturating_mul(dtype.size_bytes() as u64);
        if !self.windows || window == 0 { 1 } else { bytes.div_ceil(window).max(1) as usize }
    }
    fn fuse_attention(&self, attn: &AttentionShape, caps: &Capabilities) -> Result<String, String> {
        TraitDefaults.fuse_attention(attn, caps)
    }
}

/// Only the name: every decision is the trait's default (no base model).
#[derive(Debug)]
struct TraitDefaults;

impl CostModel for TraitDefaults {
    fn name(&self) -> &str {
        "trait-defaults"
    }
}

fn window_bindings() -> ScheduleOptions {
    ScheduleOptions {
        cost_model: Arc::new(TestModel { windows: true, ..TestModel::default() }),
        ..ScheduleOptions::default()
    }
}

#[test]
fn bindings_default_to_one_per_argument() {
    // Without a cost model that counts windows, a buffer over the binding size is one binding.
    let caps = Capabilities { max_binding_bytes: 1024, ..Capabilities::host() };
    assert_eq!(DefaultCostModel::default().bindings(&caps, DType::F32, 1 << 20), 1);
    let m = TestModel { windows: true, ..TestModel::default() };
    assert_eq!(m.bindings(&caps, DType::F32, 256), 1);
    assert_eq!(m.bindings(&caps, DType::F32, 257), 2);
    assert_eq!(m.bindings(&caps, DType::F16, 0), 1);
}

mod limits;

// ------------------------------------------------------------------------------- IR checks

#[test]
fn validation_rejects_out_of_range_indices() {
    let g = graph1(DType::F32, &[8], |x| x.exp());
    let p = schedule(&crate::passes::optimize(&g).expect("passes"), &Capabilities::host(), &ScheduleOptions::default())
        .expect("schedule");
    validate(&p).expect("valid");
    let mut bad = p.clone();
    if let crate::kernel::Expr::Load { index, .. } = &mut bad.kernels[0].exprs[0].expr {
        *index = crate::kernel::Index::var(crate::kernel::Var::Lane).add(crate::kernel::Index::Const(1));
    }
    assert!(validate(&bad).is_err());
    assert!(run_program(&bad, &[rnd(DType::F32, &[8], 1)]).is_err());
    let mut bad = p.clone();
    if let KernelBody::Pointwise { stores, .. } = &mut bad.kernels[0].body {
        stores[0].index =
            crate::kernel::Index::var(crate::kernel::Var::Lane).div(2).add(crate::kernel::Index::Const(5));
    }
    assert!(validate(&bad).is_err());
    // Wrong input types are errors, not panics.
    assert!(run_program(&p, &[rnd(DType::F32, &[9], 1)]).is_err());
    assert!(run_program(&p, &[]).is_err());
}

#[test]
fn rejects_composites_and_symbolic_shapes() {
    let g = graph1(DType::F32, &[4, 4], |x| x.softmax(-1));
    let e = schedule(&g, &Capabilities::host(), &ScheduleOptions::default()).expect_err("composite");
    assert!(e.to_string().contains("decompose"), "{e}");
    let gr = Graph::new();
    let x = gr.input("x", DType::F32, crate::shape::Shape(vec![crate::shape::Dim::sym("n"), 4.into()]));
    gr.output(&x.exp());
    let e = schedule(&gr.build().expect("build"), &Capabilities::host(), &ScheduleOptions::default())
        .expect_err("symbolic");
    assert!(e.to_string().contains("symbolic"), "{e}");
    let caps = Capabilities { dtypes: vec![DType::F32], ..Capabilities::host() };
    let g = graph1(DType::F16, &[4], |x| x.exp());
    assert!(schedule(&g, &caps, &ScheduleOptions::default()).is_err());
}

#[test]
fn interp_backend_runs_and_reports_sources() {
    let (g, inputs, p) = workload("softmax_8192x8192_f32");
    let be = InterpBackend::new();
    assert_eq!(be.name(), "interp");
    let mut exe = be.load(&p, Mode::Default).expect("load");
    let (out, times) = exe.run_timed(&inputs, 2).expect("run");
    assert_eq!(times.len(), 2);
    assert_eq!(times[0].len(), p.kernels.len());
    assert_close(&out[0], &crate::cpu::run(&g, &inputs).expect("cpu")[0], "backend");
    let src = exe.sources();
    assert_eq!(src.len(), 1);
    assert!(src[0].source.contains("k0_softmax"));
    // A program binding more buffers than the backend allows is refused at load.
    let (_, _, p) = workload("layernorm_gelu_8192x4096_f32");
    assert!(InterpBackend::with_caps(caps_with_bindings(3)).load(&p, Mode::Default).is_err());
}

#[test]
fn kernel_names_ops_and_cost_counts() {
    let (_, _, p) = workload("matmul_softmax_100_f32");
    let names: Vec<&str> = p.kernels.iter().map(|k| k.name.as_str()).collect();
    assert_eq!(names, ["k0_matmul", "k1_softmax"]);
    let KernelBody::Matmul(m) = &p.kernels[0].body else { panic!("not a matmul") };
    assert_eq!(p.kernels[0].flops, 2.0 * (m.m * m.n * m.k) as f64);
    let bytes: usize = p.kernels[0].args.iter().map(|a| a.numel * 4).sum();
    assert_eq!(p.kernels[0].bytes, bytes as f64);
    assert!(p.decisions.iter().all(|d| !d.kernels.is_empty() || d.reason.starts_with("materialized")));
}

// ------------------------------------------------------------------------------- snapshots

fn snapshot_of(name: &str) -> String {
    let w = workloads::get(name).expect("workload");
    let g = w.build(Scale::Reduced).expect("build");
    let ir = crate::passes::optimize(&g).expect("passes");
    print_program(&schedule(&ir, &Capabilities::host(), &ScheduleOptions::default()).expect("schedule"))
}

#[test]
fn snapshot_softmax() {
    insta::assert_snapshot!(snapshot_of("softmax_8192x8192_f32"));
}

#[test]
fn snapshot_layernorm_gelu() {
    insta::assert_snapshot!(snapshot_of("layernorm_gelu_8192x4096_f32"));
}

#[test]
fn snapshot_add_relu_mul() {
    insta::assert_snapshot!(snapshot_of("add_relu_mul_10M_f32"));
}

#[test]
fn snapshot_matmul_softmax() {
    insta::assert_snapshot!(snapshot_of("matmul_softmax_100_f32"));
}

// ------------------------------------------------------------------------------- random graphs

mod random;

#[test]
fn very_long_chains_do_not_overflow() {
    let g = graph1(DType::F32, &[5], |x| {
        let mut y = x.clone();
        for i in 0..20000 {
            y = if i % 2 == 0 { y.sin() } else { &y + 0.25 };
        }
        y
    });
    let p = check_with(&g, &[rnd(DType::F32, &[5], 1)], &Capabilities::host(), &ScheduleOptions::default());
    // The chain is cut into materialized pieces (bounding emission's recursion); the pieces
    // still fuse into one kernel, which stores only the output.
    assert!(p.decisions.iter().any(|d| d.reason.starts_with("materialized: inline depth limit")));
    assert_eq!(p.kernels.len(), 1);
    assert_eq!(p.buffers.len(), 2);
}
#[test]
fn full_scale_workloads_schedule_and_validate() {
    for w in workloads::all() {
        let ir = crate::passes::optimize(&w.build(Scale::Full).expect("build")).expect("passes");
        let reduced = crate::passes::optimize(&w.build(Scale::Reduced).expect("build")).expect("passes");
        for caps in [Capabilities::host(), caps_with_bindings(8)] {
            let p = schedule(&ir, &caps, &ScheduleOptions::default()).expect("schedule");
            validate(&p).unwrap_or_else(|e| panic!("{}: {e}", w.name));
            assert!(p.kernels.iter().all(|k| k.args.len() <= caps.max_bindings as usize));
            let q = schedule(&reduced, &caps, &ScheduleOptions::default()).expect("schedule");
            let names = |p: &Program| p.kernels.iter().map(|k| k.name.clone()).collect::<Vec<_>>();
            assert_eq!(names(&p), names(&q), "{}: same kernels at both scales", w.name);
        }
    }
}
