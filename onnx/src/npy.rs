//! NumPy `.npy` / `.npz` files: enough to write run results and read inputs.
//!
//! `.npy` is version 1.0: the magic, a Python-dict header (`descr`, `fortran_order`, `shape`)
//! padded to a multiple of 64 bytes, then the raw little-endian elements. `.npz` is a zip
//! archive of `.npy` files, written uncompressed ("stored"). NumPy has no bfloat16 and no fp8,
//! so bf16 and fp8 tensors are written as f32 (exactly: every value widens), and `.npy` inputs
//! are never read as them (ml_dtypes' fp8 arrays carry no standard descr).

use sinter_core::{DType, HostTensor};

/// Errors reading `.npy` data.
#[derive(Debug, thiserror::Error)]
pub enum NpyError {
    /// Not an `.npy` file, or one this reader does not handle.
    #[error("npy: {0}")]
    Format(String),
}

fn descr(d: DType) -> &'static str {
    match d {
        DType::F32 | DType::BF16 | DType::F8E4M3 | DType::F8E5M2 => "<f4",
        DType::F16 => "<f2",
        DType::F64 => "<f8",
        DType::I8 => "|i1",
        DType::I16 => "<i2",
        DType::I32 => "<i4",
        DType::I64 => "<i8",
        DType::U8 => "|u1",
        DType::U16 => "<u2",
        DType::U32 => "<u4",
        DType::U64 => "<u8",
        DType::Bool => "|b1",
    }
}

/// Serializes a tensor as `.npy` bytes.
pub fn to_npy(t: &HostTensor) -> Vec<u8> {
    let t = if matches!(t.dtype(), DType::BF16 | DType::F8E4M3 | DType::F8E5M2) {
        HostTensor::from_f64(DType::F32, t.shape.clone(), &t.to_f64_vec())
    } else {
        t.clone()
    };
    let shape = match t.shape.len() {
        0 => "()".to_string(),
        1 => format!("({},)", t.shape[0]),
        _ => format!("({})", t.shape.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", ")),
    };
    let mut header = format!("{{'descr': '{}', 'fortran_order': False, 'shape': {shape}, }}", descr(t.dtype()));
    let unpadded = 10 + header.len() + 1;
    header.push_str(&" ".repeat((64 - unpadded % 64) % 64));
    header.push('\n');
    let mut out = Vec::with_capacity(10 + header.len() + t.size_bytes());
    out.extend_from_slice(b"\x93NUMPY\x01\x00");
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(&t.to_le_bytes());
    out
}

/// Parses `.npy` bytes (C order, little-endian or byte-sized types).
pub fn from_npy(b: &[u8]) -> Result<HostTensor, NpyError> {
    let bad = |m: &str| NpyError::Format(m.to_string());
    if b.len() < 10 || &b[..6] != b"\x93NUMPY" {
        return Err(bad(if b.is_empty() {
            "the data is empty (0 bytes)"
        } else {
            "no NumPy magic (\\x93NUMPY): not .npy data (a TensorProto must be named .pb)"
        }));
    }
    let (hlen, start) = match b[6] {
        1 => (u16::from_le_bytes([b[8], b[9]]) as usize, 10usize),
        2 | 3 if b.len() >= 12 => (u32::from_le_bytes([b[8], b[9], b[10], b[11]]) as usize, 12),
        v => return Err(NpyError::Format(format!("unsupported version {v}"))),
    };
    let end = start.checked_add(hlen).filter(|&e| e <= b.len()).ok_or_else(|| bad("truncated header"))?;
    let h = std::str::from_utf8(&b[start..end]).map_err(|_| bad("header is not UTF-8"))?;
    let field = |k: &str| -> Option<&str> {
        let i = h.find(&format!("'{k}'"))? + k.len() + 2;
        let rest = h[i..].trim_start().strip_prefix(':')?.trim_start();
        Some(rest)
    };
    let d = field("descr").ok_or_else(|| bad("no descr"))?;
    let d = d.strip_prefix('\'').and_then(|s| s.split('\'').next()).ok_or_else(|| bad("bad descr"))?;
    let dtype = DType::ALL
        .into_iter()
        .filter(|&x| !matches!(x, DType::BF16 | DType::F8E4M3 | DType::F8E5M2))
        .find(|&x| descr(x) == d || descr(x).replace('|', "<") == d.replace('|', "<"))
        .ok_or_else(|| NpyError::Format(format!("unsupported descr {d:?}")))?;
    if field("fortran_order").is_some_and(|v| v.starts_with("True")) {
        return Err(bad("Fortran order is not supported"));
    }
    let s = field("shape").ok_or_else(|| bad("no shape"))?;
    let s = s.strip_prefix('(').and_then(|s| s.split(')').next()).ok_or_else(|| bad("bad shape"))?;
    let shape: Vec<usize> = s
        .split(',')
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(|x| x.parse::<usize>().map_err(|_| NpyError::Format(format!("bad extent {x:?}"))))
        .collect::<Result<_, _>>()?;
    let n = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d)).ok_or_else(|| bad("shape overflows"))?;
    let need = n.checked_mul(dtype.size_bytes()).ok_or_else(|| bad("shape overflows"))?;
    if b.len() - end != need {
        return Err(NpyError::Format(format!("{need} data bytes expected, {} present", b.len() - end)));
    }
    HostTensor::from_le_bytes(dtype, shape, &b[end..]).map_err(|e| NpyError::Format(e.to_string()))
}

