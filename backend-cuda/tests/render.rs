//! Renderer tests: snapshots of the generated CUDA C++ for every built-in workload and for
//! hand-built kernels (every dtype, every unary and binary op, casts, literals, gathers, every
//! reduce strategy, arg reductions, matmul epilogues, sizes 1, 7, 1023, 4097), the strategies the
//! benchmark sizes get, tuning validation and errors.
//!
//! Every rendered source is also compiled by NVRTC for sm_90a when NVRTC is present and must give
//! no error and no warning (without NVRTC the compile step prints a skip line, unless
//! `SINTER_REQUIRE_NVRTC=1`). `SINTER_CUDA_DUMP=<dir>` writes every rendered source there as
//! `<test>__<kernel>.cu` for compiling by other means.

mod common;

use common::*;
use sinter_core::DType;
use sinter_core::kernel::{Expr, ExprId, Index, Kernel, KernelBody, Program, ReduceStrategy};
use sinter_core::workloads::{self, Scale};
use sinter_cuda::render::{
    self, CudaCaps, MatmulTile, MmaEngine, MmaTile, RenderError, Rendered, Tuning, candidates, check_tuning,
};

const STRATEGIES: [ReduceStrategy; 3] =
    [ReduceStrategy::Persistent, ReduceStrategy::Looped, ReduceStrategy::ThreadPerRow];

/// Compiles `r` with NVRTC (sm_90a) when available, failing on errors and warnings; writes it to
/// `$SINTER_CUDA_DUMP` when set.
fn compile(test: &str, r: &Rendered) {
    if let Ok(dir) = std::env::var("SINTER_CUDA_DUMP") {
        let dir = std::path::Path::new(&dir);
        std::fs::create_dir_all(dir).expect("dump dir");
        let mut n = 0;
        let path = loop {
            let p = dir.join(format!("{test}__{}{}.cu", r.name, if n == 0 { String::new() } else { format!("_{n}") }));
            if !p.exists() {
                break p;
            }
            n += 1;
        };
        std::fs::write(path, &r.source).expect("dump");
    }
    if render::ptx::is_ptx(&r.source) {
        match common::ptxas(&r.source, test) {
            Some(Ok(log)) => {
                assert!(!log.contains("warning"), "{test}: {} assembles with warnings:\n{log}\n{}", r.name, r.source)
            }
            Some(Err(log)) => panic!("{test}: ptxas rejects {}:\n{log}\n{}", r.name, r.source),
            None => {}
        }
        return;
    }
    if !nvrtc_available(test) {
        return;
    }
    let target = sinter_cuda::nvrtc::Target::hopper();
    match sinter_cuda::nvrtc::compile(&r.name, &r.source, &target) {
        Ok(c) => {
            let warnings: Vec<&str> = c.log.lines().filter(|l| l.contains("warning")).collect();
            assert!(warnings.is_empty(), "{test}: {} compiles with warnings:\n{}\n{}", r.name, c.log, r.source);
        }
        Err(e) => panic!("{test}: {} does not compile: {e}\n{}", r.name, r.source),
    }
}

fn hopper() -> CudaCaps {
    CudaCaps::hopper()
}

/// Renders (default tuning) and compiles every kernel of `p`, returning the sources with a header
/// line per kernel (launch and strategy).
fn render_all(test: &str, p: &Program) -> String {
    let mut out = String::new();
    for k in &p.kernels {
        let r = render::render(k, &hopper(), &Tuning::default()).unwrap_or_else(|e| panic!("{test}: {e}"));
        compile(test, &r);
        out.push_str(&format!("// ==== {} grid {:?} block {:?} ({})\n", r.name, r.grid, r.block, r.strategy));
        out.push_str(&r.source);
        out.push('\n');
    }
    out
}

/// Renders and compiles every kernel of `p` without snapshotting.
fn check_all(test: &str, p: &Program) {
    let _ = render_all(test, p);
}

#[test]
fn every_workload() {
    for w in workloads::all() {
        let p = scheduled(&w);
        let s = render_all(w.name, &p);
        insta::assert_snapshot!(w.name, s);
    }
}

#[test]
fn unary_ops_of_every_dtype() {
    let mut s = String::new();
    for d in DType::ALL {
        s.push_str(&render_all("unary", &unary_all(d, 1024)));
        for n in [1, 7, 1023, 4097] {
            check_all("unary", &unary_all(d, n));
        }
    }
    insta::assert_snapshot!(s);
}

#[test]
fn binary_ops_of_every_dtype() {
    let mut s = String::new();
    for d in DType::ALL {
        s.push_str(&render_all("binary", &binary_all(d, 1024)));
        for n in [1, 7, 1023, 4097] {
            check_all("binary", &binary_all(d, n));
        }
    }
    insta::assert_snapshot!(s);
}

#[test]
fn casts_between_every_dtype() {
    let mut s = String::new();
    for d in DType::ALL {
        s.push_str(&render_all("casts", &casts_from(d, 64)));
        for n in [1, 7, 1023, 4097] {
            check_all("casts", &casts_from(d, n));
        }
    }
    insta::assert_snapshot!(s);
}

/// The 16-bit conversions' per-architecture paths (`render/half.rs`: `cvt.rn.bf16.f32` from sm_80,
/// `cvt.rn.bf16.f64` from sm_90, software rounding below) compile for every architecture this
/// NVRTC takes from sm_75, casts from every float dtype (each narrowing and widening).
#[test]
fn sixteen_bit_conversions_compile_for_every_architecture() {
    if !nvrtc_available("sixteen_bit_conversions_compile_for_every_architecture") {
        return;
    }
    let archs = sinter_cuda::nvrtc::supported_archs().expect("archs");
    let archs: Vec<i32> = [75, 80, 86, 89, 90].into_iter().filter(|a| archs.contains(a)).collect();
    assert!(archs.contains(&80) && archs.contains(&90), "NVRTC takes {archs:?}");
    for d in [DType::F16, DType::BF16, DType::F32, DType::F64] {
        for k in &casts_from(d, 64).kernels {
            let r = render::render(k, &hopper(), &Tuning::default()).expect("render");
            for &a in &archs {
                let target = sinter_cuda::nvrtc::Target::sm(((a / 10) as u32, (a % 10) as u32));
                if let Err(e) = sinter_cuda::nvrtc::compile(&r.name, &r.source, &target) {
                    panic!("{} for sm_{a}: {e}\n{}", r.name, r.source);
                }
            }
        }
    }
}

#[test]
fn literals_of_every_dtype() {
    let mut s = String::new();
    for d in DType::ALL {
        s.push_str(&render_all("literals", &literals(d, 7)));
    }
    insta::assert_snapshot!(s);
}

