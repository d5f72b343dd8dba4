//! The `group_aggregate` operator: aggregates per key over all rows so far, without a window,
//! as SQL's `GROUP BY` on a stream (and `SELECT DISTINCT`). Its results change as rows arrive,
//! so its output is an updating stream ([`weir_api::changelog`]): a key's first result is an
//! insert (`+I`), a changed result is retracted and re-emitted (`-U`, `+U`), and a key whose
//! rows were all retracted is deleted (`-D`). See docs/sql.md ("Updating results").
//!
//! The input may itself be updating: its `-U`/`-D` rows retract from the aggregates (`COUNT`,
//! `SUM`, `AVG` by subtraction; `MIN`, `MAX` and `DISTINCT` keep each value with a count). A
//! retraction for a key that has no rows is ignored, as in Flink.
//!
//! Each batch is folded per key: a key's rows in one batch change its result once, so the
//! changes emitted depend on how the input was cut into batches, but the results they
//! materialize (the last `+I`/`+U` of each key) do not.
//!
//! The groups a subtask touched stay in memory and are written to keyed state at every
//! checkpoint barrier and whenever they outgrow `buffer_bytes`; a group not in memory is read
//! from keyed state. A checkpoint therefore holds every group, and a restore or rescale reads
//! them back by key like any other keyed state. With a state TTL (`state_ttl`), groups are
//! written after every batch instead, and a group whose state expired starts afresh.

mod accumulator;
mod ordered;
#[cfg(test)]
mod tests;

use crate::window::AggregateOption;
use accumulator::{Aggregate, Function, Group, OutValue};
use arrow::array::{ArrayRef, Int8Array, UInt32Array};
use arrow::compute::take;
use arrow::datatypes::{Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use serde::Deserialize;
use std::collections::HashMap;
use std::sync::Arc;
use weir_api::changelog::{RowKind, row_kind_field, row_kind_index};
use weir_api::state::Value;
use weir_api::{
    Error, KeyedStateStore, Operator, OperatorArgs, OperatorFactory, Output, PreparedOperator,
    Result, StateShardId, TaskContext, Watermark, decode_options,
};

/// Per key: the group's rows and accumulators ([`accumulator`]'s format).
const GROUP: &str = "group_aggregate.group";

/// The default of [`GroupAggregateOptions::buffer_bytes`]: 32 MiB.
pub const DEFAULT_BUFFER_BYTES: u64 = 32 << 20;

fn default_buffer_bytes() -> u64 {
    DEFAULT_BUFFER_BYTES
}

/// The job-spec options of `group_aggregate`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupAggregateOptions {
    /// The grouping columns: one result per distinct value of them. None: one result for the
    /// whole stream (parallelism 1).
    #[serde(default)]
    pub key_by: Vec<String>,
    /// The aggregates per group (`count`, `sum`, `avg`, `min`, `max`, each `distinct` or not).
    /// None: the distinct keys themselves (`SELECT DISTINCT`).
    #[serde(default)]
    pub aggregates: Vec<AggregateOption>,
    /// Memory for the groups of one subtask before they are written to keyed state early
    /// (they are written at every checkpoint barrier anyway); 0 writes every batch through.
    #[serde(default = "default_buffer_bytes")]
    pub buffer_bytes: u64,
    /// How long a group's state lives without being read or written (processing time); unset:
    /// forever. With it, groups are written to keyed state after every batch.
    #[serde(default)]
    pub state_ttl: Option<weir_api::DurationMs>,
}

/// Creates `group_aggregate` operators.
#[derive(Debug, Default, Clone, Copy)]
pub struct GroupAggregateFactory;

