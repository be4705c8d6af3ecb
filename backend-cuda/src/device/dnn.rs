//! cuDNN forward convolutions: the vendor library as one more way to run a 2-D convolution
//! (`y = conv(x, w)`, cross-correlation as ONNX and PyTorch define it). Knows nothing of the kernel
//! IR: a [`ConvDesc`] describes the input through element strides (`NCHW`, channels-last or any
//! strided view), the weight dense `[K, C / groups, kh, kw]`, the output dense `NCHW` or `NHWC`.
//!
//! Numerics: f32 accumulation (`CUDNN_DATA_FLOAT` compute) for every operand type. f32 operands
//! multiply exactly (engines noted `TENSOR_CORE` are skipped) unless [`ConvDesc::tf32`] allows
//! TF32 (as PyTorch's `cudnn.allow_tf32`); an engine that converts inputs down is never kept. The
//! output is rounded once to the operands' type.
//!
//! Through cuDNN's backend (graph) API, as PyTorch's cuDNN v8+ path: the operation graph and the
//! execution plan are built once per convolution, a launch is one `cudnnBackendExecute` with a
//! cached variant pack (the legacy `cudnnConvolutionForward` rebuilds its plan on every call in
//! cuDNN 9: 63-115 us of host time per call measured on an H200, more than the convolution).
//! Engine configurations come from the heuristic (`CUDNN_HEUR_MODE_INSTANT`, PyTorch's choice
//! without `cudnn.benchmark`), in its order, keeping those whose engine's numerical notes allow it
//! (never `DOWN_CONVERT_INPUTS`; no `TENSOR_CORE` for exact f32) and whose workspace is within
//! [`MAX_WORKSPACE_BYTES`]; `max-autotune` times the first few. One process-wide handle, used under
//! a lock (a handle's stream is per call).
//!
//! [`crate::probe::cudnn`] must have succeeded before a plan is made (cudarc panics when the
//! library is absent).

use super::blas::BlasType;
use super::{CudaBuffer, Stream};
use cudarc::cudnn::{result as dnn, sys};
use sinter_core::backend::BackendError;
use std::ffi::c_void;
use std::sync::{Arc, Mutex, OnceLock};

/// The most workspace one algorithm may use (larger ones are skipped).
pub const MAX_WORKSPACE_BYTES: u64 = 256 << 20;
/// Algorithms asked of the heuristic.
const REQUESTED: i32 = 8;

/// A forward convolution.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ConvDesc {
    /// Images (N).
    pub images: u64,
    /// Input channels over all groups (C).
    pub in_channels: u64,
    /// Input extent (H, W).
    pub in_hw: [u64; 2],
    /// Input element strides (image, channel, row, column).
    pub x_strides: [u64; 4],
    /// Element offsets of the input and the weight from the pointers [`ConvPlan::launch`] gets
    /// (their alignment is what the plan tells cuDNN).
    pub offsets: [u64; 2],
    /// Output channels over all groups (K).
    pub out_channels: u64,
    /// Groups.
    pub groups: u64,
    /// Window (kh, kw).
    pub kernel: [u64; 2],
    /// Padding, both sides alike (h, w).
    pub pad: [u64; 2],
    /// Stride (h, w).
    pub stride: [u64; 2],
    /// Dilation (h, w).
    pub dilation: [u64; 2],
    /// Output extent (OH, OW).
    pub out_hw: [u64; 2],
    /// The output is dense `NHWC` (else dense `NCHW`).
    pub y_nhwc: bool,
    /// The weight is dense `[K, kh, kw, C / groups]` (`KRSC`, channels-last, as cuDNN's fast
    /// NHWC engines and PyTorch's channels-last weights have it) instead of `[K, C / groups, kh,
    /// kw]`.
    pub w_krsc: bool,
    /// Type of x, w and y: f32, f16 or bf16.
    pub dtype: BlasType,
    /// f32 operands may be multiplied in TF32.
    pub tf32: bool,
}

