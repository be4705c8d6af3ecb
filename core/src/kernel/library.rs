//! Matmul kernels a vendor library can run exactly: [`library_gemm`] recognizes a
//! [`KernelBody::Matmul`] whose epilogue is one of the forms a GEMM library computes itself
//! (cuBLASLt's default, bias and ReLU-bias epilogues, and its `C` input with `beta = 1` for a
//! residual) and says, for any other kernel, why not.
//!
//! The recognized epilogues, with `acc` the f32 accumulator and every intermediate carried in
//! f32 (the kernel IR's numerics), stored once into a dense row-major `[batch, m, n]` output of
//! the operands' dtype:
//!
//! * `acc`
//! * `acc + bias[n]`: the bias of the output's dtype, converted exactly to f32. An f32 bias on a
//!   16-bit output (an f32 model under autocast adds its f32 bias to the bf16 product in f32) is
//!   not one: cuBLASLt's heuristic refused `CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE` f32 with a bf16 D
//!   (H200, session 25); with an f32 output (the widened form below) the bias is D's type.
//! * `act(acc [+ bias[n]])`, `act` ReLU or GELU's tanh form ([`Activation`], recognized by
//!   [`super::library_act`] whatever form the export wrote it in)
//! * `acc [+ bias[n]] + r[batch, m, n]`, the terms in any order: `r` a dense tensor of the
//!   output's dtype (a residual connection; not under an activation). Only a stored residual:
//!   where the scheduler recomputes the residual stream in the epilogue (ViT-B/16's and GPT-2's
//!   first MLP output, whose residual is the embedding plus the attention output), the kernel
//!   stays split.
//!
//! Casts to f32 or to the output dtype around these are allowed (they round nothing the store
//! does not); a cast to a narrower type in between (which would round before the add) is not,
//! except the product's own rounding to the operands' dtype (`cast(acc, f32)` of a bf16 product,
//! as autocast writes it): the library skips that rounding, within the 16-bit dtype's tolerance.
//!
//! A bf16 or f16 product stored as **f32** (autocast's logits: `cast(acc, f32)`; with an f32 bias
//! or residual, an f32 model's residual stream) is a library product with an f32 output
//! ([`LibraryGemm::out_dtype`]): the library writes the f32 accumulator where the graph rounds the
//! product to 16 bits first, within that dtype's tolerance. Split instead, it wrote a 16-bit
//! scratch and a kernel read it to widen it: taking GPT-2 small's bf16 LM head (1024 x 30522 x
//! 768) direct moved the model from 1.069 to 1.031 ms (H200, session 24).
//!
//! A product of **fp8** operands (the scheduler's prologue, `schedule/prologue.rs`: `in_dtype` e4m3
//! or e5m2, the accumulator typed f32) has one recognized epilogue, `torch._scaled_mm`'s:
//!
//! * `acc [* s1] [* s2]`, each `s` a load of an f32 scalar argument (one element), stored into a
//!   dense f32, bf16 or f16 output ([`LibraryGemm::scales`], [`LibraryGemm::out_dtype`]).
//!
//! The kernel IR rounds `acc * s1` to f32 before multiplying by `s2`; a library that multiplies
//! the scales first (cuBLASLt: `alpha * scale_a * scale_b * acc`) differs from it by at most one
//! f32 rounding before the final one to the output dtype.
//! Any other epilogue can still use the library through [`split_epilogue`]: the product alone,
//! rounded to the operands' dtype into a scratch buffer (exactly what the unfused graph computes:
//! the matmul node's value), then the epilogue as a pointwise kernel reading it. That costs one
//! write and one read of the product and one rounding the fused kernel skips.
//!
//! Which of the library and sinter's own templates runs is a backend's decision; this module only
//! decides what the library *can* compute, and how.

pub use super::library_act::Activation;
use super::{Access, BufferId, Expr, ExprId, Index, Kernel, KernelArg, KernelBody, MatOperand, Store, TypedExpr, Var};
use crate::dtype::DType;
use crate::ir::{BinaryOp, UnaryOp};

