//! The WGSL renderer: a pure function from one kernel of the kernel IR to WGSL source text plus its launch
//! (workgroup size, grid, bindings). No device, no I/O; every output is validated by naga in the tests.
//!
//! # Kernel shapes
//!
//! * **Pointwise**: one lane per element. When the element count is a multiple of 4 and some access is
//!   4-aligned and contiguous in the lane (e.g. `x[lane]`, `b[lane % 4096]`),
//!   each thread handles 4 consecutive lanes with `vec4` loads and stores (vec4 access reached 94% of the
//!   copy bandwidth on an H200, scalar access 53%); accesses uniform across the 4 lanes (`b[lane / 4096]`)
//!   are loaded once, others element by element. 256 threads per workgroup; grids above 65535 workgroups
//!   are spread over y and z (linear id `wg.x + nwg.x * (wg.y + nwg.y * wg.z)`), and only a grid with
//!   excess threads has the `if (t >= threads) { return; }` guard.
//! * **Reduce** (`Persistent`, `Looped`): one workgroup per row; threads stride over the row (4 elements at a
//!   time when the row length is a multiple of 4 and the loads are contiguous), accumulate in registers,
//!   then combine in a shared-memory tree. Reductions run in sequence, each result (`Acc(k)`) visible to
//!   the later ones and to the element stores. `Persistent` keeps every load used by more than one phase in
//!   registers (up to [`Tuning::max_persistent_per_thread`] elements per thread, else it falls back to
//!   `Looped`), so the row is read from memory once; a `Looped` row that fits is rendered persistent too
//!   (see [`Tuning::persistent`]). `ThreadPerRow`: one thread per row, serial loops.
//!   Sums accumulate in f32 (the accumulator dtype of the IR); `ArgMax`/`ArgMin` carry (value, index)
//!   pairs, NaN winning and ties going to the lower index.
//! * **Matmul**: a shared-memory tiled kernel (default tile 64x64x16, 256 threads, 4x4 outputs per thread
//!   held as `vec4` accumulators), operands read through their strides with zero fill at the edges, the
//!   epilogue evaluated per output row of a thread, 4-wide over N when N is a multiple of 4.
//!
//! * **Attention**: flash attention on FMAs ([`AttnTile`]; see `render/attention.rs`): a workgroup owns a
//!   tile of query rows of one flat batch and walks the keys a tile at a time through workgroup memory
//!   (`S = Q K^T` in head-dimension chunks, the score expression per score, an online softmax per row, P
//!   rounded to `p_dtype`, `O += P V`), skipping causal key tiles past the diagonal, then divides once and
//!   runs the epilogue per output element as a matmul's. Decode shapes (one query row) split the keys, then
//!   the output columns, over 128 threads.
//!
//! Indices need no bounds checks: the kernel IR guarantees them in range.
//!
//! # Split bindings
//!
//! One storage binding covers at most the adapter's `max_storage_buffer_binding_size` (128 MiB on
//! lavapipe, 2 GiB - 1 on NVIDIA), while a buffer may be larger (up to `max_buffer_size`). An argument
//! whose buffer exceeds the binding limit is bound as several windows of the same buffer, `a0_0`, `a0_1`,
//! ..., each starting at a multiple of the window size (the largest multiple of 16 bytes and of
//! `min_storage_buffer_offset_alignment` within the limit; [`WgslCaps::max_binding_bytes`] and
//! [`WgslCaps::storage_offset_alignment`]), and every access of it goes through small accessor functions
//! that pick the window from the index:
//!
//! ```wgsl
//! fn ld_a0(i: u32) -> vec4<f32> {
//!     if (i < 8388608u) { return a0_0[i]; }
//!     return a0_1[i - 8388608u];
//! }
//! ```
//!
//! (`st_` stores, `stc_` stores one component of a `vec4`, `and_` / `or_` are the atomic read-modify-write
//! of sub-word stores; more than 4 windows `switch` on `i / window`). Windows hold whole `vec4`s and packed
//! words, so no access straddles two of them, and every kernel kind (pointwise with `vec4`, every reduce
//! strategy, both matmul kernels) and every index pattern works unchanged; [`Rendered::bindings`] lists one
//! [`BindingPlan`] per window, with its offset and size. Arguments that fit one binding are declared and
//! accessed exactly as before. The limits that remain: element indices are `u32` (an argument of more than
//! 2^32 - 1 elements is [`RenderError::Unsupported`]), and all windows of all arguments must fit the
//! adapter's `max_storage_buffers_per_shader_stage` (32 on lavapipe), else the kernel is refused naming the
//! split arguments.
//!
//! # Dtypes
//!
//! Device buffers hold exactly the host byte layout of every supported dtype (uploads and downloads are
//! plain copies):
//!
//! | dtype | storage (WGSL array element) | computed as |
//! |---|---|---|
//! | f32, i32, u32 | `f32` / `i32` / `u32` (`vec4<..>` when every access of the argument is 4-aligned) | itself |
//! | f16 | `f16` with `enable f16;` when the adapter has `SHADER_F16`; else packed 2 per `u32` word (`unpack2x16float`) | `f32` |
//! | bf16 | packed 2 per `u32` word; unpacked by `bitcast<f32>(bits << 16)`, packed with round-to-nearest-even | `f32` |
//! | i8, u8, i16, u16 | packed 4 (or 2) per `u32` word, sign- or zero-extended on load | `i32` / `u32`, wrapped to the dtype after every arithmetic op |
//! | bool | one byte per element (0 or 1), packed 4 per `u32` word like `u8` | `bool` |
//! | i64, u64 | `vec2<i32>` / `vec2<u32>` (low word, high word) | `i32` / `u32`: **32-bit emulation** (see below); stores sign-extend (i64) or zero-extend (u64) |
//! | f64 | unsupported ([`RenderError::Unsupported`]) | — |
//!
//! Stores of sub-word elements (8- and 16-bit) that a thread cannot prove own a whole word are done with
//! `atomicAnd` + `atomicOr` on the word (the argument is then declared `array<atomic<u32>>`); a vectorized
//! store of 4 aligned elements writes whole words without atomics.
//!
//! ## 64-bit integers
//!
//! WGSL has no 64-bit integers, so i64/u64 values are computed in wrapping `i32`/`u32` arithmetic, and
//! a kernel is rendered only when that provably gives the CPU reference's (64-bit) values: every i64/u64
//! element loaded lies in the 32-bit range (the backend checks uploads, and its stores write only such
//! values), and the value-range analysis of [`sinter_core::kernel::narrow`] proves that every 64-bit
//! value a result depends on exactly stays in range too. Otherwise the kernel is refused
//! ([`RenderError::Unsupported`] naming the op, e.g. `i64 add (v2) may overflow 32-bit arithmetic`),
//! and the compiler runs its nodes on the CPU reference (a graph break): issue 14's `Add` of 2^30 + 5
//! and 2^30 + 7 and `ReduceSum` of four 2^30 come back as 2147483660 and 4294967296, not wrapped.
//! Shape arithmetic is folded at compile time, and the common i64 paths on the device stay in range:
//! Gather's negative-index rule, arg reductions, comparisons, index values (`Range`), casts of masks
//! and their sums, division by constants. Why not an exact two-word emulation: it would cost every
//! i64 op several 32-bit ones (a division a 64-step loop) and a second code path through every
//! template (vectorized loads, subgroup shuffles, shared-memory trees), for values real models keep
//! within 32 bits; the refusal keeps exactness for the rest at the price of a graph break.
//! Measured on lavapipe with the ONNX suite (onnx 1.23.2, 2024 cases): WGSL passes 1731 before and
//! after; 163 case compilations partition instead of 114, the new breaks running on the CPU reference
//! what 32 bits cannot prove: attention masks from run-time i64 lengths (`len + offset`), bitwise ops
//! of i16/i32 (lowered through u64 bit extraction), DeformConv and reflection-padded GridSample
//! (unclamped float-to-i64 casts), TopK and sums over i64 values, u64 `Add`/`Sub`/`Mul`.
//!
//! # Op semantics
//!
//! As sinter's CPU reference: NaN tests on the bits; `max`/`min`/`relu`/`sign` propagate NaN; `round` is
//! half-to-even; float `mod` is floored and `fmod` truncated; integer division truncates (no trap on zero);
//! `sin`/`cos`/`tan` reduce their argument (Cody-Waite) first, accurate for |x| up to about 1e5;
//! `asin`/`acos`/`atan` are Cephes' f32 polynomials (the drivers' versions can be off by 2e-4); `tanh`,
//! `sigmoid`, `sinh`, `cosh` never overflow to NaN and use series near 0; `erf` is a Taylor series below
//! 0.5 and `1 - erfc` (Numerical Recipes, relative error < 1.2e-7) above; float-to-integer casts truncate,
//! saturate to the i64 range (NaN to 0) and wrap to the dtype, exactly as the reference does. f16/bf16
//! values are computed in f32 and rounded at casts and stores.

