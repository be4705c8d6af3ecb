//! Symbolic index expressions over loop variables, with range-aware simplification.
//!
//! All indices the scheduler builds are non-negative integers; `Div` is floor division and `Mod`
//! the non-negative remainder. [`Index::simplify`] uses the ranges of the loop variables to drop
//! divisions and remainders that cannot matter, so a row-broadcast reads `lane % 4096` and an
//! identity reshape reads `lane`.

use super::{ExprId, Var};
use serde::{Deserialize, Serialize};
use std::fmt;

/// Greatest common divisor of two non-negative numbers.
fn gcd(mut a: i64, mut b: i64) -> i64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// An integer index expression.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Index {
    /// A literal.
    Const(i64),
    /// A loop variable.
    Var(Var),
    /// The integer value of an expression of the kernel (a gathered index). Its range is unknown,
    /// so it is always wrapped in [`Index::Clamp`] before use as an address.
    Value(ExprId),
    /// Sum of terms.
    Sum(Vec<Index>),
    /// Product with a constant.
    Mul(Box<Index>, i64),
    /// Floor division by a positive constant.
    Div(Box<Index>, i64),
    /// Remainder by a positive constant (non-negative result).
    Mod(Box<Index>, i64),
    /// `min(max(x, lo), hi)`.
    Clamp(Box<Index>, i64, i64),
}

/// Inclusive value range.
pub type Range = (i64, i64);

impl Index {
    /// A variable.
    pub fn var(v: Var) -> Index {
        Index::Var(v)
    }

    /// `self + other`.
    #[allow(clippy::should_implement_trait)]
    pub fn add(self, other: Index) -> Index {
        Index::Sum(vec![self, other])
    }

    /// `self * c`.
    #[allow(clippy::should_implement_trait)]
    pub fn mul(self, c: i64) -> Index {
        Index::Mul(Box::new(self), c)
    }

    /// `self / c` (floor).
    #[allow(clippy::should_implement_trait)]
    pub fn div(self, c: i64) -> Index {
        Index::Div(Box::new(self), c)
    }

    /// `self % c`.
    #[allow(clippy::should_implement_trait)]
    pub fn rem(self, c: i64) -> Index {
        Index::Mod(Box::new(self), c)
    }

    /// `clamp(self, lo, hi)`.
    pub fn clamp(self, lo: i64, hi: i64) -> Index {
        Index::Clamp(Box::new(self), lo, hi)
    }

    /// The constant value, if this is a literal.
    pub fn as_const(&self) -> Option<i64> {
        match self {
            Index::Const(c) => Some(*c),
            _ => None,
        }
    }

    /// Evaluates with the given variable and value bindings, in wrapping 64-bit arithmetic (as
    /// renderers do; a verified index never wraps), a division or remainder by a divisor the
    /// verifier refuses (not positive) giving 0 rather than a panic.
    pub fn eval(&self, var: &dyn Fn(Var) -> i64, value: &dyn Fn(ExprId) -> i64) -> i64 {
        match self {
            Index::Const(c) => *c,
            Index::Var(v) => var(*v),
            Index::Value(e) => value(*e),
            Index::Sum(ts) => ts.iter().fold(0i64, |a, t| a.wrapping_add(t.eval(var, value))),
            Index::Mul(x, c) => x.eval(var, value).wrapping_mul(*c),
            Index::Div(x, c) => x.eval(var, value).checked_div_euclid(*c).unwrap_or(0),
            Index::Mod(x, c) => x.eval(var, value).checked_rem_euclid(*c).unwrap_or(0),
            Index::Clamp(x, lo, hi) => x.eval(var, value).max(*lo).min(*hi),
        }
    }

