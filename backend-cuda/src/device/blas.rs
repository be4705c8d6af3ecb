//! cuBLASLt products: the vendor library as one more way to run a (batched, strided) matrix
//! product with a bias/ReLU epilogue. Knows nothing of the kernel IR: a [`GemmDesc`] describes a
//! row-major product `D[b, i, j] = epi(sum_k A[b, i, k] * B[b, k, j])` through element strides.
//!
//! cuBLAS is column-major; a row-major `D (m x n)` is the column-major `D^T (n x m)`, so the plan
//! computes `D^T = B^T A^T`: the library's first operand is our B, its second our A, each
//! transposed or not depending on which of its strides is 1. f32 accumulation
//! (`CUBLAS_COMPUTE_32F`; `CUBLAS_COMPUTE_32F_FAST_TF32` for f32 operands where the product allows
//! TF32, [`GemmDesc::tf32`], as PyTorch's `allow_tf32`) with f32 scales, split-k partial sums in
//! f32 only; D has the operands' type (rounded once).
//!
//! **fp8** (e4m3 or e5m2 operands, `torch._scaled_mm`): D is f32, bf16 or f16
//! ([`GemmDesc::out`]); per-tensor f32 scales are read from device memory
//! (`CUBLASLT_MATMUL_DESC_{A,B}_SCALE_POINTER`), `D = scale_a * scale_b * (A @ B)`, accumulated in
//! f32 without fast accumulation (`_scaled_mm`'s default). cuBLASLt takes fp8 only in the "TN"
//! layout (its A transposed, its B not): our A row-major (`s_col == 1`) and our B k-contiguous
//! (`s_row == 1`, torch's column-major second operand), k, n, the leading dimensions, offsets
//! and batch strides multiples of 16 elements, no e5m2 x e5m2 product, no bias or ReLU
//! ([`supported`] names what fails).
//!
//! [`crate::probe::cublaslt`] must have succeeded before a plan is made (cudarc panics when the
//! library is absent).

use super::{Stream, check_blas};
use crate::device::CudaBuffer;
use cudarc::cublaslt::{result as lt, sys};
use sinter_core::backend::BackendError;
use std::ffi::c_void;
use std::sync::{Arc, Mutex, OnceLock};

/// Workspace bytes per plan (what cuBLASLt's heuristics may use; 32 MiB as PyTorch gives Hopper).
pub const WORKSPACE_BYTES: u64 = 32 << 20;
/// Algorithms asked of the heuristic (the candidates max-autotune times).
pub const MAX_ALGOS: usize = 6;

/// Element type of A, B and D.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BlasType {
    /// f32 (exact unless the product allows TF32, [`GemmDesc::tf32`]).
    F32,
    /// f16.
    F16,
    /// bf16.
    BF16,
    /// fp8 e4m3fn (operands only).
    F8E4M3,
    /// fp8 e5m2 (operands only).
    F8E5M2,
}

impl BlasType {
    fn cuda(self) -> sys::cudaDataType {
        match self {
            BlasType::F32 => sys::cudaDataType::CUDA_R_32F,
            BlasType::F16 => sys::cudaDataType::CUDA_R_16F,
            BlasType::BF16 => sys::cudaDataType::CUDA_R_16BF,
            BlasType::F8E4M3 => sys::cudaDataType::CUDA_R_8F_E4M3,
            BlasType::F8E5M2 => sys::cudaDataType::CUDA_R_8F_E5M2,
        }
    }

    /// Bytes per element.
    pub fn bytes(self) -> u64 {
        match self {
            BlasType::F32 => 4,
            BlasType::F16 | BlasType::BF16 => 2,
            BlasType::F8E4M3 | BlasType::F8E5M2 => 1,
        }
    }

    /// An 8-bit float.
    pub fn is_fp8(self) -> bool {
        matches!(self, BlasType::F8E4M3 | BlasType::F8E5M2)
    }
}

/// A row-major operand: element `(b, r, c)` at `offset + b * s_batch + r * s_row + c * s_col`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BlasOperand {
    /// Element offset.
    pub offset: u64,
    /// Batch stride (0: broadcast).
    pub s_batch: u64,
    /// Row stride.
    pub s_row: u64,
    /// Column stride.
    pub s_col: u64,
}

/// What the library applies to each element after the bias ([`GemmDesc::act`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GemmAct {
    /// Nothing.
    None,
    /// `max(x, 0)` (`CUBLASLT_EPILOGUE_RELU[_BIAS]`).
    Relu,
    /// GELU's tanh form (`CUBLASLT_EPILOGUE_GELU[_BIAS]`).
    Gelu,
}

