//! Content digests of constants, computed once per live allocation; [`code_key`], the key of
//! generated source under which identical kernels compile once.
//!
//! A compile hashes a model's constants many times: the constant summary in the text of the
//! graph after every pass, CSE's key of each constant, the constant pool's key and the program
//! cache key. Passes build new graphs but share each unchanged constant's `Arc`, so the digest of
//! a large constant is kept beside a `Weak` to its allocation and reused while that allocation
//! lives. Measured on a 340 MB BERT-base-sized model (2-core CI machine, WGSL on lavapipe):
//! blake3 was 39% of load + import + compile after the byte views stopped copying.
//!
//! A hit requires the `Weak` to still name this very allocation (`Weak::upgrade` + `Arc::ptr_eq`),
//! so a freed address reused by another tensor is never mistaken for it. The contents of an
//! allocation cannot change while the cache holds its `Weak`: `Arc::get_mut` refuses when a
//! `Weak` exists, and `Arc::make_mut` disassociates the `Weak` instead (the entry then misses).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, Weak};

use crate::tensor::HostTensor;

/// Constants smaller than this are hashed on every call (cheaper than the bookkeeping).
const CACHED_FROM_BYTES: usize = 64 << 10;

type Entries = HashMap<usize, (Weak<HostTensor>, [u8; 32])>;

fn entries() -> &'static Mutex<(Entries, usize)> {
    static CACHE: OnceLock<Mutex<(Entries, usize)>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new((HashMap::new(), 64)))
}

/// The blake3 digest of `t`'s little-endian bytes.
fn compute(t: &HostTensor) -> [u8; 32] {
    *blake3::hash(&t.le_bytes()).as_bytes()
}

/// The blake3 digest of `t`'s elements as little-endian bytes (not of its dtype or shape: keys
/// that must tell those apart add them). Computed once per live allocation for large tensors.
pub fn digest(t: &Arc<HostTensor>) -> [u8; 32] {
    if t.size_bytes() < CACHED_FROM_BYTES {
        return compute(t);
    }
    if let Some(d) = cached(t) {
        return d;
    }
    let addr = Arc::as_ptr(t) as usize;
    let d = compute(t);
    if let Ok(mut guard) = entries().lock() {
        let (map, limit) = &mut *guard;
        map.insert(addr, (Arc::downgrade(t), d));
        // Drop the entries of freed allocations whenever the map has doubled since the last sweep.
        if map.len() > *limit {
            map.retain(|_, (w, _)| w.strong_count() > 0);
            *limit = (2 * map.len()).max(64);
        }
    }
    d
}

/// Records `d` as the digest of `t`'s allocation, for a caller that has just hashed the same
/// bytes (a program-cache constant read from disk and checked against its digest: a warm start
/// hashed each one again for the device's constant pool, 311 MB for GPT-2 small in bf16).
/// The caller guarantees `d` is [`digest`]'s value for `t`; debug builds check it.
pub(crate) fn remember(t: &Arc<HostTensor>, d: [u8; 32]) {
    debug_assert_eq!(compute(t), d, "remember: the digest does not match the tensor");
    if t.size_bytes() < CACHED_FROM_BYTES {
        return;
    }
    if let Ok(mut guard) = entries().lock() {
        guard.0.insert(Arc::as_ptr(t) as usize, (Arc::downgrade(t), d));
    }
}

/// Computes the digests of `ts` not yet known on up to 16 threads, so that later [`digest`] calls
/// find them cached: a model's first program-cache key hashed every weight on one thread (BERT-base,
/// 435 MB: 0.16 s of a 0.59 s cold compile on an H200 host).
pub fn digest_all(ts: &[&Arc<HostTensor>]) {
    let todo: Vec<&Arc<HostTensor>> =
        ts.iter().copied().filter(|t| t.size_bytes() >= CACHED_FROM_BYTES && cached(t).is_none()).collect();
    crate::par::map(&todo, 16, |t| digest(t));
}

/// The digest of `t`'s very allocation, if known.
fn cached(t: &Arc<HostTensor>) -> Option<[u8; 32]> {
    let guard = entries().lock().ok()?;
    let (w, d) = guard.0.get(&(Arc::as_ptr(t) as usize))?;
    w.upgrade().is_some_and(|live| Arc::ptr_eq(&live, t)).then_some(*d)
}

/// Whether two constants hold the same elements, dtype and shape: the same allocation at once,
/// else shape, dtype and [`digest`] compared (a large constant's digest is already known from the
/// compile's earlier keys). Comparing two programs' constants element by element took 0.6 s of a
/// ViT-B/16 cold compile on an H200 host (346 MB, compared once per pair of programs derived).
pub fn same_contents(a: &Arc<HostTensor>, b: &Arc<HostTensor>) -> bool {
    Arc::ptr_eq(a, b) || (a.shape == b.shape && a.dtype() == b.dtype() && digest(a) == digest(b))
}

