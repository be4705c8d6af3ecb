//! Reduce kernels: sequential row reductions with an element epilogue and per-row stores.

use std::collections::HashMap;

use sinter_core::DType;
use sinter_core::kernel::{Expr, ExprId, RedOp, ReduceBody, ReduceStrategy, Var};

use super::emit::{AccVal, Emitter, acc_uses, closure, depends_on, store_roots};
use super::helpers::H;
use super::index::{LaneForm, lane_form};
use super::ops;
use super::pointwise::{PARAMS, emit_wid, grid_excess};
use super::types::{Ct, ct, f32_lit, splat};
use super::{Body, GridSplit, OuterUnit, RenderError, Tuning, WgslCaps};

/// The subgroup builtins of the entry point (when subgroup reductions are used).
const SUBGROUP_PARAMS: &str = "@builtin(subgroup_invocation_id) sg_lane: u32, @builtin(subgroup_size) sg_size: u32, \
                               @builtin(subgroup_id) sg_id: u32, @builtin(num_subgroups) n_sg: u32";

/// How the elements of a row are visited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// Workgroup per row, `p` elements (groups) per thread kept in registers.
    Persistent(u32),
    /// Workgroup per row, strided loop.
    Looped,
    /// One thread per row, serial loop.
    Serial,
}

/// One reduction as rendered.
#[derive(Clone, Debug)]
struct Red {
    op: RedOp,
    /// The folded value.
    value: ExprId,
    /// Dtype the value is converted to before folding (the accumulator's, or the compared value's for arg
    /// reductions; bool is folded as u32).
    fold_dt: DType,
    /// Dtype of the result (`Acc(k)`): the accumulator dtype (I64 for arg reductions).
    result_dt: DType,
}

impl Red {
    fn is_arg(&self) -> bool {
        matches!(self.op, RedOp::ArgMax | RedOp::ArgMin)
    }

    fn fold_ct(&self) -> Ct {
        ct(self.fold_dt).unwrap_or(Ct::F32)
    }

    /// The identity of the fold (for arg reductions: of the compared value).
    fn identity(&self) -> String {
        let c = self.fold_ct();
        let max_like = matches!(self.op, RedOp::Max | RedOp::ArgMax);
        match (self.op, c) {
            (RedOp::Sum, _) => c.zero().to_string(),
            (RedOp::Prod, Ct::F32) => "1.0f".into(),
            (RedOp::Prod, Ct::I32) => "1i".into(),
            (RedOp::Prod, _) => "1u".into(),
            (_, Ct::F32) => f32_lit(if max_like { f32::NEG_INFINITY } else { f32::INFINITY }),
            (_, Ct::I32) => super::types::i32_lit(if max_like { i32::MIN } else { i32::MAX }),
            (_, _) => (if max_like { "0u" } else { "4294967295u" }).into(),
        }
    }

    /// Expression combining accumulators `a` and `b` (fold reductions).
    fn combine(&self, a: &str, b: &str, vec: bool, em: &mut Emitter<'_>) -> String {
        let c = self.fold_ct();
        match (self.op, c) {
            (RedOp::Sum, _) => format!("{a} + {b}"),
            (RedOp::Prod, _) => format!("{a} * {b}"),
            (RedOp::Max, Ct::F32) => format!("{}({a}, {b})", em.h.need(H::FMax, vec)),
            (RedOp::Min, Ct::F32) => format!("{}({a}, {b})", em.h.need(H::FMin, vec)),
            (RedOp::Max, _) => format!("max({a}, {b})"),
            (_, _) => format!("min({a}, {b})"),
        }
    }

    /// The name of the "does (v, i) beat (bv, bi)" helper of an arg reduction.
    fn better(&self, vec: bool, em: &mut Emitter<'_>) -> String {
        let max = self.op == RedOp::ArgMax;
        let h = match (self.fold_ct(), max) {
            (Ct::F32, true) => H::ArgMaxF,
            (Ct::F32, false) => H::ArgMinF,
            (Ct::I32, true) => H::ArgMaxI,
            (Ct::I32, false) => H::ArgMinI,
            (_, true) => H::ArgMaxU,
            (_, false) => H::ArgMinU,
        };
        em.h.need(h, vec)
    }
}