mod attention;
pub(crate) mod attention_coop;
mod coop;
mod emit;
mod helpers;
mod index;
mod matmul;
mod ops;
mod pointwise;
mod reduce;
mod staging;
mod storage;
mod types;

use serde::{Deserialize, Serialize};
use sinter_core::DType;
use sinter_core::backend::BackendError;
use sinter_core::kernel::dynamic::{GridSplit, OuterUnit};
use sinter_core::kernel::{Access, BufferId, Kernel, KernelBody, Program};

pub use attention::{attn_tile_candidates, check_attn_tile};
pub use attention_coop::KEY_TILES as ATTN_KEY_TILES;
pub use coop::DEPTHS as COOP_DEPTHS;
pub use matmul::check_tile;

use emit::Emitter;
use storage::{ArgInfo, Split};
use types::Layout;

/// What the renderer may assume about the adapter.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WgslCaps {
    /// `SHADER_F16`: f16 stored natively (`enable f16;`); otherwise packed 2 per `u32`.
    pub has_f16: bool,
    /// Subgroup operations are available.
    pub has_subgroups: bool,
    /// Largest subgroup size, when known.
    pub subgroup_size: Option<u32>,
    /// `max_compute_invocations_per_workgroup`.
    pub max_invocations: u32,
    /// `max_compute_workgroup_size_x`.
    pub max_workgroup_size_x: u32,
    /// `max_compute_workgroups_per_dimension`.
    pub max_workgroups_per_dim: u32,
    /// `max_storage_buffers_per_shader_stage`.
    pub max_storage_buffers: u32,
    /// `max_storage_buffer_binding_size` in bytes. Larger arguments are split into several bindings.
    pub max_binding_bytes: u64,
    /// `min_storage_buffer_offset_alignment` in bytes: where the windows of a split argument may start.
    #[serde(default = "default_storage_offset_alignment")]
    pub storage_offset_alignment: u32,
    /// `max_compute_workgroup_storage_size` in bytes.
    pub max_workgroup_storage_bytes: u32,
    /// Cooperative matrices with a 16x16x16 `f16 x f16 + f32` configuration are available (tensor cores on
    /// NVIDIA): f16 matmuls use them (see [`Tuning::coop_matrix`]).
    pub has_coop_matrix: bool,
    /// The subgroup size when the adapter has exactly one (minimum = maximum), as the cooperative-matrix
    /// kernels need to know how many subgroups a workgroup holds.
    pub fixed_subgroup_size: Option<u32>,
    /// Also run bf16 matmuls on the f16 cooperative matrices, converting operands to f16 in shared memory
    /// (exact for |x| in [6.1e-5, 65504]; smaller values lose precision as f16 subnormals, larger ones
    /// saturate to ±65504). Off by default: it changes numerics; WGSL has no bf16 matrix type.
    pub bf16_matmul_as_f16: bool,
    /// Also run f32 matmuls on the f16 cooperative matrices, rounding operands to f16 in shared memory
    /// (11 significant bits, as TF32; magnitudes above 65504 become infinite, below 6.1e-5 lose bits as
    /// subnormals); accumulation stays f32. Off by default: it changes numerics.
    pub f32_matmul_as_f16: bool,
}

