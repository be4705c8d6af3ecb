//! NVRTC in CI: every kernel of every built-in workload (reduced scale, fused and unfused),
//! rendered with the default tuning and with every `render::candidates` tuning, compiles to an
//! sm_90a cubin; compile errors carry the log; the cubin cache hits, and rebuilds corrupt entries.
//!
//! Cost: default-tuning sources are compiled one by one, exactly as the backend compiles them;
//! the other candidates (several thousand sources, most of them the same few kernel shapes at
//! other sizes) are deduplicated per tuning up to numeric literals and compiled in batches of
//! `nvrtc::combine_sources`, which keeps this test to about a minute of NVRTC time.
//!
//! PTX modules (`render::ptx`) are assembled with `ptxas` instead (`common::ptxas`, `SINTER_PTXAS`).
//!
//! Without NVRTC these tests print a skip line, unless `SINTER_REQUIRE_NVRTC=1` (CI sets it in
//! `scripts/test.sh`, with the NVRTC wheel from PyPI), which makes a missing NVRTC a failure.

mod common;

use common::{cuda_caps, nvrtc_available};
use sinter_core::kernel::Kernel;
use sinter_core::schedule::{ScheduleOptions, schedule};
use sinter_core::workloads::{self, Scale};
use sinter_cuda::nvrtc::{self, CubinCache, NvrtcError, Target};
use sinter_cuda::render::{self, CudaCaps, Tuning};
use std::collections::HashSet;
use std::time::{Duration, Instant};

/// A kernel in the style of the renderer's output: f16/bf16 headers, a vectorized body.
const TYPICAL: &str = r#"#include <cuda_fp16.h>
#include <cuda_bf16.h>

extern "C" __global__ void __launch_bounds__(256) k0_add_relu_mul(
    const float* __restrict__ a0, const float* __restrict__ a1, float* __restrict__ a2, unsigned n) {
  unsigned i = (blockIdx.x * blockDim.x + threadIdx.x) * 4u;
  if (i + 3u < n) {
    float4 x = *reinterpret_cast<const float4*>(a0 + i);
    float4 b = *reinterpret_cast<const float4*>(a1 + i);
    float4 y;
    y.x = fmaxf(x.x + b.x, 0.0f) * 2.0f;
    y.y = fmaxf(x.y + b.y, 0.0f) * 2.0f;
    y.z = fmaxf(x.z + b.z, 0.0f) * 2.0f;
    y.w = fmaxf(x.w + b.w, 0.0f) * 2.0f;
    *reinterpret_cast<float4*>(a2 + i) = y;
  } else {
    for (; i < n; ++i) a2[i] = fmaxf(a0[i] + a1[i], 0.0f) * 2.0f;
  }
}

extern "C" __global__ void __launch_bounds__(256) k1_sum_bf16(
    const __nv_bfloat16* __restrict__ a0, float* __restrict__ a1, unsigned cols) {
  __shared__ float warp_sums[8];
  float acc = 0.0f;
  for (unsigned c = threadIdx.x; c < cols; c += blockDim.x) acc += __bfloat162float(a0[blockIdx.x * cols + c]);
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
  if ((threadIdx.x & 31u) == 0u) warp_sums[threadIdx.x >> 5] = acc;
  __syncthreads();
  if (threadIdx.x < 32u) {
    acc = threadIdx.x < 8u ? warp_sums[threadIdx.x] : 0.0f;
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if (threadIdx.x == 0u) a1[blockIdx.x] = acc;
  }
}
"#;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v.get(v.len() / 2).copied().unwrap_or_default()
}

