//! Importer tests: tensor decoding (raw data, typed fields, external data and path escapes),
//! malformed input, unsupported ops, and small models built with the prost structs and run on the
//! CPU reference.

use prost::Message;
use sinter_core::{DType, Dim, HostTensor, Op};
use sinter_onnx::OnnxError;
use sinter_onnx::conformance::{self, Options, Status};
use sinter_onnx::proto::{ModelProto, NodeProto, StringStringEntryProto, TensorProto};
use std::path::Path;
use std::sync::Arc;

mod common;
use common::*;

// ---- tensor decoding ----

#[test]
fn decodes_raw_data() {
    let v = [1.5f32, -2.0, 3.25, 0.0, 7.0, -1.0];
    let raw: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    let t = TensorProto { dims: vec![2, 3], data_type: Some(F32), raw_data: Some(raw.into()), ..Default::default() };
    let h = sinter_onnx::decode_tensor(&t, None).unwrap();
    assert_eq!(h, HostTensor::f32([2, 3], v.to_vec()).unwrap());
    // Round trip through the writer and the .pb reader.
    let pb = sinter_onnx::tensor_to_proto(&h, "x").encode_to_vec();
    assert_eq!(sinter_onnx::tensor_from_pb(&pb).unwrap(), h);
}

#[test]
fn decodes_typed_fields() {
    let t = i64_init("a", &[1, -2, 3]);
    assert_eq!(sinter_onnx::decode_tensor(&t, None).unwrap(), HostTensor::from_i64(DType::I64, vec![3], &[1, -2, 3]));
    // f16 travels as bit patterns in int32_data.
    let bits: Vec<i32> = [1.0f32, -0.5].iter().map(|&x| half::f16::from_f32(x).to_bits() as i32).collect();
    let t = TensorProto { dims: vec![2], data_type: Some(10), int32_data: bits, ..Default::default() };
    assert_eq!(sinter_onnx::decode_tensor(&t, None).unwrap().to_f64_vec(), vec![1.0, -0.5]);
    let t = TensorProto { dims: vec![3], data_type: Some(9), int32_data: vec![1, 0, 1], ..Default::default() };
    assert_eq!(sinter_onnx::decode_tensor(&t, None).unwrap(), HostTensor::from_i64(DType::Bool, vec![3], &[1, 0, 1]));
    let t =
        TensorProto { dims: vec![2], data_type: Some(12), uint64_data: vec![7, 4_000_000_000], ..Default::default() };
    assert_eq!(sinter_onnx::decode_tensor(&t, None).unwrap().to_i64_vec(), vec![7, 4_000_000_000]);
    let t = TensorProto { dims: vec![], data_type: Some(11), double_data: vec![0.125], ..Default::default() };
    assert_eq!(sinter_onnx::decode_tensor(&t, None).unwrap(), HostTensor::scalar(DType::F64, 0.125));
}

#[test]
fn size_mismatches_are_errors() {
    let t = TensorProto {
        dims: vec![2, 3],
        data_type: Some(F32),
        raw_data: Some(vec![0; 20].into()),
        ..Default::default()
    };
    assert!(matches!(sinter_onnx::decode_tensor(&t, None), Err(OnnxError::Malformed { .. })));
    let t = f32_init("x", &[4], &[1.0, 2.0]);
    assert!(matches!(sinter_onnx::decode_tensor(&t, None), Err(OnnxError::Malformed { .. })));
    let t = f32_init("x", &[-1], &[]);
    assert!(matches!(sinter_onnx::decode_tensor(&t, None), Err(OnnxError::Malformed { .. })));
    // An absurd declared size is refused before anything is allocated.
    let t = TensorProto {
        dims: vec![1 << 40, 1 << 20],
        data_type: Some(F32),
        raw_data: Some(vec![].into()),
        ..Default::default()
    };
    assert!(matches!(sinter_onnx::decode_tensor(&t, None), Err(OnnxError::TooLarge { .. })));
    let t = TensorProto { dims: vec![i64::MAX, i64::MAX], data_type: Some(F32), ..Default::default() };
    assert!(matches!(sinter_onnx::decode_tensor(&t, None), Err(OnnxError::TooLarge { .. })));
    // Found by the fuzzer: a zero extent must not hide huge others (their product overflows).
    let t = TensorProto { dims: vec![1 << 62, 1 << 62, 0], data_type: Some(F32), ..Default::default() };
    assert!(matches!(sinter_onnx::decode_tensor(&t, None), Err(OnnxError::TooLarge { .. })));
}

