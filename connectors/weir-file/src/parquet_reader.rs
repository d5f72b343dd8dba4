//! Reading one Parquet file from a cursor, conformed to the source schema.
//!
//! Columns are matched by name; whole row groups before the cursor are never fetched, and the
//! rest of the offset is skipped by the reader. A column whose file type differs from the declared
//! type is cast; a value that does not cast, or a null in a non-nullable column, rejects its row.
//!
//! With a predicate ([`crate::parquet_prune`]) the reader reads only the row groups, and with
//! a page index the pages, that may hold a row satisfying it. The cursor still counts the
//! split's rows, skipped ones included: after a batch it is one past the batch's last row, so
//! a reader opened there (pruning again, with the same statistics) resumes exactly after it.

// Lists of row ranges that hold one range (`vec![0..rows]`) are meant as lists.
#![allow(clippy::single_range_in_vec_init)]

use crate::location::store_error;
use crate::rejection::{Rejection, Rejections};
use arrow::array::{Array, ArrayRef, BooleanArray, new_null_array};
use arrow::compute::{CastOptions, cast_with_options, filter};
use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use arrow::util::display::{ArrayFormatter, FormatOptions};
use bytes::Bytes;
use futures::future::BoxFuture;
use futures::{FutureExt, TryStreamExt};
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::{ArrowReaderOptions, RowSelection, RowSelectionPolicy};
use parquet::arrow::async_reader::{
    AsyncFileReader, ParquetRecordBatchStream, ParquetRecordBatchStreamBuilder,
};
use parquet::errors::ParquetError;
use parquet::file::metadata::{PageIndexPolicy, ParquetMetaData, ParquetMetaDataReader};
use std::collections::VecDeque;
use std::ops::Range;
use std::sync::Arc;
use weir_api::{
    BadRecordPolicy, Error, Result, SourcePredicate, SourceSplit, SplitBatch, SplitCursor,
    SplitReader,
};

/// Bytes fetched from the end of a file in the first request, so the footer of most files takes
/// one round trip.
const FOOTER_HINT: usize = 64 * 1024;

/// Parquet's view of one object: ranged reads from the store, the footer read from its known size.
/// Public so that other connectors that read Parquet objects (the Delta source) share it.
#[derive(Debug, Clone)]
pub struct ObjectParquetReader {
    store: Arc<dyn ObjectStore>,
    path: Path,
    size: u64,
}

impl ObjectParquetReader {
    /// The reader of the object at `path` in `store`, `size` bytes long (known from a listing
    /// or a table's log, so opening it costs no `HEAD` request).
    pub fn new(store: Arc<dyn ObjectStore>, path: Path, size: u64) -> Self {
        ObjectParquetReader { store, path, size }
    }
}

fn fetch_error(err: object_store::Error) -> ParquetError {
    ParquetError::External(Box::new(err))
}

impl AsyncFileReader for ObjectParquetReader {
    fn get_bytes(&mut self, range: Range<u64>) -> BoxFuture<'_, parquet::errors::Result<Bytes>> {
        async move {
            self.store
                .get_range(&self.path, range)
                .await
                .map_err(fetch_error)
        }
        .boxed()
    }

    fn get_byte_ranges(
        &mut self,
        ranges: Vec<Range<u64>>,
    ) -> BoxFuture<'_, parquet::errors::Result<Vec<Bytes>>> {
        async move {
            self.store
                .get_ranges(&self.path, &ranges)
                .await
                .map_err(fetch_error)
        }
        .boxed()
    }

    fn get_metadata<'a>(
        &'a mut self,
        options: Option<&'a ArrowReaderOptions>,
    ) -> BoxFuture<'a, parquet::errors::Result<Arc<ParquetMetaData>>> {
        async move {
            let size = self.size;
            let metadata = ParquetMetaDataReader::new()
                .with_arrow_reader_options(options)
                .with_prefetch_hint(Some(FOOTER_HINT))
                .load_and_finish(self, size)
                .await?;
            Ok(Arc::new(metadata))
        }
        .boxed()
    }
}

