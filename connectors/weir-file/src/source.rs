//! The `file` source: lists matching files as splits and reads each from a row cursor.

use crate::csv_reader::{CsvColumns, CsvSplitReader};
use crate::inference::infer_schema;
use crate::location::{FileLocation, ListedFile};
use crate::object_bytes::{DEFAULT_BLOCK_BYTES, ObjectBytes};
use crate::options::{CsvSettings, FileFormat, FileSourceOptions, default_split_size};
use crate::parquet_reader::{ParquetSplitReader, row_group_bytes};
use arrow::datatypes::{DataType, SchemaRef};
use object_store::registry::{DefaultObjectStoreRegistry, ObjectStoreRegistry};
use std::sync::Arc;
use weir_api::{
    BadRecordPolicy, Boundedness, ConnectorSpec, Error, PreparedSource, Reach, Result,
    SourceCapability, SourceFactory, SourcePredicate, SourceSplit, SplitRange, SplitReader,
    TaskContext, decode_options,
};

/// Creates `file` sources: bounded, replayable reads of CSV, JSON-lines and Parquet files from the
/// local file system or any object store, one split per file.
///
/// URLs (`file://…`, `memory://…`) are resolved through an [`ObjectStoreRegistry`], except
/// `s3://…`, which opens a store configured by the options' `s3` section; share one
/// registry between the source and sink factories (and with anything else that registers
/// stores) so that they see the same stores.
#[derive(Debug, Clone)]
pub struct FileSourceFactory {
    registry: Arc<dyn ObjectStoreRegistry>,
    block_bytes: usize,
}

impl FileSourceFactory {
    /// A factory whose registry creates stores from URLs on first use (configured from the
    /// environment, e.g. `AWS_REGION`, where those stores are compiled in).
    pub fn new() -> Self {
        Self::with_registry(Arc::new(DefaultObjectStoreRegistry::new()))
    }

    /// A factory that resolves URLs through `registry`.
    pub fn with_registry(registry: Arc<dyn ObjectStoreRegistry>) -> Self {
        Self {
            registry,
            block_bytes: DEFAULT_BLOCK_BYTES,
        }
    }

    /// Reads in blocks of `bytes`, so tests can put record boundaries across blocks.
    #[cfg(test)]
    pub(crate) fn with_block_bytes(mut self, bytes: usize) -> Self {
        self.block_bytes = bytes;
        self
    }
}

impl Default for FileSourceFactory {
    fn default() -> Self {
        Self::new()
    }
}

#[async_trait::async_trait]
impl SourceFactory for FileSourceFactory {
    async fn prepare(&self, spec: ConnectorSpec<'_>) -> Result<Arc<dyn PreparedSource>> {
        let options: FileSourceOptions = decode_options(spec.options, spec.options_path)?;
        let options_path = spec.options_path;
        let cwd = std::env::current_dir().map_err(|e| {
            Error::external("file system", "reading the current directory", e, false)
        })?;
        crate::options::check_s3(&options.path, options.s3.as_ref(), options_path)?;
        let location = FileLocation::resolve_with(
            &options.path,
            self.registry.as_ref(),
            options.s3.as_ref(),
            &cwd,
            &format!("{options_path}.path"),
        )?;
        if spec.reach == Reach::Offline
            && (spec.schema.is_none()
                || (options.format.is_none()
                    && FileFormat::from_extension(location.given()).is_none()))
        {
            // Checked where the job's inputs are not to be read (the Hub): what would be
            // inferred from the files must be declared.
            return Err(Error::config(
                format!("{options_path}.path"),
                "the schema and the format of this source would be read from its files, which \
                 are not read here (a distributed job is validated on the Hub without touching \
                 its inputs): declare the columns (`schema`) and `format`",
            ));
        }
        let mut listed = None;
        let format = match options
            .format
            .or_else(|| FileFormat::from_extension(location.given()))
        {
            Some(format) => format,
            None => {
                let files = list_some(&location, options_path).await?;
                let format = format_of(&files, &location, options_path)?;
                listed = Some(files);
                format
            }
        };
        let csv = options.validate(format, options_path)?;
        let schema = match spec.schema {
            Some(schema) => {
                check_declared_schema(&schema, format, options_path)?;
                schema
            }
            None => {
                let files = match listed {
                    Some(files) => files,
                    None => list_some(&location, options_path).await?,
                };
                Arc::new(
                    infer_schema(location.store(), &files, format, csv, self.block_bytes).await?,
                )
            }
        };
        Ok(Arc::new(FileSource {
            location,
            options_path: options_path.to_owned(),
            format,
            csv,
            file_schema: schema.clone(),
            schema,
            projection: None,
            predicate: None,
            batch_size: options.batch_size,
            split_size: options
                .split_size
                .unwrap_or_else(|| default_split_size(format)),
            policy: spec.bad_records,
            block_bytes: self.block_bytes,
            max_buffer_bytes: usize::try_from(
                options
                    .max_buffer_bytes
                    .unwrap_or(crate::options::DEFAULT_MAX_BUFFER_BYTES),
            )
            .unwrap_or(usize::MAX),
        }))
    }
}

