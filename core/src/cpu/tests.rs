//! Unit tests of the CPU reference: hand-computed values per op family, identities, independent
//! naive implementations (conv, matmul, attention), values recorded from PyTorch 2.11 (pooling
//! with `ceil_mode`, negative pads, GELU), error paths, and precision emulation.

use super::*;
use crate::dtype::DType;
use crate::ir::{ArgOp, BinaryOp, Op, PadMode, PoolKind, ReduceOp, SliceDim, UnaryOp, Window2d};
use crate::shape::Dim;
use crate::tensor::{HostTensor, TensorData};
use crate::trace::{Graph, Tensor};
use std::collections::HashMap;

fn t64(shape: &[usize], v: &[f64]) -> HostTensor {
    HostTensor::from_f64(DType::F64, shape.to_vec(), v)
}

fn ti(dtype: DType, shape: &[usize], v: &[i64]) -> HostTensor {
    HostTensor::from_i64(dtype, shape.to_vec(), v)
}

fn seq(n: usize) -> Vec<f64> {
    (0..n).map(|i| i as f64).collect()
}

fn rand(shape: &[usize], seed: u64) -> HostTensor {
    HostTensor::random(DType::F64, shape.to_vec(), seed, -2.0, 2.0)
}

/// Runs a graph whose single output is `y`.
fn run1(g: &Graph, y: &Tensor, ins: &[HostTensor]) -> HostTensor {
    g.output(y);
    let mut r = run(g, ins).unwrap_or_else(|e| panic!("run failed: {e}"));
    assert_eq!(r.len(), 1);
    r.remove(0)
}

/// Elementwise closeness with NaN == NaN and a relative+absolute tolerance.
#[track_caller]
fn close(got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "lengths differ: {got:?} vs {want:?}");
    for (i, (&a, &b)) in got.iter().zip(want).enumerate() {
        let ok = (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= tol * (1.0 + b.abs());
        assert!(ok, "element {i}: got {a}, want {b}\n got {got:?}\nwant {want:?}");
    }
}

/// One unary op on an f64 vector.
fn unary_f64(op: UnaryOp, x: &[f64]) -> HostTensor {
    let g = Graph::new();
    let a = g.input("x", DType::F64, [x.len()]);
    run1(&g, &a.unary(op), &[t64(&[x.len()], x)])
}

#[test]
fn unary_float_values() {
    let nan = f64::NAN;
    let inf = f64::INFINITY;
    let e = std::f64::consts::E;
    let pi = std::f64::consts::PI;
    let cases: Vec<(UnaryOp, Vec<f64>, Vec<f64>)> = vec![
        (UnaryOp::Neg, vec![1.0, -2.0], vec![-1.0, 2.0]),
        (UnaryOp::Abs, vec![-1.5, 2.0], vec![1.5, 2.0]),
        (UnaryOp::Exp, vec![0.0, 1.0], vec![1.0, e]),
        (UnaryOp::Log, vec![1.0, e, 0.0, -1.0], vec![0.0, 1.0, -inf, nan]),
        (UnaryOp::Sqrt, vec![4.0, 2.0], vec![2.0, std::f64::consts::SQRT_2]),
        (UnaryOp::Rsqrt, vec![4.0], vec![0.5]),
        (UnaryOp::Sin, vec![pi / 2.0], vec![1.0]),
        (UnaryOp::Cos, vec![0.0], vec![1.0]),
        (UnaryOp::Tan, vec![pi / 4.0], vec![1.0]),
        (UnaryOp::Asin, vec![1.0], vec![pi / 2.0]),
        (UnaryOp::Acos, vec![1.0], vec![0.0]),
        (UnaryOp::Atan, vec![1.0], vec![pi / 4.0]),
        (UnaryOp::Sinh, vec![1.0], vec![1.1752011936438014]),
        (UnaryOp::Cosh, vec![0.0], vec![1.0]),
        (UnaryOp::Asinh, vec![1.0], vec![0.881373587019543]),
        (UnaryOp::Acosh, vec![1.0], vec![0.0]),
        (UnaryOp::Atanh, vec![0.5], vec![0.5493061443340549]),
        (UnaryOp::Tanh, vec![0.5], vec![0.46211715726000974]),
        (UnaryOp::Sigmoid, vec![0.0, -2.0, 800.0, -800.0], vec![0.5, 0.11920292202211755, 1.0, 0.0]),
        (UnaryOp::Erf, vec![0.5, -1.0], vec![0.5204998778130465, -0.8427007929497149]),
        (UnaryOp::Relu, vec![-1.0, 0.0, 2.0, nan], vec![0.0, 0.0, 2.0, nan]),
        (UnaryOp::Floor, vec![-1.5, 1.5], vec![-2.0, 1.0]),
        (UnaryOp::Ceil, vec![-1.5, 1.5], vec![-1.0, 2.0]),
        (UnaryOp::Round, vec![0.5, 1.5, 2.5, -0.5, -2.5, 2.6], vec![0.0, 2.0, 2.0, -0.0, -2.0, 3.0]),
        (UnaryOp::Sign, vec![-2.0, 0.0, 3.0, nan], vec![-1.0, 0.0, 1.0, nan]),
        (UnaryOp::Reciprocal, vec![4.0, 0.0], vec![0.25, inf]),
    ];
    for (op, x, want) in cases {
        let got = unary_f64(op, &x);
        assert_eq!(got.dtype(), DType::F64);
        close(&got.to_f64_vec(), &want, 1e-15);
    }
    let x = [1.0, nan, inf, -inf];
    let isnan = unary_f64(UnaryOp::IsNan, &x);
    assert_eq!(isnan.data, TensorData::Bool(vec![false, true, false, false]));
    let isinf = unary_f64(UnaryOp::IsInf, &x);
    assert_eq!(isinf.data, TensorData::Bool(vec![false, false, true, true]));
}

fn unary_int(op: UnaryOp, dtype: DType, x: &[i64]) -> Vec<i64> {
    let g = Graph::new();
    let a = g.input("x", dtype, [x.len()]);
    let y = run1(&g, &a.unary(op), &[ti(dtype, &[x.len()], x)]);
    assert_eq!(y.dtype(), dtype);
    y.to_i64_vec()
}

#[test]
fn unary_int_values_wrap() {
    assert_eq!(unary_int(UnaryOp::Neg, DType::I8, &[-128, 5]), vec![-128, -5]);
    assert_eq!(unary_int(UnaryOp::Abs, DType::I8, &[-128, -3]), vec![-128, 3]);
    assert_eq!(unary_int(UnaryOp::Relu, DType::I32, &[-3, 4]), vec![0, 4]);
    assert_eq!(unary_int(UnaryOp::Sign, DType::I64, &[-5, 0, 7]), vec![-1, 0, 1]);
    assert_eq!(unary_int(UnaryOp::Neg, DType::U8, &[1, 0]), vec![255, 0]);
    assert_eq!(unary_int(UnaryOp::Round, DType::I16, &[-7]), vec![-7]);
    assert_eq!(unary_int(UnaryOp::Not, DType::Bool, &[1, 0]), vec![0, 1]);
}

fn binary_f64(op: BinaryOp, a: (&[usize], &[f64]), b: (&[usize], &[f64])) -> HostTensor {
    let g = Graph::new();
    let x = g.input("a", DType::F64, a.0);
    let y = g.input("b", DType::F64, b.0);
    run1(&g, &x.binary(op, &y), &[t64(a.0, a.1), t64(b.0, b.1)])
}

