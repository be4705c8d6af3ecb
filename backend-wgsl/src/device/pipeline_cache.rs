//! The driver's pipeline cache persisted on disk, behind a header that detects corrupt files.
//!
//! File: `<cache dir>/pipelines/wgpu30-<adapter cache key>.bin`, laid out as
//! `b"SNTRPLC1"` (8 bytes), payload length (u64 little-endian), BLAKE3 hash of the payload (32 bytes),
//! payload (wgpu's `PipelineCache::get_data()`). A file whose magic, length or hash does not match is
//! reported as [`PipelineCacheStatus::Corrupt`], deleted, and the cache starts empty; its bytes never reach
//! the driver. wgpu additionally checks that the payload was made by the same wgpu, adapter and driver
//! (`fallback: true`). A file whose framing is intact but whose driver data breaks pipeline creation
//! (the first pipeline created with it fails, then succeeds without it) is discarded the same way
//! ([`DiskPipelineCache::discard`]): deleted with a warning naming it, and the device goes on
//! without a cache, so one bad file never breaks every compile.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use super::DeviceError;

/// File magic, version 1.
const MAGIC: &[u8; 8] = b"SNTRPLC1";
/// Bytes before the payload.
const HEADER: usize = 8 + 8 + 32;

/// How the on-disk pipeline cache was found when the device was created.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum PipelineCacheStatus {
    /// Turned off in [`super::DeviceOptions`].
    Disabled,
    /// The backend has no pipeline cache (only Vulkan has one in wgpu 30).
    Unsupported,
    /// No cache directory could be determined.
    NoDirectory,
    /// No file yet: the cache starts empty and is written later.
    Fresh,
    /// The file was valid and its payload handed to the driver.
    Loaded {
        /// Payload bytes.
        bytes: u64,
    },
    /// The file was corrupt (or unreadable): ignored, deleted, rebuilt.
    Corrupt {
        /// What was wrong.
        reason: String,
    },
}

/// The pipeline cache of one device and where it lives.
pub(crate) struct DiskPipelineCache {
    /// The cache and its status; the cache becomes `None` when discarded.
    state: Mutex<(Option<wgpu::PipelineCache>, PipelineCacheStatus)>,
    path: Option<PathBuf>,
}

/// Checks the header and hash of a cache file's bytes; returns the payload.
pub(crate) fn decode(bytes: &[u8]) -> Result<&[u8], String> {
    if bytes.len() < HEADER {
        return Err(format!("file of {} bytes is shorter than the {HEADER}-byte header", bytes.len()));
    }
    if &bytes[..8] != MAGIC {
        return Err("bad magic".to_string());
    }
    let mut len = [0u8; 8];
    len.copy_from_slice(&bytes[8..16]);
    let len = u64::from_le_bytes(len);
    let payload = &bytes[HEADER..];
    if payload.len() as u64 != len {
        return Err(format!("header says {len} payload bytes, file has {}", payload.len()));
    }
    if blake3::hash(payload).as_bytes() != &bytes[16..48] {
        return Err("payload hash mismatch".to_string());
    }
    Ok(payload)
}

/// Frames a payload with the header.
pub(crate) fn encode(payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + payload.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    out.extend_from_slice(blake3::hash(payload).as_bytes());
    out.extend_from_slice(payload);
    out
}

impl DiskPipelineCache {
    /// No cache, for the given reason.
    pub(crate) fn disabled(status: PipelineCacheStatus) -> Self {
        Self { state: Mutex::new((None, status)), path: None }
    }

