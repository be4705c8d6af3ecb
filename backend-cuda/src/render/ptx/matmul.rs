//! Matmul bodies in PTX: the CUDA-core product's one-step `cp.async` form
//! ([`super::super::matmul`], where `direct_copy_bytes` holds), for f32 operands into f32.
//!
//! The launch, the tile and the [`Rendered`] metadata are the C++ renderer's: both call
//! `matmul::plan`. Block `tile = ctaid.x` computes output rows `m0 = tile / tiles_n % tiles_m *
//! bm` and columns `n0 = tile % tiles_n * bn` of batch `tile / (tiles_n * tiles_m)`; thread `tid`
//! is column group `tx = tid % (bn / tn)` and row group `ty = tid / (bn / tn)`, its rows
//! `m0 + ty * 4 + i / 4 * (bm / (tm / 4)) + i % 4` (likewise its columns). The whole reduction is
//! one step: every operand element of the block goes to the shared tiles `sa[bk][bm + 4]` (A,
//! k-major) and `sb[bk][bn + 4]` by a 4-byte `cp.async` (source size 0, so zero, past the edges
//! of m, n and k: the zeros add nothing to the sums), element `e = tid + l * threads` of operand
//! side at `[e % bk][e / bk]` where the operand is contiguous along k, else `[e / rows][e %
//! rows]` (`matmul::Side`); then `cp.async.wait_group 0` and `bar.sync`, then per `kk` a
//! thread's rows and columns as 16-byte `ld.shared.v4.f32` and `fma.rn.f32` into `acc[i][j]` in
//! `kk` order (the C++ `fmaf`s: the same sums bit for bit), then the epilogue per output element
//! through [`Lower`] with `Acc(0)` the accumulator, guarded by `m < M` and `n < N` where the
//! tiles overhang.
//!
//! Invariants: every thread issues its copies and reaches the one barrier (no guard before it);
//! shared addresses are 32-bit `.shared` offsets of the entry's own arrays (named after the
//! entry, so modules combine); every vector read is 16-byte aligned (`bm + 4`, `4 * ty` and the
//! run stride `bm / (tm / 4)` are multiples of 4 elements); a source address past an edge is the
//! argument's own first element (as the C++ `off = in ? .. : 0`), never read.
//!
//! Refused (CUDA C++ renders them): tensor-core products (and tunings naming an `MmaTile`),
//! tiles of several steps along k (their register staging is what the C++ writes), operands or
//! accumulators other than f32, implicit im2col operands, 64-bit indices or operands of 2^31
//! elements, empty launches, and epilogues [`check`] refuses.

use std::collections::HashMap;

use sinter_core::DType;
use sinter_core::kernel::analysis::{acc_uses, depends_on, store_roots};
use sinter_core::kernel::{ExprId, Kernel, MatmulBody, Var};

use super::super::emit::Emitter;
use super::super::index::needs_wide;
use super::super::matmul::{MatmulTile, Plan, Side, Template, partial_unroll, plan, side};
use super::super::{CudaCaps, Rendered, Tuning, entry_name};
use super::expr::{Lower, check, div_rem, element_address};
use super::{Asm, Class, Refusal, module, refuse};

