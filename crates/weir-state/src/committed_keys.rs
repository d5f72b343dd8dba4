//! Which keys redb may hold: a Bloom filter over the key prefixes (an entry key before its
//! sub-key) of the entries written to redb, so that a lookup of an entry only the journal has
//! seen skips redb's B-tree.
//!
//! Most rows of an event-time operator are stored and removed between two journal writes
//! ([`crate::journal`]): they never reach redb, yet each removal asks redb whether it holds the
//! entry (to stage a delete or nothing), and each probe of a key's entries reads redb's range.
//! The filter answers "certainly not" for those. Every insert into the entries table adds its
//! key prefix; removals leave the filter as it is (a stale bit only costs a lookup that finds
//! nothing). When more prefixes were added than the filter is sized for, it is rebuilt from the
//! table with room for twice as many, so a rebuild's cost is spread over at least as many adds.
//! When that would take more than [`MAX_BITS`] it stops filtering (every key may be held).

use twox_hash::XxHash64;

/// Bits per key prefix the filter is sized for: with two probes, about 1.4% false positives
/// when full, fewer before.
const BITS_PER_PREFIX: usize = 16;
/// The smallest filter: 128 KiB.
const MIN_BITS: usize = 1 << 20;
/// The largest filter: 64 MiB. A rebuild sizes the filter at twice the prefixes redb holds,
/// so past about 16 million of them it stops filtering.
const MAX_BITS: usize = 1 << 29;

/// A Bloom filter of the key prefixes redb may hold.
#[derive(Debug)]
pub(crate) struct CommittedKeys {
    /// `None`: too many prefixes to filter; every key may be held.
    bits: Option<Vec<u64>>,
    /// Prefixes added since the last rebuild that were not already present.
    added: usize,
}

impl CommittedKeys {
    /// The filter of an empty table.
    pub(crate) fn new() -> Self {
        Self::with_bits(MIN_BITS)
    }

    fn with_bits(bits: usize) -> Self {
        Self {
            bits: Some(vec![0; bits / 64]),
            added: 0,
        }
    }

    /// The two bit positions of a prefix's hash in a filter of `len` bits (a power of two).
    fn positions(hash: u64, len: usize) -> [usize; 2] {
        let mask = len - 1;
        [(hash as usize) & mask, ((hash >> 32) as usize) & mask]
    }

    fn hash(prefix: &[u8]) -> u64 {
        XxHash64::oneshot(0x5745_4952, prefix)
    }

    /// Whether redb may hold entries whose key prefix is `prefix`.
    pub(crate) fn may_hold(&self, prefix: &[u8]) -> bool {
        let Some(bits) = &self.bits else {
            return true;
        };
        Self::positions(Self::hash(prefix), bits.len() * 64)
            .iter()
            .all(|&p| bits[p / 64] & (1 << (p % 64)) != 0)
    }

    /// Whether redb may hold the entry with key `entry_key` (true for a key that does not
    /// follow the layout).
    pub(crate) fn may_hold_entry(&self, entry_key: &[u8]) -> bool {
        crate::layout::key_prefix_of(entry_key).is_none_or(|prefix| self.may_hold(prefix))
    }

    /// Records that redb holds an entry with key `entry_key`.
    pub(crate) fn add_entry(&mut self, entry_key: &[u8]) {
        match crate::layout::key_prefix_of(entry_key) {
            Some(prefix) => self.add_hash(Self::hash(prefix)),
            // Not a layout key: no prefix can be told apart from it any more.
            None => self.bits = None,
        }
    }

    fn add_hash(&mut self, hash: u64) {
        let Some(bits) = &mut self.bits else {
            return;
        };
        let mut new = false;
        for p in Self::positions(hash, bits.len() * 64) {
            let word = &mut bits[p / 64];
            new |= *word & (1 << (p % 64)) == 0;
            *word |= 1 << (p % 64);
        }
        if new {
            self.added += 1;
        }
    }

    /// Whether more prefixes were added than the filter is sized for: time to
    /// [`rebuild`](Self::rebuild) it from the table.
    pub(crate) fn is_full(&self) -> bool {
        self.bits
            .as_ref()
            .is_some_and(|bits| self.added * BITS_PER_PREFIX > bits.len() * 64)
    }

