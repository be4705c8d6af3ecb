//! The slow path of `sinf`/`cosf` in PTX: Payne–Hanek reduction for arguments of any magnitude.
//!
//! Contract: [`module_text`] is module-scope PTX, emitted once per module that calls it, holding a
//! `.const` table of the bits of 2/π and `.func (.param .f32 ret) sinter_sincosf_slow(.param .f32
//! x, .param .u32 offset)`, which returns sin(x) for `offset` 0 and cos(x) for 1: within 2 ulp of
//! the exact value (libdevice's documented bound for `sinf`) for every finite |x| >= 1, NaN for NaN
//! and ±inf; sin is odd and cos even. Below 1 the result is unspecified (it holds down to 2^-7 and
//! is garbage below, where the table reads still stay in bounds): the caller keeps the fast path of
//! `render::trig` (Cody–Waite reduction, inline) for |x| <= `FAST_LIMIT` and calls this function
//! past it, for infinities and NaN.
//!
//! Why here and not libdevice: PTX written directly is not linked against libdevice (that is
//! bitcode for NVVM, which NVRTC runs and `ptxas` does not), so `sinf` for large arguments must be
//! spelled out. Why out of line: the reduction is some 75 instructions that almost never run; a
//! `.func` gives one copy per module however many `sin`s and `cos`s a kernel has (CUDA C++'s
//! `sinter_sinf_slow` in `render::trig` exists for the same reason), and the inline fast path pays
//! only a compare and a branch for it.
//!
//! The method, with no loop and no local memory (`x = ±m * 2^e`, `m` the 24-bit integer
//! significand, `e = biased - 150`, in [-23, 104] for finite |x| >= 1):
//! - `x * 2/π mod 4` needs only the fraction bits of 2/π from index `e - 1` on (bit 1 weighs
//!   1/2): an earlier bit `i` contributes `m * 2^(e - i)`, a multiple of 4. A 96-bit window `W` of
//!   [`TABLE`] starting there is three 32-bit words, each a funnel shift `shf.l.clamp.b32` of two
//!   adjacent table words (the clamp makes a shift of 0 return the high word, no special case);
//! - `P = m * W` (up to 120 bits) from three `mul.wide.u32` and two 64-bit adds, and
//!   `x * 2/π mod 4 = P * 2^-94` up to the bits past the window (under `m * 2^-94 < 2^-70`);
//! - the quadrant is `P >> 94` and the fraction `F = bits 30..93 of P`; read as a signed 64-bit
//!   integer, `F < 0` means a fraction of 1/2 or more, so the quadrant rounds up and `F - 2^64` is
//!   the signed remainder: `r = F * 2^-64 * π/2`, in [-π/4, π/4], by `cvt.rn.f64.s64`, one
//!   `mul.rn.f64` by the exact [`SCALE`] and `cvt.rn.f32.f64`. The dropped bits of P are under
//!   2^-64 of a quadrant, and the float closest to a multiple of π/2 leaves 2^-29.9 of one
//!   (|F| = 2^34.1 at x = 7.729179e28; the tests list the closest for every exponent), so `r` is
//!   right to 2^-34 relative or better, ten bits past the float's;
//! - then the fast path's polynomials (`render::trig`'s [`SIN`] and [`COS`]) on `r`, picked and
//!   signed by the quadrant plus `offset`; for sin, the sign of x last.
//!
//! `host_slow` runs the same integer and floating operations on the host, one statement per
//! instruction or short group of them, with the PTX mnemonic beside each; every floating operation
//! is IEEE round-to-nearest in both (`.rn` everywhere, so `ptxas` fuses no `mul` into an `fma`, and
//! no `.ftz`), so the two agree bit for bit: on an H200 the PTX matched `host_slow` for all 2^32
//! inputs and both offsets (NaN as NaN; a one-off check when this file was written). The tests
//! bound its error at 2 ulp against `f64`'s `sin`/`cos` (which reduce large arguments correctly),
//! check the table against 2/π computed from Machin's formula, and have `ptxas` assemble the text
//! when `SINTER_PTXAS` names it. Over every float of magnitude 1 and up (`exhaustive_from_one`,
//! ignored: 70 s in release) the worst error is 1.58 ulp, cos at 1.9468792e9.

#[cfg(test)]
use crate::render::trig::FAST_LIMIT;
use crate::render::trig::{COS, SIN};

/// Name of the PTX function.
pub(crate) const FUNC: &str = "sinter_sincosf_slow";

