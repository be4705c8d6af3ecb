//! Reading the files of an artifact folder without trusting it. An artifact folder (and the
//! `profile.json` in it) may come from anyone, so the viewer reads only:
//!
//! * paths inside the folder: a path is joined to the folder, canonicalized (symlinks resolved)
//!   and must still lie under the folder's canonical path; absolute paths and `..` that leave it,
//!   and symlinks that point out of it, are refused;
//! * regular files: FIFOs, sockets and devices (`/dev/zero`) are refused from their metadata,
//!   before anything is opened, so nothing blocks or streams forever;
//! * at most [`MAX_FILE_BYTES`] (64 MiB) per file: larger files are refused, and reading stops at
//!   the limit even when the size on disk was misreported.
//!
//! Every refusal is an error saying which path and why; the viewer shows it as a note.

use std::io::Read;
use std::path::{Component, Path, PathBuf};

/// The largest file the viewer reads from an artifact folder, bytes (64 MiB).
pub const MAX_FILE_BYTES: u64 = 64 << 20;

/// An artifact folder, by its canonical path.
#[derive(Clone, Debug)]
pub struct Folder {
    root: PathBuf,
}

impl Folder {
    /// The folder `dir` (canonicalized); fails when it does not exist.
    pub fn new(dir: &Path) -> std::io::Result<Folder> {
        Ok(Folder { root: dir.canonicalize()? })
    }

    /// The folder's canonical path.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The canonical path of `rel` inside the folder: `Ok(None)` when it does not exist, `Err`
    /// (naming it) when it is absolute or resolves outside the folder.
    pub fn resolve(&self, rel: &Path) -> Result<Option<PathBuf>, String> {
        if rel.is_absolute() || rel.components().any(|c| matches!(c, Component::Prefix(_) | Component::RootDir)) {
            return Err(format!("{}: refused: an absolute path, outside the artifact folder", rel.display()));
        }
        let joined = self.root.join(rel);
        let real = match joined.canonicalize() {
            Ok(r) => r,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                // A name that climbs out is refused even when its target does not exist.
                if rel.components().any(|c| c == Component::ParentDir) {
                    return Err(format!("{}: refused: `..` leaves the artifact folder", rel.display()));
                }
                return Ok(None);
            }
            Err(e) => return Err(format!("{}: {e}", joined.display())),
        };
        if !real.starts_with(&self.root) {
            return Err(format!(
                "{}: refused: resolves to {}, outside the artifact folder {}",
                rel.display(),
                real.display(),
                self.root.display()
            ));
        }
        Ok(Some(real))
    }

    /// Reads `rel` as text: `Ok(None)` when it does not exist; `Err` naming the file when it is
    /// refused (outside the folder, not a regular file, over [`MAX_FILE_BYTES`]) or unreadable.
    pub fn read_to_string(&self, rel: &Path) -> Result<Option<String>, String> {
        let Some(path) = self.resolve(rel)? else { return Ok(None) };
        let meta = std::fs::metadata(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        if !meta.is_file() {
            return Err(format!("{}: refused: not a regular file", path.display()));
        }
        if meta.len() > MAX_FILE_BYTES {
            return Err(format!(
                "{}: refused: {} bytes is over the viewer's limit of {MAX_FILE_BYTES} bytes per file",
                path.display(),
                meta.len()
            ));
        }
        let file = std::fs::File::open(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let mut bytes = Vec::with_capacity(meta.len() as usize);
        file.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes).map_err(|e| format!("{}: {e}", path.display()))?;
        if bytes.len() as u64 > MAX_FILE_BYTES {
            return Err(format!("{}: refused: grew over the limit of {MAX_FILE_BYTES} bytes", path.display()));
        }
        String::from_utf8(bytes).map(Some).map_err(|_| format!("{}: not UTF-8 text", path.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_regular_files_inside_the_folder_are_read() {
        let outer = tempfile::tempdir().unwrap();
        let dir = outer.path().join("run");
        std::fs::create_dir_all(dir.join("kernels")).unwrap();
        std::fs::write(dir.join("kernels/k0.wgsl"), "fn main() {}").unwrap();
        std::fs::write(outer.path().join("secret.txt"), "secret").unwrap();
        let f = Folder::new(&dir).unwrap();
        assert_eq!(f.read_to_string(Path::new("kernels/k0.wgsl")).unwrap().as_deref(), Some("fn main() {}"));
        assert_eq!(f.read_to_string(Path::new("kernels/missing.wgsl")).unwrap(), None);
        for (rel, why) in [
            ("/etc/passwd", "absolute"),
            ("../secret.txt", "outside"),
            ("kernels/../../secret.txt", "outside"),
            ("kernels/../../../../../../etc/passwd.wgsl", "leaves"),
        ] {
            let e = f.read_to_string(Path::new(rel)).unwrap_err();
            assert!(e.contains("refused") && e.contains(why), "{rel}: {e}");
        }
        #[cfg(unix)]
        {
            // A symlink out of the folder, a device and a FIFO: refused without opening them.
            std::os::unix::fs::symlink(outer.path().join("secret.txt"), dir.join("link.txt")).unwrap();
            assert!(f.read_to_string(Path::new("link.txt")).unwrap_err().contains("outside"));
            std::os::unix::fs::symlink("/dev/zero", dir.join("zero.txt")).unwrap();
            assert!(f.read_to_string(Path::new("zero.txt")).unwrap_err().contains("refused"));
            let fifo = dir.join("fifo.txt");
            let made = std::process::Command::new("mkfifo").arg(&fifo).status().is_ok_and(|s| s.success());
            if made {
                assert!(f.read_to_string(Path::new("fifo.txt")).unwrap_err().contains("not a regular file"));
            }
            // A symlink that stays inside is fine.
            std::os::unix::fs::symlink(dir.join("kernels/k0.wgsl"), dir.join("inside.wgsl")).unwrap();
            assert!(f.read_to_string(Path::new("inside.wgsl")).unwrap().is_some());
        }
        // Over the size limit (a sparse file: no disk used).
        let big = std::fs::File::create(dir.join("big.txt")).unwrap();
        big.set_len(MAX_FILE_BYTES + 1).unwrap();
        assert!(f.read_to_string(Path::new("big.txt")).unwrap_err().contains("limit"));
    }
}
