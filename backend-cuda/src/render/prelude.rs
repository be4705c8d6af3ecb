//! The device helper functions kernels call, emitted only when used (with the helpers they call),
//! in a stable order, as `static __device__ __forceinline__` functions overloaded on the operand
//! type, so each kernel source stays self-contained.
//!
//! Their semantics are those of [`sinter_core::scalar`]:
//!
//! * `sinter_fmax` / `sinter_fmin` propagate NaN; `sinter_relu` and `sinter_sign` keep NaN, and
//!   `sign(+-0) = +0`; `sinter_sigmoid` neither overflows nor loses the small tail.
//! * `sinter_sinf` / `sinter_cosf` are `sinf`/`cosf` with the slow path out of line
//!   ([`super::trig`]).
//! * `sinter_mod` on floats is floored (sign of the divisor, Python's `%`); C's `fmodf` is the
//!   truncated `fmod`.
//! * `sinter_to_i64` / `sinter_to_u64` convert floats as the reference's casts: truncation toward
//!   zero, NaN to 0, saturation at the i64 range, except that u64 keeps values from 2^63 up.
//! * Integer `sinter_div` truncates and wraps (`MIN / -1 = MIN`), `sinter_rem` is C's `%` (the
//!   truncated `fmod`), `sinter_mod` is floored, `sinter_pow` squares with wrapping
//!   multiplication. Division by zero and negative exponents give 0, as `core::scalar` defines
//!   them for every backend (no trap, no undefined behaviour).
//! * `sinter_argmax_better` / `sinter_argmin_better` order (value, index) pairs as the arg
//!   reductions do: a NaN beats any number (the first NaN wins), ties go to the lower index.
//! * `sinter_vec<T, N>` is `N` consecutive elements read or written as one aligned access (16-byte
//!   vector loads and stores).

use std::collections::BTreeSet;

use super::trig::Trig;

/// Float helper families come in an `f32` and an `f64` overload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Fp {
    /// `float`.
    F32,
    /// `double`.
    F64,
}

impl Fp {
    fn ty(self) -> &'static str {
        match self {
            Fp::F32 => "float",
            Fp::F64 => "double",
        }
    }

    /// The suffix of the C math functions (`expf` vs `exp`).
    fn suffix(self) -> &'static str {
        match self {
            Fp::F32 => "f",
            Fp::F64 => "",
        }
    }

    fn lit(self, x: &str) -> String {
        match self {
            Fp::F32 => format!("{x}f"),
            Fp::F64 => x.to_string(),
        }
    }

    fn nan(self) -> &'static str {
        match self {
            Fp::F32 => "__int_as_float(0x7fc00000)",
            Fp::F64 => "__longlong_as_double(0x7ff8000000000000LL)",
        }
    }
}

/// Integer helper families: one overload per compute type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum It {
    /// `int`.
    I32,
    /// `long long`.
    I64,
    /// `unsigned int`.
    U32,
    /// `unsigned long long`.
    U64,
}

impl It {
    fn ty(self) -> &'static str {
        match self {
            It::I32 => "int",
            It::I64 => "long long",
            It::U32 => "unsigned",
            It::U64 => "unsigned long long",
        }
    }

    fn unsigned(self) -> &'static str {
        match self {
            It::I32 | It::U32 => "unsigned",
            It::I64 | It::U64 => "unsigned long long",
        }
    }

    fn signed(self) -> bool {
        matches!(self, It::I32 | It::I64)
    }

    fn lit(self, x: i64) -> String {
        match self {
            It::I32 => x.to_string(),
            It::I64 => format!("{x}LL"),
            It::U32 => format!("{x}u"),
            It::U64 => format!("{x}ULL"),
        }
    }
}