/// A product: `D[b, i, j] = act(scale_a? * scale_b? * sum_k A[b, i, k] B[b, k, j] + bias?[j] +
/// C?[b, i, j])`, D row-major with rows `ld_out` apart (batches `m * ld_out` apart), C (the
/// residual) dense row-major of D's type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GemmDesc {
    /// Batch count.
    pub batch: u64,
    /// Rows of D.
    pub m: u64,
    /// Columns of D.
    pub n: u64,
    /// Reduction extent.
    pub k: u64,
    /// A (`m x k`).
    pub a: BlasOperand,
    /// B (`k x n`).
    pub b: BlasOperand,
    /// Type of A and B (and of D and the bias unless fp8).
    pub dtype: BlasType,
    /// Type of D: `dtype`, or f32/bf16/f16 for fp8 operands.
    pub out: BlasType,
    /// A's per-tensor f32 scale is read from device memory (fp8 only).
    pub scale_a: bool,
    /// B's per-tensor f32 scale is read from device memory (fp8 only).
    pub scale_b: bool,
    /// A bias of `n` elements added to every row, and its type (D's: the heuristic refused an f32
    /// bias with a bf16 D on an H200, cuBLASLt 13.0).
    pub bias: Option<BlasType>,
    /// A dense `[batch, m, n]` tensor of D's type added to the product (the library's `C` with
    /// `beta = 1`; `ld_out` must then be `n`).
    pub residual: bool,
    /// Elements between D's rows (at least `n`).
    pub ld_out: u64,
    /// The activation after the bias (none with a residual).
    pub act: GemmAct,
    /// f32 operands may be multiplied in TF32 (`CUBLAS_COMPUTE_32F_FAST_TF32`); ignored for the
    /// half types.
    pub tf32: bool,
}

impl GemmDesc {
    /// The plain product of dense row-major `m x k` A and `k x n` B into dense row-major D, all of
    /// `dtype`: no batch, scales, bias, residual or activation, no TF32.
    pub fn dense(m: u64, n: u64, k: u64, dtype: BlasType) -> GemmDesc {
        GemmDesc {
            batch: 1,
            m,
            n,
            k,
            a: BlasOperand { offset: 0, s_batch: 0, s_row: k, s_col: 1 },
            b: BlasOperand { offset: 0, s_batch: 0, s_row: n, s_col: 1 },
            dtype,
            out: dtype,
            scale_a: false,
            scale_b: false,
            bias: None,
            residual: false,
            ld_out: n,
            act: GemmAct::None,
            tf32: false,
        }
    }

    /// The cuBLAS compute type: f32, or TF32 tensor cores for f32 operands where allowed.
    pub fn compute_type(&self) -> sys::cublasComputeType_t {
        if self.tf32 && self.dtype == BlasType::F32 {
            sys::cublasComputeType_t::CUBLAS_COMPUTE_32F_FAST_TF32
        } else {
            sys::cublasComputeType_t::CUBLAS_COMPUTE_32F
        }
    }
}

/// Warms cuBLASLt ahead of the first plan, with `dev`'s context bound to this thread
/// (`cublasLtCreate` starts the CUDA runtime on the thread's device, else GPU 0): makes the handle
/// and asks the heuristic for a small f32 and bf16 product. The library's first heuristic query
/// took 76-146 ms on an H200 host, every later one under 0.5 ms, whatever its shape and type
/// (BENCHMARKS.md session 32, call 4). Nothing happens without the library; failures are left for
/// the first plan to report.
pub fn warm(dev: &super::Device) {
    if crate::probe::cublaslt().is_err() || dev.bind().is_err() || handle().is_err() {
        return;
    }
    for dtype in [BlasType::F32, BlasType::BF16] {
        let _ = heuristic(&GemmDesc::dense(256, 256, 256, dtype), 1);
    }
}

/// The process's cuBLASLt handle (context-independent), made once.
fn handle() -> Result<sys::cublasLtHandle_t, BackendError> {
    struct H(sys::cublasLtHandle_t);
    // SAFETY: a cuBLASLt handle may be used from any thread (the library documents it as
    // thread-safe for concurrent matmuls on different streams).
    unsafe impl Send for H {}
    unsafe impl Sync for H {}
    static HANDLE: OnceLock<Result<H, String>> = OnceLock::new();
    match HANDLE.get_or_init(|| lt::create_handle().map(H).map_err(|e| format!("cublasLtCreate: {e:?}"))) {
        Ok(h) => Ok(h.0),
        Err(e) => Err(BackendError::Device(e.clone())),
    }
}

/// One column-major library operand: rows, columns, leading dimension, transposed, batch stride.
struct Layout {
    rows: u64,
    cols: u64,
    ld: u64,
    trans: bool,
    stride: u64,
}

