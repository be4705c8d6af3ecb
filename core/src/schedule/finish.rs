//! Assembly: buffers, arguments and stores of every planned kernel, names, cost counts, the
//! memory plan and the named decisions.

use super::build::{BufRef, KernelBuilder, Phase, Space, Target, delinearize};
use super::memory::plan_memory;
use super::plan::{Kind, Sched};
use super::storage_order::storage_order;
use crate::error::Error;
use crate::ir::{NodeId, Op};
use crate::kernel::interp::needed;
use crate::kernel::{
    Access, AttentionBody, AttnOperand, BufferDecl, BufferId, BufferKind, Expr, ExprId, FusionDecision, IoDecl, Kernel,
    KernelArg, KernelBody, MatOperand, MatmulBody, Program, ReduceBody, ReduceStrategy, Store,
};
use std::collections::{BTreeSet, HashMap};

/// Whether a reduce or window kernel reads some operand row by row: consecutive elements along
/// the reduction, at least 4 elements apart from one row to the next (a global average pool, a
/// norm over the last axis, a 1x1 convolution's weight on 1x1 images). One thread per row then
/// reads rows apart across a warp ([`CostModel::workgroup_per_whole_row`](super::CostModel)
/// decides). Probed at sample rows and taps with `Index::eval` (a window's taps step back at each
/// kernel row, so a 3x3 or 7x7 window never qualifies). The rows must spread over at least half as
/// many elements as there are rows: a depthwise convolution walking channels-last reads its small
/// weight row by row (`row % C * 49 + tap`), which its threads share, not stream.
fn reads_rows_contiguously(exprs: &[crate::kernel::TypedExpr], rows: usize, len: usize) -> bool {
    use crate::kernel::{Index, Var};
    if rows < 2 || len < 2 {
        return false;
    }
    let at = |i: &Index, row: usize, red: usize| {
        i.eval(
            &|v| match v {
                Var::Row => row as i64,
                Var::Red => red as i64,
                _ => 0,
            },
            &|_| 0,
        )
    };
    let samples = [0, 1, rows / 2, rows - 2];
    let taps = len.min(9) - 1;
    exprs.iter().any(|e| match &e.expr {
        Expr::Load { index, .. } => {
            let mut values = false;
            index.values(&mut |_| values = true);
            !values
                && samples.iter().all(|&r| {
                    (0..taps).all(|t| at(index, r, t + 1) - at(index, r, t) == 1)
                        && (at(index, r + 1, 0) - at(index, r, 0)).abs() >= 4
                })
                && (at(index, rows - 2, 0) - at(index, 0, 0)).abs() >= (rows / 2) as i64
        }
        _ => false,
    })
}

struct Buffers {
    decls: Vec<BufferDecl>,
    /// Buffer of every read reference.
    of: HashMap<BufRef, BufferId>,
}

impl Buffers {
    fn add(&mut self, dtype: crate::DType, numel: usize, kind: BufferKind, node: Option<u32>) -> BufferId {
        let id = BufferId(self.decls.len() as u32);
        self.decls.push(BufferDecl { id, dtype, numel, kind, node });
        id
    }
}