/// A helper function.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum H {
    /// `sinter_vec<T, N>`.
    Vec,
    /// NaN-propagating max.
    FMax(Fp),
    /// NaN-propagating min.
    FMin(Fp),
    /// Relu keeping NaN.
    Relu(Fp),
    /// Sign keeping NaN.
    Sign(Fp),
    /// The logistic function.
    Sigmoid(Fp),
    /// `sin`/`cos` of `float` with libdevice's slow path out of line ([`super::trig`]).
    Trig(super::trig::Trig),
    /// Floored float modulo.
    FModFloor(Fp),
    /// Float to i64 (truncating, saturating, NaN to 0).
    ToI64(Fp),
    /// Float to u64.
    ToU64(Fp),
    /// Integer division.
    Div(It),
    /// Truncated integer remainder.
    Rem(It),
    /// Floored integer modulo (signed types; unsigned use [`H::Rem`]).
    ModFloor(It),
    /// Integer power.
    Pow(It),
    /// Clamp of an index (`unsigned`, `unsigned long long` or `long long`).
    Clamp(It),
    /// Arg-max ordering of (value, index) pairs.
    ArgMaxBetter,
    /// Arg-min ordering.
    ArgMinBetter,
    /// Asynchronous global-to-shared copies of 4 and 8 bytes with zero fill, their commit and wait
    /// (sm_80+).
    CpAsync,
    /// Tensor-core primitives (sm_80+): 16-byte `cp.async` with zero fill, `ldmatrix`, `mma.sync`
    /// m16n8k16; with [`H::CpAsync`].
    Mma,
    /// TF32 tensor-core primitives (sm_80+): a shared f32 load rounded to TF32
    /// (`cvt.rna.tf32.f32`), `mma.sync` m16n8k8 with f32 accumulators.
    MmaTf32,
    /// Hopper warpgroup primitives (sm_90a): the 128-byte swizzle, shared-memory matrix
    /// descriptors, `wgmma` fences, commit and wait, the async-proxy fence.
    Wgmma,
    /// The part of [`H::Wgmma`] a kernel that fills shared memory only by bulk tensor copies uses:
    /// descriptors, `wgmma` fences, commit and wait (no software swizzle, no proxy fence). Not
    /// together with [`H::Wgmma`] (the same functions).
    WgmmaDesc,
    /// One `wgmma.mma_async` m64nNk16 product with f32 accumulators: A from shared memory (`rs`
    /// false) or registers, B from shared memory, N-major B with `trans_b`, f16 operands with
    /// `f16` (else bf16).
    WgmmaMma {
        /// N of the instruction (a multiple of 8 up to 256).
        n: u32,
        /// A from registers.
        rs: bool,
        /// B is N-major (transposed).
        trans_b: bool,
        /// f16 operands (else bf16).
        f16: bool,
    },
    /// `mbarrier` init and arrival, `setmaxnreg`: what [`H::WarpSpec`] and [`H::Tma`] share.
    Mbarrier,
    /// Warp specialization (sm_90a): the `mbarrier` parity wait (a spin in PTX), named barriers
    /// (`bar.sync` / `bar.arrive` with a thread count); with [`H::Mbarrier`].
    WarpSpec,
    /// Hopper's bulk tensor copies (sm_90): the tensor map parameter type, the `mbarrier` arrival
    /// with expected transaction bytes, a parity wait that traps instead of hanging, 2D to 4D TMA
    /// loads; with [`H::Mbarrier`].
    Tma,
    /// Thread-block clusters (sm_90): the block's rank, the cluster-wide barrier, an `mbarrier`
    /// arrival on a cluster peer's barrier, TMA loads multicast to several blocks; with [`H::Tma`].
    Cluster,
    /// 32-bit shared-memory loads and stores by address (a persistent tile's schedule ring).
    SharedWord,
}

/// The helpers a kernel uses.
#[derive(Clone, Debug, Default)]
pub(crate) struct Helpers {
    used: BTreeSet<H>,
}

impl Helpers {
    /// Marks `h` (and what it calls) as used.
    pub(crate) fn need(&mut self, h: H) {
        if self.used.insert(h) {
            for d in deps(h) {
                self.need(d);
            }
        }
    }

    /// Whether nothing is used.
    pub(crate) fn is_empty(&self) -> bool {
        self.used.is_empty()
    }

