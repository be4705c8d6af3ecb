//! [`WgslBackend`]: the [`Backend`] that renders kernel IR to WGSL and runs it through wgpu.
//!
//! # Loading
//!
//! [`WgslBackend::load`] validates the program ([`interp::validate`]: every index provably in range, which
//! is what lets the device compile shaders without wgpu's runtime bounds checks), renders every kernel,
//! compiles the pipelines (the device caches them by source hash, and persists the driver's pipeline
//! cache on Vulkan), and allocates buffers: one per input, output and constant (constants are uploaded
//! once, here), and one per slot of the program's memory plan, shared by the intermediates assigned to
//! it. Device buffers hold the host byte layout of every dtype (see [`crate::render`]), so uploads and
//! downloads are plain copies; i64/u64 values are checked on upload to fit the 32-bit emulation (the
//! load assumption under which the renderer proves a kernel's 64-bit arithmetic exact, see [`crate::render`]).
//!
//! # Modes
//!
//! Every run records all kernels into one command buffer and submits it once (one submit plus one map
//! round trip costs about 0.1 ms, more than most fused kernels take).
//!
//! * [`Mode::Default`]: bind groups and the command list are built on every run (like an eager runtime;
//!   a few microseconds per kernel on the host).
//! * [`Mode::ReduceOverhead`]: bind groups, uniform data and the command list are built once at load and
//!   replayed on every run (the nearest wgpu gets to a CUDA graph); a run only uploads inputs, encodes and
//!   submits.
//! * [`Mode::MaxAutotune`]: as `ReduceOverhead`, and at load each kernel is rendered in a few variants
//!   (workgroup sizes, vectorization on/off, matmul tiles), each timed on the device with GPU timestamps
//!   (host wall time when the adapter has none), and the fastest is kept. The loop and its cache are
//!   core's ([`sinter_core::tune`]): winners are cached per adapter and driver in
//!   `<cache dir>/autotune/wgsl-<adapter key>.json` (cache dir: `SINTER_CACHE_DIR`, else
//!   `~/.cache/sinter`), keyed by a hash of the kernel's IR without its names, so a later load (or another
//!   graph with the same kernel) skips the search; entries the renderer rejects ([`check_tuning`]) are
//!   dropped and searched again.
//!
//! [`Executable::run_timed`] uses a separately recorded batch with a timestamp pair around each kernel.
//!
//! # Device-resident tensors
//!
//! [`Backend::upload`] makes a [`DeviceTensor`] backed by a [`WgslBuffer`]. [`Executable::run_device`]
//! records, in one command buffer, copies of the input tensors into the executable's input buffers, the
//! kernels, and copies of the outputs into fresh buffers, and submits it without waiting: nothing goes
//! through the host until an output's `to_host()`. Allocations come from the memory plan
//! ([`sinter_core::kernel::alloc`]); constants come from the compiled graph's constant pool, so every
//! specialization of one graph shares one upload of each.

use std::any::Any;
use std::path::PathBuf;
use std::sync::Arc;

use sinter_core::DType;
use sinter_core::backend::{
    Backend, BackendError, ConstantPool, DeviceBuffer, DeviceCeilings, DeviceTensor, Executable, KernelSource,
    KernelTiming, LoadOptions, Mode,
};
use sinter_core::kernel::alloc::{self, AllocRole};
use sinter_core::kernel::{BufferKind, Capabilities, Kernel, Program, interp};
use sinter_core::tensor::{HostTensor, TensorData};
use sinter_core::tune::{self, TuneCache, TuneTarget};

use crate::device::{
    AdapterInfo, Arg, Batch, Device, DeviceError, DeviceOptions, GpuBuffer, RecordedBatch, Workgroups,
};
use crate::render::{Rendered, Tuning, WgslCaps, render_with};

mod tuning;
pub use tuning::{candidates, check_tuning};

