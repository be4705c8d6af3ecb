//! Tensor-core matmuls: bf16/f16 operands, f32 accumulators, `mma.sync` m16n8k16 (sm_80+); f32
//! operands where the product allows TF32 ([`MatmulBody::tf32`]) on `mma.sync` m16n8k8, each
//! fragment element read from shared memory as f32 and rounded to TF32 there (`cvt.rna.tf32.f32`:
//! shared tiles hold the exact operands). The inner loop over a step is unrolled by 2 for TF32
//! (fully, its 64x64 warp tiles spill on sm_90a).
//!
//! A block of `warps_m x warps_n` warps computes a `bm x bn` output tile; each warp a
//! `(bm / warps_m) x (bn / warps_n)` sub-tile as `MI x NJ` m16n8 accumulator fragments (f32,
//! four per thread each). Along k the block walks `bk`-deep steps through a ring of `stages`
//! shared-memory buffers in dynamic shared memory: step `kt + stages - 1` is copied in while step
//! `kt` is multiplied, one barrier per step (the barrier both publishes step `kt` and retires the
//! buffer step `kt - 1` used, which the next copy overwrites).
//!
//! # Operands
//!
//! Each operand is kept in shared memory in its global layout, so global reads are coalesced
//! along its contiguous dimension: A as `[bm][bk]` when k is contiguous ("k-major"), else
//! `[bk][bm]`; B as `[bn][bk]` when k is contiguous, else `[bk][bn]`. Rows are padded by 8
//! elements (16 bytes): with rows a multiple of 64 bytes long, the eight 16-byte row segments one
//! `ldmatrix` phase reads then fall in eight different bank groups. `ldmatrix` reads the k-major
//! layouts as they are and the others with `.trans`, which yields the same fragments.
//!
//! The copy is 16-byte `cp.async` (8 elements, zero-filled past the edges through its source
//! size) when the contiguous stride is 1 and every other stride and the offset are multiples of 8
//! elements, so every copy is aligned (argument pointers are 16-byte aligned, see the module docs
//! of `render`); otherwise each element is loaded and stored by the thread (the "scalar" loader,
//! synchronous, for odd strides and views). Zero fill makes every edge (M, N, K not multiples of
//! the tile) exact: padded products add zeros.
//!
//! f32 operands the 16-byte copy cannot take use one 4-byte `cp.async` per element (zero fill
//! through its source size), asynchronous as the vector copies; 16-bit ones the scalar loader.
//!
//! # Implicit GEMM
//!
//! A B operand with the im2col form ([`MatOperand::im2col`]: a convolution's input) is k-minor
//! in shared memory (its columns follow the output pixels, contiguous along an output row at
//! stride 1) and loaded element by element: each thread computes the tap of its element (channel
//! and window offset from k, image and output pixel from n: constant divisions; the pixel part is
//! loop-invariant per thread) and copies it with a 4-byte `cp.async` (TF32) or the scalar loader
//! (bf16/f16), zero where the tap falls into the padding (the `im2col` module). The epilogue is
//! unchanged: the convolution's bias, batch norm, residual and activation stored NCHW.
//!
//! # Epilogue
//!
//! Per accumulator element, as the CUDA-core template does (the `mma_epilogue` module, shared
//! with the `wgmma` templates). Blocks are ordered in groups of [`GROUP_M`] tile rows
//! (consecutive blocks share B columns and A rows in L2), batch outermost.

use sinter_core::DType;
use sinter_core::kernel::{MatOperand, MatmulBody};

use super::emit::Emitter;
use super::matmul::{address, emit_operand_bases, lit, op_ity, tile_blocks};
pub(super) use super::mma_epilogue::{
    Frag, close_acc_loops, emit_block_order, emit_tile_origin, epilogue, launch_extents, open_acc_loops,
};
pub use super::mma_tile::{MmaEngine, MmaTile};
use super::prelude::H;
use super::{Body, CudaCaps, GridSplit, OuterUnit, RenderError, Tuning};

/// Tile rows per group of the block order.
pub const GROUP_M: u64 = 8;

/// The operand format of the template.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Elem {
    /// bf16/f16: `mma.sync` m16n8k16, fragments through `ldmatrix`.
    Half,
    /// f32 operands rounded to TF32 as fragments are read (`cvt.rna.tf32.f32`), `mma.sync`
    /// m16n8k8: where the product allows TF32 ([`MatmulBody::tf32`]).
    Tf32,
}

impl Elem {
    fn of(mm: &MatmulBody) -> Elem {
        if mm.in_dtype == DType::F32 { Elem::Tf32 } else { Elem::Half }
    }

