//! A running `regular_join`: matching a batch against the other side's rows in keyed state,
//! and what each row of it emits (see the module above).

use super::Config;
use super::held::Held;
use super::row_set::Count;
use arrow::array::{Array, ArrayRef, Int8Array, RecordBatch, UInt32Array, new_null_array};
use arrow::compute::take;
use std::ops::Range;
use std::sync::Arc;
use weir_api::changelog::RowKind;
use weir_api::{Error, KeyedStateStore, Operator, Output, Result, Watermark};
use weir_state::row_codec::{decode_rows, encode_rows};

/// A row of the other side, held for a key of the batch.
struct Other {
    /// Its position among the key's held rows (where a changed count of matches goes).
    at: usize,
    count: Count,
    changed: bool,
}

/// One output row: a row of the batch, a row of the other side (either may be padding) and
/// the kind.
type Emit = (Option<u32>, Option<u32>, RowKind);

/// The rows of the batch under one key: the first of them (where its key and shard are read)
/// and all of them.
type Group = (usize, Vec<u32>);

/// What the steps of `process_batch` read of the batch: its row kinds, its key columns, keys
/// and shards, its data columns and each row's encoded data.
struct Arriving {
    kinds: Vec<RowKind>,
    key_columns: Vec<ArrayRef>,
    keyed: crate::keyed_rows::KeyedRows,
    data: Vec<ArrayRef>,
    rows: Vec<Vec<u8>>,
}

/// The other side's rows held for the batch's key groups: per group the range of them in
/// `rows`, and their columns decoded once.
struct Others {
    rows: Vec<Other>,
    ranges: Vec<Range<usize>>,
    columns: Vec<ArrayRef>,
}

/// Every candidate pair of the batch (its row, an index into [`Others::rows`]), group by group
/// and row by row, and whether the condition holds for each.
struct Candidates {
    pairs: Vec<(u32, u32)>,
    holds: Vec<bool>,
}

/// A running `regular_join`.
pub(crate) struct RegularJoinOperator {
    cfg: Arc<Config>,
    store: Box<dyn KeyedStateStore>,
    shard_count: u32,
    held: Held,
}

impl RegularJoinOperator {
    pub(crate) fn new(cfg: Arc<Config>, store: Box<dyn KeyedStateStore>, shard_count: u32) -> Self {
        Self {
            held: Held::new(cfg.updating_inputs),
            cfg,
            store,
            shard_count,
        }
    }

    /// The output batch of `emits`: `side`'s columns from `data`, the other side's from
    /// `others` (decoded rows of state).
    fn assemble(
        &self,
        side: usize,
        data: &[ArrayRef],
        others: &[ArrayRef],
        emits: &[Emit],
    ) -> Result<RecordBatch> {
        let pick = |columns: &[ArrayRef], rows: UInt32Array| -> Result<Vec<ArrayRef>> {
            columns
                .iter()
                .map(|c| {
                    if c.is_empty() {
                        Ok(new_null_array(c.data_type(), rows.len()))
                    } else {
                        take(c.as_ref(), &rows, None)
                            .map_err(|e| Error::arrow("taking joined rows", e))
                    }
                })
                .collect()
        };
        let own = pick(data, emits.iter().map(|e| e.0).collect())?;
        let other = pick(others, emits.iter().map(|e| e.1).collect())?;
        let mut columns = if side == 0 {
            [own, other].concat()
        } else {
            [other, own].concat()
        };
        if self.cfg.updating {
            columns.push(Arc::new(Int8Array::from_iter_values(
                emits.iter().map(|e| e.2.as_i8()),
            )));
        }
        RecordBatch::try_new(Arc::clone(&self.cfg.output), columns)
            .map_err(|e| Error::arrow("assembling joined rows", e))
    }

    /// Reads what every step needs of `batch` (input `side`): its row kinds, its keys and their
    /// shards, its data columns and each row's encoded data (what keyed state holds).
    fn read_batch(&self, side: usize, batch: &RecordBatch) -> Result<Arriving> {
        let cfg = &self.cfg;
        let kinds = weir_api::changelog::kinds_of(batch)?;
        let key_columns: Vec<ArrayRef> = cfg.keys[side]
            .iter()
            .map(|&i| Arc::clone(batch.column(i)))
            .collect();
        let keyed = crate::keyed_rows::KeyedRows::of(&key_columns, self.shard_count, "join")?;
        let data: Vec<ArrayRef> = cfg.data[side]
            .iter()
            .map(|&i| Arc::clone(batch.column(i)))
            .collect();
        let rows = encode_rows(&data).map_err(state_error)?;
        Ok(Arriving {
            kinds,
            key_columns,
            keyed,
            data,
            rows,
        })
    }

