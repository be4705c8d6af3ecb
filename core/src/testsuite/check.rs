//! Comparison of a backend's outputs with the CPU reference: per-dtype error bounds ([`Tol`]) and
//! an elementwise check ([`compare`], the shared [`crate::compare`]) that never lets a NaN or an
//! infinity through by accident.
//!
//! Contract of [`compare`]:
//! * the output lists have the same length, and it is not zero (a graph with no outputs proves
//!   nothing);
//! * every output pair has the same shape and dtype;
//! * integers and bools are equal exactly;
//! * floats: NaN matches only NaN; an infinity matches only the same infinity; finite values
//!   match when `|got - want| <= atol + rtol * |want|` with `(rtol, atol)` from
//!   [`Tol::bounds`] for the output's dtype. `+0` and `-0` are equal.

use crate::dtype::DType;
use crate::tensor::HostTensor;

/// Unit roundoff of f32 (2^-24): the error of one rounding, relative.
const U32: f64 = 5.960_464_477_539_063e-8;
/// Unit roundoff of TF32 (10 stored mantissa bits, rounded to nearest: 2^-11).
const U_TF32: f64 = 4.882_812_5e-4;

/// An error bound, written at f32 scale and scaled per output dtype by [`Tol::bounds`].
///
/// `rel`/`abs` cover the roundings of the ops themselves (one correctly rounded or few-ulp op:
/// [`Tol::ROUNDED`]); `terms` covers accumulation (`K` of a matmul, the row length of a
/// reduction: an f32 accumulator may differ from the reference's exact sum by about
/// `terms * 2^-24` relative to the magnitude of the terms); `magnitude` is the size of the
/// values the absolute part is relative to (the largest `|term|` of a sum, 1 for most ops).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tol {
    /// Relative bound of the op roundings at f32.
    pub rel: f64,
    /// Absolute bound of the op roundings at f32 (times `magnitude`).
    pub abs: f64,
    /// Terms accumulated (0 for elementwise results).
    pub terms: f64,
    /// Size of the values the absolute part scales with.
    pub magnitude: f64,
}

impl Tol {
    /// Bit-exact (integers, movement, exactly rounded float ops such as add, max, floor).
    pub const EXACT: Tol = Tol { rel: 0.0, abs: 0.0, terms: 0.0, magnitude: 1.0 };
    /// A few ulps of one float op (transcendentals, division): `1e-5` relative, `1e-6` absolute
    /// at f32.
    pub const ROUNDED: Tol = Tol { rel: 1e-5, abs: 1e-6, terms: 0.0, magnitude: 1.0 };

    /// [`Tol::ROUNDED`] plus the accumulation error of a sum of `terms` values of size at most
    /// `magnitude`.
    pub fn sum(terms: usize, magnitude: f64) -> Tol {
        Tol { terms: terms as f64, magnitude, ..Tol::ROUNDED }
    }

    /// This bound with the op-rounding part multiplied by `k` (chains of `k` rounded ops, or an
    /// op whose error grows with its argument, as `sin` of large arguments).
    pub fn times(self, k: f64) -> Tol {
        Tol { rel: self.rel * k, abs: self.abs * k, ..self }
    }

    /// This bound where a contraction of [`terms`](Self::terms) products may have run in TF32
    /// ([`crate::kernel::MatmulBody::tf32`]): each product's operands are rounded to 11
    /// significant bits (relative error up to `2 * 2^-11` per product), and the errors of a sum
    /// grow with the square root of the terms when the roundings are independent (bounded here
    /// by `min(terms, 3 sqrt(terms))` times the per-product error: the worst case for a few
    /// terms, about five standard deviations for many). Used only where a program set TF32,
    /// never for exact-f32 programs.
    pub fn tf32(self) -> Tol {
        let t = self.terms.max(1.0);
        let per_product = 2.0 * U_TF32;
        Tol { rel: self.rel + per_product, abs: self.abs + per_product * t.min(3.0 * t.sqrt()), ..self }
    }

    /// This bound with the absolute part relative to `magnitude` instead.
    pub fn with_magnitude(self, magnitude: f64) -> Tol {
        Tol { magnitude, ..self }
    }

    /// `(rtol, atol)` for an output of `dtype`: the f32-scale bound times the dtype's precision
    /// relative to f32 (f64: 1e-7, so `1e-5` becomes `1e-12`; f16: 200, `2e-3`, about two ulps;
    /// bf16: 1600, `1.6e-2`, about two ulps); accumulation runs in f32 for the half types, in f64
    /// for f64. `None` for integers and bools, which are compared exactly.
    pub fn bounds(&self, dtype: DType) -> Option<(f64, f64)> {
        let (k_out, k_acc) = match dtype {
            DType::F64 => (1e-7, 1e-7),
            DType::F32 => (1.0, 1.0),
            DType::F16 => (200.0, 1.0),
            DType::BF16 => (1600.0, 1.0),
            _ => return None,
        };
        let acc = self.terms * U32 * k_acc;
        Some((self.rel * k_out + acc, (self.abs * k_out + acc) * self.magnitude))
    }
}

