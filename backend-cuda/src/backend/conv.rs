//! Library convolutions in an executable: an implicit-GEMM convolution kernel can run as a cuDNN
//! forward convolution into a scratch buffer followed by its epilogue as a rendered pointwise
//! kernel ([`split_conv`]: bias, residual, activation, casts), instead of the own tensor-core
//! template. The step is a [`Step::Conv`]; the executable launches, patches and times it like
//! any other step.
//!
//! # When cuDNN runs
//!
//! The same rule as cuBLASLt's products ([`super::library`]): in `default` mode for convolutions
//! of at least [`super::library::LIBRARY_MIN_FLOPS`] with the heuristic's first algorithm; in `max-autotune` its
//! first [`super::library::LIBRARY_CANDIDATES`] algorithms are timed beside the own templates; never in
//! `reduce-overhead` (the run is one patched CUDA graph). `SINTER_CUDNN=0` or no libcudnn: never;
//! `SINTER_CUDA_LIBRARY=force`: every convolution the library can run (tests).
//!
//! Why: the own implicit-GEMM template reads its im2col operand one 4-byte `cp.async` per
//! element from `NCHW` activations (no 16-byte copies: taps along a row are contiguous but not
//! aligned), and ran ResNet-18 at batch 32 at 0.45x torch.compile on an H200, where
//! torch.compile itself runs its convolutions on cuDNN (BENCHMARKS.md, session 9). The split
//! form costs one write and one read of the convolution's output that the fused template does
//! not (as torch.compile's own convolution + Triton epilogue pair does).

use super::cuda_buffer;
use super::exec::LoadedKernel;
use super::library::{Step, epilogue_step, large_enough, library_loaded, library_tunings, unsupported};
use crate::device::blas::BlasType;
use crate::device::dnn::{ConvDesc, ConvPlan};
use crate::device::{CudaBuffer, Device, Launch, Stream};
use crate::nvrtc::CubinCache;
use crate::render::{Rendered, Tuning};
use sinter_core::DType;
use sinter_core::HostTensor;
use sinter_core::backend::{BackendError, ConstantPool, DeviceTensor, Mode};
use sinter_core::kernel::library_conv::{LibraryConv, SplitConv, krsc_weight_kernel, split_conv};
use sinter_core::kernel::{Kernel, KernelBody};
use std::sync::Arc;

/// Where a cuDNN convolution with `KRSC` filters ([`ConvDesc::w_krsc`]) finds them.
enum KrscWeight {
    /// The plan reads the weight argument as it is (`KCRS`).
    None,
    /// A kernel permutes the weight argument into `buf` before each convolution (a weight that
    /// is a graph input, as a model's parameters are when not frozen); its launch is patched with
    /// the kernel's arguments.
    PerRun { launch: Launch, buf: CudaBuffer },
    /// A constant weight permuted once at load: its device pointer, and the pool's tensor kept
    /// alive ([`ConvStep::use_krsc_weight`]).
    Constant { ptr: u64, _tensor: DeviceTensor },
}

/// A library convolution bound to the kernel's arguments.
pub(crate) struct ConvStep {
    plan: Arc<ConvPlan>,
    /// One device pointer per kernel argument (patched like a launch's).
    args: Vec<u64>,
    conv: LibraryConv,
    /// The epilogue kernel (the kernel's arguments, then the scratch) and the scratch.
    epilogue: Launch,
    scratch: CudaBuffer,
    /// Where the plan's `KRSC` weight comes from.
    krsc: KrscWeight,
}

impl ConvStep {
    /// Queues the weight's permutation (if it runs per run), the convolution and its epilogue on
    /// `stream`.
    pub(crate) fn launch(&self, stream: &Stream) -> Result<(), BackendError> {
        let w = match &self.krsc {
            KrscWeight::None => self.args[self.conv.w],
            KrscWeight::PerRun { launch, buf } => {
                launch.launch(stream)?;
                buf.ptr()
            }
            KrscWeight::Constant { ptr, .. } => *ptr,
        };
        self.plan.launch(stream, self.args[self.conv.x], w, self.scratch.ptr())?;
        if self.epilogue.is_empty() { Ok(()) } else { self.epilogue.launch(stream) }
    }

