//! Dynamic outer extents: one [`Program`], compiled with an outer symbol (the batch) bound to
//! `bound`, serves every value `1..=bound` of that symbol without recompiling.
//!
//! # Contract
//!
//! [`derive()`] compares the program scheduled at `bound` with the one scheduled at a second value
//! `probe` (both `>= 2`, so no extent of 1 lets the scheduler drop an index) and returns an
//! [`Extents`] table when the two differ **only** at [`Site`]s:
//!
//! * element counts of buffers and kernel arguments,
//! * a pointwise kernel's lane count, a reduce kernel's row count, a matmul's batch or `m`, an
//!   attention's batch — the extents that only size the launch grid,
//! * the outermost dimension of an input or output,
//!
//! each an exact affine function `per * value + plus` of the symbol (`per >= 0`); the memory plan,
//! FLOP/byte counts and fusion decisions may differ (they are sized at `bound`, which covers every
//! smaller value). Anything else that differs — an index constant, a stride, a reduction length,
//! a loop bound, a constant buffer's data, the kernels themselves — is a refusal naming the kernel
//! and the field: the symbol reaches more than the launch grid there, and the program is only
//! valid at the value it was compiled for.
//!
//! [`Extents::at`] instantiates the program at a value `1..=bound`: every site is re-evaluated,
//! nothing else changes (the memory plan keeps its `bound`-sized slots), and the result is checked
//! by [`super::interp::validate`], so every index of every kernel is proved in range at that
//! value. The interpreter runs the instantiated program; device backends run their kernels as
//! compiled at `bound` with the grids of the instantiated one (see
//! [`crate::backend::Executable::set_extent`]).
//!
//! # Why this is sound
//!
//! * Index simplification uses the loop variables' ranges; a rewrite valid for a variable in
//!   `0..e(bound)` stays valid in any `0..e(v)` with `v <= bound`, which is why values above
//!   `bound` recompile instead.
//! * Two compilations agreeing everywhere but at the sites means no literal of any kernel depends
//!   on the symbol; a quantity that is not affine in it (`value^2`) appears in some index or
//!   stride too, and is refused there, or makes [`Extents::at`] fail validation.
//! * The compile driver also checks the instantiated outputs' shapes against the graph's at that
//!   value ([`crate::compile`]).

use super::{BufferDecl, BufferKind, IoDecl, Kernel, KernelBody, Program};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A place in a [`Program`] whose number scales with the symbol.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Site {
    /// [`super::BufferDecl::numel`] of buffer `0`.
    Buffer(u32),
    /// [`super::KernelArg::numel`] of argument `arg` of kernel `kernel`.
    Arg {
        /// Kernel position.
        kernel: u32,
        /// Argument position.
        arg: u32,
    },
    /// A pointwise kernel's lane count.
    Lanes(u32),
    /// A reduce kernel's row count.
    Rows(u32),
    /// A matmul kernel's batch count.
    MatmulBatch(u32),
    /// A matmul kernel's row count `m`.
    MatmulM(u32),
    /// An attention kernel's (outer) batch count.
    AttentionBatch(u32),
    /// Dimension 0 of input `0`.
    Input(u32),
    /// Dimension 0 of output `0`.
    Output(u32),
}

/// A site and its value as a function of the symbol: `per * value + plus`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Scaled {
    /// Where.
    pub site: Site,
    /// Coefficient of the symbol (non-negative).
    pub per: u64,
    /// Constant term (may be negative, e.g. `x[1:]` along the batch).
    pub plus: i64,
}

impl Scaled {
    /// The site's value at `v`, `None` when negative or overflowing.
    pub fn at(&self, v: usize) -> Option<usize> {
        let x = i128::from(self.per) * v as i128 + i128::from(self.plus);
        usize::try_from(x).ok()
    }
}

/// How a program compiled at [`Extents::bound`] serves smaller values of [`Extents::symbol`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Extents {
    /// The symbol (a graph input's outermost dimension, e.g. `batch`).
    pub symbol: String,
    /// The value the program was compiled at: the largest it serves.
    pub bound: usize,
    /// Every number that scales with the symbol.
    pub sites: Vec<Scaled>,
}

