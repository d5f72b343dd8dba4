//! [`CheckpointStore`]: publishing, listing, reading and choosing epoch manifests of one
//! checkpoint namespace in an object store.
//!
//! # Atomic publication
//!
//! A manifest is written with one `put_opts` in [`PutMode::Create`]: the store writes the whole
//! object or nothing, and only if no object exists at the path. How each store does it:
//!
//! - `LocalFileSystem` (object_store 0.13.2, `src/local.rs`, `put_opts`): writes the bytes to a
//!   staging file `{path}#{n}` created with `create_new` next to the target, then
//!   `std::fs::hard_link(staging, path)` — `link(2)` fails with `EEXIST` when the target exists,
//!   which becomes `Error::AlreadyExists` — and removes the staging file. Readers never see a
//!   partial manifest, and of two racing publishers exactly one wins. It does **not** `fsync`
//!   the file or the directory (no `sync_all` anywhere in `local.rs`): after a power loss or OS
//!   crash the manifest and the segments may be lost or empty even though the put returned.
//!   [`CheckpointStore::with_local_root`] makes publication `fsync` them itself.
//!   A crash between writing and linking leaves a `manifest.json#1` staging file, which
//!   `LocalFileSystem` listings hide. The file system must support hard links.
//! - `InMemory` (`src/memory.rs`): the entry is inserted under the store's write lock only if
//!   the key is vacant, else `AlreadyExists`.
//! - Amazon S3 (`src/aws/mod.rs`): `If-None-Match: *` (the default `S3ConditionalPut::ETagMatch`;
//!   a 304/412 answer becomes `AlreadyExists`); with conditional put disabled the put fails with
//!   `NotImplemented` and nothing is published. GCS: `x-goog-if-generation-match: 0`. Azure:
//!   `If-None-Match: *`.
//!
//! The manifest key is the one commit point: segments are written first, and an
//! epoch without a manifest does not exist for recovery.

use crate::epoch_log::{EpochLog, EpochState};
use crate::error::{CheckpointError, CheckpointResult, SegmentIssue};
use crate::layout;
use crate::local_sync;
use crate::manifest::{EpochKind, EpochManifest};
use crate::problem::ManifestProblem;
use crate::validate::{ExpectedCheckpoint, invalid_if_any, structural_problems};
use futures::{StreamExt, TryStreamExt};
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};
use std::path::PathBuf;
use std::sync::Arc;
use weir_api::Epoch;
use weir_plan::sha256_hex;

/// Requests in flight at once for HEADs of segments and manifests.
pub(crate) const CONCURRENCY: usize = 16;

/// What [`CheckpointStore::publish_manifest`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PublishOutcome {
    /// The manifest was written: the epoch is durable.
    Published,
    /// The identical manifest was already published (a retry): nothing was written.
    AlreadyPublished,
}

/// A manifest [`CheckpointStore::latest_durable`] passed over, and why.
#[derive(Debug)]
pub struct SkippedManifest {
    /// Its epoch.
    pub epoch: Epoch,
    /// Its full path.
    pub path: String,
    /// Why it cannot be restored.
    pub reason: CheckpointError,
    /// What the epoch log says about the epoch, if anything.
    pub log_state: Option<EpochState>,
}

/// A manifest a restore can start from ([`CheckpointStore::restore_point`]).
#[derive(Debug)]
pub struct RestorePoint {
    /// The manifest.
    pub manifest: EpochManifest,
    /// Why the manifest object could not be used when the manifest came from its copy in the
    /// epoch log; `None` when the object was intact.
    pub manifest_damage: Option<CheckpointError>,
}

/// A state segment whose bytes are not what its descriptor records
/// ([`CheckpointStore::damaged_segments`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DamagedSegment {
    /// Its full object path.
    pub path: String,
    /// Its path relative to the store's base, as the descriptor records it.
    pub relative_path: String,
    /// The SHA-256 its descriptor records.
    pub recorded: String,
    /// The SHA-256 of its bytes; `None` when the object does not exist.
    pub actual: Option<String>,
}

