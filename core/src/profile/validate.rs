//! Consistency checks: [`Profile::validate`] (before a profile is written and after it is read)
//! and [`validate_chrome_trace`] (what Perfetto and `chrome://tracing` need of a trace).

use super::{Profile, ProfileError};
use serde_json::Value;
use std::collections::BTreeMap;

impl Profile {
    /// Checks internal consistency: launch kernel indices in range, finite times, ends not before
    /// starts.
    pub fn validate(&self) -> Result<(), ProfileError> {
        let bad = |m: String| Err(ProfileError::Invalid(m));
        for (i, l) in self.launches.iter().enumerate() {
            if l.kernel >= self.kernels.len() {
                return bad(format!("launch {i} names kernel {} but there are {}", l.kernel, self.kernels.len()));
            }
            let times = [Some(l.host_start_ns), Some(l.host_end_ns), l.device_start_ns, l.device_end_ns];
            if times.iter().flatten().any(|t| !t.is_finite()) {
                return bad(format!("launch {i} has a non-finite time"));
            }
            if l.host_end_ns < l.host_start_ns {
                return bad(format!("launch {i} ends on the host before it starts"));
            }
            if l.device_start_ns.is_some() != l.device_end_ns.is_some() {
                return bad(format!("launch {i} has only one of device start and end"));
            }
            if let Some((s, e)) = l.device_span()
                && e < s
            {
                return bad(format!("launch {i} ends on the device before it starts"));
            }
        }
        for k in &self.kernels {
            let nums = [k.bytes, k.flops].into_iter().chain(k.times_ns.iter().copied());
            if nums.into_iter().any(|x| !x.is_finite() || x < 0.0) {
                return bad(format!("kernel {} has a negative or non-finite number", k.name));
            }
            if let Some(r) = k.registers.filter(|&r| r > MAX_REGISTERS) {
                return bad(format!(
                    "kernel {} uses {r} registers per thread, more than any GPU has ({MAX_REGISTERS})",
                    k.name
                ));
            }
            if let Some(c) = &k.contraction {
                check_contraction(&k.name, c).or_else(bad)?;
            }
        }
        for s in &self.compile_spans {
            if !s.start_ns.is_finite() || !s.dur_ns.is_finite() || s.dur_ns < 0.0 {
                return bad(format!("compile span {} has a bad time", s.name));
            }
        }
        Ok(())
    }
}

/// Most registers per thread a kernel record may claim (NVIDIA's limit is 255; AMD's 512 VGPRs).
pub const MAX_REGISTERS: u32 = 512;

/// A contraction record's rates: finite and non-negative, a peak only where plausible
/// ([`super::ceilings::MATMUL_TFLOPS_RANGE`]) and named, a share only with both rates and equal to
/// their quotient, a known compute type.
fn check_contraction(kernel: &str, c: &super::Contraction) -> Result<(), String> {
    let (lo, hi) = super::ceilings::MATMUL_TFLOPS_RANGE;
    if !super::COMPUTE_NAMES.contains(&c.compute.as_str()) {
        return Err(format!("kernel {kernel}: contraction compute {:?} is not a compute type", c.compute));
    }
    for (what, v) in [("achieved_tflops", c.achieved_tflops), ("peak_share", c.peak_share)] {
        if let Some(v) = v.filter(|v| !v.is_finite() || *v < 0.0) {
            return Err(format!("kernel {kernel}: contraction {what} = {v}"));
        }
    }
    if let Some(p) = c.peak_tflops {
        if !(p.is_finite() && p > lo && p <= hi) {
            return Err(format!("kernel {kernel}: contraction peak_tflops = {p} is outside ({lo}, {hi}]"));
        }
        if c.peak_compute.is_none() {
            return Err(format!("kernel {kernel}: contraction peak_tflops without peak_compute"));
        }
    }
    match (c.peak_share, c.achieved_tflops, c.peak_tflops) {
        (None, _, _) => Ok(()),
        (Some(s), Some(a), Some(p)) if (s - a / p).abs() <= 1e-9 * s.max(1.0) => Ok(()),
        (Some(s), a, p) => Err(format!(
            "kernel {kernel}: contraction peak_share {s} is not achieved_tflops {a:?} over peak_tflops {p:?}"
        )),
    }
}

