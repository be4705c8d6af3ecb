//! NVRTC: CUDA C++ source to a cubin for one architecture, with the compile log in the error and
//! an on-disk cubin cache keyed by source hash, architecture, NVRTC version and options
//! ([`CubinCache`]).
//!
//! Contract:
//! * Never panics: [`crate::probe::nvrtc`] loads libnvrtc (or says why it cannot) before cudarc's
//!   NVRTC bindings are called, and a missing library is [`NvrtcError::Unavailable`].
//! * The options are fixed by the target ([`options`]): `--gpu-architecture=sm_90a` on sm 9.0
//!   (wgmma needs the arch-specific target), else `sm_XY`; `-std=c++17`; `--ptxas-options=-v` so
//!   the log reports registers, spills and shared memory per kernel ([`resources`]);
//!   `-default-device`; `-minimal` where NVRTC has it ([`MINIMAL_SINCE`]); the include folders of
//!   [`include_dirs`] (the renderer's sources include no header: the `render::half` module declares
//!   f16/bf16). No fast-math: the renderer's
//!   numerics must match `sinter_core::scalar`. No `--Ofast-compile`: at level `min` it ran
//!   softmax 50% and the attention kernels 1.3-2.9x slower for compiles within their spread, at
//!   `mid` most kernels 1.6-35x slower (H200, session 30, call 1).
//! * The log is kept: in [`NvrtcError::Compile`] on failure, in [`Cubin::log`] on success.
//! * Kernels compiled ahead of time come first: [`compile_parallel`] and
//!   [`CubinCache::compile_cached`] ask [`crate::aot::lookup`] before anything needs NVRTC (the
//!   cache key asks NVRTC for its version), and a source byte-identical to an `aot/*.cu` file,
//!   for the same architecture, is its embedded cubin and log (built by `build.rs` with these
//!   same options: the fixed part is one list, `nvrtc/flags.rs`), with no NVRTC and no cubin
//!   cache entry. [`compile`] itself always runs NVRTC (tests and measurements of NVRTC call it).

mod batch;
mod cache;
mod flags;
mod resources;
mod worker;

pub use batch::{COMPILE_ALONE, MAX_COMPILE_THREADS, compile_parallel, ptx_images};
pub use cache::{CubinCache, EntryError, decode_entry, encode_entry};
pub use flags::MINIMAL_SINCE;
pub use resources::resources;
pub use worker::{set_worker_command, worker_compiles, worker_main, workers_enabled};

use cudarc::nvrtc::{result as rtc, sys};
use std::ffi::{CString, c_char};
use std::path::{Path, PathBuf};

/// Errors of NVRTC compilation.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum NvrtcError {
    /// libnvrtc could not be found or loaded, or the CUDA headers could not be found.
    #[error("NVRTC is not available: {0}")]
    Unavailable(String),
    /// The source did not compile (or NVRTC failed on it).
    #[error("NVRTC compile of {name} failed:\n{log}")]
    Compile {
        /// Kernel / program name.
        name: String,
        /// The compile log.
        log: String,
    },
}

/// What to compile for.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Target {
    /// Compute capability (major, minor).
    pub sm: (u32, u32),
    /// Let NVRTC use its own cache (NVRTC 13 keeps PTX and cubins in the CUDA driver's cache,
    /// `CUDA_CACHE_PATH`, across processes: a source compiled before on the machine compiles
    /// 4-16x faster, session 27); off, `--no-cache`.
    pub nvrtc_cache: bool,
}

impl Target {
    /// Hopper (H100): sm 9.0, compiled as `sm_90a`.
    pub fn hopper() -> Target {
        Target::sm((9, 0))
    }

    /// Compute capability `sm`, NVRTC's own cache on.
    pub fn sm(sm: (u32, u32)) -> Target {
        Target { sm, nvrtc_cache: true }
    }

    /// The `--gpu-architecture` value: `sm_90a` for sm 9.0 (the arch-specific features wgmma and
    /// setmaxnreg need), else `sm_XY`.
    pub fn arch(&self) -> String {
        flags::arch_name(self.sm)
    }
}

/// A compiled cubin and what ptxas reported.
#[derive(Clone, Debug, PartialEq)]
pub struct Cubin {
    /// The cubin image.
    pub image: Vec<u8>,
    /// The compile log (ptxas `-v` output: registers, spills, shared memory).
    pub log: String,
    /// Seconds NVRTC took to compile it (0 when it came from a cache).
    pub seconds: f64,
}

