//! The conformance runner's comparisons and suite checks (issue 14): infinities of the wrong value
//! or sign fail, a case with nothing to compare is not a pass, an empty or garbage suite folder is
//! an error, and unreadable test data names its file.

use prost::Message;
use sinter_core::HostTensor;
use sinter_onnx::OnnxError;
use sinter_onnx::conformance::{self, Options, Status};
use sinter_onnx::proto::{
    GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TensorShapeProto, TypeProto, ValueInfoProto,
    tensor_shape_proto, type_proto,
};
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn vi(name: &str, n: i64) -> ValueInfoProto {
    let dim = vec![tensor_shape_proto::Dimension {
        value: Some(tensor_shape_proto::dimension::Value::DimValue(n)),
        ..Default::default()
    }];
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: Some(1),
                shape: Some(TensorShapeProto { dim }),
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// `y = Identity(x)`, f32 `[n]`.
fn identity(n: i64) -> Vec<u8> {
    ModelProto {
        ir_version: Some(8),
        opset_import: vec![OperatorSetIdProto { domain: Some(String::new()), version: Some(17) }],
        graph: Some(GraphProto {
            node: vec![NodeProto {
                op_type: Some("Identity".into()),
                input: vec!["x".into()],
                output: vec!["y".into()],
                ..Default::default()
            }],
            name: Some("g".into()),
            input: vec![vi("x", n)],
            output: vec![vi("y", n)],
            ..Default::default()
        }),
        ..Default::default()
    }
    .encode_to_vec()
}

fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("sinter-conformance-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn pb(t: &HostTensor) -> Vec<u8> {
    sinter_onnx::tensor_to_proto(t, "").encode_to_vec()
}

/// Writes a case: `files` are (name in test_data_set_0, bytes).
fn case(root: &Path, name: &str, files: &[(&str, Vec<u8>)]) {
    let d = root.join(name).join("test_data_set_0");
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(root.join(name).join("model.onnx"), identity(3)).unwrap();
    for (f, b) in files {
        std::fs::write(d.join(f), b).unwrap();
    }
}

fn f32s(v: &[f32]) -> HostTensor {
    HostTensor::f32([v.len()], v.to_vec()).unwrap()
}

#[test]
fn wrong_infinities_and_missing_outputs_do_not_pass() {
    let root = temp_dir("cmp").join("node");
    let inf = f32::INFINITY;
    let x = f32s(&[1.0, 2.0, 3.0]);
    case(&root, "test_inf", &[("input_0.pb", pb(&x)), ("output_0.pb", pb(&f32s(&[inf, inf, 1.0])))]);
    case(&root, "test_nan", &[("input_0.pb", pb(&x)), ("output_0.pb", pb(&f32s(&[f32::NAN, -inf, 1.0])))]);
    case(&root, "test_no_outputs", &[("input_0.pb", pb(&x))]);
    case(&root, "test_empty_pb", &[("input_0.pb", vec![]), ("output_0.pb", pb(&x))]);
    case(&root, "test_npy_in_pb", &[("input_0.pb", sinter_onnx::npy::to_npy(&x)), ("output_0.pb", pb(&x))]);
    // A backend that computes [0, -inf, 1] whatever the case (issue 14's example).
    let backend: conformance::Backend = Arc::new(|_, _| Ok(vec![f32s(&[0.0, -f32::INFINITY, 1.0])]));
    let opts = Options { jobs: 1, ..Options::default() };
    let r = conformance::run(&root, backend, &opts).unwrap();
    let get = |n: &str| r.cases.iter().find(|c| c.name == n).unwrap().clone();
    let c = get("test_inf");
    assert_eq!(c.status, Status::Fail, "{c:?}");
    assert!(c.max_ratio.unwrap().is_infinite() && c.detail.as_deref().unwrap().contains("2 of 3"), "{c:?}");
    assert_eq!(get("test_nan").status, Status::Fail, "a NaN expected, 0 computed");
    let c = get("test_no_outputs");
    assert_eq!(c.status, Status::Error, "{c:?}");
    assert!(c.detail.as_deref().unwrap().contains("no output_N.pb"), "{c:?}");
    for (n, want) in [("test_empty_pb", "empty (0 bytes)"), ("test_npy_in_pb", "NumPy .npy data")] {
        let c = get(n);
        let d = c.detail.clone().unwrap();
        assert_eq!(c.status, Status::Error, "{c:?}");
        assert!(d.contains("input_0.pb") && d.contains(want), "{n}: {d}");
    }
    assert_eq!(r.summary.passed, 0);
    // The matching case passes: NaN against NaN, -inf against -inf.
    let same: conformance::Backend = Arc::new(|_, _| Ok(vec![f32s(&[f32::NAN, -f32::INFINITY, 1.0])]));
    let opts = Options { filter: Some("test_nan".into()), ..Options::default() };
    assert_eq!(conformance::run(&root, same, &opts).unwrap().summary.passed, 1);
}

#[test]
fn empty_or_garbage_suites_are_errors() {
    let cpu: conformance::Backend = Arc::new(sinter_core::cpu::run);
    let empty = temp_dir("empty");
    let e = conformance::run(&empty, cpu.clone(), &Options::default()).unwrap_err();
    assert!(matches!(e, OnnxError::NoCases { .. }), "{e}");
    assert!(e.to_string().contains(&empty.display().to_string()), "{e}");
    let garbage = temp_dir("garbage");
    std::fs::write(garbage.join("README"), b"not a suite").unwrap();
    std::fs::create_dir_all(garbage.join("node/some_folder")).unwrap();
    assert!(matches!(conformance::run(&garbage, cpu.clone(), &Options::default()), Err(OnnxError::NoCases { .. })));
    // A filter that matches nothing is an error too, not "0/0 passed".
    let root = temp_dir("filter");
    case(&root, "test_one", &[("input_0.pb", pb(&f32s(&[1.0; 3]))), ("output_0.pb", pb(&f32s(&[1.0; 3])))]);
    let opts = Options { filter: Some("no_such_case".into()), ..Options::default() };
    let e = conformance::run(&root, cpu.clone(), &opts).unwrap_err().to_string();
    assert!(e.contains("none of the 1 cases"), "{e}");
    assert_eq!(conformance::run(&root, cpu, &Options::default()).unwrap().summary.passed, 1);
}
