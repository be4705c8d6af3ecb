//! Hand-built kernel-IR programs the backends' renderer tests share (the same program rendered by
//! each backend): a broadcast pointwise chain and a two-reduction softmax.

use super::builder::{KernelBuilder, ProgramBuilder, lane, st};
use crate::DType;
use crate::ir::{BinaryOp, UnaryOp};
use crate::kernel::{Access, Expr, Index, Program, RedOp, ReduceBody, ReduceStrategy, Reduction, Var};

/// `y = relu(x + b) * 2` with `x: [rows, cols]`, `b: [cols]` broadcast over rows.
pub fn add_relu_mul(rows: usize, cols: usize, d: DType) -> Program {
    let mut p = ProgramBuilder::new();
    let x = p.input("x", d, &[rows, cols]);
    let b = p.input("b", d, &[cols]);
    let y = p.output("y", d, &[rows, cols]);
    let mut kb = KernelBuilder::new("k0_add_relu_mul", &["add", "relu", "mul"]);
    let ax = kb.arg(&p, x, Access::Read);
    let ab = kb.arg(&p, b, Access::Read);
    let ay = kb.arg(&p, y, Access::Write);
    let vx = kb.load(ax, lane());
    let vb =
        kb.load(ab, lane().rem(cols as i64).simplify(&|v| (v == Var::Lane).then_some((0, (rows * cols) as i64 - 1))));
    let s = kb.e(Expr::Binary(BinaryOp::Add, vx, vb), d);
    let r = kb.e(Expr::Unary(UnaryOp::Relu, s), d);
    let two = kb.konst(2.0, d);
    let m = kb.e(Expr::Binary(BinaryOp::Mul, r, two), d);
    p.kernel(kb.pointwise(rows * cols, vec![st(ay, lane(), m)]));
    p.build_checked()
}

/// Softmax over the last axis of `x: [rows, len]`: max, then sum of exp, then the division.
pub fn softmax(rows: usize, len: usize, d: DType, strategy: ReduceStrategy) -> Program {
    let mut p = ProgramBuilder::new();
    let x = p.input("x", d, &[rows, len]);
    let y = p.output("y", d, &[rows, len]);
    let mut kb = KernelBuilder::new("k0_softmax", &["softmax"]);
    let ax = kb.arg(&p, x, Access::Read);
    let ay = kb.arg(&p, y, Access::Write);
    let idx = Index::var(Var::Row).mul(len as i64).add(Index::var(Var::Red));
    let v = kb.load(ax, idx.clone());
    let vf = kb.e(Expr::Cast(v), DType::F32);
    let m = kb.e(Expr::Acc(0), DType::F32);
    let dlt = kb.e(Expr::Binary(BinaryOp::Sub, vf, m), DType::F32);
    let ex = kb.e(Expr::Unary(UnaryOp::Exp, dlt), DType::F32);
    let s = kb.e(Expr::Acc(1), DType::F32);
    let q = kb.e(Expr::Binary(BinaryOp::Div, ex, s), DType::F32);
    let qd = kb.e(Expr::Cast(q), d);
    p.kernel(kb.reduce(ReduceBody {
        rows,
        len,
        reductions: vec![
            Reduction { op: RedOp::Max, value: vf, slot: 0, dtype: DType::F32 },
            Reduction { op: RedOp::Sum, value: ex, slot: 1, dtype: DType::F32 },
        ],
        elem_stores: vec![st(ay, idx, qd)],
        row_stores: vec![],
        strategy,
    }));
    p.build_checked()
}

/// How an attention test program masks its scores.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttnMask {
    /// No mask.
    None,
    /// An f32 `[m, kv]` input added to the scaled scores.
    Additive,
    /// A bool `[m, kv]` input: false keys get `-inf`.
    Bool,
}

/// The shape and options of a hand-built attention program ([`attention`]).
#[derive(Clone, Debug, PartialEq)]
pub struct AttnCase {
    /// Outer batch.
    pub batch: usize,
    /// Query heads.
    pub heads: usize,
    /// Key/value heads (divides `heads`).
    pub kv_heads: usize,
    /// Queries.
    pub m: usize,
    /// Keys.
    pub kv: usize,
    /// Query/key head dimension.
    pub d: usize,
    /// Value head dimension.
    pub dv: usize,
    /// Dtype of q, k, v and the output.
    pub dtype: DType,
    /// Causal offset (keys `j > i + o` masked).
    pub causal: Option<usize>,
    /// Mask input.
    pub mask: AttnMask,
    /// `[batch, seq, heads, dim]` inputs (as projections reshaped without a transpose) instead
    /// of `[batch, heads, seq, dim]`.
    pub bshd: bool,
    /// The probabilities under torch's export guard `where(isnan(p), 0, p)`: a row whose every
    /// key is masked gives zeros instead of NaN.
    pub nan_guard: bool,
    /// The scale applied as `scaled_dot_product_attention`'s math form exports it: `q` and `k^T`
    /// each times `scale ** 0.5` before the product, instead of the scores times `scale`.
    pub split_scale: bool,
}

