//! Matmul kernels: workgroup-shared-memory tiles with register blocking, and the epilogue.

use sinter_core::kernel::{ExprId, MatOperand, MatmulBody, Var};

use super::emit::{AccVal, Emitter, store_roots};
use super::ops;
use super::pointwise::{PARAMS, emit_wid_within};
use super::storage::load_scalar;
use super::types::{Ct, ct};
use super::{Body, GridSplit, MatmulTile, OuterUnit, RenderError, Tuning, WgslCaps};

/// Checks a matmul tile against the adapter's limits; `Err` says why it does not fit.
pub fn check_tile(t: &MatmulTile, caps: &WgslCaps) -> Result<(), String> {
    let MatmulTile { bm, bn, bk, tm, tn } = *t;
    if [bm, bn, bk, tm, tn].contains(&0) {
        return Err(format!("tile {t:?} has a zero extent"));
    }
    if !tm.is_multiple_of(4) || !tn.is_multiple_of(4) || !bm.is_multiple_of(tm) || !bn.is_multiple_of(tn) {
        return Err(format!("tile {t:?}: tm and tn must be multiples of 4 dividing bm and bn"));
    }
    let threads = t.threads();
    if threads > caps.max_wg() {
        return Err(format!("tile {t:?} needs {threads} threads; the adapter allows {}", caps.max_wg()));
    }
    if !(bm * bk).is_multiple_of(threads) || !(bn * bk).is_multiple_of(threads) {
        return Err(format!("tile {t:?}: the {threads} threads must divide bm*bk and bn*bk"));
    }
    let shared = (bk * (bm + 4) + bn * bk) * 4;
    if shared > caps.max_workgroup_storage_bytes {
        return Err(format!(
            "tile {t:?} needs {shared} bytes of workgroup memory; the adapter allows {}",
            caps.max_workgroup_storage_bytes
        ));
    }
    Ok(())
}

/// The default tile: 64x128x16 with 4x8 per thread when that still gives at least 256 workgroups,
/// else the half-height 32x64x16 with 4x4 (128 threads) when that gives at least 128, else
/// 32x32x16 (64 threads), else 64x64x16; the first that fits the adapter.
/// - max-autotune on an H100 through Vulkan, matmul_4096_f32: 64x128x16/4x8 3.80 ms,
///   128x128x16/8x8 4.18, 64x64x16/4x4 4.41, 128x128x8/8x8 5.49 (BENCHMARKS.md).
/// - max-autotune on an H200 through Vulkan, BERT-base's 1024 x 768 products (96 tiles of 64x128):
///   32x64 18-21% faster than 64x64 (1024x768x768 0.068 -> 0.056 ms, 1024x3072x768 0.258 ->
///   0.205; session 27); the 1024 x 3072 products (384 tiles of 64x128) keep 64x128. ViT-B/16's
///   1576 x 3072 x 768 product on 150 tiles of 64x128 (1.14 waves of an H200's 132 SMs) ran at
///   17.5 TFLOP/s, GPT-2's 1024 x 3072 x 768 on 384 tiles of 32x64 at 23.7.
fn default_tile(mm: &MatmulBody, caps: &WgslCaps) -> MatmulTile {
    let tiles = |t: &MatmulTile| {
        (mm.m as u64).div_ceil(u64::from(t.bm)) * (mm.n as u64).div_ceil(u64::from(t.bn)) * mm.batch as u64
    };
    let big = MatmulTile { bm: 64, bn: 128, bk: 16, tm: 4, tn: 8 };
    let half = MatmulTile { bm: 32, bn: 64, bk: 16, tm: 4, tn: 4 };
    let small = MatmulTile { bm: 32, bn: 32, bk: 16, tm: 4, tn: 4 };
    let fits = |t: &MatmulTile| check_tile(t, caps).is_ok();
    [(big, 256), (half, 128)]
        .into_iter()
        .find(|(t, least)| tiles(t) >= *least && fits(t))
        .map(|(t, _)| t)
        .unwrap_or(if fits(&small) { small } else { MatmulTile::DEFAULT })
}

