//! The `temporal_join` operator: each row of a stream joined with the version of a versioned
//! table that was current at the row's event time, as Flink's event-time temporal join
//! (`JOIN rates FOR SYSTEM_TIME AS OF o.ts ON ...`), INNER or LEFT. See docs/sql.md
//! ("Temporal joins").
//!
//! Input 0 is the probe stream (final rows with an event time). Input 1 is the versioned table:
//! changes with a time column (an `upsert-kafka` table or a Debezium topic, keyed by its
//! primary key). Each of its rows starts a version of its key at its time: `+I`/`+U` the row,
//! `-D` a deletion (the key has no row from that time; Flink dates a delete the same way);
//! `-U` is left out, since the `+U` after it starts the next version. A probe row waits until
//! the operator's watermark (the lower of both inputs') passes its time, so that every version
//! up to it has arrived (in memory, and in keyed state from the next checkpoint barrier or once
//! the waiting rows outgrow `buffer_bytes`); then it is joined with the latest version at or
//! before its time, and emitted once: the output is insert-only. A row at or behind its own
//! input's watermark when it arrives (the watermark of the split it was read from, where its
//! input carries split marks) is late: a probe row is dropped and counted (or routed), a
//! version dropped and counted, so which rows count never depends on how far the other input
//! has got. Versions older than the one current at the watermark are dropped when their
//! key is next touched.

use crate::pending_rows::{Arrived, PendingRows};
use crate::waiting::Waiting;
use arrow::array::{Array, ArrayRef, RecordBatch, UInt32Array, new_null_array};
use arrow::compute::take;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use serde::Deserialize;
use std::collections::HashMap;
use std::sync::Arc;
use weir_api::changelog::{RowKind, kinds_of, row_kind_index};
use weir_api::state::{Map, StateDescriptor, Value};
use weir_api::{
    Error, KeyedStateStore, Operator, OperatorArgs, OperatorFactory, Output, PreparedOperator,
    Result, StateAddress, StateShardId, TaskContext, Watermark, decode_options,
};
use weir_state::row_codec::{decode_rows, encode_rows};
use weir_state::timers::{decode_timestamp, encode_timestamp};

/// Namespace = a probe row's time, key = its join key, sub-key = the row, payload = copies.
const PROBES: &str = "temporal_join.probes";
/// Per key: its versions ([`encode_versions`]).
const VERSIONS: &str = "temporal_join.versions";
/// The operator's watermark, for a restore (kept by [`Waiting`]).
const WATERMARK: &str = "temporal_join.watermark";

/// The job-spec options of `temporal_join`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TemporalJoinOptions {
    /// `inner` (default) or `left`: also the probe rows without a version, padded.
    #[serde(default)]
    pub join: TemporalJoinKind,
    /// Key columns of the probe stream (input 0).
    pub left_keys: Vec<String>,
    /// Key columns of the versioned table (input 1): its primary key.
    pub right_keys: Vec<String>,
    /// The probe stream's event-time column: the time a row is joined at.
    pub left_time: String,
    /// The versioned table's time column: when each version starts.
    pub right_time: String,
    /// What happens to late probe rows: `{policy: drop}` (default) or `{policy: route}` (the
    /// side output `late`).
    #[serde(default)]
    pub late: crate::late::RowLateOptions,
    /// The memory one subtask's waiting probe rows may take before they are written to keyed
    /// state; they are written at every checkpoint barrier anyway. `0` writes each batch's
    /// rows at once.
    #[serde(default = "default_buffer_bytes")]
    pub buffer_bytes: u64,
}

/// The default of [`TemporalJoinOptions::buffer_bytes`]: 32 MiB.
fn default_buffer_bytes() -> u64 {
    32 << 20
}

/// Which probe rows a temporal join emits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TemporalJoinKind {
    /// Only rows with a version at their time.
    #[default]
    Inner,
    /// Also rows without one, with nulls for the table's columns.
    Left,
}

/// Creates `temporal_join` operators.
#[derive(Debug, Default, Clone, Copy)]
pub struct TemporalJoinFactory;

