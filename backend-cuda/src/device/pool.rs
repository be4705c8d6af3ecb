//! The bookkeeping of the caching device allocator, apart from CUDA so it is unit-tested on any
//! machine: size classes, per-stream free lists, blocks waiting for other streams, accounting, and
//! the out-of-memory policy (free every cached block, retry once, then a report).
//!
//! # Stream safety
//!
//! Device work is asynchronous, so a block given back by the host may still be in use by queued
//! kernels. A block freed on its *home* stream (the stream that allocated it) is cached for that
//! stream only: later work there is ordered after everything that used it. A block that other
//! streams also used waits in `pending` until an event recorded on each of them completes
//! (PyTorch's `record_stream`). Blocks of a stream that no longer exists (retired after a
//! synchronize) are idle and go to a list any stream may take. Emptying the cache synchronizes
//! the device first.
//!
//! # Size classes
//!
//! Requests up to 1 MiB round up to a multiple of 512 bytes; larger ones to one sixteenth of the
//! next power of two (at most 12.5 % waste), so buffers of similar sizes share blocks.

use std::collections::{HashMap, HashSet};

/// Granularity of small requests, bytes.
pub const GRANULE: u64 = 512;
/// Requests above this round to sixteenths of a power of two.
pub const LARGE: u64 = 1 << 20;
/// The stream key of idle blocks any stream may take.
pub const ANY_STREAM: u64 = 0;

/// The size class of a request of `bytes` (at least [`GRANULE`]); `None` when it overflows.
pub fn size_class(bytes: u64) -> Option<u64> {
    let b = bytes.max(1);
    if b <= LARGE {
        return Some(b.div_ceil(GRANULE) * GRANULE);
    }
    let hi = b.checked_next_power_of_two()?;
    let step = hi / 16;
    b.div_ceil(step).checked_mul(step)
}

/// One device allocation of the pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Block {
    /// Device address.
    pub ptr: u64,
    /// Size class, bytes (what was allocated).
    pub size: u64,
}

/// Why the underlying allocator failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RawError {
    /// The device is out of memory.
    OutOfMemory,
    /// Any other failure (the driver's message, naming the call).
    Other(String),
}

/// Errors of [`PoolCore`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PoolError {
    /// Out of memory even after freeing every cached block; names the request and the pool.
    #[error("{0}")]
    OutOfMemory(String),
    /// A driver call failed.
    #[error("{0}")]
    Driver(String),
}

/// What the pool asks of the device (CUDA in production, a fake in tests).
pub trait RawMemory {
    /// An event recorded on a stream.
    type Event;
    /// Allocates `bytes` of device memory.
    fn alloc(&mut self, bytes: u64) -> Result<u64, RawError>;
    /// Frees an allocation.
    fn free(&mut self, ptr: u64) -> Result<(), String>;
    /// Waits for all work on the device.
    fn synchronize(&mut self) -> Result<(), String>;
    /// Whether the work an event recorded has completed.
    fn event_done(&mut self, e: &Self::Event) -> Result<bool, String>;
    /// Device memory (free, total), bytes, where known.
    fn mem_info(&mut self) -> Option<(u64, u64)>;
}

/// Byte and call counts of a pool.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Bytes of blocks handed out and not given back (size classes, not requests).
    pub in_use_bytes: u64,
    /// Bytes of idle blocks ready for reuse.
    pub cached_bytes: u64,
    /// Bytes given back but still awaiting work on other streams.
    pub pending_bytes: u64,
    /// Most bytes in use at once.
    pub peak_in_use_bytes: u64,
    /// Device allocations made.
    pub device_allocs: u64,
    /// Device allocations freed (emptying the cache).
    pub device_frees: u64,
    /// Requests served from the cache.
    pub reuses: u64,
    /// Times the cache was emptied to retry an allocation that ran out of memory.
    pub oom_retries: u64,
}

