//! Activations a GEMM library applies in its epilogue, recognized in a matmul kernel's epilogue
//! expression: [`activation_input`] finds the value `x` an activation is applied to when the
//! expression computes `act(x)` for one of the [`Activation`]s the libraries offer, whatever form
//! the exporter wrote it in.
//!
//! ReLU is one op (`Unary(Relu)`). GELU's tanh form has no op of its own after `decompose`: it is
//! a dozen products, sums and one `tanh`, and exporters write it differently (torch's
//! `gelu(approximate="tanh")` lowered by `decompose`, GPT-2's `gelu_new` with `pow(x, 3)` (products
//! after `decompose`), `x * (1 + 0.044715 x^2)` factored, the halves on either side). So the
//! recognizer is semantic:
//!
//! 1. **Shape**: the expression is a DAG of `+ - * /`, `tanh`, f32 constants and casts to f32 over
//!    one variable: every other leaf is a node the caller accepts as `x` (its pre-activation sum,
//!    `acc [+ bias]`), all of them the same value (the same key from the caller).
//! 2. **Value**: evaluated in f64 with `x` set to each of [`PROBES`], it equals the activation's
//!    formula within [`PROBE_TOLERANCE`] (relative, or absolute below 1). The constants of the
//!    kernel are f32-rounded (`0.044715` is `0.044714998...`), which moves the value by ~1e-8;
//!    a different constant (`0.0447` for `0.044715`: ~1e-5 at `x = 2`) or GELU's erf form (up to
//!    ~5e-4 away) is refused.
//!
//! A function of one variable built from these ops that agrees with the formula at 25 points
//! spread over [-8, 8] to 1e-7 is the formula for every purpose of a fused epilogue, whose
//! result is then stored in f32 or a narrower type.

use super::{Expr, ExprId, Kernel};
use crate::dtype::DType;
use crate::ir::{BinaryOp, UnaryOp};
use std::collections::HashMap;

/// An activation a GEMM library applies after the bias (cuBLASLt's epilogues).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Activation {
    /// `max(x, 0)`.
    Relu,
    /// GELU's tanh form, `0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))`: torch's
    /// `gelu(approximate="tanh")`, GPT-2's `gelu_new`, cuBLASLt's `CUBLASLT_EPILOGUE_GELU` (PyTorch
    /// runs `gelu(approximate="tanh")` where it cannot use that epilogue for `_addmm_activation`).
    GeluTanh,
}

impl Activation {
    /// The activation's value at `x`, in f64.
    pub fn eval(self, x: f64) -> f64 {
        match self {
            Activation::Relu => x.max(0.0),
            Activation::GeluTanh => {
                let c = (2.0 / std::f64::consts::PI).sqrt();
                0.5 * x * (1.0 + (c * (x + 0.044715 * x * x * x)).tanh())
            }
        }
    }

    /// Its name in logs and library descriptions.
    pub fn name(self) -> &'static str {
        match self {
            Activation::Relu => "relu",
            Activation::GeluTanh => "gelu(tanh)",
        }
    }
}

/// The values of `x` the recognizer evaluates the expression at: both signs, the flat tails, the
/// curved middle, and zero.
pub const PROBES: [f64; 25] = [
    -8.0, -5.5, -4.0, -3.1, -2.5, -2.0, -1.7, -1.3, -1.0, -0.75, -0.5, -0.3, -0.1, 0.0, 0.07, 0.2, 0.45, 0.8, 1.1, 1.6,
    2.2, 3.0, 3.9, 5.3, 8.0,
];

/// How far the expression may be from the formula at a probe: relative above 1, absolute below.
pub const PROBE_TOLERANCE: f64 = 1e-7;

/// The node `x` with `v = act(x)` for an [`Activation`] other than ReLU (the caller matches
/// ReLU's one op itself), and which: `leaf(id)` says whether node `id` is an acceptable `x` and
/// under which key (every `x` leaf must have the same key: the same sum). `None` when `v` is no
/// such activation (see the module docs for how this is decided).
pub fn activation_input<K: PartialEq + Copy>(
    k: &Kernel,
    v: ExprId,
    leaf: &dyn Fn(ExprId) -> Option<K>,
) -> Option<(Activation, ExprId)> {
    let mut shape = Shape { k, leaf, key: None, first: None, tanh: 0, seen: HashMap::new() };
    if !shape.walk(v) || shape.tanh == 0 {
        return None;
    }
    let x = shape.first?;
    let act = Activation::GeluTanh;
    let agrees = PROBES.iter().all(|&t| {
        let mut memo = HashMap::new();
        let got = eval(k, v, t, &shape.seen, &mut memo);
        let want = act.eval(t);
        got.is_finite() && (got - want).abs() <= PROBE_TOLERANCE * want.abs().max(1.0)
    });
    agrees.then_some((act, x))
}

/// What a node of the walked expression is.
#[derive(Clone, Copy, PartialEq)]
enum Node {
    /// The variable `x`.
    Leaf,
    /// An op of the allowed set over other nodes.
    Op,
}

