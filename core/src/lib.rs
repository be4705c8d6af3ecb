//! sinter's core: the graph IR, the tracing API, shape inference, the verifier, decompositions and
//! other passes, the CPU reference interpreter, the built-in workloads, the fusion scheduler, the
//! kernel IR and the backend boundary. It knows nothing of wgpu or CUDA.
#![warn(missing_docs)]

pub mod budget;
pub mod cpu;
pub mod digest;
pub mod dtype;
pub mod error;
pub mod fp8;
pub mod infer;
pub mod ir;
pub mod par;
pub mod passes;
pub mod profile;
pub mod scalar;
pub mod shape;
pub mod tensor;
pub mod text;
pub mod trace;
pub mod verify;
pub mod workloads;

pub use dtype::DType;
pub use error::Error;
pub use ir::{Graph as IrGraph, NodeId, Op, TensorType};
pub use shape::{Dim, Shape};
pub use tensor::{HostTensor, TensorData};
pub use trace::{AsGraph, Graph, Tensor};

/// The names most programs need.
pub mod prelude {
    pub use crate::dtype::DType;
    pub use crate::error::Error;
    pub use crate::ir::PadMode;
    pub use crate::shape::{Dim, Shape};
    pub use crate::tensor::HostTensor;
    pub use crate::trace::{Graph, Tensor};
}
pub mod backend;
pub mod compare;
pub mod compile;
pub mod kernel;
pub mod partition;
pub mod schedule;
#[doc(hidden)]
pub mod testsuite;
pub mod tune;
