//! What an OVER aggregation keeps in memory between checkpoint barriers besides the rows that
//! wait for the watermark ([`crate::pending_rows::PendingRows`]): the partitions' histories it
//! read or changed ([`Histories`]).
//!
//! Keyed state stays the truth at every barrier: the operator writes the waiting rows and the
//! changed histories into it there (and whenever memory outgrows the operator's budget), so a
//! checkpoint holds them and a restore reads them back. Between barriers a row costs no state
//! write, read or removal, and a partition's history is read from state once, not once per
//! watermark.

use super::frame::History;
use crate::pending_rows::DueRow;
use std::collections::HashMap;
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

/// The pending entry `entry` of state (namespace = time, sub-key = row, payload = count) as
/// a due row.
pub(super) fn due_row(entry: ScannedEntry) -> Result<DueRow> {
    let count = entry
        .payload
        .first_chunk::<4>()
        .map(|c| u32::from_le_bytes(*c))
        .ok_or_else(|| state_error("a pending row without its count"))?;
    Ok(DueRow {
        time: decode_timestamp(&entry.namespace).map_err(state_error)?,
        key: entry.key,
        row: entry.sub_key,
        count,
    })
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
