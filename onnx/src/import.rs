//! The importer: walks the ONNX graph in topological order and lowers every node to sinter IR
//! ops (the private `ops` modules), folding constants as it goes.
//!
//! Values known at import time are tracked per IR node: initializers, `Constant` nodes, shapes of
//! statically shaped tensors (`Shape`, `Size`), and everything computed from those alone (folded
//! by running the new nodes on the CPU reference). Inputs whose values fix a shape (see
//! [`crate::Model::graph_for_inputs`]) are *assumed* known: their values feed shape computations
//! but every node computed from them still stays in the graph.
//!
//! Shapes of tensors with symbolic dims are tracked as symbolic values (`symval`): integer
//! vectors of expressions of the symbols, so `Shape → Gather → Concat → Reshape` chains give
//! typed, symbolic results.

use crate::error::OnnxError;
use crate::model::{Init, Model};
use crate::proto::{GraphProto, NodeProto};
use sinter_core::ir::{Node, Origin};
use sinter_core::{DType, Dim, HostTensor, IrGraph, NodeId, Op, Shape, TensorType};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

mod cx;
mod symval;

pub(crate) use cx::Cx;
pub(crate) use symval::SymVal;

/// Result type of the importer.
pub(crate) type R<T> = Result<T, OnnxError>;

/// Folding computes at most this many elements per value at import time.
pub const FOLD_LIMIT: usize = 1 << 22;

/// The most IR nodes an imported graph may hold: unrolling Loops and Scans (the IR has no
/// control flow) stops with an error naming the node there, before time and memory run out.
pub const MAX_GRAPH_NODES: usize = 1 << 20;

/// The largest constant (in elements) the importer builds from shapes or attribute values.
pub const MAX_CONST_ELEMS: usize = 1 << 24;

/// One run-time input as the caller specializes it.
#[derive(Clone, Debug)]
pub(crate) struct InputSpec {
    pub dtype: DType,
    pub shape: Shape,
    /// The tensor, when the caller passed values (used only where a shape needs a value).
    pub value: Option<HostTensor>,
}

/// Import state shared by all nodes.
pub(crate) struct Importer<'m> {
    pub model: &'m Model,
    pub g: IrGraph,
    /// Values known at import time.
    pub known: HashMap<NodeId, Arc<HostTensor>>,
    /// Nodes whose known value derives from a run-time input's value.
    pub assumed: HashSet<NodeId>,
    /// Small integer values known as expressions of the symbolic dims (shapes of symbolic
    /// tensors and what is computed from them; see `symval`).
    pub symvals: HashMap<NodeId, SymVal>,
    /// Name scopes, innermost last (subgraphs push one).
    pub scopes: Vec<HashMap<String, NodeId>>,
    /// ONNX value names whose values some op needs at import time.
    pub needed: HashSet<String>,
}

/// Describes a node for error messages: its name, or its index and first output.
pub(crate) fn node_desc(idx: usize, n: &NodeProto) -> String {
    match n.name.as_deref() {
        Some(s) if !s.is_empty() => format!("node {s:?}"),
        _ => format!("node #{idx} {:?}", n.output.first().map(String::as_str).unwrap_or("")),
    }
}

