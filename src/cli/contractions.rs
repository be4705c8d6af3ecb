//! What `sinter bench` and `sinter profile` print and write about contraction kernels (issue 11):
//! per matmul, convolution and attention kernel its registers, shared memory and spills, the
//! compute type its products ran in, its achieved TFLOP/s and that rate's share of the device's
//! measured peak for the same compute type (`sinter calibrate`); and the device ceilings both
//! commands rate against ([`load_ceilings`]).

use serde::Serialize;
use sinter::core::backend::Backend as BackendTrait;
use sinter::core::compile::CompiledGraph;
use sinter::core::profile::{Ceilings, KernelProfile, TimeStats};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The device ceilings: the cached calibration (`sinter calibrate`) when present and valid, else
/// the quick copy measurement (`measured_copy`) with no matmul peaks. A calibration file that
/// exists but cannot be read, parsed or trusted is named in a warning and not used.
pub fn load_ceilings(backend: &Arc<dyn BackendTrait>, measured_copy: Option<f64>) -> Ceilings {
    let key = Ceilings::adapter_key(&[backend.name(), &backend.device_name()]);
    match Ceilings::load(&key) {
        Ok(Some(c)) => return c,
        Ok(None) => {}
        Err(e) => eprintln!("warning: ignoring the calibration file: {e}"),
    }
    Ceilings {
        copy_gbps: measured_copy.unwrap_or(0.0),
        matmul_tflops: BTreeMap::new(),
        matmul_method: BTreeMap::new(),
        launch_overhead_us: 0.0,
        measured: measured_copy.is_some(),
    }
}

/// The line printed when the ceilings hold no matmul peak (shares of peak are then absent).
pub fn no_peaks_note(c: &Ceilings, backend: &str) -> Option<String> {
    c.matmul_tflops.is_empty().then(|| {
        format!("# no measured matmul peaks for this device: run `sinter calibrate --backend {backend}` (shares of peak left out)")
    })
}

/// One contraction kernel as `sinter bench --json` writes it (`results[].contractions[]`).
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct ContractionRow {
    /// Kernel name.
    pub kernel: String,
    /// `matmul`, `conv` or `attention`.
    pub kind: String,
    /// The compute type of its products (`bf16`, `f16`, `f8e4m3`, `f32`, `tf32`).
    pub compute: String,
    /// How the backend ran it (template and tile, or the library call).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub strategy: Option<String>,
    /// Registers per thread (none for library calls).
    pub registers: Option<u32>,
    /// Shared memory per block, bytes.
    pub shared_mem_bytes: Option<u64>,
    /// Bytes per thread spilled to local memory.
    pub spill_bytes: Option<u32>,
    /// Median device time per launch, ms.
    pub ms: Option<f64>,
    /// FLOPs per launch over the median time, TFLOP/s.
    pub achieved_tflops: Option<f64>,
    /// The measured peak it is compared with, TFLOP/s.
    pub peak_tflops: Option<f64>,
    /// The ceilings entry of that peak (`compute`, or its fallback).
    pub peak_compute: Option<String>,
    /// `achieved_tflops / peak_tflops`.
    pub peak_share: Option<f64>,
}

impl ContractionRow {
    /// The row of a rated kernel profile; `None` for kernels that are no contraction.
    pub fn of(k: &KernelProfile) -> Option<ContractionRow> {
        let c = k.contraction.as_ref()?;
        Some(ContractionRow {
            kernel: k.name.clone(),
            kind: c.kind.name().to_string(),
            compute: c.compute.clone(),
            strategy: k.strategy.clone(),
            registers: k.registers,
            shared_mem_bytes: k.shared_mem_bytes,
            spill_bytes: k.spill_bytes,
            ms: k.median_ns().map(|t| t / 1e6),
            achieved_tflops: c.achieved_tflops,
            peak_tflops: c.peak_tflops,
            peak_compute: c.peak_compute.clone(),
            peak_share: c.peak_share,
        })
    }
}

/// The contraction rows of a compiled graph timed by the caller: `kernel_ns` holds each kernel's
/// device times (ns, any number of runs; the median is used), rated against `ceilings`.
pub fn records(c: &CompiledGraph, kernel_ns: &BTreeMap<String, Vec<f64>>, ceilings: &Ceilings) -> Vec<ContractionRow> {
    c.kernel_profiles()
        .into_iter()
        .filter(|k| k.contraction.is_some())
        .filter_map(|mut k| {
            if let Some(t) = kernel_ns.get(&k.name) {
                k.times_ns = t.clone();
                k.stats = TimeStats::from_samples(t);
            }
            k.rate(ceilings);
            ContractionRow::of(&k)
        })
        .collect()
}

