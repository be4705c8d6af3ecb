//! A registered NVRTC worker command that is no worker (it exits at once) costs nothing but the
//! processes: every source compiles in-process with the result an in-process batch gives, and
//! after a few failed workers none is started again (`sinter_cuda::nvrtc::worker`). Its own test
//! binary: the worker command is registered once per process. Needs NVRTC (skipped without it
//! unless `SINTER_REQUIRE_NVRTC=1`); no GPU.

use sinter_cuda::nvrtc::{self, CubinCache, Target};

#[test]
fn a_command_that_is_no_worker_falls_back_to_in_process_compiles() {
    match sinter_cuda::probe::nvrtc() {
        Ok(()) => {}
        Err(e) if std::env::var("SINTER_REQUIRE_NVRTC").is_ok_and(|v| v == "1") => panic!("NVRTC required: {e}"),
        Err(e) => return eprintln!("skipped: NVRTC not available ({e})"),
    }
    let target = Target { nvrtc_cache: false, ..Target::hopper() };
    // Two jobs (a light source, a long one), so the batch would use workers.
    let light = "extern \"C\" __global__ void light(float* a) { a[0] = 1.0f; }\n".to_string();
    let long =
        format!("{}extern \"C\" __global__ void long_one(float* a) {{ a[0] = 2.0f; }}\n", "// padding\n".repeat(900));
    let pairs = [("light", light.as_str()), ("long_one", long.as_str())];
    let want = nvrtc::compile_parallel(&pairs, &target, &CubinCache::disabled());
    // `sinter` with an argument it does not know exits at once with an error: no worker.
    nvrtc::set_worker_command(env!("CARGO_BIN_EXE_sinter").into(), vec!["--no-such-flag".into()]);
    for round in 0..5 {
        let got = nvrtc::compile_parallel(&pairs, &target, &CubinCache::disabled());
        for ((name, _), (w, g)) in pairs.iter().zip(want.iter().zip(&got)) {
            let (w, g) = (w.as_ref().expect("compiles"), g.as_ref().unwrap_or_else(|e| panic!("{name}: {e}")));
            assert_eq!(w.0.image, g.0.image, "round {round}: {name}");
        }
    }
    assert_eq!(nvrtc::worker_compiles(), 0, "no compile was answered by a worker");
}
