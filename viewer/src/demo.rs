//! A synthetic but realistic artifact folder, for tests, screenshots and trying the viewer
//! without a GPU: a transformer MLP block (layer norm, matmul, bias + GELU, matmul, bias,
//! residual, layer norm) in f16, compiled into 5 kernels and run eagerly as 8. Every number is
//! made up (the device is named as synthetic); the graphs and their text come from sinter's IR.

use crate::ViewerError;
use sinter_core::DType;
use sinter_core::ir::{BinaryOp, Graph, NodeId, Op, Origin, ReduceOp, UnaryOp};
use sinter_core::profile::{
    Ceilings, Contraction, ContractionKind, DeviceInfo, FusionDecision, KernelProfile, Launch, Mode, Profile,
    ProfileBuilder, Span, SpanCategory,
};
use sinter_core::tensor::HostTensor;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

const ROWS: usize = 4096;
const DIM: usize = 1024;
const HIDDEN: usize = 4096;

fn demo_err(e: sinter_core::Error) -> ViewerError {
    ViewerError::Demo(e.to_string())
}

/// The captured graph: node ids 0-4 inputs, 5 layer_norm, 6 matmul, 7 add, 8 gelu, 9 matmul,
/// 10 add, 11 add (residual), 12 layer_norm.
pub fn demo_graph() -> Result<Graph, ViewerError> {
    let mut g = Graph::default();
    let x = g.add_input("x", DType::F16, vec![ROWS, DIM]);
    let w1 = g.add_input("w1", DType::F16, vec![DIM, HIDDEN]);
    let b1 = g.add_input("b1", DType::F16, vec![HIDDEN]);
    let w2 = g.add_input("w2", DType::F16, vec![HIDDEN, DIM]);
    let b2 = g.add_input("b2", DType::F16, vec![DIM]);
    let ln = Op::LayerNorm { axis: 1, eps: 1e-5, has_weight: false, has_bias: false };
    let h = g.add(ln.clone(), vec![x], None).map_err(demo_err)?;
    let h = g.add(Op::MatMul, vec![h, w1], None).map_err(demo_err)?;
    let h = g.add(Op::Binary(BinaryOp::Add), vec![h, b1], None).map_err(demo_err)?;
    let h = g.add(Op::Gelu { tanh: false }, vec![h], None).map_err(demo_err)?;
    let h = g.add(Op::MatMul, vec![h, w2], None).map_err(demo_err)?;
    let h = g.add(Op::Binary(BinaryOp::Add), vec![h, b2], None).map_err(demo_err)?;
    let h = g.add(Op::Binary(BinaryOp::Add), vec![h, x], None).map_err(demo_err)?;
    let y = g.add(ln, vec![h], None).map_err(demo_err)?;
    g.add_output("y", y);
    Ok(g)
}