/// Renders a matmul body (see [`super::render`]).
pub(crate) fn render(k: &Kernel, mm: &MatmulBody, caps: &CudaCaps, t: &Tuning) -> Result<Rendered, Refusal> {
    let em = Emitter::new(k, false);
    // A tuning the C++ renderer would refuse is refused here too; it then says why.
    let p = match plan(&em, mm, caps, t).map_err(|e| Refusal(format!("tuning: {e}")))? {
        Template::TensorCores => return refuse("a tensor-core product (the mma templates are CUDA C++)"),
        Template::Cores(p) => p,
    };
    if mm.in_dtype != DType::F32 || mm.acc_dtype != DType::F32 {
        return refuse(format!("operands {} accumulating in {} (f32 into f32 only)", mm.in_dtype, mm.acc_dtype));
    }
    if mm.a.im2col.is_some() || mm.b.im2col.is_some() {
        return refuse("an implicit im2col operand");
    }
    if needs_wide(k) || [&mm.a, &mm.b].iter().any(|op| k.args[op.arg].numel > i32::MAX as usize) {
        return refuse("64-bit index arithmetic");
    }
    if p.body.grid[0] == 0 {
        return refuse("an empty launch");
    }
    let tile = p.tile;
    if p.direct != Some(4) {
        return refuse(format!(
            "{} steps of {} along k (only the one-step cp.async form is PTX)",
            mm.k.div_ceil(tile.bk as usize),
            tile.bk
        ));
    }
    let roots: Vec<ExprId> = mm.stores.iter().flat_map(store_roots).collect();
    check(k, &roots, &mm.stores, &[Var::Batch, Var::M, Var::N])?;

    let name = entry_name(&k.name);
    // No `.minnctapersm` for the C++'s `__launch_bounds__(threads, 2)`: given it, ptxas spent
    // the 128 registers it allows on hoisted shared loads and spilled the 64x64x16 tile; without
    // it every candidate tile takes fewer registers than NVRTC's build (40 for 4x4, at most 109
    // for 8x8, so two 256-thread blocks still fit an SM).
    let mut asm = Asm::new();
    let base = asm.params(k);
    let c = coordinates(&mut asm, mm, &p);
    asm.comment(p.body.summary.clone());
    let acc: Vec<Vec<String>> = (0..tile.tm)
        .map(|_| {
            (0..tile.tn)
                .map(|_| {
                    let r = asm.reg(Class::F32);
                    asm.op(format!("mov.f32 {r}, 0f00000000"));
                    r
                })
                .collect()
        })
        .collect();
    asm.comment("the whole reduction in one step: every operand element of the block copied to shared memory (cp.async, zero past the edges)");
    let mut shared = Vec::new();
    for (which, op, origin) in [("a", &mm.a, &c.m0), ("b", &mm.b, &c.n0)] {
        let s = side(mm, tile, which);
        let array = format!("{name}_s{which}");
        asm.decls.push(format!(".shared .align 16 .f32 {array}[{}];", tile.bk * (s.rows + 4)));
        let sh = asm.reg(Class::B32);
        asm.op(format!("mov.u32 {sh}, {array}"));
        // The operand's first element for this batch.
        let first = asm.reg(Class::B32);
        if mm.batch == 1 || op.s_batch == 0 {
            asm.op(format!("mov.u32 {first}, {}", op.offset as u32));
        } else {
            asm.op(format!("mad.lo.u32 {first}, {}, {}, {}", c.batch, op.s_batch as u32, op.offset as u32));
        }
        copy_operand(&mut asm, mm, tile, &s, &c.tid, (&base[op.arg], &first, origin, &sh));
        shared.push(sh);
    }
    asm.op("cp.async.commit_group");
    asm.op("cp.async.wait_group 0");
    asm.op("bar.sync 0");
    product(&mut asm, tile, (&shared[0], &shared[1]), (&c.ty, &c.tx), &acc);
    epilogue(&em, &mut asm, mm, tile, &base, &c, &acc)?;
    asm.op("ret");

    let body = p.body;
    let comments = vec![
        body.summary.clone(),
        format!("one step of {} along k: cp.async to shared memory, then the FMAs", tile.bk),
    ];
    let source = module(k, caps, &comments, body.block[0], &asm);
    Ok(body.into_rendered(k, caps, t, source, " ptx"))
}

/// The block's and thread's coordinates (`.b32` registers).
struct Coords {
    /// The block's first output row.
    m0: String,
    /// The block's first output column.
    n0: String,
    /// The block's batch.
    batch: String,
    /// The thread's column group.
    tx: String,
    /// The thread's row group.
    ty: String,
    /// The thread index.
    tid: String,
}

