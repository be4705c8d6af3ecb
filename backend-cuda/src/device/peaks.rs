//! Matrix-product peaks per compute type, measured on cuBLASLt: the "measured peak" every
//! contraction kernel's achieved rate is compared with (`sinter calibrate`, issue 11).
//!
//! Contract of [`Device::matmul_peaks`]: for each compute type the device has ([`peak_specs`]:
//! exact f32 everywhere; f16 on sm_70+; bf16 and TF32 on sm_80+; fp8 e4m3 on sm_89+), one square
//! product of the largest size in [`SIZES`] that fits a quarter of the free memory
//! ([`peak_size`]), operands random in `±[0.25, 2)` (a product of zeros runs measurably faster
//! and is no peak), run with every algorithm cuBLASLt's heuristic offers: warm-ups, then
//! [`ITERS`] runs timed with events one by one; the peak is the best algorithm's median rate
//! (`2 n^3` FLOP per run). Each [`MatmulPeak`] names its method (library, shape, layout, output
//! type, algorithms, statistics). A compute type the library has no algorithm for is left out
//! (logged), not estimated. What it allocates is freed and the pool's cache emptied.
//!
//! The layouts are those of the products users time against: row-major operands (`a @ b` of
//! contiguous tensors) for f32/TF32/f16/bf16 with D of the operands' type; for fp8 the "TN"
//! layout and bf16 output with per-tensor scales of 1, as `torch._scaled_mm`.

use super::blas::{BlasOperand, BlasType, GemmDesc, GemmPlan, WORKSPACE_BYTES};
use super::{Device, Launch, Stream, TimingEvents};
use sinter_core::backend::{BackendError, MatmulPeak};

/// Timed runs per algorithm (after [`WARMUP`] untimed ones).
pub const ITERS: usize = 10;
/// Untimed runs per algorithm before the timed ones.
pub const WARMUP: usize = 3;
/// Product sizes tried, largest first (`n x n x n`).
pub const SIZES: [u64; 3] = [8192, 4096, 2048];

/// One compute type to measure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeakSpec {
    /// The compute-ceiling name (`sinter_core::profile::COMPUTE_NAMES`).
    pub compute: &'static str,
    /// Operand type.
    pub dtype: BlasType,
    /// Output type.
    pub out: BlasType,
    /// f32 operands multiplied in TF32.
    pub tf32: bool,
    /// Oldest compute capability that has it.
    pub min_sm: (u32, u32),
}

/// Every compute type [`Device::matmul_peaks`] knows, oldest hardware first.
pub const SPECS: [PeakSpec; 5] = [
    PeakSpec { compute: "f32", dtype: BlasType::F32, out: BlasType::F32, tf32: false, min_sm: (0, 0) },
    PeakSpec { compute: "f16", dtype: BlasType::F16, out: BlasType::F16, tf32: false, min_sm: (7, 0) },
    PeakSpec { compute: "bf16", dtype: BlasType::BF16, out: BlasType::BF16, tf32: false, min_sm: (8, 0) },
    PeakSpec { compute: "tf32", dtype: BlasType::F32, out: BlasType::F32, tf32: true, min_sm: (8, 0) },
    PeakSpec { compute: "f8e4m3", dtype: BlasType::F8E4M3, out: BlasType::BF16, tf32: false, min_sm: (8, 9) },
];

/// The compute types a device of compute capability `sm` has.
pub fn peak_specs(sm: (u32, u32)) -> Vec<PeakSpec> {
    SPECS.into_iter().filter(|s| sm >= s.min_sm).collect()
}

/// The largest size of [`SIZES`] whose operands, output and workspace fit in a quarter of
/// `free_bytes`; `None` when not even the smallest does.
pub fn peak_size(spec: &PeakSpec, free_bytes: u64) -> Option<u64> {
    SIZES.into_iter().find(|&n| {
        let bytes = n * n * (2 * spec.dtype.bytes() + spec.out.bytes()) + WORKSPACE_BYTES;
        bytes <= free_bytes / 4
    })
}

/// The product measured for `spec` at size `n` (see the module docs for the layouts).
pub fn peak_desc(spec: &PeakSpec, n: u64) -> GemmDesc {
    let fp8 = spec.dtype.is_fp8();
    let dense = GemmDesc::dense(n, n, n, spec.dtype);
    // fp8: B k-contiguous (torch's column-major second operand), the only layout cuBLASLt takes.
    let b = if fp8 { BlasOperand { offset: 0, s_batch: 0, s_row: 1, s_col: n } } else { dense.b };
    GemmDesc { b, out: spec.out, scale_a: fp8, scale_b: fp8, tf32: spec.tf32, ..dense }
}