impl AttnCase {
    /// A plain case: `batch x heads` heads, `m` queries against `kv` keys of dimension `d`.
    pub fn new(batch: usize, heads: usize, m: usize, kv: usize, d: usize, dtype: DType) -> AttnCase {
        AttnCase {
            batch,
            heads,
            kv_heads: heads,
            m,
            kv,
            d,
            dv: d,
            dtype,
            causal: None,
            mask: AttnMask::None,
            bshd: false,
            nan_guard: false,
            split_scale: false,
        }
    }

    /// The scale, `1/sqrt(d)`.
    pub fn scale(&self) -> f64 {
        1.0 / (self.d as f64).sqrt()
    }

    /// Input shapes in order: q, k, v, then the mask if any.
    pub fn input_shapes(&self) -> Vec<Vec<usize>> {
        let sh = |h: usize, s: usize, d: usize| {
            if self.bshd { vec![self.batch, s, h, d] } else { vec![self.batch, h, s, d] }
        };
        let mut v = vec![
            sh(self.heads, self.m, self.d),
            sh(self.kv_heads, self.kv, self.d),
            sh(self.kv_heads, self.kv, self.dv),
        ];
        if self.mask != AttnMask::None {
            v.push(vec![self.m, self.kv]);
        }
        v
    }
}

/// One fused attention kernel over `case` (see [`AttnCase`]): output `y` is `[batch, heads, m,
/// dv]` in the case's dtype, scores scaled by `1/sqrt(d)`, masked as the case says.
pub fn attention(c: &AttnCase) -> Program {
    use crate::kernel::{AttentionBody, AttnOperand};
    let mut p = ProgramBuilder::new();
    let shapes = c.input_shapes();
    let q = p.input("q", c.dtype, &shapes[0]);
    let k = p.input("k", c.dtype, &shapes[1]);
    let v = p.input("v", c.dtype, &shapes[2]);
    let mask = match c.mask {
        AttnMask::None => None,
        AttnMask::Additive => Some(p.input("mask", DType::F32, &shapes[3])),
        AttnMask::Bool => Some(p.input("mask", DType::Bool, &shapes[3])),
    };
    let y = p.output("y", c.dtype, &[c.batch, c.heads, c.m, c.dv]);
    let mut kb = KernelBuilder::new("k0_attention", &["attention"]);
    let (aq, ak, av) = (kb.arg(&p, q, Access::Read), kb.arg(&p, k, Access::Read), kb.arg(&p, v, Access::Read));
    let am = mask.map(|m| kb.arg(&p, m, Access::Read));
    let ay = kb.arg(&p, y, Access::Write);
    let operand = |arg: usize, h: usize, s: usize, d: usize| {
        let (s_head, s_row) = if c.bshd { (d, h * d) } else { (s * d, d) };
        AttnOperand { arg, offset: 0, s_batch: h * s * d, s_head, s_row, group: c.heads / h }
    };
    let raw = kb.e(Expr::Acc(1), DType::F32);
    let scale = kb.konst(c.scale(), DType::F32);
    let mut score = kb.e(Expr::Binary(BinaryOp::Mul, raw, scale), DType::F32);
    if let Some(am) = am {
        let at = Index::var(Var::M).mul(c.kv as i64).add(Index::var(Var::Key));
        let mv = kb.load(am, at);
        score = if c.mask == AttnMask::Additive {
            kb.e(Expr::Binary(BinaryOp::Add, score, mv), DType::F32)
        } else {
            let ninf = kb.konst(f64::NEG_INFINITY, DType::F32);
            kb.e(Expr::Where(mv, score, ninf), DType::F32)
        };
    }
    let mut out = kb.e(Expr::Acc(0), DType::F32);
    if c.nan_guard {
        let nan = kb.e(Expr::Unary(crate::ir::UnaryOp::IsNan, out), DType::Bool);
        let zero = kb.konst(0.0, DType::F32);
        out = kb.e(Expr::Where(nan, zero, out), DType::F32);
    }
    let outd = kb.e(Expr::Cast(out), c.dtype);
    let at = Index::var(Var::Batch)
        .mul((c.m * c.dv) as i64)
        .add(Index::var(Var::M).mul(c.dv as i64))
        .add(Index::var(Var::N));
    p.kernel(kb.attention(AttentionBody {
        batch: c.batch,
        heads: c.heads,
        m: c.m,
        kv: c.kv,
        d: c.d,
        dv: c.dv,
        q: operand(aq, c.heads, c.m, c.d),
        k: operand(ak, c.kv_heads, c.kv, c.d),
        v: operand(av, c.kv_heads, c.kv, c.dv),
        in_dtype: c.dtype,
        p_dtype: c.dtype,
        score,
        causal: c.causal,
        stores: vec![st(ay, at, outd)],
    }));
    p.build_checked()
}

