//! Choosing a backend and compiling: `sinter::compile(&g, Options { .. })`.
//!
//! ```no_run
//! use sinter::prelude::*;
//! use sinter::{Backend, Mode, Options};
//! let g = Graph::new();
//! let x = g.input("x", DType::F32, [1024]);
//! g.output(&x.cos().cos());
//! let compiled = sinter::compile(&g, Options { backend: Backend::Wgsl, mode: Mode::Default, ..Default::default() })?;
//! let out = compiled.run(&[HostTensor::random(DType::F32, vec![1024], 0, -1.0, 1.0)])?;
//! # Ok::<(), sinter::CompileError>(())
//! ```

use sinter_core::backend::{Backend as BackendTrait, BackendError, Mode};
use sinter_core::compile::{CompileError, CompileOptions, CompiledGraph};
use sinter_core::kernel::interp::InterpBackend;
use sinter_core::trace::AsGraph;
use std::path::PathBuf;
use std::rc::Rc;

/// Which backend to compile for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Backend {
    /// The best present: WGSL on a GPU adapter, else WGSL on a CPU adapter (lavapipe), else the
    /// host kernel interpreter.
    #[default]
    Auto,
    /// WGSL through wgpu (Vulkan, Metal, DX12; lavapipe on the CPU).
    Wgsl,
    /// CUDA through NVRTC (not yet implemented: asking for it is an error naming that).
    Cuda,
    /// The host interpreter of the kernel IR (slow; for tests and machines without any adapter).
    Interp,
}

impl Backend {
    /// The CLI name.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Auto => "auto",
            Backend::Wgsl => "wgsl",
            Backend::Cuda => "cuda",
            Backend::Interp => "interp",
        }
    }

    /// Parses a CLI name.
    pub fn from_name(s: &str) -> Option<Backend> {
        [Backend::Auto, Backend::Wgsl, Backend::Cuda, Backend::Interp].into_iter().find(|b| b.name() == s)
    }
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
        }
    }
}

/// Creates a backend instance. `Auto` never fails: it falls back to the interpreter and logs why.
pub fn backend(kind: Backend) -> Result<Rc<dyn BackendTrait>, BackendError> {
    match kind {
        Backend::Wgsl => Ok(Rc::new(sinter_wgsl::backend::WgslBackend::new()?)),
        Backend::Interp => Ok(Rc::new(InterpBackend::new())),
        Backend::Cuda => Err(BackendError::NoDevice(
            "the CUDA backend is not implemented yet; use --backend wgsl (NVIDIA GPUs work through Vulkan)".into(),
        )),
        Backend::Auto => match sinter_wgsl::backend::WgslBackend::new() {
            Ok(b) => Ok(Rc::new(b)),
            Err(e) => {
                tracing::warn!("no WGSL adapter ({e}); falling back to the host interpreter");
                Ok(Rc::new(InterpBackend::new()))
            }
        },
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
    };
    sinter_core::compile::compile(g, b, c)
}
