//! Tests of the narrow-evaluation check: the cases of issue 14 and their siblings are refused naming
//! the op, the common exact paths (Gather's index rule, arg reductions, masks, narrowing casts) pass.

use super::*;
use crate::kernel::{
    Access, BufferDecl, BufferId, KernelArg, MemoryPlan, ReduceBody, ReduceStrategy, Reduction, Store, Var,
};
use crate::tensor::HostTensor;
use std::sync::Arc;

const N: usize = 16;

fn arg(i: u32, dtype: DType, access: Access) -> KernelArg {
    KernelArg { buffer: BufferId(i), dtype, numel: N, access }
}

fn kernel(args: Vec<KernelArg>, body: KernelBody) -> Kernel {
    Kernel { name: "k0_test".into(), args, exprs: vec![], body, origins: vec![], ops: vec![], flops: 0.0, bytes: 0.0 }
}

/// A program holding `k`'s buffers: intermediates, except those `constants` gives.
fn program(k: &Kernel, constants: &[(u32, HostTensor)]) -> Program {
    let buffers = k
        .args
        .iter()
        .map(|a| {
            let kind = constants
                .iter()
                .find(|(b, _)| *b == a.buffer.0)
                .map_or(BufferKind::Intermediate, |(_, t)| BufferKind::Constant(Arc::new(t.clone())));
            BufferDecl { id: a.buffer, dtype: a.dtype, numel: a.numel, kind, node: None }
        })
        .collect();
    Program {
        buffers,
        kernels: vec![k.clone()],
        inputs: vec![],
        outputs: vec![],
        memory: MemoryPlan { slots: vec![], slot_of: vec![], peak_bytes: 0, unplanned_bytes: 0 },
        decisions: vec![],
        dynamic: None,
    }
}

/// [`check`] of `k` alone (no constant buffers).
fn check1(k: &Kernel) -> Result<(), Overflow> {
    check(&program(k, &[]), k)
}

fn ranges1(k: &Kernel) -> Vec<Option<Interval>> {
    value_ranges(&program(k, &[]), k)
}

fn lane() -> Index {
    Index::Var(Var::Lane)
}

/// A pointwise kernel over `N` lanes: `ins` read arguments, one output of `out`, `f` builds the value.
fn pointwise(ins: &[DType], out: DType, f: impl FnOnce(&mut Kernel, &[ExprId]) -> ExprId) -> Kernel {
    let mut args: Vec<KernelArg> = ins.iter().enumerate().map(|(i, &d)| arg(i as u32, d, Access::Read)).collect();
    args.push(arg(ins.len() as u32, out, Access::Write));
    let mut k = kernel(args, KernelBody::Pointwise { numel: N, stores: vec![] });
    let loads: Vec<ExprId> =
        ins.iter().enumerate().map(|(i, &d)| k.push_expr(Expr::Load { arg: i, index: lane() }, d)).collect();
    let v = f(&mut k, &loads);
    if let KernelBody::Pointwise { stores, .. } = &mut k.body {
        stores.push(Store { arg: ins.len(), index: lane(), value: v });
    }
    k
}

/// A reduce kernel of 4 rows x `len` over one input of `d`: reduction `op` accumulated in `acc` over
/// `f(load)`, the result (of dtype `out`) stored per row.
fn reduce_with(
    d: DType,
    op: RedOp,
    acc: DType,
    out: DType,
    len: usize,
    f: impl FnOnce(&mut Kernel, ExprId) -> ExprId,
) -> Kernel {
    let args = vec![arg(0, d, Access::Read), arg(1, out, Access::Write)];
    let body = ReduceBody {
        rows: 4,
        len,
        reductions: vec![],
        elem_stores: vec![],
        row_stores: vec![],
        strategy: ReduceStrategy::Looped,
    };
    let mut k = kernel(args, KernelBody::Reduce(body));
    let at = Index::Var(Var::Row).mul(len as i64).add(Index::Var(Var::Red));
    let l = k.push_expr(Expr::Load { arg: 0, index: at }, d);
    let v = f(&mut k, l);
    let a = k.push_expr(Expr::Acc(0), out);
    if let KernelBody::Reduce(r) = &mut k.body {
        r.reductions.push(Reduction { op, value: v, slot: 0, dtype: acc });
        r.row_stores.push(Store { arg: 1, index: Index::Var(Var::Row), value: a });
    }
    k
}

/// [`reduce_with`] of the loaded values themselves.
fn reduce(d: DType, op: RedOp, acc: DType, out: DType, len: usize) -> Kernel {
    reduce_with(d, op, acc, out, len, |_, l| l)
}

