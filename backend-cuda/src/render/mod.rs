//! The CUDA renderer: a pure function from one kernel of the kernel IR (plus a [`Tuning`]) to
//! CUDA C++ source text and its launch shape. No device, no I/O.
//!
//! Each kernel is one `extern "C" __global__ void <name>(...)` whose parameters are one pointer
//! per [`Kernel::args`] entry, in order (`const T* __restrict__ aN` for reads, `T* __restrict__ aN`
//! for writes, `T` the storage type, see the `types` module), then for kernels with private
//! scratch (split-k) one `float* __restrict__ sinter_ws` ([`Rendered::scratch_bytes`], zeroed
//! once by the launcher, its counters left zero by every launch), then for kernels fed by bulk
//! tensor copies one tensor map per [`Rendered::tensor_maps`] entry (`const __grid_constant__
//! sinter_tmap tmN`, encoded by the launcher from the pointer it names); nothing else is passed: extents are
//! baked into the source. The source is self-contained (f16 / bf16 are declared by the `half` module, no
//! header is included) and is meant to be compiled by NVRTC without fast-math flags.
//!
//! # Kernel shapes
//!
//! * **Pointwise**: one thread per lane, or per group of `W` consecutive lanes
//!   (`W` = 16 bytes over the widest contiguous element: 4 for f32, 8 for f16/bf16, 2 for f64,
//!   16 for bytes) when the lane count is a multiple of `W` and some access is contiguous and
//!   aligned in the lane: those are one `sinter_vec<T, W>` (16-byte) load or store, accesses
//!   uniform across the group are loaded once, others element by element. 256 threads per block,
//!   `ceil(threads / 256)` blocks on grid x, an early return only when the grid has excess threads.
//! * **Reduce**: one block per row (`Persistent`: row in registers when it fits,
//!   `Looped` otherwise; warp shuffles then shared memory across warps), or one thread per row
//!   (`ThreadPerRow`). Sequential reductions, `Acc(k)` visible to later ones and to the element
//!   stores; row stores once per row.
//! * **Matmul**: bf16/f16 operands with f32 accumulation on tensor cores (`mma.sync` m16n8k16, a
//!   multi-stage `cp.async` pipeline, [`MmaTile`]; the `mma` module), and f32 operands there too
//!   where the product allows TF32 (m16n8k8); implicit im2col operands (convolutions) read tap by
//!   tap in either template's loader (the `im2col` module); every other dtype on a
//!   shared-memory tiled CUDA-core kernel with register blocking ([`MatmulTile`]); operands read
//!   through their strides with zero fill at the edges, then the epilogue per output element.
//!   fp8 operands (the scheduler's prologue) are widened exactly by the CUDA-core kernel's loader;
//!   their fast path is cuBLASLt's fp8 product (`backend/library.rs`), not a rendered kernel.
//! * **Attention**: FlashAttention-2 on tensor cores for bf16/f16 (`mma.sync`, a `cp.async` K/V
//!   ring, online softmax in registers, [`AttnTile`]); a decode template for at most
//!   [`DECODE_M`] queries (keys split over warps, 16-byte loads, partials combined in shared
//!   memory); a warp-per-row template for every other dtype and shape (the `attention` module).
//!
//! Indices need no bounds checks: the kernel IR guarantees them in range (the `index` module). Vector
//! accesses assume every argument pointer is 16-byte aligned (device allocations are 256-byte
//! aligned; a sub-allocator must keep 16).
//!
//! # Numerics
//!
//! As [`sinter_core::scalar`] and the kernel-IR interpreter define them (the `ops` and `prelude` modules):
//! f16/bf16 computed in `float` and rounded only at casts and stores; fp8 stored as its code
//! (`unsigned char`), widened exactly at loads and rounded at casts and stores by the prelude's
//! software conversions (bit for bit as `sinter_core::fp8`); literals converted as casts
//! from f64; integers wrap to their dtype after every op (signed arithmetic in the unsigned type
//! of its width, no undefined behaviour); accurate libm (`expf`, `erff`, ..., the double versions
//! for f64); NaN-propagating max/min, half-even `rint`, floored `mod`, `sign(-0) = +0`,
//! float-to-integer casts truncating, saturating and wrapping. The compiler may contract `a * b + c`
//! into an FMA unless NVRTC is given `--fmad=false` (one rounding less, never more error).
//! One exception, where no output can show it: a kernel whose every output is f16/bf16 and whose
//! values pass through no discontinuous op computes `exp` as `__expf` and float division through
//! the reciprocal, as Triton does (`analysis::relaxed_math` has the bounds and the measured reason).
//!
//! # Launch
//!
//! [`Rendered::grid`] blocks of [`Rendered::block`] threads with [`Rendered::dynamic_shared_bytes`]
//! of dynamic shared memory (the tensor-core template's pipeline, up to the opt-in limit
//! [`CudaCaps::max_dynamic_shared_bytes`]; the other templates use static `__shared__` arrays
//! within 48 KiB). A grid of `[0, 1, 1]` means there is nothing to do: skip the launch.

