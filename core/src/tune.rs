//! The autotuner every backend shares (max-autotune): time each candidate configuration of a
//! kernel on the device, keep the fastest, and remember the winner on disk per device.
//!
//! A backend supplies what is device-specific through [`TuneTarget`]: the candidate configurations
//! (its renderer's tuning type `T`), how to compile them into loaded kernels `L`, and how to time a
//! loaded kernel. This module owns the loop (deduplicating candidates that render to the same
//! source, logging every timing on the `sinter::autotune` target) and the cache.
//!
//! # Compiling
//!
//! A search compiles every candidate of the kernel first, in one [`TuneTarget::compile_batch`]
//! call, and times them after: a backend whose compiler is slow and independent per source (CUDA:
//! NVRTC) compiles the batch in parallel, and may have compiled the candidates of every kernel of
//! the program before the first search starts. The default `compile_batch` compiles one by one
//! (WGSL). Which candidate wins does not depend on how the batch was compiled.
//!
//! # The cache
//!
//! `<cache dir>/autotune/<backend>-<device key>.json`: `{version, entries: {kernel key: T}}`, where
//! the kernel key ([`kernel_key`]) hashes the kernel's IR without its names, so another graph with
//! the same kernel reuses the winner. The file is written through a temporary file and a rename.
//! Nothing read from it is trusted: an entry the backend's validator rejects (e.g. a block size of
//! 0 or 7) is dropped with a warning and searched again, and a file that does not parse is
//! rebuilt.

use crate::backend::BackendError;
use crate::kernel::Kernel;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// A stable key of a kernel: a hash of its IR without names, provenance and cost estimates, its
/// arguments' buffers numbered by first use (so a transformer's identical layers, which read other
/// weights, share one key, while a kernel reading one buffer twice keeps its own).
pub fn kernel_key(k: &Kernel) -> String {
    let mut anon = k.clone();
    anon.name = String::new();
    anon.origins.clear();
    anon.ops.clear();
    anon.flops = 0.0;
    anon.bytes = 0.0;
    let mut seen: Vec<crate::kernel::BufferId> = Vec::new();
    for a in &mut anon.args {
        let i = seen.iter().position(|b| *b == a.buffer).unwrap_or_else(|| {
            seen.push(a.buffer);
            seen.len() - 1
        });
        a.buffer = crate::kernel::BufferId(i as u32);
    }
    let json = serde_json::to_string(&anon).unwrap_or_default();
    blake3::hash(json.as_bytes()).to_hex()[..32].to_string()
}

/// The on-disk format.
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(bound(deserialize = "T: DeserializeOwned"))]
struct TuneFile<T> {
    version: u32,
    entries: HashMap<String, T>,
}

/// The cache file format's version; a file of another version is rebuilt. 2: CUDA candidates
/// timed after an L2 clear (version 1's winners were timed with a warm L2).
pub const VERSION: u32 = 2;

/// The winners of one device, loaded from and saved to disk.
pub struct TuneCache<T> {
    path: Option<PathBuf>,
    entries: HashMap<String, T>,
    dirty: bool,
    /// What was timed and chosen, one line each (also logged on `sinter::autotune`).
    pub log: Vec<String>,
}

impl<T: Clone + Serialize + DeserializeOwned> TuneCache<T> {
    /// A cache that remembers nothing (modes other than max-autotune, or no cache folder).
    pub fn none() -> TuneCache<T> {
        TuneCache { path: None, entries: HashMap::new(), dirty: false, log: Vec::new() }
    }

    /// Opens `<dir>/autotune/<backend>-<device_key>.json`. A missing, unreadable or malformed file
    /// gives an empty cache (rebuilt on save); entries that `valid` rejects are dropped.
    pub fn open(dir: Option<&Path>, backend: &str, device_key: &str, valid: impl Fn(&T) -> bool) -> TuneCache<T> {
        let Some(dir) = dir else { return TuneCache::none() };
        let path = dir.join("autotune").join(format!("{backend}-{device_key}.json"));
        let mut log = Vec::new();
        let entries = match std::fs::read(&path) {
            Err(_) => HashMap::new(),
            Ok(bytes) => match serde_json::from_slice::<TuneFile<T>>(&bytes) {
                Ok(f) if f.version == VERSION => f.entries,
                Ok(f) => {
                    log.push(format!("{}: version {} != {VERSION}; rebuilding", path.display(), f.version));
                    HashMap::new()
                }
                Err(e) => {
                    log.push(format!("{}: unreadable ({e}); rebuilding", path.display()));
                    HashMap::new()
                }
            },
        };
        let before = entries.len();
        let entries: HashMap<String, T> = entries.into_iter().filter(|(_, t)| valid(t)).collect();
        let dropped = before - entries.len();
        if dropped > 0 {
            log.push(format!("{}: dropped {dropped} invalid entries", path.display()));
        }
        for l in &log {
            tracing::warn!(target: "sinter::autotune", "{l}");
        }
        TuneCache { path: Some(path), entries, dirty: dropped > 0, log }
    }