/// `data[clamp(v < bound ? v + 10 : v, 0, 9)]` with `v` loaded i64 (Gather's negative-index rule for
/// `bound` 0), the condition written `!(v >= bound)` with the branches swapped when `negated`.
fn gather(bound: f64, negated: bool) -> (Kernel, ExprId, ExprId) {
    let i = DType::I64;
    let mut k = kernel(
        vec![arg(0, DType::F32, Access::Read), arg(1, i, Access::Read), arg(2, DType::F32, Access::Write)],
        KernelBody::Pointwise { numel: N, stores: vec![] },
    );
    let v = k.push_expr(Expr::Load { arg: 1, index: lane() }, i);
    let b = konst(&mut k, bound, i);
    let ten = konst(&mut k, 10.0, i);
    let up = bin(&mut k, BinaryOp::Add, v, ten, i);
    let w = if negated {
        let ge = bin(&mut k, BinaryOp::Ge, v, b, DType::Bool);
        let not = k.push_expr(Expr::Unary(UnaryOp::Not, ge), DType::Bool);
        k.push_expr(Expr::Where(not, up, v), i)
    } else {
        let lt = bin(&mut k, BinaryOp::Lt, v, b, DType::Bool);
        k.push_expr(Expr::Where(lt, up, v), i)
    };
    let x = k.push_expr(Expr::Load { arg: 0, index: Index::Value(w).clamp(0, 9) }, DType::F32);
    if let KernelBody::Pointwise { stores, .. } = &mut k.body {
        stores.push(Store { arg: 2, index: lane(), value: x });
    }
    (k, up, w)
}

fn bin(k: &mut Kernel, op: BinaryOp, a: ExprId, b: ExprId, d: DType) -> ExprId {
    k.push_expr(Expr::Binary(op, a, b), d)
}

fn konst(k: &mut Kernel, x: f64, d: DType) -> ExprId {
    k.push_expr(Expr::Const(x), d)
}

fn refused_op(k: &Kernel) -> String {
    match check1(k) {
        Err(o) => {
            eprintln!("{o}");
            o.op
        }
        Ok(()) => "accepted".into(),
    }
}

#[test]
fn issue_14_add_of_two_i64_is_refused_naming_add() {
    let k = pointwise(&[DType::I64, DType::I64], DType::I64, |k, l| bin(k, BinaryOp::Add, l[0], l[1], DType::I64));
    let e = check1(&k).unwrap_err();
    assert_eq!(e.op, "add");
    assert_eq!(e.range, Some((2 * i128::from(i32::MIN), 2 * i128::from(i32::MAX))));
    assert!(e.to_string().contains("i64 add (v2) may overflow 32-bit arithmetic"), "{e}");
    assert!(e.to_string().contains("a store to argument 2"), "{e}");
}

#[test]
fn issue_14_i64_sum_reduction_is_refused() {
    let k = reduce(DType::I64, RedOp::Sum, DType::I64, DType::I64, 4);
    assert_eq!(refused_op(&k), "sum reduction");
    // The same sum of i32 values stored as i32 wraps in 32 bits on every backend: exact.
    assert_eq!(refused_op(&reduce(DType::I32, RedOp::Sum, DType::I64, DType::I32, 4)), "accepted");
    // Products, too, unless they stay narrow.
    assert_eq!(refused_op(&reduce(DType::I64, RedOp::Prod, DType::I64, DType::I64, 4)), "prod reduction");
    // Max, min and the arg reductions of loaded values are in range.
    for op in [RedOp::Max, RedOp::Min] {
        assert_eq!(refused_op(&reduce(DType::I64, op, DType::I64, DType::I64, 1000)), "accepted");
    }
    for op in [RedOp::ArgMax, RedOp::ArgMin] {
        assert_eq!(refused_op(&reduce(DType::F32, op, DType::I64, DType::I64, 1000)), "accepted");
    }
}

