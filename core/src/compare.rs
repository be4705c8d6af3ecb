//! The one comparison of computed outputs with expected ones, shared by the backend test suite
//! (`testsuite::check`), the ONNX conformance runner and `sinter bench --check`.
//!
//! Contract of [`compare_outputs`]:
//! * the output lists have the same length, and it is not zero (a case with no outputs proves
//!   nothing);
//! * every output pair has the same dtype, shape and element count;
//! * integers and bools are equal exactly (compared as i64, never through f64);
//! * floats ([`element_ratio`]): NaN matches only NaN; an infinity matches only the same infinity
//!   (sign included); finite values match when `|got - want| <= atol + rtol * |want|`. `+0` and
//!   `-0` are equal. A mismatch of NaN or infinity has ratio `+inf`, never NaN, so no max-based
//!   fold can drop it.

use crate::dtype::DType;
use crate::tensor::HostTensor;

/// `|got - want| / (atol + rtol * |want|)` with NaN and infinities handled: 0 when both are NaN
/// or both the same infinity (or equal), `+inf` when only one is NaN or either is infinite and
/// they differ. Never NaN. At most 1 passes.
pub fn element_ratio(got: f64, want: f64, rtol: f64, atol: f64) -> f64 {
    if got.is_nan() || want.is_nan() {
        return if got.is_nan() && want.is_nan() { 0.0 } else { f64::INFINITY };
    }
    if got == want {
        return 0.0;
    }
    if got.is_infinite() || want.is_infinite() {
        return f64::INFINITY;
    }
    let diff = (got - want).abs();
    let bound = atol + rtol * want.abs();
    // A difference that overflows, or a zero bound, is infinitely far off (never 0/0: got != want).
    if bound > 0.0 { diff / bound } else { f64::INFINITY }
}

/// The outcome of a comparison.
#[derive(Clone, Debug, PartialEq)]
pub struct Comparison {
    /// Largest absolute difference (`+inf` for a NaN/infinity mismatch or a structural one).
    pub max_abs: f64,
    /// Largest [`element_ratio`] (`+inf` for a structural mismatch); at most 1 passes.
    pub max_ratio: f64,
    /// What does not match: the structural problem, or the count and the first mismatching
    /// elements with their indices. `None` when everything matches.
    pub problem: Option<String>,
}

impl Comparison {
    /// True when everything matched.
    pub fn ok(&self) -> bool {
        self.problem.is_none()
    }

    fn structural(msg: String) -> Comparison {
        Comparison { max_abs: f64::INFINITY, max_ratio: f64::INFINITY, problem: Some(msg) }
    }
}

/// The multi-dimensional index of flat position `i` in a row-major `shape`.
fn unflatten(shape: &[usize], mut i: usize) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for (k, &n) in shape.iter().enumerate().rev() {
        if n > 0 {
            idx[k] = i % n;
            i /= n;
        }
    }
    idx
}

/// Compares one output with its expected value; `bounds` is `(rtol, atol)` for floats and is
/// ignored for integers and bools, which must be equal exactly.
pub fn compare_tensor(got: &HostTensor, want: &HostTensor, bounds: (f64, f64)) -> Comparison {
    if got.dtype() != want.dtype() {
        return Comparison::structural(format!("dtype {} but the reference is {}", got.dtype(), want.dtype()));
    }
    if got.shape != want.shape {
        return Comparison::structural(format!("shape {:?} but the reference is {:?}", got.shape, want.shape));
    }
    if got.numel() != want.numel() {
        return Comparison::structural(format!("{} elements but the reference has {}", got.numel(), want.numel()));
    }
    let (mut max_abs, mut max_ratio) = (0.0f64, 0.0f64);
    let mut bad = Vec::new();
    let mut count = 0usize;
    if want.dtype().is_float() {
        let (rtol, atol) = bounds;
        let (a, b) = (got.to_f64_vec(), want.to_f64_vec());
        for (i, (&x, &y)) in a.iter().zip(&b).enumerate() {
            let r = element_ratio(x, y, rtol, atol);
            let d = if r == 0.0 {
                0.0
            } else if r.is_infinite() {
                f64::INFINITY
            } else {
                (x - y).abs()
            };
            max_abs = max_abs.max(d);
            max_ratio = max_ratio.max(r);
            if r > 1.0 {
                count += 1;
                if bad.len() < 8 {
                    bad.push(format!("at {:?}: got {x} want {y}", unflatten(&want.shape, i)));
                }
            }
        }
        if count > 0 {
            bad.push(format!("(rtol {rtol:e}, atol {atol:e})"));
        }
    } else {
        let (a, b) = (got.to_i64_vec(), want.to_i64_vec());
        for (i, (&x, &y)) in a.iter().zip(&b).enumerate() {
            if x != y {
                count += 1;
                max_ratio = f64::INFINITY;
                max_abs = max_abs.max((x as i128 - y as i128).unsigned_abs() as f64);
                if bad.len() < 8 {
                    // u64 is held as its bits: print it unsigned.
                    let (x, y) = if want.dtype() == DType::U64 {
                        ((x as u64).to_string(), (y as u64).to_string())
                    } else {
                        (x.to_string(), y.to_string())
                    };
                    bad.push(format!("at {:?}: got {x} want {y}", unflatten(&want.shape, i)));
                }
            }
        }
    }
    let problem = (count > 0).then(|| format!("{count} of {} elements differ: {}", want.numel(), bad.join("; ")));
    Comparison { max_abs, max_ratio, problem }
}

