//! Device allocations of a [`Program`], derived from its memory plan: what every backend allocates
//! at load time, so no backend re-derives slot sharing.
//!
//! * Inputs, outputs and constants get one allocation each.
//! * Intermediates assigned to the same memory-plan slot share one allocation, sized to the
//!   largest of the plan's slot size and every buffer placed in it (a plan that under-sizes a slot
//!   cannot make a kernel write past its allocation).
//! * An intermediate without a slot gets its own allocation.
//!
//! Every allocation is at least 4 bytes (zero-sized device buffers are refused by some APIs, and a
//! binding of an empty tensor still needs a buffer).

use super::{BufferKind, Program};
use crate::tensor::HostTensor;
use std::collections::HashMap;
use std::sync::Arc;

/// One device allocation.
#[derive(Clone, Debug, PartialEq)]
pub struct Allocation {
    /// Bytes to allocate.
    pub bytes: u64,
    /// A label for debuggers and error messages (`b3 input 0`, `slot2`).
    pub label: String,
    /// What it holds.
    pub role: AllocRole,
}

/// What an [`Allocation`] holds.
#[derive(Clone, Debug, PartialEq)]
pub enum AllocRole {
    /// Graph input at this position.
    Input(usize),
    /// Graph output at this position.
    Output(usize),
    /// A constant, uploaded once.
    Constant(Arc<HostTensor>),
    /// Intermediates (one slot of the memory plan, or one unplanned buffer).
    Scratch,
}

/// The allocations of a program and which one backs each buffer.
#[derive(Clone, Debug, PartialEq)]
pub struct AllocationPlan {
    /// Every allocation.
    pub allocations: Vec<Allocation>,
    /// For each buffer (by id), the allocation backing it (at offset 0).
    pub of_buffer: Vec<usize>,
}

impl AllocationPlan {
    /// Total bytes allocated.
    pub fn total_bytes(&self) -> u64 {
        self.allocations.iter().map(|a| a.bytes).sum()
    }
}

/// Derives the allocations of `program` from its memory plan.
pub fn plan(program: &Program) -> AllocationPlan {
    let bytes = |i: usize| {
        let b = &program.buffers[i];
        ((b.numel * b.dtype.size_bytes()) as u64).max(4)
    };
    let mut slot_bytes: HashMap<usize, u64> = HashMap::new();
    for (i, s) in program.memory.slot_of.iter().enumerate() {
        if let Some(s) = s
            && matches!(program.buffers.get(i).map(|b| &b.kind), Some(BufferKind::Intermediate))
        {
            let planned = program.memory.slots.get(*s).copied().unwrap_or(0) as u64;
            let e = slot_bytes.entry(*s).or_insert(planned.max(4));
            *e = (*e).max(bytes(i));
        }
    }
    let mut allocations = Vec::new();
    let mut of_slot: HashMap<usize, usize> = HashMap::new();
    let mut of_buffer = Vec::with_capacity(program.buffers.len());
    for (i, b) in program.buffers.iter().enumerate() {
        let slot = program.memory.slot_of.get(i).copied().flatten();
        let idx = match (&b.kind, slot) {
            (BufferKind::Intermediate, Some(s)) => *of_slot.entry(s).or_insert_with(|| {
                allocations.push(Allocation {
                    bytes: slot_bytes[&s],
                    label: format!("slot{s}"),
                    role: AllocRole::Scratch,
                });
                allocations.len() - 1
            }),
            (kind, _) => {
                let (label, role) = match kind {
                    BufferKind::Input(p) => (format!("b{i} input {p}"), AllocRole::Input(*p)),
                    BufferKind::Output(p) => (format!("b{i} output {p}"), AllocRole::Output(*p)),
                    BufferKind::Constant(t) => (format!("b{i} constant"), AllocRole::Constant(Arc::clone(t))),
                    BufferKind::Intermediate => (format!("b{i}"), AllocRole::Scratch),
                };
                allocations.push(Allocation { bytes: bytes(i), label, role });
                allocations.len() - 1
            }
        };
        of_buffer.push(idx);
    }
    AllocationPlan { allocations, of_buffer }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DType;
    use crate::kernel::{BufferDecl, BufferId, MemoryPlan};

    fn buf(i: u32, numel: usize, kind: BufferKind) -> BufferDecl {
        BufferDecl { id: BufferId(i), dtype: DType::F32, numel, kind, node: None }
    }

    #[test]
    fn slots_are_shared_and_sized_to_their_largest_buffer() {
        let c = Arc::new(HostTensor::from_f64(DType::F32, vec![2], &[0.0, 0.0]));
        let p = Program {
            buffers: vec![
                buf(0, 10, BufferKind::Input(0)),
                buf(1, 10, BufferKind::Intermediate),
                buf(2, 30, BufferKind::Intermediate),
                buf(3, 0, BufferKind::Intermediate),
                buf(4, 2, BufferKind::Constant(c)),
                buf(5, 10, BufferKind::Output(0)),
            ],
            kernels: vec![],
            inputs: vec![],
            outputs: vec![],
            // The plan under-sizes slot 0 (40 bytes) for buffer 2 (120 bytes).
            memory: MemoryPlan {
                slots: vec![40],
                slot_of: vec![None, Some(0), Some(0), None, None, None],
                peak_bytes: 0,
                unplanned_bytes: 0,
            },
            decisions: vec![],
            dynamic: None,
        };
        let a = plan(&p);
        assert_eq!(a.of_buffer, vec![0, 1, 1, 2, 3, 4]);
        assert_eq!(a.allocations[1].bytes, 120);
        assert_eq!(a.allocations[2].bytes, 4, "empty buffers still get 4 bytes");
        assert!(matches!(a.allocations[3].role, AllocRole::Constant(_)));
        assert_eq!(a.allocations[4].role, AllocRole::Output(0));
        assert_eq!(a.total_bytes(), 40 + 120 + 4 + 8 + 40);
    }
}