#[test]
fn siblings_sub_mul_neg_abs_div_pow_are_refused() {
    let i = DType::I64;
    let two = |op: BinaryOp| pointwise(&[i, i], i, |k, l| bin(k, op, l[0], l[1], i));
    assert_eq!(refused_op(&two(BinaryOp::Sub)), "sub");
    assert_eq!(refused_op(&two(BinaryOp::Mul)), "mul");
    // i32::MIN / -1 = 2^31.
    assert_eq!(refused_op(&two(BinaryOp::Div)), "div");
    assert_eq!(refused_op(&two(BinaryOp::Pow)), "pow");
    let un = |op: UnaryOp| pointwise(&[i], i, |k, l| k.push_expr(Expr::Unary(op, l[0]), i));
    assert_eq!(refused_op(&un(UnaryOp::Neg)), "neg");
    assert_eq!(refused_op(&un(UnaryOp::Abs)), "abs");
    assert_eq!(refused_op(&un(UnaryOp::Relu)), "accepted");
    assert_eq!(refused_op(&un(UnaryOp::Sign)), "accepted");
    // Plus a constant: one past the window.
    let inc = pointwise(&[i], i, |k, l| {
        let one = konst(k, 1.0, i);
        bin(k, BinaryOp::Add, l[0], one, i)
    });
    assert_eq!(refused_op(&inc), "add");
    // An observed intermediate names the op that made it: (a + b) < 0.
    let lt = pointwise(&[i, i], DType::Bool, |k, l| {
        let s = bin(k, BinaryOp::Add, l[0], l[1], i);
        let z = konst(k, 0.0, i);
        bin(k, BinaryOp::Lt, s, z, DType::Bool)
    });
    let e = check1(&lt).unwrap_err();
    assert_eq!((e.op.as_str(), e.used_by.as_str()), ("add", "lt (v4)"));
    // u64: a difference can go below zero.
    let u = DType::U64;
    let sub = pointwise(&[u, u], u, |k, l| bin(k, BinaryOp::Sub, l[0], l[1], u));
    assert_eq!(refused_op(&sub), "sub");
}

#[test]
fn exact_paths_are_accepted() {
    let i = DType::I64;
    // Division by a constant other than -1 and 0, remainders, comparisons.
    for (op, c) in [(BinaryOp::Div, 2.0), (BinaryOp::Div, -2.0), (BinaryOp::Mod, 7.0), (BinaryOp::FMod, -7.0)] {
        let k = pointwise(&[i], i, |k, l| {
            let c = konst(k, c, i);
            bin(k, op, l[0], c, i)
        });
        assert_eq!(refused_op(&k), "accepted", "{op:?} {c}");
    }
    // A wrapping sum narrowed to i32 before anything observes it is congruent: exact.
    let k = pointwise(&[i, i], DType::I32, |k, l| {
        let s = bin(k, BinaryOp::Mul, l[0], l[1], i);
        k.push_expr(Expr::Cast(s), DType::I32)
    });
    assert_eq!(refused_op(&k), "accepted");
    // ... and stored into an i32 buffer directly.
    let k = pointwise(&[i, i], DType::I32, |k, l| bin(k, BinaryOp::Add, l[0], l[1], i));
    assert_eq!(refused_op(&k), "accepted");
    // Range(start, delta): start + lane * delta from index values and constants.
    let k = pointwise(&[], i, |k, _| {
        let l = k.push_expr(Expr::IndexValue(lane()), i);
        let d = konst(k, 3.0, i);
        let m = bin(k, BinaryOp::Mul, l, d, i);
        let s = konst(k, -100.0, i);
        bin(k, BinaryOp::Add, m, s, i)
    });
    assert_eq!(refused_op(&k), "accepted");
    // A bool mask as i64, summed: at most the row length.
    let k = reduce_with(DType::Bool, RedOp::Sum, i, i, 512, |k, l| k.push_expr(Expr::Cast(l), i));
    assert_eq!(refused_op(&k), "accepted");
    assert_eq!(ranges1(&k)[2], Some((0, 512)));
}

#[test]
fn gathers_negative_index_rule_is_in_range() {
    // `v + 10` alone can overflow; the select cannot.
    let (k, up, w) = gather(0.0, false);
    assert_eq!(refused_op(&k), "accepted");
    let r = ranges1(&k);
    assert_eq!(r[up.0 as usize], Some((i128::from(i32::MIN) + 10, i128::from(i32::MAX) + 10)));
    assert_eq!(r[w.0 as usize], Some((i128::from(i32::MIN) + 10, i128::from(i32::MAX))));
    assert_eq!(refused_op(&gather(0.0, true).0), "accepted");
    // A condition that does not keep `v + 10` in range (`v < 2^31 - 1`: it may be 2^31 + 8).
    assert_eq!(refused_op(&gather(2147483647.0, false).0), "where");
    assert_eq!(refused_op(&gather(2147483637.0, false).0), "accepted");
    assert_eq!(refused_op(&gather(-2147483640.0, false).0), "accepted");
}

#[test]
fn kernels_without_64_bit_integers_are_not_analysed() {
    let k = pointwise(&[DType::I32, DType::I32], DType::I32, |k, l| bin(k, BinaryOp::Add, l[0], l[1], DType::I32));
    assert!(check1(&k).is_ok());
    let k = pointwise(&[DType::F32], DType::F32, |k, l| k.push_expr(Expr::Unary(UnaryOp::Exp, l[0]), DType::F32));
    assert!(check1(&k).is_ok());
}

