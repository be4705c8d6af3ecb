//! Invalid models the importer must refuse (with an error naming the node, value or attribute)
//! instead of importing a graph that computes something else: duplicate or shadowing value
//! names, attributes of the wrong type, Einsum outputs without an input letter, unknown opsets
//! and IR versions, out-of-range constant indices; and the rules for run-time indices every
//! backend follows: clamp after one negative wrap, and the last of duplicate scatter targets wins
//! (as with constant indices).

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

/// Run-time indices with duplicate targets under `reduction="none"`: the last update wins, as
/// with constant indices (and the ONNX reference); the one-hot lowering used to add them up, so
/// one model gave two answers depending on whether its indices were constants.
#[test]
fn run_time_scatters_without_reduction_let_the_last_update_win() {
    // ScatterElements along axis 1 of a [3, 4] tensor, indices [2, 3] (the data's third row
    // untouched): row 0 writes column 1 twice, row 1 column 3 twice (3 and -1).
    let x: Vec<f64> = (0..12).map(|v| v as f64).collect();
    let x = HostTensor::from_f64(DType::F32, vec![3, 4], &x);
    let idx = [1i64, 1, 0, 3, -1, 2];
    let u = HostTensor::from_f64(DType::F32, vec![2, 3], &[10.0, 20.0, 30.0, 40.0, 50.0, 60.0]);
    let shapes = [vec![3, 4], vec![2, 3]];
    let run = |m: &sinter_onnx::proto::ModelProto, extra: Option<HostTensor>| {
        let m = sinter_onnx::load_bytes(&bytes(m)).unwrap();
        let mut ins = vec![x.clone(), u.clone()];
        let mut sh = shapes.to_vec();
        if let Some(t) = extra {
            sh.push(t.shape.clone());
            ins.push(t);
        }
        run_cpu(&m.graph_for(&sh).unwrap(), &ins)[0].to_f64_vec()
    };
    let it = HostTensor::from_i64(DType::I64, vec![2, 3], &idx);
    let constant = run(&scatter_model("ScatterElements", "none", &[3, 4], &[2, 3], &[2, 3], Some(&idx), 1), None);
    let run_time = run(&scatter_model("ScatterElements", "none", &[3, 4], &[2, 3], &[2, 3], None, 1), Some(it));
    let want = [30.0, 20.0, 2.0, 3.0, 4.0, 5.0, 60.0, 50.0, 8.0, 9.0, 10.0, 11.0];
    assert_eq!(constant, want);
    assert_eq!(run_time, want);
    // ScatterND of rows of a [4, 2] tensor: row 2 written three times, row 0 once.
    let x = HostTensor::from_f64(DType::F32, vec![4, 2], &[0.0; 8]);
    let u = HostTensor::from_f64(DType::F32, vec![4, 2], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]);
    let idx = [2i64, -2, 0, 2];
    let it = HostTensor::from_i64(DType::I64, vec![4, 1], &idx);
    let run = |m: &sinter_onnx::proto::ModelProto, extra: Option<HostTensor>| {
        let m = sinter_onnx::load_bytes(&bytes(m)).unwrap();
        let mut ins = vec![x.clone(), u.clone()];
        let mut sh = vec![vec![4, 2], vec![4, 2]];
        if let Some(t) = extra {
            sh.push(t.shape.clone());
            ins.push(t);
        }
        run_cpu(&m.graph_for(&sh).unwrap(), &ins)[0].to_f64_vec()
    };
    let want = [5.0, 6.0, 0.0, 0.0, 7.0, 8.0, 0.0, 0.0];
    assert_eq!(run(&scatter_model("ScatterND", "none", &[4, 2], &[4, 1], &[4, 2], Some(&idx), 0), None), want);
    assert_eq!(run(&scatter_model("ScatterND", "none", &[4, 2], &[4, 1], &[4, 2], None, 0), Some(it)), want);
}

/// MaxUnpool after a MaxPool with overlapping windows: two windows pick the same element, so
/// its index comes twice (with the same value). The ONNX reference assigns in order (the value
/// once); the one-hot lowering summed the duplicates, doubling it.
#[test]
fn max_unpool_with_duplicate_indices_writes_each_value_once() {
    let m = model(
        vec![node("MaxUnpool", &["x", "i"], &["y"], vec![attr_ints("kernel_shape", &[2]), attr_ints("strides", &[1])])],
        vec![vi("x", F32, &fixed(&[1, 1, 3])), vi("i", I64, &fixed(&[1, 1, 3]))],
        vec![vi("y", F32, &fixed(&[1, 1, 4]))],
        vec![],
    );
    let g = sinter_onnx::load_bytes(&bytes(&m)).unwrap().graph_for(&[vec![1, 1, 3], vec![1, 1, 3]]).unwrap();
    let x = HostTensor::from_f64(DType::F32, vec![1, 1, 3], &[5.0, 5.0, 7.0]);
    let i = HostTensor::from_i64(DType::I64, vec![1, 1, 3], &[1, 1, 3]);
    assert_eq!(run_cpu(&g, &[x, i])[0].to_f64_vec(), vec![0.0, 5.0, 0.0, 7.0]);
}
