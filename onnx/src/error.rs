//! The importer's error type. Every error about a node names it (its name, or its first output
//! when it has none, and its op type).

use std::path::PathBuf;

/// Errors from loading or importing an ONNX model.
#[derive(Debug, thiserror::Error)]
pub enum OnnxError {
    /// The bytes are not a valid protobuf message of the expected kind (truncated, corrupt).
    #[error("malformed protobuf ({what}): {error}")]
    Decode {
        /// What was being decoded (`model`, `tensor`, a file name).
        what: String,
        /// The decoder's error (in the message, not a `source()`: reporters print it once).
        error: prost::DecodeError,
    },
    /// A file could not be read.
    #[error("cannot read {}: {error}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error (in the message, not a `source()`: reporters print it once).
        error: std::io::Error,
    },
    /// The model is structurally invalid (missing graph, bad dims, sizes that do not match the
    /// data, duplicate names...). `context` says where.
    #[error("malformed model: {context}: {msg}")]
    Malformed {
        /// Where the problem is (a tensor, an input, a node).
        context: String,
        /// What is wrong.
        msg: String,
    },
    /// An external-data path would leave the model's folder (absolute, `..`, or a symlink out).
    #[error("tensor {tensor:?}: external data location {location:?} refused: {reason}")]
    UnsafePath {
        /// The tensor naming the file.
        tensor: String,
        /// The location as written in the model.
        location: String,
        /// Why it was refused.
        reason: String,
    },
    /// A declared size would need an absurd allocation.
    #[error("{what}: {bytes} bytes is more than the limit of {limit} bytes")]
    TooLarge {
        /// What was being sized.
        what: String,
        /// The size asked for (saturated at `u64::MAX`).
        bytes: u64,
        /// The limit.
        limit: u64,
    },
    /// The model's IR version or `ai.onnx` opset is outside what this importer knows
    /// ([`crate::MAX_IR_VERSION`], [`crate::MAX_OPSET`]); newer versions may change what ops mean.
    #[error("the model's {what} is {version}; this importer supports versions up to {max}")]
    Version {
        /// `IR version` or `ai.onnx opset`.
        what: String,
        /// The version the model declares.
        version: i64,
        /// The newest version supported.
        max: i64,
    },
    /// A node, attribute or data type this importer does not support. `op` is the op type (or
    /// the data type, for dtype problems outside a node).
    #[error("unsupported: {node} ({op}): {detail}")]
    Unsupported {
        /// The node (`"name"` or `#index "first output"`).
        node: String,
        /// The op type, e.g. `NonMaxSuppression`.
        op: String,
        /// What exactly is unsupported.
        detail: String,
    },
    /// A node is invalid: wrong input count, dtype or shape, a bad attribute.
    #[error("{node} ({op}): {msg}")]
    Node {
        /// The node (`"name"` or `#index "first output"`).
        node: String,
        /// The op type.
        op: String,
        /// What is wrong.
        msg: String,
    },
    /// Bytes (a file, once [`OnnxError::in_file`] names it) that are not what they should be:
    /// empty, another format, no data type.
    #[error("{what}: {msg}")]
    BadData {
        /// The data (`model data`, `tensor data`) or the file.
        what: String,
        /// What is wrong.
        msg: String,
    },
    /// A conformance suite folder holds no case to run (or none matches the filter).
    #[error("{}: {detail}", dir.display())]
    NoCases {
        /// The suite folder.
        dir: PathBuf,
        /// What was looked for.
        detail: String,
    },
    /// The run-time inputs given for specialization do not match the model's inputs.
    #[error("inputs: {0}")]
    Inputs(String),
    /// Building or evaluating the IR failed outside any one node.
    #[error(transparent)]
    Core(#[from] sinter_core::Error),
}

impl OnnxError {
    /// For an [`OnnxError::Unsupported`] error, the op type (or data type) it names.
    pub fn unsupported_op(&self) -> Option<&str> {
        match self {
            OnnxError::Unsupported { op, .. } => Some(op),
            _ => None,
        }
    }

    /// This error with the file it came from in its context (decode and malformed-data errors;
    /// errors that already name a file or a node are returned as they are).
    pub fn in_file(self, path: &std::path::Path) -> OnnxError {
        match self {
            OnnxError::Decode { what, error } => {
                OnnxError::Decode { what: format!("{}: {what}", path.display()), error }
            }
            OnnxError::Malformed { context, msg } => {
                OnnxError::Malformed { context: format!("{}: {context}", path.display()), msg }
            }
            OnnxError::BadData { msg, .. } => OnnxError::BadData { what: path.display().to_string(), msg },
            other => other,
        }
    }

    /// Shorthand for a [`OnnxError::Malformed`] error.
    pub fn malformed(context: impl Into<String>, msg: impl Into<String>) -> OnnxError {
        OnnxError::Malformed { context: context.into(), msg: msg.into() }
    }
}

impl From<OnnxError> for sinter_core::Error {
    fn from(e: OnnxError) -> sinter_core::Error {
        match e {
            OnnxError::Core(c) => c,
            OnnxError::Unsupported { .. } => sinter_core::Error::Unsupported(e.to_string()),
            OnnxError::Inputs(m) => sinter_core::Error::Input(m),
            other => sinter_core::Error::Input(other.to_string()),
        }
    }
}
