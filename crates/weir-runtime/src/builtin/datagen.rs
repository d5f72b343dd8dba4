//! The `datagen` source: a bounded, replayable generator of synthetic rows for benchmarks and
//! tests, like Flink's `datagen` connector. [`DatagenSourceFactory`] documents its options.
//!
//! Every value is a function of (seed, column, global row index) only, so reading a split from
//! any cursor, with any batch size, gives exactly the rows a full read gives at those positions.

use super::datagen_column::{ColumnGenerator, ColumnPaths, FieldOptions};
use arrow::array::RecordBatchOptions;
use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::sync::Arc;
use weir_api::{
    Boundedness, ConnectorSpec, Error, PreparedSource, Result, SourceCapability, SourceFactory,
    SourceSplit, SplitBatch, SplitCursor, SplitReader, TaskContext, decode_options,
};

/// Largest accepted `batch_size`: bigger batches only cost memory.
const MAX_BATCH_SIZE: u32 = 1 << 24;
/// Prefix of every split id; the split index follows.
const SPLIT_PREFIX: &str = "datagen-";

/// The options of a `datagen` source node.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DatagenOptions {
    /// Total number of rows over all splits.
    rows: u64,
    /// Number of splits; the rows are divided into this many contiguous ranges.
    #[serde(default = "default_splits")]
    splits: u32,
    /// Rows per batch.
    #[serde(default = "default_batch_size")]
    batch_size: u32,
    /// Seed of every random column.
    #[serde(default)]
    seed: u64,
    /// Per-column generation options, by column name.
    #[serde(default)]
    fields: BTreeMap<String, FieldOptions>,
}

fn default_splits() -> u32 {
    1
}

fn default_batch_size() -> u32 {
    8192
}

/// Prepares `datagen` sources: bounded, replayable synthetic rows in the declared schema.
///
/// Benchmarks and tests use it for a fast, deterministic input without files. Values are a pure
/// function of (`seed`, column, global row index), so the source is [`SourceCapability::Replayable`]:
/// a split read from any cursor repeats what a full read gave, whatever the batch size.
///
/// The node MUST declare a `schema`; supported column types are Int8..Int64, UInt8..UInt64,
/// Float32, Float64, Utf8, Boolean, Timestamp (ms, us or ns, any time zone) and Date32. Options:
///
/// | option | meaning |
/// | --- | --- |
/// | `rows` | required: total number of rows over all splits |
/// | `splits` | number of splits (default 1): split `i`, id `datagen-{i}`, covers a contiguous row range; the split cursor counts rows within the split |
/// | `batch_size` | rows per batch (default 8192, at most 2^24) |
/// | `seed` | seed of every random column (default 0) |
/// | `fields` | per column name: `kind`, `min`, `max`, `cardinality`, `null_fraction` (below) |
///
/// A column's `fields` entry:
/// - `kind`: `sequence` counts up by one per row from `min` (default 0), back to `min` past `max`
///   or after `cardinality` values (without either it wraps at the end of the type); `random` is
///   uniform in `[min, max]`.
/// - Integers: default `sequence`; random defaults to the type's whole range, or to
///   `min..min + cardinality` (`min` default 0) when `cardinality` is set. `max` and
///   `cardinality` exclude each other.
/// - Timestamps: as integers, with `min`/`max` in milliseconds since the epoch (the column's unit
///   is one millisecond times its scale); the default sequence is the row index in milliseconds,
///   random ones fall in 2020..2030 unless bounded. Date32: the same in days.
/// - Floats: default `random` in `[min, max)` = `[0, 1000)` (a range 1000 wide when only one
///   bound is set); `cardinality` picks among that many evenly spaced values; `sequence` is
///   `min + row`, staying below `max`.
/// - Strings: `<column>-<n>` with `n` in `0..cardinality` (default 1000); `sequence` (the
///   default) takes `n = row % cardinality`, `random` a uniform `n`. No `min`/`max`.
/// - Booleans: default `random`; `sequence` alternates false, true. No `min`/`max`/`cardinality`.
/// - `null_fraction` (default 0): share of null rows in `[0, 1]`; the column must be nullable.
///
/// Invalid options are [`Error::Config`] errors naming their JSON path
/// (`sources[0].options.fields.price.max`); an unsupported column type names the column and
/// the schema's path.
///
/// ```json
/// {"rows": 10000000, "splits": 4, "seed": 7,
///  "fields": {"user": {"kind": "random", "min": 1, "max": 100000},
///             "channel": {"kind": "random", "cardinality": 20, "null_fraction": 0.01}}}
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct DatagenSourceFactory;

