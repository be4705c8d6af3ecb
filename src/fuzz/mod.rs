//! Stable-Rust fuzzers (no nightly, no cargo-fuzz): the loops behind `examples/fuzz_verifier.rs`,
//! `examples/fuzz_backends.rs` and `tests/fuzz_smoke.rs`.
//!
//! * [`verifier`]: valid kernel-IR programs (random graphs and suite graphs, scheduled for
//!   [`Capabilities::host`](sinter_core::kernel::Capabilities::host)) are mutated structurally
//!   ([`mutate`]); the verifier ([`sinter_core::kernel::interp::validate`]) must reject a mutant
//!   with an error or, when it accepts, the interpreter must run it without panicking; the CUDA and
//!   WGSL renderers must return `Ok` or `Err`, never panic, whatever the kernel.
//! * [`diff`]: random small graphs ([`graphs`]) run on the CPU reference and compiled through
//!   every available backend (interpreter always, WGSL where an adapter exists, CUDA where a
//!   driver does); outputs are compared with per-output bounds scaled by precision and
//!   accumulation length.
//!
//! Every iteration has its own seed (printed with any finding); `--case SEED` replays one.

pub mod diff;
pub mod graphs;
pub mod mutate;
pub mod verifier;

use std::cell::RefCell;
use std::panic::{self, AssertUnwindSafe};
use std::time::{Duration, Instant};

pub use sinter_core::tensor::SplitMix64;

/// Errors of the fuzzers' command lines.
#[derive(Debug, thiserror::Error)]
pub enum ArgError {
    /// An option needs a value.
    #[error("{0} needs a value")]
    Missing(String),
    /// A value does not parse.
    #[error("{flag}: cannot parse {value:?}")]
    Bad {
        /// The option.
        flag: String,
        /// Its value.
        value: String,
    },
    /// A number that parses but is not a usable value.
    #[error("{flag} {value}: expected {expected}")]
    OutOfRange {
        /// The option.
        flag: String,
        /// Its value.
        value: String,
        /// What it accepts.
        expected: &'static str,
    },
    /// Not an option of the fuzzers.
    #[error("unknown argument {0:?} (options: --seconds N, --iterations N, --seed S, --case SEED, --verbose)")]
    Unknown(String),
}

/// The longest `--seconds` budget [`Config::parse`] accepts (a year).
pub const MAX_SECONDS: f64 = 31_536_000.0;

/// What to run.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// Base seed; iteration `i` uses [`iteration_seed`]`(seed, i)`.
    pub seed: u64,
    /// Wall-clock budget.
    pub seconds: f64,
    /// Stop after this many iterations (before the budget runs out).
    pub iterations: Option<u64>,
    /// Replay exactly this iteration seed (one iteration, verbose).
    pub case: Option<u64>,
    /// Print every finding in full as it happens.
    pub verbose: bool,
}

impl Default for Config {
    fn default() -> Config {
        Config { seed: 1, seconds: 30.0, iterations: None, case: None, verbose: false }
    }
}

impl Config {
    /// Parses `--seconds N`, `--iterations N`, `--seed S`, `--case SEED` (decimal or `0x` hex)
    /// and `--verbose`.
    pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Config, ArgError> {
        let mut c = Config::default();
        let mut it = args.into_iter();
        while let Some(a) = it.next() {
            let mut value = |flag: &str| it.next().ok_or_else(|| ArgError::Missing(flag.to_string()));
            let bad = |flag: &str, v: &str| ArgError::Bad { flag: flag.into(), value: v.into() };
            match a.as_str() {
                "--seconds" => {
                    let v = value("--seconds")?;
                    c.seconds = v.parse().map_err(|_| bad("--seconds", &v))?;
                    // `inf` and `1e30` parse but are no duration (they panicked in `drive`),
                    // `NaN` would have meant zero.
                    if !(c.seconds.is_finite() && (0.0..=MAX_SECONDS).contains(&c.seconds)) {
                        return Err(ArgError::OutOfRange {
                            flag: "--seconds".into(),
                            value: v,
                            expected: "a number of seconds from 0 to 31536000 (a year)",
                        });
                    }
                }
                "--iterations" => {
                    let v = value("--iterations")?;
                    c.iterations = Some(v.parse().map_err(|_| bad("--iterations", &v))?);
                }
                "--seed" => {
                    let v = value("--seed")?;
                    c.seed = parse_u64(&v).ok_or_else(|| bad("--seed", &v))?;
                }
                "--case" => {
                    let v = value("--case")?;
                    c.case = Some(parse_u64(&v).ok_or_else(|| bad("--case", &v))?);
                }
                "--verbose" | "-v" => c.verbose = true,
                _ => return Err(ArgError::Unknown(a)),
            }
        }
        Ok(c)
    }
}

