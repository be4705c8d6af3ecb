//! A loaded ONNX model: the decoded protobuf, its initializers, opsets and I/O signature, and the
//! entry points that turn it into sinter IR.

use crate::error::OnnxError;
use crate::proto::{GraphProto, ModelProto, TensorProto, TypeProto, ValueInfoProto, type_proto};
use crate::tensor::{decode_tensor, dtype_from_code};
use prost::Message;
use prost::bytes::Bytes;
use sinter_core::{DType, Dim, HostTensor, IrGraph, Shape};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The largest model file [`load`] reads (2 GiB, the protobuf limit).
pub const MAX_MODEL_BYTES: u64 = 2 << 30;

/// The newest `ai.onnx` opset the importer accepts: that of onnx 1.23 (`onnx.defs.
/// onnx_opset_version()`), whose `onnx.proto` (IR version [`MAX_IR_VERSION`]) is bundled and
/// whose backend test suite the conformance runner is measured on. A model importing a newer
/// opset is refused ([`OnnxError::Version`]): its ops may mean something this importer does not
/// implement.
pub const MAX_OPSET: i64 = 28;

/// The newest ONNX IR version the importer reads (`IR_VERSION` of the bundled `onnx.proto`).
/// Newer models are refused ([`OnnxError::Version`]); older ones (and 0, unset) are read.
pub const MAX_IR_VERSION: i64 = 14;

/// One graph input or output as the model declares it.
#[derive(Clone, Debug, PartialEq)]
pub struct IoInfo {
    /// The value's name.
    pub name: String,
    /// The element type; `Err` holds the ONNX type's name when sinter has no equivalent
    /// (strings, complex and sub-byte types) or the value is not a tensor (sequence, map, optional).
    pub dtype: Result<DType, String>,
    /// The declared shape: named dims (`dim_param`) and unnamed unknown dims become
    /// [`Dim::Sym`]; `None` when the rank is unknown.
    pub shape: Option<Shape>,
}

/// A decoded initializer.
#[derive(Clone, Debug)]
pub(crate) enum Init {
    /// A tensor sinter can hold.
    Tensor(Arc<HostTensor>),
    /// A tensor of a type sinter lacks (the ONNX type name); an error only if a node uses it.
    Unsupported(String),
}

/// A loaded ONNX model. Turn it into IR with [`Model::graph`] (symbolic), [`Model::graph_for`]
/// (specialized to input shapes) or [`Model::graph_for_inputs`] (specialized to input tensors).
#[derive(Debug)]
pub struct Model {
    pub(crate) proto: ModelProto,
    pub(crate) dir: Option<PathBuf>,
    pub(crate) opsets: HashMap<String, i64>,
    pub(crate) initializers: HashMap<String, Init>,
    inputs: Vec<IoInfo>,
    outputs: Vec<IoInfo>,
}

/// Loads a model file. External data resolves against the file's folder.
pub fn load(path: impl AsRef<Path>) -> Result<Model, OnnxError> {
    let path = path.as_ref();
    let io = |e| OnnxError::Io { path: path.to_path_buf(), error: e };
    let meta = std::fs::metadata(path).map_err(io)?;
    if meta.len() > MAX_MODEL_BYTES {
        return Err(OnnxError::TooLarge {
            what: format!("model file {}", path.display()),
            bytes: meta.len(),
            limit: MAX_MODEL_BYTES,
        });
    }
    let bytes = std::fs::read(path).map_err(io)?;
    let dir = path.parent().map(|p| if p.as_os_str().is_empty() { PathBuf::from(".") } else { p.to_path_buf() });
    // Read whole, then decoded from a shared buffer: every initializer's raw data is a slice of
    // it, not a copy.
    Model::decode(Bytes::from(bytes), dir).map_err(|e| e.in_file(path))
}

/// Initializers of more raw bytes than this in all are decoded on several threads.
const PARALLEL_DECODE_BYTES: usize = 32 << 20;

/// Most threads [`decode_initializers`] uses.
const MAX_DECODE_THREADS: usize = 8;

/// Decodes every initializer ([`decode_tensor`]), results in order: on up to
/// [`MAX_DECODE_THREADS`] threads (`sinter_core::par::map`) when their raw data passes
/// [`PARALLEL_DECODE_BYTES`] (each tensor's copy is independent; GPT-2 small holds 124M f32
/// weights in 148 tensors), else on this one.
fn decode_initializers(ts: &[TensorProto], dir: Option<&Path>) -> Vec<Result<HostTensor, OnnxError>> {
    let raw: usize = ts.iter().map(|t| t.raw_data.as_ref().map_or(0, |r| r.len())).sum();
    let threads = if raw < PARALLEL_DECODE_BYTES { 1 } else { MAX_DECODE_THREADS };
    sinter_core::par::map(ts, threads, |t| decode_tensor(t, dir))
}