/// The options resolved against the inputs.
#[derive(Debug)]
struct Config {
    join: TemporalJoinKind,
    probe: SchemaRef,
    /// Per side, the key columns.
    keys: [Vec<usize>; 2],
    key_names: [Vec<String>; 2],
    time: [usize; 2],
    /// The versioned table's data columns (all but its row kind column) and their types.
    table_data: Vec<usize>,
    table_types: Vec<DataType>,
    probe_types: Vec<DataType>,
    output: SchemaRef,
    late: crate::late::RowLatePolicy,
    /// See [`TemporalJoinOptions::buffer_bytes`].
    budget: usize,
}

impl OperatorFactory for TemporalJoinFactory {
    fn prepare(&self, spec: &OperatorArgs<'_>) -> Result<Arc<dyn PreparedOperator>> {
        let options: TemporalJoinOptions = decode_options(spec.options, spec.options_path)?;
        let path = spec.options_path;
        let [probe, table] = spec.input_schemas else {
            return Err(Error::config(
                path,
                format!(
                    "temporal_join `{}` joins two inputs (the stream, then the versioned table), \
                     not {}",
                    spec.operator_id,
                    spec.input_schemas.len()
                ),
            ));
        };
        if row_kind_index(probe).is_some() {
            return Err(Error::config(
                format!("{path}.left_keys"),
                "the probe stream (input 0) must be insert-only",
            ));
        }
        if options.left_keys.is_empty() || options.left_keys.len() != options.right_keys.len() {
            return Err(Error::config(
                format!("{path}.right_keys"),
                "a temporal join needs as many right keys as left keys, at least one",
            ));
        }
        let column = |schema: &Schema, name: &str, option: &str| {
            crate::expr::column_index(schema, name, &format!("{path}.{option}"))
        };
        let mut keys: [Vec<usize>; 2] = [Vec::new(), Vec::new()];
        for (l, r) in options.left_keys.iter().zip(&options.right_keys) {
            let (li, ri) = (
                column(probe, l, "left_keys")?,
                column(table, r, "right_keys")?,
            );
            let (lt, rt) = (probe.field(li).data_type(), table.field(ri).data_type());
            if lt != rt {
                return Err(Error::config(
                    format!("{path}.right_keys"),
                    format!("key `{l}` is {lt} on the left but `{r}` is {rt} on the right"),
                ));
            }
            keys[0].push(li);
            keys[1].push(ri);
        }
        let time = [
            column(probe, &options.left_time, "left_time")?,
            column(table, &options.right_time, "right_time")?,
        ];
        for (side, (schema, option)) in [(probe, "left_time"), (table, "right_time")]
            .into_iter()
            .enumerate()
        {
            let t = schema.field(time[side]).data_type();
            if !matches!(t, DataType::Int64 | DataType::Timestamp(..)) {
                return Err(Error::config(
                    format!("{path}.{option}"),
                    format!("an event-time column is a TIMESTAMP or BIGINT milliseconds, not {t}"),
                ));
            }
        }
        let kinds = row_kind_index(table);
        let table_data: Vec<usize> = (0..table.fields().len())
            .filter(|&i| Some(i) != kinds)
            .collect();
        let mut fields: Vec<Field> = probe.fields().iter().map(|f| f.as_ref().clone()).collect();
        for &i in &table_data {
            let f = table.field(i);
            if fields.iter().any(|g| g.name() == f.name()) {
                return Err(Error::config(
                    path,
                    format!(
                        "both inputs have a column `{}`: rename one before the join",
                        f.name()
                    ),
                ));
            }
            let padded = options.join == TemporalJoinKind::Left;
            fields.push(f.clone().with_nullable(f.is_nullable() || padded));
        }
        Ok(Arc::new(PreparedTemporalJoin(Arc::new(Config {
            join: options.join,
            probe: Arc::clone(probe),
            keys,
            key_names: [options.left_keys, options.right_keys],
            time,
            table_types: table_data
                .iter()
                .map(|&i| table.field(i).data_type().clone())
                .collect(),
            table_data,
            probe_types: probe
                .fields()
                .iter()
                .map(|f| f.data_type().clone())
                .collect(),
            output: Arc::new(Schema::new(fields)),
            late: options.late.policy,
            budget: usize::try_from(options.buffer_bytes).unwrap_or(usize::MAX),
        }))))
    }
}

/// A `temporal_join` resolved against its inputs.
#[derive(Debug)]
pub struct PreparedTemporalJoin(Arc<Config>);

