//! Models that ask for absurd amounts of memory or work fail at import with an error naming the
//! node and the size (the host-memory budget of `sinter_core::budget`, the graph-size cap),
//! instead of aborting in the allocator or unrolling for minutes.

mod common;
use common::*;

use sinter_core::{DType, HostTensor};
use sinter_onnx::proto::{AttributeProto, GraphProto, ModelProto, TensorProto, attribute_proto::AttributeType};

/// The import error of `m` specialized to `shapes` (or to `inputs` when given).
fn import_err(m: &ModelProto, shapes: &[Vec<usize>], inputs: Option<&[HostTensor]>) -> String {
    let m = sinter_onnx::load_bytes(&bytes(m)).expect("the model decodes");
    let r = match inputs {
        Some(t) => m.graph_for_inputs(t),
        None => m.graph_for(shapes),
    };
    match r {
        Ok(_) => panic!("the model was imported"),
        Err(e) => e.to_string(),
    }
}

fn assert_budget(e: &str, node: &str) {
    assert!(e.contains("host memory limit") && e.contains(node), "{e}");
}

#[test]
fn huge_broadcasts_and_fills_are_refused_at_import() {
    let big = [1i64 << 20, 1 << 20];
    // Expand to a constant shape.
    let m = model(
        vec![node("Expand", &["x", "s"], &["y"], vec![])],
        vec![vi("x", F32, &fixed(&[1]))],
        vec![vi("y", F32, &[None, None])],
        vec![i64_init("s", &big)],
    );
    assert_budget(&import_err(&m, &[vec![1]], None), "Expand");
    // Expand to a shape read from a run-time input.
    let m = model(
        vec![node("Expand", &["x", "s"], &["y"], vec![])],
        vec![vi("x", F32, &fixed(&[1])), vi("s", I64, &fixed(&[2]))],
        vec![vi("y", F32, &[None, None])],
        vec![],
    );
    let ins = [HostTensor::f32([1], vec![1.0]).unwrap(), HostTensor::from_i64(DType::I64, vec![2], &big)];
    assert_budget(&import_err(&m, &[], Some(&ins)), "Expand");
    // ConstantOfShape, Tile and Pad.
    let m = model(
        vec![node("ConstantOfShape", &["s"], &["y"], vec![])],
        vec![],
        vec![vi("y", F32, &[None, None])],
        vec![i64_init("s", &big)],
    );
    assert_budget(&import_err(&m, &[], None), "ConstantOfShape");
    let m = model(
        vec![node("Tile", &["x", "r"], &["y"], vec![])],
        vec![vi("x", F32, &fixed(&[2, 2]))],
        vec![vi("y", F32, &[None, None])],
        vec![i64_init("r", &[1 << 16, 1 << 16])],
    );
    assert_budget(&import_err(&m, &[vec![2, 2]], None), "Tile");
    let m = model(
        vec![node("Pad", &["x", "p"], &["y"], vec![])],
        vec![vi("x", F32, &fixed(&[2, 2]))],
        vec![vi("y", F32, &[None, None])],
        vec![i64_init("p", &[0, 0, 1 << 20, 1 << 20])],
    );
    assert_budget(&import_err(&m, &[vec![2, 2]], None), "Pad");
}

fn attr_g(name: &str, g: GraphProto) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        g: Some(g),
        r#type: Some(AttributeType::Graph as i32),
        ..Default::default()
    }
}

fn scalar_i64(name: &str, v: i64) -> TensorProto {
    let mut t = i64_init(name, &[v]);
    t.dims = vec![];
    t
}

