//! Pointwise bodies in PTX: the launch of [`super::super::pointwise::plan`] (the CUDA C++
//! renderer's: block, lane-group width, guard), one lane group per thread.

use std::collections::HashMap;

use sinter_core::kernel::{Kernel, Store, Var};

use super::super::emit::Emitter;
use super::super::index::needs_wide;
use super::super::pointwise::{body, plan};
use super::super::{CudaCaps, Rendered, Tuning};
use super::expr::{Lower, check};
use super::{Asm, Class, Refusal, module, refuse};

/// Renders a pointwise body of `numel` lanes (see [`super::render`]).
pub(crate) fn render(
    k: &Kernel,
    numel: usize,
    stores: &[Store],
    caps: &CudaCaps,
    t: &Tuning,
) -> Result<Rendered, Refusal> {
    if needs_wide(k) {
        return refuse("64-bit index arithmetic");
    }
    if numel == 0 {
        return refuse("an empty launch");
    }
    let mut em = Emitter::new(k, false);
    // A tuning the C++ renderer would refuse is refused here too; it then says why.
    let p = plan(&mut em, numel, stores, caps, t).map_err(|e| Refusal(format!("tuning: {e}")))?;
    if p.groups > 1 {
        return refuse(format!("{} lane groups per thread", p.groups));
    }
    check(k, &p.roots, stores, &[Var::Lane])?;
    let mut asm = Asm::new();
    let base = asm.params(k);
    let (bid, tid, lane) = (asm.reg(Class::B32), asm.reg(Class::B32), asm.reg(Class::B32));
    asm.op(format!("mov.u32 {bid}, %ctaid.x"));
    asm.op(format!("mov.u32 {tid}, %tid.x"));
    asm.op(format!("mad.lo.u32 {lane}, {bid}, {}, {tid}", p.block));
    let lane0 = if p.width == 1 {
        lane
    } else {
        let l0 = asm.reg(Class::B32);
        asm.op(format!("mul.lo.u32 {l0}, {lane}, {}", p.width));
        l0
    };
    let done = asm.label();
    if p.guard {
        let g = asm.reg(Class::Pred);
        asm.op(format!("setp.ge.u32 {g}, {lane0}, {numel}"));
        asm.op(format!("@{g} bra {done}"));
    }
    {
        let mut low = Lower::new(&em, &mut asm, base, (Var::Lane, p.width), HashMap::new());
        low.start_group(&lane0);
        low.exprs(&p.roots)?;
        for s in stores {
            low.store(s)?;
        }
    }
    asm.place(&done);
    asm.op("ret");
    let b = body(numel, &p);
    let what = if p.width == 1 { "one lane".to_string() } else { format!("{} consecutive lanes", p.width) };
    let comments = vec![b.summary.clone(), format!("{what} per thread: {numel} lanes")];
    let source = module(k, caps, &comments, p.block, &asm);
    Ok(b.into_rendered(k, caps, t, source, " ptx"))
}
