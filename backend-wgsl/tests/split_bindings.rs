//! Split bindings on the device: kernel arguments larger than the storage binding limit are bound as
//! several windows of one buffer (see `sinter_wgsl::render`).
//!
//! Two kinds of tests, all with outputs poisoned before the run:
//!
//! * **Artificial limit**: a device created with a tiny `max_storage_buffer_binding_size`
//!   (`DeviceOptions::max_binding_bytes`, the programmatic form of `SINTER_WGSL_MAX_BINDING`), so wgpu
//!   itself checks every window against it, runs every kernel kind (pointwise with and without `vec4`,
//!   every reduce strategy, arg reductions with 64-bit and packed outputs, atomic sub-word stores, both
//!   window selectors, matmul) on small tensors of awkward sizes, compared with the kernel-IR interpreter
//!   or the CPU reference.
//! * **Real limit**: tensors larger than the adapter's own limit (128 MiB on lavapipe): a broadcast
//!   pointwise kernel, a row softmax, a transpose, an f16 kernel and a matmul whose B operand exceeds it,
//!   compared with the CPU reference. On an adapter with a larger limit they still run and check results,
//!   without splitting.
//!
//! Without an adapter each test prints `SKIPPED` and returns; with `SINTER_REQUIRE_GPU=1` a missing adapter
//! fails instead.

mod common;

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use common::*;
use sinter_core::backend::{Backend, Executable, Mode};
use sinter_core::kernel::{Program, ReduceStrategy, interp};
use sinter_core::prelude::*;
use sinter_core::schedule::{ScheduleOptions, schedule};
use sinter_wgsl::WgslBackend;

/// A backend whose device has a storage binding limit of at most `limit` bytes (`None`: the adapter's),
/// shared per limit; `None` (after printing why) when there is no adapter.
fn backend(limit: Option<u64>) -> Option<&'static WgslBackend> {
    type Backends = HashMap<Option<u64>, Result<&'static WgslBackend, String>>;
    static BACKENDS: OnceLock<Mutex<Backends>> = OnceLock::new();
    let mut map = BACKENDS.get_or_init(|| Mutex::new(HashMap::new())).lock().unwrap_or_else(|e| e.into_inner());
    let b = map.entry(limit).or_insert_with(|| open_backend("split-test", limit).map(|b| &*Box::leak(Box::new(b))));
    or_skip(b.as_ref().copied().map_err(String::as_str))
}

/// Runs `p` with outputs poisoned first; returns the outputs and how many kernel arguments were split.
fn gpu_run(b: &WgslBackend, p: &Program, inputs: &[HostTensor], mode: Mode) -> (Vec<HostTensor>, usize) {
    let mut exe = b.load_wgsl(p, mode).unwrap_or_else(|e| panic!("load failed: {e}"));
    exe.poison(0xff).expect("poison");
    let out = exe.run(inputs).unwrap_or_else(|e| panic!("run failed: {e}"));
    let split = exe
        .rendered()
        .iter()
        .map(|r| {
            let mut args: Vec<usize> = r.bindings.iter().map(|b| b.arg).collect();
            let n = args.len();
            args.dedup();
            n - args.len()
        })
        .sum();
    (out, split)
}

/// Runs a hand-built program on the device with a binding limit of `limit` bytes and compares it with
/// the kernel-IR interpreter; asserts some argument was split when `must_split`.
fn check_program(limit: u64, p: &Program, inputs: &[HostTensor], must_split: bool, what: &str) {
    let Some(b) = backend(Some(limit)) else { return };
    let want = interp::run_program(p, inputs).expect("interp");
    for mode in [Mode::Default, Mode::ReduceOverhead] {
        let (got, split) = gpu_run(b, p, inputs, mode);
        assert_close(&got, &want, &format!("{what} (limit {limit}, {mode:?})"));
        assert!(!must_split || split > 0, "{what} (limit {limit}): no argument was split");
    }
}

#[test]
fn the_binding_limit_can_be_lowered() {
    let Some(b) = backend(Some(1000)) else { return };
    // Rounded down to a multiple of 4, and visible to the renderer and the scheduler.
    assert_eq!(b.device().max_binding_size(), 1000);
    assert_eq!(b.wgsl_caps().max_binding_bytes, 1000);
    assert_eq!(b.caps().max_binding_bytes, 1000);
    let Some(b) = backend(Some(1001)) else { return };
    assert_eq!(b.device().max_binding_size(), 1000);
    // It never rises above the adapter's.
    let Some(real) = backend(None) else { return };
    let Some(b) = backend(Some(u64::MAX)) else { return };
    assert_eq!(b.device().max_binding_size(), real.device().max_binding_size());
}

