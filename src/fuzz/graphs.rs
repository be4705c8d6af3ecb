//! Random small graphs through the tracing API, with inputs and per-output error bounds.
//!
//! Each value carries what its bound needs: the largest magnitude it may reach, the terms
//! accumulated into it, the float ops on its path, the coarsest float precision it passed through
//! (f32 = 1, f16 = 200, bf16 = 1600, as [`sinter_core::testsuite::Tol::bounds`] scales), and
//! whether it is exact (only exact values are cast to integers or arg-reduced, so a rounding
//! difference cannot flip an integer).

use super::{RngExt, SplitMix64};
use sinter_core::ir::UnaryOp;
use sinter_core::trace::{Graph, Tensor};
use sinter_core::{DType, HostTensor};

/// A random graph with its inputs and one `(rtol, atol)` per output.
pub struct RandomGraph {
    /// The graph (may hold a recorded error if the generator erred; `build` reports it).
    pub graph: Graph,
    /// One tensor per graph input.
    pub inputs: Vec<HostTensor>,
    /// Float outputs' `(rtol, atol)` (ignored for integer outputs, compared exactly).
    pub bounds: Vec<(f64, f64)>,
    /// The ops, in order, for reports.
    pub desc: String,
}

#[derive(Clone)]
struct Val {
    t: Tensor,
    shape: Vec<usize>,
    dtype: DType,
    mag: f64,
    terms: f64,
    ops: f64,
    scale: f64,
    exact: bool,
}

const DIMS: [usize; 12] = [1, 1, 2, 3, 4, 5, 7, 8, 13, 16, 17, 33];

fn precision(d: DType) -> f64 {
    match d {
        DType::F16 => 200.0,
        DType::BF16 => 1600.0,
        _ => 1.0,
    }
}

struct Gen {
    g: Graph,
    rng: SplitMix64,
    inputs: Vec<HostTensor>,
    desc: Vec<String>,
}

impl Gen {
    fn input(&mut self, dtype: DType, shape: Vec<usize>) -> Val {
        let name = format!("x{}", self.inputs.len());
        let t = self.g.input(&name, dtype, shape.clone());
        let seed = self.rng.next_u64();
        let (lo, hi) = if dtype.is_float() { (-2.0, 2.0) } else { (-8.0, 8.0) };
        self.inputs.push(HostTensor::random(dtype, shape.clone(), seed, lo, hi));
        self.desc.push(format!("{name}: {dtype}{shape:?}"));
        Val { t, shape, dtype, mag: 8.0, terms: 0.0, ops: 0.0, scale: precision(dtype), exact: true }
    }

    fn shape(&mut self) -> Vec<usize> {
        let rank = 1 + self.rng.below(3);
        (0..rank).map(|_| self.rng.pick(&DIMS)).collect()
    }