/// Renders a reduce body.
pub(super) fn render(
    em: &mut Emitter<'_>,
    r: &ReduceBody,
    caps: &WgslCaps,
    tuning: &Tuning,
) -> Result<Body, RenderError> {
    let k = em.k;
    let kname = k.name.clone();
    let invalid = |msg: String| RenderError::Invalid { kernel: kname.clone(), msg };
    if r.rows as u64 > u64::from(u32::MAX) || r.len as u64 > u64::from(u32::MAX) / 4 {
        return Err(RenderError::Unsupported {
            kernel: kname.clone(),
            what: format!("{} rows of {} exceed the 32-bit index space", r.rows, r.len),
        });
    }
    let dep_red = depends_on(k, Var::Red);
    let max_acc = acc_uses(k);
    // Reductions as rendered, with checks.
    let mut reds = Vec::with_capacity(r.reductions.len());
    for (i, red) in r.reductions.iter().enumerate() {
        let vd = k.expr(red.value).dtype;
        if ct(red.dtype).is_none() || ct(vd).is_none() {
            return Err(super::emit::unsupported_dtype(k, if ct(vd).is_none() { vd } else { red.dtype }));
        }
        if let Some(s) = max_acc[red.value.0 as usize]
            && s >= i
        {
            return Err(invalid(format!("reduction {i} folds a value that uses Acc({s}), not yet available")));
        }
        let is_arg = matches!(red.op, RedOp::ArgMax | RedOp::ArgMin);
        let fold_dt = if is_arg {
            match vd {
                DType::Bool => DType::U32,
                d if ct(d) == Some(Ct::F32) => DType::F32,
                d => d,
            }
        } else if red.dtype == DType::Bool {
            DType::U32
        } else {
            red.dtype
        };
        if is_arg && ct(red.dtype) != Some(Ct::I32) {
            return Err(invalid(format!("arg reduction {i} has accumulator dtype {}, want an integer", red.dtype)));
        }
        let result_dt = if is_arg { red.dtype } else { fold_dt };
        reds.push(Red { op: red.op, value: red.value, fold_dt, result_dt });
    }
    for s in &r.row_stores {
        if store_roots(s).iter().any(|e| dep_red[e.0 as usize]) || s.index.uses(Var::Red) {
            return Err(invalid("a row store depends on the reduced position `red`".into()));
        }
    }

    // Phase roots: reduction k, then the element stores.
    let mut phases: Vec<Vec<ExprId>> = reds.iter().map(|rd| vec![rd.value]).collect();
    if !r.elem_stores.is_empty() {
        phases.push(r.elem_stores.iter().flat_map(store_roots).collect());
    }

    // Mapping.
    let serial = r.strategy == ReduceStrategy::ThreadPerRow;
    em.names.insert(Var::Row, "row".into());
    em.names.insert(Var::Red, "red".into());
    em.ranges.insert(Var::Row, (0, r.rows as i64 - 1));
    let mut width = 1u32;
    if !serial && tuning.vectorize && r.len >= 4 && r.len.is_multiple_of(4) {
        em.set_vec(Some(Var::Red), false);
        let uni = |x: ExprId| !em.varying[x.0 as usize];
        let contig = phases.iter().any(|roots| {
            closure(k, roots, &|_| false).iter().any(|&e| match &k.exprs[e as usize].expr {
                Expr::Load { index, .. } => lane_form(index, Var::Red, &uni) == LaneForm::Contig,
                _ => false,
            })
        }) || r.elem_stores.iter().any(|s| lane_form(&s.index, Var::Red, &uni) == LaneForm::Contig);
        if contig {
            width = 4;
        } else {
            em.set_vec(None, false);
        }
    }
    em.ranges.insert(Var::Red, (0, r.len as i64 - i64::from(width)));
    let max_wg = prev_pow2(caps.max_wg());
    let groups = (r.len as u64).div_ceil(u64::from(width));
    // A workgroup-per-row reduction holds at least one whole subgroup: the subgroup combine shuffles
    // across `sg_size` lanes, which a narrower workgroup leaves partly empty (32 threads on an adapter
    // with 64-wide subgroups). Invariant: `wg >= min_wg` whenever the adapter allows it.
    let min_wg = if caps.has_subgroups { caps.subgroup_size.unwrap_or(32).max(32) } else { 32 }.min(max_wg);
    let wg: u32 = if serial {
        tuning.workgroup_size.unwrap_or(256).min(caps.max_wg()).max(1)
    } else {
        match tuning.workgroup_size {
            Some(w) => prev_pow2(w.min(max_wg).max(1)).max(prev_pow2(min_wg)),
            None => (groups.next_power_of_two().clamp(32, 256) as u32).max(min_wg).min(max_wg),
        }
    };
    let mode = if serial {
        Mode::Serial
    } else {
        let p = groups.div_ceil(u64::from(wg)).max(1);
        let fits = p * u64::from(width) <= u64::from(tuning.max_persistent_per_thread);
        if fits && tuning.persistent != Some(false) { Mode::Persistent(p as u32) } else { Mode::Looped }
    };
    let workgroups = if serial { (r.rows as u64).div_ceil(u64::from(wg)) } else { r.rows as u64 };
    let vec = width == 4;
    // Subgroup shuffles for the workgroup combine when the adapter has them and tuning allows.
    let subgroups = caps.has_subgroups && tuning.subgroups && mode != Mode::Serial;

    // Loads kept in registers: per-element loads used by two or more phases.
    let mut cache: Vec<u32> = Vec::new();
    if let Mode::Persistent(_) = mode {
        let sets: Vec<_> = phases.iter().map(|roots| closure(k, roots, &|_| false)).collect();
        for (e, te) in k.exprs.iter().enumerate() {
            if matches!(te.expr, Expr::Load { .. })
                && dep_red[e]
                && sets.iter().filter(|s| s.contains(&(e as u32))).count() >= 2
            {
                cache.push(e as u32);
            }
        }
    }

    let mut globals = Vec::new();
    if r.rows > 0 {
        // Row setup.
        emit_wid(em, workgroups, caps);
        match mode {
            Mode::Serial => {
                em.line(format!("let row = wid * {wg}u + lid;"));
                if grid_excess(workgroups, caps) || workgroups * u64::from(wg) != r.rows as u64 {
                    em.line(format!("if (row >= {}u) {{ return; }}", r.rows));
                }
            }
            _ => {
                em.line("let row = wid;");
                if grid_excess(workgroups, caps) {
                    em.line(format!("if (row >= {}u) {{ return; }}", r.rows));
                }
            }
        }
        for &c in &cache {
            let ty = em.cts[c as usize].ty(em.varying[c as usize]);
            if let Mode::Persistent(p) = mode {
                em.line(format!("var c{c}: array<{ty}, {p}>;"));
            }
        }
        let mut shared: HashMap<Ct, ()> = HashMap::new();
        let mut need_idx = false;
        for (i, rd) in reds.iter().enumerate() {
            em.line(format!("// reduction {i}: {:?} of v{} ({})", rd.op, rd.value.0, rd.fold_dt));
            let mut roots = vec![rd.value];
            if i == 0 {
                roots.extend(cache.iter().map(|&c| ExprId(c)));
            }
            em.emit_closure(&roots, &|e| !dep_red[e as usize])?;
            let fct = rd.fold_ct();
            let acc_ty = fct.ty(vec);
            em.line(format!("var acc{i}: {acc_ty} = {};", splat(fct, vec, &rd.identity())));
            if rd.is_arg() {
                em.line(format!("var arg{i}: {} = {};", Ct::I32.ty(vec), splat(Ct::I32, vec, "2147483647i")));
            }
            for j in groups_of(mode) {
                open_group(em, mode, wg, width, r.len, j);
                if i > 0 {
                    set_cache(em, &cache, j);
                }
                em.emit_closure(&roots, &|e| dep_red[e as usize])?;
                if i == 0 {
                    for &c in &cache {
                        em.line(format!("c{c}[{}] = v{c};", j.unwrap_or(0)));
                    }
                }
                let vd = k.expr(rd.value).dtype;
                let (vn, vv) = em.value(rd.value)?;
                let v = if vec && !vv { splat(em.cts[rd.value.0 as usize], true, &vn) } else { vn };
                let v = ops::cast(&v, vd, rd.fold_dt, vec, &mut em.h).map_err(&invalid)?;
                if rd.is_arg() {
                    let idx = if vec { "vec4<i32>(i32(red)) + vec4<i32>(0i, 1i, 2i, 3i)" } else { "i32(red)" };
                    let better = rd.better(vec, em);
                    em.line(format!("let x{i} = {v};"));
                    em.line(format!("let k{i} = {idx};"));
                    em.line(format!("let b{i} = {better}(x{i}, k{i}, acc{i}, arg{i});"));
                    em.line(format!("acc{i} = select(acc{i}, x{i}, b{i});"));
                    em.line(format!("arg{i} = select(arg{i}, k{i}, b{i});"));
                } else {
                    let c = rd.combine(&format!("acc{i}"), &v, vec, em);
                    em.line(format!("acc{i} = {c};"));
                }
                close_group(em, mode, wg, width, r.len);
            }
            // Horizontal (4 lanes) then across the workgroup.
            let hv = format!("h{i}");
            let hi = format!("hk{i}");
            if vec {
                if rd.is_arg() {
                    let better = rd.better(false, em);
                    em.line(format!("var {hv} = acc{i}.x;"));
                    em.line(format!("var {hi} = arg{i}.x;"));
                    for c in ["y", "z", "w"] {
                        em.line(format!(
                            "if ({better}(acc{i}.{c}, arg{i}.{c}, {hv}, {hi})) {{ {hv} = acc{i}.{c}; {hi} = arg{i}.{c}; }}"
                        ));
                    }
                } else {
                    let ab = rd.combine(&format!("acc{i}.x"), &format!("acc{i}.y"), false, em);
                    let cd = rd.combine(&format!("acc{i}.z"), &format!("acc{i}.w"), false, em);
                    let all = rd.combine(&ab, &cd, false, em);
                    em.line(format!("let {hv} = {all};"));
                }
            } else {
                em.line(format!("let {hv} = acc{i};"));
                if rd.is_arg() {
                    em.line(format!("let {hi} = arg{i};"));
                }
            }
            let result = if mode == Mode::Serial {
                if rd.is_arg() { hi.clone() } else { hv.clone() }
            } else {
                let sh = format!("sh_{}", fct.scalar());
                shared.insert(fct, ());
                if rd.is_arg() {
                    need_idx = true;
                }
                if subgroups {
                    subgroup_combine(em, rd, i, &sh, &hv, &hi);
                } else {
                    tree_combine(em, rd, i, &sh, &hv, &hi, wg);
                }
                format!("r{i}")
            };
            em.acc.insert(i, AccVal { name: result, dtype: rd.result_dt, vec: false });
        }
        // Element stores.
        if !r.elem_stores.is_empty() {
            em.line("// element stores");
            let roots = phases.last().cloned().unwrap_or_default();
            em.emit_closure(&roots, &|e| !dep_red[e as usize])?;
            for j in groups_of(mode) {
                open_group(em, mode, wg, width, r.len, j);
                set_cache(em, &cache, j);
                em.emit_closure(&roots, &|e| dep_red[e as usize])?;
                for s in &r.elem_stores {
                    em.emit_store(s)?;
                }
                close_group(em, mode, wg, width, r.len);
            }
        }
        // Row stores.
        if !r.row_stores.is_empty() {
            em.set_vec(None, false);
            em.line("// row stores");
            let roots: Vec<ExprId> = r.row_stores.iter().flat_map(store_roots).collect();
            if mode == Mode::Serial {
                em.emit_closure(&roots, &|_| true)?;
                for s in &r.row_stores {
                    em.emit_store(s)?;
                }
            } else {
                em.open("if (lid == 0u)");
                em.emit_closure(&roots, &|_| true)?;
                for s in &r.row_stores {
                    em.emit_store(s)?;
                }
                em.close();
            }
        }
        let mut cts: Vec<Ct> = shared.keys().copied().collect();
        cts.sort_by_key(|c| c.scalar());
        for c in cts {
            globals.push(format!("var<workgroup> sh_{}: array<{}, {wg}>;", c.scalar(), c.scalar()));
        }
        if need_idx {
            globals.push(format!("var<workgroup> sh_idx: array<i32, {wg}>;"));
        }
    }
    let strategy = match mode {
        Mode::Persistent(p) => format!("reduce/persistent x{p}"),
        Mode::Looped => "reduce/looped".to_string(),
        Mode::Serial => "reduce/thread-per-row".to_string(),
    };
    Ok(Body {
        globals,
        params: if subgroups && r.rows > 0 { format!("{PARAMS}, {SUBGROUP_PARAMS}") } else { PARAMS.to_string() },
        workgroup_size: [wg, 1, 1],
        workgroups: if r.rows == 0 { 0 } else { workgroups },
        vectorized: vec,
        split: Some(GridSplit {
            unit: OuterUnit::Rows,
            per: if mode == Mode::Serial { u64::from(wg) } else { 1 },
            inner: 1,
        }),
        summary: format!(
            "{strategy}: {} rows of {}, {} reductions, {width} elements per step, {wg} threads per workgroup",
            r.rows,
            r.len,
            reds.len()
        ),
        strategy,
    })
}

