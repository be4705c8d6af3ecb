//! Symbolic import: shape values folded as expressions of the symbolic dims (`Shape → Gather →
//! Concat → Reshape`), convolutions and pooling with a symbolic batch, and the refusals that stay
//! (errors naming the node).

use sinter_core::{Dim, HostTensor, Shape};
use sinter_onnx::OnnxError;
use sinter_onnx::proto::TensorProto;

mod common;
use common::*;

fn scalar_i64(name: &str, v: i64) -> TensorProto {
    TensorProto { name: Some(name.into()), data_type: Some(I64), int64_data: vec![v], ..Default::default() }
}

/// `y = Reshape(x, [d0*d1, 6])` and `z = Reshape(x, [d0, -1])`, both from `Shape(x)`.
fn shape_chain_model() -> sinter_onnx::Model {
    let m = model(
        vec![
            node("Shape", &["x"], &["s"], vec![]),
            node("Gather", &["s", "zero"], &["b"], vec![attr_i("axis", 0)]),
            node("Gather", &["s", "one"], &["t"], vec![attr_i("axis", 0)]),
            node("Mul", &["b", "t"], &["bt"], vec![]),
            node("Unsqueeze", &["bt", "axes"], &["bt1"], vec![]),
            node("Concat", &["bt1", "six"], &["shape"], vec![attr_i("axis", 0)]),
            node("Reshape", &["x", "shape"], &["y"], vec![]),
            node("Unsqueeze", &["b", "axes"], &["b1"], vec![]),
            node("Concat", &["b1", "minus1"], &["shape2"], vec![attr_i("axis", 0)]),
            node("Reshape", &["x", "shape2"], &["z"], vec![]),
        ],
        vec![vi("x", F32, &[None, None, Some(6)])],
        vec![vi("y", F32, &[None, None]), vi("z", F32, &[None, None])],
        vec![
            scalar_i64("zero", 0),
            scalar_i64("one", 1),
            i64_init("axes", &[0]),
            i64_init("six", &[6]),
            i64_init("minus1", &[-1]),
        ],
    );
    sinter_onnx::load_bytes(&bytes(&m)).unwrap()
}

#[test]
fn shape_gather_concat_reshape_stays_symbolic() {
    let g = shape_chain_model().graph().unwrap();
    sinter_core::verify::verify(&g).unwrap();
    let y = g.ty(g.outputs[0].node);
    assert_eq!(y.shape, Shape(vec![Dim::sym("d0*d1"), Dim::Static(6)]), "{}", y.shape);
    let z = g.ty(g.outputs[1].node);
    assert_eq!(z.shape, Shape(vec![Dim::sym("d0"), Dim::sym("6*d1")]), "{}", z.shape);
    for dims in [[2usize, 3, 6], [4, 1, 6]] {
        let n: usize = dims.iter().product();
        let v: Vec<f32> = (0..n).map(|i| i as f32).collect();
        let x = HostTensor::f32(dims, v.clone()).unwrap();
        let outs = run_cpu(&g, &[x]);
        assert_eq!(outs[0].shape, vec![dims[0] * dims[1], 6]);
        assert_eq!(outs[1].shape, vec![dims[0], dims[1] * 6]);
        assert_eq!(outs[0].to_f64_vec(), v.iter().map(|&x| x as f64).collect::<Vec<_>>());
    }
}

#[test]
fn one_compilation_per_shape_of_a_symbolic_graph() {
    use sinter_core::compile::{CompileOptions, compile};
    let g = shape_chain_model().graph().unwrap();
    let opts = CompileOptions { cache_dir: None, debug_dir: None, ..CompileOptions::default() };
    let c = compile(&g, std::sync::Arc::new(sinter_core::kernel::interp::InterpBackend::new()), opts).unwrap();
    for dims in [[2usize, 3, 6], [4, 1, 6], [2, 3, 6]] {
        let n: usize = dims.iter().product();
        let x = HostTensor::f32(dims, (0..n).map(|i| i as f32).collect()).unwrap();
        let outs = c.run(&[x]).unwrap();
        assert_eq!(outs[0].shape, vec![dims[0] * dims[1], 6]);
    }
    let ev = c.events();
    assert_eq!(
        ev.len(),
        2,
        "one compilation per distinct shape: {:?}",
        ev.iter().map(|e| &e.reason).collect::<Vec<_>>()
    );
    assert!(ev.iter().all(|e| !e.reason.is_empty()));
}