    /// Bytes per element.
    pub(super) fn bytes(self) -> u32 {
        match self {
            Elem::Half => 2,
            Elem::Tf32 => 4,
        }
    }

    /// Elements per 16-byte copy.
    fn per_copy(self) -> usize {
        16 / self.bytes() as usize
    }

    /// Padding of a shared-tile row, elements: 16 bytes for 16-bit operands (eight `ldmatrix`
    /// rows in eight bank groups); for TF32, whose fragments are read element by element (lane
    /// `(g, t)` reads row `g`, column `t` of a k-major tile, or row `t`, column `g` of a k-minor
    /// one), 4 elements k-major and 8 k-minor, which put the 32 lanes in 32 banks.
    fn pad(self, kmajor: bool) -> u32 {
        match (self, kmajor) {
            (Elem::Half, _) | (Elem::Tf32, false) => 8,
            (Elem::Tf32, true) => 4,
        }
    }
}

/// How an operand's elements reach shared memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Loader {
    /// 16-byte `cp.async` copies (contiguous, aligned operands).
    Vector,
    /// One 4-byte `cp.async` per element (f32 operands the 16-byte copy cannot take: odd strides
    /// and implicit im2col operands), asynchronous as the vector copies.
    Async4,
    /// Loaded and stored by the thread, synchronously (16-bit operands the vector copy cannot take).
    Scalar,
}

/// Where an operand lives in shared memory and how it gets there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct OpPlan {
    /// k is the contiguous dimension of the shared tile (`[rows][bk]`), else `[bk][rows]`.
    pub(super) kmajor: bool,
    /// The copy.
    pub(super) loader: Loader,
    /// The operand format.
    pub(super) elem: Elem,
}

impl OpPlan {
    /// The plan of operand `op` whose non-k extent is `ext` with strides `s_ext` (along that
    /// dimension) and `s_k` (along k). An implicit im2col operand (B) is k-minor: its columns
    /// follow the output pixels, contiguous (stride 1 convolutions) along each output row.
    fn new(op: &MatOperand, elem: Elem, batch: usize, ext: usize, kd: usize, s_ext: usize, s_k: usize) -> OpPlan {
        let fallback = if elem == Elem::Tf32 { Loader::Async4 } else { Loader::Scalar };
        if op.im2col.is_some() {
            return OpPlan { kmajor: false, loader: fallback, elem };
        }
        let kmajor = s_k == 1 || s_ext != 1;
        let (contig, other, other_ext) = if kmajor { (s_k, s_ext, ext) } else { (s_ext, s_k, kd) };
        let w = elem.per_copy();
        let aligned = |s: usize, e: usize| e <= 1 || s.is_multiple_of(w);
        let vector =
            contig == 1 && aligned(other, other_ext) && aligned(op.s_batch, batch) && op.offset.is_multiple_of(w);
        OpPlan { kmajor, loader: if vector { Loader::Vector } else { fallback }, elem }
    }

    /// Shared-tile rows and row length (elements, padding included) for `rows` operand rows.
    fn dims(&self, rows: u32, bk: u32) -> (u32, u32) {
        let pad = self.elem.pad(self.kmajor);
        if self.kmajor { (rows, bk + pad) } else { (bk, rows + pad) }
    }

    fn describe(&self) -> &'static str {
        match (self.kmajor, self.loader) {
            (true, Loader::Vector) => "k-major, cp.async",
            (true, Loader::Async4) => "k-major, 4-byte cp.async",
            (true, Loader::Scalar) => "k-major, scalar loads",
            (false, Loader::Vector) => "k-minor, cp.async",
            (false, Loader::Async4) => "k-minor, 4-byte cp.async",
            (false, Loader::Scalar) => "k-minor, scalar loads",
        }
    }
}

/// Bytes of one pipeline stage (both operands).
fn stage_bytes(t: &MmaTile, a: OpPlan, b: OpPlan) -> u32 {
    let (ar, ac) = a.dims(t.bm, t.bk);
    let (br, bc) = b.dims(t.bn, t.bk);
    a.elem.bytes() * (ar * ac + br * bc)
}

/// Whether the tensor-core template applies to `mm` on this device: `Err` says why not.
pub fn mma_applies(mm: &MatmulBody, caps: &CudaCaps) -> Result<(), String> {
    let tf32 = mm.in_dtype == DType::F32 && mm.tf32;
    if !(matches!(mm.in_dtype, DType::BF16 | DType::F16) || tf32) || mm.acc_dtype != DType::F32 {
        let why = if mm.in_dtype == DType::F32 { ", f32 only where TF32 is allowed" } else { "" };
        return Err(format!(
            "operands {} accumulating in {} (tensor cores take bf16/f16 into f32{why})",
            mm.in_dtype, mm.acc_dtype
        ));
    }
    if caps.sm.0 < 8 {
        let inst = if tf32 { "m16n8k8 (TF32)" } else { "m16n8k16" };
        return Err(format!("sm_{}{} has no mma.sync {inst} (sm_80+)", caps.sm.0, caps.sm.1));
    }
    Ok(())
}

