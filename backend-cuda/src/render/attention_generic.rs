//! Shape-generic tensor-core attention: one kernel per (dtype, head dim, causal or not) whose
//! extents, strides, causal offset and scale are run-time parameters (`sx_*`), so its source is
//! the same for every shape and can be compiled before the process starts (`crate::aot`: NVRTC
//! at build time, the cubin embedded in the binary). The JIT's shape-specialized kernels stay
//! for everything else and for max-autotune.
//!
//! Why: a tensor-core attention tile costs NVRTC 0.5-1 s (H200 and the CI-class machine,
//! BENCHMARKS.md session 39: d64 24 ms front end / 279 NVVM / 280 ptxas, causal d128 16 / 361 /
//! 433; ptxas alone at -O1 still 0.14 / 0.26 s), so no JIT path reaches a tenth of
//! torch.compile's 0.6-1.2 s cold compile, whose SDPA kernels are compiled into libtorch.
//!
//! # Contract
//! * [`plan`] takes a kernel only where the generic kernel computes exactly what the specialized
//!   default would ([`Refusal`] names why not). One query (a generation step) where the default
//!   is the decode template with a block per flat batch, no split and no packed GQA heads: the
//!   decode template ([`Template::Decode`]) with the same rules on dtypes, head dims, score, output
//!   and arguments. Otherwise: `wgmma` attention (sm_90a, bf16/f16 operands and
//!   probabilities), more than `DECODE_M` queries, `d == dv` of 64 or 128, the default tile for the shape (the persistent TMA
//!   tile 64x128 at d64 past two key tiles, the TMA ping-pong tile 128x128 at d128), the score
//!   `Acc(1) * c` (casts around it looked through, `attention::folded_scale`), one store of `Acc(0)` in
//!   the operands' dtype at `y + b * sb + h * sh + i * sr + n` (every stride and offset a
//!   multiple of eight elements, like the operands'), arguments exactly Q, K, V, Y in that order
//!   (Q, K, V read through their [`AttnOperand`]s, K and V possibly shared by GQA groups), every
//!   index within 32 bits.
//! * The kernel's parameters: the four pointers, the persistent tile's scratch, then the
//!   [`PARAMS`] in order (each an 8-byte launch value whose low four bytes the kernel reads as an
//!   `unsigned`, or for `sx_sl` and `sx_scale` as a `float`), then K's and V's tensor maps. [`params`] computes
//!   them from the instance; the grid, tensor maps and grid split are the instance's as for the
//!   specialized kernel.
//! * The template code is `attention_tc`'s and `attention_pingpong`'s with the emitter's
//!   `attn_generic` set: every place that wrote a literal of the shape reads a parameter
//!   instead, a tile that may cross `m`, `kv` or the causal bound is always tested at run time,
//!   and the epilogue is `epilogue` (the same packed 16-byte stores as `quad_store`, the row
//!   test around the store only, so every lane still runs the exchange).

use sinter_core::DType;
use sinter_core::kernel::{AttentionBody, AttnOperand, Expr, Index, Kernel, KernelBody, Var};

use super::attention::{AttnTile, DECODE_M, check_attn, default_attn, folded_scale, wgmma_applies};
use super::attention_tc::causal_section;
use super::emit::Emitter;
use super::prelude::H;
use super::{CudaCaps, RenderError, Rendered, Tuning};

/// The run-time parameters after the pointers (and scratch), in order.
pub const PARAMS: [&str; 40] = [
    "sx_heads",
    "sx_m",
    "sx_kv",
    "sx_tiles_m",
    "sx_n_work",
    "sx_sec",
    "sx_co",
    "sx_q_off",
    "sx_q_sb",
    "sx_q_sh",
    "sx_q_sr",
    "sx_k_off",
    "sx_k_sb",
    "sx_k_sh",
    "sx_k_sr",
    "sx_k_g",
    "sx_v_off",
    "sx_v_sb",
    "sx_v_sh",
    "sx_v_sr",
    "sx_v_g",
    "sx_y_off",
    "sx_y_sb",
    "sx_y_sh",
    "sx_y_sr",
    "sx_sl",
    "sx_sec_tiles",
    "sx_heads_mul",
    "sx_heads_sh",
    "sx_tiles_m_mul",
    "sx_tiles_m_sh",
    "sx_sec_mul",
    "sx_sec_sh",
    "sx_sec_tiles_mul",
    "sx_sec_tiles_sh",
    "sx_k_g_mul",
    "sx_k_g_sh",
    "sx_v_g_mul",
    "sx_v_g_sh",
    "sx_scale",
];