impl PreparedOperator for PreparedTemporalJoin {
    /// Its buffer decides when rows reach keyed state, not what keyed state holds.
    fn tuning_options(&self) -> Vec<&'static str> {
        vec!["buffer_bytes"]
    }

    fn output_schema(&self) -> SchemaRef {
        Arc::clone(&self.0.output)
    }

    fn side_outputs(&self) -> Vec<weir_api::SideOutput> {
        crate::late::late_output(self.0.late, crate::late::LATE_OUTPUT, &self.0.probe)
            .into_iter()
            .collect()
    }

    fn describe(&self) -> String {
        format!(
            "temporal_join: [{}] with the version of [{}] at `{}`",
            self.0.key_names[0].join(", "),
            self.0.key_names[1].join(", "),
            self.0.probe.field(self.0.time[0]).name()
        )
    }

    fn input_key_columns(&self) -> Option<Vec<Vec<String>>> {
        Some(self.0.key_names.to_vec())
    }

    fn key_columns(&self) -> Option<Vec<String>> {
        Some(self.0.key_names[0].clone())
    }

    fn accepts_changes(&self) -> bool {
        true
    }

    fn create(&self, ctx: &TaskContext) -> Result<Box<dyn Operator>> {
        let mut store = ctx.keyed_state()?;
        store.register(StateDescriptor::<Map<Vec<u8>, Vec<u8>>>::new(PROBES).spec())?;
        store.register(StateDescriptor::<Value<Vec<u8>>>::new(VERSIONS).spec())?;
        Ok(Box::new(TemporalJoin {
            cfg: Arc::clone(&self.0),
            waiting: Waiting::new(ctx, store, PROBES, WATERMARK)?,
            pending: PendingRows::default(),
            late: crate::late::LateRows::new(
                crate::late::routed_schema(self.0.late, &self.0.probe),
                ctx,
            ),
            late_versions: crate::late::LateRows::new(None, ctx),
            input_watermarks: [i64::MIN; 2],
            version_split_watermark: i64::MIN,
            joined_to: i64::MIN,
        }))
    }
}

/// One version of a key: its start time and its row (`None`: the key was deleted then).
type Version = (i64, Option<Vec<u8>>);

/// A due probe row (encoded), its copies and the version it joins, if any.
type Joined = (Vec<u8>, u64, Option<Vec<u8>>);

/// A running `temporal_join`.
struct TemporalJoin {
    cfg: Arc<Config>,
    waiting: Waiting,
    /// Probe rows that arrived since they were last written to keyed state.
    pending: PendingRows,
    /// Where late probe rows go.
    late: crate::late::LateRows,
    /// Late versions are dropped and counted.
    late_versions: crate::late::LateRows,
    /// Each input's own watermark: a row is late when it is at or behind its input's, so
    /// which rows count does not depend on how far the other input has got.
    input_watermarks: [i64; 2],
    /// The watermark of the split the versions that follow were read from (their split
    /// marks), when the versioned input carries them: a version is late by its split's
    /// watermark, as a probe row is, so which versions count never depends on timing.
    version_split_watermark: i64,
    /// The watermark the probe rows were last joined up to: versions before the one current
    /// then are no longer needed.
    joined_to: i64,
}

impl TemporalJoin {
    /// Keeps the probe rows of `batch` that are on time until the watermark passes them.
    fn probe(&mut self, batch: &RecordBatch, out: &mut Output) -> Result<()> {
        let cfg = Arc::clone(&self.cfg);
        let behind = self.waiting.late_bound()?.max(self.input_watermarks[0]);
        let times = crate::event_time::event_times_ms(
            batch.column(cfg.time[0]),
            cfg.probe.field(cfg.time[0]).name(),
        )?;
        let key_columns: Vec<ArrayRef> = cfg.keys[0]
            .iter()
            .map(|&i| Arc::clone(batch.column(i)))
            .collect();
        // A null key joins nothing: such a row is not kept (it is emitted padded by LEFT).
        let taken: Vec<bool> = (0..batch.num_rows())
            .map(|r| times.is_valid(r) && times.value(r) > behind)
            .collect();
        self.late.handle(batch, &times, &taken, out)?;
        let keyed = crate::keyed_rows::KeyedRows::of(
            &key_columns,
            self.waiting.shard_count,
            "temporal join",
        )?;
        let (keys, shards) = (&keyed.keys, &keyed.shards);
        let rows = encode_rows(batch.columns()).map_err(state_error)?;
        for (r, row) in rows.into_iter().enumerate() {
            if taken[r] {
                self.pending.push(
                    times.value(r),
                    Arrived {
                        shard: shards[r],
                        key: keys[r].clone(),
                        row,
                    },
                );
            }
        }
        if self.pending.bytes() > cfg.budget {
            self.flush()?;
        }
        Ok(())
    }

