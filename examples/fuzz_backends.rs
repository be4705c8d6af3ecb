//! Differential fuzzer (CPU reference against the interpreter, WGSL and CUDA where present):
//! `SINTER_ADAPTER=cpu cargo run --example fuzz_backends -- --seconds 60 --seed 1` (`--case SEED`
//! replays one iteration, `--verbose` prints findings as they happen). Exits 1 on any crash or
//! mismatch.

fn main() {
    let config = match sinter::fuzz::Config::parse(std::env::args().skip(1)) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("fuzz_backends: {e}");
            std::process::exit(2);
        }
    };
    let backends = sinter::fuzz::diff::Backends::open();
    let names: Vec<&str> = backends.list.iter().map(|(n, _)| n.as_str()).collect();
    eprintln!("backends: {}", names.join(", "));
    for m in &backends.missing {
        eprintln!("not compared: {m}");
    }
    let mut summary = sinter::fuzz::Summary::default();
    sinter::fuzz::drive(&config, &mut summary, |seed, s| sinter::fuzz::diff::iteration(&backends, seed, s));
    print!("{}", summary.report());
    println!("{}", summary.line());
    std::process::exit(summary.failed() as i32);
}