impl WgslCaps {
    /// The WebGPU defaults with f16 (what lavapipe offers, at its 128 MiB binding limit).
    pub fn baseline() -> WgslCaps {
        WgslCaps {
            has_f16: true,
            has_subgroups: false,
            subgroup_size: None,
            max_invocations: 256,
            max_workgroup_size_x: 256,
            max_workgroups_per_dim: 65535,
            max_storage_buffers: 8,
            max_binding_bytes: 128 << 20,
            storage_offset_alignment: 256,
            max_workgroup_storage_bytes: 16384,
            has_coop_matrix: false,
            fixed_subgroup_size: None,
            bf16_matmul_as_f16: false,
            f32_matmul_as_f16: false,
        }
    }

    /// The capabilities of an adapter as the device layer reports them.
    pub fn from_adapter(info: &crate::device::AdapterInfo) -> WgslCaps {
        let l = &info.limits;
        WgslCaps {
            has_f16: info.has_f16,
            has_subgroups: info.has_subgroups,
            subgroup_size: (info.has_subgroups && l.max_subgroup_size > 0).then_some(l.max_subgroup_size),
            max_invocations: l.max_compute_invocations_per_workgroup,
            max_workgroup_size_x: l.max_compute_workgroup_size_x,
            max_workgroups_per_dim: l.max_compute_workgroups_per_dimension,
            max_storage_buffers: l.max_storage_buffers_per_shader_stage,
            max_binding_bytes: l.max_storage_buffer_binding_size,
            storage_offset_alignment: l.min_storage_buffer_offset_alignment,
            max_workgroup_storage_bytes: l.max_compute_workgroup_storage_size,
            has_coop_matrix: info.has_coop_matrix
                && info
                    .coop_matrix_shapes
                    .iter()
                    .any(|c| c.m == 16 && c.n == 16 && c.k == 16 && c.ab_type == "f16" && c.cr_type == "f32"),
            fixed_subgroup_size: (info.has_subgroups
                && l.min_subgroup_size > 0
                && l.min_subgroup_size == l.max_subgroup_size)
                .then_some(l.max_subgroup_size),
            bf16_matmul_as_f16: false,
            f32_matmul_as_f16: false,
        }
    }

