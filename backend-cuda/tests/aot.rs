//! The kernels compiled ahead of time (`backend-cuda/aot/*.cu`, [`sinter_cuda::aot`]) match the
//! files in the tree.
//!
//! With `SINTER_REQUIRE_NVRTC=1` (CI, `scripts/test.sh`: NVRTC is installed, so `build.rs`
//! compiled the files), every `aot/*.cu` file must have an embedded `sm_90a` entry whose hash is
//! that of the file's current text (a stale build, or a file that failed to compile, is caught
//! here) and whose log has ptxas' resources (`nvrtc::resources`) for each of the file's entry
//! functions; spills are allowed. Without it, a file with no entry is only reported (the build
//! warned: no NVRTC, or `SINTER_AOT_BUILD=0`). Every embedded entry must name a file still there
//! with the same text, either way. With no files in `aot/` (or no folder) there is nothing to
//! check and the test passes.

mod common;

use sinter_cuda::aot;
use sinter_cuda::nvrtc::{self, CubinCache, Target};
use sinter_cuda::probe;
use std::path::Path;

/// Marks the child run of [`hits_need_no_nvrtc`].
const CHILD_VAR: &str = "SINTER_AOT_TEST_CHILD";

fn required() -> bool {
    std::env::var("SINTER_REQUIRE_NVRTC").is_ok_and(|v| v == "1")
}

/// The `aot/*.cu` files (name, text), sorted by name.
fn files() -> Vec<(String, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("aot");
    let Ok(entries) = std::fs::read_dir(&dir) else { return Vec::new() };
    let mut out: Vec<(String, String)> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .filter(|n| n.ends_with(".cu"))
        .map(|n| {
            let text = std::fs::read_to_string(dir.join(&n)).unwrap_or_else(|e| panic!("aot/{n}: {e}"));
            (n, text)
        })
        .collect();
    out.sort();
    out
}

/// The names of the `extern "C" __global__` functions of `source`
/// (`extern "C" __global__ void __launch_bounds__(256) name(...)`).
fn entry_names(source: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (at, _) in source.match_indices("__global__") {
        let mut rest = source[at + "__global__".len()..].trim_start();
        rest = rest.strip_prefix("void").unwrap_or(rest).trim_start();
        // Attributes: `__launch_bounds__(...)`, `__cluster_dims__(...)`.
        while rest.starts_with("__") {
            let Some(open) = rest.find('(') else { break };
            let mut depth = 0;
            let close = rest[open..].char_indices().find_map(|(i, c)| {
                depth += match c {
                    '(' => 1,
                    ')' => -1,
                    _ => 0,
                };
                (depth == 0).then_some(open + i)
            });
            let Some(close) = close else { break };
            rest = rest[close + 1..].trim_start();
        }
        let name: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
        if !name.is_empty() {
            out.push(name);
        }
    }
    out
}

#[test]
fn entry_names_skip_attributes() {
    let src = "extern \"C\" __global__ void __launch_bounds__(128, 1) __cluster_dims__(2, 1, 1) k_attn(float* a) {}\n\
               extern \"C\" __global__ void k2(int n) {}";
    assert_eq!(entry_names(src), ["k_attn", "k2"]);
}

#[test]
fn every_aot_file_is_embedded_and_current() {
    let files = files();
    // Every embedded entry is of a file still there, with its text.
    for e in aot::table() {
        let (_, text) = files
            .iter()
            .find(|(n, _)| n == e.file)
            .unwrap_or_else(|| panic!("embedded {} ({}) has no file in aot/: rebuild", e.file, e.arch));
        assert_eq!(
            e.source_hash,
            aot::source_hash(text),
            "{} ({}): embedded from another text: rebuild",
            e.file,
            e.arch
        );
        assert!(e.cubin.starts_with(b"\x7fELF"), "{}: not a cubin", e.file);
    }
    if files.is_empty() {
        eprintln!("no aot/*.cu files: nothing to check");
        return;
    }
    let hopper = Target::hopper();
    let mut missing = Vec::new();
    for (name, text) in &files {
        let Some(e) = aot::find(text, &hopper.arch()) else {
            missing.push(name.clone());
            continue;
        };
        assert_eq!((e.file, e.arch), (name.as_str(), "sm_90a"));
        if aot::enabled() {
            let hit = aot::lookup(text, &hopper).unwrap_or_else(|| panic!("{name}: no hit"));
            assert_eq!(hit.image, e.cubin);
            assert_eq!(hit.seconds, 0.0);
        }
        let kernels = entry_names(text);
        assert!(!kernels.is_empty(), "{name}: no extern \"C\" __global__ function");
        for k in kernels {
            let r = nvrtc::resources(e.log, &k)
                .unwrap_or_else(|| panic!("{name}: no ptxas resources for {k} in its log:\n{}", e.log));
            eprintln!(
                "aot/{name} {k}: {} registers, {} spill bytes, {} static shared bytes (NVRTC {}.{})",
                r.registers, r.spill_bytes, r.shared_bytes, e.nvrtc.0, e.nvrtc.1
            );
        }
    }
    if !missing.is_empty() {
        let msg = format!("aot/ files without a current sm_90a entry: {}", missing.join(", "));
        assert!(!required(), "SINTER_REQUIRE_NVRTC=1: {msg} (see build.rs' cargo warnings)");
        eprintln!("skipped: {msg} (no NVRTC at build time, or SINTER_AOT_BUILD=0)");
    }
}

