//! The CUDA device layer and backend on a GPU: hand-written kernels through the device layer
//! (launch, graph, pool reuse, cross-stream use), compiled programs against the CPU reference in
//! every mode (pointwise, softmax, matmul; f32, f64, i64, bf16; sizes 1, 7, 1023, 4097; outputs
//! poisoned first), `run_device` chaining within and across executables, out-of-memory recovery,
//! input errors, timing, sources, autotuning cache, calibration and host overhead.
//!
//! Without a CUDA driver every test prints a skip line, unless `SINTER_REQUIRE_CUDA=1`, which makes
//! a missing driver (or NVRTC) a failure.

mod launch;

use sinter_core::backend::{Backend, BackendError, DeviceTensor, Executable, LoadOptions, Mode};
use sinter_core::compile::{CompileOptions, CompiledGraph, compile};
use sinter_core::prelude::*;
use sinter_cuda::device::{Device, Graph as CudaGraph, Launch};
use sinter_cuda::nvrtc::{self, Target};
use sinter_cuda::{CudaBackend, CudaBuffer};
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

/// The backend (outputs poisoned), or `None` with a skip line when there is no driver.
fn backend(test: &str) -> Option<CudaBackend> {
    launch::cuda_backend(test)
}

/// One cache folder for the whole test binary (cubins compiled once, shared by every mode).
fn cache_dir() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = std::env::temp_dir().join(format!("sinter-cuda-device-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    })
    .clone()
}

/// Compile options in `mode` with the binary's cubin cache ([`cache_dir`]).
fn opts(mode: Mode) -> CompileOptions {
    CompileOptions { cache_dir: Some(cache_dir()), ..launch::options(mode) }
}

const MODES: [Mode; 3] = [Mode::Default, Mode::ReduceOverhead, Mode::MaxAutotune];

fn check_close(what: &str, got: &HostTensor, want: &HostTensor, atol: f64) {
    assert_eq!((got.dtype(), &got.shape), (want.dtype(), &want.shape), "{what}");
    if got.dtype().is_float() {
        let r = got.tolerance_ratio(want, got.dtype().rel_tolerance(), atol);
        assert!(r <= 1.0, "{what}: tolerance ratio {r}, max abs diff {}", got.max_abs_diff(want));
    } else {
        assert_eq!(got.to_i64_vec(), want.to_i64_vec(), "{what}");
    }
}

/// Compiles `g` in `mode`, runs it (host and device paths) and compares with the CPU reference.
fn check_graph(b: &Arc<dyn Backend>, what: &str, g: &Graph, inputs: &[HostTensor], mode: Mode, atol: f64) {
    let want = sinter_core::cpu::run(g, inputs).unwrap_or_else(|e| panic!("{what}: reference: {e}"));
    let c = compile(g, b.clone(), opts(mode)).unwrap_or_else(|e| panic!("{what} [{mode:?}]: compile: {e}"));
    for round in 0..2 {
        let got = c.run(inputs).unwrap_or_else(|e| panic!("{what} [{mode:?}]: run: {e}"));
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            check_close(&format!("{what} [{mode:?}] output {i} run {round}"), g, w, atol);
        }
    }
    let dev: Vec<DeviceTensor> = inputs.iter().map(|t| c.upload(t).unwrap()).collect();
    let got = c.run_device(&dev).unwrap_or_else(|e| panic!("{what} [{mode:?}]: run_device: {e}"));
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(g.backend(), "cuda");
        check_close(&format!("{what} [{mode:?}] device output {i}"), &g.to_host().unwrap(), w, atol);
    }
}

const SIZES: [usize; 4] = [1, 7, 1023, 4097];

