//! [`CudaBackend`]: the [`Backend`] that renders kernel IR to CUDA C++, compiles it with NVRTC for
//! the GPU's own architecture (cubins cached on disk), and runs it through the [`crate::device`]
//! layer.
//!
//! # Loading
//!
//! [`CudaBackend::load_cuda`] (the `load` module) turns a program into a [`CudaExecutable`]:
//! validation, the executable's stream and memory, one parallel NVRTC batch, library plans, and
//! in max-autotune the search of each kernel's tuning.
//!
//! # Modes
//!
//! * [`Mode::Default`]: each run launches every kernel on the executable's stream.
//!   [`Executable::run_device`] patches the inputs' device pointers and fresh pooled output
//!   buffers into the parameter arrays and launches: no copies, no synchronize.
//! * [`Mode::ReduceOverhead`]: the whole run is captured once at load (stream capture, then
//!   instantiate) as a CUDA graph over the executable's own buffers and replayed with one
//!   `cuGraphLaunch`. Captured arguments are frozen, so before each `run_device` replay the kernel
//!   nodes that read inputs or write outputs are given the run's pointers
//!   (`cuGraphExecKernelNodeSetParams`; replays already queued keep theirs): no copies. Where the
//!   driver refuses that, or [`CudaBackend::set_graph_arg_updates`] turns it off, `run_device`
//!   copies inputs (device to device, async) into the own input buffers before the replay and
//!   outputs into fresh pooled buffers after it. `run` uploads into and downloads from the own
//!   buffers either way.
//! * [`Mode::MaxAutotune`]: as `ReduceOverhead`, after picking each kernel's [`Tuning`] with the
//!   shared tuner ([`sinter_core::tune::autotune`]) over [`render::candidates`], each candidate
//!   timed on the device with events (median of 5 after warm-ups) over random float inputs. The
//!   candidates of every kernel searched are rendered and compiled up front in one parallel NVRTC
//!   batch (the `tune` module), then each search compiles its own batch from those cubins.
//!   Winners are cached in `<cache dir>/autotune/cuda-<device key>.json` ([`DeviceInfo::key`]:
//!   GPU, architecture, driver); entries are re-validated by rendering them. Matmuls the library can run also get
//!   cuBLASLt candidates (`library`).
//!
//! Large matmuls whose epilogue cuBLASLt computes exactly run as cuBLASLt calls in `default` mode
//! too; see the `library` module for the rule. An executable with a library call launches its
//! steps on the stream (no CUDA graph).
//!
//! Inputs produced on another stream (another executable's outputs) are waited for with an event
//! and recorded as used there, so the pool does not reuse their memory too early (see
//! [`crate::device::pool`]).

mod conv;
mod exec;
mod library;
mod load;
mod load_times;
mod memory;
mod tune;

pub use exec::CudaExecutable;
pub(crate) use library::large_enough;
pub use library::{LIBRARY_MIN_FLOPS, epilogue_kernel, skinny};
use load_times::LoadTimes;
pub use tune::candidate_sources;

use crate::device::{CudaBuffer, CudaCalibration, Device, DeviceInfo, Launch, Stream};
use crate::nvrtc::{self, CubinCache, NvrtcError};
use crate::render::{self, CudaCaps, Rendered, Tuning};
use cudarc::driver::CudaFunction;
use exec::{IoSlot, LoadedKernel};
use sinter_core::DType;
use sinter_core::backend::{Backend, BackendError, DeviceTensor, Executable, KernelResources, LoadOptions, Mode};
use sinter_core::kernel::alloc::{self, AllocRole};
use sinter_core::kernel::{Capabilities, Kernel, Program, interp};
use sinter_core::tensor::HostTensor;
use sinter_core::tune::{TuneCache, autotune};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

/// Environment variable choosing the GPU ordinal (default 0).
pub const ENV_DEVICE: &str = "SINTER_CUDA_DEVICE";
/// Environment variable that, when `1`, fills every output with 0xFF bytes before each run (so a
/// kernel that misses an element is caught by a comparison).
pub const ENV_POISON: &str = "SINTER_CUDA_POISON";
/// Environment variable that, when `1`, makes graph replays copy inputs and outputs instead of
/// updating kernel node arguments (see [`CudaBackend::set_graph_arg_updates`]).
pub const ENV_GRAPH_COPY: &str = "SINTER_CUDA_GRAPH_COPY";

