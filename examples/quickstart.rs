//! Trace a small graph with lazy tensors, compile it on the best backend present (a GPU through
//! WGSL, else lavapipe, else the host interpreter), run it, and check it against the CPU reference.
//!
//! ```text
//! cargo run --release --example quickstart
//! SINTER_ADAPTER=cpu cargo run --example quickstart     # force lavapipe
//! ```

use sinter::prelude::*;
use sinter::{Backend, Options};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Capture: nothing runs while the graph is recorded.
    let g = Graph::new();
    let x = g.input("x", DType::F32, [1024, 768]);
    let b = g.input("b", DType::F32, [768]);
    let w = g.input("w", DType::F32, [768]);
    let y = ((&x + &b).relu() * 2.0).layer_norm(&w, &b, 1e-5).softmax(-1);
    g.output(&y);

    // Compile: decompose, fuse, generate kernels; guards on input shapes and dtypes.
    let compiled = sinter::compile(&g, Options { backend: Backend::Auto, ..Options::default() })?;
    let program = compiled.program().expect("static inputs compile at once");
    println!(
        "backend {} ({}): {} kernel(s), peak device memory {:.2} MB",
        compiled.backend().name(),
        compiled.backend().device_name(),
        program.kernels.len(),
        program.memory.peak_bytes as f64 / 1e6
    );
    for k in &program.kernels {
        println!("  {} fuses {:?}", k.name, k.ops);
    }

    // Run and compare with the reference interpreter.
    let inputs = vec![
        HostTensor::random(DType::F32, vec![1024, 768], 1, -2.0, 2.0),
        HostTensor::random(DType::F32, vec![768], 2, -0.5, 0.5),
        HostTensor::random(DType::F32, vec![768], 3, 0.5, 1.5),
    ];
    let got = compiled.run(&inputs)?;
    let want = sinter::cpu::run(&g, &inputs)?;
    let ratio = got[0].tolerance_ratio(&want[0], 1e-4, 1e-6);
    println!("max error / tolerance against the CPU reference: {ratio:.3}");
    if ratio > 1.0 {
        return Err("result differs from the CPU reference".into());
    }

    // A new shape fails the guard and recompiles (logged with SINTER_LOG=recompiles).
    let small = vec![HostTensor::random(DType::F32, vec![7, 768], 4, -2.0, 2.0), inputs[1].clone(), inputs[2].clone()];
    compiled.run(&small)?;
    for e in compiled.events() {
        println!("compiled for {:?}: {}", e.signature.0, e.reason);
    }
    Ok(())
}
