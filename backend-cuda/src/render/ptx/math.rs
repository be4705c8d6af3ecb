//! `exp` and `erf` of `f32` in PTX, inline at each use, branch-free, with host models.
//!
//! Why own functions: PTX written directly is not linked against libdevice (that is bitcode for
//! NVVM, which NVRTC runs and `ptxas` does not), so `expf` and `erff` must be spelled out, as
//! [`super::trig_slow`] spells out the slow path of `sinf`. They must also cost what libdevice's
//! cost: kernels like `softmax_8192x8192_f32` compute two `exp` an element, and an own accurate
//! `exp` of 24 instructions (a Cody–Waite reduction and a degree-6 polynomial, within 0.9 ulp)
//! made it 3.9% slower, an `erf` of 34 made `layernorm_gelu_8192x4096_f32` 5% slower (H200,
//! BENCHMARKS.md session 37, call 4). So both rest on the hardware's `ex2.approx` (the SFU's
//! base-2 exponential, one instruction) with an exact argument reduction, as libdevice's do.
//!
//! Contract:
//! * [`exp`] (10 PTX instructions, 8 in SASS): e^x within 2 ulp of the exact value for every input
//!   (1.93 measured over all 2^32 on an H200, see below; CUDA documents 2 for `expf`), subnormal results included; +inf where
//!   x log2 e >= 128, +0 far below the subnormals, NaN for NaN, +inf for +inf, +0 for -inf.
//! * [`erf`] (25 PTX instructions): erf(x) within 2 ulp for every input (1.16 measured; CUDA documents 2 for `erff`); odd bit for bit
//!   (erf(-x) = -erf(x), erf(±0) = ±0); exactly ±1 from |x| >= 3.9192 (where erf rounds to 1 in
//!   `f32`), NaN for NaN.
//! * `ex2.approx.ftz.f32` is the only approximate instruction; every other floating operation
//!   carries `.rn` (nothing contracts beyond the explicit `fma.rn`), so the host models
//!   `host_exp` and `host_erf` compute statement for instruction what the kernel does, with the
//!   exact 2^f rounded to `f32` in place of `ex2.approx` (the host cannot emulate the SFU; its
//!   relative error is what separates the host's accuracy from the device's).
//!
//! `exp`: with `n = floor(x log2 e)` clamped to [-126, 126], e^x = 2^f * 2^n where
//! `f = x log2 e - n` (two `fma.rn` with log2 e split in two `f32`: `x * LOG2E_HI - n` is exact
//! inside the fma, so f is x log2 e - n rounded once, plus the low part's product). n comes from
//! `t = sat(x log2 e / 252 + 1/2)` in [0, 1]: `floor(252 t)` in the low bits of
//! `252 t + 1.5 * 2^23 + 1` (one `fma.rm`, the magic constant's unit in the last place being 1),
//! n itself by subtracting `1.5 * 2^23 + 127`, and the bits of that sum shifted left by 23 are
//! the `f32` 2^n (biased exponent n + 127 in [1, 253], the magic's high bits shifted out). Within
//! the clamp f stays in [0, 1) up to the rounding of t (any n is exact: f is computed from it);
//! past it f carries the rest (x log2 e >= 128 overflows `ex2` to +inf, x log2 e < -252 gives
//! `ex2`'s flushed 0, between the two the product rounds once into the subnormals). NaN
//! saturates t to 0 and propagates through f.
//!
//! `erf`: one Horner polynomial of degree 6 whose coefficients and argument are selected by
//! the branch (`selp`, no divergence: the helper sits inside unrolled per-element loops):
//! * |x| < 1: `erf(x) = x + x S(x^2)` ([`ERF_SMALL`], S(0) = 2/sqrt(pi) - 1), one final `fma.rn`,
//!   so a tiny or subnormal x rounds once and -0 stays -0; NaN fails `|x| >= 1` and lands here.
//! * |x| >= 1: `erf(|x|) = 1 - 2^u`, `u = -m (1 + L(m))`, `m = min(|x|, 4)` ([`ERF_LARGE`]:
//!   `L(m) = -log2(erfc m) / m - 1`), the same final `fma.rn` with `-m` for x, then `ex2.approx`,
//!   `1 - 2^u` and the sign of x copied on. Past 4, 1 - erf(4) = 1.5e-8 is under 2^-25 (half an
//!   ulp of 1 below it): the result is exactly ±1.
//!
//! The coefficients were fitted for this file (a scratch script, not kept): weighted minimax by
//! Lawson's iteratively reweighted least squares in `f64` on 12000 points (uniform and
//! Chebyshev) of each interval, `ERF_SMALL` against the relative error of erf, `ERF_LARGE`
//! against the relative error it causes in erf (`ln 2 erfc(m) m |δL| / erf(m)`), rounded to
//! `f32` one coefficient at a time from the constant term up, refitting the rest after each.
//! Their approximation errors (test `polynomials_fit`) are a few hundredths of an ulp: the
//! results' errors are the roundings and `ex2.approx`'s.
//!
//! Accuracy: on the host (exact 2^f) `exp` within 1.44 ulp of `f64`'s (the worst near overflow,
//! where f spans [0, 2)) and `erf` within 1.02 (tests below: every 61st bit pattern, every
//! pattern of erf on [0.5, 4.5], the edges). On an H200 over all 2^32 inputs against `f64` (a
//! one-off device check when this file was written, BENCHMARKS.md session 38, call 1): `exp`
//! 1.931 ulp at -13.899315 (0xc15e6398), 95,287 inputs past 1.5; `erf` 1.157 ulp at 1.0130225
//! (0x3f81aab9); every NaN input gave NaN. libdevice's `expf` is the same reduction (8 SASS
//! instructions either way).