/// The manifest to restore, and the newer ones that could not be used.
#[derive(Debug)]
pub struct LatestDurable {
    /// The newest manifest that is intact, complete and matches the plan; `None` when there is
    /// none (a fresh start if `skipped` is empty, otherwise a decision for the operator).
    pub manifest: Option<EpochManifest>,
    /// When `manifest` came from its copy in the epoch log: why the manifest object could not
    /// be used. `None` when the object was intact.
    pub manifest_damage: Option<CheckpointError>,
    /// Newer manifests passed over, newest first.
    pub skipped: Vec<SkippedManifest>,
}

impl LatestDurable {
    /// Whether restoring [`LatestDurable::manifest`] may repeat output: a skipped manifest was
    /// published, so its sinks may have committed transactions whose records the restored
    /// sources will read again. Exactly-once holds only if `false`.
    pub fn may_repeat_output(&self) -> bool {
        !self.skipped.is_empty()
    }
}

/// The manifests, segments and epoch log of one checkpoint namespace under a base path of an
/// object store: the same store and base as the namespace's `weir_state::SegmentStore`.
#[derive(Debug, Clone)]
pub struct CheckpointStore {
    store: Arc<dyn ObjectStore>,
    base: ObjectPath,
    namespace: String,
    /// The root directory of `store` when it is a `LocalFileSystem`: publication `fsync`s.
    local_root: Option<PathBuf>,
}

impl CheckpointStore {
    /// The checkpoints of `namespace` under `base` (the empty path for the root).
    ///
    /// # Errors
    /// [`CheckpointError::InvalidArgument`] for an empty namespace.
    pub fn try_new(
        store: Arc<dyn ObjectStore>,
        base: ObjectPath,
        namespace: impl Into<String>,
    ) -> CheckpointResult<Self> {
        let namespace = namespace.into();
        if namespace.is_empty() {
            return Err(CheckpointError::InvalidArgument {
                message: "the checkpoint namespace must not be empty".to_owned(),
            });
        }
        Ok(Self {
            store,
            base,
            namespace,
            local_root: None,
        })
    }

    /// Declares that the object store is an `object_store::local::LocalFileSystem` rooted at
    /// `root` (the directory given to `LocalFileSystem::new_with_prefix`), so that
    /// publication is durable on a local file system (write, `fsync`, rename).
    /// `LocalFileSystem` never calls `fsync`; with a local root,
    /// [`CheckpointStore::publish_manifest`] itself
    ///
    /// 1. before publishing, `fsync`s every segment file the manifest references and every
    ///    directory from each file's up to `root` (so their directory entries are durable),
    ///    failing with [`CheckpointError::Io`] naming the file if one is missing or cannot be
    ///    synced — then nothing is published;
    /// 2. after the manifest is created (or found already published with the same bytes),
    ///    `fsync`s the manifest file and its directories the same way.
    ///
    /// The calls run on tokio's blocking thread pool, so publication then needs a tokio
    /// runtime. Object paths map to files as `LocalFileSystem` maps them: `root` joined with
    /// every (percent-encoded) path part. Without a local root nothing is synced, which is
    /// right for object stores that are durable when a put returns.
    #[must_use]
    pub fn with_local_root(self, root: PathBuf) -> Self {
        Self {
            local_root: Some(root),
            ..self
        }
    }

    /// The local root set by [`CheckpointStore::with_local_root`].
    pub fn local_root(&self) -> Option<&std::path::Path> {
        self.local_root.as_deref()
    }

    /// The checkpoint namespace.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The base path.
    pub fn base(&self) -> &ObjectPath {
        &self.base
    }

    /// The underlying object store.
    pub fn object_store(&self) -> &Arc<dyn ObjectStore> {
        &self.store
    }

    /// The full object path of the manifest of `epoch`.
    pub fn manifest_location(&self, epoch: Epoch) -> ObjectPath {
        layout::join(&self.base, &layout::manifest_path(&self.namespace, epoch))
    }

