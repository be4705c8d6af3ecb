//! Reduce kernels: sequential row reductions with an element epilogue and per-row stores.
//!
//! * **Block per row** (`Persistent`, `Looped`): thread `tid` visits the row's elements in groups of
//!   `W` consecutive positions (vector loads where contiguous), `tid * W`, `(tid + B) * W`, ...;
//!   folds into a register accumulator, then the block combines: a butterfly of `__shfl_xor_sync`
//!   inside each warp, one shared slot per warp, a second butterfly over the slots in every warp,
//!   so every thread holds the result (`r0`, `r1`, ...) without another barrier. Persistent keeps
//!   the loads that several phases use in registers (`p` groups per thread, unrolled), so the row
//!   is read once; it is chosen whenever the row fits `p * W <= 32` (also for rows the scheduler
//!   marked `Looped`), unless the tuning says otherwise.
//! * **Thread per row**: one thread loops serially over its row.
//! * **Split rows** ([`row_split`]): where the rows are too few to fill the device (`x.sum()`), a
//!   row's consecutive chunks go to blocks of their own in the same kernel; each block stores its
//!   partial result in the kernel's private scratch and counts itself on its row's counter, and
//!   the row's last block folds the partials in chunk order (deterministic) and runs the row's
//!   stores (`scratch`'s gate, as split-k matmuls and split decode attention). The scheduler's
//!   two-kernel split ([`sinter_core::schedule`]'s `split`) is left to the backends without it.
//!
//! Reductions accumulate in [`Reduction::dtype`](sinter_core::kernel::Reduction) (f32 for
//! f16/bf16/f32 sums); `ArgMax`/`ArgMin` carry (value, index) pairs, a NaN winning and ties going
//! to the lower index. Every thread of a block reaches every barrier and shuffle (no early exit).

use sinter_core::DType;
use sinter_core::ir::BinaryOp;
use sinter_core::kernel::{Expr, ExprId, Kernel, RedOp, ReduceBody, ReduceStrategy, Var};

use super::analysis::{acc_uses, closure, depends_on, store_roots};
use super::emit::{AccVal, Emitter, Group, emit_group};
use super::ops::{binary, cast};
use super::pointwise::{DEFAULT_BLOCK, THREADS_PER_SM, check_block, choose_width};
use super::prelude::H;
use super::types::{Ct, ct, double_lit, float_lit, int_lit};
use super::{Body, CudaCaps, GridSplit, OuterUnit, RenderError, Tuning};

/// Most elements one thread keeps in registers per cached load in a persistent reduction.
pub(super) const PERSISTENT_PER_THREAD: u64 = 32;

/// Most elements a thread keeps by default where a block of [`WIDE_ROW_BLOCK`] threads brings
/// it there: NVRTC's time grows with the row a thread unrolls, the run time did not. Measured
/// (session 34): softmax over rows of 8192 f32, 32 elements a thread at 256 threads, 16 at 512, 8
/// at 1024: NVRTC 142, 95, 71 ms (offline); on an H200, max-autotune's timer 134.6-134.9, 133.8-134.6,
/// 139.0-140.7 us. A row of 4096 stays at 256 threads x 16: at 512 x 8 layernorm_gelu ran 13%
/// slower (72.3 against 81.9-82.9 us).
const DEFAULT_PER_THREAD: u64 = 16;

/// The block a row of more than [`DEFAULT_PER_THREAD`] elements a thread takes by default.
const WIDE_ROW_BLOCK: u32 = 512;

/// Fewest elements of a row each block of a default [`row_split`] reduces (the scheduler's
/// `split_min_chunk`).
const MIN_SPLIT_CHUNK: u64 = 4096;

/// The most blocks one row is split over ([`Tuning::split_k`] of a reduction).
pub(super) const MAX_ROW_SPLIT: u32 = 4096;

/// How a row's elements are visited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Mode {
    /// Block per row, `p` groups per thread, unrolled, loads kept in registers.
    Persistent(u32),
    /// Block per row, strided loop.
    Looped,
    /// Block per chunk of `chunk` consecutive elements of a row (a multiple of the block's step),
    /// strided loop over the chunk.
    Split { chunk: u64 },
    /// One thread per row, serial loop.
    Serial,
}

/// One reduction as rendered.
#[derive(Clone, Debug)]
pub(super) struct Red {
    op: RedOp,
    pub(super) value: ExprId,
    /// The folded value's dtype.
    pub(super) value_dt: DType,
    /// The accumulator dtype (i64 for arg reductions).
    pub(super) acc_dt: DType,
    /// The dtype folded in (the accumulator's, u32 for a bool accumulator; for arg reductions the
    /// value's, i32 for bool).
    pub(super) fold_dt: DType,
}

