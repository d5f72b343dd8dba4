//! Session windows: per key, a row opens `[ts, ts + gap)` and merges with every session it
//! touches (bounds inclusive, as Flink's `TimeWindow.intersects`: rows exactly one gap apart
//! share a session). A late or out-of-order row that bridges two sessions merges them.
//!
//! Every session owns one group ("slot") in a [`GroupSpace`] addressed by index; rows are
//! aggregated with one vectorized update per batch, and merging sessions merges their partial
//! states. Assigning rows to sessions is a per-row loop over the key's few sessions (metadata
//! only: no values are touched row by row).

use super::aggregate::GroupSpace;
use super::config::{LatePolicyKind, WindowConfig};
use super::image::{ImageWindows, RestoredWindows, WindowId, WindowState};
use super::output::{LateRows, result_batch_bounds, take_all};
use crate::event_time::event_times_ms;
use arrow::array::{Array, ArrayRef, BooleanArray, Int64Array, RecordBatch, UInt32Array};
use arrow::datatypes::Schema;
use arrow::row::{RowConverter, Rows, SortField};
use datafusion::common::HashMap;
use std::sync::Arc;
use weir_api::{Barrier, Error, Operator, Output, RecordLocation, Result, StateImage, Watermark};

/// Session flag persisted with a session: a result of it was emitted before.
const FLAG_EMITTED: u8 = 1;

#[derive(Debug, Clone)]
struct Session {
    start: i64,
    /// Exclusive: the last row's time plus the gap.
    end: i64,
    slot: usize,
    /// A result of this session (or of a session merged into it) was emitted.
    emitted: bool,
    /// Rows were added since the last emission.
    pending: bool,
}

/// A session-window operator instance (one subtask).
pub struct SessionWindowOperator {
    cfg: Arc<WindowConfig>,
    gap: i64,
    watermark: i64,
    /// Key rows in arrow's row format (memory only; persisted keys use the state row codec).
    converter: RowConverter,
    sessions: HashMap<Vec<u8>, Vec<Session>>,
    space: GroupSpace,
    /// Slots allocated in `space` (some may be empty after merges until the next compaction).
    slots: usize,
    late: LateRows,
    /// Where its sessions go in checkpoints.
    state: WindowState,
}

impl std::fmt::Debug for SessionWindowOperator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionWindowOperator")
            .field("keys", &self.sessions.len())
            .field("slots", &self.slots)
            .field("watermark", &self.watermark)
            .finish()
    }
}

fn find(parent: &mut [usize], mut x: usize) -> usize {
    while parent[x] != x {
        parent[x] = parent[parent[x]];
        x = parent[x];
    }
    x
}

impl SessionWindowOperator {
    /// A new instance with inactivity gap `gap` ms and the sessions of `restored` (from a
    /// checkpoint; empty on a fresh start); `state` says where its sessions go in checkpoints.
    ///
    /// # Errors
    ///
    /// Errors of creating the key converter or of merging the restored sessions.
    pub fn new(
        cfg: Arc<WindowConfig>,
        gap: i64,
        late: LateRows,
        state: WindowState,
        restored: RestoredWindows,
    ) -> Result<Self> {
        let converter = RowConverter::new(
            cfg.key_schema
                .fields()
                .iter()
                .map(|f| SortField::new(f.data_type().clone()))
                .collect(),
        )
        .map_err(|e| Error::arrow("creating the session key converter", e))?;
        let space = GroupSpace::new(Arc::clone(&cfg.aggregates), Arc::new(Schema::empty()))?;
        let mut op = Self {
            cfg,
            gap,
            watermark: restored.watermark,
            converter,
            sessions: HashMap::new(),
            space,
            slots: 0,
            late,
            state,
        };
        op.restore(restored)?;
        Ok(op)
    }

