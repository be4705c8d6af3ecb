//! Library products in an executable (convolutions: [`super::conv`], cuDNN): a matmul kernel can run as a cuBLASLt call ([`GemmPlan`])
//! instead of a rendered kernel: directly when [`library_gemm`] recognizes its epilogue (the
//! library computes it), else split ([`split_epilogue`]): the product into a scratch buffer of the
//! operands' dtype, then the epilogue as a rendered pointwise kernel. A [`Step`] is either a
//! kernel or a library call; the executable launches, patches and times both alike.
//!
//! # When the library runs
//!
//! * `default`: for products of at least [`LIBRARY_MIN_FLOPS`] (or skinny ones with a long
//!   reduction, whatever their size: a classifier head, a decode step), with the heuristic's first
//!   algorithm: directly where the library computes the epilogue (`acc`, `+ bias`, ReLU or GELU's
//!   tanh form, a residual as `C`), split otherwise (measured on an H100: bias and GELU split,
//!   1.6 ms and 0.3 ms, against 3.2 ms fused on the template; the split step's source says why it
//!   is not direct, and a direct form the heuristic refuses runs split too); sinter's own templates for smaller products. The own tensor-core template (`mma.sync`) reaches about half of
//!   cuBLASLt's `wgmma` kernels on an H100 (BENCHMARKS.md), so large products go to the library
//!   until a `wgmma` template exists.
//! * `max-autotune`: the heuristic's first algorithms join the template candidates and the
//!   fastest wins (cached per device).
//! * `reduce-overhead`: never (the run is one CUDA graph whose kernel arguments sinter patches per
//!   run; a library call's kernels cannot be patched). An executable with a library step runs its
//!   steps on the stream instead of replaying a graph.
//! * `SINTER_CUDA_LIBRARY=0`, or no libcublasLt: never. `SINTER_CUDA_LIBRARY=force`: every product
//!   the library can run, whatever its size (tests: the shared suite's awkward shapes through
//!   cuBLASLt).
//!
//! **fp8** products (the scheduler's prologue: `in_dtype` e4m3/e5m2) take the library on sm_89+
//! where cuBLASLt's fp8 rules hold ([`crate::device::blas::supported`]: the TN layout, 16-element
//! alignment, an e4m3 operand), with `_scaled_mm`'s scales read from device memory. Otherwise
//! they run on the own CUDA-core template, which widens the fp8 operands in its loader; the
//! reason is logged on `sinter::cuda` (and a plan the library refuses at load falls back the
//! same way in `default` mode).

use super::exec::LoadedKernel;
use crate::device::blas::{BlasOperand, BlasType, GemmAct, GemmDesc, GemmPlan};
use crate::device::{CudaBuffer, Launch, Stream};
use crate::nvrtc::CubinCache;
use crate::render::{Rendered, Tuning, entry_name};
use sinter_core::DType;
use sinter_core::backend::{BackendError, Mode};
use sinter_core::kernel::library::{Activation, LibraryGemm, SplitGemm, library_gemm, split_epilogue};
use sinter_core::kernel::{Kernel, MatOperand};
use std::sync::Arc;

/// Products below this many floating-point operations keep sinter's own kernels in `default`
/// mode (launch overhead and the CUDA graph matter more there). Measured on an H100: the own
/// exact-f32 template runs on CUDA cores with small tiles, 8.3 TFLOP/s on ViT-B/16's 394 x 768 x
/// 768 projections (0.46 GFLOP, 52 us each; cuBLASLt's f32 products of the same model ran at 27 to
/// 31 TFLOP/s); ResNet-50 in bf16 at batch 8 had its 0.1-1 GFLOP 1x1 convolutions on the own
/// tensor-core templates at 10-58 TFLOP/s (a 0.82 GFLOP one: 68 us) while the threshold for
/// 16-bit and TF32 products was 1e9 (BENCHMARKS.md, session 9).
pub const LIBRARY_MIN_FLOPS: f64 = 1e8;
/// Products below this many floating-point operations get no library candidate in max-autotune
/// (the executable would lose its CUDA graph for a kernel of a few microseconds).
pub const LIBRARY_MIN_TUNE_FLOPS: f64 = 1e8;
/// Algorithms of the heuristic max-autotune times.
pub const LIBRARY_CANDIDATES: usize = 4;