    /// One random op on `v` (or `v` unchanged when the pick does not apply).
    fn step(&mut self, mut v: Val) -> Val {
        if v.shape.is_empty() {
            v.t = v.t.reshape(vec![1]);
            v.shape = vec![1];
        }
        let float = v.dtype.is_float();
        let rank = v.shape.len();
        let r = self.rng.below(14);
        let mut out = v.clone();
        let d = |s: &str| s.to_string();
        let what = match r {
            0 | 1 if float => {
                let (op, mag) = match self.rng.below(8) {
                    0 => (UnaryOp::Tanh, 1.0),
                    1 => (UnaryOp::Sigmoid, 1.0),
                    2 => (UnaryOp::Sin, 1.0),
                    3 => (UnaryOp::Cos, 1.0),
                    4 if v.mag <= 4.0 => (UnaryOp::Exp, v.mag.exp()),
                    5 => (UnaryOp::Relu, v.mag),
                    6 => (UnaryOp::Abs, v.mag),
                    _ => (UnaryOp::Neg, v.mag),
                };
                out.t = v.t.unary(op);
                out.mag = mag;
                out.ops += if op == UnaryOp::Exp { 1.0 + v.mag } else { 1.0 };
                out.exact &= matches!(op, UnaryOp::Relu | UnaryOp::Abs | UnaryOp::Neg);
                format!("{op:?}")
            }
            0 | 1 => {
                let op = if self.rng.chance(0.5) { UnaryOp::Neg } else { UnaryOp::Abs };
                out.t = v.t.unary(op);
                format!("{op:?}")
            }
            2..=4 => {
                // Binary with a fresh input of the same or a broadcast shape.
                let mut s = v.shape.clone();
                for x in s.iter_mut() {
                    if self.rng.chance(0.3) {
                        *x = 1;
                    }
                }
                if self.rng.chance(0.2) && s.len() > 1 {
                    s.remove(0);
                }
                let w = self.input(v.dtype, s);
                let (op, name) = match self.rng.below(5) {
                    0 => (sinter_core::ir::BinaryOp::Add, "add"),
                    1 => (sinter_core::ir::BinaryOp::Sub, "sub"),
                    2 => (sinter_core::ir::BinaryOp::Mul, "mul"),
                    3 => (sinter_core::ir::BinaryOp::Max, "max"),
                    _ => (sinter_core::ir::BinaryOp::Min, "min"),
                };
                let (a, b) = if self.rng.chance(0.5) { (&v.t, &w.t) } else { (&w.t, &v.t) };
                out.t = a.binary(op, b);
                out.mag = match name {
                    "mul" => v.mag * w.mag,
                    "max" | "min" => v.mag.max(w.mag),
                    _ => v.mag + w.mag,
                };
                out.ops += 1.0;
                out.exact &= matches!(name, "max" | "min") || !float;
                format!("{name} with {}", self.inputs.len() - 1)
            }
            5 => {
                let c = [0.5, 2.0, -1.5, 3.0][self.rng.below(4)];
                out.t = v.t.binary_scalar(sinter_core::ir::BinaryOp::Mul, if float { c } else { 3.0 });
                out.mag *= 3.0;
                out.ops += 1.0;
                out.exact &= !float;
                format!("mul {c}")
            }
            6 | 7 => {
                let axis = self.rng.below(rank);
                let keep = self.rng.chance(0.5);
                let len = v.shape[axis] as f64;
                let k = self.rng.below(if float { 4 } else { 3 });
                out.t = match k {
                    0 => v.t.sum(&[axis as i64], keep),
                    1 => v.t.max(&[axis as i64], keep),
                    2 => v.t.min(&[axis as i64], keep),
                    _ => v.t.mean(&[axis as i64], keep),
                };
                if k == 0 {
                    out.mag *= len;
                }
                if k == 0 || k == 3 {
                    out.terms += len;
                    out.ops += 1.0;
                    out.exact &= !float;
                }
                out.shape = reduced(&v.shape, axis, keep);
                format!("{} axis {axis} keep {keep}", ["sum", "max", "min", "mean"][k])
            }
            8 if float => {
                let axis = self.rng.below(rank);
                out.t = v.t.softmax(axis as i64 - rank as i64 * (self.rng.below(2) as i64));
                out.terms += v.shape[axis] as f64;
                out.ops += 4.0 + v.mag;
                out.mag = 1.0;
                out.exact = false;
                format!("softmax axis {axis}")
            }
            9 if float => {
                let k = v.shape[rank - 1];
                let n = self.rng.pick(&DIMS);
                let bshape = if rank >= 3 && self.rng.chance(0.5) { vec![v.shape[0], k, n] } else { vec![k, n] };
                let w = self.input(v.dtype, bshape);
                let (t, shape) = if rank == 1 {
                    (v.t.unsqueeze(0).matmul(&w.t), vec![1, n])
                } else {
                    let mut s = v.shape.clone();
                    s[rank - 1] = n;
                    (v.t.matmul(&w.t), s)
                };
                out.t = t;
                out.shape = shape;
                out.mag = v.mag * w.mag * k as f64;
                out.terms += k as f64;
                out.ops += 1.0;
                out.exact = false;
                format!("matmul with {} (n={n})", self.inputs.len() - 1)
            }
            10 => {
                let n: usize = v.shape.iter().product();
                let s = if self.rng.chance(0.5) || !n.is_multiple_of(2) || n < 2 { vec![n] } else { vec![2, n / 2] };
                out.t = v.t.reshape(s.clone());
                out.shape = s.clone();
                format!("reshape {s:?}")
            }
            11 if rank >= 2 => {
                let (a, b) = (self.rng.below(rank), self.rng.below(rank));
                out.t = v.t.transpose(a as i64, b as i64);
                out.shape.swap(a, b);
                format!("transpose {a} {b}")
            }
            12 => {
                let axis = self.rng.below(rank);
                let n = v.shape[axis];
                if n < 2 {
                    out.t = v.t.unsqueeze(0).expand({
                        let mut s = vec![3];
                        s.extend(&v.shape);
                        s
                    });
                    out.shape.insert(0, 3);
                    "unsqueeze+expand 3".into()
                } else {
                    let start = self.rng.below(n - 1);
                    let end = start + 1 + self.rng.below(n - start);
                    let step = 1 + self.rng.below(2);
                    out.t = v.t.slice(axis as i64, start as i64, end as i64, step as i64);
                    out.shape[axis] = (end - start).div_ceil(step);
                    format!("slice axis {axis} {start}..{end} step {step}")
                }
            }
            _ => {
                // Casts: between float types, int -> float, exact float -> i32.
                let to = if float {
                    if v.exact && self.rng.chance(0.3) {
                        DType::I32
                    } else {
                        self.rng.pick(&[DType::F32, DType::F16, DType::BF16])
                    }
                } else {
                    self.rng.pick(&[DType::F32, DType::F16, DType::BF16, DType::I32])
                };
                out.t = v.t.cast(to);
                out.dtype = to;
                out.scale = out.scale.max(precision(to));
                out.exact = v.exact && (!to.is_float() || !float);
                if !float && to.is_float() {
                    // Integers up to 8 * 2^k: exact in f32; f16/bf16 may round large ones.
                    out.exact = to == DType::F32;
                }
                format!("cast {to}")
            }
        };
        self.desc.push(d(&what));
        out
    }
}

