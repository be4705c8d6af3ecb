//! Movement, gather and reduction cases: broadcasting, expand/reshape, permutes, slices with
//! steps, every pad mode, concatenation, gathers with negative indices, and sum/max/min/mean/prod/
//! argmax/argmin over the last axis, a middle axis and all axes, with rows of 1 and 4097 elements
//! and NaN/infinity propagation.

use super::cases::{case, each};
use super::{Builder, Case, Dist, Instance, Tol};
use crate::dtype::DType;
use crate::ir::{PadMode, ReduceOp};

const NAN: f64 = f64::NAN;
const INF: f64 = f64::INFINITY;
const F: DType = DType::F32;

/// `[outer, axis, inner]` shapes for reductions over the middle axis.
const SHAPES_3D: [[usize; 3]; 4] = [[2, 1, 3], [3, 7, 5], [2, 1023, 3], [1, 4097, 2]];

/// Last-axis reduction shapes: rows of 1 to 4097 elements, and 4097 rows of 3.
const ROWS: [(usize, usize); 6] = [(1, 1), (7, 1), (5, 7), (3, 1023), (2, 4097), (4097, 3)];

/// The movement, gather and reduction cases, in list order.
pub(crate) fn cases() -> Vec<Case> {
    let mut v = vec![
        case("broadcast_binary", broadcast_binary),
        case("expand_reshape", expand_reshape),
        case("permute_2d", permute_2d),
        case("permute_3d", permute_3d),
        case("slice_step", slice_step),
        case("slice_reverse", slice_reverse),
        case("pad_constant", || pad(PadMode::Constant(-2.5))),
        case("pad_reflect", || pad(PadMode::Reflect)),
        case("pad_edge", || pad(PadMode::Edge)),
        case("pad_wrap", || pad(PadMode::Wrap)),
        case("concat_last", || concat(-1)),
        case("concat_first", || concat(0)),
        case("gather_embedding", gather_embedding),
        case("gather_axis1", gather_axis1),
        case("gather_elements", gather_elements),
        case("gather_out_of_range", gather_out_of_range),
    ];
    for (name, op) in [
        ("sum", ReduceOp::Sum),
        ("max", ReduceOp::Max),
        ("min", ReduceOp::Min),
        ("mean", ReduceOp::Mean),
        ("prod", ReduceOp::Prod),
    ] {
        v.push(case(format!("reduce_{name}_last"), move || reduce_last(op)));
        v.push(case(format!("reduce_{name}_middle"), move || reduce_middle(op)));
        if op == ReduceOp::Sum {
            v.push(case("reduce_sum_all", reduce_sum_all));
        }
    }
    v.push(case("reduce_split_rows", reduce_split_rows));
    v.push(case("reduce_max_special", reduce_max_special));
    v.push(case("argmax_last", || arg_last(true)));
    v.push(case("argmax_middle", argmax_middle));
    v.push(case("argmin_last", || arg_last(false)));
    v.push(case("argmax_special", argmax_special));
    v
}

/// `x + b[c]`, `x * s[r, 1]` and the outer difference `u[1, c] - w[r, 1]`.
fn broadcast_binary() -> Result<Vec<Instance>, String> {
    each(&[(1, 1), (7, 3), (3, 1023), (4097, 2)], |(r, c)| {
        let mut b = Builder::new();
        let x = b.input(F, &[r, c], Dist::Uniform(-2.0, 2.0));
        let bias = b.input(F, &[c], Dist::Uniform(-1.0, 1.0));
        let s = b.input(F, &[r, 1], Dist::Uniform(-1.0, 1.0));
        let u = b.input(F, &[1, c], Dist::Uniform(-1.0, 1.0));
        let y = &x + &bias;
        let z = &x * &s;
        let o = &u - &s;
        b.finish(format!("{r}x{c}"), Tol::EXACT, &[&y, &z, &o])
    })
}

/// A row expanded to `[r, c]`, reshaped to `[c, r]` and added to a full tensor.
fn expand_reshape() -> Result<Vec<Instance>, String> {
    each(&[(1, 1), (7, 5), (3, 1023), (2, 4097)], |(r, c)| {
        let mut b = Builder::new();
        let x = b.input(F, &[c], Dist::Uniform(-2.0, 2.0));
        let y = b.input(F, &[c, r], Dist::Uniform(-2.0, 2.0));
        let z = x.expand(vec![r, c]).reshape(vec![c, r]) + &y;
        b.finish(format!("{r}x{c}"), Tol::EXACT, &[&z])
    })
}

