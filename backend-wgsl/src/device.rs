//! The wgpu runtime layer: adapter selection, buffers, program compilation, batched launches, GPU timing
//! and calibration.
//!
//! Everything here is the *device side* of the WGSL backend. It knows nothing of the kernel IR: the renderer
//! hands it WGSL text, the runtime hands it buffers and workgroup counts.
//!
//! # Choices, and why
//!
//! **Adapter selection.** [`Device::new`] enumerates Vulkan, Metal and DX12 adapters and takes the best by
//! kind: discrete GPU, then integrated, virtual, other, and a CPU adapter (lavapipe) last. OpenGL is tried
//! only when none of those backends has any adapter, because wgpu's GL path lacks f16, subgroups and
//! timestamps. `SINTER_ADAPTER=cpu` forces the CPU adapter; any other value picks the first adapter whose
//! name contains it (case-insensitive). When nothing fits, [`DeviceError::NoAdapter`] lists what was seen.
//!
//! **Limits and features.** A wgpu device gets only the limits it asks for, and the WebGPU defaults are
//! small (128 MiB per storage binding, 8 storage buffers per stage), so the device requests
//! `adapter.limits()` in full, and every feature among f16, subgroups, timestamps (plain, inside encoders,
//! inside passes), pipeline caches, immediates and cooperative matrices that the adapter has. Cooperative
//! matrices are experimental in wgpu 30 and are enabled (with `ExperimentalFeatures`) only when the adapter
//! reports them. [`AdapterInfo`] records the result; it is serialisable for artifacts and has a stable
//! [`AdapterInfo::cache_key`] for on-disk caches.
//!
//! **Errors never panic.** wgpu reports most failures asynchronously through error scopes, and panics on an
//! uncaptured error by default. Every call here that can fail on the device runs inside out-of-memory,
//! validation and internal error scopes and turns what they catch into a [`DeviceError`]; an uncaptured
//! error handler records (and logs) anything else instead of panicking ([`Device::take_uncaptured_errors`]).
//! Allocation sizes are checked against `max_buffer_size` first, and a lost device turns every later call
//! into [`DeviceError::Lost`].
//!
//! **Trusted shader modules.** [`Device::compile`] validates WGSL with naga first, with the capabilities
//! of this device's features (the same mapping wgpu validates with), so a bad shader is a
//! [`DeviceError::InvalidShader`] with naga's diagnostic pointing at the line, not a panic. The parsed
//! module is then handed to wgpu as naga IR (no second parse) through `create_shader_module_trusted` with
//! `ShaderRuntimeChecks::unchecked()`: wgpu's default runtime checks (index clamping, loop bounding) cost up
//! to 100x in hot loops (gfx-rs/wgpu#7698), and sinter's renderer proves its indices in range instead.
//! [`DeviceOptions::checked_shaders`] (or `SINTER_CHECKED_SHADERS=1`, or [`ProgramOptions::checked`]) turns
//! the checks back on for debugging an out-of-bounds suspicion. Pipelines are cached in memory by a hash of
//! the source, entry point and options; on Vulkan the driver's pipeline cache is persisted under the cache
//! directory, keyed by the adapter's cache key, behind a header with a length and a BLAKE3 hash so a
//! corrupt or truncated file is detected and rebuilt, never handed to the driver.
//!
//! **Bindings above the limit.** One storage binding is capped at `max_storage_buffer_binding_size`
//! (128 MiB on lavapipe, 2 GiB - 1 on NVIDIA) even when a buffer is larger (up to `max_buffer_size`,
//! 2 GiB - 1 on lavapipe). Buffers can be bound at an offset and size ([`GpuBuffer::range`]); a binding
//! over the limit is rejected with [`DeviceError::BindingTooLarge`]. The renderer binds a larger kernel
//! argument as several windows of its buffer in one dispatch (split bindings, see [`crate::render`]);
//! [`plan_chunks`] / [`Device::plan_chunks`] split a tensor into aligned ranges for tools that dispatch
//! once per chunk (calibration). [`DeviceOptions::max_binding_bytes`] (or `SINTER_WGSL_MAX_BINDING`) lowers
//! the limit the device is created with, so wgpu itself checks every binding against the lower limit:
//! the tests use it to run every kernel kind across windows on small tensors.
//!
//! **Batching.** Each `queue.submit` plus completion wait costs about 0.1 ms even on an H200, more than most
//! fused kernels take. A [`Batch`] records many dispatches (and copies) and encodes them into one command
//! encoder and one submit; this is what the `reduce-overhead` mode uses. [`Batch::finish`] builds the bind
//! groups and uniform data once and returns a [`RecordedBatch`] that can be replayed many times with only
//! the encoding cost, the nearest wgpu gets to a CUDA graph. Untimed dispatches share compute passes (wgpu
//! inserts the barriers that order dependent dispatches within a pass); copies split passes.
//!
//! **Workgroup counts.** A dispatch needs at most `max_compute_workgroups_per_dimension` (65535) per
//! dimension. [`Workgroups::Linear`] counts above it are spread over y and z by [`spread_workgroups`],
//! possibly with a few extra workgroups. The convention every kernel follows (see
//! [`LINEAR_WORKGROUP_ID_WGSL`]) is to compute its linear workgroup id as
//! `wg.x + num_workgroups.x * (wg.y + num_workgroups.y * wg.z)` and to guard against its own element or
//! tile count, so the extra workgroups do nothing.
//!
//! **Timestamps.** With [`Batch::timed`], each dispatch gets its own compute pass with timestamp writes at
//! its start and end (this needs only `TIMESTAMP_QUERY`). The query sets are resolved into a buffer in the
//! same submit, read back after completion, and converted to nanoseconds with
//! `queue.get_timestamp_period()`. Devices without timestamps still run the batch and report host wall
//! time only. Timing separates passes, which adds a little overhead, so untimed runs are what production
//! uses.
//!
//! **Calibration.** [`Device::measure_copy_bandwidth`] times a `vec4<f32>` copy kernel (vec4 access reached
//! 94% of the CUDA copy on an H200; scalar access only 53%), counting bytes read plus written, median over
//! iterations; [`Device::measure_launch_overhead`] measures one submit round trip and the per-dispatch cost
//! inside a batch. Both feed `sinter calibrate`.