/// The graph after decomposition (`shared_constants`: after CSE merged equal constants).
fn decomposed(shared_constants: bool) -> Result<Graph, ViewerError> {
    let cap = demo_graph()?;
    let mut g = Graph::default();
    let mut map: Vec<NodeId> = Vec::new();
    let mut consts: BTreeMap<u64, NodeId> = BTreeMap::new();
    let mut constant = |g: &mut Graph, v: f64, origin: &Origin| -> Result<NodeId, ViewerError> {
        if shared_constants && let Some(&id) = consts.get(&v.to_bits()) {
            return Ok(id);
        }
        let id = g
            .add(Op::Constant(Arc::new(HostTensor::scalar(DType::F16, v))), vec![], Some(origin.clone()))
            .map_err(demo_err)?;
        consts.insert(v.to_bits(), id);
        Ok(id)
    };
    for (_, n) in cap.iter() {
        let o = Some(n.origin.clone());
        let ins: Vec<NodeId> = n.inputs.iter().map(|i| map[i.index()]).collect();
        let add = |g: &mut Graph, op: Op, ins: Vec<NodeId>| g.add(op, ins, o.clone()).map_err(demo_err);
        let id = match &n.op {
            Op::Input { name } => g.add_input(name, n.ty.dtype, n.ty.shape.clone()),
            Op::LayerNorm { eps, .. } => {
                let inv_n = constant(&mut g, 1.0 / DIM as f64, &n.origin)?;
                let eps = constant(&mut g, *eps, &n.origin)?;
                let sum = Op::Reduce { op: ReduceOp::Sum, axes: vec![1], keepdim: true };
                let s = add(&mut g, sum.clone(), vec![ins[0]])?;
                let mean = add(&mut g, Op::Binary(BinaryOp::Mul), vec![s, inv_n])?;
                let d = add(&mut g, Op::Binary(BinaryOp::Sub), vec![ins[0], mean])?;
                let sq = add(&mut g, Op::Binary(BinaryOp::Mul), vec![d, d])?;
                let ss = add(&mut g, sum, vec![sq])?;
                let var = add(&mut g, Op::Binary(BinaryOp::Mul), vec![ss, inv_n])?;
                let ve = add(&mut g, Op::Binary(BinaryOp::Add), vec![var, eps])?;
                let r = add(&mut g, Op::Unary(UnaryOp::Rsqrt), vec![ve])?;
                add(&mut g, Op::Binary(BinaryOp::Mul), vec![d, r])?
            }
            Op::Gelu { .. } => {
                let half = constant(&mut g, 0.5, &n.origin)?;
                let one = constant(&mut g, 1.0, &n.origin)?;
                let inv_sqrt2 = constant(&mut g, std::f64::consts::FRAC_1_SQRT_2, &n.origin)?;
                let t = add(&mut g, Op::Binary(BinaryOp::Mul), vec![ins[0], inv_sqrt2])?;
                let e = add(&mut g, Op::Unary(UnaryOp::Erf), vec![t])?;
                let p = add(&mut g, Op::Binary(BinaryOp::Add), vec![e, one])?;
                let h = add(&mut g, Op::Binary(BinaryOp::Mul), vec![ins[0], half])?;
                add(&mut g, Op::Binary(BinaryOp::Mul), vec![h, p])?
            }
            op => add(&mut g, op.clone(), ins)?,
        };
        map.push(id);
    }
    for o in &cap.outputs {
        g.add_output(&o.name, map[o.node.index()]);
    }
    Ok(g)
}

struct DemoKernel {
    name: &'static str,
    nodes: &'static [u32],
    grid: [u32; 3],
    block: [u32; 3],
    bytes: f64,
    flops: f64,
    time_ns: f64,
    registers: Option<u32>,
    smem: Option<u64>,
}

fn kernels(mode: Mode) -> Vec<DemoKernel> {
    let act = (ROWS * DIM * 2) as f64; // one f16 [4096, 1024] tensor, bytes
    let hid = (ROWS * HIDDEN * 2) as f64; // one f16 [4096, 4096] tensor
    let w = (DIM * HIDDEN * 2) as f64;
    let mm = 2.0 * (ROWS * DIM * HIDDEN) as f64;
    let ln = |name, nodes| DemoKernel {
        name,
        nodes,
        grid: [ROWS as u32, 1, 1],
        block: [256, 1, 1],
        bytes: 2.0 * act,
        flops: 8.0 * (ROWS * DIM) as f64,
        time_ns: 11_200.0,
        registers: Some(32),
        smem: Some(2048),
    };
    let gemm = |name, nodes, bytes: f64, time_ns| DemoKernel {
        name,
        nodes,
        grid: [32, 32, 1],
        block: [16, 16, 1],
        bytes,
        flops: mm,
        time_ns,
        registers: Some(128),
        smem: Some(32768),
    };
    let ew = |name, nodes, bytes: f64, flops_per: f64, elems: usize, time_ns| DemoKernel {
        name,
        nodes,
        grid: [(elems / 1024) as u32, 1, 1],
        block: [256, 1, 1],
        bytes,
        flops: flops_per * elems as f64,
        time_ns,
        registers: Some(24),
        smem: None,
    };
    match mode {
        Mode::Compiled => vec![
            ln("k0_layer_norm", &[5]),
            gemm("k1_matmul", &[6], act + w + hid, 92_000.0),
            ew("k2_add_gelu", &[7, 8], 2.0 * hid + 8192.0, 20.0, ROWS * HIDDEN, 27_000.0),
            gemm("k3_matmul_add_add", &[9, 10, 11], hid + w + 3.0 * act, 96_500.0),
            ln("k4_layer_norm", &[12]),
        ],
        Mode::Eager => vec![
            ln("e0_layer_norm", &[5]),
            gemm("e1_matmul", &[6], act + w + hid, 93_000.0),
            ew("e2_add", &[7], 2.0 * hid + 8192.0, 1.0, ROWS * HIDDEN, 27_500.0),
            ew("e3_gelu", &[8], 2.0 * hid, 19.0, ROWS * HIDDEN, 28_000.0),
            gemm("e4_matmul", &[9], hid + w + act, 95_000.0),
            ew("e5_add", &[10], 2.0 * act + 2048.0, 1.0, ROWS * DIM, 8_400.0),
            ew("e6_add", &[11], 3.0 * act, 1.0, ROWS * DIM, 11_000.0),
            ln("e7_layer_norm", &[12]),
        ],
    }
}