/// A transpose, alone and feeding arithmetic.
fn permute_2d() -> Result<Vec<Instance>, String> {
    each(&[(1, 1), (7, 5), (33, 1023), (4097, 3)], |(r, c)| {
        let mut b = Builder::new();
        let x = b.input(F, &[r, c], Dist::Uniform(-2.0, 2.0));
        let y = b.input(F, &[c, r], Dist::Uniform(-2.0, 2.0));
        let t = x.transpose(0, 1);
        let s = &t * 2.0 + &y;
        b.finish(format!("{r}x{c}"), Tol::EXACT, &[&t, &s])
    })
}

/// Rank-3 permutations (a rotation and a swap of the outer axes).
fn permute_3d() -> Result<Vec<Instance>, String> {
    each(&[[1, 1, 1], [3, 7, 5], [2, 33, 65], [1, 4097, 3]], |s| {
        let mut b = Builder::new();
        let x = b.input(F, &s, Dist::Uniform(-2.0, 2.0));
        let p = x.permute(&[2, 0, 1]);
        let q = x.permute(&[1, 0, 2]).relu();
        b.finish(format!("{s:?}"), Tol::EXACT, &[&p, &q])
    })
}

/// Strided slices `[1:-1:2]` on the last axis and `[::3]` on the first.
fn slice_step() -> Result<Vec<Instance>, String> {
    each(&[(1, 3), (7, 7), (3, 1023), (2, 4097)], |(r, c)| {
        let mut b = Builder::new();
        let x = b.input(F, &[r, c], Dist::Uniform(-2.0, 2.0));
        let a = x.slice(-1, 1, -1, 2);
        let d = x.slice(0, 0, r as i64, 3).exp();
        b.finish(format!("{r}x{c}"), Tol::ROUNDED, &[&a, &d])
    })
}

/// Negative steps: the last axis reversed, and every other row from the end.
fn slice_reverse() -> Result<Vec<Instance>, String> {
    each(&[(1, 1), (7, 7), (3, 1023), (2, 4097)], |(r, c)| {
        let mut b = Builder::new();
        let x = b.input(F, &[r, c], Dist::Uniform(-2.0, 2.0));
        let rev = x.slice(-1, -1, i64::MIN, -1);
        let rows = x.slice(0, -1, i64::MIN, -2) * 3.0;
        b.finish(format!("{r}x{c}"), Tol::EXACT, &[&rev, &rows])
    })
}

/// A pad of `(2, 3)` on the last axis and `(1, 0)` on the first, plus a crop `(-1, 2)` (with
/// more than one column).
fn pad(mode: PadMode) -> Result<Vec<Instance>, String> {
    // Reflect needs more elements than the pad on each side.
    let shapes: &[(usize, usize)] = if mode == PadMode::Reflect {
        &[(2, 4), (7, 7), (3, 1023), (2, 4097)]
    } else {
        &[(1, 1), (7, 7), (3, 1023), (2, 4097)]
    };
    each(shapes, |(r, c)| {
        let mut b = Builder::new();
        let x = b.input(F, &[r, c], Dist::Uniform(-2.0, 2.0));
        let p = x.pad(&[(1, 0), (2, 3)], mode);
        if c == 1 {
            // Cropping the only column would leave nothing to pad from.
            return b.finish(format!("{r}x{c}"), Tol::EXACT, &[&p]);
        }
        let crop = x.pad(&[(0, 1), (-1, 2)], mode) + 1.0;
        b.finish(format!("{r}x{c}"), Tol::EXACT, &[&p, &crop])
    })
}

/// Three tensors of different extents concatenated along `axis`.
fn concat(axis: i64) -> Result<Vec<Instance>, String> {
    each(&[1usize, 7, 1023, 4097], |n| {
        let mut b = Builder::new();
        let shape = |k: usize| if axis == 0 { vec![k, 3] } else { vec![3, k] };
        let x = b.input(F, &shape(n), Dist::Uniform(-2.0, 2.0));
        let y = b.input(F, &shape(1), Dist::Uniform(-2.0, 2.0));
        let z = b.input(F, &shape(5), Dist::Uniform(-2.0, 2.0));
        let c = b.graph().concat(&[&x, &y, &z], axis);
        let d = b.graph().concat(&[&z, &x.neg()], axis) * 2.0;
        b.finish(format!("n={n}"), Tol::EXACT, &[&c, &d])
    })
}

