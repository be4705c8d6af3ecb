//! `algebraic`: simplifications that never change a result:
//!
//! - `x * 1`, `1 * x`, `x / 1`, `x + 0`, `0 + x`, `x - 0` become `x`, only when the result has
//!   `x`'s shape and dtype (a constant that broadcasts `x` to a larger shape is kept). The one
//!   visible difference: `-0.0 + 0.0` is `+0.0`, so `x + 0` may turn a `+0.0` result into `-0.0`
//!   (equal under `==`).
//! - `reshape(reshape(x))` becomes one reshape; `permute(permute(x))` one permute;
//!   `expand(expand(x))` one expand;
//! - a reshape, permute or expand that changes nothing, a cast to the same dtype, and a round trip
//!   through a wider type (`cast(cast(x: bf16, f32), bf16)`), disappear; a round trip around
//!   movement ops (`cast(reshape(permute(cast(x: bf16, f32))), bf16)`, autocast's casts around an
//!   attention's heads) becomes the movement ops on `x`.
//! - a `gather` whose indices are a constant scalar or an evenly spaced constant vector, all in
//!   range, becomes a `slice` (and a `reshape` dropping the axis for a scalar index): `qkv[0]` of
//!   an exported `nn.MultiheadAttention`. A slice is a view the scheduler reads through strides
//!   (a matmul or attention operand); a gather loads its index and is copied. Measured on
//!   ViT-B/16 (H200, session 23): the heads' `q`, `k`, `v` were four copy kernels a layer.

use super::rewrite::{Rewriter, as_constant};
use crate::dtype::DType;
use crate::error::Error;
use crate::ir::{BinaryOp, Graph, NodeId, Op, SliceDim};

/// The pass name.
pub const NAME: &str = "algebraic";

/// True when every value of `from` is exactly representable in `to`.
fn widens_exactly(from: DType, to: DType) -> bool {
    use DType::*;
    match (from, to) {
        (a, b) if a == b => true,
        (F16 | BF16, F32 | F64) | (F32, F64) => true,
        // fp8 values are all representable in every wider float (e5m2 is binary16's prefix).
        (F8E4M3 | F8E5M2, F16 | BF16 | F32 | F64) => true,
        (I8, I16 | I32 | I64) | (I16, I32 | I64) | (I32, I64) => true,
        (U8, U16 | U32 | U64 | I16 | I32 | I64) | (U16, U32 | U64 | I32 | I64) | (U32, U64 | I64) => true,
        (Bool, _) => true,
        (I8 | I16 | U8 | U16, F32 | F64) | (I32 | U32, F64) => true,
        _ => false,
    }
}

fn all_equal(g: &Graph, id: NodeId, v: f64) -> bool {
    as_constant(g, id).is_some_and(|t| t.numel() > 0 && t.to_f64_vec().iter().all(|&x| x == v))
}

/// The slice equal to `gather(x, idx, axis)` when `idx` is a constant scalar or an evenly spaced
/// vector (stride not 0, unless one element) with every index in range after counting negatives
/// from the end, and `x`'s shape is static: the slice's dims and whether the axis is then dropped
/// (a scalar index).
fn gather_as_slice(g: &Graph, x: NodeId, idx: NodeId, axis: usize) -> Option<(Vec<SliceDim>, bool)> {
    let t = as_constant(g, idx)?;
    if !t.dtype().is_int() || t.shape.len() > 1 || t.numel() == 0 {
        return None;
    }
    let shape = g.ty(x).shape.as_static()?;
    let n = *shape.get(axis)? as i64;
    let v: Vec<i64> = t.to_i64_vec().into_iter().map(|i| if i < 0 { i + n } else { i }).collect();
    if v.iter().any(|&i| i < 0 || i >= n) {
        return None;
    }
    let step = if v.len() > 1 { v[1] - v[0] } else { 1 };
    if step == 0 || v.iter().enumerate().any(|(k, &i)| i != v[0] + step * k as i64) {
        return None;
    }
    let dims = shape
        .iter()
        .enumerate()
        .map(|(a, &e)| {
            if a == axis {
                SliceDim { start: v[0] as usize, step, len: v.len() }
            } else {
                SliceDim { start: 0, step: 1, len: e }
            }
        })
        .collect();
    Some((dims, t.shape.is_empty()))
}

