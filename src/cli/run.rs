//! `sinter run`: import an ONNX model, specialize it to the given input tensors, run it on a
//! backend and write the outputs as `.npy` (one output), `<stem>_<k>.npy` (several) or `.npz`.

use anyhow::{Context, Result, bail};
use sinter::HostTensor;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Arguments of `sinter run`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The ONNX model.
    pub model: PathBuf,
    /// Input tensors in the model's input order: serialized TensorProto (`.pb`) or NumPy `.npy`.
    #[arg(long = "input", short = 'i')]
    pub inputs: Vec<PathBuf>,
    /// The backend that runs the graph.
    #[arg(long, default_value = "cpu")]
    pub backend: String,
    /// Where to write the outputs: `out.npy` (one output; several go to `out_0.npy`, ...) or
    /// `out.npz` (every output, by name). Without it, a summary is printed.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// Reads a `.pb` (TensorProto) or `.npy` tensor.
pub fn read_tensor(p: &Path) -> Result<HostTensor> {
    let bytes = std::fs::read(p).with_context(|| format!("reading {}", p.display()))?;
    if p.extension().is_some_and(|e| e == "npy") {
        return sinter_onnx::npy::from_npy(&bytes).with_context(|| format!("parsing {}", p.display()));
    }
    sinter_onnx::tensor_from_pb(&bytes).with_context(|| format!("parsing {}", p.display()))
}

/// Runs the model and writes or prints the outputs.
pub fn run(args: Args) -> Result<()> {
    let model = sinter_onnx::load(&args.model).with_context(|| format!("loading {}", args.model.display()))?;
    let inputs: Vec<HostTensor> = args.inputs.iter().map(|p| read_tensor(p)).collect::<Result<_>>()?;
    let want = model.inputs().len();
    if inputs.len() != want {
        let names: Vec<&str> = model.inputs().iter().map(|i| i.name.as_str()).collect();
        bail!("the model takes {want} input(s) ({}), {} given with --input", names.join(", "), inputs.len());
    }
    let g = model.graph_for_inputs(&inputs).context("importing the model")?;
    let backend = super::conformance::backend(&args.backend)?;
    let outs = backend(&g, &inputs).with_context(|| format!("running on the {} backend", args.backend))?;
    let names: Vec<String> = g.outputs.iter().map(|o| o.name.clone()).collect();
    match &args.out {
        None => {
            let mut w = std::io::stdout().lock();
            for (n, t) in names.iter().zip(&outs) {
                let v = t.to_f64_vec();
                let head: Vec<String> = v.iter().take(8).map(|x| format!("{x}")).collect();
                let more = if v.len() > 8 { ", ..." } else { "" };
                writeln!(w, "{n}: {} {:?} [{}{more}]", t.dtype(), t.shape, head.join(", "))?;
            }
        }
        Some(p) if p.extension().is_some_and(|e| e == "npz") => {
            let items: Vec<(String, HostTensor)> = names.iter().cloned().zip(outs).collect();
            std::fs::write(p, sinter_onnx::npy::to_npz(&items)).with_context(|| format!("writing {}", p.display()))?;
        }
        Some(p) if outs.len() == 1 => {
            std::fs::write(p, sinter_onnx::npy::to_npy(&outs[0]))
                .with_context(|| format!("writing {}", p.display()))?;
        }
        Some(p) => {
            let stem = p.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "out".into());
            for (k, t) in outs.iter().enumerate() {
                let q = p.with_file_name(format!("{stem}_{k}.npy"));
                std::fs::write(&q, sinter_onnx::npy::to_npy(t)).with_context(|| format!("writing {}", q.display()))?;
            }
        }
    }
    Ok(())
}
