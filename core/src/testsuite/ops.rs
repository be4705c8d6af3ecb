//! Elementwise cases: every [`UnaryOp`] and [`BinaryOp`] on f32 (bool for the logical ones) with
//! inputs in the op's domain plus its special values, casts from every dtype to every dtype,
//! comparisons feeding `where`.

use super::cases::{SHAPES_2D, SIZES, case, each};
use super::{Builder, Case, Dist, Tol};
use crate::dtype::DType;
use crate::ir::{BinaryOp, UnaryOp};

const NAN: f64 = f64::NAN;
const INF: f64 = f64::INFINITY;

/// The elementwise cases, in list order.
pub(crate) fn cases() -> Vec<Case> {
    let mut v: Vec<Case> = UnaryOp::ALL
        .into_iter()
        .map(|op| {
            case(format!("unary_{}", op.name()), move || {
                let (d, dist, tol) = unary_setup(op);
                each(&SIZES, |n| {
                    let mut b = Builder::new();
                    let x = b.input(d, &[n], dist.clone());
                    let y = x.unary(op);
                    b.finish(format!("n={n}"), tol, &[&y])
                })
            })
        })
        .collect();
    v.extend(BinaryOp::ALL.into_iter().map(|op| {
        case(format!("binary_{}", op.name()), move || {
            let (d, da, db, tol) = binary_setup(op);
            each(&SIZES, |n| {
                let mut b = Builder::new();
                let x = b.input(d, &[n], da.clone());
                let z = b.input(d, &[n], db.clone());
                b.finish(format!("n={n}"), tol, &[&x.binary(op, &z)])
            })
        })
    }));
    v.extend(DType::ALL.into_iter().map(|from| case(format!("cast_from_{}", from.name()), move || casts(from))));
    v.push(case("compare_where", compare_where));
    v.push(case("where_broadcast", where_broadcast));
    v.push(case("div_by_constant_zero", div_by_constant_zero));
    v.push(case("int_div_by_zero", int_div_by_zero));
    v
}

/// Input dtype, distribution and bound of a unary op's case.
fn unary_setup(op: UnaryOp) -> (DType, Dist, Tol) {
    use UnaryOp::*;
    let general = vec![NAN, INF, -INF, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.5, -1.5, 3.5];
    let f = DType::F32;
    match op {
        Not => (DType::Bool, Dist::Uniform(0.0, 2.0), Tol::EXACT),
        Neg | Abs | Relu | Floor | Ceil | Round | Sign | IsNan | IsInf => {
            (f, Dist::Specials(-6.0, 6.0, general), Tol::EXACT)
        }
        Reciprocal => (f, Dist::Specials(0.5, 10.0, general), Tol::ROUNDED),
        Log | Sqrt | Rsqrt => {
            (f, Dist::Specials(0.01, 20.0, vec![NAN, INF, 0.0, -0.0, 1.0, -1.0, 1e-30]), Tol::ROUNDED)
        }
        Asin | Acos | Atanh => {
            (f, Dist::Specials(-0.99, 0.99, vec![NAN, 0.0, -0.0, 0.5, 2.0, 1.0, -1.0]), Tol::ROUNDED)
        }
        Acosh => (f, Dist::Specials(1.0, 30.0, vec![NAN, 1.0, 0.5, 1e20, INF]), Tol::ROUNDED),
        Tan => (f, Dist::Specials(-1.4, 1.4, vec![NAN, 0.0, -0.0, 1e-3, -1e-3, 3.0, INF]), Tol::ROUNDED),
        // Argument reduction of |x| <= 100 costs about |x| ulps of the argument: 1e-5 absolute.
        Sin | Cos => (
            f,
            Dist::Specials(-100.0, 100.0, vec![NAN, 0.0, -0.0, 1e-3, -1e-3, 3.0, INF, -INF]),
            Tol { abs: 2e-5, ..Tol::ROUNDED },
        ),
        Atan | Asinh => {
            (f, Dist::Specials(-6.0, 6.0, vec![NAN, INF, -INF, 0.0, -0.0, 1e-3, -1e-3, 1e4, -1e4]), Tol::ROUNDED)
        }
        Exp | Sinh | Cosh => {
            (f, Dist::Specials(-20.0, 20.0, vec![NAN, INF, -INF, 0.0, -0.0, 1e-3, 100.0, -100.0]), Tol::ROUNDED)
        }
        Erf => (f, Dist::Specials(-3.0, 3.0, vec![NAN, INF, -INF, 0.0, 1e-4, -1e-4, 0.5, -0.5, 10.0]), Tol::ROUNDED),
        Tanh | Sigmoid => {
            (f, Dist::Specials(-8.0, 8.0, vec![NAN, INF, -INF, 0.0, 1e-4, 50.0, -50.0, 100.0, -100.0]), Tol::ROUNDED)
        }
    }
}