impl OperatorFactory for GroupAggregateFactory {
    fn prepare(&self, spec: &OperatorArgs<'_>) -> Result<Arc<dyn PreparedOperator>> {
        let options: GroupAggregateOptions = decode_options(spec.options, spec.options_path)?;
        let input =
            crate::expr::single_input("group_aggregate", spec.operator_id, spec.input_schemas)?;
        let path = spec.options_path;
        let retracting = row_kind_index(&input).is_some();
        let keys = options
            .key_by
            .iter()
            .enumerate()
            .map(|(i, k)| crate::expr::column_index(&input, k, &format!("{path}.key_by[{i}]")))
            .collect::<Result<Vec<_>>>()?;
        let mut fields: Vec<Field> = keys
            .iter()
            .map(|&k| input.field(k).as_ref().clone())
            .collect();
        let mut aggregates = Vec::with_capacity(options.aggregates.len());
        for (i, option) in options.aggregates.iter().enumerate() {
            let at = format!("{path}.aggregates[{i}]");
            let function = option.function.to_ascii_lowercase();
            let Some(f) = Function::named(&function) else {
                return Err(Error::config(
                    format!("{at}.function"),
                    format!(
                        "unknown aggregate `{}`; use count, sum, avg, min or max",
                        option.function
                    ),
                ));
            };
            let column = match &option.column {
                Some(name) => {
                    let index = crate::expr::column_index(&input, name, &format!("{at}.column"))?;
                    Some((index, input.field(index).data_type()))
                }
                None => None,
            };
            let aggregate = Aggregate::resolve(f, column, option.distinct, retracting)
                .map_err(|reason| Error::config(at.clone(), reason))?;
            let name = option
                .alias
                .clone()
                .unwrap_or_else(|| match &option.column {
                    Some(c) => format!("{function}_{c}"),
                    None => function.clone(),
                });
            let nullable = !matches!(f, Function::Count);
            fields.push(Field::new(name, aggregate.output.clone(), nullable));
            aggregates.push(aggregate);
        }
        fields.push(row_kind_field());
        let output = Schema::new(fields);
        if let Some(duplicate) = output
            .fields()
            .iter()
            .enumerate()
            .find(|(i, f)| output.fields()[..*i].iter().any(|g| g.name() == f.name()))
        {
            return Err(Error::config(
                path,
                format!(
                    "two output columns are named `{}`; rename an aggregate with `as`",
                    duplicate.1.name()
                ),
            ));
        }
        Ok(Arc::new(PreparedGroupAggregate(Arc::new(Config {
            output: Arc::new(output),
            keys,
            key_names: options.key_by,
            aggregates,
            budget: usize::try_from(options.buffer_bytes).unwrap_or(usize::MAX),
            ttl: options.state_ttl.filter(|d| d.0 > 0),
        }))))
    }
}

/// The options resolved against the input, shared by the subtasks.
#[derive(Debug)]
struct Config {
    output: SchemaRef,
    keys: Vec<usize>,
    key_names: Vec<String>,
    aggregates: Vec<Aggregate>,
    budget: usize,
    /// The groups' state TTL: they are then not held in memory past a batch.
    ttl: Option<weir_api::DurationMs>,
}

/// A `group_aggregate` resolved against its input.
#[derive(Debug)]
pub struct PreparedGroupAggregate(Arc<Config>);

impl PreparedOperator for PreparedGroupAggregate {
    /// Its buffer decides when rows reach keyed state, not what keyed state holds.
    fn tuning_options(&self) -> Vec<&'static str> {
        vec!["buffer_bytes"]
    }

    fn output_schema(&self) -> SchemaRef {
        Arc::clone(&self.0.output)
    }

    fn describe(&self) -> String {
        let names: Vec<&str> = self
            .0
            .output
            .fields()
            .iter()
            .skip(self.0.keys.len())
            .take(self.0.aggregates.len())
            .map(|f| f.name().as_str())
            .collect();
        format!(
            "group_aggregate: [{}] per [{}], updating",
            names.join(", "),
            self.0.key_names.join(", ")
        )
    }

    fn key_columns(&self) -> Option<Vec<String>> {
        Some(self.0.key_names.clone())
    }

    fn accepts_changes(&self) -> bool {
        true
    }

    fn reads_event_time(&self) -> bool {
        false
    }

    fn create(&self, ctx: &TaskContext) -> Result<Box<dyn Operator>> {
        let mut store = ctx.keyed_state()?;
        store.register(crate::ttl::descriptor::<Value<Vec<u8>>>(GROUP, self.0.ttl).spec())?;
        Ok(Box::new(GroupAggregateOperator {
            cfg: Arc::clone(&self.0),
            store,
            shard_count: ctx.state_shard_count.unwrap_or(1),
            groups: HashMap::new(),
            bytes: 0,
        }))
    }
}

