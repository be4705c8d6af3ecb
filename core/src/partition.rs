//! Graph breaks: which nodes a backend cannot run, and the split of a graph into segments that
//! run on the backend or on the CPU reference (`crate::cpu`), as torch.compile's graph breaks do.
//!
//! Contract:
//!
//! * [`unsupported_reason`] is the one rule of what a backend's [`Capabilities`] refuse for one
//!   node (its dtype); the scheduler (`schedule::plan`) refuses with the same rule. A node also
//!   breaks the graph when one of its operands has a refused dtype (that operand would become
//!   an input buffer of the compiled segment).
//! * [`partition`] takes a decomposed, specialized graph (what the scheduler takes) and the nodes
//!   to run on the CPU (with their reasons) and returns [`Segment`]s in an order that runs: each
//!   segment is a self-contained [`IrGraph`] whose inputs are graph inputs or outputs of *earlier*
//!   segments ([`ValueRef`]); the graph's outputs are read from segments, graph inputs or
//!   constants.
//! * Segments are maximal: nodes are taken greedily in dependence order, staying on one side as
//!   long as any node of that side is ready, so independent work of one side shares a segment
//!   even when the arena interleaves sides. Adjacent segments are of different sides.
//! * Constants belong to no segment: each segment that reads one holds its own copy (so a
//!   compiled segment never downloads a weight). No other node is recomputed: a value a fallback
//!   segment needs from the compiled side is computed once and passed over.
//! * Only nodes the outputs depend on are placed (dead nodes are dropped).

use crate::dtype::DType;
use crate::error::Error;
use crate::ir::{Graph as IrGraph, Node, NodeId, Op};
use crate::kernel::Capabilities;
use crate::tensor::HostTensor;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

/// Why `caps` refuse the node `n` itself (its dtype), or `None` when they accept it. The
/// scheduler's check and the graph-break detection both call this.
pub fn unsupported_reason(n: &Node, caps: &Capabilities) -> Option<String> {
    dtype_refused(n.ty.dtype, caps)
}

fn dtype_refused(d: DType, caps: &Capabilities) -> Option<String> {
    (!caps.dtypes.contains(&d)).then(|| format!("the {} backend does not support {d}", caps.backend))
}

/// A short description of a node for messages: `cast to f64`, `matmul`, `input "x"`.
pub fn describe(n: &Node) -> String {
    match &n.op {
        Op::Cast(d) => format!("cast to {d}"),
        Op::Input { name } => format!("input {name:?}"),
        op => op.name().to_string(),
    }
}

/// One node that runs on the CPU reference instead of the backend, and why.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GraphBreak {
    /// The node's id in the compiled (decomposed, specialized) graph.
    pub node: u32,
    /// What the node is (`cast to f64`).
    pub op: String,
    /// The captured-graph node it descends from (what the viewer and the profile name).
    pub origin: u32,
    /// The user-level op there (`layer_norm`).
    pub origin_op: String,
    /// Why the backend cannot run it.
    pub reason: String,
    /// The index of the fallback segment it runs in (set by [`partition`]).
    pub segment: usize,
}

impl std::fmt::Display for GraphBreak {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "graph break: node %{} ({}): {}", self.node, self.op, self.reason)
    }
}

/// The nodes of `g` that `caps` refuse, with their reasons (see the module contract): a refused
/// dtype of the node or of an operand. Inputs and constants are listed only when they are graph
/// outputs of a refused dtype (they are not computed: the value is passed through on the host);
/// otherwise their users are.
pub fn detect(g: &IrGraph, caps: &Capabilities) -> Vec<GraphBreak> {
    let mut out = Vec::new();
    for (id, n) in g.iter() {
        let reason = if matches!(n.op, Op::Input { .. } | Op::Constant(_)) {
            if !g.outputs.iter().any(|o| o.node == id) {
                continue;
            }
            unsupported_reason(n, caps).map(|r| format!("a graph output passed through on the host: {r}"))
        } else {
            unsupported_reason(n, caps).or_else(|| {
                n.inputs.iter().find_map(|&a| {
                    dtype_refused(g.ty(a).dtype, caps)
                        .map(|r| format!("operand {a} ({}) is {}: {r}", describe(g.node(a)), g.ty(a).dtype))
                })
            })
        };
        if let Some(reason) = reason {
            out.push(GraphBreak {
                node: id.0,
                op: describe(n),
                origin: n.origin.node,
                origin_op: n.origin.op.to_string(),
                reason,
                segment: 0,
            });
        }
    }
    out
}

