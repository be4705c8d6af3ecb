//! `autocast`: mixed precision on an f32 graph, as `torch.autocast` does on CUDA. The ops of
//! torch's "lower precision" list run in bf16 or f16; everything else stays f32.
//!
//! Contract:
//! - **Changed**: every f32 [`Op::MatMul`], [`Op::Conv2d`] (weight and bias too) and
//!   [`Op::Attention`]. Their f32 operands are cast down to the low dtype, the op runs in the low
//!   dtype and its result is cast back to f32 (`cast(op(cast(a, bf16), cast(b, bf16)), f32)`).
//!   Products accumulate in f32 on every backend (the IR's half-type rule for `matmul`, `conv2d`
//!   and the decomposed attention); only the stored product is rounded to the low dtype, as
//!   torch's bf16 `mm` rounds its output. An attention's bool mask stays bool, a float mask is
//!   cast with q, k, v; `decompose` later runs its scaled, masked softmax in f32 and only its two
//!   matmuls in the low dtype.
//! - **Unchanged**: reductions, norms (layer/batch norm), softmax and log-softmax, exp/log and
//!   every other op, matmuls and convolutions of other dtypes (f64, f16, integers), inputs and
//!   outputs: every node that is not a changed op keeps its type, so the graph's outputs stay f32.
//! - **Where it runs**: first in the pipeline (before `decompose`, which needs to see the low
//!   dtype of an attention to keep its softmax in f32), after `compile` re-types the graph for a
//!   call's signature. `constant_fold` then folds the casts of constant weights into low-precision
//!   constants (half the weight bytes) and `algebraic` drops `cast(cast(y, f32), bf16)` between
//!   consecutive low-precision ops (the up-cast of bf16 to f32 is exact).
//! - Casts take the origin of the node they serve, so kernels map back to the user's op.
//!
//! [`Precision::F32`] runs no pass; [`pipeline_for`](super::pipeline_for) inserts the pass for the
//! others, and the precision is part of the compile cache key.

use super::rewrite::Rewriter;
use crate::dtype::DType;
use crate::error::Error;
use crate::ir::{Graph, Op};
use serde::{Deserialize, Serialize};

/// The pass name.
pub const NAME: &str = "autocast";

/// The precision an f32 graph's matmuls, convolutions and attention run in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Precision {
    /// As captured (no autocast).
    #[default]
    F32,
    /// bf16 operands, f32 accumulation.
    BF16,
    /// f16 operands, f32 accumulation.
    F16,
}

impl Precision {
    /// Every precision, in the order the CLI lists them.
    pub const ALL: [Precision; 3] = [Precision::F32, Precision::BF16, Precision::F16];

    /// The name used on the command line and in JSON: `f32`, `bf16`, `f16`.
    pub fn name(self) -> &'static str {
        match self {
            Precision::F32 => "f32",
            Precision::BF16 => "bf16",
            Precision::F16 => "f16",
        }
    }

    /// The precision with this name (any case), if any.
    pub fn from_name(s: &str) -> Option<Precision> {
        Precision::ALL.into_iter().find(|p| p.name().eq_ignore_ascii_case(s))
    }

    /// The low dtype the autocast ops run in; `None` for f32 (no autocast).
    pub fn low_dtype(self) -> Option<DType> {
        match self {
            Precision::F32 => None,
            Precision::BF16 => Some(DType::BF16),
            Precision::F16 => Some(DType::F16),
        }
    }
}

impl std::fmt::Display for Precision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// [`autocast`] to bf16 (a plain `fn(&Graph)`, as [`super::Pass`] needs).
pub fn autocast_bf16(g: &Graph) -> Result<Graph, Error> {
    autocast(g, DType::BF16)
}

/// [`autocast`] to f16.
pub fn autocast_f16(g: &Graph) -> Result<Graph, Error> {
    autocast(g, DType::F16)
}

/// Whether autocast changes this node: an f32 matmul, convolution or attention.
fn autocasts(op: &Op, dtype: DType) -> bool {
    dtype == DType::F32 && matches!(op, Op::MatMul | Op::Conv2d { .. } | Op::Attention { .. })
}

