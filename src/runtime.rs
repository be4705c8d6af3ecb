//! Choosing a backend and compiling: `sinter::compile(&g, Options { .. })`.
//!
//! ```no_run
//! use sinter::prelude::*;
//! use sinter::{Backend, Mode, Options};
//! let g = Graph::new();
//! let x = g.input("x", DType::F32, [1024]);
//! g.output(&x.cos().cos());
//! let compiled = sinter::compile(&g, Options { backend: Backend::Auto, mode: Mode::ReduceOverhead, ..Default::default() })?;
//! let x = compiled.upload(&HostTensor::random(DType::F32, vec![1024], 0, -1.0, 1.0))?;
//! let y = compiled.run_device(&[x])?;   // stays on the device
//! let y = y[0].to_host()?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # The registry
//!
//! [`REGISTRY`] lists every backend once, with how to open it; the library ([`backend`],
//! [`compile`]) and every CLI command open backends through it, so adding a backend is one entry
//! here. [`Backend::Auto`] tries, in order: CUDA (where libcuda, libnvrtc and a device are present),
//! WGSL on a GPU adapter, WGSL on a CPU adapter (lavapipe), and the host kernel interpreter, and
//! reports which it picked and why in one line ([`Selected::why`]).

use sinter_core::backend::{Backend as BackendTrait, BackendError, Mode};
use sinter_core::compile::{CompileError, CompileOptions, CompiledGraph};
use sinter_core::kernel::interp::InterpBackend;
use sinter_core::trace::AsGraph;
use std::path::PathBuf;
use std::sync::Arc;

/// Which backend to compile for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Backend {
    /// The best present: CUDA where the driver is, else WGSL on a GPU adapter, else WGSL on a CPU
    /// adapter (lavapipe), else the host kernel interpreter.
    #[default]
    Auto,
    /// CUDA C++ through NVRTC and the CUDA driver (NVIDIA GPUs).
    Cuda,
    /// WGSL through wgpu (Vulkan, Metal, DX12; lavapipe on the CPU).
    Wgsl,
    /// The host interpreter of the kernel IR (slow; for tests and machines without any adapter).
    Interp,
}

impl Backend {
    /// The CLI name.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Auto => "auto",
            Backend::Cuda => "cuda",
            Backend::Wgsl => "wgsl",
            Backend::Interp => "interp",
        }
    }

    /// Parses a CLI name.
    pub fn from_name(s: &str) -> Option<Backend> {
        [Backend::Auto, Backend::Cuda, Backend::Wgsl, Backend::Interp].into_iter().find(|b| b.name() == s)
    }

    /// Every name [`Backend::from_name`] accepts, for error messages.
    pub fn names() -> String {
        ["auto", "cuda", "wgsl", "interp"].join(", ")
    }
}

/// One backend of the registry.
pub struct Entry {
    /// Which backend.
    pub kind: Backend,
    /// What it runs on, for `--help` and the README.
    pub about: &'static str,
    /// Opens it; the error names what is missing (a library, a device).
    pub open: fn() -> Result<Arc<dyn BackendTrait>, BackendError>,
}

fn open_cuda() -> Result<Arc<dyn BackendTrait>, BackendError> {
    Ok(Arc::new(sinter_cuda::CudaBackend::new()?))
}

fn open_wgsl() -> Result<Arc<dyn BackendTrait>, BackendError> {
    Ok(Arc::new(sinter_wgsl::backend::WgslBackend::new()?))
}

fn open_interp() -> Result<Arc<dyn BackendTrait>, BackendError> {
    Ok(Arc::new(InterpBackend::new()))
}

/// Every backend, in the order [`Backend::Auto`] prefers them.
pub const REGISTRY: &[Entry] = &[
    Entry {
        kind: Backend::Cuda,
        about: "NVIDIA GPUs: CUDA C++ compiled by NVRTC, run through the driver",
        open: open_cuda,
    },
    Entry {
        kind: Backend::Wgsl,
        about: "any Vulkan/Metal/DX12 GPU through wgpu, or lavapipe on the CPU",
        open: open_wgsl,
    },
    Entry {
        kind: Backend::Interp,
        about: "the host interpreter of the kernel IR (slow, always present)",
        open: open_interp,
    },
];

/// A backend picked by [`open`], with the reason.
#[derive(Clone)]
pub struct Selected {
    /// The backend.
    pub backend: Arc<dyn BackendTrait>,
    /// One line: which backend and device, and why it was chosen (for `Auto`, why the better ones
    /// were passed over).
    pub why: String,
}

impl std::fmt::Debug for Selected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Selected({})", self.why)
    }
}

