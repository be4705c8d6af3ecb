//! The boundary every backend implements. Core calls backends only through these traits; it
//! knows nothing of wgpu or CUDA.
//!
//! * A [`Backend`] states its [`Capabilities`] (all the scheduler reads) and turns a scheduled
//!   [`Program`] into an [`Executable`]: render (pure: kernel IR → source text), then compile and
//!   allocate on the device.
//! * An [`Executable`] runs with host inputs and returns host outputs ([`Executable::run`]), or
//!   takes [`DeviceTensor`]s already on the device and leaves its outputs there
//!   ([`Executable::run_device`]), so layers and training steps chain without host round trips;
//!   optionally it times each kernel on the device.
//! * A [`DeviceTensor`] is a dtype, a shape and a backend-owned [`DeviceBuffer`]; the backend that
//!   made it recognises its own buffers through [`DeviceBuffer::as_any`]. Host-resident tensors
//!   ([`HostBuffer`]) serve backends that run on the host.
//! * Constants are uploaded once per compiled graph: [`LoadOptions::constants`] is a pool shared by
//!   every specialization of one `CompiledGraph`, keyed by the constant's content hash.
//!
//! Backends are `Send + Sync` and executables `Send`, so a compiled graph can be shared by threads
//! behind a lock (a server) or moved to a worker.

use crate::kernel::{Capabilities, Program};
use crate::schedule::{CostModel, DefaultCostModel};
use crate::tensor::HostTensor;
use serde::{Deserialize, Serialize};
use std::any::Any;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

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
    /// What the device compiler reported (registers, spills, shared memory), where it reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<KernelResources>,
    /// How the backend runs it, in a few words (`mma.sync m16n8k16 128x128x32 ...`, `cublaslt
    /// direct algo 1/6`), where it says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<String>,
    /// The arithmetic the kernel's products ran in where it differs from its operands' dtype: the
    /// name of a compute ceiling ([`crate::profile::Ceilings::matmul_tflops`]), `tf32` for f32
    /// operands multiplied in TF32 on tensor cores. `None`: the operands' dtype.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute: Option<String>,
}

/// One measured matrix-product peak ([`Backend::calibrate_matmul`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MatmulPeak {
    /// The compute ceiling it measures: `f32` (exact), `tf32`, `f16`, `bf16`, `f8e4m3`.
    pub compute: String,
    /// Rate, TFLOP/s (10^12 FLOP/s; a multiply-add counts 2).
    pub tflops: f64,
    /// How it was measured, in a sentence (library, shape, algorithms, statistics).
    pub method: String,
}

/// What [`Backend::calibrate`] measured.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct DeviceCeilings {
    /// Device-to-device copy bandwidth, GB/s (bytes read + written per second).
    pub copy_gbps: f64,
    /// Bytes copied in the measurement.
    pub copy_bytes: u64,
    /// Host-to-device launch overhead of one kernel, µs.
    pub launch_overhead_us: f64,
}

/// Per-kernel resources reported by the device compiler (ptxas on CUDA).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelResources {
    /// Registers per thread.
    pub registers: u32,
    /// Bytes spilled to local memory (stores), per thread.
    pub spill_bytes: u32,
    /// Shared memory per block (static + dynamic), bytes.
    pub shared_bytes: u32,
}

/// A buffer owned by a backend's device. Dropping the last handle frees it (or returns it to the
/// backend's pool).
pub trait DeviceBuffer: Send + Sync + std::fmt::Debug {
    /// The backend that owns it (`cuda`, `wgsl`, `host`).
    fn backend(&self) -> &str;
    /// Size in bytes.
    fn len_bytes(&self) -> u64;
    /// Copies the whole buffer to the host (waits for pending work that writes it).
    fn read(&self) -> Result<Vec<u8>, BackendError>;
    /// Waits until every queued device work that writes this buffer has finished (for timing
    /// and for handing the memory to code outside sinter). The default does nothing (host
    /// buffers are always complete).
    fn synchronize(&self) -> Result<(), BackendError> {
        Ok(())
    }
    /// For the owning backend to recognise its own buffers.
    fn as_any(&self) -> &dyn Any;
}

/// Bytes on the host, as a [`DeviceBuffer`] (the interpreter's "device", and the fallback of
/// backends without device-resident execution).
#[derive(Clone, Debug)]
pub struct HostBuffer(pub Arc<Vec<u8>>);

