//! `sin` and `cos` of `f32` in PTX: the CUDA C++ helpers' fast path ([`super::super::trig`])
//! instruction for instruction, inline at each use, and [`super::trig_slow`]'s Payne–Hanek
//! reduction out of line for arguments past `FAST_LIMIT`, infinities and NaN.
//!
//! Every operation carries `.rn` (no contraction into fused multiply-adds beyond the explicit
//! `fma.rn`), so the kernel computes exactly what `trig::host` computes on the host, whose error
//! the tests there bound at 2 ulp against `f64`. A constant factor stands second in each product
//! (`fma.rn.f32 d, z, C, ...`): the same product, with the register first.

use super::super::trig::{COS, FAST_LIMIT, PIO2, SIN, TWO_OVER_PI, U_COS, U_SIN};
use super::{Asm, Class, f32_lit, trig_slow};

/// 1.5 * 2^23: adding it rounds a float of magnitude under 2^22 to an integer in the low bits.
const MAGIC: f32 = 12_582_912.0;

/// `sin(x)` (`offset` 0) or `cos(x)` (1) of the `.f32` register `x`; returns the result's register.
pub(crate) fn full(asm: &mut Asm, x: &str, offset: u32) -> String {
    let f = |asm: &mut Asm| asm.reg(Class::F32);
    let res = f(asm);
    let (slow, done) = (asm.label(), asm.label());
    asm.comment(format!("{} of {x}: fast path for |x| <= {FAST_LIMIT}", if offset == 1 { "cos" } else { "sin" }));
    let (a, p) = (f(asm), asm.reg(Class::Pred));
    asm.op(format!("abs.f32 {a}, {x}"));
    // `fabsf(x) <= limit` is false for NaN: greater-or-unordered takes the slow path.
    asm.op(format!("setp.gtu.f32 {p}, {a}, {}", f32_lit(FAST_LIMIT)));
    asm.op(format!("@{p} bra {slow}"));
    let (t, j, nj) = (f(asm), f(asm), f(asm));
    asm.op(format!("fma.rn.f32 {t}, {x}, {}, {}", f32_lit(TWO_OVER_PI), f32_lit(MAGIC)));
    asm.op(format!("sub.rn.f32 {j}, {t}, {}", f32_lit(MAGIC)));
    asm.op(format!("neg.f32 {nj}, {j}"));
    let (r0, r1, r2, r) = (f(asm), f(asm), f(asm), f(asm));
    asm.op(format!("fma.rn.f32 {r0}, {nj}, {}, {x}", f32_lit(PIO2[0])));
    asm.op(format!("fma.rn.f32 {r1}, {nj}, {}, {r0}", f32_lit(PIO2[1])));
    asm.op(format!("fma.rn.f32 {r2}, {nj}, {}, {r1}", f32_lit(PIO2[2])));
    // j == 0 keeps x itself (sin(-0) = -0: -0 * the negative last part + -0 would be +0).
    let pz = asm.reg(Class::Pred);
    asm.op(format!("setp.eq.f32 {pz}, {j}, 0f00000000"));
    asm.op(format!("selp.f32 {r}, {x}, {r2}, {pz}"));
    let (q, q0) = (asm.reg(Class::B32), asm.reg(Class::B32));
    asm.op(format!("mov.b32 {q0}, {t}"));
    asm.op(format!("add.s32 {q}, {q0}, {offset}"));
    let v = polynomials(asm, &r, &q);
    asm.op(format!("mov.f32 {res}, {v}"));
    asm.op(format!("bra.uni {done}"));
    asm.place(&slow);
    asm.trig_slow = true;
    asm.raw(format!(
        "\t{{\n\t.param .f32 sx;\n\t.param .u32 so;\n\t.param .f32 sr;\n\tst.param.f32 [sx], {x};\n\tst.param.u32 [so], {offset};\n\tcall.uni (sr), {}, (sx, so);\n\tld.param.f32 {res}, [sr];\n\t}}",
        trig_slow::FUNC
    ));
    asm.place(&done);
    res
}

