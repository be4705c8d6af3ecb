//! The host-memory budget: every allocation sized from a model or from input data (a tensor the
//! CPU reference or the kernel-IR interpreter computes, a constant the ONNX importer decodes or
//! folds, a shape inferred at import) is checked against it *before* it happens, so an absurd
//! size is an [`Error::Memory`] naming the node and the size instead of an abort in the allocator.
//!
//! The limit is `SINTER_HOST_MEMORY_LIMIT` (bytes, optionally with a `K`, `M`, `G` or `T` binary
//! suffix: `SINTER_HOST_MEMORY_LIMIT=8G`) or, unset, half of the machine's physical memory
//! (`/proc/meminfo`; [`FALLBACK_LIMIT`] where that cannot be read). The check is per
//! allocation, not a running total: one tensor may take at most the whole budget.

use crate::error::Error;
use std::sync::OnceLock;

/// The variable that sets the host-memory limit in bytes.
pub const ENV: &str = "SINTER_HOST_MEMORY_LIMIT";

/// The limit when neither the variable nor the physical memory size is known (8 GiB).
pub const FALLBACK_LIMIT: u64 = 8 << 30;

/// Bytes the CPU reference holds per element of a value it computes: every element is an `f64`
/// or `i64`, and movement ops build one 8-byte source index per element beside it.
pub const REFERENCE_BYTES_PER_ELEMENT: u64 = 16;

/// The host-memory limit in bytes (see the module docs).
pub fn host_limit() -> u64 {
    if let Ok(s) = std::env::var(ENV)
        && let Some(v) = parse_bytes(&s)
    {
        return v;
    }
    static DEFAULT: OnceLock<u64> = OnceLock::new();
    *DEFAULT.get_or_init(|| physical_memory().map_or(FALLBACK_LIMIT, |m| m / 2))
}

/// Parses `123`, `64K`, `512M`, `8G`, `1T` (binary multiples; `KiB`-style and `B` suffixes too).
fn parse_bytes(s: &str) -> Option<u64> {
    let s = s.trim();
    let digits = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(digits);
    let n: u64 = num.parse().ok()?;
    let shift = match unit.trim().to_ascii_uppercase().as_str() {
        "" | "B" => 0,
        "K" | "KB" | "KIB" => 10,
        "M" | "MB" | "MIB" => 20,
        "G" | "GB" | "GIB" => 30,
        "T" | "TB" | "TIB" => 40,
        _ => return None,
    };
    n.checked_mul(1 << shift)
}

/// Total physical memory (Linux `/proc/meminfo`).
fn physical_memory() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = s.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kb.checked_mul(1024)
}

/// Errs with [`Error::Memory`] when `bytes` exceed the limit; `what` names the allocation (the
/// node and its shape) and is only built on failure.
pub fn check(bytes: u64, what: impl FnOnce() -> String) -> Result<(), Error> {
    let limit = host_limit();
    if bytes > limit { Err(Error::Memory { what: what(), bytes, limit }) } else { Ok(()) }
}

/// The element count of static extents, saturating at `u64::MAX` (absurd shapes must not
/// overflow before they are refused).
pub fn elems(dims: &[usize]) -> u64 {
    dims.iter().fold(1u64, |a, &d| a.saturating_mul(d as u64))
}

/// Bytes of `elems` elements of `elem_bytes` each, saturating at `u64::MAX`.
pub fn bytes_of(elems: u64, elem_bytes: u64) -> u64 {
    elems.saturating_mul(elem_bytes)
}

/// A vector of `n` copies of `fill`, checked against the budget and allocated fallibly
/// (`try_reserve`): an allocation the system refuses is an [`Error::Memory`] too, never an abort.
pub fn try_filled<T: Clone>(n: usize, fill: T, what: impl Fn() -> String) -> Result<Vec<T>, Error> {
    let bytes = bytes_of(n as u64, std::mem::size_of::<T>() as u64);
    check(bytes, &what)?;
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| Error::Memory { what: what(), bytes, limit: host_limit() })?;
    v.resize(n, fill);
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_binary_suffixes() {
        assert_eq!(parse_bytes("1234"), Some(1234));
        assert_eq!(parse_bytes("8G"), Some(8 << 30));
        assert_eq!(parse_bytes("512 MiB"), Some(512 << 20));
        assert_eq!(parse_bytes("2t"), Some(2 << 40));
        assert_eq!(parse_bytes("lots"), None);
        assert_eq!(parse_bytes("99999999999T"), None);
    }

    /// A broadcast of a scalar to 2^40 elements used to abort the CPU reference and the
    /// interpreter in the allocator; both now refuse it before allocating, naming the node.
    #[test]
    fn huge_values_are_refused_before_allocating() {
        use crate::backend::Backend;
        use crate::prelude::*;
        let g = Graph::new();
        let x = g.input("x", DType::F32, [1]);
        let y = x.expand([1usize << 20, 1 << 20]) * 2.0;
        g.output(&y);
        let one = HostTensor::f32([1], vec![1.0]).unwrap();
        let e = crate::cpu::run(&g, std::slice::from_ref(&one)).unwrap_err();
        assert!(matches!(e, Error::Memory { .. }), "{e}");
        assert!(e.to_string().contains("expand") && e.to_string().contains("1048576"), "{e}");
        // The interpreter: compiling may succeed (nothing is allocated yet); running must not.
        let backend: std::sync::Arc<dyn Backend> = std::sync::Arc::new(crate::kernel::interp::InterpBackend::new());
        let opts = crate::compile::CompileOptions { cache_dir: None, ..Default::default() };
        let r = crate::compile::compile(&g, backend, opts).and_then(|c| c.run(&[one]));
        let Err(e) = r else { panic!("a 4 TiB result cannot be computed") };
        assert!(e.to_string().contains("host memory limit"), "{e}");
    }

    #[test]
    fn the_default_limit_is_positive() {
        assert!(host_limit() > 0);
        assert!(check(u64::MAX, || "everything".into()).is_err());
    }
}