/// The shape check of [`activation_input`]: classifies each node once.
struct Shape<'a, K> {
    k: &'a Kernel,
    leaf: &'a dyn Fn(ExprId) -> Option<K>,
    key: Option<K>,
    first: Option<ExprId>,
    tanh: usize,
    seen: HashMap<ExprId, Node>,
}

impl<K: PartialEq + Copy> Shape<'_, K> {
    /// Whether the expression at `id` is of the allowed shape (recording each node's class).
    fn walk(&mut self, id: ExprId) -> bool {
        if self.seen.contains_key(&id) {
            return true;
        }
        if let Some(key) = (self.leaf)(id) {
            if self.key.is_some_and(|k| k != key) {
                return false;
            }
            self.key = Some(key);
            self.first.get_or_insert(id);
            self.seen.insert(id, Node::Leaf);
            return true;
        }
        let te = &self.k.exprs[id.0 as usize];
        if te.dtype != DType::F32 {
            return false;
        }
        let ok = match te.expr {
            Expr::Const(c) => c.is_finite(),
            Expr::Cast(x) => self.walk(x),
            Expr::Unary(UnaryOp::Tanh, x) => {
                self.tanh += 1;
                self.walk(x)
            }
            Expr::Binary(BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div, a, b) => {
                self.walk(a) && self.walk(b)
            }
            _ => false,
        };
        if ok {
            self.seen.insert(id, Node::Op);
        }
        ok
    }
}

