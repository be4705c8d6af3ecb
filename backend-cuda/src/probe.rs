//! Probing for the CUDA driver and NVRTC before cudarc is touched: cudarc loads libcuda and
//! libnvrtc on first use and panics when one is absent, so every entry point of this crate calls
//! [`driver`] or [`nvrtc`] first and turns a missing library into an error naming it.
//!
//! libcuda comes with the NVIDIA driver and is looked up on the loader path only (its names:
//! cudarc's `get_lib_name_candidates("cuda")`, `libcuda.so.1` among them). libnvrtc is looked up
//! on the loader path first (`LD_LIBRARY_PATH`, the ldconfig cache), then in the folders a CUDA
//! toolkit or the PyPI wheels install it to (see [`nvrtc_search_dirs`]); a library found there is
//! loaded by absolute path and kept loaded, so cudarc's own lookup by soname then finds it.
//! `SINTER_NVRTC_SEARCH=0` turns that second step off.

use cudarc::driver::{result as cu, sys as cusys};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

mod dirs;

use dirs::{NVRTC_FALLBACK_LIBS, builtins_beside, mapped_nvrtc};
pub use dirs::{NVRTC_LIB, nvrtc_search_dirs, python_site_dirs};
pub(crate) use dirs::{dedup_existing, include_candidates, include_dirs, toolkit_homes};

/// What [`driver`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DriverInfo {
    /// Driver API version as `cuDriverGetVersion` reports it (e.g. 13000 for CUDA 13.0).
    pub version: i32,
    /// Number of CUDA devices (at least one).
    pub device_count: u32,
    /// Device 0's name, e.g. `NVIDIA H100 80GB HBM3`.
    pub device0_name: String,
    /// Device 0's compute capability (major, minor), e.g. (9, 0).
    pub device0_sm: (u32, u32),
}

impl DriverInfo {
    /// The driver version as `major.minor` (13000 → `13.0`).
    pub fn version_string(&self) -> String {
        format!("{}.{}", self.version / 1000, (self.version % 1000) / 10)
    }
}