    /// The full object path of a path relative to the base (a segment descriptor's `path`,
    /// which is already percent-encoded: parsed, not encoded again).
    pub(crate) fn location(&self, relative: &str) -> CheckpointResult<ObjectPath> {
        let relative = ObjectPath::parse(relative).map_err(|e| {
            CheckpointError::corrupt(relative, format!("not a valid object path: {e}"))
        })?;
        Ok(layout::join(&self.base, &relative))
    }

    /// The epoch log of this namespace.
    pub fn epoch_log(&self) -> EpochLog {
        EpochLog::new(
            Arc::clone(&self.store),
            self.base.clone(),
            self.namespace.clone(),
        )
    }

    /// Checks that the manifest's attempt is not fenced ([`CheckpointStore::check_attempt`]),
    /// validates `manifest` against `expected` ([`ExpectedCheckpoint::validate`]) and publishes
    /// it atomically, create-if-absent. Publishing the identical manifest again is a no-op. Its
    /// segments must already be written; on an object store this does not look for them (that
    /// costs a request per segment, paid on recovery by [`CheckpointStore::latest_durable`]
    /// instead); with a [local root](CheckpointStore::with_local_root) it `fsync`s them.
    ///
    /// # Errors
    /// [`CheckpointError::Fenced`] when a newer attempt exists; [`CheckpointError::Invalid`]
    /// when the manifest belongs to another namespace or fails validation;
    /// [`CheckpointError::Io`] when a segment file cannot be synced (in these three cases
    /// nothing is written); [`CheckpointError::Conflict`] when another manifest is already
    /// published for the epoch; [`CheckpointError::ObjectStore`] when the store fails,
    /// including stores without create-if-absent (`NotImplemented`); [`CheckpointError::Io`]
    /// when the published manifest cannot be synced (it is published then, but maybe not
    /// durable: do not commit sinks on it).
    pub async fn publish_manifest(
        &self,
        manifest: &EpochManifest,
        expected: &ExpectedCheckpoint,
    ) -> CheckpointResult<PublishOutcome> {
        self.check_attempt(manifest.attempt_id).await?;
        let location = self.manifest_location(manifest.epoch);
        let path = location.to_string();
        let mut problems = Vec::new();
        if manifest.namespace != self.namespace {
            problems.push(ManifestProblem::Mismatch {
                field: "namespace".to_owned(),
                expected: self.namespace.clone(),
                found: manifest.namespace.clone(),
            });
        }
        problems.extend(expected.problems(manifest));
        invalid_if_any(&path, problems)?;
        let bytes = manifest.to_json()?;
        if let Some(root) = &self.local_root {
            let segments = manifest
                .segments()
                .map(|d| self.location(&d.path))
                .collect::<CheckpointResult<Vec<_>>>()?;
            local_sync::sync_files(root, segments, "syncing segment").await?;
        }
        let opts = PutOptions {
            mode: PutMode::Create,
            ..PutOptions::default()
        };
        match self
            .store
            .put_opts(&location, PutPayload::from(bytes.clone()), opts)
            .await
        {
            Ok(_) => {
                self.sync_manifest(location).await?;
                Ok(PublishOutcome::Published)
            }
            Err(object_store::Error::AlreadyExists { .. }) => {
                let existing = self
                    .get(&location, "reading the published manifest")
                    .await?;
                if existing == bytes {
                    // A retry after a crash between the put and the sync syncs now.
                    self.sync_manifest(location).await?;
                    Ok(PublishOutcome::AlreadyPublished)
                } else {
                    Err(CheckpointError::Conflict {
                        path,
                        differing: differing_fields(&existing, &bytes),
                    })
                }
            }
            Err(e) => Err(CheckpointError::store("publishing manifest", &location, e)),
        }
    }

    /// With a local root, `fsync`s the manifest at `location` and its directories.
    async fn sync_manifest(&self, location: ObjectPath) -> CheckpointResult<()> {
        match &self.local_root {
            Some(root) => local_sync::sync_files(root, vec![location], "syncing manifest").await,
            None => Ok(()),
        }
    }

