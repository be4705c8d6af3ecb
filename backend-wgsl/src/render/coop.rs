//! Matmuls on cooperative matrices (`coop_mat16x16`, tensor cores on NVIDIA through
//! `VK_KHR_cooperative_matrix`).
//!
//! A workgroup of 8 subgroups computes a 128x128 output tile: the subgroups form a 2x4 grid, each owning a
//! 64x32 block held as 4x2 `coop_mat16x16<f32, C>` accumulators. Per step of `bk` = 64 along k (32 for
//! shallow products, small adapters or where the tuner asks, [`Tuning::coop_depth`]) the workgroup
//! stages the A (128 x bk) and B (bk x 128) tiles into shared memory as f16, rows padded by 16 bytes
//! (zero-filled at the edges, 4-wide loads where the operand is contiguous and aligned; the next step's
//! loads held in registers, unconverted, while this step multiplies), then each subgroup loads its
//! fragments with `coopLoadT` and multiplies with `coopMultiplyAdd`. The epilogue stores each
//! accumulator to a per-subgroup 16x16 scratch in shared memory and the subgroup's lanes evaluate the kernel's epilogue expressions
//! element by element, with the bounds checks of the edges.
//!
//! Used for f16 inputs with f32 accumulation when the adapter reports a 16x16x16 f16/f32 configuration and
//! a fixed subgroup size, for bf16 inputs only when [`WgslCaps::bf16_matmul_as_f16`] allows converting
//! them to f16, and for f32 inputs only when [`WgslCaps::f32_matmul_as_f16`] allows rounding them to f16.

use sinter_core::DType;
use sinter_core::kernel::{ExprId, MatmulBody};

use super::emit::{AccVal, Emitter, store_roots};
use super::pointwise::PARAMS;
use super::staging::Held;
use super::{Body, RenderError, Tuning, WgslCaps};

/// Output tile rows.
const BM: u32 = 128;
/// Output tile columns.
const BN: u32 = 128;
/// Depth of one shared-memory stage for products no deeper than it (and where 64 does not fit).
const BK: u32 = 32;
/// Depths of a shared-memory stage the tuner may ask for ([`Tuning::coop_depth`]), each a candidate.
pub const DEPTHS: [u32; 2] = [32, 64];
/// Padding of the staged rows, in f16 elements: 16 bytes keep the rows aligned for the matrix loads
/// and start consecutive rows 4 banks apart. Unpadded, the A rows (64 bytes) put rows 0, 2, 4, 6 of a
/// fragment on the same banks and the B rows (256 bytes) all eight.
const PAD: u32 = 8;
/// Subgroups per workgroup (a 2 x 4 grid).
const SUBGROUPS: u32 = 8;

/// Shared memory the kernel needs, in bytes.
fn shared_bytes(bk: u32) -> u32 {
    (BM * (bk + PAD) + bk * (BN + PAD)) * 2 + SUBGROUPS * 256 * 4
}

/// The stage depth: what `tuning` asks for if it is one of [`DEPTHS`]; by default 64 where `k` is
/// deeper than [`BK`] and the workgroup memory holds it (measured, session 17 call 12: 8192^3 bf16
/// 8.17 ms against 10.64 at 32, half the barriers per product), else [`BK`].
fn depth(tuning: &Tuning, k: usize, caps: &WgslCaps) -> Option<u32> {
    let bk = tuning.coop_depth.unwrap_or(if k > BK as usize && shared_bytes(64) <= caps.max_workgroup_storage_bytes {
        64
    } else {
        BK
    });
    DEPTHS.contains(&bk).then_some(bk)
}

