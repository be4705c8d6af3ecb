//! Property tests: random graphs of elementwise ops with broadcasting, optionally ending in a
//! reduction over random axes, built with the tracing API, verified, run on the interpreter, and
//! compared with an independent scalar evaluator that recomputes every output element from the
//! input coordinates it reads.

use super::run;
use crate::dtype::DType;
use crate::error::Error;
use crate::ir::{BinaryOp, ReduceOp, UnaryOp};
use crate::tensor::HostTensor;
use crate::trace::{Graph, Tensor};
use proptest::prelude::*;

const FLOAT_UNARY: [UnaryOp; 15] = [
    UnaryOp::Neg,
    UnaryOp::Abs,
    UnaryOp::Exp,
    UnaryOp::Sin,
    UnaryOp::Cos,
    UnaryOp::Tanh,
    UnaryOp::Relu,
    UnaryOp::Floor,
    UnaryOp::Ceil,
    UnaryOp::Round,
    UnaryOp::Sqrt,
    UnaryOp::Log,
    UnaryOp::Sign,
    UnaryOp::Reciprocal,
    UnaryOp::Atan,
];
const FLOAT_BINARY: [BinaryOp; 9] = [
    BinaryOp::Add,
    BinaryOp::Sub,
    BinaryOp::Mul,
    BinaryOp::Div,
    BinaryOp::Max,
    BinaryOp::Min,
    BinaryOp::Pow,
    BinaryOp::Mod,
    BinaryOp::FMod,
];
const INT_UNARY: [UnaryOp; 4] = [UnaryOp::Neg, UnaryOp::Abs, UnaryOp::Relu, UnaryOp::Sign];
const INT_BINARY: [BinaryOp; 8] = [
    BinaryOp::Add,
    BinaryOp::Sub,
    BinaryOp::Mul,
    BinaryOp::Max,
    BinaryOp::Min,
    BinaryOp::Div,
    BinaryOp::Mod,
    BinaryOp::FMod,
];
const REDUCE: [ReduceOp; 5] = [ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Max, ReduceOp::Min, ReduceOp::Mean];

/// One step of a random program; operand fields index earlier values modulo their count.
#[derive(Clone, Debug)]
enum Step {
    Unary {
        op: usize,
        a: usize,
    },
    Binary {
        op: usize,
        a: usize,
        b: usize,
    },
    /// `where(v[a] > v[b], v[b], v[c])`.
    Select {
        a: usize,
        b: usize,
        c: usize,
    },
}

#[derive(Clone, Debug)]
struct Program {
    /// The full broadcast shape every value fits in.
    base: Vec<usize>,
    /// Input shapes: a suffix of `base` with some extents replaced by 1.
    inputs: Vec<Vec<usize>>,
    steps: Vec<Step>,
    /// Reduce the last value: (axis mask, keepdim, op index).
    reduce: Option<(u8, bool, usize)>,
    seed: u64,
}

fn program() -> impl Strategy<Value = Program> {
    let base = prop::collection::vec(1usize..=4, 0..=3);
    let inputs = prop::collection::vec((any::<usize>(), any::<u8>()), 1..=3);
    let step = (0usize..3, any::<usize>(), any::<usize>(), any::<usize>(), any::<usize>());
    let steps = prop::collection::vec(step, 1..=6);
    let reduce = prop::option::of((any::<u8>(), any::<bool>(), any::<usize>()));
    (base, inputs, steps, reduce, any::<u64>()).prop_map(|(base, inputs, steps, reduce, seed)| {
        let inputs = inputs
            .into_iter()
            .map(|(r, mask)| {
                let r = r % (base.len() + 1);
                let suffix = &base[base.len() - r..];
                suffix.iter().enumerate().map(|(i, &d)| if mask >> i & 1 == 1 { 1 } else { d }).collect()
            })
            .collect();
        let steps = steps
            .into_iter()
            .map(|(kind, op, a, b, c)| match kind {
                0 => Step::Unary { op, a },
                1 => Step::Binary { op, a, b },
                _ => Step::Select { a, b, c },
            })
            .collect();
        Program { base, inputs, steps, reduce, seed }
    })
}

