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
    /// The on-disk cache.
    #[command(flatten)]
    pub cache: super::CacheArgs,
}

/// Reads a `.pb` (TensorProto) or `.npy` tensor (by extension, in any case); errors name the
/// file and what is wrong with it.
pub fn read_tensor(p: &Path) -> Result<HostTensor> {
    if super::has_extension(p, "npy") {
        let bytes = std::fs::read(p).with_context(|| format!("reading {}", p.display()))?;
        return sinter_onnx::npy::from_npy(&bytes).with_context(|| format!("parsing {}", p.display()));
    }
    Ok(sinter_onnx::read_tensor_pb(p)?)
}

/// Where `--out` writes: one `.npz`, or `.npy` file(s). Other extensions (and a folder) are
/// refused rather than written under a name the user did not ask for.
#[derive(Debug, PartialEq)]
enum OutKind {
    Npz,
    Npy,
}

fn out_kind(p: &Path) -> Result<OutKind> {
    if p.is_dir() {
        bail!("--out {}: is a folder; name a .npy or .npz file", p.display());
    }
    if super::has_extension(p, "npz") {
        Ok(OutKind::Npz)
    } else if super::has_extension(p, "npy") {
        Ok(OutKind::Npy)
    } else {
        bail!("--out {}: expected a .npy or .npz file name", p.display())
    }
}

/// Runs the model and writes or prints the outputs.
pub fn run(args: Args) -> Result<()> {
    let out_kind = args.out.as_deref().map(out_kind).transpose()?;
    let model = sinter_onnx::load(&args.model)?;
    let inputs: Vec<HostTensor> = args.inputs.iter().map(|p| read_tensor(p)).collect::<Result<_>>()?;
    let want = model.inputs().len();
    if inputs.len() != want {
        let names: Vec<&str> = model.inputs().iter().map(|i| i.name.as_str()).collect();
        bail!("the model takes {want} input(s) ({}), {} given with --input", names.join(", "), inputs.len());
    }
    let g = model.graph_for_inputs(&inputs).context("importing the model")?;
    let backend = super::conformance::backend(&args.backend, args.cache.dir())?;
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
        Some(p) if out_kind == Some(OutKind::Npz) => {
            let items: Vec<(String, HostTensor)> = names.iter().cloned().zip(outs).collect();
            std::fs::write(p, sinter_onnx::npy::to_npz(&items)).with_context(|| format!("writing {}", p.display()))?;
        }
        Some(p) if outs.len() == 1 => {
            std::fs::write(p, sinter_onnx::npy::to_npy(&outs[0]))
                .with_context(|| format!("writing {}", p.display()))?;
        }
        Some(p) => {
            // The stem keeps the extension's case: `OUT.NPY` gives `OUT_0.npy`, ...
            let stem = p.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "out".into());
            for (k, t) in outs.iter().enumerate() {
                let q = p.with_file_name(format!("{stem}_{k}.npy"));
                std::fs::write(&q, sinter_onnx::npy::to_npy(t)).with_context(|| format!("writing {}", q.display()))?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn out_extensions_are_case_insensitive_and_others_refused() {
        assert_eq!(out_kind(Path::new("x.NPZ")).unwrap(), OutKind::Npz);
        assert_eq!(out_kind(Path::new("x.Npy")).unwrap(), OutKind::Npy);
        assert!(out_kind(Path::new("x.txt")).unwrap_err().to_string().contains(".npy or .npz"));
        assert!(out_kind(&std::env::temp_dir()).unwrap_err().to_string().contains("is a folder"));
    }

    #[test]
    fn bad_tensor_files_say_what_is_wrong_with_which_file() {
        let dir = std::env::temp_dir().join(format!("sinter-run-files-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let t = HostTensor::f32([2], vec![1.0, 2.0]).unwrap();
        let cases: [(&str, Vec<u8>, &str); 5] = [
            ("empty.pb", vec![], "empty (0 bytes)"),
            ("npy.pb", sinter_onnx::npy::to_npy(&t), "NumPy .npy data"),
            ("garbage.pb", b"\x08\x07\x12\xff\xff".to_vec(), "garbage.pb"),
            ("empty.npy", vec![], "empty (0 bytes)"),
            ("garbage.NPY", b"hello world, not numpy".to_vec(), "not .npy data"),
        ];
        for (name, bytes, want) in cases {
            let p = dir.join(name);
            std::fs::write(&p, bytes).unwrap();
            let e = super::super::report(&read_tensor(&p).unwrap_err());
            assert!(e.contains(&p.display().to_string()) && e.contains(want), "{name}: {e}");
            assert!(!e.contains("malformed model"), "{name} is not a model: {e}");
        }
        let model = dir.join("model.onnx");
        std::fs::write(&model, b"").unwrap();
        let e = sinter_onnx::load(&model).unwrap_err().to_string();
        assert!(e.contains(&model.display().to_string()) && e.contains("empty"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