mod analysis;
mod attention;
mod attention_fma;
pub mod attention_generic;
mod attention_pack;
mod attention_pingpong;
mod attention_rows;
mod attention_tc;
mod attention_tile;
mod attention_wgmma;
mod emit;
mod half;
mod im2col;
mod index;
pub mod krsc;
mod matmul;
mod mma;
mod mma_epilogue;
mod mma_split;
mod mma_tile;
mod mma_tma;
mod mma_wgmma;
mod ops;
mod pointwise;
mod prelude;
mod prelude_tc;
pub mod ptx;
mod quad_store;
mod reduce;
mod reduce_rows;
mod scratch;
mod trig;
mod types;

use serde::{Deserialize, Serialize};
use sinter_core::DType;
use sinter_core::backend::BackendError;
pub use sinter_core::kernel::dynamic::{GridSplit, OuterUnit};
use sinter_core::kernel::{Access, Kernel, KernelBody, ReduceStrategy};

pub use attention::{AttnEngine, AttnTile, DECODE_M, check_attn, tc_applies};
pub use matmul::{MatmulTile, check_tile};
pub use mma::{MmaEngine, MmaTile, check_mma, mma_applies};

use crate::tma::TensorMapParam;
use emit::Emitter;

/// What the renderer may assume about the device.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CudaCaps {
    /// Compute capability (major, minor), e.g. (9, 0) on Hopper.
    pub sm: (u32, u32),
    /// Max threads per block.
    pub max_threads_per_block: u32,
    /// Static shared memory per block, bytes (48 KiB without opt-in).
    pub max_shared_bytes_per_block: u32,
    /// Streaming multiprocessors.
    pub sm_count: u32,
    /// Dynamic shared memory per block after opting in (`cuFuncSetAttribute`), bytes.
    #[serde(default)]
    pub max_dynamic_shared_bytes: u32,
    /// The renderer may write PTX directly for the kernels [`ptx`] covers (assembled by the
    /// driver's JIT, no NVRTC); else every kernel is CUDA C++.
    #[serde(default)]
    pub ptx: bool,
    /// The default tuning of an attention kernel that a shape-generic kernel covers renders that
    /// ([`attention_generic`]: extents as run-time parameters, one source for every shape, so a
    /// build that compiled it ahead of time loads it without NVRTC); else every kernel is
    /// specialized to its shape.
    #[serde(default)]
    pub generic_attention: bool,
}

impl CudaCaps {
    /// An H100 SXM (sm_90, 132 SMs): what snapshots and CI compiles assume.
    pub fn hopper() -> CudaCaps {
        CudaCaps {
            sm: (9, 0),
            max_threads_per_block: 1024,
            max_shared_bytes_per_block: 48 * 1024,
            sm_count: 132,
            max_dynamic_shared_bytes: 227 * 1024,
            ptx: true,
            generic_attention: false,
        }
    }
}

