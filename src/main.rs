//! The `sinter` command line. One subcommand per module of `cli/`; each module has an `Args`
//! (clap derive) and a `run(Args) -> anyhow::Result<()>`. Errors are printed and exit with 1.

mod cli;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// sinter: a deep-learning compiler.
#[derive(Parser, Debug)]
#[command(name = "sinter", version, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// The subcommands.
#[derive(Subcommand, Debug)]
enum Command {
    /// Print a workload's captured graph, then the graph after each pass of the pipeline.
    Explain(cli::explain::Args),
    /// Run every workload at reduced size on the CPU reference and check it against an
    /// independent reference; exits non-zero on any failure.
    Demo(cli::demo::Args),
    /// Open an artifact folder (from `sinter profile --out DIR`) in the desktop viewer.
    View(cli::view::Args),
    /// Import an ONNX model, run it on a backend and write the outputs (.npy/.npz).
    Run(cli::run::Args),
    /// Record an artifact folder with device timings (eager and compiled) for `sinter view`.
    Profile(cli::profile::Args),
    /// Measure the device's ceilings (copy bandwidth, matmul rate, launch overhead) once.
    Calibrate(cli::calibrate::Args),
    /// Time the built-in workloads (eager and compiled) and write JSON for compare.py.
    Bench(cli::bench::Args),
    /// Run the ONNX backend conformance suite on a backend and report pass/fail per op.
    Conformance(cli::conformance::Args),
}

/// Installs the log subscriber: `SINTER_LOG=fusion,schedule,recompiles,cache,output_code` (or
/// `all`) turns on those components' decisions at debug level, as `TORCH_LOGS` does; warnings are
/// always shown. A raw `tracing` filter (anything containing `=`) is passed through.
fn init_logging() {
    use tracing_subscriber::EnvFilter;
    let spec = std::env::var("SINTER_LOG").unwrap_or_default();
    let mut filter = String::from("warn");
    for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        if part.contains('=') {
            filter.push_str(&format!(",{part}"));
        } else if part == "all" {
            filter.push_str(",sinter=debug");
        } else {
            filter.push_str(&format!(",sinter::{part}=debug"));
        }
    }
    let _ = tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::new(filter))
        .with_writer(std::io::stderr)
        .with_target(true)
        .without_time()
        .try_init();
}

/// Turns off Mesa's implicit Vulkan layer `VK_LAYER_MESA_device_select` unless the user set
/// `NODEVICE_SELECT` themselves: on a headless machine (no `XDG_RUNTIME_DIR`) the layer connects
/// to Wayland inside `vkEnumeratePhysicalDevices`, and libwayland prints `error: XDG_RUNTIME_DIR
/// is invalid or not set in the environment.` twice per device creation (seen on lavapipe and in
/// `sinter profile`, issue 13). The layer only reorders devices for applications that take the
/// first one; sinter picks its adapter itself (`SINTER_ADAPTER`, else its own ranking).
fn quiet_vulkan_device_select() {
    if std::env::var_os("NODEVICE_SELECT").is_none() {
        // SAFETY: called first thing in `main`, before any thread exists, so nothing reads the
        // environment concurrently.
        unsafe { std::env::set_var("NODEVICE_SELECT", "1") };
    }
}

/// The hidden argument that makes this binary an NVRTC worker process
/// (`sinter_cuda::nvrtc::worker_main`): the CUDA backend's parallel compiles run in such
/// processes, which NVRTC serves faster than threads of one process.
const NVRTC_WORKER: &str = "__nvrtc-worker";

fn main() -> ExitCode {
    if std::env::args_os().nth(1).is_some_and(|a| a == NVRTC_WORKER) {
        return ExitCode::from(sinter_cuda::nvrtc::worker_main().clamp(0, 255) as u8);
    }
    if let Ok(exe) = std::env::current_exe() {
        sinter_cuda::nvrtc::set_worker_command(exe, vec![NVRTC_WORKER.to_string()]);
    }
    quiet_vulkan_device_select();
    init_logging();
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { 1 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    let result = match cli.command {
        Command::Explain(a) => cli::explain::run(a),
        Command::Demo(a) => cli::demo::run(a),
        Command::Bench(a) => cli::bench::run(a),
        Command::Profile(a) => cli::profile::run(a),
        Command::Calibrate(a) => cli::calibrate::run(a),
        Command::Run(a) => cli::run::run(a),
        Command::Conformance(a) => cli::conformance::run(a),
        Command::View(a) => cli::view::run(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // A closed pipe (`sinter explain ... | head`) is not an error.
        Err(e) if cli::is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", cli::report(&e));
            ExitCode::from(1)
        }
    }
}
