//! Loading an artifact folder: the profiles (compiled and eager), their analyses, the fusion
//! decisions, the captured graph, the IR dumps, the pass snapshots and (lazily) kernel sources.

use crate::ViewerError;
use crate::folder::Folder;
use sinter_core::partition::GraphBreak;
use sinter_core::profile::{Analysis, FusionDecision, FusionFile, GraphSummary, KernelProfile, Mode, Profile, analyze};
use std::path::{Path, PathBuf};

/// One recorded run (compiled or eager) and its roofline analysis.
#[derive(Clone, Debug)]
pub struct Run {
    /// The profile.
    pub profile: Profile,
    /// Its analysis.
    pub analysis: Analysis,
}

impl Run {
    /// Analyzes a profile.
    pub fn new(profile: Profile) -> Run {
        let analysis = analyze(&profile);
        Run { profile, analysis }
    }

    /// Device time per iteration (the kernel window), ns, when timed.
    pub fn per_iteration_ns(&self) -> Option<f64> {
        let it = self.profile.iterations.max(1) as f64;
        (self.analysis.device_window_ns > 0.0).then(|| self.analysis.device_window_ns / it)
    }

    /// Kernel indices by total device time, largest first.
    pub fn kernels_by_time(&self) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.profile.kernels.len()).collect();
        order.sort_by(|&a, &b| self.analysis.kernels[b].total_ns.total_cmp(&self.analysis.kernels[a].total_ns));
        order
    }
}

/// A pass snapshot `passes/NN_<name>.txt`.
#[derive(Clone, Debug, PartialEq)]
pub struct PassFile {
    /// The `NN` ordinal.
    pub index: u32,
    /// The pass name.
    pub name: String,
    /// The graph text after the pass.
    pub text: String,
}

/// Everything the viewer shows, loaded from one folder.
#[derive(Clone, Debug)]
pub struct Artifacts {
    /// The folder.
    pub dir: PathBuf,
    /// The run the panels show: the compiled one when recorded, else the eager one.
    pub main: Run,
    /// The eager run when `main` is the compiled one and both were recorded.
    pub baseline: Option<Run>,
    /// Fusion decisions (from the profile, else `fusion.json`).
    pub fusion: Vec<FusionDecision>,
    /// The captured graph (from the profile, else `graph.json`).
    pub graph: Option<GraphSummary>,
    /// `graph.txt`.
    pub graph_txt: Option<String>,
    /// `ir_pre_fusion.txt`.
    pub ir_pre_fusion: Option<String>,
    /// `ir_post_fusion.txt`.
    pub ir_post_fusion: Option<String>,
    /// Pass snapshots in order.
    pub passes: Vec<PassFile>,
    /// `graph_breaks.json`: nodes the backend could not run (they ran on the CPU reference).
    pub graph_breaks: Vec<GraphBreak>,
    /// Problems with optional files, and files refused (outside the folder, not regular files,
    /// over [`crate::folder::MAX_FILE_BYTES`]): shown, not fatal.
    pub warnings: Vec<String>,
    /// The folder every file is read through.
    pub folder: Folder,
}

/// Reads an optional file of the folder (see [`Folder::read_to_string`]); a refusal or a read
/// error becomes a warning.
fn read_optional(folder: &Folder, rel: &str, warnings: &mut Vec<String>) -> Option<String> {
    match folder.read_to_string(Path::new(rel)) {
        Ok(t) => t,
        Err(e) => {
            warnings.push(e);
            None
        }
    }
}

/// Parses `graph_breaks.json` (a list of [`GraphBreak`]s).
pub fn parse_graph_breaks(text: &str) -> Result<Vec<GraphBreak>, String> {
    serde_json::from_str(text).map_err(|e| format!("not a list of graph breaks: {e}"))
}

