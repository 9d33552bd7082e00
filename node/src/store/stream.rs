//! Stream values: entries ordered by ID, plus consumer groups with their
//! pending entries lists (PEL), as Redis 7.0 models them.
//!
//! Entries live in a `BTreeMap` keyed by ID (Redis uses a rax of listpacks;
//! only the order and the range walks matter to commands). Entry bytes are
//! counted as entries come and go, so the memory figure is cheap; groups add
//! a per-item estimate computed from their (usually few) consumers.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use crate::sys::alloc::size_class;

/// A stream entry ID: milliseconds and sequence number.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StreamId {
    pub ms: u64,
    pub seq: u64,
}

impl StreamId {
    pub const MIN: StreamId = StreamId { ms: 0, seq: 0 };
    pub const MAX: StreamId = StreamId { ms: u64::MAX, seq: u64::MAX };

    pub const fn new(ms: u64, seq: u64) -> StreamId {
        StreamId { ms, seq }
    }

    pub fn is_zero(self) -> bool {
        self == StreamId::MIN
    }

    /// The next ID, or None past the maximum.
    pub fn next(self) -> Option<StreamId> {
        if self.seq < u64::MAX {
            Some(StreamId::new(self.ms, self.seq + 1))
        } else if self.ms < u64::MAX {
            Some(StreamId::new(self.ms + 1, 0))
        } else {
            None
        }
    }

    /// The previous ID, or None before the minimum.
    pub fn prev(self) -> Option<StreamId> {
        if self.seq > 0 {
            Some(StreamId::new(self.ms, self.seq - 1))
        } else if self.ms > 0 {
            Some(StreamId::new(self.ms - 1, u64::MAX))
        } else {
            None
        }
    }

    /// The 16-byte big-endian form RDB uses for rax keys and PEL IDs.
    pub fn to_be_bytes(self) -> [u8; 16] {
        let mut b = [0; 16];
        b[..8].copy_from_slice(&self.ms.to_be_bytes());
        b[8..].copy_from_slice(&self.seq.to_be_bytes());
        b
    }

    pub fn from_be_bytes(b: &[u8]) -> Option<StreamId> {
        if b.len() != 16 {
            return None;
        }
        Some(StreamId::new(u64::from_be_bytes(b[..8].try_into().ok()?), u64::from_be_bytes(b[8..].try_into().ok()?)))
    }
}

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.ms, self.seq)
    }
}

/// Redis's SCG_INVALID_ENTRIES_READ: a group's read counter is unknown.
pub const ENTRIES_READ_INVALID: i64 = -1;

/// One pending (delivered, not acknowledged) entry of a group.
#[derive(Clone, Debug)]
pub struct Pending {
    pub consumer: Vec<u8>,
    /// Unix ms of the last delivery.
    pub delivery_time: u64,
    pub delivery_count: u64,
}

#[derive(Clone, Debug, Default)]
pub struct Consumer {
    /// Unix ms of the consumer's last interaction (XINFO's idle).
    pub seen_time: u64,
    /// The IDs of the group's PEL this consumer owns.
    pub pel: BTreeSet<StreamId>,
}

#[derive(Clone, Debug, Default)]
pub struct Group {
    pub last_id: StreamId,
    /// Logical count of entries the group has read, or `ENTRIES_READ_INVALID`.
    pub entries_read: i64,
    pub pel: BTreeMap<StreamId, Pending>,
    pub consumers: BTreeMap<Vec<u8>, Consumer>,
}

impl Group {
    pub fn new(last_id: StreamId, entries_read: i64) -> Group {
        Group { last_id, entries_read, ..Default::default() }
    }

    /// The consumer named `name`, created (with `now` as its seen time)
    /// when missing; the bool says whether it was created.
    pub fn consumer(&mut self, name: &[u8], now: u64) -> (&mut Consumer, bool) {
        let created = !self.consumers.contains_key(name);
        let c =
            self.consumers.entry(name.to_vec()).or_insert_with(|| Consumer { seen_time: now, pel: BTreeSet::new() });
        (c, created)
    }

    /// Removes `id` from the PEL (and its owner's); true when it was pending.
    pub fn ack(&mut self, id: StreamId) -> bool {
        let Some(p) = self.pel.remove(&id) else { return false };
        if let Some(c) = self.consumers.get_mut(&p.consumer) {
            c.pel.remove(&id);
        }
        true
    }

