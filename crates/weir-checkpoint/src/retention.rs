//! Retention (docs/checkpoints.md, "Retention"): keep the newest N checkpoints of one namespace
//! and every savepoint, delete the rest and the segments no manifest references, and all but the
//! newest attempt objects.

use crate::error::{CheckpointError, CheckpointResult};
use crate::fencing::KEPT_ATTEMPTS;
use crate::layout;
use crate::manifest::EpochManifest;
use crate::store::{CONCURRENCY, CheckpointStore};
use futures::{StreamExt, TryStreamExt};
use object_store::path::Path as ObjectPath;
use object_store::{ObjectMeta, ObjectStoreExt};
use std::collections::{BTreeMap, BTreeSet};
use weir_api::Epoch;

/// What [`CheckpointStore::retain`] kept and deleted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RetentionReport {
    /// Epochs whose manifest was kept: the newest checkpoints and every savepoint, oldest first.
    pub kept: Vec<Epoch>,
    /// Checkpoints deleted (manifest and segments), oldest first.
    pub deleted_checkpoints: Vec<Epoch>,
    /// Epoch directories without a manifest, older than the newest durable epoch, whose
    /// objects were deleted, oldest first.
    pub deleted_orphan_epochs: Vec<Epoch>,
    /// Every object deleted (full paths), sorted: manifests, segments, unreferenced segments
    /// of kept epochs, orphans, epoch log records of deleted epochs and old attempt objects.
    pub deleted_objects: Vec<String>,
    /// Manifests that could not be read (corrupt, another format): left alone with their
    /// segments, since retention cannot tell whether they are savepoints. With the reason.
    pub unreadable: Vec<(Epoch, String)>,
}

/// The objects of a namespace, grouped.
#[derive(Default)]
struct Inventory {
    epochs: BTreeMap<Epoch, Vec<ObjectPath>>,
    log_records: Vec<(Epoch, ObjectPath)>,
    /// Attempt objects, unsorted.
    attempts: Vec<(crate::AttemptId, ObjectPath)>,
}

impl CheckpointStore {
    /// Keeps the newest `keep` checkpoints of this namespace and every savepoint; deletes older
    /// checkpoints (the manifest first, so a crash midway leaves orphans, never a manifest
    /// without its segments), segments in kept epoch directories that their manifest does not
    /// reference, orphan epoch directories (no manifest, older than the newest durable epoch:
    /// failed snapshots), epoch log records older than the oldest kept checkpoint (except
    /// those of savepoints), and attempt objects older than the newest 16 (the newest one
    /// fences older attempts; the directory itself is never removed). Epochs newer than the
    /// newest durable one may be in flight and are never touched, nor are unreadable
    /// manifests. Objects already gone are skipped, so a
    /// retention interrupted midway can simply run again.
    ///
    /// Only manifests that read back intact (or whose copy in the epoch log does) count
    /// towards `keep`; their segments are not looked for here.
    ///
    /// # Errors
    /// [`CheckpointError::InvalidArgument`] for `keep == 0` (that would delete the restore
    /// point); [`CheckpointError::ObjectStore`] when listing or deleting fails.
    pub async fn retain(&self, keep: usize) -> CheckpointResult<RetentionReport> {
        if keep == 0 {
            return Err(CheckpointError::InvalidArgument {
                message: "retention must keep at least 1 checkpoint".to_owned(),
            });
        }
        let inventory = self.inventory().await?;
        let mut report = RetentionReport::default();
        let mut manifests: BTreeMap<Epoch, EpochManifest> = BTreeMap::new();
        for (epoch, objects) in &inventory.epochs {
            let location = self.manifest_location(*epoch);
            if !objects.contains(&location) {
                continue;
            }
            // A damaged manifest whose copy in the epoch log is intact counts like an intact
            // one: recovery restores it from the copy.
            match self.read_manifest_or_copy(*epoch).await {
                Ok((m, _)) => {
                    manifests.insert(*epoch, m);
                }
                Err(e)
                    if e.is_unusable_manifest()
                        || matches!(e, CheckpointError::FormatVersion { .. }) =>
                {
                    report.unreadable.push((*epoch, e.to_string()))
                }
                Err(e) => return Err(e),
            }
        }
        let newest_durable = manifests.keys().next_back().copied();
        let kept_checkpoints: BTreeSet<Epoch> = manifests
            .iter()
            .rev()
            .filter(|(_, m)| !m.is_savepoint())
            .take(keep)
            .map(|(e, _)| *e)
            .collect();
        let savepoints: BTreeSet<Epoch> = manifests
            .iter()
            .filter(|(_, m)| m.is_savepoint())
            .map(|(e, _)| *e)
            .collect();

        let mut manifests_to_delete = Vec::new();
        let mut objects_to_delete = Vec::new();
        for (epoch, objects) in &inventory.epochs {
            let manifest_location = self.manifest_location(*epoch);
            match manifests.get(epoch) {
                Some(_) if kept_checkpoints.contains(epoch) || savepoints.contains(epoch) => {
                    report.kept.push(*epoch);
                    let mut referenced = manifests[epoch]
                        .segments()
                        .map(|d| self.location(&d.path))
                        .collect::<CheckpointResult<BTreeSet<ObjectPath>>>()?;
                    referenced.insert(manifest_location);
                    objects_to_delete
                        .extend(objects.iter().filter(|o| !referenced.contains(*o)).cloned());
                }
                Some(_) => {
                    report.deleted_checkpoints.push(*epoch);
                    manifests_to_delete.push(manifest_location.clone());
                    objects_to_delete
                        .extend(objects.iter().filter(|o| **o != manifest_location).cloned());
                }
                None if objects.contains(&manifest_location) => {} // unreadable: left alone
                None if newest_durable.is_some_and(|n| *epoch < n) => {
                    report.deleted_orphan_epochs.push(*epoch);
                    objects_to_delete.extend(objects.iter().cloned());
                }
                None => {} // newer than the newest durable epoch: maybe in flight
            }
        }
        let unreadable: BTreeSet<Epoch> = report.unreadable.iter().map(|(e, _)| *e).collect();
        let mut records_to_delete = Vec::new();
        if let Some(oldest_kept) = kept_checkpoints.first() {
            records_to_delete.extend(
                inventory
                    .log_records
                    .iter()
                    .filter(|(e, _)| {
                        e < oldest_kept && !savepoints.contains(e) && !unreadable.contains(e)
                    })
                    .map(|(_, p)| p.clone()),
            );
        }

        let mut attempts = inventory.attempts;
        attempts.sort();
        let old_attempts = attempts.len().saturating_sub(KEPT_ATTEMPTS);
        let attempts_to_delete: Vec<ObjectPath> =
            attempts.drain(..old_attempts).map(|(_, p)| p).collect();

        // Manifests first: once they are gone the epochs are no restore points, and anything
        // left behind by a crash below is an orphan the next run deletes.
        for batch in [
            manifests_to_delete,
            objects_to_delete,
            records_to_delete,
            attempts_to_delete,
        ] {
            self.delete_all(&batch).await?;
            report
                .deleted_objects
                .extend(batch.iter().map(ToString::to_string));
        }
        report.deleted_objects.sort();
        Ok(report)
    }