    fn restore(&mut self, restored: RestoredWindows) -> Result<()> {
        for ((id, flags), (keys, states)) in restored.windows {
            let rows = self.key_rows(&keys, states.first().and_then(|s| s.first()))?;
            let n = rows.len();
            let first = self.slots;
            self.slots += n;
            let groups: Vec<usize> = (first..first + n).collect();
            self.space.merge_indexed(&groups, self.slots, &states)?;
            for (i, key) in rows.into_iter().enumerate() {
                self.sessions.entry(key).or_default().push(Session {
                    start: id.start,
                    end: id.end,
                    slot: first + i,
                    emitted: flags & FLAG_EMITTED != 0,
                    pending: id.end - 1 > self.watermark,
                });
            }
        }
        for list in self.sessions.values_mut() {
            list.sort_by_key(|s| s.start);
        }
        Ok(())
    }

    /// The key of each row as owned row-format bytes (empty keys without key columns).
    fn key_rows(&self, keys: &[ArrayRef], any: Option<&ArrayRef>) -> Result<Vec<Vec<u8>>> {
        if keys.is_empty() {
            let n = any.map_or(0, |a| a.len());
            return Ok(vec![Vec::new(); n]);
        }
        let rows = self.encode_keys(keys)?;
        Ok(rows.iter().map(|r| r.as_ref().to_vec()).collect())
    }

    /// The keys of a batch in arrow's row format: one buffer for all rows, so looking a key
    /// up allocates nothing (only a key seen for the first time is copied).
    fn encode_keys(&self, keys: &[ArrayRef]) -> Result<Rows> {
        self.converter
            .convert_columns(keys)
            .map_err(|e| Error::arrow("encoding session keys", e))
    }

    /// Key columns of row-format keys.
    fn key_columns(&self, keys: &[&[u8]]) -> Result<Vec<ArrayRef>> {
        if self.cfg.key_schema.fields().is_empty() {
            return Ok(Vec::new());
        }
        let parser = self.converter.parser();
        self.converter
            .convert_rows(keys.iter().map(|k| parser.parse(k)))
            .map_err(|e| Error::arrow("decoding session keys", e))
    }

    /// Emits the sessions `(key, session index)` in `fire` (in that order), with the marker
    /// where a result was emitted before; then keeps only the sessions `keep` says to keep and
    /// renumbers the slots densely.
    fn emit_and_compact(
        &mut self,
        fire: &[(Vec<u8>, usize)],
        keep: impl Fn(&Session) -> bool,
        out: &mut Output,
    ) -> Result<()> {
        let (_, states) = self.space.drain()?;
        if !fire.is_empty() {
            let mut starts = Vec::with_capacity(fire.len());
            let mut ends = Vec::with_capacity(fire.len());
            let mut marker = Vec::with_capacity(fire.len());
            let mut slots = Vec::with_capacity(fire.len());
            for (key, i) in fire {
                if let Some(s) = self.sessions.get_mut(key).and_then(|l| l.get_mut(*i)) {
                    starts.push(s.start);
                    ends.push(s.end);
                    marker.push(Some(s.emitted));
                    slots.push(s.slot as u32);
                    s.emitted = true;
                    s.pending = false;
                }
            }
            let idx = UInt32Array::from(slots);
            let fired_states: Vec<Vec<ArrayRef>> = states
                .iter()
                .map(|s| take_all(s, &idx))
                .collect::<Result<_>>()?;
            let values = self.cfg.aggregates.evaluate_states(&fired_states)?;
            let key_refs: Vec<&[u8]> = fire.iter().map(|(k, _)| &**k).collect();
            let keys = self.key_columns(&key_refs)?;
            out.emit(result_batch_bounds(
                &self.cfg,
                &keys,
                &Int64Array::from(starts),
                &Int64Array::from(ends),
                values,
                Some(BooleanArray::from(marker)),
            )?);
        }
        // Renumber the sessions that stay; their states move to slots 0..m.
        let mut old_slots = Vec::new();
        self.sessions.retain(|_, list| {
            list.retain(|s| keep(s));
            for s in list.iter_mut() {
                old_slots.push(s.slot as u32);
                s.slot = old_slots.len() - 1;
            }
            !list.is_empty()
        });
        let idx = UInt32Array::from(old_slots);
        let kept: Vec<Vec<ArrayRef>> = states
            .iter()
            .map(|s| take_all(s, &idx))
            .collect::<Result<_>>()?;
        self.slots = idx.len();
        let groups: Vec<usize> = (0..self.slots).collect();
        self.space.merge_indexed(&groups, self.slots, &kept)
    }