#[test]
fn gathers_clamp_in_signed_64_bit() {
    let mut s = String::new();
    for id in [DType::I64, DType::I32, DType::U64, DType::F32] {
        s.push_str(&render_all("gather", &gather(id, 10, 16, 7)));
    }
    assert!(s.contains("sinter_clamp((long long)v0, 0LL, 9LL)"), "{s}");
    insta::assert_snapshot!(s);
}

#[test]
fn pointwise_vector_widths() {
    // f32 4-wide, f16 8-wide, f64 2-wide, u8 16-wide; a broadcast row loaded once per group when
    // the row length is a multiple of the width; odd sizes scalar.
    let mut s = String::new();
    for (d, w) in [(DType::F32, 4), (DType::F16, 8), (DType::BF16, 8), (DType::F64, 2), (DType::U8, 16)] {
        let p = add_relu_mul(33, 4096, d);
        let r = render::render(&p.kernels[0], &hopper(), &Tuning::default()).unwrap();
        assert!(r.strategy.starts_with(&format!("pointwise x{w} ")), "{d}: {}", r.strategy);
        s.push_str(&render_all("vector_widths", &p));
    }
    for n in [1, 7, 1023, 4097] {
        let p = add_relu_mul(1, n, DType::F32);
        let r = render::render(&p.kernels[0], &hopper(), &Tuning::default()).unwrap();
        assert!(r.strategy.starts_with("pointwise block"), "{n}: {}", r.strategy);
        check_all("vector_widths", &p);
    }
    insta::assert_snapshot!(s);
}

#[test]
fn reductions_of_every_strategy() {
    let mut s = String::new();
    for strategy in STRATEGIES {
        s.push_str(&render_all("reductions", &softmax(67, 129, DType::F32, strategy)));
        s.push_str(&render_all("reductions", &layer_norm(61, 256, DType::BF16, strategy)));
    }
    s.push_str(&render_all("reductions", &softmax(64, 8192, DType::F32, ReduceStrategy::Looped)));
    s.push_str(&render_all("reductions", &softmax(64, 100_000, DType::F16, ReduceStrategy::Looped)));
    for d in [DType::F32, DType::F16, DType::BF16, DType::F64] {
        for strategy in STRATEGIES {
            for len in [1, 7, 1023, 4097] {
                check_all("reductions", &softmax(3, len, d, strategy));
                check_all("reductions", &layer_norm(3, len, d, strategy));
            }
        }
    }
    insta::assert_snapshot!(s);
}

/// Long persistent rows (one block per row, fewer rows than threads a row would use): a row that
/// leaves a thread more than 16 elements at 256 threads takes 512 where that brings it to 16
/// (NVRTC's time grows with the unrolled row; session 34), else the old choice: 256 while the
/// row fits 32 a thread, then the first of 512 and 1024 that holds it.
#[test]
fn long_rows_take_512_threads_where_that_halves_them() {
    for (len, d, want) in [
        (4096, DType::F32, "reduce persistent x4 block 256 vec4"),
        (4100, DType::F32, "reduce persistent x3 block 512 vec4"),
        (4097, DType::F32, "reduce persistent x9 block 512"),
        (6144, DType::F32, "reduce persistent x3 block 512 vec4"),
        (8192, DType::F32, "reduce persistent x4 block 512 vec4"),
        (8196, DType::F32, "reduce persistent x5 block 512 vec4"),
        (16384, DType::F32, "reduce persistent x8 block 512 vec4"),
        (32768, DType::F32, "reduce persistent x8 block 1024 vec4"),
        (8192, DType::BF16, "reduce persistent x2 block 512 vec8"),
        (4096, DType::BF16, "reduce persistent x2 block 256 vec8"),
    ] {
        let p = softmax(64, len, d, ReduceStrategy::Persistent);
        let r = render::render(&p.kernels[0], &hopper(), &Tuning::default()).expect("render");
        // The plan is the C++ renderer's whether the kernel is written in PTX or not.
        assert_eq!(r.strategy.trim_end_matches(" ptx"), want, "{len} {d}");
    }
}

/// Short persistent rows, many of them: one warp per row, 8 rows per block (the last block partly
/// past the end leaves whole warps), compiled.
#[test]
fn short_rows_take_a_warp_each() {
    for (rows, len, d) in [(9216, 49, DType::F32), (9217, 40, DType::BF16), (4500, 64, DType::F16)] {
        for p in
            [softmax(rows, len, d, ReduceStrategy::Persistent), layer_norm(rows, len, d, ReduceStrategy::Persistent)]
        {
            let r = render::render(&p.kernels[0], &hopper(), &Tuning::default()).expect("render");
            compile("short_rows", &r);
            assert!(r.strategy.contains("warp per row x8"), "{rows}x{len}: {}", r.strategy);
            assert_eq!((r.grid[0] as usize, r.block[0]), (rows.div_ceil(8), 256), "{rows}x{len}");
            assert_eq!(r.source.contains("return;"), rows % 8 != 0, "{}", r.source);
        }
    }
    // Rows of up to 32 elements a lane, a row for every SM: a warp each, fewer rows per block
    // where 8 would leave fewer than two blocks an SM (132 SMs): (rows, length, rows per block).
    for (rows, len, d, per) in
        [(1568, 384, DType::F32, 4), (392, 768, DType::BF16, 1), (400, 1023, DType::F32, 1), (4224, 96, DType::F32, 8)]
    {
        for p in
            [softmax(rows, len, d, ReduceStrategy::Persistent), layer_norm(rows, len, d, ReduceStrategy::Persistent)]
        {
            let r = render::render(&p.kernels[0], &hopper(), &Tuning::default()).expect("render");
            compile("medium_rows", &r);
            assert_eq!((r.grid[0] as usize, r.block[0]), (rows.div_ceil(per), 32 * per as u32), "{rows}x{len}");
            assert!(!r.source.contains("__syncthreads"), "{rows}x{len}: a warp per row needs no barrier");
        }
    }
    // Few rows keep a block per row.
    let r = render::render(
        &softmax(64, 49, DType::F32, ReduceStrategy::Persistent).kernels[0],
        &hopper(),
        &Tuning::default(),
    )
    .expect("render");
    assert!(!r.strategy.contains("warp per row"), "{}", r.strategy);
}

#[test]
fn arg_reductions_of_every_dtype() {
    let mut s = String::new();
    for d in [DType::F32, DType::I32, DType::U64, DType::Bool] {
        s.push_str(&render_all("arg", &arg_sum(d, 5, 1024, ReduceStrategy::Persistent)));
    }
    s.push_str(&render_all("arg", &arg_sum(DType::F16, 4096, 7, ReduceStrategy::ThreadPerRow)));
    for d in DType::ALL {
        for strategy in STRATEGIES {
            for len in [1, 7, 1023, 4097] {
                check_all("arg", &arg_sum(d, 3, len, strategy));
            }
        }
    }
    insta::assert_snapshot!(s);
}