pub(super) fn plans(mm: &MatmulBody) -> (OpPlan, OpPlan) {
    let e = Elem::of(mm);
    let a = OpPlan::new(&mm.a, e, mm.batch, mm.m, mm.k, mm.a.s_row, mm.a.s_col);
    let b = OpPlan::new(&mm.b, e, mm.batch, mm.n, mm.k, mm.b.s_col, mm.b.s_row);
    (a, b)
}

/// Checks a tile against the template's rules and the device's limits for `mm`; `Err` says why
/// it does not fit.
pub fn check_mma(t: &MmaTile, caps: &CudaCaps, mm: &MatmulBody) -> Result<(), String> {
    mma_applies(mm, caps)?;
    match t.engine {
        MmaEngine::Wgmma => return super::mma_wgmma::check(t, caps, mm),
        MmaEngine::WgmmaTma | MmaEngine::WgmmaTmaCluster => return super::mma_tma::check(t, caps, mm),
        MmaEngine::MmaSync => {}
    }
    let MmaTile { bm, bn, bk, warps_m, warps_n, stages, .. } = *t;
    if [bm, bn, bk, warps_m, warps_n].contains(&0) {
        return Err(format!("tile {t:?} has a zero extent"));
    }
    let (wm, wn) = t.warp_tile();
    if !bm.is_multiple_of(warps_m) || !bn.is_multiple_of(warps_n) || !wm.is_multiple_of(16) || !wn.is_multiple_of(16) {
        return Err(format!("tile {t:?}: warp sub-tiles {wm}x{wn} must be multiples of 16 dividing the tile"));
    }
    if !bk.is_multiple_of(16) || bk > 128 {
        return Err(format!("tile {t:?}: bk must be a multiple of 16 up to 128"));
    }
    if !(2..=8).contains(&stages) {
        return Err(format!("tile {t:?}: 2 to 8 stages"));
    }
    let acc = (wm / 16) * (wn / 8) * 4;
    if acc > 128 {
        return Err(format!("tile {t:?}: {acc} accumulators per thread (at most 128)"));
    }
    let (a, b) = plans(mm);
    fits_device(t, caps, u64::from(stage_bytes(t, a, b)) * u64::from(stages))
}

/// Whether tile `t`'s threads and its `shared` bytes of dynamic shared memory fit the device
/// (every tensor-core template's last check); `Err` says which limit it passes.
pub(super) fn fits_device(t: &MmaTile, caps: &CudaCaps, shared: u64) -> Result<(), String> {
    let threads = t.threads();
    if threads > caps.max_threads_per_block {
        return Err(format!("tile {t:?} needs {threads} threads; the device allows {}", caps.max_threads_per_block));
    }
    if shared > u64::from(caps.max_dynamic_shared_bytes) {
        return Err(format!(
            "tile {t:?} needs {shared} bytes of shared memory; the device allows {}",
            caps.max_dynamic_shared_bytes
        ));
    }
    Ok(())
}

