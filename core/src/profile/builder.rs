//! Recording: [`ProfileBuilder`] fills a [`Profile`] as a run proceeds (kernels, launches, compile
//! spans, fusion decisions) on one clock; [`SpanRecorder`] times compile phases before a builder
//! exists.

use super::{
    DeviceInfo, FusionDecision, GraphSummary, KernelProfile, Launch, Mode, Profile, ProfileError, Span, SpanCategory,
    TimeStats,
};
use crate::ir::Graph;
use std::time::Instant;

/// Records compile spans before a [`ProfileBuilder`] exists (compilation happens before
/// profiling); hand it over with [`ProfileBuilder::add_recorded_spans`].
#[derive(Clone, Debug)]
pub struct SpanRecorder {
    origin: Instant,
    spans: Vec<Span>,
}

impl Default for SpanRecorder {
    fn default() -> Self {
        SpanRecorder::new()
    }
}

impl SpanRecorder {
    /// A recorder whose clock starts now.
    pub fn new() -> SpanRecorder {
        SpanRecorder { origin: Instant::now(), spans: Vec::new() }
    }

    /// Runs `f`, recording its duration as a span.
    pub fn record<R>(&mut self, category: SpanCategory, name: &str, f: impl FnOnce() -> R) -> R {
        let start = Instant::now();
        let r = f();
        self.push(category, name, start, Instant::now(), "");
        r
    }

    /// Records a span between two instants.
    pub fn push(&mut self, category: SpanCategory, name: &str, start: Instant, end: Instant, detail: &str) {
        let start_ns = signed_ns(self.origin, start);
        let dur_ns = (signed_ns(self.origin, end) - start_ns).max(0.0);
        self.spans.push(Span { name: name.to_string(), category, start_ns, dur_ns, detail: detail.to_string() });
    }

    /// Sets the detail of the most recent span (e.g. `cache hit` once known).
    pub fn set_last_detail(&mut self, detail: &str) {
        if let Some(s) = self.spans.last_mut() {
            s.detail = detail.to_string();
        }
    }

    /// The spans so far, ns from this recorder's creation.
    pub fn spans(&self) -> &[Span] {
        &self.spans
    }

    /// The instant the recorder's clock counts from.
    pub fn origin(&self) -> Instant {
        self.origin
    }
}

/// `to - from` in ns, negative when `to` is earlier.
fn signed_ns(from: Instant, to: Instant) -> f64 {
    if to >= from { (to - from).as_nanos() as f64 } else { -((from - to).as_nanos() as f64) }
}

/// Fills a [`Profile`] as a run proceeds: kernels, launches with host and device times,
/// compile spans and fusion decisions, all on one clock that starts when the builder is made.
#[derive(Clone, Debug)]
pub struct ProfileBuilder {
    origin: Instant,
    profile: Profile,
}

impl ProfileBuilder {
    /// A builder whose clock starts now.
    pub fn new(workload: impl Into<String>, backend: impl Into<String>, mode: Mode, device: DeviceInfo) -> Self {
        ProfileBuilder { origin: Instant::now(), profile: Profile::new(workload, backend, mode, device) }
    }

    /// The instant the clock counts from.
    pub fn origin(&self) -> Instant {
        self.origin
    }

    /// Now, ns on the profile clock.
    pub fn now_ns(&self) -> f64 {
        self.ns_at(Instant::now())
    }

    /// An instant on the profile clock, ns (negative before the builder was made).
    pub fn ns_at(&self, t: Instant) -> f64 {
        signed_ns(self.origin, t)
    }

    /// Adds a kernel; returns its index for [`Launch::kernel`].
    pub fn add_kernel(&mut self, kernel: KernelProfile) -> usize {
        self.profile.kernels.push(kernel);
        self.profile.kernels.len() - 1
    }

    /// A kernel added earlier, to set details known later (registers, source path).
    pub fn kernel_mut(&mut self, index: usize) -> Option<&mut KernelProfile> {
        self.profile.kernels.get_mut(index)
    }

    /// Records a launch; returns its index.
    pub fn push_launch(&mut self, launch: Launch) -> usize {
        self.profile.launches.push(launch);
        self.profile.launches.len() - 1
    }

    /// Sets the device times of a launch recorded earlier (timestamps resolve after submit).
    pub fn set_device_time(&mut self, launch: usize, start_ns: f64, end_ns: f64) -> Result<(), ProfileError> {
        let n = self.profile.launches.len();
        let l = self
            .profile
            .launches
            .get_mut(launch)
            .ok_or_else(|| ProfileError::Invalid(format!("launch {launch} does not exist ({n} recorded)")))?;
        l.device_start_ns = Some(start_ns);
        l.device_end_ns = Some(end_ns);
        Ok(())
    }