/// The library operand for the row-major `x` of `r x c` (`x^T` column-major is `c x r`): plain
/// when `s_col == 1` (column-major `c x r`, ld `s_row`), transposed when `s_row == 1` (column-
/// major `r x c`, ld `s_col`); `None` when neither stride is 1.
fn layout(x: &BlasOperand, r: u64, c: u64) -> Option<Layout> {
    if x.s_col == 1 || c == 1 {
        let ld = if r <= 1 { c.max(1) } else { x.s_row };
        (ld >= c.max(1)).then_some(Layout { rows: c, cols: r, ld, trans: false, stride: x.s_batch })
    } else if x.s_row == 1 || r == 1 {
        let ld = if c <= 1 { r.max(1) } else { x.s_col };
        (ld >= r.max(1)).then_some(Layout { rows: r, cols: c, ld, trans: true, stride: x.s_batch })
    } else {
        None
    }
}

/// Whether cuBLASLt can take `g` (`Err` says why not).
pub fn supported(g: &GemmDesc) -> Result<(), String> {
    if [g.batch, g.m, g.n, g.k].contains(&0) {
        return Err("an empty product".into());
    }
    if [g.batch, g.m, g.n, g.k].iter().any(|&x| x > i32::MAX as u64) {
        return Err("an extent over 2^31".into());
    }
    let lb = layout(&g.b, g.k, g.n).ok_or("B has no unit stride")?;
    let la = layout(&g.a, g.m, g.k).ok_or("A has no unit stride")?;
    if g.ld_out < g.n {
        return Err(format!("D's rows {} elements apart, fewer than its {} columns", g.ld_out, g.n));
    }
    if g.residual && (g.ld_out != g.n || g.dtype.is_fp8()) {
        return Err("a residual needs a dense D (C has D's type and layout)".into());
    }
    if g.residual && g.act != GemmAct::None {
        return Err("an activation after a residual (not documented to follow C)".into());
    }
    // 16-bit operands may store f32 (the accumulator unrounded).
    let widened = g.out == BlasType::F32 && matches!(g.dtype, BlasType::BF16 | BlasType::F16);
    if g.dtype.is_fp8() {
        fp8_supported(g, &la, &lb)?;
    } else if (g.out != g.dtype && !widened) || g.scale_a || g.scale_b {
        return Err(format!("{:?} operands take no scales and store {:?} (or f32 if 16-bit)", g.dtype, g.dtype));
    } else if let Some(t) = g.bias
        && t != g.out
    {
        return Err(format!("a {t:?} bias on a {:?} output (D's type only)", g.out));
    }
    Ok(())
}

/// cuBLASLt's fp8 requirements (module docs), `la` and `lb` the library layouts of our A and B.
fn fp8_supported(g: &GemmDesc, la: &Layout, lb: &Layout) -> Result<(), String> {
    if g.dtype == BlasType::F8E5M2 {
        return Err("e5m2 x e5m2 (cuBLASLt's fp8 products need an e4m3 operand)".into());
    }
    if !matches!(g.out, BlasType::F32 | BlasType::BF16 | BlasType::F16) {
        return Err(format!("an fp8 product stored as {:?}", g.out));
    }
    if g.bias.is_some() || g.act != GemmAct::None {
        return Err("a bias or activation epilogue on an fp8 product".into());
    }
    // The library's A is our B: it must be transposed (k contiguous); its B (our A) not.
    if !lb.trans || g.b.s_row != 1 {
        return Err("B is not k-contiguous (fp8 needs the TN layout: torch's column-major second operand)".into());
    }
    if la.trans || g.a.s_col != 1 {
        return Err("A is not row-major (fp8 needs the TN layout)".into());
    }
    let sixteen = |what: &str, x: u64| {
        if x.is_multiple_of(16) { Ok(()) } else { Err(format!("{what} {x} is not a multiple of 16")) }
    };
    sixteen("k", g.k)?;
    sixteen("n", g.n)?;
    sixteen("A's row stride", la.ld)?;
    sixteen("B's column stride", lb.ld)?;
    sixteen("A's offset", g.a.offset)?;
    sixteen("B's offset", g.b.offset)?;
    if g.batch > 1 {
        sixteen("A's batch stride", g.a.s_batch)?;
        sixteen("B's batch stride", g.b.s_batch)?;
    }
    Ok(())
}

/// Owned cuBLASLt descriptors.
struct Descs {
    desc: sys::cublasLtMatmulDesc_t,
    layouts: [sys::cublasLtMatrixLayout_t; 3],
    pref: sys::cublasLtMatmulPreference_t,
}

impl Drop for Descs {
    fn drop(&mut self) {
        // SAFETY: each was created once by this plan and is destroyed once.
        unsafe {
            if !self.pref.is_null() {
                let _ = lt::destroy_matmul_pref(self.pref);
            }
            for l in self.layouts {
                if !l.is_null() {
                    let _ = lt::destroy_matrix_layout(l);
                }
            }
            if !self.desc.is_null() {
                let _ = lt::destroy_matmul_desc(self.desc);
            }
        }
    }
}