/// The prologue both matmul kernels share: the workgroup id, the guard for a padded grid and the
/// tile's origin (`m0`, `n0`, `batch`).
pub(super) fn tile_origin(
    em: &mut Emitter<'_>,
    caps: &WgslCaps,
    workgroups: u64,
    (tiles_m, tiles_n): (u64, u64),
    (bm, bn): (u32, u32),
) {
    emit_wid_within(em, workgroups, caps);
    em.line(format!("let n0 = (wid % {tiles_n}u) * {bn}u;"));
    em.line(format!("let m0 = ((wid / {tiles_n}u) % {tiles_m}u) * {bm}u;"));
    em.line(format!("let batch = wid / {}u;", tiles_n * tiles_m));
}

/// How [`tile_origin`]'s workgroup ids cover the outer extent: batches (outermost), or the rows of a
/// product of one batch.
pub(super) fn grid_split(batch: u64, (tiles_m, tiles_n): (u64, u64), bm: u32) -> GridSplit {
    if batch == 1 {
        GridSplit { unit: OuterUnit::MatmulM, per: u64::from(bm), inner: tiles_n }
    } else {
        GridSplit { unit: OuterUnit::MatmulBatch, per: 1, inner: tiles_m * tiles_n }
    }
}

/// Each operand's start for the current batch (`a_base`, `b_base`), after [`tile_origin`].
pub(super) fn operand_bases(em: &mut Emitter<'_>, mm: &MatmulBody) {
    let base = |op: &MatOperand| -> String {
        match (op.offset, op.s_batch) {
            (0, 0) => "0u".to_string(),
            (o, 0) => format!("{o}u"),
            (0, s) => format!("batch * {s}u"),
            (o, s) => format!("{o}u + batch * {s}u"),
        }
    };
    em.line(format!("let a_base = {};", base(&mm.a)));
    em.line(format!("let b_base = {};", base(&mm.b)));
}

/// Names and ranges of the epilogue's loop variables (`batch`, `m`, `n`), shared by both matmul
/// kernels; with `vec_n` the `n` lanes are 4-wide.
pub(super) fn epilogue_vars(em: &mut Emitter<'_>, (batch, m, n): (i64, i64, i64), vec_n: bool) {
    em.names.insert(Var::Batch, "batch".into());
    em.names.insert(Var::M, "m".into());
    em.names.insert(Var::N, "n".into());
    em.ranges.insert(Var::Batch, (0, batch - 1));
    em.ranges.insert(Var::M, (0, m - 1));
    if vec_n {
        em.set_vec(Some(Var::N), true);
        em.ranges.insert(Var::N, (0, n - 4));
    } else {
        em.set_vec(None, false);
        em.ranges.insert(Var::N, (0, n - 1));
    }
}