/// The divisors the kernel divides by (each `sx_<name>` with its `_mul` and `_sh`, [`fast_div`]).
const DIVISORS: [&str; 6] = ["heads", "tiles_m", "sec", "sec_tiles", "k_g", "v_g"];

/// The multiplier and shift that divide any `x < 2^31` by `d` as `umulhi(x, mul) >> sh`
/// (Granlund and Montgomery's round-up method, as CUTLASS's `FastDivmod`); `d <= 1` gives
/// `(0, 0)`, which the kernel's `sinter_div` never uses (it returns `x` for `d == 1`). A division
/// by a run-time divisor is ~20 instructions (a float reciprocal and corrections); the generic
/// kernels divide work-tile and flat-batch indices several times per work tile.
pub fn fast_div(d: u32) -> (u32, u32) {
    if d <= 1 {
        return (0, 0);
    }
    let l = 32 - (d - 1).leading_zeros(); // ceil(log2 d), at least 1
    let p = 31 + l;
    let mul = (1u64 << p).div_ceil(u64::from(d));
    (mul as u32, l - 1)
}

/// Why a kernel does not take the generic attention kernel.
pub type Refusal = String;

/// What the generic kernel of a kernel is: its tile and variant, the output's layout, the scale.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// The template (the specialized default's for the shape).
    pub template: Template,
    /// The output's layout (as an attention operand: offset and strides of the flat batch's
    /// batch and head, and of its rows).
    pub y: AttnOperand,
    /// The score's scale `c` (`Acc(1) * c`): as the tensor-core template folds it (`sx_sl`, times
    /// log2(e)) and as the decode template multiplies by it (`sx_scale`: the constant rounded to
    /// its dtype, as the specialized kernel's literal).
    pub scale: f64,
    /// The scale as the decode template's score multiplies by it.
    pub scale_lit: f32,
    /// Every tile whole: keys and rows in whole tiles, no causal mask (the `_whole` variant, which
    /// writes no mask and no row guard, as the specialized kernel of such a shape).
    pub whole: bool,
}

/// Which template a generic kernel is.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Template {
    /// A tensor-core tile (`attention_tc`).
    Tile(AttnTile),
    /// The decode template (`attention_rows::render_decode`) for one query, a block per flat batch,
    /// no split, no packed heads: `w` elements per 16-byte vector, `block` threads.
    Decode {
        /// Elements per 16-byte vector.
        w: usize,
        /// Threads per block.
        block: u32,
    },
}

