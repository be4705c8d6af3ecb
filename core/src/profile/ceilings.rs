//! Calibration: a device's performance ceilings ([`Ceilings`]: copy bandwidth, matmul peaks per
//! compute type, launch overhead) and their per-adapter cache on disk.
//!
//! Contract of the cache file (`<cache>/calibration/<adapter key>.json`): written only when every
//! value is plausible ([`Ceilings::check`]); read back only when it parses, has this schema
//! version, names the adapter it is read for, and passes the same check. A file that fails any
//! of these is an error naming the file and the reason (callers warn, fall back to a quick
//! measurement, and `sinter calibrate` replaces it): an absurd ceiling is never used.
//!
//! Matmul peaks are keyed by compute type ([`COMPUTE_NAMES`]: `f32` exact, `tf32`, `f16`, `bf16`,
//! `f8e4m3`, `f8e5m2`), each with the method that measured it ([`Ceilings::matmul_method`]: on
//! CUDA a cuBLASLt product, elsewhere sinter's own matmul workload).

use super::files::{check_schema, io_err, parse_json, write_json};
use super::{ProfileError, SCHEMA_VERSION, SINTER_VERSION};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// A device's performance ceilings, ideally measured by `sinter calibrate`.
/// Zero means unknown; [`Ceilings::default`] knows nothing.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Ceilings {
    /// Device-memory copy bandwidth, GB/s (10^9 bytes per second), counting bytes read + written.
    pub copy_gbps: f64,
    /// Peak matmul rate per compute type ([`COMPUTE_NAMES`]: `f32`, `tf32`, `f16`, `bf16`,
    /// `f8e4m3`, ...), TFLOP/s (10^12 FLOP/s).
    pub matmul_tflops: BTreeMap<String, f64>,
    /// How each entry of `matmul_tflops` was measured (e.g. `cuBLASLt 8192x8192x8192 bf16, best
    /// of 6 algorithms, median of 10 runs`); every measured peak has one.
    #[serde(default)]
    pub matmul_method: BTreeMap<String, String>,
    /// Cost of one kernel launch (submit to start, back to back), microseconds.
    pub launch_overhead_us: f64,
    /// True when measured on this device; false for nominal (data-sheet) or unknown values.
    pub measured: bool,
}

/// The on-disk form of a cached calibration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct CalibrationFile {
    schema_version: u32,
    sinter_version: String,
    adapter: String,
    created_unix_s: u64,
    ceilings: Ceilings,
}

/// The plausible range of copy bandwidth, GB/s: above 0, at most 100 TB/s (an H200 copies at
/// about 4 TB/s).
pub const COPY_GBPS_RANGE: (f64, f64) = (0.0, 1e5);
/// The plausible range of a matmul peak, TFLOP/s: above 0, at most 100 PFLOP/s.
pub const MATMUL_TFLOPS_RANGE: (f64, f64) = (0.0, 1e5);
/// The plausible range of the launch overhead, µs: above 0, at most 100 ms.
pub const LAUNCH_US_RANGE: (f64, f64) = (0.0, 1e5);
/// The compute types a matmul peak may be recorded for: exact `f32`, `tf32` (f32 operands
/// multiplied in TF32 on tensor cores), the half types and the two fp8 types.
pub const COMPUTE_NAMES: [&str; 6] = ["f32", "tf32", "f16", "bf16", "f8e4m3", "f8e5m2"];
/// Where a compute type without a peak of its own takes one: e5m2 products run at e4m3's rate
/// (one cuBLASLt fp8 path); everything else falls back to exact f32 ([`Ceilings::peak_for`]).
const PEAK_FALLBACK: [(&str, &str); 1] = [("f8e5m2", "f8e4m3")];

/// Whether `v` is finite and in `(lo, hi]`.
fn plausible(v: f64, (lo, hi): (f64, f64)) -> bool {
    v.is_finite() && v > lo && v <= hi
}

