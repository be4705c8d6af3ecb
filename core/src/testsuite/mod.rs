//! The conformance suite every backend runs: op, fused-pattern, dtype and awkward-size cases
//! written once and instantiated per backend (as CubeCL's test generator does).
//!
//! A backend's test file is two items:
//!
//! ```ignore
//! fn backend() -> Option<std::sync::Arc<dyn sinter_core::backend::Backend>> { /* None: no device */ }
//! sinter_core::backend_suite!(backend);          // or backend_suite!(backend, "wgsl")
//! ```
//!
//! [`backend_suite!`](crate::backend_suite) expands to one `#[test] fn <case>()` per case of
//! `cases` (fusion on) plus `unfused::<case>` for each fused-pattern case (fusion off), and
//! `suite_lists_every_case`, which fails when the macro's case list and `cases` disagree (so a
//! case without a test cannot exist). The factory is called once per test binary.
//!
//! Each case holds one or more [`Instance`]s (a graph at one size, say `n=4097`); [`run_case`]
//! compiles each with [`crate::compile::compile`] (no disk cache, no artifacts), runs it twice
//! with different random inputs (so an output a kernel fails to write shows as the previous run's
//! value), then once more through the device path (`upload`, `run_device`, `to_host`), comparing
//! every run with [`crate::cpu::run`] ([`check::compare`]: per-dtype bounds, NaN only matches NaN,
//! infinities exactly). A graph using a dtype missing from the backend's
//! [`Capabilities::dtypes`](crate::kernel::Capabilities) must instead fail with an Unsupported
//! error naming that dtype (the backend's [`BackendError::Unsupported`], or the scheduler's
//! [`crate::Error::Unsupported`] when it refuses the dtype first).
//!
//! Without a device the factory returns `None` and every test prints `skipped: no <backend>
//! device` and passes, unless the backend's require variable is `1` ([`require_env`]:
//! `SINTER_REQUIRE_GPU` for `wgsl`, `SINTER_REQUIRE_CUDA` for `cuda`), which makes it fail.
//! `SINTER_SUITE_SEED` (an integer) changes every input; `SINTER_SUITE_MODE` (`default`,
//! `reduce-overhead`, `max-autotune`) compiles every case in that mode.

pub mod builder;
pub mod check;
pub mod programs;

mod cases;
mod layout;
mod ops;
mod patterns;
#[cfg(test)]
mod selftest;

pub use cases::cases;
pub use check::{Tol, compare};

use crate::backend::{Backend, BackendError, Mode};
use crate::compile::{CompileError, CompileOptions, compile};
use crate::dtype::DType;
use crate::ir::Graph as IrGraph;
use crate::tensor::HostTensor;
use crate::trace::{Graph, Tensor};
use std::sync::Arc;

/// How the values of one input are drawn (dtype and shape come from the graph).
#[derive(Clone, Debug, PartialEq)]
pub enum Dist {
    /// Uniform in `[lo, hi)`; integers: that range floored; bools: a coin flip.
    Uniform(f64, f64),
    /// Uniform, floored to integers even for float dtypes (ties for arg-reductions).
    Steps(f64, f64),
    /// Uniform with zeros replaced by 1 (integer divisors).
    NonZero(f64, f64),
    /// Uniform, with the first elements replaced by `specials` (NaN, infinities, signed zeros,
    /// edges of the op's domain) when the tensor holds at least twice as many elements.
    Specials(f64, f64, Vec<f64>),
}

impl Dist {
    /// A tensor of `dtype` and `shape` drawn with `seed`.
    pub fn draw(&self, dtype: DType, shape: &[usize], seed: u64) -> HostTensor {
        let shape = shape.to_vec();
        match self {
            Dist::Uniform(lo, hi) => HostTensor::random(dtype, shape, seed, *lo, *hi),
            Dist::Steps(lo, hi) => {
                let v: Vec<f64> = HostTensor::random(DType::F64, shape.clone(), seed, *lo, *hi)
                    .to_f64_vec()
                    .iter()
                    .map(|x| x.floor())
                    .collect();
                HostTensor::from_f64(dtype, shape, &v)
            }
            Dist::NonZero(lo, hi) => {
                let mut v = HostTensor::random(dtype, shape.clone(), seed, *lo, *hi).to_i64_vec();
                v.iter_mut().filter(|x| **x == 0).for_each(|x| *x = 1);
                HostTensor::from_i64(dtype, shape, &v)
            }
            Dist::Specials(lo, hi, specials) => {
                let t = HostTensor::random(dtype, shape.clone(), seed, *lo, *hi);
                if t.numel() < 2 * specials.len() {
                    return t;
                }
                let mut v = t.to_f64_vec();
                v[..specials.len()].copy_from_slice(specials);
                HostTensor::from_f64(dtype, shape, &v)
            }
        }
    }
}