/// Lists `location`, failing when nothing matches.
async fn list_some(location: &FileLocation, options_path: &str) -> Result<Vec<ListedFile>> {
    let files = location.list().await?;
    if files.is_empty() {
        return Err(Error::config(
            format!("{options_path}.path"),
            format!("no files match `{}`", location.given()),
        ));
    }
    Ok(files)
}

/// The one format all `files` have by extension.
fn format_of(
    files: &[ListedFile],
    location: &FileLocation,
    options_path: &str,
) -> Result<FileFormat> {
    let mut format = None;
    for file in files {
        let this = FileFormat::from_extension(&file.id);
        if this.is_none() || (format.is_some() && this != format) {
            return Err(Error::config(
                format!("{options_path}.format"),
                format!(
                    "cannot infer the format of `{}` from the file `{}`; set `format` to csv, json or parquet",
                    location.given(),
                    file.id
                ),
            ));
        }
        format = this;
    }
    format.ok_or_else(|| Error::config(format!("{options_path}.path"), "no files match"))
}

/// Rejects declared types the format's reader cannot produce.
fn check_declared_schema(schema: &SchemaRef, format: FileFormat, options_path: &str) -> Result<()> {
    match format {
        FileFormat::Csv => {
            if let Some(field) = schema
                .fields()
                .iter()
                .find(|f| !readable_csv_type(f.data_type()))
            {
                return Err(Error::schema(
                    format!("file source at {options_path}"),
                    format!(
                        "column `{}` has type {}, which CSV cannot hold; use json or parquet",
                        field.name(),
                        field.data_type()
                    ),
                ));
            }
        }
        FileFormat::Json => {
            arrow::json::ReaderBuilder::new(schema.clone())
                .build_decoder()
                .map_err(|e| {
                    Error::schema(format!("file source at {options_path}"), e.to_string())
                })?;
        }
        FileFormat::Parquet => {}
    }
    Ok(())
}

/// Whether arrow's CSV decoder can produce `data_type` from text.
fn readable_csv_type(data_type: &DataType) -> bool {
    use arrow::datatypes::TimeUnit;
    match data_type {
        DataType::Null
        | DataType::Boolean
        | DataType::Int8
        | DataType::Int16
        | DataType::Int32
        | DataType::Int64
        | DataType::UInt8
        | DataType::UInt16
        | DataType::UInt32
        | DataType::UInt64
        | DataType::Float16
        | DataType::Float32
        | DataType::Float64
        | DataType::Decimal32(..)
        | DataType::Decimal64(..)
        | DataType::Decimal128(..)
        | DataType::Decimal256(..)
        | DataType::Date32
        | DataType::Date64
        | DataType::Timestamp(..)
        | DataType::Time32(TimeUnit::Second | TimeUnit::Millisecond)
        | DataType::Time64(TimeUnit::Microsecond | TimeUnit::Nanosecond)
        | DataType::Utf8
        | DataType::Utf8View => true,
        DataType::Dictionary(key, value) => key.is_integer() && value.as_ref() == &DataType::Utf8,
        _ => false,
    }
}

/// A prepared `file` source.
#[derive(Debug, Clone)]
struct FileSource {
    location: FileLocation,
    options_path: String,
    format: FileFormat,
    csv: CsvSettings,
    /// Every column of the files (declared or inferred).
    file_schema: SchemaRef,
    /// The columns the source emits: all, or those of `projection`.
    schema: SchemaRef,
    /// The indices in `file_schema` of the columns the job reads, when not all.
    projection: Option<Arc<[usize]>>,
    /// Parquet only: the predicate row groups and pages are skipped by, when pruned.
    predicate: Option<Arc<SourcePredicate>>,
    batch_size: usize,
    /// Bytes per split; 0: one split per file.
    split_size: u64,
    policy: BadRecordPolicy,
    block_bytes: usize,
    /// The most text a CSV or JSON-lines reader holds unconsumed.
    max_buffer_bytes: usize,
}