#[test]
fn device_layer_runs_hand_written_kernels_graphs_and_reuses_memory() {
    let Some(b) = backend("device_layer") else { return };
    // A private pool: other tests running beside this one do not share its free lists.
    let dev = &Device::open(b.device().info().ordinal).unwrap();
    let src = r#"extern "C" __global__ void add_one(const float* __restrict__ a, float* __restrict__ out,
                                                  unsigned long long n) {
        unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) out[i] = a[i] + 1.0f;
    }"#;
    let cubin = nvrtc::compile("add_one", src, &Target::sm(dev.info().cc)).unwrap();
    let n = 4097usize;
    let host: Vec<f32> = (0..n).map(|i| i as f32 * 0.5).collect();
    let bytes: Vec<u8> = host.iter().flat_map(|v| v.to_le_bytes()).collect();
    let a = dev.upload_bytes(&bytes, "test input").unwrap();
    let stream = dev.new_stream().unwrap();
    let out = stream.alloc(bytes.len() as u64).unwrap();
    let f = dev.load_function(&cubin.image, "add_one").unwrap();
    let blocks = n.div_ceil(256) as u32;
    let launch =
        Launch::new(dev, f, "add_one", [blocks, 1, 1], [256, 1, 1], 0, &[a.ptr(), out.ptr(), n as u64]).unwrap();
    assert!(launch.attributes().registers > 0);
    launch.launch(&stream).unwrap();
    use sinter_core::backend::DeviceBuffer;
    let got: Vec<f32> =
        out.read().unwrap().chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
    assert!(got.iter().zip(&host).all(|(g, h)| *g == h + 1.0));

    // A captured graph replays the launch; arguments are frozen at capture.
    stream.fill(out.ptr(), 0, bytes.len() as u64, "clear").unwrap();
    let graph = CudaGraph::capture(&stream, "test graph", || launch.launch(&stream).map(|_| 1)).unwrap().unwrap();
    assert_eq!(graph.nodes(), 1);
    stream.synchronize("test").unwrap();
    assert!(out.read().unwrap().iter().all(|&x| x == 0), "capture does not run the work");
    graph.launch(&stream, "test graph").unwrap();
    let got: Vec<f32> =
        out.read().unwrap().chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
    assert!(got.iter().zip(&host).all(|(g, h)| *g == h + 1.0));

    // The pool reuses a freed block of the same size class on the same stream.
    let before = dev.pool().stats();
    let p = {
        let x = stream.alloc(12345).unwrap();
        x.ptr()
    };
    let y = stream.alloc(12300).unwrap();
    assert_eq!(y.ptr(), p, "same class, same stream: reused");
    let after = dev.pool().stats();
    assert!(after.reuses > before.reuses, "{before:?} -> {after:?}");

    // Used on another stream: not reused until that stream's work is done.
    let other = dev.new_stream().unwrap();
    let z = stream.alloc(1 << 20).unwrap();
    let zp = z.ptr();
    z.note_use_on(&other);
    drop(z);
    assert!(dev.pool().stats().pending_bytes >= 1 << 20, "{:?}", dev.pool().stats());
    other.synchronize("test").unwrap();
    let w = stream.alloc(1 << 20).unwrap();
    assert_eq!(w.ptr(), zp, "reclaimed once the other stream's event completed");
}

#[test]
fn pointwise_f32_every_size_and_mode() {
    let Some(b) = backend("pointwise") else { return };
    let b: Arc<dyn Backend> = Arc::new(b);
    for (k, &n) in SIZES.iter().enumerate() {
        let g = Graph::new();
        let x = g.input("x", DType::F32, [n]);
        let y = g.input("y", DType::F32, [n]);
        g.output(&((&x * &y).relu() + 1.0));
        let inputs = [
            HostTensor::random(DType::F32, vec![n], k as u64, -2.0, 2.0),
            HostTensor::random(DType::F32, vec![n], 50 + k as u64, -2.0, 2.0),
        ];
        let modes: &[Mode] = if n == 1023 { &MODES } else { &[Mode::Default, Mode::ReduceOverhead] };
        for &m in modes {
            check_graph(&b, &format!("pointwise n={n}"), &g, &inputs, m, 1e-6);
        }
    }
}

/// Three identical layers with their own weights: the layers' kernels render the same body under
/// their own names, compile once and launch one function each with its own arguments.
#[test]
fn identical_layers_compile_once_and_compute_their_own_values() {
    let Some(b) = backend("identical_layers") else { return };
    let b: Arc<dyn Backend> = Arc::new(b);
    let g = Graph::new();
    let mut h = g.input("x", DType::F32, [16, 64]);
    for layer in 0..3u64 {
        let w = g.constant(HostTensor::random(DType::F32, vec![64, 64], 70 + layer, -0.2, 0.2));
        let bias = g.constant(HostTensor::random(DType::F32, vec![64], 80 + layer, -0.2, 0.2));
        h = (&h.matmul(&w) + &bias).relu();
    }
    g.output(&h);
    let inputs = [HostTensor::random(DType::F32, vec![16, 64], 69, -2.0, 2.0)];
    for m in [Mode::Default, Mode::ReduceOverhead] {
        check_graph(&b, "three layers", &g, &inputs, m, 1e-5);
    }
    let c = compile(&g, b.clone(), opts(Mode::Default)).unwrap();
    let sources = c.sources();
    let shared = sources.iter().filter(|s| s.source.contains("(identical body)")).count();
    let names: Vec<&str> = sources.iter().map(|s| s.name.as_str()).collect();
    // One `matmul_add_relu` kernel per layer; the second and third launch the first's compile.
    assert_eq!((sources.len(), shared), (3, 2), "{names:?}");
}

#[test]
fn softmax_every_size_and_mode() {
    let Some(b) = backend("softmax") else { return };
    let b: Arc<dyn Backend> = Arc::new(b);
    for (k, &n) in SIZES.iter().enumerate() {
        let g = Graph::new();
        let x = g.input("x", DType::F32, [3, n]);
        g.output(&x.softmax(-1));
        let inputs = [HostTensor::random(DType::F32, vec![3, n], 10 + k as u64, -4.0, 4.0)];
        let modes: &[Mode] = if n == 4097 { &MODES } else { &[Mode::Default] };
        for &m in modes {
            check_graph(&b, &format!("softmax 3x{n}"), &g, &inputs, m, 1e-7);
        }
    }
}

