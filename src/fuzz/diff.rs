//! The differential fuzzer: random graphs ([`super::graphs`]) on the CPU reference
//! ([`sinter_core::cpu::run`]) against every available backend, compiled through
//! [`sinter_core::compile::compile`] (no disk cache, no artifacts; fusion on 3 times in 4).
//!
//! A backend's output must match the reference within the graph's per-output bounds
//! ([`sinter_core::compare::compare_tensor`]; integers exactly); an error other than an
//! unsupported dtype or op is a mismatch; a panic is a crash.

use super::{Finding, FindingKind, RngExt, SplitMix64, Summary, catch, graphs};
use crate::runtime::{self, Backend};
use sinter_core::backend::Backend as BackendTrait;
use sinter_core::compare::compare_tensor;
use sinter_core::compile::{CompileOptions, compile};
use std::sync::Arc;

/// The backends a differential run compares, opened once.
pub struct Backends {
    /// `(name, backend)`: the interpreter, then WGSL and CUDA where present.
    pub list: Vec<(String, Arc<dyn BackendTrait>)>,
    /// Why a backend is missing.
    pub missing: Vec<String>,
}

impl Backends {
    /// Opens the interpreter and whichever of WGSL and CUDA the registry can open.
    pub fn open() -> Backends {
        let mut list = Vec::new();
        let mut missing = Vec::new();
        for kind in [Backend::Interp, Backend::Wgsl, Backend::Cuda] {
            match catch(|| runtime::backend(kind)) {
                Ok(Ok(b)) => list.push((format!("{}({})", kind.name(), b.device_name()), b)),
                Ok(Err(e)) => missing.push(format!("{}: {e}", kind.name())),
                Err(p) => missing.push(format!("{}: opening panicked: {p}", kind.name())),
            }
        }
        Backends { list, missing }
    }
}

/// One differential iteration of seed `seed` over `backends`.
pub fn iteration(backends: &Backends, seed: u64, summary: &mut Summary) {
    let mut rng = SplitMix64::new(seed);
    let rg = graphs::random_graph(rng.next_u64());
    let fusion = !rng.chance(0.25);
    let g = match rg.graph.build() {
        Ok(g) => g,
        Err(e) => {
            summary.skipped += 1;
            summary.note("generator errors", 1);
            if std::env::var_os("SINTER_FUZZ_DEBUG").is_some() {
                eprintln!("seed {seed:#x}: generator error {e}: {}", rg.desc);
            }
            return;
        }
    };
    let want = match catch(|| sinter_core::cpu::run(&g, &rg.inputs)) {
        Ok(Ok(w)) => w,
        Ok(Err(e)) => {
            summary.skipped += 1;
            summary.note("reference errors", 1);
            if std::env::var_os("SINTER_FUZZ_DEBUG").is_some() {
                eprintln!("seed {seed:#x}: reference error {e}: {}", rg.desc);
            }
            return;
        }
        Err(p) => {
            summary.executions += 1;
            summary.findings.push(Finding {
                seed,
                kind: FindingKind::Crash,
                what: format!("the CPU reference panicked: {p}\n    graph: {}", rg.desc),
            });
            return;
        }
    };
    summary.executions += 1;
    for (name, b) in &backends.list {
        let opts = CompileOptions { fusion, cache_dir: None, debug_dir: None, ..CompileOptions::default() };
        let got = catch(|| compile(&g, b.clone(), opts).and_then(|c| c.run(&rg.inputs)));
        let problem = match got {
            Err(p) => Some((FindingKind::Crash, format!("panicked: {p}"))),
            Ok(Err(e)) => {
                let msg = e.to_string();
                if msg.to_lowercase().contains("unsupported") {
                    summary.note(&format!("{name} unsupported"), 1);
                    None
                } else {
                    Some((FindingKind::Mismatch, format!("failed: {msg}")))
                }
            }
            Ok(Ok(got)) => {
                summary.note(&format!("{name} runs"), 1);
                if got.len() != want.len() {
                    Some((FindingKind::Mismatch, format!("{} outputs, the reference has {}", got.len(), want.len())))
                } else {
                    got.iter()
                        .zip(&want)
                        .zip(&rg.bounds)
                        .enumerate()
                        .find_map(|(i, ((g, w), &b))| {
                            compare_tensor(g, w, b).problem.map(|p| format!("output {i}: {p}"))
                        })
                        .map(|p| (FindingKind::Mismatch, p))
                }
            }
        };
        if let Some((kind, what)) = problem {
            summary.findings.push(Finding {
                seed,
                kind,
                what: format!("{name} (fusion {fusion}) {what}\n    graph: {}", rg.desc),
            });
        }
    }
}
