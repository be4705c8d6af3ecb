//! Narrow evaluation of 64-bit integers: whether a kernel's i64/u64 values come out exactly when every
//! one of them is computed in wrapping 32-bit arithmetic (`i32` for i64, `u32` for u64), as the WGSL
//! backend does (WGSL has no 64-bit integers; its buffers still hold 8 bytes per element).
//!
//! # Contract
//!
//! [`check`] returns `Ok` only if, for every input whose 64-bit integer elements lie in the 32-bit
//! *window* (`[-2^31, 2^31 - 1]` for i64, `[0, 2^32 - 1]` for u64: the *load assumption*), the
//! 32-bit computation gives exactly the CPU reference's value ([`crate::scalar`]: 64-bit, wrapping)
//! wherever the kernel's results depend on it. Otherwise it returns an [`Overflow`] naming the first
//! value it cannot prove exact and the op that made it; a backend refuses the kernel with it, and the
//! compiler runs the kernel's nodes on the CPU reference instead (a graph break), so no wrong number
//! comes back. The load assumption is the backend's to keep: the WGSL backend checks every i64/u64
//! element it uploads, and its own stores of proven-exact values write only window values.
//!
//! # How
//!
//! 1. **Value ranges** (intervals in `i128`, u64 as its unsigned value): a load from a constant buffer
//!    of the program lies between the constant's least and greatest element (shape arithmetic and
//!    `Range` tables the compiler folded), a load from an intermediate in the hull of what the
//!    program's kernels store into it (each producer analysed the same way, up to 16 deep), any
//!    other 64-bit load (inputs) in the window, a narrower integer load in its dtype's range; a
//!    constant is itself, an index value the range of the index over the loop variables, an op the
//!    interval of its result; a result outside its dtype becomes the dtype's whole range (the
//!    reference wraps). A `Where` whose condition compares two
//!    integers narrows both in each branch, so Gather's negative-index rule `v < 0 ? v + n : v` is
//!    in the window although `v + n` alone is not. Reductions: a sum of `len` values in `[lo, hi]` is
//!    in `[len*lo, len*hi]`, a product's magnitude is at most `max(|lo|, |hi|)^len`, max/min keep the
//!    value's range, arg reductions give `[0, len - 1]`; a matmul's accumulator is `k` products.
//!    Floats get a range only as far as it bounds a float-to-integer cast (constants, min/max,
//!    floor/ceil/round, sums, selects: GridSample's coordinates clamped to the image before the cast
//!    to i64); a cast of an unbounded float is any 64-bit value.
//! 2. **Congruence**: add, sub, mul, neg, the base of an integer power, select, casts to integer
//!    dtypes, sum and product reductions and stores into integers of at most 32 bits commute with
//!    reduction modulo 2^32, so their 32-bit results are congruent to the reference's modulo 2^32
//!    even where they wrap. Every other use of a 64-bit value needs the exact value; it *observes*
//!    it: comparisons, division and remainders, min/max, abs/relu/sign/not, a power's exponent,
//!    casts to float or bool, use as an index, max/min/arg reductions, stores into 64-bit, float or
//!    bool buffers, and a sum/product accumulator read as a float or bool. Each of these ops, given
//!    exact operands, gives a result congruent to the reference's (`i32::MIN / -1` gives `i32::MIN`,
//!    congruent to 2^31, and `abs(i32::MIN)` likewise; float-to-integer casts keep the low 32 bits
//!    of the saturated 64-bit value).
//! 3. **The check**: every observed value's range must lie in the window. By induction in arena order
//!    every 32-bit value is then congruent to the reference's, and an observed one, congruent and in
//!    the window, equals it. Values no root depends on are not checked (they are not rendered).
//!
//! The analysis is conservative: a refusal means "not proven", e.g. any sum of two loaded i64
//! values (its range is twice the window) unless a later op provably brings it back (none does:
//! intervals do not track correlations).

use std::collections::{BTreeMap, HashMap};

use super::analysis::{closure, store_roots, var_range};
use super::{BufferKind, Expr, ExprId, Index, Kernel, KernelBody, Program, RedOp};
use crate::dtype::DType;
use crate::ir::{BinaryOp, UnaryOp};
use crate::scalar::{cast_int, float_to_int, is_unsigned};

/// An inclusive range of integer values (u64 values as unsigned).
pub type Interval = (i128, i128);

/// Nested refinements at most this deep are applied (deeper `Where`s use their unrefined ranges).
const MAX_REFINEMENTS: usize = 4;
/// Operand chains below a refined `Where` are re-evaluated at most this deep.
const MAX_DEPTH: usize = 256;

