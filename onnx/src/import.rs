//! The importer: walks the ONNX graph in topological order and lowers every node to sinter IR
//! ops (the private `ops` modules), folding constants as it goes.
//!
//! Values known at import time are tracked per IR node: initializers, `Constant` nodes, shapes of
//! statically shaped tensors (`Shape`, `Size`), and everything computed from those alone (folded
//! by running the new nodes on the CPU reference). Inputs whose values fix a shape (see
//! [`crate::Model::graph_for_inputs`]) are *assumed* known: their values feed shape computations
//! but every node computed from them still stays in the graph.

use crate::error::OnnxError;
use crate::model::{Init, Model};
use crate::proto::attribute_proto::AttributeType;
use crate::proto::{AttributeProto, GraphProto, NodeProto, TensorProto};
use crate::tensor::{decode_tensor, dtype_from_code};
use sinter_core::ir::{BinaryOp, Node, Origin, ReduceOp, SliceDim, UnaryOp};
use sinter_core::{DType, Dim, HostTensor, IrGraph, NodeId, Op, Shape, TensorType};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

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

/// The lowering context of one ONNX node: its inputs, attributes and opset, and helpers that
/// add IR nodes with this node's origin and turn failures into errors naming it.
pub(crate) struct Cx<'a, 'm> {
    pub imp: &'a mut Importer<'m>,
    pub node: &'a NodeProto,
    /// Inputs (`None` for omitted optional inputs).
    pub ins: Vec<Option<NodeId>>,
    /// The op type.
    pub op: &'a str,
    /// The domain (`""` for `ai.onnx`).
    pub domain: &'a str,
    /// The opset version of the node's domain.
    pub opset: i64,
    pub desc: String,
    pub origin: Origin,
    /// Number of outputs the node lists (some may be empty names).
    pub nout: usize,
    /// The first attribute found with the wrong type ([`Cx::attr_of`]).
    pub bad_attr: std::cell::RefCell<Option<OnnxError>>,
}

/// The type of an attribute: its declared `type`, or (old models leave it unset) the one value
/// field that is set. `None` when neither says (an empty list without a type).
fn attr_type(a: &AttributeProto) -> Option<AttributeType> {
    if let Some(t) = a.r#type.and_then(|t| AttributeType::try_from(t).ok())
        && t != AttributeType::Undefined
    {
        return Some(t);
    }
    let set = [
        (a.i.is_some(), AttributeType::Int),
        (a.f.is_some(), AttributeType::Float),
        (a.s.is_some(), AttributeType::String),
        (a.t.is_some(), AttributeType::Tensor),
        (a.g.is_some(), AttributeType::Graph),
        (!a.ints.is_empty(), AttributeType::Ints),
        (!a.floats.is_empty(), AttributeType::Floats),
        (!a.strings.is_empty(), AttributeType::Strings),
        (!a.tensors.is_empty(), AttributeType::Tensors),
        (!a.graphs.is_empty(), AttributeType::Graphs),
    ];
    set.iter().find(|(on, _)| *on).map(|(_, t)| *t)
}

impl Cx<'_, '_> {
    // ---- errors ----

    /// An error naming this node.
    pub fn err(&self, msg: impl Into<String>) -> OnnxError {
        OnnxError::Node { node: self.desc.clone(), op: self.op.to_string(), msg: msg.into() }
    }

    /// An "unsupported" error naming this node.
    pub fn unsup(&self, detail: impl Into<String>) -> OnnxError {
        OnnxError::Unsupported { node: self.desc.clone(), op: self.op.to_string(), detail: detail.into() }
    }

    // ---- inputs and outputs ----

    /// Input `i`, which must be present.
    pub fn inp(&self, i: usize) -> R<NodeId> {
        self.ins
            .get(i)
            .copied()
            .flatten()
            .ok_or_else(|| self.err(format!("input {i} is required but the node has {} input(s)", self.ins.len())))
    }

    /// Optional input `i`.
    pub fn opt(&self, i: usize) -> Option<NodeId> {
        self.ins.get(i).copied().flatten()
    }

    /// Checks the number of inputs given.
    pub fn arity(&self, min: usize, max: usize) -> R<()> {
        let n = self.ins.len();
        if n < min || n > max {
            return Err(self.err(format!("takes {min} to {max} inputs, got {n}")));
        }
        for i in 0..min {
            self.inp(i)?;
        }
        Ok(())
    }

