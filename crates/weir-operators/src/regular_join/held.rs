//! The rows a running `regular_join` holds in memory, and when they reach keyed state.
//!
//! Both sides' rows are held per key with their counts. A change is made in
//! memory and marked dirty; dirty rows are written to keyed state at every checkpoint barrier,
//! and when the held rows outgrow the operator's budget they are written and all released. A
//! key not held is read from keyed state: one row at a time where only that row is needed (the
//! side a row arrives on), all its rows where they are all needed (the other side).
//!
//! Reads are skipped altogether for a state shard whose state is known to be held whole: a
//! shard found empty in keyed state when first touched stays so until rows are released.

use super::ROWS;
use hashbrown::hash_map::{Entry as MapEntry, EntryRef};
use std::collections::HashMap as StdHashMap;
use weir_api::state::NamespaceRange;
use weir_api::{Error, KeyedStateStore, Result, StateShardId};

/// A distinct row of one side: its copies and how many rows of the other side it matches
/// (kept on a padded side only).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Count {
    pub(super) copies: i64,
    pub(super) matches: i64,
}

impl Count {
    fn decode(payload: &[u8]) -> Result<Self> {
        let bytes: [u8; 16] = payload
            .try_into()
            .map_err(|_| Error::Internal("regular join state: a corrupt row count".into()))?;
        let (copies, matches) = bytes.split_at(8);
        Ok(Self {
            copies: i64::from_le_bytes(copies.try_into().unwrap_or_default()),
            matches: i64::from_le_bytes(matches.try_into().unwrap_or_default()),
        })
    }

    fn encode(self) -> [u8; 16] {
        let mut out = [0_u8; 16];
        out[..8].copy_from_slice(&self.copies.to_le_bytes());
        out[8..].copy_from_slice(&self.matches.to_le_bytes());
        out
    }
}

/// A held row's count, and whether keyed state has yet to see it.
#[derive(Debug, Clone, Copy, Default)]
struct Entry {
    count: Count,
    dirty: bool,
}

/// The held rows of one key of one side.
#[derive(Debug)]
struct KeyRows {
    shard: u32,
    /// Whether `rows` holds every row of the key (otherwise a row not in it may be in keyed
    /// state).
    complete: bool,
    /// By encoded row; a count of no copies is a removal keyed state has yet to see. Hashed,
    /// not ordered: the order pairs are emitted in within a batch changes no table.
    rows: HashMap<Vec<u8>, Entry>,
}

/// A fast hash of short byte strings for the encoded keys and rows, with a fixed seed so that
/// a run's order of pairs repeats (they come from the job's data, but a flood of colliding
/// rows only slows the one operator that holds them, like any skewed key).
type KeyHasher = foldhash::fast::FixedState;

/// hashbrown's map, for `entry_ref`: a lookup by a borrowed key hashes it once and copies it
/// only when it is inserted.
type HashMap<K, V> = hashbrown::HashMap<K, V, KeyHasher>;

/// Roughly what a held key and a held row cost beyond their bytes.
const KEY_OVERHEAD: usize = 96;
const ROW_OVERHEAD: usize = 64;

/// Both sides' held rows.
#[derive(Debug, Default)]
pub(super) struct Held {
    sides: [HashMap<Vec<u8>, KeyRows>; 2],
    /// Per state shard touched: whether keyed state holds nothing of it that is not held.
    whole: StdHashMap<u32, bool>,
    /// Bytes the held rows take, roughly.
    bytes: usize,
}

impl Held {
    /// Bytes the held rows take, roughly.
    pub(super) fn bytes(&self) -> usize {
        self.bytes
    }

    /// The held rows of `key` on `side`, created (empty, complete when its shard is whole),
    /// and the count of held bytes.
    fn key_rows(
        &mut self,
        store: &mut dyn KeyedStateStore,
        side: usize,
        key: &[u8],
        shard: u32,
    ) -> Result<(&mut KeyRows, &mut usize)> {
        let Held {
            sides,
            whole,
            bytes,
        } = self;
        let held = match sides[side].entry_ref(key) {
            EntryRef::Occupied(held) => held.into_mut(),
            EntryRef::Vacant(vacant) => {
                let complete = is_whole(whole, store, shard)?;
                *bytes += key.len() + KEY_OVERHEAD;
                vacant.insert(KeyRows {
                    shard,
                    complete,
                    rows: HashMap::default(),
                })
            }
        };
        Ok((held, bytes))
    }

