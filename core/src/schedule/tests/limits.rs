//! Graph outputs that are inputs, views, constants or shared; binding limits (split windows,
//! kernels split over the limit, horizontal fusion bounds, materialized shared producers); the
//! memory plan (slot reuse, best fit) as the interpreter honours it.

use super::*;

// ------------------------------------------------------------------------------- outputs

#[test]
fn outputs_that_are_inputs_views_constants_or_shared() {
    let g = Graph::new();
    let x = g.input("x", DType::F32, [3, 4]);
    g.output(&x);
    g.output(&x.transpose(0, 1));
    g.output(&g.constant(HostTensor::f32([2], vec![1.0, 2.0]).expect("tensor")));
    g.output(&g.scalar(DType::F32, 3.0));
    let y = x.exp();
    g.output(&y);
    g.output(&y);
    g.output(&(y.sum(&[1], false)));
    let ir = g.build().expect("build");
    let p = check(&ir, &[rnd(DType::F32, &[3, 4], 1)]);
    // Every output has its own buffer, distinct from the input's.
    let outs: std::collections::BTreeSet<u32> = p.outputs.iter().map(|o| o.buffer.0).collect();
    assert_eq!(outs.len(), 7);
    assert!(p.outputs.iter().all(|o| matches!(p.buffers[o.buffer.0 as usize].kind, BufferKind::Output(_))));
}

// ------------------------------------------------------------------------------- limits

#[test]
fn split_binding_windows_count_against_the_binding_limit() {
    // 8 inputs of 600 f32 (2400 bytes = 3 windows of 1024 bytes each): one fused kernel would bind
    // 27 windows; with 12 bindings allowed the scheduler splits it and every kernel fits.
    let g = Graph::new();
    let xs: Vec<Tensor> = (0..8).map(|i| g.input(&format!("x{i}"), DType::F32, [600])).collect();
    let mut acc = xs[0].clone();
    for x in &xs[1..] {
        acc = (&acc + x).relu();
    }
    g.output(&acc);
    let ir = g.build().expect("build");
    let ins: Vec<HostTensor> = (0..8).map(|i| rnd(DType::F32, &[600], i)).collect();
    let caps = Capabilities { max_bindings: 12, max_binding_bytes: 1024, ..Capabilities::host() };
    let p = check_with(&ir, &ins, &caps, &window_bindings());
    assert!(p.kernels.len() > 1, "{}", print_program(&p));
    for k in &p.kernels {
        let windows: u64 = k.args.iter().map(|a| ((a.numel * a.dtype.size_bytes()) as u64).div_ceil(1024)).sum();
        assert!(windows <= 12, "{} binds {windows} windows\n{}", k.name, print_program(&p));
    }
    // The default cost model counts one binding per argument: one kernel of 9 bindings.
    let p = check_with(&ir, &ins, &caps, &ScheduleOptions::default());
    assert_eq!(p.kernels.len(), 1, "{}", print_program(&p));
}

#[test]
fn binding_limit_splits_kernels() {
    // Eight inputs summed: one kernel would bind 9 buffers.
    let g = Graph::new();
    let xs: Vec<Tensor> = (0..8).map(|i| g.input(&format!("x{i}"), DType::F32, [37])).collect();
    let mut acc = xs[0].clone();
    for x in &xs[1..] {
        acc = (&acc + x).relu();
    }
    g.output(&acc);
    let ir = g.build().expect("build");
    let ins: Vec<HostTensor> = (0..8).map(|i| rnd(DType::F32, &[37], i)).collect();
    for limit in [4u32, 5, 8] {
        let p = check_with(&ir, &ins, &caps_with_bindings(limit), &ScheduleOptions::default());
        assert!(p.kernels.len() > 1, "limit {limit}\n{}", print_program(&p));
        assert!(p.decisions.iter().any(|d| d.reason.contains("binding limit")));
        // The backend with the same limit accepts it.
        let be = InterpBackend::with_caps(caps_with_bindings(limit));
        let mut exe = be.load(&p, Mode::Default).expect("load");
        let out = exe.run(&ins).expect("run");
        assert_close(&out[0], &crate::cpu::run(&ir, &ins).expect("cpu")[0], "backend");
    }
    let p = check_with(&ir, &ins, &Capabilities::host(), &ScheduleOptions::default());
    assert_eq!(p.kernels.len(), 1);
    // A wide concat of inputs is written box by box.
    let g = Graph::new();
    let xs: Vec<Tensor> = (0..7).map(|i| g.input(&format!("x{i}"), DType::F32, [2, i + 1])).collect();
    let refs: Vec<&Tensor> = xs.iter().collect();
    g.output(&g.concat(&refs, 1).exp());
    let ir = g.build().expect("build");
    let ins: Vec<HostTensor> = (0..7).map(|i| rnd(DType::F32, &[2, i + 1], i as u64)).collect();
    let p = check_with(&ir, &ins, &caps_with_bindings(4), &ScheduleOptions::default());
    assert!(p.decisions.iter().any(|d| d.reason.starts_with("split: concat")), "{}", print_program(&p));
    // A fused epilogue that would exceed the limit is refused with a named reason.
    let g = Graph::new();
    let x = g.input("x", DType::F32, [5, 6]);
    let ys: Vec<Tensor> = (0..3).map(|i| g.input(&format!("y{i}"), DType::F32, [5, 6])).collect();
    let s = x.softmax(-1);
    g.output(&(&(&(&s + &ys[0]) + &ys[1]) + &ys[2]));
    let ir = g.build().expect("build");
    let ins: Vec<HostTensor> = (0..4).map(|i| rnd(DType::F32, &[5, 6], i)).collect();
    let p = check_with(&ir, &ins, &caps_with_bindings(4), &ScheduleOptions::default());
    assert!(p.decisions.iter().any(|d| d.reason.starts_with("refused: would bind")), "{}", print_program(&p));
    // Fewer than 4 bindings cannot work at all.
    assert!(
        schedule(&crate::passes::optimize(&ir).expect("passes"), &caps_with_bindings(3), &ScheduleOptions::default())
            .is_err()
    );
}