fn parse_u64(s: &str) -> Option<u64> {
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

/// The seed of iteration `i` of a run with base seed `base`.
pub fn iteration_seed(base: u64, i: u64) -> u64 {
    SplitMix64::new(base ^ i.wrapping_mul(0xD134_2543_DE82_EF95)).next_u64()
}

/// Whether a finding is a panic or a wrong result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FindingKind {
    /// Something panicked (or an invariant the fuzzer checks broke, e.g. a valid program was
    /// rejected).
    Crash,
    /// A backend's output differs from the reference, or it failed where the reference did not.
    Mismatch,
}

/// One finding, reproducible from its seed.
#[derive(Clone, Debug)]
pub struct Finding {
    /// The iteration seed (`--case SEED` replays it).
    pub seed: u64,
    /// Crash or mismatch.
    pub kind: FindingKind,
    /// What happened, minimized where the fuzzer can.
    pub what: String,
}

/// Totals of a run.
#[derive(Clone, Debug, Default)]
pub struct Summary {
    /// Iterations that executed something.
    pub executions: u64,
    /// Iterations skipped (an input the target does not take, e.g. an unsupported dtype).
    pub skipped: u64,
    /// Findings.
    pub findings: Vec<Finding>,
    /// Elapsed seconds.
    pub seconds: f64,
    /// Free-form counters (accepted mutants, per-backend runs, ...).
    pub notes: Vec<(String, u64)>,
}

impl Summary {
    /// Number of crashes.
    pub fn crashes(&self) -> usize {
        self.findings.iter().filter(|f| f.kind == FindingKind::Crash).count()
    }

    /// Number of mismatches.
    pub fn mismatches(&self) -> usize {
        self.findings.iter().filter(|f| f.kind == FindingKind::Mismatch).count()
    }

    /// True when anything was found (the examples exit with status 1).
    pub fn failed(&self) -> bool {
        !self.findings.is_empty()
    }

    /// Adds `n` to counter `name`.
    pub fn note(&mut self, name: &str, n: u64) {
        match self.notes.iter_mut().find(|(k, _)| k == name) {
            Some((_, v)) => *v += n,
            None => self.notes.push((name.to_string(), n)),
        }
    }

    /// The closing line: `executions N, crashes C, mismatches M (seeds: ...)`.
    pub fn line(&self) -> String {
        let mut seeds: Vec<String> = self.findings.iter().map(|f| format!("{:#x}", f.seed)).collect();
        seeds.dedup();
        if seeds.len() > 12 {
            let more = seeds.len() - 12;
            seeds.truncate(12);
            seeds.push(format!("and {more} more"));
        }
        format!(
            "executions {}, crashes {}, mismatches {} (seeds: {})",
            self.executions,
            self.crashes(),
            self.mismatches(),
            if seeds.is_empty() { "none".to_string() } else { seeds.join(" ") }
        )
    }

    /// Every finding, one paragraph each, then the counters.
    pub fn report(&self) -> String {
        // One paragraph per distinct first line (the panic message and location), with a count.
        let mut s = String::new();
        let mut seen: Vec<(&str, usize, &Finding)> = Vec::new();
        for f in &self.findings {
            let head = f.what.lines().next().unwrap_or("");
            match seen.iter_mut().find(|(h, _, _)| *h == head) {
                Some(e) => e.1 += 1,
                None => seen.push((head, 1, f)),
            }
        }
        for (_, n, f) in seen {
            s.push_str(&format!("{:?} seed {:#x} ({n} like it): {}\n", f.kind, f.seed, f.what));
        }
        let notes: Vec<String> = self.notes.iter().map(|(k, v)| format!("{k} {v}")).collect();
        s.push_str(&format!("{:.1} s, skipped {}, {}\n", self.seconds, self.skipped, notes.join(", ")));
        s
    }
}

