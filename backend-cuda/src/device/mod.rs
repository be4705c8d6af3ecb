//! The CUDA device layer: one context per device, streams, a caching allocator, modules and
//! launches, events, CUDA graphs and calibration. Everything the backend needs from the driver,
//! with every failure a [`BackendError`] naming the driver call and what it was for (never a
//! panic: [`Device::new`] checks for libcuda with [`crate::probe::driver`] before cudarc is
//! touched, since cudarc panics when the library is absent).
//!
//! * [`Device`]: the primary context of one GPU, its [`DeviceInfo`], the allocation [`Pool`] and
//!   an upload stream. Cheap to clone (shared).
//! * [`Stream`]: a non-blocking stream with an id the pool keys its free lists by.
//! * [`CudaBuffer`]: a pooled allocation, the [`sinter_core::backend::DeviceBuffer`] of this
//!   backend; dropping it returns the block to the pool (see [`pool`] for the stream rules).
//! * [`Launch`]: a loaded kernel with its launch shape and a prebuilt `void**` parameter array
//!   (arguments are patched in place; launching is one `cuLaunchKernel`).
//! * [`Graph`]: a captured and instantiated CUDA graph, replayed with one `cuGraphLaunch`.
//! * [`Device::calibrate`]: copy bandwidth and launch overhead, for roofline ceilings;
//!   [`Device::matmul_peaks`]: the cuBLASLt product peak per compute type (f32, TF32, f16, bf16,
//!   fp8), the measured peaks contraction kernels are compared with.
//! * [`blas::GemmPlan`]: a cuBLASLt product (descriptors, heuristic algorithms, workspace).
//!
//! The hot paths call the driver through cudarc's `sys` layer (no per-call allocation, no event
//! tracking); setup uses cudarc's safe types (context, streams, modules, events, graphs).

pub mod blas;
mod buffer;
mod calibrate;
pub mod dnn;
mod graph;
mod launch;
pub mod peaks;
pub mod pool;
pub mod shared;
pub mod tma;

pub use buffer::{CudaBuffer, L2Clear, Pool, Stream};
pub use calibrate::CudaCalibration;
pub use graph::Graph;
pub use launch::{FuncAttributes, Launch, TimingEvents};
pub use pool::PoolStats;

use cudarc::driver::sys;
use cudarc::driver::{CudaContext, CudaFunction, CudaModule, DriverError, result};
use serde::{Deserialize, Serialize};
use sinter_core::backend::BackendError;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

/// The driver's name for an error code (`CUDA_ERROR_OUT_OF_MEMORY`) and its description.
pub fn describe_driver_error(e: DriverError) -> String {
    let name = e.error_name().map(|c| c.to_string_lossy().into_owned()).unwrap_or_else(|_| format!("{:?}", e.0));
    match e.error_string() {
        Ok(s) => format!("{name}: {}", s.to_string_lossy()),
        Err(_) => name,
    }
}

/// A driver error as a [`BackendError`] naming the call and what it was for (a kernel, a buffer):
/// `OutOfMemory` for `CUDA_ERROR_OUT_OF_MEMORY`, `Device` otherwise.
pub fn driver_error(call: &str, what: &str, e: DriverError) -> BackendError {
    let msg = format!("{call} ({what}): {}", describe_driver_error(e));
    if e.0 == sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY {
        BackendError::OutOfMemory(msg)
    } else {
        BackendError::Device(msg)
    }
}

/// `Ok` for `CUBLAS_STATUS_SUCCESS`, else a [`BackendError`] naming the cuBLASLt call.
pub(crate) fn check_blas(r: cudarc::cublaslt::sys::cublasStatus_t, call: &str) -> Result<(), BackendError> {
    r.result().map_err(|e| BackendError::Device(format!("{call}: {e:?}")))
}

/// `Ok` for `CUDA_SUCCESS`, else [`driver_error`].
pub(crate) fn check(r: sys::CUresult, call: &str, what: &str) -> Result<(), BackendError> {
    r.result().map_err(|e| driver_error(call, what, e))
}

