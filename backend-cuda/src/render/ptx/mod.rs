//! PTX written directly, for kernels whose every operation this module covers.
//!
//! Why: a cold compile through NVRTC is its C++ front end, NVVM's optimizer and ptxas, and the
//! first two cost about as much as the third. Measured on an H200 host (session 37, call 1,
//! `scripts/session37/jit_floor.py`, fresh processes, every cache off): `cos_16M_f32`'s source
//! 81-88 ms to a cubin through NVRTC, 48-52 of them to PTX; the driver's JIT of that PTX 29-37 ms.
//! `softmax_8192x8192_f32` 103-150 against 44-73, `layernorm_gelu_8192x4096_f32` 99-132 against
//! 44-75. A kernel written here in PTX skips the front end and NVVM: the driver's JIT
//! (`cuModuleLoadData` on the PTX text, the same ptxas) is its only compile.
//!
//! Contract:
//! * `render` either returns a complete PTX module ([`Rendered::source`] starting with
//!   [`PTX_MARK`], see [`is_ptx`]) whose launch (grid, block, parameters: one global pointer per
//!   [`Kernel::args`] entry, in order) is exactly the CUDA C++ renderer's for the same kernel and
//!   tuning, or a [`Refusal`] naming what it does not cover; the caller then renders CUDA C++.
//!   Nothing here changes what a kernel computes: the same lane mapping, the same operations
//!   with the semantics of [`sinter_core::scalar`] (IEEE `div.rn`/`sqrt.rn`/`rcp.rn`, NaN-propagating
//!   `max.NaN`/`min.NaN`, `relu(NaN) = NaN`, `relu(-0) = +0`), `sin`/`cos` by the same fast
//!   path as the C++ helpers (`render::trig`) and an own Payne–Hanek slow path
//!   (`trig_slow`; libdevice is not available to PTX written directly), `exp` and `erf` by own
//!   functions on the hardware's `ex2.approx` within 2 ulp as libdevice's `expf` and `erff`
//!   (`math`; the CUDA C++ renderer calls those).
//! * Products and sums are written without a rounding modifier, so ptxas may contract them into
//!   fused multiply-adds exactly where NVRTC's default `--fmad=true` lets NVVM do so; the
//!   `sin`/`cos` helpers use `.rn` throughout, so they compute what their host emulation does,
//!   and so do the decode template's own operations (`decode`: NVVM's contractions of its C++
//!   written out as `fma.rn`).
//! * Covered (everything else is a named refusal): on devices of sm_80 and up, with 32-bit index
//!   arithmetic, pointwise bodies (one lane group per thread), block-per-row persistent
//!   reductions (f32 sums, maxima, minima), the CUDA-core product's one-step `cp.async` form
//!   for f32 operands into f32 (`matmul`: a tile taking the whole reduction in one step, as
//!   `matmul_softmax_100_f32`'s, its epilogue through `expr`) and the attention decode
//!   template's common case (`decode`: a block per flat batch, no split, no packed GQA heads,
//!   f32/f16/bf16 rows, its score and epilogue through `expr`, as
//!   `attention_decode_b32h32kv4096d128_bf16`'s); f32, f16 and bf16 arguments and
//!   expressions (16-bit values computed in f32, rounded by casts and stores with `cvt.rn`, as
//!   the C++ renderer); loads at affine or div/mod indices; the ops `expr` lists.
//! * Deliberately absent: tensor-core products; attention's tensor-core, tiled CUDA-core and
//!   row templates, the split decode (its scratch combine) and the decode template with packed
//!   GQA heads (all NVRTC's); CUDA-core products of several steps along k (register-staged), of
//!   other dtypes or with an implicit im2col operand, other reduction modes, integer, f64 and
//!   fp8 dtypes, gathers (`Index::Value`, `Index::Clamp`), and transcendental functions other
//!   than `sin`, `cos`, `exp` and `erf`.
//! * The load, not this module, keeps library steps' kernels and programs of many PTX kernels on
//!   NVRTC (`CudaBackend::cpp_caps`, `MAX_PTX_BODIES`: the driver's JIT runs one module at a
//!   time).

