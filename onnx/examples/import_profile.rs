//! Where an ONNX import's time goes: reading the file, decoding the protobuf and the
//! initializers ([`sinter_onnx::model::Model::from_bytes`], which copies the bytes it is given
//! once more than [`sinter_onnx::load`] does), and lowering to sinter IR
//! ([`sinter_onnx::model::Model::graph`], symbolic; with shapes such as `8x128` given, one per
//! input, [`sinter_onnx::model::Model::graph_for`] those shapes), and the resident memory a
//! model loaded by [`sinter_onnx::load`] holds.
//!
//! ```text
//! cargo run --release -p sinter-onnx --example import_profile -- model.onnx [8x128 ...] [reps=3]
//! ```

use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = args.next().ok_or("usage: import_profile MODEL.onnx [reps=N]")?;
    let rest: Vec<String> = args.collect();
    let reps: usize = rest.iter().find_map(|a| a.strip_prefix("reps=").and_then(|v| v.parse().ok())).unwrap_or(3);
    let shapes: Vec<Vec<usize>> = rest
        .iter()
        .filter(|a| !a.contains('='))
        .map(|a| a.split('x').map(|d| d.parse::<usize>()).collect::<Result<Vec<_>, _>>())
        .collect::<Result<_, _>>()?;
    for rep in 1..=reps {
        let t = Instant::now();
        let bytes = std::fs::read(&path)?;
        let read_s = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let dir = std::path::Path::new(&path).parent().map(|p| p.to_path_buf());
        let model = sinter_onnx::model::Model::from_bytes(&bytes, dir)?;
        let decode_s = t.elapsed().as_secs_f64();
        drop(bytes);
        let t = Instant::now();
        let lowered =
            if shapes.is_empty() { model.graph() } else { model.graph_for(&shapes) }.map(|g| g.iter().count());
        let graph_s = t.elapsed().as_secs_f64();
        drop(model);
        let rss_before = rss_mb();
        let t = Instant::now();
        let loaded = sinter_onnx::load(&path);
        let load_s = t.elapsed().as_secs_f64();
        // Resident memory while the loaded model is alive, beyond the process's before it.
        let held_mb = rss_mb() - rss_before;
        let total = loaded.map(|_| ());
        println!(
            "rep {rep}: read {read_s:.3} s, decode {decode_s:.3} s, graph {graph_s:.3} s ({}), load() {load_s:.3} s, holding {held_mb:.0} MB{}",
            match lowered {
                Ok(n) => format!("{n} nodes"),
                Err(e) => format!("import refused: {}", e.to_string().chars().take(60).collect::<String>()),
            },
            if total.is_ok() { "" } else { " (failed)" }
        );
    }
    Ok(())
}

/// This process's resident memory in MB (`VmRSS` of `/proc/self/status`; 0 where there is none).
fn rss_mb() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kb = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok());
    kb.unwrap_or(0.0) / 1024.0
}
