//! Profiles of compiled (and eager) runs: the data model the runtime fills, the artifact folder it
//! is written to, the Chrome Trace Event export and the roofline analysis.
//!
//! # Recording (for runtimes)
//! ```
//! use sinter_core::profile::*;
//! let device = DeviceInfo::new("example GPU", "wgsl", Ceilings::default());
//! let mut b = ProfileBuilder::new("layernorm_gelu", "wgsl", Mode::Compiled, device);
//! // Compile phases: time them directly, or record them earlier with a `SpanRecorder`.
//! b.time_span(SpanCategory::Pass, "decompose", || { /* run the pass */ });
//! let k = b.add_kernel(KernelProfile::new("k0_layernorm_gelu").ops(["layer_norm", "gelu"]).nodes([1, 2]).bytes(2.0e8));
//! for it in 0..3 {
//!     let start = b.now_ns();
//!     // ... encode / launch the kernel ...
//!     let end = b.now_ns();
//!     // Device timestamps, converted to the builder's clock (see `DeviceClock`).
//!     b.push_launch(Launch::new(k, it, start, end).device(end + 1000.0, end + 51_000.0));
//! }
//! let profile = b.finish().unwrap();
//! assert_eq!(profile.kernels[0].stats.as_ref().unwrap().median_ns, 50_000.0);
//! ```
//! The runtime then calls [`Profile::write`]; [`analyze`] gives roofline verdicts and
//! [`chrome_trace`] the `trace.json` that Perfetto and `chrome://tracing` open.
//!
//! # Artifact folder (schema version [`SCHEMA_VERSION`]; full text in `docs/ARTIFACTS.md`)
//! - `profile.json` (compiled run) / `profile_eager.json` (eager run): a serialized [`Profile`].
//! - `trace.json` / `trace_eager.json`: Chrome Trace Event JSON from [`chrome_trace`].
//! - `fusion.json` (optional; the decisions are in `profile.json` too): either
//!   `{"schema_version": N, "decisions": [FusionDecision...]}` or the compile driver's bare array
//!   of [`crate::kernel::FusionDecision`].
//! - Written by other parts of sinter and read by the viewer: `graph.txt`, `ir_pre_fusion.txt`,
//!   `ir_post_fusion.txt`, `kernels/<name>.wgsl|.cu`, `passes/NN_<name>.txt`.
//!
//! # Trace schema
//! `{"traceEvents": [...], "displayTimeUnit": "ns", "otherData": {"sinter_schema_version": N, ...}}`;
//! `ts` and `dur` are microseconds (fractional, so nanoseconds survive) from the start of the profile.
//! - pid 1 `host`: tid 1 `launches` (one `X` event per kernel launch, cat `launch`), tid 2
//!   `compiler` (one `X` event per compile span, cat = the [`SpanCategory`]).
//! - pid 2 `device`: tid `1 + stream` (`queue N`), one `X` event per kernel execution, cat `kernel`,
//!   `args` = kernel index, iteration, grid, block, bytes, flops, achieved GB/s and TFLOP/s,
//!   verdict, ops, nodes, registers, shared memory.
//! - Flows: `ph:"s"` at the host launch and `ph:"f"`, `bp:"e"` at its kernel, sharing `id` (the
//!   launch index), cat `launch`.
//! - `ph:"M"` metadata events name every process and thread; events on a track always nest.

use crate::ir::{Graph, Op};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Version of the artifact-folder schema (`profile.json`, `trace.json`, `fusion.json`,
/// calibration files). Bumped on any incompatible change; readers refuse other versions.
pub const SCHEMA_VERSION: u32 = 1;

/// The sinter version that writes profiles.
pub const SINTER_VERSION: &str = env!("CARGO_PKG_VERSION");

/// File name of a compiled run's profile.
pub const PROFILE_FILE: &str = "profile.json";
/// File name of an eager run's profile.
pub const EAGER_PROFILE_FILE: &str = "profile_eager.json";
/// File name of a compiled run's Chrome trace.
pub const TRACE_FILE: &str = "trace.json";
/// File name of an eager run's Chrome trace.
pub const EAGER_TRACE_FILE: &str = "trace_eager.json";
/// File name of the fusion decisions.
pub const FUSION_FILE: &str = "fusion.json";

/// Roofline: a kernel shorter than this many launch overheads is overhead-bound.
pub const OVERHEAD_TIME_FACTOR: f64 = 5.0;
/// Roofline: a kernel reaching less than this fraction of both ceilings ...
pub const LOW_UTILIZATION: f64 = 0.10;
/// Roofline: ... while running shorter than this (ns) is overhead-bound (too little work).
pub const SMALL_KERNEL_NS: f64 = 20_000.0;

/// Errors reading or writing profiles, artifact folders and calibration files.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    /// A file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A file is not valid JSON of the expected shape.
    #[error("{}: not a valid sinter file: {msg}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        msg: String,
    },
    /// The folder holds no profile.
    #[error(
        "no sinter profile in {}: expected {PROFILE_FILE} or {EAGER_PROFILE_FILE} (create one with `sinter profile --out DIR`)",
        dir.display()
    )]
    NotFound {
        /// The folder.
        dir: PathBuf,
    },
    /// The file has no `schema_version`.
    #[error("{}: no `schema_version` field; this is not a sinter artifact (or one from before versioning)", path.display())]
    MissingSchema {
        /// The file.
        path: PathBuf,
    },
    /// The file was written with a schema version this sinter cannot read.
    #[error(
        "{}: schema version {found} (written by sinter {writer}), but this sinter {SINTER_VERSION} reads only schema version {SCHEMA_VERSION}; open it with the sinter that wrote it, or re-run `sinter profile` to regenerate the folder",
        path.display()
    )]
    UnsupportedSchema {
        /// The file.
        path: PathBuf,
        /// The version found.
        found: u64,
        /// The writer's `sinter_version`, or `unknown`.
        writer: String,
    },
    /// The profile is inconsistent (e.g. a launch names a kernel that does not exist).
    #[error("invalid profile: {0}")]
    Invalid(String),
    /// No calibration cache folder could be determined.
    #[error("no cache folder: set SINTER_CACHE_DIR or HOME")]
    NoCacheDir,
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> ProfileError + '_ {
    move |source| ProfileError::Io { path: path.to_path_buf(), source }
}

/// Eager (one kernel per op) or compiled (fused) execution.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Each op runs on its own.
    Eager,
    /// sinter's fused kernels.
    Compiled,
}

impl Mode {
    /// The profile file name for this mode.
    pub fn profile_file(self) -> &'static str {
        match self {
            Mode::Eager => EAGER_PROFILE_FILE,
            Mode::Compiled => PROFILE_FILE,
        }
    }

    /// The trace file name for this mode.
    pub fn trace_file(self) -> &'static str {
        match self {
            Mode::Eager => EAGER_TRACE_FILE,
            Mode::Compiled => TRACE_FILE,
        }
    }

    /// `eager` or `compiled`.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Eager => "eager",
            Mode::Compiled => "compiled",
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A device's performance ceilings, ideally measured by `sinter calibrate`.
/// Zero means unknown; [`Ceilings::default`] knows nothing.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Ceilings {
    /// Device-memory copy bandwidth, GB/s (10^9 bytes per second), counting bytes read + written.
    pub copy_gbps: f64,
    /// Peak matmul rate per dtype name (`f32`, `f16`, `bf16`, ...), TFLOP/s (10^12 FLOP/s).
    pub matmul_tflops: BTreeMap<String, f64>,
    /// Cost of one kernel launch (submit to start, back to back), microseconds.
    pub launch_overhead_us: f64,
    /// True when measured on this device; false for nominal (data-sheet) or unknown values.
    pub measured: bool,
}

/// The on-disk form of a cached calibration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct CalibrationFile {
    schema_version: u32,
    sinter_version: String,
    adapter: String,
    created_unix_s: u64,
    ceilings: Ceilings,
}

impl Ceilings {
    /// Peak FLOP/s (in TFLOP/s) for work in `dtype`: its own entry, else `f32`'s, else the
    /// largest known. `None` when nothing is known.
    pub fn peak_tflops(&self, dtype: &str) -> Option<f64> {
        let ok = |v: &f64| v.is_finite() && *v > 0.0;
        self.matmul_tflops
            .get(dtype)
            .filter(|v| ok(v))
            .or_else(|| self.matmul_tflops.get("f32").filter(|v| ok(v)))
            .or_else(|| self.matmul_tflops.values().filter(|v| ok(v)).max_by(|a, b| a.total_cmp(b)))
            .copied()
    }

    /// Copy bandwidth when known.
    pub fn bandwidth_gbps(&self) -> Option<f64> {
        (self.copy_gbps.is_finite() && self.copy_gbps > 0.0).then_some(self.copy_gbps)
    }

    /// Launch overhead in ns when known.
    pub fn launch_overhead_ns(&self) -> Option<f64> {
        (self.launch_overhead_us.is_finite() && self.launch_overhead_us > 0.0).then_some(self.launch_overhead_us * 1e3)
    }

    /// The ridge point (FLOP per byte) for `dtype`: kernels of higher arithmetic intensity are
    /// compute-bound, lower bandwidth-bound.
    pub fn ridge_point(&self, dtype: &str) -> Option<f64> {
        Some(self.peak_tflops(dtype)? * 1e12 / (self.bandwidth_gbps()? * 1e9))
    }

    /// The calibration cache folder: `$SINTER_CACHE_DIR/calibration`, else
    /// `$XDG_CACHE_HOME/sinter/calibration`, else `~/.cache/sinter/calibration`.
    pub fn cache_dir() -> Result<PathBuf, ProfileError> {
        let root = if let Some(d) = std::env::var_os("SINTER_CACHE_DIR").filter(|d| !d.is_empty()) {
            PathBuf::from(d)
        } else if let Some(d) = std::env::var_os("XDG_CACHE_HOME").filter(|d| !d.is_empty()) {
            PathBuf::from(d).join("sinter")
        } else if let Some(h) = std::env::var_os("HOME").filter(|d| !d.is_empty()) {
            PathBuf::from(h).join(".cache").join("sinter")
        } else {
            return Err(ProfileError::NoCacheDir);
        };
        Ok(root.join("calibration"))
    }

    /// A file-name-safe key for an adapter (e.g. from its name, backend and driver): letters,
    /// digits, `-`, `_` and `.` kept, anything else becomes `_`.
    pub fn adapter_key(parts: &[&str]) -> String {
        let joined = parts.join("-");
        let key: String = joined
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') { c } else { '_' })
            .collect();
        if key.is_empty() { "adapter".to_string() } else { key }
    }

    /// Loads the cached ceilings of an adapter from [`Ceilings::cache_dir`]; `Ok(None)` when
    /// the adapter was never calibrated.
    pub fn load(adapter_key: &str) -> Result<Option<Ceilings>, ProfileError> {
        Ceilings::load_from(&Ceilings::cache_dir()?, adapter_key)
    }

