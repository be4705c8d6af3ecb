//! Roofline analysis: a [`Verdict`] per kernel (compute-, bandwidth- or overhead-bound) from its
//! bytes, FLOPs and device time against the device's [`Ceilings`], and run-level figures (GPU-busy
//! share, launch gaps, the dominant kernel).

use super::{Ceilings, KernelProfile, Profile};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// Roofline: a kernel shorter than this many launch overheads is overhead-bound.
pub const OVERHEAD_TIME_FACTOR: f64 = 5.0;
/// Roofline: a kernel reaching less than this fraction of both ceilings ...
pub const LOW_UTILIZATION: f64 = 0.10;
/// Roofline: ... while running shorter than this (ns) is overhead-bound (too little work).
pub const SMALL_KERNEL_NS: f64 = 20_000.0;

/// Which regime limits a kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Arithmetic intensity above the ridge point: limited by the compute peak.
    ComputeBound,
    /// Intensity below the ridge point: limited by memory bandwidth.
    BandwidthBound,
    /// Too short or too small to use the device: launch cost and latency dominate.
    OverheadBound,
    /// Not enough information (no device time, or no ceilings).
    Unknown,
}

impl Verdict {
    /// Human label (`bandwidth-bound`).
    pub fn label(self) -> &'static str {
        match self {
            Verdict::ComputeBound => "compute-bound",
            Verdict::BandwidthBound => "bandwidth-bound",
            Verdict::OverheadBound => "overhead-bound",
            Verdict::Unknown => "unknown",
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// Roofline analysis of one kernel.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KernelAnalysis {
    /// Index into [`Profile::kernels`].
    pub kernel: usize,
    /// Median device time per launch, ns.
    pub time_ns: Option<f64>,
    /// Total device time over all launches, ns.
    pub total_ns: f64,
    /// Share of the run's total kernel time, 0..=1.
    pub share: f64,
    /// FLOP per byte moved (`None` when no bytes are moved).
    pub intensity: Option<f64>,
    /// Achieved bandwidth at the median time, GB/s.
    pub achieved_gbps: Option<f64>,
    /// Achieved compute rate at the median time, TFLOP/s.
    pub achieved_tflops: Option<f64>,
    /// Achieved bandwidth over the copy ceiling.
    pub bandwidth_fraction: Option<f64>,
    /// Achieved compute over the peak for the kernel's dtype.
    pub compute_fraction: Option<f64>,
    /// The verdict.
    pub verdict: Verdict,
    /// Why, in one sentence with the numbers.
    pub reason: String,
}

/// Roofline analysis of a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Analysis {
    /// One entry per kernel, in kernel order.
    pub kernels: Vec<KernelAnalysis>,
    /// Sum of all kernels' device time, ns.
    pub kernel_total_ns: f64,
    /// Sum over iterations of (last kernel end - first kernel start), ns.
    pub device_window_ns: f64,
    /// Share of that window in which some kernel runs; `None` without device times.
    pub gpu_busy_share: Option<f64>,
    /// Idle device time between kernels inside iterations, ns (the launch-gap total).
    pub launch_gap_total_ns: f64,
    /// Number of idle gaps between consecutive kernels.
    pub launch_gap_count: usize,
    /// The kernel with the most total device time.
    pub dominant: Option<usize>,
}