/// Runs this test binary again with libnvrtc hidden (the loader path emptied, the folder search
/// off, as `tests/probe.rs` does) and checks there that every embedded kernel comes back from
/// `compile_parallel` and `compile_cached` as a cache hit, with no NVRTC and no cubin cache entry.
#[test]
fn hits_need_no_nvrtc() {
    if std::env::var_os(CHILD_VAR).is_some() || aot::table().is_empty() || !aot::enabled() {
        return;
    }
    common::run_without_nvrtc("child_aot_without_nvrtc", CHILD_VAR);
}

#[test]
fn child_aot_without_nvrtc() {
    if std::env::var_os(CHILD_VAR).is_none() {
        return;
    }
    if probe::nvrtc().is_ok() {
        println!("CHILD: skipped (libnvrtc found without LD_LIBRARY_PATH or the folder search)");
        return;
    }
    let hopper = Target::hopper();
    let embedded: Vec<(String, String)> =
        files().into_iter().filter(|(_, t)| aot::find(t, "sm_90a").is_some()).collect();
    let tmp = tempfile::tempdir().expect("tempdir");
    let cubins = CubinCache::open(Some(tmp.path()));
    let refs: Vec<(&str, &str)> = embedded.iter().map(|(n, t)| (n.as_str(), t.as_str())).collect();
    let before = aot::hits();
    for (r, (name, _)) in nvrtc::compile_parallel(&refs, &hopper, &cubins).into_iter().zip(&refs) {
        let (c, hit) = r.unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(hit && c.seconds == 0.0 && c.image.starts_with(b"\x7fELF"), "{name}");
    }
    for (name, text) in &refs {
        let (_, hit) = cubins.compile_cached(name, text, &hopper).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(hit, "{name}");
    }
    assert_eq!(aot::hits() - before, 2 * refs.len());
    assert!(!tmp.path().join("cubin").exists(), "a hit wrote the cubin cache");
    // Anything else still needs NVRTC, and says so.
    let other = "extern \"C\" __global__ void not_embedded(float* a) { a[0] = 1.0f; }";
    assert!(matches!(cubins.compile_cached("other", other, &hopper), Err(nvrtc::NvrtcError::Unavailable(_))));
    println!("CHILD: checked {} embedded kernels without NVRTC ({})", refs.len(), probe::nvrtc().unwrap_err());
}

/// The build compiled with exactly the run-time options: where this process has the same NVRTC,
/// compiling the shortest embedded file now gives the embedded cubin byte for byte, and the same
/// log but for ptxas' `Compile time` lines. One file only: an attention kernel takes NVRTC
/// 0.5-1 s.
#[test]
fn embedded_cubin_is_what_a_run_time_compile_gives() {
    let Ok(version) = nvrtc::version() else {
        assert!(!required(), "SINTER_REQUIRE_NVRTC=1 but NVRTC is not available");
        eprintln!("skipped: no NVRTC here");
        return;
    };
    let embedded = files().into_iter().filter_map(|(n, t)| aot::find(&t, "sm_90a").map(|e| (n, t, e)));
    let Some((name, text, e)) = embedded.min_by_key(|(_, t, _)| t.len()) else { return };
    if e.nvrtc != version {
        eprintln!("skipped: {name} was built by NVRTC {:?}, this is {version:?}", e.nvrtc);
        return;
    }
    let c = nvrtc::compile(name.trim_end_matches(".cu"), &text, &Target::hopper())
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    assert!(
        c.image == e.cubin,
        "{name}: the run-time compile's cubin differs from the embedded one (options drifted?)"
    );
    let timeless = |log: &str| -> Vec<String> {
        log.lines().filter(|l| !l.contains("Compile time")).map(str::to_string).collect()
    };
    assert_eq!(timeless(&c.log), timeless(e.log), "{name}");
}
