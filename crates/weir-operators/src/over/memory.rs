//! What an OVER aggregation keeps in memory between checkpoint barriers: the rows that arrived
//! and wait for the watermark ([`PendingRows`]), and the partitions' histories it read or
//! changed ([`Histories`]).
//!
//! Keyed state stays the truth at every barrier: the operator writes the waiting rows and the
//! changed histories into it there (and whenever memory outgrows the operator's budget), so a
//! checkpoint holds them and a restore reads them back. Between barriers a row costs no state
//! write, read or removal, and a partition's history is read from state once, not once per
//! watermark.

use super::frame::History;
use std::collections::{BTreeMap, HashMap};
use std::hash::BuildHasherDefault;
use twox_hash::XxHash64;
use weir_api::state::ScannedEntry;
use weir_api::{Error, KeyedStateStore, Result, StateAddress, StateShardId};
use weir_state::timers::decode_timestamp;

/// A fast hash for partition keys (the job's data: a flood of colliding keys only slows the
/// operator that holds them, like any skewed key).
type KeyHasher = BuildHasherDefault<XxHash64>;

/// Bytes an entry costs besides its key and row (map slots, vector headers).
const ENTRY_OVERHEAD: usize = 64;

/// A row the watermark passed, from memory or from state: its time, partition key, encoded
/// row, and how many identical rows arrived.
pub(super) struct DueRow {
    pub(super) time: i64,
    pub(super) key: Vec<u8>,
    pub(super) row: Vec<u8>,
    pub(super) count: u32,
}

impl DueRow {
    /// The pending entry `entry` of state (namespace = time, sub-key = row, payload = count).
    pub(super) fn from_entry(entry: ScannedEntry) -> Result<Self> {
        let count = entry
            .payload
            .first_chunk::<4>()
            .map(|c| u32::from_le_bytes(*c))
            .ok_or_else(|| state_error("a pending row without its count"))?;
        Ok(Self {
            time: decode_timestamp(&entry.namespace).map_err(state_error)?,
            key: entry.key,
            row: entry.sub_key,
            count,
        })
    }
}

/// Sorts one shard's due rows into the order they are aggregated in: time, then partition key,
/// then the encoded row (so rows of one time are taken in an order that does not depend on
/// their arrival, nor on whether they waited in memory or in state).
pub(super) fn sort_due(rows: &mut [DueRow]) {
    rows.sort_unstable_by(|a, b| (a.time, &a.key, &a.row).cmp(&(b.time, &b.key, &b.row)));
}

/// One row waiting in memory.
pub(super) struct Arrived {
    pub(super) shard: u32,
    pub(super) key: Vec<u8>,
    pub(super) row: Vec<u8>,
}

/// The rows that arrived since the last flush and wait for the watermark, by time.
#[derive(Default)]
pub(super) struct PendingRows {
    by_time: BTreeMap<i64, Vec<Arrived>>,
    bytes: usize,
}

impl PendingRows {
    /// An estimate of the memory the rows take, in bytes.
    pub(super) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Keeps a row of time `time`.
    pub(super) fn push(&mut self, time: i64, row: Arrived) {
        self.bytes += row.key.len() + row.row.len() + ENTRY_OVERHEAD;
        self.by_time.entry(time).or_default().push(row);
    }

    /// Takes the rows at or behind `watermark`, by shard.
    pub(super) fn take_through(&mut self, watermark: i64) -> BTreeMap<u32, Vec<DueRow>> {
        let kept = match watermark.checked_add(1) {
            Some(after) => self.by_time.split_off(&after),
            None => BTreeMap::new(),
        };
        let due = std::mem::replace(&mut self.by_time, kept);
        let mut by_shard: BTreeMap<u32, Vec<DueRow>> = BTreeMap::new();
        for (time, rows) in due {
            for w in rows {
                self.bytes = self
                    .bytes
                    .saturating_sub(w.key.len() + w.row.len() + ENTRY_OVERHEAD);
                by_shard.entry(w.shard).or_default().push(DueRow {
                    time,
                    key: w.key,
                    row: w.row,
                    count: 1,
                });
            }
        }
        if self.by_time.is_empty() {
            self.bytes = 0;
        }
        by_shard
    }

    /// Takes every row, with its time.
    pub(super) fn drain(&mut self) -> impl Iterator<Item = (i64, Arrived)> {
        self.bytes = 0;
        std::mem::take(&mut self.by_time)
            .into_iter()
            .flat_map(|(time, rows)| rows.into_iter().map(move |w| (time, w)))
    }
}

/// A partition's history in memory.
struct Cached {
    shard: u32,
    history: History,
    /// Whether it changed since it was read or last written.
    dirty: bool,
    /// [`size_of`] when last counted.
    bytes: usize,
}

/// The histories of the partitions the operator read since the cache was last emptied.
pub(super) struct Histories {
    /// The keyed state's value state of the histories.
    state: &'static str,
    map: HashMap<Vec<u8>, Cached, KeyHasher>,
    bytes: usize,
}

impl Histories {
    /// An empty cache of the histories in value state `state`.
    pub(super) fn new(state: &'static str) -> Self {
        Self {
            state,
            map: HashMap::default(),
            bytes: 0,
        }
    }

    /// An estimate of the memory the cached histories take, in bytes.
    pub(super) fn bytes(&self) -> usize {
        self.bytes
    }