/// Runs `one` per iteration seed until the time or iteration budget is spent (or once, for
/// `config.case`).
pub fn drive(config: &Config, summary: &mut Summary, mut one: impl FnMut(u64, &mut Summary)) {
    let start = Instant::now();
    // A `Config` built in code is not checked by `parse`: an infinite budget runs until the
    // iterations are done (or forever), NaN or a negative one runs nothing.
    let budget = Duration::try_from_secs_f64(config.seconds).unwrap_or(if config.seconds > 0.0 {
        Duration::MAX
    } else {
        Duration::ZERO
    });
    let _quiet = QuietPanics::install();
    let mut guarded = |seed: u64, summary: &mut Summary| {
        if let Err(p) = catch(|| one(seed, summary)) {
            summary.executions += 1;
            summary.findings.push(Finding {
                seed,
                kind: FindingKind::Crash,
                what: format!("the iteration panicked outside the checked calls: {p}"),
            });
        }
    };
    if let Some(seed) = config.case {
        guarded(seed, summary);
    } else {
        let mut i = 0u64;
        while config.iterations.is_none_or(|n| i < n) && (config.iterations.is_some() || start.elapsed() < budget) {
            let before = summary.findings.len();
            guarded(iteration_seed(config.seed, i), summary);
            if config.verbose {
                for f in &summary.findings[before..] {
                    eprintln!("{:?} seed {:#x}: {}", f.kind, f.seed, f.what);
                }
            }
            i += 1;
        }
    }
    summary.seconds = start.elapsed().as_secs_f64();
}

thread_local! {
    static LAST_PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// A panic hook that records the message and location instead of printing them (restored on
/// drop), so caught panics do not flood the output.
struct QuietPanics;

type Hook = Box<dyn Fn(&panic::PanicHookInfo<'_>) + Sync + Send + 'static>;

static PREVIOUS: std::sync::Mutex<(usize, Option<Hook>)> = std::sync::Mutex::new((0, None));

impl QuietPanics {
    fn install() -> QuietPanics {
        let mut prev = PREVIOUS.lock().unwrap_or_else(|e| e.into_inner());
        if prev.0 == 0 {
            prev.1 = Some(panic::take_hook());
            panic::set_hook(Box::new(|info| {
                let loc = info.location().map(|l| format!(" at {}:{}", l.file(), l.line())).unwrap_or_default();
                LAST_PANIC.with(|p| *p.borrow_mut() = Some(format!("{}{loc}", payload_text(info.payload()))));
            }));
        }
        prev.0 += 1;
        QuietPanics
    }
}

impl Drop for QuietPanics {
    fn drop(&mut self) {
        let mut prev = PREVIOUS.lock().unwrap_or_else(|e| e.into_inner());
        prev.0 -= 1;
        if prev.0 == 0
            && !std::thread::panicking()
            && let Some(h) = prev.1.take()
        {
            panic::set_hook(h);
        }
    }
}

fn payload_text(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".into()
    }
}

/// Runs `f`, turning a panic into `Err(message and location)`.
pub fn catch<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    LAST_PANIC.with(|p| *p.borrow_mut() = None);
    panic::catch_unwind(AssertUnwindSafe(f))
        .map_err(|payload| LAST_PANIC.with(|p| p.borrow_mut().take()).unwrap_or_else(|| payload_text(payload.as_ref())))
}

/// A few helpers over [`SplitMix64`].
pub trait RngExt {
    /// Uniform in `0..n` (0 when `n` is 0).
    fn below(&mut self, n: usize) -> usize;
    /// True with probability `p`.
    fn chance(&mut self, p: f64) -> bool;
    /// One element of `xs`.
    fn pick<T: Copy>(&mut self, xs: &[T]) -> T;
}

impl RngExt for SplitMix64 {
    fn below(&mut self, n: usize) -> usize {
        if n == 0 { 0 } else { (self.next_u64() % n as u64) as usize }
    }
    fn chance(&mut self, p: f64) -> bool {
        self.next_f64() < p
    }
    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len())]
    }
}