/// Rows too few to fill the GPU, split over blocks of one kernel (the row's last block folding the
/// partials through the kernel's scratch), in every mode: CUDA graph replays and max-autotune's
/// split candidates leave the row counters zero for the next run, so three runs agree.
#[test]
fn split_rows_every_mode() {
    let Some(b) = backend("split rows") else { return };
    let b: Arc<dyn Backend> = Arc::new(b);
    for (k, (rows, n)) in [(1usize, 300_001usize), (4, 65_536)].into_iter().enumerate() {
        let g = Graph::new();
        let x = g.input("x", DType::F32, [rows, n]);
        g.output(&x.sum(&[1], false));
        let inputs = [HostTensor::random(DType::F32, vec![rows, n], 40 + k as u64, -1.0, 1.0)];
        for &m in &MODES {
            check_graph(&b, &format!("sum {rows}x{n}"), &g, &inputs, m, 1e-2);
        }
    }
}

#[test]
fn matmul_every_mode() {
    let Some(b) = backend("matmul") else { return };
    let b: Arc<dyn Backend> = Arc::new(b);
    for (k, &(m, kk, n)) in [(1, 7, 1), (7, 1023, 7), (1023, 33, 17), (65, 64, 130)].iter().enumerate() {
        let g = Graph::new();
        let a = g.input("a", DType::F32, [m, kk]);
        let bb = g.input("b", DType::F32, [kk, n]);
        g.output(&(a.matmul(&bb) + 0.5).relu());
        let inputs = [
            HostTensor::random(DType::F32, vec![m, kk], 20 + k as u64, -1.0, 1.0),
            HostTensor::random(DType::F32, vec![kk, n], 30 + k as u64, -1.0, 1.0),
        ];
        let modes: &[Mode] = if k == 3 { &MODES } else { &[Mode::Default] };
        for &md in modes {
            check_graph(&b, &format!("matmul {m}x{kk}x{n}"), &g, &inputs, md, 1e-5 * kk as f64);
        }
    }
}

#[test]
fn f64_i64_and_bf16() {
    let Some(b) = backend("dtypes") else { return };
    let b: Arc<dyn Backend> = Arc::new(b);
    for (k, &n) in [7usize, 4097].iter().enumerate() {
        // f64: pointwise and a row reduction, at f64 precision.
        let g = Graph::new();
        let x = g.input("x", DType::F64, [5, n]);
        g.output(&((&x * &x).sum(&[-1], false) + 1.0));
        g.output(&x.exp());
        let inputs = [HostTensor::random(DType::F64, vec![5, n], 40 + k as u64, -1.0, 1.0)];
        check_graph(&b, &format!("f64 n={n}"), &g, &inputs, Mode::Default, 1e-12);

        // i64: exact arithmetic beyond 32 bits.
        let g = Graph::new();
        let x = g.input("x", DType::I64, [n]);
        let y = g.input("y", DType::I64, [n]);
        g.output(&(&(&x * &y) + &x));
        g.output(&x.sum(&[-1], false));
        let big = HostTensor::from_i64(
            DType::I64,
            vec![n],
            &(0..n as i64).map(|i| (i - 3) * 3_000_000_007 + (1 << 40)).collect::<Vec<_>>(),
        );
        let small = HostTensor::random(DType::I64, vec![n], 60 + k as u64, -100.0, 100.0);
        check_graph(&b, &format!("i64 n={n}"), &g, &[big, small], Mode::Default, 0.0);

        // bf16: stored as bf16, computed in f32, rounded per node.
        let g = Graph::new();
        let x = g.input("x", DType::BF16, [3, n]);
        let y = g.input("y", DType::BF16, [3, n]);
        g.output(&(&x * &y + 1.0));
        g.output(&x.softmax(-1));
        let inputs = [
            HostTensor::random(DType::BF16, vec![3, n], 70 + k as u64, -2.0, 2.0),
            HostTensor::random(DType::BF16, vec![3, n], 80 + k as u64, -2.0, 2.0),
        ];
        for &m in &[Mode::Default, Mode::ReduceOverhead] {
            check_graph(&b, &format!("bf16 n={n}"), &g, &inputs, m, 1e-2);
        }
    }
}

fn affine(n: usize) -> Graph {
    let g = Graph::new();
    let x = g.input("x", DType::F32, [n]);
    g.output(&((&x * 0.5) + 1.0));
    g
}

