//! One subtask of an interval join: each side's rows kept in keyed state until the watermark
//! passes their bound, each arriving row matched against the other side's.
//!
//! Arriving rows wait in memory ([`SideBuffer`]) until a checkpoint barrier, or until the
//! buffers outgrow their budget; then they are written into keyed state, where probes find
//! them too. A restore finds every row in state, since each barrier flushed the buffers first.
//! The budget is the `buffer_bytes` option, for both sides of one instance.
//!
//! State layout (one map state per side, `interval_join.left` / `.right`): key = the join key
//! (row codec), namespace = the row's time bucket ([`encode_timestamp`] of `time / bucket`),
//! sub-key = the row's time ([`encode_timestamp`]) and its columns (row codec), payload = how
//! many such rows arrived (`u32`, little endian) and whether one of them matched (`u8`).
//! Identical rows share one entry. `interval_join.watermarks` keeps both inputs' watermarks and
//! the operator's ([`ShardProgress`]), so a restore judges rows as the run before it did.

use super::buffer::{Arrivals, RowRef, SideBuffer};
use super::config::{IntervalJoinConfig, JoinKind};
use super::occupancy::Occupancy;
use crate::late::{LateRows, routed_schema};
use crate::shard_progress::ShardProgress;
use arrow::array::{Array, ArrayRef, Int64Array, UInt32Array, new_null_array};
use arrow::compute::{concat, take};
use arrow::datatypes::DataType;
use arrow::record_batch::RecordBatch;
use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;
use weir_api::state::{Map, NamespaceRange, StateDescriptor};
use weir_api::{
    Error, KeyedStateStore, Operator, Output, Result, StateAddress, StateShardId, TaskContext,
    Watermark,
};
use weir_plan::key_hash;
use weir_state::row_codec::{decode_rows, encode_rows};
use weir_state::timers::{decode_timestamp, encode_timestamp};

const STATES: [&str; 2] = ["interval_join.left", "interval_join.right"];
const WATERMARKS: &str = "interval_join.watermarks";

/// A running interval join.
pub struct IntervalJoinOperator {
    cfg: Arc<IntervalJoinConfig>,
    store: Box<dyn KeyedStateStore>,
    shard_count: u32,
    /// Both inputs' watermarks and the operator's, kept for a restore.
    progress: ShardProgress,
    bucket: i64,
    /// Per input, its own watermark: a row at or behind it is late.
    input_watermarks: [i64; 2],
    /// Per input, the split watermark its next rows were read behind.
    split_watermarks: [i64; 2],
    /// The operator's input watermark (the lower of both inputs').
    watermark: i64,
    /// The output watermark emitted last.
    emitted: i64,
    /// Per side, the bucket below which every row was removed.
    evicted_below: [i64; 2],
    /// Shards holding rows (owned shards this instance wrote to or restored).
    live: BTreeSet<u32>,
    started: bool,
    /// Per input, where its late rows go.
    late: [LateRows; 2],
    types: [Vec<DataType>; 2],
    /// Which (side, key, bucket) may hold rows in state: reads of the state skip the rest.
    occupancy: Occupancy,
    /// Per side, the rows that arrived since the last flush into state.
    buffers: [SideBuffer; 2],
}

impl IntervalJoinOperator {
    /// The instance of subtask `ctx`.
    ///
    /// # Errors
    /// Without keyed state (the runtime gives every keyed operator one) or a shard count.
    pub fn new(cfg: Arc<IntervalJoinConfig>, ctx: &TaskContext) -> Result<Self> {
        let mut store = ctx.keyed_state()?;
        let shard_count = ctx.state_shard_count.unwrap_or(1);
        for name in STATES {
            store.register(StateDescriptor::<Map<Vec<u8>, Vec<u8>>>::new(name).spec())?;
        }
        let progress = ShardProgress::new(ctx, store.as_mut(), WATERMARKS)?;
        let types = [0, 1].map(|side| {
            cfg.inputs[side]
                .fields()
                .iter()
                .map(|f| f.data_type().clone())
                .collect()
        });
        let late = [0, 1].map(|side| {
            LateRows::new(routed_schema(cfg.late, &cfg.inputs[side]), ctx).at_output(side)
        });
        Ok(Self {
            bucket: cfg.bucket_ms(),
            cfg,
            store,
            shard_count,
            progress,
            input_watermarks: [i64::MIN; 2],
            split_watermarks: [i64::MIN; 2],
            watermark: i64::MIN,
            emitted: i64::MIN,
            evicted_below: [i64::MIN; 2],
            live: BTreeSet::new(),
            started: false,
            late,
            types,
            occupancy: Occupancy::new(),
            buffers: [SideBuffer::default(), SideBuffer::default()],
        })
    }

