use super::cache::{CacheEntry, GraphConstants, cache_path, cache_store};
use super::*;
use crate::kernel::interp::InterpBackend;
use crate::prelude::*;

/// A server shares one compiled graph behind a lock or an `Arc`: it must be `Send + Sync`.
#[test]
fn compiled_graph_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<CompiledGraph>();
    assert_send_sync::<DeviceTensor>();
}

#[test]
fn run_device_chains_without_host_tensors_and_shares_one_compile() {
    let g = Graph::new();
    let x = g.input("x", DType::F32, [3, 5]);
    g.output(&(&x * &x).softmax(-1));
    let c = compile(&g, Arc::new(InterpBackend::new()), opts(None)).unwrap();
    let x = HostTensor::random(DType::F32, vec![3, 5], 7, -2.0, 2.0);
    let want = crate::cpu::run(&g, std::slice::from_ref(&x)).unwrap();
    let d = c.upload(&x).unwrap();
    let y = c.run_device(&[d]).unwrap();
    assert_eq!(y[0].shape(), [3, 5]);
    let got = y[0].to_host().unwrap();
    assert!(got.max_abs_diff(&want[0]) < 1e-6);
    // A second call through the host path reuses the same specialization.
    c.run(&[x]).unwrap();
    assert_eq!(c.events().len(), 1);
    // A shared compiled graph runs from another thread.
    let c = Arc::new(c);
    let c2 = Arc::clone(&c);
    let t = std::thread::spawn(move || c2.run(&[HostTensor::random(DType::F32, vec![3, 5], 8, -1.0, 1.0)]).is_ok());
    assert!(t.join().unwrap());
}

/// `fusion.json` in a profile names captured-graph nodes (what the viewer draws), not the
/// post-decomposition ids: softmax decomposes into ~6 nodes, yet every decision must point at
/// the captured softmax or its inputs.
#[test]
fn profile_fusion_decisions_name_captured_nodes() {
    let g = Graph::new();
    let x = g.input("x", DType::F32, [4, 33]);
    let b = g.input("b", DType::F32, [33]);
    g.output(&(&x + &b).softmax(-1).exp());
    let captured = g.build().unwrap();
    let c = compile(&g, Arc::new(InterpBackend::new()), opts(None)).unwrap();
    let inputs = vec![
        HostTensor::random(DType::F32, vec![4, 33], 1, -1.0, 1.0),
        HostTensor::random(DType::F32, vec![33], 2, -1.0, 1.0),
    ];
    let ceilings = crate::profile::Ceilings {
        copy_gbps: 1.0,
        matmul_tflops: Default::default(),
        matmul_method: Default::default(),
        launch_overhead_us: 0.0,
        measured: false,
    };
    let dev = crate::profile::DeviceInfo::new("host", "interp", ceilings);
    let p = c.profile(&inputs, 1, "t", dev).unwrap();
    let program = c.program().unwrap();
    assert!(!p.fusion.is_empty());
    // The decomposed graph has more nodes than the captured one; decisions must not leak its ids.
    assert!(program.decisions.iter().any(|d| d.nodes.iter().any(|&n| n as usize >= captured.nodes.len())));
    for (pd, d) in p.fusion.iter().zip(&program.decisions) {
        assert_eq!(pd.nodes, d.origins, "{}", d.reason);
        assert!(pd.nodes.iter().all(|&n| (n as usize) < captured.nodes.len()), "{:?}", pd.nodes);
    }
}

fn opts(cache: Option<PathBuf>) -> CompileOptions {
    CompileOptions { cache_dir: cache, debug_dir: None, ..CompileOptions::default() }
}

fn tmpdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("sinter-compile-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn softmax_graph(batch: Dim) -> Graph {
    let g = Graph::new();
    let x = g.input("x", DType::F32, vec![batch, Dim::Static(37)]);
    let b = g.input("b", DType::F32, [37]);
    g.output(&(&x + &b).softmax(-1));
    g
}

