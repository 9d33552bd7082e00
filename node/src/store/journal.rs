//! The journal hook: every change to the keyspace is reported here, from
//! the one place that makes it (the mutation funnel of `Partition`), under
//! the partition's lock, with a per-partition sequence number. The
//! durability layer implements [`Journal`] (`durability::persist`: each
//! change becomes a log record appended through the group commit, and the
//! log is replayed at start-up), installed by `Keyspace::with_journal`; a
//! keyspace without one (`Keyspace::new`, as under `--durability none`)
//! reports to no one.
//!
//! How a change is recorded: per key, as the key's whole new state after
//! the command (the entry: value and expiry), not as the operation that
//! produced it. A write to a key reaches the journal once per command, when
//! the command's write access to it ends, so `RPUSH big x` records the whole
//! list. That keeps replay idempotent and independent of command semantics
//! (a record is "key = this", applied any number of times), lets a
//! write-back log coalesce repeated writes to one key into one record, and
//! is what the disk tier stores anyway (values as whole serialized records).
//! The cost is write amplification for small changes to large collections;
//! the log may later bound it by recording such changes as operations, which
//! this interface allows without touching the store: `Change::entry` is the
//! whole entry and the log chooses how to serialize it.

use super::entry::Entry;

/// What happened to a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChangeKind {
    /// Created or overwritten, or changed in place: `entry` is its new state.
    Write,
    /// Only its expiry changed (EXPIRE, PERSIST): `entry` is its new state.
    Expire,
    /// Deleted by a command (DEL, RENAME's source, a collection emptied).
    Delete,
    /// Removed because its TTL passed.
    Expired,
    /// Removed by the eviction policy to stay under `maxmemory`.
    Evicted,
    /// The whole database was emptied in this partition (FLUSHDB, FLUSHALL).
    FlushDb,
    /// Databases `db` and this one were swapped in this partition (SWAPDB).
    SwapDb(usize),
}

/// One change, as the journal sees it.
#[derive(Clone, Copy)]
pub struct Change<'a> {
    /// Per-partition sequence number: strictly increasing within a partition.
    /// A key lives in one partition, so this orders every change to any key.
    pub seq: u64,
    pub partition: u32,
    pub db: usize,
    /// The key; empty for whole-database changes.
    pub key: &'a [u8],
    pub kind: ChangeKind,
    /// The key's new state for `Write` and `Expire`.
    pub entry: Option<&'a Entry>,
}

