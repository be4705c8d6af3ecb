//! Tensor maps encoded by the driver (`cuTensorMapEncodeTiled`) for kernels that copy with the
//! bulk tensor copy engine; the description is [`crate::tma::TensorMapDesc`], plain data the
//! renderer produces. A map holds its tensor's address: [`super::Launch`] encodes one when the
//! launch is built and again when the argument it is built on changes.

use super::check;
use crate::tma::{TensorMapDesc, TmaElem, TmaSwizzle};
use cudarc::driver::sys;
use sinter_core::backend::BackendError;

/// An encoded map (the driver's 128-byte `CUtensorMap`, aligned as the kernel parameter needs).
pub type RawTensorMap = sys::CUtensorMap;

/// Encodes `desc` for a tensor at device address `addr` (`what` labels errors): the driver's
/// rules are checked first ([`TensorMapDesc::validate`], the address 16-byte aligned), so a
/// refusal names the rule.
pub fn encode_tiled(addr: u64, desc: &TensorMapDesc, what: &str) -> Result<RawTensorMap, BackendError> {
    let bad = |m: String| BackendError::Device(format!("{what}: tensor map: {m}"));
    desc.validate().map_err(bad)?;
    if !addr.is_multiple_of(16) {
        return Err(bad(format!("address {addr:#x} is not 16-byte aligned")));
    }
    use sys::{
        CUtensorMapDataType as T, CUtensorMapFloatOOBfill as Fill, CUtensorMapInterleave as I,
        CUtensorMapL2promotion as L2, CUtensorMapSwizzle as S,
    };
    let dtype = match desc.elem {
        TmaElem::Bf16 => T::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
        TmaElem::F16 => T::CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
    };
    let swizzle = match desc.swizzle {
        TmaSwizzle::None => S::CU_TENSOR_MAP_SWIZZLE_NONE,
        TmaSwizzle::B128 => S::CU_TENSOR_MAP_SWIZZLE_128B,
    };
    let (rank, dims, strides, boxes, elem_strides) = desc.encode_args();
    let mut map = RawTensorMap { opaque: [0; 16] };
    check(
        // SAFETY: every array holds the 5 (strides 4) entries the driver may read for `rank`;
        // `map` is a 128-byte, 128-aligned output; the driver only records the address.
        unsafe {
            sys::cuTensorMapEncodeTiled(
                &mut map,
                dtype,
                rank,
                addr as *mut std::ffi::c_void,
                dims.as_ptr(),
                strides.as_ptr(),
                boxes.as_ptr(),
                elem_strides.as_ptr(),
                I::CU_TENSOR_MAP_INTERLEAVE_NONE,
                swizzle,
                L2::CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                Fill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
            )
        },
        "cuTensorMapEncodeTiled",
        what,
    )?;
    Ok(map)
}
