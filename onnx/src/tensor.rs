//! `TensorProto` <-> [`HostTensor`]: raw little-endian data, the typed repeated fields, and
//! external data files. Models are untrusted input: sizes are checked against the data before
//! anything is allocated, and external-data paths that would leave the model's folder are refused.

use crate::error::OnnxError;
use crate::proto::{StringStringEntryProto, TensorProto};
use prost::Message;
use sinter_core::{DType, HostTensor, TensorData};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Component, Path};

/// The largest tensor, in bytes, the importer will ever allocate (16 GiB; less where half the
/// host-memory budget, `sinter_core::budget::host_limit() / 2`, is smaller). Larger declared
/// sizes are errors before any allocation or read.
pub const MAX_TENSOR_BYTES: u64 = 1 << 34;

/// ONNX `TensorProto.DataType` codes of the types sinter has.
pub mod code {
    /// FLOAT
    pub const FLOAT: i32 = 1;
    /// UINT8
    pub const UINT8: i32 = 2;
    /// INT8
    pub const INT8: i32 = 3;
    /// UINT16
    pub const UINT16: i32 = 4;
    /// INT16
    pub const INT16: i32 = 5;
    /// INT32
    pub const INT32: i32 = 6;
    /// INT64
    pub const INT64: i32 = 7;
    /// STRING
    pub const STRING: i32 = 8;
    /// BOOL
    pub const BOOL: i32 = 9;
    /// FLOAT16
    pub const FLOAT16: i32 = 10;
    /// DOUBLE
    pub const DOUBLE: i32 = 11;
    /// UINT32
    pub const UINT32: i32 = 12;
    /// UINT64
    pub const UINT64: i32 = 13;
    /// BFLOAT16
    pub const BFLOAT16: i32 = 16;
    /// FLOAT8E4M3FN (no infinities, one NaN per sign; sinter's `f8e4m3`)
    pub const FLOAT8E4M3FN: i32 = 17;
    /// FLOAT8E5M2 (IEEE-like; sinter's `f8e5m2`)
    pub const FLOAT8E5M2: i32 = 19;
}

/// The ONNX name of a data type code (`FLOAT`, `FLOAT8E4M3FN`...).
pub fn dtype_code_name(c: i32) -> String {
    match crate::proto::tensor_proto::DataType::try_from(c) {
        Ok(d) => d.as_str_name().to_string(),
        Err(_) => format!("data type {c}"),
    }
}

/// The sinter dtype of an ONNX data type code; `Err` carries the ONNX type name for the types
/// sinter lacks (string, complex, the fnuz 8-bit floats, 4- and 2-bit types).
pub fn dtype_from_code(c: i32) -> Result<DType, String> {
    Ok(match c {
        code::FLOAT => DType::F32,
        code::UINT8 => DType::U8,
        code::INT8 => DType::I8,
        code::UINT16 => DType::U16,
        code::INT16 => DType::I16,
        code::INT32 => DType::I32,
        code::INT64 => DType::I64,
        code::BOOL => DType::Bool,
        code::FLOAT16 => DType::F16,
        code::DOUBLE => DType::F64,
        code::UINT32 => DType::U32,
        code::UINT64 => DType::U64,
        code::BFLOAT16 => DType::BF16,
        code::FLOAT8E4M3FN => DType::F8E4M3,
        code::FLOAT8E5M2 => DType::F8E5M2,
        other => return Err(dtype_code_name(other)),
    })
}

/// The ONNX data type code of a sinter dtype.
pub fn dtype_code(d: DType) -> i32 {
    match d {
        DType::F32 => code::FLOAT,
        DType::U8 => code::UINT8,
        DType::I8 => code::INT8,
        DType::U16 => code::UINT16,
        DType::I16 => code::INT16,
        DType::I32 => code::INT32,
        DType::I64 => code::INT64,
        DType::Bool => code::BOOL,
        DType::F16 => code::FLOAT16,
        DType::F64 => code::DOUBLE,
        DType::U32 => code::UINT32,
        DType::U64 => code::UINT64,
        DType::BF16 => code::BFLOAT16,
        DType::F8E4M3 => code::FLOAT8E4M3FN,
        DType::F8E5M2 => code::FLOAT8E5M2,
    }
}

