//! Times every algorithm cuBLASLt's heuristic offers for a product shape, beside the heuristic's
//! own order: the question "would timing the library's candidates beat its first guess?" asked
//! per shape, without a model around it.
//!
//! ```text
//! cargo run --release -p sinter-cuda --example gemm_algos -- f32 1576x768x3072 1576x2304x768:bt [--algos 16] [--reps 30]
//! ```
//!
//! A shape is `MxNxK` (D is `M x N`, the reduction `K`); `:bt` stores B as `N x K` (k-contiguous,
//! torch's `Linear` weight), otherwise B is `K x N` row-major; `:pad` starts D's rows 16 bytes
//! apart (a split product's scratch, `split_epilogue`), otherwise they are `N` elements apart. The dtype is `f32`, `tf32`, `bf16`
//! or `f16`. Each algorithm runs `reps` times back to back after three warm-ups
//! ([`time_algorithms`], as `sinter calibrate` times them); the median of its per-launch event times is printed with its configuration ([`GemmPlan::describe`]).

use sinter_cuda::device::TimingEvents;
use sinter_cuda::device::blas::{BlasOperand, BlasType, GemmDesc, GemmPlan};
use sinter_cuda::device::peaks::time_algorithms;
use sinter_cuda::{Device, probe};
use std::process::ExitCode;

/// `(m, n, k, bt, pad)` of `MxNxK[:bt][:pad]`.
fn parse_shape(s: &str) -> Option<(u64, u64, u64, bool, bool)> {
    let mut parts = s.split(':');
    let v: Vec<u64> = parts.next()?.split('x').map(|d| d.parse().ok()).collect::<Option<_>>()?;
    let (mut bt, mut pad) = (false, false);
    for p in parts {
        match p {
            "bt" => bt = true,
            "pad" => pad = true,
            _ => return None,
        }
    }
    match v[..] {
        [m, n, k] if m > 0 && n > 0 && k > 0 => Some((m, n, k, bt, pad)),
        _ => None,
    }
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gemm_algos: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |name: &str, default: usize| -> Result<usize, String> {
        match args.iter().position(|a| a == name) {
            Some(i) => args.get(i + 1).and_then(|v| v.parse().ok()).ok_or(format!("{name} takes a count")),
            None => Ok(default),
        }
    };
    let (max_algos, reps) = (flag("--algos", 16)?, flag("--reps", 30)?.max(1));
    let is_flag_value = |i: usize| i > 0 && args[i - 1].starts_with("--");
    let mut free = args.iter().enumerate().filter(|&(i, a)| !a.starts_with("--") && !is_flag_value(i));
    let usage = "usage: gemm_algos f32|tf32|bf16|f16 MxNxK[:bt][:pad]... [--algos N] [--reps N]";
    let (dtype, tf32) = match free.next().map(|(_, a)| a.as_str()) {
        Some("f32") => (BlasType::F32, false),
        Some("tf32") => (BlasType::F32, true),
        Some("bf16") => (BlasType::BF16, false),
        Some("f16") => (BlasType::F16, false),
        _ => return Err(usage.into()),
    };
    let shapes: Vec<_> =
        free.map(|(_, s)| parse_shape(s).ok_or(format!("bad shape {s:?}; {usage}"))).collect::<Result<_, _>>()?;
    if shapes.is_empty() {
        return Err(usage.into());
    }
    probe::driver().map_err(|e| e.to_string())?;
    let dev = Device::open(0).map_err(|e| e.to_string())?;
    let stream = dev.new_stream().map_err(|e| e.to_string())?;
    println!("# {}", dev.info().description());
    let e = dtype.bytes();
    for (m, n, k, bt, pad) in shapes {
        let per = (16 / e).max(1);
        let ld_out = if pad { n.div_ceil(per) * per } else { n };
        let dense = GemmDesc::dense(m, n, k, dtype);
        let b = if bt { BlasOperand { offset: 0, s_batch: 0, s_row: 1, s_col: k } } else { dense.b };
        let g = GemmDesc { b, ld_out, tf32, ..dense };
        let plan = GemmPlan::with_algos(&stream, &g, max_algos).map_err(|e| e.to_string())?;
        // Operands of small values (0x3c00 halves, 0.0078 in f32 bit patterns): no NaN, no
        // denormals, so no algorithm is timed on a special path.
        let fill = |elems: u64| -> Result<_, String> {
            let buf = stream.alloc(elems * e).map_err(|e| e.to_string())?;
            stream.fill(buf.ptr(), 0x3c, elems * e, "operand").map_err(|e| e.to_string())?;
            Ok(buf)
        };
        let (da, db, dd) = (fill(m * k)?, fill(k * n)?, fill(m * ld_out)?);
        let ev = TimingEvents::new(&dev, reps).map_err(|e| e.to_string())?;
        let flops = 2.0 * (m * n * k) as f64;
        println!(
            "{m}x{n}x{k}{}{} {dtype:?}{}: {} algorithms",
            if bt { ":bt" } else { "" },
            if pad { ":pad" } else { "" },
            if tf32 { " tf32" } else { "" },
            plan.algos()
        );
        let times =
            time_algorithms(&stream, &plan, (da.ptr(), db.ptr(), dd.ptr()), (0, 0), &ev).map_err(|e| e.to_string())?;
        let first = times[0].unwrap_or(f64::NAN);
        let mut best = (f64::INFINITY, 0);
        for (algo, ms) in times.into_iter().enumerate() {
            match ms {
                Some(ms) => {
                    if ms < best.0 {
                        best = (ms, algo);
                    }
                    println!(
                        "  algo {algo:2}: {:8.1} us {:6.1} TFLOP/s  {}",
                        ms * 1e3,
                        flops / ms / 1e9,
                        plan.describe(algo)
                    );
                }
                None => println!("  algo {algo:2}: failed its warm-ups"),
            }
        }
        println!("  best: algo {} at {:.1} us, {:.2}x the heuristic's first", best.1, best.0 * 1e3, first / best.0);
    }
    Ok(())
}