mod batch;
mod buffer;
mod calibrate;
mod info;
mod pipeline_cache;
mod program;

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

pub use batch::{Arg, Batch, BatchTiming, LINEAR_WORKGROUP_ID_WGSL, RecordedBatch, Workgroups, spread_workgroups};
pub use buffer::{BufferRange, Chunk, GpuBuffer, plan_chunks};
pub use calibrate::{Bandwidth, LaunchOverhead, TimingSource};
pub use info::{AdapterInfo, CoopMatrixShape, LimitsSummary};
pub use pipeline_cache::PipelineCacheStatus;
pub use program::{BindingInfo, BindingKind, LayoutMode, Program, ProgramOptions, validate_wgsl};

/// Environment variable that selects the adapter: `cpu`, or a case-insensitive part of its name.
pub const ENV_ADAPTER: &str = "SINTER_ADAPTER";
/// Environment variable naming the cache directory (default: `~/.cache/sinter`).
pub const ENV_CACHE_DIR: &str = "SINTER_CACHE_DIR";
/// Environment variable that, when `1`, compiles every shader with wgpu's runtime bounds checks.
pub const ENV_CHECKED_SHADERS: &str = "SINTER_CHECKED_SHADERS";
/// Environment variable lowering the storage binding limit (`max_storage_buffer_binding_size`) the device
/// is created with, in bytes (see [`DeviceOptions::max_binding_bytes`]); it can only lower the limit.
pub const ENV_MAX_BINDING: &str = "SINTER_WGSL_MAX_BINDING";

