//! Compiles `aot/*.cu` ahead of time with NVRTC and writes `$OUT_DIR/aot_table.rs`, the table of
//! kernels embedded in the crate (`src/aot.rs` holds the contract).
//!
//! * Each file is compiled for every architecture of [`AOT_SMS`] with exactly the options of a
//!   run-time compile (`nvrtc::options`: the fixed part comes from `src/nvrtc/flags.rs`, the
//!   include folders from the same search as the crate's, `src/probe/dirs.rs`).
//! * libnvrtc is loaded with `libloading` (the loader path first, then the folders the crate
//!   searches at run time, then the site-packages folders `python3` reports) and called through
//!   the few functions of [`Nvrtc`]; no CUDA toolkit or driver is needed to build.
//! * Never fails the build: without NVRTC, with `SINTER_AOT_BUILD=0`, or for a file that does not
//!   compile, a `cargo:warning` names why and which kernels are left out of the table (they then
//!   compile at run time). Silent on success and when `aot/` is empty or missing.
//! * Results are kept in `$OUT_DIR/aot/` under a key of the source, architecture, NVRTC version
//!   and options, so a rerun (an environment variable changed) recompiles only what changed.

use std::ffi::{CString, c_char, c_int, c_void};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

#[allow(dead_code)]
#[path = "src/nvrtc/flags.rs"]
mod flags;

#[allow(dead_code)]
#[path = "src/probe/dirs.rs"]
mod dirs;

/// The compute capabilities every `aot/*.cu` is compiled for, named as `Target::arch` names them
/// at run time (`flags::arch_name`: sm 9.0 is `sm_90a`); a lookup hits only on the same name.
/// Add e.g. `(10, 0)` for Blackwell (and have `arch_name` give `sm_100a` if the kernels need its
/// arch-specific features).
const AOT_SMS: &[(u32, u32)] = &[(9, 0)];

/// Environment variables that change what this script does or finds.
const ENVS: &[&str] = &[
    "SINTER_AOT_BUILD",
    "LD_LIBRARY_PATH",
    "CUDA_HOME",
    "CUDA_PATH",
    "SINTER_NVRTC_SEARCH",
    "SINTER_NVRTC_MINIMAL",
    "SINTER_CUDA_INCLUDE",
    "VIRTUAL_ENV",
    "CONDA_PREFIX",
    "PYENV_ROOT",
];

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let aot = manifest.join("aot");
    // A missing folder watched would rerun this script (and rebuild the crate) on every build:
    // then the package folder is watched, where `aot/` would appear.
    println!("cargo:rerun-if-changed={}", if aot.is_dir() { "aot" } else { "." });
    for v in ENVS {
        println!("cargo:rerun-if-env-changed={v}");
    }
    let files = sources(&aot);
    for (name, _) in &files {
        println!("cargo:rerun-if-changed=aot/{name}");
    }
    let entries = build(&files, &out.join("aot"));
    let table = out.join("aot_table.rs");
    if let Err(e) = std::fs::write(&table, table_text(&entries)) {
        // Without the table the crate cannot build: the one failure this script reports.
        panic!("could not write {}: {e}", table.display());
    }
}

/// The `aot/*.cu` files (name, text), sorted by name. A file that cannot be read as UTF-8 is
/// warned about and left out.
fn sources(aot: &Path) -> Vec<(String, String)> {
    let Ok(dir) = std::fs::read_dir(aot) else { return Vec::new() };
    let mut names: Vec<String> = dir
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_file())
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .filter(|n| n.ends_with(".cu"))
        .collect();
    names.sort();
    names
        .into_iter()
        .filter_map(|name| match std::fs::read_to_string(aot.join(&name)) {
            Ok(text) => Some((name, text)),
            Err(e) => {
                println!(
                    "cargo:warning=sinter-cuda aot: aot/{name} left out of the table: cannot read it as UTF-8 ({e})"
                );
                None
            }
        })
        .collect()
}

/// One table entry: a file compiled for one architecture.
struct Built {
    arch: String,
    file: String,
    source_hash: String,
    cubin: PathBuf,
    log: PathBuf,
    nvrtc: (i32, i32),
}

