//! [`CudaExecutable`]: a loaded program and its runs (see the parent module for the modes).
//!
//! The hot path ([`Executable::run_device`]) binds the context, checks and patches inputs,
//! takes output blocks from the pool, and launches (kernels or one graph); it allocates only the
//! output handles and formats nothing unless something fails.

use super::cuda_buffer;
use super::library::Step;
use crate::device::{CudaBuffer, Device, Graph, L2Clear, Stream, TimingEvents, check};
use crate::render::{Rendered, Tuning};
use cudarc::driver::{CudaEvent, sys};
use sinter_core::DType;
use sinter_core::backend::{BackendError, DeviceTensor, Executable, KernelResources, KernelSource, KernelTiming, Mode};
use sinter_core::kernel::Program;
use sinter_core::tensor::HostTensor;
use std::sync::Arc;

/// Timed runs queued between two waits in [`Executable::run_timed`]: the events of a batch are
/// read once it is done, so the stream never drains between runs (a drained stream would put the
/// host's launch latency between a run's start event and its first kernel).
const TIMED_BATCH: usize = 16;

/// A compiled, loaded kernel.
pub(crate) struct LoadedKernel {
    /// The kernel IR's name.
    pub(crate) name: String,
    pub(crate) rendered: Rendered,
    pub(crate) tuning: Tuning,
    /// Its launch (or library call).
    pub(crate) launch: Step,
    /// What ptxas reported of the rendered kernel; `None` for a library call (cuBLASLt reports
    /// nothing of its kernels).
    pub(crate) resources: Option<KernelResources>,
    /// The kernel's private scratch ([`Rendered::scratch_bytes`]), bound after its arguments.
    pub(crate) _scratch: Option<CudaBuffer>,
}

/// Device memory an executable binds.
pub(crate) enum Memory {
    /// Its own allocation (inputs, outputs, memory-plan slots).
    Own(CudaBuffer),
    /// A constant shared through the compiled graph's constant pool.
    Shared { ptr: u64, _tensor: DeviceTensor },
}

impl Memory {
    pub(crate) fn ptr(&self) -> u64 {
        match self {
            Memory::Own(b) => b.ptr(),
            Memory::Shared { ptr, .. } => *ptr,
        }
    }
}

/// One input or output of the program.
pub(crate) struct IoSlot {
    pub(crate) name: String,
    /// The executable's own allocation for it.
    pub(crate) alloc: usize,
    pub(crate) dtype: DType,
    pub(crate) shape: Vec<usize>,
    /// Bytes of the tensor.
    pub(crate) bytes: u64,
    /// Bytes of its allocation (at least 4).
    pub(crate) capacity: u64,
    /// Every (kernel, argument) bound to it.
    pub(crate) patches: Vec<(usize, usize)>,
}

/// What [`CudaExecutable::new`] assembles.
pub(crate) struct Parts {
    pub(crate) dev: Device,
    pub(crate) stream: Arc<Stream>,
    pub(crate) mode: Mode,
    pub(crate) kernels: Vec<LoadedKernel>,
    pub(crate) mem: Vec<Memory>,
    pub(crate) inputs: Vec<IoSlot>,
    pub(crate) outputs: Vec<IoSlot>,
    pub(crate) poison: bool,
    pub(crate) graph_updates: bool,
    pub(crate) tuning_log: Vec<String>,
}

/// How a graph replay reaches each run's inputs and outputs.
enum Replay {
    /// The kernel nodes that read inputs or write outputs get the run's pointers before the
    /// replay: `(kernel, graph node)` pairs.
    Update(Vec<(usize, usize)>),
    /// Arguments stay frozen on the own buffers: inputs are copied in, outputs copied out.
    Copy,
}