impl PoolStats {
    /// All bytes the pool holds on the device.
    pub fn reserved_bytes(&self) -> u64 {
        self.in_use_bytes + self.cached_bytes + self.pending_bytes
    }
}

struct Pending<E> {
    block: Block,
    home: u64,
    events: Vec<E>,
}

/// The allocator's state. Every method that touches the device takes the [`RawMemory`] to use.
pub struct PoolCore<E> {
    free: HashMap<(u64, u64), Vec<u64>>,
    pending: Vec<Pending<E>>,
    spare_events: Vec<E>,
    retired: HashSet<u64>,
    stats: PoolStats,
    capacity: Option<u64>,
}

impl<E> Default for PoolCore<E> {
    fn default() -> Self {
        PoolCore {
            free: HashMap::new(),
            pending: Vec::new(),
            spare_events: Vec::new(),
            retired: HashSet::new(),
            stats: PoolStats::default(),
            capacity: None,
        }
    }
}

/// `1536 B`, `2.0 MiB`, `1.00 PiB`.
pub fn human_bytes(b: u64) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if b < 1024 {
        return format!("{b} B");
    }
    let mut v = b as f64 / 1024.0;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    format!("{v:.2} {}", UNITS[u])
}

impl<E> PoolCore<E> {
    /// An empty pool.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty pool for a device of `bytes`: larger requests fail at once, without asking the
    /// driver.
    pub fn with_capacity(bytes: u64) -> Self {
        PoolCore { capacity: Some(bytes), ..Self::default() }
    }

    /// The counters.
    pub fn stats(&self) -> PoolStats {
        self.stats
    }

    /// One line describing the pool (and the device's free memory when `device` is known).
    pub fn describe(&self, device: Option<(u64, u64)>) -> String {
        let s = &self.stats;
        let mut line = format!(
            "pool: {} in use, {} cached, {} awaiting other streams",
            human_bytes(s.in_use_bytes),
            human_bytes(s.cached_bytes),
            human_bytes(s.pending_bytes)
        );
        if let Some((free, total)) = device {
            line.push_str(&format!("; device: {} free of {}", human_bytes(free), human_bytes(total)));
        }
        line
    }

    fn take(&mut self, stream: u64, size: u64) -> Option<u64> {
        for key in [(stream, size), (ANY_STREAM, size)] {
            if let Some(p) = self.free.get_mut(&key).and_then(Vec::pop) {
                self.stats.cached_bytes -= size;
                return Some(p);
            }
        }
        None
    }

    fn lend(&mut self, size: u64) {
        self.stats.in_use_bytes += size;
        self.stats.peak_in_use_bytes = self.stats.peak_in_use_bytes.max(self.stats.in_use_bytes);
    }

    /// A block of at least `bytes` for work on `stream` (not [`ANY_STREAM`]): a cached block of
    /// the stream or an idle one, else a new device allocation; on out-of-memory every cached
    /// block is freed and the allocation retried once.
    pub fn alloc<R: RawMemory<Event = E>>(&mut self, raw: &mut R, stream: u64, bytes: u64) -> Result<Block, PoolError> {
        let size = match size_class(bytes) {
            Some(s) if self.capacity.is_none_or(|c| s <= c) => s,
            _ => {
                return Err(PoolError::OutOfMemory(format!(
                    "allocating {} ({bytes} bytes) is more than the device has; {}",
                    human_bytes(bytes),
                    self.describe(raw.mem_info())
                )));
            }
        };
        if let Some(ptr) = self.take(stream, size) {
            self.stats.reuses += 1;
            self.lend(size);
            return Ok(Block { ptr, size });
        }
        if !self.pending.is_empty() {
            self.reclaim(raw)?;
            if let Some(ptr) = self.take(stream, size) {
                self.stats.reuses += 1;
                self.lend(size);
                return Ok(Block { ptr, size });
            }
        }
        let ptr = match raw.alloc(size) {
            Ok(p) => p,
            Err(RawError::Other(m)) => return Err(PoolError::Driver(m)),
            Err(RawError::OutOfMemory) => {
                self.stats.oom_retries += 1;
                self.release_cached(raw)?;
                match raw.alloc(size) {
                    Ok(p) => p,
                    Err(RawError::Other(m)) => return Err(PoolError::Driver(m)),
                    Err(RawError::OutOfMemory) => {
                        return Err(PoolError::OutOfMemory(format!(
                            "allocating {} ({bytes} bytes requested, class {size}) failed after freeing the cache; {}",
                            human_bytes(bytes),
                            self.describe(raw.mem_info())
                        )));
                    }
                }
            }
        };
        self.stats.device_allocs += 1;
        self.lend(size);
        Ok(Block { ptr, size })
    }

