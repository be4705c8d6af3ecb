//! The on-disk cubin cache: `<cache dir>/cubin/<key>.cubin`, one file per compiled source.
//!
//! Contract:
//! * The key ([`CubinCache::key`]) is the blake3 hash of the source, the architecture, the NVRTC
//!   version and the full option list (include folders too), so a new NVRTC, a new target or a
//!   changed option never reuses an old image.
//! * An entry is a fixed header — magic `SNTRCUBN`, format version, log and image lengths, the
//!   blake3 hash of log + image — then the log, then the image ([`encode_entry`]). Reading it
//!   ([`decode_entry`]) checks every field, the exact length, the hash and that the image is an
//!   ELF file; an entry that fails any check is logged (`sinter::cache`), deleted and rebuilt,
//!   never trusted.
//! * Entries are written to a temporary file in the same folder, then renamed: a crash or a
//!   concurrent writer never leaves a half-written entry under the real name. A cache that
//!   cannot be written only logs; compilation never fails because of the cache.

use super::{Cubin, NvrtcError, Target, compile, options, version};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

const MAGIC: &[u8; 8] = b"SNTRCUBN";
const FORMAT_VERSION: u32 = 1;
/// magic + version + log length + image length + blake3.
const HEADER_LEN: usize = 8 + 4 + 8 + 8 + 32;

/// Why a cache entry was rejected.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EntryError {
    /// Shorter than the header.
    #[error("truncated header ({0} bytes)")]
    TooShort(usize),
    /// Not a sinter cubin entry.
    #[error("bad magic")]
    BadMagic,
    /// Written by another format version.
    #[error("format version {0}, expected {FORMAT_VERSION}")]
    Version(u32),
    /// The file length does not match the header's lengths.
    #[error("length {actual} bytes, header says {expected}")]
    Length {
        /// What the header says.
        expected: u64,
        /// What the file has.
        actual: u64,
    },
    /// The payload hash does not match.
    #[error("checksum mismatch")]
    Checksum,
    /// The log is not UTF-8.
    #[error("log is not UTF-8")]
    LogNotUtf8,
    /// The image is not an ELF file (every cubin is).
    #[error("image is not an ELF cubin")]
    NotElf,
}

/// Serializes a cubin as a cache entry (header, log, image).
pub fn encode_entry(c: &Cubin) -> Vec<u8> {
    let log = c.log.as_bytes();
    let mut hasher = blake3::Hasher::new();
    hasher.update(log);
    hasher.update(&c.image);
    let mut out = Vec::with_capacity(HEADER_LEN + log.len() + c.image.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&(log.len() as u64).to_le_bytes());
    out.extend_from_slice(&(c.image.len() as u64).to_le_bytes());
    out.extend_from_slice(hasher.finalize().as_bytes());
    out.extend_from_slice(log);
    out.extend_from_slice(&c.image);
    out
}

/// Parses and validates a cache entry written by [`encode_entry`].
pub fn decode_entry(bytes: &[u8]) -> Result<Cubin, EntryError> {
    if bytes.len() < HEADER_LEN {
        return Err(EntryError::TooShort(bytes.len()));
    }
    let (header, payload) = bytes.split_at(HEADER_LEN);
    if &header[..8] != MAGIC {
        return Err(EntryError::BadMagic);
    }
    let u64_at = |at: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&header[at..at + 8]);
        u64::from_le_bytes(b)
    };
    let mut v = [0u8; 4];
    v.copy_from_slice(&header[8..12]);
    let format = u32::from_le_bytes(v);
    if format != FORMAT_VERSION {
        return Err(EntryError::Version(format));
    }
    let (log_len, image_len) = (u64_at(12), u64_at(20));
    let expected = log_len.saturating_add(image_len);
    if expected != payload.len() as u64 {
        return Err(EntryError::Length { expected, actual: payload.len() as u64 });
    }
    if blake3::hash(payload).as_bytes() != &header[28..60] {
        return Err(EntryError::Checksum);
    }
    let (log, image) = payload.split_at(log_len as usize);
    let log = std::str::from_utf8(log).map_err(|_| EntryError::LogNotUtf8)?;
    if !image.starts_with(b"\x7fELF") {
        return Err(EntryError::NotElf);
    }
    Ok(Cubin { image: image.to_vec(), log: log.to_string(), seconds: 0.0 })
}