    /// Finds the shards with rows and the watermarks of a restored checkpoint, once.
    fn start(&mut self) -> Result<()> {
        if self.started {
            return Ok(());
        }
        self.started = true;
        self.live = self.progress.live_shards(self.store.as_mut(), &STATES)?;
        if let Some([left, right, both]) = self.progress.restore(self.store.as_mut())? {
            self.input_watermarks = [left, right];
            self.watermark = both;
            self.emitted = self.output_watermark(both);
        }
        // Restored rows are counted in the filter before any probe.
        for (side, state) in STATES.iter().enumerate() {
            for shard in self.live.clone() {
                let entries =
                    self.store
                        .scan(state, StateShardId(shard), NamespaceRange::ALL, None)?;
                for entry in entries {
                    let bucket = decode_timestamp(&entry.namespace).map_err(state_error)?;
                    let (count, _) = decode_payload(&entry.payload)?;
                    self.occupancy.add(side, &entry.key, bucket, count);
                }
            }
        }
        Ok(())
    }

    fn output_watermark(&self, watermark: i64) -> i64 {
        if watermark == i64::MAX {
            return i64::MAX;
        }
        watermark.saturating_sub(self.cfg.output_delay(self.bucket))
    }

    /// The rows of `side` whose bound passed: time at or below this.
    fn expired_through(&self, side: usize) -> i64 {
        if self.watermark == i64::MAX {
            return i64::MAX;
        }
        match side {
            0 => self.watermark.saturating_sub(self.cfg.upper),
            _ => self.watermark.saturating_add(self.cfg.lower),
        }
    }

    fn bucket_of(&self, time: i64) -> i64 {
        time.div_euclid(self.bucket)
    }

    /// Matches `batch` of input `side` against the other side's rows and keeps its rows.
    ///
    /// Three steps: the stored rows of the other side within each arriving row's bounds are
    /// gathered (candidates); the condition, if any, is evaluated over all candidate pairs at
    /// once; then the pairs that hold are emitted and marked, and the arriving rows kept (or
    /// padded when no row still to come can match them).
    fn join_batch(&mut self, side: usize, batch: &RecordBatch, out: &mut Output) -> Result<()> {
        self.start()?;
        if batch.num_rows() == 0 {
            return Ok(());
        }
        let keyed = self.read_keys(side, batch)?;
        let taken = self.route_late(side, batch, &keyed.times, out)?;
        let mut emits = Emits::default();
        // 1. The arriving rows on time with a key, and their candidates.
        let gathered = self.gather(side, &keyed, &taken, &mut emits.padded)?;
        // 2. The candidate pairs, left columns then right, and which of them match.
        let (pairs, holds) = self.match_pairs(side, batch, &gathered.candidates)?;
        // 3. Emit and mark the pairs that match; keep or pad the arriving rows.
        let matched = self.mark_matches(side, &keyed, &gathered.candidates, &holds, &mut emits)?;
        self.keep(
            side,
            batch,
            &keyed,
            &gathered.arriving,
            &matched,
            &mut emits,
        )?;
        self.emit(side, batch, pairs.as_ref(), &emits, out)?;
        if self.buffers[0].bytes() + self.buffers[1].bytes() > self.cfg.buffer_bytes {
            self.flush()?;
        }
        Ok(())
    }

    /// What every step reads of `batch`: its event times, and its join keys encoded once with
    /// their state shards.
    fn read_keys(&self, side: usize, batch: &RecordBatch) -> Result<Keyed> {
        let cfg = &self.cfg;
        let times = crate::event_time::event_times_ms(
            batch.column(cfg.time[side]),
            cfg.inputs[side].field(cfg.time[side]).name(),
        )?;
        let key_columns: Vec<ArrayRef> = cfg.keys[side]
            .iter()
            .map(|&i| Arc::clone(batch.column(i)))
            .collect();
        let shards = key_hash::shard_ids(&key_columns, self.shard_count)
            .map_err(|e| Error::Internal(format!("hashing join keys: {e}")))?;
        let keys = encode_rows(&key_columns).map_err(state_error)?;
        Ok(Keyed {
            times,
            key_columns,
            keys,
            shards,
        })
    }

