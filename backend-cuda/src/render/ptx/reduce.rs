//! Reduce bodies in PTX: the CUDA C++ renderer's block-per-row persistent mode
//! ([`super::super::reduce`]: its plan, its groups, its loads kept in registers, its two-level
//! butterfly), for f32 sums, maxima and minima.
//!
//! Thread `tid` of the block of row `blockIdx.x` visits groups `g` of `W` consecutive positions
//! at `(tid + g * B) * W` (the last groups guarded), folds each reduction into one register, and
//! the block combines: `shfl.sync.bfly` inside each warp, one shared slot per warp, a second
//! butterfly over the slots, so every thread holds the result without another barrier. Loads
//! that two or more phases read are loaded in the first and kept in registers. Every thread
//! reaches every barrier and shuffle (the guards skip only loads, folds and stores).
//!
//! Refused (CUDA C++ renders them): looped, split, warp-per-row and thread-per-row modes, arg
//! reductions, products, accumulators other than f32, empty rows.

use std::collections::HashMap;

use sinter_core::DType;
use sinter_core::kernel::analysis::{acc_uses, depends_on, store_roots};
use sinter_core::kernel::{ExprId, Kernel, RedOp, ReduceBody, Var};

use super::super::emit::Emitter;
use super::super::index::needs_wide;
use super::super::reduce::{Mode, kept_loads, plan, row_split};
use super::super::{CudaCaps, GridSplit, OuterUnit, Rendered, Tuning};
use super::expr::{Lower, check};
use super::{Asm, Class, Refusal, f32_lit, module, refuse};

