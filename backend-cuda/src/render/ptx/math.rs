//! `exp` and `erf` of `f32` in PTX, inline at each use, branch-free, with host emulations.
//!
//! **Not used by the renderer yet** (the module is compiled for its tests only): in kernels that
//! compute them per element they cost more than libdevice's (24 and 34 instructions against about
//! 8 and 20): `softmax_8192x8192_f32` ran 3.9% and `layernorm_gelu_8192x4096_f32` 5% slower
//! than through NVRTC on an H200 (BENCHMARKS.md, session 37, call 4), so kernels with accurate
//! `exp` or `erf` stay CUDA C++. Kept, with their exhaustive tests, as the reference a cheaper
//! version (the hardware `ex2.approx` on the reduced argument) must match in accuracy.
//!
//! Why own functions: PTX written directly is not linked against libdevice (that is bitcode for
//! NVVM, which NVRTC runs and `ptxas` does not), so `expf` and `erff` must be spelled out, as
//! [`super::trig_slow`] spells out the slow path of `sinf`.
//!
//! Contract:
//! * [`exp`] emits e^x of an `.f32` register: within 1 ulp of `f64`'s `exp` rounded for every
//!   input, subnormal results included (rounded once); +inf from x = 88.72284 up (the first
//!   float whose e^x rounds past `f32::MAX`), +0 from x = -103.972084 down (e^x at most half the
//!   smallest subnormal), NaN for NaN (the input itself), +inf for +inf and +0 for -inf.
//! * [`erf`] emits erf(x): within 1 ulp of the exact value for every input; odd exactly
//!   (erf(-x) = -erf(x) bit for bit, erf(±0) = ±0), exactly ±1 for |x| >= 3.9155 (where erf
//!   rounds to 1 in `f32`), NaN for NaN.
//! * Every floating operation carries `.rn` (no contraction into fused multiply-adds beyond the
//!   explicit `fma.rn`, no `.ftz`), so the kernel computes exactly what `host_exp` and
//!   `host_erf` compute on the host with Rust's `f32` (IEEE operations and `mul_add`), statement
//!   for instruction. A constant stands second in each product (`fma.rn.f32 d, %reg, C, ...`).
//!
//! `exp` (24 instructions): clamp x to [-104, 89] (every result outside is +0 or +inf already),
//! `j = round(x log2 e)` by the 1.5 * 2^23 shift (one `fma.rn`, one `sub.rn`), Cody–Waite
//! reduction `r = x - j ln2_hi - j ln2_lo` (`ln2_hi` has at most 16 significant bits: the first
//! step is exact for |j| <= 150), a degree-6 polynomial of e^r on |r| <= ln2/2 ([`EXP_POLY`]), then
//! `e^r * 2^j1 * 2^j2` with `j1 = j >> 1`, `j2 = j - j1`, each power built from integer bits and
//! within the normal range: the first product is exact and the second rounds once (into the
//! subnormals, or to +inf). A final `selp` on `setp.nan` returns a NaN input itself (the clamp's
//! `max`/`min` would have dropped it).
//!
//! `erf` (34 instructions) evaluates both branches and picks one with `selp` (no divergence; the
//! helper sits inside unrolled per-element loops):
//! * |x| < [`ERF_SPLIT`] = 0.90625: `erf(x) = x + x P(x^2)`, `P` of degree 6 ([`ERF_SMALL`]); a
//!   tiny or subnormal x gives `fma(x, P(0), x)`, one rounding, and -0 stays -0;
//! * |x| >= 0.90625: `erf(|x|) = 1 - e^u`, `u = L(min(|x|, 4))` a degree-6 polynomial for
//!   `ln erfc` ([`ERF_LARGE`]), e^u by `exp`'s reduction and polynomial, and `1 - 2^j (1 + r q)`
//!   evaluated as `fma(-2^j r, q, 1 - 2^j)` (both factors exact) so that e^u is never rounded
//!   on its own; the sign of x is copied on last. Past 4 the clamp gives e^u = 1.5e-8, under half
//!   an ulp of 1, so the result is exactly ±1.
//! * NaN fails `|x| >= 0.90625` (`setp.ltu`) and takes the small branch, which propagates it.
//!
//! The coefficients were fitted for this file (a scratch script, not kept): weighted minimax by
//! Lawson's iteratively reweighted least squares on 5000 points (uniform and Chebyshev) of the
//! interval, the targets and weights in `f64` from `mpmath` at 30 digits; `EXP_POLY` against the
//! relative error of `1 + r + r^2 q(r)` to e^r, `ERF_SMALL` against the relative error of erf,
//! `ERF_LARGE` against the error it causes in erf (`|δu| erfc(x)`); each rounded to `f32` one
//! coefficient at a time from the low orders up (`ERF_LARGE`'s constant term last), refitting the
//! rest after each. The test `polynomials_fit` checks the approximation errors they reach.
//!
//! Accuracy measured against `f64` over every input (`exhaustive`, ignored: every |x| < 104 for
//! `exp`, every 0 <= x < 6 for `erf`, the rest being the clamped constants): `exp` 0.891 ulp at
//! -5.848642 (0xc0bb2813), `erf` 0.962 ulp at ±1.069939 (0x3f88f3c3). The default tests check
//! every 61st bit pattern (0.873 and 0.917 ulp), every pattern of `erf` on [0.5, 4.5] in release
//! (every 7th in debug) and of `exp`'s subnormal results, and the edges. On an H200 the PTX,
//! JIT-compiled by the driver (123 ms for both functions in a two-entry module), agreed with
//! `host_exp` and `host_erf` bit for bit on all 2^32 inputs, NaN as NaN (a one-off check
//! when this file was written).