/// The on-disk cubin cache (see the module doc). `Clone` and cheap; shareable across threads.
///
/// A cache made by [`CubinCache::open`] also remembers, in memory, every cubin it compiled or
/// read (shared by its clones), so a load that compiles its sources in one parallel batch first
/// finds them there when it builds its steps one by one (a library step's epilogue kernel), also
/// with the disk cache off.
#[derive(Clone, Debug)]
pub struct CubinCache {
    /// `<root>/cubin`, or `None` when caching is off.
    dir: Option<PathBuf>,
    /// Cubins by key, compiled or read by this cache or a clone; `None` for [`CubinCache::disabled`].
    memo: Option<Arc<Mutex<HashMap<String, Cubin>>>>,
    /// Whether the compiles behind this cache may use NVRTC's own cache ([`Target::nvrtc_cache`]).
    nvrtc_cache: bool,
}

impl PartialEq for CubinCache {
    /// Two caches are equal when they read and write the same folder (their memories aside).
    fn eq(&self, other: &CubinCache) -> bool {
        self.dir == other.dir
    }
}

impl Eq for CubinCache {}

impl CubinCache {
    /// The cache under `dir/cubin`; with `None`, under the default cache folder
    /// (`SINTER_CACHE_DIR`, else `$XDG_CACHE_HOME/sinter`, else `~/.cache/sinter`, as the
    /// program cache: `sinter_core::compile::default_cache_dir`), or off when `SINTER_CACHE=0`.
    /// Nothing is created until the first store.
    pub fn open(dir: Option<&Path>) -> CubinCache {
        let root = dir.map(Path::to_path_buf).or_else(sinter_core::compile::default_cache_dir);
        CubinCache { dir: root.map(|r| r.join("cubin")), memo: Some(Arc::default()), nvrtc_cache: true }
    }

    /// This cache with NVRTC's own cache allowed or not for the compiles behind it (a cold
    /// compile measured cold: `LoadOptions::bypass_compiler_caches`).
    pub fn with_nvrtc_cache(self, on: bool) -> CubinCache {
        CubinCache { nvrtc_cache: on, ..self }
    }

    /// The NVRTC target for compute capability `sm` of the compiles behind this cache.
    pub fn target(&self, sm: (u32, u32)) -> Target {
        Target { nvrtc_cache: self.nvrtc_cache, ..Target::sm(sm) }
    }

    /// A cache that never hits and never writes (nor remembers).
    pub fn disabled() -> CubinCache {
        CubinCache { dir: None, memo: None, nvrtc_cache: true }
    }

    /// The folder entries live in (`<root>/cubin`), if caching is on.
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// The cache key of `source` compiled for `target` with this NVRTC (hex blake3 of the
    /// source, architecture, NVRTC version and option list). Whether NVRTC's own cache was
    /// allowed ([`Target::nvrtc_cache`]) is not part of it: the cubin is the same either way, and
    /// a warm load after a cold compile that bypassed NVRTC's cache must find what it compiled
    /// (keyed apart, `sinter bench`'s warm start compiled everything again, 0.52 s for the d64
    /// attention workload against 0.049 once NVRTC's cache held it; session 28).
    pub fn key(source: &str, target: &Target) -> Result<String, NvrtcError> {
        let (major, minor) = version()?;
        let opts = options(&Target { nvrtc_cache: true, ..target.clone() }, source)?;
        Ok(key_of(source, &target.arch(), (major, minor), &opts))
    }

    /// The path of the entry for `key`.
    pub fn path(&self, key: &str) -> Option<PathBuf> {
        self.dir.as_ref().map(|d| d.join(format!("{key}.cubin")))
    }

    /// The entry for `key`, if present and valid. A corrupt entry is logged, deleted and
    /// reported as absent.
    pub fn load(&self, key: &str) -> Option<Cubin> {
        let path = self.path(key)?;
        let bytes = std::fs::read(&path).ok()?;
        match decode_entry(&bytes) {
            Ok(c) => Some(c),
            Err(e) => {
                tracing::warn!(target: "sinter::cache", "corrupt cubin cache entry {} ({e}); rebuilding", path.display());
                let _ = std::fs::remove_file(&path);
                None
            }
        }
    }