/// Errors of the wgpu runtime layer.
#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    /// No adapter matched the request.
    #[error("no usable GPU adapter ({wanted}); adapters seen: {}", if seen.is_empty() { "none".to_string() } else { seen.join("; ") })]
    NoAdapter {
        /// What was asked for (`SINTER_ADAPTER`'s value, or "any").
        wanted: String,
        /// One line per adapter seen: name, device type, backend, driver.
        seen: Vec<String>,
    },
    /// The adapter refused to create a device.
    #[error("requesting a device from adapter `{adapter}` failed: {message}")]
    RequestDevice {
        /// Adapter name.
        adapter: String,
        /// wgpu's reason.
        message: String,
    },
    /// The device was lost (driver reset, removal, or destroyed); it cannot be used any more.
    #[error("the GPU device was lost: {0}")]
    Lost(String),
    /// An allocation did not fit: above `max_buffer_size`, or the driver ran out of memory.
    #[error("out of memory allocating {requested} bytes for `{label}`: {message}")]
    OutOfMemory {
        /// Buffer label.
        label: String,
        /// Bytes requested.
        requested: u64,
        /// Which limit was hit, or the driver's message.
        message: String,
    },
    /// A buffer range bound to a shader exceeds `max_storage_buffer_binding_size` (or the uniform limit).
    #[error(
        "binding of {size} bytes of buffer `{label}` exceeds the device's {limit_name} of {limit} bytes; \
         split it with Device::plan_chunks and bind ranges"
    )]
    BindingTooLarge {
        /// Buffer label.
        label: String,
        /// Bytes in the binding.
        size: u64,
        /// The limit.
        limit: u64,
        /// The limit's wgpu name.
        limit_name: &'static str,
    },
    /// Arguments that break this API's contract (misaligned offsets, wrong argument count, ...).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// More workgroups than can be dispatched, even spread over three dimensions.
    #[error("cannot dispatch {requested} workgroups: the device allows {max_per_dimension} per dimension")]
    TooManyWorkgroups {
        /// Workgroups asked for (linear count, or the largest grid dimension).
        requested: u64,
        /// `max_compute_workgroups_per_dimension`.
        max_per_dimension: u32,
    },
    /// The WGSL did not parse or validate; `message` is naga's diagnostic with the line.
    #[error("invalid WGSL in `{label}`{}: {message}", line.map(|l| format!(" at line {l}")).unwrap_or_default())]
    InvalidShader {
        /// Program label.
        label: String,
        /// 1-based line of the first error, when naga knows it.
        line: Option<u32>,
        /// naga's rendered diagnostic (with the offending line quoted).
        message: String,
        /// The WGSL source.
        wgsl: String,
    },
    /// The shader is valid WGSL but uses something this runtime does not bind (textures, groups above 0).
    #[error("shader `{label}` is not supported by the sinter runtime: {message}")]
    UnsupportedShader {
        /// Program label.
        label: String,
        /// What is unsupported.
        message: String,
    },
    /// The requested entry point is not a compute entry point of the module.
    #[error("shader `{label}` has no compute entry point `{entry}` (compute entry points: {})", available.join(", "))]
    EntryPointNotFound {
        /// Program label.
        label: String,
        /// Entry point asked for.
        entry: String,
        /// Compute entry points present.
        available: Vec<String>,
    },
    /// wgpu reported a validation error (a bug in how this crate or its caller used the API).
    #[error("wgpu validation error in {context}: {message}")]
    Validation {
        /// The operation.
        context: String,
        /// wgpu's description.
        message: String,
    },
    /// wgpu reported an internal error (a driver or backend failure).
    #[error("wgpu internal error in {context}: {message}")]
    Internal {
        /// The operation.
        context: String,
        /// wgpu's description.
        message: String,
    },
    /// Mapping a buffer for reading failed.
    #[error("mapping buffer `{label}` for reading failed: {message}")]
    Map {
        /// Buffer label.
        label: String,
        /// wgpu's reason.
        message: String,
    },
    /// Waiting for the GPU failed or timed out.
    #[error("waiting for the GPU failed: {0}")]
    Poll(String),
    /// A cache file could not be read or written.
    #[error("cache I/O on {}: {error}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The I/O error (in the message, not a `source()`: reporters print it once).
        error: std::io::Error,
    },
}

