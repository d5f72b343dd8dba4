//! The `file` sink: each subtask writes rolling part files into one directory (or its
//! partition directories), each published atomically (see [`crate::part_file`]).

use crate::compaction::MergeSettings;
use crate::epoch::{self, SinkSubtask};
use crate::location::{FileLocation, store_error};
use crate::options::{FileFormat, FileSinkOptions};
use crate::part_file::writable_csv_type;
use crate::partition::SinkPartitioning;
use crate::partition_commit::{CommitSettings, PartitionTracker};
use crate::sink_writer::FileSinkWriter;
use arrow::datatypes::SchemaRef;
use object_store::ObjectStoreExt;
use object_store::registry::{DefaultObjectStoreRegistry, ObjectStoreRegistry};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use weir_api::{
    ConnectorSpec, Epoch, Error, PreparedSink, Reach, Result, SinkCapability, SinkFactory,
    SinkWriter, TaskContext, decode_options,
};

/// Bytes a part file buffers in memory before it switches to a streaming multipart upload; also
/// the size of each uploaded part (above S3's 5 MiB minimum).
const DEFAULT_UPLOAD_BYTES: usize = 8 * 1024 * 1024;

/// Creates `file` sinks: each subtask writes part files
/// `part-{subtask:05}-{seq:05}-{unique}.{ext}` into a directory of the local file system or an
/// object store, publishing each file atomically once it is complete. A writer put into epoch
/// mode (`begin_epochs`) stages its files and publishes them only through epoch transactions
/// (see `docs/connectors/file.md`, "Epoch transactions").
///
/// Share the [`ObjectStoreRegistry`] with [`crate::FileSourceFactory`] so both resolve URLs to the
/// same stores.
#[derive(Debug, Clone)]
pub struct FileSinkFactory {
    registry: Arc<dyn ObjectStoreRegistry>,
    upload_bytes: usize,
}

impl FileSinkFactory {
    /// A factory whose registry creates stores from URLs on first use.
    pub fn new() -> Self {
        Self::with_registry(Arc::new(DefaultObjectStoreRegistry::new()))
    }

    /// A factory that resolves URLs through `registry`.
    pub fn with_registry(registry: Arc<dyn ObjectStoreRegistry>) -> Self {
        Self {
            registry,
            upload_bytes: DEFAULT_UPLOAD_BYTES,
        }
    }

    /// Buffers `bytes` per file before uploading in parts, so tests can exercise multipart
    /// staging with little data.
    #[cfg(test)]
    pub(crate) fn with_upload_bytes(mut self, bytes: usize) -> Self {
        self.upload_bytes = bytes;
        self
    }
}

impl Default for FileSinkFactory {
    fn default() -> Self {
        Self::new()
    }
}

#[async_trait::async_trait]
impl SinkFactory for FileSinkFactory {
    async fn prepare(
        &self,
        spec: ConnectorSpec<'_>,
        input_schema: SchemaRef,
    ) -> Result<Arc<dyn PreparedSink>> {
        let options: FileSinkOptions = decode_options(spec.options, spec.options_path)?;
        let options_path = spec.options_path;
        options.validate(options_path)?;
        let path_option = format!("{options_path}.path");
        let cwd = std::env::current_dir().map_err(|e| {
            Error::external("file system", "reading the current directory", e, false)
        })?;
        let location = FileLocation::resolve_with(
            &options.path,
            self.registry.as_ref(),
            options.s3.as_ref(),
            &cwd,
            &path_option,
        )?;
        if location.has_glob() {
            return Err(Error::config(
                path_option,
                "a sink writes into one directory; the path cannot be a glob",
            ));
        }
        let partitioning = match options.partition_by.as_slice() {
            [] => None,
            columns => Some(SinkPartitioning::new(columns, &input_schema, options_path)?),
        };
        let commit = match (&partitioning, options.partition_commit_policy) {
            (Some(p), Some(_)) => Some(CommitSettings::new(
                options.partition_commit_trigger.unwrap_or_default(),
                options.partition_commit_delay,
                options.partition_success_file_name.as_deref(),
                options.partition_time_pattern.as_deref(),
                &p.columns,
                options_path,
            )?),
            _ => None,
        };
        let input_schema = match &partitioning {
            Some(p) => p.data_schema.clone(),
            None => input_schema,
        };
        if options.format == FileFormat::Csv
            && let Some(field) = input_schema
                .fields()
                .iter()
                .find(|f| !writable_csv_type(f.data_type()))
        {
            return Err(Error::schema(
                format!("file sink at {options_path}"),
                format!(
                    "column `{}` has type {}, which CSV cannot hold; use json or parquet",
                    field.name(),
                    field.data_type()
                ),
            ));
        }
        if spec.reach == Reach::Full && !location.base().as_ref().is_empty() {
            match location.store().head(location.base()).await {
                Ok(_) => {
                    return Err(Error::config(
                        path_option,
                        format!("`{}` is a file; the sink needs a directory", options.path),
                    ));
                }
                Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(store_error(format!("checking `{}`", options.path), e)),
            }
        }
        let written = match options.envelope {
            Some(envelope) => envelope.schema(&input_schema),
            None => input_schema,
        };
        Ok(Arc::new(FileSink {
            location,
            options,
            schema: written,
            upload_bytes: self.upload_bytes,
            partitioning,
            commit,
            inherited: Mutex::new(BTreeMap::new()),
        }))
    }
}