/// Makes `stream` wait for `b`'s pending writes (unless it is ready) and records that `stream`
/// reads it. `event` is the waiter's reusable event (one is made when `None`).
pub(crate) fn wait_for(b: &CudaBuffer, stream: &Arc<Stream>, event: Option<&CudaEvent>) -> Result<(), BackendError> {
    if b.home().id() == stream.id() {
        return Ok(());
    }
    if !b.is_ready() {
        let made;
        let ev = match event {
            Some(e) => e,
            None => {
                made = stream
                    .raw()
                    .context()
                    .new_event(None)
                    .map_err(|e| crate::device::driver_error("cuEventCreate", "cross-stream wait", e))?;
                &made
            }
        };
        check(unsafe { sys::cuEventRecord(ev.cu_event(), b.home().cu()) }, "cuEventRecord", "cross-stream input")?;
        check(
            unsafe { sys::cuStreamWaitEvent(stream.cu(), ev.cu_event(), 0) },
            "cuStreamWaitEvent",
            "cross-stream input",
        )?;
    }
    b.note_use_on(stream);
    Ok(())
}

/// A program loaded on the GPU. Runs are serialized by `&mut self`; work is queued on the
/// executable's own stream.
pub struct CudaExecutable {
    // Field order is drop order: graph and modules before memory, the stream last.
    graph: Option<Graph>,
    replay: Replay,
    kernels: Vec<LoadedKernel>,
    mem: Vec<Memory>,
    inputs: Vec<IoSlot>,
    outputs: Vec<IoSlot>,
    mode: Mode,
    poison: bool,
    /// Kernel arguments point at the own input/output buffers (else at the last run_device's).
    own_bound: bool,
    xevent: CudaEvent,
    timing: Option<TimingEvents>,
    tuning_log: Vec<String>,
    /// Whether graph replays may patch kernel arguments (see [`Replay`]).
    graph_updates: bool,
    /// The shapes the program was compiled for: inputs, then outputs (restored by
    /// `set_extent(None)`).
    compiled_io: Vec<Vec<usize>>,
    dev: Device,
    stream: Arc<Stream>,
}

impl std::fmt::Debug for CudaExecutable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CudaExecutable({} kernels, {:?}, graph {:?})", self.kernels.len(), self.mode, self.graph)
    }
}

impl Drop for CudaExecutable {
    fn drop(&mut self) {
        // Modules unload and memory returns to the pool only after queued work is done.
        if self.dev.bind().is_ok() {
            let _ = self.stream.synchronize("drop executable");
        }
    }
}

impl CudaExecutable {
    pub(crate) fn new(p: Parts) -> Result<CudaExecutable, BackendError> {
        let xevent = p
            .dev
            .context()
            .new_event(None)
            .map_err(|e| crate::device::driver_error("cuEventCreate", "executable", e))?;
        let compiled_io = p.inputs.iter().chain(&p.outputs).map(|s| s.shape.clone()).collect();
        let mut exe = CudaExecutable {
            graph: None,
            replay: Replay::Copy,
            graph_updates: p.graph_updates,
            compiled_io,
            kernels: p.kernels,
            mem: p.mem,
            inputs: p.inputs,
            outputs: p.outputs,
            mode: p.mode,
            poison: p.poison,
            own_bound: true,
            xevent,
            timing: None,
            tuning_log: p.tuning_log,
            dev: p.dev,
            stream: p.stream,
        };
        let library = exe.kernels.iter().any(|k| k.launch.kernel().is_none());
        if library && exe.mode != Mode::Default {
            tracing::debug!(target: "sinter::cuda", "no CUDA graph: the run has library calls (steps launch on the stream)");
        }
        if exe.mode != Mode::Default && !library {
            exe.capture()?;
        }
        exe.stream.synchronize("load")?;
        Ok(exe)
    }

    /// Captures the launches as they are now (grids, arguments) into the executable's graph.
    fn capture(&mut self) -> Result<(), BackendError> {
        let stream = self.stream.clone();
        let kernels = &self.kernels;
        self.graph = Graph::capture(&stream, "executable", || {
            let mut n = 0;
            for k in kernels {
                if !k.launch.is_empty() {
                    k.launch.launch(&stream)?;
                    n += 1;
                }
            }
            Ok(n)
        })?;
        self.replay = Replay::Copy;
        if self.graph_updates {
            self.replay = self.updatable().unwrap_or(Replay::Copy);
        }
        Ok(())
    }

