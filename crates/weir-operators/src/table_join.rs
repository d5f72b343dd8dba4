//! The `table_join` operator: a stream (input 0) joined on equal keys with a bounded table
//! (input 1) that is read in full first, the everyday enrichment of facts with dimensions.
//! See docs/sql.md for the user's view.
//!
//! The table's rows go into keyed state as they come. Stream rows that come before the table
//! has ended wait in keyed state; when the table's input ends (its own watermark reaches the
//! end of time), they are joined and emitted, and every later stream row is joined as it comes.
//! So every stream row sees the whole table, whatever the timing of the two inputs, and the
//! result does not depend on it. The output watermark is held until the table has ended.
//! `left` keeps stream rows without a match, padded with nulls; `semi` emits each stream row
//! that has a match once and `anti` each one that has none, with the stream's columns only.
//! NULL keys never match.
//!
//! State layout: `table_join.table` and `table_join.waiting` are map states, key = the join
//! key (row codec), sub-key = the row (row codec), payload = how many such rows arrived
//! (`u32`, little endian); `table_join.progress` says whether the table has ended
//! (kept per owned state shard), so a restore does not wait for a table that was read before.

use crate::shard_progress::ShardProgress;
use arrow::array::{Array, ArrayRef, RecordBatch, UInt32Array, new_null_array};
use arrow::compute::take;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use serde::Deserialize;
use std::collections::HashMap;
use std::sync::Arc;
use weir_api::state::{Map, NamespaceRange, StateDescriptor};
use weir_api::{
    Error, KeyedStateStore, Operator, OperatorArgs, OperatorFactory, Output, PreparedOperator,
    Result, StateAddress, StateShardId, TaskContext, Watermark, decode_options,
};
use weir_plan::key_hash;
use weir_state::row_codec::{decode_rows, encode_rows};

const TABLE: &str = "table_join.table";
const WAITING: &str = "table_join.waiting";
const PROGRESS: &str = "table_join.progress";
/// Keys whose table rows are kept decoded in memory once the table has ended (it no longer
/// changes then); the cache is emptied when it is full.
const CACHE_KEYS: usize = 65_536;

/// Which stream rows a `table_join` emits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TableJoinKind {
    /// Stream rows with a match, once per matching table row.
    #[default]
    Inner,
    /// Also stream rows without one, the table's columns null.
    Left,
    /// Each stream row with a match, once, with the stream's columns only (`EXISTS`, `IN`).
    Semi,
    /// Each stream row without a match, with the stream's columns only (`NOT EXISTS`).
    Anti,
}

impl TableJoinKind {
    /// Whether the output has the table's columns (not for semi and anti joins).
    fn emits_table(self) -> bool {
        matches!(self, TableJoinKind::Inner | TableJoinKind::Left)
    }
}

/// The job-spec options of `table_join`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TableJoinOptions {
    /// `inner` (default), `left` (stream rows without a match are kept), `semi` (stream rows
    /// with a match, once) or `anti` (stream rows without one).
    #[serde(default)]
    pub join: TableJoinKind,
    /// Key columns of the stream (input 0).
    pub stream_keys: Vec<String>,
    /// Key columns of the table (input 1), pairwise equal to `stream_keys`.
    pub table_keys: Vec<String>,
}

/// Creates `table_join` operators.
#[derive(Debug, Default, Clone, Copy)]
pub struct TableJoinFactory;

/// The options resolved against the inputs.
#[derive(Debug)]
struct TableJoinConfig {
    join: TableJoinKind,
    keys: [Vec<usize>; 2],
    key_names: [Vec<String>; 2],
    types: [Vec<DataType>; 2],
    output: SchemaRef,
}

