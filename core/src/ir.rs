//! The graph IR: plain data. Nodes live in an arena (`Graph::nodes`) addressed by [`NodeId`];
//! a node's inputs always have smaller ids (the arena is in topological order), so a forward walk
//! over `nodes` is a valid execution order. Passes are functions from `Graph` to `Graph`.

use crate::dtype::DType;
use crate::shape::Shape;
use crate::tensor::HostTensor;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::Arc;

mod scalar_ops;
pub use scalar_ops::{ArgOp, BinaryOp, ReduceOp, UnaryOp};

/// Index of a node in [`Graph::nodes`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct NodeId(pub u32);

impl NodeId {
    /// The arena index.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "%{}", self.0)
    }
}

/// The type of a value: dtype and shape.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TensorType {
    /// Element type.
    pub dtype: DType,
    /// Shape.
    pub shape: Shape,
}

impl TensorType {
    /// A type from parts.
    pub fn new(dtype: DType, shape: impl Into<Shape>) -> TensorType {
        TensorType { dtype, shape: shape.into() }
    }
}

impl fmt::Display for TensorType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.dtype, self.shape)
    }
}

/// Padding modes.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub enum PadMode {
    /// Pad with a constant value.
    Constant(f64),
    /// Mirror without repeating the edge (`[1,2,3]` -> `3,2,[1,2,3],2,1`).
    Reflect,
    /// Repeat the edge value.
    Edge,
    /// Wrap around.
    Wrap,
}

/// One axis of a [`Op::Slice`]: output element `i` reads input element `start + i * step`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SliceDim {
    /// First input index read (already clamped into range).
    pub start: usize,
    /// Stride in input elements; never 0, may be negative.
    pub step: i64,
    /// Number of output elements.
    pub len: usize,
}

/// 2-D pooling kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum PoolKind {
    /// Max over the window (padding never wins).
    Max,
    /// Average over the window.
    Avg,
}

/// Parameters of a 2-D window op (conv or pool) over NCHW data.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Window2d {
    /// Window extent (kh, kw); for conv, taken from the weight and repeated here.
    pub kernel: [usize; 2],
    /// Stride (sh, sw).
    pub stride: [usize; 2],
    /// Padding (top, left, bottom, right).
    pub padding: [usize; 4],
    /// Dilation (dh, dw).
    pub dilation: [usize; 2],
}

impl Window2d {
    /// Output spatial extent for an input extent, with floor (or ceil) rounding.
    pub fn out_extent(&self, axis: usize, input: usize, ceil_mode: bool) -> Option<usize> {
        let padded = input + self.padding[axis] + self.padding[axis + 2];
        let eff = self.dilation[axis] * (self.kernel[axis].checked_sub(1)?) + 1;
        if padded < eff || self.stride[axis] == 0 {
            return None;
        }
        let span = padded - eff;
        let mut n = span / self.stride[axis] + 1;
        if ceil_mode && !span.is_multiple_of(self.stride[axis]) {
            n += 1;
            // The last window must start inside the input or left padding (PyTorch's rule).
            if (n - 1) * self.stride[axis] >= input + self.padding[axis] {
                n -= 1;
            }
        }
        Some(n)
    }
}

