//! The host interpreter of the kernel IR: executes a [`Program`] with the numeric conventions of a
//! GPU backend, so the scheduler and every fused pattern are tested without a device.
//!
//! * Every unary, binary and cast computes as [`crate::scalar`] defines (the CPU reference shares
//!   it); literals convert as a cast from f64 does.
//! * f32, f16, bf16 and fp8 expressions compute in f32 (each result rounded to f32); f64 in f64;
//!   integers wrap to their dtype after every operation (u64 held as its bit pattern). A cast to
//!   f16/bf16/fp8, a literal of one of them, and a store into such a buffer, round to that
//!   precision (fp8 as [`crate::fp8`]: nearest even, overflow to NaN or infinity); a load of fp8
//!   widens exactly.
//! * Reductions accumulate in [`Reduction::dtype`] in order of [`Var::Red`]; matmuls accumulate in
//!   [`MatmulBody::acc_dtype`] in order of `k`, each step a fused multiply-add (an im2col tap in the
//!   padding adds nothing: its product is an exact 0). [`MatmulBody::tf32`] is ignored: the
//!   interpreter computes f32 products exactly, as the property allows.
//! * Intermediate buffers live in the slots of the program's [`MemoryPlan`](super::MemoryPlan), so a wrong plan
//!   corrupts results; slots and output buffers start poisoned (all bytes `0xFF`: NaN for
//!   floats, all ones for integers), so a missing store shows.
//! * [`validate`] runs first and checks the IR invariants (in-range indices, operand order,
//!   phases); any violation is an error, never a panic.
//!
//! [`InterpBackend`] wraps it as a [`Backend`] with configurable [`Capabilities`] (e.g. 8
//! bindings, to exercise the scheduler's splitting).

use super::{
    BufferKind, Capabilities, Expr, ExprId, Index, IndexCmp, Kernel, KernelBody, MatmulBody, Program, RedOp, Reduction,
    Store, Var,
};
use crate::backend::{Backend, BackendError, Executable, KernelSource, KernelTiming, Mode};
use crate::dtype::DType;
use crate::error::Error;
use crate::ir::{BinaryOp, UnaryOp};
use crate::scalar::{self, Scalar as Val, cast, cast_int, fmax_nan, fmin_nan};
use crate::tensor::HostTensor;
use half::{bf16, f16};
use std::time::Instant;

mod validate;
pub use validate::validate;

fn err(kernel: &str, msg: impl Into<String>) -> Error {
    Error::Eval { node: format!("kernel {kernel}"), msg: msg.into() }
}

/// Rounds to the precision an expression of `dt` is computed in.
pub(super) fn compute(dt: DType, x: f64) -> f64 {
    if dt == DType::F64 { x } else { x as f32 as f64 }
}

/// Rounds an op's result to the precision of its expression's dtype `dt`: compute precision for
/// floats ([`compute`]), the dtype's range for integers.
pub(super) fn round(dt: DType, v: Val) -> Val {
    match v {
        Val::F(x) => Val::F(compute(dt, x)),
        Val::I(i) => Val::I(cast_int(dt, i)),
    }
}

/// A unary op ([`scalar::unary`]) on `v` of dtype `od`, rounded to the expression's dtype `dt`.
fn unary(op: UnaryOp, v: Val, od: DType, dt: DType) -> Result<Val, String> {
    scalar::unary(op, v, od).map(|r| round(dt, r))
}

/// A binary op ([`scalar::binary`]) on operands of dtype `od`, rounded to the expression's dtype
/// `dt`.
fn binary(op: BinaryOp, a: Val, b: Val, od: DType, dt: DType) -> Result<Val, String> {
    scalar::binary(op, a, b, od).map(|r| round(dt, r))
}

/// A literal of dtype `dt`: converted as a cast from `f64` ([`scalar::cast`]: floats rounded to
/// the dtype's storage precision, integers truncated and wrapped, bool `!= 0`), then held at
/// compute precision, as a renderer's literal is.
fn konst(c: f64, dt: DType) -> Val {
    match cast(Val::F(c), DType::F64, dt) {
        Val::F(x) => Val::F(compute(dt, x)),
        i => i,
    }
}