/// A PTX module of [`crate::render::ptx`] as the image to load: its text and a NUL, which the
/// driver's JIT assembles when the module is loaded (`cuModuleLoadData`); no NVRTC, no cache
/// entry (the driver's own JIT cache keeps the assembled code across processes).
pub fn ptx_image(source: &str) -> Cubin {
    let mut image = source.as_bytes().to_vec();
    image.push(0);
    Cubin { image, log: String::new(), seconds: 0.0 }
}

/// Compiles `source` (program name `name`) to a cubin for `target`; a PTX module
/// ([`crate::render::ptx::is_ptx`]) becomes its [`ptx_image`].
pub fn compile(name: &str, source: &str, target: &Target) -> Result<Cubin, NvrtcError> {
    if crate::render::ptx::is_ptx(source) {
        return Ok(ptx_image(source));
    }
    // The library first, so a machine without NVRTC is told that (not that headers are missing).
    crate::probe::nvrtc().map_err(NvrtcError::Unavailable)?;
    let opts = options(target, source)?;
    let t = std::time::Instant::now();
    let mut prog = Program::compile(name, source, &opts)?;
    let image = prog.cubin()?;
    Ok(Cubin { image, log: std::mem::take(&mut prog.log), seconds: t.elapsed().as_secs_f64() })
}

/// Compiles `source` to PTX for `target` (same options as [`compile`]), for debugging and
/// artifacts.
pub fn compile_ptx(name: &str, source: &str, target: &Target) -> Result<String, NvrtcError> {
    crate::probe::nvrtc().map_err(NvrtcError::Unavailable)?;
    let opts = options(target, source)?;
    let prog = Program::compile(name, source, &opts)?;
    // SAFETY: `prog.handle` is a live, compiled program.
    let ptx = unsafe { rtc::get_ptx(prog.handle) }.map_err(|e| prog.api_error("nvrtcGetPTX", e))?;
    Ok(c_chars_to_string(&ptx))
}

/// Joins self-contained kernel sources into one translation unit, so one NVRTC call (one
/// front-end start, one header parse) compiles them all into one cubin: every `#include` line is
/// hoisted to the top once, and the rest of source `i` is wrapped in `namespace sinter_src{i}`, so
/// helper functions of the same name in two sources do not collide. `extern "C"` entry points
/// keep their unmangled names, so those must be distinct across `sources`.
pub fn combine_sources(sources: &[&str]) -> String {
    let mut includes: Vec<&str> = Vec::new();
    let mut bodies = String::new();
    for (i, src) in sources.iter().enumerate() {
        bodies.push_str(&format!("namespace sinter_src{i} {{\n"));
        for line in src.lines() {
            if line.trim_start().starts_with("#include") {
                if !includes.contains(&line.trim()) {
                    includes.push(line.trim());
                }
            } else {
                bodies.push_str(line);
                bodies.push('\n');
            }
        }
        bodies.push_str(&format!("}} // namespace sinter_src{i}\n\n"));
    }
    let mut out: String = includes.iter().map(|l| format!("{l}\n")).collect();
    if !out.is_empty() {
        out.push('\n');
    }
    out.push_str(&bodies);
    out
}

/// The NVRTC version (major, minor), e.g. (13, 0).
pub fn version() -> Result<(i32, i32), NvrtcError> {
    crate::probe::nvrtc().map_err(NvrtcError::Unavailable)?;
    let (mut major, mut minor) = (0, 0);
    // SAFETY: NVRTC is loaded (probe above); the pointers are to live locals.
    unsafe { sys::nvrtcVersion(&mut major, &mut minor) }
        .result()
        .map_err(|e| NvrtcError::Unavailable(format!("nvrtcVersion failed: {e:?}")))?;
    Ok((major, minor))
}

/// The real architectures this NVRTC can compile for, as `major * 10 + minor` (90 for sm_90).
pub fn supported_archs() -> Result<Vec<i32>, NvrtcError> {
    crate::probe::nvrtc().map_err(NvrtcError::Unavailable)?;
    let mut n = 0;
    let unavailable = |e| NvrtcError::Unavailable(format!("nvrtcGetSupportedArchs failed: {e:?}"));
    // SAFETY: NVRTC is loaded; `n` is a live local.
    unsafe { sys::nvrtcGetNumSupportedArchs(&mut n) }.result().map_err(unavailable)?;
    let mut archs = vec![0; n.max(0) as usize];
    // SAFETY: `archs` has room for the `n` entries NVRTC writes.
    unsafe { sys::nvrtcGetSupportedArchs(archs.as_mut_ptr()) }.result().map_err(unavailable)?;
    Ok(archs)
}

