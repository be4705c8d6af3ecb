//! Device buffers: allocation, upload, download, fill, binding ranges and the chunk planner.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::{Device, DeviceError};

/// Bytes written per `write_buffer` call when uploading or filling; bounds the staging memory wgpu uses.
const STAGING_CHUNK: u64 = 64 << 20;

/// Rounds up to a multiple of 4 (wgpu's copy alignment), at least 4.
pub(crate) fn pad4(bytes: u64) -> u64 {
    bytes.max(1).div_ceil(4) * 4
}

/// A device buffer usable as storage, copy source and copy destination. Cheap to clone (shared handle).
#[derive(Clone, Debug)]
pub struct GpuBuffer {
    raw: wgpu::Buffer,
    len: u64,
    label: Arc<str>,
}

impl GpuBuffer {
    /// Bytes requested at allocation (the logical length).
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the logical length is zero.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes actually allocated: the logical length rounded up to 4 (at least 4).
    pub fn padded_len(&self) -> u64 {
        self.raw.size()
    }

    /// The label given at allocation.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// The underlying wgpu buffer.
    pub fn raw(&self) -> &wgpu::Buffer {
        &self.raw
    }

    /// The whole buffer (its padded length) as a binding range.
    pub fn whole(&self) -> BufferRange<'_> {
        BufferRange { buffer: self, offset: 0, size: self.padded_len() }
    }

    /// `size` bytes from `offset` as a binding range. Checked when bound: the offset must be a multiple of
    /// `min_storage_buffer_offset_alignment`, the size a multiple of 4 within the buffer and the binding limit.
    pub fn range(&self, offset: u64, size: u64) -> BufferRange<'_> {
        BufferRange { buffer: self, offset, size }
    }

    /// The range a [`Chunk`] describes.
    pub fn chunk(&self, chunk: &Chunk) -> BufferRange<'_> {
        self.range(chunk.offset, chunk.size)
    }

    /// Whether two handles refer to the same device buffer.
    pub fn same_buffer(&self, other: &GpuBuffer) -> bool {
        self.raw == other.raw
    }
}

/// A byte range of a [`GpuBuffer`] to bind to a shader (like wgpu's `BufferSlice`).
#[derive(Clone, Copy, Debug)]
pub struct BufferRange<'a> {
    /// The buffer.
    pub buffer: &'a GpuBuffer,
    /// Start, in bytes.
    pub offset: u64,
    /// Length, in bytes.
    pub size: u64,
}

/// One piece of a large tensor that fits one storage binding, from [`plan_chunks`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Chunk {
    /// Byte offset in the buffer (aligned to the storage offset alignment).
    pub offset: u64,
    /// Bytes to bind (a multiple of 4; covers `elements` elements, the last chunk padded up to 4).
    pub size: u64,
    /// Index of the chunk's first element in the whole tensor.
    pub first_element: u64,
    /// Elements in the chunk.
    pub elements: u64,
}

/// Greatest common divisor.
fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// Splits `total_bytes` of `elem_bytes`-sized elements into ranges that each fit one storage binding of at
/// most `max_binding` bytes, start at a multiple of `offset_alignment` and hold whole elements.
///
/// Every chunk but the last has the same size, the largest multiple of lcm(`elem_bytes`, 4,
/// `offset_alignment`) that fits; the last is padded to 4 bytes (buffers are allocated padded). Zero bytes
/// give no chunks.
pub fn plan_chunks(
    total_bytes: u64,
    elem_bytes: u64,
    max_binding: u64,
    offset_alignment: u64,
) -> Result<Vec<Chunk>, DeviceError> {
    if elem_bytes == 0 || offset_alignment == 0 {
        return Err(DeviceError::InvalidArgument(format!(
            "plan_chunks: element size ({elem_bytes}) and offset alignment ({offset_alignment}) must be positive"
        )));
    }
    if !total_bytes.is_multiple_of(elem_bytes) {
        return Err(DeviceError::InvalidArgument(format!(
            "plan_chunks: {total_bytes} bytes is not a whole number of {elem_bytes}-byte elements"
        )));
    }
    let lcm2 = |a: u64, b: u64| a / gcd(a, b) * b;
    let step = lcm2(lcm2(elem_bytes, 4), offset_alignment);
    let chunk_bytes = max_binding / step * step;
    if chunk_bytes == 0 {
        return Err(DeviceError::InvalidArgument(format!(
            "plan_chunks: a binding limit of {max_binding} bytes cannot hold one aligned step of {step} bytes"
        )));
    }
    let mut chunks = Vec::with_capacity(total_bytes.div_ceil(chunk_bytes) as usize);
    let mut offset = 0;
    while offset < total_bytes {
        let bytes = chunk_bytes.min(total_bytes - offset);
        chunks.push(Chunk {
            offset,
            size: pad4(bytes),
            first_element: offset / elem_bytes,
            elements: bytes / elem_bytes,
        });
        offset += bytes;
    }
    Ok(chunks)
}