/// Calls `f` on every expression operand of `e` (including values used inside indices).
fn operands(e: &Expr, f: &mut dyn FnMut(ExprId)) {
    match e {
        Expr::Load { index, .. } | Expr::IndexValue(index) => index.values(f),
        Expr::IndexCmp(_, a, b) => {
            a.values(f);
            b.values(f);
        }
        Expr::Unary(_, a) | Expr::Cast(a) => f(*a),
        Expr::Binary(_, a, b) => {
            f(*a);
            f(*b);
        }
        Expr::Where(c, a, b) => {
            f(*c);
            f(*a);
            f(*b);
        }
        Expr::Const(_) | Expr::Acc(_) => {}
    }
}

/// The expressions needed to evaluate `roots` and the indices of `stores`: a flag per expression.
pub(crate) fn needed(k: &Kernel, roots: &[ExprId], stores: &[Store]) -> Vec<bool> {
    let n = k.exprs.len();
    let mut need = vec![false; n];
    let mark = |id: ExprId, need: &mut Vec<bool>| {
        if let Some(x) = need.get_mut(id.0 as usize) {
            *x = true;
        }
    };
    for &r in roots {
        mark(r, &mut need);
    }
    for s in stores {
        s.index.values(&mut |v| mark(v, &mut need));
    }
    for i in (0..n).rev() {
        if need[i] {
            operands(&k.exprs[i].expr, &mut |o| {
                if (o.0 as usize) < i {
                    need[o.0 as usize] = true;
                }
            });
        }
    }
    need
}

// ------------------------------------------------------------------------------------- execution

/// Device memory of the interpreter: one byte array per storage, buffers mapped onto storages.
pub(super) struct Memory {
    pub(super) storage: Vec<Vec<u8>>,
    pub(super) of: Vec<usize>,
}

pub(super) fn read(dt: DType, bytes: &[u8], i: usize) -> Val {
    let s = dt.size_bytes();
    let b = &bytes[i * s..(i + 1) * s];
    let arr = |n: usize| -> [u8; 8] {
        let mut a = [0u8; 8];
        a[..n].copy_from_slice(&b[..n]);
        a
    };
    match dt {
        DType::F32 => Val::F(f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64),
        DType::F16 => Val::F(f16::from_le_bytes([b[0], b[1]]).to_f64()),
        DType::BF16 => Val::F(bf16::from_le_bytes([b[0], b[1]]).to_f64()),
        DType::F64 => Val::F(f64::from_le_bytes(arr(8))),
        DType::I8 => Val::I(b[0] as i8 as i64),
        DType::I16 => Val::I(i16::from_le_bytes([b[0], b[1]]) as i64),
        DType::I32 => Val::I(i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as i64),
        DType::I64 | DType::U64 => Val::I(i64::from_le_bytes(arr(8))),
        DType::U8 => Val::I(b[0] as i64),
        DType::U16 => Val::I(u16::from_le_bytes([b[0], b[1]]) as i64),
        DType::U32 => Val::I(u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as i64),
        DType::Bool => Val::I((b[0] != 0) as i64),
        DType::F8E4M3 => Val::F(crate::fp8::E4M3.decode(b[0])),
        DType::F8E5M2 => Val::F(crate::fp8::E5M2.decode(b[0])),
    }
}

fn write(dt: DType, bytes: &mut [u8], i: usize, v: Val) {
    let s = dt.size_bytes();
    let out = &mut bytes[i * s..(i + 1) * s];
    match dt {
        DType::F32 => out.copy_from_slice(&(v.f() as f32).to_le_bytes()),
        DType::F16 => out.copy_from_slice(&crate::scalar::f16_from_f64(v.f()).to_le_bytes()),
        DType::BF16 => out.copy_from_slice(&crate::scalar::bf16_from_f64(v.f()).to_le_bytes()),
        DType::F64 => out.copy_from_slice(&v.f().to_le_bytes()),
        DType::F8E4M3 => out[0] = crate::fp8::E4M3.encode(v.f()),
        DType::F8E5M2 => out[0] = crate::fp8::E5M2.encode(v.f()),
        _ => out.copy_from_slice(&v.i().to_le_bytes()[..s]),
    }
}

/// Evaluation state of one kernel.
pub(super) struct Run<'k> {
    pub(super) k: &'k Kernel,
    pub(super) vals: Vec<Val>,
    /// Loop variables: lane, row, red, batch, m, n, key.
    pub(super) vars: [i64; 7],
    pub(super) acc: Vec<Val>,
    pub(super) acc_dt: Vec<DType>,
}

