//! Runs the ONNX conformance suite on the CPU reference without the `sinter` binary:
//! `cargo run -p sinter-onnx --example onnx_conformance -- DIR [FILTER] [--json PATH]`.

use sinter_onnx::conformance::{self, Options, Status};
use std::sync::Arc;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let dir = args.first().ok_or("usage: onnx_conformance DIR [FILTER] [--json PATH]")?;
    let mut filter = None;
    let mut json = None;
    let mut i = 1;
    while i < args.len() {
        if args[i] == "--json" {
            json = args.get(i + 1).cloned();
            i += 2;
        } else {
            filter = Some(args[i].clone());
            i += 1;
        }
    }
    let opts = Options { filter, ..Options::default() };
    let backend: conformance::Backend = Arc::new(sinter_core::cpu::run);
    let r = conformance::run(std::path::Path::new(dir), backend, &opts)?;
    for c in r.cases.iter().filter(|c| c.status != Status::Pass) {
        println!(
            "{:<11} {}/{}: {}",
            format!("{:?}", c.status).to_lowercase(),
            c.kind,
            c.name,
            c.detail.as_deref().unwrap_or("")
        );
    }
    for (k, s) in &r.kinds {
        println!("{k}: {s}");
    }
    if let Some(p) = json {
        std::fs::write(p, r.to_json())?;
    }
    Ok(())
}
