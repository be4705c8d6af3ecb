//! The two 8-bit float formats: encoding, decoding and rounding. [`crate::scalar::cast`] and
//! [`crate::scalar::round_to`] call these; host storage ([`crate::TensorData::F8E4M3`],
//! [`crate::TensorData::F8E5M2`]) holds the codes as bytes.
//!
//! # Formats
//!
//! * **e4m3fn** (`DType::F8E4M3`; torch `float8_e4m3fn`, ONNX `FLOAT8E4M3FN` = 17): sign, 4
//!   exponent bits (bias 7), 3 mantissa bits. No infinities: `S.1111.111` is NaN (one NaN per
//!   sign), so the largest finite value is `1.75 * 2^8 = 448`; the smallest subnormal is `2^-9`.
//! * **e5m2** (`DType::F8E5M2`; torch `float8_e5m2`, ONNX `FLOAT8E5M2` = 19): IEEE-like: sign, 5
//!   exponent bits (bias 15), 2 mantissa bits, `S.11111.00` is infinity, `S.11111.xx` NaN; the
//!   largest finite value is `1.75 * 2^15 = 57344`; the smallest subnormal `2^-16`.
//!
//! # Rounding and overflow (the IR's cast)
//!
//! A conversion to fp8 rounds the exact value to nearest, ties to even (subnormals included), and
//! keeps the sign of zero and of NaN (NaN becomes `S.1111111`, torch's NaN code in both formats).
//! A value whose rounded magnitude exceeds the largest finite
//! value **overflows**: NaN for e4m3fn (which has no infinity), ±infinity for e5m2; infinities
//! become NaN (e4m3fn) or stay infinite (e5m2). This is what torch's `tensor.to(float8_*)` does
//! (c10's `fp8e4m3fn_from_fp32_value`: everything from 480 up is NaN and 464 < |x| < 480 rounds to
//! the NaN code; `fp8e5m2_from_fp32_value` rounds as IEEE binary16 does, overflowing to infinity),
//! and what ONNX `Cast` does with `saturate=0`.
//!
//! ONNX `Cast`'s default `saturate=1` instead clamps out-of-range values *and infinities* to
//! ±max (NaN stays NaN). The IR has one cast (this one); the ONNX importer expresses
//! `saturate=1` as a clamp to `[-max, max]` before it ([`max_finite`]), which gives the same
//! result for every input: clamping first maps every value above max, and every infinity, to
//! max, which is representable; every other value rounds identically. Hardware conversions
//! (`cvt.rn.satfinite.e4m3x2.f32`) saturate, so renderers that use them must fix overflow up to
//! the rule here; the CUDA prelude converts in software, bit for bit as this module.

use crate::dtype::DType;

/// One of the two fp8 formats, as the parameters the conversions need.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Format {
    /// Mantissa (fraction) bits.
    pub mbits: u32,
    /// Exponent bias.
    pub bias: i32,
    /// True when the top exponent encodes infinity and NaN (e5m2); false for e4m3fn, where only
    /// the all-ones code of each sign is NaN.
    pub ieee: bool,
}

/// e4m3fn.
pub const E4M3: Format = Format { mbits: 3, bias: 7, ieee: false };
/// e5m2.
pub const E5M2: Format = Format { mbits: 2, bias: 15, ieee: true };

impl Format {
    /// The format of an fp8 dtype, `None` for every other dtype.
    pub fn of(dtype: DType) -> Option<Format> {
        match dtype {
            DType::F8E4M3 => Some(E4M3),
            DType::F8E5M2 => Some(E5M2),
            _ => None,
        }
    }

    /// Exponent bits.
    fn ebits(self) -> u32 {
        7 - self.mbits
    }

    /// The smallest normal exponent (`1 - bias`).
    fn emin(self) -> i32 {
        1 - self.bias
    }

    /// The largest finite value: 448 (e4m3fn), 57344 (e5m2).
    pub fn max(self) -> f64 {
        let emax = if self.ieee { (1 << self.ebits()) - 2 - self.bias } else { (1 << self.ebits()) - 1 - self.bias };
        let frac = if self.ieee { (1u32 << self.mbits) - 1 } else { (1u32 << self.mbits) - 2 };
        (1.0 + frac as f64 / (1u32 << self.mbits) as f64) * 2f64.powi(emax)
    }

    /// The NaN code with the given sign bit: all ones below the sign in both formats (what
    /// torch's conversions produce).
    fn nan(self, sign: u8) -> u8 {
        sign | 0x7F
    }

