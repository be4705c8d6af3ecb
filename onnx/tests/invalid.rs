//! Invalid models the importer must refuse (with an error naming the node, value or attribute)
//! instead of importing a graph that computes something else: duplicate or shadowing value
//! names, attributes of the wrong type, Einsum outputs without an input letter, unknown opsets
//! and IR versions, out-of-range constant indices; and the one out-of-range rule for run-time
//! indices (clamp after one negative wrap) that every backend follows.

mod common;
use common::*;

use sinter_core::{DType, HostTensor};
use sinter_onnx::OnnxError;
use sinter_onnx::proto::{AttributeProto, OperatorSetIdProto, attribute_proto::AttributeType};

fn import_err(m: &sinter_onnx::proto::ModelProto, shapes: &[Vec<usize>]) -> String {
    let m = sinter_onnx::load_bytes(&bytes(m)).expect("the model decodes");
    match m.graph_for(shapes) {
        Ok(_) => panic!("the invalid model was imported"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn two_nodes_writing_one_value_are_refused() {
    let mut a = node("Relu", &["x"], &["y"], vec![]);
    a.name = Some("first".into());
    let mut b = node("Neg", &["x"], &["y"], vec![]);
    b.name = Some("second".into());
    let m = model(vec![a, b], vec![vi("x", F32, &fixed(&[3]))], vec![vi("y", F32, &fixed(&[3]))], vec![]);
    let e = import_err(&m, &[vec![3]]);
    assert!(e.contains("\"y\"") && e.contains("\"first\"") && e.contains("\"second\""), "{e}");
}

#[test]
fn node_outputs_cannot_shadow_inputs_or_initializers() {
    // A node writing the name of an initializer.
    let m = model(
        vec![node("Relu", &["x"], &["w"], vec![]), node("Add", &["x", "w"], &["y"], vec![])],
        vec![vi("x", F32, &fixed(&[2]))],
        vec![vi("y", F32, &fixed(&[2]))],
        vec![f32_init("w", &[2], &[1.0, 2.0])],
    );
    let e = import_err(&m, &[vec![2]]);
    assert!(e.contains("\"w\"") && e.contains("initializer"), "{e}");
    // A node writing the name of a graph input.
    let m = model(
        vec![node("Relu", &["x"], &["x"], vec![]), node("Neg", &["x"], &["y"], vec![])],
        vec![vi("x", F32, &fixed(&[2]))],
        vec![vi("y", F32, &fixed(&[2]))],
        vec![],
    );
    let e = import_err(&m, &[vec![2]]);
    assert!(e.contains("\"x\"") && e.contains("graph input"), "{e}");
}

fn attr_f(name: &str, v: f32) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        f: Some(v),
        r#type: Some(AttributeType::Float as i32),
        ..Default::default()
    }
}

fn attr_s(name: &str, v: &str) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        s: Some(v.as_bytes().to_vec()),
        r#type: Some(AttributeType::String as i32),
        ..Default::default()
    }
}

#[test]
fn attributes_of_the_wrong_type_are_refused() {
    for (attr, found) in [(attr_f("axis", 1.0), "FLOAT"), (attr_s("axis", "1"), "STRING")] {
        let mut n = node("Softmax", &["x"], &["y"], vec![attr]);
        n.name = Some("sm".into());
        let m = model(vec![n], vec![vi("x", F32, &fixed(&[2, 3]))], vec![vi("y", F32, &fixed(&[2, 3]))], vec![]);
        let e = import_err(&m, &[vec![2, 3]]);
        assert!(e.contains("\"sm\"") && e.contains("\"axis\"") && e.contains("INT") && e.contains(found), "{e}");
    }
    // Without a declared type, the value field that is set decides (a float in an ints attribute).
    let untyped = AttributeProto { name: Some("perm".into()), f: Some(1.0), ..Default::default() };
    let m = model(
        vec![node("Transpose", &["x"], &["y"], vec![untyped])],
        vec![vi("x", F32, &fixed(&[2, 3]))],
        vec![vi("y", F32, &fixed(&[3, 2]))],
        vec![],
    );
    let e = import_err(&m, &[vec![2, 3]]);
    assert!(e.contains("\"perm\"") && e.contains("INTS") && e.contains("FLOAT"), "{e}");
}

#[test]
fn einsum_output_letters_must_come_from_the_inputs() {
    for eq in ["ij->ijk", "ij->ii"] {
        let m = model(
            vec![node("Einsum", &["x"], &["y"], vec![attr_s("equation", eq)])],
            vec![vi("x", F32, &fixed(&[2, 3]))],
            vec![vi("y", F32, &[None, None, None])],
            vec![],
        );
        let e = import_err(&m, &[vec![2, 3]]);
        assert!(e.contains("Einsum") && e.contains("output letter"), "{eq}: {e}");
    }
}