/// Every dtype the WGSL backend stores and computes (all but f64; i64/u64 computed in 32 bits where a
/// kernel's values provably fit, see [`crate::render`]).
pub const DTYPES: [DType; 12] = [
    DType::F32,
    DType::F16,
    DType::BF16,
    DType::I8,
    DType::I16,
    DType::I32,
    DType::I64,
    DType::U8,
    DType::U16,
    DType::U32,
    DType::U64,
    DType::Bool,
];

/// Environment variable that, when `1`, runs bf16 matmuls on f16 cooperative matrices.
pub const ENV_BF16_AS_F16: &str = "SINTER_WGSL_BF16_AS_F16";

/// Environment variable that, when `1`, runs f32 matmuls on f16 cooperative matrices.
pub const ENV_F32_AS_F16: &str = "SINTER_WGSL_F32_AS_F16";

/// The scheduler-facing capabilities of an adapter.
pub fn capabilities(info: &AdapterInfo) -> Capabilities {
    let l = &info.limits;
    Capabilities {
        backend: "wgsl".into(),
        max_workgroup_size: l.max_compute_invocations_per_workgroup.min(l.max_compute_workgroup_size_x),
        max_shared_bytes: l.max_compute_workgroup_storage_size,
        max_bindings: l.max_storage_buffers_per_shader_stage,
        max_binding_bytes: l.max_storage_buffer_binding_size,
        subgroup_size: (info.has_subgroups && l.max_subgroup_size > 0).then_some(l.max_subgroup_size),
        dtypes: DTYPES.to_vec(),
        // WebGPU does not expose a GPU's SM count (the scheduler then assumes a large GPU); a CPU
        // adapter (lavapipe) runs workgroups on the host's threads.
        compute_units: if info.device_type == "Cpu" {
            std::thread::available_parallelism().map_or(1, |n| n.get() as u32)
        } else {
            0
        },
    }
}

/// Maps a device error to a backend error.
fn dev_err(e: DeviceError) -> BackendError {
    match e {
        DeviceError::NoAdapter { .. } => BackendError::NoDevice(e.to_string()),
        DeviceError::OutOfMemory { .. } => BackendError::OutOfMemory(e.to_string()),
        other => BackendError::Device(other.to_string()),
    }
}

/// The WGSL backend: a wgpu device plus the renderer.
#[derive(Clone, Debug)]
pub struct WgslBackend {
    device: Device,
    caps: Capabilities,
    wcaps: WgslCaps,
    name: String,
    cache_dir: Option<PathBuf>,
}

impl WgslBackend {
    /// Opens the best adapter (see [`Device::new`]; `SINTER_ADAPTER` selects one). No adapter gives
    /// [`BackendError::NoDevice`].
    pub fn new() -> Result<WgslBackend, BackendError> {
        Self::with_options(DeviceOptions::default())
    }

    /// Opens an adapter with explicit device options.
    pub fn with_options(opts: DeviceOptions) -> Result<WgslBackend, BackendError> {
        let cache_dir = opts.cache_dir.clone();
        let device = Device::new(opts).map_err(dev_err)?;
        let mut b = Self::with_device(device);
        b.cache_dir = cache_dir;
        Ok(b)
    }

    /// Wraps an existing device. `SINTER_WGSL_BF16_AS_F16=1` turns on
    /// [`WgslBackend::set_bf16_matmul_as_f16`], `SINTER_WGSL_F32_AS_F16=1`
    /// [`WgslBackend::set_f32_matmul_as_f16`].
    pub fn with_device(device: Device) -> WgslBackend {
        let info = device.info();
        let mut b = WgslBackend {
            caps: capabilities(info),
            wcaps: WgslCaps::from_adapter(info),
            name: format!("{} ({}, {})", info.name, info.backend, info.device_type),
            device,
            cache_dir: None,
        };
        let on = |var: &str| std::env::var(var).is_ok_and(|v| v.trim() == "1");
        if on(ENV_BF16_AS_F16) {
            b.set_bf16_matmul_as_f16(true);
        }
        if on(ENV_F32_AS_F16) {
            b.set_f32_matmul_as_f16(true);
        }
        b
    }

