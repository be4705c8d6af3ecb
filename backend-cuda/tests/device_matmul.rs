//! Tensor-core matmul kernels on a GPU: every candidate tuning (`wgmma` tiles on sm_90a, cp.async
//! and TMA-fed, the `mma.sync` tiles everywhere) against the kernel-IR interpreter on awkward
//! shapes (1, 7, 129, 4097 along each extent, batches, both layouts of B, misaligned operands that
//! take the scalar loader, K below the pipeline depth, more tiles than SMs so persistent blocks
//! take several, B shared by the batches or one per batch), bf16 and f16, with a bias + relu
//! epilogue; outputs poisoned first. A TMA tile's
//! tensor maps follow its operands when they move (encoded again on a new pointer).
//!
//! Kernels are rendered, compiled by NVRTC and launched through the device layer directly, so
//! every tuning runs, not only the one a mode picks. Without a CUDA driver the test prints a skip
//! line, unless `SINTER_REQUIRE_CUDA=1`.

mod common;
mod launch;

use common::{Layout, matmul_layout};
use launch::{Bufs, args, build, caps, device, out_bytes, relaunch, run_once};
use sinter_core::DType;
use sinter_core::testsuite::{Tol, compare};
use sinter_core::{HostTensor, kernel::interp::run_program};
use sinter_cuda::render::{MmaTile, Tuning, candidates};

type Shape = (usize, usize, usize, usize, Layout);

#[test]
fn matmul_matches_the_interpreter_with_every_tuning() {
    let shapes: [Shape; 11] = [
        (1, 1, 8, 8, Layout::default()),
        (2, 300, 200, 72, Layout::default()),
        (2, 300, 200, 72, Layout { b_t: true, ..Layout::default() }),
        (1, 4097, 136, 520, Layout::default()),
        (3, 129, 264, 4104, Layout { b_t: true, ..Layout::default() }),
        (1, 1024, 1024, 1024, Layout::default()),
        (1, 7, 9, 1023, Layout::default()),
        (1, 64, 64, 64, Layout { a_t: true, ..Layout::default() }),
        (1, 70, 33, 90, Layout { pad: 1, ..Layout::default() }),
        (4, 1000, 1032, 136, Layout { b_batched: true, ..Layout::default() }),
        (5, 520, 1000, 264, Layout { b_t: true, b_batched: true, ..Layout::default() }),
    ];
    every_tuning("matmul", &shapes);
}

/// More products in whole tiles (the 16-bit outputs' row pairs exchanged in the quad and stored 16
/// bytes at a time, `quad_store`: transposed and batched operands, a deep and a shallow k), and
/// one past the tile edges (pairs).
#[test]
fn whole_tile_products_match_the_interpreter_with_every_tuning() {
    let shapes: [Shape; 4] = [
        (1, 1024, 1024, 1024, Layout::default()),
        (2, 256, 512, 136, Layout { b_t: true, ..Layout::default() }),
        (3, 512, 768, 64, Layout { b_batched: true, ..Layout::default() }),
        (1, 300, 1000, 72, Layout::default()),
    ];
    every_tuning("matmul whole tiles", &shapes);
}

/// Every candidate tuning of `relu(a @ b + bias)` at each shape (bf16 and f16 operands and
/// output, f32 accumulation) against the interpreter.
fn every_tuning(test: &str, shapes: &[Shape]) {
    let Some(dev) = device(test) else { return };
    let stream = dev.new_stream().unwrap();
    let mut failures = Vec::new();
    let (mut wgmma_runs, mut tma_runs) = (0, 0);
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
                tma_runs += !r.tensor_maps.is_empty() as usize;
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
        assert!(tma_runs > 0, "no TMA tile ran on sm_90");
    }
}

/// `relu(conv(x, w) + b)` scheduled with the CUDA backend's options (implicit GEMM, TF32 for
/// convolutions): the program and random inputs.
fn conv_program(
    xs: [usize; 4],
    ws: [usize; 4],
    stride: [usize; 2],
    pad: [usize; 4],
    dil: [usize; 2],
    dt: DType,
) -> (sinter_core::kernel::Program, Vec<HostTensor>) {
    let g = sinter_core::trace::Graph::new();
    let x = g.input("x", dt, xs);
    let w = g.input("w", dt, ws);
    let b = g.input("b", dt, [ws[0]]);
    g.output(&x.conv2d(&w, Some(&b), stride, pad, dil, 1).relu());
    let ir = sinter_core::passes::optimize(&g.build().expect("build")).expect("passes");
    let p = sinter_core::schedule::schedule(&ir, &common::cuda_caps(), &common::cuda_options()).expect("schedule");
    let ins = vec![
        HostTensor::random(dt, xs.to_vec(), 11, -1.0, 1.0),
        HostTensor::random(dt, ws.to_vec(), 12, -1.0, 1.0),
        HostTensor::random(dt, vec![ws[0]], 13, -1.0, 1.0),
    ];
    (p, ins)
}