    /// Sessions that are complete (`end - 1 <= watermark`) and have rows not emitted yet, in
    /// `(end, start, key)` order.
    fn due(&self) -> Vec<(Vec<u8>, usize)> {
        let mut due: Vec<(i64, i64, Vec<u8>, usize)> = Vec::new();
        for (key, list) in &self.sessions {
            for (i, s) in list.iter().enumerate() {
                if s.pending && s.end - 1 <= self.watermark {
                    due.push((s.end, s.start, key.clone(), i));
                }
            }
        }
        due.sort_unstable();
        due.into_iter().map(|(_, _, k, i)| (k, i)).collect()
    }

    fn overflow(&self, row: usize, ts: i64) -> Error {
        Error::BadRecord {
            location: RecordLocation {
                input: format!("event-time column, row {row}"),
                line: None,
                column: Some(self.cfg.time_field.clone()),
            },
            message: format!(
                "event time {ts} ms in row {row} of field `{}` plus the session gap does not \
                 fit in 64-bit milliseconds",
                self.cfg.time_field
            ),
        }
    }
}

impl Operator for SessionWindowOperator {
    fn process_batch(&mut self, _input: usize, batch: RecordBatch, out: &mut Output) -> Result<()> {
        let times = event_times_ms(batch.column(self.cfg.time_index), &self.cfg.time_field)?;
        let keys: Vec<ArrayRef> = self
            .cfg
            .key_indices
            .iter()
            .map(|&i| Arc::clone(batch.column(i)))
            .collect();
        let n = batch.num_rows();
        let key_rows = if keys.is_empty() {
            None
        } else {
            Some(self.encode_keys(&keys)?)
        };
        let update = self.cfg.policy == LatePolicyKind::Update;
        let lateness = self.cfg.allowed_lateness;
        let slots_before = self.slots;
        let mut parent: Vec<usize> = (0..self.slots).collect();
        let mut merged_old = false;
        let mut taken = vec![false; n];
        let mut rows: Vec<u32> = Vec::with_capacity(n);
        let mut row_slot: Vec<usize> = Vec::with_capacity(n);
        for i in 0..n {
            if times.is_null(i) {
                continue;
            }
            let ts = times.value(i);
            let end = ts
                .checked_add(self.gap)
                .ok_or_else(|| self.overflow(i, ts))?;
            let key: &[u8] = key_rows.as_ref().map_or(&[], |rows| rows.row(i).data());
            let list = self.sessions.entry_ref(key).or_default();
            // Sessions this row's window [ts, end) touches (inclusive bounds).
            let mut hits = list
                .iter()
                .enumerate()
                .filter(|(_, s)| s.start <= end && ts <= s.end)
                .map(|(j, _)| j);
            let slot = match hits.next() {
                None => {
                    let complete = end - 1 <= self.watermark;
                    if complete && !(update && (end - 1).saturating_add(lateness) > self.watermark)
                    {
                        continue;
                    }
                    let slot = self.slots;
                    self.slots += 1;
                    parent.push(slot);
                    list.push(Session {
                        start: ts,
                        end,
                        slot,
                        emitted: false,
                        pending: true,
                    });
                    list.sort_by_key(|s| s.start);
                    slot
                }
                Some(first) => {
                    let others: Vec<usize> = hits.collect();
                    let mut merged = list[first].clone();
                    merged.start = merged.start.min(ts);
                    merged.end = merged.end.max(end);
                    merged.pending = true;
                    for &j in others.iter().rev() {
                        let s = list.remove(j);
                        merged.start = merged.start.min(s.start);
                        merged.end = merged.end.max(s.end);
                        merged.emitted |= s.emitted;
                        let (a, b) = (find(&mut parent, s.slot), find(&mut parent, merged.slot));
                        parent[a] = b;
                        merged_old |= s.slot < slots_before;
                    }
                    let slot = merged.slot;
                    let moved = merged.start != list[first].start || !others.is_empty();
                    list[first] = merged;
                    if moved {
                        list.sort_by_key(|s| s.start);
                    }
                    slot
                }
            };
            taken[i] = true;
            rows.push(i as u32);
            row_slot.push(slot);
        }

        if merged_old {
            // Move the states of merged-away sessions into their survivors.
            let (_, states) = self.space.drain()?;
            let groups: Vec<usize> = (0..slots_before).map(|s| find(&mut parent, s)).collect();
            self.space.merge_indexed(&groups, self.slots, &states)?;
        }
        for s in &mut row_slot {
            *s = find(&mut parent, *s);
        }
        if !rows.is_empty() {
            let args = self.cfg.aggregates.arguments(&batch)?;
            let args = if rows.len() == n {
                args
            } else {
                let idx = UInt32Array::from(rows);
                args.iter()
                    .map(|cols| take_all(cols, &idx))
                    .collect::<Result<_>>()?
            };
            self.space.update_indexed(&row_slot, self.slots, &args)?;
        }
        // Late rows that landed in complete sessions (update policy) re-emit them now.
        let due = self.due();
        if !due.is_empty() || merged_old {
            let watermark = self.watermark;
            self.emit_and_compact(
                &due,
                |s| (s.end - 1).saturating_add(lateness) > watermark || s.pending,
                out,
            )?;
        }
        self.late.handle(&batch, &times, &taken, out)
    }