#[test]
fn binary_float_broadcasting_and_values() {
    let a = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
    let r = binary_f64(BinaryOp::Add, (&[2, 3], &a), (&[3], &[10.0, 20.0, 30.0]));
    assert_eq!(r.shape, vec![2, 3]);
    close(&r.to_f64_vec(), &[11.0, 22.0, 33.0, 14.0, 25.0, 36.0], 0.0);
    // Outer product by broadcasting both operands.
    let r = binary_f64(BinaryOp::Mul, (&[2, 1], &[1.0, 2.0]), (&[1, 3], &[1.0, 2.0, 3.0]));
    assert_eq!(r.shape, vec![2, 3]);
    close(&r.to_f64_vec(), &[1.0, 2.0, 3.0, 2.0, 4.0, 6.0], 0.0);
    // Scalar on the left.
    let r = binary_f64(BinaryOp::Sub, (&[], &[10.0]), (&[2], &[1.0, 2.0]));
    close(&r.to_f64_vec(), &[9.0, 8.0], 0.0);
    let r = binary_f64(BinaryOp::Div, (&[2], &[1.0, -1.0]), (&[2], &[4.0, 0.0]));
    close(&r.to_f64_vec(), &[0.25, f64::NEG_INFINITY], 0.0);
    let r = binary_f64(BinaryOp::Pow, (&[1], &[2.0]), (&[2], &[0.5, 3.0]));
    close(&r.to_f64_vec(), &[std::f64::consts::SQRT_2, 8.0], 1e-15);
    let nan = f64::NAN;
    let r = binary_f64(BinaryOp::Max, (&[3], &[1.0, nan, 3.0]), (&[3], &[2.0, 0.0, nan]));
    close(&r.to_f64_vec(), &[2.0, nan, nan], 0.0);
    let r = binary_f64(BinaryOp::Min, (&[3], &[1.0, nan, 3.0]), (&[3], &[2.0, 0.0, nan]));
    close(&r.to_f64_vec(), &[1.0, nan, nan], 0.0);
    // Floored modulo; values recorded from torch.remainder.
    let inf = f64::INFINITY;
    let r = binary_f64(BinaryOp::Mod, (&[4], &[-7.0, 7.0, 5.0, -5.0]), (&[4], &[3.0, -3.0, inf, inf]));
    close(&r.to_f64_vec(), &[2.0, -2.0, 5.0, inf], 0.0);
    let r = binary_f64(BinaryOp::FMod, (&[2], &[-7.0, 7.0]), (&[2], &[3.0, -3.0]));
    close(&r.to_f64_vec(), &[-1.0, 1.0], 0.0);
    let (x, y) = ([1.0, 2.0, nan], [2.0, 2.0, nan]);
    let cmp = |op| binary_f64(op, (&[3], &x), (&[3], &y)).to_i64_vec();
    assert_eq!(cmp(BinaryOp::Lt), vec![1, 0, 0]);
    assert_eq!(cmp(BinaryOp::Le), vec![1, 1, 0]);
    assert_eq!(cmp(BinaryOp::Eq), vec![0, 1, 0]);
    assert_eq!(cmp(BinaryOp::Ne), vec![1, 0, 1]);
    assert_eq!(cmp(BinaryOp::Gt), vec![0, 0, 0]);
    assert_eq!(cmp(BinaryOp::Ge), vec![0, 1, 0]);
    assert_eq!(binary_f64(BinaryOp::Ge, (&[1], &[1.0]), (&[1], &[0.0])).dtype(), DType::Bool);
}

fn binary_int(op: BinaryOp, dtype: DType, a: &[i64], b: &[i64]) -> Result<Vec<i64>, Error> {
    let g = Graph::new();
    let x = g.input("a", dtype, [a.len()]);
    let y = g.input("b", dtype, [b.len()]);
    g.output(&x.binary(op, &y));
    Ok(run(&g, &[ti(dtype, &[a.len()], a), ti(dtype, &[b.len()], b)])?.remove(0).to_i64_vec())
}

#[test]
fn binary_int_semantics() {
    let i = DType::I32;
    assert_eq!(binary_int(BinaryOp::Div, i, &[-7, 7, -7, 6], &[2, -2, -2, 3]).unwrap(), vec![-3, -3, 3, 2]);
    assert_eq!(binary_int(BinaryOp::Mod, i, &[-7, 7, -7, 6], &[2, -2, -2, 3]).unwrap(), vec![1, -1, -1, 0]);
    assert_eq!(binary_int(BinaryOp::FMod, i, &[-7, 7, -7, 6], &[2, -2, -2, 3]).unwrap(), vec![-1, 1, -1, 0]);
    assert_eq!(binary_int(BinaryOp::Add, i, &[i32::MAX as i64], &[1]).unwrap(), vec![i32::MIN as i64]);
    assert_eq!(binary_int(BinaryOp::Mul, DType::U8, &[200], &[2]).unwrap(), vec![144]);
    assert_eq!(binary_int(BinaryOp::Sub, DType::U16, &[0], &[1]).unwrap(), vec![65535]);
    assert_eq!(
        binary_int(BinaryOp::Pow, DType::I64, &[3, -2, 2, 5], &[4, 3, 62, 0]).unwrap(),
        vec![81, -8, 1 << 62, 1]
    );
    assert_eq!(binary_int(BinaryOp::Pow, i, &[2], &[31]).unwrap(), vec![i32::MIN as i64]);
    assert_eq!(binary_int(BinaryOp::Max, DType::I8, &[-3, 4], &[2, -9]).unwrap(), vec![2, 4]);
    // By zero: 0; negative exponents: 0 (core::scalar's rules, which kernels follow).
    for op in [BinaryOp::Div, BinaryOp::Mod, BinaryOp::FMod] {
        assert_eq!(binary_int(op, i, &[7, 2], &[1, 0]).unwrap()[1], 0, "{}", op.name());
    }
    assert_eq!(binary_int(BinaryOp::Pow, i, &[2, 1, -1], &[-1, -3, -3]).unwrap(), vec![0, 0, 0]);
    // i64::MIN / -1 wraps instead of trapping.
    assert_eq!(binary_int(BinaryOp::Div, DType::I64, &[i64::MIN], &[-1]).unwrap(), vec![i64::MIN]);
    // Logical ops and bool max/min.
    let b = DType::Bool;
    assert_eq!(binary_int(BinaryOp::And, b, &[1, 1, 0], &[1, 0, 0]).unwrap(), vec![1, 0, 0]);
    assert_eq!(binary_int(BinaryOp::Or, b, &[1, 1, 0], &[1, 0, 0]).unwrap(), vec![1, 1, 0]);
    assert_eq!(binary_int(BinaryOp::Xor, b, &[1, 1, 0], &[1, 0, 0]).unwrap(), vec![0, 1, 0]);
    assert_eq!(binary_int(BinaryOp::Max, b, &[1, 0], &[0, 0]).unwrap(), vec![1, 0]);
}

#[test]
fn u64_values_compare_and_divide_unsigned() {
    let g = Graph::new();
    let a = g.input("a", DType::U64, [2]);
    let b = g.input("b", DType::U64, [2]);
    g.output(&a.binary(BinaryOp::Div, &b));
    g.output(&a.gt(&b));
    g.output(&a.maximum(&b));
    g.output(&a.cast(DType::F64));
    let ta = HostTensor::new(vec![2], TensorData::U64(vec![u64::MAX, 3])).unwrap();
    let tb = HostTensor::new(vec![2], TensorData::U64(vec![2, 1 << 63])).unwrap();
    let r = run(&g, &[ta, tb]).unwrap();
    assert_eq!(r[0].data, TensorData::U64(vec![u64::MAX / 2, 0]));
    assert_eq!(r[1].data, TensorData::Bool(vec![true, false]));
    assert_eq!(r[2].data, TensorData::U64(vec![u64::MAX, 1 << 63]));
    assert_eq!(r[3].to_f64_vec(), vec![u64::MAX as f64, 3.0]);
}

#[test]
fn where_broadcasts_three_ways() {
    let g = Graph::new();
    let c = g.input("c", DType::Bool, [2, 1]);
    let a = g.input("a", DType::F64, [3]);
    let b = g.input("b", DType::F64, []);
    let y = run1(
        &g,
        &c.where_(&a, &b),
        &[ti(DType::Bool, &[2, 1], &[1, 0]), t64(&[3], &[1.0, 2.0, 3.0]), t64(&[], &[-1.0])],
    );
    assert_eq!(y.shape, vec![2, 3]);
    close(&y.to_f64_vec(), &[1.0, 2.0, 3.0, -1.0, -1.0, -1.0], 0.0);
}