    /// Hands the rows at or behind `side`'s watermark (or without a time) to its late rows;
    /// per row, whether it is on time and taken into the join.
    fn route_late(
        &mut self,
        side: usize,
        batch: &RecordBatch,
        times: &Int64Array,
        out: &mut Output,
    ) -> Result<Vec<bool>> {
        let behind = self.input_watermarks[side].max(self.split_watermarks[side]);
        let taken: Vec<bool> = (0..batch.num_rows())
            .map(|row| times.is_valid(row) && times.value(row) > behind)
            .collect();
        self.late[side].handle(batch, times, &taken, out)?;
        Ok(taken)
    }

    /// Step 1: the taken rows with a key and their candidates, the buffered ones first, then
    /// those in state (the order [`Self::pairs`] relies on). A row with a null key matches
    /// nothing: it goes to `padded` on a padded side.
    fn gather(
        &mut self,
        side: usize,
        keyed: &Keyed,
        taken: &[bool],
        padded: &mut Vec<u32>,
    ) -> Result<Gathered> {
        let other = 1 - side;
        let cfg = Arc::clone(&self.cfg);
        // The other side's times that match a row at `t`: `[t + lo_reach, t + hi_reach]`.
        let (lo_reach, hi_reach) = match side {
            0 => (cfg.lower, cfg.upper),
            _ => (cfg.upper.saturating_neg(), cfg.lower.saturating_neg()),
        };
        let mut arriving: Vec<u32> = Vec::new();
        let mut candidates: Vec<Candidate> = Vec::new();
        let mut stored: Vec<Candidate> = Vec::new();
        for (row, &on_time) in taken.iter().enumerate() {
            if !on_time {
                continue;
            }
            if keyed.key_columns.iter().any(|c| c.is_null(row)) {
                // NULL equals nothing: the row matches no row.
                if cfg.join.pads(side) {
                    padded.push(row as u32);
                }
                continue;
            }
            arriving.push(row as u32);
            let time = keyed.times.value(row);
            let (lo, hi) = (time.saturating_add(lo_reach), time.saturating_add(hi_reach));
            let buckets = self.bucket_of(lo)..=self.bucket_of(hi);
            self.buffers[other].probe(&keyed.keys[row], buckets.clone(), (lo, hi), |at| {
                candidates.push(Candidate {
                    row: row as u32,
                    found: Found::Buffered(at),
                });
            });
            for bucket in buckets {
                self.probe_state(other, keyed, row, bucket, (lo, hi), &mut stored)?;
            }
        }
        candidates.append(&mut stored);
        Ok(Gathered {
            arriving,
            candidates,
        })
    }

    /// Adds to `stored` the rows of `other` in state under `row`'s key and in `bucket` whose
    /// time lies within `lo..=hi`; reads nothing where the occupancy filter rules them out.
    fn probe_state(
        &mut self,
        other: usize,
        keyed: &Keyed,
        row: usize,
        bucket: i64,
        (lo, hi): (i64, i64),
        stored: &mut Vec<Candidate>,
    ) -> Result<()> {
        let key = &keyed.keys[row];
        if !self.occupancy.may_hold(other, key, bucket) {
            return Ok(());
        }
        self.store
            .set_current_key(key, StateShardId(keyed.shards[row]));
        self.store.set_current_namespace(&encode_timestamp(bucket));
        for (sub_key, payload) in self.store.entries(STATES[other])? {
            let (at, _) = split_sub_key(&sub_key)?;
            if at < lo || at > hi {
                continue;
            }
            let (count, matched) = decode_payload(&payload)?;
            stored.push(Candidate {
                row: row as u32,
                found: Found::Stored {
                    bucket,
                    sub_key,
                    count,
                    matched,
                },
            });
        }
        Ok(())
    }