/// Name of the `.const` table of the bits of 2/π.
const TABLE_NAME: &str = "sinter_two_over_pi";

/// 2/π in binary as big-endian 32-bit words: word 0 is zero (the integer part and the padding in
/// front of the fraction), words 1..7 the first 224 fraction bits (`0.A2F9836E 4E441529 ...`).
///
/// The window of 96 bits starts at bit `g = e + 30` counted from the top of word 0 (fraction bit
/// `i` sits at `31 + i`, the window starts at `i = e - 1`), and its three words are shifted out of
/// the four table words from `g >> 5` on. For finite |x| >= 1, `e` runs over [-23, 104], so `g`
/// over [7, 134] and the reads over words 0..7: the zero word keeps `g` non-negative down to |x| =
/// 2^-7 (there the window starts before the binary point of 2/π, whose bits are zero), and eight
/// words suffice at the top. Infinities and NaN (`e = 105`, `g = 135`) read the same words. Zero,
/// subnormals and |x| < 2^-7 give `g < 0`, which the function clamps to 0 (one `max.s32`) so that
/// every input reads inside the table; their result is meaningless and the caller never asks for
/// it. The window's last bit is fraction bit `e + 94 <= 198`, well inside the table.
const TABLE: [u32; 8] =
    [0x0000_0000, 0xa2f9_836e, 0x4e44_1529, 0xfc27_57d1, 0xf534_ddc0, 0xdb62_9599, 0x3c43_9041, 0xfe51_63ab];

/// 2^-64 * π/2 in `f64` (exact: `f64`'s π/2 scaled by a power of two): turns the 64-bit fraction
/// of a quadrant into radians.
const SCALE: f64 = std::f64::consts::FRAC_PI_2 / 18_446_744_073_709_551_616.0;

/// A PTX `f32` literal (`0fXXXXXXXX`), exact.
fn lit(v: f32) -> String {
    format!("0f{:08X}", v.to_bits())
}

/// A PTX `f64` literal (`0dXXXXXXXXXXXXXXXX`), exact.
fn lit64(v: f64) -> String {
    format!("0d{:016X}", v.to_bits())
}