pub(super) fn var_slot(v: Var) -> usize {
    match v {
        Var::Lane => 0,
        Var::Row => 1,
        Var::Red => 2,
        Var::Batch => 3,
        Var::M => 4,
        Var::N => 5,
        Var::Key => 6,
    }
}

impl Run<'_> {
    fn index(&self, i: &Index) -> i64 {
        i.eval(&|v| self.vars[var_slot(v)], &|e| self.vals[e.0 as usize].i())
    }

    /// Evaluates the flagged expressions in order.
    pub(super) fn eval(&mut self, need: &[bool], mem: &Memory) -> Result<(), String> {
        for (i, te) in self.k.exprs.iter().enumerate() {
            if !need[i] {
                continue;
            }
            let dt = te.dtype;
            let v = match &te.expr {
                Expr::Load { arg, index } => {
                    let a = &self.k.args[*arg];
                    let at = self.index(index);
                    if at < 0 || at as usize >= a.numel {
                        return Err(format!("v{i} loads a{arg}[{at}] outside 0..{}", a.numel));
                    }
                    read(a.dtype, &mem.storage[mem.of[a.buffer.0 as usize]], at as usize)
                }
                Expr::Const(c) => konst(*c, dt),
                Expr::IndexValue(ix) => cast(Val::I(self.index(ix)), DType::I64, dt),
                Expr::IndexCmp(op, a, b) => {
                    let (x, y) = (self.index(a), self.index(b));
                    Val::I(match op {
                        IndexCmp::Lt => x < y,
                        IndexCmp::Ge => x >= y,
                        IndexCmp::Eq => x == y,
                    } as i64)
                }
                Expr::Unary(op, a) => {
                    let od = self.k.exprs[a.0 as usize].dtype;
                    unary(*op, self.vals[a.0 as usize], od, dt).map_err(|m| format!("v{i}: {m}"))?
                }
                Expr::Binary(op, a, b) => {
                    let od = self.k.exprs[a.0 as usize].dtype;
                    binary(*op, self.vals[a.0 as usize], self.vals[b.0 as usize], od, dt)
                        .map_err(|m| format!("v{i}: {m}"))?
                }
                Expr::Where(c, a, b) => {
                    if self.vals[c.0 as usize].i() != 0 {
                        self.vals[a.0 as usize]
                    } else {
                        self.vals[b.0 as usize]
                    }
                }
                Expr::Cast(a) => {
                    let od = self.k.exprs[a.0 as usize].dtype;
                    cast(self.vals[a.0 as usize], od, dt)
                }
                Expr::Acc(s) => {
                    let (v, adt) = (self.acc[*s], self.acc_dt[*s]);
                    match cast(v, adt, if dt.is_float() { DType::F64 } else { dt }) {
                        Val::F(x) => Val::F(compute(dt, x)),
                        other => other,
                    }
                }
            };
            self.vals[i] = v;
        }
        Ok(())
    }

    pub(super) fn store(&self, stores: &[Store], mem: &mut Memory) -> Result<(), String> {
        for s in stores {
            let a = &self.k.args[s.arg];
            let at = self.index(&s.index);
            if at < 0 || at as usize >= a.numel {
                return Err(format!("store to a{}[{at}] outside 0..{}", s.arg, a.numel));
            }
            let vd = self.k.exprs[s.value.0 as usize].dtype;
            let v = cast(self.vals[s.value.0 as usize], vd, a.dtype);
            let st = mem.of[a.buffer.0 as usize];
            write(a.dtype, &mut mem.storage[st], at as usize, v);
        }
        Ok(())
    }
}

