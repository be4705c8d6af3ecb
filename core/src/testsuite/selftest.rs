//! Tests of the suite itself: broken backends (a wrong element, stale outputs, a missing output,
//! `run_device` outputs left on the host) must fail it; an honest backend without f64 must pass by
//! refusing f64 graphs.

use super::*;
use crate::backend::{DeviceBuffer, DeviceTensor, Executable, KernelSource, KernelTiming, Mode};
use crate::kernel::interp::InterpBackend;
use crate::kernel::{Capabilities, Program};
use std::sync::Mutex;

/// How a [`Broken`] backend misbehaves.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Fault {
    /// Adds 1 to the last element of the first output.
    LastElement,
    /// Returns the first run's outputs on every later run (a kernel that never stores).
    Stale,
    /// Drops the last output.
    MissingOutput,
    /// Uploads to its own ("fake") buffers but leaves `run_device` outputs on the host.
    HostOutputs,
}

/// Host bytes that claim to live on a device of their own.
#[derive(Debug)]
struct FakeBuffer(Vec<u8>);

impl DeviceBuffer for FakeBuffer {
    fn backend(&self) -> &str {
        "fake"
    }
    fn len_bytes(&self) -> u64 {
        self.0.len() as u64
    }
    fn read(&self) -> Result<Vec<u8>, BackendError> {
        Ok(self.0.clone())
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// The interpreter with a fault.
struct Broken {
    inner: InterpBackend,
    fault: Fault,
}

/// A [`Broken`] backend.
fn broken(fault: Fault) -> Arc<dyn Backend> {
    Arc::new(Broken { inner: InterpBackend::new(), fault })
}

struct BrokenExe {
    inner: Box<dyn Executable>,
    fault: Fault,
    first: Mutex<Option<Vec<HostTensor>>>,
}

impl Executable for BrokenExe {
    fn run(&mut self, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, BackendError> {
        let mut out = self.inner.run(inputs)?;
        match self.fault {
            Fault::LastElement => {
                let t = &mut out[0];
                let mut v = t.to_f64_vec();
                if let Some(x) = v.last_mut() {
                    *x += 1.0;
                }
                *t = HostTensor::from_f64(t.dtype(), t.shape.clone(), &v);
            }
            Fault::Stale => {
                let mut first = self.first.lock().unwrap();
                match &*first {
                    Some(f) => return Ok(f.clone()),
                    None => *first = Some(out.clone()),
                }
            }
            Fault::MissingOutput => {
                out.pop();
            }
            Fault::HostOutputs => {}
        }
        Ok(out)
    }

    fn run_timed(
        &mut self,
        inputs: &[HostTensor],
        iters: usize,
    ) -> Result<(Vec<HostTensor>, Vec<Vec<KernelTiming>>), BackendError> {
        self.inner.run_timed(inputs, iters)
    }

    fn sources(&self) -> Vec<KernelSource> {
        self.inner.sources()
    }
}

impl Backend for Broken {
    fn name(&self) -> &str {
        "broken"
    }
    fn device_name(&self) -> String {
        "a faulty interpreter".into()
    }
    fn caps(&self) -> &Capabilities {
        self.inner.caps()
    }
    fn upload(&self, t: &HostTensor) -> Result<DeviceTensor, BackendError> {
        if self.fault == Fault::HostOutputs {
            return DeviceTensor::new(t.dtype(), t.shape.clone(), Arc::new(FakeBuffer(t.to_le_bytes())));
        }
        self.inner.upload(t)
    }
    fn load(&self, program: &Program, mode: Mode) -> Result<Box<dyn Executable>, BackendError> {
        let inner = self.inner.load(program, mode)?;
        Ok(Box::new(BrokenExe { inner, fault: self.fault, first: Mutex::new(None) }))
    }
}

fn run(backend: Arc<dyn Backend>, name: &str) -> Result<(), String> {
    run_case(backend, &case(name).expect("case"), true)
}

#[test]
fn an_honest_interpreter_passes_representative_cases() {
    for name in ["unary_exp", "reduce_sum_last", "softmax_last", "dtype_f64", "cast_from_u8"] {
        run(Arc::new(InterpBackend::new()), name).unwrap_or_else(|e| panic!("{e}"));
    }
}

#[test]
fn a_wrong_last_element_fails() {
    let b = broken(Fault::LastElement);
    for name in ["binary_add", "reduce_max_last", "matmul_sizes", "dtype_i32"] {
        let e = run(b.clone(), name).expect_err(name);
        assert!(e.contains("differ"), "{name}: {e}");
    }
}

#[test]
fn stale_outputs_fail() {
    let b = broken(Fault::Stale);
    for name in ["unary_neg", "reduce_sum_middle", "gather_embedding", "dtype_bool"] {
        let e = run(b.clone(), name).expect_err(name);
        assert!(e.contains("run 1"), "{name}: {e}");
    }
}

#[test]
fn a_missing_output_fails() {
    let b = broken(Fault::MissingOutput);
    let e = run(b, "compare_where").expect_err("missing output");
    assert!(e.contains("outputs but the reference has"), "{e}");
}

#[test]
fn run_device_outputs_left_on_the_host_fail() {
    let e = run(broken(Fault::HostOutputs), "unary_neg").expect_err("host outputs");
    assert!(e.contains("left an output on the host backend"), "{e}");
}

#[test]
fn a_backend_without_f64_must_refuse_f64_graphs() {
    let mut caps = Capabilities::host();
    caps.dtypes.retain(|d| *d != DType::F64);
    // The interpreter checks its capabilities when loading: it refuses with Unsupported naming f64.
    let honest: Arc<dyn Backend> = Arc::new(InterpBackend::with_caps(caps));
    run(honest.clone(), "dtype_f64").unwrap_or_else(|e| panic!("{e}"));
    run(honest.clone(), "cast_from_f64").unwrap_or_else(|e| panic!("{e}"));
    // Graphs without f64 still run and are checked.
    run(honest, "cast_from_f32").unwrap_or_else(|e| panic!("{e}"));
    // Listing f64 but failing on it is a failure, not an accepted refusal.
    let e = run(broken(Fault::MissingOutput), "dtype_f64").expect_err("f64");
    assert!(e.contains("outputs but the reference has"), "{e}");
}

#[test]
fn without_a_backend_the_test_is_skipped_unless_required() {
    // `interp` has no require variable: a missing backend is a skip.
    run_test(None, "interp", "unary_neg", true);
    // An unknown case name is an error, never a silent pass.
    let r = std::panic::catch_unwind(|| run_test(Some(Arc::new(InterpBackend::new())), "interp", "nope", true));
    assert!(r.is_err());
}
