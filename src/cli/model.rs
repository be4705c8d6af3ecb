//! What `sinter bench --model`, `sinter profile --model` and `sinter run` share: the model flags,
//! loading and importing an ONNX model with progress lines, checking `--input` files against the
//! model's signature, and making random inputs from the signature.
//!
//! Random inputs (deterministic, seed [`SEED`]): float inputs are N(0, 1) (Box-Muller); bool
//! inputs a coin flip; integer inputs named `*mask*` (an attention mask) are all ones, other
//! integer inputs uniform in `0..B` where `B` is the smallest extent of the axis the input indexes
//! when the imported graph uses it as the indices of a gather (an embedding's vocabulary, a type
//! table), capped at 1000, and 1000 otherwise (unsigned and signed alike; never negative). Symbolic
//! dims take their values from `--dim name=value`; a missing one is an error naming every unbound
//! dim, and a `--dim` the model does not have is an error listing the dims it has.

use anyhow::{Context, Result, bail};
use sinter::core::passes::Precision;
use sinter::core::tensor::SplitMix64;
use sinter::{DType, Dim, HostTensor, IrGraph, Op};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The seed of random model inputs.
pub const SEED: u64 = 42;

/// The largest exclusive upper bound of random integer inputs.
pub const INT_BOUND: i64 = 1000;

/// The flags that select an ONNX model and its inputs (`bench`, `profile`).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ModelArgs {
    /// An ONNX model to time instead of the built-in workloads (its file stem names the results).
    #[arg(long, conflicts_with = "workload")]
    pub model: Option<PathBuf>,
    /// Input tensors of `--model`, in the model's input order: NumPy `.npy` or serialized
    /// TensorProto `.pb`; or one NumPy `.npz` holding every input by name. Without them, random
    /// inputs are made from the model's signature.
    #[arg(long = "input", short = 'i', requires = "model")]
    pub inputs: Vec<PathBuf>,
    /// A value for a symbolic dim of the model's inputs, `NAME=VALUE` (repeatable), e.g.
    /// `--dim batch=8`. Unnamed unknown dims are called `<input>_d<axis>`.
    #[arg(long = "dim", requires = "model", value_parser = parse_dim, value_name = "NAME=VALUE")]
    pub dims: Vec<(String, usize)>,
}

/// Parses `--dim NAME=VALUE`: a non-empty name and a positive integer.
pub fn parse_dim(s: &str) -> Result<(String, usize), String> {
    let Some((name, value)) = s.split_once('=') else {
        return Err(format!("expected NAME=VALUE (e.g. batch=8), got {s:?}"));
    };
    let name = name.trim();
    if name.is_empty() {
        return Err(format!("no dim name before '=' in {s:?} (e.g. batch=8)"));
    }
    match value.trim().parse::<usize>() {
        Ok(v) if v > 0 => Ok((name.to_string(), v)),
        _ => Err(format!("the value of {name} must be a positive integer, got {value:?}")),
    }
}

/// Parses `--precision f32|bf16|f16`.
pub fn parse_precision(s: &str) -> Result<Precision, String> {
    Precision::from_name(s).ok_or_else(|| {
        let names: Vec<&str> = Precision::ALL.iter().map(|p| p.name()).collect();
        format!("expected one of {}, got {s:?}", names.join(", "))
    })
}

/// Parses `--tf32 on|off|conv|matmul` (PyTorch's `allow_tf32`: `conv`, the default, allows TF32
/// for convolutions only; `on` for matmuls too; `off` keeps every f32 product exact).
pub fn parse_tf32(s: &str) -> Result<sinter::core::schedule::AllowTf32, String> {
    s.parse()
}

/// Progress lines on stderr, each with the time since the command started.
pub struct Progress {
    start: Instant,
}

impl Default for Progress {
    fn default() -> Progress {
        Progress { start: Instant::now() }
    }
}

impl Progress {
    /// Prints `# [  1.23 s] what`.
    pub fn step(&self, what: impl std::fmt::Display) {
        eprintln!("# [{:>7.2} s] {what}", self.start.elapsed().as_secs_f64());
    }
}

/// A model imported for given inputs.
pub struct Loaded {
    /// The model's file stem (the workload name in results).
    pub name: String,
    /// The graph, specialized to `inputs`.
    pub graph: IrGraph,
    /// The inputs, in the model's input order.
    pub inputs: Vec<HostTensor>,
}