/// A tuning of one kernel (what max-autotune varies); `Tuning::default()` is the heuristic choice.
/// A field that does not apply to the kernel's kind must be `None` (or the "off" value);
/// [`render`] returns [`RenderError::InvalidTuning`] for a tuning it cannot honour.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Tuning {
    /// Threads per block (None: the renderer's default for the kernel kind). A positive multiple
    /// of 32 up to the device limit; for matmuls it must equal the tile's thread count.
    pub block: Option<u32>,
    /// Vectorize contiguous aligned accesses (16-byte loads/stores) where provable: `None` where
    /// provable, `Some(false)` never, `Some(true)` required (invalid where nothing is contiguous).
    pub vectorize: Option<bool>,
    /// Block-per-row reductions: keep the row in registers (`None`: whenever it fits 32 elements
    /// per thread, also for rows the scheduler marked `Looped`; `Some(false)`: always loop;
    /// `Some(true)`: required, invalid when the row does not fit).
    #[serde(default)]
    pub persistent: Option<bool>,
    /// Matmuls on CUDA cores: the tile (`None`: by size, see [`MatmulTile`]). Setting it picks the
    /// CUDA-core template for a matmul the tensor cores could take.
    #[serde(default)]
    pub tile: Option<MatmulTile>,
    /// Matmuls on tensor cores: the tile (`None`: by size, see [`MmaTile`]); invalid together with
    /// `tile` and for matmuls the tensor-core template does not take ([`mma_applies`]).
    #[serde(default)]
    pub mma: Option<MmaTile>,
    /// Matmuls: run as a vendor-library call (cuBLASLt) with this algorithm of its heuristic's
    /// list instead of a rendered kernel (the backend's choice; [`render`] refuses it).
    #[serde(default)]
    pub library: Option<u32>,
    /// Attention on tensor cores: the tile (`None`: by head dimension, see [`AttnTile`]; the
    /// decode or row template where the shape or dtype calls for one). Setting it requires the
    /// tensor-core template ([`tc_applies`]).
    #[serde(default)]
    pub attn: Option<AttnTile>,
    /// Matmuls on the `mma.sync` template: split the k walk over this many blocks per output
    /// tile (1 to [`MAX_SPLIT_K`], at most one per k step), the tile's last block adding the
    /// partial sums in split order before the epilogue (`None`: [`MmaTile`]'s default for the
    /// shape where the tile is the default one, else 1). The attention decode template: split
    /// the keys over this many blocks per head, the head's last block combining the partial
    /// softmax states (flash decoding; `None`: the default for the shape). Reductions: split each
    /// row over this many blocks (1 to `MAX_ROW_SPLIT`, 4096), the row's last block folding
    /// the partials (`None`: the default for the shape, see the `reduce` module).
    #[serde(default)]
    pub split_k: Option<u32>,
    /// Pointwise kernels: lane groups (16-byte vectors, or single lanes) per thread, 1 to
    /// [`MAX_GROUPS`] (`None`: 1). A block covers `groups` consecutive block-wide slices, so
    /// accesses stay coalesced; invalid for other kernel kinds. Measured on the H100 (session 8, max-autotune over blocks 64-1024 and 1, 2
    /// or 4 groups): 16-byte kernels of 10-16M lanes ran within 1-2% of each other whatever the
    /// count (add_relu_mul 43.0-44.5 us, cos 47.8-50.8, one group among the fastest), so the
    /// default stays 1 and the knob is max-autotune's (its add_relu_mul winner: one-lane groups,
    /// two per thread, 42.1 us).
    #[serde(default)]
    pub groups: Option<u32>,
}

/// The most lane groups one pointwise thread covers ([`Tuning::groups`]).
pub const MAX_GROUPS: u32 = 8;

/// The most blocks one output tile's k walk is split over ([`Tuning::split_k`]).
pub const MAX_SPLIT_K: u32 = 16;

