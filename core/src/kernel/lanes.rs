//! Lane forms: how an index of the kernel IR behaves across `W` consecutive values of a loop
//! variable (`base + j`, `j` in `0..W`, `base` a multiple of `W`) — the same element for every
//! lane, `W` consecutive elements starting at a multiple of `W` (one vector access), or anything
//! else. Both renderers vectorize with it (CUDA at any width, WGSL at 4).

use super::{ExprId, Index, Var};

/// How an index behaves across the `W` consecutive values `base + j` (j in 0..W) of a vectorized
/// loop variable, where `base` is a multiple of `W`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LaneForm {
    /// The same element for every j: one access for all lanes.
    Uniform,
    /// `W` consecutive elements starting at a multiple of `W`: one vector access.
    Contig,
    /// Anything else: one scalar access per j.
    Gather,
}

/// Greatest common divisor (gcd(0, x) = |x|), saturated to i64.
fn gcd(a: i64, b: i64) -> i64 {
    let (mut a, mut b) = (a.unsigned_abs(), b.unsigned_abs());
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a.min(i64::MAX as u64) as i64
}

/// `(s, g)`: for `var = base + j`, the index equals `ibase + j * s` with `ibase` divisible by `g`
/// (g = 0: `ibase` is 0). `None` when not of that form.
fn affine(idx: &Index, var: Var, w: i64, uniform_value: &dyn Fn(ExprId) -> bool) -> Option<(i64, i64)> {
    match idx {
        Index::Const(c) => Some((0, *c)),
        Index::Var(v) if *v == var => Some((1, w)),
        Index::Var(_) => Some((0, 1)),
        Index::Value(e) => uniform_value(*e).then_some((0, 1)),
        Index::Sum(ts) => {
            let mut s = 0i64;
            let mut g = 0i64;
            for t in ts {
                let (ts, tg) = affine(t, var, w, uniform_value)?;
                s = s.checked_add(ts)?;
                g = gcd(g, tg);
            }
            Some((s, g))
        }
        Index::Mul(x, c) => {
            let (s, g) = affine(x, var, w, uniform_value)?;
            Some((s.checked_mul(*c)?, g.checked_mul(*c)?.checked_abs()?))
        }
        Index::Div(x, c) | Index::Mod(x, c) => {
            let c = *c;
            if c <= 0 {
                return None;
            }
            let is_div = matches!(idx, Index::Div(..));
            let (s, g) = affine(x, var, w, uniform_value)?;
            // Divisibility of the quotient when c | g, else unknown.
            let gq = if g == 0 {
                0
            } else if g % c == 0 {
                g / c
            } else {
                1
            };
            let h = if g == 0 { c } else { gcd(g, c) };
            if s == 0 {
                return Some(if is_div { (0, gq) } else { (0, h) });
            }
            if s < 0 {
                return None;
            }
            if (w - 1).checked_mul(s)? < h {
                // ibase is a multiple of h and ibase + (W-1)s stays below the next multiple of h
                // (so of c).
                return Some(if is_div { (0, gq) } else { (s, h) });
            }
            if s % c == 0 && (g == 0 || g % c == 0) {
                return Some(if is_div { (s / c, gq) } else { (0, h) });
            }
            None
        }
        Index::Clamp(x, _, _) => {
            let (s, _) = affine(x, var, w, uniform_value)?;
            (s == 0).then_some((0, 1))
        }
    }
}