    /// Epochs that have a manifest, oldest first (epoch directories without one are in flight
    /// or orphans).
    ///
    /// # Errors
    /// [`CheckpointError::ObjectStore`] when the store fails.
    pub async fn list_epochs(&self) -> CheckpointResult<Vec<Epoch>> {
        let prefix = layout::join(&self.base, &layout::namespace_path(&self.namespace));
        let listing = self
            .store
            .list_with_delimiter(Some(&prefix))
            .await
            .map_err(|e| CheckpointError::store("listing epochs under", &prefix, e))?;
        let candidates: Vec<Epoch> = listing
            .common_prefixes
            .iter()
            .filter_map(|p| p.filename().and_then(layout::parse_epoch))
            .collect();
        let heads = futures::stream::iter(candidates)
            .map(|epoch| async move {
                let location = self.manifest_location(epoch);
                match self.store.head(&location).await {
                    Ok(_) => Ok(Some(epoch)),
                    Err(object_store::Error::NotFound { .. }) => Ok(None),
                    Err(e) => Err(CheckpointError::store("looking for manifest", &location, e)),
                }
            })
            .buffer_unordered(CONCURRENCY);
        let mut epochs: Vec<Epoch> = heads
            .try_filter_map(|e| async move { Ok(e) })
            .try_collect()
            .await?;
        epochs.sort();
        Ok(epochs)
    }

    /// Epochs that were made durable, oldest first: those with a manifest
    /// ([`CheckpointStore::list_epochs`]) and those whose DURABLE epoch log record is there
    /// although the manifest object is gone ([`EpochLog::durable_epochs`]).
    ///
    /// # Errors
    /// [`CheckpointError::ObjectStore`] when the store fails.
    pub async fn published_epochs(&self) -> CheckpointResult<Vec<Epoch>> {
        let mut epochs = self.list_epochs().await?;
        epochs.extend(self.epoch_log().durable_epochs().await?);
        epochs.sort();
        epochs.dedup();
        Ok(epochs)
    }

    /// Reads the manifest of `epoch`: verifies its checksum and format, that it is where its
    /// namespace and epoch say, and that it is consistent on its own (no duplicates, segments
    /// at their stable paths). Validation against a plan is
    /// [`ExpectedCheckpoint::validate`].
    ///
    /// # Errors
    /// [`CheckpointError::ManifestNotFound`]; [`CheckpointError::Corrupt`],
    /// [`CheckpointError::Checksum`], [`CheckpointError::FormatVersion`] or
    /// [`CheckpointError::Invalid`] naming the file; [`CheckpointError::ObjectStore`].
    pub async fn read_manifest(&self, epoch: Epoch) -> CheckpointResult<EpochManifest> {
        let location = self.manifest_location(epoch);
        let path = location.to_string();
        let bytes = match self.store.get(&location).await {
            Ok(result) => result
                .bytes()
                .await
                .map_err(|e| CheckpointError::store("reading manifest", &location, e))?,
            Err(object_store::Error::NotFound { .. }) => {
                return Err(CheckpointError::ManifestNotFound { path });
            }
            Err(e) => return Err(CheckpointError::store("reading manifest", &location, e)),
        };
        self.parse_manifest(&bytes, epoch, &path)
    }

    /// Reads the second copy of the manifest of `epoch`, the one its DURABLE epoch log record
    /// carries ([`EpochRecord::manifest`](crate::EpochRecord::manifest)), checked exactly like
    /// [`CheckpointStore::read_manifest`] checks the manifest object. `Ok(None)` when there is
    /// no copy (no DURABLE record, or one written without a copy).
    ///
    /// # Errors
    /// [`CheckpointError::Corrupt`], [`CheckpointError::Checksum`],
    /// [`CheckpointError::FormatVersion`] or [`CheckpointError::Invalid`] naming the log record
    /// when the copy is damaged; [`CheckpointError::ObjectStore`].
    pub async fn read_manifest_copy(
        &self,
        epoch: Epoch,
    ) -> CheckpointResult<Option<EpochManifest>> {
        match self.epoch_log().manifest_copy(epoch).await? {
            Some((copy, path)) => self.parse_manifest(copy.as_bytes(), epoch, &path).map(Some),
            None => Ok(None),
        }
    }

