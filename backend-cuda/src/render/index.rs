//! Index rendering (symbolic [`Index`] → C++ integer expressions) and the lane analysis that decides
//! which accesses of a vectorized loop are one vector access.
//!
//! Addresses are rendered in wrapping unsigned arithmetic: `unsigned` when every index of the
//! kernel and every subterm stays within ±(2^31 - 1) ([`needs_wide`] is false), else
//! `unsigned long long`. The kernel IR guarantees that every division, remainder and clamp operand
//! is non-negative and every address in range, so modular arithmetic gives the exact value (sums
//! may subtract). A gathered value ([`Index::Value`]) appears only directly inside a clamp, which
//! is evaluated in signed 64-bit arithmetic (`sinter_clamp((long long)v, lo, hi)`).

use std::collections::HashMap;

use sinter_core::DType;
use sinter_core::kernel::index::Range;
use sinter_core::kernel::{ExprId, Index, Kernel, Var};

use super::analysis::{all_indices, var_range};
use super::ops::to_index;
use super::prelude::{H, Helpers, It};

/// The largest magnitude an index or subterm may reach for 32-bit rendering.
const LIMIT32: i64 = i32::MAX as i64;

/// Whether some index of `k` (or a subterm, or a loop variable) may leave ±(2^31 - 1), so the
/// kernel's index arithmetic must be 64-bit.
pub(crate) fn needs_wide(k: &Kernel) -> bool {
    let vr = |v: Var| var_range(k, v);
    for v in [Var::Lane, Var::Row, Var::Red, Var::Batch, Var::M, Var::N] {
        if vr(v).is_some_and(|(_, hi)| hi > LIMIT32) {
            return true;
        }
    }
    all_indices(k).into_iter().any(|ix| !fits32(ix, &vr))
}

fn fits32(i: &Index, vr: &dyn Fn(Var) -> Option<Range>) -> bool {
    const VARS: [Var; 6] = [Var::Lane, Var::Row, Var::Red, Var::Batch, Var::M, Var::N];
    if VARS.iter().any(|&v| i.uses(v) && vr(v).is_none()) {
        // Never evaluated (an empty extent) or refused when rendered.
        return true;
    }
    let ok = |x: &Index| x.range(vr).is_some_and(|(lo, hi)| lo >= -LIMIT32 && hi <= LIMIT32);
    match i {
        Index::Value(_) => true,
        Index::Clamp(x, _, _) if matches!(**x, Index::Value(_)) => ok(i),
        Index::Const(_) | Index::Var(_) => ok(i),
        Index::Sum(ts) => ok(i) && ts.iter().all(|t| fits32(t, vr)),
        Index::Mul(x, _) | Index::Div(x, _) | Index::Mod(x, _) | Index::Clamp(x, _, _) => ok(i) && fits32(x, vr),
    }
}

/// What an index can refer to while rendering.
pub(crate) struct IndexEnv<'a> {
    /// C++ names of the loop variables in scope.
    pub(crate) names: &'a HashMap<Var, String>,
    /// 64-bit arithmetic.
    pub(crate) wide: bool,
    /// The C++ expression and dtype of a gathered value, if visible.
    pub(crate) value: &'a dyn Fn(ExprId) -> Option<(String, DType)>,
}

impl IndexEnv<'_> {
    fn ty(&self) -> &'static str {
        if self.wide { "unsigned long long" } else { "unsigned" }
    }

    fn lit(&self, c: u64) -> String {
        if self.wide { format!("{c}ull") } else { format!("{c}u") }
    }
}

/// Precedence of a rendered expression: 0 atom, 1 multiplicative, 2 additive.
type Prec = u8;

fn paren((s, prec): (String, Prec), max: Prec) -> String {
    if prec > max { format!("({s})") } else { s }
}

/// Renders an address: `idx` in the kernel's unsigned index type.
pub(crate) fn render_address(idx: &Index, env: &IndexEnv<'_>, h: &mut Helpers) -> Result<String, String> {
    Ok(ru(idx, env, h)?.0)
}

/// Renders `idx` as a signed 64-bit value (an [`sinter_core::kernel::Expr::IndexValue`], which may
/// be negative).
pub(crate) fn render_signed(idx: &Index, env: &IndexEnv<'_>, h: &mut Helpers) -> Result<String, String> {
    if let Index::Const(c) = idx {
        return Ok(if *c < 0 { format!("({c}LL)") } else { format!("{c}LL") });
    }
    let s = ru(idx, env, h)?;
    Ok(if env.wide { format!("(long long){}", paren(s, 0)) } else { format!("(long long)(int){}", paren(s, 0)) })
}

fn var_name(v: Var, env: &IndexEnv<'_>) -> Result<String, String> {
    env.names.get(&v).cloned().ok_or_else(|| format!("an index uses `{v}`, which is not defined here"))
}