    /// Whether products of `dtype` operands may run on the f16 cooperative matrices: f16 always, bf16
    /// and f32 behind their opt-ins ([`WgslCaps::bf16_matmul_as_f16`], [`WgslCaps::f32_matmul_as_f16`]).
    /// Whether the adapter has the matrices at all is not asked here.
    pub fn runs_as_f16(&self, dtype: DType) -> bool {
        match dtype {
            DType::F16 => true,
            DType::BF16 => self.bf16_matmul_as_f16,
            DType::F32 => self.f32_matmul_as_f16,
            _ => false,
        }
    }

    /// Largest usable 1-D workgroup size.
    fn max_wg(&self) -> u32 {
        self.max_invocations.min(self.max_workgroup_size_x).max(1)
    }
}

/// The WebGPU default (and largest allowed) storage offset alignment.
fn default_storage_offset_alignment() -> u32 {
    256
}

/// A matmul tile configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MatmulTile {
    /// Output rows per workgroup.
    pub bm: u32,
    /// Output columns per workgroup.
    pub bn: u32,
    /// Reduction depth per shared-memory stage.
    pub bk: u32,
    /// Output rows per thread.
    pub tm: u32,
    /// Output columns per thread (a multiple of 4).
    pub tn: u32,
}

impl MatmulTile {
    /// A 64x64 tile, depth 16, 4x4 per thread (256 threads): the last resort of the default
    /// choice (`render/matmul.rs`'s `default_tile`, where the smaller tiles do not fit the
    /// adapter) and a max-autotune candidate.
    pub const DEFAULT: MatmulTile = MatmulTile { bm: 64, bn: 64, bk: 16, tm: 4, tn: 4 };

    /// Threads per workgroup.
    pub fn threads(&self) -> u32 {
        (self.bm / self.tm.max(1)) * (self.bn / self.tn.max(1))
    }
}

/// An attention tile configuration (see [`attention`](self) in the module docs): a workgroup of
/// `bm / tm * tx` threads owns `bm` query rows of one flat batch and up to `tx * dvt` output columns,
/// and walks the keys `bn` at a time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct AttnTile {
    /// Query rows per workgroup.
    pub bm: u32,
    /// Keys per tile (a multiple of `tx` and of `bk`).
    pub bn: u32,
    /// Depth of a staging chunk: head-dimension columns of Q and K, keys of V.
    pub bk: u32,
    /// Query rows per thread (divides `bm`).
    pub tm: u32,
    /// Threads sharing a row: each holds `bn / tx` scores and up to `dvt` output columns of its rows.
    pub tx: u32,
    /// Most output columns per thread; wider heads take several workgroups (scores recomputed).
    pub dvt: u32,
}

impl AttnTile {
    /// Threads per workgroup.
    pub fn threads(&self) -> u32 {
        (self.bm / self.tm.max(1)) * self.tx
    }
}