    /// Whether a tensor-core primitive is used: the source is a tensor-core template, which NVRTC
    /// takes 0.3-1.4 s to compile (session 29), so it compiles alone.
    fn tensor_cores(&self) -> bool {
        self.used.iter().any(|h| matches!(h, H::Mma | H::MmaTf32 | H::Wgmma | H::WgmmaDesc | H::WgmmaMma { .. }))
    }

    /// The source of every used helper, dependencies first; a tensor-core template's starts with
    /// the [`crate::nvrtc::COMPILE_ALONE`] line.
    pub(crate) fn render(&self) -> String {
        let mut out = String::from("// ---- helpers (sinter's scalar semantics) ----\n");
        if self.tensor_cores() {
            out.push_str(&format!("{}: a tensor-core template\n", crate::nvrtc::COMPILE_ALONE));
        }
        for h in &self.used {
            out.push_str(&body(*h));
            out.push('\n');
        }
        out
    }
}

fn deps(h: H) -> Vec<H> {
    match h {
        H::ToU64(f) => vec![H::ToI64(f)],
        H::ModFloor(i) => vec![H::Rem(i)],
        H::Mma => vec![H::CpAsync],
        H::MmaTf32 => vec![H::Mma],
        H::WarpSpec | H::Tma => vec![H::Mbarrier],
        H::Cluster => vec![H::Tma],
        H::Trig(Trig::Sin | Trig::Cos) => vec![H::Trig(Trig::Fast)],
        _ => vec![],
    }
}

pub(crate) use super::prelude_tc::wgmma_name;
use super::prelude_tc::{
    CLUSTER, CP_ASYNC, MBARRIER, MMA, MMA_TF32, SHARED_WORD, TMA, WARP_SPEC, WGMMA_DESC, WGMMA_PROXY_FENCE,
    WGMMA_REG_FENCE, WGMMA_SWIZZLE, wgmma_mma,
};

pub(super) const PRE: &str = "static __device__ __forceinline__";

