//! The `dedup_first` operator: the first row of each key in event-time order, emitted once the
//! watermark passes it, as Flink's `ROW_NUMBER() OVER (PARTITION BY k ORDER BY ts ASC) = 1`.
//! See docs/sql.md for the user's view.
//!
//! A key's best row so far waits in keyed state until the watermark passes its time; then no
//! on-time row can come before it, so it is final and is emitted, and the key is marked done:
//! its later rows are duplicates. Rows at or behind the watermark (or their split's) are late
//! and dropped (counted). Of two rows of one key with the same time, the one whose encoded row
//! is smaller wins, so the choice does not depend on arrival order. State per key stays after
//! its row was emitted (the done mark), as in Flink without a state TTL.

use crate::waiting::Waiting;
use arrow::array::{Array, ArrayRef, Int64Array, UInt32Array};
use arrow::compute::take;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use serde::Deserialize;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use weir_api::state::{StateDescriptor, Value};
use weir_api::{
    Error, Operator, OperatorArgs, OperatorFactory, Output, PreparedOperator, Result, StateAddress,
    StateShardId, TaskContext, Watermark, decode_options,
};
use weir_plan::key_hash;
use weir_state::row_codec::{decode_rows, encode_rows};
use weir_state::timers::{decode_timestamp, encode_timestamp};

/// Per key: `[0][time][row]` for the best row so far, `[1]` once it was emitted.
const BEST: &str = "dedup.best";
/// Namespace = the best row's time, key = its key, payload = the row: what the watermark emits.
const PENDING: &str = "dedup.pending";
/// The operator's watermark, for a restore (kept by [`Waiting`]).
const WATERMARK: &str = "dedup.watermark";
/// A key's earliest time in a batch and its rows at that time.
type Earliest = (i64, Vec<u32>);

/// Keys known done kept in memory (so their duplicates need no state lookup).
const DONE_KEYS: usize = 1 << 20;

/// The job-spec options of `dedup_first`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DedupOptions {
    /// The columns whose rows are duplicates of each other.
    pub keys: Vec<String>,
    /// The event-time column that orders them.
    pub time: String,
    /// A column to add with the row number (always 1), as the SQL query names it.
    #[serde(default)]
    pub row_number: Option<String>,
    /// What happens to late rows: `{policy: drop}` (default) or `{policy: route}` (the side
    /// output `late`).
    #[serde(default)]
    pub late: crate::late::RowLateOptions,
}

/// Creates `dedup_first` operators.
#[derive(Debug, Default, Clone, Copy)]
pub struct DedupFactory;

impl OperatorFactory for DedupFactory {
    fn prepare(&self, spec: &OperatorArgs<'_>) -> Result<Arc<dyn PreparedOperator>> {
        let options: DedupOptions = decode_options(spec.options, spec.options_path)?;
        let input = crate::expr::single_input("dedup_first", spec.operator_id, spec.input_schemas)?;
        let path = spec.options_path;
        let column = |name: &str, option: &str| {
            crate::expr::column_index(&input, name, &format!("{path}.{option}"))
        };
        if options.keys.is_empty() {
            return Err(Error::config(
                format!("{path}.keys"),
                "name at least one key column (PARTITION BY)",
            ));
        }
        let keys = options
            .keys
            .iter()
            .map(|k| column(k, "keys"))
            .collect::<Result<Vec<_>>>()?;
        let time = column(&options.time, "time")?;
        if !matches!(
            input.field(time).data_type(),
            DataType::Int64 | DataType::Timestamp(..)
        ) {
            return Err(Error::config(
                format!("{path}.time"),
                "the event-time column is a TIMESTAMP or BIGINT milliseconds",
            ));
        }
        let mut fields: Vec<Field> = input.fields().iter().map(|f| f.as_ref().clone()).collect();
        if let Some(name) = &options.row_number {
            if input.index_of(name).is_ok() {
                return Err(Error::config(
                    format!("{path}.row_number"),
                    format!("the input already has a column `{name}`"),
                ));
            }
            fields.push(Field::new(name, DataType::Int64, false));
        }
        Ok(Arc::new(PreparedDedup(Arc::new(DedupConfig {
            input: Arc::clone(&input),
            output: Arc::new(Schema::new(fields)),
            keys,
            key_names: options.keys,
            time,
            row_number: options.row_number.is_some(),
            late: options.late.policy,
        }))))
    }
}

