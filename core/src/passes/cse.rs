//! `cse`: common-subexpression elimination. Two nodes are the same when they have the same op
//! (with every attribute) and the same operands; constants are the same when their dtype, shape
//! and bytes are equal (so `0.0` and `-0.0`, or NaNs with different payloads, stay apart).
//! Inputs are never merged.

use super::rewrite::Rewriter;
use crate::error::Error;
use crate::ir::{Graph, NodeId, Op};
use std::collections::HashMap;

/// The pass name.
pub const NAME: &str = "cse";

#[derive(PartialEq, Eq, Hash)]
enum Key {
    /// Equal bytes (by a cryptographic hash, so big constants are not copied).
    Constant {
        dtype: crate::DType,
        shape: Vec<usize>,
        hash: [u8; 32],
    },
    Op {
        op: String,
        inputs: Vec<NodeId>,
    },
}

/// Merges nodes that compute the same value.
pub fn cse(g: &Graph) -> Result<Graph, Error> {
    let mut rw = Rewriter::new(g);
    let mut seen: HashMap<Key, NodeId> = HashMap::new();
    for (id, node) in g.iter() {
        let key = match &node.op {
            Op::Input { .. } => {
                rw.copy(id)?;
                continue;
            }
            Op::Constant(t) => {
                Key::Constant { dtype: t.dtype(), shape: t.shape.clone(), hash: crate::digest::digest(t) }
            }
            // The Debug form prints every attribute exactly (floats round-trip).
            op => Key::Op { op: format!("{op:?}"), inputs: rw.mapped_inputs(id)? },
        };
        match seen.get(&key) {
            Some(&prev) => rw.replace(id, prev),
            None => {
                let new = rw.copy(id)?;
                seen.insert(key, new);
            }
        }
    }
    rw.finish()
}
