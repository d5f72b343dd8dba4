//! The `top_n` operator: the first N rows of each key in a given order over all rows so far,
//! as Flink's Top-N without a window (`ROW_NUMBER() OVER (PARTITION BY k ORDER BY v DESC) <=
//! N`) and its deduplication keeping the last row (N = 1, ordered by the time attribute
//! descending). Its results change as rows arrive, so its output is an updating stream
//! ([`weir_api::changelog`]). See docs/sql.md ("Top-N and the last row without a window").
//!
//! Per key, the best N rows so far live in keyed state, ranked by the sort columns and then by
//! the encoded row, so ties rank the same way whatever the arrival order. A batch is ranked
//! within itself first, so only its candidates reach the state: one read and at most one write
//! per key and batch. What a key's changed ranking emits:
//!
//! - without a row number: `+I` for each row that entered the first N and `-D` for each that
//!   left; with N = 1 a replaced row is `-U` and its successor `+U`;
//! - with a row number: per position whose row changed, `-U` of the old row and `+U` of the
//!   new one with that number (`+I` for a position filled for the first time), so the result
//!   is a table keyed by (key, row number), as Flink emits it.

use crate::ranking::{Entry, SortColumn, decode_entries, encode_entries};
use arrow::array::{ArrayRef, Int8Array, Int64Array, RecordBatch, UInt32Array};
use arrow::compute::take;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::row::{RowConverter, SortField};
use serde::Deserialize;
use std::sync::Arc;
use weir_api::changelog::{RowKind, row_kind_field};
use weir_api::state::Value;
use weir_api::{
    Error, KeyedStateStore, Operator, OperatorArgs, OperatorFactory, Output, PreparedOperator,
    Result, StateShardId, TaskContext, Watermark, decode_options,
};
use weir_state::row_codec::{decode_rows, encode_rows};

/// Per key: its best rows so far ([`encode_entries`]).
const TOP: &str = "top_n.current";

/// The job-spec options of `top_n`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CurrentTopNOptions {
    /// The partition columns (`PARTITION BY`).
    pub keys: Vec<String>,
    /// The order the rows are ranked in (`ORDER BY`).
    pub order_by: Vec<SortColumn>,
    /// How many rows of each key are kept (1 to [`crate::ranking::MAX_LIMIT`]).
    pub limit: u32,
    /// A column to add with each row's number in its key, 1 to `limit`; the changes are then
    /// per position (see the module's documentation).
    #[serde(default)]
    pub row_number: Option<String>,
    /// How long a key's state lives without being read or written (processing time); unset:
    /// forever.
    #[serde(default)]
    pub state_ttl: Option<weir_api::DurationMs>,
}

/// Creates `top_n` operators.
#[derive(Debug, Default, Clone, Copy)]
pub struct CurrentTopNFactory;

impl OperatorFactory for CurrentTopNFactory {
    fn prepare(&self, spec: &OperatorArgs<'_>) -> Result<Arc<dyn PreparedOperator>> {
        let options: CurrentTopNOptions = decode_options(spec.options, spec.options_path)?;
        let input = crate::expr::single_input("top_n", spec.operator_id, spec.input_schemas)?;
        let path = spec.options_path;
        if options.keys.is_empty() {
            return Err(Error::config(
                format!("{path}.keys"),
                "name the partition columns (PARTITION BY)",
            ));
        }
        let limit = crate::ranking::check_limit(options.limit, path, "key")?;
        let keys = options
            .keys
            .iter()
            .enumerate()
            .map(|(i, k)| crate::expr::column_index(&input, k, &format!("{path}.keys[{i}]")))
            .collect::<Result<Vec<_>>>()?;
        let (order, sort_fields) = crate::ranking::sort_columns(&input, &options.order_by, path)?;
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
        output.push(row_kind_field());
        Ok(Arc::new(PreparedCurrentTopN(Arc::new(Config {
            types: input
                .fields()
                .iter()
                .map(|f| f.data_type().clone())
                .collect(),
            output: Arc::new(Schema::new(output)),
            keys,
            key_names: options.keys,
            order,
            sort_fields,
            limit,
            row_number: options.row_number.is_some(),
            ttl: options.state_ttl.filter(|d| d.0 > 0),
        }))))
    }
}

/// The options resolved against the input, shared by the instances.
#[derive(Debug)]
struct Config {
    types: Vec<DataType>,
    output: SchemaRef,
    keys: Vec<usize>,
    key_names: Vec<String>,
    order: Vec<usize>,
    sort_fields: Vec<SortField>,
    limit: usize,
    row_number: bool,
    ttl: Option<weir_api::DurationMs>,
}