/// `proto` without its main graph's initializer data (decoded into [`Model`]'s initializers, and
/// not read from the proto again), re-encoded and decoded afresh so that nothing in it is a
/// slice of the buffer it was decoded from: that buffer (the model file, 531 MB for GPT-2 small)
/// is then freed when the load returns, instead of living as long as the model. What is left
/// (the nodes, small constants, subgraphs) is copied once.
fn without_initializer_data(mut proto: ModelProto) -> Result<ModelProto, OnnxError> {
    if let Some(g) = proto.graph.as_mut() {
        for t in &mut g.initializer {
            t.raw_data = None;
            t.float_data = Vec::new();
            t.int32_data = Vec::new();
            t.int64_data = Vec::new();
            t.double_data = Vec::new();
            t.uint64_data = Vec::new();
        }
    }
    let rest = proto.encode_to_vec();
    ModelProto::decode(rest.as_slice()).map_err(|e| OnnxError::Decode { what: "model".into(), error: e })
}

/// Loads a model from bytes. A model with external data needs [`Model::from_bytes`] with a folder.
pub fn load_bytes(bytes: &[u8]) -> Result<Model, OnnxError> {
    Model::from_bytes(bytes, None)
}

/// The shape a `TypeProto` declares; unknown dims get symbols named after the value and axis.
fn declared_shape(name: &str, t: &type_proto::Tensor) -> Option<Shape> {
    let s = t.shape.as_ref()?;
    let dims = s
        .dim
        .iter()
        .enumerate()
        .map(|(i, d)| {
            use crate::proto::tensor_shape_proto::dimension::Value;
            match &d.value {
                Some(Value::DimValue(v)) if *v >= 0 => Dim::Static(*v as usize),
                Some(Value::DimParam(p)) if !p.is_empty() => Dim::sym(p),
                _ => Dim::sym(&format!("{name}_d{i}")),
            }
        })
        .collect();
    Some(Shape(dims))
}

/// The [`IoInfo`] of a value-info entry.
pub(crate) fn io_info(vi: &ValueInfoProto) -> IoInfo {
    let name = vi.name.clone().unwrap_or_default();
    let (dtype, shape) = match vi.r#type.as_ref().and_then(|t: &TypeProto| t.value.as_ref()) {
        Some(type_proto::Value::TensorType(t)) => {
            let d = match t.elem_type {
                Some(c) if c != 0 => dtype_from_code(c),
                _ => Err("UNDEFINED".to_string()),
            };
            (d, declared_shape(&name, t))
        }
        Some(type_proto::Value::SequenceType(_)) => (Err("sequence".into()), None),
        Some(type_proto::Value::MapType(_)) => (Err("map".into()), None),
        Some(type_proto::Value::OptionalType(_)) => (Err("optional".into()), None),
        Some(type_proto::Value::SparseTensorType(_)) => (Err("sparse tensor".into()), None),
        Some(type_proto::Value::OpaqueType(_)) => (Err("opaque".into()), None),
        None => (Err("UNDEFINED".into()), None),
    };
    IoInfo { name, dtype, shape }
}

impl Model {
    /// Decodes a model; `dir` is the folder external data resolves against (`None` refuses it).
    pub fn from_bytes(bytes: &[u8], dir: Option<PathBuf>) -> Result<Model, OnnxError> {
        Self::decode(Bytes::copy_from_slice(bytes), dir)
    }