    /// Runs bf16 matmuls on the f16 cooperative matrices (tensor cores) when the adapter has them, converting
    /// operands to f16 (exact for |x| in [6.1e-5, 65504]; larger magnitudes saturate). Off by default.
    pub fn set_bf16_matmul_as_f16(&mut self, on: bool) {
        self.wcaps.bf16_matmul_as_f16 = on;
    }

    /// Runs f32 matmuls on the f16 cooperative matrices (tensor cores) when the adapter has them, rounding
    /// operands to f16 (11 significant bits as TF32, but magnitudes above 65504 become infinite and below
    /// 6.1e-5 lose bits); f32 accumulation. Off by default.
    pub fn set_f32_matmul_as_f16(&mut self, on: bool) {
        self.wcaps.f32_matmul_as_f16 = on;
    }

    /// The device.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// What the renderer assumes about the adapter.
    pub fn wgsl_caps(&self) -> &WgslCaps {
        &self.wcaps
    }

    /// The directory for the autotuning cache: the explicit one, else `SINTER_CACHE_DIR`, else
    /// `~/.cache/sinter`.
    fn cache_dir(&self) -> Option<PathBuf> {
        self.cache_dir
            .clone()
            .or_else(|| std::env::var_os(crate::device::ENV_CACHE_DIR).filter(|v| !v.is_empty()).map(PathBuf::from))
            .or_else(|| dirs::cache_dir().map(|d| d.join("sinter")))
    }

    /// Like [`Backend::load`], returning the concrete executable (with test and inspection helpers).
    pub fn load_wgsl(&self, program: &Program, mode: Mode) -> Result<WgslExecutable, BackendError> {
        self.load_wgsl_with(program, &LoadOptions::mode(mode))
    }

    /// Like [`Backend::load_with`], returning the concrete executable.
    pub fn load_wgsl_with(&self, program: &Program, opts: &LoadOptions) -> Result<WgslExecutable, BackendError> {
        let mode = opts.mode;
        interp::validate(program).map_err(|e| BackendError::Render { kernel: "program".into(), msg: e.to_string() })?;
        for b in &program.buffers {
            if b.dtype == DType::F64 {
                return Err(BackendError::Unsupported {
                    backend: "wgsl".into(),
                    what: format!("buffer b{} is f64: WGSL has no f64", b.id.0),
                });
            }
        }
        let buffers = self.allocate(program, &opts.constants)?;
        let mut exe = WgslExecutable {
            device: self.device.clone(),
            program: program.clone(),
            at: None,
            kernels: Vec::with_capacity(program.kernels.len()),
            buffers,
            mode,
            recorded: None,
            timed: None,
            tuning_log: Vec::new(),
        };
        let mut cache = if mode == Mode::MaxAutotune {
            let dir = opts.cache_dir.clone().or_else(|| self.cache_dir());
            let key = self.device.info().cache_key();
            let wcaps = self.wcaps.clone();
            TuneCache::open(dir.as_deref(), "wgsl", &key, move |t: &Tuning| check_tuning(t, &wcaps).is_ok())
        } else {
            TuneCache::none()
        };
        for k in &program.kernels {
            let loaded = if mode == Mode::MaxAutotune {
                let mut target = TuneWgsl { backend: self, exe: &exe, kernel: k, program };
                tune::autotune(k, &mut target, candidates(k, &self.wcaps), &mut cache)?.loaded
            } else {
                self.compile_kernel(k, program, &Tuning::default())?
            };
            exe.kernels.push(loaded);
        }
        if mode == Mode::MaxAutotune {
            exe.tuning_log = cache.log.clone();
            cache.save();
        }
        if mode != Mode::Default {
            exe.recorded = Some(exe.record(false)?.finish().map_err(dev_err)?);
        }
        Ok(exe)
    }