/// A product ready to run: descriptors, the heuristic's algorithms, a workspace.
pub struct GemmPlan {
    desc: GemmDesc,
    descs: Descs,
    algos: Vec<sys::cublasLtMatmulAlgo_t>,
    /// The heuristic's wave count for each of `algos` (CTAs over what the SMs hold at once).
    waves: Vec<f32>,
    workspace: Arc<CudaBuffer>,
    handle: sys::cublasLtHandle_t,
    /// Held while a launch sets the descriptor's pointers and enqueues the product.
    launching: Mutex<()>,
}

// SAFETY: the descriptors are only read after creation, except in `launch`, which holds
// `launching` while it sets their pointer attributes and enqueues the product.
unsafe impl Send for GemmPlan {}
// SAFETY: as above: every use through `&GemmPlan` that touches a descriptor holds `launching`.
unsafe impl Sync for GemmPlan {}

impl std::fmt::Debug for GemmPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "GemmPlan({:?}, {} algorithms)", self.desc, self.algos.len())
    }
}

fn blas_err(call: &str, e: lt::CublasError) -> BackendError {
    BackendError::Device(format!("{call}: {e:?}"))
}

/// [`blas_err`], except that a call refusing the description (`NOT_SUPPORTED`, `INVALID_VALUE`:
/// a combination of types and epilogue this cuBLASLt lacks) is [`BackendError::Unsupported`], so
/// the caller can take another form.
fn plan_err(call: &str, e: lt::CublasError) -> BackendError {
    use sys::cublasStatus_t as S;
    match e.0 {
        S::CUBLAS_STATUS_NOT_SUPPORTED | S::CUBLAS_STATUS_INVALID_VALUE => {
            BackendError::Unsupported { backend: "cuda".into(), what: format!("cuBLASLt: {call}: {e:?}") }
        }
        _ => blas_err(call, e),
    }
}

impl GemmPlan {
    /// Builds the descriptors of `g` and asks the heuristic for up to [`MAX_ALGOS`] algorithms
    /// (an error when there is none); the workspace is `stream`'s shared one ([`Stream::shared_workspace`]).
    pub fn new(stream: &Arc<Stream>, g: &GemmDesc) -> Result<GemmPlan, BackendError> {
        GemmPlan::with_algos(stream, g, MAX_ALGOS)
    }

    /// As [`GemmPlan::new`], asking the heuristic for up to `max_algos` algorithms (the
    /// `gemm_algos` example times them all).
    pub fn with_algos(stream: &Arc<Stream>, g: &GemmDesc, max_algos: usize) -> Result<GemmPlan, BackendError> {
        let h = heuristic(g, max_algos)?;
        let t = std::time::Instant::now();
        let workspace = stream.shared_workspace(WORKSPACE_BYTES)?;
        let [handle_s, descs_s, heuristic_s] = h.seconds;
        tracing::debug!(
            target: "sinter::compile",
            "cuBLASLt plan {}x{}x{} {:?}: handle {:.1} ms, descriptors {:.1}, heuristic {:.1}, workspace {:.1}",
            g.m,
            g.n,
            g.k,
            g.dtype,
            handle_s * 1e3,
            descs_s * 1e3,
            heuristic_s * 1e3,
            t.elapsed().as_secs_f64() * 1e3
        );
        let Heuristic { descs, algos, waves, handle, .. } = h;
        Ok(GemmPlan { desc: *g, descs, algos, waves, workspace, handle, launching: Mutex::new(()) })
    }
}

/// What [`heuristic`] got from the library for one product.
struct Heuristic {
    descs: Descs,
    algos: Vec<sys::cublasLtMatmulAlgo_t>,
    /// The heuristic's wave count for each of `algos`.
    waves: Vec<f32>,
    handle: sys::cublasLtHandle_t,
    /// Seconds the handle, the descriptors and the heuristic query took.
    seconds: [f64; 3],
}