fn body(h: H) -> String {
    match h {
        H::CpAsync => CP_ASYNC.into(),
        H::Mma => MMA.into(),
        H::MmaTf32 => MMA_TF32.into(),
        H::Wgmma => [WGMMA_SWIZZLE, WGMMA_DESC, WGMMA_PROXY_FENCE, WGMMA_REG_FENCE].concat(),
        H::WgmmaDesc => [WGMMA_DESC, WGMMA_REG_FENCE].concat(),
        H::Tma => TMA.into(),
        H::Cluster => CLUSTER.into(),
        H::SharedWord => SHARED_WORD.into(),
        H::WgmmaMma { n, rs, trans_b, f16 } => wgmma_mma(n, rs, trans_b, f16),
        H::WarpSpec => WARP_SPEC.into(),
        H::Mbarrier => MBARRIER.into(),
        H::Trig(t) => super::trig::source(t, PRE),
        H::Vec => "// N consecutive elements of T as one aligned access (16-byte vector loads and stores)
template <typename T, int N>
struct alignas(sizeof(T) * N < 16 ? sizeof(T) * N : 16) sinter_vec {
    T v[N];
};
"
        .into(),
        H::FMax(f) | H::FMin(f) => {
            let (name, c) = if matches!(h, H::FMax(_)) { ("fmax", "max") } else { ("fmin", "min") };
            let t = f.ty();
            format!(
                "// {c} propagating NaN (torch, ONNX)
{PRE} {t} sinter_{name}({t} a, {t} b) {{
    return (isnan(a) || isnan(b)) ? {nan} : {name}{s}(a, b);
}}
",
                nan = f.nan(),
                s = f.suffix()
            )
        }
        H::Relu(f) => {
            let t = f.ty();
            let z = f.lit("0.0");
            format!(
                "// relu keeping NaN; relu(-0) = +0
{PRE} {t} sinter_relu({t} x) {{
    return (x > {z} || isnan(x)) ? x : {z};
}}
"
            )
        }
        H::Sign(f) => {
            let t = f.ty();
            let (z, one) = (f.lit("0.0"), f.lit("1.0"));
            format!(
                "// sign keeping NaN (NumPy, ONNX); sign(+-0) = +0
{PRE} {t} sinter_sign({t} x) {{
    return x > {z} ? {one} : x < {z} ? -{one} : isnan(x) ? x : {z};
}}
"
            )
        }
        H::Sigmoid(f) => {
            let t = f.ty();
            let (z, one, s) = (f.lit("0.0"), f.lit("1.0"), f.suffix());
            format!(
                "// the logistic function, in a form that neither overflows nor loses the small tail:
// 1 / (1 + e^-x) for x >= 0, e^x / (1 + e^x) below, as a select rather than a branch (a
// tensor-core epilogue applies it to every accumulator of a thread: branches there took ptxas
// 0.9 s on one 128x128 tile, 0.2 s without the logistic)
{PRE} {t} sinter_sigmoid({t} x) {{
    const {t} e = exp{s}(-fabs{s}(x));
    return (x >= {z} ? {one} : e) / ({one} + e);
}}
"
            )
        }
        H::FModFloor(f) => {
            let t = f.ty();
            let (z, s) = (f.lit("0.0"), f.suffix());
            format!(
                "// floored modulo: the sign of the divisor (Python's %, torch.remainder)
{PRE} {t} sinter_mod({t} a, {t} b) {{
    const {t} r = fmod{s}(a, b);
    return (r != {z} && ((r < {z}) != (b < {z}))) ? r + b : r;
}}
"
            )
        }
        H::ToI64(f) => {
            let t = f.ty();
            let (two63, conv) = match f {
                Fp::F32 => ("9.2233720368547758e18f", "__float2ll_rz"),
                Fp::F64 => ("9.2233720368547758e18", "__double2ll_rz"),
            };
            format!(
                "// float to i64 as the reference casts: truncate toward zero, NaN to 0, saturate
{PRE} long long sinter_to_i64({t} x) {{
    if (isnan(x)) {{
        return 0LL;
    }}
    if (x >= {two63}) {{
        return 9223372036854775807LL;
    }}
    if (x <= -{two63}) {{
        return -9223372036854775807LL - 1LL;
    }}
    return {conv}(x);
}}
"
            )
        }
        H::ToU64(f) => {
            let t = f.ty();
            let (two63, two64, conv) = match f {
                Fp::F32 => ("9.2233720368547758e18f", "1.8446744073709552e19f", "__float2ull_rz"),
                Fp::F64 => ("9.2233720368547758e18", "1.8446744073709552e19", "__double2ull_rz"),
            };
            format!(
                "// float to u64: values from 2^63 up keep their value (saturating at 2^64 - 1), others
// convert through i64 (negative values wrap)
{PRE} unsigned long long sinter_to_u64({t} x) {{
    if (x >= {two63}) {{
        return x >= {two64} ? 18446744073709551615ULL : {conv}(x);
    }}
    return (unsigned long long)sinter_to_i64(x);
}}
"
            )
        }
        H::Div(i) => {
            let t = i.ty();
            let (z, m1) = (i.lit(0), i.lit(-1));
            if i.signed() {
                format!(
                    "// truncating division; MIN / -1 wraps to MIN; division by zero gives 0 (as core::scalar)
{PRE} {t} sinter_div({t} a, {t} b) {{
    return b == {z} ? {z} : b == {m1} ? ({t})(({u})0 - ({u})a) : a / b;
}}
",
                    u = i.unsigned()
                )
            } else {
                format!(
                    "// division; division by zero gives 0 (as core::scalar)
{PRE} {t} sinter_div({t} a, {t} b) {{
    return b == {z} ? {z} : a / b;
}}
"
                )
            }
        }
        H::Rem(i) => {
            let t = i.ty();
            let (z, m1) = (i.lit(0), i.lit(-1));
            if i.signed() {
                format!(
                    "// truncated remainder (C's %, fmod: the sign of the dividend); MIN % -1 = 0; by zero gives 0
{PRE} {t} sinter_rem({t} a, {t} b) {{
    return (b == {z} || b == {m1}) ? {z} : a % b;
}}
"
                )
            } else {
                format!(
                    "// remainder; by zero gives 0 (as core::scalar)
{PRE} {t} sinter_rem({t} a, {t} b) {{
    return b == {z} ? {z} : a % b;
}}
"
                )
            }
        }
        H::ModFloor(i) => {
            let t = i.ty();
            let z = i.lit(0);
            format!(
                "// floored modulo: the sign of the divisor (Python's %)
{PRE} {t} sinter_mod({t} a, {t} b) {{
    const {t} r = sinter_rem(a, b);
    return (r != {z} && ((r < {z}) != (b < {z}))) ? r + b : r;
}}
"
            )
        }
        H::Pow(i) => {
            let (t, u) = (i.ty(), i.unsigned());
            let neg = if i.signed() {
                format!("    if (e < {}) {{\n        return {};\n    }}\n", i.lit(0), i.lit(0))
            } else {
                String::new()
            };
            let note = if i.signed() { "; a negative exponent gives 0 (as core::scalar)" } else { "" };
            format!(
                "// base^e by squaring with wrapping multiplication{note}
{PRE} {t} sinter_pow({t} base, {t} e) {{
{neg}    {u} acc = 1, b = ({u})base, n = ({u})e;
    while (n != 0) {{
        if (n & 1) {{
            acc *= b;
        }}
        b *= b;
        n >>= 1;
    }}
    return ({t})acc;
}}
"
            )
        }
        H::Clamp(i) => {
            let t = i.ty();
            format!(
                "{PRE} {t} sinter_clamp({t} x, {t} lo, {t} hi) {{
    const {t} y = x < lo ? lo : x;
    return y > hi ? hi : y;
}}
"
            )
        }
        H::ArgMaxBetter | H::ArgMinBetter => {
            let (name, cmp, what) =
                if h == H::ArgMaxBetter { ("argmax", ">", "larger") } else { ("argmin", "<", "smaller") };
            format!(
                "// whether (v, i) beats (bv, bi) in an {name}: a NaN first (the lowest index among NaNs), then
// the {what} value, then the lower index
template <typename T>
{PRE} bool sinter_{name}_better(T v, long long i, T bv, long long bi) {{
    const bool vn = v != v, bn = bv != bv;
    if (vn || bn) {{
        return vn && (!bn || i < bi);
    }}
    return v {cmp} bv || (v == bv && i < bi);
}}
"
            )
        }
    }
}