/// Applies the simplifications above in one forward walk. Nodes left without users are removed by
/// `dce`.
pub fn algebraic(g: &Graph) -> Result<Graph, Error> {
    let mut rw = Rewriter::new(g);
    for (id, node) in g.iter() {
        if matches!(node.op, Op::Input { .. }) {
            rw.copy(id)?;
            continue;
        }
        let ins = rw.mapped_inputs(id)?;
        let ng = rw.new_graph();
        // The node's value is that of an existing new node.
        let mut alias: Option<NodeId> = None;
        // Or the node is rebuilt as `op` applied to `src`.
        let mut rebuilt: Option<(Op, NodeId)> = None;
        match &node.op {
            Op::Binary(b) => {
                let (x, y) = (ins[0], ins[1]);
                let keeps = |v: NodeId| ng.ty(v) == &node.ty;
                alias = match b {
                    BinaryOp::Mul if keeps(x) && all_equal(ng, y, 1.0) => Some(x),
                    BinaryOp::Mul if keeps(y) && all_equal(ng, x, 1.0) => Some(y),
                    BinaryOp::Div if keeps(x) && all_equal(ng, y, 1.0) => Some(x),
                    BinaryOp::Add if keeps(x) && all_equal(ng, y, 0.0) => Some(x),
                    BinaryOp::Add if keeps(y) && all_equal(ng, x, 0.0) => Some(y),
                    BinaryOp::Sub if keeps(x) && all_equal(ng, y, 0.0) => Some(x),
                    _ => None,
                };
            }
            Op::Cast(d) if ng.ty(ins[0]).dtype == *d => alias = Some(ins[0]),
            // cast(cast(x, wider), x's dtype) is x when the inner cast is exact.
            // Also through movement ops: cast(reshape(permute(cast(y: bf16, f32))), bf16) is
            // reshape(permute(y)), the movement chain rebuilt on y.
            Op::Cast(d) => {
                let mut chain: Vec<Op> = Vec::new();
                let mut cur = ins[0];
                while let op @ (Op::Reshape(_) | Op::Permute(_) | Op::Slice(_) | Op::Expand(_)) = &ng.node(cur).op {
                    chain.push(op.clone());
                    cur = ng.node(cur).inputs[0];
                }
                let inner = ng.node(cur);
                if let Op::Cast(mid) = inner.op {
                    let src = inner.inputs[0];
                    if ng.ty(src).dtype == *d && widens_exactly(*d, mid) {
                        let mut v = src;
                        for op in chain.into_iter().rev() {
                            v = rw.emit(op, vec![v], &node.origin)?;
                        }
                        alias = Some(v);
                    }
                }
            }
            Op::Reshape(s) => {
                let x = ins[0];
                let src = match &ng.node(x).op {
                    Op::Reshape(_) => ng.node(x).inputs[0],
                    _ => x,
                };
                if &ng.ty(src).shape == s {
                    alias = Some(src);
                } else if src != x {
                    rebuilt = Some((Op::Reshape(s.clone()), src));
                }
            }
            Op::Expand(s) => {
                let x = ins[0];
                let src = match &ng.node(x).op {
                    Op::Expand(_) => ng.node(x).inputs[0],
                    _ => x,
                };
                if &ng.ty(src).shape == s {
                    alias = Some(src);
                } else if src != x {
                    rebuilt = Some((Op::Expand(s.clone()), src));
                }
            }
            Op::Permute(p) => {
                let x = ins[0];
                // permute(permute(y, p1), p) reads output axis i from y's axis p1[p[i]].
                let (src, q) = match &ng.node(x).op {
                    Op::Permute(p1) if p1.len() == p.len() => {
                        (ng.node(x).inputs[0], p.iter().map(|&i| p1[i]).collect::<Vec<_>>())
                    }
                    _ => (x, p.clone()),
                };
                if q.iter().enumerate().all(|(i, &a)| i == a) {
                    alias = Some(src);
                } else if src != x {
                    rebuilt = Some((Op::Permute(q), src));
                }
            }
            Op::Gather { axis } => {
                if let Some((dims, scalar)) = gather_as_slice(ng, ins[0], ins[1], *axis) {
                    if scalar {
                        let sliced = rw.emit(Op::Slice(dims), vec![ins[0]], &node.origin)?;
                        rebuilt = Some((Op::Reshape(node.ty.shape.clone()), sliced));
                    } else {
                        rebuilt = Some((Op::Slice(dims), ins[0]));
                    }
                }
            }
            _ => {}
        }
        if let Some(a) = alias {
            rw.replace(id, a);
        } else if let Some((op, src)) = rebuilt {
            let new = rw.emit(op, vec![src], &node.origin)?;
            rw.replace(id, new);
        } else {
            rw.copy(id)?;
        }
    }
    rw.finish()
}
