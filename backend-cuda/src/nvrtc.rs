//! NVRTC: CUDA C++ source to a cubin for one architecture, with the compile log in the error and
//! an on-disk cubin cache keyed by source hash, architecture and NVRTC version.

/// Errors of NVRTC compilation.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum NvrtcError {
    /// libnvrtc could not be found or loaded.
    #[error("NVRTC is not available: {0}")]
    Unavailable(String),
    /// The source did not compile.
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
}

/// A compiled cubin and what ptxas reported.
#[derive(Clone, Debug, PartialEq)]
pub struct Cubin {
    /// The cubin image.
    pub image: Vec<u8>,
    /// The compile log (ptxas `-v` output: registers, spills, shared memory).
    pub log: String,
}

/// Compiles `source` (program name `name`) to a cubin for `target`.
pub fn compile(name: &str, source: &str, target: &Target) -> Result<Cubin, NvrtcError> {
    let _ = (source, target);
    Err(NvrtcError::Unavailable(format!("{name}: NVRTC support not written yet")))
}