impl Red {
    /// Whether this is an arg reduction (a (value, index) pair).
    pub(super) fn is_arg(&self) -> bool {
        matches!(self.op, RedOp::ArgMax | RedOp::ArgMin)
    }

    /// The C type folded in.
    pub(super) fn fold_ct(&self) -> Ct {
        ct(self.fold_dt)
    }

    /// Bytes of one partial result in the scratch of a split row (the fold's C type).
    fn fold_dt_bytes(&self) -> u64 {
        match self.fold_ct() {
            Ct::Double | Ct::Long | Ct::ULong => 8,
            _ => 4,
        }
    }

    /// The identity of the fold (for arg reductions: the value paired with index `i64::MAX`).
    pub(super) fn identity(&self) -> String {
        let c = self.fold_ct();
        let max_like = matches!(self.op, RedOp::Max | RedOp::ArgMax);
        let arg = self.is_arg();
        match self.op {
            RedOp::Sum => c.zero().to_string(),
            RedOp::Prod => c.one().to_string(),
            _ if c == Ct::Float => float_lit(if max_like { f32::NEG_INFINITY } else { f32::INFINITY }),
            _ if c == Ct::Double => double_lit(if max_like { f64::NEG_INFINITY } else { f64::INFINITY }),
            _ => {
                // Integers: the extremes of the accumulator's dtype, as the reference starts;
                // arg reductions: of the compute type (any value beats or ties it).
                let d = if arg { self.fold_dt } else { self.acc_dt };
                let (lo, hi): (i64, i64) = match (arg, d) {
                    (_, DType::I8) if !arg => (i8::MIN.into(), i8::MAX.into()),
                    (_, DType::I16) if !arg => (i16::MIN.into(), i16::MAX.into()),
                    (_, DType::U8) if !arg => (0, u8::MAX.into()),
                    (_, DType::U16) if !arg => (0, u16::MAX.into()),
                    (_, DType::Bool) => (0, 1),
                    _ => match c {
                        Ct::Int => (i32::MIN.into(), i32::MAX.into()),
                        Ct::UInt => (0, u32::MAX.into()),
                        Ct::Long => (i64::MIN, i64::MAX),
                        _ => (0, -1),
                    },
                };
                int_lit(if max_like { lo } else { hi }, c)
            }
        }
    }

    /// Combines accumulators `a` and `b` (fold reductions).
    pub(super) fn combine(&self, a: &str, b: &str, em: &mut Emitter<'_>) -> Result<String, RenderError> {
        let op = match self.op {
            RedOp::Sum => BinaryOp::Add,
            RedOp::Prod => BinaryOp::Mul,
            RedOp::Max => BinaryOp::Max,
            _ => BinaryOp::Min,
        };
        binary(op, a, b, self.fold_dt, self.fold_dt, false, &mut em.h).map_err(|m| em.err(m))
    }

