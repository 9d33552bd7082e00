//! Redis's approximated policies: sample a few keys, evict the best one.
//!
//! Samples come from random partitions (one lock at a time, never two), so
//! eviction costs a handful of short lock holds and no global structure.

use super::{EvictionPolicy, Victim};
use crate::store::{Keyspace, NUM_DBS, fast_rand};

pub enum Pool {
    AllKeys,
    /// Only keys with a TTL.
    Volatile,
}

pub enum Rank {
    /// Oldest access first.
    Lru,
    /// Lowest access counter first.
    Lfu,
    Random,
    /// Nearest expiry first.
    Ttl,
}

pub struct Sampled {
    pub name: &'static str,
    pub pool: Pool,
    pub rank: Rank,
}

impl EvictionPolicy for Sampled {
    fn name(&self) -> &'static str {
        self.name
    }

    fn pick(&self, ks: &Keyspace, samples: usize) -> Option<Victim> {
        let nparts = ks.num_partitions() as u64;
        let clock = ks.clock_secs();
        let mut best: Option<(u64, Victim)> = None;
        let mut taken = 0;
        // Random partitions first (the same one may be drawn twice: with few
        // partitions that is how several samples come from one); if those
        // were empty (tiny keyspace), walk partitions in order from a random
        // start until enough candidates are found.
        let random_draws = samples as u64 * 4;
        let start = fast_rand() % nparts;
        for attempt in 0..random_draws + nparts {
            if taken >= samples {
                break;
            }
            let pidx = if attempt < random_draws {
                (fast_rand() % nparts) as u32
            } else {
                ((start + attempt - random_draws) % nparts) as u32
            };
            let part = ks.lock(pidx);
            for db in 0..NUM_DBS {
                let d = &part.dbs[db];
                let candidate = match self.pool {
                    Pool::AllKeys if !d.is_empty() => d.table.random_slot(fast_rand()),
                    Pool::Volatile if !d.expires.is_empty() => match self.rank {
                        // The expiry set is ordered: its first key expires soonest.
                        Rank::Ttl => d.expires.first().map(|&(_, s)| s),
                        _ => {
                            let n = d.expires.len();
                            d.expires.iter().nth((fast_rand() as usize) % n.min(64)).map(|&(_, s)| s)
                        }
                    },
                    _ => None,
                };
                let Some(slot) = candidate else { continue };
                let e = d.entry(slot);
                // Lower score = better victim.
                let score = match self.rank {
                    Rank::Lru => e.meta.last_access as u64,
                    Rank::Lfu => ((ks.lfu_counter(&e.meta, clock) as u64) << 32) | e.meta.last_access as u64,
                    Rank::Random => fast_rand(),
                    Rank::Ttl => e.expire_at,
                };
                taken += 1;
                if best.is_none_or(|(s, _)| score < s) {
                    best = Some((score, Victim { part: pidx, db, slot }));
                }
            }
        }
        best.map(|(_, v)| v)
    }
}