/// Compares every output with its expected value (see the module docs); `bounds` gives `(rtol,
/// atol)` per float dtype. The problem names each failing output (`output 1 (f32): ...`).
pub fn compare_outputs(got: &[HostTensor], want: &[HostTensor], bounds: impl Fn(DType) -> (f64, f64)) -> Comparison {
    if want.is_empty() {
        return Comparison::structural("the reference has no outputs: nothing is checked".into());
    }
    if got.len() != want.len() {
        return Comparison::structural(format!("{} outputs but the reference has {}", got.len(), want.len()));
    }
    let mut all = Comparison { max_abs: 0.0, max_ratio: 0.0, problem: None };
    let mut problems = Vec::new();
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let c = compare_tensor(g, w, bounds(w.dtype()));
        all.max_abs = all.max_abs.max(c.max_abs);
        all.max_ratio = all.max_ratio.max(c.max_ratio);
        if let Some(p) = c.problem {
            problems.push(format!("output {i} ({}): {p}", w.dtype()));
        }
    }
    if !problems.is_empty() {
        all.problem = Some(problems.join("\n"));
    }
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f32s(v: &[f32]) -> HostTensor {
        HostTensor::f32([v.len()], v.to_vec()).unwrap()
    }

    #[test]
    fn infinities_of_the_wrong_value_or_sign_fail() {
        // The case of issue 14: inf/inf is NaN, which f64::max dropped, so this passed.
        let (inf, nan) = (f32::INFINITY, f32::NAN);
        let c = compare_outputs(&[f32s(&[0.0, -inf, 1.0])], &[f32s(&[inf, inf, 1.0])], |_| (1e-3, 1e-7));
        assert!(!c.ok() && c.max_ratio.is_infinite() && c.max_abs.is_infinite(), "{c:?}");
        assert!(c.problem.unwrap().starts_with("output 0 (f32): 2 of 3 elements differ"));
        let (inf64, nan64) = (f64::INFINITY, f64::NAN);
        let pairs = [(1.0, nan64), (nan64, 1.0), (inf64, nan64), (nan64, inf64), (f64::MAX, inf64), (inf64, f64::MAX)];
        for (g, w) in pairs.into_iter().chain([(-inf64, inf64), (0.0, inf64)]) {
            let r = element_ratio(g, w, 1e9, 1e9);
            assert!(r.is_infinite() && r > 0.0, "got {g} want {w}: {r}");
        }
        let same = f32s(&[nan, inf, -inf, 1.0, -0.0]);
        let c = compare_outputs(std::slice::from_ref(&same), &[f32s(&[nan, inf, -inf, 1.0, 0.0])], |_| (0.0, 0.0));
        assert!(c.ok() && c.max_ratio == 0.0, "{c:?}");
    }

    #[test]
    fn no_outputs_counts_and_structure_fail() {
        let a = f32s(&[1.0, 2.0]);
        assert!(compare_outputs(&[], &[], |_| (1.0, 1.0)).problem.unwrap().contains("no outputs"));
        assert!(!compare_outputs(std::slice::from_ref(&a), &[a.clone(), a.clone()], |_| (1.0, 1.0)).ok());
        assert!(!compare_outputs(&[a.clone(), a.clone()], std::slice::from_ref(&a), |_| (1.0, 1.0)).ok());
        let b = HostTensor::f32([2, 1], vec![1.0, 2.0]).unwrap();
        assert!(compare_tensor(&a, &b, (1.0, 1.0)).problem.unwrap().contains("shape"));
        let c = HostTensor::from_f64(DType::F64, vec![2], &[1.0, 2.0]);
        assert!(compare_tensor(&c, &a, (1.0, 1.0)).problem.unwrap().contains("dtype"));
        let i = |v: &[i64]| HostTensor::from_i64(DType::I64, vec![v.len()], v);
        // Integers are exact even where f64 cannot tell them apart.
        assert!(!compare_tensor(&i(&[1 << 60]), &i(&[(1 << 60) + 1]), (1.0, 1.0)).ok());
        assert!(compare_tensor(&i(&[5]), &i(&[5]), (0.0, 0.0)).ok());
    }
}