    /// Writes the probe rows waiting in memory into keyed state (what a checkpoint holds).
    fn flush(&mut self) -> Result<()> {
        let store = self.waiting.store.as_mut();
        let mut noted = Vec::new();
        for (time, arrived) in self.pending.drain() {
            let namespace = encode_timestamp(time);
            let address = StateAddress {
                shard: StateShardId(arrived.shard),
                namespace: &namespace,
                key: &arrived.key,
            };
            let before = match store.get_at(PROBES, address, &arrived.row)? {
                Some(p) => u64::from_le_bytes(p.try_into().map_err(|_| state_error("count"))?),
                None => 0,
            };
            store.put_at(PROBES, address, &arrived.row, &(before + 1).to_le_bytes())?;
            noted.push((arrived.shard, time));
        }
        for (shard, time) in noted {
            self.waiting.note(shard, time);
        }
        Ok(())
    }

    /// Adds the versioned table's changes in `batch` to its keys' versions; a change at or
    /// behind the table's watermark is late (dropped and counted): a probe row at its time may
    /// have been joined already.
    fn version(&mut self, batch: &RecordBatch, out: &mut Output) -> Result<()> {
        let cfg = Arc::clone(&self.cfg);
        let kinds = kinds_of(batch)?;
        let times = crate::event_time::event_times_ms(
            batch.column(cfg.time[1]),
            batch.schema().field(cfg.time[1]).name(),
        )?;
        let behind = self.input_watermarks[1].max(self.version_split_watermark);
        // An update-before starts no version, so it is never late.
        let taken: Vec<bool> = (0..batch.num_rows())
            .map(|r| {
                kinds[r] == RowKind::UpdateBefore || (times.is_valid(r) && times.value(r) > behind)
            })
            .collect();
        self.late_versions.handle(batch, &times, &taken, out)?;
        let key_columns: Vec<ArrayRef> = cfg.keys[1]
            .iter()
            .map(|&i| Arc::clone(batch.column(i)))
            .collect();
        let keyed = crate::keyed_rows::KeyedRows::of(
            &key_columns,
            self.waiting.shard_count,
            "temporal join",
        )?;
        let data: Vec<ArrayRef> = cfg
            .table_data
            .iter()
            .map(|&i| Arc::clone(batch.column(i)))
            .collect();
        let rows = encode_rows(&data).map_err(state_error)?;
        let groups = keyed.groups(
            (0..batch.num_rows()).filter(|&r| kinds[r] != RowKind::UpdateBefore && taken[r]),
        );
        let (keys, shards) = (&keyed.keys, &keyed.shards);
        let watermark = self.joined_to;
        let store = self.waiting.store.as_mut();
        for (first, members) in groups {
            let address = StateAddress {
                shard: StateShardId(shards[first]),
                namespace: &[],
                key: &keys[first],
            };
            let mut versions = match store.get_at(VERSIONS, address, &[])? {
                Some(payload) => decode_versions(&payload)?,
                None => Vec::new(),
            };
            for r in members {
                let row = kinds[r].is_addition().then(|| rows[r].clone());
                let time = times.value(r);
                match versions.binary_search_by_key(&time, |v| v.0) {
                    Ok(i) => versions[i] = (time, row),
                    Err(i) => versions.insert(i, (time, row)),
                }
            }
            prune(&mut versions, watermark);
            if versions.is_empty() {
                store.remove_at(VERSIONS, address, &[])?;
            } else {
                store.put_at(VERSIONS, address, &[], &encode_versions(&versions))?;
            }
        }
        Ok(())
    }
}

