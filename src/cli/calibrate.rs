//! `sinter calibrate`: measures the device's ceilings once (copy bandwidth, matmul rate per dtype,
//! launch overhead) and caches them per adapter for the roofline.

use anyhow::{Context, Result, bail};
use sinter::core::backend::Mode;
use sinter::core::profile::Ceilings;
use sinter::workloads::Scale;
use std::collections::BTreeMap;

/// Arguments of `sinter calibrate`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Backend (wgsl).
    #[arg(long, default_value = "wgsl")]
    pub backend: String,
    /// Skip the matmul measurements (slow on CPU adapters).
    #[arg(long)]
    pub no_matmul: bool,
}

/// Runs the calibration.
pub fn run(a: Args) -> Result<()> {
    if a.backend != "wgsl" {
        bail!("calibrate measures a device; only the wgsl backend has one today");
    }
    let b = sinter_wgsl::WgslBackend::new()?;
    let dev = b.device();
    let bytes = (1u64 << 30).min(dev.max_binding_size() / 2).min(dev.limits().max_buffer_size / 2);
    let bw = dev.measure_copy_bandwidth(bytes).context("measuring copy bandwidth")?;
    println!("copy bandwidth ({} MiB): {:.1} GB/s", bytes >> 20, bw.gb_per_s);
    let lo = dev.measure_launch_overhead().context("measuring launch overhead")?;
    println!(
        "launch overhead: {:.1} us per submit round trip, {:.1} us per batched dispatch",
        lo.submit_round_trip_ns as f64 / 1e3,
        lo.batched_dispatch_ns as f64 / 1e3
    );
    let mut matmul = BTreeMap::new();
    if !a.no_matmul {
        let backend: std::rc::Rc<dyn sinter::core::backend::Backend> = std::rc::Rc::new(b.clone());
        for name in ["matmul_4096_f32", "matmul_8192_bf16"] {
            let w = super::workload(name)?;
            let inputs = w.inputs(Scale::Full, 1);
            let (row, _, _) = super::bench::measure(&w, Scale::Full, &backend, Mode::Default, true, 5, 10, &inputs)?;
            if let Some(t) = row.tflops {
                println!("matmul {} ({name}): {t:.2} TFLOP/s", w.dtype());
                matmul.insert(w.dtype().to_string(), t);
            }
        }
    }
    let c = Ceilings {
        copy_gbps: bw.gb_per_s,
        matmul_tflops: matmul,
        launch_overhead_us: lo.batched_dispatch_ns as f64 / 1e3,
        measured: true,
    };
    let key = Ceilings::adapter_key(&["wgsl", &sinter::core::backend::Backend::device_name(&b)]);
    let path = c.save(&key)?;
    println!("saved {}", path.display());
    Ok(())
}