#[test]
fn casts_truncate_wrap_and_round() {
    let g = Graph::new();
    let x = g.input("x", DType::F64, [4]);
    for d in [DType::I32, DType::U8, DType::Bool, DType::BF16, DType::F16, DType::I8] {
        g.output(&x.cast(d));
    }
    let r = run(&g, &[t64(&[4], &[-2.7, 2.7, f64::NAN, 300.5])]).unwrap();
    assert_eq!(r[0].data, TensorData::I32(vec![-2, 2, 0, 300]));
    assert_eq!(r[1].data, TensorData::U8(vec![254, 2, 0, 44]));
    assert_eq!(r[2].data, TensorData::Bool(vec![true, true, true, true]));
    let bf = r[3].to_f64_vec();
    assert_eq!([bf[0], bf[1], bf[3]], [-2.703125, 2.703125, 300.0]);
    assert!(bf[2].is_nan());
    assert_eq!(r[4].to_f64_vec()[..2], [-2.69921875, 2.69921875]);
    assert_eq!(r[5].data, TensorData::I8(vec![-2, 2, 0, 44]));
    // Zero to bool is false; bool to float is 0/1; int to narrower int wraps.
    let g = Graph::new();
    let z = g.input("z", DType::F32, [2]);
    let b = g.input("b", DType::Bool, [2]);
    let i = g.input("i", DType::I64, [2]);
    g.output(&z.cast(DType::Bool));
    g.output(&b.cast(DType::F32));
    g.output(&i.cast(DType::I8));
    let r = run(
        &g,
        &[
            HostTensor::f32([2], vec![0.0, -0.0]).unwrap(),
            ti(DType::Bool, &[2], &[1, 0]),
            ti(DType::I64, &[2], &[200, -129]),
        ],
    )
    .unwrap();
    assert_eq!(r[0].data, TensorData::Bool(vec![false, false]));
    assert_eq!(r[1].data, TensorData::F32(vec![1.0, 0.0]));
    assert_eq!(r[2].data, TensorData::I8(vec![-56, 127]));
}

#[test]
fn half_precision_results_are_rounded_to_storage() {
    for (d, third) in [(DType::BF16, 0.333984375), (DType::F16, 0.333251953125)] {
        let g = Graph::new();
        let a = g.input("a", d, [1]);
        let b = g.input("b", d, [1]);
        let y =
            run1(&g, &(&a / &b), &[HostTensor::from_f64(d, vec![1], &[1.0]), HostTensor::from_f64(d, vec![1], &[3.0])]);
        assert_eq!(y.dtype(), d);
        assert_eq!(y.to_f64_vec(), vec![third], "{d}");
    }
    // A bf16 sum accumulates in f64 and rounds once: 1000 x bf16(0.1) = 100.09765625 -> 100.
    // (Accumulating in bf16 would stall at 32.)
    let g = Graph::new();
    let x = g.input("x", DType::BF16, [1000]);
    let y = run1(&g, &x.sum(&[0], false), &[HostTensor::from_f64(DType::BF16, vec![1000], &[0.1; 1000])]);
    assert_eq!(y.to_f64_vec(), vec![100.0]);
    // Intermediate results are rounded at every node: (1/3 in bf16) * 3 = 1.001953125 -> 1.0.
    let g = Graph::new();
    let a = g.input("a", DType::BF16, [1]);
    let y = run1(&g, &((1.0 / &a) * 3.0), &[HostTensor::from_f64(DType::BF16, vec![1], &[3.0])]);
    assert_eq!(y.to_f64_vec(), vec![1.0]);
}

fn reduce_f64(op: ReduceOp, shape: &[usize], x: &[f64], axes: &[i64], keepdim: bool) -> Result<HostTensor, Error> {
    let g = Graph::new();
    let a = g.input("x", DType::F64, shape);
    g.output(&a.reduce(op, axes, keepdim));
    Ok(run(&g, &[t64(shape, x)])?.remove(0))
}

#[test]
fn reductions() {
    let x = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
    let r = |op, axes: &[i64], k| reduce_f64(op, &[2, 3], &x, axes, k).unwrap();
    let s = r(ReduceOp::Sum, &[1], false);
    assert_eq!(s.shape, vec![2]);
    close(&s.to_f64_vec(), &[6.0, 15.0], 0.0);
    let s = r(ReduceOp::Sum, &[0], true);
    assert_eq!(s.shape, vec![1, 3]);
    close(&s.to_f64_vec(), &[5.0, 7.0, 9.0], 0.0);
    let s = r(ReduceOp::Sum, &[0, 1], false);
    assert_eq!(s.shape, Vec::<usize>::new());
    close(&s.to_f64_vec(), &[21.0], 0.0);
    close(&r(ReduceOp::Prod, &[1], false).to_f64_vec(), &[6.0, 120.0], 0.0);
    close(&r(ReduceOp::Max, &[0], false).to_f64_vec(), &[4.0, 5.0, 6.0], 0.0);
    close(&r(ReduceOp::Min, &[-1], false).to_f64_vec(), &[1.0, 4.0], 0.0);
    close(&r(ReduceOp::Mean, &[1], false).to_f64_vec(), &[2.0, 5.0], 0.0);
    // Non-adjacent axes of a rank-3 tensor against a loop.
    let x3 = seq(24);
    let s = reduce_f64(ReduceOp::Sum, &[2, 3, 4], &x3, &[0, 2], false).unwrap();
    let want: Vec<f64> =
        (0..3).map(|j| (0..2).flat_map(|i| (0..4).map(move |k| (i * 12 + j * 4 + k) as f64)).sum()).collect();
    close(&s.to_f64_vec(), &want, 0.0);
    // NaN propagates through max/min.
    let m = reduce_f64(ReduceOp::Max, &[3], &[1.0, f64::NAN, 3.0], &[0], false).unwrap();
    assert!(m.to_f64_vec()[0].is_nan());
    // Empty reduction extents: sum 0, prod 1, mean NaN, max/min errors.
    let e = |op| reduce_f64(op, &[2, 0], &[], &[1], false);
    close(&e(ReduceOp::Sum).unwrap().to_f64_vec(), &[0.0, 0.0], 0.0);
    close(&e(ReduceOp::Prod).unwrap().to_f64_vec(), &[1.0, 1.0], 0.0);
    assert!(e(ReduceOp::Mean).unwrap().to_f64_vec().iter().all(|v| v.is_nan()));
    for op in [ReduceOp::Max, ReduceOp::Min] {
        assert!(matches!(e(op), Err(Error::Eval { .. })), "{op:?}");
    }
    // Integer sums wrap in the dtype.
    let g = Graph::new();
    let a = g.input("x", DType::I8, [2]);
    let y = run1(&g, &a.sum(&[0], false), &[ti(DType::I8, &[2], &[100, 100])]);
    assert_eq!(y.data, TensorData::I8(vec![-56]));
    let g = Graph::new();
    let a = g.input("x", DType::U64, [2]);
    let y = run1(&g, &a.max(&[0], false), &[HostTensor::new(vec![2], TensorData::U64(vec![1, u64::MAX])).unwrap()]);
    assert_eq!(y.data, TensorData::U64(vec![u64::MAX]));
}

fn argred(op: ArgOp, shape: &[usize], x: &[f64], axis: usize, select_last: bool) -> Result<Vec<i64>, Error> {
    let g = Graph::new();
    let a = g.input("x", DType::F64, shape);
    g.output(&a.apply(Op::ArgReduce { op, axis, keepdim: false, select_last }, &[]));
    Ok(run(&g, &[t64(shape, x)])?.remove(0).to_i64_vec())
}

#[test]
fn arg_reductions() {
    let x = [3.0, 1.0, 3.0, 1.0];
    assert_eq!(argred(ArgOp::ArgMax, &[4], &x, 0, false).unwrap(), vec![0]);
    assert_eq!(argred(ArgOp::ArgMax, &[4], &x, 0, true).unwrap(), vec![2]);
    assert_eq!(argred(ArgOp::ArgMin, &[4], &x, 0, false).unwrap(), vec![1]);
    assert_eq!(argred(ArgOp::ArgMin, &[4], &x, 0, true).unwrap(), vec![3]);
    // NaN wins (as in torch: argmax([1, nan, 5]) = 1 and argmin([1, nan, 0]) = 1).
    assert_eq!(argred(ArgOp::ArgMax, &[3], &[1.0, f64::NAN, 5.0], 0, false).unwrap(), vec![1]);
    assert_eq!(argred(ArgOp::ArgMin, &[3], &[1.0, f64::NAN, 0.0], 0, false).unwrap(), vec![1]);
    // Along axis 0 of [2, 3].
    assert_eq!(argred(ArgOp::ArgMax, &[2, 3], &[1.0, 5.0, 3.0, 4.0, 2.0, 3.0], 0, false).unwrap(), vec![1, 0, 0]);
    assert!(matches!(argred(ArgOp::ArgMax, &[2, 0], &[], 1, false), Err(Error::Eval { .. })));
    // Integers, keepdim, and the i64 output dtype.
    let g = Graph::new();
    let a = g.input("x", DType::I16, [2, 2]);
    let y = run1(&g, &a.argmin(1, true), &[ti(DType::I16, &[2, 2], &[5, -1, 7, 7])]);
    assert_eq!((y.shape.clone(), y.data), (vec![2, 1], TensorData::I64(vec![1, 0])));
}