/// Builds the [`crate::kernel::Program`] from a planned schedule.
pub(super) fn finish(s: Sched) -> Result<Program, Error> {
    let g = s.g;
    // Nodes some kernel reads from a buffer.
    let read_nodes: BTreeSet<NodeId> = s
        .kernels
        .iter()
        .flat_map(|k| k.reads.iter())
        .filter_map(|a| match a.buf {
            BufRef::Node(n) => Some(n),
            _ => None,
        })
        .collect();
    let mut bufs = Buffers { decls: Vec::new(), of: HashMap::new() };
    let mut inputs = Vec::new();
    for (k, &id) in g.inputs.iter().enumerate() {
        let t = g.ty(id);
        let b = bufs.add(t.dtype, s.shapes[id.index()].iter().product(), BufferKind::Input(k), Some(id.0));
        bufs.of.insert(BufRef::Input(k), b);
        let name = match &g.node(id).op {
            Op::Input { name } => name.clone(),
            _ => format!("input{k}"),
        };
        inputs.push(IoDecl { name, buffer: b, shape: s.shapes[id.index()].clone(), dtype: t.dtype });
    }
    let mut outputs = Vec::new();
    let mut out_bufs: HashMap<NodeId, Vec<BufferId>> = HashMap::new();
    for (k, o) in g.outputs.iter().enumerate() {
        let t = g.ty(o.node);
        let b = bufs.add(t.dtype, s.shapes[o.node.index()].iter().product(), BufferKind::Output(k), Some(o.node.0));
        out_bufs.entry(o.node).or_default().push(b);
        outputs.push(IoDecl {
            name: o.name.clone(),
            buffer: b,
            shape: s.shapes[o.node.index()].clone(),
            dtype: t.dtype,
        });
    }
    for (n, v) in &out_bufs {
        bufs.of.insert(BufRef::Node(*n), v[0]);
    }

    let mut kernels: Vec<Kernel> = Vec::new();
    let mut new_index: Vec<Option<usize>> = vec![None; s.kernels.len()];
    let mut decisions: Vec<(FusionDecision, Vec<usize>)> =
        s.decisions.iter().map(|d| (fd(d.nodes.clone(), d.fused, &d.reason), d.kernels.clone())).collect();
    for (ki, kb) in s.kernels.iter().enumerate() {
        // Read arguments (constants and copies get their buffers on first use).
        let mut args: Vec<KernelArg> = Vec::new();
        for a in &kb.reads {
            let b = match bufs.of.get(&a.buf) {
                Some(&b) => b,
                None => {
                    let (kind, node) = match &a.buf {
                        BufRef::Constant(n) => match &g.node(*n).op {
                            Op::Constant(t) => match &s.layout[n.index()] {
                                Some(p) => (BufferKind::Constant(std::sync::Arc::new(t.permuted(p)?)), Some(n.0)),
                                None => (BufferKind::Constant(t.clone()), Some(n.0)),
                            },
                            _ => return Err(Error::Unsupported("schedule: internal: constant buffer".into())),
                        },
                        BufRef::Node(n) => (BufferKind::Intermediate, Some(n.0)),
                        BufRef::Operand(_) => (BufferKind::Intermediate, None),
                        BufRef::Input(k) => {
                            return Err(Error::Unsupported(format!("schedule: internal: input {k} has no buffer")));
                        }
                    };
                    let b = bufs.add(a.dtype, a.numel, kind, node);
                    bufs.of.insert(a.buf.clone(), b);
                    b
                }
            };
            args.push(KernelArg { buffer: b, dtype: a.dtype, numel: a.numel, access: Access::Read });
        }
        // The expressions, in storage order where the kernel walks its node that way (every
        // decision below probes these, the kernel's own).
        let order = storage_order(&s, kb, &out_bufs);
        let exprs = match &order {
            Some(o) => {
                decisions.push((fd(kb.member_nodes().map(|n| n.0).collect(), false, &o.reason), vec![ki]));
                o.apply(kb)
            }
            None => kb.exprs.clone(),
        };
        // Stores.
        let (mut lane, mut elem, mut row, mut epi) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for m in &kb.members {
            // A node stored in another order than its logical one (never a graph output).
            let index = match (m.target, &s.layout) {
                _ if order.is_some() => m.index.clone(),
                (Target::Node(n), layout) if layout[n.index()].is_some() && !out_bufs.contains_key(&n) => {
                    let shape = &s.shapes[n.index()];
                    kb.simp(&s.storage_index(n, &delinearize(&m.index, shape)))
                }
                _ => m.index.clone(),
            };
            let targets: Vec<BufferId> = match m.target {
                Target::Node(n) => {
                    let mut t = out_bufs.get(&n).cloned().unwrap_or_default();
                    if t.is_empty() && read_nodes.contains(&n) {
                        let b = match bufs.of.get(&BufRef::Node(n)) {
                            Some(&b) => b,
                            None => {
                                let (dt, numel) = s.buf_info(&BufRef::Node(n));
                                let b = bufs.add(dt, numel, BufferKind::Intermediate, Some(n.0));
                                bufs.of.insert(BufRef::Node(n), b);
                                b
                            }
                        };
                        t.push(b);
                    }
                    t
                }
                Target::Operand(i) => {
                    let r = BufRef::Operand(i);
                    let b = match bufs.of.get(&r) {
                        Some(&b) => b,
                        None => {
                            let (dt, numel) = s.buf_info(&r);
                            let b = bufs.add(dt, numel, BufferKind::Intermediate, None);
                            bufs.of.insert(r, b);
                            b
                        }
                    };
                    vec![b]
                }
            };
            for b in targets {
                let d = &bufs.decls[b.0 as usize];
                let arg = match args.iter().position(|a| a.buffer == b && a.access == Access::Write) {
                    Some(i) => i,
                    None => {
                        args.push(KernelArg { buffer: b, dtype: d.dtype, numel: d.numel, access: Access::Write });
                        args.len() - 1
                    }
                };
                let st = Store { arg, index: index.clone(), value: m.value };
                match m.phase {
                    Phase::Lane => lane.push(st),
                    Phase::Elem => elem.push(st),
                    Phase::Row | Phase::Value(_) => row.push(st),
                    Phase::Epilogue => epi.push(st),
                    Phase::Score => {
                        return Err(Error::Unsupported(format!(
                            "schedule: internal: kernel {ki} stores a score of an attention"
                        )));
                    }
                }
            }
        }
        if lane.is_empty() && elem.is_empty() && row.is_empty() && epi.is_empty() {
            continue;
        }
        let body = match &kb.space {
            Space::Pointwise { numel } => KernelBody::Pointwise { numel: *numel, stores: lane },
            Space::Reduce { rows, len, .. } | Space::Window { rows, len } => {
                let window = matches!(kb.space, Space::Window { .. });
                let model = &s.opts.cost_model;
                let chosen = model.reduce_strategy(*rows, *len, s.caps);
                // Only a kernel that would take a thread per row asks (the cost model first: the
                // probe evaluates indices).
                let whole = (window || chosen == ReduceStrategy::ThreadPerRow)
                    .then(|| model.workgroup_per_whole_row(*len))
                    .flatten()
                    .filter(|_| reads_rows_contiguously(&exprs, *rows, *len));
                // A window kernel takes one thread per output unless its rows are stored whole.
                let strategy = match (window, &whole, chosen) {
                    (true, None, _) => ReduceStrategy::ThreadPerRow,
                    (_, Some(why), ReduceStrategy::ThreadPerRow) | (true, Some(why), _) => {
                        decisions.push((
                            fd(
                                kb.computed.iter().map(|n| n.0).collect(),
                                false,
                                &format!("reduction strategy: a workgroup per row, not a thread per row: {why}"),
                            ),
                            vec![ki],
                        ));
                        match chosen {
                            ReduceStrategy::ThreadPerRow => ReduceStrategy::Persistent,
                            st => st,
                        }
                    }
                    (false, _, st) => st,
                };
                KernelBody::Reduce(ReduceBody {
                    rows: *rows,
                    len: *len,
                    reductions: kb.reductions.clone(),
                    elem_stores: elem,
                    row_stores: row,
                    strategy,
                })
            }
            Space::Attention { batch, heads, m, dv, kv, d, .. } => {
                let spec = kb.attention.as_ref().ok_or_else(|| {
                    Error::Unsupported("schedule: internal: attention kernel without operands".into())
                })?;
                let pos = |r: &BufRef| kb.reads.iter().position(|a| a.buf == *r).unwrap_or(0);
                let op = |r: &super::attention::AttnRef| AttnOperand {
                    arg: pos(&r.buf),
                    offset: r.offset,
                    s_batch: r.s_batch,
                    s_head: r.s_head,
                    s_row: r.s_row,
                    group: r.group,
                };
                KernelBody::Attention(AttentionBody {
                    batch: *batch,
                    heads: *heads,
                    m: *m,
                    kv: *kv,
                    d: *d,
                    dv: *dv,
                    q: op(&spec.q),
                    k: op(&spec.k),
                    v: op(&spec.v),
                    in_dtype: spec.in_dtype,
                    p_dtype: spec.p_dtype,
                    score: spec.score,
                    causal: spec.causal,
                    stores: epi,
                })
            }
            Space::Matmul { batch, m, n, k, .. } => {
                let spec = kb
                    .matmul
                    .as_ref()
                    .ok_or_else(|| Error::Unsupported("schedule: internal: matmul kernel without operands".into()))?;
                let pos = |r: &BufRef| kb.reads.iter().position(|a| a.buf == *r).unwrap_or(0);
                let op = |r: &super::build::MatRef| MatOperand {
                    arg: pos(&r.buf),
                    offset: r.offset,
                    s_batch: r.s_batch,
                    s_row: r.s_row,
                    s_col: r.s_col,
                    im2col: r.im2col.clone(),
                };
                KernelBody::Matmul(MatmulBody {
                    batch: *batch,
                    m: *m,
                    n: *n,
                    k: *k,
                    a: op(&spec.a),
                    b: op(&spec.b),
                    in_dtype: spec.in_dtype,
                    acc_dtype: spec.acc_dtype,
                    tf32: spec.tf32,
                    stores: epi,
                })
            }
        };
        let idx = kernels.len();
        new_index[ki] = Some(idx);
        let (ops, origins) = ops_and_origins(&s, kb);
        let name = kernel_name(idx, &ops, kb);
        let mut k = Kernel { name, args, exprs, body, origins, ops, flops: 0.0, bytes: 0.0 };
        k.flops = flops(&k);
        k.bytes = k.args.iter().map(|a| (a.numel * a.dtype.size_bytes()) as f64).sum();
        match split_reduction(&s, &mut bufs, &k) {
            Some((mut a, mut b, reason)) => {
                a.name = format!("{}_partial", k.name);
                b.name = kernel_name(idx + 1, &b.ops, kb);
                a.flops = flops(&a);
                b.flops = flops(&b);
                decisions.push((fd(kb.member_nodes().map(|n| n.0).collect(), true, &reason), vec![ki]));
                new_index[ki] = Some(idx + 1);
                kernels.push(a);
                kernels.push(b);
            }
            None => kernels.push(k),
        }
        // What was inlined here.
        let members: BTreeSet<NodeId> = kb.member_nodes().collect();
        let (mut pw, mut mv) = (Vec::new(), Vec::new());
        for &n in &kb.computed {
            if members.contains(&n) {
                continue;
            }
            match s.kind[n.index()] {
                Kind::Movement => mv.push(n.0),
                Kind::Pointwise | Kind::Gather => pw.push(n.0),
                _ => {}
            }
        }
        if !pw.is_empty() {
            decisions.push((fd(pw, true, "inlined: pointwise producers"), vec![ki]));
        }
        if !mv.is_empty() {
            decisions.push((fd(mv, true, "inlined: movement ops (index arithmetic)"), vec![ki]));
        }
    }
    let decisions = decisions
        .into_iter()
        .map(|(mut d, mut ks)| {
            if ks.is_empty()
                && let Some(k) = d.nodes.first().and_then(|&n| s.place.get(n as usize).copied().flatten())
            {
                ks.push(k);
            }
            let origins: BTreeSet<u32> =
                d.nodes.iter().filter_map(|&n| g.nodes.get(n as usize)).map(|n| n.origin.node).collect();
            d.origins = origins.into_iter().collect();
            d.kernels = ks
                .iter()
                .filter_map(|&k| new_index.get(k).copied().flatten())
                .map(|k| kernels[k].name.clone())
                .collect();
            d
        })
        .collect();
    let memory = plan_memory(&bufs.decls, &kernels);
    Ok(Program { buffers: bufs.decls, kernels, inputs, outputs, memory, decisions, dynamic: None })
}

