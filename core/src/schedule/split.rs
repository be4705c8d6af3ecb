//! Split reductions: a reduce kernel with too few rows to fill the device becomes two kernels.
//!
//! A row of `len` elements is cut into `factor` chunks of `len / factor`; the first kernel
//! (`..._partial`) reduces every chunk as a row of its own (`rows * factor` rows, each written to
//! an intermediate buffer of the accumulator dtype), the second folds the `factor` partial results
//! of each row with the same operator and runs the original row epilogue. This is Inductor's
//! "split reduction": `x.sum()` over 64M elements is one workgroup in the unsplit kernel and
//! leaves all but one compute unit idle.
//!
//! Legal for kernels with exactly one reduction whose operator is associative and does not carry
//! an index (sum, product, max, min: not arg-reductions), no per-element epilogue (which would need
//! the finished row result in every chunk), a row length that `factor` divides (no masked tail),
//! and an accumulator dtype the backend can store. Profitability (whether and how far to split)
//! is [`CostModel::reduce_split`](super::CostModel::reduce_split).

use crate::kernel::interp::needed;
use crate::kernel::{
    Access, BufferId, Expr, ExprId, Index, Kernel, KernelArg, KernelBody, RedOp, ReduceBody, ReduceStrategy, Store,
    TypedExpr, Var,
};

/// Whether `k` may be split (see the module docs), ignoring the factor. Backends that split a row
/// over blocks inside one kernel take the same rule.
pub fn splittable(k: &Kernel) -> bool {
    let KernelBody::Reduce(r) = &k.body else { return false };
    r.strategy != ReduceStrategy::ThreadPerRow
        && r.reductions.len() == 1
        && matches!(r.reductions[0].op, RedOp::Sum | RedOp::Prod | RedOp::Max | RedOp::Min)
        && r.elem_stores.is_empty()
        && !r.row_stores.is_empty()
}

/// Splits `k` into a partial kernel writing `partial` (`rows * factor` accumulators) and a combine
/// kernel. `factor` must divide the row length; `strategy` maps `(rows, len)` of each new kernel
/// to the device. Names are left for the caller.
pub(super) fn split(
    k: &Kernel,
    factor: usize,
    partial: BufferId,
    strategy: &dyn Fn(usize, usize) -> ReduceStrategy,
) -> Option<(Kernel, Kernel)> {
    let KernelBody::Reduce(r) = &k.body else { return None };
    if !splittable(k) || factor < 2 || !r.len.is_multiple_of(factor) {
        return None;
    }
    let red = r.reductions[0].clone();
    let chunk = r.len / factor;
    let acc_dt = red.dtype;
    let partial_arg = KernelArg { buffer: partial, dtype: acc_dt, numel: r.rows * factor, access: Access::Write };

    // Partial kernel: row' = row * factor + c, red' in 0..chunk reads the original at
    // (row' / factor, red' + (row' % factor) * chunk).
    let row_of = Index::var(Var::Row).div(factor as i64);
    let red_of = Index::var(Var::Red).add(Index::var(Var::Row).rem(factor as i64).mul(chunk as i64));
    let remap = |i: &Index| i.substitute(Var::Row, &row_of).substitute(Var::Red, &red_of);
    let mut a = k.clone();
    a.map_expr_indices(&remap);
    let acc = ExprId(a.exprs.len() as u32);
    a.exprs.push(TypedExpr { expr: Expr::Acc(0), dtype: acc_dt });
    a.args.push(partial_arg.clone());
    let store = Store { arg: a.args.len() - 1, index: Index::var(Var::Row), value: acc };
    a.body = KernelBody::Reduce(ReduceBody {
        rows: r.rows * factor,
        len: chunk,
        reductions: vec![red.clone()],
        elem_stores: Vec::new(),
        row_stores: vec![store],
        strategy: strategy(r.rows * factor, chunk),
    });
    prune(&mut a);

    // Combine kernel: folds the `factor` partials of each row, then the original row stores.
    let mut b = k.clone();
    b.args.push(KernelArg { access: Access::Read, ..partial_arg });
    let load = ExprId(b.exprs.len() as u32);
    let index = Index::var(Var::Row).mul(factor as i64).add(Index::var(Var::Red));
    b.exprs.push(TypedExpr { expr: Expr::Load { arg: b.args.len() - 1, index }, dtype: acc_dt });
    b.body = KernelBody::Reduce(ReduceBody {
        rows: r.rows,
        len: factor,
        reductions: vec![crate::kernel::Reduction { value: load, ..red }],
        elem_stores: Vec::new(),
        row_stores: r.row_stores.clone(),
        strategy: strategy(r.rows, factor),
    });
    prune(&mut b);
    Some((a, b))
}