#[test]
fn pointwise_across_windows() {
    // (limit, rows, cols): 2 to 10 windows per argument, vec4 and scalar accesses, the broadcast bias
    // split too where it is large.
    let cases = [(64, 1, 1), (64, 7, 3), (1024, 1, 1023), (8192, 3, 4097), (8192, 5, 4096), (1024, 33, 64)];
    for d in [DType::F32, DType::F16, DType::BF16] {
        for (limit, rows, cols) in cases {
            let p = add_relu_mul(rows, cols, d);
            let inputs = vec![random(d, &[rows, cols], 1, -2.0, 2.0), random(d, &[cols], 2, -1.0, 1.0)];
            let must = rows * cols * d.size_bytes() > limit as usize;
            check_program(limit, &p, &inputs, must, &format!("add_relu_mul {d} {rows}x{cols}"));
        }
    }
}

#[test]
fn softmax_across_windows() {
    let cases = [(64, 1, 1), (64, 7, 7), (1024, 3, 1023), (4096, 2, 4097), (64, 4, 12)];
    for d in [DType::F32, DType::BF16, DType::F16] {
        for strategy in [ReduceStrategy::Persistent, ReduceStrategy::Looped, ReduceStrategy::ThreadPerRow] {
            for (limit, rows, len) in cases {
                let p = softmax(rows, len, d, strategy);
                let inputs = vec![random(d, &[rows, len], 3, -4.0, 4.0)];
                let must = rows * len * d.size_bytes() > limit as usize;
                check_program(limit, &p, &inputs, must, &format!("softmax {d} {strategy:?} {rows}x{len}"));
            }
        }
    }
}

#[test]
fn arg_reductions_with_wide_and_packed_arguments_across_windows() {
    for d in [DType::F32, DType::I32, DType::BF16, DType::U8] {
        for strategy in [ReduceStrategy::Persistent, ReduceStrategy::Looped, ReduceStrategy::ThreadPerRow] {
            for (limit, rows, len) in [(1024, 300, 7), (1024, 3, 1024), (4096, 2, 4097)] {
                let p = arg_sum(d, rows, len, strategy);
                let inputs = vec![random(d, &[rows, len], 31, 0.0, 20.0)];
                check_program(limit, &p, &inputs, true, &format!("arg/sum {d} {strategy:?} {rows}x{len}"));
            }
        }
    }
}

#[test]
fn sub_word_outputs_across_windows() {
    // Sub-word outputs written 4 at a time (whole words) and element by element in reverse (atomic
    // read-modify-write through the and_/or_ accessors).
    for d in [DType::I8, DType::U16, DType::Bool, DType::BF16, DType::I16, DType::F16] {
        for (limit, n) in [(32, 1), (32, 7), (64, 100), (2048, 1023), (2048, 4097)] {
            let p = sub_word(n, d);
            let inputs = vec![random(DType::F32, &[n], 41, -100.0, 100.0)];
            check_program(limit, &p, &inputs, n * 4 > limit as usize, &format!("sub-word {d} n={n}"));
        }
    }
}

#[test]
fn matmul_across_windows() {
    for d in [DType::F32, DType::BF16, DType::F16] {
        for (limit, m, n, k) in [(64, 7, 9, 13), (4096, 65, 130, 33), (4096, 100, 96, 72), (4096, 64, 64, 64)] {
            for b_t in [false, true] {
                let p = matmul_bias_relu(m, n, k, d, b_t);
                let inputs = matmul_inputs(m, n, k, d, b_t);
                check_program(limit, &p, &inputs, true, &format!("matmul {d} {m}x{n}x{k} b_t={b_t}"));
            }
        }
    }
}

/// Optimizes and schedules `g` for `b`, runs it with outputs poisoned, and compares with the CPU reference.
/// Returns how many kernel arguments were split. `tol` overrides the dtype's `(rtol, atol)`.
fn check_graph(b: &WgslBackend, g: &Graph, inputs: &[HostTensor], what: &str, tol: Option<(f64, f64)>) -> usize {
    let ir = g.build().expect("build");
    let want = sinter_core::cpu::run(g, inputs).expect("cpu reference");
    let opt = sinter_core::passes::optimize(&ir).expect("optimize");
    let p = schedule(&opt, b.caps(), &ScheduleOptions::default()).unwrap_or_else(|e| panic!("{what}: schedule: {e}"));
    let (got, split) = gpu_run(b, &p, inputs, Mode::Default);
    assert_close_tol(&got, &want, what, tol);
    split
}

