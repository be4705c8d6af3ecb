use super::*;
use crate::prelude::*;

/// Capabilities of the host without f64.
fn no_f64() -> Capabilities {
    let mut c = Capabilities::host();
    c.dtypes.retain(|&d| d != DType::F64);
    c
}

/// Runs a partition's segments on the CPU reference, chaining values as the runtime does.
fn run_segments(p: &Partition, inputs: &[HostTensor]) -> Vec<HostTensor> {
    let mut outs: Vec<Vec<HostTensor>> = Vec::new();
    let read = |r: &ValueRef, outs: &Vec<Vec<HostTensor>>| match r {
        ValueRef::Input(k) => inputs[*k].clone(),
        ValueRef::Segment { segment, output } => outs[*segment][*output].clone(),
        ValueRef::Constant(t) => (**t).clone(),
    };
    for s in &p.segments {
        let ins: Vec<HostTensor> = s.inputs.iter().map(|r| read(r, &outs)).collect();
        outs.push(crate::cpu::run(&s.graph, &ins).unwrap());
    }
    p.outputs.iter().map(|r| read(r, &outs)).collect()
}

fn check(g: &Graph, inputs: &[HostTensor]) -> Partition {
    let ir = g.build().unwrap();
    let breaks = detect(&ir, &no_f64());
    let p = partition(&ir, &breaks).unwrap();
    for s in &p.segments {
        crate::verify::verify(&s.graph).unwrap();
        // Every segment input comes from the graph or an earlier segment.
        let me = p.segments.iter().position(|x| std::ptr::eq(x, s)).unwrap();
        for r in &s.inputs {
            if let ValueRef::Segment { segment, .. } = r {
                assert!(*segment < me);
            }
        }
    }
    for w in p.segments.windows(2) {
        assert_ne!(w[0].side, w[1].side, "adjacent segments of one side were not merged");
    }
    let got = run_segments(&p, inputs);
    let want = crate::cpu::run(g, inputs).unwrap();
    assert_eq!(got.len(), want.len());
    for (a, b) in got.iter().zip(&want) {
        assert_eq!(a, b);
    }
    p
}

fn sides(p: &Partition) -> Vec<Side> {
    p.segments.iter().map(|s| s.side).collect()
}

#[test]
fn unsupported_reason_names_backend_and_dtype() {
    let g = Graph::new();
    let x = g.input("x", DType::F32, [2]);
    g.output(&x.cast(DType::F64));
    let ir = g.build().unwrap();
    let b = detect(&ir, &no_f64());
    assert_eq!(b.len(), 1);
    assert_eq!(
        b[0].to_string(),
        format!("graph break: node %{} (cast to f64): the interp backend does not support f64", b[0].node)
    );
    assert!(detect(&ir, &Capabilities::host()).is_empty());
}

#[test]
fn segment_boundaries_at_a_dtype_change() {
    let g = Graph::new();
    let x = g.input("x", DType::F32, [3, 4]);
    let y = (&x * 2.0).exp();
    let d = y.cast(DType::F64);
    let d = (&d + &d).cast(DType::F32);
    g.output(&(d.relu() + 1.0));
    let x = HostTensor::random(DType::F32, vec![3, 4], 1, -1.0, 1.0);
    let p = check(&g, &[x]);
    assert_eq!(sides(&p), [Side::Compiled, Side::Fallback, Side::Compiled]);
    // The cast back to f32 reads an f64 operand: it runs on the CPU too.
    assert!(p.breaks.iter().any(|b| b.op == "cast to f32" && b.reason.contains("operand")), "{:?}", p.breaks);
    assert!(p.segments[2].graph.inputs.iter().all(|&i| p.segments[2].graph.ty(i).dtype == DType::F32));
}

#[test]
fn alternating_chain_and_independent_work_merges() {
    let g = Graph::new();
    let x = g.input("x", DType::F32, [5]);
    let mut v = x.clone();
    for _ in 0..3 {
        v = v.sin().cast(DType::F64).exp().cast(DType::F32);
    }
    // Independent f32 work interleaved in the arena joins the first compiled segment.
    let w = x.cos();
    g.output(&(&v + &w));
    let x = HostTensor::random(DType::F32, vec![5], 2, -1.0, 1.0);
    let p = check(&g, &[x]);
    assert_eq!(p.segments.len(), 7, "{:?}", sides(&p));
    assert_eq!(p.segments[0].side, Side::Compiled);
}

#[test]
fn outputs_from_fallback_segments_inputs_used_by_both_sides_and_an_input_output() {
    let g = Graph::new();
    let x = g.input("x", DType::F32, [2, 3]);
    let z = g.input("z", DType::F64, [2, 3]);
    let a = x.exp();
    let b = &x.cast(DType::F64) + &z;
    g.output(&a);
    g.output(&b);
    g.output(&x);
    let inputs = [
        HostTensor::random(DType::F32, vec![2, 3], 3, -1.0, 1.0),
        HostTensor::random(DType::F64, vec![2, 3], 4, -1.0, 1.0),
    ];
    let p = check(&g, &inputs);
    assert_eq!(p.outputs[2], ValueRef::Input(0));
    let fb = p.segments.iter().position(|s| s.side == Side::Fallback).unwrap();
    assert!(matches!(p.outputs[1], ValueRef::Segment { segment, .. } if segment == fb));
    // x feeds both sides directly.
    for s in &p.segments {
        assert!(s.inputs.contains(&ValueRef::Input(0)), "{:?}", s.inputs);
    }
}

#[test]
fn constants_are_copied_and_constant_outputs_read_directly() {
    let g = Graph::new();
    let x = g.input("x", DType::F32, [4]);
    let c = g.constant(HostTensor::f32([4], vec![1.0, 2.0, 3.0, 4.0]).unwrap());
    let y = (&x + &c).cast(DType::F64).sqrt().cast(DType::F32);
    g.output(&(&y * &c));
    g.output(&c);
    let x = HostTensor::random(DType::F32, vec![4], 5, 0.0, 1.0);
    let p = check(&g, &[x]);
    assert!(matches!(p.outputs[1], ValueRef::Constant(_)));
    for s in &p.segments {
        assert!(!s.inputs.iter().any(|r| matches!(r, ValueRef::Constant(_))), "constants travel as inputs");
    }
}

#[test]
fn no_breaks_is_one_compiled_segment() {
    let g = Graph::new();
    let x = g.input("x", DType::F32, [4]);
    g.output(&x.exp());
    let x = HostTensor::random(DType::F32, vec![4], 6, 0.0, 1.0);
    let p = check(&g, &[x]);
    assert_eq!(sides(&p), [Side::Compiled]);
    assert!(p.breaks.is_empty());
}