/// Why [`derive()`] found no table: the reason (naming the kernel and field), and whether a pair at
/// other values may still succeed (`retry`: the two schedules differ in structure, which a value
/// coinciding with a static extent can cause; a site that scales with the symbol but is not an
/// outer extent, or a constant that depends on it, stays so at every value).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Underived {
    /// Why, for logs and [`crate::compile::CompiledGraph::dynamic_refusal`].
    pub reason: String,
    /// Whether another pair of values may derive a table.
    pub retry: bool,
}

impl std::fmt::Display for Underived {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.reason)
    }
}

/// Compares `big` (scheduled with the symbol at `bound`) with `small` (at `probe`) and returns the
/// table of sites, or why the program cannot serve other values.
pub fn derive(big: &Program, small: &Program, symbol: &str, bound: usize, probe: usize) -> Result<Extents, Underived> {
    let structural = |reason: String| Underived { reason, retry: true };
    let settled = |reason: String| Underived { reason, retry: false };
    if probe < 2 || probe >= bound {
        return Err(settled(format!("probe value {probe} must lie in 2..{bound}")));
    }
    if big.buffers.len() != small.buffers.len() || big.kernels.len() != small.kernels.len() {
        return Err(structural(format!(
            "the schedule changes with {symbol}: {} kernels over {} buffers at {symbol}={bound}, {} over {} at \
             {symbol}={probe}",
            big.kernels.len(),
            big.buffers.len(),
            small.kernels.len(),
            small.buffers.len()
        )));
    }
    for (a, b) in big.buffers.iter().zip(&small.buffers) {
        if let (BufferKind::Constant(x), BufferKind::Constant(y)) = (&a.kind, &b.kind)
            && !crate::digest::same_contents(x, y)
        {
            let node = a.node.map_or(String::new(), |n| format!(" (node %{n})"));
            return Err(settled(format!("constant buffer b{}{node} depends on {symbol}", a.id.0)));
        }
    }
    // The program without its kernels first, then kernel by kernel, stopping at the first
    // refusal: serializing every kernel of ViT-B/16 twice took most of its 0.17 s refused attempt
    // on an H200 host, where its first kernel (the patch convolution) already decides.
    let site = |p: Vec<String>, x: i64, y: i64| -> Result<Scaled, Underived> {
        let Some(site) = classify(&p) else {
            return Err(settled(format!(
                "{} is {x} at {symbol}={bound} and {y} at {symbol}={probe}: {symbol} reaches more than the \
                 outer extent there",
                describe(big, &p)
            )));
        };
        let (dx, dv) = (i128::from(x) - i128::from(y), bound as i128 - probe as i128);
        if dx < 0 || dx % dv != 0 {
            return Err(structural(format!(
                "{} is {x} at {symbol}={bound} and {y} at {symbol}={probe}: not a multiple of {symbol} plus a \
                 constant",
                describe(big, &p)
            )));
        }
        let per = (dx / dv) as u64;
        let plus = i64::try_from(i128::from(x) - i128::from(per) * bound as i128)
            .map_err(|_| settled("overflow".to_string()))?;
        Ok(Scaled { site, per, plus })
    };
    let differs = |p: Vec<String>| {
        structural(format!("{}: differs between {symbol}={bound} and {symbol}={probe}", describe(big, &p)))
    };
    let mut sites = Vec::new();
    let (va, vb) = (skeleton(big).map_err(settled)?, skeleton(small).map_err(settled)?);
    let mut diffs = Vec::new();
    walk(&va, &vb, &mut Vec::new(), &mut diffs).map_err(differs)?;
    for (p, x, y) in diffs {
        sites.push(site(p, x, y)?);
    }
    for (i, (ka, kb)) in big.kernels.iter().zip(&small.kernels).enumerate() {
        let json = |k| serde_json::to_value(k).map_err(|e| settled(format!("serializing kernel {i}: {e}")));
        let (ja, jb) = (json(ka)?, json(kb)?);
        let mut diffs = Vec::new();
        walk(&ja, &jb, &mut vec!["kernels".to_string(), i.to_string()], &mut diffs).map_err(differs)?;
        for (p, x, y) in diffs {
            sites.push(site(p, x, y)?);
        }
    }
    Ok(Extents { symbol: symbol.to_string(), bound, sites })
}