#[test]
fn loads_of_constant_buffers_have_their_elements_range() {
    // x + table[lane] with a folded table of small values: x + 1 .. x + 16 still overflows, but
    // table + table does not.
    let i = DType::I64;
    let table = HostTensor::from_i64(i, vec![N], &(1..=N as i64).collect::<Vec<_>>());
    let k = pointwise(&[i, i], i, |k, l| bin(k, BinaryOp::Add, l[0], l[1], i));
    assert_eq!(check(&program(&k, &[(1, table.clone())]), &k).unwrap_err().op, "add");
    assert!(check(&program(&k, &[(0, table.clone()), (1, table.clone())]), &k).is_ok());
    assert_eq!(value_ranges(&program(&k, &[(0, table.clone()), (1, table)]), &k)[2], Some((2, 32)));
    // A constant with elements outside the window is not trusted (its upload is refused anyway).
    let big = HostTensor::from_i64(i, vec![N], &[1 << 40; N]);
    let k = pointwise(&[i], i, |k, l| k.push_expr(Expr::Unary(UnaryOp::Neg, l[0]), i));
    assert_eq!(check(&program(&k, &[(0, big)]), &k).unwrap_err().op, "neg");
}

#[test]
fn float_to_i64_casts_of_clamped_floats_are_in_range() {
    // GridSample's tap index: cast(min(max(floor(x) + 1, 0), 9)) * 3 + lane, stored as i64.
    let i = DType::I64;
    let f = DType::F32;
    let tap = |clamp: bool| {
        pointwise(&[f], i, |k, l| {
            let fl = k.push_expr(Expr::Unary(UnaryOp::Floor, l[0]), f);
            let one = konst(k, 1.0, f);
            let mut x = bin(k, BinaryOp::Add, fl, one, f);
            if clamp {
                let zero = konst(k, 0.0, f);
                let nine = konst(k, 9.0, f);
                let lo = bin(k, BinaryOp::Max, x, zero, f);
                x = bin(k, BinaryOp::Min, lo, nine, f);
            }
            let c = k.push_expr(Expr::Cast(x), i);
            let three = konst(k, 3.0, i);
            let m = bin(k, BinaryOp::Mul, c, three, i);
            let l = k.push_expr(Expr::IndexValue(lane()), i);
            bin(k, BinaryOp::Add, m, l, i)
        })
    };
    let k = tap(true);
    assert_eq!(refused_op(&k), "accepted");
    assert_eq!(ranges1(&k).last().copied().flatten(), Some((0, 27 + N as i128 - 1)));
    // Unclamped, the cast saturates at the i64 range (CPU) where 32 bits would wrap.
    assert_eq!(refused_op(&tap(false)), "add");
}

#[test]
fn loads_of_intermediates_have_what_their_producers_store() {
    // k0: b1[lane] = lane (an iota computed on the device); k1: b2[lane] = b1[lane] + 1.
    let i = DType::I64;
    let mut k0 = kernel(vec![arg(1, i, Access::Write)], KernelBody::Pointwise { numel: N, stores: vec![] });
    let v = k0.push_expr(Expr::IndexValue(lane()), i);
    if let KernelBody::Pointwise { stores, .. } = &mut k0.body {
        stores.push(Store { arg: 0, index: lane(), value: v });
    }
    let mut k1 = pointwise(&[i], i, |k, l| {
        let one = konst(k, 1.0, i);
        bin(k, BinaryOp::Add, l[0], one, i)
    });
    k1.args[0].buffer = BufferId(1);
    k1.args[1].buffer = BufferId(2);
    let decl = |b: u32, kind: BufferKind| BufferDecl { id: BufferId(b), dtype: i, numel: N, kind, node: None };
    let mut p = program(&k1, &[]);
    p.buffers = vec![decl(0, BufferKind::Input(0)), decl(1, BufferKind::Intermediate), decl(2, BufferKind::Output(0))];
    p.kernels = vec![k0.clone(), k1.clone()];
    assert!(check(&p, &k1).is_ok());
    assert_eq!(value_ranges(&p, &k1)[2], Some((1, N as i128)));
    // The same values as a graph input: anything in the window, so `+ 1` may overflow.
    p.buffers[1].kind = BufferKind::Input(1);
    assert_eq!(check(&p, &k1).unwrap_err().op, "add");
    // A producer storing a wide value it cannot prove in range: the window, not its range.
    p.buffers[1].kind = BufferKind::Intermediate;
    let big = konst(&mut k0, 4e9, i);
    let s = bin(&mut k0, BinaryOp::Add, ExprId(0), big, i);
    if let KernelBody::Pointwise { stores, .. } = &mut k0.body {
        stores[0].value = s;
    }
    p.kernels[0] = k0;
    assert_eq!(check(&p, &k1).unwrap_err().op, "add");
}
