//! Graph-to-graph passes. Each pass is a pure function `fn(&Graph) -> Result<Graph, Error>` that
//! builds a new graph in topological order with a [`Rewriter`]; nodes it creates take the
//! [`Origin`](crate::ir::Origin) of the node they replace, so every later kernel maps back to the
//! user's ops. Every pass's output is verified.
//!
//! The default [`pipeline`]: `decompose` (composites to primitives), `algebraic` (exact
//! simplifications), `constant_fold`, `cse`, `dce`. [`specialize()`] takes symbol values and is
//! run by the caller before the pipeline when shapes are symbolic. [`pipeline_for`] puts
//! `autocast` (mixed precision, [`Precision`]) first when a lower precision is asked for.
//!
//! ```
//! use sinter_core::prelude::*;
//! let g = Graph::new();
//! let x = g.input("x", DType::F32, [4, 8]);
//! g.output(&x.softmax(-1));
//! let steps = sinter_core::passes::run_pipeline(&g.build().unwrap()).unwrap();
//! assert_eq!(steps[0].0, "decompose");
//! ```

mod algebraic;
mod autocast;
mod constant_fold;
mod cse;
mod dce;
mod decompose;
mod rewrite;
mod specialize;

#[cfg(test)]
mod tests;

pub use algebraic::algebraic;
pub use autocast::{Precision, autocast, autocast_bf16, autocast_f16};
pub use constant_fold::{FOLD_LIMIT, constant_fold, constant_fold_outer};
pub use cse::cse;
pub use dce::dce;
pub use decompose::decompose;
pub use rewrite::{Rewriter, as_constant, copy_all};
pub use specialize::specialize;

/// Name of the `algebraic` pass.
pub const ALGEBRAIC: &str = algebraic::NAME;
/// Name of the `autocast` pass.
pub const AUTOCAST: &str = autocast::NAME;
/// Name of the `constant_fold` pass.
pub const CONSTANT_FOLD: &str = constant_fold::NAME;
/// Name of the `cse` pass.
pub const CSE: &str = cse::NAME;
/// Name of the `dce` pass.
pub const DCE: &str = dce::NAME;
/// Name of the `decompose` pass.
pub const DECOMPOSE: &str = decompose::NAME;
/// Name of the `specialize` pass.
pub const SPECIALIZE: &str = specialize::NAME;

use crate::error::Error;
use crate::ir::Graph;

/// A named pass.
#[derive(Clone, Copy, Debug)]
pub struct Pass {
    /// The pass's name (as printed by `sinter explain` and the viewer).
    pub name: &'static str,
    /// The pass itself.
    pub run: fn(&Graph) -> Result<Graph, Error>,
}

/// The default passes, in order.
pub fn pipeline() -> Vec<Pass> {
    vec![
        Pass { name: DECOMPOSE, run: decompose },
        Pass { name: ALGEBRAIC, run: algebraic },
        Pass { name: CONSTANT_FOLD, run: constant_fold },
        Pass { name: CSE, run: cse },
        Pass { name: DCE, run: dce },
    ]
}

/// [`pipeline_for`] of a dynamic compile (`crate::kernel::dynamic`): `constant_fold` keeps
/// broadcasts along the outermost dimension ([`constant_fold_outer`]).
pub fn pipeline_for_dynamic(precision: Precision) -> Vec<Pass> {
    let mut passes = pipeline_for(precision);
    for p in &mut passes {
        if p.name == CONSTANT_FOLD {
            p.run = constant_fold_outer;
        }
    }
    passes
}

/// The passes a compile at `precision` runs: the default [`pipeline`], preceded by `autocast`
/// (to bf16 or f16) unless the precision is f32. Autocast goes first so that `decompose` sees an
/// attention's low dtype (and keeps its softmax in f32) and `constant_fold` folds the casts of
/// constant weights.
pub fn pipeline_for(precision: Precision) -> Vec<Pass> {
    let mut passes = pipeline();
    match precision {
        Precision::F32 => {}
        Precision::BF16 => passes.insert(0, Pass { name: AUTOCAST, run: autocast_bf16 }),
        Precision::F16 => passes.insert(0, Pass { name: AUTOCAST, run: autocast_f16 }),
    }
    passes
}

/// Runs `passes` in order on `g` and returns the graph after each one, named by its pass.
pub fn run_passes(g: &Graph, passes: &[Pass]) -> Result<Vec<(&'static str, Graph)>, Error> {
    crate::verify::verify(g)?;
    let mut steps: Vec<(&'static str, Graph)> = Vec::with_capacity(passes.len());
    for p in passes {
        let prev = steps.last().map_or(g, |s| &s.1);
        let next = (p.run)(prev).map_err(|e| pass_error(p.name, e))?;
        steps.push((p.name, next));
    }
    Ok(steps)
}

/// Runs the default [`pipeline`] and returns the graph after each pass.
pub fn run_pipeline(g: &Graph) -> Result<Vec<(&'static str, Graph)>, Error> {
    run_passes(g, &pipeline())
}

/// Runs the default [`pipeline`] and returns the final graph.
pub fn optimize(g: &Graph) -> Result<Graph, Error> {
    let mut steps = run_pipeline(g)?;
    match steps.pop() {
        Some((_, last)) => Ok(last),
        None => Ok(g.clone()),
    }
}

fn pass_error(pass: &str, e: Error) -> Error {
    match e {
        Error::Verify(v) => Error::Verify(v.into_iter().map(|m| format!("after pass {pass}: {m}")).collect()),
        Error::Unsupported(m) => Error::Unsupported(format!("pass {pass}: {m}")),
        other => other,
    }
}
