//! The WGSL helper functions kernels call, emitted only when used, in a stable order.
//!
//! Each helper exists in a scalar form (`sinter_erf`) and, where vectorized kernels need it, a 4-wide form
//! (`sinter_erf_v4`) generated from the same branch-free template (`select` instead of `if`), so both
//! compute the same thing lane by lane. The semantics follow sinter's CPU reference:
//!
//! * NaN tests look at the bits (`x != x` may be folded away by drivers).
//! * `max`/`min` propagate NaN; `sign(NaN)` is NaN; `relu(NaN)` is NaN.
//! * `sin`/`cos`/`tan` reduce the argument (Cody–Waite, two constants) first: the hardware functions are
//!   accurate only near zero.
//! * `tanh`, `sigmoid`, `sinh`, `cosh` never overflow to NaN for large |x|; small arguments use series so the
//!   relative error stays small.
//! * `erf`: a Taylor series for |x| < 0.5 (relative error < 1e-10) and `1 - erfc` with the Numerical Recipes
//!   Chebyshev fit for erfc (relative error < 1.2e-7) beyond: under 6e-8 relative in f64, so f32 rounding
//!   dominates.
//! * `pow` handles negative bases with integer exponents, `pow(x, 0) = pow(1, y) = 1`.
//! * float `fmod` is truncated (sign of the dividend, as C), `mod` floored (sign of the divisor, as Python).
//! * integer `mod` is floored; integer division truncates (WGSL defines `x / 0 = x`: no trap).

use std::collections::BTreeMap;

/// A helper function.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum H {
    IsNan,
    IsInf,
    FMax,
    FMin,
    Relu,
    Sign,
    Log,
    Sqrt,
    Asin,
    Acos,
    Atan,
    Sin,
    Cos,
    Tan,
    Sinh,
    Cosh,
    Tanh,
    Asinh,
    Acosh,
    Atanh,
    Sigmoid,
    Erf,
    Pow,
    FMod,
    FModFloor,
    IModFloor,
    IPow,
    UPow,
    F2Bits,
    F2I,
    F2U,
    RoundF16,
    F16Bits,
    Bf16Bits,
    RoundBf16,
    ToF16,
    Bf16ToF16,
    FloorDiv,
    FloorMod,
    ArgMaxF,
    ArgMinF,
    ArgMaxI,
    ArgMinI,
    ArgMaxU,
    ArgMinU,
}

/// One helper's template: base name, body with placeholders, helpers it calls.
struct Template {
    name: &'static str,
    body: &'static str,
    deps: &'static [H],
    /// Only a scalar form exists (or the vector form is written out separately in `vec_body`).
    vec_body: Option<&'static str>,
}