use super::{Asm, Class, f32_lit};

/// 1.5 * 2^23: adding it rounds a float of magnitude under 2^22 to an integer in the low
/// mantissa bits (`MAGIC_BITS + j` are the bits of `MAGIC + j`).
const MAGIC: f32 = 12_582_912.0;
/// The bits of [`MAGIC`].
const MAGIC_BITS: u32 = 0x4b40_0000;
/// log2(e) rounded to `f32`.
const LOG2E: f32 = std::f32::consts::LOG2_E;
/// ln 2 truncated to 16 significant bits (the low 8 of the `f32` significand zero): `j * LN2_HI`
/// is exact for |j| < 2^8, so `x - j * LN2_HI` is exact by the closeness of x to `j ln 2`.
const LN2_HI: f32 = f32::from_bits(0x3f31_7200);
/// ln 2 - [`LN2_HI`] rounded to `f32`.
const LN2_LO: f32 = f32::from_bits(0x35bf_be8e);
/// The clamp of `exp`'s argument: e^-104 is under half the smallest subnormal (rounds to +0)
/// and e^89 over `f32::MAX` (+inf), and `j` stays within [-150, 128].
const EXP_LO: f32 = -104.0;
/// The upper clamp, see [`EXP_LO`].
const EXP_HI: f32 = 89.0;
/// `e^r = 1 + r (1 + r (Q[0] + r (Q[1] + ...)))` on |r| <= ln2/2: relative error 2^-28.2 in
/// `f64` (weighted minimax of `(e^r - 1 - r) / r^2`, see the module doc).
const EXP_POLY: [f32; 5] = [4.999_999_4e-1, 1.666_652_3e-1, 4.166_829_2e-2, 8.368_532e-3, 1.381_830_2e-3];

/// The split of `erf`'s branches: |x| below it takes the series-like polynomial.
const ERF_SPLIT: f32 = 0.906_25;
/// `erf(x) = x + x (S[0] + z (S[1] + ...))`, `z = x^2`, for |x| < [`ERF_SPLIT`]: relative error
/// 2^-30.1 in `f64` (`S[0]` is 2/sqrt(pi) - 1).
const ERF_SMALL: [f32; 7] =
    [1.283_791_7e-1, -3.761_263_2e-1, 1.128_368_15e-1, -2.685_901_9e-2, 5.200_698e-3, -8.143_688e-4, 8.389_327_6e-5];
