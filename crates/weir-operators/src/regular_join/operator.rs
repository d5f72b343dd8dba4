//! A running `regular_join`: matching a batch against the other side's rows in keyed state,
//! and what each row of it emits (see the module above).

use super::Config;
use super::held::{Count, Held};
use arrow::array::{Array, ArrayRef, Int8Array, RecordBatch, UInt32Array, new_null_array};
use arrow::compute::take;
use std::sync::Arc;
use weir_api::changelog::RowKind;
use weir_api::{Error, KeyedStateStore, Operator, Output, Result, Watermark};
use weir_state::row_codec::{decode_rows, encode_rows};

/// A row of the other side, held for a key of the batch.
struct Other {
    /// Its bytes, kept only on a padded side (where its count of matches changes).
    row: Vec<u8>,
    count: Count,
    changed: bool,
}

/// One output row: a row of the batch, a row of the other side (either may be padding) and
/// the kind.
type Emit = (Option<u32>, Option<u32>, RowKind);

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
            cfg,
            store,
            shard_count,
            held: Held::default(),
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
}

impl Operator for RegularJoinOperator {
    fn process_batch(&mut self, input: usize, batch: RecordBatch, out: &mut Output) -> Result<()> {
        let n = batch.num_rows();
        if n == 0 {
            return Ok(());
        }
        let cfg = Arc::clone(&self.cfg);
        let side = input.min(1);
        let other = 1 - side;
        let kinds = weir_api::changelog::kinds_of(&batch)?;
        let key_columns: Vec<ArrayRef> = cfg.keys[side]
            .iter()
            .map(|&i| Arc::clone(batch.column(i)))
            .collect();
        let keyed = crate::keyed_rows::KeyedRows::of(&key_columns, self.shard_count, "join")?;
        let (keys, shards) = (&keyed.keys, &keyed.shards);
        let data: Vec<ArrayRef> = cfg.data[side]
            .iter()
            .map(|&i| Arc::clone(batch.column(i)))
            .collect();
        let rows = encode_rows(&data).map_err(state_error)?;
        // A key with a null never equals anything: such a row matches nothing and is not kept
        // (an outer side's is emitted padded).
        let null_key = |r: usize| key_columns.iter().any(|c| c.is_null(r));
        let mut emits: Vec<Emit> = Vec::new();
        if cfg.join.pads(side) {
            for r in (0..n).filter(|&r| null_key(r)) {
                let kind = if kinds[r].is_addition() {
                    RowKind::Insert
                } else {
                    RowKind::Delete
                };
                emits.push((Some(r as u32), None, kind));
            }
        }
        let groups: Vec<(usize, Vec<u32>)> = keyed
            .groups((0..n).filter(|&r| !null_key(r)))
            .into_iter()
            .map(|(first, rows)| (first, rows.into_iter().map(|r| r as u32).collect()))
            .collect();
        // The other side's rows of every key of the batch, read once; their bytes are kept
        // only where their counts may change (a padded side).
        for (first, _) in &groups {
            self.held
                .load(self.store.as_mut(), other, &keys[*first], shards[*first])?;
        }
        let keep_rows = cfg.join.pads(other);
        let mut others: Vec<Other> = Vec::new();
        let mut ranges: Vec<std::ops::Range<usize>> = Vec::with_capacity(groups.len());
        let other_columns = {
            let mut refs: Vec<&[u8]> = Vec::new();
            for (first, _) in &groups {
                let start = others.len();
                for (row, count) in self.held.held_rows(other, &keys[*first]) {
                    refs.push(row);
                    others.push(Other {
                        row: if keep_rows { row.to_vec() } else { Vec::new() },
                        count,
                        changed: false,
                    });
                }
                ranges.push(start..others.len());
            }
            decode_rows(&cfg.types[other], &refs).map_err(state_error)?
        };
        // Every candidate pair of the batch, and whether the condition holds for it.
        let mut pairs: Vec<(u32, u32)> = Vec::new();
        for ((_, members), range) in groups.iter().zip(&ranges) {
            for &r in members {
                for j in range.clone() {
                    pairs.push((r, j as u32));
                }
            }
        }
        let holds = match &cfg.condition {
            Some(condition) if !pairs.is_empty() => {
                let own = take_all(&data, pairs.iter().map(|p| p.0))?;
                let theirs = take_all(&other_columns, pairs.iter().map(|p| p.1))?;
                let columns = if side == 0 {
                    [own, theirs].concat()
                } else {
                    [theirs, own].concat()
                };
                let pair_batch = RecordBatch::try_new(Arc::clone(&cfg.pair), columns)
                    .map_err(|e| Error::arrow("building join candidates", e))?;
                crate::expr::holds(condition.as_ref(), &pair_batch)?
            }
            _ => vec![true; pairs.len()],
        };
        let mut at = 0;
        for ((first, members), range) in groups.iter().zip(&ranges) {
            let (key, shard) = (keys[*first].as_slice(), shards[*first]);
            for &r in members {
                let width = range.len();
                let matched: Vec<usize> = (at..at + width)
                    .filter(|&p| holds[p])
                    .map(|p| pairs[p].1 as usize)
                    .collect();
                at += width;
                let row = &rows[r as usize];
                let kind = kinds[r as usize];
                let add = kind.is_addition();
                let slot = self.held.slot(self.store.as_mut(), side, key, shard, row)?;
                let mut own = *slot;
                if !add && own.copies == 0 {
                    // A retraction of a row that is not there: nothing to take back.
                    continue;
                }
                if add {
                    own.copies += 1;
                    if cfg.join.pads(side) {
                        own.matches = matched.iter().map(|&j| others[j].count.copies).sum();
                    }
                } else {
                    own.copies -= 1;
                }
                for &j in &matched {
                    let o = &mut others[j];
                    let copies = o.count.copies.max(0) as usize;
                    let padded = cfg.join.pads(other);
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
                if matched.is_empty() && cfg.join.pads(side) {
                    let padded = if add {
                        RowKind::Insert
                    } else {
                        RowKind::Delete
                    };
                    emits.push((Some(r), None, padded));
                }
                *slot = own;
            }
            for o in &mut others[range.clone()] {
                if o.changed {
                    *self
                        .held
                        .slot(self.store.as_mut(), other, key, shard, &o.row)? = o.count;
                    o.changed = false;
                }
            }
        }
        if self.held.bytes() > cfg.budget || cfg.ttl.is_some() {
            // With a TTL the state decides when a quiet row is gone, so nothing is held.
            self.held.write_out(self.store.as_mut(), true)?;
        }
        if !emits.is_empty() {
            out.emit(self.assemble(side, &data, &other_columns, &emits)?);
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
