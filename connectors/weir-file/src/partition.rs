//! Hive-style partitioned directories (`{path}/dt=2026-12-02/hour=11/part-….parquet`): the
//! sink cuts each batch by its partition columns' values into one batch per partition directory
//! (without those columns); the source reads the values back from the directory names, typed by
//! the table's schema, and skips the files of directories a predicate rules out.
//!
//! Values are escaped as Hive does: characters that cannot stand in a path segment (`/`, `=`,
//! `%`, `:`, control characters, ...) become `%XX`; a null (or empty) value is the directory
//! `{column}=__HIVE_DEFAULT_PARTITION__`.

use arrow::array::{Array, ArrayRef, BooleanArray, RecordBatch, StringArray, UInt32Array};
use arrow::compute::kernels::cmp;
use arrow::compute::{cast, take_record_batch};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::row::{RowConverter, SortField};
use std::collections::HashMap;
use std::sync::Arc;
use weir_api::{ColumnPredicate, Error, PruneOp, Result, SourcePredicate, SplitBatch, SplitReader};

/// The directory name Hive gives a null or empty partition value.
pub const DEFAULT_PARTITION: &str = "__HIVE_DEFAULT_PARTITION__";

/// Whether Hive escapes `c` in a partition value.
fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '"' | '#'
                | '%'
                | '\''
                | '*'
                | '/'
                | ':'
                | '='
                | '?'
                | '\\'
                | '\u{7f}'
                | '{'
                | '['
                | ']'
                | '^'
        )
}