/// The module-scope PTX text: a `.const` table of the bits of 2/π and the `.func` itself:
/// `.func (.param .f32 ret) sinter_sincosf_slow(.param .f32 x, .param .u32 offset)`
/// computing sin(x) for offset 0 and cos(x) for offset 1.
///
/// Both are module-local (no `.visible`), so the text goes once into every module that calls the
/// function, before the first call. Instruction by instruction it is `host_slow`.
pub(crate) fn module_text() -> String {
    let table = TABLE.iter().map(|w| format!("0x{w:08X}")).collect::<Vec<_>>().join(", ");
    format!(
        "// 2/pi in binary, big-endian words: word 0 zero (integer part and padding), then 224 fraction bits
.const .align 4 .u32 {TABLE_NAME}[8] = {{{table}}};

// sin(x) for offset 0, cos(x) for offset 1, any finite |x| >= 1 (NaN for inf and NaN): Payne-Hanek
// reduction by pi/2 with a 96-bit window of 2/pi, then the fast path's polynomials on [-pi/4, pi/4]
.func (.param .f32 ret) {FUNC}(.param .f32 x, .param .u32 offset)
{{
    .reg .pred %odd, %issin, %finite;
    .reg .b32 %bits, %be, %m, %g, %idx, %sh, %t0, %t1, %t2, %t3, %w0, %w1, %w2;
    .reg .b32 %l32, %m32, %q, %up, %off, %flip, %sx, %vb;
    .reg .b64 %addr, %lo, %mid, %hi, %tmp, %low, %frac;
    .reg .f64 %fd;
    .reg .f32 %x, %r, %z, %zr, %zz, %ps, %s, %pc, %h, %c, %v, %nan, %res;
    ld.param.f32 %x, [x];
    ld.param.u32 %off, [offset];
    // |x| = m * 2^e, e = be - 150
    mov.b32 %bits, %x;
    bfe.u32 %be, %bits, 23, 8;
    and.b32 %m, %bits, 0x007FFFFF;
    or.b32 %m, %m, 0x00800000;
    // the window of 2/pi starts at fraction bit e - 1, table bit g = e + 30 (clamped: |x| < 2^-7)
    sub.s32 %g, %be, 120;
    max.s32 %g, %g, 0;
    shr.u32 %idx, %g, 5;
    and.b32 %sh, %g, 31;
    mov.u64 %addr, {TABLE_NAME};
    mad.wide.u32 %addr, %idx, 4, %addr;
    ld.const.u32 %t0, [%addr];
    ld.const.u32 %t1, [%addr+4];
    ld.const.u32 %t2, [%addr+8];
    ld.const.u32 %t3, [%addr+12];
    shf.l.clamp.b32 %w2, %t1, %t0, %sh;
    shf.l.clamp.b32 %w1, %t2, %t1, %sh;
    shf.l.clamp.b32 %w0, %t3, %t2, %sh;
    // P = m * (w2:w1:w0) = hi * 2^64 + (mid mod 2^32) * 2^32 + (lo mod 2^32); x 2/pi mod 4 = P 2^-94
    mul.wide.u32 %lo, %m, %w0;
    mul.wide.u32 %mid, %m, %w1;
    shr.u64 %tmp, %lo, 32;
    add.u64 %mid, %mid, %tmp;
    mul.wide.u32 %hi, %m, %w2;
    shr.u64 %tmp, %mid, 32;
    add.u64 %hi, %hi, %tmp;
    // frac = bits 30..93 of P; the quadrant P >> 94, rounded up when frac (signed) < 0
    cvt.u32.u64 %l32, %lo;
    cvt.u32.u64 %m32, %mid;
    mov.b64 %low, {{%l32, %m32}};
    shr.u64 %low, %low, 30;
    shl.b64 %frac, %hi, 34;
    or.b64 %frac, %frac, %low;
    cvt.u32.u64 %q, %hi;
    shr.u32 %q, %q, 30;
    shr.u64 %tmp, %frac, 63;
    cvt.u32.u64 %up, %tmp;
    add.u32 %q, %q, %up;
    add.u32 %q, %q, %off;
    // r = frac * 2^-64 * pi/2, in [-pi/4, pi/4]
    cvt.rn.f64.s64 %fd, %frac;
    mul.rn.f64 %fd, %fd, {scale};
    cvt.rn.f32.f64 %r, %fd;
    // the fast path's polynomials; sin r has the sign of r
    mul.rn.f32 %z, %r, %r;
    fma.rn.f32 %ps, {s2}, %z, {s1};
    fma.rn.f32 %ps, %ps, %z, {s0};
    mul.rn.f32 %zr, %z, %r;
    fma.rn.f32 %ps, %ps, %zr, %r;
    copysign.f32 %s, %r, %ps;
    fma.rn.f32 %pc, {c2}, %z, {c1};
    fma.rn.f32 %pc, %pc, %z, {c0};
    mul.rn.f32 %zz, %z, %z;
    fma.rn.f32 %h, {minus_half}, %z, {one};
    fma.rn.f32 %c, %pc, %zz, %h;
    and.b32 %t0, %q, 1;
    setp.ne.u32 %odd, %t0, 0;
    selp.f32 %v, %c, %s, %odd;
    // negate for quadrants 2 and 3 (bit 1 of q to the sign bit), and for sin when x < 0
    shl.b32 %flip, %q, 30;
    setp.eq.u32 %issin, %off, 0;
    selp.b32 %sx, %bits, 0, %issin;
    xor.b32 %flip, %flip, %sx;
    and.b32 %flip, %flip, 0x80000000;
    mov.b32 %vb, %v;
    xor.b32 %vb, %vb, %flip;
    mov.b32 %res, %vb;
    // inf and NaN: NaN
    testp.finite.f32 %finite, %x;
    sub.rn.f32 %nan, %x, %x;
    selp.f32 %res, %res, %nan, %finite;
    st.param.f32 [ret], %res;
    ret;
}}
",
        scale = lit64(SCALE),
        s0 = lit(SIN[0]),
        s1 = lit(SIN[1]),
        s2 = lit(SIN[2]),
        c0 = lit(COS[0]),
        c1 = lit(COS[1]),
        c2 = lit(COS[2]),
        minus_half = lit(-0.5),
        one = lit(1.0),
    )
}

/// `shf.l.clamp.b32 d, a, b, c`: the high word of the 64-bit `b:a` shifted left by `min(c, 32)`.
#[cfg(test)]
fn shf_l_clamp(a: u32, b: u32, c: u32) -> u32 {
    (((u64::from(b) << 32 | u64::from(a)) << c.min(32)) >> 32) as u32
}

