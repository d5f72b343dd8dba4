//! The `upsert_normalize` operator: an upsert stream (each row its key's latest version, a
//! delete naming only the key) made a full changelog, as Flink's `ChangelogNormalize` does
//! after an `upsert-kafka` source. See docs/connectors/kafka.md ("Changes").
//!
//! Per key, the latest row lives in keyed state. A new version of a key emits `+I` the first
//! time and then `-U` of the row it replaces and `+U` of itself (nothing when it equals the
//! row it replaces); a delete emits `-D` of the key's row (its full columns, which a tombstone
//! does not carry), and is ignored for a key without a row. So what follows sees every
//! retraction, and a `GROUP BY` or join over an upsert topic counts right.

use arrow::array::{ArrayRef, Int8Array, RecordBatch};
use arrow::datatypes::{DataType, SchemaRef};
use serde::Deserialize;
use std::sync::Arc;
use weir_api::changelog::{RowKind, kinds_of, row_kind_field, row_kind_index};
use weir_api::state::Value;
use weir_api::{
    Error, KeyedStateStore, Operator, OperatorArgs, OperatorFactory, Output, PreparedOperator,
    Result, StateShardId, TaskContext, Watermark, decode_options,
};
use weir_state::row_codec::{decode_rows, encode_rows};

/// Per key: its latest row (the data columns, Weir's row codec).
const LATEST: &str = "upsert_normalize.latest";

/// The job-spec options of `upsert_normalize`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpsertNormalizeOptions {
    /// The key columns (the table's primary key).
    pub keys: Vec<String>,
    /// How long a key's row lives without being read or written (processing time); unset:
    /// forever.
    #[serde(default)]
    pub state_ttl: Option<weir_api::DurationMs>,
}

/// Creates `upsert_normalize` operators.
#[derive(Debug, Default, Clone, Copy)]
pub struct UpsertNormalizeFactory;

impl OperatorFactory for UpsertNormalizeFactory {
    fn prepare(&self, spec: &OperatorArgs<'_>) -> Result<Arc<dyn PreparedOperator>> {
        let options: UpsertNormalizeOptions = decode_options(spec.options, spec.options_path)?;
        let input =
            crate::expr::single_input("upsert_normalize", spec.operator_id, spec.input_schemas)?;
        let path = spec.options_path;
        if options.keys.is_empty() {
            return Err(Error::config(
                format!("{path}.keys"),
                "name the key columns (the primary key)",
            ));
        }
        let keys = options
            .keys
            .iter()
            .enumerate()
            .map(|(i, k)| crate::expr::column_index(&input, k, &format!("{path}.keys[{i}]")))
            .collect::<Result<Vec<_>>>()?;
        let kinds = row_kind_index(&input);
        let data: Vec<usize> = (0..input.fields().len())
            .filter(|&i| Some(i) != kinds)
            .collect();
        let mut fields: Vec<_> = data.iter().map(|&i| input.field(i).clone()).collect();
        fields.push(row_kind_field());
        Ok(Arc::new(PreparedUpsertNormalize(Arc::new(Config {
            types: data
                .iter()
                .map(|&i| input.field(i).data_type().clone())
                .collect(),
            data,
            output: Arc::new(arrow::datatypes::Schema::new(fields)),
            keys,
            key_names: options.keys,
            ttl: options.state_ttl.filter(|d| d.0 > 0),
        }))))
    }
}

/// The options resolved against the input.
#[derive(Debug)]
struct Config {
    /// The data columns (all but the row kind column) and their types.
    data: Vec<usize>,
    types: Vec<DataType>,
    output: SchemaRef,
    keys: Vec<usize>,
    key_names: Vec<String>,
    ttl: Option<weir_api::DurationMs>,
}

/// An `upsert_normalize` resolved against its input.
#[derive(Debug)]
pub struct PreparedUpsertNormalize(Arc<Config>);

impl PreparedOperator for PreparedUpsertNormalize {
    fn output_schema(&self) -> SchemaRef {
        Arc::clone(&self.0.output)
    }