/// The demo device: plausible ceilings for a large datacenter GPU, named as synthetic.
pub fn demo_device() -> DeviceInfo {
    DeviceInfo::new(
        "Synthetic demo GPU (fixture data)",
        "wgsl",
        Ceilings {
            copy_gbps: 3000.0,
            matmul_tflops: BTreeMap::from([("f32".into(), 60.0), ("f16".into(), 500.0)]),
            matmul_method: BTreeMap::from([
                ("f32".into(), "synthetic (fixture data)".into()),
                ("f16".into(), "synthetic (fixture data)".into()),
            ]),
            launch_overhead_us: 4.0,
            measured: true,
        },
    )
}

/// A deterministic synthetic profile of the demo block with `iterations` timed iterations
/// (5 launches each when compiled, 8 when eager).
pub fn demo_profile(mode: Mode, iterations: u32) -> Profile {
    let graph = demo_graph().ok();
    let mut b = ProfileBuilder::new("demo_mlp_block_4096x1024_f16 (synthetic)", "wgsl", mode, demo_device());
    if let Some(g) = &graph {
        b.set_graph(g);
    }
    let ks = kernels(mode);
    let mut ids = Vec::new();
    for k in &ks {
        let origins: Vec<(u32, &str)> =
            k.nodes.iter().map(|&n| (n, graph.as_ref().map_or("?", |g| g.nodes[n as usize].op.name()))).collect();
        let mut kp = KernelProfile::new(k.name)
            .origins(origins)
            .grid(k.grid)
            .block(k.block)
            .bytes(k.bytes)
            .flops(k.flops)
            .dtype("f16")
            .source_path(format!("kernels/{}.wgsl", k.name));
        kp.registers = k.registers;
        kp.shared_mem_bytes = k.smem;
        if k.name.contains("matmul") {
            // The builder rates it against the f16 peak when the profile is finished.
            kp = kp.with_contraction(Some(Contraction::new(ContractionKind::Matmul, "f16"))).spill_bytes(0);
        }
        ids.push(b.add_kernel(kp));
    }
    // Deterministic jitter.
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut jitter = move |scale: f64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % 1000) as f64 / 1000.0 * scale
    };
    let mut t = 0.0;
    if mode == Mode::Compiled {
        let spans: &[(&str, SpanCategory, f64, &str)] = &[
            ("capture", SpanCategory::Capture, 210_000.0, "13 nodes"),
            ("decompose", SpanCategory::Pass, 380_000.0, "2 layer_norm, 1 gelu -> 31 nodes"),
            ("cse", SpanCategory::Pass, 95_000.0, "4 constants merged"),
            ("dce", SpanCategory::Pass, 40_000.0, "nothing removed"),
            ("fuse", SpanCategory::Fuse, 620_000.0, "5 kernels, 3 refusals"),
            ("codegen", SpanCategory::Codegen, 450_000.0, "5 WGSL kernels"),
            ("autotune k1_matmul", SpanCategory::Autotune, 41_000_000.0, "12 configs, best 128x128x32"),
            ("autotune k3_matmul_add_add", SpanCategory::Autotune, 38_000_000.0, "12 configs, best 128x128x32"),
            ("backend_compile", SpanCategory::BackendCompile, 9_800_000.0, "naga + 5 pipelines, 2 cache hits"),
            ("cache store", SpanCategory::Cache, 300_000.0, "5 entries"),
        ];
        let total: f64 = spans.iter().map(|s| s.2).sum::<f64>() + 10_000.0 * spans.len() as f64;
        b.push_span(Span {
            name: "compile".into(),
            category: SpanCategory::Other,
            start_ns: 0.0,
            dur_ns: total,
            detail: String::new(),
        });
        let mut s = 5_000.0;
        for (name, cat, dur, detail) in spans {
            b.push_span(Span {
                name: (*name).into(),
                category: *cat,
                start_ns: s,
                dur_ns: *dur,
                detail: (*detail).into(),
            });
            s += dur + 10_000.0;
        }
        t = total + 200_000.0;
    }
    let host_cost = if mode == Mode::Compiled { 3_000.0 } else { 5_500.0 };
    for it in 0..iterations {
        let mut dev_free = t + 8_000.0;
        for (i, k) in ks.iter().enumerate() {
            let hs = t;
            let he = hs + host_cost + jitter(1_500.0);
            let ds = dev_free.max(he + 1_500.0) + jitter(1_000.0);
            let de = ds + k.time_ns * (0.97 + jitter(0.06));
            b.push_launch(Launch::new(ids[i], it, hs, he).device(ds, de));
            t = he + 400.0;
            dev_free = de;
        }
        // Synchronize and read back before the next iteration.
        t = dev_free + 35_000.0 + jitter(10_000.0);
    }
    b.set_peak_memory((ROWS * HIDDEN * 2 + 4 * ROWS * DIM * 2 + 2 * DIM * HIDDEN * 2) as u64);
    if mode == Mode::Compiled {
        for d in fusion_decisions() {
            b.push_fusion(d);
        }
    }
    // The builder only fails on inconsistent data, which this generator does not produce; an
    // empty profile is the fallback rather than a panic.
    b.finish().unwrap_or_else(|_| Profile::new("demo", "wgsl", mode, demo_device()))
}

