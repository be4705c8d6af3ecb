//! Index rendering (symbolic [`Index`] → WGSL integer expressions) and the lane analysis that decides
//! which accesses of a vectorized loop are 4-wide.
//!
//! Indices are rendered in `u32` wherever every subterm is provably non-negative (the common case: then
//! `/` and `%` are the hardware's unsigned operations and constant divisions compile to multiply-shift),
//! and in `i32` with floor-division helpers where a subterm may be negative (pads, clamped gathers).

use std::collections::HashMap;

use sinter_core::kernel::index::Range;
use sinter_core::kernel::{ExprId, Index, Var};

use super::helpers::{H, Helpers};
use super::types::Ct;

/// What an index expression can refer to while rendering.
pub(crate) struct IndexEnv<'a> {
    /// WGSL names of the loop variables in scope.
    pub(crate) names: &'a HashMap<Var, String>,
    /// Their ranges.
    pub(crate) ranges: &'a HashMap<Var, Range>,
    /// WGSL expression and compute type of an [`Index::Value`] operand.
    pub(crate) value: &'a dyn Fn(ExprId) -> (String, Ct),
}

impl IndexEnv<'_> {
    fn range(&self, idx: &Index) -> Option<Range> {
        idx.range(&|v| self.ranges.get(&v).copied())
    }

    fn nonneg(&self, idx: &Index) -> bool {
        self.range(idx).is_some_and(|(lo, hi)| lo >= 0 && hi <= i64::from(u32::MAX))
    }
}

/// Precedence of a rendered expression: 0 atom, 1 multiplicative, 2 additive.
type Prec = u8;

fn paren(s: (String, Prec), max: Prec) -> String {
    if s.1 > max { format!("({})", s.0) } else { s.0 }
}

/// Renders `idx` as a `u32` expression. Errors when the index may be negative or exceed `u32` at the top.
pub(crate) fn render_u32(idx: &Index, env: &IndexEnv<'_>, h: &mut Helpers) -> Result<String, String> {
    if let Some((lo, hi)) = env.range(idx)
        && (lo < 0 || hi > i64::from(u32::MAX))
    {
        return Err(format!("index `{idx}` has range [{lo}, {hi}], outside u32"));
    }
    Ok(ru(idx, env, h)?.0)
}

/// Renders `idx` as an `i32` expression.
pub(crate) fn render_i32(idx: &Index, env: &IndexEnv<'_>, h: &mut Helpers) -> Result<String, String> {
    Ok(ri(idx, env, h)?.0)
}

fn var_name(v: Var, env: &IndexEnv<'_>) -> Result<String, String> {
    env.names.get(&v).cloned().ok_or_else(|| format!("index uses `{v}`, which this kernel body does not define"))
}

fn ru(idx: &Index, env: &IndexEnv<'_>, h: &mut Helpers) -> Result<(String, Prec), String> {
    let all_nonneg = env.nonneg(idx);
    match idx {
        Index::Const(c) if *c >= 0 && *c <= i64::from(u32::MAX) => Ok((format!("{c}u"), 0)),
        Index::Var(v) if all_nonneg => Ok((var_name(*v, env)?, 0)),
        Index::Sum(ts) if all_nonneg && ts.iter().all(|t| env.nonneg(t)) => {
            let parts: Vec<String> = ts.iter().map(|t| ru(t, env, h).map(|r| r.0)).collect::<Result<_, _>>()?;
            Ok((parts.join(" + "), 2))
        }
        Index::Mul(x, c) if *c >= 0 && env.nonneg(x) && all_nonneg => {
            Ok((format!("{} * {c}u", paren(ru(x, env, h)?, 1)), 1))
        }
        Index::Div(x, c) if *c > 0 && env.nonneg(x) => Ok((format!("{} / {c}u", paren(ru(x, env, h)?, 1)), 1)),
        Index::Mod(x, c) if *c > 0 && env.nonneg(x) => Ok((format!("{} % {c}u", paren(ru(x, env, h)?, 1)), 1)),
        Index::Clamp(x, lo, hi) if *lo >= 0 && env.nonneg(x) => {
            Ok((format!("clamp({}, {lo}u, {hi}u)", ru(x, env, h)?.0), 0))
        }
        _ => {
            let (s, _) = ri(idx, env, h)?;
            Ok((format!("u32({s})"), 0))
        }
    }
}

fn i32_const(c: i64) -> Result<String, String> {
    i32::try_from(c).map(super::types::i32_lit).map_err(|_| format!("index constant {c} does not fit i32"))
}

fn ri(idx: &Index, env: &IndexEnv<'_>, h: &mut Helpers) -> Result<(String, Prec), String> {
    if let Some((lo, hi)) = env.range(idx)
        && (lo < i64::from(i32::MIN) || hi > i64::from(i32::MAX))
    {
        return Err(format!("index `{idx}` has range [{lo}, {hi}], outside i32"));
    }
    match idx {
        Index::Const(c) => Ok((i32_const(*c)?, if *c < 0 { 2 } else { 0 })),
        Index::Var(v) => Ok((format!("i32({})", var_name(*v, env)?), 0)),
        Index::Value(e) => {
            let (s, ct) = (env.value)(*e);
            Ok(match ct {
                Ct::I32 => (s, 0),
                Ct::U32 | Ct::F32 => (format!("i32({s})"), 0),
                Ct::Bool => (format!("select(0i, 1i, {s})"), 0),
            })
        }
        Index::Sum(ts) => {
            let mut out = String::new();
            for (k, t) in ts.iter().enumerate() {
                if let Index::Const(c) = t
                    && *c < 0
                    && k > 0
                    && let Some(n) = c.checked_neg()
                {
                    out.push_str(&format!(" - {}", i32_const(n)?));
                    continue;
                }
                if k > 0 {
                    out.push_str(" + ");
                }
                out.push_str(&paren(ri(t, env, h)?, 1));
            }
            Ok((out, 2))
        }
        Index::Mul(x, c) => Ok((format!("{} * {}", paren(ri(x, env, h)?, 1), i32_const(*c)?), 1)),
        Index::Div(x, c) => {
            if env.nonneg(x) {
                Ok((format!("i32({} / {c}u)", paren(ru(x, env, h)?, 1)), 0))
            } else {
                let f = h.need(H::FloorDiv, false);
                Ok((format!("{f}({}, {})", ri(x, env, h)?.0, i32_const(*c)?), 0))
            }
        }
        Index::Mod(x, c) => {
            if env.nonneg(x) {
                Ok((format!("i32({} % {c}u)", paren(ru(x, env, h)?, 1)), 0))
            } else {
                let f = h.need(H::FloorMod, false);
                Ok((format!("{f}({}, {})", ri(x, env, h)?.0, i32_const(*c)?), 0))
            }
        }
        Index::Clamp(x, lo, hi) => {
            Ok((format!("clamp({}, {}, {})", ri(x, env, h)?.0, i32_const(*lo)?, i32_const(*hi)?), 0))
        }
    }
}

pub(crate) use sinter_core::kernel::lanes::LaneForm;

/// The [`LaneForm`] of `idx` for the 4 lanes of a `vec4` access along `var`.
pub(crate) fn lane_form(idx: &Index, var: Var, uniform_value: &dyn Fn(ExprId) -> bool) -> LaneForm {
    sinter_core::kernel::lanes::lane_form(idx, var, 4, uniform_value)
}
