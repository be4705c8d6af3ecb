//! The ONNX backend conformance runner: runs every case of a folder in the ONNX backend-test
//! layout (`<case>/model.onnx`, `<case>/test_data_set_N/input_K.pb`, `output_K.pb`) on any
//! backend and compares with the tolerance the ONNX runner uses (`|out - ref| <= atol + rtol *
//! |ref|`, NaN equal to NaN, dtypes and shapes exact; bf16 outputs get `rtol >= 2^-6`).
//!
//! Each case runs on its own worker thread and is abandoned after [`Options::timeout`]: it is
//! reported as `timeout` and its thread keeps running detached until it finishes (Rust cannot
//! kill a thread), so a hanging backend costs a core but never blocks the run. Panics inside a
//! case are caught and reported as errors.

use crate::error::OnnxError;
use crate::model::Model;
use crate::tensor::read_tensor_pb;
use serde::Serialize;
use sinter_core::{HostTensor, IrGraph};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

/// A backend: runs an IR graph on inputs (in `graph.inputs` order) and returns its outputs.
pub type Backend = Arc<dyn Fn(&IrGraph, &[HostTensor]) -> Result<Vec<HostTensor>, sinter_core::Error> + Send + Sync>;

/// Called after every finished case with the result, the number done and the total.
pub type Progress = Arc<dyn Fn(&CaseResult, usize, usize) + Send + Sync>;

/// Runner options.
#[derive(Clone)]
pub struct Options {
    /// Only run cases whose name (or `kind/name`) contains this substring.
    pub filter: Option<String>,
    /// Per-case time limit (default 20 s).
    pub timeout: Duration,
    /// Cases run at once (default: the available parallelism).
    pub jobs: usize,
    /// Relative tolerance (default 1e-3, as the ONNX runner).
    pub rtol: f64,
    /// Absolute tolerance (default 1e-7, as the ONNX runner).
    pub atol: f64,
    /// Progress callback.
    pub progress: Option<Progress>,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            filter: None,
            timeout: Duration::from_secs(20),
            jobs: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
            rtol: 1e-3,
            atol: 1e-7,
            progress: None,
        }
    }
}

/// How a case ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Every data set matched.
    Pass,
    /// Ran, but an output differs beyond tolerance (or in shape/dtype).
    Fail,
    /// The importer or backend does not support something the case uses (named in `detail`).
    Unsupported,
    /// Import or execution failed for another reason (or panicked).
    Error,
    /// Did not finish within the time limit.
    Timeout,
}

/// One case's result.
#[derive(Clone, Debug, Serialize)]
pub struct CaseResult {
    /// Case name (its folder).
    pub name: String,
    /// The suite kind (`node`, `pytorch-converted`...): the case folder's parent folder name.
    pub kind: String,
    /// Outcome.
    pub status: Status,
    /// The op types the model uses.
    pub ops: Vec<String>,
    /// For unsupported cases, the op (or data type) named as unsupported.
    pub unsupported_op: Option<String>,
    /// Largest absolute difference over all outputs and data sets (when outputs were compared).
    pub max_error: Option<f64>,
    /// Largest `|out - ref| / (atol + rtol * |ref|)`; at most 1 passes.
    pub max_ratio: Option<f64>,
    /// A message: the failure, the error, or what is unsupported.
    pub detail: Option<String>,
    /// Wall time in seconds.
    pub seconds: f64,
}

impl CaseResult {
    /// A result for `case` with status [`Status::Error`] and nothing measured yet.
    fn error(case: &Case) -> CaseResult {
        CaseResult {
            name: case.name.clone(),
            kind: case.kind.clone(),
            status: Status::Error,
            ops: vec![],
            unsupported_op: None,
            max_error: None,
            max_ratio: None,
            detail: None,
            seconds: 0.0,
        }
    }
}

/// Counts by status.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    /// Cases that passed.
    pub passed: usize,
    /// Cases that failed the comparison.
    pub failed: usize,
    /// Cases using something unsupported.
    pub unsupported: usize,
    /// Cases that errored.
    pub errors: usize,
    /// Cases that timed out.
    pub timeouts: usize,
    /// All cases.
    pub total: usize,
}

