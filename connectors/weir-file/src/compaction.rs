//! Compaction of the file sink's small files (`auto_compaction`, with checkpoints; Parquet).
//!
//! A writer in epoch mode closes its part file at every pre-commit, so a short checkpoint
//! interval makes one small file per epoch. With compaction the small files of an epoch (those
//! under half the target size) are not given final names: they stay staged in the subtask's
//! `_staging` directory and the writer carries them on in the pre-commit of every following
//! epoch ([`crate::carry::Carry`]), until their bytes reach the target (`compaction_file_size`, by default
//! `bytes_per_file`) or the oldest of them has waited `rollover_interval`. That epoch's
//! pre-commit marks the carry for merging; its `commit_epoch` reads the staged files and
//! writes their rows into one Parquet file (input row groups kept whole where they fit), staged
//! below `_staging/{sink}-{subtask}/merged/`, publishes it with create-only semantics as
//! `part-{sink}-{subtask:05}-e{last:010}-m{first:010}.parquet` (`first` is the epoch of the
//! oldest input, `last` the epoch of the transaction) and deletes the inputs.
//!
//! Exactly once: the merged file's name is deterministic and published create-only, so a
//! repeated commit finds it and only deletes the inputs left over (fail points
//! `file-mid-merge` and `file-after-merge` stop a run before and after the publication). Recovery and the final epoch
//! of a bounded job publish through [`weir_api::PreparedSink::commit_final`], which also merges
//! a carry not marked for merging when no later transaction carries it on: the restored run's
//! writers start afresh. A recovery's cleanup (`abort_uncommitted`) keeps every file a
//! transaction in `keep` carries. Withdrawing the epochs after one inside a published merged
//! file's range is refused ([`check_withdraw`]): its inputs are gone and its rows cannot be
//! split by epoch.

use crate::carry::{CarriedFile, Carry};
use crate::epoch::{SinkSubtask, StagedFile, Transaction, delete_if_present, publish_file};
use crate::location::{FileLocation, store_error};
use crate::options::{FileFormat, FileSinkOptions, ParquetCompression};
use crate::part_file::{Encoding, PartFile};
use crate::rolling::{DEFAULT_ROLLOVER_INTERVAL, due};
use futures::TryStreamExt;
use object_store::ObjectStoreExt;
use std::collections::HashSet;
use std::time::Instant;
use weir_api::failpoint::failpoint;
use weir_api::{DurationMs, Error, Result};

/// The directory below a subtask's staging directory where merged files are written.
const MERGE_DIR: &str = "merged";

/// A writer's carried files (epoch mode with `auto_compaction`).
#[derive(Debug)]
pub(crate) struct Carrier {
    /// Bytes a merged file aims at.
    target: u64,
    /// The longest the oldest carried file waits.
    interval: DurationMs,
    files: Vec<CarriedFile>,
    /// When the oldest carried file was carried first.
    since: Option<Instant>,
}

impl Carrier {
    /// The carrier of a writer with `options`, `None` without `auto_compaction`.
    pub(crate) fn new(options: &FileSinkOptions) -> Option<Self> {
        options.auto_compaction.then(|| Carrier {
            target: options
                .compaction_file_size
                .unwrap_or(options.bytes_per_file),
            interval: options
                .rollover_interval
                .unwrap_or(DEFAULT_ROLLOVER_INTERVAL),
            files: Vec::new(),
            since: None,
        })
    }