    /// Decodes a code to its exact value (NaN for NaN codes, ±infinity for e5m2's).
    pub fn decode(self, code: u8) -> f64 {
        let neg = code & 0x80 != 0;
        let e = ((code >> self.mbits) & ((1 << self.ebits()) - 1)) as i32;
        let m = (code & ((1 << self.mbits) - 1)) as u32;
        let top = (1 << self.ebits()) - 1;
        let v = if self.ieee && e == top {
            if m == 0 { f64::INFINITY } else { f64::NAN }
        } else if !self.ieee && e == top && m == (1 << self.mbits) - 1 {
            f64::NAN
        } else if e == 0 {
            m as f64 * 2f64.powi(self.emin() - self.mbits as i32)
        } else {
            (1.0 + m as f64 / (1u32 << self.mbits) as f64) * 2f64.powi(e - self.bias)
        };
        if neg { -v } else { v }
    }

    /// Encodes `x` rounded to nearest, ties to even, overflowing as the module docs say.
    pub fn encode(self, x: f64) -> u8 {
        let sign = if x.is_sign_negative() { 0x80u8 } else { 0 };
        if x.is_nan() {
            return self.nan(sign);
        }
        let a = x.abs();
        if a.is_infinite() {
            return if self.ieee { sign | 0x7C } else { self.nan(sign) };
        }
        if a == 0.0 {
            return sign;
        }
        // The quantum at a's binade (normal or subnormal): a / q is exact (q is a power of two)
        // and rounding it to an integer rounds a to nearest-even on the fp8 grid.
        let e = (((a.to_bits() >> 52) & 0x7FF) as i32 - 1023).max(self.emin());
        let q = 2f64.powi(e - self.mbits as i32);
        let r = (a / q).round_ties_even() * q;
        if r > self.max() {
            return if self.ieee { sign | 0x7C } else { self.nan(sign) };
        }
        if r == 0.0 {
            return sign;
        }
        let re = ((r.to_bits() >> 52) & 0x7FF) as i32 - 1023;
        let code = if re < self.emin() {
            // Subnormal: the exponent field is 0, the mantissa counts quanta of the smallest.
            (r / 2f64.powi(self.emin() - self.mbits as i32)) as u32
        } else {
            let m = (r / 2f64.powi(re - self.mbits as i32)) as u32 - (1 << self.mbits);
            (((re + self.bias) as u32) << self.mbits) | m
        };
        sign | code as u8
    }

    /// `x` rounded to this format, as a value.
    pub fn round(self, x: f64) -> f64 {
        self.decode(self.encode(x))
    }
}

