//! One compile serving several batch sizes (issue 13): counts of compiles asserted, every run
//! checked against the CPU reference.

use super::*;
use crate::kernel::dynamic::Site;
use crate::kernel::interp::InterpBackend;
use crate::prelude::*;

fn opts(cache: Option<PathBuf>) -> CompileOptions {
    CompileOptions { cache_dir: cache, debug_dir: None, ..CompileOptions::default() }
}

/// Linear + bias + GELU, layer norm, softmax: matmul, pointwise and reduce kernels.
fn mlp() -> Graph {
    let g = Graph::new();
    let x = g.input("x", DType::F32, vec![Dim::sym("batch"), Dim::Static(12)]);
    let w = g.constant(HostTensor::random(DType::F32, vec![12, 24], 3, -0.5, 0.5));
    let b = g.constant(HostTensor::random(DType::F32, vec![24], 4, -0.5, 0.5));
    let h = (x.matmul(&w) + &b).gelu();
    let m = h.mean(&[-1], true);
    g.output(&(&h - &m).softmax(-1));
    g.output(&h.sum(&[-1], false));
    g
}

fn check(c: &CompiledGraph, g: &Graph, batch: usize, seed: u64) {
    let x = HostTensor::random(DType::F32, vec![batch, 12], seed, -2.0, 2.0);
    let got = c.run(std::slice::from_ref(&x)).unwrap();
    let want = crate::cpu::run(g, &[x]).unwrap();
    assert_eq!(got.len(), want.len());
    for (a, b) in got.iter().zip(&want) {
        assert_eq!(a.shape, b.shape, "batch {batch}");
        assert!(a.tolerance_ratio(b, 1e-5, 1e-6) <= 1.0, "batch {batch}");
    }
}

#[test]
fn one_compile_serves_batch_sizes_up_to_its_bound() {
    let g = mlp();
    let c = compile(&g, Arc::new(InterpBackend::new()), opts(None)).unwrap();
    for (k, batch) in [8usize, 1, 3, 8, 5, 1].into_iter().enumerate() {
        check(&c, &g, batch, k as u64);
    }
    let ev = c.events();
    assert_eq!(ev.len(), 1, "one compile for batch 8, 1, 3, 5: {ev:?}");
    assert_eq!(ev[0].signature.0[0].1, vec![8, 12]);
    assert!(ev[0].serves.as_deref().is_some_and(|s| s.starts_with("batch <= 8")), "{:?}", ev[0].serves);
    let ext = c.extents().unwrap();
    assert_eq!((ext.symbol.as_str(), ext.bound), ("batch", 8));
    assert!(ext.sites.iter().any(|s| matches!(s.site, Site::Rows(_))), "{ext:?}");
    // Above the bound: one recompile, at the next power of two, with the reason.
    check(&c, &g, 9, 9);
    let ev = c.events();
    assert_eq!(ev.len(), 2);
    assert!(ev[1].reason.contains("batch=9 is outside 1..=8"), "{}", ev[1].reason);
    assert_eq!(ev[1].signature.0[0].1, vec![16, 12]);
    // Every value up to 16 now runs without compiling again, old ones included.
    for batch in [16usize, 2, 7] {
        check(&c, &g, batch, 20 + batch as u64);
    }
    assert_eq!(c.events().len(), 2);
}

#[test]
fn the_first_value_sets_a_bound_of_at_least_the_minimum() {
    let g = mlp();
    let c = compile(&g, Arc::new(InterpBackend::new()), CompileOptions { dynamic: Some(2), ..opts(None) }).unwrap();
    check(&c, &g, 1, 1);
    assert_eq!(c.extents().unwrap().bound, 4, "the probe needs bound / 2 >= 2");
    check(&c, &g, 3, 2);
    assert_eq!(c.events().len(), 1);
}