    /// The inclusive range of values, given the ranges of the variables; `None` if unbounded.
    pub fn range(&self, vr: &dyn Fn(Var) -> Option<Range>) -> Option<Range> {
        match self {
            Index::Const(c) => Some((*c, *c)),
            Index::Var(v) => vr(*v),
            Index::Value(_) => None,
            Index::Sum(ts) => {
                let mut lo = 0i64;
                let mut hi = 0i64;
                for t in ts {
                    let (a, b) = t.range(vr)?;
                    lo = lo.checked_add(a)?;
                    hi = hi.checked_add(b)?;
                }
                Some((lo, hi))
            }
            Index::Mul(x, c) => {
                let (a, b) = x.range(vr)?;
                let (p, q) = (a.checked_mul(*c)?, b.checked_mul(*c)?);
                Some((p.min(q), p.max(q)))
            }
            // A divisor that is not positive breaks the IR's invariants: no range (the verifier
            // refuses the index) rather than a division by zero or an overflow here.
            Index::Div(_, c) | Index::Mod(_, c) if *c <= 0 => None,
            Index::Div(x, c) => {
                let (a, b) = x.range(vr)?;
                Some((a.div_euclid(*c), b.div_euclid(*c)))
            }
            Index::Mod(x, c) => match x.range(vr) {
                Some((a, b)) if a >= 0 && b < *c => Some((a, b)),
                _ => Some((0, c - 1)),
            },
            Index::Clamp(x, lo, hi) => match x.range(vr) {
                Some((a, b)) => Some((a.max(*lo).min(*hi), b.max(*lo).min(*hi))),
                None => Some((*lo, *hi)),
            },
        }
    }

    /// Simplifies using the variable ranges. The result evaluates to the same value for every
    /// assignment of the variables inside their ranges.
    pub fn simplify(&self, vr: &dyn Fn(Var) -> Option<Range>) -> Index {
        match self {
            Index::Const(_) | Index::Var(_) | Index::Value(_) => self.clone(),
            Index::Sum(ts) => {
                let mut terms: Vec<Index> = Vec::new();
                let mut k = 0i64;
                for t in ts {
                    match t.simplify(vr) {
                        Index::Const(c) => k += c,
                        Index::Sum(inner) => {
                            for i in inner {
                                match i {
                                    Index::Const(c) => k += c,
                                    other => terms.push(other),
                                }
                            }
                        }
                        other => terms.push(other),
                    }
                }
                let terms = merge_like_terms(terms);
                if k != 0 {
                    let mut terms = terms;
                    terms.push(Index::Const(k));
                    return make_sum(terms);
                }
                make_sum(terms)
            }
            Index::Mul(x, c) => {
                let x = x.simplify(vr);
                match (x, *c) {
                    (_, 0) => Index::Const(0),
                    (x, 1) => x,
                    (Index::Const(a), c) if a.checked_mul(c).is_some() => Index::Const(a * c),
                    (Index::Mul(y, a), c) if a.checked_mul(c).is_some() => Index::Mul(y, a * c).simplify(vr),
                    (Index::Sum(ts), c) => {
                        Index::Sum(ts.into_iter().map(|t| Index::Mul(Box::new(t), c)).collect()).simplify(vr)
                    }
                    (x, c) => Index::Mul(Box::new(x), c),
                }
            }
            Index::Div(x, c) => {
                let c = *c;
                let x = x.simplify(vr);
                if c == 1 {
                    return x;
                }
                if let Index::Const(a) = x {
                    return Index::Const(a.div_euclid(c));
                }
                if let Some((lo, hi)) = x.range(vr)
                    && lo >= 0
                    && hi < c
                {
                    return Index::Const(0);
                }
                if let Index::Div(y, a) = &x {
                    return Index::Div(y.clone(), a * c).simplify(vr);
                }
                // Split off terms whose coefficient is a multiple of c when the rest stays in [0, c).
                let terms = as_terms(&x);
                let (multiples, rest): (Vec<_>, Vec<_>) = terms.into_iter().partition(|(_, coef)| coef % c == 0);
                if !multiples.is_empty() {
                    let rest_sum = make_sum(rest.iter().map(|(t, k)| scaled(t.clone(), *k)).collect());
                    if let Some((lo, hi)) = rest_sum.range(vr)
                        && lo >= 0
                    {
                        let q = make_sum(multiples.iter().map(|(t, k)| scaled(t.clone(), k / c)).collect());
                        if hi < c {
                            return q.simplify(vr);
                        }
                        return Index::Sum(vec![q, Index::Div(Box::new(rest_sum), c)]).simplify(vr);
                    }
                }
                // `(g * a + r) / (g * q) = a / q` when `0 <= r < g`: the flat index of an
                // `[.., 5, 4]` block divided by a multiple of its size (20 * batch + 4 * m + n)/60.
                if let Some((a, g, _)) = block_split(&x, c, vr) {
                    return Index::Div(Box::new(a), c / g).simplify(vr);
                }
                Index::Div(Box::new(x), c)
            }
            Index::Mod(x, c) => {
                let c = *c;
                let x = x.simplify(vr);
                if c == 1 {
                    return Index::Const(0);
                }
                if let Index::Const(a) = x {
                    return Index::Const(a.rem_euclid(c));
                }
                if let Some((lo, hi)) = x.range(vr)
                    && lo >= 0
                    && hi < c
                {
                    return x;
                }
                if let Index::Mod(y, a) = &x
                    && a % c == 0
                {
                    return Index::Mod(y.clone(), c).simplify(vr);
                }
                let terms = as_terms(&x);
                if terms.iter().any(|(_, coef)| coef % c == 0) {
                    let rest: Vec<Index> =
                        terms.into_iter().filter(|(_, coef)| coef % c != 0).map(|(t, k)| scaled(t, k)).collect();
                    let rest = make_sum(rest);
                    if rest.range(vr).is_some_and(|(lo, _)| lo >= 0) {
                        return Index::Mod(Box::new(rest), c).simplify(vr);
                    }
                }
                // `(g * a + r) % (g * q) = (a % q) * g + r` when `0 <= r < g` and `a >= 0`: a
                // head's columns of a `[.., heads * d]` row, `(12 * bh + j) % 48` with `j < 12`
                // (the `q`, `k`, `v` views of an exported multi-head attention).
                if let Some((a, g, r)) = block_split(&x, c, vr) {
                    let a = Index::Mod(Box::new(a), c / g);
                    return Index::Sum(vec![Index::Mul(Box::new(a), g), r]).simplify(vr);
                }
                Index::Mod(Box::new(x), c)
            }
            Index::Clamp(x, lo, hi) => {
                let x = x.simplify(vr);
                if let Some((a, b)) = x.range(vr)
                    && a >= *lo
                    && b <= *hi
                {
                    return x;
                }
                if let Index::Const(a) = x {
                    return Index::Const(a.max(*lo).min(*hi));
                }
                Index::Clamp(Box::new(x), *lo, *hi)
            }
        }
    }

