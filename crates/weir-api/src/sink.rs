//! The sink surface: a prepared sink creates one writer per subtask.

use crate::capability::SinkCapability;
use crate::context::TaskContext;
use crate::error::{Error, Result};
use crate::ids::Epoch;
use crate::message::Watermark;
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

    /// Puts the writer into epoch mode before its first row, when the job checkpoints: from now
    /// on nothing becomes visible except through [`PreparedSink::commit_epoch`] (rows go to
    /// staged files; `finish` publishes nothing). Without this call the writer publishes as it
    /// goes, as without checkpoints.
    ///
    /// # Errors
    /// By default, a configuration error: the sink does not support epoch transactions.
    async fn begin_epochs(&mut self) -> Result<()> {
        Err(no_epoch_transactions())
    }

    /// Seals everything written since the last pre-commit as epoch `epoch`'s transaction;
    /// nothing becomes visible. The returned JSON goes into the manifest (`sinkTransactions`,
    /// `preCommit`) and is handed back to [`PreparedSink::commit_epoch`] once the manifest of
    /// `epoch` is durable, or to [`PreparedSink::abort_uncommitted`] at recovery.
    ///
    /// # Errors
    /// By default, a configuration error: the sink does not support epoch transactions.
    /// Otherwise external errors when staging fails.
    async fn pre_commit(&mut self, epoch: Epoch) -> Result<serde_json::Value> {
        let _ = epoch;
        Err(no_epoch_transactions())
    }

    /// Called when the watermark of the writer's input advances to `watermark` (after the
    /// rows before it were written; [`Watermark::END`] at end of input), for sinks whose output
    /// depends on event-time progress (the file sink's partition commits). By default nothing.
    ///
    /// # Errors
    /// External errors; the job fails.
    async fn on_watermark(&mut self, watermark: Watermark) -> Result<()> {
        let _ = watermark;
        Ok(())
    }

    /// Called when checkpoint barrier `epoch` reaches a writer that is not in epoch mode
    /// (an at-least-once sink): everything written so far must be durable in the external
    /// system before the checkpoint counts, so that a restore from it loses nothing (it may
    /// repeat what was written after). By default nothing: a writer that publishes as it goes
    /// synchronously has nothing in flight.
    ///
    /// # Errors
    /// External errors when flushing fails; the checkpoint then fails.
    async fn flush_at_barrier(&mut self, epoch: Epoch) -> Result<()> {
        let _ = epoch;
        Ok(())
    }
}

/// The error of the default epoch-transaction methods.
fn no_epoch_transactions() -> Error {
    Error::config(
        "sinks",
        "the sink does not support epoch transactions (no staged or two-phase commit)",
    )
}

/// A validated sink, shared by all its subtasks.
#[async_trait::async_trait]
pub trait PreparedSink: Send + Sync + std::fmt::Debug {
    /// What the sink can promise about commits.
    fn capabilities(&self) -> Vec<SinkCapability>;

    /// One line for plan output, e.g. `file: parquet out/`.
    fn describe(&self) -> String;

    /// Whether the sink writes an updating input ([`crate::changelog`]) as changes (a
    /// changelog format, an upsert). Validation refuses to connect an updating stream to a
    /// sink that answers `false` (the default), which would write retractions as new rows.
    fn accepts_changes(&self) -> bool {
        false
    }

    /// The local paths and remote places this sink writes (its directory, object store prefix
    /// and endpoint, brokers), known without I/O. Default: nothing (a blackhole).
    fn touches(&self) -> Vec<crate::Touch> {
        Vec::new()
    }

    /// Creates the writer of one subtask.
    ///
    /// # Errors
    /// External errors when the destination cannot be reached.
    async fn create_writer(&self, ctx: &TaskContext) -> Result<Box<dyn SinkWriter>>;

    /// Publishes the pre-committed transactions (in epoch order) of one subtask, the one `task`
    /// names: the values its writer's [`SinkWriter::pre_commit`] returned. Idempotent: publishing
    /// an already published transaction is a no-op, so recovery may repeat it.
    ///
    /// # Errors
    /// By default, a configuration error: the sink does not support epoch transactions.
    /// Otherwise external errors, or an error when a transaction can no longer be published.
    async fn commit_epoch(
        &self,
        task: &TaskContext,
        transactions: &[serde_json::Value],
    ) -> Result<()> {
        let _ = (task, transactions);
        Err(no_epoch_transactions())
    }

    /// Publishes like [`PreparedSink::commit_epoch`] the last transactions of one subtask's
    /// writer: those of a bounded job's final epoch, and those recovery finishes (the restored
    /// epoch's; the restored run starts new writers). A sink that carries staged output from
    /// epoch to epoch (the file sink's compaction) publishes all it carries here. By default
    /// `commit_epoch`.
    ///
    /// # Errors
    /// Those of [`PreparedSink::commit_epoch`].
    async fn commit_final(
        &self,
        task: &TaskContext,
        transactions: &[serde_json::Value],
    ) -> Result<()> {
        self.commit_epoch(task, transactions).await
    }