/// `(bits, exponent shift, lowest exponent field)` of the operand fill: sign in the top bit, the
/// exponent field `lowest + {0, 1, 2}` at the shift (values `2^-2 ..< 2^1`, never an infinity or
/// NaN pattern), random mantissa bits below it.
pub fn fill_params(t: BlasType) -> (u32, u32, u32) {
    match t {
        BlasType::F32 => (32, 23, 127 - 2),
        BlasType::BF16 => (16, 7, 127 - 2),
        BlasType::F16 => (16, 10, 15 - 2),
        BlasType::F8E4M3 => (8, 3, 7 - 2),
        BlasType::F8E5M2 => (8, 2, 15 - 2),
    }
}

/// The fill kernel (self-contained CUDA C++, no headers): 32-bit words of packed random elements.
pub const FILL_SOURCE: &str = r#"
// Every parameter is 64-bit: the launch layer passes each argument as 8 bytes.
extern "C" __global__ void sinter_peak_fill(unsigned* __restrict__ dst, unsigned long long words,
                                            unsigned long long bits64, unsigned long long shift64,
                                            unsigned long long lo64, unsigned long long seed64) {
    unsigned long long w = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (w >= words) return;
    unsigned bits = (unsigned)bits64, exp_shift = (unsigned)shift64, exp_lo = (unsigned)lo64, seed = (unsigned)seed64;
    unsigned per = 32u / bits;
    unsigned mant_mask = (1u << exp_shift) - 1u;
    unsigned out = 0u;
    for (unsigned e = 0; e < per; ++e) {
        unsigned long long i = w * per + e;
        unsigned h = ((unsigned)i ^ (unsigned)(i >> 32)) * 0x9E3779B1u + seed;
        h ^= h >> 16; h *= 0x85EBCA6Bu; h ^= h >> 13; h *= 0xC2B2AE35u; h ^= h >> 16;
        unsigned v = ((h & 1u) << (bits - 1u)) | ((exp_lo + (h >> 1) % 3u) << exp_shift) | ((h >> 3) & mant_mask);
        out |= v << (e * bits);
    }
    dst[w] = out;
}
"#;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The median milliseconds of each of `plan`'s algorithms on `stream`, A, B and D at `ptrs` (and
/// fp8 scales at `scales`): [`WARMUP`] untimed runs, then one run between each pair of `events`
/// (`None` for an algorithm whose warm-ups fail). [`Device::matmul_peaks`] and the `gemm_algos`
/// example time algorithms this way.
pub fn time_algorithms(
    stream: &Stream,
    plan: &GemmPlan,
    (a, b, d): (u64, u64, u64),
    scales: (u64, u64),
    events: &TimingEvents,
) -> Result<Vec<Option<f64>>, BackendError> {
    let mut out = Vec::with_capacity(plan.algos());
    for algo in 0..plan.algos() {
        let run = || plan.launch(stream, algo, a, b, 0, scales, 0, d);
        if let Err(e) = (0..WARMUP).try_for_each(|_| run()).and_then(|_| stream.synchronize("gemm warm-up")) {
            tracing::debug!(target: "sinter::cuda", "algorithm {algo} of {:?} failed: {e}", plan.desc());
            out.push(None);
            continue;
        }
        for i in 0..events.len() {
            events.record(i, false, stream)?;
            run()?;
            events.record(i, true, stream)?;
        }
        let times = (0..events.len()).map(|i| events.elapsed_ms(i, i, true)).collect::<Result<Vec<_>, _>>()?;
        out.push(Some(median(times)));
    }
    Ok(out)
}