/// Static shared memory the renderer may use per block (the limit without opt-in).
const SHARED_BYTES: u32 = 48 * 1024;

/// The CUDA backend: a device plus the renderer and NVRTC.
pub struct CudaBackend {
    dev: Device,
    caps: Capabilities,
    cuda_caps: CudaCaps,
    cache_dir: Option<PathBuf>,
    poison: bool,
    graph_updates: bool,
    /// The tuning of kernels not searched (default and reduce-overhead modes, and fallbacks):
    /// `Tuning::default()`, or with split-k off (`SINTER_SPLIT_K=0`, read once here so the
    /// renderer stays a pure function of the kernel and the tuning).
    own_default: Tuning,
    /// The thread warming cuBLASLt ([`CudaBackend::with_ordinal`]), joined on drop.
    library_warm: Option<std::thread::JoinHandle<()>>,
}

impl Drop for CudaBackend {
    fn drop(&mut self) {
        if let Some(h) = self.library_warm.take() {
            let _ = h.join();
        }
    }
}

impl std::fmt::Debug for CudaBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CudaBackend({})", self.dev.info().description())
    }
}

/// The scheduler-facing capabilities of a device.
pub fn capabilities(info: &DeviceInfo) -> Capabilities {
    Capabilities {
        backend: "cuda".into(),
        max_workgroup_size: info.max_threads_per_block.clamp(1, 1024),
        max_shared_bytes: SHARED_BYTES.min(info.max_shared_per_block.max(1)),
        max_bindings: 64,
        max_binding_bytes: u64::MAX,
        subgroup_size: Some(32),
        dtypes: DType::ALL.to_vec(),
        compute_units: info.sm_count,
    }
}

/// What the renderer may assume about a device.
pub fn cuda_caps(info: &DeviceInfo) -> CudaCaps {
    CudaCaps {
        sm: info.cc,
        max_threads_per_block: info.max_threads_per_block.clamp(1, 1024),
        max_shared_bytes_per_block: SHARED_BYTES.min(info.max_shared_per_block.max(1)),
        sm_count: info.sm_count,
        max_dynamic_shared_bytes: info.max_shared_per_block_optin.max(info.max_shared_per_block),
        // `SINTER_PTX=0` renders every kernel as CUDA C++ (A/B runs, a way around a JIT problem).
        ptx: std::env::var("SINTER_PTX").map_or(true, |v| v != "0"),
        // Shape-generic attention where this build compiled it ahead of time for the device's
        // architecture (`SINTER_AOT=0`: every kernel specialized and JIT-compiled, A/B runs).
        generic_attention: crate::aot::available(&crate::nvrtc::Target::sm(info.cc)) > 0,
    }
}

/// Whether a tuning read from the autotuning cache is plausible for some kernel on this device:
/// a block that is a positive multiple of 32 within the limit, a matmul tile the renderer accepts.
/// Whether it fits the kernel it is cached for is checked by rendering it when it is used.
pub fn plausible_tuning(t: &Tuning, caps: &CudaCaps) -> bool {
    t.block.is_none_or(|b| b >= 32 && b <= caps.max_threads_per_block && b % 32 == 0)
        && t.tile.is_none_or(|tile| render::check_tile(&tile, caps, DType::F32).is_ok())
        && (t.tile.is_none() || t.mma.is_none())
        && (t.library.is_none() || (t.tile.is_none() && t.mma.is_none() && t.block.is_none()))
        && t.split_k.is_none_or(|s| (1..=render::MAX_SPLIT_K).contains(&s) && t.mma.is_some())
}

/// The launch of rendered kernel `r` (its loaded function `func`) with `args` (one device pointer
/// per kernel argument, then its scratch), its by-value [`Rendered::params`] and the tensor maps
/// it asks for, encoded from those pointers.
pub fn rendered_launch(dev: &Device, func: CudaFunction, r: &Rendered, args: &[u64]) -> Result<Launch, BackendError> {
    let mut values = args.to_vec();
    values.extend(&r.params);
    let mut launch = Launch::new(dev, func, &r.name, r.grid, r.block, r.dynamic_shared_bytes, &values)?;
    if !r.tensor_maps.is_empty() {
        launch.bind_tensor_maps(&r.tensor_maps)?;
    }
    Ok(launch)
}

