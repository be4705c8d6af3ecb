//! The shared conformance suite (`sinter_core::testsuite`) on the kernel-IR interpreter: every
//! case compiled through the scheduler and run on the host, fused and unfused. (The one-argument
//! form of the macro: the label, `interp`, comes from the package name.)

use std::sync::Arc;

use sinter_core::backend::Backend;
use sinter_core::kernel::interp::InterpBackend;

/// The interpreter is always available.
fn backend() -> Option<Arc<dyn Backend>> {
    Some(Arc::new(InterpBackend::new()))
}

sinter_core::backend_suite!(backend);
