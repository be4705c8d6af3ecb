//! The implicit im2col operand in the matmul loaders (implicit GEMM): the address of element
//! `(gk, gr)` = (tap, output column) of a [`MatOperand`] with [`Im2col`] geometry, and the
//! condition under which it lies inside the image (else the element is 0), as the kernel IR
//! defines them (`sinter_core::kernel::im2col`). Shared by the CUDA-core and tensor-core
//! templates; terms that are always zero and bounds that always hold are left out.

use sinter_core::kernel::{Im2col, MatOperand, MatmulBody};

use super::emit::Emitter;
use super::matmul::{lit, op_ity};
use super::mma::{Loader, MmaTile, OpPlan};

/// Emits the tap coordinates of element (`gk`, `gr`) of the im2col operand `op` (declared in
/// the current scope) and returns `(address, inside)`: the element index in type `oty` from
/// `base` (the operand's base for the block's batch), and the condition (`None`: always inside).
/// The address is in range only where `gk`, `gr` are inside the product and `inside` holds.
pub(super) fn tap(
    em: &mut Emitter<'_>,
    oty: &str,
    op: &MatOperand,
    base: &str,
    gk: &str,
    gr: &str,
) -> (String, Option<String>) {
    let w: &Im2col = op.im2col.as_ref().expect("an im2col operand");
    let taps = (w.kernel[0] * w.kernel[1]) as u64;
    let pixels = w.pixels() as u64;
    let [oh, ow] = w.out_hw.map(|d| d as u64);
    let [kh, kw] = w.kernel.map(|d| d as u64);
    em.line(format!(
        "// im2col tap: k = (channel, ky, kx) over {}x{kh}x{kw}, n = (image, oy, ox) over {oh}x{ow}; 0 in the padding",
        w.channels
    ));
    let div = |a: &str, d: u64| if d == 1 { a.to_string() } else { format!("{a} / {d}u") };
    let rem = |a: &str, d: u64| if d == 1 { "0u".to_string() } else { format!("{a} % {d}u") };
    // (name, padded coordinate before the padding, padding, extent, whether a bound can fail)
    let mut coords = Vec::new();
    for (name, o, s, kk, d, pad, extent, out, kext) in [
        ("iy", div("tp", ow), w.stride[0], div("tr", kw), w.dilation[0], w.pad[0], w.in_hw[0], oh, kh),
        ("ix", rem("tp", ow), w.stride[1], rem("tr", kw), w.dilation[1], w.pad[1], w.in_hw[1], ow, kw),
    ] {
        let mut e = if out == 1 { "0u".to_string() } else { o };
        if s != 1 && out > 1 {
            e = format!("{e} * {s}u");
        }
        if kext > 1 {
            e = if d == 1 { format!("{e} + {kk}") } else { format!("{e} + {kk} * {d}u") };
        }
        let reach = (out - 1) * s as u64 + (kext - 1) * d as u64;
        coords.push((name, e, pad, extent, pad > 0 || reach >= extent as u64));
    }
    let cast = |v: &str| if oty == "unsigned" { v.to_string() } else { format!("({oty}){v}") };
    let mut addr = base.to_string();
    for (v, s) in [("ti", w.s_img), ("tc", w.s_chan), ("(unsigned)iy", w.s_y), ("(unsigned)ix", w.s_x)] {
        match s {
            0 => {}
            1 => addr.push_str(&format!(" + {}", cast(v))),
            s => addr.push_str(&format!(" + {} * {}", cast(v), lit(oty, s as u64))),
        }
    }
    let inside: Vec<String> =
        coords.iter().filter(|c| c.4).map(|(name, _, _, extent, _)| format!("(unsigned){name} < {extent}u")).collect();
    // Declare what the address or the bounds use.
    let used = |name: &str, extra: &[&String]| {
        let word = |t: &str| t.split(|c: char| !c.is_ascii_alphanumeric() && c != '_').any(|x| x == name);
        word(&addr) || inside.iter().any(|t| word(t)) || extra.iter().any(|t| word(t))
    };
    let exprs: Vec<&String> = coords.iter().filter(|c| used(c.0, &[])).map(|c| &c.1).collect();
    if used("tc", &[]) {
        em.line(format!("const unsigned tc = {};", div(gk, taps)));
    }
    if used("tr", &exprs) {
        em.line(format!("const unsigned tr = {};", rem(gk, taps)));
    }
    if used("ti", &[]) {
        em.line(format!("const unsigned ti = {};", div(gr, pixels)));
    }
    if used("tp", &exprs) {
        em.line(format!("const unsigned tp = {};", rem(gr, pixels)));
    }
    for (name, e, pad, _, _) in &coords {
        if used(name, &[]) {
            let sub = if *pad == 0 { String::new() } else { format!(" - {pad}") };
            em.line(format!("const int {name} = (int)({e}){sub};"));
        }
    }
    (addr, (!inside.is_empty()).then(|| inside.join(" && ")))
}