/// One fused attention kernel reading q, k and v as views of one `[seq, batch, 3 * heads * d]`
/// buffer (`[seq, batch, 3, heads, d]`: the packed in-projection of a legacy-exported
/// `nn.MultiheadAttention`, as torchvision's ViT reads it), self-attention over `seq` tokens,
/// scores scaled by `1/sqrt(d)`, output `[batch, heads, seq, d]`. Compile and tile probes use it
/// (the layout changes the kernel's address arithmetic, and with it ptxas's register budget).
pub fn attention_packed_qkv(batch: usize, heads: usize, seq: usize, d: usize, dtype: DType) -> Program {
    use crate::kernel::{AttentionBody, AttnOperand};
    let e = heads * d;
    let mut p = ProgramBuilder::new();
    let x = p.input("qkv", dtype, &[seq, batch, 3 * e]);
    let y = p.output("y", dtype, &[batch, heads, seq, d]);
    let mut kb = KernelBuilder::new("k0_attention", &["attention"]);
    let ax = kb.arg(&p, x, Access::Read);
    let ay = kb.arg(&p, y, Access::Write);
    let op = |offset| AttnOperand { arg: ax, offset, s_batch: 3 * e, s_head: d, s_row: batch * 3 * e, group: 1 };
    let raw = kb.e(Expr::Acc(1), DType::F32);
    let scale = kb.konst(1.0 / (d as f64).sqrt(), DType::F32);
    let score = kb.e(Expr::Binary(BinaryOp::Mul, raw, scale), DType::F32);
    let out = kb.e(Expr::Acc(0), DType::F32);
    let outd = kb.e(Expr::Cast(out), dtype);
    let at = Index::var(Var::Batch).mul((seq * d) as i64).add(Index::var(Var::M).mul(d as i64)).add(Index::var(Var::N));
    p.kernel(kb.attention(AttentionBody {
        batch,
        heads,
        m: seq,
        kv: seq,
        d,
        dv: d,
        q: op(0),
        k: op(e),
        v: op(2 * e),
        in_dtype: dtype,
        p_dtype: dtype,
        score,
        causal: None,
        stores: vec![st(ay, at, outd)],
    }));
    p.build_checked()
}

/// The graph [`attention`] computes, written out unfused (`softmax(q k^T * scale + mask) v`, GQA
/// heads repeated, BSHD inputs transposed), for the CPU reference.
pub fn attention_graph(c: &AttnCase) -> crate::ir::Graph {
    use crate::trace::Graph;
    let g = Graph::new();
    let shapes = c.input_shapes();
    let q = g.input("q", c.dtype, shapes[0].clone());
    let k = g.input("k", c.dtype, shapes[1].clone());
    let v = g.input("v", c.dtype, shapes[2].clone());
    let mask = match c.mask {
        AttnMask::None => None,
        AttnMask::Additive => Some(g.input("mask", DType::F32, shapes[3].clone())),
        AttnMask::Bool => Some(g.input("mask", DType::Bool, shapes[3].clone())),
    };
    g.output(&attention_written_out(c, &q, &k, &v, mask.as_ref()));
    g.build().expect("attention reference graph")
}