/// What a plan asks of the library: `g`'s descriptors and up to `max_algos` of the heuristic's
/// algorithms for them.
fn heuristic(g: &GemmDesc, max_algos: usize) -> Result<Heuristic, BackendError> {
    let max_algos = max_algos.max(1);
    supported(g).map_err(|w| BackendError::Unsupported { backend: "cuda".into(), what: format!("cuBLASLt: {w}") })?;
    // A missing library is a product the library cannot take: the loader runs the own template.
    crate::probe::cublaslt()
        .map_err(|w| BackendError::Unsupported { backend: "cuda".into(), what: format!("cuBLASLt: {w}") })?;
    let t0 = std::time::Instant::now();
    let handle = handle()?;
    let t1 = std::time::Instant::now();
    let la = layout(&g.b, g.k, g.n).expect("checked");
    let lb = layout(&g.a, g.m, g.k).expect("checked");
    let ty = g.dtype.cuda();
    let out_ty = g.out.cuda();
    let mut descs =
        Descs { desc: std::ptr::null_mut(), layouts: [std::ptr::null_mut(); 3], pref: std::ptr::null_mut() };
    descs.desc = lt::create_matmul_desc(g.compute_type(), sys::cudaDataType::CUDA_R_32F)
        .map_err(|e| blas_err("cublasLtMatmulDescCreate", e))?;
    let set_desc = |attr: sys::cublasLtMatmulDescAttributes_t, v: *const c_void, n: usize| {
        // SAFETY: `v` points at `n` readable bytes of the attribute's type.
        unsafe { lt::set_matmul_desc_attribute(descs.desc, attr, v, n) }
            .map_err(|e| plan_err("cublasLtMatmulDescSetAttribute", e))
    };
    use sys::cublasLtMatmulDescAttributes_t as D;
    // cublasOperation_t as a 32-bit integer: 0 = N, 1 = T.
    let (opa, opb) = (la.trans as i32, lb.trans as i32);
    let sz = std::mem::size_of::<i32>();
    set_desc(D::CUBLASLT_MATMUL_DESC_TRANSA, &opa as *const _ as *const c_void, sz)?;
    set_desc(D::CUBLASLT_MATMUL_DESC_TRANSB, &opb as *const _ as *const c_void, sz)?;
    use sys::cublasLtEpilogue_t as E;
    let epi = match (g.bias.is_some(), g.act) {
        (false, GemmAct::None) => E::CUBLASLT_EPILOGUE_DEFAULT,
        (false, GemmAct::Relu) => E::CUBLASLT_EPILOGUE_RELU,
        (false, GemmAct::Gelu) => E::CUBLASLT_EPILOGUE_GELU,
        (true, GemmAct::None) => E::CUBLASLT_EPILOGUE_BIAS,
        (true, GemmAct::Relu) => E::CUBLASLT_EPILOGUE_RELU_BIAS,
        (true, GemmAct::Gelu) => E::CUBLASLT_EPILOGUE_GELU_BIAS,
    };
    set_desc(D::CUBLASLT_MATMUL_DESC_EPILOGUE, &epi as *const _ as *const c_void, std::mem::size_of_val(&epi))?;
    if let Some(t) = g.bias {
        let bt = t.cuda();
        set_desc(D::CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt as *const _ as *const c_void, std::mem::size_of_val(&bt))?;
    }
    // The library's A (our B), B (our A), and D (= C's layout: beta 0, or a residual).
    let lay = |l: &Layout, ty: sys::cudaDataType| -> Result<sys::cublasLtMatrixLayout_t, BackendError> {
        let h = lt::create_matrix_layout(ty, l.rows, l.cols, l.ld as i64)
            .map_err(|e| blas_err("cublasLtMatrixLayoutCreate", e))?;
        Ok(h)
    };
    let ld = Layout { rows: g.n, cols: g.m, ld: g.ld_out, trans: false, stride: g.m * g.ld_out };
    for (i, (l, ty)) in [(&la, ty), (&lb, ty), (&ld, out_ty)].into_iter().enumerate() {
        descs.layouts[i] = lay(l, ty)?;
        if g.batch > 1 {
            use sys::cublasLtMatrixLayoutAttribute_t as L;
            let count = g.batch as i32;
            let stride = l.stride as i64;
            // SAFETY: pointers to an i32 and an i64, the attributes' types.
            unsafe {
                lt::set_matrix_layout_attribute(
                    descs.layouts[i],
                    L::CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                    &count as *const i32 as *const c_void,
                    4,
                )
                .map_err(|e| blas_err("cublasLtMatrixLayoutSetAttribute", e))?;
                lt::set_matrix_layout_attribute(
                    descs.layouts[i],
                    L::CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                    &stride as *const i64 as *const c_void,
                    8,
                )
                .map_err(|e| blas_err("cublasLtMatrixLayoutSetAttribute", e))?;
            }
        }
    }
    descs.pref = lt::create_matmul_pref().map_err(|e| blas_err("cublasLtMatmulPreferenceCreate", e))?;
    let ws = WORKSPACE_BYTES;
    // SAFETY: a u64, the attribute's type.
    unsafe {
        lt::set_matmul_pref_attribute(
            descs.pref,
            sys::cublasLtMatmulPreferenceAttributes_t::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
            &ws as *const u64 as *const c_void,
            8,
        )
    }
    .map_err(|e| blas_err("cublasLtMatmulPreferenceSetAttribute", e))?;
    // Split-k partial sums only in the f32 compute type: the in-place and output-type schemes
    // add partial sums in bf16/f16 (measured on an H100: 3x5x4097 bf16 off by 0.13 of 1.14),
    // not the f32 accumulation the kernel IR promises.
    let schemes = sys::cublasLtReductionScheme_t::CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE as u32;
    // SAFETY: a u32, the attribute's type.
    unsafe {
        lt::set_matmul_pref_attribute(
            descs.pref,
            sys::cublasLtMatmulPreferenceAttributes_t::CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
            &schemes as *const u32 as *const c_void,
            4,
        )
    }
    .map_err(|e| blas_err("cublasLtMatmulPreferenceSetAttribute(reduction scheme)", e))?;
    let t2 = std::time::Instant::now();
    let mut results: Vec<sys::cublasLtMatmulHeuristicResult_t> = Vec::with_capacity(max_algos);
    let mut count = 0i32;
    let [a_l, b_l, d_l] = descs.layouts;
    // SAFETY: `results` has room for `max_algos` entries; the library writes `count` of them.
    unsafe {
        sys::cublasLtMatmulAlgoGetHeuristic(
            handle,
            descs.desc,
            a_l,
            b_l,
            d_l,
            d_l,
            descs.pref,
            max_algos as i32,
            results.as_mut_ptr(),
            &mut count,
        )
        .result()
        .map_err(|e| plan_err("cublasLtMatmulAlgoGetHeuristic", e))?;
        results.set_len(count.clamp(0, max_algos as i32) as usize);
    }
    let (algos, waves): (Vec<_>, Vec<_>) = results
        .iter()
        .filter(|r| r.state == sys::cublasStatus_t::CUBLAS_STATUS_SUCCESS && r.workspaceSize as u64 <= ws)
        .map(|r| (r.algo, r.wavesCount))
        .unzip();
    if algos.is_empty() {
        return Err(BackendError::Unsupported {
            backend: "cuda".into(),
            what: format!("cuBLASLt has no algorithm for {g:?}"),
        });
    }
    let seconds = [(t1 - t0).as_secs_f64(), (t2 - t1).as_secs_f64(), t2.elapsed().as_secs_f64()];
    Ok(Heuristic { descs, algos, waves, handle, seconds })
}