/// One graph of a case at one size, with how to draw its inputs and the error bound.
#[derive(Clone, Debug)]
pub struct Instance {
    /// What distinguishes it within its case (`n=1023`, `7x4097`).
    pub label: String,
    /// The graph (built and verified).
    pub graph: IrGraph,
    /// One distribution per graph input, in input order.
    pub inputs: Vec<Dist>,
    /// The bound float outputs are compared with.
    pub tol: Tol,
}

impl Instance {
    /// Fresh inputs for run `run` (a different draw per run, case and instance).
    pub fn draw_inputs(&self, case: &str, run: u64) -> Vec<HostTensor> {
        let base = seed_of(&format!("{case}/{}", self.label)) ^ env_seed();
        self.graph
            .inputs
            .iter()
            .zip(&self.inputs)
            .enumerate()
            .map(|(i, (&id, dist))| {
                let ty = self.graph.ty(id);
                let shape = ty.shape.as_static().unwrap_or_default();
                let seed = base.wrapping_add(run.wrapping_mul(0x9E37_79B9)).wrapping_add(i as u64 * 7919);
                dist.draw(ty.dtype, &shape, seed)
            })
            .collect()
    }

    /// The dtypes of every node of the graph, sorted, without repeats.
    pub fn dtypes(&self) -> Vec<DType> {
        let mut d: Vec<DType> = self.graph.nodes.iter().map(|n| n.ty.dtype).collect();
        d.sort();
        d.dedup();
        d
    }
}

/// Builds an [`Instance`]: inputs declared with their distributions, then the outputs.
pub(crate) struct Builder {
    g: Graph,
    dists: Vec<Dist>,
}

impl Builder {
    /// An empty graph.
    pub(crate) fn new() -> Builder {
        Builder { g: Graph::new(), dists: Vec::new() }
    }

    /// The graph (for constants).
    pub(crate) fn graph(&self) -> &Graph {
        &self.g
    }

    /// Declares an input drawn from `dist`.
    pub(crate) fn input(&mut self, dtype: DType, shape: &[usize], dist: Dist) -> Tensor {
        let name = format!("x{}", self.dists.len());
        self.dists.push(dist);
        self.g.input(&name, dtype, shape.to_vec())
    }

    /// Marks the outputs and builds the verified instance.
    pub(crate) fn finish(self, label: impl Into<String>, tol: Tol, outputs: &[&Tensor]) -> Result<Instance, String> {
        let label = label.into();
        for o in outputs {
            self.g.output(o);
        }
        let graph = self.g.build().map_err(|e| format!("building instance {label}: {e}"))?;
        Ok(Instance { label, graph, inputs: self.dists, tol })
    }
}

/// The closure that builds a case's instances.
type BuildFn = Box<dyn Fn() -> Result<Vec<Instance>, String> + Send + Sync>;

/// One test of the suite: a name and the instances it checks.
pub struct Case {
    /// The test's name (a Rust identifier).
    pub name: String,
    /// A fused pattern (softmax, layer norm, matmul epilogue, ...): also run with fusion off.
    pub fused: bool,
    build: BuildFn,
}

impl std::fmt::Debug for Case {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Case").field("name", &self.name).field("fused", &self.fused).finish_non_exhaustive()
    }
}

impl Case {
    /// A case from a name and its instance builder.
    pub fn new(
        name: impl Into<String>,
        fused: bool,
        build: impl Fn() -> Result<Vec<Instance>, String> + Send + Sync + 'static,
    ) -> Case {
        Case { name: name.into(), fused, build: Box::new(build) }
    }

    /// Builds the instances (graphs are built here, not in `cases`).
    pub fn instances(&self) -> Result<Vec<Instance>, String> {
        (self.build)()
    }
}

/// The case named `name`.
pub fn case(name: &str) -> Option<Case> {
    cases().into_iter().find(|c| c.name == name)
}

/// A stable 64-bit hash of a string (FNV-1a), for seeds.
fn seed_of(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3))
}

