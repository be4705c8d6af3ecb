//! The verifier: checks every structural and typing invariant of a [`Graph`] and reports every
//! problem it finds, not just the first.

use crate::error::Error;
use crate::infer::infer;
use crate::ir::{Graph, Op, TensorType};

/// Verifies `g`. Invariants: operands precede their users; every input node is listed in
/// `g.inputs` exactly once and vice versa; outputs name existing nodes; output names are unique;
/// every node's recorded type equals the inferred one.
pub fn verify(g: &Graph) -> Result<(), Error> {
    let mut errs = Vec::new();
    let n = g.nodes.len();
    for (id, node) in g.iter() {
        let mut ok = true;
        for &i in &node.inputs {
            if i.index() >= id.index() {
                errs.push(format!("{id} ({}) uses {i}, which does not come before it", node.op.name()));
                ok = false;
            }
        }
        match &node.op {
            Op::Input { name } if !g.inputs.contains(&id) => {
                errs.push(format!("{id} is input {name:?} but is not listed in the graph's inputs"));
            }
            Op::Input { .. } => {}
            op if ok => {
                let tys: Vec<&TensorType> = node.inputs.iter().map(|&i| g.ty(i)).collect();
                match infer(op, &tys) {
                    Ok(t) if t == node.ty => {}
                    Ok(t) => errs.push(format!("{id} ({}) is recorded as {} but infers to {t}", op.name(), node.ty)),
                    Err(e) => errs.push(format!("{id} ({}): {e}", op.name())),
                }
            }
            _ => {}
        }
    }
    let mut seen = std::collections::HashSet::new();
    for &i in &g.inputs {
        if i.index() >= n || !matches!(g.node(i).op, Op::Input { .. }) {
            errs.push(format!("graph input {i} is not an input node"));
        }
        if !seen.insert(i) {
            errs.push(format!("graph input {i} is listed twice"));
        }
    }
    let mut names = std::collections::HashSet::new();
    for o in &g.outputs {
        if o.node.index() >= n {
            errs.push(format!("output {:?} names {}, which does not exist", o.name, o.node));
        }
        if !names.insert(&o.name) {
            errs.push(format!("output name {:?} is used twice", o.name));
        }
    }
    if errs.is_empty() { Ok(()) } else { Err(Error::Verify(errs)) }
}
