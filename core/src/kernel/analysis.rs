//! Walks over a kernel's expression arena that every consumer of the kernel IR shares (the
//! renderers of both backends and the interpreter): operands, indices, dependence on loop
//! variables and accumulators, closures of roots, store roots and loop-variable ranges.
//!
//! All are pure functions of the IR and total: an operand id outside the arena is skipped, never
//! indexed (the verifier, [`super::interp::validate`], reports it).

use super::index::Range;
use super::{Expr, ExprId, Index, Kernel, KernelBody, Store, Var};
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
        _ => None,
    }
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