    /// Makes `consumer` the owner of pending `id`, delivered at `now`
    /// (XREADGROUP's delivery: count 1, or the claim's own figures).
    pub fn assign(&mut self, id: StreamId, consumer: &[u8], delivery_time: u64, delivery_count: u64) {
        if let Some(old) = self.pel.get(&id)
            && let Some(c) = self.consumers.get_mut(&old.consumer)
        {
            c.pel.remove(&id);
        }
        self.pel.insert(id, Pending { consumer: consumer.to_vec(), delivery_time, delivery_count });
        self.consumers.entry(consumer.to_vec()).or_default().pel.insert(id);
    }

    fn mem_bytes(&self, name: &[u8]) -> usize {
        let consumers: usize =
            self.consumers.iter().map(|(n, c)| size_class(n.len()) + CONSUMER_COST + c.pel.len() * ID_COST).sum();
        size_class(name.len()) + GROUP_COST + self.pel.len() * PENDING_COST + consumers
    }
}

/// Per-item estimates of what the maps and their nodes hold.
const ENTRY_COST: usize = 64;
const FIELD_COST: usize = 24;
const GROUP_COST: usize = 160;
const CONSUMER_COST: usize = 96;
const PENDING_COST: usize = 96;
const ID_COST: usize = 32;
const NODE_COST: usize = 64;

/// One listpack node as Redis would have it: where entries go, what
/// approximate trimming removes whole, what RDB payloads group by.
#[derive(Clone, Debug, Default)]
pub struct Node {
    /// Live entries.
    pub live: u64,
    /// Entries deleted but still in the node (Redis only marks them).
    pub deleted: u64,
    /// The listpack's size in bytes (as Redis encodes it).
    pub bytes: usize,
    /// The highest ID ever put in the node.
    pub last: StreamId,
    pub master_fields: Vec<Vec<u8>>,
}

/// How a trim decides what goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trim {
    /// Keep at most this many entries.
    MaxLen(u64),
    /// Remove entries with IDs below this one.
    MinId(StreamId),
}

/// Redis's STREAM_LISTPACK_MAX_SIZE: the cap on stream-node-max-bytes.
const NODE_MAX_BYTES_CAP: usize = 1 << 30;

#[derive(Clone, Default)]
pub struct StreamValue {
    entries: BTreeMap<StreamId, Vec<Vec<u8>>>,
    /// Listpack nodes by master ID.
    nodes: BTreeMap<StreamId, Node>,
    /// Bytes the entries take (see `entry_cost`).
    entry_bytes: usize,
    pub last_id: StreamId,
    /// The first entry's ID as recorded (0-0 when empty).
    pub first_id: StreamId,
    pub max_deleted_id: StreamId,
    /// Entries ever added.
    pub entries_added: u64,
    pub groups: BTreeMap<Vec<u8>, Group>,
}

fn entry_cost(fields: &[Vec<u8>]) -> usize {
    ENTRY_COST + fields.iter().map(|f| size_class(f.len()) + FIELD_COST).sum::<usize>()
}

/// Whether an entry's field names are its node's master fields.
fn same_fields(master: &[Vec<u8>], fields: &[Vec<u8>]) -> bool {
    master.len() * 2 == fields.len() && master.iter().zip(fields.chunks_exact(2)).all(|(m, f)| *m == f[0])
}

/// Bytes an entry takes in its node's listpack (Redis's layout: flags,
/// ms and seq deltas, [count and fields,] values, element count).
fn entry_lp_size(master_id: StreamId, master: &[Vec<u8>], id: StreamId, fields: &[Vec<u8>]) -> usize {
    use super::listpack::{int_size, str_size};
    let same = same_fields(master, fields);
    let n = (fields.len() / 2) as i64;
    let mut size = int_size(if same { 2 } else { 0 })
        + int_size(id.ms.wrapping_sub(master_id.ms) as i64)
        + int_size(id.seq.wrapping_sub(master_id.seq) as i64);
    if same {
        size += fields.chunks_exact(2).map(|f| str_size(&f[1])).sum::<usize>();
        size + int_size(n + 3)
    } else {
        size += int_size(n) + fields.iter().map(|f| str_size(f)).sum::<usize>();
        size + int_size(2 * n + 4)
    }
}