#[test]
fn max_group_nodes_limits_horizontal_fusion() {
    let g = Graph::new();
    let x = g.input("x", DType::F32, [11]);
    for i in 0..6 {
        g.output(&(&x * (i as f64 + 1.0)).exp());
    }
    let ir = g.build().expect("build");
    let ins = [rnd(DType::F32, &[11], 1)];
    let p = check_with(&ir, &ins, &Capabilities::host(), &ScheduleOptions::default());
    assert_eq!(p.kernels.len(), 1, "{}", print_program(&p));
    let opts = ScheduleOptions { max_group_nodes: 2, ..ScheduleOptions::default() };
    let p = check_with(&ir, &ins, &Capabilities::host(), &opts);
    assert_eq!(p.kernels.len(), 3, "{}", print_program(&p));
    assert!(p.decisions.iter().any(|d| d.reason == "refused: would exceed 2 nodes"));
}

#[test]
fn expensive_shared_producer_is_materialized() {
    // A costly value used by two reductions over different rows: materialized once.
    let g = graph1(DType::F32, &[6, 7], |x| {
        let mut e = x.clone();
        for _ in 0..8 {
            e = e.sin().exp();
        }
        e.sum(&[0], false).sum(&[0], false) + e.sum(&[1], false).sum(&[0], false)
    });
    let p = check(&g, &[rnd(DType::F32, &[6, 7], 1)]);
    assert!(p.decisions.iter().any(|d| d.reason.contains("users and expensive")), "{}", print_program(&p));
}

// ------------------------------------------------------------------------------- memory

#[test]
fn memory_plan_reuses_slots_and_interp_honours_it() {
    let g = graph1(DType::F32, &[64, 33], |x| {
        let mut y = x.clone();
        for _ in 0..6 {
            y = (&y - y.max(&[1], true)).exp();
        }
        y
    });
    let ins = [rnd(DType::F32, &[64, 33], 1)];
    let p = check_with(&g, &ins, &Capabilities::host(), &ScheduleOptions::eager());
    let inter = p.buffers.iter().filter(|b| matches!(b.kind, BufferKind::Intermediate)).count();
    assert!(inter >= 10);
    assert!(p.memory.slots.len() < inter, "{}", print_program(&p));
    assert!(p.memory.peak_bytes < p.memory.unplanned_bytes);
    // Breaking the plan (everything in one slot) corrupts the result: the interpreter really
    // uses the slots.
    let mut bad = p.clone();
    let big = bad.memory.slots.iter().copied().max().unwrap_or(0);
    bad.memory.slots = vec![big];
    for s in bad.memory.slot_of.iter_mut().flatten() {
        *s = 0;
    }
    let out = run_program(&bad, &ins);
    let want = crate::cpu::run(&g, &ins).expect("cpu");
    match out {
        Err(_) => {}
        Ok(o) => assert!(o[0].tolerance_ratio(&want[0], 1e-4, 1e-5) > 1.0, "a collapsed plan went unnoticed"),
    }
}

#[test]
fn plan_memory_best_fit() {
    use crate::kernel::{Access, BufferDecl, BufferId, Kernel, KernelArg};
    let buf = |i: u32, numel: usize| BufferDecl {
        id: BufferId(i),
        dtype: DType::F32,
        numel,
        kind: BufferKind::Intermediate,
        node: None,
    };
    let buffers = vec![buf(0, 100), buf(1, 10), buf(2, 50), buf(3, 10)];
    let k = |reads: &[u32], writes: &[u32]| Kernel {
        name: "k".into(),
        args: reads
            .iter()
            .map(|&b| (b, Access::Read))
            .chain(writes.iter().map(|&b| (b, Access::Write)))
            .map(|(b, access)| KernelArg {
                buffer: BufferId(b),
                dtype: DType::F32,
                numel: buffers[b as usize].numel,
                access,
            })
            .collect(),
        exprs: vec![],
        body: KernelBody::Pointwise { numel: 0, stores: vec![] },
        origins: vec![],
        ops: vec![],
        flops: 0.0,
        bytes: 0.0,
    };
    // b0 and b1 live together; b2 after b0 dies reuses b0's slot (best fit: 400 B >= 200 B);
    // b3 after b1 dies takes b1's 40 B slot rather than the bigger one.
    let kernels = vec![k(&[], &[0, 1]), k(&[0], &[]), k(&[1], &[2]), k(&[2], &[3]), k(&[3], &[])];
    let plan = plan_memory(&buffers, &kernels);
    assert_eq!(plan.slot_of, vec![Some(0), Some(1), Some(0), Some(1)]);
    assert_eq!(plan.slots, vec![400, 40]);
    assert_eq!(plan.peak_bytes, 440);
    assert_eq!(plan.unplanned_bytes, 680);
}
