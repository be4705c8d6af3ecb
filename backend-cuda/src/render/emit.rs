//! The expression emitter: turns the kernel's expression arena into `const T vN = ...;`
//! statements inside the loop nests the templates open, tracking which values are visible in which
//! block, and the lane groups of vectorized loops ([`emit_group`]).
//!
//! Expressions are emitted lazily: a template asks for the closure of some roots (a reduction's
//! value, the stores of a phase) and the emitter writes every expression of that closure not yet
//! visible and accepted by a filter, in arena order (operands always precede their users). The
//! templates hoist values that do not depend on a loop's variable by emitting them before opening
//! the loop.
//!
//! A vectorized group handles `W` consecutive values `base + j` of a loop variable in one thread:
//! values uniform across the `W` lanes are emitted once (with the variable named `lane0` /
//! `red0`), loads contiguous and aligned in the lane are one vector load ([`H::Vec`]) before the
//! lane loop, the rest is scalar code inside `#pragma unroll for (j = 0; j < W; ++j)` (the variable
//! named `lane` / `red`), and contiguous stores are gathered into one vector store after it.

use std::collections::{HashMap, HashSet};

use sinter_core::DType;
use sinter_core::ir::UnaryOp;
use sinter_core::kernel::{Expr, ExprId, Index, IndexCmp, Kernel, Store, Var};

use super::analysis::{closure, relaxed_math, within_unit};
use super::index::{IndexEnv, LaneForm, Split, lane_form, render_address, render_signed};
use super::ops::{acc_conv, binary, cast, condition, load_conv, store_conv, unary};
use super::prelude::{H, Helpers};
use super::types::{const_lit, ct, storage};
use super::{RenderError, Tuning};

/// Marks a declaration line for [`prune_unused`].
const DECL: char = '\u{1}';

/// Whether `name` occurs in `line` as a whole identifier.
fn mentions(line: &str, name: &str) -> bool {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut from = 0;
    while let Some(i) = line[from..].find(name) {
        let (a, b) = (from + i, from + i + name.len());
        let before = line[..a].chars().next_back().is_some_and(ident);
        let after = line[b..].chars().next().is_some_and(ident);
        if !before && !after {
            return true;
        }
        from = b;
    }
    false
}

/// The name a [`Emitter::decl`] line declares.
fn declared(line: &str) -> Option<&str> {
    line.trim_start().strip_prefix(DECL)?.split_once(DECL).map(|(name, _)| name)
}

/// Drops the declarations made with [`Emitter::decl`] whose name nothing else in their scope (the
/// following lines up to the closing brace of the enclosing block) mentions, repeatedly (a dropped
/// declaration may have been the only user of another), and removes the markers. An inner block's
/// own declaration of the name shadows it to that block's end: what the block says of the name
/// is not a use of the outer one.
pub(crate) fn prune_unused(src: &str) -> String {
    let mut lines: Vec<String> = src.lines().map(str::to_string).collect();
    loop {
        let mut dropped = false;
        let mut i = 0;
        while i < lines.len() {
            if let Some(name) = declared(&lines[i]) {
                let name = name.to_string();
                let mut depth = 0i64;
                let mut used = false;
                // The depth of the block in which an inner declaration shadows the name.
                let mut shadowed: Option<i64> = None;
                for l in &lines[i + 1..] {
                    if shadowed.is_none() && declared(l) == Some(name.as_str()) {
                        shadowed = Some(depth);
                    }
                    if shadowed.is_none() && mentions(l, &name) {
                        used = true;
                        break;
                    }
                    depth += l.matches('{').count() as i64 - l.matches('}').count() as i64;
                    if depth < 0 {
                        break;
                    }
                    if shadowed.is_some_and(|d| depth < d) {
                        shadowed = None;
                    }
                }
                if !used {
                    lines.remove(i);
                    dropped = true;
                    continue;
                }
            }
            i += 1;
        }
        if !dropped {
            break;
        }
    }
    let mut out = String::with_capacity(src.len());
    for l in lines {
        let indent = &l[..l.len() - l.trim_start().len()];
        let body = l.trim_start();
        match body.strip_prefix(DECL).and_then(|r| r.split_once(DECL)) {
            Some((_, text)) => {
                out.push_str(indent);
                out.push_str(text);
            }
            None => out.push_str(&l),
        }
        out.push('\n');
    }
    out
}

