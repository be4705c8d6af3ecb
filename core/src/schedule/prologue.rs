//! Operand prologues of matmuls: a matmul whose operands are fp8 values widened to f32 reads the
//! fp8 buffers directly, the widening done by the loader (Inductor's prologue fusion of a cast).
//!
//! Contract:
//!
//! * **Legality** ([`Sched::prologue_legal`]): the matmul's dtype is f32; each operand, through
//!   movement ops (reshape, permute, expand, slice), is a `cast(x, f32)` of an fp8 value `x`,
//!   both of the same fp8 dtype (the kernel IR's [`MatmulBody`](crate::kernel::MatmulBody) has
//!   one operand dtype); the backend's capabilities list that dtype; the matmul is not part of a
//!   fused attention. Widening fp8 to f32 is exact ([`crate::fp8`]), so reading `x` and
//!   converting in the loader computes bit for bit what the graph says: the matmul becomes
//!   `in_dtype = f8e4m3 | f8e5m2`, `acc_dtype = f32`, its value (`Acc(0)`) typed f32 as the node
//!   is. A refusal is recorded as `refused: prologue: <reason>` when an operand is such a cast.
//! * **Profitability**: always taken when legal. The cast would otherwise be materialized as an
//!   f32 copy of each operand (a matmul reads strided buffers): one kernel and 1 + 4 + 4 bytes
//!   per element against 1 read by the product, and the fp8 product is what vendor libraries
//!   (cuBLASLt) and fp8 tensor cores take. A backend without a native fp8 product widens in its
//!   loader (CUDA's CUDA-core tile) at no extra traffic.
//! * **Placement** (`matmul_plan.rs`): stage A materializes the compute producer *under* the cast
//!   instead of the cast (so the matmul finds an fp8 buffer), and the matmul reads each operand
//!   through [`Sched::view_index_widened`]. When an operand's movement chain is no strided view
//!   (a copy would be needed), or when a batched first operand is folded into rows (its rows are
//!   copied), the prologue is dropped for that matmul (both operands read as f32, copies with the
//!   cast inlined, which is correct since the cast node itself was not materialized) and recorded
//!   as `refused: prologue: ...`.

use super::plan::Sched;
use crate::dtype::DType;
use crate::ir::{NodeId, Op};

impl Sched<'_> {
    /// The node under `n`'s movement ops (reshape, permute, expand, slice).
    pub(super) fn through_movement(&self, mut n: NodeId) -> NodeId {
        loop {
            let node = self.g.node(n);
            let movement = matches!(node.op, Op::Reshape(_) | Op::Permute(_) | Op::Expand(_) | Op::Slice(_));
            match node.inputs.first() {
                Some(&i) if movement => n = i,
                _ => return n,
            }
        }
    }

    /// The dtype `x` was widened from when `x` is, through movement ops, `cast(y, f32)` of a
    /// narrower float `y` (every value exact in f32): an fp8 matmul operand here, a bf16/f16
    /// attention operand under autocast (`attention::scaled_operand`).
    pub(super) fn widened_from(&self, x: NodeId) -> Option<DType> {
        let c = self.g.node(self.through_movement(x));
        match c.op {
            Op::Cast(DType::F32) => {
                Some(self.g.ty(c.inputs[0]).dtype).filter(|d| d.is_fp8() || matches!(d, DType::BF16 | DType::F16))
            }
            _ => None,
        }
    }

    /// Whether matmul `mm` may read its operands as fp8 (see the module docs): `None` when no
    /// operand is a widened fp8 value (nothing to decide), else the dtype or the refusal.
    pub(super) fn prologue_legal(&self, mm: NodeId) -> Option<Result<DType, String>> {
        let node = self.g.node(mm);
        let from: Vec<Option<DType>> =
            node.inputs.iter().map(|&o| self.widened_from(o).filter(|d| d.is_fp8())).collect();
        let d = from.iter().flatten().next().copied()?;
        Some(if !self.opts.fusion {
            Err("eager mode (one kernel per op)".into())
        } else if node.ty.dtype != DType::F32 {
            Err(format!("matmul {mm} is {}, not f32", node.ty.dtype))
        } else if self.attn[mm.index()].is_some() || self.inner_attn[mm.index()] {
            Err(format!("matmul {mm} is part of a fused attention"))
        } else if from.iter().any(|f| *f != Some(d)) {
            Err(format!(
                "matmul {mm} operands are widened from {} (one operand dtype per product)",
                from.iter()
                    .map(|f| f.map_or("a non-fp8 value".to_string(), |d| d.name().into()))
                    .collect::<Vec<_>>()
                    .join(" and ")
            ))
        } else if !self.caps.dtypes.contains(&d) {
            Err(format!("the {} backend does not support {d}", self.caps.backend))
        } else {
            Ok(d)
        })
    }

    /// Decides the prologue of every live matmul before stage A; refusals are recorded here, the
    /// prologues taken when the matmul is placed ([`Sched::record_prologue`]).
    pub(super) fn plan_prologues(&mut self) {
        for i in 0..self.g.nodes.len() {
            let id = NodeId(i as u32);
            if !self.live[i] || !matches!(self.g.node(id).op, Op::MatMul) {
                continue;
            }
            match self.prologue_legal(id) {
                None => {}
                Some(Ok(d)) => self.prologue[i] = Some(d),
                Some(Err(why)) => self.decide(vec![id.0], false, format!("refused: prologue: {why}"), vec![]),
            }
        }
    }

    /// Records the prologue of matmul `mm`, placed in kernel `pos` reading `d` operands.
    pub(super) fn record_prologue(&mut self, mm: NodeId, d: DType, pos: usize) {
        let casts: Vec<u32> =
            self.g.node(mm).inputs.iter().map(|&o| self.through_movement(o).0).chain([mm.0]).collect();
        self.decide(
            casts,
            true,
            format!(
                "prologue: matmul {mm} reads its {d} operands directly (the cast to f32 is exact: widened in the \
                 loader instead of an f32 copy of each operand)"
            ),
            vec![pos],
        );
    }
}
