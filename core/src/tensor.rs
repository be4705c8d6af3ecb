//! Host tensors: the values that go in and come out of a graph.

use crate::dtype::DType;
pub use crate::scalar::{cast_int, float_to_i64, round_to};
use half::{bf16, f16};
use serde::{Deserialize, Serialize};

/// Typed host storage, one variant per [`DType`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum TensorData {
    /// f32 values.
    F32(#[serde(with = "json_floats")] Vec<f32>),
    /// f16 values.
    F16(Vec<f16>),
    /// bf16 values.
    BF16(Vec<bf16>),
    /// f64 values.
    F64(#[serde(with = "json_floats")] Vec<f64>),
    /// i8 values.
    I8(Vec<i8>),
    /// i16 values.
    I16(Vec<i16>),
    /// i32 values.
    I32(Vec<i32>),
    /// i64 values.
    I64(Vec<i64>),
    /// u8 values.
    U8(Vec<u8>),
    /// u16 values.
    U16(Vec<u16>),
    /// u32 values.
    U32(Vec<u32>),
    /// u64 values.
    U64(Vec<u64>),
    /// bool values.
    Bool(Vec<bool>),
    /// fp8 e4m3fn values, as their codes ([`crate::fp8::E4M3`]).
    F8E4M3(Vec<u8>),
    /// fp8 e5m2 values, as their codes ([`crate::fp8::E5M2`]).
    F8E5M2(Vec<u8>),
}

macro_rules! each_variant {
    ($data:expr, $v:ident => $body:expr) => {
        match $data {
            TensorData::F32($v) => $body,
            TensorData::F16($v) => $body,
            TensorData::BF16($v) => $body,
            TensorData::F64($v) => $body,
            TensorData::I8($v) => $body,
            TensorData::I16($v) => $body,
            TensorData::I32($v) => $body,
            TensorData::I64($v) => $body,
            TensorData::U8($v) => $body,
            TensorData::U16($v) => $body,
            TensorData::U32($v) => $body,
            TensorData::U64($v) => $body,
            TensorData::Bool($v) => $body,
            TensorData::F8E4M3($v) => $body,
            TensorData::F8E5M2($v) => $body,
        }
    };
}

impl TensorData {
    /// The dtype of this storage.
    pub fn dtype(&self) -> DType {
        match self {
            TensorData::F32(_) => DType::F32,
            TensorData::F16(_) => DType::F16,
            TensorData::BF16(_) => DType::BF16,
            TensorData::F64(_) => DType::F64,
            TensorData::I8(_) => DType::I8,
            TensorData::I16(_) => DType::I16,
            TensorData::I32(_) => DType::I32,
            TensorData::I64(_) => DType::I64,
            TensorData::U8(_) => DType::U8,
            TensorData::U16(_) => DType::U16,
            TensorData::U32(_) => DType::U32,
            TensorData::U64(_) => DType::U64,
            TensorData::Bool(_) => DType::Bool,
            TensorData::F8E4M3(_) => DType::F8E4M3,
            TensorData::F8E5M2(_) => DType::F8E5M2,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        each_variant!(self, v => v.len())
    }

    /// True when there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A dense, row-major tensor in host memory.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HostTensor {
    /// Static extents.
    pub shape: Vec<usize>,
    /// The elements, `shape.iter().product()` of them.
    pub data: TensorData,
}

impl HostTensor {
    /// A tensor from storage and extents. Fails when the element count does not match.
    pub fn new(shape: Vec<usize>, data: TensorData) -> Result<HostTensor, crate::Error> {
        let n: usize = shape.iter().product();
        if n != data.len() {
            return Err(crate::Error::Tensor(format!(
                "shape {shape:?} holds {n} elements but the data has {}",
                data.len()
            )));
        }
        Ok(HostTensor { shape, data })
    }

    /// An f32 tensor.
    pub fn f32(shape: impl Into<Vec<usize>>, v: Vec<f32>) -> Result<HostTensor, crate::Error> {
        HostTensor::new(shape.into(), TensorData::F32(v))
    }

    /// A rank-0 tensor of `dtype` holding `x` (rounded to the dtype).
    pub fn scalar(dtype: DType, x: f64) -> HostTensor {
        HostTensor::from_f64(dtype, vec![], &[x])
    }

    /// The dtype.
    pub fn dtype(&self) -> DType {
        self.data.dtype()
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.data.len()
    }

    /// Size of the data in bytes.
    pub fn size_bytes(&self) -> usize {
        self.numel() * self.dtype().size_bytes()
    }

    /// This float tensor converted to a float dtype no wider than its own (f64 to f32, f16 or bf16;
    /// f32 to f16 or bf16), each element rounded once to the nearest, ties to even, as `Cast` does
    /// on the CPU reference (the values are equal to its result; NaN stays NaN). Large tensors
    /// convert on several threads: this is how `constant_fold` casts autocast's weights, where the
    /// reference's per-element path took 3.1 s of GPT-2 small's bf16 compile (H200, session 20).
    /// `None` for any other pair of dtypes.
    pub fn narrow_float(&self, to: DType) -> Option<HostTensor> {
        let data = match (&self.data, to) {
            (TensorData::F32(v), DType::BF16) => TensorData::BF16(crate::par::map_elements(v, 8, bf16::from_f32)),
            (TensorData::F32(v), DType::F16) => TensorData::F16(crate::par::map_elements(v, 8, f16::from_f32)),
            (TensorData::F64(v), DType::F32) => TensorData::F32(crate::par::map_elements(v, 8, |x| x as f32)),
            (TensorData::F64(v), DType::BF16) => {
                TensorData::BF16(crate::par::map_elements(v, 8, crate::scalar::bf16_from_f64))
            }
            (TensorData::F64(v), DType::F16) => {
                TensorData::F16(crate::par::map_elements(v, 8, crate::scalar::f16_from_f64))
            }
            _ => return None,
        };
        Some(HostTensor { shape: self.shape.clone(), data })
    }

    /// Builds a tensor of `dtype` from f64 values, converting each as a cast from `f64` does
    /// ([`crate::scalar::cast`]): floats rounded to the dtype, integers truncated toward zero and
    /// wrapped, bool `!= 0`.
    pub fn from_f64(dtype: DType, shape: Vec<usize>, v: &[f64]) -> HostTensor {
        let data = match dtype {
            DType::F32 => TensorData::F32(v.iter().map(|&x| x as f32).collect()),
            DType::F16 => TensorData::F16(v.iter().map(|&x| crate::scalar::f16_from_f64(x)).collect()),
            DType::BF16 => TensorData::BF16(v.iter().map(|&x| crate::scalar::bf16_from_f64(x)).collect()),
            DType::F64 => TensorData::F64(v.to_vec()),
            DType::F8E4M3 => TensorData::F8E4M3(v.iter().map(|&x| crate::fp8::E4M3.encode(x)).collect()),
            DType::F8E5M2 => TensorData::F8E5M2(v.iter().map(|&x| crate::fp8::E5M2.encode(x)).collect()),
            DType::Bool => TensorData::Bool(v.iter().map(|&x| x != 0.0).collect()),
            _ => {
                let i: Vec<i64> = v.iter().map(|&x| crate::scalar::float_to_int(x, dtype)).collect();
                return HostTensor::from_i64(dtype, shape, &i);
            }
        };
        HostTensor { shape, data }
    }

    /// Builds a tensor of `dtype` from i64 values (wrapped as a cast would; floats converted).
    pub fn from_i64(dtype: DType, shape: Vec<usize>, v: &[i64]) -> HostTensor {
        let data = match dtype {
            DType::I8 => TensorData::I8(v.iter().map(|&x| x as i8).collect()),
            DType::I16 => TensorData::I16(v.iter().map(|&x| x as i16).collect()),
            DType::I32 => TensorData::I32(v.iter().map(|&x| x as i32).collect()),
            DType::I64 => TensorData::I64(v.to_vec()),
            DType::U8 => TensorData::U8(v.iter().map(|&x| x as u8).collect()),
            DType::U16 => TensorData::U16(v.iter().map(|&x| x as u16).collect()),
            DType::U32 => TensorData::U32(v.iter().map(|&x| x as u32).collect()),
            DType::U64 => TensorData::U64(v.iter().map(|&x| x as u64).collect()),
            DType::Bool => TensorData::Bool(v.iter().map(|&x| x != 0).collect()),
            _ => return HostTensor::from_f64(dtype, shape, &v.iter().map(|&x| x as f64).collect::<Vec<_>>()),
        };
        HostTensor { shape, data }
    }

    /// All elements as f64 (integers converted; u64 above 2^53 loses precision).
    pub fn to_f64_vec(&self) -> Vec<f64> {
        match &self.data {
            TensorData::F32(v) => v.iter().map(|&x| x as f64).collect(),
            TensorData::F16(v) => v.iter().map(|x| x.to_f64()).collect(),
            TensorData::BF16(v) => v.iter().map(|x| x.to_f64()).collect(),
            TensorData::F64(v) => v.clone(),
            TensorData::I8(v) => v.iter().map(|&x| x as f64).collect(),
            TensorData::I16(v) => v.iter().map(|&x| x as f64).collect(),
            TensorData::I32(v) => v.iter().map(|&x| x as f64).collect(),
            TensorData::I64(v) => v.iter().map(|&x| x as f64).collect(),
            TensorData::U8(v) => v.iter().map(|&x| x as f64).collect(),
            TensorData::U16(v) => v.iter().map(|&x| x as f64).collect(),
            TensorData::U32(v) => v.iter().map(|&x| x as f64).collect(),
            TensorData::U64(v) => v.iter().map(|&x| x as f64).collect(),
            TensorData::Bool(v) => v.iter().map(|&x| x as u8 as f64).collect(),
            TensorData::F8E4M3(v) => v.iter().map(|&c| crate::fp8::E4M3.decode(c)).collect(),
            TensorData::F8E5M2(v) => v.iter().map(|&c| crate::fp8::E5M2.decode(c)).collect(),
        }
    }

    /// All elements as i64 (floats truncated toward zero, NaN to 0; u64 reinterpreted).
    pub fn to_i64_vec(&self) -> Vec<i64> {
        match &self.data {
            TensorData::I8(v) => v.iter().map(|&x| x as i64).collect(),
            TensorData::I16(v) => v.iter().map(|&x| x as i64).collect(),
            TensorData::I32(v) => v.iter().map(|&x| x as i64).collect(),
            TensorData::I64(v) => v.clone(),
            TensorData::U8(v) => v.iter().map(|&x| x as i64).collect(),
            TensorData::U16(v) => v.iter().map(|&x| x as i64).collect(),
            TensorData::U32(v) => v.iter().map(|&x| x as i64).collect(),
            TensorData::U64(v) => v.iter().map(|&x| x as i64).collect(),
            TensorData::Bool(v) => v.iter().map(|&x| x as i64).collect(),
            _ => self.to_f64_vec().into_iter().map(float_to_i64).collect(),
        }
    }

    /// This tensor stored in order `p`: the row-major `[shape[p[0]], shape[p[1]], ...]` whose
    /// element at storage position `c` is this tensor's element at `c[j]` on axis `p[j]` (a
    /// permutation, as `Sched::layout` stores a buffer). `Err` when `p` is not a permutation of
    /// the axes.
    pub fn permuted(&self, p: &[usize]) -> Result<HostTensor, crate::Error> {
        let rank = self.shape.len();
        let mut seen = vec![false; rank];
        if p.len() != rank || p.iter().any(|&i| i >= rank || std::mem::replace(&mut seen[i], true)) {
            return Err(crate::Error::Unsupported(format!("permuted: {p:?} is not a permutation of {rank} axes")));
        }
        let size = self.dtype().size_bytes();
        let bytes = self.le_bytes();
        let stored: Vec<usize> = p.iter().map(|&i| self.shape[i]).collect();
        let mut strides = vec![1usize; rank];
        for i in (0..rank.saturating_sub(1)).rev() {
            strides[i] = strides[i + 1] * self.shape[i + 1];
        }
        let mut out = Vec::with_capacity(bytes.len());
        let mut at = vec![0usize; rank];
        for _ in 0..self.numel() {
            let src: usize = at.iter().zip(p).map(|(&a, &i)| a * strides[i]).sum();
            out.extend_from_slice(&bytes[src * size..(src + 1) * size]);
            for j in (0..rank).rev() {
                at[j] += 1;
                if at[j] < stored[j] {
                    break;
                }
                at[j] = 0;
            }
        }
        HostTensor::from_le_bytes(self.dtype(), stored, &out)
    }

    /// The raw little-endian bytes of the elements (bool as one byte 0/1).
    pub fn to_le_bytes(&self) -> Vec<u8> {
        self.le_bytes().into_owned()
    }

    /// The elements as little-endian bytes ([`HostTensor::to_le_bytes`]), borrowed where the
    /// storage already is that (every type but bool on a little-endian host): hashing a model's
    /// constants then reads them in place. With the element-by-element copy, the compile of a
    /// 340 MB BERT-base-sized model took 3.4-3.6 s on the 2-core CI machine, 2.0 s without it
    /// (lavapipe, session 8).
    pub fn le_bytes(&self) -> std::borrow::Cow<'_, [u8]> {
        use std::borrow::Cow;
        #[cfg(target_endian = "little")]
        {
            let b: Option<&[u8]> = match &self.data {
                TensorData::F32(v) => Some(bytemuck::cast_slice(v)),
                TensorData::F16(v) => Some(bytemuck::cast_slice(v)),
                TensorData::BF16(v) => Some(bytemuck::cast_slice(v)),
                TensorData::F64(v) => Some(bytemuck::cast_slice(v)),
                TensorData::I8(v) => Some(bytemuck::cast_slice(v)),
                TensorData::I16(v) => Some(bytemuck::cast_slice(v)),
                TensorData::I32(v) => Some(bytemuck::cast_slice(v)),
                TensorData::I64(v) => Some(bytemuck::cast_slice(v)),
                TensorData::U8(v) => Some(v),
                TensorData::U16(v) => Some(bytemuck::cast_slice(v)),
                TensorData::U32(v) => Some(bytemuck::cast_slice(v)),
                TensorData::U64(v) => Some(bytemuck::cast_slice(v)),
                TensorData::F8E4M3(v) | TensorData::F8E5M2(v) => Some(v),
                TensorData::Bool(_) => None,
            };
            if let Some(b) = b {
                return Cow::Borrowed(b);
            }
        }
        let mut out = Vec::with_capacity(self.size_bytes());
        match &self.data {
            TensorData::F32(v) => v.iter().for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
            TensorData::F16(v) => v.iter().for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
            TensorData::BF16(v) => v.iter().for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
            TensorData::F64(v) => v.iter().for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
            TensorData::I8(v) => v.iter().for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
            TensorData::I16(v) => v.iter().for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
            TensorData::I32(v) => v.iter().for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
            TensorData::I64(v) => v.iter().for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
            TensorData::U8(v) => out.extend_from_slice(v),
            TensorData::U16(v) => v.iter().for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
            TensorData::U32(v) => v.iter().for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
            TensorData::U64(v) => v.iter().for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
            TensorData::Bool(v) => v.iter().for_each(|&x| out.push(x as u8)),
            TensorData::F8E4M3(v) | TensorData::F8E5M2(v) => out.extend_from_slice(v),
        }
        Cow::Owned(out)
    }

    /// Builds a tensor from little-endian bytes. Fails when the byte count does not match.
    pub fn from_le_bytes(dtype: DType, shape: Vec<usize>, bytes: &[u8]) -> Result<HostTensor, crate::Error> {
        let n: usize = shape.iter().product();
        let need = n.checked_mul(dtype.size_bytes());
        if need != Some(bytes.len()) {
            return Err(crate::Error::Tensor(format!(
                "{dtype} tensor of shape {shape:?} needs {} bytes, got {}",
                need.map_or("too many".to_string(), |b| b.to_string()),
                bytes.len()
            )));
        }
        // On a little-endian host the bytes are the elements: one copy into the new vector
        // (ONNX import of GPT-2 small: 124M f32 weights; the per-element path took several
        // times as long).
        #[cfg(target_endian = "little")]
        macro_rules! chunks {
            ($t:ty, $w:expr) => {
                bytemuck::pod_collect_to_vec::<u8, $t>(bytes)
            };
        }
        #[cfg(not(target_endian = "little"))]
        macro_rules! chunks {
            ($t:ty, $w:expr) => {
                bytes.chunks_exact($w).map(|c| <$t>::from_le_bytes(c.try_into().unwrap())).collect()
            };
        }
        let data = match dtype {
            DType::F32 => TensorData::F32(chunks!(f32, 4)),
            DType::F16 => TensorData::F16(chunks!(f16, 2)),
            DType::BF16 => TensorData::BF16(chunks!(bf16, 2)),
            DType::F64 => TensorData::F64(chunks!(f64, 8)),
            DType::I8 => TensorData::I8(chunks!(i8, 1)),
            DType::I16 => TensorData::I16(chunks!(i16, 2)),
            DType::I32 => TensorData::I32(chunks!(i32, 4)),
            DType::I64 => TensorData::I64(chunks!(i64, 8)),
            DType::U8 => TensorData::U8(bytes.to_vec()),
            DType::U16 => TensorData::U16(chunks!(u16, 2)),
            DType::U32 => TensorData::U32(chunks!(u32, 4)),
            DType::U64 => TensorData::U64(chunks!(u64, 8)),
            DType::Bool => TensorData::Bool(bytes.iter().map(|&b| b != 0).collect()),
            DType::F8E4M3 => TensorData::F8E4M3(bytes.to_vec()),
            DType::F8E5M2 => TensorData::F8E5M2(bytes.to_vec()),
        };
        Ok(HostTensor { shape, data })
    }

    /// Deterministic pseudo-random values of `dtype` in `[lo, hi)` (integers: that range truncated;
    /// bool: a coin flip), from `seed`. Used for differential tests and benchmarks.
    pub fn random(dtype: DType, shape: Vec<usize>, seed: u64, lo: f64, hi: f64) -> HostTensor {
        let n: usize = shape.iter().product();
        let mut rng = SplitMix64::new(seed);
        let v: Vec<f64> = (0..n)
            .map(|_| {
                let u = rng.next_f64();
                if dtype == DType::Bool { (u < 0.5) as u8 as f64 } else { lo + (hi - lo) * u }
            })
            .collect();
        if dtype.is_float() {
            HostTensor::from_f64(dtype, shape, &v)
        } else {
            HostTensor::from_i64(dtype, shape, &v.iter().map(|x| x.floor() as i64).collect::<Vec<_>>())
        }
    }

    /// Largest elementwise error of `self` against `reference`, scaled as
    /// `|a - b| / (atol + rtol * |b|)`: a value at most 1 means "within tolerance". NaN in both
    /// places counts as equal; NaN in only one gives infinity. Shapes or dtypes that differ give
    /// infinity.
    pub fn tolerance_ratio(&self, reference: &HostTensor, rtol: f64, atol: f64) -> f64 {
        if self.shape != reference.shape || self.dtype() != reference.dtype() {
            return f64::INFINITY;
        }
        let (a, b) = (self.to_f64_vec(), reference.to_f64_vec());
        a.iter().zip(&b).map(|(&x, &y)| crate::compare::element_ratio(x, y, rtol, atol)).fold(0.0, f64::max)
    }

    /// Largest absolute difference against `other` (NaN-aware as [`HostTensor::tolerance_ratio`]:
    /// NaN against NaN and equal infinities are 0, any other NaN or infinity mismatch `+inf`).
    pub fn max_abs_diff(&self, other: &HostTensor) -> f64 {
        if self.shape != other.shape {
            return f64::INFINITY;
        }
        let (a, b) = (self.to_f64_vec(), other.to_f64_vec());
        a.iter()
            .zip(&b)
            .map(|(&x, &y)| {
                if crate::compare::element_ratio(x, y, 0.0, 0.0) == 0.0 {
                    0.0
                } else if x.is_finite() && y.is_finite() {
                    (x - y).abs()
                } else {
                    f64::INFINITY
                }
            })
            .fold(0.0, f64::max)
    }
}

/// A small deterministic generator (SplitMix64) so tests and benchmarks need no RNG crate.
#[derive(Clone, Debug)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator from a seed.
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform value in `[0, 1)`.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Serde for float vectors that may hold non-finite values: finite values as JSON numbers, `inf`,
/// `-inf` and `nan` as strings (serde_json writes non-finite numbers as `null`, which reads back as
/// an error: a cached program with a `-inf` mask constant was "corrupt" on every load). Plain
/// numbers read as before.
mod json_floats {
    use serde::de::{Deserializer, Error, SeqAccess, Visitor};
    use serde::ser::{SerializeSeq, Serializer};

    /// f32 or f64.
    pub trait Float: Copy {
        fn to_f64(self) -> f64;
        fn from_f64(v: f64) -> Self;
    }
    impl Float for f32 {
        fn to_f64(self) -> f64 {
            self as f64
        }
        fn from_f64(v: f64) -> f32 {
            v as f32
        }
    }
    impl Float for f64 {
        fn to_f64(self) -> f64 {
            self
        }
        fn from_f64(v: f64) -> f64 {
            v
        }
    }

    pub fn serialize<S: Serializer, T: Float + serde::Serialize>(v: &[T], s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(v.len()))?;
        for &x in v {
            let f = x.to_f64();
            if f.is_finite() {
                seq.serialize_element(&x)?;
            } else {
                seq.serialize_element(if f.is_nan() {
                    "nan"
                } else if f > 0.0 {
                    "inf"
                } else {
                    "-inf"
                })?;
            }
        }
        seq.end()
    }

    /// One element: a number or one of the three strings.
    struct Elem(f64);

    impl<'de> serde::Deserialize<'de> for Elem {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Elem, D::Error> {
            struct V;
            impl Visitor<'_> for V {
                type Value = Elem;
                fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                    f.write_str("a number, \"inf\", \"-inf\" or \"nan\"")
                }
                fn visit_f64<E: Error>(self, v: f64) -> Result<Elem, E> {
                    Ok(Elem(v))
                }
                fn visit_i64<E: Error>(self, v: i64) -> Result<Elem, E> {
                    Ok(Elem(v as f64))
                }
                fn visit_u64<E: Error>(self, v: u64) -> Result<Elem, E> {
                    Ok(Elem(v as f64))
                }
                fn visit_str<E: Error>(self, v: &str) -> Result<Elem, E> {
                    match v {
                        "inf" => Ok(Elem(f64::INFINITY)),
                        "-inf" => Ok(Elem(f64::NEG_INFINITY)),
                        "nan" => Ok(Elem(f64::NAN)),
                        other => Err(E::custom(format!("not a number: {other:?}"))),
                    }
                }
            }
            d.deserialize_any(V)
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>, T: Float>(d: D) -> Result<Vec<T>, D::Error> {
        struct S<T>(std::marker::PhantomData<T>);
        impl<'de, T: Float> Visitor<'de> for S<T> {
            type Value = Vec<T>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a list of numbers")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Vec<T>, A::Error> {
                let mut out = Vec::with_capacity(a.size_hint().unwrap_or(0).min(1 << 20));
                while let Some(Elem(v)) = a.next_element()? {
                    out.push(T::from_f64(v));
                }
                Ok(out)
            }
        }
        d.deserialize_seq(S(std::marker::PhantomData))
    }

    #[cfg(test)]
    mod tests {
        use crate::tensor::TensorData;

        #[test]
        fn le_bytes_borrow_the_storage_and_match_the_element_encoding() {
            use crate::DType;
            use crate::tensor::HostTensor;
            let vals = [0.0, -1.5, 3.0, 127.0, -128.0, 65504.0, 1e-3];
            for d in DType::ALL {
                let t = HostTensor::from_f64(d, vec![vals.len()], &vals);
                // The element-by-element encoding of every type, the definition of the layout.
                let want: Vec<u8> = match &t.data {
                    TensorData::F32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
                    TensorData::F16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
                    TensorData::BF16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
                    TensorData::F64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
                    TensorData::I8(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
                    TensorData::I16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
                    TensorData::I32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
                    TensorData::I64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
                    TensorData::U8(v) | TensorData::F8E4M3(v) | TensorData::F8E5M2(v) => v.clone(),
                    TensorData::U16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
                    TensorData::U32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
                    TensorData::U64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
                    TensorData::Bool(v) => v.iter().map(|&x| x as u8).collect(),
                };
                let got = t.le_bytes();
                assert_eq!(got.as_ref(), want.as_slice(), "{d}");
                assert_eq!(t.to_le_bytes(), want, "{d}");
                assert_eq!(HostTensor::from_le_bytes(d, vec![vals.len()], &got).unwrap(), t, "{d}");
                #[cfg(target_endian = "little")]
                assert_eq!(matches!(got, std::borrow::Cow::Borrowed(_)), d != DType::Bool, "{d}: borrowed unless bool");
            }
        }

        #[test]
        fn non_finite_values_survive_json() {
            let d = TensorData::F32(vec![0.0, f32::NEG_INFINITY, f32::INFINITY, f32::NAN, 1.5]);
            let json = serde_json::to_string(&d).unwrap();
            assert!(!json.contains("null"), "{json}");
            let back: TensorData = serde_json::from_str(&json).unwrap();
            let TensorData::F32(v) = back else { panic!("{json}") };
            assert_eq!((v[0], v[1], v[2], v[4]), (0.0, f32::NEG_INFINITY, f32::INFINITY, 1.5));
            assert!(v[3].is_nan());
            // The old form (plain numbers, integers included) still reads.
            let old: TensorData = serde_json::from_str(r#"{"F64": [1, 2.5, -3]}"#).unwrap();
            assert_eq!(old, TensorData::F64(vec![1.0, 2.5, -3.0]));
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn permuted_stores_the_axes_in_the_given_order() {
        use super::HostTensor;
        // [2, 1, 3] weights stored tap-major ([1, 3, 2]), as a depthwise window's are.
        let t = HostTensor::f32(vec![2, 1, 3], vec![0.0, 1.0, 2.0, 10.0, 11.0, 12.0]).expect("tensor");
        let p = t.permuted(&[1, 2, 0]).expect("permuted");
        assert_eq!(p.shape, vec![1, 3, 2]);
        assert_eq!(p.to_f64_vec(), vec![0.0, 10.0, 1.0, 11.0, 2.0, 12.0]);
        assert_eq!(t.permuted(&[0, 1, 2]).expect("identity").to_f64_vec(), t.to_f64_vec());
        for bad in [&[0, 1][..], &[0, 0, 1], &[0, 1, 3]] {
            assert!(t.permuted(bad).is_err(), "{bad:?}");
        }
    }
}