/// The value of an [`Expr::Acc`] slot in the current context.
#[derive(Clone, Debug)]
pub(crate) struct AccVal {
    /// C++ expression holding it.
    pub(crate) name: String,
    /// Its dtype (the reduction's or the matmul's accumulator dtype).
    pub(crate) dtype: DType,
}

/// The emitter state for one kernel body.
pub(crate) struct Emitter<'a> {
    /// The kernel.
    pub(crate) k: &'a Kernel,
    /// Helpers used.
    pub(crate) h: Helpers,
    /// The function body so far.
    pub(crate) out: String,
    indent: usize,
    /// Visible expressions per open block.
    scopes: Vec<HashSet<u32>>,
    /// C++ names of the loop variables in scope.
    pub(crate) names: HashMap<Var, String>,
    /// A loop variable in scope walked as two nested loops.
    pub(crate) split: Option<Split>,
    /// 64-bit index arithmetic.
    pub(crate) wide: bool,
    /// Accumulator slots available.
    pub(crate) acc: HashMap<usize, AccVal>,
    /// Loads whose value comes from registers: expr -> C++ expression (a persistent reduction's
    /// row cache, or a lane of a vector load).
    pub(crate) cached: HashMap<u32, String>,
    /// The vectorized variable and width of the current group.
    lanes: Option<(Var, u32)>,
    /// Per expression: differs across the lanes of the current group.
    pub(crate) varying: Vec<bool>,
    /// Whether the accumulators differ across the lanes of a group (an attention epilogue's
    /// output columns, one accumulator register each); else they are the group's.
    pub(crate) acc_varies: bool,
    /// The kernel may use approximate `exp` and division ([`relaxed_math`]).
    pub(crate) relaxed: bool,
    /// Attention: the extents, strides and scale are the generic kernel's run-time parameters
    /// (`sx_*`, the `attention_generic` module), not literals of `k`'s shape.
    pub(crate) attn_generic: bool,
    /// Generic attention: every tile whole (keys and rows in whole tiles, no causal mask), so no
    /// mask and no row guard are written (the kernel's `_whole` variant).
    pub(crate) attn_whole: bool,
}

impl<'a> Emitter<'a> {
    /// A fresh emitter; `wide` selects 64-bit index arithmetic.
    pub(crate) fn new(k: &'a Kernel, wide: bool) -> Emitter<'a> {
        Emitter {
            k,
            h: Helpers::default(),
            out: String::new(),
            indent: 1,
            scopes: vec![HashSet::new()],
            names: HashMap::new(),
            split: None,
            wide,
            acc: HashMap::new(),
            cached: HashMap::new(),
            lanes: None,
            varying: vec![false; k.exprs.len()],
            acc_varies: false,
            relaxed: relaxed_math(k),
            attn_generic: false,
            attn_whole: false,
        }
    }

    /// An error naming this kernel.
    pub(crate) fn err(&self, what: impl Into<String>) -> RenderError {
        RenderError::Unsupported { kernel: self.k.name.clone(), what: what.into() }
    }

    /// `InvalidTuning` where `t` names a block size other than the `threads` a fixed-shape tile
    /// runs (`tile` names it in the message); the tile's shape, not the tuning, sets its threads.
    pub(crate) fn check_block(&self, t: &Tuning, threads: u32, tile: &impl std::fmt::Debug) -> Result<(), RenderError> {
        match t.block {
            Some(b) if b != threads => Err(RenderError::InvalidTuning {
                kernel: self.k.name.clone(),
                msg: format!("block {b}: the tile {tile:?} runs {threads} threads"),
            }),
            _ => Ok(()),
        }
    }

    /// The unsigned index type (`unsigned` or `unsigned long long`).
    pub(crate) fn ity(&self) -> &'static str {
        if self.wide { "unsigned long long" } else { "unsigned" }
    }

    /// An index literal.
    pub(crate) fn ilit(&self, c: u64) -> String {
        if self.wide { format!("{c}ull") } else { format!("{c}u") }
    }

    /// Appends a line at the current indentation.
    pub(crate) fn line(&mut self, s: impl AsRef<str>) {
        for _ in 0..self.indent {
            self.out.push_str("    ");
        }
        self.out.push_str(s.as_ref());
        self.out.push('\n');
    }