/// `ln erfc(x) = L[0] + x (L[1] + x (L[2] + ...))` on [`ERF_SPLIT`, `ERF_CLAMP`], fitted against
/// `|δ| erfc(x)`, the error it causes in erf (at most 0.03 of 2^-24 in `f64`).
const ERF_LARGE: [f32; 7] =
    [-1.864_388_9e-4, -1.127_712_4, -6.371_227_5e-1, -1.039_817_8e-1, 2.225_016_6e-2, -3.048_824_8e-3, 1.964_875_7e-4];
/// |x| past this is taken as this in the large branch: 1 - erf(4) = 1.5e-8 is under 2^-25, half an
/// ulp of 1 below it, so the result is exactly 1 (and the polynomial stays on its interval).
const ERF_CLAMP: f32 = 4.0;

/// `e^x` of the `.f32` register `x`; returns the result's register (24 instructions, see the
/// module doc). Instruction for instruction `host_exp`.
pub(crate) fn exp(asm: &mut Asm, x: &str) -> String {
    let f = |asm: &mut Asm| asm.reg(Class::F32);
    let i = |asm: &mut Asm| asm.reg(Class::B32);
    asm.comment(format!("exp of {x}: clamp, j = round(x log2 e), Cody-Waite, polynomial, * 2^j1 * 2^j2"));
    let (c0, c) = (f(asm), f(asm));
    asm.op(format!("max.f32 {c0}, {x}, {}", f32_lit(EXP_LO)));
    asm.op(format!("min.f32 {c}, {c0}, {}", f32_lit(EXP_HI)));
    let (t, r, q) = reduce(asm, &c);
    let p = f(asm);
    asm.op(format!("fma.rn.f32 {p}, {q}, {r}, {}", f32_lit(1.0)));
    // j = bits(t) - MAGIC_BITS; 2^j1 and 2^j2 from their biased exponents (MAGIC_BITS << 23 wraps
    // to 0, so bits(t) - j1 serves for j2 = j - j1).
    let (ti, j, j1, k2, b1, b2) = (i(asm), i(asm), i(asm), i(asm), i(asm), i(asm));
    asm.op(format!("mov.b32 {ti}, {t}"));
    asm.op(format!("sub.s32 {j}, {ti}, 0x{MAGIC_BITS:08X}"));
    asm.op(format!("shr.s32 {j1}, {j}, 1"));
    asm.op(format!("sub.s32 {k2}, {ti}, {j1}"));
    asm.op(format!("mad.lo.u32 {b1}, {j1}, 0x00800000, 0x3F800000"));
    asm.op(format!("mad.lo.u32 {b2}, {k2}, 0x00800000, 0x3F800000"));
    let (s1, s2, y1, y, res) = (f(asm), f(asm), f(asm), f(asm), f(asm));
    asm.op(format!("mov.b32 {s1}, {b1}"));
    asm.op(format!("mov.b32 {s2}, {b2}"));
    asm.op(format!("mul.rn.f32 {y1}, {p}, {s1}"));
    asm.op(format!("mul.rn.f32 {y}, {y1}, {s2}"));
    let nan = asm.reg(Class::Pred);
    asm.op(format!("setp.nan.f32 {nan}, {x}, {x}"));
    asm.op(format!("selp.f32 {res}, {x}, {y}, {nan}"));
    res
}

