//! A kernel's expressions, indices, loads and stores as PTX instructions, lane group by lane
//! group.
//!
//! Contract: [`check`] refuses, before anything is written, every expression, index and dtype
//! that [`Lower`] does not cover, so a refusal never leaves half a body. [`Lower`] then computes
//! each expression once for the group where it is uniform across its lanes and once per lane
//! where it varies ([`Emitter::set_lanes`]'s analysis, shared with the CUDA C++ renderer), loads
//! and stores contiguous runs with one vector access ([`LaneForm::Contig`]) and every other
//! access one lane at a time. Indices are 32-bit unsigned and wrap, as the kernel IR's invariants
//! allow (negative constants only where the whole sum is non-negative). The operations and their
//! semantics are the CUDA C++ renderer's ([`super::super::ops`]): `Rsqrt` is `1 / sqrt` (two
//! roundings), `Reciprocal` `1 / x`, division the IEEE `div.rn` unless the kernel may divide
//! through the reciprocal and take `__expf` ([`relaxed_math`]), rounding ties to even; `exp` and
//! `erf` otherwise by [`super::math`] (within 2 ulp, as libdevice's `expf` and `erff`).

use std::collections::HashMap;

use sinter_core::DType;
use sinter_core::ir::{BinaryOp, UnaryOp};
use sinter_core::kernel::analysis::{closure, var_range};
use sinter_core::kernel::lanes::LaneForm;
use sinter_core::kernel::{Expr, ExprId, Index, Kernel, Store, Var};
use sinter_core::scalar::{Scalar, cast};

use super::super::analysis::{relaxed_math, within_unit};
use super::super::emit::Emitter;
use super::{Asm, Class, Refusal, f32_lit, refuse};

/// The dtypes written here: computed in f32 (16-bit values carried in f32 between expressions).
const FLOATS: [DType; 3] = [DType::F32, DType::F16, DType::BF16];

/// Unary ops written here, on f32.
const UNARY: [UnaryOp; 13] = [
    UnaryOp::Neg,
    UnaryOp::Abs,
    UnaryOp::Relu,
    UnaryOp::Sqrt,
    UnaryOp::Rsqrt,
    UnaryOp::Reciprocal,
    UnaryOp::Floor,
    UnaryOp::Ceil,
    UnaryOp::Round,
    UnaryOp::Sin,
    UnaryOp::Cos,
    UnaryOp::Exp,
    UnaryOp::Erf,
];

/// Binary ops written here, on f32.
const BINARY: [BinaryOp; 6] =
    [BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div, BinaryOp::Max, BinaryOp::Min];

/// Refuses what [`Lower`] does not cover in the closure of `roots` and in `stores` (indices over
/// the loop variables `vars`).
pub(crate) fn check(k: &Kernel, roots: &[ExprId], stores: &[Store], vars: &[Var]) -> Result<(), Refusal> {
    for a in &k.args {
        if !FLOATS.contains(&a.dtype) {
            return refuse(format!("argument of dtype {} (f32, f16, bf16 only)", a.dtype));
        }
    }
    for e in closure(k, roots, &|_| false) {
        let te = &k.exprs[e as usize];
        if !FLOATS.contains(&te.dtype) {
            return refuse(format!("v{e} of dtype {} (f32, f16, bf16 only)", te.dtype));
        }
        match &te.expr {
            Expr::Load { index, .. } => check_index(index, vars)?,
            Expr::Const(_) | Expr::Acc(_) => {}
            Expr::Unary(op, _) if UNARY.contains(op) => {}
            Expr::Binary(op, ..) if BINARY.contains(op) => {}
            Expr::Cast(_) => {}
            Expr::Unary(op, _) => return refuse(format!("unary {}", op.name())),
            Expr::Binary(op, ..) => return refuse(format!("binary {}", op.name())),
            other => return refuse(format!("expression {}", kind(other))),
        }
    }
    for s in stores {
        check_index(&s.index, vars)?;
    }
    Ok(())
}

/// The name of an expression's kind, for refusals.
fn kind(e: &Expr) -> &'static str {
    match e {
        Expr::Load { .. } => "load",
        Expr::Const(_) => "const",
        Expr::IndexValue(_) => "index value",
        Expr::IndexCmp(..) => "index comparison",
        Expr::Unary(..) => "unary",
        Expr::Binary(..) => "binary",
        Expr::Where(..) => "where",
        Expr::Cast(_) => "cast",
        Expr::Acc(_) => "accumulator",
    }
}

