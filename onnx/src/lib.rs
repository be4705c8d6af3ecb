//! ONNX front end for sinter: an importer from ONNX protobuf models to sinter IR, and a runner
//! for the ONNX backend conformance suite.
//!
//! ```no_run
//! let model = sinter_onnx::load("model.onnx")?;
//! let graph = model.graph_for(&[vec![1, 3, 224, 224]])?;
//! # Ok::<(), sinter_onnx::OnnxError>(())
//! ```
//!
//! Models are untrusted input: malformed protobuf, missing values, unknown ops, bad attributes
//! and wrong input types are errors naming the node, never panics; external-data paths may not
//! leave the model's folder; declared sizes are checked against the data before allocation.
#![warn(missing_docs)]

pub mod conformance;
pub mod error;
mod import;
pub mod model;
pub mod npy;
mod ops;
pub mod proto;
pub mod tensor;

pub use error::OnnxError;
pub use import::FOLD_LIMIT;
pub use model::{IoInfo, Model, load, load_bytes};
pub use tensor::{decode_tensor, tensor_from_pb, tensor_to_proto};
