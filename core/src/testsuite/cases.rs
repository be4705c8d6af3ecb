//! The case list: every case of the suite, gathered from the files that build them
//! (`ops.rs`: elementwise ops and casts; `layout.rs`: movement, gathers and reductions;
//! `patterns.rs`: fused patterns, matmul, convolution and dtypes), and the sizes they share.
//!
//! Adding a case here without adding its name to the list in `backend_suite!` (core/src/testsuite/
//! mod.rs) fails `the_macro_list_and_cases_agree` and every backend's `suite_lists_every_case`.

use super::{Case, Instance};

/// Element counts of 1-D cases: one element, a partial vector, one short of a power of two and
/// one past one (never a multiple of a workgroup or a vec4).
pub(crate) const SIZES: [usize; 4] = [1, 7, 1023, 4097];

/// `(rows, cols)` of 2-D cases: 4097 along one dimension only.
pub(crate) const SHAPES_2D: [(usize, usize); 5] = [(1, 1), (7, 1), (5, 7), (3, 1023), (2, 4097)];

/// Every case of the suite (names are unique Rust identifiers).
pub fn cases() -> Vec<Case> {
    let mut v = super::ops::cases();
    v.extend(super::layout::cases());
    v.extend(super::patterns::cases());
    v
}

/// A case whose instances come from `f` (a plain function or a capturing closure).
pub(crate) fn case(
    name: impl Into<String>,
    f: impl Fn() -> Result<Vec<Instance>, String> + Send + Sync + 'static,
) -> Case {
    Case::new(name, false, f)
}

/// A fused-pattern case (also run with fusion off).
pub(crate) fn fused(
    name: impl Into<String>,
    f: impl Fn() -> Result<Vec<Instance>, String> + Send + Sync + 'static,
) -> Case {
    Case::new(name, true, f)
}

/// Collects one instance per item of `items`.
pub(crate) fn each<T: Copy>(items: &[T], f: impl Fn(T) -> Result<Instance, String>) -> Result<Vec<Instance>, String> {
    items.iter().map(|&x| f(x)).collect()
}