/// An embedding lookup with i64 ids (negative ids count from the end), then a scale.
fn gather_embedding() -> Result<Vec<Instance>, String> {
    each(&[(1usize, 1usize, 1usize), (7, 5, 3), (50, 3, 1023), (4097, 2, 7)], |(vocab, n, dim)| {
        let mut b = Builder::new();
        let table = b.input(F, &[vocab, dim], Dist::Uniform(-2.0, 2.0));
        let v = vocab as f64;
        let ids = b.input(DType::I64, &[2, n], Dist::Uniform(-v, v));
        let e = table.embedding(&ids);
        let s = &e * 0.5;
        b.finish(format!("vocab={vocab} ids=2x{n} dim={dim}"), Tol::EXACT, &[&e, &s])
    })
}

/// `take` along axis 1 with i32 indices.
fn gather_axis1() -> Result<Vec<Instance>, String> {
    each(&[(1usize, 1usize, 1usize), (5, 7, 9), (3, 1023, 17), (2, 9, 4097)], |(r, c, k)| {
        let mut b = Builder::new();
        let x = b.input(F, &[r, c], Dist::Uniform(-2.0, 2.0));
        let idx = b.input(DType::I32, &[k], Dist::Uniform(-(c as f64), c as f64));
        let y = x.gather(1, &idx);
        b.finish(format!("{r}x{c} take {k}"), Tol::EXACT, &[&y])
    })
}

/// Elementwise gathers along each axis.
fn gather_elements() -> Result<Vec<Instance>, String> {
    each(&[(1usize, 1usize), (5, 7), (3, 1023), (2, 4097)], |(r, c)| {
        let mut b = Builder::new();
        let x = b.input(F, &[r, c], Dist::Uniform(-2.0, 2.0));
        let i1 = b.input(DType::I64, &[r, c], Dist::Uniform(0.0, c as f64));
        let i0 = b.input(DType::I64, &[r, c], Dist::Uniform(-(r as f64), r as f64));
        let a = x.gather_elements(1, &i1);
        let d = x.gather_elements(0, &i0);
        b.finish(format!("{r}x{c}"), Tol::EXACT, &[&a, &d])
    })
}

/// Out-of-range gather indices (far below `-n` and far above `n`; i64 ones within the i32 range
/// WGSL's emulation takes, i32 and u8): every backend clamps them into `0..n` after one negative
/// wrap, as the CPU reference does.
fn gather_out_of_range() -> Result<Vec<Instance>, String> {
    each(&[(1usize, 1usize, 7usize), (5, 7, 9), (3, 1023, 17)], |(r, c, k)| {
        let mut b = Builder::new();
        let x = b.input(F, &[r, c], Dist::Uniform(-2.0, 2.0));
        let span = 4.0 * c as f64 + 8.0;
        let i64s = b.input(DType::I64, &[k], Dist::Specials(-span, span, vec![-2e9, 2e9, -(c as f64) - 1.0]));
        let i32s = b.input(DType::I32, &[r, k], Dist::Uniform(-span, span));
        let u8s = b.input(DType::U8, &[k], Dist::Uniform(0.0, 256.0));
        let a = x.gather(1, &i64s);
        let d = x.gather(0, &i32s);
        let e = x.gather(1, &u8s);
        let ie = b.input(DType::I64, &[r, c], Dist::Uniform(-span, span));
        let f = x.gather_elements(1, &ie);
        b.finish(format!("{r}x{c} take {k}"), Tol::EXACT, &[&a, &d, &e, &f])
    })
}

/// Input range and error bound of a reduction over `len` elements.
fn reduce_setup(op: ReduceOp, len: usize) -> (Dist, Tol) {
    match op {
        ReduceOp::Sum => (Dist::Uniform(-1.0, 1.0), Tol::sum(len, 1.0)),
        ReduceOp::Mean => (Dist::Uniform(-1.0, 1.0), Tol::sum(len, 1.0 / len as f64)),
        // The relative error of a product grows with the number of factors.
        ReduceOp::Prod => (Dist::Uniform(0.95, 1.05), Tol { rel: 1e-5, abs: 1e-6, terms: len as f64, magnitude: 1.0 }),
        ReduceOp::Max | ReduceOp::Min => (Dist::Uniform(-100.0, 100.0), Tol::EXACT),
    }
}

/// A reduction over the last axis, with and without keepdim (the keepdim result used in a
/// broadcast).
fn reduce_last(op: ReduceOp) -> Result<Vec<Instance>, String> {
    each(&ROWS, |(r, c)| {
        let (dist, tol) = reduce_setup(op, c);
        let mut b = Builder::new();
        let x = b.input(F, &[r, c], dist);
        let y = x.reduce(op, &[-1], false);
        b.finish(format!("{r}x{c}"), tol, &[&y])
    })
}