/// The reduction of `host_slow`: the quadrant (rounded to nearest, before `offset`) and the
/// signed fraction `frac` of a quadrant in units of 2^-64, `|x| * 2/π = q + frac * 2^-64 mod 4`.
/// Each line is the PTX instruction(s) named beside it.
#[cfg(test)]
fn host_reduce(x: f32) -> (u32, i64) {
    let bits = x.to_bits(); // mov.b32 %bits
    let be = (bits >> 23) & 0xff; // bfe.u32 %be
    let m = (bits & 0x7f_ffff) | 0x80_0000; // and.b32, or.b32 %m
    let g = (be as i32 - 120).max(0) as u32; // sub.s32, max.s32 %g
    let (idx, sh) = ((g >> 5) as usize, g & 31); // shr.u32 %idx, and.b32 %sh
    let t = &TABLE[idx..idx + 4]; // mad.wide.u32 %addr, ld.const.u32 %t0..%t3
    let w2 = shf_l_clamp(t[1], t[0], sh); // shf.l.clamp.b32 %w2
    let w1 = shf_l_clamp(t[2], t[1], sh); // shf.l.clamp.b32 %w1
    let w0 = shf_l_clamp(t[3], t[2], sh); // shf.l.clamp.b32 %w0
    let lo = u64::from(m) * u64::from(w0); // mul.wide.u32 %lo
    let mid = u64::from(m) * u64::from(w1) + (lo >> 32); // mul.wide.u32, shr.u64, add.u64 %mid
    let hi = u64::from(m) * u64::from(w2) + (mid >> 32); // mul.wide.u32, shr.u64, add.u64 %hi
    let low = (u64::from(mid as u32) << 32) | u64::from(lo as u32); // cvt.u32.u64 x2, mov.b64 %low
    let frac = (hi << 34) | (low >> 30); // shr.u64, shl.b64, or.b64 %frac
    let q = ((hi as u32) >> 30) + (frac >> 63) as u32; // cvt, shr.u32, shr.u64, cvt, add.u32 %q
    (q, frac as i64)
}