/// Where a segment reads one of its inputs, or where the graph reads an output.
#[derive(Clone, Debug, PartialEq)]
pub enum ValueRef {
    /// The graph's input `k`.
    Input(usize),
    /// Output `output` of segment `segment`.
    Segment {
        /// The segment.
        segment: usize,
        /// Its output index.
        output: usize,
    },
    /// A constant (a graph output that is a constant node).
    Constant(Arc<HostTensor>),
}

/// Which side runs a segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Side {
    /// The backend.
    Compiled,
    /// The CPU reference.
    Fallback,
}

/// One self-contained piece of the graph.
#[derive(Clone, Debug)]
pub struct Segment {
    /// Who runs it.
    pub side: Side,
    /// The piece, with its own inputs and outputs.
    pub graph: IrGraph,
    /// Where each of `graph.inputs` comes from.
    pub inputs: Vec<ValueRef>,
    /// The nodes of the partitioned graph it computes, in its order.
    pub nodes: Vec<NodeId>,
    /// For each node of `graph`, the partitioned graph's node it computes (`None` for its
    /// inputs and constant copies).
    pub source: Vec<Option<NodeId>>,
}

/// A graph split into segments.
#[derive(Clone, Debug)]
pub struct Partition {
    /// In an order that runs.
    pub segments: Vec<Segment>,
    /// Where each graph output is read.
    pub outputs: Vec<ValueRef>,
    /// The breaks, their `segment` fields set.
    pub breaks: Vec<GraphBreak>,
}