/// Opens the Parquet reader builder of one file, with its page index (where it has one) when
/// `page_index`.
///
/// # Errors
/// External errors when the file cannot be read or is not Parquet.
pub(crate) async fn parquet_builder(
    store: Arc<dyn ObjectStore>,
    path: Path,
    input: &str,
    page_index: bool,
) -> Result<ParquetRecordBatchStreamBuilder<ObjectParquetReader>> {
    let meta = store
        .head(&path)
        .await
        .map_err(|e| store_error(format!("opening `{input}`"), e))?;
    let reader = ObjectParquetReader {
        store,
        path,
        size: meta.size,
    };
    let policy = if page_index {
        PageIndexPolicy::Optional
    } else {
        PageIndexPolicy::Skip
    };
    let options = ArrowReaderOptions::new().with_page_index_policy(policy);
    ParquetRecordBatchStreamBuilder::new_with_options(reader, options)
        .await
        .map_err(|e| parquet_error(input, e))
}

/// The compressed size in bytes of each row group of a Parquet file, in file order: what the
/// source cuts a large file into splits by.
///
/// # Errors
/// External errors when the file cannot be read or is not Parquet.
pub(crate) async fn row_group_bytes(
    store: Arc<dyn ObjectStore>,
    path: Path,
    input: &str,
) -> Result<Vec<u64>> {
    let builder = parquet_builder(store, path, input, false).await?;
    Ok(builder
        .metadata()
        .row_groups()
        .iter()
        .map(|g| u64::try_from(g.compressed_size()).unwrap_or(0))
        .collect())
}

fn as_usize(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

fn parquet_error(input: &str, err: ParquetError) -> Error {
    Error::external("parquet", format!("reading `{input}`"), err, false)
}

/// Reads the rows of one Parquet file.
pub(crate) struct ParquetSplitReader {
    input: String,
    stream: ParquetRecordBatchStream<ObjectParquetReader>,
    schema: SchemaRef,
    /// Rows of the file before the split's first row group.
    rows_before: u64,
    next_record: u64,
    /// The rows of the split the stream still delivers, relative to the split's first row, in
    /// order: the rows after the cursor that pruning kept.
    pending: VecDeque<Range<u64>>,
    rejections: Rejections,
}

impl std::fmt::Debug for ParquetSplitReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ParquetSplitReader")
            .field("input", &self.input)
            .field("next_record", &self.next_record)
            .finish_non_exhaustive()
    }
}

