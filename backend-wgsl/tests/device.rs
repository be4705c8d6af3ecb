//! Tests of the wgpu runtime layer on whatever adapter exists (lavapipe in CI).
//!
//! Without an adapter each test prints `SKIPPED` and returns; with `SINTER_REQUIRE_GPU=1` a missing adapter
//! fails instead.

mod common;

use std::sync::OnceLock;

use common::or_skip;
use sinter_wgsl::device::{
    Arg, BindingKind, Device, DeviceError, DeviceOptions, LINEAR_WORKGROUP_ID_WGSL, LayoutMode, PipelineCacheStatus,
    ProgramOptions, TimingSource, Workgroups, plan_chunks,
};

/// The shared device, or `None` (after printing why) when there is no adapter.
fn device() -> Option<&'static Device> {
    static DEV: OnceLock<Result<Device, String>> = OnceLock::new();
    let dev = DEV.get_or_init(|| {
        Device::new(DeviceOptions { pipeline_cache: false, ..DeviceOptions::default() }).map_err(|e| e.to_string())
    });
    or_skip(dev.as_ref().map_err(String::as_str))
}

/// Deterministic pseudo-random bytes.
fn bytes(n: usize, seed: u64) -> Vec<u8> {
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (s >> 33) as u8
        })
        .collect()
}