    /// Whether the sink publishes each epoch of all its subtasks at once, through
    /// [`PreparedSink::commit_epochs`], rather than subtask by subtask through
    /// [`PreparedSink::commit_epoch`]. A table format whose commit is one atomic log entry (a
    /// Delta Lake table) answers `true`, so readers never see part of an epoch. By default
    /// `false`.
    fn commits_whole_epochs(&self) -> bool {
        false
    }

    /// Publishes whole epochs, in epoch order: each element holds an epoch and the pre-commit
    /// values of every subtask that pre-committed it (in subtask order). `task` names the job
    /// and the sink (its subtask is 0) and, in a lane of a distributed job, the lane
    /// ([`TaskContext::lane`]). `last` when these epochs end the job's input (a bounded job's
    /// final epoch): no epoch of this run follows them; that call comes even when no subtask
    /// pre-committed anything (`epochs` empty: its subtasks never ran, as in a lane without
    /// input). Idempotent: an epoch already published is passed over, so recovery may repeat
    /// it (with `last` false). Called only when [`PreparedSink::commits_whole_epochs`] answers
    /// `true`.
    ///
    /// # Errors
    /// By default, a configuration error: the sink does not support epoch transactions.
    /// Otherwise external errors, or an error when an epoch can no longer be published.
    async fn commit_epochs(
        &self,
        task: &TaskContext,
        epochs: &[(Epoch, Vec<serde_json::Value>)],
        last: bool,
    ) -> Result<()> {
        let _ = (task, epochs, last);
        Err(no_epoch_transactions())
    }

    /// Recovery: deletes every staged file of the subtask `task` names that is not in `keep`
    /// (pre-commit values of durable epochs, still to be published).
    ///
    /// # Errors
    /// By default, a configuration error: the sink does not support epoch transactions.
    /// Otherwise external errors when listing or deleting fails.
    async fn abort_uncommitted(
        &self,
        task: &TaskContext,
        keep: &[serde_json::Value],
    ) -> Result<()> {
        let _ = (task, keep);
        Err(no_epoch_transactions())
    }

    /// Whether [`PreparedSink::withdraw_after`] works: the sink can take back output it
    /// already published. A restore from an older epoch than the newest durable one (a
    /// damaged checkpoint passed over, `--restore <epoch>`) needs it to keep its output
    /// exactly-once; with a sink that cannot, such a restore is refused unless the run accepts
    /// duplicates. By default `false`.
    fn can_withdraw(&self) -> bool {
        false
    }

    /// Recovery from epoch `epoch` when newer epochs were durable: removes the output that
    /// every subtask of this sink (the job and operator `task` names; its subtask is ignored)
    /// published for epochs after `epoch`, before the replay publishes it again. Returns what
    /// was withdrawn, one entry per object (for the run's report). Idempotent: output already
    /// withdrawn is not reported again.
    ///
    /// # Errors
    /// By default, a configuration error: the sink cannot withdraw published output.
    /// Otherwise external errors when listing or deleting fails.
    async fn withdraw_after(&self, task: &TaskContext, epoch: Epoch) -> Result<Vec<String>> {
        let _ = (task, epoch);
        Err(Error::config(
            "sinks",
            "the sink cannot withdraw output it has published",
        ))
    }
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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::ids::SubtaskIndex;

    #[derive(Debug)]
    struct Plain;

    #[async_trait::async_trait]
    impl SinkWriter for Plain {
        async fn write_batch(&mut self, _batch: RecordBatch) -> Result<()> {
            Ok(())
        }
        async fn finish(&mut self) -> Result<()> {
            Ok(())
        }
    }

    #[async_trait::async_trait]
    impl PreparedSink for Plain {
        fn capabilities(&self) -> Vec<SinkCapability> {
            vec![SinkCapability::AtLeastOnce]
        }
        fn describe(&self) -> String {
            "plain".into()
        }
        async fn create_writer(&self, _ctx: &TaskContext) -> Result<Box<dyn SinkWriter>> {
            Ok(Box::new(Plain))
        }
    }

    #[tokio::test]
    async fn epoch_transactions_are_unsupported_by_default() {
        let task = TaskContext::new("j".into(), "o".into(), SubtaskIndex(0), 1);
        let mut writer = Plain.create_writer(&task).await.unwrap();
        let errors = [
            writer.begin_epochs().await.unwrap_err(),
            writer.pre_commit(Epoch(1)).await.unwrap_err(),
            Plain.commit_epoch(&task, &[]).await.unwrap_err(),
            Plain.commit_final(&task, &[]).await.unwrap_err(),
            Plain.commit_epochs(&task, &[], false).await.unwrap_err(),
            Plain.abort_uncommitted(&task, &[]).await.unwrap_err(),
        ];
        for err in errors {
            assert!(matches!(err, Error::Config { .. }), "{err}");
            assert!(err.to_string().contains("epoch transactions"), "{err}");
        }
        assert!(!Plain.can_withdraw());
        assert!(!Plain.commits_whole_epochs());
        let err = Plain.withdraw_after(&task, Epoch(3)).await.unwrap_err();
        assert!(matches!(err, Error::Config { .. }), "{err}");
        assert!(err.to_string().contains("cannot withdraw"), "{err}");
    }
}