/// A partition value as it appears in a directory name (Hive's `escapePathName`).
pub fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        if needs_escape(c) {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                out.push_str(&format!("%{b:02X}"));
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The value a directory name's escaped text stands for (Hive's `unescapePathName`); a `%` not
/// followed by two hex digits stays as it is.
pub fn unescape(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2]))
        {
            out.push((h * 16 + l) as u8);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The `column=value/...` directory of one partition's values (`None`: null).
pub(crate) fn directory(columns: &[String], values: &[Option<String>]) -> String {
    columns
        .iter()
        .zip(values)
        .map(|(column, value)| match value.as_deref() {
            None | Some("") => format!("{}={DEFAULT_PARTITION}", escape(column)),
            Some(v) => format!("{}={}", escape(column), escape(v)),
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// The partition values in the directories of `relative` (a file's path below the table's
/// directory), one per column of `columns` in their order, `None` for the default partition;
/// `None` when a column's `k=v` segment is missing.
pub(crate) fn values_of(relative: &str, columns: &[String]) -> Option<Vec<Option<String>>> {
    let segments: Vec<&str> = relative.split('/').collect();
    let dirs = &segments[..segments.len().saturating_sub(1)];
    columns
        .iter()
        .map(|column| {
            dirs.iter().find_map(|segment| {
                let (k, v) = segment.split_once('=')?;
                (unescape(k) == *column).then(|| (v != DEFAULT_PARTITION).then(|| unescape(v)))
            })
        })
        .collect()
}

/// The sink's view of a table's partition columns: where they are in the input and the schema
/// of what is written to the files (the input without them).
#[derive(Debug, Clone)]
pub(crate) struct SinkPartitioning {
    /// The partition columns' names, in `partition_by` order.
    pub(crate) columns: Vec<String>,
    /// Their indices in the input schema.
    indices: Vec<usize>,
    /// The indices of the input's other columns, the ones written.
    data: Vec<usize>,
    /// The schema of the written files.
    pub(crate) data_schema: SchemaRef,
}

impl SinkPartitioning {
    /// The partitioning of `input` by `columns`.
    ///
    /// # Errors
    /// [`Error::Config`] at `{options_path}.partition_by[i]` for a column the input lacks, a
    /// column named twice, or a type that cannot name a directory; and when every column is a
    /// partition column.
    pub(crate) fn new(columns: &[String], input: &Schema, options_path: &str) -> Result<Self> {
        let mut indices = Vec::with_capacity(columns.len());
        for (i, column) in columns.iter().enumerate() {
            let at = || format!("{options_path}.partition_by[{i}]");
            let index = input.index_of(column).map_err(|_| {
                let known: Vec<&str> = input.fields().iter().map(|f| f.name().as_str()).collect();
                Error::config(
                    at(),
                    format!(
                        "partition column `{column}` is not a column of the input (columns: {})",
                        known.join(", ")
                    ),
                )
            })?;
            if indices.contains(&index) {
                return Err(Error::config(
                    at(),
                    format!("partition column `{column}` is named twice"),
                ));
            }
            let data_type = input.field(index).data_type();
            if !partition_type(data_type) {
                return Err(Error::config(
                    at(),
                    format!(
                        "partition column `{column}` has type {data_type}; a partition column is \
                         a string, integer, boolean, date or timestamp"
                    ),
                ));
            }
            indices.push(index);
        }
        let data: Vec<usize> = (0..input.fields().len())
            .filter(|i| !indices.contains(i))
            .collect();
        if data.is_empty() {
            return Err(Error::config(
                format!("{options_path}.partition_by"),
                "every column is a partition column: the files would hold no column",
            ));
        }
        let data_schema = Arc::new(input.project(&data).map_err(|e| {
            Error::arrow(format!("projecting the sink schema at {options_path}"), e)
        })?);
        Ok(Self {
            columns: columns.to_vec(),
            indices,
            data,
            data_schema,
        })
    }

    /// Cuts `batch` (in the input schema) into one batch per partition, in the order each
    /// partition first appears: its directory, its values, and its rows without the partition
    /// columns. Rows are grouped by their encoded partition key (arrow's row format) and
    /// gathered with the `take` kernel.
    ///
    /// # Errors
    /// Arrow errors from the kernels.
    pub(crate) fn split(&self, batch: &RecordBatch) -> Result<Vec<PartitionBatch>> {
        let arrow_error = |e| Error::arrow("cutting a batch by partition", e);
        let keys: Vec<ArrayRef> = self
            .indices
            .iter()
            .map(|&i| batch.column(i).clone())
            .collect();
        let texts: Vec<ArrayRef> = keys
            .iter()
            .map(|k| cast(k, &DataType::Utf8))
            .collect::<std::result::Result<_, _>>()
            .map_err(arrow_error)?;
        let data = batch.project(&self.data).map_err(arrow_error)?;
        if keys.iter().all(|k| single_value(k.as_ref())) {
            let values = row_values(&texts, 0);
            return Ok(vec![PartitionBatch {
                directory: directory(&self.columns, &values),
                values,
                rows: data,
            }]);
        }
        let converter = RowConverter::new(
            keys.iter()
                .map(|k| SortField::new(k.data_type().clone()))
                .collect(),
        )
        .map_err(arrow_error)?;
        let rows = converter.convert_columns(&keys).map_err(arrow_error)?;
        let mut groups: HashMap<&[u8], usize> = HashMap::new();
        let mut members: Vec<Vec<u32>> = Vec::new();
        for (i, row) in rows.iter().enumerate() {
            let g = *groups.entry(row.data()).or_insert_with(|| {
                members.push(Vec::new());
                members.len() - 1
            });
            members[g].push(i as u32);
        }
        members
            .into_iter()
            .map(|rows| {
                let values = row_values(&texts, rows[0] as usize);
                let taken =
                    take_record_batch(&data, &UInt32Array::from(rows)).map_err(arrow_error)?;
                Ok(PartitionBatch {
                    directory: directory(&self.columns, &values),
                    values,
                    rows: taken,
                })
            })
            .collect()
    }
}

/// Whether every row of `array` has the same value (cheap checks only: one row, or all null).
fn single_value(array: &dyn Array) -> bool {
    array.len() <= 1 || array.null_count() == array.len()
}

/// The text of row `row` of each of `texts` (Utf8 arrays).
fn row_values(texts: &[ArrayRef], row: usize) -> Vec<Option<String>> {
    texts
        .iter()
        .map(|t| {
            let t = t.as_any().downcast_ref::<StringArray>()?;
            t.is_valid(row).then(|| t.value(row).to_owned())
        })
        .collect()
}

/// Whether a column of `data_type` can be a partition column (its values name directories and
/// read back from them).
pub(crate) fn partition_type(data_type: &DataType) -> bool {
    data_type.is_integer()
        || matches!(
            data_type,
            DataType::Utf8
                | DataType::LargeUtf8
                | DataType::Utf8View
                | DataType::Boolean
                | DataType::Date32
                | DataType::Date64
                | DataType::Timestamp(..)
        )
}

/// The rows of one partition of a batch.
#[derive(Debug)]
pub(crate) struct PartitionBatch {
    /// `col=value/...`, relative to the sink's directory.
    pub(crate) directory: String,
    /// The partition values as text (`None`: null).
    pub(crate) values: Vec<Option<String>>,
    /// The rows, without the partition columns.
    pub(crate) rows: RecordBatch,
}

/// The source's view of a table's partition columns: their fields in the table schema, and
/// the typed values of each file's directories.
#[derive(Debug, Clone)]
pub(crate) struct SourcePartitioning {
    /// The partition columns, typed as the table declares them, in `partition_by` order.
    pub(crate) fields: Vec<Field>,
}

impl SourcePartitioning {
    /// The partition columns `columns` of `table` (declared, or inferred data columns to which
    /// missing partition columns are appended as strings), and the schema of the files (the
    /// table without them).
    ///
    /// # Errors
    /// [`Error::Config`] at `{options_path}.partition_by[i]` for a column named twice or of a
    /// type a directory name cannot give.
    pub(crate) fn new(
        columns: &[String],
        table: &Schema,
        options_path: &str,
    ) -> Result<(Self, SchemaRef)> {
        let mut fields = Vec::with_capacity(columns.len());
        for (i, column) in columns.iter().enumerate() {
            let at = format!("{options_path}.partition_by[{i}]");
            if columns[..i].contains(column) {
                return Err(Error::config(
                    at,
                    format!("partition column `{column}` is named twice"),
                ));
            }
            let field = match table.field_with_name(column) {
                Ok(field) => field.clone(),
                Err(_) => Field::new(column, DataType::Utf8, true),
            };
            if !partition_type(field.data_type()) {
                return Err(Error::config(
                    at,
                    format!(
                        "partition column `{column}` has type {}; a partition column is a \
                         string, integer, boolean, date or timestamp",
                        field.data_type()
                    ),
                ));
            }
            fields.push(field);
        }
        let data: Vec<Field> = table
            .fields()
            .iter()
            .filter(|f| !columns.contains(f.name()))
            .map(|f| f.as_ref().clone())
            .collect();
        Ok((Self { fields }, Arc::new(Schema::new(data))))
    }

    /// The names of the partition columns.
    pub(crate) fn names(&self) -> Vec<String> {
        self.fields.iter().map(|f| f.name().clone()).collect()
    }

    /// The typed values (one-row arrays, in `fields` order) of the file `relative` below the
    /// table's directory.
    ///
    /// # Errors
    /// [`Error::Config`] at `option_path` when a partition directory is missing from the path or
    /// its value does not read as the column's type.
    pub(crate) fn values(
        &self,
        relative: &str,
        file: &str,
        option_path: &str,
    ) -> Result<Vec<ArrayRef>> {
        let names = self.names();
        let texts = values_of(relative, &names).ok_or_else(|| {
            Error::config(
                option_path,
                format!(
                    "`{file}` is not in a partition directory `{}`",
                    directory_pattern(&names)
                ),
            )
        })?;
        self.fields
            .iter()
            .zip(texts)
            .map(|(field, text)| {
                let text: ArrayRef = Arc::new(StringArray::from(vec![text]));
                let typed = arrow::compute::cast_with_options(
                    &text,
                    field.data_type(),
                    &arrow::compute::CastOptions {
                        safe: false,
                        ..Default::default()
                    },
                )
                .map_err(|e| {
                    Error::config(
                        option_path,
                        format!(
                            "the partition directory of `{file}` gives column `{}` a value that \
                             is not a {}: {e}",
                            field.name(),
                            field.data_type()
                        ),
                    )
                })?;
                if typed.is_null(0) && !field.is_nullable() {
                    return Err(Error::config(
                        option_path,
                        format!(
                            "`{file}` is in the default (null) partition of the NOT NULL column \
                             `{}`",
                            field.name()
                        ),
                    ));
                }
                Ok(typed)
            })
            .collect()
    }

    /// Whether a partition with `values` (from [`Self::values`]) may hold a row satisfying
    /// `predicate`: `false` when a condition on a partition column is false for its value.
    pub(crate) fn may_match(&self, values: &[ArrayRef], predicate: &SourcePredicate) -> bool {
        predicate.conditions().iter().all(|condition| {
            match self
                .fields
                .iter()
                .position(|f| f.name() == &condition.column)
            {
                Some(i) => holds(condition, &values[i]).unwrap_or(true),
                None => true,
            }
        })
    }
}

/// `{col}=.../{col}=...`, for messages.
fn directory_pattern(names: &[String]) -> String {
    names
        .iter()
        .map(|n| format!("{n}=..."))
        .collect::<Vec<_>>()
        .join("/")
}

/// Whether `condition` holds for the one value in `value` (SQL semantics: a comparison with a
/// null is not true); `None` when the kernels cannot compare them.
fn holds(condition: &ColumnPredicate, value: &ArrayRef) -> Option<bool> {
    if value.data_type() != condition.values.data_type() {
        return None;
    }
    let null = value.is_null(0);
    let one = |k: usize| arrow::array::Scalar::new(condition.values.slice(k, 1));
    let test = |result: std::result::Result<BooleanArray, _>| -> Option<bool> {
        let result = result.ok()?;
        Some(result.is_valid(0) && result.value(0))
    };
    Some(match condition.op {
        PruneOp::IsNull => null,
        PruneOp::IsNotNull => !null,
        _ if null => false,
        PruneOp::Eq => test(cmp::eq(value, &one(0)))?,
        PruneOp::NotEq => test(cmp::neq(value, &one(0)))?,
        PruneOp::Lt => test(cmp::lt(value, &one(0)))?,
        PruneOp::LtEq => test(cmp::lt_eq(value, &one(0)))?,
        PruneOp::Gt => test(cmp::gt(value, &one(0)))?,
        PruneOp::GtEq => test(cmp::gt_eq(value, &one(0)))?,
        PruneOp::In => {
            let mut any = false;
            for k in 0..condition.values.len() {
                any |= test(cmp::eq(value, &one(k)))?;
            }
            any
        }
    })
}

/// A reader of one file of a partitioned table: the file's rows with the partition columns'
/// values (from its directory) put in, in the order of the source's schema.
pub(crate) struct PartitionedReader {
    pub(crate) inner: Box<dyn SplitReader>,
    /// The schema the source emits.
    pub(crate) schema: SchemaRef,
    /// The partition columns' names and their one-row values.
    pub(crate) values: Vec<(String, ArrayRef)>,
}

#[async_trait::async_trait]
impl SplitReader for PartitionedReader {
    async fn next_batch(&mut self) -> Result<Option<SplitBatch>> {
        let Some(mut batch) = self.inner.next_batch().await? else {
            return Ok(None);
        };
        let rows = batch.data.num_rows();
        let repeat = UInt32Array::from(vec![0u32; rows]);
        let mut columns = Vec::with_capacity(self.schema.fields().len());
        for field in self.schema.fields() {
            let column = match self.values.iter().find(|(name, _)| name == field.name()) {
                Some((_, value)) => arrow::compute::take(value.as_ref(), &repeat, None)
                    .map_err(|e| Error::arrow("repeating a partition value", e))?,
                None => batch
                    .data
                    .column_by_name(field.name())
                    .cloned()
                    .ok_or_else(|| {
                        Error::Internal(format!(
                            "file source: the reader gave no column `{}`",
                            field.name()
                        ))
                    })?,
            };
            columns.push(column);
        }
        batch.data = RecordBatch::try_new_with_options(
            self.schema.clone(),
            columns,
            &arrow::array::RecordBatchOptions::new().with_row_count(Some(rows)),
        )
        .map_err(|e| Error::arrow("adding the partition columns", e))?;
        Ok(Some(batch))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use arrow::array::{Date32Array, Int32Array};

    #[test]
    fn values_escape_as_hive_does_and_read_back() {
        for value in [
            "2026-12-02",
            "a/b=c%d",
            "x:y?z#",
            "new\nline",
            "ünï",
            "100%",
        ] {
            let escaped = escape(value);
            assert!(!escaped.contains(['/', '=', ':', '\n']), "{escaped}");
            assert_eq!(unescape(&escaped), value);
        }
        assert_eq!(escape("a/b=c%d"), "a%2Fb%3Dc%25d");
        assert_eq!(unescape("50%"), "50%");
        let columns = vec!["dt".to_owned(), "hour".to_owned()];
        let dir = directory(&columns, &[Some("a/b".into()), None]);
        assert_eq!(dir, "dt=a%2Fb/hour=__HIVE_DEFAULT_PARTITION__");
        assert_eq!(
            values_of(&format!("{dir}/part-1.parquet"), &columns),
            Some(vec![Some("a/b".to_owned()), None])
        );
        assert_eq!(values_of("dt=x/part.csv", &columns), None);
    }

    #[test]
    fn a_batch_splits_by_partition_in_first_appearance_order() {
        let schema = Schema::new(vec![
            Field::new("id", DataType::Int32, false),
            Field::new("dt", DataType::Date32, true),
            Field::new("hour", DataType::Int32, true),
        ]);
        let batch = RecordBatch::try_new(
            Arc::new(schema.clone()),
            vec![
                Arc::new(Int32Array::from(vec![1, 2, 3, 4, 5])),
                Arc::new(Date32Array::from(vec![
                    Some(0),
                    Some(1),
                    Some(0),
                    None,
                    Some(0),
                ])),
                Arc::new(Int32Array::from(vec![
                    Some(5),
                    Some(5),
                    Some(5),
                    Some(7),
                    Some(6),
                ])),
            ],
        )
        .unwrap();
        let p = SinkPartitioning::new(&["dt".into(), "hour".into()], &schema, "s").unwrap();
        let parts = p.split(&batch).unwrap();
        let got: Vec<(String, Vec<String>)> = parts
            .iter()
            .map(|b| (b.directory.clone(), crate::test_support::render(&b.rows)))
            .collect();
        assert_eq!(
            got,
            [
                (
                    "dt=1970-01-01/hour=5".to_owned(),
                    vec!["1".to_owned(), "3".to_owned()]
                ),
                ("dt=1970-01-02/hour=5".to_owned(), vec!["2".to_owned()]),
                (
                    "dt=__HIVE_DEFAULT_PARTITION__/hour=7".to_owned(),
                    vec!["4".to_owned()]
                ),
                ("dt=1970-01-01/hour=6".to_owned(), vec!["5".to_owned()]),
            ]
        );
        let err = SinkPartitioning::new(&["day".into()], &schema, "sinks[0].options").unwrap_err();
        assert!(
            matches!(&err, Error::Config { path, .. } if path == "sinks[0].options.partition_by[0]"),
            "{err}"
        );
        assert!(err.to_string().contains("`day`"), "{err}");
    }
}