/// Whether the options take `-minimal` ([`MINIMAL_SINCE`]): decided once per process (every
/// compile and every cubin-cache key asks).
fn minimal() -> bool {
    static MINIMAL: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *MINIMAL.get_or_init(|| {
        let env = std::env::var(flags::MINIMAL_ENV).ok();
        version().is_ok_and(|v| flags::takes_minimal(v, env.as_deref()))
    })
}

/// The NVRTC options for `target`: architecture, `-std=c++17`, `--ptxas-options=-v`,
/// `-default-device`, `-minimal` where NVRTC has it, then one `--include-path=` per folder of
/// [`include_dirs`]. Errors when
/// `source` has an `#include` and no folder holds `cuda_fp16.h` (naming the folders searched).
pub fn options(target: &Target, source: &str) -> Result<Vec<String>, NvrtcError> {
    // The fixed part is shared with build.rs (`flags`), which compiles `aot/*.cu` with it.
    let mut opts = flags::fixed_options(&target.arch(), minimal());
    if !target.nvrtc_cache {
        opts.push("--no-cache".to_string());
    }
    let dirs = include_dirs();
    if source.contains("#include") && !dirs.iter().any(|d| d.join("cuda_fp16.h").is_file()) {
        let searched: Vec<String> = include_candidates().iter().map(|d| d.display().to_string()).collect();
        return Err(NvrtcError::Unavailable(format!(
            "cuda_fp16.h not found (searched {}); set SINTER_CUDA_INCLUDE to the CUDA include folder, install \
             the CUDA toolkit, or `pip install nvidia-cuda-runtime==13.0.* nvidia-cuda-crt==13.0.*`",
            searched.join(", ")
        )));
    }
    opts.extend(flags::include_options(&dirs));
    Ok(opts)
}

/// The include folders NVRTC gets, existing ones only, each once, in this order: every entry of
/// `SINTER_CUDA_INCLUDE` (colon-separated); `include/` beside the loaded libnvrtc's folder
/// (the headers of the same toolkit or wheel set); `$CUDA_HOME/include`, `$CUDA_PATH/include`,
/// `/usr/local/cuda/include`, `/usr/local/cuda/targets/x86_64-linux/include`; under every
/// Python site-packages folder, `nvidia/cu13/include` (the CUDA 13 wheels `nvidia-cuda-runtime`,
/// `nvidia-cuda-crt`, `nvidia-cuda-nvrtc` all install there) and the CUDA 12 wheels'
/// `nvidia/cuda_runtime/include`, `nvidia/cuda_nvrtc/include`. Each folder's `cccl/`
/// subfolder follows it where present. (The same lists as `build.rs` uses: `probe::dirs`.)
pub fn include_dirs() -> Vec<PathBuf> {
    crate::probe::include_dirs(include_candidates())
}

/// Every folder [`include_dirs`] considers, existing or not, in order.
fn include_candidates() -> Vec<PathBuf> {
    let nvrtc = crate::probe::nvrtc_location().ok();
    crate::probe::include_candidates(nvrtc.as_deref().map(Path::new))
}

/// One NVRTC program, destroyed on drop, with its log.
struct Program {
    handle: sys::nvrtcProgram,
    name: String,
    log: String,
    // The source and name C strings must outlive the program.
    _source: CString,
    _name: CString,
}

impl Program {
    /// Creates and compiles; a failed compile is [`NvrtcError::Compile`] with the log.
    fn compile(name: &str, source: &str, opts: &[String]) -> Result<Program, NvrtcError> {
        crate::probe::nvrtc().map_err(NvrtcError::Unavailable)?;
        let nul =
            |what: &str| NvrtcError::Compile { name: name.into(), log: format!("the {what} contains a NUL byte") };
        let c_source = CString::new(source).map_err(|_| nul("source"))?;
        let c_name = CString::new(format!("{name}.cu")).map_err(|_| nul("program name"))?;
        let handle = rtc::create_program(&c_source, Some(&c_name))
            .map_err(|e| NvrtcError::Compile { name: name.into(), log: format!("nvrtcCreateProgram failed: {e:?}") })?;
        let mut prog = Program { handle, name: name.into(), log: String::new(), _source: c_source, _name: c_name };
        // SAFETY: `handle` is live; the options have no NUL bytes (built by `options`).
        let compiled = unsafe { rtc::compile_program(prog.handle, opts) };
        // SAFETY: as above; the log exists after a compile attempt, successful or not.
        prog.log = unsafe { rtc::get_program_log(prog.handle) }.map(|l| c_chars_to_string(&l)).unwrap_or_default();
        match compiled {
            Ok(()) => Ok(prog),
            Err(e) => Err(NvrtcError::Compile {
                name: name.into(),
                log: format!("{e:?} with options {}\n{}", opts.join(" "), prog.log.trim_end()),
            }),
        }
    }

