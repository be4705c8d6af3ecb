//! The NVRTC options that do not depend on the machine, and the architecture names: one list for
//! the run-time compiles ([`super::options`]) and for `build.rs`, which compiles `aot/*.cu` ahead
//! of time with the same options (`crate::aot`). Dependency-free (std only): `build.rs` includes
//! this file with `#[path]`.

/// The NVRTC version from which `-minimal` is taken: NVRTC then leaves out of its built-in header
/// what no sinter source uses (textures and surfaces, the device runtime's `cuda*` functions,
/// launches from device code, the runtime's types). Measured on the CI-class machine (NVRTC 13.0,
/// session 31, `nvrtc_one`): a trivial kernel 25-30 -> 20-23 ms, a reduced-size softmax 52-56 ->
/// 48-50, the 64-op chain 127-150 -> 121-126; on the H200 hosts the gain was within the 20-40%
/// spread between identical fresh processes. `SINTER_NVRTC_MINIMAL=0` leaves it out (A/B runs).
pub const MINIMAL_SINCE: (i32, i32) = (12, 4);

/// The environment variable that, at `0`, leaves `-minimal` out ([`MINIMAL_SINCE`]).
pub const MINIMAL_ENV: &str = "SINTER_NVRTC_MINIMAL";

/// The options after `--gpu-architecture=`, in order, on every compile.
pub const FIXED: [&str; 3] = ["-std=c++17", "--ptxas-options=-v", "-default-device"];

/// The option that trims NVRTC's built-in header ([`MINIMAL_SINCE`]).
pub const MINIMAL: &str = "-minimal";

/// The `--gpu-architecture` value for compute capability `sm`: `sm_90a` for sm 9.0 (the
/// arch-specific features wgmma and setmaxnreg need), else `sm_XY`.
pub fn arch_name(sm: (u32, u32)) -> String {
    let (major, minor) = sm;
    if sm == (9, 0) { format!("sm_{major}{minor}a") } else { format!("sm_{major}{minor}") }
}

/// Whether the options take [`MINIMAL`]: NVRTC `version` at least [`MINIMAL_SINCE`] and
/// [`MINIMAL_ENV`] (its value `env`) not `0`.
pub fn takes_minimal(version: (i32, i32), env: Option<&str>) -> bool {
    env != Some("0") && version >= MINIMAL_SINCE
}

/// `--gpu-architecture=<arch>`, then [`FIXED`], then [`MINIMAL`] where `minimal`.
pub fn fixed_options(arch: &str, minimal: bool) -> Vec<String> {
    let mut opts = vec![format!("--gpu-architecture={arch}")];
    opts.extend(FIXED.iter().map(|o| o.to_string()));
    if minimal {
        opts.push(MINIMAL.to_string());
    }
    opts
}

/// One `--include-path=` option per folder of `dirs` (folders whose path is not UTF-8 or holds a
/// NUL byte are left out: options become C strings).
pub fn include_options(dirs: &[std::path::PathBuf]) -> Vec<String> {
    dirs.iter()
        .filter_map(|d| d.to_str())
        .filter(|d| !d.contains('\0'))
        .map(|d| format!("--include-path={d}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minimal_needs_the_version_and_not_the_switch_off() {
        assert!(takes_minimal((13, 0), None));
        assert!(takes_minimal((12, 4), Some("1")));
        assert!(!takes_minimal((12, 3), None));
        assert!(!takes_minimal((13, 0), Some("0")));
    }

    #[test]
    fn fixed_options_in_order() {
        assert_eq!(
            fixed_options("sm_90a", true),
            ["--gpu-architecture=sm_90a", "-std=c++17", "--ptxas-options=-v", "-default-device", "-minimal"]
        );
        assert_eq!(fixed_options("sm_80", false).len(), 4);
        assert_eq!((arch_name((9, 0)), arch_name((10, 0))), ("sm_90a".to_string(), "sm_100".to_string()));
        let dirs = [std::path::PathBuf::from("/a b"), std::path::PathBuf::from("/c\0d")];
        assert_eq!(include_options(&dirs), ["--include-path=/a b"]);
    }
}
