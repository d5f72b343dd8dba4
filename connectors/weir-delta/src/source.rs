//! The `delta` source: a bounded read of one version of a table, one split per data file.

use crate::options::DeltaSourceOptions;
use crate::table::TableLocation;
use arrow::array::{ArrayRef, RecordBatch, StringArray, new_null_array};
use arrow::datatypes::{DataType, Schema, SchemaRef};
use deltalake_core::DeltaTable;
use deltalake_core::kernel::engine::arrow_conversion::TryIntoArrow;
use futures::StreamExt;
use futures::stream::BoxStream;
use object_store::ObjectStore;
use parquet::arrow::ParquetRecordBatchStreamBuilder;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use weir_api::{
    Boundedness, ConnectorSpec, Error, PreparedSource, Reach, Result, SourceCapability,
    SourceFactory, SourceSplit, SplitBatch, SplitCursor, SplitReader, TaskContext, decode_options,
};

/// Prepares `delta` sources.
#[derive(Debug, Default, Clone, Copy)]
pub struct DeltaSourceFactory;

#[async_trait::async_trait]
impl SourceFactory for DeltaSourceFactory {
    async fn prepare(&self, spec: ConnectorSpec<'_>) -> Result<Arc<dyn PreparedSource>> {
        let options: DeltaSourceOptions = decode_options(spec.options, spec.options_path)?;
        options.validate(spec.options_path)?;
        let location = TableLocation::resolve(
            &options.path,
            options.s3.as_ref(),
            &format!("{}.path", spec.options_path),
        )?;
        let (schema, version) = match spec.reach {
            Reach::Full => {
                let table = location.open(options.version).await?.ok_or_else(|| {
                    Error::config(
                        format!("{}.path", spec.options_path),
                        format!("there is no Delta table at {}", location.given()),
                    )
                })?;
                let table_schema = table_arrow_schema(&table, &location)?;
                let schema = match spec.schema {
                    Some(declared) => {
                        check_declared(&declared, &table_schema, &location, spec.options_path)?;
                        declared
                    }
                    None => table_schema,
                };
                (schema, table.version())
            }
            Reach::Offline => {
                let schema = spec.schema.ok_or_else(|| {
                    Error::config(
                        spec.options_path,
                        "declare the table's columns: without them the schema is read from the table, which validation here does not reach",
                    )
                })?;
                (schema, options.version)
            }
        };
        Ok(Arc::new(PreparedDeltaSource {
            location,
            schema,
            version,
            batch_size: options.batch_size,
            files: tokio::sync::OnceCell::new(),
            options_path: spec.options_path.to_owned(),
        }))
    }
}

/// The table's schema as Arrow's.
fn table_arrow_schema(table: &DeltaTable, location: &TableLocation) -> Result<SchemaRef> {
    let snapshot = table.snapshot().map_err(|e| location.error("reading", e))?;
    let schema: Schema = snapshot
        .schema()
        .as_ref()
        .try_into_arrow()
        .map_err(|e| location.error("reading the schema of", e))?;
    Ok(Arc::new(schema))
}

/// Checks that every declared column is a column of the table (its type is cast to).
fn check_declared(
    declared: &Schema,
    table: &Schema,
    location: &TableLocation,
    options_path: &str,
) -> Result<()> {
    let missing: Vec<&str> = declared
        .fields()
        .iter()
        .filter(|f| table.field_with_name(f.name()).is_err())
        .map(|f| f.name().as_str())
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let columns: Vec<&str> = table.fields().iter().map(|f| f.name().as_str()).collect();
    Err(Error::config(
        options_path,
        format!(
            "the Delta table at {} has no column {} (its columns: {})",
            location.given(),
            missing.join(", "),
            columns.join(", ")
        ),
    ))
}

/// One data file of the version read.
#[derive(Debug, Clone)]
struct DataFile {
    size: u64,
    partition_values: HashMap<String, Option<String>>,
}

/// The version's files and the store they are read from.
#[derive(Debug)]
struct Files {
    store: Arc<dyn ObjectStore>,
    by_path: BTreeMap<String, DataFile>,
}

/// A prepared `delta` source.
#[derive(Debug)]
struct PreparedDeltaSource {
    location: TableLocation,
    schema: SchemaRef,
    /// The version read: the one asked for, or the newest when the job was prepared.
    version: Option<u64>,
    batch_size: usize,
    files: tokio::sync::OnceCell<Files>,
    /// The JSON path of the options, for errors.
    options_path: String,
}

