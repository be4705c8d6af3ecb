//! Core error type.

use crate::ir::TensorType;

/// Errors from building, verifying, transforming or evaluating graphs.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    /// An op was given operands it cannot take (shape mismatch, bad axis, dtype clash).
    #[error("{op}({operands}): {msg}")]
    Build {
        /// The op's name.
        op: String,
        /// The operand types, printed.
        operands: String,
        /// What is wrong.
        msg: String,
    },
    /// The verifier found problems; every one is listed.
    #[error("graph failed verification with {} problem(s):\n{}", .0.len(), .0.iter().map(|e| format!("  {e}")).collect::<Vec<_>>().join("\n"))]
    Verify(Vec<String>),
    /// A host tensor is malformed.
    #[error("tensor: {0}")]
    Tensor(String),
    /// Run-time inputs do not match the graph (count, dtype, shape, missing).
    #[error("input: {0}")]
    Input(String),
    /// Something the graph asks for is not supported here (names the op or feature).
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// An allocation would exceed the host-memory budget ([`crate::budget`]); checked before
    /// allocating, so an absurd size is this error rather than an abort.
    #[error(
        "{what} needs {bytes} bytes, more than the host memory limit of {limit} bytes (set SINTER_HOST_MEMORY_LIMIT to change it)"
    )]
    Memory {
        /// The allocation: the node (or buffer) and its shape.
        what: String,
        /// Bytes it needs (saturated at `u64::MAX`).
        bytes: u64,
        /// The limit in force.
        limit: u64,
    },
    /// Evaluation failed (e.g. an index out of range in a gather).
    #[error("evaluation of {node}: {msg}")]
    Eval {
        /// The node, printed.
        node: String,
        /// What went wrong.
        msg: String,
    },
}

impl Error {
    /// A build error naming the op and its operand types.
    pub fn build(op: &str, operands: &[&TensorType], msg: impl Into<String>) -> Error {
        Error::Build {
            op: op.to_string(),
            operands: operands.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(", "),
            msg: msg.into(),
        }
    }
}