#[test]
fn compiles_a_kernel_to_a_cubin_and_reports_resources() {
    if !nvrtc_available("compiles_a_kernel_to_a_cubin_and_reports_resources") {
        return;
    }
    let t = Target::hopper();
    let mut times = Vec::new();
    let mut cubin = None;
    for _ in 0..3 {
        let t0 = Instant::now();
        cubin = Some(nvrtc::compile("typical", TYPICAL, &t).unwrap_or_else(|e| panic!("{e}")));
        times.push(t0.elapsed());
    }
    let cubin = cubin.expect("compiled");
    eprintln!("NVRTC compile of a typical two-kernel source (f16/bf16 headers): median {:?}", median(times));
    assert!(cubin.image.starts_with(b"\x7fELF"), "not an ELF cubin");
    let add = nvrtc::resources(&cubin.log, "k0_add_relu_mul").unwrap_or_else(|| panic!("no resources:\n{}", cubin.log));
    let sum = nvrtc::resources(&cubin.log, "k1_sum_bf16").unwrap_or_else(|| panic!("no resources:\n{}", cubin.log));
    assert!(add.registers > 0 && add.spill_bytes == 0 && add.shared_bytes == 0, "{add:?}\n{}", cubin.log);
    assert!(sum.registers > 0 && sum.shared_bytes == 32, "{sum:?}\n{}", cubin.log);
    assert!(cubin.log.contains("for 'sm_90a'"), "{}", cubin.log);

    let ptx = nvrtc::compile_ptx("typical", TYPICAL, &t).unwrap_or_else(|e| panic!("{e}"));
    assert!(ptx.contains(".target sm_90a") && ptx.contains(".entry k1_sum_bf16"), "{ptx}");

    // Another architecture: plain `sm_XY`.
    let ampere = nvrtc::compile("typical", TYPICAL, &Target::sm((8, 0))).unwrap_or_else(|e| panic!("{e}"));
    assert!(ampere.log.contains("for 'sm_80'"), "{}", ampere.log);
}

/// NVRTC's own cache (the CUDA driver's, across processes) can be kept out of a compile: the
/// option is passed and NVRTC 13 accepts it; the cubin cache keys the two apart.
#[test]
fn nvrtc_cache_can_be_bypassed() {
    if !nvrtc_available("nvrtc_cache_can_be_bypassed") {
        return;
    }
    let src = "extern \"C\" __global__ void k(float* a) { a[0] = 1.0f; }\n";
    let off = Target { nvrtc_cache: false, ..Target::hopper() };
    assert!(nvrtc::options(&off, src).unwrap().contains(&"--no-cache".to_string()));
    assert!(!nvrtc::options(&Target::hopper(), src).unwrap().contains(&"--no-cache".to_string()));
    let cubin = nvrtc::compile("k", src, &off).unwrap_or_else(|e| panic!("{e}"));
    assert!(cubin.image.starts_with(b"\x7fELF"), "not an ELF cubin");
    // The same cubin either way: one key, so a warm load finds what a bypassed cold compile
    // stored.
    let key = |t: &Target| CubinCache::key(src, t).unwrap();
    assert_eq!(key(&off), key(&Target::hopper()));
    let cache = CubinCache::disabled().with_nvrtc_cache(false);
    assert!(!cache.target((9, 0)).nvrtc_cache);
}

#[test]
fn compile_errors_carry_the_log() {
    if !nvrtc_available("compile_errors_carry_the_log") {
        return;
    }
    let src = "extern \"C\" __global__ void k(float* a) {\n  a[0] = not_declared;\n}\n";
    match nvrtc::compile("k9_broken", src, &Target::hopper()) {
        Err(NvrtcError::Compile { name, log }) => {
            assert_eq!(name, "k9_broken");
            assert!(log.contains("k9_broken.cu(2): error") && log.contains("not_declared"), "{log}");
            assert!(log.contains("--gpu-architecture=sm_90a"), "options missing from the log: {log}");
        }
        other => panic!("expected a compile error, got {other:?}"),
    }
    match nvrtc::compile("nul", "extern \"C\" __global__ void k() {}\0", &Target::hopper()) {
        Err(NvrtcError::Compile { log, .. }) => assert!(log.contains("NUL"), "{log}"),
        other => panic!("expected a compile error, got {other:?}"),
    }
    // An architecture NVRTC does not know is an error with NVRTC's message, not a panic.
    match nvrtc::compile("k", "extern \"C\" __global__ void k() {}", &Target::sm((1, 0))) {
        Err(NvrtcError::Compile { log, .. }) => assert!(log.contains("sm_10"), "{log}"),
        other => panic!("expected an error for sm_10, got {other:?}"),
    }
}