/// Options for [`Device::new`].
#[derive(Clone, Debug)]
pub struct DeviceOptions {
    /// Adapter selection: `cpu`, or part of the adapter name. `None` reads `SINTER_ADAPTER`; when that is
    /// unset or empty the best adapter is taken (discrete > integrated > virtual > other > CPU).
    pub adapter: Option<String>,
    /// Compile shaders with wgpu's runtime checks (bounds clamping, loop bounding). Slow; for debugging.
    /// `SINTER_CHECKED_SHADERS=1` also turns this on.
    pub checked_shaders: bool,
    /// Persist the driver's pipeline cache on disk where the backend supports it (Vulkan).
    pub pipeline_cache: bool,
    /// Cache directory. `None` reads `SINTER_CACHE_DIR`, then falls back to `~/.cache/sinter`.
    pub cache_dir: Option<PathBuf>,
    /// Try OpenGL when no Vulkan/Metal/DX12 adapter exists (no f16, no subgroups, no timestamps there).
    pub allow_gl: bool,
    /// Features never to request even when the adapter has them (to test fallbacks).
    pub disabled_features: wgpu::Features,
    /// Create the device with a storage binding limit of at most this many bytes (rounded down to a
    /// multiple of 4, at least 4) instead of the adapter's, to test split bindings on small tensors; never
    /// raises the limit. `None` reads `SINTER_WGSL_MAX_BINDING` (a byte count; unset, empty or unparsable:
    /// the adapter's limit).
    pub max_binding_bytes: Option<u64>,
}

impl Default for DeviceOptions {
    fn default() -> Self {
        Self {
            adapter: None,
            checked_shaders: false,
            pipeline_cache: true,
            cache_dir: None,
            allow_gl: true,
            disabled_features: wgpu::Features::empty(),
            max_binding_bytes: None,
        }
    }
}

/// Features requested whenever the adapter has them.
fn wanted_features() -> wgpu::Features {
    use wgpu::Features as F;
    F::SHADER_F16
        | F::SUBGROUP
        | F::SUBGROUP_BARRIER
        | F::TIMESTAMP_QUERY
        | F::TIMESTAMP_QUERY_INSIDE_ENCODERS
        | F::TIMESTAMP_QUERY_INSIDE_PASSES
        | F::PIPELINE_CACHE
        | F::IMMEDIATES
        | F::EXPERIMENTAL_COOPERATIVE_MATRIX
}

/// A GPU (or CPU adapter) ready to allocate, compile and run. Cheap to clone: clones share the device.
#[derive(Clone)]
pub struct Device {
    inner: Arc<Inner>,
}

/// Shared state of a [`Device`].
struct Inner {
    /// Kept alive for the adapter's and device's lifetime.
    _instance: wgpu::Instance,
    adapter: wgpu::Adapter,
    device: wgpu::Device,
    queue: wgpu::Queue,
    info: AdapterInfo,
    limits: wgpu::Limits,
    features: wgpu::Features,
    downlevel: wgpu::DownlevelFlags,
    checked_shaders: bool,
    lost: Arc<Mutex<Option<String>>>,
    uncaptured: Arc<Mutex<Vec<String>>>,
    programs: Mutex<std::collections::HashMap<[u8; 32], Program>>,
    disk_cache: pipeline_cache::DiskPipelineCache,
    /// Set when a pipeline was created since the disk cache was last saved.
    cache_dirty: AtomicBool,
}

impl Drop for Inner {
    fn drop(&mut self) {
        if self.cache_dirty.load(std::sync::atomic::Ordering::Relaxed)
            && let Err(e) = self.disk_cache.save()
        {
            tracing::warn!("could not save the pipeline cache: {e}");
        }
    }
}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Device")
            .field("adapter", &self.inner.info.name)
            .field("backend", &self.inner.info.backend)
            .field("features", &self.inner.features)
            .finish_non_exhaustive()
    }
}