/// A rate with three significant digits or more (`812`, `52.3`, `0.0500`).
pub fn fmt_tflops(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.0}")
    } else if x >= 1.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.4}")
    }
}

/// The line naming the measured peaks (`# measured matmul peaks (TFLOP/s): bf16 812, f32 52.3`).
pub fn peaks_line(c: &Ceilings) -> String {
    let peaks: Vec<String> = c.matmul_tflops.iter().map(|(k, v)| format!("{k} {}", fmt_tflops(*v))).collect();
    format!("# measured matmul peaks (TFLOP/s): {}", peaks.join(", "))
}

/// The indented table lines under a result (none without contraction kernels).
pub fn table(rows: &[ContractionRow]) -> Vec<String> {
    if rows.is_empty() {
        return Vec::new();
    }
    let opt = |v: Option<String>| v.unwrap_or_else(|| "-".into());
    let mut lines = vec![format!(
        "#   {:<34} {:<9} {:<7} {:>5} {:>8} {:>7} {:>10} {:>9} {:>14}  strategy",
        "contraction", "kind", "compute", "regs", "smem B", "spill B", "ms", "TFLOP/s", "% of peak"
    )];
    for r in rows {
        let share = match (r.peak_share, r.peak_tflops, &r.peak_compute) {
            (Some(s), Some(p), Some(pc)) => format!("{:.1}% {pc} {}", s * 100.0, fmt_tflops(p)),
            _ => "-".into(),
        };
        lines.push(format!(
            "#   {:<34} {:<9} {:<7} {:>5} {:>8} {:>7} {:>10} {:>9} {:>14}  {}",
            r.kernel,
            r.kind,
            r.compute,
            opt(r.registers.map(|x| x.to_string())),
            opt(r.shared_mem_bytes.map(|x| x.to_string())),
            opt(r.spill_bytes.map(|x| x.to_string())),
            opt(r.ms.map(|x| format!("{x:.4}"))),
            opt(r.achieved_tflops.map(fmt_tflops)),
            share,
            r.strategy.as_deref().unwrap_or("-"),
        ));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use sinter::core::profile::{Contraction, ContractionKind};

    #[test]
    fn rows_carry_resources_rates_and_the_share_of_the_named_peak() {
        let mut c = Ceilings { copy_gbps: 3000.0, measured: true, ..Ceilings::default() };
        c.matmul_tflops.insert("bf16".into(), 800.0);
        c.matmul_method.insert("bf16".into(), "cuBLASLt".into());
        let mut k = KernelProfile::new("k0_matmul")
            .flops(2e12)
            .registers(168)
            .shared_mem_bytes(98_304)
            .spill_bytes(0)
            .strategy("mma 128x256x64")
            .with_contraction(Some(Contraction::new(ContractionKind::Matmul, "bf16")));
        k.stats = TimeStats::from_samples(&[4e6, 5e6, 4e6]);
        k.rate(&c);
        let r = ContractionRow::of(&k).unwrap();
        assert_eq!((r.registers, r.shared_mem_bytes, r.spill_bytes), (Some(168), Some(98_304), Some(0)));
        assert_eq!((r.ms, r.achieved_tflops, r.peak_tflops), (Some(4.0), Some(500.0), Some(800.0)));
        assert_eq!(r.peak_share, Some(0.625));
        let lines = table(&[r]);
        assert!(lines[1].contains("62.5% bf16 800") && lines[1].contains("mma 128x256x64"), "{}", lines[1]);
        assert!(ContractionRow::of(&KernelProfile::new("k1_add")).is_none());
        assert!(table(&[]).is_empty());
        // Without peaks the note says how to get them.
        assert!(no_peaks_note(&Ceilings::default(), "cuda").unwrap().contains("sinter calibrate --backend cuda"));
        assert_eq!(no_peaks_note(&c, "cuda"), None);
        assert_eq!(peaks_line(&c), "# measured matmul peaks (TFLOP/s): bf16 800");
        assert_eq!((fmt_tflops(52.34), fmt_tflops(0.05)), ("52.3".to_string(), "0.0500".to_string()));
    }
}
