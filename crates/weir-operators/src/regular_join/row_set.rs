//! The held rows of one key of one side: their bytes side by side in one buffer, a count per
//! row, and an index by bytes only on a side whose rows can be retracted.
//!
//! An insert-only side never looks a row up (nothing retracts it), so its rows are appended:
//! an arriving row costs a copy of its bytes, not a hash and a probe, and copies of one row may
//! be held apart (their counts add up; [`RowSet::merge`] folds them together when they are
//! written to keyed state). An updating side's rows are distinct, found through the index.

use hashbrown::HashTable;
use std::hash::BuildHasher;
use weir_api::{Error, Result};

/// A fast hash of short byte strings, with a fixed seed so that a run's order of pairs repeats
/// (the rows come from the job's data, but a flood of colliding rows only slows the one
/// operator that holds them, like any skewed key).
pub(super) type RowHasher = foldhash::fast::FixedState;

/// A distinct row of one side: its copies and how many rows of the other side it matches
/// (kept on a padded side only).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Count {
    pub(super) copies: i64,
    pub(super) matches: i64,
}

impl Count {
    pub(super) fn decode(payload: &[u8]) -> Result<Self> {
        let bytes: [u8; 16] = payload
            .try_into()
            .map_err(|_| Error::Internal("regular join state: a corrupt row count".into()))?;
        let (copies, matches) = bytes.split_at(8);
        Ok(Self {
            copies: i64::from_le_bytes(copies.try_into().unwrap_or_default()),
            matches: i64::from_le_bytes(matches.try_into().unwrap_or_default()),
        })
    }

    pub(super) fn encode(self) -> [u8; 16] {
        let mut out = [0_u8; 16];
        out[..8].copy_from_slice(&self.copies.to_le_bytes());
        out[8..].copy_from_slice(&self.matches.to_le_bytes());
        out
    }
}

/// A held row's count, and whether keyed state has yet to see it.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Entry {
    pub(super) count: Count,
    pub(super) dirty: bool,
}

/// Rows in arrival order: row `i` is `bytes[ends[i - 1]..ends[i]]` with `entries[i]`.
#[derive(Debug)]
pub(super) struct RowSet {
    bytes: Vec<u8>,
    ends: Vec<usize>,
    entries: Vec<Entry>,
    /// The position of every row by its bytes (rows are then distinct); `None` on an
    /// insert-only side.
    index: Option<HashTable<usize>>,
}

impl RowSet {
    /// An empty set, with an index by bytes when `indexed`.
    pub(super) fn new(indexed: bool) -> Self {
        Self {
            bytes: Vec::new(),
            ends: Vec::new(),
            entries: Vec::new(),
            index: indexed.then(HashTable::new),
        }
    }

    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub(super) fn is_indexed(&self) -> bool {
        self.index.is_some()
    }

    /// The bytes of row `i`.
    pub(super) fn row(&self, i: usize) -> &[u8] {
        row_at(&self.bytes, &self.ends, i)
    }

    pub(super) fn entry(&self, i: usize) -> &Entry {
        &self.entries[i]
    }

    pub(super) fn entry_mut(&mut self, i: usize) -> &mut Entry {
        &mut self.entries[i]
    }

    /// Every row with its position and entry, in arrival order.
    pub(super) fn iter(&self) -> impl Iterator<Item = (usize, &[u8], &Entry)> {
        self.entries
            .iter()
            .enumerate()
            .map(|(i, e)| (i, row_at(&self.bytes, &self.ends, i), e))
    }

    /// The position of `row`, through the index (`None` without one, or when it is not held).
    pub(super) fn find(&self, row: &[u8]) -> Option<usize> {
        let index = self.index.as_ref()?;
        index.find(hash(row), |&i| self.row(i) == row).copied()
    }

    /// Adds `row` with `entry` at the end and returns its position. On an indexed set the row
    /// must not be held yet ([`RowSet::find`]).
    pub(super) fn push(&mut self, row: &[u8], entry: Entry) -> usize {
        let Self {
            bytes,
            ends,
            entries,
            index,
        } = self;
        bytes.extend_from_slice(row);
        ends.push(bytes.len());
        entries.push(entry);
        let at = entries.len() - 1;
        if let Some(index) = index {
            index.insert_unique(hash(row), at, |&i| hash(row_at(bytes, ends, i)));
        }
        at
    }

