//! The subcommands of the `sinter` binary, one module each.

pub mod bench;
pub mod calibrate;
pub mod conformance;
pub mod demo;
pub mod explain;
pub mod profile;
pub mod run;
pub mod view;

use anyhow::{Context, Result};
use sinter::workloads::{self, Scale, Workload};

/// The scale argument shared by subcommands that build workloads.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScaleArg {
    /// The benchmark size.
    Full,
    /// A small size with odd extents (tests, CPU runs).
    Reduced,
}

impl From<ScaleArg> for Scale {
    fn from(s: ScaleArg) -> Scale {
        match s {
            ScaleArg::Full => Scale::Full,
            ScaleArg::Reduced => Scale::Reduced,
        }
    }
}

/// The built-in workload with this name, or an error listing the names.
pub fn workload(name: &str) -> Result<Workload> {
    workloads::get(name)
        .with_context(|| format!("no workload named {name:?}; the workloads are: {}", workloads::names().join(", ")))
}

/// True when the error is a write to a closed pipe.
pub fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| c.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe))
}