    fn better(&self, em: &mut Emitter<'_>) -> &'static str {
        if self.op == RedOp::ArgMax {
            em.h.need(H::ArgMaxBetter);
            "sinter_argmax_better"
        } else {
            em.h.need(H::ArgMinBetter);
            "sinter_argmin_better"
        }
    }
}

/// The reduction modes a body allows under `t`, with the block size: what [`render`] does.
pub(super) struct Plan {
    pub(super) mode: Mode,
    pub(super) width: u32,
    /// Threads per row (one block per row; one warp per row when it is 32).
    pub(super) block: u32,
    /// Rows a block reduces, one warp each (short rows: the block combine is a warp butterfly
    /// and the block count drops by this factor); 1 for a block per row and for thread-per-row.
    pub(super) rows_per_block: u32,
}

/// Most warps per block when rows take one warp each ([`Plan::rows_per_block`]; fewer where the
/// blocks would not number two per SM). Measured (H200, session 11): EfficientNet-B0's squeeze
/// pools, 9216 rows of 49, took 10.0 us as 9216 blocks of 64 threads.
const WARP_ROWS_PER_BLOCK: u32 = 8;

fn prev_pow2(x: u32) -> u32 {
    1 << (31 - x.max(1).leading_zeros())
}

/// Renders a reduce body.
pub(super) fn render(em: &mut Emitter<'_>, r: &ReduceBody, caps: &CudaCaps, t: &Tuning) -> Result<Body, RenderError> {
    let k = em.k;
    let kname = k.name.clone();
    let invalid = |msg: String| RenderError::InvalidTuning { kernel: kname.clone(), msg };
    if t.tile.is_some() {
        return Err(invalid("a matmul tile given for a reduce kernel".into()));
    }
    if r.rows > i32::MAX as usize {
        return Err(em.err(format!("{} rows exceed the grid limit", r.rows)));
    }
    let dep_red = depends_on(k, Var::Red);
    let max_acc = acc_uses(k);
    let mut reds = Vec::with_capacity(r.reductions.len());
    for (i, red) in r.reductions.iter().enumerate() {
        let value_dt = k.expr(red.value).dtype;
        if max_acc[red.value.0 as usize].is_some_and(|s| s >= i) {
            return Err(em.err(format!("reduction {i} folds a value that reads its own or a later accumulator")));
        }
        let is_arg = matches!(red.op, RedOp::ArgMax | RedOp::ArgMin);
        if is_arg && !ct(red.dtype).is_int() {
            return Err(em.err(format!("arg reduction {i} accumulates in {}", red.dtype)));
        }
        let fold_dt = match (is_arg, value_dt, red.dtype) {
            (true, DType::Bool, _) => DType::I32,
            (true, v, _) => v,
            (false, _, DType::Bool) => DType::U32,
            (false, _, a) => a,
        };
        reds.push(Red { op: red.op, value: red.value, value_dt, acc_dt: red.dtype, fold_dt });
    }
    for s in &r.row_stores {
        if store_roots(s).iter().any(|e| dep_red[e.0 as usize]) || s.index.uses(Var::Red) {
            return Err(em.err("a row store depends on the reduced position `red`"));
        }
    }
    // Phase roots: reduction i, then the element stores.
    let mut phases: Vec<Vec<ExprId>> = reds.iter().map(|rd| vec![rd.value]).collect();
    let elem_roots: Vec<ExprId> = r.elem_stores.iter().flat_map(store_roots).collect();
    if !r.elem_stores.is_empty() {
        phases.push(elem_roots.clone());
    }
    let all_roots: Vec<ExprId> = phases.iter().flatten().copied().collect();
    let plan = plan(em, r, &all_roots, caps, t).map_err(invalid)?;
    let splits = row_split(k, r, &plan, caps, t).map_err(invalid)?;
    let Plan { mut mode, width, block, rows_per_block } = plan;
    if mode == Mode::Serial && t.vectorize != Some(false) {
        match super::reduce_rows::rows_per_thread(em, r, &reds) {
            w if w > 1 => {
                let block = t.block.unwrap_or_else(|| serial_block(r.rows as u64 / u64::from(w), caps));
                return super::reduce_rows::render(em, r, &reds[0], (block, w, r.len as u64 <= SERIAL_UNROLL));
            }
            _ if t.vectorize == Some(true) => {
                return Err(invalid(
                    "vectorize: no load of a thread-per-row reduction is contiguous along the rows".into(),
                ));
            }
            _ => {}
        }
    }
    // The chunk: a whole number of the block's steps, so only a row's last block has a ragged end.
    let step = u64::from(block) * u64::from(width);
    let chunk = (r.len as u64).div_ceil(u64::from(splits)).div_ceil(step) * step;
    let splits = if splits > 1 { (r.len as u64).div_ceil(chunk) as u32 } else { 1 };
    if splits > 1 {
        mode = Mode::Split { chunk };
    }
    // A split row's scratch: the partials (fold dtype) of every block, then a counter per row.
    let fold_bytes = reds.first().map_or(4, |rd| rd.fold_dt_bytes());
    let part_bytes = (r.rows as u64 * u64::from(splits) * fold_bytes).div_ceil(8) * 8;
    let scratch = if splits > 1 { part_bytes + r.rows as u64 * 4 } else { 0 };
    if scratch > 256 << 20 {
        return Err(invalid(format!("split_k {splits}: {scratch} bytes of scratch for the partial results")));
    }

    let cache = if let Mode::Persistent(_) = mode { kept_loads(em, &phases) } else { Vec::new() };

    let ity = em.ity();
    let nw = block / 32;
    let blocks = match mode {
        Mode::Serial => (r.rows as u64).div_ceil(u64::from(block)),
        Mode::Split { .. } => r.rows as u64 * u64::from(splits),
        _ => (r.rows as u64).div_ceil(u64::from(rows_per_block)),
    };
    if blocks > i32::MAX as u64 {
        return Err(em.err(format!("{blocks} blocks exceed the grid limit")));
    }
    let launch = block * rows_per_block;
    let (red0, red) = if width > 1 { ("red0", "red") } else { ("red", "red") };
    if r.rows > 0 {
        // Row setup.
        if mode == Mode::Serial {
            em.line(format!("// one thread per row: {} rows of {} elements", r.rows, r.len));
            let tid = if em.wide {
                format!("(unsigned long long)blockIdx.x * {block}ull + threadIdx.x")
            } else {
                format!("blockIdx.x * {block}u + threadIdx.x")
            };
            em.decl("row", format!("const {ity} row = {tid};"));
            if blocks * u64::from(block) != r.rows as u64 {
                em.line(format!("if (row >= {}) {{", em.ilit(r.rows as u64)));
                em.line("    return;");
                em.line("}");
            }
        } else if rows_per_block > 1 {
            em.line(format!(
                "// one warp per row, {rows_per_block} rows per block: {} rows of {} elements, {width} consecutive \
                 elements per thread and step",
                r.rows, r.len
            ));
            em.decl("row", format!("const {ity} row = blockIdx.x * {rows_per_block}u + threadIdx.x / 32u;"));
            em.decl("tid", format!("const {ity} tid = threadIdx.x % 32u;"));
            if blocks * u64::from(rows_per_block) != r.rows as u64 {
                // Whole warps leave: the butterflies below stay warp-uniform.
                em.line(format!("if (row >= {}) {{", em.ilit(r.rows as u64)));
                em.line("    return;");
                em.line("}");
            }
        } else if let Mode::Split { chunk } = mode {
            em.line(format!(
                "// {splits} blocks per row: {} rows of {} elements in chunks of {chunk}, {width} consecutive \
                 elements per thread and step",
                r.rows, r.len
            ));
            em.decl("row", format!("const {ity} row = blockIdx.x / {splits}u;"));
            em.line(format!("const unsigned sp = blockIdx.x % {splits}u; // this block's chunk of the row"));
            em.decl("tid", format!("const {ity} tid = threadIdx.x;"));
            em.line(format!("const {ity} chunk_begin = ({ity})sp * {};", em.ilit(chunk)));
            em.line(format!(
                "const {ity} chunk_end = min(({ity}){}, chunk_begin + {});",
                em.ilit(r.len as u64),
                em.ilit(chunk)
            ));
            if nw > 1 {
                em.decl("warp", "const unsigned warp = threadIdx.x / 32u;");
                em.decl("wlane", "const unsigned wlane = threadIdx.x % 32u;");
            }
        } else {
            em.line(format!(
                "// one block per row: {} rows of {} elements, {width} consecutive elements per thread and step",
                r.rows, r.len
            ));
            em.decl("row", format!("const {ity} row = blockIdx.x;"));
            em.decl("tid", format!("const {ity} tid = threadIdx.x;"));
            if nw > 1 {
                em.decl("warp", "const unsigned warp = threadIdx.x / 32u;");
                em.decl("wlane", "const unsigned wlane = threadIdx.x % 32u;");
            }
        }
        em.names.insert(Var::Row, "row".into());
        if let Mode::Persistent(p) = mode {
            for &c in &cache {
                let ty = ct(k.exprs[c as usize].dtype).name();
                let dims = if width > 1 { format!("[{p}][{width}]") } else { format!("[{p}]") };
                em.line(format!("{ty} c{c}{dims}; // v{c}, kept in registers for the later phases"));
            }
        }
        let cache_ref = |c: u32, g: u32| if width > 1 { format!("c{c}[{g}][j]") } else { format!("c{c}[{g}]") };
        for (i, rd) in reds.iter().enumerate() {
            em.line(format!("// ---- reduction {i}: {:?} of v{} in {}", rd.op, rd.value.0, rd.acc_dt));
            let mut roots = vec![rd.value];
            if i == 0 {
                roots.extend(cache.iter().map(|&c| ExprId(c)));
            }
            em.emit_closure(&roots, &|e| !dep_red[e as usize])?;
            let fct = rd.fold_ct();
            em.line(format!("{} acc{i} = {};", fct.name(), rd.identity()));
            if rd.is_arg() {
                em.line(format!("long long idx{i} = 9223372036854775807LL;"));
            }
            let fold = |em: &mut Emitter<'_>, g: u32| -> Result<(), RenderError> {
                if i == 0 {
                    for &c in &cache {
                        em.line(format!("{} = v{c};", cache_ref(c, g)));
                    }
                }
                let v = em.value(rd.value)?;
                // A value of the fold's dtype is folded as it is (a cast to f16 would round it).
                let v = if rd.value_dt == rd.fold_dt { v } else { cast(&v, rd.value_dt, rd.fold_dt, &mut em.h) };
                if rd.is_arg() {
                    let better = rd.better(em);
                    em.line(format!("const {} cand{i} = {v};", fct.name()));
                    em.line(format!("const long long cidx{i} = (long long){red};"));
                    em.open(format!("if ({better}(cand{i}, cidx{i}, acc{i}, idx{i}))"));
                    em.line(format!("acc{i} = cand{i};"));
                    em.line(format!("idx{i} = cidx{i};"));
                    em.close();
                } else {
                    let c = rd.combine(&format!("acc{i}"), &v, em)?;
                    em.line(format!("acc{i} = {c};"));
                }
                Ok(())
            };
            visit(em, mode, (width, block, r.len), red0, &mut |em, g| {
                if i > 0 {
                    for &c in &cache {
                        em.cached.insert(c, cache_ref(c, g));
                    }
                }
                let grp = Group { var: Var::Red, width, base: red0, lane: red, roots: &roots, stores: &[] };
                let res = emit_group(em, &grp, &mut |em| fold(em, g));
                for &c in &cache {
                    em.cached.remove(&c);
                }
                res
            })?;
            if mode != Mode::Serial {
                block_combine(em, rd, i, nw)?;
            }
            if splits > 1 {
                // A scope of its own: the second combine declares its own shared slots.
                em.open("");
                split_combine(em, rd, i, (splits, block, part_bytes))?;
                block_combine(em, rd, i, nw)?;
                em.close();
            }
            let result = if rd.is_arg() {
                if r.len == 0 { "0LL".to_string() } else { format!("idx{i}") }
            } else if rd.acc_dt == DType::Bool {
                format!("acc{i} != 0u")
            } else {
                format!("acc{i}")
            };
            em.line(format!("const {} r{i} = {result};", ct(rd.acc_dt).name()));
            em.acc.insert(i, AccVal { name: format!("r{i}"), dtype: rd.acc_dt });
        }
        // Element stores.
        if !r.elem_stores.is_empty() {
            em.line("// ---- element stores");
            em.emit_closure(&elem_roots, &|e| !dep_red[e as usize])?;
            visit(em, mode, (width, block, r.len), red0, &mut |em, g| {
                for &c in &cache {
                    em.cached.insert(c, cache_ref(c, g));
                }
                let grp =
                    Group { var: Var::Red, width, base: red0, lane: red, roots: &elem_roots, stores: &r.elem_stores };
                let res = emit_group(em, &grp, &mut |_| Ok(()));
                for &c in &cache {
                    em.cached.remove(&c);
                }
                res
            })?;
        }
        // Row stores.
        if !r.row_stores.is_empty() {
            em.set_lanes(None);
            em.names.remove(&Var::Red);
            em.line("// ---- row stores");
            let roots: Vec<ExprId> = r.row_stores.iter().flat_map(store_roots).collect();
            if mode != Mode::Serial {
                em.open("if (tid == 0)");
            }
            em.emit_closure(&roots, &|_| true)?;
            for s in &r.row_stores {
                em.emit_store(s)?;
            }
            if mode != Mode::Serial {
                em.close();
            }
        }
    }
    let strategy = match mode {
        Mode::Split { .. } => format!("reduce split {splits} block {block}"),
        Mode::Persistent(p) if rows_per_block > 1 => format!("reduce persistent x{p} warp per row x{rows_per_block}"),
        Mode::Persistent(p) => format!("reduce persistent x{p} block {block}"),
        Mode::Looped => format!("reduce looped block {block}"),
        Mode::Serial => format!("reduce thread-per-row block {block}"),
    } + &if width > 1 { format!(" vec{width}") } else { String::new() };
    Ok(Body {
        grid: [if r.rows == 0 { 0 } else { blocks as u32 }, 1, 1],
        block: [launch, 1, 1],
        summary: format!(
            "{strategy}: {} rows of {}, {} reductions, {width} elements per thread and step, {launch} threads per \
             block",
            r.rows,
            r.len,
            reds.len()
        ),
        strategy,
        min_blocks: None,
        dynamic_shared: 0,
        split: Some(GridSplit {
            unit: OuterUnit::Rows,
            per: if mode == Mode::Serial { u64::from(block) } else { u64::from(rows_per_block) },
            inner: u64::from(splits),
        }),
        scratch,
        tensor_maps: Vec::new(),
        cluster: 1,
    })
}

