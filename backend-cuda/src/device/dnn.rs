//! cuDNN forward convolutions: the vendor library as one more way to run a 2-D convolution
//! (`y = conv(x, w)`, cross-correlation as ONNX and PyTorch define it). Knows nothing of the kernel
//! IR: a [`ConvDesc`] describes the input through element strides (`NCHW` or any strided view),
//! the weight dense `[K, C / groups, kh, kw]`, the output dense `NCHW`.
//!
//! Numerics: f32 accumulation (`CUDNN_DATA_FLOAT` compute) for every operand type. f32 operands
//! multiply exactly (`CUDNN_FMA_MATH`: only algorithms that report FMA math are kept) unless
//! [`ConvDesc::tf32`] allows TF32 (cuDNN's default math, as PyTorch's `cudnn.allow_tf32`); an
//! algorithm that converts f32 operands to f16 (`CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION`) is never
//! kept. The output is rounded once to the operands' type.
//!
//! Algorithms come from cuDNN's heuristic (`cudnnGetConvolutionForwardAlgorithm_v7`, PyTorch's
//! choice without `cudnn.benchmark`), in its order, keeping those that succeed within
//! [`MAX_WORKSPACE_BYTES`]; `max-autotune` times the first few. One process-wide handle, used under
//! a lock (a handle's stream is per call).
//!
//! [`crate::probe::cudnn`] must have succeeded before a plan is made (cudarc panics when the
//! library is absent).

use super::{CudaBuffer, Stream};
use super::blas::BlasType;
use cudarc::cudnn::{result as dnn, sys};
use sinter_core::backend::BackendError;
use std::ffi::c_void;
use std::sync::{Arc, Mutex, OnceLock};

/// The most workspace one algorithm may use (larger ones are skipped).
pub const MAX_WORKSPACE_BYTES: u64 = 256 << 20;
/// Algorithms asked of the heuristic.
const REQUESTED: i32 = 8;

/// A forward convolution.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConvDesc {
    /// Images (N).
    pub images: u64,
    /// Input channels over all groups (C).
    pub in_channels: u64,
    /// Input extent (H, W).
    pub in_hw: [u64; 2],
    /// Input element strides (image, channel, row, column).
    pub x_strides: [u64; 4],
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
    /// Output extent (OH, OW); checked against cuDNN's.
    pub out_hw: [u64; 2],
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

/// The process's cuDNN handle, made once (on the primary context of device 0, which cuDNN's
/// runtime uses, as the backend's own context does) and used under the lock.
fn handle() -> Result<&'static Mutex<Handle>, BackendError> {
    static HANDLE: OnceLock<Result<Mutex<Handle>, String>> = OnceLock::new();
    match HANDLE.get_or_init(|| dnn::create_handle().map(|h| Mutex::new(Handle(h))).map_err(|e| format!("cudnnCreate: {e:?}"))) {
        Ok(h) => Ok(h),
        Err(e) => Err(BackendError::Device(e.clone())),
    }
}

/// A cuDNN handle (used by one thread at a time, under [`handle`]'s lock).
struct Handle(sys::cudnnHandle_t);
// SAFETY: the handle is only used under the mutex, one call at a time.
unsafe impl Send for Handle {}

/// Owned descriptors of one convolution.
struct Descs {
    x: sys::cudnnTensorDescriptor_t,
    w: sys::cudnnFilterDescriptor_t,
    y: sys::cudnnTensorDescriptor_t,
    conv: sys::cudnnConvolutionDescriptor_t,
}

impl Drop for Descs {
    fn drop(&mut self) {
        // SAFETY: each was created once by this plan and is destroyed once.
        unsafe {
            if !self.conv.is_null() {
                let _ = dnn::destroy_convolution_descriptor(self.conv);
            }
            if !self.w.is_null() {
                let _ = dnn::destroy_filter_descriptor(self.w);
            }
            for t in [self.x, self.y] {
                if !t.is_null() {
                    let _ = dnn::destroy_tensor_descriptor(t);
                }
            }
        }
    }
}

/// One algorithm the heuristic offered: its id, the math type to run it with, its workspace.
#[derive(Clone, Copy, Debug)]
struct Algo {
    algo: sys::cudnnConvolutionFwdAlgo_t,
    math: sys::cudnnMathType_t,
    workspace: u64,
}