/// Combines the per-thread partials `hv` (and `hi` for arg reductions) across the workgroup with a
/// shared-memory tree; binds `r{i}` (the value, or the index for arg reductions) in every thread.
fn tree_combine(em: &mut Emitter<'_>, rd: &Red, i: usize, sh: &str, hv: &str, hi: &str, wg: u32) {
    em.line(format!("{sh}[lid] = {hv};"));
    if rd.is_arg() {
        em.line(format!("sh_idx[lid] = {hi};"));
    }
    em.line("workgroupBarrier();");
    em.open(format!("for (var s = {}u; s > 0u; s = s >> 1u)", wg / 2));
    em.open("if (lid < s)");
    if rd.is_arg() {
        let better = rd.better(false, em);
        em.open(format!("if ({better}({sh}[lid + s], sh_idx[lid + s], {sh}[lid], sh_idx[lid]))"));
        em.line(format!("{sh}[lid] = {sh}[lid + s];"));
        em.line("sh_idx[lid] = sh_idx[lid + s];");
        em.close();
    } else {
        let c = rd.combine(&format!("{sh}[lid]"), &format!("{sh}[lid + s]"), false, em);
        em.line(format!("{sh}[lid] = {c};"));
    }
    em.close();
    em.line("workgroupBarrier();");
    em.close();
    let src = if rd.is_arg() { "sh_idx[0]".to_string() } else { format!("{sh}[0]") };
    em.line(format!("let r{i} = {src};"));
    em.line("workgroupBarrier();");
}

