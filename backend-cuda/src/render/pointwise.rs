//! Pointwise kernels: one thread per lane, or per group of `W` consecutive lanes with 16-byte
//! vector loads and stores where some access is contiguous and aligned (see [`choose_width`]).

use sinter_core::kernel::{Expr, ExprId, Store, Var};

use super::analysis::{closure, store_roots};
use super::emit::{Emitter, Group, emit_group};
use super::index::LaneForm;
use super::{Body, CudaCaps, GridSplit, OuterUnit, RenderError, Tuning};

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

/// Renders a pointwise body.
pub(super) fn render(
    em: &mut Emitter<'_>,
    numel: usize,
    stores: &[Store],
    caps: &CudaCaps,
    t: &Tuning,
) -> Result<Body, RenderError> {
    let kname = em.k.name.clone();
    let invalid = |msg: String| RenderError::InvalidTuning { kernel: kname.clone(), msg };
    let block = t.block.unwrap_or(DEFAULT_BLOCK.min(caps.max_threads_per_block));
    check_block(block, caps).map_err(invalid)?;
    if t.persistent == Some(true) || t.tile.is_some() {
        return Err(invalid("persistent and tile apply to reductions and matmuls".into()));
    }
    let roots: Vec<ExprId> = stores.iter().flat_map(store_roots).collect();
    let width = if t.vectorize == Some(false) || numel == 0 {
        em.set_lanes(Some((Var::Lane, 1)));
        1
    } else {
        choose_width(em, Var::Lane, numel, &roots, stores)
    };
    if t.vectorize == Some(true) && width == 1 {
        return Err(invalid("vectorize: no access is contiguous and aligned in the lane".into()));
    }
    let threads = (numel / width as usize) as u64;
    let blocks = threads.div_ceil(u64::from(block));
    if blocks > i32::MAX as u64 {
        return Err(RenderError::Unsupported { kernel: kname, what: format!("{blocks} blocks exceed the grid limit") });
    }
    let ity = em.ity();
    if numel > 0 {
        let tid = if em.wide {
            format!("(unsigned long long)blockIdx.x * {block}ull + threadIdx.x")
        } else {
            format!("blockIdx.x * {block}u + threadIdx.x")
        };
        let guard = blocks * u64::from(block) != threads;
        if width == 1 {
            em.line(format!("// one lane per thread: {numel} lanes"));
            em.decl("lane", format!("const {ity} lane = {tid};"));
            if guard {
                em.line(format!("if (lane >= {}) {{", em.ilit(numel as u64)));
                em.line("    return;");
                em.line("}");
            }
        } else {
            em.line(format!("// {width} consecutive lanes per thread: {numel} lanes"));
            em.decl("lane0", format!("const {ity} lane0 = ({tid}) * {};", em.ilit(u64::from(width))));
            if guard {
                em.line(format!("if (lane0 >= {}) {{", em.ilit(numel as u64)));
                em.line("    return;");
                em.line("}");
            }
        }
        let g = Group { var: Var::Lane, width, base: "lane0", lane: "lane", roots: &roots, stores };
        emit_group(em, &g, &mut |_| Ok(()))?;
    }
    let strategy =
        if width > 1 { format!("pointwise x{width} block {block}") } else { format!("pointwise block {block}") };
    Ok(Body {
        grid: [if numel == 0 { 0 } else { blocks as u32 }, 1, 1],
        block: [block, 1, 1],
        summary: format!(
            "pointwise over {numel} lanes, {width} per thread, {block} threads per block, {blocks} blocks"
        ),
        strategy,
        min_blocks: None,
        dynamic_shared: 0,
        split: Some(GridSplit { unit: OuterUnit::Lanes, per: u64::from(block) * u64::from(width), inner: 1 }),
        scratch: 0,
        tensor_maps: Vec::new(),
    })
}
