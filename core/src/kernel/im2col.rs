//! The implicit im2col operand of a matmul ([`MatOperand::im2col`]): a convolution's input read as
//! the `k x n` matrix of its window taps where the operand is loaded, instead of an im2col buffer
//! written by a gather kernel first (implicit GEMM).
//!
//! For group `g` (the matmul's batch), reduction index `k = (c, ky, kx)` (row-major over
//! `channels x kh x kw`) and column `n = (img, oy, ox)` (row-major over `images x oh x ow`):
//!
//! ```text
//! iy = oy * sh + ky * dh - pad_top        ix = ox * sw + kx * dw - pad_left
//! B[g, k, n] = 0 <= iy < H && 0 <= ix < W
//!     ? x[offset + g * s_batch + img * s_img + c * s_chan + iy * s_y + ix * s_x]
//!     : 0
//! ```
//!
//! Invariants (checked by [`Im2col::check`], called by [`super::interp::validate`]): only the B
//! operand has this form, its `s_row` and `s_col` are 0; every extent, stride and dilation is at
//! least 1; `k = channels * kh * kw` and `n` is a whole number of images; every tap inside the
//! image lies inside the argument; the padded coordinates fit in 32-bit signed integers (renderers
//! compute `iy`, `ix` in `int`).

use super::MatOperand;
use serde::{Deserialize, Serialize};

/// The window geometry and input strides of an implicit im2col operand (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Im2col {
    /// Input channels per group (`k = channels * kh * kw`).
    pub channels: usize,
    /// Input extent (H, W).
    pub in_hw: [usize; 2],
    /// Window extent (kh, kw).
    pub kernel: [usize; 2],
    /// Window stride (sh, sw).
    pub stride: [usize; 2],
    /// Padding before the image (top, left); the bottom and right padding follow from `out_hw`.
    pub pad: [usize; 2],
    /// Window dilation (dh, dw).
    pub dilation: [usize; 2],
    /// Output extent (oh, ow): `n = images * oh * ow`.
    pub out_hw: [usize; 2],
    /// Stride of the image index.
    pub s_img: usize,
    /// Stride of the channel index.
    pub s_chan: usize,
    /// Stride of the input row.
    pub s_y: usize,
    /// Stride of the input column.
    pub s_x: usize,
}

impl Im2col {
    /// The reduction extent, `channels * kh * kw`.
    pub fn k(&self) -> usize {
        self.channels * self.kernel[0] * self.kernel[1]
    }

    /// Output pixels per image, `oh * ow`.
    pub fn pixels(&self) -> usize {
        self.out_hw[0] * self.out_hw[1]
    }

    /// The padded coordinates `(iy, ix)` of tap `k` for column `n` (may be negative or past the
    /// image: padding).
    pub fn coords(&self, k: usize, n: usize) -> (i64, i64) {
        let taps = self.kernel[0] * self.kernel[1];
        let r = k % taps;
        let (ky, kx) = (r / self.kernel[1], r % self.kernel[1]);
        let p = n % self.pixels();
        let (oy, ox) = (p / self.out_hw[1], p % self.out_hw[1]);
        let iy = (oy * self.stride[0] + ky * self.dilation[0]) as i64 - self.pad[0] as i64;
        let ix = (ox * self.stride[1] + kx * self.dilation[1]) as i64 - self.pad[1] as i64;
        (iy, ix)
    }

    /// The element offset of tap `k` for column `n` relative to the operand's base for its batch
    /// (`offset + batch * s_batch`); `None` where the tap falls into the padding (the value is 0).
    pub fn tap(&self, k: usize, n: usize) -> Option<usize> {
        let (iy, ix) = self.coords(k, n);
        if iy < 0 || ix < 0 || iy as usize >= self.in_hw[0] || ix as usize >= self.in_hw[1] {
            return None;
        }
        let c = k / (self.kernel[0] * self.kernel[1]);
        let img = n / self.pixels();
        Some(img * self.s_img + c * self.s_chan + iy as usize * self.s_y + ix as usize * self.s_x)
    }

