//! The CUDA backend of sinter: kernel IR rendered to CUDA C++ ([`render`], pure text, snapshot
//! tested), compiled by NVRTC to a cubin for the device's own architecture ([`nvrtc`], cached on
//! disk), and run through cudarc ([`device`], [`backend`]).
//!
//! cudarc is built with dynamic loading: the binary starts on machines without libcuda or
//! libnvrtc, and [`probe`] checks for them before cudarc is touched (cudarc panics when a library
//! is absent), so a missing driver is an error naming the library, never a panic.
//!
//! Kernels whose source is fixed ahead of time (`backend-cuda/aot/*.cu`) are compiled at build
//! time and embedded ([`aot`]): those need no NVRTC at run time.
#![warn(missing_docs)]

pub mod aot;
pub mod backend;
pub mod cost;
pub mod device;
pub mod nvrtc;
pub mod probe;
pub mod render;
pub mod tma;

pub use backend::{CudaBackend, CudaExecutable};
pub use device::{CudaBuffer, CudaCalibration, Device, DeviceInfo};