    /// [`Model::from_bytes`] on a shared buffer: initializers' raw data are slices of `bytes`
    /// while decoding, and each is copied once, into its tensor.
    fn decode(bytes: Bytes, dir: Option<PathBuf>) -> Result<Model, OnnxError> {
        if bytes.is_empty() {
            return Err(OnnxError::malformed("model", "empty (0 bytes): not an ONNX model"));
        }
        let len = bytes.len();
        let proto = ModelProto::decode(bytes).map_err(|e| OnnxError::Decode { what: "model".into(), error: e })?;
        if let Some(v) = proto.ir_version
            && !(0..=MAX_IR_VERSION).contains(&v)
        {
            return Err(OnnxError::Version { what: "IR version".into(), version: v, max: MAX_IR_VERSION });
        }
        let graph = proto.graph.as_ref().ok_or_else(|| {
            OnnxError::malformed("model", format!("no graph in {len} bytes: not an ONNX model (ModelProto)"))
        })?;
        let mut opsets = HashMap::new();
        for o in &proto.opset_import {
            let d = o.domain.clone().unwrap_or_default();
            let d = if d == "ai.onnx" { String::new() } else { d };
            let v = o.version.unwrap_or(1);
            if d.is_empty() && !(1..=MAX_OPSET).contains(&v) {
                return Err(OnnxError::Version { what: "ai.onnx opset".into(), version: v, max: MAX_OPSET });
            }
            opsets.insert(d, v);
        }
        // A model without an opset import predates opsets; treat it as opset 1.
        opsets.entry(String::new()).or_insert(1);
        let mut initializers = HashMap::new();
        if graph.initializer.iter().any(|t| t.name.as_deref().unwrap_or("").is_empty()) {
            return Err(OnnxError::malformed("initializer", "an initializer has no name"));
        }
        for (t, init) in graph.initializer.iter().zip(decode_initializers(&graph.initializer, dir.as_deref())) {
            let name = t.name.clone().unwrap_or_default();
            let init = match init {
                Ok(h) => Init::Tensor(Arc::new(h)),
                Err(OnnxError::Unsupported { op, .. }) => Init::Unsupported(op),
                Err(e) => return Err(e),
            };
            if initializers.insert(name.clone(), init).is_some() {
                return Err(OnnxError::malformed(format!("initializer {name:?}"), "defined twice"));
            }
        }
        for t in &graph.sparse_initializer {
            if let Some(name) = t.values.as_ref().and_then(|v| v.name.clone()) {
                initializers.insert(name, Init::Unsupported("sparse tensor".into()));
            }
        }
        let proto = without_initializer_data(proto)?;
        let graph =
            proto.graph.as_ref().ok_or_else(|| OnnxError::malformed("model", "the graph was lost re-encoding it"))?;
        let inputs: Vec<IoInfo> = graph
            .input
            .iter()
            .filter(|vi| !initializers.contains_key(vi.name.as_deref().unwrap_or("")))
            .map(io_info)
            .collect();
        let outputs: Vec<IoInfo> = graph.output.iter().map(io_info).collect();
        let mut seen = std::collections::HashSet::new();
        for i in &inputs {
            if i.name.is_empty() {
                return Err(OnnxError::malformed("graph inputs", "an input has no name"));
            }
            if !seen.insert(i.name.as_str()) {
                return Err(OnnxError::malformed(format!("input {:?}", i.name), "declared twice"));
            }
        }
        Ok(Model { proto, dir, opsets, initializers, inputs, outputs })
    }

    /// The main graph (always present after loading).
    pub(crate) fn graph_proto(&self) -> &GraphProto {
        self.proto.graph.as_ref().expect("checked at load")
    }

    /// The run-time inputs (graph inputs that are not initializers), in order.
    pub fn inputs(&self) -> &[IoInfo] {
        &self.inputs
    }

    /// The graph outputs, in order.
    pub fn outputs(&self) -> &[IoInfo] {
        &self.outputs
    }

    /// The version of the default (`ai.onnx`) opset the model imports.
    pub fn opset(&self) -> i64 {
        self.opsets.get("").copied().unwrap_or(1)
    }

    /// The imported opsets, domain (`""` for `ai.onnx`) to version.
    pub fn opsets(&self) -> &HashMap<String, i64> {
        &self.opsets
    }

    /// The producer recorded in the model (e.g. `pytorch 2.1`).
    pub fn producer(&self) -> String {
        format!(
            "{} {}",
            self.proto.producer_name.as_deref().unwrap_or(""),
            self.proto.producer_version.as_deref().unwrap_or("")
        )
        .trim()
        .to_string()
    }

    /// The op types the main graph uses, sorted and unique (domain-qualified outside `ai.onnx`).
    pub fn op_types(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .graph_proto()
            .node
            .iter()
            .map(|n| {
                let op = n.op_type.clone().unwrap_or_default();
                match n.domain.as_deref() {
                    None | Some("") | Some("ai.onnx") => op,
                    Some(d) => format!("{d}.{op}"),
                }
            })
            .collect();
        v.sort();
        v.dedup();
        v
    }

    /// The graph with the shapes the model declares: named dims stay symbolic, so ops that need
    /// static shapes (or values computed from shapes) fail with an error naming the node; use
    /// [`Model::graph_for`] to specialize.
    pub fn graph(&self) -> Result<IrGraph, OnnxError> {
        let specs = self
            .inputs
            .iter()
            .map(|i| {
                let d = i.dtype.clone().map_err(|t| input_unsupported(i, &t))?;
                let s = i.shape.clone().ok_or_else(|| {
                    OnnxError::Inputs(format!("input {:?} has no declared shape; use graph_for", i.name))
                })?;
                let dims: Vec<usize> = s.dims().iter().filter_map(sinter_core::Dim::as_static).collect();
                crate::import::check_dims(&dims).map_err(|m| OnnxError::Inputs(format!("input {:?}: {m}", i.name)))?;
                Ok(crate::import::InputSpec { dtype: d, shape: s, value: None })
            })
            .collect::<Result<Vec<_>, OnnxError>>()?;
        crate::import::import(self, specs)
    }

