//! `sin` and `cos` of `float` with the rare path out of line.
//!
//! libdevice's `sinf`/`cosf` are inlined at every call together with their Payne–Hanek slow
//! path (arguments of magnitude 105615 and up), a loop over a table in local memory. A kernel
//! with many trigonometric calls then carries one slow path per call: `pointwise_chain64_1024_f32`
//! (32 `sinf` in one expression) measured 30.8 µs on the H100 against torch.compile's 10.1 (whose
//! Triton kernel calls the same libdevice function), and 5.1 s of NVRTC time.
//!
//! `sinter_sinf`/`sinter_cosf` keep the fast path inline — the quadrant `j` by the 1.5 * 2^23
//! shift (`fmaf(x, 2/π, 1.5 * 2^23)`: the exact product rounded once, on the FMA pipe, where
//! `rintf` and a float-to-int conversion ran on the quarter-rate conversion pipe), Cody–Waite
//! reduction by π/2 in three `fmaf` steps, then a minimax polynomial of `sin` or `cos` on
//! [-π/4, π/4] picked by the quadrant — and call libdevice's own function, out of line
//! (`__noinline__`, one copy per kernel), for
//! arguments past 105615, infinities and NaN. For |x| >= 2 the first step is exact (`PIO2_HI` has
//! 23 significant bits and `x` a multiple of 2^-22, so `x - j * PIO2_HI` is a multiple of 2^-22 below
//! 1); below 2 it is exact by Sterbenz's lemma. [`host`] runs the same operations in Rust's `f32`
//! (IEEE, the same fused multiply-adds and round-half-even) and the tests below bound its error
//! against `f64` at 2 ulp, libdevice's documented bound for `sinf`.
//!
//! `sinter_sinf_unit`/`sinter_cosf_unit` serve an argument the renderer proved within [-1, 1]
//! (`analysis::within_unit`): no reduction and no slow path, a minimax polynomial alone (5 and 6
//! operations against about 26), under 1 ulp against `f64`. Measured on an H200 (BENCHMARKS.md,
//! session 13): `cos(cos(x))` over 16M floats from 0.0472 to 0.0377 ms, where torch.compile took
//! 0.0396-0.0420.

/// 2/π rounded to `f32`.
pub(crate) const TWO_OVER_PI: f32 = std::f32::consts::FRAC_2_PI;
/// π/2 split into three `f32`s: the largest float below it whose last bit is 0 (23 significant
/// bits), then the roundings of what the earlier parts leave (from 60 decimal digits of π).
pub(crate) const PIO2: [f32; 3] =
    [f32::from_bits(0x3fc9_0fda), f32::from_bits(0x33a2_2169), f32::from_bits(0xa6f7_2ced)];
/// 1.5 * 2^23: adding it rounds a float of magnitude under 2^22 to an integer held in the low
/// mantissa bits (the host emulation's constant; the kernel source spells it out).
#[cfg(test)]
const MAGIC: f32 = 12_582_912.0;
/// Arguments of larger magnitude (and infinities and NaN) take libdevice's slow path.
pub(crate) const FAST_LIMIT: f32 = 105_615.0;
/// `sin(r) = r + r^3 * (S[0] + z * (S[1] + z * S[2]))`, `z = r^2`, on [-π/4, π/4].
pub(crate) const SIN: [f32; 3] = [-1.666_665_5e-1, 8.332_161e-3, -1.951_529_6e-4];
/// `cos(r) = 1 - z/2 + z^2 * (C[0] + z * (C[1] + z * C[2]))`.
pub(crate) const COS: [f32; 3] = [4.166_664_6e-2, -1.388_731_6e-3, 2.443_315_7e-5];

/// `cos(x) = 1 + z * (U_COS[0] + z * (U_COS[1] + ...))`, `z = x^2`, for |x| <= 1 without reduction
/// (a minimax fit of `(cos x - 1) / z` on [0, 1]; under 1 ulp against `f64` over every 7th float).
pub(crate) const U_COS: [f32; 5] = [-0.5, 4.166_666_4e-2, -1.388_885_3e-3, 2.479_456e-5, -2.693_307_4e-7];
/// `sin(x) = x + x z * (U_SIN[0] + z * (U_SIN[1] + ...))` for |x| <= 1 (likewise).
pub(crate) const U_SIN: [f32; 4] = [-1.666_666_7e-1, 8.333_316e-3, -1.983_611_6e-4, 2.694_810_3e-6];