    /// Takes the small ones of the files (staged name, size) closed in `epoch` into the carry
    /// and returns the others (published as they are) with the transaction's carry.
    pub(crate) fn carry(
        &mut self,
        owner: &SinkSubtask,
        epoch: u64,
        closed: Vec<(String, u64)>,
        extension: &str,
    ) -> (Vec<(String, u64)>, Option<Carry>) {
        let (small, large): (Vec<_>, Vec<_>) = closed
            .into_iter()
            .partition(|(_, size)| *size < self.target.div_ceil(2));
        if !small.is_empty() && self.since.is_none() {
            self.since = Some(Instant::now());
        }
        self.files
            .extend(small.into_iter().map(|(staged, size)| CarriedFile {
                staged,
                size,
                epoch,
            }));
        let Some(first) = self.files.first().map(|f| f.epoch) else {
            return (large, None);
        };
        let bytes: u64 = self.files.iter().map(|f| f.size).sum();
        let merge = bytes >= self.target || self.since.is_some_and(|t| due(t, self.interval));
        let final_name = owner.merged_name(first, epoch, extension);
        let carry = Carry {
            files: if merge {
                self.since = None;
                std::mem::take(&mut self.files)
            } else {
                self.files.clone()
            },
            merge,
            merging: format!("{}/{MERGE_DIR}/{final_name}", owner.staging()),
            final_name,
        };
        (large, Some(carry))
    }
}

/// How merged files are encoded.
#[derive(Debug, Clone, Copy)]
pub(crate) struct MergeSettings {
    /// The sink's Parquet codec.
    pub(crate) compression: ParquetCompression,
    /// Bytes buffered before a multipart upload.
    pub(crate) upload_bytes: usize,
}

/// Merges and publishes the carries of `txs` (one subtask's, in epoch order) that are due:
/// those marked for merging, and when `last` (the writer's last transactions) every carry no
/// later transaction of `txs` carries on.
///
/// # Errors
/// External errors from the store or Parquet; a non-retryable external error when an input
/// is gone and the merged file does not exist.
pub(crate) async fn commit(
    location: &FileLocation,
    txs: &[Transaction],
    settings: MergeSettings,
    last: bool,
) -> Result<()> {
    for (i, tx) in txs.iter().enumerate() {
        let Some(carry) = &tx.compaction else {
            continue;
        };
        let later: HashSet<&str> = txs[i + 1..]
            .iter()
            .filter_map(|t| t.compaction.as_ref())
            .flat_map(|c| c.files.iter().map(|f| f.staged.as_str()))
            .collect();
        let carried_on = carry
            .files
            .iter()
            .any(|f| later.contains(f.staged.as_str()));
        if carry.merge || (last && !carried_on) {
            publish(location, carry, settings).await?;
        }
    }
    Ok(())
}

/// Merges `carry` into its final file unless that exists, then deletes the inputs.
async fn publish(location: &FileLocation, carry: &Carry, settings: MergeSettings) -> Result<()> {
    if carry.files.is_empty() {
        return Ok(());
    }
    let store = location.store();
    let target = location.child(&carry.final_name)?;
    let final_id = location.display(&carry.final_name);
    match store.head(&target).await {
        // Merged and published before (a repeated commit): only the inputs may be left.
        Ok(_) => return delete_inputs(location, carry).await,
        Err(object_store::Error::NotFound { .. }) => {}
        Err(e) => return Err(store_error(format!("checking `{final_id}`"), e)),
    }
    let size = write_merged(location, carry, settings).await?;
    failpoint("file-mid-merge");
    let merged = StagedFile {
        staged: carry.merging.clone(),
        final_name: carry.final_name.clone(),
        size,
    };
    publish_file(location, &merged).await?;
    failpoint("file-after-merge");
    tracing::debug!(file = %final_id, inputs = carry.files.len(), bytes = size, "published merged file");
    delete_inputs(location, carry).await
}