impl Device {
    /// Measures the matrix-product peak of every compute type the device has on cuBLASLt (see
    /// the module docs). `Err` when cuBLASLt or NVRTC is missing or a device call fails.
    pub fn matmul_peaks(&self) -> Result<Vec<MatmulPeak>, BackendError> {
        crate::probe::cublaslt()
            .map_err(|why| BackendError::Unsupported { backend: "cuda".into(), what: format!("cuBLASLt: {why}") })?;
        let cc = self.info().cc;
        let target = crate::nvrtc::Target::sm(cc);
        let cubin = crate::nvrtc::compile("sinter_peak_fill", FILL_SOURCE, &target).map_err(|e| {
            BackendError::Compile { kernel: "sinter_peak_fill".into(), log: e.to_string(), code: FILL_SOURCE.into() }
        })?;
        let fill = self.load_function(&cubin.image, "sinter_peak_fill")?;
        let stream = self.new_stream()?;
        let events = TimingEvents::new(self, ITERS)?;
        let mut peaks = Vec::new();
        for spec in peak_specs(cc) {
            let (free, _) = self.mem_info()?;
            let Some(n) = peak_size(&spec, free) else {
                tracing::warn!(target: "sinter::cuda", "no {} peak: {free} bytes free is too little", spec.compute);
                continue;
            };
            let desc = peak_desc(&spec, n);
            let plan = match GemmPlan::new(&stream, &desc) {
                Ok(p) => p,
                Err(BackendError::Unsupported { what, .. }) => {
                    tracing::warn!(target: "sinter::cuda", "no {} peak: {what}", spec.compute);
                    continue;
                }
                Err(e) => return Err(e),
            };
            let a = stream.alloc(n * n * spec.dtype.bytes())?;
            let b = stream.alloc(n * n * spec.dtype.bytes())?;
            let d = stream.alloc(n * n * spec.out.bytes())?;
            let (bits, shift, lo) = fill_params(spec.dtype);
            for (buf, seed) in [(&a, 1u64), (&b, 2)] {
                let words = n * n * spec.dtype.bytes() / 4;
                let blocks = u32::try_from(words.div_ceil(256))
                    .map_err(|_| BackendError::Device(format!("peak operand of {words} words")))?;
                let launch = Launch::new(
                    self,
                    fill.clone(),
                    "sinter_peak_fill",
                    [blocks, 1, 1],
                    [256, 1, 1],
                    0,
                    &[buf.ptr(), words, bits as u64, shift as u64, lo as u64, seed],
                )?;
                launch.launch(&stream)?;
            }
            // Per-tensor scales of 1 (fp8, as `torch._scaled_mm`); unused otherwise.
            let one = self.upload_bytes(&1f32.to_le_bytes(), "peak scale")?;
            let scales = (one.ptr(), one.ptr());
            stream.synchronize("peak operands")?;
            let flops = 2.0 * (n as f64).powi(3);
            let mut best: Option<(f64, usize)> = None;
            for (algo, ms) in
                time_algorithms(&stream, &plan, (a.ptr(), b.ptr(), d.ptr()), scales, &events)?.into_iter().enumerate()
            {
                let Some(ms) = ms else { continue };
                let tflops = flops / (ms * 1e-3) / 1e12;
                tracing::debug!(target: "sinter::cuda", "{} peak: algorithm {algo}: {tflops:.1} TFLOP/s", spec.compute);
                if tflops.is_finite() && best.is_none_or(|(t, _)| tflops > t) {
                    best = Some((tflops, algo));
                }
            }
            stream.synchronize("peak products")?;
            drop((a, b, d, one, plan));
            // Back to the driver, so the next compute type's size sees the memory as free.
            self.pool().empty_cache()?;
            let Some((tflops, algo)) = best else {
                tracing::warn!(target: "sinter::cuda", "no {} peak: every algorithm failed", spec.compute);
                continue;
            };
            peaks.push(MatmulPeak { compute: spec.compute.to_string(), tflops, method: method(&spec, &desc, algo) });
        }
        drop(stream);
        self.pool().empty_cache()?;
        Ok(peaks)
    }
}

