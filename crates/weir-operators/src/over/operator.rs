//! One subtask of an OVER aggregation.
//!
//! Arriving rows wait in memory ([`PendingRows`]) and the partitions' histories are cached there
//! ([`Histories`]); both are written into keyed state at every checkpoint barrier and whenever
//! they outgrow the `buffer_bytes` budget, so the state below holds everything at a barrier.
//!
//! State layout: `over.pending` (a map state) holds the rows the watermark has not passed:
//! namespace = the row's time ([`encode_timestamp`]), key = the partition key (row codec),
//! sub-key = the row (row codec), payload = how many such rows arrived (`u32`, little endian).
//! `over.history` holds each partition's [`History`]; `over.watermark` the operator's watermark
//! (kept by [`Waiting`]).

use super::frame::{Acc, Function, History, Kind};
use super::memory::{Histories, due_row, state_error};
use super::{FrameSpec, MAX_FRAME_ROWS, OverConfig};
use crate::pending_rows::{Arrived, DueRow, PendingRows, sort_due};
use crate::waiting::Waiting;
use arrow::array::{Array, ArrayRef, AsArray, Float64Array, Int64Array, RecordBatch};
use arrow::compute::cast;
use arrow::datatypes::{Float64Type, Int64Type};
use std::sync::Arc;
use weir_api::state::{Map, StateDescriptor, Value};
use weir_api::{
    Error, KeyedStateStore, Operator, Output, Result, StateAddress, StateShardId, TaskContext,
    Watermark,
};
use weir_plan::key_hash;
use weir_state::row_codec::{decode_rows, encode_rows};
use weir_state::timers::encode_timestamp;

const PENDING: &str = "over.pending";
const HISTORY: &str = "over.history";
const WATERMARK: &str = "over.watermark";

/// A running `over_aggregate`.
pub(super) struct OverOperator {
    cfg: Arc<OverConfig>,
    /// The state, the watermarks and the shards whose rows wait for the watermark in state.
    waiting: Waiting,
    /// The rows that wait for the watermark in memory.
    pending: PendingRows,
    /// The partitions' histories read or changed since the cache was last emptied.
    histories: Histories,
    /// Where late rows go.
    late: crate::late::LateRows,
}

impl OverOperator {
    pub(super) fn new(cfg: Arc<OverConfig>, ctx: &TaskContext) -> Result<Self> {
        let mut store = ctx.keyed_state()?;
        store.register(StateDescriptor::<Map<Vec<u8>, Vec<u8>>>::new(PENDING).spec())?;
        store.register(StateDescriptor::<Value<Vec<u8>>>::new(HISTORY).spec())?;
        Ok(Self {
            waiting: Waiting::new(ctx, store, PENDING, WATERMARK)?,
            pending: PendingRows::default(),
            histories: Histories::new(HISTORY),
            late: crate::late::LateRows::new(crate::late::routed_schema(cfg.late, &cfg.input), ctx),
            cfg,
        })
    }

    /// Writes the rows waiting in memory into the pending state (adding to the count of an
    /// identical row there) and the changed histories into theirs.
    fn flush(&mut self) -> Result<()> {
        let store = self.waiting.store.as_mut();
        let mut noted: Vec<(u32, i64)> = Vec::new();
        for (time, row) in self.pending.drain() {
            let namespace = encode_timestamp(time);
            let address = StateAddress {
                shard: StateShardId(row.shard),
                namespace: &namespace,
                key: &row.key,
            };
            let count = match store.get_at(PENDING, address, &row.row)? {
                Some(p) => p
                    .first_chunk::<4>()
                    .map(|c| u32::from_le_bytes(*c))
                    .ok_or_else(|| state_error("a pending row without its count"))?,
                None => 0,
            };
            store.put_at(
                PENDING,
                address,
                &row.row,
                &count.saturating_add(1).to_le_bytes(),
            )?;
            noted.push((row.shard, time));
        }
        for (shard, time) in noted {
            self.waiting.note(shard, time);
        }
        self.histories.write(self.waiting.store.as_mut())
    }

