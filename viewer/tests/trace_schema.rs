//! The demo folder's traces against the JSON Schema in `tests/trace.schema.json` (through
//! Python's `jsonschema`, present on the CI image) and sinter's own structural validator.

use sinter_core::profile::validate_chrome_trace;
use std::path::Path;
use std::process::Command;

#[test]
fn demo_traces_match_the_schema() {
    let tmp = tempfile::tempdir().unwrap();
    sinter_viewer::demo_artifacts(tmp.path()).unwrap();
    let traces = [tmp.path().join("trace.json"), tmp.path().join("trace_eager.json")];
    for t in &traces {
        let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(t).unwrap()).unwrap();
        validate_chrome_trace(&v).unwrap();
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/check_trace.py");
    let out = match Command::new("python3").arg(&script).args(&traces).output() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("skipped the JSON Schema check: python3 not runnable ({e})");
            return;
        }
    };
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    if out.status.code() == Some(3) {
        eprintln!("skipped the JSON Schema check: {text}");
        return;
    }
    assert!(out.status.success(), "schema check failed:\n{text}");
    assert_eq!(text.matches(": valid (").count(), 2, "{text}");
}

#[test]
fn schema_rejects_a_broken_trace() {
    let tmp = tempfile::tempdir().unwrap();
    let bad = tmp.path().join("bad.json");
    // A kernel slice without args and a flow finish without "bp".
    std::fs::write(
        &bad,
        r#"{"traceEvents": [
            {"ph": "X", "name": "k", "cat": "kernel", "pid": 2, "tid": 1, "ts": 0, "dur": 1},
            {"ph": "f", "name": "launch", "cat": "launch", "pid": 2, "tid": 1, "id": 0, "ts": 0}
        ], "displayTimeUnit": "ns", "otherData": {"sinter_schema_version": 1}}"#,
    )
    .unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/check_trace.py");
    let Ok(out) = Command::new("python3").arg(&script).arg(&bad).output() else {
        eprintln!("skipped: python3 not runnable");
        return;
    };
    if out.status.code() == Some(3) {
        eprintln!("skipped: jsonschema not installed");
        return;
    }
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stdout));
}
