//! Text form of the kernel IR (`ir_post_fusion.txt`): stable and readable, snapshot-tested.
//!
//! ```text
//! program: 2 buffers, 1 kernel
//! buffers:
//!   b0  f32 x8643         input 0 "x"
//!   b1  f32 x8643         output 0 "output0"
//! memory: 0 slots; peak 69144 B, unplanned 69144 B
//!
//! kernel k0_softmax: reduce rows=67 len=129 persistent
//!   ops: softmax  origins: %1  flops 43215  bytes 69144
//!   a0 = b0 read f32 x8643
//!   ...
//!   v0: f32 = load a0[row * 129 + red]
//!   acc0: f32 = max over red of v0
//!   elem store a1[row * 129 + red] = v7
//! ```

use super::{
    Access, BufferKind, Expr, FusionDecision, IndexCmp, Kernel, KernelBody, MatOperand, Program, ReduceStrategy, Store,
};
use std::fmt::Write;

/// Prints a whole program: buffers (role, size, slot), the memory plan, every kernel and the
/// fusion decisions.
pub fn print_program(p: &Program) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "program: {} buffer{}, {} kernel{}",
        p.buffers.len(),
        plural(p.buffers.len()),
        p.kernels.len(),
        plural(p.kernels.len())
    );
    s.push_str("buffers:\n");
    for b in &p.buffers {
        let role = match &b.kind {
            BufferKind::Input(k) => format!("input {k} {:?}", p.inputs.get(*k).map_or("?", |i| i.name.as_str())),
            BufferKind::Output(k) => format!("output {k} {:?}", p.outputs.get(*k).map_or("?", |i| i.name.as_str())),
            BufferKind::Constant(t) => format!("constant {}", crate::ir::const_summary(t)),
            BufferKind::Intermediate => match p.memory.slot_of.get(b.id.0 as usize).copied().flatten() {
                Some(slot) => format!("intermediate slot {slot}"),
                None => "intermediate".into(),
            },
        };
        let node = b.node.map(|n| format!("  (%{n})")).unwrap_or_default();
        let _ = writeln!(s, "  b{:<3} {:<4} x{:<10} {role}{node}", b.id.0, b.dtype.name(), b.numel);
    }
    let slots: Vec<String> = p.memory.slots.iter().map(|b| format!("{b} B")).collect();
    let _ = writeln!(
        s,
        "memory: {} slot{}{}; peak {} B, unplanned {} B",
        p.memory.slots.len(),
        plural(p.memory.slots.len()),
        if slots.is_empty() { String::new() } else { format!(" [{}]", slots.join(", ")) },
        p.memory.peak_bytes,
        p.memory.unplanned_bytes
    );
    for k in &p.kernels {
        s.push('\n');
        s.push_str(&print_kernel(k));
    }
    if !p.decisions.is_empty() {
        s.push_str("\ndecisions:\n");
        for d in &p.decisions {
            s.push_str(&print_decision(d));
        }
    }
    s
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// One decision as a line.
pub fn print_decision(d: &FusionDecision) -> String {
    let nodes: Vec<String> = d.nodes.iter().map(|n| format!("%{n}")).collect();
    let kernels = if d.kernels.is_empty() { String::new() } else { format!(" -> {}", d.kernels.join(", ")) };
    format!("  {} [{}]{kernels}\n", d.reason, nodes.join(", "))
}

fn strategy(s: ReduceStrategy) -> &'static str {
    match s {
        ReduceStrategy::Persistent => "persistent",
        ReduceStrategy::Looped => "looped",
        ReduceStrategy::ThreadPerRow => "thread-per-row",
    }
}

fn operand(o: &MatOperand, rows: &str, cols: &str) -> String {
    match &o.im2col {
        None => {
            format!("a{}[{} + batch * {} + {rows} * {} + {cols} * {}]", o.arg, o.offset, o.s_batch, o.s_row, o.s_col)
        }
        Some(w) => format!(
            "im2col a{}[{} + batch * {} + img * {} + c * {} + iy * {} + ix * {}] ({}x{} of {} channels, {}x{} window, \
             stride {:?}, pad {:?}, dilation {:?}, out {}x{}; 0 in the padding)",
            o.arg,
            o.offset,
            o.s_batch,
            w.s_img,
            w.s_chan,
            w.s_y,
            w.s_x,
            w.in_hw[0],
            w.in_hw[1],
            w.channels,
            w.kernel[0],
            w.kernel[1],
            w.stride,
            w.pad,
            w.dilation,
            w.out_hw[0],
            w.out_hw[1]
        ),
    }
}

