//! UI tests: snapshots of every panel of the demo folder (rendered headless by egui_kittest on
//! wgpu; lavapipe on CI), interaction (tabs, kernel selection, timeline keys) and responsiveness on
//! a 100k-launch profile. Update the PNGs with `UPDATE_SNAPSHOTS=1 cargo test -p sinter-viewer`.

use egui_kittest::kittest::Queryable;
use egui_kittest::{Harness, SnapshotResults};
use sinter_core::profile::Mode;
use sinter_viewer::app::Tab;
use sinter_viewer::artifacts::{Artifacts, Run};
use sinter_viewer::{ViewerApp, demo};

/// The demo folder in a temp dir whose last component is `run1` (the header shows it).
fn demo_app() -> (tempfile::TempDir, ViewerApp) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run1");
    demo::demo_artifacts(&dir).unwrap();
    let app = ViewerApp::new(Artifacts::load(&dir).unwrap());
    (tmp, app)
}

fn harness(app: ViewerApp) -> Harness<'static, ViewerApp> {
    Harness::builder()
        .with_size([1024.0, 640.0])
        .with_pixels_per_point(0.75)
        .build_ui_state(|ui, app: &mut ViewerApp| app.ui(ui), app)
}

#[test]
fn panel_snapshots() {
    let (_tmp, app) = demo_app();
    let mut h = harness(app);
    let mut results = SnapshotResults::new();
    for (tab, name) in [
        (Tab::Overview, "overview"),
        (Tab::Timeline, "timeline"),
        (Tab::Fusion, "fusion"),
        (Tab::Roofline, "roofline"),
        (Tab::Passes, "passes"),
    ] {
        h.state_mut().tab = tab;
        if tab == Tab::Passes {
            h.state_mut().passes.selected = 2;
        }
        h.run();
        results.add(h.try_snapshot(name));
    }
    results.unwrap();
}

#[test]
fn tabs_and_kernel_selection() {
    let (_tmp, app) = demo_app();
    let mut h = harness(app);
    h.run();
    // The dominant kernel starts selected: the header and details name it.
    assert_eq!(h.state().selected, Some(3));
    // Clicking a kernel in the table selects it.
    h.get_by_label("k2_add_gelu").click();
    h.run();
    assert_eq!(h.state().selected, Some(2));
    // Tabs switch panels.
    h.get_by_label("Roofline").click();
    h.run();
    assert_eq!(h.state().tab, Tab::Roofline);
    h.get_by_label("Passes").click();
    h.run();
    assert_eq!(h.state().tab, Tab::Passes);
    h.key_press(egui::Key::ArrowDown);
    h.run();
    assert_eq!(h.state().passes.selected, 1);
}

#[test]
fn fusion_node_click_selects_its_kernel() {
    let (_tmp, app) = demo_app();
    let mut h = harness(app);
    h.state_mut().tab = Tab::Fusion;
    h.run();
    // The diagram sits in a zoomed `Scene`, whose accesskit bounds are untransformed: click by action.
    h.get_by_label("%7 add").click_accesskit();
    h.run();
    assert_eq!(h.state().selected, Some(2));
}

#[test]
fn timeline_keyboard_zoom_and_pan() {
    let (_tmp, app) = demo_app();
    let mut h = harness(app);
    h.state_mut().tab = Tab::Timeline;
    h.run();
    let v0 = h.state().timeline.view.unwrap();
    h.key_press(egui::Key::Plus);
    h.run();
    let v1 = h.state().timeline.view.unwrap();
    assert!(v1.ns_per_px < v0.ns_per_px);
    h.key_press(egui::Key::ArrowRight);
    h.run();
    assert!(h.state().timeline.view.unwrap().start_ns > v1.start_ns);
    h.key_press(egui::Key::Home);
    h.run();
    assert_eq!(h.state().timeline.view.unwrap(), v0);
}

#[test]
fn hundred_thousand_launches_stay_responsive() {
    // 20k iterations x 5 kernels = 100k launches and 100k kernel executions.
    let profile = demo::demo_profile(Mode::Compiled, 20_000);
    assert_eq!(profile.launches.len(), 100_000);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("big");
    profile.write(&dir).unwrap();
    let loaded = Artifacts::load(&dir).unwrap();
    assert_eq!(loaded.main.profile.launches.len(), 100_000);
    let mut app = ViewerApp::new(Artifacts { baseline: None, ..loaded });
    app.tab = Tab::Timeline;
    let mut h = Harness::builder().with_size([1024.0, 640.0]).build_ui_state(|ui, app: &mut ViewerApp| app.ui(ui), app);
    h.run();
    // Fully zoomed out, zoomed in, and panning: each frame stays fast.
    let mut worst = std::time::Duration::ZERO;
    for key in
        [egui::Key::End, egui::Key::Home, egui::Key::Plus, egui::Key::Plus, egui::Key::ArrowRight, egui::Key::Minus]
    {
        h.key_press(key);
        let t = std::time::Instant::now();
        h.step();
        worst = worst.max(t.elapsed());
    }
    eprintln!("worst frame with 100k launches: {worst:?}");
    assert!(worst.as_millis() < 250, "a frame took {worst:?}");
    let _ = Run::new(h.state().artifacts.main.profile.clone());
}
