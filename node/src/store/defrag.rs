//! Active defragmentation's walk over the keyspace: one partition at a
//! time, under its lock, each entry's blocks move out of sparse allocator
//! slabs (see `Entry::defrag`). When and for how long is the memory
//! budget's decision (`crate::memory::defrag`).

use super::Keyspace;

/// What one partition's pass did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DefragPass {
    /// Blocks moved.
    pub hits: u64,
    /// Blocks looked at and left in place.
    pub misses: u64,
}

impl Keyspace {
    /// Defragments every entry of partition `idx`.
    pub fn defrag_partition(&self, idx: u32) -> DefragPass {
        let mut pass = DefragPass::default();
        let mut part = self.lock(idx);
        for db in part.dbs.iter_mut() {
            for (_, entry) in db.table.iter_mut() {
                let moved = entry.defrag() as u64;
                pass.hits += moved;
                pass.misses += 1 - moved;
            }
        }
        pass
    }
}