/// Writes the block's tile and batch and the thread's groups as `matmul::render` computes them.
fn coordinates(asm: &mut Asm, mm: &MatmulBody, p: &Plan) -> Coords {
    let (tile, tid) = (asm.reg(Class::B32), asm.reg(Class::B32));
    asm.op(format!("mov.u32 {tile}, %ctaid.x"));
    asm.op(format!("mov.u32 {tid}, %tid.x"));
    // Grids are below 2^31 blocks (`matmul::plan`), so the tile counts fit 32 bits.
    let last = u64::from(p.body.grid[0]) - 1;
    let (rows_of_tiles, col) = div_rem(asm, &tile, p.tiles_n as u32, last);
    let n0 = asm.reg(Class::B32);
    asm.op(format!("mul.lo.u32 {n0}, {col}, {}", p.tile.bn));
    let (_, row) = div_rem(asm, &rows_of_tiles, p.tiles_m as u32, last / p.tiles_n);
    let m0 = asm.reg(Class::B32);
    asm.op(format!("mul.lo.u32 {m0}, {row}, {}", p.tile.bm));
    let batch = if mm.batch == 1 {
        let b = asm.reg(Class::B32);
        asm.op(format!("mov.u32 {b}, 0"));
        b
    } else {
        div_rem(asm, &tile, (p.tiles_n * p.tiles_m) as u32, last).0
    };
    let (ty, tx) = div_rem(asm, &tid, p.tile.bn / p.tile.tn, u64::from(p.tile.threads()) - 1);
    Coords { m0, n0, batch, tx, ty, tid }
}

/// Copies thread `tid`'s [`Side::per`] elements of one operand into its shared tile (`global`:
/// the argument's address, `first`: the batch's first element, `origin`: `m0` or `n0`, `sh`: the
/// tile's shared address), in a loop of [`partial_unroll`] copies a trip as the C++ renderer's.
/// Element `e = tid + l * threads` sits at `major = e / d`, `minor = e % d` (`d` = `bk` where
/// consecutive elements walk k, else `rows`); both advance by `threads`' quotient and remainder
/// with one carry, so no trip divides.
fn copy_operand(
    asm: &mut Asm,
    mm: &MatmulBody,
    t: MatmulTile,
    s: &Side,
    tid: &str,
    (global, first, origin, sh): (&str, &str, &str, &str),
) {
    let threads = t.threads();
    let d = if s.contig_k { t.bk } else { s.rows };
    let (major, minor) = div_rem(asm, tid, d, u64::from(threads) - 1);
    let (kk, rr) = if s.contig_k { (&minor, &major) } else { (&major, &minor) };
    let (step_major, step_minor) = (threads / d, threads % d);
    let guard_r = !s.ext.is_multiple_of(s.rows as usize);
    let guard_k = !mm.k.is_multiple_of(t.bk as usize);
    let unroll = partial_unroll(s.per);
    let trips = s.per / unroll;
    let (count, top) = (asm.reg(Class::B32), asm.label());
    if trips > 1 {
        asm.op(format!("mov.u32 {count}, 0"));
        asm.place(&top);
    }
    for u in 0..unroll {
        // The element's global index (wrapping past the edges, where it is not used).
        let gr = asm.reg(Class::B32);
        asm.op(format!("add.u32 {gr}, {origin}, {rr}"));
        let mut idx = first.to_string();
        for (v, stride) in [(&gr, s.s_r), (kk, s.s_k)] {
            if stride == 0 {
                continue;
            }
            let r = asm.reg(Class::B32);
            match stride {
                1 => asm.op(format!("add.u32 {r}, {idx}, {v}")),
                st => asm.op(format!("mad.lo.u32 {r}, {v}, {}, {idx}", st as u32)),
            }
            idx = r;
        }
        let mut inside: Option<String> = None;
        for (on, v, ext) in [(guard_r, &gr, s.ext), (guard_k, kk, mm.k)] {
            if !on {
                continue;
            }
            let p = asm.reg(Class::Pred);
            asm.op(format!("setp.lt.u32 {p}, {v}, {ext}"));
            inside = Some(match inside {
                None => p,
                Some(q) => {
                    let both = asm.reg(Class::Pred);
                    asm.op(format!("and.pred {both}, {q}, {p}"));
                    both
                }
            });
        }
        let size = match &inside {
            Some(p) => {
                let (off, size) = (asm.reg(Class::B32), asm.reg(Class::B32));
                asm.op(format!("selp.b32 {off}, {idx}, 0, {p}"));
                asm.op(format!("selp.b32 {size}, 4, 0, {p}"));
                idx = off;
                format!(", {size}")
            }
            None => String::new(),
        };
        let src = element_address(asm, global, &idx, 4);
        // Shared byte address of [kk][rr]: (kk * (rows + 4) + rr) * 4.
        let (cell, bytes, dst) = (asm.reg(Class::B32), asm.reg(Class::B32), asm.reg(Class::B32));
        asm.op(format!("mad.lo.u32 {cell}, {kk}, {}, {rr}", s.rows + 4));
        asm.op(format!("shl.b32 {bytes}, {cell}, 2"));
        asm.op(format!("add.u32 {dst}, {sh}, {bytes}"));
        asm.op(format!("cp.async.ca.shared.global [{dst}], [{src}], 4{size}"));
        if u + 1 < unroll || trips > 1 {
            advance(asm, (&major, &minor), (step_major, step_minor), d);
        }
    }
    loop_back(asm, (&count, &top), trips);
}

