//! Loads and stores of one element (or 4 aligned consecutive elements) of a bound argument, per layout.

use sinter_core::DType;
use sinter_core::kernel::Access;

use super::helpers::{H, Helpers};
use super::types::{Ct, Layout, Pack};

/// How one kernel argument is declared and accessed.
#[derive(Clone, Debug)]
pub(crate) struct ArgInfo {
    /// WGSL variable name (`a0`, `a1`, ...).
    pub(crate) name: String,
    /// Element dtype.
    pub(crate) dtype: DType,
    /// Storage layout.
    pub(crate) layout: Layout,
    /// Element count.
    pub(crate) numel: usize,
    /// Read or write.
    pub(crate) access: Access,
    /// Declared as an array of 4-vectors.
    pub(crate) vec: bool,
    /// Declared as `array<atomic<u32>>` (sub-word stores that need read-modify-write).
    pub(crate) atomic: bool,
    /// Declared `read_write` (written, or aliased with a written argument).
    pub(crate) read_write: bool,
}

impl ArgInfo {
    /// The WGSL element type of the array.
    pub(crate) fn elem_type(&self) -> String {
        match self.layout {
            Layout::Word(c) if self.vec => format!("vec4<{}>", c.scalar()),
            Layout::Word(c) => c.scalar().to_string(),
            Layout::F16 if self.vec => "vec4<f16>".to_string(),
            Layout::F16 => "f16".to_string(),
            Layout::Wide(c) => format!("vec2<{}>", c.scalar()),
            Layout::Packed { .. } if self.atomic => "atomic<u32>".to_string(),
            Layout::Packed { .. } => "u32".to_string(),
        }
    }

    /// The `var<storage, ...>` declaration.
    pub(crate) fn declaration(&self, binding: usize) -> String {
        let access = if self.read_write { "read_write" } else { "read" };
        format!("@group(0) @binding({binding}) var<storage, {access}> {}: array<{}>;", self.name, self.elem_type())
    }

    /// The word at index `w` (an expression), read plainly or atomically.
    fn word(&self, w: &str) -> String {
        if self.atomic { format!("atomicLoad(&{}[{w}])", self.name) } else { format!("{}[{w}]", self.name) }
    }
}

/// Code to load one element: statements to emit first, then the value expression (in the compute type of
/// the dtype). `i` must be a `u32` identifier or literal (it may be used more than once).
pub(crate) fn load_scalar(a: &ArgInfo, i: &str, tmp: &str) -> (Vec<String>, String) {
    let n = &a.name;
    match a.layout {
        Layout::Word(_) if a.vec => (vec![], format!("{n}[{i} >> 2u][{i} & 3u]")),
        Layout::Word(_) => (vec![], format!("{n}[{i}]")),
        Layout::F16 if a.vec => (vec![], format!("f32({n}[{i} >> 2u][{i} & 3u])")),
        Layout::F16 => (vec![], format!("f32({n}[{i}])")),
        Layout::Wide(_) => (vec![], format!("{n}[{i}].x")),
        Layout::Packed { bits, kind } => {
            let (shift_w, mask_i) = if bits == 8 { ("2u", "3u") } else { ("1u", "1u") };
            let pre = vec![
                format!("let {tmp}w = {};", a.word(&format!("{i} >> {shift_w}"))),
                format!("let {tmp}s = ({i} & {mask_i}) * {bits}u;"),
            ];
            let (w, s) = (format!("{tmp}w"), format!("{tmp}s"));
            let top = 32 - bits;
            let mask = if bits == 8 { "0xffu" } else { "0xffffu" };
            let v = match kind {
                Pack::Signed => format!("bitcast<i32>({w} << ({top}u - {s})) >> {top}u"),
                Pack::Unsigned => format!("({w} >> {s}) & {mask}"),
                Pack::Bool => format!("(({w} >> {s}) & {mask}) != 0u"),
                Pack::BF16 => format!("bitcast<f32>(({w} >> {s}) << 16u)"),
                Pack::F16 => format!("unpack2x16float({w})[{i} & 1u]"),
            };
            (pre, v)
        }
    }
}