    /// True when output `k` is requested (listed with a non-empty name).
    pub fn wants(&self, k: usize) -> bool {
        self.node.output.get(k).is_some_and(|s| !s.is_empty())
    }

    // ---- attributes ----

    /// The attribute named `name`, whatever its type (the typed accessors below check types).
    pub fn attr(&self, name: &str) -> Option<&AttributeProto> {
        self.node.attribute.iter().find(|a| a.name.as_deref() == Some(name))
    }

    /// The attribute named `name` when it has type `want`. An attribute of another type is
    /// recorded as this node's error (returned by the importer once the op is lowered, whatever
    /// the lowering did with the `None`), so every op refuses e.g. a FLOAT `axis` instead of
    /// silently using the default.
    pub fn attr_of(&self, name: &str, want: AttributeType) -> Option<&AttributeProto> {
        let a = self.attr(name)?;
        match attr_type(a) {
            Some(t) if t != want => {
                let mut bad = self.bad_attr.borrow_mut();
                if bad.is_none() {
                    *bad = Some(self.err(format!(
                        "attribute {name:?} must be of type {} but is {}",
                        want.as_str_name(),
                        t.as_str_name()
                    )));
                }
                None
            }
            _ => Some(a),
        }
    }

    /// The error recorded by [`Cx::attr_of`] for an attribute of the wrong type, if any.
    pub fn take_attr_error(&self) -> Option<OnnxError> {
        self.bad_attr.borrow_mut().take()
    }

    /// An int attribute.
    pub fn ai(&self, name: &str, default: i64) -> i64 {
        self.ai_opt(name).unwrap_or(default)
    }

    /// An optional int attribute.
    pub fn ai_opt(&self, name: &str) -> Option<i64> {
        self.attr_of(name, AttributeType::Int).and_then(|a| a.i)
    }

    /// A float attribute.
    pub fn af(&self, name: &str, default: f32) -> f32 {
        self.af_opt(name).unwrap_or(default)
    }

    /// An optional float attribute.
    pub fn af_opt(&self, name: &str) -> Option<f32> {
        self.attr_of(name, AttributeType::Float).and_then(|a| a.f)
    }

    /// A string attribute (lossy UTF-8).
    pub fn as_str(&self, name: &str, default: &str) -> String {
        self.attr_of(name, AttributeType::String)
            .and_then(|a| a.s.as_ref())
            .map(|s| String::from_utf8_lossy(s).into_owned())
            .unwrap_or_else(|| default.to_string())
    }

    /// A strings attribute (lossy UTF-8).
    pub fn astrings(&self, name: &str) -> Option<Vec<String>> {
        self.attr_of(name, AttributeType::Strings)
            .map(|a| a.strings.iter().map(|s| String::from_utf8_lossy(s).into_owned()).collect())
    }

    /// An ints attribute.
    pub fn aints(&self, name: &str) -> Option<Vec<i64>> {
        self.attr_of(name, AttributeType::Ints).map(|a| a.ints.clone())
    }

    /// A floats attribute.
    pub fn afloats(&self, name: &str) -> Option<Vec<f32>> {
        self.attr_of(name, AttributeType::Floats).map(|a| a.floats.clone())
    }

    /// A graph attribute (If branches, Loop and Scan bodies, FlexAttention modifiers).
    pub fn agraph(&self, name: &str) -> Option<GraphProto> {
        self.attr_of(name, AttributeType::Graph).and_then(|a| a.g.clone())
    }

    /// A tensor attribute, decoded.
    pub fn atensor(&self, name: &str) -> R<Option<HostTensor>> {
        match self.attr_of(name, AttributeType::Tensor).and_then(|a| a.t.as_ref()) {
            None => Ok(None),
            Some(t) => self.decode(t).map(Some),
        }
    }

    /// Decodes a tensor found in this node (dtype problems become errors naming the node).
    pub fn decode(&self, t: &TensorProto) -> R<HostTensor> {
        decode_tensor(t, self.imp.model.dir.as_deref()).map_err(|e| match e {
            OnnxError::Unsupported { detail, .. } => self.unsup(detail),
            other => other,
        })
    }