/// NumPy broadcast of two shapes known to be compatible (both fit `base`).
fn bshape(a: &[usize], b: &[usize]) -> Vec<usize> {
    let r = a.len().max(b.len());
    let get = |s: &[usize], i: usize| if i + s.len() >= r { s[i + s.len() - r] } else { 1 };
    (0..r).map(|i| get(a, i).max(get(b, i))).collect()
}

/// The flat index of the element of a tensor of `shape` that broadcasting reads at coordinate
/// `c` of the full base shape.
fn flat_at(shape: &[usize], c: &[usize]) -> usize {
    let lead = c.len() - shape.len();
    shape.iter().enumerate().fold(0, |acc, (i, &d)| acc * d + if d == 1 { 0 } else { c[lead + i] })
}

/// All coordinates of `shape` in row-major order.
fn coords(shape: &[usize]) -> Vec<Vec<usize>> {
    let mut out = vec![vec![]];
    for &d in shape {
        out = out.into_iter().flat_map(|c| (0..d).map(move |i| [c.clone(), vec![i]].concat())).collect();
    }
    out
}

/// The program's values as (operand ids, shape) in order: inputs first, then steps.
struct Plan {
    shapes: Vec<Vec<usize>>,
    /// For each step, its resolved operand value ids.
    operands: Vec<Vec<usize>>,
}

fn plan(p: &Program) -> Plan {
    let mut shapes = p.inputs.clone();
    let mut operands = Vec::new();
    for s in &p.steps {
        let n = shapes.len();
        let ids: Vec<usize> = match *s {
            Step::Unary { a, .. } => vec![a % n],
            Step::Binary { a, b, .. } => vec![a % n, b % n],
            Step::Select { a, b, c } => vec![a % n, b % n, c % n],
        };
        let shape = ids.iter().fold(vec![], |acc, &i| bshape(&acc, &shapes[i]));
        shapes.push(shape);
        operands.push(ids);
    }
    Plan { shapes, operands }
}

/// The reduced axes (of the final value) and the result shape.
fn reduce_axes(mask: u8, keepdim: bool, shape: &[usize]) -> (Vec<usize>, Vec<usize>) {
    let axes: Vec<usize> = (0..shape.len()).filter(|&i| mask >> i & 1 == 1).collect();
    let out = shape
        .iter()
        .enumerate()
        .filter_map(|(i, &d)| if axes.contains(&i) { keepdim.then_some(1) } else { Some(d) })
        .collect();
    (axes, out)
}

/// Builds the program with the tracing API.
fn build(p: &Program, pl: &Plan, dtype: DType, unary: &[UnaryOp], binary: &[BinaryOp]) -> Graph {
    let g = Graph::new();
    let mut vals: Vec<Tensor> =
        p.inputs.iter().enumerate().map(|(i, s)| g.input(&format!("in{i}"), dtype, s.clone())).collect();
    for (s, ids) in p.steps.iter().zip(&pl.operands) {
        let v = match *s {
            Step::Unary { op, .. } => vals[ids[0]].unary(unary[op % unary.len()]),
            Step::Binary { op, .. } => vals[ids[0]].binary(binary[op % binary.len()], &vals[ids[1]]),
            Step::Select { .. } => vals[ids[0]].gt(&vals[ids[1]]).where_(&vals[ids[1]], &vals[ids[2]]),
        };
        vals.push(v);
    }
    let last = vals.last().cloned().unwrap_or_else(|| g.scalar(dtype, 0.0));
    let out = match p.reduce {
        Some((mask, keepdim, op)) => {
            let (axes, _) = reduce_axes(mask, keepdim, &last.shape().as_static().unwrap_or_default());
            let axes: Vec<i64> = axes.iter().map(|&a| a as i64).collect();
            let ops: Vec<ReduceOp> =
                REDUCE.iter().copied().filter(|r| dtype.is_float() || *r != ReduceOp::Mean).collect();
            last.reduce(ops[op % ops.len()], &axes, keepdim)
        }
        None => last,
    };
    g.output(&out);
    g
}

