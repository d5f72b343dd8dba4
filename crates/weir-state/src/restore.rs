//! Restore: segments back into a redb backend, byte for byte, with checksums verified and
//! schema versions checked.

use crate::backend::StateBackend;
use crate::error::{StateError, StateResult};
use crate::segment::{DecodedSegment, SegmentDescriptor, check_disjoint, decode_segment};
use crate::snapshot::SegmentStore;
use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use object_store::ObjectStoreExt;
use std::collections::{BTreeMap, HashMap};
use weir_api::{JobId, OperatorId, StateShardId, StateSpec};
use weir_plan::sha256_hex;

/// Segments fetched and decoded ahead of the one being loaded into redb.
const PREFETCH: usize = 2;

/// How a restore treats the descriptors of the restoring operators.
///
/// For every `(operator, spec)` given with [`expect_state`](Self::expect_state), segments of
/// that state must have the same schema version, or a migration from their version must be
/// registered on the target backend ([`StateBackend::register_migration`]); otherwise the
/// restore is refused before anything is downloaded. After loading, the spec is registered,
/// which runs the migration (part of the one migration mechanism of the backend).
#[derive(Debug, Clone, Default)]
pub struct RestoreOptions {
    expected: HashMap<(OperatorId, String), StateSpec>,
    /// Operators whose segments load under another id, old -> new.
    renamed: HashMap<OperatorId, OperatorId>,
}

impl RestoreOptions {
    /// Options with no expected descriptors: states come back with their stored specs.
    pub fn new() -> Self {
        Self::default()
    }

    /// Declares the descriptor the restoring `operator` will use for `spec.name`.
    pub fn expect_state(mut self, operator: &OperatorId, spec: StateSpec) -> Self {
        self.expected
            .insert((operator.clone(), spec.name.clone()), spec);
        self
    }

    /// Loads the segments of operator `from` as the state of operator `to` (a job that
    /// renamed the operator restoring a checkpoint of its older version).
    pub fn rename(mut self, from: &OperatorId, to: &OperatorId) -> Self {
        self.renamed.insert(from.clone(), to.clone());
        self
    }

    fn expected(&self, operator: &OperatorId, state: &str) -> Option<&StateSpec> {
        self.expected.get(&(operator.clone(), state.to_owned()))
    }
}

/// What a restore loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RestoreReport {
    /// Segments read.
    pub segments: u64,
    /// Entries written into the backend.
    pub entries: u64,
    /// Segment bytes read from the object store.
    pub bytes: u64,
}

impl SegmentStore {
    /// Restores `segments` into `backend`, which should be fresh: each segment replaces the
    /// committed entries of its (job, operator, shard, state) and registers its stored spec, so
    /// keys, payloads, TTL deadlines (absolute) and size accounting come back exactly. Staged
    /// mutations of the backend are not touched.
    ///
    /// # Errors
    ///
    /// Before any download: [`StateError::SchemaVersion`] when a segment's schema version
    /// differs from the one `options` expects and no migration is registered,
    /// [`StateError::Segment`] for an image segment (of an in-memory operator: see
    /// [`read_image`](Self::read_image)), when two descriptors name the same (operator, shard,
    /// state) or one operator's segments disagree on `stateShardCount`. While loading:
    /// [`StateError::Checksum`] naming the path and both sums, [`StateError::ObjectStore`],
    /// [`StateError::Segment`] for an unreadable file or one that contradicts its descriptor,
    /// [`StateError::FormatVersion`], [`StateError::KindMismatch`], [`StateError::Storage`],
    /// [`StateError::Migration`]. A failed restore leaves the backend partly loaded: discard it.
    pub async fn restore(
        &self,
        backend: &StateBackend,
        segments: &[SegmentDescriptor],
        options: &RestoreOptions,
    ) -> StateResult<RestoreReport> {
        refuse_images(segments)?;
        check_segments(backend, segments, options)?;
        let mut report = RestoreReport::default();
        let mut reregister = Registrations::default();
        // Owned descriptors: a closure over borrowed ones makes the future's `Send` depend on
        // a higher-ranked lifetime, which callers in spawned tasks cannot prove.
        let mut decoded = futures::stream::iter(segments.to_vec())
            .map(|d| async move {
                let target = options.renamed.get(&d.operator).cloned();
                self.fetch_decoded(&d, target).await
            })
            .buffered(PREFETCH);
        while let Some((segment, len)) = decoded.try_next().await? {
            let DecodedSegment {
                job,
                operator,
                shard,
                spec,
                entries,
            } = segment;
            report.segments += 1;
            report.bytes += len;
            report.entries += entries.len() as u64;
            let previous = load_entries(backend, &job, &operator, shard, &spec, entries).await?;
            reregister.note(&job, &operator, &spec, previous, options);
        }
        reregister.apply(backend).await?;
        Ok(report)
    }

