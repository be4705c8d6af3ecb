//! WGSL code generation and the wgpu runtime for sinter.
//!
//! * [`render`]: the pure renderer, kernel IR → WGSL text plus launch (snapshot-tested without a GPU).
//! * [`device`]: the wgpu runtime (adapter, buffers, pipelines, batched and timed dispatches).
//! * [`backend`]: [`WgslBackend`], the [`sinter_core::backend::Backend`] tying them together.

pub mod backend;
pub mod cost;
pub mod device;
pub mod render;

pub use backend::{WgslBackend, WgslExecutable};