    /// The other side's rows of every key group, read once, their columns decoded for the
    /// pairs.
    fn load_others(
        &mut self,
        other: usize,
        keyed: &crate::keyed_rows::KeyedRows,
        groups: &[Group],
    ) -> Result<Others> {
        for (first, _) in groups {
            self.held.load(
                self.store.as_mut(),
                other,
                &keyed.keys[*first],
                keyed.shards[*first],
            )?;
        }
        let mut rows: Vec<Other> = Vec::new();
        let mut ranges: Vec<Range<usize>> = Vec::with_capacity(groups.len());
        let mut refs: Vec<&[u8]> = Vec::new();
        for (first, _) in groups {
            let start = rows.len();
            for (at, row, count) in self.held.held_rows(other, &keyed.keys[*first]) {
                refs.push(row);
                rows.push(Other {
                    at,
                    count,
                    changed: false,
                });
            }
            ranges.push(start..rows.len());
        }
        let columns = decode_rows(&self.cfg.types[other], &refs).map_err(state_error)?;
        Ok(Others {
            rows,
            ranges,
            columns,
        })
    }

    /// Every candidate pair of the batch (a row of the batch, a held row of its key) and
    /// whether the condition holds for it, evaluated over all pairs at once.
    fn candidates(
        &self,
        side: usize,
        data: &[ArrayRef],
        others: &Others,
        groups: &[Group],
    ) -> Result<Candidates> {
        let mut pairs: Vec<(u32, u32)> = Vec::new();
        for ((_, members), range) in groups.iter().zip(&others.ranges) {
            for &r in members {
                for j in range.clone() {
                    pairs.push((r, j as u32));
                }
            }
        }
        let holds = match &self.cfg.condition {
            Some(condition) if !pairs.is_empty() => {
                let own = take_all(data, pairs.iter().map(|p| p.0))?;
                let theirs = take_all(&others.columns, pairs.iter().map(|p| p.1))?;
                let columns = if side == 0 {
                    [own, theirs].concat()
                } else {
                    [theirs, own].concat()
                };
                let pair_batch = RecordBatch::try_new(Arc::clone(&self.cfg.pair), columns)
                    .map_err(|e| Error::arrow("building join candidates", e))?;
                crate::expr::holds(condition.as_ref(), &pair_batch)?
            }
            _ => vec![true; pairs.len()],
        };
        Ok(Candidates { pairs, holds })
    }

    /// Applies every row of the batch with a key, group by group: its own count in state, the
    /// held rows' match counts and what it emits; then stores the held rows' changed counts.
    fn apply_groups(
        &mut self,
        side: usize,
        arriving: &Arriving,
        groups: &[Group],
        others: &mut Others,
        candidates: &Candidates,
        emits: &mut Vec<Emit>,
    ) -> Result<()> {
        let pads_own = self.cfg.join.pads(side);
        let pads_other = self.cfg.join.pads(1 - side);
        let mut at = 0;
        for ((first, members), range) in groups.iter().zip(&others.ranges) {
            let key = (
                arriving.keyed.keys[*first].as_slice(),
                arriving.keyed.shards[*first],
            );
            for &r in members {
                let width = range.len();
                let matched: Vec<usize> = (at..at + width)
                    .filter(|&p| candidates.holds[p])
                    .map(|p| candidates.pairs[p].1 as usize)
                    .collect();
                at += width;
                let kind = arriving.kinds[r as usize];
                let add = kind.is_addition();
                let row = &arriving.rows[r as usize];
                if !self.count_own(side, key, row, add, &matched, &others.rows)? {
                    // A retraction of a row that is not there: nothing to take back.
                    continue;
                }
                emit_matches(r, kind, &matched, &mut others.rows, pads_other, emits);
                if matched.is_empty() && pads_own {
                    let padded = if add {
                        RowKind::Insert
                    } else {
                        RowKind::Delete
                    };
                    emits.push((Some(r), None, padded));
                }
            }
            self.store_changed(1 - side, key.0, &mut others.rows[range.clone()]);
        }
        Ok(())
    }

    /// Adds (`add`) or takes back one copy of `row` of `side` under `key` (and its shard); on a
    /// padded side an added row's match count becomes the copies of its `matched` held rows.
    /// `false` for a retraction of a row that is not there (nothing changes).
    fn count_own(
        &mut self,
        side: usize,
        (key, shard): (&[u8], u32),
        row: &[u8],
        add: bool,
        matched: &[usize],
        others: &[Other],
    ) -> Result<bool> {
        let pads = self.cfg.join.pads(side);
        let slot = self.held.slot(self.store.as_mut(), side, key, shard, row)?;
        let mut own = *slot;
        if !add && own.copies == 0 {
            return Ok(false);
        }
        if add {
            own.copies += 1;
            if pads {
                own.matches = matched.iter().map(|&j| others[j].count.copies).sum();
            }
        } else {
            own.copies -= 1;
        }
        *slot = own;
        Ok(true)
    }