    /// The kernel argument holding the weight.
    pub(crate) fn weight_arg(&self) -> usize {
        self.conv.w
    }

    /// Replaces the per-run permutation of the weight by one run of it now, at load, where the
    /// weight is the constant `w` (the whole constant the weight argument points into, already on
    /// the device): the permuted copy is kept in the compiled graph's constant `pool`, so that
    /// other specializations of the graph find it instead of permuting again. `Ok(false)`
    /// (nothing changed) where the plan reads `KCRS` filters.
    ///
    /// On the device, not the host: permuting ResNet-18's 11.7M weights on the host and uploading
    /// the 47 MB copy added ~85 ms to a warm start (H200, session 18), and the device's copy of the
    /// constant is already there to read.
    pub(crate) fn use_krsc_weight(
        &mut self,
        w: &Arc<HostTensor>,
        pool: &ConstantPool,
        dev: &Device,
        stream: &Arc<Stream>,
    ) -> Result<bool, BackendError> {
        let c = &self.conv;
        let cg = c.in_channels / c.groups.max(1);
        let dims = [c.out_channels, cg, c.kernel[0], c.kernel[1]];
        if c.w_offset + dims.iter().product::<usize>() > w.numel() || !matches!(self.krsc, KrscWeight::PerRun { .. }) {
            return Ok(false);
        }
        let KrscWeight::PerRun { launch, buf } = std::mem::replace(&mut self.krsc, KrscWeight::None) else {
            return Ok(false);
        };
        let [k, cg, kh, kw] = dims;
        let derivation = format!("krsc of {dims:?} at element {}", c.w_offset);
        let dtype = c.dtype;
        let t = pool.get_or_derive("cuda", w, &derivation, || {
            launch.launch(stream)?;
            DeviceTensor::new(dtype, vec![k, kh, kw, cg], Arc::new(buf))
        })?;
        let b = cuda_buffer(&t, dev, "KRSC weight")?;
        super::exec::wait_for(b, stream, None)?;
        self.krsc = KrscWeight::Constant { ptr: b.ptr(), _tensor: t };
        Ok(true)
    }

    /// Sets the device pointer of kernel argument `i`.
    pub(crate) fn set_arg(&mut self, i: usize, value: u64) -> Result<(), BackendError> {
        self.args[i] = value;
        if let KrscWeight::PerRun { launch, .. } = &mut self.krsc {
            launch.set_arg(i, value)?;
        }
        self.epilogue.set_arg(i, value)
    }
}

/// Whether `k` is a convolution kernel (a matmul with an im2col operand): such kernels take
/// cuDNN, never cuBLASLt.
pub(crate) fn is_conv(k: &Kernel) -> bool {
    matches!(&k.body, KernelBody::Matmul(m) if m.b.im2col.is_some())
}

fn blas_type(d: DType) -> Result<BlasType, String> {
    Ok(match d {
        DType::F32 => BlasType::F32,
        DType::F16 => BlasType::F16,
        DType::BF16 => BlasType::BF16,
        d => return Err(format!("a {d} convolution")),
    })
}

/// Whether cuDNN reads convolution `c`'s filters in `KRSC` order (permuted per run, or once at load
/// for a constant weight: [`ConvStep::use_krsc_weight`]): where its input is channels-last
/// (channel stride 1, more than one channel). `SINTER_CUDNN_KRSC=0` keeps `KCRS` (to measure).
///
/// Why: with channels-last activations, cuDNN's engines for `KCRS` weights ran ResNet-18's 3x3
/// convolutions at batch 32 10-28% slower than for `KRSC` ones (TF32, H200, session 18,
/// `cudnn_filter_layouts`); PyTorch's channels-last weights are `KRSC` (its kernels are named
/// `nhwckrsc_nhwc`), and torch.compile permutes parameters that are graph inputs on each run.
fn krsc_filters(c: &LibraryConv) -> bool {
    c.x_strides[1] == 1 && c.in_channels > 1 && !std::env::var("SINTER_CUDNN_KRSC").is_ok_and(|v| v == "0")
}