/// Writes the rows of `carry`'s files, in order, into its `merging` file; returns its size.
async fn write_merged(
    location: &FileLocation,
    carry: &Carry,
    settings: MergeSettings,
) -> Result<u64> {
    let store = location.store();
    let merging_id = location.display(&carry.merging);
    let mut out: Option<PartFile> = None;
    for file in &carry.files {
        let path = location.child(&file.staged)?;
        let id = location.display(&file.staged);
        match store.head(&path).await {
            Ok(_) => {}
            Err(object_store::Error::NotFound { .. }) => {
                return Err(Error::external(
                    "object store",
                    format!("merging into `{}`", location.display(&carry.final_name)),
                    format!(
                        "the staged file `{id}` is gone and the merged file does not exist; \
                         the output of epoch {} is lost",
                        file.epoch
                    ),
                    false,
                ));
            }
            Err(e) => return Err(store_error(format!("checking `{id}`"), e)),
        }
        let builder =
            crate::parquet_reader::parquet_builder(store.clone(), path, &id, false).await?;
        let groups: Vec<(u64, u64)> = builder
            .metadata()
            .row_groups()
            .iter()
            .map(|g| {
                (
                    u64::try_from(g.num_rows()).unwrap_or(0),
                    u64::try_from(g.total_byte_size()).unwrap_or(0),
                )
            })
            .collect();
        let part = match &mut out {
            Some(part) => part,
            None => out.insert(PartFile::create(
                store.clone(),
                location.child(&carry.merging)?,
                merging_id.clone(),
                Encoding {
                    format: FileFormat::Parquet,
                    compression: settings.compression,
                    explicit_nulls: false,
                },
                builder.schema(),
                settings.upload_bytes,
            )?),
        };
        let read_error = |e| Error::external("parquet", format!("reading `{id}`"), e, false);
        let mut stream = builder.build().map_err(read_error)?;
        let mut groups = groups.into_iter();
        let mut left = 0u64;
        while let Some(batch) = stream.try_next().await.map_err(read_error)? {
            // At an input row group's first batch: end the output's row group first when the
            // input's would not fit in it, so it stays whole.
            while left == 0 {
                let Some((rows, bytes)) = groups.next() else {
                    break;
                };
                left = rows;
                part.fit_row_group(rows, bytes).await?;
            }
            left = left.saturating_sub(batch.num_rows() as u64);
            part.write(&batch).await?;
        }
    }
    let Some(part) = out else {
        return Ok(0);
    };
    part.publish().await?;
    let path = location.child(&carry.merging)?;
    match store.head(&path).await {
        Ok(meta) => Ok(meta.size),
        Err(e) => Err(store_error(format!("checking `{merging_id}`"), e)),
    }
}

/// Deletes a published carry's inputs and anything left of its merging file.
async fn delete_inputs(location: &FileLocation, carry: &Carry) -> Result<()> {
    let store = location.store();
    for staged in carry
        .files
        .iter()
        .map(|f| f.staged.as_str())
        .chain([carry.merging.as_str()])
    {
        let path = location.child(staged)?;
        delete_if_present(store.as_ref(), &path, &location.display(staged)).await?;
    }
    Ok(())
}

/// The first epoch of a merged file's name (`…-e{last}-m{first}.{ext}`) of `sink`, with its
/// last epoch; `None` for every other name.
pub(crate) fn merged_range(sink: &SinkSubtask, name: &str) -> Option<(u64, u64)> {
    let (_, last) = sink.parse_final_name(name)?;
    let stem = name.split('.').next()?;
    let first = stem.rsplit('-').next()?.strip_prefix('m')?.parse().ok()?;
    Some((first, last))
}

/// Refuses to withdraw the epochs after `epoch` when one of `names` (the sink directory's) is a
/// merged file of `sink` holding rows of both `epoch` or before and of a later epoch: its
/// inputs are gone, so neither keeping nor deleting it is exactly-once.
///
/// # Errors
/// A non-retryable external error naming the file and the epochs to restore instead.
pub(crate) fn check_withdraw<'a>(
    location: &FileLocation,
    sink: &SinkSubtask,
    names: impl Iterator<Item = &'a str>,
    epoch: u64,
) -> Result<()> {
    for name in names {
        let Some((first, last)) = merged_range(sink, name) else {
            continue;
        };
        if first <= epoch && epoch < last {
            return Err(Error::external(
                "file sink",
                format!("withdrawing the output of the epochs after {epoch}"),
                format!(
                    "the merged file `{}` holds the rows of epochs {first} to {last} \
                     (auto-compaction), so restoring epoch {epoch} would lose or repeat some of \
                     them; restore epoch {last} or later, or one before {first}",
                    location.display(name)
                ),
                false,
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "compaction_tests.rs"]
mod tests;
