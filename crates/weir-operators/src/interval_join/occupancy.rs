//! Which (side, key, time bucket) of an interval join may hold rows, kept in memory so that a
//! probe of the other side and the lookup of an arriving row's count skip the keyed state where
//! nothing is stored: most probes find nothing (a key's rows are sparse next to the interval),
//! and each state read is a B-tree descent in redb.
//!
//! It is a counting filter: a fixed array of counters, each the number of stored rows whose
//! (side, key, bucket) hashes to it. A zero means no such row is stored; a collision only costs
//! a read that finds nothing. Its size does not grow with the state.

use twox_hash::XxHash64;

/// Counters per filter: 4 MiB of `u32`s.
const SLOTS: usize = 1 << 20;

/// The counting filter of one interval join instance.
pub(super) struct Occupancy {
    counts: Vec<u32>,
}

impl Occupancy {
    /// An empty filter: no row is stored.
    pub(super) fn new() -> Self {
        Self {
            counts: vec![0; SLOTS],
        }
    }

    /// The counter of (side, key, bucket): xxHash64 of the key, seeded with the bucket and the
    /// side (a hash per probe, so a fast one).
    fn slot(side: usize, key: &[u8], bucket: i64) -> usize {
        let seed = (bucket as u64).rotate_left(1) ^ side as u64;
        (XxHash64::oneshot(seed, key) as usize) & (SLOTS - 1)
    }

    /// Whether rows of `side` with `key` in `bucket` may be stored.
    pub(super) fn may_hold(&self, side: usize, key: &[u8], bucket: i64) -> bool {
        self.counts[Self::slot(side, key, bucket)] > 0
    }

    /// `rows` rows of `side` with `key` in `bucket` were stored.
    pub(super) fn add(&mut self, side: usize, key: &[u8], bucket: i64, rows: u32) {
        let count = &mut self.counts[Self::slot(side, key, bucket)];
        *count = count.saturating_add(rows);
    }

    /// `rows` such rows were removed.
    pub(super) fn remove(&mut self, side: usize, key: &[u8], bucket: i64, rows: u32) {
        let count = &mut self.counts[Self::slot(side, key, bucket)];
        // A saturated counter stays: it may still count rows that are stored.
        if *count != u32::MAX {
            *count = count.saturating_sub(rows);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_row_is_seen_until_removed_and_sides_keys_and_buckets_are_apart() {
        let mut o = Occupancy::new();
        assert!(!o.may_hold(0, b"k", 7));
        o.add(0, b"k", 7, 2);
        assert!(o.may_hold(0, b"k", 7));
        o.remove(0, b"k", 7, 1);
        assert!(o.may_hold(0, b"k", 7), "one row is left");
        o.remove(0, b"k", 7, 1);
        assert!(!o.may_hold(0, b"k", 7));
        o.add(1, b"k", 7, 1);
        // Other sides, keys and buckets read zero unless they collide (not these).
        assert!(!o.may_hold(0, b"k", 7) && !o.may_hold(1, b"j", 7) && !o.may_hold(1, b"k", 8));
    }
}