/// A `top_n` resolved against its input.
#[derive(Debug)]
pub struct PreparedCurrentTopN(Arc<Config>);

impl PreparedOperator for PreparedCurrentTopN {
    fn output_schema(&self) -> SchemaRef {
        Arc::clone(&self.0.output)
    }

    fn describe(&self) -> String {
        format!(
            "top_n: the current first {} rows per [{}], updating",
            self.0.limit,
            self.0.key_names.join(", ")
        )
    }

    fn key_columns(&self) -> Option<Vec<String>> {
        Some(self.0.key_names.clone())
    }

    fn reads_event_time(&self) -> bool {
        false
    }

    fn create(&self, ctx: &TaskContext) -> Result<Box<dyn Operator>> {
        let mut store = ctx.keyed_state()?;
        store.register(crate::ttl::descriptor::<Value<Vec<u8>>>(TOP, self.0.ttl).spec())?;
        Ok(Box::new(CurrentTopN {
            converter: RowConverter::new(self.0.sort_fields.clone())
                .map_err(|e| Error::arrow("ranking rows", e))?,
            cfg: Arc::clone(&self.0),
            store,
            shard_count: ctx.state_shard_count.unwrap_or(1),
        }))
    }
}

/// A running `top_n`.
struct CurrentTopN {
    cfg: Arc<Config>,
    converter: RowConverter,
    store: Box<dyn KeyedStateStore>,
    shard_count: u32,
}

/// The changes of one batch: per change, the encoded row, its number and its kind.
#[derive(Default)]
struct Changes {
    rows: Vec<Vec<u8>>,
    numbers: Vec<i64>,
    kinds: Vec<i8>,
}

impl Changes {
    fn push(&mut self, row: &[u8], number: usize, kind: RowKind) {
        self.rows.push(row.to_vec());
        self.numbers.push(number as i64 + 1);
        self.kinds.push(kind.as_i8());
    }

    /// What replacing the ranking `before` by `after` emits.
    fn diff(&mut self, before: &[Entry], after: &[Entry], numbered: bool, limit: usize) {
        if numbered {
            for i in 0..before.len().max(after.len()) {
                match (before.get(i), after.get(i)) {
                    (Some(old), Some(new)) if old != new => {
                        self.push(&old.1, i, RowKind::UpdateBefore);
                        self.push(&new.1, i, RowKind::UpdateAfter);
                    }
                    (None, Some(new)) => self.push(&new.1, i, RowKind::Insert),
                    (Some(old), None) => self.push(&old.1, i, RowKind::Delete),
                    _ => {}
                }
            }
            return;
        }
        if limit == 1 {
            match (before.first(), after.first()) {
                (Some(old), Some(new)) if old != new => {
                    self.push(&old.1, 0, RowKind::UpdateBefore);
                    self.push(&new.1, 0, RowKind::UpdateAfter);
                }
                (None, Some(new)) => self.push(&new.1, 0, RowKind::Insert),
                _ => {}
            }
            return;
        }
        // Both are sorted: a merge finds what left and what entered.
        let (mut i, mut j) = (0, 0);
        while i < before.len() || j < after.len() {
            match (before.get(i), after.get(j)) {
                (Some(old), Some(new)) if old == new => {
                    i += 1;
                    j += 1;
                }
                (Some(old), Some(new)) if old < new => {
                    self.push(&old.1, i, RowKind::Delete);
                    i += 1;
                }
                (Some(old), None) => {
                    self.push(&old.1, i, RowKind::Delete);
                    i += 1;
                }
                (_, Some(new)) => {
                    self.push(&new.1, j, RowKind::Insert);
                    j += 1;
                }
                (None, None) => break,
            }
        }
    }
}

impl CurrentTopN {
    fn emit(&self, changes: Changes, out: &mut Output) -> Result<()> {
        if changes.rows.is_empty() {
            return Ok(());
        }
        let refs: Vec<&[u8]> = changes.rows.iter().map(Vec::as_slice).collect();
        let mut columns = decode_rows(&self.cfg.types, &refs).map_err(state_error)?;
        if self.cfg.row_number {
            columns.push(Arc::new(Int64Array::from(changes.numbers)) as ArrayRef);
        }
        columns.push(Arc::new(Int8Array::from(changes.kinds)));
        let batch = RecordBatch::try_new(Arc::clone(&self.cfg.output), columns)
            .map_err(|e| Error::arrow("assembling top-N changes", e))?;
        out.emit(batch);
        Ok(())
    }
}

