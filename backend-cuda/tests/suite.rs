//! The shared conformance suite (`sinter_core::testsuite`) on the CUDA backend. Without a driver
//! (no libcuda, no libnvrtc, no GPU) every test prints `skipped: no cuda device` and passes,
//! unless `SINTER_REQUIRE_CUDA=1` (the device run sets it). Outputs are poisoned (0xFF) before
//! every run, so an element a kernel never writes shows.

use std::sync::Arc;

use sinter_core::backend::Backend;
use sinter_cuda::CudaBackend;

/// The CUDA backend (`SINTER_CUDA_DEVICE`, default 0) with outputs poisoned before every run, or
/// `None` (after saying why) without one.
fn backend() -> Option<Arc<dyn Backend>> {
    match CudaBackend::new() {
        Ok(mut b) => {
            b.set_poison_outputs(true);
            eprintln!("cuda suite on {}", b.device_name());
            Some(Arc::new(b))
        }
        Err(e) => {
            eprintln!("no CUDA device: {e}");
            None
        }
    }
}

sinter_core::backend_suite!(backend, "cuda");