/// The generic kernel for `k` on `caps`, or why not (see the module's contract).
pub fn plan(k: &Kernel, caps: &CudaCaps) -> Result<Plan, Refusal> {
    let KernelBody::Attention(a) = &k.body else { return Err("not an attention kernel".into()) };
    wgmma_applies(a, caps)?;
    if a.d != a.dv || !matches!(a.d, 64 | 128) {
        return Err(format!("head dims {}/{} (generic kernels: 64 or 128, equal)", a.d, a.dv));
    }
    if k.args.len() != 4 || (a.q.arg, a.k.arg, a.v.arg) != (0, 1, 2) || a.q.group != 1 {
        return Err("arguments other than Q, K, V, Y in that order".into());
    }
    if k.args.iter().any(|x| x.dtype != a.in_dtype) {
        return Err("an argument of another dtype than the operands'".into());
    }
    if k.args.iter().any(|x| x.numel > i32::MAX as usize) || super::index::needs_wide(k) {
        return Err("an argument past 2^31 elements (the generic kernel indexes in 32 bits)".into());
    }
    let scale = folded_scale(k, a).ok_or("a score other than Acc(1) times a positive constant")?;
    let [s] = a.stores.as_slice() else { return Err(format!("{} stores (one)", a.stores.len())) };
    if s.arg != 3 {
        return Err("the store is not to the fourth argument".into());
    }
    // The stored value: `Acc(0)` under casts through f32 or the operands' dtype only.
    let (mut v, mut chain_ok) = (s.value, true);
    while let Expr::Cast(x) = &k.exprs[v.0 as usize].expr {
        chain_ok &= matches!(k.exprs[v.0 as usize].dtype, DType::F32) || k.exprs[v.0 as usize].dtype == a.in_dtype;
        v = *x;
    }
    if !matches!(k.exprs[v.0 as usize].expr, Expr::Acc(0)) || !chain_ok {
        return Err("an epilogue other than the output stored in the operands' dtype".into());
    }
    let y = output_layout(&s.index, a).ok_or("an output index that is not affine in batch, head, row, column")?;
    let aligned = |x: usize| x.is_multiple_of(8);
    if !(aligned(y.offset) && aligned(y.s_batch) && aligned(y.s_head) && aligned(y.s_row)) {
        return Err("output rows not 16-byte aligned".into());
    }
    if (a.m as u64).div_ceil(64) * (a.batch * a.heads) as u64 > i32::MAX as u64 {
        return Err("more than 2^31 work tiles (the kernel's divisions take 31-bit indices)".into());
    }
    let scale_lit = scale_literal(k, a).ok_or("a score other than Acc(1) times a constant")?;
    let y = AttnOperand { arg: 3, group: 1, ..y };
    if a.m <= DECODE_M {
        // The decode template where the default tuning takes it for one query without split or
        // packed heads (`attention::template`), else the specialized kernels.
        let em = Emitter::new(k, false);
        return match super::attention::template(&em, a, caps, &Tuning::default()) {
            Ok(super::attention::Template::Decode { w, block, splits: 1, pack: 1 }) if a.m == 1 => {
                Ok(Plan { template: Template::Decode { w, block }, y, scale, scale_lit, whole: false })
            }
            _ => Err(format!("{} queries: not the one-query decode template without split or packed heads", a.m)),
        };
    }
    let tile = if a.d == 64 { AttnTile::persistent(64, 128, 3) } else { AttnTile::pingpong_tma(128, 128, 3) };
    if default_attn(a, caps) != tile {
        return Err(format!("the shape's default tile is not {tile:?}"));
    }
    check_attn(&tile, caps, a)?;
    let whole = a.causal.is_none() && a.kv.is_multiple_of(tile.bn as usize) && a.m.is_multiple_of(tile.bm as usize);
    Ok(Plan { template: Template::Tile(tile), y, scale, scale_lit, whole })
}

/// The score's constant as the renderer writes its literal (rounded to the constant's dtype, as
/// `types::const_lit`): the decode template multiplies the dot product by it in f32.
fn scale_literal(k: &Kernel, a: &AttentionBody) -> Option<f32> {
    let e = |id: sinter_core::kernel::ExprId| k.exprs.get(id.0 as usize);
    let mut root = a.score;
    while let Expr::Cast(x) = &e(root)?.expr {
        root = *x;
    }
    let Expr::Binary(sinter_core::ir::BinaryOp::Mul, x, y) = &e(root)?.expr else { return None };
    let c = [*x, *y].into_iter().find(|&id| matches!(e(id).map(|x| &x.expr), Some(Expr::Const(_))))?;
    let Expr::Const(v) = e(c)?.expr else { return None };
    match sinter_core::scalar::cast(sinter_core::scalar::Scalar::F(v), DType::F64, e(c)?.dtype) {
        sinter_core::scalar::Scalar::F(x) => Some(x as f32),
        sinter_core::scalar::Scalar::I(_) => None,
    }
}

/// The output's layout from its index: `offset + (b / heads) * s_batch + (b % heads) * s_head +
/// M * s_row + N` with `b` the flat batch, or `None` where the index has another form.
fn output_layout(index: &Index, a: &AttentionBody) -> Option<AttnOperand> {
    #[derive(Default)]
    struct C {
        off: i64,
        sb: i64,
        sh: i64,
        sr: i64,
        sn: i64,
    }
    fn walk(i: &Index, heads: i64, coef: i64, c: &mut C) -> Option<()> {
        match i {
            Index::Const(x) => c.off += coef * x,
            Index::Var(Var::M) => c.sr += coef,
            Index::Var(Var::N) => c.sn += coef,
            Index::Var(Var::Batch) => {
                c.sb += coef * heads;
                c.sh += coef;
            }
            Index::Sum(v) => v.iter().try_for_each(|t| walk(t, heads, coef, c))?,
            Index::Mul(x, m) => walk(x, heads, coef.checked_mul(*m)?, c)?,
            Index::Div(x, h) if **x == Index::Var(Var::Batch) && *h == heads => c.sb += coef,
            Index::Mod(x, h) if **x == Index::Var(Var::Batch) && *h == heads => c.sh += coef,
            _ => return None,
        }
        Some(())
    }
    let mut c = C::default();
    walk(index, a.heads.max(1) as i64, 1, &mut c)?;
    // A head or batch extent of 1 is never stepped over: its stride may be anything, 0 here.
    let (sb, sh) = (if a.batch > 1 { c.sb } else { 0 }, if a.heads > 1 { c.sh } else { 0 });
    let sr = if a.m > 1 { c.sr } else { 0 };
    let ok = c.sn == 1 && [c.off, sb, sh, sr].iter().all(|&x| (0..=i64::from(u32::MAX)).contains(&x));
    ok.then_some(AttnOperand {
        arg: 3,
        offset: c.off as usize,
        s_batch: sb as usize,
        s_head: sh as usize,
        s_row: sr as usize,
        group: 1,
    })
}