    /// Saves these ceilings for an adapter under [`Ceilings::cache_dir`]; returns the file.
    pub fn save(&self, adapter_key: &str) -> Result<PathBuf, ProfileError> {
        self.save_to(&Ceilings::cache_dir()?, adapter_key)
    }

    /// Loads `<dir>/<key>.json`; `Ok(None)` when it does not exist.
    pub fn load_from(dir: &Path, adapter_key: &str) -> Result<Option<Ceilings>, ProfileError> {
        let path = dir.join(format!("{}.json", Ceilings::adapter_key(&[adapter_key])));
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_err(&path)(e)),
        };
        let value: Value = parse_json(&path, &text)?;
        check_schema(&path, &value)?;
        let file: CalibrationFile = serde_json::from_value(value)
            .map_err(|e| ProfileError::Parse { path: path.clone(), msg: e.to_string() })?;
        Ok(Some(file.ceilings))
    }

    /// Saves to `<dir>/<key>.json`, creating `dir`; returns the file.
    pub fn save_to(&self, dir: &Path, adapter_key: &str) -> Result<PathBuf, ProfileError> {
        std::fs::create_dir_all(dir).map_err(io_err(dir))?;
        let path = dir.join(format!("{}.json", Ceilings::adapter_key(&[adapter_key])));
        let file = CalibrationFile {
            schema_version: SCHEMA_VERSION,
            sinter_version: SINTER_VERSION.to_string(),
            adapter: adapter_key.to_string(),
            created_unix_s: SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0),
            ceilings: self.clone(),
        };
        write_json(&path, &file, true)?;
        Ok(path)
    }
}

/// The device a profile was recorded on.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DeviceInfo {
    /// Adapter name (e.g. `NVIDIA H100 80GB HBM3`).
    pub name: String,
    /// Backend (`wgsl`, `cuda`, `cpu`).
    pub backend: String,
    /// The ceilings the roofline is drawn against.
    pub ceilings: Ceilings,
}

impl DeviceInfo {
    /// A device from parts.
    pub fn new(name: impl Into<String>, backend: impl Into<String>, ceilings: Ceilings) -> DeviceInfo {
        DeviceInfo { name: name.into(), backend: backend.into(), ceilings }
    }
}

/// Summary statistics of a kernel's device times.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TimeStats {
    /// Number of samples.
    pub count: usize,
    /// Fastest, ns.
    pub min_ns: f64,
    /// Median, ns (mean of the middle two for even counts).
    pub median_ns: f64,
    /// Mean, ns.
    pub mean_ns: f64,
    /// Slowest, ns.
    pub max_ns: f64,
}

impl TimeStats {
    /// Statistics of finite samples; `None` when there are none.
    pub fn from_samples(samples: &[f64]) -> Option<TimeStats> {
        let mut v: Vec<f64> = samples.iter().copied().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(|a, b| a.total_cmp(b));
        let n = v.len();
        let median = if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 };
        Some(TimeStats {
            count: n,
            min_ns: v[0],
            median_ns: median,
            mean_ns: v.iter().sum::<f64>() / n as f64,
            max_ns: v[n - 1],
        })
    }
}

/// One generated kernel and what it cost.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct KernelProfile {
    /// Kernel name (also its source file stem under `kernels/`).
    pub name: String,
    /// The user-level ops fused into it (origin op names, in graph order, unique).
    #[serde(default)]
    pub ops: Vec<String>,
    /// The captured-graph node ids fused into it (the nodes' origins).
    #[serde(default)]
    pub nodes: Vec<u32>,
    /// Workgroups / blocks launched per axis.
    #[serde(default)]
    pub grid: [u32; 3],
    /// Workgroup / block size per axis.
    #[serde(default)]
    pub block: [u32; 3],
    /// Bytes moved to and from device memory per launch (reads + writes), from the kernel IR.
    #[serde(default)]
    pub bytes: f64,
    /// Floating-point operations per launch, from the kernel IR.
    #[serde(default)]
    pub flops: f64,
    /// The dtype its arithmetic runs in (picks the compute ceiling), e.g. `f32`.
    #[serde(default)]
    pub dtype: String,
    /// Device time of each launch, ns, in launch order.
    #[serde(default)]
    pub times_ns: Vec<f64>,
    /// Statistics of `times_ns`; `None` when no device time was recorded.
    #[serde(default)]
    pub stats: Option<TimeStats>,
    /// Registers per thread, where the backend reports them.
    #[serde(default)]
    pub registers: Option<u32>,
    /// Shared (workgroup) memory per block in bytes, where known.
    #[serde(default)]
    pub shared_mem_bytes: Option<u64>,
    /// The source file, relative to the artifact folder (e.g. `kernels/k0.wgsl`).
    #[serde(default)]
    pub source_path: Option<String>,
    /// The queue / stream it ran on (device track `1 + stream` in the trace).
    #[serde(default)]
    pub stream: u32,
}

impl KernelProfile {
    /// A kernel with only a name; fill the rest with the setters.
    pub fn new(name: impl Into<String>) -> KernelProfile {
        KernelProfile { name: name.into(), dtype: "f32".into(), ..Default::default() }
    }

    /// A kernel's name, user ops, origins, bytes, FLOPs and compute dtype from the kernel IR
    /// (the matmul input dtype, else the dtype of the first buffer it writes).
    pub fn from_kernel(k: &crate::kernel::Kernel) -> KernelProfile {
        use crate::kernel::{Access, KernelBody};
        let dtype = match &k.body {
            KernelBody::Matmul(m) => m.in_dtype,
            _ => k
                .args
                .iter()
                .find(|a| a.access == Access::Write)
                .or(k.args.first())
                .map_or(crate::DType::F32, |a| a.dtype),
        };
        KernelProfile::new(k.name.clone())
            .ops(k.ops.iter().cloned())
            .nodes(k.origins.iter().copied())
            .bytes(k.bytes)
            .flops(k.flops)
            .dtype(dtype.name())
    }

    /// Sets the user ops fused into it.
    pub fn ops<S: Into<String>>(mut self, ops: impl IntoIterator<Item = S>) -> Self {
        self.ops = ops.into_iter().map(Into::into).collect();
        self
    }

    /// Sets the captured-graph node ids fused into it.
    pub fn nodes(mut self, nodes: impl IntoIterator<Item = u32>) -> Self {
        self.nodes = nodes.into_iter().collect();
        self
    }

    /// Sets ops and nodes from the origins of the scheduled nodes (`(origin node, origin op)`
    /// pairs in any order, duplicates allowed): nodes sorted and unique, ops in node order.
    pub fn origins<'a>(mut self, origins: impl IntoIterator<Item = (u32, &'a str)>) -> Self {
        let mut m: BTreeMap<u32, &str> = BTreeMap::new();
        for (n, op) in origins {
            m.entry(n).or_insert(op);
        }
        self.nodes = m.keys().copied().collect();
        self.ops.clear();
        for op in m.values() {
            if !self.ops.iter().any(|o| o == op) {
                self.ops.push(op.to_string());
            }
        }
        self
    }

    /// Sets the grid (workgroups per axis).
    pub fn grid(mut self, grid: [u32; 3]) -> Self {
        self.grid = grid;
        self
    }

    /// Sets the block (workgroup size).
    pub fn block(mut self, block: [u32; 3]) -> Self {
        self.block = block;
        self
    }

    /// Sets bytes moved per launch.
    pub fn bytes(mut self, bytes: f64) -> Self {
        self.bytes = bytes;
        self
    }

    /// Sets FLOPs per launch.
    pub fn flops(mut self, flops: f64) -> Self {
        self.flops = flops;
        self
    }

    /// Sets the compute dtype.
    pub fn dtype(mut self, dtype: impl Into<String>) -> Self {
        self.dtype = dtype.into();
        self
    }

    /// Sets registers per thread.
    pub fn registers(mut self, registers: u32) -> Self {
        self.registers = Some(registers);
        self
    }

    /// Sets shared memory per block, bytes.
    pub fn shared_mem_bytes(mut self, bytes: u64) -> Self {
        self.shared_mem_bytes = Some(bytes);
        self
    }

    /// Sets the source path relative to the artifact folder.
    pub fn source_path(mut self, path: impl Into<String>) -> Self {
        self.source_path = Some(path.into());
        self
    }

    /// Sets the queue / stream.
    pub fn stream(mut self, stream: u32) -> Self {
        self.stream = stream;
        self
    }

    /// Median device time, ns.
    pub fn median_ns(&self) -> Option<f64> {
        self.stats.as_ref().map(|s| s.median_ns)
    }
}

/// One launch of a kernel: host-side span and, when timed, the device-side execution. All
/// times are ns on the profile's clock (see [`ProfileBuilder::now_ns`] and [`DeviceClock`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Launch {
    /// Index into [`Profile::kernels`].
    pub kernel: usize,
    /// Which timed iteration (0-based).
    pub iteration: u32,
    /// Host: when the launch (encode / `cuLaunchKernel`) began.
    pub host_start_ns: f64,
    /// Host: when it returned.
    pub host_end_ns: f64,
    /// Device: when the kernel started, when timed.
    #[serde(default)]
    pub device_start_ns: Option<f64>,
    /// Device: when it finished, when timed.
    #[serde(default)]
    pub device_end_ns: Option<f64>,
}

impl Launch {
    /// A launch with host times only.
    pub fn new(kernel: usize, iteration: u32, host_start_ns: f64, host_end_ns: f64) -> Launch {
        Launch { kernel, iteration, host_start_ns, host_end_ns, device_start_ns: None, device_end_ns: None }
    }

    /// Adds device times.
    pub fn device(mut self, start_ns: f64, end_ns: f64) -> Launch {
        self.device_start_ns = Some(start_ns);
        self.device_end_ns = Some(end_ns);
        self
    }

    /// Device `(start, end)` when both are present.
    pub fn device_span(&self) -> Option<(f64, f64)> {
        Some((self.device_start_ns?, self.device_end_ns?))
    }

    /// Device duration, ns.
    pub fn device_ns(&self) -> Option<f64> {
        self.device_span().map(|(s, e)| e - s)
    }
}

/// Maps raw device timestamps (GPU timestamp queries, CUDA event times) onto the profile clock by
/// anchoring one device timestamp to one host time (e.g. the first kernel's start to the submit).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DeviceClock {
    /// Added to raw device ns to get profile ns.
    pub offset_ns: f64,
}

impl DeviceClock {
    /// A clock under which raw device time `device_raw_ns` is host time `host_ns`.
    pub fn anchor(host_ns: f64, device_raw_ns: f64) -> DeviceClock {
        DeviceClock { offset_ns: host_ns - device_raw_ns }
    }

    /// Raw device ns to profile ns.
    pub fn to_host(self, device_raw_ns: f64) -> f64 {
        device_raw_ns + self.offset_ns
    }
}