/// Window taps of convolution `c` (`kh * kw`): with one, `KRSC` and `KCRS` are the same bytes
/// and the weight is read as it is.
fn taps(c: &LibraryConv) -> usize {
    c.kernel[0] * c.kernel[1]
}

/// How convolution `k`'s weight reaches cuDNN ([`krsc_render`]).
enum Krsc {
    /// Read as it is (`KCRS` filters, or one tap: the same bytes).
    AsIs,
    /// Permuted by the hand-written transpose (`render::krsc`): its source, and the kernel IR's
    /// form of the permutation (what the loaded kernel describes).
    Tiled(Rendered, Box<Kernel>),
    /// Permuted by the kernel IR's pointwise form, rendered as any kernel.
    Generic(Box<Kernel>),
}

/// The permutation of convolution `k`'s weight to `KRSC`, when cuDNN reads it so ([`krsc_filters`],
/// more than one tap): the hand-written transpose (`render::krsc`) where its shared tile fits and
/// elements are 2 or 4 bytes, else the kernel IR's form; `Err` when the permutation cannot be
/// formed (the step is then refused). Reads only the kernel, so a load renders it with the
/// epilogues and compiles it in their parallel batch ([`krsc_sources`]): built one by one at each
/// step, ResNet-18's 17 permutations were 17 serial NVRTC compiles, 0.9 of its 1.0 s of library
/// steps (H200, session 29).
fn krsc_render(k: &Kernel, conv: &LibraryConv, w_krsc: bool) -> Result<Krsc, String> {
    if !w_krsc || taps(conv) <= 1 {
        return Ok(Krsc::AsIs);
    }
    let permute = Box::new(krsc_weight_kernel(k, conv)?);
    let e = conv.dtype.size_bytes();
    if crate::render::krsc::CHANNELS * taps(conv) * e > 48 * 1024 || !matches!(e, 2 | 4) {
        return Ok(Krsc::Generic(permute));
    }
    let cg = conv.in_channels / conv.groups.max(1);
    // The kernel's own arguments, then the buffer it writes.
    let nargs = k.args.len() + 1;
    let name = crate::render::entry_name(&permute.name);
    let r = crate::render::krsc::render(
        &name,
        nargs,
        (conv.w, conv.w_offset as u64),
        nargs - 1,
        [conv.out_channels, cg, taps(conv)],
        e,
    );
    Ok(Krsc::Tiled(r, permute))
}

/// The sources a load compiles for convolution `k`'s `KRSC` weight permutation (see
/// [`krsc_render`]), none when it has none (or cannot have one: the step's build says why).
pub(crate) fn krsc_sources(k: &Kernel, caps: &crate::render::CudaCaps) -> Option<Rendered> {
    let (split, desc) = conv_desc(k).ok()?;
    match krsc_render(k, &split.conv, desc.w_krsc).ok()? {
        Krsc::AsIs => None,
        Krsc::Tiled(r, _) => Some(r),
        Krsc::Generic(permute) => crate::render::render(&permute, caps, &Tuning::default()).ok(),
    }
}