fn template(h: H) -> Template {
    let t = |name, body, deps| Template { name, body, deps, vec_body: None };
    match h {
        H::IsNan => t(
            "sinter_isnan",
            "// NaN test on the bits (x != x may be folded away)
fn sinter_isnan$S(x: $F) -> $B {
    return (bitcast<$U>(x) & $U(0x7fffffffu)) > $U(0x7f800000u);
}",
            &[],
        ),
        H::IsInf => t(
            "sinter_isinf",
            "fn sinter_isinf$S(x: $F) -> $B {
    return (bitcast<$U>(x) & $U(0x7fffffffu)) == $U(0x7f800000u);
}",
            &[],
        ),
        H::FMax => t(
            "sinter_fmax",
            "// max propagating NaN
fn sinter_fmax$S(a: $F, b: $F) -> $F {
    return select(max(a, b), $NAN, sinter_isnan$S(a) | sinter_isnan$S(b));
}",
            &[H::IsNan],
        ),
        H::FMin => t(
            "sinter_fmin",
            "// min propagating NaN
fn sinter_fmin$S(a: $F, b: $F) -> $F {
    return select(min(a, b), $NAN, sinter_isnan$S(a) | sinter_isnan$S(b));
}",
            &[H::IsNan],
        ),
        H::Relu => t(
            "sinter_relu",
            "// relu keeping NaN
fn sinter_relu$S(x: $F) -> $F {
    return select($F(0.0), x, (x > $F(0.0)) | sinter_isnan$S(x));
}",
            &[H::IsNan],
        ),
        H::Sign => t(
            "sinter_sign",
            "// sign(0) = 0, sign(NaN) = NaN
fn sinter_sign$S(x: $F) -> $F {
    return select(sign(x), x, sinter_isnan$S(x));
}",
            &[H::IsNan],
        ),
        H::Log => t(
            "sinter_log",
            "fn sinter_log$S(x: $F) -> $F {
    return select(log(x), $NAN, x < $F(0.0));
}",
            &[],
        ),
        H::Sqrt => t(
            "sinter_sqrt",
            "fn sinter_sqrt$S(x: $F) -> $F {
    return select(sqrt(x), $NAN, x < $F(0.0));
}",
            &[],
        ),
        H::Asin => t(
            "sinter_asin",
            "// asin (Cephes asinf, rel. error < 3e-7; drivers' asin can be far worse)
fn sinter_asin$S(x: $F) -> $F {
    let a = abs(x);
    let hi = a > $F(0.5);
    let z = select(a * a, 0.5 * (1.0 - a), hi);
    let t = select(a, sqrt(z), hi);
    let p = ((((0.042163199048 * z + 0.024181311049) * z + 0.045470025998) * z + 0.074953002686) * z
        + 0.16666752422) * z * t + t;
    let r = select(p, 1.5707963267948966 - (p + p), hi);
    return select(select(-r, r, x >= $F(0.0)), $NAN, (a > $F(1.0)) | sinter_isnan$S(x));
}",
            &[H::IsNan],
        ),
        H::Acos => t(
            "sinter_acos",
            "// acos from asin (Cephes acosf, abs. error < 3e-7)
fn sinter_acos$S(x: $F) -> $F {
    let lo = x < $F(-0.5);
    let hi = x > $F(0.5);
    let s = sinter_asin$S(select(x, sqrt(0.5 * (1.0 - abs(x))), lo | hi));
    let r = select(select(1.5707963267948966 - s, 2.0 * s, hi), 3.141592653589793 - 2.0 * s, lo);
    return select(r, $NAN, (abs(x) > $F(1.0)) | sinter_isnan$S(x));
}",
            &[H::Asin, H::IsNan],
        ),
        H::Atan => t(
            "sinter_atan",
            "// atan (Cephes atanf: reduction by tan(pi/8) and tan(3pi/8), rel. error < 2e-7)
fn sinter_atan$S(x: $F) -> $F {
    let a = abs(x);
    let big = a > $F(2.414213562373095);
    let mid = a > $F(0.41421356237309503);
    let t = select(select(a, (a - 1.0) / (a + 1.0), mid), -1.0 / a, big);
    let y0 = select(select($F(0.0), $F(0.7853981633974483), mid), $F(1.5707963267948966), big);
    let z = t * t;
    let y = y0 + ((((0.0805374449538 * z - 0.138776856032) * z + 0.199777106478) * z - 0.333329491539) * z * t + t);
    return select(select(-y, y, x >= $F(0.0)), x, sinter_isnan$S(x));
}",
            &[H::IsNan],
        ),
        H::Sin => t(
            "sinter_sin",
            "// sin after Cody-Waite reduction to [-pi, pi]
fn sinter_sin$S(x: $F) -> $F {
    let k = round(x * 0.15915494309189535);
    return sin((x - k * 6.28125) - k * 1.9353071795864769e-3);
}",
            &[],
        ),
        H::Cos => t(
            "sinter_cos",
            "// cos after Cody-Waite reduction to [-pi, pi]
fn sinter_cos$S(x: $F) -> $F {
    let k = round(x * 0.15915494309189535);
    return cos((x - k * 6.28125) - k * 1.9353071795864769e-3);
}",
            &[],
        ),
        H::Tan => t(
            "sinter_tan",
            "// tan after Cody-Waite reduction to [-pi/2, pi/2]
fn sinter_tan$S(x: $F) -> $F {
    let k = round(x * 0.3183098861837907);
    return tan((x - k * 3.140625) - k * 9.676535897932384e-4);
}",
            &[],
        ),
        H::Sinh => t(
            "sinter_sinh",
            "// sinh: series below 1, exp(|x| - ln 2) - 1/(4 exp(|x| - ln 2)) above (no early overflow)
fn sinter_sinh$S(x: $F) -> $F {
    let a = abs(x);
    let s = a * a;
    let p = a * (1.0 + s * (0.16666666666666666 + s * (0.008333333333333333 + s * (1.984126984126984e-4
        + s * (2.755731922398589e-6 + s * 2.505210838544172e-8)))));
    let e = exp(a - 0.6931471805599453);
    let r = select(e - 0.25 / e, p, a < $F(1.0));
    return select(-r, r, x >= $F(0.0));
}",
            &[],
        ),
        H::Cosh => t(
            "sinter_cosh",
            "fn sinter_cosh$S(x: $F) -> $F {
    let e = exp(abs(x) - 0.6931471805599453);
    return e + 0.25 / e;
}",
            &[],
        ),
        H::Tanh => t(
            "sinter_tanh",
            "// tanh: odd series below 0.3, 1 - 2/(exp(2|x|) + 1) above, |x| clamped at 10 (never NaN)
fn sinter_tanh$S(x: $F) -> $F {
    let a = min(abs(x), $F(10.0));
    let s = a * a;
    let p = a + a * s * (-0.3333333333333333 + s * (0.13333333333333333 + s * (-0.05396825396825397
        + s * (0.021869488536155203 + s * -0.008863235529902197))));
    let q = 1.0 - 2.0 / (exp(2.0 * a) + 1.0);
    let r = select(q, p, a < $F(0.3));
    return select(select(-r, r, x >= $F(0.0)), x, sinter_isnan$S(x));
}",
            &[H::IsNan],
        ),
        H::Asinh => t(
            "sinter_asinh",
            "fn sinter_asinh$S(x: $F) -> $F {
    let a = abs(x);
    let s = a * a;
    let p = a * (1.0 + s * (-0.16666666666666666 + s * (0.075 + s * -0.044642857142857144)));
    let l = select(log(a + sqrt(s + 1.0)), log(a) + 0.6931471805599453, a > $F(1e10));
    let r = select(l, p, a < $F(0.125));
    return select(-r, r, x >= $F(0.0));
}",
            &[],
        ),
        H::Acosh => t(
            "sinter_acosh",
            "fn sinter_acosh$S(x: $F) -> $F {
    let l = select(log(x + sqrt((x - 1.0) * (x + 1.0))), log(x) + 0.6931471805599453, x > $F(1e10));
    return select(l, $NAN, x < $F(1.0));
}",
            &[],
        ),
        H::Atanh => t(
            "sinter_atanh",
            "fn sinter_atanh$S(x: $F) -> $F {
    let a = abs(x);
    let s = a * a;
    let p = a * (1.0 + s * (0.3333333333333333 + s * (0.2 + s * (0.14285714285714285 + s * 0.1111111111111111))));
    let l = 0.5 * log((1.0 + a) / (1.0 - a));
    let r = select(select(l, p, a < $F(0.125)), $NAN, a > $F(1.0));
    return select(-r, r, x >= $F(0.0));
}",
            &[],
        ),
        H::Sigmoid => t(
            "sinter_sigmoid",
            "// sigmoid without overflow: e = exp(-|x|); 1/(1+e) for x >= 0, e/(1+e) below
fn sinter_sigmoid$S(x: $F) -> $F {
    let e = exp(-abs(x));
    let s = 1.0 / (1.0 + e);
    return select(e * s, s, x >= $F(0.0));
}",
            &[],
        ),
        H::Erf => t(
            "sinter_erf",
            "// erf: Taylor series below 0.5, 1 - erfc (Numerical Recipes erfcc, rel. error < 1.2e-7) above
fn sinter_erf$S(x: $F) -> $F {
    let a = abs(x);
    let s = a * a;
    let p = x * 1.1283791670955126 * (1.0 + s * (-0.3333333333333333 + s * (0.1 + s * (-0.023809523809523808
        + s * (0.004629629629629629 + s * (-7.575757575757576e-4 + s * (1.0683760683760684e-4
        + s * -1.3227513227513228e-5)))))));
    let t = 1.0 / (1.0 + 0.5 * a);
    let y = t * exp(-s - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806
        + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))));
    let q = select(y - 1.0, 1.0 - y, x >= $F(0.0));
    return select(q, p, a < $F(0.5));
}",
            &[],
        ),
        H::Pow => Template {
            name: "sinter_pow",
            vec_body: None,
            deps: &[H::IsNan],
            body: "// pow: negative bases with integer exponents, pow(x, 0) = pow(1, y) = 1
fn sinter_pow$S(a: $F, b: $F) -> $F {
    let r = exp2(b * log2(abs(a)));
    let int_b = floor(b) == b;
    let odd_b = int_b & (floor(b * 0.5) != b * 0.5);
    let neg = a < $F(0.0);
    let n = select(select(r, -r, neg & odd_b), $NAN, (neg & !int_b) | sinter_isnan$S(a) | sinter_isnan$S(b));
    return select(n, $F(1.0), (b == $F(0.0)) | (a == $F(1.0)));
}",
        },
        H::FMod => t(
            "sinter_fmod",
            "// truncated remainder (sign of a, as C fmod)
fn sinter_fmod$S(a: $F, b: $F) -> $F {
    let r0 = fma(-trunc(a / b), b, a);
    let ab = abs(b);
    let sa = select($F(-1.0), $F(1.0), a >= $F(0.0));
    let r1 = select(r0, r0 + sa * ab, (r0 != $F(0.0)) & ((r0 < $F(0.0)) != (a < $F(0.0))));
    let r2 = select(r1, r1 - sa * ab, abs(r1) >= ab);
    return select(r2, a, sinter_isinf$S(b) & !sinter_isinf$S(a) & !sinter_isnan$S(a));
}",
            &[H::IsInf, H::IsNan],
        ),
        H::FModFloor => t(
            "sinter_fmodf",
            "// floored remainder (sign of b, as Python %)
fn sinter_fmodf$S(a: $F, b: $F) -> $F {
    let r = sinter_fmod$S(a, b);
    return select(r, r + b, (r != $F(0.0)) & ((r < $F(0.0)) != (b < $F(0.0))));
}",
            &[H::FMod],
        ),
        H::IModFloor => t(
            "sinter_imod",
            "// floored integer remainder (sign of b)
fn sinter_imod$S(a: $I, b: $I) -> $I {
    let r = a % b;
    return select(r, r + b, (r != $I(0)) & ((r < $I(0)) != (b < $I(0))));
}",
            &[],
        ),
        H::IPow => t(
            "sinter_ipow",
            "// integer power by squaring (wrapping); negative exponents give 0
fn sinter_ipow$S(a: $I, b: $I) -> $I {
    var base = a;
    var e = bitcast<$U>(b);
    var acc = $I(1);
    for (var i = 0u; i < 32u; i = i + 1u) {
        acc = select(acc, acc * base, (e & $U(1u)) == $U(1u));
        base = base * base;
        e = e >> $U(1u);
    }
    return select(acc, $I(0), b < $I(0));
}",
            &[],
        ),
        H::UPow => t(
            "sinter_upow",
            "// unsigned power by squaring (wrapping)
fn sinter_upow$S(a: $U, b: $U) -> $U {
    var base = a;
    var e = b;
    var acc = $U(1u);
    for (var i = 0u; i < 32u; i = i + 1u) {
        acc = select(acc, acc * base, (e & $U(1u)) == $U(1u));
        base = base * base;
        e = e >> $U(1u);
    }
    return acc;
}",
            &[],
        ),
        H::F2Bits => t(
            "sinter_f2bits",
            "// low 32 bits of float-to-integer conversion as the CPU reference does it: truncate toward zero,
// saturate to the i64 range, NaN to 0 (then the caller wraps to the dtype)
fn sinter_f2bits$S(x: $F) -> $U {
    let a = abs(x);
    let small = bitcast<$U>($I(select(x, $F(0.0), a >= $F(2147483648.0))));
    let bits = bitcast<$U>(a);
    let s = ((bits >> $U(23u)) & $U(0xffu)) - $U(150u);
    let m = (bits & $U(0x7fffffu)) | $U(0x800000u);
    let big = select(m << (s & $U(31u)), $U(0u), s >= $U(32u));
    let neg = x < $F(0.0);
    let wide = select(select(big, $U(0u) - big, neg), select($U(0xffffffffu), $U(0u), neg),
        a >= $F(9223372036854775808.0));
    return select(select(wide, small, a < $F(2147483648.0)), $U(0u), sinter_isnan$S(x));
}",
            &[H::IsNan],
        ),
        H::F2I => t(
            "sinter_f2i",
            "fn sinter_f2i$S(x: $F) -> $I {
    return bitcast<$I>(sinter_f2bits$S(x));
}",
            &[H::F2Bits],
        ),
        H::F2U => t(
            "sinter_f2u",
            "fn sinter_f2u$S(x: $F) -> $U {
    return sinter_f2bits$S(x);
}",
            &[H::F2Bits],
        ),
        H::RoundF16 => Template {
            name: "sinter_round_f16",
            body: "// round to the nearest f16 (overflow to infinity, NaN kept)
fn sinter_round_f16(x: f32) -> f32 {
    let r = unpack2x16float(pack2x16float(vec2<f32>(x, 0.0))).x;
    let big = select(-$INF, $INF, x > 0.0);
    return select(select(r, big, abs(x) >= 65520.0), x, sinter_isnan(x));
}",
            deps: &[H::IsNan],
            vec_body: Some(
                "fn sinter_round_f16_v4(x: vec4<f32>) -> vec4<f32> {
    let r = vec4<f32>(unpack2x16float(pack2x16float(x.xy)), unpack2x16float(pack2x16float(x.zw)));
    let big = select(-$INF, $INF, x > vec4<f32>(0.0));
    return select(select(r, big, abs(x) >= vec4<f32>(65520.0)), x, sinter_isnan_v4(x));
}",
            ),
        },
        H::F16Bits => Template {
            name: "sinter_f16_bits",
            body: "// f16 bits of x (round to nearest, overflow to infinity, NaN kept)
fn sinter_f16_bits(x: f32) -> u32 {
    let b = pack2x16float(vec2<f32>(x, 0.0)) & 0xffffu;
    let s = select(0u, 0x8000u, x < 0.0);
    return select(select(b, s | 0x7c00u, abs(x) >= 65520.0), 0x7e00u, sinter_isnan(x));
}",
            deps: &[H::IsNan],
            vec_body: Some(
                "fn sinter_f16_bits_v4(x: vec4<f32>) -> vec4<u32> {
    return vec4<u32>(sinter_f16_bits(x.x), sinter_f16_bits(x.y), sinter_f16_bits(x.z), sinter_f16_bits(x.w));
}",
            ),
        },
        H::Bf16Bits => t(
            "sinter_bf16_bits",
            "// bf16 bits of x, round to nearest even (NaN stays NaN)
fn sinter_bf16_bits$S(x: $F) -> $U {
    let u = bitcast<$U>(x);
    let r = (u + $U(0x7fffu) + ((u >> $U(16u)) & $U(1u))) >> $U(16u);
    return select(r, (u >> $U(16u)) | $U(0x40u), sinter_isnan$S(x));
}",
            &[H::IsNan],
        ),
        H::RoundBf16 => t(
            "sinter_round_bf16",
            "fn sinter_round_bf16$S(x: $F) -> $F {
    return bitcast<$F>(sinter_bf16_bits$S(x) << $U(16u));
}",
            &[H::Bf16Bits],
        ),
        H::ToF16 => t(
            "sinter_to_f16",
            "// f32 to f16 storage: round to nearest, overflow to infinity, NaN kept (computed at run time: WGSL
// has no f16 infinity or NaN literal)
fn sinter_to_f16$S(x: $F) -> $H {
    let c = $H(clamp(x, $F(-65504.0), $F(65504.0)));
    let big = c * $H(2.0);
    let r = select(c, big, abs(x) >= $F(65520.0));
    let z = big - big;
    return select(r, z / z, sinter_isnan$S(x));
}",
            &[H::IsNan],
        ),
        H::Bf16ToF16 => t(
            "sinter_bf16_to_f16",
            "// a bf16 value (carried in f32) as f16 for the f16 matrix units: saturates at +-65504, NaN kept
fn sinter_bf16_to_f16$S(x: $F) -> $H {
    return select($H(clamp(x, $F(-65504.0), $F(65504.0))), $H(x), sinter_isnan$S(x));
}",
            &[H::IsNan],
        ),
        H::FloorDiv => t(
            "sinter_floordiv",
            "// floor division of an index by a positive constant
fn sinter_floordiv(a: i32, b: i32) -> i32 {
    let q = a / b;
    return select(q, q - 1i, a % b < 0i);
}",
            &[],
        ),
        H::FloorMod => t(
            "sinter_floormod",
            "// non-negative remainder of an index by a positive constant
fn sinter_floormod(a: i32, b: i32) -> i32 {
    let r = a % b;
    return select(r, r + b, r < 0i);
}",
            &[],
        ),
        H::ArgMaxF => t(
            "sinter_argmax_f",
            "// argmax step: does (v, i) beat (bv, bi)? NaN is the maximum; ties go to the lower index
fn sinter_argmax_f$S(v: $F, i: $I, bv: $F, bi: $I) -> $B {
    let vn = sinter_isnan$S(v);
    let bn = sinter_isnan$S(bv);
    let plain = (v > bv) | ((v == bv) & (i < bi));
    return select(select(plain, $B(false), bn), select($B(true), i < bi, bn), vn);
}",
            &[H::IsNan],
        ),
        H::ArgMinF => t(
            "sinter_argmin_f",
            "// argmin step: does (v, i) beat (bv, bi)? NaN is the minimum; ties go to the lower index
fn sinter_argmin_f$S(v: $F, i: $I, bv: $F, bi: $I) -> $B {
    let vn = sinter_isnan$S(v);
    let bn = sinter_isnan$S(bv);
    let plain = (v < bv) | ((v == bv) & (i < bi));
    return select(select(plain, $B(false), bn), select($B(true), i < bi, bn), vn);
}",
            &[H::IsNan],
        ),
        H::ArgMaxI => t(
            "sinter_argmax_i",
            "fn sinter_argmax_i$S(v: $I, i: $I, bv: $I, bi: $I) -> $B {
    return (v > bv) | ((v == bv) & (i < bi));
}",
            &[],
        ),
        H::ArgMinI => t(
            "sinter_argmin_i",
            "fn sinter_argmin_i$S(v: $I, i: $I, bv: $I, bi: $I) -> $B {
    return (v < bv) | ((v == bv) & (i < bi));
}",
            &[],
        ),
        H::ArgMaxU => t(
            "sinter_argmax_u",
            "fn sinter_argmax_u$S(v: $U, i: $I, bv: $U, bi: $I) -> $B {
    return (v > bv) | ((v == bv) & (i < bi));
}",
            &[],
        ),
        H::ArgMinU => t(
            "sinter_argmin_u",
            "fn sinter_argmin_u$S(v: $U, i: $I, bv: $U, bi: $I) -> $B {
    return (v < bv) | ((v == bv) & (i < bi));
}",
            &[],
        ),
    }
}