#[test]
fn permute_expand_slice_concat() {
    let g = Graph::new();
    let x = g.input("x", DType::F64, [2, 3, 4]);
    let y = run1(&g, &x.permute(&[2, 0, 1]), &[t64(&[2, 3, 4], &seq(24))]);
    assert_eq!(y.shape, vec![4, 2, 3]);
    let v = y.to_f64_vec();
    for i in 0..4 {
        for j in 0..2 {
            for k in 0..3 {
                assert_eq!(v[(i * 2 + j) * 3 + k], (j * 12 + k * 4 + i) as f64);
            }
        }
    }
    let g = Graph::new();
    let x = g.input("x", DType::F64, [3, 1]);
    let y = run1(&g, &x.expand([2, 3, 4]), &[t64(&[3, 1], &[1.0, 2.0, 3.0])]);
    let want: Vec<f64> = (0..24).map(|i| ((i / 4) % 3 + 1) as f64).collect();
    close(&y.to_f64_vec(), &want, 0.0);
    // x[:, 4:0:-2] of a [2, 5] tensor reads columns 4 and 2.
    let g = Graph::new();
    let x = g.input("x", DType::F64, [2, 5]);
    let y = run1(&g, &x.slice(1, 4, 0, -2), &[t64(&[2, 5], &seq(10))]);
    assert_eq!(y.shape, vec![2, 2]);
    close(&y.to_f64_vec(), &[4.0, 2.0, 9.0, 7.0], 0.0);
    // A multi-axis slice built directly.
    let g = Graph::new();
    let x = g.input("x", DType::I32, [3, 4]);
    let dims = vec![SliceDim { start: 2, step: -2, len: 2 }, SliceDim { start: 1, step: 2, len: 2 }];
    let y = run1(&g, &x.apply(Op::Slice(dims), &[]), &[ti(DType::I32, &[3, 4], &(0..12).collect::<Vec<_>>())]);
    assert_eq!(y.to_i64_vec(), vec![9, 11, 1, 3]);
    // Concat along a middle axis.
    let g = Graph::new();
    let a = g.input("a", DType::F64, [2, 1, 2]);
    let b = g.input("b", DType::F64, [2, 2, 2]);
    let y = run1(
        &g,
        &g.concat(&[&a, &b, &a], 1),
        &[
            t64(&[2, 1, 2], &[0.0, 1.0, 2.0, 3.0]),
            t64(&[2, 2, 2], &seq(8).iter().map(|v| v + 10.0).collect::<Vec<_>>()),
        ],
    );
    assert_eq!(y.shape, vec![2, 4, 2]);
    close(
        &y.to_f64_vec(),
        &[0.0, 1.0, 10.0, 11.0, 12.0, 13.0, 0.0, 1.0, 2.0, 3.0, 14.0, 15.0, 16.0, 17.0, 2.0, 3.0],
        0.0,
    );
}

fn pad1(x: &[f64], pads: (i64, i64), mode: PadMode) -> Result<Vec<f64>, Error> {
    let g = Graph::new();
    let a = g.input("x", DType::F64, [x.len()]);
    g.output(&a.pad(&[pads], mode));
    Ok(run(&g, &[t64(&[x.len()], x)])?.remove(0).to_f64_vec())
}

#[test]
fn pad_modes() {
    let x = [1.0, 2.0, 3.0, 4.0];
    close(&pad1(&x, (2, 1), PadMode::Constant(9.0)).unwrap(), &[9.0, 9.0, 1.0, 2.0, 3.0, 4.0, 9.0], 0.0);
    close(&pad1(&x, (-1, -2), PadMode::Constant(9.0)).unwrap(), &[2.0], 0.0);
    // Negative pads crop first, then the mode applies to what is left (recorded from torch's
    // F.pad with circular / reflect / replicate).
    close(&pad1(&x, (-1, 2), PadMode::Wrap).unwrap(), &[2.0, 3.0, 4.0, 2.0, 3.0], 0.0);
    close(&pad1(&x, (2, -1), PadMode::Wrap).unwrap(), &[2.0, 3.0, 1.0, 2.0, 3.0], 0.0);
    close(&pad1(&x, (-1, 2), PadMode::Reflect).unwrap(), &[2.0, 3.0, 4.0, 3.0, 2.0], 0.0);
    close(&pad1(&x, (2, -1), PadMode::Reflect).unwrap(), &[3.0, 2.0, 1.0, 2.0, 3.0], 0.0);
    close(&pad1(&x, (-1, 2), PadMode::Edge).unwrap(), &[2.0, 3.0, 4.0, 4.0, 4.0], 0.0);
    close(&pad1(&x, (2, -1), PadMode::Edge).unwrap(), &[1.0, 1.0, 1.0, 2.0, 3.0], 0.0);
    // Pads wider than the input repeat periodically (NumPy's np.pad).
    let y = [1.0, 2.0, 3.0];
    let want_reflect = [2, 1, 2, 3, 2, 1, 2, 3, 2, 1, 2, 3, 2].map(f64::from);
    close(&pad1(&y, (5, 5), PadMode::Reflect).unwrap(), &want_reflect, 0.0);
    let want_wrap = [2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2].map(f64::from);
    close(&pad1(&y, (5, 5), PadMode::Wrap).unwrap(), &want_wrap, 0.0);
    close(&pad1(&[7.0], (2, 1), PadMode::Reflect).unwrap(), &[7.0; 4], 0.0);
    assert!(matches!(pad1(&x, (-4, 1), PadMode::Edge), Err(Error::Eval { .. })));
    // 2-D cases against NumPy's np.pad.
    let pad2 = |pads: &[(i64, i64)], mode| {
        let g = Graph::new();
        let a = g.input("x", DType::I64, [2, 3]);
        run1(&g, &a.pad(pads, mode), &[ti(DType::I64, &[2, 3], &[0, 1, 2, 3, 4, 5])]).to_i64_vec()
    };
    assert_eq!(
        pad2(&[(1, 1), (2, 2)], PadMode::Reflect),
        vec![5, 4, 3, 4, 5, 4, 3, 2, 1, 0, 1, 2, 1, 0, 5, 4, 3, 4, 5, 4, 3, 2, 1, 0, 1, 2, 1, 0]
    );
    assert_eq!(pad2(&[(1, 0), (2, 1)], PadMode::Wrap), vec![4, 5, 3, 4, 5, 3, 1, 2, 0, 1, 2, 0, 4, 5, 3, 4, 5, 3]);
    assert_eq!(pad2(&[(0, 1), (1, 2)], PadMode::Edge), vec![0, 0, 1, 2, 2, 2, 3, 3, 4, 5, 5, 5, 3, 3, 4, 5, 5, 5]);
    assert_eq!(pad2(&[(0, 0), (1, 0)], PadMode::Constant(-2.9)), vec![-2, 0, 1, 2, -2, 3, 4, 5]);
}