/// A Loop of 4096 iterations whose body is a Loop of 4096 iterations: a 1 KB model that used to
/// unroll for half a minute and abort at 6 GB.
#[test]
fn nested_loops_stop_at_the_graph_size_cap() {
    let bool_t = 9;
    let inner_body = GraphProto {
        name: Some("inner".into()),
        node: vec![node("Identity", &["c_in"], &["c_out"], vec![]), node("Add", &["v_in", "one"], &["v_out"], vec![])],
        input: vec![vi("i", I64, &fixed(&[])), vi("c_in", bool_t, &fixed(&[])), vi("v_in", F32, &fixed(&[1]))],
        output: vec![vi("c_out", bool_t, &fixed(&[])), vi("v_out", F32, &fixed(&[1]))],
        ..Default::default()
    };
    let outer_body = GraphProto {
        name: Some("outer".into()),
        node: vec![
            node("Identity", &["oc_in"], &["oc_out"], vec![]),
            node("Loop", &["n", "", "ov_in"], &["ov_out"], vec![attr_g("body", inner_body)]),
        ],
        input: vec![vi("j", I64, &fixed(&[])), vi("oc_in", bool_t, &fixed(&[])), vi("ov_in", F32, &fixed(&[1]))],
        output: vec![vi("oc_out", bool_t, &fixed(&[])), vi("ov_out", F32, &fixed(&[1]))],
        ..Default::default()
    };
    let m = model(
        vec![node("Loop", &["n", "", "x"], &["y"], vec![attr_g("body", outer_body)])],
        vec![vi("x", F32, &fixed(&[1]))],
        vec![vi("y", F32, &fixed(&[1]))],
        vec![scalar_i64("n", 4096), f32_init("one", &[1], &[1.0])],
    );
    assert!(bytes(&m).len() < 1024);
    let start = std::time::Instant::now();
    let e = import_err(&m, &[vec![1]], None);
    assert!(e.contains("Loop") && e.contains("IR nodes"), "{e}");
    eprintln!("refused after {:?}", start.elapsed());
}

/// An initializer larger than half the host-memory budget (but under the fixed 16 GiB cap that
/// was the only check before) is refused from its declared size, before its data is read.
#[test]
fn oversized_initializers_are_refused_before_reading() {
    let cap = (sinter_core::budget::host_limit() / 2).min(16 << 30);
    let elems = (cap / 4 + 1) as i64;
    let w = TensorProto { name: Some("w".into()), dims: vec![elems], data_type: Some(F32), ..Default::default() };
    let m = model(
        vec![node("Add", &["x", "w"], &["y"], vec![])],
        vec![vi("x", F32, &fixed(&[1]))],
        vec![vi("y", F32, &[None])],
        vec![w],
    );
    let e = sinter_onnx::load_bytes(&bytes(&m)).unwrap_err();
    assert!(matches!(e, sinter_onnx::OnnxError::TooLarge { .. }), "{e}");
    assert!(e.to_string().contains("\"w\""), "{e}");
}

/// ScatterElements of 100k updates into 100k elements with constant indices: the one-hot
/// lowering needed 10^10 mask elements (80 GB on the CPU reference); the inverse-map lowering
/// needs O(10^5).
#[test]
fn large_constant_scatters_do_not_build_one_hot_masks() {
    let n = 100_000usize;
    let perm: Vec<i64> = (0..n as i64).rev().collect();
    let m = model(
        vec![node("ScatterElements", &["x", "i", "u"], &["y"], vec![])],
        vec![vi("x", F32, &fixed(&[n as i64])), vi("u", F32, &fixed(&[n as i64]))],
        vec![vi("y", F32, &fixed(&[n as i64]))],
        vec![i64_init("i", &perm)],
    );
    let m = sinter_onnx::load_bytes(&bytes(&m)).unwrap();
    let g = m.graph_for(&[vec![n], vec![n]]).unwrap();
    let biggest = g.nodes.iter().filter_map(|nd| nd.ty.shape.numel()).max().unwrap();
    assert!(biggest <= n, "a value of {biggest} elements");
    let x = HostTensor::from_f64(DType::F32, vec![n], &vec![0.0; n]);
    let u: Vec<f64> = (0..n).map(|k| k as f64).collect();
    let y = run_cpu(&g, &[x, HostTensor::from_f64(DType::F32, vec![n], &u)]);
    let y = y[0].to_f64_vec();
    assert_eq!((y[0], y[n - 1], y[7]), ((n - 1) as f64, 0.0, (n - 8) as f64));
}

