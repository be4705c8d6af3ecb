//! Batched launches: many dispatches and copies in one command encoder and one submit, optionally timed
//! per dispatch with GPU timestamps.

use std::sync::Mutex;
use std::time::Instant;

use super::buffer::{BufferRange, GpuBuffer, pad4};
use super::program::{BindingKind, Program};
use super::{Device, DeviceError};

/// The WGSL helper every kernel dispatched with [`Workgroups::Linear`] uses to recover its linear
/// workgroup id. The runtime spreads counts above `max_compute_workgroups_per_dimension` over y and z
/// (see [`spread_workgroups`]), possibly launching a few more workgroups than asked: kernels must guard
/// against their own element or tile count. Call it with `@builtin(workgroup_id)` and
/// `@builtin(num_workgroups)`.
pub const LINEAR_WORKGROUP_ID_WGSL: &str = "\
// sinter convention: linear id of a workgroup in a dispatch the runtime spread over x, y and z.
fn sinter_linear_workgroup_id(wg: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return wg.x + nwg.x * (wg.y + nwg.y * wg.z);
}
";

/// How many workgroups a dispatch launches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workgroups {
    /// A linear count, spread over x, y, z when above the per-dimension limit (see
    /// [`LINEAR_WORKGROUP_ID_WGSL`]).
    Linear(u64),
    /// An explicit grid; each dimension must be within the per-dimension limit.
    Grid([u32; 3]),
}

impl From<u32> for Workgroups {
    fn from(n: u32) -> Self {
        Workgroups::Linear(u64::from(n))
    }
}

impl From<u64> for Workgroups {
    fn from(n: u64) -> Self {
        Workgroups::Linear(n)
    }
}

impl From<[u32; 3]> for Workgroups {
    fn from(g: [u32; 3]) -> Self {
        Workgroups::Grid(g)
    }
}

/// Spreads `count` workgroups over a grid whose dimensions are each at most `max_per_dim`, with
/// `x * y * z >= count` and little excess. Counts within the limit stay `[count, 1, 1]`.
pub fn spread_workgroups(count: u64, max_per_dim: u32) -> Result<[u32; 3], DeviceError> {
    let max = u64::from(max_per_dim);
    let too_many = || DeviceError::TooManyWorkgroups { requested: count, max_per_dimension: max_per_dim };
    if max == 0 {
        return Err(too_many());
    }
    if count <= max {
        return Ok([count as u32, 1, 1]);
    }
    let z = count.div_ceil(max * max);
    if z > max {
        return Err(too_many());
    }
    let per_z = count.div_ceil(z);
    let y = per_z.div_ceil(max);
    let x = per_z.div_ceil(y);
    debug_assert!(x <= max && y <= max && x * y * z >= count);
    Ok([x as u32, y as u32, z as u32])
}

/// One argument of a dispatch, matched in order with [`Program::bindings`].
#[derive(Clone, Copy, Debug)]
pub enum Arg<'a> {
    /// A storage buffer range, for a `var<storage, ...>` binding.
    Buffer(BufferRange<'a>),
    /// Bytes for a `var<uniform>` binding (e.g. sizes and offsets of a chunked dispatch); the batch packs
    /// them into one uniform buffer. Padded with zeros to a multiple of 16 bytes.
    Uniform(&'a [u8]),
}

impl<'a> From<&'a GpuBuffer> for Arg<'a> {
    fn from(b: &'a GpuBuffer) -> Self {
        Arg::Buffer(b.whole())
    }
}

impl<'a> From<BufferRange<'a>> for Arg<'a> {
    fn from(r: BufferRange<'a>) -> Self {
        Arg::Buffer(r)
    }
}

/// A binding recorded by [`Batch::dispatch`], resolved to a bind group entry by [`Batch::finish`].
enum PendingEntry {
    Buffer { binding: u32, buffer: wgpu::Buffer, offset: u64, size: u64 },
    Uniform { binding: u32, offset: u64, size: u64 },
}