    fn cubin(&self) -> Result<Vec<u8>, NvrtcError> {
        let mut size = 0usize;
        // SAFETY: `handle` is a live, compiled program; `size` is a live local.
        unsafe { sys::nvrtcGetCUBINSize(self.handle, &mut size) }
            .result()
            .map_err(|e| self.api_error("nvrtcGetCUBINSize", e))?;
        let mut image = vec![0u8; size];
        // SAFETY: `image` has the `size` bytes NVRTC writes.
        unsafe { sys::nvrtcGetCUBIN(self.handle, image.as_mut_ptr().cast::<c_char>()) }
            .result()
            .map_err(|e| self.api_error("nvrtcGetCUBIN", e))?;
        if image.is_empty() {
            return Err(self.api_error_msg("nvrtcGetCUBIN returned no image (was a virtual architecture given?)"));
        }
        Ok(image)
    }

    fn api_error(&self, call: &str, e: rtc::NvrtcError) -> NvrtcError {
        self.api_error_msg(&format!("{call} failed: {e:?}"))
    }

    fn api_error_msg(&self, msg: &str) -> NvrtcError {
        NvrtcError::Compile { name: self.name.clone(), log: format!("{msg}\n{}", self.log.trim_end()) }
    }
}

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: `handle` came from nvrtcCreateProgram and is destroyed once, here.
        let _ = unsafe { rtc::destroy_program(self.handle) };
    }
}

/// NVRTC's NUL-terminated char buffers as a `String` (lossy, up to the first NUL).
fn c_chars_to_string(chars: &[c_char]) -> String {
    let bytes: Vec<u8> = chars.iter().map(|&c| c as u8).take_while(|&b| b != 0).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arch_is_arch_specific_on_hopper_only() {
        assert_eq!(Target::hopper().arch(), "sm_90a");
        assert_eq!(Target::sm((8, 0)).arch(), "sm_80");
        assert_eq!(Target::sm((12, 0)).arch(), "sm_120");
    }

    #[test]
    fn options_are_fixed_and_have_no_fast_math() {
        let opts = options(&Target::hopper(), "extern \"C\" __global__ void k() {}").unwrap();
        assert_eq!(&opts[..4], ["--gpu-architecture=sm_90a", "-std=c++17", "--ptxas-options=-v", "-default-device"]);
        let rest = if opts.get(4).is_some_and(|o| o == "-minimal") { &opts[5..] } else { &opts[4..] };
        assert!(rest.iter().all(|o| o.starts_with("--include-path=")), "{opts:?}");
        assert!(!opts.iter().any(|o| o.contains("fast-math") || o.contains("ftz")), "{opts:?}");
    }

    #[test]
    fn combine_hoists_includes_once_and_wraps_each_source() {
        let a = "#include <cuda_fp16.h>\nstatic __device__ float h(float x) { return x; }\nextern \"C\" __global__ void ka() {}\n";
        let b = "#include <cuda_fp16.h>\n#include <cuda_bf16.h>\nstatic __device__ float h(float x) { return x; }\n";
        let c = combine_sources(&[a, b]);
        assert_eq!(c.matches("#include <cuda_fp16.h>").count(), 1, "{c}");
        assert!(c.starts_with("#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n\nnamespace sinter_src0 {\n"), "{c}");
        assert!(c.contains("} // namespace sinter_src0\n\nnamespace sinter_src1 {\nstatic __device__"), "{c}");
        assert_eq!(combine_sources(&["x\n"]), "namespace sinter_src0 {\nx\n} // namespace sinter_src0\n\n");
    }

    #[test]
    fn c_chars_stop_at_nul() {
        let chars: Vec<c_char> = b"ab\0cd".iter().map(|&b| b as c_char).collect();
        assert_eq!(c_chars_to_string(&chars), "ab");
    }
}