/// The largest finite value of an fp8 dtype (`None` for other dtypes): the bound ONNX's
/// `saturate=1` clamps to.
pub fn max_finite(dtype: DType) -> Option<f64> {
    Format::of(dtype).map(Format::max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_round_trips() {
        for f in [E4M3, E5M2] {
            for c in 0..=255u8 {
                let v = f.decode(c);
                let back = f.encode(v);
                if v.is_nan() {
                    assert!(f.decode(back).is_nan(), "{f:?} {c:#04x}");
                    assert_eq!(back & 0x80, c & 0x80, "NaN keeps its sign");
                } else {
                    assert_eq!(back, c, "{f:?} code {c:#04x} = {v}");
                }
                // Through f32 (how kernels hold values) too.
                assert_eq!(f.encode(v as f32 as f64), back);
            }
        }
    }

    #[test]
    fn nan_and_infinity_codes() {
        let nans = |f: Format| (0..=255u8).filter(|&c| f.decode(c).is_nan()).collect::<Vec<_>>();
        assert_eq!(nans(E4M3), vec![0x7F, 0xFF]);
        assert_eq!(nans(E5M2), vec![0x7D, 0x7E, 0x7F, 0xFD, 0xFE, 0xFF]);
        assert_eq!(E5M2.decode(0x7C), f64::INFINITY);
        assert_eq!(E5M2.decode(0xFC), f64::NEG_INFINITY);
        assert!((0..=255u8).all(|c| !E4M3.decode(c).is_infinite()));
        assert_eq!((E4M3.max(), E5M2.max()), (448.0, 57344.0));
        assert_eq!(E4M3.decode(0x7E), 448.0);
        assert_eq!(E5M2.decode(0x7B), 57344.0);
        assert_eq!(E4M3.decode(0x01), 2f64.powi(-9));
        assert_eq!(E5M2.decode(0x01), 2f64.powi(-16));
        assert_eq!(E4M3.decode(0x08), 2f64.powi(-6));
    }

    #[test]
    fn ties_round_to_even() {
        // 1 + 1/16 lies halfway between 1 (mantissa 000) and 1.125 (001): to 1.
        assert_eq!(E4M3.round(1.0625), 1.0);
        // 1.125 + 1/16 lies between 001 and 010: to 1.25.
        assert_eq!(E4M3.round(1.1875), 1.25);
        // Just above a tie rounds up.
        assert_eq!(E4M3.round(1.0625 + 1e-9), 1.125);
        // Subnormal ties: 0.5 and 1.5 quanta of 2^-9.
        let q = 2f64.powi(-9);
        assert_eq!(E4M3.round(0.5 * q), 0.0);
        assert_eq!(E4M3.round(1.5 * q), 2.0 * q);
        assert_eq!(E4M3.round(0.5 * q + 1e-12), q);
        // Largest subnormal + half a quantum rounds to the smallest normal.
        assert_eq!(E4M3.round(7.5 * q), 8.0 * q);
        // e5m2: 1.125 is halfway between 1 and 1.25: to 1; 1.375 between 1.25 and 1.5: to 1.5.
        assert_eq!(E5M2.round(1.125), 1.0);
        assert_eq!(E5M2.round(1.375), 1.5);
        assert_eq!(E5M2.round(-1.375), -1.5);
        assert!(E4M3.round(-0.0).is_sign_negative() && E4M3.round(-1e-30).is_sign_negative());
    }

    #[test]
    fn overflow_follows_torch() {
        // e4m3fn: 464 is the tie between 448 (110, even) and "480" (111, the NaN code).
        assert_eq!(E4M3.round(464.0), 448.0);
        assert!(E4M3.round(464.1).is_nan());
        assert!(E4M3.round(480.0).is_nan());
        assert_eq!(E4M3.encode(-1e6), 0xFF);
        assert_eq!(E4M3.encode(f64::INFINITY), 0x7F);
        assert_eq!(E4M3.encode(f64::NAN), 0x7F);
        assert_eq!((E5M2.encode(f64::NAN), E5M2.encode(-f64::NAN)), (0x7F, 0xFF));
        // e5m2: 61440 is the tie between 57344 (11, odd) and 65536 (infinity): to infinity.
        assert_eq!(E5M2.round(61439.0), 57344.0);
        assert_eq!(E5M2.round(61440.0), f64::INFINITY);
        assert_eq!(E5M2.round(-1e9), f64::NEG_INFINITY);
        assert_eq!(max_finite(DType::F8E4M3), Some(448.0));
        assert_eq!(max_finite(DType::F32), None);
    }

    #[test]
    fn dtype_text_storage_and_the_cpu_reference() {
        use crate::tensor::{HostTensor, TensorData};
        assert_eq!(DType::from_name("f8e4m3"), Some(DType::F8E4M3));
        assert_eq!(DType::from_name("f8e5m2"), Some(DType::F8E5M2));
        assert_eq!((DType::F8E4M3.size_bytes(), DType::F8E4M3.is_float(), DType::F32.is_fp8()), (1, true, false));
        // Host storage holds codes; bytes round-trip; values decode exactly.
        let t = HostTensor::from_f64(DType::F8E4M3, vec![4], &[1.0, -0.5, 500.0, 1.0625]);
        assert_eq!(t.data, TensorData::F8E4M3(vec![0x38, 0xB0, 0x7F, 0x38]));
        assert_eq!(HostTensor::from_le_bytes(DType::F8E4M3, vec![4], &t.to_le_bytes()).unwrap(), t);
        // The CPU reference rounds a cast node through this module, and the text form names it.
        let g = crate::trace::Graph::new();
        let x = g.input("x", DType::F32, [3]);
        g.output(&x.cast(DType::F8E5M2).cast(DType::F32));
        let ir = g.build().unwrap();
        assert!(crate::text::print(&ir).contains("f8e5m2[3] = cast(%0, to=f8e5m2)"), "{}", crate::text::print(&ir));
        let y = crate::cpu::run(&ir, &[HostTensor::f32([3], vec![1.125, 1.375, 1e6]).unwrap()]).unwrap();
        assert_eq!(y[0].to_f64_vec(), vec![1.0, 1.5, f64::INFINITY]);
    }

    #[test]
    fn e5m2_agrees_with_f16_rounding() {
        // e5m2 is binary16 with 8 fewer mantissa bits: rounding an f16 value to e5m2 is exactly
        // rounding its bits to nearest-even at bit 8 (what torch's conversion does), for every
        // finite f16.
        for bits in 0..=u16::MAX {
            let h = half::f16::from_bits(bits);
            if !h.is_finite() {
                continue;
            }
            let lsb = (bits >> 8) & 1;
            let rounded = (bits as u32 + 0x7F + lsb as u32) >> 8;
            let want = if rounded & 0x7F >= 0x7C { (rounded & 0x80) | 0x7C } else { rounded };
            assert_eq!(E5M2.encode(h.to_f64()) as u32, want, "f16 bits {bits:#06x}");
        }
    }
}