/// The default tile: the largest candidate whose grid still gives every SM a block (`wgmma` tiles
/// first where they apply: 16-bit operands on sm_90a, wasting at most a fifth of the tile past
/// the edges), else [`MmaTile::SMALL`].
///
/// TF32 (f32 operands, twice the bytes) takes the same shapes with half the depth (`bk` 32), so a
/// stage holds the bytes of the 16-bit tile's and two blocks still fit an SM. Products of at most
/// 64 rows (ResNet's 64-channel convolutions) take a 64x128x32 tile first, where a 128-row one
/// would multiply as many padded zero rows as real ones: TF32 ones always, 16-bit ones where B is
/// an implicit im2col operand. Measured for 16-bit on ResNet-18 bf16 at batch 8 (H200, session 30,
/// call 2; the stem and the first stage's 3x3 convolutions): 0.464 ms a run on the 128-row tiles,
/// 0.437 on 64x128x64 with three stages, 0.421 on 64x64x64, **0.401 on 64x128x32 with two
/// stages**; its cold compile 0.80 -> 0.62-0.66 s (the stem's NVRTC 0.29 -> ~0.2 s on the CI
/// machine). EfficientNet-B0 bf16's 64-row products (1x1, not im2col) ran within 1% either way,
/// so they keep the 128-row tiles.
pub(super) fn default_mma(mm: &MatmulBody, caps: &CudaCaps) -> MmaTile {
    let tf32 = Elem::of(mm) == Elem::Tf32;
    let half_k = |t: MmaTile| if tf32 { MmaTile { bk: t.bk.min(32), ..t } } else { t };
    // Tiles past the edge compute zeros: a `wgmma` tile must not waste more than a fifth.
    let snug = |ext: usize, tile: u32| 4 * (ext as u64).div_ceil(u64::from(tile)) * u64::from(tile) <= 5 * ext as u64;
    // The TMA tile first where its checks pass (sm_90a, 16-bit operands the copy engine can
    // take), measured against the `cp.async` 192x128 tile on an H200 (BENCHMARKS.md, session 14):
    // 714 against 622 TFLOP/s at 8192^3, 614 against 482 at 4096^3, and 408 against 287 at 2048^3,
    // where its 128 persistent blocks leave 4 of 132 SMs idle (hence 7/8 of the SMs suffice).
    let mut order: Vec<MmaTile> = std::iter::once(MmaTile::TMA_DEFAULT)
        .chain(MmaTile::WGMMA_DEFAULTS)
        .filter(|t| snug(mm.m, t.bm) && snug(mm.n, t.bn))
        .collect();
    if mm.m <= 64 && (tf32 || mm.b.im2col.is_some()) {
        // Two stages where B is an implicit im2col operand (its loader is instruction-bound),
        // chosen by measurement: ResNet-18 at batch 32 (max-autotune's timings after an L2 clear,
        // H200, session 19), the stem 180.7 us with three stages, 154.5 with two; the first
        // block's 3x3 convolution on this template 357 and 341. Why is not settled: the second
        // stage's shared memory would let more blocks share an SM, but ptxas may give the
        // two-stage template more registers (180 at the implicit snapshot's shape), which would
        // not; its occupancy was not measured.
        let stages = if mm.b.im2col.is_some() { 2 } else { 3 };
        order.push(MmaTile { bm: 64, bn: 128, bk: 32, warps_m: 2, warps_n: 2, stages, engine: MmaEngine::MmaSync });
    }
    order.extend([MmaTile::LARGE, MmaTile::MEDIUM].map(half_k));
    for t in &order {
        let fill = if t.engine.tma() { 7 } else { 8 };
        if 8 * tile_blocks(mm, t.bm, t.bn) >= fill * u64::from(caps.sm_count.max(1)) && check_mma(t, caps, mm).is_ok() {
            return *t;
        }
    }
    // No tile fills the GPU with one block per output tile: the largest `mma.sync` tile that
    // fits the product snugly, with its k walk split over blocks ([`default_split`]).
    // The 128 x 128 tile is at the register limit already: with the split's sum it spilled (TF32
    // 8 bytes in session 5; bf16/f16 80 bytes, unseen until session 16 as the compile test's
    // check matched "80 bytes spill" for "0 bytes spill"). On ResNet-18's last stage the 128 x 64
    // tile split twice ran 142-145 us a convolution against 138-141 for 128 x 128 split three
    // times (TF32, session 5).
    for t in [MmaTile::MEDIUM].map(half_k) {
        if snug(mm.m, t.bm)
            && snug(mm.n, t.bn)
            && super::mma_split::default_split(mm, caps, &t) > 1
            && check_mma(&t, caps, mm).is_ok()
        {
            return t;
        }
    }
    MmaTile::SMALL
}

