//! Kernel launches with prebuilt parameter arrays, function attributes, and timing events.
//!
//! A [`Launch`] owns its argument values (device addresses, 8 bytes each) and the `void**` array
//! pointing at them, both built once; [`Launch::set_arg`] patches a value in place (the driver
//! copies parameters at launch, so patching between launches is safe) and [`Launch::launch`] is
//! one `cuLaunchKernel`, with no allocation or formatting unless it fails.
//!
//! A kernel fed by bulk tensor copies also takes tensor maps by value after its pointers
//! ([`Launch::bind_tensor_maps`]): each is encoded from the address of the argument it names, and
//! encoded again by [`Launch::set_arg`] when that address changes.

use super::tma::{RawTensorMap, encode_tiled};
use super::{Device, Stream, check, driver_error};
use crate::tma::TensorMapParam;
use cudarc::driver::sys;
use cudarc::driver::{CudaEvent, CudaFunction};
use sinter_core::backend::BackendError;
use std::ffi::c_void;

/// What the driver reports about a loaded kernel (`cuFuncGetAttribute`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FuncAttributes {
    /// Registers per thread.
    pub registers: u32,
    /// Static shared memory per block, bytes.
    pub static_shared_bytes: u32,
    /// Local memory per thread (spills and stack), bytes.
    pub local_bytes: u32,
    /// Most threads per block this kernel can launch with (registers may limit it below 1024).
    pub max_threads_per_block: u32,
}

impl FuncAttributes {
    /// Reads the attributes of `f` (`name` labels errors).
    pub fn of(f: &CudaFunction, name: &str) -> Result<FuncAttributes, BackendError> {
        use sys::CUfunction_attribute as A;
        let get = |a: A| -> Result<u32, BackendError> {
            let mut v = 0i32;
            check(
                unsafe { sys::cuFuncGetAttribute(&mut v, a, f.cu_function()) },
                "cuFuncGetAttribute",
                &format!("kernel {name}"),
            )?;
            Ok(v.max(0) as u32)
        };
        Ok(FuncAttributes {
            registers: get(A::CU_FUNC_ATTRIBUTE_NUM_REGS)?,
            static_shared_bytes: get(A::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)?,
            local_bytes: get(A::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES)?,
            max_threads_per_block: get(A::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
        })
    }
}

/// One kernel ready to launch: function, shape and parameter array.
pub struct Launch {
    func: CudaFunction,
    name: String,
    grid: [u32; 3],
    block: [u32; 3],
    shared: u32,
    values: Box<[u64]>,
    /// Tensor-map parameters: what each is built on, and its encoding.
    maps: Box<[(TensorMapParam, RawTensorMap)]>,
    params: Box<[*mut c_void]>,
    empty: bool,
    attrs: FuncAttributes,
}

// SAFETY: `params` points only into `values` and `maps`, heap allocations owned by the same
// struct (moving the struct does not move them); the function handle is usable from any thread.
unsafe impl Send for Launch {}

impl std::fmt::Debug for Launch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Launch({} grid {:?} block {:?} shared {})", self.name, self.grid, self.block, self.shared)
    }
}

impl Launch {
    /// A launch of `func` with one 8-byte parameter per `args` entry (device addresses or
    /// integers). Checks the block against the device and the compiled kernel's limits and opts
    /// in to dynamic shared memory above 48 KiB.
    pub fn new(
        dev: &Device,
        func: CudaFunction,
        name: &str,
        grid: [u32; 3],
        block: [u32; 3],
        shared: u32,
        args: &[u64],
    ) -> Result<Launch, BackendError> {
        let attrs = FuncAttributes::of(&func, name)?;
        let threads = block.iter().map(|&b| b as u64).product::<u64>();
        if threads > attrs.max_threads_per_block as u64 {
            return Err(BackendError::Device(format!(
                "kernel {name}: a block of {threads} threads exceeds the {} this kernel can launch with ({} registers per thread)",
                attrs.max_threads_per_block, attrs.registers
            )));
        }
        let info = dev.info();
        if shared + attrs.static_shared_bytes > info.max_shared_per_block_optin {
            return Err(BackendError::Device(format!(
                "kernel {name}: {} bytes of shared memory exceed the device's {} per block",
                shared + attrs.static_shared_bytes,
                info.max_shared_per_block_optin
            )));
        }
        if shared > info.max_shared_per_block.saturating_sub(attrs.static_shared_bytes) {
            check(
                unsafe {
                    sys::cuFuncSetAttribute(
                        func.cu_function(),
                        sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                        shared as i32,
                    )
                },
                "cuFuncSetAttribute",
                &format!("kernel {name} dynamic shared memory"),
            )?;
        }
        let mut values: Box<[u64]> = args.into();
        let params: Box<[*mut c_void]> = values.iter_mut().map(|v| (v as *mut u64).cast::<c_void>()).collect();
        let empty = grid.contains(&0) || block.contains(&0);
        let maps: Box<[(TensorMapParam, RawTensorMap)]> = Box::new([]);
        Ok(Launch { func, name: name.to_string(), grid, block, shared, values, maps, params, empty, attrs })
    }

    /// Adds the tensor-map parameters `maps` after the pointers (replacing any bound before),
    /// each encoded from the current value of the argument it names.
    pub fn bind_tensor_maps(&mut self, maps: &[TensorMapParam]) -> Result<(), BackendError> {
        let mut bound = Vec::with_capacity(maps.len());
        for (i, p) in maps.iter().enumerate() {
            let Some(&base) = self.values.get(p.arg) else {
                return Err(BackendError::Device(format!(
                    "kernel {}: tensor map {i} names argument {} of {}",
                    self.name,
                    p.arg,
                    self.values.len()
                )));
            };
            let raw = encode_tiled(base + p.offset_bytes, &p.desc, &format!("kernel {} tensor map {i}", self.name))?;
            bound.push((p.clone(), raw));
        }
        self.maps = bound.into_boxed_slice();
        let values = self.values.iter_mut().map(|v| (v as *mut u64).cast::<c_void>());
        let maps = self.maps.iter_mut().map(|(_, m)| (m as *mut RawTensorMap).cast::<c_void>());
        self.params = values.chain(maps).collect();
        Ok(())
    }