/// Checked element count and byte size of `dims` for `dtype`; errors name `what`.
pub fn checked_size(what: &str, dims: &[i64], dtype: DType) -> Result<(Vec<usize>, usize), OnnxError> {
    let mut shape = Vec::with_capacity(dims.len());
    let mut n: u64 = 1;
    // Product of the non-zero extents: a zero extent must not hide huge others.
    let mut span: u64 = 1;
    for &d in dims {
        if d < 0 {
            return Err(OnnxError::malformed(what, format!("negative dimension {d} in {dims:?}")));
        }
        n = n.saturating_mul(d as u64);
        span = span.saturating_mul((d as u64).max(1));
        shape.push(usize::try_from(d).map_err(|_| OnnxError::malformed(what, format!("dimension {d} too large")))?);
    }
    if span > 1 << 48 {
        return Err(OnnxError::TooLarge { what: format!("{what} {dtype}{dims:?}"), bytes: span, limit: 1 << 48 });
    }
    let bytes = n.saturating_mul(dtype.size_bytes() as u64);
    // Decoding holds the decoded tensor beside the raw bytes it comes from, so one tensor may
    // take half the host-memory budget (`sinter_core::budget`), and never more than 16 GiB.
    let limit = MAX_TENSOR_BYTES.min(sinter_core::budget::host_limit() / 2);
    if bytes > limit {
        return Err(OnnxError::TooLarge { what: format!("{what} {dtype}{dims:?}"), bytes, limit });
    }
    Ok((shape, n as usize))
}

/// Decodes a serialized `TensorProto` (a `.pb` file of the ONNX test layout). External data is
/// refused (there is no folder to resolve it against).
///
/// Bytes that cannot be one are named for what they are: empty, NumPy `.npy` data, or a message
/// without a data type (protobuf decodes almost anything, so a data type is required).
pub fn tensor_from_pb(bytes: &[u8]) -> Result<HostTensor, OnnxError> {
    let bad = |msg: String| OnnxError::BadData { what: "tensor data".into(), msg };
    if bytes.is_empty() {
        return Err(bad("empty (0 bytes): not a serialized TensorProto".into()));
    }
    if bytes.starts_with(b"\x93NUMPY") {
        return Err(bad("NumPy .npy data, not a serialized TensorProto (name the file .npy)".into()));
    }
    let t = TensorProto::decode(bytes).map_err(|e| OnnxError::Decode { what: "TensorProto".into(), error: e })?;
    if t.data_type.unwrap_or(0) == 0 {
        return Err(bad(format!("no data type (UNDEFINED) in {} bytes: not a serialized TensorProto", bytes.len())));
    }
    decode_tensor(&t, None)
}

/// Reads a `.pb` tensor file ([`tensor_from_pb`]); every error names the file.
pub fn read_tensor_pb(path: &Path) -> Result<HostTensor, OnnxError> {
    let bytes = std::fs::read(path).map_err(|e| OnnxError::Io { path: path.to_path_buf(), error: e })?;
    tensor_from_pb(&bytes).map_err(|e| e.in_file(path))
}

/// Serializes a tensor as a `TensorProto` with raw little-endian data.
pub fn tensor_to_proto(t: &HostTensor, name: &str) -> TensorProto {
    TensorProto {
        dims: t.shape.iter().map(|&d| d as i64).collect(),
        data_type: Some(dtype_code(t.dtype())),
        name: Some(name.to_string()),
        raw_data: Some(t.to_le_bytes().into()),
        ..Default::default()
    }
}