    /// The partition keys and state shards of a batch's rows (one empty key without
    /// `PARTITION BY`).
    fn keys(&self, batch: &RecordBatch) -> Result<(Vec<Vec<u8>>, Vec<u32>)> {
        if self.cfg.keys.is_empty() {
            return Ok((
                vec![Vec::new(); batch.num_rows()],
                vec![0; batch.num_rows()],
            ));
        }
        let columns: Vec<ArrayRef> = self
            .cfg
            .keys
            .iter()
            .map(|&i| Arc::clone(batch.column(i)))
            .collect();
        let keys = encode_rows(&columns).map_err(state_error)?;
        let shards = key_hash::shard_ids(&columns, self.waiting.shard_count)
            .map_err(|e| Error::Internal(format!("hashing OVER partition keys: {e}")))?;
        Ok((keys, shards))
    }
}

/// Aggregates the rows the watermark passed (per shard, each shard's rows in [`sort_due`]'s
/// order) over their frames and emits them in one batch; the partitions' histories come from
/// `histories`, which reads those it lacks from `store`.
fn fire(
    cfg: &OverConfig,
    store: &mut dyn KeyedStateStore,
    histories: &mut Histories,
    fired: &[(StateShardId, Vec<DueRow>)],
    out: &mut Output,
) -> Result<()> {
    // One output row per arrived row: an entry of `n` identical rows gives `n`.
    let mut rows: Vec<&[u8]> = Vec::new();
    let mut groups: Vec<(usize, usize, i64, &[u8], StateShardId)> = Vec::new();
    for (e, shard_id) in fired
        .iter()
        .flat_map(|(shard, entries)| entries.iter().map(move |e| (e, *shard)))
    {
        let begin = rows.len();
        rows.extend(std::iter::repeat_n(e.row.as_slice(), e.count as usize));
        match groups.last_mut() {
            Some(g) if g.2 == e.time && g.3 == e.key.as_slice() && g.4 == shard_id => {
                g.1 = rows.len();
            }
            _ => groups.push((begin, rows.len(), e.time, &e.key, shard_id)),
        }
    }
    if rows.is_empty() {
        return Ok(());
    }
    let columns = decode_rows(&cfg.types, &rows).map_err(state_error)?;
    // Each aggregate's argument as `i64` values or `f64` bits.
    let mut args: Vec<Option<ArgValues>> = Vec::with_capacity(cfg.aggregates.len());
    for a in &cfg.aggregates {
        args.push(match a.column {
            None => None,
            Some(c) => Some(ArgValues::new(&columns[c], a)?),
        });
    }
    let value = |a: usize, row: usize| -> Option<i64> {
        match &args[a] {
            None => Some(0),
            Some(v) => v.get(row),
        }
    };
    let n_aggs = cfg.aggregates.len();
    let bounded = matches!(
        cfg.frame,
        FrameSpec::Rows { preceding: Some(_) } | FrameSpec::Range { preceding: Some(_) }
    );
    let mut results: Vec<Vec<Option<i64>>> = vec![Vec::with_capacity(rows.len()); n_aggs];
    for &(begin, end, ts, key, shard_id) in &groups {
        let history = histories.get_mut(
            store,
            shard_id,
            key,
            || History::empty(bounded, n_aggs),
            |bytes| History::decode(bytes, n_aggs),
        )?;
        match (cfg.frame, history) {
            (FrameSpec::Rows { preceding: Some(n) }, History::Rows(frame)) => {
                for row in begin..end {
                    frame.push_back((ts, (0..n_aggs).map(|a| value(a, row)).collect()));
                    while frame.len() as u64 > n + 1 {
                        frame.pop_front();
                    }
                    let accs = fold(cfg, frame.iter().map(|(_, v)| v.as_slice()));
                    push_results(cfg, &accs, &mut results, 1);
                }
            }
            (FrameSpec::Range { preceding: Some(d) }, History::Rows(frame)) => {
                for row in begin..end {
                    frame.push_back((ts, (0..n_aggs).map(|a| value(a, row)).collect()));
                }
                let oldest = ts.saturating_sub(d.as_i64());
                while frame.front().is_some_and(|(t, _)| *t < oldest) {
                    frame.pop_front();
                }
                if frame.len() > MAX_FRAME_ROWS {
                    return Err(Error::Internal(format!(
                        "a RANGE frame of one partition holds {} rows at time {ts}; at most \
                         {MAX_FRAME_ROWS} are supported (use a shorter range or a finer \
                         PARTITION BY)",
                        frame.len()
                    )));
                }
                let accs = fold(cfg, frame.iter().map(|(_, v)| v.as_slice()));
                push_results(cfg, &accs, &mut results, end - begin);
            }
            (FrameSpec::Rows { preceding: None }, History::Running(accs)) => {
                for row in begin..end {
                    for (a, acc) in accs.iter_mut().enumerate() {
                        acc.add(cfg.aggregates[a].kind, value(a, row));
                    }
                    push_results(cfg, accs, &mut results, 1);
                }
            }
            (FrameSpec::Range { preceding: None }, History::Running(accs)) => {
                for row in begin..end {
                    for (a, acc) in accs.iter_mut().enumerate() {
                        acc.add(cfg.aggregates[a].kind, value(a, row));
                    }
                }
                push_results(cfg, accs, &mut results, end - begin);
            }
            _ => return Err(state_error("a history of another frame")),
        }
        histories.recount(key);
    }
    let mut output = columns;
    for (a, values) in results.into_iter().enumerate() {
        output.push(result_array(&cfg.aggregates[a], values)?);
    }
    let batch = RecordBatch::try_new(Arc::clone(&cfg.output), output)
        .map_err(|e| Error::arrow("assembling OVER results", e))?;
    out.emit(batch);
    Ok(())
}