/// Conv (stride 2) → AveragePool (padded, count_include_pad 0) → MaxPool on `[d0, 2, 7, 7]`.
fn conv_pool_model() -> sinter_onnx::Model {
    let w: Vec<f32> = (0..3 * 2 * 3 * 3).map(|i| ((i * 7) % 11) as f32 / 11.0 - 0.5).collect();
    let m = model(
        vec![
            node(
                "Conv",
                &["x", "w", "b"],
                &["c"],
                vec![attr_ints("pads", &[1, 1, 1, 1]), attr_ints("strides", &[2, 2])],
            ),
            node(
                "AveragePool",
                &["c"],
                &["a"],
                vec![attr_ints("kernel_shape", &[3, 3]), attr_ints("pads", &[1, 1, 1, 1])],
            ),
            node("MaxPool", &["a"], &["y"], vec![attr_ints("kernel_shape", &[2, 2])]),
        ],
        vec![vi("x", F32, &[None, Some(2), Some(7), Some(7)])],
        vec![vi("y", F32, &[None, Some(3), Some(3), Some(3)])],
        vec![f32_init("w", &[3, 2, 3, 3], &w), f32_init("b", &[3], &[0.1, -0.2, 0.3])],
    );
    sinter_onnx::load_bytes(&bytes(&m)).unwrap()
}

#[test]
fn conv_and_pooling_with_a_symbolic_batch() {
    let m = conv_pool_model();
    let g = m.graph().unwrap();
    sinter_core::verify::verify(&g).unwrap();
    let y = g.ty(g.outputs[0].node);
    assert_eq!(y.shape, Shape(vec![Dim::sym("d0"), Dim::Static(3), Dim::Static(3), Dim::Static(3)]));
    for b in [1usize, 3] {
        let x = HostTensor::random(sinter_core::DType::F32, vec![b, 2, 7, 7], b as u64, -1.0, 1.0);
        let want = run_cpu(&m.graph_for(&[vec![b, 2, 7, 7]]).unwrap(), std::slice::from_ref(&x));
        let got = run_cpu(&g, &[x]);
        assert_eq!(got[0].shape, vec![b, 3, 3, 3]);
        assert_eq!(got[0].to_f64_vec(), want[0].to_f64_vec());
    }
}

#[test]
fn conv_and_max_pool_with_symbolic_spatial_extents() {
    // A padded 3x3 conv keeps h and w, a valid one gives h - 2, a 2x2 stride-1 max pool h - 3.
    let m = model(
        vec![
            node("Conv", &["x", "w"], &["c"], vec![attr_ints("pads", &[1, 1, 1, 1])]),
            node("Conv", &["c", "w"], &["v"], vec![]),
            node("MaxPool", &["v"], &["y"], vec![attr_ints("kernel_shape", &[2, 2])]),
        ],
        vec![vi("x", F32, &[None, Some(1), None, None])],
        vec![vi("y", F32, &[None, Some(1), None, None])],
        vec![f32_init("w", &[1, 1, 3, 3], &[0.5, -1.0, 0.25, 1.0, 2.0, -0.5, 0.0, 1.5, -2.0])],
    );
    let m = sinter_onnx::load_bytes(&bytes(&m)).unwrap();
    let g = m.graph().unwrap();
    sinter_core::verify::verify(&g).unwrap();
    let y = g.ty(g.outputs[0].node);
    assert_eq!(y.shape, Shape(vec![Dim::sym("d0"), Dim::Static(1), Dim::sym("d2 - 3"), Dim::sym("d3 - 3")]));
    for (b, h, w) in [(1usize, 6usize, 5usize), (2, 9, 7)] {
        let x = HostTensor::random(sinter_core::DType::F32, vec![b, 1, h, w], h as u64, -1.0, 1.0);
        let want = run_cpu(&m.graph_for(&[vec![b, 1, h, w]]).unwrap(), std::slice::from_ref(&x));
        let got = run_cpu(&g, &[x]);
        assert_eq!(got[0].shape, vec![b, 1, h - 3, w - 3]);
        assert_eq!(got[0].to_f64_vec(), want[0].to_f64_vec());
    }
}