fn check_index(idx: &Index, vars: &[Var]) -> Result<(), Refusal> {
    match idx {
        Index::Const(_) => Ok(()),
        Index::Var(v) if vars.contains(v) => Ok(()),
        Index::Var(v) => refuse(format!("loop variable {v:?} in an index")),
        Index::Value(_) | Index::Clamp(..) => refuse("a gathered index (Index::Value, Index::Clamp)"),
        Index::Sum(ts) => ts.iter().try_for_each(|t| check_index(t, vars)),
        Index::Mul(x, _) | Index::Div(x, _) | Index::Mod(x, _) => check_index(x, vars),
    }
}

/// The type suffix of a load or store of `n` elements of `ty` (`.v2`/`.v4` vectors).
fn vec_ty(n: usize, ty: &str) -> String {
    if n == 1 { format!(".{ty}") } else { format!(".v{n}.{ty}") }
}

/// How [`Lower::divide`] divides a 32-bit unsigned value by a constant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Magic {
    /// `d = 1`.
    Identity,
    /// `d = 2^s`: a shift.
    Shift(u32),
    /// `q = mulhi(n, m) >> shift`, exact for the dividend's range (`n <= nmax` with
    /// `nmax * (m d - 2^(32 + shift)) < 2^(32 + shift)`, `m = ceil(2^(32 + shift) / d) < 2^32`):
    /// what NVVM writes for an index it knows the range of.
    Short {
        /// The multiplier.
        m: u32,
        /// The shift.
        shift: u32,
    },
    /// `t = mulhi(n, m); q = (t + ((n - t) >> 1)) >> shift` (Granlund and Montgomery, 1994,
    /// figure 4.1: exact for every 32-bit `n` with `l = ceil(log2 d)`,
    /// `m = floor(2^32 (2^l - d) / d) + 1`, `shift = l - 1`).
    MulHi {
        /// The multiplier.
        m: u32,
        /// The final shift.
        shift: u32,
    },
}

/// The division of a 32-bit unsigned value at most `nmax` by `d >= 1` (see [`Magic`]).
pub(crate) fn magic(d: u32, nmax: u64) -> Magic {
    if d <= 1 {
        return Magic::Identity;
    }
    if d.is_power_of_two() {
        return Magic::Shift(d.trailing_zeros());
    }
    for shift in 0..32u32 {
        let p = 1u128 << (32 + shift);
        let m = p.div_ceil(u128::from(d));
        if m >= 1 << 32 {
            break;
        }
        if u128::from(nmax) * (m * u128::from(d) - p) < p {
            return Magic::Short { m: m as u32, shift };
        }
    }
    let l = 32 - (d - 1).leading_zeros();
    let m = ((1u64 << 32) * ((1u64 << l) - u64::from(d)) / u64::from(d) + 1) as u32;
    Magic::MulHi { m, shift: l - 1 }
}

/// `n / d` for a constant `d >= 1` and `n <= nmax` by a multiply-high and shifts ([`magic`]):
/// ptxas writes a `div.u32` by an immediate as the general reciprocal-and-correct sequence (on
/// the conversion and MUFU pipes), which NVVM would have replaced.
pub(crate) fn divide(asm: &mut Asm, n: &str, d: u32, nmax: u64) -> String {
    // `t >> shift` into a fresh register; `t` itself where the shift is 0.
    let shifted = |asm: &mut Asm, t: String, shift: u32| {
        if shift == 0 {
            return t;
        }
        let q = asm.reg(Class::B32);
        asm.op(format!("shr.u32 {q}, {t}, {shift}"));
        q
    };
    match magic(d, nmax) {
        Magic::Identity => {
            let q = asm.reg(Class::B32);
            asm.op(format!("mov.u32 {q}, {n}"));
            q
        }
        Magic::Shift(s) => shifted(asm, n.to_string(), s),
        Magic::Short { m, shift } => {
            let t = asm.reg(Class::B32);
            asm.op(format!("mul.hi.u32 {t}, {n}, {m}"));
            shifted(asm, t, shift)
        }
        Magic::MulHi { m, shift } => {
            let (t, u, v, w) = (asm.reg(Class::B32), asm.reg(Class::B32), asm.reg(Class::B32), asm.reg(Class::B32));
            asm.op(format!("mul.hi.u32 {t}, {n}, {m}"));
            asm.op(format!("sub.u32 {u}, {n}, {t}"));
            asm.op(format!("shr.u32 {v}, {u}, 1"));
            asm.op(format!("add.u32 {w}, {v}, {t}"));
            shifted(asm, w, shift)
        }
    }
}

