//! Run-time input checks and shape specialization: binding symbolic dims to the extents of the
//! inputs actually passed and substituting them into the graph.

use crate::error::Error;
use crate::ir::{Graph as IrGraph, Op};
use crate::shape::{Dim, Shape};
use crate::tensor::HostTensor;
use std::collections::HashMap;

/// Checks `inputs` against `g`'s declared inputs (count, dtype, rank, static extents, and that the
/// tensors are well formed) and binds every symbolic dim to the extent found there. The same
/// symbol must bind to one extent everywhere. Every failure is an [`Error::Input`] naming the
/// input, what was expected and what was given.
pub fn check_inputs(g: &IrGraph, inputs: &[HostTensor]) -> Result<HashMap<String, usize>, Error> {
    let names = g.input_names();
    if inputs.len() != g.inputs.len() {
        return Err(Error::Input(format!("expected {} input(s) {names:?}, got {}", g.inputs.len(), inputs.len())));
    }
    // Where each symbol was bound: (extent, input name).
    let mut bound: HashMap<String, (usize, &str)> = HashMap::new();
    for ((&id, name), t) in g.inputs.iter().zip(&names).zip(inputs) {
        let want = g.ty(id);
        if t.shape.iter().product::<usize>() != t.numel() {
            return Err(Error::Input(format!(
                "input {name:?}: tensor of shape {:?} holds {} elements",
                t.shape,
                t.numel()
            )));
        }
        if t.dtype() != want.dtype {
            return Err(Error::Input(format!("input {name:?}: expected dtype {}, got {}", want.dtype, t.dtype())));
        }
        let mismatch = || {
            Error::Input(format!(
                "input {name:?}: expected shape {} (rank {}), got {:?} (rank {})",
                want.shape,
                want.shape.rank(),
                t.shape,
                t.shape.len()
            ))
        };
        if t.shape.len() != want.shape.rank() {
            return Err(mismatch());
        }
        for (d, &got) in want.shape.dims().iter().zip(&t.shape) {
            match d {
                Dim::Static(n) if *n != got => return Err(mismatch()),
                Dim::Static(_) => {}
                Dim::Sym(s) => match bound.get(s.as_ref()) {
                    Some(&(n, by)) if n != got => {
                        return Err(Error::Input(format!(
                            "input {name:?}: symbol {s} is {got} here but input {by:?} bound it to {n}"
                        )));
                    }
                    Some(_) => {}
                    None => {
                        bound.insert(s.to_string(), (got, name));
                    }
                },
            }
        }
    }
    Ok(bound.into_iter().map(|(k, (n, _))| (k, n)).collect())
}

fn subst(s: &Shape, bindings: &HashMap<String, usize>) -> Result<Shape, Error> {
    s.dims()
        .iter()
        .map(|d| match d {
            Dim::Static(n) => Ok(Dim::Static(*n)),
            Dim::Sym(x) => crate::shape::eval_dim_map(d, bindings)
                .map(Dim::Static)
                .ok_or_else(|| Error::Input(format!("symbol {x} is not bound"))),
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Shape)
}

/// `g` with every symbolic dim (in node types and in shape attributes of reshape/expand) replaced
/// by its extent in `bindings`. The result is verified; an unbound symbol is an [`Error::Input`].
pub fn specialize(g: &IrGraph, bindings: &HashMap<String, usize>) -> Result<IrGraph, Error> {
    let mut out = g.clone();
    for node in &mut out.nodes {
        node.ty.shape = subst(&node.ty.shape, bindings)?;
        match &mut node.op {
            Op::Reshape(s) | Op::Expand(s) => *s = subst(s, bindings)?,
            _ => {}
        }
    }
    crate::verify::verify(&out)?;
    Ok(out)
}
