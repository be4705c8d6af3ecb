//! The shared conformance suite (`sinter_core::testsuite`) on the WGSL backend: whatever adapter
//! `SINTER_ADAPTER` picks (CI: `cpu`, lavapipe). Without an adapter every test prints `skipped: no
//! wgsl device` and passes, unless `SINTER_REQUIRE_GPU=1`.

use std::sync::Arc;

use sinter_core::backend::Backend;
use sinter_wgsl::backend::WgslBackend;

/// The WGSL backend on the chosen adapter, or `None` (after saying why) without one.
fn backend() -> Option<Arc<dyn Backend>> {
    match WgslBackend::new() {
        Ok(b) => {
            eprintln!("wgsl suite on {}", b.device_name());
            Some(Arc::new(b))
        }
        Err(e) => {
            eprintln!("no WGSL adapter: {e}");
            None
        }
    }
}

sinter_core::backend_suite!(backend, "wgsl");
