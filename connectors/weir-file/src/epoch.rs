//! The file sink's epoch transactions (for checkpoints): staged part files, their pre-commit
//! record, and the idempotent publish and recovery cleanup.
//!
//! In epoch mode a writer's part files are written below
//! `{path}/_staging/{sink}-{subtask:05}/{unique}/` (the file source skips names starting with
//! `_`). `{sink}` is 8 hex digits of a stable hash of `{job}:{operator}`, so several sinks (or
//! jobs) can write into one directory without touching each other's files. `pre_commit(N)`
//! closes the open part file and names every file staged since the last pre-commit with its
//! deterministic final name `part-{sink}-{subtask:05}-e{N:010}-{seq:05}.{ext}` (`seq` counts the
//! epoch's files from 0); a partitioned sink's final names lie in their partition directory
//! (`dt=2026-12-02/part-….parquet`). The pre-commit value lists `{staged, final, size}` per
//! file, paths relative to `{path}`, and with partition commits the partitions to commit after
//! the files (`partitions`) and those still waiting (`pending`). Publishing renames each staged
//! file to its final name with create-only semantics, so a repeat is a no-op; a success file
//! written again is the same empty file.
//!
//! Final names carry their epoch, so a restore from an older epoch than the newest durable one
//! can withdraw (delete) the published files of the epochs it passes over before the replay
//! publishes their rows again ([`withdraw_after`]).
//!
//! With `auto_compaction` a transaction also carries small staged files toward a merged file
//! (see [`crate::compaction`]).

use crate::location::{FileLocation, store_error};
use futures::TryStreamExt;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use weir_api::{Error, Result, TaskContext};

/// The directory below the sink's `path` that holds staged files.
pub(crate) const STAGING_DIR: &str = "_staging";

/// One subtask of one file sink: whose staged and final files are whose.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SinkSubtask {
    /// 8 hex digits of the FNV-1a hash of `{job}:{operator}`: stable across runs and builds.
    sink: String,
    /// The subtask's index.
    pub(crate) subtask: u32,
}

impl SinkSubtask {
    /// The sink subtask `ctx` runs.
    pub(crate) fn of(ctx: &TaskContext) -> Self {
        let id = format!("{}:{}", ctx.job_id, ctx.operator_id);
        let hash = id.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
        });
        SinkSubtask {
            sink: format!("{:08x}", hash >> 32),
            subtask: ctx.subtask.0,
        }
    }

    /// Its staging directory, relative to the sink's `path`.
    pub(crate) fn staging(&self) -> String {
        format!("{STAGING_DIR}/{}-{:05}", self.sink, self.subtask)
    }

    /// The staged name (relative to the sink's `path`) of a writer's `seq`-th file.
    pub(crate) fn staged_name(&self, unique: &str, seq: u32, extension: &str) -> String {
        format!("{}/{unique}/{seq:05}.{extension}", self.staging())
    }

    /// The subtask and epoch of a final name of this sink (any subtask), or `None` for every
    /// other name: the inverse of [`SinkSubtask::final_name`], whose numbers are zero-padded to
    /// a least width and may be longer (an epoch past 9,999,999,999).
    pub(crate) fn parse_final_name(&self, name: &str) -> Option<(u32, u64)> {
        let rest = name
            .strip_prefix("part-")?
            .strip_prefix(self.sink.as_str())?
            .strip_prefix('-')?;
        let (stem, extension) = rest.split_once('.')?;
        let mut fields = stem.split('-');
        fn number(field: Option<&str>, width: usize) -> Option<&str> {
            field.filter(|f| f.len() >= width && f.bytes().all(|b| b.is_ascii_digit()))
        }
        let subtask = number(fields.next(), 5)?;
        let epoch = number(fields.next()?.strip_prefix('e'), 10)?;
        // A sequence number, or `m{first epoch}` for a merged file (compaction.rs).
        let third = fields.next()?;
        number(Some(third.strip_prefix('m').unwrap_or(third)), 5)?;
        if fields.next().is_some() || extension.is_empty() {
            return None;
        }
        Some((subtask.parse().ok()?, epoch.parse().ok()?))
    }

    /// The final name of its `seq`-th file of `epoch`.
    pub(crate) fn final_name(&self, epoch: u64, seq: usize, extension: &str) -> String {
        format!(
            "part-{}-{:05}-e{epoch:010}-{seq:05}.{extension}",
            self.sink, self.subtask
        )
    }

    /// The final name of its merged file of the epochs `first` to `last` (compaction.rs).
    pub(crate) fn merged_name(&self, first: u64, last: u64, extension: &str) -> String {
        format!(
            "part-{}-{:05}-e{last:010}-m{first:010}.{extension}",
            self.sink, self.subtask
        )
    }
}