/// Renders a reduce body (see [`super::render`]).
pub(crate) fn render(k: &Kernel, r: &ReduceBody, caps: &CudaCaps, t: &Tuning) -> Result<Rendered, Refusal> {
    if needs_wide(k) {
        return refuse("64-bit index arithmetic");
    }
    if r.rows == 0 || r.len == 0 {
        return refuse("empty rows");
    }
    if r.rows > i32::MAX as usize {
        return refuse("rows past the grid limit");
    }
    for (i, red) in r.reductions.iter().enumerate() {
        if !matches!(red.op, RedOp::Sum | RedOp::Max | RedOp::Min) {
            return refuse(format!("reduction {i}: {:?}", red.op));
        }
        if red.dtype != DType::F32 || !matches!(k.expr(red.value).dtype, DType::F32 | DType::F16 | DType::BF16) {
            return refuse(format!(
                "reduction {i} of {} in {} (f32 accumulators of floats only)",
                k.expr(red.value).dtype,
                red.dtype
            ));
        }
    }
    let dep_red = depends_on(k, Var::Red);
    let max_acc = acc_uses(k);
    for (i, red) in r.reductions.iter().enumerate() {
        if max_acc[red.value.0 as usize].is_some_and(|s| s >= i) {
            return refuse(format!("reduction {i} folds a value that reads its own or a later accumulator"));
        }
    }
    for s in &r.row_stores {
        if store_roots(s).iter().any(|e| dep_red[e.0 as usize]) || s.index.uses(Var::Red) {
            return refuse("a row store depends on the reduced position");
        }
    }
    let mut phases: Vec<Vec<ExprId>> = r.reductions.iter().map(|rd| vec![rd.value]).collect();
    let elem_roots: Vec<ExprId> = r.elem_stores.iter().flat_map(store_roots).collect();
    if !r.elem_stores.is_empty() {
        phases.push(elem_roots.clone());
    }
    let all_roots: Vec<ExprId> = phases.iter().flatten().copied().collect();
    let mut em = Emitter::new(k, false);
    let p = plan(&mut em, r, &all_roots, caps, t).map_err(|e| Refusal(format!("tuning: {e}")))?;
    let splits = row_split(k, r, &p, caps, t).map_err(|e| Refusal(format!("tuning: {e}")))?;
    let groups = match p.mode {
        Mode::Persistent(g) if p.rows_per_block == 1 && splits == 1 => g,
        _ if splits > 1 => return refuse(format!("rows split over {splits} blocks")),
        Mode::Persistent(_) => return refuse("several rows per block"),
        other => return refuse(format!("{other:?} rows")),
    };
    let row_roots: Vec<ExprId> = r.row_stores.iter().flat_map(store_roots).collect();
    let mut stores = r.elem_stores.clone();
    stores.extend(r.row_stores.iter().cloned());
    let mut roots = all_roots.clone();
    roots.extend(&row_roots);
    check(k, &roots, &stores, &[Var::Row, Var::Red])?;
    let (width, block) = (p.width, p.block);
    let n = r.len as u64;

    // Loads kept in registers: the C++ renderer's rule.
    let cache = kept_loads(&em, &phases);

    let mut asm = Asm::new();
    let base = asm.params(k);
    let (row, tid, warp, wlane) = (asm.reg(Class::B32), asm.reg(Class::B32), asm.reg(Class::B32), asm.reg(Class::B32));
    asm.op(format!("mov.u32 {row}, %ctaid.x"));
    asm.op(format!("mov.u32 {tid}, %tid.x"));
    asm.op(format!("shr.u32 {warp}, {tid}, 5"));
    asm.op(format!("and.b32 {wlane}, {tid}, 31"));
    // Each group's first position, and whether it lies inside the row.
    let mut firsts = Vec::new();
    for g in 0..u64::from(groups) {
        let f = asm.reg(Class::B32);
        asm.op(format!("add.u32 {f}, {tid}, {}", g * u64::from(block)));
        let first = if width > 1 {
            let w = asm.reg(Class::B32);
            asm.op(format!("mul.lo.u32 {w}, {f}, {width}"));
            w
        } else {
            f
        };
        let inside = if (g + 1) * u64::from(block) * u64::from(width) > n {
            let pr = asm.reg(Class::Pred);
            asm.op(format!("setp.lt.u32 {pr}, {first}, {n}"));
            Some(pr)
        } else {
            None
        };
        firsts.push((first, inside));
    }
    let nw = block / 32;
    let mut sh_decls = Vec::new();
    {
        let fixed = HashMap::from([(Var::Row, row.clone())]);
        let mut low = Lower::new(&em, &mut asm, base, (Var::Red, width), fixed);
        let mut kept: HashMap<(u32, usize), Vec<String>> = HashMap::new();
        // Visits every group: `body(low, g)` between the group's guard and its end.
        let visit = |low: &mut Lower<'_, '_>,
                     kept: &HashMap<(u32, usize), Vec<String>>,
                     body: &mut dyn FnMut(&mut Lower<'_, '_>, usize) -> Result<(), Refusal>|
         -> Result<(), Refusal> {
            for (g, (first, inside)) in firsts.iter().enumerate() {
                let skip = low.asm.label();
                if let Some(pr) = inside {
                    low.asm.op(format!("@!{pr} bra {skip}"));
                }
                low.start_group(first);
                low.cached = cache.iter().filter_map(|&c| kept.get(&(c, g)).map(|v| (c, v.clone()))).collect();
                body(low, g)?;
                low.cached.clear();
                low.asm.place(&skip);
            }
            Ok(())
        };
        for (i, red) in r.reductions.iter().enumerate() {
            low.asm.comment(format!("reduction {i}: {:?} of v{} in f32", red.op, red.value.0));
            let mut roots = vec![red.value];
            if i == 0 {
                roots.extend(cache.iter().map(|&c| ExprId(c)));
            }
            low.outer_exprs(&roots, &|e| !dep_red[e as usize])?;
            let acc = low.asm.reg(Class::F32);
            low.asm.op(format!("mov.f32 {acc}, {}", f32_lit(identity(red.op))));
            let mut fresh: Vec<((u32, usize), Vec<String>)> = Vec::new();
            visit(&mut low, &kept, &mut |low, g| {
                low.exprs(&roots)?;
                if i == 0 {
                    for &c in &cache {
                        fresh.push(((c, g), low.vals(ExprId(c))?));
                    }
                }
                for j in 0..width as usize {
                    let v = low.val(red.value, j)?;
                    combine(low.asm, red.op, &acc, &v);
                }
                Ok(())
            })?;
            kept.extend(fresh);
            let sh = format!("{}_sh{i}", super::super::entry_name(&k.name));
            block_combine(low.asm, red.op, &acc, (nw, &sh, &wlane, &warp), &mut sh_decls);
            low.acc.insert(i, acc);
        }
        if !r.elem_stores.is_empty() {
            low.asm.comment("element stores");
            low.outer_exprs(&elem_roots, &|e| !dep_red[e as usize])?;
            visit(&mut low, &kept, &mut |low, _| {
                low.exprs(&elem_roots)?;
                r.elem_stores.iter().try_for_each(|s| low.store(s))
            })?;
        }
        if !r.row_stores.is_empty() {
            low.asm.comment("row stores, by thread 0");
            let (first, done) = (low.asm.reg(Class::Pred), low.asm.label());
            low.asm.op(format!("setp.ne.u32 {first}, {tid}, 0"));
            low.asm.op(format!("@{first} bra {done}"));
            low.outer_exprs(&row_roots, &|_| true)?;
            r.row_stores.iter().try_for_each(|s| low.row_store(s))?;
            low.asm.place(&done);
        }
    }
    asm.decls.extend(sh_decls);
    asm.op("ret");
    let strategy = format!(
        "reduce persistent x{groups} block {block}{}",
        if width > 1 { format!(" vec{width}") } else { String::new() }
    );
    let summary = format!(
        "{strategy}: {} rows of {}, {} reductions, {width} elements per thread and step, {block} threads per block",
        r.rows,
        r.len,
        r.reductions.len()
    );
    let comments = vec![summary, format!("one block per row: {} rows of {} elements", r.rows, r.len)];
    Ok(Rendered {
        name: super::super::entry_name(&k.name),
        source: module(k, caps, &comments, block, &asm),
        grid: [r.rows as u32, 1, 1],
        block: [block, 1, 1],
        dynamic_shared_bytes: 0,
        strategy: format!("{strategy} ptx"),
        split: Some(GridSplit { unit: OuterUnit::Rows, per: 1, inner: 1 }),
        scratch_bytes: 0,
        tensor_maps: Vec::new(),
        compute: None,
        params: Vec::new(),
    })
}