/// The entry point's name: `sinter_attn_<dtype>_d<d>[_causal|_whole]`.
pub fn entry(a: &AttentionBody, plan: &Plan) -> String {
    let variant = match (a.causal, plan.whole) {
        (Some(_), _) => "_causal",
        (None, true) => "_whole",
        (None, false) => "",
    };
    let kind = if matches!(plan.template, Template::Decode { .. }) { "decode_" } else { "" };
    format!("sinter_attn_{kind}{}_d{}{variant}", a.in_dtype, a.d)
}

/// The [`PARAMS`] values of `a` with `plan` (8-byte launch values; `sx_sl` as f32 bits).
pub fn params(a: &AttentionBody, plan: &Plan) -> Vec<u64> {
    let bm = match plan.template {
        Template::Tile(t) => t.bm,
        Template::Decode { .. } => 1,
    };
    let tiles_m = (a.m as u64).div_ceil(u64::from(bm));
    let bh = (a.batch * a.heads) as u64;
    let op = |o: &AttnOperand| [o.offset, o.s_batch, o.s_head, o.s_row].map(|x| x as u64);
    let (q, k, v, y) = (op(&a.q), op(&a.k), op(&a.v), op(&plan.y));
    let sl = (plan.scale * std::f64::consts::LOG2_E) as f32;
    let mut out = vec![
        a.heads as u64,
        a.m as u64,
        a.kv as u64,
        tiles_m,
        tiles_m * bh,
        causal_section(a),
        a.causal.unwrap_or(0) as u64,
    ];
    out.extend(q);
    out.extend(k);
    out.push(a.k.group.max(1) as u64);
    out.extend(v);
    out.push(a.v.group.max(1) as u64);
    out.extend(y);
    out.push(u64::from(sl.to_bits()));
    let sec = causal_section(a);
    out.push(sec * tiles_m);
    for d in [a.heads as u64, tiles_m, sec, sec * tiles_m, a.k.group.max(1) as u64, a.v.group.max(1) as u64] {
        let (mul, sh) = fast_div(d as u32);
        out.extend([u64::from(mul), u64::from(sh)]);
    }
    out.push(u64::from(plan.scale_lit.to_bits()));
    debug_assert_eq!(out.len(), PARAMS.len());
    out
}

/// Renders the generic kernel of `k` (planned by [`plan`]) with the instance's launch.
pub fn render(k: &Kernel, caps: &CudaCaps, plan: &Plan) -> Result<Rendered, RenderError> {
    let KernelBody::Attention(a) = &k.body else {
        return Err(RenderError::Unsupported { kernel: k.name.clone(), what: "not attention".into() });
    };
    let mut em = Emitter::new(k, false);
    em.attn_generic = true;
    em.attn_whole = plan.whole;
    let body = match plan.template {
        Template::Tile(tile) => super::attention_tc::render(&mut em, a, &tile, &Tuning::default(), caps)?,
        Template::Decode { w, block } => super::attention_rows::render_decode(&mut em, a, w, block, 1, 1)?,
    };
    let name = entry(a, plan);
    let ty = super::types::storage(a.in_dtype);
    let mut src = format!(
        "// sinter generic kernel {name}: fused attention ({} operands, d {}{}), every extent a run-time parameter\n// {}\n",
        a.in_dtype,
        a.d,
        match (a.causal.is_some(), plan.whole) {
            (true, _) => ", causal",
            (false, true) => ", keys and rows in whole tiles",
            (false, false) => "",
        },
        body.summary
    );
    let body_src = super::head(&mut src, &em, &body, &[a.in_dtype, DType::F32], &name);
    let mut ps: Vec<String> = ["Q", "K", "V"]
        .iter()
        .enumerate()
        .map(|(i, what)| format!("const {ty}* __restrict__ a{i} /* {what} */"))
        .collect();
    ps.push(format!("{ty}* __restrict__ a3 /* the output */"));
    if body.scratch > 0 {
        ps.push(format!("float* __restrict__ sinter_ws /* {} bytes of private scratch */", body.scratch));
    }
    ps.extend(
        PARAMS
            .iter()
            .map(|p| format!("const {} {p}", if matches!(*p, "sx_sl" | "sx_scale") { "float" } else { "unsigned" })),
    );
    ps.extend((0..body.tensor_maps.len()).map(|i| format!("const __grid_constant__ sinter_tmap tm{i}")));
    src.push_str(&ps.iter().map(|p| format!("\n    {p}")).collect::<Vec<_>>().join(","));
    src.push_str(")\n{\n");
    src.push_str(&body_src);
    src.push_str("}\n");
    let params = params(a, plan);
    let mut r = body.into_rendered(k, caps, &Tuning::default(), src, " generic");
    r.name = name;
    r.params = params;
    Ok(r)
}