/// The loads a persistent reduction keeps in registers for its later phases: per-element loads
/// of two or more phases (`phases`: each phase's roots), not gathered through an accumulator,
/// which the first phase cannot know yet. Shared with the PTX renderer (`ptx::reduce`).
pub(super) fn kept_loads(em: &Emitter<'_>, phases: &[Vec<ExprId>]) -> Vec<u32> {
    let k = em.k;
    let (dep_red, max_acc) = (depends_on(k, Var::Red), acc_uses(k));
    let sets: Vec<_> = phases.iter().map(|roots| closure(k, roots, &|_| false)).collect();
    (0..k.exprs.len())
        .filter(|&e| {
            matches!(k.exprs[e].expr, Expr::Load { .. })
                && dep_red[e]
                && em.varying[e]
                && max_acc[e].is_none()
                && sets.iter().filter(|s| s.contains(&(e as u32))).count() >= 2
        })
        .map(|e| e as u32)
        .collect()
}

/// The default block of `threads` threads each reducing rows serially: small blocks when the
/// threads are few, so they spread over the SMs.
fn serial_block(threads: u64, caps: &CudaCaps) -> u32 {
    let mut b = DEFAULT_BLOCK.min(prev_pow2(caps.max_threads_per_block));
    while b > 32 && threads.div_ceil(u64::from(b)) < 2 * u64::from(caps.sm_count) {
        b /= 2;
    }
    b
}

