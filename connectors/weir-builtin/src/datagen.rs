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
                range: None,
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
            backlog: None,
        }))
    }
}

#[cfg(test)]
#[path = "datagen_tests.rs"]
mod tests;