/// The two kernels and the reason when the cost model splits reduce kernel `k` (fusion on only).
fn split_reduction(s: &Sched, bufs: &mut Buffers, k: &Kernel) -> Option<(Kernel, Kernel, String)> {
    let KernelBody::Reduce(r) = &k.body else { return None };
    if !s.opts.fusion || !super::split::splittable(k) {
        return None;
    }
    let acc = r.reductions[0].dtype;
    if !acc.is_float() || !s.caps.dtypes.contains(&acc) {
        return None;
    }
    let want = s.opts.cost_model.reduce_split(r.rows, r.len, s.caps);
    let factor = super::split::pick_factor(r.len, want)?;
    let partial = bufs.add(acc, r.rows * factor, BufferKind::Intermediate, None);
    let strategy = |rows, len| s.opts.cost_model.reduce_strategy(rows, len, s.caps);
    let (a, b) = super::split::split(k, factor, partial, &strategy)?;
    let reason = format!(
        "split reduction: {} row(s) of {} cannot fill the device; {} partial rows of {} then a {factor}-wide combine",
        r.rows,
        r.len,
        r.rows * factor,
        r.len / factor
    );
    Some((a, b, reason))
}

fn fd(nodes: Vec<u32>, fused: bool, reason: &str) -> FusionDecision {
    FusionDecision { nodes, fused, reason: reason.to_string(), kernels: Vec::new(), origins: Vec::new() }
}

