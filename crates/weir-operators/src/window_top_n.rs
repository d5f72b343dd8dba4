//! The `window_top_n` operator: the first N rows of each window (and key) in a given order,
//! emitted once the watermark passes the window's end, as Flink's Window Top-N
//! (`ROW_NUMBER() OVER (PARTITION BY window_start, window_end, ... ORDER BY ...) <= N` after a
//! window table function or a window aggregation) and Window Deduplication (the same with
//! N = 1, ordered by the time attribute). See docs/sql.md for the user's view.
//!
//! Per partition (the key columns) and window end, the best N rows so far wait in keyed state,
//! ordered by the sort columns and then by the encoded row, so ties rank the same way whatever
//! the arrival order. A batch is first ranked within itself, so only its candidates reach the
//! state: one read and at most one write per partition and batch, not per row. A window's rows
//! are final once the watermark reaches `window_end - 1`; then they are emitted with their row
//! numbers and dropped from state. Rows whose window had already reached that point (behind the
//! operator's watermark, or their split's) are late: dropped and counted.

use crate::waiting::Waiting;
use arrow::array::{Array, ArrayRef, Int64Array, RecordBatch, UInt32Array};
use arrow::compute::take;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::row::{RowConverter, SortField};
use serde::Deserialize;
use std::sync::Arc;
use weir_api::state::{StateDescriptor, Value};
use weir_api::{
    Error, Operator, OperatorArgs, OperatorFactory, Output, PreparedOperator, Result, StateAddress,
    StateShardId, TaskContext, Watermark, decode_options,
};
use weir_plan::key_hash;
use weir_state::row_codec::{decode_rows, encode_rows};
use weir_state::timers::encode_timestamp;

/// Namespace = the window's last millisecond (`end - 1`), key = the partition key, payload =
/// the best rows so far ([`encode_entries`]).
const TOP: &str = "top_n.rows";
/// The operator's watermark, for a restore (kept by [`Waiting`]).
const WATERMARK: &str = "top_n.watermark";
pub use crate::ranking::{MAX_LIMIT, SortColumn};
/// Rows per emitted batch when many windows end at once.
const EMIT_ROWS: usize = 8192;

/// The job-spec options of `window_top_n`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopNOptions {
    /// The partition columns (`PARTITION BY`): the window bounds and any keys.
    pub keys: Vec<String>,
    /// The column with the window's end (exclusive): its rows are final when the watermark
    /// reaches `window_end - 1`.
    pub window_end: String,
    /// The order the rows are ranked in (`ORDER BY`).
    pub order_by: Vec<SortColumn>,
    /// How many rows of each partition are kept (1 to [`MAX_LIMIT`]).
    pub limit: u32,
    /// A column to add with each row's number in its partition, 1 to `limit`.
    #[serde(default)]
    pub row_number: Option<String>,
    /// What happens to late rows: `{policy: drop}` (default) or `{policy: route}` (the side
    /// output `late`).
    #[serde(default)]
    pub late: crate::late::RowLateOptions,
}

/// Creates `window_top_n` operators.
#[derive(Debug, Default, Clone, Copy)]
pub struct WindowTopNFactory;

impl OperatorFactory for WindowTopNFactory {
    fn prepare(&self, spec: &OperatorArgs<'_>) -> Result<Arc<dyn PreparedOperator>> {
        let options: TopNOptions = decode_options(spec.options, spec.options_path)?;
        let input =
            crate::expr::single_input("window_top_n", spec.operator_id, spec.input_schemas)?;
        let path = spec.options_path;
        let column = |name: &str, option: &str| {
            crate::expr::column_index(&input, name, &format!("{path}.{option}"))
        };
        if options.keys.is_empty() {
            return Err(Error::config(
                format!("{path}.keys"),
                "name the partition columns (PARTITION BY window_start, window_end, ...)",
            ));
        }
        let limit = crate::ranking::check_limit(options.limit, path, "window")?;
        let keys = options
            .keys
            .iter()
            .map(|k| column(k, "keys"))
            .collect::<Result<Vec<_>>>()?;
        let window_end = column(&options.window_end, "window_end")?;
        if !matches!(
            input.field(window_end).data_type(),
            DataType::Int64 | DataType::Timestamp(..)
        ) {
            return Err(Error::config(
                format!("{path}.window_end"),
                "the window end is a TIMESTAMP or BIGINT milliseconds",
            ));
        }
        let (order, fields) = crate::ranking::sort_columns(&input, &options.order_by, path)?;
        let mut output: Vec<Field> = input.fields().iter().map(|f| f.as_ref().clone()).collect();
        if let Some(name) = &options.row_number {
            if input.index_of(name).is_ok() {
                return Err(Error::config(
                    format!("{path}.row_number"),
                    format!("the input already has a column `{name}`"),
                ));
            }
            output.push(Field::new(name, DataType::Int64, false));
        }
        Ok(Arc::new(PreparedTopN(Arc::new(TopNConfig {
            types: input
                .fields()
                .iter()
                .map(|f| f.data_type().clone())
                .collect(),
            input,
            output: Arc::new(Schema::new(output)),
            keys,
            key_names: options.keys,
            window_end,
            order,
            sort_fields: fields,
            limit,
            row_number: options.row_number.is_some(),
            late: options.late.policy,
        }))))
    }
}