/// A rendered kernel.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Rendered {
    /// The `extern "C"` entry point: [`Kernel::name`] (scheduler names are valid identifiers;
    /// others are made so by [`entry_name`]).
    pub name: String,
    /// Full CUDA C++ source (self-contained: no `#include`).
    pub source: String,
    /// Grid (blocks); `[0, 1, 1]` when there is nothing to launch.
    pub grid: [u32; 3],
    /// Block (threads).
    pub block: [u32; 3],
    /// Dynamic shared memory bytes to launch with.
    pub dynamic_shared_bytes: u32,
    /// Short description of the strategy (e.g. `pointwise x4 block 256`,
    /// `reduce persistent x8 block 256 vec4`, `matmul 128x128x8 8x8`).
    pub strategy: String,
    /// How the blocks cover the outermost extent, so a dynamic program launches fewer at a smaller
    /// batch ([`GridSplit`]); `None`: only the full grid is valid (library calls, the swizzled
    /// block order of a tensor-core product of one batch).
    #[serde(default)]
    pub split: Option<GridSplit>,
    /// Bytes of device memory private to this kernel, passed as one more parameter after the
    /// arguments (`float* __restrict__ sinter_ws`), zeroed once before the first launch: the
    /// kernel leaves the parts it needs zero (split-k tile counters) zero again at the end of
    /// every launch and writes the rest (partial sums) before reading it, so launches on one
    /// stream reuse it. 0: no such parameter.
    #[serde(default)]
    pub scratch_bytes: u64,
    /// Tensor maps the kernel takes by value after its pointer parameters, in order (`const
    /// __grid_constant__ sinter_tmap tm<i>`): the launcher encodes each from the address of its
    /// argument ([`crate::tma`]). Empty for kernels without bulk tensor copies.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tensor_maps: Vec<TensorMapParam>,
    /// The arithmetic of the products where it differs from the operands' dtype: `tf32` when
    /// f32 operands run on the tensor-core template's TF32 path (the product allows it,
    /// [`sinter_core::kernel::MatmulBody::tf32`], and no CUDA-core tile was asked for). Names a
    /// compute ceiling of the profile ([`sinter_core::profile::Ceilings::matmul_tflops`]).
    #[serde(default)]
    pub compute: Option<&'static str>,
    /// Values the kernel takes by value after its pointers and scratch, before its tensor maps
    /// (8-byte launch values; a shape-generic kernel's extents, [`attention_generic::PARAMS`]).
    /// Empty for kernels specialized to their shape.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub params: Vec<u64>,
}

/// Errors of the renderer.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum RenderError {
    /// The kernel needs something the renderer does not do.
    #[error("kernel {kernel}: unsupported by the CUDA renderer: {what}")]
    Unsupported {
        /// Kernel name.
        kernel: String,
        /// What.
        what: String,
    },
    /// The tuning is not valid for this kernel.
    #[error("kernel {kernel}: invalid tuning: {msg}")]
    InvalidTuning {
        /// Kernel name.
        kernel: String,
        /// Why.
        msg: String,
    },
}

impl From<RenderError> for BackendError {
    fn from(e: RenderError) -> Self {
        match e {
            RenderError::Unsupported { kernel, what } => {
                BackendError::Unsupported { backend: "cuda".into(), what: format!("kernel {kernel}: {what}") }
            }
            RenderError::InvalidTuning { kernel, msg } => BackendError::Render { kernel, msg },
        }
    }
}

/// What a body template produced besides the code.
pub(crate) struct Body {
    grid: [u32; 3],
    block: [u32; 3],
    strategy: String,
    /// A comment line describing the mapping.
    summary: String,
    /// The second `__launch_bounds__` argument: blocks per SM to keep registers for.
    min_blocks: Option<u32>,
    /// Dynamic shared memory bytes to launch with.
    dynamic_shared: u32,
    /// How the blocks cover the outermost extent.
    split: Option<GridSplit>,
    /// Private zeroed scratch bytes ([`Rendered::scratch_bytes`]).
    scratch: u64,
    /// Tensor-map parameters after the pointers.
    tensor_maps: Vec<TensorMapParam>,
    /// Blocks per cluster along x (`__cluster_dims__`; 1: no cluster). The grid is a multiple.
    cluster: u32,
}