#[test]
fn run_device_chains_within_and_across_executables_in_every_mode() {
    let n = 1023;
    let x = HostTensor::random(DType::F32, vec![n], 5, -8.0, 8.0);
    for updates in [true, false] {
        let Some(mut b) = backend("chaining") else { return };
        b.set_graph_arg_updates(updates);
        let b = Arc::new(b);
        for m in MODES {
            // The graph modes update kernel-node arguments in place (or copy, when told to).
            let program = compile(&affine(n), b.clone(), opts(m)).unwrap().program().unwrap();
            let lo = LoadOptions { mode: m, cache_dir: Some(cache_dir()), ..LoadOptions::default() };
            let exe = b.load_cuda(&program, &lo).unwrap();
            assert_eq!(exe.uses_graph(), m != Mode::Default);
            assert!(!exe.updates_graph_args() || (updates && m != Mode::Default), "{m:?}");
            if updates && m != Mode::Default && !exe.updates_graph_args() {
                println!("NOTE: {m:?}: the driver refused graph argument updates; replays copy");
            }
            drop(exe);

            let c = compile(&affine(n), b.clone(), opts(m)).unwrap();
            let d = compile(&affine(n), b.clone(), opts(m)).unwrap();
            let mut cur = c.upload(&x).unwrap();
            let mut kept = Vec::new();
            let mut want = x.to_f64_vec();
            let mut wants = Vec::new();
            for step in 0..8 {
                // Runs queue without waiting; executables alternate (different streams) every
                // other pair of steps, so both same-stream and cross-stream chains occur.
                let exe: &CompiledGraph = if (step / 2) % 2 == 0 { &c } else { &d };
                let out = exe.run_device(std::slice::from_ref(&cur)).unwrap().remove(0);
                want = want.iter().map(|v| (*v as f32 * 0.5 + 1.0) as f64).collect();
                wants.push(want.clone());
                kept.push(out.clone());
                cur = out;
            }
            // Every output is intact: a later run never overwrote an earlier output.
            for (i, (t, w)) in kept.iter().zip(&wants).enumerate() {
                let got = t.to_host().unwrap().to_f64_vec();
                assert!(
                    got.iter().zip(w).all(|(a, b)| (a - b).abs() <= 1e-5 * b.abs().max(1.0)),
                    "{m:?} updates={updates} step {i}"
                );
            }
            // Dropping chained outputs while the other executable still runs is safe.
            drop(kept);
            let again = c.run_device(&[cur]).unwrap().remove(0).to_host().unwrap();
            assert_eq!(again.shape, vec![n]);
            // The host path after device runs uses the executable's own buffers again.
            let host = c.run(std::slice::from_ref(&x)).unwrap();
            let want1: Vec<f64> = x.to_f64_vec().iter().map(|v| (*v as f32 * 0.5 + 1.0) as f64).collect();
            assert!(host[0].to_f64_vec().iter().zip(&want1).all(|(a, b)| (a - b).abs() <= 1e-5 * b.abs().max(1.0)));
        }
    }
}

#[test]
fn out_of_memory_is_a_clean_error_and_the_executable_still_runs() {
    let Some(b) = backend("oom") else { return };
    let dev = b.device().clone();
    let g = affine(7);
    let c = compile(&g, Arc::new(b), opts(Mode::ReduceOverhead)).unwrap();
    let x = HostTensor::random(DType::F32, vec![7], 1, -1.0, 1.0);
    let before = c.run(std::slice::from_ref(&x)).unwrap();
    let stream = dev.new_stream().unwrap();
    let e = stream.alloc(1 << 50).unwrap_err();
    let BackendError::OutOfMemory(m) = &e else { panic!("expected OutOfMemory, got {e:?}") };
    assert!(m.contains("1.00 PiB") && m.contains("in use") && m.contains("device:"), "{m}");
    // Real exhaustion: thirds of the free memory until the driver refuses (after the pool
    // emptied its cache and retried).
    let free = dev.mem_info().unwrap().0;
    let mut held = Vec::new();
    let mut refused = None;
    for _ in 0..8 {
        match stream.alloc(free / 3) {
            Ok(b) => held.push(b),
            Err(e) => {
                refused = Some(e);
                break;
            }
        }
    }
    let e = refused.expect("the device ran out of memory");
    let BackendError::OutOfMemory(m) = &e else { panic!("expected OutOfMemory, got {e:?}") };
    assert!(m.contains("failed after freeing the cache"), "{m}");
    println!("out of memory after {} blocks: {m}", held.len());
    drop(held);
    let after = c.run(std::slice::from_ref(&x)).unwrap();
    assert_eq!(before[0].to_f64_vec(), after[0].to_f64_vec());
    let d = c.run_device(&[c.upload(&x).unwrap()]).unwrap();
    assert_eq!(d[0].to_host().unwrap().to_f64_vec(), after[0].to_f64_vec());
}

#[test]
fn wrong_inputs_are_errors_naming_the_problem() {
    let Some(b) = backend("wrong_inputs") else { return };
    let c = compile(&affine(7), Arc::new(b), opts(Mode::Default)).unwrap();
    let x = HostTensor::random(DType::F32, vec![7], 1, -1.0, 1.0);
    let host = DeviceTensor::host(&x);
    let e = c.run_device(&[host]).unwrap_err().to_string();
    assert!(e.contains("host"), "names the other backend: {e}");
    assert!(c.run_device(&[]).is_err());
}