/// Operations. Primitives are what the scheduler and backends see; composites (marked) are
/// lowered to primitives by [`crate::passes::decompose`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Op {
    /// A graph input (no operands).
    Input {
        /// The input's name.
        name: String,
    },
    /// A constant tensor (no operands).
    Constant(Arc<HostTensor>),
    /// Elementwise unary op.
    Unary(UnaryOp),
    /// Elementwise binary op with broadcasting.
    Binary(BinaryOp),
    /// `where(cond, a, b)` with broadcasting; cond is bool.
    Where,
    /// Elementwise conversion to a dtype (floats to ints truncate toward zero).
    Cast(DType),
    /// Reduction over `axes` (sorted, unique, in range).
    Reduce {
        /// The reduction.
        op: ReduceOp,
        /// Axes reduced.
        axes: Vec<usize>,
        /// Keep reduced axes as extent 1.
        keepdim: bool,
    },
    /// Index of the max/min along one axis; output i64.
    ArgReduce {
        /// Which extremum.
        op: ArgOp,
        /// Axis.
        axis: usize,
        /// Keep the axis as extent 1.
        keepdim: bool,
        /// On ties, the last index instead of the first.
        select_last: bool,
    },
    /// Same elements, new shape (element count unchanged).
    Reshape(Shape),
    /// Axis permutation: output axis `i` is input axis `perm[i]`.
    Permute(Vec<usize>),
    /// Broadcast to a shape (NumPy rules, input aligned to the right).
    Expand(Shape),
    /// Strided slice, one [`SliceDim`] per axis.
    Slice(Vec<SliceDim>),
    /// Concatenation of all operands along an axis.
    Concat {
        /// Axis.
        axis: usize,
    },
    /// Padding; `pads[i] = (before, after)` per axis, negative crops.
    Pad {
        /// Per-axis (before, after).
        pads: Vec<(i64, i64)>,
        /// Fill mode.
        mode: PadMode,
    },
    /// `take` along an axis: operands (data, indices); negative indices count from the end.
    /// Output shape: data.shape[..axis] ++ indices.shape ++ data.shape[axis+1..].
    Gather {
        /// Axis of data indexed.
        axis: usize,
    },
    /// Elementwise gather: operands (data, indices of the output's shape).
    GatherElements {
        /// Axis indexed.
        axis: usize,
    },
    /// Batched matrix product with NumPy `matmul` semantics (1-D operands promoted and squeezed,
    /// batch dims broadcast). Half types accumulate in f32.
    MatMul,
    /// 2-D convolution over NCHW; operands (x, w[, bias]); w is [C_out, C_in/groups, kh, kw].
    Conv2d {
        /// Window (kernel taken from the weight).
        window: Window2d,
        /// Channel groups.
        groups: usize,
    },
    /// 2-D pooling over NCHW.
    Pool2d {
        /// Max or average.
        kind: PoolKind,
        /// Window.
        window: Window2d,
        /// Round output extents up.
        ceil_mode: bool,
        /// Average pooling divides by the full window including padding.
        count_include_pad: bool,
    },
    /// Composite: softmax along an axis.
    Softmax {
        /// Axis.
        axis: usize,
    },
    /// Composite: log-softmax along an axis.
    LogSoftmax {
        /// Axis.
        axis: usize,
    },
    /// Composite: layer normalization over axes `axis..rank`; operands (x[, weight[, bias]]).
    LayerNorm {
        /// First normalized axis.
        axis: usize,
        /// Epsilon added to the variance.
        eps: f64,
        /// Whether a weight operand is present.
        has_weight: bool,
        /// Whether a bias operand is present.
        has_bias: bool,
    },
    /// Composite: inference batch norm over axis 1; operands (x, scale, bias, mean, var).
    BatchNorm {
        /// Epsilon added to the variance.
        eps: f64,
    },
    /// Composite: GELU, exact (erf) or tanh approximation.
    Gelu {
        /// Use the tanh approximation.
        tanh: bool,
    },
    /// Composite: x * sigmoid(x).
    Silu,
    /// Composite: x * hardsigmoid(x) with alpha 1/6, beta 1/2.
    HardSwish,
    /// Composite: clamp(alpha * x + beta, 0, 1).
    HardSigmoid {
        /// Slope.
        alpha: f64,
        /// Offset.
        beta: f64,
    },
    /// Composite: softmax(Q K^T * scale [+ mask]) V; operands (q, k, v[, mask]) of shape
    /// [..., S, D]; a bool mask selects kept positions, a float mask is added.
    Attention {
        /// Scale applied to the scores.
        scale: f64,
        /// Apply a causal (lower-triangular) mask.
        causal: bool,
        /// Whether a mask operand is present.
        has_mask: bool,
    },
}