#[test]
fn unsupported_dtype_is_named() {
    let t = TensorProto { dims: vec![1], data_type: Some(8), string_data: vec![b"a".to_vec()], ..Default::default() };
    match sinter_onnx::decode_tensor(&t, None) {
        Err(OnnxError::Unsupported { op, .. }) => assert_eq!(op, "STRING"),
        other => panic!("expected unsupported, got {other:?}"),
    }
}

fn external(name: &str, location: &str, offset: Option<u64>, length: Option<u64>, dims: &[i64]) -> TensorProto {
    let mut kv = vec![StringStringEntryProto { key: Some("location".into()), value: Some(location.into()) }];
    if let Some(o) = offset {
        kv.push(StringStringEntryProto { key: Some("offset".into()), value: Some(o.to_string()) });
    }
    if let Some(l) = length {
        kv.push(StringStringEntryProto { key: Some("length".into()), value: Some(l.to_string()) });
    }
    TensorProto {
        name: Some(name.into()),
        dims: dims.to_vec(),
        data_type: Some(F32),
        external_data: kv,
        data_location: Some(1),
        ..Default::default()
    }
}

/// Writes a model whose weight `w` lives in external data, adds it to `x`, and loads it.
fn load_with_external(dir: &Path, w: TensorProto) -> Result<sinter_onnx::Model, OnnxError> {
    let m = model(
        vec![node("Add", &["x", "w"], &["y"], vec![])],
        vec![vi("x", F32, &fixed(&[4]))],
        vec![vi("y", F32, &fixed(&[4]))],
        vec![w],
    );
    let p = dir.join("model.onnx");
    std::fs::write(&p, bytes(&m)).unwrap();
    sinter_onnx::load(&p)
}

#[test]
fn external_data_reads_within_the_folder() {
    let dir = temp_dir("ext");
    let vals = [1.0f32, 2.0, 3.0, 4.0];
    let mut data = vec![0xAAu8; 8];
    data.extend(vals.iter().flat_map(|x| x.to_le_bytes()));
    std::fs::create_dir_all(dir.join("weights")).unwrap();
    std::fs::write(dir.join("weights/w.bin"), &data).unwrap();
    let m = load_with_external(&dir, external("w", "weights/w.bin", Some(8), Some(16), &[4])).unwrap();
    let g = m.graph_for(&[vec![4]]).unwrap();
    let x = HostTensor::f32([4], vec![10.0, 20.0, 30.0, 40.0]).unwrap();
    assert_eq!(run_cpu(&g, &[x])[0].to_f64_vec(), vec![11.0, 22.0, 33.0, 44.0]);
    // A declared length that does not match the tensor, or data past the end of the file.
    assert!(matches!(
        load_with_external(&dir, external("w", "weights/w.bin", Some(8), Some(12), &[4])),
        Err(OnnxError::Malformed { .. })
    ));
    assert!(matches!(
        load_with_external(&dir, external("w", "weights/w.bin", Some(16), None, &[4])),
        Err(OnnxError::Malformed { .. })
    ));
    // A model loaded from bytes has no folder to resolve external data against.
    let m = model(vec![], vec![], vec![], vec![external("w", "weights/w.bin", None, None, &[4])]);
    assert!(sinter_onnx::load_bytes(&bytes(&m)).is_err());
}