fn reduced(shape: &[usize], axis: usize, keep: bool) -> Vec<usize> {
    let mut s = shape.to_vec();
    if keep {
        s[axis] = 1;
    } else {
        s.remove(axis);
    }
    s
}

/// The `(rtol, atol)` of a value: op roundings at its coarsest precision, accumulation at f32.
fn bound(v: &Val) -> (f64, f64) {
    let u = 2f64.powi(-24);
    let scale = v.scale.max(precision(v.dtype));
    let rtol = 4e-5 * (v.ops + 2.0) * scale + 4.0 * v.terms * u;
    (rtol, rtol * v.mag.max(1.0))
}

/// A random graph of 1 to 6 ops on 1 to 4 inputs (dtype f32 mostly, else f16, bf16 or i32),
/// with one or two outputs; every choice follows `seed`.
pub fn random_graph(seed: u64) -> RandomGraph {
    let mut gn = Gen { g: Graph::new(), rng: SplitMix64::new(seed), inputs: Vec::new(), desc: Vec::new() };
    let dtype = match gn.rng.below(10) {
        0..=5 => DType::F32,
        6 => DType::F16,
        7 => DType::BF16,
        _ => DType::I32,
    };
    let shape = gn.shape();
    let mut v = gn.input(dtype, shape);
    let mut outs = Vec::new();
    let n = 1 + gn.rng.below(6);
    for _ in 0..n {
        v = gn.step(v);
        // Keep ranks small: 4-d values come only from unsqueeze; flatten them back.
        if v.shape.len() > 3 {
            let total: usize = v.shape.iter().product();
            v.t = v.t.reshape(vec![total]);
            v.shape = vec![total];
        }
        if gn.rng.chance(0.15) && outs.len() < 2 {
            outs.push(v.clone());
        }
    }
    outs.push(v);
    let bounds = outs.iter().map(bound).collect();
    for o in &outs {
        gn.g.output(&o.t);
    }
    RandomGraph { graph: gn.g, inputs: gn.inputs, bounds, desc: gn.desc.join(", ") }
}
