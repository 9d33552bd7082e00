//! Client-side caching (CLIENT TRACKING): who is told what, and how.
//!
//! The keys clients read are kept by the store (`store::tracking`), per
//! partition; this side implements its `KeyTracker`: it finds the clients,
//! follows REDIRECT, applies NOLOOP and BCAST, and queues the messages —
//! RESP3 `invalidate` pushes, or, for a RESP2 client redirected to,
//! messages on `__redis__:invalidate`. Broadcast (BCAST) keys are gathered
//! per prefix and sent once per command (and by the workers' tick, for
//! keys expired in the background), as Redis sends them before sleeping.
//!
//! Messages for the client whose command is running on this thread are
//! kept aside (`take_own`) and written after its reply, as Redis defers
//! them, so they never interleave with it.

use super::client::{ClientInfo, ClientRegistry};
use parking_lot::Mutex;
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, AtomicUsize};

/// Bits of `ClientInfo::tracking`.
pub mod mode {
    pub const ON: u32 = 1;
    pub const BCAST: u32 = 1 << 1;
    pub const OPTIN: u32 = 1 << 2;
    pub const OPTOUT: u32 = 1 << 3;
    pub const NOLOOP: u32 = 1 << 4;
    /// CLIENT CACHING yes (OPTIN) or no (OPTOUT) given for the next command.
    pub const CACHING: u32 = 1 << 5;
    /// The client redirected to is gone.
    pub const BROKEN_REDIR: u32 = 1 << 6;
}