/// Opens the backend of `kind` through the [`REGISTRY`]. `Auto` never fails: it walks the
/// registry (a WGSL CPU adapter counts only after every GPU option failed) and says why.
pub fn open(kind: Backend) -> Result<Selected, BackendError> {
    if kind != Backend::Auto {
        let e = REGISTRY.iter().find(|e| e.kind == kind).ok_or_else(|| {
            BackendError::NoDevice(format!("no backend named {:?} (available: {})", kind.name(), Backend::names()))
        })?;
        let b = (e.open)()?;
        let why = format!("backend {} on {} (asked for)", b.name(), b.device_name());
        return Ok(Selected { backend: b, why });
    }
    let mut passed: Vec<String> = Vec::new();
    let mut cpu_wgsl: Option<Arc<dyn BackendTrait>> = None;
    for e in REGISTRY {
        match (e.open)() {
            Ok(b) if e.kind == Backend::Wgsl && b.runs_on_cpu() => {
                passed.push(format!("wgsl: only a CPU adapter ({})", b.device_name()));
                cpu_wgsl = Some(b);
            }
            Ok(b) => {
                let why = format!("backend {} on {}{}", b.name(), b.device_name(), reasons(&passed));
                return Ok(Selected { backend: b, why });
            }
            Err(err) => passed.push(format!("{}: {err}", e.kind.name())),
        }
        // Lavapipe beats the interpreter: take it once every GPU option has failed.
        if e.kind == Backend::Wgsl
            && let Some(b) = cpu_wgsl.take()
        {
            let why = format!("backend {} on {}{}", b.name(), b.device_name(), reasons(&passed));
            return Ok(Selected { backend: b, why });
        }
    }
    let b = open_interp()?;
    Ok(Selected { why: format!("backend interp{}", reasons(&passed)), backend: b })
}

fn reasons(passed: &[String]) -> String {
    if passed.is_empty() { String::new() } else { format!(" (auto: {})", passed.join("; ")) }
}

/// Creates a backend instance of `kind` (see [`open`]); `Auto` logs its choice on `sinter::backend`.
pub fn backend(kind: Backend) -> Result<Arc<dyn BackendTrait>, BackendError> {
    let s = open(kind)?;
    if kind == Backend::Auto {
        tracing::info!(target: "sinter::backend", "{}", s.why);
    }
    Ok(s.backend)
}

/// Options of [`compile`]; unset fields follow [`CompileOptions::default`] (environment aware).
#[derive(Clone, Debug)]
pub struct Options {
    /// Backend.
    pub backend: Backend,
    /// Mode.
    pub mode: Mode,
    /// Fusion on (compiled) or off (eager).
    pub fusion: bool,
    /// Recompilation limit.
    pub max_recompiles: usize,
    /// Program cache folder (`None`: no disk cache).
    pub cache_dir: Option<PathBuf>,
    /// Debug artifact folder.
    pub debug_dir: Option<PathBuf>,
    /// Mixed precision (`bf16`/`f16`: matmuls, convolutions and attention of an f32 graph in the
    /// low dtype with f32 accumulation; see `sinter::passes::autocast`).
    pub precision: sinter_core::passes::Precision,
    /// Graph breaks: nodes the backend cannot run go to the CPU reference (default on; see
    /// [`CompileOptions::graph_breaks`]).
    pub graph_breaks: bool,
    /// Where f32 contractions may run in TF32 (PyTorch's `allow_tf32` defaults: convolutions on,
    /// matmuls off; see [`CompileOptions::tf32`]).
    pub allow_tf32: sinter_core::schedule::AllowTf32,
    /// Serve every batch size up to a bound with one compile (default `Some(8)`: the bound is at
    /// least 8; `None`: one compile per batch size; see [`CompileOptions::dynamic`]).
    pub dynamic: Option<usize>,
}

impl Default for Options {
    fn default() -> Options {
        let c = CompileOptions::default();
        Options {
            backend: Backend::Auto,
            mode: c.mode,
            fusion: c.fusion,
            max_recompiles: c.max_recompiles,
            cache_dir: c.cache_dir,
            debug_dir: c.debug_dir,
            precision: c.precision,
            graph_breaks: c.graph_breaks,
            allow_tf32: c.tf32,
            dynamic: c.dynamic,
        }
    }
}

/// Compiles `g` for the chosen backend.
pub fn compile(g: &impl AsGraph, opts: Options) -> Result<CompiledGraph, CompileError> {
    let b = backend(opts.backend)?;
    let c = CompileOptions {
        mode: opts.mode,
        fusion: opts.fusion,
        max_recompiles: opts.max_recompiles,
        cache_dir: opts.cache_dir,
        debug_dir: opts.debug_dir,
        precision: opts.precision,
        graph_breaks: opts.graph_breaks,
        tf32: opts.allow_tf32,
        dynamic: opts.dynamic,
        bypass_compiler_caches: false,
    };
    sinter_core::compile::compile(g, b, c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_backend_is_registered_once_and_named() {
        for b in [Backend::Cuda, Backend::Wgsl, Backend::Interp] {
            assert_eq!(REGISTRY.iter().filter(|e| e.kind == b).count(), 1, "{b:?}");
            assert_eq!(Backend::from_name(b.name()), Some(b));
        }
        assert!(Backend::from_name("metal").is_none());
    }

    #[test]
    fn auto_always_finds_a_backend_and_says_why() {
        let s = open(Backend::Auto).expect("auto never fails");
        assert!(s.why.starts_with(&format!("backend {}", s.backend.name())), "{}", s.why);
    }
}
