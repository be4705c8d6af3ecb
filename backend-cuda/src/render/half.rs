//! The 16-bit float types of the sources, written out instead of `#include <cuda_fp16.h>` /
//! `<cuda_bf16.h>`: a source that stores f16 or bf16 declares `sinter_f16` / `sinter_bf16`
//! (the 16 bits, no operators: kernels compute in f32) and the conversions it calls.
//!
//! Why: the two headers are ~9,000 lines NVRTC parses for every source that names either type,
//! and the renderer needs only their storage types and round-to-nearest-even conversions. Without
//! them a source needs no include folder, so NVRTC is the only CUDA library a compile needs
//! (see `nvrtc.rs`; the measured compile times are in BENCHMARKS.md, session 31).
//!
//! Contract (the conversions of `cuda_fp16.hpp` / `cuda_bf16.hpp`, instruction for instruction
//! where the architecture has one):
//! * widening is exact (`cvt.f32.f16`; bf16 is the upper half of an f32, NaN payloads kept);
//! * narrowing rounds to nearest even once (`cvt.rn.f16.f32`, `cvt.rn.f16.f64`; `cvt.rn.bf16.f32`
//!   on sm_80+, `cvt.rn.bf16.f64` on sm_90+); below those, bf16 rounds in software as the headers
//!   do: from f32 with the carry of the dropped half (NaN to `0x7fff`), from f64 through an f32
//!   rounded to odd, so that the two roundings equal one;
//! * the pair packs `sinter_pack_f16x2(lo, hi)` / `sinter_pack_bf16x2(lo, hi)` give the 32-bit
//!   register of two rounded values, `lo` in the low half (the `mma` / `wgmma` A-fragment layout,
//!   as `__floats2half2_rn` / `__floats2bfloat162_rn`); sm_80+ only, as the tensor-core templates
//!   that call them (`attention::tc_applies`).

use sinter_core::DType;

/// The storage struct of each 16-bit type (what a kernel parameter points to).
const F16_TYPE: &str = "struct __align__(2) sinter_f16 { unsigned short bits; };\n";
const BF16_TYPE: &str = "struct __align__(2) sinter_bf16 { unsigned short bits; };\n";

/// One conversion: the functions whose calls need it (its own name first, then a caller that is
/// emitted after it), its type and its definition.
struct Conv {
    needed_by: &'static [&'static str],
    dtype: DType,
    src: &'static str,
}

/// Every conversion, in the order they are emitted (a helper before its callers).
const CONVS: [Conv; 8] = [
    Conv {
        needed_by: &["sinter_f16_to_f32"],
        dtype: DType::F16,
        src: r#"static __device__ __forceinline__ float sinter_f16_to_f32(sinter_f16 h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h.bits));
    return f;
}
"#,
    },
    Conv {
        needed_by: &["sinter_f32_to_f16"],
        dtype: DType::F16,
        src: r#"static __device__ __forceinline__ sinter_f16 sinter_f32_to_f16(float f) {
    sinter_f16 h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h.bits) : "f"(f));
    return h;
}
"#,
    },
    Conv {
        needed_by: &["sinter_f64_to_f16"],
        dtype: DType::F16,
        src: r#"static __device__ __forceinline__ sinter_f16 sinter_f64_to_f16(double d) {
    sinter_f16 h;
    asm("cvt.rn.f16.f64 %0, %1;" : "=h"(h.bits) : "d"(d));
    return h;
}
"#,
    },
    Conv {
        needed_by: &["sinter_pack_f16x2"],
        dtype: DType::F16,
        src: r#"static __device__ __forceinline__ unsigned sinter_pack_f16x2(float lo, float hi) {
    unsigned r;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}
"#,
    },
    Conv {
        needed_by: &["sinter_bf16_to_f32"],
        dtype: DType::BF16,
        src: r#"static __device__ __forceinline__ float sinter_bf16_to_f32(sinter_bf16 h) {
    return __uint_as_float((unsigned)h.bits << 16);
}
"#,
    },
    Conv {
        needed_by: &["sinter_f32_to_bf16", "sinter_f64_to_bf16"],
        dtype: DType::BF16,
        src: r#"static __device__ __forceinline__ sinter_bf16 sinter_f32_to_bf16(float f) {
    sinter_bf16 h;
#if __CUDA_ARCH__ >= 800
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h.bits) : "f"(f));
#else
    const unsigned u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        h.bits = 0x7fffu;
    } else {
        h.bits = (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    }
#endif
    return h;
}
"#,
    },
    Conv {
        needed_by: &["sinter_f64_to_bf16"],
        dtype: DType::BF16,
        src: r#"static __device__ __forceinline__ sinter_bf16 sinter_f64_to_bf16(double d) {
#if __CUDA_ARCH__ >= 900
    sinter_bf16 h;
    asm("cvt.rn.bf16.f64 %0, %1;" : "=h"(h.bits) : "d"(d));
    return h;
#else
    // to f32 rounded to odd (the sticky bit of what the first rounding dropped), then once to bf16
    const float f = __double2float_rn(d);
    const double back = (double)f;
    unsigned u = __float_as_uint(f);
    if ((d > 0.0 && back > d) || (d < 0.0 && back < d)) {
        u -= 1u;
    }
    if (back != d && (u << 1) <= 0xff000000u) {
        u |= 1u;
    }
    return sinter_f32_to_bf16(__uint_as_float(u));
#endif
}
"#,
    },
    Conv {
        needed_by: &["sinter_pack_bf16x2"],
        dtype: DType::BF16,
        src: r#"static __device__ __forceinline__ unsigned sinter_pack_bf16x2(float lo, float hi) {
    unsigned r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}
"#,
    },
];

