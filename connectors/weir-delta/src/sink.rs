//! The `delta` sink: subtasks write data files into the table's directory (invisible until a
//! commit names them); each epoch of all subtasks becomes one Delta commit.

use crate::commit::{EpochFiles, TableCommitter};
use crate::lanes::LaneCommits;
use crate::options::DeltaSinkOptions;
use crate::schema::{check_compatible, delta_schema, table_arrow_schema};
use crate::table::TableLocation;
use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use deltalake_core::kernel::StructType;
use deltalake_core::writer::{DeltaWriter, RecordBatchWriter};
use std::sync::Arc;
use weir_api::{
    ConnectorSpec, Epoch, PreparedSink, Reach, Result, SinkCapability, SinkFactory, SinkWriter,
    TaskContext, decode_options,
};

/// Prepares `delta` sinks.
#[derive(Debug, Default, Clone, Copy)]
pub struct DeltaSinkFactory;

#[async_trait::async_trait]
impl SinkFactory for DeltaSinkFactory {
    async fn prepare(
        &self,
        spec: ConnectorSpec<'_>,
        input_schema: SchemaRef,
    ) -> Result<Arc<dyn PreparedSink>> {
        let options: DeltaSinkOptions = decode_options(spec.options, spec.options_path)?;
        options.validate(spec.options_path)?;
        for (i, column) in options.partition_by.iter().enumerate() {
            if input_schema.field_with_name(column).is_err() {
                return Err(weir_api::Error::config(
                    format!("{}.partition_by[{i}]", spec.options_path),
                    format!("`{column}` is not a column of the sink"),
                ));
            }
        }
        let location = TableLocation::resolve(
            &options.path,
            options.s3.as_ref(),
            &format!("{}.path", spec.options_path),
        )?;
        let table_schema = table_arrow_schema(&input_schema);
        let schema = delta_schema(&table_schema, spec.options_path)?;
        // An existing table must take the sink's rows; a missing one is created by the first
        // writer (preparing, which `weir validate` does too, changes nothing).
        if spec.reach == Reach::Full
            && let Some(table) = location.open(None).await?
        {
            check_table(&table, &location, &schema, &options, spec.options_path)?;
        }
        Ok(Arc::new(PreparedDeltaSink {
            committer: TableCommitter::new(location, &options),
            options,
            table_schema,
            schema,
            options_path: spec.options_path.to_owned(),
        }))
    }
}

/// Checks that `table` takes the sink's rows (schema and partition columns).
fn check_table(
    table: &deltalake_core::DeltaTable,
    location: &TableLocation,
    schema: &StructType,
    options: &DeltaSinkOptions,
    options_path: &str,
) -> Result<()> {
    let snapshot = table.snapshot().map_err(|e| location.error("reading", e))?;
    check_compatible(
        &snapshot.schema(),
        snapshot.metadata().partition_columns(),
        schema,
        &options.partition_by,
        (location.given(), options_path),
    )
}

/// A prepared `delta` sink.
#[derive(Debug)]
struct PreparedDeltaSink {
    options: DeltaSinkOptions,
    committer: TableCommitter,
    /// The schema of the rows written (see [`table_arrow_schema`]).
    table_schema: SchemaRef,
    /// The sink's rows as a Delta schema (a table the first writer creates gets it).
    schema: StructType,
    options_path: String,
}

#[async_trait::async_trait]
impl PreparedSink for PreparedDeltaSink {
    fn capabilities(&self) -> Vec<SinkCapability> {
        vec![SinkCapability::TwoPhaseCommit, SinkCapability::Idempotent]
    }

    fn describe(&self) -> String {
        let mut text = format!("delta: {}", self.committer.location().given());
        if !self.options.partition_by.is_empty() {
            text.push_str(&format!(
                " partitioned by ({})",
                self.options.partition_by.join(", ")
            ));
        }
        text
    }

    fn touches(&self) -> Vec<weir_api::Touch> {
        self.committer.location().touches()
    }

    async fn create_writer(&self, ctx: &TaskContext) -> Result<Box<dyn SinkWriter>> {
        let location = self.committer.location();
        let table = location
            .open_or_create(
                &self.schema,
                &self.options.partition_by,
                self.options.checkpoint_interval,
            )
            .await?;
        check_table(
            &table,
            location,
            &self.schema,
            &self.options,
            &self.options_path,
        )?;
        let writer = RecordBatchWriter::for_table(&table)
            .map_err(|e| location.error("writing", e))?
            .with_target_file_size(self.options.target_file_size);
        Ok(Box::new(DeltaTableWriter {
            committer: self.committer.clone(),
            writer,
            epochs: false,
            task: ctx.label(),
            table_schema: self.table_schema.clone(),
        }))
    }