/// Why a kernel's 64-bit integers cannot be computed in 32 bits: a value that must be exact may lie
/// outside the 32-bit window.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "{dtype} {op} (v{expr}) may overflow 32-bit arithmetic: its values can reach {}, outside the 32-bit range, and {used_by} needs it exact",
    fmt_range(*.range)
)]
pub struct Overflow {
    /// The value (its expression id; for a reduction's accumulator, the id of the reduced value).
    pub expr: u32,
    /// Its dtype (i64 or u64).
    pub dtype: DType,
    /// The op that made it (`add`, `sum reduction`, `matmul accumulator`, ...).
    pub op: String,
    /// Its range (`None`: the dtype's whole range).
    pub range: Option<Interval>,
    /// What observes it (`a store to argument 2`, `div (v7)`, ...).
    pub used_by: String,
}

fn fmt_range(r: Option<Interval>) -> String {
    match r {
        Some((lo, hi)) => format!("[{lo}, {hi}]"),
        None => "any 64-bit value".to_string(),
    }
}

/// True for the dtypes this analysis is about.
pub fn is_wide_int(d: DType) -> bool {
    matches!(d, DType::I64 | DType::U64)
}

/// The values a 32-bit computation holds exactly for a dtype (its whole range below 64 bits).
pub fn window(d: DType) -> Option<Interval> {
    match d {
        DType::I64 => Some((i32::MIN.into(), i32::MAX.into())),
        DType::U64 => Some((0, u32::MAX.into())),
        _ => full(d),
    }
}

/// Every value of an integer or bool dtype; `None` for floats.
fn full(d: DType) -> Option<Interval> {
    Some(match d {
        DType::Bool => (0, 1),
        DType::I8 => (i8::MIN.into(), i8::MAX.into()),
        DType::I16 => (i16::MIN.into(), i16::MAX.into()),
        DType::I32 => (i32::MIN.into(), i32::MAX.into()),
        DType::I64 => (i64::MIN.into(), i64::MAX.into()),
        DType::U8 => (0, u8::MAX.into()),
        DType::U16 => (0, u16::MAX.into()),
        DType::U32 => (0, u32::MAX.into()),
        DType::U64 => (0, u64::MAX.into()),
        DType::F16 | DType::BF16 | DType::F32 | DType::F64 | DType::F8E4M3 | DType::F8E5M2 => return None,
    })
}

/// `r` as a value of `d`: itself when `d` holds all of it, else (the reference wraps) all of `d`.
fn fit(r: Option<Interval>, d: DType) -> Option<Interval> {
    let f = full(d)?;
    match r {
        Some((lo, hi)) if lo >= f.0 && hi <= f.1 && lo <= hi => Some((lo, hi)),
        _ => Some(f),
    }
}

/// True when `r` lies inside `w`.
fn inside(r: Option<Interval>, w: Option<Interval>) -> bool {
    matches!((r, w), (Some(r), Some(w)) if r.0 >= w.0 && r.1 <= w.1)
}

/// The intersection, `None` when empty.
fn meet(a: Interval, b: Interval) -> Option<Interval> {
    let r = (a.0.max(b.0), a.1.min(b.1));
    (r.0 <= r.1).then_some(r)
}

/// The smallest interval holding all of `xs` (`None` on an overflow, already `None` in `xs`).
fn hull(xs: &[Option<i128>]) -> Option<Interval> {
    let mut it = xs.iter();
    let first = (*it.next()?)?;
    let mut r = (first, first);
    for x in it {
        let x = (*x)?;
        r = (r.0.min(x), r.1.max(x));
    }
    Some(r)
}

fn mul_range(a: Interval, b: Interval) -> Option<Interval> {
    hull(&[a.0.checked_mul(b.0), a.0.checked_mul(b.1), a.1.checked_mul(b.0), a.1.checked_mul(b.1)])
}

fn neg_range(a: Interval) -> Interval {
    (-a.1, -a.0)
}

fn magnitude(a: Interval) -> i128 {
    a.0.abs().max(a.1.abs())
}

/// Truncating division: the extremes are at the corners of each sign of the divisor.
fn div_range(a: Interval, b: Interval) -> Option<Interval> {
    let mut xs: Vec<Option<i128>> = Vec::new();
    for d in [b.0, b.1, -1, 1] {
        if d != 0 && d >= b.0 && d <= b.1 {
            xs.push(a.0.checked_div(d));
            xs.push(a.1.checked_div(d));
        }
    }
    if b.0 <= 0 && b.1 >= 0 {
        xs.push(Some(0));
    }
    hull(&xs)
}

