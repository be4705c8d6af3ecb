//! A quick run of both fuzzers with fixed seeds (the long runs are `examples/fuzz_verifier.rs`
//! and `examples/fuzz_backends.rs`): any crash or mismatch fails, printed with its seed.

use sinter::fuzz::{ArgError, Config, Summary, diff, drive, verifier::VerifierFuzz};

fn config(iterations: u64) -> Config {
    Config { seed: 14, iterations: Some(iterations), ..Config::default() }
}

#[test]
fn verifier_fuzz_finds_nothing() {
    let mut fuzz = VerifierFuzz::new();
    let mut summary = Summary::default();
    drive(&config(400), &mut summary, |seed, s| fuzz.iteration(seed, s));
    println!("{}", summary.line());
    assert!(summary.executions > 300, "{}", summary.report());
    assert!(!summary.failed(), "{}{}", summary.report(), summary.line());
}

#[test]
fn differential_fuzz_finds_nothing() {
    let backends = diff::Backends::open();
    if std::env::var("SINTER_REQUIRE_GPU").as_deref() == Ok("1") {
        assert!(backends.list.iter().any(|(n, _)| n.starts_with("wgsl")), "no WGSL backend: {:?}", backends.missing);
    }
    let mut summary = Summary::default();
    drive(&config(12), &mut summary, |seed, s| diff::iteration(&backends, seed, s));
    println!("{}", summary.line());
    assert!(summary.executions >= 8, "{}", summary.report());
    assert!(!summary.failed(), "{}{}", summary.report(), summary.line());
}

/// Iteration seeds of the verifier fuzzer that crashed before their fixes (overflows in
/// `Index::range`/`Index::eval`, `interp::validate`'s size products, `check_kernel`'s extents, the
/// WGSL index emitter's negation and gcd, the WGSL binding size): each must stay clean.
#[test]
fn verifier_crashes_found_stay_fixed() {
    const SEEDS: [u64; 10] = [
        0x7e5e6f1aca95b8a9,
        0x5e06519ab36e43d4,
        0xe37442984610b608,
        0xc684fdc1f9bbfcb0,
        0xb7a2d05d82ec6eb3,
        0x2216066a52c4b479,
        0x307370964104fd5d,
        0x5c7ed989fbbfc014,
        0x55a634196239d4e3,
        0x111e98900d237eca,
    ];
    let mut fuzz = VerifierFuzz::new();
    let mut summary = Summary::default();
    for seed in SEEDS {
        drive(&Config { case: Some(seed), ..Config::default() }, &mut summary, |seed, s| fuzz.iteration(seed, s));
    }
    assert!(!summary.failed(), "{}", summary.report());
}

/// `--seconds inf` (or 1e30) parsed and then panicked converting to a `Duration`; `NaN` meant
/// zero seconds (the sibling of `conformance --timeout`, issue 14). Both are errors naming the
/// flag, and a `Config` built in code with such a budget never panics.
#[test]
fn fuzz_budgets_must_be_finite_durations() {
    let parse = |v: &str| Config::parse(["--seconds".to_string(), v.to_string()]);
    for v in ["inf", "1e30", "NaN", "-1"] {
        match parse(v) {
            Err(e @ ArgError::OutOfRange { .. }) => assert!(e.to_string().contains("--seconds"), "{e}"),
            other => panic!("--seconds {v}: {other:?}"),
        }
    }
    assert_eq!(parse("2.5").unwrap().seconds, 2.5);
    for seconds in [f64::INFINITY, f64::NAN, -3.0] {
        let c = Config { seconds, iterations: Some(2), ..Config::default() };
        let mut summary = Summary::default();
        drive(&c, &mut summary, |_, s| s.executions += 1);
        assert_eq!(summary.executions, 2, "{seconds}");
    }
}