/// A reduction over the middle axis of `[outer, len, inner]`.
fn reduce_middle(op: ReduceOp) -> Result<Vec<Instance>, String> {
    each(&SHAPES_3D, |s| {
        let (dist, tol) = reduce_setup(op, s[1]);
        let mut b = Builder::new();
        let x = b.input(F, &s, dist);
        let y = x.reduce(op, &[1], true);
        b.finish(format!("{s:?}"), tol, &[&y])
    })
}

/// Sums over every axis (a scalar), and over the two outer axes of a rank-3 tensor.
fn reduce_sum_all() -> Result<Vec<Instance>, String> {
    each(&[[1usize, 1, 1], [3, 7, 5], [2, 1023, 3], [1, 3, 4097]], |s| {
        let mut b = Builder::new();
        let x = b.input(F, &s, Dist::Uniform(-1.0, 1.0));
        let all = x.sum(&[0, 1, 2], false);
        let outer = x.sum(&[0, 1], false);
        b.finish(format!("{s:?}"), Tol::sum(s.iter().product(), 1.0), &[&all, &outer])
    })
}

/// Rows few and long enough that a backend splits each over blocks or kernels: an odd length (one
/// element a step, a ragged last chunk) and a length of 16-byte groups; an f32 sum, an f32 max
/// and an i64 sum (8-byte partials), each of its own input so that each is a kernel of one
/// reduction.
fn reduce_split_rows() -> Result<Vec<Instance>, String> {
    each(&[(1usize, 100_003usize), (3, 40_960)], |(r, c)| {
        let mut b = Builder::new();
        let x = b.input(F, &[r, c], Dist::Uniform(-1.0, 1.0));
        let y = b.input(F, &[r, c], Dist::Uniform(-100.0, 100.0));
        let z = b.input(DType::I64, &[r, c], Dist::Uniform(-1000.0, 1000.0));
        let s = x.reduce(ReduceOp::Sum, &[-1], false);
        let m = y.reduce(ReduceOp::Max, &[-1], false);
        let t = z.reduce(ReduceOp::Sum, &[-1], false);
        b.finish(format!("{r}x{c}"), Tol::sum(c, 1.0), &[&s, &m, &t])
    })
}

/// Max and min over rows holding NaN, infinities and signed zeros (NaN propagates).
fn reduce_max_special() -> Result<Vec<Instance>, String> {
    let specials = vec![NAN, 1.0, -INF, 2.0, INF, -1.0, -0.0, 0.0, -INF, -INF];
    each(&[(3usize, 2usize), (5, 7), (3, 1023), (2, 4097)], |(r, c)| {
        let mut b = Builder::new();
        let x = b.input(F, &[r, c], Dist::Specials(-100.0, 100.0, specials.clone()));
        let mx = x.max(&[-1], false);
        let mn = x.min(&[-1], false);
        b.finish(format!("{r}x{c}"), Tol::EXACT, &[&mx, &mn])
    })
}

/// Arg-max (or arg-min) over the last axis, on integer-valued floats (many ties: the first
/// index wins) and on i32.
fn arg_last(max: bool) -> Result<Vec<Instance>, String> {
    each(&ROWS, |(r, c)| {
        let mut b = Builder::new();
        let x = b.input(F, &[r, c], Dist::Steps(0.0, 6.0));
        let i = b.input(DType::I32, &[r, c], Dist::Uniform(-20.0, 20.0));
        let (y, z) =
            if max { (x.argmax(-1, false), i.argmax(-1, true)) } else { (x.argmin(-1, false), i.argmin(-1, true)) };
        b.finish(format!("{r}x{c}"), Tol::EXACT, &[&y, &z])
    })
}

/// Arg-max over the middle axis.
fn argmax_middle() -> Result<Vec<Instance>, String> {
    each(&SHAPES_3D, |s| {
        let mut b = Builder::new();
        let x = b.input(F, &s, Dist::Steps(-5.0, 5.0));
        let y = x.argmax(1, false);
        b.finish(format!("{s:?}"), Tol::EXACT, &[&y])
    })
}

/// Arg-max and arg-min over rows with NaN (its index wins) and infinities.
fn argmax_special() -> Result<Vec<Instance>, String> {
    let specials = vec![1.0, NAN, INF, 2.0, -INF, NAN, INF, INF, -INF, -INF];
    each(&[(3usize, 2usize), (5, 7), (3, 1023), (2, 4097)], |(r, c)| {
        let mut b = Builder::new();
        let x = b.input(F, &[r, c], Dist::Specials(-10.0, 10.0, specials.clone()));
        let mx = x.argmax(-1, false);
        let mn = x.argmin(-1, false);
        b.finish(format!("{r}x{c}"), Tol::EXACT, &[&mx, &mn])
    })
}
