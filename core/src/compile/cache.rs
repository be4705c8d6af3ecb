//! The on-disk program cache: one checksummed JSON entry per key, written by rename; damaged or
//! invalid entries are removed and rebuilt.
//!
//! **Constants stay out of the JSON.** A constant of at least [`INLINE_MAX_BYTES`] is stored as a
//! reference (its blake3 digest, dtype and shape): to a constant of the captured graph with the
//! same bytes, dtype and shape where there is one (the model's weights: nothing written, resolved
//! from the graph at load), else to a content-addressed binary file `constants/<digest>.bin`
//! (folded constants: a batch norm folded into a convolution's weights), written once and shared
//! by every entry. Measured on a 340 MB BERT-base-sized model (2-core CI machine class): the
//! entry with its weights as JSON floats took 7.4 s of an 11.7 s cold compile to write (float
//! formatting, string escaping, the file) and longer to read back; see BENCHMARKS.md, session 9.

use crate::kernel::{BufferKind, Program};
use crate::tensor::HostTensor;
use crate::{DType, IrGraph, Op};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Constants smaller than this stay in the entry's JSON.
pub(super) const INLINE_MAX_BYTES: usize = 4096;

#[derive(Serialize, Deserialize)]
pub(super) struct CacheEntry {
    pub(super) checksum: String,
    pub(super) program: String,
    /// The constants taken out of `program` (their buffers hold an empty placeholder there).
    #[serde(default)]
    pub(super) constants: Vec<ConstantRef>,
}

/// A constant kept out of an entry's JSON.
#[derive(Serialize, Deserialize)]
pub(super) struct ConstantRef {
    /// Position in [`Program::buffers`].
    buffer: usize,
    /// blake3 of the little-endian bytes ([`crate::digest::digest`]), hex.
    digest: String,
    dtype: DType,
    shape: Vec<usize>,
    /// Resolved from the captured graph (else read from `constants/<digest>.bin`).
    from_graph: bool,
}

/// The captured graph's large constants by digest, for resolving [`ConstantRef`]s.
#[derive(Default)]
pub(super) struct GraphConstants {
    by_digest: HashMap<[u8; 32], Vec<Arc<HostTensor>>>,
}

impl GraphConstants {
    /// The constants of `g` of at least [`INLINE_MAX_BYTES`] (digests come from
    /// [`crate::digest`], computed once per allocation).
    pub(super) fn of(g: &IrGraph) -> GraphConstants {
        let mut by_digest: HashMap<[u8; 32], Vec<Arc<HostTensor>>> = HashMap::new();
        for n in &g.nodes {
            if let Op::Constant(t) = &n.op
                && t.size_bytes() >= INLINE_MAX_BYTES
            {
                by_digest.entry(crate::digest::digest(t)).or_default().push(t.clone());
            }
        }
        GraphConstants { by_digest }
    }

    fn find(&self, digest: &[u8; 32], dtype: DType, shape: &[usize]) -> Option<&Arc<HostTensor>> {
        self.by_digest.get(digest)?.iter().find(|t| t.dtype() == dtype && t.shape == shape)
    }
}

pub(super) fn cache_path(dir: &Path, key: &str) -> PathBuf {
    dir.join("programs").join(format!("{key}.json"))
}

fn constant_path(dir: &Path, digest_hex: &str) -> PathBuf {
    dir.join("constants").join(format!("{digest_hex}.bin"))
}

/// The constant `r` names: the graph's, or the file's after checking its bytes against the digest.
fn resolve(dir: &Path, r: &ConstantRef, graph: &GraphConstants) -> Option<Arc<HostTensor>> {
    if r.from_graph {
        let digest = blake3::Hash::from_hex(&r.digest).ok()?;
        return graph.find(digest.as_bytes(), r.dtype, &r.shape).cloned();
    }
    let path = constant_path(dir, &r.digest);
    let bytes = std::fs::read(&path).ok()?;
    let hash = blake3::hash(&bytes);
    if hash.to_hex().as_str() != r.digest {
        // Damaged: removed, so the rebuild's store writes it again.
        let _ = std::fs::remove_file(&path);
        return None;
    }
    let t = Arc::new(HostTensor::from_le_bytes(r.dtype, r.shape.clone(), &bytes).ok()?);
    // The bytes just hashed are the tensor's: the constant pool's key needs no second pass.
    crate::digest::remember(&t, *hash.as_bytes());
    Some(t)
}