/// An aggregate's argument over the fired rows, in its computing type.
enum ArgValues {
    Int(Int64Array),
    Float(Float64Array),
}

impl ArgValues {
    fn new(column: &ArrayRef, aggregate: &super::Resolved) -> Result<Self> {
        let cast = cast(column, &aggregate.compute)
            .map_err(|e| Error::arrow("converting an OVER aggregate's argument", e))?;
        Ok(match aggregate.kind {
            Kind::Int => ArgValues::Int(cast.as_primitive::<Int64Type>().clone()),
            Kind::Float => ArgValues::Float(cast.as_primitive::<Float64Type>().clone()),
        })
    }

    fn get(&self, row: usize) -> Option<i64> {
        match self {
            ArgValues::Int(a) => a.is_valid(row).then(|| a.value(row)),
            ArgValues::Float(a) => a.is_valid(row).then(|| a.value(row).to_bits() as i64),
        }
    }
}

/// The accumulators of every aggregate over a frame's rows.
fn fold<'a>(cfg: &OverConfig, frame: impl Iterator<Item = &'a [Option<i64>]>) -> Vec<Acc> {
    let mut accs = vec![Acc::default(); cfg.aggregates.len()];
    for values in frame {
        for (a, acc) in accs.iter_mut().enumerate() {
            acc.add(cfg.aggregates[a].kind, values[a]);
        }
    }
    accs
}

/// Appends `accs`' results `times` times (for a row and its peers).
fn push_results(cfg: &OverConfig, accs: &[Acc], results: &mut [Vec<Option<i64>>], times: usize) {
    for (a, acc) in accs.iter().enumerate() {
        let spec = &cfg.aggregates[a];
        let r = acc.result(spec.function, spec.kind);
        results[a].extend(std::iter::repeat_n(r, times));
    }
}

/// One aggregate's output column from its results.
fn result_array(aggregate: &super::Resolved, values: Vec<Option<i64>>) -> Result<ArrayRef> {
    let float = aggregate.function == Function::Avg
        || (aggregate.kind == Kind::Float
            && !matches!(aggregate.function, Function::Count | Function::CountRows));
    let array: ArrayRef = if float {
        Arc::new(
            values
                .into_iter()
                .map(|v| v.map(|b| f64::from_bits(b as u64)))
                .collect::<Float64Array>(),
        )
    } else {
        Arc::new(Int64Array::from(values))
    };
    cast(&array, &aggregate.output).map_err(|e| Error::arrow("typing an OVER aggregate", e))
}