/// Rank of a device type: lower is preferred.
fn type_rank(t: wgpu::DeviceType) -> u8 {
    match t {
        wgpu::DeviceType::DiscreteGpu => 0,
        wgpu::DeviceType::IntegratedGpu => 1,
        wgpu::DeviceType::VirtualGpu => 2,
        wgpu::DeviceType::Other => 3,
        wgpu::DeviceType::Cpu => 4,
    }
}

/// One line describing an adapter, for [`DeviceError::NoAdapter`] and logs.
fn describe(info: &wgpu::AdapterInfo) -> String {
    format!("{} ({:?}, {:?}, driver {} {})", info.name, info.device_type, info.backend, info.driver, info.driver_info)
}

/// Picks an adapter per `wanted` (None: best by type; "cpu": the CPU adapter; else a name substring).
fn pick(adapters: Vec<wgpu::Adapter>, wanted: Option<&str>) -> Option<wgpu::Adapter> {
    match wanted {
        Some(w) if w.eq_ignore_ascii_case("cpu") => {
            adapters.into_iter().find(|a| a.get_info().device_type == wgpu::DeviceType::Cpu)
        }
        Some(w) => {
            let w = w.to_lowercase();
            adapters.into_iter().find(|a| a.get_info().name.to_lowercase().contains(&w))
        }
        None => {
            let mut best: Option<(u8, wgpu::Adapter)> = None;
            for a in adapters {
                let r = type_rank(a.get_info().device_type);
                if best.as_ref().is_none_or(|(br, _)| r < *br) {
                    best = Some((r, a));
                }
            }
            best.map(|(_, a)| a)
        }
    }
}

impl Device {
    /// Selects an adapter and creates a device with its full limits and every useful feature it has.
    ///
    /// Never panics: no adapter gives [`DeviceError::NoAdapter`] listing the adapters seen.
    pub fn new(opts: DeviceOptions) -> Result<Device, DeviceError> {
        let wanted = opts
            .adapter
            .clone()
            .or_else(|| std::env::var(ENV_ADAPTER).ok())
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty());
        let primary = wgpu::Backends::VULKAN | wgpu::Backends::METAL | wgpu::Backends::DX12;
        let mut seen = Vec::new();
        let mut chosen = None;
        let mut any_primary = false;
        for backends in [primary, wgpu::Backends::GL] {
            if backends == wgpu::Backends::GL && (!opts.allow_gl || any_primary && wanted.is_none()) {
                break;
            }
            let mut desc = wgpu::InstanceDescriptor::new_without_display_handle_from_env();
            desc.backends = backends;
            desc.memory_budget_thresholds =
                wgpu::MemoryBudgetThresholds { for_resource_creation: Some(95), for_device_loss: None };
            let instance = wgpu::Instance::new(desc);
            let adapters = pollster::block_on(instance.enumerate_adapters(backends));
            any_primary |= backends == primary && !adapters.is_empty();
            seen.extend(adapters.iter().map(|a| describe(&a.get_info())));
            if let Some(a) = pick(adapters, wanted.as_deref()) {
                chosen = Some((instance, a));
                break;
            }
        }
        let Some((instance, adapter)) = chosen else {
            return Err(DeviceError::NoAdapter { wanted: wanted.unwrap_or_else(|| "any".to_string()), seen });
        };
        let wgpu_info = adapter.get_info();
        tracing::info!("selected adapter {}", describe(&wgpu_info));