    /// Writes the counts of the held rows of `other` that changed back under `key`, so the
    /// next batch and the state see them.
    fn store_changed(&mut self, other: usize, key: &[u8], others: &mut [Other]) {
        for o in others {
            if o.changed {
                self.held.set_count(other, key, o.at, o.count);
                o.changed = false;
            }
        }
    }
}

/// The rows one row `r` of the batch (of kind `kind`) emits with its `matched` held rows, once
/// per copy of each, and their match counts updated; a held row of a padded side (`padded`)
/// that gains its first match retracts its padded row first, one that loses its last emits it
/// again.
fn emit_matches(
    r: u32,
    kind: RowKind,
    matched: &[usize],
    others: &mut [Other],
    padded: bool,
    emits: &mut Vec<Emit>,
) {
    let add = kind.is_addition();
    for &j in matched {
        let o = &mut others[j];
        let copies = o.count.copies.max(0) as usize;
        if add {
            if padded && o.count.matches == 0 {
                emits.extend(std::iter::repeat_n(
                    (None, Some(j as u32), RowKind::Delete),
                    copies,
                ));
            }
            o.count.matches += 1;
        }
        emits.extend(std::iter::repeat_n((Some(r), Some(j as u32), kind), copies));
        if !add {
            o.count.matches -= 1;
            if padded && o.count.matches == 0 {
                emits.extend(std::iter::repeat_n(
                    (None, Some(j as u32), RowKind::Insert),
                    copies,
                ));
            }
        }
        o.changed |= padded;
    }
}

impl Operator for RegularJoinOperator {
    fn process_batch(&mut self, input: usize, batch: RecordBatch, out: &mut Output) -> Result<()> {
        let n = batch.num_rows();
        if n == 0 {
            return Ok(());
        }
        let side = input.min(1);
        let arriving = self.read_batch(side, &batch)?;
        // A key with a null never equals anything: such a row matches nothing and is not kept
        // (an outer side's is emitted padded).
        let null_key = |r: usize| arriving.key_columns.iter().any(|c| c.is_null(r));
        let mut emits: Vec<Emit> = Vec::new();
        if self.cfg.join.pads(side) {
            for r in (0..n).filter(|&r| null_key(r)) {
                let kind = if arriving.kinds[r].is_addition() {
                    RowKind::Insert
                } else {
                    RowKind::Delete
                };
                emits.push((Some(r as u32), None, kind));
            }
        }
        let groups: Vec<Group> = arriving
            .keyed
            .groups((0..n).filter(|&r| !null_key(r)))
            .into_iter()
            .map(|(first, rows)| (first, rows.into_iter().map(|r| r as u32).collect()))
            .collect();
        let mut others = self.load_others(1 - side, &arriving.keyed, &groups)?;
        let candidates = self.candidates(side, &arriving.data, &others, &groups)?;
        self.apply_groups(
            side,
            &arriving,
            &groups,
            &mut others,
            &candidates,
            &mut emits,
        )?;
        if self.held.bytes() > self.cfg.budget || self.cfg.ttl.is_some() {
            // With a TTL the state decides when a quiet row is gone, so nothing is held.
            self.held.write_out(self.store.as_mut(), true)?;
        }
        if !emits.is_empty() {
            out.emit(self.assemble(side, &arriving.data, &others.columns, &emits)?);
        }
        Ok(())
    }

    /// The pairs are new rows: a split's watermark says nothing about them.
    fn process_split_watermark(
        &mut self,
        _input: usize,
        _watermark: Watermark,
        _out: &mut Output,
    ) -> Result<()> {
        Ok(())
    }

    fn on_barrier(&mut self, _barrier: weir_api::Barrier, _out: &mut Output) -> Result<()> {
        self.held.write_out(self.store.as_mut(), false)
    }
}

/// `columns` at `rows`.
fn take_all(columns: &[ArrayRef], rows: impl Iterator<Item = u32>) -> Result<Vec<ArrayRef>> {
    let indices = UInt32Array::from_iter_values(rows);
    columns
        .iter()
        .map(|c| take(c.as_ref(), &indices, None))
        .collect::<std::result::Result<_, _>>()
        .map_err(|e| Error::arrow("taking join candidates", e))
}

fn state_error(e: impl std::fmt::Display) -> Error {
    Error::Internal(format!("regular join state: {e}"))
}