#[test]
fn run_device_serves_smaller_batches_too() {
    let g = mlp();
    let c = compile(&g, Arc::new(InterpBackend::new()), opts(None)).unwrap();
    for batch in [6usize, 2] {
        let x = HostTensor::random(DType::F32, vec![batch, 12], 40 + batch as u64, -2.0, 2.0);
        let y = c.run_device(&[c.upload(&x).unwrap()]).unwrap();
        let want = crate::cpu::run(&g, &[x]).unwrap();
        assert_eq!(y[0].shape(), [batch, 24]);
        assert!(y[0].to_host().unwrap().tolerance_ratio(&want[0], 1e-5, 1e-6) <= 1.0);
    }
    assert_eq!(c.events().len(), 1);
}

#[test]
fn a_graph_reducing_over_the_batch_recompiles_per_value_naming_the_kernel() {
    let g = Graph::new();
    let x = g.input("x", DType::F32, vec![Dim::sym("batch"), Dim::Static(6)]);
    g.output(&x.sum(&[0], false));
    let c = compile(&g, Arc::new(InterpBackend::new()), opts(None)).unwrap();
    for batch in [3usize, 5, 3] {
        let x = HostTensor::random(DType::F32, vec![batch, 6], batch as u64, -1.0, 1.0);
        let want = crate::cpu::run(&g, std::slice::from_ref(&x)).unwrap();
        assert!(c.run(&[x]).unwrap()[0].tolerance_ratio(&want[0], 1e-5, 1e-6) <= 1.0);
    }
    let ev = c.events();
    assert_eq!(ev.len(), 2, "{ev:?}");
    assert!(ev.iter().all(|e| e.serves.is_none()));
    assert!(ev[1].reason.contains("not served without recompiling: kernel k"), "{}", ev[1].reason);
}

#[test]
fn an_inner_sequence_symbol_recompiles_while_the_batch_is_served() {
    let g = Graph::new();
    let x = g.input("x", DType::F32, vec![Dim::sym("batch"), Dim::sym("seq"), Dim::Static(8)]);
    g.output(&x.softmax(1).exp());
    let c = compile(&g, Arc::new(InterpBackend::new()), opts(None)).unwrap();
    let run = |b: usize, s: usize| {
        let x = HostTensor::random(DType::F32, vec![b, s, 8], (b * 31 + s) as u64, -1.0, 1.0);
        let want = crate::cpu::run(&g, std::slice::from_ref(&x)).unwrap();
        assert!(c.run(&[x]).unwrap()[0].tolerance_ratio(&want[0], 1e-5, 1e-6) <= 1.0, "{b}x{s}");
    };
    run(4, 5);
    run(2, 5);
    run(7, 5);
    assert_eq!(c.events().len(), 1, "the batch is served");
    run(2, 6);
    let ev = c.events();
    assert_eq!(ev.len(), 2, "a new sequence length recompiles");
    assert!(ev[1].reason.contains("shape"), "{}", ev[1].reason);
    assert!(ev[1].serves.is_some(), "and the new program serves the batch again");
    run(8, 6);
    assert_eq!(c.events().len(), 2);
}