/// The initial accumulator of a reduction.
fn acc_init(op: RedOp, dt: DType) -> Val {
    let float = dt.is_float();
    match op {
        RedOp::Sum => {
            if float {
                Val::F(0.0)
            } else {
                Val::I(0)
            }
        }
        RedOp::Prod => {
            if float {
                Val::F(1.0)
            } else {
                Val::I(1)
            }
        }
        RedOp::Max if float => Val::F(f64::NEG_INFINITY),
        RedOp::Min if float => Val::F(f64::INFINITY),
        RedOp::Max => Val::I(match dt {
            DType::I8 => i8::MIN as i64,
            DType::I16 => i16::MIN as i64,
            DType::I32 => i32::MIN as i64,
            DType::I64 => i64::MIN,
            _ => 0,
        }),
        RedOp::Min => Val::I(match dt {
            DType::I8 => i8::MAX as i64,
            DType::I16 => i16::MAX as i64,
            DType::I32 => i32::MAX as i64,
            DType::I64 => i64::MAX,
            DType::U8 => u8::MAX as i64,
            DType::U16 => u16::MAX as i64,
            DType::U32 => u32::MAX as i64,
            DType::U64 => -1,
            _ => 1,
        }),
        RedOp::ArgMax | RedOp::ArgMin => Val::I(0),
    }
}

/// Folds `x` (of dtype `vd`) into a reduction's accumulator; arg reductions also track the best
/// value in `best`.
fn fold(r: &Reduction, acc: &mut Val, best: &mut Option<Val>, x: Val, vd: DType, pos: i64) {
    let ad = r.dtype;
    match r.op {
        RedOp::Sum | RedOp::Prod if ad.is_float() => {
            let (a, b) = (acc.f(), x.f());
            *acc = Val::F(compute(ad, if r.op == RedOp::Sum { a + b } else { a * b }));
        }
        RedOp::Sum => *acc = Val::I(cast_int(ad, acc.i().wrapping_add(x.i()))),
        RedOp::Prod => *acc = Val::I(cast_int(ad, acc.i().wrapping_mul(x.i()))),
        RedOp::Max | RedOp::Min if ad.is_float() => {
            let f = if r.op == RedOp::Max { fmax_nan } else { fmin_nan };
            *acc = Val::F(compute(ad, f(acc.f(), x.f())));
        }
        RedOp::Max | RedOp::Min => {
            if scalar::arg_better_i64(r.op == RedOp::Max, x.i(), acc.i(), ad == DType::U64, false) {
                *acc = Val::I(x.i());
            }
        }
        RedOp::ArgMax | RedOp::ArgMin => {
            let max = r.op == RedOp::ArgMax;
            let better = match *best {
                None => true,
                Some(b) if vd.is_float() => scalar::arg_better_f64(max, x.f(), b.f(), false),
                Some(b) => scalar::arg_better_i64(max, x.i(), b.i(), vd == DType::U64, false),
            };
            if better {
                *best = Some(x);
                *acc = Val::I(pos);
            }
        }
    }
}

fn run_kernel(k: &Kernel, mem: &mut Memory) -> Result<(), String> {
    let mut run = Run { k, vals: vec![Val::I(0); k.exprs.len()], vars: [0; 7], acc: Vec::new(), acc_dt: Vec::new() };
    let ids = |st: &[Store]| -> Vec<ExprId> { st.iter().map(|s| s.value).collect() };
    match &k.body {
        KernelBody::Pointwise { numel, stores } => {
            let need = needed(k, &ids(stores), stores);
            for lane in 0..*numel {
                run.vars[0] = lane as i64;
                run.eval(&need, mem)?;
                run.store(stores, mem)?;
            }
        }
        KernelBody::Reduce(b) => {
            let red_need: Vec<Vec<bool>> = b.reductions.iter().map(|r| needed(k, &[r.value], &[])).collect();
            let elem_need = needed(k, &ids(&b.elem_stores), &b.elem_stores);
            let row_need = needed(k, &ids(&b.row_stores), &b.row_stores);
            run.acc_dt = b.reductions.iter().map(|r| r.dtype).collect();
            for row in 0..b.rows {
                run.vars[1] = row as i64;
                run.vars[2] = 0;
                run.acc.clear();
                for (r, need) in b.reductions.iter().zip(&red_need) {
                    let mut acc = acc_init(r.op, r.dtype);
                    let mut best = None;
                    let vd = k.exprs[r.value.0 as usize].dtype;
                    for red in 0..b.len {
                        run.vars[2] = red as i64;
                        run.eval(need, mem)?;
                        fold(r, &mut acc, &mut best, run.vals[r.value.0 as usize], vd, red as i64);
                    }
                    run.acc.push(acc);
                }
                if !b.elem_stores.is_empty() {
                    for red in 0..b.len {
                        run.vars[2] = red as i64;
                        run.eval(&elem_need, mem)?;
                        run.store(&b.elem_stores, mem)?;
                    }
                }
                run.vars[2] = 0;
                run.eval(&row_need, mem)?;
                run.store(&b.row_stores, mem)?;
            }
        }
        KernelBody::Matmul(m) => run_matmul(&mut run, m, mem)?,
        KernelBody::Attention(a) => super::attention::run(&mut run, a, mem)?,
    }
    Ok(())
}

