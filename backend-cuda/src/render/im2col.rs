//! The implicit im2col operand in the matmul loaders (implicit GEMM): the address of element
//! `(gk, gr)` = (tap, output column) of a [`MatOperand`] with [`Im2col`] geometry, and the
//! condition under which it lies inside the image (else the element is 0), as the kernel IR
//! defines them (`sinter_core::kernel::im2col`). Shared by the CUDA-core and tensor-core
//! templates; terms that are always zero and bounds that always hold are left out.

use sinter_core::kernel::{Im2col, MatOperand};

use super::emit::Emitter;
use super::matmul::lit;

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