    /// [`Replay::Update`] when every kernel touching an input or output has its own graph node
    /// and the driver accepts an update of it (tried once here, with the own buffers).
    fn updatable(&self) -> Option<Replay> {
        let g = self.graph.as_ref()?;
        let mut io: Vec<usize> =
            self.inputs.iter().chain(&self.outputs).flat_map(|s| s.patches.iter().map(|&(k, _)| k)).collect();
        io.sort_unstable();
        io.dedup();
        let mut pairs = Vec::with_capacity(io.len());
        for k in io {
            let launch = self.kernels[k].launch.kernel()?;
            if launch.is_empty() {
                continue;
            }
            let node = g.kernel_node(launch.function())?;
            if let Err(e) = g.update_kernel(node, launch) {
                tracing::debug!(target: "sinter::cuda", "graph argument update refused ({e}); copying inputs and outputs");
                return None;
            }
            pairs.push((k, node));
        }
        Some(Replay::Update(pairs))
    }

    /// Pushes the current arguments of the input/output kernels into the graph (update replays).
    fn push_graph_args(&self) -> Result<(), BackendError> {
        if let (Some(g), Replay::Update(pairs)) = (&self.graph, &self.replay) {
            for &(k, node) in pairs {
                if let Some(l) = self.kernels[k].launch.kernel() {
                    g.update_kernel(node, l)?;
                }
            }
        }
        Ok(())
    }

    /// The compile mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// True when runs replay a CUDA graph.
    pub fn uses_graph(&self) -> bool {
        self.graph.is_some()
    }

    /// True when graph replays of `run_device` read inputs and write outputs in place (kernel
    /// node arguments updated per run); false when they copy (or there is no graph).
    pub fn updates_graph_args(&self) -> bool {
        self.graph.is_some() && matches!(self.replay, Replay::Update(_))
    }

    /// The executable's stream.
    pub fn stream(&self) -> &Arc<Stream> {
        &self.stream
    }

    /// The device.
    pub fn device(&self) -> &Device {
        &self.dev
    }

    /// Each kernel's name and tuning, in launch order.
    pub fn tunings(&self) -> Vec<(String, Tuning)> {
        self.kernels.iter().map(|k| (k.name.clone(), k.tuning.clone())).collect()
    }

    /// What max-autotune timed and chose (empty in other modes).
    pub fn tuning_log(&self) -> &[String] {
        &self.tuning_log
    }

    /// Fill outputs with 0xFF bytes before each run (see [`super::CudaBackend::set_poison_outputs`]).
    pub fn set_poison_outputs(&mut self, on: bool) {
        self.poison = on;
    }

    /// Waits for the executable's queued work.
    pub fn synchronize(&self) -> Result<(), BackendError> {
        self.dev.bind()?;
        self.stream.synchronize("executable")
    }

    fn check_host(&self, inputs: &[HostTensor]) -> Result<(), BackendError> {
        if inputs.len() != self.inputs.len() {
            return Err(BackendError::Input(format!("expected {} inputs, got {}", self.inputs.len(), inputs.len())));
        }
        for (i, (t, s)) in inputs.iter().zip(&self.inputs).enumerate() {
            if t.dtype() != s.dtype || t.shape != s.shape {
                return Err(BackendError::Input(format!(
                    "input {i} ({}) is {}{:?}, the program expects {}{:?}",
                    s.name,
                    t.dtype(),
                    t.shape,
                    s.dtype,
                    s.shape
                )));
            }
        }
        Ok(())
    }