#[test]
fn matmul_with_bias_relu_epilogue() {
    let mut s = String::new();
    s.push_str(&render_all("matmul", &matmul_bias_relu(1, 100, 96, 72, DType::F32, DType::F32, false)));
    s.push_str(&render_all("matmul", &matmul_bias_relu(3, 512, 256, 64, DType::BF16, DType::F32, true)));
    s.push_str(&render_all("matmul", &matmul_bias_relu(1, 37, 41, 29, DType::F64, DType::F64, false)));
    s.push_str(&render_all("matmul", &matmul_bias_relu(2, 7, 9, 5, DType::I8, DType::I32, true)));
    for d in DType::ALL.into_iter().filter(|d| *d != DType::Bool) {
        let acc = match d {
            DType::F64 => DType::F64,
            d if d.is_float() => DType::F32,
            _ => DType::I64,
        };
        for n in [1, 7, 1023] {
            check_all("matmul", &matmul_bias_relu(2, n, 7, n.min(100), d, acc, n == 7));
        }
        check_all("matmul", &matmul_bias_relu(1, 4097, 1, 3, d, acc, false));
    }
    insta::assert_snapshot!(s);
}

/// Products too small to give every SM a block take their whole reduction in one step (every load
/// in flight at once) where it is at most `WHOLE_K_MAX` deep and fits; deeper ones, and products
/// that fill the SMs, keep 8-deep steps. Each choice compiles.
#[test]
fn latency_bound_products_take_the_reduction_in_one_step() {
    let cases = [
        ((1, 100, 100, 100, DType::F32, DType::F32), "matmul 32x32x100 4x4"),
        ((1, 37, 41, 29, DType::F64, DType::F64), "matmul 32x32x30 4x4"),
        ((1, 100, 100, 127, DType::F32, DType::F32), "matmul 32x32x128 4x4"),
        ((1, 100, 100, 129, DType::F32, DType::F32), "matmul 32x32x8 4x4"),
        // i64 accumulators: 100 deep needs 57.6 KB of shared memory, so 8-deep steps.
        ((1, 100, 100, 100, DType::I32, DType::I64), "matmul 32x32x8 4x4"),
        ((1, 1024, 1024, 100, DType::F32, DType::F32), "matmul 64x64x8 4x4"),
        ((1, 100, 100, 7, DType::F32, DType::F32), "matmul 32x32x8 4x4"),
    ];
    for ((batch, m, n, k, d, acc), want) in cases {
        let p = matmul_bias_relu(batch, m, n, k, d, acc, false);
        let r = render::render(&p.kernels[0], &hopper(), &Tuning::default()).unwrap();
        assert_eq!(r.strategy.trim_end_matches(" ptx"), want, "{m}x{n}x{k} {d}");
        compile("whole_k", &r);
    }
}

/// Every tensor-core tile, for both operand layouts of A and B, aligned (16-byte `cp.async`) and
/// misaligned (scalar loads), bf16 and f16: compiles without warnings, spills or a stack frame.
#[test]
fn tensor_core_tiles_and_layouts_compile() {
    let mut shown = String::new();
    for (i, t) in MmaTile::CANDIDATES.iter().enumerate() {
        for (j, (a_t, b_t, pad)) in
            [(false, false, 0), (false, true, 0), (true, false, 0), (true, true, 0), (false, false, 1), (true, true, 3)]
                .into_iter()
                .enumerate()
        {
            // One layout per tile for each dtype beyond the first tile keeps the NVRTC time down.
            if i > 0 && j != i % 6 {
                continue;
            }
            for d in [DType::BF16, DType::F16] {
                let p = matmul_layout(2, 300, 200, 72, d, DType::F32, Layout { a_t, b_t, pad, b_batched: false });
                let k = &p.kernels[0];
                let tuning = Tuning { mma: Some(*t), ..Tuning::default() };
                let r = render::render(k, &hopper(), &tuning).unwrap_or_else(|e| panic!("{t:?}: {e}"));
                assert!(r.strategy.starts_with("mma "), "{}", r.strategy);
                assert_eq!(r.block[0], t.threads());
                assert!(r.dynamic_shared_bytes > 0);
                compile("mma", &r);
                if i == 0 && d == DType::BF16 && sinter_cuda::probe::nvrtc().is_ok() {
                    let c = sinter_cuda::nvrtc::compile(&r.name, &r.source, &sinter_cuda::nvrtc::Target::hopper())
                        .expect("compiles");
                    assert!(
                        c.log.contains("0 bytes stack frame, 0 bytes spill stores"),
                        "{t:?} a_t {a_t} b_t {b_t} pad {pad}: spills\n{}",
                        c.log
                    );
                }
                if i == 0 && d == DType::BF16 && matches!(j, 0 | 5) {
                    shown.push_str(&format!("// ==== a_t {a_t} b_t {b_t} pad {pad} ({})\n", r.strategy));
                    shown.push_str(&r.source);
                }
            }
        }
    }
    insta::assert_snapshot!(shown);
}

/// Every `wgmma` tile compiles for sm_90a with both layouts of B, without spills and without
/// ptxas serializing the product pipeline (C7514, a warning `compile` refuses); a transposed A is
/// refused by name, and the default tile of a large product on Hopper is a `wgmma` one.
#[test]
fn wgmma_matmul_tiles_compile() {
    let mut shown = String::new();
    for (i, t) in MmaTile::WGMMA_CANDIDATES.iter().enumerate() {
        for b_t in [false, true] {
            let d = if (i + b_t as usize).is_multiple_of(2) { DType::BF16 } else { DType::F16 };
            let p = matmul_layout(2, 300, 200, 72, d, DType::F32, Layout { b_t, ..Layout::default() });
            let k = &p.kernels[0];
            let r = render::render(k, &hopper(), &Tuning { mma: Some(*t), ..Tuning::default() })
                .unwrap_or_else(|e| panic!("{t:?}: {e}"));
            assert!(r.strategy.starts_with("wgmma "), "{}", r.strategy);
            assert_eq!(r.block[0], t.threads());
            compile("wgmma", &r);
            if sinter_cuda::probe::nvrtc().is_ok() {
                let c = sinter_cuda::nvrtc::compile(&r.name, &r.source, &sinter_cuda::nvrtc::Target::hopper())
                    .expect("compiles");
                assert!(
                    c.log.contains("0 bytes stack frame, 0 bytes spill stores"),
                    "{t:?} b_t {b_t}: spills\n{}",
                    c.log
                );
            }
            if i == 0 {
                shown.push_str(&format!("// ==== b_t {b_t} ({})\n", r.strategy));
                shown.push_str(&r.source);
            }
        }
    }
    insta::assert_snapshot!(shown);
    let a_t = matmul_layout(1, 64, 64, 64, DType::BF16, DType::F32, Layout { a_t: true, ..Layout::default() });
    let e = render::render(
        &a_t.kernels[0],
        &hopper(),
        &Tuning { mma: Some(MmaTile::WGMMA_CANDIDATES[0]), ..Tuning::default() },
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("A is not k-major"), "{e}");
    let big = matmul_layout(1, 4096, 4096, 512, DType::BF16, DType::F32, Layout::default());
    let r = render::render(&big.kernels[0], &hopper(), &Tuning::default()).expect("renders");
    assert!(r.strategy.starts_with("wgmma-tma 128x256"), "{}", r.strategy);
    // 2048^2 outputs: 128 tiles of 128x256 for 132 SMs (at least 7/8 of them) still take the TMA
    // tile; 1024^2 (32 tiles) does not.
    for (n, tma) in [(2048, true), (1024, false)] {
        let p = matmul_layout(1, n, n, n, DType::BF16, DType::F32, Layout::default());
        let r = render::render(&p.kernels[0], &hopper(), &Tuning::default()).expect("renders");
        assert_eq!(r.strategy.starts_with("wgmma-tma 128x256"), tma, "{n}: {}", r.strategy);
    }
    // A reduction shallower than a TMA box (48 < 64) falls back to the `cp.async` tile.
    let shallow = matmul_layout(1, 4096, 4096, 48, DType::BF16, DType::F32, Layout::default());
    let r = render::render(&shallow.kernels[0], &hopper(), &Tuning::default()).expect("renders");
    assert!(r.strategy.starts_with("wgmma 192x128"), "{}", r.strategy);
    let mut ampere = hopper();
    ampere.sm = (8, 0);
    let r = render::render(&big.kernels[0], &ampere, &Tuning::default()).expect("renders");
    assert!(r.strategy.starts_with("mma "), "{}", r.strategy);
}