    /// Gives back a block used only on its home stream.
    pub fn free(&mut self, block: Block, home: u64) {
        self.stats.in_use_bytes -= block.size;
        self.cache(block, home);
    }

    fn cache(&mut self, block: Block, home: u64) {
        let key = if self.retired.contains(&home) { ANY_STREAM } else { home };
        self.stats.cached_bytes += block.size;
        self.free.entry((key, block.size)).or_default().push(block.ptr);
    }

    /// Gives back a block that other streams also used: reusable once every event (one recorded
    /// on each of those streams when it was given back) has completed.
    pub fn free_after(&mut self, block: Block, home: u64, events: Vec<E>) {
        self.stats.in_use_bytes -= block.size;
        self.stats.pending_bytes += block.size;
        self.pending.push(Pending { block, home, events });
    }

    /// A recycled event for [`PoolCore::free_after`], if one is spare.
    pub fn spare_event(&mut self) -> Option<E> {
        self.spare_events.pop()
    }

    /// Moves pending blocks whose events have all completed to the free lists.
    pub fn reclaim<R: RawMemory<Event = E>>(&mut self, raw: &mut R) -> Result<(), PoolError> {
        let mut i = 0;
        while i < self.pending.len() {
            let mut done = true;
            for e in &self.pending[i].events {
                if !raw.event_done(e).map_err(PoolError::Driver)? {
                    done = false;
                    break;
                }
            }
            if done {
                let p = self.pending.swap_remove(i);
                self.stats.pending_bytes -= p.block.size;
                self.spare_events.extend(p.events);
                self.cache(p.block, p.home);
            } else {
                i += 1;
            }
        }
        Ok(())
    }

    /// Declares a stream gone (after its work was synchronized): its cached blocks become idle
    /// blocks any stream may take, and so do its blocks still pending.
    pub fn retire(&mut self, stream: u64) {
        self.retired.insert(stream);
        let keys: Vec<(u64, u64)> = self.free.keys().filter(|k| k.0 == stream).copied().collect();
        for k in keys {
            if let Some(ptrs) = self.free.remove(&k) {
                self.free.entry((ANY_STREAM, k.1)).or_default().extend(ptrs);
            }
        }
    }

    /// Synchronizes the device and frees every cached and pending block (events become spare).
    pub fn release_cached<R: RawMemory<Event = E>>(&mut self, raw: &mut R) -> Result<(), PoolError> {
        if self.free.is_empty() && self.pending.is_empty() {
            return Ok(());
        }
        raw.synchronize().map_err(PoolError::Driver)?;
        for p in std::mem::take(&mut self.pending) {
            self.stats.pending_bytes -= p.block.size;
            self.spare_events.extend(p.events);
            self.cache(p.block, p.home);
        }
        let mut first_err = None;
        for ((_, size), ptrs) in std::mem::take(&mut self.free) {
            for ptr in ptrs {
                self.stats.cached_bytes -= size;
                match raw.free(ptr) {
                    Ok(()) => self.stats.device_frees += 1,
                    Err(e) => {
                        first_err.get_or_insert(e);
                    }
                }
            }
        }
        first_err.map_or(Ok(()), |e| Err(PoolError::Driver(e)))
    }

