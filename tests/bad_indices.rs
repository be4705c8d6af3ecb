//! One rule for out-of-range run-time indices on every backend: ONNX Gather, GatherElements,
//! GatherND, ScatterElements and ScatterND with indices far outside `[-n, n)` (negative ones
//! wrap once, then everything clamps into range) give the same result on the CPU reference, the
//! kernel-IR interpreter and WGSL (lavapipe in CI: `SINTER_ADAPTER=cpu SINTER_REQUIRE_GPU=1`);
//! and duplicate run-time scatter targets resolve alike everywhere (the last update wins).

mod common;

use prost::Message;
use sinter::core::backend::Backend as BackendTrait;
use sinter::core::compile::{CompileOptions, compile};
use sinter::onnx::proto::{
    GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TensorShapeProto, TypeProto, ValueInfoProto,
    tensor_shape_proto, type_proto,
};
use sinter::{DType, HostTensor};
use std::sync::Arc;

fn vi(name: &str, elem: i32, dims: &[i64]) -> ValueInfoProto {
    use tensor_shape_proto::{Dimension, dimension::Value};
    let dim = dims.iter().map(|&d| Dimension { value: Some(Value::DimValue(d)), ..Default::default() }).collect();
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: Some(elem),
                shape: Some(TensorShapeProto { dim }),
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn node(op: &str, ins: &[&str], out: &str) -> NodeProto {
    NodeProto {
        op_type: Some(op.into()),
        input: ins.iter().map(|s| s.to_string()).collect(),
        output: vec![out.into()],
        ..Default::default()
    }
}

/// A model over `x: f32[4, 3]` with the five indexing ops reading run-time i64 indices.
fn model() -> sinter::onnx::Model {
    const F32: i32 = 1;
    const I64: i32 = 7;
    let m = ModelProto {
        ir_version: Some(8),
        opset_import: vec![OperatorSetIdProto { domain: Some(String::new()), version: Some(17) }],
        graph: Some(GraphProto {
            name: Some("bad_indices".into()),
            node: vec![
                node("Gather", &["x", "i"], "g"),
                node("GatherElements", &["x", "ie"], "ge"),
                node("GatherND", &["x", "ind"], "gnd"),
                node("ScatterElements", &["x", "ie", "u"], "se"),
                node("ScatterND", &["x", "ind", "rows"], "snd"),
            ],
            input: vec![
                vi("x", F32, &[4, 3]),
                vi("i", I64, &[5]),
                vi("ie", I64, &[2, 3]),
                vi("ind", I64, &[3, 1]),
                vi("u", F32, &[2, 3]),
                vi("rows", F32, &[3, 3]),
            ],
            output: vec![
                vi("g", F32, &[5, 3]),
                vi("ge", F32, &[2, 3]),
                vi("gnd", F32, &[3, 3]),
                vi("se", F32, &[4, 3]),
                vi("snd", F32, &[4, 3]),
            ],
            ..Default::default()
        }),
        ..Default::default()
    };
    sinter::onnx::load_bytes(&m.encode_to_vec()).expect("the model loads")
}

fn inputs() -> Vec<HostTensor> {
    let x: Vec<f64> = (0..12).map(|v| v as f64 + 1.0).collect();
    vec![
        HostTensor::from_f64(DType::F32, vec![4, 3], &x),
        // Far below, just below, in range, just above, far above.
        HostTensor::from_i64(DType::I64, vec![5], &[-1_000_000, -5, -1, 4, 1_000_000]),
        // Distinct clamped targets per column, so the scatters have no duplicates.
        HostTensor::from_i64(DType::I64, vec![2, 3], &[-9, 7, 1, 100, -100, 2]),
        HostTensor::from_i64(DType::I64, vec![3, 1], &[-50, 1, 50]),
        HostTensor::from_f64(DType::F32, vec![2, 3], &[-1.0, -2.0, -3.0, -4.0, -5.0, -6.0]),
        HostTensor::from_f64(DType::F32, vec![3, 3], &[10.0, 11.0, 12.0, 13.0, 14.0, 15.0, 16.0, 17.0, 18.0]),
    ]
}

#[test]
fn out_of_range_indices_agree_on_every_backend() {
    let m = model();
    let ins = inputs();
    let g = m.graph_for(&ins.iter().map(|t| t.shape.clone()).collect::<Vec<_>>()).expect("imports");
    let want = sinter::cpu::run(&g, &ins).expect("the CPU reference clamps");
    // The rule, spelled out for Gather: -1e6 -> row 0, -5 -> -1 -> row 0, -1 -> row 3, 4 -> row 3.
    let rows: Vec<f64> =
        [0usize, 0, 3, 3, 3].iter().flat_map(|&r| (0..3).map(move |c| (r * 3 + c) as f64 + 1.0)).collect();
    assert_eq!(want[0].to_f64_vec(), rows);
    every_backend_agrees(&g, &ins, &want);
}

/// Compiles `g` for the interpreter and WGSL (where there is an adapter) and checks that every
/// output equals the CPU reference's `want` exactly.
fn every_backend_agrees(g: &sinter::core::IrGraph, ins: &[HostTensor], want: &[HostTensor]) {
    let mut backends: Vec<(&str, Arc<dyn BackendTrait>)> =
        vec![("interp", Arc::new(sinter::core::kernel::interp::InterpBackend::new()))];
    if let Some(b) = common::gpu_or_skip("wgsl", sinter::wgsl::WgslBackend::new()) {
        backends.push(("wgsl", Arc::new(b)));
    }
    for (name, b) in backends {
        let opts = CompileOptions { cache_dir: None, ..Default::default() };
        let got = compile(g, b, opts).and_then(|c| c.run(ins)).unwrap_or_else(|e| panic!("{name}: {e}"));
        for (k, (a, w)) in got.iter().zip(want).enumerate() {
            assert_eq!(a.to_f64_vec(), w.to_f64_vec(), "{name}: output {k}");
        }
    }
}

/// Run-time scatter indices with duplicate targets (no reduction): the last update wins on
/// every backend, as with constant indices (the one-hot lowering used to add them up).
#[test]
fn duplicate_scatter_targets_agree_on_every_backend() {
    let m = model();
    let mut ins = inputs();
    // ScatterElements (axis 0): columns 0 and 1 are written twice (rows 1 and 2; 9 clamps to 3
    // and -1 wraps to 3 in column 2). ScatterND: row 2 twice, row 0 once.
    ins[2] = HostTensor::from_i64(DType::I64, vec![2, 3], &[1, 2, 9, 1, 2, -1]);
    ins[3] = HostTensor::from_i64(DType::I64, vec![3, 1], &[2, -2, 0]);
    let g = m.graph_for(&ins.iter().map(|t| t.shape.clone()).collect::<Vec<_>>()).expect("imports");
    let want = sinter::cpu::run(&g, &ins).expect("the CPU reference runs");
    let x: Vec<f64> = (0..12).map(|v| v as f64 + 1.0).collect();
    let mut se = x.clone();
    (se[3], se[7], se[11]) = (-4.0, -5.0, -6.0);
    assert_eq!(want[3].to_f64_vec(), se, "ScatterElements");
    let mut snd = x;
    snd[6..9].copy_from_slice(&[13.0, 14.0, 15.0]);
    snd[0..3].copy_from_slice(&[16.0, 17.0, 18.0]);
    assert_eq!(want[4].to_f64_vec(), snd, "ScatterND");
    every_backend_agrees(&g, &ins, &want);
}