/// Topologically sorts nodes (a stable sort: already ordered graphs keep their order). Names not
/// produced by any node (inputs, initializers, outer-scope values) count as available.
pub(crate) fn topo_order(nodes: &[NodeProto]) -> R<Vec<usize>> {
    let mut producer: HashMap<&str, usize> = HashMap::new();
    for (i, n) in nodes.iter().enumerate() {
        for o in &n.output {
            if !o.is_empty() {
                producer.insert(o.as_str(), i);
            }
        }
    }
    let deps = |n: &NodeProto| -> Vec<usize> {
        let mut d: Vec<usize> = n.input.iter().filter_map(|i| producer.get(i.as_str()).copied()).collect();
        // Values used inside subgraph attributes are dependencies too.
        for a in &n.attribute {
            for g in a.g.iter().chain(a.graphs.iter()) {
                let mut names = HashSet::new();
                subgraph_outer_names(g, &mut names);
                d.extend(names.iter().filter_map(|x| producer.get(x.as_str()).copied()));
            }
        }
        d
    };
    let in_order = nodes.iter().enumerate().all(|(i, n)| deps(n).iter().all(|&d| d < i));
    if in_order {
        return Ok((0..nodes.len()).collect());
    }
    let mut state = vec![0u8; nodes.len()];
    let mut order = Vec::with_capacity(nodes.len());
    for root in 0..nodes.len() {
        if state[root] != 0 {
            continue;
        }
        let mut stack = vec![(root, false)];
        while let Some((i, done)) = stack.pop() {
            if done {
                state[i] = 2;
                order.push(i);
                continue;
            }
            if state[i] == 2 {
                continue;
            }
            if state[i] == 1 {
                return Err(OnnxError::malformed(node_desc(i, &nodes[i]), "the graph has a cycle"));
            }
            state[i] = 1;
            stack.push((i, true));
            for d in deps(&nodes[i]) {
                if d == i || state[d] == 1 {
                    return Err(OnnxError::malformed(node_desc(i, &nodes[i]), "the graph has a cycle"));
                }
                if state[d] == 0 {
                    stack.push((d, false));
                }
            }
        }
    }
    Ok(order)
}