/// Whether cuDNN can take `c` (`Err` says why not).
pub fn supported(c: &ConvDesc) -> Result<(), String> {
    if !matches!(c.dtype, BlasType::F32 | BlasType::F16 | BlasType::BF16) {
        return Err(format!("{:?} operands (f32, f16 and bf16 only)", c.dtype));
    }
    let all = [c.images, c.in_channels, c.out_channels, c.groups, c.in_hw[0], c.in_hw[1], c.out_hw[0], c.out_hw[1]];
    if all.contains(&0) {
        return Err("an empty convolution".into());
    }
    let big = |x: &u64| *x > i32::MAX as u64;
    if all.iter().chain(&c.x_strides).chain(&c.kernel).chain(&c.pad).chain(&c.stride).chain(&c.dilation).any(big) {
        return Err("an extent or stride over 2^31".into());
    }
    if !c.in_channels.is_multiple_of(c.groups) || !c.out_channels.is_multiple_of(c.groups) {
        return Err("channels not a multiple of the groups".into());
    }
    Ok(())
}

fn data_type(t: BlasType) -> sys::cudnnDataType_t {
    match t {
        BlasType::F16 => sys::cudnnDataType_t::CUDNN_DATA_HALF,
        BlasType::BF16 => sys::cudnnDataType_t::CUDNN_DATA_BFLOAT16,
        _ => sys::cudnnDataType_t::CUDNN_DATA_FLOAT,
    }
}

fn dnn_err(call: &str, e: dnn::CudnnError) -> BackendError {
    BackendError::Device(format!("{call}: {e:?}"))
}

/// The driver context current on this thread (as an address; 0 when none).
fn current_context() -> usize {
    cudarc::driver::result::ctx::get_current().ok().flatten().map_or(0, |c| c as usize)
}

/// The process's cuDNN handle, made once on the context current when first asked for (cuDNN's
/// runtime adopts the backend's primary context) and used under the lock. A plan asked for on
/// another context (another GPU) is refused: one handle serves one device.
fn handle() -> Result<&'static Mutex<Handle>, BackendError> {
    static HANDLE: OnceLock<Result<Mutex<Handle>, String>> = OnceLock::new();
    let made = HANDLE.get_or_init(|| {
        let context = current_context();
        dnn::create_handle().map(|h| Mutex::new(Handle(h, context))).map_err(|e| format!("cudnnCreate: {e:?}"))
    });
    match made {
        Ok(h) => Ok(h),
        Err(e) => Err(BackendError::Device(e.clone())),
    }
}

/// A cuDNN handle and the context it was made on (used by one thread at a time, under
/// [`handle`]'s lock).
struct Handle(sys::cudnnHandle_t, usize);
// SAFETY: the handle is only used under the mutex, one call at a time.
unsafe impl Send for Handle {}

/// An owned backend-API descriptor.
struct Bd(sys::cudnnBackendDescriptor_t);

impl Drop for Bd {
    fn drop(&mut self) {
        if !self.0.is_null() {
            // SAFETY: created once by `Bd::new`, destroyed once here.
            let _ = unsafe { sys::cudnnBackendDestroyDescriptor(self.0) };
        }
    }
}

use sys::cudnnBackendAttributeName_t as A;
use sys::cudnnBackendAttributeType_t as T;
use sys::cudnnBackendDescriptorType_t as D;

impl Bd {
    fn new(t: D) -> Result<Bd, BackendError> {
        let mut d = std::ptr::null_mut();
        // SAFETY: `d` receives a new descriptor.
        unsafe { sys::cudnnBackendCreateDescriptor(t, &mut d) }
            .result()
            .map_err(|e| dnn_err(&format!("cudnnBackendCreateDescriptor({t:?})"), e))?;
        Ok(Bd(d))
    }

