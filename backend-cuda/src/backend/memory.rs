//! A CUDA load's memory (`CudaBackend::alloc_memory`): the program's allocations by its plan,
//! constants through the compiled graph's pool, everything else allocated on the executable's
//! stream and zeroed.
//!
//! Contract: called on the load's own thread (the context bound) before any kernel is compiled or
//! loaded; the memory is in the plan's allocation order; a constant another load of the same
//! compiled graph uploaded is shared, not uploaded again; an allocation that fails is the pool's
//! error naming the request, and what was allocated before it is dropped (back to the pool).

use super::exec::{self, Memory};
use super::load_times::LoadTimes;
use super::{CudaBackend, cuda_buffer};
use crate::device::Stream;
use sinter_core::backend::{Backend, BackendError, LoadOptions};
use sinter_core::kernel::alloc::{self, AllocRole};
use std::sync::Arc;

impl CudaBackend {
    /// The program's memory by the allocation plan: constants through `opts.constants` (uploaded
    /// once per compiled graph), the rest allocated on `stream` and zeroed; its time and the
    /// constants' count, bytes and time into `times`.
    pub(super) fn alloc_memory(
        &self,
        plan: &alloc::AllocationPlan,
        opts: &LoadOptions,
        stream: &Arc<Stream>,
        times: &mut LoadTimes,
    ) -> Result<Vec<Memory>, BackendError> {
        let t0 = std::time::Instant::now();
        let mut mem = Vec::with_capacity(plan.allocations.len());
        for a in &plan.allocations {
            mem.push(match &a.role {
                AllocRole::Constant(t) => {
                    let t1 = std::time::Instant::now();
                    let tensor = opts.constants.get_or_upload("cuda", t, |t| self.upload(t))?;
                    let b = cuda_buffer(&tensor, &self.dev, &a.label)?;
                    exec::wait_for(b, stream, None)?;
                    times.constants += 1;
                    times.constant_bytes += a.bytes;
                    times.constants_s += t1.elapsed().as_secs_f64();
                    Memory::Shared { ptr: b.ptr(), _tensor: tensor }
                }
                _ => {
                    let b = stream.alloc(a.bytes)?;
                    tracing::debug!(target: "sinter::cuda", "memory {}: {} bytes at {:#x}", a.label, a.bytes, b.ptr());
                    stream.fill(b.ptr(), 0, a.bytes, &a.label)?;
                    Memory::Own(b)
                }
            });
        }
        times.memory_s = t0.elapsed().as_secs_f64();
        Ok(mem)
    }
}