/// The [`LaneForm`] of `idx` for `w` lanes of `var`. `uniform_value` says whether a gathered
/// value is the same for all lanes.
pub fn lane_form(idx: &Index, var: Var, w: u32, uniform_value: &dyn Fn(ExprId) -> bool) -> LaneForm {
    let mut values_uniform = true;
    idx.values(&mut |e| values_uniform &= uniform_value(e));
    if !idx.uses(var) && values_uniform {
        return LaneForm::Uniform;
    }
    let w = i64::from(w);
    match affine(idx, var, w, uniform_value) {
        Some((0, _)) => LaneForm::Uniform,
        Some((1, g)) if g % w == 0 => LaneForm::Contig,
        _ => LaneForm::Gather,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l() -> Index {
        Index::var(Var::Lane)
    }

    #[test]
    fn forms() {
        let u = |_| true;
        assert_eq!(lane_form(&l(), Var::Lane, 4, &u), LaneForm::Contig);
        assert_eq!(lane_form(&l().rem(4096), Var::Lane, 8, &u), LaneForm::Contig);
        assert_eq!(lane_form(&l().div(4096), Var::Lane, 4, &u), LaneForm::Uniform);
        assert_eq!(lane_form(&l().div(2), Var::Lane, 4, &u), LaneForm::Gather);
        assert_eq!(lane_form(&l().rem(6), Var::Lane, 4, &u), LaneForm::Gather);
        assert_eq!(lane_form(&l().rem(12), Var::Lane, 4, &u), LaneForm::Contig);
        assert_eq!(lane_form(&l().rem(12), Var::Lane, 8, &u), LaneForm::Gather);
        assert_eq!(lane_form(&l().add(Index::Const(8)), Var::Lane, 8, &u), LaneForm::Contig);
        assert_eq!(lane_form(&l().add(Index::Const(4)), Var::Lane, 8, &u), LaneForm::Gather);
        let row = Index::var(Var::Row).mul(128).add(Index::var(Var::Red));
        assert_eq!(lane_form(&row, Var::Red, 16, &u), LaneForm::Contig);
        let row_odd = Index::var(Var::Row).mul(127).add(Index::var(Var::Red));
        assert_eq!(lane_form(&row_odd, Var::Red, 4, &u), LaneForm::Gather);
    }

    /// Brute force: the claimed form holds for every group of W lanes.
    #[test]
    fn forms_are_sound() {
        let u = |_| true;
        let exprs = vec![
            l(),
            l().rem(4096),
            l().rem(12),
            l().rem(16),
            l().div(8).mul(3).add(l().rem(8)),
            l().div(4).rem(16),
            l().div(16).rem(16),
            l().div(12).mul(12).add(l().rem(4)),
            l().add(Index::Const(4)).rem(20),
            l().rem(8).add(l().div(8).mul(16)),
            l().mul(3).div(3),
            l().div(32).mul(64).add(l().rem(32)),
        ];
        for w in [2u32, 4, 8, 16] {
            for e in &exprs {
                let f = lane_form(e, Var::Lane, w, &u);
                let w = i64::from(w);
                for base in (0..640).step_by(w as usize) {
                    let at = |j: i64| e.eval(&|_| base + j, &|_| 0);
                    match f {
                        LaneForm::Uniform => assert!((0..w).all(|j| at(j) == at(0)), "{e} uniform at {base}"),
                        LaneForm::Contig => {
                            assert_eq!(at(0) % w, 0, "{e} at {base} (w {w})");
                            assert!((0..w).all(|j| at(j) == at(0) + j), "{e} contig at {base}");
                        }
                        LaneForm::Gather => {}
                    }
                }
            }
        }
    }

    #[test]
    fn wgsl_width_forms() {
        let u = |_| true;
        assert_eq!(lane_form(&l().rem(4096), Var::Lane, 4, &u), LaneForm::Contig);
        assert_eq!(lane_form(&l().add(Index::Const(8)), Var::Lane, 4, &u), LaneForm::Contig);
        let row = Index::var(Var::Row).mul(128).add(Index::var(Var::Red));
        assert_eq!(lane_form(&row, Var::Red, 4, &u), LaneForm::Contig);
        assert_eq!(lane_form(&l().add(Index::Const(1)), Var::Lane, 4, &u), LaneForm::Gather);
        assert_eq!(lane_form(&l().mul(2), Var::Lane, 4, &u), LaneForm::Gather);
        // (lane / 4) % 16: uniform within groups of 4.
        assert_eq!(lane_form(&l().div(4).rem(16), Var::Lane, 4, &u), LaneForm::Uniform);
        // lane / 64 * 64 + lane % 64 == lane
        assert_eq!(lane_form(&l().div(64).mul(64).add(l().rem(64)), Var::Lane, 4, &u), LaneForm::Contig);
    }
}