/// `erf(x)` of the `.f32` register `x`; returns the result's register (34 instructions, both
/// branches and a `selp`, see the module doc). Instruction for instruction `host_erf`.
pub(crate) fn erf(asm: &mut Asm, x: &str) -> String {
    let f = |asm: &mut Asm| asm.reg(Class::F32);
    asm.comment(format!("erf of {x}: x + x P(x^2) below {ERF_SPLIT}, else 1 - exp(L(min(|x|, {ERF_CLAMP})))"));
    let (a, z, small) = (f(asm), f(asm), f(asm));
    asm.op(format!("abs.f32 {a}, {x}"));
    asm.op(format!("mul.rn.f32 {z}, {x}, {x}"));
    let ps = horner(asm, &z, &ERF_SMALL);
    asm.op(format!("fma.rn.f32 {small}, {x}, {ps}, {x}"));
    let m = f(asm);
    asm.op(format!("min.f32 {m}, {a}, {}", f32_lit(ERF_CLAMP)));
    let u = horner(asm, &m, &ERF_LARGE);
    let (t, r, q) = reduce(asm, &u);
    // -2^j from its bits (sign set, biased exponent j + 127; MAGIC_BITS << 23 wraps to 0), then
    // 1 - 2^j (1 + r q) = fma(-2^j r, q, 1 - 2^j): both exact, one rounding.
    let (ti, bn) = (asm.reg(Class::B32), asm.reg(Class::B32));
    asm.op(format!("mov.b32 {ti}, {t}"));
    asm.op(format!("mad.lo.u32 {bn}, {ti}, 0x00800000, 0xBF800000"));
    let (sn, nsr, oms, big, signed, res) = (f(asm), f(asm), f(asm), f(asm), f(asm), f(asm));
    asm.op(format!("mov.b32 {sn}, {bn}"));
    asm.op(format!("mul.rn.f32 {nsr}, {r}, {sn}"));
    asm.op(format!("add.rn.f32 {oms}, {sn}, {}", f32_lit(1.0)));
    asm.op(format!("fma.rn.f32 {big}, {nsr}, {q}, {oms}"));
    // PTX's copysign takes the sign from its first source.
    asm.op(format!("copysign.f32 {signed}, {x}, {big}"));
    let lt = asm.reg(Class::Pred);
    asm.op(format!("setp.ltu.f32 {lt}, {a}, {}", f32_lit(ERF_SPLIT)));
    asm.op(format!("selp.f32 {res}, {small}, {signed}, {lt}"));
    res
}

/// The shared core of e^c: `t` holding j in its low bits, the reduced `r` and `q` with
/// `e^r = 1 + r q` (9 instructions). `host_reduce` on the host.
fn reduce(asm: &mut Asm, c: &str) -> (String, String, String) {
    let f = |asm: &mut Asm| asm.reg(Class::F32);
    let (t, j, r1, r) = (f(asm), f(asm), f(asm), f(asm));
    asm.op(format!("fma.rn.f32 {t}, {c}, {}, {}", f32_lit(LOG2E), f32_lit(MAGIC)));
    asm.op(format!("sub.rn.f32 {j}, {t}, {}", f32_lit(MAGIC)));
    asm.op(format!("fma.rn.f32 {r1}, {j}, {}, {c}", f32_lit(-LN2_HI)));
    asm.op(format!("fma.rn.f32 {r}, {j}, {}, {r1}", f32_lit(-LN2_LO)));
    let q = horner(asm, &r, &[1.0, EXP_POLY[0], EXP_POLY[1], EXP_POLY[2], EXP_POLY[3], EXP_POLY[4]]);
    (t, r, q)
}

/// `c[0] + v (c[1] + v (c[2] + ...))` by `fma.rn` (`c.len() - 1` instructions, at least two
/// coefficients). `host_horner` on the host.
fn horner(asm: &mut Asm, v: &str, c: &[f32]) -> String {
    let n = c.len();
    let mut acc = asm.reg(Class::F32);
    asm.op(format!("fma.rn.f32 {acc}, {v}, {}, {}", f32_lit(c[n - 1]), f32_lit(c[n - 2])));
    for &k in c[..n - 2].iter().rev() {
        let next = asm.reg(Class::F32);
        asm.op(format!("fma.rn.f32 {next}, {acc}, {v}, {}", f32_lit(k)));
        acc = next;
    }
    acc
}