    /// Every object of the namespace, grouped by epoch directory and log; anything else (not
    /// Weir's) is ignored.
    async fn inventory(&self) -> CheckpointResult<Inventory> {
        let prefix = layout::join(self.base(), &layout::namespace_path(self.namespace()));
        let objects: Vec<ObjectMeta> = self
            .object_store()
            .list(Some(&prefix))
            .try_collect()
            .await
            .map_err(|e| CheckpointError::store("listing checkpoints under", &prefix, e))?;
        let mut inventory = Inventory::default();
        for meta in objects {
            let Some(relative) = layout::strip_base(&prefix, &meta.location) else {
                continue;
            };
            let parts: Vec<_> = relative.parts().collect();
            let Some(first) = parts.first() else {
                continue;
            };
            if let Some(epoch) = layout::parse_epoch(first.as_ref()) {
                inventory
                    .epochs
                    .entry(epoch)
                    .or_default()
                    .push(meta.location);
            } else if first.as_ref() == layout::LOG_DIR
                && parts.len() == 2
                && let Some((epoch, _)) = layout::parse_log_record_name(parts[1].as_ref())
            {
                inventory.log_records.push((epoch, meta.location));
            } else if first.as_ref() == layout::ATTEMPTS_DIR
                && parts.len() == 2
                && let Some(attempt) = layout::parse_attempt_name(parts[1].as_ref())
            {
                inventory.attempts.push((attempt, meta.location));
            }
        }
        Ok(inventory)
    }

    /// Deletes `locations`, 16 at a time; objects already gone count as deleted.
    async fn delete_all(&self, locations: &[ObjectPath]) -> CheckpointResult<()> {
        // Owned paths: see `CheckpointStore::verify_segments`.
        futures::stream::iter(locations.to_vec())
            .map(|location| async move {
                match self.object_store().delete(&location).await {
                    Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
                    Err(e) => Err(CheckpointError::store("deleting", &location, e)),
                }
            })
            .buffer_unordered(CONCURRENCY)
            .try_collect::<Vec<()>>()
            .await
            .map(|_| ())
    }
}