    /// Appends the declaration `text` of local `name`, dropped by [`prune_unused`] when nothing in
    /// its scope uses the name.
    pub(crate) fn decl(&mut self, name: &str, text: impl AsRef<str>) {
        self.line(format!("{DECL}{name}{DECL}{}", text.as_ref()));
    }

    /// Opens a block (`header {`, or a bare `{`) with a new scope.
    pub(crate) fn open(&mut self, header: impl AsRef<str>) {
        let h = header.as_ref();
        self.line(if h.is_empty() { "{".to_string() } else { format!("{h} {{") });
        self.indent += 1;
        self.scopes.push(HashSet::new());
    }

    /// Closes the innermost block.
    pub(crate) fn close(&mut self) {
        self.indent = self.indent.saturating_sub(1);
        self.scopes.pop();
        self.line("}");
    }

    /// Vectorizes `var` `width`-wide (or stops vectorizing with `None`) and recomputes which
    /// expressions vary across the lanes. With width 1 every expression that depends on `var`
    /// varies.
    pub(crate) fn set_lanes(&mut self, lanes: Option<(Var, u32)>) {
        self.lanes = lanes;
        let n = self.k.exprs.len();
        let mut varying = vec![false; n];
        if let Some((v, w)) = lanes {
            for i in 0..n {
                let uni = |e: ExprId| !varying.get(e.0 as usize).copied().unwrap_or(true);
                let form = |idx: &Index| lane_form(idx, v, w, &uni);
                varying[i] = match &self.k.exprs[i].expr {
                    Expr::Load { index, .. } | Expr::IndexValue(index) => form(index) != LaneForm::Uniform,
                    Expr::IndexCmp(_, a, b) => form(a) != LaneForm::Uniform || form(b) != LaneForm::Uniform,
                    Expr::Const(_) => false,
                    Expr::Acc(_) => self.acc_varies,
                    e => {
                        super::analysis::operands(e).iter().any(|o| varying.get(o.0 as usize).copied().unwrap_or(false))
                    }
                };
            }
        }
        self.varying = varying;
    }

    /// The lane form of `idx` in the current group (uniform outside vectorized groups).
    pub(crate) fn form(&self, idx: &Index) -> LaneForm {
        match self.lanes {
            Some((v, w)) if w > 1 => {
                let uni = |e: ExprId| !self.varying.get(e.0 as usize).copied().unwrap_or(true);
                lane_form(idx, v, w, &uni)
            }
            _ => LaneForm::Uniform,
        }
    }

    /// The name of `e` if visible.
    pub(crate) fn value(&self, e: ExprId) -> Result<String, RenderError> {
        if self.visible(e.0) {
            Ok(format!("v{}", e.0))
        } else {
            Err(self.err(format!("internal: v{} used before it was emitted", e.0)))
        }
    }

    fn visible(&self, e: u32) -> bool {
        self.scopes.iter().any(|s| s.contains(&e))
    }

    /// Emits every expression of the closure of `roots` that is not yet visible and passes
    /// `filter` (cached loads are leaves).
    pub(crate) fn emit_closure(&mut self, roots: &[ExprId], filter: &dyn Fn(u32) -> bool) -> Result<(), RenderError> {
        let cached: HashSet<u32> = self.cached.keys().copied().collect();
        let set = closure(self.k, roots, &|e| cached.contains(&e));
        for e in set {
            if !self.visible(e) && filter(e) {
                self.emit_one(ExprId(e))?;
            }
        }
        Ok(())
    }

    fn bind(&mut self, e: ExprId, value: String) {
        let ty = ct(self.k.exprs[e.0 as usize].dtype).name();
        self.line(format!("const {ty} v{} = {value};", e.0));
        if let Some(s) = self.scopes.last_mut() {
            s.insert(e.0);
        }
    }

    fn env_value(&self, e: ExprId) -> Option<(String, DType)> {
        self.visible(e.0).then(|| (format!("v{}", e.0), self.k.exprs[e.0 as usize].dtype))
    }