/// Chooses the mode, vector width and block size under `t`; `Err` when `t` cannot be honoured.
pub(super) fn plan(
    em: &mut Emitter<'_>,
    r: &ReduceBody,
    roots: &[ExprId],
    caps: &CudaCaps,
    t: &Tuning,
) -> Result<Plan, String> {
    if r.strategy == ReduceStrategy::ThreadPerRow {
        let block = t.block.unwrap_or_else(|| serial_block(r.rows as u64, caps));
        check_block(block, caps)?;
        if t.persistent == Some(true) {
            return Err("persistent: a thread-per-row reduction has no block per row".into());
        }
        em.set_lanes(Some((Var::Red, 1)));
        return Ok(Plan { mode: Mode::Serial, width: 1, block, rows_per_block: 1 });
    }
    let elem_stores = &r.elem_stores;
    let width = if t.vectorize == Some(false) || r.len == 0 {
        em.set_lanes(Some((Var::Red, 1)));
        1
    } else {
        choose_width(em, Var::Red, r.len, roots, elem_stores)
    };
    if t.vectorize == Some(true) && width == 1 {
        return Err("vectorize: no access is contiguous and aligned along the row".into());
    }
    let groups = (r.len as u64).div_ceil(u64::from(width));
    let per_thread = |b: u32| groups.div_ceil(u64::from(b)).max(1);
    let elems = |b: u32| per_thread(b) * u64::from(width);
    let fits = |b: u32| elems(b) <= PERSISTENT_PER_THREAD;
    let max_block = prev_pow2(caps.max_threads_per_block).max(32);
    let block = match t.block {
        Some(b) => b,
        None => {
            let b0 = (groups.next_power_of_two().clamp(32, u64::from(DEFAULT_BLOCK)) as u32).min(max_block);
            // The first block that leaves a thread at most `DEFAULT_PER_THREAD` of the row, else
            // the first that keeps the row in registers at all, else `b0` (a looped row).
            let within = |most: u64| move |&b: &u32| b <= max_block && elems(b) <= most;
            if t.persistent == Some(false) {
                b0
            } else {
                [b0, WIDE_ROW_BLOCK]
                    .into_iter()
                    .find(within(DEFAULT_PER_THREAD))
                    .or_else(|| [b0, 512, 1024].into_iter().find(within(PERSISTENT_PER_THREAD)))
                    .unwrap_or(b0)
            }
        }
    };
    check_block(block, caps)?;
    let mode = match t.persistent {
        Some(false) => Mode::Looped,
        Some(true) if !fits(block) => {
            return Err(format!(
                "persistent: a row of {} needs {} elements per thread at block {block}, more than {}",
                r.len,
                per_thread(block) * u64::from(width),
                PERSISTENT_PER_THREAD
            ));
        }
        _ if fits(block) => Mode::Persistent(per_thread(block) as u32),
        _ => Mode::Looped,
    };
    // Rows a warp's registers hold (at most 32 elements a lane) on one warp each, while there is
    // a row for every SM: the combine is a warp butterfly, with no shared memory or barrier.
    // Several rows share a block while the blocks still number two per SM. Measured (H200,
    // session 20): ConvNeXt-Tiny's LayerNorms over 384 and 768 channels (1568 and 392 rows) took
    // 9.0 and 7.0 us on a block of 128 / 256 threads per row, torch.compile's 2.9 and 3.6.
    let sms = u64::from(caps.sm_count.max(1));
    let warp_rows = t.block.is_none() && matches!(mode, Mode::Persistent(_)) && fits(32) && r.rows as u64 >= sms;
    if warp_rows {
        let rows_per_block = [WARP_ROWS_PER_BLOCK, 4, 2]
            .into_iter()
            .find(|&k| (r.rows as u64).div_ceil(u64::from(k)) >= 2 * sms)
            .unwrap_or(1);
        return Ok(Plan { mode: Mode::Persistent(per_thread(32) as u32), width, block: 32, rows_per_block });
    }
    Ok(Plan { mode, width, block, rows_per_block: 1 })
}

