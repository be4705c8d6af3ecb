//! `dce`: dead-code elimination. Keeps the nodes some output needs, and every input (the run-time
//! signature of a graph never changes).

use super::rewrite::Rewriter;
use crate::error::Error;
use crate::ir::{Graph, Op};

/// The pass name.
pub const NAME: &str = "dce";

/// Drops every node that no output needs; inputs are always kept.
pub fn dce(g: &Graph) -> Result<Graph, Error> {
    let mut live = vec![false; g.nodes.len()];
    for o in &g.outputs {
        if let Some(l) = live.get_mut(o.node.index()) {
            *l = true;
        }
    }
    for i in (0..g.nodes.len()).rev() {
        if live[i] {
            for inp in &g.nodes[i].inputs {
                if let Some(l) = live.get_mut(inp.index()) {
                    *l = true;
                }
            }
        }
    }
    let mut rw = Rewriter::new(g);
    for (id, node) in g.iter() {
        if live[id.index()] || matches!(node.op, Op::Input { .. }) {
            rw.copy(id)?;
        }
    }
    rw.finish()
}