    /// Step 2: the candidate pairs as one batch, built only when the condition or the output
    /// reads the other side's columns, and per candidate whether the condition holds.
    fn match_pairs(
        &self,
        side: usize,
        batch: &RecordBatch,
        candidates: &[Candidate],
    ) -> Result<(Option<RecordBatch>, Vec<bool>)> {
        let cfg = &self.cfg;
        let semi_probe = side == 1 && cfg.join == JoinKind::Semi;
        let pairs = if !candidates.is_empty()
            && (cfg.condition.is_some() || cfg.join.emits_right() || semi_probe)
        {
            Some(self.pairs(side, batch, candidates)?)
        } else {
            None
        };
        let holds = match (&cfg.condition, &pairs) {
            (Some(condition), Some(pairs)) => crate::expr::holds(condition.as_ref(), pairs)?,
            _ => vec![true; candidates.len()],
        };
        Ok((pairs, holds))
    }

    /// Step 3a: notes the pairs that hold for emission and marks the other side's rows they
    /// matched for the first time (in its buffer, or in state), so a padded side never pads
    /// them; per row of the batch, whether it matched.
    fn mark_matches(
        &mut self,
        side: usize,
        keyed: &Keyed,
        candidates: &[Candidate],
        holds: &[bool],
        emits: &mut Emits,
    ) -> Result<Vec<bool>> {
        let other = 1 - side;
        let cfg = &self.cfg;
        let semi_probe = side == 1 && cfg.join == JoinKind::Semi;
        let mut matched = vec![false; keyed.times.len()];
        let mut marked: HashSet<(&[u8], i64, &[u8])> = HashSet::new();
        for (i, candidate) in candidates.iter().enumerate() {
            if !holds[i] {
                continue;
            }
            let row = candidate.row as usize;
            matched[row] = true;
            match &candidate.found {
                Found::Buffered(at) => {
                    if cfg.join.emits_right() {
                        emits.joined.push(i as u32);
                    }
                    // The first match of a buffered row: remembered, and a semi join's left
                    // row emitted.
                    if cfg.join.tracks(other) && self.buffers[other].mark(*at) && semi_probe {
                        emits.semi_stored.push(i as u32);
                    }
                }
                Found::Stored {
                    bucket,
                    sub_key,
                    count,
                    matched: was_matched,
                } => {
                    let copies = std::iter::repeat_n(i as u32, *count as usize);
                    if cfg.join.emits_right() {
                        emits.joined.extend(copies.clone());
                    }
                    // The first match of a stored row: remembered, and a semi join's left row
                    // emitted.
                    if cfg.join.tracks(other)
                        && !was_matched
                        && marked.insert((&keyed.keys[row], *bucket, sub_key))
                    {
                        if semi_probe {
                            emits.semi_stored.extend(copies);
                        }
                        self.store
                            .set_current_key(&keyed.keys[row], StateShardId(keyed.shards[row]));
                        self.store.set_current_namespace(&encode_timestamp(*bucket));
                        self.store
                            .put(STATES[other], sub_key, &encode_payload(*count, true))?;
                    }
                }
            }
        }
        Ok(matched)
    }

    /// Step 3b: buffers the arriving rows a row of the other side still to come may match;
    /// the rest are padded when unmatched on a padded side. A semi join's matched left rows
    /// are noted for emission.
    fn keep(
        &mut self,
        side: usize,
        batch: &RecordBatch,
        keyed: &Keyed,
        arriving: &[u32],
        matched: &[bool],
        emits: &mut Emits,
    ) -> Result<()> {
        let cfg = &self.cfg;
        let mut kept: Vec<u32> = Vec::new();
        for &row in arriving {
            let r = row as usize;
            if side == 0 && matched[r] && cfg.join == JoinKind::Semi {
                emits.semi_own.push(row);
            }
            // Kept while a row of the other side still to come may match it.
            let time = keyed.times.value(r);
            let bound = time.saturating_add(if side == 0 { cfg.upper } else { -cfg.lower });
            if bound > self.watermark {
                kept.push(row);
            } else if !matched[r] && cfg.join.pads(side) {
                emits.padded.push(row);
            }
        }
        if !kept.is_empty() {
            let bucket = self.bucket;
            self.buffers[side].insert(
                &Arrivals {
                    batch,
                    rows: &kept,
                    keys: &keyed.keys,
                    shards: &keyed.shards,
                    times: keyed.times.values(),
                    matched,
                },
                |time| time.div_euclid(bucket),
            )?;
        }
        Ok(())
    }