    /// Renders and compiles one kernel with `tuning`.
    fn compile_kernel(&self, k: &Kernel, program: &Program, tuning: &Tuning) -> Result<LoadedKernel, BackendError> {
        let rendered = render_with(k, program, &self.wcaps, tuning)?;
        let pipeline = self.device.compile(&rendered.source, &rendered.entry, &k.name).map_err(|e| match e {
            DeviceError::InvalidShader { message, wgsl, .. } => {
                BackendError::Compile { kernel: k.name.clone(), log: message, code: wgsl }
            }
            other => dev_err(other),
        })?;
        Ok(LoadedKernel { grid: rendered.grid, rendered, pipeline, tuning: tuning.clone() })
    }

    /// Allocates the program's buffers from its allocation plan (intermediates share their memory-plan
    /// slot); constants come from `constants`, uploaded on first use.
    fn allocate(&self, program: &Program, constants: &ConstantPool) -> Result<Vec<GpuBuffer>, BackendError> {
        let plan = alloc::plan(program);
        let mut allocs = Vec::with_capacity(plan.allocations.len());
        for (i, a) in plan.allocations.iter().enumerate() {
            let buf = match &a.role {
                AllocRole::Constant(t) => {
                    let d = constants.get_or_upload("wgsl", t, |t| self.upload(t))?;
                    match d.buffer().as_any().downcast_ref::<WgslBuffer>() {
                        Some(w) => w.buffer.clone(),
                        None => {
                            return Err(BackendError::Device(format!(
                                "constant {i}: the pool holds a {} buffer, not a WGSL one",
                                d.backend()
                            )));
                        }
                    }
                }
                _ => self.device.alloc(a.bytes, &a.label).map_err(dev_err)?,
            };
            allocs.push(buf);
        }
        Ok(plan.of_buffer.iter().map(|&a| allocs[a].clone()).collect())
    }
}

/// The WGSL side of a max-autotune search for one kernel.
struct TuneWgsl<'a> {
    backend: &'a WgslBackend,
    exe: &'a WgslExecutable,
    kernel: &'a Kernel,
    program: &'a Program,
}

impl TuneTarget for TuneWgsl<'_> {
    type Tuning = Tuning;
    type Loaded = LoadedKernel;

    fn compile(&mut self, t: &Tuning) -> Result<LoadedKernel, BackendError> {
        self.backend.compile_kernel(self.kernel, self.program, t)
    }

    fn source<'a>(&self, l: &'a LoadedKernel) -> &'a str {
        &l.rendered.source
    }

    fn time(&mut self, l: &LoadedKernel) -> Result<f64, BackendError> {
        if l.rendered.grid.contains(&0) {
            return Ok(0.0);
        }
        Ok(self.exe.time_kernel(l, 5)? as f64)
    }
}

impl Backend for WgslBackend {
    fn name(&self) -> &str {
        "wgsl"
    }

    fn device_name(&self) -> String {
        self.name.clone()
    }

    fn caps(&self) -> &Capabilities {
        &self.caps
    }

    fn load(&self, program: &Program, mode: Mode) -> Result<Box<dyn Executable>, BackendError> {
        Ok(Box::new(self.load_wgsl(program, mode)?))
    }

    fn load_with(&self, program: &Program, opts: &LoadOptions) -> Result<Box<dyn Executable>, BackendError> {
        Ok(Box::new(self.load_wgsl_with(program, opts)?))
    }

    fn cost_model(&self) -> Arc<dyn sinter_core::schedule::CostModel> {
        // Arguments bigger than one storage binding count once per window they are bound as.
        Arc::new(crate::cost::WgslCostModel::for_caps(&self.wcaps))
    }

    fn calibrate(&self, copy_bytes: u64) -> Result<Option<DeviceCeilings>, BackendError> {
        let dev = &self.device;
        let bytes = copy_bytes.min(dev.max_binding_size() / 2).min(dev.limits().max_buffer_size / 2);
        let bw = dev.measure_copy_bandwidth(bytes).map_err(dev_err)?;
        let lo = dev.measure_launch_overhead().map_err(dev_err)?;
        Ok(Some(DeviceCeilings {
            copy_gbps: bw.gb_per_s,
            copy_bytes: bytes,
            launch_overhead_us: lo.batched_dispatch_ns as f64 / 1e3,
        }))
    }