    /// Writes the entry for `key` (temporary file, then rename). A no-op when caching is off.
    pub fn store(&self, key: &str, c: &Cubin) -> std::io::Result<()> {
        let (Some(dir), Some(path)) = (&self.dir, self.path(key)) else { return Ok(()) };
        std::fs::create_dir_all(dir)?;
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let tmp = dir.join(format!(".{key}.{}.{}.tmp", std::process::id(), SEQ.fetch_add(1, Ordering::Relaxed)));
        let written = std::fs::write(&tmp, encode_entry(c)).and_then(|()| std::fs::rename(&tmp, &path));
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        written
    }

    /// The cubin of `source` for `target`: the embedded one when it was compiled ahead of time
    /// ([`crate::aot::lookup`]; `true`, no NVRTC, the cache untouched), else from the cache when a
    /// valid entry exists (`true`), else compiled with [`compile`] and stored (`false`). A failed
    /// store is logged, not returned.
    pub fn compile_cached(&self, name: &str, source: &str, target: &Target) -> Result<(Cubin, bool), NvrtcError> {
        if crate::render::ptx::is_ptx(source) {
            return Ok((super::ptx_image(source), false));
        }
        // Before the key: it asks NVRTC for its version, and a hit needs no NVRTC.
        if let Some(c) = crate::aot::lookup(source, target) {
            return Ok((c, true));
        }
        let key = Self::key(source, target)?;
        if let Some(c) = self.cached(name, &key) {
            return Ok((c, true));
        }
        let c = compile(name, source, target)?;
        self.keep(&key, &c);
        Ok((c, false))
    }

    /// The cubin under `key` (of program `name`): remembered in memory, else a valid disk entry
    /// (then remembered), with `seconds` 0.
    pub fn cached(&self, name: &str, key: &str) -> Option<Cubin> {
        let remembered = self.memo.as_ref().and_then(|m| m.lock().unwrap_or_else(|p| p.into_inner()).get(key).cloned());
        if let Some(c) = remembered {
            return Some(Cubin { seconds: 0.0, ..c });
        }
        let c = self.load(key)?;
        tracing::debug!(target: "sinter::cache", "cubin cache hit {name} ({key})");
        self.remember(key, &c);
        Some(c)
    }

    /// Remembers `c` under `key` and writes its disk entry (a failed write is logged).
    pub fn keep(&self, key: &str, c: &Cubin) {
        self.remember(key, c);
        if let Err(e) = self.store(key, c) {
            tracing::warn!(
                target: "sinter::cache",
                "could not write cubin cache entry {}: {e}",
                self.path(key).map(|p| p.display().to_string()).unwrap_or_default()
            );
        }
    }

    fn remember(&self, key: &str, c: &Cubin) {
        if let Some(m) = &self.memo {
            m.lock().unwrap_or_else(|p| p.into_inner()).insert(key.to_string(), Cubin { seconds: 0.0, ..c.clone() });
        }
    }
}

