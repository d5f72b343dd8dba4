//! Session windows: per key, a row opens `[ts, ts + gap)` and merges with every session it
//! touches (bounds inclusive, as Flink's `TimeWindow.intersects`: rows exactly one gap apart
//! share a session). A late or out-of-order row that bridges two sessions merges them.
//!
//! Every session owns one or more parts of partial state in a [`PartStore`]: the rows of a
//! batch are aggregated with one vectorized update into a chunk with one row per session they
//! touched, and merging two sessions only hands the parts of one to the other (their states
//! are combined when the session fires). Assigning rows to sessions is a per-row loop over the
//! key's few sessions (metadata only: no values are touched row by row). Sessions due to fire
//! are found in a heap by end time, and firing gathers only their parts, so a watermark costs
//! what fires, not what is open.

mod fire;
mod image;
mod parts;

use super::config::{LatePolicyKind, WindowConfig};
use super::image::{RestoredWindows, WindowState};
use super::output::take_all;
use crate::event_time::event_times_ms;
use crate::late::LateRows;
use arrow::array::{Array, ArrayRef, RecordBatch, UInt32Array};
use arrow::row::{RowConverter, Rows, SortField};
use datafusion::common::HashMap;
use parts::{MAX_PARTS, Part, PartStore, States};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
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
    /// The parts holding its partial states (one per batch that gave it rows, until they are
    /// combined).
    parts: Vec<Part>,
}

/// A place in the session arena. `generation` changes when its session is gone, so heap
/// entries of an earlier session in the same place are recognised and skipped.
#[derive(Debug)]
struct Entry {
    generation: u32,
    /// The session has an entry in the due heap (at its end then, or earlier: an entry whose
    /// session has grown since is queued again at the new end when it comes up).
    queued: bool,
    /// While a batch is assigned to sessions: the batch's group of rows for this session
    /// (`u32::MAX`: none yet).
    batch_group: u32,
    session: Option<Session>,
}

impl Default for Entry {
    fn default() -> Self {
        Self {
            generation: 0,
            queued: false,
            batch_group: u32::MAX,
            session: None,
        }
    }
}

/// The groups of rows of one batch, one per session the batch gives rows to. A session merged
/// into another within the batch hands its group on: its group is then an alias of the
/// survivor's (or becomes the survivor's, when the survivor has none yet).
#[derive(Default)]
struct BatchGroups {
    /// The session of each group still its own (`alias[g] == g`).
    owner: Vec<u32>,
    /// The group each group's rows go to.
    alias: Vec<u32>,
}