    fn runs_on_cpu(&self) -> bool {
        self.device.info().device_type == "Cpu"
    }

    fn serves_extents(&self) -> bool {
        true
    }

    fn fresh_device_per_measurement(&self) -> bool {
        // NVIDIA's Vulkan driver drops the SM clock ~4 s after device creation (BENCHMARKS.md);
        // CPU adapters have no such clock.
        !self.runs_on_cpu()
    }

    fn upload(&self, t: &HostTensor) -> Result<DeviceTensor, BackendError> {
        let data = device_bytes(t, "upload")?;
        let buf = self.device.alloc(data.len() as u64, "tensor").map_err(dev_err)?;
        self.device.upload(&buf, &data).map_err(dev_err)?;
        DeviceTensor::new(t.dtype(), t.shape.clone(), Arc::new(WgslBuffer { device: self.device.clone(), buffer: buf }))
    }
}

/// A [`GpuBuffer`] as a [`DeviceBuffer`] of a [`DeviceTensor`].
#[derive(Clone)]
pub struct WgslBuffer {
    device: Device,
    buffer: GpuBuffer,
}

impl std::fmt::Debug for WgslBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "WgslBuffer({}, {} bytes)", self.buffer.label(), self.buffer.len())
    }
}

impl WgslBuffer {
    /// The device buffer.
    pub fn gpu_buffer(&self) -> &GpuBuffer {
        &self.buffer
    }
}

impl DeviceBuffer for WgslBuffer {
    fn backend(&self) -> &str {
        "wgsl"
    }

    fn len_bytes(&self) -> u64 {
        self.buffer.len()
    }

    fn read(&self) -> Result<Vec<u8>, BackendError> {
        self.device.download(&self.buffer).map_err(dev_err)
    }

    fn synchronize(&self) -> Result<(), BackendError> {
        self.device.synchronize().map_err(dev_err)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// One compiled kernel.
struct LoadedKernel {
    rendered: Rendered,
    /// The grid launched: the rendered one, or fewer workgroups at a smaller outer extent
    /// ([`Executable::set_extent`]).
    grid: [u32; 3],
    pipeline: crate::device::Program,
    tuning: Tuning,
}

/// A program loaded on the device.
pub struct WgslExecutable {
    device: Device,
    program: Program,
    /// The program instantiated at another value of its outer symbol (inputs and outputs take its
    /// shapes; kernels launch over its extents); `None`: the extents compiled.
    at: Option<Arc<Program>>,
    kernels: Vec<LoadedKernel>,
    /// One per program buffer (intermediates of one slot share a buffer).
    buffers: Vec<GpuBuffer>,
    mode: Mode,
    /// The pre-recorded batch (every mode but Default).
    recorded: Option<RecordedBatch>,
    /// The timed batch, recorded on first use.
    timed: Option<RecordedBatch>,
    tuning_log: Vec<String>,
}

impl std::fmt::Debug for WgslExecutable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WgslExecutable")
            .field("kernels", &self.kernels.iter().map(|k| &k.rendered.name).collect::<Vec<_>>())
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

/// The device bytes of a host tensor (its little-endian layout), checking the 32-bit emulation range of
/// i64/u64 values.
fn device_bytes<'a>(t: &'a HostTensor, what: &str) -> Result<std::borrow::Cow<'a, [u8]>, BackendError> {
    match &t.data {
        TensorData::I64(v) => {
            if let Some(x) = v.iter().find(|x| i32::try_from(**x).is_err()) {
                return Err(BackendError::Unsupported {
                    backend: "wgsl".into(),
                    what: format!("{what}: i64 value {x} does not fit the 32-bit emulation of i64 on WGSL"),
                });
            }
        }
        TensorData::U64(v) => {
            if let Some(x) = v.iter().find(|x| u32::try_from(**x).is_err()) {
                return Err(BackendError::Unsupported {
                    backend: "wgsl".into(),
                    what: format!("{what}: u64 value {x} does not fit the 32-bit emulation of u64 on WGSL"),
                });
            }
        }
        TensorData::F64(_) => {
            return Err(BackendError::Unsupported { backend: "wgsl".into(), what: format!("{what} is f64") });
        }
        _ => {}
    }
    Ok(t.le_bytes())
}