/// Host emulation doing exactly the same integer and floating operations (for tests): sin(x) for
/// `offset` 0, cos(x) for 1. Each line is the PTX instruction(s) named beside it.
#[cfg(test)]
pub(crate) fn host_slow(x: f32, offset: u32) -> f32 {
    let (q, frac) = host_reduce(x);
    let q = q.wrapping_add(offset); // add.u32 %q, %q, %off
    let r = ((frac as f64) * SCALE) as f32; // cvt.rn.f64.s64, mul.rn.f64, cvt.rn.f32.f64 %r
    let z = r * r; // mul.rn.f32 %z
    let ps = SIN[2].mul_add(z, SIN[1]).mul_add(z, SIN[0]); // fma.rn.f32 %ps x2
    let ps = ps.mul_add(z * r, r); // mul.rn.f32 %zr, fma.rn.f32 %ps
    let s = ps.copysign(r); // copysign.f32 %s, %r, %ps
    let pc = COS[2].mul_add(z, COS[1]).mul_add(z, COS[0]); // fma.rn.f32 %pc x2
    let c = pc.mul_add(z * z, (-0.5f32).mul_add(z, 1.0)); // mul.rn.f32 %zz, fma.rn.f32 %h, %c
    let v = if q & 1 != 0 { c } else { s }; // and.b32, setp.ne.u32 %odd, selp.f32 %v
    let sx = if offset == 0 { x.to_bits() } else { 0 }; // setp.eq.u32 %issin, selp.b32 %sx
    let flip = ((q << 30) ^ sx) & 0x8000_0000; // shl.b32, xor.b32, and.b32 %flip
    let res = f32::from_bits(v.to_bits() ^ flip); // mov.b32 %vb, xor.b32, mov.b32 %res
    #[allow(clippy::eq_op)]
    let nan = x - x; // sub.rn.f32 %nan, %x, %x
    if x.is_finite() { res } else { nan } // testp.finite.f32, selp.f32 %res
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::trig::ulps;

    /// The worst error of sin and cos over `xs`: (ulp, x, offset).
    fn worst(xs: impl IntoIterator<Item = f32>) -> (f64, f32, u32) {
        let mut w = (0.0, 0.0, 0);
        for x in xs {
            for (offset, f) in [(0, f64::sin as fn(f64) -> f64), (1, f64::cos)] {
                let e = ulps(host_slow(x, offset), f(x as f64));
                if e > w.0 || e.is_nan() {
                    w = (e, x, offset);
                }
            }
        }
        w
    }

    /// A fixed-seed xorshift.
    fn xorshift(mut s: u64) -> impl FnMut() -> u64 {
        move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        }
    }

    /// Little-endian 32-bit limbs of a fixed-point number with `FRAC_LIMBS` fraction limbs.
    type Big = Vec<u32>;
    /// 384 fraction bits (2/π is needed to 224, plus a margin to prove the rounding cannot reach).
    const FRAC_LIMBS: usize = 12;

    fn big_div_small(a: &mut Big, d: u32) {
        let mut rem = 0u64;
        for limb in a.iter_mut().rev() {
            let cur = (rem << 32) | u64::from(*limb);
            *limb = (cur / u64::from(d)) as u32;
            rem = cur % u64::from(d);
        }
    }

    fn big_add(a: &mut Big, b: &Big) {
        let mut carry = 0u64;
        for (x, y) in a.iter_mut().zip(b) {
            let s = u64::from(*x) + u64::from(*y) + carry;
            *x = s as u32;
            carry = s >> 32;
        }
        assert_eq!(carry, 0);
    }

    fn big_sub(a: &mut Big, b: &Big) {
        let mut borrow = 0i64;
        for (x, y) in a.iter_mut().zip(b) {
            let d = i64::from(*x) - i64::from(*y) - borrow;
            *x = d as u32;
            borrow = i64::from(d < 0);
        }
        assert_eq!(borrow, 0);
    }

    fn big_ge(a: &Big, b: &Big) -> bool {
        a.iter().rev().cmp(b.iter().rev()) != std::cmp::Ordering::Less
    }

    /// atan(1/k) = sum (-1)^n / ((2n+1) k^(2n+1)), each term truncated (about 2^-380 off in all).
    fn atan_inv(k: u32) -> Big {
        let mut power = vec![0; FRAC_LIMBS + 1];
        power[FRAC_LIMBS] = 1;
        big_div_small(&mut power, k);
        let (mut plus, mut minus) = (vec![0; FRAC_LIMBS + 1], vec![0; FRAC_LIMBS + 1]);
        let mut n = 0u32;
        while power.iter().any(|&l| l != 0) {
            let mut term = power.clone();
            big_div_small(&mut term, 2 * n + 1);
            big_add(if n.is_multiple_of(2) { &mut plus } else { &mut minus }, &term);
            big_div_small(&mut power, k * k);
            n += 1;
        }
        big_sub(&mut plus, &minus);
        plus
    }

    /// Fraction bits 1..=n of 2/π, from π by Machin's formula π = 16 atan(1/5) - 4 atan(1/239) and
    /// binary long division.
    fn two_over_pi_bits(n: usize) -> Vec<bool> {
        let (a5, a239) = (atan_inv(5), atan_inv(239));
        let mut pi = vec![0; FRAC_LIMBS + 1];
        for _ in 0..16 {
            big_add(&mut pi, &a5);
        }
        for _ in 0..4 {
            big_sub(&mut pi, &a239);
        }
        // A sanity check of π against f64: the top fraction limbs.
        let approx = pi[FRAC_LIMBS] as f64 + pi[FRAC_LIMBS - 1] as f64 / 4_294_967_296.0;
        assert!((approx - std::f64::consts::PI).abs() < 1e-9, "{approx}");
        let mut rem = vec![0; FRAC_LIMBS + 1];
        rem[FRAC_LIMBS] = 2;
        let mut bits = Vec::with_capacity(n);
        for _ in 0..n {
            let doubled = rem.clone();
            big_add(&mut rem, &doubled);
            let bit = big_ge(&rem, &pi);
            if bit {
                big_sub(&mut rem, &pi);
            }
            bits.push(bit);
        }
        bits
    }

    #[test]
    fn table_is_two_over_pi() {
        let bits = two_over_pi_bits(320);
        // π is known to about 2^-370, so the first 224 bits of 2/π are right unless bits 225.. run
        // all equal for some 140 places: a mix of both within the next 96 rules that out.
        let tail = &bits[224..320];
        assert!(tail.contains(&true) && tail.contains(&false));
        let words: Vec<u32> =
            bits[..224].chunks(32).map(|c| c.iter().fold(0u32, |w, &b| (w << 1) | u32::from(b))).collect();
        assert_eq!(TABLE[0], 0);
        for (i, w) in words.iter().enumerate() {
            assert_eq!(TABLE[i + 1], *w, "word {}: {:08x} against {w:08x}", i + 1, TABLE[i + 1]);
        }
        // f64's 2/π is the first 53 bits rounded.
        let top = (u64::from(TABLE[1]) << 32 | u64::from(TABLE[2])) >> 10;
        assert_eq!((top + 1) >> 1, (std::f64::consts::FRAC_2_PI * (1u64 << 53) as f64) as u64);
    }

    #[test]
    fn scale_is_exact() {
        assert_eq!(SCALE * 18_446_744_073_709_551_616.0, std::f64::consts::FRAC_PI_2);
        assert_eq!(lit64(SCALE), format!("0d{:016X}", SCALE.to_bits()));
        assert_eq!(lit(-0.5), "0fBF000000");
    }

    #[test]
    fn shf_matches_ptx() {
        assert_eq!(shf_l_clamp(0x89ab_cdef, 0x0123_4567, 0), 0x0123_4567);
        assert_eq!(shf_l_clamp(0x89ab_cdef, 0x0123_4567, 4), 0x1234_5678);
        assert_eq!(shf_l_clamp(0x89ab_cdef, 0x0123_4567, 32), 0x89ab_cdef);
        assert_eq!(shf_l_clamp(0x89ab_cdef, 0x0123_4567, 40), 0x89ab_cdef);
    }

    /// `P * 2^-94` is `x * 2/π mod 4`: the reduction against `f64` where `f64` is precise enough
    /// (|x| < 2^20: `x * 2/π` in `f64` is off by under 2^-32).
    #[test]
    fn reduction_is_x_times_two_over_pi_mod_four() {
        let mut next = xorshift(0x2545_f491_4f6c_dd1d);
        for _ in 0..100_000 {
            let x = f32::from_bits(0x3f80_0000 + (next() % (20 << 23)) as u32);
            let (q, frac) = host_reduce(x);
            let got = (q & 3) as f64 + frac as f64 / 18_446_744_073_709_551_616.0;
            let want = (x as f64 * std::f64::consts::FRAC_2_PI).rem_euclid(4.0);
            let d = (got - want).rem_euclid(4.0);
            assert!(d.min(4.0 - d) < 1e-9, "{x:e}: {got} against {want}");
            assert!(frac.unsigned_abs() <= 1 << 63);
        }
    }

    /// Every exponent of |x| >= 1, 2000 random mantissas each, both signs; and per exponent the
    /// sample nearest to a multiple of π/2 with its neighbours.
    #[test]
    fn within_two_ulp_of_f64_for_every_exponent() {
        let mut next = xorshift(0x9e37_79b9_7f4a_7c15);
        let mut overall = (0.0, 0.0, 0);
        for be in 127u32..=254 {
            let xs: Vec<f32> = (0..2000).map(|_| f32::from_bits(be << 23 | (next() as u32 & 0x7f_ffff))).collect();
            let nearest = *xs.iter().min_by_key(|&&x| host_reduce(x).1.unsigned_abs()).unwrap();
            let near = [-1i32, 0, 1].map(|d| f32::from_bits(nearest.to_bits().wrapping_add_signed(d)));
            let w = worst(xs.iter().chain(&near).flat_map(|&x| [x, -x]));
            assert!(w.0 <= 2.0, "2^{}: {} ulp at {:e} (offset {})", be as i32 - 127, w.0, w.1, w.2);
            if w.0 > overall.0 {
                overall = w;
            }
        }
        eprintln!("worst over the random samples: {} ulp at {:e} (offset {})", overall.0, overall.1, overall.2);
    }

    /// For every exponent of |x| >= 1, the float nearest to a multiple of π/2 (the largest
    /// cancellation), found by `hardest_per_exponent` over all 2^23 mantissas.
    const HARDEST: [u32; 128] = [
        0x3fc9_0fdb,
        0x4049_0fdb,
        0x4096_cbe4,
        0x4116_cbe4,
        0x4196_cbe4,
        0x4216_cbe4,
        0x4296_cbe4,
        0x437c_e5f1,
        0x43fc_e5f1,
        0x447c_e5f1,
        0x44fc_e5f1,
        0x450b_e628,
        0x458b_e628,
        0x460b_e628,
        0x468b_e628,
        0x474d_246f,
        0x47cd_246f,
        0x484d_246f,
        0x4882_665e,
        0x4902_665e,
        0x4982_665e,
        0x4a25_62ae,
        0x4aa5_62ae,
        0x4b25_62ae,
        0x4bf3_b47b,
        0x4c23_32e9,
        0x4ca3_32e9,
        0x4d23_32e9,
        0x4d84_7661,
        0x4e13_d4a5,
        0x4e93_d4a5,
        0x4f0f_fd14,
        0x4fdb_d32f,
        0x507f_d274,
        0x50a3_e87f,
        0x5123_e87f,
        0x51a3_e87f,
        0x5223_e87f,
        0x52a3_e87f,
        0x5323_e87f,
        0x53b1_46a6,
        0x5431_46a6,
        0x54b1_46a6,
        0x5531_46a6,
        0x55b1_46a6,
        0x5678_7577,
        0x56f8_7577,
        0x5778_7577,
        0x57b8_2989,
        0x5838_2989,
        0x58dc_36c9,
        0x596e_3d69,
        0x59f7_40b9,
        0x5a7b_c261,
        0x5afe_0335,
        0x5b7f_239f,
        0x5bff_b3d4,
        0x5c07_bcd0,
        0x5c87_bcd0,
        0x5d07_bcd0,
        0x5d87_bcd0,
        0x5e07_bcd0,
        0x5e87_bcd0,
        0x5f07_bcd0,
        0x5fe4_112c,
        0x6064_112c,
        0x60ab_0ce1,
        0x617c_556b,
        0x61d3_b126,
        0x6253_b126,
        0x62ec_1b4a,
        0x636c_1b4a,
        0x63e6_00c1,
        0x642e_0733,
        0x64ae_0733,
        0x652e_0733,
        0x6589_8498,
        0x6609_8498,
        0x6689_8498,
        0x6709_8498,
        0x6789_8498,
        0x6809_8498,
        0x6889_8498,
        0x6946_e3bb,
        0x69c6_e3bb,
        0x6a19_76f1,
        0x6a99_76f1,
        0x6b19_76f1,
        0x6b99_76f1,
        0x6c55_da58,
        0x6cd5_da58,
        0x6d20_63c2,
        0x6d85_a877,
        0x6e05_a877,
        0x6e85_a877,
        0x6f79_be45,
        0x6ff9_be45,
        0x7079_be45,
        0x70f9_be45,
        0x7179_be45,
        0x71f9_be45,
        0x723f_a09a,
        0x72bf_a09a,
        0x733f_a09a,
        0x73e6_1c18,
        0x7452_de59,
        0x74d2_de59,
        0x756f_a1dc,
        0x7594_9471,
        0x7650_7ce8,
        0x76a4_26eb,
        0x7758_4625,
        0x77d8_4625,
        0x7858_4625,
        0x78a8_b883,
        0x7940_7f54,
        0x79c0_7f54,
        0x7a10_5f7f,
        0x7afc_cbab,
        0x7b16_75c0,
        0x7b96_75c0,
        0x7c6c_3305,
        0x7cff_01bd,
        0x7d7f_01bd,
        0x7dff_01bd,
        0x7e7f_01bd,
        0x7ebd_cda0,
        0x7f3d_cda0,
    ];

    #[test]
    fn within_two_ulp_of_f64_on_hard_cases() {
        use std::f32::consts::{FRAC_PI_2, PI};
        let named = [1.0e22f32, 1.0e20, 1.0e30, f32::MAX, 16_777_216.0, FAST_LIMIT, 1.0, FRAC_PI_2, PI];
        let hard = HARDEST.iter().map(|&b| f32::from_bits(b)).chain(named);
        let near = hard.flat_map(|x| [x, f32::from_bits(x.to_bits() + 1), f32::from_bits(x.to_bits() - 1)]);
        let w = worst(near.filter(|x| x.is_finite() && *x >= 1.0).flat_map(|x| [x, -x]));
        assert!(w.0 <= 2.0, "{} ulp at {:e} (offset {})", w.0, w.1, w.2);
        eprintln!("worst over the hard cases: {} ulp at {:e} (offset {})", w.0, w.1, w.2);
        // The hardest reductions keep plenty of bits: |frac| >= 2^32 of 2^64.
        for &b in &HARDEST {
            let frac = host_reduce(f32::from_bits(b)).1;
            assert!(frac.unsigned_abs() >= 1 << 32, "{:e}: {frac}", f32::from_bits(b));
        }
    }

    #[test]
    fn odd_and_even_and_nan() {
        let mut next = xorshift(0x1234_5678_9abc_def1);
        for _ in 0..10_000 {
            let x = f32::from_bits(0x3f80_0000 + (next() as u32 % (0x7f80_0000 - 0x3f80_0000)));
            assert_eq!(host_slow(-x, 0).to_bits(), (-host_slow(x, 0)).to_bits(), "{x:e}");
            assert_eq!(host_slow(-x, 1).to_bits(), host_slow(x, 1).to_bits(), "{x:e}");
        }
        for x in [f32::NAN, -f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
            assert!(host_slow(x, 0).is_nan() && host_slow(x, 1).is_nan(), "{x}");
        }
        // The table reads stay in bounds for every input, finite or not.
        for x in [0.0, -0.0, f32::from_bits(1), f32::MIN_POSITIVE, 1e-3, 0.5] {
            host_slow(x, 0);
        }
    }

    /// Every float of magnitude >= 1 against `f64` (about 2 * 10^9 calls: run with `--release
    /// --ignored`).
    #[test]
    #[ignore]
    fn exhaustive_from_one() {
        let threads = std::thread::available_parallelism().map_or(4, |n| n.get()) as u32;
        let (lo, hi) = (0x3f80_0000u32, 0x7f80_0000u32);
        let worst = std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads)
                .map(|t| s.spawn(move || worst((lo + t..hi).step_by(threads as usize).map(f32::from_bits))))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).fold((0.0, 0.0, 0), |a, b| if b.0 > a.0 { b } else { a })
        });
        eprintln!("exhaustive: {} ulp at {:e} (offset {})", worst.0, worst.1, worst.2);
        assert!(worst.0 <= 2.0);
    }

    /// Prints [`HARDEST`]: per exponent the mantissa with the smallest |frac| (`--release
    /// --ignored`).
    #[test]
    #[ignore]
    fn hardest_per_exponent() {
        let rows: Vec<u32> = std::thread::scope(|s| {
            let handles: Vec<_> = (127u32..=254)
                .map(|be| {
                    s.spawn(move || {
                        (be << 23..(be + 1) << 23)
                            .min_by_key(|&b| host_reduce(f32::from_bits(b)).1.unsigned_abs())
                            .unwrap()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for b in &rows {
            let frac = host_reduce(f32::from_bits(*b)).1;
            eprintln!("0x{b:08x} {:e} frac 2^{:.1}", f32::from_bits(*b), (frac.unsigned_abs() as f64).log2());
        }
    }

    /// `ptxas` assembles the text inside a kernel calling the function as the renderer does
    /// (`render::ptx::trig`: a `{ }` scope of `.param`s around `call.uni`), twice, for the oldest
    /// and newest targets the renderer writes and the brief's `.version 8.0` / `sm_90`, and keeps
    /// the function out of line; when `SINTER_PTXAS` names it (skipped otherwise, unless
    /// `SINTER_REQUIRE_NVRTC=1`).
    #[test]
    fn ptxas_assembles() {
        for (version, sm) in [("7.0", "sm_80"), ("8.0", "sm_90"), ("8.6", "sm_100")] {
            let module = format!(
                ".version {version}
.target {sm}
.address_size 64

{text}
.visible .entry sinter_trig_slow_test(.param .u64 src, .param .u64 dst, .param .u32 offset)
{{
    .reg .b64 %rd<4>;
    .reg .b32 %r<1>;
    .reg .f32 %f<3>;
    ld.param.u64 %rd0, [src];
    ld.param.u64 %rd1, [dst];
    ld.param.u32 %r0, [offset];
    cvta.to.global.u64 %rd2, %rd0;
    cvta.to.global.u64 %rd3, %rd1;
    ld.global.f32 %f0, [%rd2];
    {{
    .param .f32 sx;
    .param .u32 so;
    .param .f32 sr;
    st.param.f32 [sx], %f0;
    st.param.u32 [so], %r0;
    call.uni (sr), {FUNC}, (sx, so);
    ld.param.f32 %f1, [sr];
    }}
    {{
    .param .f32 sx;
    .param .u32 so;
    .param .f32 sr;
    st.param.f32 [sx], %f0;
    st.param.u32 [so], 1;
    call.uni (sr), {FUNC}, (sx, so);
    ld.param.f32 %f2, [sr];
    }}
    st.global.f32 [%rd3], %f1;
    st.global.f32 [%rd3+4], %f2;
    ret;
}}
",
                text = module_text()
            );
            let Some(r) = super::super::ptxas(&module) else { return };
            let log = r.unwrap_or_else(|log| panic!("ptxas failed for {sm}:\n{log}\n{module}"));
            // `-v` reports the properties of every function left out of line.
            assert!(log.contains(&format!("Function properties for {FUNC}")), "{sm}: {FUNC} was inlined:\n{log}");
        }
    }
}