    /// Input shapes for probing the model without data: each declared input's shape with every
    /// unknown dimension set to `unknown` and every dimension capped at `cap` (an input without a
    /// declared shape is a scalar). The fuzzer and the robustness tests import with these.
    pub fn probe_shapes(&self, unknown: usize, cap: usize) -> Vec<Vec<usize>> {
        self.inputs()
            .iter()
            .map(|i| match &i.shape {
                Some(s) => s.dims().iter().map(|d| d.as_static().unwrap_or(unknown).min(cap)).collect(),
                None => vec![],
            })
            .collect()
    }

    /// The graph specialized to static input shapes (one per run-time input, in order). Shape
    /// arithmetic (Shape/Gather/Concat/Reshape chains) folds to constants, so exported graphs
    /// with dynamic reshapes come out static. Ops whose output *shape* depends on an input's
    /// *values* (a Reshape whose target shape is a graph input, Range, Tile...) need
    /// [`Model::graph_for_inputs`].
    pub fn graph_for(&self, shapes: &[Vec<usize>]) -> Result<IrGraph, OnnxError> {
        let specs = self.specs(shapes.len(), |i| (None, shapes[i].clone()), None)?;
        crate::import::import(self, specs)
    }

    /// The graph specialized to these input tensors (one per run-time input, in order).
    ///
    /// Beyond [`Model::graph_for`], this treats the *values* of inputs as known at import time
    /// where an op needs a value to fix a shape (a Reshape/Expand/Tile target shape, Slice or Pad
    /// amounts, Range bounds, reduction axes given as inputs, Resize sizes...). Only those inputs
    /// (and whatever is computed from them on the way to such a use) are read; every other input
    /// stays a run-time input. The graph is therefore valid only for inputs whose shape-fixing
    /// values equal the ones given here; all inputs, used or not, remain graph inputs in order.
    pub fn graph_for_inputs(&self, inputs: &[HostTensor]) -> Result<IrGraph, OnnxError> {
        let specs = self.specs(inputs.len(), |i| (Some(inputs[i].clone()), inputs[i].shape.clone()), Some(inputs))?;
        crate::import::import(self, specs)
    }

    fn specs(
        &self,
        n: usize,
        get: impl Fn(usize) -> (Option<HostTensor>, Vec<usize>),
        tensors: Option<&[HostTensor]>,
    ) -> Result<Vec<crate::import::InputSpec>, OnnxError> {
        if n != self.inputs.len() {
            return Err(OnnxError::Inputs(format!(
                "the model takes {} input(s) ({}), got {n}",
                self.inputs.len(),
                self.inputs.iter().map(|i| i.name.as_str()).collect::<Vec<_>>().join(", ")
            )));
        }
        let mut specs = Vec::new();
        for (i, info) in self.inputs.iter().enumerate() {
            let (value, shape) = get(i);
            let dtype = match (&info.dtype, tensors) {
                (Ok(d), Some(ts)) if ts[i].dtype() != *d => {
                    return Err(OnnxError::Inputs(format!(
                        "input {:?} is {d} but a {} tensor was given",
                        info.name,
                        ts[i].dtype()
                    )));
                }
                (Ok(d), _) => *d,
                (Err(t), _) => return Err(input_unsupported(info, t)),
            };
            crate::import::check_dims(&shape).map_err(|m| OnnxError::Inputs(format!("input {:?}: {m}", info.name)))?;
            if let Some(decl) = &info.shape {
                let ok = decl.rank() == shape.len()
                    && decl.dims().iter().zip(&shape).all(|(d, &s)| d.as_static().is_none_or(|x| x == s));
                if !ok {
                    return Err(OnnxError::Inputs(format!(
                        "input {:?} is declared {decl} but shape {shape:?} was given",
                        info.name
                    )));
                }
            }
            specs.push(crate::import::InputSpec { dtype, shape: Shape::new(&shape), value });
        }
        Ok(specs)
    }
}

