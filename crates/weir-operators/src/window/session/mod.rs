//! Session windows: per key, a row opens `[ts, ts + gap)` and merges with every session it
//! touches (bounds inclusive, as Flink's `TimeWindow.intersects`: rows exactly one gap apart
//! share a session). A late or out-of-order row that bridges two sessions merges them.
//!
//! Every session owns one or more slots in [`SlotBuckets`]: rows are aggregated with one
//! vectorized update per batch and bucket, and merging two sessions only hands the slots of one
//! to the other (their states are combined when the session fires). Assigning rows to sessions
//! is a per-row loop over the key's few sessions (metadata only: no values are touched row by
//! row). Sessions due to fire are found in a heap by end time, so a watermark costs what fires,
//! not what is open.

mod fire;
mod image;
mod slots;

use super::config::{LatePolicyKind, WindowConfig};
use super::image::{RestoredWindows, WindowState};
use super::output::{LateRows, take_all};
use crate::event_time::event_times_ms;
use arrow::array::{Array, ArrayRef, RecordBatch, UInt32Array};
use arrow::row::{RowConverter, Rows, SortField};
use datafusion::common::HashMap;
use slots::{Part, SlotBuckets};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::sync::Arc;
use weir_api::{Barrier, Error, Operator, Output, RecordLocation, Result, StateImage, Watermark};

/// Session flag persisted with a session: a result of it was emitted before.
const FLAG_EMITTED: u8 = 1;

#[derive(Debug, Clone)]
struct Session {
    key: u32,
    start: i64,
    /// Exclusive: the last row's time plus the gap.
    end: i64,
    /// A result of this session (or of a session merged into it) was emitted.
    emitted: bool,
    /// Rows were added since the last emission.
    pending: bool,
    /// The slots holding its partial states (more than one after merges).
    parts: Vec<Part>,
    /// The slot new rows go to.
    write: Part,
}

/// A place in the session arena. `generation` changes when its session is gone, so heap
/// entries of an earlier session in the same place are recognised and skipped.
#[derive(Debug)]
struct Entry {
    generation: u32,
    /// The session has an entry in the due heap (at its end then, or earlier: an entry whose
    /// session has grown since is queued again at the new end when it comes up).
    queued: bool,
    /// While its session fires: its row in the results (`u32::MAX` otherwise).
    fire_row: u32,
    /// While a firing carries its session: it has its new slot.
    carried: bool,
    session: Option<Session>,
}

impl Default for Entry {
    fn default() -> Self {
        Self {
            generation: 0,
            queued: false,
            fire_row: u32::MAX,
            carried: false,
            session: None,
        }
    }
}

/// The sessions of one key, by start.
#[derive(Debug, Default)]
struct KeySessions {
    bytes: Vec<u8>,
    sessions: Vec<u32>,
}

/// A session-window operator instance (one subtask).
pub struct SessionWindowOperator {
    cfg: Arc<WindowConfig>,
    gap: i64,
    watermark: i64,
    /// The watermark of their own split that the rows of the next batches were read behind
    /// (`i64::MIN`: none). A row whose own window ends at or behind the larger of this and
    /// `watermark` is late.
    split_watermark: i64,
    /// Key rows in arrow's row format (memory only; persisted keys use the state row codec).
    converter: RowConverter,
    key_ids: HashMap<Vec<u8>, u32>,
    keys: Vec<KeySessions>,
    free_keys: Vec<u32>,
    arena: Vec<Entry>,
    free_sessions: Vec<u32>,
    slots: SlotBuckets,
    /// Pending sessions by end: `(end, session, generation)`.
    due: BinaryHeap<Reverse<(i64, u32, u32)>>,
    /// Fired sessions kept for late rows (update policy) by deadline.
    expiry: BinaryHeap<Reverse<(i64, u32, u32)>>,
    late: LateRows,
    /// Where its sessions go in checkpoints.
    state: WindowState,
}