impl OperatorFactory for TableJoinFactory {
    fn prepare(&self, spec: &OperatorArgs<'_>) -> Result<Arc<dyn PreparedOperator>> {
        let options: TableJoinOptions = decode_options(spec.options, spec.options_path)?;
        let path = spec.options_path;
        let [stream, table] = spec.input_schemas else {
            return Err(Error::schema(
                format!("table_join operator `{}`", spec.operator_id),
                format!(
                    "table_join takes two inputs (the stream, then the table), got {}",
                    spec.input_schemas.len()
                ),
            ));
        };
        if options.stream_keys.is_empty() || options.stream_keys.len() != options.table_keys.len() {
            return Err(Error::config(
                format!("{path}.table_keys"),
                "name as many table keys as stream keys, at least one",
            ));
        }
        let mut keys: [Vec<usize>; 2] = [Vec::new(), Vec::new()];
        for (side, (schema, names, option)) in [
            (stream, &options.stream_keys, "stream_keys"),
            (table, &options.table_keys, "table_keys"),
        ]
        .into_iter()
        .enumerate()
        {
            for name in names {
                keys[side].push(crate::expr::column_index(
                    schema,
                    name,
                    &format!("{path}.{option}"),
                )?);
            }
        }
        for (i, (&s, &t)) in keys[0].iter().zip(&keys[1]).enumerate() {
            let (st, tt) = (stream.field(s).data_type(), table.field(t).data_type());
            if st != tt {
                return Err(Error::config(
                    format!("{path}.table_keys[{i}]"),
                    format!("the stream's key is {st}, the table's {tt}: cast one first"),
                ));
            }
        }
        let mut fields: Vec<Field> = stream.fields().iter().map(|f| f.as_ref().clone()).collect();
        let table_fields = if options.join.emits_table() {
            table.fields().iter().collect()
        } else {
            Vec::new()
        };
        for f in table_fields {
            if fields.iter().any(|g| g.name() == f.name()) {
                return Err(Error::config(
                    path,
                    format!(
                        "both inputs have a column `{}`: rename one before the join",
                        f.name()
                    ),
                ));
            }
            let padded = options.join == TableJoinKind::Left;
            fields.push(f.as_ref().clone().with_nullable(f.is_nullable() || padded));
        }
        let types =
            [stream, table].map(|s| s.fields().iter().map(|f| f.data_type().clone()).collect());
        Ok(Arc::new(PreparedTableJoin(Arc::new(TableJoinConfig {
            join: options.join,
            keys,
            key_names: [options.stream_keys, options.table_keys],
            types,
            output: Arc::new(Schema::new(fields)),
        }))))
    }
}

/// A `table_join` resolved against its inputs.
#[derive(Debug)]
pub struct PreparedTableJoin(Arc<TableJoinConfig>);

impl PreparedOperator for PreparedTableJoin {
    fn output_schema(&self) -> SchemaRef {
        Arc::clone(&self.0.output)
    }

    fn describe(&self) -> String {
        format!(
            "table_join ({:?}): stream [{}] = table [{}]",
            self.0.join,
            self.0.key_names[0].join(", "),
            self.0.key_names[1].join(", ")
        )
    }

    fn key_columns(&self) -> Option<Vec<String>> {
        Some(self.0.key_names[0].clone())
    }

    fn input_key_columns(&self) -> Option<Vec<Vec<String>>> {
        Some(self.0.key_names.to_vec())
    }

    fn create(&self, ctx: &TaskContext) -> Result<Box<dyn Operator>> {
        let mut store = ctx.keyed_state()?;
        for name in [TABLE, WAITING] {
            store.register(StateDescriptor::<Map<Vec<u8>, Vec<u8>>>::new(name).spec())?;
        }
        let progress = ShardProgress::new(ctx, store.as_mut(), PROGRESS)?;
        Ok(Box::new(TableJoinOperator {
            cfg: Arc::clone(&self.0),
            store,
            shard_count: ctx.state_shard_count.unwrap_or(1),
            progress,
            table_ended: false,
            started: false,
            cache: HashMap::new(),
        }))
    }
}

/// A running `table_join`.
struct TableJoinOperator {
    cfg: Arc<TableJoinConfig>,
    store: Box<dyn KeyedStateStore>,
    shard_count: u32,
    progress: ShardProgress,
    /// Whether the table input has ended (every stream row is joined as it comes).
    table_ended: bool,
    started: bool,
    /// Per key, the table's rows (once the table has ended).
    cache: HashMap<Vec<u8>, Arc<Vec<Vec<u8>>>>,
}

/// A batch's rows as state keys: per row, its key (`None` when a key column is null), shard and
/// encoded row (only where the rows are kept).
struct Keyed {
    keys: Vec<Option<Vec<u8>>>,
    shards: Vec<u32>,
    rows: Vec<Vec<u8>>,
}

impl TableJoinOperator {
    /// Restores whether the table had ended, once.
    fn start(&mut self) -> Result<()> {
        if !self.started {
            self.started = true;
            if let Some([ended]) = self.progress.restore(self.store.as_mut())? {
                self.table_ended = ended == 1;
            }
        }
        Ok(())
    }

