//! Per-object retry delays after failed reconciliations.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use kube::runtime::reflector::ObjectRef;

use crate::api::CacheCluster;

/// 1 s after the first failure, doubling up to 256 s; a success resets it. The map is touched once
/// per reconciliation, never on a data path, so a plain Mutex is fine.
#[derive(Default)]
pub struct Backoffs(Mutex<HashMap<ObjectRef<CacheCluster>, u32>>);

impl Backoffs {
    pub fn next(&self, obj: &ObjectRef<CacheCluster>) -> Duration {
        let mut map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let failures = map.entry(obj.clone()).or_insert(0);
        *failures = failures.saturating_add(1);
        Duration::from_secs(1u64 << (*failures - 1).min(8))
    }

    pub fn reset(&self, obj: &ObjectRef<CacheCluster>) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).remove(obj);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_caps_and_resets() {
        let b = Backoffs::default();
        let obj = ObjectRef::<CacheCluster>::new("demo").within("ns");
        let other = ObjectRef::<CacheCluster>::new("other").within("ns");
        let delays: Vec<u64> = (0..10).map(|_| b.next(&obj).as_secs()).collect();
        assert_eq!(delays, [1, 2, 4, 8, 16, 32, 64, 128, 256, 256]);
        assert_eq!(b.next(&other), Duration::from_secs(1), "per object");
        b.reset(&obj);
        assert_eq!(b.next(&obj), Duration::from_secs(1));
    }
}
