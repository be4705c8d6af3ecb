//! Independent references the workloads' expected outputs are computed with: plain f64 loops
//! (matmul, row softmax, erf and GELU), rounded by the caller where PyTorch stores a tensor.

/// `a @ b` for `batch` pairs of row-major matrices: a is [m, k]; b is [k, n], or [n, k] when
/// `b_transposed` (so the result is `a @ b^T`).
pub(super) fn ref_matmul(
    a: &[f64],
    b: &[f64],
    batch: usize,
    m: usize,
    k: usize,
    n: usize,
    b_transposed: bool,
) -> Vec<f64> {
    let mut out = vec![0.0; batch * m * n];
    for bi in 0..batch {
        let (a, b) = (&a[bi * m * k..(bi + 1) * m * k], &b[bi * k * n..(bi + 1) * k * n]);
        for i in 0..m {
            for j in 0..n {
                let mut s = 0.0;
                for p in 0..k {
                    let bv = if b_transposed { b[j * k + p] } else { b[p * n + j] };
                    s += a[i * k + p] * bv;
                }
                out[bi * m * n + i * n + j] = s;
            }
        }
    }
    out
}

/// Softmax of each row of length `c`, computed as exp(x - max) / sum.
pub(super) fn ref_softmax_rows(x: &[f64], c: usize) -> Vec<f64> {
    let mut out = Vec::with_capacity(x.len());
    for row in x.chunks(c) {
        let m = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let e: Vec<f64> = row.iter().map(|&v| (v - m).exp()).collect();
        let s: f64 = e.iter().sum();
        out.extend(e.iter().map(|&v| v / s));
    }
    out
}

/// erf(x) from the series `2/sqrt(pi) * exp(-x^2) * sum_n 2^n x^(2n+1) / (1*3*...*(2n+1))`, whose
/// terms are all positive (no cancellation); |erf(x)| rounds to 1 beyond |x| = 6.
pub(super) fn erf(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    let a = x.abs();
    if a >= 6.0 {
        return x.signum();
    }
    let mut term = a;
    let mut sum = a;
    let mut n = 0.0;
    while term > sum * 1e-17 {
        n += 1.0;
        term *= 2.0 * a * a / (2.0 * n + 1.0);
        sum += term;
    }
    (2.0 / std::f64::consts::PI.sqrt() * (-a * a).exp() * sum).copysign(x)
}

/// GELU, exact form.
pub(super) fn gelu_erf(x: f64) -> f64 {
    0.5 * x * (1.0 + erf(x / std::f64::consts::SQRT_2))
}
