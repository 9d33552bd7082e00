//! Resharding plans (issue 23): which slots move from which node to which, so that a cluster of
//! `shards` nodes is even again after a scale out, a scale in or a drift.
//!
//! Pure: the controller and `strata-cluster rebalance` plan with the same function and only
//! differ in how they drive the moves. Nodes are named by ordinal (pod ordinal, local index).
//!
//! The rules:
//! - ordinals `>= shards` are drained completely, the highest first, into the least loaded
//!   remaining ones;
//! - then, while one remaining ordinal is above the ideal load and another below, slots go from
//!   the fullest to the emptiest, never more than either is off the ideal: a slot that moves
//!   moves once, so the plan moves about as few slots as balance allows;
//! - a move carries at most `batch` slots (a migration is atomic per move, and a small batch
//!   keeps each handover short);
//! - a move only carries slots its source owned when planning, so moves are independent of
//!   each other and may run in any order, or at once when their sources differ.

use super::{SLOTS, SlotRange};

/// Default bound on the slots of one move.
pub const DEFAULT_BATCH: u32 = 1024;

/// One migration of the plan: `slots` from ordinal `source` to ordinal `target`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Move {
    pub source: u32,
    pub target: u32,
    pub slots: Vec<SlotRange>,
}

impl Move {
    pub fn slot_count(&self) -> u32 {
        self.slots.iter().map(SlotRange::len).sum()
    }
}

/// The moves that even out `owners` (the slots each ordinal owns now, by index; ordinals past
/// its end own nothing) over ordinals `0..shards`. `weights`: a weight per slot (keys or bytes;
/// `None`: every slot weighs the same). A weight of 0 counts as 1, so an empty slot still
/// counts and every move makes progress. `batch`: most slots per move (at least 1).
pub fn plan(owners: &[Vec<SlotRange>], shards: u32, weights: Option<&[u64]>, batch: u32) -> Vec<Move> {
    let shards = shards.max(1) as usize;
    let batch = batch.max(1) as usize;
    let even = weights.is_none();
    let weight = |slot: u16| weights.and_then(|w| w.get(usize::from(slot))).copied().unwrap_or(1).max(1);
    let width = owners.len().max(shards);
    // What each ordinal may still give: the slots it owns now, in slot order.
    let mut givable: Vec<Vec<u16>> = (0..width)
        .map(|o| owners.get(o).map(|r| r.iter().flat_map(|r| r.first..=r.last).collect()).unwrap_or_default())
        .collect();
    let mut load: Vec<u64> = givable.iter().map(|s| s.iter().map(|&s| weight(s)).sum()).collect();
    let total: u64 = load.iter().sum();
    // The ideal load of a remaining ordinal, as a fraction total / shards: compared as
    // load * shards against total so no rounding creeps in.
    let over = |load: u64| load * shards as u64 > total;
    let under = |load: u64| (load * (shards as u64)) < total;
    let mut moves = Vec::new();

    // Drain: highest ordinal first, each batch to the least loaded remaining ordinal.
    for source in (shards..width).rev() {
        while !givable[source].is_empty() {
            let target = least_loaded(&load[..shards]);
            let room = (total / shards as u64).saturating_sub(load[target]);
            let taken = take(&mut givable[source], batch, room, weight, even, true);
            let moved: u64 = taken.iter().map(|&s| weight(s)).sum();
            load[source] -= moved;
            load[target] += moved;
            moves.push(Move { source: source as u32, target: target as u32, slots: ranges(&taken) });
        }
    }

    // Balance the remaining ordinals: fullest to emptiest, within what both are off the ideal.
    loop {
        let target = least_loaded(&load[..shards]);
        let Some(source) = (0..shards).filter(|&o| over(load[o]) && !givable[o].is_empty()).max_by_key(|&o| load[o])
        else {
            break;
        };
        if !under(load[target]) || source == target {
            break;
        }
        let ideal = total / shards as u64;
        let surplus = load[source] - ideal;
        let deficit = ideal.saturating_sub(load[target]);
        let mut taken = take(&mut givable[source], batch, surplus.min(deficit), weight, even, false);
        if taken.is_empty() {
            // Nothing fits within the deficit: one slot still helps when it is lighter than
            // the gap between the two (both end closer to each other).
            let gap = load[source] - load[target];
            match givable[source].iter().position(|&s| weight(s) < gap) {
                Some(i) => taken.push(givable[source].remove(i)),
                None => break,
            }
        }
        let moved: u64 = taken.iter().map(|&s| weight(s)).sum();
        load[source] -= moved;
        load[target] += moved;
        moves.push(Move { source: source as u32, target: target as u32, slots: ranges(&taken) });
    }
    merge_neighbours(moves, batch as u32)
}