/// Input dtype, distributions of both operands and bound of a binary op's case. Floats get
/// special pairs first: NaN on each side, infinities, signed zeros, equal values, negative bases.
fn binary_setup(op: BinaryOp) -> (DType, Dist, Dist, Tol) {
    use BinaryOp::*;
    if op.is_logical() {
        return (DType::Bool, Dist::Uniform(0.0, 2.0), Dist::Uniform(0.0, 2.0), Tol::EXACT);
    }
    let a = vec![NAN, 1.0, INF, -3.0, 0.0, 2.5, -2.0, -2.0, -INF, 7.0, 0.0];
    let b = vec![1.0, NAN, 2.0, INF, -0.0, 2.5, 3.0, 0.5, -INF, -0.0, 0.0];
    let (lo, hi, blo) = if op == Pow { (0.1, 3.0, -3.0) } else { (-8.0, 8.0, -8.0) };
    let tol = match op {
        // Correctly rounded in IEEE arithmetic (f32 result of an exact f64 op rounded once).
        Add | Sub | Mul | Max | Min | Eq | Ne | Lt | Le | Gt | Ge => Tol::EXACT,
        _ => Tol::ROUNDED,
    };
    (DType::F32, Dist::Specials(lo, hi, a), Dist::Specials(blo, hi, b), tol)
}

/// Casts from `from` to every dtype: targets that the 32-bit integer emulations hold (WGSL's
/// i64/u64) in one graph with out-of-range and special values, the 64-bit integers on values in
/// their common range, f64 and the fp8 types on their own (a backend without them must refuse
/// only those graphs). The specials include values past fp8's range (overflow to NaN or
/// infinity) and halfway cases of its grid (ties to even).
fn casts(from: DType) -> Result<Vec<super::Instance>, String> {
    let narrow: Vec<DType> =
        DType::ALL.into_iter().filter(|d| !matches!(d, DType::F64 | DType::I64 | DType::U64) && !d.is_fp8()).collect();
    let groups: [(&str, Vec<DType>, bool); 4] = [
        ("narrow", narrow, true),
        ("64-bit", vec![DType::I64, DType::U64], false),
        ("f64", vec![DType::F64], true),
        ("fp8", vec![DType::F8E4M3, DType::F8E5M2], true),
    ];
    let signed = from.is_float() || from.is_signed_int();
    let mut out = Vec::new();
    for (group, targets, wide) in groups {
        // Floats: specials, halves (truncation toward zero), values past 255 and 65535 (wrapping).
        let specials = if group == "fp8" {
            vec![NAN, INF, -INF, 0.0, -0.0, 1.0625, 1.1875, -1.375, 464.0, 470.0, -500.0, 61440.0, 1e-3, 2.5, -2.5]
        } else if wide {
            vec![NAN, INF, -INF, 0.0, -0.0, 0.5, -0.5, 2.5, -2.5, 255.5, 70000.0, -70000.0, 1e9, -1e9]
        } else {
            vec![NAN, 0.0, -0.0, 0.5, 2.5, 255.5, 40000.0]
        };
        let (lo, hi) = match (signed, wide) {
            (true, true) => (-300.0, 300.0),
            // Non-negative values of every source dtype (i8 holds up to 127).
            _ => (0.0, 100.0),
        };
        let dist = if from.is_float() { Dist::Specials(lo, hi, specials) } else { Dist::Uniform(lo, hi) };
        for n in [1usize, 1023] {
            let mut b = Builder::new();
            let x = b.input(from, &[n], dist.clone());
            let ys: Vec<_> = targets.iter().map(|&t| x.cast(t)).collect();
            let refs: Vec<&_> = ys.iter().collect();
            out.push(b.finish(format!("{group} n={n}"), Tol::EXACT, &refs)?);
        }
    }
    Ok(out)
}

/// `where(x > y, x, y * 2)` and `where(x <= y, x - y, 0.5)` with `y` broadcast over rows.
fn compare_where() -> Result<Vec<super::Instance>, String> {
    each(&SHAPES_2D, |(r, c)| {
        let mut b = Builder::new();
        let x = b.input(DType::F32, &[r, c], Dist::Steps(-4.0, 4.0));
        let y = b.input(DType::F32, &[c], Dist::Steps(-4.0, 4.0));
        let half = b.graph().scalar(DType::F32, 0.5);
        let p = x.gt(&y).where_(&x, &(&y * 2.0));
        let q = x.le(&y).where_(&(&x - &y), &half);
        let ne = x.ne(&y);
        b.finish(format!("{r}x{c}"), Tol::EXACT, &[&p, &q, &ne])
    })
}