#[test]
fn external_data_cannot_leave_the_folder() {
    let dir = temp_dir("escape");
    let outside = dir.join("outside.bin");
    std::fs::write(&outside, [0u8; 16]).unwrap();
    let inner = dir.join("model");
    std::fs::create_dir_all(&inner).unwrap();
    let abs = outside.to_string_lossy().into_owned();
    for loc in [abs.as_str(), "../outside.bin", "sub/../../outside.bin", "..\\outside.bin"] {
        match load_with_external(&inner, external("w", loc, None, None, &[4])) {
            Err(OnnxError::UnsafePath { location, .. }) => assert_eq!(location, loc),
            other => panic!("{loc}: expected a refused path, got {other:?}"),
        }
    }
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(&outside, inner.join("link.bin")).unwrap();
        match load_with_external(&inner, external("w", "link.bin", None, None, &[4])) {
            Err(OnnxError::UnsafePath { reason, .. }) => assert!(reason.contains("outside"), "{reason}"),
            other => panic!("symlink: expected a refused path, got {other:?}"),
        }
        std::os::unix::fs::symlink(&dir, inner.join("up")).unwrap();
        assert!(matches!(
            load_with_external(&inner, external("w", "up/outside.bin", None, None, &[4])),
            Err(OnnxError::UnsafePath { .. })
        ));
    }
}

// ---- malformed input ----

#[test]
fn malformed_protobuf_is_an_error() {
    assert!(matches!(sinter_onnx::load_bytes(&[0xFF, 0xFF, 0xFF, 0xFF, 0x0F]), Err(OnnxError::Decode { .. })));
    assert!(matches!(sinter_onnx::tensor_from_pb(&[0x0A, 0x80]), Err(OnnxError::Decode { .. })));
    let m = add_relu_model();
    let b = bytes(&m);
    // Every truncation either fails cleanly or yields a model that imports or fails cleanly.
    for n in 0..b.len() {
        if let Ok(m) = sinter_onnx::load_bytes(&b[..n]) {
            let _ = m.graph_for(&[vec![2, 3], vec![3]]);
        }
    }
    // A model without a graph.
    assert!(matches!(sinter_onnx::load_bytes(&bytes(&ModelProto::default())), Err(OnnxError::Malformed { .. })));
}

#[test]
fn errors_name_the_node() {
    let m = model(
        vec![node("FancyOp", &["x"], &["y"], vec![])],
        vec![vi("x", F32, &fixed(&[2]))],
        vec![vi("y", F32, &fixed(&[2]))],
        vec![],
    );
    match sinter_onnx::load_bytes(&bytes(&m)).unwrap().graph_for(&[vec![2]]) {
        Err(e @ OnnxError::Unsupported { .. }) => {
            assert_eq!(e.unsupported_op(), Some("FancyOp"));
            assert!(e.to_string().contains("\"y\""), "{e}");
        }
        other => panic!("expected unsupported, got {other:?}"),
    }
    // A missing initializer.
    let m = model(
        vec![NodeProto { name: Some("add1".into()), ..node("Add", &["x", "w"], &["y"], vec![]) }],
        vec![vi("x", F32, &fixed(&[2]))],
        vec![vi("y", F32, &fixed(&[2]))],
        vec![],
    );
    let e = sinter_onnx::load_bytes(&bytes(&m)).unwrap().graph_for(&[vec![2]]).unwrap_err();
    assert!(matches!(&e, OnnxError::Node { node, op, .. } if node.contains("add1") && op == "Add"), "{e}");
    // Wrong input count for the op, and a shape clash.
    let m = model(
        vec![node("Add", &["x"], &["y"], vec![])],
        vec![vi("x", F32, &fixed(&[2]))],
        vec![vi("y", F32, &fixed(&[2]))],
        vec![],
    );
    assert!(matches!(sinter_onnx::load_bytes(&bytes(&m)).unwrap().graph_for(&[vec![2]]), Err(OnnxError::Node { .. })));
    let m = model(
        vec![node("Add", &["x", "w"], &["y"], vec![])],
        vec![vi("x", F32, &fixed(&[2]))],
        vec![vi("y", F32, &fixed(&[2]))],
        vec![f32_init("w", &[3], &[1.0, 2.0, 3.0])],
    );
    let e = sinter_onnx::load_bytes(&bytes(&m)).unwrap().graph_for(&[vec![2]]).unwrap_err();
    assert!(matches!(&e, OnnxError::Node { op, .. } if op == "Add"), "{e}");
}