/// Renders `mm` on tensor cores with tile `tile`.
pub(super) fn render(em: &mut Emitter<'_>, mm: &MatmulBody, caps: &CudaCaps, t: &Tuning) -> Result<Body, RenderError> {
    let k = em.k;
    let kname = k.name.clone();
    let invalid = |msg: String| RenderError::InvalidTuning { kernel: kname.clone(), msg };
    let tile = t.mma.unwrap_or_else(|| default_mma(mm, caps));
    check_mma(&tile, caps, mm).map_err(&invalid)?;
    match tile.engine {
        MmaEngine::Wgmma => return super::mma_wgmma::render(em, mm, t, &tile),
        MmaEngine::WgmmaTma | MmaEngine::WgmmaTmaCluster => return super::mma_tma::render(em, mm, caps, t, &tile),
        MmaEngine::MmaSync => {}
    }
    let threads = tile.threads();
    let (batch, m, n, kd) = launch_extents(em, mm, t, &tile)?;
    let MmaTile { bm, bn, bk, warps_m, stages, .. } = tile;
    let (wm, wn) = tile.warp_tile();
    let (mi, nj) = (wm / 16, wn / 8);
    let (tiles_m, tiles_n) = (m.div_ceil(u64::from(bm)), n.div_ceil(u64::from(bn)));
    let ktiles = kd.div_ceil(u64::from(bk));
    let split = match t.split_k {
        Some(s) => s,
        None if t.mma.is_none() => super::mma_split::default_split(mm, caps, &tile),
        None => 1,
    };
    if split == 0 || split > super::MAX_SPLIT_K || u64::from(split) > ktiles.max(1) {
        return Err(invalid(format!("split_k {split}: 1 to {} and at most the {ktiles} k steps", super::MAX_SPLIT_K)));
    }
    let scratch = if split > 1 {
        super::mma_split::split_scratch(mm, &tile, split)
            .ok_or_else(|| invalid(format!("split_k {split}: over 256 MiB of partial sums")))?
    } else {
        0
    };
    let blocks = tiles_m * tiles_n * batch * u64::from(split);
    if blocks > i32::MAX as u64 {
        return Err(em.err(format!("{blocks} blocks exceed the grid limit")));
    }
    let (pa, pb) = plans(mm);
    let stage = stage_bytes(&tile, pa, pb);
    let shared = stage * stages;
    let sk = if split > 1 { format!(" split-k {split}") } else { String::new() };
    let strategy = format!("mma {bm}x{bn}x{bk} w{warps_m}x{} s{stages}{sk}", tile.warps_n);
    let elem = pa.elem;
    let inst = match elem {
        Elem::Half => "mma.sync m16n8k16",
        Elem::Tf32 => "TF32 mma.sync m16n8k8",
    };
    let implicit = if mm.b.im2col.is_some() { ", B the implicit im2col view" } else { "" };
    let summary = format!(
        "tensor-core matmul batch {batch} x m {m} x n {n} x k {kd} ({} -> f32, {inst}), tile {bm}x{bn}x{bk}, \
         {} warps of {wm}x{wn}, {stages} stages ({shared} bytes), A {}, B {}{implicit}, {blocks} blocks{sk}",
        mm.in_dtype,
        threads / 32,
        pa.describe(),
        pb.describe()
    );
    let body = match Body::launch(blocks, threads, strategy, summary, Some(1), shared) {
        // Batches are outermost; inside one the tile order is swizzled (no prefix of rows).
        Ok(b) if batch > 1 => b.with_split(GridSplit {
            unit: OuterUnit::MatmulBatch,
            per: 1,
            inner: tiles_m * tiles_n * u64::from(split),
        }),
        Ok(b) => b,
        Err(empty) => return Ok(*empty),
    }
    .with_scratch(scratch);
    em.h.need(if elem == Elem::Tf32 { H::MmaTf32 } else { H::Mma });
    em.line(format!("// {}", body.summary));
    em.line("extern __shared__ __align__(128) unsigned char smem[];");
    if split > 1 {
        em.line(format!("const unsigned ks = blockIdx.x % {split}u; // this block's part of the k walk"));
    }
    let pid = if split > 1 { format!("blockIdx.x / {split}u") } else { "blockIdx.x".to_string() };
    emit_block_order(em, &pid, (tiles_m, tiles_n), (bm, bn));
    em.line(format!("const unsigned wm0 = warp % {warps_m}u * {wm}u; // the warp's rows in the tile"));
    em.line(format!("const unsigned wn0 = warp / {warps_m}u * {wn}u; // and columns"));
    emit_operand_bases(em, mm);
    if let Some((c, q)) = super::im2col::im2col_columns(&tile, pb, mm) {
        let oty = op_ity(em, &mm.b);
        super::im2col::columns(em, oty, &mm.b, "b_base", (&format!("n0 + tid % {q}u"), c, q), mm.n);
    }
    let a_stage = {
        let (r, c) = pa.dims(bm, bk);
        r * c * elem.bytes()
    };
    em.line("const unsigned s_base = (unsigned)__cvta_generic_to_shared(smem);");
    em.line(format!("// stage s: A at s * {stage}, B at s * {stage} + {a_stage} (bytes)"));
    em.line(format!("float acc[{mi}][{nj}][4];"));
    open_acc_loops(em, mi, nj);
    em.line("acc[i][j][c] = 0.0f;");
    close_acc_loops(em);
    // Steps `kt` run from 0 to `steps`; the k step they copy is `k_first + kt`.
    let (steps, kfirst) = if split > 1 {
        let per = ktiles.div_ceil(u64::from(split));
        em.line(format!("const unsigned k_first = ks * {per}u;"));
        em.line(format!("const unsigned steps = min(k_first + {per}u, {ktiles}u) - min(k_first, {ktiles}u);"));
        ("steps".to_string(), "k_first + ")
    } else {
        (format!("{ktiles}u"), "")
    };
    em.line(format!("// prologue: the first {} steps in flight", stages - 1));
    em.line("#pragma unroll");
    em.open(format!("for (unsigned s = 0; s < {}u; ++s)", stages - 1));
    em.open(format!("if (s < {steps})"));
    load_stage(em, mm, &tile, (pa, pb), "s", &format!("{kfirst}s"))?;
    em.close();
    em.line("sinter_cp_async_commit();");
    em.close();
    em.open(format!("for (unsigned kt = 0; kt < {steps}; ++kt)"));
    em.line(format!("sinter_cp_async_wait<{}>();", stages - 2));
    em.line("__syncthreads(); // step kt landed; every warp is done with step kt - 1's buffer");
    em.open("");
    em.line(format!("const unsigned nk = kt + {}u;", stages - 1));
    em.open(format!("if (nk < {steps})"));
    load_stage(em, mm, &tile, (pa, pb), &format!("nk % {stages}u"), &format!("{kfirst}nk"))?;
    em.close();
    em.line("sinter_cp_async_commit();");
    em.close();
    em.line(format!("const unsigned sa = s_base + kt % {stages}u * {stage}u;"));
    em.line(format!("const unsigned sb = sa + {a_stage}u;"));
    match elem {
        Elem::Half => half_fragments(em, &tile, (pa, pb), mm.in_dtype),
        Elem::Tf32 => tf32_fragments(em, &tile, (pa, pb)),
    }
    em.close();
    em.line("sinter_cp_async_wait<0>();");
    if split > 1 {
        super::mma_split::split_k_sum(em, (mi, nj), tile.threads(), split, tiles_m * tiles_n * batch);
    }

    let mfrag = Frag {
        mi,
        nj,
        row0: "m0 + wm0".into(),
        row_step: 16,
        col0: "n0 + wn0".into(),
        acc: "acc[i][{j}][h * 2u + {c}]".into(),
    };
    epilogue(em, mm, (bm, bn), &mfrag)?;
    Ok(body)
}