/// Classifies one kernel; see [`analyze`] for the rules.
fn classify(k: &KernelProfile, c: &Ceilings) -> (Verdict, String, [Option<f64>; 5]) {
    let time = k.median_ns().filter(|t| *t > 0.0);
    let intensity = (k.bytes > 0.0).then(|| k.flops / k.bytes);
    let gbps = time.filter(|_| k.bytes > 0.0).map(|t| k.bytes / t); // bytes/ns = GB/s
    let tflops = time.filter(|_| k.flops > 0.0).map(|t| k.flops / t / 1e3); // flop/ns / 1e3 = TFLOP/s
    let bw = c.bandwidth_gbps();
    // The peak of what the products ran in (`tf32` where the backend used TF32), else the dtype's.
    let peak = c.peak_tflops(k.compute());
    let bw_frac = gbps.zip(bw).map(|(a, b)| a / b);
    let fl_frac = match (tflops, peak) {
        (Some(a), Some(p)) => Some(a / p),
        (None, Some(_)) if time.is_some() => Some(0.0),
        _ => None,
    };
    let nums = [intensity, gbps, tflops, bw_frac, fl_frac];
    let nominal = if c.measured { "" } else { " (ceilings not measured: run `sinter calibrate`)" };
    let Some(t) = time else {
        return (Verdict::Unknown, "no device time was recorded for this kernel".into(), nums);
    };
    let us = t / 1e3;
    if let Some(lo) = c.launch_overhead_ns()
        && t < OVERHEAD_TIME_FACTOR * lo
    {
        return (
            Verdict::OverheadBound,
            format!(
                "runs {us:.2} µs, under {OVERHEAD_TIME_FACTOR}x the launch overhead ({:.2} µs): launching costs about as much as the work{nominal}",
                lo / 1e3
            ),
            nums,
        );
    }
    let (Some(bw), Some(peak)) = (bw, peak) else {
        return (
            Verdict::Unknown,
            "no bandwidth or compute ceilings for this device: run `sinter calibrate`".into(),
            nums,
        );
    };
    let bf = bw_frac.unwrap_or(0.0);
    let ff = fl_frac.unwrap_or(0.0);
    if t < SMALL_KERNEL_NS && bf < LOW_UTILIZATION && ff < LOW_UTILIZATION {
        return (
            Verdict::OverheadBound,
            format!(
                "runs {us:.2} µs and reaches only {:.1}% of bandwidth and {:.1}% of compute: too little work to fill the device{nominal}",
                bf * 100.0,
                ff * 100.0
            ),
            nums,
        );
    }
    let ridge = peak * 1e12 / (bw * 1e9);
    let i = intensity.unwrap_or(f64::INFINITY);
    let low = if bf.max(ff) < LOW_UTILIZATION {
        " Far below both ceilings: latency, poor access patterns or too few workgroups."
    } else {
        ""
    };
    if i >= ridge {
        (
            Verdict::ComputeBound,
            format!(
                "intensity {} FLOP/B is above the ridge point {ridge:.1} FLOP/B; reaches {:.1}% of the {} peak ({peak:.1} TFLOP/s){nominal}.{low}",
                fmt_intensity(intensity),
                ff * 100.0,
                c.peak_for(k.compute()).map_or("f32", |(key, _)| key),
            ),
            nums,
        )
    } else {
        (
            Verdict::BandwidthBound,
            format!(
                "intensity {} FLOP/B is below the ridge point {ridge:.1} FLOP/B; moves {:.0} GB/s = {:.1}% of the copy bandwidth ({bw:.0} GB/s){nominal}.{low}",
                fmt_intensity(intensity),
                gbps.unwrap_or(0.0),
                bf * 100.0,
            ),
            nums,
        )
    }
}

fn fmt_intensity(i: Option<f64>) -> String {
    match i {
        None => "inf".into(),
        Some(i) if i < 10.0 => format!("{i:.2}"),
        Some(i) => format!("{i:.1}"),
    }
}