/// Code to load 4 consecutive elements starting at `b` (a `u32` identifier or literal, a multiple of 4) as
/// a 4-vector of the compute type.
pub(crate) fn load_vec(a: &ArgInfo, b: &str, tmp: &str, ct: Ct) -> (Vec<String>, String) {
    let n = &a.name;
    let four = |f: &dyn Fn(&str) -> String| {
        format!(
            "vec4<{}>({}, {}, {}, {})",
            ct.scalar(),
            f(b),
            f(&format!("{b} + 1u")),
            f(&format!("{b} + 2u")),
            f(&format!("{b} + 3u"))
        )
    };
    match a.layout {
        Layout::Word(_) if a.vec => (vec![], format!("{n}[{b} >> 2u]")),
        Layout::F16 if a.vec => (vec![], format!("vec4<f32>({n}[{b} >> 2u])")),
        Layout::Word(_) => (vec![], four(&|i| format!("{n}[{i}]"))),
        Layout::F16 => (vec![], four(&|i| format!("f32({n}[{i}])"))),
        Layout::Wide(_) => (vec![], four(&|i| format!("{n}[{i}].x"))),
        Layout::Packed { bits: 8, kind } => {
            let pre = vec![format!("let {tmp}w = vec4<u32>({});", a.word(&format!("{b} >> 2u")))];
            let w = format!("{tmp}w");
            let v = match kind {
                Pack::Signed => {
                    format!("bitcast<vec4<i32>>({w} << vec4<u32>(24u, 16u, 8u, 0u)) >> vec4<u32>(24u)")
                }
                Pack::Bool => format!("(({w} >> vec4<u32>(0u, 8u, 16u, 24u)) & vec4<u32>(0xffu)) != vec4<u32>(0u)"),
                _ => format!("({w} >> vec4<u32>(0u, 8u, 16u, 24u)) & vec4<u32>(0xffu)"),
            };
            (pre, v)
        }
        Layout::Packed { kind, .. } => {
            let pre = vec![
                format!("let {tmp}a = {};", a.word(&format!("{b} >> 1u"))),
                format!("let {tmp}b = {};", a.word(&format!("({b} >> 1u) + 1u"))),
                format!("let {tmp}w = vec4<u32>({tmp}a, {tmp}a, {tmp}b, {tmp}b);"),
            ];
            let w = format!("{tmp}w");
            let v = match kind {
                Pack::Signed => {
                    format!("bitcast<vec4<i32>>({w} << vec4<u32>(16u, 0u, 16u, 0u)) >> vec4<u32>(16u)")
                }
                Pack::BF16 => format!("bitcast<vec4<f32>>(({w} >> vec4<u32>(0u, 16u, 0u, 16u)) << vec4<u32>(16u))"),
                Pack::F16 => format!("vec4<f32>(unpack2x16float({tmp}a), unpack2x16float({tmp}b))"),
                _ => format!("({w} >> vec4<u32>(0u, 16u, 0u, 16u)) & vec4<u32>(0xffffu)"),
            };
            (pre, v)
        }
    }
}

/// The bits (in the low `bits` bits of a u32, or a vec4 of them) that encode `v` for a packed layout.
fn encode(kind: Pack, bits: u32, v: &str, vec: bool, h: &mut Helpers) -> String {
    let mask = if bits == 8 { "0xffu" } else { "0xffffu" };
    let m = if vec { format!("vec4<u32>({mask})") } else { mask.to_string() };
    match kind {
        Pack::Signed => {
            let t = if vec { "vec4<u32>" } else { "u32" };
            format!("bitcast<{t}>({v}) & {m}")
        }
        Pack::Unsigned => format!("{v} & {m}"),
        Pack::Bool => {
            if vec {
                format!("select(vec4<u32>(0u), vec4<u32>(1u), {v})")
            } else {
                format!("select(0u, 1u, {v})")
            }
        }
        Pack::BF16 => format!("{}({v})", h.need(H::Bf16Bits, vec)),
        Pack::F16 => format!("{}({v})", h.need(H::F16Bits, vec)),
    }
}