impl BatchGroups {
    fn root(&self, mut g: u32) -> u32 {
        while self.alias[g as usize] != g {
            g = self.alias[g as usize];
        }
        g
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
    parts: PartStore,
    /// The row groups of the batch being assigned.
    batch: BatchGroups,
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
        let parts = PartStore::new(Arc::clone(&cfg.aggregates))?;
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
            parts,
            batch: BatchGroups::default(),
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

    /// A new pending session `[start, end)` of key `kid`, with no state yet.
    fn new_session(&mut self, kid: u32, start: i64, end: i64) -> u32 {
        let sid = match self.free_sessions.pop() {
            Some(sid) => sid,
            None => {
                self.arena.push(Entry::default());
                (self.arena.len() - 1) as u32
            }
        };
        let at = self.position(kid, start);
        let entry = &mut self.arena[sid as usize];
        entry.queued = false;
        entry.batch_group = u32::MAX;
        entry.session = Some(Session {
            key: kid,
            start,
            end,
            emitted: false,
            pending: true,
            parts: Vec::new(),
        });
        self.keys[kid as usize].sessions.insert(at, sid);
        sid
    }

    /// Extends session `sid` by a row's window `[ts, end)` and merges the sessions `others`
    /// (of the same key) into it: they hand it their parts, and their rows of this batch.
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
            let group = std::mem::replace(&mut entry.batch_group, u32::MAX);
            self.free_sessions.push(o);
            if group != u32::MAX {
                let survivor = &mut self.arena[sid as usize].batch_group;
                if *survivor == u32::MAX {
                    *survivor = group;
                    self.batch.owner[group as usize] = sid;
                } else {
                    self.batch.alias[group as usize] = *survivor;
                }
            }
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

    /// Removes a session: releases its parts, and its key when it was the key's last session.
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
            self.parts.release(part);
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

    /// Gives session `sids[i]` row `i` of `states` as one more part.
    fn attach(&mut self, sids: &[u32], states: States) {
        if sids.is_empty() {
            return;
        }
        let chunk = self.parts.insert(states, sids.len());
        for (row, &sid) in sids.iter().enumerate() {
            match self.session_mut(sid) {
                Some(s) => s.parts.push((chunk, row as u32)),
                None => self.parts.release((chunk, row as u32)),
            }
        }
    }

    /// Combines every part of each session of `sids` into one. Returns the sessions that had
    /// parts and their combined states, one row each, in that order.
    fn compact(&mut self, sids: &[u32]) -> Result<(Vec<u32>, States)> {
        let mut parts = Vec::new();
        let mut groups = Vec::new();
        let mut owners = Vec::new();
        for &sid in sids {
            if let Some(s) = self.session(sid)
                && !s.parts.is_empty()
            {
                groups.extend(std::iter::repeat_n(owners.len(), s.parts.len()));
                parts.extend_from_slice(&s.parts);
                owners.push(sid);
            }
        }
        let states = self.parts.combine(&parts, &groups, owners.len())?;
        for &part in &parts {
            self.parts.release(part);
        }
        for &sid in &owners {
            if let Some(s) = self.session_mut(sid) {
                s.parts.clear();
            }
        }
        self.attach(&owners, states.clone());
        Ok((owners, states))
    }

    /// Every session, for rewriting all parts.
    fn live_sessions(&self) -> Vec<u32> {
        (0..self.arena.len() as u32)
            .filter(|&sid| self.session(sid).is_some())
            .collect()
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
        // Each taken row's group in `self.batch` (resolved through aliases below).
        let mut row_group: Vec<u32> = Vec::with_capacity(n);
        self.batch.owner.clear();
        self.batch.alias.clear();
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
                    self.new_session(kid, ts, end)
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
            let entry = &mut self.arena[sid as usize];
            if entry.batch_group == u32::MAX {
                let g = self.batch.owner.len() as u32;
                entry.batch_group = g;
                self.batch.owner.push(sid);
                self.batch.alias.push(g);
            }
            row_group.push(entry.batch_group);
            *is_taken = true;
            if late {
                late_updates += 1;
            }
            rows.push(i as u32);
        }

        if !rows.is_empty() {
            // The groups still their own, numbered densely; merged groups go to their root.
            let mut dense = vec![u32::MAX; self.batch.owner.len()];
            let mut owners: Vec<u32> = Vec::new();
            for g in 0..self.batch.owner.len() as u32 {
                if self.batch.alias[g as usize] == g {
                    dense[g as usize] = owners.len() as u32;
                    owners.push(self.batch.owner[g as usize]);
                }
            }
            let groups: Vec<usize> = row_group
                .iter()
                .map(|&g| dense[self.batch.root(g) as usize] as usize)
                .collect();
            let args = self.cfg.aggregates.arguments(&batch)?;
            let args = if rows.len() == n {
                args
            } else {
                let idx = UInt32Array::from(rows);
                args.iter()
                    .map(|cols| take_all(cols, &idx))
                    .collect::<Result<_>>()?
            };
            let chunk = self.parts.update(&groups, owners.len(), &args)?;
            let mut crowded = Vec::new();
            for (row, &sid) in owners.iter().enumerate() {
                match self.session_mut(sid) {
                    Some(s) => {
                        s.parts.push((chunk, row as u32));
                        if s.parts.len() > MAX_PARTS {
                            crowded.push(sid);
                        }
                    }
                    None => self.parts.release((chunk, row as u32)),
                }
            }
            // Every session the batch gave rows to (merged ones live on in their survivor)
            // waits in the due heap.
            for &sid in &owners {
                self.arena[sid as usize].batch_group = u32::MAX;
                self.queue(sid);
            }
            if self.parts.wants_compaction() {
                let all = self.live_sessions();
                self.compact(&all)?;
            } else if !crowded.is_empty() {
                self.compact(&crowded)?;
            }
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