/// What a compile span measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SpanCategory {
    /// Capturing the user's program or importing a model.
    Capture,
    /// A named graph pass (decompose, CSE, DCE, ...).
    Pass,
    /// The fusion scheduler.
    Fuse,
    /// Kernel IR to source text.
    Codegen,
    /// The backend compiler (naga + pipeline creation, NVRTC).
    BackendCompile,
    /// Autotuning (timing candidate configs).
    Autotune,
    /// Cache lookups and stores.
    Cache,
    /// Anything else (memory planning, buffer setup).
    Other,
}

impl SpanCategory {
    /// The snake_case name (also the trace event `cat`).
    pub fn name(self) -> &'static str {
        match self {
            SpanCategory::Capture => "capture",
            SpanCategory::Pass => "pass",
            SpanCategory::Fuse => "fuse",
            SpanCategory::Codegen => "codegen",
            SpanCategory::BackendCompile => "backend_compile",
            SpanCategory::Autotune => "autotune",
            SpanCategory::Cache => "cache",
            SpanCategory::Other => "other",
        }
    }
}

/// A timed compile phase.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Span {
    /// Phase name (e.g. the pass name).
    pub name: String,
    /// Its category.
    pub category: SpanCategory,
    /// Start, ns on the profile clock.
    pub start_ns: f64,
    /// Duration, ns.
    pub dur_ns: f64,
    /// Free-form detail (e.g. `cache hit`, `12 nodes removed`).
    #[serde(default)]
    pub detail: String,
}

/// Records compile spans before a [`ProfileBuilder`] exists (compilation happens before
/// profiling); hand it over with [`ProfileBuilder::add_recorded_spans`].
#[derive(Clone, Debug)]
pub struct SpanRecorder {
    origin: Instant,
    spans: Vec<Span>,
}

impl Default for SpanRecorder {
    fn default() -> Self {
        SpanRecorder::new()
    }
}

impl SpanRecorder {
    /// A recorder whose clock starts now.
    pub fn new() -> SpanRecorder {
        SpanRecorder { origin: Instant::now(), spans: Vec::new() }
    }

    /// Runs `f`, recording its duration as a span.
    pub fn record<R>(&mut self, category: SpanCategory, name: &str, f: impl FnOnce() -> R) -> R {
        let start = Instant::now();
        let r = f();
        self.push(category, name, start, Instant::now(), "");
        r
    }

    /// Records a span between two instants.
    pub fn push(&mut self, category: SpanCategory, name: &str, start: Instant, end: Instant, detail: &str) {
        let start_ns = signed_ns(self.origin, start);
        let dur_ns = (signed_ns(self.origin, end) - start_ns).max(0.0);
        self.spans.push(Span { name: name.to_string(), category, start_ns, dur_ns, detail: detail.to_string() });
    }

    /// Sets the detail of the most recent span (e.g. `cache hit` once known).
    pub fn set_last_detail(&mut self, detail: &str) {
        if let Some(s) = self.spans.last_mut() {
            s.detail = detail.to_string();
        }
    }

    /// The spans so far, ns from this recorder's creation.
    pub fn spans(&self) -> &[Span] {
        &self.spans
    }

    /// The instant the recorder's clock counts from.
    pub fn origin(&self) -> Instant {
        self.origin
    }
}

/// `to - from` in ns, negative when `to` is earlier.
fn signed_ns(from: Instant, to: Instant) -> f64 {
    if to >= from { (to - from).as_nanos() as f64 } else { -((from - to).as_nanos() as f64) }
}

/// One fusion decision of the scheduler.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FusionDecision {
    /// Captured-graph node ids involved (both sides of the decision).
    pub nodes: Vec<u32>,
    /// The kernel(s) these nodes ended up in: one when fused, the two kept apart when refused.
    #[serde(default)]
    pub kernels: Vec<String>,
    /// Whether they were fused.
    pub fused: bool,
    /// Why fused (e.g. `elementwise epilogue`), or the named refusal reason (e.g.
    /// `reduction followed by broadcast`, `would bind 9 buffers, limit 8`).
    pub reason: String,
}

/// The `fusion.json` file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FusionFile {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The decisions in the order the scheduler made them.
    pub decisions: Vec<FusionDecision>,
}

impl FusionFile {
    /// Reads `<dir>/fusion.json`; `Ok(None)` when absent. Accepts this versioned form and the
    /// compile driver's debug artifact (a bare array of [`crate::kernel::FusionDecision`], whose
    /// `origins` become the captured-graph `nodes`).
    pub fn read(dir: &Path) -> Result<Option<FusionFile>, ProfileError> {
        let path = dir.join(FUSION_FILE);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_err(&path)(e)),
        };
        let value = parse_json(&path, &text)?;
        if value.is_array() {
            let raw: Vec<crate::kernel::FusionDecision> =
                serde_json::from_value(value).map_err(|e| ProfileError::Parse { path, msg: e.to_string() })?;
            let decisions = raw.iter().map(FusionDecision::from).collect();
            return Ok(Some(FusionFile { schema_version: SCHEMA_VERSION, decisions }));
        }
        check_schema(&path, &value)?;
        serde_json::from_value(value).map(Some).map_err(|e| ProfileError::Parse { path, msg: e.to_string() })
    }
}

impl From<&crate::kernel::FusionDecision> for FusionDecision {
    /// The scheduler's decision in captured-graph terms: `nodes` are its origins (or its own
    /// nodes when it recorded none).
    fn from(d: &crate::kernel::FusionDecision) -> FusionDecision {
        FusionDecision {
            nodes: if d.origins.is_empty() { d.nodes.clone() } else { d.origins.clone() },
            kernels: d.kernels.clone(),
            fused: d.fused,
            reason: d.reason.clone(),
        }
    }
}

/// One node of the captured graph, as the viewer draws it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GraphNode {
    /// Node id (`%id`).
    pub id: u32,
    /// Op name (`layer_norm`, `matmul`, `input`, ...).
    pub op: String,
    /// Operand node ids.
    pub inputs: Vec<u32>,
    /// Result type, printed (`f32[8192, 4096]`).
    pub ty: String,
    /// Attributes, printed (`axis=1, eps=1e-5`); the input's name for inputs.
    #[serde(default)]
    pub attrs: String,
}

/// The captured (user's) graph, small enough to store in a profile (constants summarized).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GraphSummary {
    /// Nodes in topological order.
    pub nodes: Vec<GraphNode>,
    /// `(name, node id)` of each output.
    pub outputs: Vec<(String, u32)>,
}

impl GraphSummary {
    /// Summarizes a graph.
    pub fn from_graph(g: &Graph) -> GraphSummary {
        let nodes = g
            .iter()
            .map(|(id, n)| GraphNode {
                id: id.0,
                op: n.op.name().to_string(),
                inputs: n.inputs.iter().map(|i| i.0).collect(),
                ty: n.ty.to_string(),
                attrs: match &n.op {
                    Op::Input { name } => name.clone(),
                    op => op.attrs().into_iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(", "),
                },
            })
            .collect();
        GraphSummary { nodes, outputs: g.outputs.iter().map(|o| (o.name.clone(), o.node.0)).collect() }
    }
}

/// Everything measured about one run of a workload.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Profile {
    /// [`SCHEMA_VERSION`] of the writer.
    pub schema_version: u32,
    /// sinter version of the writer.
    pub sinter_version: String,
    /// Workload or model name.
    pub workload: String,
    /// Backend (`wgsl`, `cuda`, `cpu`).
    pub backend: String,
    /// Eager or compiled.
    pub mode: Mode,
    /// The device and its ceilings.
    pub device: DeviceInfo,
    /// Number of timed iterations.
    pub iterations: u32,
    /// The kernels.
    pub kernels: Vec<KernelProfile>,
    /// Every launch, in launch order.
    pub launches: Vec<Launch>,
    /// Compile phases.
    #[serde(default)]
    pub compile_spans: Vec<Span>,
    /// The scheduler's fusion decisions.
    #[serde(default)]
    pub fusion: Vec<FusionDecision>,
    /// Peak device memory allocated, when known.
    #[serde(default)]
    pub peak_memory_bytes: Option<u64>,
    /// The captured graph, when recorded.
    #[serde(default)]
    pub graph: Option<GraphSummary>,
}

fn parse_json(path: &Path, text: &str) -> Result<Value, ProfileError> {
    serde_json::from_str(text).map_err(|e| ProfileError::Parse { path: path.to_path_buf(), msg: e.to_string() })
}

fn check_schema(path: &Path, value: &Value) -> Result<(), ProfileError> {
    let found = match value.get("schema_version") {
        None => return Err(ProfileError::MissingSchema { path: path.to_path_buf() }),
        Some(v) => v.as_u64().ok_or_else(|| ProfileError::Parse {
            path: path.to_path_buf(),
            msg: format!("`schema_version` is {v}, not a non-negative integer"),
        })?,
    };
    if found != SCHEMA_VERSION as u64 {
        let writer = value.get("sinter_version").and_then(Value::as_str).unwrap_or("unknown").to_string();
        return Err(ProfileError::UnsupportedSchema { path: path.to_path_buf(), found, writer });
    }
    Ok(())
}

fn write_json<T: Serialize>(path: &Path, value: &T, pretty: bool) -> Result<(), ProfileError> {
    let text = if pretty { serde_json::to_string_pretty(value) } else { serde_json::to_string(value) }
        .map_err(|e| ProfileError::Parse { path: path.to_path_buf(), msg: e.to_string() })?;
    // Write then rename, so a reader never sees half a file.
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, text).map_err(io_err(&tmp))?;
    std::fs::rename(&tmp, path).map_err(io_err(path))
}

impl Profile {
    /// An empty profile of the current schema.
    pub fn new(workload: impl Into<String>, backend: impl Into<String>, mode: Mode, device: DeviceInfo) -> Profile {
        Profile {
            schema_version: SCHEMA_VERSION,
            sinter_version: SINTER_VERSION.to_string(),
            workload: workload.into(),
            backend: backend.into(),
            mode,
            device,
            iterations: 0,
            kernels: Vec::new(),
            launches: Vec::new(),
            compile_spans: Vec::new(),
            fusion: Vec::new(),
            peak_memory_bytes: None,
            graph: None,
        }
    }

    /// Writes the profile into the artifact folder `dir` (created if needed): `profile.json` and
    /// `trace.json` for a compiled run, `profile_eager.json` and `trace_eager.json` for an eager
    /// one. Other files in `dir` (the compile driver's debug artifacts) are kept.
    pub fn write(&self, dir: impl AsRef<Path>) -> Result<(), ProfileError> {
        let dir = dir.as_ref();
        self.validate()?;
        std::fs::create_dir_all(dir).map_err(io_err(dir))?;
        write_json(&dir.join(self.mode.profile_file()), self, true)?;
        write_json(&dir.join(self.mode.trace_file()), &chrome_trace(self), false)?;
        Ok(())
    }