/// Parses `NN_<name>.txt` into `(NN, name)`.
pub fn parse_pass_file_name(file: &str) -> Option<(u32, String)> {
    let stem = file.strip_suffix(".txt")?;
    let (num, name) = stem.split_once('_')?;
    let index = num.parse().ok()?;
    (!name.is_empty()).then(|| (index, name.to_string()))
}

impl Artifacts {
    /// Loads a folder. Fails when it does not exist, holds no profile, or a profile has an
    /// unknown schema version; unreadable optional files become [`Artifacts::warnings`].
    pub fn load(dir: &Path) -> Result<Artifacts, ViewerError> {
        // `sinter view run1/profile.json` means the folder.
        let dir = match dir.file_name().and_then(|n| n.to_str()) {
            Some(n) if dir.is_file() && n.ends_with(".json") => dir.parent().unwrap_or(dir),
            _ => dir,
        };
        if !dir.is_dir() {
            return Err(ViewerError::NoFolder(dir.to_path_buf()));
        }
        let folder = Folder::new(dir).map_err(|error| ViewerError::Io { path: dir.to_path_buf(), error })?;
        let read_profile = |mode: Mode| -> Result<Option<Run>, ViewerError> {
            let rel = mode.profile_file();
            match folder.read_to_string(Path::new(rel)).map_err(ViewerError::Refused)? {
                None => Ok(None),
                Some(text) => Ok(Some(Run::new(Profile::from_json(&dir.join(rel), &text)?))),
            }
        };
        let compiled = read_profile(Mode::Compiled)?;
        let eager = read_profile(Mode::Eager)?;
        let (main, baseline) = match (compiled, eager) {
            (Some(c), e) => (c, e),
            (None, Some(e)) => (e, None),
            (None, None) => {
                return Err(sinter_core::profile::ProfileError::NotFound { dir: dir.to_path_buf() }.into());
            }
        };
        let mut warnings = Vec::new();
        let mut fusion = main.profile.fusion.clone();
        if fusion.is_empty()
            && let Some(text) = read_optional(&folder, "fusion.json", &mut warnings)
        {
            match FusionFile::from_json(&dir.join("fusion.json"), &text) {
                Ok(f) => fusion = f.decisions,
                Err(e) => warnings.push(e.to_string()),
            }
        }
        let mut graph = main.profile.graph.clone();
        if graph.is_none() {
            graph = read_graph_json(&folder, &mut warnings);
        }
        let mut passes = Vec::new();
        let pass_dir = match folder.resolve(Path::new("passes")) {
            Ok(d) => d,
            Err(e) => {
                warnings.push(e);
                None
            }
        };
        if let Some(Ok(entries)) = pass_dir.map(std::fs::read_dir) {
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().to_string();
                if let Some((index, pass)) = parse_pass_file_name(&name)
                    && let Some(text) = read_optional(&folder, &format!("passes/{name}"), &mut warnings)
                {
                    passes.push(PassFile { index, name: pass, text });
                }
            }
        }
        passes.sort_by(|a, b| (a.index, &a.name).cmp(&(b.index, &b.name)));
        let graph_breaks = match read_optional(&folder, "graph_breaks.json", &mut warnings) {
            None => Vec::new(),
            Some(text) => parse_graph_breaks(&text).unwrap_or_else(|e| {
                warnings.push(format!("{}: {e}", dir.join("graph_breaks.json").display()));
                Vec::new()
            }),
        };
        Ok(Artifacts {
            graph_breaks,
            dir: dir.to_path_buf(),
            graph_txt: read_optional(&folder, "graph.txt", &mut warnings),
            ir_pre_fusion: read_optional(&folder, "ir_pre_fusion.txt", &mut warnings),
            ir_post_fusion: read_optional(&folder, "ir_post_fusion.txt", &mut warnings),
            main,
            baseline,
            fusion,
            graph,
            passes,
            warnings,
            folder,
        })
    }

    /// The runs present, the main one first.
    pub fn runs(&self) -> Vec<&Run> {
        std::iter::once(&self.main).chain(self.baseline.iter()).collect()
    }

    /// The source of a kernel: its `source_path`, else `kernels/<name>.wgsl` or `.cu`, read only
    /// inside the folder ([`Folder`]): a path or kernel name that leads out of it, or to anything
    /// but a regular file under the size limit, is refused with the reason.
    pub fn kernel_source(&self, k: &KernelProfile) -> Result<(PathBuf, String), String> {
        let mut candidates: Vec<PathBuf> = Vec::new();
        if let Some(p) = &k.source_path {
            candidates.push(PathBuf::from(p));
        }
        for ext in ["wgsl", "cu"] {
            candidates.push(Path::new("kernels").join(format!("{}.{ext}", k.name)));
        }
        for c in &candidates {
            if let Some(t) = self.folder.read_to_string(c)? {
                return Ok((self.dir.join(c), t));
            }
        }
        Err(format!("no source file for {} (looked for {})", k.name, names(&candidates)))
    }

    /// Fusion decisions that involve a kernel (by name) or any of its nodes.
    pub fn decisions_for(&self, k: &KernelProfile) -> Vec<&FusionDecision> {
        self.fusion
            .iter()
            .filter(|d| d.kernels.contains(&k.name) || d.nodes.iter().any(|n| k.nodes.contains(n)))
            .collect()
    }
}