fn input_unsupported(i: &IoInfo, t: &str) -> OnnxError {
    OnnxError::Unsupported {
        node: format!("input {:?}", i.name),
        op: t.to_string(),
        detail: format!("input of type {t} has no sinter equivalent"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::{code, tensor_to_proto};

    /// Past the parallel threshold, every initializer decodes as alone, in order, errors included.
    #[test]
    fn initializers_decode_in_parallel_as_alone() {
        let big = |n: usize, seed: u64| HostTensor::random(DType::F32, vec![n], seed, -1.0, 1.0);
        let mut ts: Vec<TensorProto> = [(3 << 20, 1), (1 << 20, 2), (5 << 20, 3), (7, 4)]
            .iter()
            .enumerate()
            .map(|(i, &(n, seed))| tensor_to_proto(&big(n, seed), &format!("w{i}")))
            .collect();
        ts.push(TensorProto {
            name: Some("ids".into()),
            dims: vec![3],
            data_type: Some(code::INT64),
            int64_data: vec![1, -2, 3],
            ..Default::default()
        });
        ts.push(TensorProto {
            name: Some("short".into()),
            dims: vec![4],
            data_type: Some(code::FLOAT),
            raw_data: Some(vec![0u8; 12].into()),
            ..Default::default()
        });
        let raw: usize = ts.iter().map(|t| t.raw_data.as_ref().map_or(0, |r| r.len())).sum();
        assert!(raw > PARALLEL_DECODE_BYTES, "the test must take the parallel path");
        let got = decode_initializers(&ts, None);
        assert_eq!(got.len(), ts.len());
        for (t, g) in ts.iter().zip(&got) {
            match (decode_tensor(t, None), g) {
                (Ok(want), Ok(g)) => assert!(want == *g, "{:?}", t.name),
                (Err(want), Err(g)) => assert_eq!(want.to_string(), g.to_string()),
                (want, g) => panic!("{:?}: alone {want:?}, in parallel {g:?}", t.name),
            }
        }
        assert!(got[5].as_ref().is_err_and(|e| e.to_string().contains("needs 16 bytes of raw data, got 12")));
    }

    /// A loaded model keeps no slice of the buffer it was decoded from (so the file's bytes are
    /// freed after the load), and its initializers and constants are intact.
    #[test]
    fn a_loaded_model_holds_no_slice_of_its_file() {
        use crate::proto::{AttributeProto, GraphProto, NodeProto, OperatorSetIdProto, ValueInfoProto};
        let w = HostTensor::random(DType::F32, vec![64, 64], 1, -1.0, 1.0);
        let k = HostTensor::random(DType::F32, vec![64], 2, -1.0, 1.0);
        let value = AttributeProto {
            name: Some("value".into()),
            r#type: Some(4), // TENSOR
            t: Some(tensor_to_proto(&k, "k")),
            ..Default::default()
        };
        let node = |op: &str, ins: &[&str], out: &str, attribute: Vec<AttributeProto>| NodeProto {
            op_type: Some(op.into()),
            input: ins.iter().map(|s| s.to_string()).collect(),
            output: vec![out.into()],
            attribute,
            ..Default::default()
        };
        let io = |name: &str| ValueInfoProto { name: Some(name.into()), ..Default::default() };
        let model = ModelProto {
            ir_version: Some(8),
            opset_import: vec![OperatorSetIdProto { domain: Some(String::new()), version: Some(17) }],
            graph: Some(GraphProto {
                node: vec![node("Constant", &[], "k", vec![value]), node("MatMul", &["x", "w"], "y", vec![])],
                initializer: vec![tensor_to_proto(&w, "w")],
                input: vec![io("x")],
                output: vec![io("y")],
                ..Default::default()
            }),
            ..Default::default()
        };
        let file = Bytes::from(model.encode_to_vec());
        let range = file.as_ptr() as usize..file.as_ptr() as usize + file.len();
        let m = Model::decode(file.clone(), None).unwrap();
        let g = m.graph_proto();
        let raw =
            g.initializer.iter().chain(g.node.iter().flat_map(|n| n.attribute.iter().filter_map(|a| a.t.as_ref())));
        for t in raw {
            if let Some(r) = &t.raw_data {
                assert!(!range.contains(&(r.as_ptr() as usize)), "{:?} is a slice of the file", t.name);
            }
        }
        assert!(g.initializer[0].raw_data.is_none() && g.initializer[0].name.as_deref() == Some("w"));
        let kept = g.node[0].attribute[0].t.as_ref().and_then(|t| t.raw_data.clone()).unwrap();
        assert_eq!(&kept[..], &k.to_le_bytes()[..]);
        match m.initializers.get("w") {
            Some(Init::Tensor(t)) => assert!(**t == w),
            _ => panic!("the initializer w was not decoded"),
        }
    }
}