/// A prepared `file` sink.
#[derive(Debug)]
struct FileSink {
    location: FileLocation,
    options: FileSinkOptions,
    /// The schema of the files (without partition columns).
    schema: SchemaRef,
    upload_bytes: usize,
    partitioning: Option<SinkPartitioning>,
    /// Partition commits, when a commit policy is set.
    commit: Option<CommitSettings>,
    /// Per subtask, the partitions its last committed transaction left pending: a writer created
    /// after a recovery commit adopts those of the subtasks it takes over.
    inherited: Mutex<BTreeMap<u32, Vec<String>>>,
}

impl FileSink {
    /// Publishes `transactions` of the subtask `task` names; `last` for its writer's last ones.
    async fn commit_transactions(
        &self,
        task: &TaskContext,
        transactions: &[serde_json::Value],
        last: bool,
    ) -> Result<()> {
        let success_file = self.commit.as_ref().map(|c| c.success_file.as_str());
        let owner = SinkSubtask::of(task);
        let merge = MergeSettings {
            compression: self.options.compression.unwrap_or_default(),
            upload_bytes: self.upload_bytes,
        };
        let committed = crate::epoch_commit::commit(
            &self.location,
            &owner,
            transactions,
            success_file,
            (merge, last),
        )
        .await?;
        if self.commit.is_some()
            && let Some(last) = committed.last()
            && let Ok(mut inherited) = self.inherited.lock()
        {
            inherited.insert(last.subtask, last.pending.clone());
        }
        Ok(())
    }
}

#[async_trait::async_trait]
impl PreparedSink for FileSink {
    fn capabilities(&self) -> Vec<SinkCapability> {
        // With checkpoints, part files are staged per epoch and published after the epoch is
        // durable (epoch.rs); without, the runtime treats the sink as at-least-once.
        vec![SinkCapability::StagedAtomicCommit]
    }

    fn describe(&self) -> String {
        let mut line = match self.options.envelope {
            Some(envelope) => format!("file: {} {}", envelope.sql_name(), self.location.given()),
            None => format!("file: {} {}", self.options.format, self.location.given()),
        };
        if let Some(p) = &self.partitioning {
            line.push_str(&format!("; partitioned by {}", p.columns.join(", ")));
        }
        if let Some(c) = &self.commit {
            line.push_str(&format!("; commits partitions with {}", c.success_file));
        }
        line
    }

    fn accepts_changes(&self) -> bool {
        self.options.envelope.is_some()
    }

    fn touches(&self) -> Vec<weir_api::Touch> {
        self.location.touches()
    }

    async fn create_writer(&self, ctx: &TaskContext) -> Result<Box<dyn SinkWriter>> {
        let mut tracker = self.commit.clone().map(PartitionTracker::new);
        if let Some(tracker) = &mut tracker {
            let parallelism = ctx.parallelism.max(1);
            let adopted: Vec<String> = {
                let mut inherited = self
                    .inherited
                    .lock()
                    .map_err(|_| Error::Internal("file sink: a poisoned lock".into()))?;
                let mine: Vec<u32> = inherited
                    .keys()
                    .copied()
                    .filter(|s| s % parallelism == ctx.subtask.0)
                    .collect();
                mine.into_iter()
                    .filter_map(|s| inherited.remove(&s))
                    .flatten()
                    .collect()
            };
            for partition in adopted {
                tracker.adopt(&partition)?;
            }
        }
        Ok(Box::new(FileSinkWriter::new(
            self.location.clone(),
            self.options.clone(),
            self.schema.clone(),
            self.upload_bytes,
            ctx,
            self.partitioning.clone(),
            tracker,
        )))
    }

    async fn commit_epoch(
        &self,
        task: &TaskContext,
        transactions: &[serde_json::Value],
    ) -> Result<()> {
        self.commit_transactions(task, transactions, false).await
    }

    async fn commit_final(
        &self,
        task: &TaskContext,
        transactions: &[serde_json::Value],
    ) -> Result<()> {
        // The writer's last transactions: carried small files are merged now (compaction.rs).
        self.commit_transactions(task, transactions, true).await
    }

    async fn abort_uncommitted(
        &self,
        task: &TaskContext,
        keep: &[serde_json::Value],
    ) -> Result<()> {
        epoch::abort_uncommitted(&self.location, &SinkSubtask::of(task), keep).await
    }

    fn can_withdraw(&self) -> bool {
        // Final names carry their epoch (epoch.rs): the files of an epoch can be found again.
        true
    }

    async fn withdraw_after(&self, task: &TaskContext, epoch: Epoch) -> Result<Vec<String>> {
        crate::epoch_commit::withdraw_after(&self.location, &SinkSubtask::of(task), epoch.0).await
    }
}

#[cfg(test)]
#[path = "sink_tests.rs"]
mod tests;