/// Runs `g`'s f32 matmuls, convolutions and attention in `low` (bf16 or f16) with f32 results;
/// see the module documentation for the contract.
pub fn autocast(g: &Graph, low: DType) -> Result<Graph, Error> {
    if !matches!(low, DType::BF16 | DType::F16) {
        return Err(Error::Unsupported(format!("autocast to {low}: only bf16 and f16 are lower precisions")));
    }
    let mut rw = Rewriter::new(g);
    for (id, node) in g.iter() {
        if !autocasts(&node.op, node.ty.dtype) {
            rw.copy(id)?;
            continue;
        }
        let mut ins = Vec::with_capacity(node.inputs.len());
        for new in rw.mapped_inputs(id)? {
            let d = rw.new_graph().ty(new).dtype;
            ins.push(if d == DType::F32 { rw.emit(Op::Cast(low), vec![new], &node.origin)? } else { new });
        }
        let y = rw.emit(node.op.clone(), ins, &node.origin)?;
        let back = rw.emit(Op::Cast(DType::F32), vec![y], &node.origin)?;
        rw.replace(id, back);
    }
    rw.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compile::{CompileOptions, compile};
    use crate::ir::Graph as IrGraph;
    use crate::kernel::interp::InterpBackend;
    use crate::tensor::HostTensor;
    use crate::trace::Graph as Trace;
    use std::sync::Arc;

    /// `layer_norm(softmax(x @ w))`, f32.
    fn mm_softmax_ln() -> IrGraph {
        let g = Trace::new();
        let x = g.input("x", DType::F32, [6, 16]);
        let w = g.input("w", DType::F32, [16, 24]);
        let lw = g.input("lw", DType::F32, [24]);
        let lb = g.input("lb", DType::F32, [24]);
        g.output(&x.matmul(&w).softmax(-1).layer_norm(&lw, &lb, 1e-5));
        g.build().unwrap()
    }

    fn inputs(g: &IrGraph, seed: u64) -> Vec<HostTensor> {
        g.inputs
            .iter()
            .enumerate()
            .map(|(k, &i)| {
                let s = g.ty(i).shape.as_static().unwrap();
                HostTensor::random(DType::F32, s, seed + k as u64, -1.0, 1.0)
            })
            .collect()
    }

    fn count(g: &IrGraph, f: impl Fn(&Op, DType) -> bool) -> usize {
        g.nodes.iter().filter(|n| f(&n.op, n.ty.dtype)).count()
    }

    #[test]
    fn only_the_matmul_changes_dtype() {
        let g = mm_softmax_ln();
        for low in [DType::BF16, DType::F16] {
            let a = autocast(&g, low).unwrap();
            crate::verify::verify(&a).unwrap();
            assert_eq!(count(&a, |op, d| matches!(op, Op::MatMul) && d == low), 1);
            assert_eq!(count(&a, |op, _| matches!(op, Op::MatMul)), 1);
            // Every node of another kind keeps its f32 type: softmax, layer norm, inputs.
            assert!(a.nodes.iter().all(|n| matches!(n.op, Op::MatMul | Op::Cast(_)) || n.ty.dtype == DType::F32));
            assert_eq!(count(&a, |op, _| matches!(op, Op::Softmax { .. } | Op::LayerNorm { .. })), 2);
            // Two casts down, one back up.
            assert_eq!(count(&a, |op, _| *op == Op::Cast(low)), 2);
            assert_eq!(count(&a, |op, _| *op == Op::Cast(DType::F32)), 1);
            assert!(a.outputs.iter().all(|o| a.ty(o.node).dtype == DType::F32));
            assert_eq!(a.inputs.len(), g.inputs.len());
            // The full pipeline after it still verifies; decompose leaves the matmul in `low`.
            let p = crate::passes::optimize(&a).unwrap();
            assert_eq!(count(&p, |op, d| matches!(op, Op::MatMul) && d == low), 1);
        }
    }

    #[test]
    fn other_dtypes_and_ops_are_untouched() {
        let g = Trace::new();
        let x = g.input("x", DType::F64, [4, 4]);
        g.output(&x.matmul(&x).exp());
        let i = g.input("i", DType::I32, [3, 3]);
        g.output(&i.matmul(&i));
        let g = g.build().unwrap();
        let a = autocast(&g, DType::BF16).unwrap();
        assert_eq!(crate::text::print(&a), crate::text::print(&g));
        assert!(autocast(&g, DType::F32).is_err());
    }

    #[test]
    fn attention_runs_its_matmuls_low_and_its_softmax_in_f32() {
        let g = Trace::new();
        let q = g.input("q", DType::F32, [2, 5, 8]);
        let k = g.input("k", DType::F32, [2, 7, 8]);
        let v = g.input("v", DType::F32, [2, 7, 8]);
        g.output(&q.attention(&k, &v, None, None, false));
        let g = g.build().unwrap();
        let a = autocast(&g, DType::BF16).unwrap();
        assert_eq!(count(&a, |op, d| matches!(op, Op::Attention { .. }) && d == DType::BF16), 1);
        let p = crate::passes::optimize(&a).unwrap();
        assert_eq!(count(&p, |op, d| matches!(op, Op::MatMul) && d == DType::BF16), 2);
        assert_eq!(count(&p, |op, d| matches!(op, Op::MatMul) && d == DType::F32), 0);
        // The softmax's exp and reductions compute in f32.
        assert!(p.nodes.iter().filter(|n| matches!(n.op, Op::Reduce { .. })).all(|n| n.ty.dtype == DType::F32));
        // Close to the f32 reference within a bf16 bound.
        let ins = inputs(&g, 3);
        let (want, got) = (crate::cpu::run(&g, &ins).unwrap(), crate::cpu::run(&p, &ins).unwrap());
        assert!(rel_l2(&got[0], &want[0]) < 1e-2);
    }

    fn rel_l2(a: &HostTensor, b: &HostTensor) -> f64 {
        let (a, b) = (a.to_f64_vec(), b.to_f64_vec());
        let num: f64 = a.iter().zip(&b).map(|(x, y)| (x - y) * (x - y)).sum();
        let den: f64 = b.iter().map(|y| y * y).sum();
        (num / den).sqrt()
    }

    #[test]
    fn compiled_on_the_interpreter_is_close_to_f32_within_a_bf16_bound() {
        let g = mm_softmax_ln();
        let ins = inputs(&g, 11);
        let want = crate::cpu::run(&g, &ins).unwrap();
        let mut errs = Vec::new();
        for p in Precision::ALL {
            let opts = CompileOptions { precision: p, cache_dir: None, debug_dir: None, ..CompileOptions::default() };
            let c = compile(&g, Arc::new(InterpBackend::new()), opts).unwrap();
            let got = c.run(&ins).unwrap();
            assert_eq!((got[0].dtype(), &got[0].shape), (DType::F32, &want[0].shape), "{p}");
            errs.push(rel_l2(&got[0], &want[0]));
            let program = c.program().unwrap();
            let low = program.buffers.iter().any(|b| p.low_dtype().is_some_and(|d| b.dtype == d));
            assert_eq!(low, p != Precision::F32, "{p}: low-precision buffers in the program");
        }
        // f32 is exact to rounding; bf16 has 8 significant bits (2^-8 = 3.9e-3), f16 11.
        assert!(errs[0] < 1e-5, "{errs:?}");
        assert!(errs[1] > errs[0] && errs[1] < 2e-2, "bf16: {errs:?}");
        assert!(errs[2] < 3e-3, "f16: {errs:?}");
    }

    #[test]
    fn the_precision_is_part_of_the_cache_key() {
        let dir = std::env::temp_dir().join(format!("sinter-autocast-cache-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let g = mm_softmax_ln();
        let at = |p: Precision| {
            let opts =
                CompileOptions { precision: p, cache_dir: Some(dir.clone()), debug_dir: None, ..Default::default() };
            let c = compile(&g, Arc::new(InterpBackend::new()), opts).unwrap();
            (c.events()[0].stats.cache_hit, c.program().unwrap())
        };
        let (hit, f32_program) = at(Precision::F32);
        assert!(!hit);
        for p in [Precision::BF16, Precision::F16] {
            let (hit, program) = at(p);
            assert!(!hit, "{p} reused another precision's program");
            assert_ne!(program, f32_program, "{p}");
            assert_eq!(at(p), (true, program), "a second {p} compile hits its own entry");
        }
        assert!(at(Precision::F32).0);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn convolutions_cast_weight_and_bias() {
        let g = Trace::new();
        let x = g.input("x", DType::F32, [1, 2, 5, 5]);
        let w = g.input("w", DType::F32, [3, 2, 3, 3]);
        let b = g.input("b", DType::F32, [3]);
        g.output(&x.conv2d(&w, Some(&b), [1, 1], [1, 1, 1, 1], [1, 1], 1).gelu());
        let g = g.build().unwrap();
        let a = autocast(&g, DType::F16).unwrap();
        assert_eq!(count(&a, |op, d| matches!(op, Op::Conv2d { .. }) && d == DType::F16), 1);
        assert_eq!(count(&a, |op, _| *op == Op::Cast(DType::F16)), 3);
        assert_eq!(count(&a, |op, d| matches!(op, Op::Gelu { .. }) && d == DType::F32), 1);
        let ins = inputs(&g, 5);
        let (want, got) = (crate::cpu::run(&g, &ins).unwrap(), crate::cpu::run(&a, &ins).unwrap());
        assert!(rel_l2(&got[0], &want[0]) < 3e-3);
    }
}