/// The inner loop over one pipeline step of bf16/f16 operands: `ldmatrix` fragments (`.trans` for
/// k-minor tiles) and m16n8k16 products.
fn half_fragments(em: &mut Emitter<'_>, tile: &MmaTile, (pa, pb): (OpPlan, OpPlan), in_dtype: DType) {
    let MmaTile { bm, bn, bk, .. } = *tile;
    let (wm, wn) = tile.warp_tile();
    let (mi, nj) = (wm / 16, wn / 8);
    em.line("const unsigned mat = lane / 8u, r8 = lane % 8u;");
    em.line("#pragma unroll");
    em.open(format!("for (unsigned kk = 0; kk < {}u; ++kk)", bk / 16));
    em.line(format!("unsigned fa[{mi}][4];"));
    em.line(format!("unsigned fb[{nj}][2];"));
    em.line("#pragma unroll");
    em.open(format!("for (unsigned i = 0; i < {mi}u; ++i)"));
    let (_, a_row) = pa.dims(bm, bk);
    if pa.kmajor {
        em.line("const unsigned row = wm0 + i * 16u + mat % 2u * 8u + r8;");
        em.line("const unsigned col = kk * 16u + mat / 2u * 8u;");
        em.line(format!("sinter_ldsm_x4<false>(fa[i], sa + (row * {a_row}u + col) * 2u);"));
    } else {
        em.line("const unsigned row = kk * 16u + mat / 2u * 8u + r8;");
        em.line("const unsigned col = wm0 + i * 16u + mat % 2u * 8u;");
        em.line(format!("sinter_ldsm_x4<true>(fa[i], sa + (row * {a_row}u + col) * 2u);"));
    }
    em.close();
    em.line("#pragma unroll");
    em.open(format!("for (unsigned j = 0; j < {}u; ++j)", nj / 2));
    em.line("unsigned r[4];");
    let (_, b_row) = pb.dims(bn, bk);
    if pb.kmajor {
        em.line("const unsigned row = wn0 + j * 16u + mat / 2u * 8u + r8;");
        em.line("const unsigned col = kk * 16u + mat % 2u * 8u;");
        em.line(format!("sinter_ldsm_x4<false>(r, sb + (row * {b_row}u + col) * 2u);"));
    } else {
        em.line("const unsigned row = kk * 16u + mat % 2u * 8u + r8;");
        em.line("const unsigned col = wn0 + j * 16u + mat / 2u * 8u;");
        em.line(format!("sinter_ldsm_x4<true>(r, sb + (row * {b_row}u + col) * 2u);"));
    }
    em.line("fb[2u * j][0] = r[0]; fb[2u * j][1] = r[1];");
    em.line("fb[2u * j + 1u][0] = r[2]; fb[2u * j + 1u][1] = r[3];");
    em.close();
    let mma = if in_dtype == DType::BF16 { "sinter_mma<false>" } else { "sinter_mma<true>" };
    products(em, mi, nj, mma);
    em.close();
}