    fn check_device<'a>(&self, i: usize, t: &'a DeviceTensor) -> Result<&'a CudaBuffer, BackendError> {
        let s = &self.inputs[i];
        if t.dtype() != s.dtype || t.shape() != s.shape.as_slice() {
            return Err(BackendError::Input(format!(
                "input {i} ({}) is {}{:?}, the program expects {}{:?}",
                s.name,
                t.dtype(),
                t.shape(),
                s.dtype,
                s.shape
            )));
        }
        let b = cuda_buffer(t, &self.dev, "input")?;
        if b.capacity() < s.bytes {
            return Err(BackendError::Input(format!("input {i} ({}): buffer smaller than the tensor", s.name)));
        }
        Ok(b)
    }

    /// Points every kernel argument (and graph node) back at the executable's own input and
    /// output buffers.
    fn bind_own(&mut self) -> Result<(), BackendError> {
        if self.own_bound {
            return Ok(());
        }
        for s in self.inputs.iter().chain(&self.outputs) {
            let p = self.mem[s.alloc].ptr();
            for &(k, j) in &s.patches {
                self.kernels[k].launch.set_arg(j, p)?;
            }
        }
        self.push_graph_args()?;
        self.own_bound = true;
        Ok(())
    }

    fn poison_own_outputs(&self) -> Result<(), BackendError> {
        for s in &self.outputs {
            self.stream.fill(self.mem[s.alloc].ptr(), 0xff, s.capacity, "poison output")?;
        }
        Ok(())
    }

    /// Queues what precedes a timed run, outside its events: the poisoning of the outputs
    /// (`SINTER_CUDA_POISON`) and the L2 clear.
    fn before_timed_run(&self, clear: Option<&L2Clear>) -> Result<(), BackendError> {
        if self.poison {
            self.poison_own_outputs()?;
        }
        clear.map_or(Ok(()), |c| c.queue(&self.stream))
    }

    /// Queues one run over the own buffers (graph replay or every kernel).
    fn launch_own(&mut self) -> Result<(), BackendError> {
        self.bind_own()?;
        if self.poison {
            self.poison_own_outputs()?;
        }
        self.queue_run()
    }

    /// Queues the run's kernels, the captured graph where there is one (own buffers bound).
    fn queue_run(&self) -> Result<(), BackendError> {
        match &self.graph {
            Some(g) => g.launch(&self.stream, "executable"),
            None => {
                for k in &self.kernels {
                    k.launch.launch(&self.stream)?;
                }
                Ok(())
            }
        }
    }

    /// Copies host inputs into the own input buffers.
    fn upload_inputs(&self, inputs: &[HostTensor]) -> Result<(), BackendError> {
        for (t, s) in inputs.iter().zip(&self.inputs) {
            // Pageable memory: the driver has staged the bytes when this returns.
            self.stream.upload(self.mem[s.alloc].ptr(), &t.le_bytes(), "input upload")?;
        }
        Ok(())
    }

    /// Copies the own output buffers to the host (waits for the run).
    fn download_outputs(&self) -> Result<Vec<HostTensor>, BackendError> {
        let mut bytes = Vec::with_capacity(self.outputs.len());
        for s in &self.outputs {
            let mut v = vec![0u8; s.bytes as usize];
            self.stream.download(&mut v, self.mem[s.alloc].ptr(), "output download")?;
            bytes.push(v);
        }
        self.stream.synchronize("run")?;
        self.outputs
            .iter()
            .zip(bytes)
            .map(|(s, b)| {
                HostTensor::from_le_bytes(s.dtype, s.shape.clone(), &b)
                    .map_err(|e| BackendError::Device(format!("output {}: {e}", s.name)))
            })
            .collect()
    }
}

