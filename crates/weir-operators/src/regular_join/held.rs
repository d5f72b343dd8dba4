//! The rows a running `regular_join` holds in memory, and when they reach keyed state.
//!
//! Both sides' rows are held per key with their counts (`row_set.rs`). A change is made in
//! memory and marked dirty; dirty rows are written to keyed state at every checkpoint barrier,
//! and when the held rows outgrow the operator's budget they are written and all released. A
//! key not held is read from keyed state: all its rows where they are all needed (the other
//! side), and on an updating side the one row a retraction or an update needs. An insert-only
//! side reads nothing when a row arrives: its new copies are added to keyed state's count
//! when they are written.
//!
//! Reads are skipped altogether for a state shard whose state is known to be held whole: a
//! shard found empty in keyed state when first touched stays so until rows are released.

use super::ROWS;
use super::row_set::{Count, Entry, RowHasher, RowSet};
use hashbrown::hash_map::EntryRef;
use std::collections::HashMap as StdHashMap;
use weir_api::state::NamespaceRange;
use weir_api::{KeyedStateStore, Result, StateShardId};

/// The held rows of one key of one side.
#[derive(Debug)]
struct KeyRows {
    shard: u32,
    /// Whether `rows` holds every row of the key (otherwise a row not in it may be in keyed
    /// state). On an insert-only side a row of an incomplete key is a count to add to what
    /// keyed state holds for it.
    complete: bool,
    /// A count of no copies is a removal keyed state has yet to see.
    rows: RowSet,
}

/// hashbrown's map, for `entry_ref`: a lookup by a borrowed key hashes it once and copies it
/// only when it is inserted.
type HashMap<K, V> = hashbrown::HashMap<K, V, RowHasher>;

/// Roughly what a held key and a held row cost beyond their bytes.
const KEY_OVERHEAD: usize = 96;
const ROW_OVERHEAD: usize = 48;

/// Both sides' held rows.
#[derive(Debug)]
pub(super) struct Held {
    sides: [HashMap<Vec<u8>, KeyRows>; 2],
    /// Per side: whether its rows can be retracted (they are then found by their bytes).
    indexed: [bool; 2],
    /// Per state shard touched: whether keyed state holds nothing of it that is not held.
    whole: StdHashMap<u32, bool>,
    /// Bytes the held rows take, roughly.
    bytes: usize,
}

