//! [`Shared`]: values made once per key and handed out while some holder keeps one alive. A
//! device loads a cubin several kernels share once ([`super::Device::load_function`]); library
//! plans are built once per shape on a stream ([`super::blas::GemmPlan::shared`],
//! [`super::dnn::ConvPlan::shared`]).
//!
//! The map holds `Weak`s: a value lives exactly as long as its last holder, and entries of dropped
//! values are swept whenever a new one is inserted. The map's lock is held while a value is made,
//! so two callers asking for one key at once make it once.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex, Weak};

/// Values by key while alive (see the module doc).
pub struct Shared<K, V> {
    map: Mutex<HashMap<K, Weak<V>>>,
}

impl<K, V> Default for Shared<K, V> {
    fn default() -> Self {
        Shared { map: Mutex::new(HashMap::new()) }
    }
}

impl<K: Eq + Hash, V> Shared<K, V> {
    /// The live value of `key`, else the one `make` makes (kept for later callers while it lives;
    /// `make` returns an `Arc` because some values come in one, as cudarc's modules do, whose
    /// functions hold that `Arc`).
    pub fn get_or_make<E>(&self, key: K, make: impl FnOnce() -> Result<Arc<V>, E>) -> Result<Arc<V>, E> {
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(v) = map.get(&key).and_then(Weak::upgrade) {
            return Ok(v);
        }
        let v = make()?;
        map.retain(|_, w| w.strong_count() > 0);
        map.insert(key, Arc::downgrade(&v));
        Ok(v)
    }

    /// As [`Shared::get_or_make`], but `make` runs without the map's lock, so values of
    /// different keys are made side by side (two callers of one key may both make it; the first
    /// kept wins and the other's is dropped).
    pub fn get_or_make_unlocked<E>(&self, key: K, make: impl FnOnce() -> Result<Arc<V>, E>) -> Result<Arc<V>, E>
    where
        K: Clone,
    {
        let live = |map: &HashMap<K, Weak<V>>, key: &K| map.get(key).and_then(Weak::upgrade);
        if let Some(v) = live(&self.map.lock().unwrap_or_else(|p| p.into_inner()), &key) {
            return Ok(v);
        }
        let v = make()?;
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(first) = live(&map, &key) {
            return Ok(first);
        }
        map.retain(|_, w| w.strong_count() > 0);
        map.insert(key, Arc::downgrade(&v));
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_is_shared_while_held_and_made_again_after() {
        let s: Shared<u32, String> = Shared::default();
        let a = s.get_or_make(1, || Ok::<_, ()>(Arc::new("one".to_string()))).unwrap();
        let b = s.get_or_make(1, || Err(())).expect("shared, not made again");
        assert!(Arc::ptr_eq(&a, &b));
        drop((a, b));
        let c = s.get_or_make(1, || Ok::<_, ()>(Arc::new("again".to_string()))).unwrap();
        assert_eq!(*c, "again");
        assert!(s.get_or_make(2, || Err("no")).is_err());
        let d = s.get_or_make_unlocked(1, || Err(())).expect("held: not made again");
        assert!(Arc::ptr_eq(&c, &d));
        let e = s.get_or_make_unlocked(3, || Ok::<_, ()>(Arc::new("three".to_string()))).unwrap();
        assert!(Arc::ptr_eq(&e, &s.get_or_make(3, || Err(())).unwrap()));
    }
}