/// Roofline analysis of a profile.
///
/// Rules, per kernel, with `t` its median device time:
/// 1. no device time: [`Verdict::Unknown`];
/// 2. `t < OVERHEAD_TIME_FACTOR (5) x launch overhead`: [`Verdict::OverheadBound`];
/// 3. no copy bandwidth or compute peak: [`Verdict::Unknown`];
/// 4. `t < SMALL_KERNEL_NS (20 µs)` and below `LOW_UTILIZATION (10%)` of both ceilings:
///    [`Verdict::OverheadBound`] (too little work to fill the device);
/// 5. otherwise arithmetic intensity (FLOPs / bytes) against the ridge point
///    `peak FLOP/s / copy bytes/s` (the peak of the kernel's compute type,
///    [`KernelProfile::compute`]: its dtype, or `tf32` where its f32 products ran in TF32): at or above is
///    [`Verdict::ComputeBound`], below is [`Verdict::BandwidthBound`].
///
/// Run level: per iteration, the device window runs from the first kernel start to the last
/// kernel end; the GPU-busy share is the union of kernel intervals over the windows, and the
/// launch-gap total is the idle time inside the windows.
pub fn analyze(p: &Profile) -> Analysis {
    let totals: Vec<f64> = p.kernels.iter().map(|k| k.times_ns.iter().sum::<f64>()).collect();
    let kernel_total_ns: f64 = totals.iter().sum();
    let kernels: Vec<KernelAnalysis> = p
        .kernels
        .iter()
        .enumerate()
        .map(|(i, k)| {
            let (verdict, reason, [intensity, achieved_gbps, achieved_tflops, bandwidth_fraction, compute_fraction]) =
                classify(k, &p.device.ceilings);
            KernelAnalysis {
                kernel: i,
                time_ns: k.median_ns(),
                total_ns: totals[i],
                share: if kernel_total_ns > 0.0 { totals[i] / kernel_total_ns } else { 0.0 },
                intensity,
                achieved_gbps,
                achieved_tflops,
                bandwidth_fraction,
                compute_fraction,
                verdict,
                reason,
            }
        })
        .collect();
    let dominant =
        (kernel_total_ns > 0.0).then(|| (0..totals.len()).max_by(|&a, &b| totals[a].total_cmp(&totals[b]))).flatten();

    let mut by_iter: BTreeMap<u32, Vec<(f64, f64)>> = BTreeMap::new();
    for l in &p.launches {
        if let Some(span) = l.device_span() {
            by_iter.entry(l.iteration).or_default().push(span);
        }
    }
    let (mut window, mut busy, mut gaps, mut gap_count) = (0.0, 0.0, 0.0, 0usize);
    for spans in by_iter.values_mut() {
        spans.sort_by(|a, b| a.0.total_cmp(&b.0));
        let first = spans[0].0;
        let mut cur_end = spans[0].1;
        let mut last = spans[0].1;
        let mut b = spans[0].1 - spans[0].0;
        for &(s, e) in &spans[1..] {
            if s > cur_end {
                gaps += s - cur_end;
                gap_count += 1;
                b += e - s;
                cur_end = e;
            } else if e > cur_end {
                b += e - cur_end;
                cur_end = e;
            }
            last = last.max(e);
        }
        window += last - first;
        busy += b;
    }
    Analysis {
        kernels,
        kernel_total_ns,
        device_window_ns: window,
        gpu_busy_share: (window > 0.0).then(|| (busy / window).min(1.0)),
        launch_gap_total_ns: gaps,
        launch_gap_count: gap_count,
        dominant,
    }
}

/// Formats ns as a short human duration (`812 ns`, `12.3 µs`, `4.56 ms`, `1.20 s`).
pub fn fmt_ns(ns: f64) -> String {
    let trim = |v: f64, unit: &str| {
        let s = format!("{v:.3}");
        format!("{} {unit}", s.trim_end_matches('0').trim_end_matches('.'))
    };
    let a = ns.abs();
    if a < 1e3 {
        format!("{ns:.0} ns")
    } else if a < 1e6 {
        trim(ns / 1e3, "µs")
    } else if a < 1e9 {
        trim(ns / 1e6, "ms")
    } else {
        trim(ns / 1e9, "s")
    }
}

impl Analysis {
    /// One paragraph answering: which kernel dominates, what bounds it, what it fused, and how
    /// busy the device was.
    pub fn summary(&self, p: &Profile) -> String {
        let mut s = String::new();
        match self.dominant.and_then(|d| Some((p.kernels.get(d)?, self.kernels.get(d)?))) {
            Some((k, a)) => {
                s.push_str(&format!(
                    "Dominant kernel: {} ({:.0}% of GPU time, {} per launch), {}: {}. ",
                    k.name,
                    a.share * 100.0,
                    a.time_ns.map(fmt_ns).unwrap_or_else(|| "?".into()),
                    a.verdict,
                    a.reason.trim_end_matches('.')
                ));
                if !k.nodes.is_empty() {
                    s.push_str(&format!(
                        "It computes {} node(s) of the user's graph ({}). ",
                        k.nodes.len(),
                        k.ops.join(", ")
                    ));
                } else if !k.ops.is_empty() {
                    s.push_str(&format!("It fuses {}. ", k.ops.join(", ")));
                }
            }
            None => s.push_str("No kernel device times were recorded. "),
        }
        if let Some(b) = self.gpu_busy_share {
            s.push_str(&format!(
                "GPU busy {:.0}% of the kernel window; launch gaps total {} over {} gap(s).",
                b * 100.0,
                fmt_ns(self.launch_gap_total_ns),
                self.launch_gap_count
            ));
        }
        s
    }
}