/// Blocks per row (1: none): [`Tuning::split_k`], else by default, where the rows are too few
/// for half the blocks the device holds at once, as many as it holds ([`THREADS_PER_SM`]), each of
/// at least [`MIN_SPLIT_CHUNK`] elements. Only a kernel the scheduler could split
/// ([`sinter_core::schedule::splittable`]: one sum, product, maximum or minimum, row stores
/// alone) and a block per row split. Measured on an H200 (BENCHMARKS.md, session 21): `x.sum()`
/// over 64M f32 as the scheduler's two kernels (512 partial rows of 256 threads, then their
/// combine) took 75.6 us, the combine and its launch ~4 us of it, at 31 warps an SM.
pub(super) fn row_split(k: &Kernel, r: &ReduceBody, plan: &Plan, caps: &CudaCaps, t: &Tuning) -> Result<u32, String> {
    let legal = plan.mode != Mode::Serial && plan.rows_per_block == 1 && sinter_core::schedule::splittable(k);
    let len = r.len as u64;
    match t.split_k {
        Some(s) if s == 0 || s > MAX_ROW_SPLIT => {
            Err(format!("split_k {s}: a row splits over 1 to {MAX_ROW_SPLIT} blocks"))
        }
        Some(s) if s > 1 && !legal => Err(format!(
            "split_k {s}: only a block per row of a lone sum, product, maximum or minimum with row stores alone \
             splits over blocks"
        )),
        Some(s) if u64::from(s) > len.max(1) => Err(format!("split_k {s}: more blocks than the row's {len} elements")),
        Some(s) if s > 1 && t.persistent == Some(true) => {
            Err(format!("split_k {s}: a split row is looped, not persistent"))
        }
        Some(s) => Ok(s),
        None if !legal || t.persistent == Some(true) => Ok(1),
        None => {
            let resident = u64::from(caps.sm_count.max(1)) * (THREADS_PER_SM / u64::from(plan.block.max(1))).max(1);
            let rows = (r.rows as u64).max(1);
            if rows * 2 >= resident {
                return Ok(1);
            }
            Ok((resident / rows).min(len / MIN_SPLIT_CHUNK).clamp(1, u64::from(MAX_ROW_SPLIT)) as u32)
        }
    }
}

