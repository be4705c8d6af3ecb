//! Chrome Trace Event export ([`chrome_trace`]): host launches, compile spans and device kernels
//! as nested `X` slices with flows from each launch to its kernel (layout in the module docs of
//! [`crate::profile`]).

use super::{Profile, SCHEMA_VERSION, analyze};
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// An `X` event before it becomes JSON.
struct XEvent {
    name: String,
    cat: &'static str,
    tid: u32,
    /// Whole nanoseconds, so nesting is decided exactly and survives the µs conversion.
    start: i64,
    end: i64,
    args: Value,
}

/// Makes events on one track nest. `sequential`: overlapping siblings are clipped (the earlier
/// one ends where the later starts; clock jitter on a serial queue). Otherwise a child that
/// outlives its parent is clipped to the parent's end.
fn nest_track(events: &mut [XEvent], sequential: bool) {
    events.sort_by(|a, b| a.start.cmp(&b.start).then(b.end.cmp(&a.end)));
    if sequential {
        for i in 1..events.len() {
            let s = events[i].start;
            let prev = &mut events[i - 1];
            if prev.end > s {
                prev.end = s.max(prev.start);
                if let Value::Object(m) = &mut prev.args {
                    m.insert("clipped".into(), json!(true));
                }
            }
        }
    } else {
        let mut stack: Vec<i64> = Vec::new();
        for e in events.iter_mut() {
            while stack.last().is_some_and(|&end| end <= e.start) {
                stack.pop();
            }
            if let Some(&end) = stack.last()
                && e.end > end
            {
                e.end = end;
                if let Value::Object(m) = &mut e.args {
                    m.insert("clipped".into(), json!(true));
                }
            }
            stack.push(e.end);
        }
    }
}

fn finite(x: f64) -> f64 {
    if x.is_finite() { x } else { 0.0 }
}

/// Profile ns to whole trace ns.
fn whole_ns(ns: f64) -> i64 {
    if ns.is_finite() { ns.round() as i64 } else { 0 }
}

/// Whole ns to trace µs.
fn us(ns: i64) -> f64 {
    ns as f64 / 1e3
}

