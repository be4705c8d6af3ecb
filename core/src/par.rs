//! `map`: one function over a slice on a few scoped threads, results in order. What a cold
//! compile does in parallel (NVRTC programs, constant digests) has independent items of uneven
//! cost, so threads take the next item from a shared counter rather than a fixed share.
//! `map_elements`: a cheap function over every element of a large slice (folding autocast's
//! weight casts), each thread converting one contiguous share in place of the output.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// `f` over `items` on up to `max_threads` threads (fewer when the machine has fewer cores or
/// there are fewer items; the calling thread alone for one), results in the order of `items`.
pub fn map<T: Sync, R: Send>(items: &[T], max_threads: usize, f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let workers = workers(max_threads, items.len());
    if workers <= 1 {
        return items.iter().map(f).collect();
    }
    let next = AtomicUsize::new(0);
    let slots: Vec<Mutex<Option<R>>> = items.iter().map(|_| Mutex::new(None)).collect();
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(item) = items.get(i) else { break };
                    let r = f(item);
                    *slots[i].lock().unwrap_or_else(|p| p.into_inner()) = Some(r);
                }
            });
        }
    });
    // A thread that panicked propagates its panic out of `scope`, so every slot is filled here.
    slots.into_iter().map(|m| m.into_inner().unwrap_or_else(|p| p.into_inner()).expect("every item mapped")).collect()
}

/// Threads for `items` items: the machine's, at most `max_threads`, at most one per item.
fn workers(max_threads: usize, items: usize) -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get()).min(max_threads).min(items)
}

/// `f` over every element of `src`, in order; above a million elements on up to `max_threads`
/// scoped threads, each writing one contiguous share of the output.
pub fn map_elements<S: Copy + Sync, T: Copy + Default + Send>(
    src: &[S],
    max_threads: usize,
    f: impl Fn(S) -> T + Sync,
) -> Vec<T> {
    const SERIAL: usize = 1 << 20;
    let workers = workers(max_threads, src.len());
    if src.len() <= SERIAL || workers <= 1 {
        return src.iter().map(|&x| f(x)).collect();
    }
    let mut out = vec![T::default(); src.len()];
    let share = src.len().div_ceil(workers);
    std::thread::scope(|s| {
        for (o, i) in out.chunks_mut(share).zip(src.chunks(share)) {
            let f = &f;
            s.spawn(move || {
                for (o, &x) in o.iter_mut().zip(i) {
                    *o = f(x);
                }
            });
        }
    });
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn results_come_back_in_order_whatever_the_threads() {
        let items: Vec<u64> = (0..100).collect();
        for threads in [1, 2, 16] {
            assert_eq!(super::map(&items, threads, |x| x * x), items.iter().map(|x| x * x).collect::<Vec<_>>());
        }
        assert!(super::map(&[] as &[u8], 4, |x| *x).is_empty());
    }

    #[test]
    fn elements_come_back_in_order_above_the_serial_size() {
        let src: Vec<u32> = (0..(1u32 << 20) + 13).collect();
        for threads in [1, 3, 8] {
            let got = super::map_elements(&src, threads, |x| u64::from(x) * 3);
            assert!(got.iter().enumerate().all(|(i, &y)| y == i as u64 * 3), "{threads} threads");
        }
        assert!(super::map_elements(&[] as &[u8], 4, |x| x).is_empty());
    }
}