thread_local! {
    /// The client whose command this thread is running (0: none).
    static CURRENT: Cell<u64> = const { Cell::new(0) };
    /// Messages for that client, written after its reply.
    static OWN: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Marks `id` as the client this thread runs a command for (0 when done).
pub fn set_current(id: u64) {
    CURRENT.with(|c| c.set(id));
}

/// Appends to `out` the messages kept for the current client, if any.
pub fn take_own(out: &mut Vec<u8>) {
    OWN.with_borrow_mut(|own| {
        if !own.is_empty() {
            out.append(own);
        }
    });
}

/// What an invalidation says.
enum Payload<'a> {
    Key(&'a [u8]),
    /// An encoded array of keys (BCAST).
    Keys(&'a [u8]),
    /// Everything (FLUSHDB, FLUSHALL): a null.
    All,
}

/// One BCAST prefix: its clients and the keys changed since the last flush
/// (with the client that changed each, for NOLOOP; 0 = none).
#[derive(Default)]
struct Prefix {
    clients: BTreeMap<u64, Arc<ClientInfo>>,
    keys: BTreeMap<Vec<u8>, u64>,
}

/// The node's tracking state beyond the store's table.
pub struct Tracking {
    clients: Arc<ClientRegistry>,
    /// Clients with tracking on (INFO tracking_clients).
    enabled: AtomicUsize,
    prefixes: Mutex<BTreeMap<Vec<u8>, Prefix>>,
    /// Some prefix has keys to send.
    bcast_pending: AtomicBool,
}

impl Tracking {
    pub fn new(clients: Arc<ClientRegistry>) -> Self {
        Tracking {
            clients,
            enabled: AtomicUsize::new(0),
            prefixes: Default::default(),
            bcast_pending: Default::default(),
        }
    }

    pub fn clients(&self) -> usize {
        self.enabled.load(Relaxed)
    }

    /// BCAST prefixes in use (INFO tracking_total_prefixes).
    pub fn prefixes(&self) -> usize {
        self.prefixes.lock().len()
    }

    /// Turns tracking on for `info` (CLIENT TRACKING ON, options checked).
    /// Returns whether some prefix is now broadcast.
    pub fn enable(&self, info: &Arc<ClientInfo>, redirect: u64, options: u32, prefixes: &[&[u8]]) -> bool {
        let old = info.tracking.load(Relaxed);
        if old & mode::ON == 0 {
            self.enabled.fetch_add(1, Relaxed);
        }
        let keep = old & mode::CACHING;
        info.redirect.store(redirect, Relaxed);
        let mut bcast = false;
        if options & mode::BCAST != 0 {
            let mut table = self.prefixes.lock();
            let mut mine = info.prefixes.lock();
            let empty: &[u8] = b"";
            let wanted: &[&[u8]] = if prefixes.is_empty() { std::slice::from_ref(&empty) } else { prefixes };
            for p in wanted {
                table.entry(p.to_vec()).or_default().clients.insert(info.id, info.clone());
                mine.push(p.to_vec());
            }
            mine.sort();
            mine.dedup();
            bcast = true;
        }
        let flags = mode::ON | keep | (options & (mode::BCAST | mode::OPTIN | mode::OPTOUT | mode::NOLOOP));
        info.tracking.store(flags, Relaxed);
        bcast || !self.prefixes.lock().is_empty()
    }

    /// Turns tracking off (CLIENT TRACKING OFF, RESET, disconnect).
    /// Returns whether some prefix is still broadcast.
    pub fn disable(&self, info: &ClientInfo) -> bool {
        let old = info.tracking.swap(0, Relaxed);
        let mut table = self.prefixes.lock();
        if old & mode::BCAST != 0 {
            for p in std::mem::take(&mut *info.prefixes.lock()) {
                if let Some(state) = table.get_mut(&p) {
                    state.clients.remove(&info.id);
                    if state.clients.is_empty() {
                        table.remove(&p);
                    }
                }
            }
        }
        if old & mode::ON != 0 {
            self.enabled.fetch_sub(1, Relaxed);
        }
        !table.is_empty()
    }

    /// FLUSHDB / FLUSHALL: every tracking client is told to drop everything.
    pub fn flushed(&self) {
        if self.clients() == 0 {
            return;
        }
        for c in self.clients.all() {
            if c.tracking.load(Relaxed) & mode::ON != 0 {
                self.send(&c, Payload::All);
            }
        }
    }

    /// Sends the keys gathered for each BCAST prefix since the last call.
    #[inline]
    pub fn flush_broadcasts(&self) {
        // A load first: no write to this shared line per command.
        if !self.bcast_pending.load(Relaxed) || !self.bcast_pending.swap(false, Relaxed) {
            return;
        }
        let mut table = self.prefixes.lock();
        for state in table.values_mut() {
            if state.keys.is_empty() {
                continue;
            }
            let keys = std::mem::take(&mut state.keys);
            let all = encode_keys(keys.keys());
            for c in state.clients.values() {
                if c.tracking.load(Relaxed) & mode::NOLOOP != 0 {
                    let theirs: Vec<&Vec<u8>> = keys.iter().filter(|(_, w)| **w != c.id).map(|(k, _)| k).collect();
                    if !theirs.is_empty() {
                        self.send(c, Payload::Keys(&encode_keys(theirs.into_iter())));
                    }
                } else {
                    self.send(c, Payload::Keys(&all));
                }
            }
        }
    }

    /// Redis's `sendTrackingMessage`: to the client, or to the one it
    /// redirects to; a RESP2 client gets nothing unless redirected to a
    /// subscriber.
    fn send(&self, c: &ClientInfo, payload: Payload<'_>) {
        let redirect = c.redirect.load(Relaxed);
        let target;
        let to: &ClientInfo = if redirect != 0 {
            match self.clients.get(redirect) {
                Some(t) => {
                    target = t;
                    &target
                }
                None => {
                    c.tracking.fetch_or(mode::BROKEN_REDIR, Relaxed);
                    if c.resp.load(Relaxed) == 3 {
                        let mut msg = b">2\r\n$21\r\ntracking-redir-broken\r\n".to_vec();
                        msg.extend_from_slice(format!(":{redirect}\r\n").as_bytes());
                        deliver(c, msg);
                    }
                    return;
                }
            }
        } else {
            c
        };
        let resp3 = to.resp.load(Relaxed) == 3;
        let mut msg = Vec::with_capacity(64);
        if resp3 {
            msg.extend_from_slice(b">2\r\n$10\r\ninvalidate\r\n");
        } else if redirect != 0 && to.subs.load(Relaxed) + to.psubs.load(Relaxed) > 0 {
            msg.extend_from_slice(b"*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n");
        } else {
            return;
        }
        match payload {
            Payload::Key(k) => {
                msg.extend_from_slice(b"*1\r\n");
                bulk(&mut msg, k);
            }
            Payload::Keys(encoded) => msg.extend_from_slice(encoded),
            Payload::All => msg.extend_from_slice(if resp3 { b"_\r\n" } else { b"$-1\r\n" }),
        }
        deliver(to, msg);
    }
}

impl crate::store::KeyTracker for Tracking {
    fn invalidate(&self, key: &[u8], ids: &[u64]) {
        let current = CURRENT.with(|c| c.get());
        for &id in ids {
            let Some(c) = self.clients.get(id) else { continue };
            let flags = c.tracking.load(Relaxed);
            // Keys read before switching to BCAST are not reported.
            if flags & mode::ON == 0 || flags & mode::BCAST != 0 {
                continue;
            }
            if flags & mode::NOLOOP != 0 && id == current {
                continue;
            }
            self.send(&c, Payload::Key(key));
        }
    }

    fn broadcast(&self, key: &[u8]) {
        let writer = CURRENT.with(|c| c.get());
        let mut table = self.prefixes.lock();
        let mut any = false;
        for (prefix, state) in table.iter_mut() {
            if key.starts_with(prefix) {
                state.keys.insert(key.to_vec(), writer);
                any = true;
            }
        }
        if any {
            self.bcast_pending.store(true, Relaxed);
        }
    }
}

fn bulk(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(format!("${}\r\n", b.len()).as_bytes());
    out.extend_from_slice(b);
    out.extend_from_slice(b"\r\n");
}

fn encode_keys<'a>(keys: impl ExactSizeIterator<Item = &'a Vec<u8>>) -> Vec<u8> {
    let mut out = format!("*{}\r\n", keys.len()).into_bytes();
    for k in keys {
        bulk(&mut out, k);
    }
    out
}

/// Queues a message for `to`: kept for after the reply when `to` is the
/// client running a command on this thread, otherwise pushed to its
/// connection.
fn deliver(to: &ClientInfo, msg: Vec<u8>) {
    if CURRENT.with(|c| c.get()) == to.id {
        OWN.with_borrow_mut(|own| own.extend_from_slice(&msg));
        return;
    }
    push_to(to, msg);
}

/// Queues `msg` for `to`'s connection (messages kept for a client whose
/// command ran elsewhere, e.g. on the script thread).
pub fn push_to(to: &ClientInfo, msg: Vec<u8>) {
    if msg.is_empty() {
        return;
    }
    to.pending_push.fetch_add(msg.len(), Relaxed);
    let len = msg.len();
    if !to.push(msg) {
        to.pending_push.fetch_sub(len, Relaxed);
    }
}

/// Redis's check that a client's BCAST prefixes do not overlap: the error,
/// and whether tracking is still enabled after it (Redis 7.0 goes on when
/// the overlap is found among the new prefixes past the first one, replying
/// twice).
///
/// `existing` is sorted and free of overlaps. Redis compares every pair;
/// past `EXACT_CHECK_PAIRS` comparisons (thousands of prefixes in one
/// command) a sorted check in O(n log n) is used instead, so a hostile
/// request cannot stall the worker; it may then name another overlapping
/// pair than Redis would.
pub fn check_prefixes(existing: &[Vec<u8>], new: &[&[u8]]) -> Option<(String, bool)> {
    const EXACT_CHECK_PAIRS: usize = 1 << 22;
    if new.len().saturating_mul(existing.len() + new.len()) > EXACT_CHECK_PAIRS {
        return check_prefixes_sorted(existing, new);
    }
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    for (i, p) in new.iter().enumerate() {
        if let Some(e) = existing.iter().find(|e| overlaps(e, p)) {
            return Some((
                format!(
                    "ERR Prefix '{}' overlaps with an existing prefix '{}'. Prefixes for a single client must not overlap.",
                    text(p),
                    text(e)
                ),
                false,
            ));
        }
        if let Some(q) = new[i + 1..].iter().find(|q| overlaps(p, q)) {
            return Some((
                format!(
                    "ERR Prefix '{}' overlaps with another provided prefix '{}'. Prefixes for a single client must not overlap.",
                    text(p),
                    text(q)
                ),
                i > 0,
            ));
        }
    }
    None
}

/// Whether one of two prefixes starts the other.
fn overlaps(a: &[u8], b: &[u8]) -> bool {
    let n = a.len().min(b.len());
    a[..n] == b[..n]
}

fn existing_overlap(p: &[u8], e: &[u8]) -> String {
    format!(
        "ERR Prefix '{}' overlaps with an existing prefix '{}'. Prefixes for a single client must not overlap.",
        String::from_utf8_lossy(p),
        String::from_utf8_lossy(e)
    )
}

/// `check_prefixes` for many prefixes: an existing prefix overlapping `p`
/// is its neighbour in sorted order, and so is one new prefix overlapping
/// another once the new ones are sorted.
fn check_prefixes_sorted(existing: &[Vec<u8>], new: &[&[u8]]) -> Option<(String, bool)> {
    for p in new {
        let at = existing.partition_point(|e| e.as_slice() < *p);
        for e in existing[at.saturating_sub(1)..existing.len().min(at + 1)].iter() {
            if overlaps(e, p) {
                return Some((existing_overlap(p, e), false));
            }
        }
    }
    let mut order: Vec<usize> = (0..new.len()).collect();
    order.sort_by(|&a, &b| new[a].cmp(new[b]).then(a.cmp(&b)));
    let clash = order.windows(2).find(|w| overlaps(new[w[0]], new[w[1]]))?;
    let (i, j) = (clash[0].min(clash[1]), clash[0].max(clash[1]));
    let msg = format!(
        "ERR Prefix '{}' overlaps with another provided prefix '{}'. Prefixes for a single client must not overlap.",
        String::from_utf8_lossy(new[i]),
        String::from_utf8_lossy(new[j])
    );
    Some((msg, i > 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_overlaps_are_found_exactly_and_in_bulk() {
        let existing = vec![b"bar".to_vec(), b"foo".to_vec()];
        let (msg, goes_on) = check_prefixes(&existing, &[b"fo"]).unwrap();
        assert!(msg.starts_with("ERR Prefix 'fo' overlaps with an existing prefix 'foo'"), "{msg}");
        assert!(!goes_on);
        let (msg, goes_on) = check_prefixes(&[], &[b"a", b"xy", b"x"]).unwrap();
        assert!(msg.starts_with("ERR Prefix 'xy' overlaps with another provided prefix 'x'"), "{msg}");
        assert!(goes_on, "Redis 7.0 enables tracking after an overlap past the first prefix");
        assert!(check_prefixes(&existing, &[b"baz", b"qux"]).is_none());
        // Many prefixes: the sorted check, quick and still finding overlaps.
        let many: Vec<Vec<u8>> = (0..5000).map(|i| format!("p{i:05}:").into_bytes()).collect();
        let refs: Vec<&[u8]> = many.iter().map(|v| v.as_slice()).collect();
        assert!(check_prefixes(&[], &refs).is_none());
        let mut with_clash = refs.clone();
        with_clash.push(b"p01234");
        let (msg, _) = check_prefixes(&[], &with_clash).unwrap();
        assert!(msg.contains("'p01234:'") && msg.contains("'p01234'"), "{msg}");
        assert!(check_prefixes_sorted(&existing, &[b"ba"]).is_some());
        assert!(check_prefixes_sorted(&existing, &[b"barn"]).is_some());
        assert!(check_prefixes_sorted(&existing, &[b"c"]).is_none());
    }
}