/// `where` with a `[rows, 1]` condition, a full operand and a scalar, on f32 and i32.
fn where_broadcast() -> Result<Vec<super::Instance>, String> {
    each(&SHAPES_2D, |(r, c)| {
        let mut b = Builder::new();
        let cond = b.input(DType::Bool, &[r, 1], Dist::Uniform(0.0, 2.0));
        let x = b.input(DType::F32, &[r, c], Dist::Uniform(-3.0, 3.0));
        let i = b.input(DType::I32, &[c], Dist::Uniform(-50.0, 50.0));
        let s = b.graph().scalar(DType::F32, -1.25);
        let k = b.graph().scalar(DType::I32, 7.0);
        let y = cond.where_(&x, &s);
        let z = cond.where_(&k, &i);
        b.finish(format!("{r}x{c}"), Tol::EXACT, &[&y, &z])
    })
}

/// Division by a constant ±0 (a literal in the kernel, so the renderer or the shader compiler may
/// fold it): IEEE results (±inf, NaN for 0/0 and NaN/0), also through a QuantizeLinear-style
/// round/clamp/cast with scale 0; `mod` and `fmod` by ±0 are NaN.
fn div_by_constant_zero() -> Result<Vec<super::Instance>, String> {
    each(&SIZES, |n| {
        let mut b = Builder::new();
        let specials = vec![0.0, -0.0, NAN, INF, -INF, 1.0, -1.0, 1e-30];
        let x = b.input(DType::F32, &[n], Dist::Specials(-4.0, 4.0, specials));
        let zero = b.graph().scalar(DType::F32, 0.0);
        let neg_zero = b.graph().scalar(DType::F32, -0.0);
        let p = &x / &zero;
        let q = &x / &neg_zero;
        let quant = (&x / &zero).unary(UnaryOp::Round).clamp(0.0, 255.0).cast(DType::U8);
        let m = x.binary(BinaryOp::Mod, &zero);
        let f = x.binary(BinaryOp::FMod, &neg_zero);
        let z = &x * &zero;
        b.finish(format!("n={n}"), Tol::EXACT, &[&p, &q, &quant, &m, &f, &z])
    })
}

/// Integer `div`, `mod`, `fmod` by run-time zeros and -1 (`MIN / -1` wraps), and `pow` with
/// negative exponents, in i32, u8 and i64 (within i32): `core::scalar`'s values (0 by zero, 0 for
/// a negative exponent), which kernels must compute since they cannot report errors.
fn int_div_by_zero() -> Result<Vec<super::Instance>, String> {
    let mut out = Vec::new();
    for d in [DType::I32, DType::U8, DType::I64] {
        let signed = d != DType::U8;
        // i64: MIN_i32 / -1 = 2^31 would leave WGSL's 32-bit emulation of i64 (a separate limit).
        let min = if d == DType::I64 { i32::MIN as f64 + 1.0 } else { i32::MIN as f64 };
        let (a, b, lo) = if signed {
            (
                vec![min, min, 7.0, -7.0, 5.0, 0.0, -3.0, 1.0, -1.0, -1.0],
                vec![0.0, -1.0, 0.0, 0.0, -1.0, 0.0, 2.0, -3.0, -3.0, -2.0],
                -9.0,
            )
        } else {
            (vec![7.0, 255.0, 0.0, 3.0], vec![0.0, 0.0, 0.0, 1.0], 0.0)
        };
        for n in [SIZES[2], SIZES[3]] {
            let mut bld = Builder::new();
            let x = bld.input(d, &[n], Dist::Specials(lo, 9.0, a.clone()));
            let y = bld.input(d, &[n], Dist::Specials(lo, 3.0, b.clone()));
            let outs: Vec<_> = [BinaryOp::Div, BinaryOp::Mod, BinaryOp::FMod, BinaryOp::Pow]
                .into_iter()
                .filter(|&op| op != BinaryOp::Pow || d == DType::I32)
                .map(|op| x.binary(op, &y))
                .collect();
            let refs: Vec<&_> = outs.iter().collect();
            out.push(bld.finish(format!("{d} n={n}"), Tol::EXACT, &refs)?);
        }
    }
    Ok(out)
}
