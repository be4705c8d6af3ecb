//! Calibration: device-memory copy bandwidth (the driver's device-to-device copy and a hand-written
//! `float4` copy kernel) and launch overhead (host cost of `cuLaunchKernel` and `cuGraphLaunch`,
//! device throughput of back-to-back empty kernels), for the roofline's ceilings.

use super::{Device, Graph, Launch, TimingEvents};
use serde::{Deserialize, Serialize};
use sinter_core::backend::BackendError;
use sinter_core::profile::Ceilings;
use std::time::Instant;

/// The calibration kernels (self-contained CUDA C++, no headers).
const SOURCE: &str = r#"
extern "C" __global__ void sinter_calibrate_copy4(const float4* __restrict__ src, float4* __restrict__ dst,
                                                  unsigned long long n) {
    unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = src[i];
}
extern "C" __global__ void sinter_calibrate_empty(unsigned long long unused) {}
"#;

/// Measured ceilings of one device.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CudaCalibration {
    /// Bytes copied per measurement.
    pub copy_bytes: u64,
    /// `cuMemcpyDtoDAsync` bandwidth, GB/s (10^9 bytes/s) counting bytes read + written, median.
    pub memcpy_gbps: f64,
    /// The `float4` copy kernel's bandwidth, GB/s, counting bytes read + written, median.
    pub kernel_copy_gbps: f64,
    /// The better of the two: the copy ceiling.
    pub copy_gbps: f64,
    /// Device time per empty kernel launched back to back, microseconds (submit to start).
    pub launch_overhead_us: f64,
    /// Host time of one `cuLaunchKernel`, microseconds.
    pub host_launch_us: f64,
    /// Host time of one `cuGraphLaunch` of a one-kernel graph, microseconds.
    pub host_graph_launch_us: f64,
}

impl CudaCalibration {
    /// The roofline's ceilings (matmul peaks are measured apart: [`Device::matmul_peaks`]).
    pub fn ceilings(&self) -> Ceilings {
        Ceilings {
            copy_gbps: self.copy_gbps,
            launch_overhead_us: self.launch_overhead_us,
            measured: true,
            ..Ceilings::default()
        }
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Timed iterations per bandwidth measurement (after two warm-ups).
const ITERS: usize = 10;

impl Device {
    /// Measures copy bandwidth over 1 GiB (less when the device has not 2.5 GiB free) and launch
    /// overhead. Takes about a second; frees what it allocated (and empties the pool's cache).
    pub fn calibrate(&self) -> Result<CudaCalibration, BackendError> {
        let (free, _) = self.mem_info()?;
        let mut bytes: u64 = 1 << 30;
        while bytes > (16 << 20) && 2 * bytes + (512 << 20) > free {
            bytes /= 2;
        }
        self.calibrate_with(bytes)
    }

    /// [`Device::calibrate`] copying `bytes` (rounded up to 16).
    pub fn calibrate_with(&self, bytes: u64) -> Result<CudaCalibration, BackendError> {
        let bytes = bytes.max(16).div_ceil(16) * 16;
        let cc = self.info().cc;
        let cubin = crate::nvrtc::compile("sinter_calibrate", SOURCE, &crate::nvrtc::Target::sm(cc)).map_err(|e| {
            BackendError::Compile { kernel: "sinter_calibrate".into(), log: e.to_string(), code: SOURCE.into() }
        })?;
        let stream = self.new_stream()?;
        let src = stream.alloc(bytes)?;
        let dst = stream.alloc(bytes)?;
        stream.fill(src.ptr(), 0x3c, bytes, "calibration source")?;
        let events = TimingEvents::new(self, ITERS)?;
        let gbps = |ms: f64| 2.0 * bytes as f64 / (ms * 1e6);

        // Driver copy.
        let mut times = Vec::with_capacity(ITERS);
        for it in 0..ITERS + 2 {
            let timed = it >= 2;
            if timed {
                events.record(it - 2, false, &stream)?;
            }
            stream.copy(dst.ptr(), src.ptr(), bytes, "calibration copy")?;
            if timed {
                events.record(it - 2, true, &stream)?;
            }
        }
        for i in 0..ITERS {
            times.push(events.elapsed_ms(i, i, true)?);
        }
        let memcpy_gbps = gbps(median(times));

        // float4 copy kernel.
        let n4 = bytes / 16;
        let blocks = n4.div_ceil(256);
        if blocks > i32::MAX as u64 {
            return Err(BackendError::Device(format!("calibration copy of {bytes} bytes needs too many blocks")));
        }
        let copy = self.load_function(&cubin.image, "sinter_calibrate_copy4")?;
        let copy = Launch::new(
            self,
            copy,
            "sinter_calibrate_copy4",
            [blocks as u32, 1, 1],
            [256, 1, 1],
            0,
            &[src.ptr(), dst.ptr(), n4],
        )?;
        let mut times = Vec::with_capacity(ITERS);
        for it in 0..ITERS + 2 {
            let timed = it >= 2;
            if timed {
                events.record(it - 2, false, &stream)?;
            }
            copy.launch(&stream)?;
            if timed {
                events.record(it - 2, true, &stream)?;
            }
        }
        for i in 0..ITERS {
            times.push(events.elapsed_ms(i, i, true)?);
        }
        let kernel_copy_gbps = gbps(median(times));
        stream.synchronize("calibration")?;
        drop((src, dst));

        // Launch overhead.
        let empty = self.load_function(&cubin.image, "sinter_calibrate_empty")?;
        let empty = Launch::new(self, empty, "sinter_calibrate_empty", [1, 1, 1], [1, 1, 1], 0, &[0])?;
        for _ in 0..100 {
            empty.launch(&stream)?;
        }
        stream.synchronize("calibration")?;
        const N: usize = 2000;
        let t = Instant::now();
        for _ in 0..N {
            empty.launch(&stream)?;
        }
        let host_launch_us = t.elapsed().as_secs_f64() * 1e6 / N as f64;
        stream.synchronize("calibration")?;
        events.record(0, false, &stream)?;
        for _ in 0..N {
            empty.launch(&stream)?;
        }
        events.record(0, true, &stream)?;
        let launch_overhead_us = events.elapsed_ms(0, 0, true)? * 1e3 / N as f64;
        let graph = Graph::capture(&stream, "calibration graph", || empty.launch(&stream).map(|_| 1))?;
        let host_graph_launch_us = match graph {
            Some(g) => {
                for _ in 0..100 {
                    g.launch(&stream, "calibration graph")?;
                }
                stream.synchronize("calibration")?;
                let t = Instant::now();
                for _ in 0..N {
                    g.launch(&stream, "calibration graph")?;
                }
                let us = t.elapsed().as_secs_f64() * 1e6 / N as f64;
                stream.synchronize("calibration")?;
                us
            }
            None => 0.0,
        };
        drop(stream);
        self.pool().empty_cache()?;
        Ok(CudaCalibration {
            copy_bytes: bytes,
            memcpy_gbps,
            kernel_copy_gbps,
            copy_gbps: memcpy_gbps.max(kernel_copy_gbps),
            launch_overhead_us,
            host_launch_us,
            host_graph_launch_us,
        })
    }
}
