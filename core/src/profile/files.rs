//! The artifact folder on disk: file names, [`ProfileError`], JSON reading with the schema-version
//! check, atomic writes (temporary file, then rename), reading and writing profiles and
//! `fusion.json`, and the text artifacts (`graph.txt`, `kernels/...`, `passes/...`).

use super::{FusionDecision, FusionFile, Mode, Profile, SCHEMA_VERSION, SINTER_VERSION, chrome_trace};
use serde::Serialize;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// File name of a compiled run's profile.
pub const PROFILE_FILE: &str = "profile.json";
/// File name of an eager run's profile.
pub const EAGER_PROFILE_FILE: &str = "profile_eager.json";
/// File name of a compiled run's Chrome trace.
pub const TRACE_FILE: &str = "trace.json";
/// File name of an eager run's Chrome trace.
pub const EAGER_TRACE_FILE: &str = "trace_eager.json";
/// File name of the fusion decisions.
pub const FUSION_FILE: &str = "fusion.json";

/// Errors reading or writing profiles, artifact folders and calibration files.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    /// A file could not be read or written.
    #[error("{}: {error}", path.display())]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The I/O error (in the message, not a `source()`: reporters print it once).
        error: std::io::Error,
    },
    /// A file is not valid JSON of the expected shape.
    #[error("{}: not a valid sinter file: {msg}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        msg: String,
    },
    /// The folder holds no profile.
    #[error(
        "no sinter profile in {}: expected {PROFILE_FILE} or {EAGER_PROFILE_FILE} (create one with `sinter profile --out DIR`)",
        dir.display()
    )]
    NotFound {
        /// The folder.
        dir: PathBuf,
    },
    /// The file has no `schema_version`.
    #[error("{}: no `schema_version` field; this is not a sinter artifact (or one from before versioning)", path.display())]
    MissingSchema {
        /// The file.
        path: PathBuf,
    },
    /// The file was written with a schema version this sinter cannot read.
    #[error(
        "{}: schema version {found} (written by sinter {writer}), but this sinter {SINTER_VERSION} reads only schema version {SCHEMA_VERSION}; open it with the sinter that wrote it, or re-run `sinter profile` to regenerate the folder",
        path.display()
    )]
    UnsupportedSchema {
        /// The file.
        path: PathBuf,
        /// The version found.
        found: u64,
        /// The writer's `sinter_version`, or `unknown`.
        writer: String,
    },
    /// The profile is inconsistent (e.g. a launch names a kernel that does not exist).
    #[error("invalid profile: {0}")]
    Invalid(String),
    /// No calibration cache folder could be determined.
    #[error("no cache folder: set SINTER_CACHE_DIR or HOME")]
    NoCacheDir,
}

pub(super) fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> ProfileError + '_ {
    move |error| ProfileError::Io { path: path.to_path_buf(), error }
}

pub(super) fn parse_json(path: &Path, text: &str) -> Result<Value, ProfileError> {
    serde_json::from_str(text).map_err(|e| ProfileError::Parse { path: path.to_path_buf(), msg: e.to_string() })
}

pub(super) fn check_schema(path: &Path, value: &Value) -> Result<(), ProfileError> {
    let found = match value.get("schema_version") {
        None => return Err(ProfileError::MissingSchema { path: path.to_path_buf() }),
        Some(v) => v.as_u64().ok_or_else(|| ProfileError::Parse {
            path: path.to_path_buf(),
            msg: format!("`schema_version` is {v}, not a non-negative integer"),
        })?,
    };
    if found != SCHEMA_VERSION as u64 {
        let writer = value.get("sinter_version").and_then(Value::as_str).unwrap_or("unknown").to_string();
        return Err(ProfileError::UnsupportedSchema { path: path.to_path_buf(), found, writer });
    }
    Ok(())
}

pub(super) fn write_json<T: Serialize>(path: &Path, value: &T, pretty: bool) -> Result<(), ProfileError> {
    let text = if pretty { serde_json::to_string_pretty(value) } else { serde_json::to_string(value) }
        .map_err(|e| ProfileError::Parse { path: path.to_path_buf(), msg: e.to_string() })?;
    // Write then rename, so a reader never sees half a file.
    let tmp = crate::compile::unique_tmp(path);
    std::fs::write(&tmp, text).map_err(io_err(&tmp))?;
    std::fs::rename(&tmp, path).map_err(io_err(path))
}