/// `(n / d, n % d)` for a constant `d >= 1` and `n <= nmax`: the quotient by [`divide`], the
/// remainder `n - q d` (a mask where `d` is a power of two); fresh registers, which a caller may
/// go on updating.
pub(crate) fn div_rem(asm: &mut Asm, n: &str, d: u32, nmax: u64) -> (String, String) {
    let r = asm.reg(Class::B32);
    let q = divide(asm, n, d, nmax);
    if d.is_power_of_two() {
        asm.op(format!("and.b32 {r}, {n}, {}", d - 1));
    } else {
        let p = asm.reg(Class::B32);
        asm.op(format!("mul.lo.u32 {p}, {q}, {d}"));
        asm.op(format!("sub.u32 {r}, {n}, {p}"));
    }
    (q, r)
}

/// `global + idx * size` (`.b64`) for the element index `idx` (`.b32`, unsigned): the address of
/// an element of `size` bytes.
pub(crate) fn element_address(asm: &mut Asm, global: &str, idx: &str, size: u64) -> String {
    let (off, a) = (asm.reg(Class::B64), asm.reg(Class::B64));
    asm.op(format!("mul.wide.u32 {off}, {idx}, {size}"));
    asm.op(format!("add.s64 {a}, {global}, {off}"));
    a
}

/// A 16-bit element (`.b16`) of dtype `d` as f32 (exact).
pub(crate) fn widen16(asm: &mut Asm, h: &str, d: DType) -> String {
    let f = asm.reg(Class::F32);
    if d == DType::F16 {
        asm.op(format!("cvt.f32.f16 {f}, {h}"));
    } else {
        // bf16 is the top half of an f32.
        let (u, b) = (asm.reg(Class::B32), asm.reg(Class::B32));
        asm.op(format!("cvt.u32.u16 {u}, {h}"));
        asm.op(format!("shl.b32 {b}, {u}, 16"));
        asm.op(format!("mov.b32 {f}, {b}"));
    }
    f
}

/// `x` (f32) rounded to the 16-bit dtype `d` (`.b16`, round to nearest even).
pub(crate) fn narrow16(asm: &mut Asm, x: &str, d: DType) -> String {
    let h = asm.reg(Class::B16);
    let t = if d == DType::F16 { "f16" } else { "bf16" };
    asm.op(format!("cvt.rn.{t}.f32 {h}, {x}"));
    h
}

/// `x` rounded to the 16-bit dtype `d` and carried in f32 again.
pub(crate) fn round16(asm: &mut Asm, x: &str, d: DType) -> String {
    let h = narrow16(asm, x, d);
    widen16(asm, &h, d)
}

/// Writes a kernel's expressions and stores into an [`Asm`], one lane group at a time.
///
/// Values live in three places: computed outside every group (`outer`: they do not depend on the
/// vectorized variable, e.g. a reduction's row-level terms), in the current group (`group`:
/// cleared by [`Lower::start_group`]), or kept in registers from an earlier phase (`cached`: a
/// persistent row's loads, by group). [`Expr::Acc`] reads [`Lower::acc`].
pub(crate) struct Lower<'e, 'k> {
    /// The emitter whose lane analysis says what varies (its text output is unused).
    em: &'e Emitter<'k>,
    /// The body being written.
    pub(crate) asm: &'e mut Asm,
    /// Global address of each argument (`.b64` registers).
    base: Vec<String>,
    /// The vectorized loop variable.
    var: Var,
    /// Lane group width.
    width: usize,
    /// Lane `j`'s value of `var` in the current group (`.b32` registers).
    lanes: Vec<String>,
    /// Registers of the loop variables that are the same for the whole thread (`Var::Row`).
    fixed: HashMap<Var, String>,
    outer: HashMap<u32, String>,
    group: HashMap<u32, Vec<String>>,
    /// Loads whose values come from registers in the current group: expr -> per-lane registers.
    pub(crate) cached: HashMap<u32, Vec<String>>,
    /// The finished result of each reduction (`.f32` registers).
    pub(crate) acc: HashMap<usize, String>,
    /// Reciprocals of thread-uniform divisors, computed once outside the groups (a relaxed
    /// division multiplies by them; NVVM hoists `__frcp_rn` of a row's sum the same way).
    rcp: HashMap<u32, String>,
    relaxed: bool,
}