/// A `dedup_first` resolved against its input.
#[derive(Debug)]
pub struct PreparedDedup(Arc<DedupConfig>);

/// The options resolved against the input, shared by the instances.
#[derive(Debug)]
struct DedupConfig {
    input: SchemaRef,
    output: SchemaRef,
    keys: Vec<usize>,
    key_names: Vec<String>,
    time: usize,
    row_number: bool,
    late: crate::late::RowLatePolicy,
}

impl PreparedOperator for PreparedDedup {
    fn output_schema(&self) -> SchemaRef {
        Arc::clone(&self.0.output)
    }

    fn side_outputs(&self) -> Vec<weir_api::SideOutput> {
        crate::late::late_output(self.0.late, crate::late::LATE_OUTPUT, &self.0.input)
            .into_iter()
            .collect()
    }

    fn describe(&self) -> String {
        format!(
            "dedup_first: the first row per [{}] by `{}`",
            self.0.key_names.join(", "),
            self.0.input.field(self.0.time).name()
        )
    }

    fn key_columns(&self) -> Option<Vec<String>> {
        Some(self.0.key_names.clone())
    }

    fn create(&self, ctx: &TaskContext) -> Result<Box<dyn Operator>> {
        let mut store = ctx.keyed_state()?;
        for name in [BEST, PENDING] {
            store.register(StateDescriptor::<Value<Vec<u8>>>::new(name).spec())?;
        }
        Ok(Box::new(DedupOperator {
            cfg: Arc::clone(&self.0),
            types: self
                .0
                .input
                .fields()
                .iter()
                .map(|f| f.data_type().clone())
                .collect(),
            waiting: Waiting::new(ctx, store, PENDING, WATERMARK)?,
            done: HashSet::new(),
            late: crate::late::LateRows::new(
                crate::late::routed_schema(self.0.late, &self.0.input),
                ctx,
            ),
        }))
    }
}

/// A running `dedup_first`.
struct DedupOperator {
    cfg: Arc<DedupConfig>,
    types: Vec<DataType>,
    /// The state, the watermarks and the keys whose best row waits for the watermark.
    waiting: Waiting,
    /// Keys whose first row is out (their later rows are duplicates), as their state says;
    /// emptied when it holds [`DONE_KEYS`].
    done: HashSet<Vec<u8>>,
    /// Where late rows go.
    late: crate::late::LateRows,
}

impl DedupOperator {
    /// Emits `rows` (encoded), with the row number column when asked for.
    fn emit(&self, rows: &[Vec<u8>], out: &mut Output) -> Result<()> {
        if rows.is_empty() {
            return Ok(());
        }
        let refs: Vec<&[u8]> = rows.iter().map(Vec::as_slice).collect();
        let mut columns = decode_rows(&self.types, &refs).map_err(state_error)?;
        if self.cfg.row_number {
            columns.push(Arc::new(Int64Array::from(vec![1_i64; rows.len()])) as ArrayRef);
        }
        let batch = RecordBatch::try_new(Arc::clone(&self.cfg.output), columns)
            .map_err(|e| Error::arrow("assembling first rows", e))?;
        out.emit(batch);
        Ok(())
    }
}