impl Profile {
    /// Writes the profile into the artifact folder `dir` (created if needed): `profile.json` and
    /// `trace.json` for a compiled run, `profile_eager.json` and `trace_eager.json` for an eager
    /// one. Other files in `dir` (the compile driver's debug artifacts) are kept.
    pub fn write(&self, dir: impl AsRef<Path>) -> Result<(), ProfileError> {
        let dir = dir.as_ref();
        self.validate()?;
        std::fs::create_dir_all(dir).map_err(io_err(dir))?;
        write_json(&dir.join(self.mode.profile_file()), self, true)?;
        write_json(&dir.join(self.mode.trace_file()), &chrome_trace(self), false)?;
        Ok(())
    }

    /// Reads the compiled profile of a folder, or its eager one when only that exists. Unknown
    /// schema versions give [`ProfileError::UnsupportedSchema`].
    pub fn read(dir: impl AsRef<Path>) -> Result<Profile, ProfileError> {
        let dir = dir.as_ref();
        if !dir.is_dir() {
            return Err(ProfileError::Io {
                path: dir.to_path_buf(),
                error: std::io::Error::new(std::io::ErrorKind::NotFound, "no such folder"),
            });
        }
        for mode in [Mode::Compiled, Mode::Eager] {
            if let Some(p) = Profile::read_mode(dir, mode)? {
                return Ok(p);
            }
        }
        Err(ProfileError::NotFound { dir: dir.to_path_buf() })
    }

    /// Reads the profile of one mode from a folder; `Ok(None)` when that file is absent.
    pub fn read_mode(dir: impl AsRef<Path>, mode: Mode) -> Result<Option<Profile>, ProfileError> {
        let path = dir.as_ref().join(mode.profile_file());
        match std::fs::read_to_string(&path) {
            Ok(text) => Profile::from_json(&path, &text).map(Some),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io_err(&path)(e)),
        }
    }

    /// Parses a profile's JSON text (`path` is used in messages), checking the schema version
    /// first and the contents after.
    pub fn from_json(path: &Path, text: &str) -> Result<Profile, ProfileError> {
        let value = parse_json(path, text)?;
        check_schema(path, &value)?;
        let p: Profile = serde_json::from_value(value)
            .map_err(|e| ProfileError::Parse { path: path.to_path_buf(), msg: e.to_string() })?;
        p.validate()?;
        Ok(p)
    }
}

impl FusionFile {
    /// Reads `<dir>/fusion.json`; `Ok(None)` when absent. Accepts this versioned form and the
    /// compile driver's debug artifact (a bare array of [`crate::kernel::FusionDecision`], whose
    /// `origins` become the captured-graph `nodes`).
    pub fn read(dir: &Path) -> Result<Option<FusionFile>, ProfileError> {
        let path = dir.join(FUSION_FILE);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_err(&path)(e)),
        };
        FusionFile::from_json(&path, &text).map(Some)
    }

    /// Parses the text of a `fusion.json` (`path` is used in messages), in either form
    /// [`FusionFile::read`] accepts.
    pub fn from_json(path: &Path, text: &str) -> Result<FusionFile, ProfileError> {
        let path = path.to_path_buf();
        let value = parse_json(&path, text)?;
        if value.is_array() {
            let raw: Vec<crate::kernel::FusionDecision> =
                serde_json::from_value(value).map_err(|e| ProfileError::Parse { path, msg: e.to_string() })?;
            let decisions = raw.iter().map(FusionDecision::from).collect();
            return Ok(FusionFile { schema_version: SCHEMA_VERSION, decisions });
        }
        check_schema(&path, &value)?;
        serde_json::from_value(value).map_err(|e| ProfileError::Parse { path, msg: e.to_string() })
    }
}

/// The file name of the snapshot after pass number `index` (`passes/` is the folder):
/// `NN_<name>.txt`, with characters other than letters, digits, `_` and `-` replaced by `_`.
pub fn pass_file_name(index: u32, name: &str) -> String {
    let clean: String = name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).collect();
    format!("{index:02}_{clean}.txt")
}

/// Writes a text artifact (`graph.txt`, `kernels/k0.wgsl`, `passes/01_decompose.txt`, ...) at
/// `rel` inside the folder `dir`, creating folders, through a temporary file and a rename.
pub fn write_artifact(dir: impl AsRef<Path>, rel: &str, text: &str) -> Result<PathBuf, ProfileError> {
    let path = dir.as_ref().join(rel);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(io_err(parent))?;
    }
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).map_err(io_err(&tmp))?;
    std::fs::rename(&tmp, &path).map_err(io_err(&path))?;
    Ok(path)
}
