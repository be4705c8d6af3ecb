//! `sinter calibrate`: measures the device's ceilings once (copy bandwidth, launch overhead, the
//! matmul peak per compute type) and caches them per adapter for the roofline and the
//! contraction records of `sinter bench` / `sinter profile`.
//!
//! Matmul peaks come from the backend's [`calibrate_matmul`](sinter::core::backend::Backend::calibrate_matmul)
//! where it measures them (CUDA: cuBLASLt products in f32, TF32, f16, bf16 and fp8 e4m3, as the
//! device has them); otherwise (WGSL) from sinter's own matmul workloads in exact f32 and bf16.
//! Each peak is saved with the method that measured it. An existing file that cannot be trusted
//! is named and replaced.

use anyhow::{Context, Result};
use sinter::core::backend::{Backend as BackendTrait, Mode};
use sinter::core::profile::Ceilings;
use sinter::workloads::Scale;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Arguments of `sinter calibrate`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Backend (auto, cuda, wgsl).
    #[arg(long, default_value = "auto")]
    pub backend: String,
    /// Skip the matmul measurements (slow on CPU adapters).
    #[arg(long)]
    pub no_matmul: bool,
}

/// Peaks and methods per compute type.
type Peaks = (BTreeMap<String, f64>, BTreeMap<String, String>);

/// The backend's own peak measurement; empty (with a warning) when it has none or it fails.
fn library_peaks(backend: &Arc<dyn BackendTrait>) -> Peaks {
    let mut peaks = Peaks::default();
    match backend.calibrate_matmul() {
        Ok(list) => {
            for p in list {
                println!("matmul peak {:>6}: {:8.1} TFLOP/s  ({})", p.compute, p.tflops, p.method);
                peaks.0.insert(p.compute.clone(), p.tflops);
                peaks.1.insert(p.compute, p.method);
            }
        }
        Err(e) => eprintln!("warning: no library matmul peaks ({e}); timing sinter's own matmul workloads instead"),
    }
    peaks
}

/// Peaks from sinter's own matmul workloads (backends without a library measurement).
fn workload_peaks(backend: &Arc<dyn BackendTrait>) -> Result<Peaks> {
    let mut peaks = Peaks::default();
    for name in ["matmul_4096_f32", "matmul_8192_bf16"] {
        let w = super::workload(name)?;
        let inputs = w.inputs(Scale::Full, 1);
        let b = super::bench::for_measurement(backend, false)?;
        let subject = super::bench::Subject::workload(&w, Scale::Full)?;
        // Exact f32 (no TF32): the f32 peak of the CUDA cores, as torch's default matmul.
        let numerics = (sinter::core::passes::Precision::F32, sinter::core::schedule::AllowTf32::OFF);
        let (row, _, _) = super::bench::measure(&subject, &b, Mode::Default, true, numerics, 5, 10, &inputs, None)?;
        if let Some(t) = row.tflops {
            let method = format!(
                "sinter's own {name} on the {} backend (default mode, exact), median of 10 runs",
                backend.name()
            );
            println!("matmul {} ({name}): {t:.2} TFLOP/s", w.dtype());
            peaks.0.insert(w.dtype().to_string(), t);
            peaks.1.insert(w.dtype().to_string(), method);
        }
    }
    Ok(peaks)
}

/// Runs the calibration.
pub fn run(a: Args) -> Result<()> {
    let (backend, _) = super::bench::make_backend(&a.backend, false)?;
    let key = Ceilings::adapter_key(&[backend.name(), &backend.device_name()]);
    if let Err(e) = Ceilings::load(&key) {
        eprintln!("replacing a calibration file that cannot be used: {e}");
    }
    let c = backend
        .calibrate(1 << 30)
        .context("calibrating")?
        .with_context(|| format!("the {} backend has no device to calibrate", backend.name()))?;
    println!("copy bandwidth ({} MiB): {:.1} GB/s", c.copy_bytes >> 20, c.copy_gbps);
    println!("launch overhead: {:.2} us per kernel", c.launch_overhead_us);
    let (mut tflops, mut method) = Peaks::default();
    if !a.no_matmul {
        (tflops, method) = library_peaks(&backend);
        if tflops.is_empty() {
            (tflops, method) = workload_peaks(&backend)?;
        }
    }
    let ceilings = Ceilings {
        copy_gbps: c.copy_gbps,
        matmul_tflops: tflops,
        matmul_method: method,
        launch_overhead_us: c.launch_overhead_us,
        measured: true,
    };
    let path = ceilings.save(&key)?;
    println!("saved {}", path.display());
    Ok(())
}