    fn process_watermark(&mut self, watermark: Watermark, out: &mut Output) -> Result<()> {
        if watermark.0.0 > self.watermark {
            self.watermark = watermark.0.0;
            let due = self.due();
            let lateness = self.cfg.allowed_lateness;
            let wm = self.watermark;
            let expired = self
                .sessions
                .values()
                .flatten()
                .any(|s| (s.end - 1).saturating_add(lateness) <= wm);
            if !due.is_empty() || expired {
                self.emit_and_compact(&due, |s| (s.end - 1).saturating_add(lateness) > wm, out)?;
            }
        }
        out.emit_watermark(watermark);
        Ok(())
    }

    fn snapshot_image(&mut self, _barrier: Barrier) -> Result<Option<StateImage>> {
        // Every session (keys, bounds, flags, partial states) is taken out and put back; the
        // columns are the image, encoded and written in the background.
        let (_, states) = self.space.drain()?;
        let mut entries: Vec<(WindowId, u8, Vec<u8>, u32)> = Vec::new();
        for (key, list) in &self.sessions {
            for s in list {
                let flags = if s.emitted { FLAG_EMITTED } else { 0 };
                entries.push((
                    WindowId {
                        end: s.end,
                        start: s.start,
                    },
                    flags,
                    key.clone(),
                    s.slot as u32,
                ));
            }
        }
        entries.sort_unstable();
        let key_refs: Vec<&[u8]> = entries.iter().map(|e| &*e.2).collect();
        let keys = self.key_columns(&key_refs)?;
        let idx = UInt32Array::from(entries.iter().map(|e| e.3).collect::<Vec<_>>());
        let rows_states: Vec<Vec<ArrayRef>> = states
            .iter()
            .map(|s| take_all(s, &idx))
            .collect::<Result<_>>()?;
        let groups: Vec<usize> = (0..self.slots).collect();
        self.space.merge_indexed(&groups, self.slots, &states)?;
        let ids: Vec<(WindowId, u8)> = entries.iter().map(|e| (e.0, e.1)).collect();
        let parts = vec![(ImageWindows::PerRow(ids), (keys, rows_states))];
        Ok(Some(self.state.image(self.watermark, parts)))
    }
}