/// [`horner`] on the host.
#[cfg(test)]
fn host_horner(v: f32, c: &[f32]) -> f32 {
    let n = c.len();
    let mut acc = v.mul_add(c[n - 1], c[n - 2]);
    for &k in c[..n - 2].iter().rev() {
        acc = acc.mul_add(v, k);
    }
    acc
}

/// [`reduce`] on the host: `(t, r, q)`.
#[cfg(test)]
fn host_reduce(c: f32) -> (f32, f32, f32) {
    let t = c.mul_add(LOG2E, MAGIC); // fma.rn
    let j = t - MAGIC; // sub.rn
    let r1 = j.mul_add(-LN2_HI, c); // fma.rn (exact)
    let r = j.mul_add(-LN2_LO, r1); // fma.rn
    let q = host_horner(r, &[1.0, EXP_POLY[0], EXP_POLY[1], EXP_POLY[2], EXP_POLY[3], EXP_POLY[4]]);
    (t, r, q)
}

/// [`exp`] on the host, operation for operation.
#[cfg(test)]
pub(crate) fn host_exp(x: f32) -> f32 {
    // max.f32 and min.f32 return the other operand for a NaN, as Rust's max and min do (clamp
    // would keep the NaN; the final select returns it either way).
    #[allow(clippy::manual_clamp)]
    let c = x.max(EXP_LO).min(EXP_HI);
    let (t, r, q) = host_reduce(c);
    let p = q.mul_add(r, 1.0); // fma.rn
    let ti = t.to_bits(); // mov.b32
    let j = ti.wrapping_sub(MAGIC_BITS) as i32; // sub.s32
    let j1 = j >> 1; // shr.s32
    let k2 = ti.wrapping_sub(j1 as u32); // sub.s32
    let s1 = f32::from_bits((j1 as u32).wrapping_mul(1 << 23).wrapping_add(0x3f80_0000)); // mad.lo.u32
    let s2 = f32::from_bits(k2.wrapping_mul(1 << 23).wrapping_add(0x3f80_0000)); // mad.lo.u32
    let y = p * s1 * s2; // mul.rn, mul.rn
    if x.is_nan() { x } else { y } // setp.nan, selp
}

