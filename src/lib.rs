//! sinter: a deep-learning compiler. This crate re-exports the workspace crates and holds the CLI.
pub use sinter_core as core;