/// The part of generated source `source` (CUDA C++ or WGSL) that its compiled code depends on:
/// the text without `//` comments (a kernel's name, graph nodes and buffer ids are written there)
/// and blank lines, and with its entry point name `entry` replaced by a placeholder. Two sources with equal keys
/// differ only in comments and by a consistent renaming of the entry (`\u{1}` never occurs in
/// rendered source), so one compile serves both: BERT-base's layers render the same kernels
/// under different names. String literals (inline `asm`) are kept whole.
pub fn code_key(source: &str, entry: &str) -> String {
    let src = source.as_bytes();
    let mut out = Vec::with_capacity(src.len());
    let (mut i, mut quote) = (0, None::<u8>);
    while i < src.len() {
        let c = src[i];
        match quote {
            Some(q) => {
                out.push(c);
                if c == b'\\' && i + 1 < src.len() {
                    out.push(src[i + 1]);
                    i += 1;
                } else if c == q || c == b'\n' {
                    quote = None;
                }
            }
            None if c == b'/' && src.get(i + 1) == Some(&b'/') => {
                while i < src.len() && src[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            None => {
                if c == b'"' || c == b'\'' {
                    quote = Some(c);
                }
                out.push(c);
            }
        }
        i += 1;
    }
    // Lines left blank (a comment line) and trailing blanks do not change the code.
    let mut text = String::with_capacity(out.len());
    for line in String::from_utf8_lossy(&out).lines().map(str::trim_end).filter(|l| !l.is_empty()) {
        text.push_str(line);
        text.push('\n');
    }
    if entry.is_empty() { text } else { text.replace(entry, "\u{1}") }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DType;

    #[test]
    fn code_keys_ignore_comments_and_the_entry_name_only() {
        let a = "// sinter kernel k1_add\nextern \"C\" __global__ void k1_add(float* a0) // b3\n{ a0[0] = 1; }\n";
        let b = "// sinter kernel k9_add\nextern \"C\" __global__ void k9_add(float* a0) // b17\n{ a0[0] = 1; }\n";
        assert_eq!(code_key(a, "k1_add"), code_key(b, "k9_add"));
        let c = "extern \"C\" __global__ void k9_add(float* a0)\n{ a0[0] = 2; }\n";
        assert_ne!(code_key(a, "k1_add"), code_key(c, "k9_add"));
        // `//` inside a string literal is code, not a comment.
        let (s1, s2) = ("asm(\"x // 1\"); // c\n", "asm(\"x // 2\"); // c\n");
        assert_ne!(code_key(s1, "k1"), code_key(s2, "k1"));
        assert_eq!(code_key(s1, "k1"), "asm(\"x // 1\");\n");
        // WGSL: the entry's name and the binding comments differ, the code does not.
        let w1 = "// kernel k2_exp\n\n// a0: b3 f32[8] (input 0)\n@compute @workgroup_size(64) fn k2_exp() {}\n";
        let w2 = "// a0: b9 f32[8] (input 0)\n@compute @workgroup_size(64) fn k7_exp() {}\n";
        assert_eq!(code_key(w1, "k2_exp"), code_key(w2, "k7_exp"));
    }

    fn big(fill: f64) -> Arc<HostTensor> {
        Arc::new(HostTensor::from_f64(DType::F32, vec![1 << 15], &vec![fill; 1 << 15]))
    }

    #[test]
    fn a_remembered_digest_is_found_for_that_allocation_only() {
        let a = big(3.0);
        let d = compute(&a);
        remember(&a, d);
        assert_eq!(cached(&a), Some(d));
        assert_eq!(digest(&a), d);
        // Another allocation with the same bytes is not known until hashed.
        let b = big(3.0);
        assert_eq!(cached(&b), None);
        assert_eq!(digest(&b), d);
    }

    #[test]
    fn equal_contents_equal_digests_and_changes_are_seen() {
        let a = big(1.0);
        let b = big(1.0);
        assert_eq!(digest(&a), digest(&b));
        assert_eq!(digest(&a), digest(&a.clone()));
        let c = big(2.0);
        assert_ne!(digest(&a), digest(&c));
        // The digest is of the bytes alone: a reshaped copy has the same one.
        let r = Arc::new(HostTensor::new(vec![2, 1 << 14], a.data.clone()).unwrap());
        assert_eq!(digest(&a), digest(&r));
        assert_eq!(digest(&a), *blake3::hash(&a.to_le_bytes()).as_bytes());
        // Small tensors go through the same function.
        let s = Arc::new(HostTensor::from_f64(DType::F32, vec![3], &[1.0, 2.0, 3.0]));
        assert_eq!(digest(&s), compute(&s));
    }

    #[test]
    fn a_freed_allocation_reused_by_another_tensor_is_not_mistaken_for_it() {
        for k in 0..32 {
            let a = big(k as f64);
            let da = digest(&a);
            assert_eq!(da, compute(&a));
            drop(a);
            // The allocator may hand the same address to the next tensor of the same size.
            let b = big(k as f64 + 0.5);
            assert_eq!(digest(&b), compute(&b), "iteration {k}");
        }
    }

    #[test]
    fn make_mut_after_hashing_is_seen() {
        let mut a = big(1.0);
        let before = digest(&a);
        Arc::make_mut(&mut a).data = crate::tensor::TensorData::F32(vec![7.0; 1 << 15]);
        assert_ne!(digest(&a), before);
        assert_eq!(digest(&a), compute(&a));
    }
}
