//! NumPy `.npy` / `.npz` files, through the `npyz` crate: written run results, read inputs.
//!
//! Any byte order and every NumPy numeric dtype sinter has (bool, integers of 1 to 8 bytes,
//! f16/f32/f64) read; C order only (a Fortran-ordered array is refused with that reason, not
//! transposed). NumPy has no bfloat16 and no fp8, so bf16 and fp8 tensors are written as f32
//! (exactly: every value widens), and inputs are never read as them (ml_dtypes' fp8 arrays
//! carry no standard descr). `.npz` archives are written uncompressed, as `numpy.savez` does.

use std::io::{Cursor, Read, Write};

use npyz::WriterBuilder;
use npyz::zip::{CompressionMethod, write::FileOptions};
use sinter_core::{DType, HostTensor};

/// Errors reading or writing `.npy` / `.npz` data.
#[derive(Debug, thiserror::Error)]
pub enum NpyError {
    /// Not an `.npy` file, or one this reader does not handle.
    #[error("npy: {0}")]
    Format(String),
    /// Not a zip archive of `.npy` files, or a damaged one.
    #[error("npz: {0}")]
    Archive(String),
}

fn format(e: impl std::fmt::Display) -> NpyError {
    NpyError::Format(e.to_string())
}

/// The sinter dtype of a NumPy type string (`<f4`, `|b1`, `>i8`, ...), where sinter has one.
fn dtype_of(ts: &npyz::TypeStr) -> Option<DType> {
    use npyz::TypeChar::{Bool, Float, Int, Uint};
    Some(match (ts.type_char(), ts.size_field()) {
        (Bool, 1) => DType::Bool,
        (Int, 1) => DType::I8,
        (Int, 2) => DType::I16,
        (Int, 4) => DType::I32,
        (Int, 8) => DType::I64,
        (Uint, 1) => DType::U8,
        (Uint, 2) => DType::U16,
        (Uint, 4) => DType::U32,
        (Uint, 8) => DType::U64,
        (Float, 2) => DType::F16,
        (Float, 4) => DType::F32,
        (Float, 8) => DType::F64,
        _ => return None,
    })
}

/// An element type NumPy and sinter share, with its little-endian bytes.
trait Elem: npyz::AutoSerialize + npyz::Deserialize {
    /// Bytes per element.
    const SIZE: usize;
    fn from_le(b: &[u8]) -> Self;
    fn extend_le(self, out: &mut Vec<u8>);
}

macro_rules! elem {
    ($($t:ty),*) => {$(
        impl Elem for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
            fn from_le(b: &[u8]) -> Self {
                <$t>::from_le_bytes(b.try_into().expect("SIZE bytes"))
            }
            fn extend_le(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
        }
    )*};
}
elem!(i8, i16, i32, i64, u8, u16, u32, u64, half::f16, f32, f64);

impl Elem for bool {
    const SIZE: usize = 1;
    fn from_le(b: &[u8]) -> Self {
        b[0] != 0
    }
    fn extend_le(self, out: &mut Vec<u8>) {
        out.push(u8::from(self));
    }
}

/// `$body` with `$t` the [`Elem`] of `$dtype` (bf16 and fp8, which NumPy lacks, widened first).
macro_rules! with_elem {
    ($dtype:expr, |$t:ident| $body:expr) => {
        with_elem!(@table $dtype, $t, $body; Bool bool, I8 i8, I16 i16, I32 i32, I64 i64, U8 u8, U16 u16,
            U32 u32, U64 u64, F16 half::f16, F32 f32, F64 f64)
    };
    (@table $dtype:expr, $t:ident, $body:expr; $($d:ident $ty:ty),*) => {
        match $dtype {
            $(DType::$d => {
                type $t = $ty;
                $body
            })*
            d @ (DType::BF16 | DType::F8E4M3 | DType::F8E5M2) => unreachable!("NumPy has no {d}"),
        }
    };
}

/// The elements of `npy` as `T`, little-endian bytes.
fn le_bytes<T: Elem, R: Read>(npy: npyz::NpyFile<R>) -> Result<Vec<u8>, NpyError> {
    let n = npy.len();
    let v = npy.into_vec::<T>().map_err(|e| NpyError::Format(format!("reading {n} elements: {e}")))?;
    let mut out = Vec::with_capacity(v.len() * T::SIZE);
    v.into_iter().for_each(|x| x.extend_le(&mut out));
    Ok(out)
}