/// [`erf`] on the host, operation for operation.
#[cfg(test)]
pub(crate) fn host_erf(x: f32) -> f32 {
    let a = x.abs(); // abs.f32
    let z = x * x; // mul.rn
    let small = x.mul_add(host_horner(z, &ERF_SMALL), x); // fma.rn
    let m = a.min(ERF_CLAMP); // min.f32
    let u = host_horner(m, &ERF_LARGE);
    let (t, r, q) = host_reduce(u);
    let sn = f32::from_bits(t.to_bits().wrapping_mul(1 << 23).wrapping_add(0xbf80_0000)); // mad.lo.u32
    let big = (r * sn).mul_add(q, sn + 1.0); // mul.rn, add.rn, fma.rn
    let signed = big.copysign(x); // copysign.f32
    // setp.ltu: less than, or unordered (NaN takes the small branch).
    if a >= ERF_SPLIT { signed } else { small } // selp
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
        assert_eq!(MAGIC.to_bits(), MAGIC_BITS);
        assert_eq!(MAGIC, 1.5 * (1u32 << 23) as f32);
        // LN2_HI: ln 2 in f32 with the low 8 significand bits cleared (truncated), so j * LN2_HI is
        // exact for every j of the clamped range.
        assert_eq!(LN2_HI.to_bits() & 0xff, 0);
        assert_eq!(LN2_HI.to_bits(), std::f32::consts::LN_2.to_bits() & !0xff);
        assert!((LN2_HI as f64) < std::f64::consts::LN_2);
        assert_eq!(LN2_LO, (std::f64::consts::LN_2 - LN2_HI as f64) as f32);
        for j in -150i32..=128 {
            let p = j as f64 * LN2_HI as f64;
            assert_eq!(p as f32 as f64, p, "{j}");
        }
        // The clamps change no result, and j stays in the range the scaling covers.
        assert_eq!((EXP_LO as f64).exp() as f32, 0.0);
        assert!(((EXP_HI as f64).exp() as f32).is_infinite());
        let j = |c: f32| c.mul_add(LOG2E, MAGIC) - MAGIC;
        assert_eq!((j(EXP_LO), j(EXP_HI)), (-150.0, 128.0));
        // erf rounds to 1 at the clamp already: 1 - erf(4) under half an ulp of 1 below it.
        assert_eq!(ref_erf(ERF_CLAMP as f64) as f32, 1.0);
        assert!(ref_erfc(ERF_CLAMP as f64) < 2f64.powi(-25));
        assert_eq!(f32_lit(-LN2_HI), "0fBF317200");
    }

    /// The polynomials in `f64` (coefficients as stored): the approximation error alone, which
    /// the module doc quotes.
    #[test]
    fn polynomials_fit() {
        let horner64 = |v: f64, c: &[f32]| c.iter().rev().fold(0.0, |acc, &k| acc * v + k as f64);
        let grid = |a: f64, b: f64| (0..=20_000).map(move |i| a + (b - a) * i as f64 / 20_000.0);
        let h = std::f64::consts::LN_2 / 2.0;
        let e =
            grid(-h, h).map(|r| ((1.0 + r + r * r * horner64(r, &EXP_POLY)) / r.exp() - 1.0).abs()).fold(0.0, f64::max);
        assert!(e < 2f64.powi(-28), "exp: 2^{:.2}", e.log2());
        let s = grid(1e-6, ERF_SPLIT as f64)
            .map(|x| ((x + x * horner64(x * x, &ERF_SMALL)) / ref_erf(x) - 1.0).abs())
            .fold(0.0, f64::max);
        assert!(s < 2f64.powi(-30), "erf small: 2^{:.2}", s.log2());
        let l = grid(ERF_SPLIT as f64, ERF_CLAMP as f64)
            .map(|x| {
                let erfc = ref_erfc(x);
                (horner64(x, &ERF_LARGE) - erfc.ln()).abs() * erfc / 2f64.powi(-24)
            })
            .fold(0.0, f64::max);
        assert!(l < 0.03, "erf large: {l} of 2^-24");
        eprintln!(
            "approximation errors: exp 2^{:.2}, erf small 2^{:.2}, erf large {l:.4} of 2^-24",
            e.log2(),
            s.log2()
        );
    }

    /// Every 61st bit pattern of all 2^32 (70 million, both signs, every exponent) against `f64`.
    #[test]
    fn exp_within_one_ulp_sweep() {
        let w = sweep(0, u32::MAX, 61, host_exp, f64::exp);
        eprintln!("exp, every 61st pattern: worst {} ulp at {:e} ({:#010x})", w.0, w.1, w.1.to_bits());
        assert!(w.0 <= 1.0, "exp: {} ulp at {:e}", w.0, w.1);
    }

    /// Every 61st bit pattern, and every pattern of [0.5, 4.5] (where both branches and their
    /// split lie; every 7th in a debug build), against `f64`.
    #[test]
    fn erf_within_one_ulp_sweep() {
        let w = sweep(0, u32::MAX, 61, host_erf, ref_erf);
        eprintln!("erf, every 61st pattern: worst {} ulp at {:e} ({:#010x})", w.0, w.1, w.1.to_bits());
        assert!(w.0 <= 1.0, "erf: {} ulp at {:e}", w.0, w.1);
        let step = if cfg!(debug_assertions) { 7 } else { 1 };
        let w = sweep(0.5f32.to_bits(), 4.5f32.to_bits(), step, host_erf, ref_erf);
        eprintln!("erf on [0.5, 4.5], every {step}: worst {} ulp at {:e} ({:#010x})", w.0, w.1, w.1.to_bits());
        assert!(w.0 <= 1.0, "erf: {} ulp at {:e}", w.0, w.1);
    }

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
            assert_eq!(host_exp(x).to_bits(), x.to_bits());
        }
        // The overflow and underflow boundaries and the subnormal results: +inf and +0 exactly
        // where f64 rounds there, and within an ulp (of the smallest normal) around them.
        let over = f32::from_bits(0x42b1_7218); // 88.72284, the first to overflow
        assert!(host_exp(over).is_infinite() && host_exp(f32::from_bits(over.to_bits() - 1)).is_finite());
        let under = f32::from_bits(0xc2cf_f1b4); // -103.97208, the last to give 2^-149
        assert_eq!(host_exp(under).to_bits(), 1);
        assert_eq!(host_exp(f32::from_bits(under.to_bits() + 1)).to_bits(), 0);
        let normal = -87.336_55f32; // e^x near the smallest normal
        for x in around(over, 64).chain(around(under, 64)).chain(around(normal, 64)) {
            let want = (x as f64).exp();
            assert_eq!(host_exp(x).is_infinite(), (want as f32).is_infinite(), "{x:e}");
            assert_eq!(host_exp(x) == 0.0, want as f32 == 0.0, "{x:e}");
            assert!(ulps(host_exp(x), want) <= 1.0, "{x:e}: {} against {want:e}", host_exp(x));
        }
        // Every pattern of the subnormal results.
        let w = sweep((-87.34f32).to_bits(), (-104.0f32).to_bits(), 1, host_exp, f64::exp);
        assert!(w.0 <= 1.0, "{} ulp at {:e}", w.0, w.1);
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
        // Exactly ±1 from where erf rounds to 1 on, infinities included.
        let last = (0x4070_0000u32..0x4080_0000).rev().find(|&b| ref_erf(f32::from_bits(b) as f64) as f32 != 1.0);
        let first_one = f32::from_bits(last.unwrap() + 1);
        assert!((3.91..3.92).contains(&first_one), "{first_one}");
        for x in
            around(first_one, 1000).filter(|&x| x >= first_one).chain([4.0, 4.5, 10.0, 1e30, f32::MAX, f32::INFINITY])
        {
            assert_eq!(host_erf(x), 1.0, "{x:e}");
            assert_eq!(host_erf(-x), -1.0, "{x:e}");
        }
        // Both sides of the split and of the clamp.
        for x in around(ERF_SPLIT, 4096).chain(around(ERF_CLAMP, 64)) {
            assert!(ulps(host_erf(x), ref_erf(x as f64)) <= 1.0, "{x:e}: {}", host_erf(x));
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

    /// Every input with |x| < 104 for exp and every positive one below 6 for erf (erf is odd bit
    /// for bit, `erf_is_odd`); larger |x| are the constant results that `*_edges` check. About 4
    /// minutes on 2 cores in release: `--release -- --ignored exhaustive`.
    #[test]
    #[ignore]
    fn exhaustive() {
        let (lo, hi) = (0, 104f32.to_bits());
        let w = sweep(lo, hi, 1, host_exp, f64::exp);
        let n = sweep(lo | 0x8000_0000, hi | 0x8000_0000, 1, host_exp, f64::exp);
        let w = if n.0 > w.0 { n } else { w };
        eprintln!("exp, every |x| < 104: worst {} ulp at {:e} ({:#010x})", w.0, w.1, w.1.to_bits());
        assert!(w.0 <= 1.0);
        let w = sweep(0, 6f32.to_bits(), 1, host_erf, ref_erf);
        eprintln!("erf, every 0 <= x < 6: worst {} ulp at {:e} ({:#010x})", w.0, w.1, w.1.to_bits());
        assert!(w.0 <= 1.0);
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
        assert_eq!(instructions(&asm), 24);
        let mut asm = Asm::new();
        let x = asm.reg(Class::F32);
        erf(&mut asm, &x);
        assert_eq!(instructions(&asm), 34);
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
