//! sinter: a deep-learning compiler. This crate re-exports the workspace crates and holds the CLI.
//!
//! ```
//! use sinter::prelude::*;
//! let g = Graph::new();
//! let x = g.input("x", DType::F32, [2, 3]);
//! g.output(&x.softmax(-1));
//! let out = sinter::cpu::run(&g, &[HostTensor::random(DType::F32, vec![2, 3], 0, -1.0, 1.0)]).unwrap();
//! assert_eq!(out[0].shape, [2, 3]);
//! ```
pub use sinter_core as core;
pub use sinter_core::{
    AsGraph, DType, Dim, Error, Graph, HostTensor, IrGraph, NodeId, Op, Shape, Tensor, TensorType, cpu, ir, passes,
    prelude, text, trace, verify, workloads,
};

/// The CUDA backend crate (NVRTC + cudarc). A program that compiles many models can have the
/// backend's parallel NVRTC compiles run in worker processes, as the CLI does: register a command
/// that runs [`cuda::nvrtc::worker_main`] with [`cuda::nvrtc::set_worker_command`].
pub use sinter_cuda as cuda;
/// The ONNX front end: `sinter::onnx::load("model.onnx")?` gives a model whose graph compiles like
/// any traced one.
pub use sinter_onnx as onnx;
/// The WGSL backend crate (wgpu).
pub use sinter_wgsl as wgsl;

pub mod runtime;
pub use runtime::{Backend, Options, backend, compile};
pub use sinter_core::backend::Mode;
pub use sinter_core::compile::{CompileError, CompiledGraph};

#[doc(hidden)]
pub mod fuzz;