/// Knobs the autotuner varies. The defaults are what [`render`] uses.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Tuning {
    /// Threads per workgroup for pointwise and reduce kernels (`None`: 256, or less for short rows). A
    /// workgroup-per-row reduction gets at least one subgroup ([`WgslCaps::subgroup_size`]) whatever is asked.
    pub workgroup_size: Option<u32>,
    /// Allow 4-wide vectorization.
    pub vectorize: bool,
    /// Matmul tile (`None`: the renderer's default for the product's size, `default_tile`).
    pub matmul_tile: Option<MatmulTile>,
    /// Most elements a thread keeps in registers in a persistent reduction before falling back to a looped
    /// one.
    pub max_persistent_per_thread: u32,
    /// Whether workgroup-per-row reductions keep the row in registers: `None` (default) does so whenever
    /// the row fits [`Tuning::max_persistent_per_thread`], also for rows the scheduler marked `Looped`
    /// (the row is then read once instead of once per phase); `Some(false)` always loops.
    pub persistent: Option<bool>,
    /// Use subgroup shuffles (when the adapter has them) for workgroup reductions instead of a
    /// shared-memory tree.
    pub subgroups: bool,
    /// Use cooperative matrices for eligible matmuls when the adapter has them (`false` forces the FMA
    /// kernel).
    pub coop_matrix: bool,
    /// Attention tile (`None`: chosen from the shape and the adapter's limits).
    #[serde(default)]
    pub attn_tile: Option<AttnTile>,
    /// Keys per tile of the cooperative-matrix attention: 16, 32 or 64 (`None`: the largest that fits
    /// the workgroup memory).
    #[serde(default)]
    pub attn_keys: Option<u32>,
    /// Depth of a shared-memory stage of the cooperative-matrix matmul: 32 or 64 (`None`: 64 where `k`
    /// is deeper than 32 and the workgroup memory holds it, else 32).
    #[serde(default)]
    pub coop_depth: Option<u32>,
}

impl Default for Tuning {
    fn default() -> Self {
        Tuning {
            workgroup_size: None,
            vectorize: true,
            matmul_tile: None,
            max_persistent_per_thread: 32,
            persistent: None,
            subgroups: true,
            coop_matrix: true,
            attn_tile: None,
            attn_keys: None,
            coop_depth: None,
        }
    }
}

/// One binding of a rendered kernel: which buffer range goes to `@binding(binding)`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BindingPlan {
    /// The `@binding` number: consecutive from 0 in argument order (equal to the argument position when no
    /// argument is split; a split argument takes one binding per window).
    pub binding: u32,
    /// The kernel argument position.
    pub arg: usize,
    /// The program buffer.
    pub buffer: BufferId,
    /// WGSL variable name (`a0`, or `a0_0`, `a0_1`, ... for the windows of a split argument).
    pub name: String,
    /// Element dtype.
    pub dtype: DType,
    /// Declared `read_write` (written, or aliased with a written argument).
    pub read_write: bool,
    /// Byte offset into the buffer.
    pub offset_bytes: u64,
    /// Bytes bound (a multiple of 4).
    pub size_bytes: u64,
}

/// A rendered kernel: source and launch.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Rendered {
    /// The kernel's name.
    pub name: String,
    /// WGSL source.
    pub source: String,
    /// Compute entry point.
    pub entry: String,
    /// `@workgroup_size`.
    pub workgroup_size: [u32; 3],
    /// Workgroups to dispatch (x, y, z); `[0, 1, 1]` when there is nothing to do.
    pub grid: [u32; 3],
    /// Workgroups the kernel needs (before spreading over y and z).
    pub workgroups: u64,
    /// Bindings in `@binding` order (several per argument when it is split).
    pub bindings: Vec<BindingPlan>,
    /// Whether the kernel handles 4 elements per thread.
    pub vectorized: bool,
    /// How the body was mapped (`pointwise`, `reduce/persistent`, `matmul 64x64x16 4x4`, ...).
    pub strategy: String,
    /// How the workgroups cover the outermost extent (see [`GridSplit`]).
    #[serde(default)]
    pub split: Option<GridSplit>,
}

impl Rendered {
    /// The grid launching this kernel (rendered at a larger outer extent) over `k`, the kernel as
    /// instantiated at a smaller one: [`GridSplit::blocks`] workgroups in one dimension when the
    /// rendered kernel reports a split and they fit `max_per_dim`, else the rendered grid.
    pub fn grid_for(&self, k: &Kernel, max_per_dim: u32) -> [u32; 3] {
        match self.split.and_then(|s| s.blocks(k)) {
            Some(0) => [0, 1, 1],
            Some(w) if w <= self.workgroups && w <= u64::from(max_per_dim) => [w as u32, 1, 1],
            _ => self.grid,
        }
    }
}

/// Errors of the renderer.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RenderError {
    /// The kernel needs something WGSL or this adapter lacks (names the dtype, op or limit).
    #[error("kernel {kernel}: unsupported on WGSL: {what}")]
    Unsupported {
        /// Kernel name.
        kernel: String,
        /// What is missing.
        what: String,
    },
    /// The kernel IR is malformed (bad argument, expression order, dtype mismatch, ...).
    #[error("kernel {kernel}: invalid kernel IR: {msg}")]
    Invalid {
        /// Kernel name.
        kernel: String,
        /// What is wrong.
        msg: String,
    },
}