/// Checks that the CUDA driver can be loaded and initialized and has a device; the error names
/// what is missing (`libcuda.so.1 not found: ...`, `cuInit failed: CUDA_ERROR_NO_DEVICE ...`).
/// Never panics.
pub fn driver() -> Result<DriverInfo, String> {
    // SAFETY: only tries to dlopen the driver library under its known names.
    if !unsafe { cusys::is_culib_present() } {
        let tried = cudarc::get_lib_name_candidates("cuda").len() + cudarc::get_lib_name_candidates("nvcuda").len();
        return Err(format!(
            "libcuda.so.1 not found: no NVIDIA driver on this machine (looked on the loader path for \
             libcuda.so.1, libcuda.so and {} other names)",
            tried.saturating_sub(2)
        ));
    }
    cu::init().map_err(|e| format!("cuInit failed: {}", driver_error(e)))?;
    let mut version = 0;
    // SAFETY: libcuda is present (checked above); the pointer is to a live local.
    unsafe { cusys::cuDriverGetVersion(&mut version) }
        .result()
        .map_err(|e| format!("cuDriverGetVersion failed: {}", driver_error(e)))?;
    let count = cu::device::get_count().map_err(|e| format!("cuDeviceGetCount failed: {}", driver_error(e)))?;
    if count <= 0 {
        return Err("no CUDA device: the driver is loaded but cuDeviceGetCount returned 0".into());
    }
    let dev = cu::device::get(0).map_err(|e| format!("cuDeviceGet(0) failed: {}", driver_error(e)))?;
    let name = cu::device::get_name(dev).map_err(|e| format!("cuDeviceGetName failed: {}", driver_error(e)))?;
    let attr = |a| {
        // SAFETY: `dev` is a valid device handle from cuDeviceGet.
        unsafe { cu::device::get_attribute(dev, a) }
            .map_err(|e| format!("cuDeviceGetAttribute({a:?}) failed: {}", driver_error(e)))
    };
    let major = attr(cusys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
    let minor = attr(cusys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?;
    Ok(DriverInfo {
        version,
        device_count: count as u32,
        device0_name: name,
        device0_sm: (major.max(0) as u32, minor.max(0) as u32),
    })
}

/// `CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected)`.
fn driver_error(e: cu::DriverError) -> String {
    let name = e.error_name().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|_| format!("{:?}", e.0));
    match e.error_string() {
        Ok(s) => format!("{name} ({})", s.to_string_lossy()),
        Err(_) => name,
    }
}

/// Checks that NVRTC can be loaded (and loads it: see the module doc); the error names the
/// library and the folders searched, and how to install it. Never panics.
pub fn nvrtc() -> Result<(), String> {
    nvrtc_location().map(|_| ())
}

/// The file NVRTC was loaded from (an absolute path; the bare file name when `/proc/self/maps`
/// does not say). Loads it on first call, as [`nvrtc`].
pub fn nvrtc_location() -> Result<String, String> {
    static LOADED: OnceLock<String> = OnceLock::new();
    if let Some(at) = LOADED.get() {
        return Ok(at.clone());
    }
    let at = find_nvrtc()?;
    Ok(LOADED.get_or_init(|| at).clone())
}

fn find_nvrtc() -> Result<String, String> {
    // The loader path first, under cudarc's names in cudarc's order (so cudarc's own lookup later
    // picks the same file). The handle is kept: a library loaded then dropped would be unmapped,
    // and /proc/self/maps could not say which file it was.
    for name in cudarc::get_lib_name_candidates("nvrtc") {
        // SAFETY: loading NVRTC runs only its (NVIDIA-shipped) initializers.
        if let Ok(handle) = unsafe { libloading::Library::new(&name) } {
            std::mem::forget(handle);
            let Some(path) = mapped_nvrtc() else { return Ok(name) };
            preload_builtins(&path);
            return Ok(path.display().to_string());
        }
    }
    let search = std::env::var("SINTER_NVRTC_SEARCH").map_or(true, |v| v != "0");
    let dirs = if search { nvrtc_search_dirs() } else { Vec::new() };
    for dir in &dirs {
        for lib in std::iter::once(&NVRTC_LIB).chain(NVRTC_FALLBACK_LIBS) {
            let path = dir.join(lib);
            if !path.is_file() {
                continue;
            }
            // SAFETY: loading NVRTC runs only its (trusted, NVIDIA-shipped) initializers.
            match unsafe { libloading::Library::new(&path) } {
                Ok(handle) => {
                    // Kept loaded for the life of the process: cudarc's dlopen by soname now
                    // resolves to this already-loaded object.
                    std::mem::forget(handle);
                    preload_builtins(&path);
                    // SAFETY: as above.
                    if unsafe { cudarc::nvrtc::sys::is_culib_present() } {
                        return Ok(path.display().to_string());
                    }
                }
                Err(e) => tracing::debug!(target: "sinter::cuda", "could not load {}: {e}", path.display()),
            }
        }
    }
    let searched = if dirs.is_empty() {
        String::new()
    } else {
        format!(" or in {}", dirs.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(", "))
    };
    Err(format!(
        "{NVRTC_LIB} not found (searched the loader path{searched}); install the CUDA toolkit or \
         `pip install nvidia-cuda-nvrtc==13.0.*` and put its lib folder on LD_LIBRARY_PATH"
    ))
}

/// Loads (and keeps) `libnvrtc-builtins.so.<major>.<minor>` from the folder of the libnvrtc at
/// `nvrtc` ([`dirs::builtins_beside`]).
fn preload_builtins(nvrtc: &Path) {
    for path in builtins_beside(nvrtc) {
        // SAFETY: as for libnvrtc itself.
        match unsafe { libloading::Library::new(&path) } {
            Ok(handle) => std::mem::forget(handle),
            Err(err) => tracing::debug!(target: "sinter::cuda", "could not load {}: {err}", path.display()),
        }
    }
}

/// Loads cuBLASLt (once per process) so cudarc's `cublaslt` module finds it: the loader path
/// under cudarc's names first, then `lib64` of the toolkit roots and the PyPI wheels' folders
/// (`nvidia/cu13/lib`, `nvidia/cublas/lib`); `Err` says what was searched. Optional: without it
/// the CUDA backend runs every product on its own templates.
pub fn cublaslt() -> Result<(), String> {
    static LOADED: OnceLock<Result<(), String>> = OnceLock::new();
    LOADED.get_or_init(find_cublaslt).clone()
}

fn find_cublaslt() -> Result<(), String> {
    if std::env::var("SINTER_CUDA_LIBRARY").is_ok_and(|v| v == "0") {
        return Err("turned off by SINTER_CUDA_LIBRARY=0".into());
    }
    let mut dirs: Vec<PathBuf> = toolkit_homes().into_iter().map(|h| h.join("lib64")).collect();
    for site in python_site_dirs() {
        dirs.push(site.join("nvidia/cu13/lib"));
        dirs.push(site.join("nvidia/cublas/lib"));
    }
    find_library(
        "cublasLt",
        "libcublasLt.so.",
        &[],
        dedup_existing(dirs),
        // SAFETY: checks that the symbols resolve; loads only NVIDIA-shipped initializers.
        || unsafe { cudarc::cublaslt::sys::is_culib_present() },
    )
    .map_err(|searched| format!("libcublasLt not found (searched {searched}); products run on sinter's own templates"))
}

/// Loads cuDNN (once per process) so cudarc's `cudnn` module finds it: the loader path under
/// cudarc's names first, then `lib64`/`lib` of the toolkit roots and the PyPI wheel's folder
/// (`nvidia/cudnn/lib`, where PyTorch's dependency puts it). cuDNN 9 opens its sub-libraries
/// (`libcudnn_cnn.so.9`, `libcudnn_engines_precompiled.so.9`, ...) by name at its first call,
/// which finds them only on the loader path, so those beside a library found in a folder are
/// loaded first. Optional: without it convolutions run on sinter's own templates.
/// `SINTER_CUDNN=0` turns it off.
pub fn cudnn() -> Result<(), String> {
    static LOADED: OnceLock<Result<(), String>> = OnceLock::new();
    LOADED.get_or_init(find_cudnn).clone()
}

fn find_cudnn() -> Result<(), String> {
    if std::env::var("SINTER_CUDNN").is_ok_and(|v| v == "0") {
        return Err("turned off by SINTER_CUDNN=0".into());
    }
    let mut dirs: Vec<PathBuf> = Vec::new();
    for home in toolkit_homes() {
        dirs.push(home.join("lib64"));
        dirs.push(home.join("lib"));
    }
    for site in python_site_dirs() {
        dirs.push(site.join("nvidia/cudnn/lib"));
        dirs.push(site.join("nvidia/cu13/lib"));
    }
    dirs.push(PathBuf::from("/usr/lib/x86_64-linux-gnu"));
    find_library(
        "cudnn",
        "libcudnn.so.9",
        &["libcudnn_"],
        dedup_existing(dirs),
        // SAFETY: checks that the library loads; loads only NVIDIA-shipped initializers.
        || unsafe { cudarc::cudnn::sys::is_culib_present() },
    )
    .map_err(|searched| {
        format!("libcudnn.so.9 not found (searched {searched}); convolutions run on sinter's own templates")
    })
}

/// Loads library `name` so cudarc's lookup by soname finds it: on the loader path under
/// cudarc's names, else the files in `dirs` whose names start with `prefix` (newest name last),
/// each kept loaded for the life of the process, after the files beside it whose names start
/// with one of `siblings` (loaded until no more load: their order of dependence is unknown).
/// `present` says whether cudarc now finds it. `Err` lists what was searched.
fn find_library(
    name: &str,
    prefix: &str,
    siblings: &[&str],
    dirs: Vec<PathBuf>,
    present: impl Fn() -> bool,
) -> Result<(), String> {
    for soname in cudarc::get_lib_name_candidates(name) {
        // SAFETY: loads only NVIDIA-shipped initializers.
        if let Ok(handle) = unsafe { libloading::Library::new(&soname) } {
            std::mem::forget(handle);
            if present() {
                return Ok(());
            }
        }
    }
    let files = |dir: &Path, starts: &dyn Fn(&str) -> bool| -> Vec<PathBuf> {
        let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
        let mut v: Vec<PathBuf> = entries
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(starts))
            .collect();
        v.sort();
        v
    };
    for dir in &dirs {
        let libs = files(dir, &|n| n.starts_with(prefix));
        if libs.is_empty() {
            continue;
        }
        // Sub-libraries first, retried while any loads (one may need another loaded before it).
        let mut pending = files(dir, &|n| siblings.iter().any(|s| n.starts_with(s)) && n.contains(".so"));
        while !pending.is_empty() {
            let before = pending.len();
            pending.retain(|p| {
                // SAFETY: as above; kept loaded so a dlopen by soname resolves to it.
                match unsafe { libloading::Library::new(p) } {
                    Ok(handle) => {
                        std::mem::forget(handle);
                        false
                    }
                    Err(_) => true,
                }
            });
            if pending.len() == before {
                tracing::debug!(target: "sinter::cuda", "could not load {} of {name}'s sub-libraries", pending.len());
                break;
            }
        }
        for path in libs {
            // SAFETY: as above.
            match unsafe { libloading::Library::new(&path) } {
                Ok(handle) => {
                    std::mem::forget(handle);
                    if present() {
                        return Ok(());
                    }
                }
                Err(e) => tracing::debug!(target: "sinter::cuda", "could not load {}: {e}", path.display()),
            }
        }
    }
    Err(if dirs.is_empty() {
        "the loader path".to_string()
    } else {
        format!("the loader path and {}", dirs.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(", "))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_string_splits_major_minor() {
        let info = DriverInfo { version: 12040, device_count: 1, device0_name: "x".into(), device0_sm: (9, 0) };
        assert_eq!(info.version_string(), "12.4");
    }

    #[test]
    fn dedup_existing_drops_missing_and_repeated() {
        let tmp = std::env::temp_dir();
        let missing = tmp.join("sinter-no-such-folder-7f3a");
        assert_eq!(dedup_existing(vec![tmp.clone(), missing, tmp.clone()]), vec![tmp]);
    }
}