/// A split row's second step for reduction `i`, after the block's combine: the block stores its
/// partial (`acc{i}`) in the scratch, passes the row's last-block gate, and folds the row's
/// `splits` partials into `acc{i}` (threads in chunk order, then the block's combine).
fn split_combine(
    em: &mut Emitter<'_>,
    rd: &Red,
    i: usize,
    (splits, block, part_bytes): (u32, u32, u64),
) -> Result<(), RenderError> {
    let t = rd.fold_ct().name();
    em.line(format!("// ---- split row: {splits} partials through the scratch; the row's last block folds them"));
    em.line(format!("{t}* const part = reinterpret_cast<{t}*>(sinter_ws) + row * {splits}u;"));
    em.line(format!(
        "unsigned* const row_count = reinterpret_cast<unsigned*>(reinterpret_cast<char*>(sinter_ws) + {part_bytes}ull);"
    ));
    em.line(format!("if (tid == 0u) __stcg(&part[sp], acc{i});"));
    super::scratch::last_block_gate(em, "row_count[row]", splits);
    em.line(format!("acc{i} = {};", rd.identity()));
    em.open(format!("for (unsigned x = threadIdx.x; x < {splits}u; x += {block}u)"));
    em.line(format!("const {t} pv = __ldcg(&part[x]);"));
    let c = rd.combine(&format!("acc{i}"), "pv", em)?;
    em.line(format!("acc{i} = {c};"));
    em.close();
    // Every block of the row has counted itself: the counter is zeroed for the next launch.
    super::scratch::reset_counter(em, "row_count[row]");
    Ok(())
}

/// The longest row a one-thread-per-row reduction unrolls whole.
const SERIAL_UNROLL: u64 = 64;