#[test]
fn gathers() {
    let data = t64(&[3, 2], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let g = Graph::new();
    let d = g.input("d", DType::F64, [3, 2]);
    let i = g.input("i", DType::I64, [4]);
    let y = run1(&g, &d.gather(0, &i), &[data.clone(), ti(DType::I64, &[4], &[2, -1, 0, -3])]);
    assert_eq!(y.shape, vec![4, 2]);
    close(&y.to_f64_vec(), &[5.0, 6.0, 5.0, 6.0, 1.0, 2.0, 1.0, 2.0], 0.0);
    let g = Graph::new();
    let d = g.input("d", DType::F64, [3, 2]);
    let i = g.input("i", DType::I32, [2, 2]);
    let y = run1(&g, &d.gather(1, &i), &[data.clone(), ti(DType::I32, &[2, 2], &[0, -1, 1, 1])]);
    assert_eq!(y.shape, vec![3, 2, 2]);
    close(&y.to_f64_vec(), &[1.0, 2.0, 2.0, 2.0, 3.0, 4.0, 4.0, 4.0, 5.0, 6.0, 6.0, 6.0], 0.0);
    // Out of range: one negative wrap, then clamped into range (the rule of every backend).
    for (bad, row) in [(3, 2usize), (-4, 0), (1 << 40, 2), (-(1 << 40), 0)] {
        let g = Graph::new();
        let d = g.input("d", DType::F64, [3, 2]);
        let i = g.input("i", DType::I64, [2]);
        g.output(&d.gather(0, &i));
        let y = run(&g, &[data.clone(), ti(DType::I64, &[2], &[0, bad])]).unwrap();
        let v = data.to_f64_vec();
        assert_eq!(y[0].to_f64_vec(), vec![v[0], v[1], v[2 * row], v[2 * row + 1]], "index {bad}");
    }
    // gather_elements along axis 1 with a narrower index tensor.
    let g = Graph::new();
    let d = g.input("d", DType::F64, [2, 3]);
    let i = g.input("i", DType::I64, [2, 2]);
    let y = run1(&g, &d.gather_elements(1, &i), &[t64(&[2, 3], &seq(6)), ti(DType::I64, &[2, 2], &[2, -1, 0, 1])]);
    close(&y.to_f64_vec(), &[2.0, 2.0, 3.0, 4.0], 0.0);
    let g = Graph::new();
    let d = g.input("d", DType::F64, [2, 3]);
    let i = g.input("i", DType::I64, [1, 1]);
    g.output(&d.gather_elements(0, &i));
    // Index 2 on an axis of extent 2 clamps to row 1.
    let y = run(&g, &[t64(&[2, 3], &seq(6)), ti(DType::I64, &[1, 1], &[2])]).unwrap();
    assert_eq!(y[0].to_f64_vec(), vec![seq(6)[3]]);
}

/// Naive batched matmul on already-broadcast, promoted operands.
fn naive_mm(a: &[f64], b: &[f64], m: usize, k: usize, n: usize) -> Vec<f64> {
    let mut c = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            c[i * n + j] = (0..k).map(|p| a[i * k + p] * b[p * n + j]).sum();
        }
    }
    c
}

fn mm(ash: &[usize], bsh: &[usize], a: &HostTensor, b: &HostTensor) -> HostTensor {
    let g = Graph::new();
    let x = g.input("a", a.dtype(), ash);
    let y = g.input("b", b.dtype(), bsh);
    run1(&g, &x.matmul(&y), &[a.clone(), b.clone()])
}