    fn commits_whole_epochs(&self) -> bool {
        true
    }

    async fn commit_epochs(
        &self,
        task: &TaskContext,
        epochs: &[(Epoch, Vec<serde_json::Value>)],
        last: bool,
    ) -> Result<()> {
        let mut decoded = Vec::with_capacity(epochs.len());
        for (epoch, values) in epochs {
            let mut files = Vec::new();
            for value in values {
                let one: EpochFiles = serde_json::from_value(value.clone()).map_err(|e| {
                    weir_api::Error::Internal(format!(
                        "a pre-commit of Delta sink `{}` for epoch {epoch} is unreadable: {e}",
                        task.operator_id
                    ))
                })?;
                files.extend(one.adds);
            }
            decoded.push((*epoch, files));
        }
        match &task.lane {
            // A lane of a distributed job: one commit for the epochs of every lane.
            Some(lane) => {
                LaneCommits::new(&self.committer, lane, |job| {
                    app_id(job, task.operator_id.as_str())
                })?
                .commit(&decoded, last)
                .await
            }
            None => {
                let app_id = app_id(task.job_id.as_str(), task.operator_id.as_str());
                self.committer.commit_epochs(&app_id, &decoded).await
            }
        }
    }

    async fn abort_uncommitted(
        &self,
        _task: &TaskContext,
        _keep: &[serde_json::Value],
    ) -> Result<()> {
        // Files of epochs that never committed are in the table's directory but in no commit,
        // so no reader sees them; Delta's VACUUM removes such files (docs/connectors/delta.md).
        Ok(())
    }
}

/// The Delta transaction id (`txn` action `appId`) of sink `sink` in job `job`. Each lane of a
/// distributed job has a job id of its own, so each lane has its own, and the job one more.
pub(crate) fn app_id(job: &str, sink: &str) -> String {
    format!("weir-{job}-{sink}")
}

/// One subtask's writer.
struct DeltaTableWriter {
    committer: TableCommitter,
    writer: RecordBatchWriter,
    epochs: bool,
    task: String,
    table_schema: SchemaRef,
}

impl DeltaTableWriter {
    fn error(&self, doing: &str, e: impl std::fmt::Display) -> weir_api::Error {
        self.committer
            .location()
            .error(&format!("{doing} (task {})", self.task), e)
    }
}

#[async_trait::async_trait]
impl SinkWriter for DeltaTableWriter {
    async fn write_batch(&mut self, batch: RecordBatch) -> Result<()> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        // Columns as the table holds them (timestamps in UTC microseconds); field metadata and
        // nullability are the plan's, not the table's.
        let mut columns = Vec::with_capacity(batch.num_columns());
        for (column, field) in batch.columns().iter().zip(self.table_schema.fields()) {
            if column.data_type() == field.data_type() {
                columns.push(column.clone());
            } else {
                let cast = arrow::compute::cast(column, field.data_type()).map_err(|e| {
                    weir_api::Error::arrow(format!("writing column `{}`", field.name()), e)
                })?;
                columns.push(cast);
            }
        }
        let batch = RecordBatch::try_new(self.table_schema.clone(), columns)
            .map_err(|e| weir_api::Error::arrow("matching the sink's schema", e))?;
        let result = self.writer.write(batch).await;
        result.map_err(|e| self.error("writing to", e))
    }

    async fn finish(&mut self) -> Result<()> {
        if self.epochs {
            return Ok(());
        }
        let adds = self.writer.flush().await;
        let adds = adds.map_err(|e| self.error("writing to", e))?;
        self.committer.commit_unversioned(adds).await
    }

    async fn abort(&mut self) -> Result<()> {
        self.writer.reset();
        Ok(())
    }

    async fn begin_epochs(&mut self) -> Result<()> {
        self.epochs = true;
        Ok(())
    }

    async fn pre_commit(&mut self, epoch: Epoch) -> Result<serde_json::Value> {
        let adds = self.writer.flush().await;
        let adds = adds.map_err(|e| self.error("writing to", e))?;
        serde_json::to_value(EpochFiles {
            epoch: epoch.0,
            adds,
        })
        .map_err(|e| weir_api::Error::Internal(format!("encoding a Delta pre-commit: {e}")))
    }
}