impl WgslExecutable {
    /// The rendered kernels, in launch order.
    pub fn rendered(&self) -> Vec<&Rendered> {
        self.kernels.iter().map(|k| &k.rendered).collect()
    }

    /// The tuning each kernel was rendered with.
    pub fn tunings(&self) -> Vec<&Tuning> {
        self.kernels.iter().map(|k| &k.tuning).collect()
    }

    /// The grid each kernel launches now: as rendered, or fewer workgroups after
    /// [`Executable::set_extent`] to a smaller outer extent.
    pub fn launch_grids(&self) -> Vec<[u32; 3]> {
        self.kernels.iter().map(|k| k.grid).collect()
    }

    /// The workgroup size of every kernel as rendered (first dimension).
    pub fn tuning_workgroups(&self) -> Vec<u32> {
        self.kernels.iter().map(|k| k.rendered.workgroup_size[0]).collect()
    }

    /// What the autotuner measured and chose (empty unless loaded with [`Mode::MaxAutotune`]).
    pub fn tuning_log(&self) -> &[String] {
        &self.tuning_log
    }

    /// The mode this executable was loaded with.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Fills every output and intermediate buffer with `byte` (e.g. `0xff`: NaN for floats) so a store a
    /// kernel misses shows in the results.
    pub fn poison(&self, byte: u8) -> Result<(), BackendError> {
        for (b, buf) in self.program.buffers.iter().zip(&self.buffers) {
            if matches!(b.kind, BufferKind::Output(_) | BufferKind::Intermediate) {
                self.device.fill(buf, &[byte]).map_err(dev_err)?;
            }
        }
        Ok(())
    }

    /// Records every kernel with a non-empty grid into a batch.
    fn record(&self, timed: bool) -> Result<Batch, BackendError> {
        let mut batch = self.device.batch().timed(timed);
        for k in &self.kernels {
            self.dispatch(&mut batch, k)?;
        }
        Ok(batch)
    }

    /// The program whose inputs and outputs the executable takes now (see [`Executable::set_extent`]).
    fn io(&self) -> &Program {
        self.at.as_deref().unwrap_or(&self.program)
    }

    /// Records one kernel's dispatch (nothing for an empty grid).
    fn dispatch(&self, batch: &mut Batch, k: &LoadedKernel) -> Result<bool, BackendError> {
        let r = &k.rendered;
        if k.grid.contains(&0) {
            return Ok(false);
        }
        let args: Vec<Arg<'_>> = r
            .bindings
            .iter()
            .map(|b| Arg::Buffer(self.buffers[b.buffer.0 as usize].range(b.offset_bytes, b.size_bytes)))
            .collect();
        batch.dispatch(&k.pipeline, &args, Workgroups::Grid(k.grid)).map_err(dev_err)?;
        Ok(true)
    }

    /// Median GPU time (ns) of `iters` runs of one kernel variant on this executable's buffers.
    fn time_kernel(&self, k: &LoadedKernel, iters: usize) -> Result<u64, BackendError> {
        let has_ts = self.device.info().has_timestamps;
        let mut batch = self.device.batch().timed(has_ts);
        self.dispatch(&mut batch, k)?;
        let rec = batch.finish().map_err(dev_err)?;
        rec.run().map_err(dev_err)?; // warm-up
        let mut times = Vec::with_capacity(iters);
        for _ in 0..iters {
            let t = rec.run().map_err(dev_err)?;
            times.push(t.dispatch_ns.and_then(|d| d.first().copied()).unwrap_or(t.wall_ns));
        }
        times.sort_unstable();
        Ok(times[times.len() / 2])
    }