/// The loop-invariant half of the tensor-core loader's im2col tap, for a thread that copies the
/// same `count` output columns `first + j * step` of the B tile in every step: each column's
/// image, output pixel and window origin, computed once before the pipeline into arrays indexed
/// by `j` (`icol_in`: the column is inside the product; `iy0`, `ix0`: the window's padded origin;
/// `ibase`: the element index of that origin, wrapping where the origin lies in the padding, in
/// type `oty`). [`tap_row`] and [`tap_at`] finish a tap from its `k`.
pub(super) fn columns(
    em: &mut Emitter<'_>,
    oty: &str,
    op: &MatOperand,
    base: &str,
    (first, count, step): (&str, u32, u32),
    n: usize,
) {
    let w: &Im2col = op.im2col.as_ref().expect("an im2col operand");
    let pixels = w.pixels() as u64;
    let ow = w.out_hw[1] as u64;
    em.line(format!(
        "// im2col columns of this thread, the same in every step: image, output pixel, window origin over {}x{ow}",
        w.out_hw[0]
    ));
    em.line(format!("bool icol_in[{count}];"));
    em.line(format!("int iy0[{count}], ix0[{count}];"));
    em.line(format!("{oty} ibase[{count}];"));
    em.line("#pragma unroll");
    em.open(format!("for (unsigned j = 0; j < {count}u; ++j)"));
    em.line(format!("const unsigned icol = {first} + j * {step}u;"));
    em.line(format!("icol_in[j] = icol < {n}u;"));
    let images = n as u64 > pixels && w.s_img != 0;
    em.line(format!("const unsigned ip = icol % {pixels}u;"));
    if images {
        em.line(format!("const unsigned ii = icol / {pixels}u;"));
    }
    for (name, o, s, pad) in
        [("iy0", format!("ip / {ow}u"), w.stride[0], w.pad[0]), ("ix0", format!("ip % {ow}u"), w.stride[1], w.pad[1])]
    {
        let scaled = if s == 1 { o } else { format!("{o} * {s}u") };
        let sub = if pad == 0 { String::new() } else { format!(" - {pad}") };
        em.line(format!("{name}[j] = (int)({scaled}){sub};"));
    }
    // The origin's element index in modular arithmetic: negative coordinates (padding) wrap, and
    // adding a tap inside the image brings the sum back into range.
    let wide = |v: &str, signed: bool| match (oty, signed) {
        ("unsigned", _) => format!("(unsigned){v}"),
        (_, true) => format!("({oty})(long long){v}"),
        (_, false) => format!("({oty}){v}"),
    };
    let mut addr = base.to_string();
    let s_img = if images { w.s_img } else { 0 };
    for (v, s) in [(wide("ii", false), s_img), (wide("iy0[j]", true), w.s_y), (wide("ix0[j]", true), w.s_x)] {
        match s {
            0 => {}
            1 => addr.push_str(&format!(" + {v}")),
            s => addr.push_str(&format!(" + {v} * {}", lit(oty, s as u64))),
        }
    }
    em.line(format!("ibase[j] = {addr};"));
    em.close();
}