/// A `window_top_n` resolved against its input.
#[derive(Debug)]
pub struct PreparedTopN(Arc<TopNConfig>);

/// The options resolved against the input, shared by the instances.
#[derive(Debug)]
struct TopNConfig {
    input: SchemaRef,
    types: Vec<DataType>,
    output: SchemaRef,
    keys: Vec<usize>,
    key_names: Vec<String>,
    window_end: usize,
    order: Vec<usize>,
    sort_fields: Vec<SortField>,
    limit: usize,
    row_number: bool,
    late: crate::late::RowLatePolicy,
}

impl PreparedOperator for PreparedTopN {
    fn output_schema(&self) -> SchemaRef {
        Arc::clone(&self.0.output)
    }

    fn side_outputs(&self) -> Vec<weir_api::SideOutput> {
        crate::late::late_output(self.0.late, crate::late::LATE_OUTPUT, &self.0.input)
            .into_iter()
            .collect()
    }

    fn describe(&self) -> String {
        let order: Vec<&str> = self
            .0
            .order
            .iter()
            .map(|&i| self.0.input.field(i).name().as_str())
            .collect();
        format!(
            "window_top_n: the first {} rows per [{}] by [{}]",
            self.0.limit,
            self.0.key_names.join(", "),
            order.join(", ")
        )
    }

    fn key_columns(&self) -> Option<Vec<String>> {
        Some(self.0.key_names.clone())
    }

    fn create(&self, ctx: &TaskContext) -> Result<Box<dyn Operator>> {
        let mut store = ctx.keyed_state()?;
        store.register(StateDescriptor::<Value<Vec<u8>>>::new(TOP).spec())?;
        let converter = RowConverter::new(self.0.sort_fields.clone())
            .map_err(|e| Error::arrow("ranking rows", e))?;
        Ok(Box::new(TopNOperator {
            cfg: Arc::clone(&self.0),
            converter,
            waiting: Waiting::new(ctx, store, TOP, WATERMARK)?,
            late: crate::late::LateRows::new(
                crate::late::routed_schema(self.0.late, &self.0.input),
                ctx,
            ),
        }))
    }
}

use crate::ranking::{decode_entries, encode_entries};

/// A running `window_top_n`.
struct TopNOperator {
    cfg: Arc<TopNConfig>,
    converter: RowConverter,
    /// The state, the watermarks and the partitions whose rows wait for their window's end.
    waiting: Waiting,
    /// Where late rows go.
    late: crate::late::LateRows,
}

