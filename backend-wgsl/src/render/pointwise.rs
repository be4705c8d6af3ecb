//! Pointwise kernels: one lane per element, 4 lanes per thread when vectorizable.

use sinter_core::kernel::{Store, Var};

use super::emit::{Emitter, closure, store_roots};
use super::index::LaneForm;
use super::{Body, GridSplit, OuterUnit, RenderError, Tuning, WgslCaps};

/// The entry-point parameters every 1-D kernel uses.
pub(super) const PARAMS: &str = "@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, \
                                 @builtin(local_invocation_index) lid: u32";

/// Emits the linear workgroup id `wid` (spread over x, y, z by the runtime when large).
pub(super) fn emit_wid(em: &mut Emitter<'_>, workgroups: u64, caps: &WgslCaps) {
    if workgroups <= u64::from(caps.max_workgroups_per_dim) {
        em.line("let wid = wg.x;");
    } else {
        em.line("let wid = wg.x + nwg.x * (wg.y + nwg.y * wg.z);");
    }
}

/// [`emit_wid`], then an early return of the workgroups a spread grid launches past `workgroups`.
pub(super) fn emit_wid_within(em: &mut Emitter<'_>, workgroups: u64, caps: &WgslCaps) {
    emit_wid(em, workgroups, caps);
    if grid_excess(workgroups, caps) {
        em.line(format!("if (wid >= {workgroups}u) {{ return; }}"));
    }
}

/// Whether a spread grid launches more workgroups than `workgroups`.
pub(super) fn grid_excess(workgroups: u64, caps: &WgslCaps) -> bool {
    match crate::device::spread_workgroups(workgroups, caps.max_workgroups_per_dim) {
        Ok([x, y, z]) => u64::from(x) * u64::from(y) * u64::from(z) != workgroups,
        Err(_) => true,
    }
}

/// Renders a pointwise body.
pub(super) fn render(
    em: &mut Emitter<'_>,
    numel: usize,
    stores: &[Store],
    caps: &WgslCaps,
    tuning: &Tuning,
) -> Result<Body, RenderError> {
    if numel as u64 > u64::from(u32::MAX) {
        return Err(RenderError::Unsupported {
            kernel: em.k.name.clone(),
            what: format!("{numel} lanes exceed the 32-bit index space"),
        });
    }
    let roots: Vec<_> = stores.iter().flat_map(store_roots).collect();
    // Vectorize when some access is 4-aligned and contiguous in the lane.
    let mut width = 1usize;
    if tuning.vectorize && numel >= 4 && numel.is_multiple_of(4) {
        em.set_vec(Some(Var::Lane), false);
        em.ranges.insert(Var::Lane, (0, numel as i64 - 4));
        let reach = closure(em.k, &roots, &|_| false);
        let contig_load = reach.iter().any(|&e| match &em.k.exprs[e as usize].expr {
            sinter_core::kernel::Expr::Load { index, .. } => {
                em.varying[e as usize] && {
                    let uni = |x: sinter_core::kernel::ExprId| !em.varying[x.0 as usize];
                    super::index::lane_form(index, Var::Lane, &uni) == LaneForm::Contig
                }
            }
            _ => false,
        });
        let contig_store = stores.iter().any(|s| {
            let uni = |x: sinter_core::kernel::ExprId| !em.varying[x.0 as usize];
            super::index::lane_form(&s.index, Var::Lane, &uni) == LaneForm::Contig
        });
        if contig_load || contig_store {
            width = 4;
        } else {
            em.set_vec(None, false);
        }
    }
    if width == 1 {
        em.ranges.insert(Var::Lane, (0, numel as i64 - 1));
    }
    em.names.insert(Var::Lane, "lane".into());
    let threads = (numel / width) as u64;
    let wg = u64::from(tuning.workgroup_size.unwrap_or(256).min(caps.max_wg()).max(1));
    let workgroups = threads.div_ceil(wg);
    if numel > 0 {
        emit_wid(em, workgroups, caps);
        em.line(format!("let t = wid * {wg}u + lid;"));
        if grid_excess(workgroups, caps) || workgroups * wg != threads {
            em.line(format!("if (t >= {threads}u) {{ return; }}"));
        }
        if width == 4 {
            em.line("let lane = t * 4u;");
        } else {
            em.line("let lane = t;");
        }
        em.emit_closure(&roots, &|_| true)?;
        for s in stores {
            em.emit_store(s)?;
        }
    }
    Ok(Body {
        globals: vec![],
        params: PARAMS.to_string(),
        workgroup_size: [wg as u32, 1, 1],
        workgroups: if numel == 0 { 0 } else { workgroups },
        vectorized: width == 4,
        split: Some(GridSplit { unit: OuterUnit::Lanes, per: wg * width as u64, inner: 1 }),
        strategy: if width == 4 { "pointwise/vec4".into() } else { "pointwise".into() },
        summary: format!(
            "pointwise over {numel} lanes, {width} per thread, {wg} threads per workgroup, {workgroups} workgroups"
        ),
    })
}