#[test]
fn permutes_and_scheduled_graphs_across_windows() {
    let Some(b) = backend(Some(2048)) else { return };
    // A transpose (non-contiguous reads hopping across windows) with a broadcast add.
    let (r, c) = (37, 129);
    let g = Graph::new();
    let x = g.input("x", DType::F32, [r, c]);
    let bias = g.input("bias", DType::F32, [r]);
    g.output(&(&x.transpose(0, 1) + &bias).relu());
    let inputs = vec![random(DType::F32, &[r, c], 7, -2.0, 2.0), random(DType::F32, &[r], 8, -1.0, 1.0)];
    assert!(check_graph(b, &g, &inputs, "transpose + bias", None) > 0);
    // A 3-D permute of f16 with a reduction over the permuted middle axis.
    let g = Graph::new();
    let x = g.input("x", DType::F16, [6, 35, 17]);
    let y = x.permute(&[2, 0, 1]);
    g.output(&y);
    g.output(&y.sum(&[1], false));
    let inputs = vec![random(DType::F16, &[6, 35, 17], 9, -2.0, 2.0)];
    assert!(check_graph(b, &g, &inputs, "permute + sum", None) > 0);
    // Softmax and layer norm of rows larger than a window, through the scheduler.
    let g = Graph::new();
    let x = g.input("x", DType::F32, [5, 600]);
    let w = g.input("w", DType::F32, [600]);
    let bb = g.input("b", DType::F32, [600]);
    g.output(&x.softmax(-1));
    g.output(&x.layer_norm(&w, &bb, 1e-5));
    let inputs = vec![
        random(DType::F32, &[5, 600], 10, -3.0, 3.0),
        random(DType::F32, &[600], 11, 0.5, 1.5),
        random(DType::F32, &[600], 12, -0.5, 0.5),
    ];
    assert!(check_graph(b, &g, &inputs, "softmax + layer_norm", None) > 0);
}

#[test]
fn scheduled_workloads_across_windows() {
    // Every workload at reduced scale, on the smallest binding limit whose windows fit the adapter's
    // binding count: the same program must give bit-identical outputs split and unsplit (the unsplit
    // kernels are checked against the interpreter and the references in `wgsl_run.rs`; the interpreter
    // takes 10 s on ResNet).
    use sinter_core::workloads::{self, Scale};
    let Some(whole) = backend(None) else { return };
    for w in workloads::all() {
        let g = w.build(Scale::Reduced).expect("build");
        let opt = sinter_core::passes::optimize(&g).expect("optimize");
        // fp8 workloads run with graph breaks on WGSL (`graph_breaks.rs`), never as one program.
        if let Some(whole) = backend(None)
            && !sinter_core::partition::detect(&opt, whole.caps()).is_empty()
        {
            continue;
        }
        let inputs = w.inputs(Scale::Reduced, 5);
        let mut checked = false;
        for limit in [4u64 << 10, 16 << 10, 64 << 10, 512 << 10] {
            let Some(b) = backend(Some(limit)) else { return };
            // The scheduler counts windows against the binding count: a kernel that cannot fit at this
            // limit is refused there (as the renderer would); try a larger limit.
            let p = match schedule(&opt, b.caps(), &ScheduleOptions::default()) {
                Ok(p) => p,
                Err(e) if e.to_string().contains("would bind") => continue,
                Err(e) => panic!("{}: {e}", w.name),
            };
            let fits = p.kernels.iter().all(|k| match sinter_wgsl::render::render(k, &p, b.wgsl_caps()) {
                Err(e) if e.to_string().contains("per shader stage") => false,
                Err(e) => panic!("{} (limit {limit}): {e}", w.name),
                Ok(_) => true,
            });
            if !fits {
                continue;
            }
            let (want, unsplit) = gpu_run(whole, &p, &inputs, Mode::Default);
            let (got, split) = gpu_run(b, &p, &inputs, Mode::ReduceOverhead);
            for (i, (g, r)) in got.iter().zip(&want).enumerate() {
                assert!(
                    g.shape == r.shape && g.to_le_bytes() == r.to_le_bytes(),
                    "{} (limit {limit}): output {i} differs",
                    w.name
                );
            }
            assert_eq!(unsplit, 0, "{}: split at the adapter's limit", w.name);
            // Something is split unless every buffer fits one binding at this limit (the chain's
            // and the fused attention's buffers are all small at the reduced size).
            let fits_whole = p.buffers.iter().all(|b| (b.numel * b.dtype.size_bytes()) as u64 <= limit);
            assert!(split > 0 || fits_whole, "{} (limit {limit}): nothing split", w.name);
            checked = true;
            break;
        }
        assert!(checked, "{}: too many bindings at every limit tried", w.name);
    }
}