/// One subtask's pre-commit of one epoch: the JSON that goes into the manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Transaction {
    /// The epoch the files belong to.
    pub(crate) epoch: u64,
    /// The subtask that wrote them.
    pub(crate) subtask: u32,
    /// The staged files, in order.
    pub(crate) files: Vec<StagedFile>,
    /// With `auto_compaction`: the small files carried toward a merged file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) compaction: Option<crate::carry::Carry>,
    /// Partition directories to commit once the files are published.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) partitions: Vec<String>,
    /// Partition directories written and not committed yet (a restored run commits them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) pending: Vec<String>,
}

/// Whether `relative` is a path below the sink's directory that is not hidden from readers:
/// no empty, `.` or `..` segment, and a last segment not starting with `.` or `_`.
fn is_visible_path(relative: &str) -> bool {
    let segments: Vec<&str> = relative.split('/').collect();
    !segments
        .iter()
        .any(|s| s.is_empty() || *s == "." || *s == "..")
        && segments
            .last()
            .is_some_and(|last| !last.starts_with(['.', '_']))
}

/// One staged file of a transaction.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct StagedFile {
    /// Where it is staged, relative to the sink's `path`.
    pub(crate) staged: String,
    /// Its final name, relative to the sink's `path`.
    #[serde(rename = "final")]
    pub(crate) final_name: String,
    /// Its size in bytes.
    pub(crate) size: u64,
}

impl Transaction {
    /// Parses and checks a pre-commit value of `owner`: staged files must lie in its staging
    /// directory and final names (and partitions) below the sink's directory.
    ///
    /// # Errors
    /// [`Error::Internal`] when the value is not a pre-commit of this sink's subtask.
    pub(crate) fn parse(value: &serde_json::Value, owner: &SinkSubtask) -> Result<Self> {
        let subtask = owner.subtask;
        let tx: Transaction = serde_json::from_value(value.clone())
            .map_err(|e| Error::Internal(format!("not a file sink pre-commit: {e}: {value}")))?;
        if tx.subtask != subtask {
            return Err(Error::Internal(format!(
                "file sink pre-commit of epoch {} belongs to subtask {}, not {subtask}",
                tx.epoch, tx.subtask
            )));
        }
        let staging = format!("{}/", owner.staging());
        for file in &tx.files {
            let staged_ok = file.staged.starts_with(&staging)
                && !file.staged.split('/').any(|p| p.is_empty() || p == "..");
            let final_ok =
                is_visible_path(&file.final_name) && !file.final_name.starts_with(STAGING_DIR);
            if !staged_ok || !final_ok {
                return Err(Error::Internal(format!(
                    "file sink pre-commit of epoch {} names `{}` -> `{}`, outside the sink's \
                     staging directory or output directory",
                    tx.epoch, file.staged, file.final_name
                )));
            }
        }
        if let Some(carry) = &tx.compaction {
            carry.check(&staging, tx.epoch)?;
        }
        if let Some(bad) = tx
            .partitions
            .iter()
            .chain(&tx.pending)
            .find(|p| !is_visible_path(p))
        {
            return Err(Error::Internal(format!(
                "file sink pre-commit of epoch {} names the partition `{bad}`, outside the \
                 sink's output directory",
                tx.epoch
            )));
        }
        Ok(tx)
    }
}