// ---------------------------------------------------------------- the independent evaluators

fn un_f(op: UnaryOp, x: f64) -> f64 {
    match op {
        UnaryOp::Neg => -x,
        UnaryOp::Abs => x.abs(),
        UnaryOp::Exp => x.exp(),
        UnaryOp::Sin => x.sin(),
        UnaryOp::Cos => x.cos(),
        UnaryOp::Tanh => x.tanh(),
        UnaryOp::Relu => {
            if x.is_nan() || x > 0.0 {
                x
            } else {
                0.0
            }
        }
        UnaryOp::Floor => x.floor(),
        UnaryOp::Ceil => x.ceil(),
        UnaryOp::Round => x.round_ties_even(),
        UnaryOp::Sqrt => x.sqrt(),
        UnaryOp::Log => x.ln(),
        UnaryOp::Sign => {
            if x.is_nan() || x == 0.0 {
                if x.is_nan() { x } else { 0.0 }
            } else {
                x.signum()
            }
        }
        UnaryOp::Reciprocal => 1.0 / x,
        UnaryOp::Atan => x.atan(),
        other => panic!("not generated: {other:?}"),
    }
}

fn bin_f(op: BinaryOp, a: f64, b: f64) -> f64 {
    match op {
        BinaryOp::Add => a + b,
        BinaryOp::Sub => a - b,
        BinaryOp::Mul => a * b,
        BinaryOp::Div => a / b,
        BinaryOp::Max => {
            if a.is_nan() || b.is_nan() {
                f64::NAN
            } else {
                a.max(b)
            }
        }
        BinaryOp::Min => {
            if a.is_nan() || b.is_nan() {
                f64::NAN
            } else {
                a.min(b)
            }
        }
        BinaryOp::Pow => a.powf(b),
        // Python's floored modulo: the result takes the divisor's sign.
        BinaryOp::Mod => {
            let r = a % b;
            if r != 0.0 && (r < 0.0) != (b < 0.0) { r + b } else { r }
        }
        BinaryOp::FMod => a % b,
        other => panic!("not generated: {other:?}"),
    }
}

/// Float program value `v` at base coordinate `c`; `round` emulates the storage dtype.
fn eval_f(p: &Program, pl: &Plan, ins: &[Vec<f64>], v: usize, c: &[usize], round: &dyn Fn(f64) -> f64) -> f64 {
    let ni = p.inputs.len();
    if v < ni {
        return ins[v][flat_at(&p.inputs[v], c)];
    }
    let ids = &pl.operands[v - ni];
    let arg = |k: usize| eval_f(p, pl, ins, ids[k], c, round);
    round(match p.steps[v - ni] {
        Step::Unary { op, .. } => un_f(FLOAT_UNARY[op % FLOAT_UNARY.len()], arg(0)),
        Step::Binary { op, .. } => bin_f(FLOAT_BINARY[op % FLOAT_BINARY.len()], arg(0), arg(1)),
        Step::Select { .. } => {
            if arg(0) > arg(1) {
                arg(1)
            } else {
                arg(2)
            }
        }
    })
}

fn un_i(op: UnaryOp, x: i32) -> i32 {
    match op {
        UnaryOp::Neg => x.wrapping_neg(),
        UnaryOp::Abs => x.wrapping_abs(),
        UnaryOp::Relu => x.max(0),
        UnaryOp::Sign => x.signum(),
        other => panic!("not generated: {other:?}"),
    }
}

fn bin_i(op: BinaryOp, a: i32, b: i32) -> Result<i32, ()> {
    Ok(match op {
        BinaryOp::Add => a.wrapping_add(b),
        BinaryOp::Sub => a.wrapping_sub(b),
        BinaryOp::Mul => a.wrapping_mul(b),
        BinaryOp::Max => a.max(b),
        BinaryOp::Min => a.min(b),
        BinaryOp::Div | BinaryOp::Mod | BinaryOp::FMod if b == 0 => 0,
        BinaryOp::Div => a.wrapping_div(b),
        BinaryOp::Mod => {
            let r = a.wrapping_rem(b);
            if r != 0 && (r < 0) != (b < 0) { r + b } else { r }
        }
        BinaryOp::FMod => a.wrapping_rem(b),
        other => panic!("not generated: {other:?}"),
    })
}