#[test]
fn wrong_run_time_inputs_are_errors() {
    let m = sinter_onnx::load_bytes(&bytes(&add_relu_model())).unwrap();
    assert!(matches!(m.graph_for(&[vec![2, 3]]), Err(OnnxError::Inputs(_))));
    assert!(matches!(m.graph_for(&[vec![2, 4], vec![4]]), Err(OnnxError::Inputs(_))));
    let x = HostTensor::from_i64(DType::I64, vec![2, 3], &[0; 6]);
    let b = HostTensor::f32([3], vec![0.0; 3]).unwrap();
    assert!(matches!(m.graph_for_inputs(&[x, b]), Err(OnnxError::Inputs(_))));
}

// ---- importing and running ----

fn add_relu_model() -> ModelProto {
    model(
        vec![node("Add", &["x", "b"], &["s"], vec![]), node("Relu", &["s"], &["y"], vec![])],
        vec![vi("x", F32, &[None, Some(3)]), vi("b", F32, &fixed(&[3]))],
        vec![vi("y", F32, &[None, Some(3)])],
        vec![],
    )
}

#[test]
fn add_relu_symbolic_and_specialized() {
    let m = sinter_onnx::load_bytes(&bytes(&add_relu_model())).unwrap();
    assert_eq!(m.inputs().len(), 2);
    let g = m.graph().unwrap();
    assert_eq!(g.ty(g.inputs[0]).shape.0[0], Dim::sym("d0"));
    // Origins carry the ONNX op type.
    assert!(g.nodes.iter().any(|n| &*n.origin.op == "relu"));
    let x = HostTensor::f32([2, 3], vec![-1.0, 2.0, -3.0, 4.0, -5.0, 6.0]).unwrap();
    let b = HostTensor::f32([3], vec![1.0, 1.0, 1.0]).unwrap();
    assert_eq!(run_cpu(&g, &[x.clone(), b.clone()])[0].to_f64_vec(), vec![0.0, 3.0, 0.0, 5.0, 0.0, 7.0]);
    let gs = m.graph_for(&[vec![2, 3], vec![3]]).unwrap();
    assert_eq!(run_cpu(&gs, &[x, b])[0].to_f64_vec(), vec![0.0, 3.0, 0.0, 5.0, 0.0, 7.0]);
}

#[test]
fn shape_arithmetic_folds_to_a_static_reshape() {
    // y = Reshape(x, Concat(Gather(Shape(x), 0), [-1])): the transformer-style dynamic reshape.
    let m = model(
        vec![
            node("Shape", &["x"], &["s"], vec![]),
            node("Gather", &["s", "zero"], &["n"], vec![attr_i("axis", 0)]),
            node("Unsqueeze", &["n", "axes"], &["n1"], vec![]),
            node("Concat", &["n1", "minus1"], &["shape"], vec![attr_i("axis", 0)]),
            node("Reshape", &["x", "shape"], &["y"], vec![]),
        ],
        vec![vi("x", F32, &[None, Some(2), Some(3)])],
        vec![vi("y", F32, &[None, None])],
        vec![
            TensorProto { name: Some("zero".into()), data_type: Some(I64), int64_data: vec![0], ..Default::default() },
            i64_init("axes", &[0]),
            i64_init("minus1", &[-1]),
        ],
    );
    let m = sinter_onnx::load_bytes(&bytes(&m)).unwrap();
    // Symbolic: the shape value [d0, 2, 3] is tracked symbolically and the -1 becomes 6.
    let gs = m.graph().unwrap();
    assert_eq!(gs.ty(gs.outputs[0].node).shape.0, vec![Dim::sym("d0"), Dim::Static(6)]);
    let g = m.graph_for(&[vec![4, 2, 3]]).unwrap();
    let out = g.outputs[0].node;
    assert_eq!(g.ty(out).shape.as_static(), Some(vec![4, 6]));
    // Everything folded: input, reshape, nothing else.
    assert_eq!(g.nodes.len(), 2, "{:?}", g.nodes.iter().map(|n| n.op.name()).collect::<Vec<_>>());
    assert!(matches!(g.node(out).op, Op::Reshape(_)));
}