/// A group held in memory.
struct Held {
    shard: u32,
    group: Group,
    /// Changed since it was last written to keyed state.
    dirty: bool,
}

/// A running `group_aggregate`.
struct GroupAggregateOperator {
    cfg: Arc<Config>,
    store: Box<dyn KeyedStateStore>,
    shard_count: u32,
    /// The groups touched since they were last written out, by encoded key.
    groups: HashMap<Vec<u8>, Held>,
    /// Bytes the held groups take, roughly.
    bytes: usize,
}

/// The changes of one batch, column by column.
#[derive(Default)]
struct Changes {
    /// Per change, a row of the batch with its key.
    rows: Vec<u32>,
    kinds: Vec<i8>,
    /// Per aggregate, per change.
    values: Vec<Vec<OutValue>>,
}

impl Changes {
    fn push(&mut self, row: u32, kind: RowKind, results: &[OutValue]) {
        self.rows.push(row);
        self.kinds.push(kind.as_i8());
        if self.values.is_empty() {
            self.values = vec![Vec::new(); results.len()];
        }
        for (column, value) in self.values.iter_mut().zip(results) {
            column.push(value.clone());
        }
    }
}

impl GroupAggregateOperator {
    /// The group of `key` (on `shard`), from memory or keyed state (empty when it has none).
    fn group(&mut self, key: &[u8], shard: u32) -> Result<&mut Held> {
        if !self.groups.contains_key(key) {
            self.store.set_current_key(key, StateShardId(shard));
            self.store.set_current_namespace(&[]);
            let group = match self.store.get(GROUP, &[])? {
                Some(bytes) => Group::decode(&bytes, &self.cfg.aggregates)?,
                None => Group::empty(&self.cfg.aggregates),
            };
            self.bytes += key.len() + 64 + group.size();
            self.groups.insert(
                key.to_vec(),
                Held {
                    shard,
                    group,
                    dirty: false,
                },
            );
        }
        self.groups
            .get_mut(key)
            .ok_or_else(|| Error::Internal("a group vanished from memory".into()))
    }

    /// Writes every changed group to keyed state; with `release`, forgets them all.
    fn write_out(&mut self, release: bool) -> Result<()> {
        for (key, held) in &mut self.groups {
            if !held.dirty {
                continue;
            }
            self.store.set_current_key(key, StateShardId(held.shard));
            self.store.set_current_namespace(&[]);
            if held.group.rows > 0 {
                self.store.put(GROUP, &[], &held.group.encode())?;
            } else {
                self.store.remove(GROUP, &[])?;
            }
            held.dirty = false;
        }
        if release {
            self.groups.clear();
            self.bytes = 0;
        } else {
            self.groups.retain(|_, held| held.group.rows > 0);
            self.bytes = self
                .groups
                .iter()
                .map(|(key, held)| key.len() + 64 + held.group.size())
                .sum();
        }
        Ok(())
    }

    /// The output batch of `changes` (rows of `batch` give the keys).
    fn assemble(&self, batch: &RecordBatch, changes: Changes) -> Result<RecordBatch> {
        let rows = UInt32Array::from(changes.rows);
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(self.cfg.output.fields().len());
        for &k in &self.cfg.keys {
            columns.push(
                take(batch.column(k).as_ref(), &rows, None)
                    .map_err(|e| Error::arrow("taking group keys", e))?,
            );
        }
        for (agg, values) in self.cfg.aggregates.iter().zip(&changes.values) {
            columns.push(agg.column(values)?);
        }
        columns.push(Arc::new(Int8Array::from(changes.kinds)));
        RecordBatch::try_new(Arc::clone(&self.cfg.output), columns)
            .map_err(|e| Error::arrow("assembling group results", e))
    }
}

