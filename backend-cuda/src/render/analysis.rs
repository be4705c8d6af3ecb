//! Kernel-IR walks the templates share (core's [`sinter_core::kernel::analysis`], shared with the
//! WGSL renderer and the interpreter), and the structural checks rendering relies on (operands precede users,
//! arguments exist and are used as declared, index operands that must be non-negative are).

use sinter_core::kernel::Kernel;

use super::RenderError;

pub(crate) use sinter_core::kernel::analysis::{
    acc_uses, all_indices, check_kernel, closure, depends_on, operands, store_roots, var_range,
};

/// [`check_kernel`] as a render error.
pub(crate) fn validate(k: &Kernel) -> Result<(), RenderError> {
    check_kernel(k).map_err(|what| RenderError::Unsupported { kernel: k.name.clone(), what })
}