/// Reads one array (after its header).
fn read_array<R: Read>(npy: npyz::NpyFile<R>) -> Result<HostTensor, NpyError> {
    let npyz::DType::Plain(ts) = npy.dtype() else {
        return Err(format("structured arrays (record dtypes) are not supported"));
    };
    let dtype = dtype_of(&ts).ok_or_else(|| NpyError::Format(format!("unsupported descr {:?}", ts.to_string())))?;
    if npy.order() == npyz::Order::Fortran {
        return Err(format("Fortran order is not supported"));
    }
    let shape: Vec<usize> = npy
        .shape()
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| NpyError::Format(format!("extent {d} overflows"))))
        .collect::<Result<_, _>>()?;
    let bytes = with_elem!(dtype, |T| le_bytes::<T, R>(npy))?;
    HostTensor::from_le_bytes(dtype, shape, &bytes).map_err(format)
}

/// Parses `.npy` bytes.
pub fn from_npy(b: &[u8]) -> Result<HostTensor, NpyError> {
    if b.is_empty() {
        return Err(format("the data is empty (0 bytes)"));
    }
    if !b.starts_with(b"\x93NUMPY") {
        return Err(format("no NumPy magic (\\x93NUMPY): not .npy data (a TensorProto must be named .pb)"));
    }
    read_array(npyz::NpyFile::new(b).map_err(|e| NpyError::Format(format!("header: {e}")))?)
}

/// Parses `.npz` bytes: every array, in the archive's order, by name (`x` for `x.npy`).
pub fn from_npz(b: &[u8]) -> Result<Vec<(String, HostTensor)>, NpyError> {
    let archive = |e: std::io::Error| NpyError::Archive(e.to_string());
    let mut npz = npyz::npz::NpzArchive::new(Cursor::new(b)).map_err(archive)?;
    // In the archive's order (`array_names` follows a hash map's).
    let zip = npz.zip_archive();
    let mut names = Vec::with_capacity(zip.len());
    for i in 0..zip.len() {
        let file = zip.by_index(i).map_err(|e| NpyError::Archive(e.to_string()))?;
        if let Some(name) = npyz::npz::array_name_from_file_name(file.name()) {
            names.push(name.to_string());
        }
    }
    let mut out = Vec::with_capacity(names.len());
    for name in names {
        let npy = npz.by_name(&name).map_err(archive)?.ok_or_else(|| NpyError::Archive(format!("{name} vanished")))?;
        let t = read_array(npy).map_err(|e| NpyError::Archive(format!("{name}: {e}")))?;
        out.push((name, t));
    }
    Ok(out)
}

/// The tensor as NumPy can hold it: bf16 and fp8 widened to f32.
fn widened(t: &HostTensor) -> std::borrow::Cow<'_, HostTensor> {
    if matches!(t.dtype(), DType::BF16 | DType::F8E4M3 | DType::F8E5M2) {
        std::borrow::Cow::Owned(HostTensor::from_f64(DType::F32, t.shape.clone(), &t.to_f64_vec()))
    } else {
        std::borrow::Cow::Borrowed(t)
    }
}

/// Writes `t`'s elements (its little-endian bytes read as `T`) through `builder`.
fn put<T, B>(builder: B, t: &HostTensor) -> std::io::Result<()>
where
    T: Elem,
    B: WriterBuilder<T> + npyz::write_options::HasWriter,
    B::Writer: Write,
{
    let shape: Vec<u64> = t.shape.iter().map(|&d| d as u64).collect();
    let mut w = builder.default_dtype().shape(&shape).begin_nd()?;
    w.extend(t.to_le_bytes().chunks_exact(T::SIZE).map(T::from_le))?;
    w.finish()
}

/// Serializes a tensor as `.npy` bytes.
pub fn to_npy(t: &HostTensor) -> Vec<u8> {
    let t = widened(t);
    let mut out = Vec::with_capacity(128 + t.size_bytes());
    with_elem!(t.dtype(), |T| put::<T, _>(npyz::WriteOptions::<T>::new().writer(&mut out), &t))
        .expect("writing to memory cannot fail");
    out
}