/// A matmul kernel as a library product.
#[derive(Clone, Debug, PartialEq)]
pub struct LibraryGemm {
    /// Batch count.
    pub batch: usize,
    /// Output rows.
    pub m: usize,
    /// Output columns.
    pub n: usize,
    /// Reduction extent.
    pub k: usize,
    /// Left operand (kernel argument and strides).
    pub a: MatOperand,
    /// Right operand.
    pub b: MatOperand,
    /// Operand dtype (f32, f16, bf16, or an fp8 type; f32 accumulation).
    pub dtype: DType,
    /// Output dtype: `dtype`, except for fp8 operands (f32, bf16 or f16) and for bf16 or f16
    /// operands stored as f32.
    pub out_dtype: DType,
    /// Kernel arguments holding f32 scalars the product is multiplied by (fp8 operands only: the
    /// scales of `a` and `b`, at most two).
    pub scales: Vec<usize>,
    /// The kernel argument the product is stored into (dense `[batch, m, n]`).
    pub out: usize,
    /// The kernel argument holding the bias along `n`, if any (of the output's dtype).
    pub bias: Option<usize>,
    /// The kernel argument holding a dense `[batch, m, n]` tensor of the output's dtype added to
    /// the product (cuBLASLt's `C` with `beta = 1`: a residual connection), if any.
    pub residual: Option<usize>,
    /// The activation after the bias, if any.
    pub activation: Option<Activation>,
    /// The product may run in TF32 ([`super::MatmulBody::tf32`]).
    pub tf32: bool,
}

impl LibraryGemm {
    /// The plain product of `mm` stored into argument `out` (no bias, residual or activation).
    fn of(mm: &super::MatmulBody, out: usize, out_dtype: DType) -> LibraryGemm {
        LibraryGemm {
            batch: mm.batch,
            m: mm.m,
            n: mm.n,
            k: mm.k,
            a: mm.a.clone(),
            b: mm.b.clone(),
            dtype: mm.in_dtype,
            out_dtype,
            scales: Vec::new(),
            out,
            bias: None,
            residual: None,
            activation: None,
            tf32: mm.tf32,
        }
    }

    /// Floating-point operations of the product (`2 * batch * m * n * k`).
    pub fn flops(&self) -> f64 {
        2.0 * self.batch as f64 * self.m as f64 * self.n as f64 * self.k as f64
    }
}

/// Whether `idx` is an affine function of (Batch, M, N) equal to `f` (affine functions that
/// agree at the origin and one step along each variable agree everywhere).
fn equals_affine(idx: &Index, f: &dyn Fn(i64, i64, i64) -> i64, extents: [usize; 3]) -> bool {
    fn affine(i: &Index) -> bool {
        match i {
            Index::Const(_) | Index::Var(Var::Batch | Var::M | Var::N) => true,
            Index::Sum(ts) => ts.iter().all(affine),
            Index::Mul(x, _) => affine(x),
            _ => false,
        }
    }
    let at = |b: i64, i: i64, j: i64| {
        idx.eval(
            &|v| match v {
                Var::Batch => b,
                Var::M => i,
                Var::N => j,
                _ => 0,
            },
            &|_| 0,
        )
    };
    // A variable of extent 1 is always 0 (its term may have been simplified away).
    let steps = [(1, 0, 0), (0, 1, 0), (0, 0, 1)].into_iter().zip(extents).filter(|&(_, e)| e > 1).map(|(s, _)| s);
    affine(idx) && std::iter::once((0, 0, 0)).chain(steps).all(|(b, i, j)| at(b, i, j) == f(b, i, j))
}

/// The matmul body of `k` when its dtypes are a library's (f32, f16, bf16 or fp8 operands, f32
/// accumulation).
fn library_matmul(k: &Kernel) -> Result<&super::MatmulBody, String> {
    let mm = library_dtypes(k)?;
    if mm.a.im2col.is_some() || mm.b.im2col.is_some() {
        return Err("an implicit im2col operand (no strided layout a library reads)".into());
    }
    Ok(mm)
}

/// The matmul body of `k` when its dtypes are a library's (f32, f16, bf16 or fp8 operands, f32
/// accumulation), whatever its operands' form.
pub(crate) fn library_dtypes(k: &Kernel) -> Result<&super::MatmulBody, String> {
    let KernelBody::Matmul(mm) = &k.body else { return Err("not a matmul".into()) };
    let float = matches!(mm.in_dtype, DType::F32 | DType::F16 | DType::BF16) || mm.in_dtype.is_fp8();
    if !float || mm.acc_dtype != DType::F32 {
        return Err(format!("operands {} accumulating in {}", mm.in_dtype, mm.acc_dtype));
    }
    Ok(mm)
}