impl Extents {
    /// `p` (compiled at [`Extents::bound`]) instantiated at `value`: every site re-evaluated, then
    /// validated ([`super::interp::validate`]). Errors say why the value cannot be served.
    pub fn at(&self, p: &Program, value: usize) -> Result<Program, String> {
        let sym = &self.symbol;
        if value == 0 || value > self.bound {
            return Err(format!("{sym}={value} is outside 1..={} (the value compiled for)", self.bound));
        }
        let mut q = p.clone();
        q.dynamic = None;
        for s in &self.sites {
            let v = s.at(value).ok_or_else(|| format!("{:?} would be negative at {sym}={value}", s.site))?;
            let missing = || format!("{:?} is not in the program", s.site);
            match s.site {
                Site::Buffer(b) => q.buffers.get_mut(b as usize).ok_or_else(missing)?.numel = v,
                Site::Arg { kernel: k, arg } => {
                    let k = q.kernels.get_mut(k as usize).ok_or_else(missing)?;
                    k.args.get_mut(arg as usize).ok_or_else(missing)?.numel = v;
                }
                Site::Input(i) => {
                    *q.inputs.get_mut(i as usize).and_then(|io| io.shape.first_mut()).ok_or_else(missing)? = v;
                }
                Site::Output(i) => {
                    *q.outputs.get_mut(i as usize).and_then(|io| io.shape.first_mut()).ok_or_else(missing)? = v;
                }
                Site::Lanes(k) | Site::Rows(k) | Site::MatmulBatch(k) | Site::MatmulM(k) | Site::AttentionBatch(k) => {
                    let body = &mut q.kernels.get_mut(k as usize).ok_or_else(missing)?.body;
                    match (body, s.site) {
                        (KernelBody::Pointwise { numel, .. }, Site::Lanes(_)) => *numel = v,
                        (KernelBody::Reduce(r), Site::Rows(_)) => r.rows = v,
                        (KernelBody::Matmul(m), Site::MatmulBatch(_)) => m.batch = v,
                        (KernelBody::Matmul(m), Site::MatmulM(_)) => m.m = v,
                        (KernelBody::Attention(a), Site::AttentionBatch(_)) => a.batch = v,
                        _ => return Err(format!("{:?} does not match kernel {k}'s body", s.site)),
                    }
                }
            }
        }
        super::interp::validate(&q).map_err(|e| format!("the program at {sym}={value} is invalid: {e}"))?;
        Ok(q)
    }

    /// One line for logs: `batch <= 8 (12 sites)`.
    pub fn summary(&self) -> String {
        format!("{} <= {} ({} scaled extents)", self.symbol, self.bound, self.sites.len())
    }
}

/// What the outermost loop of a kernel's linear block (workgroup) ids walks over.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum OuterUnit {
    /// Pointwise lanes.
    Lanes,
    /// Reduce rows.
    Rows,
    /// Matmul batches.
    MatmulBatch,
    /// Matmul rows `m` (a product of one batch).
    MatmulM,
    /// Attention flat batches (`batch * heads`).
    AttentionBatch,
}

/// How a rendered kernel's linear block ids (WGSL workgroups, CUDA blocks) cover its outermost
/// extent: block `w` works on the outer units from `(w / inner) * per` on, so
/// `ceil(units / per) * inner` blocks cover `units` of them. Renderers report it for templates
/// whose id decoding has this form; with it a program compiled at a bound launches fewer blocks
/// at a smaller value of its outer symbol ([`crate::backend::Executable::set_extent`]): blocks
/// past the last unit's are not launched, and the lanes of a last partial block compute values in
/// range of the compiled (bound-sized) buffers that nothing reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GridSplit {
    /// What the outer loop walks over.
    pub unit: OuterUnit,
    /// Units per group of `inner` blocks.
    pub per: u64,
    /// Blocks per group.
    pub inner: u64,
}

impl GridSplit {
    /// The blocks covering kernel `k`'s outer extent (the kernel as instantiated at another value
    /// of its outer symbol); `None` when the kernel's body is not of this split's kind.
    pub fn blocks(&self, k: &Kernel) -> Option<u64> {
        let units = match (self.unit, &k.body) {
            (OuterUnit::Lanes, KernelBody::Pointwise { numel, .. }) => *numel,
            (OuterUnit::Rows, KernelBody::Reduce(r)) => r.rows,
            (OuterUnit::MatmulBatch, KernelBody::Matmul(m)) => m.batch,
            (OuterUnit::MatmulM, KernelBody::Matmul(m)) => m.m,
            (OuterUnit::AttentionBatch, KernelBody::Attention(a)) => a.batch.checked_mul(a.heads)?,
            _ => return None,
        } as u64;
        units.div_ceil(self.per.max(1)).checked_mul(self.inner)
    }
}