/// Tensor-core and library products in bf16/f16: awkward shapes on the `mma.sync` template (small
/// products stay on sinter's kernels in default mode), a product over the library threshold on
/// cuBLASLt in default mode (when libcublasLt is present), a bias+relu epilogue both ways, and
/// max-autotune choosing between them; all against the CPU reference.
#[test]
fn tensor_core_and_library_products() {
    let Some(b) = backend("tensor_core") else { return };
    let b = Arc::new(b);
    let dynb: Arc<dyn Backend> = b.clone();
    for (i, &(d, m, kk, n)) in [
        (DType::BF16, 7, 1023, 130),
        (DType::F16, 4097, 40, 9),
        (DType::BF16, 1, 4097, 1),
        (DType::BF16, 1024, 512, 1024),
        // ViT-B/16's projections: exact f32 takes the library from 1e8 FLOP (the own f32 template
        // runs on CUDA cores).
        (DType::F32, 394, 768, 768),
    ]
    .iter()
    .enumerate()
    {
        let g = Graph::new();
        let a = g.input("a", d, [m, kk]);
        let w = g.input("w", d, [kk, n]);
        let bias = g.input("bias", d, [n]);
        g.output(&(a.matmul(&w) + &bias).relu());
        let inputs = [
            HostTensor::random(d, vec![m, kk], 50 + i as u64, -1.0, 1.0),
            HostTensor::random(d, vec![kk, n], 60 + i as u64, -1.0, 1.0),
            HostTensor::random(d, vec![n], 70 + i as u64, -1.0, 1.0),
        ];
        let modes: &[Mode] = if i == 3 { &MODES } else { &[Mode::Default] };
        for &md in modes {
            // Inputs rounded to 16 bits, f32 accumulation in another order, one rounding at the store.
            check_graph(&dynb, &format!("{d} matmul {m}x{kk}x{n}"), &g, &inputs, md, 2e-2 * (kk as f64).sqrt());
        }
        let c = compile(&g, dynb.clone(), opts(Mode::Default)).unwrap();
        let strategies: Vec<String> =
            c.sources().iter().map(|s| s.source.lines().take(3).collect::<String>()).collect();
        let min = sinter_cuda::backend::LIBRARY_MIN_FLOPS;
        let large = 2.0 * (m * kk * n) as f64 >= min || sinter_cuda::backend::skinny(m, n, kk);
        let library = sinter_cuda::probe::cublaslt().is_ok() && large;
        let want = match (library, d) {
            (true, _) => "cuBLASLt product",
            (false, DType::F32) => "matmul batch",
            _ => "tensor-core matmul",
        };
        assert!(strategies.iter().any(|s| s.contains(want)), "{d} {m}x{kk}x{n}: want {want} in {strategies:#?}");
    }
}

/// cuBLASLt's residual epilogue (`C`, beta 1: `a @ w [+ bias] + r`, the terms in either order),
/// a bf16 product stored as f32 by the library, and split products of a vocabulary's 1001
/// columns whose epilogue kernel (a widening cast after a bias, a GELU) must store whole vectors
/// at the lane (its index simplified back to `lane`), in default mode, against the CPU reference. Without libcublasLt the same graphs run on sinter's kernels.
#[test]
fn library_residuals_and_split_epilogues() {
    let Some(b) = backend("library_residuals") else { return };
    let dynb: Arc<dyn Backend> = Arc::new(b);
    let library = sinter_cuda::probe::cublaslt().is_ok();
    enum Post {
        Residual { first: bool },
        Widen,
        Gelu,
    }
    // (dtype, batch, m, k, n, bias, after the product, what the source says)
    let vector_store = "+ lane0) = o0;";
    let cases = [
        (DType::F32, 1, 394, 768, 768, true, Post::Residual { first: false }, "epilogue acc + bias (F32) + residual"),
        (DType::BF16, 3, 128, 256, 512, false, Post::Residual { first: true }, "epilogue acc + residual"),
        // Autocast's logits: cuBLASLt stores the f32 accumulator itself; with a bias, split.
        (DType::BF16, 1, 512, 768, 1001, false, Post::Widen, "BF16 operands, F32 output"),
        (DType::BF16, 1, 300, 768, 1001, true, Post::Widen, vector_store),
        (DType::F32, 1, 300, 512, 1001, true, Post::Gelu, vector_store),
    ];
    for (i, (d, batch, m, kk, n, bias, post, want)) in cases.into_iter().enumerate() {
        let what = format!("{d} {batch}x{m}x{kk}x{n} bias {bias}");
        let g = Graph::new();
        let a = g.input("a", d, [batch, m, kk]);
        let w = g.input("w", d, [n, kk]);
        let mut inputs = vec![
            HostTensor::random(d, vec![batch, m, kk], 80 + i as u64, -1.0, 1.0),
            HostTensor::random(d, vec![n, kk], 90 + i as u64, -1.0, 1.0),
        ];
        let mut y = a.matmul(&w.transpose(0, 1));
        if bias {
            y = &y + &g.input("bias", d, [n]);
            inputs.push(HostTensor::random(d, vec![n], 100 + i as u64, -1.0, 1.0));
        }
        y = match post {
            Post::Residual { first } => {
                let r = g.input("r", d, [batch, m, n]);
                inputs.push(HostTensor::random(d, vec![batch, m, n], 110 + i as u64, -1.0, 1.0));
                if first { &r + &y } else { &y + &r }
            }
            Post::Widen => y.cast(DType::F32),
            Post::Gelu => y.gelu(),
        };
        g.output(&y);
        check_graph(&dynb, &what, &g, &inputs, Mode::Default, 2e-2 * (kk as f64).sqrt());
        if library {
            let c = compile(&g, dynb.clone(), opts(Mode::Default)).unwrap();
            let sources: Vec<String> = c.sources().iter().map(|s| s.source.clone()).collect();
            // The epilogue's whole-vector store: CUDA C++, or a PTX vector store where the
            // renderer writes PTX (`render::ptx`; the step's source is its description, then the
            // epilogue's module).
            let has = |s: &str| {
                s.contains(want)
                    || (want == vector_store
                        && s.contains(sinter_cuda::render::ptx::PTX_MARK)
                        && s.contains("st.global.v"))
            };
            assert!(
                sources.iter().any(|s| s.contains("cuBLASLt product") && has(s)),
                "{what}: want {want:?} in {sources:#?}"
            );
        }
    }
}