/// The dtype of a matmul kernel's product value (`Acc(0)`): the operands' dtype, f32 for fp8
/// operands (the accumulator is never rounded to fp8).
pub(crate) fn product_dtype(k: &Kernel, mm: &super::MatmulBody) -> DType {
    k.exprs.iter().find(|e| matches!(e.expr, Expr::Acc(0))).map_or(mm.in_dtype, |e| e.dtype)
}

/// `k` as a library product, or why it is not one.
pub fn library_gemm(k: &Kernel) -> Result<LibraryGemm, String> {
    let mm = library_matmul(k)?;
    let [st] = mm.stores.as_slice() else {
        return Err(format!("{} stores (a library product writes one output)", mm.stores.len()));
    };
    let out = k.args.get(st.arg).ok_or("store to a missing argument")?;
    if mm.in_dtype.is_fp8() {
        return scaled_gemm(k, mm, st);
    }
    // A 16-bit product stored as f32 (autocast's logits): the library writes f32 itself.
    let widened = out.dtype == DType::F32 && matches!(mm.in_dtype, DType::BF16 | DType::F16);
    if out.dtype != mm.in_dtype && !widened {
        return Err(format!("output {} differs from the operands' {}", out.dtype, mm.in_dtype));
    }
    let vr = |v: Var| super::analysis::var_range(k, v);
    let extents = [mm.batch, mm.m, mm.n];
    dense_output(k, mm, st)?;
    let e = |id: ExprId| &k.exprs[id.0 as usize];
    // Casts that round nothing the store does not: to f32, or to the output dtype at the top.
    let peel = |mut id: ExprId, top: bool| {
        while let Expr::Cast(x) = e(id).expr {
            let to = e(id).dtype;
            if to == DType::F32 || (top && to == out.dtype) {
                id = x;
            } else {
                break;
            }
        }
        id
    };
    let is_acc = |id: ExprId| matches!(e(peel(id, false)).expr, Expr::Acc(0));
    // A load of `numel` elements of one of `dtypes` at element `at(batch, m, n)`: its argument.
    let load_of = |id: ExprId, numel: usize, dtypes: &[DType], at: &dyn Fn(i64, i64, i64) -> i64| -> Option<usize> {
        match &e(peel(id, false)).expr {
            Expr::Load { arg, index }
                if k.args.get(*arg).is_some_and(|a| dtypes.contains(&a.dtype) && a.numel == numel)
                    && equals_affine(&index.simplify(&vr), at, extents) =>
            {
                Some(*arg)
            }
            _ => None,
        }
    };
    let bias_of = |id: ExprId| load_of(id, mm.n, &[out.dtype], &|_, _, j| j);
    let residual_of = |id: ExprId| load_of(id, mm.batch * mm.m * mm.n, &[out.dtype], &|b, i, j| dense_at(mm, b, i, j));
    let not_form = || format!("epilogue `{}` is not act(acc [+ bias]) or acc [+ bias] [+ residual]", k.ops.join(", "));
    // The sum at `v`: the accumulator once, at most one bias along `n`, at most one residual.
    let sum = |v: ExprId| -> Result<(Option<usize>, Option<usize>), String> {
        let mut terms = Vec::new();
        let mut stack = vec![v];
        while let Some(t) = stack.pop() {
            match e(t).expr {
                Expr::Binary(BinaryOp::Add, x, y) => stack.extend([peel(x, false), peel(y, false)]),
                _ => terms.push(t),
            }
        }
        let (mut acc, mut bias, mut residual) = (0, None, None);
        for t in terms {
            if is_acc(t) {
                acc += 1;
            } else if let Some(b) = bias_of(t).filter(|_| bias.is_none()) {
                bias = Some(b);
            } else if let Some(r) = residual_of(t).filter(|_| residual.is_none()) {
                residual = Some(r);
            } else {
                return Err(not_form());
            }
        }
        if acc != 1 {
            return Err(not_form());
        }
        Ok((bias, residual))
    };
    let top = peel(st.value, true);
    let (activation, v) = match e(top).expr {
        Expr::Unary(UnaryOp::Relu, x) => (Some(Activation::Relu), peel(x, true)),
        _ => {
            // Any other activation is a function of one `acc [+ bias]` sum (the key: its bias).
            let leaf = |id: ExprId| sum(peel(id, false)).ok().filter(|(_, r)| r.is_none()).map(|(b, _)| b);
            match super::library_act::activation_input(k, top, &leaf) {
                Some((act, x)) => (Some(act), peel(x, false)),
                None => (None, top),
            }
        }
    };
    let (bias, residual) = sum(v)?;
    if let (Some(act), Some(_)) = (activation, residual) {
        return Err(format!(
            "a {} over a residual sum (the library's activation epilogues are not documented to follow C)",
            act.name()
        ));
    }
    Ok(LibraryGemm { bias, residual, activation, ..LibraryGemm::of(mm, st.arg, out.dtype) })
}

