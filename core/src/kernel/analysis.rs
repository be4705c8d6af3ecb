//! Walks over a kernel's expression arena that every consumer of the kernel IR shares (the
//! renderers of both backends and the interpreter): operands, indices, dependence on loop
//! variables and accumulators, closures of roots, store roots and loop-variable ranges; and the
//! structural check of one kernel ([`check_kernel`], [`check_index`]) they all rely on.
//!
//! All are pure functions of the IR and total: an operand id outside the arena is skipped, never
//! indexed (the verifier, [`super::interp::validate`], reports it).

use super::index::Range;
use super::{Access, Expr, ExprId, Index, Kernel, KernelBody, Store, Var};
use std::collections::BTreeSet;

/// Operands of an expression, including the values its indices use.
pub fn operands(e: &Expr) -> Vec<ExprId> {
    let mut out = Vec::new();
    match e {
        Expr::Load { index, .. } | Expr::IndexValue(index) => index.values(&mut |v| out.push(v)),
        Expr::IndexCmp(_, a, b) => {
            a.values(&mut |v| out.push(v));
            b.values(&mut |v| out.push(v));
        }
        Expr::Unary(_, x) | Expr::Cast(x) => out.push(*x),
        Expr::Binary(_, a, b) => out.extend([*a, *b]),
        Expr::Where(c, a, b) => out.extend([*c, *a, *b]),
        Expr::Const(_) | Expr::Acc(_) => {}
    }
    out
}

/// Every index an expression holds.
pub fn indices(e: &Expr) -> Vec<&Index> {
    match e {
        Expr::Load { index, .. } | Expr::IndexValue(index) => vec![index],
        Expr::IndexCmp(_, a, b) => vec![a, b],
        _ => vec![],
    }
}

/// Whether each expression depends on loop variable `v` (through an index, directly or through
/// its operands).
pub fn depends_on(k: &Kernel, v: Var) -> Vec<bool> {
    let mut dep = vec![false; k.exprs.len()];
    for (i, te) in k.exprs.iter().enumerate() {
        let own = indices(&te.expr).iter().any(|ix| ix.uses(v));
        dep[i] = own || operands(&te.expr).iter().any(|o| dep.get(o.0 as usize).copied().unwrap_or(false));
    }
    dep
}

/// The largest accumulator slot each expression reads (transitively), if any.
pub fn acc_uses(k: &Kernel) -> Vec<Option<usize>> {
    let mut out: Vec<Option<usize>> = vec![None; k.exprs.len()];
    for (i, te) in k.exprs.iter().enumerate() {
        let own = match te.expr {
            Expr::Acc(s) => Some(s),
            _ => None,
        };
        out[i] = operands(&te.expr).iter().filter_map(|o| out.get(o.0 as usize).copied().flatten()).chain(own).max();
    }
    out
}

/// The transitive closure of `roots` (ids, in arena order), not descending below `leaf`
/// expressions.
pub fn closure(k: &Kernel, roots: &[ExprId], leaf: &dyn Fn(u32) -> bool) -> BTreeSet<u32> {
    let mut seen = BTreeSet::new();
    let mut stack: Vec<u32> = roots.iter().map(|r| r.0).collect();
    while let Some(e) = stack.pop() {
        if !seen.insert(e) || leaf(e) {
            continue;
        }
        if let Some(te) = k.exprs.get(e as usize) {
            stack.extend(operands(&te.expr).into_iter().map(|o| o.0));
        }
    }
    seen
}

/// Roots of a store: its value and the values its index uses.
pub fn store_roots(s: &Store) -> Vec<ExprId> {
    let mut r = vec![s.value];
    s.index.values(&mut |v| r.push(v));
    r
}

/// The range of loop variable `v` in a kernel body (`None` for an empty extent or a variable the
/// body lacks).
pub fn var_range(k: &Kernel, v: Var) -> Option<Range> {
    let r = |n: usize| if n == 0 { None } else { Some((0, n as i64 - 1)) };
    match (&k.body, v) {
        (KernelBody::Pointwise { numel, .. }, Var::Lane) => r(*numel),
        (KernelBody::Reduce(b), Var::Row) => r(b.rows),
        (KernelBody::Reduce(b), Var::Red) => r(b.len),
        (KernelBody::Matmul(m), Var::Batch) => r(m.batch),
        (KernelBody::Matmul(m), Var::M) => r(m.m),
        (KernelBody::Matmul(m), Var::N) => r(m.n),
        (KernelBody::Attention(a), Var::Batch) => r(a.batch * a.heads),
        (KernelBody::Attention(a), Var::M) => r(a.m),
        (KernelBody::Attention(a), Var::N) => r(a.dv),
        (KernelBody::Attention(a), Var::Key) => r(a.kv),
        _ => None,
    }
}

/// Every loop variable.
pub const VARS: [Var; 7] = [Var::Lane, Var::Row, Var::Red, Var::Batch, Var::M, Var::N, Var::Key];

/// The loop variables a kernel body defines.
pub fn body_vars(b: &KernelBody) -> &'static [Var] {
    match b {
        KernelBody::Pointwise { .. } => &[Var::Lane],
        KernelBody::Reduce(_) => &[Var::Row, Var::Red],
        KernelBody::Matmul(_) => &[Var::Batch, Var::M, Var::N],
        KernelBody::Attention(_) => &[Var::Batch, Var::M, Var::N, Var::Key],
    }
}