    /// Step 3c: emits the batch's output: the joined pairs, a semi join's stored left rows
    /// matched now, the padded rows and a semi join's matched arriving left rows, in that order.
    fn emit(
        &self,
        side: usize,
        batch: &RecordBatch,
        pairs: Option<&RecordBatch>,
        emits: &Emits,
        out: &mut Output,
    ) -> Result<()> {
        if let Some(pairs) = pairs {
            let left_width = self.cfg.inputs[0].fields().len();
            if !emits.joined.is_empty() {
                let columns = take_rows(pairs.columns(), &emits.joined)?;
                out.emit(
                    RecordBatch::try_new(Arc::clone(&self.cfg.output), columns)
                        .map_err(|e| Error::arrow("assembling joined rows", e))?,
                );
            }
            if !emits.semi_stored.is_empty() {
                let left = take_rows(&pairs.columns()[..left_width], &emits.semi_stored)?;
                out.emit(self.assemble(0, left, None, emits.semi_stored.len())?);
            }
        }
        if !emits.padded.is_empty() {
            let own = take_rows(batch.columns(), &emits.padded)?;
            out.emit(self.assemble(side, own, None, emits.padded.len())?);
        }
        if !emits.semi_own.is_empty() {
            let own = take_rows(batch.columns(), &emits.semi_own)?;
            out.emit(self.assemble(0, own, None, emits.semi_own.len())?);
        }
        Ok(())
    }

    /// Writes both sides' buffered rows into keyed state and empties the buffers.
    fn flush(&mut self) -> Result<()> {
        for side in 0..2 {
            if self.buffers[side].is_empty() {
                continue;
            }
            for chunk in self.buffers[side].drain() {
                let encoded = encode_rows(chunk.batch.columns()).map_err(state_error)?;
                for row in chunk.rows {
                    let at = StateAddress {
                        shard: StateShardId(row.shard),
                        namespace: &encode_timestamp(row.bucket),
                        key: &row.key,
                    };
                    self.store_row(side, at, row.time, &encoded[row.row as usize], row.matched)?;
                }
            }
        }
        Ok(())
    }

    /// Adds one row of `side` (its time and encoded columns) to the state entry at `at`,
    /// whose namespace is the row's bucket.
    fn store_row(
        &mut self,
        side: usize,
        at: StateAddress<'_>,
        time: i64,
        columns: &[u8],
        matched: bool,
    ) -> Result<()> {
        let bucket = decode_timestamp(at.namespace).map_err(state_error)?;
        let mut sub_key = Vec::with_capacity(8 + columns.len());
        sub_key.extend_from_slice(&encode_timestamp(time));
        sub_key.extend_from_slice(columns);
        let stored = if self.occupancy.may_hold(side, at.key, bucket) {
            self.store.get_at(STATES[side], at, &sub_key)?
        } else {
            None
        };
        let (count, was_matched) = match stored {
            Some(payload) => decode_payload(&payload)?,
            None => (0, false),
        };
        self.store.put_at(
            STATES[side],
            at,
            &sub_key,
            &encode_payload(count.saturating_add(1), was_matched || matched),
        )?;
        self.occupancy.add(side, at.key, bucket, 1);
        self.live.insert(at.shard.0);
        Ok(())
    }

    /// The candidate pairs as a batch of [`IntervalJoinConfig::pair`]: the arriving rows of
    /// `side` and the stored rows of the other side they met.
    fn pairs(
        &self,
        side: usize,
        batch: &RecordBatch,
        candidates: &[Candidate],
    ) -> Result<RecordBatch> {
        let rows: Vec<u32> = candidates.iter().map(|c| c.row).collect();
        let own = take_rows(batch.columns(), &rows)?;
        // Buffered candidates come first (see `gather`), so the two parts line up.
        let mut buffered: Vec<(u32, u32)> = Vec::new();
        let mut stored: Vec<&[u8]> = Vec::new();
        for candidate in candidates {
            match &candidate.found {
                Found::Buffered(at) => buffered.push((at.chunk, at.row)),
                Found::Stored { sub_key, .. } => stored.push(split_sub_key(sub_key)?.1),
            }
        }
        let from_state = || decode_rows(&self.types[1 - side], &stored).map_err(state_error);
        let others = match (buffered.is_empty(), stored.is_empty()) {
            (true, _) => from_state()?,
            (false, true) => self.buffers[1 - side].columns(buffered)?,
            (false, false) => {
                let first = self.buffers[1 - side].columns(buffered)?;
                first
                    .iter()
                    .zip(from_state()?)
                    .map(|(a, b)| concat(&[a.as_ref(), b.as_ref()]))
                    .collect::<std::result::Result<Vec<_>, _>>()
                    .map_err(|e| Error::arrow("gathering candidate rows", e))?
            }
        };
        let columns = if side == 0 {
            [own, others].concat()
        } else {
            [others, own].concat()
        };
        RecordBatch::try_new(Arc::clone(&self.cfg.pair), columns)
            .map_err(|e| Error::arrow("assembling candidate pairs", e))
    }