fn run_matmul(run: &mut Run, m: &MatmulBody, mem: &mut Memory) -> Result<(), String> {
    let k = run.k;
    let need = needed(k, &m.stores.iter().map(|s| s.value).collect::<Vec<_>>(), &m.stores);
    let (aa, ba) = (&k.args[m.a.arg], &k.args[m.b.arg]);
    let (sa, sb) = (mem.of[aa.buffer.0 as usize], mem.of[ba.buffer.0 as usize]);
    run.acc_dt = vec![m.acc_dtype];
    let float = m.acc_dtype.is_float();
    for b in 0..m.batch {
        for i in 0..m.m {
            for j in 0..m.n {
                let mut acc = if float { Val::F(0.0) } else { Val::I(0) };
                for p in 0..m.k {
                    // `None`: an im2col tap in the padding, 0 (the product adds nothing).
                    let (Some(ia), Some(ib)) = (m.a.at(b, i, p), m.b.at(b, p, j)) else { continue };
                    if ia >= aa.numel || ib >= ba.numel {
                        return Err(format!("matmul reads outside its operands ({ia}, {ib})"));
                    }
                    let (x, y) = (read(aa.dtype, &mem.storage[sa], ia), read(ba.dtype, &mem.storage[sb], ib));
                    acc = if float {
                        Val::F(compute(m.acc_dtype, acc.f() + x.f() * y.f()))
                    } else {
                        Val::I(acc.i().wrapping_add(x.i().wrapping_mul(y.i())))
                    };
                }
                run.acc = vec![acc];
                run.vars[3] = b as i64;
                run.vars[4] = i as i64;
                run.vars[5] = j as i64;
                run.eval(&need, mem)?;
                run.store(&m.stores, mem)?;
            }
        }
    }
    Ok(())
}

/// Allocates the program's memory: inputs and constants filled, outputs and slots poisoned.
fn setup(p: &Program, inputs: &[HostTensor]) -> Result<Memory, Error> {
    if inputs.len() != p.inputs.len() {
        return Err(Error::Input(format!("the program takes {} inputs, got {}", p.inputs.len(), inputs.len())));
    }
    for (io, t) in p.inputs.iter().zip(inputs) {
        if t.dtype() != io.dtype || t.shape != io.shape {
            return Err(Error::Input(format!(
                "input {:?} must be {}{:?}, got {}{:?}",
                io.name,
                io.dtype,
                io.shape,
                t.dtype(),
                t.shape
            )));
        }
    }
    // Every buffer is checked against the host-memory budget before it is allocated.
    let mut storage: Vec<Vec<u8>> = p
        .memory
        .slots
        .iter()
        .enumerate()
        .map(|(k, &s)| crate::budget::try_filled(s, 0xFFu8, || format!("intermediate slot {k} of the interpreter")))
        .collect::<Result<_, _>>()?;
    let mut of = vec![0usize; p.buffers.len()];
    for (i, b) in p.buffers.iter().enumerate() {
        of[i] = match (&b.kind, p.memory.slot_of.get(i).copied().flatten()) {
            (BufferKind::Intermediate, Some(s)) => s,
            (kind, _) => {
                storage.push(match kind {
                    BufferKind::Input(k) => inputs[*k].to_le_bytes(),
                    BufferKind::Constant(t) => t.to_le_bytes(),
                    _ => {
                        let bytes = (b.numel as u64).saturating_mul(b.dtype.size_bytes() as u64);
                        let node = b.node.map_or(String::new(), |n| format!(" of node %{n}"));
                        let what = || format!("buffer {}{node} ({} x {}) in the interpreter", b.id.0, b.numel, b.dtype);
                        crate::budget::check(bytes, what)?;
                        crate::budget::try_filled(bytes as usize, 0xFFu8, what)?
                    }
                });
                storage.len() - 1
            }
        };
    }
    Ok(Memory { storage, of })
}