/// Implicit-GEMM convolutions (the im2col view in the loader: four columns per thread or one,
/// split k with the tile counters reset between runs) at awkward shapes, TF32, bf16 and f16,
/// every candidate tuning against the kernel-IR interpreter; each split-k kernel runs twice and
/// the second run is checked (`launch::run_once`).
#[test]
fn implicit_conv_matches_the_interpreter_with_every_tuning() {
    let Some(dev) = device("implicit conv") else { return };
    let stream = dev.new_stream().unwrap();
    let mut failures = Vec::new();
    let mut split_runs = 0;
    let mut implicit = 0;
    #[allow(clippy::type_complexity)]
    let convs: [([usize; 4], [usize; 4], [usize; 2], [usize; 4], [usize; 2]); 4] = [
        ([2, 64, 7, 7], [96, 64, 3, 3], [1, 1], [1; 4], [1, 1]),
        ([2, 3, 40, 37], [64, 3, 7, 7], [2, 2], [3; 4], [1, 1]),
        ([3, 7, 9, 11], [16, 7, 3, 3], [1, 1], [2; 4], [2, 2]),
        ([2, 130, 9, 10], [72, 130, 1, 1], [2, 2], [0; 4], [1, 1]),
    ];
    for (xs, ws, stride, pad, dil) in convs {
        for dt in [DType::F32, DType::BF16, DType::F16] {
            let (p, ins) = conv_program(xs, ws, stride, pad, dil, dt);
            let what = format!("{dt} conv x{xs:?} w{ws:?} s{stride:?} p{pad:?} d{dil:?}");
            let Some(ki) = p
                .kernels
                .iter()
                .position(|k| matches!(&k.body, sinter_core::kernel::KernelBody::Matmul(m) if m.b.im2col.is_some()))
            else {
                println!("{what}: not an implicit GEMM (the cost model's choice), skipped");
                continue;
            };
            implicit += 1;
            assert_eq!(p.kernels.len(), 1, "{what}: one kernel");
            let want = run_program(&p, &ins).unwrap_or_else(|e| panic!("{what}: interpreter: {e}"));
            let bufs = Bufs {
                inputs: ins.iter().map(|t| dev.upload_bytes(&t.to_le_bytes(), "input").unwrap()).collect(),
                outputs: (0..p.outputs.len()).map(|i| stream.alloc(out_bytes(&p, i)).unwrap()).collect(),
            };
            let tunings = candidates(&p.kernels[ki], &caps(&dev));
            let k = ws[1] * ws[2] * ws[3];
            let tol = if dt == DType::F32 { Tol::sum(k, 1.0).tf32() } else { Tol::sum(k, 1.0).times(4.0) };
            for (t, r, cubin) in build(&dev, &p, &tunings) {
                let got = run_once(&dev, &stream, &p, &bufs, &r, &cubin);
                let verdict = compare(&got, &want, tol);
                split_runs += r.strategy.contains("split-k") as usize;
                println!("{what:70} {:34} {}", r.strategy, if verdict.is_ok() { "ok" } else { "FAILED" });
                if let Err(e) = verdict {
                    failures.push(format!("{what} {t:?} ({}): {e}", r.strategy));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
    assert!(split_runs > 0, "no split-k tuning ran");
    assert!(implicit >= 9, "{implicit} of 12 convolutions were implicit GEMMs");
}

/// A TMA tile launched once, then with its operands moved to other buffers holding other values
/// ([`Launch::set_arg`] encodes the tensor maps again): both runs match the interpreter.
#[test]
fn tma_tensor_maps_follow_moved_operands() {
    let Some(dev) = device("tma_maps") else { return };
    if dev.info().cc != (9, 0) {
        eprintln!("skipped tma_maps: sm_{}{} has no TMA wgmma tiles", dev.info().cc.0, dev.info().cc.1);
        return;
    }
    let stream = dev.new_stream().unwrap();
    let p = matmul_layout(3, 300, 200, 136, DType::BF16, DType::F32, Layout::default());
    let tuning = Tuning { mma: Some(MmaTile::wgmma_tma(128, 128, 2, 3)), ..Tuning::default() };
    let (_, r, cubin) = build(&dev, &p, &[tuning]).pop().unwrap();
    assert_eq!(r.tensor_maps.len(), 2, "{}", r.strategy);
    let tol = Tol::sum(136, 1.0).times(4.0);
    let inputs = |seed: u64| -> Vec<HostTensor> {
        p.inputs
            .iter()
            .enumerate()
            .map(|(i, io)| HostTensor::random(io.dtype, io.shape.clone(), seed + i as u64, -1.0, 1.0))
            .collect()
    };
    let upload = |ins: &[HostTensor]| -> Vec<_> {
        ins.iter().map(|t| dev.upload_bytes(&t.to_le_bytes(), "input").unwrap()).collect()
    };
    let (first, second) = (inputs(700), inputs(800));
    let mut bufs = Bufs {
        inputs: upload(&first),
        outputs: (0..p.outputs.len()).map(|i| stream.alloc(out_bytes(&p, i)).unwrap()).collect(),
    };
    let f = dev.load_function(&cubin, &r.name).unwrap();
    let mut l = sinter_cuda::backend::rendered_launch(&dev, f, &r, &args(&p, &bufs)).unwrap();
    let got = relaunch(&stream, &p, &bufs, Some(&l));
    compare(&got, &run_program(&p, &first).unwrap(), tol).unwrap_or_else(|e| panic!("first buffers: {e}"));
    // The first buffers stay allocated, so the second ones lie elsewhere.
    let before = args(&p, &bufs);
    let _first_buffers = std::mem::replace(&mut bufs.inputs, upload(&second));
    let after = args(&p, &bufs);
    assert!(before[0] != after[0] && before[1] != after[1], "the operands did not move");
    for (j, ptr) in after.into_iter().enumerate() {
        l.set_arg(j, ptr).unwrap();
    }
    let got = relaunch(&stream, &p, &bufs, Some(&l));
    compare(&got, &run_program(&p, &second).unwrap(), tol).unwrap_or_else(|e| panic!("moved buffers: {e}"));
}

/// Times the own `wgmma` tiles on an `n^3` bf16 product with the bias + relu epilogue (`n` 8192,
/// or `SINTER_TIMING_N`): the cp.async template's default tile and every TMA candidate, median of
/// 20 launches after 3 warm-ups, on random inputs; each TMA tile's output must also match the
/// cp.async tile's. Ignored by default (a benchmark): `cargo test --release -p sinter-cuda --test
/// device_matmul -- --ignored --nocapture wgmma_tile_timings`.
#[test]
#[ignore]
fn wgmma_tile_timings() {
    let Some(dev) = device("timings") else { return };
    if dev.info().cc != (9, 0) {
        eprintln!("skipped timings: not sm_90");
        return;
    }
    let n: usize = std::env::var("SINTER_TIMING_N").ok().and_then(|v| v.parse().ok()).unwrap_or(8192);
    let stream = dev.new_stream().unwrap();
    let p = matmul_layout(1, n, n, n, DType::BF16, DType::F32, Layout::default());
    let ins: Vec<HostTensor> = p
        .inputs
        .iter()
        .enumerate()
        .map(|(i, io)| HostTensor::random(io.dtype, io.shape.clone(), 900 + i as u64, -1.0, 1.0))
        .collect();
    let bufs = Bufs {
        inputs: ins.iter().map(|t| dev.upload_bytes(&t.to_le_bytes(), "input").unwrap()).collect(),
        outputs: (0..p.outputs.len()).map(|i| stream.alloc(out_bytes(&p, i)).unwrap()).collect(),
    };
    let mut tunings = vec![Tuning { mma: Some(MmaTile::wgmma(192, 128, 4)), ..Tuning::default() }];
    tunings.extend(MmaTile::TMA_CANDIDATES.map(|t| Tuning { mma: Some(t), ..Tuning::default() }));
    let flops = 2.0 * (n as f64).powi(3);
    let mut reference: Option<Vec<HostTensor>> = None;
    let mut failures = Vec::new();
    for (_, r, cubin) in build(&dev, &p, &tunings) {
        let f = dev.load_function(&cubin, &r.name).unwrap();
        let l = sinter_cuda::backend::rendered_launch(&dev, f, &r, &args(&p, &bufs)).unwrap();
        let got = relaunch(&stream, &p, &bufs, Some(&l));
        match &reference {
            None => reference = Some(got),
            Some(want) => {
                if let Err(e) = compare(&got, want, Tol::sum(n, 1.0).times(4.0)) {
                    failures.push(format!("{}: {e}", r.strategy));
                }
            }
        }
        for _ in 0..3 {
            l.launch(&stream).unwrap();
        }
        let reps = 20;
        let ev = sinter_cuda::device::TimingEvents::new(&dev, reps).unwrap();
        for i in 0..reps {
            ev.record(i, false, &stream).unwrap();
            l.launch(&stream).unwrap();
            ev.record(i, true, &stream).unwrap();
        }
        let mut ms: Vec<f64> = (0..reps).map(|i| ev.elapsed_ms(i, i, true).unwrap()).collect();
        ms.sort_by(f64::total_cmp);
        let (med, lo, hi) = (ms[reps / 2], ms[0], ms[reps - 1]);
        let attrs = l.attributes();
        println!(
            "{n}^3 {:34} {med:8.3} ms ({lo:.3}..{hi:.3}) {:6.0} TFLOP/s, {} registers, {} local bytes",
            r.strategy,
            flops / med / 1e9,
            attrs.registers,
            attrs.local_bytes
        );
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