impl Body {
    /// The [`Rendered`] of `k` launched as this body says, with `source` and the strategy followed
    /// by `suffix` (the PTX renderers' ` ptx`): one place for what both renderers return.
    fn into_rendered(self, k: &Kernel, caps: &CudaCaps, t: &Tuning, source: String, suffix: &str) -> Rendered {
        Rendered {
            name: entry_name(&k.name),
            source,
            grid: self.grid,
            block: self.block,
            dynamic_shared_bytes: self.dynamic_shared,
            strategy: format!("{}{suffix}", self.strategy),
            split: self.split,
            scratch_bytes: self.scratch,
            tensor_maps: self.tensor_maps,
            compute: compute(k, caps, t),
            params: Vec::new(),
        }
    }

    /// A one-dimensional launch of `blocks` blocks of `threads` threads (`min_blocks` per SM kept
    /// resident for registers, `shared` bytes of dynamic shared memory). `Err` holds the body of an
    /// empty launch (no blocks: nothing to render beyond the signature).
    fn launch(
        blocks: u64,
        threads: u32,
        strategy: String,
        summary: String,
        min_blocks: Option<u32>,
        shared: u32,
    ) -> Result<Body, Box<Body>> {
        let body = Body {
            grid: [blocks as u32, 1, 1],
            block: [threads, 1, 1],
            strategy,
            summary,
            min_blocks,
            dynamic_shared: shared,
            split: None,
            scratch: 0,
            tensor_maps: Vec::new(),
            cluster: 1,
        };
        if blocks == 0 { Err(Box::new(Body { grid: [0, 1, 1], dynamic_shared: 0, ..body })) } else { Ok(body) }
    }

    /// The body with these tensor-map parameters.
    fn with_tensor_maps(self, tensor_maps: Vec<TensorMapParam>) -> Body {
        Body { tensor_maps, ..self }
    }

    /// The body launched in clusters of `blocks` along x (compile-time `__cluster_dims__`, so a
    /// plain launch forms them; the grid must be a multiple).
    fn with_cluster(self, blocks: u32) -> Body {
        debug_assert!(self.grid[0].is_multiple_of(blocks));
        Body { cluster: blocks, ..self }
    }

    /// The body with blocks covering its outer extent as `split` says.
    fn with_split(self, split: GridSplit) -> Body {
        Body { split: Some(split), ..self }
    }

    /// The body with `bytes` of private zeroed scratch ([`Rendered::scratch_bytes`]).
    fn with_scratch(self, bytes: u64) -> Body {
        Body { scratch: bytes, ..self }
    }
}

/// What the compiled code of `r` depends on ([`sinter_core::digest::code_key`] of its source and
/// entry). Kernels of equal keys compile to the same machine code under their own names, so a
/// load compiles one of them and launches its entry for all (the identical layers of a
/// transformer).
pub fn body_key(r: &Rendered) -> String {
    sinter_core::digest::code_key(&r.source, &r.name)
}

/// The C++ entry-point name of a kernel: its name with every character outside `[A-Za-z0-9_]`
/// replaced by `_`, kept when it has the scheduler's form `k<digit>...` (no C++ keyword, no name of
/// the generated code has it), else prefixed with `k_`; double underscores (reserved in C++) become
/// `_x`.
pub fn entry_name(kernel: &str) -> String {
    let s: String = kernel.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' }).collect();
    let mut chars = s.chars();
    let scheduler_form = chars.next() == Some('k') && chars.next().is_some_and(|c| c.is_ascii_digit());
    let mut s = if scheduler_form { s } else { format!("k_{s}") };
    while s.contains("__") {
        s = s.replace("__", "_x");
    }
    s
}

/// The tuning a program compiled for a dynamic batch renders `k` with in default mode, where the
/// default tuning's kernel would cover only its compiled extent (a persistent attention tile, whose
/// grid has no [`GridSplit`]); `None` where [`Tuning::default`] serves every batch.
pub fn fixed_grid_default(k: &Kernel, caps: &CudaCaps) -> Option<Tuning> {
    let KernelBody::Attention(a) = &k.body else { return None };
    attention::fixed_grid_default(a, caps).map(|tile| Tuning { attn: Some(tile), ..Tuning::default() })
}