/// Every TMA-fed `wgmma` tile compiles for sm_90a with both layouts of B, without spills and
/// with its register reallocation honoured (ptxas warns C7508 when it ignores `setmaxnreg`, and
/// `compile` refuses warnings); it asks for the tensor maps of A and B and a persistent grid of at
/// most one block per SM (clusters of two: pairs of tiles, each block copying half of B for
/// both); operands the copy engine cannot take are refused by name. The snapshot shows the first
/// tile of each engine.
#[test]
fn wgmma_tma_matmul_tiles_compile() {
    let mut shown = String::new();
    let first_plain = MmaTile::TMA_CANDIDATES.iter().position(|t| t.engine == MmaEngine::WgmmaTma);
    for (i, t) in MmaTile::TMA_CANDIDATES.iter().enumerate() {
        let cluster = t.engine == MmaEngine::WgmmaTmaCluster;
        for b_t in [false, true] {
            let d = if (i + b_t as usize).is_multiple_of(2) { DType::BF16 } else { DType::F16 };
            let p = matmul_layout(2, 300, 264, 72, d, DType::F32, Layout { b_t, ..Layout::default() });
            let k = &p.kernels[0];
            let r = render::render(k, &hopper(), &Tuning { mma: Some(*t), ..Tuning::default() })
                .unwrap_or_else(|e| panic!("{t:?}: {e}"));
            assert!(r.strategy.starts_with("wgmma-tma "), "{}", r.strategy);
            assert_eq!(r.block[0], t.threads());
            assert_eq!(r.block[0], 128 * (t.warps_m + 1));
            if cluster {
                let pairs = 2 * 300u32.div_ceil(2 * t.bm) * 264u32.div_ceil(t.bn);
                assert_eq!(r.grid[0], 2 * pairs.min(66), "{t:?}");
                assert!(r.source.contains("__cluster_dims__(2, 1, 1)"), "{t:?}");
                assert!(r.source.contains("sinter_tma_load_multicast<"), "{t:?}");
            } else {
                let tiles = 2 * 300u32.div_ceil(t.bm) * 264u32.div_ceil(t.bn);
                assert_eq!(r.grid[0], tiles.min(132), "{t:?}");
                assert!(!r.source.contains("__cluster_dims__"), "{t:?}");
            }
            assert!(r.split.is_none(), "a persistent grid cannot be cut by batch");
            assert_eq!(r.tensor_maps.len(), 2);
            let (a, b) = (&r.tensor_maps[0].desc, &r.tensor_maps[1].desc);
            assert_eq!((r.tensor_maps[0].arg, r.tensor_maps[1].arg), (0, 1));
            assert_eq!(a.dims, [72, 300, 2], "A: k, m, batch");
            assert_eq!(a.boxes, [64, t.bm, 1]);
            // B is shared by the batches (stride 0): two dimensions.
            if b_t {
                let rows = if cluster { t.bn / 2 } else { t.bn };
                assert_eq!((b.dims.as_slice(), b.boxes.as_slice()), ([72, 264].as_slice(), [64, rows].as_slice()));
            } else {
                assert_eq!((b.dims.as_slice(), b.boxes.as_slice()), ([264, 72].as_slice(), [64, 64].as_slice()));
            }
            assert!(r.source.contains("const __grid_constant__ sinter_tmap tm1)"), "{}", r.source);
            compile("wgmma_tma", &r);
            if sinter_cuda::probe::nvrtc().is_ok() {
                let c = sinter_cuda::nvrtc::compile(&r.name, &r.source, &sinter_cuda::nvrtc::Target::hopper())
                    .expect("compiles");
                assert!(
                    c.log.contains("0 bytes stack frame, 0 bytes spill stores"),
                    "{t:?} b_t {b_t}: spills\n{}",
                    c.log
                );
            }
            if i == 0 || Some(i) == first_plain {
                shown.push_str(&format!("// ==== b_t {b_t} ({}) maps {:?}\n", r.strategy, r.tensor_maps));
                shown.push_str(&r.source);
            }
        }
    }
    insta::assert_snapshot!(shown);
    let tma = Tuning { mma: Some(MmaTile::wgmma_tma(128, 256, 2, 4)), ..Tuning::default() };
    let tma_cluster = Tuning { mma: Some(MmaTile::wgmma_tma_cluster(128, 256, 2, 4)), ..Tuning::default() };
    let refused = |layout: Layout, m: usize, k: usize| {
        let p = matmul_layout(1, m, 64, k, DType::BF16, DType::F32, layout);
        render::render(&p.kernels[0], &hopper(), &tma).unwrap_err().to_string()
    };
    let e = refused(Layout { a_t: true, ..Layout::default() }, 64, 64);
    assert!(e.contains("A is not k-major"), "{e}");
    // One B per batch: a third dimension in its map and a 3D copy.
    for b_t in [false, true] {
        let p = matmul_layout(
            3,
            300,
            264,
            80,
            DType::F16,
            DType::F32,
            Layout { b_t, b_batched: true, ..Layout::default() },
        );
        let r = render::render(&p.kernels[0], &hopper(), &tma).unwrap();
        let b = &r.tensor_maps[1].desc;
        assert_eq!(b.dims.len(), 3, "{b:?}");
        assert_eq!((b.dims[2], *b.strides.last().unwrap()), (3, 264 * 80 * 2), "{b:?}");
        assert!(r.source.contains("sinter_tma_load<3>(st + 16384u"), "{}", r.source);
        compile("wgmma_tma_batched_b", &r);
        let r = render::render(&p.kernels[0], &hopper(), &tma_cluster).unwrap();
        assert!(r.source.contains("sinter_tma_load_multicast<3>(st + 16384u"), "{}", r.source);
        compile("wgmma_tma_cluster_batched_b", &r);
    }
    // A cluster's pair spans 2 bm rows: m a multiple of bm but not of 2 bm (3 x 128) leaves the
    // last pair's second block wholly past m, so the rows are guarded (its stores would land in
    // the next batch's rows); at m = 4 x 128 no guard.
    for (m, guarded) in [(384, true), (512, false)] {
        let p = matmul_layout(3, m, 256, 128, DType::BF16, DType::F32, Layout::default());
        let r = render::render(&p.kernels[0], &hopper(), &tma_cluster).unwrap();
        assert_eq!(r.source.contains(&format!("if (m < {m}u)")), guarded, "m {m}\n{}", r.source);
        let r = render::render(&p.kernels[0], &hopper(), &tma).unwrap();
        assert!(!r.source.contains(&format!("if (m < {m}u)")), "m {m}: one block a tile needs no guard");
    }
    let e = refused(Layout { pad: 1, ..Layout::default() }, 128, 64);
    assert!(e.contains("not 16-byte aligned"), "{e}");
    let e = refused(Layout::default(), 128, 1023);
    assert!(e.contains("A's row stride of 1023 elements"), "{e}");
    let e = refused(Layout::default(), 7, 1024);
    assert!(e.contains("A (1024 x 7) is smaller than a 64 x 128 box"), "{e}");
    let big = matmul_layout(1, 4096, 4096, 512, DType::BF16, DType::F32, Layout::default());
    let mut ampere = hopper();
    ampere.sm = (8, 0);
    let e = render::render(&big.kernels[0], &ampere, &tma).unwrap_err().to_string();
    assert!(e.contains("sm_80 has no wgmma"), "{e}");
    let two_groups = Tuning { mma: Some(MmaTile::wgmma_tma(256, 256, 2, 3)), ..Tuning::default() };
    let e = render::render(&big.kernels[0], &hopper(), &two_groups).unwrap_err().to_string();
    assert!(e.contains("accumulator registers"), "{e}");
    // The device test's shapes for these tiles take every one (persistent blocks with several
    // tiles, B shared and per batch, both layouts), and its moved-operand tile.
    for (batch, m, n, k, b_t, b_batched) in [(4, 1000, 1032, 136, false, true), (5, 520, 1000, 264, true, true)] {
        let p = matmul_layout(batch, m, n, k, DType::BF16, DType::F32, Layout { b_t, b_batched, ..Layout::default() });
        for t in MmaTile::TMA_CANDIDATES {
            render::render(&p.kernels[0], &hopper(), &Tuning { mma: Some(t), ..Tuning::default() })
                .unwrap_or_else(|e| panic!("{batch}x{m}x{n}x{k} {t:?}: {e}"));
        }
    }
    let moved = matmul_layout(3, 300, 200, 136, DType::BF16, DType::F32, Layout::default());
    let t = Tuning { mma: Some(MmaTile::wgmma_tma(128, 128, 2, 3)), ..Tuning::default() };
    assert_eq!(render::render(&moved.kernels[0], &hopper(), &t).unwrap().tensor_maps.len(), 2);
    // Max-autotune tries them.
    let c = candidates(&big.kernels[0], &hopper());
    assert!(c.iter().filter(|t| t.mma.is_some_and(|m| m.engine.tma())).count() >= 6);
}

