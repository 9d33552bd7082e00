//! SIEVE (Zhang et al., NSDI 2024): a FIFO queue with a "visited" bit and a
//! hand that moves from old to new, sparing visited keys (clearing the bit)
//! and evicting the first unvisited one. Hits only set a bit, so reads need
//! no queue reordering. Each partition keeps its own queue per database
//! (links live in the index entries); the policy runs the hand of a few
//! random partitions and evicts the oldest candidate among them.

use super::{EvictionPolicy, Victim};
use crate::store::{Keyspace, NUM_DBS, fast_rand};

const NONE: u32 = u32::MAX;

pub struct Sieve;

impl EvictionPolicy for Sieve {
    fn name(&self) -> &'static str {
        "sieve"
    }

    fn pick(&self, ks: &Keyspace, samples: usize) -> Option<Victim> {
        let nparts = ks.num_partitions() as u64;
        let start = fast_rand() % nparts;
        let mut best: Option<(u32, Victim)> = None;
        let mut taken = 0;
        for i in 0..nparts {
            if taken >= samples.max(1) {
                break;
            }
            let pidx = ((start + i * 7919) % nparts) as u32;
            let mut part = ks.lock(pidx);
            for db in 0..NUM_DBS {
                let d = &mut part.dbs[db];
                if d.is_empty() {
                    continue;
                }
                // Run the hand: spare visited entries until an unvisited one.
                let mut hand = if d.sieve_hand == NONE { d.sieve_tail } else { d.sieve_hand };
                let mut steps = 0usize;
                let limit = d.len() + 1;
                let victim = loop {
                    if hand == NONE {
                        hand = d.sieve_tail;
                    }
                    let e = d.entry_mut(hand);
                    if !e.meta.visited || steps >= limit {
                        break hand;
                    }
                    e.meta.visited = false;
                    let prev = e.meta.prev;
                    hand = prev;
                    steps += 1;
                };
                // The hand rests on the candidate: evicting it moves the hand
                // on (Db::remove); if another partition's candidate wins, this
                // one is still first in line next time.
                d.sieve_hand = victim;
                let age = d.entry(victim).meta.last_access;
                taken += 1;
                if best.is_none_or(|(a, _)| age < a) {
                    best = Some((age, Victim { part: pidx, db, slot: victim }));
                }
            }
        }
        best.map(|(_, v)| v)
    }
}
