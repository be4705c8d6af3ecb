//! `map`: one function over a slice on a few scoped threads, results in order. What a cold
//! compile does in parallel (NVRTC programs, constant digests) has independent items of uneven
//! cost, so threads take the next item from a shared counter rather than a fixed share.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// `f` over `items` on up to `max_threads` threads (fewer when the machine has fewer cores or
/// there are fewer items; the calling thread alone for one), results in the order of `items`.
pub fn map<T: Sync, R: Send>(items: &[T], max_threads: usize, f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get()).min(max_threads).min(items.len());
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
}