    /// The history of partition `key` (in `shard`), read from `store` if not cached (`empty`
    /// when there is none); marked as changed.
    pub(super) fn get_mut(
        &mut self,
        store: &mut dyn KeyedStateStore,
        shard: StateShardId,
        key: &[u8],
        empty: impl FnOnce() -> History,
        decode: impl FnOnce(&[u8]) -> Result<History>,
    ) -> Result<&mut History> {
        if !self.map.contains_key(key) {
            let address = StateAddress {
                shard,
                namespace: &[],
                key,
            };
            let history = match store.get_at(self.state, address, &[])? {
                Some(bytes) => decode(&bytes)?,
                None => empty(),
            };
            let bytes = size_of(key, &history);
            self.bytes += bytes;
            self.map.insert(
                key.to_vec(),
                Cached {
                    shard: shard.0,
                    history,
                    dirty: false,
                    bytes,
                },
            );
        }
        let Some(cached) = self.map.get_mut(key) else {
            return Err(state_error("a cached history vanished"));
        };
        cached.dirty = true;
        Ok(&mut cached.history)
    }

    /// Counts the size of partition `key`'s history again, after it changed.
    pub(super) fn recount(&mut self, key: &[u8]) {
        if let Some(cached) = self.map.get_mut(key) {
            let bytes = size_of(key, &cached.history);
            self.bytes = self.bytes.saturating_sub(cached.bytes) + bytes;
            cached.bytes = bytes;
        }
    }

    /// Writes the changed histories into `store`; they stay cached, unchanged.
    pub(super) fn write(&mut self, store: &mut dyn KeyedStateStore) -> Result<()> {
        for (key, cached) in self.map.iter_mut().filter(|(_, c)| c.dirty) {
            let address = StateAddress {
                shard: StateShardId(cached.shard),
                namespace: &[],
                key,
            };
            store.put_at(self.state, address, &[], &cached.history.encode())?;
            cached.dirty = false;
        }
        Ok(())
    }

    /// Writes the changed histories into `store` and empties the cache.
    pub(super) fn write_and_clear(&mut self, store: &mut dyn KeyedStateStore) -> Result<()> {
        self.write(store)?;
        self.map.clear();
        self.bytes = 0;
        Ok(())
    }
}

/// An estimate of the memory a cached history takes.
fn size_of(key: &[u8], history: &History) -> usize {
    let rows = match history {
        History::Rows(rows) => rows
            .iter()
            .map(|(_, values)| 8 + 24 + values.len() * 16)
            .sum(),
        History::Running(accs) => accs.len() * 48,
    };
    key.len() + ENTRY_OVERHEAD + rows
}

/// An error of the OVER aggregation's state (a corrupt entry, a lost cache line).
pub(super) fn state_error(e: impl std::fmt::Display) -> Error {
    Error::Internal(format!("over aggregation state: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arrived(shard: u32, key: &[u8], row: &[u8]) -> Arrived {
        Arrived {
            shard,
            key: key.to_vec(),
            row: row.to_vec(),
        }
    }

    #[test]
    fn rows_are_taken_through_the_watermark_by_shard_and_the_rest_stays() {
        let mut p = PendingRows::default();
        p.push(30, arrived(1, b"a", b"r3"));
        p.push(10, arrived(1, b"a", b"r1"));
        p.push(20, arrived(2, b"b", b"r2"));
        p.push(10, arrived(2, b"b", b"r0"));
        assert!(p.bytes() > 0);
        let due = p.take_through(20);
        let times = |rows: &[DueRow]| rows.iter().map(|r| r.time).collect::<Vec<_>>();
        assert_eq!(due.keys().copied().collect::<Vec<_>>(), vec![1, 2]);
        assert_eq!(times(&due[&1]), vec![10]);
        assert_eq!(times(&due[&2]), vec![10, 20]);
        assert!(due.values().flatten().all(|r| r.count == 1));
        let rest: Vec<(i64, Vec<u8>)> = p.drain().map(|(t, a)| (t, a.row)).collect();
        assert_eq!(rest, vec![(30, b"r3".to_vec())]);
        assert_eq!(p.bytes(), 0);
        p.push(i64::MAX, arrived(0, b"", b"x"));
        assert_eq!(
            p.take_through(i64::MAX).len(),
            1,
            "the final watermark takes all"
        );
    }

    #[test]
    fn due_rows_sort_by_time_key_and_row_whatever_their_arrival() {
        let row = |time: i64, key: &[u8], row: &[u8]| DueRow {
            time,
            key: key.to_vec(),
            row: row.to_vec(),
            count: 1,
        };
        let mut rows = vec![
            row(5, b"b", b"1"),
            row(5, b"a", b"2"),
            row(4, b"z", b"9"),
            row(5, b"a", b"1"),
        ];
        sort_due(&mut rows);
        let order: Vec<(i64, &[u8], &[u8])> = rows
            .iter()
            .map(|r| (r.time, r.key.as_slice(), r.row.as_slice()))
            .collect();
        assert_eq!(
            order,
            vec![
                (4, &b"z"[..], &b"9"[..]),
                (5, b"a", b"1"),
                (5, b"a", b"2"),
                (5, b"b", b"1")
            ]
        );
    }
}
