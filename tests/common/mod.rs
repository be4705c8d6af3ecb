//! Helpers the top-level integration tests share: fresh scratch folders, the `sinter` binary run
//! with a private cache, and a GPU backend or a skip line.
#![allow(dead_code)] // each test binary uses some of the helpers

use std::fmt::Display;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A fresh, empty folder `sinter-<name>-<pid>` in the temporary directory.
pub fn scratch_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("sinter-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Runs the binary with `args` and the private cache folder `cache` (`SINTER_CACHE` and
/// `SINTER_LOG` unset); returns the output.
pub fn sinter(args: &[&str], cache: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sinter"))
        .args(args)
        .env("SINTER_CACHE_DIR", cache)
        .env_remove("SINTER_CACHE")
        .env_remove("SINTER_LOG")
        .output()
        .expect("running sinter")
}

/// (stdout, stderr) of `o` as text.
pub fn text(o: &Output) -> (String, String) {
    (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

/// Runs [`sinter`] and requires success; returns (stdout, stderr).
pub fn ok(args: &[&str], cache: &Path) -> (String, String) {
    let o = sinter(args, cache);
    let (out, err) = text(&o);
    assert!(o.status.success(), "sinter {args:?} failed:\n{out}\n{err}");
    (out, err)
}

/// The backend `b` opened, or `None` after printing `SKIPPED <what>` with the reason (no adapter);
/// with `SINTER_REQUIRE_GPU=1` a missing adapter fails instead.
pub fn gpu_or_skip<T, E: Display>(what: &str, b: Result<T, E>) -> Option<T> {
    match b {
        Ok(b) => Some(b),
        Err(e) => {
            assert!(
                !std::env::var("SINTER_REQUIRE_GPU").is_ok_and(|v| v == "1"),
                "SINTER_REQUIRE_GPU=1 but no GPU adapter for {what}: {e}"
            );
            eprintln!("SKIPPED {what}: {e}");
            None
        }
    }
}