    /// Checks and uploads the inputs.
    fn upload(&self, inputs: &[HostTensor]) -> Result<(), BackendError> {
        let p = self.io();
        if inputs.len() != p.inputs.len() {
            return Err(BackendError::Input(format!(
                "the program takes {} inputs ({}), got {}",
                p.inputs.len(),
                p.inputs.iter().map(|i| i.name.as_str()).collect::<Vec<_>>().join(", "),
                inputs.len()
            )));
        }
        for (io, t) in p.inputs.iter().zip(inputs) {
            if t.dtype() != io.dtype || t.shape != io.shape {
                return Err(BackendError::Input(format!(
                    "input `{}` must be {}{:?}, got {}{:?}",
                    io.name,
                    io.dtype,
                    io.shape,
                    t.dtype(),
                    t.shape
                )));
            }
            let data = device_bytes(t, &format!("input `{}`", io.name))?;
            self.device.upload(&self.buffers[io.buffer.0 as usize], &data).map_err(dev_err)?;
        }
        Ok(())
    }

    /// Reads the outputs back.
    fn download(&self) -> Result<Vec<HostTensor>, BackendError> {
        self.io()
            .outputs
            .iter()
            .map(|io| {
                let buf = &self.buffers[io.buffer.0 as usize];
                let n = io.shape.iter().product::<usize>() * io.dtype.size_bytes();
                let bytes = self.device.download_range(buf, 0, n as u64).map_err(dev_err)?;
                HostTensor::from_le_bytes(io.dtype, io.shape.clone(), &bytes)
                    .map_err(|e| BackendError::Device(format!("output `{}`: {e}", io.name)))
            })
            .collect()
    }

    /// Runs the kernels once (untimed).
    fn execute(&mut self) -> Result<(), BackendError> {
        match &self.recorded {
            Some(r) => {
                r.run().map_err(dev_err)?;
            }
            None => {
                self.record(false)?.run().map_err(dev_err)?;
            }
        }
        Ok(())
    }
}