/// A recorded step.
enum Step {
    Dispatch { program: Program, entries: Vec<PendingEntry>, grid: [u32; 3] },
    Copy { src: wgpu::Buffer, src_offset: u64, dst: wgpu::Buffer, dst_offset: u64, size: u64 },
    Clear { buffer: wgpu::Buffer },
}

/// A step ready to encode.
enum ReadyStep {
    Dispatch { pipeline: wgpu::ComputePipeline, bind_group: Option<wgpu::BindGroup>, grid: [u32; 3] },
    Copy { src: wgpu::Buffer, src_offset: u64, dst: wgpu::Buffer, dst_offset: u64, size: u64 },
    Clear { buffer: wgpu::Buffer },
}

/// Records dispatches, copies and clears to run in one command encoder and one submit.
///
/// ```no_run
/// # use sinter_wgsl::device::*;
/// # fn f(dev: &Device, prog: &Program, x: &GpuBuffer, y: &GpuBuffer) -> Result<(), DeviceError> {
/// let mut batch = dev.batch().timed(true);
/// batch.dispatch(prog, &[x.into(), y.into()], Workgroups::Linear(1024))?;
/// batch.dispatch(prog, &[y.into(), x.into()], Workgroups::Linear(1024))?;
/// let timing = batch.run()?; // one submit; per-dispatch GPU durations when supported
/// # Ok(()) }
/// ```
pub struct Batch {
    device: Device,
    steps: Vec<Step>,
    labels: Vec<String>,
    uniforms: Vec<u8>,
    timed: bool,
}

impl std::fmt::Debug for Batch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batch")
            .field("steps", &self.steps.len())
            .field("dispatches", &self.labels)
            .field("timed", &self.timed)
            .finish()
    }
}

/// Timing of one run of a batch.
#[derive(Clone, Debug, PartialEq)]
pub struct BatchTiming {
    /// Host time from the start of encoding to completion, in nanoseconds.
    pub wall_ns: u64,
    /// GPU duration of each dispatch, in recording order, in nanoseconds; `None` when the batch was not
    /// timed or the device has no timestamps.
    pub dispatch_ns: Option<Vec<u64>>,
    /// GPU time from the first dispatch's start to the last one's end, in nanoseconds (timed batches).
    pub gpu_span_ns: Option<u64>,
    /// Start of each dispatch relative to the first dispatch's start, in nanoseconds (timed
    /// batches): the gaps between one dispatch's end and the next one's start are launch overhead.
    pub dispatch_start_ns: Option<Vec<u64>>,
}

impl Device {
    /// Starts an empty batch.
    pub fn batch(&self) -> Batch {
        Batch { device: self.clone(), steps: Vec::new(), labels: Vec::new(), uniforms: Vec::new(), timed: false }
    }

    /// Runs one dispatch and waits for it.
    pub fn run_once(
        &self,
        program: &Program,
        args: &[Arg<'_>],
        workgroups: impl Into<Workgroups>,
    ) -> Result<BatchTiming, DeviceError> {
        let mut b = self.batch();
        b.dispatch(program, args, workgroups)?;
        b.run()
    }

    /// Resolves a workgroup request to a grid within this device's limits.
    pub fn workgroup_grid(&self, workgroups: Workgroups) -> Result<[u32; 3], DeviceError> {
        let max = self.limits().max_compute_workgroups_per_dimension;
        match workgroups {
            Workgroups::Linear(n) => spread_workgroups(n, max),
            Workgroups::Grid(g) => match g.iter().find(|&&d| d > max) {
                Some(&d) => Err(DeviceError::TooManyWorkgroups { requested: u64::from(d), max_per_dimension: max }),
                None => Ok(g),
            },
        }
    }
}

impl Batch {
    /// Times each dispatch with GPU timestamps when the device supports them (each dispatch then gets its
    /// own compute pass).
    pub fn timed(mut self, on: bool) -> Self {
        self.timed = on;
        self
    }

    /// Number of dispatches recorded.
    pub fn dispatch_count(&self) -> usize {
        self.labels.len()
    }

    /// Whether nothing is recorded.
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }

    /// Records a dispatch of `program` with `args` matched in order to [`Program::bindings`]. Checks the
    /// arguments now (count, kinds, alignment, binding size limit, read-only/read-write aliasing) and
    /// returns the dispatch's index in [`BatchTiming::dispatch_ns`].
    pub fn dispatch(
        &mut self,
        program: &Program,
        args: &[Arg<'_>],
        workgroups: impl Into<Workgroups>,
    ) -> Result<usize, DeviceError> {
        let label = program.label();
        let bindings = program.bindings();
        if bindings.len() != args.len() {
            let declared: Vec<String> = bindings
                .iter()
                .map(|b| format!("@binding({}) {} {:?}", b.binding, b.name.as_deref().unwrap_or("?"), b.kind))
                .collect();
            return Err(DeviceError::InvalidArgument(format!(
                "program `{label}` binds {} buffers ({}), the dispatch passes {}",
                bindings.len(),
                declared.join(", "),
                args.len()
            )));
        }
        let grid = self.device.workgroup_grid(workgroups.into())?;
        let align = u64::from(self.device.limits().min_uniform_buffer_offset_alignment);
        let mut entries = Vec::with_capacity(args.len());
        for (b, arg) in bindings.iter().zip(args) {
            match (b.kind, arg) {
                (BindingKind::StorageRead | BindingKind::StorageReadWrite, Arg::Buffer(r)) => {
                    self.device.check_range(r, false)?;
                    entries.push(PendingEntry::Buffer {
                        binding: b.binding,
                        buffer: r.buffer.raw().clone(),
                        offset: r.offset,
                        size: r.size,
                    });
                }
                (BindingKind::Uniform, Arg::Uniform(bytes)) => {
                    let size = pad4(bytes.len() as u64).div_ceil(16) * 16;
                    let limit = self.device.limits().max_uniform_buffer_binding_size;
                    if size > limit {
                        return Err(DeviceError::BindingTooLarge {
                            label: format!("{label} uniform @binding({})", b.binding),
                            size,
                            limit,
                            limit_name: "max_uniform_buffer_binding_size",
                        });
                    }
                    let offset = (self.uniforms.len() as u64).div_ceil(align) * align;
                    self.uniforms.resize(offset as usize, 0);
                    self.uniforms.extend_from_slice(bytes);
                    self.uniforms.resize((offset + size) as usize, 0);
                    entries.push(PendingEntry::Uniform { binding: b.binding, offset, size });
                }
                (kind, _) => {
                    return Err(DeviceError::InvalidArgument(format!(
                        "program `{label}` @binding({}) `{}` is {kind:?}; pass {}",
                        b.binding,
                        b.name.as_deref().unwrap_or("?"),
                        if kind == BindingKind::Uniform { "Arg::Uniform bytes" } else { "a buffer range" }
                    )));
                }
            }
        }
        // wgpu tracks usage per buffer: one buffer bound read-only and read-write in one dispatch is a
        // usage conflict even for disjoint ranges. Say so clearly instead of a late validation error.
        for (i, (bi, ai)) in bindings.iter().zip(args).enumerate() {
            for (bj, aj) in bindings.iter().zip(args).skip(i + 1) {
                if let (Arg::Buffer(ri), Arg::Buffer(rj)) = (ai, aj)
                    && ri.buffer.same_buffer(rj.buffer)
                    && bi.kind != bj.kind
                {
                    return Err(DeviceError::InvalidArgument(format!(
                        "program `{label}` binds buffer `{}` read-only and read-write (@binding({}) and \
                         @binding({})); wgpu forbids mixing them in one dispatch: declare both read_write",
                        ri.buffer.label(),
                        bi.binding,
                        bj.binding
                    )));
                }
            }
        }
        self.steps.push(Step::Dispatch { program: program.clone(), entries, grid });
        self.labels.push(label.to_string());
        Ok(self.labels.len() - 1)
    }

    /// Records a copy of `src` into `dst` at `dst_offset` (offsets and size multiples of 4).
    pub fn copy(&mut self, src: BufferRange<'_>, dst: &GpuBuffer, dst_offset: u64) -> Result<(), DeviceError> {
        let ok = src.offset.is_multiple_of(4)
            && src.size.is_multiple_of(4)
            && dst_offset.is_multiple_of(4)
            && src.offset.checked_add(src.size).is_some_and(|e| e <= src.buffer.padded_len())
            && dst_offset.checked_add(src.size).is_some_and(|e| e <= dst.padded_len())
            && !src.buffer.same_buffer(dst);
        if !ok {
            return Err(DeviceError::InvalidArgument(format!(
                "copy of `{}` [{}, +{}) to `{}` at {dst_offset}: offsets and size must be multiples of 4, in \
                 bounds, between different buffers",
                src.buffer.label(),
                src.offset,
                src.size,
                dst.label()
            )));
        }
        self.steps.push(Step::Copy {
            src: src.buffer.raw().clone(),
            src_offset: src.offset,
            dst: dst.raw().clone(),
            dst_offset,
            size: src.size,
        });
        Ok(())
    }

    /// Records zeroing all of `buffer`.
    pub fn clear(&mut self, buffer: &GpuBuffer) {
        self.steps.push(Step::Clear { buffer: buffer.raw().clone() });
    }

    /// Builds the uniform buffer, bind groups and timestamp queries once; the result can be run many times.
    pub fn finish(self) -> Result<RecordedBatch, DeviceError> {
        let dev = self.device.clone();
        let n = self.labels.len();
        let timed = self.timed && dev.info().has_timestamps && n > 0;
        let wdev = dev.wgpu_device().clone();
        let queue = dev.wgpu_queue().clone();
        let uniforms = self.uniforms;
        let steps = self.steps;
        let (steps, timing, uniform_buffer) = dev.checked("recording a batch", || {
            let uniform_buffer = (!uniforms.is_empty()).then(|| {
                let b = wdev.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("sinter batch uniforms"),
                    size: uniforms.len() as u64,
                    usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
                    mapped_at_creation: false,
                });
                queue.write_buffer(&b, 0, &uniforms);
                b
            });
            let ready: Vec<ReadyStep> = steps
                .into_iter()
                .map(|s| match s {
                    Step::Dispatch { program, entries, grid } => {
                        let bind_group = program.inner.layout.as_ref().map(|layout| {
                            let wgpu_entries: Vec<wgpu::BindGroupEntry<'_>> = entries
                                .iter()
                                .map(|e| {
                                    let (binding, buffer, offset, size) = match e {
                                        PendingEntry::Buffer { binding, buffer, offset, size } => {
                                            (*binding, buffer, *offset, *size)
                                        }
                                        PendingEntry::Uniform { binding, offset, size } => (
                                            *binding,
                                            uniform_buffer.as_ref().expect("uniform data implies a uniform buffer"),
                                            *offset,
                                            *size,
                                        ),
                                    };
                                    wgpu::BindGroupEntry {
                                        binding,
                                        resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                                            buffer,
                                            offset,
                                            size: wgpu::BufferSize::new(size),
                                        }),
                                    }
                                })
                                .collect();
                            wdev.create_bind_group(&wgpu::BindGroupDescriptor {
                                label: Some(program.label()),
                                layout,
                                entries: &wgpu_entries,
                            })
                        });
                        ReadyStep::Dispatch { pipeline: program.inner.pipeline.clone(), bind_group, grid }
                    }
                    Step::Copy { src, src_offset, dst, dst_offset, size } => {
                        ReadyStep::Copy { src, src_offset, dst, dst_offset, size }
                    }
                    Step::Clear { buffer } => ReadyStep::Clear { buffer },
                })
                .collect();
            let timing = timed.then(|| Timestamps::new(&wdev, n));
            (ready, timing, uniform_buffer)
        })?;
        Ok(RecordedBatch {
            device: dev,
            steps,
            labels: self.labels,
            timing,
            _uniforms: uniform_buffer,
            run_lock: Mutex::new(()),
        })
    }

    /// Finishes and runs the batch once, waiting for completion.
    pub fn run(self) -> Result<BatchTiming, DeviceError> {
        self.finish()?.run()
    }
}