/// The profile as Chrome Trace Event JSON (see the module docs for the layout).
pub fn chrome_trace(p: &Profile) -> Value {
    const HOST: u32 = 1;
    const DEVICE: u32 = 2;
    let analysis = analyze(p);
    let mut out: Vec<Value> = Vec::new();
    let meta = |name: &str, pid: u32, tid: Option<u32>, value: &str| {
        let mut e = json!({"ph": "M", "name": name, "pid": pid, "args": {"name": value}});
        if let Some(t) = tid {
            e["tid"] = json!(t);
        }
        e
    };
    out.push(meta("process_name", HOST, None, "host"));
    out.push(json!({"ph": "M", "name": "process_sort_index", "pid": HOST, "args": {"sort_index": 1}}));
    out.push(meta("thread_name", HOST, Some(1), "launches"));
    out.push(meta("thread_name", HOST, Some(2), "compiler"));
    out.push(meta("process_name", DEVICE, None, &format!("device: {}", p.device.name)));
    out.push(json!({"ph": "M", "name": "process_sort_index", "pid": DEVICE, "args": {"sort_index": 2}}));
    let mut streams: Vec<u32> = p.kernels.iter().map(|k| k.stream).collect();
    streams.sort_unstable();
    streams.dedup();
    for s in &streams {
        out.push(meta("thread_name", DEVICE, Some(1 + s), &format!("queue {s}")));
    }

    let kernel_args: Vec<Value> = p
        .kernels
        .iter()
        .enumerate()
        .map(|(i, k)| {
            let a = &analysis.kernels[i];
            let mut args = json!({
                "kernel": i,
                "grid": k.grid,
                "block": k.block,
                "bytes": finite(k.bytes),
                "flops": finite(k.flops),
                "achieved_gbps": a.achieved_gbps.map(finite),
                "achieved_tflops": a.achieved_tflops.map(finite),
                "verdict": a.verdict.label(),
                "ops": k.ops,
                "nodes": k.nodes,
                "registers": k.registers,
                "shared_mem_bytes": k.shared_mem_bytes,
                "spill_bytes": k.spill_bytes,
                "stream": k.stream,
            });
            if let Some(c) = &k.contraction {
                args["contraction"] = json!(c.kind.name());
                args["compute"] = json!(c.compute);
                args["peak_tflops"] = json!(c.peak_tflops.map(finite));
                args["peak_share"] = json!(c.peak_share.map(finite));
            }
            args
        })
        .collect();

    let mut host: Vec<XEvent> = Vec::new();
    let mut device: BTreeMap<u32, Vec<XEvent>> = BTreeMap::new();
    for (i, l) in p.launches.iter().enumerate() {
        let Some(k) = p.kernels.get(l.kernel) else { continue };
        host.push(XEvent {
            name: format!("launch {}", k.name),
            cat: "launch",
            tid: 1,
            start: whole_ns(l.host_start_ns),
            end: whole_ns(l.host_end_ns),
            args: json!({"kernel": l.kernel, "iteration": l.iteration, "launch": i}),
        });
        if let Some((s, e)) = l.device_span() {
            let mut args = kernel_args[l.kernel].clone();
            args["iteration"] = json!(l.iteration);
            args["launch"] = json!(i);
            device.entry(1 + k.stream).or_default().push(XEvent {
                name: k.name.clone(),
                cat: "kernel",
                tid: 1 + k.stream,
                start: whole_ns(s),
                end: whole_ns(e),
                args,
            });
        }
    }
    let mut compiler: Vec<XEvent> = p
        .compile_spans
        .iter()
        .map(|s| XEvent {
            name: s.name.clone(),
            cat: s.category.name(),
            tid: 2,
            start: whole_ns(s.start_ns),
            end: whole_ns(s.start_ns + s.dur_ns),
            args: json!({"detail": s.detail}),
        })
        .collect();
    nest_track(&mut host, true);
    nest_track(&mut compiler, false);
    for evs in device.values_mut() {
        nest_track(evs, true);
    }
    let x = |e: &XEvent, pid: u32| {
        json!({"ph": "X", "name": e.name, "cat": e.cat, "pid": pid, "tid": e.tid,
               "ts": us(e.start), "dur": us(e.end - e.start), "args": e.args})
    };
    // Flows: start inside the host launch slice, finish ("bp":"e") at the kernel slice's start.
    let mut dev_of_launch: BTreeMap<u64, (u32, i64)> = BTreeMap::new();
    for evs in device.values() {
        for d in evs {
            if let Some(l) = d.args["launch"].as_u64() {
                dev_of_launch.insert(l, (d.tid, d.start));
            }
        }
    }
    let mut flows: Vec<Value> = Vec::new();
    for e in &host {
        let Some(launch) = e.args["launch"].as_u64() else { continue };
        let Some(&(tid, start)) = dev_of_launch.get(&launch) else { continue };
        flows.push(json!({"ph": "s", "id": launch, "name": "launch", "cat": "launch", "pid": HOST, "tid": 1, "ts": us(e.start)}));
        flows.push(json!({"ph": "f", "bp": "e", "id": launch, "name": "launch", "cat": "launch", "pid": DEVICE, "tid": tid, "ts": us(start)}));
    }
    out.extend(host.iter().map(|e| x(e, HOST)));
    out.extend(compiler.iter().map(|e| x(e, HOST)));
    for evs in device.values() {
        out.extend(evs.iter().map(|e| x(e, DEVICE)));
    }
    out.extend(flows);
    json!({
        "traceEvents": out,
        "displayTimeUnit": "ns",
        "otherData": {
            "sinter_schema_version": SCHEMA_VERSION,
            "sinter_version": p.sinter_version,
            "workload": p.workload,
            "backend": p.backend,
            "mode": p.mode.name(),
            "device": p.device.name,
            "iterations": p.iterations,
            "gpu_busy_share": analysis.gpu_busy_share,
            "launch_gap_total_ns": analysis.launch_gap_total_ns,
        }
    })
}