#[test]
fn compiled_matches_reference_and_guards_recompile() {
    let g = softmax_graph(Dim::sym("batch"));
    let c = compile(&g, Arc::new(InterpBackend::new()), opts(None)).unwrap();
    assert!(c.events().is_empty(), "symbolic graphs compile at the first call");
    for (k, rows) in [5usize, 5, 9, 5].into_iter().enumerate() {
        let x = HostTensor::random(DType::F32, vec![rows, 37], k as u64, -3.0, 3.0);
        let b = HostTensor::random(DType::F32, vec![37], 100 + k as u64, -1.0, 1.0);
        let got = c.run(&[x.clone(), b.clone()]).unwrap();
        let want = crate::cpu::run(&g, &[x, b]).unwrap();
        assert!(got[0].tolerance_ratio(&want[0], 1e-5, 1e-7) <= 1.0);
    }
    let ev = c.events();
    assert_eq!(ev.len(), 2, "one compile per distinct signature: {ev:?}");
    assert!(ev[1].reason.contains("shape"), "{}", ev[1].reason);
}

#[test]
fn static_shape_change_retypes_and_dtype_change_follows_constants() {
    let g = Graph::new();
    let x = g.input("x", DType::F32, [4, 6]);
    g.output(&((x.relu() * 2.0) + 1.0));
    let c = compile(&g, Arc::new(InterpBackend::new()), opts(None)).unwrap();
    assert_eq!(c.events().len(), 1);
    let x2 = HostTensor::random(DType::F16, vec![3, 10], 7, -2.0, 2.0);
    let got = c.run(std::slice::from_ref(&x2)).unwrap();
    assert_eq!(got[0].dtype(), DType::F16);
    let want: Vec<f64> = x2.to_f64_vec().iter().map(|v| v.max(0.0) * 2.0 + 1.0).collect();
    let want = HostTensor::from_f64(DType::F16, vec![3, 10], &want);
    assert!(got[0].tolerance_ratio(&want, 4e-3, 1e-3) <= 1.0);
    assert_eq!(c.events().len(), 2);
}

#[test]
fn wrong_inputs_are_errors() {
    let g = softmax_graph(Dim::Static(4));
    let c = compile(&g, Arc::new(InterpBackend::new()), opts(None)).unwrap();
    let x = HostTensor::random(DType::F32, vec![4, 37], 1, -1.0, 1.0);
    assert!(c.run(std::slice::from_ref(&x)).is_err(), "missing input");
    let bad = HostTensor::random(DType::F32, vec![4, 36], 1, -1.0, 1.0);
    let b = HostTensor::random(DType::F32, vec![37], 1, -1.0, 1.0);
    let e = c.run(&[bad, b]).unwrap_err().to_string();
    assert!(e.contains("add"), "names the op that no longer fits: {e}");
}

#[test]
fn recompile_limit() {
    let g = softmax_graph(Dim::sym("n"));
    let o = CompileOptions { max_recompiles: 1, dynamic: None, ..opts(None) };
    let c = compile(&g, Arc::new(InterpBackend::new()), o).unwrap();
    let b = HostTensor::random(DType::F32, vec![37], 1, -1.0, 1.0);
    for rows in [1, 2] {
        c.run(&[HostTensor::random(DType::F32, vec![rows, 37], 1, -1.0, 1.0), b.clone()]).unwrap();
    }
    let e = c.run(&[HostTensor::random(DType::F32, vec![3, 37], 1, -1.0, 1.0), b]).unwrap_err();
    assert!(matches!(e, CompileError::RecompileLimit { .. }), "{e}");
}

