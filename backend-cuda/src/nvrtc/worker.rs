//! NVRTC compiles in worker processes ([`compile_in_worker`]): each compile thread of a parallel
//! batch hands its job to a child process instead of calling NVRTC itself.
//!
//! Why: NVRTC compiles on threads of one process contend for something process-wide. Measured on
//! H200 hosts: every layer's copy of ViT-B/16 bf16's kernels took 4.43-4.53 s on 16 threads and
//! 2.23 s as 16 processes (session 29, call 3), though the distinct sources a load compiles showed
//! no difference beyond the spread (call 5); the pool itself, against threads, in fresh processes
//! with every cache off (session 30, call 3): ResNet-18 bf16's cold compile 0.67-0.69 -> 0.45 s,
//! EfficientNet-B0 bf16 1.40-1.49 -> 0.72-0.78, ConvNeXt-Tiny bf16 1.11-1.24 -> 0.82-0.87, ViT-B/16
//! bf16 0.86-0.89 -> 0.75-0.78; two-kernel programs within the spread (session 31, call 1).
//! Inductor compiles in a pool of worker processes for the same reason.
//!
//! Contract:
//! * Workers run only where a worker command is registered ([`set_worker_command`]: the `sinter`
//!   CLI registers itself with its hidden `__nvrtc-worker` argument) and `SINTER_NVRTC_PROCESSES`
//!   is not `0`; elsewhere (library users, tests) every compile runs in-process as before.
//! * A result from a worker is what [`super::compile`] in this process would give (the worker
//!   calls it, with the same environment: include folders, NVRTC's cache setting).
//! * A worker that cannot start, dies or answers garbage loses nothing: the job compiles
//!   in-process ([`compile_in_worker`] returns `None`); a worker that dies is dropped, and once
//!   one cannot start, or three have failed, every later job compiles in-process.
//! * Workers are pooled for the process's lifetime (at most [`super::MAX_COMPILE_THREADS`] idle):
//!   a job takes an idle one or starts one, and gives it back after a good reply. A pooled worker
//!   ends when this process exits (its stdin closes); a failed or surplus one is killed.
//! * No pool is started ahead: starting it (and NVRTC in this process) while the device opened
//!   made ViT-B/16 bf16's batch 0.34-0.35 -> 0.46-0.48 s and two one-kernel compiles 20-30 ms
//!   longer (the warm-up compiles still running beside the first real ones; session 30, call 5).
//!
//! Protocol (little-endian, lengths as `u64`): a request is the target's `sm` major and minor
//! (`u32` each), NVRTC's cache flag (`u8`), the program name and the source (each a length and
//! UTF-8 bytes); a reply is a tag byte and its fields: 0 = the cubin (image bytes, log, seconds
//! as `f64`), 1 = a compile error (name, log), 2 = NVRTC unavailable (message).