/// The end of a loop of `trips` trips counted in `count` from `top` (nothing for one trip).
fn loop_back(asm: &mut Asm, (count, top): (&str, &str), trips: u32) {
    if trips > 1 {
        let more = asm.reg(Class::Pred);
        asm.op(format!("add.u32 {count}, {count}, 1"));
        asm.op(format!("setp.lt.u32 {more}, {count}, {trips}"));
        asm.op(format!("@{more} bra {top}"));
    }
}

/// `(major, minor) = divmod(major * d + minor + step, d)` for `minor < d`, `step = step_major *
/// d + step_minor` (one carry: `minor + step_minor < 2 d`).
fn advance(asm: &mut Asm, (major, minor): (&str, &str), (step_major, step_minor): (u32, u32), d: u32) {
    if step_major > 0 {
        asm.op(format!("add.u32 {major}, {major}, {step_major}"));
    }
    if step_minor > 0 {
        let carry = asm.reg(Class::Pred);
        asm.op(format!("add.u32 {minor}, {minor}, {step_minor}"));
        asm.op(format!("setp.ge.u32 {carry}, {minor}, {d}"));
        asm.op(format!("@{carry} sub.u32 {minor}, {minor}, {d}"));
        asm.op(format!("@{carry} add.u32 {major}, {major}, 1"));
    }
}

/// Multiplies the shared tiles into `acc`: per `kk`, the thread's `tm` rows of A and `tn`
/// columns of B as 16-byte shared loads, then `tm x tn` fused multiply-adds (the C++ loop's
/// order), in a loop of [`partial_unroll`] `kk`s a trip. The C++ unrolls steps of up to 16
/// whole; at most 8 a trip here bounds the registers ptxas spends hoisting shared loads (under
/// `.minnctapersm 2`, a 16-deep step unrolled whole spilled the 8x8 tile).
fn product(asm: &mut Asm, t: MatmulTile, (sa, sb): (&str, &str), (ty, tx): (&str, &str), acc: &[Vec<String>]) {
    let MatmulTile { bm, bn, bk, tm, tn } = t;
    asm.comment(format!("{bk} steps along k: {tm}x{tn} FMAs each"));
    // This thread's first row (column) of the tiles at kk = 0: 4 * ty (4 * tx) elements in.
    let (pa, pb) = (asm.reg(Class::B32), asm.reg(Class::B32));
    for (p, s, g) in [(&pa, sa, ty), (&pb, sb, tx)] {
        let off = asm.reg(Class::B32);
        asm.op(format!("shl.b32 {off}, {g}, 4"));
        asm.op(format!("add.u32 {p}, {s}, {off}"));
    }
    let unroll = partial_unroll(bk);
    let trips = bk / unroll;
    let (count, top) = (asm.reg(Class::B32), asm.label());
    if trips > 1 {
        asm.op(format!("mov.u32 {count}, 0"));
        asm.place(&top);
    }
    let (row_a, row_b) = (4 * (bm + 4), 4 * (bn + 4));
    for u in 0..unroll {
        let mut vals = Vec::new();
        for (p, row, n, width) in [(&pa, row_a, tm, bm), (&pb, row_b, tn, bn)] {
            let mut regs = Vec::new();
            for q in 0..n / 4 {
                let v: Vec<String> = (0..4).map(|_| asm.reg(Class::F32)).collect();
                let off = u * row + 4 * q * (width / (n / 4));
                asm.op(format!("ld.shared.v4.f32 {{{}}}, [{p}+{off}]", v.join(", ")));
                regs.extend(v);
            }
            vals.push(regs);
        }
        for (i, ra) in vals[0].iter().enumerate() {
            for (j, rb) in vals[1].iter().enumerate() {
                let a = &acc[i][j];
                asm.op(format!("fma.rn.f32 {a}, {ra}, {rb}, {a}"));
            }
        }
    }
    if trips > 1 {
        asm.op(format!("add.u32 {pa}, {pa}, {}", unroll * row_a));
        asm.op(format!("add.u32 {pb}, {pb}, {}", unroll * row_b));
    }
    loop_back(asm, (&count, &top), trips);
}