fn ru(idx: &Index, env: &IndexEnv<'_>, h: &mut Helpers) -> Result<(String, Prec), String> {
    match idx {
        Index::Const(c) if *c >= 0 => Ok((env.lit(*c as u64), 0)),
        Index::Const(c) => Ok((format!("({})0 - {}", env.ty(), env.lit(c.unsigned_abs())), 2)),
        Index::Var(v) => Ok((var_name(*v, env)?, 0)),
        Index::Value(e) => Err(format!("gathered value v{} is used outside a clamp", e.0)),
        Index::Sum(ts) => {
            let mut out = String::new();
            for (k, t) in ts.iter().enumerate() {
                // Negative constants and coefficients subtract (wrapping, the whole sum is
                // non-negative).
                let neg = match t {
                    Index::Const(c) if *c < 0 => Some(env.lit(c.unsigned_abs())),
                    Index::Mul(x, c) if *c < 0 => {
                        let m = if *c == -1 {
                            paren(ru(x, env, h)?, 1)
                        } else {
                            format!("{} * {}", paren(ru(x, env, h)?, 1), env.lit(c.unsigned_abs()))
                        };
                        Some(m)
                    }
                    _ => None,
                };
                match neg {
                    Some(m) if k > 0 => out.push_str(&format!(" - {m}")),
                    Some(m) => out.push_str(&format!("({})0 - {m}", env.ty())),
                    None => {
                        if k > 0 {
                            out.push_str(" + ");
                        }
                        out.push_str(&paren(ru(t, env, h)?, 2));
                    }
                }
            }
            Ok((out, 2))
        }
        Index::Mul(x, c) if *c >= 0 => Ok((format!("{} * {}", paren(ru(x, env, h)?, 1), env.lit(*c as u64)), 1)),
        Index::Mul(x, c) => {
            Ok((format!("({})0 - {} * {}", env.ty(), paren(ru(x, env, h)?, 1), env.lit(c.unsigned_abs())), 2))
        }
        Index::Div(x, c) => Ok((format!("{} / {}", paren(ru(x, env, h)?, 1), env.lit(*c as u64)), 1)),
        Index::Mod(x, c) => Ok((format!("{} % {}", paren(ru(x, env, h)?, 1), env.lit(*c as u64)), 1)),
        Index::Clamp(x, lo, hi) => {
            if let Index::Value(e) = **x {
                let (v, d) = (env.value)(e).ok_or_else(|| format!("internal: gathered value v{} not emitted", e.0))?;
                h.need(H::Clamp(It::I64));
                let s = format!("sinter_clamp({}, {}, {})", to_index(&v, d, h), i64_lit(*lo), i64_lit(*hi));
                return Ok((format!("({}){s}", env.ty()), 0));
            }
            h.need(H::Clamp(if env.wide { It::U64 } else { It::U32 }));
            let lo = env.lit((*lo).max(0) as u64);
            let hi = env.lit((*hi).max(0) as u64);
            Ok((format!("sinter_clamp({}, {lo}, {hi})", ru(x, env, h)?.0), 0))
        }
    }
}

fn i64_lit(c: i64) -> String {
    if c == i64::MIN {
        "(-9223372036854775807LL - 1)".into()
    } else if c < 0 {
        format!("({c}LL)")
    } else {
        format!("{c}LL")
    }
}

/// How an index behaves across the `W` consecutive values `base + j` (j in 0..W) of a vectorized
/// loop variable, where `base` is a multiple of `W`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LaneForm {
    /// The same element for every j: loaded once.
    Uniform,
    /// `W` consecutive elements starting at a multiple of `W`: one vector access.
    Contig,
    /// Anything else: one scalar access per j.
    Gather,
}

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
pub(crate) fn lane_form(idx: &Index, var: Var, w: u32, uniform_value: &dyn Fn(ExprId) -> bool) -> LaneForm {
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
    fn renders_unsigned_with_subtraction() {
        let names: HashMap<Var, String> = [(Var::Lane, "lane".to_string())].into();
        let value = |_| None;
        let env = IndexEnv { names: &names, wide: false, value: &value };
        let mut h = Helpers::default();
        let i = Index::Sum(vec![Index::Const(9), l().mul(-1)]);
        assert_eq!(render_address(&i, &env, &mut h).unwrap(), "9u - lane");
        let i = l().add(Index::Const(3)).div(4).mul(6).add(l().rem(5));
        assert_eq!(render_address(&i, &env, &mut h).unwrap(), "(lane + 3u) / 4u * 6u + lane % 5u");
        assert_eq!(render_signed(&l().add(Index::Const(-2)), &env, &mut h).unwrap(), "(long long)(int)(lane - 2u)");
    }
}