fn names(paths: &[PathBuf]) -> String {
    paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
}

/// Reads `graph.json`: either a [`GraphSummary`] or a serialized `sinter_core::ir::Graph`.
fn read_graph_json(folder: &Folder, warnings: &mut Vec<String>) -> Option<GraphSummary> {
    let text = read_optional(folder, "graph.json", warnings)?;
    if let Ok(s) = serde_json::from_str::<GraphSummary>(&text) {
        return Some(s);
    }
    match serde_json::from_str::<sinter_core::ir::Graph>(&text) {
        Ok(g) => Some(GraphSummary::from_graph(&g)),
        Err(e) => {
            warnings.push(format!("{}: not a graph: {e}", folder.root().join("graph.json").display()));
            None
        }
    }
}

/// The lines of `ir_pre_fusion.txt` that belong to a kernel: nodes defined from one of its
/// captured-graph nodes (`# from %N`, or `%N:` for nodes that are their own origin).
pub fn pre_fusion_excerpt(text: &str, k: &KernelProfile) -> String {
    let mut out = Vec::new();
    for line in text.lines() {
        let t = line.trim_start();
        let origin = if let Some(pos) = t.find("# from %") {
            t[pos + 8..].split(|c: char| !c.is_ascii_digit()).next().and_then(|n| n.parse::<u32>().ok())
        } else if let Some(rest) = t.strip_prefix('%') {
            rest.split(|c: char| !c.is_ascii_digit())
                .next()
                .and_then(|n| n.parse::<u32>().ok())
                .filter(|_| t.contains(": "))
        } else {
            None
        };
        if origin.is_some_and(|n| k.nodes.contains(&n)) {
            out.push(line);
        }
    }
    out.join("\n")
}