/// bf16/f16 matmuls take the tensor cores by default, the others the CUDA-core template; a
/// tensor-core tile is refused for an f32 matmul and together with a CUDA-core tile.
#[test]
fn tensor_cores_by_default_where_they_apply() {
    let strategy = |d: DType, acc: DType, t: Tuning| {
        let p = matmul_bias_relu(1, 64, 64, 64, d, acc, false);
        render::render(&p.kernels[0], &hopper(), &t).map(|r| r.strategy)
    };
    assert!(strategy(DType::BF16, DType::F32, Tuning::default()).unwrap().starts_with("mma "));
    assert!(strategy(DType::F16, DType::F32, Tuning::default()).unwrap().starts_with("mma "));
    assert!(strategy(DType::F32, DType::F32, Tuning::default()).unwrap().starts_with("matmul "));
    let simt = Tuning { tile: Some(MatmulTile::MEDIUM), ..Tuning::default() };
    assert!(strategy(DType::BF16, DType::F32, simt.clone()).unwrap().starts_with("matmul "));
    let mma = Tuning { mma: Some(MmaTile::SMALL), ..Tuning::default() };
    let e = strategy(DType::F32, DType::F32, mma.clone()).unwrap_err().to_string();
    assert!(e.contains("no tensor-core template"), "{e}");
    let both = Tuning { mma: Some(MmaTile::SMALL), ..simt };
    assert!(strategy(DType::BF16, DType::F32, both).is_err());
    let mut old = hopper();
    old.sm = (7, 5);
    let p = matmul_bias_relu(1, 64, 64, 64, DType::BF16, DType::F32, false);
    let r = render::render(&p.kernels[0], &old, &Tuning::default()).unwrap();
    assert!(r.strategy.starts_with("matmul "), "sm_75 has no m16n8k16 bf16: {}", r.strategy);
    let huge = MmaTile { stages: 8, bk: 128, ..MmaTile::CANDIDATES[0] };
    let e = render::render(&p.kernels[0], &hopper(), &Tuning { mma: Some(huge), ..Tuning::default() }).unwrap_err();
    assert!(e.to_string().contains("shared memory"), "{e}");
}