impl From<RenderError> for BackendError {
    fn from(e: RenderError) -> Self {
        match e {
            RenderError::Unsupported { kernel, what } => {
                BackendError::Unsupported { backend: "wgsl".into(), what: format!("kernel {kernel}: {what}") }
            }
            RenderError::Invalid { kernel, msg } => BackendError::Render { kernel, msg },
        }
    }
}

/// The WGSL entry-point name of a kernel: its name with every character outside `[A-Za-z0-9_]` replaced by
/// `_`, kept as is when it has the scheduler's form `k<digits>...` (which no WGSL keyword and no
/// module-scope name of the generated code has), else prefixed with `k_`.
pub fn entry_name(kernel: &str) -> String {
    let s: String = kernel.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' }).collect();
    let mut chars = s.chars();
    let scheduler_form = chars.next() == Some('k') && chars.next().is_some_and(|c| c.is_ascii_digit());
    let s = if scheduler_form { s } else { format!("k_{s}") };
    // WGSL reserves identifiers starting with two underscores.
    s.replace("__", "_x")
}

/// Renders `kernel` of `program` with the default [`Tuning`].
pub fn render(kernel: &Kernel, program: &Program, caps: &WgslCaps) -> Result<Rendered, RenderError> {
    render_with(kernel, program, caps, &Tuning::default())
}

/// How each argument was accessed while rendering (to choose its declaration).
#[derive(Clone, Debug, Default)]
pub(crate) struct ArgUse {
    pub(crate) contig_loads: usize,
    pub(crate) other_loads: usize,
    pub(crate) contig_stores: usize,
    pub(crate) other_stores: usize,
}

/// What a body template produced.
pub(crate) struct Body {
    /// Module-scope declarations besides the bindings (workgroup arrays).
    pub(crate) globals: Vec<String>,
    /// The entry point's parameters.
    pub(crate) params: String,
    pub(crate) workgroup_size: [u32; 3],
    pub(crate) workgroups: u64,
    pub(crate) vectorized: bool,
    pub(crate) strategy: String,
    /// A comment line describing the mapping.
    pub(crate) summary: String,
    /// How the workgroups cover the outermost extent (`None`: only the full grid is valid).
    pub(crate) split: Option<GridSplit>,
}