use std::io::{BufReader, BufWriter, Read, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

use super::{Cubin, NvrtcError, Target};

/// The command that starts a worker (program and arguments), once registered.
static WORKER: OnceLock<(PathBuf, Vec<String>)> = OnceLock::new();

/// Compiles answered by worker processes in this process's lifetime.
static WORKER_COMPILES: AtomicUsize = AtomicUsize::new(0);

/// How many compiles worker processes have answered so far (`SINTER_LOG=compile`, tests).
pub fn worker_compiles() -> usize {
    WORKER_COMPILES.load(Ordering::Relaxed)
}

/// Registers the command that starts an NVRTC worker process: `program args...` must run
/// [`worker_main`] and exit with its code. The `sinter` CLI registers itself with
/// `__nvrtc-worker`. Later registrations are ignored.
pub fn set_worker_command(program: PathBuf, args: Vec<String>) {
    let _ = WORKER.set((program, args));
}

/// Whether batches compile in worker processes: a command is registered and
/// `SINTER_NVRTC_PROCESSES` is not `0`.
pub fn workers_enabled() -> bool {
    WORKER.get().is_some() && std::env::var("SINTER_NVRTC_PROCESSES").map_or(true, |v| v != "0")
}

/// A running worker process and its pipes.
struct Worker {
    child: Child,
    /// `None` once closed (dropping it ends the worker's loop).
    to: Option<BufWriter<ChildStdin>>,
    from: BufReader<ChildStdout>,
}

impl Worker {
    fn start() -> Option<Worker> {
        let (program, args) = WORKER.get()?;
        let mut child = Command::new(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .ok()?;
        let to = BufWriter::new(child.stdin.take()?);
        let from = BufReader::new(child.stdout.take()?);
        Some(Worker { child, to: Some(to), from })
    }

    fn compile(&mut self, name: &str, source: &str, target: &Target) -> std::io::Result<Result<Cubin, NvrtcError>> {
        let to = self.to.as_mut().ok_or_else(|| std::io::Error::other("the worker's input is closed"))?;
        write_request(to, name, source, target)?;
        to.flush()?;
        read_reply(&mut self.from)
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        // A worker is dropped only when it failed or the pool is full: closing its stdin ends a
        // healthy one's loop, and it is killed in case it is not.
        drop(self.to.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Idle workers.
static POOL: Mutex<Vec<Worker>> = Mutex::new(Vec::new());

/// Set once a worker could not be started, or [`MAX_FAILURES`] workers failed: later jobs compile
/// in-process.
static START_FAILED: AtomicBool = AtomicBool::new(false);

/// Workers that failed mid-job so far.
static FAILURES: AtomicUsize = AtomicUsize::new(0);

/// Failed workers after which none is started again (a registered command that is no worker).
const MAX_FAILURES: usize = 3;

fn pool() -> std::sync::MutexGuard<'static, Vec<Worker>> {
    POOL.lock().unwrap_or_else(|p| p.into_inner())
}

/// An idle worker, or a new one (`None`, and workers off from then on, when none starts).
fn take_worker() -> Option<Worker> {
    if let Some(w) = pool().pop() {
        return Some(w);
    }
    let w = Worker::start();
    if w.is_none() && !START_FAILED.swap(true, Ordering::Relaxed) {
        tracing::warn!(target: "sinter::compile", "no NVRTC worker process could be started; compiling on threads");
    }
    w
}

fn give_back(w: Worker) {
    let mut p = pool();
    if p.len() < super::MAX_COMPILE_THREADS {
        p.push(w);
    }
}

/// Compiles `source` in a worker process (the caller checked [`workers_enabled`]); `None` when no
/// worker starts or the worker failed (the caller then compiles in-process).
pub(super) fn compile_in_worker(name: &str, source: &str, target: &Target) -> Option<Result<Cubin, NvrtcError>> {
    if START_FAILED.load(Ordering::Relaxed) {
        return None;
    }
    let mut w = take_worker()?;
    match w.compile(name, source, target) {
        Ok(r) => {
            give_back(w);
            WORKER_COMPILES.fetch_add(1, Ordering::Relaxed);
            Some(r)
        }
        Err(e) => {
            tracing::warn!(target: "sinter::compile", "an NVRTC worker process failed ({e}); compiling {name} in-process");
            if FAILURES.fetch_add(1, Ordering::Relaxed) + 1 >= MAX_FAILURES {
                START_FAILED.store(true, Ordering::Relaxed);
            }
            None
        }
    }
}

/// The worker process's loop: reads requests from stdin until it closes, compiles each with
/// [`super::compile`] and writes the reply to stdout. Returns the process's exit code.
pub fn worker_main() -> i32 {
    let mut input = BufReader::new(std::io::stdin().lock());
    let mut output = BufWriter::new(std::io::stdout().lock());
    loop {
        let (name, source, target) = match read_request(&mut input) {
            Ok(Some(r)) => r,
            Ok(None) => return 0,
            Err(e) => {
                eprintln!("sinter NVRTC worker: bad request: {e}");
                return 2;
            }
        };
        let r = super::compile(&name, &source, &target);
        if write_reply(&mut output, &r).and_then(|()| output.flush()).is_err() {
            return 2;
        }
    }
}

fn put_bytes(w: &mut impl Write, b: &[u8]) -> std::io::Result<()> {
    w.write_all(&(b.len() as u64).to_le_bytes())?;
    w.write_all(b)
}

/// Longest field accepted: a corrupt length must not allocate without bound.
const MAX_FIELD: u64 = 1 << 30;

fn get_bytes(r: &mut impl Read) -> std::io::Result<Vec<u8>> {
    let mut n = [0u8; 8];
    r.read_exact(&mut n)?;
    let n = u64::from_le_bytes(n);
    if n > MAX_FIELD {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, format!("a field of {n} bytes")));
    }
    let mut b = vec![0u8; n as usize];
    r.read_exact(&mut b)?;
    Ok(b)
}

fn get_string(r: &mut impl Read) -> std::io::Result<String> {
    String::from_utf8(get_bytes(r)?).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

fn write_request(w: &mut impl Write, name: &str, source: &str, target: &Target) -> std::io::Result<()> {
    w.write_all(&target.sm.0.to_le_bytes())?;
    w.write_all(&target.sm.1.to_le_bytes())?;
    w.write_all(&[u8::from(target.nvrtc_cache)])?;
    put_bytes(w, name.as_bytes())?;
    put_bytes(w, source.as_bytes())
}

/// The next request, or `None` at a clean end of input.
fn read_request(r: &mut impl Read) -> std::io::Result<Option<(String, String, Target)>> {
    let mut major = [0u8; 4];
    match r.read_exact(&mut major) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let mut minor = [0u8; 4];
    r.read_exact(&mut minor)?;
    let mut cache = [0u8; 1];
    r.read_exact(&mut cache)?;
    let name = get_string(r)?;
    let source = get_string(r)?;
    let target = Target { sm: (u32::from_le_bytes(major), u32::from_le_bytes(minor)), nvrtc_cache: cache[0] != 0 };
    Ok(Some((name, source, target)))
}

fn write_reply(w: &mut impl Write, r: &Result<Cubin, NvrtcError>) -> std::io::Result<()> {
    match r {
        Ok(c) => {
            w.write_all(&[0])?;
            put_bytes(w, &c.image)?;
            put_bytes(w, c.log.as_bytes())?;
            w.write_all(&c.seconds.to_le_bytes())
        }
        Err(NvrtcError::Compile { name, log }) => {
            w.write_all(&[1])?;
            put_bytes(w, name.as_bytes())?;
            put_bytes(w, log.as_bytes())
        }
        Err(NvrtcError::Unavailable(m)) => {
            w.write_all(&[2])?;
            put_bytes(w, m.as_bytes())
        }
    }
}

fn read_reply(r: &mut impl Read) -> std::io::Result<Result<Cubin, NvrtcError>> {
    let mut tag = [0u8; 1];
    r.read_exact(&mut tag)?;
    Ok(match tag[0] {
        0 => {
            let image = get_bytes(r)?;
            let log = get_string(r)?;
            let mut s = [0u8; 8];
            r.read_exact(&mut s)?;
            Ok(Cubin { image, log, seconds: f64::from_le_bytes(s) })
        }
        1 => Err(NvrtcError::Compile { name: get_string(r)?, log: get_string(r)? }),
        2 => Err(NvrtcError::Unavailable(get_string(r)?)),
        t => return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, format!("reply tag {t}"))),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_and_replies_round_trip() {
        let t = Target { sm: (9, 0), nvrtc_cache: false };
        let mut b = Vec::new();
        write_request(&mut b, "k0", "extern \"C\" __global__ void k0() {}\n// ünïcode", &t).unwrap();
        write_request(&mut b, "k1", "", &Target::sm((8, 6))).unwrap();
        let mut r = &b[..];
        let (n, s, tt) = read_request(&mut r).unwrap().unwrap();
        assert_eq!((n.as_str(), tt), ("k0", t));
        assert!(s.ends_with("ünïcode"));
        let (n, s, tt) = read_request(&mut r).unwrap().unwrap();
        assert_eq!((n.as_str(), s.as_str(), tt), ("k1", "", Target::sm((8, 6))));
        assert!(read_request(&mut r).unwrap().is_none(), "a clean end of input");
        let replies = [
            Ok(Cubin { image: vec![1, 2, 3], log: "ptxas info: 8 registers".into(), seconds: 0.25 }),
            Err(NvrtcError::Compile { name: "k2".into(), log: "error: expected a ;".into() }),
            Err(NvrtcError::Unavailable("libnvrtc.so not found".into())),
        ];
        for want in replies {
            let mut b = Vec::new();
            write_reply(&mut b, &want).unwrap();
            assert_eq!(read_reply(&mut &b[..]).unwrap(), want);
        }
    }

    #[test]
    fn corrupt_input_is_an_error_not_a_panic() {
        // A truncated request, an absurd length, an unknown reply tag.
        let mut b = Vec::new();
        write_request(&mut b, "k0", "source", &Target::hopper()).unwrap();
        assert!(read_request(&mut &b[..b.len() - 2]).is_err());
        let mut huge = vec![9, 0, 0, 0, 0, 0, 0, 0, 1];
        huge.extend_from_slice(&u64::MAX.to_le_bytes());
        assert!(read_request(&mut &huge[..]).is_err());
        assert!(read_reply(&mut &[7u8][..]).is_err());
        assert!(read_reply(&mut &[0u8, 1][..]).is_err());
    }
}