impl Summary {
    fn add(&mut self, s: Status) {
        match s {
            Status::Pass => self.passed += 1,
            Status::Fail => self.failed += 1,
            Status::Unsupported => self.unsupported += 1,
            Status::Error => self.errors += 1,
            Status::Timeout => self.timeouts += 1,
        }
        self.total += 1;
    }

    /// Pass rate in percent (0 for no cases).
    pub fn pass_percent(&self) -> f64 {
        if self.total == 0 { 0.0 } else { 100.0 * self.passed as f64 / self.total as f64 }
    }
}

/// `passed/total passed (pct%), n failed, n unsupported, n errors, n timeouts`, the counts
/// right-aligned so that lines of several summaries line up.
impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:>5}/{:<5} passed ({:.1}%), {} failed, {} unsupported, {} errors, {} timeouts",
            self.passed,
            self.total,
            self.pass_percent(),
            self.failed,
            self.unsupported,
            self.errors,
            self.timeouts
        )
    }
}

/// The whole run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Report {
    /// Overall counts.
    pub summary: Summary,
    /// Counts per suite kind.
    pub kinds: BTreeMap<String, Summary>,
    /// Counts per op type (a case counts once for every op type it uses).
    pub ops: BTreeMap<String, Summary>,
    /// Every case, sorted by kind and name.
    pub cases: Vec<CaseResult>,
}

impl Report {
    /// Builds the summaries from case results.
    pub fn from_cases(mut cases: Vec<CaseResult>) -> Report {
        cases.sort_by(|a, b| (&a.kind, &a.name).cmp(&(&b.kind, &b.name)));
        let mut r = Report::default();
        for c in &cases {
            r.summary.add(c.status);
            r.kinds.entry(c.kind.clone()).or_default().add(c.status);
            for op in &c.ops {
                r.ops.entry(op.clone()).or_default().add(c.status);
            }
        }
        r.cases = cases;
        r
    }

    /// The report as pretty JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }
}

/// A discovered case.
#[derive(Clone, Debug)]
pub struct Case {
    /// Case name.
    pub name: String,
    /// Suite kind.
    pub kind: String,
    /// The case folder.
    pub dir: PathBuf,
}

fn is_case(d: &Path) -> bool {
    d.join("model.onnx").is_file()
}

fn subdirs(d: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = match std::fs::read_dir(d) {
        Ok(rd) => rd.filter_map(|e| e.ok()).map(|e| e.path()).filter(|p| p.is_dir()).collect(),
        Err(_) => vec![],
    };
    v.sort();
    v
}

fn file_name(p: &Path) -> String {
    p.file_name().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default()
}

/// Finds cases: `dir` itself, its case subfolders (kind = `dir`'s name), or the case folders of
/// its kind subfolders (a suite root). A folder with no case is an error ([`OnnxError::NoCases`]):
/// an empty or mistyped suite must not pass as "0/0".
pub fn discover(dir: &Path) -> Result<Vec<Case>, OnnxError> {
    if !dir.is_dir() {
        return Err(OnnxError::Io {
            path: dir.to_path_buf(),
            error: std::io::Error::new(std::io::ErrorKind::NotFound, "not a folder"),
        });
    }
    let mut cases = Vec::new();
    if is_case(dir) {
        let kind = dir.parent().map(file_name).unwrap_or_default();
        cases.push(Case { name: file_name(dir), kind, dir: dir.to_path_buf() });
        return Ok(cases);
    }
    for s in subdirs(dir) {
        if is_case(&s) {
            cases.push(Case { name: file_name(&s), kind: file_name(dir), dir: s });
        } else {
            for c in subdirs(&s) {
                if is_case(&c) {
                    cases.push(Case { name: file_name(&c), kind: file_name(&s), dir: c });
                }
            }
        }
    }
    if cases.is_empty() {
        return Err(OnnxError::NoCases {
            dir: dir.to_path_buf(),
            detail: "no conformance case here: expected <case>/model.onnx, <kind>/<case>/model.onnx, or a case folder"
                .into(),
        });
    }
    Ok(cases)
}