/// The inner loop over one pipeline step of f32 operands in TF32: lane `(g, t)` reads its
/// m16n8k8 fragment elements from shared memory one by one (A: rows `g`, `g + 8`, columns `t`,
/// `t + 4`; B: rows `t`, `t + 4`, column `g`), each rounded to TF32 (`cvt.rna`), then the
/// products.
fn tf32_fragments(em: &mut Emitter<'_>, tile: &MmaTile, (pa, pb): (OpPlan, OpPlan)) {
    let MmaTile { bm, bn, bk, .. } = *tile;
    let (wm, wn) = tile.warp_tile();
    let (mi, nj) = (wm / 16, wn / 8);
    // Element (r, c) of a shared tile: (rows, k) as stored, k-major or not.
    let at = |base: &str, plan: OpPlan, row_len: u32, r: &str, c: &str| {
        let (x, y) = if plan.kmajor { (r, c) } else { (c, r) };
        format!("sinter_lds_tf32({base} + (({x}) * {row_len}u + {y}) * 4u)")
    };
    em.line("const unsigned fg = lane / 4u, ft = lane % 4u;");
    em.line("#pragma unroll 2");
    em.open(format!("for (unsigned kk = 0; kk < {}u; ++kk)", bk / 8));
    em.line(format!("unsigned fa[{mi}][4];"));
    em.line(format!("unsigned fb[{nj}][2];"));
    em.line("const unsigned fk = kk * 8u + ft;");
    em.line("#pragma unroll");
    em.open(format!("for (unsigned i = 0; i < {mi}u; ++i)"));
    em.line("const unsigned fm = wm0 + i * 16u + fg;");
    let (_, a_row) = pa.dims(bm, bk);
    for (q, r, c) in [(0, "fm", "fk"), (1, "fm + 8u", "fk"), (2, "fm", "fk + 4u"), (3, "fm + 8u", "fk + 4u")] {
        em.line(format!("fa[i][{q}] = {};", at("sa", pa, a_row, r, c)));
    }
    em.close();
    em.line("#pragma unroll");
    em.open(format!("for (unsigned j = 0; j < {nj}u; ++j)"));
    em.line("const unsigned fn = wn0 + j * 8u + fg;");
    let (_, b_row) = pb.dims(bn, bk);
    for (q, k) in [(0, "fk"), (1, "fk + 4u")] {
        em.line(format!("fb[j][{q}] = {};", at("sb", pb, b_row, "fn", k)));
    }
    em.close();
    products(em, mi, nj, "sinter_mma_tf32");
    em.close();
}

/// `mma(acc[i][j], fa[i], fb[j])` over the warp's fragments.
fn products(em: &mut Emitter<'_>, mi: u32, nj: u32, mma: &str) {
    em.line("#pragma unroll");
    em.open(format!("for (unsigned i = 0; i < {mi}u; ++i)"));
    em.line("#pragma unroll");
    em.open(format!("for (unsigned j = 0; j < {nj}u; ++j)"));
    em.line(format!("{mma}(acc[i][j], fa[i], fb[j][0], fb[j][1]);"));
    em.close();
    em.close();
}