    /// The count of `row` of `key` on `side` (no copies when it has none), to be changed in
    /// place: the row is held from now on, and written to keyed state at the next write-out.
    pub(super) fn slot(
        &mut self,
        store: &mut dyn KeyedStateStore,
        side: usize,
        key: &[u8],
        shard: u32,
        row: &[u8],
    ) -> Result<&mut Count> {
        let (held, bytes) = self.key_rows(store, side, key, shard)?;
        let entry = match held.rows.entry_ref(row) {
            EntryRef::Occupied(entry) => entry.into_mut(),
            EntryRef::Vacant(vacant) => {
                let count = if held.complete {
                    Count::default()
                } else {
                    store.set_current_key(key, StateShardId(shard));
                    store.set_current_namespace(&[]);
                    match store.get(ROWS[side], row)? {
                        Some(payload) => Count::decode(&payload)?,
                        None => Count::default(),
                    }
                };
                *bytes += row.len() + ROW_OVERHEAD;
                vacant.insert(Entry {
                    count,
                    dirty: false,
                })
            }
        };
        // A slot left with no copies is a removal for keyed state (harmless if it was never
        // there), so every clean held row has copies.
        entry.dirty = true;
        Ok(&mut entry.count)
    }

    /// Makes every row of `key` on `side` held, reading them from keyed state if they are not
    /// yet.
    pub(super) fn load(
        &mut self,
        store: &mut dyn KeyedStateStore,
        side: usize,
        key: &[u8],
        shard: u32,
    ) -> Result<()> {
        let (held, bytes) = self.key_rows(store, side, key, shard)?;
        if held.complete {
            return Ok(());
        }
        store.set_current_key(key, StateShardId(shard));
        store.set_current_namespace(&[]);
        for (row, payload) in store.entries(ROWS[side])? {
            let size = row.len() + ROW_OVERHEAD;
            if let MapEntry::Vacant(slot) = held.rows.entry(row) {
                *bytes += size;
                slot.insert(Entry {
                    count: Count::decode(&payload)?,
                    dirty: false,
                });
            }
        }
        held.complete = true;
        Ok(())
    }

    /// The held rows of `key` on `side` with copies (all of its rows after [`Held::load`]).
    pub(super) fn held_rows(
        &self,
        side: usize,
        key: &[u8],
    ) -> impl Iterator<Item = (&[u8], Count)> {
        self.sides[side]
            .get(key)
            .into_iter()
            .flat_map(|held| held.rows.iter())
            .filter(|(_, e)| e.count.copies > 0)
            .map(|(row, e)| (row.as_slice(), e.count))
    }

    /// Writes every dirty row to keyed state; with `release`, forgets every held row (and that
    /// any shard is held whole).
    pub(super) fn write_out(
        &mut self,
        store: &mut dyn KeyedStateStore,
        release: bool,
    ) -> Result<()> {
        let mut freed = 0;
        for (side, keys) in self.sides.iter_mut().enumerate() {
            for (key, held) in keys.iter_mut() {
                let mut current = false;
                for (row, entry) in held.rows.iter_mut().filter(|(_, e)| e.dirty) {
                    if !current {
                        store.set_current_key(key, StateShardId(held.shard));
                        store.set_current_namespace(&[]);
                        current = true;
                    }
                    if entry.count.copies > 0 {
                        store.put(ROWS[side], row, &entry.count.encode())?;
                    } else {
                        store.remove(ROWS[side], row)?;
                        freed += row.len() + ROW_OVERHEAD;
                    }
                    entry.dirty = false;
                }
                if !release && current {
                    // Only rows just written can have no copies.
                    held.rows.retain(|_, e| e.count.copies > 0);
                }
            }
            if !release {
                keys.retain(|key, held| {
                    let keep = !held.rows.is_empty();
                    if !keep {
                        freed += key.len() + KEY_OVERHEAD;
                    }
                    keep
                });
            }
        }
        if release {
            self.sides = Default::default();
            self.whole.values_mut().for_each(|whole| *whole = false);
            self.bytes = 0;
        } else {
            self.bytes = self.bytes.saturating_sub(freed);
        }
        Ok(())
    }
}

/// Whether every row of `shard` in keyed state is held (`whole` remembers it per shard),
/// finding out on its first touch.
fn is_whole(
    whole: &mut StdHashMap<u32, bool>,
    store: &mut dyn KeyedStateStore,
    shard: u32,
) -> Result<bool> {
    if let Some(&known) = whole.get(&shard) {
        return Ok(known);
    }
    let mut empty = true;
    for name in ROWS {
        empty &= store
            .scan(name, StateShardId(shard), NamespaceRange::ALL, Some(1))?
            .is_empty();
    }
    whole.insert(shard, empty);
    Ok(empty)
}