/// The adapter's real limit, or `None` (after saying why) when the adapter is missing.
fn real_backend() -> Option<&'static WgslBackend> {
    let b = backend(None)?;
    eprintln!(
        "binding limit {} bytes, max buffer {} bytes",
        b.device().max_binding_size(),
        b.device().limits().max_buffer_size
    );
    Some(b)
}

/// Asserts arguments were split when a tensor of `bytes` exceeds the adapter's binding limit.
fn expect_split(b: &WgslBackend, bytes: usize, split: usize, what: &str) {
    if bytes as u64 > b.device().max_binding_size() {
        assert!(split > 0, "{what}: {bytes} bytes exceed the binding limit but nothing was split");
    } else {
        eprintln!("note: {what}: {bytes} bytes fit one binding on this adapter; nothing to split");
    }
}

#[test]
fn pointwise_with_broadcast_over_160_mb() {
    let Some(b) = real_backend() else { return };
    let (rows, cols) = (40960, 1024); // 40M f32: 160 MiB
    let g = Graph::new();
    let x = g.input("x", DType::F32, [rows, cols]);
    let bias = g.input("bias", DType::F32, [cols]);
    g.output(&(&x + &bias).relu());
    let inputs = vec![random(DType::F32, &[rows, cols], 1, -2.0, 2.0), random(DType::F32, &[cols], 2, -1.0, 1.0)];
    let split = check_graph(b, &g, &inputs, "add + relu 40960x1024 f32", None);
    expect_split(b, rows * cols * 4, split, "add + relu");
}

#[test]
fn softmax_rows_over_the_limit() {
    let Some(b) = real_backend() else { return };
    let (rows, len) = (33000, 1024); // 135 MB in and out
    let g = Graph::new();
    let x = g.input("x", DType::F32, [rows, len]);
    g.output(&x.softmax(-1));
    let inputs = vec![random(DType::F32, &[rows, len], 3, -4.0, 4.0)];
    let split = check_graph(b, &g, &inputs, "softmax 33000x1024 f32", None);
    expect_split(b, rows * len * 4, split, "softmax");
}

#[test]
fn transpose_over_the_limit() {
    let Some(b) = real_backend() else { return };
    let n = 6000; // 144 MB in and out
    let g = Graph::new();
    let x = g.input("x", DType::F32, [n, n]);
    g.output(&(x.transpose(0, 1) * 2.0));
    let inputs = vec![random(DType::F32, &[n, n], 4, -2.0, 2.0)];
    let split = check_graph(b, &g, &inputs, "transpose 6000x6000 f32", None);
    expect_split(b, n * n * 4, split, "transpose");
}

#[test]
fn f16_over_the_limit() {
    let Some(b) = real_backend() else { return };
    // 139 MB of f16 read by a row reduction (an f16 output would make the CPU reference round 70M values
    // through software f16 at every node, which takes seconds).
    let (rows, cols) = (68000, 1024);
    let g = Graph::new();
    let x = g.input("x", DType::F16, [rows, cols]);
    g.output(&x.cast(DType::F32).sum(&[1], false));
    let inputs = vec![random(DType::F16, &[rows, cols], 5, -3.0, 3.0)];
    let split = check_graph(b, &g, &inputs, "sum over rows of 68000x1024 f16", None);
    expect_split(b, rows * cols * 2, split, "f16 row sum");
}

#[test]
fn matmul_with_b_over_the_limit() {
    let Some(b) = real_backend() else { return };
    let (m, k, n) = (8, 8192, 4100); // B: 134 MB
    let g = Graph::new();
    let a = g.input("a", DType::F32, [m, k]);
    let w = g.input("w", DType::F32, [k, n]);
    g.output(&a.matmul(&w));
    let inputs = vec![random(DType::F32, &[m, k], 7, -1.0, 1.0), random(DType::F32, &[k, n], 8, -1.0, 1.0)];
    // f32 sums of 8192 products in another order than the f64 reference: absolute error ~1e-4.
    let split = check_graph(b, &g, &inputs, "matmul 8x8192x4100 f32", Some((1e-3, 1e-3)));
    expect_split(b, k * n * 4, split, "matmul B");
}
