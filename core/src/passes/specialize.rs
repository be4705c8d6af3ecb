//! `specialize`: replaces named symbolic dimensions by values, in input types and in op
//! attributes (reshape and expand targets), and re-infers every type. Symbols naming expressions
//! ([`crate::shape::Poly`], e.g. `batch*seq`) get their value once all their symbols are bound.
//! Symbols without a value are left symbolic.

use super::rewrite::Rewriter;
use crate::error::Error;
use crate::ir::{Graph, Op, TensorType};
use crate::shape::{Dim, Shape};
use std::collections::BTreeMap;

/// The pass name.
pub const NAME: &str = "specialize";

fn subst(s: &Shape, values: &BTreeMap<String, usize>) -> Shape {
    Shape(
        s.0.iter()
            .map(|d| match d {
                Dim::Sym(_) => {
                    crate::shape::eval_dim(d, &|x| values.get(x).copied()).map_or_else(|| d.clone(), Dim::Static)
                }
                Dim::Static(_) => d.clone(),
            })
            .collect(),
    )
}

/// Replaces every symbol named in `values` by its value and re-infers types. Fails when a value
/// makes the graph ill-typed (e.g. two symbols that must agree get different values).
pub fn specialize(g: &Graph, values: &BTreeMap<String, usize>) -> Result<Graph, Error> {
    let mut rw = Rewriter::new(g);
    for (id, node) in g.iter() {
        match &node.op {
            Op::Input { .. } => {
                rw.copy_input_as(id, TensorType::new(node.ty.dtype, subst(&node.ty.shape, values)))?;
            }
            Op::Reshape(s) => {
                rw.copy_with_op(id, Op::Reshape(subst(s, values)))?;
            }
            Op::Expand(s) => {
                rw.copy_with_op(id, Op::Expand(subst(s, values)))?;
            }
            _ => {
                rw.copy(id)?;
            }
        }
    }
    rw.finish()
}