/// Splits `g` so that the nodes of `breaks` run on the CPU reference and every other node on the
/// backend (see the module contract).
pub fn partition(g: &IrGraph, breaks: &[GraphBreak]) -> Result<Partition, Error> {
    let n = g.nodes.len();
    let fallback: BTreeSet<u32> = breaks.iter().map(|b| b.node).collect();
    let placed = |id: NodeId| !matches!(g.node(id).op, Op::Input { .. } | Op::Constant(_));
    // Live nodes: what the outputs depend on.
    let mut live = vec![false; n];
    for o in &g.outputs {
        live[o.node.index()] = true;
    }
    for i in (0..n).rev() {
        if live[i] {
            for a in &g.nodes[i].inputs {
                live[a.index()] = true;
            }
        }
    }
    let side_of = |id: NodeId| if fallback.contains(&id.0) { Side::Fallback } else { Side::Compiled };
    // Pending operand counts over placed live nodes; users lists.
    let mut pending = vec![0usize; n];
    let mut users: Vec<Vec<NodeId>> = vec![Vec::new(); n];
    for (id, node) in g.iter() {
        if !live[id.index()] || !placed(id) {
            continue;
        }
        let ops: BTreeSet<NodeId> = node.inputs.iter().copied().filter(|&a| placed(a)).collect();
        pending[id.index()] = ops.len();
        for a in ops {
            users[a.index()].push(id);
        }
    }
    let mut ready: [BTreeSet<NodeId>; 2] = [BTreeSet::new(), BTreeSet::new()];
    let slot = |s: Side| if s == Side::Compiled { 0 } else { 1 };
    let mut first: Option<Side> = None;
    for (id, _) in g.iter() {
        if live[id.index()] && placed(id) {
            first.get_or_insert(side_of(id));
            if pending[id.index()] == 0 {
                ready[slot(side_of(id))].insert(id);
            }
        }
    }
    // Greedy sides: drain the current side, then switch.
    let mut groups: Vec<(Side, Vec<NodeId>)> = Vec::new();
    let mut side = first.unwrap_or(Side::Compiled);
    while !ready[0].is_empty() || !ready[1].is_empty() {
        if ready[slot(side)].is_empty() {
            side = if side == Side::Compiled { Side::Fallback } else { Side::Compiled };
        }
        let mut nodes = Vec::new();
        while let Some(id) = ready[slot(side)].pop_first() {
            nodes.push(id);
            for &u in &users[id.index()] {
                pending[u.index()] -= 1;
                if pending[u.index()] == 0 {
                    ready[slot(side_of(u))].insert(u);
                }
            }
        }
        groups.push((side, nodes));
    }
    // Where each placed node ends up: (segment, node id inside it).
    let mut seg_of: HashMap<NodeId, usize> = HashMap::new();
    for (s, (_, nodes)) in groups.iter().enumerate() {
        for &id in nodes {
            seg_of.insert(id, s);
        }
    }
    // Values each segment must export: read by a later segment or by the graph's outputs.
    let mut exports: Vec<Vec<NodeId>> = vec![Vec::new(); groups.len()];
    let mut export_index: HashMap<NodeId, usize> = HashMap::new();
    let mut export = |id: NodeId, exports: &mut Vec<Vec<NodeId>>| {
        let s = seg_of[&id];
        *export_index.entry(id).or_insert_with(|| {
            exports[s].push(id);
            exports[s].len() - 1
        })
    };
    for (s, (_, nodes)) in groups.iter().enumerate() {
        for &id in nodes {
            for &a in &g.node(id).inputs {
                if let Some(&sa) = seg_of.get(&a)
                    && sa != s
                {
                    export(a, &mut exports);
                }
            }
        }
    }
    let mut outputs = Vec::with_capacity(g.outputs.len());
    for o in &g.outputs {
        outputs.push(match &g.node(o.node).op {
            Op::Input { .. } => ValueRef::Input(input_index(g, o.node)?),
            Op::Constant(t) => ValueRef::Constant(t.clone()),
            _ => ValueRef::Segment { segment: seg_of[&o.node], output: export(o.node, &mut exports) },
        });
    }
    // Build each segment's graph.
    let mut segments = Vec::with_capacity(groups.len());
    for (s, (side, nodes)) in groups.into_iter().enumerate() {
        let mut sg = IrGraph::default();
        let mut map: BTreeMap<NodeId, NodeId> = BTreeMap::new();
        let mut inputs = Vec::new();
        let mut source = Vec::new();
        for &id in &nodes {
            let node = g.node(id);
            let mut ins = Vec::with_capacity(node.inputs.len());
            for &a in &node.inputs {
                if let Some(&m) = map.get(&a) {
                    ins.push(m);
                    continue;
                }
                let an = g.node(a);
                let m = match &an.op {
                    Op::Constant(_) => sg.add(an.op.clone(), vec![], Some(an.origin.clone()))?,
                    _ => {
                        let from = match &an.op {
                            Op::Input { .. } => ValueRef::Input(input_index(g, a)?),
                            _ => ValueRef::Segment { segment: seg_of[&a], output: export_index[&a] },
                        };
                        let name = match &an.op {
                            Op::Input { name } => name.clone(),
                            _ => format!("v{}", a.0),
                        };
                        let m = sg.add_input(&name, an.ty.dtype, an.ty.shape.clone());
                        sg.nodes[m.index()].origin = an.origin.clone();
                        inputs.push(from);
                        m
                    }
                };
                map.insert(a, m);
                ins.push(m);
            }
            let m = sg.add(node.op.clone(), ins, Some(node.origin.clone()))?;
            source.resize(m.index(), None);
            source.push(Some(id));
            map.insert(id, m);
        }
        for &e in &exports[s] {
            sg.add_output(&format!("v{}", e.0), map[&e]);
        }
        source.resize(sg.nodes.len(), None);
        segments.push(Segment { side, graph: sg, inputs, nodes, source });
    }
    let mut breaks = breaks.to_vec();
    for b in &mut breaks {
        b.segment = seg_of.get(&NodeId(b.node)).copied().unwrap_or(0);
    }
    breaks.retain(|b| live.get(b.node as usize).copied().unwrap_or(false));
    Ok(Partition { segments, outputs, breaks })
}

fn input_index(g: &IrGraph, id: NodeId) -> Result<usize, Error> {
    g.inputs
        .iter()
        .position(|&i| i == id)
        .ok_or_else(|| Error::Input(format!("input node {id} is not listed in the graph's inputs")))
}

#[cfg(test)]
#[path = "partition_tests.rs"]
mod tests;
