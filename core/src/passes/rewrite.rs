//! The rewriter every pass uses: walks the old graph in topological order and builds a new one,
//! mapping old node ids to new ones. A pass either copies a node, emits replacement nodes (which
//! take the origin of the node they replace), or maps the old node onto an existing new node.

use crate::error::Error;
use crate::infer::infer;
use crate::ir::{Graph, Node, NodeId, Op, Origin, TensorType};
use crate::tensor::HostTensor;
use std::sync::Arc;

/// Builds a new graph from an old one. Every node a later node or an output refers to must be
/// mapped (copied, replaced or aliased) before it is used; inputs must always be mapped.
#[derive(Debug)]
pub struct Rewriter<'a> {
    old: &'a Graph,
    new: Graph,
    map: Vec<Option<NodeId>>,
}

impl<'a> Rewriter<'a> {
    /// A rewriter over `old` with an empty new graph.
    pub fn new(old: &'a Graph) -> Rewriter<'a> {
        Rewriter { old, new: Graph::default(), map: vec![None; old.nodes.len()] }
    }

    /// The graph being rewritten.
    pub fn old(&self) -> &'a Graph {
        self.old
    }

    /// The new graph built so far.
    pub fn new_graph(&self) -> &Graph {
        &self.new
    }

    /// The new node an old node was mapped to, or an error if it was not mapped (yet).
    pub fn mapped(&self, old: NodeId) -> Result<NodeId, Error> {
        self.map.get(old.index()).copied().flatten().ok_or_else(|| {
            Error::Verify(vec![format!("rewrite: node {old} is used before it was mapped (or was dropped)")])
        })
    }

    /// The new ids of an old node's operands.
    pub fn mapped_inputs(&self, old: NodeId) -> Result<Vec<NodeId>, Error> {
        self.old.node(old).inputs.iter().map(|&i| self.mapped(i)).collect()
    }

    /// Records that old node `old` is now computed by new node `new`.
    pub fn replace(&mut self, old: NodeId, new: NodeId) {
        self.map[old.index()] = Some(new);
    }

    /// Copies an old node with its operands mapped, re-inferring its type, and records the mapping.
    /// Input nodes keep their type (see [`Rewriter::copy_input_as`] to change it).
    pub fn copy(&mut self, old: NodeId) -> Result<NodeId, Error> {
        let node = self.old.node(old);
        if matches!(node.op, Op::Input { .. }) {
            return self.copy_input_as(old, node.ty.clone());
        }
        let inputs = self.mapped_inputs(old)?;
        let id = self.emit(node.op.clone(), inputs, &node.origin)?;
        self.replace(old, id);
        Ok(id)
    }

    /// Copies an old node with a different op (same operands, same origin), re-inferring the type.
    pub fn copy_with_op(&mut self, old: NodeId, op: Op) -> Result<NodeId, Error> {
        let inputs = self.mapped_inputs(old)?;
        let origin = self.old.node(old).origin.clone();
        let id = self.emit(op, inputs, &origin)?;
        self.replace(old, id);
        Ok(id)
    }

    /// Copies an old input node with a new type. Its position in the graph's input list is kept.
    pub fn copy_input_as(&mut self, old: NodeId, ty: TensorType) -> Result<NodeId, Error> {
        let node = self.old.node(old);
        if !matches!(node.op, Op::Input { .. }) {
            return Err(Error::Verify(vec![format!("rewrite: {old} ({}) is not an input", node.op.name())]));
        }
        let id = self.new.push(Node { op: node.op.clone(), inputs: vec![], ty, origin: node.origin.clone() });
        self.replace(old, id);
        Ok(id)
    }

    /// Appends a new node (operands are new ids), inferring its type, with the given origin.
    pub fn emit(&mut self, op: Op, inputs: Vec<NodeId>, origin: &Origin) -> Result<NodeId, Error> {
        let tys: Vec<&TensorType> = inputs.iter().map(|&i| self.new.ty(i)).collect();
        let ty = infer(&op, &tys).map_err(|msg| Error::build(op.name(), &tys, msg))?;
        Ok(self.new.push(Node { op, inputs, ty, origin: origin.clone() }))
    }

    /// Appends a constant node with the given origin.
    pub fn emit_constant(&mut self, t: HostTensor, origin: &Origin) -> Result<NodeId, Error> {
        self.emit(Op::Constant(Arc::new(t)), vec![], origin)
    }

    /// Finishes: maps the input list and the outputs, and verifies the new graph.
    pub fn finish(mut self) -> Result<Graph, Error> {
        self.new.inputs = self.old.inputs.iter().map(|&i| self.mapped(i)).collect::<Result<_, _>>()?;
        let mut outputs = Vec::with_capacity(self.old.outputs.len());
        for o in &self.old.outputs {
            let mut o = o.clone();
            o.node = self.mapped(o.node)?;
            outputs.push(o);
        }
        self.new.outputs = outputs;
        crate::verify::verify(&self.new)?;
        Ok(self.new)
    }
}

/// Copies every node unchanged: the identity rewrite (the new graph equals the old one).
pub fn copy_all(g: &Graph) -> Result<Graph, Error> {
    let mut rw = Rewriter::new(g);
    for (id, _) in g.iter() {
        rw.copy(id)?;
    }
    rw.finish()
}

/// The constant held by a node, if it is one.
pub fn as_constant(g: &Graph, id: NodeId) -> Option<&Arc<HostTensor>> {
    match &g.node(id).op {
        Op::Constant(t) => Some(t),
        _ => None,
    }
}