/// fp8 codes to values and back, bit for bit as `sinter_core::fp8` (the one definition): decoding
/// is exact (bit manipulation into a float); encoding takes a `double` (exact for f32 and f64
/// values, so one function serves both), rounds to nearest even on the format's grid (subnormals
/// included) and overflows past the largest finite value to NaN (e4m3fn, no infinity) or
/// infinity (e5m2), keeping the sign of zeros and NaN. Software, not `cvt.rn.satfinite`: the
/// hardware conversion saturates, which is ONNX's `saturate=1`, not the IR's cast.
///
/// The renderer calls them by name (`ops.rs`: loads, casts, stores); [`fp8_helpers`] emits the
/// ones a kernel body calls.
const FP8_DEC_E4M3: &str = r#"static __device__ __forceinline__ float sinter_e4m3_to_f32(unsigned char c) {
    const unsigned e = (c >> 3) & 15u, m = c & 7u;
    float v;
    if (e == 15u && m == 7u) {
        v = __int_as_float(0x7fc00000);
    } else if (e == 0u) {
        v = (float)m * 0.001953125f; // m * 2^-9
    } else {
        v = __int_as_float((int)(((e + 120u) << 23) | (m << 20)));
    }
    return (c & 0x80u) ? -v : v;
}
"#;
const FP8_DEC_E5M2: &str = r#"static __device__ __forceinline__ float sinter_e5m2_to_f32(unsigned char c) {
    const unsigned e = (c >> 2) & 31u, m = c & 3u;
    float v;
    if (e == 31u) {
        v = m == 0u ? __int_as_float(0x7f800000) : __int_as_float(0x7fc00000);
    } else if (e == 0u) {
        v = (float)m * 1.52587890625e-05f; // m * 2^-16
    } else {
        v = __int_as_float((int)(((e + 112u) << 23) | (m << 21)));
    }
    return (c & 0x80u) ? -v : v;
}
"#;
const FP8_ENC: &str = r#"static __device__ __forceinline__ unsigned char sinter_f64_to_f8(double x, int mbits, int bias, bool ieee, double maxv) {
    const unsigned sign = signbit(x) ? 0x80u : 0u;
    const unsigned over = sign | (ieee ? 0x7Cu : 0x7Fu);
    if (isnan(x)) {
        return (unsigned char)(sign | 0x7Fu);
    }
    const double a = fabs(x);
    if (isinf(a)) {
        return (unsigned char)over;
    }
    if (a == 0.0) {
        return (unsigned char)sign;
    }
    const int emin = 1 - bias;
    int e;
    frexp(a, &e); // a = f * 2^e, f in [0.5, 1)
    e = max(e - 1, emin);
    // The quantum of a's binade: a / q is exact, rint rounds it to nearest even.
    const double q = ldexp(1.0, e - mbits);
    const double r = rint(a / q) * q;
    if (r > maxv) {
        return (unsigned char)over;
    }
    if (r == 0.0) {
        return (unsigned char)sign;
    }
    int re;
    frexp(r, &re);
    re -= 1;
    unsigned code;
    if (re < emin) {
        code = (unsigned)(r / ldexp(1.0, emin - mbits));
    } else {
        code = ((unsigned)(re + bias) << mbits) | ((unsigned)(r / ldexp(1.0, re - mbits)) - (1u << mbits));
    }
    return (unsigned char)(sign | code);
}
"#;
const FP8_ENC_E4M3: &str = r#"static __device__ __forceinline__ unsigned char sinter_f64_to_e4m3(double x) {
    return sinter_f64_to_f8(x, 3, 7, false, 448.0);
}
"#;
const FP8_ENC_E5M2: &str = r#"static __device__ __forceinline__ unsigned char sinter_f64_to_e5m2(double x) {
    return sinter_f64_to_f8(x, 2, 15, true, 57344.0);
}
"#;

