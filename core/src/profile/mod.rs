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
//!   verdict, ops, nodes, registers, shared memory, spilled bytes, and for contraction kernels
//!   the compute type, achieved TFLOP/s and share of the measured peak.
//! - Flows: `ph:"s"` at the host launch and `ph:"f"`, `bp:"e"` at its kernel, sharing `id` (the
//!   launch index), cat `launch`.
//! - `ph:"M"` metadata events name every process and thread; events on a track always nest.
//!
//! # Files
//! `schema.rs` (the data model), `files.rs` (file names, errors, reading and writing the folder),
//! `builder.rs` ([`ProfileBuilder`], [`SpanRecorder`]), `ceilings.rs` (calibration cache),
//! `roofline.rs` ([`analyze`]), `trace.rs` ([`chrome_trace`]), `validate.rs` ([`Profile::validate`],
//! [`validate_chrome_trace`]).

mod builder;
mod ceilings;
mod files;
mod roofline;
mod schema;
mod trace;
mod validate;

#[cfg(test)]
mod tests;

pub use builder::{ProfileBuilder, SpanRecorder};
pub use ceilings::{COMPUTE_NAMES, Ceilings};
pub use files::{
    EAGER_PROFILE_FILE, EAGER_TRACE_FILE, FUSION_FILE, PROFILE_FILE, ProfileError, TRACE_FILE, pass_file_name,
    write_artifact,
};
pub use roofline::{
    Analysis, KernelAnalysis, LOW_UTILIZATION, OVERHEAD_TIME_FACTOR, SMALL_KERNEL_NS, Verdict, analyze, fmt_ns,
};
pub use schema::{
    Contraction, ContractionKind, DeviceClock, DeviceInfo, FusionDecision, FusionFile, GraphNode, GraphSummary,
    KernelProfile, Launch, Mode, Profile, SCHEMA_VERSION, SINTER_VERSION, Span, SpanCategory, TimeStats,
};
pub use trace::chrome_trace;
pub use validate::validate_chrome_trace;