impl DeviceBuffer for HostBuffer {
    fn backend(&self) -> &str {
        "host"
    }
    fn len_bytes(&self) -> u64 {
        self.0.len() as u64
    }
    fn read(&self) -> Result<Vec<u8>, BackendError> {
        Ok(self.0.as_ref().clone())
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// A tensor that lives on a device: dtype, shape and a backend-owned buffer holding the host byte
/// layout (little-endian, dense, row-major). Cloning shares the buffer.
#[derive(Clone, Debug)]
pub struct DeviceTensor {
    dtype: crate::DType,
    shape: Vec<usize>,
    buffer: Arc<dyn DeviceBuffer>,
}

impl DeviceTensor {
    /// Wraps a buffer; fails when its size does not match the dtype and shape.
    pub fn new(
        dtype: crate::DType,
        shape: Vec<usize>,
        buffer: Arc<dyn DeviceBuffer>,
    ) -> Result<DeviceTensor, BackendError> {
        let want = shape.iter().product::<usize>() as u64 * dtype.size_bytes() as u64;
        if buffer.len_bytes() < want {
            return Err(BackendError::Input(format!(
                "a {dtype}{shape:?} tensor needs {want} bytes, the {} buffer holds {}",
                buffer.backend(),
                buffer.len_bytes()
            )));
        }
        Ok(DeviceTensor { dtype, shape, buffer })
    }

    /// A host tensor as a host-resident device tensor.
    pub fn host(t: &HostTensor) -> DeviceTensor {
        DeviceTensor {
            dtype: t.dtype(),
            shape: t.shape.clone(),
            buffer: Arc::new(HostBuffer(Arc::new(t.to_le_bytes()))),
        }
    }

    /// Element type.
    pub fn dtype(&self) -> crate::DType {
        self.dtype
    }

    /// Shape.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// Element count.
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    /// The buffer.
    pub fn buffer(&self) -> &Arc<dyn DeviceBuffer> {
        &self.buffer
    }

    /// The backend owning the buffer.
    pub fn backend(&self) -> &str {
        self.buffer.backend()
    }

    /// Waits for the device work that produces this tensor (see [`DeviceBuffer::synchronize`]).
    pub fn synchronize(&self) -> Result<(), BackendError> {
        self.buffer.synchronize()
    }

    /// Copies to the host.
    pub fn to_host(&self) -> Result<HostTensor, BackendError> {
        let n = self.numel() * self.dtype.size_bytes();
        let bytes = self.buffer.read()?;
        HostTensor::from_le_bytes(self.dtype, self.shape.clone(), &bytes[..n.min(bytes.len())])
            .map_err(|e| BackendError::Device(format!("download of a {}{:?} tensor: {e}", self.dtype, self.shape)))
    }
}

/// Device copies of a compiled graph's constants, keyed by content hash, shared by every
/// specialization (so a model's weights are uploaded once however many shapes it is compiled for).
#[derive(Clone, Default)]
pub struct ConstantPool(Arc<Mutex<HashMap<String, DeviceTensor>>>);

impl std::fmt::Debug for ConstantPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.0.lock().map(|m| m.len()).unwrap_or(0);
        write!(f, "ConstantPool({n} constants)")
    }
}

impl ConstantPool {
    /// The content key of a constant (dtype, shape and bytes).
    pub fn key(t: &Arc<HostTensor>) -> String {
        let mut h = blake3::Hasher::new();
        h.update(format!("{}{:?}", t.dtype(), t.shape).as_bytes());
        h.update(&crate::digest::digest(t));
        h.finalize().to_hex()[..32].to_string()
    }

    /// The device copy of `t` owned by `backend`, uploading it with `upload` on first use.
    pub fn get_or_upload(
        &self,
        backend: &str,
        t: &Arc<HostTensor>,
        upload: impl FnOnce(&HostTensor) -> Result<DeviceTensor, BackendError>,
    ) -> Result<DeviceTensor, BackendError> {
        self.get_or_make(format!("{backend}:{}", Self::key(t)), || upload(t))
    }

