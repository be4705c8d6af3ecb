//! Kernel-IR walks the templates share (core's [`sinter_core::kernel::analysis`], shared with the
//! WGSL renderer and the interpreter), and the structural checks rendering relies on (operands precede users,
//! arguments exist and are used as declared, index operands that must be non-negative are).

use sinter_core::DType;
use sinter_core::ir::{BinaryOp, UnaryOp};
use sinter_core::kernel::{Access, Expr, Kernel, KernelBody, RedOp};

use super::RenderError;

pub(crate) use sinter_core::kernel::analysis::{
    acc_uses, all_indices, check_kernel, closure, depends_on, operands, store_roots, var_range,
};

/// [`check_kernel`] as a render error.
pub(crate) fn validate(k: &Kernel) -> Result<(), RenderError> {
    check_kernel(k).map_err(|what| RenderError::Unsupported { kernel: k.name.clone(), what })
}

/// True when kernel `k` may compute `exp` as `__expf` (`ex2.approx.ftz` of `x * log2(e)`:
/// relative error about `2^-22 + |x| * 2^-24`, results under `2^-126` flushed to zero) and float
/// division as `a * __frcp_rn(b)` (at most 1.5 ulp of f32), as Triton and therefore Inductor do
/// (`tl.exp`, `div.full`). Measured reason: in a bf16 softmax over rows whose values span +-100
/// (a K = 4096 product), most `exp(x - max)` underflow into the denormal range, where `expf` and
/// IEEE division take their slow paths: ~94 instructions per element (ncu), compute-bound at 18%
/// of memory throughput (BENCHMARKS.md, issue 11 run 7).
///
/// Legal only where the difference cannot be seen: every output of the kernel is f16 or bf16,
/// whose half ulp (`2^-12`, `2^-9`) is far above these errors, so an output differs from the
/// exact one only where an f32 value lies within that error of a 16-bit rounding boundary (one
/// ulp of the output dtype, inside every bound the comparisons use); and no value passes through
/// an operation that is discontinuous in a float operand (rounding to an integer, a comparison,
/// a float modulo, a cast to an integer or bool, an arg reduction), which could turn that error into a different
/// integer or branch.
pub(crate) fn relaxed_math(k: &Kernel) -> bool {
    let outputs_16 =
        k.args.iter().filter(|a| a.access == Access::Write).all(|a| matches!(a.dtype, DType::F16 | DType::BF16));
    let float = |d: DType| matches!(d, DType::F16 | DType::BF16 | DType::F32 | DType::F64);
    let discontinuous = k.exprs.iter().any(|e| match &e.expr {
        Expr::Unary(op, x) => {
            float(k.expr(*x).dtype)
                && matches!(
                    op,
                    UnaryOp::Floor | UnaryOp::Ceil | UnaryOp::Round | UnaryOp::Sign | UnaryOp::IsNan | UnaryOp::IsInf
                )
        }
        Expr::Binary(op, a, _) => {
            float(k.expr(*a).dtype)
                && matches!(
                    op,
                    BinaryOp::Lt
                        | BinaryOp::Le
                        | BinaryOp::Gt
                        | BinaryOp::Ge
                        | BinaryOp::Eq
                        | BinaryOp::Ne
                        | BinaryOp::Mod
                        | BinaryOp::FMod
                )
        }
        Expr::Cast(x) => float(k.expr(*x).dtype) && !float(e.dtype),
        _ => false,
    });
    let arg_reduction = match &k.body {
        KernelBody::Reduce(b) => b.reductions.iter().any(|r| matches!(r.op, RedOp::ArgMax | RedOp::ArgMin)),
        _ => false,
    };
    outputs_16 && !discontinuous && !arg_reduction
}

/// Whether f32 expression `e` of `k` is provably within [-1, 1] (or NaN), so a `sin` or `cos` of it
/// needs no argument reduction ([`super::trig::Trig::SinUnit`]): the value of a `sin`, `cos`,
/// `tanh`, `sigmoid` or `erf`, a literal in range, and negations, absolute values, products,
/// minima, maxima and selections of such values. Walks at most [`UNIT_DEPTH`] levels.
pub(crate) fn within_unit(k: &Kernel, e: sinter_core::kernel::ExprId) -> bool {
    within_unit_at(k, e, UNIT_DEPTH)
}

/// How deep [`within_unit`] looks through an expression.
const UNIT_DEPTH: usize = 8;