    /// An output batch of `side`'s columns `own` and the other side's `others` (nulls when
    /// `None`), left columns first; the left's alone for semi and anti joins.
    fn assemble(
        &self,
        side: usize,
        own: Vec<ArrayRef>,
        others: Option<Vec<ArrayRef>>,
        rows: usize,
    ) -> Result<RecordBatch> {
        if !self.cfg.join.emits_right() {
            return RecordBatch::try_new(Arc::clone(&self.cfg.output), own)
                .map_err(|e| Error::arrow("assembling joined rows", e));
        }
        let others = others.unwrap_or_else(|| {
            self.types[1 - side]
                .iter()
                .map(|t| new_null_array(t, rows))
                .collect()
        });
        let columns = if side == 0 {
            [own, others].concat()
        } else {
            [others, own].concat()
        };
        RecordBatch::try_new(Arc::clone(&self.cfg.output), columns)
            .map_err(|e| Error::arrow("assembling joined rows", e))
    }

    /// Removes the rows of both sides whose bucket lies wholly at or behind their bound, and
    /// emits the unmatched ones of a padded side.
    fn evict(&mut self, out: &mut Output) -> Result<()> {
        for (side, state) in STATES.iter().enumerate() {
            let through = self.expired_through(side);
            let until = if through == i64::MAX {
                None
            } else {
                Some(self.bucket_of(through.saturating_add(1)))
            };
            if until.is_some_and(|u| u <= self.evicted_below[side]) {
                continue;
            }
            let unmatched = self.buffers[side].evict(until, self.cfg.join.pads(side))?;
            if let Some(own) = unmatched {
                let rows = own.first().map_or(0, |c| c.len());
                out.emit(self.assemble(side, own, None, rows)?);
            }
            let from = encode_timestamp(self.evicted_below[side]);
            let until_bytes = until.map(encode_timestamp);
            let mut padded: Vec<Vec<u8>> = Vec::new();
            for shard in self.live.clone() {
                let range = NamespaceRange::new(&from, until_bytes.as_ref().map(|u| &u[..]));
                let entries = self.store.scan(state, StateShardId(shard), range, None)?;
                for entry in entries {
                    let at = StateAddress {
                        shard: StateShardId(shard),
                        namespace: &entry.namespace,
                        key: &entry.key,
                    };
                    self.store.remove_at(state, at, &entry.sub_key)?;
                    let (count, matched) = decode_payload(&entry.payload)?;
                    let bucket = decode_timestamp(&entry.namespace).map_err(state_error)?;
                    self.occupancy.remove(side, &entry.key, bucket, count);
                    if self.cfg.join.pads(side) && !matched {
                        let (_, columns) = split_sub_key(&entry.sub_key)?;
                        for _ in 0..count {
                            padded.push(columns.to_vec());
                        }
                    }
                }
            }
            self.evicted_below[side] = until.unwrap_or(i64::MAX);
            if !padded.is_empty() {
                let refs: Vec<&[u8]> = padded.iter().map(Vec::as_slice).collect();
                let own = decode_rows(&self.types[side], &refs).map_err(state_error)?;
                out.emit(self.assemble(side, own, None, padded.len())?);
            }
        }
        Ok(())
    }
}

impl Operator for IntervalJoinOperator {
    fn process_batch(&mut self, input: usize, batch: RecordBatch, out: &mut Output) -> Result<()> {
        self.join_batch(input.min(1), &batch, out)
    }

    fn reads_input_watermarks(&self) -> bool {
        true
    }

    fn process_input_watermark(
        &mut self,
        input: usize,
        watermark: Watermark,
        _out: &mut Output,
    ) -> Result<()> {
        self.start()?;
        let slot = &mut self.input_watermarks[input.min(1)];
        *slot = (*slot).max(watermark.0.0);
        Ok(())
    }