#[test]
fn unknown_opsets_and_ir_versions_are_refused() {
    let base = || {
        model(
            vec![node("Relu", &["x"], &["y"], vec![])],
            vec![vi("x", F32, &fixed(&[2]))],
            vec![vi("y", F32, &fixed(&[2]))],
            vec![],
        )
    };
    let mut m = base();
    m.opset_import = vec![OperatorSetIdProto { domain: Some(String::new()), version: Some(99) }];
    let e = sinter_onnx::load_bytes(&bytes(&m)).unwrap_err();
    assert!(matches!(e, OnnxError::Version { version: 99, .. }) && e.to_string().contains("opset"), "{e}");
    let mut m = base();
    m.ir_version = Some(999);
    let e = sinter_onnx::load_bytes(&bytes(&m)).unwrap_err();
    assert!(matches!(e, OnnxError::Version { version: 999, .. }) && e.to_string().contains("IR version"), "{e}");
    // The newest supported versions still load.
    let mut m = base();
    m.ir_version = Some(sinter_onnx::MAX_IR_VERSION);
    m.opset_import = vec![OperatorSetIdProto { domain: Some(String::new()), version: Some(sinter_onnx::MAX_OPSET) }];
    assert!(sinter_onnx::load_bytes(&bytes(&m)).is_ok());
}

#[test]
fn constant_indices_out_of_range_are_refused() {
    // Gather, GatherElements, ScatterElements and ScatterND with an initializer index of 5 into 3.
    let cases: Vec<(&str, Vec<&str>, Vec<i64>)> = vec![
        ("Gather", vec!["x", "i"], vec![5]),
        ("GatherElements", vec!["x", "i"], vec![5, 0, 1]),
        ("ScatterElements", vec!["x", "i", "u"], vec![5, 0, 1]),
        ("ScatterND", vec!["x", "i", "u"], vec![5]),
        ("Gather", vec!["x", "i"], vec![-4]),
    ];
    for (op, ins, idx) in cases {
        let (ishape, ushape) = match op {
            "ScatterND" => (vec![1, 1], vec![1]),
            "Gather" => (vec![1], vec![]),
            _ => (vec![3], vec![3]),
        };
        let mut i = i64_init("i", &idx);
        i.dims = ishape;
        let mut inits = vec![i];
        if !ushape.is_empty() {
            inits.push(f32_init("u", &ushape, &vec![1.0; ushape.iter().product::<i64>() as usize]));
        }
        let m = model(
            vec![node(op, &ins, &["y"], vec![])],
            vec![vi("x", F32, &fixed(&[3]))],
            vec![vi("y", F32, &[None])],
            inits,
        );
        let e = import_err(&m, &[vec![3]]);
        assert!(e.contains(op) && e.contains("out of range") && e.contains("extent of 3"), "{op}: {e}");
    }
}

/// Run-time indices out of range clamp after one negative wrap, in every op built on gathers
/// (the same rule as `Op::Gather` on every backend): ScatterElements used to drop them silently.
#[test]
fn run_time_indices_out_of_range_clamp() {
    let x = HostTensor::from_f64(DType::F32, vec![4], &[10.0, 20.0, 30.0, 40.0]);
    let idx = HostTensor::from_i64(DType::I64, vec![3], &[9, -1, -20]);
    let g = |op: &str, ins: &[&str], extra: Vec<sinter_onnx::proto::ValueInfoProto>| {
        let mut inputs = vec![vi("x", F32, &fixed(&[4])), vi("i", I64, &fixed(&[3]))];
        inputs.extend(extra);
        let m = model(vec![node(op, ins, &["y"], vec![])], inputs, vec![vi("y", F32, &[None])], vec![]);
        sinter_onnx::load_bytes(&bytes(&m)).unwrap()
    };
    // Gather: 9 -> 3, -1 -> 3, -20 -> -16 -> 0.
    let m = g("Gather", &["x", "i"], vec![]);
    let y = run_cpu(&m.graph_for(&[vec![4], vec![3]]).unwrap(), &[x.clone(), idx.clone()]);
    assert_eq!(y[0].to_f64_vec(), vec![40.0, 40.0, 10.0]);
    // ScatterElements with indices 9, 1, -20 writes updates 1, 2, 3 at positions 3, 1, 0.
    let m = g("ScatterElements", &["x", "i", "u"], vec![vi("u", F32, &fixed(&[3]))]);
    let idx = HostTensor::from_i64(DType::I64, vec![3], &[9, 1, -20]);
    let u = HostTensor::from_f64(DType::F32, vec![3], &[1.0, 2.0, 3.0]);
    let y = run_cpu(&m.graph_for(&[vec![4], vec![3], vec![3]]).unwrap(), &[x, idx, u]);
    assert_eq!(y[0].to_f64_vec(), vec![3.0, 2.0, 30.0, 1.0]);
}