impl FileSource {
    /// The splits of one listed file: the whole file, or consecutive parts of about
    /// `split_size` bytes when it is larger (byte ranges of text, groups of row groups of
    /// Parquet), each with the file's id and its range as id.
    async fn splits_of(&self, file: ListedFile) -> Result<Vec<SourceSplit>> {
        let parts = if self.split_size == 0 || file.size <= self.split_size {
            Vec::new()
        } else if self.format == FileFormat::Parquet {
            let path = self
                .location
                .path_of(&file.id, &format!("{}.path", self.options_path))?;
            let sizes = row_group_bytes(self.location.store().clone(), path, &file.id).await?;
            group_row_groups(&sizes, self.split_size)
        } else {
            (0..file.size.div_ceil(self.split_size))
                .map(|i| SplitRange {
                    start: i * self.split_size,
                    end: ((i + 1) * self.split_size).min(file.size),
                })
                .collect()
        };
        if parts.len() <= 1 {
            return Ok(vec![SourceSplit {
                id: file.id,
                cursor: Default::default(),
                size_bytes: Some(file.size),
                range: None,
            }]);
        }
        let unit = if self.format == FileFormat::Parquet {
            "row-groups"
        } else {
            "bytes"
        };
        Ok(parts
            .into_iter()
            .map(|range| SourceSplit {
                id: format!(
                    "{}{RANGE_MARK}{unit}={}-{}",
                    file.id, range.start, range.end
                ),
                cursor: Default::default(),
                size_bytes: (self.format != FileFormat::Parquet).then(|| range.end - range.start),
                range: Some(range),
            })
            .collect())
    }
}

/// What separates a file's id from its range in the id of a split that covers part of a file.
const RANGE_MARK: char = '#';

/// Consecutive row groups gathered until each group holds at least `split_size` bytes (the last
/// may hold less).
pub(crate) fn group_row_groups(sizes: &[u64], split_size: u64) -> Vec<SplitRange> {
    let mut out = Vec::new();
    let (mut start, mut bytes) = (0, 0);
    for (i, size) in sizes.iter().enumerate() {
        bytes += size;
        if bytes >= split_size {
            out.push(SplitRange {
                start,
                end: i as u64 + 1,
            });
            (start, bytes) = (i as u64 + 1, 0);
        }
    }
    if start < sizes.len() as u64 {
        out.push(SplitRange {
            start,
            end: sizes.len() as u64,
        });
    }
    out
}

#[async_trait::async_trait]
impl PreparedSource for FileSource {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn capabilities(&self) -> Vec<SourceCapability> {
        vec![SourceCapability::Replayable]
    }

    fn boundedness(&self) -> Boundedness {
        Boundedness::Bounded
    }

    /// The files in path order, each from its first record to its last, are one stream: with
    /// event time, a row is late exactly when it would be reading them in that order.
    fn touches(&self) -> Vec<weir_api::Touch> {
        self.location.touches()
    }

    fn splits_are_one_stream(&self) -> bool {
        true
    }

    fn describe(&self) -> String {
        let mut line = format!("file: {} {}", self.format, self.location.given());
        if self.projection.is_some() {
            let names: Vec<&str> = self
                .schema
                .fields()
                .iter()
                .map(|f| f.name().as_str())
                .collect();
            line.push_str(&format!("; reads {}", names.join(", ")));
        }
        if let Some(predicate) = &self.predicate {
            line.push_str(&format!(
                "; skips row groups and pages where no row can satisfy {predicate}"
            ));
        }
        line
    }

    async fn enumerate_splits(&self) -> Result<Vec<SourceSplit>> {
        let files = list_some(&self.location, &self.options_path).await?;
        let mut splits = Vec::with_capacity(files.len());
        for file in files {
            splits.extend(self.splits_of(file).await?);
        }
        Ok(splits)
    }