/// One step of an executable: a rendered kernel or a library product.
pub(crate) enum Step {
    /// A kernel launch.
    Kernel(Launch),
    /// A cuBLASLt product.
    Gemm(Box<GemmStep>),
    /// A cuDNN convolution and its epilogue kernel.
    Conv(Box<super::conv::ConvStep>),
}

/// A library product bound to the kernel's arguments.
pub(crate) struct GemmStep {
    plan: Arc<GemmPlan>,
    algo: usize,
    /// One device pointer per kernel argument (patched like a launch's).
    args: Vec<u64>,
    gemm: LibraryGemm,
    /// Split form: the epilogue kernel (the kernel's arguments, then the scratch) and the scratch
    /// the product goes to.
    epilogue: Option<(Launch, CudaBuffer)>,
}

impl Step {
    /// True when there is nothing to launch.
    pub(crate) fn is_empty(&self) -> bool {
        match self {
            Step::Kernel(l) => l.is_empty(),
            Step::Gemm(_) | Step::Conv(_) => false,
        }
    }

    /// Queues the step on `stream`.
    pub(crate) fn launch(&self, stream: &Stream) -> Result<(), BackendError> {
        match self {
            Step::Kernel(l) => l.launch(stream),
            Step::Gemm(g) => {
                let bias = g.gemm.bias.map_or(0, |i| g.args[i]);
                let residual = g.gemm.residual.map_or(0, |i| g.args[i]);
                let d = match &g.epilogue {
                    Some((_, scratch)) => scratch.ptr(),
                    None => g.args[g.gemm.out],
                };
                let scale = |i: usize| g.gemm.scales.get(i).map_or(0, |&a| g.args[a]);
                let (a, b) = (g.args[g.gemm.a.arg], g.args[g.gemm.b.arg]);
                g.plan.launch(stream, g.algo, a, b, bias, (scale(0), scale(1)), residual, d)?;
                match &g.epilogue {
                    Some((l, _)) if !l.is_empty() => l.launch(stream),
                    _ => Ok(()),
                }
            }
            Step::Conv(c) => c.launch(stream),
        }
    }

    /// Sets the device pointer of kernel argument `i` (`Err` when a tensor map built on it
    /// cannot be encoded again).
    pub(crate) fn set_arg(&mut self, i: usize, value: u64) -> Result<(), BackendError> {
        match self {
            Step::Kernel(l) => l.set_arg(i, value),
            Step::Gemm(g) => {
                g.args[i] = value;
                match &mut g.epilogue {
                    Some((l, _)) => l.set_arg(i, value),
                    None => Ok(()),
                }
            }
            Step::Conv(c) => c.set_arg(i, value),
        }
    }

    /// The kernel launch, unless this is a library call.
    pub(crate) fn kernel(&self) -> Option<&Launch> {
        match self {
            Step::Kernel(l) => Some(l),
            Step::Gemm(_) | Step::Conv(_) => None,
        }
    }
}

fn blas_op(o: &MatOperand) -> BlasOperand {
    BlasOperand { offset: o.offset as u64, s_batch: o.s_batch as u64, s_row: o.s_row as u64, s_col: o.s_col as u64 }
}

/// How the library runs a kernel.
pub(crate) enum Form {
    /// The library computes the whole kernel.
    Direct(LibraryGemm),
    /// The library computes the product; a rendered kernel the epilogue (why not direct).
    Split(Box<SplitGemm>, String),
}

impl Form {
    fn gemm(&self) -> &LibraryGemm {
        match self {
            Form::Direct(g) => g,
            Form::Split(s, _) => &s.gemm,
        }
    }
}

