//! Tensor-core matmul kernels on a GPU: every candidate tuning (`wgmma` tiles on sm_90a, the
//! `mma.sync` tiles everywhere) against the kernel-IR interpreter on awkward shapes (1, 7, 129,
//! 4097 along each extent, batches, both layouts of B, misaligned operands that take the scalar
//! loader), bf16 and f16, with a bias + relu epilogue; outputs poisoned first.
//!
//! Kernels are rendered, compiled by NVRTC and launched through the device layer directly, so
//! every tuning runs, not only the one a mode picks. Without a CUDA driver the test prints a skip
//! line, unless `SINTER_REQUIRE_CUDA=1`.

mod common;
mod launch;

use common::{Layout, matmul_layout};
use launch::{Bufs, build, caps, device, out_bytes, run_once};
use sinter_core::DType;
use sinter_core::testsuite::{Tol, compare};
use sinter_core::{HostTensor, kernel::interp::run_program};
use sinter_cuda::render::candidates;

#[test]
fn matmul_matches_the_interpreter_with_every_tuning() {
    let Some(dev) = device("matmul") else { return };
    let stream = dev.new_stream().unwrap();
    let mut failures = Vec::new();
    let mut wgmma_runs = 0;
    let shapes: [(usize, usize, usize, usize, Layout); 9] = [
        (1, 1, 8, 8, Layout::default()),
        (2, 300, 200, 72, Layout::default()),
        (2, 300, 200, 72, Layout { b_t: true, ..Layout::default() }),
        (1, 4097, 136, 520, Layout::default()),
        (3, 129, 264, 4104, Layout { b_t: true, ..Layout::default() }),
        (1, 1024, 1024, 1024, Layout::default()),
        (1, 7, 9, 1023, Layout::default()),
        (1, 64, 64, 64, Layout { a_t: true, ..Layout::default() }),
        (1, 70, 33, 90, Layout { pad: 1, ..Layout::default() }),
    ];
    for (ci, &(batch, m, n, k, layout)) in shapes.iter().enumerate() {
        for d in [DType::BF16, DType::F16] {
            let p = matmul_layout(batch, m, n, k, d, DType::F32, layout);
            let what = format!("{d} {batch}x{m}x{n}x{k} {layout:?}");
            let shapes: Vec<Vec<usize>> = p.inputs.iter().map(|i| i.shape.clone()).collect();
            let ins: Vec<HostTensor> = shapes
                .iter()
                .enumerate()
                .map(|(i, s)| HostTensor::random(d, s.clone(), 300 + 10 * ci as u64 + i as u64, -1.0, 1.0))
                .collect();
            let want = run_program(&p, &ins).unwrap_or_else(|e| panic!("{what}: interpreter: {e}"));
            let bufs = Bufs {
                inputs: ins.iter().map(|t| dev.upload_bytes(&t.to_le_bytes(), "input").unwrap()).collect(),
                outputs: (0..p.outputs.len()).map(|i| stream.alloc(out_bytes(&p, i)).unwrap()).collect(),
            };
            let tunings = candidates(&p.kernels[0], &caps(&dev));
            // Operands rounded to 16 bits, f32 accumulation in another order, one rounding at the store.
            let tol = Tol::sum(k, 1.0).times(4.0);
            for (t, r, cubin) in build(&dev, &p, &tunings) {
                let got = run_once(&dev, &stream, &p, &bufs, &r, &cubin);
                let verdict = compare(&got, &want, tol);
                wgmma_runs += r.strategy.starts_with("wgmma") as usize;
                println!("{what:60} {:34} {}", r.strategy, if verdict.is_ok() { "ok" } else { "FAILED" });
                if let Err(e) = verdict {
                    failures.push(format!("{what} {t:?} ({}): {e}", r.strategy));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
    if dev.info().cc == (9, 0) {
        assert!(wgmma_runs > 0, "no wgmma tile ran on sm_90");
    }
}