    /// The winner recorded for a kernel key.
    pub fn get(&self, key: &str) -> Option<T> {
        self.entries.get(key).cloned()
    }

    /// Records a winner.
    pub fn put(&mut self, key: String, t: T) {
        self.entries.insert(key, t);
        self.dirty = true;
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The file, if any.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Writes the cache if it changed (temporary file + rename); failures are logged, not fatal.
    pub fn save(&self) {
        let Some(path) = &self.path else { return };
        if !self.dirty {
            return;
        }
        let file = TuneFile { version: VERSION, entries: self.entries.clone() };
        let write = || -> std::io::Result<()> {
            if let Some(d) = path.parent() {
                std::fs::create_dir_all(d)?;
            }
            let tmp = crate::compile::unique_tmp(path);
            std::fs::write(&tmp, serde_json::to_vec_pretty(&file).map_err(std::io::Error::other)?)?;
            std::fs::rename(&tmp, path)
        };
        if let Err(e) = write() {
            tracing::warn!(target: "sinter::autotune", "could not save the autotuning cache {}: {e}", path.display());
        }
    }
}

/// One candidate as a backend's closures see it.
pub struct Tuned<T, L> {
    /// The winning configuration.
    pub tuning: T,
    /// The loaded kernel compiled with it.
    pub loaded: L,
    /// Its median time, ns (`None` when it came from the cache or was not timed).
    pub ns: Option<f64>,
}

/// The backend's side of a search.
pub trait TuneTarget {
    /// The renderer's configuration type.
    type Tuning: Clone + Serialize + DeserializeOwned + std::fmt::Debug;
    /// A compiled kernel.
    type Loaded;
    /// Compiles one configuration.
    fn compile(&mut self, t: &Self::Tuning) -> Result<Self::Loaded, BackendError>;
    /// Compiles several configurations, one result per configuration in the order given (an
    /// error for those that do not compile). The default compiles them one by one with
    /// [`TuneTarget::compile`]; a backend with a parallel compiler overrides it.
    fn compile_batch(&mut self, ts: &[Self::Tuning]) -> Vec<Result<Self::Loaded, BackendError>> {
        ts.iter().map(|t| self.compile(t)).collect()
    }
    /// The source it was compiled from (candidates with the same source are timed once).
    fn source<'a>(&self, l: &'a Self::Loaded) -> &'a str;
    /// Median device time of one launch, ns.
    fn time(&mut self, l: &Self::Loaded) -> Result<f64, BackendError>;
}

