//! Issue 14: `sinter view DIR` must read only regular files inside DIR, under the size limit, and
//! say so when it refuses one: a `profile.json` naming `/etc/passwd` or `/dev/zero` as a kernel's
//! source, a kernel named `../../../etc/passwd`, or a FIFO among the pass snapshots.

use sinter_core::profile::{DeviceInfo, KernelProfile, Mode, Profile};
use sinter_viewer::Artifacts;
use std::path::Path;

fn folder_with(kernels: Vec<KernelProfile>) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let mut p = Profile::new("w", "wgsl", Mode::Compiled, DeviceInfo::default());
    p.kernels = kernels;
    p.write(dir.path()).unwrap();
    dir
}

#[test]
fn kernel_sources_outside_the_folder_are_refused() {
    let kernels = vec![
        KernelProfile::new("k_abs").source_path("/etc/passwd"),
        KernelProfile::new("k_zero").source_path("/dev/zero"),
        KernelProfile::new("../../../../../../../../etc/passwd"),
        KernelProfile::new("k_dots").source_path("../../../../../../../../etc/passwd"),
    ];
    let dir = folder_with(kernels);
    let a = match Artifacts::load(dir.path()) {
        Ok(a) => a,
        Err(e) => panic!("a profile naming bad paths still loads: {e}"),
    };
    for k in &a.main.profile.kernels {
        let e = a.kernel_source(k).unwrap_err();
        assert!(e.contains("refused") && !e.contains("root:"), "{}: {e}", k.name);
    }
}

#[cfg(unix)]
#[test]
fn fifos_devices_and_symlinks_out_become_notes() {
    let dir = folder_with(vec![KernelProfile::new("k0")]);
    let d = dir.path();
    std::fs::create_dir_all(d.join("passes")).unwrap();
    std::fs::write(d.join("passes/01_decompose.txt"), "graph").unwrap();
    let fifo = d.join("passes/02_cse.txt");
    if !std::process::Command::new("mkfifo").arg(&fifo).status().is_ok_and(|s| s.success()) {
        eprintln!("SKIPPED: no mkfifo");
        return;
    }
    std::os::unix::fs::symlink("/dev/zero", d.join("graph.txt")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", d.join("ir_pre_fusion.txt")).unwrap();
    // Would block forever (FIFO) or grow without bound (/dev/zero) on the old loader.
    let (tx, rx) = std::sync::mpsc::channel();
    let path = d.to_path_buf();
    std::thread::spawn(move || {
        let _ = tx.send(Artifacts::load(&path).map_err(|e| e.to_string()));
    });
    let a = rx.recv_timeout(std::time::Duration::from_secs(20)).expect("loading blocked").unwrap();
    assert_eq!(a.passes.len(), 1);
    assert!(a.graph_txt.is_none() && a.ir_pre_fusion.is_none());
    let notes = a.warnings.join("\n");
    for what in ["02_cse.txt", "graph.txt", "ir_pre_fusion.txt"] {
        assert!(notes.contains(what), "no note for {what}: {notes}");
    }
    assert!(notes.contains("not a regular file") && notes.contains("outside"), "{notes}");
    // profile.json itself is read through the same checks.
    let other = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink("/dev/zero", other.path().join("profile.json")).unwrap();
    let e = Artifacts::load(other.path()).unwrap_err().to_string();
    assert!(e.contains("refused") && e.contains(&Path::new("profile.json").display().to_string()), "{e}");
}