#[async_trait::async_trait]
impl SourceFactory for DatagenSourceFactory {
    async fn prepare(&self, spec: ConnectorSpec<'_>) -> Result<Arc<dyn PreparedSource>> {
        Ok(Arc::new(DatagenSource::try_new(&spec)?))
    }
}

/// A prepared `datagen` source: the resolved column generators and the split layout.
#[derive(Debug)]
struct DatagenSource {
    schema: SchemaRef,
    columns: Arc<[ColumnGenerator]>,
    rows: u64,
    splits: u32,
    batch_size: u32,
    seed: u64,
    options_path: String,
}

impl DatagenSource {
    fn try_new(spec: &ConnectorSpec<'_>) -> Result<Self> {
        let path = spec.options_path;
        // An absent `options` reads as `{}`, so the error names the missing `rows`.
        let empty = serde_json::Value::Object(serde_json::Map::new());
        let options_value = if spec.options.is_null() {
            &empty
        } else {
            spec.options
        };
        let options: DatagenOptions = decode_options(options_value, path)?;
        let schema_path = match path.strip_suffix(".options") {
            Some(node) => format!("{node}.schema"),
            None => format!("{path} (schema)"),
        };
        let schema = spec.schema.clone().ok_or_else(|| {
            Error::config(
                &schema_path,
                "datagen needs a declared `schema`: it generates values for the declared columns",
            )
        })?;
        if options.splits == 0 {
            return Err(Error::config(
                format!("{path}.splits"),
                "must be at least 1",
            ));
        }
        if options.batch_size == 0 || options.batch_size > MAX_BATCH_SIZE {
            return Err(Error::config(
                format!("{path}.batch_size"),
                format!("must be between 1 and {MAX_BATCH_SIZE}"),
            ));
        }
        if let Some(name) = options
            .fields
            .keys()
            .find(|name| schema.column_with_name(name).is_none())
        {
            return Err(Error::config(
                format!("{path}.fields.{name}"),
                format!("the declared schema has no column `{name}`"),
            ));
        }
        let mut columns = Vec::with_capacity(schema.fields().len());
        for (index, field) in schema.fields().iter().enumerate() {
            let field_path = format!("{path}.fields.{}", field.name());
            let paths = ColumnPaths {
                field: &field_path,
                schema: &schema_path,
            };
            let column = ColumnGenerator::try_new(
                field,
                index,
                options.seed,
                options.fields.get(field.name()),
                &paths,
            )?;
            if let Some(max_len) = column.max_string_len() {
                let batch_bytes = u64::from(options.batch_size) * max_len as u64;
                if batch_bytes > i32::MAX as u64 {
                    return Err(Error::config(
                        format!("{path}.batch_size"),
                        format!(
                            "a batch of column `{}` would hold {batch_bytes} bytes of strings, \
                             more than Utf8 allows; lower `batch_size`",
                            field.name()
                        ),
                    ));
                }
            }
            columns.push(column);
        }
        Ok(Self {
            schema,
            columns: columns.into(),
            rows: options.rows,
            splits: options.splits,
            batch_size: options.batch_size,
            seed: options.seed,
            options_path: path.to_owned(),
        })
    }

    /// First global row of split `index`; `index == splits` gives the total row count.
    fn split_start(&self, index: u32) -> u64 {
        (u128::from(self.rows) * u128::from(index) / u128::from(self.splits)) as u64
    }

    /// Index of the split with id `id`, if this source enumerated it.
    fn split_index(&self, id: &str) -> Option<u32> {
        let index: u32 = id.strip_prefix(SPLIT_PREFIX)?.parse().ok()?;
        (index < self.splits && format!("{SPLIT_PREFIX}{index}") == id).then_some(index)
    }
}

#[async_trait::async_trait]
impl PreparedSource for DatagenSource {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn capabilities(&self) -> Vec<SourceCapability> {
        vec![SourceCapability::Replayable]
    }

    fn boundedness(&self) -> Boundedness {
        Boundedness::Bounded
    }

