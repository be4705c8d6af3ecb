//! Warm-up: the process's first NVRTC compile and its cuBLASLt load, started on a thread of their
//! own when the first [`crate::CudaBackend`] opens, so they overlap the compile's front end
//! (import, passes, scheduling) instead of waiting at the start of the CUDA load.
//!
//! Why: a process's first NVRTC compile runs NVRTC's front end, NVVM and ptxas for the first time
//! and reads the CUDA headers; on a machine's first process those pages come from disk. Measured
//! on an H200 host (BENCHMARKS, sessions 13, 20 and 25): the zoo's first runs compiled GPT-2 in
//! 1.18 s and ViT-B/16 in 1.50 s against 0.68 and 0.91 s in later processes, the difference in
//! NVRTC (one unit 0.78 s against 0.16 s) and the library's first load.
//!
//! Contract:
//! * At most one warm-up per process ([`start`] is idempotent); it changes no result: the
//!   compiled program is thrown away, and the libraries it loads are the ones [`crate::probe`]
//!   loads anyway (behind the same `OnceLock`s, so a load that wants them meanwhile waits for
//!   this thread instead of loading again).
//! * [`wait`] joins it, so no NVRTC call is in flight while the process exits (its library's
//!   destructors would run under it); [`crate::CudaBackend`]'s `Drop` calls it.
//! * `SINTER_CUDA_WARMUP=0` turns it off. Errors are ignored here: the real compile reports them.

use std::sync::Mutex;
use std::thread::JoinHandle;

/// The environment variable that turns the warm-up off (`0`).
pub const ENV_WARMUP: &str = "SINTER_CUDA_WARMUP";

/// What the warm-up compiles: the headers every 16-bit kernel includes, and one kernel using
/// their conversions, so NVRTC's front end, NVVM and ptxas all run once.
pub const SOURCE: &str = "#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n\
extern \"C\" __global__ void sinter_warmup(const __nv_bfloat16* x, __half* y, unsigned n) {\n\
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n\
  if (i < n) y[i] = __float2half(tanhf(__bfloat162float(x[i])));\n\
}\n";

static WARMUP: Mutex<Option<Started>> = Mutex::new(None);

/// The warm-up's state in this process.
enum Started {
    /// Running (or finished and not joined yet).
    Running(JoinHandle<()>),
    /// Joined, turned off or never startable: [`start`] does nothing more.
    Done,
}

/// Starts the warm-up for `target` on its own thread, once per process (see the module doc).
pub fn start(target: crate::nvrtc::Target) {
    if std::env::var(ENV_WARMUP).is_ok_and(|v| v.trim() == "0") {
        return;
    }
    let mut state = WARMUP.lock().unwrap_or_else(|e| e.into_inner());
    if state.is_some() {
        return;
    }
    let spawned = std::thread::Builder::new().name("sinter-cuda-warmup".into()).spawn(move || {
        let t = std::time::Instant::now();
        let compiled = crate::nvrtc::compile("sinter_warmup", SOURCE, &target);
        let nvrtc_s = t.elapsed().as_secs_f64();
        let blas = crate::probe::cublaslt();
        tracing::debug!(
            target: "sinter::cuda",
            "warm-up: NVRTC {nvrtc_s:.3} s ({}), cuBLASLt {:.3} s ({})",
            if compiled.is_ok() { "ok" } else { "failed" },
            t.elapsed().as_secs_f64() - nvrtc_s,
            if blas.is_ok() { "loaded" } else { "absent" },
        );
    });
    *state = Some(match spawned {
        Ok(h) => Started::Running(h),
        Err(_) => Started::Done,
    });
}

/// Waits for the warm-up to finish, if one runs (see the module doc).
pub fn wait() {
    let handle = {
        let mut state = WARMUP.lock().unwrap_or_else(|e| e.into_inner());
        match state.take() {
            Some(Started::Running(h)) => {
                *state = Some(Started::Done);
                Some(h)
            }
            other => {
                *state = other;
                None
            }
        }
    };
    if let Some(h) = handle {
        // A panic in the warm-up (none is expected) is not the caller's concern.
        let _ = h.join();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wait_without_a_warm_up_returns() {
        wait();
        wait();
    }

    #[test]
    fn the_warm_up_source_has_one_entry_and_the_16_bit_headers() {
        assert!(SOURCE.contains("#include <cuda_bf16.h>") && SOURCE.contains("#include <cuda_fp16.h>"));
        assert_eq!(SOURCE.matches("__global__").count(), 1);
    }
}