fn nvrtc_error(e: NvrtcError, source: &str) -> BackendError {
    match e {
        NvrtcError::Unavailable(m) => BackendError::NoDevice(format!("NVRTC (libnvrtc): {m}")),
        NvrtcError::Compile { name, log } => BackendError::Compile { kernel: name, log, code: source.to_string() },
    }
}

/// The [`CudaBuffer`] behind a device tensor of this device (`what` names it in errors).
pub(crate) fn cuda_buffer<'a>(t: &'a DeviceTensor, dev: &Device, what: &str) -> Result<&'a CudaBuffer, BackendError> {
    let Some(b) = t.buffer().as_any().downcast_ref::<CudaBuffer>() else {
        return Err(BackendError::Input(format!(
            "{what} lives on the {} backend; the cuda backend runs only on its own device tensors (upload it with the cuda backend)",
            t.backend()
        )));
    };
    if !Arc::ptr_eq(b.home().pool(), dev.pool()) {
        return Err(BackendError::Input(format!("{what} lives on another CUDA device than {}", dev.info().name)));
    }
    Ok(b)
}

impl CudaBackend {
    /// Opens the GPU named by `SINTER_CUDA_DEVICE` (default 0). Without libcuda, libnvrtc or a GPU
    /// the error is [`BackendError::NoDevice`] naming what is missing.
    pub fn new() -> Result<CudaBackend, BackendError> {
        let ordinal = match std::env::var(ENV_DEVICE) {
            Ok(v) if !v.trim().is_empty() => v
                .trim()
                .parse()
                .map_err(|_| BackendError::NoDevice(format!("{ENV_DEVICE}={v:?} is not a device ordinal")))?,
            _ => 0,
        };
        Self::with_ordinal(ordinal)
    }

    /// Opens GPU `ordinal`. Meanwhile a thread of its own loads cuBLASLt, makes its handle and
    /// asks its heuristic once ([`crate::device::blas::warm`]; most programs have products, and
    /// a program with a library step waits for these otherwise). The library's load and plans were
    /// the critical path of such a program's cold compile: 0.12-0.15 s against NVRTC's 0.07 for the
    /// MLP workload's epilogue (H200, session 31, call 2); with the load here, the first
    /// heuristic query still took 76-146 ms of matmul_4096_f32's 0.09-0.17 s, and with it here
    /// too that compile took 0.002 s (session 32, call 4). The backend joins the thread when
    /// dropped, so no process exits while the library initializes. cuDNN, much larger, still loads
    /// only for a program with a convolution step.
    pub fn with_ordinal(ordinal: usize) -> Result<CudaBackend, BackendError> {
        // A thread that cannot start leaves the load to the first program that wants the library.
        // The library loads before the device is asked for: the load overlaps the context's
        // creation, and `Device::new` then hands this thread the device the backend opens.
        let warm = move || {
            if crate::probe::cublaslt().is_ok()
                && let Ok(dev) = Device::new(ordinal)
            {
                crate::device::blas::warm(&dev);
            }
        };
        let warm = std::thread::Builder::new().name("sinter-cublaslt-warm".into()).spawn(warm).ok();
        let opened = Device::new(ordinal).and_then(|dev| {
            // NVRTC is required even where kernels compiled ahead of time are embedded: they cover
            // a few attention shapes, and everything else (epilogues, max-autotune) compiles here.
            crate::probe::nvrtc().map_err(|e| BackendError::NoDevice(format!("NVRTC (libnvrtc): {e}")))?;
            Ok(dev)
        });
        match opened {
            Ok(dev) => {
                let mut b = Self::with_device(dev);
                b.library_warm = warm;
                Ok(b)
            }
            Err(e) => {
                if let Some(h) = warm {
                    let _ = h.join();
                }
                Err(e)
            }
        }
    }

    /// Wraps an opened device. `SINTER_CUDA_POISON=1` turns on [`CudaBackend::set_poison_outputs`].
    pub fn with_device(dev: Device) -> CudaBackend {
        let info = dev.info();
        CudaBackend {
            caps: capabilities(info),
            cuda_caps: cuda_caps(info),
            cache_dir: None,
            poison: std::env::var(ENV_POISON).is_ok_and(|v| v.trim() == "1"),
            graph_updates: !std::env::var(ENV_GRAPH_COPY).is_ok_and(|v| v.trim() == "1"),
            own_default: if std::env::var("SINTER_SPLIT_K").is_ok_and(|v| v.trim() == "0") {
                Tuning { split_k: Some(1), ..Tuning::default() }
            } else {
                Tuning::default()
            },
            dev,
            library_warm: None,
        }
    }

