//! Per-kernel resources from the ptxas `-v` lines of an NVRTC log (the options of
//! [`super::options`] ask for them). For each entry function ptxas writes:
//!
//! ```text
//! ptxas info    : Compiling entry function 'k1_sum' for 'sm_90a'
//! ptxas info    : Function properties for k1_sum
//! ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
//! ptxas info    : Used 13 registers, used 1 barriers, 1024 bytes smem
//! ```
//!
//! Lines of other functions (other entries, non-inlined device functions) are ignored.

use sinter_core::backend::KernelResources;

/// The registers, spill stores and static shared memory ptxas reported for `kernel` (its
/// `extern "C"` name) in `log`; `None` when the log has no `Used N registers` line for it. The
/// shared bytes are the static `__shared__` arrays only: a launch adds its dynamic shared memory.
pub fn resources(log: &str, kernel: &str) -> Option<KernelResources> {
    let mut in_entry = false;
    let mut in_props = false;
    let mut registers = None;
    let mut spill_bytes = 0;
    let mut shared_bytes = 0;
    for line in log.lines() {
        if let Some(rest) = after(line, "Compiling entry function '") {
            in_entry = rest.split('\'').next() == Some(kernel);
            in_props = false;
            continue;
        }
        if let Some(rest) = after(line, "Function properties for ") {
            in_props = rest.trim() == kernel;
            continue;
        }
        if in_props && line.contains("spill stores") {
            spill_bytes = count_before(line, "bytes spill stores").unwrap_or(0);
        }
        if in_entry && line.contains("Used ") && line.contains(" registers") {
            registers = after(line, "Used ").and_then(|r| r.split_whitespace().next()?.parse().ok());
            shared_bytes = count_before(line, "bytes smem").unwrap_or(0);
        }
    }
    Some(KernelResources { registers: registers?, spill_bytes, shared_bytes })
}

/// The text after the first `pat` in `line`.
fn after<'a>(line: &'a str, pat: &str) -> Option<&'a str> {
    line.find(pat).map(|i| &line[i + pat.len()..])
}

/// The number just before `unit` in `line` (`"..., 1024 bytes smem"` → 1024).
fn count_before(line: &str, unit: &str) -> Option<u32> {
    let head = &line[..line.find(unit)?];
    head.split(|c: char| c.is_whitespace() || c == ',' || c == '.').rfind(|t| !t.is_empty())?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A log captured from NVRTC 13.0 (`--gpu-architecture=sm_90a --ptxas-options=-v`) on three
    /// kernels — one calling a `__noinline__` device function, one with a 1 KiB `__shared__` array,
    /// one spilling — verbatim.
    const LOG: &str = "\
ptxas info    : 24 bytes gmem
ptxas info    : Compiling entry function 'k2_spill' for 'sm_90a'
ptxas info    : Function properties for k2_spill
ptxas         .     5168 bytes stack frame, 5168 bytes spill stores, 16504 bytes spill loads
ptxas info    : Used 32 registers, used 0 barriers, 5168 bytes cumulative stack size
ptxas info    : Compile time = 1204.170 ms
ptxas info    : Compiling entry function 'k1_sum' for 'sm_90a'
ptxas info    : Function properties for k1_sum
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 13 registers, used 1 barriers, 1024 bytes smem
ptxas info    : Compile time = 5.098 ms
ptxas info    : Compiling entry function 'k0_add' for 'sm_90a'
ptxas info    : Function properties for k0_add
ptxas         .     32 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 18 registers, used 0 barriers, 32 bytes cumulative stack size
ptxas info    : Compile time = 6.877 ms
ptxas info    : Function properties for _Z6helperf
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
";

    #[test]
    fn parses_each_kernel_of_a_real_log() {
        assert_eq!(
            resources(LOG, "k2_spill"),
            Some(KernelResources { registers: 32, spill_bytes: 5168, shared_bytes: 0 })
        );
        assert_eq!(
            resources(LOG, "k1_sum"),
            Some(KernelResources { registers: 13, spill_bytes: 0, shared_bytes: 1024 })
        );
        assert_eq!(resources(LOG, "k0_add"), Some(KernelResources { registers: 18, spill_bytes: 0, shared_bytes: 0 }));
    }

    #[test]
    fn unknown_kernels_and_prefixes_are_not_matched() {
        assert_eq!(resources(LOG, "k1"), None);
        assert_eq!(resources(LOG, "_Z6helperf"), None);
        assert_eq!(resources("", "k0_add"), None);
        assert_eq!(resources("nvrtc: error: something", "k0_add"), None);
    }

    #[test]
    fn older_ptxas_lines_with_cmem_parse() {
        let log = "ptxas info    : Compiling entry function 'k' for 'sm_80'\n\
                   ptxas info    : Function properties for k\n\
                   \x20   8 bytes stack frame, 12 bytes spill stores, 12 bytes spill loads\n\
                   ptxas info    : Used 40 registers, 2048 bytes smem, 360 bytes cmem[0]\n";
        assert_eq!(resources(log, "k"), Some(KernelResources { registers: 40, spill_bytes: 12, shared_bytes: 2048 }));
    }
}