/// A convolution ready to run with one of the heuristic's algorithms and its workspace.
pub struct ConvPlan {
    desc: ConvDesc,
    descs: Descs,
    algos: Vec<Algo>,
    chosen: usize,
    workspace: Option<CudaBuffer>,
}

// SAFETY: the descriptors are only read after creation (the math type is set under the handle's
// lock); launches are serialized by the owner.
unsafe impl Send for ConvPlan {}

impl std::fmt::Debug for ConvPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ConvPlan({:?}, algorithm {} of {})", self.desc, self.chosen + 1, self.algos.len())
    }
}

fn i(x: u64) -> i32 {
    x as i32
}

impl ConvPlan {
    /// Builds the descriptors of `c`, asks the heuristic for its algorithms (an error when none
    /// fits) and takes algorithm `algo` (an index into them), its workspace from `stream`'s pool.
    pub fn new(stream: &Arc<Stream>, c: &ConvDesc, algo: usize) -> Result<ConvPlan, BackendError> {
        let unsupported = |w: String| BackendError::Unsupported { backend: "cuda".into(), what: format!("cuDNN: {w}") };
        supported(c).map_err(unsupported)?;
        crate::probe::cudnn().map_err(BackendError::NoDevice)?;
        let lock = handle()?;
        let h = lock.lock().map_err(|_| BackendError::Device("the cuDNN handle's lock is poisoned".into()))?;
        let mut d = Descs {
            x: std::ptr::null_mut(),
            w: std::ptr::null_mut(),
            y: std::ptr::null_mut(),
            conv: std::ptr::null_mut(),
        };
        let ty = data_type(c.dtype);
        let nchw = sys::cudnnTensorFormat_t::CUDNN_TENSOR_NCHW;
        d.x = dnn::create_tensor_descriptor().map_err(|e| dnn_err("cudnnCreateTensorDescriptor", e))?;
        d.y = dnn::create_tensor_descriptor().map_err(|e| dnn_err("cudnnCreateTensorDescriptor", e))?;
        d.w = dnn::create_filter_descriptor().map_err(|e| dnn_err("cudnnCreateFilterDescriptor", e))?;
        d.conv = dnn::create_convolution_descriptor().map_err(|e| dnn_err("cudnnCreateConvolutionDescriptor", e))?;
        let [sn, sc, sy, sx] = c.x_strides.map(i);
        let exact = c.dtype == BlasType::F32 && !c.tf32;
        // SAFETY: every descriptor was created above and is set once with in-range integers.
        unsafe {
            dnn::set_tensor4d_descriptor_ex(
                d.x,
                ty,
                [i(c.images), i(c.in_channels), i(c.in_hw[0]), i(c.in_hw[1])],
                [sn, sc, sy, sx],
            )
            .map_err(|e| dnn_err("cudnnSetTensor4dDescriptorEx(x)", e))?;
            let cg = c.in_channels / c.groups;
            dnn::set_filter4d_descriptor(d.w, ty, nchw, [i(c.out_channels), i(cg), i(c.kernel[0]), i(c.kernel[1])])
                .map_err(|e| dnn_err("cudnnSetFilter4dDescriptor", e))?;
            dnn::set_convolution2d_descriptor(
                d.conv,
                i(c.pad[0]),
                i(c.pad[1]),
                i(c.stride[0]),
                i(c.stride[1]),
                i(c.dilation[0]),
                i(c.dilation[1]),
                sys::cudnnConvolutionMode_t::CUDNN_CROSS_CORRELATION,
                sys::cudnnDataType_t::CUDNN_DATA_FLOAT,
            )
            .map_err(|e| dnn_err("cudnnSetConvolution2dDescriptor", e))?;
            if c.groups > 1 {
                dnn::set_convolution_group_count(d.conv, i(c.groups))
                    .map_err(|e| dnn_err("cudnnSetConvolutionGroupCount", e))?;
            }
            let math = if exact { sys::cudnnMathType_t::CUDNN_FMA_MATH } else { sys::cudnnMathType_t::CUDNN_DEFAULT_MATH };
            dnn::set_convolution_math_type(d.conv, math).map_err(|e| dnn_err("cudnnSetConvolutionMathType", e))?;
            let (mut n, mut k, mut oh, mut ow) = (0, 0, 0, 0);
            sys::cudnnGetConvolution2dForwardOutputDim(d.conv, d.x, d.w, &mut n, &mut k, &mut oh, &mut ow)
                .result()
                .map_err(|e| dnn_err("cudnnGetConvolution2dForwardOutputDim", e))?;
            if [n, k, oh, ow] != [i(c.images), i(c.out_channels), i(c.out_hw[0]), i(c.out_hw[1])] {
                return Err(unsupported(format!(
                    "its output would be {n}x{k}x{oh}x{ow}, not {}x{}x{}x{}",
                    c.images, c.out_channels, c.out_hw[0], c.out_hw[1]
                )));
            }
            dnn::set_tensor4d_descriptor(d.y, nchw, ty, [n, k, oh, ow])
                .map_err(|e| dnn_err("cudnnSetTensor4dDescriptor(y)", e))?;
        }
        let mut perf: Vec<sys::cudnnConvolutionFwdAlgoPerf_t> = Vec::with_capacity(REQUESTED as usize);
        let mut count = 0;
        // SAFETY: `perf` has room for REQUESTED results; the descriptors are set.
        unsafe {
            dnn::get_convolution_forward_algorithm(h.0, d.x, d.w, d.conv, d.y, REQUESTED, &mut count, perf.as_mut_ptr())
                .map_err(|e| dnn_err("cudnnGetConvolutionForwardAlgorithm_v7", e))?;
            perf.set_len(count.clamp(0, REQUESTED) as usize);
        }
        use sys::cudnnMathType_t as M;
        let algos: Vec<Algo> = perf
            .iter()
            .filter(|p| p.status == sys::cudnnStatus_t::CUDNN_STATUS_SUCCESS && p.memory as u64 <= MAX_WORKSPACE_BYTES)
            .filter(|p| p.mathType != M::CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION)
            .filter(|p| !exact || p.mathType == M::CUDNN_FMA_MATH)
            .map(|p| Algo { algo: p.algo, math: p.mathType, workspace: p.memory as u64 })
            .collect();
        let Some(chosen) = algos.get(algo).copied() else {
            return Err(unsupported(format!("the heuristic offers {} algorithms for {c:?}, not {}", algos.len(), algo + 1)));
        };
        let workspace = if chosen.workspace > 0 { Some(stream.alloc(chosen.workspace)?) } else { None };
        drop(h);
        Ok(ConvPlan { desc: *c, descs: d, algos, chosen: algo, workspace })
    }