/// The file stem of a model path (`resnet50.onnx` -> `resnet50`).
pub fn stem(path: &Path) -> String {
    path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "model".into())
}

/// Loads the model file with a clear error for a missing file or one that is not ONNX.
pub fn open(path: &Path, progress: &Progress) -> Result<sinter::onnx::Model> {
    if !path.exists() {
        bail!("{}: no such file (the ONNX model)", path.display());
    }
    if path.is_dir() {
        bail!("{}: is a folder; name an .onnx file", path.display());
    }
    progress.step(format_args!("loading {}", path.display()));
    let m = sinter::onnx::load(path).with_context(|| format!("{} is not a readable ONNX model", path.display()))?;
    Ok(m)
}

/// Loads, checks or makes the inputs, and imports the model (see the module documentation).
pub fn load(path: &Path, a: &ModelArgs, progress: &Progress) -> Result<Loaded> {
    let model = open(path, progress)?;
    let mut inputs =
        if a.inputs.is_empty() { random_inputs(&model, &a.dims)? } else { file_inputs(&model, &a.inputs, &a.dims)? };
    let describe =
        |ins: &[HostTensor]| ins.iter().map(|t| format!("{} {:?}", t.dtype(), t.shape)).collect::<Vec<_>>().join(", ");
    progress.step(format_args!("importing for inputs {}", describe(&inputs)));
    let mut graph = import(&model, &inputs)?;
    if a.inputs.is_empty() && rebound_indices(&model, &graph, &mut inputs) {
        graph = import(&model, &inputs)?;
    }
    progress.step(format_args!(
        "imported: {} nodes, {} ops ({})",
        graph.nodes.len(),
        model.op_types().len(),
        if a.inputs.is_empty() { "random inputs" } else { "inputs from files" }
    ));
    Ok(Loaded { name: stem(path), graph, inputs })
}

fn import(model: &sinter::onnx::Model, inputs: &[HostTensor]) -> Result<IrGraph> {
    model.graph_for_inputs(inputs).context("importing the model")
}

/// The symbolic dims of the model's inputs, in first-seen order, with the inputs naming them.
fn symbols(model: &sinter::onnx::Model) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for i in model.inputs() {
        for d in i.shape.iter().flat_map(|s| s.dims()) {
            if let Dim::Sym(s) = d
                && !out.iter().any(|(n, _)| n == s.as_ref() as &str)
            {
                out.push((s.to_string(), i.name.clone()));
            }
        }
    }
    out
}

/// `--dim` values as a map; a dim the model lacks, or one given twice with different values, is
/// an error.
fn bindings(model: &sinter::onnx::Model, dims: &[(String, usize)]) -> Result<BTreeMap<String, usize>> {
    let syms = symbols(model);
    let mut out = BTreeMap::new();
    for (name, v) in dims {
        if !syms.iter().any(|(s, _)| s == name) {
            let have = if syms.is_empty() {
                "its inputs have no symbolic dims".to_string()
            } else {
                format!("its symbolic dims: {}", syms.iter().map(|(s, _)| s.as_str()).collect::<Vec<_>>().join(", "))
            };
            bail!("--dim {name}={v}: the model has no dim named {name:?} ({have})");
        }
        if let Some(prev) = out.insert(name.clone(), *v)
            && prev != *v
        {
            bail!("--dim {name} given twice ({prev} and {v})");
        }
    }
    Ok(out)
}

/// A declared shape as text: `[batch, 32]`.
fn show_shape(s: &Option<sinter::Shape>) -> String {
    match s {
        Some(s) => format!("[{}]", s.dims().iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", ")),
        None => "(unknown shape)".into(),
    }
}

fn dtype_of(i: &sinter::onnx::IoInfo) -> Result<DType> {
    i.dtype.clone().map_err(|t| anyhow::anyhow!("input {:?} has type {t}, which sinter cannot make", i.name))
}