/// `m`, `kv` and the causal offset as the template writes them: literals, or the generic
/// kernel's parameters.
pub(super) fn m(em: &Emitter<'_>, a: &AttentionBody) -> String {
    if em.attn_generic { "sx_m".into() } else { format!("{}u", a.m) }
}

/// See [`m`].
pub(super) fn kv(em: &Emitter<'_>, a: &AttentionBody) -> String {
    if em.attn_generic { "sx_kv".into() } else { format!("{}u", a.kv) }
}

/// See [`m`] (`None` without a causal mask).
pub(super) fn causal(em: &Emitter<'_>, a: &AttentionBody) -> Option<String> {
    a.causal.map(|o| if em.attn_generic { "sx_co".into() } else { format!("{o}u") })
}

/// The declaration of `<name>_base` (operand `name` of `q`, `k`, `v`, `y`) from the parameters:
/// `off + b / heads * sb + b % heads / g * sh` for flat batch `bh`.
pub(super) fn emit_base(em: &mut Emitter<'_>, name: &str) {
    let h = rem("bh", "heads");
    let head = if name == "q" || name == "y" { h } else { div(&h, &format!("{name}_g")) };
    em.decl(
        &format!("{name}_base"),
        format!(
            "const unsigned {name}_base = sx_{name}_off + {} * sx_{name}_sb + {head} * sx_{name}_sh;",
            div("bh", "heads")
        ),
    );
}

/// The work tile's row tile `mt` and flat batch `bh` from its index `w` (as `attention_tc`'s
/// `tile_rows` with the parameters: sections of `sx_sec` flat batches, longest row tiles first,
/// when causal).
pub(super) fn tile_rows(a: &AttentionBody, w: &str) -> (String, String) {
    if a.causal.is_some() {
        (
            format!("sx_tiles_m - 1u - {}", div(&rem(w, "sec_tiles"), "sec")),
            format!("{} * sx_sec + {}", div(w, "sec_tiles"), rem(w, "sec")),
        )
    } else {
        (rem(w, "tiles_m"), div(w, "tiles_m"))
    }
}

/// `x / sx_<d>` through the divisor's multiplier and shift (`sinter_div`, [`fast_div`]).
fn div(x: &str, d: &str) -> String {
    debug_assert!(DIVISORS.contains(&d));
    format!("sinter_div({x}, sx_{d}, sx_{d}_mul, sx_{d}_sh)")
}

/// `x % sx_<d>` through [`div`].
fn rem(x: &str, d: &str) -> String {
    format!("({x} - {} * sx_{d})", div(x, d))
}

/// The `sinter_div` the generic kernel's divisions call ([`fast_div`]; a divisor of 1 returns `x`).
pub(super) fn emit_div(em: &mut Emitter<'_>) {
    em.line(
        "auto sinter_div = [](unsigned x, unsigned d, unsigned mul, unsigned sh) { return d == 1u ? x : __umulhi(x, mul) >> sh; };",
    );
}

/// Operand `name`'s (`k` or `v`) head and batch coordinates of flat batch `bh` for its tensor map.
pub(super) fn map_coords(name: &str) -> (String, String) {
    (format!("(int){}", div(&rem("bh", "heads"), &format!("{name}_g"))), format!("(int){}", div("bh", "heads")))
}