    /// Renders `idx` as an address with the loop variables' current names.
    pub(crate) fn address(&mut self, idx: &Index) -> Result<String, RenderError> {
        let mut h = std::mem::take(&mut self.h);
        let r = {
            let value = |e: ExprId| self.env_value(e);
            let env = IndexEnv { names: &self.names, split: self.split.as_ref(), wide: self.wide, value: &value };
            render_address(idx, &env, &mut h)
        };
        self.h = h;
        r.map_err(|m| self.err(m))
    }

    fn signed(&mut self, idx: &Index) -> Result<String, RenderError> {
        let mut h = std::mem::take(&mut self.h);
        let r = {
            let value = |e: ExprId| self.env_value(e);
            let env = IndexEnv { names: &self.names, split: self.split.as_ref(), wide: self.wide, value: &value };
            render_signed(idx, &env, &mut h)
        };
        self.h = h;
        r.map_err(|m| self.err(m))
    }

    /// Emits one expression (its operands must be visible).
    fn emit_one(&mut self, e: ExprId) -> Result<(), RenderError> {
        let k = self.k;
        let te = &k.exprs[e.0 as usize];
        let dt = te.dtype;
        if let Some(c) = self.cached.get(&e.0).cloned() {
            self.bind(e, c);
            return Ok(());
        }
        let ctx = |m: String| RenderError::Unsupported { kernel: k.name.clone(), what: format!("v{}: {m}", e.0) };
        let value = match &te.expr {
            Expr::Load { arg, index } => {
                let i = self.address(index)?;
                load_conv(&format!("a{arg}[{i}]"), dt)
            }
            Expr::Const(x) => const_lit(*x, dt),
            Expr::IndexValue(idx) => {
                let v = self.signed(idx)?;
                cast(&v, DType::I64, dt, &mut self.h)
            }
            Expr::IndexCmp(c, a, b) => {
                let sym = match c {
                    IndexCmp::Lt => "<",
                    IndexCmp::Ge => ">=",
                    IndexCmp::Eq => "==",
                };
                let (x, y) = (self.signed(a)?, self.signed(b)?);
                cast(&format!("{x} {sym} {y}"), DType::Bool, dt, &mut self.h)
            }
            Expr::Unary(op, x) => {
                let xd = k.expr(*x).dtype;
                let xs = self.value(*x)?;
                // A sin or cos of a value bounded in [-1, 1] needs no argument reduction.
                let unit = matches!(op, UnaryOp::Sin | UnaryOp::Cos) && within_unit(k, *x);
                unary(*op, &xs, (xd, dt), (self.relaxed, unit), &mut self.h).map_err(ctx)?
            }
            Expr::Binary(op, a, b) => {
                let (ad, bd) = (k.expr(*a).dtype, k.expr(*b).dtype);
                if ad != bd {
                    return Err(ctx(format!("{} of {ad} and {bd}", op.name())));
                }
                let (x, y) = (self.value(*a)?, self.value(*b)?);
                binary(*op, &x, &y, ad, dt, self.relaxed, &mut self.h).map_err(ctx)?
            }
            Expr::Where(c, a, b) => {
                let (cd, ad, bd) = (k.expr(*c).dtype, k.expr(*a).dtype, k.expr(*b).dtype);
                let cs = condition(&self.value(*c)?, cd);
                // The operands have the expression's dtype (a select, no rounding); others convert.
                let (xv, yv) = (self.value(*a)?, self.value(*b)?);
                let h = &mut self.h;
                let mut operand = |v: String, d: DType| if d == dt { v } else { cast(&v, d, dt, h) };
                let xs = operand(xv, ad);
                let ys = operand(yv, bd);
                format!("{} ? {} : {}", super::ops::p(&cs), super::ops::p(&xs), super::ops::p(&ys))
            }
            Expr::Cast(x) => {
                let xd = k.expr(*x).dtype;
                let xs = self.value(*x)?;
                cast(&xs, xd, dt, &mut self.h)
            }
            Expr::Acc(slot) => {
                let Some(a) = self.acc.get(slot).cloned() else {
                    return Err(ctx(format!("reads Acc({slot}), which is not available here")));
                };
                acc_conv(&a.name, a.dtype, dt, &mut self.h)
            }
        };
        self.bind(e, value);
        Ok(())
    }