    fn keyed(&self, batch: &RecordBatch, side: usize, with_rows: bool) -> Result<Keyed> {
        let columns: Vec<ArrayRef> = self.cfg.keys[side]
            .iter()
            .map(|&i| Arc::clone(batch.column(i)))
            .collect();
        let encoded = encode_rows(&columns).map_err(state_error)?;
        let shards = key_hash::shard_ids(&columns, self.shard_count)
            .map_err(|e| Error::Internal(format!("hashing join keys: {e}")))?;
        let keys = encoded
            .into_iter()
            .enumerate()
            .map(|(row, key)| columns.iter().all(|c| c.is_valid(row)).then_some(key))
            .collect();
        let rows = if with_rows {
            encode_rows(batch.columns()).map_err(state_error)?
        } else {
            Vec::new()
        };
        Ok(Keyed { keys, shards, rows })
    }

    /// Adds one to the count of `row` under `key` in `state`.
    fn add(&mut self, state: &str, key: &[u8], shard: u32, row: &[u8]) -> Result<()> {
        let address = StateAddress {
            shard: StateShardId(shard),
            namespace: &[],
            key,
        };
        let count = match self.store.get_at(state, address, row)? {
            Some(p) => count_of(&p)?,
            None => 0,
        };
        self.store
            .put_at(state, address, row, &count.saturating_add(1).to_le_bytes())
    }

    /// The table's rows of `key` (each repeated as often as it arrived).
    fn table_rows(&mut self, key: &[u8], shard: u32) -> Result<Arc<Vec<Vec<u8>>>> {
        if let Some(rows) = self.cache.get(key) {
            return Ok(Arc::clone(rows));
        }
        self.store.set_current_key(key, StateShardId(shard));
        self.store.set_current_namespace(&[]);
        let mut rows = Vec::new();
        for (row, payload) in self.store.entries(TABLE)? {
            let count = count_of(&payload)? as usize;
            rows.extend(std::iter::repeat_n(row, count));
        }
        let rows = Arc::new(rows);
        if self.cache.len() >= CACHE_KEYS {
            self.cache.clear();
        }
        self.cache.insert(key.to_vec(), Arc::clone(&rows));
        Ok(rows)
    }

    /// Joins a stream batch with the whole table and emits the result.
    fn join(&mut self, batch: &RecordBatch, keyed: &Keyed, out: &mut Output) -> Result<()> {
        let mut stream_rows: Vec<u32> = Vec::new();
        let mut table_index: Vec<Option<u32>> = Vec::new();
        let mut table_rows: Vec<Vec<u8>> = Vec::new();
        for row in 0..batch.num_rows() {
            let matches = match &keyed.keys[row] {
                Some(key) => self.table_rows(key, keyed.shards[row])?,
                None => Arc::new(Vec::new()),
            };
            match self.cfg.join {
                TableJoinKind::Inner | TableJoinKind::Left => {
                    for m in matches.iter() {
                        stream_rows.push(row as u32);
                        table_index.push(Some(table_rows.len() as u32));
                        table_rows.push(m.clone());
                    }
                    if matches.is_empty() && self.cfg.join == TableJoinKind::Left {
                        stream_rows.push(row as u32);
                        table_index.push(None);
                    }
                }
                TableJoinKind::Semi if !matches.is_empty() => stream_rows.push(row as u32),
                TableJoinKind::Anti if matches.is_empty() => stream_rows.push(row as u32),
                TableJoinKind::Semi | TableJoinKind::Anti => {}
            }
        }
        if stream_rows.is_empty() {
            return Ok(());
        }
        let indices = UInt32Array::from(stream_rows);
        let mut columns = batch
            .columns()
            .iter()
            .map(|c| take(c.as_ref(), &indices, None))
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| Error::arrow("selecting joined stream rows", e))?;
        let rows = indices.len();
        if !self.cfg.join.emits_table() {
            // The stream's columns alone.
        } else if table_rows.is_empty() {
            columns.extend(self.cfg.types[1].iter().map(|t| new_null_array(t, rows)));
        } else {
            let refs: Vec<&[u8]> = table_rows.iter().map(Vec::as_slice).collect();
            let decoded = decode_rows(&self.cfg.types[1], &refs).map_err(state_error)?;
            let positions = UInt32Array::from(table_index);
            for column in decoded {
                columns.push(
                    take(column.as_ref(), &positions, None)
                        .map_err(|e| Error::arrow("placing joined table rows", e))?,
                );
            }
        }
        let batch = RecordBatch::try_new(Arc::clone(&self.cfg.output), columns)
            .map_err(|e| Error::arrow("assembling joined rows", e))?;
        out.emit(batch);
        Ok(())
    }

    /// The table has ended: joins and emits the stream rows that waited for it.
    fn table_end(&mut self, out: &mut Output) -> Result<()> {
        if self.table_ended {
            return Ok(());
        }
        self.table_ended = true;
        self.cache.clear();
        let shards = self.progress.live_shards(self.store.as_mut(), &[WAITING])?;
        for shard in shards {
            let entries =
                self.store
                    .scan(WAITING, StateShardId(shard), NamespaceRange::ALL, None)?;
            let mut rows: Vec<&[u8]> = Vec::new();
            for e in &entries {
                let address = StateAddress {
                    shard: StateShardId(shard),
                    namespace: &e.namespace,
                    key: &e.key,
                };
                self.store.remove_at(WAITING, address, &e.sub_key)?;
                let count = count_of(&e.payload)? as usize;
                rows.extend(std::iter::repeat_n(e.sub_key.as_slice(), count));
            }
            if rows.is_empty() {
                continue;
            }
            let columns = decode_rows(&self.cfg.types[0], &rows).map_err(state_error)?;
            let schema = Arc::new(Schema::new(
                self.cfg
                    .output
                    .fields()
                    .iter()
                    .take(self.cfg.types[0].len())
                    .map(|f| f.as_ref().clone())
                    .collect::<Vec<_>>(),
            ));
            let batch = RecordBatch::try_new(schema, columns)
                .map_err(|e| Error::arrow("rebuilding waiting stream rows", e))?;
            let keyed = self.keyed(&batch, 0, false)?;
            self.join(&batch, &keyed, out)?;
        }
        Ok(())
    }
}