impl PreparedDeltaSource {
    async fn files(&self) -> Result<&Files> {
        self.files
            .get_or_try_init(|| async {
                let table = self.location.open(self.version).await?.ok_or_else(|| {
                    self.location
                        .error("reading", "there is no table (it was removed)")
                })?;
                let snapshot = table
                    .snapshot()
                    .map_err(|e| self.location.error("reading", e))?;
                let mut by_path = BTreeMap::new();
                for f in snapshot.log_data().iter() {
                    if f.deletion_vector_descriptor().is_some() {
                        return Err(self.location.error(
                            "reading",
                            format!(
                                "data file {} has a deletion vector, which this source does \
                                 not apply (its deleted rows would be read): purge the table \
                                 (REORG TABLE ... APPLY (PURGE)) or read another version",
                                f.path()
                            ),
                        ));
                    }
                    let file = DataFile {
                        size: u64::try_from(f.size()).unwrap_or(0),
                        partition_values: f.partition_values_map(),
                    };
                    by_path.insert(f.path().into_owned(), file);
                }
                Ok(Files {
                    store: table.object_store(),
                    by_path,
                })
            })
            .await
    }
}

#[async_trait::async_trait]
impl PreparedSource for PreparedDeltaSource {
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
        match self.version {
            Some(v) => format!("delta: {} version {v}", self.location.given()),
            None => format!("delta: {}", self.location.given()),
        }
    }

    fn touches(&self) -> Vec<weir_api::Touch> {
        self.location.touches()
    }

    async fn enumerate_splits(&self) -> Result<Vec<SourceSplit>> {
        let files = self.files().await?;
        if files.by_path.is_empty() {
            // As the file source does when nothing matches: a bounded read of nothing is
            // refused rather than run.
            return Err(Error::config(
                format!("{}.path", self.options_path),
                format!(
                    "the Delta table at {} has no data files{}",
                    self.location.given(),
                    self.version
                        .map(|v| format!(" at version {v}"))
                        .unwrap_or_default()
                ),
            ));
        }
        Ok(files
            .by_path
            .iter()
            .map(|(path, file)| SourceSplit {
                id: path.clone(),
                cursor: SplitCursor::default(),
                size_bytes: Some(file.size),
                range: None,
            })
            .collect())
    }

    async fn open_split(
        &self,
        split: &SourceSplit,
        _ctx: &TaskContext,
    ) -> Result<Box<dyn SplitReader>> {
        let files = self.files().await?;
        let file = files.by_path.get(&split.id).ok_or_else(|| {
            self.location.error(
                "reading",
                format!(
                    "`{}` is no data file of the version read (a restore of another version?)",
                    split.id
                ),
            )
        })?;
        let path = object_store::path::Path::parse(&split.id)
            .map_err(|e| self.location.error("reading", e))?;
        let context = format!("reading {} of", split.id);
        let reader = weir_file::ObjectParquetReader::new(files.store.clone(), path, file.size);
        let offset = usize::try_from(split.cursor.next_record).unwrap_or(usize::MAX);
        let stream = ParquetRecordBatchStreamBuilder::new(reader)
            .await
            .map_err(|e| self.location.error(&context, e))?
            .with_batch_size(self.batch_size)
            .with_offset(offset)
            .build()
            .map_err(|e| self.location.error(&context, e))?;
        Ok(Box::new(DeltaFileReader {
            stream: stream.boxed(),
            schema: self.schema.clone(),
            partition_values: file.partition_values.clone(),
            next_record: split.cursor.next_record,
            location: self.location.clone(),
            context,
        }))
    }
}

/// Reads one data file, adding the partition columns from the file's partition values.
struct DeltaFileReader {
    stream: BoxStream<'static, parquet::errors::Result<RecordBatch>>,
    schema: SchemaRef,
    partition_values: HashMap<String, Option<String>>,
    next_record: u64,
    location: TableLocation,
    context: String,
}

#[async_trait::async_trait]
impl SplitReader for DeltaFileReader {
    async fn next_batch(&mut self) -> Result<Option<SplitBatch>> {
        let Some(batch) = self.stream.next().await else {
            return Ok(None);
        };
        let batch = batch.map_err(|e| self.location.error(&self.context, e))?;
        let rows = batch.num_rows();
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(self.schema.fields().len());
        for field in self.schema.fields() {
            let column = match batch.column_by_name(field.name()) {
                Some(c) => c.clone(),
                None => match self.partition_values.get(field.name()) {
                    Some(Some(text)) => Arc::new(StringArray::from(vec![text.as_str(); rows])),
                    Some(None) => new_null_array(&DataType::Utf8, rows),
                    None => new_null_array(field.data_type(), rows),
                },
            };
            let column = if column.data_type() == field.data_type() {
                column
            } else {
                arrow::compute::cast(&column, field.data_type()).map_err(|e| {
                    Error::arrow(format!("{} column `{}`", self.context, field.name()), e)
                })?
            };
            columns.push(column);
        }
        let data = RecordBatch::try_new(self.schema.clone(), columns)
            .map_err(|e| Error::arrow(self.context.clone(), e))?;
        self.next_record += rows as u64;
        Ok(Some(SplitBatch {
            data,
            dead_letters: None,
            cursor: SplitCursor {
                next_record: self.next_record,
            },
            backlog: None,
        }))
    }
}