/// `a` raised to an exponent in `e` (negative exponents of signed integers give 0).
fn pow_range(a: Interval, e: Interval) -> Option<Interval> {
    let m = magnitude(a);
    let r = if m <= 1 {
        (a.0.max(-1), 1)
    } else {
        let top = u32::try_from(e.1.max(0)).ok()?;
        let p = m.checked_pow(top)?;
        if a.0 >= 0 { (0, p) } else { (-p, p) }
    };
    Some((r.0.min(0), r.1.max(1)))
}

fn unary_range(op: UnaryOp, a: Interval, d: DType) -> Option<Interval> {
    let unsigned = is_unsigned(d);
    Some(match op {
        UnaryOp::Neg => neg_range(a),
        UnaryOp::Abs | UnaryOp::Relu if unsigned => a,
        UnaryOp::Abs if a.0 >= 0 => a,
        UnaryOp::Abs if a.1 <= 0 => neg_range(a),
        UnaryOp::Abs => (0, magnitude(a)),
        UnaryOp::Relu => (a.0.max(0), a.1.max(0)),
        UnaryOp::Sign => (a.0.signum(), a.1.signum()),
        UnaryOp::Floor | UnaryOp::Ceil | UnaryOp::Round => a,
        _ => (0, 1),
    })
}

fn binary_range(op: BinaryOp, a: Interval, b: Interval) -> Option<Interval> {
    match op {
        BinaryOp::Add => Some((a.0 + b.0, a.1 + b.1)),
        BinaryOp::Sub => Some((a.0 - b.1, a.1 - b.0)),
        BinaryOp::Mul => mul_range(a, b),
        BinaryOp::Div => div_range(a, b),
        BinaryOp::Pow => pow_range(a, b),
        BinaryOp::Max => Some((a.0.max(b.0), a.1.max(b.1))),
        BinaryOp::Min => Some((a.0.min(b.0), a.1.min(b.1))),
        BinaryOp::Mod => {
            // Floored: the sign of the divisor, below its magnitude.
            let m = (magnitude(b) - 1).max(0);
            let lo = if b.0 >= 0 { 0 } else { -m };
            let hi = if b.1 <= 0 {
                0
            } else if a.0 >= 0 && b.0 >= 0 {
                m.min(a.1)
            } else {
                m
            };
            Some((lo, hi))
        }
        BinaryOp::FMod => {
            // Truncated: the sign of the dividend, below the divisor's magnitude.
            let m = (magnitude(b) - 1).max(0);
            Some((if a.0 >= 0 { 0 } else { a.0.max(-m) }, if a.1 <= 0 { 0 } else { a.1.min(m) }))
        }
        _ => Some((0, 1)),
    }
}

/// What a condition tells about integer operands in its two branches: `(expr, bound)` pairs.
type Facts = Vec<(u32, Interval)>;

/// Refinements (`env`): proven ranges of some expressions in the current branch.
type Env = BTreeMap<u32, Interval>;

struct Ranges<'k> {
    k: &'k Kernel,
    /// Ranges without refinements, in arena order.
    base: Vec<Option<Interval>>,
    /// The range of each reduction's (or the matmul's) accumulator.
    acc: Vec<Option<Interval>>,
    /// The range of the elements of each argument.
    loads: Vec<Option<Interval>>,
    /// Float ranges (for float-to-integer casts), in arena order.
    floats: Vec<Option<FRange>>,
}

/// A range of float values: `lo..=hi` (infinities allowed), and whether NaN is possible.
#[derive(Clone, Copy, Debug, PartialEq)]
struct FRange {
    lo: f64,
    hi: f64,
    nan: bool,
}

impl FRange {
    fn of(lo: f64, hi: f64, nan: bool) -> Option<FRange> {
        (!lo.is_nan() && !hi.is_nan() && lo <= hi).then_some(FRange { lo, hi, nan })
    }
}