/// Checks a Chrome trace for what Perfetto and `chrome://tracing` need: every event has `ph`,
/// `name`, `pid`; `X` events have finite non-negative `ts`/`dur` and a `tid`; `X` events on
/// one track nest; every flow start has exactly one finish with the same id (which binds with
/// `bp:"e"`) inside a slice of its track; every number is finite. Returns all problems found.
pub fn validate_chrome_trace(trace: &Value) -> Result<(), Vec<String>> {
    let mut errs = Vec::new();
    let Some(events) = trace.get("traceEvents").and_then(Value::as_array) else {
        return Err(vec!["no `traceEvents` array".into()]);
    };
    fn check_finite(v: &Value, path: &str, errs: &mut Vec<String>) {
        match v {
            Value::Number(n) if n.as_f64().is_none_or(|x| !x.is_finite()) => {
                errs.push(format!("{path}: non-finite number"));
            }
            Value::Array(a) => a.iter().enumerate().for_each(|(i, x)| check_finite(x, &format!("{path}[{i}]"), errs)),
            Value::Object(m) => m.iter().for_each(|(k, x)| check_finite(x, &format!("{path}.{k}"), errs)),
            _ => {}
        }
    }
    check_finite(trace, "$", &mut errs);
    let mut tracks: BTreeMap<(u64, u64), Vec<(i64, i64)>> = BTreeMap::new();
    let mut flow_s: BTreeMap<u64, (u64, u64, i64)> = BTreeMap::new();
    let mut flow_f: BTreeMap<u64, (u64, u64, i64)> = BTreeMap::new();
    for (i, e) in events.iter().enumerate() {
        let ph = e.get("ph").and_then(Value::as_str).unwrap_or("");
        if ph.is_empty() || e.get("name").and_then(Value::as_str).is_none() || e.get("pid").is_none() {
            errs.push(format!("event {i}: missing ph, name or pid"));
            continue;
        }
        let num = |k: &str| e.get(k).and_then(Value::as_f64);
        // Times as whole ns, as consumers convert them.
        let ns = |us: f64| (us * 1e3).round() as i64;
        let pid = e["pid"].as_u64().unwrap_or(u64::MAX);
        let tid = e.get("tid").and_then(Value::as_u64);
        match ph {
            "X" => {
                let (Some(ts), Some(dur), Some(tid)) = (num("ts"), num("dur"), tid) else {
                    errs.push(format!("event {i}: X event without ts, dur or tid"));
                    continue;
                };
                if ts < 0.0 || dur < 0.0 {
                    errs.push(format!("event {i}: negative ts or dur"));
                }
                tracks.entry((pid, tid)).or_default().push((ns(ts), ns(ts) + ns(dur)));
            }
            "s" | "f" => {
                let (Some(id), Some(ts), Some(tid)) = (e.get("id").and_then(Value::as_u64), num("ts"), tid) else {
                    errs.push(format!("event {i}: flow without id, ts or tid"));
                    continue;
                };
                if ph == "f" && e.get("bp").and_then(Value::as_str) != Some("e") {
                    errs.push(format!("event {i}: flow finish without bp:\"e\""));
                }
                let m = if ph == "s" { &mut flow_s } else { &mut flow_f };
                if m.insert(id, (pid, tid, ns(ts))).is_some() {
                    errs.push(format!("event {i}: flow id {id} used twice for ph {ph}"));
                }
            }
            "M" if e.get("args").and_then(|a| a.as_object()).is_none() => {
                errs.push(format!("event {i}: metadata without args"));
            }
            _ => {}
        }
    }
    for ((pid, tid), spans) in tracks.iter_mut() {
        spans.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
        let mut stack: Vec<i64> = Vec::new();
        for &(s, e) in spans.iter() {
            while stack.last().is_some_and(|&end| end <= s) {
                stack.pop();
            }
            if let Some(&end) = stack.last()
                && e > end
            {
                errs.push(format!("track {pid}/{tid}: slice [{s}, {e}] overlaps its parent ending at {end}"));
            }
            stack.push(e);
        }
    }
    // A point is inside some slice iff the latest end among the slices starting at or before it
    // reaches it (prefix maxima of ends over slices sorted by start).
    let prefix_max: BTreeMap<(u64, u64), Vec<i64>> = tracks
        .iter()
        .map(|(k, spans)| {
            let mut m = i64::MIN;
            let pm = spans
                .iter()
                .map(|&(_, e)| {
                    m = m.max(e);
                    m
                })
                .collect();
            (*k, pm)
        })
        .collect();
    let inside = |(pid, tid, ts): (u64, u64, i64)| {
        let (Some(spans), Some(pm)) = (tracks.get(&(pid, tid)), prefix_max.get(&(pid, tid))) else {
            return false;
        };
        let n = spans.partition_point(|&(s, _)| s <= ts);
        n > 0 && pm[n - 1] >= ts
    };
    for (id, &s) in &flow_s {
        match flow_f.get(id) {
            None => errs.push(format!("flow {id}: start without finish")),
            Some(&f) => {
                if !inside(s) || !inside(f) {
                    errs.push(format!("flow {id}: an end is not inside a slice of its track"));
                }
                if f.2 < s.2 {
                    errs.push(format!("flow {id}: finishes before it starts"));
                }
            }
        }
    }
    for id in flow_f.keys() {
        if !flow_s.contains_key(id) {
            errs.push(format!("flow {id}: finish without start"));
        }
    }
    if errs.is_empty() { Ok(()) } else { Err(errs) }
}
