//! The device tests' shared setup: the device or the backend (or a skip line without a driver),
//! their compile options, and launching rendered kernels directly through the device layer (no
//! executable), for the tests that run every candidate tuning of a kernel against the kernel-IR
//! interpreter.
#![allow(dead_code)]

use sinter_core::HostTensor;
use sinter_core::backend::{Backend, BackendError, DeviceBuffer, Mode};
use sinter_core::compile::CompileOptions;
use sinter_core::kernel::{BufferKind, Program};
use sinter_cuda::CudaBackend;
use sinter_cuda::device::{CudaBuffer, Device, Launch, Stream};
use sinter_cuda::nvrtc::{self, Target};
use sinter_cuda::render::{self, CudaCaps, Rendered, Tuning};
use std::sync::Arc;

/// GPU 0, or `None` (a skip line) without a driver unless `SINTER_REQUIRE_CUDA=1`.
pub fn device(test: &str) -> Option<Device> {
    match Device::open(0) {
        Ok(d) => Some(d),
        Err(e) => {
            assert!(!std::env::var("SINTER_REQUIRE_CUDA").is_ok_and(|v| v == "1"), "SINTER_REQUIRE_CUDA=1: {e}");
            eprintln!("skipped {test}: {e}");
            None
        }
    }
}

/// The device's capabilities as the renderer sees them (its architecture and SM count: the
/// persistent tiles size their grid by it).
pub fn caps(dev: &Device) -> CudaCaps {
    CudaCaps { sm: dev.info().cc, sm_count: dev.info().sm_count, ..CudaCaps::hopper() }
}

/// The strategy substrings of `SINTER_TEST_TUNINGS` (comma-separated), when set: a device call
/// that checks or times only some templates (`SINTER_TEST_TUNINGS="e4,qr"`).
pub fn tuning_filter() -> Option<Vec<String>> {
    env_list("SINTER_TEST_TUNINGS")
}

/// The comma-separated substrings of environment variable `name`, when set and not empty.
pub fn env_list(name: &str) -> Option<Vec<String>> {
    let v = std::env::var(name).ok().filter(|v| !v.is_empty())?;
    Some(v.split(',').map(str::to_string).collect())
}

/// Renders and compiles every tuning (in parallel): (tuning, rendered, cubin). Under
/// [`tuning_filter`], only the tunings whose strategy contains one of its substrings.
pub fn build(dev: &Device, p: &Program, tunings: &[Tuning]) -> Vec<(Tuning, Rendered, Vec<u8>)> {
    let k = &p.kernels[0];
    let c = caps(dev);
    let target = Target::sm(dev.info().cc);
    let filter = tuning_filter();
    std::thread::scope(|s| {
        let hs: Vec<_> = tunings
            .iter()
            .map(|t| {
                let (c, target, filter) = (&c, &target, &filter);
                s.spawn(move || {
                    let r = render::render(k, c, t).unwrap_or_else(|e| panic!("{t:?}: {e}"));
                    if filter.as_ref().is_some_and(|f| !f.iter().any(|x| r.strategy.contains(x.as_str()))) {
                        return None;
                    }
                    let cubin = nvrtc::compile(&r.name, &r.source, target).unwrap_or_else(|e| panic!("{t:?}: {e}"));
                    Some((t.clone(), r, cubin.image))
                })
            })
            .collect();
        hs.into_iter().filter_map(|h| h.join().expect("compile thread")).collect()
    })
}

/// Device buffers for `p`'s inputs and outputs.
pub struct Bufs {
    /// One per program input.
    pub inputs: Vec<CudaBuffer>,
    /// One per program output.
    pub outputs: Vec<CudaBuffer>,
}

/// The kernel's argument pointers.
pub fn args(p: &Program, b: &Bufs) -> Vec<u64> {
    p.kernels[0]
        .args
        .iter()
        .map(|a| match p.buffers[a.buffer.0 as usize].kind {
            BufferKind::Input(i) => b.inputs[i].ptr(),
            BufferKind::Output(i) => b.outputs[i].ptr(),
            ref k => panic!("unexpected buffer {k:?}"),
        })
        .collect()
}