/// User op names (origins, deduplicated, in node order) and captured node ids of a kernel.
fn ops_and_origins(s: &Sched, kb: &KernelBuilder) -> (Vec<String>, Vec<u32>) {
    let mut nodes: BTreeSet<NodeId> = kb.computed.clone();
    nodes.extend(kb.member_nodes());
    let mut ops: Vec<String> = Vec::new();
    let mut origins = BTreeSet::new();
    for n in nodes {
        if matches!(s.kind[n.index()], Kind::Input(_) | Kind::Constant) {
            continue;
        }
        let o = &s.g.node(n).origin;
        origins.insert(o.node);
        if !ops.iter().any(|x| **x == *o.op) {
            ops.push(o.op.to_string());
        }
    }
    (ops, origins.into_iter().collect())
}

/// `k{i}[_{label}]_{ops}`: the label (e.g. `im2col`) when set, then up to three op names, `_etc`
/// when there are more; `copy` when nothing is computed.
fn kernel_name(i: usize, ops: &[String], kb: &KernelBuilder) -> String {
    let mut name = format!("k{i}");
    if let Some(label) = kb.label {
        name.push('_');
        name.push_str(label);
    }
    if ops.is_empty() && kb.label.is_none() {
        name.push_str(if kb.members.iter().any(|m| matches!(m.target, Target::Operand(_))) {
            "_operand_copy"
        } else {
            "_copy"
        });
        return name;
    }
    for o in ops.iter().take(3) {
        name.push('_');
        name.extend(o.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }));
    }
    if ops.len() > 3 {
        name.push_str("_etc");
    }
    name
}