    /// Emits a scalar store (its value and index values must be visible).
    pub(crate) fn emit_store(&mut self, st: &Store) -> Result<(), RenderError> {
        let ad = self.k.args[st.arg].dtype;
        let vd = self.k.expr(st.value).dtype;
        let v = self.value(st.value)?;
        let conv = store_conv(&v, vd, ad, &mut self.h);
        let i = self.address(&st.index)?;
        self.line(format!("a{}[{i}] = {conv};", st.arg));
        Ok(())
    }
}

/// A tensor-core epilogue's two adjacent output columns `base`, `base + 1` (`base` even, declared
/// by the caller with M's name) as one group of two lanes of N, the lane `j`: `Acc(0)` = `acc`
/// (f32, naming the lane), the stores done in each lane, contiguous stores and loads gathered into
/// one vector access of both (`emit_group`). With `packed` (a 32-bit register), the one store is
/// not made: its two 16-bit values go into that register (a wider store of several pairs follows,
/// `quad_store`, whose `eligible` the caller asked).
pub(crate) fn emit_pair(
    em: &mut Emitter<'_>,
    roots: &[ExprId],
    stores: &[Store],
    base: &str,
    acc: String,
    packed: Option<&str>,
) -> Result<(), RenderError> {
    em.acc.insert(0, AccVal { name: acc, dtype: DType::F32 });
    em.acc_varies = true;
    em.set_lanes(Some((Var::N, 2)));
    let res = match packed {
        None => emit_group(em, &Group { var: Var::N, width: 2, base, lane: "n", roots, stores }, &mut |_| Ok(())),
        Some(dst) => pack_pair(em, roots, stores, base, dst),
    };
    em.set_lanes(None);
    em.acc_varies = false;
    em.acc.remove(&0);
    res
}

/// [`emit_pair`]'s packed form: the one store's two values converted into a vector of two, whose
/// 32 bits go to `dst`.
fn pack_pair(
    em: &mut Emitter<'_>,
    roots: &[ExprId],
    stores: &[Store],
    base: &str,
    dst: &str,
) -> Result<(), RenderError> {
    let k = em.k;
    let s = match stores {
        [s] if k.args[s.arg].dtype.size_bytes() == 2 => s,
        _ => return Err(em.err("internal: a packed pair is one store of a 16-bit output")),
    };
    let (ad, vd) = (k.args[s.arg].dtype, k.expr(s.value).dtype);
    em.h.need(H::Vec);
    em.line(format!("sinter_vec<{}, 2> o0;", storage(ad)));
    let g = Group { var: Var::N, width: 2, base, lane: "n", roots, stores: &[] };
    emit_group(em, &g, &mut |em| {
        let conv = store_conv(&em.value(s.value)?, vd, ad, &mut em.h);
        em.line(format!("o0.v[j] = {conv};"));
        Ok(())
    })?;
    em.line(format!("{dst} = *reinterpret_cast<const unsigned*>(&o0);"));
    Ok(())
}

/// A group of `width` consecutive values of a loop variable handled by one thread.
pub(crate) struct Group<'s> {
    /// The variable.
    pub(crate) var: Var,
    /// Lanes per group (1: scalar code, no lane loop).
    pub(crate) width: u32,
    /// Name of the group's first value (defined by the caller; unused for width 1).
    pub(crate) base: &'s str,
    /// Name of the variable inside the lane loop (defined by the caller for width 1).
    pub(crate) lane: &'s str,
    /// Expressions to make visible in every lane.
    pub(crate) roots: &'s [ExprId],
    /// Stores done in every lane.
    pub(crate) stores: &'s [Store],
}