/// The key of a compile (see [`CubinCache::key`]); fields are NUL-separated so no two different
/// inputs hash the same bytes.
fn key_of(source: &str, arch: &str, nvrtc: (i32, i32), opts: &[String]) -> String {
    let mut h = blake3::Hasher::new();
    h.update(b"sinter-cubin\0");
    h.update(&FORMAT_VERSION.to_le_bytes());
    h.update(source.as_bytes());
    h.update(b"\0");
    h.update(arch.as_bytes());
    h.update(b"\0");
    h.update(format!("nvrtc {}.{}", nvrtc.0, nvrtc.1).as_bytes());
    for o in opts {
        h.update(b"\0");
        h.update(o.as_bytes());
    }
    h.finalize().to_hex().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Cubin {
        let mut image = b"\x7fELF".to_vec();
        image.extend((0..200u32).map(|i| (i * 7) as u8));
        Cubin { image, log: "ptxas info    : Used 10 registers\n".into(), seconds: 0.0 }
    }

    #[test]
    fn entry_round_trips() {
        let c = sample();
        assert_eq!(decode_entry(&encode_entry(&c)), Ok(c));
        let empty_log = Cubin { log: String::new(), ..sample() };
        assert_eq!(decode_entry(&encode_entry(&empty_log)), Ok(empty_log));
    }

    #[test]
    fn every_kind_of_corruption_is_rejected() {
        let good = encode_entry(&sample());
        assert_eq!(decode_entry(&good[..10]), Err(EntryError::TooShort(10)));
        // Truncated payload, and trailing garbage.
        assert!(matches!(decode_entry(&good[..good.len() - 1]), Err(EntryError::Length { .. })));
        let mut longer = good.clone();
        longer.push(0);
        assert!(matches!(decode_entry(&longer), Err(EntryError::Length { .. })));
        let mut bad = good.clone();
        bad[0] ^= 1;
        assert_eq!(decode_entry(&bad), Err(EntryError::BadMagic));
        let mut bad = good.clone();
        bad[8] = 9;
        assert_eq!(decode_entry(&bad), Err(EntryError::Version(9)));
        // One flipped bit in the image, in the log, in the stored hash.
        for at in [good.len() - 1, HEADER_LEN + 2, 40] {
            let mut bad = good.clone();
            bad[at] ^= 0x10;
            assert_eq!(decode_entry(&bad), Err(EntryError::Checksum), "flip at {at}");
        }
        // Lengths that overflow when added.
        let mut bad = good.clone();
        bad[12..20].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(matches!(decode_entry(&bad), Err(EntryError::Length { .. })));
        // A consistent entry whose image is not a cubin.
        let not_elf = Cubin { image: b"PTX".to_vec(), log: String::new(), seconds: 0.0 };
        assert_eq!(decode_entry(&encode_entry(&not_elf)), Err(EntryError::NotElf));
    }

    #[test]
    fn store_then_load_hits_and_missing_keys_miss() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = CubinCache::open(Some(tmp.path()));
        assert_eq!(cache.dir(), Some(tmp.path().join("cubin").as_path()));
        assert_eq!(cache.load("abc"), None);
        cache.store("abc", &sample()).unwrap();
        assert_eq!(cache.load("abc"), Some(sample()));
        assert_eq!(cache.load("abd"), None);
        // Only the entry is left: no temporary files.
        let names: Vec<_> =
            std::fs::read_dir(tmp.path().join("cubin")).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, vec![std::ffi::OsString::from("abc.cubin")]);
    }

    #[test]
    fn corrupt_and_truncated_entries_are_rejected_and_deleted() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = CubinCache::open(Some(tmp.path()));
        let good = encode_entry(&sample());
        for (key, bytes) in [
            ("trunc", good[..good.len() / 2].to_vec()),
            ("junk", b"not a cache entry at all".to_vec()),
            ("flip", {
                let mut b = good.clone();
                b[HEADER_LEN + 5] ^= 1;
                b
            }),
        ] {
            let path = cache.path(key).unwrap();
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &bytes).unwrap();
            assert_eq!(cache.load(key), None, "{key}");
            assert!(!path.exists(), "{key}: corrupt entry left in place");
        }
    }

    #[test]
    fn disabled_cache_never_stores() {
        let cache = CubinCache::disabled();
        cache.store("abc", &sample()).unwrap();
        assert_eq!(cache.load("abc"), None);
        assert_eq!(cache.path("abc"), None);
    }

    #[test]
    fn key_depends_on_every_input() {
        let opts = vec!["-std=c++17".to_string()];
        let base = key_of("src", "sm_90a", (13, 0), &opts);
        assert_eq!(base, key_of("src", "sm_90a", (13, 0), &opts));
        assert_ne!(base, key_of("src2", "sm_90a", (13, 0), &opts));
        assert_ne!(base, key_of("src", "sm_90", (13, 0), &opts));
        assert_ne!(base, key_of("src", "sm_90a", (13, 1), &opts));
        assert_ne!(base, key_of("src", "sm_90a", (13, 0), &["-std=c++20".to_string()]));
        // Field boundaries matter.
        assert_ne!(key_of("ab", "c", (13, 0), &[]), key_of("a", "bc", (13, 0), &[]));
    }
}
