//! Hand-built kernel-IR programs for renderer and device tests: a [`ProgramBuilder`] for buffers,
//! inputs, outputs and kernels, a [`KernelBuilder`] for one kernel's expressions and body, and the
//! `lane()` / `st()` shorthands. [`ProgramBuilder::build`] does not validate (tests of malformed IR
//! use it); [`ProgramBuilder::build_checked`] runs the kernel-IR verifier first.

use crate::DType;
use crate::kernel::{
    Access, AttentionBody, BufferDecl, BufferId, BufferKind, Expr, ExprId, Index, IoDecl, Kernel, KernelArg,
    KernelBody, MatmulBody, MemoryPlan, Program, ReduceBody, Store, TypedExpr, Var,
};

/// Builds a program by hand: buffers, inputs and outputs, kernels.
#[derive(Default)]
pub struct ProgramBuilder {
    buffers: Vec<BufferDecl>,
    inputs: Vec<IoDecl>,
    outputs: Vec<IoDecl>,
    kernels: Vec<Kernel>,
}

impl ProgramBuilder {
    /// `new` (see the module docs).
    pub fn new() -> Self {
        Self::default()
    }

    fn buffer(&mut self, dtype: DType, numel: usize, kind: BufferKind) -> BufferId {
        let id = BufferId(self.buffers.len() as u32);
        self.buffers.push(BufferDecl { id, dtype, numel, kind, node: None });
        id
    }

    /// `input` (see the module docs).
    pub fn input(&mut self, name: &str, dtype: DType, shape: &[usize]) -> BufferId {
        let pos = self.inputs.len();
        let id = self.buffer(dtype, shape.iter().product(), BufferKind::Input(pos));
        self.inputs.push(IoDecl { name: name.into(), buffer: id, shape: shape.to_vec(), dtype });
        id
    }

    /// `output` (see the module docs).
    pub fn output(&mut self, name: &str, dtype: DType, shape: &[usize]) -> BufferId {
        let pos = self.outputs.len();
        let id = self.buffer(dtype, shape.iter().product(), BufferKind::Output(pos));
        self.outputs.push(IoDecl { name: name.into(), buffer: id, shape: shape.to_vec(), dtype });
        id
    }

    /// `intermediate` (see the module docs).
    pub fn intermediate(&mut self, dtype: DType, numel: usize) -> BufferId {
        self.buffer(dtype, numel, BufferKind::Intermediate)
    }

    /// `constant` (see the module docs).
    pub fn constant(&mut self, t: crate::HostTensor) -> BufferId {
        let (d, n) = (t.dtype(), t.numel());
        self.buffer(d, n, BufferKind::Constant(std::sync::Arc::new(t)))
    }

    /// `dtype` (see the module docs).
    pub fn dtype(&self, b: BufferId) -> DType {
        self.buffers[b.0 as usize].dtype
    }

    /// `numel` (see the module docs).
    pub fn numel(&self, b: BufferId) -> usize {
        self.buffers[b.0 as usize].numel
    }

    /// `kernel` (see the module docs).
    pub fn kernel(&mut self, k: Kernel) {
        self.kernels.push(k);
    }

    /// `build` (see the module docs).
    /// The program, not validated (tests of malformed IR build it this way).
    pub fn build(self) -> Program {
        let n = self.buffers.len();
        let unplanned: usize = self.buffers.iter().map(|b| b.numel * b.dtype.size_bytes()).sum();
        Program {
            buffers: self.buffers,
            kernels: self.kernels,
            inputs: self.inputs,
            outputs: self.outputs,
            memory: MemoryPlan {
                slots: vec![],
                slot_of: vec![None; n],
                peak_bytes: unplanned,
                unplanned_bytes: unplanned,
            },
            decisions: vec![],
            dynamic: None,
        }
    }

    /// The program, checked by the kernel-IR verifier (panics naming the violation: for tests).
    pub fn build_checked(self) -> Program {
        let p = self.build();
        crate::kernel::interp::validate(&p).unwrap_or_else(|e| panic!("invalid hand-built program: {e}"));
        p
    }
}

/// Builds a kernel's arguments and expression arena.
pub struct KernelBuilder {
    pub k: Kernel,
}

impl KernelBuilder {
    /// `new` (see the module docs).
    pub fn new(name: &str, ops: &[&str]) -> Self {
        KernelBuilder {
            k: Kernel {
                name: name.into(),
                args: vec![],
                exprs: vec![],
                body: KernelBody::Pointwise { numel: 0, stores: vec![] },
                origins: vec![],
                ops: ops.iter().map(|s| s.to_string()).collect(),
                flops: 0.0,
                bytes: 0.0,
            },
        }
    }

    /// `arg` (see the module docs).
    pub fn arg(&mut self, p: &ProgramBuilder, buffer: BufferId, access: Access) -> usize {
        self.k.args.push(KernelArg { buffer, dtype: p.dtype(buffer), numel: p.numel(buffer), access });
        self.k.args.len() - 1
    }

    /// `e` (see the module docs).
    pub fn e(&mut self, expr: Expr, dtype: DType) -> ExprId {
        self.k.exprs.push(TypedExpr { expr, dtype });
        ExprId(self.k.exprs.len() as u32 - 1)
    }

    /// `load` (see the module docs).
    pub fn load(&mut self, arg: usize, index: Index) -> ExprId {
        let d = self.k.args[arg].dtype;
        self.e(Expr::Load { arg, index }, d)
    }

    /// `konst` (see the module docs).
    pub fn konst(&mut self, x: f64, d: DType) -> ExprId {
        self.e(Expr::Const(x), d)
    }

    /// `pointwise` (see the module docs).
    pub fn pointwise(mut self, numel: usize, stores: Vec<Store>) -> Kernel {
        self.k.body = KernelBody::Pointwise { numel, stores };
        self.k
    }

    /// `reduce` (see the module docs).
    pub fn reduce(mut self, body: ReduceBody) -> Kernel {
        self.k.body = KernelBody::Reduce(body);
        self.k
    }

    /// `matmul` (see the module docs).
    pub fn matmul(mut self, body: MatmulBody) -> Kernel {
        self.k.body = KernelBody::Matmul(body);
        self.k
    }

    /// `attention` (see the module docs).
    pub fn attention(mut self, body: AttentionBody) -> Kernel {
        self.k.body = KernelBody::Attention(body);
        self.k
    }
}

/// `lane` (see the module docs).
pub fn lane() -> Index {
    Index::var(Var::Lane)
}

/// `st` (see the module docs).
pub fn st(arg: usize, index: Index, value: ExprId) -> Store {
    Store { arg, index, value }
}
