//! `sinter calibrate`: measures the device's ceilings once (copy bandwidth, matmul rate per dtype,
//! launch overhead) and caches them per adapter for the roofline.

use anyhow::{Context, Result};
use sinter::core::backend::Mode;
use sinter::core::profile::Ceilings;
use sinter::workloads::Scale;
use std::collections::BTreeMap;

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

/// Runs the calibration.
pub fn run(a: Args) -> Result<()> {
    let (backend, _) = super::bench::make_backend(&a.backend, false)?;
    let c = backend
        .calibrate(1 << 30)
        .context("calibrating")?
        .with_context(|| format!("the {} backend has no device to calibrate", backend.name()))?;
    println!("copy bandwidth ({} MiB): {:.1} GB/s", c.copy_bytes >> 20, c.copy_gbps);
    println!("launch overhead: {:.2} us per kernel", c.launch_overhead_us);
    let mut matmul = BTreeMap::new();
    if !a.no_matmul {
        for name in ["matmul_4096_f32", "matmul_8192_bf16"] {
            let w = super::workload(name)?;
            let inputs = w.inputs(Scale::Full, 1);
            let b = super::bench::for_measurement(&backend, false)?;
            let subject = super::bench::Subject::workload(&w, Scale::Full)?;
            // Exact f32 (no TF32): the f32 peak of the CUDA cores, as torch's default matmul.
            let numerics = (sinter::core::passes::Precision::F32, sinter::core::schedule::AllowTf32::OFF);
            let (row, _, _) = super::bench::measure(&subject, &b, Mode::Default, true, numerics, 5, 10, &inputs, None)?;
            if let Some(t) = row.tflops {
                println!("matmul {} ({name}): {t:.2} TFLOP/s", w.dtype());
                matmul.insert(w.dtype().to_string(), t);
            }
        }
    }
    let ceilings = Ceilings {
        copy_gbps: c.copy_gbps,
        matmul_tflops: matmul,
        launch_overhead_us: c.launch_overhead_us,
        measured: true,
    };
    let key = Ceilings::adapter_key(&[backend.name(), &backend.device_name()]);
    let path = ceilings.save(&key)?;
    println!("saved {}", path.display());
    Ok(())
}
