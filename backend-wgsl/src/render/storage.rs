//! Loads and stores of one element (or 4 aligned consecutive elements) of a bound argument, per layout.
//!
//! # Split bindings
//!
//! An argument whose buffer is larger than the adapter's `max_storage_buffer_binding_size` is bound as
//! several *windows* of the same buffer ([`Split`]): `a0_0`, `a0_1`, ..., each `array<T>` over a range that
//! starts at a multiple of the window size (a multiple of 16 bytes and of the storage offset alignment, so
//! a window holds whole `vec4`s, `vec2`s and packed words and no access straddles two windows). Every
//! access of such an argument goes through accessor functions that pick the window from the array index
//! (`ld_a0(i)`, `st_a0(i, v)`, `stc_a0(i, c, v)` for one component of a `vec4`, `and_a0` / `or_a0` for
//! the atomic read-modify-write of sub-word stores), so every kernel kind and every index pattern works
//! unchanged. Arguments that fit one binding are accessed directly (`a0[i]`), exactly as before.

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
    /// Bound as several windows (the buffer exceeds the binding limit); `None`: one binding.
    pub(crate) split: Option<Split>,
}

/// How an argument larger than one binding is split into windows of one buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Split {
    /// Bytes of every window but the last (a multiple of 16 and of the storage offset alignment).
    pub(crate) window_bytes: u64,
    /// Number of windows (at least 2).
    pub(crate) windows: u32,
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

    /// Bytes of one array element of the declaration (the unit the array is indexed in).
    pub(crate) fn unit_bytes(&self) -> u64 {
        match self.layout {
            Layout::Word(_) if self.vec => 16,
            Layout::F16 if self.vec => 8,
            Layout::Word(_) | Layout::Packed { .. } => 4,
            Layout::F16 => 2,
            Layout::Wide(_) => 8,
        }
    }

    /// Number of bindings the argument takes.
    pub(crate) fn binding_count(&self) -> u32 {
        self.split.map_or(1, |s| s.windows)
    }

    /// WGSL name of window `k` of a split argument.
    fn window(&self, k: u32) -> String {
        format!("{}_{k}", self.name)
    }

    /// The `var<storage, ...>` declaration(s), from `@binding(first)` on (one per window when split).
    pub(crate) fn declaration(&self, first: usize) -> String {
        let access = if self.read_write { "read_write" } else { "read" };
        let decl = |b: usize, name: &str| {
            format!("@group(0) @binding({b}) var<storage, {access}> {name}: array<{}>;", self.elem_type())
        };
        match self.split {
            None => decl(first, &self.name),
            Some(sp) => {
                (0..sp.windows).map(|k| decl(first + k as usize, &self.window(k))).collect::<Vec<_>>().join("\n")
            }
        }
    }

    /// Expression reading array element `u` (an expression; a word, element or `vec4` index), plainly or
    /// atomically, directly or through the window accessor of a split argument.
    fn read(&self, u: &str) -> String {
        match (self.split, self.atomic) {
            (Some(_), _) => format!("ld_{}({u})", self.name),
            (None, true) => format!("atomicLoad(&{}[{u}])", self.name),
            (None, false) => format!("{}[{u}]", self.name),
        }
    }

    /// Statement writing `v` to array element `u` (atomically when the array is atomic).
    fn write(&self, u: &str, v: &str) -> String {
        match (self.split, self.atomic) {
            (Some(_), _) => format!("st_{}({u}, {v});", self.name),
            (None, true) => format!("atomicStore(&{}[{u}], {v});", self.name),
            (None, false) => format!("{}[{u}] = {v};", self.name),
        }
    }

    /// Statement writing `v` to component `c` of `vec4` element `u`.
    fn write_component(&self, u: &str, c: &str, v: &str) -> String {
        match self.split {
            Some(_) => format!("stc_{}({u}, {c}, {v});", self.name),
            None => format!("{}[{u}][{c}] = {v};", self.name),
        }
    }

    /// Statement applying `atomicAnd` (`op` = "and") or `atomicOr` ("or") with `m` to word `u`.
    fn atomic_rmw(&self, op: &str, u: &str, m: &str) -> String {
        match self.split {
            Some(_) => format!("{op}_{}({u}, {m});", self.name),
            None => {
                let f = if op == "and" { "atomicAnd" } else { "atomicOr" };
                format!("{f}(&{}[{u}], {m});", self.name)
            }
        }
    }

    /// Records that the stores of a split argument call the accessors `kinds` (`ld`, `st`, `stc`, `and`,
    /// `or`), so [`ArgInfo::accessors`] emits them.
    fn note_accessors(&self, kinds: &[&str], h: &mut Helpers) {
        if self.split.is_some() {
            for k in kinds {
                h.accessors.insert(format!("{k}_{}", self.name));
            }
        }
    }

    /// The accessor functions of a split argument (empty when it is one binding), each followed by a blank
    /// line: `ld_` for a read argument, and for a written one those its stores called (`used`, as recorded
    /// in [`Helpers::accessors`]): `st_` (whole elements), `stc_` (one component of a `vec4` element),
    /// `and_` / `or_` (the atomic read-modify-write of sub-word stores), `ld_`.
    pub(crate) fn accessors(&self, used: &std::collections::BTreeSet<String>) -> String {
        let Some(sp) = self.split else { return String::new() };
        let n = &self.name;
        let units = sp.window_bytes / self.unit_bytes();
        let value_ty = if self.atomic { "u32".to_string() } else { self.elem_type() };
        let wants = |kind: &str| match self.access {
            Access::Read => kind == "ld",
            Access::Write => used.contains(&format!("{kind}_{n}")),
        };
        let mut out = Vec::new();
        if wants("ld") {
            let body = |w: &str, j: &str| {
                if self.atomic { format!("return atomicLoad(&{w}[{j}]);") } else { format!("return {w}[{j}];") }
            };
            out.push(self.accessor(&format!("ld_{n}(i: u32) -> {value_ty}"), units, sp.windows, true, &body));
        }
        if wants("st") {
            let body = |w: &str, j: &str| {
                if self.atomic { format!("atomicStore(&{w}[{j}], v);") } else { format!("{w}[{j}] = v;") }
            };
            out.push(self.accessor(&format!("st_{n}(i: u32, v: {value_ty})"), units, sp.windows, false, &body));
        }
        if wants("stc") {
            let scalar = match self.layout {
                Layout::Word(c) => c.scalar(),
                _ => "f16",
            };
            let body = |w: &str, j: &str| format!("{w}[{j}][c] = v;");
            let sig = format!("stc_{n}(i: u32, c: u32, v: {scalar})");
            out.push(self.accessor(&sig, units, sp.windows, false, &body));
        }
        for (op, f) in [("and", "atomicAnd"), ("or", "atomicOr")] {
            if wants(op) {
                let body = |w: &str, j: &str| format!("{f}(&{w}[{j}], m);");
                out.push(self.accessor(&format!("{op}_{n}(i: u32, m: u32)"), units, sp.windows, false, &body));
            }
        }
        out.iter().map(|f| format!("{f}\n")).collect()
    }

    /// One accessor: `fn {sig} { ... }` running `body(window, index in window)` on the window holding
    /// element `i`. Up to 4 windows test `i` against each window's end in turn; more use a `switch` on
    /// `i / units`. `returns`: `body` returns a value (the function then ends with a `return`).
    fn accessor(
        &self,
        sig: &str,
        units: u64,
        windows: u32,
        returns: bool,
        body: &dyn Fn(&str, &str) -> String,
    ) -> String {
        let mut f = format!("fn {sig} {{\n");
        let last = windows - 1;
        let local = |k: u32| if k == 0 { "i".to_string() } else { format!("i - {}u", u64::from(k) * units) };
        if windows <= 4 {
            for k in 0..last {
                let ret = if returns { "" } else { " return;" };
                f.push_str(&format!(
                    "    if (i < {}u) {{ {}{ret} }}\n",
                    u64::from(k + 1) * units,
                    body(&self.window(k), &local(k))
                ));
            }
            f.push_str(&format!("    {}\n", body(&self.window(last), &local(last))));
        } else {
            f.push_str(&format!("    let j = i % {units}u;\n    switch (i / {units}u) {{\n"));
            for k in 0..last {
                f.push_str(&format!("        case {k}u: {{ {} }}\n", body(&self.window(k), "j")));
            }
            if returns {
                f.push_str("        default: {}\n    }\n");
                f.push_str(&format!("    {}\n", body(&self.window(last), "j")));
            } else {
                f.push_str(&format!("        default: {{ {} }}\n    }}\n", body(&self.window(last), "j")));
            }
        }
        f.push_str("}\n");
        f
    }
}