fn within_unit_at(k: &Kernel, e: sinter_core::kernel::ExprId, depth: usize) -> bool {
    let te = k.expr(e);
    if te.dtype != DType::F32 || depth == 0 {
        return false;
    }
    let inner = |x| within_unit_at(k, x, depth - 1);
    match &te.expr {
        Expr::Const(c) => c.abs() <= 1.0,
        Expr::Unary(op, x) => match op {
            UnaryOp::Sin | UnaryOp::Cos | UnaryOp::Tanh | UnaryOp::Sigmoid | UnaryOp::Erf => {
                k.expr(*x).dtype == DType::F32
            }
            UnaryOp::Neg | UnaryOp::Abs => inner(*x),
            _ => false,
        },
        Expr::Binary(BinaryOp::Mul | BinaryOp::Min | BinaryOp::Max, a, b) => inner(*a) && inner(*b),
        Expr::Where(_, a, b) => inner(*a) && inner(*b),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::{relaxed_math, within_unit};
    use sinter_core::DType;
    use sinter_core::ir::{BinaryOp, UnaryOp};
    use sinter_core::kernel::{
        Access, BufferId, Expr, ExprId, Index, Kernel, KernelArg, KernelBody, Store, TypedExpr, Var,
    };

    /// `out[i] = f(exp(x[i]) / x[i])` with the output in `out_dt` and `f` pushing more exprs.
    fn kernel(out_dt: DType, f: impl Fn(&mut Vec<TypedExpr>) -> u32) -> Kernel {
        let arg = |b, dtype, access| KernelArg { buffer: BufferId(b), dtype, numel: 8, access };
        let mut exprs = vec![
            TypedExpr { expr: Expr::Load { arg: 0, index: Index::Var(Var::Lane) }, dtype: DType::F32 },
            TypedExpr { expr: Expr::Unary(UnaryOp::Exp, ExprId(0)), dtype: DType::F32 },
            TypedExpr { expr: Expr::Binary(BinaryOp::Div, ExprId(1), ExprId(0)), dtype: DType::F32 },
        ];
        let last = f(&mut exprs);
        exprs.push(TypedExpr { expr: Expr::Cast(ExprId(last)), dtype: out_dt });
        let value = ExprId(exprs.len() as u32 - 1);
        Kernel {
            name: "k".into(),
            args: vec![arg(0, DType::F32, Access::Read), arg(1, out_dt, Access::Write)],
            exprs,
            body: KernelBody::Pointwise {
                numel: 8,
                stores: vec![Store { arg: 1, index: Index::Var(Var::Lane), value }],
            },
            origins: vec![],
            ops: vec![],
            flops: 0.0,
            bytes: 0.0,
        }
    }

    #[test]
    fn relaxed_only_for_16_bit_outputs_of_continuous_values() {
        let plain = |_: &mut Vec<TypedExpr>| 2;
        assert!(relaxed_math(&kernel(DType::BF16, plain)));
        assert!(relaxed_math(&kernel(DType::F16, plain)));
        assert!(!relaxed_math(&kernel(DType::F32, plain)), "an f32 output would see the error");
        let floor = |e: &mut Vec<TypedExpr>| {
            e.push(TypedExpr { expr: Expr::Unary(UnaryOp::Floor, ExprId(2)), dtype: DType::F32 });
            3
        };
        assert!(!relaxed_math(&kernel(DType::BF16, floor)), "floor turns the error into a unit");
        let to_int = |e: &mut Vec<TypedExpr>| {
            e.push(TypedExpr { expr: Expr::Cast(ExprId(2)), dtype: DType::I32 });
            3
        };
        assert!(!relaxed_math(&kernel(DType::BF16, to_int)), "a cast to an integer truncates");
        let cmp = |e: &mut Vec<TypedExpr>| {
            e.push(TypedExpr { expr: Expr::Binary(BinaryOp::Gt, ExprId(2), ExprId(0)), dtype: DType::Bool });
            3
        };
        assert!(!relaxed_math(&kernel(DType::BF16, cmp)), "a comparison can flip");
    }

    #[test]
    fn unit_bounds_follow_the_operations_that_keep_them() {
        // exprs 0..=2: x, exp(x), exp(x) / x (unbounded); then what each case pushes.
        let e = |expr| TypedExpr { expr, dtype: DType::F32 };
        let check = |push: &dyn Fn(&mut Vec<TypedExpr>) -> u32| {
            let k = kernel(DType::F32, push);
            within_unit(&k, ExprId(k.exprs.len() as u32 - 2))
        };
        let cos = |v: &mut Vec<TypedExpr>| {
            v.push(e(Expr::Unary(UnaryOp::Cos, ExprId(2))));
            3
        };
        assert!(check(&cos));
        let product = |v: &mut Vec<TypedExpr>| {
            v.push(e(Expr::Unary(UnaryOp::Tanh, ExprId(2))));
            v.push(e(Expr::Unary(UnaryOp::Sin, ExprId(0))));
            v.push(e(Expr::Binary(BinaryOp::Mul, ExprId(3), ExprId(4))));
            v.push(e(Expr::Unary(UnaryOp::Neg, ExprId(5))));
            6
        };
        assert!(check(&product), "-(tanh(.) * sin(.))");
        let half = |v: &mut Vec<TypedExpr>| {
            v.push(e(Expr::Const(0.5)));
            v.push(e(Expr::Unary(UnaryOp::Cos, ExprId(2))));
            v.push(e(Expr::Binary(BinaryOp::Max, ExprId(3), ExprId(4))));
            5
        };
        assert!(check(&half), "max(0.5, cos(.))");
        let sum = |v: &mut Vec<TypedExpr>| {
            v.push(e(Expr::Unary(UnaryOp::Cos, ExprId(2))));
            v.push(e(Expr::Binary(BinaryOp::Add, ExprId(3), ExprId(3))));
            4
        };
        assert!(!check(&sum), "cos + cos reaches 2");
        let scaled = |v: &mut Vec<TypedExpr>| {
            v.push(e(Expr::Const(1.5)));
            v.push(e(Expr::Unary(UnaryOp::Cos, ExprId(2))));
            v.push(e(Expr::Binary(BinaryOp::Mul, ExprId(3), ExprId(4))));
            5
        };
        assert!(!check(&scaled), "1.5 cos(.)");
        assert!(!check(&|_: &mut Vec<TypedExpr>| 2), "exp(x) / x");
    }
}