/// Helpers that exist only in scalar form.
fn scalar_only(h: H) -> bool {
    matches!(h, H::FloorDiv | H::FloorMod)
}

/// Substitutes the type placeholders of a template.
fn instantiate(body: &str, vec: bool) -> String {
    let (f, i, u, b, hh, s) = if vec {
        ("vec4<f32>", "vec4<i32>", "vec4<u32>", "vec4<bool>", "vec4<f16>", "_v4")
    } else {
        ("f32", "i32", "u32", "bool", "f16", "")
    };
    body.replace("$NAN", "$F(bitcast<f32>(0x7fc00000u))")
        .replace("$INF", "$F(bitcast<f32>(0x7f800000u))")
        .replace("$F", f)
        .replace("$I", i)
        .replace("$U", u)
        .replace("$B", b)
        .replace("$H", hh)
        .replace("$S", s)
}

/// The helpers a kernel needs, collected while rendering.
#[derive(Debug, Default)]
pub(crate) struct Helpers {
    code: BTreeMap<String, String>,
    /// Whether a helper needs `enable f16;`.
    pub(crate) needs_f16: bool,
    /// Window accessors of split arguments the stores called (`st_a2`, `and_a3`, ...; see
    /// [`super::storage::ArgInfo::accessors`]).
    pub(crate) accessors: std::collections::BTreeSet<String>,
}