#[test]
fn value_inputs_fold_with_graph_for_inputs() {
    // Reshape whose target shape is a run-time input (as in the ONNX node tests).
    let m = model(
        vec![node("Reshape", &["x", "shape"], &["y"], vec![])],
        vec![vi("x", F32, &fixed(&[2, 3])), vi("shape", I64, &fixed(&[2]))],
        vec![vi("y", F32, &[None, None])],
        vec![],
    );
    let m = sinter_onnx::load_bytes(&bytes(&m)).unwrap();
    assert!(matches!(m.graph_for(&[vec![2, 3], vec![2]]), Err(OnnxError::Unsupported { .. })));
    let x = HostTensor::f32([2, 3], (0..6).map(|v| v as f32).collect()).unwrap();
    let s = HostTensor::from_i64(DType::I64, vec![2], &[3, -1]);
    let g = m.graph_for_inputs(&[x.clone(), s.clone()]).unwrap();
    assert_eq!(g.inputs.len(), 2, "every input stays a graph input");
    let y = run_cpu(&g, &[x, s]);
    assert_eq!(y[0].shape, vec![3, 2]);
}

#[test]
fn conv_and_pool_import() {
    let w: Vec<f32> = (0..18).map(|v| v as f32 * 0.1).collect();
    let m = model(
        vec![
            node("Conv", &["x", "w"], &["c"], vec![attr_ints("pads", &[1, 1, 1, 1]), attr_ints("strides", &[1, 1])]),
            node("MaxPool", &["c"], &["y"], vec![attr_ints("kernel_shape", &[2, 2]), attr_ints("strides", &[2, 2])]),
        ],
        vec![vi("x", F32, &fixed(&[1, 2, 4, 4]))],
        vec![vi("y", F32, &fixed(&[1, 1, 2, 2]))],
        vec![f32_init("w", &[1, 2, 3, 3], &w)],
    );
    let m = sinter_onnx::load_bytes(&bytes(&m)).unwrap();
    let g = m.graph_for(&[vec![1, 2, 4, 4]]).unwrap();
    assert!(g.nodes.iter().any(|n| matches!(n.op, Op::Conv2d { .. })));
    let x = HostTensor::f32([1, 2, 4, 4], vec![1.0; 32]).unwrap();
    let y = run_cpu(&g, &[x]);
    assert_eq!(y[0].shape, vec![1, 1, 2, 2]);
    // Every window of the max pool sees an interior position: the full 3x3x2 weight sum.
    let full: f64 = w.iter().map(|&v| v as f64).sum();
    for v in y[0].to_f64_vec() {
        assert!((v - full).abs() < 1e-4, "{v} vs {full}");
    }
}

// ---- the conformance runner ----

fn write_case(root: &Path, name: &str, m: &ModelProto, inputs: &[HostTensor], outputs: &[HostTensor]) {
    let d = root.join(name);
    std::fs::create_dir_all(d.join("test_data_set_0")).unwrap();
    std::fs::write(d.join("model.onnx"), bytes(m)).unwrap();
    for (i, t) in inputs.iter().enumerate() {
        let p = d.join(format!("test_data_set_0/input_{i}.pb"));
        std::fs::write(p, sinter_onnx::tensor_to_proto(t, "").encode_to_vec()).unwrap();
    }
    for (i, t) in outputs.iter().enumerate() {
        let p = d.join(format!("test_data_set_0/output_{i}.pb"));
        std::fs::write(p, sinter_onnx::tensor_to_proto(t, "").encode_to_vec()).unwrap();
    }
}

