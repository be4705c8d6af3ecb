//! The CLI's on-disk program cache (issue 14): `sinter run` compiles through the cache the README
//! promises (`SINTER_CACHE_DIR`), a second run hits it, a corrupt entry is rebuilt, and
//! `--no-cache` neither reads nor writes it.

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Runs `sinter run` on the mlp model with the interpreter; returns stderr.
fn run(cache: &Path, extra: &[&str]) -> String {
    run_set(cache, 0, extra)
}

/// Runs `sinter run` on the mlp model's data set `set` with the interpreter; returns stderr.
fn run_set(cache: &Path, set: usize, extra: &[&str]) -> String {
    let m = root().join("onnx/models/mlp");
    let out = Command::new(env!("CARGO_BIN_EXE_sinter"))
        .arg("run")
        .arg(m.join("model.onnx"))
        .arg("--input")
        .arg(m.join(format!("test_data_set_{set}/input_0.pb")))
        .args(["--backend", "interp"])
        .args(extra)
        .env("SINTER_CACHE_DIR", cache)
        .env("SINTER_LOG", "cache,recompiles")
        .env_remove("SINTER_CACHE")
        .output()
        .expect("running sinter");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "sinter run failed: {err}");
    err
}

fn entries(cache: &Path) -> Vec<PathBuf> {
    match std::fs::read_dir(cache.join("programs")) {
        Ok(rd) => rd.filter_map(|e| e.ok()).map(|e| e.path()).collect(),
        Err(_) => vec![],
    }
}

#[test]
fn run_uses_the_disk_cache_and_rebuilds_corrupt_entries() {
    let cache = std::env::temp_dir().join(format!("sinter-cli-cache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&cache);
    let first = run(&cache, &[]);
    assert!(!first.contains("program cache hit"), "{first}");
    assert!(!entries(&cache).is_empty(), "the first run stored its program");
    let second = run(&cache, &[]);
    assert!(second.contains("program cache hit"), "the second run recompiled: {second}");
    for e in entries(&cache) {
        std::fs::write(&e, br#"{"checksum": "0", "program": "garbage"}"#).unwrap();
    }
    let third = run(&cache, &[]);
    assert!(third.contains("corrupt cache entry") && !third.contains("program cache hit"), "{third}");
    assert!(run(&cache, &[]).contains("program cache hit"), "the rebuilt entry is used again");
    // --no-cache: nothing read, nothing written.
    let off = cache.join("off");
    let r = run(&off, &["--no-cache"]);
    assert!(!r.contains("program cache hit") && entries(&off).is_empty(), "{r}");
    let _ = std::fs::remove_dir_all(&cache);
}

/// Issue 13: the model is imported with its symbolic batch, so the program compiled for data set 0
/// (batch 4) serves data set 1 (batch 7) from the cache in another process: no recompile.
#[test]
fn another_batch_size_hits_the_program_compiled_for_the_first() {
    let cache = std::env::temp_dir().join(format!("sinter-cli-cache-batch-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&cache);
    let first = run_set(&cache, 0, &[]);
    assert!(first.contains("# serves batch <= 8"), "{first}");
    assert!(!first.contains("program cache hit"), "{first}");
    let second = run_set(&cache, 1, &[]);
    assert!(second.contains("program cache hit") && second.contains("# serves batch <= 8"), "{second}");
    assert_eq!(entries(&cache).len(), 1, "one program for both batch sizes");
    let _ = std::fs::remove_dir_all(&cache);
}