impl<'e, 'k> Lower<'e, 'k> {
    /// A lowering with lane groups of `width` consecutive values of `var`, arguments at `base`,
    /// thread-uniform loop variables in `fixed`.
    pub(crate) fn new(
        em: &'e Emitter<'k>,
        asm: &'e mut Asm,
        base: Vec<String>,
        (var, width): (Var, u32),
        fixed: HashMap<Var, String>,
    ) -> Self {
        let relaxed = relaxed_math(em.k);
        Lower {
            em,
            asm,
            base,
            var,
            width: width as usize,
            lanes: Vec::new(),
            fixed,
            outer: HashMap::new(),
            group: HashMap::new(),
            cached: HashMap::new(),
            acc: HashMap::new(),
            rcp: HashMap::new(),
            relaxed,
        }
    }

    /// Starts the group whose first value of the vectorized variable is in `first`.
    pub(crate) fn start_group(&mut self, first: &str) {
        self.lanes = vec![first.to_string()];
        for j in 1..self.width {
            let r = self.asm.reg(Class::B32);
            self.asm.op(format!("add.u32 {r}, {first}, {j}"));
            self.lanes.push(r);
        }
        self.group.clear();
    }

    fn width(&self) -> usize {
        self.width
    }

    /// Writes, outside any group, every expression of the closure of `roots` that `outer_ok`
    /// admits (operands first) and that is not yet computed.
    pub(crate) fn outer_exprs(&mut self, roots: &[ExprId], outer_ok: &dyn Fn(u32) -> bool) -> Result<(), Refusal> {
        let cached: Vec<u32> = self.cached.keys().copied().collect();
        let set = closure(self.em.k, roots, &|e| cached.contains(&e));
        for &e in &set {
            if outer_ok(e) && !self.outer.contains_key(&e) && !self.cached.contains_key(&e) {
                let regs = self.compute(e, 1)?;
                self.outer.insert(e, regs.into_iter().next().unwrap_or_default());
            }
        }
        if self.relaxed {
            for &e in &set {
                if let Expr::Binary(BinaryOp::Div, _, b) = self.em.k.exprs[e as usize].expr
                    && !self.rcp.contains_key(&b.0)
                    && let Some(d) = self.outer.get(&b.0).cloned()
                {
                    let r = self.f32_reg();
                    self.asm.op(format!("rcp.rn.f32 {r}, {d}"));
                    self.rcp.insert(b.0, r);
                }
            }
        }
        Ok(())
    }

    /// Writes, in the current group, every expression of the closure of `roots` not yet available
    /// (in arena order: operands first).
    pub(crate) fn exprs(&mut self, roots: &[ExprId]) -> Result<(), Refusal> {
        let cached: Vec<u32> = self.cached.keys().copied().collect();
        for e in closure(self.em.k, roots, &|e| cached.contains(&e)) {
            if !self.available(e) {
                let lanes = if self.varies(e) { self.width() } else { 1 };
                let regs = self.compute(e, lanes)?;
                self.group.insert(e, regs);
            }
        }
        Ok(())
    }

    fn available(&self, e: u32) -> bool {
        self.cached.contains_key(&e) || self.outer.contains_key(&e) || self.group.contains_key(&e)
    }

    /// The register of `e` at lane `j`.
    pub(crate) fn val(&self, e: ExprId, j: usize) -> Result<String, Refusal> {
        let pick = |v: &Vec<String>| if v.len() == 1 { v[0].clone() } else { v[j].clone() };
        if let Some(v) = self.cached.get(&e.0) {
            return Ok(pick(v));
        }
        if let Some(v) = self.outer.get(&e.0) {
            return Ok(v.clone());
        }
        match self.group.get(&e.0) {
            Some(v) => Ok(pick(v)),
            None => refuse(format!("internal: v{} used before it was written", e.0)),
        }
    }