/// A float literal of CUDA C++ that reads back as exactly `v`.
fn lit(v: f32) -> String {
    format!("{v:e}f")
}

/// Which function of the pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Trig {
    /// `sinter_sincosf_fast`, the shared fast path.
    Fast,
    /// `sinter_sinf`.
    Sin,
    /// `sinter_cosf`.
    Cos,
    /// `sinter_sinf_unit`: `sinf` of an argument the renderer proved within [-1, 1] (the value of
    /// a `sin`, `cos`, `tanh`, ...; `analysis::within_unit`): the polynomial alone, no reduction
    /// and no slow path.
    SinUnit,
    /// `sinter_cosf_unit`, likewise.
    CosUnit,
}

/// A helper's source (`pre` is the prelude's `static __device__ __forceinline__`); `Sin` and
/// `Cos` call `Fast`.
pub(crate) fn source(which: Trig, pre: &str) -> String {
    let limit = lit(FAST_LIMIT);
    match which {
        Trig::Fast => format!(
            "// sin(x) for quadrant offset 0, cos(x) for 1, |x| <= {limit}: Cody-Waite reduction by
// pi/2 in three fmaf steps, then a polynomial of sin or cos on [-pi/4, pi/4]
{pre} float sinter_sincosf_fast(float x, int offset) {{
    // j = x 2/pi rounded to the nearest integer by the 1.5 * 2^23 shift (FMA-pipe operations, no
    // conversions): t holds j in its low mantissa bits, so its bits give the quadrant
    const float t = fmaf(x, {two_over_pi}, 12582912.0f);
    const float j = t - 12582912.0f;
    float r = fmaf(-j, {p0}, x);
    r = fmaf(-j, {p1}, r);
    r = fmaf(-j, {p2}, r);
    r = j == 0.0f ? x : r; // the last part of pi/2 is negative: -0 * it + -0 is +0, sin(-0) is -0
    const int q = __float_as_int(t) + offset;
    const float z = r * r;
    // sin r has the sign of r on [-pi/4, pi/4]; copysignf keeps sin(-0) = -0
    const float s = copysignf(fmaf(fmaf(fmaf({s2}, z, {s1}), z, {s0}), z * r, r), r);
    const float c = fmaf(fmaf(fmaf({c2}, z, {c1}), z, {c0}), z * z, fmaf(-0.5f, z, 1.0f));
    const float v = (q & 1) ? c : s;
    return (q & 2) ? -v : v;
}}
",
            two_over_pi = lit(TWO_OVER_PI),
            p0 = lit(PIO2[0]),
            p1 = lit(PIO2[1]),
            p2 = lit(PIO2[2]),
            s0 = lit(SIN[0]),
            s1 = lit(SIN[1]),
            s2 = lit(SIN[2]),
            c0 = lit(COS[0]),
            c1 = lit(COS[1]),
            c2 = lit(COS[2]),
        ),
        Trig::SinUnit => format!(
            "// sinf(x) for |x| <= 1 (an argument the renderer bounded): a minimax polynomial, no
// reduction (under 1 ulp); copysignf keeps sin(-0) = -0, NaN stays NaN
{pre} float sinter_sinf_unit(float x) {{
    const float z = x * x;
    return copysignf(fmaf(fmaf(fmaf(fmaf({s3}, z, {s2}), z, {s1}), z, {s0}), x * z, x), x);
}}
",
            s0 = lit(U_SIN[0]),
            s1 = lit(U_SIN[1]),
            s2 = lit(U_SIN[2]),
            s3 = lit(U_SIN[3]),
        ),
        Trig::CosUnit => format!(
            "// cosf(x) for |x| <= 1 (an argument the renderer bounded): a minimax polynomial in x^2, no
// reduction (under 1 ulp)
{pre} float sinter_cosf_unit(float x) {{
    const float z = x * x;
    return fmaf(fmaf(fmaf(fmaf(fmaf({c4}, z, {c3}), z, {c2}), z, {c1}), z, {c0}), z, 1.0f);
}}
",
            c0 = lit(U_COS[0]),
            c1 = lit(U_COS[1]),
            c2 = lit(U_COS[2]),
            c3 = lit(U_COS[3]),
            c4 = lit(U_COS[4]),
        ),
        Trig::Sin | Trig::Cos => {
            let (name, offset) = if which == Trig::Sin { ("sin", 0) } else { ("cos", 1) };
            format!(
                "// {name}f with libdevice's Payne-Hanek path out of line (|x| > {limit}, infinities, NaN),
// so many calls in one kernel do not each carry it
static __device__ __noinline__ float sinter_{name}f_slow(float x) {{
    return {name}f(x);
}}
{pre} float sinter_{name}f(float x) {{
    return fabsf(x) <= {limit} ? sinter_sincosf_fast(x, {offset}) : sinter_{name}f_slow(x);
}}
"
            )
        }
    }
}

