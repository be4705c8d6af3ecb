//! The kernel-IR verifier fuzzer: valid programs, mutated ([`super::mutate`]), must be rejected
//! by [`interp::validate`] or run by the interpreter without a panic; the CUDA and WGSL renderers
//! must return, never panic, on every mutated kernel.
//!
//! Base programs come from random graphs ([`super::graphs`]) and from the backend suite's cases
//! (instances whose buffers are small), scheduled with fusion on or off for
//! [`Capabilities::host`]. A base program must itself validate and run (else that is reported:
//! the scheduler produced an invalid program). A crash is minimized by dropping mutations while
//! it persists.

use super::mutate::{self, Kind, Mutation};
use super::{FindingKind, RngExt, SplitMix64, Summary, catch, graphs};
use sinter_core::HostTensor;
use sinter_core::kernel::{Capabilities, KernelBody, Program, interp};
use sinter_core::schedule::{ScheduleOptions, schedule};
use sinter_cuda::render::{CudaCaps, Tuning};
use sinter_wgsl::render::WgslCaps;
use std::collections::HashMap;

/// Mutation classes whose crashes are known bugs not fixed yet: `(kind, issue)`. A crash whose
/// minimized mutations are all of these kinds counts as skipped, not as a crash. Empty: every
/// crash the fuzzer found so far is fixed.
pub const KNOWN: &[(Kind, &str)] = &[];

/// Largest element count of a base program's buffers (the interpreter is slow in debug builds).
const MAX_BASE_NUMEL: usize = 1 << 14;
/// Mutants whose buffers or loops exceed these are checked but not run.
const MAX_RUN_BYTES: usize = 64 << 20;
const MAX_RUN_WORK: u128 = 1 << 22;

/// The fuzzer's state: the suite's cases and the programs scheduled from them so far.
pub struct VerifierFuzz {
    cases: Vec<sinter_core::testsuite::Case>,
    scheduled: HashMap<usize, Vec<Program>>,
    cuda: CudaCaps,
    wgsl: WgslCaps,
}

impl Default for VerifierFuzz {
    fn default() -> Self {
        Self::new()
    }
}

/// The outcome of checking one mutant.
#[derive(Debug, PartialEq)]
enum Outcome {
    /// Rejected by the verifier, or accepted and run (or too big to run) without a panic.
    Fine { accepted: bool, ran: bool },
    /// Something panicked: where and why.
    Crash(String),
}

impl VerifierFuzz {
    /// A fuzzer over the suite's cases.
    pub fn new() -> VerifierFuzz {
        VerifierFuzz {
            cases: sinter_core::testsuite::cases(),
            scheduled: HashMap::new(),
            cuda: CudaCaps::hopper(),
            wgsl: WgslCaps::baseline(),
        }
    }

    /// A base program for `rng`: a random graph's (2 in 3) or a suite case's. `Err` describes
    /// an invalid base program (a scheduler bug); `Ok(None)` means none at this draw.
    fn base(&mut self, rng: &mut SplitMix64) -> Result<Option<(Program, String)>, String> {
        let opts = if rng.chance(0.3) { ScheduleOptions::eager() } else { ScheduleOptions::default() };
        let caps = Capabilities::host();
        if rng.below(3) < 2 {
            let rg = graphs::random_graph(rng.next_u64());
            let Ok(g) = rg.graph.build() else { return Ok(None) };
            let Ok(g) = sinter_core::passes::optimize(&g) else { return Ok(None) };
            return match catch(|| schedule(&g, &caps, &opts)) {
                Ok(Ok(p)) => Ok(Some((p, format!("random graph {}", rg.desc)))),
                Ok(Err(_)) => Ok(None),
                Err(panic) => Err(format!("scheduling random graph {} panicked: {panic}", rg.desc)),
            };
        }
        let ci = rng.below(self.cases.len());
        if !self.scheduled.contains_key(&ci) {
            let mut progs = Vec::new();
            for inst in self.cases[ci].instances().unwrap_or_default() {
                let small = inst
                    .graph
                    .nodes
                    .iter()
                    .all(|n| n.ty.shape.as_static().is_some_and(|s| s.iter().product::<usize>() <= MAX_BASE_NUMEL));
                if !small {
                    continue;
                }
                let Ok(g) = sinter_core::passes::optimize(&inst.graph) else { continue };
                for o in [ScheduleOptions::default(), ScheduleOptions::eager()] {
                    if let Ok(Ok(p)) = catch(|| schedule(&g, &caps, &o)) {
                        progs.push(p);
                    }
                }
            }
            self.scheduled.insert(ci, progs);
        }
        let progs = &self.scheduled[&ci];
        if progs.is_empty() {
            return Ok(None);
        }
        let p = progs[rng.below(progs.len())].clone();
        Ok(Some((p, format!("suite case {}", self.cases[ci].name))))
    }