/// The mapping the benchmark sizes get: the bandwidth-bound workloads vectorize (16-byte accesses),
/// softmax and layernorm rows stay in registers.
#[test]
fn pointwise_groups_per_thread() {
    // Two or four block-wide slices per thread: 16-byte groups where the extent is a multiple of
    // a block's slices (no bounds check), and ragged (each slice checked), single lanes ragged;
    // each against the plain kernel's grid.
    let mut s = String::new();
    for (n, groups, w, blocks) in [(8192, 2, 4, 4), (8196, 2, 4, 5), (8196, 4, 4, 3), (4097, 2, 1, 9)] {
        let p = add_relu_mul(1, n, DType::F32);
        let t = Tuning { groups: Some(groups), ..Tuning::default() };
        let r = render::render(&p.kernels[0], &hopper(), &t).unwrap();
        compile("pointwise_groups", &r);
        let x = if w > 1 { format!("x{w} ") } else { String::new() };
        assert_eq!(r.strategy, format!("pointwise {x}g{groups} block 256"), "{n}");
        assert_eq!(r.grid, [blocks, 1, 1], "{n} lanes, {groups} groups");
        let checked = r.source.contains("break;");
        assert_eq!(checked, n % (256 * groups as usize * w) != 0, "{n}: bounds checks only where ragged");
        s.push_str(&format!("// ==== {n} lanes, {groups} groups: grid {:?} ({})\n{}\n", r.grid, r.strategy, r.source));
    }
    insta::assert_snapshot!(s);
    // One group per thread by default, at every size; groups that do not fill one block, zero, too
    // many, or on another kernel kind are refused.
    let small = &add_relu_mul(1, 4096, DType::F32).kernels[0];
    for k in [small, &add_relu_mul(1, 1 << 24, DType::F32).kernels[0]] {
        let r = render::render(k, &hopper(), &Tuning::default()).unwrap();
        assert!(r.strategy.starts_with("pointwise x4 block"), "{}", r.strategy);
    }
    for g in [0, 9] {
        assert!(invalid(small, Tuning { groups: Some(g), ..Tuning::default() }).contains("groups"), "{g}");
    }
    assert!(invalid(small, Tuning { groups: Some(8), ..Tuning::default() }).contains("fill one block"));
    let red = &softmax(8, 4096, DType::F32, ReduceStrategy::Looped).kernels[0];
    assert!(invalid(red, Tuning { groups: Some(2), ..Tuning::default() }).contains("pointwise"));
}

/// The built-in workloads at their benchmark sizes take the fast paths, and each of their sources
/// compiles (NVRTC, where present; `SINTER_CUDA_DUMP` writes them: the sources a cold compile of
/// `sinter bench` sees).
#[test]
fn benchmark_sizes_take_the_fast_paths() {
    let want = [
        ("add_relu_mul_10M_f32", "pointwise x4 block 256"),
        ("cos_16M_f32", "pointwise x4 block 256"),
        ("cos_cos_16M_f32", "pointwise x4 block 256"),
        // 1024 lanes of 32 sin each: one lane per thread (5.9 us against 14.0 at four, H100).
        ("pointwise_chain64_1024_f32", "pointwise block 256"),
        // 512 threads keep 16 floats each: NVRTC 142 -> 95 ms, the run as at 256 x 32 (H200, session 34).
        ("softmax_8192x8192_f32", "reduce persistent x4 block 512 vec4"),
        ("layernorm_gelu_8192x4096_f32", "reduce persistent x4 block 256 vec4"),
        // One row of 64M: chunks of 64512 on 1041 blocks of one kernel (a full wave of 256-thread
        // blocks on 132 SMs), not the scheduler's two kernels.
        ("sum_64M_f32", "reduce split 1041 block 256 vec4"),
        ("matmul_4096_f32", "matmul 128x128x8 8x8"),
        // 100 deep: the whole reduction in one step (`WHOLE_K_MAX`).
        ("matmul_softmax_100_f32", "matmul 32x32x100 4x4"),
        ("matmul_8192_bf16", "wgmma-tma 128x256x64 c2 s3"),
        ("mlp_8192x4096x16384_bf16", "wgmma-tma 128x256x64 c2 s3"),
        ("matmul_softmax_4096_bf16", "wgmma-tma 128x256x64 c2 s3"),
        // 1024 heads of one query: the decode template, 256 threads a block, eight keys in flight
        // a lane group (0.4766 ms against the tensor-core tile's 0.4772, H200 session 32; the
        // tile compiles ~3x longer).
        ("attention_decode_b32h32kv4096d128_bf16", "attention decode block 256"),
    ];
    for (name, strategy) in want {
        let w = workloads::get(name).expect("workload");
        let g = sinter_core::passes::optimize(&w.build(Scale::Full).expect("build")).expect("passes");
        let p = sinter_core::schedule::schedule(&g, &cuda_caps(), &cuda_options()).expect("schedule");
        let got: Vec<String> = p
            .kernels
            .iter()
            .map(|k| {
                let r = render::render(k, &hopper(), &Tuning::default()).unwrap_or_else(|e| panic!("{e}"));
                compile(name, &r);
                r.strategy
            })
            .collect();
        assert!(got.iter().any(|s| s.starts_with(strategy)), "{name}: {got:?}");
    }
}

#[test]
fn candidates_render_distinct_sources() {
    for w in workloads::all() {
        let p = scheduled(&w);
        for k in &p.kernels {
            let c = candidates(k, &hopper());
            assert_eq!(c[0], Tuning::default(), "{}: the default comes first", k.name);
            let mut sources = std::collections::HashSet::new();
            for t in &c {
                let r = render::render(k, &hopper(), t).unwrap_or_else(|e| panic!("{}: {t:?}: {e}", k.name));
                assert!(sources.insert((r.source, r.grid)), "{}: {t:?} repeats another candidate", k.name);
                check_tuning(k, &hopper(), t).unwrap();
            }
            let several = match &k.body {
                KernelBody::Pointwise { numel, .. } => *numel > 1024,
                KernelBody::Reduce(r) => r.rows > 0,
                KernelBody::Matmul(_) | KernelBody::Attention(_) => true,
            };
            assert!(!several || c.len() > 2, "{}: {} candidates", k.name, c.len());
        }
    }
    // Every candidate of the hand-built kernels compiles.
    for p in [
        softmax(64, 4096, DType::F32, ReduceStrategy::Persistent),
        arg_sum(DType::F16, 4096, 9, ReduceStrategy::ThreadPerRow),
        matmul_bias_relu(1, 300, 200, 100, DType::BF16, DType::F32, true),
        add_relu_mul(64, 4096, DType::F16),
    ] {
        for t in candidates(&p.kernels[0], &hopper()) {
            compile("candidates", &render::render(&p.kernels[0], &hopper(), &t).unwrap());
        }
    }
}

fn invalid(k: &Kernel, t: Tuning) -> String {
    match render::render(k, &hopper(), &t) {
        Err(RenderError::InvalidTuning { msg, .. }) => {
            assert!(check_tuning(k, &hopper(), &t).is_err());
            msg
        }
        other => panic!("{t:?}: expected InvalidTuning, got {other:?}"),
    }
}