#[test]
fn cubin_cache_hits_and_rebuilds_corrupt_entries() {
    if !nvrtc_available("cubin_cache_hits_and_rebuilds_corrupt_entries") {
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let cache = CubinCache::open(Some(tmp.path()));
    let t = Target::hopper();
    let t0 = Instant::now();
    let (cold, hit) = cache.compile_cached("typical", TYPICAL, &t).unwrap_or_else(|e| panic!("{e}"));
    let cold_time = t0.elapsed();
    assert!(!hit, "first compile cannot hit");
    let mut hit_times = Vec::new();
    for _ in 0..5 {
        let t0 = Instant::now();
        let (warm, hit) = cache.compile_cached("typical", TYPICAL, &t).unwrap_or_else(|e| panic!("{e}"));
        hit_times.push(t0.elapsed());
        assert!(hit, "second compile must hit");
        assert!(warm.image == cold.image && warm.log == cold.log, "a hit must return the stored cubin and log");
        assert_eq!(warm.seconds, 0.0, "a hit took no NVRTC time");
    }
    eprintln!("cubin cache: cold compile {cold_time:?}, hit (key + read + validate) median {:?}", median(hit_times));
    // Another target or another source misses.
    assert!(!cache.compile_cached("typical", TYPICAL, &Target::sm((8, 0))).expect("sm_80").1);
    let other = TYPICAL.replace("2.0f", "3.0f");
    assert!(!cache.compile_cached("typical", &other, &t).expect("other").1);

    // A truncated entry is detected, rebuilt and rewritten whole (by a cache opened afresh, as a
    // new process would: the first one remembers its cubins in memory).
    let cache = CubinCache::open(Some(tmp.path()));
    let key = CubinCache::key(TYPICAL, &t).expect("key");
    let path = cache.path(&key).expect("path");
    let bytes = std::fs::read(&path).expect("entry written");
    std::fs::write(&path, &bytes[..bytes.len() / 3]).expect("truncate");
    let (rebuilt, hit) = cache.compile_cached("typical", TYPICAL, &t).expect("rebuild");
    assert!(!hit, "a truncated entry must not be trusted");
    assert!(rebuilt.image == cold.image, "the rebuilt cubin differs");
    // Rewritten whole (the log differs: ptxas reports its compile time).
    let rewritten = nvrtc::decode_entry(&std::fs::read(&path).expect("rewritten")).expect("a valid entry");
    assert!(rewritten.image == cold.image, "the rewritten entry holds another cubin");
    assert!(cache.compile_cached("typical", TYPICAL, &t).expect("hit").1);
}

#[test]
fn parallel_batches_join_light_sources_and_isolate_a_broken_one() {
    if !nvrtc_available("parallel_batches_join_light_sources_and_isolate_a_broken_one") {
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let t = Target::hopper();
    let kernel = |name: &str, body: &str| {
        format!(
            "static __device__ __forceinline__ float f(float x) {{ return {body}; }}\n\
             extern \"C\" __global__ void {name}(float* __restrict__ a) {{ a[threadIdx.x] = f(a[threadIdx.x]); }}\n"
        )
    };
    let sources: Vec<(String, String)> = (0..5)
        .map(|i| {
            let name = format!("k{i}_light");
            let body = if i == 2 { "x + not_declared".to_string() } else { format!("x * {i}.5f") };
            let src = kernel(&name, &body);
            (name, src)
        })
        .collect();
    let refs: Vec<(&str, &str)> = sources.iter().map(|(n, s)| (n.as_str(), s.as_str())).collect();
    let cache = CubinCache::open(Some(tmp.path()));
    let results = nvrtc::compile_parallel(&refs, &t, &cache);
    assert_eq!(results.len(), 5);
    for (i, r) in results.iter().enumerate() {
        match (i, r) {
            (2, Err(NvrtcError::Compile { name, log })) => {
                assert_eq!(name, "k2_light", "the error names its own source");
                assert!(log.contains("not_declared"), "{log}");
            }
            (2, other) => panic!("the broken source compiled: {other:?}"),
            (_, Ok((c, hit))) => {
                assert!(!hit);
                let res = nvrtc::resources(&c.log, &format!("k{i}_light"));
                assert!(res.is_some(), "ptxas reported nothing for k{i}_light:\n{}", c.log);
            }
            (_, Err(e)) => panic!("k{i}_light: {e}"),
        }
    }
    // Every member is cached under its own key: a cache opened afresh finds each alone.
    let fresh = CubinCache::open(Some(tmp.path()));
    for (i, (name, src)) in refs.iter().enumerate().filter(|(i, _)| *i != 2) {
        let (c, hit) = fresh.compile_cached(name, src, &t).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(hit, "k{i}_light was not cached under its own key");
        assert!(nvrtc::resources(&c.log, name).is_some());
    }
}

/// One kernel to compile: where it came from, and its rendered source.
struct Job {
    what: String,
    kernel: String,
    source: String,
}

/// What one compile thread takes: a default-tuning source alone (exactly as the backend compiles
/// it), or a batch of other candidates joined by `nvrtc::combine_sources`.
enum Work<'a> {
    Alone(&'a Job),
    Batch(Vec<&'a Job>),
}

/// Candidates per NVRTC call: each call costs a front-end start (~30-50 ms) besides its kernels.
const BATCH: usize = 24;

/// Max-autotune's cold compile (issue 13): the candidates of every kernel of a program are listed
/// once each and compiled in one parallel batch, in order, each result that of compiling it alone;
/// a second batch through the same cache compiles nothing.
#[test]
fn autotune_candidates_of_every_kernel_compile_in_one_parallel_batch() {
    if !nvrtc_available("autotune_candidates_of_every_kernel_compile_in_one_parallel_batch") {
        return;
    }
    let w = workloads::get("matmul_softmax_4096_bf16").expect("workload");
    let g = sinter_core::passes::optimize(&w.build(Scale::Reduced).unwrap()).unwrap();
    let p = schedule(&g, &cuda_caps(), &ScheduleOptions::default()).unwrap();
    let kernels: Vec<&Kernel> = p.kernels.iter().collect();
    let cuda = CudaCaps::hopper();
    let sources = sinter_cuda::backend::candidate_sources(&kernels, &cuda, false);
    // Every rendered candidate of every kernel, each source once.
    let all: usize = kernels.iter().map(|k| render::candidates(k, &cuda).len()).sum();
    assert!(kernels.len() >= 2 && sources.len() >= kernels.len() && sources.len() <= all, "{} of {all}", sources.len());
    assert_eq!(sources.iter().map(|(_, s)| s).collect::<HashSet<_>>().len(), sources.len());
    for k in &kernels {
        let default = render::render(k, &cuda, &Tuning::default()).unwrap();
        assert!(sources.iter().any(|(_, s)| *s == default.source), "{}: default candidate missing", k.name);
    }
    let dir = std::env::temp_dir().join(format!("sinter-nvrtc-batch-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let cache = CubinCache::open(Some(&dir));
    let refs: Vec<(&str, &str)> = sources.iter().map(|(n, s)| (n.as_str(), s.as_str())).collect();
    let t0 = Instant::now();
    let batch = nvrtc::compile_parallel(&refs, &Target::hopper(), &cache);
    eprintln!(
        "{} candidate sources of {} kernels compiled in parallel in {:?}",
        refs.len(),
        kernels.len(),
        t0.elapsed()
    );
    assert_eq!(batch.len(), refs.len());
    let is_ptx = |i: usize| render::ptx::is_ptx(refs[i].1);
    for (i, ((name, _), r)) in refs.iter().zip(&batch).enumerate() {
        let (cubin, hit) = r.as_ref().unwrap_or_else(|e| panic!("{name}: {e}"));
        if is_ptx(i) {
            // PTX skips NVRTC and the cache: its image is a module holding its entry (the
            // driver's JIT assembles it at load).
            let text = String::from_utf8_lossy(&cubin.image);
            assert!(!hit && render::ptx::is_ptx(&text) && text.contains(&format!(".entry {name}(")), "{name}");
            continue;
        }
        assert!(!hit && cubin.image.starts_with(b"\x7fELF"), "{name}");
        assert!(nvrtc::resources(&cubin.log, name).is_some(), "{name}: no resources\n{}", cubin.log);
    }
    // In order: each result is its own source's (the first and last compiled alone match).
    let cpp: Vec<usize> = (0..refs.len()).filter(|&i| !is_ptx(i)).collect();
    assert!(cpp.len() >= 2, "too few CUDA C++ candidates");
    for i in [cpp[0], cpp[cpp.len() - 1]] {
        let alone = nvrtc::compile(refs[i].0, refs[i].1, &Target::hopper()).unwrap();
        assert_eq!(alone.image, batch[i].as_ref().unwrap().0.image, "{}", refs[i].0);
    }
    // A second batch (a second process's cold compile) takes every cubin from the cache.
    let again = nvrtc::compile_parallel(&refs, &Target::hopper(), &cache);
    assert!(again.iter().enumerate().all(|(i, r)| is_ptx(i) || r.as_ref().is_ok_and(|(_, hit)| *hit)));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn every_workload_kernel_compiles_for_sm90() {
    if !nvrtc_available("every_workload_kernel_compiles_for_sm90") {
        return;
    }
    let caps = cuda_caps();
    let cuda = CudaCaps::hopper();
    let mut failures: Vec<String> = Vec::new();
    let (mut defaults, mut others): (Vec<Job>, Vec<Job>) = (Vec::new(), Vec::new());
    // Sources already queued, up to comments and the entry name.
    let mut seen: HashSet<String> = HashSet::new();
    let mut kernels = 0usize;
    for w in workloads::all() {
        let g = w.build(Scale::Reduced).unwrap_or_else(|e| panic!("{}: build: {e}", w.name));
        let opt = sinter_core::passes::optimize(&g).unwrap_or_else(|e| panic!("{}: passes: {e}", w.name));
        for fusion in [true, false] {
            let opts = if fusion { ScheduleOptions::default() } else { ScheduleOptions::eager() };
            let p =
                schedule(&opt, &caps, &opts).unwrap_or_else(|e| panic!("{} (fusion {fusion}): schedule: {e}", w.name));
            for k in &p.kernels {
                kernels += 1;
                let mut tunings = render::candidates(k, &cuda);
                if !tunings.contains(&Tuning::default()) {
                    tunings.insert(0, Tuning::default());
                }
                for t in tunings {
                    let what = format!("{} (fusion {fusion}) {} {t:?}", w.name, k.name);
                    match render::render(k, &cuda, &t) {
                        Ok(r) => {
                            if r.name != k.name {
                                failures.push(format!("{what}: rendered entry {} is not the kernel's name", r.name));
                            }
                            // Default tunings: every distinct source, as the backend compiles it.
                            // Other candidates: per tuning, every distinct source up to numeric
                            // literals (the unfused chain and ResNet repeat one kernel shape at many
                            // sizes); the tuning is part of the key, so block sizes and tiles stay.
                            let default = t == Tuning::default();
                            let key = if default {
                                code_key(&r.source, &r.name)
                            } else {
                                format!("{t:?} {}", shape_key(&r.source, &r.name))
                            };
                            if seen.insert(key) {
                                let ptx = render::ptx::is_ptx(&r.source);
                                let job = Job { what, kernel: r.name, source: r.source };
                                // PTX is assembled alone (ptxas, not NVRTC: no batches).
                                if default || ptx { defaults.push(job) } else { others.push(job) }
                            }
                        }
                        Err(e) => failures.push(format!("{what}: render: {e}")),
                    }
                }
            }
        }
    }
    let mut work: Vec<Work> = defaults.iter().map(Work::Alone).collect();
    work.extend(batches(&others).into_iter().map(Work::Batch));
    let t0 = Instant::now();
    let (compile_failures, times) = compile_all(&work);
    failures.extend(compile_failures);
    eprintln!(
        "{kernels} kernels: {} distinct default-tuning sources compiled alone, {} other candidates in {} batches; \
         {:?} wall, {:?} of NVRTC time (median call {:?}, max {:?})",
        defaults.len(),
        others.len(),
        work.len() - defaults.len(),
        t0.elapsed(),
        times.iter().sum::<Duration>(),
        median(times.clone()),
        times.iter().max().copied().unwrap_or_default()
    );
    let shown: Vec<&String> = failures.iter().take(12).collect();
    assert!(
        failures.is_empty(),
        "{} renders/compiles failed ({} kernels); the first {}:\n\n{}",
        failures.len(),
        kernels,
        shown.len(),
        shown.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("\n\n")
    );
}

/// A source without its comments and blank lines, the entry point's name replaced: the same kernel
/// scheduled in two workloads differs only in those.
fn code_key(source: &str, name: &str) -> String {
    let code: Vec<&str> =
        source.lines().map(|l| l.split("//").next().unwrap_or("").trim_end()).filter(|l| !l.is_empty()).collect();
    format!("exact:{}", code.join("\n").replace(name, "@ENTRY@"))
}

/// [`code_key`] with every numeric literal (a digit run not inside an identifier) masked: sources
/// that go through the same code paths at other sizes.
fn shape_key(source: &str, name: &str) -> String {
    let code = code_key(source, name);
    let mut out = String::with_capacity(code.len());
    let mut prev_ident = false;
    let mut in_number = false;
    for c in code.chars() {
        if c.is_ascii_digit() && (in_number || !prev_ident) {
            if !in_number {
                out.push('#');
            }
            in_number = true;
        } else {
            in_number = false;
            out.push(c);
        }
        prev_ident = c.is_ascii_alphanumeric() || c == '_';
    }
    format!("shape:{out}")
}

/// Groups jobs into batches of at most [`BATCH`] with distinct entry names (first fit).
fn batches(jobs: &[Job]) -> Vec<Vec<&Job>> {
    let mut out: Vec<(HashSet<&str>, Vec<&Job>)> = Vec::new();
    for j in jobs {
        match out.iter_mut().find(|(names, b)| b.len() < BATCH && !names.contains(j.kernel.as_str())) {
            Some((names, b)) => {
                names.insert(&j.kernel);
                b.push(j);
            }
            None => out.push((HashSet::from([j.kernel.as_str()]), vec![j])),
        }
    }
    out.into_iter().map(|(_, b)| b).collect()
}

/// Compiles all work on a few threads. Returns the failures (each with its log, cut to 60 lines,
/// and the numbered source) and the time of each NVRTC call.
fn compile_all(work: &[Work]) -> (Vec<String>, Vec<Duration>) {
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get()).clamp(1, 4);
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: Vec<(Vec<String>, Vec<Duration>)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let (mut failures, mut times) = (Vec::new(), Vec::new());
                    while let Some(w) = work.get(next.fetch_add(1, std::sync::atomic::Ordering::Relaxed)) {
                        match w {
                            Work::Alone(job) => {
                                let (f, t) = compile_one(job);
                                failures.extend(f);
                                times.push(t);
                            }
                            Work::Batch(jobs) => failures.extend(compile_batch(jobs, &mut times)),
                        }
                    }
                    (failures, times)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("compile thread")).collect()
    });
    let mut failures = Vec::new();
    let mut times = Vec::new();
    for (f, t) in results {
        failures.extend(f);
        times.extend(t);
    }
    (failures, times)
}

/// Compiles a batch as one program; when that fails, each member alone, to name the culprit.
fn compile_batch(jobs: &[&Job], times: &mut Vec<Duration>) -> Vec<String> {
    let sources: Vec<&str> = jobs.iter().map(|j| j.source.as_str()).collect();
    let t0 = Instant::now();
    let result = nvrtc::compile("candidates", &nvrtc::combine_sources(&sources), &Target::hopper());
    times.push(t0.elapsed());
    match result {
        Ok(c) => jobs
            .iter()
            .filter(|j| nvrtc::resources(&c.log, &j.kernel).is_none())
            .map(|j| format!("{}: no ptxas resources for {} in the batch log:\n{}", j.what, j.kernel, c.log))
            .collect(),
        Err(e) => {
            let mut failures = Vec::new();
            for j in jobs {
                let (f, t) = compile_one(j);
                failures.extend(f);
                times.push(t);
            }
            if failures.is_empty() {
                let text = e.to_string();
                let log: Vec<&str> = text.lines().take(60).collect();
                failures.push(format!(
                    "a batch of {} candidates fails together but each compiles alone:\n{}",
                    jobs.len(),
                    log.join("\n")
                ));
            }
            failures
        }
    }
}

fn compile_one(job: &Job) -> (Option<String>, Duration) {
    let t0 = Instant::now();
    if render::ptx::is_ptx(&job.source) {
        let failure = match common::ptxas(&job.source, &job.what) {
            None => None,
            Some(Ok(log)) if nvrtc::resources(&log, &job.kernel).is_some() => None,
            Some(Ok(log)) => Some(format!("{}: no ptxas resources for {} in the log:\n{log}", job.what, job.kernel)),
            Some(Err(log)) => {
                Some(format!("{}: ptxas: {log}\n--- source ---\n{}", job.what, numbered(&job.source, 400)))
            }
        };
        return (failure, t0.elapsed());
    }
    let result = nvrtc::compile(&job.kernel, &job.source, &Target::hopper());
    let took = t0.elapsed();
    let failure = match result {
        Ok(c) => match nvrtc::resources(&c.log, &job.kernel) {
            Some(_) => None,
            None => Some(format!("{}: no ptxas resources for {} in the log:\n{}", job.what, job.kernel, c.log)),
        },
        Err(e) => {
            let text = e.to_string();
            let log: Vec<&str> = text.lines().take(60).collect();
            Some(format!("{}: {}\n--- source ---\n{}", job.what, log.join("\n"), numbered(&job.source, 200)))
        }
    };
    (failure, took)
}

/// The first `max` lines of `source`, numbered as NVRTC's messages number them.
fn numbered(source: &str, max: usize) -> String {
    source.lines().take(max).enumerate().map(|(i, l)| format!("{:4} {l}", i + 1)).collect::<Vec<_>>().join("\n")
}

#[test]
fn workloads_schedule_to_every_kernel_kind() {
    // Guards the test above against silently testing nothing: the workloads schedule to a
    // reasonable number of kernels of every body kind at the reduced scale.
    let caps = cuda_caps();
    let mut kinds = HashSet::new();
    let mut count = 0;
    for w in workloads::all() {
        let g = sinter_core::passes::optimize(&w.build(Scale::Reduced).expect("build")).expect("passes");
        for opts in [ScheduleOptions::default(), ScheduleOptions::eager()] {
            let p = schedule(&g, &caps, &opts).expect("schedule");
            count += p.kernels.len();
            kinds.extend(p.kernels.iter().map(body_kind));
        }
    }
    assert!(count >= 50, "only {count} kernels");
    assert_eq!(kinds.len(), 4, "{kinds:?}");
}

fn body_kind(k: &Kernel) -> &'static str {
    match &k.body {
        sinter_core::kernel::KernelBody::Pointwise { .. } => "pointwise",
        sinter_core::kernel::KernelBody::Reduce(_) => "reduce",
        sinter_core::kernel::KernelBody::Matmul(_) => "matmul",
        sinter_core::kernel::KernelBody::Attention(_) => "attention",
    }
}
