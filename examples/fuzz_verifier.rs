//! Kernel-IR verifier fuzzer: `cargo run --example fuzz_verifier -- --seconds 60 --seed 1`
//! (`--case SEED` replays one iteration, `--verbose` prints findings as they happen). Exits 1
//! when anything crashed.

fn main() {
    let config = match sinter::fuzz::Config::parse(std::env::args().skip(1)) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("fuzz_verifier: {e}");
            std::process::exit(2);
        }
    };
    let mut fuzz = sinter::fuzz::verifier::VerifierFuzz::new();
    let mut summary = sinter::fuzz::Summary::default();
    sinter::fuzz::drive(&config, &mut summary, |seed, s| fuzz.iteration(seed, s));
    print!("{}", summary.report());
    println!("{}", summary.line());
    std::process::exit(summary.failed() as i32);
}