#[test]
fn dynamic_off_or_a_symbol_also_inside_recompiles_per_value() {
    let g = mlp();
    let c = compile(&g, Arc::new(InterpBackend::new()), CompileOptions { dynamic: None, ..opts(None) }).unwrap();
    check(&c, &g, 3, 1);
    check(&c, &g, 2, 2);
    let ev = c.events();
    assert_eq!(ev.len(), 2);
    assert!(ev[1].reason.contains("dynamic extents are off"), "{}", ev[1].reason);

    let g = Graph::new();
    let x = g.input("x", DType::F32, vec![Dim::sym("n"), Dim::sym("n")]);
    g.output(&x.exp());
    let c = compile(&g, Arc::new(InterpBackend::new()), opts(None)).unwrap();
    for n in [2usize, 3] {
        c.run(&[HostTensor::random(DType::F32, vec![n, n], 1, -1.0, 1.0)]).unwrap();
    }
    let ev = c.events();
    assert_eq!(ev.len(), 2);
    assert!(ev[1].reason.contains("symbol n is not only the outermost dimension"), "{}", ev[1].reason);

    // Inside an expression of another input's dimension.
    let g = Graph::new();
    let x = g.input("x", DType::F32, vec![Dim::sym("b"), Dim::Static(3)]);
    let y = g.input("y", DType::F32, vec![Dim::sym("2*b"), Dim::Static(3)]);
    g.output(&x.exp());
    g.output(&y.exp());
    let c = compile(&g, Arc::new(InterpBackend::new()), opts(None)).unwrap();
    c.run(&[
        HostTensor::random(DType::F32, vec![2, 3], 1, -1.0, 1.0),
        HostTensor::random(DType::F32, vec![4, 3], 2, -1.0, 1.0),
    ])
    .unwrap();
    assert_eq!(c.dynamic_refusal().as_deref(), Some("symbol b is not only the outermost dimension of the inputs"));
}

#[test]
fn the_table_is_cached_with_the_program() {
    let dir = std::env::temp_dir().join(format!("sinter-dynamic-cache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let g = mlp();
    let first = compile(&g, Arc::new(InterpBackend::new()), opts(Some(dir.clone()))).unwrap();
    check(&first, &g, 5, 1);
    let second = compile(&g, Arc::new(InterpBackend::new()), opts(Some(dir.clone()))).unwrap();
    check(&second, &g, 3, 2);
    check(&second, &g, 7, 3);
    let ev = second.events();
    assert_eq!(ev.len(), 1);
    assert!(ev[0].stats.cache_hit, "the second process skips both compiles");
    assert_eq!(first.extents(), second.extents());
    let _ = std::fs::remove_dir_all(&dir);
}

/// A refused dynamic compile is recorded in the cache: a later process goes straight to the
/// static program, without the attempt's lowerings, and reports the same reason.
#[test]
fn a_refusal_is_cached_with_its_reason() {
    let dir = std::env::temp_dir().join(format!("sinter-dynamic-refusal-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let g = Graph::new();
    let x = g.input("x", DType::F32, vec![Dim::sym("batch"), Dim::Static(6)]);
    g.output(&x.sum(&[0], false));
    let run = |c: &CompiledGraph| {
        let x = HostTensor::random(DType::F32, vec![5, 6], 1, -1.0, 1.0);
        let want = crate::cpu::run(&g, std::slice::from_ref(&x)).unwrap();
        assert!(c.run(&[x]).unwrap()[0].tolerance_ratio(&want[0], 1e-5, 1e-6) <= 1.0);
    };
    let first = compile(&g, Arc::new(InterpBackend::new()), opts(Some(dir.clone()))).unwrap();
    run(&first);
    let why = first.dynamic_refusal().expect("a reduction over the batch refuses");
    let recorded: Vec<_> = std::fs::read_dir(dir.join("programs"))
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "refused"))
        .collect();
    assert_eq!(recorded.len(), 1, "{recorded:?}");
    assert_eq!(std::fs::read_to_string(&recorded[0]).unwrap(), why);
    let second = compile(&g, Arc::new(InterpBackend::new()), opts(Some(dir.clone()))).unwrap();
    run(&second);
    assert_eq!(second.dynamic_refusal(), Some(why));
    let ev = second.events();
    assert_eq!(ev.len(), 1);
    assert!(ev[0].stats.cache_hit, "the static program comes from the cache");
    // The first process lowered and refused; the second read the refusal.
    let phase = |c: &CompiledGraph, name: &str| c.events()[0].stats.phases.iter().any(|(p, _)| p == name);
    assert!(phase(&first, "dynamic attempt (refused)") && !phase(&first, "dynamic attempt (refusal cached)"));
    assert!(phase(&second, "dynamic attempt (refusal cached)") && !phase(&second, "dynamic attempt (refused)"));
    let _ = std::fs::remove_dir_all(&dir);
}