/// The range of a float expression from its operands' (`None` for non-floats; an unbounded float is
/// `-inf..=inf` with NaN). Tracks what bounds a float before a cast to an integer: constants, min/max
/// (NaN-propagating), floor/ceil/round, sums and differences, selects, casts.
fn float_node(k: &Kernel, e: usize, floats: &[Option<FRange>], ints: &[Option<Interval>]) -> Option<FRange> {
    let te = k.exprs.get(e)?;
    if !te.dtype.is_float() {
        return None;
    }
    let any = FRange { lo: f64::NEG_INFINITY, hi: f64::INFINITY, nan: true };
    let f = |x: &ExprId| floats.get(x.0 as usize).copied().flatten().unwrap_or(any);
    let r = match &te.expr {
        Expr::Const(x) => FRange::of(*x, *x, false),
        Expr::Cast(x) => match k.exprs.get(x.0 as usize).map(|t| t.dtype) {
            Some(d) if d.is_float() => Some(f(x)),
            Some(_) => {
                ints.get(x.0 as usize).copied().flatten().and_then(|(lo, hi)| FRange::of(lo as f64, hi as f64, false))
            }
            None => None,
        },
        Expr::Unary(op, x) => {
            let a = f(x);
            match op {
                UnaryOp::Floor => FRange::of(a.lo.floor(), a.hi.floor(), a.nan),
                UnaryOp::Ceil => FRange::of(a.lo.ceil(), a.hi.ceil(), a.nan),
                UnaryOp::Round => FRange::of(a.lo.round(), a.hi.round(), a.nan),
                UnaryOp::Neg => FRange::of(-a.hi, -a.lo, a.nan),
                UnaryOp::Relu => FRange::of(a.lo.max(0.0), a.hi.max(0.0), a.nan),
                _ => None,
            }
        }
        Expr::Binary(op, x, y) => {
            let (a, b) = (f(x), f(y));
            let nan = a.nan || b.nan;
            // inf - inf is NaN: possible whenever a bound is infinite.
            let inf = [a.lo, a.hi, b.lo, b.hi].iter().any(|v| v.is_infinite());
            match op {
                BinaryOp::Max => FRange::of(a.lo.max(b.lo), a.hi.max(b.hi), nan),
                BinaryOp::Min => FRange::of(a.lo.min(b.lo), a.hi.min(b.hi), nan),
                BinaryOp::Add => FRange::of(a.lo + b.lo, a.hi + b.hi, nan || inf),
                BinaryOp::Sub => FRange::of(a.lo - b.hi, a.hi - b.lo, nan || inf),
                _ => None,
            }
        }
        Expr::Where(_, x, y) => {
            let (a, b) = (f(x), f(y));
            FRange::of(a.lo.min(b.lo), a.hi.max(b.hi), a.nan || b.nan)
        }
        _ => None,
    };
    Some(r.unwrap_or(any))
}

/// The integer range of a float in `r` converted to `to` (truncation, NaN to 0, saturation at the
/// i64 range as [`float_to_int`] does; a narrower dtype then wraps).
fn float_to_int_range(r: Option<FRange>, to: DType) -> Option<Interval> {
    let r = r?;
    let conv = |x: f64| {
        let v = float_to_int(x, to);
        if to == DType::U64 { i128::from(v as u64) } else { i128::from(v) }
    };
    let (mut lo, mut hi) = (conv(r.lo), conv(r.hi));
    if to == DType::U64 && r.lo < 0.0 {
        // Negative floats saturate through i64 and read as huge u64 values: not monotone.
        return None;
    }
    if r.nan {
        lo = lo.min(0);
        hi = hi.max(0);
    }
    Some((lo, hi))
}

impl<'k> Ranges<'k> {
    fn dtype(&self, e: ExprId) -> DType {
        self.k.exprs.get(e.0 as usize).map_or(DType::F32, |t| t.dtype)
    }

    /// The range of `e` under `env`.
    fn get(&self, e: ExprId, env: &Env, memo: &mut HashMap<u32, Option<Interval>>, depth: usize) -> Option<Interval> {
        let base = self.base.get(e.0 as usize).copied().flatten();
        let Some((&first, _)) = env.first_key_value() else { return base };
        if e.0 as usize >= self.k.exprs.len() {
            return None;
        }
        // Operands precede their users: an expression before every refined one cannot use them.
        if e.0 < first || depth > MAX_DEPTH {
            return base;
        }
        if let Some(r) = memo.get(&e.0) {
            return *r;
        }
        let mut r = self.node(e, env, memo, depth + 1);
        if let (Some(x), Some(f)) = (r, env.get(&e.0)) {
            r = Some(meet(x, *f).unwrap_or(*f));
        }
        memo.insert(e.0, r);
        r
    }