/// Whether `got` matches `want` within `(rtol, atol)` (see the module docs for NaN and infinity).
pub fn float_matches(got: f64, want: f64, rtol: f64, atol: f64) -> bool {
    crate::compare::element_ratio(got, want, rtol, atol) <= 1.0
}

/// Checks one output against its reference; `Err` describes the first mismatches.
pub fn compare_one(got: &HostTensor, want: &HostTensor, tol: Tol) -> Result<(), String> {
    let bounds = tol.bounds(want.dtype()).unwrap_or((0.0, 0.0));
    match crate::compare::compare_tensor(got, want, bounds).problem {
        None => Ok(()),
        Some(p) => Err(p),
    }
}

/// Checks every output against the reference (see the module docs): [`crate::compare::compare_outputs`]
/// with the bounds of `tol` per dtype.
pub fn compare(got: &[HostTensor], want: &[HostTensor], tol: Tol) -> Result<(), String> {
    match crate::compare::compare_outputs(got, want, |d| tol.bounds(d).unwrap_or((0.0, 0.0))).problem {
        None => Ok(()),
        Some(p) => Err(p),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f32s(v: &[f32]) -> HostTensor {
        HostTensor::f32([v.len()], v.to_vec()).unwrap()
    }

    #[test]
    fn nan_and_infinities_match_only_themselves() {
        let loose = Tol { rel: 1e9, abs: 1e9, ..Tol::ROUNDED };
        let (inf, nan, big) = (f32::INFINITY, f32::NAN, f32::MAX);
        let same = [nan, inf, -inf, 1.0];
        assert!(compare_one(&f32s(&same), &f32s(&same), Tol::EXACT).is_ok());
        // (got, want) pairs no tolerance may accept, including a finite value where the reference
        // is NaN (what a max-based fold of ratios drops).
        for (g, w) in [(1.0, nan), (nan, 1.0), (inf, nan), (nan, inf), (big, inf), (inf, big), (-inf, inf), (inf, -inf)]
        {
            assert!(compare_one(&f32s(&[g]), &f32s(&[w]), loose).is_err(), "got {g} passed for {w}");
        }
        // Signed zeros are equal.
        assert!(compare_one(&f32s(&[-0.0]), &f32s(&[0.0]), Tol::EXACT).is_ok());
    }

    #[test]
    fn shapes_dtypes_counts_and_empty_lists_are_checked() {
        let a = f32s(&[1.0, 2.0]);
        let b = HostTensor::f32([2, 1], vec![1.0, 2.0]).unwrap();
        assert!(compare_one(&a, &b, Tol::EXACT).unwrap_err().contains("shape"));
        let c = HostTensor::from_f64(DType::F64, vec![2], &[1.0, 2.0]);
        assert!(compare_one(&c, &a, Tol::EXACT).unwrap_err().contains("dtype"));
        assert!(compare(&[], &[], Tol::EXACT).is_err());
        assert!(compare(std::slice::from_ref(&a), &[a.clone(), a.clone()], Tol::EXACT).is_err());
        assert!(compare(std::slice::from_ref(&a), std::slice::from_ref(&a), Tol::EXACT).is_ok());
    }

    #[test]
    fn integers_are_exact_and_floats_scale_per_dtype() {
        let i = |v: &[i64]| HostTensor::from_i64(DType::I32, vec![v.len()], v);
        assert!(compare_one(&i(&[1, 2]), &i(&[1, 3]), Tol::sum(1 << 20, 1e9)).is_err());
        let (r32, _) = Tol::ROUNDED.bounds(DType::F32).unwrap();
        let (r64, _) = Tol::ROUNDED.bounds(DType::F64).unwrap();
        let (r16, _) = Tol::ROUNDED.bounds(DType::F16).unwrap();
        let (rb, _) = Tol::ROUNDED.bounds(DType::BF16).unwrap();
        assert!(r64 < 1e-11 && r32 == 1e-5 && (1e-3..5e-3).contains(&r16) && (1e-2..3e-2).contains(&rb));
        // Accumulation widens the absolute bound with the term count, in f32 even for f16.
        let (_, a1) = Tol::sum(1, 1.0).bounds(DType::F16).unwrap();
        let (_, a2) = Tol::sum(4097, 1.0).bounds(DType::F16).unwrap();
        assert!(a2 > a1 && a2 - a1 < 1e-3);
        let x = f32s(&[1.0]);
        let y = f32s(&[1.0 + 2e-5]);
        assert!(compare_one(&y, &x, Tol::ROUNDED).is_err());
        assert!(compare_one(&y, &x, Tol::ROUNDED.times(3.0)).is_ok());
    }

    #[test]
    fn mismatches_name_their_index() {
        let want = HostTensor::f32([2, 3], vec![0.0; 6]).unwrap();
        let got = HostTensor::f32([2, 3], vec![0.0, 0.0, 0.0, 0.0, 1.0, 0.0]).unwrap();
        let e = compare_one(&got, &want, Tol::ROUNDED).unwrap_err();
        assert!(e.contains("[1, 1]") && e.starts_with("1 of 6"), "{e}");
    }
}