/// `SINTER_SUITE_MODE` (`default`, `reduce-overhead`, `max-autotune`), or [`Mode::Default`].
/// Panics on an unknown name (a typo must not silently test the default mode).
pub fn suite_mode() -> Mode {
    match std::env::var("SINTER_SUITE_MODE") {
        Ok(v) if !v.trim().is_empty() => {
            Mode::from_name(v.trim()).unwrap_or_else(|| panic!("SINTER_SUITE_MODE={v:?} is not a compile mode"))
        }
        _ => Mode::Default,
    }
}

/// `SINTER_SUITE_SEED`, or 0.
fn env_seed() -> u64 {
    std::env::var("SINTER_SUITE_SEED").ok().and_then(|v| v.trim().parse().ok()).unwrap_or(0)
}

/// Runs every instance of `case` on `backend` (fusion on or off) and compares with the CPU
/// reference; `Err` lists every instance that failed and why.
pub fn run_case(backend: Arc<dyn Backend>, case: &Case, fusion: bool) -> Result<(), String> {
    let instances = case.instances().map_err(|e| format!("{}: {e}", case.name))?;
    if instances.is_empty() {
        return Err(format!("{}: the case has no instances", case.name));
    }
    let failures: Vec<String> = instances
        .iter()
        .filter_map(|inst| {
            run_instance(&backend, &case.name, inst, fusion)
                .err()
                .map(|e| format!("{} [{}] on {} (fusion {}): {e}", case.name, inst.label, backend.name(), on(fusion)))
        })
        .collect();
    if failures.is_empty() { Ok(()) } else { Err(failures.join("\n")) }
}

fn on(b: bool) -> &'static str {
    if b { "on" } else { "off" }
}

/// Runs one instance: the Unsupported check when the backend lacks one of its dtypes, else two
/// host runs and one device run against the reference.
fn run_instance(backend: &Arc<dyn Backend>, case: &str, inst: &Instance, fusion: bool) -> Result<(), String> {
    let missing: Vec<DType> = inst.dtypes().into_iter().filter(|d| !backend.caps().dtypes.contains(d)).collect();
    // The suite checks the backend itself: no graph breaks (a missing dtype must be refused).
    let opts = CompileOptions {
        mode: suite_mode(),
        fusion,
        cache_dir: None,
        debug_dir: None,
        graph_breaks: false,
        ..Default::default()
    };
    let compiled = compile(&inst.graph, backend.clone(), opts.clone());
    if !missing.is_empty() {
        let err = match compiled {
            Err(e) => e,
            Ok(c) => match c.run(&inst.draw_inputs(case, 0)) {
                Err(e) => e,
                Ok(_) => return Err(format!("ran although the backend does not list {missing:?} among its dtypes")),
            },
        };
        return check_unsupported(&err, &missing);
    }
    // A backend that computes 64-bit integers in 32 bits (WGSL) refuses, naming the op, a kernel
    // whose values it cannot prove stay there (`kernel::narrow`); the graph must then still give
    // the reference's values with that kernel on the CPU reference (a graph break).
    let compiled = match compiled {
        Err(CompileError::Backend(BackendError::Unsupported { what, .. }))
            if what.contains("may overflow 32-bit arithmetic") =>
        {
            let c = compile(&inst.graph, backend.clone(), CompileOptions { graph_breaks: true, ..opts })
                .map_err(|e| format!("compile with graph breaks failed: {e}"))?;
            if c.graph_breaks().is_empty() {
                return Err(format!("refused ({what}) but compiled without a graph break"));
            }
            c
        }
        other => other.map_err(|e| format!("compile failed: {e}"))?,
    };
    let mut tol = inst.tol;
    for run in 0..2 {
        let inputs = inst.draw_inputs(case, run);
        let want = crate::cpu::run(&inst.graph, &inputs).map_err(|e| format!("the CPU reference failed: {e}"))?;
        let got = compiled.run(&inputs).map_err(|e| format!("run {run} failed: {e}"))?;
        // Where the program allowed TF32 (convolutions by default), the TF32 bound.
        tol = tol_for(&compiled, inst.tol);
        compare(&got, &want, tol).map_err(|e| format!("run {run}: {e}"))?;
    }
    let inputs = inst.draw_inputs(case, 2);
    let want = crate::cpu::run(&inst.graph, &inputs).map_err(|e| format!("the CPU reference failed: {e}"))?;
    let on_device = inputs
        .iter()
        .map(|t| compiled.upload(t))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("upload failed: {e}"))?;
    let outs = compiled.run_device(&on_device).map_err(|e| format!("run_device failed: {e}"))?;
    // Outputs stay where uploads go (a backend's own buffers, not host copies).
    if let Some(home) = on_device.first().map(|t| t.backend().to_string())
        && let Some(o) = outs.iter().find(|o| o.backend() != home)
    {
        return Err(format!("run_device left an output on the {} backend, inputs upload to {home}", o.backend()));
    }
    let got = outs
        .iter()
        .map(|t| t.to_host())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("download after run_device failed: {e}"))?;
    compare(&got, &want, tol).map_err(|e| format!("run_device: {e}"))
}

