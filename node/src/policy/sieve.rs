//! SIEVE (Zhang et al., NSDI 2024): a FIFO queue with a "visited" bit and a
//! hand that moves from old to new, sparing visited entries (clearing the
//! bit) and stopping at the first unvisited one. Hits only set a bit, so
//! reads never reorder the queue. The links live in `EntryState`; this
//! struct holds the queue ends and the hand.

use super::lfu::{SplitMix, touch};
use super::{Clock, Entries, NONE, Policy};

/// `EntryState::flags` bit: accessed since the hand last passed.
pub const VISITED: u8 = 1;

pub struct Sieve {
    /// Newest entry.
    head: u32,
    /// Oldest entry.
    tail: u32,
    /// Where the next search starts (NONE = at the tail). It rests on the
    /// last candidate, so a candidate another partition beat stays first in line.
    hand: u32,
    /// Coin for LFU increments (OBJECT FREQ is kept under every policy).
    coin: SplitMix,
}

impl Sieve {
    pub fn new(coin: SplitMix) -> Self {
        Sieve { head: NONE, tail: NONE, hand: NONE, coin }
    }

    fn push_head<E: Entries>(&mut self, e: &mut E, slot: u32) {
        let old_head = self.head;
        let s = e.state_mut(slot);
        (s.flags, s.prev, s.next) = (s.flags & !VISITED, NONE, old_head);
        if old_head != NONE {
            e.state_mut(old_head).prev = slot;
        } else {
            self.tail = slot;
        }
        self.head = slot;
    }
}

impl Policy for Sieve {
    fn on_insert<E: Entries>(&mut self, e: &mut E, slot: u32, _clock: &Clock) {
        self.push_head(e, slot);
    }

    #[inline]
    fn on_access<E: Entries>(&mut self, e: &mut E, slot: u32, clock: &Clock) {
        let s = e.state_mut(slot);
        touch(s, clock, self.coin.next_u64());
        s.flags |= VISITED;
    }

    fn on_remove<E: Entries>(&mut self, e: &mut E, slot: u32) {
        let s = *e.state(slot);
        if s.prev != NONE {
            e.state_mut(s.prev).next = s.next;
        } else {
            self.head = s.next;
        }
        if s.next != NONE {
            e.state_mut(s.next).prev = s.prev;
        } else {
            self.tail = s.prev;
        }
        // The hand goes on toward the head from where the victim was.
        if self.hand == slot {
            self.hand = s.prev;
        }
        let s = e.state_mut(slot);
        (s.prev, s.next) = (NONE, NONE);
    }

    fn candidate<E: Entries>(
        &mut self,
        e: &mut E,
        _samples: usize,
        _clock: &Clock,
        _rand: &mut dyn FnMut() -> u64,
    ) -> Option<(u64, u32)> {
        if self.tail == NONE {
            return None;
        }
        let mut hand = if self.hand == NONE { self.tail } else { self.hand };
        // One full lap clears every bit, so len + 1 steps always find one; the
        // bound only guards against a corrupted queue.
        for _ in 0..=e.len() {
            if hand == NONE {
                hand = self.tail;
            }
            let s = e.state_mut(hand);
            if s.flags & VISITED == 0 {
                break;
            }
            s.flags &= !VISITED;
            hand = s.prev;
        }
        if hand == NONE {
            hand = self.tail;
        }
        self.hand = hand;
        // Across partitions the oldest candidate goes first.
        Some((e.state(hand).last_access as u64, hand))
    }

    fn first_look<E: Entries>(&self, _e: &E, _rand: u64) -> Option<u32> {
        // The search starts at the hand.
        Some(if self.hand == NONE { self.tail } else { self.hand }).filter(|&s| s != NONE)
    }

    fn rebuild<E: Entries>(&mut self, e: &mut E, live: &mut dyn Iterator<Item = u32>, _clock: &Clock) {
        (self.head, self.tail, self.hand) = (NONE, NONE, NONE);
        // Oldest access at the tail, so the queue approximates insertion order.
        let mut slots: Vec<u32> = live.collect();
        slots.sort_by_key(|&slot| e.state(slot).last_access);
        for slot in slots {
            e.state_mut(slot).flags &= !VISITED;
            self.push_head(e, slot);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::sim::SimTable;
    use super::super::{AnyPolicy, PolicyKind};
    use super::*;

    fn evict_n(t: &mut SimTable, p: &mut AnyPolicy, n: usize) -> Vec<u64> {
        let clock = Clock::at(100);
        (0..n)
            .map(|_| {
                let (_, slot) = p.candidate(t, 5, &clock, &mut || 0).expect("a victim");
                t.remove(slot, p)
            })
            .collect()
    }

    #[test]
    fn sieve_spares_visited_keys_and_evicts_in_fifo_order() {
        let mut p = AnyPolicy::new(PolicyKind::Sieve);
        let mut t = SimTable::default();
        let slots: Vec<u32> = (0..10).map(|id| t.insert(id, 1, 0, &mut p, &Clock::at(id as u32))).collect();
        for id in [0, 2, 4] {
            p.on_access(&mut t, slots[id], &Clock::at(50));
        }
        assert_eq!(evict_n(&mut t, &mut p, 7), [1, 3, 5, 6, 7, 8, 9]);
        // Bits were cleared on the way: the survivors go next, oldest first.
        assert_eq!(evict_n(&mut t, &mut p, 3), [0, 2, 4]);
        assert_eq!(p.candidate(&mut t, 5, &Clock::at(100), &mut || 0), None, "empty");
    }

    #[test]
    fn the_hand_rests_on_a_candidate_that_was_not_evicted() {
        let mut p = AnyPolicy::new(PolicyKind::Sieve);
        let mut t = SimTable::default();
        let slots: Vec<u32> = (0..4).map(|id| t.insert(id, 1, 0, &mut p, &Clock::at(id as u32))).collect();
        p.on_access(&mut t, slots[0], &Clock::at(10));
        let clock = Clock::at(10);
        // Another partition's candidate wins: asking again gives the same one.
        assert_eq!(p.candidate(&mut t, 5, &clock, &mut || 0), Some((1, slots[1])));
        assert_eq!(p.candidate(&mut t, 5, &clock, &mut || 0), Some((1, slots[1])));
        // A new entry goes to the head; the hand goes on toward it before
        // wrapping to the tail (0, spared once, is oldest but goes last).
        t.insert(9, 1, 0, &mut p, &clock);
        assert_eq!(evict_n(&mut t, &mut p, 5), [1, 2, 3, 9, 0]);
    }

    #[test]
    fn removing_keys_keeps_the_queue_linked() {
        let mut p = AnyPolicy::new(PolicyKind::Sieve);
        let mut t = SimTable::default();
        let slots: Vec<u32> = (0..5).map(|id| t.insert(id, 1, 0, &mut p, &Clock::at(0))).collect();
        // Deletes by the client: head, tail and the middle.
        for id in [4, 0, 2] {
            assert_eq!(t.remove(slots[id], &mut p), id as u64);
        }
        assert_eq!(evict_n(&mut t, &mut p, 2), [1, 3]);
    }
}