/// The cuBLASLt type of a dtype.
fn blas_type(d: DType) -> Result<BlasType, String> {
    Ok(match d {
        DType::F32 => BlasType::F32,
        DType::F16 => BlasType::F16,
        DType::BF16 => BlasType::BF16,
        DType::F8E4M3 => BlasType::F8E4M3,
        DType::F8E5M2 => BlasType::F8E5M2,
        d => return Err(format!("dtype {d}")),
    })
}

/// The library form of `k` with its cuBLASLt description on a device of compute capability
/// `sm`, or why the library cannot run it: direct where [`library_gemm`] recognizes the epilogue
/// and cuBLASLt takes its combination of types ([`crate::device::blas::supported`]), else split.
pub(crate) fn gemm_desc(k: &Kernel, sm: (u32, u32)) -> Result<(Form, GemmDesc), String> {
    match library_gemm(k) {
        Ok(g) => describe(Form::Direct(g), sm).or_else(|direct| split_desc(k, sm, &direct)),
        Err(direct) => split_desc(k, sm, &direct),
    }
}

/// [`gemm_desc`]'s split form of `k`, `direct` saying why the direct form was not taken.
pub(crate) fn split_desc(k: &Kernel, sm: (u32, u32), direct: &str) -> Result<(Form, GemmDesc), String> {
    let split = split_epilogue(k).map_err(|split| format!("{direct}; split: {split}"))?;
    describe(Form::Split(Box::new(split), direct.to_string()), sm)
}

/// The cuBLASLt description of library form `form` on a device of compute capability `sm`.
fn describe(form: Form, sm: (u32, u32)) -> Result<(Form, GemmDesc), String> {
    let g = form.gemm();
    let dtype = blas_type(g.dtype)?;
    if dtype.is_fp8() && sm < (8, 9) {
        return Err(format!("cuBLASLt's fp8 products need sm_89 or later, the device is sm_{}{}", sm.0, sm.1));
    }
    let desc = GemmDesc {
        batch: g.batch as u64,
        m: g.m as u64,
        n: g.n as u64,
        k: g.k as u64,
        a: blas_op(&g.a),
        b: blas_op(&g.b),
        dtype,
        out: blas_type(g.out_dtype)?,
        scale_a: !g.scales.is_empty(),
        scale_b: g.scales.len() > 1,
        // A library bias has D's type (`kernel::library`; the heuristic refused others).
        bias: g.bias.map(|_| blas_type(g.out_dtype)).transpose()?,
        residual: g.residual.is_some(),
        ld_out: g.n as u64,
        act: match g.activation {
            None => GemmAct::None,
            Some(Activation::Relu) => GemmAct::Relu,
            Some(Activation::GeluTanh) => GemmAct::Gelu,
        },
        tf32: g.tf32,
    };
    crate::device::blas::supported(&desc)?;
    Ok((form, desc))
}

/// The epilogue kernel a library step of `k` launches after the library call (a split form: a
/// cuDNN convolution, a cuBLASLt product whose epilogue the library cannot compute), if any; a
/// load renders and compiles these with its own kernels in one parallel batch, before it builds
/// the library steps one by one.
pub fn epilogue_kernel(k: &Kernel, sm: (u32, u32)) -> Option<Kernel> {
    if super::conv::is_conv(k) {
        return super::conv::conv_desc(k).ok().map(|(split, _)| split.epilogue);
    }
    match gemm_desc(k, sm).ok()?.0 {
        Form::Split(split, _) => Some(split.epilogue),
        Form::Direct(_) => None,
    }
}

/// Nanoseconds spent building library plans (cuBLASLt heuristics, cuDNN operation graphs and
/// execution plans) in this process, for `SINTER_LOG=compile`'s breakdown of a load.
static PLAN_NANOS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Adds the time since `t0` to the plans' total ([`plan_seconds`]).
pub(crate) fn count_plan_time(t0: std::time::Instant) {
    PLAN_NANOS.fetch_add(t0.elapsed().as_nanos() as u64, std::sync::atomic::Ordering::Relaxed);
}

/// Seconds spent building library plans in this process so far.
pub(crate) fn plan_seconds() -> f64 {
    PLAN_NANOS.load(std::sync::atomic::Ordering::Relaxed) as f64 * 1e-9
}