        let features = adapter.features() & wanted_features() & !opts.disabled_features;
        let experimental = if features.contains(wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX) {
            // SAFETY: only cooperative matrices, reported by the adapter itself, are enabled; sinter uses
            // them only through naga-validated WGSL.
            unsafe { wgpu::ExperimentalFeatures::enabled() }
        } else {
            wgpu::ExperimentalFeatures::disabled()
        };
        let mut limits = adapter.limits();
        let lowered = opts
            .max_binding_bytes
            .or_else(|| std::env::var(ENV_MAX_BINDING).ok().and_then(|v| v.trim().parse::<u64>().ok()));
        if let Some(cap) = lowered {
            let cap = (cap / 4 * 4).max(4);
            if cap < limits.max_storage_buffer_binding_size {
                tracing::info!(
                    "storage binding limit lowered from {} to {cap} bytes ({ENV_MAX_BINDING} or DeviceOptions)",
                    limits.max_storage_buffer_binding_size
                );
                limits.max_storage_buffer_binding_size = cap;
            }
        }
        let desc = wgpu::DeviceDescriptor {
            label: Some("sinter"),
            required_features: features,
            required_limits: limits.clone(),
            experimental_features: experimental,
            memory_hints: wgpu::MemoryHints::Performance,
            trace: wgpu::Trace::Off,
        };
        let (device, queue) = pollster::block_on(adapter.request_device(&desc))
            .map_err(|e| DeviceError::RequestDevice { adapter: wgpu_info.name.clone(), message: e.to_string() })?;