    /// The dtype of an ONNX type-code attribute (e.g. Cast's `to`).
    pub fn dtype_attr(&self, name: &str) -> R<DType> {
        let c = self.ai_opt(name).ok_or_else(|| {
            self.take_attr_error().unwrap_or_else(|| self.err(format!("attribute {name:?} is required")))
        })?;
        dtype_from_code(c as i32).map_err(|t| self.unsup(format!("data type {t} has no sinter equivalent")))
    }

    // ---- types ----

    /// The type of a node.
    pub fn ty(&self, x: NodeId) -> &TensorType {
        self.imp.g.ty(x)
    }

    /// The dtype of a node.
    pub fn dt(&self, x: NodeId) -> DType {
        self.imp.g.ty(x).dtype
    }

    /// The rank of a node.
    pub fn rank(&self, x: NodeId) -> usize {
        self.imp.g.ty(x).shape.rank()
    }

    /// The static shape of a node, or an error naming the symbolic dims.
    pub fn shape(&self, x: NodeId) -> R<Vec<usize>> {
        let s = &self.imp.g.ty(x).shape;
        s.as_static().ok_or_else(|| {
            self.unsup(format!(
                "needs static shapes, got {s} (specialize the model with graph_for or graph_for_inputs)"
            ))
        })
    }

    /// The (possibly symbolic) shape of a node.
    pub fn sym_shape(&self, x: NodeId) -> Shape {
        self.imp.g.ty(x).shape.clone()
    }

    /// Normalizes a possibly negative axis against a rank.
    pub fn axis(&self, a: i64, rank: usize) -> R<usize> {
        sinter_core::shape::norm_axis(a, rank).ok_or_else(|| self.err(format!("axis {a} out of range for rank {rank}")))
    }

    // ---- known values ----

    /// The value of `x`, which must be known at import time.
    pub fn val(&self, x: NodeId) -> R<Arc<HostTensor>> {
        self.imp.known.get(&x).cloned().ok_or_else(|| {
            self.unsup(
                "an input that fixes the output shape must be known at import time (a constant, an initializer, \
                 or a run-time input given to graph_for_inputs)",
            )
        })
    }

    /// The known value of `x`, if any.
    pub fn known(&self, x: NodeId) -> Option<Arc<HostTensor>> {
        self.imp.known.get(&x).cloned()
    }

    /// The value of `x` as i64s (must be known).
    pub fn ints(&self, x: NodeId) -> R<Vec<i64>> {
        Ok(self.val(x)?.to_i64_vec())
    }

    /// The value of `x` as f64s (must be known).
    pub fn floats(&self, x: NodeId) -> R<Vec<f64>> {
        Ok(self.val(x)?.to_f64_vec())
    }

    /// Optional input `i` as i64s (must be known when present).
    pub fn opt_ints(&self, i: usize) -> R<Option<Vec<i64>>> {
        match self.opt(i) {
            Some(x) => self.ints(x).map(Some),
            None => Ok(None),
        }
    }

    // ---- building ----

    /// Adds an IR node with this node's origin. The graph's size is capped ([`MAX_GRAPH_NODES`])
    /// and the new value's inferred size is checked against the host-memory budget
    /// (`sinter_core::budget`), so absurd shapes fail here, at import, naming the node.
    pub fn add(&mut self, op: Op, ins: Vec<NodeId>) -> R<NodeId> {
        check_op(&op).map_err(|m| self.err(m))?;
        self.check_graph_size()?;
        let origin = self.origin.clone();
        let id = self.imp.g.add(op, ins, Some(origin)).map_err(|e| self.err(e.to_string()))?;
        let ty = self.imp.g.ty(id);
        if let Some(dims) = ty.shape.as_static() {
            let bytes = sinter_core::budget::bytes_of(sinter_core::budget::elems(&dims), ty.dtype.size_bytes() as u64);
            let what = || format!("{} ({}): its {} result {}", self.desc, self.op, self.imp.g.node(id).op.name(), ty);
            sinter_core::budget::check(bytes, what)?;
        }
        Ok(id)
    }