/// Element `(b, i, j)` of a dense `[batch, m, n]` tensor.
fn dense_at(mm: &super::MatmulBody, b: i64, i: i64, j: i64) -> i64 {
    b * (mm.m * mm.n) as i64 + i * mm.n as i64 + j
}

/// Whether store `st` writes the dense `[batch, m, n]` output of `mm`.
fn dense_output(k: &Kernel, mm: &super::MatmulBody, st: &Store) -> Result<(), String> {
    let out = k.args.get(st.arg).ok_or("store to a missing argument")?;
    if !equals_affine(&st.index, &|b, i, j| dense_at(mm, b, i, j), [mm.batch, mm.m, mm.n])
        || out.numel != mm.batch * mm.m * mm.n
    {
        return Err("the output is not a dense [batch, m, n] tensor".into());
    }
    Ok(())
}

/// An fp8 product with `_scaled_mm`'s epilogue: `acc [* s1] [* s2]` into f32, bf16 or f16.
fn scaled_gemm(k: &Kernel, mm: &super::MatmulBody, st: &Store) -> Result<LibraryGemm, String> {
    let out = &k.args[st.arg];
    if !matches!(out.dtype, DType::F32 | DType::BF16 | DType::F16) {
        return Err(format!("an {} product stored as {} (f32, bf16 or f16 only)", mm.in_dtype, out.dtype));
    }
    dense_output(k, mm, st)?;
    let e = |id: ExprId| &k.exprs[id.0 as usize];
    let peel = |mut id: ExprId, top: bool| {
        while let Expr::Cast(x) = e(id).expr {
            let to = e(id).dtype;
            if to == DType::F32 || (top && to == out.dtype) {
                id = x;
            } else {
                break;
            }
        }
        id
    };
    let scalar = |id: ExprId| -> Option<usize> {
        match &e(id).expr {
            Expr::Load { arg, index }
                if e(id).dtype == DType::F32
                    && k.args.get(*arg).is_some_and(|a| a.dtype == DType::F32 && a.numel == 1)
                    && index.as_const() == Some(0) =>
            {
                Some(*arg)
            }
            _ => None,
        }
    };
    let mut v = peel(st.value, true);
    let mut scales = Vec::new();
    while let Expr::Binary(BinaryOp::Mul, x, y) = e(v).expr {
        if e(v).dtype != DType::F32 {
            return Err(format!("a product scaled in {} (f32 only)", e(v).dtype));
        }
        let (rest, s) = match (scalar(y), scalar(x)) {
            (Some(s), _) => (x, s),
            (None, Some(s)) => (y, s),
            (None, None) => return Err("a factor of the product is not an f32 scalar".into()),
        };
        scales.push(s);
        v = peel(rest, false);
    }
    if !matches!(e(v).expr, Expr::Acc(0)) || e(v).dtype != DType::F32 {
        return Err(format!(
            "epilogue `{}` of an {} product is not acc [* scale] [* scale]",
            k.ops.join(", "),
            mm.in_dtype
        ));
    }
    if scales.len() > 2 {
        return Err(format!("{} scales (at most two: a's and b's)", scales.len()));
    }
    // Innermost first: `(acc * s1) * s2` lists s2 first.
    scales.reverse();
    Ok(LibraryGemm { scales, ..LibraryGemm::of(mm, st.arg, out.dtype) })
}

/// The buffer id of the scratch argument [`split_epilogue`] appends (not a buffer of the program:
/// the backend binds it to memory of its own).
pub const SCRATCH: BufferId = BufferId(u32::MAX);