    /// The facts `cond` (a bool expression) gives when true and when false.
    fn facts(&self, cond: ExprId, env: &Env, memo: &mut HashMap<u32, Option<Interval>>) -> (Facts, Facts) {
        let Some(te) = self.k.exprs.get(cond.0 as usize) else { return (vec![], vec![]) };
        match te.expr {
            Expr::Unary(UnaryOp::Not, c) => {
                let (t, f) = self.facts(c, env, memo);
                (f, t)
            }
            Expr::Binary(op, x, y) if !self.dtype(x).is_float() => {
                let (Some(rx), Some(ry)) = (self.get(x, env, memo, 0), self.get(y, env, memo, 0)) else {
                    return (vec![], vec![]);
                };
                let (lo, hi) = (i128::MIN, i128::MAX);
                // x < y (strict) and x <= y as facts about x and y.
                let lt = |x: ExprId, rx: Interval, y: ExprId, ry: Interval| {
                    vec![(x.0, (lo, ry.1 - 1)), (y.0, (rx.0 + 1, hi))]
                };
                let le = |x: ExprId, rx: Interval, y: ExprId, ry: Interval| vec![(x.0, (lo, ry.1)), (y.0, (rx.0, hi))];
                let eq = || meet(rx, ry).map_or_else(Vec::new, |m| vec![(x.0, m), (y.0, m)]);
                match op {
                    BinaryOp::Lt => (lt(x, rx, y, ry), le(y, ry, x, rx)),
                    BinaryOp::Le => (le(x, rx, y, ry), lt(y, ry, x, rx)),
                    BinaryOp::Gt => (lt(y, ry, x, rx), le(x, rx, y, ry)),
                    BinaryOp::Ge => (le(y, ry, x, rx), lt(x, rx, y, ry)),
                    BinaryOp::Eq => (eq(), vec![]),
                    BinaryOp::Ne => (vec![], eq()),
                    _ => (vec![], vec![]),
                }
            }
            _ => (vec![], vec![]),
        }
    }

    /// `env` with `facts` added; `None` when they contradict it (the branch cannot run).
    fn refine(&self, env: &Env, facts: &Facts, memo: &mut HashMap<u32, Option<Interval>>) -> Option<Env> {
        let mut out = env.clone();
        for &(e, f) in facts {
            let cur = self.get(ExprId(e), env, memo, 0).unwrap_or((i128::MIN, i128::MAX));
            let m = meet(cur, f)?;
            out.insert(e, out.get(&e).map_or(Some(m), |&o| meet(o, m))?);
        }
        Some(out)
    }

    /// The range of one expression from its operands' ranges under `env`.
    fn node(&self, e: ExprId, env: &Env, memo: &mut HashMap<u32, Option<Interval>>, depth: usize) -> Option<Interval> {
        let k = self.k;
        let te = &k.exprs[e.0 as usize];
        let d = te.dtype;
        full(d)?;
        let r = match &te.expr {
            Expr::Load { arg, .. } => self.loads.get(*arg).copied().flatten().or_else(|| window(d)),
            Expr::Const(x) => {
                let v = cast_int(d, float_to_int(*x, d));
                let v = if d == DType::U64 { i128::from(v as u64) } else { i128::from(v) };
                Some((v, v))
            }
            Expr::IndexValue(i) => index_range(k, i),
            Expr::IndexCmp(..) => Some((0, 1)),
            Expr::Unary(op, x) => {
                let xd = self.dtype(*x);
                match self.get(*x, env, memo, depth) {
                    Some(a) if !xd.is_float() => unary_range(*op, a, xd),
                    _ => None,
                }
            }
            Expr::Binary(op, a, b) => {
                match (self.get(*a, env, memo, depth), self.get(*b, env, memo, depth), self.dtype(*a).is_float()) {
                    (Some(ra), Some(rb), false) => binary_range(*op, ra, rb),
                    _ => None,
                }
            }
            Expr::Where(c, a, b) => self.select(*c, *a, *b, env, memo, depth),
            Expr::Cast(x) => {
                if self.dtype(*x).is_float() {
                    float_to_int_range(self.floats.get(x.0 as usize).copied().flatten(), d)
                } else {
                    cast_range(self.get(*x, env, memo, depth), d)
                }
            }
            Expr::Acc(slot) => cast_range(self.acc.get(*slot).copied().flatten(), d),
        };
        fit(r, d)
    }

    /// `c ? a : b`, each branch under the facts its condition gives.
    fn select(
        &self,
        c: ExprId,
        a: ExprId,
        b: ExprId,
        env: &Env,
        memo: &mut HashMap<u32, Option<Interval>>,
        depth: usize,
    ) -> Option<Interval> {
        let plain = |s: &Self, memo: &mut HashMap<u32, Option<Interval>>| {
            let (ra, rb) = (s.get(a, env, memo, depth), s.get(b, env, memo, depth));
            Some((ra?.0.min(rb?.0), ra?.1.max(rb?.1)))
        };
        // Only 64-bit values need the precision (and narrow ones are cheap to leave whole).
        if !is_wide_int(self.dtype(a)) || env.len() >= MAX_REFINEMENTS {
            return plain(self, memo);
        }
        let (tf, ff) = self.facts(c, env, memo);
        if tf.is_empty() && ff.is_empty() {
            return plain(self, memo);
        }
        let mut parts = Vec::new();
        for (facts, branch) in [(&tf, a), (&ff, b)] {
            if let Some(env2) = self.refine(env, facts, memo) {
                parts.push(self.get(branch, &env2, &mut HashMap::new(), depth)?);
            }
        }
        parts.into_iter().reduce(|x, y| (x.0.min(y.0), x.1.max(y.1))).or_else(|| plain(self, memo))
    }
}