/// The conversion that widens a `d` storage element to f32 and the two that narrow f32 and f64 to
/// it (f16 and bf16 only).
pub(crate) fn conv_names(d: DType) -> Option<(&'static str, &'static str, &'static str)> {
    match d {
        DType::F16 => Some(("sinter_f16_to_f32", "sinter_f32_to_f16", "sinter_f64_to_f16")),
        DType::BF16 => Some(("sinter_bf16_to_f32", "sinter_f32_to_bf16", "sinter_f64_to_bf16")),
        _ => None,
    }
}

/// The pair pack of `d` (f16 or bf16): two f32 values to one 32-bit fragment register.
pub(crate) fn pack2(d: DType) -> &'static str {
    if d == DType::F16 { "sinter_pack_f16x2" } else { "sinter_pack_bf16x2" }
}

/// The declarations a source needs: the storage struct of each 16-bit type in `dtypes`, then the
/// conversions the `code` parts call (with those they call), in a stable order; empty without
/// f16/bf16.
pub(crate) fn declarations(dtypes: &[DType], code: &[&str]) -> String {
    let mut out = String::new();
    for (d, ty) in [(DType::F16, F16_TYPE), (DType::BF16, BF16_TYPE)] {
        if dtypes.contains(&d) {
            out.push_str(ty);
        }
    }
    if out.is_empty() {
        return out;
    }
    let table: Vec<(&[&str], &str)> =
        CONVS.iter().filter(|c| dtypes.contains(&c.dtype)).map(|c| (c.needed_by, c.src)).collect();
    out.push_str(&super::prelude::called_parts(code, &table));
    out.insert_str(
        0,
        "// 16-bit floats: storage and round-to-nearest-even conversions (no cuda_fp16.h / cuda_bf16.h)\n",
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_called_conversions_of_present_types() {
        assert_eq!(declarations(&[DType::F32], &["sinter_f32_to_f16(x)"]), "");
        let d = declarations(&[DType::F16], &["y[i] = sinter_f32_to_f16(sinter_f16_to_f32(x[i]));"]);
        assert!(d.contains("struct __align__(2) sinter_f16"), "{d}");
        assert!(!d.contains("sinter_bf16"), "{d}");
        assert!(d.contains("sinter_f16_to_f32(sinter_f16 h)") && d.contains("sinter_f32_to_f16(float f)"), "{d}");
        assert!(!d.contains("sinter_f64_to_f16(double"), "{d}");
    }

    #[test]
    fn bf16_helpers_bring_the_f32_rounding_they_call() {
        let d = declarations(&[DType::BF16], &["sinter_f64_to_bf16(v)"]);
        let callee = d.find("sinter_bf16 sinter_f32_to_bf16(float f)").expect(&d);
        let caller = d.find("sinter_f64_to_bf16(double d)").expect(&d);
        assert!(callee < caller, "{d}");
        let d = declarations(&[DType::BF16], &["pf = sinter_pack_bf16x2(a, b);"]);
        assert!(d.contains("sinter_pack_bf16x2(float lo") && !d.contains("sinter_f32_to_bf16(float f)"), "{d}");
    }

    /// The software path of `sinter_f32_to_bf16` (below sm_80), line for line.
    fn sw_f32_to_bf16(f: f32) -> u16 {
        let u = f.to_bits();
        if (u & 0x7fff_ffff) > 0x7f80_0000 { 0x7fff } else { (u.wrapping_add(0x7fff + ((u >> 16) & 1)) >> 16) as u16 }
    }

    /// The software path of `sinter_f64_to_bf16` (below sm_90), line for line.
    fn sw_f64_to_bf16(d: f64) -> u16 {
        let f = d as f32; // __double2float_rn
        let back = f as f64;
        let mut u = f.to_bits();
        if (d > 0.0 && back > d) || (d < 0.0 && back < d) {
            u -= 1;
        }
        if back != d && (u << 1) <= 0xff00_0000 {
            u |= 1;
        }
        sw_f32_to_bf16(f32::from_bits(u))
    }

    #[test]
    fn software_bf16_rounding_is_the_references() {
        let same = |got: u16, want: half::bf16, what: &dyn Fn() -> String| {
            let g = half::bf16::from_bits(got);
            assert!(
                g.to_bits() == want.to_bits() || (g.is_nan() && want.is_nan()),
                "{}: {got:#06x} against {want:?}",
                what()
            );
        };
        // Every 9973rd f32 bit pattern, and the neighbourhoods of ties, the largest finite values and
        // the infinities.
        let mut bits: Vec<u32> = (0..=u32::MAX).step_by(9973).collect();
        for b in [0x3f80_8000u32, 0x3f81_8000, 0x7f7f_8000, 0x7f7f_ffff, 0x7f80_0000, 0x0000_8000, 0x8000_8000] {
            bits.extend((b.saturating_sub(2)..=b.saturating_add(2)).chain([b | 0x8000_0000]));
        }
        for b in bits {
            let f = f32::from_bits(b);
            same(sw_f32_to_bf16(f), half::bf16::from_f32(f), &|| format!("f32 {f:e}"));
            let d = f as f64 * (1.0 + 2f64.powi(-30)); // bits past an f32's, where a second rounding would err
            for d in [f as f64, d, -d] {
                same(sw_f64_to_bf16(d), sinter_core::scalar::bf16_from_f64(d), &|| format!("f64 {d:e}"));
            }
        }
    }

    #[test]
    fn no_header_names_remain() {
        for c in &CONVS {
            for banned in ["__half", "__nv_bfloat", "__float2half", "__float2bfloat"] {
                assert!(!c.src.contains(banned), "{} uses {banned}", c.needed_by[0]);
            }
        }
    }
}