    /// Reads the compiled profile of a folder, or its eager one when only that exists. Unknown
    /// schema versions give [`ProfileError::UnsupportedSchema`].
    pub fn read(dir: impl AsRef<Path>) -> Result<Profile, ProfileError> {
        let dir = dir.as_ref();
        if !dir.is_dir() {
            return Err(ProfileError::Io {
                path: dir.to_path_buf(),
                source: std::io::Error::new(std::io::ErrorKind::NotFound, "no such folder"),
            });
        }
        for mode in [Mode::Compiled, Mode::Eager] {
            if let Some(p) = Profile::read_mode(dir, mode)? {
                return Ok(p);
            }
        }
        Err(ProfileError::NotFound { dir: dir.to_path_buf() })
    }

    /// Reads the profile of one mode from a folder; `Ok(None)` when that file is absent.
    pub fn read_mode(dir: impl AsRef<Path>, mode: Mode) -> Result<Option<Profile>, ProfileError> {
        let path = dir.as_ref().join(mode.profile_file());
        match std::fs::read_to_string(&path) {
            Ok(text) => Profile::from_json(&path, &text).map(Some),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io_err(&path)(e)),
        }
    }

    /// Parses a profile's JSON text (`path` is used in messages), checking the schema version
    /// first and the contents after.
    pub fn from_json(path: &Path, text: &str) -> Result<Profile, ProfileError> {
        let value = parse_json(path, text)?;
        check_schema(path, &value)?;
        let p: Profile = serde_json::from_value(value)
            .map_err(|e| ProfileError::Parse { path: path.to_path_buf(), msg: e.to_string() })?;
        p.validate()?;
        Ok(p)
    }

    /// Checks internal consistency: launch kernel indices in range, finite times, ends not before
    /// starts.
    pub fn validate(&self) -> Result<(), ProfileError> {
        let bad = |m: String| Err(ProfileError::Invalid(m));
        for (i, l) in self.launches.iter().enumerate() {
            if l.kernel >= self.kernels.len() {
                return bad(format!("launch {i} names kernel {} but there are {}", l.kernel, self.kernels.len()));
            }
            let times = [Some(l.host_start_ns), Some(l.host_end_ns), l.device_start_ns, l.device_end_ns];
            if times.iter().flatten().any(|t| !t.is_finite()) {
                return bad(format!("launch {i} has a non-finite time"));
            }
            if l.host_end_ns < l.host_start_ns {
                return bad(format!("launch {i} ends on the host before it starts"));
            }
            if l.device_start_ns.is_some() != l.device_end_ns.is_some() {
                return bad(format!("launch {i} has only one of device start and end"));
            }
            if let Some((s, e)) = l.device_span()
                && e < s
            {
                return bad(format!("launch {i} ends on the device before it starts"));
            }
        }
        for k in &self.kernels {
            let nums = [k.bytes, k.flops].into_iter().chain(k.times_ns.iter().copied());
            if nums.into_iter().any(|x| !x.is_finite() || x < 0.0) {
                return bad(format!("kernel {} has a negative or non-finite number", k.name));
            }
        }
        for s in &self.compile_spans {
            if !s.start_ns.is_finite() || !s.dur_ns.is_finite() || s.dur_ns < 0.0 {
                return bad(format!("compile span {} has a bad time", s.name));
            }
        }
        Ok(())
    }

    /// The kernel holding a captured-graph node, if any.
    pub fn kernel_of_node(&self, node: u32) -> Option<usize> {
        self.kernels.iter().position(|k| k.nodes.contains(&node))
    }
}

/// The file name of the snapshot after pass number `index` (`passes/` is the folder):
/// `NN_<name>.txt`, with characters other than letters, digits, `_` and `-` replaced by `_`.
pub fn pass_file_name(index: u32, name: &str) -> String {
    let clean: String = name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).collect();
    format!("{index:02}_{clean}.txt")
}

/// Writes a text artifact (`graph.txt`, `kernels/k0.wgsl`, `passes/01_decompose.txt`, ...) at
/// `rel` inside the folder `dir`, creating folders, through a temporary file and a rename.
pub fn write_artifact(dir: impl AsRef<Path>, rel: &str, text: &str) -> Result<PathBuf, ProfileError> {
    let path = dir.as_ref().join(rel);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(io_err(parent))?;
    }
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).map_err(io_err(&tmp))?;
    std::fs::rename(&tmp, &path).map_err(io_err(&path))?;
    Ok(path)
}

/// Fills a [`Profile`] as a run proceeds: kernels, launches with host and device times,
/// compile spans and fusion decisions, all on one clock that starts when the builder is made.
#[derive(Clone, Debug)]
pub struct ProfileBuilder {
    origin: Instant,
    profile: Profile,
}

impl ProfileBuilder {
    /// A builder whose clock starts now.
    pub fn new(workload: impl Into<String>, backend: impl Into<String>, mode: Mode, device: DeviceInfo) -> Self {
        ProfileBuilder { origin: Instant::now(), profile: Profile::new(workload, backend, mode, device) }
    }

    /// The instant the clock counts from.
    pub fn origin(&self) -> Instant {
        self.origin
    }

    /// Now, ns on the profile clock.
    pub fn now_ns(&self) -> f64 {
        self.ns_at(Instant::now())
    }

    /// An instant on the profile clock, ns (negative before the builder was made).
    pub fn ns_at(&self, t: Instant) -> f64 {
        signed_ns(self.origin, t)
    }

    /// Adds a kernel; returns its index for [`Launch::kernel`].
    pub fn add_kernel(&mut self, kernel: KernelProfile) -> usize {
        self.profile.kernels.push(kernel);
        self.profile.kernels.len() - 1
    }

    /// A kernel added earlier, to set details known later (registers, source path).
    pub fn kernel_mut(&mut self, index: usize) -> Option<&mut KernelProfile> {
        self.profile.kernels.get_mut(index)
    }

    /// Records a launch; returns its index.
    pub fn push_launch(&mut self, launch: Launch) -> usize {
        self.profile.launches.push(launch);
        self.profile.launches.len() - 1
    }

    /// Sets the device times of a launch recorded earlier (timestamps resolve after submit).
    pub fn set_device_time(&mut self, launch: usize, start_ns: f64, end_ns: f64) -> Result<(), ProfileError> {
        let n = self.profile.launches.len();
        let l = self
            .profile
            .launches
            .get_mut(launch)
            .ok_or_else(|| ProfileError::Invalid(format!("launch {launch} does not exist ({n} recorded)")))?;
        l.device_start_ns = Some(start_ns);
        l.device_end_ns = Some(end_ns);
        Ok(())
    }

    /// The index of the kernel with this name.
    pub fn kernel_index(&self, name: &str) -> Option<usize> {
        self.profile.kernels.iter().position(|k| k.name == name)
    }

    /// Records one timed run of a batch of launches submitted together at `submit_ns` (profile
    /// clock), as backends that time a whole command buffer report it: each
    /// `(kernel name, device start relative to the first kernel, device duration)` becomes a
    /// launch whose host span is the submit instant and whose device span starts `start` after
    /// `submit_ns`. Fails on a kernel name that was not added.
    pub fn push_batch<'a>(
        &mut self,
        iteration: u32,
        submit_ns: f64,
        timings: impl IntoIterator<Item = (&'a str, f64, f64)>,
    ) -> Result<(), ProfileError> {
        for (name, start, dur) in timings {
            let k = self.kernel_index(name).ok_or_else(|| ProfileError::Invalid(format!("no kernel named {name}")))?;
            let s = submit_ns + start;
            self.push_launch(Launch::new(k, iteration, submit_ns, submit_ns).device(s, s + dur));
        }
        Ok(())
    }

    /// Records a compile span.
    pub fn push_span(&mut self, span: Span) {
        self.profile.compile_spans.push(span);
    }

    /// Runs `f`, recording it as a compile span.
    pub fn time_span<R>(&mut self, category: SpanCategory, name: &str, f: impl FnOnce() -> R) -> R {
        let start = self.now_ns();
        let r = f();
        let dur_ns = (self.now_ns() - start).max(0.0);
        self.push_span(Span { name: name.to_string(), category, start_ns: start, dur_ns, detail: String::new() });
        r
    }

    /// Adopts the spans of a recorder, moved onto this builder's clock.
    pub fn add_recorded_spans(&mut self, recorder: &SpanRecorder) {
        let shift = self.ns_at(recorder.origin());
        for s in recorder.spans() {
            let mut s = s.clone();
            s.start_ns += shift;
            self.push_span(s);
        }
    }

    /// Records a fusion decision (`(&program.decisions[i]).into()` converts the scheduler's).
    pub fn push_fusion(&mut self, decision: FusionDecision) {
        self.profile.fusion.push(decision);
    }

    /// Stores a summary of the captured graph (for the fusion diagram).
    pub fn set_graph(&mut self, graph: &Graph) {
        self.profile.graph = Some(GraphSummary::from_graph(graph));
    }

    /// Sets the peak device memory.
    pub fn set_peak_memory(&mut self, bytes: u64) {
        self.profile.peak_memory_bytes = Some(bytes);
    }

    /// Sets the iteration count (otherwise one more than the largest launch iteration).
    pub fn set_iterations(&mut self, iterations: u32) {
        self.profile.iterations = iterations;
    }

    /// The profile so far.
    pub fn profile(&self) -> &Profile {
        &self.profile
    }

    /// Finishes: per-kernel device times and statistics from the launches, the iteration count,
    /// and the clock shifted so the earliest event is at 0. Fails on inconsistent data.
    pub fn finish(mut self) -> Result<Profile, ProfileError> {
        let p = &mut self.profile;
        p.validate()?;
        let mut earliest = f64::INFINITY;
        for l in &p.launches {
            earliest = earliest.min(l.host_start_ns);
            if let Some(s) = l.device_start_ns {
                earliest = earliest.min(s);
            }
        }
        for s in &p.compile_spans {
            earliest = earliest.min(s.start_ns);
        }
        if earliest.is_finite() && earliest != 0.0 {
            for l in &mut p.launches {
                l.host_start_ns -= earliest;
                l.host_end_ns -= earliest;
                l.device_start_ns = l.device_start_ns.map(|t| t - earliest);
                l.device_end_ns = l.device_end_ns.map(|t| t - earliest);
            }
            for s in &mut p.compile_spans {
                s.start_ns -= earliest;
            }
        }
        let mut times: Vec<Vec<f64>> = vec![Vec::new(); p.kernels.len()];
        for l in &p.launches {
            if let Some(d) = l.device_ns() {
                times[l.kernel].push(d);
            }
        }
        for (k, t) in p.kernels.iter_mut().zip(times) {
            if !t.is_empty() {
                k.times_ns = t;
            }
            k.stats = TimeStats::from_samples(&k.times_ns);
        }
        if p.iterations == 0 {
            p.iterations = p.launches.iter().map(|l| l.iteration + 1).max().unwrap_or(0);
        }
        p.validate()?;
        Ok(self.profile)
    }
}