/// Why the library does not take `k` in `mode` on a device of compute capability `sm` (`Ok` when
/// it may: the product is large enough for `default`, any size for `max-autotune`).
pub(crate) fn library_allowed(k: &Kernel, mode: Mode, sm: (u32, u32)) -> Result<(), String> {
    library_wanted(k, mode, sm)?;
    if super::conv::is_conv(k) { crate::probe::cudnn() } else { crate::probe::cublaslt() }
}

/// [`library_allowed`] short of loading the library: the kernel's form and size only. Probing
/// loads libcublasLt or libcudnn (libcublasLt took about 50 ms on an H200 host, most of a
/// one-kernel program's cold compile), which a program without a library step never pays.
pub(crate) fn library_wanted(k: &Kernel, mode: Mode, sm: (u32, u32)) -> Result<(), String> {
    if super::conv::is_conv(k) {
        return super::conv::conv_wanted(k, mode).map(|_| ());
    }
    if mode == Mode::ReduceOverhead {
        return Err("reduce-overhead keeps every step in the patched CUDA graph".into());
    }
    let (form, _) = gemm_desc(k, sm)?;
    let g = form.gemm();
    large_enough(g.flops(), mode).or_else(|small| if skinny(g.m, g.n, g.k) { Ok(()) } else { Err(small) })
}

/// Whether an `m x n x k` product is skinny: at most `SKINNY_MAX` rows or columns and a reduction of at least
/// `SKINNY_MIN_K`: a classifier head or a decode step. The own CUDA-core template gives it a few
/// dozen blocks that each walk the whole `k` in 8-deep steps (measured on an H200: ResNet-50's
/// 8 x 1000 x 2048 classifier took 172 us, 0.2 TFLOP/s), where the library splits `k`; it takes
/// the library whatever its size.
pub fn skinny(m: usize, n: usize, k: usize) -> bool {
    m.min(n) <= SKINNY_MAX && k >= SKINNY_MIN_K
}

/// See [`skinny`].
const SKINNY_MAX: usize = 64;
/// See [`skinny`].
const SKINNY_MIN_K: usize = 512;

/// `SINTER_CUDA_LIBRARY=force`: every product and convolution the libraries can run goes to them,
/// past the profitability rules (tests).
pub(crate) fn forced() -> bool {
    std::env::var("SINTER_CUDA_LIBRARY").is_ok_and(|v| v == "force")
}

/// Whether a library call of `flops` is worth it in `mode` (`Err` says why not): at least
/// [`LIBRARY_MIN_FLOPS`] in `default`, [`LIBRARY_MIN_TUNE_FLOPS`] otherwise; any size under
/// `SINTER_CUDA_LIBRARY=force`.
pub(crate) fn large_enough(flops: f64, mode: Mode) -> Result<(), String> {
    let min = if mode == Mode::Default { LIBRARY_MIN_FLOPS } else { LIBRARY_MIN_TUNE_FLOPS };
    if flops < min && !forced() {
        return Err(format!("{flops:.2e} FLOP is below the library threshold of {min:.0e}"));
    }
    Ok(())
}

/// The tunings of a library's first `n` algorithms (at most [`LIBRARY_CANDIDATES`]).
pub(crate) fn library_tunings(n: usize) -> Vec<Tuning> {
    (0..n.min(LIBRARY_CANDIDATES) as u32).map(|i| Tuning { library: Some(i), ..Tuning::default() }).collect()
}

