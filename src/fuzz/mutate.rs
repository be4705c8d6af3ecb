//! Structural mutations of kernel-IR programs for the verifier fuzzer.
//!
//! A [`Mutation`] is plain data (a [`Kind`] and two random words), so a crashing list of
//! mutations can be replayed and minimized by dropping mutations one at a time. [`apply`] never
//! panics on any program (every pick is modulo the current lengths) and returns a description of
//! what it changed, or `None` when the program has nothing of that kind.

use super::{RngExt, SplitMix64};
use sinter_core::DType;
use sinter_core::ir::{BinaryOp, UnaryOp};
use sinter_core::kernel::{
    Access, BufferId, BufferKind, Expr, ExprId, Index, Kernel, KernelBody, Program, RedOp, ReduceStrategy, Store,
    TypedExpr, Var,
};

/// What a mutation changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A load names an argument out of range.
    LoadArg,
    /// An operand id out of range, equal to its user (a cycle) or later than it.
    OperandId,
    /// A load or store index becomes a wild constant.
    IndexConst,
    /// An index becomes a loop variable (possibly one the body lacks).
    IndexVar,
    /// An index is divided or reduced by a zero, negative or huge constant.
    IndexDivMod,
    /// An index is multiplied by a huge constant.
    IndexMul,
    /// An index is clamped with `lo > hi` or negative bounds.
    IndexClamp,
    /// An index becomes (a clamp of) the value of a wild expression.
    IndexValue,
    /// An index becomes a sum with huge constants.
    IndexSum,
    /// An expression gets a random dtype.
    ExprDtype,
    /// An argument gets a random dtype.
    ArgDtype,
    /// An argument gets a wild element count.
    ArgNumel,
    /// An argument names a wild buffer.
    ArgBuffer,
    /// An argument's access mode flips.
    SwapAccess,
    /// A body extent (numel, rows, len, batch, m, n, k) becomes wild.
    BodyExtent,
    /// A matmul operand's offset or stride becomes wild (huge, "negative" as wrapped usize).
    MatStride,
    /// A matmul operand names a wild argument.
    MatArg,
    /// A matmul's input or accumulator dtype changes.
    MatDtype,
    /// An expression becomes `Acc(wild)`, or a reduction's slot changes.
    AccSlot,
    /// A reduction folds a wild expression id, or changes operator/dtype.
    Reduction,
    /// A store's value id becomes wild.
    StoreValue,
    /// A store's argument becomes wild.
    StoreArg,
    /// A kernel loses its stores, expressions, arguments or all of them.
    EmptyKernel,
    /// Kernels are removed, duplicated or swapped.
    KernelOrder,
    /// An expression is replaced by a random other one over existing ids.
    ExprReplace,
    /// A literal becomes NaN or an infinity (possibly of an integer dtype).
    ConstSpecial,
    /// A buffer declaration changes (numel, dtype, kind, id).
    Buffer,
    /// The memory plan changes (slot ids, sizes, coverage).
    Memory,
    /// An input/output declaration changes (shape, buffer).
    Io,
    /// A reduce kernel's strategy changes.
    Strategy,
}

impl Kind {
    /// Every kind.
    pub const ALL: [Kind; 30] = [
        Kind::LoadArg,
        Kind::OperandId,
        Kind::IndexConst,
        Kind::IndexVar,
        Kind::IndexDivMod,
        Kind::IndexMul,
        Kind::IndexClamp,
        Kind::IndexValue,
        Kind::IndexSum,
        Kind::ExprDtype,
        Kind::ArgDtype,
        Kind::ArgNumel,
        Kind::ArgBuffer,
        Kind::SwapAccess,
        Kind::BodyExtent,
        Kind::MatStride,
        Kind::MatArg,
        Kind::MatDtype,
        Kind::AccSlot,
        Kind::Reduction,
        Kind::StoreValue,
        Kind::StoreArg,
        Kind::EmptyKernel,
        Kind::KernelOrder,
        Kind::ExprReplace,
        Kind::ConstSpecial,
        Kind::Buffer,
        Kind::Memory,
        Kind::Io,
        Kind::Strategy,
    ];
}

/// One mutation: a kind, where (`at`, reduced modulo what exists) and a value word (`val`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mutation {
    /// What changes.
    pub kind: Kind,
    /// Selects the kernel and the item inside it.
    pub at: u64,
    /// Selects the new value.
    pub val: u64,
}

impl Mutation {
    /// A random mutation.
    pub fn random(rng: &mut SplitMix64) -> Mutation {
        Mutation { kind: rng.pick(&Kind::ALL), at: rng.next_u64(), val: rng.next_u64() }
    }
}