/// Reads `--input` files and checks each against the model's signature (count, dtype, rank,
/// static dims, symbolic dims consistent with each other and with `--dim`).
fn file_inputs(model: &sinter::onnx::Model, files: &[PathBuf], dims: &[(String, usize)]) -> Result<Vec<HostTensor>> {
    let want = model.inputs();
    let names: Vec<&str> = want.iter().map(|i| i.name.as_str()).collect();
    let read = super::run::read_inputs(files, &names)?;
    if read.len() != want.len() {
        bail!("the model takes {} input(s) ({}), {} given with --input", want.len(), names.join(", "), read.len());
    }
    let mut bound = bindings(model, dims)?;
    let mut from_dim: BTreeMap<String, String> = bound.keys().map(|k| (k.clone(), "--dim".to_string())).collect();
    let mut out = Vec::with_capacity(read.len());
    for (info, (p, t)) in want.iter().zip(read) {
        let d = dtype_of(info)?;
        let mismatch = || {
            format!(
                "input {:?}: the model expects {d} {}, {} holds {} {:?}",
                info.name,
                show_shape(&info.shape),
                p,
                t.dtype(),
                t.shape
            )
        };
        if t.dtype() != d {
            bail!("{}", mismatch());
        }
        if let Some(s) = &info.shape {
            if s.rank() != t.shape.len() {
                bail!("{}", mismatch());
            }
            for (dim, &n) in s.dims().iter().zip(&t.shape) {
                match dim {
                    Dim::Static(x) if *x != n => bail!("{}", mismatch()),
                    Dim::Sym(sym) => match bound.get(sym.as_ref() as &str) {
                        Some(&v) if v != n => bail!(
                            "{} ({sym} is {v} from {})",
                            mismatch(),
                            from_dim.get(sym.as_ref() as &str).map_or("another input", |s| s.as_str())
                        ),
                        Some(_) => {}
                        None => {
                            bound.insert(sym.to_string(), n);
                            from_dim.insert(sym.to_string(), format!("input {:?}", info.name));
                        }
                    },
                    _ => {}
                }
            }
        }
        out.push(t);
    }
    Ok(out)
}

/// Random inputs from the model's signature and `--dim` (see the module documentation).
fn random_inputs(model: &sinter::onnx::Model, dims: &[(String, usize)]) -> Result<Vec<HostTensor>> {
    let bound = bindings(model, dims)?;
    let mut unbound: Vec<String> = Vec::new();
    for (s, input) in symbols(model) {
        if !bound.contains_key(&s) {
            unbound.push(format!("{s} (input {input:?})"));
        }
    }
    if !unbound.is_empty() {
        let names: Vec<&str> = unbound.iter().map(|u| u.split(' ').next().unwrap_or("")).collect();
        bail!(
            "the model's inputs have symbolic dims without a value: {}; give each with --dim, e.g. {} (or pass --input files)",
            unbound.join(", "),
            names.iter().map(|n| format!("--dim {n}=1")).collect::<Vec<_>>().join(" ")
        );
    }
    let mut out = Vec::new();
    for (k, info) in model.inputs().iter().enumerate() {
        let d = dtype_of(info)?;
        let Some(s) = &info.shape else {
            bail!("input {:?} declares no shape: give its tensor with --input", info.name);
        };
        let shape: Vec<usize> = s
            .dims()
            .iter()
            .map(|d| match d {
                Dim::Static(x) => *x,
                Dim::Sym(sym) => bound[sym.as_ref() as &str],
            })
            .collect();
        let mask = info.name.to_ascii_lowercase().contains("mask");
        out.push(random_tensor(d, shape, SEED + k as u64, if mask { 1 } else { INT_BOUND }, mask)?);
    }
    Ok(out)
}

