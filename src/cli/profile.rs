//! `sinter profile`: compiles a workload eager and fused, times both on the device, and writes
//! one artifact folder (debug artifacts, `profile.json`, `profile_eager.json`, `trace.json`,
//! `trace_eager.json`) for `sinter view` and Perfetto; prints the roofline summary.

use super::{ScaleArg, workload};
use anyhow::{Context, Result};
use sinter::core::backend::{Backend as BackendTrait, Mode};
use sinter::core::compile::{CompileOptions, compile};
use sinter::core::profile::{self, Ceilings, DeviceInfo};
use sinter::workloads::Scale;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Arguments of `sinter profile`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Workload name.
    #[arg(long)]
    pub workload: String,
    /// Backend: auto, cuda, wgsl, interp.
    #[arg(long, default_value = "auto")]
    pub backend: String,
    /// Size.
    #[arg(long, value_enum, default_value = "full")]
    pub scale: ScaleArg,
    /// Timed iterations.
    #[arg(long, default_value_t = 10)]
    pub iters: usize,
    /// Artifact folder.
    #[arg(long)]
    pub out: PathBuf,
    /// Skip the eager run.
    #[arg(long)]
    pub no_eager: bool,
    /// The on-disk cache.
    #[command(flatten)]
    pub cache: super::CacheArgs,
}

/// The device ceilings: cached calibration if present and valid, else a quick copy measurement.
/// A calibration file that exists but cannot be read, parsed or trusted is named in a warning.
fn ceilings(backend: &Arc<dyn BackendTrait>, measured_copy: Option<f64>) -> Ceilings {
    let key = Ceilings::adapter_key(&[backend.name(), &backend.device_name()]);
    match Ceilings::load(&key) {
        Ok(Some(c)) => return c,
        Ok(None) => {}
        Err(e) => eprintln!("warning: ignoring the calibration file: {e}"),
    }
    Ceilings {
        copy_gbps: measured_copy.unwrap_or(0.0),
        matmul_tflops: BTreeMap::new(),
        launch_overhead_us: 0.0,
        measured: measured_copy.is_some(),
    }
}

fn record(
    dir: &Path,
    a: &Args,
    backend: &Arc<dyn BackendTrait>,
    device: &DeviceInfo,
    fusion: bool,
) -> Result<profile::Profile> {
    let w = workload(&a.workload)?;
    let scale: Scale = a.scale.into();
    let g = w.build(scale)?;
    let inputs = w.inputs(scale, 7);
    let opts = CompileOptions {
        mode: Mode::Default,
        fusion,
        cache_dir: a.cache.dir(),
        debug_dir: fusion.then(|| dir.to_path_buf()),
        ..CompileOptions::default()
    };
    let c = compile(&g, backend.clone(), opts).with_context(|| format!("compiling {}", w.name))?;
    Ok(c.profile(&inputs, a.iters, w.name, device.clone())?)
}

/// Runs the profile.
pub fn run(a: Args) -> Result<()> {
    let (backend, copy) = super::bench::make_backend(&a.backend, true)?;
    let device = DeviceInfo::new(backend.device_name(), backend.name(), ceilings(&backend, copy));
    super::out_dir("out", &a.out)?;
    if !a.no_eager {
        let p = record(&a.out, &a, &backend, &device, false)?;
        p.write(&a.out)?;
    }
    // A fresh device for the compiled recording where the backend needs one (NVIDIA's Vulkan
    // driver boosts clocks only for a few seconds after a device is created).
    let backend = super::bench::for_measurement(&backend, false)?;
    let p = record(&a.out, &a, &backend, &device, true)?;
    p.write(&a.out)?;
    let analysis = profile::analyze(&p);
    println!("{}", analysis.summary(&p));
    println!("artifacts in {} (open with: sinter view {})", a.out.display(), a.out.display());
    Ok(())
}