impl Executable for CudaExecutable {
    fn run(&mut self, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, BackendError> {
        self.dev.bind()?;
        self.check_host(inputs)?;
        self.upload_inputs(inputs)?;
        self.launch_own()?;
        self.download_outputs()
    }

    fn run_device(&mut self, inputs: &[DeviceTensor]) -> Result<Vec<DeviceTensor>, BackendError> {
        self.dev.bind()?;
        if inputs.len() != self.inputs.len() {
            return Err(BackendError::Input(format!("expected {} inputs, got {}", self.inputs.len(), inputs.len())));
        }
        // Kernel arguments take the run's pointers (no graph, or graph nodes updated), or the
        // graph's frozen own buffers are copied to and from.
        let copy = self.graph.is_some() && matches!(self.replay, Replay::Copy);
        for (i, t) in inputs.iter().enumerate() {
            let b = self.check_device(i, t)?;
            wait_for(b, &self.stream, Some(&self.xevent))?;
            let s = &self.inputs[i];
            // At an extent below the bound (`set_extent`), library products and kernels without a
            // grid split still run the bound's extent and read the input up to the own slot's
            // capacity: a caller's smaller buffer is copied into that slot rather than read past
            // its end (compute-sanitizer caught cuBLAS's sgemm reading 0.9 MB past a 256 KB input
            // in `device_dynamic`, an illegal address about one run in four with a cold JIT cache).
            let short = b.capacity() < s.capacity;
            if copy || short {
                self.stream.copy(self.mem[s.alloc].ptr(), b.ptr(), s.bytes, "input copy")?;
                if !copy {
                    let own = self.mem[s.alloc].ptr();
                    for &(k, j) in &s.patches {
                        self.kernels[k].launch.set_arg(j, own)?;
                    }
                }
            } else {
                self.own_bound = false;
                for &(k, j) in &s.patches {
                    self.kernels[k].launch.set_arg(j, b.ptr())?;
                }
            }
        }
        let mut fresh = Vec::with_capacity(self.outputs.len());
        for s in &self.outputs {
            let b = Arc::new(self.stream.alloc(s.capacity)?);
            if !copy {
                self.own_bound = false;
                for &(k, j) in &s.patches {
                    self.kernels[k].launch.set_arg(j, b.ptr())?;
                }
                if self.poison {
                    self.stream.fill(b.ptr(), 0xff, s.capacity, "poison output")?;
                }
            }
            fresh.push(b);
        }
        match &self.graph {
            Some(g) => {
                if copy {
                    if self.poison {
                        self.poison_own_outputs()?;
                    }
                } else {
                    self.push_graph_args()?;
                }
                g.launch(&self.stream, "executable")?;
                if copy {
                    for (s, b) in self.outputs.iter().zip(&fresh) {
                        self.stream.copy(b.ptr(), self.mem[s.alloc].ptr(), s.bytes, "output copy")?;
                    }
                }
            }
            None => {
                for k in &self.kernels {
                    k.launch.launch(&self.stream)?;
                }
            }
        }
        let mut out = Vec::with_capacity(self.outputs.len());
        for (s, b) in self.outputs.iter().zip(fresh) {
            out.push(DeviceTensor::new(s.dtype, s.shape.clone(), b)?);
        }
        Ok(out)
    }

    fn run_timed(
        &mut self,
        inputs: &[HostTensor],
        iters: usize,
    ) -> Result<(Vec<HostTensor>, Vec<Vec<KernelTiming>>), BackendError> {
        self.dev.bind()?;
        self.check_host(inputs)?;
        self.upload_inputs(inputs)?;
        if iters == 0 {
            self.launch_own()?;
            return Ok((self.download_outputs()?, Vec::new()));
        }
        self.bind_own()?;
        let n = self.kernels.len();
        let batch = TIMED_BATCH.min(iters);
        if self.timing.as_ref().is_none_or(|t| t.len() < n * batch) {
            self.timing = Some(TimingEvents::new(&self.dev, n * batch)?);
        }
        // The L2 clear's buffer lives for this call only (its block returns to the pool).
        let flush = L2Clear::new(&self.stream, self.dev.info().l2_bytes);
        let mut runs = Vec::with_capacity(iters);
        while runs.len() < iters {
            let b = batch.min(iters - runs.len());
            let (Some(ev), cu) = (&self.timing, &self.stream) else { break };
            for it in 0..b {
                self.before_timed_run(flush.as_ref())?;
                for (i, k) in self.kernels.iter().enumerate() {
                    ev.record(it * n + i, false, cu)?;
                    k.launch.launch(cu)?;
                    ev.record(it * n + i, true, cu)?;
                }
            }
            for it in 0..b {
                let mut run = Vec::with_capacity(n);
                for (i, k) in self.kernels.iter().enumerate() {
                    run.push(KernelTiming {
                        kernel: k.name.clone(),
                        start_ns: ev.elapsed_ms(it * n, it * n + i, false)? * 1e6,
                        dur_ns: ev.elapsed_ms(it * n + i, it * n + i, true)? * 1e6,
                    });
                }
                runs.push(run);
            }
        }
        Ok((self.download_outputs()?, runs))
    }

    fn run_timed_whole(
        &mut self,
        inputs: &[HostTensor],
        iters: usize,
    ) -> Result<Option<(Vec<HostTensor>, Vec<f64>)>, BackendError> {
        self.dev.bind()?;
        self.check_host(inputs)?;
        self.upload_inputs(inputs)?;
        self.bind_own()?;
        let iters = iters.max(1);
        let batch = TIMED_BATCH.min(iters);
        let ev = TimingEvents::new(&self.dev, batch)?;
        let clear = L2Clear::new(&self.stream, self.dev.info().l2_bytes);
        let mut ns = Vec::with_capacity(iters);
        while ns.len() < iters {
            let b = batch.min(iters - ns.len());
            for i in 0..b {
                self.before_timed_run(clear.as_ref())?;
                ev.record(i, false, &self.stream)?;
                self.queue_run()?;
                ev.record(i, true, &self.stream)?;
            }
            for i in 0..b {
                ns.push(ev.elapsed_ms(i, i, true)? * 1e6);
            }
        }
        Ok(Some((self.download_outputs()?, ns)))
    }

    /// Kernels keep the source compiled at the bound (every index in range of the bound's
    /// buffers, which stay allocated); each rendered kernel launches `GridSplit::blocks` of the
    /// instantiated kernel, library products and kernels without a split their full grid. Inputs
    /// and outputs take the instance's shapes (smaller copies into and out of the same
    /// allocations). A captured CUDA graph is captured again with the new grids.
    fn set_extent(&mut self, at: Option<Arc<Program>>) -> Result<(), BackendError> {
        self.dev.bind()?;
        let bad = |m: String| BackendError::Input(format!("set_extent: {m}"));
        let shapes: Vec<Vec<usize>> = match &at {
            None => self.compiled_io.clone(),
            Some(q) => {
                if q.inputs.len() != self.inputs.len()
                    || q.outputs.len() != self.outputs.len()
                    || q.kernels.len() != self.kernels.len()
                {
                    return Err(bad("not an instance of this executable's program".into()));
                }
                q.inputs.iter().chain(&q.outputs).map(|io| io.shape.clone()).collect()
            }
        };
        let mut grids = Vec::with_capacity(self.kernels.len());
        for (i, k) in self.kernels.iter().enumerate() {
            let full = k.rendered.grid;
            let grid = match &at {
                None => full,
                Some(q) => {
                    let ki = &q.kernels[i];
                    if ki.name != k.name {
                        return Err(bad(format!("kernel {i} of the instance is {}, not {}", ki.name, k.name)));
                    }
                    match k.rendered.split.and_then(|s| s.blocks(ki)) {
                        Some(0) => [0, 1, 1],
                        Some(b) if b <= u64::from(full[0]) => [b as u32, 1, 1],
                        _ => full,
                    }
                }
            };
            grids.push(grid);
        }
        for (s, shape) in self.inputs.iter_mut().chain(self.outputs.iter_mut()).zip(shapes) {
            let bytes = (shape.iter().product::<usize>() * s.dtype.size_bytes()) as u64;
            if bytes > s.capacity {
                return Err(bad(format!("{} {shape:?} exceeds its allocation of {} bytes", s.name, s.capacity)));
            }
            s.shape = shape;
            s.bytes = bytes;
        }
        let mut changed = false;
        for (k, grid) in self.kernels.iter_mut().zip(grids) {
            if let Step::Kernel(l) = &mut k.launch
                && l.grid() != grid
            {
                l.set_grid(grid);
                changed = true;
            }
        }
        if changed && self.graph.is_some() {
            self.bind_own()?;
            self.stream.synchronize("set_extent")?;
            self.graph = None;
            self.capture()?;
        }
        Ok(())
    }

    fn sources(&self) -> Vec<KernelSource> {
        self.kernels
            .iter()
            .map(|k| KernelSource {
                name: k.name.clone(),
                ext: "cu".into(),
                source: k.rendered.source.clone(),
                grid: k.rendered.grid,
                block: k.rendered.block,
                resources: k.resources,
                strategy: Some(k.rendered.strategy.clone()),
                compute: k.rendered.compute.map(str::to_string),
            })
            .collect()
    }
}