impl ParquetSplitReader {
    /// Opens `path` (the file `input`), or the row groups of it that `split` covers, at row
    /// `split.cursor.next_record` of the split, reading only rows that may satisfy `predicate`.
    ///
    /// # Errors
    /// [`Error::Schema`] when a non-nullable column of `schema` is not in the file; external
    /// errors when the file cannot be read.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn open(
        store: Arc<dyn ObjectStore>,
        path: Path,
        input: &str,
        schema: SchemaRef,
        batch_size: usize,
        policy: BadRecordPolicy,
        split: &SourceSplit,
        predicate: Option<&SourcePredicate>,
    ) -> Result<Self> {
        let (cursor, row_groups) = (split.cursor, split.range);
        let builder = parquet_builder(store, path, input, predicate.is_some()).await?;
        let all = builder.metadata().num_row_groups();
        let wanted = match row_groups {
            None => 0..all,
            Some(r) => {
                let start = usize::try_from(r.start).unwrap_or(usize::MAX);
                let end = usize::try_from(r.end).unwrap_or(usize::MAX);
                if start > end || end > all {
                    return Err(Error::schema(
                        input,
                        format!(
                            "the split names row groups {start}..{end}, but the file has {all} \
                             (was it rewritten since the job started?)"
                        ),
                    ));
                }
                start..end
            }
        };
        let file_schema = builder.schema().clone();
        let mut roots = Vec::new();
        for field in schema.fields() {
            match file_schema.index_of(field.name()) {
                Ok(index) => roots.push(index),
                Err(_) if field.is_nullable() => {}
                Err(_) => {
                    return Err(Error::schema(
                        input,
                        format!("non-nullable column `{}` is not in the file", field.name()),
                    ));
                }
            }
        }
        roots.sort_unstable();
        let mask = ProjectionMask::roots(builder.parquet_schema(), roots);
        let metadata = builder.metadata().clone();
        let rows_of =
            |index: usize| u64::try_from(metadata.row_group(index).num_rows()).unwrap_or(0);
        let rows_before: u64 = (0..wanted.start).map(rows_of).sum();
        let total: u64 = wanted.clone().map(rows_of).sum();
        let kept = match predicate {
            Some(p) => {
                let kept =
                    crate::parquet_prune::keep_ranges(p, &metadata, &file_schema, wanted.clone());
                tracing::debug!(
                    input,
                    split = %split.id,
                    row_groups_skipped = kept.groups_skipped,
                    page_rows_skipped = kept.page_rows_skipped,
                    "pruned a Parquet split"
                );
                kept.ranges
            }
            None if total > 0 => vec![0..total],
            None => Vec::new(),
        };
        // What is left after the cursor.
        let pending = crate::parquet_prune::intersect(
            &kept,
            &[cursor.next_record..total.max(cursor.next_record)],
        );
        // The row groups holding those rows, and the selection of them in the row groups'
        // concatenation, which is what the reader selects from.
        let mut row_groups = Vec::new();
        let mut selected = Vec::new();
        let (mut start, mut concatenated) = (0u64, 0u64);
        for index in wanted {
            let rows = rows_of(index);
            let here = crate::parquet_prune::intersect(&pending, &[start..start + rows]);
            if !here.is_empty() {
                row_groups.push(index);
                for r in here {
                    let from = concatenated + (r.start - start);
                    selected.push(as_usize(from)..as_usize(from + (r.end - r.start)));
                }
                concatenated += rows;
            }
            start += rows;
        }
        let selection =
            RowSelection::from_consecutive_ranges(selected.into_iter(), as_usize(concatenated));
        let stream = builder
            .with_projection(mask)
            .with_row_groups(row_groups)
            .with_row_selection(selection)
            .with_row_selection_policy(RowSelectionPolicy::Selectors)
            .with_batch_size(batch_size)
            .build()
            .map_err(|e| parquet_error(input, e))?;
        Ok(Self {
            input: input.to_owned(),
            stream,
            schema,
            rows_before,
            next_record: cursor.next_record,
            pending: pending.into(),
            rejections: Rejections::new(policy),
        })
    }

    /// The next `rows` rows of the stream as runs `(index in the batch, row of the split,
    /// length)`, taken off `pending`.
    fn take_rows(&mut self, rows: u64) -> Result<Vec<(u64, u64, u64)>> {
        let mut runs = Vec::new();
        let mut taken = 0;
        while taken < rows {
            let Some(range) = self.pending.front_mut() else {
                return Err(Error::Internal(format!(
                    "the Parquet reader of `{}` read more rows than it selected",
                    self.input
                )));
            };
            let len = (range.end - range.start).min(rows - taken);
            runs.push((taken, range.start, len));
            range.start += len;
            if range.is_empty() {
                self.pending.pop_front();
            }
            taken += len;
        }
        Ok(runs)
    }

    /// Matches, casts and checks the columns of `batch`, whose rows are the split's rows of
    /// `runs` ([`Self::take_rows`]).
    fn conform(
        &self,
        batch: &RecordBatch,
        runs: &[(u64, u64, u64)],
    ) -> Result<(RecordBatch, Vec<Rejection>)> {
        // 1-based row of the file of the batch's row `row`.
        let file_row = |row: usize| -> u64 {
            let row = row as u64;
            runs.iter()
                .rev()
                .find(|(at, _, _)| *at <= row)
                .map_or(row, |(at, first, _)| self.rows_before + first + (row - at))
                + 1
        };
        let rows = batch.num_rows();
        // The first fault of each row; allocated only when a column has one (rarely).
        let mut bad: Vec<Option<(usize, String)>> = Vec::new();
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(self.schema.fields().len());
        let safe = CastOptions {
            safe: true,
            ..Default::default()
        };
        for (col, field) in self.schema.fields().iter().enumerate() {
            let column = match batch.column_by_name(field.name()) {
                Some(column) => column.clone(),
                None => new_null_array(field.data_type(), rows),
            };
            let column = if column.data_type() == field.data_type() {
                column
            } else {
                let converted =
                    cast_with_options(&column, field.data_type(), &safe).map_err(|e| {
                        Error::schema(
                            &self.input,
                            format!(
                                "column `{}` of type {} cannot be read as {}: {e}",
                                field.name(),
                                column.data_type(),
                                field.data_type()
                            ),
                        )
                    })?;
                if converted.null_count() > column.null_count() {
                    bad.resize(rows, None);
                    let formatter =
                        ArrayFormatter::try_new(column.as_ref(), &FormatOptions::default())
                            .map_err(|e| Error::arrow("formatting a rejected value", e))?;
                    for (row, slot) in bad.iter_mut().enumerate() {
                        if slot.is_none() && column.is_valid(row) && converted.is_null(row) {
                            *slot = Some((
                                col,
                                format!(
                                    "row {}: `{}` is not a valid {}",
                                    file_row(row),
                                    formatter.value(row),
                                    field.data_type()
                                ),
                            ));
                        }
                    }
                }
                converted
            };
            if !field.is_nullable() && column.null_count() > 0 {
                bad.resize(rows, None);
                for (row, slot) in bad.iter_mut().enumerate() {
                    if slot.is_none() && column.is_null(row) {
                        *slot = Some((
                            col,
                            format!("row {}: null in a non-nullable column", file_row(row)),
                        ));
                    }
                }
            }
            columns.push(column);
        }
        let rejected: Vec<Rejection> = bad
            .iter()
            .flatten()
            .map(|(col, reason)| {
                let column = self.schema.field(*col).name();
                Rejection::new(&self.input, None, Some(column), reason.clone(), None)
            })
            .collect();
        if !rejected.is_empty() {
            let keep: BooleanArray = bad.iter().map(|b| Some(b.is_none())).collect();
            columns = columns
                .iter()
                .map(|c| filter(c, &keep))
                .collect::<Result<_, _>>()
                .map_err(|e| Error::arrow("dropping rejected rows", e))?;
        }
        let data = RecordBatch::try_new(self.schema.clone(), columns)
            .map_err(|e| Error::arrow(format!("assembling rows of `{}`", self.input), e))?;
        Ok((data, rejected))
    }
}

