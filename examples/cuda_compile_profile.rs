//! Where a cold CUDA compile of an ONNX model spends its time, without a GPU: imports the model,
//! lowers and schedules it for an H100 (the CUDA backend's capabilities and cost model), renders
//! every kernel and compiles the sources with NVRTC in parallel, as `CudaBackend::load` does with
//! an empty cubin cache. Prints each phase, the kernel count and how many sources are distinct
//! once the kernel's own name is taken out (identical layers of a transformer render the same
//! body under different names).
//!
//! ```text
//! cargo run --release --example cuda_compile_profile -- model.onnx [batch=8 ...] [precision=bf16]
//! ```
//! `PROFILE_DUMP=dir` writes every rendered source there; `SINTER_DEBUG=dir` the compile's
//! artifacts (fusion decisions, kernel IR).
//! Needs libnvrtc (a CUDA toolkit or `pip install nvidia-cuda-nvrtc`), no driver.

use sinter::core::backend::{Backend, BackendError, Executable, Mode};
use sinter::core::kernel::Capabilities;
use sinter::core::kernel::Program;
use sinter_cuda::device::DeviceInfo;
use sinter_cuda::render::{self, Tuning};
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Schedules for an H100, renders and compiles at load, then runs nothing (a stand-in
/// executable returns zeros).
struct OfflineHopper {
    caps: Capabilities,
    info: DeviceInfo,
    report: Mutex<Vec<String>>,
}

impl Backend for OfflineHopper {
    fn name(&self) -> &str {
        "cuda"
    }
    fn device_name(&self) -> String {
        "offline H100 (render + NVRTC only)".into()
    }
    fn caps(&self) -> &Capabilities {
        &self.caps
    }
    fn cost_model(&self) -> Arc<dyn sinter::core::schedule::CostModel> {
        Arc::new(sinter_cuda::cost::CudaCostModel::new(self.info.cc))
    }
    fn serves_extents(&self) -> bool {
        true
    }
    fn load(&self, program: &Program, _mode: Mode) -> Result<Box<dyn Executable>, BackendError> {
        let caps = sinter_cuda::backend::cuda_caps(&self.info);
        let t = Instant::now();
        let mut rendered = Vec::new();
        for k in &program.kernels {
            rendered.push(render::render(k, &caps, &Tuning::default())?);
        }
        let render_s = t.elapsed().as_secs_f64();
        if let Ok(dir) = std::env::var("PROFILE_DUMP") {
            for r in &rendered {
                let _ = std::fs::write(format!("{dir}/{}.cu", r.name), &r.source);
            }
        }
        // As `CudaBackend::load`: one compile per distinct body.
        let mut seen = HashSet::new();
        let sources: Vec<(&str, &str)> = rendered
            .iter()
            .filter(|r| seen.insert((render::body_key(r), r.dynamic_shared_bytes)))
            .map(|r| (r.name.as_str(), r.source.as_str()))
            .collect();
        let cache = sinter_cuda::nvrtc::CubinCache::disabled();
        let t = Instant::now();
        let results = sinter_cuda::nvrtc::compile_parallel(&sources, &sinter_cuda::nvrtc::Target::hopper(), &cache);
        let nvrtc_s = t.elapsed().as_secs_f64();
        let failed = results.iter().filter(|r| r.is_err()).count();
        // Each source alone, one thread, slowest first.
        let mut each: Vec<(f64, &str)> = sources
            .iter()
            .map(|(n, src)| {
                let t = Instant::now();
                let _ = sinter_cuda::nvrtc::compile(n, src, &sinter_cuda::nvrtc::Target::hopper());
                (t.elapsed().as_secs_f64(), *n)
            })
            .collect();
        each.sort_by(|a, b| b.0.total_cmp(&a.0));
        for (s, n) in &each {
            self.report.lock().unwrap().push(format!("  NVRTC {n}: {s:.3} s"));
        }
        let one = each.first().map(|e| e.0);
        self.report.lock().unwrap().push(format!(
            "{} kernels, {} distinct bodies; render {render_s:.3} s; NVRTC {nvrtc_s:.3} s on {} threads ({failed} failed); the slowest alone {:.3} s",
            program.kernels.len(),
            sources.len(),
            std::thread::available_parallelism().map_or(1, |n| n.get()),
            one.unwrap_or(0.0)
        ));
        // `EPILOGUES=1`: the epilogue kernel a library step of each kernel would launch (a cuDNN
        // convolution's, a split cuBLASLt product's), compiled in one batch, then each alone.
        if std::env::var("EPILOGUES").is_ok_and(|v| v == "1") {
            let mut epilogues = Vec::new();
            for k in &program.kernels {
                if let Some(e) = sinter_cuda::backend::epilogue_kernel(k, self.info.cc) {
                    epilogues.push(render::render(&e, &caps, &Tuning::default())?);
                }
            }
            let sources: Vec<(&str, &str)> = epilogues.iter().map(|r| (r.name.as_str(), r.source.as_str())).collect();
            let t = Instant::now();
            let results = sinter_cuda::nvrtc::compile_parallel(&sources, &sinter_cuda::nvrtc::Target::hopper(), &cache);
            self.report.lock().unwrap().push(format!(
                "{} epilogues in one parallel batch: {:.3} s ({} failed)",
                sources.len(),
                t.elapsed().as_secs_f64(),
                results.iter().filter(|r| r.is_err()).count()
            ));
            for r in &epilogues {
                if let Ok(dir) = std::env::var("PROFILE_DUMP") {
                    let _ = std::fs::write(format!("{dir}/{}.cu", r.name), &r.source);
                }
                let t = Instant::now();
                let _ = sinter_cuda::nvrtc::compile(&r.name, &r.source, &sinter_cuda::nvrtc::Target::hopper());
                self.report.lock().unwrap().push(format!(
                    "  epilogue NVRTC {}: {:.3} s",
                    r.name,
                    t.elapsed().as_secs_f64()
                ));
            }
        }
        let outputs = program.outputs.iter().map(|o| (o.dtype, o.shape.clone())).collect();
        Ok(Box::new(Zeros { outputs }))
    }
}

/// Stands in for the loaded program: outputs of the right types (nothing runs).
struct Zeros {
    outputs: Vec<(sinter::DType, Vec<usize>)>,
}

impl Executable for Zeros {
    fn run(&mut self, _inputs: &[sinter::HostTensor]) -> Result<Vec<sinter::HostTensor>, BackendError> {
        Ok(self.outputs.iter().map(|(d, s)| sinter::HostTensor::random(*d, s.clone(), 0, 0.0, 0.0)).collect())
    }
    fn run_timed(
        &mut self,
        inputs: &[sinter::HostTensor],
        _iters: usize,
    ) -> Result<(Vec<sinter::HostTensor>, Vec<Vec<sinter::core::backend::KernelTiming>>), BackendError> {
        Ok((self.run(inputs)?, vec![]))
    }
    fn sources(&self) -> Vec<sinter::core::backend::KernelSource> {
        vec![]
    }
    fn set_extent(&mut self, _at: Option<Arc<Program>>) -> Result<(), BackendError> {
        Ok(())
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = args.next().ok_or("usage: cuda_compile_profile MODEL.onnx [name=value ...]")?;
    let mut precision = sinter::core::passes::Precision::F32;
    let dims: Vec<(String, usize)> = args
        .filter(|a| match a.strip_prefix("precision=") {
            Some(p) => {
                precision = sinter::core::passes::Precision::from_name(p).unwrap_or(precision);
                false
            }
            None => true,
        })
        .map(|a| {
            let (n, v) = a.split_once('=').ok_or("dims are name=value")?;
            Ok::<_, Box<dyn std::error::Error>>((n.to_string(), v.parse()?))
        })
        .collect::<Result<_, _>>()?;
    let info = DeviceInfo::h100();
    let backend =
        Arc::new(OfflineHopper { caps: sinter_cuda::backend::capabilities(&info), info, report: Mutex::new(vec![]) });
    let t = Instant::now();
    let model = sinter::onnx::load(&path)?;
    println!("import {:.3} s", t.elapsed().as_secs_f64());
    let t = Instant::now();
    // Each input at the given dims (1 for a symbolic dim not given), zeros for integers (token
    // ids, masks' positions); a model whose import needs static shapes (a `Range` over a
    // sequence length) is imported for these inputs.
    let inputs: Vec<sinter::HostTensor> = model
        .inputs()
        .iter()
        .map(|i| {
            let dtype = i.dtype.clone().map_err(|t| format!("input {:?}: {t}", i.name))?;
            let shape: Vec<usize> = i.shape.as_ref().map_or(vec![], |s| {
                s.dims()
                    .iter()
                    .map(|d| match d {
                        sinter::Dim::Static(x) => *x,
                        sinter::Dim::Sym(s) => dims.iter().find(|(n, _)| **n == **s).map_or(1, |(_, v)| *v),
                    })
                    .collect()
            });
            let (lo, hi) = if dtype.is_float() { (-1.0, 1.0) } else { (0.0, 0.0) };
            Ok::<_, String>(sinter::HostTensor::random(dtype, shape, 7, lo, hi))
        })
        .collect::<Result<_, _>>()?;
    let g = match model.graph() {
        Ok(g) => g,
        Err(e) => {
            println!("symbolic import failed ({e}); importing for the given inputs");
            model.graph_for_inputs(&inputs)?
        }
    };
    println!("graph {:.3} s ({} nodes)", t.elapsed().as_secs_f64(), g.nodes.len());
    let t = Instant::now();
    let opts = sinter::core::compile::CompileOptions { precision, ..Default::default() };
    let c = sinter::core::compile::compile(&g, backend.clone(), opts)?;
    c.run(&inputs).map(|_| ()).unwrap_or_else(|e| println!("run (interpreter stand-in): {e}"));
    println!("compile + first run {:.3} s", t.elapsed().as_secs_f64());
    for e in c.events() {
        println!("event: total {:.3} s, cache hit {}", e.stats.total_s, e.stats.cache_hit);
        for (phase, s) in &e.stats.phases {
            if *s > 0.0 {
                println!("  {phase}: {s:.3} s");
            }
        }
    }
    for line in backend.report.lock().unwrap().iter() {
        println!("load: {line}");
    }
    Ok(())
}