    /// The registers of `e` in the current group (one, or one per lane).
    pub(crate) fn vals(&self, e: ExprId) -> Result<Vec<String>, Refusal> {
        let n = if self.varies(e.0) { self.width() } else { 1 };
        (0..n).map(|j| self.val(e, j)).collect()
    }

    fn varies(&self, e: u32) -> bool {
        self.em.varying.get(e as usize).copied().unwrap_or(true) && self.width() > 1
    }

    /// Computes `e` for `lanes` lanes (1: once for the group).
    fn compute(&mut self, e: u32, lanes: usize) -> Result<Vec<String>, Refusal> {
        let k = self.em.k;
        Ok(match &k.exprs[e as usize].expr {
            Expr::Load { arg, index } => self.load(*arg, index, lanes > 1)?,
            Expr::Const(c) => {
                // At the expression's dtype (a 16-bit constant rounded to 16 bits), as the C++
                // renderer's literals and the reference.
                let v = match cast(Scalar::F(*c), DType::F64, k.exprs[e as usize].dtype) {
                    Scalar::F(x) => x as f32,
                    Scalar::I(i) => i as f32,
                };
                let r = self.asm.reg(Class::F32);
                self.asm.op(format!("mov.f32 {r}, {}", f32_lit(v)));
                vec![r]
            }
            Expr::Acc(slot) => match self.acc.get(slot) {
                Some(r) => vec![r.clone()],
                None => return refuse(format!("internal: accumulator {slot} read before its reduction")),
            },
            Expr::Cast(x) => {
                let to = k.exprs[e as usize].dtype;
                let mut out = Vec::with_capacity(lanes);
                for j in 0..lanes {
                    let xv = self.val(*x, j)?;
                    // To f16/bf16: rounded once, then carried in f32; to f32: the value itself.
                    out.push(if to == DType::F32 { xv } else { round16(self.asm, &xv, to) });
                }
                out
            }
            Expr::Unary(op, x) => {
                let unit = matches!(op, UnaryOp::Sin | UnaryOp::Cos) && within_unit(k, *x);
                let mut out = Vec::with_capacity(lanes);
                for j in 0..lanes {
                    let xv = self.val(*x, j)?;
                    out.push(self.unary(*op, &xv, unit)?);
                }
                out
            }
            Expr::Binary(op, a, b) => {
                let mut out = Vec::with_capacity(lanes);
                for j in 0..lanes {
                    let av = self.val(*a, j)?;
                    if *op == BinaryOp::Div
                        && let Some(q) = self.rcp.get(&b.0).cloned()
                    {
                        let r = self.f32_reg();
                        self.asm.op(format!("mul.f32 {r}, {av}, {q}"));
                        out.push(r);
                        continue;
                    }
                    let bv = self.val(*b, j)?;
                    out.push(self.binary(*op, &av, &bv)?);
                }
                out
            }
            other => return refuse(format!("expression {}", kind(other))),
        })
    }

    /// Loads of argument `arg` at `index` as f32 registers: one when uniform, else one per lane
    /// (a vector load where contiguous: 16-bit elements two to a 32-bit word).
    fn load(&mut self, arg: usize, index: &Index, varying: bool) -> Result<Vec<String>, Refusal> {
        let w = self.width();
        let d = self.em.k.args[arg].dtype;
        let form = if varying && w > 1 { self.em.form(index) } else { LaneForm::Uniform };
        let scalar = |low: &mut Self, j: usize| -> Result<String, Refusal> {
            let a = low.address(arg, index, j)?;
            Ok(if d == DType::F32 {
                let r = low.asm.reg(Class::F32);
                low.asm.op(format!("ld.global.nc.f32 {r}, [{a}]"));
                r
            } else {
                let h = low.asm.reg(Class::B16);
                low.asm.op(format!("ld.global.nc.b16 {h}, [{a}]"));
                widen16(low.asm, &h, d)
            })
        };
        match form {
            LaneForm::Uniform => Ok(vec![scalar(self, 0)?]),
            LaneForm::Gather => (0..w).map(|j| scalar(self, j)).collect(),
            LaneForm::Contig if d == DType::F32 => {
                let a = self.address(arg, index, 0)?;
                let regs: Vec<String> = (0..w).map(|_| self.asm.reg(Class::F32)).collect();
                self.asm.op(format!("ld.global.nc{} {{{}}}, [{a}]", vec_ty(w, "f32"), regs.join(", ")));
                Ok(regs)
            }
            LaneForm::Contig => {
                let a = self.address(arg, index, 0)?;
                let words: Vec<String> = (0..w / 2).map(|_| self.asm.reg(Class::B32)).collect();
                self.asm.op(format!("ld.global.nc{} {{{}}}, [{a}]", vec_ty(w / 2, "b32"), words.join(", ")));
                let mut regs = Vec::with_capacity(w);
                for word in &words {
                    let (lo, hi) = (self.asm.reg(Class::B16), self.asm.reg(Class::B16));
                    self.asm.op(format!("mov.b32 {{{lo}, {hi}}}, {word}"));
                    regs.push(widen16(self.asm, &lo, d));
                    regs.push(widen16(self.asm, &hi, d));
                }
                Ok(regs)
            }
        }
    }