    /// Keeps the rows `keep` says yes to, in order (the index rebuilt); returns how many bytes
    /// of rows were dropped.
    pub(super) fn retain(&mut self, mut keep: impl FnMut(&[u8], &Entry) -> bool) -> usize {
        let mut kept = RowSet::new(self.is_indexed());
        let mut dropped = 0;
        for (_, row, entry) in self.iter() {
            if keep(row, entry) {
                kept.push(row, *entry);
            } else {
                dropped += row.len();
            }
        }
        if kept.len() < self.len() {
            *self = kept;
        }
        dropped
    }

    /// Folds the copies of each row held apart (on an insert-only side) into one entry, in
    /// order of first arrival; returns each distinct row's position, count, whether any of its
    /// copies is dirty and whether any is clean (a clean entry's count is what keyed state
    /// holds for the row, so it includes every copy written before).
    pub(super) fn merge(&self) -> Vec<Merged> {
        let mut positions: HashTable<usize> = HashTable::with_capacity(self.len());
        let mut merged: Vec<Merged> = Vec::new();
        for (i, row, entry) in self.iter() {
            let h = hash(row);
            let slot = positions
                .find(h, |&m| self.row(merged[m].at) == row)
                .copied();
            let m = match slot {
                Some(m) => m,
                None => {
                    positions.insert_unique(h, merged.len(), |&m| hash(self.row(merged[m].at)));
                    merged.push(Merged {
                        at: i,
                        count: Count::default(),
                        dirty: false,
                        clean: false,
                    });
                    merged.len() - 1
                }
            };
            let into = &mut merged[m];
            into.count.copies += entry.count.copies;
            // Every copy of a row matches the same rows of the other side.
            into.count.matches = entry.count.matches;
            into.dirty |= entry.dirty;
            into.clean |= !entry.dirty;
        }
        merged
    }
}

/// One distinct row of [`RowSet::merge`].
#[derive(Debug)]
pub(super) struct Merged {
    /// The position of its first copy.
    pub(super) at: usize,
    pub(super) count: Count,
    pub(super) dirty: bool,
    pub(super) clean: bool,
}

fn row_at<'a>(bytes: &'a [u8], ends: &[usize], i: usize) -> &'a [u8] {
    let start = if i == 0 { 0 } else { ends[i - 1] };
    &bytes[start..ends[i]]
}

fn hash(row: &[u8]) -> u64 {
    RowHasher::default().hash_one(row)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(copies: i64, dirty: bool) -> Entry {
        Entry {
            count: Count { copies, matches: 0 },
            dirty,
        }
    }

    #[test]
    fn an_indexed_set_finds_its_rows_and_keeps_them_after_retain() {
        let mut set = RowSet::new(true);
        for (i, row) in [b"a".as_slice(), b"bb", b"ccc", b"dddd"].iter().enumerate() {
            assert_eq!(set.find(row), None);
            assert_eq!(set.push(row, entry(i as i64, true)), i);
        }
        assert_eq!(set.find(b"ccc"), Some(2));
        assert_eq!(set.row(3), b"dddd");
        let dropped = set.retain(|_, e| e.count.copies % 2 == 1);
        assert_eq!(dropped, 1 + 3);
        let rows: Vec<&[u8]> = set.iter().map(|(_, r, _)| r).collect();
        assert_eq!(rows, [b"bb".as_slice(), b"dddd"]);
        assert_eq!(set.find(b"dddd"), Some(1));
        assert_eq!(set.find(b"a"), None);
    }

    #[test]
    fn an_appended_set_holds_copies_apart_and_merge_adds_them_up() {
        let mut set = RowSet::new(false);
        set.push(b"x", entry(2, false));
        set.push(b"y", entry(1, true));
        set.push(b"x", entry(1, true));
        set.push(b"x", entry(1, true));
        assert_eq!(set.find(b"x"), None, "no index on an insert-only side");
        assert_eq!(set.len(), 4);
        let merged: Vec<(&[u8], i64, bool, bool)> = set
            .merge()
            .iter()
            .map(|m| (set.row(m.at), m.count.copies, m.dirty, m.clean))
            .collect();
        assert_eq!(
            merged,
            [
                (b"x".as_slice(), 4, true, true),
                (b"y".as_slice(), 1, true, false)
            ]
        );
    }
}