/// Whether `mm` runs on cooperative matrices with these caps and tuning.
pub(super) fn eligible(mm: &MatmulBody, caps: &WgslCaps, tuning: &Tuning) -> bool {
    let Some(sg) = caps.fixed_subgroup_size else { return false };
    tuning.coop_matrix
        && caps.has_coop_matrix
        && caps.has_f16
        && caps.has_subgroups
        && caps.runs_as_f16(mm.in_dtype)
        && mm.acc_dtype == DType::F32
        && sg > 0
        && SUBGROUPS * sg <= caps.max_wg()
        && depth(tuning, mm.k, caps).is_some_and(|bk| shared_bytes(bk) <= caps.max_workgroup_storage_bytes)
        && mm.m > 0
        && mm.n > 0
}

/// Renders `mm` on cooperative matrices (call only when [`eligible`]).
pub(super) fn render(
    em: &mut Emitter<'_>,
    mm: &MatmulBody,
    caps: &WgslCaps,
    tuning: &Tuning,
) -> Result<Body, RenderError> {
    let kname = em.k.name.clone();
    let invalid = |msg: String| RenderError::Invalid { kernel: kname.clone(), msg };
    let sg = caps.fixed_subgroup_size.unwrap_or(32);
    let threads = SUBGROUPS * sg;
    let bk = depth(tuning, mm.k, caps)
        .ok_or_else(|| invalid(format!("stage depth {:?} is not one of {DEPTHS:?}", tuning.coop_depth)))?;
    // Row strides of the staged A and B tiles.
    let (ast, bst) = (bk + PAD, BN + PAD);
    let (batch, m, n, kdim) = (mm.batch as u64, mm.m as u64, mm.n as u64, mm.k as u64);
    if [batch, m, n, kdim].iter().any(|&x| x > u64::from(u32::MAX) / 2) {
        return Err(RenderError::Unsupported {
            kernel: kname.clone(),
            what: format!("matmul {batch}x{m}x{n}x{kdim} exceeds the 32-bit index space"),
        });
    }
    let tiles_n = n.div_ceil(u64::from(BN));
    let tiles_m = m.div_ceil(u64::from(BM));
    let workgroups = tiles_n * tiles_m * batch;
    em.enables.push("f16");
    em.enables.push("wgpu_cooperative_matrix");
    let globals = vec![
        format!("var<workgroup> sa: array<f16, {}>; // A tile, [m][k] (rows padded)", BM * (bk + PAD)),
        format!("var<workgroup> sb: array<f16, {}>; // B tile, [k][n] (rows padded)", bk * (BN + PAD)),
        format!("var<workgroup> sc: array<f32, {}>; // one 16x16 accumulator per subgroup", SUBGROUPS * 256),
    ];
    let params = format!(
        "{PARAMS}, @builtin(subgroup_id) sg_id: u32, @builtin(subgroup_invocation_id) sg_lane: u32, \
         @builtin(subgroup_size) sg_size: u32"
    );
    let strategy = format!("matmul coop16 128x128x{bk}");
    let summary = format!(
        "matmul batch {batch} x m {m} x n {n} x k {kdim} ({} -> {}) on cooperative matrices: tile {BM}x{BN}x{bk}, \
         {SUBGROUPS} subgroups of {sg} each 64x32, {workgroups} workgroups",
        mm.in_dtype, mm.acc_dtype
    );
    if workgroups == 0 {
        return Ok(Body {
            globals,
            params,
            workgroup_size: [threads, 1, 1],
            workgroups: 0,
            vectorized: false,
            strategy,
            summary,
            split: None,
        });
    }

    super::matmul::tile_origin(em, caps, workgroups, (tiles_m, tiles_n), (BM, BN));
    em.line("let wm = sg_id / 4u;");
    em.line("let wn = sg_id % 4u;");
    super::matmul::operand_bases(em, mm);
    for i in 0..4 {
        for j in 0..2 {
            em.line(format!("var c{i}{j} = coop_mat16x16<f32, C>();"));
        }
    }
    // Staging plan per operand: A is (m, k), B is (k, n); loads go to registers one stage ahead (register
    // double buffering: the global loads of the next stage overlap this stage's multiplies).
    struct Stage {
        which: &'static str,
        arg: super::storage::ArgInfo,
        contig_k: bool,
        s_r: usize,
        s_c: usize,
        rows_name: &'static str,
        rows_ext: u64,
        rows_tile: u32,
        width: u32,
        per_thread: u32,
    }
    let mut stages = Vec::new();
    for (which, op, rows_name, rows_ext, rows_tile) in [("a", &mm.a, "m", m, BM), ("b", &mm.b, "n", n, BN)] {
        let arg = em.args[op.arg].clone();
        if arg.dtype != mm.in_dtype {
            return Err(invalid(format!(
                "operand {which} is {}, the matmul's input dtype is {}",
                arg.dtype, mm.in_dtype
            )));
        }
        let contig_k = if which == "a" { op.s_col == 1 || op.s_row != 1 } else { op.s_col != 1 && op.s_row == 1 };
        let (s_r, s_c) = if which == "a" { (op.s_row, op.s_col) } else { (op.s_col, op.s_row) };
        let (cont_stride, cont_ext, other_stride) =
            if contig_k { (s_c as u64, kdim, s_r as u64) } else { (s_r as u64, rows_ext, s_c as u64) };
        let vec_stage = tuning.vectorize
            && cont_stride == 1
            && cont_ext.is_multiple_of(4)
            && (op.offset as u64).is_multiple_of(4)
            && other_stride.is_multiple_of(4)
            && (op.s_batch as u64).is_multiple_of(4);
        if let Some(u) = em.uses.get_mut(op.arg) {
            if vec_stage {
                u.contig_loads += 1;
            } else {
                u.other_loads += 1;
            }
        }
        let width = if vec_stage { 4 } else { 1 };
        let per_thread = rows_tile * bk / width / threads;
        stages.push(Stage { which, arg, contig_k, s_r, s_c, rows_name, rows_ext, rows_tile, width, per_thread });
    }
    // What a stage's registers hold until stored (see `staging`).
    let held = |st: &Stage| Held::of(&st.arg, st.width == 4, mm.in_dtype);
    // Position (tile row, depth) of register `l` of a stage.
    let position = |em: &mut Emitter<'_>, st: &Stage, l: u32| {
        let rr = format!("{}{}", st.rows_name, st.rows_name);
        em.line(format!("let e = lid + {}u;", l * threads));
        if st.contig_k {
            em.line(format!("let kk = (e % {}u) * {}u;", bk / st.width, st.width));
            em.line(format!("let {rr} = e / {}u;", bk / st.width));
        } else {
            em.line(format!("let {rr} = (e % {}u) * {}u;", st.rows_tile / st.width, st.width));
            em.line(format!("let kk = e / {}u;", st.rows_tile / st.width));
        }
    };
    // Loads of the stage at depth `k0` into registers `p{a|b}{l}`.
    let load_stage = |em: &mut Emitter<'_>, k0: &str| -> Result<(), RenderError> {
        for st in &stages {
            let origin = if st.which == "a" { "m0" } else { "n0" };
            let rr = format!("{}{}", st.rows_name, st.rows_name);
            let kind = held(st);
            for l in 0..st.per_thread {
                let reg = format!("p{}{l}", st.which);
                em.open("");
                position(em, st, l);
                em.line(format!("let g{} = {origin} + {rr};", st.rows_name));
                em.line(format!("let gk = {k0} + kk;"));
                em.line(format!("{reg} = {};", kind.zero(st.width == 4)));
                em.open(format!("if (g{} < {}u && gk < {kdim}u)", st.rows_name, st.rows_ext));
                em.line(format!("let i = {}_base + g{} * {}u + gk * {}u;", st.which, st.rows_name, st.s_r, st.s_c));
                let v = kind.load(em, &st.arg, "i", st.width == 4, mm.in_dtype)?;
                em.line(format!("{reg} = {v};"));
                em.close();
                em.close();
            }
        }
        Ok(())
    };
    for st in &stages {
        let ty = held(st).ty(st.width == 4);
        for l in 0..st.per_thread {
            em.line(format!("var p{}{l}: {ty};", st.which));
        }
    }
    em.line("// prefetch the first stage");
    load_stage(em, "0u")?;
    em.open(format!("for (var k0 = 0u; k0 < {kdim}u; k0 = k0 + {bk}u)"));
    for st in &stages {
        em.line(format!("// stage {} ({} x {bk}) as f16", st.which.to_uppercase(), st.rows_tile));
        let rr = format!("{}{}", st.rows_name, st.rows_name);
        let at = |r: &str, k: &str| {
            if st.which == "a" { format!("sa[({r}) * {ast}u + {k}]") } else { format!("sb[({k}) * {bst}u + {r}]") }
        };
        for l in 0..st.per_thread {
            em.open("");
            position(em, st, l);
            let reg = format!("p{}{l}", st.which);
            let v = held(st).stored(em, &st.arg, &reg, st.width == 4, mm.in_dtype)?;
            if st.width == 4 {
                em.line(format!("let x = {v};"));
                for (c, comp) in ["x", "y", "z", "w"].iter().enumerate() {
                    let target =
                        if st.contig_k { at(&rr, &format!("kk + {c}u")) } else { at(&format!("{rr} + {c}u"), "kk") };
                    em.line(format!("{target} = x.{comp};"));
                }
            } else {
                em.line(format!("{} = {v};", at(&rr, "kk")));
            }
            em.close();
        }
    }
    em.line("workgroupBarrier();");
    em.line("// the next stage's loads overlap this stage's multiplies");
    load_stage(em, &format!("k0 + {bk}u"))?;
    for kq in 0..bk / 16 {
        em.open("");
        for i in 0..4 {
            em.line(format!(
                "let fa{i} = coopLoadT<coop_mat16x16<f16, A>>(&sa[(wm * 64u + {}u) * {ast}u + {}u], {ast}u);",
                i * 16,
                kq * 16
            ));
        }
        for j in 0..2 {
            em.line(format!(
                "let fb{j} = coopLoadT<coop_mat16x16<f16, B>>(&sb[{}u + wn * 32u + {}u], {bst}u);",
                kq * 16 * bst,
                j * 16
            ));
        }
        for i in 0..4 {
            for j in 0..2 {
                em.line(format!("c{i}{j} = coopMultiplyAdd(fa{i}, fb{j}, c{i}{j});"));
            }
        }
        em.close();
    }
    em.line("workgroupBarrier();");
    em.close();

    // Epilogue: through the per-subgroup scratch, element by element.
    super::matmul::epilogue_vars(em, (batch as i64, m as i64, n as i64), false);
    let roots: Vec<ExprId> = mm.stores.iter().flat_map(store_roots).collect();
    em.line("// epilogue");
    for i in 0..4 {
        for j in 0..2 {
            em.line(format!("coopStoreT(c{i}{j}, &sc[sg_id * 256u], 16u);"));
            em.line("workgroupBarrier();");
            em.open("for (var e = sg_lane; e < 256u; e = e + sg_size)");
            em.line(format!("let m = m0 + wm * 64u + {}u + e / 16u;", i * 16));
            em.line(format!("let n = n0 + wn * 32u + {}u + e % 16u;", j * 16));
            em.open(format!("if (m < {m}u && n < {n}u)"));
            em.acc.insert(0, AccVal { name: "sc[sg_id * 256u + e]".into(), dtype: mm.acc_dtype, vec: false });
            em.emit_closure(&roots, &|_| true)?;
            for s in &mm.stores {
                em.emit_store(s)?;
            }
            em.close();
            em.close();
            em.line("workgroupBarrier();");
        }
    }
    let split = Some(super::matmul::grid_split(batch, (tiles_m, tiles_n), BM));
    Ok(Body {
        globals,
        params,
        workgroup_size: [threads, 1, 1],
        workgroups,
        vectorized: false,
        strategy,
        summary,
        split,
    })
}
