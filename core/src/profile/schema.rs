//! The versioned data model of a profile: the run ([`Profile`]), its device, kernels, launches,
//! compile spans, fusion decisions and captured graph. Plain serde data; reading and writing are in
//! `files.rs`, consistency checks in `validate.rs`.

use super::Ceilings;
use super::files::{EAGER_PROFILE_FILE, EAGER_TRACE_FILE, PROFILE_FILE, TRACE_FILE};
use crate::ir::{Graph, Op};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// Version of the artifact-folder schema (`profile.json`, `trace.json`, `fusion.json`,
/// calibration files). Bumped on any incompatible change; readers refuse other versions.
pub const SCHEMA_VERSION: u32 = 1;

/// The sinter version that writes profiles.
pub const SINTER_VERSION: &str = env!("CARGO_PKG_VERSION");

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
    /// Bytes per thread spilled from registers to local memory, where the backend's compiler
    /// reports them (NVRTC / ptxas); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spill_bytes: Option<u32>,
    /// How the backend ran it (`mma.sync m16n8k16 ...`, `cublaslt direct algo 1/6`), where it
    /// says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<String>,
    /// For a matrix product, convolution or attention kernel: what it computes in and how close
    /// it came to the device's measured peak for that ([`Contraction`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contraction: Option<Contraction>,
    /// The source file, relative to the artifact folder (e.g. `kernels/k0.wgsl`).
    #[serde(default)]
    pub source_path: Option<String>,
    /// The queue / stream it ran on (device track `1 + stream` in the trace).
    #[serde(default)]
    pub stream: u32,
}

/// Which kind of contraction a kernel is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ContractionKind {
    /// A (batched) matrix product.
    Matmul,
    /// A convolution lowered to a matrix product (im2col, implicit GEMM, 1x1).
    Conv,
    /// A fused attention kernel (two products and a softmax).
    Attention,
}

impl ContractionKind {
    /// `matmul`, `conv`, `attention`.
    pub fn name(self) -> &'static str {
        match self {
            ContractionKind::Matmul => "matmul",
            ContractionKind::Conv => "conv",
            ContractionKind::Attention => "attention",
        }
    }
}

/// The record of a contraction kernel (issue 11): what its products compute in, the rate it
/// reached at its median time, and that rate's share of the device's measured peak for the same
/// compute type. Registers, shared memory and spills are the kernel's own fields
/// ([`KernelProfile::registers`], ...). Rates are `None` until device times and ceilings are
/// known ([`KernelProfile::rate`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Contraction {
    /// Matmul, convolution or attention.
    pub kind: ContractionKind,
    /// The arithmetic of its products: a compute-ceiling name (`bf16`, `f16`, `f8e4m3`, `f32`
    /// exact, `tf32` where the backend ran f32 operands in TF32).
    pub compute: String,
    /// FLOPs per launch over the median device time, TFLOP/s.
    #[serde(default)]
    pub achieved_tflops: Option<f64>,
    /// The peak it is compared with, TFLOP/s ([`super::Ceilings::peak_for`] of `compute`).
    #[serde(default)]
    pub peak_tflops: Option<f64>,
    /// The ceilings entry that peak came from (`compute` itself, or its fallback, e.g. `f32`).
    #[serde(default)]
    pub peak_compute: Option<String>,
    /// How that peak was measured (`cuBLASLt 8192x8192x8192 bf16, ...`); `None` for nominal
    /// ceilings.
    #[serde(default)]
    pub peak_method: Option<String>,
    /// `achieved_tflops / peak_tflops` (1.0 = the measured peak; a kernel faster than the library
    /// product that measured it exceeds 1).
    #[serde(default)]
    pub peak_share: Option<f64>,
}

impl Contraction {
    /// A record of `kind` computing in `compute`, not rated yet.
    pub fn new(kind: ContractionKind, compute: impl Into<String>) -> Contraction {
        Contraction {
            kind,
            compute: compute.into(),
            achieved_tflops: None,
            peak_tflops: None,
            peak_compute: None,
            peak_method: None,
            peak_share: None,
        }
    }
}