    /// Errs once the imported graph holds [`MAX_GRAPH_NODES`] IR nodes (unrolled Loops and
    /// Scans, nested ones above all, are what gets there).
    pub fn check_graph_size(&self) -> R<()> {
        if self.imp.g.nodes.len() >= MAX_GRAPH_NODES {
            return Err(self.unsup(format!(
                "the imported graph reached {MAX_GRAPH_NODES} IR nodes (Loop and Scan bodies are unrolled; nested \
                 loops multiply their trip counts)"
            )));
        }
        Ok(())
    }

    /// A constant.
    pub fn konst(&mut self, t: HostTensor) -> NodeId {
        let origin = self.origin.clone();
        self.imp.constant(Arc::new(t), origin)
    }

    /// A rank-0 constant.
    pub fn scalar(&mut self, dt: DType, x: f64) -> NodeId {
        self.konst(HostTensor::scalar(dt, x))
    }

    /// Elementwise unary op.
    pub fn un(&mut self, u: UnaryOp, x: NodeId) -> R<NodeId> {
        self.add(Op::Unary(u), vec![x])
    }

    /// Elementwise binary op.
    pub fn bin(&mut self, b: BinaryOp, x: NodeId, y: NodeId) -> R<NodeId> {
        self.add(Op::Binary(b), vec![x, y])
    }

    /// Binary op with a scalar of `x`'s dtype on the right.
    pub fn bin_s(&mut self, b: BinaryOp, x: NodeId, s: f64) -> R<NodeId> {
        let c = self.scalar(self.dt(x), s);
        self.bin(b, x, c)
    }

    /// Binary op with a scalar of `x`'s dtype on the left.
    pub fn s_bin(&mut self, b: BinaryOp, s: f64, x: NodeId) -> R<NodeId> {
        let c = self.scalar(self.dt(x), s);
        self.bin(b, c, x)
    }

    /// `where(c, a, b)`.
    pub fn select(&mut self, c: NodeId, a: NodeId, b: NodeId) -> R<NodeId> {
        self.add(Op::Where, vec![c, a, b])
    }

    /// Casts (no-op when the dtype already matches).
    pub fn cast(&mut self, x: NodeId, d: DType) -> R<NodeId> {
        if self.dt(x) == d { Ok(x) } else { self.add(Op::Cast(d), vec![x]) }
    }

    /// Reshapes to static dims (no-op when equal).
    pub fn reshape(&mut self, x: NodeId, dims: &[usize]) -> R<NodeId> {
        if self.ty(x).shape == Shape::new(dims) {
            return Ok(x);
        }
        self.add(Op::Reshape(Shape::new(dims)), vec![x])
    }

    /// Permutes axes (no-op for the identity).
    pub fn permute(&mut self, x: NodeId, perm: &[usize]) -> R<NodeId> {
        if perm.iter().enumerate().all(|(i, &p)| i == p) {
            return Ok(x);
        }
        self.add(Op::Permute(perm.to_vec()), vec![x])
    }

    /// Broadcasts to static dims (no-op when equal).
    pub fn expand(&mut self, x: NodeId, dims: &[usize]) -> R<NodeId> {
        if self.ty(x).shape == Shape::new(dims) {
            return Ok(x);
        }
        self.add(Op::Expand(Shape::new(dims)), vec![x])
    }

    /// Python-style slice `start:end:step` of one axis (other axes whole).
    pub fn slice(&mut self, x: NodeId, axis: usize, start: i64, end: i64, step: i64) -> R<NodeId> {
        let s = self.shape(x)?;
        let dims: Vec<SliceDim> = s
            .iter()
            .enumerate()
            .map(|(i, &n)| {
                if i == axis {
                    sinter_core::trace::slice_dim(n, start, end, step)
                } else {
                    SliceDim { start: 0, step: 1, len: n }
                }
            })
            .collect();
        if dims.iter().zip(&s).all(|(d, &n)| d.start == 0 && d.step == 1 && d.len == n) {
            return Ok(x);
        }
        self.add(Op::Slice(dims), vec![x])
    }

    /// Concatenation along an axis.
    pub fn concat(&mut self, xs: Vec<NodeId>, axis: usize) -> R<NodeId> {
        if xs.len() == 1 {
            return Ok(xs[0]);
        }
        self.add(Op::Concat { axis }, xs)
    }