fn f32s(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn from_f32s(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

fn params(n: u32) -> Vec<u8> {
    [n, 0, 0, 0].iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// y = x * 2 + 1 over `params.n` elements, 64 per workgroup, linear workgroup convention.
fn affine_wgsl() -> String {
    format!(
        "struct Params {{ n: u32, p0: u32, p1: u32, p2: u32 }}
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> params: Params;
{LINEAR_WORKGROUP_ID_WGSL}
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {{
    let i = sinter_linear_workgroup_id(wg, nwg) * 64u + li;
    if (i < params.n) {{
        y[i] = x[i] * 2.0 + 1.0;
    }}
}}
"
    )
}

#[test]
fn handles_are_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<Device>();
    check::<sinter_wgsl::device::Program>();
    check::<sinter_wgsl::device::GpuBuffer>();
    check::<sinter_wgsl::device::RecordedBatch>();
    check::<sinter_wgsl::device::Batch>();
    check::<DeviceError>();
}

#[test]
fn adapter_info_is_sane_and_serialisable() {
    let Some(dev) = device() else { return };
    let info = dev.info();
    let json = serde_json::to_string_pretty(info).unwrap();
    eprintln!("adapter info: {json}");
    eprintln!("features: {:?}", dev.features());
    let back: sinter_wgsl::device::AdapterInfo = serde_json::from_str(&json).unwrap();
    assert_eq!(&back, info);
    assert!(info.limits.max_storage_buffer_binding_size >= 128 << 20);
    assert!(info.limits.max_compute_workgroups_per_dimension >= 65535);
    assert!(info.limits.max_compute_invocations_per_workgroup >= 256);
    assert_eq!(dev.max_binding_size(), info.limits.max_storage_buffer_binding_size);
    let key = info.cache_key();
    eprintln!("cache key: {key}");
    assert_eq!(key, info.cache_key());
    assert!(key.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'), "{key}");
    assert!(key.contains(&info.backend));
    assert!(dev.take_uncaptured_errors().is_empty());
}

#[test]
fn upload_download_round_trip_at_odd_sizes() {
    let Some(dev) = device() else { return };
    for (i, n) in [1usize, 7, 1023 * 4, 4097 * 4, 1023, 4097, 0].into_iter().enumerate() {
        let buf = dev.alloc(n as u64, "round trip").unwrap();
        assert_eq!(buf.len(), n as u64);
        assert_eq!(buf.padded_len(), (n.max(1).div_ceil(4) * 4) as u64);
        dev.fill(&buf, &[0xAB]).unwrap();
        let data = bytes(n, i as u64);
        dev.upload(&buf, &data).unwrap();
        assert_eq!(dev.download(&buf).unwrap(), data, "size {n}");
        if n >= 12 {
            assert_eq!(dev.download_range(&buf, 4, 5).unwrap(), &data[4..9]);
            dev.upload_at(&buf, 8, &[1, 2, 3, 4]).unwrap();
            assert_eq!(dev.download_range(&buf, 8, 4).unwrap(), [1, 2, 3, 4]);
        }
    }
    let buf = dev.alloc(16, "bounds").unwrap();
    assert!(matches!(dev.upload(&buf, &[0; 20]), Err(DeviceError::InvalidArgument(_))));
    assert!(matches!(dev.upload_at(&buf, 2, &[0; 4]), Err(DeviceError::InvalidArgument(_))));
    assert!(matches!(dev.download_range(&buf, 12, 8), Err(DeviceError::InvalidArgument(_))));
}

#[test]
fn fill_repeats_patterns() {
    let Some(dev) = device() else { return };
    let buf = dev.alloc(10, "fill").unwrap();
    dev.fill(&buf, &[1, 2, 3]).unwrap();
    assert_eq!(dev.download(&buf).unwrap(), [1, 2, 3, 1, 2, 3, 1, 2, 3, 1]);
    dev.fill(&buf, &[0xFF; 4]).unwrap();
    assert_eq!(dev.download(&buf).unwrap(), [0xFF; 10]);
    dev.fill(&buf, &[0]).unwrap();
    assert_eq!(dev.download(&buf).unwrap(), [0; 10]);
    assert!(matches!(dev.fill(&buf, &[]), Err(DeviceError::InvalidArgument(_))));
}

/// Runs y = x * 2 + 1 over `n` elements with the output poisoned first and checks every element.
fn check_affine(dev: &Device, n: usize, opts: &ProgramOptions) {
    let prog = dev.compile_with(&affine_wgsl(), "main", "affine", opts).unwrap();
    assert_eq!(prog.workgroup_size(), [64, 1, 1]);
    let kinds: Vec<BindingKind> = prog.bindings().iter().map(|b| b.kind).collect();
    assert_eq!(kinds, [BindingKind::StorageRead, BindingKind::StorageReadWrite, BindingKind::Uniform]);
    let xs: Vec<f32> = (0..n).map(|i| i as f32 * 0.25 - 100.0).collect();
    let x = dev.alloc(4 * n as u64, "x").unwrap();
    let y = dev.alloc(4 * n as u64, "y").unwrap();
    dev.upload(&x, &f32s(&xs)).unwrap();
    dev.fill(&y, &f32::NAN.to_le_bytes()).unwrap();
    let p = params(n as u32);
    dev.run_once(&prog, &[(&x).into(), (&y).into(), Arg::Uniform(&p)], (n as u64).div_ceil(64)).unwrap();
    let ys = from_f32s(&dev.download(&y).unwrap());
    for (i, (a, b)) in xs.iter().zip(&ys).enumerate() {
        assert_eq!((a * 2.0 + 1.0).to_bits(), b.to_bits(), "element {i} of {n}");
    }
}

#[test]
fn kernel_runs_at_awkward_sizes_with_poisoned_output() {
    let Some(dev) = device() else { return };
    for n in [1, 7, 1023, 4097] {
        check_affine(dev, n, &ProgramOptions::default());
    }
    // The checked (runtime bounds checks) path compiles and computes the same.
    check_affine(dev, 1023, &ProgramOptions { checked: Some(true), ..ProgramOptions::default() });
}

#[test]
fn same_source_hits_the_program_cache() {
    let Some(dev) = device() else { return };
    let a = dev.compile(&affine_wgsl(), "main", "a").unwrap();
    let b = dev.compile(&affine_wgsl(), "main", "b").unwrap();
    assert_eq!(a.source_hash(), b.source_hash());
    assert_eq!(b.label(), "b");
    assert!(a.shares_pipeline(&b), "the cached pipeline is reused");
    let c =
        dev.compile_with(&affine_wgsl(), "main", "c", &ProgramOptions { checked: Some(true), ..Default::default() });
    let c = c.unwrap();
    assert_ne!(c.source_hash(), a.source_hash());
    assert!(!c.shares_pipeline(&a));
    // The same code under another entry name and other comments (a model's next layer) shares the
    // pipeline; other code does not.
    let renamed = format!("// layer 2\n{}", affine_wgsl().replace("fn main", "fn k7_affine"));
    let d = dev.compile(&renamed, "k7_affine", "d").unwrap();
    assert!(d.shares_pipeline(&a), "identical code under another name compiled again");
    let e = dev.compile(&renamed.replace("2.0", "3.0"), "k7_affine", "e").unwrap();
    assert!(!e.shares_pipeline(&a));
}

#[test]
fn invalid_shader_is_an_error_with_a_line() {
    let Some(dev) = device() else { return };
    // Parse error on line 3.
    let src = "@group(0) @binding(0) var<storage, read_write> y: array<f32>;\n\
               @compute @workgroup_size(64)\nfn main() { y[0] = 1.0 +; }\n";
    match dev.compile(src, "main", "broken_parse") {
        Err(DeviceError::InvalidShader { label, line, message, wgsl }) => {
            eprintln!("{message}");
            assert_eq!(label, "broken_parse");
            assert_eq!(line, Some(3));
            assert!(message.contains("broken_parse:3:"), "{message}");
            assert_eq!(wgsl, src);
        }
        other => panic!("expected InvalidShader, got {other:?}"),
    }
    // Type error (caught by naga's front end or validator) on line 4.
    let src = "@group(0) @binding(0) var<storage, read_write> y: array<f32>;\n\
               @compute @workgroup_size(64)\nfn main() {\n  y[0] = 1u;\n}\n";
    match dev.compile(src, "main", "broken_type") {
        Err(e @ DeviceError::InvalidShader { line, .. }) => {
            eprintln!("{e}");
            assert_eq!(line, Some(4));
            assert!(e.to_string().contains("at line 4"));
        }
        other => panic!("expected InvalidShader, got {other:?}"),
    }
    // Missing entry point.
    match dev.compile(&affine_wgsl(), "nope", "affine") {
        Err(DeviceError::EntryPointNotFound { available, .. }) => assert_eq!(available, ["main"]),
        other => panic!("expected EntryPointNotFound, got {other:?}"),
    }
    // f16 without `enable f16;` is invalid everywhere.
    let src = "@compute @workgroup_size(1)\nfn main() { let h: f16 = 1.0h; }\n";
    assert!(matches!(dev.compile(src, "main", "f16"), Err(DeviceError::InvalidShader { .. })));
    assert!(dev.take_uncaptured_errors().is_empty());
}

#[test]
fn dispatch_above_the_per_dimension_limit() {
    let Some(dev) = device() else { return };
    let max = dev.limits().max_compute_workgroups_per_dimension;
    let n = u64::from(max) + 1000;
    let src = format!(
        "@group(0) @binding(0) var<storage, read_write> out: array<u32>;
{LINEAR_WORKGROUP_ID_WGSL}
@compute @workgroup_size(1)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {{
    let i = sinter_linear_workgroup_id(wg, nwg);
    if (i < arrayLength(&out)) {{
        out[i] = i * 3u + 1u;
    }}
}}
"
    );
    let prog = dev.compile(&src, "main", "spread").unwrap();
    let out = dev.alloc(4 * n, "out").unwrap();
    dev.fill(&out, &[0xFF; 4]).unwrap();
    let grid = dev.workgroup_grid(Workgroups::Linear(n)).unwrap();
    assert!(grid[1] > 1 && grid.iter().all(|&d| d <= max), "{grid:?}");
    dev.run_once(&prog, &[(&out).into()], n).unwrap();
    let got = dev.download(&out).unwrap();
    for (i, c) in got.chunks_exact(4).enumerate() {
        assert_eq!(u32::from_le_bytes([c[0], c[1], c[2], c[3]]), i as u32 * 3 + 1, "element {i}");
    }
    // Zero workgroups is a no-op.
    dev.run_once(&prog, &[(&out).into()], 0u32).unwrap();
    // An explicit grid over the limit is an error, not a panic.
    assert!(matches!(
        dev.run_once(&prog, &[(&out).into()], [max + 1, 1, 1]),
        Err(DeviceError::TooManyWorkgroups { .. })
    ));
}

#[test]
fn batch_orders_dependent_dispatches_and_replays() {
    let Some(dev) = device() else { return };
    let n = 4097usize;
    let prog = dev.compile(&affine_wgsl(), "main", "affine").unwrap();
    let a = dev.alloc(4 * n as u64, "a").unwrap();
    let b = dev.alloc(4 * n as u64, "b").unwrap();
    let c = dev.alloc(4 * n as u64, "c").unwrap();
    dev.upload(&a, &f32s(&vec![1.0; n])).unwrap();
    dev.fill(&b, &f32::NAN.to_le_bytes()).unwrap();
    let p = params(n as u32);
    let wg = (n as u64).div_ceil(64);
    let mut batch = dev.batch();
    // a -> b -> a -> b: 1 -> 3 -> 7 -> 15, then copy b into c.
    for (src, dst) in [(&a, &b), (&b, &a), (&a, &b)] {
        batch.dispatch(&prog, &[src.into(), dst.into(), Arg::Uniform(&p)], wg).unwrap();
    }
    batch.copy(b.whole(), &c, 0).unwrap();
    assert_eq!(batch.dispatch_count(), 3);
    let rec = batch.finish().unwrap();
    assert_eq!(rec.dispatch_labels(), ["affine", "affine", "affine"]);
    let t = rec.run().unwrap();
    assert!(t.wall_ns > 0);
    assert!(from_f32s(&dev.download(&c).unwrap()).iter().all(|&v| v == 15.0));
    // Replaying the recorded batch continues from a = 7: 7 -> 15 -> 31 -> 63.
    rec.submit().unwrap();
    assert!(from_f32s(&dev.download(&c).unwrap()).iter().all(|&v| v == 63.0));
}

#[test]
fn dispatch_arguments_are_checked() {
    let Some(dev) = device() else { return };
    let prog = dev.compile(&affine_wgsl(), "main", "affine").unwrap();
    let x = dev.alloc(4096, "x").unwrap();
    let y = dev.alloc(4096, "y").unwrap();
    let p = params(1024);
    let mut batch = dev.batch();
    let err = batch.dispatch(&prog, &[(&x).into(), (&y).into()], 1u32).unwrap_err();
    assert!(matches!(err, DeviceError::InvalidArgument(_)), "{err}");
    eprintln!("{err}");
    let err = batch.dispatch(&prog, &[(&x).into(), (&y).into(), (&x).into()], 1u32).unwrap_err();
    assert!(err.to_string().contains("Uniform"), "{err}");
    let err = batch.dispatch(&prog, &[x.range(4, 64).into(), (&y).into(), Arg::Uniform(&p)], 1u32).unwrap_err();
    assert!(err.to_string().contains("offset"), "{err}");
    let err = batch.dispatch(&prog, &[x.range(0, 8192).into(), (&y).into(), Arg::Uniform(&p)], 1u32).unwrap_err();
    assert!(err.to_string().contains("overruns"), "{err}");
    let err = batch.dispatch(&prog, &[(&x).into(), (&x).into(), Arg::Uniform(&p)], 1u32).unwrap_err();
    assert!(err.to_string().contains("read-only and read-write"), "{err}");
    assert!(batch.is_empty());
    // Binding two disjoint ranges of one buffer (both as declared) works.
    let xy = dev.alloc(8192, "xy").unwrap();
    dev.upload(&xy, &f32s(&vec![2.0; 1024])).unwrap();
    batch.dispatch(&prog, &[xy.range(0, 4096).into(), y.range(0, 4096).into(), Arg::Uniform(&p)], 16u32).unwrap();
    batch.run().unwrap();
    assert!(from_f32s(&dev.download(&y).unwrap()).iter().all(|&v| v == 5.0));
}

#[test]
fn auto_layout_binds_only_what_the_entry_point_uses() {
    let Some(dev) = device() else { return };
    let src = "@group(0) @binding(0) var<storage, read_write> unused: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(1)
fn main() { out[0] = 42u; }
";
    let reflected = dev.compile(src, "main", "reflected").unwrap();
    assert_eq!(reflected.bindings().len(), 2);
    let auto =
        dev.compile_with(src, "main", "auto", &ProgramOptions { layout: LayoutMode::Auto, ..Default::default() });
    let auto = auto.unwrap();
    assert_eq!(auto.bindings().len(), 1);
    assert_eq!(auto.bindings()[0].binding, 1);
    let out = dev.alloc(4, "out").unwrap();
    dev.run_once(&auto, &[(&out).into()], 1u32).unwrap();
    assert_eq!(dev.download(&out).unwrap(), 42u32.to_le_bytes());
    let other = dev.alloc(4, "other").unwrap();
    dev.run_once(&reflected, &[(&other).into(), (&out).into()], 1u32).unwrap();
}

#[test]
fn timestamps_give_positive_durations() {
    let Some(dev) = device() else { return };
    if !dev.info().has_timestamps {
        eprintln!("SKIPPED: adapter {} has no timestamps", dev.info().name);
        return;
    }
    let n = 1 << 18;
    let prog = dev.compile(&affine_wgsl(), "main", "affine").unwrap();
    let x = dev.alloc(4 * n, "x").unwrap();
    let y = dev.alloc(4 * n, "y").unwrap();
    let p = params(n as u32);
    let mut batch = dev.batch().timed(true);
    for _ in 0..3 {
        batch.dispatch(&prog, &[(&x).into(), (&y).into(), Arg::Uniform(&p)], n.div_ceil(64)).unwrap();
    }
    let rec = batch.finish().unwrap();
    assert!(rec.is_timed());
    for _ in 0..2 {
        let t = rec.run().unwrap();
        eprintln!("timing: {t:?}");
        let d = t.dispatch_ns.unwrap();
        assert_eq!(d.len(), 3);
        assert!(d.iter().all(|&ns| ns > 0), "{d:?}");
        assert!(t.gpu_span_ns.unwrap() >= d.iter().copied().max().unwrap());
        // Starts are relative to the first dispatch and each comes after the previous one ends.
        let s = t.dispatch_start_ns.unwrap();
        assert_eq!(s.len(), 3);
        assert_eq!(s[0], 0);
        for k in 1..3 {
            // (each figure is rounded to whole nanoseconds on its own: allow 2 ns)
            assert!(s[k] + 2 >= s[k - 1] + d[k - 1], "dispatch {k} starts before {} ends: {s:?} {d:?}", k - 1);
        }
        assert!(t.gpu_span_ns.unwrap().abs_diff(s[2] + d[2]) <= 2);
    }
}

#[test]
fn nonexistent_adapter_is_a_clear_error() {
    let opts = DeviceOptions { adapter: Some("nonexistent-adapter-xyz".into()), allow_gl: false, ..Default::default() };
    match Device::new(opts) {
        Err(e @ DeviceError::NoAdapter { .. }) => {
            let msg = e.to_string();
            eprintln!("{msg}");
            assert!(msg.contains("nonexistent-adapter-xyz") && msg.contains("adapters seen"), "{msg}");
        }
        other => panic!("expected NoAdapter, got {other:?}"),
    }
}

#[test]
fn chunk_planner_is_aligned_and_covers_everything() {
    let chunks = plan_chunks(1000 * 4, 4, 1024, 256).unwrap();
    assert_eq!(chunks.len(), 4);
    assert!(chunks.iter().all(|c| c.offset % 256 == 0 && c.size <= 1024 && c.size % 4 == 0));
    assert_eq!(chunks.iter().map(|c| c.elements).sum::<u64>(), 1000);
    assert_eq!(chunks[3].first_element, 768);
    // Odd element sizes: f16 (2 bytes) with an odd count pads the last chunk to 4 bytes.
    let chunks = plan_chunks(7 * 2, 2, 1 << 20, 256).unwrap();
    assert_eq!(chunks, [sinter_wgsl::device::Chunk { offset: 0, size: 16, first_element: 0, elements: 7 }]);
    // vec3-sized elements: every chunk boundary is on an element.
    for c in plan_chunks(12 * 10_000, 12, 4096, 256).unwrap() {
        assert_eq!(c.offset % 12, 0);
        assert_eq!(c.offset % 256, 0);
    }
    assert!(plan_chunks(10, 4, 1024, 256).is_err());
    assert!(plan_chunks(16, 0, 1024, 256).is_err());
    assert!(plan_chunks(4096, 4, 100, 256).is_err());
    assert!(plan_chunks(0, 4, 1024, 256).unwrap().is_empty());
}

#[test]
fn binding_above_the_limit_is_rejected_and_chunks_work() {
    let Some(dev) = device() else { return };
    let limit = dev.max_binding_size();
    let bytes = limit + (1 << 20);
    if bytes > dev.limits().max_buffer_size {
        eprintln!("SKIPPED: max_buffer_size {} does not exceed the binding limit", dev.limits().max_buffer_size);
        return;
    }
    let n = bytes / 4;
    let x = dev.alloc(bytes, "big x").unwrap();
    let y = dev.alloc(bytes, "big y").unwrap();
    dev.fill(&x, &3.0f32.to_le_bytes()).unwrap();
    dev.fill(&y, &f32::NAN.to_le_bytes()).unwrap();
    let prog = dev.compile(&affine_wgsl(), "main", "affine").unwrap();
    let p = params(n as u32);
    let err = dev.run_once(&prog, &[(&x).into(), (&y).into(), Arg::Uniform(&p)], n.div_ceil(64)).unwrap_err();
    eprintln!("{err}");
    assert!(matches!(err, DeviceError::BindingTooLarge { size, limit: l, .. } if size == bytes && l == limit));

    let chunks = dev.plan_chunks(bytes, 4).unwrap();
    assert!(chunks.len() >= 2);
    let mut batch = dev.batch();
    let ps: Vec<Vec<u8>> = chunks.iter().map(|c| params(c.elements as u32)).collect();
    for (c, p) in chunks.iter().zip(&ps) {
        batch
            .dispatch(&prog, &[x.chunk(c).into(), y.chunk(c).into(), Arg::Uniform(p)], c.elements.div_ceil(64))
            .unwrap();
    }
    batch.run().unwrap();
    let mut probes = vec![0, bytes - 64];
    for c in &chunks[1..] {
        probes.push(c.offset - 32);
        probes.push(c.offset);
    }
    for at in probes {
        let got = from_f32s(&dev.download_range(&y, at, 64).unwrap());
        assert!(got.iter().all(|&v| v == 7.0), "at byte {at}: {got:?}");
    }
}

#[test]
fn absurd_allocation_is_an_error_not_a_panic() {
    let Some(dev) = device() else { return };
    let err = dev.alloc(1 << 40, "one tebibyte").unwrap_err();
    eprintln!("{err}");
    assert!(matches!(err, DeviceError::OutOfMemory { requested, .. } if requested == 1 << 40), "{err}");
    // The device is still usable.
    let b = dev.alloc(8, "after").unwrap();
    dev.upload(&b, &[1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
    assert_eq!(dev.download(&b).unwrap(), [1, 2, 3, 4, 5, 6, 7, 8]);
}

#[test]
fn pipeline_cache_persists_and_rejects_corrupt_files() {
    if device().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let opts = DeviceOptions { cache_dir: Some(dir.path().to_path_buf()), ..Default::default() };
    let dev = Device::new(opts.clone()).unwrap();
    match dev.pipeline_cache_status() {
        PipelineCacheStatus::Fresh => {}
        PipelineCacheStatus::Unsupported => {
            eprintln!("SKIPPED: the {} backend has no pipeline cache", dev.info().backend);
            return;
        }
        other => panic!("unexpected status {other:?}"),
    }
    dev.compile(&affine_wgsl(), "main", "affine").unwrap();
    let Some(path) = dev.save_pipeline_cache().unwrap() else {
        eprintln!("SKIPPED: the driver returned no pipeline cache data");
        return;
    };
    drop(dev);
    let good = std::fs::read(&path).unwrap();
    eprintln!("pipeline cache file {} of {} bytes", path.display(), good.len());

    let dev = Device::new(opts.clone()).unwrap();
    assert!(matches!(dev.pipeline_cache_status(), PipelineCacheStatus::Loaded { .. }));
    drop(dev);

    // Flip a payload byte: detected, deleted, rebuilt; the device still compiles and runs.
    let mut bad = good.clone();
    let last = bad.len() - 1;
    bad[last] ^= 0x5A;
    std::fs::write(&path, &bad).unwrap();
    let dev = Device::new(opts.clone()).unwrap();
    // Issue 14: the status names the file (it named none, so a user could not find what to delete).
    let names_the_file = |status: PipelineCacheStatus| match status {
        PipelineCacheStatus::Corrupt { reason } => {
            assert!(reason.contains(&path.display().to_string()), "{reason}");
        }
        other => panic!("expected Corrupt, got {other:?}"),
    };
    names_the_file(dev.pipeline_cache_status());
    check_affine(&dev, 100, &ProgramOptions::default());
    dev.save_pipeline_cache().unwrap();
    drop(dev);

    // Truncated file: same.
    std::fs::write(&path, &good[..good.len() / 2]).unwrap();
    let dev = Device::new(opts.clone()).unwrap();
    names_the_file(dev.pipeline_cache_status());
    drop(dev);

    // A file that cannot be read (a folder in its place): named, and the device still compiles.
    let _ = std::fs::remove_file(&path);
    std::fs::create_dir_all(&path).unwrap();
    let dev = Device::new(opts.clone()).unwrap();
    names_the_file(dev.pipeline_cache_status());
    check_affine(&dev, 100, &ProgramOptions::default());
    drop(dev);
}

/// Issue 14: a cache file whose sinter framing is intact (header, length and hash recomputed) but
/// whose driver data is garbage must not break compiles: pipeline creation falls back to no cache,
/// the file is deleted and the status names it.
#[test]
fn pipeline_cache_with_corrupt_inner_bytes_is_discarded() {
    if device().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let opts = DeviceOptions { cache_dir: Some(dir.path().to_path_buf()), ..Default::default() };
    let dev = Device::new(opts.clone()).unwrap();
    if dev.pipeline_cache_status() == PipelineCacheStatus::Unsupported {
        eprintln!("SKIPPED: the {} backend has no pipeline cache", dev.info().backend);
        return;
    }
    dev.compile(&affine_wgsl(), "main", "affine").unwrap();
    let Some(path) = dev.save_pipeline_cache().unwrap() else {
        eprintln!("SKIPPED: the driver returned no pipeline cache data");
        return;
    };
    drop(dev);
    let good = std::fs::read(&path).unwrap();
    // Every payload byte past wgpu's own header garbled, the framing redone as the backend does.
    let mut payload = good[48..].to_vec();
    let n = payload.len();
    for (i, b) in payload.iter_mut().enumerate().skip(n.min(64)) {
        *b = (i as u8).wrapping_mul(151) ^ 0xA5;
    }
    let mut file = b"SNTRPLC1".to_vec();
    file.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    file.extend_from_slice(blake3::hash(&payload).as_bytes());
    file.extend_from_slice(&payload);
    std::fs::write(&path, &file).unwrap();
    for round in 0..2 {
        let dev = Device::new(opts.clone()).unwrap();
        eprintln!("round {round}: {:?}", dev.pipeline_cache_status());
        check_affine(&dev, 100, &ProgramOptions::default());
        if let PipelineCacheStatus::Corrupt { reason } = dev.pipeline_cache_status() {
            assert!(reason.contains(&path.display().to_string()), "{reason}");
            assert!(!path.exists(), "the unusable file is deleted");
        }
        dev.save_pipeline_cache().unwrap();
    }
}

#[test]
fn calibration_measures_bandwidth_and_launch_overhead() {
    let Some(dev) = device() else { return };
    let bw = dev.measure_copy_bandwidth_with(16 << 20, 5).unwrap();
    eprintln!("copy bandwidth: {bw:?}");
    assert!(bw.gb_per_s > 0.0 && bw.median_ns > 0);
    assert_eq!(bw.source == TimingSource::GpuTimestamps, dev.info().has_timestamps);
    let lo = dev.measure_launch_overhead().unwrap();
    eprintln!("launch overhead: {lo:?}");
    assert!(lo.submit_round_trip_ns > 0);
}

/// Larger calibration for reports: `cargo test -p sinter-wgsl --test device -- --ignored --nocapture`.
#[test]
#[ignore]
fn calibration_report() {
    let Some(dev) = device() else { return };
    eprintln!("adapter: {} ({})", dev.info().name, dev.info().backend);
    for mib in [64u64, 256, 1024] {
        let bytes = mib << 20;
        if bytes > dev.limits().max_buffer_size {
            continue;
        }
        match dev.measure_copy_bandwidth(bytes) {
            Ok(bw) => eprintln!(
                "copy {mib} MiB: {:.1} GB/s (median {} ns, min {} ns, {} chunk(s), {:?})",
                bw.gb_per_s, bw.median_ns, bw.min_ns, bw.chunks, bw.source
            ),
            Err(e) => eprintln!("copy {mib} MiB: {e}"),
        }
    }
    eprintln!("launch overhead: {:?}", dev.measure_launch_overhead().unwrap());
}

/// Allocates until the driver refuses: the refusal must be `OutOfMemory` and the device must stay usable.
/// Ignored by default (on a CPU adapter it would exhaust host memory); run it on a GPU with `--ignored`.
#[test]
#[ignore]
fn exhausting_device_memory_is_an_error() {
    let Some(dev) = device() else { return };
    if dev.info().device_type == "Cpu" {
        eprintln!("SKIPPED: would exhaust host memory on a CPU adapter");
        return;
    }
    let size = dev.limits().max_buffer_size.min(4 << 30) / 4 * 4;
    let mut held = Vec::new();
    let mut refused = None;
    for _ in 0..256 {
        match dev.alloc(size, "hog") {
            Ok(b) => held.push(b),
            Err(e) => {
                refused = Some(e);
                break;
            }
        }
    }
    let err = refused.expect("256 allocations of max_buffer_size all succeeded");
    eprintln!("refused after {} buffers of {size} bytes: {err}", held.len());
    assert!(matches!(err, DeviceError::OutOfMemory { .. }), "{err}");
    drop(held);
    let b = dev.alloc(8, "after").unwrap();
    dev.upload(&b, &[9; 8]).unwrap();
    assert_eq!(dev.download(&b).unwrap(), [9; 8]);
}