/// The fast path run on the host with the same `f32` operations, for the tests (`offset` 0: sin,
/// 1: cos); `None` where the kernel takes libdevice's slow path.
#[cfg(test)]
pub(crate) fn host(x: f32, offset: i32) -> Option<f32> {
    // `fabsf(x) <= limit` is false for NaN.
    if x.abs().partial_cmp(&FAST_LIMIT) == Some(std::cmp::Ordering::Greater) || x.is_nan() {
        return None;
    }
    let t = x.mul_add(TWO_OVER_PI, MAGIC);
    let j = t - MAGIC;
    let mut r = (-j).mul_add(PIO2[0], x);
    r = (-j).mul_add(PIO2[1], r);
    r = (-j).mul_add(PIO2[2], r);
    if j == 0.0 {
        r = x;
    }
    let q = t.to_bits() as i32 + offset;
    let z = r * r;
    let s = SIN[2].mul_add(z, SIN[1]).mul_add(z, SIN[0]).mul_add(z * r, r).copysign(r);
    let c = COS[2].mul_add(z, COS[1]).mul_add(z, COS[0]).mul_add(z * z, (-0.5f32).mul_add(z, 1.0));
    let v = if q & 1 != 0 { c } else { s };
    Some(if q & 2 != 0 { -v } else { v })
}

/// The unit-interval polynomials run on the host with the kernel's `f32` operations, for the tests.
#[cfg(test)]
pub(crate) fn host_unit(x: f32, cos: bool) -> f32 {
    let z = x * x;
    if cos {
        U_COS.iter().rev().fold(0.0f32, |p, &c| p.mul_add(z, c)).mul_add(z, 1.0)
    } else {
        let q = U_SIN[3].mul_add(z, U_SIN[2]).mul_add(z, U_SIN[1]).mul_add(z, U_SIN[0]);
        q.mul_add(x * z, x).copysign(x)
    }
}

/// The error of `got` against the exact `want` in units of the last place of `want` rounded to
/// f32 (at least the smallest normal's ulp, so results near 0 are measured absolutely): the
/// accuracy measure of the f32 function tests here and in `ptx::{trig_slow, math}`. A `want`
/// that rounds to ±inf asks for exactly that.
#[cfg(test)]
pub(crate) fn ulps(got: f32, want: f64) -> f64 {
    let w = want as f32;
    if w.is_infinite() {
        return if got == w { 0.0 } else { f64::INFINITY };
    }
    let ulp = (f32::from_bits(w.abs().max(f32::MIN_POSITIVE).to_bits() + 1) - w.abs().max(f32::MIN_POSITIVE)) as f64;
    (got as f64 - want).abs() / ulp
}

#[cfg(test)]
mod tests {
    use super::*;

    fn worst(xs: impl Iterator<Item = f32>) -> (f64, f32) {
        let mut w = (0.0, 0.0);
        for x in xs {
            for (offset, f) in [(0, f64::sin as fn(f64) -> f64), (1, f64::cos)] {
                let got = host(x, offset).expect("fast path");
                let e = ulps(got, f(x as f64));
                if e > w.0 {
                    w = (e, x);
                }
            }
        }
        w
    }