/// The ordinal with the least load (the lowest such ordinal on a tie).
fn least_loaded(load: &[u64]) -> usize {
    (0..load.len()).min_by_key(|&o| (load[o], o)).unwrap_or(0)
}

/// Takes up to `batch` slots worth at most `room` from the end of `from` (the highest slots, so
/// what stays is a prefix of what the node had), skipping slots too heavy to fit (`even`: every
/// slot weighs the same, so the first that does not fit ends the scan). `at_least_one`: take one
/// slot even when none fits (a drain must progress).
fn take(
    from: &mut Vec<u16>,
    batch: usize,
    room: u64,
    weight: impl Fn(u16) -> u64,
    even: bool,
    at_least_one: bool,
) -> Vec<u16> {
    let mut taken = Vec::new();
    let mut left = room;
    let mut i = from.len();
    while i > 0 && taken.len() < batch {
        i -= 1;
        let w = weight(from[i]);
        if w <= left {
            left -= w;
            taken.push(from.remove(i));
        } else if even {
            break;
        }
    }
    if taken.is_empty() && at_least_one && !from.is_empty() {
        taken.push(from.pop().expect("not empty"));
    }
    taken.sort_unstable();
    taken
}

/// Consecutive moves between the same two ordinals become one while it stays within `batch`.
fn merge_neighbours(moves: Vec<Move>, batch: u32) -> Vec<Move> {
    let mut out: Vec<Move> = Vec::with_capacity(moves.len());
    for m in moves {
        if let Some(last) = out.last_mut()
            && (last.source, last.target) == (m.source, m.target)
            && last.slot_count() + m.slot_count() <= batch
        {
            let mut slots: Vec<u16> = last.slots.iter().chain(&m.slots).flat_map(|r| r.first..=r.last).collect();
            slots.sort_unstable();
            last.slots = ranges(&slots);
            continue;
        }
        out.push(m);
    }
    out
}

/// Sorted slots as contiguous ranges.
pub fn ranges(slots: &[u16]) -> Vec<SlotRange> {
    let mut out: Vec<SlotRange> = Vec::new();
    for &s in slots {
        match out.last_mut() {
            Some(r) if u32::from(r.last) + 1 == u32::from(s) => r.last = s,
            _ => out.push(SlotRange { first: s, last: s }),
        }
    }
    out
}

/// `owners` after `moves` (the layout the plan leads to), over at least `width` ordinals.
pub fn apply(owners: &[Vec<SlotRange>], moves: &[Move], width: usize) -> Vec<Vec<SlotRange>> {
    let mut owner_of: Vec<Option<u32>> = vec![None; usize::from(SLOTS)];
    for (o, rs) in owners.iter().enumerate() {
        for r in rs {
            owner_of[usize::from(r.first)..=usize::from(r.last)].fill(Some(o as u32));
        }
    }
    for m in moves {
        for r in &m.slots {
            owner_of[usize::from(r.first)..=usize::from(r.last)].fill(Some(m.target));
        }
    }
    let width = width.max(owners.len()).max(moves.iter().map(|m| m.target as usize + 1).max().unwrap_or(0));
    let mut slots: Vec<Vec<u16>> = vec![Vec::new(); width];
    for (slot, owner) in owner_of.iter().enumerate() {
        if let Some(o) = owner {
            slots[*o as usize].push(slot as u16);
        }
    }
    slots.iter().map(|s| ranges(s)).collect()
}

/// Parses the topology wire form of slot ranges (`0-1023,2000`; `-` or empty: none).
pub fn parse_ranges(text: &str) -> Result<Vec<SlotRange>, String> {
    if text.is_empty() || text == "-" {
        return Ok(Vec::new());
    }
    text.split(',').map(super::parse_range).collect()
}