    /// Checks one mutant: renderers on every kernel, then the verifier, then (if accepted and
    /// small) the interpreter on random inputs.
    fn check(&self, p: &Program, input_seed: u64) -> Outcome {
        for k in &p.kernels {
            if let Err(e) = catch(|| sinter_cuda::render::render(k, &self.cuda, &Tuning::default())) {
                return Outcome::Crash(format!("CUDA render of {} panicked: {e}", k.name));
            }
            if let Err(e) = catch(|| sinter_wgsl::render::render(k, p, &self.wgsl)) {
                return Outcome::Crash(format!("WGSL render of {} panicked: {e}", k.name));
            }
        }
        let accepted = match catch(|| interp::validate(p)) {
            Ok(r) => r.is_ok(),
            Err(e) => return Outcome::Crash(format!("validate panicked: {e}")),
        };
        if !accepted || !runnable(p) {
            return Outcome::Fine { accepted, ran: false };
        }
        let inputs: Vec<HostTensor> = p
            .inputs
            .iter()
            .enumerate()
            .map(|(i, io)| HostTensor::random(io.dtype, io.shape.clone(), input_seed + i as u64, -3.0, 3.0))
            .collect();
        match catch(|| interp::run_program(p, &inputs)) {
            Ok(_) => Outcome::Fine { accepted, ran: true },
            Err(e) => Outcome::Crash(format!("the interpreter panicked on an accepted program: {e}")),
        }
    }

    /// One iteration: a base program, 1 to 4 random mutations, the checks, and minimization of
    /// any crash.
    pub fn iteration(&mut self, seed: u64, summary: &mut Summary) {
        let mut rng = SplitMix64::new(seed);
        let (base, origin) = match self.base(&mut rng) {
            Ok(Some(b)) => b,
            Ok(None) => {
                summary.skipped += 1;
                return;
            }
            Err(e) => {
                summary.executions += 1;
                summary.findings.push(super::Finding { seed, kind: FindingKind::Crash, what: e });
                return;
            }
        };
        let input_seed = rng.next_u64();
        summary.executions += 1;
        let problem = match self.check(&base, input_seed) {
            Outcome::Fine { accepted: true, .. } => None,
            Outcome::Fine { accepted: false, .. } => {
                Some(format!("{:?}", interp::validate(&base).err().map(|e| e.to_string())))
            }
            Outcome::Crash(e) => Some(e),
        };
        if let Some(e) = problem {
            summary.findings.push(super::Finding {
                seed,
                kind: FindingKind::Crash,
                what: format!("unmutated {origin} fails: {e}"),
            });
            return;
        }
        let n = 1 + rng.below(4);
        let muts: Vec<Mutation> = (0..n).map(|_| Mutation::random(&mut rng)).collect();
        let (mutant, _) = build(&base, &muts);
        match self.check(&mutant, input_seed) {
            Outcome::Fine { accepted, ran } => {
                summary.note("accepted", accepted as u64);
                summary.note("ran", ran as u64);
            }
            Outcome::Crash(_) => {
                let min = self.minimize(&base, muts, input_seed);
                let (mutant, descs) = build(&base, &min);
                let Outcome::Crash(msg) = self.check(&mutant, input_seed) else { unreachable!("minimized") };
                if let Some((_, issue)) = KNOWN.iter().find(|(k, _)| min.iter().all(|m| m.kind == *k)) {
                    summary.note(&format!("known ({issue})"), 1);
                    summary.skipped += 1;
                    return;
                }
                summary.findings.push(super::Finding {
                    seed,
                    kind: FindingKind::Crash,
                    what: format!("{msg}\n    base: {origin}\n    mutations: {}", descs.join("; ")),
                });
            }
        }
    }

    /// Drops mutations one at a time while the mutant still crashes.
    fn minimize(&self, base: &Program, mut muts: Vec<Mutation>, input_seed: u64) -> Vec<Mutation> {
        let mut i = 0;
        while i < muts.len() && muts.len() > 1 {
            let mut fewer = muts.clone();
            fewer.remove(i);
            if matches!(self.check(&build(base, &fewer).0, input_seed), Outcome::Crash(_)) {
                muts = fewer;
            } else {
                i += 1;
            }
        }
        muts
    }
}

/// `base` with `muts` applied, and what each changed.
fn build(base: &Program, muts: &[Mutation]) -> (Program, Vec<String>) {
    let mut p = base.clone();
    let descs =
        muts.iter().map(|&m| mutate::apply(&mut p, m).unwrap_or_else(|| format!("{:?}: no-op", m.kind))).collect();
    (p, descs)
}

/// Whether an accepted program is small enough to run: bounded buffers, inputs and loops.
fn runnable(p: &Program) -> bool {
    let bytes = p.buffers.iter().try_fold(0usize, |acc, b| acc.checked_add(b.numel.checked_mul(b.dtype.size_bytes())?));
    if bytes.is_none_or(|b| b > MAX_RUN_BYTES) {
        return false;
    }
    let io_ok = p
        .inputs
        .iter()
        .chain(&p.outputs)
        .all(|io| io.shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d)).is_some_and(|n| n <= MAX_RUN_BYTES));
    let work: u128 = p
        .kernels
        .iter()
        .map(|k| match &k.body {
            KernelBody::Pointwise { numel, .. } => *numel as u128,
            KernelBody::Reduce(r) => (r.rows as u128) * (r.len as u128 + 1) * (r.reductions.len() as u128 + 1),
            KernelBody::Matmul(m) => (m.batch as u128) * (m.m as u128) * (m.n as u128) * (m.k as u128 + 1),
            KernelBody::Attention(a) => {
                (a.batch as u128 * a.heads as u128) * (a.m as u128) * (a.kv as u128) * (a.d as u128 + a.dv as u128 + 1)
            }
        })
        .fold(0u128, |a, w| a.saturating_add(w));
    io_ok && work <= MAX_RUN_WORK
}