fn fusion_decisions() -> Vec<FusionDecision> {
    let d = |nodes: &[u32], kernels: &[&str], fused: bool, reason: &str| FusionDecision {
        nodes: nodes.to_vec(),
        kernels: kernels.iter().map(|k| k.to_string()).collect(),
        fused,
        reason: reason.into(),
    };
    vec![
        d(&[7, 8], &["k2_add_gelu"], true, "elementwise chain over the same iteration space f16[4096, 4096]"),
        d(
            &[9, 10, 11],
            &["k3_matmul_add_add"],
            true,
            "matmul epilogue: bias add and residual add run on the output tile",
        ),
        d(
            &[5, 6],
            &["k0_layer_norm", "k1_matmul"],
            false,
            "prologue not profitable: the matmul reads each normalized row 32 times (bytes would grow 32x)",
        ),
        d(
            &[6, 7, 8],
            &["k1_matmul", "k2_add_gelu"],
            false,
            "epilogue would spill: erf needs 38 more registers than the 128x128 tile leaves",
        ),
        d(
            &[11, 12],
            &["k3_matmul_add_add", "k4_layer_norm"],
            false,
            "reduction after matmul: layer_norm needs whole rows (1024) but a tile holds 128 columns",
        ),
    ]
}

fn wgsl_for(k: &DemoKernel) -> String {
    let header = format!(
        "// {} (synthetic demo kernel)\n// grid {:?}, workgroup {:?}\nenable f16;\n\n",
        k.name, k.grid, k.block
    );
    let body = if k.name.contains("layer_norm") {
        "@group(0) @binding(0) var<storage, read> x: array<f16>;\n\
         @group(0) @binding(1) var<storage, read_write> y: array<f16>;\n\
         var<workgroup> partial: array<f32, 256>;\n\n\
         @compute @workgroup_size(256)\n\
         fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {\n\
         \x20   let row = wg.x * 1024u;\n\
         \x20   var s = 0.0;\n\
         \x20   for (var i = lid; i < 1024u; i += 256u) { s += f32(x[row + i]); }\n\
         \x20   partial[lid] = s;\n\
         \x20   workgroupBarrier();\n\
         \x20   for (var w = 128u; w > 0u; w >>= 1u) {\n\
         \x20       if (lid < w) { partial[lid] += partial[lid + w]; }\n\
         \x20       workgroupBarrier();\n\
         \x20   }\n\
         \x20   let mean = partial[0] * (1.0 / 1024.0);\n\
         \x20   workgroupBarrier();\n\
         \x20   var q = 0.0;\n\
         \x20   for (var i = lid; i < 1024u; i += 256u) { let d = f32(x[row + i]) - mean; q += d * d; }\n\
         \x20   partial[lid] = q;\n\
         \x20   workgroupBarrier();\n\
         \x20   for (var w = 128u; w > 0u; w >>= 1u) {\n\
         \x20       if (lid < w) { partial[lid] += partial[lid + w]; }\n\
         \x20       workgroupBarrier();\n\
         \x20   }\n\
         \x20   let r = inverseSqrt(partial[0] * (1.0 / 1024.0) + 1e-5);\n\
         \x20   for (var i = lid; i < 1024u; i += 256u) { y[row + i] = f16((f32(x[row + i]) - mean) * r); }\n\
         }\n"
        .to_string()
    } else if k.name.contains("matmul") {
        let epilogue =
            if k.name.contains("add_add") { "acc + f32(bias[col]) + f32(res[row * N + col])" } else { "acc" };
        format!(
            "@group(0) @binding(0) var<storage, read> a: array<f16>;\n\
             @group(0) @binding(1) var<storage, read> b: array<f16>;\n\
             @group(0) @binding(2) var<storage, read> bias: array<f16>;\n\
             @group(0) @binding(3) var<storage, read> res: array<f16>;\n\
             @group(0) @binding(4) var<storage, read_write> c: array<f16>;\n\
             const K = 1024u;\nconst N = 4096u;\n\
             var<workgroup> ta: array<f16, 4096>;\nvar<workgroup> tb: array<f16, 4096>;\n\n\
             @compute @workgroup_size(16, 16)\n\
             fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) l: vec3<u32>) {{\n\
             \x20   // 128x128 output tile, 8x8 per thread, K tiles of 32.\n\
             \x20   var acc: array<f32, 64>;\n\
             \x20   for (var k0 = 0u; k0 < K; k0 += 32u) {{\n\
             \x20       // cooperative loads of the A and B tiles into ta / tb ...\n\
             \x20       workgroupBarrier();\n\
             \x20       for (var kk = 0u; kk < 32u; kk++) {{\n\
             \x20           for (var i = 0u; i < 64u; i++) {{ acc[i] += f32(ta[(l.y * 8u + i / 8u) * 32u + kk]) * f32(tb[kk * 128u + l.x * 8u + i % 8u]); }}\n\
             \x20       }}\n\
             \x20       workgroupBarrier();\n\
             \x20   }}\n\
             \x20   for (var i = 0u; i < 64u; i++) {{\n\
             \x20       let row = wg.y * 128u + l.y * 8u + i / 8u;\n\
             \x20       let col = wg.x * 128u + l.x * 8u + i % 8u;\n\
             \x20       let acc = acc[i];\n\
             \x20       c[row * N + col] = f16({epilogue});\n\
             \x20   }}\n\
             }}\n"
        )
    } else {
        let expr = match k.name {
            n if n.contains("add_gelu") => {
                "let h = f32(a[i]) + f32(b[i % 4096u]);\n    out[i] = f16(0.5 * h * (1.0 + erf(h * 0.70710678)));"
            }
            n if n.contains("gelu") => "let h = f32(a[i]);\n    out[i] = f16(0.5 * h * (1.0 + erf(h * 0.70710678)));",
            _ => "out[i] = a[i] + b[i % arrayLength(&b)];",
        };
        format!(
            "@group(0) @binding(0) var<storage, read> a: array<f16>;\n\
             @group(0) @binding(1) var<storage, read> b: array<f16>;\n\
             @group(0) @binding(2) var<storage, read_write> out: array<f16>;\n\n\
             @compute @workgroup_size(256)\n\
             fn main(@builtin(global_invocation_id) gid: vec3<u32>) {{\n\
             \x20   let i = gid.x * 4u;\n\
             \x20   // 4 elements per invocation\n\
             \x20   {expr}\n\
             }}\n"
        )
    };
    header + &body
}