impl Op {
    /// The name printed in the text form.
    pub fn name(&self) -> &'static str {
        match self {
            Op::Input { .. } => "input",
            Op::Constant(_) => "constant",
            Op::Unary(u) => u.name(),
            Op::Binary(b) => b.name(),
            Op::Where => "where",
            Op::Cast(_) => "cast",
            Op::Reduce { op, .. } => match op {
                ReduceOp::Sum => "reduce_sum",
                ReduceOp::Mean => "reduce_mean",
                ReduceOp::Max => "reduce_max",
                ReduceOp::Min => "reduce_min",
                ReduceOp::Prod => "reduce_prod",
            },
            Op::ArgReduce { op: ArgOp::ArgMax, .. } => "argmax",
            Op::ArgReduce { op: ArgOp::ArgMin, .. } => "argmin",
            Op::Reshape(_) => "reshape",
            Op::Permute(_) => "permute",
            Op::Expand(_) => "expand",
            Op::Slice(_) => "slice",
            Op::Concat { .. } => "concat",
            Op::Pad { .. } => "pad",
            Op::Gather { .. } => "gather",
            Op::GatherElements { .. } => "gather_elements",
            Op::MatMul => "matmul",
            Op::Conv2d { .. } => "conv2d",
            Op::Pool2d { kind: PoolKind::Max, .. } => "max_pool2d",
            Op::Pool2d { kind: PoolKind::Avg, .. } => "avg_pool2d",
            Op::Softmax { .. } => "softmax",
            Op::LogSoftmax { .. } => "log_softmax",
            Op::LayerNorm { .. } => "layer_norm",
            Op::BatchNorm { .. } => "batch_norm",
            Op::Gelu { .. } => "gelu",
            Op::Silu => "silu",
            Op::HardSwish => "hardswish",
            Op::HardSigmoid { .. } => "hardsigmoid",
            Op::Attention { .. } => "attention",
        }
    }

    /// True for composites, which [`crate::passes::decompose`] lowers to primitives.
    pub fn is_composite(&self) -> bool {
        matches!(
            self,
            Op::Softmax { .. }
                | Op::LogSoftmax { .. }
                | Op::LayerNorm { .. }
                | Op::BatchNorm { .. }
                | Op::Gelu { .. }
                | Op::Silu
                | Op::HardSwish
                | Op::HardSigmoid { .. }
                | Op::Attention { .. }
                | Op::Reduce { op: ReduceOp::Mean, .. }
        )
    }

    /// True for elementwise ops (one output element from the same-index input elements, after
    /// broadcasting).
    pub fn is_elementwise(&self) -> bool {
        matches!(self, Op::Unary(_) | Op::Binary(_) | Op::Where | Op::Cast(_))
    }

    /// True for ops that only move or re-index elements (no arithmetic).
    pub fn is_movement(&self) -> bool {
        matches!(
            self,
            Op::Reshape(_) | Op::Permute(_) | Op::Expand(_) | Op::Slice(_) | Op::Concat { .. } | Op::Pad { .. }
        )
    }

    /// The attributes as `key=value` pairs, for the text form.
    pub fn attrs(&self) -> Vec<(&'static str, String)> {
        let list = |v: &[usize]| format!("[{}]", v.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(", "));
        match self {
            Op::Input { name } => vec![("name", format!("{name:?}"))],
            Op::Constant(t) => vec![("value", const_summary(t))],
            Op::Cast(d) => vec![("to", d.to_string())],
            Op::Reduce { axes, keepdim, .. } => vec![("axes", list(axes)), ("keepdim", keepdim.to_string())],
            Op::ArgReduce { axis, keepdim, select_last, .. } => {
                let mut v = vec![("axis", axis.to_string()), ("keepdim", keepdim.to_string())];
                if *select_last {
                    v.push(("select_last", "true".into()));
                }
                v
            }
            Op::Reshape(s) | Op::Expand(s) => vec![("shape", s.to_string())],
            Op::Permute(p) => vec![("perm", list(p))],
            Op::Slice(d) => vec![(
                "dims",
                format!(
                    "[{}]",
                    d.iter().map(|s| format!("{}:{}:{}", s.start, s.step, s.len)).collect::<Vec<_>>().join(", ")
                ),
            )],
            Op::Concat { axis } | Op::Gather { axis } | Op::GatherElements { axis } => vec![("axis", axis.to_string())],
            Op::Softmax { axis } | Op::LogSoftmax { axis } => vec![("axis", axis.to_string())],
            Op::Pad { pads, mode } => vec![
                ("pads", format!("{pads:?}")),
                (
                    "mode",
                    match mode {
                        PadMode::Constant(v) => format!("constant({v})"),
                        PadMode::Reflect => "reflect".into(),
                        PadMode::Edge => "edge".into(),
                        PadMode::Wrap => "wrap".into(),
                    },
                ),
            ],
            Op::Conv2d { window, groups } => {
                let mut v = window_attrs(window);
                v.push(("groups", groups.to_string()));
                v
            }
            Op::Pool2d { window, ceil_mode, count_include_pad, .. } => {
                let mut v = vec![("kernel", list(&window.kernel))];
                v.extend(window_attrs(window).into_iter().skip(1));
                if *ceil_mode {
                    v.push(("ceil_mode", "true".into()));
                }
                if *count_include_pad {
                    v.push(("count_include_pad", "true".into()));
                }
                v
            }
            Op::LayerNorm { axis, eps, .. } => vec![("axis", axis.to_string()), ("eps", format!("{eps:e}"))],
            Op::BatchNorm { eps } => vec![("eps", format!("{eps:e}"))],
            Op::Gelu { tanh } => vec![("approx", if *tanh { "tanh" } else { "erf" }.into())],
            Op::HardSigmoid { alpha, beta } => vec![("alpha", format!("{alpha}")), ("beta", format!("{beta}"))],
            Op::Attention { scale, causal, .. } => {
                let mut v = vec![("scale", format!("{scale}"))];
                if *causal {
                    v.push(("causal", "true".into()));
                }
                v
            }
            _ => vec![],
        }
    }
}

fn window_attrs(w: &Window2d) -> Vec<(&'static str, String)> {
    let list = |v: &[usize]| format!("[{}]", v.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(", "));
    vec![
        ("kernel", list(&w.kernel)),
        ("stride", list(&w.stride)),
        ("padding", list(&w.padding)),
        ("dilation", list(&w.dilation)),
    ]
}

