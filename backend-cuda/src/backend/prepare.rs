//! The parts of a default-mode load that need no device memory: each kernel's tuning (a library
//! step or the own template, and why), every own kernel and library epilogue rendered, identical
//! bodies found ([`Prepared`]); and the load's memory ([`CudaBackend::alloc_memory`]). Split so
//! that NVRTC and the library plans run while the memory is allocated and the constants uploaded
//! (`load_cuda`): on an H200 host the upload of GPT-2 small's bf16 weights (311 MB) took
//! 0.05-0.16 s and the cuBLASLt plans 0.11 s of a warm start, one after the other.
//!
//! Contract: [`CudaBackend::prepare_default`] is a pure function of the program and the backend
//! (no device calls); [`Prepared::bodies`] lists each distinct own body once, then the library
//! epilogues, in the order `load_cuda` indexes the compiled results.

use super::exec::Memory;
use super::load_times::LoadTimes;
use super::{CudaBackend, cuda_buffer, exec, library};
use crate::device::Stream;
use crate::render::{self, Rendered, Tuning};
use sinter_core::backend::{Backend, BackendError, LoadOptions, Mode};
use sinter_core::kernel::alloc::{AllocRole, AllocationPlan};
use sinter_core::kernel::{Kernel, KernelBody, Program};
use std::collections::HashMap;
use std::sync::Arc;

/// A default-mode load's decisions and sources (see the module doc).
pub(super) struct Prepared {
    /// Per kernel: its tuning, and why a matmul is not a library product.
    pub(super) tunings: Vec<(Tuning, Option<String>)>,
    /// Per kernel: its rendering (`None` for a library step).
    pub(super) rendered: Vec<Option<Rendered>>,
    /// Per kernel: the index of its body in [`Prepared::bodies`] (`None` for a library step).
    pub(super) rep: Vec<Option<usize>>,
    /// Per distinct own body: the kernel that rendered it first.
    first: Vec<usize>,
    /// The library steps' epilogue kernels.
    epilogues: Vec<Rendered>,
}

impl Prepared {
    /// (name, source) of each distinct own body, then of each library epilogue.
    pub(super) fn bodies(&self) -> Vec<(&str, &str)> {
        let own = self.first.iter().filter_map(|&i| self.rendered[i].as_ref());
        own.chain(&self.epilogues).map(|r| (r.name.as_str(), r.source.as_str())).collect()
    }

    /// How many of [`Prepared::bodies`] are own kernels (the rest are epilogues).
    pub(super) fn own_bodies(&self) -> usize {
        self.first.len()
    }

    /// The kernels of `program` that run as library steps.
    pub(super) fn library_kernels<'p>(&'p self, program: &'p Program) -> impl Iterator<Item = &'p Kernel> {
        program.kernels.iter().zip(&self.tunings).filter(|(_, (t, _))| t.library.is_some()).map(|(k, _)| k)
    }
}

impl CudaBackend {
    /// Each kernel's tuning in `mode` (not max-autotune), every own kernel and library epilogue
    /// rendered (into `times.render_s`), identical bodies under different names (a transformer's
    /// layers) found once: they compile once and share one loaded function, when their dynamic
    /// shared memory is equal too (a launch sets the function's limit to its own size).
    pub(super) fn prepare_default(
        &self,
        program: &Program,
        mode: Mode,
        times: &mut LoadTimes,
    ) -> Result<Prepared, BackendError> {
        let tunings: Vec<(Tuning, Option<String>)> = program
            .kernels
            .iter()
            .map(|k| match library::library_allowed(k, mode, self.cuda_caps.sm) {
                Ok(()) => (Tuning { library: Some(0), ..Tuning::default() }, None),
                Err(why) => {
                    if matches!(k.body, KernelBody::Matmul(_)) {
                        tracing::debug!(target: "sinter::cuda", "{}: own template, not cuBLASLt: {why}", k.name);
                    }
                    // A dynamic batch needs grids that shrink with it (no persistent tile).
                    let fixed = program.dynamic.as_ref().and_then(|_| render::fixed_grid_default(k, &self.cuda_caps));
                    (fixed.unwrap_or_else(|| self.own_default.clone()), Some(why))
                }
            })
            .collect();
        let t0 = std::time::Instant::now();
        let mut rendered = Vec::with_capacity(program.kernels.len());
        let mut epilogues = Vec::new();
        for (k, (t, _)) in program.kernels.iter().zip(&tunings) {
            if t.library.is_some() {
                rendered.push(None);
                epilogues.extend(self.epilogue_source(k));
            } else {
                rendered.push(Some(render::render(k, &self.cuda_caps, t)?));
            }
        }
        times.render_s = t0.elapsed().as_secs_f64();
        let mut body_of: HashMap<(String, u32), usize> = HashMap::new();
        let mut first = Vec::new();
        let rep: Vec<Option<usize>> = rendered
            .iter()
            .enumerate()
            .map(|(i, r)| {
                r.as_ref().map(|r| {
                    *body_of.entry((render::body_key(r), r.dynamic_shared_bytes)).or_insert_with(|| {
                        first.push(i);
                        first.len() - 1
                    })
                })
            })
            .collect();
        tracing::debug!(
            target: "sinter::cuda",
            "{} rendered kernels, {} distinct bodies compiled",
            rep.iter().flatten().count(),
            first.len()
        );
        Ok(Prepared { tunings, rendered, rep, first, epilogues })
    }

    /// Allocates `plan`'s memory (zeroed) and gets its constants onto the device (uploaded once
    /// per compiled graph through `opts.constants`), in the plan's order; into `times.memory_s`
    /// and the constants' counts.
    pub(super) fn alloc_memory(
        &self,
        plan: &AllocationPlan,
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
                    stream.fill(b.ptr(), 0, a.bytes, &a.label)?;
                    Memory::Own(b)
                }
            });
        }
        times.memory_s = t0.elapsed().as_secs_f64();
        Ok(mem)
    }
}