/// The wire form of slot ranges (`-` for none).
pub fn render_ranges(ranges: &[SlotRange]) -> String {
    if ranges.is_empty() {
        return "-".to_owned();
    }
    ranges.iter().map(ToString::to_string).collect::<Vec<_>>().join(",")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::spread;

    fn count(ranges: &[SlotRange]) -> u32 {
        ranges.iter().map(SlotRange::len).sum()
    }

    /// Checks what every plan must hold and returns the layout after it.
    fn check(owners: &[Vec<SlotRange>], shards: u32, weights: Option<&[u64]>, batch: u32) -> Vec<Vec<SlotRange>> {
        let moves = plan(owners, shards, weights, batch);
        let mut moved = vec![false; usize::from(SLOTS)];
        for m in &moves {
            assert!(m.slot_count() >= 1 && m.slot_count() <= batch, "{m:?}: batch {batch}");
            assert_ne!(m.source, m.target, "{m:?}");
            assert!(m.target < shards, "{m:?}: moves only into remaining ordinals");
            // The source owned every slot it gives when the plan was made.
            for r in &m.slots {
                for s in r.first..=r.last {
                    assert!(
                        owners[m.source as usize].iter().any(|o| o.first <= s && s <= o.last),
                        "{m:?}: slot {s} not owned by its source"
                    );
                    assert!(!std::mem::replace(&mut moved[usize::from(s)], true), "slot {s} moves twice");
                }
            }
        }
        // Independent moves: applying them in any order, or all at once, gives the same layout.
        let owned = apply(owners, &moves, shards as usize);
        // Every slot owned by exactly one ordinal.
        let mut seen = vec![0u8; usize::from(SLOTS)];
        for r in owned.iter().flatten() {
            for s in r.first..=r.last {
                seen[usize::from(s)] += 1;
            }
        }
        assert!(seen.iter().all(|&n| n == 1), "a slot lost or doubled");
        for (o, r) in owned.iter().enumerate().skip(shards as usize) {
            assert!(r.is_empty(), "ordinal {o} drained: {r:?}");
        }
        owned
    }

    /// A tiny deterministic generator: the properties run over many layouts without a crate.
    struct XorShift(u64);
    impl XorShift {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    /// A random layout: every slot owned by one of `width` ordinals, in runs.
    fn random_layout(rng: &mut XorShift, width: usize) -> Vec<Vec<SlotRange>> {
        let mut slots: Vec<Vec<u16>> = vec![Vec::new(); width];
        let mut s = 0u32;
        while s < u32::from(SLOTS) {
            let run = 1 + rng.below(3000) as u32;
            let owner = rng.below(width as u64) as usize;
            for x in s..(s + run).min(u32::from(SLOTS)) {
                slots[owner].push(x as u16);
            }
            s += run;
        }
        slots.iter().map(|s| ranges(s)).collect()
    }

    #[test]
    fn a_balanced_layout_yields_no_moves() {
        for n in [1, 2, 3, 5, 7, 16, 100] {
            assert!(plan(&spread(n), n as u32, None, DEFAULT_BATCH).is_empty(), "{n} shards");
        }
    }

    #[test]
    fn scaling_out_fills_the_new_ordinals_from_the_fullest_and_moves_the_fewest_slots() {
        let moves = plan(&spread(3), 4, None, DEFAULT_BATCH);
        let after = check(&spread(3), 4, None, DEFAULT_BATCH);
        let moved: u32 = moves.iter().map(Move::slot_count).sum();
        assert_eq!(moved, 4096, "exactly the new node's share moves: {moves:?}");
        assert!(moves.iter().all(|m| m.target == 3));
        let counts: Vec<u32> = after.iter().map(|r| count(r)).collect();
        assert_eq!(counts.iter().sum::<u32>(), 16384);
        assert!(counts.iter().max().unwrap() - counts.iter().min().unwrap() <= 1, "{counts:?}");
        // 3 -> 5: two new nodes, 2/5 of the slots move (6553 or 6554).
        let moved: u32 = plan(&spread(3), 5, None, DEFAULT_BATCH).iter().map(Move::slot_count).sum();
        assert!((6553..=6555).contains(&moved), "{moved}");
    }

    #[test]
    fn scaling_in_drains_the_highest_ordinals_first() {
        let moves = plan(&spread(5), 3, None, DEFAULT_BATCH);
        assert_eq!(moves[0].source, 4, "{moves:?}");
        let last_of_4 = moves.iter().rposition(|m| m.source == 4).unwrap();
        let first_of_3 = moves.iter().position(|m| m.source == 3).unwrap();
        assert!(last_of_4 < first_of_3, "ordinal 4 drained before 3 starts: {moves:?}");
        let after = check(&spread(5), 3, None, DEFAULT_BATCH);
        let counts: Vec<u32> = after.iter().take(3).map(|r| count(r)).collect();
        assert!(counts.iter().max().unwrap() - counts.iter().min().unwrap() <= 1, "{counts:?}");
        let moved: u32 = moves.iter().map(Move::slot_count).sum();
        assert_eq!(moved, count(&spread(5)[3]) + count(&spread(5)[4]), "only the drained slots move");
    }

    #[test]
    fn moves_are_bounded_batches() {
        let moves = plan(&spread(1), 2, None, 100);
        assert_eq!(moves.len(), 82, "8192 slots in batches of 100");
        assert!(moves.iter().all(|m| m.slot_count() <= 100));
        check(&spread(1), 2, None, 100);
    }

    #[test]
    fn weights_move_hot_slots_less() {
        // Two nodes; node 0's first half holds all the keys: node 1 should get its cold slots.
        let owners = vec![vec![SlotRange { first: 0, last: 16383 }], Vec::new()];
        let mut weights = vec![1u64; usize::from(SLOTS)];
        weights[..100].iter_mut().for_each(|w| *w = 1000);
        let after = check(&owners, 2, Some(&weights), 16384);
        let load =
            |r: &[SlotRange]| r.iter().flat_map(|r| r.first..=r.last).map(|s| weights[usize::from(s)]).sum::<u64>();
        let (a, b) = (load(&after[0]), load(&after[1]));
        assert!(a.abs_diff(b) <= 1000, "{a} vs {b}");
    }

    #[test]
    fn properties_hold_for_random_layouts() {
        let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
        for round in 0..300 {
            let width = 1 + rng.below(8) as usize;
            let shards = 1 + rng.below(8) as u32;
            let batch = [1u32, 7, 300, 1024, 16384][rng.below(5) as usize];
            let owners = random_layout(&mut rng, width);
            let weighted = round % 3 == 0;
            let weights: Vec<u64> = (0..SLOTS).map(|_| rng.below(50)).collect();
            let w = weighted.then_some(weights.as_slice());
            let after = check(&owners, shards, w, batch);
            let kept = &after[..shards as usize];
            let weight = |s: u16| if weighted { weights[usize::from(s)].max(1) } else { 1 };
            let loads: Vec<u64> =
                kept.iter().map(|r| r.iter().flat_map(|r| r.first..=r.last).map(weight).sum()).collect();
            let spread = loads.iter().max().unwrap() - loads.iter().min().unwrap();
            // Within one slot of even (a slot is never split); within two of the heaviest slots
            // for weights, since a slot only moves from the node that had it.
            let bound = if weighted { 2 * 50 } else { 1 };
            assert!(spread <= bound, "round {round}: {loads:?} (shards {shards}, width {width})");
            // Planning again from the result moves nothing when weights are even.
            if !weighted {
                assert!(plan(&after, shards, None, batch).is_empty(), "round {round}: not a fixed point");
            }
        }
    }

    #[test]
    fn ranges_round_trip() {
        let r = parse_ranges("0-5,7,9-10").unwrap();
        assert_eq!(render_ranges(&r), "0-5,7,9-10");
        assert_eq!(parse_ranges("-").unwrap(), []);
        assert_eq!(render_ranges(&[]), "-");
        assert!(parse_ranges("5-3").is_err());
        assert_eq!(ranges(&[1, 2, 3, 5]), [SlotRange { first: 1, last: 3 }, SlotRange { first: 5, last: 5 }]);
    }
}