impl Executable for WgslExecutable {
    fn run(&mut self, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, BackendError> {
        self.upload(inputs)?;
        self.execute()?;
        self.download()
    }

    fn run_device(&mut self, inputs: &[DeviceTensor]) -> Result<Vec<DeviceTensor>, BackendError> {
        let p = self.io();
        if inputs.len() != p.inputs.len() {
            return Err(BackendError::Input(format!(
                "the program takes {} inputs, got {}",
                p.inputs.len(),
                inputs.len()
            )));
        }
        let mut batch = self.device.batch();
        for (io, t) in p.inputs.iter().zip(inputs) {
            if t.dtype() != io.dtype || t.shape() != io.shape.as_slice() {
                return Err(BackendError::Input(format!(
                    "input `{}` must be {}{:?}, got {}{:?}",
                    io.name,
                    io.dtype,
                    io.shape,
                    t.dtype(),
                    t.shape()
                )));
            }
            let src = t.buffer().as_any().downcast_ref::<WgslBuffer>().ok_or_else(|| {
                BackendError::Input(format!("input `{}` lives on the {} backend, not on wgsl", io.name, t.backend()))
            })?;
            let dst = &self.buffers[io.buffer.0 as usize];
            if !src.buffer.same_buffer(dst) {
                batch
                    .copy(src.buffer.range(0, dst.padded_len().min(src.buffer.padded_len())), dst, 0)
                    .map_err(dev_err)?;
            }
        }
        for k in &self.kernels {
            self.dispatch(&mut batch, k)?;
        }
        let mut outs = Vec::with_capacity(p.outputs.len());
        for io in &p.outputs {
            let src = &self.buffers[io.buffer.0 as usize];
            let bytes = (io.shape.iter().product::<usize>() * io.dtype.size_bytes()) as u64;
            let dst = self.device.alloc(bytes, &format!("output `{}`", io.name)).map_err(dev_err)?;
            batch.copy(src.range(0, dst.padded_len()), &dst, 0).map_err(dev_err)?;
            let buf = Arc::new(WgslBuffer { device: self.device.clone(), buffer: dst });
            outs.push(DeviceTensor::new(io.dtype, io.shape.clone(), buf)?);
        }
        batch.finish().map_err(dev_err)?.submit().map_err(dev_err)?;
        Ok(outs)
    }

    fn run_timed(
        &mut self,
        inputs: &[HostTensor],
        iters: usize,
    ) -> Result<(Vec<HostTensor>, Vec<Vec<KernelTiming>>), BackendError> {
        self.upload(inputs)?;
        if !self.device.info().has_timestamps {
            for _ in 0..iters.max(1) {
                self.execute()?;
            }
            return Ok((self.download()?, Vec::new()));
        }
        if self.timed.is_none() {
            self.timed = Some(self.record(true)?.finish().map_err(dev_err)?);
        }
        let names: Vec<String> =
            self.kernels.iter().filter(|k| !k.grid.contains(&0)).map(|k| k.rendered.name.clone()).collect();
        let mut all = Vec::with_capacity(iters);
        for _ in 0..iters.max(1) {
            let t = self.timed.as_ref().map(|r| r.run()).transpose().map_err(dev_err)?;
            let (durations, starts) = match t {
                Some(t) => (t.dispatch_ns.unwrap_or_default(), t.dispatch_start_ns.unwrap_or_default()),
                None => (Vec::new(), Vec::new()),
            };
            // GPU timestamps at each dispatch's start and end: starts are relative to the first
            // kernel, so the gaps between kernels (launch overhead) are visible to the profiler.
            let run: Vec<KernelTiming> = names
                .iter()
                .zip(durations)
                .enumerate()
                .map(|(i, (name, d))| KernelTiming {
                    kernel: name.clone(),
                    start_ns: starts.get(i).copied().unwrap_or(0) as f64,
                    dur_ns: d as f64,
                })
                .collect();
            all.push(run);
        }
        if iters == 0 {
            all.clear();
        }
        Ok((self.download()?, all))
    }

    /// Kernels keep the source rendered at the bound (every index in range of the bound's buffers,
    /// which stay allocated); each launches `GridSplit::workgroups` of the instantiated kernel when
    /// that fits one grid dimension, else its full grid. Pre-recorded batches are recorded again.
    fn set_extent(&mut self, at: Option<Arc<Program>>) -> Result<(), BackendError> {
        let max = self.device.info().limits.max_compute_workgroups_per_dimension;
        let mut grids = Vec::with_capacity(self.kernels.len());
        for (i, k) in self.kernels.iter().enumerate() {
            let r = &k.rendered;
            let grid = match &at {
                None => r.grid,
                Some(q) => match q.kernels.get(i).filter(|ki| ki.name == r.name) {
                    Some(ki) => r.grid_for(ki, max),
                    None => {
                        return Err(BackendError::Input(format!(
                            "set_extent: kernel {i} of the instance is not {}",
                            r.name
                        )));
                    }
                },
            };
            grids.push(grid);
        }
        for (k, g) in self.kernels.iter_mut().zip(grids) {
            k.grid = g;
        }
        self.at = at;
        self.timed = None;
        if self.mode != Mode::Default {
            self.recorded = Some(self.record(false)?.finish().map_err(dev_err)?);
        }
        Ok(())
    }

    fn sources(&self) -> Vec<KernelSource> {
        self.kernels
            .iter()
            .map(|k| KernelSource {
                name: k.rendered.name.clone(),
                ext: "wgsl".into(),
                source: k.rendered.source.clone(),
                grid: k.rendered.grid,
                block: k.rendered.workgroup_size,
                resources: None,
                strategy: Some(k.rendered.strategy.clone()),
                compute: None,
            })
            .collect()
    }
}