#[async_trait::async_trait]
impl SplitReader for ParquetSplitReader {
    async fn next_batch(&mut self) -> Result<Option<SplitBatch>> {
        let Some(batch) = self
            .stream
            .try_next()
            .await
            .map_err(|e| parquet_error(&self.input, e))?
        else {
            return Ok(None);
        };
        let runs = self.take_rows(batch.num_rows() as u64)?;
        if let Some((_, first, len)) = runs.last() {
            self.next_record = first + len;
        }
        let (data, rejected) = self.conform(&batch, &runs)?;
        self.rejections.reject_all(rejected)?;
        Ok(Some(SplitBatch {
            data,
            dead_letters: self.rejections.take(),
            cursor: SplitCursor {
                next_record: self.next_record,
            },
            backlog: None,
        }))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use crate::test_support::{bad_record, prepare, read_all, read_split, write};
    use arrow::array::{ArrayRef, Int64Array, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};
    use arrow::record_batch::RecordBatch;
    use serde_json::json;
    use std::sync::Arc;
    use weir_api::BadRecordPolicy;

    #[tokio::test]
    async fn values_that_do_not_fit_the_declared_type_are_bad_rows() {
        let dir = tempfile::tempdir().unwrap();
        let batch = RecordBatch::try_from_iter([
            (
                "id",
                Arc::new(Int64Array::from(vec![
                    Some(1),
                    Some(5_000_000_000),
                    Some(3),
                    None,
                ])) as ArrayRef,
            ),
            (
                "s",
                Arc::new(StringArray::from(vec!["a", "b", "c", "d"])) as ArrayRef,
            ),
        ])
        .unwrap();
        let mut out = Vec::new();
        let mut writer =
            parquet::arrow::ArrowWriter::try_new(&mut out, batch.schema(), None).unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();
        let path = write(dir.path(), "t.parquet", out);
        let declared = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int32, false),
            Field::new("s", DataType::Utf8, true),
        ]));
        let options = json!({ "path": path });
        let source = prepare(
            options.clone(),
            Some(declared.clone()),
            BadRecordPolicy::Fail,
        )
        .await
        .unwrap();
        let (input, line, column, message) = bad_record(read_all(&source).await.unwrap_err());
        assert_eq!(
            (input, line, column.as_deref()),
            (path.clone(), None, Some("id"))
        );
        assert_eq!(message, "row 2: `5000000000` is not a valid Int32");

        let source = prepare(options, Some(declared), BadRecordPolicy::DeadLetter)
            .await
            .unwrap();
        let split = source.enumerate_splits().await.unwrap().remove(0);
        let read = read_split(&source, &split).await.unwrap();
        assert_eq!(read.rows, ["1|a", "3|c"]);
        assert_eq!(
            read.dead_letters,
            [
                format!("{path}|∅|id|row 2: `5000000000` is not a valid Int32|∅"),
                format!("{path}|∅|id|row 4: null in a non-nullable column|∅"),
            ]
        );
        assert_eq!(read.cursors, [4]);
    }
}
