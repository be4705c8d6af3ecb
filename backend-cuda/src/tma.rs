//! Tensor maps for Hopper's bulk tensor copies (TMA): what a rendered kernel asks for and what
//! the host hands `cuTensorMapEncodeTiled`, as plain data (no driver here, so it is testable
//! without a GPU).
//!
//! A kernel that copies with `cp.async.bulk.tensor` takes each tensor map by value, as a
//! `const __grid_constant__ sinter_tmap tm<i>` parameter after its pointer parameters, in the
//! order of [`crate::render::Rendered::tensor_maps`]. Each [`TensorMapParam`] names the kernel
//! argument whose device address (plus [`TensorMapParam::offset_bytes`]) is the tensor's origin;
//! the device layer ([`crate::device::Launch::bind_tensor_maps`]) encodes the map once when the
//! launch is built and again whenever that argument's address changes (a buffer moved), since a
//! map holds the address.
//!
//! Rules ([`TensorMapDesc::validate`], the driver's documented requirements for a tiled map):
//! 1 to 5 dimensions, innermost first, each extent in `1..=2^32`; byte strides of the outer
//! dimensions multiples of 16 below `2^40`; box extents in `1..=256`, the innermost
//! `box[0] * elem` a multiple of 16 bytes and, with a swizzle, at most the swizzle span; each box
//! extent at most the tensor's (not documented; a larger box is reported to fault); the origin
//! 16-byte aligned (checked by the device layer, which knows the address).

use serde::{Deserialize, Serialize};

/// The element type of a tensor map.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TmaElem {
    /// bfloat16 (2 bytes).
    Bf16,
    /// IEEE half (2 bytes).
    F16,
}

impl TmaElem {
    /// Bytes per element.
    pub fn bytes(self) -> u64 {
        2
    }

    /// The driver's `CUtensorMapDataType` value.
    pub fn driver_code(self) -> u32 {
        match self {
            TmaElem::F16 => 6,
            TmaElem::Bf16 => 9,
        }
    }
}

/// How a box is laid out in shared memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TmaSwizzle {
    /// Rows stored as they are.
    None,
    /// 128-byte rows with their 16-byte chunks permuted by the row (`chunk ^ row % 8`), the
    /// layout `wgmma` descriptors read with 128-byte swizzle (`sinter_swz128`); the destination
    /// must be 1024-byte aligned.
    B128,
}

impl TmaSwizzle {
    /// The driver's `CUtensorMapSwizzle` value.
    pub fn driver_code(self) -> u32 {
        match self {
            TmaSwizzle::None => 0,
            TmaSwizzle::B128 => 3,
        }
    }

    /// The longest innermost box row in bytes (`None` when unlimited).
    pub fn span(self) -> Option<u64> {
        match self {
            TmaSwizzle::None => None,
            TmaSwizzle::B128 => Some(128),
        }
    }
}

/// A tiled tensor map relative to its origin: extents, strides, the box one copy moves.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TensorMapDesc {
    /// Element type.
    pub elem: TmaElem,
    /// Extents in elements, innermost (contiguous) first. Copies of boxes reaching past them read
    /// zeros (and still count the whole box's bytes on the barrier).
    pub dims: Vec<u64>,
    /// Byte strides of dimensions 1.. (`dims.len() - 1` entries; dimension 0 is contiguous).
    pub strides: Vec<u64>,
    /// The box, in elements, innermost first (`dims.len()` entries).
    pub boxes: Vec<u32>,
    /// Shared-memory layout of the box.
    pub swizzle: TmaSwizzle,
}

impl TensorMapDesc {
    /// Bytes one copy of the box writes to shared memory (and counts on its barrier).
    pub fn box_bytes(&self) -> u64 {
        self.boxes.iter().map(|&b| u64::from(b)).product::<u64>() * self.elem.bytes()
    }