/// Renders a matmul body.
pub(super) fn render(
    em: &mut Emitter<'_>,
    mm: &MatmulBody,
    caps: &WgslCaps,
    tuning: &Tuning,
) -> Result<Body, RenderError> {
    if mm.a.im2col.is_some() || mm.b.im2col.is_some() {
        // The WGSL cost model never asks for one (`WgslCostModel::conv_implicit`).
        return Err(RenderError::Unsupported {
            kernel: em.k.name.clone(),
            what: "an implicit im2col matmul operand (WGSL renders convolutions through an im2col buffer)".into(),
        });
    }
    if super::coop::eligible(mm, caps, tuning) {
        return super::coop::render(em, mm, caps, tuning);
    }
    let k = em.k;
    let kname = k.name.clone();
    let invalid = |msg: String| RenderError::Invalid { kernel: kname.clone(), msg };
    let t = tuning.matmul_tile.unwrap_or_else(|| default_tile(mm, caps));
    check_tile(&t, caps).map_err(|what| RenderError::Unsupported { kernel: kname.clone(), what })?;
    let acc_ct = ct(mm.acc_dtype).ok_or_else(|| super::emit::unsupported_dtype(k, mm.acc_dtype))?;
    if acc_ct == Ct::Bool {
        return Err(invalid(format!("matmul accumulator dtype {}", mm.acc_dtype)));
    }
    for (name, op) in [("a", &mm.a), ("b", &mm.b)] {
        let a = em.args.get(op.arg).ok_or_else(|| invalid(format!("operand {name} argument {}", op.arg)))?;
        if a.dtype != mm.in_dtype {
            return Err(invalid(format!("operand {name} is {}, the matmul's input dtype is {}", a.dtype, mm.in_dtype)));
        }
    }
    let (batch, m, n, kdim) = (mm.batch as u64, mm.m as u64, mm.n as u64, mm.k as u64);
    if [batch, m, n, kdim].iter().any(|&x| x > u64::from(u32::MAX) / 2) {
        return Err(RenderError::Unsupported {
            kernel: kname.clone(),
            what: format!("matmul {batch}x{m}x{n}x{kdim} exceeds the 32-bit index space"),
        });
    }
    let MatmulTile { bm, bn, bk, tm, tn } = t;
    let threads = t.threads();
    let txn = bn / tn;
    let tiles_n = n.div_ceil(u64::from(bn));
    let tiles_m = m.div_ceil(u64::from(bm));
    let workgroups = tiles_n * tiles_m * batch;
    let acc_s = acc_ct.scalar();
    let tnv = tn / 4;
    let tmv = tm / 4;
    // A rows are padded by one vec4 so the transposing writes of the staging loop spread over banks.
    let sa_stride = bm / 4 + 1;
    let globals = vec![
        format!("var<workgroup> sa: array<vec4<{acc_s}>, {}>; // A tile, [k][m] (rows padded by 4)", bk * sa_stride),
        format!("var<workgroup> sb: array<vec4<{acc_s}>, {}>; // B tile, [k][n]", bk * bn / 4),
    ];
    let summary = format!(
        "matmul batch {batch} x m {m} x n {n} x k {kdim} ({} -> {}), tile {bm}x{bn}x{bk}, {tm}x{tn} per thread, \
         {threads} threads, {workgroups} workgroups",
        mm.in_dtype, mm.acc_dtype
    );
    let strategy = format!("matmul {bm}x{bn}x{bk} {tm}x{tn}");
    if workgroups == 0 {
        return Ok(Body {
            globals,
            params: PARAMS.to_string(),
            workgroup_size: [threads, 1, 1],
            workgroups: 0,
            vectorized: false,
            strategy,
            summary,
            split: None,
        });
    }

    tile_origin(em, caps, workgroups, (tiles_m, tiles_n), (bm, bn));
    em.line(format!("let tx = lid % {txn}u;"));
    em.line(format!("let ty = lid / {txn}u;"));
    operand_bases(em, mm);
    let zero = acc_ct.zero();
    em.line(format!("var acc: array<vec4<{acc_s}>, {}>;", tm * tnv));
    em.open(format!("for (var k0 = 0u; k0 < {kdim}u; k0 = k0 + {bk}u)"));
    // Stage the A tile (bm x bk) and the B tile (bk x bn) into shared memory, coalesced along the operand's
    // contiguous dimension, zero-filled at the edges.
    for (which, op, rows_name, rows_ext, rows_tile) in [("a", &mm.a, "m", m, bm), ("b", &mm.b, "n", n, bn)] {
        let arg = em.args[op.arg].clone();
        // For A, (row, col) = (m, k); for B, (k, n). `contig_k`: consecutive threads walk k.
        let contig_k = if which == "a" { op.s_col == 1 || op.s_row != 1 } else { op.s_col != 1 && op.s_row == 1 };
        // s_r: stride of the tile-row dimension (m or n), s_c: stride of k.
        let (s_r, s_c) = if which == "a" { (op.s_row, op.s_col) } else { (op.s_col, op.s_row) };
        let rr = format!("{rows_name}{rows_name}");
        let origin = if which == "a" { "m0" } else { "n0" };
        let (sh, stride) = if which == "a" { ("sa", sa_stride) } else { ("sb", bn / 4) };
        // 4 consecutive elements per load along the contiguous dimension when everything is 4-aligned.
        let (cont_stride, cont_ext, other_stride) =
            if contig_k { (s_c as u64, kdim, s_r as u64) } else { (s_r as u64, rows_ext, s_c as u64) };
        let vec_stage = tuning.vectorize
            && cont_stride == 1
            && cont_ext.is_multiple_of(4)
            && (op.offset as u64).is_multiple_of(4)
            && other_stride.is_multiple_of(4)
            && (op.s_batch as u64).is_multiple_of(4)
            && (rows_tile * bk / 4).is_multiple_of(threads)
            && rows_tile * bk / 4 >= threads
            && bk.is_multiple_of(4);
        if let Some(u) = em.uses.get_mut(op.arg) {
            if vec_stage {
                u.contig_loads += 1;
            } else {
                u.other_loads += 1;
            }
        }
        em.line(format!("// stage {} ({} x {bk})", which.to_uppercase(), rows_tile));
        if vec_stage {
            let per_thread = rows_tile * bk / 4 / threads;
            em.open(format!("for (var l = 0u; l < {per_thread}u; l = l + 1u)"));
            em.line(format!("let e = lid + l * {threads}u;"));
            if contig_k {
                em.line(format!("let kk = (e % {}u) * 4u;", bk / 4));
                em.line(format!("let {rr} = e / {}u;", bk / 4));
            } else {
                em.line(format!("let {rr} = (e % {}u) * 4u;", rows_tile / 4));
                em.line(format!("let kk = e / {}u;", rows_tile / 4));
            }
            em.line(format!("let g{rows_name} = {origin} + {rr};"));
            em.line("let gk = k0 + kk;");
            em.line(format!("var x: vec4<{acc_s}> = vec4<{acc_s}>({zero});"));
            em.open(format!("if (g{rows_name} < {rows_ext}u && gk < {kdim}u)"));
            em.line(format!("let i = {which}_base + g{rows_name} * {s_r}u + gk * {s_c}u;"));
            let in_ct = ct(mm.in_dtype).unwrap_or(Ct::F32);
            let (pre, v) = super::storage::load_vec(&arg, "i", "ld", in_ct);
            for p in pre {
                em.line(p);
            }
            let v = ops::cast(&v, mm.in_dtype, mm.acc_dtype, true, &mut em.h).map_err(&invalid)?;
            em.line(format!("x = {v};"));
            em.close();
            if contig_k {
                for (c, comp) in ["x", "y", "z", "w"].iter().enumerate() {
                    em.line(format!("{sh}[(kk + {c}u) * {stride}u + {rr} / 4u][{rr} % 4u] = x.{comp};"));
                }
            } else {
                em.line(format!("{sh}[kk * {stride}u + {rr} / 4u] = x;"));
            }
            em.close();
            continue;
        }
        let per_thread = rows_tile * bk / threads;
        em.open(format!("for (var l = 0u; l < {per_thread}u; l = l + 1u)"));
        em.line(format!("let e = lid + l * {threads}u;"));
        if contig_k {
            em.line(format!("let kk = e % {bk}u;"));
            em.line(format!("let {rr} = e / {bk}u;"));
        } else {
            em.line(format!("let {rr} = e % {rows_tile}u;"));
            em.line(format!("let kk = e / {rows_tile}u;"));
        }
        em.line(format!("let g{rows_name} = {origin} + {rr};"));
        em.line("let gk = k0 + kk;");
        em.line(format!("var x: {acc_s} = {zero};"));
        em.open(format!("if (g{rows_name} < {rows_ext}u && gk < {kdim}u)"));
        em.line(format!("let i = {which}_base + g{rows_name} * {s_r}u + gk * {s_c}u;"));
        let (pre, v) = load_scalar(&arg, "i", "ld");
        for p in pre {
            em.line(p);
        }
        let v = ops::cast(&v, mm.in_dtype, mm.acc_dtype, false, &mut em.h).map_err(&invalid)?;
        em.line(format!("x = {v};"));
        em.close();
        em.line(format!("{sh}[kk * {stride}u + {rr} / 4u][{rr} % 4u] = x;"));
        em.close();
    }
    em.line("workgroupBarrier();");
    em.open(format!("for (var kk = 0u; kk < {bk}u; kk = kk + 1u)"));
    for q in 0..tmv {
        em.line(format!("let ra{q} = sa[kk * {sa_stride}u + ty * {tmv}u + {q}u];"));
    }
    for q in 0..tnv {
        // A thread's column groups are spaced `txn` apart: conflict-free reads, coalesced stores.
        em.line(format!("let rb{q} = sb[kk * {}u + {}u + tx];", bn / 4, q * txn));
    }
    let comps = ["x", "y", "z", "w"];
    for i in 0..tm {
        for jv in 0..tnv {
            let a = format!("vec4<{acc_s}>(ra{}.{})", i / 4, comps[(i % 4) as usize]);
            let slot = i * tnv + jv;
            if acc_ct == Ct::F32 {
                em.line(format!("acc[{slot}] = fma({a}, rb{jv}, acc[{slot}]);"));
            } else {
                em.line(format!("acc[{slot}] = acc[{slot}] + {a} * rb{jv};"));
            }
        }
    }
    em.close();
    em.line("workgroupBarrier();");
    em.close();

    // Epilogue.
    let vec_n = tuning.vectorize && n.is_multiple_of(4);
    epilogue_vars(em, (batch as i64, m as i64, n as i64), vec_n);
    let roots: Vec<ExprId> = mm.stores.iter().flat_map(store_roots).collect();
    em.line("// epilogue");
    for i in 0..tm {
        em.open("");
        em.line(format!("let m = m0 + ty * {tm}u + {i}u;"));
        em.open(format!("if (m < {m}u)"));
        for jv in 0..tnv {
            let slot = i * tnv + jv;
            if vec_n {
                em.open("");
                em.line(format!("let n = n0 + tx * 4u + {}u;", jv * txn * 4));
                em.open(format!("if (n < {n}u)"));
                em.acc.insert(0, AccVal { name: format!("acc[{slot}]"), dtype: mm.acc_dtype, vec: true });
                em.emit_closure(&roots, &|_| true)?;
                for s in &mm.stores {
                    em.emit_store(s)?;
                }
                em.close();
                em.close();
            } else {
                for c in 0..4 {
                    em.open("");
                    em.line(format!("let n = n0 + tx * 4u + {}u;", jv * txn * 4 + c));
                    em.open(format!("if (n < {n}u)"));
                    em.acc.insert(
                        0,
                        AccVal { name: format!("acc[{slot}].{}", comps[c as usize]), dtype: mm.acc_dtype, vec: false },
                    );
                    em.emit_closure(&roots, &|_| true)?;
                    for s in &mm.stores {
                        em.emit_store(s)?;
                    }
                    em.close();
                    em.close();
                }
            }
        }
        em.close();
        em.close();
    }
    Ok(Body {
        globals,
        params: PARAMS.to_string(),
        workgroup_size: [threads, 1, 1],
        workgroups,
        vectorized: vec_n,
        strategy,
        summary,
        split: Some(grid_split(batch, (tiles_m, tiles_n), bm)),
    })
}