/// Emits one group: uniform values, vector loads, the lane loop with `per_lane` (called once, inside
/// it, after the roots are visible) and the stores, then the vector stores. The caller has called
/// [`Emitter::set_lanes`] for the group's variable and width.
pub(crate) fn emit_group(
    em: &mut Emitter<'_>,
    g: &Group<'_>,
    per_lane: &mut dyn FnMut(&mut Emitter<'_>) -> Result<(), RenderError>,
) -> Result<(), RenderError> {
    let k = em.k;
    if g.width <= 1 {
        em.names.insert(g.var, g.lane.to_string());
        em.emit_closure(g.roots, &|_| true)?;
        per_lane(em)?;
        for s in g.stores {
            em.emit_store(s)?;
        }
        return Ok(());
    }
    let w = g.width;
    em.names.insert(g.var, g.base.to_string());
    let varying = em.varying.clone();
    em.emit_closure(g.roots, &|e| !varying[e as usize])?;
    // Vector loads of the contiguous, aligned loads.
    let cached: HashSet<u32> = em.cached.keys().copied().collect();
    let mut preloaded = Vec::new();
    for e in closure(k, g.roots, &|e| cached.contains(&e)) {
        let Expr::Load { arg, index } = &k.exprs[e as usize].expr else { continue };
        if !varying[e as usize] || em.cached.contains_key(&e) || em.visible(e) || em.form(index) != LaneForm::Contig {
            continue;
        }
        let d = k.args[*arg].dtype;
        let vt = format!("sinter_vec<{}, {w}>", storage(d));
        em.h.need(H::Vec);
        let i = em.address(index)?;
        em.line(format!("const {vt} x{e} = *reinterpret_cast<const {vt}*>(a{arg} + {i});"));
        em.cached.insert(e, load_conv(&format!("x{e}.v[j]"), d));
        preloaded.push(e);
    }
    // Contiguous stores are gathered into vectors.
    let mut vec_stores = Vec::new();
    for (n, s) in g.stores.iter().enumerate() {
        if em.form(&s.index) == LaneForm::Contig {
            let d = k.args[s.arg].dtype;
            em.h.need(H::Vec);
            em.line(format!("sinter_vec<{}, {w}> o{n};", storage(d)));
            vec_stores.push(n);
        }
    }
    em.line("#pragma unroll");
    em.open(format!("for (unsigned j = 0; j < {w}u; ++j)"));
    em.decl(g.lane, format!("const {} {} = {} + j;", em.ity(), g.lane, g.base));
    em.names.insert(g.var, g.lane.to_string());
    em.emit_closure(g.roots, &|_| true)?;
    per_lane(em)?;
    for (n, s) in g.stores.iter().enumerate() {
        if vec_stores.contains(&n) {
            let (ad, vd) = (k.args[s.arg].dtype, k.expr(s.value).dtype);
            let v = em.value(s.value)?;
            let conv = store_conv(&v, vd, ad, &mut em.h);
            em.line(format!("o{n}.v[j] = {conv};"));
        } else {
            em.emit_store(s)?;
        }
    }
    em.close();
    em.names.insert(g.var, g.base.to_string());
    for n in vec_stores {
        let s = &g.stores[n];
        let vt = format!("sinter_vec<{}, {w}>", storage(k.args[s.arg].dtype));
        let i = em.address(&s.index)?;
        em.line(format!("*reinterpret_cast<{vt}*>(a{} + {i}) = o{n};", s.arg));
    }
    for e in preloaded {
        em.cached.remove(&e);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{DECL, prune_unused};

    fn decl(name: &str, text: &str) -> String {
        format!("{DECL}{name}{DECL}{text}")
    }

    #[test]
    fn an_inner_declaration_shadows_the_outer_one() {
        let outer = decl("m0", "const unsigned m0 = 1u;");
        let inner = decl("m0", "const unsigned m0 = m0 + 2u;");
        // Only the inner block mentions m0, and declares its own: the outer one goes.
        let src = [outer.as_str(), "if (x) {", inner.as_str(), "use(m0);", "}"].join("\n");
        let out = prune_unused(&src);
        assert!(!out.contains("m0 = 1u") && out.contains("m0 = m0 + 2u"), "{out}");
        // A use after the inner block closed is the outer one's.
        let src = [outer.as_str(), "if (x) {", inner.as_str(), "use(m0);", "}", "use(m0);"].join("\n");
        assert!(prune_unused(&src).contains("m0 = 1u"));
        // A use before the inner block is the outer one's.
        let src = [outer.as_str(), "use(m0);", "if (x) {", inner.as_str(), "}"].join("\n");
        let out = prune_unused(&src);
        assert!(out.contains("m0 = 1u") && !out.contains("m0 + 2u"), "{out}");
        // Unused everywhere: both go.
        let src = [outer.as_str(), "{", inner.as_str(), "}"].join("\n");
        assert!(!prune_unused(&src).contains("m0"));
    }
}
