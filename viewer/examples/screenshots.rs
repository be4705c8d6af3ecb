//! Renders every panel of an artifact folder (default: the synthetic demo folder) to PNG files
//! (headless, through egui_kittest's wgpu renderer), for the README:
//! `cargo run -p sinter-viewer --example screenshots -- docs/img [ARTIFACT_DIR]`.
//! Optionally shrink them afterwards with `pngquant`.

use egui_kittest::Harness;
use sinter_viewer::app::Tab;
use sinter_viewer::timeline::View;
use sinter_viewer::{Artifacts, ViewerApp, demo};
use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out = PathBuf::from(std::env::args().nth(1).ok_or("usage: screenshots OUT_DIR")?);
    std::fs::create_dir_all(&out)?;
    let tmp = tempfile::tempdir()?;
    let dir = match std::env::args().nth(2) {
        Some(d) => PathBuf::from(d),
        None => {
            let d = tmp.path().join("run1");
            demo::demo_artifacts(&d)?;
            d
        }
    };
    let app = ViewerApp::new(Artifacts::load(&dir)?);
    let mut h = Harness::builder().with_size([1400.0, 820.0]).build_ui_state(|ui, app: &mut ViewerApp| app.ui(ui), app);
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
        if tab == Tab::Timeline {
            // Zoom to the first iteration so kernel names and launch gaps show.
            let width = h.state().timeline.last_width;
            let span = std::env::var("SCREENSHOT_TIMELINE_NS").ok().and_then(|v| v.parse().ok()).unwrap_or(300_000.0);
            h.state_mut().timeline.view = Some(View::fit(0.0, span, width));
            h.run();
        }
        let image = h.render()?;
        let path = out.join(format!("viewer-{name}.png"));
        image.save(&path)?;
        println!("{}", path.display());
    }
    Ok(())
}