/// Builds the library step of `k` with heuristic algorithm `algo`, bound to `args` (split form:
/// its epilogue kernel compiled through `backend`).
pub(crate) fn build(
    backend: &super::CudaBackend,
    k: &Kernel,
    tuning: &Tuning,
    args: &[u64],
    cubins: &CubinCache,
    stream: &Arc<Stream>,
) -> Result<LoadedKernel, BackendError> {
    if super::conv::is_conv(k) {
        return super::conv::build(backend, k, tuning, args, cubins, stream);
    }
    let unsupported = |what: String| unsupported(k, what);
    let algo = tuning.library.unwrap_or(0) as usize;
    let (mut form, mut desc) = gemm_desc(k, backend.cuda_caps.sm).map_err(unsupported)?;
    let t = std::time::Instant::now();
    let plan = match GemmPlan::shared(stream, &desc) {
        // A direct form the heuristic has no algorithm for (a combination of epilogue and types
        // this cuBLASLt lacks) runs split: the plain product, then the epilogue kernel.
        Err(BackendError::Unsupported { what, .. }) if matches!(form, Form::Direct(_)) => {
            tracing::info!(target: "sinter::cuda", "{}: split, cuBLASLt refused the direct form: {what}", k.name);
            (form, desc) = split_desc(k, backend.cuda_caps.sm, &what).map_err(unsupported)?;
            GemmPlan::shared(stream, &desc)?
        }
        r => r?,
    };
    count_plan_time(t);
    if algo >= plan.algos() {
        return Err(BackendError::Render {
            kernel: k.name.clone(),
            msg: format!("cuBLASLt offers {} algorithms, not {}", plan.algos(), algo + 1),
        });
    }
    let gemm = form.gemm().clone();
    let epi = match &form {
        Form::Split(_, why) => format!(
            "none (not a library epilogue: {why}); the epilogue is the kernel below, reading the product from a \
             scratch buffer"
        ),
        Form::Direct(_) => {
            let mut terms = vec!["acc".to_string()];
            if gemm.bias.is_some() {
                terms.push(format!("bias ({:?})", desc.bias.unwrap_or(desc.out)));
            }
            if gemm.residual.is_some() {
                terms.push("residual (C, beta 1)".into());
            }
            let sum = terms.join(" + ");
            gemm.activation.map_or(sum.clone(), |a| format!("{}({sum})", a.name()))
        }
    };
    let mut source = format!(
        "// sinter kernel {}: {}\n// cuBLASLt product (library call, no source): batch {} x m {} x n {} x k {}, {:?} operands, \
         {:?} output, {} scale pointers, f32 accumulation, epilogue {epi}, heuristic algorithm {} of {}\n",
        k.name,
        k.ops.join(", "),
        gemm.batch,
        gemm.m,
        gemm.n,
        gemm.k,
        desc.dtype,
        desc.out,
        gemm.scales.len(),
        algo + 1,
        plan.algos()
    );
    let (epilogue, kind) = match form {
        Form::Direct(_) => (None, "direct"),
        Form::Split(split, _) => {
            let bytes = (gemm.batch * gemm.m * gemm.n * gemm.out_dtype.size_bytes()) as u64;
            let (launch, scratch, esource) = epilogue_step(backend, k, &split.epilogue, bytes, args, cubins, stream)?;
            source.push('\n');
            source.push_str(&esource);
            (Some((launch, scratch)), "split")
        }
    };
    let strategy = format!("cublaslt {kind} algo {}/{}", algo + 1, plan.algos());
    let tf32 = desc.dtype == BlasType::F32 && desc.tf32;
    let step = Step::Gemm(Box::new(GemmStep { plan, algo, args: args.to_vec(), gemm, epilogue }));
    Ok(library_loaded(k, tuning, source, strategy, tf32, step))
}

/// Builds the plans of `kernels`' library steps (heuristic algorithm 0: `default` mode's) on
/// `stream` and holds them, so that the steps built later find them shared instead of asking the
/// library then. A load calls this while NVRTC compiles on other threads: the plans were a cold
/// compile's largest serial part after NVRTC (GPT-2 small in bf16 on an H200: NVRTC 0.285 s, 49
/// plans 0.166 s, session 25). The plans are only held (the shared ones live while a holder
/// does); one that fails is left to the step's build, which reports it.
pub(crate) fn prepare_plans<'a>(
    kernels: impl Iterator<Item = &'a Kernel>,
    stream: &Arc<Stream>,
    sm: (u32, u32),
) -> Vec<Arc<dyn std::any::Any>> {
    kernels
        .filter_map(|k| {
            let t = std::time::Instant::now();
            let plan = if super::conv::is_conv(k) {
                let (_, desc) = super::conv::conv_desc(k).ok()?;
                let conv: Arc<dyn std::any::Any> = crate::device::dnn::ConvPlan::shared(stream, &desc, 0).ok()?;
                Some(conv)
            } else {
                let (_, desc) = gemm_desc(k, sm).ok()?;
                let gemm: Arc<dyn std::any::Any> = GemmPlan::shared(stream, &desc).ok()?;
                Some(gemm)
            };
            count_plan_time(t);
            plan
        })
        .collect()
}

