//! The CUDA side of max-autotune: compiling a [`Tuning`] of one kernel and timing it on the
//! device ([`TuneTarget`] for [`sinter_core::tune::autotune`]). Candidates run on the executable's
//! own stream over its own (zero-filled) buffers, before the run graph is captured.

use super::CudaBackend;
use super::exec::LoadedKernel;
use crate::device::{Stream, TimingEvents};
use crate::nvrtc::CubinCache;
use crate::render::Tuning;
use sinter_core::backend::BackendError;
use sinter_core::kernel::Kernel;
use sinter_core::tune::TuneTarget;
use std::sync::Arc;

/// Launches before timing (module load, caches, clocks).
const WARMUP: usize = 2;
/// Timed launches; the median is the candidate's time.
const SAMPLES: usize = 5;

/// Compiles and times candidates of one kernel.
pub(crate) struct KernelTuner<'a> {
    backend: &'a CudaBackend,
    kernel: &'a Kernel,
    args: Vec<u64>,
    stream: &'a Arc<Stream>,
    events: TimingEvents,
    cubins: &'a CubinCache,
}

impl<'a> KernelTuner<'a> {
    pub(crate) fn new(
        backend: &'a CudaBackend,
        kernel: &'a Kernel,
        args: Vec<u64>,
        stream: &'a Arc<Stream>,
        cubins: &'a CubinCache,
    ) -> Result<KernelTuner<'a>, BackendError> {
        let events = TimingEvents::new(backend.device(), SAMPLES)?;
        Ok(KernelTuner { backend, kernel, args, stream, events, cubins })
    }
}

impl TuneTarget for KernelTuner<'_> {
    type Tuning = Tuning;
    type Loaded = LoadedKernel;

    fn compile(&mut self, t: &Tuning) -> Result<LoadedKernel, BackendError> {
        self.backend.build_kernel(self.kernel, t, &self.args, self.cubins, self.stream)
    }

    fn source<'b>(&self, l: &'b LoadedKernel) -> &'b str {
        &l.rendered.source
    }

    fn time(&mut self, l: &LoadedKernel) -> Result<f64, BackendError> {
        let cu = self.stream;
        for _ in 0..WARMUP {
            l.launch.launch(cu)?;
        }
        for i in 0..SAMPLES {
            self.events.record(i, false, cu)?;
            l.launch.launch(cu)?;
            self.events.record(i, true, cu)?;
        }
        let mut ns = (0..SAMPLES)
            .map(|i| self.events.elapsed_ms(i, i, true).map(|ms| ms * 1e6))
            .collect::<Result<Vec<_>, _>>()?;
        ns.sort_by(f64::total_cmp);
        Ok(ns[SAMPLES / 2])
    }
}