    /// Calls `f` on this node, then on every node beneath it (parents first, terms in order):
    /// the one walk that analyses of an index's structure share.
    pub fn visit(&self, f: &mut dyn FnMut(&Index)) {
        f(self);
        match self {
            Index::Var(_) | Index::Const(_) | Index::Value(_) => {}
            Index::Sum(ts) => ts.iter().for_each(|t| t.visit(f)),
            Index::Mul(x, _) | Index::Div(x, _) | Index::Mod(x, _) | Index::Clamp(x, _, _) => x.visit(f),
        }
    }

    /// True if the expression mentions `v`.
    pub fn uses(&self, v: Var) -> bool {
        let mut found = false;
        self.visit(&mut |i| found |= matches!(i, Index::Var(w) if *w == v));
        found
    }

    /// Replaces every occurrence of variable `v` by `with`.
    pub fn substitute(&self, v: Var, with: &Index) -> Index {
        match self {
            Index::Var(w) if *w == v => with.clone(),
            Index::Var(_) | Index::Const(_) | Index::Value(_) => self.clone(),
            Index::Sum(ts) => Index::Sum(ts.iter().map(|t| t.substitute(v, with)).collect()),
            Index::Mul(x, c) => Index::Mul(Box::new(x.substitute(v, with)), *c),
            Index::Div(x, c) => Index::Div(Box::new(x.substitute(v, with)), *c),
            Index::Mod(x, c) => Index::Mod(Box::new(x.substitute(v, with)), *c),
            Index::Clamp(x, lo, hi) => Index::Clamp(Box::new(x.substitute(v, with)), *lo, *hi),
        }
    }

    /// Calls `f` on every [`Index::Value`] operand.
    pub fn values(&self, f: &mut dyn FnMut(ExprId)) {
        self.visit(&mut |i| {
            if let Index::Value(e) = i {
                f(*e)
            }
        });
    }
}