/// The value of the (shape-checked) expression at `id` with every leaf equal to `x`.
fn eval(k: &Kernel, id: ExprId, x: f64, seen: &HashMap<ExprId, Node>, memo: &mut HashMap<ExprId, f64>) -> f64 {
    if let Some(&v) = memo.get(&id) {
        return v;
    }
    let v = if seen.get(&id) == Some(&Node::Leaf) {
        x
    } else {
        match k.exprs[id.0 as usize].expr {
            Expr::Const(c) => c,
            Expr::Cast(a) => eval(k, a, x, seen, memo),
            // The reference's own op semantics (`scalar`), in f64.
            Expr::Unary(op, a) => crate::scalar::unary_f64(op, eval(k, a, x, seen, memo)).map_or(f64::NAN, |v| v.f()),
            Expr::Binary(op, a, b) => {
                let (a, b) = (eval(k, a, x, seen, memo), eval(k, b, x, seen, memo));
                crate::scalar::binary_f64(op, a, b).map_or(f64::NAN, |v| v.f())
            }
            _ => f64::NAN,
        }
    };
    memo.insert(id, v);
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::{KernelBody, TypedExpr};

    /// A kernel holding `exprs` (only the expression table matters here).
    fn with_exprs(exprs: Vec<(Expr, DType)>) -> Kernel {
        Kernel {
            name: "t".into(),
            args: Vec::new(),
            exprs: exprs.into_iter().map(|(expr, dtype)| TypedExpr { expr, dtype }).collect(),
            body: KernelBody::Pointwise { numel: 1, stores: Vec::new() },
            origins: Vec::new(),
            ops: Vec::new(),
            flops: 0.0,
            bytes: 0.0,
        }
    }

    /// Builds expressions into a table, returning ids.
    struct B(Vec<(Expr, DType)>);
    impl B {
        fn push(&mut self, e: Expr) -> ExprId {
            self.0.push((e, DType::F32));
            ExprId(self.0.len() as u32 - 1)
        }
        fn c(&mut self, v: f64) -> ExprId {
            self.push(Expr::Const(v as f32 as f64))
        }
        fn bin(&mut self, op: BinaryOp, a: ExprId, b: ExprId) -> ExprId {
            self.push(Expr::Binary(op, a, b))
        }
    }

    /// `0.5 x * (1 + tanh(c (x + k x x x)))`, as `decompose` writes GELU's tanh form (`k` 0.044715,
    /// `c` sqrt(2 / pi)).
    fn decomposed(b: &mut B, x: ExprId, k: f64, c: f64) -> ExprId {
        let x2 = b.bin(BinaryOp::Mul, x, x);
        let x3 = b.bin(BinaryOp::Mul, x2, x);
        let k = b.c(k);
        let a = b.bin(BinaryOp::Mul, x3, k);
        let inner = b.bin(BinaryOp::Add, x, a);
        let c = b.c(c);
        let t = b.bin(BinaryOp::Mul, inner, c);
        half_x_one_plus(b, x, UnaryOp::Tanh, t)
    }

    /// `0.5 x * (1 + op(t))`: the outer form of both GELUs.
    fn half_x_one_plus(b: &mut B, x: ExprId, op: UnaryOp, t: ExprId) -> ExprId {
        let f = b.push(Expr::Unary(op, t));
        let one = b.c(1.0);
        let p = b.bin(BinaryOp::Add, f, one);
        let half = b.c(0.5);
        let h = b.bin(BinaryOp::Mul, x, half);
        b.bin(BinaryOp::Mul, h, p)
    }

    /// GELU's tanh form as `decompose` writes it, as GPT-2's export writes it (halves and
    /// factors elsewhere), and with `x` repeated as distinct nodes of the same sum: each found.
    #[test]
    fn gelu_tanh_forms_are_found() {
        let forms: [fn(&mut B, ExprId) -> ExprId; 3] = [
            |b, x| decomposed(b, x, 0.044715, (2.0 / std::f64::consts::PI).sqrt()),
            // x * (1 + tanh(c x (1 + 0.044715 x^2))) / 2
            |b, x| {
                let x2 = b.bin(BinaryOp::Mul, x, x);
                let k = b.c(0.044715);
                let a = b.bin(BinaryOp::Mul, k, x2);
                let one = b.c(1.0);
                let f = b.bin(BinaryOp::Add, one, a);
                let xf = b.bin(BinaryOp::Mul, x, f);
                let c = b.c(0.7978845608);
                let t = b.bin(BinaryOp::Mul, c, xf);
                let th = b.push(Expr::Unary(UnaryOp::Tanh, t));
                let p = b.bin(BinaryOp::Add, one, th);
                let xp = b.bin(BinaryOp::Mul, x, p);
                let two = b.c(2.0);
                b.bin(BinaryOp::Div, xp, two)
            },
            // 0.5 x + 0.5 x tanh(...) with x - (-0.044715 x^3) inside
            |b, x| {
                let x2 = b.bin(BinaryOp::Mul, x, x);
                let x3 = b.bin(BinaryOp::Mul, x, x2);
                let k = b.c(-0.044715);
                let a = b.bin(BinaryOp::Mul, x3, k);
                let inner = b.bin(BinaryOp::Sub, x, a);
                let c = b.c(0.7978845608);
                let t = b.bin(BinaryOp::Mul, inner, c);
                let th = b.push(Expr::Unary(UnaryOp::Tanh, t));
                let half = b.c(0.5);
                let h = b.bin(BinaryOp::Mul, half, x);
                let ht = b.bin(BinaryOp::Mul, h, th);
                b.bin(BinaryOp::Add, h, ht)
            },
        ];
        for (i, form) in forms.iter().enumerate() {
            let mut b = B(Vec::new());
            let x = b.push(Expr::Acc(0));
            let v = form(&mut b, x);
            let k = with_exprs(b.0);
            let leaf = |id: ExprId| (id == x).then_some(0u8);
            assert_eq!(activation_input(&k, v, &leaf), Some((Activation::GeluTanh, x)), "form {i}");
        }
        // `x` as two distinct nodes with the same key is one variable.
        let mut b = B(Vec::new());
        let x1 = b.push(Expr::Acc(0));
        let x2 = b.push(Expr::Acc(0));
        let v = forms[0](&mut b, x1);
        // Rewire the cube's last factor to the second node.
        let k = {
            let mut k = with_exprs(b.0);
            if let Expr::Binary(BinaryOp::Mul, a, _) = k.exprs[3].expr {
                k.exprs[3].expr = Expr::Binary(BinaryOp::Mul, a, x2);
            }
            k
        };
        let leaf = |id: ExprId| (id == x1 || id == x2).then_some(0u8);
        assert_eq!(activation_input(&k, v, &leaf), Some((Activation::GeluTanh, x1)));
        // Different keys (two different sums) are refused.
        let leaf = |id: ExprId| (id == x1).then_some(0u8).or((id == x2).then_some(1u8));
        assert_eq!(activation_input(&k, v, &leaf), None);
    }

    /// Look-alikes are refused: other constants, GELU's erf form, a polynomial without tanh.
    #[test]
    fn look_alikes_are_refused() {
        let gelu_with = |kk: f64, c: f64| {
            let mut b = B(Vec::new());
            let x = b.push(Expr::Acc(0));
            let v = decomposed(&mut b, x, kk, c);
            (with_exprs(b.0), x, v)
        };
        let c = (2.0 / std::f64::consts::PI).sqrt();
        for (kk, cc) in [(0.0447, c), (0.044715, 0.8), (0.05, c), (0.0, c)] {
            let (k, x, v) = gelu_with(kk, cc);
            assert_eq!(activation_input(&k, v, &|id| (id == x).then_some(())), None, "{kk} {cc}");
        }
        // erf GELU: 0.5 x (1 + erf(x / sqrt 2)): erf is not in the shape.
        let mut b = B(Vec::new());
        let x = b.push(Expr::Acc(0));
        let s = b.c(std::f64::consts::FRAC_1_SQRT_2);
        let t = b.bin(BinaryOp::Mul, x, s);
        let v = half_x_one_plus(&mut b, x, UnaryOp::Erf, t);
        let k = with_exprs(b.0);
        assert_eq!(activation_input(&k, v, &|id| (id == x).then_some(())), None);
        // A polynomial without tanh (no activation at all) is not GELU.
        let mut b = B(Vec::new());
        let x = b.push(Expr::Acc(0));
        let v = b.bin(BinaryOp::Mul, x, x);
        let k = with_exprs(b.0);
        assert_eq!(activation_input(&k, v, &|id| (id == x).then_some(())), None);
    }
}