    /// Loads (or starts) the cache for `key` under `dir`. Never fails: problems become the status.
    pub(crate) fn open(device: &wgpu::Device, dir: Option<PathBuf>, key: &str) -> Self {
        let Some(dir) = dir else { return Self::disabled(PipelineCacheStatus::NoDirectory) };
        let path = dir.join("pipelines").join(format!("wgpu30-{key}.bin"));
        let (data, status) = match std::fs::read(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => (None, PipelineCacheStatus::Fresh),
            Err(e) => (None, PipelineCacheStatus::Corrupt { reason: format!("{}: unreadable: {e}", path.display()) }),
            Ok(bytes) => match decode(&bytes) {
                Ok(payload) => (Some(payload.to_vec()), PipelineCacheStatus::Loaded { bytes: payload.len() as u64 }),
                Err(reason) => {
                    tracing::warn!("pipeline cache {} is corrupt ({reason}); rebuilding it", path.display());
                    let _ = std::fs::remove_file(&path);
                    (None, PipelineCacheStatus::Corrupt { reason: format!("{}: {reason}", path.display()) })
                }
            },
        };
        // SAFETY: `data` is either None or bytes this module wrote from `PipelineCache::get_data()` for the
        // same adapter key, verified by length and hash; wgpu checks its own header (wgpu version, adapter,
        // driver) and with `fallback: true` starts empty when the data does not fit.
        let cache = unsafe {
            device.create_pipeline_cache(&wgpu::PipelineCacheDescriptor {
                label: Some("sinter pipeline cache"),
                data: data.as_deref(),
                fallback: true,
            })
        };
        Self { state: Mutex::new((Some(cache), status)), path: Some(path) }
    }

    /// The wgpu cache to pass to pipeline creation (`None` when disabled or discarded).
    pub(crate) fn cache(&self) -> Option<wgpu::PipelineCache> {
        self.state.lock().map(|s| s.0.clone()).unwrap_or(None)
    }

    /// Stops using the cache for `reason`: deletes its file (logging a warning naming it) and
    /// sets the status to [`PipelineCacheStatus::Corrupt`]; pipelines are created without a cache
    /// from now on and nothing is saved.
    pub(crate) fn discard(&self, reason: &str) {
        let name = self.path.as_ref().map_or_else(|| "(no file)".to_string(), |p| p.display().to_string());
        tracing::warn!("pipeline cache {name} is unusable ({reason}); deleted, going on without it");
        if let Some(p) = &self.path {
            let _ = std::fs::remove_file(p);
        }
        if let Ok(mut s) = self.state.lock() {
            *s = (None, PipelineCacheStatus::Corrupt { reason: format!("{name}: {reason}") });
        }
    }

    /// The cache file.
    pub(crate) fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// How the file was found.
    pub(crate) fn status(&self) -> PipelineCacheStatus {
        self.state.lock().map(|s| s.1.clone()).unwrap_or(PipelineCacheStatus::Disabled)
    }

    /// Writes the cache atomically (temporary file, then rename). `None` when there is nothing to write.
    pub(crate) fn save(&self) -> Result<Option<PathBuf>, DeviceError> {
        let (Some(cache), Some(path)) = (self.cache(), &self.path) else { return Ok(None) };
        let Some(data) = cache.get_data() else { return Ok(None) };
        let io = |p: &Path| {
            let p = p.to_path_buf();
            move |error| DeviceError::Io { path: p, error }
        };
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(io(parent))?;
        }
        let tmp = sinter_core::compile::unique_tmp(path);
        std::fs::write(&tmp, encode(&data)).map_err(io(&tmp))?;
        std::fs::rename(&tmp, path).map_err(io(path))?;
        Ok(Some(path.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_corruption() {
        let payload = b"some driver cache bytes".to_vec();
        let file = encode(&payload);
        assert_eq!(decode(&file).unwrap(), &payload[..]);
        // Truncated.
        assert!(decode(&file[..file.len() - 1]).is_err());
        assert!(decode(&file[..10]).is_err());
        // Flipped payload byte.
        let mut bad = file.clone();
        let last = bad.len() - 1;
        bad[last] ^= 1;
        assert!(decode(&bad).unwrap_err().contains("hash"));
        // Bad magic.
        let mut bad = file;
        bad[0] = b'X';
        assert!(decode(&bad).unwrap_err().contains("magic"));
    }
}