/// The bound of an instance compiled as `c`: `tol`, or [`Tol::tf32`] of it when a kernel of the
/// compiled programs may run its products in TF32.
pub fn tol_for(c: &crate::compile::CompiledGraph, tol: Tol) -> Tol {
    let tf32 = c.programs().iter().flat_map(|p| &p.kernels).any(|k| match &k.body {
        crate::kernel::KernelBody::Matmul(m) => m.tf32,
        _ => false,
    });
    if tf32 { tol.tf32() } else { tol }
}

/// Passes when `err` is an Unsupported error naming one of `missing`: the backend's
/// ([`BackendError::Unsupported`]) or the scheduler's, which refuses a dtype the backend's
/// capabilities lack before the backend sees it ([`crate::Error::Unsupported`]).
fn check_unsupported(err: &CompileError, missing: &[DType]) -> Result<(), String> {
    let what = match err {
        CompileError::Backend(BackendError::Unsupported { what, .. }) => Some(what),
        CompileError::Graph(crate::Error::Unsupported(what)) => Some(what),
        _ => None,
    };
    match what {
        Some(w) if missing.iter().any(|d| w.contains(d.name())) => Ok(()),
        _ => Err(format!("expected an Unsupported error naming one of {missing:?}, got: {err}")),
    }
}

/// The backend label of a test crate's package (`sinter-wgsl` → `wgsl`, `sinter-cuda` → `cuda`,
/// `sinter-core` → `interp`); other names are returned unchanged.
pub fn label_of_package(pkg: &'static str) -> &'static str {
    match pkg {
        "sinter-wgsl" => "wgsl",
        "sinter-cuda" => "cuda",
        "sinter-core" => "interp",
        other => other,
    }
}

/// The environment variable that turns a missing device into a failure for a backend label:
/// `SINTER_REQUIRE_GPU` for `wgsl` (CI sets it), `SINTER_REQUIRE_CUDA` for `cuda` (the device
/// run sets it), none otherwise.
pub fn require_env(label: &str) -> Option<&'static str> {
    match label {
        "wgsl" => Some("SINTER_REQUIRE_GPU"),
        "cuda" => Some("SINTER_REQUIRE_CUDA"),
        _ => None,
    }
}

/// The body of every generated test: skips (or fails, see [`require_env`]) without a backend,
/// else runs the case named `name` and panics with its failures.
pub fn run_test(backend: Option<Arc<dyn Backend>>, label: &str, name: &str, fusion: bool) {
    let Some(backend) = backend else {
        if let Some(var) = require_env(label)
            && std::env::var(var).is_ok_and(|v| v.trim() == "1")
        {
            panic!("{var}=1 but there is no {label} device");
        }
        eprintln!("skipped: no {label} device");
        return;
    };
    let Some(c) = case(name) else { panic!("the suite has no case named {name:?}") };
    if let Err(e) = run_case(backend, &c, fusion) {
        panic!("{e}");
    }
}

/// Checks a generated test list against `cases`: the same set of names (each once), and the
/// fused ones exactly the cases marked fused. Panics with the differences.
pub fn check_list(plain: &[&str], fused: &[&str]) {
    let all = cases();
    let want_plain: Vec<&str> = all.iter().filter(|c| !c.fused).map(|c| c.name.as_str()).collect();
    let want_fused: Vec<&str> = all.iter().filter(|c| c.fused).map(|c| c.name.as_str()).collect();
    let missing = |want: &[&str], have: &[&str]| -> Vec<String> {
        want.iter().filter(|n| !have.contains(n)).map(|n| n.to_string()).collect()
    };
    let mut errs = Vec::new();
    for (kind, want, have) in [("plain", &want_plain, plain), ("fused", &want_fused, fused)] {
        let m = missing(want, have);
        if !m.is_empty() {
            errs.push(format!(
                "{kind} cases without a test (add them to the list in core/src/testsuite/mod.rs): {m:?}"
            ));
        }
        let extra = missing(have, want);
        if !extra.is_empty() {
            errs.push(format!("{kind} tests without a case in cases(): {extra:?}"));
        }
    }
    let mut names: Vec<&str> = plain.iter().chain(fused).copied().collect();
    names.sort();
    if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
        errs.push(format!("the test list names {:?} twice", w[0]));
    }
    assert!(errs.is_empty(), "{}", errs.join("\n"));
}