    /// Sets attribute `name` to the `vals` (of the C type `ty` names).
    fn set<V>(&self, name: A, ty: T, vals: &[V]) -> Result<(), BackendError> {
        // SAFETY: `vals` holds `len` elements of the attribute's type.
        unsafe { sys::cudnnBackendSetAttribute(self.0, name, ty, vals.len() as i64, vals.as_ptr() as *const c_void) }
            .result()
            .map_err(|e| dnn_err(&format!("cudnnBackendSetAttribute({name:?})"), e))
    }

    fn finalize(&self, what: &str) -> Result<(), BackendError> {
        // SAFETY: a live descriptor.
        unsafe { sys::cudnnBackendFinalize(self.0) }
            .result()
            .map_err(|e| dnn_err(&format!("cudnnBackendFinalize({what})"), e))
    }
}

/// The heuristic mode engine configurations come from: `CUDNN_HEUR_MODE_INSTANT` (PyTorch's
/// without `cudnn.benchmark`), or `SINTER_CUDNN_HEUR=a|b` (mode A, or mode B: slower to query,
/// said to rank better), to measure.
fn heur_mode() -> sys::cudnnBackendHeurMode_t {
    use sys::cudnnBackendHeurMode_t as H;
    match std::env::var("SINTER_CUDNN_HEUR").as_deref() {
        Ok("a") => H::CUDNN_HEUR_MODE_A,
        Ok("b") => H::CUDNN_HEUR_MODE_B,
        _ => H::CUDNN_HEUR_MODE_INSTANT,
    }
}

/// The largest power of two up to 16 dividing `bytes` (the alignment of an operand at that byte
/// offset from a pool allocation, which is at least 256-byte aligned).
fn alignment(bytes: u64) -> i64 {
    1 << bytes.trailing_zeros().min(4)
}

/// A convolution ready to run: its operation graph, the heuristic's engine configurations that
/// keep the numerics ([`ConvDesc::tf32`]; never converting f32 inputs down), and the finalized
/// execution plan of the chosen one with its workspace.
pub struct ConvPlan {
    desc: ConvDesc,
    /// Usable engine configurations, in the heuristic's order.
    algos: usize,
    chosen: usize,
    /// The heuristic mode the configurations came from ([`heur_mode`]).
    heur: sys::cudnnBackendHeurMode_t,
    plan: Bd,
    workspace_bytes: u64,
    workspace: Option<Arc<CudaBuffer>>,
    /// Variant packs by the pointers they hold (x, w, y), the latest last: a plan shared by
    /// several convolutions of one shape ([`ConvPlan::shared`]) keeps one per convolution, at
    /// most [`PACKS`].
    packs: Mutex<Vec<([u64; 3], Bd)>>,
    /// Kept alive for the plan (the operation graph and what it references).
    _graph: Vec<Bd>,
}

// SAFETY: the descriptors are only used under the handle's lock (launches) or by their owner.
unsafe impl Send for ConvPlan {}
// SAFETY: through `&ConvPlan` the descriptors are used only in `launch`, under the cuDNN
// handle's lock (and the variant packs under their own); the rest is plain data.
unsafe impl Sync for ConvPlan {}

impl std::fmt::Debug for ConvPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ConvPlan({:?}, engine configuration {} of {})", self.desc, self.chosen + 1, self.algos)
    }
}

/// Most variant packs one plan keeps ([`ConvPlan`]'s `packs`).
const PACKS: usize = 64;

/// Unique ids of x, w and y in the operation graph and variant packs.
const UIDS: [i64; 3] = [1, 2, 3];