/// Decodes a `TensorProto`. `dir` is the model's folder, against which external-data locations
/// resolve (`None` refuses external data).
pub fn decode_tensor(t: &TensorProto, dir: Option<&Path>) -> Result<HostTensor, OnnxError> {
    let name = t.name.clone().unwrap_or_default();
    let what = format!("tensor {name:?}");
    let c = t.data_type.unwrap_or(0);
    let dtype = dtype_from_code(c).map_err(|tn| OnnxError::Unsupported {
        node: what.clone(),
        op: tn.clone(),
        detail: format!("data type {tn} has no sinter equivalent"),
    })?;
    if t.segment.is_some() {
        return Err(OnnxError::Unsupported {
            node: what,
            op: "TensorProto.segment".into(),
            detail: "segmented tensors are not supported".into(),
        });
    }
    let (shape, n) = checked_size(&what, &t.dims, dtype)?;
    let bytes = n * dtype.size_bytes();
    let external = t.data_location == Some(crate::proto::tensor_proto::DataLocation::External as i32);
    if external {
        let raw = read_external(&name, &t.external_data, dir, bytes)?;
        return HostTensor::from_le_bytes(dtype, shape, &raw).map_err(|e| OnnxError::malformed(&what, e.to_string()));
    }
    if let Some(raw) = &t.raw_data {
        if raw.len() != bytes {
            return Err(OnnxError::malformed(
                &what,
                format!("{dtype}{:?} needs {bytes} bytes of raw data, got {}", t.dims, raw.len()),
            ));
        }
        return HostTensor::from_le_bytes(dtype, shape, raw).map_err(|e| OnnxError::malformed(&what, e.to_string()));
    }
    let count = |len: usize, field: &str| -> Result<(), OnnxError> {
        if len == n {
            Ok(())
        } else {
            Err(OnnxError::malformed(&what, format!("{dtype}{:?} needs {n} values, {field} has {len}", t.dims)))
        }
    };
    let data = match dtype {
        DType::F32 => {
            count(t.float_data.len(), "float_data")?;
            TensorData::F32(t.float_data.clone())
        }
        DType::F64 => {
            count(t.double_data.len(), "double_data")?;
            TensorData::F64(t.double_data.clone())
        }
        DType::I64 => {
            count(t.int64_data.len(), "int64_data")?;
            TensorData::I64(t.int64_data.clone())
        }
        DType::U32 => {
            count(t.uint64_data.len(), "uint64_data")?;
            TensorData::U32(t.uint64_data.iter().map(|&x| x as u32).collect())
        }
        DType::U64 => {
            count(t.uint64_data.len(), "uint64_data")?;
            TensorData::U64(t.uint64_data.clone())
        }
        _ => {
            count(t.int32_data.len(), "int32_data")?;
            let v = &t.int32_data;
            match dtype {
                DType::I32 => TensorData::I32(v.clone()),
                DType::I16 => TensorData::I16(v.iter().map(|&x| x as i16).collect()),
                DType::I8 => TensorData::I8(v.iter().map(|&x| x as i8).collect()),
                DType::U16 => TensorData::U16(v.iter().map(|&x| x as u16).collect()),
                DType::U8 => TensorData::U8(v.iter().map(|&x| x as u8).collect()),
                DType::Bool => TensorData::Bool(v.iter().map(|&x| x != 0).collect()),
                DType::F16 => TensorData::F16(v.iter().map(|&x| half::f16::from_bits(x as u16)).collect()),
                DType::BF16 => TensorData::BF16(v.iter().map(|&x| half::bf16::from_bits(x as u16)).collect()),
                // fp8 codes, one per int32 (the low byte), as ONNX stores them.
                DType::F8E4M3 => TensorData::F8E4M3(v.iter().map(|&x| x as u8).collect()),
                DType::F8E5M2 => TensorData::F8E5M2(v.iter().map(|&x| x as u8).collect()),
                _ => unreachable!("every other dtype is handled above"),
            }
        }
    };
    HostTensor::new(shape, data).map_err(|e| OnnxError::malformed(&what, e.to_string()))
}