/// Renders `kernel` of `program` with explicit tuning knobs.
pub fn render_with(
    kernel: &Kernel,
    program: &Program,
    caps: &WgslCaps,
    tuning: &Tuning,
) -> Result<Rendered, RenderError> {
    let unsupported = |what: String| RenderError::Unsupported { kernel: kernel.name.clone(), what };
    let invalid = |msg: String| RenderError::Invalid { kernel: kernel.name.clone(), msg };
    validate(kernel)?;
    // i64/u64 are computed in 32 bits: refuse a kernel whose 64-bit values may leave that range.
    sinter_core::kernel::narrow::check(program, kernel)
        .map_err(|o| unsupported(format!("{o}; WGSL has no 64-bit integers and computes {} in 32 bits", o.dtype)))?;
    if kernel.args.len() > caps.max_storage_buffers as usize {
        return Err(unsupported(format!(
            "binds {} storage buffers; this adapter allows {} per shader stage",
            kernel.args.len(),
            caps.max_storage_buffers
        )));
    }
    // Arguments: layouts, and how each is bound (split into windows when its buffer exceeds one binding).
    let mut args = Vec::with_capacity(kernel.args.len());
    let mut bytes_of = Vec::with_capacity(kernel.args.len());
    for (i, a) in kernel.args.iter().enumerate() {
        let decl = program
            .buffers
            .get(a.buffer.0 as usize)
            .ok_or_else(|| invalid(format!("argument {i} names buffer b{}, which the program lacks", a.buffer.0)))?;
        if decl.dtype != a.dtype {
            return Err(invalid(format!("argument {i} is {} but buffer b{} is {}", a.dtype, a.buffer.0, decl.dtype)));
        }
        if a.numel > decl.numel {
            return Err(invalid(format!(
                "argument {i} has {} elements but buffer b{} has {}",
                a.numel, a.buffer.0, decl.numel
            )));
        }
        let layout = Layout::of(a.dtype, caps.has_f16).ok_or_else(|| emit::unsupported_dtype(kernel, a.dtype))?;
        let bytes =
            (decl.numel as u64).saturating_mul(a.dtype.size_bytes() as u64).max(1).div_ceil(4).saturating_mul(4);
        let split = if bytes > caps.max_binding_bytes {
            Some(split_plan(bytes, caps).map_err(|why| {
                unsupported(format!(
                    "buffer b{} ({} x {}, {bytes} bytes) exceeds this adapter's max_storage_buffer_binding_size \
                     of {} bytes and cannot be split: {why}",
                    a.buffer.0, decl.numel, a.dtype, caps.max_binding_bytes
                ))
            })?)
        } else {
            None
        };
        if split.is_some() && decl.numel as u64 > u64::from(u32::MAX) {
            return Err(unsupported(format!(
                "buffer b{} has {} elements; element indices are 32-bit (at most {})",
                a.buffer.0,
                decl.numel,
                u32::MAX
            )));
        }
        let aliased_write =
            a.access == Access::Read && kernel.args.iter().any(|b| b.buffer == a.buffer && b.access == Access::Write);
        args.push(ArgInfo {
            name: format!("a{i}"),
            dtype: a.dtype,
            layout,
            numel: decl.numel,
            access: a.access,
            vec: false,
            atomic: matches!(layout, Layout::Packed { .. }) && a.access == Access::Write,
            read_write: a.access == Access::Write || aliased_write,
            split,
        });
        bytes_of.push(bytes);
    }
    let total_bindings: u64 = args.iter().map(|a| u64::from(a.binding_count())).sum();
    if total_bindings > u64::from(caps.max_storage_buffers) {
        let split: Vec<String> = args
            .iter()
            .zip(&kernel.args)
            .filter_map(|(a, ka)| {
                a.split.map(|s| {
                    format!("{} (b{}) in {} windows of {} bytes", a.name, ka.buffer.0, s.windows, s.window_bytes)
                })
            })
            .collect();
        return Err(unsupported(format!(
            "binds {total_bindings} storage buffers ({} arguments, of which {} exceed the {}-byte binding limit and \
             are split); this adapter allows {} per shader stage",
            kernel.args.len(),
            split.join(", "),
            caps.max_binding_bytes,
            caps.max_storage_buffers
        )));
    }
    let mut bindings = Vec::with_capacity(total_bindings as usize);
    for (i, ((a, ka), &bytes)) in args.iter().zip(&kernel.args).zip(&bytes_of).enumerate() {
        let windows: Vec<(String, u64, u64)> = match a.split {
            None => vec![(a.name.clone(), 0, bytes)],
            Some(s) => (0..u64::from(s.windows))
                .map(|k| {
                    let off = k * s.window_bytes;
                    (format!("{}_{k}", a.name), off, s.window_bytes.min(bytes - off))
                })
                .collect(),
        };
        for (name, offset_bytes, size_bytes) in windows {
            bindings.push(BindingPlan {
                binding: bindings.len() as u32,
                arg: i,
                buffer: ka.buffer,
                name,
                dtype: a.dtype,
                read_write: a.read_write,
                offset_bytes,
                size_bytes,
            });
        }
    }

    // Pass 1 observes how each argument is accessed; pass 2 renders with the declarations that fit.
    let (_, _, uses) = render_body(kernel, caps, tuning, args.clone())?;
    for (a, u) in args.iter_mut().zip(&uses) {
        let vec_ok = a.layout.vec_decl() && a.numel.is_multiple_of(4) && a.numel > 0;
        match a.access {
            Access::Read => a.vec = vec_ok && u.contig_loads > 0,
            Access::Write => {
                a.vec = vec_ok && u.contig_stores > 0 && u.other_stores == 0;
                a.atomic = matches!(a.layout, Layout::Packed { .. }) && u.other_stores > 0;
            }
        }
    }
    let (body, em_out, _) = render_body(kernel, caps, tuning, args.clone())?;
    let (text, helpers, enables) = em_out;

    let entry = entry_name(&kernel.name);
    let mut src = String::new();
    let needs_f16 = helpers.needs_f16 || args.iter().any(|a| a.layout == Layout::F16) || enables.contains(&"f16");
    if needs_f16 {
        if !caps.has_f16 {
            return Err(unsupported("f16 storage without the SHADER_F16 feature".into()));
        }
        src.push_str("enable f16;\n");
    }
    for e in enables.iter().filter(|e| **e != "f16") {
        src.push_str(&format!("enable {e};\n"));
    }
    if needs_f16 || enables.iter().any(|e| *e != "f16") {
        src.push('\n');
    }
    src.push_str(&format!("// kernel {}: {}\n", kernel.name, kernel.ops.join(", ")));
    if !kernel.origins.is_empty() {
        let o: Vec<String> = kernel.origins.iter().map(|n| format!("%{n}")).collect();
        src.push_str(&format!("// fused graph nodes: {}\n", o.join(" ")));
    }
    src.push_str(&format!("// {}\n\n", body.summary));
    let mut first_binding = 0;
    for (i, (a, ka)) in args.iter().zip(&kernel.args).enumerate() {
        let role = program
            .buffers
            .get(ka.buffer.0 as usize)
            .map(|b| match &b.kind {
                sinter_core::kernel::BufferKind::Input(p) => format!("input {p}"),
                sinter_core::kernel::BufferKind::Output(p) => format!("output {p}"),
                sinter_core::kernel::BufferKind::Constant(_) => "constant".to_string(),
                sinter_core::kernel::BufferKind::Intermediate => "intermediate".to_string(),
            })
            .unwrap_or_default();
        let split = match a.split {
            Some(s) => format!(", split into {} bindings of {} bytes", s.windows, s.window_bytes),
            None => String::new(),
        };
        src.push_str(&format!("// a{i}: b{} {}[{}] ({role}){split}\n", ka.buffer.0, a.dtype, a.numel));
        src.push_str(&a.declaration(first_binding));
        src.push('\n');
        first_binding += a.binding_count() as usize;
    }
    src.push('\n');
    for g in &body.globals {
        src.push_str(g);
        src.push('\n');
    }
    if !body.globals.is_empty() {
        src.push('\n');
    }
    let accessors: String = args.iter().map(|a| a.accessors(&helpers.accessors)).collect();
    if !accessors.is_empty() {
        src.push_str("// window accessors of the split arguments\n");
        src.push_str(&accessors);
    }
    if !helpers.is_empty() {
        src.push_str(&helpers.render());
    }
    let [x, y, z] = body.workgroup_size;
    src.push_str(&format!("@compute @workgroup_size({x}, {y}, {z})\nfn {entry}({}) {{\n", body.params));
    src.push_str(&text);
    src.push_str("}\n");

    let grid = if body.workgroups == 0 {
        [0, 1, 1]
    } else {
        crate::device::spread_workgroups(body.workgroups, caps.max_workgroups_per_dim)
            .map_err(|e| unsupported(e.to_string()))?
    };
    Ok(Rendered {
        name: kernel.name.clone(),
        source: src,
        entry,
        workgroup_size: body.workgroup_size,
        grid,
        workgroups: body.workgroups,
        bindings,
        vectorized: body.vectorized,
        strategy: body.strategy,
        split: body.split,
    })
}

