//! The subcommands of the `sinter` binary, one module each.

pub mod bench;
pub mod calibrate;
pub mod conformance;
pub mod contractions;
pub mod demo;
pub mod explain;
pub mod model;
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

/// Breaks listed by [`graph_breaks`] before the rest are counted.
pub const MAX_LISTED_BREAKS: usize = 20;

/// The lines `sinter run`, `profile` and `explain` print (to stderr) for a compiled graph's graph
/// breaks: a summary, then each break with its reason (at most [`MAX_LISTED_BREAKS`]); none when
/// the whole graph runs on the backend.
pub fn graph_breaks(c: &sinter::core::compile::CompiledGraph) -> Vec<String> {
    let breaks = c.graph_breaks();
    if breaks.is_empty() {
        return Vec::new();
    }
    let segs = c.segments();
    let fallback = segs.iter().filter(|s| !s.1).count();
    let mut lines = vec![format!(
        "# {} graph break(s) on {}: {} segment(s), {fallback} on the CPU reference ({})",
        breaks.len(),
        c.backend().name(),
        segs.len(),
        segs.iter().map(|s| s.0.as_str()).collect::<Vec<_>>().join(" -> ")
    )];
    lines.extend(breaks.iter().take(MAX_LISTED_BREAKS).map(|b| format!("#   {b}")));
    if breaks.len() > MAX_LISTED_BREAKS {
        lines
            .push(format!("#   ... and {} more (SINTER_LOG=graph_breaks lists all)", breaks.len() - MAX_LISTED_BREAKS));
    }
    lines
}

/// True when the error is a write to a closed pipe.
pub fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| c.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe))
}

/// The on-disk cache flag every compiling command shares.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct CacheArgs {
    /// Neither read nor write the on-disk cache (compiled programs, autotuning winners, pipelines).
    /// Without it the cache is `SINTER_CACHE_DIR`, else the user's cache folder (`~/.cache/sinter`
    /// on Linux); `SINTER_CACHE=0` turns it off too.
    #[arg(long)]
    pub no_cache: bool,
}

impl CacheArgs {
    /// The cache folder to compile with, `None` when off.
    pub fn dir(&self) -> Option<std::path::PathBuf> {
        if self.no_cache { None } else { sinter::core::compile::default_cache_dir() }
    }
}

/// The longest time limit a command accepts, seconds (one day).
pub const MAX_SECONDS: f64 = 86_400.0;

/// A `--NAME SECONDS` argument as a duration: finite, positive and at most [`MAX_SECONDS`]
/// (`inf`, `NaN`, `0` and negative values are errors naming the flag and the value).
pub fn seconds_arg(flag: &str, secs: f64) -> Result<std::time::Duration> {
    if !(secs.is_finite() && secs > 0.0 && secs <= MAX_SECONDS) {
        anyhow::bail!("--{flag} {secs}: expected a number of seconds in (0, {MAX_SECONDS}]");
    }
    Ok(std::time::Duration::from_secs_f64(secs))
}

/// Creates the folder an `--out` flag names; a path that exists but is not a folder is a clear
/// error instead of "File exists (os error 17)".
pub fn out_dir(flag: &str, dir: &std::path::Path) -> Result<()> {
    if dir.exists() && !dir.is_dir() {
        anyhow::bail!("--{flag} {}: exists and is not a folder (name a new or existing folder)", dir.display());
    }
    std::fs::create_dir_all(dir).with_context(|| format!("--{flag}: creating the folder {}", dir.display()))
}

/// True when `p`'s extension is `ext`, in any case (`x.NPZ` is an `.npz`).
pub fn has_extension(p: &std::path::Path, ext: &str) -> bool {
    p.extension().and_then(|e| e.to_str()).is_some_and(|e| e.eq_ignore_ascii_case(ext))
}

/// Prints an error and its causes as `error: a: b: c`, skipping a cause whose text the message
/// already ends with (an error type that writes its source into its own message, as many do).
pub fn report(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if out.is_empty() {
            out = text;
        } else if !out.ends_with(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_must_be_finite_positive_and_bounded() {
        for bad in [f64::INFINITY, 1e30, f64::NAN, 0.0, -1.0, f64::NEG_INFINITY] {
            let e = seconds_arg("timeout", bad).unwrap_err().to_string();
            assert!(e.starts_with("--timeout"), "{e}");
        }
        assert_eq!(seconds_arg("timeout", 2.5).unwrap(), std::time::Duration::from_millis(2500));
    }

    #[test]
    fn io_errors_are_reported_once() {
        let io = std::fs::read("/nonexistent/sinter").unwrap_err();
        let os = io.to_string();
        // The pattern of the issue: a message holding its source, plus the source in the chain.
        #[derive(Debug)]
        struct Holds(std::io::Error);
        impl std::fmt::Display for Holds {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "reading x: {}", self.0)
            }
        }
        impl std::error::Error for Holds {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        let e = anyhow::Error::new(Holds(io)).context("loading");
        let r = report(&e);
        assert_eq!(r.matches(&os).count(), 1, "{r}");
        // The library's own errors no longer expose the text twice.
        let p = sinter::core::profile::Ceilings::load_from(std::path::Path::new("/dev/null/x"), "k");
        if let Err(p) = p {
            let r = report(&anyhow::Error::new(p));
            assert!(r.matches("os error").count() <= 1, "{r}");
        }
    }

    #[test]
    fn out_paths_are_checked() {
        let f = std::env::temp_dir().join(format!("sinter-out-file-{}", std::process::id()));
        std::fs::write(&f, b"x").unwrap();
        let e = out_dir("out", &f).unwrap_err().to_string();
        assert!(e.contains("is not a folder") && !e.contains("os error 17"), "{e}");
        std::fs::remove_file(&f).unwrap();
        assert!(has_extension(std::path::Path::new("x.NPZ"), "npz"));
        assert!(!has_extension(std::path::Path::new("x.npy"), "npz"));
    }
}