/// The part of an im2col tap that depends on `k` only ([`tap_row`]): the element offset from a
/// column's `ibase` and the window offsets to add to its origin.
pub(super) struct RowTap {
    /// Element offset of the tap from the window origin, in the operand's index type.
    offset: String,
    /// Per window dimension (`iy`/`ix`): the offset variable added to the origin, and the extent
    /// the coordinate must stay under; only the dimensions whose bound can fail.
    bounds: Vec<(&'static str, String, usize)>,
}

/// Decomposes tap `gk` (a `k` index: channel, ky, kx) once for every column of [`columns`].
pub(super) fn tap_row(em: &mut Emitter<'_>, oty: &str, op: &MatOperand, gk: &str) -> RowTap {
    let w: &Im2col = op.im2col.as_ref().expect("an im2col operand");
    let taps = (w.kernel[0] * w.kernel[1]) as u64;
    let [kh, kw] = w.kernel.map(|d| d as u64);
    let mut terms: Vec<(String, u64)> = Vec::new();
    let mut bounds = Vec::new();
    if w.channels > 1 {
        let tc = if taps == 1 { gk.to_string() } else { format!("{gk} / {taps}u") };
        em.line(format!("const unsigned tc = {tc};"));
        terms.push(("tc".into(), w.s_chan as u64));
    }
    if taps > 1 {
        let tr = if w.channels > 1 { format!("{gk} - tc * {taps}u") } else { gk.to_string() };
        em.line(format!("const unsigned tr = {tr};"));
    }
    let ky = match (kh, kw) {
        (1, _) => None,
        (_, 1) => Some("tr".to_string()),
        _ => Some(format!("tr / {kw}u")),
    };
    let kx = match (kh, kw) {
        (_, 1) => None,
        (1, _) => Some("tr".to_string()),
        _ => Some(format!("tr - ky * {kw}u")),
    };
    for (name, coord, e, kext, d, s, pad, extent, out, stride) in [
        ("ky", "iy", ky, kh, w.dilation[0], w.s_y, w.pad[0], w.in_hw[0], w.out_hw[0], w.stride[0]),
        ("kx", "ix", kx, kw, w.dilation[1], w.s_x, w.pad[1], w.in_hw[1], w.out_hw[1], w.stride[1]),
    ] {
        let reach = (out as u64 - 1) * stride as u64 + (kext - 1) * d as u64;
        let can_fail = pad > 0 || reach >= extent as u64;
        let step = match e {
            Some(e) => {
                em.line(format!("const unsigned {name} = {e};"));
                terms.push((name.to_string(), (d * s) as u64));
                if d == 1 { format!("(int){name}") } else { format!("(int)({name} * {d}u)") }
            }
            None => String::new(),
        };
        if can_fail {
            bounds.push((coord, step, extent));
        }
    }
    let mut offset = String::new();
    for (v, s) in terms {
        let v = if oty == "unsigned" { v } else { format!("({oty}){v}") };
        let t = match s {
            0 => continue,
            1 => v,
            s => format!("{v} * {}", lit(oty, s)),
        };
        offset.push_str(if offset.is_empty() { "" } else { " + " });
        offset.push_str(&t);
    }
    if offset.is_empty() {
        offset = lit(oty, 0);
    }
    em.line(format!("const {oty} koff = {offset};"));
    RowTap { offset: "koff".into(), bounds }
}

/// Emits the window coordinates of row tap `row` for column `j` (a C++ index into the arrays of
/// [`columns`]) and returns `(address, inside)`: the element index and the condition under which
/// it is read (the column inside the product and the tap inside the image; `gk < k` is the
/// caller's).
pub(super) fn tap_at(em: &mut Emitter<'_>, row: &RowTap, j: &str) -> (String, String) {
    let mut inside = vec![format!("icol_in[{j}]")];
    for (coord, step, extent) in &row.bounds {
        let origin = format!("{coord}0[{j}]");
        if step.is_empty() {
            inside.push(format!("(unsigned){origin} < {extent}u"));
        } else {
            em.line(format!("const int {coord} = {origin} + {step};"));
            inside.push(format!("(unsigned){coord} < {extent}u"));
        }
    }
    (format!("ibase[{j}] + {}", row.offset), inside.join(" && "))
}

/// The columns per thread `c` and their stride `q = bn / c` where B is an implicit im2col
/// operand whose loader keeps the same output columns per thread in every step: thread `tid`
/// copies columns `tid % q + j q` (`j < c`) of rows `tid / q + l r`, `r = threads / q`, so
/// consecutive threads read consecutive pixels (coalesced along an output row) and write
/// consecutive shared words. The columns' image, pixel and window origin are computed once before
/// the pipeline (`im2col::columns`), each row's channel and window offset once per row
/// (`im2col::tap_row`); `None`: the per-element loader.
///
/// One column per thread (`c = 1`). Four (the row's decomposition shared by four copies) were
/// measured wrong on an H100 in ResNet-18 at the reduced scale (rel L2 0.29 against the
/// reference; right with one column, chosen in that run by a debugging switch since removed) although a host
/// emulation of both generated loaders maps every (step, shared word) to the same element and
/// condition; the cause is not found, so the four-column form stays off (BENCHMARKS.md).
pub(super) fn im2col_columns(t: &MmaTile, pb: OpPlan, mm: &MatmulBody) -> Option<(u32, u32)> {
    if mm.b.im2col.is_none() || pb.kmajor || pb.loader == Loader::Vector {
        return None;
    }
    let (threads, c) = (t.threads(), IM2COL_COLUMNS);
    let q = t.bn / c;
    (t.bn.is_multiple_of(c) && threads.is_multiple_of(q) && t.bk.is_multiple_of(threads / q)).then_some((c, q))
}

/// Output columns per thread of the im2col loader (see [`im2col_columns`]).
const IM2COL_COLUMNS: u32 = 1;

/// The B tile of one step for an im2col operand with `c` columns per thread at stride `q`
/// ([`im2col_columns`]): per row, the tap decomposed once, then one 4-byte `cp.async` (TF32) or
/// scalar copy (16-bit) per column, zero in the padding and past the edges.
pub(super) fn im2col_stage(
    em: &mut Emitter<'_>,
    mm: &MatmulBody,
    t: &MmaTile,
    plan: OpPlan,
    (dst, srow_len): (&str, u32),
    (c, q): (u32, u32),
) {
    let op = &mm.b;
    let r = t.threads() / q;
    let bytes = plan.elem.bytes();
    let oty = op_ity(em, op);
    em.line(format!(
        "// B tile: {} x {} im2col taps; thread: {c} columns {q} apart, rows tid / {q} + {r} l; {}",
        t.bk,
        t.bn,
        if plan.loader == Loader::Async4 { "4-byte copies" } else { "elements" }
    ));
    // As the per-element loader: the 4-byte copies unrolled by 4 (independent copies in flight;
    // on an H100, ResNet-18's first-stage 64x128 TF32 convolutions took 176 us each not
    // unrolled, 139 us by 4), the synchronous 16-bit copies not (unrolled, their addresses cost
    // the accumulators registers: the 128x128 bf16 tile spilled with split-k).
    em.line(if plan.loader == Loader::Async4 { "#pragma unroll 4" } else { "#pragma unroll 1" });
    em.open(format!("for (unsigned l = 0; l < {}u; ++l)", t.bk / r));
    em.line(format!("const unsigned sr = tid / {q}u + l * {r}u;"));
    em.line("const unsigned gk = k0 + sr;");
    let row = tap_row(em, oty, op, "gk");
    em.line("#pragma unroll");
    em.open(format!("for (unsigned j = 0; j < {c}u; ++j)"));
    let (addr, inside) = tap_at(em, &row, "j");
    em.line(format!("const bool in = gk < {}u && {inside};", mm.k));
    em.line(format!("const {oty} off = in ? {addr} : {};", lit(oty, 0)));
    let sdst = format!("{dst} + (sr * {srow_len}u + tid % {q}u + j * {q}u) * {bytes}u");
    if plan.loader == Loader::Async4 {
        em.line(format!("sinter_cp_async4({sdst}, &a{}[off], in ? 4u : 0u);", op.arg));
    } else {
        em.line(format!(
            "const unsigned short x = in ? reinterpret_cast<const unsigned short*>(a{})[off] : (unsigned short)0;",
            op.arg
        ));
        em.line(format!("asm volatile(\"st.shared.u16 [%0], %1;\\n\" :: \"r\"({sdst}), \"h\"(x) : \"memory\");"));
    }
    em.close();
    em.close();
}