#[test]
fn tunings_that_cannot_be_honoured_are_errors() {
    let pw = &add_relu_mul(4, 1024, DType::F32).kernels[0];
    let odd = &add_relu_mul(1, 7, DType::F32).kernels[0];
    let red = &softmax(8, 100_000, DType::F32, ReduceStrategy::Looped).kernels[0];
    let tpr = &arg_sum(DType::F32, 4096, 9, ReduceStrategy::ThreadPerRow).kernels[0];
    let mm = &matmul_bias_relu(1, 64, 64, 64, DType::F32, DType::F32, false).kernels[0];
    for k in [pw, red, tpr] {
        for b in [0, 7, 48, 2048] {
            let msg = invalid(k, Tuning { block: Some(b), ..Tuning::default() });
            assert!(msg.contains("block size"), "{msg}");
        }
    }
    assert!(invalid(odd, Tuning { vectorize: Some(true), ..Tuning::default() }).contains("vectorize"));
    assert!(invalid(tpr, Tuning { vectorize: Some(true), ..Tuning::default() }).contains("vectorize"));
    assert!(invalid(red, Tuning { persistent: Some(true), ..Tuning::default() }).contains("persistent"));
    assert!(invalid(pw, Tuning { tile: Some(MatmulTile::LARGE), ..Tuning::default() }).contains("tile"));
    let bad_tiles = [
        MatmulTile { bm: 0, ..MatmulTile::LARGE },
        MatmulTile { tm: 6, ..MatmulTile::LARGE },
        MatmulTile { bm: 256, bn: 256, bk: 8, tm: 4, tn: 4 },
        MatmulTile { bm: 128, bn: 128, bk: 64, tm: 8, tn: 8 },
        MatmulTile { bm: 128, bn: 128, bk: 8, tm: 16, tn: 8 },
    ];
    for tile in bad_tiles {
        invalid(mm, Tuning { tile: Some(tile), ..Tuning::default() });
    }
    assert!(invalid(mm, Tuning { block: Some(128), ..Tuning::default() }).contains("threads"));
    // What is honoured renders.
    for t in [
        Tuning { block: Some(1024), vectorize: Some(false), ..Tuning::default() },
        Tuning { block: Some(32), ..Tuning::default() },
    ] {
        check_tuning(pw, &hopper(), &t).unwrap();
        check_tuning(red, &hopper(), &t).unwrap();
    }
    check_tuning(mm, &hopper(), &Tuning { block: Some(256), tile: Some(MatmulTile::MEDIUM), ..Tuning::default() })
        .unwrap();
    // Persistent where the row fits, looped on request.
    let fits = &softmax(8, 4096, DType::F32, ReduceStrategy::Looped).kernels[0];
    let r = render::render(fits, &hopper(), &Tuning { persistent: Some(true), ..Tuning::default() }).unwrap();
    assert!(r.strategy.starts_with("reduce persistent"), "{}", r.strategy);
    let r = render::render(fits, &hopper(), &Tuning { persistent: Some(false), ..Tuning::default() }).unwrap();
    assert!(r.strategy.starts_with("reduce looped"), "{}", r.strategy);
    compile("tunings", &r);
}

#[test]
fn malformed_kernels_are_errors_not_panics() {
    let unsupported = |k: &Kernel| {
        assert!(
            matches!(render::render(k, &hopper(), &Tuning::default()), Err(RenderError::Unsupported { .. })),
            "{:?}",
            render::render(k, &hopper(), &Tuning::default())
        )
    };
    let base = add_relu_mul(4, 8, DType::F32).kernels[0].clone();
    // An operand that does not precede its user.
    let mut k = base.clone();
    k.exprs[2].expr = Expr::Unary(sinter_core::ir::UnaryOp::Exp, ExprId(40));
    unsupported(&k);
    // A load from a written argument, and from a missing one.
    let mut k = base.clone();
    k.exprs[0].expr = Expr::Load { arg: 2, index: lane() };
    unsupported(&k);
    let mut k = base.clone();
    k.exprs[0].expr = Expr::Load { arg: 9, index: lane() };
    unsupported(&k);
    // A loop variable the body lacks, a gathered value outside a clamp, an accumulator in a
    // pointwise kernel, a float-only op on an integer, operands of different dtypes.
    let mut k = base.clone();
    k.exprs[0].expr = Expr::Load { arg: 0, index: Index::var(sinter_core::kernel::Var::Row) };
    unsupported(&k);
    let mut k = base.clone();
    k.exprs[1].expr = Expr::Load { arg: 1, index: Index::Value(ExprId(0)) };
    unsupported(&k);
    let mut k = base.clone();
    k.exprs[0].expr = Expr::Acc(0);
    unsupported(&k);
    let mut p = unary_all(DType::I32, 8);
    p.kernels[0].exprs[1].expr = Expr::Unary(sinter_core::ir::UnaryOp::Exp, ExprId(0));
    unsupported(&p.kernels[0]);
    let mut k = base.clone();
    k.exprs[1].dtype = DType::F64;
    k.exprs[1].expr = Expr::Const(1.0);
    unsupported(&k);
    // A store to a read argument.
    let mut k = base;
    if let KernelBody::Pointwise { stores, .. } = &mut k.body {
        stores[0].arg = 0;
    }
    unsupported(&k);
}

#[test]
fn huge_extents_use_64_bit_indices() {
    let mut s = String::new();
    s.push_str(&render_all("huge", &add_relu_mul(1 << 16, 1 << 16, DType::F32)));
    s.push_str(&render_all("huge", &softmax(1 << 16, 1 << 16, DType::BF16, ReduceStrategy::Looped)));
    s.push_str(&render_all("huge", &arg_sum(DType::F32, 1 << 26, 64, ReduceStrategy::ThreadPerRow)));
    s.push_str(&render_all("huge", &matmul_bias_relu(1, 1 << 16, 64, 1 << 16, DType::F16, DType::F32, true)));
    assert!(s.contains("const unsigned long long lane0"), "{s}");
    assert!(s.contains("const unsigned long long a_base"), "{s}");
    insta::assert_snapshot!(s);
}

#[test]
fn empty_kernels_launch_nothing() {
    let p = add_relu_mul(0, 16, DType::F32);
    let r = render::render(&p.kernels[0], &hopper(), &Tuning::default()).unwrap();
    assert_eq!(r.grid, [0, 1, 1]);
    compile("empty", &r);
    let p = softmax(0, 16, DType::F32, ReduceStrategy::Persistent);
    assert_eq!(render::render(&p.kernels[0], &hopper(), &Tuning::default()).unwrap().grid, [0, 1, 1]);
    let p = matmul_bias_relu(1, 0, 4, 4, DType::F32, DType::F32, false);
    assert_eq!(render::render(&p.kernels[0], &hopper(), &Tuning::default()).unwrap().grid, [0, 1, 1]);
}