/// Emits a butterfly over the subgroup (`subgroupShuffleXor`) combining `v` (and index `k`) in place.
fn butterfly(em: &mut Emitter<'_>, rd: &Red, v: &str, k: &str) {
    em.open("for (var o = sg_size >> 1u; o > 0u; o = o >> 1u)");
    if rd.is_arg() {
        let better = rd.better(false, em);
        em.line(format!("let ov = subgroupShuffleXor({v}, o);"));
        em.line(format!("let ok = subgroupShuffleXor({k}, o);"));
        em.open(format!("if ({better}(ov, ok, {v}, {k}))"));
        em.line(format!("{v} = ov;"));
        em.line(format!("{k} = ok;"));
        em.close();
    } else {
        let c = rd.combine(v, &format!("subgroupShuffleXor({v}, o)"), false, em);
        em.line(format!("{v} = {c};"));
    }
    em.close();
}

/// Combines the per-thread partials across the workgroup with subgroup shuffles: a butterfly inside each
/// subgroup, one shared-memory slot per subgroup, then a butterfly over the slots in every subgroup (two
/// barriers instead of one per tree level). The combine order is fixed by the subgroup layout, so the
/// result is deterministic run to run; NaN and tie semantics are those of the combine functions.
fn subgroup_combine(em: &mut Emitter<'_>, rd: &Red, i: usize, sh: &str, hv: &str, hi: &str) {
    let c = rd.fold_ct();
    em.line(format!("var x{i}: {} = {hv};", c.scalar()));
    if rd.is_arg() {
        em.line(format!("var xk{i}: i32 = {hi};"));
    }
    butterfly(em, rd, &format!("x{i}"), &format!("xk{i}"));
    em.open("if (sg_lane == 0u)");
    em.line(format!("{sh}[sg_id] = x{i};"));
    if rd.is_arg() {
        em.line(format!("sh_idx[sg_id] = xk{i};"));
    }
    em.close();
    em.line("workgroupBarrier();");
    em.line(format!("var y{i}: {} = {};", c.scalar(), rd.identity()));
    if rd.is_arg() {
        em.line(format!("var yk{i}: i32 = 2147483647i;"));
    }
    em.open("for (var b = 0u; b < n_sg; b = b + sg_size)");
    em.line("let q = b + sg_lane;");
    em.open("if (q < n_sg)");
    if rd.is_arg() {
        let better = rd.better(false, em);
        em.open(format!("if ({better}({sh}[q], sh_idx[q], y{i}, yk{i}))"));
        em.line(format!("y{i} = {sh}[q];"));
        em.line(format!("yk{i} = sh_idx[q];"));
        em.close();
    } else {
        let comb = rd.combine(&format!("y{i}"), &format!("{sh}[q]"), false, em);
        em.line(format!("y{i} = {comb};"));
    }
    em.close();
    em.close();
    butterfly(em, rd, &format!("y{i}"), &format!("yk{i}"));
    let src = if rd.is_arg() { format!("yk{i}") } else { format!("y{i}") };
    em.line(format!("let r{i} = {src};"));
    em.line("workgroupBarrier();");
}

