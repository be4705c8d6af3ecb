//! The kernel-IR verifier ([`validate`]): the invariants every backend and the interpreter rely
//! on, checked before a program runs; any violation is an error naming it, never a panic.

use super::{err, operands};
use crate::dtype::DType;
use crate::error::Error;
use crate::kernel::{Access, BufferKind, Expr, Index, Kernel, KernelBody, Program, RedOp, Store, Var};
use std::collections::BTreeSet;

/// Every index inside an expression, with a label.
fn indices(e: &Expr) -> Vec<&Index> {
    match e {
        Expr::Load { index, .. } | Expr::IndexValue(index) => vec![index],
        Expr::IndexCmp(_, a, b) => vec![a, b],
        _ => vec![],
    }
}

/// The loop variables a kernel body defines, with their ranges.
fn var_ranges(k: &Kernel) -> impl Fn(Var) -> Option<(i64, i64)> + '_ {
    move |v| crate::kernel::analysis::var_range(k, v)
}

fn uses_var(i: &Index, v: Var) -> bool {
    i.uses(v)
}

fn validate_kernel(p: &Program, k: &Kernel) -> Result<(), String> {
    // The structural checks the renderers rely on (extents within 64-bit indices included).
    crate::kernel::analysis::check_kernel(k)?;
    for a in &k.args {
        let d = p
            .buffers
            .get(a.buffer.0 as usize)
            .ok_or_else(|| format!("argument binds missing buffer {}", a.buffer.0))?;
        if d.dtype != a.dtype || d.numel != a.numel {
            return Err(format!(
                "argument for buffer b{} says {}x{}, the buffer is {}x{}",
                a.buffer.0, a.dtype, a.numel, d.dtype, d.numel
            ));
        }
        if a.access == Access::Write && matches!(d.kind, BufferKind::Input(_) | BufferKind::Constant(_)) {
            return Err(format!("writes input/constant buffer b{}", a.buffer.0));
        }
    }
    let reads: BTreeSet<u32> = k.args.iter().filter(|a| a.access == Access::Read).map(|a| a.buffer.0).collect();
    if let Some(a) = k.args.iter().find(|a| a.access == Access::Write && reads.contains(&a.buffer.0)) {
        return Err(format!("reads and writes buffer b{}", a.buffer.0));
    }
    // Which slots a memory-planned buffer shares: reading one buffer and writing another in the
    // same slot is a hazard too.
    let slot = |b: u32| p.memory.slot_of.get(b as usize).copied().flatten();
    let read_slots: BTreeSet<usize> =
        k.args.iter().filter(|a| a.access == Access::Read).filter_map(|a| slot(a.buffer.0)).collect();
    if let Some(a) =
        k.args.iter().find(|a| a.access == Access::Write && slot(a.buffer.0).is_some_and(|s| read_slots.contains(&s)))
    {
        return Err(format!("writes buffer b{} into a memory slot it also reads", a.buffer.0));
    }
    let vr = var_ranges(k);
    let allowed: &[Var] = crate::kernel::analysis::body_vars(&k.body);
    let empty = crate::kernel::analysis::body_is_empty(&k.body);
    let n_acc = match &k.body {
        KernelBody::Reduce(b) => b.reductions.len(),
        KernelBody::Matmul(_) => 1,
        KernelBody::Attention(_) => 2,
        KernelBody::Pointwise { .. } => 0,
    };
    // Per expression: the variables it uses and the highest accumulator slot it reads.
    let mut uses: Vec<BTreeSet<Var>> = Vec::with_capacity(k.exprs.len());
    let mut max_acc: Vec<Option<usize>> = Vec::with_capacity(k.exprs.len());
    for (i, te) in k.exprs.iter().enumerate() {
        let mut u = BTreeSet::new();
        let mut acc: Option<usize> = None;
        let mut bad = None;
        operands(&te.expr, &mut |o| {
            if o.0 as usize >= i {
                bad = Some(o.0);
            } else {
                u.extend(uses[o.0 as usize].iter().copied());
                acc = acc.max(max_acc[o.0 as usize]);
            }
        });
        if let Some(o) = bad {
            return Err(format!("v{i} uses v{o}, which does not come before it"));
        }
        for ix in indices(&te.expr) {
            for &v in &crate::kernel::analysis::VARS {
                if uses_var(ix, v) {
                    if !allowed.contains(&v) {
                        return Err(format!("v{i} uses loop variable {v}, which this kernel lacks"));
                    }
                    u.insert(v);
                }
            }
            if !empty {
                crate::kernel::analysis::check_index(ix, &vr).map_err(|m| format!("v{i}: {m}"))?;
            }
        }
        match &te.expr {
            Expr::Load { arg, index } => {
                let a = k.args.get(*arg).ok_or_else(|| format!("v{i} loads missing argument {arg}"))?;
                if a.access != Access::Read {
                    return Err(format!("v{i} loads write-only argument {arg}"));
                }
                if a.dtype != te.dtype {
                    return Err(format!("v{i} loads {} from a {} argument", te.dtype, a.dtype));
                }
                if !empty {
                    match index.range(&vr) {
                        Some((lo, hi)) if lo >= 0 && hi < a.numel as i64 => {}
                        r => {
                            return Err(format!(
                                "v{i} loads a{arg}[{index}] with index range {r:?} outside 0..{}",
                                a.numel
                            ));
                        }
                    }
                }
            }
            Expr::Acc(s) => {
                if *s >= n_acc {
                    return Err(format!("v{i} reads accumulator {s}, which does not exist"));
                }
                acc = acc.max(Some(*s));
            }
            Expr::Cast(_) | Expr::Unary(..) | Expr::Binary(..) | Expr::Where(..) => {}
            Expr::Const(c) => {
                if c.is_nan() && !te.dtype.is_float() {
                    return Err(format!("v{i} is a NaN integer literal"));
                }
            }
            Expr::IndexCmp(_, a, b) => {
                for x in [a, b] {
                    if !empty && x.range(&vr).is_none_or(|(lo, _)| lo < 0) {
                        return Err(format!("v{i} compares `{x}`, which may be negative"));
                    }
                }
            }
            Expr::IndexValue(_) => {}
        }
        uses.push(u);
        max_acc.push(acc);
    }
    let check_store = |s: &Store, what: &str, no_red: bool| -> Result<(), String> {
        let a = k.args.get(s.arg).ok_or_else(|| format!("{what} store to missing argument {}", s.arg))?;
        if a.access != Access::Write {
            return Err(format!("{what} store to read-only argument {}", s.arg));
        }
        let v = s.value.0 as usize;
        if v >= k.exprs.len() {
            return Err(format!("{what} store of missing value v{v}"));
        }
        let mut missing = None;
        s.index.values(&mut |e| {
            if e.0 as usize >= k.exprs.len() {
                missing = Some(e.0);
            }
        });
        if let Some(e) = missing {
            return Err(format!("{what} store index uses missing value v{e}"));
        }
        for var in crate::kernel::analysis::VARS {
            if uses_var(&s.index, var) && !allowed.contains(&var) {
                return Err(format!("{what} store index uses loop variable {var}, which this kernel lacks"));
            }
        }
        if no_red && (uses[v].contains(&Var::Red) || uses_var(&s.index, Var::Red)) {
            return Err(format!("{what} store a{}[{}] = v{v} depends on red", s.arg, s.index));
        }
        if !empty {
            crate::kernel::analysis::check_index(&s.index, &vr).map_err(|m| format!("{what} store: {m}"))?;
            match s.index.range(&vr) {
                Some((lo, hi)) if lo >= 0 && hi < a.numel as i64 => {}
                r => {
                    return Err(format!(
                        "{what} store a{}[{}] has index range {r:?} outside 0..{}",
                        s.arg, s.index, a.numel
                    ));
                }
            }
        }
        Ok(())
    };
    match &k.body {
        KernelBody::Pointwise { stores, .. } => {
            for s in stores {
                check_store(s, "pointwise", false)?;
            }
        }
        KernelBody::Reduce(b) => {
            for (j, r) in b.reductions.iter().enumerate() {
                if r.slot != j {
                    return Err(format!("reduction {j} has slot {}", r.slot));
                }
                let v = r.value.0 as usize;
                if v >= k.exprs.len() {
                    return Err(format!("reduction {j} folds missing value v{v}"));
                }
                if max_acc[v].is_some_and(|s| s >= j) {
                    return Err(format!("reduction {j} reads its own or a later accumulator"));
                }
                if matches!(r.op, RedOp::ArgMax | RedOp::ArgMin) && r.dtype != DType::I64 {
                    return Err(format!("arg reduction {j} accumulates in {}", r.dtype));
                }
            }
            for s in &b.elem_stores {
                check_store(s, "element", false)?;
            }
            for s in &b.row_stores {
                check_store(s, "row", true)?;
            }
        }
        KernelBody::Matmul(m) => {
            for (name, o) in [("a", &m.a), ("b", &m.b)] {
                let a = k.args.get(o.arg).ok_or_else(|| format!("matmul operand {name} binds missing argument"))?;
                if a.access != Access::Read || a.dtype != m.in_dtype {
                    return Err(format!("matmul operand {name} must read {} data", m.in_dtype));
                }
                let (rows, cols) = if name == "a" { (m.m, m.k) } else { (m.k, m.n) };
                match &o.im2col {
                    Some(_) if name == "a" => return Err("matmul operand a has the im2col form (B only)".into()),
                    Some(w) => w.check(o, m.batch, m.k, m.n, a.numel).map_err(|e| format!("matmul operand b: {e}"))?,
                    None if !operand_in_range(o, m.batch, rows, cols, a.numel) => {
                        return Err(format!("matmul operand {name} reads past its {} elements", a.numel));
                    }
                    None => {}
                }
            }
            if m.tf32 && (m.in_dtype != DType::F32 || m.acc_dtype != DType::F32) {
                return Err(format!("tf32 set on a {} product accumulating in {}", m.in_dtype, m.acc_dtype));
            }
            for s in &m.stores {
                check_store(s, "matmul", false)?;
            }
        }
        KernelBody::Attention(a) => {
            crate::kernel::attention::validate(k, a, &uses)?;
            for s in &a.stores {
                check_store(s, "attention", false)?;
            }
        }
    }
    Ok(())
}

