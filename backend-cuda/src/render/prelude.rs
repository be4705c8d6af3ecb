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
    /// Tensor-core primitives (sm_80+): `cp.async` with zero fill, `ldmatrix`, `mma.sync` m16n8k16.
    Mma,
    /// TF32 tensor-core primitives (sm_80+): 4-byte `cp.async` with zero fill, a shared f32 load
    /// rounded to TF32 (`cvt.rna.tf32.f32`), `mma.sync` m16n8k8 with f32 accumulators.
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

    /// The source of every used helper, dependencies first.
    pub(crate) fn render(&self) -> String {
        let mut out = String::from("// ---- helpers (sinter's scalar semantics) ----\n");
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
        H::MmaTf32 => vec![H::Mma],
        H::WarpSpec | H::Tma => vec![H::Mbarrier],
        H::Cluster => vec![H::Tma],
        H::Trig(Trig::Sin | Trig::Cos) => vec![H::Trig(Trig::Fast)],
        _ => vec![],
    }
}

const PRE: &str = "static __device__ __forceinline__";

fn body(h: H) -> String {
    match h {
        H::Mma => MMA.into(),
        H::MmaTf32 => MMA_TF32.into(),
        H::Wgmma => [WGMMA_SWIZZLE, WGMMA_DESC, WGMMA_PROXY_FENCE, WGMMA_REG_FENCE].concat(),
        H::WgmmaDesc => [WGMMA_DESC, WGMMA_REG_FENCE].concat(),
        H::Tma => TMA.into(),
        H::Cluster => CLUSTER.into(),
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

/// The fp8 helpers `body` calls (with the generic encoder the two encoders share), in a stable
/// order; empty when it calls none.
pub(crate) fn fp8_helpers(body: &str) -> String {
    let called = |name: &str| body.contains(&format!("{name}("));
    let (enc4, enc5) = (called("sinter_f64_to_e4m3"), called("sinter_f64_to_e5m2"));
    let mut out = String::new();
    for (on, src) in [
        (called("sinter_e4m3_to_f32"), FP8_DEC_E4M3),
        (called("sinter_e5m2_to_f32"), FP8_DEC_E5M2),
        (enc4 || enc5, FP8_ENC),
        (enc4, FP8_ENC_E4M3),
        (enc5, FP8_ENC_E5M2),
    ] {
        if on {
            out.push_str(src);
        }
    }
    if !out.is_empty() {
        out.insert_str(0, "// fp8 e4m3fn / e5m2 codes <-> values (sinter_core::fp8)\n");
    }
    out
}

/// The tensor-core primitives of the `mma` template: asynchronous 16-byte copies into shared
/// memory (`src_bytes` < 16 zero-fills the rest), `ldmatrix` (four 8x8 b16 matrices, optionally
/// transposed) and the m16n8k16 products with f32 accumulators.
const MMA: &str = r#"// 16 bytes global -> shared without passing through registers; bytes past src_bytes are zero
template <typename T>
static __device__ __forceinline__ void sinter_cp_async16(unsigned dst, const T* src, unsigned src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
static __device__ __forceinline__ void sinter_cp_async_commit() {
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int N>
static __device__ __forceinline__ void sinter_cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" :: "n"(N) : "memory");
}
// four 8x8 b16 matrices from shared memory (transposed with TRANS); lane l gives the address of
// row l % 8 of matrix l / 8
template <bool TRANS>
static __device__ __forceinline__ void sinter_ldsm_x4(unsigned (&r)[4], unsigned addr) {
    if (TRANS) {
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
    } else {
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
    }
}
// c += a (16x16, row) * b (16x8, col) with f32 accumulators; operands f16 with F16, else bf16.
// Not volatile: a pure register operation the compiler may interleave with the next ldmatrix.
template <bool F16>
static __device__ __forceinline__ void sinter_mma(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
    if (F16) {
        asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    } else {
        asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
}
"#;

/// The TF32 primitives of the `mma` template (f32 operands where the product allows TF32).
const MMA_TF32: &str = r#"// 4 bytes global -> shared without passing through registers; zero when src_bytes is 0
template <typename T>
static __device__ __forceinline__ void sinter_cp_async4(unsigned dst, const T* src, unsigned src_bytes) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" :: "r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
// an f32 from shared memory rounded to TF32 (nearest, ties away: cvt.rna), as an mma operand
static __device__ __forceinline__ unsigned sinter_lds_tf32(unsigned addr) {
    float x;
    asm volatile("ld.shared.f32 %0, [%1];\n" : "=f"(x) : "r"(addr) : "memory");
    unsigned r;
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
    return r;
}
// c += a (16x8, row) * b (8x8, col) in TF32 with f32 accumulators
static __device__ __forceinline__ void sinter_mma_tf32(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
"#;

/// Hopper warpgroup primitives of the `wgmma` tiles: the software 128-byte swizzle,
const WGMMA_SWIZZLE: &str = r#"// byte offset of element (r, c) (c a multiple of 8) in a tile of `rows` rows stored as 64-column
// blocks of 128-byte rows, 16-byte chunks swizzled by the row (the wgmma/TMA 128-byte swizzle)
static __device__ __forceinline__ unsigned sinter_swz128(unsigned r, unsigned c, unsigned rows) {
    return (c >> 6) * rows * 128u + r * 128u + ((((c >> 3) & 7u) ^ (r & 7u)) << 4);
}
"#;

/// shared-memory matrix descriptors, `wgmma` fences, commit and wait,
const WGMMA_DESC: &str = r#"// a wgmma shared-memory matrix descriptor: start address, leading and stride byte offsets,
// 128-byte swizzle (the start's 1024-byte period must be that of the swizzle pattern)
static __device__ __forceinline__ unsigned long long sinter_wgmma_desc(unsigned addr, unsigned lbo, unsigned sbo) {
    return (unsigned long long)((addr & 0x3FFFFu) >> 4) | ((unsigned long long)((lbo & 0x3FFFFu) >> 4) << 16)
        | ((unsigned long long)((sbo & 0x3FFFFu) >> 4) << 32) | (1ull << 62);
}
// The descriptor `bytes` (a multiple of 16) further along shared memory: the start-address field
// (bits 0-13, address / 16) takes the offset without a carry, since shared addresses are below
// 2^18; a 32-bit add on the low word, where recomputing the descriptor costs a mask, a shift and
// an or per product (measured: a fifth of the issue slots of the d64 attention loop's descriptor
// arithmetic).
static __device__ __forceinline__ unsigned long long sinter_wgmma_desc_add(unsigned long long d, unsigned bytes) {
    return (d & 0xFFFFFFFF00000000ull) | (unsigned long long)((unsigned)d + (bytes >> 4));
}
static __device__ __forceinline__ void sinter_wgmma_fence() {
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
static __device__ __forceinline__ void sinter_wgmma_commit() {
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int N>
static __device__ __forceinline__ void sinter_wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" :: "n"(N) : "memory");
}
"#;

/// the async-proxy fence after ordinary shared-memory writes,
const WGMMA_PROXY_FENCE: &str = r#"// generic-proxy writes to shared memory (cp.async, st.shared) made visible to the async proxy
// (wgmma) that reads them after the next barrier
static __device__ __forceinline__ void sinter_fence_async_shared() {
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
"#;

/// and a compiler fence on accumulators.
const WGMMA_REG_FENCE: &str = r#"// keeps the compiler from moving accesses to accumulators across a wgmma issue or wait
template <int N>
static __device__ __forceinline__ void sinter_reg_fence(float (&d)[N][4]) {
    #pragma unroll
    for (int j = 0; j < N; ++j) {
        asm volatile("" : "+f"(d[j][0]), "+f"(d[j][1]), "+f"(d[j][2]), "+f"(d[j][3]) :: "memory");
    }
}
"#;

/// What warp-specialized kernels share: `mbarrier` init and arrival, register reallocation.
const MBARRIER: &str = r#"// an mbarrier in shared memory expecting `count` arrivals per phase
static __device__ __forceinline__ void sinter_mbar_init(unsigned bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" :: "r"(bar), "r"(count) : "memory");
}
// one arrival (release: this thread's earlier writes are visible to whoever waits)
static __device__ __forceinline__ void sinter_mbar_arrive(unsigned bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" :: "r"(bar) : "memory");
}
// the warpgroup's registers per thread lowered / raised to N (sm_90a; the whole warpgroup executes
// it; the kernel needs a register cap at entry: __launch_bounds__(threads, min_blocks))
template <int N>
static __device__ __forceinline__ void sinter_setmaxnreg_dec() {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" :: "n"(N));
}
template <int N>
static __device__ __forceinline__ void sinter_setmaxnreg_inc() {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" :: "n"(N));
}
"#;

/// The `mbarrier` spin and the named barriers of the ping-pong attention tiles.
const WARP_SPEC: &str = r#"// blocks until the phase with parity `parity` has completed (acquire; a fresh barrier counts its
// phase before the first as completed: parity 1 passes at once); a spin in PTX: a C loop around
// try_wait (with a clock for a time-out) costs the ping-pong attention tiles registers they spill
static __device__ __forceinline__ void sinter_mbar_wait(unsigned bar, unsigned parity) {
    asm volatile("{\n.reg .pred done;\nsinter_mbar_retry:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
                 "@!done bra sinter_mbar_retry;\n}\n" :: "r"(bar), "r"(parity) : "memory");
}
// named barrier `id`: wait until COUNT threads (this warp's included) arrived or synced
template <int COUNT>
static __device__ __forceinline__ void sinter_bar_sync(unsigned id) {
    asm volatile("bar.sync %0, %1;\n" :: "r"(id), "n"(COUNT) : "memory");
}
// named barrier `id`: count this warp among the COUNT threads, without waiting
template <int COUNT>
static __device__ __forceinline__ void sinter_bar_arrive(unsigned id) {
    asm volatile("bar.arrive %0, %1;\n" :: "r"(id), "n"(COUNT) : "memory");
}
"#;

/// The TMA copies of the `mma_tma` template and the TMA attention producer.
const TMA: &str = r#"// a tensor map (the driver's CUtensorMap, encoded on the host), a __grid_constant__ parameter
struct __align__(64) sinter_tmap {
    unsigned long long opaque[16];
};
// barrier initialization visible to the other threads and to the copy engine (before a barrier)
static __device__ __forceinline__ void sinter_mbar_fence_init() {
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
// one arrival that also expects `bytes` more transaction bytes in the current phase
static __device__ __forceinline__ void sinter_mbar_expect_tx(unsigned bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" :: "r"(bar), "r"(bytes) : "memory");
}
// whether the phase of parity `parity` of barrier `bar` has completed (acquire)
static __device__ __forceinline__ bool sinter_mbar_try_wait(unsigned bar, unsigned parity) {
    unsigned ok;
    asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(ok) : "r"(bar), "r"(parity) : "memory");
    return ok != 0u;
}
// sinter_mbar_wait, except that a wait past 2^34 cycles (seconds) traps: a pipeline bug is a launch
// error, not a hung GPU
static __device__ __forceinline__ void sinter_mbar_wait_or_trap(unsigned bar, unsigned parity) {
    if (sinter_mbar_try_wait(bar, parity)) return;
    const long long t0 = clock64();
    while (!sinter_mbar_try_wait(bar, parity)) {
        if (clock64() - t0 > (1ll << 34)) __trap();
    }
}
static __device__ __forceinline__ void sinter_tma_prefetch(const sinter_tmap* map) {
    asm volatile("prefetch.tensormap [%0];\n" :: "l"(reinterpret_cast<unsigned long long>(map)) : "memory");
}
// the box of the RANK-dimensional (2 or 3) `map` at element coordinates (c0, c1[, c2]) (innermost
// first) into shared memory at `dst`, its bytes completing on barrier `bar` (zeros past the
// tensor's extents, counted all the same)
template <int RANK>
static __device__ __forceinline__ void sinter_tma_load(unsigned dst, const sinter_tmap* map, int c0, int c1, int c2, unsigned bar) {
    if (RANK == 2) {
        asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n"
                     :: "r"(dst), "l"(reinterpret_cast<unsigned long long>(map)), "r"(c0), "r"(c1), "r"(bar) : "memory");
    } else {
        asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];\n"
                     :: "r"(dst), "l"(reinterpret_cast<unsigned long long>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(bar) : "memory");
    }
}
// the box of the 4-dimensional `map` at (c0, c1, c2, c3) (innermost first), as above
template <int RANK>
static __device__ __forceinline__ void sinter_tma_load(unsigned dst, const sinter_tmap* map, int c0, int c1, int c2, int c3, unsigned bar) {
    static_assert(RANK == 4, "four coordinates: a 4-dimensional map");
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], [%6];\n"
                 :: "r"(dst), "l"(reinterpret_cast<unsigned long long>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar) : "memory");
}
"#;

/// The cluster helpers of the `mma_tma` template's cluster tiles.
const CLUSTER: &str = r#"// this block's rank in its cluster
static __device__ __forceinline__ unsigned sinter_cluster_rank() {
    unsigned r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
    return r;
}
// every thread of every block of the cluster arrives, then waits (release / acquire at cluster
// scope: barrier initialization before, and shared memory a peer still writes into, after)
static __device__ __forceinline__ void sinter_cluster_sync() {
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
// one arrival on the barrier at `bar` (this block's shared address) of the cluster's block `cta`
// (the default release semantics at CTA scope, as CUTLASS's cluster pipelines arrive: the
// products that read what the barrier guards were waited for before)
static __device__ __forceinline__ void sinter_mbar_arrive_cluster(unsigned bar, unsigned cta) {
    asm volatile("{\n.reg .b32 remote;\nmapa.shared::cluster.u32 remote, %0, %1;\n"
                 "mbarrier.arrive.shared::cluster.b64 _, [remote];\n}\n" :: "r"(bar), "r"(cta) : "memory");
}
// sinter_tma_load's box copied into the shared memory of every block of `mask` in the cluster at
// the same address `dst`, its bytes completing on each one's barrier at `bar`
template <int RANK>
static __device__ __forceinline__ void sinter_tma_load_multicast(unsigned dst, const sinter_tmap* map, int c0, int c1, int c2, unsigned bar, unsigned short mask) {
    if (RANK == 2) {
        asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, {%2, %3}], [%4], %5;\n"
                     :: "r"(dst), "l"(reinterpret_cast<unsigned long long>(map)), "r"(c0), "r"(c1), "r"(bar), "h"(mask) : "memory");
    } else {
        asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, {%2, %3, %4}], [%5], %6;\n"
                     :: "r"(dst), "l"(reinterpret_cast<unsigned long long>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(bar), "h"(mask) : "memory");
    }
}
"#;

/// The name of the [`H::WgmmaMma`] helper.
pub(crate) fn wgmma_name(n: u32, rs: bool, trans_b: bool, f16: bool) -> String {
    format!(
        "sinter_wgmma_{}_{}_n{n}{}",
        if rs { "rs" } else { "ss" },
        if f16 { "f16" } else { "bf16" },
        if trans_b { "_tb" } else { "" }
    )
}

/// `d (m64 x n, f32) = A (m64 x k16) B (k16 x n) + (acc ? d : 0)`, issued asynchronously (the
/// caller fences, commits and waits).
fn wgmma_mma(n: u32, rs: bool, trans_b: bool, f16: bool) -> String {
    let regs = n / 2;
    let ty = if f16 { "f16" } else { "bf16" };
    let d: Vec<String> = (0..regs).map(|i| format!("%{i}")).collect();
    let (a_param, a_ops, a_asm, next) = if rs {
        (
            "const unsigned (&a)[4]",
            "\"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), ".to_string(),
            format!("{{%{}, %{}, %{}, %{}}}", regs, regs + 1, regs + 2, regs + 3),
            regs + 4,
        )
    } else {
        ("unsigned long long a", "\"l\"(a), ".to_string(), format!("%{regs}"), regs + 1)
    };
    let (b, acc) = (next, next + 1);
    let imm = if rs { format!("1, 1, {}", trans_b as u32) } else { format!("1, 1, 0, {}", trans_b as u32) };
    let outs: Vec<String> = (0..regs).map(|i| format!("\"+f\"(d[{}][{}])", i / 4, i % 4)).collect();
    format!(
        "// d (m64 x n{n}, f32) = A x B + (acc ? d : 0): A {}, B in shared memory{}, {ty}; asynchronous
{PRE} void {name}(float (&d)[{n8}][4], {a_param}, unsigned long long b, int acc) {{
    asm volatile(
        \"{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{acc}, 0;\\n\"
        \"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{ty}.{ty} {{{d}}}, {a_asm}, %{b}, p, {imm};\\n}}\\n\"
        : {outs}
        : {a_ops}\"l\"(b), \"r\"(acc));
}}
",
        if rs { "in registers" } else { "in shared memory" },
        if trans_b { " (N-major)" } else { "" },
        name = wgmma_name(n, rs, trans_b, f16),
        n8 = n / 8,
        d = d.join(", "),
        outs = outs.join(", "),
    )
}