    /// The device.
    pub fn device(&self) -> &Device {
        &self.dev
    }

    /// What the renderer assumes about the device.
    pub fn cuda_caps(&self) -> &CudaCaps {
        &self.cuda_caps
    }

    /// Folder for the autotuning and cubin caches when [`LoadOptions::cache_dir`] names none
    /// (default: [`sinter_core::compile::default_cache_dir`]).
    pub fn set_cache_dir(&mut self, dir: Option<PathBuf>) {
        self.cache_dir = dir;
    }

    /// Fill every output with 0xFF bytes before each run of executables loaded afterwards (tests:
    /// an element a kernel fails to write then reads as NaN or -1, not a stale correct value).
    pub fn set_poison_outputs(&mut self, on: bool) {
        self.poison = on;
    }

    /// Graph replays (`reduce-overhead`, `max-autotune`) of `run_device` give the kernel nodes that
    /// read inputs or write outputs the run's pointers (`cuGraphExecKernelNodeSetParams`, on by
    /// default), or, when off, copy inputs into the executable's own buffers and outputs out of
    /// them (device to device). Applies to executables loaded afterwards.
    pub fn set_graph_arg_updates(&mut self, on: bool) {
        self.graph_updates = on;
    }

    /// Copy bandwidth and launch overhead of the device (see [`Device::calibrate`]).
    pub fn calibrate(&self) -> Result<CudaCalibration, BackendError> {
        self.dev.calibrate()
    }

    fn cache_dir(&self, opts: &LoadOptions) -> Option<PathBuf> {
        opts.cache_dir.clone().or_else(|| self.cache_dir.clone()).or_else(sinter_core::compile::default_cache_dir)
    }

    /// Compiles CUDA C++ for this device through the on-disk cubin cache.
    fn compile(&self, name: &str, source: &str, cubins: &CubinCache) -> Result<nvrtc::Cubin, BackendError> {
        let target = cubins.target(self.cuda_caps.sm);
        let (cubin, hit) = cubins.compile_cached(name, source, &target).map_err(|e| nvrtc_error(e, source))?;
        tracing::debug!(target: "sinter::cuda", "{name}: cubin {}", if hit { "cached" } else { "compiled" });
        Ok(cubin)
    }

    /// Compiles `sources` (name, CUDA C++) through the cubin cache in parallel
    /// ([`nvrtc::compile_parallel`]); results in the order given.
    fn compile_all(&self, sources: &[(&str, &str)], cubins: &CubinCache) -> Vec<Result<nvrtc::Cubin, BackendError>> {
        let target = cubins.target(self.cuda_caps.sm);
        nvrtc::compile_parallel(sources, &target, cubins)
            .into_iter()
            .zip(sources)
            .map(|(r, (name, src))| match r {
                Ok((cubin, hit)) => {
                    tracing::debug!(target: "sinter::cuda", "{name}: cubin {}", if hit { "cached" } else { "compiled" });
                    Ok(cubin)
                }
                Err(e) => Err(nvrtc_error(e, src)),
            })
            .collect()
    }

    /// Renders `k` with `t`, compiles and loads it, with `args` (one device pointer per
    /// [`Kernel::args`] entry) in its parameter array.
    pub(crate) fn build_kernel(
        &self,
        k: &Kernel,
        t: &Tuning,
        args: &[u64],
        cubins: &CubinCache,
        stream: &Arc<Stream>,
    ) -> Result<LoadedKernel, BackendError> {
        self.build_kernel_with(k, t, &self.cuda_caps, args, cubins, stream)
    }

    /// [`Self::build_kernel`] rendering with `caps` (the library steps' kernels: [`Self::cpp_caps`]).
    pub(crate) fn build_kernel_with(
        &self,
        k: &Kernel,
        t: &Tuning,
        caps: &render::CudaCaps,
        args: &[u64],
        cubins: &CubinCache,
        stream: &Arc<Stream>,
    ) -> Result<LoadedKernel, BackendError> {
        if t.library.is_some() {
            return library::build(self, k, t, args, cubins, stream);
        }
        let r: Rendered = render::render(k, caps, t)?;
        let cubin = self.compile(&r.name, &r.source, cubins)?;
        self.load_kernel(k, t, r, &cubin, args, stream)
    }