    /// The index of the kernel with this name.
    pub fn kernel_index(&self, name: &str) -> Option<usize> {
        self.profile.kernels.iter().position(|k| k.name == name)
    }

    /// Records one timed run of a batch of launches submitted together at `submit_ns` (profile
    /// clock), as backends that time a whole command buffer report it: each
    /// `(kernel name, device start relative to the first kernel, device duration)` becomes a
    /// launch whose host span is the submit instant and whose device span starts `start` after
    /// `submit_ns`. Fails on a kernel name that was not added.
    pub fn push_batch<'a>(
        &mut self,
        iteration: u32,
        submit_ns: f64,
        timings: impl IntoIterator<Item = (&'a str, f64, f64)>,
    ) -> Result<(), ProfileError> {
        for (name, start, dur) in timings {
            let k = self.kernel_index(name).ok_or_else(|| ProfileError::Invalid(format!("no kernel named {name}")))?;
            let s = submit_ns + start;
            self.push_launch(Launch::new(k, iteration, submit_ns, submit_ns).device(s, s + dur));
        }
        Ok(())
    }

    /// Records a compile span.
    pub fn push_span(&mut self, span: Span) {
        self.profile.compile_spans.push(span);
    }

    /// Runs `f`, recording it as a compile span.
    pub fn time_span<R>(&mut self, category: SpanCategory, name: &str, f: impl FnOnce() -> R) -> R {
        let start = self.now_ns();
        let r = f();
        let dur_ns = (self.now_ns() - start).max(0.0);
        self.push_span(Span { name: name.to_string(), category, start_ns: start, dur_ns, detail: String::new() });
        r
    }

    /// Adopts the spans of a recorder, moved onto this builder's clock.
    pub fn add_recorded_spans(&mut self, recorder: &SpanRecorder) {
        let shift = self.ns_at(recorder.origin());
        for s in recorder.spans() {
            let mut s = s.clone();
            s.start_ns += shift;
            self.push_span(s);
        }
    }

    /// Records a fusion decision (`(&program.decisions[i]).into()` converts the scheduler's).
    pub fn push_fusion(&mut self, decision: FusionDecision) {
        self.profile.fusion.push(decision);
    }

    /// Stores a summary of the captured graph (for the fusion diagram).
    pub fn set_graph(&mut self, graph: &Graph) {
        self.profile.graph = Some(GraphSummary::from_graph(graph));
    }

    /// Sets the peak device memory.
    pub fn set_peak_memory(&mut self, bytes: u64) {
        self.profile.peak_memory_bytes = Some(bytes);
    }

    /// Sets the iteration count (otherwise one more than the largest launch iteration).
    pub fn set_iterations(&mut self, iterations: u32) {
        self.profile.iterations = iterations;
    }

    /// The profile so far.
    pub fn profile(&self) -> &Profile {
        &self.profile
    }

    /// Finishes: per-kernel device times and statistics from the launches, the iteration count,
    /// and the clock shifted so the earliest event is at 0. Fails on inconsistent data.
    pub fn finish(mut self) -> Result<Profile, ProfileError> {
        let p = &mut self.profile;
        p.validate()?;
        let mut earliest = f64::INFINITY;
        for l in &p.launches {
            earliest = earliest.min(l.host_start_ns);
            if let Some(s) = l.device_start_ns {
                earliest = earliest.min(s);
            }
        }
        for s in &p.compile_spans {
            earliest = earliest.min(s.start_ns);
        }
        if earliest.is_finite() && earliest != 0.0 {
            for l in &mut p.launches {
                l.host_start_ns -= earliest;
                l.host_end_ns -= earliest;
                l.device_start_ns = l.device_start_ns.map(|t| t - earliest);
                l.device_end_ns = l.device_end_ns.map(|t| t - earliest);
            }
            for s in &mut p.compile_spans {
                s.start_ns -= earliest;
            }
        }
        let mut times: Vec<Vec<f64>> = vec![Vec::new(); p.kernels.len()];
        for l in &p.launches {
            if let Some(d) = l.device_ns() {
                times[l.kernel].push(d);
            }
        }
        for (k, t) in p.kernels.iter_mut().zip(times) {
            if !t.is_empty() {
                k.times_ns = t;
            }
            k.stats = TimeStats::from_samples(&k.times_ns);
            k.rate(&p.device.ceilings);
        }
        if p.iterations == 0 {
            p.iterations = p.launches.iter().map(|l| l.iteration + 1).max().unwrap_or(0);
        }
        p.validate()?;
        Ok(self.profile)
    }
}