    #[test]
    fn constants_are_the_splits_they_claim() {
        let pio2 = std::f64::consts::FRAC_PI_2;
        // The first part: below pi/2, within two ulp, last bit 0 (the reduction's first step is
        // exact for |x| >= 2).
        assert!((PIO2[0] as f64) < pio2);
        assert_eq!(PIO2[0].to_bits() & 1, 0);
        assert!(f32::from_bits(PIO2[0].to_bits() + 2) as f64 > pio2);
        assert_eq!(PIO2[1], (pio2 - PIO2[0] as f64) as f32);
        // f64's pi/2 is 6e-17 off, 4% of the third part: a check of sign and size only.
        let rest = pio2 - PIO2[0] as f64 - PIO2[1] as f64;
        assert!(((PIO2[2] as f64 - rest) / rest).abs() < 0.05, "{rest:e}");
    }

    #[test]
    fn literals_read_back_exactly() {
        for v in PIO2.iter().chain(&SIN).chain(&COS).chain(&U_SIN).chain(&U_COS).chain([&TWO_OVER_PI, &FAST_LIMIT]) {
            let text = lit(*v);
            assert_eq!(text.trim_end_matches('f').parse::<f32>().unwrap(), *v, "{text}");
        }
    }

    #[test]
    fn within_two_ulp_of_f64_on_small_arguments() {
        // Every 97th float of [-8 pi, 8 pi] (both signs, down to the subnormals).
        let limit = 8.0 * std::f32::consts::PI;
        let xs = (0..limit.to_bits()).step_by(97).map(f32::from_bits).flat_map(|x| [x, -x]);
        let (e, x) = worst(xs);
        assert!(e <= 2.0, "{e} ulp at {x:e}");
    }

    #[test]
    fn within_two_ulp_of_f64_up_to_the_fast_limit() {
        let mut s = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        };
        let random = (0..400_000).map(|_| (next() as f64 / u64::MAX as f64 * 2.0 - 1.0) as f32 * FAST_LIMIT);
        let (e, x) = worst(random);
        assert!(e <= 2.0, "random: {e} ulp at {x:e}");
        // The floats nearest to multiples of pi/2, where the reduced argument cancels most.
        let near = (1..67_000).flat_map(|k| {
            let x = (k as f64 * std::f64::consts::FRAC_PI_2) as f32;
            [x, f32::from_bits(x.to_bits() + 1), f32::from_bits(x.to_bits() - 1), -x]
        });
        let (e, x) = worst(near.filter(|x| x.abs() <= FAST_LIMIT));
        assert!(e <= 2.0, "near multiples of pi/2: {e} ulp at {x:e}");
    }

    #[test]
    fn unit_polynomials_within_one_ulp_on_the_unit_interval() {
        // Every 61st float of [0, 1] and its negation, and both ends.
        let xs = (0..=1.0f32.to_bits()).step_by(61).map(f32::from_bits).chain([1.0]).flat_map(|x| [x, -x]);
        let mut worst = (0.0f64, 0.0f32, "");
        for x in xs {
            for (cos, f, name) in [(true, f64::cos as fn(f64) -> f64, "cos"), (false, f64::sin, "sin")] {
                let e = ulps(host_unit(x, cos), f(x as f64));
                if e > worst.0 {
                    worst = (e, x, name);
                }
            }
        }
        assert!(worst.0 <= 1.0, "{}: {} ulp at {:e}", worst.2, worst.0, worst.1);
        assert_eq!(host_unit(-0.0, false).to_bits(), (-0.0f32).to_bits());
        assert_eq!(host_unit(0.0, true), 1.0);
        assert!(host_unit(f32::NAN, true).is_nan() && host_unit(f32::NAN, false).is_nan());
        // The fit kept Taylor's -1/2 for the quadratic term of cos.
        assert_eq!(U_COS[0], -0.5);
    }

    #[test]
    fn signed_zero_and_the_slow_path() {
        assert_eq!(host(-0.0, 0).unwrap().to_bits(), (-0.0f32).to_bits());
        assert_eq!(host(0.0, 0).unwrap().to_bits(), 0.0f32.to_bits());
        assert_eq!(host(-0.0, 1), Some(1.0));
        assert_eq!(host(f32::NAN, 0), None);
        assert_eq!(host(f32::INFINITY, 1), None);
        assert_eq!(host(FAST_LIMIT * 1.0001, 0), None);
        assert!(host(FAST_LIMIT, 0).is_some());
    }
}
