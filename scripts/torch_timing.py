"""Timing shared by the torch measurement scripts: `back_to_back_ms(fn)` is the median over 5
batches of 20 calls between two CUDA events (after 3 warm-up calls, no cache clear), as the
device tests time sinter's kernels back to back."""
import torch


def back_to_back_ms(fn, reps=20, batches=5):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(batches):
        a, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(reps):
            fn()
        e.record()
        torch.cuda.synchronize()
        ts.append(a.elapsed_time(e) / reps)
    return sorted(ts)[len(ts) // 2]