    /// A device tensor `backend` derives from constant `t` (`derivation` names how, e.g. a
    /// weight's layout change), made by `make` on first use: later specializations of the graph
    /// find it by the constant's key without deriving it again.
    pub fn get_or_derive(
        &self,
        backend: &str,
        t: &Arc<HostTensor>,
        derivation: &str,
        make: impl FnOnce() -> Result<DeviceTensor, BackendError>,
    ) -> Result<DeviceTensor, BackendError> {
        self.get_or_make(format!("{backend}:{}:{derivation}", Self::key(t)), make)
    }

    fn get_or_make(
        &self,
        key: String,
        make: impl FnOnce() -> Result<DeviceTensor, BackendError>,
    ) -> Result<DeviceTensor, BackendError> {
        let poisoned = || BackendError::Device("constant pool poisoned".into());
        if let Some(d) = self.0.lock().map_err(|_| poisoned())?.get(&key) {
            return Ok(d.clone());
        }
        let d = make()?;
        self.0.lock().map_err(|_| poisoned())?.insert(key, d.clone());
        Ok(d)
    }

    /// Number of constants held.
    pub fn len(&self) -> usize {
        self.0.lock().map(|m| m.len()).unwrap_or(0)
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// What [`Backend::load_with`] needs beyond the program.
#[derive(Clone, Debug, Default)]
pub struct LoadOptions {
    /// The compile mode.
    pub mode: Mode,
    /// Folder for on-disk caches (autotune winners, compiled binaries); `None`: the backend's
    /// default (`SINTER_CACHE_DIR`, else the user's cache folder).
    pub cache_dir: Option<PathBuf>,
    /// Constants already on the device (one pool per compiled graph).
    pub constants: ConstantPool,
    /// Keep the backend's compiler off caches of its own outside sinter's (NVRTC 13 keeps PTX
    /// and cubins in the CUDA driver's cache, across processes): a cold compile measured cold.
    pub bypass_compiler_caches: bool,
}

impl LoadOptions {
    /// Options with this mode and nothing shared.
    pub fn mode(mode: Mode) -> LoadOptions {
        LoadOptions { mode, ..Default::default() }
    }
}

/// A compiled program, ready to run.
pub trait Executable: Send {
    /// Runs once with inputs in program order and returns outputs in program order.
    fn run(&mut self, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, BackendError>;

    /// Runs once with inputs already on the device and returns outputs left on the device (fresh
    /// buffers: a later run never overwrites them). The default goes through the host (for
    /// backends that run there); device backends override it without host copies.
    fn run_device(&mut self, inputs: &[DeviceTensor]) -> Result<Vec<DeviceTensor>, BackendError> {
        let host = inputs.iter().map(DeviceTensor::to_host).collect::<Result<Vec<_>, _>>()?;
        Ok(self.run(&host)?.iter().map(DeviceTensor::host).collect())
    }

    /// Runs `iters` times after uploading inputs once, returning the outputs of the last run and
    /// per-kernel device timings of every run (empty when the device cannot time).
    fn run_timed(
        &mut self,
        inputs: &[HostTensor],
        iters: usize,
    ) -> Result<(Vec<HostTensor>, Vec<Vec<KernelTiming>>), BackendError>;

    /// Runs `iters` times after uploading inputs once, timing each whole run between two device
    /// events, none between its kernels (the captured graph replayed where the mode has one),
    /// after the same cache clear as [`Executable::run_timed`]: how `triton.testing.do_bench`
    /// times a call, and so the figure `sinter bench` compares with the anchor's. Returns the
    /// last run's outputs and each run's device time in ns; `None` where the backend does not
    /// time whole runs (callers then take the span of `run_timed`'s kernels, which per-kernel
    /// events lengthen by the gaps they add between kernels).
    #[allow(clippy::type_complexity)]
    fn run_timed_whole(
        &mut self,
        inputs: &[HostTensor],
        iters: usize,
    ) -> Result<Option<(Vec<HostTensor>, Vec<f64>)>, BackendError> {
        let _ = (inputs, iters);
        Ok(None)
    }

    /// The generated sources, one per kernel, in launch order.
    fn sources(&self) -> Vec<KernelSource>;

    /// Makes later runs serve another value of the program's outer symbol
    /// ([`crate::kernel::dynamic`]): `at` is this executable's program instantiated at that value
    /// by [`crate::kernel::dynamic::Extents::at`] (validated), `None` returns to the extents
    /// compiled. Inputs and outputs then take `at`'s shapes and the kernels, as compiled, are
    /// launched over `at`'s extents (lanes, rows, batches); buffers keep their compiled
    /// (largest) sizes. Only called when [`Backend::serves_extents`] is true; the default refuses.
    fn set_extent(&mut self, at: Option<Arc<Program>>) -> Result<(), BackendError> {
        let _ = at;
        Err(BackendError::Unsupported { backend: "?".into(), what: "dynamic extents".into() })
    }
}

/// A code generator plus device.
pub trait Backend: Send + Sync {
    /// Short name (`wgsl`, `cuda`, `interp`).
    fn name(&self) -> &str;
    /// Human-readable device description (adapter name, driver).
    fn device_name(&self) -> String;
    /// What the scheduler may assume.
    fn caps(&self) -> &Capabilities;
    /// The cost model the scheduler uses for this backend (its binding rules, what is worth a
    /// matmul tile): the default model unless the backend knows better.
    fn cost_model(&self) -> Arc<dyn CostModel> {
        Arc::new(DefaultCostModel::default())
    }
    /// Copies a host tensor to this backend's device (host-resident for host backends).
    fn upload(&self, t: &HostTensor) -> Result<DeviceTensor, BackendError> {
        Ok(DeviceTensor::host(t))
    }
    /// Measures the device's ceilings for the roofline (copy bandwidth, launch overhead); `None`
    /// for backends without a device to measure. `copy_bytes` bounds the copy measured.
    fn calibrate(&self, copy_bytes: u64) -> Result<Option<DeviceCeilings>, BackendError> {
        let _ = copy_bytes;
        Ok(None)
    }
    /// Measures the device's matrix-product peaks, one per compute type it has (see
    /// [`MatmulPeak`]): on a vendor library where the backend has one, so that kernels are
    /// compared with what the hardware reaches. Empty (the default) when the backend measures
    /// none; `sinter calibrate` then times its own matmul workloads instead.
    fn calibrate_matmul(&self) -> Result<Vec<MatmulPeak>, BackendError> {
        Ok(Vec::new())
    }
    /// True when the backend's "device" is the host's CPU (lavapipe, a software adapter, the
    /// interpreter): `Backend::Auto` prefers any GPU to it.
    fn runs_on_cpu(&self) -> bool {
        false
    }
    /// True when every measurement should run on a freshly opened device (NVIDIA's Vulkan driver
    /// drops to its idle clock a few seconds after a device is created: see BENCHMARKS.md).
    fn fresh_device_per_measurement(&self) -> bool {
        false
    }
    /// True when this backend's executables implement [`Executable::set_extent`], so one program
    /// compiled at a bound serves smaller values of an outer symbol without recompiling.
    fn serves_extents(&self) -> bool {
        false
    }
    /// Renders, compiles and allocates `program`.
    fn load(&self, program: &Program, mode: Mode) -> Result<Box<dyn Executable>, BackendError>;
    /// As [`Backend::load`], with caches and a constant pool shared across loads. The default
    /// ignores what it cannot use.
    fn load_with(&self, program: &Program, opts: &LoadOptions) -> Result<Box<dyn Executable>, BackendError> {
        self.load(program, opts.mode)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DType;

    #[test]
    fn constant_pool_uploads_and_derives_once_per_key() {
        let pool = ConstantPool::default();
        let t = Arc::new(HostTensor::random(DType::F32, vec![4, 3], 1, -1.0, 1.0));
        let same = Arc::new((*t).clone());
        let calls = std::cell::Cell::new(0);
        let upload = |h: &HostTensor| {
            calls.set(calls.get() + 1);
            Ok(DeviceTensor::host(h))
        };
        pool.get_or_upload("b", &t, upload).unwrap();
        pool.get_or_upload("b", &same, upload).unwrap();
        assert_eq!(calls.get(), 1, "equal contents share one upload");
        for _ in 0..2 {
            pool.get_or_derive("b", &same, "krsc", || upload(&t)).unwrap();
        }
        assert_eq!(calls.get(), 2, "a derivation is made once, apart from the constant itself");
        pool.get_or_derive("b", &t, "other", || upload(&t)).unwrap();
        pool.get_or_upload("c", &t, upload).unwrap();
        assert_eq!((calls.get(), pool.len()), (4, 4), "derivations and backends are keyed apart");
    }
}