/// Drops the arguments and expressions `k` no longer uses and renumbers the rest.
fn prune(k: &mut Kernel) {
    let KernelBody::Reduce(r) = &k.body else { return };
    let roots: Vec<ExprId> = r.reductions.iter().map(|x| x.value).chain(r.row_stores.iter().map(|s| s.value)).collect();
    let need = needed(k, &roots, &r.row_stores);
    let KernelBody::Reduce(r) = &mut k.body else { return };
    // Expressions: keep needed ones in order (operands precede their users).
    let mut expr_map = vec![None; k.exprs.len()];
    let mut exprs = Vec::new();
    for (i, e) in k.exprs.iter().enumerate() {
        if need[i] {
            expr_map[i] = Some(ExprId(exprs.len() as u32));
            exprs.push(e.clone());
        }
    }
    // Arguments: those loaded by a kept expression or stored to.
    let mut used = vec![false; k.args.len()];
    for e in &exprs {
        if let Expr::Load { arg, .. } = e.expr {
            used[arg] = true;
        }
    }
    for s in &r.row_stores {
        used[s.arg] = true;
    }
    let mut arg_map = vec![usize::MAX; k.args.len()];
    let mut args = Vec::new();
    for (i, a) in k.args.iter().enumerate() {
        if used[i] {
            arg_map[i] = args.len();
            args.push(a.clone());
        }
    }
    let me = |id: ExprId| expr_map[id.0 as usize].expect("needed operand kept");
    let fix_index = |i: &Index| remap_values(i, &me);
    for e in &mut exprs {
        e.expr = match &e.expr {
            Expr::Load { arg, index } => Expr::Load { arg: arg_map[*arg], index: fix_index(index) },
            Expr::IndexValue(i) => Expr::IndexValue(fix_index(i)),
            Expr::IndexCmp(c, x, y) => Expr::IndexCmp(*c, fix_index(x), fix_index(y)),
            Expr::Unary(op, x) => Expr::Unary(*op, me(*x)),
            Expr::Binary(op, x, y) => Expr::Binary(*op, me(*x), me(*y)),
            Expr::Where(c, x, y) => Expr::Where(me(*c), me(*x), me(*y)),
            Expr::Cast(x) => Expr::Cast(me(*x)),
            other @ (Expr::Const(_) | Expr::Acc(_)) => other.clone(),
        };
    }
    for red in &mut r.reductions {
        red.value = me(red.value);
    }
    for s in &mut r.row_stores {
        s.arg = arg_map[s.arg];
        s.value = me(s.value);
        s.index = fix_index(&s.index);
    }
    k.exprs = exprs;
    k.args = args;
    k.bytes = k.args.iter().map(|a| (a.numel * a.dtype.size_bytes()) as f64).sum();
}

/// `i` with every [`Index::Value`] operand renumbered.
fn remap_values(i: &Index, f: &dyn Fn(ExprId) -> ExprId) -> Index {
    match i {
        Index::Value(e) => Index::Value(f(*e)),
        Index::Var(_) | Index::Const(_) => i.clone(),
        Index::Sum(ts) => Index::Sum(ts.iter().map(|t| remap_values(t, f)).collect()),
        Index::Mul(x, c) => Index::Mul(Box::new(remap_values(x, f)), *c),
        Index::Div(x, c) => Index::Div(Box::new(remap_values(x, f)), *c),
        Index::Mod(x, c) => Index::Mod(Box::new(remap_values(x, f)), *c),
        Index::Clamp(x, lo, hi) => Index::Clamp(Box::new(remap_values(x, f)), *lo, *hi),
    }
}

/// The largest divisor of `len` in `2..=want`, if it is at least `want / 4` (a prime row length
/// is not split).
pub(super) fn pick_factor(len: usize, want: usize) -> Option<usize> {
    let d = (2..=want.min(len)).rev().find(|d| len.is_multiple_of(*d))?;
    (d * 4 >= want).then_some(d)
}
