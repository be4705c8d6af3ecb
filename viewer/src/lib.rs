//! sinter's desktop viewer for artifact folders (`sinter view DIR`): a summary of what dominates,
//! a timeline of host and device tracks, the fusion diagram, the roofline plot and the pass list.
//!
//! The logic (loading, timeline culling and level of detail, graph layout, roofline geometry,
//! pass diffs) lives in plain modules that are unit-tested without a window; [`app::ViewerApp`]
//! draws it with egui, and [`run_viewer`] opens it in an eframe window.
#![warn(missing_docs)]

pub mod app;
pub mod artifacts;
pub mod demo;
pub mod folder;
pub mod fusion;
pub mod passes;
pub mod roofline;
pub mod timeline;

pub use app::ViewerApp;
pub use artifacts::Artifacts;
pub use demo::demo_artifacts;
pub use sinter_core::profile;

use std::path::{Path, PathBuf};

/// Errors from loading an artifact folder or opening the window.
#[derive(Debug, thiserror::Error)]
pub enum ViewerError {
    /// The folder does not exist or is not a folder.
    #[error("{}: no such artifact folder (create one with `sinter profile --out DIR`)", .0.display())]
    NoFolder(PathBuf),
    /// The profile could not be read (missing, malformed, unknown schema version).
    #[error(transparent)]
    Profile(#[from] sinter_core::profile::ProfileError),
    /// A file could not be read or written.
    #[error("{}: {error}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error (in the message, not a `source()`: reporters print it once).
        error: std::io::Error,
    },
    /// A file of the artifact folder was refused (outside the folder, not a regular file, too
    /// large: see [`folder`]) or could not be read.
    #[error("{0}")]
    Refused(String),
    /// The demo folder could not be generated.
    #[error("demo artifacts: {0}")]
    Demo(String),
    /// The window could not be opened (no display, no graphics driver).
    #[error(
        "could not open the viewer window: {0}\n(no display? the viewer needs a desktop session, X11 or Wayland; the artifact folder can also be opened in Perfetto via its trace.json)"
    )]
    Window(String),
}

/// Loads the artifact folder `dir` and shows it in a desktop window until the window closes.
pub fn run_viewer(dir: impl AsRef<Path>) -> Result<(), ViewerError> {
    show(Artifacts::load(dir.as_ref())?)
}

/// Shows loaded artifacts in a desktop window until the window closes. Fails with
/// [`ViewerError::Window`] (never a panic) when no window can be opened, e.g. without a display.
pub fn show(artifacts: Artifacts) -> Result<(), ViewerError> {
    let title = format!("sinter view: {}", artifacts.dir.display());
    if cfg!(target_os = "linux")
        && std::env::var_os("DISPLAY").is_none_or(|d| d.is_empty())
        && std::env::var_os("WAYLAND_DISPLAY").is_none_or(|d| d.is_empty())
    {
        return Err(ViewerError::Window("neither DISPLAY nor WAYLAND_DISPLAY is set".into()));
    }
    let options = eframe::NativeOptions {
        viewport: egui::ViewportBuilder::default().with_inner_size([1400.0, 900.0]).with_title(title.clone()),
        ..Default::default()
    };
    let app = ViewerApp::new(artifacts);
    // eframe can panic deep inside winit or wgpu when the display or driver is unusable; report
    // that as an error value too.
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
        eframe::run_native(&title, options, Box::new(move |_cc| Ok(Box::new(app))))
    }));
    match result {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(ViewerError::Window(e.to_string())),
        Err(panic) => {
            let msg = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "the windowing system failed".into());
            Err(ViewerError::Window(msg))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_display_is_an_error_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        demo_artifacts(dir.path()).unwrap();
        // Only meaningful where no display exists (CI, this machine); elsewhere it would open a
        // window, so skip.
        if std::env::var_os("DISPLAY").is_some() || std::env::var_os("WAYLAND_DISPLAY").is_some() {
            return;
        }
        let err = run_viewer(dir.path()).unwrap_err();
        assert!(matches!(err, ViewerError::Window(_)));
        assert!(err.to_string().contains("no display?"), "{err}");
    }

    #[test]
    fn missing_folder_is_reported_before_any_window() {
        let err = run_viewer("/nonexistent/sinter/run").unwrap_err();
        assert!(matches!(err, ViewerError::NoFolder(_)), "{err}");
    }
}