/// Checks an external-data location: relative, no `..`, no root or prefix components.
fn check_location(tensor: &str, location: &str) -> Result<(), OnnxError> {
    let refuse = |reason: &str| OnnxError::UnsafePath {
        tensor: tensor.to_string(),
        location: location.to_string(),
        reason: reason.to_string(),
    };
    if location.is_empty() {
        return Err(refuse("empty location"));
    }
    if location.contains('\0') {
        return Err(refuse("NUL byte in location"));
    }
    let p = Path::new(location);
    if p.is_absolute() || location.starts_with('/') || location.starts_with('\\') || location.contains(':') {
        return Err(refuse("absolute paths are not allowed"));
    }
    // Backslashes are separators on Windows; treat them as such everywhere.
    for part in location.split(['/', '\\']) {
        if part == ".." {
            return Err(refuse("`..` components are not allowed"));
        }
    }
    for c in p.components() {
        match c {
            Component::Normal(_) | Component::CurDir => {}
            Component::ParentDir => return Err(refuse("`..` components are not allowed")),
            Component::RootDir | Component::Prefix(_) => return Err(refuse("absolute paths are not allowed")),
        }
    }
    Ok(())
}

/// Reads `bytes` bytes of external data for tensor `name`, after checking the path and sizes.
fn read_external(
    name: &str,
    entries: &[StringStringEntryProto],
    dir: Option<&Path>,
    bytes: usize,
) -> Result<Vec<u8>, OnnxError> {
    let what = format!("tensor {name:?}");
    let get = |k: &str| entries.iter().find(|e| e.key.as_deref() == Some(k)).and_then(|e| e.value.clone());
    let location = get("location").ok_or_else(|| OnnxError::malformed(&what, "external data without a location"))?;
    let parse = |k: &str| -> Result<Option<u64>, OnnxError> {
        match get(k) {
            None => Ok(None),
            Some(v) => v
                .trim()
                .parse::<u64>()
                .map(Some)
                .map_err(|_| OnnxError::malformed(&what, format!("external data {k} {v:?} is not a number"))),
        }
    };
    let offset = parse("offset")?.unwrap_or(0);
    let length = parse("length")?;
    check_location(name, &location)?;
    let dir = dir.ok_or_else(|| {
        OnnxError::malformed(&what, "external data, but the model was not loaded from a file (no folder to resolve it)")
    })?;
    if let Some(len) = length
        && len != bytes as u64
    {
        return Err(OnnxError::malformed(
            &what,
            format!("external data length {len} but the tensor needs {bytes} bytes"),
        ));
    }
    let io = |path: &Path, e: std::io::Error| OnnxError::Io { path: path.to_path_buf(), error: e };
    let base = dir.canonicalize().map_err(|e| io(dir, e))?;
    let joined = dir.join(&location);
    let real = joined.canonicalize().map_err(|e| io(&joined, e))?;
    if !real.starts_with(&base) {
        return Err(OnnxError::UnsafePath {
            tensor: name.to_string(),
            location,
            reason: format!("resolves to {}, outside the model's folder {}", real.display(), base.display()),
        });
    }
    let meta = std::fs::metadata(&real).map_err(|e| io(&real, e))?;
    if !meta.is_file() {
        return Err(OnnxError::malformed(&what, format!("external data {} is not a regular file", real.display())));
    }
    let end = offset.checked_add(bytes as u64);
    if end.is_none_or(|e| e > meta.len()) {
        return Err(OnnxError::malformed(
            &what,
            format!("external data needs bytes {offset}..{offset}+{bytes} but {} holds {}", real.display(), meta.len()),
        ));
    }
    let mut f = std::fs::File::open(&real).map_err(|e| io(&real, e))?;
    f.seek(SeekFrom::Start(offset)).map_err(|e| io(&real, e))?;
    let mut buf = vec![0u8; bytes];
    f.read_exact(&mut buf).map_err(|e| io(&real, e))?;
    Ok(buf)
}