/// Writes a complete synthetic artifact folder into `dir`: compiled and eager profiles and
/// traces, fusion.json, graph.txt, ir_pre_fusion.txt, ir_post_fusion.txt, kernels/*.wgsl and
/// `passes/NN_<name>.txt`.
pub fn demo_artifacts(dir: impl AsRef<Path>) -> Result<(), ViewerError> {
    let dir = dir.as_ref();
    let write = |rel: &str, text: &str| -> Result<(), ViewerError> {
        sinter_core::profile::write_artifact(dir, rel, text)?;
        Ok(())
    };
    demo_profile(Mode::Compiled, 10).write(dir)?;
    demo_profile(Mode::Eager, 10).write(dir)?;
    let captured = demo_graph()?;
    let decomposed_raw = decomposed(false)?;
    let decomposed_cse = decomposed(true)?;
    let print = sinter_core::text::print;
    write("graph.txt", &print(&captured))?;
    let passes =
        [("captured", &captured), ("decompose", &decomposed_raw), ("cse", &decomposed_cse), ("dce", &decomposed_cse)];
    for (i, (name, g)) in passes.iter().enumerate() {
        write(&format!("passes/{}", sinter_core::profile::pass_file_name(i as u32, name)), &print(g))?;
    }
    write("ir_pre_fusion.txt", &print(&decomposed_cse))?;
    // Post-fusion: one block per kernel with the decomposed nodes it computes.
    let pre = print(&decomposed_cse);
    let mut post = String::new();
    for k in kernels(Mode::Compiled) {
        post.push_str(&format!("kernel {}  grid {:?}  workgroup {:?}\n", k.name, k.grid, k.block));
        let kp = KernelProfile::new(k.name).nodes(k.nodes.iter().copied());
        for line in crate::artifacts::pre_fusion_excerpt(&pre, &kp).lines() {
            post.push_str(&format!("  {}\n", line.trim()));
        }
        post.push('\n');
    }
    write("ir_post_fusion.txt", &post)?;
    for mode in [Mode::Compiled, Mode::Eager] {
        for k in kernels(mode) {
            write(&format!("kernels/{}.wgsl", k.name), &wgsl_for(&k))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use sinter_core::profile::{Verdict, analyze, chrome_trace, validate_chrome_trace};

    #[test]
    fn demo_profile_has_every_verdict_and_a_valid_trace() {
        let p = demo_profile(Mode::Compiled, 4);
        assert_eq!(p.launches.len(), 20);
        let a = analyze(&p);
        let verdicts: Vec<Verdict> = a.kernels.iter().map(|k| k.verdict).collect();
        assert_eq!(
            verdicts,
            vec![
                Verdict::OverheadBound,
                Verdict::ComputeBound,
                Verdict::BandwidthBound,
                Verdict::ComputeBound,
                Verdict::OverheadBound
            ],
            "{:#?}",
            a.kernels
        );
        assert_eq!(a.dominant, Some(3));
        validate_chrome_trace(&chrome_trace(&p)).unwrap();
        let e = demo_profile(Mode::Eager, 4);
        assert_eq!(e.launches.len(), 32);
        assert!(analyze(&e).device_window_ns > a.device_window_ns);
    }

    #[test]
    fn demo_graphs_build() {
        let g = demo_graph().unwrap();
        assert_eq!(g.nodes.len(), 13);
        assert_eq!(g.nodes[12].op.name(), "layer_norm");
        let d = decomposed(false).unwrap();
        let c = decomposed(true).unwrap();
        assert!(c.nodes.len() < d.nodes.len());
        // Every decomposed node keeps its captured origin.
        assert!(d.nodes.iter().all(|n| n.origin.node < 13));
    }
}