    /// Checks the invariants (module docs) for operand `o` of a `batch x k x n` product reading an
    /// argument of `numel` elements.
    pub fn check(&self, o: &MatOperand, batch: usize, k: usize, n: usize, numel: usize) -> Result<(), String> {
        let dims = [self.channels, self.in_hw[0], self.in_hw[1], self.kernel[0], self.kernel[1]];
        let steps =
            [self.stride[0], self.stride[1], self.dilation[0], self.dilation[1], self.out_hw[0], self.out_hw[1]];
        if dims.iter().chain(&steps).any(|&d| d == 0) {
            return Err(format!("im2col operand has a zero extent, stride or dilation: {self:?}"));
        }
        if o.s_row != 0 || o.s_col != 0 {
            return Err("im2col operand must have zero row and column strides".into());
        }
        if self.k() != k {
            return Err(format!("im2col operand has {} taps per column, the product k = {k}", self.k()));
        }
        if !n.is_multiple_of(self.pixels()) {
            return Err(format!("im2col operand: n = {n} is not a whole number of {}-pixel images", self.pixels()));
        }
        let limit = i32::MAX as usize;
        let reach = |o: usize, s: usize, kk: usize, d: usize, p: usize| {
            (o - 1)
                .checked_mul(s)
                .and_then(|a| (kk - 1).checked_mul(d).and_then(|b| a.checked_add(b)))
                .map(|v| v.max(p))
        };
        let fits = [
            reach(self.out_hw[0], self.stride[0], self.kernel[0], self.dilation[0], self.pad[0]),
            reach(self.out_hw[1], self.stride[1], self.kernel[1], self.dilation[1], self.pad[1]),
        ];
        if fits.iter().any(|r| r.is_none_or(|v| v > limit)) || self.in_hw.iter().any(|&d| d > limit) {
            return Err("im2col operand coordinates exceed 32-bit signed integers".into());
        }
        if batch == 0 || k == 0 || n == 0 {
            return Ok(());
        }
        let imgs = n / self.pixels();
        let hi = [
            (batch - 1, o.s_batch),
            (imgs - 1, self.s_img),
            (self.channels - 1, self.s_chan),
            (self.in_hw[0] - 1, self.s_y),
            (self.in_hw[1] - 1, self.s_x),
        ]
        .iter()
        .try_fold(o.offset, |acc, &(i, s)| i.checked_mul(s).and_then(|p| acc.checked_add(p)));
        match hi {
            Some(hi) if hi < numel => Ok(()),
            _ => Err(format!("im2col operand reads past its {numel} elements")),
        }
    }
}

impl MatOperand {
    /// The element index of (batch, r, c) of this operand, `None` where it is an im2col tap in the
    /// padding (the value is 0). Not checked against the argument: see [`super::interp::validate`].
    pub fn at(&self, batch: usize, r: usize, c: usize) -> Option<usize> {
        let base = self.offset + batch * self.s_batch;
        match &self.im2col {
            None => Some(base + r * self.s_row + c * self.s_col),
            Some(w) => w.tap(r, c).map(|t| base + t),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn geo() -> Im2col {
        // 2 channels of 5x4, a 3x2 window, stride (2, 1), padding (1, 0), dilation (1, 2): oh = 3,
        // ow = 2 with bottom padding 1 (as a convolution of 5 + 1 + 1 rows computes).
        Im2col {
            channels: 2,
            in_hw: [5, 4],
            kernel: [3, 2],
            stride: [2, 1],
            pad: [1, 0],
            dilation: [1, 2],
            out_hw: [3, 2],
            s_img: 40,
            s_chan: 20,
            s_y: 4,
            s_x: 1,
        }
    }

    fn op(w: Im2col) -> MatOperand {
        MatOperand { arg: 0, offset: 0, s_batch: 0, s_row: 0, s_col: 0, im2col: Some(Box::new(w)) }
    }

    #[test]
    fn taps_follow_the_window_and_mask_the_padding() {
        let w = geo();
        assert_eq!(w.k(), 12);
        // k = (c 1, ky 0, kx 1), n = (img 1, oy 0, ox 1): iy = -1 (padding).
        assert_eq!(w.tap(2 * 3 + 1, 6 + 1), None);
        // k = (c 1, ky 1, kx 1), n = (img 1, oy 2, ox 1): iy = 4, ix = 1 + 2 = 3.
        let k = 6 + 2 + 1;
        let n = 6 + 2 * 2 + 1;
        assert_eq!(w.coords(k, n), (4, 3));
        assert_eq!(w.tap(k, n), Some(40 + 20 + 4 * 4 + 3));
        // ky 2 at oy 2: iy = 5, past the image (bottom padding).
        assert_eq!(w.tap(4, 4), None);
        let o = MatOperand { offset: 3, s_batch: 100, ..op(w) };
        assert_eq!(o.at(1, k, n), Some(103 + 40 + 20 + 19));
    }

    #[test]
    fn check_names_each_broken_invariant() {
        let w = geo();
        assert_eq!(w.check(&op(w.clone()), 1, 12, 12, 80), Ok(()));
        assert!(w.check(&op(w.clone()), 1, 12, 12, 79).unwrap_err().contains("reads past"));
        assert!(w.check(&op(w.clone()), 1, 11, 12, 80).unwrap_err().contains("taps per column"));
        assert!(w.check(&op(w.clone()), 1, 12, 13, 80).unwrap_err().contains("whole number"));
        let strided = MatOperand { s_col: 1, ..op(w.clone()) };
        assert!(w.check(&strided, 1, 12, 12, 80).unwrap_err().contains("zero row and column"));
        let zero = Im2col { dilation: [0, 1], ..w.clone() };
        assert!(zero.check(&op(zero.clone()), 1, 12, 12, 80).unwrap_err().contains("zero extent"));
        let huge = Im2col { stride: [usize::MAX / 2, 1], ..w };
        assert!(huge.check(&op(huge.clone()), 1, 12, 12, 80).unwrap_err().contains("32-bit"));
    }
}