/// The method sentence of a peak: library, shape, layout, types, accumulation, statistics.
fn method(spec: &PeakSpec, g: &GemmDesc, algo: usize) -> String {
    let layout = if g.b.s_row == 1 { "A row-major, B k-contiguous (TN)" } else { "row-major A and B" };
    let math = if spec.tf32 { "TF32 tensor cores (CUBLAS_COMPUTE_32F_FAST_TF32)" } else { "f32 accumulation" };
    let scales = if g.scale_a { ", per-tensor scales of 1" } else { "" };
    format!(
        "cuBLASLt {n}x{n}x{n} {:?} operands, {:?} output, {layout}, {math}{scales}; operands random in ±[0.25, 2); \
         best of the heuristic's algorithms (algorithm {}), median of {ITERS} event-timed runs after {WARMUP} warm-ups",
        g.dtype,
        g.out,
        algo + 1,
        n = g.m,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_architecture_measures_what_it_has() {
        let names = |sm| peak_specs(sm).iter().map(|s| s.compute).collect::<Vec<_>>();
        assert_eq!(names((6, 1)), ["f32"]);
        assert_eq!(names((7, 5)), ["f32", "f16"]);
        assert_eq!(names((8, 0)), ["f32", "f16", "bf16", "tf32"]);
        assert_eq!(names((8, 9)), ["f32", "f16", "bf16", "tf32", "f8e4m3"]);
        assert_eq!(names((9, 0)), ["f32", "f16", "bf16", "tf32", "f8e4m3"]);
        // Every name is a compute type the calibration file accepts.
        for s in SPECS {
            assert!(sinter_core::profile::COMPUTE_NAMES.contains(&s.compute), "{}", s.compute);
        }
    }

    #[test]
    fn every_peak_product_is_one_cublaslt_takes() {
        for spec in SPECS {
            for n in SIZES {
                let g = peak_desc(&spec, n);
                super::super::blas::supported(&g).unwrap_or_else(|e| panic!("{} {n}: {e}", spec.compute));
                assert_eq!((g.m, g.n, g.k, g.batch), (n, n, n, 1));
                assert_eq!(g.tf32, spec.compute == "tf32");
            }
        }
        let g = peak_desc(&SPECS[3], 8192);
        assert_eq!(g.compute_type(), cudarc::cublaslt::sys::cublasComputeType_t::CUBLAS_COMPUTE_32F_FAST_TF32);
        let m = method(&SPECS[4], &peak_desc(&SPECS[4], 8192), 0);
        assert!(m.contains("cuBLASLt 8192x8192x8192 F8E4M3 operands, BF16 output") && m.contains("(TN)"), "{m}");
    }

    #[test]
    fn sizes_shrink_to_fit_a_quarter_of_free_memory() {
        let f32 = &SPECS[0];
        // 8192^2 f32 x 3 = 768 MiB, plus the 32 MiB workspace.
        let need = |n: u64| 4 * (n * n * 12 + WORKSPACE_BYTES);
        assert_eq!(peak_size(f32, 80 << 30), Some(8192));
        assert_eq!(peak_size(f32, need(8192)), Some(8192));
        assert_eq!(peak_size(f32, need(8192) - 4), Some(4096));
        assert_eq!(peak_size(f32, need(2048) - 4), None);
        // fp8 operands with a bf16 output need 4 bytes per element of the three.
        let fp8 = |n: u64| 4 * (n * n * 4 + WORKSPACE_BYTES);
        assert_eq!(peak_size(&SPECS[4], fp8(8192)), Some(8192));
        assert_eq!(peak_size(&SPECS[4], fp8(8192) - 4), Some(4096));
    }

    #[test]
    fn fill_patterns_are_finite_values_between_a_quarter_and_two() {
        // (bias, exponent bits) of each format; the fill's exponent fields must stay inside
        // [bias - 2, bias], below the all-ones (infinity / NaN) field.
        for (t, bias, exp_bits) in [
            (BlasType::F32, 127, 8),
            (BlasType::BF16, 127, 8),
            (BlasType::F16, 15, 5),
            (BlasType::F8E4M3, 7, 4),
            (BlasType::F8E5M2, 15, 5),
        ] {
            let (bits, shift, lo) = fill_params(t);
            assert_eq!(bits as u64, t.bytes() * 8, "{t:?}");
            assert_eq!(bits - 1 - shift, exp_bits, "{t:?}: sign, exponent and mantissa fill the element");
            assert_eq!((lo, lo + 2), (bias - 2, bias), "{t:?}");
            // e4m3fn's only NaN is exponent 15 with mantissa 7; the fill never reaches 15.
            assert!(lo + 2 < (1 << exp_bits) - 1, "{t:?}");
            assert_eq!(32 % bits, 0);
        }
    }

    #[test]
    fn the_fill_kernel_compiles() {
        match crate::nvrtc::compile("sinter_peak_fill", FILL_SOURCE, &crate::nvrtc::Target::hopper()) {
            Ok(c) => assert!(!c.image.is_empty()),
            Err(crate::nvrtc::NvrtcError::Unavailable(why)) => {
                assert!(std::env::var("SINTER_REQUIRE_NVRTC").is_err(), "NVRTC required: {why}");
                eprintln!("skipped: NVRTC is not available: {why}");
            }
            Err(e) => panic!("{e}"),
        }
    }
}