/// The program's buffers (constant data left out: compared separately), inputs and outputs as
/// JSON; its kernels are compared one by one ([`derive()`]), its memory plan and decisions not at
/// all.
fn skeleton(p: &Program) -> Result<Value, String> {
    #[derive(Serialize)]
    struct Skeleton<'a> {
        buffers: Vec<BufferDecl>,
        inputs: &'a [IoDecl],
        outputs: &'a [IoDecl],
    }
    let mut buffers = p.buffers.clone();
    for b in &mut buffers {
        if matches!(b.kind, BufferKind::Constant(_)) {
            b.kind = BufferKind::Intermediate;
        }
    }
    serde_json::to_value(Skeleton { buffers, inputs: &p.inputs, outputs: &p.outputs })
        .map_err(|e| format!("serializing the program: {e}"))
}

/// Walks two JSON trees, recording every pair of differing integers with its path; any other
/// difference is an error carrying its path.
fn walk(
    a: &Value,
    b: &Value,
    path: &mut Vec<String>,
    out: &mut Vec<(Vec<String>, i64, i64)>,
) -> Result<(), Vec<String>> {
    if ignored(path) {
        return Ok(());
    }
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            if x.len() != y.len() || x.keys().zip(y.keys()).any(|(k, l)| k != l) {
                return Err(path.clone());
            }
            for ((k, v), w) in x.iter().zip(y.values()) {
                path.push(k.clone());
                walk(v, w, path, out)?;
                path.pop();
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            if x.len() != y.len() {
                return Err(path.clone());
            }
            for (i, (v, w)) in x.iter().zip(y).enumerate() {
                path.push(i.to_string());
                walk(v, w, path, out)?;
                path.pop();
            }
        }
        (Value::Number(x), Value::Number(y)) if x != y => match (x.as_i64(), y.as_i64()) {
            (Some(i), Some(j)) => out.push((path.clone(), i, j)),
            _ => return Err(path.clone()),
        },
        _ if a == b => {}
        _ => return Err(path.clone()),
    }
    Ok(())
}

/// The site a JSON path names, if it is one.
fn classify(p: &[String]) -> Option<Site> {
    let s: Vec<&str> = p.iter().map(String::as_str).collect();
    let n = |i: usize| s.get(i).and_then(|x| x.parse::<u32>().ok());
    Some(match s.as_slice() {
        ["buffers", _, "numel"] => Site::Buffer(n(1)?),
        ["kernels", _, "args", _, "numel"] => Site::Arg { kernel: n(1)?, arg: n(3)? },
        ["kernels", _, "body", "Pointwise", "numel"] => Site::Lanes(n(1)?),
        ["kernels", _, "body", "Reduce", "rows"] => Site::Rows(n(1)?),
        ["kernels", _, "body", "Matmul", "batch"] => Site::MatmulBatch(n(1)?),
        ["kernels", _, "body", "Matmul", "m"] => Site::MatmulM(n(1)?),
        ["kernels", _, "body", "Attention", "batch"] => Site::AttentionBatch(n(1)?),
        ["inputs", _, "shape", "0"] => Site::Input(n(1)?),
        ["outputs", _, "shape", "0"] => Site::Output(n(1)?),
        _ => return None,
    })
}

/// Differences that do not change what the kernels compute: a kernel's model counts. (The memory
/// plan, sized at the bound, which covers smaller values, and the fusion log are not in the
/// [`skeleton`].)
fn ignored(p: &[String]) -> bool {
    let s: Vec<&str> = p.iter().map(String::as_str).collect();
    matches!(s.as_slice(), ["kernels", _, "flops" | "bytes"])
}

/// `kernel k3_matmul: body.Matmul.k` for a path inside a kernel, else the path itself.
fn describe(p: &Program, path: &[String]) -> String {
    match path {
        [first, k, rest @ ..] if first == "kernels" => {
            let name = k.parse::<usize>().ok().and_then(|k| p.kernels.get(k)).map_or(k.as_str(), |k| k.name.as_str());
            format!("kernel {name}: {}", rest.join("."))
        }
        _ if path.is_empty() => "the program".to_string(),
        _ => path.join("."),
    }
}

#[cfg(test)]
#[path = "dynamic_tests.rs"]
mod tests;