fn parse(dir: &Path, bytes: &[u8], graph: &GraphConstants) -> Option<Program> {
    let e = serde_json::from_slice::<CacheEntry>(bytes).ok()?;
    if blake3::hash(e.program.as_bytes()).to_hex().as_str() != e.checksum {
        return None;
    }
    let mut p = serde_json::from_str::<Program>(&e.program).ok()?;
    // Each constant file is read, hashed and converted on its own: several at once (GPT-2
    // small's bf16 program: 53 files, 311 MB).
    let resolved = crate::par::map(&e.constants, 8, |r| resolve(dir, r, graph));
    for (r, t) in e.constants.iter().zip(resolved) {
        let t = t?;
        match p.buffers.get_mut(r.buffer)?.kind {
            ref mut k @ BufferKind::Constant(_) => *k = BufferKind::Constant(t),
            _ => return None,
        }
    }
    Some(p)
}

/// The program stored under `key`, its constants resolved from `graph` or the constant files;
/// `None` (and the entry removed) when it is missing, damaged, or names a constant that cannot be
/// found or whose bytes do not match its digest.
pub(super) fn cache_load(dir: &Path, key: &str, graph: &GraphConstants) -> Option<Program> {
    let path = cache_path(dir, key);
    let bytes = std::fs::read(&path).ok()?;
    // Nothing read is trusted: the checksum catches damaged files, the digests damaged constants,
    // the kernel-IR verifier a program no backend would accept (another version's, or edited).
    let parsed = parse(dir, &bytes, graph).filter(|p| crate::kernel::interp::validate(p).is_ok());
    if parsed.is_none() {
        tracing::warn!(target: "sinter::cache", "corrupt cache entry {} ignored; rebuilding", path.display());
        let _ = std::fs::remove_file(&path);
    }
    parsed
}

/// Where a dynamic compile's refusal under `key` is kept: its reason as text, beside the programs.
fn refusal_path(dir: &Path, key: &str) -> PathBuf {
    dir.join("programs").join(format!("{key}.refused"))
}

/// The reason a dynamic compile under `key` was refused before, if one was recorded. A refusal
/// is a function of what the key covers (the graph, the options, the backend and the probed
/// values), so a later process skips the attempt's lowerings: for ResNet-50 at bf16 they took
/// 1.7 s of a 2.1 s warm start (H200, session 20).
pub(super) fn refusal_load(dir: &Path, key: &str) -> Option<String> {
    std::fs::read_to_string(refusal_path(dir, key)).ok().filter(|s| !s.trim().is_empty())
}

/// Records a dynamic compile's refusal under `key` ([`refusal_load`]).
pub(super) fn refusal_store(dir: &Path, key: &str, why: &str) -> std::io::Result<()> {
    write_atomic(&refusal_path(dir, key), why.as_bytes())
}

/// A temporary name beside `path`, unique per process *and* call (threads of one process compiling
/// the same program write at the same time: a name from the process id alone interleaves them).
pub fn unique_tmp(path: &Path) -> PathBuf {
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    path.with_file_name(format!(".{name}.{}.{n}.tmp", std::process::id()))
}

/// Writes `bytes` to `path` through a temporary file and a rename, so a crash never leaves a
/// half-written file under the real name.
fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let tmp = unique_tmp(path);
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

/// Stores `p` under `key`: constants of `graph` by reference, other large constants in their
/// content-addressed files (written unless present), the rest as JSON.
pub(super) fn cache_store(dir: &Path, key: &str, p: &Program, graph: &GraphConstants) -> std::io::Result<()> {
    let mut stripped = p.clone();
    let mut constants = Vec::new();
    for (i, b) in stripped.buffers.iter_mut().enumerate() {
        let BufferKind::Constant(t) = &b.kind else { continue };
        if t.size_bytes() < INLINE_MAX_BYTES {
            continue;
        }
        let digest = crate::digest::digest(t);
        let from_graph = graph.find(&digest, t.dtype(), &t.shape).is_some();
        let r = ConstantRef {
            buffer: i,
            digest: blake3::Hash::from(digest).to_hex().to_string(),
            dtype: t.dtype(),
            shape: t.shape.clone(),
            from_graph,
        };
        if !from_graph {
            let path = constant_path(dir, &r.digest);
            if !path.exists() {
                write_atomic(&path, &t.le_bytes())?;
            }
        }
        let empty = HostTensor::from_le_bytes(t.dtype(), vec![0], &[]).map_err(std::io::Error::other)?;
        b.kind = BufferKind::Constant(Arc::new(empty));
        constants.push(r);
    }
    let program = serde_json::to_string(&stripped).map_err(std::io::Error::other)?;
    let entry = CacheEntry { checksum: blake3::hash(program.as_bytes()).to_hex().to_string(), program, constants };
    write_atomic(&cache_path(dir, key), &serde_json::to_vec(&entry).map_err(std::io::Error::other)?)
}
