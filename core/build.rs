//! Computes `SINTER_CORE_SOURCE_HASH`: a hash of every file under `src/`, which the program cache
//! key includes (`compile::cache_key`), so a build whose passes or scheduler changed never loads a
//! program an older build stored under the same crate version (as Inductor keys its caches on a
//! hash of torch's sources). FNV-1a over the sorted paths and contents: stable, std only.

use std::path::{Path, PathBuf};

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else { return };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            files(&p, out);
        } else {
            out.push(p);
        }
    }
}

fn main() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    println!("cargo:rerun-if-changed={}", src.display());
    let mut all = Vec::new();
    files(&src, &mut all);
    all.sort();
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in &all {
        let rel = p.strip_prefix(&src).unwrap_or(p).to_string_lossy().into_owned();
        for b in rel.bytes().chain(std::fs::read(p).unwrap_or_default()) {
            h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
        }
    }
    println!("cargo:rustc-env=SINTER_CORE_SOURCE_HASH={h:016x}");
}