use super::{Asm, Class, f32_lit};

/// log2(e) rounded to `f32`.
const LOG2E_HI: f32 = std::f32::consts::LOG2_E;
/// log2(e) - [`LOG2E_HI`] rounded to `f32`.
const LOG2E_LO: f32 = f32::from_bits(0x32a5_7060);
/// log2(e) / 252 rounded to `f32`: `x * EXP_SCALE + 1/2` saturated is n's position in [0, 1].
const EXP_SCALE: f32 = f32::from_bits(0x3bbb_989e);
/// 1.5 * 2^23 + 1: `252 t` added to it (rounding down) puts `floor(252 t) + 1` in the low bits,
/// the biased exponent of 2^n.
const EXP_MAGIC: f32 = 12_582_913.0;
/// `EXP_MAGIC + 126`: subtracted from the sum, it leaves n.
const EXP_BIAS: f32 = 12_583_039.0;

/// The split of `erf`'s branches: |x| below it takes the series-like polynomial.
const ERF_SPLIT: f32 = 1.0;
/// |x| past this is taken as this in the large branch (see the module doc).
const ERF_CLAMP: f32 = 4.0;
/// `S` of `erf(x) = x + x S(x^2)` on |x| < 1, constant term first.
const ERF_SMALL: [f32; 7] =
    [0.128_379_17, -0.376_126_26, 0.112_835_79, -0.026_853_347, 0.005_187_162, -0.000_799_785_3, 7.806_903e-5];
/// `L` of `erf(m) = 1 - 2^(-m (1 + L(m)))` on [1, 4], constant term first.
const ERF_LARGE: [f32; 7] =
    [0.628_361_7, 0.916_067_5, 0.153_691_4, -0.034_639_06, 0.005_420_816, -0.000_505_776_14, 2.014_117_1e-5];

