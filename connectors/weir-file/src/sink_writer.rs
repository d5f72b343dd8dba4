//! One subtask's writer of the `file` sink: an open part file per partition directory it writes
//! (one, in the sink's directory, when the sink is not partitioned), rolled by rows and bytes,
//! the least recently written one completed when too many are open.

use crate::compaction::Carrier;
use crate::epoch::{SinkSubtask, StagedFile, Transaction};
use crate::location::{FileLocation, store_error};
use crate::options::{DEFAULT_MAX_OPEN_PARTITIONS, FileSinkOptions};
use crate::part_file::PartFile;
use crate::partition::SinkPartitioning;
use crate::partition_commit::{PartitionTracker, write_success_files};
use crate::rolling::{DEFAULT_ROLLOVER_INTERVAL, due};
use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use object_store::ObjectStoreExt;
use std::collections::HashMap;
use std::time::Instant;
use weir_api::{Epoch, Error, Result, SinkWriter, TaskContext, Watermark};

/// A writer's epoch mode (see [`crate::epoch`]).
#[derive(Debug, Default)]
struct EpochStaging {
    /// The last pre-committed epoch.
    last: Option<u64>,
    /// Files closed into staging since the last pre-commit, in order: staged name and partition
    /// directory (empty: the sink's directory).
    closed: Vec<(String, String)>,
}

/// An open part file.
#[derive(Debug)]
struct OpenFile {
    part: PartFile,
    /// Its staged name, in epoch mode.
    staged: Option<String>,
    /// When it was last written (the writer's counter), to close the least recently used.
    used: u64,
    /// When it was opened (the rollover interval).
    opened: Instant,
}

/// One subtask's writer.
#[derive(Debug)]
pub(crate) struct FileSinkWriter {
    location: FileLocation,
    options: FileSinkOptions,
    /// The schema of the files (without partition columns).
    schema: SchemaRef,
    upload_bytes: usize,
    subtask: u32,
    /// Whose staged and final files this writer's are (epoch mode).
    owner: SinkSubtask,
    /// Distinguishes this writer's files from those of earlier runs of the same subtask.
    unique: String,
    /// Sequence number of the next part file.
    seq: u32,
    partitioning: Option<SinkPartitioning>,
    /// The open part files by partition directory (`""`: the sink's directory).
    open: HashMap<String, OpenFile>,
    /// Counts writes, for `OpenFile::used`.
    clock: u64,
    /// `Some` in epoch mode: part files are staged and published by `commit_epoch`.
    epochs: Option<EpochStaging>,
    /// Partitions to commit, when the sink commits partitions.
    commits: Option<PartitionTracker>,
    /// `Some` in epoch mode with `auto_compaction`: the small files carried on.
    carrier: Option<Carrier>,
}

impl FileSinkWriter {
    /// The writer of the subtask `ctx` runs.
    pub(crate) fn new(
        location: FileLocation,
        options: FileSinkOptions,
        schema: SchemaRef,
        upload_bytes: usize,
        ctx: &TaskContext,
        partitioning: Option<SinkPartitioning>,
        commits: Option<PartitionTracker>,
    ) -> Self {
        Self {
            location,
            options,
            schema,
            upload_bytes,
            subtask: ctx.subtask.0,
            owner: SinkSubtask::of(ctx),
            unique: uuid::Uuid::new_v4().to_string(),
            seq: 0,
            partitioning,
            open: HashMap::new(),
            clock: 0,
            epochs: None,
            commits,
            carrier: None,
        }
    }

    /// `name` in the partition directory `directory`.
    fn in_directory(directory: &str, name: &str) -> String {
        if directory.is_empty() {
            name.to_owned()
        } else {
            format!("{directory}/{name}")
        }
    }