        let uncaptured = Arc::new(Mutex::new(Vec::new()));
        let sink = uncaptured.clone();
        device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
            tracing::error!("uncaptured wgpu error: {e}");
            if let Ok(mut v) = sink.lock()
                && v.len() < 256
            {
                v.push(e.to_string());
            }
        }));
        let lost = Arc::new(Mutex::new(None));
        let lost_sink = lost.clone();
        device.set_device_lost_callback(move |reason, msg| {
            if reason != wgpu::DeviceLostReason::Destroyed {
                tracing::error!("GPU device lost ({reason:?}): {msg}");
            }
            if let Ok(mut l) = lost_sink.lock() {
                *l = Some(format!("{reason:?}: {msg}"));
            }
        });

        let info = AdapterInfo::new(&adapter, features, &limits, queue.get_timestamp_period());
        let checked_shaders = opts.checked_shaders || std::env::var(ENV_CHECKED_SHADERS).is_ok_and(|v| v.trim() == "1");
        let disk_cache = if opts.pipeline_cache && features.contains(wgpu::Features::PIPELINE_CACHE) {
            let dir = opts
                .cache_dir
                .clone()
                .or_else(|| std::env::var_os(ENV_CACHE_DIR).filter(|v| !v.is_empty()).map(PathBuf::from))
                .or_else(|| dirs::cache_dir().map(|d| d.join("sinter")));
            pipeline_cache::DiskPipelineCache::open(&device, dir, &info.cache_key())
        } else {
            pipeline_cache::DiskPipelineCache::disabled(if opts.pipeline_cache {
                PipelineCacheStatus::Unsupported
            } else {
                PipelineCacheStatus::Disabled
            })
        };
        let downlevel = adapter.get_downlevel_capabilities().flags;
        Ok(Device {
            inner: Arc::new(Inner {
                _instance: instance,
                adapter,
                device,
                queue,
                info,
                limits,
                features,
                downlevel,
                checked_shaders,
                lost,
                uncaptured,
                programs: Mutex::new(std::collections::HashMap::new()),
                disk_cache,
                cache_dirty: AtomicBool::new(false),
            }),
        })
    }

    /// What the adapter is and can do.
    pub fn info(&self) -> &AdapterInfo {
        &self.inner.info
    }

    /// The device's full limits (equal to the adapter's).
    pub fn limits(&self) -> &wgpu::Limits {
        &self.inner.limits
    }

    /// The features enabled on the device.
    pub fn features(&self) -> wgpu::Features {
        self.inner.features
    }

    /// The largest range of one buffer a shader can bind as storage.
    pub fn max_binding_size(&self) -> u64 {
        self.inner.limits.max_storage_buffer_binding_size
    }

    /// The underlying wgpu device (for tools that need raw access).
    pub fn wgpu_device(&self) -> &wgpu::Device {
        &self.inner.device
    }

    /// The underlying wgpu queue.
    pub fn wgpu_queue(&self) -> &wgpu::Queue {
        &self.inner.queue
    }

    /// The underlying wgpu adapter.
    pub fn wgpu_adapter(&self) -> &wgpu::Adapter {
        &self.inner.adapter
    }

    /// Errors wgpu raised outside any error scope since the last call (normally none).
    pub fn take_uncaptured_errors(&self) -> Vec<String> {
        self.inner.uncaptured.lock().map(|mut v| std::mem::take(&mut *v)).unwrap_or_default()
    }

    /// How the on-disk pipeline cache was found when the device was created.
    pub fn pipeline_cache_status(&self) -> PipelineCacheStatus {
        self.inner.disk_cache.status()
    }

    /// The pipeline cache file, when one is in use.
    pub fn pipeline_cache_path(&self) -> Option<PathBuf> {
        self.inner.disk_cache.path().map(PathBuf::from)
    }

    /// Writes the driver's pipeline cache to disk now (it is also written when the last clone of the device
    /// drops, if new pipelines were created). Returns the file written, or `None` when there is no cache.
    pub fn save_pipeline_cache(&self) -> Result<Option<PathBuf>, DeviceError> {
        let path = self.inner.disk_cache.save()?;
        self.inner.cache_dirty.store(false, std::sync::atomic::Ordering::Relaxed);
        Ok(path)
    }

    /// Waits until all submitted work has finished.
    pub fn synchronize(&self) -> Result<(), DeviceError> {
        self.check_lost()?;
        self.inner.device.poll(wgpu::PollType::wait_indefinitely()).map_err(|e| DeviceError::Poll(e.to_string()))?;
        Ok(())
    }

    /// Fails with [`DeviceError::Lost`] once the device is lost.
    pub(crate) fn check_lost(&self) -> Result<(), DeviceError> {
        match self.inner.lost.lock() {
            Ok(l) => match l.as_ref() {
                Some(msg) => Err(DeviceError::Lost(msg.clone())),
                None => Ok(()),
            },
            Err(_) => Ok(()),
        }
    }

    /// Runs `f` inside out-of-memory, validation and internal error scopes and returns the first error
    /// they caught (out-of-memory first).
    pub(crate) fn scoped<T>(&self, f: impl FnOnce() -> T) -> (T, Option<wgpu::Error>) {
        let d = &self.inner.device;
        let oom = d.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let val = d.push_error_scope(wgpu::ErrorFilter::Validation);
        let int = d.push_error_scope(wgpu::ErrorFilter::Internal);
        let out = f();
        let int = pollster::block_on(int.pop());
        let val = pollster::block_on(val.pop());
        let oom = pollster::block_on(oom.pop());
        (out, oom.or(val).or(int))
    }

    /// Like [`Device::scoped`], mapping any caught error to a [`DeviceError`] for `context`.
    pub(crate) fn checked<T>(&self, context: &str, f: impl FnOnce() -> T) -> Result<T, DeviceError> {
        self.check_lost()?;
        let (out, err) = self.scoped(f);
        match err {
            None => Ok(out),
            Some(e) => Err(map_wgpu_error(context, e)),
        }
    }
}

/// Turns a wgpu error caught by a scope into a [`DeviceError`].
pub(crate) fn map_wgpu_error(context: &str, e: wgpu::Error) -> DeviceError {
    match e {
        wgpu::Error::OutOfMemory { source } => DeviceError::OutOfMemory {
            label: context.to_string(),
            requested: 0,
            message: format!("out of memory: {source}"),
        },
        wgpu::Error::Validation { description, .. } => {
            DeviceError::Validation { context: context.to_string(), message: description }
        }
        wgpu::Error::Internal { description, .. } => {
            DeviceError::Internal { context: context.to_string(), message: description }
        }
    }
}