/// The range of an integer value converted to `to` (a cast, or an accumulator read).
fn cast_range(r: Option<Interval>, to: DType) -> Option<Interval> {
    match (r, to) {
        (_, DType::Bool) => match r {
            Some((lo, hi)) if lo > 0 || hi < 0 => Some((1, 1)),
            Some((0, 0)) => Some((0, 0)),
            _ => Some((0, 1)),
        },
        _ => fit(r, to),
    }
}

/// The range of an index used as a value.
fn index_range(k: &Kernel, i: &Index) -> Option<Interval> {
    let r = i.range(&|v| var_range(k, v))?;
    Some((r.0.into(), r.1.into()))
}

/// The accumulator range of a reduction of `len` values in `v`.
fn reduce_range(op: RedOp, v: Option<Interval>, len: usize) -> Option<Interval> {
    let n = len as i128;
    if op == RedOp::ArgMax || op == RedOp::ArgMin {
        return Some((0, (n - 1).max(0)));
    }
    let v = v?;
    match op {
        RedOp::Sum => Some((v.0.checked_mul(n)?, v.1.checked_mul(n)?)),
        RedOp::Prod => {
            let m = magnitude(v);
            let p = if m <= 1 { 1 } else { m.checked_pow(u32::try_from(len).ok()?)? };
            Some(if v.0 >= 0 { (0, p) } else { (-p, p) })
        }
        _ => Some(v),
    }
}

/// A short name of the op that makes `e`.
fn op_name(k: &Kernel, e: ExprId) -> String {
    match k.exprs.get(e.0 as usize).map(|t| &t.expr) {
        Some(Expr::Load { arg, .. }) => format!("load of argument {arg}"),
        Some(Expr::Const(_)) => "constant".into(),
        Some(Expr::IndexValue(_)) => "index value".into(),
        Some(Expr::IndexCmp(..)) => "index comparison".into(),
        Some(Expr::Unary(op, _)) => op.name().into(),
        Some(Expr::Binary(op, _, _)) => op.name().into(),
        Some(Expr::Where(..)) => "where".into(),
        Some(Expr::Cast(_)) => "cast".into(),
        Some(Expr::Acc(slot)) => acc_name(k, *slot),
        None => "missing expression".into(),
    }
}

fn acc_name(k: &Kernel, slot: usize) -> String {
    match &k.body {
        KernelBody::Reduce(r) => {
            r.reductions.get(slot).map_or("reduction".into(), |x| format!("{} reduction", x.op.name()))
        }
        KernelBody::Matmul(_) => "matmul accumulator".into(),
        _ => "attention accumulator".into(),
    }
}

/// The least and greatest element of a constant of integer dtype `d` (`None` for floats or none).
fn constant_range(t: &crate::tensor::HostTensor, d: DType) -> Option<Interval> {
    if d.is_float() || t.dtype() != d {
        return None;
    }
    let unsigned = d == DType::U64;
    let as_int = |x: i64| if unsigned { i128::from(x as u64) } else { i128::from(x) };
    let vals = t.to_i64_vec();
    let lo = vals.iter().map(|&x| as_int(x)).min()?;
    let hi = vals.iter().map(|&x| as_int(x)).max()?;
    Some((lo, hi))
}

/// Producer kernels analysed at most this deep to bound a buffer's elements.
const MAX_PRODUCERS: usize = 16;

/// The ranges of program buffers' elements, found on demand: a constant's elements; an intermediate
/// (or output) holds what the kernels writing it store, each analysed with its own inputs' ranges;
/// anything else (inputs), and whatever lies outside the window, the window (what an upload
/// guarantees; a kernel storing a wide value outside it is refused, so it never runs here).
struct Buffers<'p> {
    p: &'p Program,
    memo: HashMap<u32, Option<Interval>>,
    depth: usize,
}