/// Whether a kernel rendered with `t` launches fewer blocks at a smaller dynamic batch, i.e. is not
/// a persistent attention tile (whose grid, sized by the SMs, loops over the compiled extent's work
/// tiles and has no [`GridSplit`]). Other templates that lack a split run their full grid, as
/// their default tunings do.
pub fn shrinks_with_batch(t: &Tuning) -> bool {
    t.attn.is_none_or(|a| !a.persistent_blocks())
}

/// Renders `k` with `t`. Kernel parameters are one pointer per [`Kernel::args`] entry, in order
/// (`const T* __restrict__ a0` for reads, `T* __restrict__ a1` for writes), then the private
/// scratch pointer where [`Rendered::scratch_bytes`] is not 0, then the tensor maps of
/// [`Rendered::tensor_maps`], nothing else.
pub fn render(k: &Kernel, caps: &CudaCaps, t: &Tuning) -> Result<Rendered, RenderError> {
    analysis::validate(k)?;
    if let Some(a) = t.library {
        return Err(RenderError::InvalidTuning {
            kernel: k.name.clone(),
            msg: format!("library algorithm {a}: a library call, not a rendered kernel"),
        });
    }
    if t.groups.is_some() && !matches!(k.body, KernelBody::Pointwise { .. }) {
        return Err(RenderError::InvalidTuning {
            kernel: k.name.clone(),
            msg: "groups apply to pointwise kernels".into(),
        });
    }
    // GQA decode, default tuning: the group's query heads as the rows of one tensor-core tile.
    if *t == Tuning::default()
        && let Some((packed, g, tile)) = attention_pack::pack_gqa(k, caps)
    {
        let mut r = render(&packed, caps, &Tuning { attn: Some(tile), ..Tuning::default() })?;
        if let Some(s) = &mut r.split {
            s.per *= g as u64;
        }
        r.strategy.push_str(&format!(" pack-gqa {g}"));
        return Ok(r);
    }
    if caps.generic_attention && *t == Tuning::default() && matches!(k.body, KernelBody::Attention(_)) {
        match attention_generic::plan(k, caps) {
            Ok(plan) => return attention_generic::render(k, caps, &plan),
            Err(why) => tracing::trace!(target: "sinter::cuda", "{}: no generic attention kernel: {why}", k.name),
        }
    }
    match ptx::render(k, caps, t) {
        Ok(r) => return Ok(r),
        Err(why) => tracing::trace!(target: "sinter::cuda", "{}: CUDA C++, not PTX: {why}", k.name),
    }
    let wide = index::needs_wide(k);
    let mut em = Emitter::new(k, wide);
    let body = match &k.body {
        KernelBody::Pointwise { numel, stores } => pointwise::render(&mut em, *numel, stores, caps, t)?,
        KernelBody::Reduce(r) => reduce::render(&mut em, r, caps, t)?,
        KernelBody::Matmul(m) => matmul::render(&mut em, m, caps, t)?,
        KernelBody::Attention(a) => attention::render(&mut em, a, caps, t)?,
    };
    let name = entry_name(&k.name);
    let mut src = String::new();
    src.push_str(&format!("// sinter kernel {}: {}\n", k.name, k.ops.join(", ")));
    if !k.origins.is_empty() {
        let o: Vec<String> = k.origins.iter().map(|n| format!("%{n}")).collect();
        src.push_str(&format!("// fused graph nodes: {}\n", o.join(" ")));
    }
    src.push_str(&format!("// {}\n", body.summary));
    let mut dts: Vec<DType> = k.args.iter().map(|a| a.dtype).chain(k.exprs.iter().map(|e| e.dtype)).collect();
    if let KernelBody::Matmul(m) = &k.body {
        dts.extend([m.in_dtype, m.acc_dtype]);
    }
    if let KernelBody::Attention(a) = &k.body {
        dts.extend([a.in_dtype, a.p_dtype]);
    }
    let body_src = head(&mut src, &em, &body, &dts, &name);
    let scratch = body.scratch > 0;
    let n = k.args.len() + scratch as usize + body.tensor_maps.len();
    for (i, a) in k.args.iter().enumerate() {
        let (cv, what) = if a.access == Access::Read { ("const ", "read") } else { ("", "written") };
        let sep = if i + 1 < n { "," } else { ")" };
        src.push_str(&format!(
            "\n    {cv}{}* __restrict__ a{i}{sep} // {}[{}] (b{}), {what}",
            types::storage(a.dtype),
            a.dtype,
            a.numel,
            a.buffer.0
        ));
    }
    // The private scratch pointer after the arguments, then the tensor maps (the launcher's
    // parameter order: pointers, then maps).
    if scratch {
        let sep = if k.args.len() + 1 < n { "," } else { ")" };
        src.push_str(&format!(
            "\n    float* __restrict__ sinter_ws{sep} // {} bytes of private scratch (split-k)",
            body.scratch
        ));
    }
    let before = k.args.len() + scratch as usize;
    for (i, t) in body.tensor_maps.iter().enumerate() {
        let sep = if before + i + 1 < n { "," } else { ")" };
        let d = &t.desc;
        src.push_str(&format!(
            "\n    const __grid_constant__ sinter_tmap tm{i}{sep} // a{} + {} bytes: {:?} extents {:?}, box {:?}",
            t.arg, t.offset_bytes, d.elem, d.dims, d.boxes
        ));
    }
    if n == 0 {
        src.push(')');
    }
    src.push_str("\n{\n");
    src.push_str(&body_src);
    src.push_str("}\n");
    Ok(body.into_rendered(k, caps, t, src, ""))
}