impl Operator for DedupOperator {
    fn process_batch(&mut self, _input: usize, batch: RecordBatch, out: &mut Output) -> Result<()> {
        let behind = self.waiting.late_bound()?;
        if batch.num_rows() == 0 {
            return Ok(());
        }
        let p = Arc::clone(&self.cfg);
        let times =
            crate::event_time::event_times_ms(batch.column(p.time), p.input.field(p.time).name())?;
        let key_columns: Vec<ArrayRef> = p
            .keys
            .iter()
            .map(|&i| Arc::clone(batch.column(i)))
            .collect();
        let shards = key_hash::shard_ids(&key_columns, self.waiting.shard_count)
            .map_err(|e| Error::Internal(format!("hashing dedup keys: {e}")))?;
        let keys = encode_rows(&key_columns).map_err(state_error)?;
        // Of a key's on-time rows in this batch only the earliest can be its first row: each
        // key is looked up in state once per batch, and not at all once its row is out.
        let mut earliest: HashMap<&[u8], Earliest> = HashMap::new();
        let taken: Vec<bool> = (0..batch.num_rows())
            .map(|row| times.is_valid(row) && times.value(row) > behind)
            .collect();
        self.late.handle(&batch, &times, &taken, out)?;
        for (row, key) in keys.iter().enumerate() {
            if !taken[row] {
                continue;
            }
            if self.done.contains(key) {
                continue;
            }
            let time = times.value(row);
            let entry = earliest.entry(key.as_slice()).or_insert((time, Vec::new()));
            if time < entry.0 {
                *entry = (time, Vec::new());
            }
            if time == entry.0 {
                entry.1.push(row as u32);
            }
        }
        if earliest.is_empty() {
            return Ok(());
        }
        let earliest: Vec<(&[u8], Earliest)> = earliest.into_iter().collect();
        // Only the candidates' rows are encoded (ties are broken by the encoded row), in the
        // order of `earliest`.
        let picked = UInt32Array::from_iter_values(
            earliest
                .iter()
                .flat_map(|(_, (_, rows))| rows.iter().copied()),
        );
        let taken = batch
            .columns()
            .iter()
            .map(|c| take(c.as_ref(), &picked, None))
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| Error::arrow("selecting first-row candidates", e))?;
        let mut encoded = encode_rows(&taken).map_err(state_error)?.into_iter();
        let store = self.waiting.store.as_mut();
        let mut noted: Vec<(u32, i64)> = Vec::new();
        for (key, (time, candidates)) in earliest {
            let shard = StateShardId(shards[candidates[0] as usize]);
            let row = encoded
                .by_ref()
                .take(candidates.len())
                .min()
                .ok_or_else(|| state_error("a key without a candidate row"))?;
            store.set_current_key(key, shard);
            store.set_current_namespace(&[]);
            let best = store.get(BEST, &[])?;
            let replace = match best.as_deref() {
                None => None,
                Some([1, ..]) => {
                    if self.done.len() >= DONE_KEYS {
                        self.done.clear();
                    }
                    self.done.insert(key.to_vec());
                    continue;
                }
                Some([0, rest @ ..]) if rest.len() >= 8 => {
                    let (at, old) = rest.split_at(8);
                    let at = decode_timestamp(at).map_err(state_error)?;
                    if (time, row.as_slice()) >= (at, old) {
                        continue;
                    }
                    Some(at)
                }
                Some(_) => return Err(state_error("a corrupt dedup entry")),
            };
            if let Some(at) = replace {
                let namespace = encode_timestamp(at);
                let address = StateAddress {
                    shard,
                    namespace: &namespace,
                    key,
                };
                store.remove_at(PENDING, address, &[])?;
            }
            let mut payload = vec![0_u8];
            payload.extend_from_slice(&encode_timestamp(time));
            payload.extend_from_slice(&row);
            store.set_current_key(key, shard);
            store.set_current_namespace(&[]);
            store.put(BEST, &[], &payload)?;
            let namespace = encode_timestamp(time);
            let address = StateAddress {
                shard,
                namespace: &namespace,
                key,
            };
            store.put_at(PENDING, address, &[], &row)?;
            noted.push((shard.0, time));
        }
        for (shard, time) in noted {
            self.waiting.note(shard, time);
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
        let mut first: Vec<Vec<u8>> = Vec::new();
        let advanced = self.waiting.advance(watermark, |store, shard, entries| {
            for entry in entries {
                // The key's row is out: its later rows are duplicates.
                let done = StateAddress {
                    shard,
                    namespace: &[],
                    key: &entry.key,
                };
                store.put_at(BEST, done, &[], &[1])?;
                if self.done.len() >= DONE_KEYS {
                    self.done.clear();
                }
                self.done.insert(entry.key);
                first.push(entry.payload);
            }
            Ok(())
        })?;
        if advanced {
            self.emit(&first, out)?;
            out.emit_watermark(watermark);
        }
        Ok(())
    }

    fn on_barrier(&mut self, _barrier: weir_api::Barrier, _out: &mut Output) -> Result<()> {
        self.waiting.save()
    }

    fn on_end_of_input(&mut self, out: &mut Output) -> Result<()> {
        self.process_watermark(Watermark(weir_api::EventTimeMs(i64::MAX)), out)
    }
}

fn state_error(e: impl std::fmt::Display) -> Error {
    Error::Internal(format!("dedup state: {e}"))
}