/// Receives every change, under the lock of the partition it happened in.
/// Must be quick: it runs on the request path.
pub trait Journal: Send + Sync {
    fn record(&self, change: &Change<'_>);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::list::ListValue;
    use crate::store::{Changed, KeyAccess, Keyspace, StoreStats, Value};
    use parking_lot::Mutex;
    use smallvec::SmallVec;
    use std::sync::Arc;

    /// (partition, seq, db, key, kind, value present) of one change.
    type Recorded = (u32, u64, usize, Vec<u8>, ChangeKind, bool);

    #[derive(Default)]
    struct Recorder(Mutex<Vec<Recorded>>);

    impl Journal for Recorder {
        fn record(&self, c: &Change<'_>) {
            self.0.lock().push((c.partition, c.seq, c.db, c.key.to_vec(), c.kind, c.entry.is_some()));
        }
    }

    fn with_keys<R>(ks: &Keyspace, now_ms: u64, keys: &[&[u8]], f: impl FnOnce(&mut KeyAccess<'_>) -> R) -> R {
        let stats = StoreStats::default();
        let mut parts: SmallVec<[u32; 8]> = keys.iter().map(|k| ks.partition_of_key(k)).collect();
        let mut access = KeyAccess { ks, locked: ks.lock_set(&mut parts), db: 0, now_ms, touch: true, stats: &stats };
        f(&mut access)
    }

    fn kinds(rec: &Recorder) -> Vec<(Vec<u8>, ChangeKind)> {
        rec.0.lock().drain(..).map(|(_, _, _, k, kind, _)| (k, kind)).collect()
    }

    #[test]
    fn every_change_reaches_the_journal_once_with_its_kind() {
        let rec = Arc::new(Recorder::default());
        let ks = Keyspace::with_journal(16, rec.clone());
        let s = |v: &str| Value::Str(v.as_bytes().to_vec());
        with_keys(&ks, 1, &[b"a"], |k| {
            k.set(b"a", s("1"), 0, false); // create
            k.set(b"a", s("2"), 0, false); // overwrite
            let _ = k.get(b"a"); // a read changes nothing
        });
        assert_eq!(kinds(&rec), [(b"a".to_vec(), ChangeKind::Write), (b"a".to_vec(), ChangeKind::Write)]);

        with_keys(&ks, 1, &[b"a"], |k| k.get_mut(b"a").unwrap().set_expire(5));
        assert_eq!(kinds(&rec), [(b"a".to_vec(), ChangeKind::Expire)]);
        // Read after its deadline: lazily expired.
        with_keys(&ks, 10, &[b"a"], |k| assert!(k.get(b"a").is_none()));
        assert_eq!(kinds(&rec), [(b"a".to_vec(), ChangeKind::Expired)]);

        with_keys(&ks, 1, &[b"l"], |k| {
            let mut e = k.get_or_insert_with(b"l", || Value::List(ListValue::default()));
            if let Value::List(l) = e.value_mut() {
                l.push_back(b"x".to_vec());
            }
        });
        // The insert, then the command's write into it: the whole new state each time.
        assert_eq!(kinds(&rec), [(b"l".to_vec(), ChangeKind::Write), (b"l".to_vec(), ChangeKind::Write)]);
        with_keys(&ks, 1, &[b"l"], |k| {
            let mut e = k.get_mut(b"l").unwrap();
            if let Value::List(l) = e.value_mut() {
                l.pop_front();
            }
        });
        assert_eq!(kinds(&rec), [(b"l".to_vec(), ChangeKind::Delete)], "an emptied collection is deleted");

        with_keys(&ks, 1, &[b"u"], |k| {
            k.set(b"u", s("1"), 0, false);
            assert!(k.update(b"u", |_| Changed::No(())).is_some());
            assert!(k.delete(b"u"));
        });
        assert_eq!(kinds(&rec), [(b"u".to_vec(), ChangeKind::Write), (b"u".to_vec(), ChangeKind::Delete)]);

        with_keys(&ks, 1, &[b"e"], |k| k.set(b"e", s("1"), 0, false));
        let idx = ks.partition_of_key(b"e");
        let slot = ks.lock(idx).dbs[0].find(crate::store::hash_bytes(b"e"), b"e").unwrap();
        let victim =
            crate::store::Victim { part: idx, db: 0, slot, hash: crate::store::hash_bytes(b"e") as u32, cold: false };
        ks.set_policy(crate::config::EvictionPolicy::AllKeysRandom); // noeviction discards nothing
        assert!(ks.evict(&victim, &StoreStats::default()).is_some());
        assert!(ks.evict(&victim, &StoreStats::default()).is_none(), "evicted once");
        {
            let mut part = ks.lock(idx);
            part.swap_dbs(&ks, 0, 1);
            part.clear_db(&ks, 1); // empty: nothing to record
        }
        let changes = rec.0.lock().clone();
        let got: Vec<_> = changes.iter().map(|c| (c.3.clone(), c.4)).collect();
        assert_eq!(
            got,
            [(b"e".to_vec(), ChangeKind::Write), (b"e".to_vec(), ChangeKind::Evicted), (vec![], ChangeKind::SwapDb(1))]
        );
        assert!(changes.windows(2).all(|w| w[0].0 == w[1].0 && w[0].1 < w[1].1), "sequence grows per partition");
    }

    #[test]
    fn an_update_is_journaled_only_when_it_declares_a_change() {
        let rec = Arc::new(Recorder::default());
        let ks = Keyspace::with_journal(16, rec.clone());
        let new_list = || Value::List(ListValue::default());
        let keys: [&[u8]; 3] = [b"l", b"n", b"missing"];
        with_keys(&ks, 1, &keys, |k| k.set(b"l", Value::Str(b"x".to_vec()), 0, false));
        kinds(&rec);

        with_keys(&ks, 1, &keys, |k| {
            assert_eq!(k.update(b"l", |_| Changed::No(7)), Some(7));
            assert_eq!(k.update(b"l", |_| Err::<Changed, _>("failed")), Some(Err("failed")));
            assert_eq!(k.update(b"missing", |_| Changed::Yes(())), None);
        });
        assert_eq!(kinds(&rec), [], "nothing declared changed, nothing journaled");

        with_keys(&ks, 1, &keys, |k| {
            let appended = k.update(b"l", |e| match e.value_mut() {
                Value::Str(v) => {
                    v.push(b'y');
                    Ok(Changed::Yes(v.len()))
                }
                _ => Err("not a string"),
            });
            assert_eq!(appended, Some(Ok(2)));
        });
        assert_eq!(kinds(&rec), [(b"l".to_vec(), ChangeKind::Write)]);

        with_keys(&ks, 1, &keys, |k| {
            assert_eq!(k.update_or_create(b"n", new_list, |_| Err::<Changed, _>("failed")), Err("failed"));
            assert!(!k.contains(b"n"), "a collection created for a failed write goes away again");
        });
        assert_eq!(kinds(&rec), [(b"n".to_vec(), ChangeKind::Write), (b"n".to_vec(), ChangeKind::Delete)]);
    }
}
