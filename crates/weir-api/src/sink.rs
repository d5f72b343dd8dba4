//! The sink surface: a prepared sink creates one writer per subtask.

use crate::capability::SinkCapability;
use crate::context::TaskContext;
use crate::error::Result;
use crate::source::ConnectorSpec;
use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use std::sync::Arc;

/// Writes one subtask's rows to an external system.
///
/// # Cancel safety
/// A writer is dropped when its job is cancelled; it MUST NOT leave a partial file or message
/// visible to readers when dropped (stage, then publish in [`SinkWriter::finish`]).
#[async_trait::async_trait]
pub trait SinkWriter: Send {
    /// Writes (or stages) a batch in the input schema given at prepare time.
    ///
    /// # Errors
    /// External errors when the system fails.
    async fn write_batch(&mut self, batch: RecordBatch) -> Result<()>;

    /// Called once at end of input: publish everything still staged.
    ///
    /// # Errors
    /// External errors when publishing fails; nothing half-written may stay visible.
    async fn finish(&mut self) -> Result<()>;

    /// Called when the job fails: discard staged, unpublished output.
    ///
    /// # Errors
    /// External errors when cleanup fails (the job has failed anyway; this is logged).
    async fn abort(&mut self) -> Result<()> {
        Ok(())
    }
}

/// A validated sink, shared by all its subtasks.
#[async_trait::async_trait]
pub trait PreparedSink: Send + Sync + std::fmt::Debug {
    /// What the sink can promise about commits.
    fn capabilities(&self) -> Vec<SinkCapability>;

    /// One line for plan output, e.g. `file: parquet out/`.
    fn describe(&self) -> String;

    /// Creates the writer of one subtask.
    ///
    /// # Errors
    /// External errors when the destination cannot be reached.
    async fn create_writer(&self, ctx: &TaskContext) -> Result<Box<dyn SinkWriter>>;
}

/// Prepares sinks of one connector type from their options.
#[async_trait::async_trait]
pub trait SinkFactory: Send + Sync {
    /// Validates the options against the input schema and prepares the sink.
    ///
    /// # Errors
    /// [`crate::Error::Config`] naming the offending option's path.
    async fn prepare(
        &self,
        spec: ConnectorSpec<'_>,
        input_schema: SchemaRef,
    ) -> Result<Arc<dyn PreparedSink>>;
}