/// The polynomials of the fast path on the reduced `r` for quadrant register `q` (offset added).
fn polynomials(asm: &mut Asm, r: &str, q: &str) -> String {
    let f = |asm: &mut Asm| asm.reg(Class::F32);
    let z = f(asm);
    asm.op(format!("mul.rn.f32 {z}, {r}, {r}"));
    // s = copysign(fma(fma(fma(S2, z, S1), z, S0), z * r, r), r)
    let (s1, s2, zr, s3, s) = (f(asm), f(asm), f(asm), f(asm), f(asm));
    asm.op(format!("fma.rn.f32 {s1}, {z}, {}, {}", f32_lit(SIN[2]), f32_lit(SIN[1])));
    asm.op(format!("fma.rn.f32 {s2}, {s1}, {z}, {}", f32_lit(SIN[0])));
    asm.op(format!("mul.rn.f32 {zr}, {z}, {r}"));
    asm.op(format!("fma.rn.f32 {s3}, {s2}, {zr}, {r}"));
    asm.op(format!("copysign.f32 {s}, {r}, {s3}"));
    // c = fma(fma(fma(C2, z, C1), z, C0), z * z, fma(-0.5, z, 1))
    let (c1, c2, zz, h, c) = (f(asm), f(asm), f(asm), f(asm), f(asm));
    asm.op(format!("fma.rn.f32 {c1}, {z}, {}, {}", f32_lit(COS[2]), f32_lit(COS[1])));
    asm.op(format!("fma.rn.f32 {c2}, {c1}, {z}, {}", f32_lit(COS[0])));
    asm.op(format!("mul.rn.f32 {zz}, {z}, {z}"));
    asm.op(format!("fma.rn.f32 {h}, {z}, {}, {}", f32_lit(-0.5), f32_lit(1.0)));
    asm.op(format!("fma.rn.f32 {c}, {c2}, {zz}, {h}"));
    // (q & 1) ? c : s, negated when q & 2.
    let (b1, b2) = (asm.reg(Class::B32), asm.reg(Class::B32));
    let (p1, p2) = (asm.reg(Class::Pred), asm.reg(Class::Pred));
    let (v, nv, out) = (f(asm), f(asm), f(asm));
    asm.op(format!("and.b32 {b1}, {q}, 1"));
    asm.op(format!("setp.ne.u32 {p1}, {b1}, 0"));
    asm.op(format!("selp.f32 {v}, {c}, {s}, {p1}"));
    asm.op(format!("and.b32 {b2}, {q}, 2"));
    asm.op(format!("setp.ne.u32 {p2}, {b2}, 0"));
    asm.op(format!("neg.f32 {nv}, {v}"));
    asm.op(format!("selp.f32 {out}, {nv}, {v}, {p2}"));
    out
}

/// `sin(x)` or `cos(x)` (`cos`) of an argument the renderer proved within [-1, 1]: the
/// unit-interval polynomial alone (as `sinter_sinf_unit` / `sinter_cosf_unit`).
pub(crate) fn unit(asm: &mut Asm, x: &str, cos: bool) -> String {
    let f = |asm: &mut Asm| asm.reg(Class::F32);
    let z = f(asm);
    asm.op(format!("mul.rn.f32 {z}, {x}, {x}"));
    if cos {
        // fma(fma(fma(fma(fma(C4, z, C3), z, C2), z, C1), z, C0), z, 1)
        let mut acc = f(asm);
        asm.op(format!("fma.rn.f32 {acc}, {z}, {}, {}", f32_lit(U_COS[4]), f32_lit(U_COS[3])));
        for c in [U_COS[2], U_COS[1], U_COS[0]] {
            let n = f(asm);
            asm.op(format!("fma.rn.f32 {n}, {acc}, {z}, {}", f32_lit(c)));
            acc = n;
        }
        let out = f(asm);
        asm.op(format!("fma.rn.f32 {out}, {acc}, {z}, {}", f32_lit(1.0)));
        out
    } else {
        // copysign(fma(fma(fma(fma(S3, z, S2), z, S1), z, S0), x * z, x), x)
        let mut acc = f(asm);
        asm.op(format!("fma.rn.f32 {acc}, {z}, {}, {}", f32_lit(U_SIN[3]), f32_lit(U_SIN[2])));
        for c in [U_SIN[1], U_SIN[0]] {
            let n = f(asm);
            asm.op(format!("fma.rn.f32 {n}, {acc}, {z}, {}", f32_lit(c)));
            acc = n;
        }
        let (xz, s, out) = (f(asm), f(asm), f(asm));
        asm.op(format!("mul.rn.f32 {xz}, {x}, {z}"));
        asm.op(format!("fma.rn.f32 {s}, {acc}, {xz}, {x}"));
        asm.op(format!("copysign.f32 {out}, {x}, {s}"));
        out
    }
}