/// `e^x` of the `.f32` register `x`; returns the result's register (10 PTX instructions, 8 after
/// ptxas drops the bit moves; see the module doc). Instruction for instruction `host_exp`.
pub(crate) fn exp(asm: &mut Asm, x: &str) -> String {
    let f = |asm: &mut Asm| asm.reg(Class::F32);
    asm.comment(format!("exp of {x}: 2^(x log2 e - n) * 2^n, n = floor(x log2 e) within [-126, 126]"));
    let (t, s, nn, f1, fr, p, e, y) = (f(asm), f(asm), f(asm), f(asm), f(asm), f(asm), f(asm), f(asm));
    let (sb, pb) = (asm.reg(Class::B32), asm.reg(Class::B32));
    asm.op(format!("fma.rn.sat.f32 {t}, {x}, {}, {}", f32_lit(EXP_SCALE), f32_lit(0.5)));
    asm.op(format!("fma.rm.f32 {s}, {t}, {}, {}", f32_lit(252.0), f32_lit(EXP_MAGIC)));
    asm.op(format!("sub.rn.f32 {nn}, {}, {s}", f32_lit(EXP_BIAS)));
    asm.op(format!("fma.rn.f32 {f1}, {x}, {}, {nn}", f32_lit(LOG2E_HI)));
    asm.op(format!("fma.rn.f32 {fr}, {x}, {}, {f1}", f32_lit(LOG2E_LO)));
    asm.op(format!("mov.b32 {sb}, {s}"));
    asm.op(format!("shl.b32 {pb}, {sb}, 23"));
    asm.op(format!("mov.b32 {p}, {pb}"));
    asm.op(format!("ex2.approx.ftz.f32 {e}, {fr}"));
    asm.op(format!("mul.rn.f32 {y}, {e}, {p}"));
    y
}

/// `erf(x)` of the `.f32` register `x`; returns the result's register (25 PTX instructions: both
/// branches share one Horner polynomial, see the module doc). Instruction for instruction
/// `host_erf`.
pub(crate) fn erf(asm: &mut Asm, x: &str) -> String {
    let f = |asm: &mut Asm| asm.reg(Class::F32);
    asm.comment(format!(
        "erf of {x}: x + x S(x^2) below {ERF_SPLIT}, else 1 - 2^(-m (1 + L(m))), m = min(|x|, {ERF_CLAMP})"
    ));
    let (a, z, m, v) = (f(asm), f(asm), f(asm), f(asm));
    let big = asm.reg(Class::Pred);
    asm.op(format!("abs.f32 {a}, {x}"));
    asm.op(format!("mul.rn.f32 {z}, {x}, {x}"));
    // NaN fails the comparison and takes the small branch, which propagates it.
    asm.op(format!("setp.ge.f32 {big}, {a}, {}", f32_lit(ERF_SPLIT)));
    asm.op(format!("min.f32 {m}, {a}, {}", f32_lit(ERF_CLAMP)));
    asm.op(format!("selp.f32 {v}, {m}, {z}, {big}"));
    let c: Vec<String> = ERF_LARGE
        .iter()
        .zip(ERF_SMALL)
        .map(|(&l, s)| {
            let r = f(asm);
            asm.op(format!("selp.f32 {r}, {}, {}, {big}", f32_lit(l), f32_lit(s)));
            r
        })
        .collect();
    let mut h = f(asm);
    asm.op(format!("fma.rn.f32 {h}, {v}, {}, {}", c[6], c[5]));
    for k in c[..5].iter().rev() {
        let next = f(asm);
        asm.op(format!("fma.rn.f32 {next}, {h}, {v}, {k}"));
        h = next;
    }
    let (nm, w, y, e, o, sgn, res) = (f(asm), f(asm), f(asm), f(asm), f(asm), f(asm), f(asm));
    asm.op(format!("neg.f32 {nm}, {m}"));
    asm.op(format!("selp.f32 {w}, {nm}, {x}, {big}"));
    // Small: x + x S(x^2). Large: u = -m - m L(m).
    asm.op(format!("fma.rn.f32 {y}, {h}, {w}, {w}"));
    asm.op(format!("ex2.approx.ftz.f32 {e}, {y}"));
    asm.op(format!("sub.rn.f32 {o}, {}, {e}", f32_lit(1.0)));
    // PTX's copysign takes the sign from its first source.
    asm.op(format!("copysign.f32 {sgn}, {x}, {o}"));
    asm.op(format!("selp.f32 {res}, {sgn}, {y}, {big}"));
    res
}