/// Which regime limits a kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Arithmetic intensity above the ridge point: limited by the compute peak.
    ComputeBound,
    /// Intensity below the ridge point: limited by memory bandwidth.
    BandwidthBound,
    /// Too short or too small to use the device: launch cost and latency dominate.
    OverheadBound,
    /// Not enough information (no device time, or no ceilings).
    Unknown,
}

impl Verdict {
    /// Human label (`bandwidth-bound`).
    pub fn label(self) -> &'static str {
        match self {
            Verdict::ComputeBound => "compute-bound",
            Verdict::BandwidthBound => "bandwidth-bound",
            Verdict::OverheadBound => "overhead-bound",
            Verdict::Unknown => "unknown",
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// Roofline analysis of one kernel.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KernelAnalysis {
    /// Index into [`Profile::kernels`].
    pub kernel: usize,
    /// Median device time per launch, ns.
    pub time_ns: Option<f64>,
    /// Total device time over all launches, ns.
    pub total_ns: f64,
    /// Share of the run's total kernel time, 0..=1.
    pub share: f64,
    /// FLOP per byte moved (`None` when no bytes are moved).
    pub intensity: Option<f64>,
    /// Achieved bandwidth at the median time, GB/s.
    pub achieved_gbps: Option<f64>,
    /// Achieved compute rate at the median time, TFLOP/s.
    pub achieved_tflops: Option<f64>,
    /// Achieved bandwidth over the copy ceiling.
    pub bandwidth_fraction: Option<f64>,
    /// Achieved compute over the peak for the kernel's dtype.
    pub compute_fraction: Option<f64>,
    /// The verdict.
    pub verdict: Verdict,
    /// Why, in one sentence with the numbers.
    pub reason: String,
}

/// Roofline analysis of a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Analysis {
    /// One entry per kernel, in kernel order.
    pub kernels: Vec<KernelAnalysis>,
    /// Sum of all kernels' device time, ns.
    pub kernel_total_ns: f64,
    /// Sum over iterations of (last kernel end - first kernel start), ns.
    pub device_window_ns: f64,
    /// Share of that window in which some kernel runs; `None` without device times.
    pub gpu_busy_share: Option<f64>,
    /// Idle device time between kernels inside iterations, ns (the launch-gap total).
    pub launch_gap_total_ns: f64,
    /// Number of idle gaps between consecutive kernels.
    pub launch_gap_count: usize,
    /// The kernel with the most total device time.
    pub dominant: Option<usize>,
}

/// Classifies one kernel; see [`analyze`] for the rules.
fn classify(k: &KernelProfile, c: &Ceilings) -> (Verdict, String, [Option<f64>; 5]) {
    let time = k.median_ns().filter(|t| *t > 0.0);
    let intensity = (k.bytes > 0.0).then(|| k.flops / k.bytes);
    let gbps = time.filter(|_| k.bytes > 0.0).map(|t| k.bytes / t); // bytes/ns = GB/s
    let tflops = time.filter(|_| k.flops > 0.0).map(|t| k.flops / t / 1e3); // flop/ns / 1e3 = TFLOP/s
    let bw = c.bandwidth_gbps();
    let peak = c.peak_tflops(&k.dtype);
    let bw_frac = gbps.zip(bw).map(|(a, b)| a / b);
    let fl_frac = match (tflops, peak) {
        (Some(a), Some(p)) => Some(a / p),
        (None, Some(_)) if time.is_some() => Some(0.0),
        _ => None,
    };
    let nums = [intensity, gbps, tflops, bw_frac, fl_frac];
    let nominal = if c.measured { "" } else { " (ceilings not measured: run `sinter calibrate`)" };
    let Some(t) = time else {
        return (Verdict::Unknown, "no device time was recorded for this kernel".into(), nums);
    };
    let us = t / 1e3;
    if let Some(lo) = c.launch_overhead_ns()
        && t < OVERHEAD_TIME_FACTOR * lo
    {
        return (
            Verdict::OverheadBound,
            format!(
                "runs {us:.2} µs, under {OVERHEAD_TIME_FACTOR}x the launch overhead ({:.2} µs): launching costs about as much as the work{nominal}",
                lo / 1e3
            ),
            nums,
        );
    }
    let (Some(bw), Some(peak)) = (bw, peak) else {
        return (
            Verdict::Unknown,
            "no bandwidth or compute ceilings for this device: run `sinter calibrate`".into(),
            nums,
        );
    };
    let bf = bw_frac.unwrap_or(0.0);
    let ff = fl_frac.unwrap_or(0.0);
    if t < SMALL_KERNEL_NS && bf < LOW_UTILIZATION && ff < LOW_UTILIZATION {
        return (
            Verdict::OverheadBound,
            format!(
                "runs {us:.2} µs and reaches only {:.1}% of bandwidth and {:.1}% of compute: too little work to fill the device{nominal}",
                bf * 100.0,
                ff * 100.0
            ),
            nums,
        );
    }
    let ridge = peak * 1e12 / (bw * 1e9);
    let i = intensity.unwrap_or(f64::INFINITY);
    let low = if bf.max(ff) < LOW_UTILIZATION {
        " Far below both ceilings: latency, poor access patterns or too few workgroups."
    } else {
        ""
    };
    if i >= ridge {
        (
            Verdict::ComputeBound,
            format!(
                "intensity {} FLOP/B is above the ridge point {ridge:.1} FLOP/B; reaches {:.1}% of the {} peak ({peak:.1} TFLOP/s){nominal}.{low}",
                fmt_intensity(intensity),
                ff * 100.0,
                if k.dtype.is_empty() { "f32" } else { &k.dtype },
            ),
            nums,
        )
    } else {
        (
            Verdict::BandwidthBound,
            format!(
                "intensity {} FLOP/B is below the ridge point {ridge:.1} FLOP/B; moves {:.0} GB/s = {:.1}% of the copy bandwidth ({bw:.0} GB/s){nominal}.{low}",
                fmt_intensity(intensity),
                gbps.unwrap_or(0.0),
                bf * 100.0,
            ),
            nums,
        )
    }
}

fn fmt_intensity(i: Option<f64>) -> String {
    match i {
        None => "inf".into(),
        Some(i) if i < 10.0 => format!("{i:.2}"),
        Some(i) => format!("{i:.1}"),
    }
}

/// Roofline analysis of a profile.
///
/// Rules, per kernel, with `t` its median device time:
/// 1. no device time: [`Verdict::Unknown`];
/// 2. `t < OVERHEAD_TIME_FACTOR (5) x launch overhead`: [`Verdict::OverheadBound`];
/// 3. no copy bandwidth or compute peak: [`Verdict::Unknown`];
/// 4. `t < SMALL_KERNEL_NS (20 µs)` and below `LOW_UTILIZATION (10%)` of both ceilings:
///    [`Verdict::OverheadBound`] (too little work to fill the device);
/// 5. otherwise arithmetic intensity (FLOPs / bytes) against the ridge point
///    `peak FLOP/s / copy bytes/s` (peak for the kernel's dtype): at or above is
///    [`Verdict::ComputeBound`], below is [`Verdict::BandwidthBound`].
///
/// Run level: per iteration, the device window runs from the first kernel start to the last
/// kernel end; the GPU-busy share is the union of kernel intervals over the windows, and the
/// launch-gap total is the idle time inside the windows.
pub fn analyze(p: &Profile) -> Analysis {
    let totals: Vec<f64> = p.kernels.iter().map(|k| k.times_ns.iter().sum::<f64>()).collect();
    let kernel_total_ns: f64 = totals.iter().sum();
    let kernels: Vec<KernelAnalysis> = p
        .kernels
        .iter()
        .enumerate()
        .map(|(i, k)| {
            let (verdict, reason, [intensity, achieved_gbps, achieved_tflops, bandwidth_fraction, compute_fraction]) =
                classify(k, &p.device.ceilings);
            KernelAnalysis {
                kernel: i,
                time_ns: k.median_ns(),
                total_ns: totals[i],
                share: if kernel_total_ns > 0.0 { totals[i] / kernel_total_ns } else { 0.0 },
                intensity,
                achieved_gbps,
                achieved_tflops,
                bandwidth_fraction,
                compute_fraction,
                verdict,
                reason,
            }
        })
        .collect();
    let dominant =
        (kernel_total_ns > 0.0).then(|| (0..totals.len()).max_by(|&a, &b| totals[a].total_cmp(&totals[b]))).flatten();

    let mut by_iter: BTreeMap<u32, Vec<(f64, f64)>> = BTreeMap::new();
    for l in &p.launches {
        if let Some(span) = l.device_span() {
            by_iter.entry(l.iteration).or_default().push(span);
        }
    }
    let (mut window, mut busy, mut gaps, mut gap_count) = (0.0, 0.0, 0.0, 0usize);
    for spans in by_iter.values_mut() {
        spans.sort_by(|a, b| a.0.total_cmp(&b.0));
        let first = spans[0].0;
        let mut cur_end = spans[0].1;
        let mut last = spans[0].1;
        let mut b = spans[0].1 - spans[0].0;
        for &(s, e) in &spans[1..] {
            if s > cur_end {
                gaps += s - cur_end;
                gap_count += 1;
                b += e - s;
                cur_end = e;
            } else if e > cur_end {
                b += e - cur_end;
                cur_end = e;
            }
            last = last.max(e);
        }
        window += last - first;
        busy += b;
    }
    Analysis {
        kernels,
        kernel_total_ns,
        device_window_ns: window,
        gpu_busy_share: (window > 0.0).then(|| (busy / window).min(1.0)),
        launch_gap_total_ns: gaps,
        launch_gap_count: gap_count,
        dominant,
    }
}

/// Formats ns as a short human duration (`812 ns`, `12.3 µs`, `4.56 ms`, `1.20 s`).
pub fn fmt_ns(ns: f64) -> String {
    let trim = |v: f64, unit: &str| {
        let s = format!("{v:.3}");
        format!("{} {unit}", s.trim_end_matches('0').trim_end_matches('.'))
    };
    let a = ns.abs();
    if a < 1e3 {
        format!("{ns:.0} ns")
    } else if a < 1e6 {
        trim(ns / 1e3, "µs")
    } else if a < 1e9 {
        trim(ns / 1e6, "ms")
    } else {
        trim(ns / 1e9, "s")
    }
}

