//! A connection's request, through the command pipeline (`pipeline.rs`):
//! resolve, admit as a client's command — or queue it inside MULTI — then
//! run.

use super::pipeline::{self, Origin, Outcome, Refusal, Refused};
use super::{Node, ServerControl, flags};
use crate::metrics::WorkerMetrics;
use crate::protocol::Reply;
use crate::session::client::{Client, Queued};
use crate::session::tracking;
use std::sync::atomic::Ordering::Relaxed;

/// Executes one request and appends its reply to `out`.
pub fn execute(
    node: &Node,
    server: &dyn ServerControl,
    worker: &WorkerMetrics,
    client: &mut Client,
    args: &[&[u8]],
    out: &mut Reply,
) -> Outcome {
    tracking::set_current(client.info.id);
    let outcome = execute_request(node, server, worker, client, args, out);
    // The invalidations it caused for this client are taken by the
    // connection after the reply (`tracking::take_own`): CLIENT REPLY OFF
    // drops the reply, not those pushes.
    node.tracking.flush_broadcasts();
    tracking::set_current(0);
    if matches!(outcome, Outcome::Pending(_)) {
        // Not run yet: what it caused so far goes out now.
        tracking::take_own(&mut out.buf);
    }
    // CLIENT CACHING lasts for one command (or one transaction).
    let mode = client.info.tracking.load(Relaxed);
    if mode & tracking::mode::CACHING != 0 && client.multi.is_none() && !crate::base::eq_ic(args[0], "client") {
        client.info.tracking.fetch_and(!tracking::mode::CACHING, Relaxed);
    }
    outcome
}

fn execute_request(
    node: &Node,
    server: &dyn ServerControl,
    worker: &WorkerMetrics,
    client: &mut Client,
    args: &[&[u8]],
    out: &mut Reply,
) -> Outcome {
    // The tracking table over `tracking-table-max-keys`: invalidate some.
    let max_tracked = node.config.runtime.tracking_table_max_keys.load(Relaxed) as usize;
    if max_tracked > 0 && node.ks.tracked_keys() > max_tracked {
        node.ks.limit_tracked(max_tracked);
        tracking::take_own(&mut out.buf);
    }
    // WATCHes an EXEC refused while a script ran set aside: released once
    // no script holds the keyspace.
    if !client.stale_watches.is_empty() && !node.scripts.active() {
        super::transactions::release_stale_watches(node, client);
    }
    let Some(cmd) = node.table.resolve(args, client.last_lookup) else {
        pipeline::refuse(node, worker, client, None, args, &Origin::Client, &Refused::Unknown, out);
        return Outcome::Done;
    };
    client.last_lookup = cmd.idx;
    let queues = client.multi.is_some() && !cmd.def.has(flags::NO_QUEUE);
    let origin = if queues { Origin::Queue } else { Origin::Client };
    match pipeline::admit(node, worker, client, &cmd, &origin) {
        Ok(()) => {}
        Err(Refusal::Wait(wait)) => return Outcome::Pending(wait),
        Err(Refusal::Forward(f)) => {
            client.asking = false;
            return Outcome::Forward(f);
        }
        Err(Refusal::Refused(Refused::Busy(e))) if client.multi.is_some() && cmd.def.name == "exec" => {
            // A refused EXEC ends the transaction (Redis's `execCommandAbort`).
            let msg = format!("EXECABORT Transaction discarded because of: {e}");
            pipeline::account(worker, client, Some(&cmd), &origin, msg.as_bytes());
            super::transactions::abort_while_busy(client);
            out.error(&msg);
            return Outcome::Done;
        }
        Err(Refusal::Refused(r)) => {
            if matches!(r, Refused::Moved(..)) {
                crate::metrics::ClusterStats::add(&worker.cluster.moved, 1);
            }
            pipeline::refuse(node, worker, client, Some(&cmd), args, &origin, &r, out);
            if matches!(r, Refused::Moved(..) | Refused::CrossSlot | Refused::ClusterDown(..))
                && cmd.def.name == "exec"
                && client.multi.is_some()
            {
                // As Redis: a redirected EXEC discards the transaction.
                super::transactions::discard_transaction(node, client);
            }
            client.asking = false;
            return Outcome::Done;
        }
    }
    if queues {
        let queued = client.multi.as_mut().expect("in multi");
        queued.push(Queued { cmd: cmd.idx, args: args.iter().map(|a| a.to_vec()).collect() });
        client.info.multi.store(queued.len() as u32, Relaxed);
        out.simple("QUEUED");
        return Outcome::Done;
    }
    // ASKING lasts for the one command after it, as in Redis.
    if client.asking && cmd.def.name != "asking" {
        client.asking = false;
    }
    // Keys evicted for this command: their invalidations precede its reply.
    tracking::take_own(&mut out.buf);
    client.info.last_cmd.store(cmd.idx as u32, Relaxed);
    match pipeline::run(node, server, worker, client, &cmd, out) {
        Outcome::Done if node.cluster.is_some() => match pipeline::fan_out(node, client, &cmd) {
            Some(f) => Outcome::FanOut(f),
            None => Outcome::Done,
        },
        outcome => outcome,
    }
}