/// The constant-index scatters combine duplicate targets in update order (one gather per round).
#[test]
fn constant_scatters_with_duplicates_and_rows() {
    let x = HostTensor::from_f64(DType::F32, vec![4], &[1.0, 2.0, 3.0, 4.0]);
    let u = HostTensor::from_f64(DType::F32, vec![3], &[10.0, 20.0, 30.0]);
    for (red, want) in
        [("add", [31.0, 2.0, 3.0, 34.0]), ("none", [20.0, 2.0, 3.0, 30.0]), ("max", [20.0, 2.0, 3.0, 30.0])]
    {
        let m = model(
            vec![node("ScatterElements", &["x", "i", "u"], &["y"], vec![attr_s("reduction", red)])],
            vec![vi("x", F32, &fixed(&[4])), vi("u", F32, &fixed(&[3]))],
            vec![vi("y", F32, &fixed(&[4]))],
            vec![i64_init("i", &[0, -4, -1])],
        );
        let g = sinter_onnx::load_bytes(&bytes(&m)).unwrap().graph_for(&[vec![4], vec![3]]).unwrap();
        assert_eq!(run_cpu(&g, &[x.clone(), u.clone()])[0].to_f64_vec(), want, "{red}");
    }
    // ScatterND of rows of a [3, 2] tensor.
    let mut i = i64_init("i", &[2, 0]);
    i.dims = vec![2, 1];
    let m = model(
        vec![node("ScatterND", &["x", "i", "u"], &["y"], vec![])],
        vec![vi("x", F32, &fixed(&[3, 2])), vi("u", F32, &fixed(&[2, 2]))],
        vec![vi("y", F32, &fixed(&[3, 2]))],
        vec![i],
    );
    let g = sinter_onnx::load_bytes(&bytes(&m)).unwrap().graph_for(&[vec![3, 2], vec![2, 2]]).unwrap();
    let x = HostTensor::from_f64(DType::F32, vec![3, 2], &[0.0; 6]);
    let u = HostTensor::from_f64(DType::F32, vec![2, 2], &[1.0, 2.0, 3.0, 4.0]);
    assert_eq!(run_cpu(&g, &[x, u])[0].to_f64_vec(), vec![3.0, 4.0, 0.0, 0.0, 1.0, 2.0]);
}

/// ScatterND of 4096 rows into a [4096, 256] tensor with run-time indices (a cache update): the
/// one-hot lowering built [4096, 4096, 256] values (4.3e9 elements, 17 GB in f32: refused by the
/// budget of a 23 GB machine, computed on larger ones); selecting the last update per row costs
/// a [4096, 4096] mask and a gather.
#[test]
fn large_run_time_scatter_nd_builds_no_mask_per_element() {
    let (m, rest) = (4096usize, 256usize);
    let model =
        scatter_model("ScatterND", "none", &[m as i64, rest as i64], &[m as i64, 1], &[m as i64, rest as i64], None, 0);
    let model = sinter_onnx::load_bytes(&bytes(&model)).unwrap();
    let g = model.graph_for(&[vec![m, rest], vec![m, rest], vec![m, 1]]).unwrap_or_else(|e| panic!("{e}"));
    let biggest = g.nodes.iter().filter_map(|nd| nd.ty.shape.numel()).max().unwrap();
    assert!(biggest <= m * m, "a value of {biggest} elements");
    // Small enough to check on the CPU reference at a quarter of the size: a reversed permutation.
    let (m, rest) = (1024usize, 8usize);
    let model =
        scatter_model("ScatterND", "none", &[m as i64, rest as i64], &[m as i64, 1], &[m as i64, rest as i64], None, 0);
    let g = sinter_onnx::load_bytes(&bytes(&model))
        .unwrap()
        .graph_for(&[vec![m, rest], vec![m, rest], vec![m, 1]])
        .unwrap();
    let x = HostTensor::from_f64(DType::F32, vec![m, rest], &vec![-1.0; m * rest]);
    let u: Vec<f64> = (0..m * rest).map(|k| k as f64).collect();
    let u = HostTensor::from_f64(DType::F32, vec![m, rest], &u);
    let i: Vec<i64> = (0..m as i64).rev().collect();
    let y = run_cpu(&g, &[x, u, HostTensor::from_i64(DType::I64, vec![m, 1], &i)])[0].to_f64_vec();
    for (r, row) in y.chunks(rest).enumerate() {
        let src = m - 1 - r;
        assert!(row.iter().enumerate().all(|(c, &v)| v == (src * rest + c) as f64), "row {r}: {row:?}");
    }
}

/// With a reduction, run-time indices still need the one-hot masks (m × updates × row): a size
/// over the budget is refused before the graph is built, naming the op, the reduction and why.
#[test]
fn run_time_scatter_reductions_over_the_budget_say_why() {
    let (m, rest) = (1i64 << 16, 1i64 << 12);
    let model = scatter_model("ScatterND", "add", &[m, rest], &[m, 1], &[m, rest], None, 0);
    let e = import_err(
        &model,
        &[vec![m as usize, rest as usize], vec![m as usize, rest as usize], vec![m as usize, 1]],
        None,
    );
    assert_budget(&e, "ScatterND");
    assert!(e.contains("run-time indices") && e.contains("reduction \"add\""), "{e}");
}