/// The epilogue per output element: per row `i` (guarded where `m` overhangs), the values that do
/// not depend on `n` once, then per column `j` (guarded where `n` overhangs) the rest with
/// `Acc(0) = acc[i][j]`, and the stores.
fn epilogue(
    em: &Emitter<'_>,
    asm: &mut Asm,
    mm: &MatmulBody,
    t: MatmulTile,
    base: &[String],
    c: &Coords,
    acc: &[Vec<String>],
) -> Result<(), Refusal> {
    let k = em.k;
    let MatmulTile { bm, bn, tm, tn, .. } = t;
    asm.comment("epilogue, per output element");
    let roots: Vec<ExprId> = mm.stores.iter().flat_map(store_roots).collect();
    let (dep_n, accs) = (depends_on(k, Var::N), acc_uses(k));
    // Element `i` of a thread's `t` rows (columns) of a tile of `b`, the first at `first`:
    // `i / 4 * (b / (t / 4)) + i % 4` past it.
    let firsts: Vec<String> = [(&c.m0, &c.ty), (&c.n0, &c.tx)]
        .into_iter()
        .map(|(origin, g)| {
            let r = asm.reg(Class::B32);
            asm.op(format!("mad.lo.u32 {r}, {g}, 4, {origin}"));
            r
        })
        .collect();
    let at = |asm: &mut Asm, first: &str, i: u32, (b, t): (u32, u32)| {
        let r = asm.reg(Class::B32);
        asm.op(format!("add.u32 {r}, {first}, {}", i / 4 * (b / (t / 4)) + i % 4));
        r
    };
    let cols: Vec<String> = (0..tn).map(|j| at(asm, &firsts[1], j, (bn, tn))).collect();
    let (m_guard, n_guard) = (!mm.m.is_multiple_of(bm as usize), !mm.n.is_multiple_of(bn as usize));
    for i in 0..tm {
        let m = at(asm, &firsts[0], i, (bm, tm));
        let skip_row = m_guard.then(|| {
            let (out, skip) = (asm.reg(Class::Pred), asm.label());
            asm.op(format!("setp.ge.u32 {out}, {m}, {}", mm.m));
            asm.op(format!("@{out} bra {skip}"));
            skip
        });
        {
            let fixed = HashMap::from([(Var::Batch, c.batch.clone()), (Var::M, m)]);
            let mut low = Lower::new(em, asm, base.to_vec(), (Var::N, 1), fixed);
            low.outer_exprs(&roots, &|e| !dep_n[e as usize] && accs[e as usize].is_none())?;
            for (j, n) in cols.iter().enumerate() {
                let skip = n_guard.then(|| {
                    let (out, skip) = (low.asm.reg(Class::Pred), low.asm.label());
                    low.asm.op(format!("setp.ge.u32 {out}, {n}, {}", mm.n));
                    low.asm.op(format!("@{out} bra {skip}"));
                    skip
                });
                low.start_group(n);
                low.acc.insert(0, acc[i as usize][j].clone());
                low.exprs(&roots)?;
                mm.stores.iter().try_for_each(|s| low.store(s))?;
                if let Some(skip) = skip {
                    low.asm.place(&skip);
                }
            }
        }
        if let Some(skip) = skip_row {
            asm.place(&skip);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use sinter_core::DType;
    use sinter_core::ir::{BinaryOp, UnaryOp};
    use sinter_core::kernel::{
        Access, BufferId, Expr, ExprId, Index, Kernel, KernelArg, KernelBody, MatOperand, MatmulBody, Store, TypedExpr,
        Var,
    };

    use super::super::super::{CudaCaps, Tuning, render};
    use super::super::{is_ptx, ptxas};

    /// `y = a @ b` (or `relu(a @ b + bias[n])` with `epilogue`) of f32 `[batch, m, k] x [k, n]`,
    /// B `[n, k]` where `b_t`.
    fn product(batch: usize, m: usize, n: usize, k: usize, epilogue: bool, b_t: bool) -> Kernel {
        let arg = |b, numel, access| KernelArg { buffer: BufferId(b), dtype: DType::F32, numel, access };
        let f32e = |expr| TypedExpr { expr, dtype: DType::F32 };
        let mut exprs = vec![f32e(Expr::Acc(0))];
        if epilogue {
            exprs.push(f32e(Expr::Load { arg: 2, index: Index::var(Var::N) }));
            exprs.push(f32e(Expr::Binary(BinaryOp::Add, ExprId(0), ExprId(1))));
            exprs.push(f32e(Expr::Unary(UnaryOp::Relu, ExprId(2))));
        }
        let value = ExprId(exprs.len() as u32 - 1);
        let out =
            Index::var(Var::Batch).mul((m * n) as i64).add(Index::var(Var::M).mul(n as i64)).add(Index::var(Var::N));
        let y = if epilogue { 3 } else { 2 };
        let mut args = vec![arg(0, batch * m * k, Access::Read), arg(1, k * n, Access::Read)];
        if epilogue {
            args.push(arg(2, n, Access::Read));
        }
        args.push(arg(3, batch * m * n, Access::Write));
        let b = if b_t {
            MatOperand { arg: 1, offset: 0, s_batch: 0, s_row: 1, s_col: k, im2col: None }
        } else {
            MatOperand { arg: 1, offset: 0, s_batch: 0, s_row: n, s_col: 1, im2col: None }
        };
        Kernel {
            name: format!("k0_matmul_{batch}x{m}x{n}x{k}"),
            args,
            exprs,
            body: KernelBody::Matmul(MatmulBody {
                batch,
                m,
                n,
                k,
                a: MatOperand { arg: 0, offset: 0, s_batch: m * k, s_row: k, s_col: 1, im2col: None },
                b,
                in_dtype: DType::F32,
                acc_dtype: DType::F32,
                tf32: false,
                stores: vec![Store { arg: y, index: out, value }],
            }),
            origins: vec![],
            ops: vec!["matmul".into()],
            flops: 0.0,
            bytes: 0.0,
        }
    }

    /// Products of awkward sizes (every edge guard, one-element tiles, k of 1, odd k) with and
    /// without an epilogue, B in both layouts, one and three batches: written in PTX, assembled by
    /// ptxas without spills or a stack frame, in a sane number of registers (32-64 measured with
    /// ptxas 13.0; NVRTC's builds of a few of them took 32-56).
    #[test]
    fn awkward_products_assemble() {
        let sizes = [1, 7, 29, 100];
        let mut assembled = 0;
        for (i, &m) in sizes.iter().enumerate() {
            for (j, &n) in sizes.iter().enumerate() {
                for (l, &k) in sizes.iter().enumerate() {
                    let (b_t, batch) = ((i + j + l) % 2 == 1, if (i + l) % 3 == 0 { 3 } else { 1 });
                    for epi in [false, true] {
                        let kern = product(batch, m, n, k, epi, b_t);
                        let r = render(&kern, &CudaCaps::hopper(), &Tuning::default()).unwrap();
                        assert!(
                            is_ptx(&r.source),
                            "{}: {}",
                            kern.name,
                            super::super::why_not(&kern, &CudaCaps::hopper(), &Tuning::default())
                        );
                        let Some(res) = ptxas(&r.source) else { return };
                        let log = res.unwrap_or_else(|log| panic!("{}: ptxas: {log}\n{}", kern.name, r.source));
                        assert!(!log.contains("warning"), "{}: {log}", kern.name);
                        let res = crate::nvrtc::resources(&log, &r.name).expect("resources");
                        assert_eq!(res.spill_bytes, 0, "{}: {log}", kern.name);
                        assert!(log.contains(" 0 bytes stack frame"), "{}: {log}", kern.name);
                        eprintln!("{}: {} registers", kern.name, res.registers);
                        assert!(res.registers <= 96, "{}: {} registers\n{log}", kern.name, res.registers);
                        assembled += 1;
                    }
                }
            }
        }
        assert_eq!(assembled, 128);
    }
}