/// The per-run `KRSC` weight permutation of a library convolution (`krsc_weight_kernel`): its
/// CUDA source, compiled by NVRTC.
#[test]
fn krsc_weight_permutation() {
    let (g, _) = conv_case(([4, 64, 14, 14], [128, 64, 3, 3], [1, 1], [1, 1, 1, 1], [1, 1], 1), DType::F32, 1);
    let g = sinter_core::passes::optimize(&g.build().expect("build")).expect("passes");
    let p = sinter_core::schedule::schedule(&g, &cuda_caps(), &cuda_options()).expect("schedule");
    let (k, split) = p
        .kernels
        .iter()
        .find_map(|k| sinter_core::kernel::library_conv::split_conv(k).ok().map(|s| (k, s)))
        .expect("a library convolution");
    let permute = sinter_core::kernel::library_conv::krsc_weight_kernel(k, &split.conv).expect("permutation");
    let r = render::render(&permute, &CudaCaps::hopper(), &Tuning::default()).expect("render");
    compile("krsc_weight_permutation", &r);
    // The hand-written transpose the backend runs instead where its tile fits (`render::krsc`).
    let c = &split.conv;
    let args = permute.args.len();
    let cg = c.in_channels / c.groups;
    let t = render::krsc::render(&r.name, args, (c.w, c.w_offset as u64), args - 1, [c.out_channels, cg, 9], 4);
    assert_eq!(t.grid, [(c.out_channels * cg.div_ceil(render::krsc::CHANNELS)) as u32, 1, 1]);
    compile("krsc_weight_transpose", &t);
    insta::assert_snapshot!(format!("{}\n// ==== the transpose\n{}", r.source, t.source));
}

/// An image model's stem (3 input channels, 7x7, stride 2) in TF32 and in 16-bit takes the 64-row
/// tile with two stages by default (a 64-row product; its im2col loader is instruction-bound;
/// `default_mma`); a 1x1 16-bit convolution of 64 channels (not im2col) keeps a 128-row tile.
#[test]
fn small_m_implicit_convolutions_take_64_row_tiles() {
    let cases = [
        (DType::F32, ([8, 3, 112, 112], [64, 3, 7, 7], [2, 2], [3, 3, 3, 3], [1, 1], 1), true),
        (DType::BF16, ([8, 3, 112, 112], [64, 3, 7, 7], [2, 2], [3, 3, 3, 3], [1, 1], 1), true),
        (DType::F16, ([8, 64, 56, 56], [64, 64, 3, 3], [1, 1], [1, 1, 1, 1], [1, 1], 1), true),
        (DType::BF16, ([8, 64, 56, 56], [64, 64, 1, 1], [1, 1], [0, 0, 0, 0], [1, 1], 1), false),
    ];
    for (dt, shape, im2col) in cases {
        let (g, _) = conv_case(shape, dt, 1);
        let g = sinter_core::passes::optimize(&g.build().expect("build")).expect("passes");
        let p = sinter_core::schedule::schedule(&g, &cuda_caps(), &cuda_options()).expect("schedule");
        let k = p.kernels.iter().find(|k| matches!(&k.body, KernelBody::Matmul(_))).expect("a convolution");
        let KernelBody::Matmul(m) = &k.body else { unreachable!() };
        assert_eq!(m.b.im2col.is_some(), im2col, "{dt:?} {shape:?}");
        let r = render::render(k, &hopper(), &Tuning::default()).expect("render");
        let small = r.strategy.contains("64x128x32") && r.strategy.ends_with("s2");
        assert_eq!(small, im2col, "{dt:?} {shape:?}: {}", r.strategy);
        compile("small_m_implicit_convolutions", &r);
    }
}

/// A depthwise window walking channels-last (ConvNeXt's block, `schedule::channels_last`) takes
/// four consecutive rows (channels) a thread, its input, weights and output as 4-wide vectors
/// (`render::reduce_rows`); the same window in NCHW (clamped columns along the rows) keeps one
/// row a thread.
#[test]
fn channels_last_windows_take_consecutive_rows_a_thread() {
    use sinter_core::trace::Graph;
    // (dtype, window, channels-last, rows a thread, walked as tap rows): past 128 fold bodies
    // (taps x rows a thread), with at most four rows a thread, the walk is two loops, tap rows
    // rolled and each row's taps unrolled.
    let cases = [
        (DType::F32, 7, true, 4, true),
        (DType::F32, 7, false, 1, false),
        (DType::F32, 5, true, 4, false),
        (DType::F32, 3, true, 4, false),
        // Eight rows a thread: whole, which ran ConvNeXt-Tiny bf16 2-5% faster.
        (DType::BF16, 7, true, 8, false),
    ];
    for (dt, kw, channels_last, rows, split) in cases {
        let what = format!("{dt:?} {kw}x{kw} channels-last {channels_last}");
        let g = Graph::new();
        let (n, c, hw) = (2, 16, 9);
        let w = g.constant(sinter_core::HostTensor::random(dt, vec![c, 1, kw, kw], 3, -1.0, 1.0));
        let (lg, lb) = (g.input("g", dt, [c]), g.input("b", dt, [c]));
        let x = if channels_last {
            (g.input("x", dt, [n, hw, hw, c]) * 1.5).permute(&[0, 3, 1, 2])
        } else {
            g.input("x", dt, [n, c, hw, hw]) * 1.5
        };
        let pad = kw / 2;
        let y = x.conv2d(&w, None, [1, 1], [pad, pad, pad, pad], [1, 1], c);
        g.output(&y.permute(&[0, 2, 3, 1]).layer_norm(&lg, &lb, 1e-6));
        let ir = sinter_core::passes::optimize(&g.build().expect("build")).expect("passes");
        let p = sinter_core::schedule::schedule(&ir, &cuda_caps(), &cuda_options()).expect("schedule");
        let k = p.kernels.iter().find(|k| k.ops.iter().any(|o| o == "conv2d")).expect("the window kernel");
        let r = render::render(k, &hopper(), &Tuning::default()).expect("render");
        compile("channels_last_windows", &r);
        let strategy = if rows > 1 { format!("rows x{rows}") } else { "block".to_string() };
        assert!(r.strategy.contains(&strategy), "{what}: {}\n{}", r.strategy, r.source);
        let walk = format!("// the walk as {kw} rows of {kw} taps");
        assert_eq!(r.source.contains(&walk), split, "{what}\n{}", r.source);
        // Unrolled whole past 128 bodies: compiled alone, not grouped with light sources.
        let alone = !split && rows * kw * kw > 128;
        assert_eq!(r.source.contains(sinter_cuda::nvrtc::COMPILE_ALONE), alone, "{what}\n{}", r.source);
        if split {
            // The tap's row and column are the loops' variables, never divided out of `red`.
            assert!(!r.source.contains(&format!("red / {kw}u")), "{what}\n{}", r.source);
            assert!(!r.source.contains(&format!("red % {kw}u")), "{what}\n{}", r.source);
        }
        if channels_last {
            let threads = n * c * hw * hw / rows;
            assert_eq!(r.grid[0] as usize, threads.div_ceil(r.block[0] as usize), "{what}: {}", r.strategy);
            let vec = if dt == DType::F32 { "sinter_vec<float, 4>" } else { "sinter_vec<sinter_bf16, 8>" };
            assert!(r.source.contains(vec), "{what}\n{}", r.source);
        }
    }
}
