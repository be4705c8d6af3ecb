//! The boundary every backend implements. Core calls backends only through these traits; it
//! knows nothing of wgpu or CUDA.
//!
//! * A [`Backend`] states its [`Capabilities`] (all the scheduler reads) and turns a scheduled
//!   [`Program`] into an [`Executable`]: render (pure: kernel IR → source text), then compile and
//!   allocate on the device.
//! * An [`Executable`] runs with host inputs and returns host outputs, optionally timing each
//!   kernel on the device.

use crate::kernel::{Capabilities, Program};
use crate::tensor::HostTensor;
use serde::{Deserialize, Serialize};

/// Errors from a backend.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BackendError {
    /// No usable device (no adapter, no driver).
    #[error("no device: {0}")]
    NoDevice(String),
    /// The program needs something this backend cannot do (names the dtype, op or limit).
    #[error("unsupported by the {backend} backend: {what}")]
    Unsupported {
        /// Backend name.
        backend: String,
        /// What is missing.
        what: String,
    },
    /// Rendering the kernel IR failed.
    #[error("render of kernel {kernel}: {msg}")]
    Render {
        /// Kernel name.
        kernel: String,
        /// What went wrong.
        msg: String,
    },
    /// The generated source failed to compile; `code` holds it.
    #[error("compile of kernel {kernel}: {log}")]
    Compile {
        /// Kernel name.
        kernel: String,
        /// Compiler diagnostics.
        log: String,
        /// The source that failed.
        code: String,
    },
    /// Device memory exhausted.
    #[error("out of device memory: {0}")]
    OutOfMemory(String),
    /// Any other device failure.
    #[error("device: {0}")]
    Device(String),
    /// Inputs do not match the program.
    #[error("input: {0}")]
    Input(String),
}

/// How an executable should run (the compile modes of torch.compile).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Mode {
    /// Fused kernels, one submission per run.
    #[default]
    Default,
    /// Launch overhead removed: every kernel of a run in one command buffer / CUDA graph, buffers
    /// pre-bound.
    ReduceOverhead,
    /// Tile configurations timed on the device; winners cached on disk.
    MaxAutotune,
}

impl Mode {
    /// The CLI name (`default`, `reduce-overhead`, `max-autotune`).
    pub fn name(self) -> &'static str {
        match self {
            Mode::Default => "default",
            Mode::ReduceOverhead => "reduce-overhead",
            Mode::MaxAutotune => "max-autotune",
        }
    }

    /// Parses a CLI name.
    pub fn from_name(s: &str) -> Option<Mode> {
        [Mode::Default, Mode::ReduceOverhead, Mode::MaxAutotune].into_iter().find(|m| m.name() == s)
    }
}

/// Device time of one kernel launch.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KernelTiming {
    /// Kernel name.
    pub kernel: String,
    /// Device start, ns, relative to the first kernel of the run.
    pub start_ns: f64,
    /// Device duration, ns.
    pub dur_ns: f64,
}

/// One generated kernel source.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KernelSource {
    /// Kernel name.
    pub name: String,
    /// File extension (`wgsl`, `cu`).
    pub ext: String,
    /// The source text.
    pub source: String,
    /// Launch grid (workgroups / blocks).
    pub grid: [u32; 3],
    /// Workgroup / block size.
    pub block: [u32; 3],
}

/// A compiled program, ready to run.
pub trait Executable {
    /// Runs once with inputs in program order and returns outputs in program order.
    fn run(&mut self, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, BackendError>;

    /// Runs `iters` times after uploading inputs once, returning the outputs of the last run and
    /// per-kernel device timings of every run (empty when the device cannot time).
    fn run_timed(
        &mut self,
        inputs: &[HostTensor],
        iters: usize,
    ) -> Result<(Vec<HostTensor>, Vec<Vec<KernelTiming>>), BackendError>;

    /// The generated sources, one per kernel, in launch order.
    fn sources(&self) -> Vec<KernelSource>;
}

/// A code generator plus device.
pub trait Backend {
    /// Short name (`wgsl`, `cuda`, `interp`).
    fn name(&self) -> &str;
    /// Human-readable device description (adapter name, driver).
    fn device_name(&self) -> String;
    /// What the scheduler may assume.
    fn caps(&self) -> &Capabilities;
    /// Renders, compiles and allocates `program`.
    fn load(&self, program: &Program, mode: Mode) -> Result<Box<dyn Executable>, BackendError>;
}