impl GemmPlan {
    /// As [`GemmPlan::new`], sharing the plan already built on `stream` for the same description
    /// while one lives: a transformer's layers (BERT-base: 72 products of 4 shapes) ask the
    /// heuristic once per shape. Launches on one stream run in order, so the plan and its
    /// workspace serve them all.
    pub fn shared(stream: &Arc<Stream>, g: &GemmDesc) -> Result<Arc<GemmPlan>, BackendError> {
        static PLANS: OnceLock<super::shared::Shared<(u64, GemmDesc), GemmPlan>> = OnceLock::new();
        PLANS.get_or_init(Default::default).get_or_make((stream.id(), *g), || Ok(Arc::new(GemmPlan::new(stream, g)?)))
    }

    /// The product.
    pub fn desc(&self) -> &GemmDesc {
        &self.desc
    }

    /// Algorithms the heuristic offered (at least one), best guess first.
    pub fn algos(&self) -> usize {
        self.algos.len()
    }

    /// Algorithm `algo` in words, from its configuration: the CTA tile, split-k, the stage
    /// configuration, the cluster shape and the heuristic's wave count, e.g.
    /// `tile 128x64, split-k 2, stages #12, cluster #0, 1.18 waves` (autotune logs, the
    /// `gemm_algos` example).
    pub fn describe(&self, algo: usize) -> String {
        let Some(a) = self.algos.get(algo) else { return format!("no algorithm {algo}") };
        use sys::cublasLtMatmulAlgoConfigAttributes_t as C;
        let get = |attr: C| -> Option<u32> {
            let mut v = 0u32;
            let mut written = 0usize;
            // SAFETY: a u32 buffer of 4 bytes, the size of every attribute asked here.
            let r = unsafe {
                sys::cublasLtMatmulAlgoConfigGetAttribute(a, attr, &mut v as *mut u32 as *mut c_void, 4, &mut written)
            };
            (r == sys::cublasStatus_t::CUBLAS_STATUS_SUCCESS).then_some(v)
        };
        let show = |v: Option<u32>| v.map_or("?".to_string(), |v| v.to_string());
        format!(
            "id {}, tile {}, split-k {}, stages #{}, cluster #{}, {:.2} waves",
            show(get(C::CUBLASLT_ALGO_CONFIG_ID)),
            get(C::CUBLASLT_ALGO_CONFIG_TILE_ID).map_or("?".to_string(), tile_name),
            show(get(C::CUBLASLT_ALGO_CONFIG_SPLITK_NUM)),
            show(get(C::CUBLASLT_ALGO_CONFIG_STAGES_ID)),
            show(get(C::CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID)),
            self.waves.get(algo).copied().unwrap_or(0.0),
        )
    }

