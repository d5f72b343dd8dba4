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
use arrow::compute::SortOptions;
use arrow::compute::take;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::row::{RowConverter, Rows, SortField};
use serde::Deserialize;
use std::collections::HashMap;
use std::sync::Arc;
use weir_api::state::{StateDescriptor, Value};
use weir_api::{
    Error, Operator, OperatorFactory, OperatorSpec, Output, PreparedOperator, Result, StateAddress,
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
/// The largest N: one state entry holds a partition's N rows.
pub const MAX_LIMIT: u32 = 10_000;
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

/// One `ORDER BY` item.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SortColumn {
    /// The column.
    pub column: String,
    /// Largest first.
    #[serde(default)]
    pub descending: bool,
    /// Whether nulls come first; by default they count as larger than every value (last when
    /// ascending, first when descending), as in Flink and DataFusion.
    #[serde(default)]
    pub nulls_first: Option<bool>,
}

/// Creates `window_top_n` operators.
#[derive(Debug, Default, Clone, Copy)]
pub struct WindowTopNFactory;

impl OperatorFactory for WindowTopNFactory {
    fn prepare(&self, spec: &OperatorSpec<'_>) -> Result<Arc<dyn PreparedOperator>> {
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
        if !(1..=MAX_LIMIT).contains(&options.limit) {
            return Err(Error::config(
                format!("{path}.limit"),
                format!(
                    "keep 1 to {MAX_LIMIT} rows per window, not {}",
                    options.limit
                ),
            ));
        }
        if options.order_by.is_empty() {
            return Err(Error::config(
                format!("{path}.order_by"),
                "name at least one column to rank the rows by",
            ));
        }
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
        let mut order = Vec::with_capacity(options.order_by.len());
        let mut fields = Vec::with_capacity(options.order_by.len());
        for (i, sort) in options.order_by.iter().enumerate() {
            let index = column(&sort.column, &format!("order_by[{i}].column"))?;
            order.push(index);
            fields.push(SortField::new_with_options(
                input.field(index).data_type().clone(),
                SortOptions {
                    descending: sort.descending,
                    nulls_first: sort.nulls_first.unwrap_or(sort.descending),
                },
            ));
        }
        // Checks that the sort columns' types can be ranked.
        RowConverter::new(fields.clone()).map_err(|e| {
            Error::config(
                format!("{path}.order_by"),
                format!("cannot rank by these: {e}"),
            )
        })?;
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
            limit: options.limit as usize,
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

/// One ranked row: its sort key (arrow's row format, so bytes compare in the ranking's order)
/// and the row itself (weir's row codec), which breaks ties.
type Entry = (Vec<u8>, Vec<u8>);

/// A running `window_top_n`.
struct TopNOperator {
    cfg: Arc<TopNConfig>,
    converter: RowConverter,
    /// The state, the watermarks and the partitions whose rows wait for their window's end.
    waiting: Waiting,
    /// Where late rows go.
    late: crate::late::LateRows,
}

impl TopNOperator {
    /// The rows of the batch that can still be among their partition's first N, grouped by
    /// partition: each group's own first N and the rows that tie with its N-th.
    fn candidates(
        &self,
        rows: &[u32],
        last_ms: &[i64],
        keys: &[Vec<u8>],
        sort: &Rows,
    ) -> Vec<((i64, usize), Vec<u32>)> {
        let mut groups: HashMap<(i64, &[u8]), Vec<u32>> = HashMap::new();
        let mut first: Vec<(i64, usize)> = Vec::new();
        for &row in rows {
            let r = row as usize;
            let group = groups.entry((last_ms[r], &keys[r])).or_default();
            if group.is_empty() {
                first.push((last_ms[r], r));
            }
            group.push(row);
        }
        let limit = self.cfg.limit;
        let mut out = Vec::with_capacity(first.len());
        for (last, r) in first {
            let Some(mut group) = groups.remove(&(last, keys[r].as_slice())) else {
                continue;
            };
            group.sort_by(|&a, &b| sort.row(a as usize).cmp(&sort.row(b as usize)));
            if group.len() > limit {
                let nth = sort.row(group[limit - 1] as usize);
                let ties = group[limit..]
                    .iter()
                    .take_while(|&&x| sort.row(x as usize) == nth)
                    .count();
                group.truncate(limit + ties);
            }
            out.push(((last, r), group));
        }
        out
    }
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
        let groups = self.candidates(&on_time, &last_ms, &keys, &sort);
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

/// A partition's ranked rows as one state payload: per entry, the sort key's and the row's
/// lengths (u32, little-endian) each before its bytes.
fn encode_entries(entries: &[Entry]) -> Vec<u8> {
    let size: usize = entries.iter().map(|(s, r)| 8 + s.len() + r.len()).sum();
    let mut out = Vec::with_capacity(size);
    for (sort, row) in entries {
        for part in [sort, row] {
            out.extend_from_slice(&(part.len() as u32).to_le_bytes());
            out.extend_from_slice(part);
        }
    }
    out
}

/// Reads [`encode_entries`]' payload back.
fn decode_entries(mut payload: &[u8]) -> Result<Vec<Entry>> {
    let part = |payload: &mut &[u8]| -> Result<Vec<u8>> {
        let corrupt = || state_error("a corrupt top-N entry");
        let (len, rest) = payload.split_first_chunk::<4>().ok_or_else(corrupt)?;
        let len = u32::from_le_bytes(*len) as usize;
        if rest.len() < len {
            return Err(corrupt());
        }
        let (bytes, rest) = rest.split_at(len);
        *payload = rest;
        Ok(bytes.to_vec())
    };
    let mut entries = Vec::new();
    while !payload.is_empty() {
        let sort = part(&mut payload)?;
        let row = part(&mut payload)?;
        entries.push((sort, row));
    }
    Ok(entries)
}

fn state_error(e: impl std::fmt::Display) -> Error {
    Error::Internal(format!("top-N state: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_and_a_cut_payload_is_an_error() {
        let entries: Vec<Entry> = vec![(vec![1, 2], vec![9]), (vec![], vec![7, 7, 7])];
        let payload = encode_entries(&entries);
        assert_eq!(decode_entries(&payload).unwrap(), entries);
        assert!(decode_entries(&payload[..payload.len() - 1]).is_err());
        assert!(decode_entries(&[]).unwrap().is_empty());
    }
}