    /// Verifies stored manifest bytes (read from `path`) as the manifest of `epoch`.
    fn parse_manifest(
        &self,
        bytes: &[u8],
        epoch: Epoch,
        path: &str,
    ) -> CheckpointResult<EpochManifest> {
        let manifest = EpochManifest::from_json(bytes, path)?;
        let mut problems = Vec::new();
        if manifest.namespace != self.namespace {
            problems.push(ManifestProblem::Mismatch {
                field: "namespace".to_owned(),
                expected: self.namespace.clone(),
                found: manifest.namespace.clone(),
            });
        }
        if manifest.epoch != epoch {
            problems.push(ManifestProblem::Mismatch {
                field: "epoch".to_owned(),
                expected: epoch.to_string(),
                found: manifest.epoch.to_string(),
            });
        }
        problems.extend(structural_problems(&manifest));
        invalid_if_any(path, problems)?;
        Ok(manifest)
    }

    /// The manifest of `epoch`, from the manifest object or, when that is damaged or gone
    /// (`ManifestNotFound`, `Corrupt`, `Checksum`), from the copy in the epoch log; with the
    /// object's error when the copy was used. When the copy is missing or damaged too, the
    /// object's error is returned.
    ///
    /// # Errors
    /// Those of [`CheckpointStore::read_manifest`]; [`CheckpointError::ObjectStore`] when
    /// reading the copy fails (a transient failure must not pick an older epoch).
    pub async fn read_manifest_or_copy(
        &self,
        epoch: Epoch,
    ) -> CheckpointResult<(EpochManifest, Option<CheckpointError>)> {
        match self.read_manifest(epoch).await {
            Ok(manifest) => Ok((manifest, None)),
            Err(
                damage @ (CheckpointError::ManifestNotFound { .. }
                | CheckpointError::Corrupt { .. }
                | CheckpointError::Checksum { .. }),
            ) => match self.read_manifest_copy(epoch).await {
                Ok(Some(copy)) => Ok((copy, Some(damage))),
                Ok(None) => Err(damage),
                Err(e @ CheckpointError::ObjectStore { .. }) => Err(e),
                Err(copy_damage) => Err(CheckpointError::CopyDamaged {
                    primary: Box::new(damage),
                    copy: Box::new(copy_damage),
                }),
            },
            Err(e) => Err(e),
        }
    }

    /// Downloads every segment of `segments` and compares its SHA-256 with the one its
    /// descriptor records: what a restore that failed uses to tell damaged state from other
    /// failures. Segments that are missing are reported with `actual: None`.
    ///
    /// # Errors
    /// [`CheckpointError::ObjectStore`] when the store fails otherwise.
    pub async fn damaged_segments(
        &self,
        segments: &[weir_state::SegmentDescriptor],
    ) -> CheckpointResult<Vec<DamagedSegment>> {
        let segments = segments.to_vec();
        let checks = futures::stream::iter(segments)
            .map(|d| async move {
                let location = self.location(&d.path)?;
                let damaged = |actual| DamagedSegment {
                    path: location.to_string(),
                    relative_path: d.path.clone(),
                    recorded: d.sha256.clone(),
                    actual,
                };
                let bytes = match self.store.get(&location).await {
                    Ok(result) => result.bytes().await,
                    Err(e) => Err(e),
                };
                match bytes {
                    Ok(bytes) => {
                        let actual = sha256_hex(&bytes);
                        Ok((actual != d.sha256).then(|| damaged(Some(actual))))
                    }
                    Err(object_store::Error::NotFound { .. }) => Ok(Some(damaged(None))),
                    Err(e) => Err(CheckpointError::store("reading segment", &location, e)),
                }
            })
            .buffer_unordered(CONCURRENCY);
        let mut damaged: Vec<DamagedSegment> = checks
            .try_filter_map(|d| async move { Ok(d) })
            .try_collect()
            .await?;
        damaged.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(damaged)
    }