/// Prints one kernel: header (name, iteration space, ops, origins, cost), arguments, expressions,
/// reductions and stores.
pub fn print_kernel(k: &Kernel) -> String {
    let mut s = String::new();
    let head = match &k.body {
        KernelBody::Pointwise { numel, .. } => format!("pointwise lanes={numel}"),
        KernelBody::Reduce(b) => format!("reduce rows={} len={} {}", b.rows, b.len, strategy(b.strategy)),
        KernelBody::Matmul(m) => {
            let tf32 = if m.tf32 { " tf32" } else { "" };
            format!(
                "matmul batch={} m={} n={} k={} in {} acc {}{tf32}",
                m.batch, m.m, m.n, m.k, m.in_dtype, m.acc_dtype
            )
        }
        KernelBody::Attention(a) => format!(
            "attention batch={} heads={} m={} kv={} d={} dv={} in {} p {}{}",
            a.batch,
            a.heads,
            a.m,
            a.kv,
            a.d,
            a.dv,
            a.in_dtype,
            a.p_dtype,
            a.causal.map_or(String::new(), |o| format!(" causal+{o}"))
        ),
    };
    let _ = writeln!(s, "kernel {}: {head}", k.name);
    let origins: Vec<String> = k.origins.iter().map(|o| format!("%{o}")).collect();
    let _ = writeln!(
        s,
        "  ops: {}  origins: {}  flops {}  bytes {}",
        if k.ops.is_empty() { "-".to_string() } else { k.ops.join(", ") },
        if origins.is_empty() { "-".to_string() } else { origins.join(", ") },
        k.flops,
        k.bytes
    );
    for (i, a) in k.args.iter().enumerate() {
        let acc = if a.access == Access::Read { "read" } else { "write" };
        let _ = writeln!(s, "  a{i} = b{} {acc} {} x{}", a.buffer.0, a.dtype, a.numel);
    }
    if let KernelBody::Matmul(m) = &k.body {
        let _ = writeln!(s, "  A = {}", operand(&m.a, "m", "k"));
        let _ = writeln!(s, "  B = {}", operand(&m.b, "k", "n"));
        let _ = writeln!(s, "  acc0: {} = sum over k of A * B", m.acc_dtype);
    }
    if let KernelBody::Attention(a) = &k.body {
        for (name, o, r, c) in [("Q", &a.q, "m", "d"), ("K", &a.k, "key", "d"), ("V", &a.v, "key", "n")] {
            let _ = writeln!(
                s,
                "  {name} = a{}[{} + batch / {} * {} + batch % {} / {} * {} + {r} * {} + {c}]",
                o.arg, o.offset, a.heads, o.s_batch, a.heads, o.group, o.s_head, o.s_row
            );
        }
        let _ = writeln!(s, "  acc1: f32 = sum over d of Q * K (the raw score at m, key)");
        let _ = writeln!(s, "  acc0: f32 = softmax over key of v{} times V (the output at m, n)", a.score.0);
    }
    // Reductions are printed right after the expression they fold.
    let reds: Vec<(usize, String)> = match &k.body {
        KernelBody::Reduce(b) => b
            .reductions
            .iter()
            .map(|r| {
                (
                    r.value.0 as usize,
                    format!("  acc{}: {} = {} over red of v{}", r.slot, r.dtype, r.op.name(), r.value.0),
                )
            })
            .collect(),
        _ => vec![],
    };
    for (i, e) in k.exprs.iter().enumerate() {
        let rhs = match &e.expr {
            Expr::Load { arg, index } => format!("load a{arg}[{index}]"),
            Expr::Const(c) => format!("{c:?}"),
            Expr::IndexValue(ix) => format!("index({ix})"),
            Expr::IndexCmp(op, a, b) => {
                let o = match op {
                    IndexCmp::Lt => "<",
                    IndexCmp::Ge => ">=",
                    IndexCmp::Eq => "==",
                };
                format!("({a}) {o} ({b})")
            }
            Expr::Unary(op, a) => format!("{}(v{})", op.name(), a.0),
            Expr::Binary(op, a, b) => format!("{}(v{}, v{})", op.name(), a.0, b.0),
            Expr::Where(c, a, b) => format!("where(v{}, v{}, v{})", c.0, a.0, b.0),
            Expr::Cast(a) => format!("cast(v{})", a.0),
            Expr::Acc(slot) => format!("acc{slot}"),
        };
        let _ = writeln!(s, "  v{i}: {} = {rhs}", e.dtype);
        for (_, line) in reds.iter().filter(|(v, _)| *v == i) {
            let _ = writeln!(s, "{line}");
        }
    }
    let stores = |s: &mut String, what: &str, st: &[Store]| {
        for x in st {
            let _ = writeln!(s, "  {what}a{}[{}] = v{}", x.arg, x.index, x.value.0);
        }
    };
    match &k.body {
        KernelBody::Pointwise { stores: st, .. } => stores(&mut s, "store ", st),
        KernelBody::Reduce(b) => {
            stores(&mut s, "elem store ", &b.elem_stores);
            stores(&mut s, "row store ", &b.row_stores);
        }
        KernelBody::Matmul(m) => stores(&mut s, "store ", &m.stores),
        KernelBody::Attention(a) => stores(&mut s, "store ", &a.stores),
    }
    s
}