impl Operator for TemporalJoin {
    fn process_batch(&mut self, input: usize, batch: RecordBatch, out: &mut Output) -> Result<()> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        if input == 0 {
            self.probe(&batch, out)
        } else {
            self.version(&batch, out)
        }
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
        if input == 0 {
            self.waiting.set_split_watermark(watermark);
        } else {
            self.version_split_watermark = watermark.0.0;
        }
        Ok(())
    }

    fn process_watermark(&mut self, watermark: Watermark, out: &mut Output) -> Result<()> {
        let cfg = Arc::clone(&self.cfg);
        // Per due probe row: the row, its copies and the version it joins (if any). The due
        // rows of a shard come from state and from memory together. No row in memory is at or
        // behind a watermark already emitted (it would have been late), so taking them first
        // is right even when nothing advances.
        let mut joined: Vec<Joined> = Vec::new();
        let w = watermark.0.0;
        let mut memory = self.pending.take_through(w);
        let advanced = self.waiting.advance(watermark, |store, shard, entries| {
            let mut due = entries
                .into_iter()
                .map(|entry| {
                    let copies = u64::from_le_bytes(
                        entry
                            .payload
                            .as_slice()
                            .try_into()
                            .map_err(|_| state_error("a probe count"))?,
                    );
                    let time = decode_timestamp(&entry.namespace).map_err(state_error)?;
                    Ok((time, entry.key, entry.sub_key, copies))
                })
                .collect::<Result<Vec<_>>>()?;
            if let Some(mine) = memory.remove(&shard.0) {
                due.extend(mine.into_iter().map(|d| (d.time, d.key, d.row, 1)));
            }
            join_due(&cfg, store, shard, due, w, &mut joined)
        })?;
        let store = self.waiting.store.as_mut();
        for (shard, rows) in memory {
            let due = rows
                .into_iter()
                .map(|d| (d.time, d.key, d.row, 1))
                .collect();
            join_due(&cfg, store, StateShardId(shard), due, w, &mut joined)?;
        }
        if advanced {
            self.joined_to = self.joined_to.max(w);
        }
        if !joined.is_empty() {
            out.emit(assemble(&cfg, &joined)?);
        }
        if advanced {
            out.emit_watermark(watermark);
        }
        Ok(())
    }

    fn on_barrier(&mut self, _barrier: weir_api::Barrier, _out: &mut Output) -> Result<()> {
        // The checkpoint holds every waiting probe row: memory's go into state first.
        self.flush()?;
        self.waiting.save()
    }

    fn on_end_of_input(&mut self, out: &mut Output) -> Result<()> {
        self.process_watermark(Watermark(weir_api::EventTimeMs(i64::MAX)), out)
    }
}

/// Joins the due probe rows `due` of `shard` (time, key, encoded row, copies) with the version
/// of their key current at their time, onto `joined`, in the order of time, key and row (so the
/// output does not depend on whether a row waited in memory or in state); then drops the
/// versions of their keys no later probe row can need (those before the one current at
/// `watermark`).
fn join_due(
    cfg: &Config,
    store: &mut dyn KeyedStateStore,
    shard: StateShardId,
    mut due: Vec<(i64, Vec<u8>, Vec<u8>, u64)>,
    watermark: i64,
    joined: &mut Vec<Joined>,
) -> Result<()> {
    due.sort_unstable();
    let mut versions_of: HashMap<Vec<u8>, Vec<Version>> = HashMap::new();
    for (time, key, row, copies) in due {
        if !versions_of.contains_key(&key) {
            let address = StateAddress {
                shard,
                namespace: &[],
                key: &key,
            };
            let versions = match store.get_at(VERSIONS, address, &[])? {
                Some(payload) => decode_versions(&payload)?,
                None => Vec::new(),
            };
            versions_of.insert(key.clone(), versions);
        }
        let current = versions_of[&key]
            .iter()
            .rev()
            .find(|v| v.0 <= time)
            .and_then(|v| v.1.clone());
        if current.is_some() || cfg.join == TemporalJoinKind::Left {
            joined.push((row, copies, current));
        }
    }
    for (key, mut versions) in versions_of {
        let len = versions.len();
        prune(&mut versions, watermark);
        if versions.len() != len {
            let address = StateAddress {
                shard,
                namespace: &[],
                key: &key,
            };
            if versions.is_empty() {
                store.remove_at(VERSIONS, address, &[])?;
            } else {
                store.put_at(VERSIONS, address, &[], &encode_versions(&versions))?;
            }
        }
    }
    Ok(())
}

/// Drops the versions before the one current at `watermark` (no probe row at or before it is
/// still to come), and a deletion that is the only one left.
fn prune(versions: &mut Vec<Version>, watermark: i64) {
    if let Some(current) = versions.iter().rposition(|v| v.0 <= watermark) {
        versions.drain(..current);
    }
    if versions.len() == 1 && versions[0].1.is_none() && versions[0].0 <= watermark {
        versions.clear();
    }
}

