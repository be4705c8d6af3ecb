//! Graph breaks through the compile driver, on the interpreter with restricted capabilities.

use super::*;
use crate::backend::Mode;
use crate::kernel::Capabilities;
use crate::kernel::interp::InterpBackend;
use crate::prelude::*;

fn no_f64() -> Arc<dyn Backend> {
    let mut c = Capabilities::host();
    c.dtypes.retain(|&d| d != DType::F64);
    Arc::new(InterpBackend::with_caps(c))
}

fn opts(cache: Option<PathBuf>, debug: Option<PathBuf>) -> CompileOptions {
    CompileOptions { cache_dir: cache, debug_dir: debug, ..CompileOptions::default() }
}

fn tmpdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("sinter-breaks-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// f32 softmax → an f64 section (a cast and arithmetic the backend lacks) → f32 again, with an
/// f64 graph input, an output from the fallback side and a graph input as an output.
fn mixed() -> (Graph, Vec<HostTensor>) {
    let g = Graph::new();
    let x = g.input("x", DType::F32, [4, 9]);
    let s = g.input("s", DType::F64, [4, 9]);
    let y = (&x * 2.0).softmax(-1);
    let d = &y.cast(DType::F64) * &s;
    let back = d.cast(DType::F32).exp() + &x;
    g.output(&back.sum(&[1], false));
    g.output(&d);
    g.output(&x);
    let inputs = vec![
        HostTensor::random(DType::F32, vec![4, 9], 1, -2.0, 2.0),
        HostTensor::random(DType::F64, vec![4, 9], 2, -1.0, 1.0),
    ];
    (g, inputs)
}

fn assert_close(got: &[HostTensor], want: &[HostTensor]) {
    assert_eq!(got.len(), want.len());
    for (a, b) in got.iter().zip(want) {
        assert_eq!((a.dtype(), &a.shape), (b.dtype(), &b.shape));
        assert!(a.tolerance_ratio(b, 1e-5, 1e-6) <= 1.0, "{a:?} vs {b:?}");
    }
}

#[test]
fn mixed_f32_f64_graph_runs_partitioned_and_matches_the_reference() {
    let (g, inputs) = mixed();
    let want = crate::cpu::run(&g, &inputs).unwrap();
    let dir = tmpdir("artifacts");
    let c = compile(&g, no_f64(), opts(None, Some(dir.clone()))).unwrap();
    let breaks = c.graph_breaks();
    assert!(!breaks.is_empty());
    assert!(breaks.iter().any(|b| b.op == "cast to f64" && b.reason == "the interp backend does not support f64"));
    let segs = c.segments();
    assert_eq!(segs.iter().map(|s| s.1).collect::<Vec<_>>(), [true, false, true], "{segs:?}");
    assert_eq!(segs[1].0, "cpu_fallback_1");
    assert_close(&c.run(&inputs).unwrap(), &want);
    // Device path: inputs "on the device", fallback values downloaded, outputs left there.
    let dev: Vec<DeviceTensor> = inputs.iter().map(|t| c.upload(t).unwrap()).collect();
    let outs = c.run_device(&dev).unwrap();
    let outs: Vec<HostTensor> = outs.iter().map(|d| d.to_host().unwrap()).collect();
    assert_close(&outs, &want);
    // Timings: every compiled kernel (segment-prefixed) and the fallback segment, per run.
    let (outs, timings) = c.run_timed(&inputs, 2).unwrap();
    assert_close(&outs, &want);
    assert_eq!(timings.len(), 2);
    assert!(c.sources().iter().all(|s| s.name.starts_with("s0_") || s.name.starts_with("s2_")));
    assert_eq!(c.programs().len(), 2);
    assert!(c.program().is_none());
    // Artifacts: the breaks beside fusion.json, each segment's program or graph.
    let written: Vec<GraphBreak> =
        serde_json::from_str(&std::fs::read_to_string(dir.join("graph_breaks.json")).unwrap()).unwrap();
    assert_eq!(written, breaks);
    assert!(dir.join("fusion.json").is_file());
    assert!(dir.join("segments/01_cpu_fallback_1.txt").is_file());
    assert!(dir.join("segments/00_s0.json").is_file());
    // The profile lists the fallback segment as its own kernel with launches.
    let device = crate::profile::DeviceInfo::new("host", "interp", crate::profile::Ceilings::default());
    let p = c.profile(&inputs, 2, "mixed", device).unwrap();
    let k = p.kernels.iter().position(|k| k.name == "cpu_fallback_1").expect("fallback kernel in the profile");
    assert!(p.launches.iter().filter(|l| l.kernel == k).count() >= 2);
    assert!(p.kernels.iter().any(|k| k.name.starts_with("s2_")));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn graph_breaks_off_keeps_the_error_and_changes_the_cache_key() {
    let (g, _) = mixed();
    let o = CompileOptions { graph_breaks: false, ..opts(None, None) };
    let e = compile(&g, no_f64(), o).err().expect("compiles without breaks").to_string();
    assert!(e.contains("does not support f64"), "{e}");
    let on = compile(&g, Arc::new(InterpBackend::new()), opts(None, None)).unwrap();
    let off = compile(&g, Arc::new(InterpBackend::new()), CompileOptions { graph_breaks: false, ..opts(None, None) })
        .unwrap();
    let sig = Signature::declared(&on.graph).unwrap();
    assert_ne!(on.cache_key(&sig, ""), off.cache_key(&sig, ""));
    assert!(on.graph_breaks().is_empty(), "a backend with f64 needs no break");
}

#[test]
fn partitioned_graphs_skip_the_program_cache_and_still_recompile_on_guards() {
    let dir = tmpdir("cache");
    let g = Graph::new();
    let x = g.input("x", DType::F32, vec![Dim::sym("n"), Dim::Static(3)]);
    g.output(&(x.cast(DType::F64).exp().cast(DType::F32) * 3.0));
    let c = compile(&g, no_f64(), opts(Some(dir.clone()), None)).unwrap();
    for (k, rows) in [2usize, 5, 2].into_iter().enumerate() {
        let x = HostTensor::random(DType::F32, vec![rows, 3], k as u64, -1.0, 1.0);
        let want = crate::cpu::run(&g, std::slice::from_ref(&x)).unwrap();
        assert_close(&c.run(&[x]).unwrap(), &want);
    }
    assert_eq!(c.events().len(), 2);
    assert!(!c.graph_breaks().is_empty());
    // No program stored (only the dynamic attempt's refusal, a `.refused` record): a second
    // compiler partitions again (and gets the same breaks).
    let programs = std::fs::read_dir(dir.join("programs"))
        .map(|d| d.filter_map(|e| e.ok()).filter(|e| e.path().extension().is_some_and(|x| x == "json")).count())
        .unwrap_or(0);
    assert_eq!(programs, 0);
    let c2 = compile(&g, no_f64(), opts(Some(dir.clone()), None)).unwrap();
    c2.run(&[HostTensor::random(DType::F32, vec![2, 3], 9, -1.0, 1.0)]).unwrap();
    assert!(!c2.events()[0].stats.cache_hit);
    assert_eq!(c2.graph_breaks(), c.graph_breaks());
    let _ = std::fs::remove_dir_all(&dir);
}

/// The interpreter, refusing at load every kernel that computes a sine (as a renderer refuses an
/// op it lacks); with `refuse_runs`, its executables also refuse every run (as WGSL refuses an i64
/// value outside its 32-bit emulation), so their segments run on the CPU reference for that call.
struct NoSine {
    interp: InterpBackend,
    refuse_runs: bool,
}

fn no_sine(refuse_runs: bool) -> Arc<dyn Backend> {
    Arc::new(NoSine { interp: InterpBackend::new(), refuse_runs })
}

impl Backend for NoSine {
    fn name(&self) -> &str {
        "nosine"
    }
    fn device_name(&self) -> String {
        "host".into()
    }
    fn caps(&self) -> &Capabilities {
        self.interp.caps()
    }
    fn load(&self, program: &Program, mode: Mode) -> Result<Box<dyn Executable>, BackendError> {
        if let Some(k) = program.kernels.iter().find(|k| k.ops.iter().any(|o| o == "sin")) {
            return Err(BackendError::Unsupported {
                backend: "nosine".into(),
                what: format!("kernel {}: no sine here", k.name),
            });
        }
        let exe = self.interp.load(program, mode)?;
        Ok(if self.refuse_runs { Box::new(RefusesRuns(exe)) } else { exe })
    }
}

/// An executable that refuses every run.
struct RefusesRuns(Box<dyn Executable>);

impl Executable for RefusesRuns {
    fn run(&mut self, _: &[HostTensor]) -> Result<Vec<HostTensor>, BackendError> {
        Err(BackendError::Unsupported { backend: "nosine".into(), what: "a value out of range".into() })
    }
    fn run_timed(
        &mut self,
        inputs: &[HostTensor],
        _: usize,
    ) -> Result<(Vec<HostTensor>, Vec<Vec<KernelTiming>>), BackendError> {
        self.run(inputs).map(|o| (o, Vec::new()))
    }
    fn sources(&self) -> Vec<crate::backend::KernelSource> {
        self.0.sources()
    }
}

#[test]
fn a_kernel_the_backend_refuses_at_load_breaks_the_graph() {
    let g = Graph::new();
    let x = g.input("x", DType::F32, [2, 6]);
    let y = g.input("y", DType::F32, [6]);
    let m = g.constant(HostTensor::f32([6], vec![1.0; 6]).unwrap());
    // Two kernels: a reduction of x, and y's sine chain (refused).
    g.output(&(x.exp() * 2.0).sum(&[1], false));
    g.output(&((y.sin() * 3.0).relu() + &m));
    let inputs = vec![
        HostTensor::random(DType::F32, vec![2, 6], 3, -1.0, 1.0),
        HostTensor::random(DType::F32, vec![6], 4, -1.0, 1.0),
    ];
    let want = crate::cpu::run(&g, &inputs).unwrap();
    let c = compile(&g, no_sine(false), opts(None, None)).unwrap();
    let breaks = c.graph_breaks();
    assert!(breaks.iter().any(|b| b.op == "sin"), "{breaks:?}");
    assert!(breaks.iter().all(|b| b.reason.contains("no sine here") && b.op != "exp"), "{breaks:?}");
    let segs: Vec<bool> = c.segments().iter().map(|s| s.1).collect();
    assert_eq!(segs, [true, false], "the kernel without a sine stays compiled");
    assert_close(&c.run(&inputs).unwrap(), &want);
    let o = CompileOptions { graph_breaks: false, ..opts(None, None) };
    assert!(compile(&g, no_sine(false), o).is_err());
}

#[test]
fn a_segment_refused_at_run_is_timed_on_the_cpu_reference() {
    let g = Graph::new();
    let x = g.input("x", DType::F32, [64, 64]);
    let y = g.input("y", DType::F32, [6]);
    g.output(&(x.exp() * 2.0).sum(&[1], false));
    g.output(&(y.sin() * 3.0));
    let inputs = vec![
        HostTensor::random(DType::F32, vec![64, 64], 5, -1.0, 1.0),
        HostTensor::random(DType::F32, vec![6], 6, -1.0, 1.0),
    ];
    let want = crate::cpu::run(&g, &inputs).unwrap();
    let c = compile(&g, no_sine(true), opts(None, None)).unwrap();
    assert_eq!(c.segments().iter().map(|s| s.1).collect::<Vec<_>>(), [true, false]);
    let (outs, runs) = c.run_timed(&inputs, 2).unwrap();
    assert_close(&outs, &want);
    assert_eq!(runs.len(), 2);
    for run in &runs {
        let names: Vec<&str> = run.iter().map(|k| k.kernel.as_str()).collect();
        assert_eq!(run.len(), 2, "one entry per segment: {names:?}");
        assert!(names[0].ends_with("(CPU reference for this call)"), "{names:?}");
        assert!(run.iter().all(|k| k.dur_ns > 0.0), "{run:?}");
    }
}

#[test]
fn outputs_of_a_refused_dtype_that_are_inputs_or_constants_pass_through() {
    let g = Graph::new();
    let x = g.input("x", DType::F32, [3]);
    let z = g.input("z", DType::F64, [3]);
    let c = g.constant(HostTensor::from_f64(DType::F64, vec![2], &[1.5, -2.0]));
    g.output(&x.exp());
    g.output(&z);
    g.output(&c);
    let inputs = vec![
        HostTensor::random(DType::F32, vec![3], 1, -1.0, 1.0),
        HostTensor::random(DType::F64, vec![3], 2, -1.0, 1.0),
    ];
    let want = crate::cpu::run(&g, &inputs).unwrap();
    let c = compile(&g, no_f64(), opts(None, None)).unwrap();
    let breaks = c.graph_breaks();
    assert_eq!(breaks.len(), 2, "{breaks:?}");
    assert!(breaks.iter().all(|b| b.reason.contains("passed through")));
    assert_close(&c.run(&inputs).unwrap(), &want);
    let dev: Vec<DeviceTensor> = inputs.iter().map(|t| c.upload(t).unwrap()).collect();
    let got: Vec<HostTensor> = c.run_device(&dev).unwrap().iter().map(|d| d.to_host().unwrap()).collect();
    assert_close(&got, &want);
}