#[test]
fn conformance_runner_classifies_cases() {
    let root = temp_dir("suite").join("node");
    let x = HostTensor::f32([2, 3], vec![-1.0, 2.0, -3.0, 4.0, -5.0, 6.0]).unwrap();
    let b = HostTensor::f32([3], vec![1.0, 1.0, 1.0]).unwrap();
    let good = HostTensor::f32([2, 3], vec![0.0, 3.0, 0.0, 5.0, 0.0, 7.0]).unwrap();
    let bad = HostTensor::f32([2, 3], vec![0.0, 3.0, 0.0, 5.0, 0.0, 7.5]).unwrap();
    write_case(&root, "test_pass", &add_relu_model(), &[x.clone(), b.clone()], &[good]);
    write_case(&root, "test_fail", &add_relu_model(), &[x.clone(), b.clone()], &[bad]);
    let unk = model(
        vec![node("FancyOp", &["x"], &["y"], vec![])],
        vec![vi("x", F32, &fixed(&[2, 3]))],
        vec![vi("y", F32, &fixed(&[2, 3]))],
        vec![],
    );
    write_case(&root, "test_unsupported", &unk, std::slice::from_ref(&x), std::slice::from_ref(&x));
    std::fs::create_dir_all(root.join("test_corrupt/test_data_set_0")).unwrap();
    std::fs::write(root.join("test_corrupt/model.onnx"), b"\x08\x07\x12\xff\xff").unwrap();
    let backend: conformance::Backend = Arc::new(sinter_core::cpu::run);
    let r = conformance::run(&root, backend.clone(), &Options::default()).unwrap();
    let status = |n: &str| r.cases.iter().find(|c| c.name == n).unwrap().status;
    assert_eq!(status("test_pass"), Status::Pass);
    assert_eq!(status("test_fail"), Status::Fail);
    assert_eq!(status("test_unsupported"), Status::Unsupported);
    assert_eq!(status("test_corrupt"), Status::Error);
    assert_eq!(r.summary.total, 4);
    assert_eq!(r.kinds["node"].passed, 1);
    let c = r.cases.iter().find(|c| c.name == "test_unsupported").unwrap();
    assert_eq!(c.unsupported_op.as_deref(), Some("FancyOp"));
    let json: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
    assert_eq!(json["summary"]["passed"], 1);
    assert_eq!(json["cases"].as_array().unwrap().len(), 4);
    // A hanging backend times out instead of blocking the run.
    let slow: conformance::Backend = Arc::new(|_, _| {
        std::thread::sleep(std::time::Duration::from_secs(30));
        Err(sinter_core::Error::Unsupported("never".into()))
    });
    let opts = Options {
        filter: Some("test_pass".into()),
        timeout: std::time::Duration::from_millis(200),
        ..Options::default()
    };
    let r = conformance::run(&root, slow, &opts).unwrap();
    assert_eq!(r.cases[0].status, Status::Timeout);
    // A panicking backend is an error, not a crash.
    let boom: conformance::Backend = Arc::new(|_, _| panic!("backend bug"));
    let opts = Options { filter: Some("test_pass".into()), ..Options::default() };
    let r = conformance::run(&root, boom, &opts).unwrap();
    assert_eq!(r.cases[0].status, Status::Error);
    assert!(r.cases[0].detail.as_deref().unwrap_or("").contains("backend bug"));
}

// ---- robustness ----

