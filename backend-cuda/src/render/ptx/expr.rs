//! A kernel's expressions, indices, loads and stores as PTX instructions for one lane group.
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
//! through the reciprocal ([`relaxed_math`]), rounding ties to even.

use std::collections::HashMap;

use sinter_core::DType;
use sinter_core::ir::{BinaryOp, UnaryOp};
use sinter_core::kernel::analysis::closure;
use sinter_core::kernel::lanes::LaneForm;
use sinter_core::kernel::{Expr, ExprId, Index, Kernel, Store, Var};

use super::super::analysis::{relaxed_math, within_unit};
use super::super::emit::Emitter;
use super::{Asm, Class, Refusal, f32_lit, refuse};

/// Unary ops written here, on f32.
const UNARY: [UnaryOp; 11] = [
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
];

/// Binary ops written here, on f32.
const BINARY: [BinaryOp; 6] =
    [BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div, BinaryOp::Max, BinaryOp::Min];

/// Refuses what [`Lower`] does not cover in the closure of `roots` and in `stores`.
pub(crate) fn check(k: &Kernel, roots: &[ExprId], stores: &[Store]) -> Result<(), Refusal> {
    for a in &k.args {
        if a.dtype != DType::F32 {
            return refuse(format!("argument of dtype {} (only f32)", a.dtype));
        }
    }
    for e in closure(k, roots, &|_| false) {
        let te = &k.exprs[e as usize];
        if te.dtype != DType::F32 {
            return refuse(format!("v{e} of dtype {} (only f32)", te.dtype));
        }
        match &te.expr {
            Expr::Load { index, .. } => check_index(index)?,
            Expr::Const(_) => {}
            Expr::Unary(op, x) if UNARY.contains(op) && k.exprs[x.0 as usize].dtype == DType::F32 => {}
            Expr::Binary(op, ..) if BINARY.contains(op) => {}
            Expr::Cast(x) if k.exprs[x.0 as usize].dtype == DType::F32 => {}
            Expr::Unary(op, _) => return refuse(format!("unary {}", op.name())),
            Expr::Binary(op, ..) => return refuse(format!("binary {}", op.name())),
            other => return refuse(format!("expression {}", kind(other))),
        }
    }
    for s in stores {
        check_index(&s.index)?;
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

fn check_index(idx: &Index) -> Result<(), Refusal> {
    match idx {
        Index::Const(_) | Index::Var(Var::Lane) => Ok(()),
        Index::Var(v) => refuse(format!("loop variable {v:?} in an index")),
        Index::Value(_) | Index::Clamp(..) => refuse("a gathered index (Index::Value, Index::Clamp)"),
        Index::Sum(ts) => ts.iter().try_for_each(check_index),
        Index::Mul(x, _) | Index::Div(x, _) | Index::Mod(x, _) => check_index(x),
    }
}

/// How [`Lower::divide`] divides a 32-bit unsigned value by a constant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Magic {
    /// `d = 1`.
    Identity,
    /// `d = 2^s`: a shift.
    Shift(u32),
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

/// The division of a 32-bit unsigned value by `d >= 1` (see [`Magic`]).
pub(crate) fn magic(d: u32) -> Magic {
    if d <= 1 {
        return Magic::Identity;
    }
    if d.is_power_of_two() {
        return Magic::Shift(d.trailing_zeros());
    }
    let l = 32 - (d - 1).leading_zeros();
    let m = ((1u64 << 32) * ((1u64 << l) - u64::from(d)) / u64::from(d) + 1) as u32;
    Magic::MulHi { m, shift: l - 1 }
}

/// Writes one lane group's expressions and stores into an [`Asm`].
pub(crate) struct Lower<'e, 'k> {
    /// The emitter whose lane analysis says what varies (its text output is unused).
    em: &'e Emitter<'k>,
    /// The body being written.
    pub(crate) asm: &'e mut Asm,
    /// Global address of each argument (`.b64` registers).
    base: Vec<String>,
    /// Lane `j`'s value of [`Var::Lane`] (`.b32` registers, `lanes[0]` the group's first).
    lanes: Vec<String>,
    /// Registers of each expression written: one when uniform over the group, one per lane else.
    vals: HashMap<u32, Vec<String>>,
    relaxed: bool,
}

impl<'e, 'k> Lower<'e, 'k> {
    /// A lowering of the group whose first lane is in `lane0` (`width` lanes), arguments at
    /// `base`.
    pub(crate) fn new(em: &'e Emitter<'k>, asm: &'e mut Asm, base: Vec<String>, lane0: String, width: u32) -> Self {
        let mut lanes = vec![lane0.clone()];
        for j in 1..width {
            let r = asm.reg(Class::B32);
            asm.op(format!("add.u32 {r}, {lane0}, {j}"));
            lanes.push(r);
        }
        let relaxed = relaxed_math(em.k);
        Lower { em, asm, base, lanes, vals: HashMap::new(), relaxed }
    }

    fn width(&self) -> usize {
        self.lanes.len()
    }

    /// Writes every expression of the closure of `roots` (in arena order: operands first).
    pub(crate) fn exprs(&mut self, roots: &[ExprId]) -> Result<(), Refusal> {
        for e in closure(self.em.k, roots, &|_| false) {
            self.expr(e)?;
        }
        Ok(())
    }

    /// The register of `e` at lane `j`.
    fn val(&self, e: ExprId, j: usize) -> Result<String, Refusal> {
        match self.vals.get(&e.0) {
            Some(v) if v.len() == 1 => Ok(v[0].clone()),
            Some(v) => Ok(v[j].clone()),
            None => refuse(format!("internal: v{} used before it was written", e.0)),
        }
    }

    fn varies(&self, e: u32) -> bool {
        self.em.varying.get(e as usize).copied().unwrap_or(true) && self.width() > 1
    }

    fn expr(&mut self, e: u32) -> Result<(), Refusal> {
        let k = self.em.k;
        let lanes = if self.varies(e) { self.width() } else { 1 };
        let regs = match &k.exprs[e as usize].expr {
            Expr::Load { arg, index } => self.load(*arg, index, self.em.varying[e as usize])?,
            Expr::Const(c) => {
                let r = self.asm.reg(Class::F32);
                self.asm.op(format!("mov.f32 {r}, {}", f32_lit(*c as f32)));
                vec![r]
            }
            Expr::Cast(x) => (0..lanes).map(|j| self.val(*x, j)).collect::<Result<_, _>>()?,
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
                    let (av, bv) = (self.val(*a, j)?, self.val(*b, j)?);
                    out.push(self.binary(*op, &av, &bv)?);
                }
                out
            }
            other => return refuse(format!("expression {}", kind(other))),
        };
        self.vals.insert(e, regs);
        Ok(())
    }

    /// Loads of argument `arg` at `index`: one register when uniform, else one per lane (a
    /// vector load where contiguous).
    fn load(&mut self, arg: usize, index: &Index, varying: bool) -> Result<Vec<String>, Refusal> {
        let w = self.width();
        let form = if varying && w > 1 { self.em.form(index) } else { LaneForm::Uniform };
        match form {
            LaneForm::Uniform => {
                let a = self.address(arg, index, 0)?;
                let r = self.asm.reg(Class::F32);
                self.asm.op(format!("ld.global.nc.f32 {r}, [{a}]"));
                Ok(vec![r])
            }
            LaneForm::Contig => {
                let a = self.address(arg, index, 0)?;
                let regs: Vec<String> = (0..w).map(|_| self.asm.reg(Class::F32)).collect();
                self.asm.op(format!("ld.global.nc.v{w}.f32 {{{}}}, [{a}]", regs.join(", ")));
                Ok(regs)
            }
            LaneForm::Gather => (0..w)
                .map(|j| {
                    let a = self.address(arg, index, j)?;
                    let r = self.asm.reg(Class::F32);
                    self.asm.op(format!("ld.global.nc.f32 {r}, [{a}]"));
                    Ok(r)
                })
                .collect(),
        }
    }

    /// Writes `s`: a vector store where contiguous, else one store per lane.
    pub(crate) fn store(&mut self, s: &Store) -> Result<(), Refusal> {
        let w = self.width();
        let form = if w > 1 { self.em.form(&s.index) } else { LaneForm::Uniform };
        let vals: Vec<String> = (0..w).map(|j| self.val(s.value, j)).collect::<Result<_, _>>()?;
        match form {
            LaneForm::Contig => {
                let a = self.address(s.arg, &s.index, 0)?;
                self.asm.op(format!("st.global.v{w}.f32 [{a}], {{{}}}", vals.join(", ")));
            }
            // A uniform store in a group of several lanes is written by each lane in turn (the
            // last one's value stays, as the C++ renderer's per-lane stores leave it).
            LaneForm::Uniform | LaneForm::Gather => {
                let lanes = if w > 1 { w } else { 1 };
                for (j, v) in vals.iter().enumerate().take(lanes) {
                    let a = self.address(s.arg, &s.index, j)?;
                    self.asm.op(format!("st.global.f32 [{a}], {v}"));
                }
            }
        }
        Ok(())
    }

    /// The global address of element `index` of argument `arg` at lane `j`.
    fn address(&mut self, arg: usize, index: &Index, j: usize) -> Result<String, Refusal> {
        let i = self.index(index, j)?;
        let size = self.em.k.args[arg].dtype.size_bytes();
        let (off, a) = (self.asm.reg(Class::B64), self.asm.reg(Class::B64));
        self.asm.op(format!("mul.wide.u32 {off}, {i}, {size}"));
        self.asm.op(format!("add.s64 {a}, {}, {off}", self.base[arg]));
        Ok(a)
    }

    /// `index` at lane `j` in a `.b32` register (wrapping unsigned arithmetic).
    fn index(&mut self, idx: &Index, j: usize) -> Result<String, Refusal> {
        let r = match idx {
            Index::Const(c) => {
                let r = self.asm.reg(Class::B32);
                self.asm.op(format!("mov.u32 {r}, {}", *c as u32));
                r
            }
            Index::Var(Var::Lane) => return Ok(self.lanes[j].clone()),
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
            Index::Mul(x, c) => self.index_op("mul.lo.u32", x, *c as u32, j)?,
            Index::Div(x, c) => {
                let n = self.index(x, j)?;
                self.divide(&n, *c as u32)
            }
            Index::Mod(x, c) => {
                let n = self.index(x, j)?;
                let d = *c as u32;
                let r = self.asm.reg(Class::B32);
                if d.is_power_of_two() {
                    self.asm.op(format!("and.b32 {r}, {n}, {}", d - 1));
                } else {
                    let (q, p) = (self.divide(&n, d), self.asm.reg(Class::B32));
                    self.asm.op(format!("mul.lo.u32 {p}, {q}, {d}"));
                    self.asm.op(format!("sub.u32 {r}, {n}, {p}"));
                }
                r
            }
            Index::Var(_) | Index::Value(_) | Index::Clamp(..) => return refuse("index outside the covered forms"),
        };
        Ok(r)
    }

    /// `n / d` for a constant `d >= 1` by a multiply-high and shifts ([`magic`]): ptxas writes a
    /// `div.u32` by an immediate as the general reciprocal-and-correct sequence (on the
    /// conversion and MUFU pipes), which NVVM would have replaced.
    fn divide(&mut self, n: &str, d: u32) -> String {
        let q = self.asm.reg(Class::B32);
        match magic(d) {
            Magic::Identity => self.asm.op(format!("mov.u32 {q}, {n}")),
            Magic::Shift(s) => self.asm.op(format!("shr.u32 {q}, {n}, {s}")),
            Magic::MulHi { m, shift } => {
                let (t, u, v, w) = (
                    self.asm.reg(Class::B32),
                    self.asm.reg(Class::B32),
                    self.asm.reg(Class::B32),
                    self.asm.reg(Class::B32),
                );
                self.asm.op(format!("mul.hi.u32 {t}, {n}, {m}"));
                self.asm.op(format!("sub.u32 {u}, {n}, {t}"));
                self.asm.op(format!("shr.u32 {v}, {u}, 1"));
                self.asm.op(format!("add.u32 {w}, {v}, {t}"));
                self.asm.op(format!("shr.u32 {q}, {w}, {shift}"));
            }
        }
        q
    }

    fn index_op(&mut self, op: &str, x: &Index, c: u32, j: usize) -> Result<String, Refusal> {
        let v = self.index(x, j)?;
        let r = self.asm.reg(Class::B32);
        self.asm.op(format!("{op} {r}, {v}, {c}"));
        Ok(r)
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
    fn divide(n: u32, d: u32) -> u32 {
        match magic(d) {
            Magic::Identity => n,
            Magic::Shift(s) => n >> s,
            Magic::MulHi { m, shift } => {
                let t = ((u64::from(n) * u64::from(m)) >> 32) as u32;
                (t + ((n - t) >> 1)) >> shift
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
            for n in ns {
                assert_eq!(divide(n, d), n / d, "{n} / {d}");
            }
        }
    }
}