/// Files named `prefix<N>.pb` in a folder, ordered by N.
fn numbered(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut v: Vec<(u64, PathBuf)> = match std::fs::read_dir(dir) {
        Ok(rd) => rd
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let n = file_name(&e.path());
                let k = n.strip_prefix(prefix)?.strip_suffix(".pb")?.parse::<u64>().ok()?;
                Some((k, e.path()))
            })
            .collect(),
        Err(_) => vec![],
    };
    v.sort();
    v.into_iter().map(|(_, p)| p).collect()
}

fn read_pb(p: &Path) -> Result<HostTensor, OnnxError> {
    read_tensor_pb(p)
}

/// Compares outputs with [`sinter_core::compare::compare_outputs`] (NaN only equals NaN, an
/// infinity only the same infinity, integers exact, no outputs or a count, shape or dtype
/// mismatch fails); bf16 outputs get `rtol >= 2^-6`. Returns (ok, max abs error, max ratio,
/// message).
fn compare(outs: &[HostTensor], refs: &[HostTensor], rtol: f64, atol: f64) -> (bool, f64, f64, Option<String>) {
    let c = sinter_core::compare::compare_outputs(outs, refs, |d| {
        if d == sinter_core::DType::BF16 { (rtol.max(1.0 / 64.0), atol) } else { (rtol, atol) }
    });
    (c.ok(), c.max_abs, c.max_ratio, c.problem)
}

/// Runs one case on the calling thread.
pub fn run_case(case: &Case, backend: &Backend, rtol: f64, atol: f64) -> CaseResult {
    let start = Instant::now();
    let mut res = CaseResult::error(case);
    let set_err = |res: &mut CaseResult, e: OnnxError| {
        if let Some(op) = e.unsupported_op() {
            res.status = Status::Unsupported;
            res.unsupported_op = Some(op.to_string());
        } else {
            res.status = Status::Error;
        }
        res.detail = Some(e.to_string());
    };
    let model = match crate::model::load(case.dir.join("model.onnx")) {
        Ok(m) => m,
        Err(e) => {
            set_err(&mut res, e);
            res.seconds = start.elapsed().as_secs_f64();
            return res;
        }
    };
    res.ops = model.op_types();
    match run_model(&model, case, backend, rtol, atol) {
        Ok((ok, err, ratio, msg)) => {
            res.status = if ok { Status::Pass } else { Status::Fail };
            res.max_error = Some(err);
            res.max_ratio = Some(ratio);
            res.detail = msg;
        }
        Err(CaseError::Onnx(e)) => set_err(&mut res, e),
        Err(CaseError::Backend(e)) => {
            res.status =
                if matches!(e, sinter_core::Error::Unsupported(_)) { Status::Unsupported } else { Status::Error };
            if res.status == Status::Unsupported {
                res.unsupported_op = Some("backend".into());
            }
            res.detail = Some(format!("backend: {e}"));
        }
    }
    res.seconds = start.elapsed().as_secs_f64();
    res
}

enum CaseError {
    Onnx(OnnxError),
    Backend(sinter_core::Error),
}

impl From<OnnxError> for CaseError {
    fn from(e: OnnxError) -> CaseError {
        CaseError::Onnx(e)
    }
}