impl Operator for OverOperator {
    fn process_batch(&mut self, _input: usize, batch: RecordBatch, out: &mut Output) -> Result<()> {
        let behind = self.waiting.late_bound()?;
        if batch.num_rows() == 0 {
            return Ok(());
        }
        let cfg = Arc::clone(&self.cfg);
        let times = crate::event_time::event_times_ms(
            batch.column(cfg.time),
            cfg.input.field(cfg.time).name(),
        )?;
        let (keys, shards) = self.keys(&batch)?;
        let rows = encode_rows(batch.columns()).map_err(state_error)?;
        let taken: Vec<bool> = (0..batch.num_rows())
            .map(|row| times.is_valid(row) && times.value(row) > behind)
            .collect();
        self.late.handle(&batch, &times, &taken, out)?;
        for (row, (key, encoded)) in keys.into_iter().zip(rows).enumerate() {
            if !taken[row] {
                continue;
            }
            self.pending.push(
                times.value(row),
                Arrived {
                    shard: shards[row],
                    key,
                    row: encoded,
                },
            );
        }
        if self.pending.bytes() + self.histories.bytes() > cfg.buffer_bytes {
            self.flush()?;
            self.histories
                .write_and_clear(self.waiting.store.as_mut())?;
        }
        Ok(())
    }

    fn process_split_watermark(
        &mut self,
        _input: usize,
        watermark: Watermark,
        _out: &mut Output,
    ) -> Result<()> {
        self.waiting.set_split_watermark(watermark);
        Ok(())
    }

    fn process_watermark(&mut self, watermark: Watermark, out: &mut Output) -> Result<()> {
        // The due shards' rows, from state and from memory, go out together, in batches of
        // about EMIT_ROWS rows. No row in memory is at or behind a watermark already emitted
        // (it would have been late), so taking them first is right even when nothing advances.
        let cfg = Arc::clone(&self.cfg);
        let mut memory = self.pending.take_through(watermark.0.0);
        let histories = &mut self.histories;
        let mut fired: Vec<(StateShardId, Vec<DueRow>)> = Vec::new();
        let mut waiting_rows = 0;
        let mut add = |store: &mut dyn KeyedStateStore,
                       shard: StateShardId,
                       mut rows: Vec<DueRow>,
                       fired: &mut Vec<(StateShardId, Vec<DueRow>)>|
         -> Result<()> {
            sort_due(&mut rows);
            waiting_rows += rows.len();
            fired.push((shard, rows));
            if waiting_rows >= EMIT_ROWS {
                fire(&cfg, store, histories, fired, out)?;
                fired.clear();
                waiting_rows = 0;
            }
            Ok(())
        };
        let advanced = self.waiting.advance(watermark, |store, shard, entries| {
            let mut rows = entries
                .into_iter()
                .map(due_row)
                .collect::<Result<Vec<_>>>()?;
            if let Some(mine) = memory.remove(&shard.0) {
                rows.extend(mine);
            }
            add(store, shard, rows, &mut fired)
        })?;
        let store = self.waiting.store.as_mut();
        for (shard, rows) in std::mem::take(&mut memory) {
            add(store, StateShardId(shard), rows, &mut fired)?;
        }
        if !fired.is_empty() {
            fire(&self.cfg, store, &mut self.histories, &fired, out)?;
        }
        if self.histories.bytes() > self.cfg.buffer_bytes {
            self.histories.write_and_clear(store)?;
        }
        if advanced {
            out.emit_watermark(watermark);
        }
        Ok(())
    }

    fn on_barrier(&mut self, _barrier: weir_api::Barrier, _out: &mut Output) -> Result<()> {
        // The checkpoint holds every row and history: memory's go into state first.
        self.flush()?;
        self.waiting.save()
    }

    fn on_end_of_input(&mut self, out: &mut Output) -> Result<()> {
        self.process_watermark(Watermark(weir_api::EventTimeMs(i64::MAX)), out)
    }
}

/// Rows (pending entries) gathered from the due shards before they are aggregated and emitted.
const EMIT_ROWS: usize = 8192;
