//! Re-typing a captured graph for one call's input signature.

use super::Signature;
use crate::error::Error;
use crate::ir::{Graph as IrGraph, Op};
use crate::shape::{Dim, Shape};
use crate::tensor::HostTensor;
use std::collections::BTreeMap;

/// Re-types the captured graph for a signature: symbolic dims are bound, and where a static dim
/// or a dtype differs from the captured one, types are re-inferred through the graph (scalar
/// float constants follow the dtype of the tensor they combine with). Ops whose attributes bake in
/// a shape (reshape, expand, slice, pad) fail with an error naming the node if the new shape does
/// not fit.
pub fn retype(g: &IrGraph, sig: &Signature) -> Result<IrGraph, Error> {
    if sig.0.len() != g.inputs.len() {
        return Err(Error::Input(format!("expected {} inputs, got {}", g.inputs.len(), sig.0.len())));
    }
    let names = g.input_names();
    let mut bind: BTreeMap<String, usize> = BTreeMap::new();
    let mut same = true;
    for (k, ((&id, (dt, shape)), name)) in g.inputs.iter().zip(&sig.0).zip(&names).enumerate() {
        let want = g.ty(id);
        if want.shape.rank() != shape.len() {
            return Err(Error::Input(format!(
                "input {k} {name:?}: expected rank {}, got {:?}",
                want.shape.rank(),
                shape
            )));
        }
        if *dt != want.dtype {
            same = false;
        }
        for (d, &n) in want.shape.dims().iter().zip(shape) {
            match d {
                Dim::Sym(s) => match bind.insert(s.to_string(), n) {
                    Some(prev) if prev != n => {
                        return Err(Error::Input(format!("symbol {s} bound to both {prev} and {n} (input {name:?})")));
                    }
                    _ => {}
                },
                Dim::Static(m) if *m != n => same = false,
                Dim::Static(_) => {}
            }
        }
    }
    let g = if bind.is_empty() { g.clone() } else { crate::passes::specialize(g, &bind)? };
    if same {
        return Ok(g);
    }
    // Re-infer every node with the new input types.
    let mut out = IrGraph::default();
    let mut map = Vec::with_capacity(g.nodes.len());
    let mut input_k = 0;
    for (id, n) in g.iter() {
        let new_id = match &n.op {
            Op::Input { name } => {
                let (dt, shape) = &sig.0[input_k];
                input_k += 1;
                let nid = out.add_input(name, *dt, Shape::new(shape));
                out.nodes[nid.index()].origin = n.origin.clone();
                nid
            }
            op => {
                let mut ins: Vec<crate::ir::NodeId> = n.inputs.iter().map(|i| map[i.index()]).collect();
                if op.is_elementwise() {
                    let float = ins
                        .iter()
                        .map(|&i| out.ty(i))
                        .find(|t| t.dtype.is_float() && t.shape.rank() > 0)
                        .map(|t| t.dtype);
                    if let Some(fd) = float {
                        for i in ins.iter_mut() {
                            let t = out.ty(*i).clone();
                            if t.shape.rank() == 0
                                && t.dtype.is_float()
                                && t.dtype != fd
                                && let Op::Constant(c) = &out.node(*i).op
                            {
                                let v = c.to_f64_vec();
                                let c2 = HostTensor::from_f64(fd, vec![], &v);
                                *i = out.add(
                                    Op::Constant(std::sync::Arc::new(c2)),
                                    vec![],
                                    Some(out.node(*i).origin.clone()),
                                )?;
                            }
                        }
                    }
                }
                out.add(op.clone(), ins, Some(n.origin.clone())).map_err(|e| match e {
                    Error::Build { op, operands, msg } => {
                        Error::Build { op: format!("{op} at {id} (captured for other input types)"), operands, msg }
                    }
                    other => other,
                })?
            }
        };
        map.push(new_id);
    }
    for o in &g.outputs {
        out.add_output(&o.name, map[o.node.index()]);
    }
    Ok(out)
}
