//! The CUDA backend's parallel NVRTC batches in worker processes (`sinter __nvrtc-worker`,
//! `sinter_cuda::nvrtc::worker`): the same cubins and errors as in-process compiles, a broken
//! source isolated, and a worker command that cannot start costing nothing but the processes.
//! Needs NVRTC (skipped without it unless `SINTER_REQUIRE_NVRTC=1`); no GPU.

use sinter_cuda::nvrtc::{self, CubinCache, Target};

fn nvrtc_here() -> bool {
    match sinter_cuda::probe::nvrtc() {
        Ok(_) => true,
        Err(e) if std::env::var("SINTER_REQUIRE_NVRTC").is_ok_and(|v| v == "1") => panic!("NVRTC required: {e}"),
        Err(e) => {
            eprintln!("skipped: NVRTC not available ({e})");
            false
        }
    }
}

fn sources() -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = (0..6)
        .map(|i| {
            let name = format!("w{i}");
            let body = format!(
                "extern \"C\" __global__ void {name}(float* a) {{ a[threadIdx.x] = a[threadIdx.x] * {i}.5f + 1.0f; }}\n"
            );
            (name, body)
        })
        .collect();
    v.push(("broken".into(), "extern \"C\" __global__ void broken(float* a) { a[0] = ; }\n".into()));
    // A tensor-core-sized source compiles alone: a second job kind.
    let long =
        format!("{}extern \"C\" __global__ void long_one(float* a) {{ a[0] = 2.0f; }}\n", "// padding\n".repeat(900));
    v.push(("long_one".into(), long));
    v
}

#[test]
fn worker_processes_compile_what_threads_compile() {
    if !nvrtc_here() {
        return;
    }
    let target = Target { nvrtc_cache: false, ..Target::hopper() };
    let srcs = sources();
    let pairs: Vec<(&str, &str)> = srcs.iter().map(|(n, s)| (n.as_str(), s.as_str())).collect();
    // In-process first: no worker command is registered yet in this test process.
    let cache = CubinCache::disabled();
    let threads = nvrtc::compile_parallel(&pairs, &target, &cache);
    assert_eq!(nvrtc::worker_compiles(), 0);
    nvrtc::set_worker_command(env!("CARGO_BIN_EXE_sinter").into(), vec!["__nvrtc-worker".into()]);
    assert!(nvrtc::workers_enabled());
    let cache = CubinCache::disabled();
    let workers = nvrtc::compile_parallel(&pairs, &target, &cache);
    let first = nvrtc::worker_compiles();
    assert!(first >= 2, "{first} compiles in workers");
    assert_eq!(threads.len(), workers.len());
    for ((name, _), (t, w)) in srcs.iter().zip(threads.iter().zip(&workers)) {
        match (t, w) {
            (Ok((t, _)), Ok((w, false))) => {
                assert_eq!(t.image, w.image, "{name}: the same cubin");
                assert!(w.seconds > 0.0, "{name}: the worker's compile time");
            }
            (Err(t), Err(w)) => {
                assert_eq!(name, "broken");
                assert_eq!(t, w, "the same error");
                assert!(w.to_string().contains("broken"), "{w}");
            }
            _ => panic!("{name}: in-process {t:?} against worker {w:?}"),
        }
    }
    // A second batch (two jobs: the light sources' unit, the long one) is served by the pooled
    // workers of the first.
    let again = nvrtc::compile_parallel(&pairs[5..], &target, &CubinCache::disabled());
    assert!(again[0].is_ok() && again[1].is_err() && again[2].is_ok(), "{again:?}");
    assert!(nvrtc::worker_compiles() > first);
}