/// A string attribute.
fn attr_s(name: &str, v: &str) -> sinter_onnx::proto::AttributeProto {
    sinter_onnx::proto::AttributeProto {
        name: Some(name.into()),
        s: Some(v.as_bytes().to_vec()),
        r#type: Some(3),
        ..Default::default()
    }
}

#[test]
fn spatial_ops_on_symbolic_height_and_width() {
    // Resize x2 (linear) → ConvTranspose (stride 2) → AveragePool (stride 2, padded) → Resize
    // x0.5 (nearest) → CumSum along the width → DepthToSpace: every extent an expression of h, w.
    let wt: Vec<f32> = (0..2 * 4 * 4 * 4).map(|i| ((i * 5) % 13) as f32 / 13.0 - 0.5).collect();
    let m = model(
        vec![
            node("Resize", &["x", "", "up"], &["r"], vec![attr_s("mode", "linear")]),
            node(
                "ConvTranspose",
                &["r", "wt"],
                &["t"],
                vec![attr_ints("strides", &[2, 2]), attr_ints("pads", &[1, 1, 1, 1])],
            ),
            node(
                "AveragePool",
                &["t"],
                &["a"],
                vec![
                    attr_ints("kernel_shape", &[3, 3]),
                    attr_ints("strides", &[2, 2]),
                    attr_ints("pads", &[1, 1, 1, 1]),
                ],
            ),
            node(
                "Resize",
                &["a", "", "down"],
                &["n"],
                vec![attr_s("coordinate_transformation_mode", "asymmetric"), attr_s("nearest_mode", "floor")],
            ),
            node("CumSum", &["n", "axis"], &["c"], vec![]),
            node("DepthToSpace", &["c"], &["y"], vec![attr_i("blocksize", 2), attr_s("mode", "CRD")]),
        ],
        vec![vi("x", F32, &[None, Some(2), None, None])],
        vec![vi("y", F32, &[None, Some(1), None, None])],
        vec![
            f32_init("up", &[4], &[1.0, 1.0, 2.0, 2.0]),
            f32_init("down", &[4], &[1.0, 1.0, 0.5, 0.5]),
            f32_init("wt", &[2, 4, 4, 4], &wt),
            i64_init("axis", &[3]),
        ],
    );
    let m = sinter_onnx::load_bytes(&bytes(&m)).unwrap();
    let g = m.graph().unwrap();
    sinter_core::verify::verify(&g).unwrap();
    let y = g.ty(g.outputs[0].node);
    assert_eq!(y.shape, Shape(vec![Dim::sym("d0"), Dim::Static(1), Dim::sym("2*d2"), Dim::sym("2*d3")]));
    for (b, h, w) in [(1usize, 3usize, 4usize), (2, 5, 2)] {
        let x = HostTensor::random(sinter_core::DType::F32, vec![b, 2, h, w], (h * w) as u64, -1.0, 1.0);
        let want = run_cpu(&m.graph_for(&[vec![b, 2, h, w]]).unwrap(), std::slice::from_ref(&x));
        let got = run_cpu(&g, &[x]);
        assert_eq!(got[0].shape, vec![b, 1, 2 * h, 2 * w]);
        let worst =
            got[0].to_f64_vec().iter().zip(want[0].to_f64_vec()).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
        assert!(worst < 1e-5, "{worst}");
    }
}