    fn describe(&self) -> String {
        format!(
            "datagen: {} rows in {} splits, batch {}, seed {}",
            self.rows, self.splits, self.batch_size, self.seed
        )
    }

    async fn enumerate_splits(&self) -> Result<Vec<SourceSplit>> {
        Ok((0..self.splits)
            .map(|index| SourceSplit {
                id: format!("{SPLIT_PREFIX}{index}"),
                cursor: SplitCursor::default(),
                size_bytes: None,
            })
            .collect())
    }

    async fn open_split(
        &self,
        split: &SourceSplit,
        _ctx: &TaskContext,
    ) -> Result<Box<dyn SplitReader>> {
        let index = self.split_index(&split.id).ok_or_else(|| {
            Error::config(
                format!("{}.splits", self.options_path),
                format!(
                    "split `{}` does not exist: this source has {} splits \
                     (did `splits` change since the checkpoint?)",
                    split.id, self.splits
                ),
            )
        })?;
        let start = self.split_start(index);
        let len = self.split_start(index + 1) - start;
        if split.cursor.next_record > len {
            return Err(Error::config(
                format!("{}.rows", self.options_path),
                format!(
                    "cursor {} is past the end of split `{}`, which has {len} rows \
                     (did `rows` or `splits` change since the checkpoint?)",
                    split.cursor.next_record, split.id
                ),
            ));
        }
        Ok(Box::new(DatagenSplitReader {
            schema: self.schema.clone(),
            columns: self.columns.clone(),
            start,
            len,
            next: split.cursor.next_record,
            batch_size: u64::from(self.batch_size),
        }))
    }
}

/// Reads one split: rows `start + next .. start + len` in batches of `batch_size`.
struct DatagenSplitReader {
    schema: SchemaRef,
    columns: Arc<[ColumnGenerator]>,
    /// First global row of the split.
    start: u64,
    /// Rows in the split.
    len: u64,
    /// Next row to read, relative to `start` (the cursor).
    next: u64,
    batch_size: u64,
}