/// The per-run permutation of convolution `conv`'s weight to `KRSC` (kernel `k`'s arguments
/// `args` plus a fresh buffer it writes): its launch, the buffer and its source. The hand-written
/// transpose (`render::krsc`) where its shared tile fits, else the kernel IR's pointwise form
/// (`library_conv::krsc_weight_kernel`), which defines the permutation either way. `None` when
/// cuDNN reads the weight as it is.
fn krsc_step(
    backend: &super::CudaBackend,
    k: &Kernel,
    conv: &LibraryConv,
    w_krsc: bool,
    args: &[u64],
    cubins: &CubinCache,
    stream: &Arc<Stream>,
) -> Result<Option<(Launch, CudaBuffer, String)>, BackendError> {
    let e = conv.dtype.size_bytes();
    let cg = conv.in_channels / conv.groups.max(1);
    let numel = conv.out_channels * cg * taps(conv);
    let (r, permute) = match krsc_render(k, conv, w_krsc).map_err(|what| unsupported(k, what))? {
        Krsc::AsIs => return Ok(None),
        Krsc::Tiled(r, permute) => (r, permute),
        Krsc::Generic(permute) => {
            return epilogue_step(backend, k, &permute, (numel * e) as u64, args, cubins, stream).map(Some);
        }
    };
    let buf = stream.alloc((numel * e).max(4) as u64)?;
    let mut pargs = args.to_vec();
    pargs.push(buf.ptr());
    let cubin = backend.compile(&r.name, &r.source, cubins)?;
    let loaded = backend.load_kernel(&permute, &Tuning::default(), r, &cubin, &pargs, stream)?;
    let Step::Kernel(launch) = loaded.launch else {
        return Err(BackendError::Render {
            kernel: k.name.clone(),
            msg: "the KRSC permutation is not a kernel".into(),
        });
    };
    Ok(Some((launch, buf, loaded.rendered.source)))
}

/// The library form of convolution kernel `k` and its cuDNN description, or why not.
pub(crate) fn conv_desc(k: &Kernel) -> Result<(SplitConv, ConvDesc), String> {
    let split = split_conv(k)?;
    let c = &split.conv;
    let u = |x: usize| x as u64;
    let w_krsc = krsc_filters(c);
    let desc = ConvDesc {
        images: u(c.images),
        in_channels: u(c.in_channels),
        in_hw: c.in_hw.map(u),
        x_strides: c.x_strides.map(u),
        offsets: [u(c.x_offset), if w_krsc && taps(c) > 1 { 0 } else { u(c.w_offset) }],
        out_channels: u(c.out_channels),
        groups: u(c.groups),
        kernel: c.kernel.map(u),
        pad: c.pad.map(u),
        stride: c.stride.map(u),
        dilation: c.dilation.map(u),
        out_hw: c.out_hw.map(u),
        y_nhwc: c.out_nhwc,
        w_krsc,
        dtype: blas_type(c.dtype)?,
        tf32: c.tf32,
    };
    crate::device::dnn::supported(&desc)?;
    Ok((split, desc))
}

/// The cuDNN description of convolution `k` where cuDNN may take it in `mode`, else why not.
fn allowed_desc(k: &Kernel, mode: Mode) -> Result<ConvDesc, String> {
    let desc = conv_wanted(k, mode)?;
    crate::probe::cudnn()?;
    Ok(desc)
}

/// Input channels per group below which `default` mode keeps a convolution on the own
/// implicit-GEMM template (max-autotune still times cuDNN's algorithms for it).
pub const CUDNN_MIN_CHANNELS: usize = 8;

/// [`allowed_desc`] short of loading libcudnn: the convolution's form and size only.
///
/// In `default` mode a convolution with fewer than [`CUDNN_MIN_CHANNELS`] input channels per
/// group (an image model's stem) stays on the own template. cuDNN's first heuristic algorithm
/// ran ResNet-18's stem (3 channels, 7x7, stride 2, batch 32) at 368 us on an H200 (session 18,
/// call 4), a quarter of the whole network's time. max-autotune kept the own template for it.
pub(crate) fn conv_wanted(k: &Kernel, mode: Mode) -> Result<ConvDesc, String> {
    if mode == Mode::ReduceOverhead {
        return Err("reduce-overhead keeps every step in the patched CUDA graph".into());
    }
    let (split, desc) = conv_desc(k)?;
    large_enough(split.conv.flops(), mode)?;
    let per_group = split.conv.in_channels / split.conv.groups.max(1);
    if mode == Mode::Default && per_group < CUDNN_MIN_CHANNELS && !super::library::forced() {
        return Err(format!(
            "{per_group} input channels per group (fewer than {CUDNN_MIN_CHANNELS}): cuDNN's heuristic algorithm is slow there"
        ));
    }
    Ok(desc)
}

