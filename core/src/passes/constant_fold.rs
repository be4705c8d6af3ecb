//! `constant_fold`: evaluates, with the CPU reference, every node whose operands are all
//! constants and whose result is small, and replaces it by a constant. Folding cascades: a folded
//! node is a constant for the nodes after it. Large results are left alone (a broadcast of a
//! scalar to a big shape is cheaper to compute than to store). A cast of a constant to a type no
//! wider than its own is folded whatever its size: the result takes no more memory than its operand
//! (which `dce` drops when nothing else reads it), and every run saves a kernel. These are
//! `autocast`'s casts of f32 weights: unfolded, EfficientNet-B0 at bf16 ran 59 cast kernels, 282 us
//! of its 1.72 ms per run (H200, session 11). A node the CPU reference cannot evaluate is kept as
//! is, so its error surfaces when the graph runs.
//!
//! [`constant_fold_outer`] (dynamic compiles, `crate::kernel::dynamic`) also leaves alone an
//! `Expand` that broadcasts along the outermost dimension (a class token expanded to the batch):
//! folded, its data would depend on the batch; unfolded, consumers read it through index
//! arithmetic that does not.

use super::rewrite::{Rewriter, as_constant};
use crate::error::Error;
use crate::ir::{Graph, NodeId, Op, TensorType};
use crate::shape::Shape;
use crate::tensor::HostTensor;

/// The pass name.
pub const NAME: &str = "constant_fold";

/// Largest result (in elements) that is folded.
pub const FOLD_LIMIT: usize = 4096;

/// Largest constant operand (in elements) a folded node may read.
const OPERAND_LIMIT: usize = 16 * FOLD_LIMIT;

/// Replaces small all-constant computations by their values.
pub fn constant_fold(g: &Graph) -> Result<Graph, Error> {
    fold(g, false)
}

/// [`constant_fold`], leaving alone expands along the outermost dimension (see the module docs).
pub fn constant_fold_outer(g: &Graph) -> Result<Graph, Error> {
    fold(g, true)
}

/// True when `op` on operand shape `from` broadcasts to a larger outermost dimension (or adds
/// leading dimensions).
fn broadcasts_outer(op: &Op, from: &Shape, to: &Shape) -> bool {
    let Op::Expand(_) = op else { return false };
    to.rank() > from.rank() || from.dims().first() != to.dims().first()
}

fn fold(g: &Graph, keep_outer: bool) -> Result<Graph, Error> {
    let mut rw = Rewriter::new(g);
    for (id, node) in g.iter() {
        if node.inputs.is_empty() {
            rw.copy(id)?;
            continue;
        }
        let ins = rw.mapped_inputs(id)?;
        let ng = rw.new_graph();
        let small = node.ty.shape.numel().is_some_and(|n| n <= FOLD_LIMIT)
            && !(keep_outer && broadcasts_outer(&node.op, &g.ty(node.inputs[0]).shape, &node.ty.shape));
        let all_const = ins.iter().all(|&i| as_constant(ng, i).is_some_and(|t| t.numel() <= OPERAND_LIMIT));
        // A narrowing cast of a constant folds at any size; any other node when small.
        let folded = match narrowing_cast_of_constant(ng, &node.op, &ins) {
            Some(c) => c.narrow_float(node.ty.dtype).or_else(|| evaluate(ng, &node.op, &ins, &node.ty)),
            None if small && all_const => evaluate(ng, &node.op, &ins, &node.ty),
            None => None,
        };
        if let Some(t) = folded {
            let c = rw.emit_constant(t, &node.origin)?;
            rw.replace(id, c);
            continue;
        }
        rw.copy(id)?;
    }
    rw.finish()
}

/// The constant `op` casts, when it casts one constant to a dtype no wider than the constant's
/// own. Float-to-float ones convert directly ([`HostTensor::narrow_float`]: the reference's values,
/// without its per-element path; 3.1 s of GPT-2 small's bf16 compile went there, session 20).
fn narrowing_cast_of_constant<'g>(g: &'g Graph, op: &Op, ins: &[NodeId]) -> Option<&'g HostTensor> {
    let Op::Cast(to) = op else { return None };
    let [x] = ins else { return None };
    as_constant(g, *x).map(|t| &**t).filter(|t| to.size_bytes() <= t.dtype().size_bytes())
}

/// Runs `op` on the constants `ins` of `g` with the CPU reference; `None` if that fails or gives a
/// value of another type than `ty`.
fn evaluate(g: &Graph, op: &Op, ins: &[NodeId], ty: &TensorType) -> Option<HostTensor> {
    let mut tiny = Graph::default();
    let ids: Vec<NodeId> = ins.iter().map(|&i| tiny.push(g.node(i).clone())).collect();
    let out = tiny.add(op.clone(), ids, None).ok()?;
    tiny.add_output("value", out);
    let t = crate::cpu::run(&tiny, &[]).ok()?.pop()?;
    (t.dtype() == ty.dtype && Shape::new(&t.shape) == ty.shape).then_some(t)
}