impl Analysis {
    /// One paragraph answering: which kernel dominates, what bounds it, what it fused, and how
    /// busy the device was.
    pub fn summary(&self, p: &Profile) -> String {
        let mut s = String::new();
        match self.dominant.and_then(|d| Some((p.kernels.get(d)?, self.kernels.get(d)?))) {
            Some((k, a)) => {
                s.push_str(&format!(
                    "Dominant kernel: {} ({:.0}% of GPU time, {} per launch), {}: {}. ",
                    k.name,
                    a.share * 100.0,
                    a.time_ns.map(fmt_ns).unwrap_or_else(|| "?".into()),
                    a.verdict,
                    a.reason.trim_end_matches('.')
                ));
                if !k.nodes.is_empty() {
                    s.push_str(&format!(
                        "It computes {} node(s) of the user's graph ({}). ",
                        k.nodes.len(),
                        k.ops.join(", ")
                    ));
                } else if !k.ops.is_empty() {
                    s.push_str(&format!("It fuses {}. ", k.ops.join(", ")));
                }
            }
            None => s.push_str("No kernel device times were recorded. "),
        }
        if let Some(b) = self.gpu_busy_share {
            s.push_str(&format!(
                "GPU busy {:.0}% of the kernel window; launch gaps total {} over {} gap(s).",
                b * 100.0,
                fmt_ns(self.launch_gap_total_ns),
                self.launch_gap_count
            ));
        }
        s
    }
}

/// An `X` event before it becomes JSON.
struct XEvent {
    name: String,
    cat: &'static str,
    tid: u32,
    /// Whole nanoseconds, so nesting is decided exactly and survives the µs conversion.
    start: i64,
    end: i64,
    args: Value,
}

/// Makes events on one track nest. `sequential`: overlapping siblings are clipped (the earlier
/// one ends where the later starts; clock jitter on a serial queue). Otherwise a child that
/// outlives its parent is clipped to the parent's end.
fn nest_track(events: &mut [XEvent], sequential: bool) {
    events.sort_by(|a, b| a.start.cmp(&b.start).then(b.end.cmp(&a.end)));
    if sequential {
        for i in 1..events.len() {
            let s = events[i].start;
            let prev = &mut events[i - 1];
            if prev.end > s {
                prev.end = s.max(prev.start);
                if let Value::Object(m) = &mut prev.args {
                    m.insert("clipped".into(), json!(true));
                }
            }
        }
    } else {
        let mut stack: Vec<i64> = Vec::new();
        for e in events.iter_mut() {
            while stack.last().is_some_and(|&end| end <= e.start) {
                stack.pop();
            }
            if let Some(&end) = stack.last()
                && e.end > end
            {
                e.end = end;
                if let Value::Object(m) = &mut e.args {
                    m.insert("clipped".into(), json!(true));
                }
            }
            stack.push(e.end);
        }
    }
}

fn finite(x: f64) -> f64 {
    if x.is_finite() { x } else { 0.0 }
}

/// Profile ns to whole trace ns.
fn whole_ns(ns: f64) -> i64 {
    if ns.is_finite() { ns.round() as i64 } else { 0 }
}

/// Whole ns to trace µs.
fn us(ns: i64) -> f64 {
    ns as f64 / 1e3
}

/// The profile as Chrome Trace Event JSON (see the module docs for the layout).
pub fn chrome_trace(p: &Profile) -> Value {
    const HOST: u32 = 1;
    const DEVICE: u32 = 2;
    let analysis = analyze(p);
    let mut out: Vec<Value> = Vec::new();
    let meta = |name: &str, pid: u32, tid: Option<u32>, value: &str| {
        let mut e = json!({"ph": "M", "name": name, "pid": pid, "args": {"name": value}});
        if let Some(t) = tid {
            e["tid"] = json!(t);
        }
        e
    };
    out.push(meta("process_name", HOST, None, "host"));
    out.push(json!({"ph": "M", "name": "process_sort_index", "pid": HOST, "args": {"sort_index": 1}}));
    out.push(meta("thread_name", HOST, Some(1), "launches"));
    out.push(meta("thread_name", HOST, Some(2), "compiler"));
    out.push(meta("process_name", DEVICE, None, &format!("device: {}", p.device.name)));
    out.push(json!({"ph": "M", "name": "process_sort_index", "pid": DEVICE, "args": {"sort_index": 2}}));
    let mut streams: Vec<u32> = p.kernels.iter().map(|k| k.stream).collect();
    streams.sort_unstable();
    streams.dedup();
    for s in &streams {
        out.push(meta("thread_name", DEVICE, Some(1 + s), &format!("queue {s}")));
    }

    let kernel_args: Vec<Value> = p
        .kernels
        .iter()
        .enumerate()
        .map(|(i, k)| {
            let a = &analysis.kernels[i];
            json!({
                "kernel": i,
                "grid": k.grid,
                "block": k.block,
                "bytes": finite(k.bytes),
                "flops": finite(k.flops),
                "achieved_gbps": a.achieved_gbps.map(finite),
                "achieved_tflops": a.achieved_tflops.map(finite),
                "verdict": a.verdict.label(),
                "ops": k.ops,
                "nodes": k.nodes,
                "registers": k.registers,
                "shared_mem_bytes": k.shared_mem_bytes,
                "stream": k.stream,
            })
        })
        .collect();

    let mut host: Vec<XEvent> = Vec::new();
    let mut device: BTreeMap<u32, Vec<XEvent>> = BTreeMap::new();
    for (i, l) in p.launches.iter().enumerate() {
        let Some(k) = p.kernels.get(l.kernel) else { continue };
        host.push(XEvent {
            name: format!("launch {}", k.name),
            cat: "launch",
            tid: 1,
            start: whole_ns(l.host_start_ns),
            end: whole_ns(l.host_end_ns),
            args: json!({"kernel": l.kernel, "iteration": l.iteration, "launch": i}),
        });
        if let Some((s, e)) = l.device_span() {
            let mut args = kernel_args[l.kernel].clone();
            args["iteration"] = json!(l.iteration);
            args["launch"] = json!(i);
            device.entry(1 + k.stream).or_default().push(XEvent {
                name: k.name.clone(),
                cat: "kernel",
                tid: 1 + k.stream,
                start: whole_ns(s),
                end: whole_ns(e),
                args,
            });
        }
    }
    let mut compiler: Vec<XEvent> = p
        .compile_spans
        .iter()
        .map(|s| XEvent {
            name: s.name.clone(),
            cat: s.category.name(),
            tid: 2,
            start: whole_ns(s.start_ns),
            end: whole_ns(s.start_ns + s.dur_ns),
            args: json!({"detail": s.detail}),
        })
        .collect();
    nest_track(&mut host, true);
    nest_track(&mut compiler, false);
    for evs in device.values_mut() {
        nest_track(evs, true);
    }
    let x = |e: &XEvent, pid: u32| {
        json!({"ph": "X", "name": e.name, "cat": e.cat, "pid": pid, "tid": e.tid,
               "ts": us(e.start), "dur": us(e.end - e.start), "args": e.args})
    };
    // Flows: start inside the host launch slice, finish ("bp":"e") at the kernel slice's start.
    let mut dev_of_launch: BTreeMap<u64, (u32, i64)> = BTreeMap::new();
    for evs in device.values() {
        for d in evs {
            if let Some(l) = d.args["launch"].as_u64() {
                dev_of_launch.insert(l, (d.tid, d.start));
            }
        }
    }
    let mut flows: Vec<Value> = Vec::new();
    for e in &host {
        let Some(launch) = e.args["launch"].as_u64() else { continue };
        let Some(&(tid, start)) = dev_of_launch.get(&launch) else { continue };
        flows.push(json!({"ph": "s", "id": launch, "name": "launch", "cat": "launch", "pid": HOST, "tid": 1, "ts": us(e.start)}));
        flows.push(json!({"ph": "f", "bp": "e", "id": launch, "name": "launch", "cat": "launch", "pid": DEVICE, "tid": tid, "ts": us(start)}));
    }
    out.extend(host.iter().map(|e| x(e, HOST)));
    out.extend(compiler.iter().map(|e| x(e, HOST)));
    for evs in device.values() {
        out.extend(evs.iter().map(|e| x(e, DEVICE)));
    }
    out.extend(flows);
    json!({
        "traceEvents": out,
        "displayTimeUnit": "ns",
        "otherData": {
            "sinter_schema_version": SCHEMA_VERSION,
            "sinter_version": p.sinter_version,
            "workload": p.workload,
            "backend": p.backend,
            "mode": p.mode.name(),
            "device": p.device.name,
            "iterations": p.iterations,
            "gpu_busy_share": analysis.gpu_busy_share,
            "launch_gap_total_ns": analysis.launch_gap_total_ns,
        }
    })
}