/// Code to load one element: statements to emit first, then the value expression (in the compute type of
/// the dtype). `i` must be a `u32` identifier or literal (it may be used more than once).
pub(crate) fn load_scalar(a: &ArgInfo, i: &str, tmp: &str) -> (Vec<String>, String) {
    match a.layout {
        Layout::Word(_) if a.vec => (vec![], format!("{}[{i} & 3u]", a.read(&format!("{i} >> 2u")))),
        Layout::Word(_) => (vec![], a.read(i)),
        Layout::F16 if a.vec => (vec![], format!("f32({}[{i} & 3u])", a.read(&format!("{i} >> 2u")))),
        Layout::F16 => (vec![], format!("f32({})", a.read(i))),
        Layout::Wide(_) => (vec![], format!("{}.x", a.read(i))),
        Layout::Packed { bits, kind } => {
            let (shift_w, mask_i) = if bits == 8 { ("2u", "3u") } else { ("1u", "1u") };
            let pre = vec![
                format!("let {tmp}w = {};", a.read(&format!("{i} >> {shift_w}"))),
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

/// The two words holding the 4 consecutive packed 16-bit floats (bf16, or f16 without shader-f16)
/// starting at `b` (a multiple of 4), as a `vec2<u32>` expression; `None` for other layouts. With
/// [`unpack_words`] later, a load's result can wait in a register unconverted: a conversion right
/// after the load would stall the thread until the load completes, where a prefetch into registers
/// is meant to overlap it with other work.
pub(crate) fn load_words(a: &ArgInfo, b: &str) -> Option<String> {
    holds_words(a)
        .then(|| format!("vec2<u32>({}, {})", a.read(&format!("{b} >> 1u")), a.read(&format!("({b} >> 1u) + 1u"))))
}

/// Whether `a` packs 16-bit floats two to a word (what [`load_words`] reads).
pub(crate) fn holds_words(a: &ArgInfo) -> bool {
    matches!(a.layout, Layout::Packed { bits: 16, kind: Pack::BF16 | Pack::F16 })
}

/// The 4 floats in `w`, a `vec2<u32>` from [`load_words`], as a `vec4<f32>`.
pub(crate) fn unpack_words(a: &ArgInfo, w: &str) -> Option<String> {
    match a.layout {
        Layout::Packed { bits: 16, kind: Pack::BF16 } => Some(format!(
            "bitcast<vec4<f32>>((vec4<u32>({w}.x, {w}.x, {w}.y, {w}.y) >> vec4<u32>(0u, 16u, 0u, 16u)) << vec4<u32>(16u))"
        )),
        Layout::Packed { bits: 16, kind: Pack::F16 } => {
            Some(format!("vec4<f32>(unpack2x16float({w}.x), unpack2x16float({w}.y))"))
        }
        _ => None,
    }
}

/// Code to load 4 consecutive elements starting at `b` (a `u32` identifier or literal, a multiple of 4) as
/// a 4-vector of the compute type.
pub(crate) fn load_vec(a: &ArgInfo, b: &str, tmp: &str, ct: Ct) -> (Vec<String>, String) {
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
        Layout::Word(_) if a.vec => (vec![], a.read(&format!("{b} >> 2u"))),
        Layout::F16 if a.vec => (vec![], format!("vec4<f32>({})", a.read(&format!("{b} >> 2u")))),
        Layout::Word(_) => (vec![], four(&|i| a.read(i))),
        Layout::F16 => (vec![], four(&|i| format!("f32({})", a.read(i)))),
        Layout::Wide(_) => (vec![], four(&|i| format!("{}.x", a.read(i)))),
        Layout::Packed { bits: 8, kind } => {
            let pre = vec![format!("let {tmp}w = vec4<u32>({});", a.read(&format!("{b} >> 2u")))];
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
                format!("let {tmp}a = {};", a.read(&format!("{b} >> 1u"))),
                format!("let {tmp}b = {};", a.read(&format!("({b} >> 1u) + 1u"))),
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
    let used: &[&str] = match a.layout {
        Layout::Word(_) | Layout::F16 if a.vec => &["stc"],
        Layout::Packed { .. } if a.atomic => &["and", "or"],
        Layout::Packed { .. } => &["ld", "st"],
        _ => &["st"],
    };
    a.note_accessors(used, h);
    match a.layout {
        Layout::Word(_) if a.vec => vec![a.write_component(&format!("{i} >> 2u"), &format!("{i} & 3u"), v)],
        Layout::Word(_) => vec![a.write(i, v)],
        Layout::F16 => {
            let f = h.need(H::ToF16, false);
            if a.vec {
                vec![a.write_component(&format!("{i} >> 2u"), &format!("{i} & 3u"), &format!("{f}({v})"))]
            } else {
                vec![a.write(i, &format!("{f}({v})"))]
            }
        }
        Layout::Wide(Ct::I32) => vec![a.write(i, &format!("vec2<i32>({v}, {v} >> 31u)"))],
        Layout::Wide(_) => vec![a.write(i, &format!("vec2<u32>({v}, 0u)"))],
        Layout::Packed { bits, kind } => {
            let (shift_w, mask_i) = if bits == 8 { ("2u", "3u") } else { ("1u", "1u") };
            let mask = if bits == 8 { "0xffu" } else { "0xffffu" };
            let bits_expr = encode(kind, bits, v, false, h);
            let w = format!("{i} >> {shift_w}");
            if a.atomic {
                vec![
                    format!("let {tmp}s = ({i} & {mask_i}) * {bits}u;"),
                    a.atomic_rmw("and", &w, &format!("~({mask} << {tmp}s)")),
                    a.atomic_rmw("or", &w, &format!("({bits_expr}) << {tmp}s")),
                ]
            } else {
                // Only reachable when the caller proved this thread owns the word (never from the renderer).
                vec![
                    format!("let {tmp}s = ({i} & {mask_i}) * {bits}u;"),
                    a.write(&w, &format!("({} & ~({mask} << {tmp}s)) | (({bits_expr}) << {tmp}s)", a.read(&w))),
                ]
            }
        }
    }
}

/// Statements storing the 4-vector `v` (an identifier, compute type) at elements `b..b+4` (`b` a `u32`
/// identifier or literal, a multiple of 4). Sub-word layouts write whole words (no atomics needed).
pub(crate) fn store_vec(a: &ArgInfo, b: &str, v: &str, tmp: &str, h: &mut Helpers) -> Vec<String> {
    if a.vec || matches!(a.layout, Layout::Packed { .. }) {
        a.note_accessors(&["st"], h);
    }
    let put = |w: String, val: String| a.write(&w, &val);
    match a.layout {
        Layout::Word(_) if a.vec => vec![a.write(&format!("{b} >> 2u"), v)],
        Layout::F16 if a.vec => vec![a.write(&format!("{b} >> 2u"), &format!("{}({v})", h.need(H::ToF16, true)))],
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
