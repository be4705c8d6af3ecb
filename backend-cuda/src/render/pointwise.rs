//! Pointwise kernels: one thread per lane, or per group of `W` consecutive lanes with 16-byte
//! vector loads and stores where some access is contiguous and aligned (see [`choose_width`]);
//! a thread may take several such groups, one per block-wide slice ([`Tuning::groups`]), and a
//! small kernel of heavy arithmetic keeps one lane per thread ([`one_lane_per_thread`]).

use sinter_core::kernel::{Expr, ExprId, Store, Var};

use super::analysis::{closure, store_roots};
use super::emit::{Emitter, Group, emit_group};
use super::index::LaneForm;
use super::{Body, CudaCaps, GridSplit, MAX_GROUPS, OuterUnit, RenderError, Tuning};

/// The default threads per block of pointwise and thread-per-row kernels.
pub(super) const DEFAULT_BLOCK: u32 = 256;

/// The widest lane group of `var` (16, 8, 4 or 2 lanes dividing `extent`) in which some access is
/// contiguous and aligned and the widest such access moves at most 16 bytes per group: one 16-byte
/// vector for the widest dtype (4 lanes of f32, 8 of f16/bf16, 2 of f64, 16 of bytes), narrower
/// aligned vectors for the narrower dtypes; 1 when there is none. Leaves the emitter vectorized at
/// the chosen width.
pub(super) fn choose_width(em: &mut Emitter<'_>, var: Var, extent: usize, roots: &[ExprId], stores: &[Store]) -> u32 {
    let k = em.k;
    for w in [16u32, 8, 4, 2] {
        if !extent.is_multiple_of(w as usize) {
            continue;
        }
        em.set_lanes(Some((var, w)));
        let mut max_size = 0;
        for e in closure(k, roots, &|_| false) {
            if let Expr::Load { arg, index } = &k.exprs[e as usize].expr
                && em.varying[e as usize]
                && em.form(index) == LaneForm::Contig
            {
                max_size = max_size.max(k.args[*arg].dtype.size_bytes());
            }
        }
        for s in stores {
            if em.form(&s.index) == LaneForm::Contig {
                max_size = max_size.max(k.args[s.arg].dtype.size_bytes());
            }
        }
        if max_size > 0 && w as usize * max_size <= 16 {
            return w;
        }
    }
    em.set_lanes(Some((var, 1)));
    1
}

/// Threads an SM holds at once on sm_80 and sm_90 (1536 on sm_86/89: the rules below only need
/// the order of magnitude).
pub(super) const THREADS_PER_SM: u64 = 2048;

/// Arithmetic per lane above which a kernel too small to fill the device runs one lane per
/// thread ([`one_lane_per_thread`]), in the inliner's weights (a transcendental counts 4).
const HEAVY_LANE: usize = 32;

/// The arithmetic weight of one lane of the closure of `roots` (the ops' weights,
/// `UnaryOp::weight` and `BinaryOp::weight`; selects and casts 1; loads and constants 0).
fn lane_weight(k: &sinter_core::kernel::Kernel, roots: &[ExprId]) -> usize {
    closure(k, roots, &|_| false)
        .into_iter()
        .map(|e| match &k.exprs[e as usize].expr {
            Expr::Unary(u, _) => u.weight(),
            Expr::Binary(b, ..) => b.weight(),
            Expr::Where(..) | Expr::Cast(_) => 1,
            _ => 0,
        })
        .sum()
}

/// Whether a kernel of `numel` lanes keeps one lane per thread by default: when its lanes are
/// fewer than the device holds threads and each costs at least [`HEAVY_LANE`], its time is one
/// thread's dependent chain of arithmetic, which several lanes per thread would multiply.
/// Measured on the H100 (session 8): `pointwise_chain64_1024_f32` (32 `sin`, weight ~260 per
/// lane, 1024 lanes) 5.9 us at one lane per thread against 14.0 at four (one 16-byte group).
fn one_lane_per_thread(k: &sinter_core::kernel::Kernel, numel: usize, roots: &[ExprId], caps: &CudaCaps) -> bool {
    (numel as u64) < u64::from(caps.sm_count.max(1)) * THREADS_PER_SM && lane_weight(k, roots) >= HEAVY_LANE
}

/// Checks a block size for 1-D kernels: a positive multiple of 32 within the device's limit.
pub(super) fn check_block(b: u32, caps: &CudaCaps) -> Result<(), String> {
    if b == 0 || !b.is_multiple_of(32) {
        return Err(format!("block size {b} is not a positive multiple of 32"));
    }
    if b > caps.max_threads_per_block {
        return Err(format!("block size {b} exceeds the device's {} threads per block", caps.max_threads_per_block));
    }
    Ok(())
}

/// The launch shape of a pointwise kernel: what both renderers (CUDA C++ here, PTX in
/// [`super::ptx`]) follow.
pub(super) struct Plan {
    /// Threads per block.
    pub(super) block: u32,
    /// Lanes per group (1, or the vector width of [`choose_width`]).
    pub(super) width: u32,
    /// Lane groups per thread ([`Tuning::groups`]).
    pub(super) groups: u32,
    /// Blocks.
    pub(super) blocks: u64,
    /// Lane groups per block.
    pub(super) per_block: u64,
    /// Whether the last block's threads past the extent must stop.
    pub(super) guard: bool,
    /// The stores' value roots.
    pub(super) roots: Vec<ExprId>,
}