    /// Loads the compiled `cubin` of `r` (kernel `k` rendered with `t`) with `args` in its
    /// parameter array, followed by its private scratch ([`Rendered::scratch_bytes`], allocated
    /// and zeroed on `stream`) where it has one.
    fn load_kernel(
        &self,
        k: &Kernel,
        t: &Tuning,
        r: Rendered,
        cubin: &nvrtc::Cubin,
        args: &[u64],
        stream: &Arc<Stream>,
    ) -> Result<LoadedKernel, BackendError> {
        let entry = r.name.clone();
        self.load_shared(k, t, r, cubin, &entry, &mut None, args, stream)
    }

    /// As [`CudaBackend::load_kernel`], launching `entry` of `cubin` (the kernel compiled for an
    /// identical body under another name, [`render::body_key`]); `func` holds the function once
    /// loaded, so kernels sharing a cubin load its module once.
    #[allow(clippy::too_many_arguments)]
    fn load_shared(
        &self,
        k: &Kernel,
        t: &Tuning,
        r: Rendered,
        cubin: &nvrtc::Cubin,
        entry: &str,
        func: &mut Option<cudarc::driver::CudaFunction>,
        args: &[u64],
        stream: &Arc<Stream>,
    ) -> Result<LoadedKernel, BackendError> {
        if args.len() != k.args.len() {
            return Err(BackendError::Device(format!(
                "kernel {}: {} arguments for {} parameters",
                k.name,
                args.len(),
                k.args.len()
            )));
        }
        let func = match func {
            Some(f) => f.clone(),
            None => func.insert(self.dev.load_function(&cubin.image, entry)?).clone(),
        };
        let scratch = if r.scratch_bytes > 0 {
            let b = stream.alloc(r.scratch_bytes)?;
            tracing::debug!(target: "sinter::cuda", "memory {} scratch: {} bytes at {:#x}", k.name, r.scratch_bytes, b.ptr());
            stream.fill(b.ptr(), 0, r.scratch_bytes, &format!("{} scratch", k.name))?;
            Some(b)
        } else {
            None
        };
        let mut params = args.to_vec();
        params.extend(scratch.as_ref().map(|b| b.ptr()));
        let launch = rendered_launch(&self.dev, func, &r, &params)?;
        let attrs = launch.attributes();
        let spill = nvrtc::resources(&cubin.log, entry).map_or(attrs.local_bytes, |x| x.spill_bytes);
        let resources = KernelResources {
            registers: attrs.registers,
            spill_bytes: spill,
            shared_bytes: attrs.static_shared_bytes + r.dynamic_shared_bytes,
        };
        Ok(LoadedKernel {
            name: k.name.clone(),
            rendered: r,
            tuning: t.clone(),
            launch: library::Step::Kernel(launch),
            resources: Some(resources),
            _scratch: scratch,
        })
    }

    /// The rendered epilogue kernel of library step `k`, where it has one. Best effort, for
    /// compiling it ahead in a parallel batch: a failure surfaces where the step is built (and may
    /// send the kernel to its own template).
    fn epilogue_source(&self, k: &Kernel) -> Option<Rendered> {
        let e = library::epilogue_kernel(k, self.cuda_caps.sm)?;
        render::render(&e, &self.cpp_caps(), &Tuning::default()).ok()
    }

    /// This device's capabilities with PTX off: what library steps render their kernels with
    /// (epilogues, weight permutations), and a load's own kernels when it has more than
    /// `MAX_PTX_BODIES` PTX bodies. Measured (H200, session 37, calls 4-5): ResNet-18's 19 such
    /// kernels as PTX took its cold compile from 0.35-0.46 to 0.85-1.34 s, the driver's JIT
    /// assembling one module at a time and, beside the NVRTC batch, holding up the library's own
    /// loading; through NVRTC they join its parallel batch (call 6: 0.30-0.41 s again).
    pub(crate) fn cpp_caps(&self) -> render::CudaCaps {
        render::CudaCaps { ptx: false, ..self.cuda_caps.clone() }
    }
}

impl Backend for CudaBackend {
    fn name(&self) -> &str {
        "cuda"
    }

    fn device_name(&self) -> String {
        self.dev.info().description()
    }

    fn caps(&self) -> &Capabilities {
        &self.caps
    }