impl KernelProfile {
    /// A kernel with only a name; fill the rest with the setters.
    pub fn new(name: impl Into<String>) -> KernelProfile {
        KernelProfile { name: name.into(), dtype: "f32".into(), ..Default::default() }
    }

    /// A kernel's name, user ops, origins, bytes, FLOPs and compute dtype from the kernel IR
    /// (the matmul or attention input dtype, else the dtype of the first buffer it writes), and
    /// for a matmul (a convolution when it computes a `conv2d` of the user's graph) or attention
    /// body its [`Contraction`] record, computing in its input dtype (a backend that ran f32
    /// operands in TF32 says so: [`KernelProfile::compute_as`]).
    pub fn from_kernel(k: &crate::kernel::Kernel) -> KernelProfile {
        use crate::kernel::{Access, KernelBody};
        let contraction = match &k.body {
            KernelBody::Matmul(m) => {
                let conv = m.a.im2col.is_some() || m.b.im2col.is_some() || k.ops.iter().any(|o| o == "conv2d");
                let kind = if conv { ContractionKind::Conv } else { ContractionKind::Matmul };
                Some(Contraction::new(kind, m.in_dtype.name()))
            }
            KernelBody::Attention(a) => Some(Contraction::new(ContractionKind::Attention, a.in_dtype.name())),
            _ => None,
        };
        let dtype = match &k.body {
            KernelBody::Matmul(m) => m.in_dtype,
            KernelBody::Attention(a) => a.in_dtype,
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
            .with_contraction(contraction)
    }

    /// Sets (or clears) the contraction record.
    pub fn with_contraction(mut self, c: Option<Contraction>) -> Self {
        self.contraction = c;
        self
    }

    /// Records that the backend ran this contraction's products in `compute` (`tf32` for f32
    /// operands on TF32 tensor cores; see [`crate::backend::KernelSource::compute`]). No effect on
    /// other kernels.
    pub fn compute_as(mut self, compute: impl Into<String>) -> Self {
        if let Some(c) = &mut self.contraction {
            c.compute = compute.into();
        }
        self
    }

    /// The compute type whose peak bounds this kernel: its contraction's, else its dtype (`f32`
    /// when empty).
    pub fn compute(&self) -> &str {
        match &self.contraction {
            Some(c) => &c.compute,
            None if self.dtype.is_empty() => "f32",
            None => &self.dtype,
        }
    }

    /// Fills the contraction record's rates from the median device time and `ceilings`: achieved
    /// TFLOP/s, the peak of its compute type ([`Ceilings::peak_for`]) with where it came from and
    /// how it was measured, and the share. Rates stay `None` without a median time or FLOPs; the
    /// peak and share without a plausible peak. No effect on other kernels.
    pub fn rate(&mut self, ceilings: &Ceilings) {
        let median = self.median_ns().filter(|t| *t > 0.0);
        let flops = self.flops;
        let Some(c) = &mut self.contraction else { return };
        c.achieved_tflops = median.filter(|_| flops > 0.0).map(|t| flops / t / 1e3);
        let peak = ceilings.peak_for(&c.compute);
        c.peak_compute = peak.map(|(k, _)| k.to_string());
        c.peak_tflops = peak.map(|(_, v)| v);
        c.peak_method = peak.and_then(|(k, _)| ceilings.matmul_method.get(k).cloned());
        c.peak_share = c.achieved_tflops.zip(c.peak_tflops).map(|(a, p)| a / p);
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

    /// Sets the bytes per thread spilled to local memory.
    pub fn spill_bytes(mut self, bytes: u32) -> Self {
        self.spill_bytes = Some(bytes);
        self
    }

    /// Sets how the backend ran it.
    pub fn strategy(mut self, strategy: impl Into<String>) -> Self {
        self.strategy = Some(strategy.into());
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
/// times are ns on the profile's clock (see
/// [`ProfileBuilder::now_ns`](super::ProfileBuilder::now_ns) and [`DeviceClock`]).
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

    /// The kernel holding a captured-graph node, if any.
    pub fn kernel_of_node(&self, node: u32) -> Option<usize> {
        self.kernels.iter().position(|k| k.nodes.contains(&node))
    }
}