    async fn open_split(
        &self,
        split: &SourceSplit,
        _ctx: &TaskContext,
    ) -> Result<Box<dyn SplitReader>> {
        // The file's id: a split of part of a file appends its range.
        let file = match split.range {
            Some(_) => split
                .id
                .rsplit_once(RANGE_MARK)
                .map_or(split.id.as_str(), |(file, _)| file),
            None => &split.id,
        };
        let path = self
            .location
            .path_of(file, &format!("{}.path", self.options_path))?;
        let store = self.location.store().clone();
        let text_range = split.range.filter(|_| self.format != FileFormat::Parquet);
        let reader: Box<dyn SplitReader> = match self.format {
            FileFormat::Csv => Box::new(CsvSplitReader::new(
                file,
                ObjectBytes::open_range(store, path, file, self.block_bytes, text_range)
                    .await?
                    .with_max_pending(self.max_buffer_bytes),
                self.csv,
                CsvColumns {
                    file: self.file_schema.clone(),
                    read: self.projection.clone(),
                },
                self.batch_size,
                self.policy,
                split.cursor,
            )),
            FileFormat::Json => Box::new(crate::json_reader::JsonSplitReader::new(
                file,
                ObjectBytes::open_range(store, path, file, self.block_bytes, text_range)
                    .await?
                    .with_max_pending(self.max_buffer_bytes),
                self.schema.clone(),
                self.batch_size,
                self.policy,
                split.cursor,
            )),
            FileFormat::Parquet => Box::new(
                ParquetSplitReader::open(
                    store,
                    path,
                    file,
                    self.schema.clone(),
                    self.batch_size,
                    self.policy,
                    split,
                    self.predicate.as_deref(),
                )
                .await?,
            ),
        };
        Ok(reader)
    }

    /// CSV decodes (and checks) only the columns read, JSON lines and Parquet read them by
    /// name.
    fn project(&self, indices: &[usize]) -> Option<Arc<dyn PreparedSource>> {
        let schema = Arc::new(self.file_schema.project(indices).ok()?);
        Some(Arc::new(FileSource {
            schema,
            projection: Some(indices.into()),
            ..self.clone()
        }))
    }

