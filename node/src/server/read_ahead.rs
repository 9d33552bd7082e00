//! Read-ahead within a connection's pipeline. When the request at the head
//! of a connection's input waits for a disk read (the pending path), the
//! keys of the complete requests queued behind it are looked up too and
//! their disk reads started, up to `READ_AHEAD_KEYS` reads held by the
//! connection: the device then serves a pipeline's cold reads together
//! instead of one per round trip. Nothing runs out of order: requests still
//! run one after another from the head, each promoting its own values when
//! it runs (and only if the key still holds the record read), so a write
//! further along is never overtaken. Held reads are let go together once
//! every request they were started for has run.

use super::Shared;
use crate::protocol::{Limits, Parse, Request, parse_request};
use crate::session::client::Client;
use crate::store::ReadAhead;
use smallvec::SmallVec;
use std::sync::atomic::Ordering::Relaxed;

/// Requests looked at per call beyond the head, at most: bounds the parsing
/// a waiting request costs when the requests behind it need no disk.
const SCAN_MAX: usize = 512;

/// A connection's read-ahead state. Positions are offsets in the
/// connection's input stream (bytes since it opened), so that compacting
/// the read buffer leaves them valid.
pub(super) struct Ahead {
    /// Input up to here has been looked at.
    to: u64,
    /// Where the last request with reads held ends: they are all let go
    /// once input is consumed up to here.
    held_until: u64,
    held: Option<ReadAhead>,
    /// A request that ends look-ahead (SELECT and the like): none of the
    /// requests after it are looked at until it has run.
    barrier: bool,
}

impl Ahead {
    pub(super) fn new() -> Ahead {
        Ahead { to: 0, held_until: 0, held: None, barrier: false }
    }

    /// Lets go of the reads of requests that have run (input consumed up
    /// to `consumed`).
    pub(super) fn consumed(&mut self, consumed: u64) {
        let Some(held) = self.held.as_mut() else { return };
        if consumed >= self.held_until {
            held.clear();
        }
        if consumed >= self.to {
            self.barrier = false;
        }
    }
}

/// Commands after which the keys of later requests may mean something else
/// (another database, a transaction's end, another user): look-ahead stops
/// at them.
fn ends_look_ahead(name: &str) -> bool {
    matches!(name, "select" | "swapdb" | "multi" | "exec" | "reset" | "auth" | "hello")
}

/// Starts the disk reads of the requests behind the head of `rbuf[start..]`
/// (the head itself waits already). `base` is the stream offset of
/// `rbuf[0]`. Returns the reads started.
pub(super) fn read_ahead(
    shared: &Shared,
    client: &mut Client,
    rbuf: &[u8],
    start: usize,
    base: u64,
    ahead: &mut Ahead,
    req: &mut Request,
) -> usize {
    let ks = &shared.node.ks;
    let cold = ks.cold_stats();
    if cold.keys.load(Relaxed) == 0 && cold.forgotten.load(Relaxed) == 0 {
        return 0;
    }
    ahead.consumed(base + start as u64);
    if ahead.barrier {
        return 0;
    }
    let limits = Limits {
        max_bulk_len: shared.config.runtime.proto_max_bulk_len.load(Relaxed),
        unauthenticated: !client.authenticated,
        ..Limits::default()
    };
    let held = ahead.held.get_or_insert_with(|| ReadAhead::new(ks));
    let limit = crate::store::read_ahead_limit(shared.maxmemory());
    let mut pos = start;
    let mut started = 0;
    let mut scanned = 0;
    while scanned <= SCAN_MAX && held.len() < crate::store::READ_AHEAD_KEYS {
        let data = &rbuf[pos..];
        if data.is_empty() || !matches!(parse_request(data, &limits, req), Parse::Complete) {
            break;
        }
        let end = pos + req.consumed;
        let at_head = pos == start;
        let seen = base + end as u64 <= ahead.to;
        pos = end;
        scanned += 1;
        if at_head || seen {
            continue;
        }
        ahead.to = base + end as u64;
        let args: SmallVec<[&[u8]; 8]> = match &req.owned {
            Some(words) => words.iter().map(|w| w.as_slice()).collect(),
            None => req.args.iter().map(|&(s, l)| &data[s as usize..(s + l) as usize]).collect(),
        };
        if args.is_empty() {
            continue;
        }
        let Some(cmd) = shared.node.table.resolve(&args, client.last_lookup) else { continue };
        if ends_look_ahead(cmd.def.name) {
            ahead.barrier = true;
            break;
        }
        if cmd.arity_error().is_some()
            || cmd.key_positions().is_empty()
            || !crate::commands::pipeline::reads_values(cmd.def.name, &args)
        {
            continue;
        }
        // A key the client may not touch is not read for it either.
        if crate::commands::acl::check(&shared.node, client, &cmd).is_err() {
            continue;
        }
        let n = ks.read_ahead(client.db, client.now_ms, cmd.keys(), held, limit);
        if n > 0 {
            ahead.held_until = base + end as u64;
            started += n;
        }
    }
    started
}