/// Publishes one staged file; a no-op when it was published before.
pub(crate) async fn publish_file(location: &FileLocation, file: &StagedFile) -> Result<()> {
    let store = location.store();
    let staged = location.child(&file.staged)?;
    let target = location.child(&file.final_name)?;
    let staged_id = location.display(&file.staged);
    let final_id = location.display(&file.final_name);
    let context = || format!("publishing `{staged_id}` as `{final_id}`");
    match store.rename_if_not_exists(&staged, &target).await {
        Ok(()) => Ok(()),
        Err(object_store::Error::AlreadyExists { .. }) => {
            check_published(store.as_ref(), &target, file, &staged_id, &final_id).await?;
            // Published before (the rename's delete did not run): drop the leftover.
            delete_if_present(store.as_ref(), &staged, &staged_id).await
        }
        Err(object_store::Error::NotFound { .. }) => {
            check_published(store.as_ref(), &target, file, &staged_id, &final_id).await
        }
        Err(
            object_store::Error::NotSupported { .. } | object_store::Error::NotImplemented { .. },
        ) => {
            // The store cannot copy create-only: check, then copy and delete. The final name is
            // deterministic and the content the same, so a race with another publisher of the
            // same transaction writes the same bytes.
            match store.head(&target).await {
                Ok(_) => {
                    check_published(store.as_ref(), &target, file, &staged_id, &final_id).await?;
                    return delete_if_present(store.as_ref(), &staged, &staged_id).await;
                }
                Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(store_error(context(), e)),
            }
            match store.copy(&staged, &target).await {
                Ok(()) => delete_if_present(store.as_ref(), &staged, &staged_id).await,
                Err(object_store::Error::NotFound { .. }) => {
                    check_published(store.as_ref(), &target, file, &staged_id, &final_id).await
                }
                Err(e) => Err(store_error(context(), e)),
            }
        }
        Err(e) => Err(store_error(context(), e)),
    }
}

/// Succeeds when the final file exists with the staged file's size.
async fn check_published(
    store: &dyn ObjectStore,
    target: &Path,
    file: &StagedFile,
    staged_id: &str,
    final_id: &str,
) -> Result<()> {
    match store.head(target).await {
        Ok(meta) if meta.size == file.size => Ok(()),
        Ok(meta) => Err(Error::external(
            "object store",
            format!("publishing `{staged_id}` as `{final_id}`"),
            format!(
                "`{final_id}` already exists with {} bytes, but the staged file had {}",
                meta.size, file.size
            ),
            false,
        )),
        Err(object_store::Error::NotFound { .. }) => Err(Error::external(
            "object store",
            format!("publishing `{staged_id}` as `{final_id}`"),
            format!(
                "the staged file `{staged_id}` is gone and `{final_id}` does not exist; the \
                 epoch's output is lost"
            ),
            false,
        )),
        Err(e) => Err(store_error(format!("checking `{final_id}`"), e)),
    }
}

pub(crate) async fn delete_if_present(
    store: &dyn ObjectStore,
    path: &Path,
    id: &str,
) -> Result<()> {
    match store.delete(path).await {
        Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
        Err(e) => Err(store_error(format!("deleting `{id}`"), e)),
    }
}

/// Recovery: deletes every staged file of `owner` that no transaction in `keep` lists; other
/// sinks' staged files in the same directory are left alone.
///
/// # Errors
/// [`Error::Internal`] for a malformed `keep` value; external errors from the store.
pub(crate) async fn abort_uncommitted(
    location: &FileLocation,
    owner: &SinkSubtask,
    keep: &[serde_json::Value],
) -> Result<()> {
    let mut kept = HashSet::new();
    for value in keep {
        let tx = Transaction::parse(value, owner)?;
        let carried = tx.compaction.iter().flat_map(|c| &c.files);
        for staged in tx
            .files
            .iter()
            .map(|f| &f.staged)
            .chain(carried.map(|f| &f.staged))
        {
            kept.insert(location.child(staged)?);
        }
    }
    let dir = owner.staging();
    let prefix = location.child(&dir)?;
    let store = location.store();
    let listed = match store.list(Some(&prefix)).try_collect::<Vec<_>>().await {
        Ok(listed) => listed,
        Err(object_store::Error::NotFound { .. }) => Vec::new(),
        Err(e) => {
            return Err(store_error(
                format!("listing `{}`", location.display(&dir)),
                e,
            ));
        }
    };
    let mut deleted = 0usize;
    for meta in listed {
        if kept.contains(&meta.location) {
            continue;
        }
        delete_if_present(store.as_ref(), &meta.location, meta.location.as_ref()).await?;
        deleted += 1;
    }
    tracing::debug!(
        subtask = owner.subtask,
        deleted,
        "deleted uncommitted staged files"
    );
    Ok(())
}