/// The relative L2 error of `got` against `want`.
fn rel_l2(got: &HostTensor, want: &HostTensor) -> f64 {
    let (g, w) = (got.to_f64_vec(), want.to_f64_vec());
    let num: f64 = g.iter().zip(&w).map(|(a, b)| (a - b) * (a - b)).sum();
    let den: f64 = w.iter().map(|b| b * b).sum();
    (num / den.max(f64::MIN_POSITIVE)).sqrt()
}

/// cuBLASLt's GELU epilogue (the tanh form, with and without a bias, in f32, bf16 and f16) and
/// autocast's residual stream (a bf16 product plus an f32 bias and residual, stored f32), direct,
/// against the CPU reference. In
/// f32, GELU's error must stay that of the product itself: each case also runs the plain product
/// on the same inputs, and the GELU's worst error may be at most 2x the product's (GELU's slope is
/// at most 1.13) plus 4 f32 ulps of the largest output. Prints each error (the figures
/// BENCHMARKS.md records).
#[test]
fn library_activations_and_autocast_epilogues() {
    let Some(b) = backend("library_activations") else { return };
    if sinter_cuda::probe::cublaslt().is_err() {
        eprintln!("library_activations: no libcublasLt, skipped");
        return;
    }
    let dynb: Arc<dyn Backend> = Arc::new(b);
    let sources = |c: &CompiledGraph| c.sources().iter().map(|s| s.source.clone()).collect::<Vec<_>>().join("\n");
    for d in [DType::F32, DType::BF16, DType::F16] {
        for bias in [false, true] {
            // 120 MFLOP: above the library's threshold in default mode.
            let (m, kk, n) = (300, 384, 520);
            let what = format!("{d} gelu(tanh) bias {bias}");
            let build = |gelu: bool| {
                let g = Graph::new();
                let mut y = g.input("a", d, [m, kk]).matmul(&g.input("w", d, [kk, n]));
                if bias {
                    y = &y + &g.input("bias", d, [n]);
                }
                g.output(&if gelu { y.gelu_tanh() } else { y });
                g
            };
            let mut inputs = vec![
                HostTensor::random(d, vec![m, kk], 7, -1.0, 1.0),
                HostTensor::random(d, vec![kk, n], 8, -1.0, 1.0),
            ];
            if bias {
                inputs.push(HostTensor::random(d, vec![n], 9, -1.0, 1.0));
            }
            let mut errs = Vec::new();
            for gelu in [false, true] {
                let g = build(gelu);
                let want = sinter_core::cpu::run(&g, &inputs).unwrap();
                let c = compile(&g, dynb.clone(), opts(Mode::Default)).unwrap();
                let got = c.run(&inputs).unwrap();
                let src = sources(&c);
                assert!(src.contains("cublaslt") || src.contains("cuBLASLt product"), "{what}: {src}");
                if gelu {
                    let form =
                        if bias { format!("gelu(tanh)(acc + bias ({}))", d_name(d)) } else { "gelu(tanh)(acc)".into() };
                    assert!(src.contains(&form), "{what}: want {form:?} in {src}");
                }
                let peak = want[0].to_f64_vec().iter().fold(0.0f64, |a, b| a.max(b.abs()));
                errs.push((got[0].max_abs_diff(&want[0]), rel_l2(&got[0], &want[0]), peak));
                let r = got[0].tolerance_ratio(&want[0], d.rel_tolerance(), 2e-2 * (kk as f64).sqrt());
                assert!(r <= 1.0, "{what} gelu {gelu}: tolerance ratio {r}");
            }
            let ((plain, plain_l2, _), (act, act_l2, peak)) = (errs[0], errs[1]);
            eprintln!(
                "{what}: max abs error plain {plain:.3e} (rel L2 {plain_l2:.2e}), gelu {act:.3e} (rel L2 {act_l2:.2e}), outputs up to {peak:.2}"
            );
            if d == DType::F32 {
                let ulp = peak * f32::EPSILON as f64;
                assert!(
                    act <= 2.0 * plain + 4.0 * ulp,
                    "{what}: cuBLASLt's GELU adds error: {act:.3e} against the product's {plain:.3e}"
                );
            }
        }
    }
    // An f32 MLP block under bf16 autocast, its weights constants: the first product's f32 bias
    // and GELU, the second's f32 bias and f32 residual (the residual stream), both direct.
    let (m, dm, dh) = (512, 256, 1024);
    let g = Graph::new();
    let x = g.input("x", DType::F32, [m, dm]);
    let c = |shape: Vec<usize>, seed| g.constant(HostTensor::random(DType::F32, shape, seed, -0.3, 0.3));
    let (w1, b1, w2, b2) = (c(vec![dm, dh], 1), c(vec![dh], 2), c(vec![dh, dm], 3), c(vec![dm], 4));
    let h = (x.matmul(&w1) + &b1).gelu_tanh();
    g.output(&(h.matmul(&w2) + &b2 + &x));
    let inputs = [HostTensor::random(DType::F32, vec![m, dm], 5, -1.0, 1.0)];
    let want = sinter_core::cpu::run(&g, &inputs).unwrap();
    let o = CompileOptions { precision: sinter_core::passes::Precision::BF16, ..opts(Mode::Default) };
    let cg = compile(&g, dynb.clone(), o).unwrap();
    let src = sources(&cg);
    // The first product's f32 bias on its bf16 output is no library epilogue (split); the second
    // writes the f32 residual stream directly.
    for form in ["not a library epilogue", "acc + bias (F32) + residual (C, beta 1)"] {
        assert!(src.contains(form), "autocast MLP: want {form:?} in {src}");
    }
    for round in 0..2 {
        let got = cg.run(&inputs).unwrap();
        let e = rel_l2(&got[0], &want[0]);
        eprintln!("autocast MLP (bf16) run {round}: rel L2 {e:.2e} against the f32 reference");
        assert!(e <= 1e-2, "autocast MLP: rel L2 {e}");
    }
}