/// Serializes named tensors as an uncompressed `.npz` archive (`name.npy` entries).
pub fn to_npz(items: &[(String, HostTensor)]) -> Vec<u8> {
    let mut npz = npyz::npz::NpzWriter::new(Cursor::new(Vec::new()));
    let options = FileOptions::default().compression_method(CompressionMethod::Stored);
    for (name, t) in items {
        let t = widened(t);
        let entry = |npz: &mut npyz::npz::NpzWriter<Cursor<Vec<u8>>>| -> std::io::Result<()> {
            with_elem!(t.dtype(), |T| put::<T, _>(npz.array::<T>(name, options)?, &t))
        };
        entry(&mut npz).expect("writing to memory cannot fail");
    }
    npz.zip_writer().finish().expect("writing to memory cannot fail").into_inner()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn npy_round_trip() {
        let t = HostTensor::f32([2, 3], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
        let b = to_npy(&t);
        assert!(b.starts_with(b"\x93NUMPY"));
        assert_eq!(from_npy(&b).unwrap(), t);
        let s = HostTensor::from_i64(DType::I64, vec![], &[7]);
        assert_eq!(from_npy(&to_npy(&s)).unwrap(), s);
        let v = HostTensor::from_i64(DType::Bool, vec![3], &[1, 0, 1]);
        assert_eq!(from_npy(&to_npy(&v)).unwrap(), v);
        for d in DType::ALL {
            let t = HostTensor::random(d, vec![3, 5], 7, -3.0, 3.0);
            let back = from_npy(&to_npy(&t)).unwrap();
            let want = if matches!(d, DType::BF16 | DType::F8E4M3 | DType::F8E5M2) {
                HostTensor::from_f64(DType::F32, t.shape.clone(), &t.to_f64_vec())
            } else {
                t
            };
            assert_eq!(back, want, "{d}");
        }
    }

    #[test]
    fn npy_rejects_garbage() {
        assert!(from_npy(b"").unwrap_err().to_string().contains("empty"));
        assert!(from_npy(b"hello").unwrap_err().to_string().contains("magic"));
        let t = HostTensor::f32([2], vec![1.0, 2.0]).unwrap();
        let mut b = to_npy(&t);
        b.pop();
        assert!(from_npy(&b).is_err());
        assert!(from_npy(&b[..12]).is_err());
    }

    #[test]
    fn npy_reads_big_endian_and_refuses_fortran_order() {
        // As `np.save` writes `np.array([1, -2], dtype='>i8')` and a Fortran-ordered 2x2.
        let npy = |descr: &str, fortran: &str, shape: &str, data: &[u8]| {
            let mut h = format!("{{'descr': '{descr}', 'fortran_order': {fortran}, 'shape': {shape}, }}");
            h.push_str(&" ".repeat(63 - (10 + h.len()) % 64));
            h.push('\n');
            let mut b = b"\x93NUMPY\x01\x00".to_vec();
            b.extend_from_slice(&(h.len() as u16).to_le_bytes());
            b.extend_from_slice(h.as_bytes());
            b.extend_from_slice(data);
            b
        };
        let mut data = 1i64.to_be_bytes().to_vec();
        data.extend_from_slice(&(-2i64).to_be_bytes());
        let t = from_npy(&npy(">i8", "False", "(2,)", &data)).unwrap();
        assert_eq!(t, HostTensor::from_i64(DType::I64, vec![2], &[1, -2]));
        let e = from_npy(&npy("<f4", "True", "(2, 2)", &[0; 16])).unwrap_err();
        assert!(e.to_string().contains("Fortran"), "{e}");
        let e = from_npy(&npy("<c8", "False", "(1,)", &[0; 8])).unwrap_err();
        assert!(e.to_string().contains("unsupported descr"), "{e}");
    }

    #[test]
    fn npz_round_trip() {
        let items = vec![
            ("logits".to_string(), HostTensor::f32([2, 2], vec![1.0, -2.0, 3.5, 0.25]).unwrap()),
            ("ids".to_string(), HostTensor::from_i64(DType::I64, vec![3], &[1, 2, 3])),
            ("half".to_string(), HostTensor::random(DType::BF16, vec![4], 3, -1.0, 1.0)),
        ];
        let back = from_npz(&to_npz(&items)).unwrap();
        assert_eq!(back.len(), 3);
        assert_eq!(back[0], items[0]);
        assert_eq!(back[1], items[1]);
        assert_eq!(back[2].1.dtype(), DType::F32);
        assert!(from_npz(b"not a zip").is_err());
    }
}
