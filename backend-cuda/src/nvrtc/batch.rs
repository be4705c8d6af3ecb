//! Compiling many sources at once ([`compile_parallel`]): the kernels compiled ahead of time and
//! cache lookups first, then the misses as jobs on up to [`MAX_COMPILE_THREADS`] threads, light
//! sources joined several to one translation unit.
//!
//! Why: every NVRTC program pays a fixed start (front end, built-in headers, ptxas) of about 20 ms
//! on this project's CI machine, more than a pointwise kernel's own code costs. Measured there
//! (PyPI NVRTC 13.0): ResNet-18's 20 convolution epilogues took 681 ms as 20 programs and 190 ms
//! as one. On an H200 host the epilogues of a CNN's library steps each took ~0.29 s in a parallel
//! batch of separate programs (ResNet-50: 55 programs, 0.92 s of a 1.46 s cold compile).
//!
//! Contract:
//! * One result per source, in the order given, each as compiling that source alone would give:
//!   the cubin holds the source's entry (a group's cubin holds its other members' entries too:
//!   `extern "C"` names are distinct within a program, and each source is wrapped in its own
//!   namespace by [`combine_sources`]).
//! * A group that fails is compiled again member by member, so an error names its own source and
//!   the other members still compile.
//! * Each member's cubin is cached under the member's own key, so a warm load finds every member
//!   without knowing the grouping; a device loads an image several members share once.
//! * Heavy sources (anything long, and sources marked [`COMPILE_ALONE`] by the renderer: the
//!   tensor-core templates, walks unrolled whole) compile alone, longest first.
//! * With two jobs or more, each compile thread hands its jobs to a pooled worker process where
//!   the process registered a worker command (`worker`: NVRTC on threads of one process contends).
//! * A source compiled ahead of time ([`crate::aot::lookup`]: byte-identical to an `aot/*.cu` file,
//!   same architecture) is its embedded cubin, marked as from a cache, before the cache's key is
//!   asked for (it needs NVRTC's version): no NVRTC, no cache entry read or written.
//! * PTX modules (`render::ptx`) skip NVRTC and the cache: up to a group's size of them with
//!   distinct entries join one module (`ptx::combine`), each member's result that module's text,
//!   which the driver's JIT assembles when it is loaded.

use super::{Cubin, CubinCache, NvrtcError, Target, combine_sources, compile};

/// Most NVRTC compiles [`compile_parallel`] runs at once.
pub const MAX_COMPILE_THREADS: usize = 16;

/// Sources at most this long without the [`COMPILE_ALONE`] mark are light (pointwise, reduction
/// and window kernels, library epilogues: 1.6-6 KB rendered; the `mma.sync` templates are 11-15
/// KB).
const LIGHT_MAX_BYTES: usize = 8 << 10;

/// Light sources per translation unit, unless `SINTER_NVRTC_GROUP` says otherwise (1: each alone).
const DEFAULT_GROUP: usize = 8;

/// A line the renderer writes into a source that is costly to compile (every tensor-core
/// template, through its helpers; a walk unrolled whole into hundreds of bodies), so it compiles
/// alone instead of in a group of light ones.
///
/// Why: ConvNeXt-Tiny bf16's depthwise 7x7 windows (3 KB, 392 bodies unrolled) take NVRTC 0.47-0.71
/// s each on an H200 host; grouped eight light sources to a unit, a unit holding two or three of
/// them took 1.3-1.8 s, the batch's slowest (session 30, calls 1-2).
pub const COMPILE_ALONE: &str = "// sinter: compiled alone";

fn light(source: &str) -> bool {
    source.len() <= LIGHT_MAX_BYTES && !source.contains(COMPILE_ALONE)
}

fn group_size() -> usize {
    std::env::var("SINTER_NVRTC_GROUP").ok().and_then(|v| v.parse().ok()).unwrap_or(DEFAULT_GROUP).max(1)
}

/// The PTX modules among `sources` (`render::ptx`; `None` for CUDA C++) as the images to load:
/// up to a group's size of them with distinct entries joined into one module (`ptx::combine`:
/// the driver's JIT then runs once for the group), each member's image that module's text.
/// Deterministic, so a load can start loading them before the NVRTC batch returns them.
pub fn ptx_images(sources: &[(&str, &str)]) -> Vec<Option<Cubin>> {
    let mut out = vec![None; sources.len()];
    let ptx: Vec<usize> = (0..sources.len()).filter(|&i| crate::render::ptx::is_ptx(sources[i].1)).collect();
    for group in ptx.chunks(group_size()) {
        let names: std::collections::HashSet<&str> = group.iter().map(|&i| sources[i].0).collect();
        if group.len() > 1 && names.len() == group.len() {
            let srcs: Vec<&str> = group.iter().map(|&i| sources[i].1).collect();
            let image = super::ptx_image(&crate::render::ptx::combine(&srcs));
            for &i in group {
                out[i] = Some(image.clone());
            }
        } else {
            for &i in group {
                out[i] = Some(super::ptx_image(sources[i].1));
            }
        }
    }
    out
}

