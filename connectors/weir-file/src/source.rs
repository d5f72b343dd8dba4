//! The `file` source: lists matching files as splits and reads each from a row cursor.

use crate::csv_reader::{CsvColumns, CsvSplitReader};
use crate::inference::infer_schema;
use crate::location::{FileLocation, ListedFile};
use crate::object_bytes::{DEFAULT_BLOCK_BYTES, ObjectBytes};
use crate::options::{CsvSettings, FileFormat, FileSourceOptions, default_split_size};
use crate::parquet_reader::{ParquetSplitReader, row_group_bytes};
use crate::partition::{PartitionedReader, SourcePartitioning};
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
        let declared = spec.schema.is_some();
        let schema = match spec.schema {
            Some(schema) => schema,
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
        let (partitions, table_schema, schema) = match options.partition_by.as_slice() {
            [] => (None, schema.clone(), schema),
            columns => {
                let (partitions, data) = SourcePartitioning::new(columns, &schema, options_path)?;
                // Inferred: the partition columns the files lack are strings, after the others.
                let mut table: Vec<_> = schema.fields().iter().cloned().collect();
                for field in &partitions.fields {
                    if schema.field_with_name(field.name()).is_err() {
                        table.push(Arc::new(field.clone()));
                    }
                }
                let table = Arc::new(arrow::datatypes::Schema::new(table));
                (Some(Arc::new(partitions)), table, data)
            }
        };
        if declared {
            check_declared_schema(&schema, format, options_path)?;
        }
        Ok(Arc::new(FileSource {
            location,
            options_path: options_path.to_owned(),
            format,
            csv,
            file_schema: schema.clone(),
            out_schema: table_schema.clone(),
            table_schema,
            partitions,
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
    /// Every column of the files (declared or inferred; without partition columns).
    file_schema: SchemaRef,
    /// The columns the readers read from the files: all, or those of `projection`.
    schema: SchemaRef,
    /// Every column of the table: the files' and the partition columns.
    table_schema: SchemaRef,
    /// The columns the source emits: `schema` plus the partition columns read.
    out_schema: SchemaRef,
    /// The partition columns, when the table is partitioned.
    partitions: Option<Arc<SourcePartitioning>>,
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

impl FileSource {
    /// The typed partition values of the file at `path` (named `id` in messages).
    fn partition_values(
        &self,
        partitions: &SourcePartitioning,
        path: &object_store::path::Path,
        id: &str,
    ) -> Result<Vec<arrow::array::ArrayRef>> {
        let relative = path
            .prefix_match(self.location.base())
            .map(|parts| {
                parts
                    .map(|p| p.as_ref().to_owned())
                    .collect::<Vec<_>>()
                    .join("/")
            })
            .unwrap_or_default();
        partitions.values(
            &relative,
            id,
            &format!("{}.partition_by", self.options_path),
        )
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
        self.out_schema.clone()
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
        if let Some(partitions) = &self.partitions {
            line.push_str(&format!(
                "; partitioned by {}",
                partitions.names().join(", ")
            ));
        }
        if self.projection.is_some() {
            let names: Vec<&str> = self
                .out_schema
                .fields()
                .iter()
                .map(|f| f.name().as_str())
                .collect();
            line.push_str(&format!("; reads {}", names.join(", ")));
        }
        if let Some(predicate) = &self.predicate {
            let skips = match (&self.partitions, self.format) {
                (Some(_), FileFormat::Parquet) => "partition directories, row groups and pages",
                (Some(_), _) => "partition directories",
                (None, _) => "row groups and pages",
            };
            line.push_str(&format!(
                "; skips {skips} where no row can satisfy {predicate}"
            ));
        }
        line
    }

    async fn enumerate_splits(&self) -> Result<Vec<SourceSplit>> {
        let mut files = list_some(&self.location, &self.options_path).await?;
        if let (Some(partitions), Some(predicate)) = (&self.partitions, &self.predicate) {
            let mut kept = Vec::with_capacity(files.len());
            for file in files {
                let values = self.partition_values(partitions, &file.path, &file.id)?;
                if partitions.may_match(&values, predicate) {
                    kept.push(file);
                }
            }
            tracing::debug!(kept = kept.len(), "pruned partition directories");
            files = kept;
        }
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
        let values = match &self.partitions {
            Some(partitions) => Some(self.partition_values(partitions, &path, file)?),
            None => None,
        };
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
        let (Some(partitions), Some(values)) = (&self.partitions, values) else {
            return Ok(reader);
        };
        Ok(Box::new(PartitionedReader {
            inner: reader,
            schema: self.out_schema.clone(),
            values: partitions.names().into_iter().zip(values).collect(),
        }))
    }

    /// CSV decodes (and checks) only the columns read, JSON lines and Parquet read them by
    /// name.
    fn project(&self, indices: &[usize]) -> Option<Arc<dyn PreparedSource>> {
        let out_schema = Arc::new(self.table_schema.project(indices).ok()?);
        let Some(partitions) = &self.partitions else {
            return Some(Arc::new(FileSource {
                schema: out_schema.clone(),
                out_schema,
                projection: Some(indices.into()),
                ..self.clone()
            }));
        };
        // The files' columns read; at least one, to count the rows.
        let names = partitions.names();
        let mut data: Vec<usize> = out_schema
            .fields()
            .iter()
            .filter(|f| !names.contains(f.name()))
            .filter_map(|f| self.file_schema.index_of(f.name()).ok())
            .collect();
        if data.is_empty() {
            data.push(0);
        }
        Some(Arc::new(FileSource {
            schema: Arc::new(self.file_schema.project(&data).ok()?),
            out_schema,
            projection: Some(data.into()),
            ..self.clone()
        }))
    }

    /// A partitioned table skips the files of partition directories whose values do not
    /// satisfy the conditions on partition columns; Parquet skips the row groups whose
    /// column-chunk statistics, and the pages whose page index, show that no row satisfies
    /// `predicate` (docs/connectors/file.md); CSV and JSON lines read everything else.
    fn prune(&self, predicate: &SourcePredicate) -> Option<Arc<dyn PreparedSource>> {
        let on_partitions = self.partitions.as_ref().is_some_and(|p| {
            let names = p.names();
            predicate
                .conditions()
                .iter()
                .any(|c| names.contains(&c.column))
        });
        if (self.format != FileFormat::Parquet && !on_partitions)
            || predicate
                .conditions()
                .iter()
                .any(|c| self.table_schema.field_with_name(&c.column).is_err())
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
#[path = "source_tests.rs"]
mod tests;