impl Buffers<'_> {
    fn range(&mut self, b: u32, d: DType) -> Option<Interval> {
        let w = window(d);
        if let Some(r) = self.memo.get(&b) {
            return *r;
        }
        let Some(decl) = self.p.buffers.get(b as usize) else { return w };
        let r = match &decl.kind {
            BufferKind::Constant(t) => constant_range(t, d).filter(|r| inside(Some(*r), w)).or(w),
            BufferKind::Intermediate | BufferKind::Output(_) if !d.is_float() && self.depth < MAX_PRODUCERS => {
                // A cycle (never in a valid program) reads the window.
                self.memo.insert(b, w);
                self.depth += 1;
                let r = self.stored(b, d);
                self.depth -= 1;
                r.filter(|r| inside(Some(*r), w)).or(w)
            }
            _ => w,
        };
        self.memo.insert(b, r);
        r
    }

    /// The hull of every value stored into buffer `b` (of dtype `d`) by the program's kernels.
    fn stored(&mut self, b: u32, d: DType) -> Option<Interval> {
        let p = self.p;
        let mut out: Option<Interval> = None;
        let mut any = false;
        for k in &p.kernels {
            let writes: Vec<usize> = (0..k.args.len()).filter(|&i| k.args[i].buffer.0 == b).collect();
            if writes.is_empty() {
                continue;
            }
            let loads = k.args.iter().map(|a| self.range(a.buffer.0, a.dtype)).collect();
            let rs = ranges_with(k, loads);
            for st in k.body.stores().into_iter().filter(|st| writes.contains(&st.arg)) {
                let v = rs.base.get(st.value.0 as usize).copied().flatten();
                let from = k.exprs.get(st.value.0 as usize).map_or(DType::F32, |t| t.dtype);
                let r = if from.is_float() { None } else { cast_range(v, d) }?;
                out = Some(out.map_or(r, |o| (o.0.min(r.0), o.1.max(r.1))));
                any = true;
            }
        }
        if any { out } else { None }
    }
}

/// The range of the elements each argument of `k` holds (see [`Buffers`]).
fn load_ranges(p: &Program, k: &Kernel) -> Vec<Option<Interval>> {
    let mut bufs = Buffers { p, memo: HashMap::new(), depth: 0 };
    k.args.iter().map(|a| bufs.range(a.buffer.0, a.dtype)).collect()
}

/// The value ranges of every expression of `k` (`None` for floats), with the accumulators' ranges.
fn ranges<'k>(p: &Program, k: &'k Kernel) -> Ranges<'k> {
    ranges_with(k, load_ranges(p, k))
}

/// [`ranges`] with the arguments' element ranges given.
fn ranges_with(k: &Kernel, loads: Vec<Option<Interval>>) -> Ranges<'_> {
    let mut rs = Ranges { k, base: Vec::new(), acc: Vec::new(), loads, floats: Vec::new() };
    // Accumulators start as their dtype's whole range; each pass settles one more reduction (a
    // reduction's value reads only earlier slots).
    let (acc_dtypes, passes): (Vec<DType>, usize) = match &k.body {
        KernelBody::Reduce(r) => (r.reductions.iter().map(|x| x.dtype).collect(), r.reductions.len() + 1),
        KernelBody::Matmul(m) => (vec![m.acc_dtype], 1),
        KernelBody::Attention(_) => (vec![DType::F32, DType::F32], 1),
        KernelBody::Pointwise { .. } => (vec![], 1),
    };
    rs.acc = acc_dtypes.iter().map(|&d| full(d)).collect();
    if let KernelBody::Matmul(m) = &k.body {
        let w = fit(window(m.in_dtype), m.acc_dtype);
        let prod = w.and_then(|w| mul_range(w, w));
        let sum = prod.and_then(|p| reduce_range(RedOp::Sum, Some(p), m.k));
        rs.acc[0] = fit(sum, m.acc_dtype);
    }
    for _ in 0..passes {
        rs.base = Vec::with_capacity(k.exprs.len());
        rs.floats = Vec::with_capacity(k.exprs.len());
        let empty = Env::new();
        for e in 0..k.exprs.len() {
            let fl = float_node(k, e, &rs.floats, &rs.base);
            rs.floats.push(fl);
            let r = rs.node(ExprId(e as u32), &empty, &mut HashMap::new(), 0);
            rs.base.push(r);
        }
        if let KernelBody::Reduce(r) = &k.body {
            for (slot, red) in r.reductions.iter().enumerate() {
                let v = cast_range(rs.base.get(red.value.0 as usize).copied().flatten(), red.dtype);
                rs.acc[slot] = fit(reduce_range(red.op, v, r.len), red.dtype);
            }
        }
    }
    rs
}