    /// Writes `s`: a vector store where contiguous, else one store per lane (a uniform store in a
    /// group of several lanes is written by each lane in turn, the last one's value staying, as
    /// the C++ renderer's per-lane stores leave it).
    pub(crate) fn store(&mut self, s: &Store) -> Result<(), Refusal> {
        let w = self.width();
        let form = if w > 1 { self.em.form(&s.index) } else { LaneForm::Uniform };
        let vals: Vec<String> = (0..w).map(|j| self.val(s.value, j)).collect::<Result<_, _>>()?;
        let d = self.em.k.args[s.arg].dtype;
        if form == LaneForm::Contig {
            let a = self.address(s.arg, &s.index, 0)?;
            if d == DType::F32 {
                self.asm.op(format!("st.global{} [{a}], {{{}}}", vec_ty(w, "f32"), vals.join(", ")));
            } else {
                let mut words = Vec::with_capacity(w / 2);
                for pair in vals.chunks(2) {
                    let (lo, hi) = (narrow16(self.asm, &pair[0], d), narrow16(self.asm, &pair[1], d));
                    let word = self.asm.reg(Class::B32);
                    self.asm.op(format!("mov.b32 {word}, {{{lo}, {hi}}}"));
                    words.push(word);
                }
                self.asm.op(format!("st.global{} [{a}], {{{}}}", vec_ty(w / 2, "b32"), words.join(", ")));
            }
            return Ok(());
        }
        for (j, v) in vals.iter().enumerate() {
            self.scalar_store(s, j, v)?;
        }
        Ok(())
    }

    /// Stores the f32 value `v` as element `s.index` (at lane `j`) of `s.arg`, narrowed to its dtype.
    fn scalar_store(&mut self, s: &Store, j: usize, v: &str) -> Result<(), Refusal> {
        let a = self.address(s.arg, &s.index, j)?;
        let d = self.em.k.args[s.arg].dtype;
        if d == DType::F32 {
            self.asm.op(format!("st.global.f32 [{a}], {v}"));
        } else {
            let h = narrow16(self.asm, v, d);
            self.asm.op(format!("st.global.b16 [{a}], {h}"));
        }
        Ok(())
    }

    /// Writes a row store: once, from the thread-uniform values (`outer_exprs`).
    pub(crate) fn row_store(&mut self, s: &Store) -> Result<(), Refusal> {
        let v = self.val(s.value, 0)?;
        self.scalar_store(s, 0, &v)
    }

    /// The global address of element `index` of argument `arg` at lane `j`.
    fn address(&mut self, arg: usize, index: &Index, j: usize) -> Result<String, Refusal> {
        let i = self.index(index, j)?;
        let size = self.em.k.args[arg].dtype.size_bytes() as u64;
        Ok(element_address(self.asm, &self.base[arg], &i, size))
    }

