//! Kernels compiled ahead of time, at build time, and embedded in the binary.
//!
//! Some kernels are rendered in a shape-generic form (extents passed as run-time parameters), so
//! their CUDA C++ text is the same for every shape. Those sources are kept as files
//! `backend-cuda/aot/*.cu`; `build.rs` compiles each with NVRTC, with exactly the options of a
//! run-time compile (`nvrtc::options`: the fixed part is one list, `nvrtc/flags.rs`, shared with
//! `build.rs`), for every architecture of its `AOT_SMS` list (today sm 9.0, as `sm_90a`), and
//! embeds the results here ([`table`]).
//!
//! Contract:
//! * What is embedded, per file and architecture ([`Entry`]): the cubin, the NVRTC log (the
//!   ptxas `-v` lines [`crate::nvrtc::resources`] reads: registers, spills, shared memory), the
//!   blake3 hash of the file's exact text and the NVRTC version that compiled it.
//! * The key is the hash of the exact source text and the architecture ([`Target::arch`]): an
//!   entry is used only for a source byte-identical to its file, compiled for the same
//!   architecture. Anything else (another shape baked in, a changed renderer, another GPU) is a
//!   miss and compiles with NVRTC as before.
//! * A hit ([`lookup`]) needs no NVRTC at run time: it is answered before the cubin cache's key
//!   (which asks NVRTC for its version) in [`crate::nvrtc::compile_parallel`] and
//!   [`crate::nvrtc::CubinCache::compile_cached`], counts as "from a cache" there, and neither
//!   reads nor writes the on-disk cubin cache. The backend still requires libnvrtc to open
//!   ([`CudaBackend::with_ordinal`](crate::CudaBackend::with_ordinal)): the table covers a few
//!   attention variants, and every other CUDA C++ kernel (epilogues, max-autotune's candidates)
//!   compiles in the process.
//! * The cubin is what this build's NVRTC made ([`Entry::nvrtc`]); the driver must accept it, as
//!   for any cubin of that NVRTC (a CUDA 13 driver for NVRTC 13).
//! * `SINTER_AOT=0` turns lookups off (A/B runs against NVRTC); read once per process.
//!   [`hits`] counts the hits of the process (`SINTER_LOG=compile`'s load line shows a load's).
//! * A build never fails for lack of NVRTC: without it (or with `SINTER_AOT_BUILD=0`, or for a
//!   file that does not compile) `build.rs` warns (`cargo:warning`) and leaves the kernel out of
//!   the table, and the kernel compiles at run time. An empty or missing `aot/` gives an empty
//!   table, silently.

use crate::nvrtc::{Cubin, Target};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

/// One kernel source compiled ahead of time for one architecture.
#[derive(Debug)]
pub struct Entry {
    /// The architecture it was compiled for, as [`Target::arch`] names it (`sm_90a`).
    pub arch: &'static str,
    /// The file of `backend-cuda/aot/` it came from (`name.cu`).
    pub file: &'static str,
    /// The blake3 hash (hex) of the file's exact text ([`source_hash`]).
    pub source_hash: &'static str,
    /// The cubin (an ELF image).
    pub cubin: &'static [u8],
    /// The NVRTC log (ptxas `-v` output).
    pub log: &'static str,
    /// The NVRTC version (major, minor) that compiled it.
    pub nvrtc: (i32, i32),
}

/// The table `build.rs` wrote (`$OUT_DIR/aot_table.rs`): one entry per file and architecture
/// that compiled, files in name order.
static TABLE: &[Entry] = include!(concat!(env!("OUT_DIR"), "/aot_table.rs"));

/// Lookups that found an entry in this process.
static HITS: AtomicUsize = AtomicUsize::new(0);

/// The environment variable that, at `0`, turns lookups off.
pub const ENV: &str = "SINTER_AOT";

/// Every embedded entry.
pub fn table() -> &'static [Entry] {
    TABLE
}

/// Every embedded entry as (architecture, file).
pub fn entries() -> impl Iterator<Item = (&'static str, &'static str)> {
    TABLE.iter().map(|e| (e.arch, e.file))
}

/// The key of a source: the blake3 hash (hex) of its exact text.
pub fn source_hash(source: &str) -> String {
    blake3::hash(source.as_bytes()).to_hex().to_string()
}

/// Whether lookups are on: [`ENV`] is not `0` (decided once per process).
pub fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| enabled_by(std::env::var(ENV).ok().as_deref()))
}

/// Whether lookups are on for the value `value` of [`ENV`] (`None`: unset).
fn enabled_by(value: Option<&str>) -> bool {
    value.is_none_or(|v| v.trim() != "0")
}

/// The entry for exactly `source` on architecture `arch`, whether lookups are on or not (and not
/// counted as a hit).
pub fn find(source: &str, arch: &str) -> Option<&'static Entry> {
    if !TABLE.iter().any(|e| e.arch == arch) {
        return None;
    }
    let hash = source_hash(source);
    TABLE.iter().find(|e| e.arch == arch && e.source_hash == hash)
}

/// The embedded cubin of `source` for `target` (`seconds` 0), counted in [`hits`]; `None` when
/// lookups are off ([`ENV`]) or no entry has exactly this source on this architecture.
pub fn lookup(source: &str, target: &Target) -> Option<Cubin> {
    if TABLE.is_empty() || !enabled() {
        return None;
    }
    let e = find(source, &target.arch())?;
    HITS.fetch_add(1, Ordering::Relaxed);
    tracing::debug!(target: "sinter::cache", "compiled ahead of time: {} ({})", e.file, e.arch);
    Some(Cubin { image: e.cubin.to_vec(), log: e.log.to_string(), seconds: 0.0 })
}

/// How many entries are embedded for `target`'s architecture while lookups are on: a backend on
/// a machine without NVRTC opens when there are some.
pub fn available(target: &Target) -> usize {
    if !enabled() {
        return 0;
    }
    let arch = target.arch();
    TABLE.iter().filter(|e| e.arch == arch).count()
}

/// Lookups of this process that found an entry.
pub fn hits() -> usize {
    HITS.load(Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_source_misses() {
        let src = "extern \"C\" __global__ void sinter_aot_never_embedded(float* a) { a[0] = 42.0f; }\n";
        let before = hits();
        assert!(lookup(src, &Target::hopper()).is_none());
        assert!(find(src, "sm_90a").is_none());
        assert_eq!(hits(), before);
    }

    #[test]
    fn the_switch_turns_lookups_off_only_at_zero() {
        assert!(enabled_by(None));
        assert!(enabled_by(Some("1")));
        assert!(enabled_by(Some("")));
        assert!(!enabled_by(Some("0")));
        assert!(!enabled_by(Some(" 0\n")));
    }

    #[test]
    fn entries_are_elf_cubins_keyed_by_hash_and_arch() {
        for e in table() {
            assert!(e.cubin.starts_with(b"\x7fELF"), "{}: not an ELF image", e.file);
            assert_eq!(e.source_hash.len(), 64, "{}", e.file);
            assert!(e.arch.starts_with("sm_") && e.file.ends_with(".cu"), "{e:?}");
        }
        assert_eq!(entries().count(), table().len());
    }

    #[test]
    fn hashes_are_of_the_exact_text() {
        assert_eq!(source_hash("abc"), blake3::hash(b"abc").to_hex().to_string());
        assert_ne!(source_hash("abc"), source_hash("abc\n"));
    }
}
