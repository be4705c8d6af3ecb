//! Kernel-IR walks the templates share (core's [`sinter_core::kernel::analysis`], shared with the
//! WGSL renderer and the interpreter), and the structural checks rendering relies on (operands precede users,
//! arguments exist and are used as declared, index operands that must be non-negative are).

use sinter_core::kernel::index::Range;
use sinter_core::kernel::{Access, Expr, Index, Kernel, KernelBody, Store, Var};

use super::RenderError;

pub(crate) use sinter_core::kernel::analysis::{
    acc_uses, closure, depends_on, indices, operands, store_roots, var_range,
};

/// Every index of the kernel: those of its expressions and of its stores.
pub(crate) fn all_indices(k: &Kernel) -> Vec<&Index> {
    let mut out: Vec<&Index> = k.exprs.iter().flat_map(|te| indices(&te.expr)).collect();
    let stores: Vec<&Store> = match &k.body {
        KernelBody::Pointwise { stores, .. } => stores.iter().collect(),
        KernelBody::Reduce(r) => r.elem_stores.iter().chain(&r.row_stores).collect(),
        KernelBody::Matmul(m) => m.stores.iter().collect(),
    };
    out.extend(stores.into_iter().map(|s| &s.index));
    out
}

/// Checks that every division, remainder and clamp operand of `i` is provably non-negative (so the
/// index renders in wrapping unsigned arithmetic), divisors are positive, and gathered values
/// appear only directly inside a clamp.
fn check_index(i: &Index, vr: &dyn Fn(Var) -> Option<Range>) -> Result<(), String> {
    let nonneg = |x: &Index| x.range(vr).is_some_and(|(lo, _)| lo >= 0);
    match i {
        Index::Const(_) | Index::Var(_) => Ok(()),
        Index::Value(e) => Err(format!("gathered value v{} is used outside a clamp in `{i}`", e.0)),
        Index::Sum(ts) => ts.iter().try_for_each(|t| check_index(t, vr)),
        Index::Mul(x, _) => check_index(x, vr),
        Index::Div(x, c) | Index::Mod(x, c) => {
            if *c <= 0 {
                return Err(format!("`{i}` divides by {c}"));
            }
            if !nonneg(x) {
                return Err(format!("the operand of `{i}` may be negative"));
            }
            check_index(x, vr)
        }
        Index::Clamp(x, lo, hi) => {
            if lo > hi {
                return Err(format!("`{i}` has an empty range"));
            }
            if let Index::Value(_) = **x {
                return Ok(());
            }
            if !nonneg(x) {
                return Err(format!("the operand of `{i}` may be negative"));
            }
            check_index(x, vr)
        }
    }
}

/// Structural checks of the kernel IR that rendering relies on. Violations are
/// [`RenderError::Unsupported`] naming the expression; nothing here panics.
pub(crate) fn validate(k: &Kernel) -> Result<(), RenderError> {
    let bad = |what: String| Err(RenderError::Unsupported { kernel: k.name.clone(), what });
    let vr = |v: Var| var_range(k, v);
    let n = k.exprs.len();
    for (i, te) in k.exprs.iter().enumerate() {
        for o in operands(&te.expr) {
            if o.0 as usize >= i {
                return bad(format!("v{i} uses v{}, which does not precede it", o.0));
            }
        }
        if let Expr::Load { arg, .. } = te.expr {
            match k.args.get(arg) {
                None => return bad(format!("v{i} loads argument {arg}; the kernel has {}", k.args.len())),
                Some(a) if a.access != Access::Read => return bad(format!("v{i} loads written argument {arg}")),
                Some(a) if a.dtype != te.dtype => {
                    return bad(format!("v{i} loads {} from a {} argument", te.dtype, a.dtype));
                }
                Some(_) => {}
            }
        }
        if let Expr::Const(c) = te.expr
            && c.is_nan()
            && !te.dtype.is_float()
        {
            return bad(format!("v{i} is a NaN literal of dtype {}", te.dtype));
        }
    }
    let check_store = |s: &Store| -> Result<(), RenderError> {
        match k.args.get(s.arg) {
            None => return bad(format!("a store writes argument {}; the kernel has {}", s.arg, k.args.len())),
            Some(a) if a.access != Access::Write => return bad(format!("a store writes read-only argument {}", s.arg)),
            Some(_) => {}
        }
        if s.value.0 as usize >= n {
            return bad(format!("a store uses v{}, which does not exist", s.value.0));
        }
        let mut missing = None;
        s.index.values(&mut |e| {
            if e.0 as usize >= n {
                missing = Some(e.0);
            }
        });
        if let Some(e) = missing {
            return bad(format!("a store index uses v{e}, which does not exist"));
        }
        Ok(())
    };
    match &k.body {
        KernelBody::Pointwise { stores, .. } => stores.iter().try_for_each(check_store)?,
        KernelBody::Reduce(r) => {
            r.elem_stores.iter().chain(&r.row_stores).try_for_each(check_store)?;
            for (i, red) in r.reductions.iter().enumerate() {
                if red.value.0 as usize >= n {
                    return bad(format!("reduction {i} folds v{}, which does not exist", red.value.0));
                }
                if red.slot != i {
                    return bad(format!("reduction {i} has slot {}; slots must equal positions", red.slot));
                }
            }
        }
        KernelBody::Matmul(m) => {
            m.stores.iter().try_for_each(check_store)?;
            for (name, op) in [("a", &m.a), ("b", &m.b)] {
                match k.args.get(op.arg) {
                    None => return bad(format!("matmul operand {name} is argument {}, which is missing", op.arg)),
                    Some(a) if a.access != Access::Read || a.dtype != m.in_dtype => {
                        return bad(format!(
                            "matmul operand {name} (argument {}) must be read with dtype {}",
                            op.arg, m.in_dtype
                        ));
                    }
                    Some(_) => {}
                }
            }
        }
    }
    let empty = match &k.body {
        KernelBody::Pointwise { numel, .. } => *numel == 0,
        KernelBody::Reduce(r) => r.rows == 0,
        KernelBody::Matmul(m) => m.batch * m.m * m.n == 0,
    };
    if !empty {
        const VARS: [Var; 6] = [Var::Lane, Var::Row, Var::Red, Var::Batch, Var::M, Var::N];
        for ix in all_indices(k) {
            // An index over an empty extent (a row of length 0) is never evaluated; one over a
            // variable the body lacks is refused when rendered.
            if VARS.iter().any(|&v| ix.uses(v) && vr(v).is_none()) {
                continue;
            }
            check_index(ix, &vr).map_err(|what| RenderError::Unsupported { kernel: k.name.clone(), what })?;
        }
    }
    Ok(())
}