/// Arithmetic expressions among `need`.
fn arith(k: &Kernel, need: &[bool]) -> f64 {
    k.exprs.iter().zip(need).filter(|(e, n)| **n && matches!(e.expr, Expr::Unary(..) | Expr::Binary(..))).count() as f64
}

/// Model FLOPs: arithmetic expressions per iteration point, by phase.
fn flops(k: &Kernel) -> f64 {
    let ids = |st: &[Store]| -> Vec<ExprId> { st.iter().map(|s| s.value).collect() };
    match &k.body {
        KernelBody::Pointwise { numel, stores } => *numel as f64 * arith(k, &needed(k, &ids(stores), stores)),
        KernelBody::Reduce(r) => {
            let pts = (r.rows * r.len) as f64;
            let mut f = 0.0;
            for red in &r.reductions {
                f += pts * (1.0 + arith(k, &needed(k, &[red.value], &[])));
            }
            f += pts * arith(k, &needed(k, &ids(&r.elem_stores), &r.elem_stores));
            f + r.rows as f64 * arith(k, &needed(k, &ids(&r.row_stores), &r.row_stores))
        }
        KernelBody::Matmul(m) => {
            let outs = (m.batch * m.m * m.n) as f64;
            2.0 * outs * m.k as f64 + outs * arith(k, &needed(k, &ids(&m.stores), &m.stores))
        }
        KernelBody::Attention(a) => {
            let rows = (a.batch * a.heads * a.m) as f64;
            let scores = rows * a.kv as f64;
            let products = 2.0 * scores * (a.d + a.dv) as f64;
            // Per score: its expression, max, subtract, exp, sum (the softmax's model count).
            let softmax = scores * (4.0 + arith(k, &needed(k, &[a.score], &[])));
            products + softmax + rows * a.dv as f64 * (1.0 + arith(k, &needed(k, &ids(&a.stores), &a.stores)))
        }
    }
}