/// Dispatches per query set: two timestamps each.
const PER_SET: usize = (wgpu::QUERY_SET_MAX_QUERIES / 2) as usize;

/// Query sets and buffers for per-dispatch timestamps.
struct Timestamps {
    sets: Vec<wgpu::QuerySet>,
    resolve: wgpu::Buffer,
    readback: wgpu::Buffer,
    count: usize,
}

impl Timestamps {
    /// Queries for `count` dispatches.
    fn new(device: &wgpu::Device, count: usize) -> Timestamps {
        let sets: Vec<wgpu::QuerySet> = (0..count.div_ceil(PER_SET))
            .map(|s| {
                let in_set = (count - s * PER_SET).min(PER_SET);
                device.create_query_set(&wgpu::QuerySetDescriptor {
                    label: Some("sinter dispatch timestamps"),
                    ty: wgpu::QueryType::Timestamp,
                    count: (in_set * 2) as u32,
                })
            })
            .collect();
        let bytes = (sets.len() * wgpu::QUERY_SET_MAX_QUERIES as usize * 8) as u64;
        let resolve = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("sinter timestamp resolve"),
            size: bytes,
            usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        let readback = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("sinter timestamp readback"),
            size: bytes,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        Timestamps { sets, resolve, readback, count }
    }

    /// Query set and the index of the begin timestamp of dispatch `d`.
    fn slot(&self, d: usize) -> (&wgpu::QuerySet, u32) {
        (&self.sets[d / PER_SET], ((d % PER_SET) * 2) as u32)
    }
}