    /// `index` at lane `j` in a `.b32` register (wrapping unsigned arithmetic).
    fn index(&mut self, idx: &Index, j: usize) -> Result<String, Refusal> {
        let r = match idx {
            Index::Const(c) => {
                let r = self.asm.reg(Class::B32);
                self.asm.op(format!("mov.u32 {r}, {}", *c as u32));
                r
            }
            Index::Var(v) if *v == self.var && !self.lanes.is_empty() => return Ok(self.lanes[j].clone()),
            Index::Var(v) if self.fixed.contains_key(v) => return Ok(self.fixed[v].clone()),
            Index::Sum(ts) => {
                let mut acc: Option<String> = None;
                let mut constant: u32 = 0;
                for t in ts {
                    if let Index::Const(c) = t {
                        constant = constant.wrapping_add(*c as u32);
                        continue;
                    }
                    let v = self.index(t, j)?;
                    acc = Some(match acc {
                        None => v,
                        Some(a) => {
                            let r = self.asm.reg(Class::B32);
                            self.asm.op(format!("add.u32 {r}, {a}, {v}"));
                            r
                        }
                    });
                }
                let r = self.asm.reg(Class::B32);
                match acc {
                    Some(a) => self.asm.op(format!("add.u32 {r}, {a}, {constant}")),
                    None => self.asm.op(format!("mov.u32 {r}, {constant}")),
                }
                r
            }
            Index::Mul(x, c) => {
                let v = self.index(x, j)?;
                let r = self.asm.reg(Class::B32);
                self.asm.op(format!("mul.lo.u32 {r}, {v}, {}", *c as u32));
                r
            }
            Index::Div(x, c) => {
                let n = self.index(x, j)?;
                divide(self.asm, &n, *c as u32, self.max_of(x))
            }
            Index::Mod(x, c) => {
                let n = self.index(x, j)?;
                let d = *c as u32;
                if d.is_power_of_two() {
                    let r = self.asm.reg(Class::B32);
                    self.asm.op(format!("and.b32 {r}, {n}, {}", d - 1));
                    r
                } else {
                    div_rem(self.asm, &n, d, self.max_of(x)).1
                }
            }
            Index::Var(_) | Index::Value(_) | Index::Clamp(..) => return refuse("index outside the covered forms"),
        };
        Ok(r)
    }

    /// The largest value `idx` takes over the kernel's loop ranges (`u32::MAX` where unknown).
    fn max_of(&self, idx: &Index) -> u64 {
        let k = self.em.k;
        idx.range(&|v| var_range(k, v)).map_or(u64::from(u32::MAX), |(_, hi)| hi.clamp(0, i64::from(u32::MAX)) as u64)
    }

    fn f32_reg(&mut self) -> String {
        self.asm.reg(Class::F32)
    }

    fn unary(&mut self, op: UnaryOp, x: &str, unit: bool) -> Result<String, Refusal> {
        if matches!(op, UnaryOp::Sin | UnaryOp::Cos) {
            let offset = u32::from(op == UnaryOp::Cos);
            return Ok(if unit {
                super::trig::unit(self.asm, x, offset == 1)
            } else {
                super::trig::full(self.asm, x, offset)
            });
        }
        let r = self.f32_reg();
        match op {
            // `__expf`: 2^(x log2 e) on the SFU; only where every output is 16-bit (`check`).
            UnaryOp::Exp if self.relaxed => {
                let t = self.f32_reg();
                self.asm.op(format!("mul.f32 {t}, {x}, {}", f32_lit(std::f32::consts::LOG2_E)));
                self.asm.op(format!("ex2.approx.ftz.f32 {r}, {t}"));
            }
            UnaryOp::Exp => return Ok(super::math::exp(self.asm, x)),
            UnaryOp::Erf => return Ok(super::math::erf(self.asm, x)),
            UnaryOp::Neg => self.asm.op(format!("neg.f32 {r}, {x}")),
            UnaryOp::Abs => self.asm.op(format!("abs.f32 {r}, {x}")),
            UnaryOp::Relu => {
                // x > 0 or NaN keeps x; everything else (-0 included) is +0.
                let p = self.asm.reg(Class::Pred);
                self.asm.op(format!("setp.gtu.f32 {p}, {x}, 0f00000000"));
                self.asm.op(format!("selp.f32 {r}, {x}, 0f00000000, {p}"));
            }
            UnaryOp::Sqrt => self.asm.op(format!("sqrt.rn.f32 {r}, {x}")),
            UnaryOp::Rsqrt => {
                let s = self.f32_reg();
                self.asm.op(format!("sqrt.rn.f32 {s}, {x}"));
                self.asm.op(format!("rcp.rn.f32 {r}, {s}"));
            }
            UnaryOp::Reciprocal => self.asm.op(format!("rcp.rn.f32 {r}, {x}")),
            UnaryOp::Floor => self.asm.op(format!("cvt.rmi.f32.f32 {r}, {x}")),
            UnaryOp::Ceil => self.asm.op(format!("cvt.rpi.f32.f32 {r}, {x}")),
            UnaryOp::Round => self.asm.op(format!("cvt.rni.f32.f32 {r}, {x}")),
            other => return refuse(format!("unary {}", other.name())),
        }
        Ok(r)
    }