    fn open_part(&mut self, directory: &str) -> Result<OpenFile> {
        let extension = self.options.format.extension();
        let (name, staged) = if self.epochs.is_some() {
            let name = self.owner.staged_name(&self.unique, self.seq, extension);
            (name.clone(), Some(name))
        } else {
            let name = format!(
                "part-{:05}-{:05}-{}.{}",
                self.subtask, self.seq, self.unique, extension
            );
            (Self::in_directory(directory, &name), None)
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
        Ok(OpenFile {
            part,
            staged,
            used: 0,
            opened: Instant::now(),
        })
    }

    /// Completes the open part file of `directory`: published under its final name, or in
    /// epoch mode closed into staging (still invisible) and remembered for the next pre-commit.
    async fn close(&mut self, directory: &str) -> Result<()> {
        let Some(file) = self.open.remove(directory) else {
            return Ok(());
        };
        file.part.publish().await?;
        if let (Some(staged), Some(epochs)) = (file.staged, &mut self.epochs) {
            epochs.closed.push((staged, directory.to_owned()));
        }
        Ok(())
    }

    /// Completes every open part file, in directory order.
    async fn close_all(&mut self) -> Result<()> {
        let mut directories: Vec<String> = self.open.keys().cloned().collect();
        directories.sort();
        for directory in directories {
            self.close(&directory).await?;
        }
        Ok(())
    }

    /// Writes `batch` (in the files' schema) to the part files of `directory`, rolling them.
    async fn write_rows(&mut self, directory: &str, batch: RecordBatch) -> Result<()> {
        let max_open = self
            .options
            .max_open_partitions
            .unwrap_or(DEFAULT_MAX_OPEN_PARTITIONS);
        let mut offset = 0;
        while offset < batch.num_rows() {
            if !self.open.contains_key(directory) {
                if self.open.len() >= max_open
                    && let Some(oldest) = self
                        .open
                        .iter()
                        .min_by_key(|(_, f)| f.used)
                        .map(|(d, _)| d.clone())
                {
                    self.close(&oldest).await?;
                }
                let file = self.open_part(directory)?;
                self.open.insert(directory.to_owned(), file);
            }
            self.clock += 1;
            let Some(file) = self.open.get_mut(directory) else {
                return Err(Error::Internal("file sink: no open part file".into()));
            };
            file.used = self.clock;
            let part = &mut file.part;
            let room = self
                .options
                .rows_per_file
                .saturating_sub(part.rows())
                .max(1);
            let take = usize::try_from(room)
                .unwrap_or(usize::MAX)
                .min(batch.num_rows() - offset);
            if let Err(e) = part.write(&batch.slice(offset, take)).await {
                if let Some(file) = self.open.remove(directory) {
                    // The write already failed; a failing cleanup adds nothing to report.
                    let _ = file.part.abort().await;
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
                || due(file.opened, interval)
            {
                self.close(directory).await?;
            }
        }
        Ok(())
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
        if batch.num_rows() == 0 {
            return Ok(());
        }
        let Some(partitioning) = &self.partitioning else {
            let batch = match self.options.envelope {
                Some(envelope) => envelope.wrap(&batch, &self.schema)?,
                None => batch,
            };
            return self.write_rows("", batch).await;
        };
        for part in partitioning.split(&batch)? {
            if let Some(commits) = &mut self.commits {
                commits.wrote(&part.directory, &part.values)?;
            }
            self.write_rows(&part.directory, part.rows).await?;
        }
        Ok(())
    }

    async fn on_watermark(&mut self, watermark: Watermark) -> Result<()> {
        if let Some(commits) = &mut self.commits {
            commits.watermark(watermark.0.0);
        }
        Ok(())
    }

    async fn finish(&mut self) -> Result<()> {
        if let Some(epochs) = &self.epochs {
            if !self.open.is_empty() || !epochs.closed.is_empty() {
                return Err(Error::Internal(format!(
                    "file sink subtask {} finished with rows written after its last pre-commit; \
                     in epoch mode the final epoch must be pre-committed before finish",
                    self.subtask
                )));
            }
            // Everything is pre-committed: `commit_epoch` publishes it.
            return Ok(());
        }
        self.close_all().await?;
        if let Some(commits) = &mut self.commits {
            let all = commits.take_all();
            write_success_files(&self.location, &all, commits.success_file()).await?;
        }
        Ok(())
    }

    async fn abort(&mut self) -> Result<()> {
        let mut result = Ok(());
        for (_, file) in self.open.drain() {
            let aborted = file.part.abort().await;
            if result.is_ok() {
                result = aborted;
            }
        }
        // Files closed since the last pre-commit belong to no transaction; pre-committed ones
        // stay for recovery to publish or delete.
        if let Some(epochs) = &mut self.epochs {
            for (staged, _) in std::mem::take(&mut epochs.closed) {
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
        result
    }

    async fn begin_epochs(&mut self) -> Result<()> {
        if self.seq > 0 || !self.open.is_empty() {
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
        self.close_all().await?;
        let closed = self
            .epochs
            .as_mut()
            .map(|e| std::mem::take(&mut e.closed))
            .unwrap_or_default();
        let extension = self.options.format.extension();
        let mut sized = Vec::with_capacity(closed.len());
        for (staged, directory) in closed {
            let size = staged_size(&self.location, &staged).await?;
            sized.push((staged, directory, size));
        }
        // With compaction (never with partitions, options.rs), small files are carried on
        // instead of published (compaction.rs).
        let (sized, compaction) = match &mut self.carrier {
            Some(carrier) => {
                let unpartitioned = sized.into_iter().map(|(s, _, size)| (s, size)).collect();
                let (rest, carry) = carrier.carry(&self.owner, epoch.0, unpartitioned, extension);
                let rest = rest.into_iter().map(|(s, size)| (s, String::new(), size));
                (rest.collect(), carry)
            }
            None => (sized, None),
        };
        let mut files = Vec::with_capacity(sized.len());
        for (seq, (staged, directory, size)) in sized.into_iter().enumerate() {
            files.push(StagedFile {
                size,
                final_name: Self::in_directory(
                    &directory,
                    &self.owner.final_name(epoch.0, seq, extension),
                ),
                staged,
            });
        }
        if let Some(epochs) = &mut self.epochs {
            epochs.last = Some(epoch.0);
        }
        let (partitions, pending) = match &mut self.commits {
            Some(commits) => (commits.take_ready(), commits.pending()),
            None => (Vec::new(), Vec::new()),
        };
        let tx = Transaction {
            epoch: epoch.0,
            subtask: self.subtask,
            files,
            compaction,
            partitions,
            pending,
        };
        serde_json::to_value(&tx)
            .map_err(|e| Error::Internal(format!("encoding a file sink pre-commit: {e}")))
    }
}