/// Compiles every file for every architecture of [`AOT_SMS`] into `dir`; what cannot be built is
/// warned about and left out.
fn build(files: &[(String, String)], dir: &Path) -> Vec<Built> {
    if files.is_empty() {
        return Vec::new();
    }
    let all = |why: &str| {
        println!(
            "cargo:warning=sinter-cuda aot: {why}: all {} kernels of aot/ left out of the table (they compile with NVRTC at run time)",
            files.len()
        );
        Vec::new()
    };
    if std::env::var("SINTER_AOT_BUILD").is_ok_and(|v| v.trim() == "0") {
        return all("SINTER_AOT_BUILD=0");
    }
    let nvrtc = match Nvrtc::load() {
        Ok(n) => n,
        Err(e) => return all(&format!("NVRTC not found ({e})")),
    };
    if let Err(e) = std::fs::create_dir_all(dir) {
        return all(&format!("cannot create {} ({e})", dir.display()));
    }
    let minimal = flags::takes_minimal(nvrtc.version, std::env::var(flags::MINIMAL_ENV).ok().as_deref());
    let includes = flags::include_options(&dirs::include_dirs(dirs::include_candidates(Some(Path::new(&nvrtc.at)))));
    let jobs: Vec<(&str, &str, String, Vec<String>)> = files
        .iter()
        .flat_map(|(name, text)| {
            AOT_SMS.iter().map(|&sm| {
                let arch = flags::arch_name(sm);
                let mut opts = flags::fixed_options(&arch, minimal);
                opts.extend(includes.iter().cloned());
                (name.as_str(), text.as_str(), arch, opts)
            })
        })
        .collect();
    let threads = std::env::var("NUM_JOBS")
        .ok()
        .and_then(|v| v.parse().ok())
        .or_else(|| std::thread::available_parallelism().ok().map(|n| n.get()))
        .unwrap_or(1)
        .clamp(1, jobs.len());
    let next = AtomicUsize::new(0);
    let mut results: Vec<(usize, Result<Kept, String>)> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some((name, text, arch, opts)) = jobs.get(i) else { break };
                        done.push((i, nvrtc.compile_kept(dir, name, text, arch, opts)));
                    }
                    done
                })
            })
            .collect();
        workers.into_iter().flat_map(|w| w.join().unwrap_or_default()).collect()
    });
    results.sort_by_key(|r| r.0);
    let mut built = Vec::new();
    let mut failed = Vec::new();
    let mut error_logs = Vec::new();
    let mut report = format!("NVRTC {}.{} from {}\n", nvrtc.version.0, nvrtc.version.1, nvrtc.at);
    for (i, r) in results {
        let (name, text, arch, opts) = &jobs[i];
        match r {
            Ok(Kept { cubin, log, seconds }) => {
                report.push_str(&format!("{name} {arch}: {seconds:.3} s ({})\n", opts.join(" ")));
                built.push(Built {
                    arch: arch.clone(),
                    file: name.to_string(),
                    source_hash: blake3::hash(text.as_bytes()).to_hex().to_string(),
                    cubin,
                    log,
                    nvrtc: nvrtc.version,
                });
            }
            Err(e) => {
                let first: Vec<&str> = e.lines().filter(|l| !l.trim().is_empty()).take(3).collect();
                println!(
                    "cargo:warning=sinter-cuda aot: aot/{name} for {arch} left out of the table (it compiles at run time): {}",
                    first.join(" | ")
                );
                let at = dir.join(format!("{name}.{arch}.error.log"));
                let _ = std::fs::write(&at, &e);
                error_logs.push(at);
                failed.push(format!("{name} ({arch})"));
            }
        }
    }
    if jobs.len() != built.len() + failed.len() {
        failed.push(format!("{} lost to a compile thread that stopped", jobs.len() - built.len() - failed.len()));
    }
    if !failed.is_empty() {
        println!(
            "cargo:warning=sinter-cuda aot: {} of {} kernels embedded; left out: {} (logs in {})",
            built.len(),
            jobs.len(),
            failed.join(", "),
            dir.display()
        );
    }
    let report_at = dir.join("report.txt");
    let _ = std::fs::write(&report_at, report);
    let mut keep: Vec<PathBuf> = built.iter().flat_map(|b| [b.cubin.clone(), b.log.clone()]).collect();
    keep.extend(error_logs);
    keep.push(report_at);
    forget_others(dir, &keep);
    built
}