fn crc32(data: &[u8]) -> u32 {
    let mut c = 0xFFFF_FFFFu32;
    for &b in data {
        c ^= b as u32;
        for _ in 0..8 {
            c = if c & 1 != 0 { (c >> 1) ^ 0xEDB8_8320 } else { c >> 1 };
        }
    }
    !c
}

/// Serializes named tensors as an uncompressed `.npz` archive (`name.npy` entries).
pub fn to_npz(items: &[(String, HostTensor)]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut central = Vec::new();
    for (name, t) in items {
        let data = to_npy(t);
        let fname = format!("{name}.npy");
        let crc = crc32(&data);
        let offset = out.len() as u32;
        let size = data.len() as u32;
        out.extend_from_slice(&0x0403_4b50u32.to_le_bytes());
        out.extend_from_slice(&[20, 0, 0, 0, 0, 0, 0, 0, 0x21, 0]); // version, flags, stored, time
        out.extend_from_slice(&crc.to_le_bytes());
        out.extend_from_slice(&size.to_le_bytes());
        out.extend_from_slice(&size.to_le_bytes());
        out.extend_from_slice(&(fname.len() as u16).to_le_bytes());
        out.extend_from_slice(&0u16.to_le_bytes());
        out.extend_from_slice(fname.as_bytes());
        out.extend_from_slice(&data);
        central.extend_from_slice(&0x0201_4b50u32.to_le_bytes());
        central.extend_from_slice(&[20, 0, 20, 0, 0, 0, 0, 0, 0, 0, 0x21, 0]);
        central.extend_from_slice(&crc.to_le_bytes());
        central.extend_from_slice(&size.to_le_bytes());
        central.extend_from_slice(&size.to_le_bytes());
        central.extend_from_slice(&(fname.len() as u16).to_le_bytes());
        central.extend_from_slice(&[0; 12]); // extra, comment, disk, attrs
        central.extend_from_slice(&offset.to_le_bytes());
        central.extend_from_slice(fname.as_bytes());
    }
    let cd_offset = out.len() as u32;
    let cd_size = central.len() as u32;
    out.extend_from_slice(&central);
    out.extend_from_slice(&0x0605_4b50u32.to_le_bytes());
    out.extend_from_slice(&[0, 0, 0, 0]);
    out.extend_from_slice(&(items.len() as u16).to_le_bytes());
    out.extend_from_slice(&(items.len() as u16).to_le_bytes());
    out.extend_from_slice(&cd_size.to_le_bytes());
    out.extend_from_slice(&cd_offset.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn npy_round_trip() {
        let t = HostTensor::f32([2, 3], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
        let b = to_npy(&t);
        assert_eq!((10 + u16::from_le_bytes([b[8], b[9]]) as usize) % 64, 0);
        assert_eq!(from_npy(&b).unwrap(), t);
        let s = HostTensor::from_i64(DType::I64, vec![], &[7]);
        assert_eq!(from_npy(&to_npy(&s)).unwrap(), s);
        let v = HostTensor::from_i64(DType::Bool, vec![3], &[1, 0, 1]);
        assert_eq!(from_npy(&to_npy(&v)).unwrap(), v);
    }

    #[test]
    fn npy_rejects_garbage() {
        assert!(from_npy(b"hello").is_err());
        let t = HostTensor::f32([2], vec![1.0, 2.0]).unwrap();
        let mut b = to_npy(&t);
        b.pop();
        assert!(from_npy(&b).is_err());
    }

    #[test]
    fn crc_matches_reference() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
    }
}