impl Operator for GroupAggregateOperator {
    fn process_batch(&mut self, _input: usize, batch: RecordBatch, out: &mut Output) -> Result<()> {
        let n = batch.num_rows();
        if n == 0 {
            return Ok(());
        }
        let kinds = weir_api::changelog::kinds_of(&batch)?;
        let cfg = Arc::clone(&self.cfg);
        let key_columns: Vec<ArrayRef> = cfg
            .keys
            .iter()
            .map(|&i| Arc::clone(batch.column(i)))
            .collect();
        let global = key_columns.is_empty();
        // Without keys every row is in the one group, keyed by nothing.
        let keyed = if global {
            crate::keyed_rows::KeyedRows {
                keys: vec![Vec::new(); n],
                shards: vec![0; n],
            }
        } else {
            crate::keyed_rows::KeyedRows::of(&key_columns, self.shard_count, "group")?
        };
        let (keys, shards) = (&keyed.keys, &keyed.shards);
        let order = keyed.groups(0..n);
        let inputs = cfg
            .aggregates
            .iter()
            .map(|a| a.input(batch.columns()))
            .collect::<Result<Vec<_>>>()?;
        let mut changes = Changes::default();
        for (k, rows) in order {
            let key = keys[k].as_slice();
            let rows: Vec<u32> = rows.into_iter().map(|r| r as u32).collect();
            let held = self.group(key, shards[k])?;
            let size = held.group.size();
            let before = if held.group.rows > 0 {
                Some(held.group.results(&cfg.aggregates)?)
            } else {
                None
            };
            for &row in &rows {
                let sign = if kinds[row as usize].is_addition() {
                    1
                } else {
                    -1
                };
                if sign < 0 && held.group.rows <= 0 {
                    // A retraction of a group that has no rows: nothing to take back.
                    continue;
                }
                held.dirty = true;
                held.group.rows += sign;
                for (acc, (agg, input)) in held
                    .group
                    .accs
                    .iter_mut()
                    .zip(cfg.aggregates.iter().zip(&inputs))
                {
                    acc.apply(agg, input, row as usize, sign);
                }
                if held.group.rows == 0 {
                    // The group is gone: a later row starts it afresh.
                    held.group = Group::empty(&cfg.aggregates);
                }
            }
            let after = if held.group.rows > 0 {
                Some(held.group.results(&cfg.aggregates)?)
            } else {
                None
            };
            let grown = held.group.size();
            self.bytes = (self.bytes + grown).saturating_sub(size);
            let first = rows[0];
            match (before, after) {
                (None, Some(after)) => changes.push(first, RowKind::Insert, &after),
                (Some(before), Some(after)) if before != after => {
                    changes.push(first, RowKind::UpdateBefore, &before);
                    changes.push(first, RowKind::UpdateAfter, &after);
                }
                (Some(before), None) => changes.push(first, RowKind::Delete, &before),
                _ => {}
            }
        }
        if self.bytes > cfg.budget || cfg.ttl.is_some() {
            // With a TTL the state decides when a quiet group is gone, so nothing is held.
            self.write_out(true)?;
        }
        if !changes.kinds.is_empty() {
            out.emit(self.assemble(&batch, changes)?);
        }
        Ok(())
    }

    /// The results are new rows: a split's watermark says nothing about them.
    fn process_split_watermark(
        &mut self,
        _input: usize,
        _watermark: Watermark,
        _out: &mut Output,
    ) -> Result<()> {
        Ok(())
    }

    fn on_barrier(&mut self, _barrier: weir_api::Barrier, _out: &mut Output) -> Result<()> {
        self.write_out(false)
    }
}