/// Visits the thread's groups of a row: `body(em, g)` inside the block that defines the group's
/// first position (`red0`, or `red` for width 1), for each unrolled group `g` of a persistent
/// reduction, once inside the strided loop of a looped one, once inside the serial loop.
fn visit(
    em: &mut Emitter<'_>,
    mode: Mode,
    (width, block, len): (u32, u32, usize),
    red0: &str,
    body: &mut dyn FnMut(&mut Emitter<'_>, u32) -> Result<(), RenderError>,
) -> Result<(), RenderError> {
    if len == 0 {
        // An empty row: nothing to visit, the accumulators keep their identities.
        return Ok(());
    }
    let ity = em.ity();
    let (w, b, n) = (u64::from(width), u64::from(block), len as u64);
    let first = |em: &Emitter<'_>, g: u64| {
        let off = g * b;
        let t = if off == 0 { "tid".to_string() } else { format!("(tid + {})", em.ilit(off)) };
        if w == 1 { t } else { format!("{t} * {}", em.ilit(w)) }
    };
    match mode {
        Mode::Persistent(p) => {
            for g in 0..u64::from(p) {
                em.open("");
                em.decl(red0, format!("const {ity} {red0} = {};", first(em, g)));
                let guard = (g + 1) * b * w > n;
                if guard {
                    em.open(format!("if ({red0} < {})", em.ilit(n)));
                }
                body(em, g as u32)?;
                if guard {
                    em.close();
                }
                em.close();
            }
        }
        Mode::Split { .. } => {
            let t = if w == 1 { "tid".to_string() } else { format!("tid * {}", em.ilit(w)) };
            em.line("#pragma unroll 4");
            em.open(format!(
                "for ({ity} {red0} = chunk_begin + {t}; {red0} < chunk_end; {red0} += {})",
                em.ilit(b * w)
            ));
            body(em, 0)?;
            em.close();
        }
        Mode::Looped => {
            // Several iterations' loads in flight.
            em.line("#pragma unroll 4");
            em.open(format!(
                "for ({ity} {red0} = {}; {red0} < {}; {red0} += {})",
                first(em, 0),
                em.ilit(n),
                em.ilit(b * w)
            ));
            body(em, 0)?;
            em.close();
        }
        Mode::Serial => {
            // A short row (a window's taps: 9, 25, 49) unrolled whole: its index arithmetic
            // (`red / 7`, `red % 7`, the padding masks of each tap row and column) folds into
            // constants and per-row values instead of being computed again for every tap.
            if n <= SERIAL_UNROLL {
                em.line("#pragma unroll");
            }
            em.open(format!("for ({ity} {red0} = 0; {red0} < {}; ++{red0})", em.ilit(n)));
            body(em, 0)?;
            em.close();
        }
    }
    Ok(())
}

/// Combines reduction `i`'s per-thread partials across the block: a butterfly inside each warp,
/// then (with several warps) one shared slot per warp and a butterfly over the slots in every warp,
/// so every thread ends with the block's result in `acc{i}` (and `idx{i}`).
fn block_combine(em: &mut Emitter<'_>, rd: &Red, i: usize, nw: u32) -> Result<(), RenderError> {
    let t = rd.fold_ct().name();
    let butterfly = |em: &mut Emitter<'_>| -> Result<(), RenderError> {
        em.line("#pragma unroll");
        em.open("for (int o = 16; o > 0; o >>= 1)");
        if rd.is_arg() {
            let better = rd.better(em);
            em.line(format!("const {t} ov = __shfl_xor_sync(0xffffffffu, acc{i}, o);"));
            em.line(format!("const long long oi = __shfl_xor_sync(0xffffffffu, idx{i}, o);"));
            em.open(format!("if ({better}(ov, oi, acc{i}, idx{i}))"));
            em.line(format!("acc{i} = ov;"));
            em.line(format!("idx{i} = oi;"));
            em.close();
        } else {
            // The shuffle is bound first: every lane must execute it (a combine may name its
            // operand twice, as `a < b ? a : b` does).
            em.line(format!("const {t} other = __shfl_xor_sync(0xffffffffu, acc{i}, o);"));
            let c = rd.combine(&format!("acc{i}"), "other", em)?;
            em.line(format!("acc{i} = {c};"));
        }
        em.close();
        Ok(())
    };
    em.line(format!("// combine reduction {i} across the block"));
    butterfly(em)?;
    if nw > 1 {
        em.line(format!("__shared__ {t} sh{i}[{nw}];"));
        if rd.is_arg() {
            em.line(format!("__shared__ long long shi{i}[{nw}];"));
        }
        em.open("if (wlane == 0u)");
        em.line(format!("sh{i}[warp] = acc{i};"));
        if rd.is_arg() {
            em.line(format!("shi{i}[warp] = idx{i};"));
        }
        em.close();
        em.line("__syncthreads();");
        em.line(format!("acc{i} = wlane < {nw}u ? sh{i}[wlane] : {};", rd.identity()));
        if rd.is_arg() {
            em.line(format!("idx{i} = wlane < {nw}u ? shi{i}[wlane] : 9223372036854775807LL;"));
        }
        butterfly(em)?;
    }
    Ok(())
}