/// Wild signed values: boundaries, huge, negative, small.
fn wild_i64(v: u64, near: i64) -> i64 {
    const T: [i64; 14] = [
        0,
        -1,
        1,
        2,
        -7,
        i32::MAX as i64,
        i32::MIN as i64,
        u32::MAX as i64,
        1 << 40,
        i64::MAX,
        i64::MIN,
        i64::MAX / 2,
        -(1 << 40),
        3,
    ];
    match v % 4 {
        0 => near,
        1 => near.wrapping_add(1 + (v >> 8) as i64 % 5),
        2 => near.wrapping_neg(),
        _ => T[((v >> 2) % T.len() as u64) as usize],
    }
}

/// Wild unsigned values (huge ones included, `usize::MAX` standing for -1).
fn wild_usize(v: u64, near: usize) -> usize {
    const T: [usize; 10] = [0, 1, 2, 7, usize::MAX, usize::MAX / 2, 1 << 32, 1 << 40, u32::MAX as usize, (1 << 31) + 1];
    match v % 4 {
        0 => near.wrapping_add(1),
        1 => near.wrapping_add(1 + ((v >> 8) % 1000) as usize),
        2 => near.wrapping_mul(1 << 20),
        _ => T[((v >> 2) % T.len() as u64) as usize],
    }
}

fn pick_dtype(v: u64) -> DType {
    DType::ALL[(v % DType::ALL.len() as u64) as usize]
}

const VARS: [Var; 7] = sinter_core::kernel::analysis::VARS;

/// Every index of a kernel, mutable: load indices, index values and comparisons, store indices.
fn indices_mut(k: &mut Kernel) -> Vec<&mut Index> {
    let mut out: Vec<&mut Index> = Vec::new();
    for e in &mut k.exprs {
        match &mut e.expr {
            Expr::Load { index, .. } | Expr::IndexValue(index) => out.push(index),
            Expr::IndexCmp(_, a, b) => {
                out.push(a);
                out.push(b);
            }
            _ => {}
        }
    }
    for s in stores_mut(&mut k.body) {
        out.push(&mut s.index);
    }
    out
}

fn stores_mut(b: &mut KernelBody) -> Vec<&mut Store> {
    match b {
        KernelBody::Pointwise { stores, .. } => stores.iter_mut().collect(),
        KernelBody::Reduce(r) => r.elem_stores.iter_mut().chain(r.row_stores.iter_mut()).collect(),
        KernelBody::Matmul(m) => m.stores.iter_mut().collect(),
        KernelBody::Attention(a) => a.stores.iter_mut().collect(),
    }
}

fn operands_mut(e: &mut Expr) -> Vec<&mut ExprId> {
    match e {
        Expr::Unary(_, a) | Expr::Cast(a) => vec![a],
        Expr::Binary(_, a, b) => vec![a, b],
        Expr::Where(c, a, b) => vec![c, a, b],
        _ => vec![],
    }
}