/// Deletes the files in `dir` not in `keep` (results of sources changed or gone, old error logs).
fn forget_others(dir: &Path, keep: &[PathBuf]) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for p in entries.filter_map(|e| e.ok()).map(|e| e.path()) {
        if p.is_file() && !keep.contains(&p) {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// The text of `aot_table.rs`: an array expression of `aot::Entry`.
fn table_text(entries: &[Built]) -> String {
    let mut s =
        String::from("// Written by backend-cuda/build.rs from aot/*.cu: the kernels compiled ahead of time.\n&[\n");
    for e in entries {
        s.push_str(&format!(
            "    Entry {{ arch: {:?}, file: {:?}, source_hash: {:?}, cubin: include_bytes!({:?}), log: include_str!({:?}), nvrtc: ({}, {}) }},\n",
            e.arch,
            e.file,
            e.source_hash,
            e.cubin.to_string_lossy(),
            e.log.to_string_lossy(),
            e.nvrtc.0,
            e.nvrtc.1
        ));
    }
    s.push_str("]\n");
    s
}

/// A compiled file in `$OUT_DIR/aot/`.
struct Kept {
    cubin: PathBuf,
    log: PathBuf,
    /// Seconds NVRTC took (0 when kept from an earlier run).
    seconds: f64,
}

/// An NVRTC program handle.
type Prog = *mut c_void;

/// libnvrtc, loaded, and the functions this script calls.
struct Nvrtc {
    /// libnvrtc and its builtins, kept loaded.
    _libs: Vec<libloading::Library>,
    /// Where libnvrtc was loaded from.
    at: String,
    version: (i32, i32),
    create: unsafe extern "C" fn(
        *mut Prog,
        *const c_char,
        *const c_char,
        c_int,
        *const *const c_char,
        *const *const c_char,
    ) -> c_int,
    compile: unsafe extern "C" fn(Prog, c_int, *const *const c_char) -> c_int,
    log_size: unsafe extern "C" fn(Prog, *mut usize) -> c_int,
    log: unsafe extern "C" fn(Prog, *mut c_char) -> c_int,
    cubin_size: unsafe extern "C" fn(Prog, *mut usize) -> c_int,
    cubin: unsafe extern "C" fn(Prog, *mut c_char) -> c_int,
    destroy: unsafe extern "C" fn(*mut Prog) -> c_int,
    error_string: unsafe extern "C" fn(c_int) -> *const c_char,
}

impl Nvrtc {
    /// Loads libnvrtc: on the loader path (`LD_LIBRARY_PATH`, the ldconfig cache), else (unless
    /// `SINTER_NVRTC_SEARCH=0`, as at run time) in the crate's folders (`dirs::nvrtc_search_dirs`:
    /// `$CUDA_HOME/lib64`, `/usr/local/cuda/lib64`, the wheels under the site-packages folders it
    /// knows), else in `nvidia/cu13/lib` of the site-packages folders `python3` reports.
    fn load() -> Result<Nvrtc, String> {
        let names: Vec<&str> =
            std::iter::once(dirs::NVRTC_LIB).chain(dirs::NVRTC_FALLBACK_LIBS.iter().copied()).collect();
        for name in &names {
            // SAFETY: loading NVRTC runs only its (NVIDIA-shipped) initializers.
            if let Ok(lib) = unsafe { libloading::Library::new(*name) } {
                let at = dirs::mapped_nvrtc().map_or_else(|| name.to_string(), |p| p.display().to_string());
                return Nvrtc::bind(lib, at);
            }
        }
        let search = std::env::var("SINTER_NVRTC_SEARCH").map_or(true, |v| v != "0");
        let mut searched = vec!["the loader path".to_string()];
        if search {
            let mut folders = dirs::nvrtc_search_dirs();
            folders.extend(python_reported_dirs());
            for dir in dirs::dedup_existing(folders) {
                for name in &names {
                    let path = dir.join(name);
                    if !path.is_file() {
                        continue;
                    }
                    // SAFETY: as above.
                    match unsafe { libloading::Library::new(&path) } {
                        Ok(lib) => return Nvrtc::bind(lib, path.display().to_string()),
                        Err(e) => searched.push(format!("{} ({e})", path.display())),
                    }
                }
                searched.push(dir.display().to_string());
            }
        }
        Err(format!("no {} in {}", dirs::NVRTC_LIB, searched.join(", ")))
    }

    /// The functions of `lib` (loaded from `at`), with the builtins beside it loaded first.
    fn bind(lib: libloading::Library, at: String) -> Result<Nvrtc, String> {
        let mut libs = Vec::new();
        for b in dirs::builtins_beside(Path::new(&at)) {
            // SAFETY: as for libnvrtc; kept loaded so NVRTC's dlopen by soname finds it.
            if let Ok(l) = unsafe { libloading::Library::new(&b) } {
                libs.push(l);
            }
        }
        macro_rules! sym {
            ($name:literal) => {
                // SAFETY: the symbol is NVRTC's C function of this name; the field's type is its
                // signature (nvrtc.h).
                *unsafe { lib.get($name) }.map_err(|e| format!("{at}: {}: {e}", String::from_utf8_lossy($name)))?
            };
        }
        let version: unsafe extern "C" fn(*mut c_int, *mut c_int) -> c_int = sym!(b"nvrtcVersion\0");
        let mut n = Nvrtc {
            at: at.clone(),
            version: (0, 0),
            create: sym!(b"nvrtcCreateProgram\0"),
            compile: sym!(b"nvrtcCompileProgram\0"),
            log_size: sym!(b"nvrtcGetProgramLogSize\0"),
            log: sym!(b"nvrtcGetProgramLog\0"),
            cubin_size: sym!(b"nvrtcGetCUBINSize\0"),
            cubin: sym!(b"nvrtcGetCUBIN\0"),
            destroy: sym!(b"nvrtcDestroyProgram\0"),
            error_string: sym!(b"nvrtcGetErrorString\0"),
            _libs: Vec::new(),
        };
        let (mut major, mut minor) = (0, 0);
        // SAFETY: pointers to live locals.
        let rc = unsafe { version(&mut major, &mut minor) };
        if rc != 0 {
            return Err(format!("{at}: nvrtcVersion failed: {}", n.error(rc)));
        }
        n.version = (major, minor);
        libs.push(lib);
        n._libs = libs;
        Ok(n)
    }

    fn error(&self, rc: c_int) -> String {
        // SAFETY: NVRTC returns a static NUL-terminated string (or null) for any code.
        let s = unsafe { (self.error_string)(rc) };
        if s.is_null() {
            format!("NVRTC error {rc}")
        } else {
            // SAFETY: non-null, NUL-terminated, static.
            unsafe { std::ffi::CStr::from_ptr(s) }.to_string_lossy().into_owned()
        }
    }

    /// [`Nvrtc::compile`], kept in `dir` under a key of everything that goes in (reused when
    /// there from an earlier run).
    fn compile_kept(&self, dir: &Path, name: &str, source: &str, arch: &str, opts: &[String]) -> Result<Kept, String> {
        let mut h = blake3::Hasher::new();
        h.update(b"sinter-aot\0");
        h.update(source.as_bytes());
        for part in [arch.to_string(), format!("nvrtc {}.{}", self.version.0, self.version.1)].iter().chain(opts) {
            h.update(b"\0");
            h.update(part.as_bytes());
        }
        let key = h.finalize().to_hex();
        let (cubin_at, log_at) = (dir.join(format!("{key}.cubin")), dir.join(format!("{key}.log")));
        let kept = std::fs::read(&cubin_at).is_ok_and(|c| c.starts_with(b"\x7fELF")) && log_at.is_file();
        if kept {
            return Ok(Kept { cubin: cubin_at, log: log_at, seconds: 0.0 });
        }
        let t = std::time::Instant::now();
        let (cubin, log) = self.compile(name, source, opts)?;
        let seconds = t.elapsed().as_secs_f64();
        std::fs::write(&log_at, log).map_err(|e| format!("cannot write {}: {e}", log_at.display()))?;
        std::fs::write(&cubin_at, cubin).map_err(|e| format!("cannot write {}: {e}", cubin_at.display()))?;
        Ok(Kept { cubin: cubin_at, log: log_at, seconds })
    }

    /// Compiles `source` (program `name`) with `opts`: the cubin and the log.
    fn compile(&self, name: &str, source: &str, opts: &[String]) -> Result<(Vec<u8>, String), String> {
        let c_source = CString::new(source).map_err(|_| "the source contains a NUL byte".to_string())?;
        let c_name = CString::new(name).map_err(|_| "the file name contains a NUL byte".to_string())?;
        let c_opts: Vec<CString> =
            opts.iter().map(|o| CString::new(o.as_str())).collect::<Result<_, _>>().map_err(|e| e.to_string())?;
        let opt_ptrs: Vec<*const c_char> = c_opts.iter().map(|o| o.as_ptr()).collect();
        let mut prog: Prog = std::ptr::null_mut();
        // SAFETY: the strings are live NUL-terminated C strings; no headers.
        let rc = unsafe {
            (self.create)(&mut prog, c_source.as_ptr(), c_name.as_ptr(), 0, std::ptr::null(), std::ptr::null())
        };
        if rc != 0 {
            return Err(format!("nvrtcCreateProgram failed: {}", self.error(rc)));
        }
        let prog = Program { nvrtc: self, handle: prog };
        // SAFETY: a live program; `opt_ptrs` holds `opts.len()` live C strings.
        let rc = unsafe { (self.compile)(prog.handle, opt_ptrs.len() as c_int, opt_ptrs.as_ptr()) };
        let log = prog.log();
        if rc != 0 {
            return Err(format!("{} with options {}\n{}", self.error(rc), opts.join(" "), log.trim_end()));
        }
        let mut size = 0usize;
        // SAFETY: a live, compiled program; `size` is a live local.
        let rc = unsafe { (self.cubin_size)(prog.handle, &mut size) };
        if rc != 0 || size == 0 {
            return Err(format!("nvrtcGetCUBINSize failed ({}, {size} bytes)", self.error(rc)));
        }
        let mut cubin = vec![0u8; size];
        // SAFETY: `cubin` has the `size` bytes NVRTC writes.
        let rc = unsafe { (self.cubin)(prog.handle, cubin.as_mut_ptr().cast::<c_char>()) };
        if rc != 0 {
            return Err(format!("nvrtcGetCUBIN failed: {}", self.error(rc)));
        }
        if !cubin.starts_with(b"\x7fELF") {
            return Err("nvrtcGetCUBIN returned no ELF image".into());
        }
        Ok((cubin, log))
    }
}

/// A created program, destroyed on drop.
struct Program<'a> {
    nvrtc: &'a Nvrtc,
    handle: Prog,
}

impl Program<'_> {
    /// The program's log (after a compile attempt), up to its NUL.
    fn log(&self) -> String {
        let mut size = 0usize;
        // SAFETY: a live program; `size` is a live local.
        if unsafe { (self.nvrtc.log_size)(self.handle, &mut size) } != 0 || size == 0 {
            return String::new();
        }
        let mut buf = vec![0u8; size];
        // SAFETY: `buf` has the `size` bytes NVRTC writes.
        if unsafe { (self.nvrtc.log)(self.handle, buf.as_mut_ptr().cast::<c_char>()) } != 0 {
            return String::new();
        }
        let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
        String::from_utf8_lossy(&buf[..end]).into_owned()
    }
}

impl Drop for Program<'_> {
    fn drop(&mut self) {
        // SAFETY: created by nvrtcCreateProgram, destroyed once, here.
        unsafe { (self.nvrtc.destroy)(&mut self.handle) };
    }
}

/// `nvidia/cu13/lib` and `nvidia/cuda_nvrtc/lib` under the site-packages folders `python3`
/// reports (`site.getsitepackages()`, the user site); nothing when there is no `python3`.
fn python_reported_dirs() -> Vec<PathBuf> {
    let code = "import site; print('\\n'.join(site.getsitepackages() + [site.getusersitepackages()]))";
    let Ok(out) = std::process::Command::new("python3").args(["-c", code]).output() else { return Vec::new() };
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .flat_map(|l| [Path::new(l.trim()).join("nvidia/cu13/lib"), Path::new(l.trim()).join("nvidia/cuda_nvrtc/lib")])
        .collect()
}
