//! Issue 14: i64 on WGSL gives the CPU reference's values or a named refusal, never a wrapped 32-bit
//! number. Kernels whose 64-bit arithmetic may leave the 32-bit range are refused by the renderer
//! (`sinter_core::kernel::narrow`) and, with graph breaks on (the default), run on the CPU reference;
//! kernels that provably stay in range (Gather's index rule, ArgMax) stay on the device.

use sinter_core::backend::Backend;
use sinter_core::compile::{CompileOptions, CompiledGraph, compile};
use sinter_core::prelude::*;
use std::sync::Arc;

mod common;

/// The backend, or `None` (after printing why) when there is no adapter.
fn backend() -> Option<Arc<dyn Backend>> {
    common::owned_backend("i64")
}

fn opts() -> CompileOptions {
    CompileOptions { cache_dir: None, debug_dir: None, ..CompileOptions::default() }
}

fn i64s(shape: &[usize], v: &[i64]) -> HostTensor {
    HostTensor::from_i64(DType::I64, shape.to_vec(), v)
}

/// Compiles `g` on WGSL, runs it on host and on device inputs, and checks every output equals the CPU
/// reference's exactly (and `expect`, the value worked out by hand, for the first). Returns the
/// compiled graph for checks of its breaks.
fn exact(b: &Arc<dyn Backend>, g: &Graph, inputs: &[HostTensor], expect: &[i64]) -> CompiledGraph {
    let want = sinter_core::cpu::run(g, inputs).unwrap();
    assert_eq!(want[0].to_i64_vec(), expect, "the CPU reference itself");
    let c = compile(g, b.clone(), opts()).unwrap();
    let got = c.run(inputs).unwrap();
    assert_eq!(got, want, "breaks: {:?}", c.graph_breaks());
    let dev: Vec<_> = inputs.iter().map(|t| c.upload(t).unwrap()).collect();
    let out = c.run_device(&dev).unwrap();
    let host: Vec<HostTensor> = out.iter().map(|t| t.to_host().unwrap()).collect();
    assert_eq!(host, want);
    c
}

/// The graph-break reasons of `c`, one string.
fn reasons(c: &CompiledGraph) -> String {
    c.graph_breaks().iter().map(|b| b.to_string()).collect::<Vec<_>>().join("\n")
}

const P30: i64 = 1 << 30;

#[test]
fn issue_14_add_of_two_i64_near_2_pow_30() {
    let Some(b) = backend() else { return };
    let g = Graph::new();
    let x = g.input("x", DType::I64, [1]);
    let y = g.input("y", DType::I64, [1]);
    g.output(&(&x + &y));
    let c = exact(&b, &g, &[i64s(&[1], &[P30 + 5]), i64s(&[1], &[P30 + 7])], &[2147483660]);
    let r = reasons(&c);
    assert!(r.contains("i64 add") && r.contains("may overflow 32-bit arithmetic"), "{r}");
    // Graph breaks off: a named refusal, not -2147483636.
    let e = compile(&g, b, CompileOptions { graph_breaks: false, ..opts() }).err().expect("compiled").to_string();
    assert!(e.contains("i64 add") && e.contains("may overflow 32-bit arithmetic"), "{e}");
}

#[test]
fn issue_14_reduce_sum_of_four_2_pow_30() {
    let Some(b) = backend() else { return };
    let g = Graph::new();
    let x = g.input("x", DType::I64, [4]);
    g.output(&x.sum(&[0], false));
    let c = exact(&b, &g, &[i64s(&[4], &[P30; 4])], &[4294967296]);
    assert!(reasons(&c).contains("i64 sum reduction"), "{}", reasons(&c));
}

/// The siblings: every op whose i64 result can leave 32 bits from 32-bit inputs.
#[test]
fn siblings_give_the_reference_values() {
    let Some(b) = backend() else { return };
    let min = i64::from(i32::MIN);
    type Build = fn(&Tensor, &Tensor) -> Tensor;
    // (op, f, x, y, f(x, y), f(2, 3)): x and y in 32 bits, f(x, y) not.
    let cases: [(&str, Build, i64, i64, i64, i64); 6] = [
        ("mul", |x, y| x * y, 65536, 65536, 1 << 32, 6),
        ("sub", |x, y| x - y, min, 1, min - 1, -1),
        ("div", |x, y| x / y, min, -1, -min, 0),
        ("pow", |x, y| x.pow(y), 3, 21, 10460353203, 8),
        ("neg", |x, _| x.neg(), min, 0, -min, -2),
        ("abs", |x, _| x.abs(), min, 0, -min, 2),
    ];
    for (op, f, a, bv, want, small) in cases {
        let g = Graph::new();
        let x = g.input("x", DType::I64, [2]);
        let y = g.input("y", DType::I64, [2]);
        g.output(&f(&x, &y));
        let c = exact(&b, &g, &[i64s(&[2], &[a, 2]), i64s(&[2], &[bv, 3])], &[want, small]);
        assert!(reasons(&c).contains(&format!("i64 {op}")), "{op}: {}", reasons(&c));
    }
    // ReduceProd and a cumulative sum (a shifted add, as CumSum's scan steps are).
    let g = Graph::new();
    let x = g.input("x", DType::I64, [3]);
    g.output(&x.prod(&[0], false));
    exact(&b, &g, &[i64s(&[3], &[P30, 4, 2])], &[P30 * 8]);
    let g = Graph::new();
    let x = g.input("x", DType::I64, [3]);
    let shifted = x.pad(&[(1, 0)], PadMode::Constant(0.0)).slice(0, 0, 3, 1);
    g.output(&(&x + &shifted));
    exact(&b, &g, &[i64s(&[3], &[P30, P30 * 2 - 1, 5])], &[P30, P30 * 3 - 1, P30 * 2 + 4]);
}

/// Common i64 paths stay on the device: Gather with (negative) i64 indices, ArgMax, comparisons,
/// index arithmetic that stays in range.
#[test]
fn in_range_i64_paths_stay_on_wgsl() {
    let Some(b) = backend() else { return };
    let g = Graph::new();
    let data = g.input("data", DType::F32, [5, 3]);
    let idx = g.input("idx", DType::I64, [4]);
    let rows = data.gather(0, &idx);
    let arg = rows.argmax(1, false);
    g.output(&arg);
    g.output(&(&idx.cast(DType::F32) * 2.0));
    g.output(&idx.lt(&g.scalar(DType::I64, 0.0)));
    let d = HostTensor::from_f64(DType::F32, vec![5, 3], &(0..15).map(|i| ((i * 7) % 11) as f64).collect::<Vec<_>>());
    let i = i64s(&[4], &[0, -1, 2, -5]);
    let c = exact(&b, &g, &[d, i], &[1, 2, 0, 1]);
    assert!(c.graph_breaks().is_empty(), "{}", reasons(&c));
    assert_eq!(c.segments(), [("s0".to_string(), true)]);
}
