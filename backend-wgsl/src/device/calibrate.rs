//! Calibration: memory bandwidth and launch overhead, measured on the device. These feed `sinter calibrate`
//! and the cost model.

use serde::{Deserialize, Serialize};

use super::batch::Workgroups;
use super::{Device, DeviceError};

/// Workgroup size of the calibration kernels.
const WG: u64 = 256;

/// The copy kernel: one `vec4<f32>` per invocation, linear workgroup id per the runtime's convention.
const COPY_WGSL: &str = "
@group(0) @binding(0) var<storage, read> src: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> dst: array<vec4<f32>>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
    let i = (wg.x + nwg.x * (wg.y + nwg.y * wg.z)) * 256u + li;
    if (i < arrayLength(&dst)) {
        dst[i] = src[i];
    }
}
";

/// A kernel that does almost nothing: one workgroup of one invocation bumps a counter.
const TINY_WGSL: &str = "
@group(0) @binding(0) var<storage, read_write> counter: array<u32>;

@compute @workgroup_size(1)
fn main() {
    counter[0] = counter[0] + 1u;
}
";

/// Where a measurement's times come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TimingSource {
    /// GPU timestamps around each dispatch.
    GpuTimestamps,
    /// Host wall clock around submit and wait (includes launch overhead).
    HostWallClock,
}

/// Result of [`Device::measure_copy_bandwidth`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Bandwidth {
    /// Bytes copied per iteration (each read once and written once).
    pub bytes: u64,
    /// Bytes read plus bytes written per second, in GB/s (10^9 bytes), from the median time.
    pub gb_per_s: f64,
    /// Median time of one copy, in nanoseconds.
    pub median_ns: u64,
    /// Fastest copy, in nanoseconds.
    pub min_ns: u64,
    /// Timed iterations.
    pub iterations: u32,
    /// Storage bindings per copy (more than one when `bytes` exceeds the binding limit).
    pub chunks: u32,
    /// How it was timed.
    pub source: TimingSource,
}

/// Result of [`Device::measure_launch_overhead`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LaunchOverhead {
    /// Median host time of encoding, submitting and waiting for one tiny dispatch: the cost of a launch
    /// in the default mode.
    pub submit_round_trip_ns: u64,
    /// Extra host-visible time per additional dispatch inside one batch: the cost of a launch in
    /// `reduce-overhead` mode.
    pub batched_dispatch_ns: u64,
    /// Median GPU time of the tiny dispatch, from timestamps, when the device has them.
    pub gpu_dispatch_ns: Option<u64>,
    /// Samples behind each median.
    pub samples: u32,
}

/// Median of a non-empty list (0 when empty).
fn median(mut v: Vec<u64>) -> u64 {
    if v.is_empty() {
        return 0;
    }
    v.sort_unstable();
    v[v.len() / 2]
}

impl Device {
    /// Measures copy bandwidth with a `vec4<f32>` copy kernel over `bytes` (rounded up to 16), median of 10
    /// iterations. Buffers larger than one binding are copied in chunks.
    pub fn measure_copy_bandwidth(&self, bytes: u64) -> Result<Bandwidth, DeviceError> {
        self.measure_copy_bandwidth_with(bytes, 10)
    }