fn outputs(p: &Program, mem: &Memory) -> Result<Vec<HostTensor>, Error> {
    p.outputs
        .iter()
        .map(|io| {
            let b = &p.buffers[io.buffer.0 as usize];
            let bytes = &mem.storage[mem.of[io.buffer.0 as usize]][..b.numel * b.dtype.size_bytes()];
            HostTensor::from_le_bytes(io.dtype, io.shape.clone(), bytes)
        })
        .collect()
}

/// Runs `p` on `inputs` (in program order) and returns its outputs. Validates first.
pub fn run_program(p: &Program, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, Error> {
    validate(p)?;
    let mut mem = setup(p, inputs)?;
    for k in &p.kernels {
        run_kernel(k, &mut mem).map_err(|m| err(&k.name, m))?;
    }
    outputs(p, &mem)
}

/// A [`Backend`] executing programs with this interpreter.
#[derive(Clone, Debug, PartialEq)]
pub struct InterpBackend {
    caps: Capabilities,
}

impl InterpBackend {
    /// With [`Capabilities::host`].
    pub fn new() -> InterpBackend {
        InterpBackend { caps: Capabilities::host() }
    }

    /// With the given capabilities (the scheduler plans for them; loading checks a program
    /// against them).
    pub fn with_caps(caps: Capabilities) -> InterpBackend {
        InterpBackend { caps }
    }
}

impl Default for InterpBackend {
    fn default() -> InterpBackend {
        InterpBackend::new()
    }
}

impl Backend for InterpBackend {
    fn name(&self) -> &str {
        "interp"
    }

    fn device_name(&self) -> String {
        "host kernel-IR interpreter".into()
    }

    fn caps(&self) -> &Capabilities {
        &self.caps
    }

    fn runs_on_cpu(&self) -> bool {
        true
    }

    fn load(&self, program: &Program, _mode: Mode) -> Result<Box<dyn Executable>, BackendError> {
        validate(program).map_err(|e| BackendError::Render { kernel: "program".into(), msg: e.to_string() })?;
        for k in &program.kernels {
            if k.args.len() > self.caps.max_bindings as usize {
                return Err(BackendError::Unsupported {
                    backend: "interp".into(),
                    what: format!("kernel {} binds {} buffers > {}", k.name, k.args.len(), self.caps.max_bindings),
                });
            }
            if let Some(a) = k.args.iter().find(|a| !self.caps.dtypes.contains(&a.dtype)) {
                return Err(BackendError::Unsupported {
                    backend: "interp".into(),
                    what: format!("kernel {} uses dtype {}", k.name, a.dtype),
                });
            }
        }
        Ok(Box::new(InterpExecutable { program: program.clone(), at: None }))
    }

    fn serves_extents(&self) -> bool {
        true
    }
}

/// A loaded program of the [`InterpBackend`].
struct InterpExecutable {
    program: Program,
    /// The program instantiated at another value of its outer symbol
    /// ([`Executable::set_extent`]): what runs instead of `program` when set.
    at: Option<std::sync::Arc<Program>>,
}

impl InterpExecutable {
    fn run_once(
        &self,
        inputs: &[HostTensor],
        times: Option<&mut Vec<KernelTiming>>,
    ) -> Result<Vec<HostTensor>, BackendError> {
        let p = self.at.as_deref().unwrap_or(&self.program);
        let mut mem = setup(p, inputs).map_err(|e| BackendError::Input(e.to_string()))?;
        let t0 = Instant::now();
        let mut timings = Vec::new();
        for k in &p.kernels {
            let s = Instant::now();
            run_kernel(k, &mut mem).map_err(|m| BackendError::Device(format!("kernel {}: {m}", k.name)))?;
            timings.push(KernelTiming {
                kernel: k.name.clone(),
                start_ns: (s - t0).as_nanos() as f64,
                dur_ns: s.elapsed().as_nanos() as f64,
            });
        }
        if let Some(t) = times {
            *t = timings;
        }
        outputs(p, &mem).map_err(|e| BackendError::Device(e.to_string()))
    }
}

impl Executable for InterpExecutable {
    fn run(&mut self, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, BackendError> {
        self.run_once(inputs, None)
    }

    fn run_timed(
        &mut self,
        inputs: &[HostTensor],
        iters: usize,
    ) -> Result<(Vec<HostTensor>, Vec<Vec<KernelTiming>>), BackendError> {
        let mut all = Vec::with_capacity(iters);
        let mut out = Vec::new();
        for _ in 0..iters.max(1) {
            let mut t = Vec::new();
            out = self.run_once(inputs, Some(&mut t))?;
            all.push(t);
        }
        Ok((out, all))
    }

    fn set_extent(&mut self, at: Option<std::sync::Arc<Program>>) -> Result<(), BackendError> {
        if let Some(q) = &at {
            validate(q).map_err(|e| BackendError::Input(e.to_string()))?;
            if q.kernels.len() != self.program.kernels.len() {
                return Err(BackendError::Input("set_extent: not an instance of this program".into()));
            }
        }
        self.at = at;
        Ok(())
    }

    fn sources(&self) -> Vec<KernelSource> {
        self.program
            .kernels
            .iter()
            .map(|k| {
                let work = match &k.body {
                    KernelBody::Pointwise { numel, .. } => *numel,
                    KernelBody::Reduce(b) => b.rows,
                    KernelBody::Matmul(m) => m.batch * m.m * m.n,
                    KernelBody::Attention(a) => a.batch * a.heads * a.m * a.dv,
                };
                KernelSource {
                    name: k.name.clone(),
                    ext: "kir".into(),
                    source: super::print::print_kernel(k),
                    grid: [work.min(u32::MAX as usize) as u32, 1, 1],
                    block: [1, 1, 1],
                    resources: None,
                    strategy: None,
                    compute: None,
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::{ScheduleOptions, schedule};

    /// Schedules `y = f(x)` and runs it here and on the CPU reference.
    fn both(dt: DType, x: HostTensor, f: impl Fn(&crate::Tensor) -> crate::Tensor) -> (HostTensor, HostTensor) {
        let g = crate::Graph::new();
        let t = g.input("x", dt, x.shape.clone());
        g.output(&f(&t));
        let ir = crate::passes::optimize(&g.build().expect("graph")).expect("passes");
        let p = schedule(&ir, &Capabilities::host(), &ScheduleOptions::default()).expect("schedule");
        let got = run_program(&p, std::slice::from_ref(&x)).expect("interp");
        let want = crate::cpu::run(&g, &[x]).expect("cpu");
        (got[0].clone(), want[0].clone())
    }

    #[test]
    fn sign_of_negative_zero_is_positive_zero_as_on_the_cpu() {
        // The interpreter used to return -0 (sign(x) = x at zero); the CPU reference, NumPy and
        // torch give +0.
        let x = HostTensor::f32([4], vec![-0.0, 0.0, -2.0, f32::NAN]).unwrap();
        let (got, want) = both(DType::F32, x, |t| t.unary(UnaryOp::Sign));
        let bits = |t: &HostTensor| t.to_f64_vec().iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&got)[..3], bits(&want)[..3]);
        assert!(got.to_f64_vec()[0].is_sign_positive());
        assert!(got.to_f64_vec()[3].is_nan());
    }

    #[test]
    fn literals_convert_as_a_cast_from_f64() {
        // Floats round to the storage precision of their dtype (as the CPU reference's nodes and
        // the WGSL renderer's literals do), not just to f32.
        assert_eq!(konst(0.1, DType::F16), Val::F(f16::from_f64(0.1).to_f64()));
        assert_eq!(konst(0.1, DType::BF16), Val::F(bf16::from_f64(0.1).to_f64()));
        assert_eq!(konst(0.1, DType::F32), Val::F(0.1f32 as f64));
        assert_eq!(konst(0.1, DType::F64), Val::F(0.1));
        // Bool is `!= 0` (was truncation: 0.5 gave false).
        assert_eq!(konst(0.5, DType::Bool), Val::I(1));
        assert_eq!(konst(0.0, DType::Bool), Val::I(0));
        // u64 from 2^63 up keeps its value (was saturated to 2^63 - 1); the i64 bit pattern of a
        // u64 (negative) still works.
        assert_eq!(konst(9_223_372_036_854_775_808.0, DType::U64), Val::I(i64::MIN));
        assert_eq!(konst(-1.0, DType::U64), Val::I(-1));
        assert_eq!(konst(300.0, DType::U8), Val::I(44));
        assert_eq!(konst(-2.7, DType::I32), Val::I(-2));
    }
}