/// What the device is and can do.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DeviceInfo {
    /// Device ordinal.
    pub ordinal: usize,
    /// Marketing name (`NVIDIA H100 80GB HBM3`).
    pub name: String,
    /// Compute capability (major, minor).
    pub cc: (u32, u32),
    /// Driver API version (`13000` is CUDA 13.0).
    pub driver_version: i32,
    /// Streaming multiprocessors.
    pub sm_count: u32,
    /// Max threads per block.
    pub max_threads_per_block: u32,
    /// Shared memory per block without opt-in, bytes.
    pub max_shared_per_block: u32,
    /// Shared memory per block with opt-in, bytes.
    pub max_shared_per_block_optin: u32,
    /// Device memory, bytes.
    pub total_mem_bytes: u64,
    /// L2 cache, bytes.
    pub l2_bytes: u32,
}

impl DeviceInfo {
    /// An H100 SXM (80 GB HBM3, driver 13.0) as the driver describes it, for planning without a
    /// GPU (`examples/cuda_compile_profile.rs`) and tests.
    pub fn h100() -> DeviceInfo {
        DeviceInfo {
            ordinal: 0,
            name: "NVIDIA H100 80GB HBM3".into(),
            cc: (9, 0),
            driver_version: 13000,
            sm_count: 132,
            max_threads_per_block: 1024,
            max_shared_per_block: 48 * 1024,
            max_shared_per_block_optin: 227 * 1024,
            total_mem_bytes: 80 << 30,
            l2_bytes: 50 << 20,
        }
    }

    /// The driver version as `major.minor`.
    pub fn driver_string(&self) -> String {
        format!("{}.{}", self.driver_version / 1000, (self.driver_version % 1000) / 10)
    }

    /// A file-name-safe key naming the GPU, its architecture and the driver (autotuning and
    /// calibration caches): `nvidia-h100-80gb-hbm3-sm90-drv13000`.
    pub fn key(&self) -> String {
        let mut slug = String::new();
        for c in self.name.chars() {
            if c.is_ascii_alphanumeric() {
                slug.push(c.to_ascii_lowercase());
            } else if !slug.ends_with('-') && !slug.is_empty() {
                slug.push('-');
            }
        }
        let slug = slug.trim_end_matches('-');
        format!("{slug}-sm{}{}-drv{}", self.cc.0, self.cc.1, self.driver_version)
    }

    /// `NVIDIA H100 80GB HBM3 (sm_90, 132 SMs, 79.2 GiB, driver 13.0)`.
    pub fn description(&self) -> String {
        format!(
            "{} (sm_{}{}, {} SMs, {:.1} GiB, driver {})",
            self.name,
            self.cc.0,
            self.cc.1,
            self.sm_count,
            self.total_mem_bytes as f64 / (1u64 << 30) as f64,
            self.driver_string()
        )
    }
}

struct Inner {
    // Field order is drop order: the upload stream returns its blocks before the pool goes.
    upload: Arc<Stream>,
    pool: Arc<Pool>,
    info: DeviceInfo,
    /// Loaded modules by the blake3 digest of their image, while some function of theirs lives:
    /// the kernels NVRTC compiled in one translation unit share one cubin, loaded once.
    modules: shared::Shared<[u8; 32], CudaModule>,
    ctx: Arc<CudaContext>,
}

/// One GPU: its primary context, what it is, the caching allocator and an upload stream. Clones
/// share everything.
#[derive(Clone)]
pub struct Device {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Device({})", self.inner.info.description())
    }
}

static NEXT_STREAM_ID: AtomicU64 = AtomicU64::new(1);

fn no_device(what: &str, e: DriverError) -> BackendError {
    BackendError::NoDevice(format!("{what}: {}", describe_driver_error(e)))
}