/// A matmul kernel as a library product into a scratch buffer plus a pointwise epilogue.
#[derive(Clone, Debug, PartialEq)]
pub struct SplitGemm {
    /// The product: `out` is the scratch argument (index `kernel.args.len()` of the original
    /// kernel, the last argument of `epilogue`), dense `[batch, m, n]` of the operands' dtype (f32
    /// for fp8 operands).
    pub gemm: LibraryGemm,
    /// The epilogue: the original kernel's arguments plus the scratch (read), one lane per output
    /// element, `Acc(0)` replaced by a load of the scratch.
    pub epilogue: Kernel,
}

/// `k` as a library product of the plain accumulator into a scratch buffer followed by its
/// epilogue as a pointwise kernel, or why not (see the module docs for the numerics).
pub fn split_epilogue(k: &Kernel) -> Result<SplitGemm, String> {
    let mm = library_matmul(k)?;
    let prod = product_dtype(k, mm);
    let lane = Index::var(Var::Lane);
    let (m, n) = (mm.m as i64, mm.n as i64);
    // The scratch is the dense `[batch, m, n]` product.
    let at = [lane.clone().div(m * n), lane.clone().div(n).rem(m), lane.rem(n)];
    let epilogue = epilogue_kernel(k, mm, mm.batch * mm.m * mm.n, at)?;
    Ok(SplitGemm { gemm: LibraryGemm::of(mm, k.args.len(), prod), epilogue })
}