/// `x` as `g * a + r` with `g` a common divisor of `c` and of some coefficients (`1 < g < c`),
/// `0 <= r < g` and `a >= 0` within the variables' ranges: `(a, g, r)`. Then
/// `x / c = a / (c / g)` and `x % c = (a % (c / g)) * g + r`.
fn block_split(x: &Index, c: i64, vr: &dyn Fn(Var) -> Option<Range>) -> Option<(Index, i64, Index)> {
    let terms = as_terms(x);
    for &(_, coef) in &terms {
        let g = gcd(coef.abs(), c);
        if g <= 1 || g == c {
            continue;
        }
        let (big, rest): (Vec<_>, Vec<_>) = terms.iter().cloned().partition(|(_, k)| k % g == 0);
        let rest_sum = make_sum(rest.iter().map(|(t, k)| scaled(t.clone(), *k)).collect());
        let fits = rest.is_empty() || rest_sum.range(vr).is_some_and(|(lo, hi)| lo >= 0 && hi < g);
        let big_sum = make_sum(big.iter().map(|(t, k)| scaled(t.clone(), k / g)).collect());
        if fits && big_sum.range(vr).is_some_and(|(lo, _)| lo >= 0) {
            return Some((big_sum, g, rest_sum));
        }
    }
    None
}

/// A term and its constant coefficient.
fn as_terms(x: &Index) -> Vec<(Index, i64)> {
    match x {
        Index::Sum(ts) => ts.iter().flat_map(as_terms).collect(),
        Index::Mul(y, c) => as_terms(y).into_iter().map(|(t, k)| (t, k * c)).collect(),
        Index::Const(c) => vec![(Index::Const(1), *c)],
        other => vec![(other.clone(), 1)],
    }
}

fn scaled(t: Index, k: i64) -> Index {
    match (t, k) {
        (Index::Const(1), k) => Index::Const(k),
        (t, 1) => t,
        (t, k) => Index::Mul(Box::new(t), k),
    }
}

fn merge_like_terms(terms: Vec<Index>) -> Vec<Index> {
    let mut out: Vec<(Index, i64)> = Vec::new();
    for t in terms {
        let (base, k) = match t {
            Index::Mul(b, k) => (*b, k),
            other => (other, 1),
        };
        match out.iter_mut().find(|(b, _)| *b == base) {
            Some((_, kk)) => *kk += k,
            None => out.push((base, k)),
        }
    }
    // (x / c) * (c * k) + (x % c) * k == x * k
    loop {
        let mut found = None;
        'search: for (i, (bi, ki)) in out.iter().enumerate() {
            // bi is x / c (merged: x) or (x / c) % a (merged: x % (a * c)).
            let (x, c, wrap) = match bi {
                Index::Div(x, c) => (x, *c, None),
                Index::Mod(inner, a) => match &**inner {
                    Index::Div(x, c) => (x, *c, Some(*a)),
                    _ => continue,
                },
                _ => continue,
            };
            for (j, (bj, kj)) in out.iter().enumerate() {
                let Index::Mod(y, d) = bj else { continue };
                if *d == c && y == x && *kj * c == *ki {
                    let merged = match wrap {
                        None => (**x).clone(),
                        Some(a) => Index::Mod(x.clone(), a * c),
                    };
                    found = Some((i, j, merged, *kj));
                    break 'search;
                }
                // (x / (c0 * d)) * (d * k) + ((x / c0) % d) * k == (x / c0) * k: bi is y / d for
                // y = x / c0 (floor divisions of a non-negative x compose).
                if let Index::Div(x2, c0) = &**y
                    && x2 == x
                    && c0.checked_mul(*d) == Some(c)
                    && kj.checked_mul(*d) == Some(*ki)
                {
                    let merged = match wrap {
                        None => (**y).clone(),
                        Some(a) => Index::Mod(y.clone(), a * d),
                    };
                    found = Some((i, j, merged, *kj));
                    break 'search;
                }
                // ((z % a) / c) * (c * k) + (z % c) * k == (z % a) * k when c divides a: bi is
                // x / c for x = z % a, whose remainder by c the simplifier writes z % c.
                if let Index::Mod(z, a) = &**x
                    && *d == c
                    && y == z
                    && a % c == 0
                    && kj.checked_mul(c) == Some(*ki)
                {
                    let merged = match wrap {
                        None => (**x).clone(),
                        Some(w) => Index::Mod(x.clone(), w * c),
                    };
                    found = Some((i, j, merged, *kj));
                    break 'search;
                }
            }
        }
        let Some((i, j, x, k)) = found else { break };
        let (hi, lo) = if i > j { (i, j) } else { (j, i) };
        out.remove(hi);
        out.remove(lo);
        match out.iter_mut().find(|(b, _)| *b == x) {
            Some((_, kk)) => *kk += k,
            None => out.push((x, k)),
        }
    }
    out.into_iter().filter(|(_, k)| *k != 0).map(|(b, k)| scaled(b, k)).collect()
}

