//! Import an ONNX model exported from PyTorch, compile it like any traced graph, run it and compare
//! with the onnxruntime outputs stored beside it.
//!
//! ```text
//! cargo run --release --example onnx_model                          # onnx/models/transformer
//! cargo run --release --example onnx_model -- onnx/models/cnn wgsl
//! ```

use sinter::{Backend, HostTensor, Options};
use std::path::PathBuf;

fn read_pb(p: &std::path::Path) -> Result<HostTensor, Box<dyn std::error::Error>> {
    Ok(sinter::onnx::tensor_from_pb(&std::fs::read(p)?)?)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let dir = PathBuf::from(args.next().unwrap_or_else(|| "onnx/models/transformer".into()));
    let backend = match args.next().as_deref() {
        None | Some("auto") => Backend::Auto,
        Some(name) => Backend::from_name(name).ok_or("backend: auto, wgsl, interp")?,
    };
    let model = sinter::onnx::load(dir.join("model.onnx"))?;
    let data = dir.join("test_data_set_0");
    let inputs: Vec<HostTensor> =
        (0..model.inputs().len()).map(|k| read_pb(&data.join(format!("input_{k}.pb")))).collect::<Result<_, _>>()?;
    // Specialize to these inputs: shape arithmetic folds, dynamic reshapes become static.
    let g = model.graph_for_inputs(&inputs)?;
    let compiled = sinter::compile(&g, Options { backend, ..Options::default() })?;
    let outs = compiled.run(&inputs)?;
    println!(
        "{}: {} nodes, {} kernels on {}",
        dir.display(),
        g.nodes.len(),
        compiled.program().map_or(0, |p| p.kernels.len()),
        compiled.backend().device_name()
    );
    for (k, o) in outs.iter().enumerate() {
        let want = read_pb(&data.join(format!("output_{k}.pb")))?;
        let (a, b) = (o.to_f64_vec(), want.to_f64_vec());
        let scale = b.iter().fold(0f64, |m, x| m.max(x.abs())).max(1e-30);
        let err = a.iter().zip(&b).fold(0f64, |m, (x, y)| m.max((x - y).abs())) / scale;
        println!("output {k} {:?}: relative error vs onnxruntime {err:.2e}", o.shape);
    }
    Ok(())
}