/// Applies `m` to `p`; the description of the change, or `None` when nothing of its kind exists.
pub fn apply(p: &mut Program, m: Mutation) -> Option<String> {
    let (at, val) = (m.at, m.val);
    let sel = |n: usize| if n == 0 { 0 } else { ((at >> 16) % n as u64) as usize };
    // Program-level kinds first.
    match m.kind {
        Kind::KernelOrder => {
            let n = p.kernels.len();
            if n == 0 {
                return None;
            }
            let i = (at % n as u64) as usize;
            return Some(match val % 3 {
                0 => {
                    p.kernels.remove(i);
                    format!("removed kernel {i}")
                }
                1 => {
                    let k = p.kernels[i].clone();
                    p.kernels.insert(i, k);
                    format!("duplicated kernel {i}")
                }
                _ => {
                    let j = ((val >> 8) % n as u64) as usize;
                    p.kernels.swap(i, j);
                    format!("swapped kernels {i} and {j}")
                }
            });
        }
        Kind::Buffer => {
            let n = p.buffers.len();
            if n == 0 {
                return None;
            }
            let i = (at % n as u64) as usize;
            let b = &mut p.buffers[i];
            return Some(match val % 4 {
                0 => {
                    b.numel = wild_usize(val >> 2, b.numel);
                    format!("buffer b{i} numel := {}", b.numel)
                }
                1 => {
                    b.dtype = pick_dtype(val >> 2);
                    format!("buffer b{i} dtype := {}", b.dtype)
                }
                2 => {
                    b.kind = match (val >> 2) % 4 {
                        0 => BufferKind::Input(wild_usize(val >> 4, 0)),
                        1 => BufferKind::Output(wild_usize(val >> 4, 0)),
                        2 => BufferKind::Intermediate,
                        _ => BufferKind::Input(0),
                    };
                    format!("buffer b{i} kind := {:?}", b.kind)
                }
                _ => {
                    b.id = BufferId(wild_usize(val >> 2, i) as u32);
                    format!("buffer b{i} id := {}", b.id.0)
                }
            });
        }
        Kind::Memory => {
            let mem = &mut p.memory;
            return Some(match val % 3 {
                0 if !mem.slot_of.is_empty() => {
                    let i = (at % mem.slot_of.len() as u64) as usize;
                    mem.slot_of[i] = Some(wild_usize(val >> 2, mem.slots.len()));
                    format!("slot_of[{i}] := {:?}", mem.slot_of[i])
                }
                1 if !mem.slots.is_empty() => {
                    let i = (at % mem.slots.len() as u64) as usize;
                    mem.slots[i] = if val & 4 == 0 { 0 } else { mem.slots[i] / 2 };
                    format!("slot {i} size := {}", mem.slots[i])
                }
                _ => {
                    mem.slot_of.pop();
                    "memory plan lost its last buffer".into()
                }
            });
        }
        Kind::Io => {
            let outputs = val & 1 == 1;
            let list = if outputs { &mut p.outputs } else { &mut p.inputs };
            if list.is_empty() {
                return None;
            }
            let i = (at % list.len() as u64) as usize;
            let io = &mut list[i];
            return Some(if val & 2 == 0 {
                io.shape.push(wild_usize(val >> 2, 1));
                format!("io {}/{i} shape := {:?}", if outputs { "out" } else { "in" }, io.shape)
            } else {
                io.buffer = BufferId(wild_usize(val >> 2, io.buffer.0 as usize) as u32);
                format!("io {}/{i} buffer := b{}", if outputs { "out" } else { "in" }, io.buffer.0)
            });
        }
        _ => {}
    }
    let nk = p.kernels.len();
    if nk == 0 {
        return None;
    }
    let ki = (at % nk as u64) as usize;
    let k = &mut p.kernels[ki];
    let name = k.name.clone();
    let ne = k.exprs.len();
    let na = k.args.len();
    let what = match m.kind {
        Kind::LoadArg => {
            let loads: Vec<usize> = (0..ne).filter(|&i| matches!(k.exprs[i].expr, Expr::Load { .. })).collect();
            let i = *loads.get(sel(loads.len()))?;
            let new = wild_usize(val, na);
            if let Expr::Load { arg, .. } = &mut k.exprs[i].expr {
                *arg = new;
            }
            format!("v{i} loads argument {new}")
        }
        Kind::OperandId => {
            let users: Vec<usize> = (0..ne).filter(|&i| !operands_mut(&mut k.exprs[i].expr).is_empty()).collect();
            let i = *users.get(sel(users.len()))?;
            let new = match val % 3 {
                0 => i as u32,
                1 => (i as u32).saturating_add(1 + (val >> 8) as u32 % 3),
                _ => wild_usize(val >> 2, ne) as u32,
            };
            let mut ops = operands_mut(&mut k.exprs[i].expr);
            let j = ((val >> 20) % ops.len() as u64) as usize;
            *ops[j] = ExprId(new);
            format!("v{i} operand {j} := v{new}")
        }
        Kind::IndexConst
        | Kind::IndexVar
        | Kind::IndexDivMod
        | Kind::IndexMul
        | Kind::IndexClamp
        | Kind::IndexValue
        | Kind::IndexSum => {
            let mut ix = indices_mut(k);
            let n = ix.len();
            let idx = ix.get_mut(sel(n))?;
            let old = std::mem::replace(*idx, Index::Const(0));
            let c = wild_i64(val >> 4, 0);
            let new = match m.kind {
                Kind::IndexConst => Index::Const(wild_i64(val, 1 << 20)),
                Kind::IndexVar => Index::Var(VARS[(val % 6) as usize]),
                Kind::IndexDivMod => {
                    let d = [0, -1, -7, i64::MIN, i64::MAX][(val % 5) as usize];
                    if val & 8 == 0 { Index::Div(Box::new(old), d) } else { Index::Mod(Box::new(old), d) }
                }
                Kind::IndexMul => Index::Mul(Box::new(old), [i64::MAX, i64::MIN, -1, 1 << 40][(val % 4) as usize]),
                Kind::IndexClamp => Index::Clamp(Box::new(old), c, wild_i64(val >> 12, c.wrapping_sub(1))),
                Kind::IndexValue => {
                    let v = ExprId(wild_usize(val >> 2, ne.saturating_sub(1)) as u32);
                    if val & 2 == 0 { Index::Value(v) } else { Index::Clamp(Box::new(Index::Value(v)), 0, c) }
                }
                _ => Index::Sum(vec![old, Index::Const(c), Index::Const(wild_i64(val >> 12, i64::MAX))]),
            };
            let d = format!("index #{} := {new:?}", sel(n));
            **idx = new;
            d
        }
        Kind::ExprDtype => {
            let i = sel(ne);
            let e = k.exprs.get_mut(i)?;
            e.dtype = pick_dtype(val);
            format!("v{i} dtype := {}", e.dtype)
        }
        Kind::ArgDtype | Kind::ArgNumel | Kind::ArgBuffer | Kind::SwapAccess => {
            let i = sel(na);
            let a = k.args.get_mut(i)?;
            match m.kind {
                Kind::ArgDtype => {
                    a.dtype = pick_dtype(val);
                    format!("arg {i} dtype := {}", a.dtype)
                }
                Kind::ArgNumel => {
                    a.numel = wild_usize(val, a.numel);
                    format!("arg {i} numel := {}", a.numel)
                }
                Kind::ArgBuffer => {
                    a.buffer = BufferId(wild_usize(val, a.buffer.0 as usize) as u32);
                    format!("arg {i} buffer := b{}", a.buffer.0)
                }
                _ => {
                    a.access = if a.access == Access::Read { Access::Write } else { Access::Read };
                    format!("arg {i} access := {:?}", a.access)
                }
            }
        }
        Kind::BodyExtent => {
            let f = |x: &mut usize, what: &str| {
                *x = wild_usize(val >> 3, *x);
                format!("{what} := {x}")
            };
            match &mut k.body {
                KernelBody::Pointwise { numel, .. } => f(numel, "numel"),
                KernelBody::Reduce(r) => {
                    if val & 1 == 0 {
                        f(&mut r.rows, "rows")
                    } else {
                        f(&mut r.len, "len")
                    }
                }
                KernelBody::Matmul(mm) => match val % 4 {
                    0 => f(&mut mm.batch, "batch"),
                    1 => f(&mut mm.m, "m"),
                    2 => f(&mut mm.n, "n"),
                    _ => f(&mut mm.k, "k"),
                },
                KernelBody::Attention(a) => match val % 6 {
                    0 => f(&mut a.batch, "batch"),
                    1 => f(&mut a.heads, "heads"),
                    2 => f(&mut a.m, "m"),
                    3 => f(&mut a.kv, "kv"),
                    4 => f(&mut a.d, "d"),
                    _ => f(&mut a.dv, "dv"),
                },
            }
        }
        Kind::MatStride | Kind::MatArg | Kind::MatDtype => {
            let KernelBody::Matmul(mm) = &mut k.body else { return None };
            let op = if val & 1 == 0 { &mut mm.a } else { &mut mm.b };
            let w = |x: usize| wild_usize(val >> 4, x);
            match m.kind {
                Kind::MatStride => match (val >> 1) % 4 {
                    0 => {
                        op.offset = w(op.offset);
                        format!("operand offset := {}", op.offset)
                    }
                    1 => {
                        op.s_batch = w(op.s_batch);
                        format!("operand s_batch := {}", op.s_batch)
                    }
                    2 => {
                        op.s_row = w(op.s_row);
                        format!("operand s_row := {}", op.s_row)
                    }
                    _ => {
                        op.s_col = w(op.s_col);
                        format!("operand s_col := {}", op.s_col)
                    }
                },
                Kind::MatArg => {
                    op.arg = wild_usize(val >> 2, na);
                    format!("operand arg := {}", op.arg)
                }
                _ => {
                    if val & 2 == 0 {
                        mm.in_dtype = pick_dtype(val >> 2);
                        format!("in_dtype := {}", mm.in_dtype)
                    } else {
                        mm.acc_dtype = pick_dtype(val >> 2);
                        format!("acc_dtype := {}", mm.acc_dtype)
                    }
                }
            }
        }
        Kind::AccSlot => {
            if val & 1 == 0 || !matches!(k.body, KernelBody::Reduce(_)) {
                let i = sel(ne);
                let e = k.exprs.get_mut(i)?;
                let s = wild_usize(val >> 2, 0);
                e.expr = Expr::Acc(s);
                format!("v{i} := Acc({s})")
            } else {
                let KernelBody::Reduce(r) = &mut k.body else { return None };
                let n = r.reductions.len();
                let red = r.reductions.get_mut(sel(n))?;
                red.slot = wild_usize(val >> 2, red.slot);
                format!("reduction slot := {}", red.slot)
            }
        }
        Kind::Reduction => {
            let KernelBody::Reduce(r) = &mut k.body else { return None };
            let n = r.reductions.len();
            let red = r.reductions.get_mut(sel(n))?;
            match val % 3 {
                0 => {
                    red.value = ExprId(wild_usize(val >> 2, ne) as u32);
                    format!("reduction folds v{}", red.value.0)
                }
                1 => {
                    red.op = [RedOp::Sum, RedOp::Prod, RedOp::Max, RedOp::Min, RedOp::ArgMax, RedOp::ArgMin]
                        [((val >> 2) % 6) as usize];
                    format!("reduction op := {:?}", red.op)
                }
                _ => {
                    red.dtype = pick_dtype(val >> 2);
                    format!("reduction dtype := {}", red.dtype)
                }
            }
        }
        Kind::StoreValue | Kind::StoreArg => {
            let mut st = stores_mut(&mut k.body);
            let n = st.len();
            let s = st.get_mut(sel(n))?;
            if m.kind == Kind::StoreValue {
                s.value = ExprId(wild_usize(val, ne) as u32);
                format!("store value := v{}", s.value.0)
            } else {
                s.arg = wild_usize(val, na);
                format!("store arg := {}", s.arg)
            }
        }
        Kind::EmptyKernel => match val % 4 {
            0 => {
                match &mut k.body {
                    KernelBody::Pointwise { stores, .. } => stores.clear(),
                    KernelBody::Reduce(r) => {
                        r.elem_stores.clear();
                        r.row_stores.clear();
                    }
                    KernelBody::Matmul(mm) => mm.stores.clear(),
                    KernelBody::Attention(a) => a.stores.clear(),
                }
                "stores removed".into()
            }
            1 => {
                k.exprs.clear();
                "expressions removed".into()
            }
            2 => {
                k.args.clear();
                "arguments removed".into()
            }
            _ => {
                k.exprs.clear();
                k.args.clear();
                k.body = KernelBody::Pointwise { numel: wild_usize(val >> 2, 0), stores: vec![] };
                "kernel emptied".into()
            }
        },
        Kind::ExprReplace => {
            let i = sel(ne);
            let id = |x: u64| ExprId(((x % (i as u64 + 2)) as u32).min(i as u32 + 1));
            let new = match val % 6 {
                0 => Expr::Unary(UnaryOp::ALL[((val >> 3) % 29) as usize], id(val >> 8)),
                1 => Expr::Binary(BinaryOp::ALL[((val >> 3) % 18) as usize], id(val >> 8), id(val >> 20)),
                2 => Expr::Where(id(val >> 8), id(val >> 20), id(val >> 32)),
                3 => Expr::Cast(id(val >> 8)),
                4 => Expr::IndexValue(Index::Sum(vec![Index::Var(VARS[((val >> 3) % 6) as usize]), Index::Const(-5)])),
                _ => Expr::IndexCmp(
                    sinter_core::kernel::IndexCmp::Lt,
                    Index::Const(wild_i64(val >> 8, -1)),
                    Index::Var(VARS[((val >> 3) % 6) as usize]),
                ),
            };
            let dtype = pick_dtype(val >> 40);
            let d = format!("v{i} := {new:?} : {dtype}");
            if i < ne {
                k.exprs[i] = TypedExpr { expr: new, dtype };
            } else {
                k.exprs.push(TypedExpr { expr: new, dtype });
            }
            d
        }
        Kind::ConstSpecial => {
            let consts: Vec<usize> = (0..ne).filter(|&i| matches!(k.exprs[i].expr, Expr::Const(_))).collect();
            let i = match consts.get(sel(consts.len())) {
                Some(&i) => i,
                None => {
                    k.exprs.push(TypedExpr { expr: Expr::Const(0.0), dtype: pick_dtype(val >> 8) });
                    ne
                }
            };
            let c = [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 1e300, -0.0, u64::MAX as f64][(val % 6) as usize];
            k.exprs[i].expr = Expr::Const(c);
            format!("v{i} := Const({c}) : {}", k.exprs[i].dtype)
        }
        Kind::Strategy => {
            let KernelBody::Reduce(r) = &mut k.body else { return None };
            r.strategy =
                [ReduceStrategy::Persistent, ReduceStrategy::Looped, ReduceStrategy::ThreadPerRow][(val % 3) as usize];
            format!("strategy := {:?}", r.strategy)
        }
        Kind::KernelOrder | Kind::Buffer | Kind::Memory | Kind::Io => unreachable!("handled above"),
    };
    Some(format!("kernel {ki} ({name}): {what}"))
}