    /// Queues the product with algorithm `algo` on `stream`: A at `a`, B at `b`, the bias at
    /// `bias` (ignored without one), the f32 scales at `scales.0` (A's) and `scales.1` (B's)
    /// (ignored unless [`GemmDesc::scale_a`] / [`GemmDesc::scale_b`]), the residual at `c`
    /// (ignored unless [`GemmDesc::residual`]), D at `d` (device pointers to element 0 of each
    /// buffer).
    #[allow(clippy::too_many_arguments)]
    pub fn launch(
        &self,
        stream: &Stream,
        algo: usize,
        a: u64,
        b: u64,
        bias: u64,
        scales: (u64, u64),
        c: u64,
        d: u64,
    ) -> Result<(), BackendError> {
        let g = &self.desc;
        let e = g.dtype.bytes();
        let algo = &self.algos[algo.min(self.algos.len() - 1)];
        let _launching = self.launching.lock().unwrap_or_else(|p| p.into_inner());
        // The library's A is our B: its scale pointer is B's, and the other way round.
        use sys::cublasLtMatmulDescAttributes_t as D;
        for (on, attr, ptr) in [
            (g.scale_b, D::CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, scales.1),
            (g.scale_a, D::CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, scales.0),
        ] {
            if on {
                // SAFETY: a device pointer, the attribute's type; the descriptor is this plan's
                // own and launches are serialized by its owner.
                unsafe { lt::set_matmul_desc_attribute(self.descs.desc, attr, &ptr as *const u64 as *const c_void, 8) }
                    .map_err(|e| blas_err("cublasLtMatmulDescSetAttribute(scale)", e))?;
            }
        }
        if g.bias.is_some() {
            // SAFETY: a device pointer, the attribute's type; the descriptor is this plan's own and
            // launches are serialized by its owner.
            unsafe {
                lt::set_matmul_desc_attribute(
                    self.descs.desc,
                    sys::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                    &bias as *const u64 as *const c_void,
                    8,
                )
            }
            .map_err(|e| blas_err("cublasLtMatmulDescSetAttribute(bias)", e))?;
        }
        let (alpha, beta, c) = if g.residual { (1.0f32, 1.0f32, c) } else { (1.0f32, 0.0f32, d) };
        let [a_l, b_l, d_l] = self.descs.layouts;
        let pa = (b + g.b.offset * e) as *const c_void;
        let pb = (a + g.a.offset * e) as *const c_void;
        // SAFETY: the pointers are device buffers sized for the described operands (the caller's
        // contract), the workspace is this plan's, `algo` came from the heuristic for these
        // descriptors.
        let r = unsafe {
            sys::cublasLtMatmul(
                self.handle,
                self.descs.desc,
                &alpha as *const f32 as *const c_void,
                pa,
                a_l,
                pb,
                b_l,
                &beta as *const f32 as *const c_void,
                c as *const c_void,
                d_l,
                d as *mut c_void,
                d_l,
                algo,
                self.workspace.ptr() as *mut c_void,
                WORKSPACE_BYTES as usize,
                stream.cu() as sys::cudaStream_t,
            )
        };
        check_blas(r, "cublasLtMatmul")
    }
}