#[test]
fn absurd_shapes_are_errors() {
    // A declared input shape whose element count overflows.
    let m = model(
        vec![node("Reshape", &["x", "s"], &["y"], vec![])],
        vec![vi("x", F32, &fixed(&[1 << 40, 1 << 40])), vi("s", I64, &fixed(&[1]))],
        vec![vi("y", F32, &[None])],
        vec![],
    );
    let m = sinter_onnx::load_bytes(&bytes(&m)).unwrap();
    assert!(matches!(m.graph(), Err(OnnxError::Inputs(_))));
    // A reshape target that overflows.
    let m = model(
        vec![node("Reshape", &["x", "s"], &["y"], vec![])],
        vec![vi("x", F32, &fixed(&[2, 3]))],
        vec![vi("y", F32, &[None, None, None])],
        vec![i64_init("s", &[1 << 40, 1 << 40, 1 << 40])],
    );
    let m = sinter_onnx::load_bytes(&bytes(&m)).unwrap();
    assert!(m.graph_for(&[vec![2, 3]]).is_err());
    // Found by the fuzzer: a loss whose target has the wrong rank.
    let m = model(
        vec![node("NegativeLogLikelihoodLoss", &["x", "t"], &["y"], vec![])],
        vec![vi("x", F32, &fixed(&[2, 3])), vi("t", I64, &fixed(&[]))],
        vec![vi("y", F32, &fixed(&[]))],
        vec![],
    );
    let m = sinter_onnx::load_bytes(&bytes(&m)).unwrap();
    assert!(matches!(m.graph_for(&[vec![2, 3], vec![]]), Err(OnnxError::Node { .. })));
}

/// A bounded fuzz run in the test suite: random byte mutations of valid models must load,
/// import or fail cleanly, never panic (`cargo +nightly fuzz run import` goes further).
#[test]
fn mutated_models_never_panic() {
    let conv = model(
        vec![
            node("Conv", &["x", "w"], &["c"], vec![attr_ints("pads", &[1, 1, 1, 1])]),
            node("Shape", &["c"], &["s"], vec![]),
            node("Reshape", &["c", "flat"], &["r"], vec![]),
            node("Softmax", &["r"], &["y"], vec![attr_i("axis", -1)]),
        ],
        vec![vi("x", F32, &fixed(&[1, 2, 4, 4]))],
        vec![vi("y", F32, &[None, None])],
        vec![f32_init("w", &[1, 2, 3, 3], &[0.5; 18]), i64_init("flat", &[1, -1])],
    );
    let seeds = [bytes(&add_relu_model()), bytes(&conv)];
    let mut rng = sinter_core::tensor::SplitMix64::new(7);
    let mut ran = 0;
    for round in 0..3000 {
        let mut b = seeds[round % seeds.len()].clone();
        let edits = 1 + (rng.next_u64() % 3) as usize;
        for _ in 0..edits {
            let i = (rng.next_u64() as usize) % b.len();
            match rng.next_u64() % 8 {
                0 => b.truncate(i.max(1)),
                1 => b.insert(i, rng.next_u64() as u8),
                2..=4 => b[i] ^= 1 << (rng.next_u64() % 8),
                _ => b[i] = rng.next_u64() as u8,
            }
        }
        if let Ok(m) = sinter_onnx::load_bytes(&b) {
            let _ = m.graph();
            let shapes = m.probe_shapes(2, 8);
            let _ = m.graph_for(&shapes);
            ran += 1;
        }
    }
    assert!(ran > 300, "only {ran} mutants decoded");
}

/// Inputs the fuzzer once crashed on (`fuzz/regressions/`) import cleanly now.
#[test]
fn fuzz_regressions_stay_fixed() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/regressions");
    for e in std::fs::read_dir(&dir).unwrap() {
        let b = std::fs::read(e.unwrap().path()).unwrap();
        if let Ok(m) = sinter_onnx::load_bytes(&b) {
            let shapes = m.probe_shapes(2, 8);
            // The importer's panic safety net must not be what handles them.
            for r in [m.graph(), m.graph_for(&shapes)] {
                if let Err(e) = r {
                    assert!(!e.to_string().contains("internal importer error"), "{e}");
                }
            }
        }
        let _ = sinter_onnx::tensor_from_pb(&b);
    }
}