    /// The tensor-map parameters bound (what each is built on).
    pub fn tensor_maps(&self) -> impl Iterator<Item = &TensorMapParam> {
        self.maps.iter().map(|(p, _)| p)
    }

    /// True when the grid or block is empty (launching does nothing).
    pub fn is_empty(&self) -> bool {
        self.empty
    }

    /// Kernel name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Grid (blocks).
    pub fn grid(&self) -> [u32; 3] {
        self.grid
    }

    /// Launches later with this grid (a kernel compiled for a larger extent covering a smaller
    /// one: see `Executable::set_extent`).
    pub fn set_grid(&mut self, grid: [u32; 3]) {
        self.grid = grid;
        self.empty = grid.contains(&0) || self.block.contains(&0);
    }

    /// Block (threads).
    pub fn block(&self) -> [u32; 3] {
        self.block
    }

    /// Dynamic shared memory, bytes.
    pub fn shared_bytes(&self) -> u32 {
        self.shared
    }

    /// What the driver reports about the compiled kernel.
    pub fn attributes(&self) -> FuncAttributes {
        self.attrs
    }

    /// The function.
    pub fn function(&self) -> &CudaFunction {
        &self.func
    }

    /// The current argument values.
    pub fn args(&self) -> &[u64] {
        &self.values
    }

    /// The `void**` parameter array (valid while this launch lives; the driver only reads it).
    pub fn param_array(&self) -> *mut *mut c_void {
        if self.params.is_empty() { std::ptr::null_mut() } else { self.params.as_ptr().cast_mut() }
    }

    /// Sets argument `i` (ignored when out of range), encoding again the tensor maps built on it
    /// when it changes (`Err`, the argument unchanged, when the driver refuses one: the new
    /// address is misaligned).
    #[inline]
    pub fn set_arg(&mut self, i: usize, value: u64) -> Result<(), BackendError> {
        let Some(&old) = self.values.get(i) else { return Ok(()) };
        if old == value {
            return Ok(());
        }
        for (j, (p, raw)) in self.maps.iter_mut().enumerate() {
            if p.arg == i {
                *raw = encode_tiled(value + p.offset_bytes, &p.desc, &format!("kernel {} tensor map {j}", self.name))?;
            }
        }
        self.values[i] = value;
        Ok(())
    }

    /// Queues the kernel on `stream` (nothing for an empty grid). The context must be bound.
    #[inline]
    pub fn launch(&self, stream: &Stream) -> Result<(), BackendError> {
        if self.empty {
            return Ok(());
        }
        // The driver only reads the parameter array (the `*mut` is its C signature).
        let params = self.param_array();
        let r = unsafe {
            sys::cuLaunchKernel(
                self.func.cu_function(),
                self.grid[0],
                self.grid[1],
                self.grid[2],
                self.block[0],
                self.block[1],
                self.block[2],
                self.shared,
                stream.cu(),
                params,
                std::ptr::null_mut(),
            )
        };
        r.result().map_err(|e| driver_error("cuLaunchKernel", &format!("kernel {}", self.name), e))
    }
}

/// Start/end event pairs (`CU_EVENT_DEFAULT`: events made with `DISABLE_TIMING` cannot time).
pub struct TimingEvents {
    pairs: Vec<(CudaEvent, CudaEvent)>,
}

impl TimingEvents {
    /// `n` pairs.
    pub fn new(dev: &Device, n: usize) -> Result<TimingEvents, BackendError> {
        dev.bind()?;
        let ev = || {
            dev.context()
                .new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
                .map_err(|e| driver_error("cuEventCreate", "timing event", e))
        };
        let pairs = (0..n).map(|_| Ok((ev()?, ev()?))).collect::<Result<Vec<_>, BackendError>>()?;
        Ok(TimingEvents { pairs })
    }

    /// Number of pairs.
    pub fn len(&self) -> usize {
        self.pairs.len()
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }

    /// Records the start (`end == false`) or end event of pair `i` on `stream`.
    pub fn record(&self, i: usize, end: bool, stream: &Stream) -> Result<(), BackendError> {
        let Some(p) = self.pairs.get(i) else {
            return Err(BackendError::Device(format!("timing event {i} of {}", self.pairs.len())));
        };
        let e = if end { &p.1 } else { &p.0 };
        check(unsafe { sys::cuEventRecord(e.cu_event(), stream.cu()) }, "cuEventRecord", "timing")
    }

    /// Milliseconds between the start of pair `a` and the start (`end == false`) or end of pair
    /// `b`, once both completed (waits for them).
    pub fn elapsed_ms(&self, a: usize, b: usize, end: bool) -> Result<f64, BackendError> {
        let (Some(pa), Some(pb)) = (self.pairs.get(a), self.pairs.get(b)) else {
            return Err(BackendError::Device(format!("timing events {a}, {b} of {}", self.pairs.len())));
        };
        let eb = if end { &pb.1 } else { &pb.0 };
        check(unsafe { sys::cuEventSynchronize(eb.cu_event()) }, "cuEventSynchronize", "timing")?;
        let ms = unsafe { cudarc::driver::result::event::elapsed(pa.0.cu_event(), eb.cu_event()) }
            .map_err(|e| driver_error("cuEventElapsedTime", "timing", e))?;
        Ok(ms as f64)
    }
}
