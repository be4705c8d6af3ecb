//! The CUDA renderer: a pure function from one kernel of the kernel IR (plus a [`Tuning`]) to
//! CUDA C++ source text and its launch shape. No device, no I/O.

use serde::{Deserialize, Serialize};
use sinter_core::kernel::Kernel;

/// What the renderer may assume about the device.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CudaCaps {
    /// Compute capability (major, minor), e.g. (9, 0) on Hopper.
    pub sm: (u32, u32),
    /// Max threads per block.
    pub max_threads_per_block: u32,
    /// Static shared memory per block, bytes (48 KiB without opt-in).
    pub max_shared_bytes_per_block: u32,
    /// Streaming multiprocessors.
    pub sm_count: u32,
}

impl CudaCaps {
    /// An H100 SXM (sm_90, 132 SMs): what snapshots and CI compiles assume.
    pub fn hopper() -> CudaCaps {
        CudaCaps { sm: (9, 0), max_threads_per_block: 1024, max_shared_bytes_per_block: 48 * 1024, sm_count: 132 }
    }
}

/// A tuning of one kernel (what max-autotune varies); `Tuning::default()` is the heuristic choice.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Tuning {
    /// Threads per block (None: the renderer's default for the kernel kind).
    pub block: Option<u32>,
    /// Vectorize contiguous aligned accesses (16-byte loads/stores) where provable.
    pub vectorize: Option<bool>,
}

/// A rendered kernel.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Rendered {
    /// Kernel name (the `extern "C"` entry point), as [`Kernel::name`].
    pub name: String,
    /// Full CUDA C++ source (self-contained apart from `cuda_fp16.h` / `cuda_bf16.h`).
    pub source: String,
    /// Grid (blocks).
    pub grid: [u32; 3],
    /// Block (threads).
    pub block: [u32; 3],
    /// Dynamic shared memory bytes to launch with.
    pub dynamic_shared_bytes: u32,
    /// Short description of the strategy (e.g. `pointwise vec4`, `reduce persistent block 256`).
    pub strategy: String,
}

/// Errors of the renderer.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum RenderError {
    /// The kernel needs something the renderer does not do.
    #[error("kernel {kernel}: unsupported by the CUDA renderer: {what}")]
    Unsupported {
        /// Kernel name.
        kernel: String,
        /// What.
        what: String,
    },
    /// The tuning is not valid for this kernel.
    #[error("kernel {kernel}: invalid tuning: {msg}")]
    InvalidTuning {
        /// Kernel name.
        kernel: String,
        /// Why.
        msg: String,
    },
}

/// Renders `k` with `t`. Kernel parameters are one pointer per [`Kernel::args`] entry, in order
/// (`const T* __restrict__ a0` for reads, `T* __restrict__ a1` for writes), nothing else.
pub fn render(k: &Kernel, caps: &CudaCaps, t: &Tuning) -> Result<Rendered, RenderError> {
    let _ = (caps, t);
    Err(RenderError::Unsupported { kernel: k.name.clone(), what: "renderer not written yet".into() })
}

/// The tunings max-autotune times for `k` (the default first).
pub fn candidates(k: &Kernel, caps: &CudaCaps) -> Vec<Tuning> {
    let _ = (k, caps);
    vec![Tuning::default()]
}