/// `ex2.approx.ftz.f32` on the host: the exact 2^f rounded to `f32`, subnormal results flushed.
#[cfg(test)]
fn host_ex2(f: f32) -> f32 {
    let r = (f as f64).exp2() as f32;
    if r < f32::MIN_POSITIVE { 0.0 } else { r }
}

/// [`exp`] on the host, operation for operation.
#[cfg(test)]
pub(crate) fn host_exp(x: f32) -> f32 {
    // fma.rn.sat: NaN saturates to 0.
    let t = x.mul_add(EXP_SCALE, 0.5);
    let t = if t.is_nan() { 0.0 } else { t.clamp(0.0, 1.0) };
    // fma.rm: 252 t is exact in f64 (a 24-bit t times 252), and so is the sum below 2^53.
    let s = ((t as f64) * 252.0 + EXP_MAGIC as f64).floor() as f32;
    let nn = EXP_BIAS - s; // sub.rn (exact)
    let f1 = x.mul_add(LOG2E_HI, nn); // fma.rn
    let fr = x.mul_add(LOG2E_LO, f1); // fma.rn
    let p = f32::from_bits(s.to_bits() << 23); // mov, shl, mov
    host_ex2(fr) * p // ex2.approx.ftz, mul.rn
}

/// [`erf`] on the host, operation for operation.
#[cfg(test)]
pub(crate) fn host_erf(x: f32) -> f32 {
    let a = x.abs(); // abs.f32
    let z = x * x; // mul.rn
    let big = a >= ERF_SPLIT; // setp.ge (false for NaN)
    let m = a.min(ERF_CLAMP); // min.f32
    let v = if big { m } else { z }; // selp
    let c: Vec<f32> = ERF_LARGE.iter().zip(ERF_SMALL).map(|(&l, s)| if big { l } else { s }).collect();
    let mut h = v.mul_add(c[6], c[5]); // fma.rn
    for &k in c[..5].iter().rev() {
        h = h.mul_add(v, k); // fma.rn
    }
    let w = if big { -m } else { x }; // neg, selp
    let y = h.mul_add(w, w); // fma.rn
    let sgn = (1.0 - host_ex2(y)).copysign(x); // ex2.approx.ftz, sub.rn, copysign
    if big { sgn } else { y } // selp
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::trig::ulps;

    /// erf in `f64` to a few ulp of `f64`: `2/sqrt(pi) e^-x^2 sum 2^n x^(2n+1) / (2n+1)!!`, a series
    /// of positive terms (no cancellation at any x); 1 from 6 on (1 - erf(6) = 2e-17).
    fn ref_erf(x: f64) -> f64 {
        let a = x.abs();
        if a >= 6.0 {
            return 1f64.copysign(x);
        }
        let (z2, mut term, mut sum, mut n) = (2.0 * a * a, a, a, 0.0);
        while term > sum * 1e-18 {
            term *= z2 / (2.0 * n + 3.0);
            sum += term;
            n += 1.0;
        }
        (std::f64::consts::FRAC_2_SQRT_PI * (-a * a).exp() * sum).copysign(x)
    }

    /// erfc in `f64` for x >= 0.5 (the fit's interval): the continued fraction
    /// `e^-x^2 / sqrt(pi) * 1/(x + (1/2)/(x + 1/(x + (3/2)/(x + ...))))` by Lentz's method.
    fn ref_erfc(x: f64) -> f64 {
        let tiny = 1e-300;
        let mut f = x;
        let (mut c, mut d) = (x, 0.0);
        for k in 1..2000 {
            let a = k as f64 / 2.0;
            d = x + a * d;
            d = if d == 0.0 { tiny } else { 1.0 / d };
            c = x + a / c;
            let delta = c * d;
            f *= delta;
            if (delta - 1.0).abs() < 1e-17 {
                break;
            }
        }
        (-x * x).exp() / (std::f64::consts::PI.sqrt() * f)
    }

    /// The worst `(ulps, x)` of `host` against `want` over `xs`.
    fn worst(xs: impl Iterator<Item = f32>, host: fn(f32) -> f32, want: fn(f64) -> f64) -> (f64, f32) {
        let mut w = (0.0, 0.0);
        for x in xs.filter(|x| !x.is_nan()) {
            let e = ulps(host(x), want(x as f64));
            if e > w.0 || e.is_nan() {
                w = (e, x);
            }
        }
        w
    }

    /// [`worst`] over the bit patterns `lo..hi` with the given step, split over the cores.
    fn sweep(lo: u32, hi: u32, step: u32, host: fn(f32) -> f32, want: fn(f64) -> f64) -> (f64, f32) {
        let threads = std::thread::available_parallelism().map_or(4, |n| n.get()) as u32;
        let span = (u64::from(hi) - u64::from(lo)).div_ceil(u64::from(threads));
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    let a = u64::from(lo) + span * u64::from(t);
                    let b = (a + span).min(u64::from(hi));
                    // Start every slice on the global grid lo + k * step.
                    let a = a + (u64::from(step) - (a - u64::from(lo)) % u64::from(step)) % u64::from(step);
                    s.spawn(move || worst((a..b).step_by(step as usize).map(|b| f32::from_bits(b as u32)), host, want))
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).fold((0.0, 0.0), |a, b| if b.0 > a.0 { b } else { a })
        })
    }

    #[test]
    fn reference_erf_matches_known_values() {
        for (x, want) in [
            (0.5, 0.520_499_877_813_046_5),
            (1.0, 0.842_700_792_949_714_9),
            (2.0, 0.995_322_265_018_952_7),
            (3.0, 0.999_977_909_503_001_4),
        ] {
            assert!((ref_erf(x) - want).abs() <= 4e-16, "erf({x}) = {} against {want}", ref_erf(x));
            assert_eq!(ref_erf(-x), -ref_erf(x));
        }
        let tiny = 1e-20;
        assert_eq!(ref_erf(tiny), std::f64::consts::FRAC_2_SQRT_PI * tiny);
        // Two methods agree where both are good.
        for x in [0.5, 0.9, 1.0, 1.5, 2.5, 3.5, 4.0, 5.0] {
            let (a, b) = (1.0 - ref_erf(x), ref_erfc(x));
            assert!((a - b).abs() <= 1e-14 + 1e-12 * b, "erfc({x}): {a} against {b}");
        }
    }

    #[test]
    fn constants_are_what_they_claim() {
        assert_eq!(LOG2E_LO, (std::f64::consts::LOG2_E - LOG2E_HI as f64) as f32);
        assert_eq!(EXP_SCALE, (std::f64::consts::LOG2_E / 252.0) as f32);
        assert_eq!(EXP_MAGIC, 1.5 * (1u32 << 23) as f32 + 1.0);
        assert_eq!(EXP_BIAS, EXP_MAGIC + 126.0);
        // The sum's bits shifted by 23 are 2^n: biased exponent floor(252 t) + 1 = n + 127.
        for n in -126i32..=126 {
            let s = EXP_MAGIC + (n + 126) as f32;
            assert_eq!(f32::from_bits(s.to_bits() << 23), 2f32.powi(n), "{n}");
            assert_eq!(-(EXP_BIAS - s), n as f32);
        }
        // erf rounds to 1 at the clamp already: 1 - erf(4) under half an ulp of 1 below it.
        assert_eq!(ref_erf(ERF_CLAMP as f64) as f32, 1.0);
        assert!(ref_erfc(ERF_CLAMP as f64) < 2f64.powi(-25));
        assert_eq!(ERF_SMALL[0], (std::f64::consts::FRAC_2_SQRT_PI - 1.0) as f32);
    }

    /// The polynomials in `f64` (coefficients as stored): the approximation error alone, in
    /// units of 2^-24 relative to erf, which the module doc quotes.
    #[test]
    fn polynomials_fit() {
        let horner64 = |v: f64, c: &[f32]| c.iter().rev().fold(0.0, |acc, &k| acc * v + k as f64);
        let grid = |a: f64, b: f64| (0..=20_000).map(move |i| a + (b - a) * i as f64 / 20_000.0);
        let unit = 2f64.powi(-24);
        let s = grid(1e-6, ERF_SPLIT as f64)
            .map(|x| ((x + x * horner64(x * x, &ERF_SMALL)) / ref_erf(x) - 1.0).abs() / unit)
            .fold(0.0, f64::max);
        let l = grid(ERF_SPLIT as f64, ERF_CLAMP as f64)
            .map(|m| {
                let (erfc, erf) = (ref_erfc(m), ref_erf(m));
                let want = -erfc.log2() / m - 1.0;
                (horner64(m, &ERF_LARGE) - want).abs() * m * std::f64::consts::LN_2 * erfc / erf / unit
            })
            .fold(0.0, f64::max);
        eprintln!("approximation errors of 2^-24: erf small {s:.4}, erf large {l:.4}");
        assert!(s < 0.05 && l < 0.05, "small {s}, large {l}");
    }

    /// Every 61st bit pattern of all 2^32 (70 million, both signs, every exponent) against `f64`,
    /// the host model (exact 2^f).
    #[test]
    fn exp_sweep() {
        let w = sweep(0, u32::MAX, 61, host_exp, f64::exp);
        eprintln!("exp, every 61st pattern: worst {} ulp at {:e} ({:#010x})", w.0, w.1, w.1.to_bits());
        assert!(w.0 <= HOST_EXP_ULPS, "exp: {} ulp at {:e}", w.0, w.1);
    }

    /// Every 61st bit pattern, and every pattern of [0.5, 4.5] (where both branches and their
    /// split lie; every 7th in a debug build), against `f64`, the host model.
    #[test]
    fn erf_sweep() {
        let w = sweep(0, u32::MAX, 61, host_erf, ref_erf);
        eprintln!("erf, every 61st pattern: worst {} ulp at {:e} ({:#010x})", w.0, w.1, w.1.to_bits());
        assert!(w.0 <= HOST_ERF_ULPS, "erf: {} ulp at {:e}", w.0, w.1);
        let step = if cfg!(debug_assertions) { 7 } else { 1 };
        let w = sweep(0.5f32.to_bits(), 4.5f32.to_bits(), step, host_erf, ref_erf);
        eprintln!("erf on [0.5, 4.5], every {step}: worst {} ulp at {:e} ({:#010x})", w.0, w.1, w.1.to_bits());
        assert!(w.0 <= HOST_ERF_ULPS, "erf: {} ulp at {:e}", w.0, w.1);
    }

    /// The host models' bounds: the algorithm's error with an exact 2^f.
    const HOST_EXP_ULPS: f64 = 1.5;
    /// See [`HOST_EXP_ULPS`].
    const HOST_ERF_ULPS: f64 = 1.5;

    /// The floats around `x`, `n` ulps either way (same sign).
    fn around(x: f32, n: i32) -> impl Iterator<Item = f32> {
        (-n..=n).map(move |d| f32::from_bits(x.to_bits().wrapping_add_signed(d)))
    }

    #[test]
    fn exp_edges() {
        let one = |x: f32| assert_eq!(host_exp(x), 1.0, "{x:e}");
        for x in [0.0, -0.0, f32::from_bits(1), -f32::from_bits(1), f32::MIN_POSITIVE, -f32::MIN_POSITIVE, 1e-30] {
            one(x);
        }
        for x in [f32::INFINITY, 89.0, 100.0, 1e30, f32::MAX] {
            assert_eq!(host_exp(x), f32::INFINITY, "{x:e}");
        }
        for x in [f32::NEG_INFINITY, -104.0, -105.0, -1e30, f32::MIN] {
            assert_eq!(host_exp(x).to_bits(), 0, "{x:e}");
        }
        for x in [f32::NAN, -f32::NAN, f32::from_bits(0x7f80_0001), f32::from_bits(0xffc0_1234)] {
            assert!(host_exp(x).is_nan());
        }
        // Around overflow, underflow and the smallest normal result, and every pattern of the
        // subnormal results: within the bound, +inf exactly where f64 rounds there.
        let over = f32::from_bits(0x42b1_7218); // 88.72284, the first to overflow
        let under = f32::from_bits(0xc2cf_f1b4); // -103.97208, the last to give 2^-149
        let normal = -87.336_55f32; // e^x near the smallest normal
        for x in around(over, 64).chain(around(under, 64)).chain(around(normal, 64)) {
            let want = (x as f64).exp();
            assert_eq!(host_exp(x).is_infinite(), (want as f32).is_infinite(), "{x:e}");
            assert!(ulps(host_exp(x), want) <= HOST_EXP_ULPS, "{x:e}: {} against {want:e}", host_exp(x));
        }
        let w = sweep((-87.34f32).to_bits(), (-104.0f32).to_bits(), 1, host_exp, f64::exp);
        assert!(w.0 <= HOST_EXP_ULPS, "{} ulp at {:e}", w.0, w.1);
        // Where the clamp of n is reached: x log2 e just under 126 and -126, and past them.
        for x in [87.0f32, 87.4, 87.5, 88.0, 88.7, -87.0, -87.4, -87.5, -88.0, -100.0] {
            for x in around(x, 16) {
                assert!(ulps(host_exp(x), (x as f64).exp()) <= HOST_EXP_ULPS, "{x:e}");
            }
        }
    }

    #[test]
    fn erf_edges() {
        assert_eq!(host_erf(0.0).to_bits(), 0);
        assert_eq!(host_erf(-0.0).to_bits(), (-0.0f32).to_bits());
        for x in [f32::from_bits(1), f32::from_bits(0x7f_ffff), f32::MIN_POSITIVE, 1e-30, 1e-10] {
            assert!(ulps(host_erf(x), ref_erf(x as f64)) <= 1.0, "{x:e}");
        }
        for x in [f32::NAN, -f32::NAN, f32::from_bits(0x7f80_0001), f32::from_bits(0xffc0_1234)] {
            assert!(host_erf(x).is_nan());
        }
        // Exactly ±1 a little past where erf rounds to 1, infinities included, and within the
        // bound in between.
        let last = (0x4070_0000u32..0x4080_0000).rev().find(|&b| ref_erf(f32::from_bits(b) as f64) as f32 != 1.0);
        let first_one = f32::from_bits(last.unwrap() + 1);
        assert!((3.91..3.92).contains(&first_one), "{first_one}");
        for x in around(first_one, 1000).chain([4.0, 4.5, 10.0, 1e30, f32::MAX, f32::INFINITY]) {
            assert!(ulps(host_erf(x), ref_erf(x as f64)) <= HOST_ERF_ULPS, "{x:e}");
            assert_eq!(host_erf(-x).to_bits(), (-host_erf(x)).to_bits(), "{x:e}");
        }
        for x in [3.95f32, 4.0, 4.5, 10.0, 1e30, f32::MAX, f32::INFINITY] {
            assert_eq!(host_erf(x), 1.0, "{x:e}");
        }
        // Both sides of the split and of the clamp.
        for x in around(ERF_SPLIT, 4096).chain(around(ERF_CLAMP, 64)) {
            assert!(ulps(host_erf(x), ref_erf(x as f64)) <= HOST_ERF_ULPS, "{x:e}: {}", host_erf(x));
        }
    }

    /// erf(-x) = -erf(x) bit for bit: every 61st pattern of the positive half.
    #[test]
    fn erf_is_odd() {
        for b in (0..0x7f80_0000u32).step_by(61) {
            let x = f32::from_bits(b);
            assert_eq!(host_erf(-x).to_bits(), (-host_erf(x)).to_bits(), "{x:e}");
        }
    }

    /// The instructions of `asm`'s body (lines ending in `;`).
    fn instructions(asm: &Asm) -> usize {
        asm.lines.iter().filter(|l| l.ends_with(';')).count()
    }

    #[test]
    fn instruction_counts() {
        let mut asm = Asm::new();
        let x = asm.reg(Class::F32);
        exp(&mut asm, &x);
        assert_eq!(instructions(&asm), 10);
        let mut asm = Asm::new();
        let x = asm.reg(Class::F32);
        erf(&mut asm, &x);
        assert_eq!(instructions(&asm), 25);
    }

    /// A module with two entries: `sinter_math_test(src, dst, n)` stores exp(src[i]) and
    /// erf(src[i]) to dst[2i] and dst[2i + 1]; `sinter_math_sweep(dst, base)` does the same for
    /// the input whose bits are `base + i` (a device check over every input).
    pub(crate) fn test_module() -> String {
        let mut s = String::from(".version 7.8\n.target sm_90\n.address_size 64\n");
        for (name, params, sweep) in [
            ("sinter_math_test", ".param .u64 src, .param .u64 dst, .param .u32 n", false),
            ("sinter_math_sweep", ".param .u64 dst, .param .u32 base", true),
        ] {
            let mut asm = Asm::new();
            let (tid, ctaid, ntid, i) =
                (asm.reg(Class::B32), asm.reg(Class::B32), asm.reg(Class::B32), asm.reg(Class::B32));
            asm.op(format!("mov.u32 {tid}, %tid.x"));
            asm.op(format!("mov.u32 {ctaid}, %ctaid.x"));
            asm.op(format!("mov.u32 {ntid}, %ntid.x"));
            asm.op(format!("mad.lo.u32 {i}, {ctaid}, {ntid}, {tid}"));
            let x = asm.reg(Class::F32);
            let done = asm.label();
            if sweep {
                let (base, bits) = (asm.reg(Class::B32), asm.reg(Class::B32));
                asm.op(format!("ld.param.u32 {base}, [base]"));
                asm.op(format!("add.u32 {bits}, {base}, {i}"));
                asm.op(format!("mov.b32 {x}, {bits}"));
            } else {
                let (n, past) = (asm.reg(Class::B32), asm.reg(Class::Pred));
                let (src, at) = (asm.reg(Class::B64), asm.reg(Class::B64));
                asm.op(format!("ld.param.u32 {n}, [n]"));
                asm.op(format!("setp.ge.u32 {past}, {i}, {n}"));
                asm.op(format!("@{past} bra {done}"));
                asm.op(format!("ld.param.u64 {src}, [src]"));
                asm.op(format!("cvta.to.global.u64 {src}, {src}"));
                asm.op(format!("mad.wide.u32 {at}, {i}, 4, {src}"));
                asm.op(format!("ld.global.f32 {x}, [{at}]"));
            }
            let (e, r) = (exp(&mut asm, &x), erf(&mut asm, &x));
            let (dst, at) = (asm.reg(Class::B64), asm.reg(Class::B64));
            asm.op(format!("ld.param.u64 {dst}, [dst]"));
            asm.op(format!("cvta.to.global.u64 {dst}, {dst}"));
            asm.op(format!("mad.wide.u32 {at}, {i}, 8, {dst}"));
            asm.op(format!("st.global.v2.f32 [{at}], {{{e}, {r}}}"));
            asm.place(&done);
            asm.op("ret");
            s.push_str(&format!("\n.visible .entry {name}({params})\n{{\n{}}}\n", asm.body()));
        }
        s
    }

    /// `ptxas` assembles [`test_module`] for sm_90 when `SINTER_PTXAS` names it (skipped
    /// otherwise, unless `SINTER_REQUIRE_NVRTC=1`).
    #[test]
    fn ptxas_assembles() {
        let module = test_module();
        if let Some(r) = super::super::ptxas(&module) {
            let log = r.unwrap_or_else(|log| panic!("ptxas failed:\n{log}\n{module}"));
            eprintln!("{log}");
        }
    }
}