impl Held {
    /// Nothing held yet; `updating` says per side whether its input carries retractions.
    pub(super) fn new(updating: [bool; 2]) -> Self {
        Self {
            sides: Default::default(),
            indexed: updating,
            whole: StdHashMap::new(),
            bytes: 0,
        }
    }

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
            indexed,
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
                    rows: RowSet::new(indexed[side]),
                })
            }
        };
        Ok((held, bytes))
    }

    /// The count of `row` of `key` on `side` (no copies when it has none), to be changed in
    /// place: the row is held from now on, and written to keyed state at the next write-out.
    /// On an insert-only side it is a new count of no copies, added to the row's others.
    pub(super) fn slot(
        &mut self,
        store: &mut dyn KeyedStateStore,
        side: usize,
        key: &[u8],
        shard: u32,
        row: &[u8],
    ) -> Result<&mut Count> {
        let (held, bytes) = self.key_rows(store, side, key, shard)?;
        let found = held.rows.find(row);
        let at = match found {
            Some(at) => at,
            None => {
                let count = if held.complete || !held.rows.is_indexed() {
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
                held.rows.push(
                    row,
                    Entry {
                        count,
                        dirty: false,
                    },
                )
            }
        };
        // A slot left with no copies is a removal for keyed state (harmless if it was never
        // there), so every clean held row has copies.
        let entry = held.rows.entry_mut(at);
        entry.dirty = true;
        Ok(&mut entry.count)
    }

    /// Sets the count of the held row at `at` (from [`Held::held_rows`]) of `key` on `side`.
    pub(super) fn set_count(&mut self, side: usize, key: &[u8], at: usize, count: Count) {
        if let Some(entry) = self.sides[side]
            .get_mut(key)
            .filter(|held| at < held.rows.len())
            .map(|held| held.rows.entry_mut(at))
        {
            *entry = Entry { count, dirty: true };
        }
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
        let stored = store.entries(ROWS[side])?;
        // Keyed state's count of a row is in a clean held copy of it already; on an
        // insert-only side a dirty copy is a count to add to keyed state's.
        let added: Vec<usize> = if held.rows.is_indexed() {
            (0..stored.len())
                .filter(|&i| held.rows.find(&stored[i].0).is_none())
                .collect()
        } else {
            let clean: hashbrown::HashSet<&[u8], RowHasher> = held
                .rows
                .iter()
                .filter(|(_, _, e)| !e.dirty)
                .map(|(_, row, _)| row)
                .collect();
            (0..stored.len())
                .filter(|&i| !clean.contains(stored[i].0.as_slice()))
                .collect()
        };
        for i in added {
            let (row, payload) = &stored[i];
            *bytes += row.len() + ROW_OVERHEAD;
            let count = Count::decode(payload)?;
            held.rows.push(
                row,
                Entry {
                    count,
                    dirty: false,
                },
            );
        }
        held.complete = true;
        Ok(())
    }

    /// The held rows of `key` on `side` with copies (all of its rows after [`Held::load`]), with
    /// their positions for [`Held::set_count`].
    pub(super) fn held_rows(
        &self,
        side: usize,
        key: &[u8],
    ) -> impl Iterator<Item = (usize, &[u8], Count)> {
        self.sides[side]
            .get(key)
            .into_iter()
            .flat_map(|held| held.rows.iter())
            .filter(|(_, _, e)| e.count.copies > 0)
            .map(|(at, row, e)| (at, row, e.count))
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
                if !held.rows.iter().any(|(_, _, e)| e.dirty) {
                    continue;
                }
                store.set_current_key(key, StateShardId(held.shard));
                store.set_current_namespace(&[]);
                freed += if held.rows.is_indexed() {
                    write_indexed(store, ROWS[side], &mut held.rows, release)?
                } else {
                    write_appended(store, ROWS[side], held, release)?
                };
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

/// Writes the dirty rows of one key of an updating side (the store's current key) to keyed
/// state and, unless `release`, drops the held rows left with no copies; returns the bytes
/// freed.
fn write_indexed(
    store: &mut dyn KeyedStateStore,
    name: &str,
    rows: &mut RowSet,
    release: bool,
) -> Result<usize> {
    let mut removed = false;
    for at in 0..rows.len() {
        let entry = *rows.entry(at);
        if !entry.dirty {
            continue;
        }
        if entry.count.copies > 0 {
            store.put(name, rows.row(at), &entry.count.encode())?;
        } else {
            store.remove(name, rows.row(at))?;
            removed = true;
        }
        rows.entry_mut(at).dirty = false;
    }
    if release || !removed {
        return Ok(0);
    }
    let before = rows.len();
    let dropped = rows.retain(|_, e| e.count.copies > 0);
    Ok(dropped + (before - rows.len()) * ROW_OVERHEAD)
}

/// Writes one key of an insert-only side (the store's current key) to keyed state: each row
/// with dirty copies gets the sum of its copies (plus keyed state's count where the key is not
/// held whole and no clean copy says it). Unless `release`, the held copies of each row become
/// one clean row; returns the bytes freed.
fn write_appended(
    store: &mut dyn KeyedStateStore,
    name: &str,
    held: &mut KeyRows,
    release: bool,
) -> Result<usize> {
    let mut merged = held.rows.merge();
    for m in merged.iter_mut().filter(|m| m.dirty) {
        let row = held.rows.row(m.at);
        if !m.clean
            && !held.complete
            && let Some(payload) = store.get(name, row)?
        {
            m.count.copies += Count::decode(&payload)?.copies;
        }
        if m.count.copies > 0 {
            store.put(name, row, &m.count.encode())?;
        } else {
            store.remove(name, row)?;
        }
    }
    if release {
        return Ok(0);
    }
    let mut settled = RowSet::new(false);
    let mut dropped = 0;
    for m in &merged {
        let row = held.rows.row(m.at);
        if m.count.copies > 0 {
            settled.push(
                row,
                Entry {
                    count: m.count,
                    dirty: false,
                },
            );
        } else {
            dropped += row.len() + ROW_OVERHEAD;
        }
    }
    let copies = held.rows.len() - merged.len();
    let copies_bytes: usize = held.rows.iter().map(|(_, r, _)| r.len()).sum::<usize>()
        - merged
            .iter()
            .map(|m| held.rows.row(m.at).len())
            .sum::<usize>();
    held.rows = settled;
    Ok(dropped + copies_bytes + copies * ROW_OVERHEAD)
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
