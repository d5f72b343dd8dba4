//! Delta commits of the sink: one per epoch, carrying the sink's transaction id so that a
//! commit repeated after a crash is recognised and not written twice.

use crate::compaction::{Compaction, compact};
use crate::options::DeltaSinkOptions;
use crate::table::TableLocation;
use deltalake_core::DeltaTable;
use deltalake_core::kernel::transaction::{CommitBuilder, CommitProperties};
use deltalake_core::kernel::{Action, Add, Transaction};
use deltalake_core::protocol::{DeltaOperation, OutputMode, SaveMode};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use weir_api::failpoint::failpoint;
use weir_api::{Epoch, Result};

/// A subtask's pre-commit: the data files it wrote for an epoch, as Delta `add` actions.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct EpochFiles {
    /// The epoch.
    pub(crate) epoch: u64,
    /// The files, each with its size, partition values and statistics.
    pub(crate) adds: Vec<Add>,
}

/// Commits to one table: epochs of the sink, and compaction after them.
#[derive(Debug, Clone)]
pub(crate) struct TableCommitter {
    location: TableLocation,
    compaction: Option<Compaction>,
    /// The table as the last commit left it, brought up to date by reading only the log
    /// entries after it (not the whole log from its last checkpoint) at the next commit.
    newest: Arc<tokio::sync::Mutex<Option<DeltaTable>>>,
}

impl TableCommitter {
    /// The committer of a sink with `options`.
    pub(crate) fn new(location: TableLocation, options: &DeltaSinkOptions) -> Self {
        let compaction = options.auto_compaction.then(|| Compaction {
            target_size: options.compaction_target(),
            min_files: options.compaction_min_files,
        });
        TableCommitter {
            location,
            compaction,
            newest: Arc::default(),
        }
    }

    /// Where the table is.
    pub(crate) fn location(&self) -> &TableLocation {
        &self.location
    }

    /// Commits each epoch's files, in order, as one Delta commit with the transaction
    /// `(app_id, epoch)`. An epoch at or below the transaction version the table already holds
    /// for `app_id` was committed before (by an attempt that crashed after its commit) and is
    /// passed over; an epoch without files commits nothing. Concurrent writers of the table
    /// are resolved by Delta's optimistic concurrency (a commit that loses the race for a
    /// version is retried on the next one); on S3 the log entry is written with a conditional
    /// put (`If-None-Match`), never a rename.
    ///
    /// # Errors
    /// External errors when the table cannot be read or a commit fails for good.
    pub(crate) async fn commit_epochs(
        &self,
        app_id: &str,
        epochs: &[(Epoch, Vec<Add>)],
    ) -> Result<()> {
        if epochs.iter().all(|(_, adds)| adds.is_empty()) {
            // Nothing to commit, and nothing to read the table for.
            return Ok(());
        }
        let mut table = self.newest().await?;
        let done = self.transaction_version(&table, app_id).await?;
        let mut committed = false;
        for (epoch, adds) in epochs {
            let version = i64::try_from(epoch.0).unwrap_or(i64::MAX);
            if done.is_some_and(|d| d >= version) {
                tracing::info!(table = %self.location.given(), %epoch, "the Delta table already holds this epoch's commit; not committing it again");
                continue;
            }
            if adds.is_empty() {
                continue;
            }
            failpoint("delta-before-commit");
            let actions: Vec<Action> = adds.iter().cloned().map(Action::Add).collect();
            let properties = CommitProperties::default()
                .with_application_transaction(Transaction::new(app_id, version));
            let operation = DeltaOperation::StreamingUpdate {
                output_mode: OutputMode::Append,
                query_id: app_id.to_owned(),
                epoch_id: version,
            };
            let snapshot = table
                .snapshot()
                .map_err(|e| self.location.error("reading", e))?;
            let finalized = CommitBuilder::from(properties)
                .with_actions(actions)
                .build(Some(snapshot), table.log_store(), operation)
                .await
                .map_err(|e| {
                    self.location
                        .error(&format!("committing epoch {epoch} to"), e)
                })?;
            tracing::debug!(table = %self.location.given(), %epoch, version = finalized.version(), files = adds.len(), "committed an epoch to the Delta table");
            failpoint("delta-after-commit");
            table
                .update_state()
                .await
                .map_err(|e| self.location.error("reading", e))?;
            committed = true;
        }
        if committed {
            self.compact_after_commit(&table).await;
        }
        self.remember(&table).await;
        Ok(())
    }

    /// Merges small files when the sink compacts, after a commit that added files to `table`.
    /// Compaction changes no data: when it fails (another writer removed a file it merges),
    /// the table stays as the epochs left it and the next commit tries again.
    pub(crate) async fn compact_after_commit(&self, table: &DeltaTable) {
        if let Some(compaction) = self.compaction
            && let Err(e) = compact(table, &self.location, compaction).await
        {
            tracing::warn!(table = %self.location.given(), error = %e, "compacting the Delta table failed; the next epoch tries again");
        }
    }

    /// Commits files without a transaction id: the end of a run without checkpoints.
    ///
    /// # Errors
    /// External errors when the commit fails.
    pub(crate) async fn commit_unversioned(&self, adds: Vec<Add>) -> Result<()> {
        if adds.is_empty() {
            return Ok(());
        }
        let table = self.newest().await?;
        let snapshot = table
            .snapshot()
            .map_err(|e| self.location.error("reading", e))?;
        let partition_by = snapshot.metadata().partition_columns().to_vec();
        let operation = DeltaOperation::Write {
            mode: SaveMode::Append,
            partition_by: (!partition_by.is_empty()).then_some(partition_by),
            predicate: None,
        };
        CommitBuilder::from(CommitProperties::default())
            .with_actions(adds.into_iter().map(Action::Add).collect())
            .build(Some(snapshot), table.log_store(), operation)
            .await
            .map_err(|e| self.location.error("committing to", e))?;
        Ok(())
    }

    /// The table at its newest version: the one the last commit left, updated with the log
    /// entries after it, or read afresh.
    ///
    /// # Errors
    /// External errors when it cannot be read, or is gone.
    pub(crate) async fn newest(&self) -> Result<DeltaTable> {
        let mut cached = self.newest.lock().await;
        if let Some(table) = cached.as_mut() {
            match table.update_state().await {
                Ok(()) => return Ok(table.clone()),
                Err(e) => {
                    tracing::info!(table = %self.location.given(), error = %e, "reading the Delta table's new log entries failed; reading the table afresh");
                }
            }
        }
        let table = self.open().await?;
        *cached = Some(table.clone());
        Ok(table)
    }

    /// Keeps `table` (as a commit left it) for the next [`TableCommitter::newest`].
    pub(crate) async fn remember(&self, table: &DeltaTable) {
        *self.newest.lock().await = Some(table.clone());
    }

    async fn open(&self) -> Result<DeltaTable> {
        self.location.open(None).await?.ok_or_else(|| {
            self.location
                .error("committing to", "there is no table (it was removed)")
        })
    }

    /// The newest epoch the table holds a commit of for `app_id`.
    pub(crate) async fn transaction_version(
        &self,
        table: &DeltaTable,
        app_id: &str,
    ) -> Result<Option<i64>> {
        let snapshot = table
            .snapshot()
            .map_err(|e| self.location.error("reading", e))?;
        snapshot
            .transaction_version(table.log_store().as_ref(), app_id)
            .await
            .map_err(|e| self.location.error("reading the transactions of", e))
    }
}