/// Bytes of an empty node's listpack: header, master entry, end.
fn node_base_size(master: &[Vec<u8>]) -> usize {
    use super::listpack::{int_size, str_size};
    6 + int_size(1)
        + int_size(0)
        + int_size(master.len() as i64)
        + master.iter().map(|f| str_size(f)).sum::<usize>()
        + int_size(0)
        + 1
}

impl StreamValue {
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Streams are kept when empty, as in Redis: never "an empty collection".
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn mem_bytes(&self) -> usize {
        self.entry_bytes + self.nodes.len() * NODE_COST + self.groups.iter().map(|(n, g)| g.mem_bytes(n)).sum::<usize>()
    }

    pub fn encoding(&self) -> &'static str {
        "stream"
    }

    pub fn get(&self, id: StreamId) -> Option<&Vec<Vec<u8>>> {
        self.entries.get(&id)
    }

    pub fn first(&self) -> Option<(StreamId, &Vec<Vec<u8>>)> {
        self.entries.iter().next().map(|(k, v)| (*k, v))
    }

    pub fn last(&self) -> Option<(StreamId, &Vec<Vec<u8>>)> {
        self.entries.iter().next_back().map(|(k, v)| (*k, v))
    }

    /// Entries with IDs in `start..=end`, in ID order (reverse with `.rev()`).
    pub fn range(
        &self,
        start: StreamId,
        end: StreamId,
    ) -> impl DoubleEndedIterator<Item = (StreamId, &Vec<Vec<u8>>)> + '_ {
        let r = if start <= end { Some(start..=end) } else { None };
        r.into_iter().flat_map(move |r| self.entries.range(r).map(|(k, v)| (*k, v)))
    }

    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (StreamId, &Vec<Vec<u8>>)> + '_ {
        self.entries.iter().map(|(k, v)| (*k, v))
    }

    /// The listpack nodes, by master ID.
    pub fn nodes(&self) -> impl Iterator<Item = (StreamId, &Node)> + '_ {
        self.nodes.iter().map(|(k, v)| (*k, v))
    }

    /// Appends an entry (its ID above `last_id`: the caller checked), as
    /// XADD does: counters and the recorded first ID follow. A new node
    /// starts when the last one reached `max_entries` or `max_bytes`
    /// (stream-node-max-entries / -bytes; 0 = no limit).
    pub fn append(&mut self, id: StreamId, fields: Vec<Vec<u8>>, max_entries: u64, max_bytes: usize) {
        let max_bytes = if max_bytes == 0 || max_bytes > NODE_MAX_BYTES_CAP { NODE_MAX_BYTES_CAP } else { max_bytes };
        let field_bytes: usize = fields.iter().map(Vec::len).sum();
        let tail = self.nodes.iter_mut().next_back().filter(|(_, n)| {
            n.bytes + field_bytes < max_bytes && (max_entries == 0 || n.live + n.deleted < max_entries)
        });
        match tail {
            Some((&master_id, node)) => {
                node.bytes += entry_lp_size(master_id, &node.master_fields, id, &fields);
                node.live += 1;
                node.last = id;
            }
            None => {
                let master_fields: Vec<Vec<u8>> = fields.chunks_exact(2).map(|f| f[0].clone()).collect();
                let bytes = node_base_size(&master_fields) + entry_lp_size(id, &master_fields, id, &fields);
                self.nodes.insert(id, Node { live: 1, deleted: 0, bytes, last: id, master_fields });
            }
        }
        self.entry_bytes += entry_cost(&fields);
        if self.entries.is_empty() {
            self.first_id = id;
        }
        self.entries.insert(id, fields);
        self.last_id = id;
        self.entries_added += 1;
    }

    /// Adds an entry loaded from a payload to the node `master_id` (counters
    /// come from the payload). False when the ID is already there.
    pub fn load_entry(&mut self, master_id: StreamId, id: StreamId, fields: Vec<Vec<u8>>) -> bool {
        if self.entries.contains_key(&id) {
            return false;
        }
        let node = self.nodes.entry(master_id).or_insert_with(|| {
            let master_fields: Vec<Vec<u8>> = fields.chunks_exact(2).map(|f| f[0].clone()).collect();
            Node { bytes: node_base_size(&master_fields), master_fields, ..Default::default() }
        });
        node.bytes += entry_lp_size(master_id, &node.master_fields, id, &fields);
        node.live += 1;
        node.last = node.last.max(id);
        self.entry_bytes += entry_cost(&fields);
        self.entries.insert(id, fields);
        true
    }

    /// The master ID of the node holding `id`.
    fn node_of(&self, id: StreamId) -> Option<StreamId> {
        self.nodes.range(..=id).next_back().map(|(k, _)| *k)
    }

    /// Takes one entry out, marking it deleted in its node (a node left
    /// without live entries goes, as in Redis).
    fn remove_entry(&mut self, id: StreamId) -> bool {
        let Some(f) = self.entries.remove(&id) else { return false };
        self.entry_bytes -= entry_cost(&f);
        if let Some(master) = self.node_of(id)
            && let Some(node) = self.nodes.get_mut(&master)
        {
            node.live -= 1;
            node.deleted += 1;
            if node.live == 0 {
                self.nodes.remove(&master);
            }
        }
        true
    }

    /// Removes one entry (XDEL); true when it existed.
    pub fn delete(&mut self, id: StreamId) -> bool {
        if !self.remove_entry(id) {
            return false;
        }
        if id > self.max_deleted_id {
            self.max_deleted_id = id;
        }
        self.refresh_first_id();
        true
    }

    fn refresh_first_id(&mut self) {
        self.first_id = self.first().map(|(id, _)| id).unwrap_or(StreamId::MIN);
    }

    /// Redis's streamTrim: removes entries from the head by `how`, whole
    /// nodes only when `approx`, at most `limit` entries (0 = no limit).
    /// Returns how many were removed. `max_deleted_id` does not move.
    pub fn trim(&mut self, how: Trim, approx: bool, limit: u64) -> u64 {
        let mut removed = 0u64;
        let masters: Vec<StreamId> = self.nodes.keys().copied().collect();
        for master in masters {
            if let Trim::MaxLen(max) = how
                && self.entries.len() as u64 <= max
            {
                break;
            }
            let node = &self.nodes[&master];
            let live = node.live;
            if limit != 0 && removed + live > limit {
                break;
            }
            let whole = match how {
                Trim::MaxLen(max) => self.entries.len() as u64 - live >= max,
                Trim::MinId(min) => node.last < min,
            };
            let next = self.nodes.range((std::ops::Bound::Excluded(master), std::ops::Bound::Unbounded)).next();
            let node_end = next.map(|(k, _)| *k);
            let ids: Vec<StreamId> = match node_end {
                Some(end) => self.entries.range(master..end).map(|(k, _)| *k).collect(),
                None => self.entries.range(master..).map(|(k, _)| *k).collect(),
            };
            if whole {
                for id in ids {
                    let f = self.entries.remove(&id).expect("listed above");
                    self.entry_bytes -= entry_cost(&f);
                }
                self.nodes.remove(&master);
                removed += live;
                continue;
            }
            if approx {
                break;
            }
            for id in ids {
                let done = match how {
                    Trim::MaxLen(max) => self.entries.len() as u64 <= max,
                    Trim::MinId(min) => id >= min,
                };
                if done {
                    break;
                }
                let f = self.entries.remove(&id).expect("listed above");
                self.entry_bytes -= entry_cost(&f);
                let node = self.nodes.get_mut(&master).expect("node exists");
                node.live -= 1;
                node.deleted += 1;
                removed += 1;
            }
            break;
        }
        if removed > 0 {
            self.refresh_first_id();
        }
        removed
    }

    /// Redis's streamEstimateDistanceFromFirstEverEntry: the logical read
    /// counter of `id`, or `ENTRIES_READ_INVALID` when it cannot be known.
    pub fn estimate_entries_read(&self, id: StreamId) -> i64 {
        if self.entries_added == 0 {
            return 0;
        }
        if self.entries.is_empty() && id <= self.last_id {
            return self.entries_added as i64;
        }
        if id == self.last_id {
            return self.entries_added as i64;
        }
        if id > self.last_id {
            return ENTRIES_READ_INVALID;
        }
        if self.max_deleted_id.is_zero() || self.max_deleted_id < self.first_id {
            let base = self.entries_added as i64 - self.entries.len() as i64;
            if id < self.first_id {
                return base;
            } else if id == self.first_id {
                return base + 1;
            }
        }
        ENTRIES_READ_INVALID
    }

    /// Redis's streamRangeHasTombstones: whether a deleted entry may lie
    /// within `start..` (to the end).
    pub fn range_has_tombstones(&self, start: StreamId) -> bool {
        if self.entries.is_empty() || self.max_deleted_id.is_zero() {
            return false;
        }
        if self.first_id > self.max_deleted_id {
            return false;
        }
        start <= self.max_deleted_id
    }

    /// A group's lag (XINFO), None when it cannot be known.
    pub fn lag(&self, g: &Group) -> Option<i64> {
        if self.entries_added == 0 {
            return Some(0);
        }
        if g.entries_read != ENTRIES_READ_INVALID && !self.range_has_tombstones(g.last_id) {
            return Some(self.entries_added as i64 - g.entries_read);
        }
        let read = self.estimate_entries_read(g.last_id);
        (read != ENTRIES_READ_INVALID).then(|| self.entries_added as i64 - read)
    }

    /// Moves a group's last delivered ID to `id` (an entry it just
    /// delivered), keeping its read counter as Redis does.
    pub fn advance_group(&mut self, group: &[u8], id: StreamId) {
        let has_tombstones = self.range_has_tombstones(id);
        let estimate = self.estimate_entries_read(id);
        let added = self.entries_added;
        let Some(g) = self.groups.get_mut(group) else { return };
        if id <= g.last_id {
            return;
        }
        if g.entries_read != ENTRIES_READ_INVALID && !has_tombstones {
            g.entries_read += 1;
        } else if added != 0 {
            g.entries_read = estimate;
        }
        g.last_id = id;
    }

    /// Listpack nodes Redis would hold: XINFO's radix-tree-keys.
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(v: &[&str]) -> Vec<Vec<u8>> {
        v.iter().map(|s| s.as_bytes().to_vec()).collect()
    }

    #[test]
    fn memory_follows_appends_deletes_and_trims() {
        let mut s = StreamValue::default();
        assert_eq!(s.mem_bytes(), 0);
        for i in 1..=10 {
            s.append(StreamId::new(i, 0), fields(&["f", "v"]), 4, 4096);
        }
        let ten = s.mem_bytes();
        assert!(ten > 0);
        assert!(s.delete(StreamId::new(5, 0)));
        assert!(!s.delete(StreamId::new(5, 0)));
        assert_eq!(s.max_deleted_id, StreamId::new(5, 0));
        assert_eq!(s.node_count(), 3);
        // Approximate: only whole nodes (1-4, then 6-8 without 5, then 9-10).
        assert_eq!(s.trim(Trim::MaxLen(3), true, 0), 4);
        assert_eq!(s.len(), 5);
        assert_eq!(s.trim(Trim::MaxLen(3), false, 0), 2);
        assert_eq!(s.len(), 3);
        assert_eq!(s.first_id, StreamId::new(8, 0));
        assert_eq!(s.trim(Trim::MinId(StreamId::new(9, 0)), false, 0), 1);
        assert!(s.mem_bytes() < ten);
        s.trim(Trim::MaxLen(0), false, 0);
        assert_eq!(s.mem_bytes(), 0);
        assert_eq!(s.first_id, StreamId::MIN);
        assert_eq!(s.entries_added, 10);
    }

    #[test]
    fn read_counter_estimates_follow_redis() {
        let mut s = StreamValue::default();
        assert_eq!(s.estimate_entries_read(StreamId::new(1, 0)), 0);
        for i in 1..=5 {
            s.append(StreamId::new(i, 0), fields(&["a", "1"]), 100, 4096);
        }
        assert_eq!(s.estimate_entries_read(StreamId::new(5, 0)), 5);
        assert_eq!(s.estimate_entries_read(StreamId::new(6, 0)), ENTRIES_READ_INVALID);
        assert_eq!(s.estimate_entries_read(StreamId::new(1, 0)), 1);
        assert_eq!(s.estimate_entries_read(StreamId::new(0, 5)), 0);
        assert_eq!(s.estimate_entries_read(StreamId::new(3, 0)), ENTRIES_READ_INVALID);
        s.delete(StreamId::new(3, 0));
        assert!(s.range_has_tombstones(StreamId::new(2, 0)));
        assert!(!s.range_has_tombstones(StreamId::new(4, 0)));
    }
}