impl Ceilings {
    /// Checks every value against its plausible range (`COPY_GBPS_RANGE`,
    /// `MATMUL_TFLOPS_RANGE`, `LAUNCH_US_RANGE`); `Err` names the first field out of range
    /// and its value. Measured ceilings must all be known (0 is not a measurement).
    pub fn check(&self) -> Result<(), String> {
        let bad = |field: &str, v: f64, (lo, hi): (f64, f64), unit: &str| {
            Err(format!("{field} = {v} is outside the plausible range ({lo}, {hi}] {unit}"))
        };
        if !plausible(self.copy_gbps, COPY_GBPS_RANGE) && (self.measured || self.copy_gbps != 0.0) {
            return bad("copy_gbps", self.copy_gbps, COPY_GBPS_RANGE, "GB/s");
        }
        if !plausible(self.launch_overhead_us, LAUNCH_US_RANGE) && (self.measured || self.launch_overhead_us != 0.0) {
            return bad("launch_overhead_us", self.launch_overhead_us, LAUNCH_US_RANGE, "µs");
        }
        for (dtype, &v) in &self.matmul_tflops {
            if !COMPUTE_NAMES.contains(&dtype.as_str()) {
                return Err(format!(
                    "matmul_tflops.{dtype}: not a compute type (expected one of {})",
                    COMPUTE_NAMES.join(", ")
                ));
            }
            if !plausible(v, MATMUL_TFLOPS_RANGE) {
                return bad(&format!("matmul_tflops.{dtype}"), v, MATMUL_TFLOPS_RANGE, "TFLOP/s");
            }
            if self.measured && self.matmul_method.get(dtype).is_none_or(|m| m.trim().is_empty()) {
                return Err(format!(
                    "matmul_tflops.{dtype} has no matmul_method: a measured peak names how it was measured (files \
                     from before sinter measured library peaks have none)"
                ));
            }
        }
        if let Some(dtype) = self.matmul_method.keys().find(|d| !self.matmul_tflops.contains_key(*d)) {
            return Err(format!("matmul_method.{dtype} describes a peak that matmul_tflops does not have"));
        }
        Ok(())
    }

    /// The peak for work in compute type `compute` ([`COMPUTE_NAMES`]; a kernel's
    /// [`super::KernelProfile::compute`]) and the entry it was taken from: its own, else its
    /// fallback (`f8e5m2` takes `f8e4m3`'s), else exact `f32`'s. `None` when nothing plausible is
    /// known (see `MATMUL_TFLOPS_RANGE`).
    pub fn peak_for(&self, compute: &str) -> Option<(&str, f64)> {
        let get = |key: &str| {
            self.matmul_tflops
                .get_key_value(key)
                .filter(|(_, v)| plausible(**v, MATMUL_TFLOPS_RANGE))
                .map(|(k, v)| (k.as_str(), *v))
        };
        let fallback = PEAK_FALLBACK.iter().find(|(from, _)| *from == compute).map(|(_, to)| *to);
        get(compute).or_else(|| fallback.and_then(get)).or_else(|| get("f32"))
    }

    /// Peak FLOP/s (in TFLOP/s) for work in `compute` ([`Ceilings::peak_for`]'s value).
    pub fn peak_tflops(&self, compute: &str) -> Option<f64> {
        self.peak_for(compute).map(|(_, v)| v)
    }

    /// Copy bandwidth when known and plausible (`COPY_GBPS_RANGE`).
    pub fn bandwidth_gbps(&self) -> Option<f64> {
        plausible(self.copy_gbps, COPY_GBPS_RANGE).then_some(self.copy_gbps)
    }

    /// Launch overhead in ns when known and plausible (`LAUNCH_US_RANGE`).
    pub fn launch_overhead_ns(&self) -> Option<f64> {
        plausible(self.launch_overhead_us, LAUNCH_US_RANGE).then_some(self.launch_overhead_us * 1e3)
    }

    /// The ridge point (FLOP per byte) for `dtype`: kernels of higher arithmetic intensity are
    /// compute-bound, lower bandwidth-bound.
    pub fn ridge_point(&self, dtype: &str) -> Option<f64> {
        Some(self.peak_tflops(dtype)? * 1e12 / (self.bandwidth_gbps()? * 1e9))
    }