    /// Parquet skips the row groups whose column-chunk statistics, and the pages whose page
    /// index, show that no row satisfies `predicate` (docs/connectors/file.md); CSV and JSON
    /// lines read everything.
    fn prune(&self, predicate: &SourcePredicate) -> Option<Arc<dyn PreparedSource>> {
        if self.format != FileFormat::Parquet
            || predicate
                .conditions()
                .iter()
                .any(|c| self.file_schema.field_with_name(&c.column).is_err())
        {
            return None;
        }
        Some(Arc::new(FileSource {
            predicate: Some(Arc::new(predicate.clone())),
            ..self.clone()
        }))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::test_support::{OPTIONS_PATH, ctx, prepare, read_all, read_split, spec, write};
    use arrow::array::{ArrayRef, Int32Array, Int64Array, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};
    use arrow::record_batch::RecordBatch;
    use object_store::ObjectStoreExt;
    use serde_json::json;

    fn schema(fields: &[(&str, DataType, bool)]) -> SchemaRef {
        Arc::new(Schema::new(
            fields
                .iter()
                .map(|(name, ty, nullable)| Field::new(*name, ty.clone(), *nullable))
                .collect::<Vec<_>>(),
        ))
    }

    fn write_parquet(dir: &std::path::Path, relative: &str, batch: &RecordBatch) -> String {
        let mut out = Vec::new();
        let mut writer =
            parquet::arrow::ArrowWriter::try_new(&mut out, batch.schema(), None).expect("writer");
        writer.write(batch).expect("write");
        writer.close().expect("close");
        write(dir, relative, out)
    }

    #[tokio::test]
    async fn reads_csv_globs_with_an_inferred_schema() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "data/b.csv", "id,name,price\n3,z,0.5\n");
        write(dir.path(), "data/a.csv", "id,name,price\n1,x,1.5\n2,,2\n");
        write(dir.path(), "data/c.json", "{}");
        let path = format!("{}/data/*.csv", dir.path().display());
        let source = prepare(json!({ "path": path }), None, BadRecordPolicy::Fail)
            .await
            .unwrap();
        assert_eq!(
            source.schema(),
            schema(&[
                ("id", DataType::Int64, true),
                ("name", DataType::Utf8, true),
                ("price", DataType::Float64, true),
            ])
        );
        let splits = source.enumerate_splits().await.unwrap();
        let ids: Vec<_> = splits.iter().map(|s| s.id.clone()).collect();
        let base = dir.path().display();
        assert_eq!(
            ids,
            [format!("{base}/data/a.csv"), format!("{base}/data/b.csv")]
        );
        assert_eq!(splits[0].size_bytes, Some(27));
        assert_eq!(
            read_all(&source).await.unwrap(),
            ["1|x|1.5", "2|∅|2.0", "3|z|0.5"]
        );
        assert_eq!(source.describe(), format!("file: csv {path}"));
        assert_eq!(source.capabilities(), [SourceCapability::Replayable]);
        assert_eq!(source.boundedness(), Boundedness::Bounded);
    }

    #[tokio::test]
    async fn reads_csv_with_a_declared_schema_and_options() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(dir.path(), "x.txt", "1;a\r\n2;\"b;c\"\r\n");
        let declared = schema(&[("n", DataType::Int32, false), ("s", DataType::Utf8, true)]);
        let options =
            json!({ "path": path, "format": "csv", "delimiter": ";", "has_header": false });
        let source = prepare(options, Some(declared.clone()), BadRecordPolicy::Fail)
            .await
            .unwrap();
        assert_eq!(source.schema(), declared);
        assert_eq!(read_all(&source).await.unwrap(), ["1|a", "2|b;c"]);
    }

    #[tokio::test]
    async fn reads_json_lines_declared_and_inferred() {
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            "in/events.jsonl",
            "{\"user\":\"a\",\"n\":1}\n\n{\"user\":\"b\",\"n\":2,\"extra\":true}\n",
        );
        let path = format!("{}/in/", dir.path().display());
        let source = prepare(json!({ "path": path }), None, BadRecordPolicy::Fail)
            .await
            .unwrap();
        // Columns in order of first appearance; keys of one object in name order.
        assert_eq!(
            source.schema(),
            schema(&[
                ("n", DataType::Int64, true),
                ("user", DataType::Utf8, true),
                ("extra", DataType::Boolean, true),
            ])
        );
        assert_eq!(read_all(&source).await.unwrap(), ["1|a|∅", "2|b|true"]);
        let declared = schema(&[
            ("n", DataType::Int32, false),
            ("user", DataType::Utf8, true),
        ]);
        let source = prepare(
            json!({ "path": path, "format": "json" }),
            Some(declared),
            BadRecordPolicy::Fail,
        )
        .await
        .unwrap();
        assert_eq!(read_all(&source).await.unwrap(), ["1|a", "2|b"]);
    }

    #[tokio::test]
    async fn reads_parquet_declared_and_inferred() {
        let dir = tempfile::tempdir().unwrap();
        let batch = RecordBatch::try_from_iter([
            ("id", Arc::new(Int32Array::from(vec![1, 2, 3])) as ArrayRef),
            (
                "name",
                Arc::new(StringArray::from(vec!["a", "b", "c"])) as ArrayRef,
            ),
        ])
        .unwrap();
        let path = write_parquet(dir.path(), "t.parquet", &batch);
        let source = prepare(json!({ "path": path }), None, BadRecordPolicy::Fail)
            .await
            .unwrap();
        assert_eq!(source.schema().fields().len(), 2);
        assert_eq!(read_all(&source).await.unwrap(), ["1|a", "2|b", "3|c"]);

        // Declared: columns by name, widened, and a missing nullable column reads as null.
        let declared = schema(&[
            ("name", DataType::Utf8, false),
            ("id", DataType::Int64, false),
            ("missing", DataType::Float64, true),
        ]);
        let source = prepare(
            json!({ "path": path }),
            Some(declared),
            BadRecordPolicy::Fail,
        )
        .await
        .unwrap();
        assert_eq!(
            read_all(&source).await.unwrap(),
            ["a|1|∅", "b|2|∅", "c|3|∅"]
        );
    }

    #[tokio::test]
    async fn a_cursor_resumes_at_exactly_the_remaining_rows() {
        let dir = tempfile::tempdir().unwrap();
        let ids: Vec<i64> = (0..10).collect();
        let mut csv = String::from("id,note\n");
        let mut jsonl = String::new();
        for id in &ids {
            csv.push_str(&format!("{id},\"n\n{id}\"\r\n"));
            jsonl.push_str(&format!("{{\"id\":{id}}}\n\n"));
        }
        write(dir.path(), "r.csv", csv);
        write(dir.path(), "r.json", jsonl);
        let batch = RecordBatch::try_from_iter([(
            "id",
            Arc::new(Int64Array::from(ids.clone())) as ArrayRef,
        )])
        .unwrap();
        let mut out = Vec::new();
        let props = parquet::file::properties::WriterProperties::builder()
            .set_max_row_group_row_count(Some(4))
            .build();
        let mut writer =
            parquet::arrow::ArrowWriter::try_new(&mut out, batch.schema(), Some(props)).unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();
        write(dir.path(), "r.parquet", out);
        for file in ["r.csv", "r.json", "r.parquet"] {
            let path = format!("{}/{file}", dir.path().display());
            let source = prepare(
                json!({ "path": path, "batch_size": 3 }),
                None,
                BadRecordPolicy::Fail,
            )
            .await
            .unwrap();
            let split = source.enumerate_splits().await.unwrap().remove(0);
            let all = read_split(&source, &split).await.unwrap();
            assert_eq!(all.rows.len(), 10, "{file}");
            assert_eq!(all.cursors.last(), Some(&10), "{file}");
            assert!(all.cursors.windows(2).all(|w| w[0] < w[1]), "{file}");
            for start in 0..=11u64 {
                let mut resumed = split.clone();
                resumed.cursor.next_record = start;
                let rest = read_split(&source, &resumed).await.unwrap();
                let expected = &all.rows[(start as usize).min(10)..];
                assert_eq!(rest.rows, expected, "{file} from {start}");
                if start < 10 {
                    assert_eq!(rest.cursors.last(), Some(&10), "{file} from {start}");
                }
            }
        }
    }

    #[tokio::test]
    async fn nothing_matching_is_a_config_error_naming_the_path_option() {
        let dir = tempfile::tempdir().unwrap();
        let path = format!("{}/none/*.csv", dir.path().display());
        let err = prepare(json!({ "path": path }), None, BadRecordPolicy::Fail)
            .await
            .unwrap_err();
        assert!(
            matches!(&err, Error::Config { path, .. } if path == &format!("{OPTIONS_PATH}.path")),
            "{err}"
        );
        let declared = schema(&[("a", DataType::Utf8, true)]);
        let source = prepare(
            json!({ "path": path }),
            Some(declared),
            BadRecordPolicy::Fail,
        )
        .await
        .unwrap();
        let err = source.enumerate_splits().await.unwrap_err();
        assert!(err.to_string().contains("no files match"), "{err}");
        assert!(
            matches!(&err, Error::Config { path, .. } if path == &format!("{OPTIONS_PATH}.path")),
            "{err}"
        );
    }

    #[tokio::test]
    async fn an_unknown_extension_needs_a_format() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "d/a.csv", "a\n1\n");
        write(dir.path(), "d/b.txt", "a\n1\n");
        let path = format!("{}/d", dir.path().display());
        let err = prepare(json!({ "path": path }), None, BadRecordPolicy::Fail)
            .await
            .unwrap_err();
        assert!(
            matches!(&err, Error::Config { path, .. } if path == &format!("{OPTIONS_PATH}.format")),
            "{err}"
        );
        let source = prepare(
            json!({ "path": path, "format": "csv" }),
            None,
            BadRecordPolicy::Fail,
        )
        .await
        .unwrap();
        assert_eq!(read_all(&source).await.unwrap(), ["1", "1"]);
    }

    #[tokio::test]
    async fn csv_cannot_declare_nested_types() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(dir.path(), "a.csv", "a\n1\n");
        let declared = schema(&[(
            "a",
            DataType::List(Arc::new(Field::new("item", DataType::Int32, true))),
            true,
        )]);
        let err = prepare(
            json!({ "path": path }),
            Some(declared),
            BadRecordPolicy::Fail,
        )
        .await
        .unwrap_err();
        assert!(matches!(err, Error::Schema { .. }), "{err}");
    }

    #[tokio::test]
    async fn memory_urls_resolve_through_the_shared_registry() {
        let registry: Arc<dyn ObjectStoreRegistry> = Arc::new(DefaultObjectStoreRegistry::new());
        let url = url::Url::parse("memory:///in/a.csv").unwrap();
        let (store, path) = registry.resolve(&url).unwrap();
        store.put(&path, "x\n1\n2\n".into()).await.unwrap();
        let options = json!({ "path": "memory:///in/*.csv" });
        let source = FileSourceFactory::with_registry(registry)
            .prepare(spec(&options, None, BadRecordPolicy::Fail))
            .await
            .unwrap();
        let splits = source.enumerate_splits().await.unwrap();
        assert_eq!(splits[0].id, "memory:///in/a.csv");
        let mut reader = source.open_split(&splits[0], &ctx(0)).await.unwrap();
        let batch = reader.next_batch().await.unwrap().unwrap();
        assert_eq!(batch.data.num_rows(), 2);
    }
}