impl Helpers {
    /// Registers `h` (and what it calls) in scalar or 4-wide form; returns the function name to call.
    pub(crate) fn need(&mut self, h: H, vec: bool) -> String {
        let vec = vec && !scalar_only(h);
        let t = template(h);
        let name = if vec { format!("{}_v4", t.name) } else { t.name.to_string() };
        if self.code.contains_key(&name) {
            return name;
        }
        for &d in t.deps {
            self.need(d, vec);
        }
        if h == H::F16Bits && vec {
            self.need(H::F16Bits, false);
        }
        if h == H::ToF16 || h == H::Bf16ToF16 {
            self.needs_f16 = true;
        }
        let body = match (vec, t.vec_body) {
            (true, Some(vb)) => instantiate(vb, true),
            (true, None) => instantiate(t.body, true),
            (false, _) => instantiate(t.body, false),
        };
        self.code.insert(name.clone(), body);
        name
    }

    /// Whether no helper is needed.
    pub(crate) fn is_empty(&self) -> bool {
        self.code.is_empty()
    }

    /// Every registered helper, sorted by name, separated by blank lines.
    pub(crate) fn render(&self) -> String {
        let mut out = String::new();
        for body in self.code.values() {
            out.push_str(body);
            out.push_str("\n\n");
        }
        out
    }
}