#[async_trait::async_trait]
impl SplitReader for DatagenSplitReader {
    async fn next_batch(&mut self) -> Result<Option<SplitBatch>> {
        if self.next >= self.len {
            return Ok(None);
        }
        let rows = self.batch_size.min(self.len - self.next);
        // `rows` is at most `batch_size`, a u32.
        let rows_usize = rows as usize;
        let first = self.start + self.next;
        let columns = self
            .columns
            .iter()
            .map(|column| column.generate(first, rows_usize))
            .collect::<Result<Vec<_>>>()?;
        let data = RecordBatch::try_new_with_options(
            self.schema.clone(),
            columns,
            &RecordBatchOptions::new().with_row_count(Some(rows_usize)),
        )
        .map_err(|e| Error::arrow("assembling a datagen batch", e))?;
        self.next += rows;
        Ok(Some(SplitBatch {
            data,
            dead_letters: None,
            cursor: SplitCursor {
                next_record: self.next,
            },
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Array, AsArray};
    use arrow::compute::concat_batches;
    use arrow::datatypes::{DataType, Field, Int64Type, Schema, TimeUnit};
    use weir_api::{BadRecordPolicy, JobId, OperatorId, SubtaskIndex};

    fn ctx() -> TaskContext {
        TaskContext {
            job_id: JobId::new("job"),
            operator_id: OperatorId::new("gen"),
            subtask: SubtaskIndex(0),
            parallelism: 1,
            state: None,
            state_shard_count: None,
        }
    }

    async fn prepare(
        schema: SchemaRef,
        options: serde_json::Value,
    ) -> Result<Arc<dyn PreparedSource>> {
        let id = OperatorId::new("gen");
        let spec = ConnectorSpec {
            operator_id: &id,
            options: &options,
            options_path: "sources[0].options",
            schema: Some(schema),
            bad_records: BadRecordPolicy::Fail,
        };
        DatagenSourceFactory.prepare(spec).await
    }

    /// Reads `split` from its cursor to the end, checking the cursor of every batch.
    async fn read(source: &dyn PreparedSource, split: &SourceSplit) -> RecordBatch {
        let mut reader = source.open_split(split, &ctx()).await.expect("open");
        let mut batches = Vec::new();
        let mut cursor = split.cursor.next_record;
        while let Some(batch) = reader.next_batch().await.expect("read") {
            assert!(batch.dead_letters.is_none());
            cursor += batch.data.num_rows() as u64;
            assert_eq!(batch.cursor.next_record, cursor);
            batches.push(batch.data);
        }
        assert!(
            reader.next_batch().await.expect("read").is_none(),
            "stays exhausted"
        );
        concat_batches(&source.schema(), &batches).expect("concat")
    }

    fn ids(batch: &RecordBatch) -> Vec<i64> {
        batch
            .column(0)
            .as_primitive::<Int64Type>()
            .values()
            .to_vec()
    }

    /// One column of every supported type, some nullable with nulls.
    fn all_types() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("i8", DataType::Int8, true),
            Field::new("i16", DataType::Int16, false),
            Field::new("i32", DataType::Int32, true),
            Field::new("u8", DataType::UInt8, false),
            Field::new("u16", DataType::UInt16, false),
            Field::new("u32", DataType::UInt32, true),
            Field::new("u64", DataType::UInt64, false),
            Field::new("f32", DataType::Float32, false),
            Field::new("f64", DataType::Float64, true),
            Field::new("name", DataType::Utf8, true),
            Field::new("flag", DataType::Boolean, true),
            Field::new(
                "ts_ms",
                DataType::Timestamp(TimeUnit::Millisecond, None),
                false,
            ),
            Field::new(
                "ts_us",
                DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
                true,
            ),
            Field::new(
                "ts_ns",
                DataType::Timestamp(TimeUnit::Nanosecond, Some("+02:00".into())),
                false,
            ),
            Field::new("day", DataType::Date32, false),
        ]))
    }

    fn all_types_options(rows: u64, splits: u32, batch_size: u32, seed: u64) -> serde_json::Value {
        serde_json::json!({
            "rows": rows,
            "splits": splits,
            "batch_size": batch_size,
            "seed": seed,
            "fields": {
                "i8": {"kind": "random", "null_fraction": 0.3},
                "i32": {"kind": "random", "min": -5, "max": 5, "null_fraction": 0.1},
                "u32": {"kind": "sequence", "min": 10, "cardinality": 7, "null_fraction": 1.0},
                "u64": {"kind": "random"},
                "f32": {"kind": "sequence", "min": 0.5, "max": 10},
                "f64": {"null_fraction": 0.5},
                "name": {"kind": "random", "cardinality": 50, "null_fraction": 0.2},
                "flag": {"null_fraction": 0.4},
                "ts_us": {"kind": "random"},
                "day": {"kind": "random", "min": 0, "max": 365},
            }
        })
    }

    #[tokio::test]
    async fn splits_cover_every_row_once() {
        let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)]));
        for (rows, splits, batch_size) in
            [(1003u64, 4u32, 100u32), (2, 5, 1), (0, 3, 8), (10, 1, 3)]
        {
            let options =
                serde_json::json!({"rows": rows, "splits": splits, "batch_size": batch_size});
            let source = prepare(schema.clone(), options).await.expect("prepare");
            let list = source.enumerate_splits().await.expect("splits");
            let expected_ids: Vec<String> = (0..splits).map(|i| format!("datagen-{i}")).collect();
            let got_ids: Vec<String> = list.iter().map(|s| s.id.clone()).collect();
            assert_eq!(got_ids, expected_ids);
            let mut all = Vec::new();
            for split in &list {
                assert_eq!(split.cursor, SplitCursor::default());
                let batch = read(source.as_ref(), split).await;
                assert!(batch.num_rows() <= (rows as usize).div_ceil(splits as usize));
                all.extend(ids(&batch));
            }
            // Splits are contiguous ranges in order, so no sort is needed.
            let expected: Vec<i64> = (0..rows as i64).collect();
            assert_eq!(all, expected, "rows {rows}, splits {splits}");
        }
    }

    #[tokio::test]
    async fn batches_have_the_declared_types() {
        let schema = all_types();
        let source = prepare(schema.clone(), all_types_options(100, 1, 64, 0))
            .await
            .expect("prepare");
        assert_eq!(source.schema(), schema);
        assert_eq!(source.capabilities(), vec![SourceCapability::Replayable]);
        assert_eq!(source.boundedness(), Boundedness::Bounded);
        let split = &source.enumerate_splits().await.expect("splits")[0];
        let mut reader = source.open_split(split, &ctx()).await.expect("open");
        let first = reader.next_batch().await.expect("read").expect("a batch");
        assert_eq!(first.data.num_rows(), 64);
        assert_eq!(first.data.schema(), schema);
        for (column, field) in first.data.columns().iter().zip(schema.fields()) {
            assert_eq!(column.data_type(), field.data_type(), "{}", field.name());
            if !field.is_nullable() {
                assert_eq!(column.null_count(), 0, "{}", field.name());
            }
        }
    }

    #[tokio::test]
    async fn default_values_follow_the_row_index() {
        let schema = all_types();
        let source = prepare(schema, serde_json::json!({"rows": 2000, "batch_size": 700}))
            .await
            .expect("prepare");
        let split = &source.enumerate_splits().await.expect("splits")[0];
        let batch = read(source.as_ref(), split).await;
        let col = |name: &str| batch.column_by_name(name).expect("column").clone();
        assert_eq!(ids(&batch), (0..2000).collect::<Vec<i64>>());
        let i8s = col("i8");
        let i8s = i8s.as_primitive::<arrow::datatypes::Int8Type>();
        assert_eq!(
            i8s.value(300),
            300u32 as u8 as i8,
            "sequences wrap in the type"
        );
        let ts_ms = col("ts_ms");
        assert_eq!(
            ts_ms
                .as_primitive::<arrow::datatypes::TimestampMillisecondType>()
                .value(1234),
            1234
        );
        let ts_us = col("ts_us");
        assert_eq!(
            ts_us
                .as_primitive::<arrow::datatypes::TimestampMicrosecondType>()
                .value(1234),
            1_234_000
        );
        let ts_ns = col("ts_ns");
        assert_eq!(
            ts_ns
                .as_primitive::<arrow::datatypes::TimestampNanosecondType>()
                .value(7),
            7_000_000
        );
        let days = col("day");
        assert_eq!(
            days.as_primitive::<arrow::datatypes::Date32Type>()
                .value(1999),
            1999
        );
        let names = col("name");
        let names = names.as_string::<i32>();
        assert_eq!(names.value(0), "name-0");
        assert_eq!(names.value(1999), "name-999");
        assert_eq!(names.null_count(), 0);
        let f64s = col("f64");
        let f64s = f64s.as_primitive::<arrow::datatypes::Float64Type>();
        assert!(f64s.values().iter().all(|v| (0.0..1000.0).contains(v)));
        let flags = col("flag");
        let trues = flags.as_boolean().true_count();
        assert!(
            (800..1200).contains(&trues),
            "{trues} of 2000 random booleans are true"
        );
    }

    #[tokio::test]
    async fn field_options_shape_the_values() {
        let source = prepare(all_types(), all_types_options(5000, 1, 5000, 3))
            .await
            .expect("prepare");
        let split = &source.enumerate_splits().await.expect("splits")[0];
        let batch = read(source.as_ref(), split).await;
        let col = |name: &str| batch.column_by_name(name).expect("column").clone();
        let i32s = col("i32");
        let i32s = i32s.as_primitive::<arrow::datatypes::Int32Type>();
        assert!(i32s.iter().flatten().all(|v| (-5..=5).contains(&v)));
        let distinct: std::collections::BTreeSet<i32> = i32s.iter().flatten().collect();
        assert_eq!(distinct.len(), 11, "every value of -5..=5 appears");
        let nulls = i32s.null_count();
        assert!(
            (350..650).contains(&nulls),
            "{nulls} nulls for a fraction of 0.1"
        );
        assert_eq!(
            col("u32").null_count(),
            5000,
            "a null fraction of 1 nulls every row"
        );
        let u32s = col("u32");
        let u32s = u32s.as_primitive::<arrow::datatypes::UInt32Type>();
        assert_eq!(&u32s.values()[..9], &[10, 11, 12, 13, 14, 15, 16, 10, 11]);
        let f32s = col("f32");
        let f32s = f32s.as_primitive::<arrow::datatypes::Float32Type>();
        assert_eq!(
            &f32s.values()[8..12],
            &[8.5, 9.5, 0.5, 1.5],
            "wraps below `max`"
        );
        let names = col("name");
        let names = names.as_string::<i32>();
        let distinct: std::collections::BTreeSet<&str> = names.iter().flatten().collect();
        assert_eq!(distinct.len(), 50);
        assert!(distinct.iter().all(|v| {
            v.strip_prefix("name-")
                .and_then(|n| n.parse::<u32>().ok())
                .is_some_and(|n| n < 50)
        }));
        let ts_us = col("ts_us");
        let ts_us = ts_us.as_primitive::<arrow::datatypes::TimestampMicrosecondType>();
        let (from, to) = (1_577_836_800_000_000, 1_893_456_000_000_000);
        assert!(
            ts_us.values().iter().all(|v| (from..to).contains(v)),
            "2020..2030"
        );
        let days = col("day");
        let days = days.as_primitive::<arrow::datatypes::Date32Type>();
        assert!(days.values().iter().all(|v| (0..=365).contains(v)));
    }

    #[tokio::test]
    async fn cursor_resume_repeats_a_full_read() {
        let full_source = prepare(all_types(), all_types_options(3001, 3, 4096, 42))
            .await
            .expect("prepare");
        let again = prepare(all_types(), all_types_options(3001, 3, 4096, 42))
            .await
            .expect("prepare");
        for split in full_source.enumerate_splits().await.expect("splits") {
            let full = read(full_source.as_ref(), &split).await;
            assert_eq!(read(again.as_ref(), &split).await, full, "deterministic");
            for batch_size in [1u32, 7, 333, 5000] {
                let resumed_source =
                    prepare(all_types(), all_types_options(3001, 3, batch_size, 42))
                        .await
                        .expect("prepare");
                for k in [0usize, 1, 500, full.num_rows() - 1, full.num_rows()] {
                    if batch_size == 1 && k < 500 {
                        continue; // one-row batches over a whole split are slow and add nothing
                    }
                    let from = SourceSplit {
                        cursor: SplitCursor {
                            next_record: k as u64,
                        },
                        ..split.clone()
                    };
                    let resumed = read(resumed_source.as_ref(), &from).await;
                    assert_eq!(
                        resumed,
                        full.slice(k, full.num_rows() - k),
                        "split {}, cursor {k}, batch size {batch_size}",
                        split.id
                    );
                }
            }
        }
        let other_seed = prepare(all_types(), all_types_options(3001, 3, 4096, 43))
            .await
            .expect("prepare");
        let split = &other_seed.enumerate_splits().await.expect("splits")[0];
        let a = read(full_source.as_ref(), split).await;
        let b = read(other_seed.as_ref(), split).await;
        assert_eq!(
            a.column(0),
            b.column(0),
            "sequences do not depend on the seed"
        );
        assert_ne!(
            a.column_by_name("u64"),
            b.column_by_name("u64"),
            "random columns do"
        );
    }

    #[tokio::test]
    async fn unsupported_type_names_the_column_and_path() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("tags", DataType::new_list(DataType::Utf8, true), true),
        ]));
        let err = prepare(schema, serde_json::json!({"rows": 1}))
            .await
            .expect_err("lists are not supported");
        let Error::Config { path, message } = err else {
            panic!("expected a config error, got {err}");
        };
        assert_eq!(path, "sources[0].schema");
        assert!(message.contains("`tags`"), "{message}");
    }

    #[tokio::test]
    async fn bad_options_name_their_path() {
        let schema = all_types();
        let cases = [
            (
                serde_json::json!({}),
                "sources[0].options",
                "missing field `rows`",
            ),
            (
                serde_json::json!({"rows": 1, "rowz": 2}),
                "sources[0].options.rowz",
                "unknown field `rowz`",
            ),
            (
                serde_json::json!({"rows": -1}),
                "sources[0].options.rows",
                "invalid value",
            ),
            (
                serde_json::json!({"rows": 1, "splits": 0}),
                "sources[0].options.splits",
                "at least 1",
            ),
            (
                serde_json::json!({"rows": 1, "batch_size": 0}),
                "sources[0].options.batch_size",
                "between",
            ),
            (
                serde_json::json!({"rows": 1, "fields": {"nope": {}}}),
                "sources[0].options.fields.nope",
                "no column `nope`",
            ),
            (
                serde_json::json!({"rows": 1, "fields": {"id": {"kind": "zigzag"}}}),
                "sources[0].options.fields.id.kind",
                "unknown variant",
            ),
            (
                serde_json::json!({"rows": 1, "fields": {"id": {"null_fraction": 0.5}}}),
                "sources[0].options.fields.id.null_fraction",
                "NOT NULL",
            ),
            (
                serde_json::json!({"rows": 1, "fields": {"u8": {"max": 256}}}),
                "sources[0].options.fields.u8.max",
                "outside",
            ),
            (
                serde_json::json!({"rows": 1, "fields": {"i16": {"min": 1.5}}}),
                "sources[0].options.fields.i16.min",
                "integer",
            ),
            (
                serde_json::json!({"rows": 1, "fields": {"i16": {"min": 5, "max": 4}}}),
                "sources[0].options.fields.i16.max",
                "below",
            ),
            (
                serde_json::json!({"rows": 1, "fields": {"u8": {"min": 250, "cardinality": 10}}}),
                "sources[0].options.fields.u8.cardinality",
                "exceeds",
            ),
            (
                serde_json::json!({"rows": 1, "fields": {"name": {"min": 1}}}),
                "sources[0].options.fields.name.min",
                "no numeric range",
            ),
            (
                serde_json::json!({"rows": 1, "fields": {"name": {"cardinality": 0}}}),
                "sources[0].options.fields.name.cardinality",
                "at least 1",
            ),
        ];
        for (options, want_path, want_message) in cases {
            let err = prepare(schema.clone(), options.clone())
                .await
                .expect_err("invalid options");
            let Error::Config { path, message } = err else {
                panic!("expected a config error for {options}, got {err}");
            };
            assert_eq!(path, want_path, "{options}: {message}");
            assert!(message.contains(want_message), "{options}: {message}");
        }
    }

    #[tokio::test]
    async fn missing_schema_and_unknown_split_are_config_errors() {
        let id = OperatorId::new("gen");
        let options = serde_json::json!({"rows": 10});
        let spec = ConnectorSpec {
            operator_id: &id,
            options: &options,
            options_path: "sources[1].options",
            schema: None,
            bad_records: BadRecordPolicy::Fail,
        };
        let err = DatagenSourceFactory
            .prepare(spec)
            .await
            .expect_err("no schema");
        assert!(err.to_string().contains("sources[1].schema"), "{err}");

        let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)]));
        let source = prepare(schema, serde_json::json!({"rows": 10, "splits": 2}))
            .await
            .expect("prepare");
        for id in ["datagen-2", "datagen-01", "file-0"] {
            let split = SourceSplit {
                id: id.into(),
                cursor: SplitCursor::default(),
                size_bytes: None,
            };
            let err = source
                .open_split(&split, &ctx())
                .await
                .err()
                .expect("unknown split");
            assert!(err.to_string().contains("does not exist"), "{err}");
        }
        let past_end = SourceSplit {
            id: "datagen-1".into(),
            cursor: SplitCursor { next_record: 6 },
            size_bytes: None,
        };
        let err = source
            .open_split(&past_end, &ctx())
            .await
            .err()
            .expect("past the end");
        assert!(err.to_string().contains("past the end"), "{err}");
    }

    /// Prints datagen throughput; run with
    /// `cargo test --release -p weir-runtime datagen_throughput -- --ignored --nocapture`.
    #[tokio::test]
    #[ignore = "a measurement, not a check"]
    async fn datagen_throughput() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("user", DataType::Int32, false),
            Field::new("price", DataType::Float64, false),
            Field::new(
                "ts",
                DataType::Timestamp(TimeUnit::Millisecond, None),
                false,
            ),
            Field::new("category", DataType::Utf8, false),
            Field::new("channel", DataType::Utf8, false),
        ]));
        let rows = 20_000_000u64;
        let options = serde_json::json!({
            "rows": rows,
            "fields": {
                "user": {"kind": "random", "min": 0, "max": 999_999},
                "channel": {"kind": "random", "cardinality": 20},
            }
        });
        let source = prepare(schema, options).await.expect("prepare");
        let split = &source.enumerate_splits().await.expect("splits")[0];
        let mut reader = source.open_split(split, &ctx()).await.expect("open");
        let started = std::time::Instant::now();
        let mut read_rows = 0;
        while let Some(batch) = reader.next_batch().await.expect("read") {
            read_rows += batch.data.num_rows() as u64;
        }
        let secs = started.elapsed().as_secs_f64();
        assert_eq!(read_rows, rows);
        println!(
            "datagen: {rows} rows x 6 columns in {secs:.3} s = {:.1} M rows/s",
            rows as f64 / secs / 1e6
        );
    }
}
