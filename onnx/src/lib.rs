//! ONNX front end for sinter: an importer from ONNX protobuf models to sinter IR, and a runner
//! for the ONNX backend conformance suite.
//!
//! ```no_run
//! let model = sinter_onnx::load("model.onnx")?;
//! let graph = model.graph_for(&[vec![1, 3, 224, 224]])?;
//! # Ok::<(), sinter_onnx::OnnxError>(())
//! ```
//!
//! How it works:
//! - [`load`] decodes the protobuf (prost code generated at build time from `proto/onnx.proto`
//!   by protox + prost-build) and every initializer (raw data, typed fields, external files).
//! - [`Model::graph`], [`Model::graph_for`] and [`Model::graph_for_inputs`] walk the nodes in
//!   topological order and lower each to sinter IR ops (the `ops` modules); every IR node's
//!   origin is the ONNX node (its index and lowercase op type). Ops the IR lacks are composed
//!   from primitives (ConvTranspose, 1-D/3-D conv and pooling, scatters, TopK, CumSum, Resize,
//!   GridSample, RNN/GRU/LSTM and Scan/Loop/If unrolled...).
//! - Values known at import time (initializers, `Constant`, shapes, and whatever is computed from
//!   them alone) are folded by running the new nodes on the CPU reference, so shape arithmetic
//!   (Shape/Gather/Concat/Unsqueeze/Reshape chains) comes out static. With
//!   [`Model::graph_for_inputs`], run-time inputs whose *values* fix a shape (a Reshape target,
//!   Range bounds, Slice/Pad amounts...) are read too; the graph is then specialized to them.
//! - [`conformance`] runs the ONNX backend test suite on any backend.
//!
//! Models are untrusted input: malformed protobuf, missing values, unknown ops, bad attributes
//! and wrong input types are errors naming the node, never panics; external-data paths may not
//! leave the model's folder; declared sizes are checked against the data before allocation, and
//! shapes, paddings and import-time constants are bounded ([`import::MAX_ELEMS`],
//! [`import::MAX_CONST_ELEMS`]).
#![warn(missing_docs)]

pub mod conformance;
pub mod error;
pub mod import;
pub mod model;
pub mod npy;
mod ops;
pub mod proto;
pub mod tensor;

pub use error::OnnxError;
pub use import::FOLD_LIMIT;
pub use model::{IoInfo, MAX_IR_VERSION, MAX_OPSET, Model, load, load_bytes};
pub use tensor::{decode_tensor, read_tensor_pb, tensor_from_pb, tensor_to_proto};
