//! The `file` sink: each subtask writes rolling part files into one directory, each published
//! atomically (see [`crate::part_file`]).

use crate::compaction::{Carrier, MergeSettings};
use crate::epoch::{self, SinkSubtask, StagedFile, Transaction};
use crate::location::{FileLocation, store_error};
use crate::options::{FileFormat, FileSinkOptions};
use crate::part_file::{PartFile, writable_csv_type};
use crate::rolling::{DEFAULT_ROLLOVER_INTERVAL, due};
use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use object_store::ObjectStoreExt;
use object_store::registry::{DefaultObjectStoreRegistry, ObjectStoreRegistry};
use std::sync::Arc;
use std::time::Instant;
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
        }))
    }
}

/// A prepared `file` sink.
#[derive(Debug)]
struct FileSink {
    location: FileLocation,
    options: FileSinkOptions,
    schema: SchemaRef,
    upload_bytes: usize,
}

#[async_trait::async_trait]
impl PreparedSink for FileSink {
    fn capabilities(&self) -> Vec<SinkCapability> {
        // With checkpoints, part files are staged per epoch and published after the epoch is
        // durable (epoch.rs); without, the runtime treats the sink as at-least-once.
        vec![SinkCapability::StagedAtomicCommit]
    }

    fn describe(&self) -> String {
        match self.options.envelope {
            Some(envelope) => format!("file: {} {}", envelope.sql_name(), self.location.given()),
            None => format!("file: {} {}", self.options.format, self.location.given()),
        }
    }

    fn accepts_changes(&self) -> bool {
        self.options.envelope.is_some()
    }

    fn touches(&self) -> Vec<weir_api::Touch> {
        self.location.touches()
    }

    async fn create_writer(&self, ctx: &TaskContext) -> Result<Box<dyn SinkWriter>> {
        Ok(Box::new(FileSinkWriter {
            location: self.location.clone(),
            options: self.options.clone(),
            schema: self.schema.clone(),
            upload_bytes: self.upload_bytes,
            subtask: ctx.subtask.0,
            owner: SinkSubtask::of(ctx),
            unique: uuid::Uuid::new_v4().to_string(),
            seq: 0,
            current: None,
            opened: None,
            epochs: None,
            carrier: None,
        }))
    }

    async fn commit_epoch(
        &self,
        task: &TaskContext,
        transactions: &[serde_json::Value],
    ) -> Result<()> {
        let merge = (self.merge_settings(), false);
        epoch::commit(&self.location, &SinkSubtask::of(task), transactions, merge).await
    }

    async fn commit_final(
        &self,
        task: &TaskContext,
        transactions: &[serde_json::Value],
    ) -> Result<()> {
        // The writer's last transactions: carried small files are merged now (compaction.rs).
        let merge = (self.merge_settings(), true);
        epoch::commit(&self.location, &SinkSubtask::of(task), transactions, merge).await
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
        epoch::withdraw_after(&self.location, &SinkSubtask::of(task), epoch.0).await
    }
}

impl FileSink {
    fn merge_settings(&self) -> MergeSettings {
        MergeSettings {
            compression: self.options.compression.unwrap_or_default(),
            upload_bytes: self.upload_bytes,
        }
    }
}

/// A writer's epoch mode (see [`crate::epoch`]).
#[derive(Debug, Default)]
struct EpochStaging {
    /// The last pre-committed epoch.
    last: Option<u64>,
    /// Files closed into staging since the last pre-commit, in order.
    closed: Vec<String>,
}

/// One subtask's writer: at most one open part file at a time.
#[derive(Debug)]
struct FileSinkWriter {
    location: FileLocation,
    options: FileSinkOptions,
    schema: SchemaRef,
    upload_bytes: usize,
    subtask: u32,
    /// Whose staged and final files this writer's are (epoch mode).
    owner: SinkSubtask,
    /// Distinguishes this writer's files from those of earlier runs of the same subtask.
    unique: String,
    /// Sequence number of the next part file.
    seq: u32,
    /// The open part file and, in epoch mode, its staged name.
    current: Option<(PartFile, Option<String>)>,
    /// When the open part file was opened (the rollover interval).
    opened: Option<Instant>,
    /// `Some` in epoch mode: part files are staged and published by `commit_epoch`.
    epochs: Option<EpochStaging>,
    /// `Some` in epoch mode with `auto_compaction`: the small files carried on.
    carrier: Option<Carrier>,
}

impl FileSinkWriter {
    fn open_part(&mut self) -> Result<(PartFile, Option<String>)> {
        let extension = self.options.format.extension();
        let (name, staged) = if self.epochs.is_some() {
            let name = self.owner.staged_name(&self.unique, self.seq, extension);
            (name.clone(), Some(name))
        } else {
            let name = format!(
                "part-{:05}-{:05}-{}.{}",
                self.subtask, self.seq, self.unique, extension
            );
            (name, None)
        };
        self.seq += 1;
        let part = PartFile::create(
            self.location.store().clone(),
            self.location.child(&name)?,
            self.location.display(&name),
            crate::part_file::Encoding {
                format: self.options.format,
                compression: self.options.compression.unwrap_or_default(),
                explicit_nulls: self.options.envelope.is_some(),
            },
            &self.schema,
            self.upload_bytes,
        )?;
        Ok((part, staged))
    }