    /// [`Device::measure_copy_bandwidth`] with a chosen number of timed iterations (after one warm-up).
    pub fn measure_copy_bandwidth_with(&self, bytes: u64, iterations: u32) -> Result<Bandwidth, DeviceError> {
        if bytes == 0 || iterations == 0 {
            return Err(DeviceError::InvalidArgument(
                "measure_copy_bandwidth needs bytes > 0 and iterations > 0".into(),
            ));
        }
        let bytes = bytes.div_ceil(16) * 16;
        let src = self.alloc(bytes, "calibrate copy src")?;
        let dst = self.alloc(bytes, "calibrate copy dst")?;
        self.fill(&src, &1.5f32.to_le_bytes())?;
        let program = self.compile(COPY_WGSL, "main", "calibrate_copy_vec4")?;
        let chunks = self.plan_chunks(bytes, 16)?;
        let timed = self.info().has_timestamps;
        let reps = if timed { iterations } else { 1 };
        let mut batch = self.batch().timed(timed);
        for _ in 0..reps {
            for c in &chunks {
                batch.dispatch(
                    &program,
                    &[src.chunk(c).into(), dst.chunk(c).into()],
                    Workgroups::Linear(c.elements.div_ceil(WG)),
                )?;
            }
        }
        let recorded = batch.finish()?;
        recorded.run()?; // warm-up
        let times: Vec<u64> = if timed {
            let t = recorded.run()?;
            let per_dispatch = t.dispatch_ns.unwrap_or_default();
            per_dispatch.chunks(chunks.len()).map(|it| it.iter().sum()).collect()
        } else {
            (0..iterations).map(|_| recorded.run().map(|t| t.wall_ns)).collect::<Result<_, _>>()?
        };
        // A copy that did nothing would be timed as infinitely fast: check the ends of the destination.
        let head = self.download_range(&dst, 0, 16)?;
        let tail = self.download_range(&dst, bytes - 16, 16)?;
        let want: Vec<u8> = 1.5f32.to_le_bytes().repeat(4);
        if head != want || tail != want {
            return Err(DeviceError::Internal {
                context: "measure_copy_bandwidth".into(),
                message: "the copy kernel did not copy".into(),
            });
        }
        let median_ns = median(times.clone()).max(1);
        let min_ns = times.iter().copied().min().unwrap_or(0);
        Ok(Bandwidth {
            bytes,
            gb_per_s: 2.0 * bytes as f64 / median_ns as f64,
            median_ns,
            min_ns,
            iterations,
            chunks: chunks.len() as u32,
            source: if timed { TimingSource::GpuTimestamps } else { TimingSource::HostWallClock },
        })
    }

    /// Measures the cost of a launch: one submit round trip for a tiny dispatch, the marginal cost of one
    /// more dispatch inside a batch, and the tiny dispatch's GPU time.
    pub fn measure_launch_overhead(&self) -> Result<LaunchOverhead, DeviceError> {
        const SAMPLES: u32 = 30;
        const BATCH: usize = 128;
        let counter = self.alloc(4, "calibrate counter")?;
        let program = self.compile(TINY_WGSL, "main", "calibrate_tiny")?;

        let mut one = self.batch();
        one.dispatch(&program, &[(&counter).into()], 1u32)?;
        let one = one.finish()?;
        for _ in 0..3 {
            one.run()?;
        }
        let single: Vec<u64> = (0..SAMPLES).map(|_| one.run().map(|t| t.wall_ns)).collect::<Result<_, _>>()?;
        let submit_round_trip_ns = median(single);

        let mut many = self.batch();
        for _ in 0..BATCH {
            many.dispatch(&program, &[(&counter).into()], 1u32)?;
        }
        let many = many.finish()?;
        many.run()?;
        let batched: Vec<u64> = (0..SAMPLES / 3).map(|_| many.run().map(|t| t.wall_ns)).collect::<Result<_, _>>()?;
        let batched_dispatch_ns = median(batched).saturating_sub(submit_round_trip_ns) / (BATCH as u64 - 1);

        let gpu_dispatch_ns = if self.info().has_timestamps {
            let mut timed = self.batch().timed(true);
            for _ in 0..SAMPLES {
                timed.dispatch(&program, &[(&counter).into()], 1u32)?;
            }
            let timed = timed.finish()?;
            timed.run()?;
            timed.run()?.dispatch_ns.map(median)
        } else {
            None
        };
        Ok(LaunchOverhead { submit_round_trip_ns, batched_dispatch_ns, gpu_dispatch_ns, samples: SAMPLES })
    }
}