/// The cuBLASLt type name a source description prints for `d`.
fn d_name(d: DType) -> &'static str {
    match d {
        DType::F32 => "F32",
        DType::BF16 => "BF16",
        DType::F16 => "F16",
        _ => "?",
    }
}

#[test]
fn timing_sources_and_autotune_cache() {
    let Some(b) = backend("timing") else { return };
    let g = Graph::new();
    let x = g.input("x", DType::F32, [64, 1023]);
    let w = g.input("w", DType::F32, [1023]);
    g.output(&(&x * &w).softmax(-1));
    let inputs = [
        HostTensor::random(DType::F32, vec![64, 1023], 1, -1.0, 1.0),
        HostTensor::random(DType::F32, vec![1023], 2, -1.0, 1.0),
    ];
    let want = sinter_core::cpu::run(&g, &inputs).unwrap();
    let b = Arc::new(b);
    let c = compile(&g, b.clone(), opts(Mode::Default)).unwrap();
    let (out, runs) = c.run_timed(&inputs, 3).unwrap();
    check_close("timed", &out[0], &want[0], 1e-7);
    assert_eq!(runs.len(), 3);
    for r in &runs {
        assert!(!r.is_empty());
        assert_eq!(r[0].start_ns, 0.0);
        assert!(r.iter().all(|t| t.dur_ns > 0.0 && t.start_ns >= 0.0), "{r:?}");
    }
    // Whole runs timed between two events, in default mode and replaying the CUDA graph.
    for mode in [Mode::Default, Mode::ReduceOverhead] {
        let c = compile(&g, b.clone(), opts(mode)).unwrap();
        let (out, ns) = c.run_timed_whole(&inputs, 20).unwrap().expect("CUDA times whole runs");
        check_close("timed whole", &out[0], &want[0], 1e-7);
        assert_eq!(ns.len(), 20, "{mode:?}");
        assert!(ns.iter().all(|t| *t > 0.0 && *t < 1e8), "{mode:?}: {ns:?}");
    }
    let srcs = c.sources();
    assert!(!srcs.is_empty());
    for s in &srcs {
        assert_eq!(s.ext, "cu");
        assert!(s.source.contains(&s.name), "{}", s.name);
        let r = s.resources.expect("resources reported");
        assert!(r.registers > 0, "{}: {r:?}", s.name);
    }

    // Max-autotune: the second load of the same program takes every winner from the cache.
    let program = c.program().unwrap();
    let dir = cache_dir().join("autotune-test");
    let lo = LoadOptions { mode: Mode::MaxAutotune, cache_dir: Some(dir.clone()), ..LoadOptions::default() };
    let first = b.load_cuda(&program, &lo).unwrap();
    assert!(first.uses_graph());
    assert!(first.tuning_log().iter().any(|l| l.contains("chose") || l.contains("cached")), "{:?}", first.tuning_log());
    let mut second = b.load_cuda(&program, &lo).unwrap();
    assert!(second.tuning_log().iter().all(|l| !l.contains("chose")), "{:?}", second.tuning_log());
    assert_eq!(first.tunings(), second.tunings());
    let got = second.run(&inputs).unwrap();
    check_close("autotuned", &got[0], &want[0], 1e-7);
    println!("autotune log: {:#?}", first.tuning_log());
}

/// Max-autotune searches one of two identical kernels (the same IR over other buffers, as a
/// transformer's layers) and loads the other with the cached winner, in the same load. Fusion is
/// off so each softmax is a chain of kernels, pairwise identical (fused, the two independent
/// softmaxes share one kernel).
#[test]
fn identical_kernels_are_searched_once() {
    let Some(b) = backend("identical kernels") else { return };
    let g = Graph::new();
    let x = g.input("x", DType::F32, [32, 777]);
    let y = g.input("y", DType::F32, [32, 777]);
    g.output(&x.softmax(-1));
    g.output(&y.softmax(-1));
    let inputs = [
        HostTensor::random(DType::F32, vec![32, 777], 3, -1.0, 1.0),
        HostTensor::random(DType::F32, vec![32, 777], 4, -1.0, 1.0),
    ];
    let want = sinter_core::cpu::run(&g, &inputs).unwrap();
    let b = Arc::new(b);
    let unfused = CompileOptions { fusion: false, ..opts(Mode::Default) };
    let program = compile(&g, b.clone(), unfused).unwrap().program().unwrap();
    let n = program.kernels.len();
    assert!(n >= 2 && n % 2 == 0, "two identical chains of kernels: {n}");
    let dir = cache_dir().join("autotune-identical");
    let _ = std::fs::remove_dir_all(&dir);
    let lo = LoadOptions { mode: Mode::MaxAutotune, cache_dir: Some(dir), ..LoadOptions::default() };
    let mut exe = b.load_cuda(&program, &lo).unwrap();
    let log = exe.tuning_log().to_vec();
    assert_eq!(log.iter().filter(|l| l.contains("chose")).count(), n / 2, "{log:#?}");
    assert_eq!(log.iter().filter(|l| l.contains(": cached")).count(), n / 2, "{log:#?}");
    let got = exe.run(&inputs).unwrap();
    check_close("first", &got[0], &want[0], 1e-7);
    check_close("second", &got[1], &want[1], 1e-7);
}

