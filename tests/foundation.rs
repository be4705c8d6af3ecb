//! End-to-end checks of the root crate: the issue's example on the CPU reference against an
//! independent computation, and the `sinter` binary's `explain` and `demo` subcommands.

use sinter::prelude::*;
use std::process::Command;

/// erf by Simpson's rule on 2/sqrt(pi) * exp(-t^2) over [0, x] (independent of every erf in the
/// crates under test).
fn erf(x: f64) -> f64 {
    let n = 1000;
    let h = x / n as f64;
    let f = |t: f64| (-t * t).exp();
    let mut s = f(0.0) + f(x);
    for i in 1..n {
        s += f(i as f64 * h) * if i % 2 == 1 { 4.0 } else { 2.0 };
    }
    s * h / 3.0 * 2.0 / std::f64::consts::PI.sqrt()
}

#[test]
fn simpson_erf_is_accurate() {
    assert!((erf(1.0) - 0.842_700_792_949_714_9).abs() < 1e-10);
    assert!((erf(-2.5) + 0.999_593_047_982_555).abs() < 1e-10);
}

#[test]
fn issue_example_layer_norm_gelu_on_cpu() -> Result<(), sinter::Error> {
    let (rows, cols) = (64, 96);
    let g = Graph::new();
    let x = g.input("x", DType::F32, [rows, cols]);
    let w = g.input("w", DType::F32, [cols]);
    let b = g.input("b", DType::F32, [cols]);
    let y = x.layer_norm(&w, &b, 1e-5).gelu();
    g.output(&y);
    let inputs = vec![
        HostTensor::random(DType::F32, vec![rows, cols], 1, -3.0, 3.0),
        HostTensor::random(DType::F32, vec![cols], 2, 0.5, 1.5),
        HostTensor::random(DType::F32, vec![cols], 3, -0.5, 0.5),
    ];
    let out = sinter::cpu::run(&g, &inputs)?;

    // The same computation written out: per row, mean and biased variance, normalize, affine, GELU.
    let (xv, wv, bv) = (inputs[0].to_f64_vec(), inputs[1].to_f64_vec(), inputs[2].to_f64_vec());
    let mut want = Vec::with_capacity(rows * cols);
    for r in 0..rows {
        let row = &xv[r * cols..(r + 1) * cols];
        let mean = row.iter().sum::<f64>() / cols as f64;
        let var = row.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / cols as f64;
        for c in 0..cols {
            let n = ((row[c] - mean) / (var + 1e-5).sqrt() * wv[c] + bv[c]) as f32 as f64;
            want.push(0.5 * n * (1.0 + erf(n / 2f64.sqrt())));
        }
    }
    let want = HostTensor::from_f64(DType::F32, vec![rows, cols], &want);
    assert_eq!(out.len(), 1);
    let ratio = out[0].tolerance_ratio(&want, 1e-5, 1e-6);
    assert!(ratio <= 1.0, "captured graph: ratio {ratio}");

    // After the pass pipeline (decomposed into primitives), the result is the same.
    let optimized = sinter::passes::optimize(&g.build()?)?;
    assert!(optimized.nodes.iter().all(|n| !n.op.is_composite()));
    let out2 = sinter::cpu::run(&optimized, &inputs)?;
    let ratio = out2[0].tolerance_ratio(&want, 1e-5, 1e-6);
    assert!(ratio <= 1.0, "optimized graph: ratio {ratio}");
    Ok(())
}

fn sinter(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_sinter")).args(args).output().expect("the sinter binary runs")
}

#[test]
fn explain_shows_the_decomposed_softmax() {
    let o = sinter(&["explain", "--workload", "softmax_8192x8192_f32"]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "stderr: {}", String::from_utf8_lossy(&o.stderr));
    let (captured, after) = stdout.split_once("== after decompose").expect("an 'after decompose' section");
    assert!(captured.contains("softmax(%0, axis=1)"), "{stdout}");
    assert!(captured.contains("f32[8192, 8192]"), "{stdout}");
    for op in ["reduce_max(", "exp(", "reduce_sum(", "div("] {
        assert!(after.contains(op), "missing {op} after decompose:\n{stdout}");
    }
    assert!(!after.contains("softmax("), "{stdout}");
    assert!(stdout.contains("== after dce"), "{stdout}");
}

#[test]
fn explain_reduced_scale_and_errors() {
    let o = sinter(&["explain", "--workload", "matmul_softmax_4096_bf16", "--scale", "reduced"]);
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stdout).contains("bf16[67, 33]"));

    let o = sinter(&["explain", "--workload", "no_such_workload"]);
    assert_eq!(o.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.contains("no workload named \"no_such_workload\"") && stderr.contains("cos_16M_f32"), "{stderr}");

    let o = sinter(&["explain", "--workload", "cos_16M_f32", "--scale", "huge"]);
    assert_eq!(o.status.code(), Some(1));
}

#[test]
fn demo_checks_workloads_against_the_reference() {
    let o = sinter(&["demo", "--only", "add_relu_mul_10M_f32,attention_b8h16s1024d64_bf16"]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(stdout.lines().filter(|l| l.ends_with("  PASS")).count(), 2, "{stdout}");
    let o = sinter(&["demo", "--only", "nope"]);
    assert_eq!(o.status.code(), Some(1));
}