/// Appends what a kernel's source has before its parameters to `src`: the 16-bit declarations and
/// helpers the body (`em`'s output, pruned) uses, then the entry point up to its `(` with the
/// body's launch bounds and cluster; returns the pruned body. One place for both the
/// shape-specialized kernels ([`render`]) and the generic ones (`attention_generic`).
fn head(src: &mut String, em: &Emitter<'_>, body: &Body, dts: &[DType], name: &str) -> String {
    let body_src = emit::prune_unused(&em.out);
    let helpers = if em.h.is_empty() { String::new() } else { em.h.render() };
    src.push_str(&half::declarations(dts, &[&helpers, &body_src]));
    src.push('\n');
    src.push_str(&prelude::fp8_helpers(&body_src));
    src.push_str(&helpers);
    let [bx, by, bz] = body.block;
    let bounds = match body.min_blocks {
        Some(m) => format!("{}, {m}", bx * by * bz),
        None => (bx * by * bz).to_string(),
    };
    let cluster = if body.cluster > 1 { format!(" __cluster_dims__({}, 1, 1)", body.cluster) } else { String::new() };
    src.push_str(&format!("extern \"C\" __global__ void __launch_bounds__({bounds}){cluster} {name}("));
    body_src
}

/// [`Rendered::compute`]: `tf32` exactly when [`render`] takes the tensor-core template (no
/// CUDA-core tile asked for, and the template applies) for f32 operands.
fn compute(k: &Kernel, caps: &CudaCaps, t: &Tuning) -> Option<&'static str> {
    match &k.body {
        KernelBody::Matmul(mm) if mm.in_dtype == DType::F32 && t.tile.is_none() && mma_applies(mm, caps).is_ok() => {
            Some("tf32")
        }
        _ => None,
    }
}

/// Checks that `t` is a tuning [`render`] honours for `k` (to reject stale autotune-cache
/// entries): `Err` exactly when rendering would fail.
pub fn check_tuning(k: &Kernel, caps: &CudaCaps, t: &Tuning) -> Result<(), RenderError> {
    render(k, caps, t).map(|_| ())
}