/// A finished batch: bind groups, uniform data and timestamp queries built once. Run it as often as
/// needed; each run is one encoder and one submit.
pub struct RecordedBatch {
    device: Device,
    steps: Vec<ReadyStep>,
    labels: Vec<String>,
    timing: Option<Timestamps>,
    /// Kept alive for the bind groups that reference it.
    _uniforms: Option<wgpu::Buffer>,
    /// Serialises runs: the timestamp readback buffer is mapped during a run.
    run_lock: Mutex<()>,
}

impl std::fmt::Debug for RecordedBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordedBatch")
            .field("steps", &self.steps.len())
            .field("dispatches", &self.labels)
            .field("timed", &self.timing.is_some())
            .finish()
    }
}

impl RecordedBatch {
    /// Labels of the dispatches (their programs' labels), in order.
    pub fn dispatch_labels(&self) -> &[String] {
        &self.labels
    }

    /// Whether runs report per-dispatch GPU durations.
    pub fn is_timed(&self) -> bool {
        self.timing.is_some()
    }

    /// Encodes every step into one command buffer.
    fn encode(&self) -> wgpu::CommandBuffer {
        let dev = self.device.wgpu_device();
        let mut enc = dev.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("sinter batch") });
        let mut i = 0;
        let mut d = 0;
        while i < self.steps.len() {
            match &self.steps[i] {
                ReadyStep::Dispatch { .. } => {
                    let timestamp_writes = self.timing.as_ref().map(|t| {
                        let (query_set, begin) = t.slot(d);
                        wgpu::ComputePassTimestampWrites {
                            query_set,
                            beginning_of_pass_write_index: Some(begin),
                            end_of_pass_write_index: Some(begin + 1),
                        }
                    });
                    let timed = timestamp_writes.is_some();
                    let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                        label: Some("sinter dispatches"),
                        timestamp_writes,
                    });
                    // Untimed: consecutive dispatches share the pass. Timed: one dispatch per pass.
                    while let Some(ReadyStep::Dispatch { pipeline, bind_group, grid }) = self.steps.get(i) {
                        pass.set_pipeline(pipeline);
                        if let Some(bg) = bind_group {
                            pass.set_bind_group(0, bg, &[]);
                        }
                        pass.dispatch_workgroups(grid[0], grid[1], grid[2]);
                        i += 1;
                        d += 1;
                        if timed {
                            break;
                        }
                    }
                }
                ReadyStep::Copy { src, src_offset, dst, dst_offset, size } => {
                    enc.copy_buffer_to_buffer(src, *src_offset, dst, *dst_offset, *size);
                    i += 1;
                }
                ReadyStep::Clear { buffer } => {
                    enc.clear_buffer(buffer, 0, None);
                    i += 1;
                }
            }
        }
        if let Some(t) = &self.timing {
            for (s, set) in t.sets.iter().enumerate() {
                let in_set = (t.count - s * PER_SET).min(PER_SET);
                let offset = (s * wgpu::QUERY_SET_MAX_QUERIES as usize * 8) as u64;
                enc.resolve_query_set(set, 0..(in_set * 2) as u32, &t.resolve, offset);
            }
            enc.copy_buffer_to_buffer(&t.resolve, 0, &t.readback, 0, t.resolve.size());
        }
        enc.finish()
    }

    /// Submits the batch without waiting (later downloads wait for it). Timestamps are not read.
    pub fn submit(&self) -> Result<(), DeviceError> {
        let _guard = self.run_lock.lock().map_err(|_| DeviceError::Poll("a batch run panicked".into()))?;
        self.device.checked("submitting a batch", || {
            self.device.wgpu_queue().submit([self.encode()]);
        })
    }

    /// Submits the batch, waits for completion and reads back per-dispatch timestamps when timed.
    pub fn run(&self) -> Result<BatchTiming, DeviceError> {
        let _guard = self.run_lock.lock().map_err(|_| DeviceError::Poll("a batch run panicked".into()))?;
        let start = Instant::now();
        let index = self.device.checked("submitting a batch", || self.device.wgpu_queue().submit([self.encode()]))?;
        self.device
            .wgpu_device()
            .poll(wgpu::PollType::Wait { submission_index: Some(index), timeout: None })
            .map_err(|e| DeviceError::Poll(e.to_string()))?;
        let wall_ns = start.elapsed().as_nanos() as u64;
        self.device.check_lost()?;
        let Some(t) = &self.timing else {
            return Ok(BatchTiming { wall_ns, dispatch_ns: None, gpu_span_ns: None, dispatch_start_ns: None });
        };
        let bytes = self.device.read_mapped(&t.readback, "timestamp readback")?;
        let ticks: Vec<u64> =
            bytes.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8]))).collect();
        let period = f64::from(self.device.info().timestamp_period_ns);
        let at = |d: usize, end: bool| {
            let base = (d / PER_SET) * wgpu::QUERY_SET_MAX_QUERIES as usize + (d % PER_SET) * 2;
            ticks.get(base + usize::from(end)).copied().unwrap_or(0)
        };
        let ns = |ticks: u64| (ticks as f64 * period).round() as u64;
        let dispatch_ns: Vec<u64> = (0..t.count).map(|d| ns(at(d, true).saturating_sub(at(d, false)))).collect();
        let gpu_span_ns = ns(at(t.count - 1, true).saturating_sub(at(0, false)));
        let starts: Vec<u64> = (0..t.count).map(|d| ns(at(d, false).saturating_sub(at(0, false)))).collect();
        Ok(BatchTiming {
            wall_ns,
            dispatch_ns: Some(dispatch_ns),
            gpu_span_ns: Some(gpu_span_ns),
            dispatch_start_ns: Some(starts),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_small_and_large() {
        assert_eq!(spread_workgroups(0, 65535).unwrap(), [0, 1, 1]);
        assert_eq!(spread_workgroups(65535, 65535).unwrap(), [65535, 1, 1]);
        for count in [65536u64, 100_000, 1 << 20, 65535 * 65535, 65535 * 65535 + 1, 1 << 40] {
            let [x, y, z] = spread_workgroups(count, 65535).unwrap();
            let total = u64::from(x) * u64::from(y) * u64::from(z);
            assert!(total >= count, "{count}: {x}x{y}x{z}");
            // Little excess: under one x-row per y-row and z-slice.
            assert!(total - count < (u64::from(y) + 1) * u64::from(z), "{count}: {x}x{y}x{z}");
        }
        assert!(matches!(spread_workgroups(u64::MAX, 65535), Err(DeviceError::TooManyWorkgroups { .. })));
        let [x, y, z] = spread_workgroups(300, 7).unwrap();
        assert!(x <= 7 && y <= 7 && z <= 7 && x * y * z >= 300, "{x} {y} {z}");
        assert!(spread_workgroups(344, 7).is_err());
    }
}
