//! The expression emitter: turns the kernel's expression arena into `let vN = ...;` statements inside the
//! loop nests the kernel templates open, tracking which values are visible in which block and which are
//! 4-wide.
//!
//! Expressions are emitted lazily: a template asks for the closure of some roots (a reduction's value, the
//! stores of a phase) and the emitter writes every expression of that closure not yet visible, in arena
//! order (operands always precede their users). Values that do not depend on the loop variable of a loop
//! are hoisted by the templates, which emit them before opening the loop.

use std::collections::HashMap;

use sinter_core::DType;
use sinter_core::kernel::index::Range;
use sinter_core::kernel::{Access, Expr, ExprId, Index, IndexCmp, Kernel, Store, Var};

use super::RenderError;
use super::helpers::Helpers;
use super::index::{IndexEnv, LaneForm, lane_form, render_i32, render_u32};
use super::ops;
use super::storage::{ArgInfo, load_scalar, load_vec, store_scalar, store_vec};
use super::types::{Ct, const_lit, ct, splat};

/// The value of an [`Expr::Acc`] slot in the current context.
#[derive(Clone, Debug)]
pub(crate) struct AccVal {
    /// WGSL expression holding it.
    pub(crate) name: String,
    /// Its dtype (the reduction's accumulator dtype, or the matmul's).
    pub(crate) dtype: DType,
    /// Whether it is a 4-vector (matmul epilogue vectorized over N).
    pub(crate) vec: bool,
}

pub(crate) use sinter_core::kernel::analysis::{acc_uses, closure, depends_on, operands, store_roots};

/// The emitter state for one kernel body.
pub(crate) struct Emitter<'a> {
    /// The kernel.
    pub(crate) k: &'a Kernel,
    /// Argument declarations.
    pub(crate) args: Vec<ArgInfo>,
    /// Compute type of each expression.
    pub(crate) cts: Vec<Ct>,
    /// Helpers used.
    pub(crate) h: Helpers,
    /// The function body so far.
    pub(crate) out: String,
    indent: usize,
    /// Visible expressions per open block, with whether each is a 4-vector.
    scopes: Vec<HashMap<u32, bool>>,
    /// WGSL names of the loop variables in scope.
    pub(crate) names: HashMap<Var, String>,
    /// Their ranges (for the vectorized variable: of the base, a multiple of 4).
    pub(crate) ranges: HashMap<Var, Range>,
    /// The variable vectorized 4-wide in the current context.
    pub(crate) vec_var: Option<Var>,
    /// Per expression: differs across the 4 lanes of `vec_var`.
    pub(crate) varying: Vec<bool>,
    /// Acc slots available.
    pub(crate) acc: HashMap<usize, AccVal>,
    /// Loads cached in registers (persistent reductions): expr -> expression reading the cache.
    pub(crate) cached: HashMap<u32, String>,
    /// How each argument was accessed (for choosing declarations).
    pub(crate) uses: Vec<super::ArgUse>,
    /// WGSL extensions the body needs (`enable ...;`).
    pub(crate) enables: Vec<&'static str>,
    tmp: usize,
}

/// Lane-component names.
pub(crate) const COMP: [&str; 4] = ["x", "y", "z", "w"];