mod decode;
mod expr;
mod math;
mod matmul;
mod pointwise;
mod reduce;
mod trig;
pub(crate) mod trig_slow;

use sinter_core::kernel::{Kernel, KernelBody};

use super::{CudaCaps, Rendered, Tuning};

/// The first line of every PTX module this renderer writes (what [`is_ptx`] looks for).
pub const PTX_MARK: &str = "// sinter PTX";

/// Whether `source` is a PTX module of this renderer (else CUDA C++ for NVRTC).
pub fn is_ptx(source: &str) -> bool {
    source.starts_with(PTX_MARK)
}

/// Several PTX modules of this renderer as one (their entries, each module's shared arrays, the
/// `sin`/`cos` slow path once): the driver's JIT then pays its fixed cost per module once, as
/// NVRTC's light sources share a translation unit (`nvrtc::compile_parallel`). The entries' names
/// must be distinct (the caller groups only such sources).
pub fn combine(sources: &[&str]) -> String {
    let slow = trig_slow::module_text();
    let header = |l: &str| l.starts_with(".version") || l.starts_with(".target") || l.starts_with(".address_size");
    let mut out = format!("{PTX_MARK}\n// {} modules in one\n", sources.len());
    if let Some(first) = sources.first() {
        for l in first.lines().filter(|l| header(l)) {
            out.push_str(l);
            out.push('\n');
        }
    }
    let mut bodies = String::new();
    let mut need_slow = false;
    for src in sources {
        let src = if src.contains(&slow) {
            need_slow = true;
            src.replacen(&slow, "", 1)
        } else {
            src.to_string()
        };
        for l in src.lines().filter(|l| !header(l)) {
            bodies.push_str(l);
            bodies.push('\n');
        }
    }
    if need_slow {
        out.push('\n');
        out.push_str(&slow);
    }
    out.push_str(&bodies);
    out
}

/// Why a kernel is rendered as CUDA C++ rather than PTX.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal(pub String);

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A refusal naming what is not covered.
pub(crate) fn refuse<T>(what: impl Into<String>) -> Result<T, Refusal> {
    Err(Refusal(what.into()))
}

/// Why `k` is not written in PTX (empty when it is), for tests and logs.
pub fn why_not(k: &Kernel, caps: &CudaCaps, t: &Tuning) -> String {
    render(k, caps, t).err().map(|r| r.0).unwrap_or_default()
}

/// Renders `k` with `t` as PTX for the device of `caps`, or says why not (see the module doc).
pub(crate) fn render(k: &Kernel, caps: &CudaCaps, t: &Tuning) -> Result<Rendered, Refusal> {
    if !caps.ptx {
        return refuse("PTX is off for this device (CudaCaps::ptx)");
    }
    if caps.sm < (8, 0) {
        return refuse(format!("sm_{}{} is below sm_80 (max.NaN, min.NaN)", caps.sm.0, caps.sm.1));
    }
    if isa_version(caps.sm).is_none() {
        return refuse(format!("no PTX ISA version known for sm_{}{}", caps.sm.0, caps.sm.1));
    }
    match &k.body {
        KernelBody::Pointwise { numel, stores } => pointwise::render(k, *numel, stores, caps, t),
        KernelBody::Reduce(r) => reduce::render(k, r, caps, t),
        KernelBody::Matmul(mm) => matmul::render(k, mm, caps, t),
        KernelBody::Attention(a) => decode::render(k, a, caps, t),
    }
}

/// The first PTX ISA version that can target `sm` (PTX ISA's release notes): what the module
/// declares, so a driver as old as that architecture's first assembles it.
fn isa_version(sm: (u32, u32)) -> Option<&'static str> {
    Some(match sm {
        (8, 0) => "7.0",
        (8, 6) => "7.1",
        (8, 7) => "7.4",
        (8, 9) | (9, 0) => "7.8",
        (10, 0) | (10, 1) => "8.6",
        (12, 0) => "8.7",
        (10, 3) | (12, 1) => "8.8",
        _ => return None,
    })
}