/// The output rows: each probe row (decoded) as many times as it came, with its version's
/// columns or nulls.
fn assemble(cfg: &Config, joined: &[Joined]) -> Result<RecordBatch> {
    let probes: Vec<&[u8]> = joined.iter().map(|j| j.0.as_slice()).collect();
    let probe_columns = decode_rows(&cfg.probe_types, &probes).map_err(state_error)?;
    let versions: Vec<&[u8]> = joined.iter().filter_map(|j| j.2.as_deref()).collect();
    let version_columns = decode_rows(&cfg.table_types, &versions).map_err(state_error)?;
    let mut probe_index = Vec::new();
    let mut version_index: Vec<Option<u32>> = Vec::new();
    let mut v = 0_u32;
    for (i, (_, copies, version)) in joined.iter().enumerate() {
        for _ in 0..*copies {
            probe_index.push(i as u32);
            version_index.push(version.as_ref().map(|_| v));
        }
        if version.is_some() {
            v += 1;
        }
    }
    let probe_index = UInt32Array::from(probe_index);
    let version_index = UInt32Array::from(version_index);
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(cfg.output.fields().len());
    for c in &probe_columns {
        columns.push(
            take(c.as_ref(), &probe_index, None)
                .map_err(|e| Error::arrow("taking probe rows", e))?,
        );
    }
    for (c, t) in version_columns.iter().zip(&cfg.table_types) {
        columns.push(if c.is_empty() {
            new_null_array(t, version_index.len())
        } else {
            take(c.as_ref(), &version_index, None)
                .map_err(|e| Error::arrow("taking versions", e))?
        });
    }
    RecordBatch::try_new(Arc::clone(&cfg.output), columns)
        .map_err(|e| Error::arrow("assembling temporal join rows", e))
}

/// A key's versions as one state payload: per version, its time (i64), a flag (1: a row
/// follows, 0: a deletion) and the row's length (u32) and bytes.
fn encode_versions(versions: &[Version]) -> Vec<u8> {
    let mut out = Vec::new();
    for (time, row) in versions {
        out.extend_from_slice(&time.to_le_bytes());
        match row {
            Some(row) => {
                out.push(1);
                out.extend_from_slice(&(row.len() as u32).to_le_bytes());
                out.extend_from_slice(row);
            }
            None => out.push(0),
        }
    }
    out
}

/// Reads [`encode_versions`]' payload back.
fn decode_versions(mut payload: &[u8]) -> Result<Vec<Version>> {
    let corrupt = || state_error("a corrupt version list");
    let mut versions = Vec::new();
    while !payload.is_empty() {
        let (time, rest) = payload.split_first_chunk::<8>().ok_or_else(corrupt)?;
        let (flag, rest) = rest.split_first().ok_or_else(corrupt)?;
        let time = i64::from_le_bytes(*time);
        if *flag == 0 {
            versions.push((time, None));
            payload = rest;
            continue;
        }
        let (len, rest) = rest.split_first_chunk::<4>().ok_or_else(corrupt)?;
        let len = u32::from_le_bytes(*len) as usize;
        if rest.len() < len {
            return Err(corrupt());
        }
        let (row, rest) = rest.split_at(len);
        versions.push((time, Some(row.to_vec())));
        payload = rest;
    }
    Ok(versions)
}

fn state_error(e: impl std::fmt::Display) -> Error {
    Error::Internal(format!("temporal join state: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_round_trip_and_old_ones_are_pruned() {
        let mut versions: Vec<Version> = vec![
            (1, Some(vec![1])),
            (5, None),
            (9, Some(vec![9, 9])),
            (20, Some(vec![])),
        ];
        let payload = encode_versions(&versions);
        assert_eq!(decode_versions(&payload).unwrap(), versions);
        assert!(decode_versions(&payload[..payload.len() - 1]).is_err());
        prune(&mut versions, 10);
        assert_eq!(
            versions.len(),
            2,
            "the version current at 10 and the later one stay"
        );
        let mut deleted: Vec<Version> = vec![(1, Some(vec![1])), (5, None)];
        prune(&mut deleted, 6);
        assert!(deleted.is_empty());
    }
}