/// Instantiates the suite for a backend: `backend_suite!(factory)` or
/// `backend_suite!(factory, "label")`, where `factory` is a `fn() ->
/// Option<Arc<dyn Backend>>` (`None`: no device) and the label (default: from the package name,
/// [`testsuite::label_of_package`](crate::testsuite::label_of_package)) picks the skip message and
/// the require variable. See [the module docs](crate::testsuite).
#[macro_export]
macro_rules! backend_suite {
    ($make:expr) => {
        $crate::backend_suite!($make, $crate::testsuite::label_of_package(env!("CARGO_PKG_NAME")));
    };
    ($make:expr, $label:expr) => {
        $crate::__sinter_suite!(@list @tests $make, $label);
    };
}

/// The suite's case list (one identifier per case of `cases`) and what the list expands to.
#[doc(hidden)]
#[macro_export]
macro_rules! __sinter_suite {
    (@list $($mode:tt)*) => {
        $crate::__sinter_suite! { @expand [$($mode)*]
            plain [
                unary_neg, unary_abs, unary_exp, unary_log, unary_sqrt, unary_rsqrt, unary_sin, unary_cos,
                unary_tan, unary_asin, unary_acos, unary_atan, unary_sinh, unary_cosh, unary_asinh,
                unary_acosh, unary_atanh, unary_tanh, unary_sigmoid, unary_erf, unary_relu, unary_floor,
                unary_ceil, unary_round, unary_sign, unary_reciprocal, unary_not, unary_isnan, unary_isinf,
                binary_add, binary_sub, binary_mul, binary_div, binary_pow, binary_max, binary_min,
                binary_mod, binary_fmod, binary_eq, binary_ne, binary_lt, binary_le, binary_gt, binary_ge,
                binary_and, binary_or, binary_xor,
                cast_from_f32, cast_from_f16, cast_from_bf16, cast_from_f64, cast_from_i8, cast_from_i16,
                cast_from_i32, cast_from_i64, cast_from_u8, cast_from_u16, cast_from_u32, cast_from_u64,
                cast_from_bool, cast_from_f8e4m3, cast_from_f8e5m2,
                compare_where, where_broadcast, div_by_constant_zero, int_div_by_zero,
                broadcast_binary, expand_reshape, permute_2d, permute_3d, slice_step, slice_reverse,
                pad_constant, pad_reflect, pad_edge, pad_wrap, concat_last, concat_first, gather_embedding,
                gather_axis1, gather_elements, gather_out_of_range,
                reduce_sum_last, reduce_sum_middle, reduce_sum_all, reduce_max_last, reduce_max_middle,
                reduce_min_last, reduce_min_middle, reduce_mean_last, reduce_mean_middle, reduce_prod_last,
                reduce_prod_middle, reduce_split_rows, reduce_max_special, argmax_last, argmax_middle, argmin_last,
                argmax_special,
                matmul_sizes, matmul_batched, matmul_broadcast, matmul_transposed, matmul_vector,
                conv2d_small, conv2d_strided_grouped, conv2d_depthwise, conv2d_pointwise, pool2d,
                dtype_f16, dtype_bf16, dtype_f64, dtype_i32, dtype_i64, dtype_u8, dtype_bool,
                dtype_f16_matmul, dtype_bf16_matmul, matmul_bf16_shapes, matmul_f16_shapes,
            ]
            fused [
                softmax_last, softmax_middle, log_softmax_last, layer_norm, gelu, gelu_tanh, silu,
                add_relu_mul, normalize_rows, matmul_bias_relu, conv2d_bias_relu, convnext_blocks, attention,
                multihead_attention_block, permuted_product_projection,
                attention_layouts_masks, attention_bf16, attention_f16,
                dtype_f16_softmax, dtype_bf16_layer_norm, matmul_bf16_layouts_epilogue,
                matmul_f16_layouts_epilogue,
            ]
        }
    };
    (@expand [@names] plain [$($p:ident),* $(,)?] fused [$($f:ident),* $(,)?]) => {
        (&[$(stringify!($p)),*] as &[&str], &[$(stringify!($f)),*] as &[&str])
    };
    (@expand [@tests $make:expr, $label:expr] plain [$($p:ident),* $(,)?] fused [$($f:ident),* $(,)?]) => {
        /// The backend under test, made once per test binary.
        fn __sinter_suite_backend() -> ::std::option::Option<::std::sync::Arc<dyn $crate::backend::Backend>> {
            static B: ::std::sync::OnceLock<::std::option::Option<::std::sync::Arc<dyn $crate::backend::Backend>>> =
                ::std::sync::OnceLock::new();
            B.get_or_init(|| ($make)()).clone()
        }
        $(
            #[test]
            fn $p() {
                $crate::testsuite::run_test(__sinter_suite_backend(), $label, stringify!($p), true)
            }
        )*
        $(
            #[test]
            fn $f() {
                $crate::testsuite::run_test(__sinter_suite_backend(), $label, stringify!($f), true)
            }
        )*
        /// The fused-pattern cases with fusion off (one kernel per primitive op).
        mod unfused {
            $(
                #[test]
                fn $f() {
                    $crate::testsuite::run_test(super::__sinter_suite_backend(), $label, stringify!($f), false)
                }
            )*
        }
        #[test]
        fn suite_lists_every_case() {
            $crate::testsuite::check_list(&[$(stringify!($p)),*], &[$(stringify!($f)),*]);
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_macro_list_and_cases_agree() {
        let (plain, fused) = crate::__sinter_suite!(@list @names);
        check_list(plain, fused);
    }

    #[test]
    fn check_list_rejects_missing_extra_and_repeated_names() {
        let (plain, fused) = crate::__sinter_suite!(@list @names);
        let short = &plain[1..];
        assert!(std::panic::catch_unwind(|| check_list(short, fused)).is_err());
        let mut extra = plain.to_vec();
        extra.push("no_such_case");
        assert!(std::panic::catch_unwind(|| check_list(&extra, fused)).is_err());
        // A fused case listed as plain is wrong too.
        let mut moved = plain.to_vec();
        moved.push(fused[0]);
        assert!(std::panic::catch_unwind(|| check_list(&moved, &fused[1..])).is_err());
    }

    #[test]
    fn every_case_builds_verified_instances_with_one_dist_per_input() {
        for c in cases() {
            let insts = c.instances().unwrap_or_else(|e| panic!("{}: {e}", c.name));
            assert!(!insts.is_empty(), "{} has no instances", c.name);
            for i in &insts {
                assert_eq!(i.inputs.len(), i.graph.inputs.len(), "{} [{}]", c.name, i.label);
                assert!(!i.graph.outputs.is_empty(), "{} [{}]", c.name, i.label);
                let a = i.draw_inputs(&c.name, 0);
                let b = i.draw_inputs(&c.name, 1);
                crate::cpu::run(&i.graph, &a).unwrap_or_else(|e| panic!("{} [{}]: reference: {e}", c.name, i.label));
                // Runs draw different inputs (unless a tensor is too small to differ: one bool).
                let big = a.iter().any(|t| t.numel() > 8);
                assert!(!big || a != b, "{} [{}]: both runs draw the same inputs", c.name, i.label);
            }
        }
    }

    #[test]
    fn unsupported_errors_must_name_the_missing_dtype() {
        let e =
            |what: &str| CompileError::Backend(BackendError::Unsupported { backend: "x".into(), what: what.into() });
        assert!(check_unsupported(&e("buffer b0 is f64"), &[DType::F64]).is_ok());
        assert!(check_unsupported(&e("too many bindings"), &[DType::F64]).is_err());
        let other = CompileError::Backend(BackendError::Device("f64".into()));
        assert!(check_unsupported(&other, &[DType::F64]).is_err());
        let sched = CompileError::Graph(crate::Error::Unsupported("%0 has dtype f64".into()));
        assert!(check_unsupported(&sched, &[DType::F64]).is_ok());
        assert!(check_unsupported(&sched, &[DType::BF16]).is_err());
    }

    #[test]
    fn labels_and_require_variables() {
        assert_eq!(label_of_package("sinter-wgsl"), "wgsl");
        assert_eq!(require_env("wgsl"), Some("SINTER_REQUIRE_GPU"));
        assert_eq!(require_env("cuda"), Some("SINTER_REQUIRE_CUDA"));
        assert_eq!(require_env("interp"), None);
    }
}