impl Operator for CurrentTopN {
    fn process_batch(&mut self, _input: usize, batch: RecordBatch, out: &mut Output) -> Result<()> {
        let n = batch.num_rows();
        if n == 0 {
            return Ok(());
        }
        let cfg = Arc::clone(&self.cfg);
        let key_columns: Vec<ArrayRef> = cfg
            .keys
            .iter()
            .map(|&i| Arc::clone(batch.column(i)))
            .collect();
        let keyed = crate::keyed_rows::KeyedRows::of(&key_columns, self.shard_count, "top-N")?;
        let (keys, shards) = (&keyed.keys, &keyed.shards);
        let sort_columns: Vec<ArrayRef> = cfg
            .order
            .iter()
            .map(|&i| Arc::clone(batch.column(i)))
            .collect();
        let sort = self
            .converter
            .convert_columns(&sort_columns)
            .map_err(|e| Error::arrow("ranking rows", e))?;
        let groups =
            crate::ranking::candidates(0..n as u32, |r| keys[r].as_slice(), &sort, cfg.limit);
        // Encode only the candidates' rows, group by group.
        let picked: Vec<u32> = groups.iter().flat_map(|(_, g)| g.iter().copied()).collect();
        let indices = UInt32Array::from(picked);
        let taken = batch
            .columns()
            .iter()
            .map(|c| take(c.as_ref(), &indices, None))
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| Error::arrow("selecting top-N candidates", e))?;
        let mut encoded = encode_rows(&taken).map_err(state_error)?.into_iter();
        let mut changes = Changes::default();
        for (first, group) in groups {
            self.store
                .set_current_key(&keys[first], StateShardId(shards[first]));
            self.store.set_current_namespace(&[]);
            let before = match self.store.get(TOP, &[])? {
                Some(payload) => decode_entries(&payload)?,
                None => Vec::new(),
            };
            let mut after = before.clone();
            for (row, encoded_row) in group.iter().zip(encoded.by_ref()) {
                after.push((sort.row(*row as usize).as_ref().to_vec(), encoded_row));
            }
            after.sort();
            after.truncate(cfg.limit);
            if after != before {
                self.store.put(TOP, &[], &encode_entries(&after))?;
                changes.diff(&before, &after, cfg.row_number, cfg.limit);
            }
        }
        self.emit(changes, out)
    }

    /// The results are not the input's rows in its order: a split's watermark says nothing
    /// about them.
    fn process_split_watermark(
        &mut self,
        _input: usize,
        _watermark: Watermark,
        _out: &mut Output,
    ) -> Result<()> {
        Ok(())
    }
}

fn state_error(e: impl std::fmt::Display) -> Error {
    Error::Internal(format!("top-N state: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(sort: u8, row: u8) -> Entry {
        (vec![sort], vec![row])
    }

    fn kinds(changes: &Changes) -> Vec<(u8, i64, i8)> {
        changes
            .rows
            .iter()
            .zip(&changes.numbers)
            .zip(&changes.kinds)
            .map(|((r, n), k)| (r[0], *n, *k))
            .collect()
    }

    #[test]
    fn without_numbers_rows_enter_and_leave() {
        let before = [entry(1, 10), entry(3, 30), entry(5, 50)];
        let after = [entry(1, 10), entry(2, 20), entry(3, 30)];
        let mut changes = Changes::default();
        changes.diff(&before, &after, false, 3);
        assert_eq!(kinds(&changes), [(20, 2, 0), (50, 3, 3)]);
    }

    #[test]
    fn with_numbers_every_shifted_position_is_updated() {
        let before = [entry(1, 10), entry(3, 30)];
        let after = [entry(1, 10), entry(2, 20), entry(3, 30)];
        let mut changes = Changes::default();
        changes.diff(&before, &after, true, 3);
        assert_eq!(kinds(&changes), [(30, 2, 1), (20, 2, 2), (30, 3, 0)]);
    }

    #[test]
    fn the_last_row_replaces_its_predecessor() {
        let mut changes = Changes::default();
        changes.diff(&[entry(5, 50)], &[entry(4, 40)], false, 1);
        assert_eq!(kinds(&changes), [(50, 1, 1), (40, 1, 2)]);
    }
}
