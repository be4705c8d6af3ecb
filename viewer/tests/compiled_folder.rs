//! End to end with the real compile driver: compile a workload on the CPU interpreter backend with
//! debug artifacts on, record a profile from its program and timed runs through the
//! `ProfileBuilder` API, write it into the same folder, and load everything in the viewer.

use sinter_core::backend::KernelTiming;
use sinter_core::compile::{CompileOptions, compile};
use sinter_core::kernel::Program;
use sinter_core::kernel::interp::InterpBackend;
use sinter_core::profile::{DeviceInfo, KernelProfile, Mode, ProfileBuilder};
use sinter_core::workloads::{self, Scale};
use sinter_viewer::artifacts::{post_fusion_excerpt, pre_fusion_excerpt};
use sinter_viewer::{Artifacts, ViewerApp, app::Tab};
use std::sync::Arc;

#[test]
fn viewer_reads_what_the_compiler_writes() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run1");
    let w = workloads::get("layernorm_gelu_8192x4096_f32").unwrap();
    let g = w.build(Scale::Reduced).unwrap();
    let opts = CompileOptions { debug_dir: Some(dir.clone()), cache_dir: None, ..CompileOptions::default() };
    let mut b = ProfileBuilder::new(
        w.name,
        "interp",
        Mode::Compiled,
        DeviceInfo::new("cpu interpreter", "interp", Default::default()),
    );
    let compiled = b.time_span(sinter_core::profile::SpanCategory::Other, "compile", || {
        compile(&g, Arc::new(InterpBackend::new()), opts).unwrap()
    });
    let inputs = w.inputs(Scale::Reduced, 1);
    let (_, runs): (_, Vec<Vec<KernelTiming>>) = compiled.run_timed(&inputs, 3).unwrap();

    // The profile, from the program the compiler wrote and the timed runs.
    let program: Program = serde_json::from_str(&std::fs::read_to_string(dir.join("program.json")).unwrap()).unwrap();
    b.set_graph(&g);
    for k in &program.kernels {
        b.add_kernel(KernelProfile::from_kernel(k));
    }
    for d in &program.decisions {
        b.push_fusion(d.into());
    }
    for (it, run) in runs.iter().enumerate() {
        let submit = b.now_ns();
        b.push_batch(it as u32, submit, run.iter().map(|t| (t.kernel.as_str(), t.start_ns, t.dur_ns))).unwrap();
    }
    let profile = b.finish().unwrap();
    assert_eq!(profile.iterations, 3);
    profile.write(&dir).unwrap();

    let a = Artifacts::load(&dir).unwrap();
    assert!(a.warnings.is_empty(), "{:?}", a.warnings);
    let graph = a.graph.as_ref().unwrap();
    assert_eq!(graph.nodes.len(), g.nodes.len());
    assert!(!a.fusion.is_empty());
    assert!(a.passes.len() >= 3, "{:?}", a.passes.iter().map(|p| &p.name).collect::<Vec<_>>());
    let pre = a.ir_pre_fusion.as_deref().unwrap();
    let post = a.ir_post_fusion.as_deref().unwrap();
    for k in &a.main.profile.kernels {
        assert!(!k.nodes.is_empty() && !k.ops.is_empty(), "{k:?}");
        assert!(k.stats.is_some(), "{} untimed", k.name);
        assert!(post_fusion_excerpt(post, k).starts_with(&format!("kernel {}", k.name)), "{}", k.name);
        assert!(!pre_fusion_excerpt(pre, k).is_empty(), "{}", k.name);
        // Every captured node a kernel computes exists in the captured graph.
        assert!(k.nodes.iter().all(|n| graph.nodes.iter().any(|gn| gn.id == *n)));
    }
    // The user's ops all landed somewhere.
    let ops: Vec<&str> = a.main.profile.kernels.iter().flat_map(|k| k.ops.iter().map(String::as_str)).collect();
    assert!(ops.contains(&"layer_norm") && ops.contains(&"gelu"), "{ops:?}");

    // Every panel draws this real folder without trouble.
    let mut h = egui_kittest::Harness::builder()
        .with_size([1024.0, 640.0])
        .build_ui_state(|ui, app: &mut ViewerApp| app.ui(ui), ViewerApp::new(a));
    for tab in Tab::ALL {
        h.state_mut().tab = tab;
        h.run();
    }
}
