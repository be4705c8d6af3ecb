//! Probing for the CUDA driver and NVRTC before cudarc is touched (cudarc panics when a library
//! is absent).

/// Checks that libcuda can be loaded; the error names what is missing.
pub fn driver() -> Result<(), String> {
    Err("libcuda probe not written yet".into())
}