impl ConvPlan {
    /// Builds the operation graph of `c` (cuDNN's backend API: built once, so a launch costs one
    /// `cudnnBackendExecute`; the legacy `cudnnConvolutionForward` measured 63-115 us of host
    /// time per call on an H200 with cuDNN 9), asks the heuristic for engine configurations and
    /// finalizes the execution plan of the `algo`-th usable one (an index into them), its
    /// workspace `stream`'s shared one ([`Stream::shared_workspace`]). `Unsupported` when there is none.
    pub fn new(stream: &Arc<Stream>, c: &ConvDesc, algo: usize) -> Result<ConvPlan, BackendError> {
        let unsupported = |w: String| BackendError::Unsupported { backend: "cuda".into(), what: format!("cuDNN: {w}") };
        supported(c).map_err(unsupported)?;
        crate::probe::cudnn().map_err(unsupported)?;
        // A descriptor cuDNN rejects while planning is a convolution it does not take: the own
        // template runs it instead (`Unsupported`); running out of memory stays what it is.
        Self::plan(stream, c, algo).map_err(|e| match e {
            BackendError::Device(m) => unsupported(m),
            other => other,
        })
    }

    /// As [`ConvPlan::new`], sharing the plan already built on `stream` for the same description
    /// and algorithm while one lives: a network's repeated layers (ResNet-50: 53 convolutions of
    /// about 20 shapes) plan once. Launches on one stream run in order, so sharing the plan and
    /// its workspace is safe; its variant packs are kept per set of pointers.
    pub fn shared(stream: &Arc<Stream>, c: &ConvDesc, algo: usize) -> Result<Arc<ConvPlan>, BackendError> {
        static PLANS: std::sync::OnceLock<super::shared::Shared<(u64, ConvDesc, usize), ConvPlan>> =
            std::sync::OnceLock::new();
        PLANS
            .get_or_init(Default::default)
            .get_or_make((stream.id(), *c, algo), || Ok(Arc::new(ConvPlan::new(stream, c, algo)?)))
    }