    fn process_split_watermark(
        &mut self,
        input: usize,
        watermark: Watermark,
        _out: &mut Output,
    ) -> Result<()> {
        // Joined rows are new rows: the split watermark of an input is not the output's.
        self.split_watermarks[input.min(1)] = watermark.0.0;
        Ok(())
    }

    fn process_watermark(&mut self, watermark: Watermark, out: &mut Output) -> Result<()> {
        self.start()?;
        self.watermark = self.watermark.max(watermark.0.0);
        self.evict(out)?;
        let output = self.output_watermark(self.watermark);
        if output > self.emitted {
            self.emitted = output;
            out.emit_watermark(Watermark(weir_api::EventTimeMs(output)));
        }
        Ok(())
    }

    fn on_barrier(&mut self, _barrier: weir_api::Barrier, _out: &mut Output) -> Result<()> {
        self.start()?;
        // The checkpoint holds every row: the buffered ones go into state first.
        self.flush()?;
        let values = [
            self.input_watermarks[0],
            self.input_watermarks[1],
            self.watermark,
        ];
        self.progress.save(self.store.as_mut(), &values)
    }

    fn on_end_of_input(&mut self, out: &mut Output) -> Result<()> {
        self.process_watermark(Watermark(weir_api::EventTimeMs(i64::MAX)), out)
    }
}

/// What the steps of `join_batch` read of an arriving batch: its event times and join key
/// columns, and per row its encoded key and state shard.
struct Keyed {
    times: Int64Array,
    key_columns: Vec<ArrayRef>,
    keys: Vec<Vec<u8>>,
    shards: Vec<u32>,
}

/// The arriving rows of a batch that meet the other side, and what they met.
struct Gathered {
    /// The rows on time with a key, in batch order.
    arriving: Vec<u32>,
    /// Their candidates: the buffered ones first, then those in state.
    candidates: Vec<Candidate>,
}

/// The rows one batch emits (besides its late rows), collected by the steps of `join_batch`.
#[derive(Default)]
struct Emits {
    /// Candidates emitted joined, once per stored copy.
    joined: Vec<u32>,
    /// Candidates whose stored left row a semi join emits: matched for the first time.
    semi_stored: Vec<u32>,
    /// Arriving rows emitted padded: no row can match them any more.
    padded: Vec<u32>,
    /// Arriving left rows a semi join emits: they matched.
    semi_own: Vec<u32>,
}

/// A row of the other side within an arriving row's bounds.
struct Candidate {
    /// The arriving row, in its batch.
    row: u32,
    found: Found,
}

/// Where a candidate is kept.
enum Found {
    /// In the other side's buffer.
    Buffered(RowRef),
    /// In keyed state: its time bucket (namespace) and sub-key, how many such rows are stored,
    /// and whether one of them matched before.
    Stored {
        bucket: i64,
        sub_key: Vec<u8>,
        count: u32,
        matched: bool,
    },
}

fn take_rows(columns: &[ArrayRef], rows: &[u32]) -> Result<Vec<ArrayRef>> {
    let indices = UInt32Array::from(rows.to_vec());
    columns
        .iter()
        .map(|c| take(c.as_ref(), &indices, None))
        .collect::<std::result::Result<_, _>>()
        .map_err(|e| Error::arrow("taking joined rows", e))
}

fn split_sub_key(sub_key: &[u8]) -> Result<(i64, &[u8])> {
    if sub_key.len() < 8 {
        return Err(Error::Internal(format!(
            "an interval join entry's sub-key has {} bytes",
            sub_key.len()
        )));
    }
    let (at, columns) = sub_key.split_at(8);
    Ok((decode_timestamp(at).map_err(state_error)?, columns))
}

fn encode_payload(count: u32, matched: bool) -> [u8; 5] {
    let c = count.to_le_bytes();
    [c[0], c[1], c[2], c[3], u8::from(matched)]
}

fn decode_payload(payload: &[u8]) -> Result<(u32, bool)> {
    match payload {
        [a, b, c, d, m] => Ok((u32::from_le_bytes([*a, *b, *c, *d]), *m != 0)),
        _ => Err(Error::Internal(format!(
            "an interval join entry's payload has {} bytes, not 5",
            payload.len()
        ))),
    }
}

fn state_error(e: impl std::fmt::Display) -> Error {
    Error::Internal(format!("interval join state: {e}"))
}