/// A short printable form of a constant: its values when small, else its type and a content hash.
pub fn const_summary(t: &Arc<HostTensor>) -> String {
    if t.numel() <= 8 {
        let v = t.to_f64_vec();
        let items: Vec<String> = v.iter().map(|x| format!("{x}")).collect();
        if t.shape.is_empty() { items.join("") } else { format!("[{}]", items.join(", ")) }
    } else {
        let hex = blake3::Hash::from(crate::digest::digest(t)).to_hex();
        format!("<{} {:?} #{}>", t.dtype(), t.shape, &hex[..8])
    }
}

/// Where a node came from: the node of the captured (user's) graph it was created for. Passes copy
/// the origin of the node they rewrite, so every kernel can be mapped back to the user's ops.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Origin {
    /// Id of the node in the captured graph.
    pub node: u32,
    /// The user-level op name there (e.g. `layer_norm`).
    pub op: Arc<str>,
}

/// One node of the graph.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Node {
    /// The operation.
    pub op: Op,
    /// Operands, all with smaller ids than this node.
    pub inputs: Vec<NodeId>,
    /// Result type.
    pub ty: TensorType,
    /// Where this node came from.
    pub origin: Origin,
}

/// A named graph output.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Output {
    /// Output name.
    pub name: String,
    /// The node producing it.
    pub node: NodeId,
}

/// A dataflow graph in topological order.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Graph {
    /// The node arena; `NodeId(i)` is `nodes[i]`.
    pub nodes: Vec<Node>,
    /// Input nodes (each an [`Op::Input`]) in the order values are passed at run time.
    pub inputs: Vec<NodeId>,
    /// Outputs in the order results are returned.
    pub outputs: Vec<Output>,
}

impl Graph {
    /// The node with this id.
    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id.index()]
    }

    /// The type of a node.
    pub fn ty(&self, id: NodeId) -> &TensorType {
        &self.nodes[id.index()].ty
    }

    /// Appends a node whose type is already known and returns its id. Does not check types; run
    /// [`crate::verify::verify`] afterwards, or use [`Graph::add`] which infers.
    pub fn push(&mut self, node: Node) -> NodeId {
        let id = NodeId(self.nodes.len() as u32);
        self.nodes.push(node);
        id
    }

    /// Appends a node, inferring its type. The origin is the new node itself unless given.
    pub fn add(&mut self, op: Op, inputs: Vec<NodeId>, origin: Option<Origin>) -> Result<NodeId, crate::Error> {
        let tys: Vec<&TensorType> = inputs.iter().map(|&i| self.ty(i)).collect();
        let ty = crate::infer::infer(&op, &tys).map_err(|msg| crate::Error::build(op.name(), &tys, msg))?;
        let origin = origin.unwrap_or_else(|| Origin { node: self.nodes.len() as u32, op: Arc::from(op.name()) });
        Ok(self.push(Node { op, inputs, ty, origin }))
    }

    /// Adds a graph input.
    pub fn add_input(&mut self, name: &str, dtype: DType, shape: impl Into<Shape>) -> NodeId {
        let id = self.push(Node {
            op: Op::Input { name: name.to_string() },
            inputs: vec![],
            ty: TensorType::new(dtype, shape),
            origin: Origin { node: self.nodes.len() as u32, op: Arc::from("input") },
        });
        self.inputs.push(id);
        id
    }

    /// Marks a node as an output.
    pub fn add_output(&mut self, name: &str, node: NodeId) {
        self.outputs.push(Output { name: name.to_string(), node });
    }

    /// For every node, how many times it is used as an operand (outputs count once each).
    pub fn use_counts(&self) -> Vec<usize> {
        let mut c = vec![0usize; self.nodes.len()];
        for n in &self.nodes {
            for i in &n.inputs {
                c[i.index()] += 1;
            }
        }
        for o in &self.outputs {
            c[o.node.index()] += 1;
        }
        c
    }

    /// For every node, the nodes that use it (in id order, possibly repeated).
    pub fn users(&self) -> Vec<Vec<NodeId>> {
        let mut u = vec![Vec::new(); self.nodes.len()];
        for (i, n) in self.nodes.iter().enumerate() {
            for inp in &n.inputs {
                u[inp.index()].push(NodeId(i as u32));
            }
        }
        u
    }

    /// The input names in run-time order.
    pub fn input_names(&self) -> Vec<&str> {
        self.inputs
            .iter()
            .map(|&i| match &self.node(i).op {
                Op::Input { name } => name.as_str(),
                _ => "?",
            })
            .collect()
    }

    /// Iterates `(id, node)` pairs in topological order.
    pub fn iter(&self) -> impl Iterator<Item = (NodeId, &Node)> {
        self.nodes.iter().enumerate().map(|(i, n)| (NodeId(i as u32), n))
    }
}