/// Checks the static single assignment of a graph's value names: no two nodes write the same
/// output name (the importer would silently keep the last), and no node output redefines a graph
/// input or an initializer of the same graph (it would silently shadow it).
pub(crate) fn check_names(g: &GraphProto) -> R<()> {
    let mut producer: HashMap<&str, usize> = HashMap::new();
    let inputs: HashSet<&str> = g.input.iter().filter_map(|i| i.name.as_deref()).collect();
    let inits: HashSet<&str> = g.initializer.iter().filter_map(|t| t.name.as_deref()).collect();
    for (i, n) in g.node.iter().enumerate() {
        for o in n.output.iter().filter(|o| !o.is_empty()) {
            let kind = if inits.contains(o.as_str()) {
                Some("an initializer")
            } else if inputs.contains(o.as_str()) {
                Some("a graph input")
            } else {
                None
            };
            if let Some(kind) = kind {
                return Err(OnnxError::malformed(
                    format!("{} ({})", node_desc(i, n), n.op_type.as_deref().unwrap_or("")),
                    format!("output {o:?} redefines {kind} of the same name"),
                ));
            }
            if let Some(prev) = producer.insert(o.as_str(), i) {
                let p = &g.node[prev];
                return Err(OnnxError::malformed(
                    format!("value {o:?}"),
                    format!(
                        "written by two nodes: {} ({}) and {} ({})",
                        node_desc(prev, p),
                        p.op_type.as_deref().unwrap_or(""),
                        node_desc(i, n),
                        n.op_type.as_deref().unwrap_or("")
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// Names a subgraph reads from enclosing scopes.
pub(crate) fn subgraph_outer_names(g: &GraphProto, out: &mut HashSet<String>) {
    let mut local: HashSet<&str> = HashSet::new();
    for i in &g.input {
        local.insert(i.name.as_deref().unwrap_or(""));
    }
    for t in &g.initializer {
        local.insert(t.name.as_deref().unwrap_or(""));
    }
    for n in &g.node {
        for o in &n.output {
            local.insert(o);
        }
    }
    for n in &g.node {
        for i in &n.input {
            if !i.is_empty() && !local.contains(i.as_str()) {
                out.insert(i.clone());
            }
        }
        for a in &n.attribute {
            for sg in a.g.iter().chain(a.graphs.iter()) {
                let mut inner = HashSet::new();
                subgraph_outer_names(sg, &mut inner);
                out.extend(inner.into_iter().filter(|x| !local.contains(x.as_str())));
            }
        }
    }
    for o in &g.output {
        let n = o.name.as_deref().unwrap_or("");
        if !n.is_empty() && !local.contains(n) {
            out.insert(n.to_string());
        }
    }
}

/// Computes which ONNX value names some op needs the value of at import time.
fn needed_values(nodes: &[NodeProto], order: &[usize], opsets: &HashMap<String, i64>) -> HashSet<String> {
    let mut needed: HashSet<String> = HashSet::new();
    let mut producer: HashMap<&str, usize> = HashMap::new();
    for (i, n) in nodes.iter().enumerate() {
        for o in &n.output {
            producer.insert(o.as_str(), i);
        }
    }
    for &i in order {
        let n = &nodes[i];
        let op = n.op_type.as_deref().unwrap_or("");
        let opset = domain_opset(opsets, n.domain.as_deref());
        for &k in crate::ops::value_inputs(op, opset) {
            if let Some(name) = n.input.get(k)
                && !name.is_empty()
            {
                needed.insert(name.clone());
            }
        }
    }
    // Propagate backwards: a needed value needs its producer's inputs (except where the producer
    // only reads shapes).
    for &i in order.iter().rev() {
        let n = &nodes[i];
        if !n.output.iter().any(|o| needed.contains(o)) {
            continue;
        }
        let op = n.op_type.as_deref().unwrap_or("");
        if matches!(op, "Shape" | "Size" | "EyeLike") {
            continue;
        }
        for inp in &n.input {
            if !inp.is_empty() {
                needed.insert(inp.clone());
            }
        }
        // Values a subgraph (If/Loop/Scan body) reads from this scope feed the outputs too.
        for a in &n.attribute {
            for g in a.g.iter().chain(a.graphs.iter()) {
                let mut outer = HashSet::new();
                subgraph_outer_names(g, &mut outer);
                needed.extend(outer);
            }
        }
    }
    let _ = producer;
    needed
}

/// The opset version for a node's domain.
pub(crate) fn domain_opset(opsets: &HashMap<String, i64>, domain: Option<&str>) -> i64 {
    let d = match domain {
        None | Some("") | Some("ai.onnx") => "",
        Some(d) => d,
    };
    opsets.get(d).copied().unwrap_or(if d.is_empty() { 1 } else { 0 })
}

/// Imports the model's main graph for the given input specializations.
pub(crate) fn import(model: &Model, specs: Vec<InputSpec>) -> R<IrGraph> {
    let gp = model.graph_proto();
    check_names(gp)?;
    let order = topo_order(&gp.node)?;
    let needed = needed_values(&gp.node, &order, &model.opsets);
    let mut imp = Importer {
        model,
        g: IrGraph::default(),
        known: HashMap::new(),
        assumed: HashSet::new(),
        symvals: HashMap::new(),
        scopes: vec![HashMap::new()],
        needed,
    };
    for (info, spec) in model.inputs().iter().zip(specs) {
        let id = imp.g.add_input(&info.name, spec.dtype, spec.shape);
        if let Some(v) = spec.value
            && imp.needed.contains(&info.name)
        {
            imp.known.insert(id, Arc::new(v));
            imp.assumed.insert(id);
        }
        imp.scopes[0].insert(info.name.clone(), id);
    }
    imp.run_nodes(&gp.node, &order, &model.opsets)?;
    for o in &gp.output {
        let name = o.name.clone().unwrap_or_default();
        let id = imp.lookup(&name).ok_or_else(|| {
            OnnxError::malformed(format!("output {name:?}"), "no node or input produces this graph output")
        })?;
        let info = crate::model::io_info(o);
        if let Ok(d) = info.dtype {
            let got = imp.g.ty(id).dtype;
            if got != d {
                return Err(OnnxError::malformed(
                    format!("output {name:?}"),
                    format!("the model declares {d} but the graph computes {got}"),
                ));
            }
        }
        imp.g.add_output(&name, id);
    }
    let g = dce(&imp.g);
    sinter_core::verify::verify(&g)?;
    Ok(g)
}

/// Drops nodes no output needs (inputs always stay) and renumbers.
pub(crate) fn dce(g: &IrGraph) -> IrGraph {
    let mut live = vec![false; g.nodes.len()];
    for o in &g.outputs {
        live[o.node.index()] = true;
    }
    for &i in &g.inputs {
        live[i.index()] = true;
    }
    for i in (0..g.nodes.len()).rev() {
        if live[i] {
            for inp in &g.nodes[i].inputs {
                live[inp.index()] = true;
            }
        }
    }
    let mut map = vec![NodeId(0); g.nodes.len()];
    let mut out = IrGraph::default();
    for (i, n) in g.nodes.iter().enumerate() {
        if !live[i] {
            continue;
        }
        let mut n = n.clone();
        for x in n.inputs.iter_mut() {
            *x = map[x.index()];
        }
        map[i] = out.push(n);
    }
    out.inputs = g.inputs.iter().map(|i| map[i.index()]).collect();
    out.outputs =
        g.outputs.iter().map(|o| sinter_core::ir::Output { name: o.name.clone(), node: map[o.node.index()] }).collect();
    out
}

impl<'m> Importer<'m> {
    /// The node a name refers to: innermost scope first, then the initializers (materialized as
    /// constants on first use).
    pub fn lookup(&mut self, name: &str) -> Option<NodeId> {
        for s in self.scopes.iter().rev() {
            if let Some(&id) = s.get(name) {
                return Some(id);
            }
        }
        match self.model.initializers.get(name) {
            Some(Init::Tensor(t)) => {
                let t = t.clone();
                let id = self.constant(t, Origin { node: 0, op: Arc::from("initializer") });
                self.scopes[0].insert(name.to_string(), id);
                Some(id)
            }
            _ => None,
        }
    }

    /// Adds a constant node and records its value.
    pub fn constant(&mut self, t: Arc<HostTensor>, origin: Origin) -> NodeId {
        let ty = TensorType::new(t.dtype(), Shape::new(&t.shape));
        let id = self.g.push(Node { op: Op::Constant(t.clone()), inputs: vec![], ty, origin });
        self.known.insert(id, t);
        id
    }

    /// Lowers `nodes` (in `order`) into the graph, binding outputs in the innermost scope.
    pub fn run_nodes(&mut self, nodes: &[NodeProto], order: &[usize], opsets: &HashMap<String, i64>) -> R<()> {
        for &idx in order {
            self.run_node(idx, &nodes[idx], opsets)?;
        }
        Ok(())
    }

    fn run_node(&mut self, idx: usize, node: &NodeProto, opsets: &HashMap<String, i64>) -> R<()> {
        let op = node.op_type.clone().unwrap_or_default();
        let desc = node_desc(idx, node);
        let mut ins = Vec::with_capacity(node.input.len());
        for name in &node.input {
            if name.is_empty() {
                ins.push(None);
                continue;
            }
            match self.lookup(name) {
                Some(id) => ins.push(Some(id)),
                None => {
                    if let Some(Init::Unsupported(t)) = self.model.initializers.get(name) {
                        return Err(OnnxError::Unsupported {
                            node: desc,
                            op: op.clone(),
                            detail: format!("initializer {name:?} is of type {t}, which sinter lacks"),
                        });
                    }
                    return Err(OnnxError::Node {
                        node: desc,
                        op,
                        msg: format!("input {name:?} is not defined (no node, graph input or initializer)"),
                    });
                }
            }
        }
        let domain = match node.domain.as_deref() {
            None | Some("") | Some("ai.onnx") => "",
            Some(d) => d,
        };
        let opset = domain_opset(opsets, Some(domain));
        let nout = node.output.len();
        let start = self.g.nodes.len();
        let origin = Origin { node: idx as u32, op: Arc::from(op.to_lowercase().as_str()) };
        let sym_ins = ins.clone();
        let sym_origin = origin.clone();
        let outs = {
            let mut cx = Cx {
                imp: self,
                node,
                ins,
                op: &op,
                domain,
                opset,
                desc: desc.clone(),
                origin,
                nout,
                bad_attr: Default::default(),
            };
            // A panic while lowering is an importer bug; it becomes an error naming the node rather
            // than taking the caller down (the fuzz target still aborts on it).
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| crate::ops::lower(&mut cx)));
            // An attribute of the wrong type is the root cause of whatever the lowering made of it.
            if let Some(e) = cx.take_attr_error() {
                return Err(e);
            }
            match r {
                Ok(r) => r?,
                Err(p) => {
                    let msg = p
                        .downcast_ref::<&str>()
                        .map(|s| s.to_string())
                        .or_else(|| p.downcast_ref::<String>().cloned())
                        .unwrap_or_else(|| "unknown panic".into());
                    return Err(OnnxError::Node {
                        node: desc,
                        op,
                        msg: format!("internal importer error (please report): {msg}"),
                    });
                }
            }
        };
        for (k, name) in node.output.iter().enumerate() {
            if name.is_empty() {
                continue;
            }
            let id = outs.get(k).copied().flatten().ok_or_else(|| OnnxError::Unsupported {
                node: desc.clone(),
                op: op.clone(),
                detail: format!("output {k} ({name:?}) is not supported"),
            })?;
            self.scopes.last_mut().expect("a scope").insert(name.clone(), id);
        }
        self.fold(start, node, &outs);
        self.sym_fold(node, &sym_ins, sym_origin);
        Ok(())
    }

    /// Folds the nodes added since `start` when everything they read is known.
    fn fold(&mut self, start: usize, node: &NodeProto, outs: &[Option<NodeId>]) {
        let end = self.g.nodes.len();
        let mut assumed = false;
        for i in start..end {
            for &x in &self.g.nodes[i].inputs {
                if x.index() < start {
                    if !self.known.contains_key(&x) {
                        return;
                    }
                    assumed |= self.assumed.contains(&x);
                }
            }
        }
        let targets: Vec<(usize, NodeId)> = outs
            .iter()
            .enumerate()
            .filter_map(|(k, o)| o.map(|id| (k, id)))
            .filter(|(_, id)| id.index() >= start && !self.known.contains_key(id))
            .collect();
        if targets.is_empty() {
            return;
        }
        if assumed {
            let wanted = targets.iter().any(|(k, _)| node.output.get(*k).is_some_and(|n| self.needed.contains(n)));
            if !wanted {
                return;
            }
        }
        let small = targets.iter().all(|(_, id)| self.g.ty(*id).shape.numel().is_some_and(|n| n <= FOLD_LIMIT))
            && (start..end).all(|i| self.g.nodes[i].ty.shape.numel().is_some_and(|n| n <= FOLD_LIMIT));
        if !small {
            return;
        }
        let ids: Vec<NodeId> = targets.iter().map(|t| t.1).collect();
        let Ok(vals) = self.eval_range(start, &ids) else { return };
        for ((k, id), v) in targets.into_iter().zip(vals) {
            let v = Arc::new(v);
            if assumed {
                self.known.insert(id, v);
                self.assumed.insert(id);
            } else {
                let origin = self.g.node(id).origin.clone();
                let c = self.constant(v, origin);
                if let Some(name) = node.output.get(k) {
                    self.scopes.last_mut().expect("a scope").insert(name.clone(), c);
                }
            }
        }
    }

    /// Evaluates nodes `start..` (whose outside operands are all known) and returns the values
    /// of `outs`.
    pub fn eval_range(&self, start: usize, outs: &[NodeId]) -> Result<Vec<HostTensor>, sinter_core::Error> {
        let mut mini = IrGraph::default();
        let mut map: HashMap<NodeId, NodeId> = HashMap::new();
        let end = self.g.nodes.len();
        // Only evaluate what the outputs need.
        let mut live = vec![false; end.saturating_sub(start)];
        for o in outs {
            if o.index() >= start {
                live[o.index() - start] = true;
            }
        }
        for i in (start..end).rev() {
            if live[i - start] {
                for x in &self.g.nodes[i].inputs {
                    if x.index() >= start {
                        live[x.index() - start] = true;
                    }
                }
            }
        }
        for i in start..end {
            if !live[i - start] {
                continue;
            }
            let mut n = self.g.nodes[i].clone();
            for x in n.inputs.iter_mut() {
                if x.index() < start {
                    let id = match map.get(x) {
                        Some(&m) => m,
                        None => {
                            let t = self.known.get(x).ok_or_else(|| {
                                sinter_core::Error::Unsupported("folding needs an unknown value".into())
                            })?;
                            let ty = self.g.ty(*x).clone();
                            let m = mini.push(Node {
                                op: Op::Constant(t.clone()),
                                inputs: vec![],
                                ty,
                                origin: self.g.node(*x).origin.clone(),
                            });
                            map.insert(*x, m);
                            m
                        }
                    };
                    *x = id;
                } else {
                    *x = map[x];
                }
            }
            let m = mini.push(n);
            map.insert(NodeId(i as u32), m);
        }
        for (k, o) in outs.iter().enumerate() {
            let m = match map.get(o) {
                Some(&m) => m,
                None => {
                    let t = self.known.get(o).ok_or_else(|| sinter_core::Error::Unsupported("unknown".into()))?;
                    mini.push(Node {
                        op: Op::Constant(t.clone()),
                        inputs: vec![],
                        ty: self.g.ty(*o).clone(),
                        origin: self.g.node(*o).origin.clone(),
                    })
                }
            };
            mini.add_output(&format!("o{k}"), m);
        }
        // Folding must never take the importer down: a panic in the evaluator (a bug there) just
        // means the value is not folded.
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| sinter_core::cpu::run(&mini, &[])))
            .unwrap_or_else(|_| Err(sinter_core::Error::Unsupported("the CPU evaluator panicked while folding".into())))
    }
}

/// The largest extent, padding or slice step the importer hands to the IR (untrusted values
/// beyond it would overflow shape arithmetic).
pub const MAX_EXTENT: u64 = 1 << 40;

/// The largest element count of one value's shape.
pub const MAX_ELEMS: u64 = 1 << 48;

/// Checks a static shape: every extent at most [`MAX_EXTENT`], the product at most [`MAX_ELEMS`].
pub(crate) fn check_dims(dims: &[usize]) -> Result<(), String> {
    // Zero extents are not allowed to hide huge others: every prefix product must stay small.
    let mut n: u64 = 1;
    for &d in dims {
        if d as u64 > MAX_EXTENT {
            return Err(format!("extent {d} is too large"));
        }
        n = n.saturating_mul((d as u64).max(1));
    }
    if n > MAX_ELEMS {
        return Err(format!("shape {dims:?} has more than 2^48 elements"));
    }
    Ok(())
}

/// Rejects op parameters whose arithmetic could overflow in shape inference.
fn check_op(op: &Op) -> Result<(), String> {
    let big = |v: i64| v.unsigned_abs() > MAX_EXTENT;
    match op {
        Op::Reshape(s) | Op::Expand(s) => {
            let dims: Vec<usize> = s.dims().iter().filter_map(Dim::as_static).collect();
            check_dims(&dims)
        }
        Op::Pad { pads, .. } if pads.iter().any(|&(b, a)| big(b) || big(a)) => {
            Err(format!("padding {pads:?} is too large"))
        }
        Op::Slice(dims)
            if dims.iter().any(|d| big(d.step) || d.len as u64 > MAX_EXTENT || d.start as u64 > MAX_EXTENT) =>
        {
            Err("slice parameters are too large".into())
        }
        Op::Conv2d { window, .. } | Op::Pool2d { window, .. } => {
            let w = window;
            let all = w.kernel.iter().chain(&w.stride).chain(&w.padding).chain(&w.dilation);
            if all.copied().any(|v| v as u64 > 1 << 20) { Err(format!("window {w:?} is too large")) } else { Ok(()) }
        }
        _ => Ok(()),
    }
}
