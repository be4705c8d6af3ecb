//! Where a CUDA toolkit or the PyPI wheels put libnvrtc and the CUDA headers: the folder lists the
//! crate searches at run time ([`super::nvrtc`], `nvrtc::include_dirs`) and `build.rs` searches
//! when it compiles `aot/*.cu` ahead of time (`crate::aot`). Dependency-free (std only):
//! `build.rs` includes this file with `#[path]`.

use std::path::{Path, PathBuf};

/// The file name of the NVRTC this crate's bindings are built for (CUDA 13).
pub const NVRTC_LIB: &str = "libnvrtc.so.13";

/// Older NVRTC sonames also accepted in the well-known folders (the API this crate uses is
/// unchanged since CUDA 12).
pub const NVRTC_FALLBACK_LIBS: &[&str] = &["libnvrtc.so.12"];

/// The folders (that exist) where a CUDA toolkit or the PyPI wheels put libnvrtc, in search
/// order: `$CUDA_HOME/lib64`, `$CUDA_PATH/lib64`, `/usr/local/cuda/lib64`,
/// `/usr/local/cuda/targets/x86_64-linux/lib`, then `nvidia/cu13/lib` (CUDA 13 wheels) and
/// `nvidia/cuda_nvrtc/lib` (CUDA 12 wheels) under every Python site-packages folder of
/// [`python_site_dirs`].
pub fn nvrtc_search_dirs() -> Vec<PathBuf> {
    let mut out = Vec::new();
    for home in toolkit_homes() {
        out.push(home.join("lib64"));
        out.push(home.join("targets/x86_64-linux/lib"));
    }
    for site in python_site_dirs() {
        out.push(site.join("nvidia/cu13/lib"));
        out.push(site.join("nvidia/cuda_nvrtc/lib"));
    }
    dedup_existing(out)
}

/// CUDA toolkit roots: `$CUDA_HOME`, `$CUDA_PATH`, `/usr/local/cuda`.
pub fn toolkit_homes() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = ["CUDA_HOME", "CUDA_PATH"]
        .iter()
        .filter_map(|v| std::env::var_os(v).filter(|s| !s.is_empty()).map(PathBuf::from))
        .collect();
    out.push(PathBuf::from("/usr/local/cuda"));
    out
}

/// Python package folders where pip may have put the NVIDIA wheels: the active virtual
/// environment and conda prefix, the user site (`~/.local/lib/python3.*/site-packages`), pyenv's
/// interpreters (`$PYENV_ROOT/versions/*/lib/python3.*/site-packages`), and the system ones (`/usr/local/lib/python3.*/{site,dist}-packages`, `/usr/lib/python3/dist-packages`,
/// `/usr/lib/python3.*/site-packages`, `/opt/conda/lib/python3.*/site-packages`). Only folders
/// that exist.
pub fn python_site_dirs() -> Vec<PathBuf> {
    let mut prefixes: Vec<PathBuf> = ["VIRTUAL_ENV", "CONDA_PREFIX"]
        .iter()
        .filter_map(|v| std::env::var_os(v).filter(|s| !s.is_empty()).map(PathBuf::from))
        .collect();
    let home = std::env::var_os("HOME").filter(|s| !s.is_empty()).map(PathBuf::from);
    if let Some(home) = &home {
        prefixes.push(home.join(".local"));
    }
    // pyenv interpreters: `$PYENV_ROOT/versions/*`, else `~/.pyenv/versions/*`.
    let pyenv = std::env::var_os("PYENV_ROOT").filter(|s| !s.is_empty()).map(PathBuf::from);
    if let Some(root) = pyenv.or_else(|| home.map(|h| h.join(".pyenv")))
        && let Ok(versions) = std::fs::read_dir(root.join("versions"))
    {
        let mut v: Vec<PathBuf> = versions.filter_map(|e| e.ok()).map(|e| e.path()).collect();
        v.sort();
        prefixes.extend(v);
    }
    prefixes.extend(["/usr/local", "/usr", "/opt/conda"].iter().map(PathBuf::from));
    let mut out = Vec::new();
    for prefix in prefixes {
        for py in python_dirs(&prefix.join("lib")) {
            out.push(py.join("site-packages"));
            out.push(py.join("dist-packages"));
        }
    }
    out.push(PathBuf::from("/usr/lib/python3/dist-packages"));
    dedup_existing(out)
}