/// Integer program value at a base coordinate; `Err` when a division by zero is met. Every
/// operand is evaluated (no short-circuit in `where`), as the interpreter evaluates both branches.
fn eval_i(p: &Program, pl: &Plan, ins: &[Vec<i64>], v: usize, c: &[usize]) -> Result<i32, ()> {
    let ni = p.inputs.len();
    if v < ni {
        return Ok(ins[v][flat_at(&p.inputs[v], c)] as i32);
    }
    let ids = &pl.operands[v - ni];
    let args: Vec<i32> = ids.iter().map(|&i| eval_i(p, pl, ins, i, c)).collect::<Result<_, _>>()?;
    match p.steps[v - ni] {
        Step::Unary { op, .. } => Ok(un_i(INT_UNARY[op % INT_UNARY.len()], args[0])),
        Step::Binary { op, .. } => bin_i(INT_BINARY[op % INT_BINARY.len()], args[0], args[1]),
        Step::Select { .. } => Ok(if args[0] > args[1] { args[1] } else { args[2] }),
    }
}

/// Evaluates the whole program per output element with `elem` (value at a base coordinate) and
/// `combine` for reductions; returns the expected shape and elements.
fn expected<T: Copy>(
    p: &Program,
    pl: &Plan,
    elem: &dyn Fn(&[usize]) -> Result<T, ()>,
    reduce: &dyn Fn(ReduceOp, &[T]) -> T,
    float: bool,
) -> Result<(Vec<usize>, Vec<T>), ()> {
    let last = pl.shapes.len() - 1;
    let shape = &pl.shapes[last];
    let lead = p.base.len() - shape.len();
    let base_coord = |o: &[usize]| {
        let mut c = vec![0; p.base.len()];
        c[lead..].copy_from_slice(o);
        c
    };
    match p.reduce {
        None => {
            let v = coords(shape).iter().map(|o| elem(&base_coord(o))).collect::<Result<_, _>>()?;
            Ok((shape.clone(), v))
        }
        Some((mask, keepdim, op)) => {
            let ops: Vec<ReduceOp> = REDUCE.iter().copied().filter(|r| float || *r != ReduceOp::Mean).collect();
            let op = ops[op % ops.len()];
            let (axes, out_shape) = reduce_axes(mask, keepdim, shape);
            let kept: Vec<usize> = (0..shape.len()).filter(|a| !axes.contains(a)).collect();
            let kept_shape: Vec<usize> = kept.iter().map(|&a| shape[a]).collect();
            let red_shape: Vec<usize> = axes.iter().map(|&a| shape[a]).collect();
            let mut out = Vec::new();
            for k in coords(&kept_shape) {
                let mut items = Vec::new();
                for r in coords(&red_shape) {
                    let mut o = vec![0; shape.len()];
                    kept.iter().zip(&k).for_each(|(&a, &i)| o[a] = i);
                    axes.iter().zip(&r).for_each(|(&a, &i)| o[a] = i);
                    items.push(elem(&base_coord(&o))?);
                }
                out.push(reduce(op, &items));
            }
            Ok((out_shape, out))
        }
    }
}

fn reduce_f(op: ReduceOp, xs: &[f64]) -> f64 {
    let nanmax = |a: f64, b: f64| if a.is_nan() || b.is_nan() { f64::NAN } else { a.max(b) };
    let nanmin = |a: f64, b: f64| if a.is_nan() || b.is_nan() { f64::NAN } else { a.min(b) };
    match op {
        ReduceOp::Sum => xs.iter().fold(0.0, |a, &b| a + b),
        ReduceOp::Mean => xs.iter().fold(0.0, |a, &b| a + b) / xs.len() as f64,
        ReduceOp::Prod => xs.iter().fold(1.0, |a, &b| a * b),
        ReduceOp::Max => xs.iter().copied().fold(f64::NEG_INFINITY, nanmax),
        ReduceOp::Min => xs.iter().copied().fold(f64::INFINITY, nanmin),
    }
}