    /// Checks with one HEAD per segment (16 at a time) that every segment `manifest`
    /// references exists with the size its descriptor records. Contents are verified by
    /// `weir_state::SegmentStore::restore`, which checks each SHA-256 as it downloads.
    ///
    /// # Errors
    /// [`CheckpointError::MissingSegments`] listing every missing or wrongly sized segment;
    /// [`CheckpointError::ObjectStore`] when the store fails otherwise.
    pub async fn verify_segments(&self, manifest: &EpochManifest) -> CheckpointResult<()> {
        // Owned items: a closure over borrowed ones makes the future's `Send` depend on a
        // higher-ranked lifetime, which callers in spawned tasks cannot prove.
        let segments: Vec<weir_state::SegmentDescriptor> = manifest.segments().cloned().collect();
        let heads = futures::stream::iter(segments)
            .map(|d| async move {
                let location = self.location(&d.path)?;
                let issue = |found_bytes| SegmentIssue {
                    path: location.to_string(),
                    expected_bytes: d.bytes,
                    found_bytes,
                };
                match self.store.head(&location).await {
                    Ok(meta) if meta.size == d.bytes => Ok(None),
                    Ok(meta) => Ok(Some(issue(Some(meta.size)))),
                    Err(object_store::Error::NotFound { .. }) => Ok(Some(issue(None))),
                    Err(e) => Err(CheckpointError::store("looking for segment", &location, e)),
                }
            })
            .buffer_unordered(CONCURRENCY);
        let mut segments: Vec<SegmentIssue> = heads
            .try_filter_map(|i| async move { Ok(i) })
            .try_collect()
            .await?;
        if segments.is_empty() {
            return Ok(());
        }
        segments.sort_by(|a, b| a.path.cmp(&b.path));
        Err(CheckpointError::MissingSegments {
            manifest: self.manifest_location(manifest.epoch).to_string(),
            segments,
        })
    }

    /// The manifest to recover from: the newest one that reads back intact, that `expected`
    /// can restore from ([`ExpectedCheckpoint::validate_restore`]: the same plan, or the same
    /// job's logic at another parallelism) and whose segments all exist with their sizes
    /// ([`CheckpointStore::restorable`]). Candidates are the
    /// [published epochs](CheckpointStore::published_epochs); a manifest object that is damaged
    /// or gone is replaced by its copy in the epoch log when that is intact
    /// ([`LatestDurable::manifest_damage`] says so). A newer epoch that is corrupt (both
    /// copies), invalid or incomplete is passed over and reported in
    /// [`LatestDurable::skipped`] with the reason and what the epoch log says about it.
    ///
    /// # Errors
    /// When the store fails (a transient failure must not silently pick an older epoch);
    /// [`CheckpointError::Invalid`] when the newest readable manifest belongs to another job,
    /// pipeline, job logic or state format, and [`CheckpointError::FormatVersion`] when
    /// it was written by a release with another manifest format: recovery must be refused
    /// then, not fall back. A corrupt epoch log record fails the call when there is
    /// something to report about it.
    pub async fn latest_durable(
        &self,
        expected: &ExpectedCheckpoint,
    ) -> CheckpointResult<LatestDurable> {
        let mut skipped = Vec::new();
        let mut chosen = None;
        let mut manifest_damage = None;
        for epoch in self.published_epochs().await?.into_iter().rev() {
            match self.restore_point(epoch, expected).await {
                Ok(point) => {
                    chosen = Some(point.manifest);
                    manifest_damage = point.manifest_damage;
                    break;
                }
                Err(reason) if reason.is_unusable_manifest() => skipped.push(SkippedManifest {
                    epoch,
                    path: self.manifest_location(epoch).to_string(),
                    reason,
                    log_state: None,
                }),
                Err(e) => return Err(e),
            }
        }
        if !skipped.is_empty() {
            let log = self.epoch_log().read().await?;
            for s in &mut skipped {
                s.log_state = log.state_of(s.epoch);
            }
        }
        Ok(LatestDurable {
            manifest: chosen,
            manifest_damage,
            skipped,
        })
    }