/// The devices opened in this process, so every backend on one GPU shares its pool and streams
/// (and tensors of one backend are inputs of another).
static OPEN: Mutex<Vec<(usize, Weak<Inner>)>> = Mutex::new(Vec::new());

impl Device {
    /// Opens GPU `ordinal` (or returns the handle already open in this process). Without libcuda,
    /// without a GPU, or when the driver refuses, the error is [`BackendError::NoDevice`] naming
    /// what is missing.
    pub fn new(ordinal: usize) -> Result<Device, BackendError> {
        let mut open = OPEN.lock().unwrap_or_else(|p| p.into_inner());
        open.retain(|(_, w)| w.strong_count() > 0);
        if let Some(inner) = open.iter().find(|(o, _)| *o == ordinal).and_then(|(_, w)| w.upgrade()) {
            return Ok(Device { inner });
        }
        let dev = Self::open(ordinal)?;
        open.push((ordinal, Arc::downgrade(&dev.inner)));
        Ok(dev)
    }

    /// Opens GPU `ordinal` with a pool and upload stream of its own (not shared with
    /// [`Device::new`]'s handle): tensors of the two cannot be mixed.
    pub fn open(ordinal: usize) -> Result<Device, BackendError> {
        crate::probe::driver().map_err(|e| BackendError::NoDevice(format!("the CUDA driver (libcuda): {e}")))?;
        result::init().map_err(|e| no_device("cuInit", e))?;
        let count = result::device::get_count().map_err(|e| no_device("cuDeviceGetCount", e))?;
        if count <= 0 {
            return Err(BackendError::NoDevice("the CUDA driver found no GPU".into()));
        }
        if ordinal >= count as usize {
            return Err(BackendError::NoDevice(format!("no CUDA device {ordinal}: the driver found {count}")));
        }
        let ctx =
            CudaContext::new(ordinal).map_err(|e| no_device(&format!("cuDevicePrimaryCtxRetain({ordinal})"), e))?;
        // Buffers here are raw pooled allocations; cudarc's per-slice event tracking is not used.
        unsafe { ctx.disable_event_tracking() };
        let attr = |a: sys::CUdevice_attribute| {
            ctx.attribute(a)
                .map(|v| v.max(0) as u32)
                .map_err(|e| driver_error("cuDeviceGetAttribute", &format!("{a:?}"), e))
        };
        use sys::CUdevice_attribute as A;
        let mut driver_version = 0i32;
        check(unsafe { sys::cuDriverGetVersion(&mut driver_version) }, "cuDriverGetVersion", "device info")?;
        let (major, minor) =
            ctx.compute_capability().map_err(|e| driver_error("cuDeviceGetAttribute", "compute capability", e))?;
        let info = DeviceInfo {
            ordinal,
            name: ctx.name().map_err(|e| driver_error("cuDeviceGetName", "device info", e))?,
            cc: (major.max(0) as u32, minor.max(0) as u32),
            driver_version,
            sm_count: attr(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
            max_threads_per_block: attr(A::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
            max_shared_per_block: attr(A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK)?,
            max_shared_per_block_optin: attr(A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?,
            total_mem_bytes: ctx.total_mem().map_err(|e| driver_error("cuDeviceTotalMem", "device info", e))? as u64,
            l2_bytes: attr(A::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)?,
        };
        let pool = Arc::new(Pool::new(ctx.clone(), info.total_mem_bytes));
        let upload = Self::make_stream(&ctx, &pool)?;
        Ok(Device { inner: Arc::new(Inner { upload, pool, info, modules: shared::Shared::default(), ctx }) })
    }

    fn make_stream(ctx: &Arc<CudaContext>, pool: &Arc<Pool>) -> Result<Arc<Stream>, BackendError> {
        let raw = ctx.new_stream().map_err(|e| driver_error("cuStreamCreate", "new stream", e))?;
        Ok(Arc::new(Stream::new(raw, NEXT_STREAM_ID.fetch_add(1, Ordering::Relaxed), pool.clone())))
    }

    /// What the device is.
    pub fn info(&self) -> &DeviceInfo {
        &self.inner.info
    }

    /// The cudarc context.
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.inner.ctx
    }

    /// The caching allocator.
    pub fn pool(&self) -> &Arc<Pool> {
        &self.inner.pool
    }

    /// Makes the context current on the calling thread (every entry point calls this first).
    #[inline]
    pub fn bind(&self) -> Result<(), BackendError> {
        self.inner.ctx.bind_to_thread().map_err(|e| driver_error("cuCtxSetCurrent", "bind context", e))
    }

    /// A new non-blocking stream.
    pub fn new_stream(&self) -> Result<Arc<Stream>, BackendError> {
        self.bind()?;
        Self::make_stream(&self.inner.ctx, &self.inner.pool)
    }

    /// Copies host bytes into a new pooled buffer (on the upload stream, waited for: the buffer is
    /// ready for any stream when this returns).
    pub fn upload_bytes(&self, bytes: &[u8], what: &str) -> Result<CudaBuffer, BackendError> {
        self.bind()?;
        let s = &self.inner.upload;
        let mut buf = s.alloc(bytes.len() as u64)?;
        if !bytes.is_empty() {
            check(
                unsafe { sys::cuMemcpyHtoDAsync_v2(buf.ptr(), bytes.as_ptr().cast(), bytes.len(), s.cu()) },
                "cuMemcpyHtoDAsync",
                what,
            )?;
        }
        s.synchronize(what)?;
        buf.mark_ready();
        Ok(buf)
    }

    /// Loads a cubin (once while any function of it is alive: an image already loaded is
    /// reused) and returns its kernel `name`.
    pub fn load_function(&self, image: &[u8], name: &str) -> Result<CudaFunction, BackendError> {
        if name.contains('\0') {
            return Err(BackendError::Device(format!("kernel name {name:?} contains a NUL byte")));
        }
        self.bind()?;
        let what = format!("kernel {name}");
        let module = self.inner.modules.get_or_make(*blake3::hash(image).as_bytes(), || {
            self.inner
                .ctx
                .load_module(cudarc::nvrtc::Ptx::from_binary(image.to_vec()))
                .map_err(|e| driver_error("cuModuleLoadData", &what, e))
        })?;
        module.load_function(name).map_err(|e| driver_error("cuModuleGetFunction", &what, e))
    }

    /// Loads the modules of `images` side by side, one thread each up to `threads` (each binds
    /// the context): for PTX images, whose loads are the driver's JIT. The modules stay loaded
    /// while the returned handles (or functions of theirs) live; [`Device::load_function`] then
    /// finds them. A load runs this beside its NVRTC batch, so the JIT overlaps NVRTC's work;
    /// the threads gain little among themselves (the driver assembled three modules on three
    /// threads in the time of one after another: session 37, call 4).
    pub fn preload_modules(&self, images: &[&[u8]], threads: usize) -> Vec<Result<Arc<CudaModule>, BackendError>> {
        sinter_core::par::map(images, threads, |image| {
            self.bind()?;
            self.inner.modules.get_or_make_unlocked(*blake3::hash(image).as_bytes(), || {
                self.inner
                    .ctx
                    .load_module(cudarc::nvrtc::Ptx::from_binary(image.to_vec()))
                    .map_err(|e| driver_error("cuModuleLoadData", "a PTX module", e))
            })
        })
    }

    /// Waits for all work on the device.
    pub fn synchronize(&self) -> Result<(), BackendError> {
        self.bind()?;
        check(unsafe { sys::cuCtxSynchronize() }, "cuCtxSynchronize", "device")
    }

    /// Free and total device memory, bytes.
    pub fn mem_info(&self) -> Result<(u64, u64), BackendError> {
        self.bind()?;
        let (mut free, mut total) = (0usize, 0usize);
        check(unsafe { sys::cuMemGetInfo_v2(&mut free, &mut total) }, "cuMemGetInfo", "device")?;
        Ok((free as u64, total as u64))
    }
}