    /// Starts the filter of a table: feed it the table's entry keys with
    /// [`Rebuild::add`] in key order (as redb yields them), then [`Rebuild::finish`].
    pub(crate) fn rebuild() -> Rebuild {
        Rebuild {
            hashes: Vec::new(),
            gave_up: false,
        }
    }
}

/// A filter being rebuilt from a table: the hashes of its distinct key prefixes, 8 bytes
/// each, never the keys themselves, and no more of them than [`MAX_BITS`] can filter.
pub(crate) struct Rebuild {
    hashes: Vec<u64>,
    /// A key outside the layout, or too many prefixes: the filter will not filter.
    gave_up: bool,
}

impl Rebuild {
    /// The next entry key of the table.
    pub(crate) fn add(&mut self, entry_key: &[u8]) {
        if self.gave_up {
            return;
        }
        let Some(prefix) = crate::layout::key_prefix_of(entry_key) else {
            self.give_up();
            return;
        };
        // Entries of one key are adjacent: each prefix is counted once.
        let hash = CommittedKeys::hash(prefix);
        if self.hashes.last() != Some(&hash) {
            self.hashes.push(hash);
            if self.hashes.len() * 2 * BITS_PER_PREFIX > MAX_BITS {
                self.give_up();
            }
        }
    }

    fn give_up(&mut self) {
        self.gave_up = true;
        self.hashes = Vec::new();
    }

    /// The filter, with room for as many prefixes again as the table holds.
    pub(crate) fn finish(self) -> CommittedKeys {
        if self.gave_up {
            return CommittedKeys {
                bits: None,
                added: 0,
            };
        }
        let wanted = self.hashes.len() * 2 * BITS_PER_PREFIX;
        let mut filter = CommittedKeys::with_bits(wanted.next_power_of_two().max(MIN_BITS));
        for hash in self.hashes {
            filter.add_hash(hash);
        }
        filter
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::EntryKey;
    use weir_api::StateShardId;

    fn entry(key: &[u8], sub_key: &[u8]) -> Vec<u8> {
        EntryKey {
            job: "job",
            operator: "op",
            shard: StateShardId(3),
            state: "s",
            namespace: b"ns",
            key,
            sub_key,
        }
        .encode()
    }

    #[test]
    fn an_added_key_is_held_with_every_sub_key_and_others_mostly_not() {
        let mut filter = CommittedKeys::new();
        filter.add_entry(&entry(b"k1", b"a"));
        assert!(filter.may_hold_entry(&entry(b"k1", b"a")));
        assert!(filter.may_hold_entry(&entry(b"k1", b"other sub-key")));
        let prefix = crate::layout::key_prefix_of(&entry(b"k1", b"a")).map(<[u8]>::to_vec);
        assert_eq!(
            prefix.as_deref(),
            crate::layout::key_prefix_of(&entry(b"k1", b""))
        );
        let held = (0..10_000)
            .filter(|i| filter.may_hold_entry(&entry(format!("x{i}").as_bytes(), b"a")))
            .count();
        assert!(held < 10, "{held} of 10,000 absent keys reported as held");
    }

    #[test]
    fn a_key_outside_the_layout_may_always_be_held() {
        let mut filter = CommittedKeys::new();
        assert!(filter.may_hold_entry(b"\x00\x00\x00\x09short"));
        filter.add_entry(b"not a layout key");
        assert!(filter.may_hold_entry(&entry(b"never added", b"")));
    }

    #[test]
    fn it_fills_and_a_rebuild_keeps_every_key_of_the_table() {
        let mut filter = CommittedKeys::new();
        let keys: Vec<Vec<u8>> = (0..70_000)
            .map(|i| entry(format!("{i:08}").as_bytes(), b"s"))
            .collect();
        for key in &keys {
            filter.add_entry(key);
        }
        assert!(filter.is_full());
        let mut rebuild = CommittedKeys::rebuild();
        for key in &keys {
            rebuild.add(key);
        }
        let rebuilt = rebuild.finish();
        assert!(!rebuilt.is_full());
        assert!(keys.iter().all(|k| rebuilt.may_hold_entry(k)));
    }
}