fn make_sum(mut terms: Vec<Index>) -> Index {
    match terms.len() {
        0 => Index::Const(0),
        1 => terms.pop().unwrap_or(Index::Const(0)),
        _ => Index::Sum(terms),
    }
}

impl fmt::Display for Var {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Var::Lane => "lane",
            Var::Row => "row",
            Var::Red => "red",
            Var::Batch => "batch",
            Var::M => "m",
            Var::N => "n",
            Var::Key => "key",
        })
    }
}

impl fmt::Display for Index {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Index::Const(c) => write!(f, "{c}"),
            Index::Var(v) => write!(f, "{v}"),
            Index::Value(e) => write!(f, "v{}", e.0),
            Index::Sum(ts) => {
                for (i, t) in ts.iter().enumerate() {
                    if i > 0 {
                        f.write_str(" + ")?;
                    }
                    write!(f, "{t}")?;
                }
                Ok(())
            }
            Index::Mul(x, c) => match **x {
                Index::Sum(_) => write!(f, "({x}) * {c}"),
                _ => write!(f, "{x} * {c}"),
            },
            Index::Div(x, c) => match **x {
                Index::Sum(_) | Index::Mul(..) => write!(f, "({x}) / {c}"),
                _ => write!(f, "{x} / {c}"),
            },
            Index::Mod(x, c) => match **x {
                Index::Sum(_) | Index::Mul(..) => write!(f, "({x}) % {c}"),
                _ => write!(f, "{x} % {c}"),
            },
            Index::Clamp(x, lo, hi) => write!(f, "clamp({x}, {lo}, {hi})"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lane(n: i64) -> impl Fn(Var) -> Option<Range> {
        move |v| (v == Var::Lane).then_some((0, n - 1))
    }

    #[test]
    fn identity_reshape_collapses() {
        // [8, 4096] row-major coordinates of lane, re-linearized.
        let l = Index::var(Var::Lane);
        let i = l.clone().div(4096).rem(8).mul(4096).add(l.clone().rem(4096));
        assert_eq!(i.simplify(&lane(8 * 4096)), l);
    }

    #[test]
    fn identity_reshape_3d_collapses() {
        let l = Index::var(Var::Lane);
        let (a, b, c) = (5, 6, 7);
        let i = l.clone().div(a * b).rem(c).mul(a * b).add(l.clone().div(b).rem(a).mul(b)).add(l.clone().rem(b));
        assert_eq!(i.simplify(&lane(a * b * c)), l);
    }

    #[test]
    fn nested_division_terms_merge() {
        // (l / 48) * 168 + ((l / 16) % 3) * 56 == (l / 16) * 56
        let l = Index::var(Var::Lane);
        let i = l.clone().div(48).mul(168).add(l.clone().div(16).rem(3).mul(56));
        assert_eq!(i.simplify(&lane(480)).to_string(), "lane / 16 * 56");
    }

    #[test]
    fn remainder_of_remainder_terms_merge() {
        // (l % 36 / 6) * 6 + l % 6 == l % 36 (the simplifier writes (l % 36) % 6 as l % 6), as
        // when an NCHW index is re-linearized from pixel coordinates inside an image.
        let l = Index::var(Var::Lane);
        let i = l.clone().rem(36).div(6).mul(6).add(l.clone().rem(36).rem(6));
        assert_eq!(i.simplify(&lane(72)).to_string(), "lane % 36");
        let j = l.clone().rem(36).div(6).rem(3).mul(12).add(l.clone().rem(6).mul(2));
        assert_eq!(j.simplify(&lane(72)).to_string(), "lane % 36 % 18 * 2");
    }

    #[test]
    fn broadcast_row_is_mod() {
        let l = Index::var(Var::Lane);
        let i = l.clone().div(1).rem(4096);
        assert_eq!(i.simplify(&lane(8 * 4096)).to_string(), "lane % 4096");
        assert_eq!(l.clone().rem(4096).simplify(&lane(100)), l);
    }

    #[test]
    fn div_of_sum_splits() {
        let l = Index::var(Var::Lane);
        let r = |v| match v {
            Var::Lane => Some((0, 63)),
            Var::Row => Some((0, 9)),
            _ => None,
        };
        let i = Index::var(Var::Row).mul(64).add(l.clone()).div(64);
        assert_eq!(i.simplify(&r), Index::var(Var::Row));
        let j = Index::var(Var::Row).mul(64).add(l.clone()).rem(64);
        assert_eq!(j.simplify(&r), l);
    }

    #[test]
    fn rem_of_a_head_block_splits() {
        // (12 * batch + red) % 48 with red < 12: the head's 12 columns of a 48-wide row.
        let r = |v| match v {
            Var::Batch => Some((0, 31)),
            Var::Red => Some((0, 11)),
            _ => None,
        };
        let i = Index::var(Var::Batch).mul(12).add(Index::var(Var::Red)).rem(48);
        assert_eq!(i.simplify(&r).to_string(), "batch % 4 * 12 + red");
        // A remainder term as wide as the block keeps the remainder.
        let r13 = |v| match v {
            Var::Batch => Some((0, 31)),
            Var::Red => Some((0, 12)),
            _ => None,
        };
        assert_eq!(i.simplify(&r13), i);
    }

    #[test]
    fn simplify_preserves_value_exhaustively() {
        let l = Index::var(Var::Lane);
        let exprs = vec![
            l.clone().div(6).rem(5).mul(7).add(l.clone().rem(6)).add(Index::Const(3)),
            l.clone().mul(4).add(Index::Const(2)).div(8),
            l.clone().mul(6).add(l.clone().rem(3)).rem(12),
            l.clone().add(Index::Const(-2)).clamp(0, 20),
            l.clone().div(3).div(2).mul(2).add(l.clone().rem(6).div(3)),
            l.clone().div(48).mul(168).add(l.clone().div(16).rem(3).mul(56)).add(l.clone().rem(16)),
            l.clone().div(12).rem(5).mul(15).add(l.clone().div(4).rem(3).mul(5)),
            l.clone().rem(36).div(6).mul(6).add(l.clone().rem(6)),
            l.clone().rem(36).div(6).rem(3).mul(12).add(l.clone().rem(6).mul(2)),
            l.clone().div(12).mul(12).add(l.clone().rem(12)).rem(48),
            l.clone().div(5).mul(10).add(l.clone().rem(5)).rem(40),
        ];
        for e in exprs {
            let s = e.simplify(&lane(240));
            for x in 0..240 {
                let a = e.eval(&|_| x, &|_| 0);
                let b = s.eval(&|_| x, &|_| 0);
                assert_eq!(a, b, "{e} vs {s} at lane={x}");
            }
        }
    }

    mod random {
        use super::*;
        use proptest::prelude::*;

        /// Random non-negative index expressions over `lane` (positive coefficients and divisors,
        /// so every division and remainder operand is non-negative, as the scheduler guarantees).
        fn index() -> impl Strategy<Value = Index> {
            let leaf = prop_oneof![Just(Index::var(Var::Lane)), (0i64..20).prop_map(Index::Const)];
            leaf.prop_recursive(5, 40, 3, |inner| {
                prop_oneof![
                    prop::collection::vec(inner.clone(), 2..4).prop_map(Index::Sum),
                    (inner.clone(), 1i64..7).prop_map(|(x, c)| x.mul(c)),
                    (inner.clone(), 1i64..9).prop_map(|(x, c)| x.div(c)),
                    (inner.clone(), 1i64..9).prop_map(|(x, c)| x.rem(c)),
                    (inner, 0i64..10, 0i64..30).prop_map(|(x, lo, w)| x.clamp(lo, lo + w)),
                ]
            })
        }

        proptest! {
            #![proptest_config(ProptestConfig { cases: 2000, .. ProptestConfig::default() })]
            #[test]
            fn simplify_preserves_value(e in index(), n in 1i64..200) {
                let s = e.simplify(&lane(n));
                for x in 0..n {
                    prop_assert_eq!(e.eval(&|_| x, &|_| 0), s.eval(&|_| x, &|_| 0), "{} vs {} at lane={}", e, s, x);
                }
                if let Some((lo, hi)) = s.range(&lane(n)) {
                    for x in 0..n {
                        let v = s.eval(&|_| x, &|_| 0);
                        prop_assert!(lo <= v && v <= hi, "{} = {} outside [{}, {}]", s, v, lo, hi);
                    }
                }
            }
        }
    }
}