    /// Reduction (axes sorted and deduplicated here).
    pub fn reduce(&mut self, op: ReduceOp, x: NodeId, axes: &[usize], keepdim: bool) -> R<NodeId> {
        let mut a = axes.to_vec();
        a.sort_unstable();
        a.dedup();
        self.add(Op::Reduce { op, axes: a, keepdim }, vec![x])
    }

    /// Matrix product.
    pub fn matmul(&mut self, a: NodeId, b: NodeId) -> R<NodeId> {
        self.add(Op::MatMul, vec![a, b])
    }

    /// Checks that a constant of `n` elements built from shapes or attributes stays within
    /// [`MAX_CONST_ELEMS`] (untrusted models must not make the importer allocate absurdly).
    pub fn guard(&self, n: usize) -> R<()> {
        if n > MAX_CONST_ELEMS {
            return Err(self.unsup(format!("an import-time constant of {n} elements (limit {MAX_CONST_ELEMS})")));
        }
        Ok(())
    }

    /// `0..n` as a rank-1 constant of `dt`.
    pub fn iota(&mut self, n: usize, dt: DType) -> R<NodeId> {
        self.guard(n)?;
        let v: Vec<i64> = (0..n as i64).collect();
        Ok(self.konst(HostTensor::from_i64(dt, vec![n], &v)))
    }

    /// Zeros of a static shape (a broadcast scalar, nothing allocated).
    pub fn zeros(&mut self, dt: DType, dims: &[usize]) -> R<NodeId> {
        let z = self.scalar(dt, 0.0);
        self.add(Op::Expand(Shape::new(dims)), vec![z])
    }

    /// Moves axis `a` to the last position; returns the new node and the permutation used.
    pub fn axis_last(&mut self, x: NodeId, a: usize) -> R<(NodeId, Vec<usize>)> {
        let r = self.rank(x);
        let mut perm: Vec<usize> = (0..r).filter(|&i| i != a).collect();
        perm.push(a);
        Ok((self.permute(x, &perm)?, perm))
    }

    /// Inverts a permutation.
    pub fn inverse_perm(perm: &[usize]) -> Vec<usize> {
        let mut inv = vec![0; perm.len()];
        for (i, &p) in perm.iter().enumerate() {
            inv[p] = i;
        }
        inv
    }

    /// Lowers a subgraph (If/Loop/Scan bodies) inline: binds `inputs` to its formal inputs in a
    /// fresh scope that sees the enclosing ones, and returns its outputs.
    pub fn inline_graph(&mut self, g: &GraphProto, inputs: &[NodeId]) -> R<Vec<NodeId>> {
        if g.input.len() != inputs.len() {
            return Err(self.err(format!("subgraph takes {} inputs, given {}", g.input.len(), inputs.len())));
        }
        check_names(g).map_err(|e| self.err(format!("in a subgraph: {e}")))?;
        self.check_graph_size()?;
        let mut scope = HashMap::new();
        for (vi, &x) in g.input.iter().zip(inputs) {
            scope.insert(vi.name.clone().unwrap_or_default(), x);
        }
        for t in &g.initializer {
            let v = self.decode(t)?;
            let c = self.konst(v);
            scope.insert(t.name.clone().unwrap_or_default(), c);
        }
        self.imp.scopes.push(scope);
        let opsets = self.imp.model.opsets.clone();
        // Values the subgraph's own ops need at import time (names are graph-unique).
        if let Ok(order) = topo_order(&g.node) {
            let inner = needed_values(&g.node, &order, &opsets);
            self.imp.needed.extend(inner);
        }
        let r = (|| {
            let order = topo_order(&g.node)?;
            self.imp.run_nodes(&g.node, &order, &opsets)?;
            let mut outs = Vec::new();
            for o in &g.output {
                let name = o.name.clone().unwrap_or_default();
                outs.push(
                    self.imp
                        .lookup(&name)
                        .ok_or_else(|| self.err(format!("subgraph output {name:?} is not defined")))?,
                );
            }
            Ok(outs)
        })();
        self.imp.scopes.pop();
        r
    }

    /// Static dims with a symbolic check, as `Dim`s (for reshapes that keep symbols).
    pub fn dims(&self, x: NodeId) -> Vec<Dim> {
        self.imp.g.ty(x).shape.0.clone()
    }
}