impl Device {
    /// Allocates a buffer of `bytes` (padded to 4) usable as storage, copy source and copy destination.
    /// Contents are zero.
    ///
    /// Sizes above `max_buffer_size`, and allocations the driver cannot satisfy, give
    /// [`DeviceError::OutOfMemory`]; nothing panics.
    pub fn alloc(&self, bytes: u64, label: &str) -> Result<GpuBuffer, DeviceError> {
        self.check_lost()?;
        let padded = pad4(bytes);
        let max = self.inner.limits.max_buffer_size;
        if padded > max {
            return Err(DeviceError::OutOfMemory {
                label: label.to_string(),
                requested: bytes,
                message: format!("exceeds the device's max_buffer_size of {max} bytes"),
            });
        }
        let (raw, err) = self.scoped(|| {
            self.inner.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size: padded,
                usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            })
        });
        match err {
            None => Ok(GpuBuffer { raw, len: bytes, label: Arc::from(label) }),
            Some(e) => {
                raw.destroy();
                Err(match e {
                    wgpu::Error::OutOfMemory { source } => DeviceError::OutOfMemory {
                        label: label.to_string(),
                        requested: bytes,
                        message: format!("the driver is out of memory: {source}"),
                    },
                    other => super::map_wgpu_error(&format!("allocating `{label}`"), other),
                })
            }
        }
    }

    /// Writes `data` at the start of `buf`. Lengths that are not a multiple of 4 are padded with zeros.
    pub fn upload(&self, buf: &GpuBuffer, data: &[u8]) -> Result<(), DeviceError> {
        self.upload_at(buf, 0, data)
    }

    /// Writes `data` at byte `offset` (a multiple of 4) of `buf`. The write is ordered before any later
    /// submit on this device. When `data.len()` is not a multiple of 4, the bytes after it up to the next
    /// multiple of 4 are overwritten with zeros (wgpu copies whole words).
    pub fn upload_at(&self, buf: &GpuBuffer, offset: u64, data: &[u8]) -> Result<(), DeviceError> {
        if !offset.is_multiple_of(4) {
            return Err(DeviceError::InvalidArgument(format!(
                "upload to `{}` at offset {offset}: offsets must be multiples of 4",
                buf.label()
            )));
        }
        let end = offset.checked_add(data.len() as u64);
        if end.is_none_or(|e| e > buf.padded_len()) {
            return Err(DeviceError::InvalidArgument(format!(
                "upload of {} bytes at offset {offset} overruns buffer `{}` of {} bytes",
                data.len(),
                buf.label(),
                buf.len()
            )));
        }
        if data.is_empty() {
            return Ok(());
        }
        self.checked(&format!("uploading to `{}`", buf.label()), || {
            let mut at = offset;
            for piece in data.chunks(STAGING_CHUNK as usize) {
                if piece.len() % 4 == 0 {
                    self.inner.queue.write_buffer(&buf.raw, at, piece);
                } else {
                    let mut padded = piece.to_vec();
                    padded.resize(pad4(piece.len() as u64) as usize, 0);
                    self.inner.queue.write_buffer(&buf.raw, at, &padded);
                }
                at += piece.len() as u64;
            }
        })
    }

    /// Reads the whole logical length of `buf` back to the host (waits for all earlier work).
    pub fn download(&self, buf: &GpuBuffer) -> Result<Vec<u8>, DeviceError> {
        self.download_range(buf, 0, buf.len())
    }

    /// Reads `len` bytes from byte `offset` (a multiple of 4) of `buf`: copies them to a mappable staging
    /// buffer, submits, maps and waits.
    pub fn download_range(&self, buf: &GpuBuffer, offset: u64, len: u64) -> Result<Vec<u8>, DeviceError> {
        if !offset.is_multiple_of(4) {
            return Err(DeviceError::InvalidArgument(format!(
                "download from `{}` at offset {offset}: offsets must be multiples of 4",
                buf.label()
            )));
        }
        if offset.checked_add(len).is_none_or(|e| e > buf.padded_len()) {
            return Err(DeviceError::InvalidArgument(format!(
                "download of {len} bytes at offset {offset} overruns buffer `{}` of {} bytes",
                buf.label(),
                buf.len()
            )));
        }
        if len == 0 {
            return Ok(Vec::new());
        }
        let copy = pad4(len).min(buf.padded_len() - offset);
        let context = format!("downloading `{}`", buf.label());
        let staging = self.checked(&context, || {
            let staging = self.inner.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("sinter download staging"),
                size: copy,
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            });
            let mut enc = self
                .inner
                .device
                .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("sinter download") });
            enc.copy_buffer_to_buffer(&buf.raw, offset, &staging, 0, copy);
            self.inner.queue.submit([enc.finish()]);
            staging
        })?;
        let mut out = self.read_mapped(&staging, buf.label())?;
        staging.destroy();
        out.truncate(len as usize);
        Ok(out)
    }

    /// Maps a `MAP_READ` buffer whose copy has been submitted, waits, and returns its contents.
    pub(crate) fn read_mapped(&self, staging: &wgpu::Buffer, label: &str) -> Result<Vec<u8>, DeviceError> {
        let (tx, rx) = std::sync::mpsc::channel();
        staging.map_async(wgpu::MapMode::Read, .., move |r| {
            let _ = tx.send(r);
        });
        self.inner.device.poll(wgpu::PollType::wait_indefinitely()).map_err(|e| DeviceError::Poll(e.to_string()))?;
        self.check_lost()?;
        match rx.recv() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(DeviceError::Map { label: label.to_string(), message: e.to_string() }),
            Err(_) => {
                return Err(DeviceError::Map {
                    label: label.to_string(),
                    message: "the map callback never ran".to_string(),
                });
            }
        }
        let out = {
            let view = staging
                .get_mapped_range(..)
                .map_err(|e| DeviceError::Map { label: label.to_string(), message: e.to_string() })?;
            view.to_vec()
        };
        staging.unmap();
        Ok(out)
    }

    /// Fills all of `buf` (its padded length) with `pattern` repeated from byte 0: e.g. `&[0xff; 4]` poisons
    /// f32 outputs with NaN before a test, `&[0]` clears. Zero patterns use the GPU's clear.
    pub fn fill(&self, buf: &GpuBuffer, pattern: &[u8]) -> Result<(), DeviceError> {
        if pattern.is_empty() {
            return Err(DeviceError::InvalidArgument(format!("fill of `{}` with an empty pattern", buf.label())));
        }
        let total = buf.padded_len();
        let context = format!("filling `{}`", buf.label());
        if pattern.iter().all(|&b| b == 0) {
            return self.checked(&context, || {
                let mut enc = self
                    .inner
                    .device
                    .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("sinter fill") });
                enc.clear_buffer(&buf.raw, 0, None);
                self.inner.queue.submit([enc.finish()]);
            });
        }
        // A chunk that is a whole number of patterns and of 4-byte words, about STAGING_CHUNK bytes.
        let unit = (pattern.len() as u64) / gcd(pattern.len() as u64, 4) * 4;
        let chunk_len = (STAGING_CHUNK / unit).max(1) * unit;
        let chunk_len = chunk_len.min(total.div_ceil(unit) * unit);
        let chunk: Vec<u8> = pattern.iter().copied().cycle().take(chunk_len as usize).collect();
        self.checked(&context, || {
            let mut at = 0;
            while at < total {
                let n = chunk_len.min(total - at);
                self.inner.queue.write_buffer(&buf.raw, at, &chunk[..n as usize]);
                at += n;
            }
        })
    }

    /// [`plan_chunks`] with this device's storage binding limit and offset alignment.
    pub fn plan_chunks(&self, total_bytes: u64, elem_bytes: u64) -> Result<Vec<Chunk>, DeviceError> {
        plan_chunks(
            total_bytes,
            elem_bytes,
            self.inner.limits.max_storage_buffer_binding_size,
            u64::from(self.inner.limits.min_storage_buffer_offset_alignment),
        )
    }

    /// Checks that `r` can be bound as storage (or uniform when `uniform`) on this device.
    pub(crate) fn check_range(&self, r: &BufferRange<'_>, uniform: bool) -> Result<(), DeviceError> {
        let l = &self.inner.limits;
        let (align, limit, limit_name) = if uniform {
            (
                l.min_uniform_buffer_offset_alignment,
                l.max_uniform_buffer_binding_size,
                "max_uniform_buffer_binding_size",
            )
        } else {
            (
                l.min_storage_buffer_offset_alignment,
                l.max_storage_buffer_binding_size,
                "max_storage_buffer_binding_size",
            )
        };
        let label = r.buffer.label();
        if !r.offset.is_multiple_of(u64::from(align)) {
            return Err(DeviceError::InvalidArgument(format!(
                "binding of `{label}` at offset {}: offsets must be multiples of {align} on this device",
                r.offset
            )));
        }
        if r.size == 0 || !r.size.is_multiple_of(4) {
            return Err(DeviceError::InvalidArgument(format!(
                "binding of `{label}` with size {}: sizes must be positive multiples of 4",
                r.size
            )));
        }
        if r.offset.checked_add(r.size).is_none_or(|e| e > r.buffer.padded_len()) {
            return Err(DeviceError::InvalidArgument(format!(
                "binding of `{label}` [{}, +{}) overruns its {} bytes",
                r.offset,
                r.size,
                r.buffer.padded_len()
            )));
        }
        if r.size > limit {
            return Err(DeviceError::BindingTooLarge { label: label.to_string(), size: r.size, limit, limit_name });
        }
        Ok(())
    }
}