#[test]
fn matmul_shapes_and_values() {
    let a = t64(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let b = t64(&[3, 2], &[7.0, 8.0, 9.0, 10.0, 11.0, 12.0]);
    close(&mm(&[2, 3], &[3, 2], &a, &b).to_f64_vec(), &[58.0, 64.0, 139.0, 154.0], 0.0);
    // Batch broadcasting: [2, 1, 3, 4] @ [5, 4, 2] -> [2, 5, 3, 2].
    let a = rand(&[2, 1, 3, 4], 1);
    let b = rand(&[5, 4, 2], 2);
    let y = mm(&[2, 1, 3, 4], &[5, 4, 2], &a, &b);
    assert_eq!(y.shape, vec![2, 5, 3, 2]);
    let (av, bv, yv) = (a.to_f64_vec(), b.to_f64_vec(), y.to_f64_vec());
    for i in 0..2 {
        for j in 0..5 {
            let want = naive_mm(&av[i * 12..][..12], &bv[j * 8..][..8], 3, 4, 2);
            close(&yv[(i * 5 + j) * 6..][..6], &want, 1e-14);
        }
    }
    // 1-D operands are promoted and squeezed.
    let v = t64(&[3], &[1.0, 2.0, 3.0]);
    let m = t64(&[3, 2], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let y = mm(&[3], &[3, 2], &v, &m);
    assert_eq!((y.shape.clone(), y.to_f64_vec()), (vec![2], vec![22.0, 28.0]));
    let mt = t64(&[2, 3], &[1.0, 3.0, 5.0, 2.0, 4.0, 6.0]);
    let y = mm(&[2, 3], &[3], &mt, &v);
    assert_eq!((y.shape.clone(), y.to_f64_vec()), (vec![2], vec![22.0, 28.0]));
    let y = mm(&[3], &[3], &v, &v);
    assert_eq!((y.shape.clone(), y.to_f64_vec()), (vec![], vec![14.0]));
    let bt = rand(&[4, 3, 2], 3);
    let y = mm(&[3], &[4, 3, 2], &v, &bt);
    assert_eq!(y.shape, vec![4, 2]);
    let bv = bt.to_f64_vec();
    for i in 0..4 {
        close(&y.to_f64_vec()[i * 2..][..2], &naive_mm(&[1.0, 2.0, 3.0], &bv[i * 6..][..6], 1, 3, 2), 1e-14);
    }
    // Integers wrap in the dtype.
    let a = ti(DType::I8, &[1, 2], &[100, 100]);
    let b = ti(DType::I8, &[2, 1], &[1, 1]);
    assert_eq!(mm(&[1, 2], &[2, 1], &a, &b).data, TensorData::I8(vec![-56]));
    // f32 storage: the f64 accumulation is rounded once.
    let a = HostTensor::f32([1, 3], vec![1.0, 1e-8, -1.0]).unwrap();
    let b = HostTensor::f32([3, 1], vec![1.0, 1.0, 1.0]).unwrap();
    assert_eq!(mm(&[1, 3], &[3, 1], &a, &b).data, TensorData::F32(vec![1e-8]));
}

/// Naive convolution written independently of the interpreter: for every output element, loop
/// over the window and skip taps in the padding.
#[allow(clippy::too_many_arguments)]
fn naive_conv(
    x: &[f64],
    [n, c, h, w]: [usize; 4],
    wt: &[f64],
    [o, cg, kh, kw]: [usize; 4],
    bias: Option<&[f64]>,
    stride: [usize; 2],
    pad: [usize; 4],
    dil: [usize; 2],
    groups: usize,
) -> (Vec<f64>, [usize; 4]) {
    let oh = (h + pad[0] + pad[2] - dil[0] * (kh - 1) - 1) / stride[0] + 1;
    let ow = (w + pad[1] + pad[3] - dil[1] * (kw - 1) - 1) / stride[1] + 1;
    let mut out = vec![0.0; n * o * oh * ow];
    for b in 0..n {
        for oc in 0..o {
            let g = oc / (o / groups);
            for y in 0..oh {
                for xx in 0..ow {
                    let mut acc = 0.0;
                    for ci in 0..cg {
                        let ic = g * cg + ci;
                        for ky in 0..kh {
                            for kx in 0..kw {
                                let iy = (y * stride[0] + ky * dil[0]) as i64 - pad[0] as i64;
                                let ix = (xx * stride[1] + kx * dil[1]) as i64 - pad[1] as i64;
                                if iy < 0 || ix < 0 || iy >= h as i64 || ix >= w as i64 {
                                    continue;
                                }
                                acc += x[((b * c + ic) * h + iy as usize) * w + ix as usize]
                                    * wt[((oc * cg + ci) * kh + ky) * kw + kx];
                            }
                        }
                    }
                    out[((b * o + oc) * oh + y) * ow + xx] = acc + bias.map_or(0.0, |bb| bb[oc]);
                }
            }
        }
    }
    (out, [n, o, oh, ow])
}

#[test]
fn conv2d_matches_naive_loops() {
    struct Case {
        x: [usize; 4],
        w: [usize; 4],
        stride: [usize; 2],
        pad: [usize; 4],
        dil: [usize; 2],
        groups: usize,
        bias: bool,
    }
    let cases = [
        Case {
            x: [2, 4, 9, 8],
            w: [6, 2, 3, 2],
            stride: [2, 2],
            pad: [1, 2, 2, 0],
            dil: [2, 2],
            groups: 2,
            bias: true,
        },
        Case { x: [1, 3, 5, 5], w: [4, 3, 3, 3], stride: [1, 1], pad: [0; 4], dil: [1, 1], groups: 1, bias: false },
        Case {
            x: [1, 4, 6, 7],
            w: [4, 1, 3, 3],
            stride: [1, 2],
            pad: [1, 1, 1, 1],
            dil: [1, 1],
            groups: 4,
            bias: true,
        },
        Case {
            x: [1, 2, 4, 4],
            w: [2, 2, 1, 1],
            stride: [3, 3],
            pad: [0, 0, 0, 0],
            dil: [1, 1],
            groups: 1,
            bias: true,
        },
    ];
    for (k, c) in cases.iter().enumerate() {
        let x = rand(&c.x, 10 + k as u64);
        let w = rand(&c.w, 20 + k as u64);
        let b = rand(&[c.w[0]], 30 + k as u64);
        let g = Graph::new();
        let xi = g.input("x", DType::F64, c.x);
        let wi = g.input("w", DType::F64, c.w);
        let bi = g.input("b", DType::F64, [c.w[0]]);
        let y = xi.conv2d(&wi, c.bias.then_some(&bi), c.stride, c.pad, c.dil, c.groups);
        g.output(&y);
        let got = run(&g, &[x.clone(), w.clone(), b.clone()]).unwrap().remove(0);
        let bv = b.to_f64_vec();
        let (want, shape) = naive_conv(
            &x.to_f64_vec(),
            c.x,
            &w.to_f64_vec(),
            c.w,
            c.bias.then_some(&bv[..]),
            c.stride,
            c.pad,
            c.dil,
            c.groups,
        );
        assert_eq!(got.shape, shape.to_vec(), "case {k}");
        close(&got.to_f64_vec(), &want, 1e-13);
    }
}

fn pool(
    x: &HostTensor,
    kind: PoolKind,
    k: [usize; 2],
    s: [usize; 2],
    p: [usize; 4],
    ceil: bool,
    cip: bool,
) -> HostTensor {
    let g = Graph::new();
    let a = g.input("x", x.dtype(), x.shape.clone());
    let window = Window2d { kernel: k, stride: s, padding: p, dilation: [1, 1] };
    run1(
        &g,
        &a.apply(Op::Pool2d { kind, window, ceil_mode: ceil, count_include_pad: cip }, &[]),
        std::slice::from_ref(x),
    )
}

#[test]
fn pooling_matches_pytorch() {
    // Values recorded from PyTorch 2.11 (F.avg_pool2d / F.max_pool2d, float64).
    let x = t64(&[1, 1, 6, 6], &seq(36));
    let inc = pool(&x, PoolKind::Avg, [3, 3], [2, 2], [1; 4], true, true);
    assert_eq!(inc.shape, vec![1, 1, 4, 4]);
    close(
        &inc.to_f64_vec(),
        &[
            1.5555555555555556,
            3.3333333333333335,
            4.666666666666667,
            2.6666666666666665,
            8.333333333333334,
            14.0,
            16.0,
            8.5,
            16.333333333333332,
            26.0,
            28.0,
            14.5,
            10.166666666666666,
            16.0,
            17.0,
            8.75,
        ],
        1e-15,
    );
    let exc = pool(&x, PoolKind::Avg, [3, 3], [2, 2], [1; 4], true, false);
    let want_exc = [3.5, 5.0, 7.0, 8.0, 12.5, 14.0, 16.0, 17.0, 24.5, 26.0, 28.0, 29.0, 30.5, 32.0, 34.0, 35.0];
    close(&exc.to_f64_vec(), &want_exc, 1e-15);
    // Max pooling of all-negative values: the (zero) padding never wins.
    let neg = t64(&[1, 1, 6, 6], &seq(36).iter().map(|v| -v - 1.0).collect::<Vec<_>>());
    let mx = pool(&neg, PoolKind::Max, [3, 3], [2, 2], [1; 4], true, false);
    let want_max = [-1, -2, -4, -6, -7, -8, -10, -12, -19, -20, -22, -24, -31, -32, -34, -36].map(f64::from);
    close(&mx.to_f64_vec(), &want_max, 0.0);
    // ceil_mode without padding: the clipped last window divides by what it covers.
    let y = t64(&[1, 1, 5, 5], &seq(25));
    let a5 = pool(&y, PoolKind::Avg, [2, 2], [2, 2], [0; 4], true, true);
    close(&a5.to_f64_vec(), &[3.0, 5.0, 6.5, 13.0, 15.0, 16.5, 20.5, 22.5, 24.0], 0.0);
    // Windows that run into the trailing padding count it (torch avg_pool1d(k=3, s=3, p=1, ceil)).
    let z = t64(&[1, 1, 1, 7], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]);
    let az = pool(&z, PoolKind::Avg, [1, 3], [1, 3], [0, 1, 0, 1], true, true);
    close(&az.to_f64_vec(), &[1.0, 4.0, 4.333333333333333], 1e-15);
    // Integer max pooling.
    let xi = ti(DType::I32, &[1, 1, 2, 3], &[1, -5, 3, 4, 2, -6]);
    let mi = pool(&xi, PoolKind::Max, [2, 2], [1, 1], [0; 4], false, false);
    assert_eq!(mi.data, TensorData::I32(vec![4, 3]));
    // Windows with no tap inside the input (padding >= kernel): averaging with the padding counted
    // gives 0 there; max pooling and exclude-pad averaging have nothing to pool and fail.
    let one = t64(&[1, 1, 1, 1], &[4.0]);
    let inc = pool(&one, PoolKind::Avg, [1, 1], [1, 1], [1; 4], false, true);
    close(&inc.to_f64_vec(), &[0.0, 0.0, 0.0, 0.0, 4.0, 0.0, 0.0, 0.0, 0.0], 0.0);
    for (kind, cip) in [(PoolKind::Max, false), (PoolKind::Avg, false)] {
        let g = Graph::new();
        let a = g.input("x", DType::F64, [1, 1, 1, 1]);
        let window = Window2d { kernel: [1, 1], stride: [1, 1], padding: [1; 4], dilation: [1, 1] };
        g.output(&a.apply(Op::Pool2d { kind, window, ceil_mode: false, count_include_pad: cip }, &[]));
        match run(&g, std::slice::from_ref(&one)) {
            Err(Error::Eval { msg, .. }) => assert!(msg.contains("only padding"), "{msg}"),
            other => panic!("{kind:?}: expected an evaluation error, got {other:?}"),
        }
    }
    // NaN propagates through max pooling.
    let xn = t64(&[1, 1, 1, 2], &[1.0, f64::NAN]);
    assert!(pool(&xn, PoolKind::Max, [1, 2], [1, 1], [0; 4], false, false).to_f64_vec()[0].is_nan());
}

#[test]
fn softmax_family_identities() {
    let g = Graph::new();
    let x = g.input("x", DType::F64, [1, 3]);
    let y = run1(&g, &x.softmax(-1), &[t64(&[1, 3], &[1.0, 2.0, 3.0])]);
    close(&y.to_f64_vec(), &[0.09003057317038046, 0.24472847105479767, 0.6652409557748219], 1e-15);
    // Rows sum to 1, and log_softmax = log(softmax), on a large-magnitude input (no overflow).
    let xs = HostTensor::random(DType::F64, vec![64, 33], 7, -500.0, 500.0);
    let g = Graph::new();
    let x = g.input("x", DType::F64, [64, 33]);
    g.output(&x.softmax(1));
    g.output(&x.log_softmax(1));
    let r = run(&g, &[xs]).unwrap();
    let (s, ls) = (r[0].to_f64_vec(), r[1].to_f64_vec());
    for row in s.chunks(33) {
        assert!((row.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        assert!(row.iter().all(|v| v.is_finite() && *v >= 0.0));
    }
    for (a, b) in s.iter().zip(&ls) {
        if *a > 1e-300 {
            assert!((a.ln() - b).abs() < 1e-9 * (1.0 + b.abs()), "{} vs {b}", a.ln());
        }
    }
    // Along axis 0 of a [3, 2] tensor.
    let g = Graph::new();
    let x = g.input("x", DType::F64, [3, 2]);
    let y = run1(&g, &x.softmax(0), &[t64(&[3, 2], &[0.0, 5.0, 0.0, 5.0, 0.0, 5.0])]);
    close(&y.to_f64_vec(), &[1.0 / 3.0; 6], 1e-15);
}

#[test]
fn layer_norm_and_batch_norm() {
    // Unit weight, zero bias, eps 0: every row has mean 0 and (biased) variance 1.
    let g = Graph::new();
    let x = g.input("x", DType::F64, [8, 16]);
    let w = g.input("w", DType::F64, [16]);
    let b = g.input("b", DType::F64, [16]);
    let y = run1(&g, &x.layer_norm(&w, &b, 0.0), &[rand(&[8, 16], 5), t64(&[16], &[1.0; 16]), t64(&[16], &[0.0; 16])]);
    for row in y.to_f64_vec().chunks(16) {
        let mean = row.iter().sum::<f64>() / 16.0;
        let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / 16.0;
        assert!(mean.abs() < 1e-14 && (var - 1.0).abs() < 1e-12, "mean {mean} var {var}");
    }
    // Hand-computed: x = [1, 2, 3] has mean 2 and variance 2/3.
    let g = Graph::new();
    let x = g.input("x", DType::F64, [1, 3]);
    let w = g.input("w", DType::F64, [3]);
    let b = g.input("b", DType::F64, [3]);
    let eps = 1e-5;
    let y = run1(
        &g,
        &x.layer_norm(&w, &b, eps),
        &[t64(&[1, 3], &[1.0, 2.0, 3.0]), t64(&[3], &[1.0, 2.0, 3.0]), t64(&[3], &[0.5, 0.0, -0.5])],
    );
    let d = (2.0f64 / 3.0 + eps).sqrt();
    close(&y.to_f64_vec(), &[-1.0 / d + 0.5, 0.0, 3.0 / d - 0.5], 1e-15);
    // Normalizing two axes with a weight broadcast over them, and no bias.
    let xs = rand(&[2, 3, 4], 6);
    let ws = rand(&[4], 7);
    let g = Graph::new();
    let x = g.input("x", DType::F64, [2, 3, 4]);
    let w = g.input("w", DType::F64, [4]);
    let op = Op::LayerNorm { axis: 1, eps: 1e-3, has_weight: true, has_bias: false };
    let y = run1(&g, &x.apply(op, &[&w]), &[xs.clone(), ws.clone()]);
    let (xv, wv) = (xs.to_f64_vec(), ws.to_f64_vec());
    let mut want = Vec::new();
    for row in xv.chunks(12) {
        let mean = row.iter().sum::<f64>() / 12.0;
        let var = row.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / 12.0;
        want.extend(row.iter().enumerate().map(|(k, v)| (v - mean) / (var + 1e-3).sqrt() * wv[k % 4]));
    }
    close(&y.to_f64_vec(), &want, 1e-14);
    // Batch norm over channel axis 1 of [2, 2, 2].
    let g = Graph::new();
    let x = g.input("x", DType::F64, [2, 2, 2]);
    let p: Vec<Tensor> = ["s", "b", "m", "v"].iter().map(|n| g.input(n, DType::F64, [2])).collect();
    let y = run1(
        &g,
        &x.batch_norm(&p[0], &p[1], &p[2], &p[3], 0.0),
        &[
            t64(&[2, 2, 2], &seq(8)),
            t64(&[2], &[1.0, 2.0]),
            t64(&[2], &[0.0, 1.0]),
            t64(&[2], &[1.0, 2.0]),
            t64(&[2], &[4.0, 16.0]),
        ],
    );
    // Channel 0: (x - 1) / 2; channel 1: (x - 2) / 4 * 2 + 1.
    close(&y.to_f64_vec(), &[-0.5, 0.0, 1.0, 1.5, 1.5, 2.0, 3.0, 3.5], 1e-15);
}

#[test]
fn pointwise_composites() {
    let xs = [-3.0, -1.0, 0.5, 2.0];
    let run_op = |op: Op| {
        let g = Graph::new();
        let x = g.input("x", DType::F64, [4]);
        run1(&g, &x.apply(op, &[]), &[t64(&[4], &xs)]).to_f64_vec()
    };
    // GELU values recorded from torch.nn.functional.gelu (float64).
    let gelu = [-0.00404969409489031, -0.15865525393145702, 0.34573123063700656, 1.9544997361036416];
    close(&run_op(Op::Gelu { tanh: false }), &gelu, 1e-15);
    let gelu_t = [-0.0036373920817729943, -0.15880800939172324, 0.34571400982514394, 1.954597694087775];
    close(&run_op(Op::Gelu { tanh: true }), &gelu_t, 1e-15);
    let silu: Vec<f64> = xs.iter().map(|x| x / (1.0 + (-x).exp())).collect();
    close(&run_op(Op::Silu), &silu, 1e-15);
    close(&run_op(Op::HardSwish), &[0.0, -1.0 / 3.0, 0.5 * (0.5 / 6.0 + 0.5), 2.0 * (2.0 / 6.0 + 0.5)], 1e-15);
    close(&run_op(Op::HardSigmoid { alpha: 0.2, beta: 0.5 }), &[0.0, 0.3, 0.6, 0.9], 1e-15);
    let g = Graph::new();
    let x = g.input("x", DType::F64, [4]);
    let y = run1(&g, &x.hardswish(), &[t64(&[4], &[-4.0, 3.0, 4.0, 1.0])]);
    close(&y.to_f64_vec(), &[0.0, 3.0, 4.0, 1.0 * (1.0 / 6.0 + 0.5)], 1e-15);
}

/// Naive attention for one batch element.
#[allow(clippy::too_many_arguments)]
fn naive_attention(
    q: &[f64],
    k: &[f64],
    v: &[f64],
    (sq, sk, d, dv): (usize, usize, usize, usize),
    scale: f64,
    keep: impl Fn(usize, usize) -> bool,
    add: impl Fn(usize, usize) -> f64,
) -> Vec<f64> {
    let mut out = vec![0.0; sq * dv];
    for i in 0..sq {
        let scores: Vec<f64> = (0..sk)
            .map(|j| {
                let s: f64 = (0..d).map(|t| q[i * d + t] * k[j * d + t]).sum::<f64>() * scale + add(i, j);
                if keep(i, j) { s } else { f64::NEG_INFINITY }
            })
            .collect();
        let m = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let e: Vec<f64> = scores.iter().map(|s| (s - m).exp()).collect();
        let z: f64 = e.iter().sum();
        for j in 0..sk {
            for t in 0..dv {
                out[i * dv + t] += e[j] / z * v[j * dv + t];
            }
        }
    }
    out
}

#[test]
fn attention_matches_naive() {
    let (b, sq, sk, d, dv) = (2, 3, 5, 4, 3);
    let (q, k, v) = (rand(&[b, sq, d], 1), rand(&[b, sk, d], 2), rand(&[b, sk, dv], 3));
    let (qv, kv, vv) = (q.to_f64_vec(), k.to_f64_vec(), v.to_f64_vec());
    let bool_mask: Vec<i64> = (0..sq * sk).map(|i| (i % 3 != 1) as i64).collect();
    let float_mask = HostTensor::random(DType::F64, vec![1, sq, sk], 9, -1.0, 1.0);
    let fm = float_mask.to_f64_vec();
    for (variant, causal) in [(0, false), (0, true), (1, false), (1, true), (2, false)] {
        let g = Graph::new();
        let (qi, ki, vi) = (
            g.input("q", DType::F64, [b, sq, d]),
            g.input("k", DType::F64, [b, sk, d]),
            g.input("v", DType::F64, [b, sk, dv]),
        );
        let mut ins = vec![q.clone(), k.clone(), v.clone()];
        let mask = match variant {
            1 => {
                ins.push(ti(DType::Bool, &[sq, sk], &bool_mask));
                Some(g.input("m", DType::Bool, [sq, sk]))
            }
            2 => {
                ins.push(float_mask.clone());
                Some(g.input("m", DType::F64, [1, sq, sk]))
            }
            _ => None,
        };
        let y = run1(&g, &qi.attention(&ki, &vi, mask.as_ref(), Some(0.7), causal), &ins);
        assert_eq!(y.shape, vec![b, sq, dv]);
        let mut want = Vec::new();
        for bi in 0..b {
            let keep = |i: usize, j: usize| !(causal && j > i) && (variant != 1 || bool_mask[i * sk + j] != 0);
            let add = |i: usize, j: usize| if variant == 2 { fm[i * sk + j] } else { 0.0 };
            want.extend(naive_attention(
                &qv[bi * sq * d..][..sq * d],
                &kv[bi * sk * d..][..sk * d],
                &vv[bi * sk * dv..][..sk * dv],
                (sq, sk, d, dv),
                0.7,
                keep,
                add,
            ));
        }
        close(&y.to_f64_vec(), &want, 1e-13);
    }
    // A fully masked row is NaN, as the formula gives.
    let g = Graph::new();
    let (qi, ki, vi) =
        (g.input("q", DType::F64, [1, 2]), g.input("k", DType::F64, [2, 2]), g.input("v", DType::F64, [2, 1]));
    let m = g.input("m", DType::Bool, [1, 2]);
    let y = run1(
        &g,
        &qi.attention(&ki, &vi, Some(&m), None, false),
        &[
            t64(&[1, 2], &[1.0, 0.0]),
            t64(&[2, 2], &[1.0, 0.0, 0.0, 1.0]),
            t64(&[2, 1], &[1.0, 2.0]),
            ti(DType::Bool, &[1, 2], &[0, 0]),
        ],
    );
    assert!(y.to_f64_vec()[0].is_nan());
}

#[test]
fn input_errors_name_the_input() {
    let g = Graph::new();
    let x = g.input("x", DType::F32, [2, 3]);
    let y = g.input("y", DType::F32, [3]);
    g.output(&(&x + &y));
    let good = [HostTensor::f32([2, 3], vec![0.0; 6]).unwrap(), HostTensor::f32([3], vec![0.0; 3]).unwrap()];
    assert!(run(&g, &good).is_ok());
    let expect_input_err = |ins: &[HostTensor], needles: &[&str]| match run(&g, ins) {
        Err(Error::Input(msg)) => {
            for n in needles {
                assert!(msg.contains(n), "{msg:?} lacks {n:?}");
            }
        }
        other => panic!("expected an input error, got {other:?}"),
    };
    expect_input_err(&good[..1], &["expected 2 input", "got 1"]);
    expect_input_err(&[good[0].clone(), ti(DType::I32, &[3], &[0; 3])], &["\"y\"", "f32", "i32"]);
    expect_input_err(&[HostTensor::f32([6], vec![0.0; 6]).unwrap(), good[1].clone()], &["\"x\"", "[2, 3]", "[6]"]);
    expect_input_err(&[HostTensor::f32([3, 2], vec![0.0; 6]).unwrap(), good[1].clone()], &["\"x\"", "[3, 2]"]);
    let malformed = HostTensor { shape: vec![2, 3], data: TensorData::F32(vec![0.0; 5]) };
    expect_input_err(&[malformed, good[1].clone()], &["\"x\"", "5 elements"]);
}

#[test]
fn symbolic_dims_bind_from_inputs() {
    let g = Graph::new();
    let x = g.input("x", DType::F64, vec![Dim::sym("n"), Dim::Static(2)]);
    let y = g.input("y", DType::F64, vec![Dim::sym("n")]);
    let s = x.sum(&[1], false) + &y;
    g.output(&s.reshape(vec![Dim::Static(1), Dim::sym("n")]));
    for n in [1usize, 3, 5] {
        let xs = t64(&[n, 2], &seq(2 * n));
        let ys = t64(&[n], &vec![100.0; n]);
        let r = run(&g, &[xs, ys]).unwrap().remove(0);
        assert_eq!(r.shape, vec![1, n]);
        let want: Vec<f64> = (0..n).map(|i| (4 * i + 1) as f64 + 100.0).collect();
        close(&r.to_f64_vec(), &want, 0.0);
    }
    match run(&g, &[t64(&[3, 2], &seq(6)), t64(&[4], &seq(4))]) {
        Err(Error::Input(msg)) => assert!(msg.contains("symbol n") && msg.contains('3') && msg.contains('4'), "{msg}"),
        other => panic!("expected a binding conflict, got {other:?}"),
    }
    // specialize on its own.
    let ir = g.build().unwrap();
    let s = specialize(&ir, &HashMap::from([("n".to_string(), 7)])).unwrap();
    assert!(s.nodes.iter().all(|n| n.ty.shape.is_static()));
    assert_eq!(s.ty(s.outputs[0].node).shape.as_static(), Some(vec![1, 7]));
    assert!(matches!(specialize(&ir, &HashMap::new()), Err(Error::Input(_))));
}

#[test]
fn run_named_eval_all_and_dead_nodes() {
    let g = Graph::new();
    let a = g.input("a", DType::I32, [2]);
    let b = g.input("b", DType::I32, [2]);
    let _dead = &a / &(&b * 0.0); // integer division by zero, unused
    g.output_named("sum", &(&a + &b));
    let ins = [("b", ti(DType::I32, &[2], &[10, 20])), ("a", ti(DType::I32, &[2], &[1, 2]))];
    let r = run_named(&g, &ins).unwrap();
    assert_eq!(r[0].data, TensorData::I32(vec![11, 22]));
    assert!(matches!(run_named(&g, &ins[..1]), Err(Error::Input(_))));
    assert!(matches!(run_named(&g, &[ins[0].clone(), ins[0].clone()]), Err(Error::Input(_))));
    assert!(matches!(run_named(&g, &[ins[0].clone(), ("c", ins[1].1.clone())]), Err(Error::Input(_))));
    // eval_all evaluates the dead division too.
    let ir = g.build().unwrap();
    let plain = [ti(DType::I32, &[2], &[1, 2]), ti(DType::I32, &[2], &[10, 20])];
    let all = eval_all(&ir, &plain).unwrap();
    let div = ir.nodes.iter().position(|n| matches!(n.op, Op::Binary(BinaryOp::Div))).unwrap();
    assert_eq!(all[div].data, TensorData::I32(vec![0, 0]), "integer division by zero gives 0");
    let g = Graph::new();
    let a = g.input("a", DType::F64, [2]);
    g.output(&(a.exp() * 2.0));
    let ir = g.build().unwrap();
    let all = eval_all(&ir, &[t64(&[2], &[0.0, 1.0])]).unwrap();
    assert_eq!(all.len(), ir.nodes.len());
    close(&all[1].to_f64_vec(), &[1.0, std::f64::consts::E], 0.0);
    close(&all[3].to_f64_vec(), &[2.0, 2.0 * std::f64::consts::E], 0.0);
}

#[test]
fn constants_and_unverified_graphs() {
    let g = Graph::new();
    let c = g.constant(t64(&[2], &[1.5, 2.5]));
    let x = g.input("x", DType::F64, [2]);
    let y = run1(&g, &(&c * &x), &[t64(&[2], &[2.0, 2.0])]);
    close(&y.to_f64_vec(), &[3.0, 5.0], 0.0);
    // A graph that fails verification is refused before anything runs.
    let mut ir = g.build().unwrap();
    ir.nodes.last_mut().unwrap().ty.dtype = DType::F32;
    assert!(matches!(run(&ir, &[t64(&[2], &[2.0, 2.0])]), Err(Error::Verify(_))));
}

#[test]
fn moderate_sizes_run_quickly() {
    // Not a benchmark: a guard that the reference stays usable at test sizes in the dev profile.
    let start = std::time::Instant::now();
    let g = Graph::new();
    let a = g.input("a", DType::F32, [256, 256]);
    let b = g.input("b", DType::F32, [256, 256]);
    g.output(&a.matmul(&b));
    let ta = HostTensor::random(DType::F32, vec![256, 256], 1, -1.0, 1.0);
    let tb = HostTensor::random(DType::F32, vec![256, 256], 2, -1.0, 1.0);
    run(&g, &[ta, tb]).unwrap();
    let t_mm = start.elapsed();
    let start = std::time::Instant::now();
    let g = Graph::new();
    let x = g.input("x", DType::F32, [64, 1024]);
    g.output(&x.softmax(-1));
    run(&g, &[HostTensor::random(DType::F32, vec![64, 1024], 3, -5.0, 5.0)]).unwrap();
    let t_sm = start.elapsed();
    let start = std::time::Instant::now();
    let g = Graph::new();
    let x = g.input("x", DType::F32, [2, 3, 32, 32]);
    let w1 = g.input("w1", DType::F32, [16, 3, 3, 3]);
    let w2 = g.input("w2", DType::F32, [32, 16, 3, 3]);
    let h = x.conv2d(&w1, None, [1, 1], [1; 4], [1, 1], 1).relu().max_pool2d([2, 2], [2, 2], [0; 4]);
    let h = h.conv2d(&w2, None, [1, 1], [1; 4], [1, 1], 1).gelu().global_avg_pool2d();
    g.output(&h);
    let ins = [
        HostTensor::random(DType::F32, vec![2, 3, 32, 32], 4, -1.0, 1.0),
        HostTensor::random(DType::F32, vec![16, 3, 3, 3], 5, -1.0, 1.0),
        HostTensor::random(DType::F32, vec![32, 16, 3, 3], 6, -1.0, 1.0),
    ];
    run(&g, &ins).unwrap();
    let t_cnn = start.elapsed();
    println!("matmul 256^3 {t_mm:?}, softmax 64x1024 {t_sm:?}, conv net {t_cnn:?}");
    for t in [t_mm, t_sm, t_cnn] {
        assert!(t.as_secs_f64() < 5.0, "too slow: {t:?}");
    }
}