/// One compile job: source indices (one, or a group of light ones).
type Job = Vec<usize>;

/// Compiles `sources` (name, CUDA C++) for `target` through `cubins` (see the module doc): one
/// result per source, in the order given, each with whether it came from a cache (the cubin cache,
/// or the kernels compiled ahead of time: [`crate::aot`]).
pub fn compile_parallel(
    sources: &[(&str, &str)],
    target: &Target,
    cubins: &CubinCache,
) -> Vec<Result<(Cubin, bool), NvrtcError>> {
    let mut out: Vec<Option<Result<(Cubin, bool), NvrtcError>>> = vec![None; sources.len()];
    let mut keys = vec![String::new(); sources.len()];
    let (mut heavy, mut lights) = (Vec::new(), Vec::new());
    for (i, image) in ptx_images(sources).into_iter().enumerate() {
        out[i] = image.map(|c| Ok((c, false)));
    }
    for (i, (name, src)) in sources.iter().enumerate() {
        if out[i].is_some() {
            continue;
        }
        // Before the key: it asks NVRTC for its version, and a hit needs no NVRTC.
        if let Some(c) = crate::aot::lookup(src, target) {
            out[i] = Some(Ok((c, true)));
            continue;
        }
        match CubinCache::key(src, target) {
            Err(e) => out[i] = Some(Err(e)),
            Ok(key) => match cubins.cached(name, &key) {
                Some(c) => out[i] = Some(Ok((c, true))),
                None => {
                    keys[i] = key;
                    if light(src) { lights.push(i) } else { heavy.push(i) }
                }
            },
        }
    }
    heavy.sort_by_key(|&i| std::cmp::Reverse(sources[i].1.len()));
    let mut jobs: Vec<Job> = heavy.into_iter().map(|i| vec![i]).collect();
    jobs.extend(lights.chunks(group_size()).map(<[usize]>::to_vec));
    // Worker processes only where jobs run side by side (one job gains nothing from a process).
    let processes = jobs.len() > 1 && super::worker::workers_enabled();
    let results = sinter_core::par::map(&jobs, MAX_COMPILE_THREADS, |job| run_job(job, sources, target, processes));
    for (i, r) in results.into_iter().flatten() {
        if let Ok(c) = &r {
            cubins.keep(&keys[i], c);
        }
        out[i] = Some(r.map(|c| (c, false)));
    }
    out.into_iter()
        .map(|r| r.unwrap_or_else(|| Err(NvrtcError::Unavailable("a compile thread stopped early".into()))))
        .collect()
}

/// Compiles one job: a source alone, or a group as one translation unit (member by member when
/// the group fails). Every member's cubin of a group is the group's.
fn run_job(
    job: &[usize],
    sources: &[(&str, &str)],
    target: &Target,
    processes: bool,
) -> Vec<(usize, Result<Cubin, NvrtcError>)> {
    let compile = |name: &str, source: &str| {
        let in_worker = if processes { super::worker::compile_in_worker(name, source, target) } else { None };
        in_worker.unwrap_or_else(|| compile(name, source, target))
    };
    let alone = |i: usize| (i, compile(sources[i].0, sources[i].1));
    if let [i] = job {
        return vec![alone(*i)];
    }
    let srcs: Vec<&str> = job.iter().map(|&i| sources[i].1).collect();
    let name = format!("{}_and_{}_more", sources[job[0]].0, job.len() - 1);
    match compile(&name, &combine_sources(&srcs)) {
        Ok(c) => job.iter().map(|&i| (i, Ok(c.clone()))).collect(),
        Err(_) => job.iter().map(|&i| alone(i)).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tensor_core_and_long_sources_are_heavy() {
        use crate::render::{CudaCaps, Tuning, render};
        use sinter_core::DType;
        use sinter_core::testsuite::programs::{AttnCase, attention};
        assert!(light("extern \"C\" __global__ void k(float* a) { a[0] = 1.0f; }"));
        // Tensor-core templates are marked through their helpers; a name is not a mark.
        for dtype in [DType::BF16, DType::F32] {
            let p = attention(&AttnCase::new(1, 2, 128, 128, 64, dtype));
            let r = render(&p.kernels[0], &CudaCaps::hopper(), &Tuning::default()).expect("renders");
            let tc = r.strategy.contains("mma");
            assert_eq!(light(&r.source), !tc, "{}", r.strategy);
        }
        assert!(light("// gamma\nextern \"C\" __global__ void k(float* gamma) { gamma[0] = 1.0f; }"));
        assert!(!light(&"x".repeat(LIGHT_MAX_BYTES + 1)));
        assert!(!light(&format!("extern \"C\" __global__ void k() {{\n    {COMPILE_ALONE}: 392 bodies\n}}")));
    }
}