    /// Takes every spare event (to destroy them).
    pub fn drain_spare_events(&mut self) -> Vec<E> {
        std::mem::take(&mut self.spare_events)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::rc::Rc;

    /// A device of `capacity` bytes whose events complete when the shared clock passes them.
    struct Fake {
        capacity: u64,
        used: u64,
        next: u64,
        live: HashMap<u64, u64>,
        clock: Rc<Cell<u64>>,
        syncs: u32,
    }

    impl Fake {
        fn new(capacity: u64) -> Fake {
            Fake { capacity, used: 0, next: 0x1000, live: HashMap::new(), clock: Rc::new(Cell::new(0)), syncs: 0 }
        }
    }

    impl RawMemory for Fake {
        type Event = u64;
        fn alloc(&mut self, bytes: u64) -> Result<u64, RawError> {
            if self.used + bytes > self.capacity {
                return Err(RawError::OutOfMemory);
            }
            self.used += bytes;
            let p = self.next;
            self.next += bytes.max(GRANULE);
            self.live.insert(p, bytes);
            Ok(p)
        }
        fn free(&mut self, ptr: u64) -> Result<(), String> {
            let b = self.live.remove(&ptr).ok_or("double free")?;
            self.used -= b;
            Ok(())
        }
        fn synchronize(&mut self) -> Result<(), String> {
            self.syncs += 1;
            self.clock.set(u64::MAX);
            Ok(())
        }
        fn event_done(&mut self, e: &u64) -> Result<bool, String> {
            Ok(*e <= self.clock.get())
        }
        fn mem_info(&mut self) -> Option<(u64, u64)> {
            Some((self.capacity - self.used, self.capacity))
        }
    }

    #[test]
    fn size_classes() {
        assert_eq!(size_class(0), Some(512));
        assert_eq!(size_class(1), Some(512));
        assert_eq!(size_class(512), Some(512));
        assert_eq!(size_class(513), Some(1024));
        assert_eq!(size_class(LARGE), Some(LARGE));
        // Above 1 MiB: sixteenths of the next power of two.
        assert_eq!(size_class(LARGE + 1), Some(LARGE + LARGE / 8));
        assert_eq!(size_class(3 << 20), Some(3 << 20));
        assert_eq!(size_class((3 << 20) + 1), Some((3 << 20) + (1 << 18)));
        assert_eq!(size_class(1 << 30), Some(1 << 30));
        for b in [LARGE + 7, 5_000_000, 123_456_789, 1 << 40] {
            let c = size_class(b).unwrap();
            assert!(c >= b && (c - b) as f64 <= b as f64 / 8.0, "{b} -> {c}");
        }
        assert_eq!(size_class(1 << 50), Some(1 << 50));
        assert_eq!(size_class(u64::MAX), None);
    }

    #[test]
    fn reuse_on_the_same_stream_and_accounting() {
        let mut raw = Fake::new(1 << 20);
        let mut p = PoolCore::<u64>::new();
        let a = p.alloc(&mut raw, 1, 1000).unwrap();
        assert_eq!(a.size, 1024);
        let b = p.alloc(&mut raw, 1, 1000).unwrap();
        assert_ne!(a.ptr, b.ptr);
        assert_eq!(p.stats().in_use_bytes, 2048);
        p.free(a, 1);
        assert_eq!((p.stats().in_use_bytes, p.stats().cached_bytes), (1024, 1024));
        // Same class on the same stream: reused. Another stream does not take it.
        let c = p.alloc(&mut raw, 2, 1000).unwrap();
        assert_ne!(c.ptr, a.ptr);
        let d = p.alloc(&mut raw, 1, 900).unwrap();
        assert_eq!(d.ptr, a.ptr);
        assert_eq!(p.stats().reuses, 1);
        assert_eq!(p.stats().device_allocs, 3);
        assert_eq!(p.stats().peak_in_use_bytes, 3 * 1024);
        for (blk, s) in [(b, 1), (c, 2), (d, 1)] {
            p.free(blk, s);
        }
        assert_eq!(p.stats().in_use_bytes, 0);
        assert_eq!(p.stats().reserved_bytes(), raw.used);
    }

    #[test]
    fn blocks_used_by_other_streams_wait_for_their_events() {
        let mut raw = Fake::new(1 << 20);
        let mut p = PoolCore::<u64>::new();
        let a = p.alloc(&mut raw, 1, 4096).unwrap();
        // Used by stream 2 too: pending until the event (time 5) completes.
        p.free_after(a, 1, vec![5]);
        assert_eq!(p.stats().pending_bytes, 4096);
        let b = p.alloc(&mut raw, 1, 4096).unwrap();
        assert_ne!(b.ptr, a.ptr, "not reused while stream 2 may still read it");
        raw.clock.set(5);
        let c = p.alloc(&mut raw, 1, 4096).unwrap();
        assert_eq!(c.ptr, a.ptr, "reclaimed once the event completed");
        assert_eq!(p.stats().pending_bytes, 0);
        assert_eq!(p.spare_event(), Some(5), "the event is recycled");
    }

    #[test]
    fn retired_streams_give_their_blocks_to_everyone() {
        let mut raw = Fake::new(1 << 20);
        let mut p = PoolCore::<u64>::new();
        let a = p.alloc(&mut raw, 7, 100).unwrap();
        let b = p.alloc(&mut raw, 7, 100).unwrap();
        p.free(a, 7);
        p.free_after(b, 7, vec![1]);
        p.retire(7);
        let c = p.alloc(&mut raw, 8, 100).unwrap();
        assert_eq!(c.ptr, a.ptr);
        raw.clock.set(1);
        let d = p.alloc(&mut raw, 9, 100).unwrap();
        assert_eq!(d.ptr, b.ptr, "a pending block of a retired stream becomes idle");
        assert_eq!(raw.live.len(), 2);
    }

    #[test]
    fn out_of_memory_frees_the_cache_retries_then_reports() {
        let mut raw = Fake::new(8 * 1024);
        let mut p = PoolCore::<u64>::new();
        let a = p.alloc(&mut raw, 1, 4096).unwrap();
        let b = p.alloc(&mut raw, 1, 2048).unwrap();
        p.free(a, 1);
        p.free_after(b, 1, vec![99]);
        // 6 KiB does not fit beside the 6 KiB held in the cache: emptied (after a synchronize), retried.
        let c = p.alloc(&mut raw, 1, 6 * 1024).unwrap();
        assert_eq!(raw.syncs, 1);
        assert_eq!(p.stats().oom_retries, 1);
        assert_eq!((p.stats().cached_bytes, p.stats().pending_bytes), (0, 0));
        assert_eq!(p.stats().device_frees, 2);
        // 1 PiB fails cleanly with the request and the pool's state in the message.
        let e = p.alloc(&mut raw, 1, 1 << 50).unwrap_err();
        let PoolError::OutOfMemory(m) = e else { panic!("{e:?}") };
        assert!(m.contains("1.00 PiB") && m.contains("6.00 KiB in use") && m.contains("device: 2.00 KiB free"), "{m}");
        // The pool still works afterwards.
        p.free(c, 1);
        let d = p.alloc(&mut raw, 1, 6 * 1024).unwrap();
        assert_eq!(d.ptr, c.ptr);
        assert!(matches!(p.alloc(&mut raw, 1, u64::MAX), Err(PoolError::OutOfMemory(_))));
        // With the device's size known, an impossible request fails without a driver call.
        let mut p = PoolCore::<u64>::with_capacity(8 * 1024);
        let e = p.alloc(&mut raw, 1, 1 << 40).unwrap_err();
        assert!(e.to_string().contains("more than the device has") && e.to_string().contains("1.00 TiB"), "{e}");
        assert_eq!((raw.syncs, p.stats().device_allocs), (1, 0));
    }
}