/// The epilogue of matmul kernel `k` as a pointwise kernel of `numel` lanes over `k`'s arguments
/// plus a scratch argument (appended, [`SCRATCH`]) holding the product: lane `l` reads the
/// scratch at `l`, which holds product element `(at[0], at[1], at[2])` = (batch, m, n) as
/// functions of [`Var::Lane`]; every other index of `k` has (Batch, M, N)
/// replaced by those and is simplified over the lanes' range, so a dense store is `lane` again
/// (the renderers vectorize only what they see contiguous: unsimplified, GPT-2's bf16 LM head's
/// cast epilogue, `a[lane / 30522 % 1024 * 30522 + lane % 30522]`, stored one f32 at a time, 238
/// us for 187 MB on an H200, session 24). The scratch has the product value's dtype (the
/// operands'; f32 for fp8 operands).
pub(crate) fn epilogue_kernel(
    k: &Kernel,
    mm: &super::MatmulBody,
    numel: usize,
    at: [Index; 3],
) -> Result<Kernel, String> {
    let prod = product_dtype(k, mm);
    let scratch = k.args.len();
    let [b, i, j] = at;
    let lanes = |v: Var| (v == Var::Lane).then_some((0, numel as i64 - 1));
    let subst = |x: &Index| x.substitute(Var::Batch, &b).substitute(Var::M, &i).substitute(Var::N, &j).simplify(&lanes);
    let mut exprs = Vec::with_capacity(k.exprs.len());
    for te in &k.exprs {
        let expr = match &te.expr {
            Expr::Acc(0) => Expr::Load { arg: scratch, index: Index::var(Var::Lane) },
            Expr::Acc(s) => return Err(format!("accumulator slot {s} in a matmul")),
            Expr::Load { arg, index } => Expr::Load { arg: *arg, index: subst(index) },
            Expr::IndexValue(i) => Expr::IndexValue(subst(i)),
            Expr::IndexCmp(c, a, b) => Expr::IndexCmp(*c, subst(a), subst(b)),
            e => e.clone(),
        };
        // The scratch holds the product value (the operands' dtype; f32 for fp8): a load of it.
        let dtype = if matches!(te.expr, Expr::Acc(0)) { prod } else { te.dtype };
        exprs.push(TypedExpr { expr, dtype });
    }
    let stores = mm.stores.iter().map(|s| Store { arg: s.arg, index: subst(&s.index), value: s.value }).collect();
    let mut args = k.args.clone();
    args.push(KernelArg { buffer: SCRATCH, dtype: prod, numel, access: Access::Read });
    // Bytes: every argument the epilogue loads or stores, once (the operands are not read).
    let mut used = vec![false; args.len()];
    for te in &exprs {
        if let Expr::Load { arg, .. } = te.expr {
            used[arg] = true;
        }
    }
    for s in &mm.stores {
        used[s.arg] = true;
    }
    let bytes: f64 =
        args.iter().zip(&used).filter(|(_, u)| **u).map(|(a, _)| (a.numel * a.dtype.size_bytes()) as f64).sum();
    let epilogue = Kernel {
        name: format!("{}_epilogue", k.name),
        args,
        exprs,
        body: KernelBody::Pointwise { numel, stores },
        origins: k.origins.clone(),
        ops: k.ops.iter().filter(|o| !matches!(o.as_str(), "matmul" | "conv2d" | "Conv")).cloned().collect(),
        flops: (k.flops - 2.0 * numel as f64 * mm.k as f64).max(0.0),
        bytes,
    };
    super::analysis::check_kernel(&epilogue).map_err(|e| format!("epilogue kernel: {e}"))?;
    Ok(epilogue)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::Capabilities;
    use crate::schedule::{ScheduleOptions, schedule};
    use crate::trace::Graph;

    fn first_matmul(build: impl Fn(&Graph) -> Vec<crate::trace::Tensor>, d: DType) -> Kernel {
        let _ = d;
        let g = Graph::new();
        for t in build(&g) {
            g.output(&t);
        }
        let ir = crate::passes::optimize(&g.build().unwrap()).unwrap();
        let p = schedule(&ir, &Capabilities::host(), &ScheduleOptions::default()).unwrap();
        p.kernels.into_iter().find(|k| matches!(k.body, KernelBody::Matmul(_))).expect("a matmul kernel")
    }

    #[test]
    fn plain_bias_and_relu_epilogues_are_library_products() {
        for d in [DType::BF16, DType::F16, DType::F32] {
            // A weight shared by the batch: the scheduler folds the batch into the rows.
            let k = first_matmul(|g| vec![g.input("a", d, vec![3, 64, 32]).matmul(&g.input("w", d, vec![32, 48]))], d);
            let l = library_gemm(&k).unwrap();
            assert_eq!((l.batch, l.m, l.n, l.k, l.bias, l.activation, l.dtype), (1, 192, 48, 32, None, None, d));
            let k =
                first_matmul(|g| vec![g.input("a", d, vec![3, 64, 32]).matmul(&g.input("w", d, vec![3, 32, 48]))], d);
            let l = library_gemm(&k).unwrap();
            assert_eq!((l.batch, l.m, l.n, l.k, l.bias, l.activation, l.dtype), (3, 64, 48, 32, None, None, d));
            let k = first_matmul(
                |g| {
                    let y = g.input("a", d, vec![64, 32]).matmul(&g.input("w", d, vec![32, 48]))
                        + &g.input("b", d, vec![48]);
                    vec![y.relu()]
                },
                d,
            );
            let l = library_gemm(&k).unwrap();
            assert!(l.bias.is_some() && l.activation == Some(Activation::Relu), "{l:?}");
        }
    }

    /// A residual sum is the library's `C` (beta 1), with or without a bias, the terms in any
    /// order, batched or with the batch folded into the rows.
    #[test]
    fn residual_sums_are_library_products() {
        for d in [DType::F32, DType::BF16] {
            for (batched, bias, order) in [(false, false, 0), (false, true, 0), (true, true, 1), (true, false, 1)] {
                let k = first_matmul(
                    |g| {
                        let ws = if batched { vec![3, 32, 48] } else { vec![32, 48] };
                        let p = g.input("a", d, vec![3, 64, 32]).matmul(&g.input("w", d, ws));
                        let p = if bias { p + &g.input("b", d, vec![48]) } else { p };
                        let r = g.input("r", d, vec![3, 64, 48]);
                        vec![if order == 0 { &p + &r } else { &r + &p }]
                    },
                    d,
                );
                let l = library_gemm(&k).unwrap_or_else(|e| panic!("{d} batched {batched} bias {bias}: {e}"));
                let r = l.residual.expect("a residual");
                assert_eq!(k.args[r].numel, 3 * 64 * 48);
                assert_eq!((l.bias.is_some(), l.activation, l.n), (bias, None, 48), "{d}");
                assert_eq!(l.batch * l.m, 3 * 64);
            }
        }
    }

    /// A 16-bit product cast to f32 (autocast's logits) is a library product storing f32; with a
    /// bias it is not (split instead).
    #[test]
    fn widened_outputs_are_library_products() {
        for d in [DType::BF16, DType::F16] {
            let k = first_matmul(
                |g| vec![g.input("a", d, vec![64, 32]).matmul(&g.input("w", d, vec![32, 48])).cast(DType::F32)],
                d,
            );
            let l = library_gemm(&k).unwrap();
            assert_eq!((l.dtype, l.out_dtype, l.bias, l.activation), (d, DType::F32, None, None));
            let k = first_matmul(
                |g| {
                    let p = g.input("a", d, vec![64, 32]).matmul(&g.input("w", d, vec![32, 48]));
                    vec![(p + &g.input("b", d, vec![48])).cast(DType::F32)]
                },
                d,
            );
            // A 16-bit bias added in 16 bits rounds before the store: split.
            assert!(library_gemm(&k).unwrap_err().contains("is not act("), "{:?}", library_gemm(&k));
            assert!(split_epilogue(&k).is_ok());
        }
    }

    /// The split program (library product rounded into a scratch, then the epilogue kernel) gives
    /// what the unfused graph gives: run through the interpreter with the scratch filled by the
    /// reference product.
    #[test]
    fn split_epilogue_computes_the_unfused_graph() {
        use crate::kernel::interp;
        use crate::tensor::HostTensor;
        let d = DType::BF16;
        let (m, kk, n) = (7, 33, 10);
        let g = Graph::new();
        let a = g.input("a", d, vec![2, m, kk]);
        let w = g.input("w", d, vec![kk, n]);
        let bias = g.input("b", d, vec![n]);
        let prod = a.matmul(&w);
        g.output(&(&prod + &bias).gelu());
        g.output(&prod);
        let ir = crate::passes::optimize(&g.build().unwrap()).unwrap();
        let p = schedule(&ir, &Capabilities::host(), &ScheduleOptions::default()).unwrap();
        let k = p.kernels.iter().find(|k| matches!(k.body, KernelBody::Matmul(_))).unwrap();
        assert!(library_gemm(k).is_err(), "gelu and two stores are not a library epilogue");
        let split = split_epilogue(k).unwrap();
        assert_eq!(split.gemm.out, k.args.len());
        assert!(matches!(split.epilogue.body, KernelBody::Pointwise { numel, .. } if numel == 2 * m * n));
        // The dense stores are the lane again (simplified over the lanes' range: vectorizable).
        let KernelBody::Pointwise { stores, .. } = &split.epilogue.body else { unreachable!() };
        assert!(stores.iter().all(|st| st.index == Index::var(Var::Lane)), "{stores:?}");
        let inputs = [
            HostTensor::random(d, vec![2, m, kk], 1, -1.0, 1.0),
            HostTensor::random(d, vec![kk, n], 2, -1.0, 1.0),
            HostTensor::random(d, vec![n], 3, -1.0, 1.0),
        ];
        let want = crate::cpu::run(&g, &inputs).unwrap();
        // The epilogue alone, over the original arguments plus the scratch holding the product.
        let mut ep = split.epilogue.clone();
        let mut prog = p.clone();
        let sid = BufferId(prog.buffers.len() as u32);
        prog.buffers.push(crate::kernel::BufferDecl {
            id: sid,
            dtype: d,
            numel: 2 * m * n,
            kind: crate::kernel::BufferKind::Constant(std::sync::Arc::new(want[1].clone())),
            node: None,
        });
        prog.memory.slot_of.push(None);
        ep.args.last_mut().unwrap().buffer = sid;
        let ki = prog.kernels.iter().position(|x| x == k).unwrap();
        prog.kernels[ki] = ep;
        let got = interp::run_program(&prog, &inputs).unwrap();
        // The fused add is not rounded to bf16 before the GELU (the kernel IR's numerics): within
        // the bf16 tolerance of the unfused graph, and the product output exact.
        let r = got[0].tolerance_ratio(&want[0], d.rel_tolerance(), 1e-2);
        assert!(r <= 1.0, "epilogue over the rounded product: tolerance ratio {r}");
        assert_eq!(got[1].to_f64_vec(), want[1].to_f64_vec());
    }

    /// GELU's tanh form after a bias is a library epilogue in every float dtype.
    #[test]
    fn gelu_tanh_epilogues_are_library_products() {
        for d in [DType::F32, DType::BF16, DType::F16] {
            for bias in [false, true] {
                let k = first_matmul(
                    |g| {
                        let p = g.input("a", d, vec![3, 64, 32]).matmul(&g.input("w", d, vec![32, 48]));
                        let p = if bias { p + &g.input("b", d, vec![48]) } else { p };
                        vec![p.gelu_tanh()]
                    },
                    d,
                );
                let l = library_gemm(&k).unwrap_or_else(|e| panic!("{d} bias {bias}: {e}"));
                let bias_dtype = l.bias.map_or(l.out_dtype, |b| k.args[b].dtype);
                assert_eq!(
                    (l.activation, l.bias.is_some(), bias_dtype, l.out_dtype),
                    (Some(Activation::GeluTanh), bias, d, d)
                );
            }
        }
    }

    /// An f32 model run under bf16 autocast (its weights constants, as an exported model's): the
    /// second MLP product (f32 bias and residual, stored f32: the residual stream) is a library
    /// product; the first (an f32 bias on a bf16 output, then GELU's tanh form) runs split.
    #[test]
    fn autocast_mlp_products_are_library_products() {
        use crate::passes::{Precision, pipeline_for, run_passes};
        use crate::tensor::HostTensor;
        let g = Graph::new();
        let x = g.input("x", DType::F32, vec![64, 32]);
        let c = |shape: Vec<usize>, seed| g.constant(HostTensor::random(DType::F32, shape, seed, -1.0, 1.0));
        let (w1, b1, w2, b2) = (c(vec![32, 96], 1), c(vec![96], 2), c(vec![96, 32], 3), c(vec![32], 4));
        let h = (x.matmul(&w1) + &b1).gelu_tanh();
        g.output(&(h.matmul(&w2) + &b2 + &x));
        let ir = run_passes(&g.build().unwrap(), &pipeline_for(Precision::BF16)).unwrap().pop().unwrap().1;
        let p = schedule(&ir, &Capabilities::host(), &ScheduleOptions::default()).unwrap();
        let products: Vec<&Kernel> = p.kernels.iter().filter(|k| matches!(k.body, KernelBody::Matmul(_))).collect();
        let [first, second] = products.as_slice() else { panic!("two products: {products:?}") };
        assert!(library_gemm(first).unwrap_err().contains("is not act("));
        assert!(split_epilogue(first).is_ok());
        let l = library_gemm(second).unwrap();
        let bias_dtype = l.bias.map(|b| second.args[b].dtype);
        let form = (l.dtype, l.out_dtype, bias_dtype, l.activation, l.residual.is_some());
        assert_eq!(form, (DType::BF16, DType::F32, Some(DType::F32), None, true));
    }

    #[test]
    fn other_epilogues_say_why_not() {
        let d = DType::BF16;
        let gelu = first_matmul(
            |g| {
                vec![
                    (g.input("a", d, vec![64, 32]).matmul(&g.input("w", d, vec![32, 48])) + &g.input("b", d, vec![48]))
                        .gelu(),
                ]
            },
            d,
        );
        assert!(library_gemm(&gelu).unwrap_err().contains("is not act("), "{:?}", library_gemm(&gelu));
        // A residual under an activation: ReLU named (the library's activation does not follow
        // C); GELU's variable is an `acc [+ bias]` sum only, so it is no activation of the sum.
        for (gelu, why) in [(false, "relu over a residual"), (true, "is not act(")] {
            let k = first_matmul(
                |g| {
                    let y = g.input("a", d, vec![64, 32]).matmul(&g.input("w", d, vec![32, 48]))
                        + &g.input("r", d, vec![64, 48]);
                    vec![if gelu { y.gelu_tanh() } else { y.relu() }]
                },
                d,
            );
            let err = library_gemm(&k).unwrap_err();
            assert!(err.contains(why), "{err}");
        }
        // A sum with a tensor broadcast along `n` (not dense).
        let column = first_matmul(
            |g| {
                vec![
                    g.input("a", d, vec![64, 32]).matmul(&g.input("w", d, vec![32, 48]))
                        + &g.input("c", d, vec![64, 1]),
                ]
            },
            d,
        );
        assert!(library_gemm(&column).unwrap_err().contains("is not act("), "{:?}", library_gemm(&column));
        let i32mm = first_matmul(
            |g| vec![g.input("a", DType::I32, vec![8, 4]).matmul(&g.input("w", DType::I32, vec![4, 8]))],
            DType::I32,
        );
        assert!(library_gemm(&i32mm).unwrap_err().contains("operands i32"));
    }
}