    /// Downloads a segment and checks its SHA-256 against the descriptor.
    ///
    /// # Errors
    ///
    /// [`StateError::ObjectStore`] when the download fails; [`StateError::Checksum`] on a
    /// mismatch.
    pub async fn fetch_verified(&self, descriptor: &SegmentDescriptor) -> StateResult<Bytes> {
        let location = self.location(&descriptor.path)?;
        let store_error = |source| StateError::ObjectStore {
            context: "reading segment".to_owned(),
            path: location.to_string(),
            source: Box::new(source),
        };
        let bytes = self
            .object_store()
            .get(&location)
            .await
            .map_err(store_error)?
            .bytes()
            .await
            .map_err(store_error)?;
        let actual = sha256_hex(&bytes);
        if actual != descriptor.sha256 {
            return Err(StateError::Checksum {
                path: descriptor.path.clone(),
                expected: descriptor.sha256.clone(),
                actual,
            });
        }
        Ok(bytes)
    }

    /// Fetches, verifies and decodes one segment (decoding on a blocking thread), its entries
    /// keyed for operator `target` when given (else for the operator that wrote them); returns
    /// it with the file size.
    pub(crate) async fn fetch_decoded(
        &self,
        descriptor: &SegmentDescriptor,
        target: Option<OperatorId>,
    ) -> StateResult<(DecodedSegment, u64)> {
        let bytes = self.fetch_verified(descriptor).await?;
        let len = bytes.len() as u64;
        let owned = descriptor.clone();
        let segment =
            tokio::task::spawn_blocking(move || decode_segment(&owned, bytes, target.as_ref()))
                .await
                .map_err(|e| background("decoding a state segment", e))??;
        Ok((segment, len))
    }
}

pub(crate) fn background(context: &str, e: tokio::task::JoinError) -> StateError {
    StateError::Background {
        context: context.to_owned(),
        message: e.to_string(),
    }
}

/// Refuses image segments: they hold the rows of an in-memory operator, which get back to the
/// operator ([`SegmentStore::read_image`]), not into redb.
pub(crate) fn refuse_images(segments: &[SegmentDescriptor]) -> StateResult<()> {
    match segments.iter().find(|d| d.is_image()) {
        Some(d) => Err(StateError::Segment {
            path: d.path.clone(),
            message: format!(
                "an image segment of an in-memory operator (shards {}); it is restored into the \
                 operator, not into keyed state",
                d.shards_shown()
            ),
        }),
        None => Ok(()),
    }
}

/// Refuses, before any download, empty shard ranges, segments of one (operator, state) that
/// cover a common shard, mixed shard counts and schema versions that differ from the expected
/// ones without a registered migration.
pub(crate) fn check_segments(
    backend: &StateBackend,
    segments: &[SegmentDescriptor],
    options: &RestoreOptions,
) -> StateResult<()> {
    check_disjoint(segments)?;
    let mut counts: HashMap<&OperatorId, u32> = HashMap::new();
    for d in segments {
        let count = *counts.entry(&d.operator).or_insert(d.state_shard_count);
        if count != d.state_shard_count {
            return Err(StateError::Segment {
                path: d.path.clone(),
                message: format!(
                    "written with stateShardCount {}, other segments of operator `{}` with {count}",
                    d.state_shard_count, d.operator
                ),
            });
        }
        if let Some(expected) = options.expected(&d.operator, &d.state)
            && expected.schema_version != d.schema_version
            && !backend.has_migration(d.operator.as_str(), &d.state, d.schema_version)
        {
            return Err(StateError::SchemaVersion {
                operator: d.operator.to_string(),
                state: d.state.clone(),
                stored: d.schema_version,
                requested: expected.schema_version,
            });
        }
    }
    Ok(())
}

/// Loads entries of one (job, operator, shard, state) on a blocking thread.
pub(crate) async fn load_entries(
    backend: &StateBackend,
    job: &JobId,
    operator: &OperatorId,
    shard: StateShardId,
    spec: &StateSpec,
    entries: Vec<(Vec<u8>, Vec<u8>)>,
) -> StateResult<Option<StateSpec>> {
    let (backend, job, operator, spec) =
        (backend.clone(), job.clone(), operator.clone(), spec.clone());
    tokio::task::spawn_blocking(move || {
        backend.load_state_shard(job.as_str(), operator.as_str(), shard, &spec, &entries)
    })
    .await
    .map_err(|e| background("loading a state segment", e))?
}

/// The specs to register after loading: the expected ones, or what the target held before.
#[derive(Debug, Default)]
pub(crate) struct Registrations {
    specs: BTreeMap<(JobId, OperatorId, String), StateSpec>,
}

impl Registrations {
    pub(crate) fn note(
        &mut self,
        job: &JobId,
        operator: &OperatorId,
        stored: &StateSpec,
        previous: Option<StateSpec>,
        options: &RestoreOptions,
    ) {
        let key = (job.clone(), operator.clone(), stored.name.clone());
        if let Some(expected) = options.expected(operator, &stored.name) {
            self.specs.insert(key, expected.clone());
        } else if let Some(previous) = previous {
            self.specs.entry(key).or_insert(previous);
        }
    }

    /// Registers every noted spec; a different schema version runs the registered migration.
    pub(crate) async fn apply(self, backend: &StateBackend) -> StateResult<()> {
        let backend = backend.clone();
        tokio::task::spawn_blocking(move || {
            for ((job, operator, _), spec) in self.specs {
                backend.register(job.as_str(), operator.as_str(), &spec)?;
            }
            Ok(())
        })
        .await
        .map_err(|e| background("registering restored states", e))?
    }
}