/// Picks the fastest of `candidates` for kernel `k` (the first candidate is the default, also
/// used when every other fails): a valid cached winner is compiled without timing; otherwise every
/// candidate is compiled in one [`TuneTarget::compile_batch`], each distinct one (by source) is
/// timed in candidate order, and the winner is recorded in `cache`.
pub fn autotune<X: TuneTarget>(
    k: &Kernel,
    target: &mut X,
    candidates: Vec<X::Tuning>,
    cache: &mut TuneCache<X::Tuning>,
) -> Result<Tuned<X::Tuning, X::Loaded>, BackendError> {
    let key = kernel_key(k);
    let log = |cache: &mut TuneCache<X::Tuning>, line: String| {
        tracing::debug!(target: "sinter::autotune", "{line}");
        cache.log.push(line);
    };
    if let Some(t) = cache.get(&key) {
        match target.compile(&t) {
            Ok(l) => {
                log(cache, format!("{}: cached {t:?}", k.name));
                return Ok(Tuned { tuning: t, loaded: l, ns: None });
            }
            Err(e) => log(cache, format!("{}: cached {t:?} no longer compiles ({e}); searching", k.name)),
        }
    }
    let Some(default) = candidates.first().cloned() else {
        return Err(BackendError::Device(format!("{}: no autotuning candidates", k.name)));
    };
    let mut best: Option<(f64, X::Tuning, X::Loaded)> = None;
    let mut seen: Vec<String> = Vec::new();
    let compiled = target.compile_batch(&candidates);
    if compiled.len() != candidates.len() {
        return Err(BackendError::Device(format!(
            "{}: the backend compiled {} of {} autotuning candidates",
            k.name,
            compiled.len(),
            candidates.len()
        )));
    }
    // Each candidate is dropped after its timing unless it is the best so far.
    for (t, r) in candidates.into_iter().zip(compiled) {
        let l = match r {
            Ok(l) => l,
            Err(e) => {
                log(cache, format!("{}: {t:?} does not compile: {e}", k.name));
                continue;
            }
        };
        let src = target.source(&l).to_string();
        if seen.contains(&src) {
            continue;
        }
        seen.push(src);
        match target.time(&l) {
            Ok(ns) => {
                log(cache, format!("{}: {t:?}: {ns:.0} ns", k.name));
                if best.as_ref().is_none_or(|(b, _, _)| ns < *b) {
                    best = Some((ns, t, l));
                }
            }
            Err(e) => log(cache, format!("{}: {t:?} failed: {e}", k.name)),
        }
    }
    match best {
        Some((ns, t, l)) => {
            log(cache, format!("{}: chose {t:?} ({ns:.0} ns)", k.name));
            cache.put(key, t.clone());
            Ok(Tuned { tuning: t, loaded: l, ns: Some(ns) })
        }
        None => {
            let l = target.compile(&default)?;
            Ok(Tuned { tuning: default, loaded: l, ns: None })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DType;
    use crate::kernel::{KernelBody, Store};

    fn kernel(name: &str, numel: usize) -> Kernel {
        let mut k = Kernel {
            name: name.into(),
            args: vec![],
            exprs: vec![],
            body: KernelBody::Pointwise { numel, stores: Vec::<Store>::new() },
            origins: vec![1],
            ops: vec!["x".into()],
            flops: 1.0,
            bytes: 2.0,
        };
        k.push_expr(crate::kernel::Expr::Const(1.0), DType::F32);
        k
    }

    /// Times candidate `t` as `1000 / t` ns (bigger is faster); refuses 0.
    struct Fake {
        compiled: Vec<u32>,
    }

    impl TuneTarget for Fake {
        type Tuning = u32;
        type Loaded = (u32, String);
        fn compile(&mut self, t: &u32) -> Result<(u32, String), BackendError> {
            self.compiled.push(*t);
            if *t == 0 { Err(BackendError::Device("zero".into())) } else { Ok((*t, format!("src{}", t.min(&8)))) }
        }
        fn source<'a>(&self, l: &'a (u32, String)) -> &'a str {
            &l.1
        }
        fn time(&mut self, l: &(u32, String)) -> Result<f64, BackendError> {
            Ok(1000.0 / l.0 as f64)
        }
    }

    /// [`Fake`] whose batches are compiled "in parallel" (in reverse order, to show that order
    /// does not matter) and recorded.
    struct Batched {
        inner: Fake,
        batches: Vec<Vec<u32>>,
    }

    impl TuneTarget for Batched {
        type Tuning = u32;
        type Loaded = (u32, String);
        fn compile(&mut self, t: &u32) -> Result<(u32, String), BackendError> {
            self.inner.compile(t)
        }
        fn compile_batch(&mut self, ts: &[u32]) -> Vec<Result<(u32, String), BackendError>> {
            self.batches.push(ts.to_vec());
            let mut out: Vec<_> = ts.iter().rev().map(|t| self.inner.compile(t)).collect();
            out.reverse();
            out
        }
        fn source<'a>(&self, l: &'a (u32, String)) -> &'a str {
            &l.1
        }
        fn time(&mut self, l: &(u32, String)) -> Result<f64, BackendError> {
            self.inner.time(l)
        }
    }

    #[test]
    fn candidates_are_compiled_in_one_batch_with_the_same_outcome() {
        let k = kernel("k0_x", 10);
        let cands = vec![3, 0, 5, 9, 2, 12];
        // The default batch compiles one by one, in order.
        let mut seq = Fake { compiled: vec![] };
        let mut c1 = TuneCache::<u32>::none();
        let a = autotune(&k, &mut seq, cands.clone(), &mut c1).unwrap();
        assert_eq!(seq.compiled, cands);
        // A batching target gets every candidate in one call and picks the same winner, with the
        // same log (9 wins; 12 renders as 8 and 9 does too: the first of a source is timed).
        let mut b = Batched { inner: Fake { compiled: vec![] }, batches: vec![] };
        let mut c2 = TuneCache::<u32>::none();
        let r = autotune(&k, &mut b, cands.clone(), &mut c2).unwrap();
        assert_eq!(b.batches, vec![cands.clone()]);
        assert_eq!((r.tuning, r.ns), (a.tuning, a.ns));
        assert_eq!(r.tuning, 9);
        assert_eq!(c1.log, c2.log);
        assert!(c2.log.iter().any(|l| l.contains("0 does not compile")));
        // A cached winner is compiled alone, never in a batch.
        let mut c3 = TuneCache::<u32>::none();
        c3.put(kernel_key(&k), 5);
        let mut b = Batched { inner: Fake { compiled: vec![] }, batches: vec![] };
        assert_eq!(autotune(&k, &mut b, cands.clone(), &mut c3).unwrap().tuning, 5);
        assert!(b.batches.is_empty() && b.inner.compiled == vec![5]);
        // A backend that returns the wrong number of results is an error, not a silent pick.
        struct Short;
        impl TuneTarget for Short {
            type Tuning = u32;
            type Loaded = (u32, String);
            fn compile(&mut self, t: &u32) -> Result<(u32, String), BackendError> {
                Ok((*t, String::new()))
            }
            fn compile_batch(&mut self, _: &[u32]) -> Vec<Result<(u32, String), BackendError>> {
                Vec::new()
            }
            fn source<'a>(&self, l: &'a (u32, String)) -> &'a str {
                &l.1
            }
            fn time(&mut self, _: &(u32, String)) -> Result<f64, BackendError> {
                Ok(1.0)
            }
        }
        let e = autotune(&k, &mut Short, cands, &mut TuneCache::none()).err().unwrap().to_string();
        assert!(e.contains("compiled 0 of 6"), "{e}");
    }

    #[test]
    fn picks_fastest_dedups_and_caches_validated_winners() {
        let dir = std::env::temp_dir().join(format!("sinter-tune-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let k = kernel("k0_x", 10);
        let mut c = TuneCache::<u32>::open(Some(&dir), "fake", "dev", |t| *t > 0);
        let mut f = Fake { compiled: vec![] };
        let r = autotune(&k, &mut f, vec![1, 0, 4, 8, 16], &mut c).unwrap();
        // 16 renders the same source as 8 and is not timed: 8 wins.
        assert_eq!(r.tuning, 8);
        assert!(c.log.iter().any(|l| l.contains("does not compile")));
        c.save();
        // Reopened: the winner is used without timing.
        let mut c = TuneCache::<u32>::open(Some(&dir), "fake", "dev", |t| *t > 0);
        let mut f = Fake { compiled: vec![] };
        let r = autotune(&k, &mut f, vec![1, 2], &mut c).unwrap();
        assert_eq!((r.tuning, r.ns), (8, None));
        assert_eq!(f.compiled, vec![8]);
        // The same kernel under another name shares the entry; a different kernel does not.
        assert_eq!(kernel_key(&k), kernel_key(&kernel("k9_y", 10)));
        assert_ne!(kernel_key(&k), kernel_key(&kernel("k0_x", 11)));
        // Other buffers in the same pattern share the key; reading one buffer twice does not.
        let arg = |b: u32| crate::kernel::KernelArg {
            buffer: crate::kernel::BufferId(b),
            dtype: DType::F32,
            numel: 10,
            access: crate::kernel::Access::Read,
        };
        let with = |bufs: &[u32]| Kernel { args: bufs.iter().map(|&b| arg(b)).collect(), ..kernel("k1", 10) };
        assert_eq!(kernel_key(&with(&[3, 4])), kernel_key(&with(&[7, 9])));
        assert_ne!(kernel_key(&with(&[3, 4])), kernel_key(&with(&[3, 3])));
        // An entry the validator rejects is dropped, searched again and replaced.
        let mut c = TuneCache::<u32>::open(Some(&dir), "fake", "dev", |t| *t > 8);
        assert!(c.is_empty());
        let r = autotune(&k, &mut f, vec![1, 2], &mut c).unwrap();
        assert_eq!(r.tuning, 2);
        // A garbage file is rebuilt, not trusted.
        std::fs::write(c.path().unwrap(), b"{not json").unwrap();
        let c = TuneCache::<u32>::open(Some(&dir), "fake", "dev", |_| true);
        assert!(c.is_empty() && c.log[0].contains("unreadable"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