/// Statements storing the scalar `v` (an identifier, in the compute type of the arg's dtype) at element `i`
/// (a `u32` identifier or literal).
pub(crate) fn store_scalar(a: &ArgInfo, i: &str, v: &str, tmp: &str, h: &mut Helpers) -> Vec<String> {
    let n = &a.name;
    match a.layout {
        Layout::Word(_) if a.vec => vec![format!("{n}[{i} >> 2u][{i} & 3u] = {v};")],
        Layout::Word(_) => vec![format!("{n}[{i}] = {v};")],
        Layout::F16 => {
            let f = h.need(H::ToF16, false);
            if a.vec {
                vec![format!("{n}[{i} >> 2u][{i} & 3u] = {f}({v});")]
            } else {
                vec![format!("{n}[{i}] = {f}({v});")]
            }
        }
        Layout::Wide(Ct::I32) => vec![format!("{n}[{i}] = vec2<i32>({v}, {v} >> 31u);")],
        Layout::Wide(_) => vec![format!("{n}[{i}] = vec2<u32>({v}, 0u);")],
        Layout::Packed { bits, kind } => {
            let (shift_w, mask_i) = if bits == 8 { ("2u", "3u") } else { ("1u", "1u") };
            let mask = if bits == 8 { "0xffu" } else { "0xffffu" };
            let bits_expr = encode(kind, bits, v, false, h);
            let w = format!("{i} >> {shift_w}");
            if a.atomic {
                vec![
                    format!("let {tmp}s = ({i} & {mask_i}) * {bits}u;"),
                    format!("atomicAnd(&{n}[{w}], ~({mask} << {tmp}s));"),
                    format!("atomicOr(&{n}[{w}], ({bits_expr}) << {tmp}s);"),
                ]
            } else {
                // Only reachable when the caller proved this thread owns the word (never from the renderer).
                vec![
                    format!("let {tmp}s = ({i} & {mask_i}) * {bits}u;"),
                    format!("{n}[{w}] = ({n}[{w}] & ~({mask} << {tmp}s)) | (({bits_expr}) << {tmp}s);"),
                ]
            }
        }
    }
}

/// Statements storing the 4-vector `v` (an identifier, compute type) at elements `b..b+4` (`b` a `u32`
/// identifier or literal, a multiple of 4). Sub-word layouts write whole words (no atomics needed).
pub(crate) fn store_vec(a: &ArgInfo, b: &str, v: &str, tmp: &str, h: &mut Helpers) -> Vec<String> {
    let n = &a.name;
    let put = |w: String, val: String| {
        if a.atomic { format!("atomicStore(&{n}[{w}], {val});") } else { format!("{n}[{w}] = {val};") }
    };
    match a.layout {
        Layout::Word(_) if a.vec => vec![format!("{n}[{b} >> 2u] = {v};")],
        Layout::F16 if a.vec => vec![format!("{n}[{b} >> 2u] = {}({v});", h.need(H::ToF16, true))],
        Layout::Word(_) | Layout::F16 | Layout::Wide(_) => {
            let mut out = Vec::new();
            for (j, c) in ["x", "y", "z", "w"].iter().enumerate() {
                let i = format!("{tmp}i{j}");
                out.push(format!("let {i} = {b} + {j}u;"));
                out.extend(store_scalar(a, &i, &format!("{v}.{c}"), &format!("{tmp}{j}"), h));
            }
            out
        }
        Layout::Packed { bits, kind } => {
            let e = encode(kind, bits, v, true, h);
            let mut out = vec![format!("let {tmp}e = {e};")];
            if bits == 8 {
                out.push(put(
                    format!("{b} >> 2u"),
                    format!("{tmp}e.x | ({tmp}e.y << 8u) | ({tmp}e.z << 16u) | ({tmp}e.w << 24u)"),
                ));
            } else {
                out.push(put(format!("{b} >> 1u"), format!("{tmp}e.x | ({tmp}e.y << 16u)")));
                out.push(put(format!("({b} >> 1u) + 1u"), format!("{tmp}e.z | ({tmp}e.w << 16u)")));
            }
            out
        }
    }
}