    /// Checks the driver's rules for a tiled map; `Err` names the one broken.
    pub fn validate(&self) -> Result<(), String> {
        let rank = self.dims.len();
        if !(1..=5).contains(&rank) {
            return Err(format!("{rank} dimensions (1 to 5)"));
        }
        if self.strides.len() != rank - 1 || self.boxes.len() != rank {
            return Err(format!(
                "{} strides and {} box extents for {rank} dimensions",
                self.strides.len(),
                self.boxes.len()
            ));
        }
        if let Some(d) = self.dims.iter().find(|&&d| d == 0 || d > 1 << 32) {
            return Err(format!("extent {d} (1 to 2^32)"));
        }
        if let Some(s) = self.strides.iter().find(|&&s| !s.is_multiple_of(16) || s >= 1 << 40) {
            return Err(format!("byte stride {s} (a multiple of 16 below 2^40)"));
        }
        if let Some(b) = self.boxes.iter().find(|&&b| b == 0 || b > 256) {
            return Err(format!("box extent {b} (1 to 256)"));
        }
        // Not in the driver's documentation, but reported by users of the copy engine: a map
        // whose box is larger than its tensor faults when copied.
        if let Some((b, d)) = self.boxes.iter().zip(&self.dims).find(|&(&b, &d)| u64::from(b) > d) {
            return Err(format!("box extent {b} exceeds the tensor's {d}"));
        }
        let row = u64::from(self.boxes[0]) * self.elem.bytes();
        if !row.is_multiple_of(16) {
            return Err(format!("innermost box of {row} bytes (a multiple of 16)"));
        }
        if let Some(span) = self.swizzle.span()
            && row > span
        {
            return Err(format!("innermost box of {row} bytes exceeds the {span}-byte swizzle"));
        }
        Ok(())
    }

    /// The arrays `cuTensorMapEncodeTiled` takes: (rank, extents, byte strides, box, element
    /// strides), each padded to 5 entries with the unused ones 1 (strides 0).
    pub fn encode_args(&self) -> (u32, [u64; 5], [u64; 4], [u32; 5], [u32; 5]) {
        let (mut dims, mut strides, mut boxes) = ([1u64; 5], [0u64; 4], [1u32; 5]);
        dims[..self.dims.len()].copy_from_slice(&self.dims);
        strides[..self.strides.len()].copy_from_slice(&self.strides);
        boxes[..self.boxes.len()].copy_from_slice(&self.boxes);
        (self.dims.len() as u32, dims, strides, boxes, [1u32; 5])
    }
}

/// A tensor map a kernel takes as a parameter: the argument whose address it is built on, and
/// the map relative to that address.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TensorMapParam {
    /// The kernel argument (position in its pointer parameters) the map addresses.
    pub arg: usize,
    /// Bytes from that argument's address to the tensor's origin (a multiple of 16).
    pub offset_bytes: u64,
    /// The map.
    pub desc: TensorMapDesc,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn desc() -> TensorMapDesc {
        TensorMapDesc {
            elem: TmaElem::Bf16,
            dims: vec![72, 300, 2],
            strides: vec![144, 43200],
            boxes: vec![64, 128, 1],
            swizzle: TmaSwizzle::B128,
        }
    }

    #[test]
    fn encode_args_pad_to_five_dimensions() {
        let (rank, dims, strides, boxes, estr) = desc().encode_args();
        assert_eq!(rank, 3);
        assert_eq!(dims, [72, 300, 2, 1, 1]);
        assert_eq!(strides, [144, 43200, 0, 0]);
        assert_eq!(boxes, [64, 128, 1, 1, 1]);
        assert_eq!(estr, [1; 5]);
        assert_eq!(desc().box_bytes(), 64 * 128 * 2);
        assert_eq!(TmaElem::Bf16.driver_code(), 9);
        assert_eq!(TmaSwizzle::B128.driver_code(), 3);
    }

    #[test]
    fn validate_names_each_broken_rule() {
        assert_eq!(desc().validate(), Ok(()));
        let bad = |f: &dyn Fn(&mut TensorMapDesc)| {
            let mut d = desc();
            f(&mut d);
            d.validate().unwrap_err()
        };
        assert!(bad(&|d| d.strides[0] = 146).contains("multiple of 16"));
        assert!(bad(&|d| d.boxes[1] = 257).contains("box extent 257"));
        assert!(
            bad(&|d| {
                d.dims[0] = 200;
                d.boxes[0] = 128;
            })
            .contains("exceeds the 128-byte swizzle")
        );
        assert!(bad(&|d| d.boxes[0] = 4).contains("innermost box of 8 bytes"));
        assert!(bad(&|d| d.dims[2] = 0).contains("extent 0"));
        assert!(bad(&|d| d.dims[1] = 100).contains("box extent 128 exceeds the tensor's 100"));
        assert!(
            bad(&|d| {
                d.strides.pop();
            })
            .contains("1 strides")
        );
        assert!(bad(&|d| d.dims = vec![1; 6]).contains("6 dimensions"));
    }
}