/// Checks `t` for a pointwise body of `numel` lanes and picks its launch; leaves the emitter
/// vectorized at the chosen width.
pub(super) fn plan(
    em: &mut Emitter<'_>,
    numel: usize,
    stores: &[Store],
    caps: &CudaCaps,
    t: &Tuning,
) -> Result<Plan, RenderError> {
    let kname = em.k.name.clone();
    let invalid = |msg: String| RenderError::InvalidTuning { kernel: kname.clone(), msg };
    let block = t.block.unwrap_or(DEFAULT_BLOCK.min(caps.max_threads_per_block));
    check_block(block, caps).map_err(invalid)?;
    if t.persistent == Some(true) || t.tile.is_some() {
        return Err(invalid("persistent and tile apply to reductions and matmuls".into()));
    }
    let roots: Vec<ExprId> = stores.iter().flat_map(store_roots).collect();
    let width = if t.vectorize == Some(false)
        || numel == 0
        || (t.vectorize.is_none() && one_lane_per_thread(em.k, numel, &roots, caps))
    {
        em.set_lanes(Some((Var::Lane, 1)));
        1
    } else {
        choose_width(em, Var::Lane, numel, &roots, stores)
    };
    if t.vectorize == Some(true) && width == 1 {
        return Err(invalid("vectorize: no access is contiguous and aligned in the lane".into()));
    }
    let group_count = (numel / width as usize) as u64;
    let groups = t.groups.unwrap_or(1);
    if groups == 0 || groups > MAX_GROUPS {
        return Err(invalid(format!("groups {groups} outside 1..={MAX_GROUPS}")));
    }
    if groups > 1 && group_count < u64::from(block) * u64::from(groups) {
        return Err(invalid(format!("groups {groups}: {group_count} lane groups do not fill one block of them")));
    }
    let per_block = u64::from(block) * u64::from(groups);
    let blocks = group_count.div_ceil(per_block);
    if blocks > i32::MAX as u64 {
        return Err(RenderError::Unsupported { kernel: kname, what: format!("{blocks} blocks exceed the grid limit") });
    }
    Ok(Plan { block, width, groups, blocks, per_block, guard: blocks * per_block != group_count, roots })
}

/// The launch description of a pointwise body of `numel` lanes laid out by `p`.
pub(super) fn body(numel: usize, p: &Plan) -> Body {
    let (block, width, groups, blocks) = (p.block, p.width, p.groups, p.blocks);
    let slices = if groups > 1 { format!(" g{groups}") } else { String::new() };
    let strategy = if width > 1 {
        format!("pointwise x{width}{slices} block {block}")
    } else {
        format!("pointwise{slices} block {block}")
    };
    Body {
        grid: [if numel == 0 { 0 } else { blocks as u32 }, 1, 1],
        block: [block, 1, 1],
        summary: format!(
            "pointwise over {numel} lanes, {width} per {}, {block} threads per block, {blocks} blocks",
            if groups > 1 { format!("group, {groups} groups per thread") } else { "thread".to_string() }
        ),
        strategy,
        min_blocks: None,
        dynamic_shared: 0,
        split: Some(GridSplit { unit: OuterUnit::Lanes, per: p.per_block * u64::from(width), inner: 1 }),
        scratch: 0,
        tensor_maps: Vec::new(),
        cluster: 1,
    }
}

/// Renders a pointwise body.
pub(super) fn render(
    em: &mut Emitter<'_>,
    numel: usize,
    stores: &[Store],
    caps: &CudaCaps,
    t: &Tuning,
) -> Result<Body, RenderError> {
    let p = plan(em, numel, stores, caps, t)?;
    let (block, width, groups, per_block, guard) = (p.block, p.width, p.groups, p.per_block, p.guard);
    let roots = &p.roots;
    let lanes_per_thread = u64::from(width);
    let ity = em.ity();
    if numel > 0 {
        let lit = |em: &Emitter<'_>, v: u64| em.ilit(v);
        let bid = if em.wide { "(unsigned long long)blockIdx.x".to_string() } else { "blockIdx.x".to_string() };
        let (lane_name, what) =
            if width == 1 { ("lane", "one lane".to_string()) } else { ("lane0", format!("{width} consecutive lanes")) };
        let g = Group { var: Var::Lane, width, base: "lane0", lane: "lane", roots, stores };
        if groups == 1 {
            em.line(format!("// {what} per thread: {numel} lanes"));
            let tid = format!("{bid} * {} + threadIdx.x", lit(em, u64::from(block)));
            let first = if width == 1 { tid } else { format!("({tid}) * {}", lit(em, lanes_per_thread)) };
            em.decl(lane_name, format!("const {ity} {lane_name} = {first};"));
            if guard {
                em.line(format!("if ({lane_name} >= {}) {{", lit(em, numel as u64)));
                em.line("    return;");
                em.line("}");
            }
            emit_group(em, &g, &mut |_| Ok(()))?;
        } else {
            // Each block covers `groups` block-wide slices one after another (coalesced per
            // slice); a ragged extent checks each slice.
            em.line(format!(
                "// {what} per thread in each of {groups} block-wide slices: {numel} lanes, {per_block} lane groups per block"
            ));
            em.line("#pragma unroll");
            em.open(format!("for (unsigned s = 0; s < {groups}u; ++s)"));
            let tid =
                format!("({bid} * {} + s) * {} + threadIdx.x", lit(em, u64::from(groups)), lit(em, u64::from(block)));
            let first = if width == 1 { tid } else { format!("({tid}) * {}", lit(em, lanes_per_thread)) };
            em.decl(lane_name, format!("const {ity} {lane_name} = {first};"));
            if guard {
                em.line(format!("if ({lane_name} >= {}) {{", lit(em, numel as u64)));
                em.line("    break;");
                em.line("}");
            }
            emit_group(em, &g, &mut |_| Ok(()))?;
            em.close();
        }
    }
    Ok(body(numel, &p))
}