    /// The description this plan runs.
    pub fn desc(&self) -> &ConvDesc {
        &self.desc
    }

    /// How many algorithms the heuristic offered (within the workspace limit and the math rules).
    pub fn algos(&self) -> usize {
        self.algos.len()
    }

    /// cuDNN's name of the chosen algorithm and its math type, for the executable's source text.
    pub fn describe(&self) -> String {
        let a = self.algos[self.chosen];
        format!("{:?} {:?}, workspace {} bytes", a.algo, a.math, a.workspace)
    }

    /// Queues `y = conv(x, w)` on `stream` (device pointers of the first elements).
    pub fn launch(&self, stream: &Stream, x: u64, w: u64, y: u64) -> Result<(), BackendError> {
        let a = self.algos[self.chosen];
        let h = handle()?.lock().map_err(|_| BackendError::Device("the cuDNN handle's lock is poisoned".into()))?;
        let (alpha, beta) = (1.0f32, 0.0f32);
        let ws = self.workspace.as_ref().map_or(std::ptr::null_mut(), |b| b.ptr() as *mut c_void);
        // SAFETY: the handle is held under the lock; the descriptors live as long as the plan; the
        // pointers are device allocations the caller keeps alive until the stream reaches them.
        unsafe {
            dnn::set_stream(h.0, stream.cu() as sys::cudaStream_t).map_err(|e| dnn_err("cudnnSetStream", e))?;
            dnn::set_convolution_math_type(self.descs.conv, a.math)
                .map_err(|e| dnn_err("cudnnSetConvolutionMathType", e))?;
            dnn::convolution_forward(
                h.0,
                &alpha as *const f32 as *const c_void,
                self.descs.x,
                x as *const c_void,
                self.descs.w,
                w as *const c_void,
                self.descs.conv,
                a.algo,
                ws,
                a.workspace as usize,
                &beta as *const f32 as *const c_void,
                self.descs.y,
                y as *mut c_void,
            )
            .map_err(|e| dnn_err("cudnnConvolutionForward", e))
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
            out_channels: 6,
            groups: 2,
            kernel: [3, 3],
            pad: [1, 1],
            stride: [1, 1],
            dilation: [1, 1],
            out_hw: [8, 8],
            dtype: BlasType::F32,
            tf32: false,
        }
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
