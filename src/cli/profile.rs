//! `sinter profile`: compiles a workload eager and fused, times both on the device, and writes
//! one artifact folder (debug artifacts, `profile.json`, `profile_eager.json`, `trace.json`,
//! `trace_eager.json`) for `sinter view` and Perfetto; prints the roofline summary.

use super::{ScaleArg, workload};
use anyhow::{Context, Result};
use sinter::core::backend::{Backend as BackendTrait, Mode};
use sinter::core::compile::{CompileOptions, compile};
use sinter::core::profile::{
    self, Ceilings, DeviceInfo, FusionDecision, KernelProfile, ProfileBuilder, Span, SpanCategory,
};
use sinter::workloads::Scale;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// Arguments of `sinter profile`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Workload name.
    #[arg(long)]
    pub workload: String,
    /// Backend: auto, wgsl, interp.
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
}

/// The device ceilings: cached calibration if present, else a quick copy measurement.
fn ceilings(backend: &Rc<dyn BackendTrait>, measured_copy: Option<f64>) -> Ceilings {
    let key = Ceilings::adapter_key(&[backend.name(), &backend.device_name()]);
    if let Ok(Some(c)) = Ceilings::load(&key) {
        return c;
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
    backend: &Rc<dyn BackendTrait>,
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
        cache_dir: None,
        debug_dir: fusion.then(|| dir.to_path_buf()),
        ..CompileOptions::default()
    };
    let pmode = if fusion { profile::Mode::Compiled } else { profile::Mode::Eager };
    let mut b = ProfileBuilder::new(w.name, backend.name(), pmode, device.clone());
    let t0 = b.now_ns();
    let c = compile(&g, backend.clone(), opts).with_context(|| format!("compiling {}", w.name))?;
    // Compile spans from the driver's phase timings, laid end to end from t0.
    let mut t = t0;
    for ev in c.events() {
        for (name, secs) in &ev.stats.phases {
            let category = match name.as_str() {
                "specialize" => SpanCategory::Capture,
                "schedule" => SpanCategory::Fuse,
                "backend_load" => SpanCategory::BackendCompile,
                _ => SpanCategory::Pass,
            };
            let dur = secs * 1e9;
            let detail = if ev.stats.cache_hit { "program cache hit".to_string() } else { ev.reason.clone() };
            b.push_span(Span { name: name.clone(), category, start_ns: t, dur_ns: dur, detail });
            t += dur;
        }
    }
    let program = c.program().context("no program")?;
    let sources = c.sources();
    for k in &program.kernels {
        let mut kp = KernelProfile::from_kernel(k);
        if let Some(s) = sources.iter().find(|s| s.name == k.name) {
            kp = kp.grid(s.grid).block(s.block).source_path(format!("kernels/{}.{}", s.name, s.ext));
        }
        b.add_kernel(kp);
    }
    for d in &program.decisions {
        b.push_fusion(FusionDecision {
            nodes: d.nodes.clone(),
            kernels: vec![],
            fused: d.fused,
            reason: d.reason.clone(),
        });
    }
    b.set_graph(&g);
    b.set_peak_memory(program.memory.peak_bytes as u64);
    c.run(&inputs)?; // warm-up
    let iters = a.iters.max(1);
    let start = b.now_ns();
    let (_, timings) = c.run_timed(&inputs, iters)?;
    let per = (b.now_ns() - start) / iters as f64;
    for (i, run) in timings.iter().enumerate() {
        let submit = start + per * i as f64;
        b.push_batch(i as u32, submit, run.iter().map(|k| (k.kernel.as_str(), k.start_ns, k.dur_ns)))?;
    }
    b.set_iterations(iters as u32);
    Ok(b.finish()?)
}

/// Runs the profile.
pub fn run(a: Args) -> Result<()> {
    let (backend, copy) = super::bench::make_backend(&a.backend, true)?;
    let device = DeviceInfo::new(backend.device_name(), backend.name(), ceilings(&backend, copy));
    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    if !a.no_eager {
        let p = record(&a.out, &a, &backend, &device, false)?;
        p.write(&a.out)?;
    }
    let p = record(&a.out, &a, &backend, &device, true)?;
    p.write(&a.out)?;
    let analysis = profile::analyze(&p);
    println!("{}", analysis.summary(&p));
    println!("artifacts in {} (open with: sinter view {})", a.out.display(), a.out.display());
    Ok(())
}