/// Register classes of the PTX this module writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Class {
    /// `.pred`, `%p`.
    Pred,
    /// `.b32`, `%r` (indices, bits).
    B32,
    /// `.b64`, `%rd` (addresses).
    B64,
    /// `.f32`, `%f`.
    F32,
    /// `.b16`, `%h` (16-bit storage elements).
    B16,
}

impl Class {
    const ALL: [Class; 5] = [Class::Pred, Class::B32, Class::B64, Class::F32, Class::B16];

    fn prefix(self) -> &'static str {
        match self {
            Class::Pred => "%p",
            Class::B32 => "%r",
            Class::B64 => "%rd",
            Class::F32 => "%f",
            Class::B16 => "%h",
        }
    }

    fn decl(self) -> &'static str {
        match self {
            Class::Pred => ".pred",
            Class::B32 => ".b32",
            Class::B64 => ".b64",
            Class::F32 => ".f32",
            Class::B16 => ".b16",
        }
    }
}

/// The body of one PTX entry being written: virtual registers by class (ptxas allocates the
/// real ones), instructions and labels.
pub(crate) struct Asm {
    lines: Vec<String>,
    counts: [u32; 5],
    labels: u32,
    /// Whether the body calls [`trig_slow::FUNC`].
    pub(crate) trig_slow: bool,
    /// Module-scope declarations the body uses (shared arrays).
    pub(crate) decls: Vec<String>,
    /// The entry's `.maxnreg` (registers per thread at most), where the body sets one.
    pub(crate) maxnreg: Option<u32>,
}

impl Asm {
    pub(crate) fn new() -> Asm {
        Asm { lines: Vec::new(), counts: [0; 5], labels: 0, trig_slow: false, decls: Vec::new(), maxnreg: None }
    }

    /// A fresh virtual register.
    pub(crate) fn reg(&mut self, c: Class) -> String {
        let i = Class::ALL.iter().position(|&x| x == c).unwrap_or(0);
        self.counts[i] += 1;
        format!("{}{}", c.prefix(), self.counts[i])
    }

    /// One instruction (without its `;`).
    pub(crate) fn op(&mut self, text: impl AsRef<str>) {
        self.lines.push(format!("\t{};", text.as_ref()));
    }

    /// A comment line.
    pub(crate) fn comment(&mut self, text: impl AsRef<str>) {
        self.lines.push(format!("\t// {}", text.as_ref()));
    }

    /// A fresh label name.
    pub(crate) fn label(&mut self) -> String {
        self.labels += 1;
        format!("$L{}", self.labels)
    }

    /// Places `label` here.
    pub(crate) fn place(&mut self, label: &str) {
        self.lines.push(format!("{label}:"));
    }

    /// Raw lines (a `{ }` scope of a call).
    pub(crate) fn raw(&mut self, text: impl AsRef<str>) {
        self.lines.push(text.as_ref().to_string());
    }

    /// Loads each argument's global address (one `.u64` parameter `a{i}` per argument of `k`).
    pub(crate) fn params(&mut self, k: &Kernel) -> Vec<String> {
        (0..k.args.len())
            .map(|i| {
                let (param, global) = (self.reg(Class::B64), self.reg(Class::B64));
                self.op(format!("ld.param.u64 {param}, [a{i}]"));
                self.op(format!("cvta.to.global.u64 {global}, {param}"));
                global
            })
            .collect()
    }

    /// The register declarations and the instructions.
    fn body(&self) -> String {
        let mut s = String::new();
        for (i, c) in Class::ALL.iter().enumerate() {
            if self.counts[i] > 0 {
                s.push_str(&format!("\t.reg {} {}<{}>;\n", c.decl(), c.prefix(), self.counts[i] + 1));
            }
        }
        for l in &self.lines {
            s.push_str(l);
            s.push('\n');
        }
        s
    }
}

/// `f32` literal of PTX that is exactly `v` (hexadecimal bits).
pub(crate) fn f32_lit(v: f32) -> String {
    format!("0f{:08X}", v.to_bits())
}