/// `softmax(q k^T * scale [+ mask | where(mask, s, -inf)] [causal]) v` written out as exported
/// models write it (BSHD inputs transposed, GQA heads repeated by expand and reshape, a causal
/// `where` with a constant triangle), on inputs shaped as [`AttnCase::input_shapes`] says.
pub fn attention_written_out(
    c: &AttnCase,
    q: &crate::trace::Tensor,
    k: &crate::trace::Tensor,
    v: &crate::trace::Tensor,
    mask: Option<&crate::trace::Tensor>,
) -> crate::trace::Tensor {
    let g = q.graph();
    let (mut q, mut k, mut v) = (q.clone(), k.clone(), v.clone());
    if c.bshd {
        q = q.permute(&[0, 2, 1, 3]);
        k = k.permute(&[0, 2, 1, 3]);
        v = v.permute(&[0, 2, 1, 3]);
    }
    if c.kv_heads != c.heads {
        let rep = |t: &crate::trace::Tensor, s: usize, d: usize| {
            let g5 = t.reshape(vec![c.batch, c.kv_heads, 1, s, d]);
            let e = g5.expand(vec![c.batch, c.kv_heads, c.heads / c.kv_heads, s, d]);
            e.reshape(vec![c.batch, c.heads, s, d])
        };
        k = rep(&k, c.kv, c.d);
        v = rep(&v, c.kv, c.dv);
    }
    let low = matches!(c.dtype, DType::F16 | DType::BF16);
    let mut s = if c.split_scale {
        let r = c.scale().sqrt();
        (&q * r).matmul(&(&k.permute(&[0, 1, 3, 2]) * r))
    } else {
        q.matmul(&k.permute(&[0, 1, 3, 2]))
    };
    if low {
        s = s.cast(DType::F32);
    }
    if !c.split_scale {
        s = &s * c.scale();
    }
    let ninf = g.scalar(DType::F32, f64::NEG_INFINITY);
    if let Some(m) = mask {
        s = if c.mask == AttnMask::Additive { &s + m } else { m.where_(&s, &ninf) };
    }
    if let Some(o) = c.causal {
        let keep: Vec<i64> = (0..c.m * c.kv).map(|p| (p % c.kv <= p / c.kv + o) as i64).collect();
        let cm = g.constant(crate::HostTensor::from_i64(DType::Bool, vec![c.m, c.kv], &keep));
        s = cm.where_(&s, &ninf);
    }
    let mut pr = s.softmax(-1);
    if low {
        pr = pr.cast(c.dtype);
    }
    if c.nan_guard {
        pr = pr.unary(crate::ir::UnaryOp::IsNan).where_(&g.scalar(c.dtype, 0.0), &pr);
    }
    pr.matmul(&v)
}

/// The weights of [`multihead_attention_block`]: the LayerNorm's, the packed `q, k, v`
/// projection's (`[e, 3e]`, `[3e]`) and the output projection's (`[e, e]`, `[e]`).
pub struct MhaWeights<'a> {
    /// LayerNorm scale and shift (`[e]` each).
    pub norm: (&'a crate::trace::Tensor, &'a crate::trace::Tensor),
    /// Packed input projection and its bias (none: a bias-free projection).
    pub w_in: (&'a crate::trace::Tensor, Option<&'a crate::trace::Tensor>),
    /// Output projection and its bias.
    pub w_out: (&'a crate::trace::Tensor, &'a crate::trace::Tensor),
}

/// A pre-norm `nn.MultiheadAttention` block on `x: [b, s, e]` with `heads` heads, as torchvision's
/// ViT exports it (the legacy exporter): LayerNorm, permute to sequence-first, the packed
/// projection, `q`, `k`, `v` each taken by a gather with a constant scalar index and split into
/// heads, `q` and `k^T` scaled apart, the heads permuted back and projected, the residual.
pub fn multihead_attention_block(x: &crate::trace::Tensor, w: &MhaWeights<'_>, heads: usize) -> crate::trace::Tensor {
    use crate::trace::Tensor;
    let sh = x.shape().as_static().expect("a static input");
    let (bt, s, e) = (sh[0], sh[1], sh[2]);
    let d = e / heads;
    let gr = x.graph();
    let pick = |i: i64| gr.constant(crate::HostTensor::from_i64(DType::I64, vec![], &[i]));
    let scale = gr.scalar(DType::F32, (d as f64).powf(-0.25));
    let y = x.layer_norm(w.norm.0, w.norm.1, 1e-6).permute(&[1, 0, 2]);
    let packed = y.matmul(w.w_in.0);
    let packed = match w.w_in.1 {
        Some(b) => &packed + b,
        None => packed,
    };
    let proj = packed.reshape([1, s, bt, 3, e]).permute(&[3, 1, 2, 0, 4]).reshape([3, s, bt, e]);
    let split = |t: &Tensor| t.reshape([s, bt * heads, d]).permute(&[1, 0, 2]).reshape([bt, heads, s, d]);
    let q = &split(&proj.gather(0, &pick(0))) * &scale;
    let kt = &split(&proj.gather(0, &pick(1))).permute(&[0, 1, 3, 2]) * &scale;
    let v = split(&proj.gather(0, &pick(2)));
    let o = q.matmul(&kt).softmax(-1).matmul(&v);
    let o = (o.permute(&[2, 0, 1, 3]).reshape([s * bt, e]).matmul(w.w_out.0) + w.w_out.1).reshape([s, bt, e]);
    &o.permute(&[1, 0, 2]) + x
}