#[test]
fn disk_cache_hit_and_corrupt_entry_rebuilt() {
    let dir = tmpdir("cache");
    let g = softmax_graph(Dim::Static(3));
    let first = compile(&g, Arc::new(InterpBackend::new()), opts(Some(dir.clone()))).unwrap();
    assert!(!first.events()[0].stats.cache_hit);
    let second = compile(&g, Arc::new(InterpBackend::new()), opts(Some(dir.clone()))).unwrap();
    assert!(second.events()[0].stats.cache_hit, "a second compile of the same graph hits the cache");
    assert_eq!(first.program(), second.program());
    // Corrupt every entry: the next compile must rebuild, not trust it.
    for e in std::fs::read_dir(dir.join("programs")).unwrap() {
        let p = e.unwrap().path();
        let mut bytes = std::fs::read(&p).unwrap();
        let n = bytes.len();
        bytes[n / 2] ^= 0x5a;
        std::fs::write(&p, bytes).unwrap();
    }
    let third = compile(&g, Arc::new(InterpBackend::new()), opts(Some(dir.clone()))).unwrap();
    assert!(!third.events()[0].stats.cache_hit);
    let x = HostTensor::random(DType::F32, vec![3, 37], 5, -1.0, 1.0);
    let b = HostTensor::random(DType::F32, vec![37], 6, -1.0, 1.0);
    let want = crate::cpu::run(&g, &[x.clone(), b.clone()]).unwrap();
    assert!(third.run(&[x, b]).unwrap()[0].tolerance_ratio(&want[0], 1e-5, 1e-7) <= 1.0);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn cache_entries_with_a_valid_checksum_but_an_invalid_program_are_rebuilt() {
    let dir = tmpdir("cache-invalid");
    let g = softmax_graph(Dim::Static(3));
    compile(&g, Arc::new(InterpBackend::new()), opts(Some(dir.clone()))).unwrap();
    // Re-checksummed entries whose program no backend accepts (its buffers gone).
    for e in std::fs::read_dir(dir.join("programs")).unwrap() {
        let path = e.unwrap().path();
        let entry: CacheEntry = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        let mut p: Program = serde_json::from_str(&entry.program).unwrap();
        p.buffers.clear();
        let program = serde_json::to_string(&p).unwrap();
        let entry =
            CacheEntry { checksum: blake3::hash(program.as_bytes()).to_hex().to_string(), program, constants: vec![] };
        std::fs::write(&path, serde_json::to_vec(&entry).unwrap()).unwrap();
    }
    let c = compile(&g, Arc::new(InterpBackend::new()), opts(Some(dir.clone()))).unwrap();
    assert!(!c.events()[0].stats.cache_hit, "an invalid program was trusted");
    let x = HostTensor::random(DType::F32, vec![3, 37], 5, -1.0, 1.0);
    let b = HostTensor::random(DType::F32, vec![37], 6, -1.0, 1.0);
    let want = crate::cpu::run(&g, &[x.clone(), b.clone()]).unwrap();
    assert!(c.run(&[x, b]).unwrap()[0].tolerance_ratio(&want[0], 1e-5, 1e-7) <= 1.0);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn programs_with_infinite_constants_hit_the_disk_cache() {
    // A causal mask: -inf above the diagonal. Its JSON used to hold `null`, so the entry was
    // "corrupt" on every load and rebuilt with a warning each time.
    let dir = tmpdir("cache-inf");
    let g = Graph::new();
    let x = g.input("x", DType::F32, [4, 4]);
    let mask: Vec<f32> = (0..16).map(|i| if i % 4 > i / 4 { f32::NEG_INFINITY } else { 0.0 }).collect();
    let m = g.constant(HostTensor::f32([4, 4], mask).unwrap());
    g.output(&(&x + &m).softmax(-1));
    compile(&g, Arc::new(InterpBackend::new()), opts(Some(dir.clone()))).unwrap();
    let second = compile(&g, Arc::new(InterpBackend::new()), opts(Some(dir.clone()))).unwrap();
    assert!(second.events()[0].stats.cache_hit, "the cached program with -inf constants did not load");
    let x = HostTensor::random(DType::F32, vec![4, 4], 5, -1.0, 1.0);
    let want = crate::cpu::run(&g, std::slice::from_ref(&x)).unwrap();
    assert!(second.run(&[x]).unwrap()[0].tolerance_ratio(&want[0], 1e-5, 1e-7) <= 1.0);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn concurrent_stores_of_one_entry_never_interleave() {
    let dir = tmpdir("cache-race");
    let g = softmax_graph(Dim::Static(3));
    let c = compile(&g, Arc::new(InterpBackend::new()), opts(None)).unwrap();
    let p = c.program().unwrap();
    let a = cache_path(&dir, "k");
    assert_ne!(unique_tmp(&a), unique_tmp(&a), "two writers of one entry share a temporary file");
    std::thread::scope(|s| {
        for _ in 0..8 {
            s.spawn(|| {
                for _ in 0..20 {
                    cache_store(&dir, "k", &p, &GraphConstants::default()).unwrap();
                }
            });
        }
    });
    assert_eq!(cache_load(&dir, "k", &GraphConstants::default()).as_ref(), Some(&p));
    assert_eq!(std::fs::read_dir(dir.join("programs")).unwrap().count(), 1, "temporary files left behind");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A graph with a 64 KiB weight used as is (a graph constant) and one folded from two constants
/// (`w * 2`, not in the captured graph).
fn weights_graph() -> (Graph, Vec<HostTensor>) {
    let g = Graph::new();
    let x = g.input("x", DType::F32, [4, 128]);
    let w = g.constant(HostTensor::random(DType::F32, vec![128, 128], 11, -1.0, 1.0));
    let two = g.constant(HostTensor::scalar(DType::F32, 2.0));
    let folded = &g.constant(HostTensor::random(DType::F32, vec![128], 12, -1.0, 1.0)).reshape([1, 128]) * &two;
    g.output(&(&x.matmul(&w) + &folded).relu());
    (g, vec![HostTensor::random(DType::F32, vec![4, 128], 13, -1.0, 1.0)])
}

/// Constants stay out of the entry's JSON: the graph's weights by reference (nothing written),
/// folded ones in content-addressed files; a second compile hits and computes the same outputs.
#[test]
fn cached_programs_keep_constants_out_of_the_json() {
    let dir = tmpdir("cache-constants");
    let (g, inputs) = weights_graph();
    let first = compile(&g, Arc::new(InterpBackend::new()), opts(Some(dir.clone()))).unwrap();
    let want = first.run(&inputs).unwrap();
    let entries: Vec<_> = std::fs::read_dir(dir.join("programs")).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(entries.len(), 1);
    let json = std::fs::read(&entries[0]).unwrap();
    assert!(json.len() < 64 << 10, "the 64 KiB weight went into the JSON ({} bytes)", json.len());
    let entry: CacheEntry = serde_json::from_slice(&json).unwrap();
    assert!(!entry.constants.is_empty());
    let second = compile(&g, Arc::new(InterpBackend::new()), opts(Some(dir.clone()))).unwrap();
    assert!(second.events()[0].stats.cache_hit, "second compile missed the cache");
    assert_eq!(second.program(), first.program());
    assert_eq!(second.run(&inputs).unwrap(), want);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A constant file whose bytes no longer match its digest is not used: the entry rebuilds and the
/// file is written again.
#[test]
fn a_damaged_constant_file_rebuilds_the_entry() {
    let dir = tmpdir("cache-damaged-constant");
    let g = Graph::new();
    let x = g.input("x", DType::F32, [4, 2048]);
    // Folded at compile time (exp of a constant): not a constant of the captured graph.
    let c = g.constant(HostTensor::random(DType::F32, vec![2048], 21, -1.0, 1.0)).exp();
    g.output(&(&x + &c));
    let inputs = [HostTensor::random(DType::F32, vec![4, 2048], 22, -1.0, 1.0)];
    let want = compile(&g, Arc::new(InterpBackend::new()), opts(Some(dir.clone()))).unwrap().run(&inputs).unwrap();
    let files: Vec<_> = std::fs::read_dir(dir.join("constants")).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(files.len(), 1, "the folded constant has one file");
    let mut bytes = std::fs::read(&files[0]).unwrap();
    bytes[100] ^= 0x40;
    std::fs::write(&files[0], &bytes).unwrap();
    let again = compile(&g, Arc::new(InterpBackend::new()), opts(Some(dir.clone()))).unwrap();
    assert!(!again.events()[0].stats.cache_hit, "a damaged constant was used");
    assert_eq!(again.run(&inputs).unwrap(), want);
    let third = compile(&g, Arc::new(InterpBackend::new()), opts(Some(dir.clone()))).unwrap();
    assert!(third.events()[0].stats.cache_hit, "the rebuilt entry and its constant file did not hit");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn every_workload_hits_the_disk_cache() {
    // Regression: a max-pool's -inf padding constant was written to JSON as `null`, so every
    // cached ResNet program was "corrupt" and rebuilt.
    let dir = tmpdir("cache-workloads");
    for w in crate::workloads::all() {
        let g = w.build(crate::workloads::Scale::Reduced).unwrap();
        let first = compile(&g, Arc::new(InterpBackend::new()), opts(Some(dir.clone()))).unwrap();
        let second = compile(&g, Arc::new(InterpBackend::new()), opts(Some(dir.clone()))).unwrap();
        assert!(second.events()[0].stats.cache_hit, "{}: second compile missed the cache", w.name);
        assert_eq!(format!("{:?}", first.program()), format!("{:?}", second.program()), "{}", w.name);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn artifacts_written() {
    let dir = tmpdir("artifacts");
    let g = softmax_graph(Dim::Static(3));
    let o = CompileOptions { debug_dir: Some(dir.clone()), ..opts(None) };
    compile(&g, Arc::new(InterpBackend::new()), o).unwrap();
    for f in ["graph.txt", "graph.json", "ir_pre_fusion.txt", "ir_post_fusion.txt", "fusion.json", "program.json"] {
        assert!(dir.join(f).is_file(), "{f} missing");
    }
    assert!(std::fs::read_dir(dir.join("passes")).unwrap().count() >= 3);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn profile_records_kernels_and_roundtrips() {
    let dir = tmpdir("profile");
    let g = softmax_graph(Dim::Static(5));
    let c = compile(&g, Arc::new(InterpBackend::new()), opts(None)).unwrap();
    let x = HostTensor::random(DType::F32, vec![5, 37], 5, -1.0, 1.0);
    let b = HostTensor::random(DType::F32, vec![37], 6, -1.0, 1.0);
    let device = crate::profile::DeviceInfo::new("host", "interp", crate::profile::Ceilings::default());
    let p = c.profile(&[x, b], 3, "softmax_test", device).unwrap();
    assert_eq!(p.kernels.len(), 1);
    assert!(p.kernels[0].ops.iter().any(|o| o == "softmax"), "{:?}", p.kernels[0].ops);
    p.write(&dir).unwrap();
    let back = crate::profile::Profile::read(&dir).unwrap();
    assert_eq!(back.kernels.len(), 1);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Every matmul and convolution kernel of a profile carries its contraction record, rated
/// against the peak of its compute type; other kernels carry none.
#[test]
fn profile_records_contraction_kernels() {
    use crate::profile::ContractionKind;
    let g = Graph::new();
    let a = g.input("a", DType::F32, [64, 32]);
    let b = g.input("b", DType::F32, [32, 48]);
    let x = g.input("x", DType::F32, [2, 8, 16, 16]);
    let w = g.input("w", DType::F32, [16, 8, 3, 3]);
    g.output(&a.matmul(&b).exp());
    g.output(&x.conv2d(&w, None, [1, 1], [1, 1, 1, 1], [1, 1], 1).relu());
    let q = g.input("q", DType::BF16, [2, 4, 64, 32]);
    let kk = g.input("k", DType::BF16, [2, 4, 64, 32]);
    let v = g.input("v", DType::BF16, [2, 4, 64, 32]);
    g.output(&q.attention(&kk, &v, None, None, true));
    let c = compile(&g, Arc::new(InterpBackend::new()), opts(None)).unwrap();
    let mut inputs = [vec![64, 32], vec![32, 48], vec![2, 8, 16, 16], vec![16, 8, 3, 3]]
        .into_iter()
        .enumerate()
        .map(|(i, s)| HostTensor::random(DType::F32, s, i as u64, -1.0, 1.0))
        .collect::<Vec<_>>();
    inputs.extend((0..3).map(|i| HostTensor::random(DType::BF16, vec![2, 4, 64, 32], 10 + i, -1.0, 1.0)));
    let mut ceilings = crate::profile::Ceilings { copy_gbps: 1.0, measured: true, ..Default::default() };
    ceilings.matmul_tflops.insert("f32".into(), 0.5);
    ceilings.matmul_method.insert("f32".into(), "test".into());
    let p = c.profile(&inputs, 2, "t", crate::profile::DeviceInfo::new("host", "interp", ceilings)).unwrap();
    let kinds: Vec<ContractionKind> = p.kernels.iter().filter_map(|k| k.contraction.as_ref().map(|c| c.kind)).collect();
    for kind in [ContractionKind::Matmul, ContractionKind::Conv, ContractionKind::Attention] {
        assert!(kinds.contains(&kind), "{kind:?} missing: {kinds:?}");
    }
    for k in &p.kernels {
        let is_product = c.programs().iter().flat_map(|p| &p.kernels).any(|pk| {
            pk.name == k.name
                && matches!(pk.body, crate::kernel::KernelBody::Matmul(_) | crate::kernel::KernelBody::Attention(_))
        });
        assert_eq!(k.contraction.is_some(), is_product, "{}", k.name);
        if let Some(r) = &k.contraction {
            // The interpreter is exact: f32 products stay f32, rated against the f32 peak; bf16
            // attention has no bf16 peak here and falls back to the f32 one, named.
            let want = if r.kind == ContractionKind::Attention { "bf16" } else { "f32" };
            assert_eq!(r.compute, want, "{}", k.name);
            assert_eq!((r.peak_compute.as_deref(), r.peak_method.as_deref()), (Some("f32"), Some("test")));
            let t = k.median_ns().unwrap();
            assert!((r.achieved_tflops.unwrap() - k.flops / t / 1e3).abs() <= 1e-12 * r.achieved_tflops.unwrap());
            assert!((r.peak_share.unwrap() - r.achieved_tflops.unwrap() / 0.5).abs() < 1e-12);
        }
    }
}

/// The program cache's store runs beside the backend's load: its phase is marked so, and a
/// profile draws it from the load's start instead of after it.
#[test]
fn the_cache_store_runs_beside_the_load() {
    let dir = tmpdir("beside");
    let g = softmax_graph(Dim::Static(4));
    let c = compile(&g, Arc::new(InterpBackend::new()), opts(Some(dir.clone()))).unwrap();
    let phases: Vec<String> = c.events()[0].stats.phases.iter().map(|p| p.0.clone()).collect();
    let load = phases.iter().position(|p| p == "backend_load").expect("a load phase");
    assert_eq!(phases[load + 1], "program_cache_store (beside backend_load)", "{phases:?}");
    let x = HostTensor::random(DType::F32, vec![4, 37], 5, -1.0, 1.0);
    let b = HostTensor::random(DType::F32, vec![37], 6, -1.0, 1.0);
    let device = crate::profile::DeviceInfo::new("host", "interp", crate::profile::Ceilings::default());
    let p = c.profile(&[x, b], 1, "beside", device).unwrap();
    let span = |name: &str| p.compile_spans.iter().find(|s| s.name == name).unwrap_or_else(|| panic!("{name}"));
    let (l, st) = (span("backend_load"), span("program_cache_store (beside backend_load)"));
    assert_eq!(st.start_ns, l.start_ns);
    if let Some(next) = p.compile_spans.iter().skip_while(|s| s.name != st.name).nth(1) {
        assert!((next.start_ns - (l.start_ns + l.dur_ns)).abs() < 1.0, "{next:?} starts at the load's end");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A backend that compiles nothing: every load fails.
struct RefusingBackend(InterpBackend);

impl Backend for RefusingBackend {
    fn name(&self) -> &str {
        "refusing"
    }
    fn device_name(&self) -> String {
        "none".into()
    }
    fn caps(&self) -> &crate::kernel::Capabilities {
        self.0.caps()
    }
    fn load(&self, _: &Program, _: Mode) -> Result<Box<dyn Executable>, BackendError> {
        Err(BackendError::Device("out of device memory (test)".into()))
    }
}

/// The store beside a load that fails keeps nothing: the next compile does not hit a program
/// that was never loaded.
#[test]
fn a_program_whose_load_fails_is_not_kept() {
    let dir = tmpdir("refused_store");
    let g = softmax_graph(Dim::Static(4));
    assert!(compile(&g, Arc::new(RefusingBackend(InterpBackend::new())), opts(Some(dir.clone()))).is_err());
    let kept = std::fs::read_dir(dir.join("programs")).map(|d| d.count()).unwrap_or(0);
    assert_eq!(kept, 0, "no program entry after a failed load");
    let _ = std::fs::remove_dir_all(&dir);
}