impl Operator for TopNOperator {
    fn process_batch(&mut self, _input: usize, batch: RecordBatch, out: &mut Output) -> Result<()> {
        let behind = self.waiting.late_bound()?;
        if batch.num_rows() == 0 {
            return Ok(());
        }
        let cfg = Arc::clone(&self.cfg);
        let ends = crate::event_time::event_times_ms(
            batch.column(cfg.window_end),
            cfg.input.field(cfg.window_end).name(),
        )?;
        // A window's last millisecond; the window is late once the watermark reached it.
        let last_ms: Vec<i64> = ends.values().iter().map(|e| e.saturating_sub(1)).collect();
        let taken: Vec<bool> = (0..batch.num_rows())
            .map(|r| ends.is_valid(r) && last_ms[r] > behind)
            .collect();
        self.late.handle(&batch, &ends, &taken, out)?;
        let on_time: Vec<u32> = (0..batch.num_rows())
            .filter(|&r| taken[r])
            .map(|r| r as u32)
            .collect();
        if on_time.is_empty() {
            return Ok(());
        }
        let key_columns: Vec<ArrayRef> = cfg
            .keys
            .iter()
            .map(|&i| Arc::clone(batch.column(i)))
            .collect();
        let keys = encode_rows(&key_columns).map_err(state_error)?;
        let shards = key_hash::shard_ids(&key_columns, self.waiting.shard_count)
            .map_err(|e| Error::Internal(format!("hashing top-N keys: {e}")))?;
        let sort_columns: Vec<ArrayRef> = cfg
            .order
            .iter()
            .map(|&i| Arc::clone(batch.column(i)))
            .collect();
        let sort = self
            .converter
            .convert_columns(&sort_columns)
            .map_err(|e| Error::arrow("ranking rows", e))?;
        let groups: Vec<((i64, usize), Vec<u32>)> = crate::ranking::candidates(
            on_time.iter().copied(),
            |r| (last_ms[r], keys[r].as_slice()),
            &sort,
            cfg.limit,
        )
        .into_iter()
        .map(|(r, rows)| ((last_ms[r], r), rows))
        .collect();
        // Encode only the candidates' rows.
        let picked: Vec<u32> = groups.iter().flat_map(|(_, g)| g.iter().copied()).collect();
        let indices = UInt32Array::from(picked.clone());
        let taken = batch
            .columns()
            .iter()
            .map(|c| take(c.as_ref(), &indices, None))
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| Error::arrow("selecting top-N candidates", e))?;
        let encoded = encode_rows(&taken).map_err(state_error)?;
        // `encoded` holds the groups' rows in the order of `picked`: group by group.
        let mut encoded_rows = encoded.into_iter();
        for ((last, first), group) in groups {
            let shard = StateShardId(shards[first]);
            let namespace = encode_timestamp(last);
            let address = StateAddress {
                shard,
                namespace: &namespace,
                key: &keys[first],
            };
            let store = self.waiting.store.as_mut();
            let mut entries = match store.get_at(TOP, address, &[])? {
                Some(payload) => decode_entries(&payload)?,
                None => Vec::new(),
            };
            let before = entries.clone();
            for (row, encoded_row) in group.iter().zip(encoded_rows.by_ref()) {
                entries.push((sort.row(*row as usize).as_ref().to_vec(), encoded_row));
            }
            entries.sort();
            entries.truncate(cfg.limit);
            if entries != before {
                store.put_at(TOP, address, &[], &encode_entries(&entries))?;
                self.waiting.note(shard.0, last);
            }
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
        let cfg = Arc::clone(&self.cfg);
        let mut ranked: Vec<(Vec<u8>, i64)> = Vec::new();
        let advanced = self.waiting.advance(watermark, |_, _, entries| {
            for entry in entries {
                for (n, (_, row)) in decode_entries(&entry.payload)?.into_iter().enumerate() {
                    ranked.push((row, n as i64 + 1));
                }
                if ranked.len() >= EMIT_ROWS {
                    emit(&cfg, &mut ranked, out)?;
                }
            }
            Ok(())
        })?;
        if advanced {
            emit(&cfg, &mut ranked, out)?;
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

/// Emits `ranked` rows (encoded) with their row numbers.
fn emit(cfg: &TopNConfig, ranked: &mut Vec<(Vec<u8>, i64)>, out: &mut Output) -> Result<()> {
    if ranked.is_empty() {
        return Ok(());
    }
    let refs: Vec<&[u8]> = ranked.iter().map(|(row, _)| row.as_slice()).collect();
    let mut columns = decode_rows(&cfg.types, &refs).map_err(state_error)?;
    if cfg.row_number {
        let numbers: Int64Array = ranked.iter().map(|(_, n)| Some(*n)).collect();
        columns.push(Arc::new(numbers) as ArrayRef);
    }
    let batch = RecordBatch::try_new(Arc::clone(&cfg.output), columns)
        .map_err(|e| Error::arrow("assembling ranked rows", e))?;
    out.emit(batch);
    ranked.clear();
    Ok(())
}

fn state_error(e: impl std::fmt::Display) -> Error {
    Error::Internal(format!("top-N state: {e}"))
}