/// `lib/python3.*` folders under `lib`, newest name last.
fn python_dirs(lib: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(lib) else { return Vec::new() };
    let mut out: Vec<PathBuf> = entries
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_str().is_some_and(|n| n.starts_with("python3")))
        .map(|e| e.path())
        .collect();
    out.sort();
    out
}

/// Keeps the folders that exist, each once, in order.
pub fn dedup_existing(dirs: Vec<PathBuf>) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    for d in dirs {
        if d.is_dir() && !out.contains(&d) {
            out.push(d);
        }
    }
    out
}

/// The libnvrtc file mapped into this process, from `/proc/self/maps`.
pub fn mapped_nvrtc() -> Option<PathBuf> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    maps.lines().filter_map(|l| l.split_whitespace().nth(5)).map(PathBuf::from).find(|p| {
        p.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("libnvrtc.") || n.starts_with("libnvrtc64"))
    })
}

/// The `libnvrtc-builtins.so.*` files beside the libnvrtc at `nvrtc`: NVRTC opens its builtins by
/// file name at its first compile, which finds them only on the loader path, so a libnvrtc loaded
/// from a folder needs them loaded first (a library already loaded under that soname satisfies
/// the lookup).
pub fn builtins_beside(nvrtc: &Path) -> Vec<PathBuf> {
    let Some(dir) = nvrtc.parent() else { return Vec::new() };
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut out: Vec<PathBuf> = entries
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_str().is_some_and(|n| n.starts_with("libnvrtc-builtins.so.")))
        .map(|e| e.path())
        .collect();
    out.sort();
    out
}

/// Every include folder NVRTC may get, existing or not, in order: every entry of
/// `SINTER_CUDA_INCLUDE` (colon-separated); `include/` beside the folder of the loaded libnvrtc
/// `nvrtc_lib` where it holds `cuda_fp16.h` (the headers of the same toolkit or wheel set);
/// `$CUDA_HOME/include`, `$CUDA_PATH/include`, `/usr/local/cuda/include` and their
/// `targets/x86_64-linux/include`; under every Python site-packages folder, `nvidia/cu13/include`
/// (the CUDA 13 wheels `nvidia-cuda-runtime`, `nvidia-cuda-crt`, `nvidia-cuda-nvrtc` all install
/// there) and the CUDA 12 wheels' `nvidia/cuda_runtime/include`, `nvidia/cuda_nvrtc/include`.
pub fn include_candidates(nvrtc_lib: Option<&Path>) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::env::var("SINTER_CUDA_INCLUDE")
        .unwrap_or_default()
        .split(':')
        .filter(|s| !s.is_empty())
        .map(PathBuf::from)
        .collect();
    if let Some(dir) = nvrtc_lib.and_then(include_beside) {
        out.push(dir);
    }
    for home in toolkit_homes() {
        out.push(home.join("include"));
        out.push(home.join("targets/x86_64-linux/include"));
    }
    for site in python_site_dirs() {
        for sub in ["nvidia/cu13/include", "nvidia/cuda_runtime/include", "nvidia/cuda_nvrtc/include"] {
            out.push(site.join(sub));
        }
    }
    out
}

/// `<lib>/../include` for the libnvrtc at `<lib>/libnvrtc...`, where it holds `cuda_fp16.h`.
fn include_beside(nvrtc_lib: &Path) -> Option<PathBuf> {
    let lib_dir = nvrtc_lib.parent()?;
    let lib_dir = lib_dir.canonicalize().unwrap_or_else(|_| lib_dir.to_path_buf());
    let include = lib_dir.parent()?.join("include");
    include.join("cuda_fp16.h").is_file().then_some(include)
}

/// The folders of `candidates` ([`include_candidates`]) that exist, each once, in order, each
/// followed by its `cccl/` subfolder where present.
pub fn include_dirs(candidates: Vec<PathBuf>) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    for d in candidates {
        if !d.is_dir() || out.contains(&d) {
            continue;
        }
        let cccl = d.join("cccl");
        out.push(d);
        if cccl.is_dir() && !out.contains(&cccl) {
            out.push(cccl);
        }
    }
    out
}