/// The windows of an argument of `bytes` (a multiple of 4, above the binding limit): the largest window
/// that fits one binding, starts at a multiple of the storage offset alignment and holds whole `vec4`s
/// (16 bytes), and how many cover the buffer.
fn split_plan(bytes: u64, caps: &WgslCaps) -> Result<Split, String> {
    let align = u64::from(caps.storage_offset_alignment.max(1));
    let gcd = |mut a: u64, mut b: u64| {
        while b != 0 {
            (a, b) = (b, a % b);
        }
        a
    };
    let step = align / gcd(align, 16) * 16;
    let window_bytes = caps.max_binding_bytes / step * step;
    if window_bytes == 0 {
        return Err(format!("a binding cannot hold one aligned step of {step} bytes"));
    }
    let windows = bytes.div_ceil(window_bytes);
    let windows = u32::try_from(windows).map_err(|_| format!("{windows} windows"))?;
    Ok(Split { window_bytes, windows })
}

type BodyOut = (Body, (String, helpers::Helpers, Vec<&'static str>), Vec<ArgUse>);

fn render_body(kernel: &Kernel, caps: &WgslCaps, tuning: &Tuning, args: Vec<ArgInfo>) -> Result<BodyOut, RenderError> {
    let n = args.len();
    let mut em = Emitter::new(kernel, args)?;
    em.uses = vec![ArgUse::default(); n];
    let body = match &kernel.body {
        KernelBody::Pointwise { numel, stores } => pointwise::render(&mut em, *numel, stores, caps, tuning)?,
        KernelBody::Reduce(r) => reduce::render(&mut em, r, caps, tuning)?,
        KernelBody::Matmul(m) => matmul::render(&mut em, m, caps, tuning)?,
        KernelBody::Attention(a) => attention::render(&mut em, a, caps, tuning)?,
    };
    let uses = std::mem::take(&mut em.uses);
    Ok((body, (em.out, em.h, em.enables), uses))
}

/// Structural checks of the kernel IR that rendering relies on (core's, shared with the CUDA
/// renderer and the verifier).
fn validate(k: &Kernel) -> Result<(), RenderError> {
    sinter_core::kernel::analysis::check_kernel(k).map_err(|msg| RenderError::Invalid { kernel: k.name.clone(), msg })
}