/// Bytes of output `i`.
pub fn out_bytes(p: &Program, i: usize) -> u64 {
    let o = &p.outputs[i];
    (o.shape.iter().product::<usize>() * o.dtype.size_bytes()) as u64
}

/// Launches the kernel `(r, cubin)` once on outputs poisoned with 0x7f bytes, returns them.
pub fn run_once(
    dev: &Device,
    stream: &Arc<Stream>,
    p: &Program,
    b: &Bufs,
    r: &Rendered,
    cubin: &[u8],
) -> Vec<HostTensor> {
    if r.grid[0] > 0 {
        let f = dev.load_function(cubin, &r.name).unwrap();
        let mut params = args(p, b);
        // A kernel with private scratch (split-k counters) must leave it reusable: it runs twice,
        // outputs poisoned again in between, and the second run is the one checked.
        let scratch = (r.scratch_bytes > 0).then(|| stream.alloc(r.scratch_bytes).unwrap());
        if let Some(s) = &scratch {
            stream.fill(s.ptr(), 0, r.scratch_bytes, "scratch").unwrap();
            params.push(s.ptr());
        }
        // The tensor maps a kernel asks for are encoded from the argument pointers.
        let l = sinter_cuda::backend::rendered_launch(dev, f, r, &params).unwrap_or_else(|e| panic!("{e}"));
        if scratch.is_some() {
            relaunch(stream, p, b, Some(&l));
        }
        relaunch(stream, p, b, Some(&l))
    } else {
        relaunch(stream, p, b, None)
    }
}

/// Poisons the outputs (0x7f bytes), queues `l` (if any) as its arguments stand, returns the
/// outputs.
pub fn relaunch(stream: &Arc<Stream>, p: &Program, b: &Bufs, l: Option<&Launch>) -> Vec<HostTensor> {
    for (i, o) in b.outputs.iter().enumerate() {
        stream.fill(o.ptr(), 0x7f, out_bytes(p, i), "poison").unwrap();
    }
    if let Some(l) = l {
        l.launch(stream).unwrap();
    }
    stream.synchronize("launch").unwrap_or_else(|e| panic!("{e}"));
    p.outputs
        .iter()
        .zip(&b.outputs)
        .map(|(o, buf)| HostTensor::from_le_bytes(o.dtype, o.shape.clone(), &buf.read().unwrap()).unwrap())
        .collect()
}

/// The CUDA backend with outputs poisoned before every run, or `None` (a skip line) without a
/// driver unless `SINTER_REQUIRE_CUDA=1`; a missing driver must be [`BackendError::NoDevice`].
pub fn cuda_backend(test: &str) -> Option<CudaBackend> {
    match CudaBackend::new() {
        Ok(mut b) => {
            b.set_poison_outputs(true);
            Some(b)
        }
        Err(e) => {
            assert!(
                !std::env::var("SINTER_REQUIRE_CUDA").is_ok_and(|v| v == "1"),
                "SINTER_REQUIRE_CUDA=1 but the CUDA backend is unavailable: {e}"
            );
            assert!(matches!(e, BackendError::NoDevice(_)), "a missing driver must be NoDevice: {e:?}");
            eprintln!("skipped {test}: {e}");
            None
        }
    }
}

/// [`cuda_backend`] as the compiler takes it.
pub fn backend(test: &str) -> Option<Arc<dyn Backend>> {
    cuda_backend(test).map(|b| Arc::new(b) as Arc<dyn Backend>)
}

/// Compile options in `mode` with neither a cubin cache nor debug dumps.
pub fn options(mode: Mode) -> CompileOptions {
    CompileOptions { mode, cache_dir: None, debug_dir: None, ..CompileOptions::default() }
}