    fn binary(&mut self, op: BinaryOp, a: &str, b: &str) -> Result<String, Refusal> {
        let r = self.f32_reg();
        match op {
            BinaryOp::Add => self.asm.op(format!("add.f32 {r}, {a}, {b}")),
            BinaryOp::Sub => self.asm.op(format!("sub.f32 {r}, {a}, {b}")),
            BinaryOp::Mul => self.asm.op(format!("mul.f32 {r}, {a}, {b}")),
            BinaryOp::Div if self.relaxed => {
                let q = self.f32_reg();
                self.asm.op(format!("rcp.rn.f32 {q}, {b}"));
                self.asm.op(format!("mul.f32 {r}, {a}, {q}"));
            }
            BinaryOp::Div => self.asm.op(format!("div.rn.f32 {r}, {a}, {b}")),
            BinaryOp::Max => self.asm.op(format!("max.NaN.f32 {r}, {a}, {b}")),
            BinaryOp::Min => self.asm.op(format!("min.NaN.f32 {r}, {a}, {b}")),
            other => return refuse(format!("binary {}", other.name())),
        }
        Ok(r)
    }
}

#[cfg(test)]
mod tests {
    use super::{Magic, magic};

    /// [`Magic`] run on the host with the instructions' 32-bit wrapping arithmetic.
    fn divide(n: u32, d: u32, nmax: u64) -> u32 {
        match magic(d, nmax) {
            Magic::Identity => n,
            Magic::Shift(s) => n >> s,
            Magic::Short { m, shift } => (((u64::from(n) * u64::from(m)) >> 32) as u32) >> shift,
            Magic::MulHi { m, shift } => {
                let t = ((u64::from(n) * u64::from(m)) >> 32) as u32;
                (t + ((n - t) >> 1)) >> shift
            }
        }
    }

    #[test]
    fn bounded_division_is_exact_over_its_whole_range() {
        // Exhaustive over the range for a few divisors the workloads use (image sizes, heads).
        for (d, nmax) in [(49u32, 1u64 << 20), (3136, 1 << 22), (7, 1 << 21), (4097, 1 << 22), (1000, 1 << 22)] {
            assert!(matches!(magic(d, nmax), Magic::Short { .. }), "{d} below {nmax}");
            for n in 0..=nmax as u32 {
                assert_eq!(divide(n, d, nmax), n / d, "{n} / {d}");
            }
        }
    }

    #[test]
    fn constant_division_is_exact_for_every_32_bit_value() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut divisors: Vec<u32> = (1..=4099).collect();
        divisors.extend([7 * 7 * 64, 50_257, 65_535, 65_537, 1 << 20, (1 << 31) - 1, 1 << 31, u32::MAX - 1, u32::MAX]);
        divisors.extend((0..200).map(|_| (next() as u32).max(1)));
        for d in divisors {
            let mut ns = vec![
                0,
                1,
                d - 1,
                d,
                d.wrapping_add(1),
                u32::MAX,
                u32::MAX - 1,
                u32::MAX / d * d,
                (u32::MAX / d * d).wrapping_sub(1),
            ];
            ns.extend((0..300).map(|_| next() as u32));
            for n in &ns {
                assert_eq!(divide(*n, d, u64::from(u32::MAX)), n / d, "{n} / {d}");
            }
            // Bounded dividends (an index's range): every n up to the bound, at bounds near
            // where the short form stops being exact.
            for nmax in [1u64 << 16, 1 << 20, 1 << 24, 135_168, 16_777_217, 1 << 31] {
                let limit = nmax.min(u64::from(u32::MAX)) as u32;
                for n in ns.iter().map(|n| n % (limit + 1)).chain([limit, limit - 1, 0]) {
                    assert_eq!(divide(n, d, nmax), n / d, "{n} / {d} (n <= {nmax})");
                }
            }
        }
    }
}