    /// [`crate::cost::CudaCostModel`]: the default model's thresholds, implicit GEMM on tensor
    /// cores.
    fn cost_model(&self) -> Arc<dyn sinter_core::schedule::CostModel> {
        Arc::new(crate::cost::CudaCostModel::new(self.dev.info().cc))
    }

    fn serves_extents(&self) -> bool {
        true
    }

    fn calibrate(&self, _copy_bytes: u64) -> Result<Option<sinter_core::backend::DeviceCeilings>, BackendError> {
        let c = CudaBackend::calibrate(self)?;
        Ok(Some(sinter_core::backend::DeviceCeilings {
            copy_gbps: c.copy_gbps,
            copy_bytes: c.copy_bytes,
            launch_overhead_us: c.launch_overhead_us,
        }))
    }

    /// [`Device::matmul_peaks`]: cuBLASLt's rate per compute type the device has.
    fn calibrate_matmul(&self) -> Result<Vec<sinter_core::backend::MatmulPeak>, BackendError> {
        self.dev.matmul_peaks()
    }

    fn upload(&self, t: &HostTensor) -> Result<DeviceTensor, BackendError> {
        let bytes = t.le_bytes();
        let what = format!("upload of a {}{:?} tensor", t.dtype(), t.shape);
        let buf = self.dev.upload_bytes(&bytes, &what)?;
        DeviceTensor::new(t.dtype(), t.shape.clone(), Arc::new(buf))
    }

    fn load(&self, program: &Program, mode: Mode) -> Result<Box<dyn Executable>, BackendError> {
        self.load_with(program, &LoadOptions::mode(mode))
    }

    fn load_with(&self, program: &Program, opts: &LoadOptions) -> Result<Box<dyn Executable>, BackendError> {
        Ok(Box::new(self.load_cuda(program, opts)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_without_a_driver_is_a_clean_no_device_error() {
        // On a machine with a GPU this opens it; without one it must fail cleanly, never panic.
        match CudaBackend::new() {
            Ok(b) => assert_eq!(b.name(), "cuda"),
            Err(e) => {
                assert!(matches!(e, BackendError::NoDevice(_)), "{e:?}");
                let m = e.to_string();
                assert!(
                    m.contains("libcuda") || m.contains("GPU") || m.contains("libnvrtc") || m.contains("device"),
                    "{m}"
                );
            }
        }
    }

    #[test]
    fn capabilities_of_a_hopper() {
        let info = DeviceInfo::h100();
        let c = capabilities(&info);
        assert_eq!((c.backend.as_str(), c.max_workgroup_size, c.max_shared_bytes), ("cuda", 1024, 48 * 1024));
        assert_eq!(
            (c.max_bindings, c.max_binding_bytes, c.subgroup_size, c.compute_units),
            (64, u64::MAX, Some(32), 132)
        );
        assert_eq!(c.dtypes, DType::ALL.to_vec());
        // (Generic attention follows what this build compiled ahead of time.)
        let generic = crate::aot::available(&crate::nvrtc::Target::hopper()) > 0;
        assert_eq!(cuda_caps(&info), CudaCaps { generic_attention: generic, ..CudaCaps::hopper() });
        assert_eq!(info.key(), "nvidia-h100-80gb-hbm3-sm90-drv13000");
        assert_eq!(info.description(), "NVIDIA H100 80GB HBM3 (sm_90, 132 SMs, 80.0 GiB, driver 13.0)");
        let caps = CudaCaps::hopper();
        assert!(plausible_tuning(&Tuning::default(), &caps));
        assert!(plausible_tuning(&Tuning { block: Some(256), ..Tuning::default() }, &caps));
        for bad in [0, 1, 2, 4, 7, 16, 48, 96 * 32] {
            assert!(!plausible_tuning(&Tuning { block: Some(bad), ..Tuning::default() }, &caps), "{bad}");
        }
        let tile = render::MatmulTile { bm: 64, bn: 64, bk: 8, tm: 4, tn: 4 };
        assert_eq!(
            plausible_tuning(&Tuning { tile: Some(tile), ..Tuning::default() }, &caps),
            render::check_tile(&tile, &caps, DType::F32).is_ok()
        );
        let zero = render::MatmulTile { bm: 0, ..tile };
        assert!(!plausible_tuning(&Tuning { tile: Some(zero), ..Tuning::default() }, &caps));
    }
}