    fn plan(stream: &Arc<Stream>, c: &ConvDesc, algo: usize) -> Result<ConvPlan, BackendError> {
        let unsupported = |w: String| BackendError::Unsupported { backend: "cuda".into(), what: format!("cuDNN: {w}") };
        let lock = handle()?;
        let h = lock.lock().map_err(|_| BackendError::Device("the cuDNN handle's lock is poisoned".into()))?;
        let here = current_context();
        if h.1 != 0 && here != 0 && h.1 != here {
            return Err(unsupported("its handle belongs to another device's context (one device per process)".into()));
        }
        let ty = data_type(c.dtype);
        let i64s = |v: &[u64]| v.iter().map(|&x| x as i64).collect::<Vec<i64>>();
        let cg = c.in_channels / c.groups;
        let tensor = |uid: i64, dims: &[u64], strides: &[u64], align: i64| -> Result<Bd, BackendError> {
            let t = Bd::new(D::CUDNN_BACKEND_TENSOR_DESCRIPTOR)?;
            t.set(A::CUDNN_ATTR_TENSOR_DATA_TYPE, T::CUDNN_TYPE_DATA_TYPE, &[ty])?;
            t.set(A::CUDNN_ATTR_TENSOR_DIMENSIONS, T::CUDNN_TYPE_INT64, &i64s(dims))?;
            t.set(A::CUDNN_ATTR_TENSOR_STRIDES, T::CUDNN_TYPE_INT64, &i64s(strides))?;
            t.set(A::CUDNN_ATTR_TENSOR_UNIQUE_ID, T::CUDNN_TYPE_INT64, &[uid])?;
            t.set(A::CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, T::CUDNN_TYPE_INT64, &[align])?;
            t.finalize("tensor")?;
            Ok(t)
        };
        let [oh, ow] = c.out_hw;
        let (kh, kw) = (c.kernel[0], c.kernel[1]);
        let [xa, wa] = c.offsets.map(|o| alignment(o * c.dtype.bytes()));
        let x = tensor(UIDS[0], &[c.images, c.in_channels, c.in_hw[0], c.in_hw[1]], &c.x_strides, xa)?;
        let w_strides = if c.w_krsc { [kh * kw * cg, 1, kw * cg, cg] } else { [cg * kh * kw, kh * kw, kw, 1] };
        let w = tensor(UIDS[1], &[c.out_channels, cg, kh, kw], &w_strides, wa)?;
        let k = c.out_channels;
        let y_strides = if c.y_nhwc { [oh * ow * k, 1, ow * k, k] } else { [k * oh * ow, oh * ow, ow, 1] };
        let y = tensor(UIDS[2], &[c.images, k, oh, ow], &y_strides, 16)?;
        let conv = Bd::new(D::CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR)?;
        conv.set(
            A::CUDNN_ATTR_CONVOLUTION_COMP_TYPE,
            T::CUDNN_TYPE_DATA_TYPE,
            &[sys::cudnnDataType_t::CUDNN_DATA_FLOAT],
        )?;
        conv.set(
            A::CUDNN_ATTR_CONVOLUTION_CONV_MODE,
            T::CUDNN_TYPE_CONVOLUTION_MODE,
            &[sys::cudnnConvolutionMode_t::CUDNN_CROSS_CORRELATION],
        )?;
        conv.set(A::CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, T::CUDNN_TYPE_INT64, &[2i64])?;
        conv.set(A::CUDNN_ATTR_CONVOLUTION_DILATIONS, T::CUDNN_TYPE_INT64, &i64s(&c.dilation))?;
        conv.set(A::CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, T::CUDNN_TYPE_INT64, &i64s(&c.stride))?;
        conv.set(A::CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, T::CUDNN_TYPE_INT64, &i64s(&c.pad))?;
        conv.set(A::CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, T::CUDNN_TYPE_INT64, &i64s(&c.pad))?;
        conv.finalize("convolution")?;
        let op = Bd::new(D::CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR)?;
        let bd = T::CUDNN_TYPE_BACKEND_DESCRIPTOR;
        op.set(A::CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, bd, &[x.0])?;
        op.set(A::CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, bd, &[w.0])?;
        op.set(A::CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, bd, &[y.0])?;
        op.set(A::CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, bd, &[conv.0])?;
        op.set(A::CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, T::CUDNN_TYPE_FLOAT, &[1.0f32])?;
        op.set(A::CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, T::CUDNN_TYPE_FLOAT, &[0.0f32])?;
        op.finalize("convolution forward")?;
        let graph = Bd::new(D::CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR)?;
        graph.set(A::CUDNN_ATTR_OPERATIONGRAPH_HANDLE, T::CUDNN_TYPE_HANDLE, &[h.0])?;
        graph.set(A::CUDNN_ATTR_OPERATIONGRAPH_OPS, bd, &[op.0])?;
        graph.finalize("operation graph")?;
        let heur = Bd::new(D::CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR)?;
        heur.set(A::CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, bd, &[graph.0])?;
        let mode = heur_mode();
        heur.set(A::CUDNN_ATTR_ENGINEHEUR_MODE, T::CUDNN_TYPE_HEUR_MODE, &[mode])?;
        heur.finalize("engine heuristic")?;
        let cfgs: Vec<Bd> =
            (0..REQUESTED).map(|_| Bd::new(D::CUDNN_BACKEND_ENGINECFG_DESCRIPTOR)).collect::<Result<_, _>>()?;
        let ptrs: Vec<sys::cudnnBackendDescriptor_t> = cfgs.iter().map(|b| b.0).collect();
        let mut count = 0i64;
        // SAFETY: `ptrs` holds REQUESTED created engine configuration descriptors to fill.
        unsafe {
            sys::cudnnBackendGetAttribute(
                heur.0,
                A::CUDNN_ATTR_ENGINEHEUR_RESULTS,
                bd,
                REQUESTED as i64,
                &mut count,
                ptrs.as_ptr() as *mut c_void,
            )
        }
        .result()
        .map_err(|e| dnn_err("cudnnBackendGetAttribute(ENGINEHEUR_RESULTS)", e))?;
        let exact = c.dtype == BlasType::F32 && !c.tf32;
        use sys::cudnnBackendNumericalNote_t as N;
        // Configurations whose engine keeps the numerics: no down-conversion of the inputs, no
        // tensor cores for exact f32.
        let usable: Vec<&Bd> = cfgs
            .iter()
            .take(count.clamp(0, REQUESTED as i64) as usize)
            .filter(|cfg| {
                let Ok(engine) = Bd::new(D::CUDNN_BACKEND_ENGINE_DESCRIPTOR) else { return false };
                let mut n = 0i64;
                // SAFETY: one created engine descriptor to fill.
                let got = unsafe {
                    sys::cudnnBackendGetAttribute(
                        cfg.0,
                        A::CUDNN_ATTR_ENGINECFG_ENGINE,
                        bd,
                        1,
                        &mut n,
                        &engine.0 as *const _ as *mut c_void,
                    )
                };
                if got.result().is_err() {
                    return false;
                }
                let mut notes = [N::CUDNN_NUMERICAL_NOTE_TENSOR_CORE; 16];
                let mut k = 0i64;
                // SAFETY: room for 16 notes.
                let r = unsafe {
                    sys::cudnnBackendGetAttribute(
                        engine.0,
                        A::CUDNN_ATTR_ENGINE_NUMERICAL_NOTE,
                        T::CUDNN_TYPE_NUMERICAL_NOTE,
                        16,
                        &mut k,
                        notes.as_mut_ptr() as *mut c_void,
                    )
                };
                if r.result().is_err() {
                    return false;
                }
                let notes = &notes[..k.clamp(0, 16) as usize];
                let down = notes.contains(&N::CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS);
                let tensor_core = notes.contains(&N::CUDNN_NUMERICAL_NOTE_TENSOR_CORE);
                !(down || (exact && tensor_core))
            })
            .collect();
        // Finalize plans in order until the `algo`-th that finalizes and fits the workspace.
        let mut found = 0;
        let mut chosen = None;
        for cfg in &usable {
            let plan = Bd::new(D::CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR)?;
            plan.set(A::CUDNN_ATTR_EXECUTION_PLAN_HANDLE, T::CUDNN_TYPE_HANDLE, &[h.0])?;
            plan.set(A::CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, bd, &[cfg.0])?;
            if plan.finalize("execution plan").is_err() {
                continue;
            }
            let mut ws = 0i64;
            let mut n = 0i64;
            // SAFETY: one i64 to fill.
            unsafe {
                sys::cudnnBackendGetAttribute(
                    plan.0,
                    A::CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                    T::CUDNN_TYPE_INT64,
                    1,
                    &mut n,
                    &mut ws as *mut i64 as *mut c_void,
                )
            }
            .result()
            .map_err(|e| dnn_err("cudnnBackendGetAttribute(WORKSPACE_SIZE)", e))?;
            if ws < 0 || ws as u64 > MAX_WORKSPACE_BYTES {
                continue;
            }
            if found == algo {
                chosen = Some((plan, ws as u64));
                break;
            }
            found += 1;
        }
        let algos = usable.len();
        let Some((plan, workspace_bytes)) = chosen else {
            return Err(unsupported(format!(
                "the heuristic offers {algos} usable engine configurations for {c:?}; none is number {}",
                algo + 1
            )));
        };
        let workspace = if workspace_bytes > 0 { Some(stream.shared_workspace(workspace_bytes)?) } else { None };
        drop(h);
        Ok(ConvPlan {
            desc: *c,
            algos,
            chosen: algo,
            heur: mode,
            plan,
            workspace_bytes,
            workspace,
            packs: Mutex::new(Vec::new()),
            _graph: vec![graph, op, conv, x, w, y],
        })
    }