/// The whole module: header comments, version and target, the slow path where used, the entry
/// with one `.u64` parameter per argument and the body.
pub(crate) fn module(k: &Kernel, caps: &CudaCaps, comments: &[String], block: u32, asm: &Asm) -> String {
    let mut s = String::new();
    s.push_str(PTX_MARK);
    s.push('\n');
    s.push_str(&format!("// sinter kernel {}: {}\n", k.name, k.ops.join(", ")));
    if !k.origins.is_empty() {
        let o: Vec<String> = k.origins.iter().map(|n| format!("%{n}")).collect();
        s.push_str(&format!("// fused graph nodes: {}\n", o.join(" ")));
    }
    for c in comments {
        s.push_str(&format!("// {c}\n"));
    }
    // Everything used here is in PTX ISA 7.0 (`max.NaN`: sm_80); [`render`] refused the rest.
    let version = isa_version(caps.sm).unwrap_or("7.0");
    s.push_str(&format!(".version {version}\n.target sm_{}{}\n.address_size 64\n\n", caps.sm.0, caps.sm.1));
    if asm.trig_slow {
        s.push_str(&trig_slow::module_text());
        s.push('\n');
    }
    for d in &asm.decls {
        s.push_str(d);
        s.push('\n');
    }
    let name = super::entry_name(&k.name);
    s.push_str(&format!(".visible .entry {name}("));
    for (i, a) in k.args.iter().enumerate() {
        let sep = if i + 1 < k.args.len() { "," } else { "" };
        s.push_str(&format!("\n\t.param .u64 a{i}{sep} // {}[{}] (b{}), {:?}", a.dtype, a.numel, a.buffer.0, a.access));
    }
    s.push_str(&format!("\n)\n.maxntid {block}, 1, 1\n"));
    if let Some(n) = asm.maxnreg {
        s.push_str(&format!(".maxnreg {n}\n"));
    }
    s.push_str("{\n");
    s.push_str(&asm.body());
    s.push_str("}\n");
    s
}

/// Assembles `module` with the `ptxas` binary at `ptxas` (`-v`, for the architecture its
/// `.target` names, into a temporary file removed after): `Ok(Ok(log))`, `Ok(Err(log))` when
/// ptxas rejects it, `Err` when it cannot run. Checks this renderer's modules without a GPU (CI:
/// the `nvidia-cuda-nvcc` wheel's ptxas); the driver's JIT is the same assembler.
pub fn assemble(ptxas: &str, module: &str) -> std::io::Result<Result<String, String>> {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let stem = std::env::temp_dir().join(format!("sinter-ptx-{}-{n}", std::process::id()));
    let (ptx, cubin) = (stem.with_extension("ptx"), stem.with_extension("cubin"));
    let arch = module.lines().find_map(|l| l.strip_prefix(".target ")).unwrap_or("sm_90").trim().to_string();
    std::fs::write(&ptx, module)?;
    let out = std::process::Command::new(ptxas)
        .arg(format!("-arch={arch}"))
        .arg("-v")
        .arg(&ptx)
        .arg("-o")
        .arg(&cubin)
        .output();
    let _ = std::fs::remove_file(&ptx);
    let _ = std::fs::remove_file(&cubin);
    let out = out?;
    let log = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    Ok(if out.status.success() { Ok(log) } else { Err(log) })
}

/// [`assemble`] with the ptxas `SINTER_PTXAS` names, for the unit tests of the PTX helpers:
/// `None` (after a skip line) without the variable, unless `SINTER_REQUIRE_NVRTC=1` (CI), which
/// makes that a failure.
#[cfg(test)]
pub(crate) fn ptxas(module: &str) -> Option<Result<String, String>> {
    let Ok(bin) = std::env::var("SINTER_PTXAS") else {
        assert!(
            !std::env::var("SINTER_REQUIRE_NVRTC").is_ok_and(|v| v == "1"),
            "SINTER_REQUIRE_NVRTC=1 but SINTER_PTXAS is unset"
        );
        eprintln!("skipped: SINTER_PTXAS is unset");
        return None;
    };
    Some(assemble(&bin, module).unwrap_or_else(|e| panic!("running {bin}: {e}")))
}