/// A cuBLASLt tile id as `MxN` (`CUBLASLT_MATMUL_TILE_128x64` -> `128x64`), or `#id` outside
/// the bindings' range.
fn tile_name(id: u32) -> String {
    use sys::cublasLtMatmulTile_t as T;
    if id >= T::CUBLASLT_MATMUL_TILE_END as u32 {
        return format!("#{id}");
    }
    // SAFETY: the bindings' tile enum is `repr(u32)` with every value from 0 to
    // `CUBLASLT_MATMUL_TILE_END` (cudarc 0.19, CUDA 13.0 headers), and `id` is below the end.
    let t: T = unsafe { std::mem::transmute::<u32, T>(id) };
    format!("{t:?}").trim_start_matches("CUBLASLT_MATMUL_TILE_").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tile_ids_read_as_their_shapes() {
        assert_eq!(tile_name(18), "128x64");
        assert_eq!(tile_name(20), "128x128");
        assert_eq!(tile_name(0), "UNDEFINED");
        assert_eq!(tile_name(100_000), "#100000");
    }

    fn op(s_row: u64, s_col: u64) -> BlasOperand {
        BlasOperand { offset: 0, s_batch: 0, s_row, s_col }
    }

    #[test]
    fn row_major_operands_map_to_column_major_layouts() {
        // B [k=64, n=32] row-major: the library's A is n x k column-major, not transposed.
        let l = layout(&op(32, 1), 64, 32).unwrap();
        assert_eq!((l.rows, l.cols, l.ld, l.trans), (32, 64, 32, false));
        // B stored [n, k] (k contiguous): transposed k x n, ld k.
        let l = layout(&op(1, 64), 64, 32).unwrap();
        assert_eq!((l.rows, l.cols, l.ld, l.trans), (64, 32, 64, true));
        // A padded rows (ld > columns) keep their stride.
        let l = layout(&op(40, 1), 7, 33).unwrap();
        assert_eq!((l.rows, l.cols, l.ld, l.trans), (33, 7, 40, false));
        // No unit stride: refused.
        assert!(layout(&op(8, 2), 7, 33).is_none());
        // A stride too small for its extent (overlapping rows): refused.
        assert!(layout(&op(4, 1), 7, 33).is_none());
        let g = GemmDesc {
            batch: 1,
            m: 7,
            n: 5,
            k: 3,
            a: op(8, 2),
            b: op(5, 1),
            dtype: BlasType::BF16,
            out: BlasType::BF16,
            scale_a: false,
            scale_b: false,
            bias: None,
            residual: false,
            ld_out: 5,
            act: GemmAct::None,
            tf32: true,
        };
        assert!(supported(&g).unwrap_err().contains("A has no unit stride"));
        // TF32 only for f32 operands.
        assert_eq!(g.compute_type(), sys::cublasComputeType_t::CUBLAS_COMPUTE_32F);
        let f32 = GemmDesc { dtype: BlasType::F32, ..g };
        assert_eq!(f32.compute_type(), sys::cublasComputeType_t::CUBLAS_COMPUTE_32F_FAST_TF32);
        assert_eq!(GemmDesc { tf32: false, ..f32 }.compute_type(), sys::cublasComputeType_t::CUBLAS_COMPUTE_32F);
    }

    #[test]
    fn fp8_products_need_the_tn_layout_and_16_alignment() {
        // torch._scaled_mm: A [m, k] row-major, B [k, n] stored [n, k] (k contiguous), bf16 out.
        let g = GemmDesc {
            batch: 1,
            m: 67,
            n: 48,
            k: 64,
            a: op(64, 1),
            b: op(1, 64),
            dtype: BlasType::F8E4M3,
            out: BlasType::BF16,
            scale_a: true,
            scale_b: true,
            bias: None,
            residual: false,
            ld_out: 48,
            act: GemmAct::None,
            tf32: false,
        };
        supported(&g).unwrap();
        let no = |g: GemmDesc, why: &str| {
            let e = supported(&g).unwrap_err();
            assert!(e.contains(why), "{e}");
        };
        // B row-major [k, n] (n contiguous): the NN layout cuBLASLt refuses for fp8.
        no(GemmDesc { b: op(48, 1), ..g }, "k-contiguous");
        no(GemmDesc { a: op(1, 67), ..g }, "A is not row-major");
        no(GemmDesc { k: 40, a: op(40, 1), b: op(1, 40), ..g }, "k 40");
        no(GemmDesc { n: 40, ..g }, "n 40");
        no(GemmDesc { a: BlasOperand { offset: 8, ..op(64, 1) }, ..g }, "A's offset");
        no(GemmDesc { dtype: BlasType::F8E5M2, ..g }, "e5m2 x e5m2");
        no(GemmDesc { out: BlasType::F8E4M3, ..g }, "stored as");
        no(GemmDesc { bias: Some(BlasType::BF16), ..g }, "bias");
        no(GemmDesc { act: GemmAct::Gelu, ..g }, "activation");
        no(GemmDesc { ld_out: 47, ..g }, "fewer than its 48 columns");
        no(GemmDesc { residual: true, ..g }, "a residual needs");
        // Scales belong to fp8 products only; 16-bit operands store their type or f32, with a bias
        // of D's type or f32; no activation after a residual.
        no(GemmDesc { dtype: BlasType::BF16, ..g }, "take no scales");
        let bf16 = GemmDesc { dtype: BlasType::BF16, scale_a: false, scale_b: false, b: op(1, 64), ..g };
        supported(&GemmDesc { out: BlasType::F32, ..bf16 }).unwrap();
        no(GemmDesc { out: BlasType::F16, ..bf16 }, "take no scales");
        supported(&GemmDesc { out: BlasType::F32, bias: Some(BlasType::F32), residual: true, ..bf16 }).unwrap();
        supported(&GemmDesc { bias: Some(BlasType::BF16), act: GemmAct::Gelu, ..bf16 }).unwrap();
        no(GemmDesc { bias: Some(BlasType::F32), ..bf16 }, "a F32 bias on a BF16 output");
        no(GemmDesc { out: BlasType::F32, bias: Some(BlasType::BF16), ..bf16 }, "a BF16 bias on a F32 output");
        no(GemmDesc { residual: true, act: GemmAct::Relu, ..bf16 }, "activation after a residual");
    }
}