/// Checks a Chrome trace for what Perfetto and `chrome://tracing` need: every event has `ph`,
/// `name`, `pid`; `X` events have finite non-negative `ts`/`dur` and a `tid`; `X` events on
/// one track nest; every flow start has exactly one finish with the same id (which binds with
/// `bp:"e"`) inside a slice of its track; every number is finite. Returns all problems found.
pub fn validate_chrome_trace(trace: &Value) -> Result<(), Vec<String>> {
    let mut errs = Vec::new();
    let Some(events) = trace.get("traceEvents").and_then(Value::as_array) else {
        return Err(vec!["no `traceEvents` array".into()]);
    };
    fn check_finite(v: &Value, path: &str, errs: &mut Vec<String>) {
        match v {
            Value::Number(n) if n.as_f64().is_none_or(|x| !x.is_finite()) => {
                errs.push(format!("{path}: non-finite number"));
            }
            Value::Array(a) => a.iter().enumerate().for_each(|(i, x)| check_finite(x, &format!("{path}[{i}]"), errs)),
            Value::Object(m) => m.iter().for_each(|(k, x)| check_finite(x, &format!("{path}.{k}"), errs)),
            _ => {}
        }
    }
    check_finite(trace, "$", &mut errs);
    let mut tracks: BTreeMap<(u64, u64), Vec<(i64, i64)>> = BTreeMap::new();
    let mut flow_s: BTreeMap<u64, (u64, u64, i64)> = BTreeMap::new();
    let mut flow_f: BTreeMap<u64, (u64, u64, i64)> = BTreeMap::new();
    for (i, e) in events.iter().enumerate() {
        let ph = e.get("ph").and_then(Value::as_str).unwrap_or("");
        if ph.is_empty() || e.get("name").and_then(Value::as_str).is_none() || e.get("pid").is_none() {
            errs.push(format!("event {i}: missing ph, name or pid"));
            continue;
        }
        let num = |k: &str| e.get(k).and_then(Value::as_f64);
        // Times as whole ns, as consumers convert them.
        let ns = |us: f64| (us * 1e3).round() as i64;
        let pid = e["pid"].as_u64().unwrap_or(u64::MAX);
        let tid = e.get("tid").and_then(Value::as_u64);
        match ph {
            "X" => {
                let (Some(ts), Some(dur), Some(tid)) = (num("ts"), num("dur"), tid) else {
                    errs.push(format!("event {i}: X event without ts, dur or tid"));
                    continue;
                };
                if ts < 0.0 || dur < 0.0 {
                    errs.push(format!("event {i}: negative ts or dur"));
                }
                tracks.entry((pid, tid)).or_default().push((ns(ts), ns(ts) + ns(dur)));
            }
            "s" | "f" => {
                let (Some(id), Some(ts), Some(tid)) = (e.get("id").and_then(Value::as_u64), num("ts"), tid) else {
                    errs.push(format!("event {i}: flow without id, ts or tid"));
                    continue;
                };
                if ph == "f" && e.get("bp").and_then(Value::as_str) != Some("e") {
                    errs.push(format!("event {i}: flow finish without bp:\"e\""));
                }
                let m = if ph == "s" { &mut flow_s } else { &mut flow_f };
                if m.insert(id, (pid, tid, ns(ts))).is_some() {
                    errs.push(format!("event {i}: flow id {id} used twice for ph {ph}"));
                }
            }
            "M" if e.get("args").and_then(|a| a.as_object()).is_none() => {
                errs.push(format!("event {i}: metadata without args"));
            }
            _ => {}
        }
    }
    for ((pid, tid), spans) in tracks.iter_mut() {
        spans.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
        let mut stack: Vec<i64> = Vec::new();
        for &(s, e) in spans.iter() {
            while stack.last().is_some_and(|&end| end <= s) {
                stack.pop();
            }
            if let Some(&end) = stack.last()
                && e > end
            {
                errs.push(format!("track {pid}/{tid}: slice [{s}, {e}] overlaps its parent ending at {end}"));
            }
            stack.push(e);
        }
    }
    // A point is inside some slice iff the latest end among the slices starting at or before it
    // reaches it (prefix maxima of ends over slices sorted by start).
    let prefix_max: BTreeMap<(u64, u64), Vec<i64>> = tracks
        .iter()
        .map(|(k, spans)| {
            let mut m = i64::MIN;
            let pm = spans
                .iter()
                .map(|&(_, e)| {
                    m = m.max(e);
                    m
                })
                .collect();
            (*k, pm)
        })
        .collect();
    let inside = |(pid, tid, ts): (u64, u64, i64)| {
        let (Some(spans), Some(pm)) = (tracks.get(&(pid, tid)), prefix_max.get(&(pid, tid))) else {
            return false;
        };
        let n = spans.partition_point(|&(s, _)| s <= ts);
        n > 0 && pm[n - 1] >= ts
    };
    for (id, &s) in &flow_s {
        match flow_f.get(id) {
            None => errs.push(format!("flow {id}: start without finish")),
            Some(&f) => {
                if !inside(s) || !inside(f) {
                    errs.push(format!("flow {id}: an end is not inside a slice of its track"));
                }
                if f.2 < s.2 {
                    errs.push(format!("flow {id}: finishes before it starts"));
                }
            }
        }
    }
    for id in flow_f.keys() {
        if !flow_s.contains_key(id) {
            errs.push(format!("flow {id}: finish without start"));
        }
    }
    if errs.is_empty() { Ok(()) } else { Err(errs) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ceilings() -> Ceilings {
        Ceilings {
            copy_gbps: 3000.0,
            matmul_tflops: BTreeMap::from([("f32".to_string(), 50.0), ("f16".to_string(), 700.0)]),
            launch_overhead_us: 4.0,
            measured: true,
        }
    }

    fn sample() -> Profile {
        let mut b = ProfileBuilder::new(
            "layernorm_gelu",
            "wgsl",
            Mode::Compiled,
            DeviceInfo::new("test gpu", "wgsl", ceilings()),
        );
        let mut rec = SpanRecorder::new();
        rec.record(SpanCategory::Capture, "capture", || ());
        rec.push(SpanCategory::Pass, "compile", rec.origin(), rec.origin() + std::time::Duration::from_micros(50), "");
        rec.push(
            SpanCategory::Pass,
            "decompose",
            rec.origin() + std::time::Duration::from_micros(1),
            rec.origin() + std::time::Duration::from_micros(9),
            "",
        );
        b.add_recorded_spans(&rec);
        let k0 = b.add_kernel(
            KernelProfile::new("k0_ln_stats")
                .origins([(1, "layer_norm"), (1, "layer_norm")])
                .bytes(134e6)
                .flops(67e6)
                .grid([8192, 1, 1])
                .block([256, 1, 1]),
        );
        let k1 = b.add_kernel(
            KernelProfile::new("k1_norm_gelu").origins([(2, "gelu"), (1, "layer_norm")]).bytes(268e6).flops(600e6),
        );
        let mut t = 100_000.0;
        for it in 0..4 {
            for (k, d) in [(k0, 60_000.0), (k1, 100_000.0)] {
                let l = b.push_launch(Launch::new(k, it, t, t + 3_000.0));
                b.set_device_time(l, t + 5_000.0, t + 5_000.0 + d).unwrap();
                t += d + 8_000.0;
            }
        }
        b.push_fusion(FusionDecision {
            nodes: vec![1, 2],
            kernels: vec!["k0_ln_stats".into(), "k1_norm_gelu".into()],
            fused: false,
            reason: "reduction followed by broadcast".into(),
        });
        b.finish().unwrap()
    }

    #[test]
    fn builder_fills_stats_and_iterations() {
        let p = sample();
        assert_eq!(p.iterations, 4);
        assert_eq!(p.kernels[0].times_ns, vec![60_000.0; 4]);
        assert_eq!(p.kernels[1].stats.as_ref().unwrap().median_ns, 100_000.0);
        assert_eq!(p.kernels[0].nodes, vec![1]);
        assert_eq!(p.kernels[1].ops, vec!["layer_norm", "gelu"]);
        let earliest = p
            .launches
            .iter()
            .map(|l| l.host_start_ns)
            .chain(p.compile_spans.iter().map(|s| s.start_ns))
            .fold(f64::INFINITY, f64::min);
        assert_eq!(earliest, 0.0);
    }

    #[test]
    fn stats_median_even_and_odd() {
        let s = TimeStats::from_samples(&[4.0, 1.0, 3.0, 2.0]).unwrap();
        assert_eq!((s.min_ns, s.median_ns, s.mean_ns, s.max_ns, s.count), (1.0, 2.5, 2.5, 4.0, 4));
        assert_eq!(TimeStats::from_samples(&[5.0, f64::NAN, 1.0, 3.0]).unwrap().median_ns, 3.0);
        assert!(TimeStats::from_samples(&[]).is_none());
    }

    #[test]
    fn write_read_round_trip() {
        let dir = std::env::temp_dir().join(format!("sinter-profile-rt-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("graph.txt"), "kept").unwrap();
        let p = sample();
        p.write(&dir).unwrap();
        let q = Profile::read(&dir).unwrap();
        assert_eq!(p, q);
        assert_eq!(std::fs::read_to_string(dir.join("graph.txt")).unwrap(), "kept");
        let trace: Value = serde_json::from_str(&std::fs::read_to_string(dir.join(TRACE_FILE)).unwrap()).unwrap();
        validate_chrome_trace(&trace).unwrap();
        assert_eq!(FusionFile::read(&dir).unwrap(), None);
        // The compile driver's fusion.json (a bare array of scheduler decisions) reads too.
        let raw = vec![crate::kernel::FusionDecision {
            nodes: vec![7, 8],
            fused: false,
            reason: "reduction followed by broadcast".into(),
            kernels: vec!["k0".into(), "k1".into()],
            origins: vec![1, 2],
        }];
        std::fs::write(dir.join(FUSION_FILE), serde_json::to_string(&raw).unwrap()).unwrap();
        let f = FusionFile::read(&dir).unwrap().unwrap();
        assert_eq!(f.decisions[0].nodes, vec![1, 2]);
        assert_eq!(f.decisions[0].kernels, vec!["k0", "k1"]);
        let versioned = FusionFile { schema_version: SCHEMA_VERSION, decisions: p.fusion.clone() };
        std::fs::write(dir.join(FUSION_FILE), serde_json::to_string(&versioned).unwrap()).unwrap();
        assert_eq!(FusionFile::read(&dir).unwrap().unwrap(), versioned);
        // An eager profile beside it is read by mode; `read` prefers the compiled one.
        let mut e = p.clone();
        e.mode = Mode::Eager;
        e.write(&dir).unwrap();
        assert_eq!(Profile::read_mode(&dir, Mode::Eager).unwrap().unwrap().mode, Mode::Eager);
        assert_eq!(Profile::read(&dir).unwrap().mode, Mode::Compiled);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn unknown_schema_version_is_a_clear_error() {
        let mut v = serde_json::to_value(sample()).unwrap();
        v["schema_version"] = json!(99);
        v["sinter_version"] = json!("9.9.9");
        let err = Profile::from_json(Path::new("old/profile.json"), &v.to_string()).unwrap_err();
        assert!(matches!(err, ProfileError::UnsupportedSchema { found: 99, .. }));
        let msg = err.to_string();
        assert!(
            msg.contains("schema version 99") && msg.contains("9.9.9") && msg.contains("reads only schema version 1"),
            "{msg}"
        );
        v.as_object_mut().unwrap().remove("schema_version");
        let err = Profile::from_json(Path::new("x/profile.json"), &v.to_string()).unwrap_err();
        assert!(matches!(err, ProfileError::MissingSchema { .. }), "{err}");
        let err = Profile::from_json(Path::new("x/profile.json"), "{not json").unwrap_err();
        assert!(matches!(err, ProfileError::Parse { .. }));
        let missing = std::env::temp_dir().join("sinter-no-such-folder-xyz");
        assert!(Profile::read(&missing).is_err());
    }

    #[test]
    fn invalid_launch_is_rejected() {
        let mut p = sample();
        p.launches[0].kernel = 7;
        assert!(matches!(p.validate(), Err(ProfileError::Invalid(_))));
        let mut p = sample();
        p.launches[0].device_end_ns = Some(f64::NAN);
        assert!(p.validate().is_err());
    }

    #[test]
    fn chrome_trace_is_valid() {
        let p = sample();
        let t = chrome_trace(&p);
        validate_chrome_trace(&t).unwrap();
        let evs = t["traceEvents"].as_array().unwrap();
        let xs: Vec<&Value> = evs.iter().filter(|e| e["ph"] == "X").collect();
        assert_eq!(xs.iter().filter(|e| e["cat"] == "kernel").count(), 8);
        assert_eq!(xs.iter().filter(|e| e["cat"] == "launch").count(), 8);
        assert_eq!(evs.iter().filter(|e| e["ph"] == "s").count(), 8);
        assert_eq!(evs.iter().filter(|e| e["ph"] == "f").count(), 8);
        let k = xs.iter().find(|e| e["cat"] == "kernel").unwrap();
        for key in ["grid", "block", "bytes", "flops", "achieved_gbps", "verdict", "ops"] {
            assert!(k["args"].get(key).is_some(), "kernel args lack {key}");
        }
        assert_eq!(k["pid"], 2);
        assert_eq!(t["displayTimeUnit"], "ns");
        assert_eq!(t["otherData"]["sinter_schema_version"], SCHEMA_VERSION);
        // Names for both processes and all threads.
        assert_eq!(evs.iter().filter(|e| e["ph"] == "M" && e["name"] == "thread_name").count(), 3);
    }

    #[test]
    fn chrome_trace_fixes_overlaps() {
        let mut p = sample();
        // Device clock jitter: the second kernel starts 1 µs before the first ends.
        let s1 = p.launches[1].device_start_ns.unwrap();
        p.launches[0].device_end_ns = Some(s1 + 1000.0);
        // A compile child outliving its parent.
        p.compile_spans.push(Span {
            name: "late".into(),
            category: SpanCategory::Fuse,
            start_ns: 40_000.0,
            dur_ns: 1e6,
            detail: String::new(),
        });
        let t = chrome_trace(&p);
        validate_chrome_trace(&t).unwrap();
        assert!(t.to_string().contains("\"clipped\":true"));
    }

    #[test]
    fn hundred_thousand_launches_trace_is_valid() {
        let mut b = ProfileBuilder::new("big", "wgsl", Mode::Compiled, DeviceInfo::new("d", "wgsl", ceilings()));
        let ks: Vec<usize> =
            (0..5).map(|i| b.add_kernel(KernelProfile::new(format!("k{i}")).bytes(1e6).flops(1e6))).collect();
        let mut t = 0.0;
        for i in 0..100_000u32 {
            let l = Launch::new(ks[i as usize % 5], i / 5, t, t + 700.0).device(t + 900.0, t + 3_100.3);
            b.push_launch(l);
            t += 3_333.3;
        }
        let p = b.finish().unwrap();
        let start = std::time::Instant::now();
        let trace = chrome_trace(&p);
        validate_chrome_trace(&trace).unwrap();
        let evs = trace["traceEvents"].as_array().unwrap();
        assert_eq!(evs.iter().filter(|e| e["ph"] == "X").count(), 200_000);
        assert!(start.elapsed().as_secs_f64() < 30.0, "{:?}", start.elapsed());
    }

    #[test]
    fn validator_catches_problems() {
        let bad = json!({"traceEvents": [
            {"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 0.0, "dur": 10.0},
            {"ph": "X", "name": "b", "pid": 1, "tid": 1, "ts": 5.0, "dur": 10.0},
            {"ph": "X", "name": "c", "pid": 1, "ts": 5.0, "dur": 10.0},
            {"ph": "s", "name": "f", "pid": 1, "tid": 1, "id": 1, "ts": 1.0},
            {"ph": "f", "name": "f", "pid": 1, "tid": 1, "id": 2, "ts": 1.0},
        ]});
        let errs = validate_chrome_trace(&bad).unwrap_err();
        assert!(errs.iter().any(|e| e.contains("overlaps")), "{errs:?}");
        assert!(errs.iter().any(|e| e.contains("without ts, dur or tid")), "{errs:?}");
        assert!(errs.iter().any(|e| e.contains("start without finish")), "{errs:?}");
        assert!(errs.iter().any(|e| e.contains("bp")), "{errs:?}");
    }

    fn kernel_with(time_ns: f64, bytes: f64, flops: f64, dtype: &str) -> KernelProfile {
        let mut k = KernelProfile::new("k").bytes(bytes).flops(flops).dtype(dtype);
        k.times_ns = vec![time_ns];
        k.stats = TimeStats::from_samples(&k.times_ns);
        k
    }

    fn verdict_of(k: KernelProfile, c: Ceilings) -> KernelAnalysis {
        let mut p = Profile::new("w", "wgsl", Mode::Compiled, DeviceInfo::new("d", "wgsl", c));
        p.kernels.push(k);
        analyze(&p).kernels.remove(0)
    }

    #[test]
    fn roofline_verdicts() {
        // 1 GB elementwise copy-like kernel in 400 µs: 2500 GB/s, intensity 0.25 < ridge 16.7.
        let a = verdict_of(kernel_with(400_000.0, 1e9, 2.5e8, "f32"), ceilings());
        assert_eq!(a.verdict, Verdict::BandwidthBound, "{}", a.reason);
        assert!((a.achieved_gbps.unwrap() - 2500.0).abs() < 1e-6);
        assert!((a.bandwidth_fraction.unwrap() - 2500.0 / 3000.0).abs() < 1e-9);
        assert!(a.reason.contains("83.3%"), "{}", a.reason);
        // Big f16 GEMM: 8192^3*2 flops over 3*8192^2*2 bytes: intensity ~2731 > ridge 233.
        let n = 8192.0f64;
        let a = verdict_of(kernel_with(2.0e6, 3.0 * n * n * 2.0, 2.0 * n * n * n, "f16"), ceilings());
        assert_eq!(a.verdict, Verdict::ComputeBound, "{}", a.reason);
        assert!((a.achieved_tflops.unwrap() - 2.0 * n * n * n / 2.0e6 / 1e3).abs() < 1e-6);
        // 8 µs kernel with a 4 µs launch overhead: under 5x.
        let a = verdict_of(kernel_with(8_000.0, 1e6, 1e6, "f32"), ceilings());
        assert_eq!(a.verdict, Verdict::OverheadBound, "{}", a.reason);
        // 30 µs-long... no: 15 µs, tiny work, no launch overhead known: under 10% of both.
        let mut c = ceilings();
        c.launch_overhead_us = 0.0;
        let a = verdict_of(kernel_with(15_000.0, 1e6, 1e3, "f32"), c.clone());
        assert_eq!(a.verdict, Verdict::OverheadBound, "{}", a.reason);
        // A long kernel far below both ceilings is classified by intensity, with a note.
        let a = verdict_of(kernel_with(10e6, 1e6, 1e3, "f32"), c);
        assert_eq!(a.verdict, Verdict::BandwidthBound);
        assert!(a.reason.contains("Far below both ceilings"), "{}", a.reason);
        // No ceilings, no time.
        let a = verdict_of(kernel_with(400_000.0, 1e9, 1e8, "f32"), Ceilings::default());
        assert_eq!(a.verdict, Verdict::Unknown);
        assert!(a.reason.contains("sinter calibrate"));
        let a = verdict_of(KernelProfile::new("k"), ceilings());
        assert_eq!(a.verdict, Verdict::Unknown);
    }

    #[test]
    fn run_level_analysis() {
        let p = sample();
        let a = analyze(&p);
        // Per iteration: kernels 60 µs and 100 µs with an 8 µs gap between them (the device
        // start is 5 µs after each launch, launches 8 µs after the previous kernel's span).
        assert_eq!(a.launch_gap_count, 4);
        assert!((a.launch_gap_total_ns - 4.0 * 8_000.0).abs() < 1e-6, "{}", a.launch_gap_total_ns);
        let busy = a.gpu_busy_share.unwrap();
        assert!((busy - 160.0 / 168.0).abs() < 1e-9, "{busy}");
        assert_eq!(a.dominant, Some(1));
        assert!((a.kernels[1].share - 100.0 / 160.0).abs() < 1e-9);
        let s = a.summary(&p);
        assert!(s.contains("k1_norm_gelu") && s.contains("62%") && s.contains("layer_norm, gelu"), "{s}");
        assert!(!s.contains(".."), "{s}");
    }

    #[test]
    fn durations_format_compactly() {
        assert_eq!(fmt_ns(812.4), "812 ns");
        assert_eq!(fmt_ns(12_300.0), "12.3 µs");
        assert_eq!(fmt_ns(200_000.0), "200 µs");
        assert_eq!(fmt_ns(4_561_000.0), "4.561 ms");
        assert_eq!(fmt_ns(1.2e9), "1.2 s");
        assert_eq!(fmt_ns(-3_000.0), "-3 µs");
    }

    #[test]
    fn batches_become_launches() {
        let mut b = ProfileBuilder::new("w", "wgsl", Mode::Compiled, DeviceInfo::default());
        b.add_kernel(KernelProfile::new("k0"));
        b.add_kernel(KernelProfile::new("k1"));
        b.push_batch(0, 1000.0, [("k0", 0.0, 50.0), ("k1", 60.0, 20.0)]).unwrap();
        assert!(b.push_batch(1, 2000.0, [("nope", 0.0, 1.0)]).is_err());
        let p = b.finish().unwrap();
        assert_eq!(p.launches[1].kernel, 1);
        assert_eq!(p.launches[1].device_span(), Some((60.0, 80.0)));
        assert_eq!(p.kernels[0].times_ns, vec![50.0]);
        validate_chrome_trace(&chrome_trace(&p)).unwrap();
    }

    #[test]
    fn artifact_helpers() {
        assert_eq!(pass_file_name(3, "cse"), "03_cse.txt");
        assert_eq!(pass_file_name(12, "constant fold/x"), "12_constant_fold_x.txt");
        let dir = std::env::temp_dir().join(format!("sinter-artifact-{}", std::process::id()));
        let p = write_artifact(&dir, "kernels/k0.wgsl", "fn main() {}").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "fn main() {}");
        assert!(!dir.join("kernels/k0.tmp").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn calibration_round_trip() {
        let dir = std::env::temp_dir().join(format!("sinter-calib-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let key = Ceilings::adapter_key(&["NVIDIA H100 80GB", "vulkan", "580.1"]);
        assert_eq!(key, "NVIDIA_H100_80GB-vulkan-580.1");
        assert_eq!(Ceilings::load_from(&dir, &key).unwrap(), None);
        let path = ceilings().save_to(&dir, &key).unwrap();
        assert!(path.ends_with("NVIDIA_H100_80GB-vulkan-580.1.json"));
        assert_eq!(Ceilings::load_from(&dir, &key).unwrap(), Some(ceilings()));
        let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        v["schema_version"] = json!(7);
        std::fs::write(&path, v.to_string()).unwrap();
        assert!(matches!(Ceilings::load_from(&dir, &key), Err(ProfileError::UnsupportedSchema { .. })));
        std::fs::remove_dir_all(&dir).unwrap();
        let c = ceilings();
        assert!((c.ridge_point("f32").unwrap() - 50e12 / 3000e9).abs() < 1e-9);
        assert_eq!(c.peak_tflops("bf16"), Some(50.0));
    }

    #[test]
    fn graph_summary_from_ir() {
        let mut g = Graph::default();
        let x = g.add_input("x", crate::DType::F32, vec![4, 8]);
        let y = g.add(Op::Gelu { tanh: false }, vec![x], None).unwrap();
        g.add_output("y", y);
        let s = GraphSummary::from_graph(&g);
        assert_eq!(s.nodes.len(), 2);
        assert_eq!(s.nodes[0].attrs, "x");
        assert_eq!(s.nodes[1].op, "gelu");
        assert_eq!(s.nodes[1].inputs, vec![0]);
        assert_eq!(s.outputs, vec![("y".to_string(), 1)]);
    }
}