/// One random tensor: floats N(0, 1), bools a coin flip, integers uniform in `0..bound` (all ones
/// when `ones`).
pub fn random_tensor(d: DType, shape: Vec<usize>, seed: u64, bound: i64, ones: bool) -> Result<HostTensor> {
    use sinter::core::budget;
    budget::check(budget::bytes_of(budget::elems(&shape), 16), || format!("a random {d} input of shape {shape:?}"))?;
    let n: usize = shape.iter().product();
    let mut rng = SplitMix64::new(seed);
    if d.is_float() {
        let v: Vec<f64> = (0..n)
            .map(|_| {
                let (u1, u2) = (1.0 - rng.next_f64(), rng.next_f64());
                (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
            })
            .collect();
        return Ok(HostTensor::from_f64(d, shape, &v));
    }
    if d == DType::Bool {
        return Ok(HostTensor::random(d, shape, seed, 0.0, 1.0));
    }
    let bound = bound.max(1) as u64;
    let v: Vec<i64> = (0..n).map(|_| if ones { 1 } else { (rng.next_u64() % bound) as i64 }).collect();
    Ok(HostTensor::from_i64(d, shape, &v))
}

/// Narrows random integer inputs that index a gather to that gather's extent (below
/// [`INT_BOUND`]); true when some input changed (the caller re-imports).
fn rebound_indices(model: &sinter::onnx::Model, g: &IrGraph, inputs: &mut [HostTensor]) -> bool {
    let mut changed = false;
    for (k, &id) in g.inputs.iter().enumerate() {
        let Some(t) = inputs.get(k) else { continue };
        let masked = model.inputs().get(k).is_some_and(|i| i.name.to_ascii_lowercase().contains("mask"));
        if !t.dtype().is_int() || masked {
            continue;
        }
        if let Some(b) = gather_extent(g, id)
            && (b as i64) < INT_BOUND
        {
            let v: Vec<i64> = t.to_f64_vec().iter().map(|&x| (x as i64).rem_euclid(b.max(1) as i64)).collect();
            inputs[k] = HostTensor::from_i64(t.dtype(), t.shape.clone(), &v);
            changed = true;
        }
    }
    changed
}

/// The smallest extent indexed by a gather whose indices are `id` (through casts and reshapes).
fn gather_extent(g: &IrGraph, id: sinter::NodeId) -> Option<usize> {
    let mut values = vec![id];
    let mut best: Option<usize> = None;
    for (nid, n) in g.iter() {
        let Some(pos) = n.inputs.iter().position(|i| values.contains(i)) else { continue };
        match &n.op {
            Op::Cast(_) | Op::Reshape(_) => values.push(nid),
            Op::Gather { axis } | Op::GatherElements { axis } if pos == 1 => {
                if let Some(&e) = g.ty(n.inputs[0]).shape.as_static().as_ref().and_then(|s| s.get(*axis)) {
                    best = Some(best.map_or(e, |b| b.min(e)));
                }
            }
            _ => {}
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dims_parse_or_say_what_is_wrong() {
        assert_eq!(parse_dim("batch=8").unwrap(), ("batch".to_string(), 8));
        assert!(parse_dim("batch").unwrap_err().contains("NAME=VALUE"));
        assert!(parse_dim("batch=x").unwrap_err().contains("positive integer"));
        assert!(parse_dim("batch=0").unwrap_err().contains("positive integer"));
        assert!(parse_dim("=3").unwrap_err().contains("no dim name"));
        assert_eq!(parse_precision("BF16").unwrap(), Precision::BF16);
        assert!(parse_precision("f8").unwrap_err().contains("f32, bf16, f16"));
    }

    #[test]
    fn random_tensors_are_deterministic_and_in_range() {
        let a = random_tensor(DType::F32, vec![4096], 1, 0, false).unwrap();
        assert_eq!(a, random_tensor(DType::F32, vec![4096], 1, 0, false).unwrap());
        let v = a.to_f64_vec();
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        let var = v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / v.len() as f64;
        assert!(mean.abs() < 0.1 && (var - 1.0).abs() < 0.1, "N(0,1)-like: mean {mean}, var {var}");
        let i = random_tensor(DType::I64, vec![1000], 2, 7, false).unwrap().to_f64_vec();
        assert!(i.iter().all(|&x| (0.0..7.0).contains(&x)) && i.contains(&6.0));
        let m = random_tensor(DType::I32, vec![10], 3, 7, true).unwrap().to_f64_vec();
        assert!(m.iter().all(|&x| x == 1.0));
    }

    #[test]
    fn gather_indices_are_bounded_by_the_indexed_extent() {
        let g = sinter::Graph::new();
        let ids = g.input("ids", DType::I64, [2, 3]);
        let other = g.input("n", DType::I64, [2]);
        let table = g.input("table", DType::F32, [7, 4]);
        let types = g.input("types", DType::F32, [2, 4]);
        g.output(&table.gather(0, &ids));
        g.output(&types.gather(0, &ids.cast(DType::I32)));
        g.output(&other.cast(DType::F32));
        let g = g.build().unwrap();
        assert_eq!(gather_extent(&g, g.inputs[0]), Some(2), "the smallest table indexed");
        assert_eq!(gather_extent(&g, g.inputs[1]), None, "not used as indices");
    }
}
