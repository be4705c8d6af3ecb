//! Memory planning: intermediates share pooled slots by liveness, best-fit by size.

use crate::kernel::{BufferDecl, BufferKind, Kernel, MemoryPlan};

/// Plans the intermediate buffers of `kernels` (in launch order) into reusable slots.
///
/// A buffer is live from the first kernel that touches it (its writer) to the last kernel that
/// touches it (its last reader). A slot is free for a buffer first written by kernel `i` when its
/// previous occupant was last touched by a kernel before `i`, so no kernel ever reads and writes
/// one slot through two buffers. Among free slots the smallest that fits is taken (best fit);
/// when none fits, the largest free slot grows; when none is free, a new slot opens.
pub fn plan_memory(buffers: &[BufferDecl], kernels: &[Kernel]) -> MemoryPlan {
    let n = buffers.len();
    let mut first = vec![usize::MAX; n];
    let mut last = vec![0usize; n];
    for (i, k) in kernels.iter().enumerate() {
        for a in &k.args {
            let b = a.buffer.0 as usize;
            if b < n {
                first[b] = first[b].min(i);
                last[b] = last[b].max(i);
            }
        }
    }
    let bytes = |b: &BufferDecl| b.numel * b.dtype.size_bytes();
    let mut order: Vec<usize> =
        (0..n).filter(|&b| matches!(buffers[b].kind, BufferKind::Intermediate) && first[b] != usize::MAX).collect();
    order.sort_by_key(|&b| (first[b], b));
    // (size, last kernel touching the current occupant)
    let mut slots: Vec<(usize, usize)> = Vec::new();
    let mut slot_of = vec![None; n];
    for b in order {
        let need = bytes(&buffers[b]);
        let free: Vec<usize> = (0..slots.len()).filter(|&s| slots[s].1 < first[b]).collect();
        let fit = free.iter().copied().filter(|&s| slots[s].0 >= need).min_by_key(|&s| (slots[s].0, s));
        let s = match fit {
            Some(s) => s,
            None => match free.iter().copied().max_by_key(|&s| (slots[s].0, usize::MAX - s)) {
                Some(s) => {
                    slots[s].0 = need;
                    s
                }
                None => {
                    slots.push((need, 0));
                    slots.len() - 1
                }
            },
        };
        slots[s].1 = last[b];
        slot_of[b] = Some(s);
    }
    let fixed: usize = buffers.iter().filter(|b| !matches!(b.kind, BufferKind::Intermediate)).map(bytes).sum();
    let inter: usize = buffers.iter().filter(|b| matches!(b.kind, BufferKind::Intermediate)).map(bytes).sum();
    let slot_bytes: Vec<usize> = slots.iter().map(|s| s.0).collect();
    MemoryPlan {
        peak_bytes: fixed + slot_bytes.iter().sum::<usize>(),
        unplanned_bytes: fixed + inter,
        slots: slot_bytes,
        slot_of,
    }
}
