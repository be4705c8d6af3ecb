//! Renders every panel of the demo folder to PNG files (headless, through egui_kittest's wgpu
//! renderer), for the README: `cargo run -p sinter-viewer --example screenshots -- docs/img`.
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
    let dir = tmp.path().join("run1");
    demo::demo_artifacts(&dir)?;
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
            h.state_mut().timeline.view = Some(View::fit(0.0, 300_000.0, width));
            h.run();
        }
        let image = h.render()?;
        let path = out.join(format!("viewer-{name}.png"));
        image.save(&path)?;
        println!("{}", path.display());
    }
    Ok(())
}
