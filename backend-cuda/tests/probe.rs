//! The driver and NVRTC probes: never a panic, and an error that names the missing library.
//!
//! `SINTER_REQUIRE_CUDA=1` (the device run) makes a failed driver probe a failure;
//! `SINTER_REQUIRE_NVRTC=1` (CI, `scripts/test.sh`) does the same for NVRTC.

mod common;

use sinter_cuda::nvrtc::{self, CubinCache, NvrtcError, Target};
use sinter_cuda::probe;

fn required(var: &str) -> bool {
    std::env::var(var).is_ok_and(|v| v == "1")
}

#[test]
fn driver_probe_is_ok_or_names_what_is_missing() {
    // SAFETY: only tries to dlopen libcuda under cudarc's names.
    let lib_present = unsafe { cudarc::driver::sys::is_culib_present() };
    let first = probe::driver();
    match &first {
        Ok(info) => {
            eprintln!(
                "CUDA driver {} ({}), {} device(s), device 0: {} sm_{}{}",
                info.version_string(),
                info.version,
                info.device_count,
                info.device0_name,
                info.device0_sm.0,
                info.device0_sm.1
            );
            assert!(lib_present);
            assert!(info.device_count >= 1 && info.version > 0 && info.device0_sm.0 > 0, "{info:?}");
        }
        Err(e) => {
            assert!(!required("SINTER_REQUIRE_CUDA"), "SINTER_REQUIRE_CUDA=1 but the driver probe failed: {e}");
            eprintln!("no CUDA driver here: {e}");
            if lib_present {
                assert!(e.starts_with("cuInit failed: CUDA_ERROR_") || e.contains("no CUDA device"), "{e}");
            } else {
                assert!(e.starts_with("libcuda.so.1 not found: no NVIDIA driver on this machine"), "{e}");
                assert!(e.contains("looked on the loader path for libcuda.so.1, libcuda.so and"), "{e}");
            }
        }
    }
    // Asking again gives the same answer (cuInit is idempotent, nothing is left half-initialized).
    assert_eq!(probe::driver(), first);
}

#[test]
fn nvrtc_probe_is_ok_or_names_the_library() {
    match probe::nvrtc() {
        Ok(()) => {
            let at = probe::nvrtc_location().expect("location after a successful probe");
            let (major, minor) = nvrtc::version().expect("version");
            eprintln!("NVRTC {major}.{minor} loaded from {at}");
            eprintln!("include folders: {:?}", nvrtc::include_dirs());
            assert!(major >= 12, "NVRTC {major}.{minor}: the bindings are for CUDA 13");
            let archs = nvrtc::supported_archs().expect("supported archs");
            assert!(archs.contains(&90), "sm_90 not among {archs:?}");
        }
        Err(e) => {
            assert!(!required("SINTER_REQUIRE_NVRTC"), "SINTER_REQUIRE_NVRTC=1 but the NVRTC probe failed: {e}");
            eprintln!("skipped: no NVRTC here: {e}");
            assert!(e.starts_with("libnvrtc.so.13 not found"), "{e}");
            assert!(e.contains("pip install nvidia-cuda-nvrtc==13.0.*"), "{e}");
        }
    }
}

/// Marks the child run of [`nvrtc_missing_is_an_error_not_a_panic`].
const CHILD_VAR: &str = "SINTER_PROBE_TEST_CHILD";

/// Runs this test binary again with the loader path emptied and the folder search off, so
/// libnvrtc cannot be found, and checks there that every NVRTC entry point returns
/// `Unavailable` naming the library.
#[test]
fn nvrtc_missing_is_an_error_not_a_panic() {
    if std::env::var_os(CHILD_VAR).is_some() {
        return;
    }
    common::run_without_nvrtc("child_without_nvrtc", CHILD_VAR);
}

#[test]
fn child_without_nvrtc() {
    if std::env::var_os(CHILD_VAR).is_none() {
        return;
    }
    if probe::nvrtc().is_ok() {
        // libnvrtc is in the system loader cache (a toolkit in /etc/ld.so.conf): cannot hide it.
        println!("CHILD: skipped (libnvrtc found without LD_LIBRARY_PATH or the folder search)");
        return;
    }
    let unavailable = |r: Result<(), NvrtcError>, what: &str| match r {
        Err(NvrtcError::Unavailable(msg)) => {
            assert!(msg.contains("libnvrtc.so.13 not found"), "{what}: {msg}");
            assert!(msg.contains("LD_LIBRARY_PATH"), "{what}: {msg}");
        }
        other => panic!("{what}: expected Unavailable, got {other:?}"),
    };
    // With an #include: the missing library is reported, not missing headers.
    let src = "#include <cuda_fp16.h>\nextern \"C\" __global__ void k(float* a) { a[threadIdx.x] = 1.0f; }";
    let t = Target::hopper();
    unavailable(nvrtc::compile("k", src, &t).map(|_| ()), "compile");
    unavailable(nvrtc::compile_ptx("k", src, &t).map(|_| ()), "compile_ptx");
    unavailable(nvrtc::version().map(|_| ()), "version");
    let tmp = tempfile::tempdir().expect("tempdir");
    unavailable(CubinCache::open(Some(tmp.path())).compile_cached("k", src, &t).map(|_| ()), "compile_cached");
    println!("CHILD: checked: {}", probe::nvrtc().unwrap_err());
    // Headers: the error names the header and the folders searched (unless a system toolkit or
    // system-wide wheels provide them).
    match nvrtc::options(&t, src) {
        Err(NvrtcError::Unavailable(msg)) => {
            assert!(msg.starts_with("cuda_fp16.h not found (searched "), "{msg}");
            assert!(msg.contains("/usr/local/cuda/include") && msg.contains("SINTER_CUDA_INCLUDE"), "{msg}");
            println!("CHILD: checked: {msg}");
        }
        Ok(opts) => println!("CHILD: headers found in system folders: {opts:?}"),
        Err(e) => panic!("options: {e:?}"),
    }
    // A source without includes needs no headers.
    assert!(nvrtc::options(&t, "extern \"C\" __global__ void k() {}").is_ok());
}