    /// Completes the open part file: published under its final name, or in epoch mode closed
    /// into staging (still invisible) and remembered for the next pre-commit.
    async fn publish(&mut self) -> Result<()> {
        match self.current.take() {
            Some((part, None)) => part.publish().await,
            Some((part, Some(staged))) => {
                part.publish().await?;
                if let Some(epochs) = &mut self.epochs {
                    epochs.closed.push(staged);
                }
                Ok(())
            }
            None => Ok(()),
        }
    }
}

/// The size of the staged file `staged` (relative to `location`).
async fn staged_size(location: &FileLocation, staged: &str) -> Result<u64> {
    let path = location.child(staged)?;
    match location.store().head(&path).await {
        Ok(meta) => Ok(meta.size),
        Err(e) => Err(store_error(
            format!("checking `{}`", location.display(staged)),
            e,
        )),
    }
}

#[async_trait::async_trait]
impl SinkWriter for FileSinkWriter {
    async fn write_batch(&mut self, batch: RecordBatch) -> Result<()> {
        let batch = match self.options.envelope {
            Some(envelope) => envelope.wrap(&batch, &self.schema)?,
            None => batch,
        };
        let mut offset = 0;
        while offset < batch.num_rows() {
            let part = match &mut self.current {
                Some((part, _)) => part,
                None => {
                    let part = self.open_part()?;
                    self.opened = Some(Instant::now());
                    &mut self.current.insert(part).0
                }
            };
            let room = self
                .options
                .rows_per_file
                .saturating_sub(part.rows())
                .max(1);
            let take = usize::try_from(room)
                .unwrap_or(usize::MAX)
                .min(batch.num_rows() - offset);
            if let Err(e) = part.write(&batch.slice(offset, take)).await {
                if let Some((part, _)) = self.current.take() {
                    // The write already failed; a failing cleanup adds nothing to report.
                    let _ = part.abort().await;
                }
                return Err(e);
            }
            offset += take;
            let interval = self
                .options
                .rollover_interval
                .unwrap_or(DEFAULT_ROLLOVER_INTERVAL);
            if part.rows() >= self.options.rows_per_file
                || part.bytes() >= self.options.bytes_per_file
                || self.opened.is_some_and(|t| due(t, interval))
            {
                self.publish().await?;
            }
        }
        Ok(())
    }

    async fn finish(&mut self) -> Result<()> {
        if let Some(epochs) = &self.epochs
            && (self.current.is_some() || !epochs.closed.is_empty())
        {
            return Err(Error::Internal(format!(
                "file sink subtask {} finished with rows written after its last pre-commit; \
                 in epoch mode the final epoch must be pre-committed before finish",
                self.subtask
            )));
        }
        // In epoch mode everything is pre-committed: `commit_epoch` publishes it.
        self.publish().await
    }

    async fn abort(&mut self) -> Result<()> {
        let current = match self.current.take() {
            Some((part, _)) => part.abort().await,
            None => Ok(()),
        };
        // Files closed since the last pre-commit belong to no transaction; pre-committed ones
        // stay for recovery to publish or delete.
        if let Some(epochs) = &mut self.epochs {
            for staged in std::mem::take(&mut epochs.closed) {
                let path = self.location.child(&staged)?;
                match self.location.store().delete(&path).await {
                    Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                    Err(e) => {
                        return Err(store_error(
                            format!("discarding `{}`", self.location.display(&staged)),
                            e,
                        ));
                    }
                }
            }
        }
        current
    }

    async fn begin_epochs(&mut self) -> Result<()> {
        if self.seq > 0 || self.current.is_some() {
            return Err(Error::Internal(format!(
                "file sink subtask {}: epoch mode must begin before the first row",
                self.subtask
            )));
        }
        self.epochs.get_or_insert_with(EpochStaging::default);
        self.carrier = Carrier::new(&self.options);
        Ok(())
    }

    async fn pre_commit(&mut self, epoch: Epoch) -> Result<serde_json::Value> {
        let Some(last) = self.epochs.as_ref().map(|e| e.last) else {
            return Err(Error::Internal(format!(
                "file sink subtask {}: pre-commit of epoch {epoch} without begin_epochs",
                self.subtask
            )));
        };
        if last.is_some_and(|last| epoch.0 <= last) {
            return Err(Error::Internal(format!(
                "file sink subtask {}: pre-commit of epoch {epoch} after epoch {}",
                self.subtask,
                last.unwrap_or_default()
            )));
        }
        self.publish().await?;
        let closed = self
            .epochs
            .as_mut()
            .map(|e| std::mem::take(&mut e.closed))
            .unwrap_or_default();
        let extension = self.options.format.extension();
        let mut sized = Vec::with_capacity(closed.len());
        for staged in closed {
            let size = staged_size(&self.location, &staged).await?;
            sized.push((staged, size));
        }
        // With compaction, small files are carried on instead of published (compaction.rs).
        let (sized, compaction) = match &mut self.carrier {
            Some(carrier) => carrier.carry(&self.owner, epoch.0, sized, extension),
            None => (sized, None),
        };
        let files = sized
            .into_iter()
            .enumerate()
            .map(|(seq, (staged, size))| StagedFile {
                size,
                final_name: self.owner.final_name(epoch.0, seq, extension),
                staged,
            })
            .collect();
        if let Some(epochs) = &mut self.epochs {
            epochs.last = Some(epoch.0);
        }
        let tx = Transaction {
            epoch: epoch.0,
            subtask: self.subtask,
            files,
            compaction,
        };
        serde_json::to_value(&tx)
            .map_err(|e| Error::Internal(format!("encoding a file sink pre-commit: {e}")))
    }
}

#[cfg(test)]
#[path = "sink_tests.rs"]
mod tests;