fn reduce_i(op: ReduceOp, xs: &[i32]) -> i32 {
    match op {
        ReduceOp::Sum => xs.iter().fold(0i32, |a, &b| a.wrapping_add(b)),
        ReduceOp::Prod => xs.iter().fold(1i32, |a, &b| a.wrapping_mul(b)),
        ReduceOp::Max => xs.iter().copied().max().unwrap_or(i32::MIN),
        ReduceOp::Min => xs.iter().copied().min().unwrap_or(i32::MAX),
        ReduceOp::Mean => panic!("not generated for integers"),
    }
}

fn same_float(a: f64, b: f64) -> bool {
    (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= 1e-12 * (1.0 + b.abs())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn float_programs_match_scalar_evaluation(p in program(), f32_storage in any::<bool>()) {
        let dtype = if f32_storage { DType::F32 } else { DType::F64 };
        let pl = plan(&p);
        let g = build(&p, &pl, dtype, &FLOAT_UNARY, &FLOAT_BINARY);
        let ir = g.build().map_err(|e| TestCaseError::fail(format!("build: {e}")))?;
        let ins: Vec<HostTensor> = p.inputs.iter().enumerate()
            .map(|(i, s)| HostTensor::random(dtype, s.clone(), p.seed.wrapping_add(i as u64), -3.0, 3.0))
            .collect();
        let got = run(&ir, &ins).map_err(|e| TestCaseError::fail(format!("run: {e}")))?.remove(0);
        let vals: Vec<Vec<f64>> = ins.iter().map(HostTensor::to_f64_vec).collect();
        let round = move |x: f64| if f32_storage { x as f32 as f64 } else { x };
        let last = pl.shapes.len() - 1;
        let elem = |c: &[usize]| Ok(eval_f(&p, &pl, &vals, last, c, &round));
        let red = |op, xs: &[f64]| round(reduce_f(op, xs));
        let (shape, want) = expected(&p, &pl, &elem, &red, true).map_err(|_| TestCaseError::fail("float eval failed"))?;
        prop_assert_eq!(&got.shape, &shape);
        prop_assert_eq!(got.dtype(), dtype);
        let gv = got.to_f64_vec();
        for (i, (&a, &b)) in gv.iter().zip(&want).enumerate() {
            prop_assert!(same_float(a, b), "element {}: interpreter {} vs scalar {} (program {:?})", i, a, b, p);
        }
    }

    #[test]
    fn int_programs_match_scalar_evaluation(p in program()) {
        let pl = plan(&p);
        let g = build(&p, &pl, DType::I32, &INT_UNARY, &INT_BINARY);
        let ir = g.build().map_err(|e| TestCaseError::fail(format!("build: {e}")))?;
        let ins: Vec<HostTensor> = p.inputs.iter().enumerate()
            .map(|(i, s)| HostTensor::random(DType::I32, s.clone(), p.seed.wrapping_add(i as u64), -20.0, 20.0))
            .collect();
        let got = run(&ir, &ins);
        let vals: Vec<Vec<i64>> = ins.iter().map(HostTensor::to_i64_vec).collect();
        let last = pl.shapes.len() - 1;
        let elem = |c: &[usize]| eval_i(&p, &pl, &vals, last, c);
        match (got, expected(&p, &pl, &elem, &reduce_i, false)) {
            (Ok(mut got), Ok((shape, want))) => {
                let got = got.remove(0);
                prop_assert_eq!(&got.shape, &shape);
                prop_assert_eq!(got.to_i64_vec(), want.iter().map(|&x| x as i64).collect::<Vec<_>>());
            }
            (Err(Error::Eval { msg, .. }), Err(())) => prop_assert!(msg.contains("by zero"), "{}", msg),
            (got, want) => prop_assert!(false, "interpreter {:?} vs scalar {:?} (program {:?})", got, want.map(|(s, _)| s), p),
        }
    }
}