/// The value range of every expression of kernel `k` of program `p` (`None` for floats), as
/// [`check`] computes them.
pub fn value_ranges(p: &Program, k: &Kernel) -> Vec<Option<Interval>> {
    ranges(p, k).base
}

/// Checks that 32-bit arithmetic computes every i64/u64 value of kernel `k` of program `p` that
/// matters exactly (see the module docs), given loads in the 32-bit window.
pub fn check(p: &Program, k: &Kernel) -> Result<(), Overflow> {
    let wide = k.exprs.iter().any(|t| is_wide_int(t.dtype))
        || k.args.iter().any(|a| is_wide_int(a.dtype))
        || matches!(&k.body, KernelBody::Reduce(r) if r.reductions.iter().any(|x| is_wide_int(x.dtype)))
        || matches!(&k.body, KernelBody::Matmul(m) if is_wide_int(m.acc_dtype));
    if !wide {
        return Ok(());
    }
    let rs = ranges(p, k);
    let observe = |e: ExprId, used_by: &dyn Fn() -> String| -> Result<(), Overflow> {
        let Some(te) = k.exprs.get(e.0 as usize) else { return Ok(()) };
        let r = rs.base.get(e.0 as usize).copied().flatten();
        if !is_wide_int(te.dtype) || inside(r, window(te.dtype)) {
            return Ok(());
        }
        Err(Overflow { expr: e.0, dtype: te.dtype, op: op_name(k, e), range: r, used_by: used_by() })
    };
    let index_values = |i: &Index, used_by: &dyn Fn() -> String| -> Result<(), Overflow> {
        let mut vs = Vec::new();
        i.values(&mut |v| vs.push(v));
        vs.into_iter().try_for_each(|v| observe(v, used_by))
    };

    // The live expressions: what stores, reductions and the attention score depend on.
    let mut roots: Vec<ExprId> = k.body.stores().into_iter().flat_map(store_roots).collect();
    match &k.body {
        KernelBody::Reduce(r) => roots.extend(r.reductions.iter().map(|x| x.value)),
        KernelBody::Attention(a) => roots.push(a.score),
        _ => {}
    }
    for e in closure(k, &roots, &|_| false) {
        let id = ExprId(e);
        let Some(te) = k.exprs.get(e as usize) else { continue };
        let by = || format!("{} (v{e})", op_name(k, id));
        match &te.expr {
            Expr::Load { index, .. } | Expr::IndexValue(index) => index_values(index, &by)?,
            Expr::IndexCmp(_, a, b) => {
                index_values(a, &by)?;
                index_values(b, &by)?;
            }
            Expr::Unary(UnaryOp::Neg, _) => {}
            Expr::Unary(_, x) => observe(*x, &by)?,
            Expr::Binary(BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul, _, _) => {}
            Expr::Binary(BinaryOp::Pow, _, b) => observe(*b, &by)?,
            Expr::Binary(_, a, b) => {
                observe(*a, &by)?;
                observe(*b, &by)?;
            }
            Expr::Cast(x) if te.dtype.is_float() || te.dtype == DType::Bool => observe(*x, &by)?,
            Expr::Acc(slot) if te.dtype.is_float() || te.dtype == DType::Bool => {
                let (acc_dtype, value) = match &k.body {
                    KernelBody::Reduce(r) => match r.reductions.get(*slot) {
                        Some(x) => (x.dtype, x.value.0),
                        None => continue,
                    },
                    KernelBody::Matmul(m) => (m.acc_dtype, e),
                    _ => continue,
                };
                let r = rs.acc.get(*slot).copied().flatten();
                if is_wide_int(acc_dtype) && !inside(r, window(acc_dtype)) {
                    return Err(Overflow {
                        expr: value,
                        dtype: acc_dtype,
                        op: acc_name(k, *slot),
                        range: r,
                        used_by: by(),
                    });
                }
            }
            Expr::Cast(_) | Expr::Acc(_) | Expr::Where(..) | Expr::Const(_) => {}
        }
    }
    for st in k.body.stores() {
        let dt = k.args.get(st.arg).map_or(DType::F32, |a| a.dtype);
        let by = || format!("a store to argument {}", st.arg);
        index_values(&st.index, &by)?;
        if is_wide_int(dt) || dt.is_float() || dt == DType::Bool {
            observe(st.value, &by)?;
        }
    }
    if let KernelBody::Reduce(r) = &k.body {
        for red in &r.reductions {
            if !matches!(red.op, RedOp::Sum | RedOp::Prod) {
                observe(red.value, &|| format!("a {} reduction", red.op.name()))?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "narrow_tests.rs"]
mod tests;