impl<'a> Emitter<'a> {
    /// A fresh emitter. `args` come from the argument plan.
    pub(crate) fn new(k: &'a Kernel, args: Vec<ArgInfo>) -> Result<Emitter<'a>, RenderError> {
        let mut cts = Vec::with_capacity(k.exprs.len());
        for te in &k.exprs {
            cts.push(ct(te.dtype).ok_or_else(|| unsupported_dtype(k, te.dtype))?);
        }
        Ok(Emitter {
            k,
            args,
            cts,
            h: Helpers::default(),
            out: String::new(),
            indent: 1,
            scopes: vec![HashMap::new()],
            names: HashMap::new(),
            ranges: HashMap::new(),
            vec_var: None,
            varying: vec![false; k.exprs.len()],
            acc: HashMap::new(),
            cached: HashMap::new(),
            uses: Vec::new(),
            enables: Vec::new(),
            tmp: 0,
        })
    }

    /// An error naming this kernel.
    pub(crate) fn err(&self, msg: impl Into<String>) -> RenderError {
        RenderError::Invalid { kernel: self.k.name.clone(), msg: msg.into() }
    }

    /// Appends a line at the current indentation.
    pub(crate) fn line(&mut self, s: impl AsRef<str>) {
        for _ in 0..self.indent {
            self.out.push_str("    ");
        }
        self.out.push_str(s.as_ref());
        self.out.push('\n');
    }

    /// Opens a block (`header {`) with a new scope.
    pub(crate) fn open(&mut self, header: impl AsRef<str>) {
        let h = header.as_ref();
        self.line(if h.is_empty() { "{".to_string() } else { format!("{h} {{") });
        self.indent += 1;
        self.scopes.push(HashMap::new());
    }

    /// Closes the innermost block.
    pub(crate) fn close(&mut self) {
        self.indent = self.indent.saturating_sub(1);
        self.scopes.pop();
        self.line("}");
    }

    /// A fresh temporary-name prefix. Names that would shadow a WGSL predeclared type
    /// (`i32`, `u32`, `f32`, `f16`) are skipped: a local `i32` makes every later `i32(..)` a call
    /// of the local.
    pub(crate) fn fresh(&mut self, base: &str) -> String {
        loop {
            self.tmp += 1;
            let name = format!("{base}{}", self.tmp);
            if !matches!(
                name.as_str(),
                "i32" | "u32" | "f32" | "f16" | "i64" | "u64" | "f64" | "i8" | "u8" | "i16" | "u16"
            ) {
                return name;
            }
        }
    }

    /// Sets the vectorized variable (or none) and recomputes which expressions vary across its lanes.
    /// `acc_vec` says whether Acc values are 4-vectors.
    pub(crate) fn set_vec(&mut self, var: Option<Var>, acc_vec: bool) {
        self.vec_var = var;
        let n = self.k.exprs.len();
        let mut varying = vec![false; n];
        if let Some(v) = var {
            for i in 0..n {
                let uni = |e: ExprId| !varying.get(e.0 as usize).copied().unwrap_or(true);
                let form = |idx: &Index| lane_form(idx, v, &uni);
                varying[i] = match &self.k.exprs[i].expr {
                    Expr::Load { index, .. } | Expr::IndexValue(index) => form(index) != LaneForm::Uniform,
                    Expr::IndexCmp(_, a, b) => form(a) != LaneForm::Uniform || form(b) != LaneForm::Uniform,
                    Expr::Const(_) => false,
                    Expr::Acc(_) => acc_vec,
                    e => operands(e).iter().any(|o| varying.get(o.0 as usize).copied().unwrap_or(false)),
                };
            }
        }
        self.varying = varying;
    }

    /// The visible value of `e`: WGSL name and whether it is a 4-vector.
    pub(crate) fn value(&self, e: ExprId) -> Result<(String, bool), RenderError> {
        for s in self.scopes.iter().rev() {
            if let Some(&v) = s.get(&e.0) {
                return Ok((format!("v{}", e.0), v));
            }
        }
        Err(self.err(format!("internal: v{} used before it was emitted", e.0)))
    }

    fn visible(&self, e: u32) -> bool {
        self.scopes.iter().any(|s| s.contains_key(&e))
    }

    /// `e` as an operand of the wanted shape (scalars splatted).
    fn operand(&self, e: ExprId, vec: bool) -> Result<String, RenderError> {
        let (n, v) = self.value(e)?;
        Ok(if vec && !v { splat(self.cts[e.0 as usize], true, &n) } else { n })
    }

    /// Emits every expression of the closure of `roots` that is not yet visible and passes `filter`.
    pub(crate) fn emit_closure(&mut self, roots: &[ExprId], filter: &dyn Fn(u32) -> bool) -> Result<(), RenderError> {
        let cached: Vec<u32> = self.cached.keys().copied().collect();
        let set = closure(self.k, roots, &|e| cached.contains(&e));
        for e in set {
            if !self.visible(e) && filter(e) {
                self.emit_one(ExprId(e))?;
            }
        }
        Ok(())
    }

    /// Binds `e`'s value; `vec` says whether it is a 4-vector.
    fn bind(&mut self, e: ExprId, vec: bool, value: String) {
        let ty = self.cts[e.0 as usize].ty(vec);
        self.line(format!("let v{}: {ty} = {value};", e.0));
        if let Some(s) = self.scopes.last_mut() {
            s.insert(e.0, vec);
        }
    }

    /// The environment for rendering an index; `j` selects one lane of the vectorized variable.
    fn render_index(&mut self, idx: &Index, j: Option<u32>, signed: bool) -> Result<String, RenderError> {
        let idx = match (j, self.vec_var) {
            (Some(j), Some(v)) if j > 0 => idx
                .substitute(v, &Index::var(v).add(Index::Const(i64::from(j))))
                .simplify(&|w| self.ranges.get(&w).copied()),
            _ => idx.clone(),
        };
        let mut values: HashMap<ExprId, (String, Ct)> = HashMap::new();
        let mut missing = None;
        idx.values(&mut |e| match self.value(e) {
            Ok((n, vec)) => {
                let n = if vec { format!("{n}.{}", COMP[j.unwrap_or(0) as usize]) } else { n };
                values.insert(e, (n, self.cts[e.0 as usize]));
            }
            Err(err) => missing = Some(err),
        });
        if let Some(err) = missing {
            return Err(err);
        }
        let lookup = |e: ExprId| values.get(&e).cloned().unwrap_or_else(|| ("0i".to_string(), Ct::I32));
        let env = IndexEnv { names: &self.names, ranges: &self.ranges, value: &lookup };
        let r = if signed { render_i32(&idx, &env, &mut self.h) } else { render_u32(&idx, &env, &mut self.h) };
        r.map_err(|m| RenderError::Invalid { kernel: self.k.name.clone(), msg: m })
    }

    /// Renders `idx` as a u32 element address bound to an identifier when not already one.
    fn address(&mut self, idx: &Index, j: Option<u32>) -> Result<String, RenderError> {
        let s = self.render_index(idx, j, false)?;
        if is_ident(&s) {
            return Ok(s);
        }
        let t = self.fresh("i");
        self.line(format!("let {t} = {s};"));
        Ok(t)
    }

    /// The lane form of an index in the current context.
    fn form(&self, idx: &Index) -> LaneForm {
        match self.vec_var {
            None => LaneForm::Uniform,
            Some(v) => {
                let uni = |e: ExprId| !self.varying.get(e.0 as usize).copied().unwrap_or(true);
                lane_form(idx, v, &uni)
            }
        }
    }

    fn arg(&self, arg: usize) -> Result<&ArgInfo, RenderError> {
        self.args.get(arg).ok_or_else(|| self.err(format!("argument {arg} out of range")))
    }

    /// Emits one expression (operands must be visible).
    fn emit_one(&mut self, e: ExprId) -> Result<(), RenderError> {
        let k = self.k;
        let te = &k.exprs[e.0 as usize];
        let dt = te.dtype;
        let vec = self.varying[e.0 as usize];
        if let Some(c) = self.cached.get(&e.0).cloned() {
            self.bind(e, vec, c);
            return Ok(());
        }
        let kname = k.name.clone();
        let ctx = |m: String| RenderError::Invalid { kernel: kname.clone(), msg: format!("v{}: {m}", e.0) };
        let value = match &te.expr {
            Expr::Load { arg, index } => {
                let a = self.arg(*arg)?.clone();
                if a.access != Access::Read {
                    return Err(self.err(format!("v{} loads from argument {arg}, which is written", e.0)));
                }
                if a.dtype != dt {
                    return Err(self.err(format!("v{} loads {dt} from a {} argument", e.0, a.dtype)));
                }
                let ct = self.cts[e.0 as usize];
                let form = self.form(index);
                if let Some(u) = self.uses.get_mut(*arg) {
                    if vec && form == LaneForm::Contig {
                        u.contig_loads += 1;
                    } else {
                        u.other_loads += 1;
                    }
                }
                match (vec, form) {
                    (false, _) => {
                        let i = self.address(index, None)?;
                        let t = self.fresh("l");
                        let (pre, v) = load_scalar(&a, &i, &t);
                        pre.iter().for_each(|p| self.line(p));
                        v
                    }
                    (true, LaneForm::Contig) => {
                        let b = self.address(index, None)?;
                        let t = self.fresh("l");
                        let (pre, v) = load_vec(&a, &b, &t, ct);
                        pre.iter().for_each(|p| self.line(p));
                        v
                    }
                    (true, _) => {
                        let mut parts = Vec::new();
                        for j in 0..4 {
                            let i = self.address(index, Some(j))?;
                            let t = self.fresh("l");
                            let (pre, v) = load_scalar(&a, &i, &t);
                            pre.iter().for_each(|p| self.line(p));
                            parts.push(v);
                        }
                        format!("{}({})", ct.ty(true), parts.join(", "))
                    }
                }
            }
            // A 64-bit constant outside the 32-bit emulation is a limit of this backend, not a
            // malformed kernel: report it as unsupported.
            Expr::Const(x) => const_lit(*x, dt)
                .map_err(|m| RenderError::Unsupported { kernel: kname.clone(), what: format!("v{}: {m}", e.0) })?,
            Expr::IndexValue(idx) => {
                let from = DType::I32;
                if vec {
                    let mut parts = Vec::new();
                    for j in 0..4 {
                        parts.push(self.render_index(idx, Some(j), true)?);
                    }
                    let v = format!("vec4<i32>({})", parts.join(", "));
                    ops::cast(&v, from, dt, true, &mut self.h).map_err(ctx)?
                } else {
                    let v = self.render_index(idx, None, true)?;
                    ops::cast(&v, from, dt, false, &mut self.h).map_err(ctx)?
                }
            }
            Expr::IndexCmp(c, a, b) => {
                let sym = match c {
                    IndexCmp::Lt => "<",
                    IndexCmp::Ge => ">=",
                    IndexCmp::Eq => "==",
                };
                let one = |this: &mut Self, j: Option<u32>| -> Result<String, RenderError> {
                    let x = this.render_index(a, j, true)?;
                    let y = this.render_index(b, j, true)?;
                    Ok(format!("({x}) {sym} ({y})"))
                };
                let v = if vec {
                    let mut parts = Vec::new();
                    for j in 0..4 {
                        parts.push(one(self, Some(j))?);
                    }
                    format!("vec4<bool>({})", parts.join(", "))
                } else {
                    one(self, None)?
                };
                ops::cast(&v, DType::Bool, dt, vec, &mut self.h).map_err(ctx)?
            }
            Expr::Unary(op, x) => {
                let xd = self.k.expr(*x).dtype;
                let xs = self.operand(*x, vec)?;
                ops::unary(*op, &xs, xd, dt, vec, &mut self.h).map_err(ctx)?
            }
            Expr::Binary(op, a, b) => {
                let ad = self.k.expr(*a).dtype;
                let bd = self.k.expr(*b).dtype;
                if ad != bd {
                    return Err(self.err(format!("v{}: {} of {ad} and {bd}", e.0, op.name())));
                }
                let (x, y) = (self.operand(*a, vec)?, self.operand(*b, vec)?);
                match (op, &self.k.expr(*b).expr) {
                    (op, Expr::Const(c)) if ad.is_float() && *c == 0.0 => {
                        match ops::by_float_zero(*op, &x, c.is_sign_negative(), vec) {
                            Some(s) => s,
                            None => ops::binary(*op, &x, &y, ad, dt, vec, &mut self.h).map_err(ctx)?,
                        }
                    }
                    _ => ops::binary(*op, &x, &y, ad, dt, vec, &mut self.h).map_err(ctx)?,
                }
            }
            Expr::Where(c, a, b) => {
                let (cd, ad, bd) = (self.k.expr(*c).dtype, self.k.expr(*a).dtype, self.k.expr(*b).dtype);
                let cs = self.operand(*c, vec)?;
                let cs = ops::cast(&cs, cd, DType::Bool, vec, &mut self.h).map_err(ctx)?;
                let xs = self.operand(*a, vec)?;
                let xs = ops::cast(&xs, ad, dt, vec, &mut self.h).map_err(ctx)?;
                let ys = self.operand(*b, vec)?;
                let ys = ops::cast(&ys, bd, dt, vec, &mut self.h).map_err(ctx)?;
                format!("select({ys}, {xs}, {cs})")
            }
            Expr::Cast(x) => {
                let xd = self.k.expr(*x).dtype;
                let xs = self.operand(*x, vec)?;
                ops::cast(&xs, xd, dt, vec, &mut self.h).map_err(ctx)?
            }
            Expr::Acc(slot) => {
                let Some(a) = self.acc.get(slot).cloned() else {
                    return Err(self.err(format!("v{} reads Acc({slot}), which is not available here", e.0)));
                };
                let s = if vec && !a.vec { splat(ct(a.dtype).unwrap_or(Ct::F32), true, &a.name) } else { a.name };
                ops::cast(&s, a.dtype, dt, vec, &mut self.h).map_err(ctx)?
            }
        };
        self.bind(e, vec, value);
        Ok(())
    }

    /// Emits a store (its value and index values must be visible). In a vectorized context, contiguous
    /// aligned stores are one 4-wide store, others one store per lane.
    pub(crate) fn emit_store(&mut self, st: &Store) -> Result<(), RenderError> {
        let a = self.arg(st.arg)?.clone();
        if a.access != Access::Write {
            return Err(self.err(format!("a store writes argument {}, which is read-only", st.arg)));
        }
        let vd = self.k.expr(st.value).dtype;
        let (vname, vvec) = self.value(st.value)?;
        let vec_ctx = self.vec_var.is_some();
        let form = self.form(&st.index);
        if let Some(u) = self.uses.get_mut(st.arg) {
            if vec_ctx && form == LaneForm::Contig {
                u.contig_stores += 1;
            } else {
                u.other_stores += 1;
            }
        }
        let t = self.fresh("s");
        if vec_ctx && form == LaneForm::Contig {
            let v = if vvec { vname } else { splat(self.cts[st.value.0 as usize], true, &vname) };
            let conv = ops::cast(&v, vd, a.dtype, true, &mut self.h).map_err(|m| self.err(m))?;
            let val = if is_ident(&conv) {
                conv
            } else {
                self.line(format!("let {t}v = {conv};"));
                format!("{t}v")
            };
            let b = self.address(&st.index, None)?;
            for l in store_vec(&a, &b, &val, &t, &mut self.h) {
                self.line(l);
            }
            return Ok(());
        }
        let lanes: Vec<Option<u32>> = if vec_ctx { (0..4).map(Some).collect() } else { vec![None] };
        for j in lanes {
            let comp = match j {
                Some(j) if vvec => format!("{vname}.{}", COMP[j as usize]),
                _ => vname.clone(),
            };
            let conv = ops::cast(&comp, vd, a.dtype, false, &mut self.h).map_err(|m| self.err(m))?;
            let tj = format!("{t}{}", j.map_or(String::new(), |j| format!("_{j}")));
            let val = if is_ident(&conv) {
                conv
            } else {
                self.line(format!("let {tj}v = {conv};"));
                format!("{tj}v")
            };
            let i = self.address(&st.index, j)?;
            for l in store_scalar(&a, &i, &val, &tj, &mut self.h) {
                self.line(l);
            }
        }
        Ok(())
    }
}

/// Whether `s` is a plain identifier or numeric literal (safe to repeat in an expression).
pub(crate) fn is_ident(s: &str) -> bool {
    !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
}

/// The error for an unsupported dtype.
pub(crate) fn unsupported_dtype(k: &Kernel, d: DType) -> RenderError {
    RenderError::Unsupported {
        kernel: k.name.clone(),
        what: format!(
            "dtype {d}: WGSL has no {d} (supported: f32, f16, bf16, i8, i16, i32, u8, u16, u32, bool, and i64/u64 \
             emulated in 32 bits)"
        ),
    }
}