    /// The description this plan runs.
    pub fn desc(&self) -> &ConvDesc {
        &self.desc
    }

    /// How many engine configurations the heuristic offered that keep the numerics (an upper
    /// bound on the plans: one may still fail to finalize or need too much workspace).
    pub fn algos(&self) -> usize {
        self.algos
    }

    /// The chosen configuration and its workspace, for the executable's source text.
    pub fn describe(&self) -> String {
        format!(
            "backend API, engine configuration {} of {} (heuristic mode {:?}), workspace {} bytes",
            self.chosen + 1,
            self.algos,
            self.heur,
            self.workspace_bytes
        )
    }

    /// Queues `y = conv(x, w)` on `stream`: `x` and `w` the pointers the description's
    /// [`ConvDesc::offsets`] count from, `y` the output's first element.
    pub fn launch(&self, stream: &Stream, x: u64, w: u64, y: u64) -> Result<(), BackendError> {
        let e = self.desc.dtype.bytes();
        let (x, w) = (x + self.desc.offsets[0] * e, w + self.desc.offsets[1] * e);
        let h = handle()?.lock().map_err(|_| BackendError::Device("the cuDNN handle's lock is poisoned".into()))?;
        let mut packs =
            self.packs.lock().map_err(|_| BackendError::Device("a variant pack lock is poisoned".into()))?;
        if let Some(i) = packs.iter().position(|(p, _)| *p == [x, w, y]) {
            let hit = packs.remove(i);
            packs.push(hit);
        } else {
            let vp = Bd::new(D::CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR)?;
            let data: [*mut c_void; 3] = [x as *mut c_void, w as *mut c_void, y as *mut c_void];
            vp.set(A::CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, T::CUDNN_TYPE_INT64, &UIDS)?;
            vp.set(A::CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, T::CUDNN_TYPE_VOID_PTR, &data)?;
            let ws: *mut c_void = self.workspace.as_ref().map_or(std::ptr::null_mut(), |b| b.ptr() as *mut c_void);
            vp.set(A::CUDNN_ATTR_VARIANT_PACK_WORKSPACE, T::CUDNN_TYPE_VOID_PTR, &[ws])?;
            vp.finalize("variant pack")?;
            if packs.len() >= PACKS {
                packs.remove(0);
            }
            packs.push(([x, w, y], vp));
        }
        let vp = &packs.last().expect("pushed or moved last above").1;
        // SAFETY: the handle is held under the lock; the plan and pack live as long as `self`; the
        // pointers are device allocations the caller keeps alive until the stream reaches them.
        unsafe {
            dnn::set_stream(h.0, stream.cu() as sys::cudaStream_t).map_err(|e| dnn_err("cudnnSetStream", e))?;
            sys::cudnnBackendExecute(h.0, self.plan.0, vp.0).result().map_err(|e| dnn_err("cudnnBackendExecute", e))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn desc() -> ConvDesc {
        ConvDesc {
            images: 2,
            in_channels: 4,
            in_hw: [8, 8],
            x_strides: [256, 64, 8, 1],
            offsets: [0, 0],
            out_channels: 6,
            groups: 2,
            kernel: [3, 3],
            pad: [1, 1],
            stride: [1, 1],
            dilation: [1, 1],
            out_hw: [8, 8],
            y_nhwc: false,
            w_krsc: false,
            dtype: BlasType::F32,
            tf32: false,
        }
    }

    #[test]
    fn operand_alignment_follows_its_byte_offset() {
        assert_eq!([0, 4, 6, 8, 48, 1 << 20].map(alignment), [16, 4, 2, 8, 16, 16]);
    }

    #[test]
    fn supported_names_what_fails() {
        assert!(supported(&desc()).is_ok());
        assert!(supported(&ConvDesc { dtype: BlasType::F8E4M3, ..desc() }).unwrap_err().contains("F8E4M3"));
        assert!(supported(&ConvDesc { groups: 3, ..desc() }).unwrap_err().contains("multiple of the groups"));
        assert!(supported(&ConvDesc { images: 0, ..desc() }).unwrap_err().contains("empty"));
        assert!(supported(&ConvDesc { x_strides: [1 << 32, 64, 8, 1], ..desc() }).unwrap_err().contains("2^31"));
    }
}
