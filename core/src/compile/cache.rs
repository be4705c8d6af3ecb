//! The on-disk program cache: one checksummed JSON entry per key, written by rename; damaged or
//! invalid entries are removed and rebuilt.

use crate::kernel::Program;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

#[derive(Serialize, Deserialize)]
pub(super) struct CacheEntry {
    pub(super) checksum: String,
    pub(super) program: String,
}

pub(super) fn cache_path(dir: &Path, key: &str) -> PathBuf {
    dir.join("programs").join(format!("{key}.json"))
}

pub(super) fn cache_load(dir: &Path, key: &str) -> Option<Program> {
    let path = cache_path(dir, key);
    let bytes = std::fs::read(&path).ok()?;
    // Nothing read is trusted: the checksum catches damaged files, the kernel-IR verifier a program
    // no backend would accept (an entry written by another version, or edited).
    let parsed = serde_json::from_slice::<CacheEntry>(&bytes).ok().and_then(|e| {
        (blake3::hash(e.program.as_bytes()).to_hex().as_str() == e.checksum)
            .then(|| serde_json::from_str::<Program>(&e.program).ok())
            .flatten()
            .filter(|p| crate::kernel::interp::validate(p).is_ok())
    });
    if parsed.is_none() {
        tracing::warn!(target: "sinter::cache", "corrupt cache entry {} ignored; rebuilding", path.display());
        let _ = std::fs::remove_file(&path);
    }
    parsed
}

/// A temporary name beside `path`, unique per process *and* call (threads of one process compiling
/// the same program write at the same time: a name from the process id alone interleaves them).
pub fn unique_tmp(path: &Path) -> PathBuf {
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    path.with_file_name(format!(".{name}.{}.{n}.tmp", std::process::id()))
}

pub(super) fn cache_store(dir: &Path, key: &str, p: &Program) -> std::io::Result<()> {
    let program = serde_json::to_string(p).map_err(std::io::Error::other)?;
    let entry = CacheEntry { checksum: blake3::hash(program.as_bytes()).to_hex().to_string(), program };
    let path = cache_path(dir, key);
    std::fs::create_dir_all(path.parent().unwrap_or(dir))?;
    // Write then rename, so a crash never leaves a half-written entry under the real name.
    let tmp = unique_tmp(&path);
    std::fs::write(&tmp, serde_json::to_vec(&entry).map_err(std::io::Error::other)?)?;
    std::fs::rename(&tmp, &path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}