/// Whether every element (batch, r, c) of a strided operand over `batch x rows x cols` lies
/// inside `numel` (an empty operand reads nothing).
fn operand_in_range(o: &crate::kernel::MatOperand, batch: usize, rows: usize, cols: usize, numel: usize) -> bool {
    if batch.min(rows).min(cols) == 0 {
        return true;
    }
    let hi = [(batch - 1, o.s_batch), (rows - 1, o.s_row), (cols - 1, o.s_col)]
        .iter()
        .try_fold(o.offset, |acc, &(n, s)| n.checked_mul(s).and_then(|p| acc.checked_add(p)));
    hi.is_some_and(|hi| hi < numel)
}

/// Checks the invariants of the kernel IR (see the module docs of [`crate::kernel`]): buffers and
/// arguments agree, operands come first, every load and store index is provably in range, every
/// division/remainder/comparison/clamp operand is non-negative, reductions read only earlier
/// accumulators, row stores do not depend on `red`, no kernel reads and writes one buffer or one
/// memory slot, and the memory plan fits.
pub fn validate(p: &Program) -> Result<(), Error> {
    let perr = |m: String| Error::Eval { node: "program".into(), msg: m };
    for (i, b) in p.buffers.iter().enumerate() {
        if b.id.0 as usize != i {
            return Err(perr(format!("buffer {i} has id {}", b.id.0)));
        }
        if let BufferKind::Constant(t) = &b.kind
            && (t.dtype() != b.dtype || t.numel() != b.numel)
        {
            return Err(perr(format!("constant buffer b{i} does not match its tensor")));
        }
    }
    for (list, what) in [(&p.inputs, "input"), (&p.outputs, "output")] {
        for (k, io) in list.iter().enumerate() {
            let b = p.buffers.get(io.buffer.0 as usize).ok_or_else(|| perr(format!("{what} {k} has no buffer")))?;
            let kind_ok = match b.kind {
                BufferKind::Input(j) => what == "input" && j == k,
                BufferKind::Output(j) => what == "output" && j == k,
                _ => false,
            };
            let numel = io.shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d));
            if !kind_ok || b.dtype != io.dtype || numel != Some(b.numel) {
                return Err(perr(format!("{what} {k} ({:?}) does not match buffer b{}", io.name, b.id.0)));
            }
        }
    }
    if p.memory.slot_of.len() != p.buffers.len() {
        return Err(perr("memory plan does not cover every buffer".into()));
    }
    for (i, s) in p.memory.slot_of.iter().enumerate() {
        if let Some(s) = s {
            let b = &p.buffers[i];
            if !matches!(b.kind, BufferKind::Intermediate) {
                return Err(perr(format!("buffer b{i} is not an intermediate but has a slot")));
            }
            match p.memory.slots.get(*s) {
                Some(&size) if b.numel.checked_mul(b.dtype.size_bytes()).is_some_and(|n| size >= n) => {}
                _ => return Err(perr(format!("buffer b{i} does not fit slot {s}"))),
            }
        }
    }
    for k in &p.kernels {
        validate_kernel(p, k).map_err(|m| err(&k.name, m))?;
    }
    Ok(())
}