/// The tunings max-autotune times for `k`: the default first, then block sizes (64..1024),
/// vectorization off, looped instead of persistent reductions, and matmul tiles; each renders, and
/// no two render the same source.
pub fn candidates(k: &Kernel, caps: &CudaCaps) -> Vec<Tuning> {
    let blocks: Vec<u32> =
        [64u32, 128, 256, 512, 1024].into_iter().filter(|&b| b <= caps.max_threads_per_block).collect();
    let mut all = vec![Tuning::default()];
    match &k.body {
        KernelBody::Pointwise { .. } => {
            for &b in &blocks {
                for v in [None, Some(false)] {
                    // Four groups per thread never won on the H100 (session 8); two did once.
                    for groups in [1, 2] {
                        all.push(Tuning { block: Some(b), vectorize: v, groups: Some(groups), ..Tuning::default() });
                    }
                }
            }
        }
        KernelBody::Reduce(r) if r.strategy == ReduceStrategy::ThreadPerRow => {
            for b in std::iter::once(32).chain(blocks.iter().copied()) {
                all.push(Tuning { block: Some(b), ..Tuning::default() });
            }
        }
        KernelBody::Reduce(r) => {
            // Rows split over 2 to 16 blocks an SM (kernels the split applies to, rows too few to
            // fill the device; the block sizes below take their own default split).
            if sinter_core::schedule::splittable(k) {
                let sms = u64::from(caps.sm_count.max(1));
                let rows = (r.rows as u64).max(1);
                for per_sm in [2u64, 4, 8, 16] {
                    let s = per_sm * sms / rows;
                    if s >= 2 && s <= u64::from(reduce::MAX_ROW_SPLIT) && s <= r.len as u64 / 1024 {
                        all.push(Tuning { split_k: Some(s as u32), ..Tuning::default() });
                    }
                }
            }
            all.push(Tuning { persistent: Some(false), ..Tuning::default() });
            all.push(Tuning { vectorize: Some(false), ..Tuning::default() });
            for b in std::iter::once(32).chain(blocks.iter().copied()) {
                for persistent in [None, Some(false)] {
                    for vectorize in [None, Some(false)] {
                        all.push(Tuning { block: Some(b), vectorize, persistent, ..Tuning::default() });
                    }
                }
            }
        }
        KernelBody::Matmul(mm) if mma_applies(mm, caps).is_ok() => {
            let tiles = MmaTile::WGMMA_CANDIDATES.into_iter().chain(MmaTile::TMA_CANDIDATES);
            let convs = mm.b.im2col.as_ref().map(|_| MmaTile::IM2COL_CANDIDATES).into_iter().flatten();
            for t in tiles.chain(MmaTile::CANDIDATES).chain(convs) {
                all.push(Tuning { mma: Some(t), ..Tuning::default() });
            }
            // The k walk split over blocks (products whose tiles leave SMs idle; refused where k
            // is too shallow for the split).
            for t in [MmaTile::LARGE, MmaTile::MEDIUM, MmaTile::SMALL]
                .into_iter()
                .filter(|t| mma_split::leaves_sms_idle(mm, caps, t))
            {
                for split_k in [2, 3, 4, 8] {
                    all.push(Tuning { mma: Some(t), split_k: Some(split_k), ..Tuning::default() });
                }
            }
        }
        KernelBody::Matmul(_) => {
            for tile in MatmulTile::CANDIDATES {
                all.push(Tuning { tile: Some(tile), ..Tuning::default() });
            }
        }
        KernelBody::Attention(a) => all.extend(attention::candidates(a, caps)),
    }
    let mut seen: Vec<(String, [u32; 3])> = Vec::new();
    let mut out = Vec::new();
    for t in all {
        if let Ok(r) = render(k, caps, &t) {
            let key = (r.source, r.grid);
            if !seen.contains(&key) {
                seen.push(key);
                out.push(t);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_names_are_safe_identifiers() {
        assert_eq!(entry_name("k3_softmax"), "k3_softmax");
        assert_eq!(entry_name("a0"), "k_a0");
        assert_eq!(entry_name("int"), "k_int");
        assert_eq!(entry_name("3x"), "k_3x");
        assert_eq!(entry_name("k1 weird-name"), "k1_weird_name");
        assert_eq!(entry_name("k2___x"), "k2_x_x");
        assert_eq!(entry_name(""), "k_");
    }
}