    /// The calibration cache folder: `$SINTER_CACHE_DIR/calibration`, else `sinter/calibration`
    /// in the user's cache folder (the `dirs` crate, as [`crate::compile::default_cache_dir`];
    /// calibration is kept even when `SINTER_CACHE=0` turns the compile caches off).
    pub fn cache_dir() -> Result<PathBuf, ProfileError> {
        let root = if let Some(d) = std::env::var_os("SINTER_CACHE_DIR").filter(|d| !d.is_empty()) {
            PathBuf::from(d)
        } else if let Some(d) = dirs::cache_dir() {
            d.join("sinter")
        } else {
            return Err(ProfileError::NoCacheDir);
        };
        Ok(root.join("calibration"))
    }

    /// A file-name-safe key for an adapter (e.g. from its name, backend and driver): letters,
    /// digits, `-`, `_` and `.` kept, anything else becomes `_`.
    pub fn adapter_key(parts: &[&str]) -> String {
        let joined = parts.join("-");
        let key: String = joined
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') { c } else { '_' })
            .collect();
        if key.is_empty() { "adapter".to_string() } else { key }
    }

    /// Loads the cached ceilings of an adapter from [`Ceilings::cache_dir`]; `Ok(None)` when
    /// the adapter was never calibrated.
    pub fn load(adapter_key: &str) -> Result<Option<Ceilings>, ProfileError> {
        Ceilings::load_from(&Ceilings::cache_dir()?, adapter_key)
    }

    /// Saves these ceilings for an adapter under [`Ceilings::cache_dir`]; returns the file.
    pub fn save(&self, adapter_key: &str) -> Result<PathBuf, ProfileError> {
        self.save_to(&Ceilings::cache_dir()?, adapter_key)
    }

    /// The file [`Ceilings::load_from`] reads for an adapter.
    pub fn file_in(dir: &Path, adapter_key: &str) -> PathBuf {
        dir.join(format!("{}.json", Ceilings::adapter_key(&[adapter_key])))
    }

    /// Loads `<dir>/<key>.json`; `Ok(None)` when it does not exist. A file that exists but cannot
    /// be read, does not parse, was written for another adapter, or holds a value out of its
    /// plausible range ([`Ceilings::check`]) is an error naming the file (never trusted).
    pub fn load_from(dir: &Path, adapter_key: &str) -> Result<Option<Ceilings>, ProfileError> {
        let path = Ceilings::file_in(dir, adapter_key);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_err(&path)(e)),
        };
        let value: Value = parse_json(&path, &text)?;
        check_schema(&path, &value)?;
        let file: CalibrationFile = serde_json::from_value(value)
            .map_err(|e| ProfileError::Parse { path: path.clone(), msg: e.to_string() })?;
        if file.adapter != adapter_key {
            return Err(ProfileError::Parse {
                path,
                msg: format!(
                    "written for adapter {:?}, read for {adapter_key:?}; rerun `sinter calibrate` to measure this one",
                    file.adapter
                ),
            });
        }
        file.ceilings.check().map_err(|msg| ProfileError::Parse {
            path: path.clone(),
            msg: format!("{msg}; rerun `sinter calibrate` to measure again"),
        })?;
        Ok(Some(file.ceilings))
    }

    /// Saves to `<dir>/<key>.json`, creating `dir`; returns the file. Values out of their
    /// plausible range ([`Ceilings::check`]) are refused, not written.
    pub fn save_to(&self, dir: &Path, adapter_key: &str) -> Result<PathBuf, ProfileError> {
        let path = Ceilings::file_in(dir, adapter_key);
        self.check().map_err(|msg| ProfileError::Parse { path: path.clone(), msg: format!("not saved: {msg}") })?;
        std::fs::create_dir_all(dir).map_err(io_err(dir))?;
        let file = CalibrationFile {
            schema_version: SCHEMA_VERSION,
            sinter_version: SINTER_VERSION.to_string(),
            adapter: adapter_key.to_string(),
            created_unix_s: SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0),
            ceilings: self.clone(),
        };
        write_json(&path, &file, true)?;
        Ok(path)
    }
}