/// The parts of `table` the `code` parts need, in table order: a part is needed when the code
/// calls any function listed with it (its own, or that of a part after it that calls it). The
/// source-scanned helper families (fp8 here, the 16-bit conversions in `half`) share it.
pub(crate) fn called_parts(code: &[&str], table: &[(&[&str], &str)]) -> String {
    let called = |name: &str| {
        let call = format!("{name}(");
        code.iter().any(|c| c.contains(&call))
    };
    let mut out = String::new();
    for (callers, src) in table {
        if callers.iter().any(|n| called(n)) {
            out.push_str(src);
        }
    }
    out
}

/// The fp8 helpers `body` calls (with the generic encoder the two encoders share), in a stable
/// order; empty when it calls none.
pub(crate) fn fp8_helpers(body: &str) -> String {
    let (dec4, dec5, enc4, enc5) =
        ("sinter_e4m3_to_f32", "sinter_e5m2_to_f32", "sinter_f64_to_e4m3", "sinter_f64_to_e5m2");
    let table: [(&[&str], &str); 5] = [
        (&[dec4], FP8_DEC_E4M3),
        (&[dec5], FP8_DEC_E5M2),
        (&[enc4, enc5], FP8_ENC),
        (&[enc4], FP8_ENC_E4M3),
        (&[enc5], FP8_ENC_E5M2),
    ];
    let mut out = called_parts(&[body], &table);
    if !out.is_empty() {
        out.insert_str(0, "// fp8 e4m3fn / e5m2 codes <-> values (sinter_core::fp8)\n");
    }
    out
}