/// The refusal of a library step for kernel `k`: `what` the library cannot take, the kernel named
/// (the loader then builds the own template instead).
pub(crate) fn unsupported(k: &Kernel, what: String) -> BackendError {
    BackendError::Unsupported { backend: "cuda".into(), what: format!("kernel {}: {what}", k.name) }
}

/// A kernel around a library step of `k` (`epilogue`: `k`'s arguments, then a scratch: the
/// split form's epilogue reading what the library writes, or a convolution's weight permutation
/// writing what it reads), compiled through `backend` and bound to `args` plus a fresh scratch of
/// `bytes`: its launch, the scratch, and its source.
pub(crate) fn epilogue_step(
    backend: &super::CudaBackend,
    k: &Kernel,
    epilogue: &Kernel,
    bytes: u64,
    args: &[u64],
    cubins: &CubinCache,
    stream: &Arc<Stream>,
) -> Result<(Launch, CudaBuffer, String), BackendError> {
    let scratch = stream.alloc(bytes.max(4))?;
    let mut eargs = args.to_vec();
    eargs.push(scratch.ptr());
    let loaded =
        backend.build_kernel_with(epilogue, &Tuning::default(), &backend.cpp_caps(), &eargs, cubins, stream)?;
    let Step::Kernel(launch) = loaded.launch else {
        return Err(BackendError::Render { kernel: k.name.clone(), msg: "the epilogue is not a kernel".into() });
    };
    Ok((launch, scratch, loaded.rendered.source))
}

/// The loaded form of library step `step` for kernel `k`: no code of its own, `source` its
/// description (and any epilogue kernel's source), `strategy` what profiles show, TF32 marked.
/// The library reports nothing of its kernels (no registers, shared memory or spills; a split
/// form's epilogue kernel has its own, but they would describe the wrong kernel).
pub(crate) fn library_loaded(
    k: &Kernel,
    tuning: &Tuning,
    source: String,
    strategy: String,
    tf32: bool,
    step: Step,
) -> LoadedKernel {
    let rendered = Rendered {
        name: entry_name(&k.name),
        source,
        grid: [1, 1, 1],
        block: [1, 1, 1],
        dynamic_shared_bytes: 0,
        split: None,
        strategy,
        scratch_bytes: 0,
        tensor_maps: Vec::new(),
        compute: tf32.then_some("tf32"),
        params: Vec::new(),
    };
    LoadedKernel {
        name: k.name.clone(),
        rendered,
        tuning: tuning.clone(),
        launch: step,
        resources: None,
        _scratch: None,
    }
}

/// The library candidates max-autotune times for `k` on a device of compute capability `sm`
/// (none when the library cannot run it).
pub(crate) fn candidates(k: &Kernel, stream: &Arc<Stream>, sm: (u32, u32)) -> Vec<Tuning> {
    if super::conv::is_conv(k) {
        return super::conv::candidates(k, stream);
    }
    if let Err(why) = library_allowed(k, Mode::MaxAutotune, sm) {
        tracing::debug!(target: "sinter::autotune", "{}: no cuBLASLt candidate: {why}", k.name);
        return Vec::new();
    }
    let Ok((_, desc)) = gemm_desc(k, sm) else { return Vec::new() };
    match GemmPlan::new(stream, &desc) {
        Ok(plan) => library_tunings(plan.algos()),
        Err(e) => {
            tracing::debug!(target: "sinter::autotune", "{}: no cuBLASLt candidate: {e}", k.name);
            Vec::new()
        }
    }
}