fn run_model(
    model: &Model,
    case: &Case,
    backend: &Backend,
    rtol: f64,
    atol: f64,
) -> Result<(bool, f64, f64, Option<String>), CaseError> {
    for i in model.inputs().iter().chain(model.outputs()) {
        if let Err(t) = &i.dtype {
            return Err(OnnxError::Unsupported {
                node: format!("value {:?}", i.name),
                op: t.clone(),
                detail: format!("graph input/output of type {t}"),
            }
            .into());
        }
    }
    let sets: Vec<PathBuf> =
        subdirs(&case.dir).into_iter().filter(|d| file_name(d).starts_with("test_data_set_")).collect();
    if sets.is_empty() {
        return Err(OnnxError::malformed(format!("case {}", case.name), "no test_data_set_N folder").into());
    }
    let (mut all_ok, mut err, mut ratio, mut msg) = (true, 0.0f64, 0.0f64, None);
    for s in sets {
        let inputs: Vec<HostTensor> = numbered(&s, "input_").iter().map(|p| read_pb(p)).collect::<Result<_, _>>()?;
        let refs: Vec<HostTensor> = numbered(&s, "output_").iter().map(|p| read_pb(p)).collect::<Result<_, _>>()?;
        if refs.is_empty() {
            return Err(OnnxError::malformed(
                format!("case {}", case.name),
                format!("{} has no output_N.pb: nothing to compare with", s.display()),
            )
            .into());
        }
        let g = model.graph_for_inputs(&inputs)?;
        let outs = backend(&g, &inputs).map_err(CaseError::Backend)?;
        let (ok, e, q, m) = compare(&outs, &refs, rtol, atol);
        all_ok &= ok;
        err = err.max(e);
        ratio = ratio.max(q);
        if msg.is_none() {
            msg = m.map(|m| format!("{}: {m}", file_name(&s)));
        }
    }
    Ok((all_ok, err, ratio, msg))
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic".into()
    }
}

/// Runs one case on a fresh thread, giving up after `timeout` (the thread is then abandoned).
fn run_isolated(case: &Case, backend: &Backend, opts: &Options) -> CaseResult {
    let (tx, rx) = mpsc::channel();
    let (c, b, rtol, atol) = (case.clone(), backend.clone(), opts.rtol, opts.atol);
    let start = Instant::now();
    let spawned =
        std::thread::Builder::new().name(format!("case {}", case.name)).stack_size(64 << 20).spawn(move || {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run_case(&c, &b, rtol, atol)));
            let _ = tx.send(r);
        });
    let base = CaseResult::error(case);
    if let Err(e) = spawned {
        return CaseResult { detail: Some(format!("cannot start a thread: {e}")), ..base };
    }
    match rx.recv_timeout(opts.timeout) {
        Ok(Ok(r)) => r,
        Ok(Err(p)) => CaseResult {
            detail: Some(format!("panicked: {}", panic_message(&*p))),
            seconds: start.elapsed().as_secs_f64(),
            ops: crate::model::load(case.dir.join("model.onnx")).map(|m| m.op_types()).unwrap_or_default(),
            ..base
        },
        Err(_) => CaseResult {
            status: Status::Timeout,
            detail: Some(format!("no result within {:.0} s", opts.timeout.as_secs_f64())),
            seconds: start.elapsed().as_secs_f64(),
            ops: crate::model::load(case.dir.join("model.onnx")).map(|m| m.op_types()).unwrap_or_default(),
            ..base
        },
    }
}

/// Runs every case under `dir` (see [`discover`]) on `backend`.
pub fn run(dir: &Path, backend: Backend, opts: &Options) -> Result<Report, OnnxError> {
    let mut cases = discover(dir)?;
    if let Some(f) = &opts.filter {
        let found = cases.len();
        cases.retain(|c| c.name.contains(f.as_str()) || format!("{}/{}", c.kind, c.name).contains(f.as_str()));
        if cases.is_empty() {
            return Err(OnnxError::NoCases {
                dir: dir.to_path_buf(),
                detail: format!("none of the {found} cases matches the filter {f:?}"),
            });
        }
    }
    let total = cases.len();
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let results = Mutex::new(Vec::with_capacity(total));
    let jobs = opts.jobs.max(1).min(total.max(1));
    std::thread::scope(|s| {
        for _ in 0..jobs {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    if i >= total {
                        break;
                    }
                    let r = run_isolated(&cases[i], &backend, opts);
                    let n = done.fetch_add(1, Ordering::SeqCst) + 1;
                    if let Some(p) = &opts.progress {
                        p(&r, n, total);
                    }
                    results.lock().unwrap_or_else(|e| e.into_inner()).push(r);
                }
            });
        }
    });
    let results = results.into_inner().unwrap_or_else(|e| e.into_inner());
    Ok(Report::from_cases(results))
}