/// The block of `ir_post_fusion.txt` for a kernel: from the first line naming it (as a whole
/// word) to the next blank line, at most 400 lines.
pub fn post_fusion_excerpt(text: &str, k: &KernelProfile) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let names_it = |l: &str| {
        l.match_indices(k.name.as_str()).any(|(i, _)| {
            let before = l[..i].chars().next_back();
            let after = l[i + k.name.len()..].chars().next();
            let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
            !word(before) && !word(after)
        })
    };
    let Some(start) = lines.iter().position(|l| names_it(l)) else { return String::new() };
    let end = lines[start + 1..]
        .iter()
        .position(|l| l.trim().is_empty())
        .map(|p| start + 1 + p)
        .unwrap_or(lines.len())
        .min(start + 400);
    lines[start..end].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pass_file_names() {
        assert_eq!(parse_pass_file_name("03_cse.txt"), Some((3, "cse".into())));
        assert_eq!(parse_pass_file_name("10_constant_fold.txt"), Some((10, "constant_fold".into())));
        assert_eq!(parse_pass_file_name("notes.txt"), None);
        assert_eq!(parse_pass_file_name("03_.txt"), None);
        assert_eq!(parse_pass_file_name("03_cse.json"), None);
    }

    #[test]
    fn excerpts() {
        let k = KernelProfile::new("k1_add_gelu").nodes([4, 5]);
        let pre = "graph(%0: f32[4] \"x\") {\n  %4: f32[4] = add(%0, %0)\n  %9: f32[4] = erf(%4)  # from %5 gelu\n  %10: f32[4] = neg(%9)  # from %6 neg\n}\n";
        assert_eq!(pre_fusion_excerpt(pre, &k), "  %4: f32[4] = add(%0, %0)\n  %9: f32[4] = erf(%4)  # from %5 gelu");
        let post = "kernel k1_add_gelu_2 {\n  x\n}\n\nkernel k1_add_gelu {\n  body\n}\n\nkernel k2 {\n}\n";
        assert_eq!(post_fusion_excerpt(post, &k), "kernel k1_add_gelu {\n  body\n}");
        assert_eq!(post_fusion_excerpt("nothing", &k), "");
    }

    #[test]
    fn missing_folder_and_unknown_schema() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope");
        let err = Artifacts::load(&missing).unwrap_err();
        assert!(matches!(err, ViewerError::NoFolder(_)), "{err}");
        let err = Artifacts::load(dir.path()).unwrap_err();
        assert!(err.to_string().contains("no sinter profile"), "{err}");
        sinter_core::profile::Profile::new("w", "wgsl", Mode::Compiled, Default::default()).write(dir.path()).unwrap();
        // A profile file names its folder.
        assert_eq!(Artifacts::load(&dir.path().join("profile.json")).unwrap().dir, dir.path());
        std::fs::write(dir.path().join("profile.json"), r#"{"schema_version": 42, "sinter_version": "0.0.1"}"#)
            .unwrap();
        let err = Artifacts::load(dir.path()).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("schema version 42") && msg.contains("0.0.1"), "{msg}");
    }

    #[test]
    fn loads_the_demo_folder() {
        let dir = tempfile::tempdir().unwrap();
        crate::demo::demo_artifacts(dir.path()).unwrap();
        let a = Artifacts::load(dir.path()).unwrap();
        assert_eq!(a.main.profile.mode, Mode::Compiled);
        assert_eq!(a.baseline.as_ref().unwrap().profile.mode, Mode::Eager);
        assert!(a.warnings.is_empty(), "{:?}", a.warnings);
        assert!(a.passes.len() >= 3);
        assert!(a.passes.windows(2).all(|w| w[0].index < w[1].index));
        assert!(a.graph.is_some());
        let run = &a.main;
        for k in &run.profile.kernels {
            let (path, src) = a.kernel_source(k).unwrap();
            assert!(path.exists() && !src.is_empty());
            assert!(!post_fusion_excerpt(a.ir_post_fusion.as_deref().unwrap(), k).is_empty(), "{}", k.name);
            assert!(!pre_fusion_excerpt(a.ir_pre_fusion.as_deref().unwrap(), k).is_empty(), "{}", k.name);
        }
        let refused = a.fusion.iter().filter(|d| !d.fused).count();
        assert!(refused > 0);
    }

    #[test]
    fn graph_breaks_parse_and_bad_files_are_errors() {
        let text = r#"[{"node": 3, "op": "cast to f64", "origin": 2, "origin_op": "cast",
            "reason": "the wgsl backend does not support f64", "segment": 1}]"#;
        let b = parse_graph_breaks(text).unwrap();
        assert_eq!(b.len(), 1);
        assert_eq!(b[0].to_string(), "graph break: node %3 (cast to f64): the wgsl backend does not support f64");
        assert!(parse_graph_breaks("{}").is_err());
    }
}