impl std::fmt::Debug for SessionWindowOperator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionWindowOperator")
            .field("keys", &self.key_ids.len())
            .field("sessions", &(self.arena.len() - self.free_sessions.len()))
            .field("watermark", &self.watermark)
            .finish()
    }
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
        let slots = SlotBuckets::new(Arc::clone(&cfg.aggregates), gap);
        let mut op = Self {
            cfg,
            gap,
            watermark: restored.watermark,
            split_watermark: i64::MIN,
            converter,
            key_ids: HashMap::default(),
            keys: Vec::new(),
            free_keys: Vec::new(),
            arena: Vec::new(),
            free_sessions: Vec::new(),
            slots,
            due: BinaryHeap::new(),
            expiry: BinaryHeap::new(),
            late,
            state,
        };
        op.restore(restored)?;
        Ok(op)
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

    /// The id of a key, registering it when new.
    fn key_id(&mut self, key: &[u8]) -> u32 {
        if let Some(&id) = self.key_ids.get(key) {
            return id;
        }
        let entry = KeySessions {
            bytes: key.to_vec(),
            sessions: Vec::new(),
        };
        let id = match self.free_keys.pop() {
            Some(id) => {
                self.keys[id as usize] = entry;
                id
            }
            None => {
                self.keys.push(entry);
                (self.keys.len() - 1) as u32
            }
        };
        self.key_ids.insert(key.to_vec(), id);
        id
    }

    fn session(&self, sid: u32) -> Option<&Session> {
        self.arena.get(sid as usize)?.session.as_ref()
    }

    fn session_mut(&mut self, sid: u32) -> Option<&mut Session> {
        self.arena.get_mut(sid as usize)?.session.as_mut()
    }

    /// Where a session starting at `start` goes in the key's list (sessions of a key never
    /// overlap, so the list is in start and in end order).
    fn position(&self, kid: u32, start: i64) -> usize {
        self.keys[kid as usize].sessions.partition_point(|&o| {
            self.arena[o as usize]
                .session
                .as_ref()
                .is_some_and(|s| s.start <= start)
        })
    }

    /// A new pending session `[start, end)` of key `kid` with a fresh slot.
    fn new_session(&mut self, kid: u32, start: i64, end: i64) -> Result<u32> {
        let sid = match self.free_sessions.pop() {
            Some(sid) => sid,
            None => {
                self.arena.push(Entry::default());
                (self.arena.len() - 1) as u32
            }
        };
        let part = self.slots.alloc(self.slots.bucket_of(start), sid)?;
        let at = self.position(kid, start);
        let entry = &mut self.arena[sid as usize];
        entry.queued = false;
        entry.session = Some(Session {
            key: kid,
            start,
            end,
            emitted: false,
            pending: true,
            parts: vec![part],
            write: part,
        });
        self.keys[kid as usize].sessions.insert(at, sid);
        Ok(sid)
    }

    /// Extends session `sid` by a row's window `[ts, end)` and merges the sessions `others`
    /// (of the same key) into it: they hand it their slots.
    fn extend(&mut self, sid: u32, ts: i64, end: i64, others: &[u32]) {
        let mut moved: Vec<Part> = Vec::new();
        let (mut start, mut last, mut emitted) = (ts, end, false);
        for &o in others {
            if let Some(s) = self.arena[o as usize].session.take() {
                start = start.min(s.start);
                last = last.max(s.end);
                emitted |= s.emitted;
                moved.extend(s.parts);
            }
            let entry = &mut self.arena[o as usize];
            entry.generation = entry.generation.wrapping_add(1);
            self.free_sessions.push(o);
        }
        for &part in &moved {
            self.slots.set_owner(part, sid);
        }
        let Some(s) = self.session_mut(sid) else {
            return;
        };
        s.start = s.start.min(start);
        s.end = s.end.max(last);
        s.emitted |= emitted;
        s.pending = true;
        s.parts.extend(moved);
        let kid = s.key;
        // The merged session covers the ones it took in and no other session lies between
        // them: the list stays in order without them.
        if !others.is_empty() {
            self.keys[kid as usize]
                .sessions
                .retain(|o| !others.contains(o));
        }
    }

    /// Queues a pending session in the due heap at its current end, unless it is queued.
    fn queue(&mut self, sid: u32) {
        let Some(entry) = self.arena.get_mut(sid as usize) else {
            return;
        };
        if entry.queued {
            return;
        }
        if let Some(s) = entry.session.as_ref()
            && s.pending
        {
            self.due.push(Reverse((s.end, sid, entry.generation)));
            entry.queued = true;
        }
    }

    /// Removes a session: frees its slots, and its key when it was the key's last session.
    fn remove(&mut self, sid: u32) {
        let Some(entry) = self.arena.get_mut(sid as usize) else {
            return;
        };
        let Some(s) = entry.session.take() else {
            return;
        };
        entry.generation = entry.generation.wrapping_add(1);
        self.free_sessions.push(sid);
        for part in s.parts {
            self.slots.release(part);
        }
        let at = self.keys[s.key as usize].sessions.partition_point(|&o| {
            self.arena[o as usize]
                .session
                .as_ref()
                .is_some_and(|x| x.start < s.start)
        });
        let key = &mut self.keys[s.key as usize];
        if key.sessions.get(at) == Some(&sid) {
            key.sessions.remove(at);
        } else {
            key.sessions.retain(|&o| o != sid);
        }
        if key.sessions.is_empty() {
            let bytes = std::mem::take(&mut key.bytes);
            self.key_ids.remove(bytes.as_slice());
            self.free_keys.push(s.key);
        }
    }

    /// Merges partial states (row `i` for session `sids[i]`) into each session's write slot.
    fn merge_into_writes(&mut self, sids: &[u32], states: &[Vec<ArrayRef>]) -> Result<()> {
        // Rows by bucket; there are few buckets, usually one.
        let mut by_bucket: Vec<(i64, u64, Vec<u32>, Vec<usize>)> = Vec::new();
        for (row, &sid) in sids.iter().enumerate() {
            let Some(write) = self.session(sid).map(|s| s.write) else {
                continue;
            };
            let at = match by_bucket.iter().position(|b| b.0 == write.0) {
                Some(at) => at,
                None => {
                    let base = self.slots.base(write.0);
                    by_bucket.push((write.0, base, Vec::new(), Vec::new()));
                    by_bucket.len() - 1
                }
            };
            let b = &mut by_bucket[at];
            b.2.push(row as u32);
            b.3.push((write.1 - b.1) as usize);
        }
        let all = by_bucket.len() == 1 && by_bucket[0].2.len() == sids.len();
        for (bucket, _, rows, groups) in by_bucket {
            let taken: Vec<Vec<ArrayRef>> = if all {
                states.to_vec()
            } else {
                let idx = UInt32Array::from(rows);
                states
                    .iter()
                    .map(|s| take_all(s, &idx))
                    .collect::<Result<_>>()?
            };
            self.slots.merge(bucket, &groups, &taken)?;
        }
        Ok(())
    }

    /// Fires every pending session with `end - 1 <= watermark`, then drops the fired sessions
    /// whose allowed lateness has passed.
    fn fire(&mut self, out: &mut Output) -> Result<()> {
        let wm = self.watermark;
        let mut due: Vec<u32> = Vec::new();
        while let Some(&Reverse((end, sid, generation))) = self.due.peek() {
            if end - 1 > wm {
                break;
            }
            self.due.pop();
            let entry = &mut self.arena[sid as usize];
            if entry.generation != generation {
                continue;
            }
            entry.queued = false;
            let Some(s) = entry.session.as_ref() else {
                continue;
            };
            if !s.pending {
                continue;
            }
            if s.end != end {
                // It grew since it was queued: queue it at its end now (perhaps due too).
                self.due.push(Reverse((s.end, sid, generation)));
                entry.queued = true;
                continue;
            }
            due.push(sid);
        }
        if !due.is_empty() {
            self.emit(due, out)?;
        }
        let lateness = self.cfg.allowed_lateness;
        while let Some(&Reverse((deadline, sid, generation))) = self.expiry.peek() {
            if deadline > wm {
                break;
            }
            self.expiry.pop();
            let entry = &self.arena[sid as usize];
            // An entry of a session that got late rows since is stale: a newer one follows.
            if entry.generation == generation
                && entry
                    .session
                    .as_ref()
                    .is_some_and(|s| !s.pending && (s.end - 1).saturating_add(lateness) <= wm)
            {
                self.remove(sid);
            }
        }
        Ok(())
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
        let late_bound = self.watermark.max(self.split_watermark);
        let mut taken = vec![false; n];
        let mut rows: Vec<u32> = Vec::with_capacity(n);
        let mut row_part: Vec<Part> = Vec::with_capacity(n);
        let mut touched: Vec<u32> = Vec::new();
        let mut others: Vec<u32> = Vec::new();
        let mut late_updates = 0;
        for (i, is_taken) in taken.iter_mut().enumerate() {
            if times.is_null(i) {
                continue;
            }
            let ts = times.value(i);
            let end = ts
                .checked_add(self.gap)
                .ok_or_else(|| self.overflow(i, ts))?;
            let key: &[u8] = key_rows.as_ref().map_or(&[], |rows| rows.row(i).data());
            let kid = self.key_id(key);
            // Sessions this row's window [ts, end) touches (inclusive bounds).
            // The key's sessions are in start and end order: the ones starting at or before
            // `end`, back to the first that ends before `ts`.
            others.clear();
            let list = &self.keys[kid as usize].sessions;
            let mut j = self.position(kid, end);
            while j > 0 {
                let sid = list[j - 1];
                match self.arena[sid as usize].session.as_ref() {
                    Some(s) if ts <= s.end => others.push(sid),
                    _ => break,
                }
                j -= 1;
            }
            // The earliest one takes the others in.
            let first = others.pop();
            others.reverse();
            // A late row: its own window is complete and it joins no session still pending
            // (under the update policy it re-opens a fired one, or starts one already complete).
            let late = update
                && end - 1 <= late_bound
                && first.is_none_or(|sid| self.session(sid).is_some_and(|s| !s.pending));
            let sid = match first {
                None => {
                    let complete = end - 1 <= late_bound;
                    if complete && !(update && (end - 1).saturating_add(lateness) > late_bound) {
                        continue;
                    }
                    self.new_session(kid, ts, end)?
                }
                Some(sid) => {
                    let same = others.is_empty()
                        && self
                            .session(sid)
                            .is_some_and(|s| s.start <= ts && end <= s.end && s.pending);
                    if !same {
                        let merged = std::mem::take(&mut others);
                        self.extend(sid, ts, end, &merged);
                        others = merged;
                    }
                    sid
                }
            };
            touched.push(sid);
            *is_taken = true;
            if late {
                late_updates += 1;
            }
            rows.push(i as u32);
            row_part.push(self.session(sid).map_or((0, 0), |s| s.write));
        }

        if !rows.is_empty() {
            let args = self.cfg.aggregates.arguments(&batch)?;
            let bucket = row_part[0].0;
            if row_part.iter().all(|p| p.0 == bucket) {
                let base = self.slots.base(bucket);
                let groups: Vec<usize> = row_part.iter().map(|p| (p.1 - base) as usize).collect();
                let args = if rows.len() == n {
                    args
                } else {
                    let idx = UInt32Array::from(rows);
                    args.iter()
                        .map(|cols| take_all(cols, &idx))
                        .collect::<Result<_>>()?
                };
                self.slots.update(bucket, &groups, &args)?;
            } else {
                let mut by_bucket: BTreeMap<i64, (Vec<u32>, Vec<usize>)> = BTreeMap::new();
                for (&row, &part) in rows.iter().zip(&row_part) {
                    let entry = by_bucket.entry(part.0).or_default();
                    entry.0.push(row);
                    entry.1.push(self.slots.group(part));
                }
                for (bucket, (idx, groups)) in by_bucket {
                    let idx = UInt32Array::from(idx);
                    let taken_args: Vec<Vec<ArrayRef>> = args
                        .iter()
                        .map(|cols| take_all(cols, &idx))
                        .collect::<Result<_>>()?;
                    self.slots.update(bucket, &groups, &taken_args)?;
                }
            }
        }
        for sid in touched {
            self.queue(sid);
        }
        // Late rows that landed in complete sessions (update policy) re-emit them now.
        self.fire(out)?;
        self.late.note_updated(late_updates);
        self.late.handle(&batch, &times, &taken, out)
    }

    fn process_watermark(&mut self, watermark: Watermark, out: &mut Output) -> Result<()> {
        if watermark.0.0 > self.watermark {
            self.watermark = watermark.0.0;
            self.fire(out)?;
        }
        out.emit_watermark(watermark);
        Ok(())
    }

    /// Kept, not forwarded: the rows this operator emits are results, not rows of a split.
    fn process_split_watermark(
        &mut self,
        _input: usize,
        watermark: Watermark,
        _out: &mut Output,
    ) -> Result<()> {
        self.split_watermark = watermark.0.0;
        Ok(())
    }

    fn snapshot_image(&mut self, _barrier: Barrier) -> Result<Option<StateImage>> {
        self.snapshot().map(Some)
    }
}