    /// The manifest of `epoch` if `expected` can restore from it: it reads back intact
    /// ([`CheckpointStore::read_manifest`]), passes [`ExpectedCheckpoint::validate_restore`]
    /// (the same plan, or the same job's logic at another parallelism), and all its segments
    /// exist with their sizes ([`CheckpointStore::verify_segments`]). What restoring a chosen
    /// epoch (a savepoint, say) checks.
    ///
    /// # Errors
    /// Those of the three calls, each naming the manifest.
    pub async fn restorable(
        &self,
        epoch: Epoch,
        expected: &ExpectedCheckpoint,
    ) -> CheckpointResult<EpochManifest> {
        Ok(self.restore_point(epoch, expected).await?.manifest)
    }

    /// As [`CheckpointStore::restorable`], saying whether the manifest object was damaged or
    /// gone and its copy in the epoch log was used
    /// ([`CheckpointStore::read_manifest_or_copy`]).
    ///
    /// # Errors
    /// As [`CheckpointStore::restorable`].
    pub async fn restore_point(
        &self,
        epoch: Epoch,
        expected: &ExpectedCheckpoint,
    ) -> CheckpointResult<RestorePoint> {
        let (manifest, manifest_damage) = self.read_manifest_or_copy(epoch).await?;
        expected.validate_restore(&manifest, self.manifest_location(epoch).as_ref())?;
        self.verify_segments(&manifest).await?;
        Ok(RestorePoint {
            manifest,
            manifest_damage,
        })
    }

    /// The newest epoch whose manifest is a savepoint named `name`, or `None`. A damaged
    /// manifest is read from its copy in the epoch log
    /// ([`CheckpointStore::read_manifest_or_copy`]); manifests that cannot be read either way
    /// (damaged, another format) are passed over: their names are unknown. Reads the
    /// [published epochs](CheckpointStore::published_epochs) newest first until one matches.
    ///
    /// # Errors
    /// [`CheckpointError::ObjectStore`] when the store fails.
    pub async fn find_savepoint(&self, name: &str) -> CheckpointResult<Option<Epoch>> {
        for epoch in self.published_epochs().await?.into_iter().rev() {
            match self.read_manifest_or_copy(epoch).await {
                Ok((m, _)) => {
                    if matches!(&m.kind, EpochKind::Savepoint { name: Some(n) } if n == name) {
                        return Ok(Some(epoch));
                    }
                }
                Err(e)
                    if e.is_unusable_manifest()
                        || matches!(e, CheckpointError::FormatVersion { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(None)
    }

    pub(crate) async fn get(
        &self,
        location: &ObjectPath,
        context: &str,
    ) -> CheckpointResult<Vec<u8>> {
        let result = async { self.store.get(location).await?.bytes().await }.await;
        result
            .map(|b| b.to_vec())
            .map_err(|e| CheckpointError::store(context, location, e))
    }
}

/// The top-level fields whose values differ between two manifests' JSON.
fn differing_fields(a: &[u8], b: &[u8]) -> Vec<String> {
    let parse = |bytes: &[u8]| serde_json::from_slice::<serde_json::Value>(bytes).ok();
    match (parse(a), parse(b)) {
        (Some(serde_json::Value::Object(a)), Some(serde_json::Value::Object(b))) => {
            let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
            keys.sort();
            keys.dedup();
            keys.into_iter()
                .filter(|k| a.get(*k) != b.get(*k))
                .map(|k| format!("`{k}`"))
                .collect()
        }
        _ => vec!["(the stored manifest is not JSON)".to_owned()],
    }
}