/// The identity of a fold.
fn identity(op: RedOp) -> f32 {
    match op {
        RedOp::Max => f32::NEG_INFINITY,
        RedOp::Min => f32::INFINITY,
        _ => 0.0,
    }
}

/// `acc = acc op v` (maxima and minima propagate NaN, as `sinter_fmax`/`sinter_fmin`).
fn combine(asm: &mut Asm, op: RedOp, acc: &str, v: &str) {
    match op {
        RedOp::Max => asm.op(format!("max.NaN.f32 {acc}, {acc}, {v}")),
        RedOp::Min => asm.op(format!("min.NaN.f32 {acc}, {acc}, {v}")),
        _ => asm.op(format!("add.f32 {acc}, {acc}, {v}")),
    }
}

/// Combines the threads' `acc` across the block: a butterfly in each warp, then (several warps)
/// one shared slot per warp (the array `sh`, declared in `decls`; named after the entry, so
/// modules combine), a barrier and a butterfly over the slots, so every thread ends with the
/// result in `acc`.
fn block_combine(
    asm: &mut Asm,
    op: RedOp,
    acc: &str,
    (nw, sh, wlane, warp): (u32, &str, &str, &str),
    decls: &mut Vec<String>,
) {
    let butterfly = |asm: &mut Asm| {
        for o in [16, 8, 4, 2, 1] {
            let other = asm.reg(Class::F32);
            asm.op(format!("shfl.sync.bfly.b32 {other}, {acc}, {o}, 31, -1"));
            combine(asm, op, acc, &other);
        }
    };
    asm.comment(format!("combine across the block into {acc}"));
    butterfly(asm);
    if nw > 1 {
        decls.push(format!(".shared .align 4 .f32 {sh}[{nw}];"));
        let (p, base, off, addr) =
            (asm.reg(Class::Pred), asm.reg(Class::B32), asm.reg(Class::B32), asm.reg(Class::B32));
        asm.op(format!("mov.u32 {base}, {sh}"));
        asm.op(format!("setp.eq.u32 {p}, {wlane}, 0"));
        asm.op(format!("shl.b32 {off}, {warp}, 2"));
        asm.op(format!("add.u32 {addr}, {base}, {off}"));
        asm.op(format!("@{p} st.shared.f32 [{addr}], {acc}"));
        asm.op("bar.sync 0");
        let (q, loff, laddr, slot) =
            (asm.reg(Class::Pred), asm.reg(Class::B32), asm.reg(Class::B32), asm.reg(Class::F32));
        asm.op(format!("setp.lt.u32 {q}, {wlane}, {nw}"));
        asm.op(format!("shl.b32 {loff}, {wlane}, 2"));
        asm.op(format!("add.u32 {laddr}, {base}, {loff}"));
        asm.op(format!("mov.f32 {slot}, {}", f32_lit(identity(op))));
        asm.op(format!("@{q} ld.shared.f32 {slot}, [{laddr}]"));
        asm.op(format!("mov.f32 {acc}, {slot}"));
        butterfly(asm);
    }
}