/// True when the body has no iteration to run (an empty extent).
pub fn body_is_empty(b: &KernelBody) -> bool {
    match b {
        KernelBody::Pointwise { numel, .. } => *numel == 0,
        KernelBody::Reduce(r) => r.rows == 0,
        KernelBody::Matmul(m) => m.batch == 0 || m.m == 0 || m.n == 0,
        KernelBody::Attention(a) => a.batch == 0 || a.heads == 0 || a.m == 0 || a.dv == 0,
    }
}

/// Every index of the kernel: those of its expressions and of its stores.
pub fn all_indices(k: &Kernel) -> Vec<&Index> {
    let mut out: Vec<&Index> = k.exprs.iter().flat_map(|te| indices(&te.expr)).collect();
    out.extend(k.body.stores().into_iter().map(|s| &s.index));
    out
}

/// Checks that every division, remainder and clamp operand of `i` is provably non-negative (so the
/// index renders in wrapping unsigned arithmetic), divisors are positive, and gathered values
/// appear only directly inside a clamp.
pub fn check_index(i: &Index, vr: &dyn Fn(Var) -> Option<Range>) -> Result<(), String> {
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

/// Structural checks of one kernel that every renderer relies on (and the verifier repeats per
/// program): operands precede their users, loads and stores name existing arguments of the right
/// access and dtype, reduction slots equal positions, matmul operands are read arguments of the
/// input dtype, and every index passes [`check_index`]. The error names the violation; nothing
/// here panics, whatever the IR.
pub fn check_kernel(k: &Kernel) -> Result<(), String> {
    let bad = |what: String| Err(what);
    let vr = |v: Var| var_range(k, v);
    let n = k.exprs.len();
    // Index arithmetic is 64-bit signed: the iteration space and every argument must fit it.
    let extents: &[usize] = match &k.body {
        KernelBody::Pointwise { numel, .. } => &[*numel],
        KernelBody::Reduce(r) => &[r.rows, r.len],
        KernelBody::Matmul(m) => &[m.batch, m.m, m.n, m.k],
        KernelBody::Attention(a) => &[a.batch, a.heads, a.m, a.kv, a.d.max(a.dv)],
    };
    let space = extents.iter().fold(1u128, |a, &e| a.saturating_mul(e.max(1) as u128));
    if space > i64::MAX as u128 {
        return bad(format!("extents {extents:?} overflow the 64-bit index space"));
    }
    if let Some((i, a)) = k.args.iter().enumerate().find(|(_, a)| a.numel > i64::MAX as usize) {
        return bad(format!("argument {i} has {} elements, more than 64-bit indices reach", a.numel));
    }
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
    let check_store = |s: &Store| -> Result<(), String> {
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
        KernelBody::Attention(a) => {
            a.stores.iter().try_for_each(check_store)?;
            if a.score.0 as usize >= n {
                return bad(format!("the attention score v{} does not exist", a.score.0));
            }
            for (name, op) in [("q", &a.q), ("k", &a.k), ("v", &a.v)] {
                match k.args.get(op.arg) {
                    None => return bad(format!("attention operand {name} is argument {}, which is missing", op.arg)),
                    Some(arg) if arg.access != Access::Read || arg.dtype != a.in_dtype => {
                        return bad(format!(
                            "attention operand {name} (argument {}) must be read with dtype {}",
                            op.arg, a.in_dtype
                        ));
                    }
                    Some(_) => {}
                }
                if op.group == 0 || a.heads % op.group != 0 {
                    return bad(format!("attention operand {name} groups {} heads of {}", op.group, a.heads));
                }
            }
            if a.d == 0 || a.kv == 0 {
                return bad(format!("attention with an empty extent (d {}, kv {})", a.d, a.kv));
            }
        }
    }
    if !body_is_empty(&k.body) {
        for ix in all_indices(k) {
            // An index over an empty extent (a row of length 0) is never evaluated; one over a
            // variable the body lacks is refused when rendered.
            if VARS.iter().any(|&v| ix.uses(v) && vr(v).is_none()) {
                continue;
            }
            check_index(ix, &vr)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DType;
    use crate::ir::{BinaryOp, UnaryOp};

    #[test]
    fn walks_follow_operands_indices_and_accumulators() {
        let mut k = Kernel {
            name: "k".into(),
            args: vec![],
            exprs: vec![],
            body: KernelBody::Pointwise { numel: 8, stores: vec![] },
            origins: vec![],
            ops: vec![],
            flops: 0.0,
            bytes: 0.0,
        };
        let x = k.push_expr(Expr::Load { arg: 0, index: Index::var(Var::Lane) }, DType::F32);
        let c = k.push_expr(Expr::Const(2.0), DType::F32);
        let a = k.push_expr(Expr::Acc(1), DType::F32);
        let m = k.push_expr(Expr::Binary(BinaryOp::Mul, x, c), DType::F32);
        let y = k.push_expr(Expr::Unary(UnaryOp::Neg, a), DType::F32);
        let dep = depends_on(&k, Var::Lane);
        assert_eq!(dep, vec![true, false, false, true, false]);
        assert_eq!(acc_uses(&k), vec![None, None, Some(1), None, Some(1)]);
        assert_eq!(closure(&k, &[m], &|_| false), BTreeSet::from([x.0, c.0, m.0]));
        assert_eq!(closure(&k, &[y, m], &|e| e == m.0), BTreeSet::from([a.0, m.0, y.0]));
        assert_eq!(var_range(&k, Var::Lane), Some((0, 7)));
        assert_eq!(var_range(&k, Var::Row), None);
        // An operand outside the arena is skipped, not indexed.
        k.push_expr(Expr::Unary(UnaryOp::Neg, ExprId(99)), DType::F32);
        assert_eq!(closure(&k, &[ExprId(5)], &|_| false), BTreeSet::from([5, 99]));
    }
}