/// Median host time of `f` over batches (the device drains between batches so the launch queue
/// never blocks the host).
fn host_us(mut f: impl FnMut(), sync: impl Fn()) -> f64 {
    let mut per = Vec::new();
    for _ in 0..20 {
        let t = Instant::now();
        for _ in 0..100 {
            f();
        }
        per.push(t.elapsed().as_secs_f64() * 1e6 / 100.0);
        sync();
    }
    per.sort_by(f64::total_cmp);
    per[per.len() / 2]
}

#[test]
fn host_overhead_and_calibration() {
    let Some(mut b) = backend("overhead") else { return };
    b.set_poison_outputs(false);
    let b = Arc::new(b);
    let program = compile(&affine(1024), b.clone(), opts(Mode::Default)).unwrap().program().unwrap();
    assert_eq!(program.kernels.len(), 1);
    let x = b.upload(&HostTensor::random(DType::F32, vec![1024], 1, -1.0, 1.0)).unwrap();
    let mut copying = CudaBackend::new().unwrap();
    copying.set_graph_arg_updates(false);
    for (m, be) in [(Mode::Default, &*b), (Mode::ReduceOverhead, &*b), (Mode::ReduceOverhead, &copying)] {
        let lo = LoadOptions { mode: m, cache_dir: Some(cache_dir()), ..LoadOptions::default() };
        let exe = std::cell::RefCell::new(be.load_cuda(&program, &lo).unwrap());
        let how = if exe.borrow().updates_graph_args() { "graph args updated" } else { "no updates" };
        for _ in 0..50 {
            exe.borrow_mut().run_device(std::slice::from_ref(&x)).unwrap();
        }
        let sync = || exe.borrow().synchronize().unwrap();
        let us = host_us(
            || {
                let out = exe.borrow_mut().run_device(std::slice::from_ref(&x)).unwrap();
                std::hint::black_box(&out);
            },
            sync,
        );
        // Chained: each output feeds the next run.
        let mut cur = x.clone();
        let us_chain = host_us(
            || {
                cur = exe.borrow_mut().run_device(std::slice::from_ref(&cur)).unwrap().remove(0);
            },
            sync,
        );
        let want: Vec<f64> = x.to_host().unwrap().to_f64_vec();
        let got = cur.to_host().unwrap().to_f64_vec();
        assert!(got.iter().zip(&want).all(|(g, w)| g.is_finite() && (g - 2.0).abs() <= (w - 2.0).abs() + 1e-3));
        let buf = cur.buffer().as_any().downcast_ref::<CudaBuffer>().unwrap();
        assert!(buf.ptr() != 0);
        println!(
            "host overhead per run_device, one-kernel program, {m:?} ({how}): {us:.2} us (chained {us_chain:.2} us)"
        );
        assert!(us < 100.0, "{m:?}: {us} us per run_device");
    }
    // Eight unfused kernels: eight launches per run by default, one replay with a graph.
    let g = Graph::new();
    let x8 = g.input("x", DType::F32, [1024]);
    let mut t = x8.relu();
    for i in 0..7 {
        t = if i % 2 == 0 { t * 0.5 } else { t + 1.0 };
    }
    g.output(&t);
    let unfused = CompileOptions { fusion: false, ..opts(Mode::Default) };
    let program = compile(&g, b.clone(), unfused).unwrap().program().unwrap();
    for m in [Mode::Default, Mode::ReduceOverhead] {
        let lo = LoadOptions { mode: m, cache_dir: Some(cache_dir()), ..LoadOptions::default() };
        let exe = std::cell::RefCell::new(b.load_cuda(&program, &lo).unwrap());
        let us = host_us(
            || {
                let out = exe.borrow_mut().run_device(std::slice::from_ref(&x)).unwrap();
                std::hint::black_box(&out);
            },
            || exe.borrow().synchronize().unwrap(),
        );
        println!("host overhead per run_device, {}-kernel program, {m:?}: {us:.2} us", program.kernels.len());
    }
    println!("pool: {}", b.device().pool().describe());
    let cal = b.calibrate().unwrap();
    println!("calibration on {}: {cal:?}", b.device().info().description());
    assert!(cal.copy_gbps > 10.0 && cal.launch_overhead_us > 0.0 && cal.host_launch_us > 0.0, "{cal:?}");
}