/// Copies step `kstep` (k offset `kstep * bk`) of both operands into stage `slot`.
fn load_stage(
    em: &mut Emitter<'_>,
    mm: &MatmulBody,
    t: &MmaTile,
    (pa, pb): (OpPlan, OpPlan),
    slot: &str,
    kstep: &str,
) -> Result<(), RenderError> {
    let threads = t.threads();
    let stage = stage_bytes(t, pa, pb);
    let bytes = pa.elem.bytes();
    let a_stage = {
        let (r, c) = pa.dims(t.bm, t.bk);
        r * c * bytes
    };
    em.open("");
    let kstep = if kstep.contains(' ') { format!("({kstep})") } else { kstep.to_string() };
    em.line(format!("const unsigned k0 = {kstep} * {}u;", t.bk));
    em.line(format!("const unsigned st = s_base + {slot} * {stage}u;"));
    for (which, op, plan) in [("a", &mm.a, pa), ("b", &mm.b, pb)] {
        let (rows, ext, origin, s_r, s_k) =
            if which == "a" { (t.bm, mm.m, "m0", op.s_row, op.s_col) } else { (t.bn, mm.n, "n0", op.s_col, op.s_row) };
        let (srows, srow_len) = plan.dims(rows, t.bk);
        let cols = srow_len - plan.elem.pad(plan.kmajor);
        let dst = if which == "a" { "st".to_string() } else { format!("st + {a_stage}u") };
        let oty = op_ity(em, op);
        if which == "b"
            && let Some(cq) = super::im2col::im2col_columns(t, plan, mm)
        {
            super::im2col::im2col_stage(em, mm, t, plan, (&dst, srow_len), cq);
            continue;
        }
        let vector = plan.loader == Loader::Vector;
        let per = if vector { plan.elem.per_copy() as u32 } else { 1 };
        let units = srows * cols / per;
        let iters = units.div_ceil(threads);
        em.line(format!(
            "// {} tile: {srows} x {cols} elements, {units} {} over {threads} threads",
            which.to_uppercase(),
            match plan.loader {
                Loader::Vector => "16-byte copies",
                Loader::Async4 => "4-byte copies",
                Loader::Scalar => "elements",
            }
        ));
        // The scalar loader stays a loop: unrolled, its addresses cost the accumulators registers;
        // the 4-byte copies are unrolled by 4 (independent copies in flight, few addresses live).
        em.line(match plan.loader {
            Loader::Vector => "#pragma unroll",
            Loader::Async4 => "#pragma unroll 4",
            Loader::Scalar => "#pragma unroll 1",
        });
        em.open(format!("for (unsigned l = 0; l < {iters}u; ++l)"));
        em.line(format!("const unsigned e = tid + l * {threads}u;"));
        if !units.is_multiple_of(threads) {
            em.open(format!("if (e < {units}u)"));
        }
        let per_row = cols / per;
        em.line(format!("const unsigned sr = e / {per_row}u, sc = e % {per_row}u * {per}u;"));
        // (row, k) in the operand's coordinates; `sr`/`sc` index the shared tile.
        let (gr, gk) = if plan.kmajor { ("sr", "sc") } else { ("sc", "sr") };
        em.line(format!("const unsigned gr = {origin} + {gr}; // {}", if which == "a" { "m" } else { "n" }));
        em.line(format!("const unsigned gk = k0 + {gk};"));
        let base = format!("{which}_base");
        let (addr, inside) = if op.im2col.is_some() {
            super::im2col::tap(em, oty, op, &base, "gk", "gr")
        } else {
            (address(oty, &base, ("gr", s_r), ("gk", s_k)), None)
        };
        let inside = inside.map_or(String::new(), |c| format!(" && {c}"));
        let sdst = format!("{dst} + (sr * {srow_len}u + sc) * {bytes}u");
        if vector {
            // Valid elements of the 8 along the contiguous dimension, 0 when the other is out.
            let w = plan.elem.per_copy();
            let (cv, ce, ov, oe) = if plan.kmajor { ("gk", mm.k, "gr", ext) } else { ("gr", ext, "gk", mm.k) };
            em.line(format!(
                "const unsigned valid = {ov} < {oe}u && {cv} < {ce}u ? min({ce}u - {cv}, {w}u) * {bytes}u : 0u;"
            ));
            em.line(format!("const {oty} off = valid ? {addr} : {};", lit(oty, 0)));
            em.line(format!("sinter_cp_async16({sdst}, &a{}[off], valid);", op.arg));
        } else if plan.loader == Loader::Async4 {
            em.line(format!("const bool in = gr < {ext}u && gk < {}u{inside};", mm.k));
            em.line(format!("const {oty} off = in ? {addr} : {};", lit(oty, 0)));
            em.line(format!("sinter_cp_async4({sdst}, &a{}[off], in ? 4u : 0u);", op.arg));
        } else {
            em.line(format!("const bool in = gr < {ext}u && gk < {}u{inside};", mm.k));
            em.line(format!(
                "const unsigned short x = in ? reinterpret_cast<const unsigned short*>(a{})[{addr}] : (unsigned short)0;",
                op.arg
            ));
            em.line(format!("asm volatile(\"st.shared.u16 [%0], %1;\\n\" :: \"r\"({sdst}), \"h\"(x) : \"memory\");"));
        }
        if !units.is_multiple_of(threads) {
            em.close();
        }
        em.close();
    }
    em.close();
    Ok(())
}
