//! Hand-built kernel-IR programs the backends' renderer tests share (the same program rendered by
//! each backend): a broadcast pointwise chain and a two-reduction softmax.

use super::builder::{KernelBuilder, ProgramBuilder, lane, st};
use crate::DType;
use crate::ir::{BinaryOp, UnaryOp};
use crate::kernel::{Access, Expr, Index, Program, RedOp, ReduceBody, ReduceStrategy, Reduction, Var};

/// `y = relu(x + b) * 2` with `x: [rows, cols]`, `b: [cols]` broadcast over rows.
pub fn add_relu_mul(rows: usize, cols: usize, d: DType) -> Program {
    let mut p = ProgramBuilder::new();
    let x = p.input("x", d, &[rows, cols]);
    let b = p.input("b", d, &[cols]);
    let y = p.output("y", d, &[rows, cols]);
    let mut kb = KernelBuilder::new("k0_add_relu_mul", &["add", "relu", "mul"]);
    let ax = kb.arg(&p, x, Access::Read);
    let ab = kb.arg(&p, b, Access::Read);
    let ay = kb.arg(&p, y, Access::Write);
    let vx = kb.load(ax, lane());
    let vb =
        kb.load(ab, lane().rem(cols as i64).simplify(&|v| (v == Var::Lane).then_some((0, (rows * cols) as i64 - 1))));
    let s = kb.e(Expr::Binary(BinaryOp::Add, vx, vb), d);
    let r = kb.e(Expr::Unary(UnaryOp::Relu, s), d);
    let two = kb.konst(2.0, d);
    let m = kb.e(Expr::Binary(BinaryOp::Mul, r, two), d);
    p.kernel(kb.pointwise(rows * cols, vec![st(ay, lane(), m)]));
    p.build_checked()
}

/// Softmax over the last axis of `x: [rows, len]`: max, then sum of exp, then the division.
pub fn softmax(rows: usize, len: usize, d: DType, strategy: ReduceStrategy) -> Program {
    let mut p = ProgramBuilder::new();
    let x = p.input("x", d, &[rows, len]);
    let y = p.output("y", d, &[rows, len]);
    let mut kb = KernelBuilder::new("k0_softmax", &["softmax"]);
    let ax = kb.arg(&p, x, Access::Read);
    let ay = kb.arg(&p, y, Access::Write);
    let idx = Index::var(Var::Row).mul(len as i64).add(Index::var(Var::Red));
    let v = kb.load(ax, idx.clone());
    let vf = kb.e(Expr::Cast(v), DType::F32);
    let m = kb.e(Expr::Acc(0), DType::F32);
    let dlt = kb.e(Expr::Binary(BinaryOp::Sub, vf, m), DType::F32);
    let ex = kb.e(Expr::Unary(UnaryOp::Exp, dlt), DType::F32);
    let s = kb.e(Expr::Acc(1), DType::F32);
    let q = kb.e(Expr::Binary(BinaryOp::Div, ex, s), DType::F32);
    let qd = kb.e(Expr::Cast(q), d);
    p.kernel(kb.reduce(ReduceBody {
        rows,
        len,
        reductions: vec![
            Reduction { op: RedOp::Max, value: vf, slot: 0, dtype: DType::F32 },
            Reduction { op: RedOp::Sum, value: ex, slot: 1, dtype: DType::F32 },
        ],
        elem_stores: vec![st(ay, idx, qd)],
        row_stores: vec![],
        strategy,
    }));
    p.build_checked()
}