/// Builds the cuDNN step of convolution `k` with heuristic algorithm `tuning.library`, bound to
/// `args` (its epilogue kernel compiled through `backend`).
pub(crate) fn build(
    backend: &super::CudaBackend,
    k: &Kernel,
    tuning: &Tuning,
    args: &[u64],
    cubins: &CubinCache,
    stream: &Arc<Stream>,
) -> Result<LoadedKernel, BackendError> {
    let unsupported = |what: String| unsupported(k, what);
    let algo = tuning.library.unwrap_or(0) as usize;
    let (split, desc) = conv_desc(k).map_err(unsupported)?;
    let t = std::time::Instant::now();
    let plan = ConvPlan::shared(stream, &desc, algo)?;
    super::library::count_plan_time(t);
    let conv = split.conv.clone();
    let bytes = (conv.out_numel() * conv.dtype.size_bytes()) as u64;
    let (epilogue, scratch, mut esource) = epilogue_step(backend, k, &split.epilogue, bytes, args, cubins, stream)?;
    let krsc = match krsc_step(backend, k, &conv, desc.w_krsc, args, cubins, stream)? {
        Some((launch, buf, psource)) => {
            esource.push_str("// the weight, permuted to KRSC before each convolution (not a constant):\n");
            esource.push_str(&psource);
            KrscWeight::PerRun { launch, buf }
        }
        None => KrscWeight::None,
    };
    let tf32 = desc.dtype == BlasType::F32 && desc.tf32;
    let source = format!(
        "// sinter kernel {}: {}\n// cuDNN forward convolution (library call, no source): {}x{}x{}x{} input (strides {:?}), {} \
         filters of {}x{}x{}, {} groups, padding {:?}, stride {:?}, dilation {:?}, {:?}{}, f32 accumulation, into an {} \
         scratch; algorithm {} of {}: {}\n// the epilogue is the kernel below, reading the convolution from the scratch\n{}",
        k.name,
        k.ops.join(", "),
        conv.images,
        conv.in_channels,
        conv.in_hw[0],
        conv.in_hw[1],
        conv.x_strides,
        conv.out_channels,
        conv.in_channels / conv.groups,
        conv.kernel[0],
        conv.kernel[1],
        conv.groups,
        conv.pad,
        conv.stride,
        conv.dilation,
        desc.dtype,
        if tf32 { " (TF32 allowed)" } else { "" },
        if conv.out_nhwc { "NHWC" } else { "NCHW" },
        algo + 1,
        plan.algos(),
        plan.describe(),
        esource
    );
    let strategy = format!("cudnn algo {}/{}", algo + 1, plan.algos());
    let step = Step::Conv(Box::new(ConvStep { plan, args: args.to_vec(), conv, epilogue, scratch, krsc }));
    Ok(library_loaded(k, tuning, source, strategy, tf32, step))
}

/// The cuDNN candidates max-autotune times for convolution `k` (none when the library cannot
/// run it).
pub(crate) fn candidates(k: &Kernel, stream: &Arc<Stream>) -> Vec<Tuning> {
    let desc = match allowed_desc(k, Mode::MaxAutotune) {
        Ok(d) => d,
        Err(why) => {
            tracing::debug!(target: "sinter::autotune", "{}: no cuDNN candidate: {why}", k.name);
            return Vec::new();
        }
    };
    match ConvPlan::new(stream, &desc, 0) {
        Ok(plan) => library_tunings(plan.algos()),
        Err(e) => {
            tracing::debug!(target: "sinter::autotune", "{}: no cuDNN candidate: {e}", k.name);
            Vec::new()
        }
    }
}