#[test]
fn symbolic_imports_that_cannot_be_typed_are_refused_naming_the_node() {
    // A symbolic spatial extent whose strided output is no polynomial of it: floor((h - 3) / 2) + 1.
    let m = model(
        vec![node("Conv", &["x", "w"], &["y"], vec![attr_ints("strides", &[2, 1])])],
        vec![vi("x", F32, &[None, Some(1), None, Some(4)])],
        vec![vi("y", F32, &[None, Some(1), None, Some(2)])],
        vec![f32_init("w", &[1, 1, 3, 3], &[0.0; 9])],
    );
    let e = sinter_onnx::load_bytes(&bytes(&m)).unwrap().graph().unwrap_err();
    assert!(e.to_string().contains("Conv") && e.to_string().contains("symbolic extent d2"), "{e}");
    // Symbolic spatial extents through a pooling that computes per-position divisors.
    let m = model(
        vec![node("AveragePool", &["x"], &["y"], vec![attr_ints("kernel_shape", &[2, 2]), attr_i("ceil_mode", 1)])],
        vec![vi("x", F32, &[None, Some(1), None, Some(4)])],
        vec![vi("y", F32, &[None, Some(1), None, Some(3)])],
        vec![],
    );
    let e = sinter_onnx::load_bytes(&bytes(&m)).unwrap().graph().unwrap_err();
    assert!(matches!(e, OnnxError::Unsupported { .. }), "{e}");
    assert!(e.to_string().contains("AveragePool") && e.to_string().contains("static"), "{e}");
    // A -1 that is no expression of the symbols: 6*d0 elements into rows of 4.
    let m = model(
        vec![node("Reshape", &["x", "shape"], &["y"], vec![])],
        vec![vi("x", F32, &[None, Some(6)])],
        vec![vi("y", F32, &[Some(4), None])],
        vec![i64_init("shape", &[4, -1])],
    );
    let e = sinter_onnx::load_bytes(&bytes(&m)).unwrap().graph().unwrap_err();
    assert!(e.to_string().contains("Reshape") && e.to_string().contains("-1"), "{e}");
    // The checks of static imports stay: two -1s.
    let m = model(
        vec![
            node("Shape", &["x"], &["s"], vec![]),
            node("Concat", &["s", "m"], &["shape"], vec![attr_i("axis", 0)]),
            node("Reshape", &["x", "shape"], &["y"], vec![]),
        ],
        vec![vi("x", F32, &[None, Some(6)])],
        vec![vi("y", F32, &[None, None, None, None])],
        vec![i64_init("m", &[-1, -1])],
    );
    let e = sinter_onnx::load_bytes(&bytes(&m)).unwrap().graph().unwrap_err();
    assert!(e.to_string().contains("more than one -1"), "{e}");
}

#[test]
fn split_and_slice_of_a_static_axis_keep_the_symbolic_batch() {
    let m = model(
        vec![
            node("Split", &["x", "sizes"], &["a", "b"], vec![attr_i("axis", 1)]),
            node("Slice", &["b", "st", "en", "ax"], &["y"], vec![]),
        ],
        vec![vi("x", F32, &[None, Some(5)])],
        vec![vi("a", F32, &[None, Some(2)]), vi("y", F32, &[None, Some(2)])],
        vec![i64_init("sizes", &[2, 3]), i64_init("st", &[1]), i64_init("en", &[i64::MAX]), i64_init("ax", &[1])],
    );
    let g = sinter_onnx::load_bytes(&bytes(&m)).unwrap().graph().unwrap();
    sinter_core::verify::verify(&g).unwrap();
    let x = HostTensor::f32([2, 5], (0..10).map(|i| i as f32).collect()).unwrap();
    let outs = run_cpu(&g, &[x]);
    assert_eq!(outs[0].to_f64_vec(), vec![0.0, 1.0, 5.0, 6.0]);
    assert_eq!(outs[1].to_f64_vec(), vec![3.0, 4.0, 8.0, 9.0]);
}
