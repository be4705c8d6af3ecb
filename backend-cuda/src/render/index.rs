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

/// A loop variable walked as two nested loops (`var = outer * factor + inner`, `inner <
/// factor`): a window's taps walked row by row, so `var / factor` renders as the outer
/// variable and `var % factor` as the inner one instead of being computed again for every tap.
#[derive(Clone, Debug)]
pub(crate) struct Split {
    /// The split variable.
    pub(crate) var: Var,
    /// The inner loop's extent.
    pub(crate) factor: u64,
    /// C++ names of the outer and inner loop variables.
    pub(crate) outer: String,
    pub(crate) inner: String,
}

/// The extent of the inner loop in which to walk `var` (`0..n`) as two nested loops: the smallest
/// divisor `c` of `n` (`1 < c < n`) by which some index of `k` divides `var` or takes its
/// remainder (a 7x7 window's `red / 7` and `red % 7`); `None` where no index does.
pub(crate) fn split_factor(k: &Kernel, var: Var, n: u64) -> Option<u64> {
    split_factor_of(all_indices(k).into_iter(), var, n)
}

fn split_factor_of<'i>(indices: impl Iterator<Item = &'i Index>, var: Var, n: u64) -> Option<u64> {
    let mut best: Option<u64> = None;
    for i in indices {
        i.visit(&mut |node| {
            if let Index::Div(x, c) | Index::Mod(x, c) = node {
                let c = *c as u64;
                if matches!(**x, Index::Var(v) if v == var) && c > 1 && c < n && n.is_multiple_of(c) {
                    best = Some(best.map_or(c, |b| b.min(c)));
                }
            }
        });
    }
    best
}

/// What an index can refer to while rendering.
pub(crate) struct IndexEnv<'a> {
    /// C++ names of the loop variables in scope.
    pub(crate) names: &'a HashMap<Var, String>,
    /// A variable in scope walked as two nested loops.
    pub(crate) split: Option<&'a Split>,
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
    if let Some(r) = split_part(idx, env) {
        return Ok(r);
    }
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

/// `var / c` or `var % c` of a split variable (`var = outer * f + inner`, `inner < f`) in terms of
/// its loop variables: `var / (f * m)` = `outer / m`, `var % c` = `inner % c` where `c` divides
/// `f`; `None` for every other index.
fn split_part(idx: &Index, env: &IndexEnv<'_>) -> Option<(String, Prec)> {
    let s = env.split?;
    let (x, c, div) = match idx {
        Index::Div(x, c) => (x, *c as u64, true),
        Index::Mod(x, c) => (x, *c as u64, false),
        _ => return None,
    };
    if !matches!(**x, Index::Var(v) if v == s.var) || c == 0 {
        return None;
    }
    let (name, by) = if div && c.is_multiple_of(s.factor) {
        (&s.outer, c / s.factor)
    } else if !div && s.factor.is_multiple_of(c) {
        (&s.inner, if c == s.factor { 1 } else { c })
    } else {
        return None;
    };
    let op = if div { "/" } else { "%" };
    Some(if by == 1 { (name.clone(), 0) } else { (format!("{name} {op} {}", env.lit(by)), 1) })
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

pub(crate) use sinter_core::kernel::lanes::{LaneForm, lane_form};

#[cfg(test)]
mod tests {
    use super::*;

    fn l() -> Index {
        Index::var(Var::Lane)
    }

    #[test]
    fn renders_unsigned_with_subtraction() {
        let names: HashMap<Var, String> = [(Var::Lane, "lane".to_string())].into();
        let value = |_| None;
        let env = IndexEnv { names: &names, split: None, wide: false, value: &value };
        let mut h = Helpers::default();
        let i = Index::Sum(vec![Index::Const(9), l().mul(-1)]);
        assert_eq!(render_address(&i, &env, &mut h).unwrap(), "9u - lane");
        let i = l().add(Index::Const(3)).div(4).mul(6).add(l().rem(5));
        assert_eq!(render_address(&i, &env, &mut h).unwrap(), "(lane + 3u) / 4u * 6u + lane % 5u");
        assert_eq!(render_signed(&l().add(Index::Const(-2)), &env, &mut h).unwrap(), "(long long)(int)(lane - 2u)");
    }

    #[test]
    fn renders_a_split_variable_through_its_loops() {
        let r = || Index::var(Var::Red);
        let names: HashMap<Var, String> = [(Var::Red, "red".to_string())].into();
        let split = Split { var: Var::Red, factor: 7, outer: "red_o".into(), inner: "red_i".into() };
        let value = |_| None;
        let env = IndexEnv { names: &names, split: Some(&split), wide: false, value: &value };
        let mut h = Helpers::default();
        let mut render = |i: Index| render_address(&i, &env, &mut h).unwrap();
        assert_eq!(render(r().div(7).add(r().rem(7))), "red_o + red_i");
        assert_eq!(render(r().div(49).mul(3)), "red_o / 7u * 3u");
        // Neither a multiple nor a divisor of the inner extent: the variable as it is.
        assert_eq!(render(r().div(3).add(r().rem(49))), "red / 3u + red % 49u");
        assert_eq!(render(r().mul(384)), "red * 384u");
    }

    #[test]
    fn finds_the_smallest_divisor_a_window_walk_uses() {
        let r = || Index::var(Var::Red);
        assert_eq!(split_factor_of([r().div(7), r().rem(7)].iter(), Var::Red, 49), Some(7));
        assert_eq!(split_factor_of([r().div(9), r().div(3).rem(3), r().rem(3)].iter(), Var::Red, 27), Some(3));
        assert_eq!(split_factor_of([r().mul(5)].iter(), Var::Red, 25), None);
        // A divisor that does not divide the walk's extent cannot split it.
        assert_eq!(split_factor_of([r().div(4)].iter(), Var::Red, 49), None);
    }
}
