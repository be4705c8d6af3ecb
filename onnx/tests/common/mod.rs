//! Model builders shared by the importer's test files (prost structs, run on the CPU reference).

#![allow(dead_code)]

use prost::Message;
use sinter_core::HostTensor;
use sinter_onnx::proto::{
    AttributeProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TensorProto, TensorShapeProto, TypeProto,
    ValueInfoProto, attribute_proto::AttributeType, tensor_shape_proto, type_proto,
};
use std::path::PathBuf;

// ---- builders ----

pub fn node(op: &str, ins: &[&str], outs: &[&str], attrs: Vec<AttributeProto>) -> NodeProto {
    NodeProto {
        op_type: Some(op.into()),
        input: ins.iter().map(|s| s.to_string()).collect(),
        output: outs.iter().map(|s| s.to_string()).collect(),
        attribute: attrs,
        ..Default::default()
    }
}

pub fn attr_i(name: &str, v: i64) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        i: Some(v),
        r#type: Some(AttributeType::Int as i32),
        ..Default::default()
    }
}

pub fn attr_s(name: &str, v: &str) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        s: Some(v.as_bytes().to_vec()),
        r#type: Some(AttributeType::String as i32),
        ..Default::default()
    }
}

pub fn attr_ints(name: &str, v: &[i64]) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        ints: v.to_vec(),
        r#type: Some(AttributeType::Ints as i32),
        ..Default::default()
    }
}

/// A value info; `None` dims are named symbols `d<i>`.
pub fn vi(name: &str, elem: i32, dims: &[Option<i64>]) -> ValueInfoProto {
    use tensor_shape_proto::{Dimension, dimension::Value};
    let dim = dims
        .iter()
        .enumerate()
        .map(|(i, d)| Dimension {
            value: Some(match d {
                Some(v) => Value::DimValue(*v),
                None => Value::DimParam(format!("d{i}")),
            }),
            ..Default::default()
        })
        .collect();
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

pub fn fixed(dims: &[i64]) -> Vec<Option<i64>> {
    dims.iter().map(|&d| Some(d)).collect()
}

pub fn model(
    nodes: Vec<NodeProto>,
    ins: Vec<ValueInfoProto>,
    outs: Vec<ValueInfoProto>,
    inits: Vec<TensorProto>,
) -> ModelProto {
    ModelProto {
        ir_version: Some(8),
        opset_import: vec![OperatorSetIdProto { domain: Some(String::new()), version: Some(17) }],
        graph: Some(GraphProto {
            node: nodes,
            name: Some("g".into()),
            initializer: inits,
            input: ins,
            output: outs,
            ..Default::default()
        }),
        ..Default::default()
    }
}

pub fn bytes(m: &ModelProto) -> Vec<u8> {
    m.encode_to_vec()
}

pub const F32: i32 = 1;
pub const I64: i32 = 7;

pub fn f32_init(name: &str, dims: &[i64], v: &[f32]) -> TensorProto {
    TensorProto {
        name: Some(name.into()),
        dims: dims.to_vec(),
        data_type: Some(F32),
        float_data: v.to_vec(),
        ..Default::default()
    }
}

pub fn i64_init(name: &str, v: &[i64]) -> TensorProto {
    TensorProto {
        name: Some(name.into()),
        dims: vec![v.len() as i64],
        data_type: Some(I64),
        int64_data: v.to_vec(),
        ..Default::default()
    }
}

/// A fresh empty folder under the system temp folder.
pub fn temp_dir(tag: &str) -> PathBuf {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let d = std::env::temp_dir().join(format!("sinter-onnx-test-{}-{tag}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

pub fn run_cpu(g: &sinter_core::IrGraph, inputs: &[HostTensor]) -> Vec<HostTensor> {
    sinter_core::cpu::run(g, inputs).unwrap()
}

/// A ScatterElements or ScatterND model whose indices `i` (of shape `idims`) are either a
/// run-time input or the constant `constant`.
pub fn scatter_model(
    op: &str,
    red: &str,
    xdims: &[i64],
    idims: &[i64],
    udims: &[i64],
    constant: Option<&[i64]>,
    axis: i64,
) -> ModelProto {
    let mut attrs = vec![attr_s("reduction", red)];
    if op == "ScatterElements" {
        attrs.push(attr_i("axis", axis));
    }
    let mut inputs = vec![vi("x", F32, &fixed(xdims)), vi("u", F32, &fixed(udims))];
    let mut inits = vec![];
    match constant {
        Some(v) => {
            let mut t = i64_init("i", v);
            t.dims = idims.to_vec();
            inits.push(t);
        }
        None => inputs.push(vi("i", I64, &fixed(idims))),
    }
    model(vec![node(op, &["x", "i", "u"], &["y"], attrs)], inputs, vec![vi("y", F32, &fixed(xdims))], inits)
}