impl Operator for TableJoinOperator {
    fn process_batch(&mut self, input: usize, batch: RecordBatch, out: &mut Output) -> Result<()> {
        self.start()?;
        if batch.num_rows() == 0 {
            return Ok(());
        }
        // Rows are encoded only to be kept: the table's, and stream rows that wait for it.
        let keyed = self.keyed(&batch, input, input == 1 || !self.table_ended)?;
        if input == 1 {
            // A NULL key matches nothing: such table rows are not kept.
            for row in 0..batch.num_rows() {
                if let Some(key) = &keyed.keys[row] {
                    self.add(TABLE, key, keyed.shards[row], &keyed.rows[row])?;
                }
            }
            self.cache.clear();
            return Ok(());
        }
        if self.table_ended {
            return self.join(&batch, &keyed, out);
        }
        for row in 0..batch.num_rows() {
            // A NULL key waits too: a left join emits it padded, an anti join as it is.
            let key = keyed.keys[row].as_deref().unwrap_or(&[]);
            self.add(WAITING, key, keyed.shards[row], &keyed.rows[row])?;
        }
        Ok(())
    }

    fn reads_input_watermarks(&self) -> bool {
        true
    }

    fn process_input_watermark(
        &mut self,
        input: usize,
        watermark: Watermark,
        out: &mut Output,
    ) -> Result<()> {
        self.start()?;
        if input == 1 && watermark.0.0 == i64::MAX {
            self.table_end(out)?;
        }
        Ok(())
    }

    fn process_watermark(&mut self, watermark: Watermark, out: &mut Output) -> Result<()> {
        self.start()?;
        // Rows waiting for the table are emitted when it ends: no watermark may pass them
        // before.
        if self.table_ended {
            out.emit_watermark(watermark);
        }
        Ok(())
    }

    fn process_split_watermark(
        &mut self,
        _input: usize,
        _watermark: Watermark,
        _out: &mut Output,
    ) -> Result<()> {
        // Waiting rows are emitted long after they were read: what follows judges the join's
        // rows by its output watermark alone.
        Ok(())
    }

    fn on_barrier(&mut self, _barrier: weir_api::Barrier, _out: &mut Output) -> Result<()> {
        self.start()?;
        self.progress
            .save(self.store.as_mut(), &[i64::from(self.table_ended)])
    }

    fn on_end_of_input(&mut self, out: &mut Output) -> Result<()> {
        self.start()?;
        self.table_end(out)
    }
}

fn count_of(payload: &[u8]) -> Result<u32> {
    payload
        .first_chunk::<4>()
        .map(|c| u32::from_le_bytes(*c))
        .ok_or_else(|| state_error("an entry without its count"))
}

fn state_error(e: impl std::fmt::Display) -> Error {
    Error::Internal(format!("table join state: {e}"))
}