/// The epilogue of one accumulator row half (`i`, `h` open, `rl` the row's reciprocal sum, `m`
/// and `y_base` declared): the pairs packed into words, the quad's exchange (every lane), then each lane's
/// 16-byte stores where its row is inside `sx_m`.
pub(super) fn epilogue(em: &mut Emitter<'_>, a: &AttentionBody, dv8: u32) -> Result<(), RenderError> {
    let pack = super::half::pack2(a.in_dtype);
    em.line(format!("unsigned pk[{dv8}];"));
    em.line("#pragma unroll");
    em.open(format!("for (unsigned jf = 0; jf < {dv8}u; ++jf)"));
    em.line(format!("pk[jf] = {pack}(o[i][jf][h * 2u] * rl, o[i][jf][h * 2u + 1u] * rl);"));
    em.close();
    super::quad_store::exchange(em, "pk", dv8);
    em.h.need(H::Vec);
    if !em.attn_whole {
        em.open("if (m < sx_m)");
    }
    em.line("#pragma unroll");
    em.open(format!("for (unsigned qs = 0; qs < {}u; ++qs)", dv8 / 4));
    em.line("sinter_vec<unsigned, 4> w4;");
    em.line("#pragma unroll");
    em.line("for (unsigned qc = 0; qc < 4u; ++qc) w4.v[qc] = pk[qs * 4u + qc];");
    em.line("*reinterpret_cast<sinter_vec<unsigned, 4>*>(a3 + y_base + m * sx_y_sr + (qs * 4u + t4) * 8u) = w4;");
    em.close();
    if !em.attn_whole {
        em.close();
    }
    Ok(())
}

/// The mask of a key tile that may cross `kv`, `m` or the causal bound (scores of key tile `k0`
/// in `s`, the scale folded): per row one limit, the last key it sees (`-1` for a row past `m`),
/// then one comparison per score, as FlashAttention does, where the specialized kernels test each
/// score against every bound (session 40: the generic kernels with those tests ran 3-7% slower).
pub(super) fn mask(em: &mut Emitter<'_>, a: &AttentionBody, tile: &AttnTile) {
    let (mi, bn8) = (tile.mi(), tile.bn / 8);
    em.line("#pragma unroll");
    em.open(format!("for (unsigned i = 0; i < {mi}u; ++i)"));
    em.line("#pragma unroll");
    em.open("for (unsigned h = 0; h < 2u; ++h)");
    em.line("const unsigned mr = m0 + wm0 + i * 16u + h * 8u + g;");
    let last = if a.causal.is_some() { "min(sx_kv - 1u, mr + sx_co)" } else { "sx_kv - 1u" };
    em.line(format!("const int lim = mr < sx_m ? (int)({last}) : -1; // the row's last key"));
    em.line("#pragma unroll");
    em.open(format!("for (unsigned j = 0; j < {bn8}u; ++j)"));
    em.line("const int key = (int)(k0 + j * 8u + t4 * 2u);");
    em.line("if (key > lim) s[i][j][2u * h] = NINF;");
    em.line("if (key + 1 > lim) s[i][j][2u * h + 1u] = NINF;");
    em.close();
    em.close();
    em.close();
}

#[cfg(test)]
mod tests {
    use super::fast_div;

    /// The kernel's `sinter_div` on the host.
    fn kernel_div(x: u32, d: u32) -> u32 {
        let (mul, sh) = fast_div(d);
        if d == 1 { x } else { ((u64::from(x) * u64::from(mul)) >> 32) as u32 >> sh }
    }

    #[test]
    fn fast_division_is_exact_below_2_pow_31() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let big = [1 << 20, (1 << 20) + 7, 1 << 30, (1 << 30) + 1, (1u32 << 31) - 1, 1u32 << 31];
        for d in (1..=4096u32).chain(big) {
            let mut xs = vec![
                0,
                1,
                d - 1,
                d,
                d.saturating_add(1),
                d.saturating_mul(2) - 1,
                d.saturating_mul(2),
                (1 << 31) - 1,
                (1 << 31) - 2,
            ];
            xs.extend((0..64).map(|_| (next() as u32) >> 1));
            for x in xs.into_iter().filter(|&x| x < 1 << 31) {
                assert_eq!(kernel_div(x, d), x / d, "{x} / {d}");
            }
        }
    }
}