/// Largest power of two at most `x` (x >= 1).
fn prev_pow2(x: u32) -> u32 {
    1 << (31 - x.max(1).leading_zeros())
}

/// The register groups a thread visits: `Some(j)` for each of the `p` groups of a persistent reduction
/// (unrolled, so the cache arrays are indexed by constants and stay in registers), `None` for a loop.
fn groups_of(mode: Mode) -> Vec<Option<u32>> {
    match mode {
        Mode::Persistent(p) => (0..p).map(Some).collect(),
        _ => vec![None],
    }
}

/// Points the cached loads at register group `j`.
fn set_cache(em: &mut Emitter<'_>, cache: &[u32], j: Option<u32>) {
    for &c in cache {
        em.cached.insert(c, format!("c{c}[{}]", j.unwrap_or(0)));
    }
}

/// Opens the visit of a row's elements; `red` is the first element of the thread's current group. For a
/// persistent reduction this is the block of group `j`, else the loop over the row.
fn open_group(em: &mut Emitter<'_>, mode: Mode, wg: u32, width: u32, len: usize, j: Option<u32>) {
    match mode {
        Mode::Persistent(p) => {
            let j = j.unwrap_or(0);
            em.open("");
            let first = if j == 0 { "lid".to_string() } else { format!("lid + {}u", j * wg) };
            if width == 1 {
                em.line(format!("let red = {first};"));
            } else {
                em.line(format!("let red = ({first}) * {width}u;"));
            }
            if u64::from(p) * u64::from(wg) * u64::from(width) > len as u64 {
                em.open(format!("if (red < {len}u)"));
            }
        }
        Mode::Looped => {
            let start = if width == 1 { "lid".to_string() } else { format!("lid * {width}u") };
            em.open(format!("for (var red = {start}; red < {len}u; red = red + {}u)", wg * width));
        }
        Mode::Serial => em.open(format!("for (var red = 0u; red < {len}u; red = red + 1u)")),
    }
}

/// Closes what [`open_group`] opened.
fn close_group(em: &mut Emitter<'_>, mode: Mode, wg: u32, width: u32, len: usize) {
    if let Mode::Persistent(p) = mode
        && u64::from(p) * u64::from(wg) * u64::from(width) > len as u64
    {
        em.close();
    }
    em.close();
}