    fn describe(&self) -> String {
        format!(
            "upsert_normalize: the latest row per [{}] as changes",
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
        store.register(crate::ttl::descriptor::<Value<Vec<u8>>>(LATEST, self.0.ttl).spec())?;
        Ok(Box::new(UpsertNormalize {
            cfg: Arc::clone(&self.0),
            store,
            shard_count: ctx.state_shard_count.unwrap_or(1),
        }))
    }
}

/// A running `upsert_normalize`.
struct UpsertNormalize {
    cfg: Arc<Config>,
    store: Box<dyn KeyedStateStore>,
    shard_count: u32,
}

impl Operator for UpsertNormalize {
    fn process_batch(&mut self, _input: usize, batch: RecordBatch, out: &mut Output) -> Result<()> {
        let n = batch.num_rows();
        if n == 0 {
            return Ok(());
        }
        let cfg = Arc::clone(&self.cfg);
        let kinds = kinds_of(&batch)?;
        let key_columns: Vec<ArrayRef> = cfg
            .keys
            .iter()
            .map(|&i| Arc::clone(batch.column(i)))
            .collect();
        let keyed = crate::keyed_rows::KeyedRows::of(&key_columns, self.shard_count, "upsert")?;
        let data: Vec<ArrayRef> = cfg
            .data
            .iter()
            .map(|&i| Arc::clone(batch.column(i)))
            .collect();
        let rows = encode_rows(&data).map_err(state_error)?;
        let groups = keyed.groups(0..n);
        let (keys, shards) = (&keyed.keys, &keyed.shards);
        let mut emitted: Vec<(Vec<u8>, RowKind)> = Vec::new();
        for (first, members) in groups {
            self.store
                .set_current_key(&keys[first], StateShardId(shards[first]));
            self.store.set_current_namespace(&[]);
            let before = self.store.get(LATEST, &[])?;
            let mut latest = before.clone();
            for r in members {
                match (kinds[r].is_addition(), latest.take()) {
                    (true, None) => {
                        emitted.push((rows[r].clone(), RowKind::Insert));
                        latest = Some(rows[r].clone());
                    }
                    (true, Some(old)) if old == rows[r] => latest = Some(old),
                    (true, Some(old)) => {
                        emitted.push((old, RowKind::UpdateBefore));
                        emitted.push((rows[r].clone(), RowKind::UpdateAfter));
                        latest = Some(rows[r].clone());
                    }
                    (false, Some(old)) => emitted.push((old, RowKind::Delete)),
                    (false, None) => {}
                }
            }
            if latest != before {
                match &latest {
                    Some(row) => self.store.put(LATEST, &[], row)?,
                    None => {
                        self.store.remove(LATEST, &[])?;
                    }
                }
            }
        }
        if emitted.is_empty() {
            return Ok(());
        }
        let refs: Vec<&[u8]> = emitted.iter().map(|(r, _)| r.as_slice()).collect();
        let mut columns = decode_rows(&cfg.types, &refs).map_err(state_error)?;
        columns.push(Arc::new(Int8Array::from_iter_values(
            emitted.iter().map(|(_, k)| k.as_i8()),
        )));
        let batch = RecordBatch::try_new(Arc::clone(&cfg.output), columns)
            .map_err(|e| Error::arrow("assembling normalized changes", e))?;
        out.emit(batch);
        Ok(())
    }

    /// The changes are not the input's rows in its order: a split's watermark says nothing
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
    Error::Internal(format!("upsert state: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_state::{Backend, ctx};
    use arrow::array::{Int64Array, StringArray};
    use arrow::datatypes::{Field, Schema};
    use weir_api::{Emitted, OperatorId};

    fn upserts(rows: &[(i64, Option<&str>, RowKind)]) -> RecordBatch {
        RecordBatch::try_new(
            Arc::new(Schema::new(vec![
                Field::new("id", DataType::Int64, false),
                Field::new("name", DataType::Utf8, true),
                row_kind_field(),
            ])),
            vec![
                Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0))),
                Arc::new(StringArray::from(
                    rows.iter().map(|r| r.1).collect::<Vec<_>>(),
                )),
                Arc::new(Int8Array::from_iter_values(
                    rows.iter().map(|r| r.2.as_i8()),
                )),
            ],
        )
        .expect("batch")
    }

    #[test]
    fn upserts_and_tombstones_become_a_full_changelog() {
        use RowKind::*;
        let backend = Backend::new("normalize");
        let options = serde_json::json!({ "keys": ["id"] });
        let input = upserts(&[(1, Some("a"), UpdateAfter)]);
        let mut op = UpsertNormalizeFactory
            .prepare(&OperatorArgs {
                operator_id: &OperatorId::new("n"),
                options: &options,
                options_path: "operators[0].options",
                input_schemas: &[input.schema()],
            })
            .expect("prepares")
            .create(&ctx(&backend))
            .expect("creates");
        let mut out = Output::new();
        for batch in [
            upserts(&[(1, Some("a"), UpdateAfter), (2, Some("x"), UpdateAfter)]),
            upserts(&[(1, Some("a"), UpdateAfter), (1, Some("b"), UpdateAfter)]),
            upserts(&[(2, None, Delete), (3, None, Delete)]),
        ] {
            op.process_batch(0, batch, &mut out).expect("processes");
        }
        let mut changes = Vec::new();
        for e in out.drain() {
            let Emitted::Data { batch, .. } = e else {
                continue;
            };
            let kinds = kinds_of(&batch).expect("kinds");
            for (r, kind) in kinds.iter().enumerate() {
                let name = arrow::array::AsArray::as_string::<i32>(batch.column(1)).value(r);
                let id = arrow::array::AsArray::as_primitive::<arrow::datatypes::Int64Type>(
                    batch.column(0),
                )
                .value(r);
                changes.push(format!("{} {id} {name}", kind.short_string()));
            }
        }
        assert_eq!(
            changes,
            ["+I 1 a", "+I 2 x", "-U 1 a", "+U 1 b", "-D 2 x"],
            "the same row again changes nothing; a delete carries the deleted row; a delete of \
             an unknown key is ignored"
        );
    }
}
